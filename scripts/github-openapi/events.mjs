#!/usr/bin/env node
// Writes tests/github_fake/events.json: for each webhook event the tests put
// in GITHUB_EVENT_PATH, the smallest payload GitHub's webhooks description
// (npm @octokit/openapi-webhooks, pinned in package-lock.json) accepts:
// every required property, nothing else; an optional-null value as an object
// where the schema allows one, so that a test can set a field inside it. The
// tests start from these (github_fake::event) and set what they model.
//
//   node events.mjs OUT.json      (run from an `npm ci` of this folder)

import { writeFileSync } from "node:fs";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const doc = require("@octokit/openapi-webhooks/generated/api.github.com.json");

const at = (ref) => ref.split("/").slice(1).reduce((o, k) => o[k], doc);

// An instance of `schema` with only its required parts.
function build(schema, depth = 0) {
  if (depth > 40) throw new Error("schema too deep");
  if (schema.$ref) return build(at(schema.$ref), depth + 1);
  if (schema.allOf) return Object.assign({}, ...schema.allOf.map((s) => build(s, depth + 1)));
  const alts = schema.oneOf || schema.anyOf;
  if (alts) {
    // An object alternative first: a test may set fields inside it.
    const pick = alts.find((s) => kind(s) === "object") || alts.find((s) => kind(s) !== "null") || alts[0];
    return build(pick, depth + 1);
  }
  if (schema.enum) return schema.enum.find((v) => v !== null) ?? null;
  if (schema.const !== undefined) return schema.const;
  const types = [].concat(schema.type || (schema.properties ? "object" : "string"));
  const type = types.find((t) => t === "object") || types.find((t) => t !== "null") || "null";
  switch (type) {
    case "object": {
      const out = {};
      for (const name of schema.required || []) out[name] = build((schema.properties || {})[name] || {}, depth + 1);
      return out;
    }
    case "array":
      return [];
    case "integer":
    case "number":
      return schema.minimum ?? 1;
    case "boolean":
      return false;
    case "null":
      return null;
    default:
      if (schema.format === "date-time") return "2026-01-01T00:00:00Z";
      if (schema.format === "uri" || schema.format === "uri-template") return "https://github.com/octo/repo";
      if (schema.format === "email") return "octocat@github.com";
      return "x";
  }
}

function kind(s) {
  if (s.$ref) return kind(at(s.$ref));
  if (s.properties || s.allOf) return "object";
  return [].concat(s.type || "string").find((t) => t !== "null") || "null";
}

const hooks = ["pull-request-opened", "pull-request-synchronize", "pull-request-labeled", "push", "workflow-run-completed", "merge-group-checks-requested"];
const out = {};
for (const h of hooks) out[h] = build(doc.webhooks[h].post.requestBody.content["application/json"].schema);
const file = process.argv[2];
if (!file) {
  console.error("usage: events.mjs OUT.json");
  process.exit(2);
}
writeFileSync(file, JSON.stringify(out, null, 1) + "\n");
