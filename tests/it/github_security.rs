//! The GitHub integration under hostile input: requests go only to
//! GITHUB_API_URL and only for GITHUB_REPOSITORY whatever the event payload
//! says; the token never shows, even when the server echoes it back; names
//! from the spec reach markdown and workflow commands escaped.

use crate::common;

use crate::github_fake;

use crate::common::output_text;
use std::path::Path;
use std::process::Command;

use crate::github_fake::{assert_no_token, Fake, FaultKind, REPO, REPO_ID, TOKEN};
use serde_json::json;

fn gate(fake: &Fake, event: &Path) -> Command {
    let mut c = common::gate();
    c.current_dir(env!("GATE_REPO_ROOT"));
    for k in [
        "GITHUB_ACTIONS",
        "GITHUB_STEP_SUMMARY",
        "GITHUB_SHA",
        "GITHUB_EVENT_NAME",
        "GATE_INJECT_FAULT",
    ] {
        c.env_remove(k);
    }
    c.env("GATE_GITHUB_TIMEOUT_MS", "5000")
        .env("GATE_GITHUB_ATTEMPTS", "2")
        .env("GATE_GITHUB_BACKOFF_MS", "10")
        .env("RUST_BACKTRACE", "1")
        .env("GITHUB_API_URL", &fake.url)
        .env("GITHUB_TOKEN", TOKEN)
        .env("GITHUB_REPOSITORY", REPO)
        .env("GITHUB_EVENT_PATH", event);
    c
}

/// A pull_request event whose payload names other repositories everywhere it can.
fn hostile_event(dir: &Path) -> std::path::PathBuf {
    let p = dir.join("event.json");
    let sha = |n: u32| format!("{n:040x}");
    std::fs::write(
        &p,
        github_fake::event(
            "pull-request-opened",
            json!({
                "number": 9,
                "repository": { "full_name": "evil/elsewhere" },
                "pull_request": {
                    "number": 9,
                    "title": "@org/team <img src=x> %0A::error::pwned `x`",
                    "base": { "ref": "main", "sha": sha(1), "repo": { "full_name": "evil/elsewhere", "url": "http://evil.invalid/repos/evil/elsewhere" } },
                    "head": { "ref": "%0A::error::x", "sha": sha(2), "repo": { "full_name": "evil/fork" } },
                }
            }),
        )
        .to_string(),
    )
    .unwrap();
    p
}

