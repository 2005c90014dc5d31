//! The tests' fake GitHub (tests/github_fake) holds to what GitHub publishes
//! about its REST API: representative runs of `gate check`, `gate comment`
//! and `gate baseline publish` against the fake, then every request gate sent
//! and every answer the fake gave is checked by scripts/github-openapi/check.mjs
//! against GitHub's OpenAPI description (npm @octokit/openapi, pinned):
//! method and path documented, path and query parameters documented and
//! valid, request body valid, status documented, answer valid against that
//! status's schema. And the checker bites: an undocumented request and a
//! wrong answer are each reported. The event payloads the tests write to
//! GITHUB_EVENT_PATH (github_fake::event) are valid against GitHub's webhooks
//! description (npm @octokit/openapi-webhooks, pinned).
//!
//! Needs Node.js 20+ and npm; without them, or when the install fails, each
//! test prints `skipped: ...` and passes. The packages (pinned by
//! scripts/github-openapi/package-lock.json) are installed once into
//! target/github-openapi-node with `npm ci`, again whenever the lock changes.
//! A whole test run can be checked too: `GATE_FAKE_GITHUB_LOG=FILE` makes
//! every fake append its exchanges to FILE (`.ci/run` does so).

use crate::common;

use crate::github_fake;

use crate::common::output_text;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use crate::github_fake::{Fake, FaultKind, REPO, TOKEN};
use serde_json::{json, Value};

const MLP: &str = "examples/mlp.yaml";

fn root() -> PathBuf {
    PathBuf::from(env!("GATE_REPO_ROOT"))
}

/// target/github-openapi-node with the checker, or why it cannot be had.
fn tool() -> Result<&'static Path, &'static str> {
    static DIR: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    DIR.get_or_init(|| common::node_tool("github-openapi", "the check against GitHub's OpenAPI description"))
        .as_ref()
        .map(PathBuf::as_path)
        .map_err(String::as_str)
}

/// Runs the checker on the fake's exchanges; `None` when it cannot run.
fn check(name: &str, exchanges: &str) -> Option<Output> {
    check_as("exchanges", name, exchanges)
}

/// Runs the checker in `mode` on `lines`; `None` when it cannot run.
fn check_as(mode: &str, name: &str, lines: &str) -> Option<Output> {
    let dir = match tool() {
        Ok(d) => d,
        Err(why) => {
            common::available(&format!("github_openapi {name}"), Some(why.to_string()));
            return None;
        }
    };
    let log = dir.join(format!("{name}.jsonl"));
    std::fs::write(&log, lines).unwrap();
    Some(
        Command::new("node")
            .arg(dir.join("check.mjs"))
            .arg(mode)
            .arg(&log)
            .output()
            .unwrap(),
    )
}

fn gate(fake: &Fake, event: Option<&Path>) -> Command {
    let mut c = common::gate();
    c.current_dir(root());
    for k in [
        "GITHUB_ACTIONS",
        "GITHUB_STEP_SUMMARY",
        "GITHUB_SHA",
        "GITHUB_EVENT_NAME",
        "NO_COLOR",
    ] {
        c.env_remove(k);
    }
    c.env("GATE_GITHUB_TIMEOUT_MS", "5000")
        .env("GATE_GITHUB_ATTEMPTS", "3")
        .env("GATE_GITHUB_BACKOFF_MS", "10")
        .env("GITHUB_API_URL", &fake.url)
        .env("GITHUB_TOKEN", TOKEN)
        .env("GITHUB_REPOSITORY", REPO)
        .env_remove("GITHUB_EVENT_PATH");
    if let Some(e) = event {
        c.env("GITHUB_EVENT_PATH", e);
    }
    c
}

fn sha(n: u32) -> String {
    format!("{n:040x}")
}

fn pr_event(dir: &Path, number: u64, base_sha: &str, head_sha: &str) -> PathBuf {
    let p = dir.join("event.json");
    let ev = github_fake::event(
        "pull-request-opened",
        json!({
            "number": number,
            "pull_request": {
                "number": number,
                "base": { "ref": "main", "sha": base_sha, "repo": { "full_name": REPO } },
                "head": { "ref": "topic", "sha": head_sha, "repo": { "full_name": REPO } },
            }
        }),
    );
    std::fs::write(&p, ev.to_string()).unwrap();
    p
}

