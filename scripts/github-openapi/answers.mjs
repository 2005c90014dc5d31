#!/usr/bin/env node
// Writes tests/github_fake/answers.json: one example answer per object the
// test fake serves, taken from GitHub's own REST description (npm
// @octokit/openapi, pinned in package-lock.json; its components/examples).
// The fake starts each answer from these and sets only the fields it models
// (ids, shas, bodies, logins), so what it leaves alone is what GitHub shows.
// check.mjs then holds every answer the fake gives to the schemas.
//
//   node answers.mjs OUT.json      (run from an `npm ci` of this folder)

import { writeFileSync } from "node:fs";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const doc = require("@octokit/openapi/generated/api.github.com.json");
const ex = (name) => structuredClone(doc.components.examples[name].value);
const answers = {
  "issue-comment": ex("issue-comment"),
  "labeled-issue-event": ex("issue-event-for-issue-items")[0],
  label: ex("label-items")[0],
  "repository-collaborator-permission": ex(
    "repository-collaborator-permission-response-if-user-has-admin-permissions",
  ),
  "pull-request": ex("pull-request"),
  "commit-comparison": ex("commit-comparison"),
  commit: ex("commit-items")[0],
  "content-file": ex("content-file-response-if-content-is-a-file"),
  "content-directory-entry": ex("content-file-response-if-content-is-a-directory")[0],
  "file-commit": ex("file-commit-example-for-creating-a-file"),
  "git-ref": ex("git-ref"),
  "git-tree": ex("git-tree"),
  "git-commit": ex("git-commit"),
  "check-run": ex("check-run-example-of-completed-conclusion"),
};
const file = process.argv[2];
if (!file) {
  console.error("usage: answers.mjs OUT.json");
  process.exit(2);
}
writeFileSync(file, JSON.stringify(answers, null, 1) + "\n");