#[test]
fn requests_go_only_to_the_api_url_for_the_repository() {
    let fake = Fake::start();
    fake.state.lock().unwrap().pulls.insert(9, format!("{:040x}", 2));
    let t = tempfile::tempdir().unwrap();
    let out = t.path().join("out");
    let ev = hostile_event(t.path());
    let o = gate(&fake, &ev)
        .args(["check", "--budgets", "examples/mlp.yaml", "--baseline", "auto", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(matches!(o.status.code(), Some(0 | 1)), "{}", output_text(&o));
    assert_no_token(&o, &out);
    let o = gate(&fake, &ev).args(["comment", "--from"]).arg(&out).output().unwrap();
    assert_no_token(&o, &out);
    let log = fake.log();
    assert!(!log.is_empty(), "the fake was asked");
    for r in &log {
        assert!(
            // `/user`: who the token is, so only its own comments are edited;
            // `/repositories/ID/`: the repository by id, as `Link` headers name it.
            r.path.starts_with(&format!("/repos/{REPO}/"))
                || r.path.starts_with(&format!("/repositories/{REPO_ID}/"))
                || r.path == "/user",
            "{} {}",
            r.method,
            r.path
        );
        assert!(!r.path.contains("evil"), "{}", r.path);
        assert_eq!(r.auth.as_deref(), Some(&*format!("Bearer {TOKEN}")));
    }
}

/// The hostile event in `dir`, and an output folder with the MLP measured
/// (no baseline) for `gate comment` to post.
fn measured(fake: &Fake, dir: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let out = dir.join("out");
    let ev = hostile_event(dir);
    let o = gate(fake, &ev)
        .args(["check", "--budgets", "examples/mlp.yaml", "--baseline", "none", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(out.join("report.json").exists(), "{}", output_text(&o));
    (ev, out)
}

/// A `Link` header may name any host. Its path and query are asked of
/// GITHUB_API_URL's host: no request goes elsewhere, and the next page gets
/// the token like the first.
#[test]
fn a_link_to_another_host_is_followed_on_the_api_host() {
    let fake = Fake::start();
    let elsewhere = Fake::start();
    fake.state.lock().unwrap().pulls.insert(9, format!("{:040x}", 2));
    fake.state.lock().unwrap().link_host = Some(elsewhere.url.trim_start_matches("http://").to_string());
    for i in 0..120 {
        fake.add_comment(9, &format!("chatter {i}"), "someone");
    }
    let ours = fake.add_comment(9, "<!-- gate:id=mlp.yaml -->\nold", "github-actions[bot]");
    let t = tempfile::tempdir().unwrap();
    let (ev, out) = measured(&fake, t.path());
    let o = gate(&fake, &ev).args(["comment", "--from"]).arg(&out).output().unwrap();
    assert_no_token(&o, &out);
    assert_eq!(o.status.code(), Some(0), "{}", output_text(&o));
    // Found on the second page, which came from the API host.
    assert!(
        output_text(&o).contains(&format!("updated comment {ours}")),
        "{}",
        output_text(&o)
    );
    assert!(elsewhere.log().is_empty(), "asked elsewhere: {:#?}", elsewhere.log());
    let page2: Vec<_> = fake
        .log()
        .into_iter()
        .filter(|r| r.path.starts_with("/repositories/") && r.path.ends_with("page=2"))
        .collect();
    assert_eq!(page2.len(), 1, "{:#?}", fake.log());
    assert_eq!(page2[0].auth.as_deref(), Some(&*format!("Bearer {TOKEN}")));
}

#[test]
fn a_token_echoed_by_the_server_never_shows() {
    let fake = Fake::start();
    fake.state.lock().unwrap().pulls.insert(9, format!("{:040x}", 2));
    let t = tempfile::tempdir().unwrap();
    let (ev, out) = measured(&fake, t.path());
    for status in [500u16, 401, 422] {
        fake.state.lock().unwrap().faults.clear();
        fake.fault(
            "GET",
            "/comments",
            usize::MAX,
            FaultKind::Status(
                status,
                format!("{{\"message\":\"bad token {TOKEN} (Bearer {TOKEN})\"}}"),
            ),
        );
        let o = gate(&fake, &ev).args(["comment", "--from"]).arg(&out).output().unwrap();
        assert_ne!(o.status.code(), Some(0), "{status}: {}", output_text(&o));
        assert_no_token(&o, &out);
    }
}

#[test]
fn hostile_names_in_the_spec_are_escaped_end_to_end() {
    let fake = Fake::start();
    let t = tempfile::tempdir().unwrap();
    let out = t.path().join("out");
    let ev = hostile_event(t.path());
    let long = "n".repeat(10_000);
    let device = format!("'@org/team <img src=x> %0A::error::pwned `tick` {long}'");
    let spec = std::fs::read_to_string(Path::new(env!("GATE_REPO_ROOT")).join("examples/mlp.yaml"))
        .unwrap()
        .replace("name: RTX 3050 Ti Laptop GPU", &format!("name: {device}"))
        .replace("params: < 1 MiB", "params: < 1 KiB");
    let spec_path = t.path().join("budgets.yaml");
    std::fs::write(&spec_path, spec).unwrap();
    let summary = t.path().join("summary.md");
    let o = gate(&fake, &ev)
        .env("GITHUB_ACTIONS", "true")
        .env("GITHUB_STEP_SUMMARY", &summary)
        .args(["check", "--baseline", "none", "--budgets"])
        .arg(&spec_path)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(matches!(o.status.code(), Some(0 | 1)), "{}", output_text(&o));
    // stdout: every workflow command is gate's own; the table sits inside ::stop-commands::.
    let mut guarded = false;
    let mut token = String::new();
    for line in stdout.lines() {
        if let Some(t) = line.strip_prefix("::stop-commands::") {
            guarded = true;
            token = format!("::{t}::");
        } else if guarded && line == token {
            guarded = false;
        } else if !guarded && line.starts_with("::") {
            assert!(line.starts_with("::error ") || line.starts_with("::warning "), "{line}");
            assert!(!line.contains("<img") && !line.contains("%0A::"), "{line}");
        }
    }
    for file in [out.join("comment.md"), summary] {
        let md = std::fs::read_to_string(&file).unwrap();
        assert!(
            md.contains("org/team &lt;img"),
            "{}: the name is there, escaped",
            file.display()
        );
        assert!(!md.contains("<img"), "{}: raw HTML", file.display());
        assert!(!md.contains("@org"), "{}: a mention", file.display());
        assert!(md.chars().count() <= 65_536, "{}", file.display());
        assert!(!md.lines().any(|l| l.starts_with("::")), "{}", file.display());
    }
}