/// Every GitHub route gate uses, through the fake: the baseline store
/// created, written (a 409 retried) and read back by an automatic baseline
/// (compare, commits, the store's tree, contents), then the PR comment created, listed past a
/// page, updated, and the acknowledgement label's events, labels and the
/// labeller's permission read.
#[test]
fn every_exchange_of_gate_with_the_fake_is_one_github_documents() {
    let fake = Fake::start();
    let tmp = tempfile::tempdir().unwrap();
    let seed = tmp.path().join("seed");
    let o = gate(&fake, None)
        .args(["check", "--budgets", MLP, "--baseline", "none", "--out"])
        .arg(&seed)
        .output()
        .unwrap();
    assert!(seed.join("report.json").exists(), "{}", output_text(&o));

    // The store: created, written, and written again over a concurrent update.
    let chain: Vec<String> = (0..6).map(|i| sha(0x100 + i)).collect();
    fake.add_chain(&chain);
    fake.state.lock().unwrap().merge_base = Some(chain[1].clone());
    for (i, at) in [&chain[3], &chain[3]].into_iter().enumerate() {
        if i == 1 {
            fake.fault(
                "PUT",
                "/contents/reports/",
                1,
                FaultKind::Status(409, "is at abc".into()),
            );
            let p = seed.join("report.json");
            let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
            v["wall_seconds"] = json!(99.0);
            std::fs::write(&p, v.to_string()).unwrap();
        }
        let o = gate(&fake, None)
            .args(["baseline", "publish", "--sha", at, "--from"])
            .arg(&seed)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{}", output_text(&o));
    }

    // A pull request: the baseline found by walking back from the merge base,
    // the comment created, then updated, among more than a page of others.
    let pr = 21;
    fake.state.lock().unwrap().pulls.insert(pr, sha(0xfeed));
    for i in 0..101 {
        fake.add_comment(pr, &format!("note {i}"), "someone");
    }
    fake.add_event(
        pr,
        "labeled",
        "gate:accept-regression",
        "octocat",
        "2026-12-01T10:00:00Z",
    );
    let ev = pr_event(tmp.path(), pr, &chain[0], &sha(0xfeed));
    let out = tmp.path().join("out");
    let o = gate(&fake, Some(&ev))
        .args(["check", "--budgets", MLP, "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(matches!(o.status.code(), Some(0 | 1)), "{}", output_text(&o));
    // A store branch with a `/` is listed through the contents API (the
    // trees API's path cannot name it), whose answer GitHub recorded.
    let o = gate(&fake, Some(&ev))
        .args([
            "check",
            "--budgets",
            MLP,
            "--baseline-branch",
            "gate/baselines",
            "--out",
        ])
        .arg(tmp.path().join("slashed"))
        .output()
        .unwrap();
    assert!(matches!(o.status.code(), Some(0 | 1)), "{}", output_text(&o));
    for _ in 0..2 {
        let o = gate(&fake, Some(&ev))
            .args(["comment", "--from"])
            .arg(&out)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{}", output_text(&o));
    }
    // A workflow_run reads the pull request itself.
    let run = tmp.path().join("run.json");
    std::fs::write(
        &run,
        github_fake::event(
            "workflow-run-completed",
            json!({ "workflow_run": { "head_sha": sha(0xfeed), "event": "pull_request",
                                      "head_branch": "feature", "head_repository": { "full_name": "fork/repo" } } }),
        )
        .to_string(),
    )
    .unwrap();
    let _ = gate(&fake, Some(&run))
        .env("GITHUB_EVENT_NAME", "workflow_run")
        .args(["comment", "--from"])
        .arg(&out)
        .output()
        .unwrap();

    let routes = |p: &str| fake.count("GET", p) + fake.count("POST", p) + fake.count("PUT", p) + fake.count("PATCH", p);
    for route in [
        "/git/refs",
        "/git/trees/",
        "/contents/reports",
        "/commits?",
        "/compare/",
        "/issues/21/comments",
        "/pulls/21",
    ] {
        assert!(routes(route) > 0, "the scenario never reached {route}");
    }
    let Some(o) = check("scenario", &fake.exchanges_jsonl()) else {
        return;
    };
    assert!(
        o.status.success(),
        "exchanges GitHub's description does not allow:\n{}",
        output_text(&o)
    );
    // Where GitHub's real answers were recorded (npm @octokit/fixtures),
    // the fake's have every field those have.
    let Some(o) = check_as("fixtures", "scenario-fixtures", &fake.exchanges_jsonl()) else {
        return;
    };
    let text = output_text(&o);
    assert!(
        o.status.success(),
        "answers lacking what GitHub really answered:\n{text}"
    );
    for route in [
        "PUT /repos/{owner}/{repo}/contents/{path} 201",
        "POST /repos/{owner}/{repo}/git/refs 201",
        "GET /repos/{owner}/{repo}/contents/{path} 200 list",
    ] {
        assert!(
            text.contains(route),
            "{route} was not compared with a recorded answer:\n{text}"
        );
    }
}

/// An answer that lacks a field GitHub's recorded answer has is reported,
/// with the recording it differs from.
#[test]
fn an_answer_poorer_than_githubs_recorded_one_is_reported() {
    let put = json!({ "content": { "name": "a.json", "path": "reports/a.json", "sha": "95b966ae1c166bd92f8ae7d1c313e738c731dfc3" },
                      "commit": { "sha": "7638417db6d59f3c431d3e1f261cc637155684cd" } });
    let log = format!(
        "{}\n",
        json!({ "method": "PUT", "path": "/repos/octo/repo/contents/reports/a.json", "request_body": "",
                "status": 201, "response_body": put.to_string(), "fault": false })
    );
    let Some(o) = check_as("fixtures", "poorer", &log) else {
        return;
    };
    assert_eq!(o.status.code(), Some(1), "{}", output_text(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("lacks") && text.contains("content.html_url") && text.contains("@octokit/fixtures create-file"),
        "{text}"
    );
}

/// The checker reports a request GitHub does not document, a query
/// parameter it does not take, and an answer whose shape or status GitHub
/// would not give; and passes a scripted outage as an answer.
#[test]
fn the_checker_bites() {
    let line = |method: &str, path: &str, body: &str, status: u16, answer: Value, fault: bool| {
        format!(
            "{}\n",
            json!({ "method": method, "path": path, "request_body": body, "status": status,
                    "response_body": answer.to_string(), "fault": fault })
        )
    };
    let log = [
        line("GET", "/repos/octo/repo/gate-only", "", 200, json!({}), false),
        line(
            "GET",
            "/repos/octo/repo/pulls/1?bogus=1",
            "",
            404,
            json!({"message": "Not Found"}),
            false,
        ),
        line(
            "POST",
            "/repos/octo/repo/issues/1/comments",
            r#"{"text":"x"}"#,
            201,
            json!({"id": 1}),
            false,
        ),
        line("GET", "/repos/octo/repo/compare/a...b", "", 418, json!({}), false),
        line(
            "GET",
            "/repos/octo/repo/pulls/1",
            "",
            502,
            json!({"message": "Bad gateway"}),
            true,
        ),
    ]
    .concat();
    let Some(o) = check("bites", &log) else { return };
    assert_eq!(o.status.code(), Some(1), "{}", output_text(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    for want in [
        "GET /repos/octo/repo/gate-only -> 200: no such operation",
        "query parameter bogus is not documented",
        "the request body does not match the description: / must have required property 'body'",
        "the answer does not match the description: / must have required property 'node_id'",
        "status 418 is not documented",
    ] {
        assert!(text.contains(want), "missing {want:?} in:\n{text}");
    }
    assert!(
        !text.contains("502"),
        "a scripted outage is no problem of the fake's:\n{text}"
    );
}

/// Every webhook payload the tests start from, and the pull request event
/// as the tests fill it, is one GitHub's webhooks description accepts; a push
/// without its `pusher` is not.
#[test]
fn every_event_payload_is_one_github_sends() {
    let tmp = tempfile::tempdir().unwrap();
    let hooks = [
        "pull-request-opened",
        "pull-request-synchronize",
        "pull-request-labeled",
        "push",
        "workflow-run-completed",
        "merge-group-checks-requested",
    ];
    let mut lines: Vec<String> = hooks
        .iter()
        .map(|h| json!({ "hook": h, "payload": github_fake::event(h, json!({})) }).to_string())
        .collect();
    let pr: Value =
        serde_json::from_str(&std::fs::read_to_string(pr_event(tmp.path(), 3, &sha(1), &sha(2))).unwrap()).unwrap();
    lines.push(json!({ "hook": "pull-request-opened", "payload": pr }).to_string());
    let Some(o) = check_as("event-log", "events", &(lines.join("\n") + "\n")) else {
        return;
    };
    assert!(
        o.status.success(),
        "payloads GitHub would not send:\n{}",
        output_text(&o)
    );

    let mut bad = github_fake::event("push", json!({}));
    bad.as_object_mut().unwrap().remove("pusher");
    let Some(o) = check_as(
        "event-log",
        "bad-event",
        &format!("{}\n", json!({ "hook": "push", "payload": bad })),
    ) else {
        return;
    };
    assert_eq!(o.status.code(), Some(1), "{}", output_text(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("not a valid push payload: / must have required property 'pusher'"),
        "{}",
        output_text(&o)
    );
}
