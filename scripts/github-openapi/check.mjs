#!/usr/bin/env node
// Holds the tests' model of GitHub to what GitHub publishes about itself.
//
//   node check.mjs exchanges LOG.jsonl   every request the test fake saw and
//                                        every answer it gave (one JSON
//                                        object a line, written by
//                                        tests/github_fake when asked)
//   node check.mjs events FILE.json...   event payloads as GITHUB_EVENT_PATH
//                                        holds them; the event's name is the
//                                        file's `"_event"` key or its name's
//                                        first word (pull_request.json)
//   node check.mjs event-log LOG.jsonl   payloads as tests/github_fake's
//                                        `event` logs them, with their
//                                        webhook's name
//
// Against: GitHub's REST description, npm @octokit/openapi (its
// generated/api.github.com.json, OpenAPI 3.0.3), and its webhooks
// description, npm @octokit/openapi-webhooks (OpenAPI 3.1), both pinned in
// package-lock.json. An exchange passes when its method and path match a
// documented operation, its path and query parameters are documented and
// valid, its request body is valid against the operation's requestBody, its
// status is one the operation documents and its JSON body is valid against
// that response's schema. Answers the test scripted on purpose (`fault`:
// outages, echoing proxies) are checked as requests only: GitHub documents
// no 5xx and no proxy.
//
// Exit 0: all pass. Exit 1: each problem printed on stdout, one a line.
// Exit 2: bad usage or an unreadable file. A count goes to stderr.

import { readdirSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { basename } from "node:path";

const require = createRequire(import.meta.url);
const Ajv = require("ajv");
const addFormats = require("ajv-formats");

function die(msg) {
  console.error(msg);
  process.exit(2);
}

// OpenAPI 3.0's `nullable: true` as JSON Schema says it: null joins the
// types (and the enum, which otherwise would still refuse it); where there is
// no `type` (an allOf/oneOf that may be null), the schema becomes "that, or
// null". Ajv reads `nullable` only beside a `type`, hence this pass.
function denull(node) {
  if (Array.isArray(node)) return node.map(denull);
  if (!node || typeof node !== "object") return node;
  const out = {};
  for (const [k, v] of Object.entries(node)) out[k] = k === "example" || k === "examples" ? v : denull(v);
  if (out.nullable !== true) return out;
  delete out.nullable;
  if (typeof out.type === "string") {
    out.type = [out.type, "null"];
    if (Array.isArray(out.enum) && !out.enum.includes(null)) out.enum = [...out.enum, null];
    return out;
  }
  return { anyOf: [out, { type: "null" }] };
}

function ajvFor(doc, id) {
  // strict: false, because the descriptions carry OpenAPI's own keywords
  // (example, discriminator, x-github...).
  const ajv = new Ajv({ strict: false, allErrors: true, validateSchema: false });
  addFormats(ajv);
  ajv.addSchema(doc, id);
  return ajv;
}

const pointer = (parts) => parts.map((p) => String(p).replaceAll("~", "~0").replaceAll("/", "~1")).join("/");

function errorsText(errors) {
  return (errors || [])
    .slice(0, 6)
    .map((e) => `${e.instancePath || "/"} ${e.message}`)
    .join("; ");
}

// ---------------------------------------------------------------- REST

function restChecker() {
  const doc = denull(require("@octokit/openapi/generated/api.github.com.json"));
  const ajv = ajvFor(doc, "gh");
  const cache = new Map();
  const validator = (parts) => {
    const key = pointer(parts);
    if (!cache.has(key)) cache.set(key, ajv.compile({ $ref: `gh#/${key}` }));
    return cache.get(key);
  };
  // A template's segments; its last parameter may hold slashes when it is a
  // file path or a git ref (`contents/{path}`, `git/ref/{ref}`), as GitHub
  // documents them.
  const routes = [];
  for (const [template, item] of Object.entries(doc.paths)) {
    const segs = template.split("/").slice(1);
    for (const method of Object.keys(item)) {
      if (!["get", "post", "put", "patch", "delete"].includes(method)) continue;
      routes.push({ template, method: method.toUpperCase(), segs, op: item[method], shared: item.parameters || [] });
    }
  }
  const resolve = (p) => (p && p.$ref ? p.$ref.split("/").slice(1).reduce((o, k) => o[k], doc) : p);
  function match(method, path) {
    const segs = path.split("/").slice(1).map(decodeURIComponent);
    let best = null;
    for (const r of routes) {
      if (r.method !== method) continue;
      const params = {};
      let literal = 0;
      let ok = true;
      for (let i = 0; i < r.segs.length; i++) {
        const t = r.segs[i];
        const p = /^\{(.+)\}$/.exec(t);
        if (i >= segs.length) {
          ok = false;
          break;
        }
        if (!p) {
          if (t !== segs[i]) {
            ok = false;
            break;
          }
          literal++;
        } else if (i === r.segs.length - 1 && (p[1] === "path" || p[1] === "ref")) {
          params[p[1]] = segs.slice(i).join("/");
        } else {
          params[p[1]] = segs[i];
        }
      }
      if (ok && r.segs.length > segs.length) ok = false;
      if (ok && r.segs.length < segs.length && !/^\{(path|ref)\}$/.test(r.segs.at(-1))) ok = false;
      if (ok && (!best || literal > best.literal)) best = { route: r, params, literal };
    }
    return best;
  }
  const coerce = (schema, v) => {
    const t = schema && schema.type;
    if ((t === "integer" || t === "number") && /^-?\d+(\.\d+)?$/.test(v)) return Number(v);
    if (t === "boolean" && (v === "true" || v === "false")) return v === "true";
    return v;
  };

  restChecker.match = match;
  return function check(x) {
    const problems = [];
    const say = (m) => problems.push(`${x.method} ${x.path} -> ${x.status}: ${m}`);
    const [rawPath, rawQuery = ""] = x.path.split("?");
    // GitHub's `Link` headers name a repository by its id,
    // /repositories/{repository_id}/..., a form the description does not
    // list but api.github.com serves for every /repos/{owner}/{repo}/ route
    // (docs.github.com, "Using pagination in the REST API", shows such
    // links). It is checked as the /repos/ route it stands for.
    const path = rawPath.replace(/^\/repositories\/\d+\//, "/repos/owner/repo/");
    const m = match(x.method, path);
    if (!m) {
      say("no such operation in GitHub's REST description");
      return problems;
    }
    const { route, params } = m;
    const declared = [...route.shared, ...(route.op.parameters || [])].map(resolve);
    const where = ["paths", route.template, route.method.toLowerCase()];
    for (const [name, value] of Object.entries(params)) {
      const d = declared.find((p) => p.in === "path" && p.name === name);
      if (!d) say(`path parameter {${name}} is not documented`);
      else if (d.schema && !ajv.validate(d.schema, coerce(d.schema, value)))
        say(`path parameter ${name}=${value}: ${errorsText(ajv.errors)}`);
    }
    const query = new URLSearchParams(rawQuery);
    for (const [name, value] of query) {
      const d = declared.find((p) => p.in === "query" && p.name === name);
      if (!d) say(`query parameter ${name} is not documented for ${route.method} ${route.template}`);
      else if (d.schema && !ajv.validate(d.schema, coerce(d.schema, value)))
        say(`query parameter ${name}=${value}: ${errorsText(ajv.errors)}`);
    }
    for (const d of declared) {
      if (d.in === "query" && d.required && !query.has(d.name)) say(`required query parameter ${d.name} is missing`);
    }
    const rb = route.op.requestBody;
    if (x.request_body) {
      const schema = rb && rb.content && rb.content["application/json"];
      if (!schema) say(`a request body, but ${route.method} ${route.template} takes none`);
      else {
        let body;
        try {
          body = JSON.parse(x.request_body);
        } catch (e) {
          say(`the request body is not JSON: ${e.message}`);
        }
        if (body !== undefined) {
          const v = validator([...where, "requestBody", "content", "application/json", "schema"]);
          if (!v(body)) say(`the request body does not match the description: ${errorsText(v.errors)}`);
        }
      }
    } else if (rb && rb.required) {
      say("the request body is missing, and the description requires one");
    }
    if (x.fault) return problems;
    const status = String(x.status);
    const responses = route.op.responses || {};
    // 401 "Bad credentials" is GitHub's answer to a bad token on every
    // route, documented once for all (docs.github.com, "Troubleshooting the
    // REST API": "401 Unauthorized ... Bad credentials") rather than per
    // operation; its body is a basic-error.
    if (status === "401" && !responses[status]) responses[status] = { $ref: "#/components/responses/requires_authentication" };
    const res = responses[status] ? status : responses.default ? "default" : null;
    if (!res) {
      say(`status ${status} is not documented (documented: ${Object.keys(responses).join(", ")})`);
      return problems;
    }
    const content = resolve(responses[res]).content;
    const json = content && content["application/json"];
    if (!json || !json.schema) {
      if (x.response_body && x.response_body.trim()) say(`a body, but status ${status} documents none`);
      return problems;
    }
    let body;
    try {
      body = JSON.parse(x.response_body);
    } catch (e) {
      say(`the answer is not JSON: ${e.message}`);
      return problems;
    }
    const ptr = responses[res].$ref
      ? [...responses[res].$ref.split("/").slice(1), "content", "application/json", "schema"]
      : [...where, "responses", res, "content", "application/json", "schema"];
    const v = validator(ptr);
    if (!v(body)) say(`the answer does not match the description: ${errorsText(v.errors)}`);
    return problems;
  };
}

// -------------------------------------------------------------- fixtures

// Key paths of a JSON value: `commit.author.name`, an array's items as
// `parents[]` (its first item standing for all).
function keyPaths(v, prefix = "", out = new Set()) {
  if (Array.isArray(v)) {
    if (v.length) keyPaths(v[0], `${prefix}[]`, out);
  } else if (v && typeof v === "object") {
    for (const [k, x] of Object.entries(v)) {
      const p = prefix ? `${prefix}.${k}` : k;
      out.add(p);
      keyPaths(x, p, out);
    }
  }
  return out;
}

// Answers GitHub really gave, recorded by npm @octokit/fixtures (pinned):
// for every route the fake serves that a recording covers, the fake's
// answer must have every field the recorded one has and GitHub's current
// description still lists (a field GitHub has dropped since the recording
// is left out: the description's own example for the route lacks it).
function fixturesChecker() {
  const base = require.resolve("@octokit/fixtures/package.json").replace(/package\.json$/, "");
  const dir = `${base}scenarios/api.github.com`;
  const match = restChecker.match;
  const recorded = new Map();
  for (const scenario of readdirSync(dir)) {
    let entries;
    try {
      entries = JSON.parse(readFileSync(`${dir}/${scenario}/normalized-fixture.json`, "utf8"));
    } catch {
      continue;
    }
    for (const e of entries) {
      if (!e.response || typeof e.response !== "object" || e.status >= 300) continue;
      const method = e.method.toUpperCase();
      const path = e.path.split("?")[0].replace(/^\/repositories\/\d+\//, "/repos/owner/repo/");
      const m = match(method, path);
      if (!m) continue;
      // One route may answer a file (an object) or a folder (a list):
      // each is compared with an answer of its own kind.
      const key = `${method} ${m.route.template} ${e.status} ${Array.isArray(e.response) ? "list" : "object"}`;
      if (!recorded.has(key)) recorded.set(key, { scenario, response: e.response });
    }
  }
  const examples = examplePaths();
  const compared = new Set();
  const check = (x) => {
    if (x.fault) return [];
    const path = x.path.split("?")[0].replace(/^\/repositories\/\d+\//, "/repos/owner/repo/");
    const m = match(x.method, path);
    if (!m) return [];
    let body;
    try {
      body = JSON.parse(x.response_body);
    } catch {
      return [];
    }
    const key = `${x.method} ${m.route.template} ${x.status} ${Array.isArray(body) ? "list" : "object"}`;
    const rec = recorded.get(key);
    if (!rec) return [];
    compared.add(key);
    const have = keyPaths(body);
    const current = examples(m.route);
    const missing = [...keyPaths(rec.response)].filter((k) => !have.has(k) && (!current || current.has(k)));
    return missing.length
      ? [`${key}: the fake's answer lacks ${missing.join(", ")}, which GitHub's recorded answer has (@octokit/fixtures ${rec.scenario})`]
      : [];
  };
  check.compared = compared;
  check.recorded = recorded;
  return check;
}

// The key paths of the description's own example answers for a route
// (every example of its 2xx JSON answers), or null when it has none.
function examplePaths() {
  const doc = require("@octokit/openapi/generated/api.github.com.json");
  const resolve = (p) => (p && p.$ref ? p.$ref.split("/").slice(1).reduce((o, k) => o[k], doc) : p);
  return (route) => {
    const out = new Set();
    let any = false;
    for (const [status, r] of Object.entries(route.op.responses || {})) {
      if (!status.startsWith("2")) continue;
      const json = resolve(r).content && resolve(r).content["application/json"];
      for (const ex of Object.values((json && json.examples) || {})) {
        const v = resolve(ex).value;
        if (v !== undefined) {
          any = true;
          keyPaths(v, "", out);
        }
      }
    }
    return any ? out : null;
  };
}

// ---------------------------------------------------------------- events

function eventChecker() {
  const doc = denull(require("@octokit/openapi-webhooks/generated/api.github.com.json"));
  const ajv = ajvFor(doc, "wh");
  const cache = new Map();
  // `source` is a file, or a payload with the webhook's name (`known`).
  return function check(source, known) {
    let payload = source;
    let label = known;
    if (typeof source === "string") {
      label = source;
      try {
        payload = JSON.parse(readFileSync(source, "utf8"));
      } catch (e) {
        die(`${source}: cannot read: ${e.message}`);
      }
    }
    let key = known;
    if (!key) {
      const event = payload._event || basename(source).split(/[.\-]/)[0];
      delete payload._event;
      // The description names a webhook `<event>-<action>`
      // (pull-request-opened) or, for an event without actions, `<event>`.
      const name = [event, payload.action].filter(Boolean).join("-").replaceAll("_", "-");
      key = doc.webhooks[name] ? name : event.replaceAll("_", "-");
    }
    if (!doc.webhooks[key]) return [`${label}: no webhook ${key} in GitHub's webhooks description`];
    if (!cache.has(key))
      cache.set(
        key,
        ajv.compile({ $ref: `wh#/${pointer(["webhooks", key, "post", "requestBody", "content", "application/json", "schema"])}` }),
      );
    const v = cache.get(key);
    return v(payload) ? [] : [`${label}: not a valid ${key} payload: ${errorsText(v.errors)}`];
  };
}

// ---------------------------------------------------------------- main

const [mode, ...args] = process.argv.slice(2);
let problems = [];
let count = 0;

// Runs `check` on each JSON line of `file`, each problem kept once, in order.
function eachLine(file, check) {
  let text;
  try {
    text = readFileSync(file, "utf8");
  } catch (e) {
    die(`${file}: cannot read: ${e.message}`);
  }
  const seen = new Set();
  for (const line of text.split("\n")) {
    if (!line.trim()) continue;
    count++;
    for (const p of check(JSON.parse(line))) {
      if (!seen.has(p)) problems.push(p);
      seen.add(p);
    }
  }
}

if (mode === "exchanges" && args.length === 1) {
  eachLine(args[0], restChecker());
} else if (mode === "fixtures" && args.length === 1) {
  restChecker(); // builds the route matcher
  const check = fixturesChecker();
  eachLine(args[0], check);
  console.error(`compared with GitHub's recorded answers: ${[...check.compared].sort().join("; ") || "none"}`);
} else if (mode === "event-log" && args.length === 1) {
  // Lines of {"hook": "pull-request-opened", "payload": {...}}, as
  // tests/github_fake's `event` appends them.
  const check = eventChecker();
  eachLine(args[0], ({ hook, payload }) => check(payload, hook));
} else if (mode === "events" && args.length > 0) {
  const check = eventChecker();
  for (const f of args) {
    count++;
    problems.push(...check(f));
  }
} else {
  die("usage: check.mjs exchanges LOG.jsonl | check.mjs fixtures LOG.jsonl | check.mjs events FILE.json... | check.mjs event-log LOG.jsonl");
}
for (const p of problems) console.log(p);
console.error(`${count} ${mode} checked, ${problems.length} problem(s)`);
process.exit(problems.length ? 1 : 0);
