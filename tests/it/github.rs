//! The GitHub integration end to end: the built binary against a fake
//! GitHub API on 127.0.0.1 (tests/github_fake). Comments are upserted (one
//! per gate id, across pages), errors say the fix, retries are bounded, the
//! baseline store is written and read, and the token never shows.

use crate::common;

use crate::github_fake;

use crate::common::output_text;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use crate::github_fake::{assert_no_token, Fake, FaultKind, REPO, REPO_ID, TOKEN};
use serde_json::{json, Value};

const MLP: &str = "examples/mlp.yaml";

fn root() -> PathBuf {
    PathBuf::from(env!("GATE_REPO_ROOT"))
}

/// A command with a clean GitHub environment pointed at the fake.
fn gate(fake: Option<&Fake>, event: Option<&Path>) -> Command {
    let mut c = common::gate();
    c.current_dir(root());
    for k in [
        "GITHUB_ACTIONS",
        "GITHUB_STEP_SUMMARY",
        "GITHUB_SHA",
        "GITHUB_EVENT_NAME",
        "GITHUB_EVENT_PATH",
        "GITHUB_REPOSITORY",
        "GITHUB_TOKEN",
        "GITHUB_API_URL",
        "NO_COLOR",
    ] {
        c.env_remove(k);
    }
    c.env("GATE_GITHUB_TIMEOUT_MS", "5000")
        .env("GATE_GITHUB_ATTEMPTS", "3")
        .env("GATE_GITHUB_BACKOFF_MS", "10");
    if let Some(f) = fake {
        c.env("GITHUB_API_URL", &f.url)
            .env("GITHUB_TOKEN", TOKEN)
            .env("GITHUB_REPOSITORY", REPO);
    }
    if let Some(e) = event {
        c.env("GITHUB_EVENT_PATH", e);
    }
    c
}

/// Runs `gate check` on the MLP example into a fresh folder.
fn check_mlp(dir: &Path) {
    let o = gate(None, None)
        .args(["check", "--budgets", MLP, "--baseline", "none", "--out"])
        .arg(dir)
        .output()
        .unwrap();
    assert!(o.status.code().is_some(), "{}", output_text(&o));
    assert!(dir.join("report.json").exists(), "{}", output_text(&o));
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

fn sha(n: u32) -> String {
    format!("{n:040x}")
}

/// The store's folder of this machine's CPU reports.
fn cpu_card() -> String {
    format!("cpu-{}", std::env::consts::ARCH)
}

fn edit_report(dir: &Path, f: impl FnOnce(&mut Value)) {
    let p = dir.join("report.json");
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
    f(&mut v);
    std::fs::write(&p, serde_json::to_string_pretty(&v).unwrap()).unwrap();
}

fn setup_pr(fake: &Fake, pr: u64) -> (tempfile::TempDir, PathBuf) {
    fake.state.lock().unwrap().pulls.insert(pr, sha(0xbeef));
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    check_mlp(&out);
    let ev = pr_event(tmp.path(), pr, &sha(1), &sha(0xbeef));
    (tmp, ev)
}

#[test]
fn comment_is_created_then_updated_never_duplicated() {
    let fake = Fake::start();
    let (tmp, ev) = setup_pr(&fake, 7);
    let out = tmp.path().join("out");
    let o = gate(Some(&fake), Some(&ev))
        .args(["comment", "--from"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", output_text(&o));
    assert!(output_text(&o).contains("created comment"), "{}", output_text(&o));
    let c = fake.comments(7);
    assert_eq!(c.len(), 1);
    assert!(
        c[0].body.starts_with("<!-- gate:id=mlp.yaml -->\n### "),
        "{}",
        c[0].body
    );
    assert!(fake
        .log()
        .iter()
        .all(|r| r.auth.as_deref() == Some(&*format!("Bearer {TOKEN}"))));

    // Same report: nothing to change, no write at all.
    let o = gate(Some(&fake), Some(&ev))
        .args(["comment", "--from"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", output_text(&o));
    assert!(output_text(&o).contains("already says this"), "{}", output_text(&o));
    assert_eq!(fake.count("PATCH", "/comments/"), 0);

    // A changed report: updated in place.
    edit_report(&out, |v| v["results"][0]["measured"] = json!(12345.0));
    let o = gate(Some(&fake), Some(&ev))
        .args(["comment", "--from"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", output_text(&o));
    assert!(output_text(&o).contains("updated comment"), "{}", output_text(&o));
    let c = fake.comments(7);
    assert_eq!(c.len(), 1, "never a duplicate");
    assert!(c[0].body.contains("0.01177 MiB"), "{}", c[0].body);
    assert_eq!(fake.count("POST", "/comments"), 1);
    assert_no_token(&o, &out);
}

#[test]
fn comment_is_found_past_the_first_hundred() {
    let fake = Fake::start();
    let (tmp, ev) = setup_pr(&fake, 8);
    let out = tmp.path().join("out");
    for i in 0..130 {
        fake.add_comment(8, &format!("chatter {i}"), "someone");
    }
    let ours = fake.add_comment(8, "<!-- gate:id=mlp.yaml -->\nold", "github-actions[bot]");
    for i in 0..40 {
        fake.add_comment(8, &format!("more {i}"), "someone");
    }
    let o = gate(Some(&fake), Some(&ev))
        .args(["comment", "--from"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", output_text(&o));
    assert!(
        output_text(&o).contains(&format!("updated comment {ours}")),
        "{}",
        output_text(&o)
    );
    assert_eq!(fake.comments(8).len(), 171);
    assert_eq!(fake.count("POST", "/comments"), 0);
    // The pages after the first are the ones the `Link` header names,
    // which GitHub writes by the repository's id.
    let by_link = format!("/repositories/{REPO_ID}/issues/8/comments?per_page=100&page=2");
    assert_eq!(fake.count("GET", &by_link), 1, "{:#?}", fake.log());
    assert_eq!(fake.count("GET", "page=3"), 0, "two pages of 100 hold 171 comments");
    assert_no_token(&o, &out);
}

#[test]
fn each_gate_id_keeps_its_own_comment() {
    let fake = Fake::start();
    let (tmp, ev) = setup_pr(&fake, 9);
    let out = tmp.path().join("out");
    for id in ["cpu", "gpu", "cpu"] {
        let o = gate(Some(&fake), Some(&ev))
            .args(["comment", "--id", id, "--from"])
            .arg(&out)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{}", output_text(&o));
    }
    let c = fake.comments(9);
    assert_eq!(c.len(), 2);
    assert!(c[0].body.starts_with("<!-- gate:id=cpu -->"));
    assert!(c[1].body.starts_with("<!-- gate:id=gpu -->"));
}

#[test]
fn a_forged_marker_in_someone_elses_comment_is_not_ours() {
    let fake = Fake::start();
    let (tmp, ev) = setup_pr(&fake, 10);
    let out = tmp.path().join("out");
    fake.add_comment(10, "<!-- gate:id=mlp.yaml -->\nfake", "mallory");
    let o = gate(Some(&fake), Some(&ev))
        .args(["comment", "--from"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", output_text(&o));
    let c = fake.comments(10);
    assert_eq!(c.len(), 2);
    assert_eq!(c[0].body, "<!-- gate:id=mlp.yaml -->\nfake");
}

#[test]
fn quiet_posts_nothing_when_nothing_failed_or_changed() {
    let fake = Fake::start();
    let (tmp, ev) = setup_pr(&fake, 11);
    let out = tmp.path().join("out");
    // The MLP passes (step_time aside); make sure it reads as a pass.
    edit_report(&out, |v| {
        for r in v["results"].as_array_mut().unwrap() {
            r["status"] = json!("pass");
        }
        v["summary"]["status"] = json!("pass");
    });
    let o = gate(Some(&fake), Some(&ev))
        .args(["comment", "--quiet", "--from"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", output_text(&o));
    assert!(output_text(&o).contains("no comment"), "{}", output_text(&o));
    assert!(fake.comments(11).is_empty());
    // A failure is always posted.
    edit_report(&out, |v| {
        v["results"][0]["status"] = json!("fail");
        v["summary"]["status"] = json!("fail");
    });
    let o = gate(Some(&fake), Some(&ev))
        .args(["comment", "--quiet", "--from"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", output_text(&o));
    assert_eq!(fake.comments(11).len(), 1);
}

#[test]
fn forbidden_names_the_fix_and_keeps_the_report() {
    let fake = Fake::start();
    let (tmp, ev) = setup_pr(&fake, 12);
    let out = tmp.path().join("out");
    fake.fault(
        "POST",
        "/issues/12/comments",
        usize::MAX,
        FaultKind::Status(403, "Resource not accessible by integration".into()),
    );
    let o = gate(Some(&fake), Some(&ev))
        .args(["comment", "--from"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(3), "{}", output_text(&o));
    let t = String::from_utf8_lossy(&o.stderr).to_string();
    assert!(
        t.contains("error: GitHub refused to write the pull request comment"),
        "{t}"
    );
    assert!(t.contains("403 Resource not accessible by integration"), "{t}");
    assert!(t.contains("pull-requests: write"), "{t}");
    assert!(t.contains("workflow_run"), "{t}");
    assert!(t.contains("report is on disk"), "{t}");
    assert!(out.join("report.json").exists());
    assert_eq!(fake.count("POST", "/comments"), 1, "a 403 is not retried");
    assert_no_token(&o, &out);
}

#[test]
fn not_found_says_what_to_check() {
    let fake = Fake::start();
    let (tmp, ev) = setup_pr(&fake, 13);
    let out = tmp.path().join("out");
    let o = gate(Some(&fake), Some(&ev))
        .args(["comment", "--pr", "404", "--from"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(3), "{}", output_text(&o));
    let t = String::from_utf8_lossy(&o.stderr).to_string();
    assert!(t.contains("404 Not Found"), "{t}");
    assert!(
        t.contains("hint: check the pull request number and GITHUB_REPOSITORY"),
        "{t}"
    );
    assert_eq!(fake.count("GET", "/issues/404/comments"), 1, "a 404 is not retried");
    assert_no_token(&o, &out);
}

#[test]
fn server_errors_are_retried_a_bounded_number_of_times() {
    let fake = Fake::start();
    let (tmp, ev) = setup_pr(&fake, 14);
    let out = tmp.path().join("out");
    // Two 502s, then it works.
    fake.fault(
        "GET",
        "/issues/14/comments",
        2,
        FaultKind::Status(502, "Bad Gateway".into()),
    );
    let o = gate(Some(&fake), Some(&ev))
        .args(["comment", "--from"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", output_text(&o));
    assert_eq!(fake.comments(14).len(), 1);

    // Always 503: exactly GATE_GITHUB_ATTEMPTS tries, then exit 3.
    let fake = Fake::start();
    fake.state.lock().unwrap().pulls.insert(14, sha(0xbeef));
    fake.fault(
        "GET",
        "/issues/14/comments",
        usize::MAX,
        FaultKind::Status(503, "unavailable".into()),
    );
    let o = gate(Some(&fake), Some(&ev))
        .args(["comment", "--from"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(3), "{}", output_text(&o));
    assert_eq!(fake.count("GET", "/issues/14/comments"), 3);
    assert!(output_text(&o).contains("503"), "{}", output_text(&o));
    assert!(output_text(&o).contains("githubstatus"), "{}", output_text(&o));
    assert_no_token(&o, &out);
}

#[test]
fn a_failed_create_is_not_repeated_blindly() {
    let fake = Fake::start();
    let (tmp, ev) = setup_pr(&fake, 15);
    let out = tmp.path().join("out");
    // The create answers 500 once: gate looks again, then creates once.
    fake.fault("POST", "/issues/15/comments", 1, FaultKind::Status(500, "oops".into()));
    let o = gate(Some(&fake), Some(&ev))
        .args(["comment", "--from"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", output_text(&o));
    assert_eq!(fake.comments(15).len(), 1);
    assert_eq!(fake.count("POST", "/issues/15/comments"), 2);
    assert!(
        fake.count("GET", "/issues/15/comments") >= 2,
        "looked again before the second create"
    );
}

#[test]
fn timeouts_are_bounded() {
    let fake = Fake::start();
    let (tmp, ev) = setup_pr(&fake, 16);
    let out = tmp.path().join("out");
    fake.fault(
        "GET",
        "/issues/16/comments",
        usize::MAX,
        FaultKind::Delay(Duration::from_secs(4)),
    );
    // Each answer would come after 4 s: a 500 ms timeout that did not fire
    // would end in the comment being written (exit 0), not in exit 3.
    let o = gate(Some(&fake), Some(&ev))
        .env("GATE_GITHUB_TIMEOUT_MS", "500")
        .args(["comment", "--from"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(3), "{}", output_text(&o));
    assert!(
        output_text(&o).contains("did not answer in time"),
        "{}",
        output_text(&o)
    );
    assert!(output_text(&o).contains("after 3 attempts"), "{}", output_text(&o));
    assert_eq!(fake.count("GET", "/issues/16/comments"), 3);
    assert_no_token(&o, &out);
}

#[test]
fn unreachable_api_is_an_infrastructure_error() {
    // A loopback port with nothing listening.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    check_mlp(&out);
    let ev = pr_event(tmp.path(), 1, &sha(1), &sha(2));
    let o = gate(None, Some(&ev))
        .env("GITHUB_API_URL", format!("http://127.0.0.1:{port}"))
        .env("GITHUB_TOKEN", TOKEN)
        .env("GITHUB_REPOSITORY", REPO)
        .args(["comment", "--from"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(3), "{}", output_text(&o));
    assert!(
        output_text(&o).contains("cannot reach the GitHub API"),
        "{}",
        output_text(&o)
    );
    assert_no_token(&o, &out);
}

#[test]
fn bad_credentials_say_so() {
    let fake = Fake::start();
    let (tmp, ev) = setup_pr(&fake, 17);
    let out = tmp.path().join("out");
    let o = gate(Some(&fake), Some(&ev))
        .env("GITHUB_TOKEN", "ghs_wrong_token_value")
        .args(["comment", "--from"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(3), "{}", output_text(&o));
    assert!(output_text(&o).contains("401 Bad credentials"), "{}", output_text(&o));
    assert!(!output_text(&o).contains("ghs_wrong_token_value"));
}

#[test]
fn workflow_run_comments_on_the_pr_in_the_artifact_only_if_heads_match() {
    let fake = Fake::start();
    let (tmp, _ev) = setup_pr(&fake, 18);
    let out = tmp.path().join("out");
    std::fs::write(
        out.join("pr.json"),
        json!({"number": 18, "base_ref": "main", "base_sha": sha(1), "head_sha": sha(0xbeef), "head_repo": "fork/repo", "base_repo": REPO}).to_string(),
    )
    .unwrap();
    let run_event = |head: &str| {
        let p = tmp.path().join("run.json");
        std::fs::write(
            &p,
            github_fake::event(
                "workflow-run-completed",
                json!({"workflow_run": {"head_sha": head, "event": "pull_request",
                    "head_branch": "feature", "head_repository": {"full_name": "fork/repo"}}}),
            )
            .to_string(),
        )
        .unwrap();
        p
    };
    // A run for another commit: refused, nothing posted, not a failure.
    let o = gate(Some(&fake), Some(&run_event(&sha(0xdead))))
        .args(["comment", "--from"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", output_text(&o));
    assert!(output_text(&o).contains("not commenting"), "{}", output_text(&o));
    assert!(fake.comments(18).is_empty());
    // The run of the PR's head: posted.
    let o = gate(Some(&fake), Some(&run_event(&sha(0xbeef))))
        .args(["comment", "--from"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", output_text(&o));
    assert_eq!(fake.comments(18).len(), 1);
}

#[test]
fn workflow_run_from_another_pr_at_the_same_commit_is_refused() {
    let fake = Fake::start();
    let (tmp, _ev) = setup_pr(&fake, 19);
    let out = tmp.path().join("out");
    std::fs::write(
        out.join("pr.json"),
        json!({"number": 19, "base_ref": "main", "base_sha": sha(1), "head_sha": sha(0xbeef), "head_repo": "fork/repo", "base_repo": REPO}).to_string(),
    )
    .unwrap();
    let run_event = |repo: &str, branch: &str| {
        let p = tmp.path().join("run.json");
        let ev = github_fake::event(
            "workflow-run-completed",
            json!({"workflow_run": {"head_sha": sha(0xbeef), "event": "pull_request",
                "head_branch": branch, "head_repository": {"full_name": repo}}}),
        );
        std::fs::write(&p, ev.to_string()).unwrap();
        p
    };
    // Same commit, another repository or another branch: not this PR's run.
    for (repo, branch, says) in [
        ("evil/repo", "feature", "comes from fork/repo"),
        ("fork/repo", "other", "from branch feature"),
    ] {
        let o = gate(Some(&fake), Some(&run_event(repo, branch)))
            .args(["comment", "--from"])
            .arg(&out)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{}", output_text(&o));
        assert!(output_text(&o).contains(says), "{}", output_text(&o));
        assert!(output_text(&o).contains("not commenting"), "{}", output_text(&o));
        assert!(fake.comments(19).is_empty());
    }
    let o = gate(Some(&fake), Some(&run_event("fork/repo", "feature")))
        .args(["comment", "--from"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", output_text(&o));
    assert_eq!(fake.comments(19).len(), 1);
}

#[test]
fn check_writes_pr_json_comment_md_and_the_step_summary() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let ev = pr_event(tmp.path(), 21, &sha(1), &sha(2));
    let summary = tmp.path().join("summary.md");
    let o = gate(None, Some(&ev))
        .env("GITHUB_ACTIONS", "true")
        .env("GITHUB_STEP_SUMMARY", &summary)
        .args(["check", "--budgets", MLP, "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(matches!(o.status.code(), Some(0 | 1)), "{}", output_text(&o));
    let pr: Value = serde_json::from_str(&std::fs::read_to_string(out.join("pr.json")).unwrap()).unwrap();
    assert_eq!(pr["number"], 21);
    let md = std::fs::read_to_string(out.join("comment.md")).unwrap();
    assert!(md.starts_with("### "));
    assert!(std::fs::read_to_string(&summary).unwrap().contains(&md));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("::warning title=gate::no baseline"), "{stdout}");
    // The table (names from the spec) cannot issue workflow commands.
    let start = stdout.find("::stop-commands::").expect("guarded");
    let token = stdout[start + 17..].lines().next().unwrap();
    assert!(stdout.contains(&format!("::{token}::")), "{stdout}");
    assert!(stdout.find("component  metric").unwrap() > start);
}

/// A stored baseline three first-parent steps behind the merge-base.
#[test]
fn auto_baseline_is_the_nearest_stored_ancestor_of_the_merge_base() {
    let fake = Fake::start();
    let tmp = tempfile::tempdir().unwrap();
    let seed = tmp.path().join("seed");
    check_mlp(&seed);
    let chain: Vec<String> = (0..8).map(|i| sha(0x100 + i)).collect();
    fake.add_chain(&chain);
    fake.state.lock().unwrap().merge_base = Some(chain[2].clone());
    // Stored: chain[5] (the nearest) and chain[7] (older).
    let mut base: Value = serde_json::from_str(&std::fs::read_to_string(seed.join("report.json")).unwrap()).unwrap();
    base["commit"] = json!(chain[5]);
    fake.store_file(&format!("reports/{}.json", chain[5]), &base.to_string());
    base["commit"] = json!(chain[7]);
    fake.store_file(&format!("reports/{}.json", chain[7]), &base.to_string());

    let ev = pr_event(tmp.path(), 30, &chain[0], &sha(0xfeed));
    let out = tmp.path().join("out");
    let o = gate(Some(&fake), Some(&ev))
        .args(["check", "--budgets", MLP, "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(matches!(o.status.code(), Some(0 | 1)), "{}", output_text(&o));
    let r: Value = serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    assert_eq!(r["baseline"]["commit"], json!(chain[5]), "{}", output_text(&o));
    assert_eq!(r["baseline"]["comparable"], json!(true));
    assert!(r["results"][0]["baseline"].is_number());
    assert!(out.join("baseline.json").exists());
    let md = std::fs::read_to_string(out.join("comment.md")).unwrap();
    assert!(md.contains("Text report: baseline → current"), "{md}");
    assert!(output_text(&o).contains("3 first-parent steps"), "{}", output_text(&o));
    assert_no_token(&o, &out);
}

#[test]
fn a_baseline_from_another_testbed_is_never_compared_and_every_output_says_so() {
    let fake = Fake::start();
    let tmp = tempfile::tempdir().unwrap();
    let seed = tmp.path().join("seed");
    check_mlp(&seed);
    let chain: Vec<String> = (0..3).map(|i| sha(0x200 + i)).collect();
    fake.add_chain(&chain);
    fake.state.lock().unwrap().merge_base = Some(chain[0].clone());
    let mut base: Value = serde_json::from_str(&std::fs::read_to_string(seed.join("report.json")).unwrap()).unwrap();
    base["commit"] = json!(chain[1]);
    base["testbed"]["device_name"] = json!("NVIDIA H200");
    base["testbed"]["backend"] = json!("cuda");
    fake.store_file(&format!("reports/{}.json", chain[1]), &base.to_string());

    let ev = pr_event(tmp.path(), 31, &chain[0], &sha(0xfeed));
    let out = tmp.path().join("out");
    let o = gate(Some(&fake), Some(&ev))
        .env("GITHUB_ACTIONS", "true")
        .args(["check", "--budgets", MLP, "--out"])
        .arg(&out)
        .output()
        .unwrap();
    let said = "baseline from a different testbed: not compared";
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains(&format!("warning: {said}")), "table: {stdout}");
    assert!(
        stdout.contains(&format!("::warning title=gate::{said}")),
        "annotation: {stdout}"
    );
    let r: Value = serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    assert_eq!(r["baseline"]["comparable"], json!(false));
    assert!(r["results"].as_array().unwrap().iter().all(|x| x["baseline"].is_null()));
    assert!(r["summary"]["warnings"][0].as_str().unwrap().starts_with(said));
    let md = std::fs::read_to_string(out.join("comment.md")).unwrap();
    assert!(md.contains(said), "{md}");

    // Under --strict that warning fails the gate.
    let o = gate(Some(&fake), Some(&ev))
        .args(["check", "--strict", "--budgets", MLP, "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", output_text(&o));
}

#[test]
fn auto_baseline_network_failure_is_a_warning_not_a_crash() {
    let fake = Fake::start();
    fake.fault("GET", "/git/trees/", usize::MAX, FaultKind::Status(500, "boom".into()));
    let tmp = tempfile::tempdir().unwrap();
    let ev = pr_event(tmp.path(), 32, &sha(1), &sha(2));
    fake.state.lock().unwrap().merge_base = Some(sha(1));
    let out = tmp.path().join("out");
    let o = gate(Some(&fake), Some(&ev))
        .args(["check", "--budgets", MLP, "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(matches!(o.status.code(), Some(0 | 1)), "{}", output_text(&o));
    assert!(
        output_text(&o).contains("warning: no baseline (cannot read the baseline store"),
        "{}",
        output_text(&o)
    );
    assert_eq!(fake.count("GET", "/git/trees/"), 3, "bounded retries");
    assert_no_token(&o, &out);
    // --strict: a missing baseline fails.
    let o = gate(Some(&fake), Some(&ev))
        .args(["check", "--strict", "--budgets", MLP, "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", output_text(&o));
}

#[test]
fn a_bad_baseline_file_is_bad_input() {
    let tmp = tempfile::tempdir().unwrap();
    let bad = tmp.path().join("bad.json");
    std::fs::write(&bad, "{ not json").unwrap();
    let o = gate(None, None)
        .args(["check", "--budgets", MLP, "--baseline"])
        .arg(&bad)
        .arg("--out")
        .arg(tmp.path().join("out"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", output_text(&o));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        e.contains("error: the baseline") && e.contains("bad.json") && e.contains("is not a gate report"),
        "{e}"
    );
    assert!(e.contains("hint: "), "{e}");
}

#[test]
fn publish_creates_the_store_then_retries_on_a_concurrent_update() {
    let fake = Fake::start();
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    check_mlp(&out);
    let commit = sha(0xabc);
    let o = gate(Some(&fake), None)
        .args(["baseline", "publish", "--sha", &commit, "--from"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", output_text(&o));
    assert!(fake.state.lock().unwrap().branch_exists);
    // In the card's folder (this run's: the CPU), beside any other card's.
    let stored = fake
        .file(&format!("reports/{}/{commit}.json", cpu_card()))
        .expect("stored");
    // Stored as written, but for the commit: the one it is stored under,
    // never the one the report claims (the checkout's HEAD here).
    let stored: Value = serde_json::from_str(&stored).unwrap();
    let mut written: Value = serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    assert_ne!(written["commit"], json!(commit));
    if written["commit"].is_string() {
        assert!(
            output_text(&o).contains("is stored as the baseline of"),
            "{}",
            output_text(&o)
        );
    }
    written["commit"] = json!(commit);
    assert_eq!(stored, written);
    assert_eq!(fake.count("POST", "/git/refs"), 1);

    // Again, unchanged: no write.
    let o = gate(Some(&fake), None)
        .args(["baseline", "publish", "--sha", &commit, "--from"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", output_text(&o));
    assert!(output_text(&o).contains("already stored"), "{}", output_text(&o));
    assert_eq!(fake.count("PUT", "/contents/"), 1);

    // A changed report while another job writes: 409 once, re-read, retried.
    edit_report(&out, |v| v["wall_seconds"] = json!(99.0));
    fake.fault(
        "PUT",
        "/contents/reports/",
        1,
        FaultKind::Status(409, "is at abc but expected def".into()),
    );
    let o = gate(Some(&fake), None)
        .args(["baseline", "publish", "--sha", &commit, "--from"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", output_text(&o));
    assert!(output_text(&o).contains("replaced"), "{}", output_text(&o));
    assert_eq!(fake.count("PUT", "/contents/"), 3);
    assert!(fake
        .file(&format!("reports/{}/{commit}.json", cpu_card()))
        .unwrap()
        .contains("99.0"));
    assert_no_token(&o, &out);

    // Forbidden: the fix is `contents: write`.
    fake.fault(
        "PUT",
        "/contents/reports/",
        usize::MAX,
        FaultKind::Status(403, "Resource not accessible by integration".into()),
    );
    edit_report(&out, |v| v["wall_seconds"] = json!(7.0));
    let o = gate(Some(&fake), None)
        .args(["baseline", "publish", "--sha", &commit, "--from"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(3), "{}", output_text(&o));
    assert!(output_text(&o).contains("contents: write"), "{}", output_text(&o));
}

#[test]
fn publish_refuses_pull_requests() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    check_mlp(&out);
    let ev = pr_event(tmp.path(), 5, &sha(1), &sha(2));
    let o = gate(None, Some(&ev))
        .args(["baseline", "publish", "--from"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", output_text(&o));
    assert!(output_text(&o).contains("refusing to publish"), "{}", output_text(&o));
}

#[test]
fn merge_combines_shards_into_one_verdict() {
    let tmp = tempfile::tempdir().unwrap();
    let text_spec = std::fs::read_to_string(root().join(MLP)).unwrap();
    // Two components: the MLP twice under two names.
    let two = text_spec
        .replace("  mlp:\n", "  mlp_a:\n")
        .replace("members: [mlp]", "members: [mlp_a, mlp_b]");
    let comp_start = two.find("  mlp_a:").unwrap();
    let comp_end = two.find("ensemble:").unwrap();
    let second = two[comp_start..comp_end].replace("mlp_a:", "mlp_b:");
    let spec_text = format!("{}{second}{}", &two[..comp_end], &two[comp_end..]);
    let spec = tmp.path().join("two.yaml");
    std::fs::write(&spec, spec_text).unwrap();
    for (only, dir) in [("mlp_a", "s1"), ("mlp_b", "s2")] {
        let o = gate(None, None)
            .args(["check", "--baseline", "none", "--only", only, "--budgets"])
            .arg(&spec)
            .arg("--out")
            .arg(tmp.path().join(dir))
            .output()
            .unwrap();
        assert!(o.status.code().is_some(), "{}", output_text(&o));
        let r: Value =
            serde_json::from_str(&std::fs::read_to_string(tmp.path().join(dir).join("report.json")).unwrap()).unwrap();
        assert!(
            r["ensemble"]["total_bytes"].is_null(),
            "a shard cannot sum the ensemble"
        );
    }
    let m = tmp.path().join("merged");
    let o = gate(None, None)
        .arg("merge")
        .arg(tmp.path().join("s1"))
        .arg(tmp.path().join("s2"))
        .arg("--out")
        .arg(&m)
        .output()
        .unwrap();
    assert!(matches!(o.status.code(), Some(0 | 1)), "{}", output_text(&o));
    let r: Value = serde_json::from_str(&std::fs::read_to_string(m.join("report.json")).unwrap()).unwrap();
    assert_eq!(r["components"].as_object().unwrap().len(), 2);
    assert!(r["ensemble"]["total_bytes"].is_number(), "{}", r["ensemble"]);
    assert!(m.join("junit.xml").exists() && m.join("comment.md").exists());
    assert!(String::from_utf8_lossy(&o.stdout).contains("ensemble (mlp_a + mlp_b)"));

    // A component in two shards is refused.
    let o = gate(None, None)
        .arg("merge")
        .arg(tmp.path().join("s1"))
        .arg(tmp.path().join("s1"))
        .arg("--out")
        .arg(tmp.path().join("bad"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", output_text(&o));
    assert!(output_text(&o).contains("is in two shards"), "{}", output_text(&o));

    // A missing `--only` job is refused, named (#43 item 6): it would
    // pass as "not measured".
    let o = gate(None, None)
        .arg("merge")
        .arg(tmp.path().join("s1"))
        .arg("--out")
        .arg(tmp.path().join("partial"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", output_text(&o));
    assert!(
        output_text(&o).contains("no shard measured `mlp_b`"),
        "{}",
        output_text(&o)
    );
}

#[test]
fn comment_outside_a_pull_request_posts_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    check_mlp(&out);
    let o = gate(None, None).args(["comment", "--from"]).arg(&out).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", output_text(&o));
    assert!(output_text(&o).contains("not a pull request"), "{}", output_text(&o));
}

#[test]
fn a_pull_request_run_with_a_broken_event_file_says_so_and_exits_3() {
    let fake = Fake::start();
    let (tmp, _ev) = setup_pr(&fake, 20);
    let out = tmp.path().join("out");
    std::fs::remove_file(out.join("pr.json")).ok();
    let garbage = tmp.path().join("garbage.json");
    std::fs::write(&garbage, "{not json").unwrap();
    for (path, says) in [
        (tmp.path().join("absent.json"), "cannot be read"),
        (garbage, "is not valid JSON"),
    ] {
        let o = gate(Some(&fake), Some(&path))
            .env("GITHUB_EVENT_NAME", "pull_request")
            .args(["comment", "--from"])
            .arg(&out)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(3), "{}", output_text(&o));
        assert!(
            output_text(&o).contains("GITHUB_EVENT_NAME is pull_request but the event file"),
            "{}",
            output_text(&o)
        );
        assert!(output_text(&o).contains(says), "{}", output_text(&o));
        assert!(!output_text(&o).contains("nothing posted"), "{}", output_text(&o));
        assert!(fake.comments(20).is_empty());
    }
}

#[test]
fn a_marked_comment_by_someone_else_is_never_edited() {
    let fake = Fake::start();
    let (tmp, ev) = setup_pr(&fake, 22);
    let out = tmp.path().join("out");
    // Another bot (and a user) pasted gate's marker: not the token's identity.
    let theirs = fake.add_comment(22, "<!-- gate:id=mlp -->\nplanted", "other-app[bot]");
    let o = gate(Some(&fake), Some(&ev))
        .args(["comment", "--id", "mlp", "--from"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", output_text(&o));
    assert_eq!(fake.count("PATCH", "/comments"), 0, "{}", output_text(&o));
    let all = fake.comments(22);
    assert_eq!(all.len(), 2);
    assert!(all.iter().any(|c| c.id == theirs && c.body.contains("planted")));
    assert!(all.iter().any(|c| c.login == "github-actions[bot]"));
}

#[test]
fn a_secondary_rate_limit_is_waited_out_as_asked_within_a_bound() {
    // Waited out: a 403 "secondary rate limit" with retry-after: 1, then the answer.
    let fake = Fake::start();
    let (tmp, ev) = setup_pr(&fake, 21);
    let out = tmp.path().join("out");
    let limited = || {
        FaultKind::StatusWithHeaders(
            403,
            "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.".into(),
            vec![("retry-after".into(), "1".into())],
        )
    };
    fake.fault("GET", "/issues/21/comments", 1, limited());
    let o = gate(Some(&fake), Some(&ev))
        .args(["comment", "--from"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", output_text(&o));
    assert!(
        output_text(&o).contains("GitHub rate limit on GET"),
        "{}",
        output_text(&o)
    );
    assert!(output_text(&o).contains("waiting 1 s as asked"), "{}", output_text(&o));
    assert_eq!(fake.comments(21).len(), 1);

    // Beyond the run's budget: no wait at all, exit 3, and it says what GitHub asked.
    let fake = Fake::start();
    let (tmp, ev) = setup_pr(&fake, 22);
    let out = tmp.path().join("out");
    fake.fault(
        "GET",
        "/issues/22/comments",
        usize::MAX,
        FaultKind::StatusWithHeaders(
            429,
            "API rate limit exceeded".into(),
            vec![("retry-after".into(), "3600".into())],
        ),
    );
    let o = gate(Some(&fake), Some(&ev))
        .env("GATE_GITHUB_MAX_RATE_WAIT_MS", "2000")
        .args(["comment", "--from"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(3), "{}", output_text(&o));
    assert!(output_text(&o).contains("asks to wait 3600 s"), "{}", output_text(&o));
    assert!(
        output_text(&o).contains("GATE_GITHUB_MAX_RATE_WAIT_MS"),
        "{}",
        output_text(&o)
    );
    assert_eq!(fake.count("GET", "/issues/22/comments"), 1, "never hammered");
    assert_no_token(&o, &out);
}

/// The acknowledge label (#16 item 4): a baseline whose `mlp.params` is
/// two thirds of this run's, so `params` regresses (under its budget), and
/// a pull request whose events say who added the label.
struct AckCase {
    fake: Fake,
    tmp: tempfile::TempDir,
    ev: PathBuf,
    baseline: PathBuf,
}

const LABEL: &str = "gate:accept-regression";
const ACK_AT: &str = "2026-12-01T10:20:30Z";

fn ack_case(pr: u64) -> AckCase {
    let fake = Fake::start();
    fake.state.lock().unwrap().pulls.insert(pr, sha(0xbeef));
    let tmp = tempfile::tempdir().unwrap();
    let seed = tmp.path().join("seed");
    check_mlp(&seed);
    edit_report(&seed, |v| {
        let p = v["components"]["mlp"]["metrics"]["params"]["value"].as_f64().unwrap();
        v["components"]["mlp"]["metrics"]["params"]["value"] = json!((p * 2.0 / 3.0).round());
    });
    let ev = pr_event(tmp.path(), pr, &sha(1), &sha(0xbeef));
    AckCase {
        fake,
        baseline: seed.join("report.json"),
        tmp,
        ev,
    }
}

impl AckCase {
    /// 150 other events (two pages), then the label added by `hubot`,
    /// removed, and added again by `octocat`: the last one counts.
    fn label_added(&self, pr: u64) {
        for i in 0..150 {
            let (event, label) = if i % 2 == 0 {
                ("labeled", "bug")
            } else {
                ("commented", "")
            };
            self.fake.add_event(pr, event, label, "someone", "2026-11-30T00:00:00Z");
        }
        self.fake
            .add_event(pr, "labeled", LABEL, "hubot", "2026-11-30T09:00:00Z");
        self.fake
            .add_event(pr, "unlabeled", LABEL, "hubot", "2026-11-30T09:30:00Z");
        self.fake.add_event(pr, "labeled", LABEL, "octocat", ACK_AT);
    }

    fn check(&self, spec: &str, extra: &[&str]) -> (Output, PathBuf, Value) {
        let out = self.tmp.path().join("out");
        let o = gate(Some(&self.fake), Some(&self.ev))
            .args(["check", "--budgets", spec, "--baseline"])
            .arg(&self.baseline)
            .args(extra)
            .arg("--out")
            .arg(&out)
            .output()
            .unwrap();
        let report: Value = serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
        (o, out, report)
    }
}

/// (metric, status) of each result.
fn statuses(report: &Value) -> Vec<(String, String)> {
    report["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["component"] == "mlp")
        .map(|r| {
            (
                r["metric"].as_str().unwrap().into(),
                r["status"].as_str().unwrap().into(),
            )
        })
        .collect()
}

fn status_of(report: &Value, metric: &str) -> String {
    statuses(report)
        .into_iter()
        .find(|(m, _)| m == metric)
        .map(|(_, s)| s)
        .unwrap()
}

#[test]
fn the_acknowledge_label_turns_a_regression_into_a_named_warning() {
    let case = ack_case(31);
    case.label_added(31);
    let (o, out, report) = case.check(MLP, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", output_text(&o));
    assert_eq!(status_of(&report, "params"), "acknowledged");
    assert_eq!(report["summary"]["acknowledged"], 1);
    assert_eq!(report["summary"]["regressed"], 0);
    assert_eq!(
        report["summary"]["acknowledgement"],
        json!({ "label": LABEL, "by": "octocat", "at": ACK_AT })
    );
    assert!(
        report["summary"]["warnings"]
            .as_array()
            .unwrap()
            .contains(&json!(format!(
                "1 regression(s) acknowledged by @octocat via `{LABEL}` at {ACK_AT}"
            ))),
        "{}",
        report["summary"]
    );
    assert!(
        case.fake.count("GET", "/issues/31/events?per_page=100&page=2") == 1,
        "paged"
    );
    let md = std::fs::read_to_string(out.join("comment.md")).unwrap();
    let cell = format!("| 📈 regressed, acknowledged by @\u{200D}octocat via `{LABEL}` at {ACK_AT} |");
    assert!(md.contains(&cell), "{md}");
    assert!(md.contains(" 1 acknowledged"), "{md}");
    let junit = std::fs::read_to_string(out.join("junit.xml")).unwrap();
    assert!(
        junit.contains(&format!(
            "; regressed, acknowledged by @octocat via `{LABEL}` at {ACK_AT}: "
        )),
        "{junit}"
    );
    // The comment job re-renders the report: the actor is named there too.
    let o = gate(Some(&case.fake), Some(&case.ev))
        .args(["comment", "--from"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", output_text(&o));
    let body = &case.fake.comments(31)[0].body;
    assert!(body.contains(&cell), "{body}");
    // Written by `gate comment` from what GitHub confirmed, for the run's head.
    let line = format!(
        "> - 1 regression(s) acknowledged by @\u{200D}octocat via \\`{LABEL}\\` at {ACK_AT}, on head {} \
         (confirmed on GitHub)\n",
        sha(0xbeef)
    );
    assert!(body.contains(&line), "{body}");
    assert!(
        !body.contains(&format!("at {ACK_AT}\n")),
        "the artifact's own line is not copied: {body}"
    );
    assert_no_token(&o, &out);
}

/// In a merge queue (#51): the run is a `merge_group` event, whose payload
/// has no pull request; the queued one is named by the group's branch,
/// `gh-readonly-queue/<base>/pr-<N>-<sha>` (`merge_group.head_ref`,
/// GitHub's webhooks description). Its label is read there too, so an
/// acknowledged regression does not fail again on the queued commit.
#[test]
fn a_merge_queue_run_reads_the_queued_pull_requests_label() {
    let case = ack_case(35);
    case.label_added(35);
    let ev = case.tmp.path().join("merge-group.json");
    let group = |head_ref: &str| {
        json!({
            "action": "checks_requested",
            "merge_group": {
                "head_sha": sha(0x9999),
                "head_ref": head_ref,
                "base_sha": sha(1),
                "base_ref": "refs/heads/main",
            },
            "repository": { "full_name": REPO },
        })
    };
    let run = |payload: &Value| {
        std::fs::write(&ev, payload.to_string()).unwrap();
        let out = case.tmp.path().join("out-queue");
        let o = gate(Some(&case.fake), Some(&ev))
            .env("GITHUB_EVENT_NAME", "merge_group")
            .args(["check", "--budgets", MLP, "--baseline"])
            .arg(&case.baseline)
            .arg("--out")
            .arg(&out)
            .output()
            .unwrap();
        let report: Value = serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
        (o, report)
    };
    let (o, report) = run(&group(&format!(
        "refs/heads/gh-readonly-queue/main/pr-35-{}",
        sha(0xbeef)
    )));
    assert_eq!(o.status.code(), Some(0), "{}", output_text(&o));
    assert_eq!(status_of(&report, "params"), "acknowledged");
    assert_eq!(
        report["summary"]["acknowledgement"],
        json!({ "label": LABEL, "by": "octocat", "at": ACK_AT })
    );
    // A group branch that names no pull request: the label is not
    // confirmed, and the regression fails.
    let (o, report) = run(&group("refs/heads/gh-readonly-queue/main/not-a-pr"));
    assert_eq!(o.status.code(), Some(1), "{}", output_text(&o));
    assert_eq!(status_of(&report, "params"), "regressed");
    assert!(
        output_text(&o).contains("in a merge queue: the merge group's branch"),
        "{}",
        output_text(&o)
    );
}

#[test]
fn without_the_label_a_regression_fails() {
    let case = ack_case(32);
    case.fake.add_event(32, "labeled", LABEL, "octocat", ACK_AT);
    case.fake
        .add_event(32, "unlabeled", LABEL, "octocat", "2026-12-01T11:00:00Z");
    let (o, _, report) = case.check(MLP, &[]);
    assert_eq!(o.status.code(), Some(1), "{}", output_text(&o));
    assert_eq!(status_of(&report, "params"), "regressed");
    assert_eq!(report["summary"]["acknowledged"], 0);
    assert_eq!(report["summary"].get("acknowledgement"), None);
}

#[test]
fn the_label_never_excuses_a_budget_failure() {
    let case = ack_case(33);
    case.label_added(33);
    let spec = case.tmp.path().join("tight.yaml");
    let text_of_spec = std::fs::read_to_string(root().join(MLP)).unwrap();
    std::fs::write(
        &spec,
        text_of_spec.replace("inference_peak: < 2 MiB", "inference_peak: < 1 KiB"),
    )
    .unwrap();
    let (o, _, report) = case.check(spec.to_str().unwrap(), &[]);
    assert_eq!(o.status.code(), Some(1), "{}", output_text(&o));
    assert_eq!(status_of(&report, "params"), "acknowledged");
    assert_eq!(status_of(&report, "inference_peak"), "fail");
}

#[test]
fn strict_ignores_the_label_and_says_so() {
    let case = ack_case(34);
    case.label_added(34);
    let (o, out, report) = case.check(MLP, &["--strict"]);
    assert_eq!(o.status.code(), Some(1), "{}", output_text(&o));
    assert_eq!(status_of(&report, "params"), "regressed");
    let warning = format!(
        "--strict ignores the `{LABEL}` label (added by @octocat at {ACK_AT}): 1 regression(s) stay regressions"
    );
    assert!(
        report["summary"]["warnings"]
            .as_array()
            .unwrap()
            .contains(&json!(warning)),
        "{}",
        report["summary"]
    );
    let md = std::fs::read_to_string(out.join("comment.md")).unwrap();
    assert!(md.contains("📈 **regressed**"), "{md}");
}

#[test]
fn an_unverifiable_label_is_a_warning_and_the_regression_fails() {
    let case = ack_case(35);
    case.label_added(35);
    case.fake.fault(
        "GET",
        "/events",
        usize::MAX,
        FaultKind::Status(502, "Bad Gateway".into()),
    );
    let (o, out, report) = case.check(MLP, &[]);
    assert_eq!(o.status.code(), Some(1), "{}", output_text(&o));
    assert_eq!(status_of(&report, "params"), "regressed");
    let warnings: Vec<String> = report["summary"]["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_str().unwrap().to_string())
        .collect();
    assert!(
        warnings.contains(&format!(
            "the `{LABEL}` label could not be verified, so 1 regression(s) stay regressions: \
             GitHub refused to read the pull request's label events \
             (GET /repos/{REPO}/issues/35/events?per_page=100&page=1): 502 Bad Gateway \
             (hint: GitHub is failing (a 5xx after every retry): check https://www.githubstatus.com and rerun the job)"
        )),
        "{warnings:?}"
    );
    assert_eq!(case.fake.count("GET", "/events"), 3, "bounded retries");
    assert_no_token(&o, &out);
}

/// The comment job reads an artifact a fork could have written: a claimed
/// acknowledgement that GitHub does not confirm loses its name.
#[test]
fn the_comment_names_only_an_acknowledgement_github_confirms() {
    let case = ack_case(36);
    case.label_added(36);
    let (o, out, _) = case.check(MLP, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", output_text(&o));
    edit_report(&out, |v| v["summary"]["acknowledgement"]["by"] = json!("maintainer"));
    let o = gate(Some(&case.fake), Some(&case.ev))
        .args(["comment", "--from"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", output_text(&o));
    let body = &case.fake.comments(36)[0].body;
    assert!(
        body.contains("| 📈 regressed, acknowledged (not confirmed) |"),
        "{body}"
    );
    // #28 item 3: the claimed name is nowhere, not even in the warning.
    assert!(!body.contains("maintainer"), "{body}");
    assert!(
        body.contains(&format!(
            "> - the report's acknowledgement is not confirmed (GitHub says @\u{200D}octocat added it at {ACK_AT}): \
             its 1 acknowledged regression(s) are not shown as accepted by anyone\n"
        )),
        "{body}"
    );
}

/// Runs `gate comment` for `case`'s pull request, with `extra` arguments.
fn comment_on(case: &AckCase, out: &Path, extra: &[&str]) -> Output {
    let o = gate(Some(&case.fake), Some(&case.ev))
        .args(["comment", "--from"])
        .arg(out)
        .args(extra)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", output_text(&o));
    o
}

/// #28 items 1 and 3: an artifact's acknowledged rows and claim are checked
/// on GitHub whatever its counts and `strict` say, and a claim that does not
/// hold is named nowhere in the comment, its own warning included.
#[test]
fn a_forged_acknowledgement_is_checked_whatever_the_summary_says() {
    let case = ack_case(50);
    case.label_added(50);
    let (o, out, _) = case.check(MLP, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", output_text(&o));
    // The label comes off; the artifact still claims it, as a maintainer's.
    case.fake
        .add_event(50, "unlabeled", LABEL, "octocat", "2026-12-02T00:00:00Z");
    type Forge = fn(&mut Value);
    let forged: [(&str, Forge); 2] = [
        ("acknowledged: 0", |v| v["summary"]["acknowledged"] = json!(0)),
        ("strict: true", |v| v["summary"]["strict"] = json!(true)),
    ];
    // The baseline beside it (shown in the comment's diff) claims one too.
    let claim = format!("3 regression(s) acknowledged by @maintainer via `{LABEL}` at {ACK_AT}");
    let baseline = out.join("baseline.json");
    let mut b: Value = serde_json::from_str(&std::fs::read_to_string(&baseline).unwrap()).unwrap();
    b["summary"]["warnings"] = json!([claim]);
    std::fs::write(&baseline, b.to_string()).unwrap();
    for (n, (what, forge)) in forged.into_iter().enumerate() {
        edit_report(&out, |v| {
            v["summary"]["acknowledgement"]["by"] = json!("maintainer");
            v["summary"]["warnings"] = json!([claim]);
            forge(v);
        });
        comment_on(&case, &out, &[]);
        // `gate check` asked once, then each comment.
        assert_eq!(
            case.fake.count("GET", "/issues/50/labels"),
            n + 2,
            "{what}: GitHub asked"
        );
        let body = &case.fake.comments(50)[0].body;
        assert!(
            body.contains("| 📈 regressed, acknowledged (not confirmed) |"),
            "{what}: {body}"
        );
        assert!(!body.contains("maintainer"), "{what}: {body}");
        assert!(!body.contains("acknowledged by"), "{what}: {body}");
        // The count comes from the rows, not from the summary.
        assert!(body.contains(", 1 acknowledged"), "{what}: {body}");
        assert!(
            body.contains(
                "> - the report's acknowledgement is not confirmed (the label is not on the pull request now): \
                 its 1 acknowledged regression(s) are not shown as accepted by anyone\n"
            ),
            "{what}: {body}"
        );
    }
    // Rows marked acknowledged with no claim at all are not shown as accepted either.
    edit_report(&out, |v| {
        v["summary"]["strict"] = json!(false);
        v["summary"].as_object_mut().unwrap().remove("acknowledgement");
    });
    comment_on(&case, &out, &[]);
    let body = &case.fake.comments(50)[0].body;
    assert!(
        body.contains(
            "> - the report's acknowledgement is not confirmed (the report names no one who added the label)"
        ),
        "{body}"
    );
}

/// #43 item 18: a pass that rests on acknowledged regressions whose
/// acknowledgement GitHub did not confirm is neither PASS nor `success`:
/// the comment's headline and the check run say `NOT CONFIRMED` /
/// `neutral`, and why. Confirmed, the same report is PASS and `success`.
#[test]
fn a_pass_on_an_unconfirmed_acknowledgement_is_a_neutral_check_run() {
    let case = ack_case(51);
    case.label_added(51);
    let (o, out, _) = case.check(MLP, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", output_text(&o));
    let o = comment_on(&case, &out, &["--check-run", "gate"]);
    assert!(output_text(&o).contains(": success ("), "{}", output_text(&o));
    assert!(case.fake.comments(51)[0].body.contains("gate: PASS"));
    case.fake
        .add_event(51, "unlabeled", LABEL, "octocat", "2026-12-02T00:00:00Z");
    let o = comment_on(&case, &out, &["--check-run", "gate"]);
    let text = output_text(&o);
    assert!(
        text.contains(": neutral, not success: the pass rests on an acknowledgement GitHub did not confirm ("),
        "{text}"
    );
    let runs = case.fake.check_runs();
    let run = runs.last().unwrap();
    assert_eq!(run["conclusion"], "neutral", "{run}");
    assert!(
        run["output"]["title"]
            .as_str()
            .unwrap()
            .starts_with("gate: NOT CONFIRMED — "),
        "{run}"
    );
    let body = &case.fake.comments(51)[0].body;
    assert!(body.contains("### ⚠️ gate: NOT CONFIRMED — "), "{body}");
    assert!(!body.contains("gate: PASS"), "{body}");
    assert!(body.contains("the report's acknowledgement is not confirmed"), "{body}");
}

/// #28 item 2: a claim for another label (`bug`, which a maintainer did
/// add) is not an acknowledgement; `gate comment --acknowledge-label` names
/// the label `gate check` was given.
#[test]
fn the_comment_requires_the_acknowledge_label() {
    let case = ack_case(51);
    case.fake.add_event(51, "labeled", "bug", "octocat", ACK_AT);
    let (o, out, report) = case.check(MLP, &["--acknowledge-label", "bug"]);
    assert_eq!(o.status.code(), Some(0), "{}", output_text(&o));
    assert_eq!(report["summary"]["acknowledgement"]["label"], "bug");
    comment_on(&case, &out, &[]);
    let body = case.fake.comments(51)[0].body.clone();
    assert!(
        body.contains("| 📈 regressed, acknowledged (not confirmed) |"),
        "{body}"
    );
    assert!(!body.contains("acknowledged by"), "{body}");
    assert!(
        body.contains(&format!(
            "> - the report's acknowledgement is not confirmed (it names the label \\`bug\\`, not the acknowledge \
             label \\`{LABEL}\\` (--acknowledge-label)): its 1 acknowledged regression(s) are not shown as \
             accepted by anyone\n"
        )),
        "{body}"
    );
    assert_eq!(case.fake.count("GET", "/issues/51/labels"), 1, "only gate check asked");
    // Given the same label, it is confirmed, for the head the pull request
    // is at (`--pr` carries none, so it is read).
    comment_on(&case, &out, &["--acknowledge-label", "bug", "--pr", "51"]);
    let body = &case.fake.comments(51)[0].body;
    assert!(
        body.contains(&format!(
            "> - 1 regression(s) acknowledged by @\u{200D}octocat via \\`bug\\` at {ACK_AT}, on head {} \
             (confirmed on GitHub)\n",
            sha(0xbeef)
        )),
        "{body}"
    );
    assert_eq!(case.fake.count("GET", "/pulls/51"), 1);
}

/// Fills `pr` with `n` events that are not the acknowledge label's.
fn busy(fake: &Fake, pr: u64, n: usize) {
    for _ in 0..n {
        fake.add_event(pr, "commented", "", "someone", "2026-11-30T00:00:00Z");
    }
}

/// #28 item 4: the label added on page 1 and removed on page 31, past the
/// 30 pages of events gate reads: the PR's labels now say it is off.
#[test]
fn a_label_removed_past_the_pages_read_acknowledges_nothing() {
    let case = ack_case(52);
    case.fake.add_event(52, "labeled", LABEL, "octocat", ACK_AT);
    busy(&case.fake, 52, 3000);
    case.fake
        .add_event(52, "unlabeled", LABEL, "octocat", "2026-12-02T00:00:00Z");
    let (o, _, report) = case.check(MLP, &[]);
    assert_eq!(o.status.code(), Some(1), "{}", output_text(&o));
    assert_eq!(status_of(&report, "params"), "regressed");
    assert_eq!(report["summary"].get("acknowledgement"), None);
}

/// #28 item 4: the label is on, but its last `labeled` event may lie past
/// the events read (here removed and added again by someone else on page
/// 31): not confirmed, and the regression stays one.
#[test]
fn a_label_whose_events_are_not_all_read_is_unverified() {
    let case = ack_case(53);
    case.fake.add_event(53, "labeled", LABEL, "octocat", ACK_AT);
    busy(&case.fake, 53, 3000);
    case.fake
        .add_event(53, "unlabeled", LABEL, "someone", "2026-12-02T00:00:00Z");
    case.fake
        .add_event(53, "labeled", LABEL, "someone", "2026-12-02T00:00:01Z");
    let (o, _, report) = case.check(MLP, &[]);
    assert_eq!(o.status.code(), Some(1), "{}", output_text(&o));
    assert_eq!(status_of(&report, "params"), "regressed");
    assert!(
        report["summary"]["warnings"]
            .as_array()
            .unwrap()
            .contains(&json!(format!(
                "the `{LABEL}` label could not be verified, so 1 regression(s) stay regressions: the pull request \
                 has more than 3000 events and gate reads only the first 3000, so who added the label last is not known"
            ))),
        "{}",
        report["summary"]
    );
    assert_eq!(case.fake.count("GET", "/issues/53/events"), 30);
}

/// #28 item 4: the labels now and the events must agree: a label on the
/// pull request whose events end with its removal says nothing of who added
/// it.
#[test]
fn labels_and_events_must_agree() {
    let case = ack_case(56);
    case.fake.add_event(56, "labeled", LABEL, "octocat", ACK_AT);
    case.fake
        .add_event(56, "unlabeled", LABEL, "octocat", "2026-12-02T00:00:00Z");
    case.fake
        .state
        .lock()
        .unwrap()
        .labels_now
        .insert(56, vec![LABEL.to_string()]);
    let (o, _, report) = case.check(MLP, &[]);
    assert_eq!(o.status.code(), Some(1), "{}", output_text(&o));
    assert_eq!(status_of(&report, "params"), "regressed");
    assert!(
        report["summary"]["warnings"]
            .as_array()
            .unwrap()
            .contains(&json!(format!(
                "the `{LABEL}` label could not be verified, so 1 regression(s) stay regressions: the label is on \
                 the pull request, but its events do not say who added it"
            ))),
        "{}",
        report["summary"]
    );
}

/// #27 item 9: the label acknowledges only when a person who may write to
/// the repository added it: not a bot, not a triage or read role.
#[test]
fn only_someone_who_may_write_acknowledges() {
    let case = ack_case(54);
    let warning_of = |report: &Value| -> String {
        report["summary"]["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| w.as_str().unwrap().to_string())
            .find(|w| w.contains("could not be verified"))
            .unwrap_or_default()
    };
    case.fake.add_event(54, "labeled", LABEL, "github-actions[bot]", ACK_AT);
    let (o, _, report) = case.check(MLP, &[]);
    assert_eq!(o.status.code(), Some(1), "{}", output_text(&o));
    assert_eq!(
        warning_of(&report),
        format!(
            "the `{LABEL}` label could not be verified, so 1 regression(s) stay regressions: the label was added \
             by @github-actions[bot] at {ACK_AT}, a bot: only a person who may write to the repository acknowledges"
        )
    );
    case.fake
        .add_event(54, "unlabeled", LABEL, "octocat", "2026-12-02T00:00:00Z");
    case.fake
        .add_event(54, "labeled", LABEL, "triager", "2026-12-02T00:00:01Z");
    case.fake.permit("triager", "read");
    let (o, _, report) = case.check(MLP, &[]);
    assert_eq!(o.status.code(), Some(1), "{}", output_text(&o));
    assert_eq!(
        warning_of(&report),
        format!(
            "the `{LABEL}` label could not be verified, so 1 regression(s) stay regressions: the label was added \
             by @triager at 2026-12-02T00:00:01Z, whose permission on {REPO} is `read`: an acknowledgement needs \
             write, maintain or admin"
        )
    );
    // A maintainer's `permission` reads `write`.
    case.fake.permit("triager", "write");
    let (o, _, report) = case.check(MLP, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", output_text(&o));
    assert_eq!(report["summary"]["acknowledgement"]["by"], "triager");
    assert_eq!(case.fake.count("GET", "/collaborators/triager/permission"), 2);
}

/// #28 item 14: one deadline over all of a command's GitHub work. Each page
/// of comments answers in 1 s, well within its 5 s timeout, so without the
/// deadline the comment would be written (exit 0) after three pages.
#[test]
fn a_command_s_github_work_has_one_deadline() {
    let fake = Fake::start();
    let (tmp, ev) = setup_pr(&fake, 55);
    let out = tmp.path().join("out");
    for _ in 0..250 {
        fake.add_comment(55, "busy", "someone");
    }
    fake.fault(
        "GET",
        "/issues/55/comments",
        usize::MAX,
        FaultKind::Delay(Duration::from_secs(1)),
    );
    let o = gate(Some(&fake), Some(&ev))
        .env("GATE_GITHUB_DEADLINE_MS", "2000")
        .args(["comment", "--from"])
        .arg(&out)
        .output()
        .unwrap();
    let text = output_text(&o);
    assert_eq!(o.status.code(), Some(3), "{text}");
    assert!(
        text.contains(
            "error: gate's GitHub work ran past its deadline of 2 s while it tried to read the pull request's \
             comments (GET /"
        ),
        "{text}"
    );
    assert!(text.contains("raise GATE_GITHUB_DEADLINE_MS"), "{text}");
    assert_eq!(fake.count("POST", "/comments"), 0, "{text}");
    assert_no_token(&o, &out);
}

/// #43 item 14: a tuning variable that is not a whole number (`30s`,
/// `-1`, `1e3`, `1.5`, an attempt count out of 1..=10) is refused with the
/// accepted form, exit 2, before any request; it never becomes the default.
#[test]
fn a_malformed_tuning_variable_is_refused_with_the_accepted_form() {
    let fake = Fake::start();
    let (tmp, ev) = setup_pr(&fake, 56);
    let out = tmp.path().join("out");
    for (name, value, form) in [
        ("GATE_GITHUB_DEADLINE_MS", "30s", "a whole number of milliseconds"),
        ("GATE_GITHUB_DEADLINE_MS", "-1", "a whole number of milliseconds"),
        ("GATE_GITHUB_DEADLINE_MS", "1e3", "a whole number of milliseconds"),
        ("GATE_GITHUB_TIMEOUT_MS", "1.5", "a whole number of milliseconds"),
        (
            "GATE_GITHUB_BACKOFF_MS",
            "99999999999999999999999",
            "a whole number of milliseconds",
        ),
        ("GATE_GITHUB_ATTEMPTS", "0", "a whole number from 1 to 10"),
        ("GATE_GITHUB_ATTEMPTS", "11", "a whole number from 1 to 10"),
    ] {
        let o = gate(Some(&fake), Some(&ev))
            .env(name, value)
            .args(["comment", "--from"])
            .arg(&out)
            .output()
            .unwrap();
        let text = output_text(&o);
        assert_eq!(o.status.code(), Some(2), "{name}={value}: {text}");
        assert!(
            text.contains(&format!(
                "error: {name}={value:?} is not {form}\nhint: write digits only, e.g. `{name}="
            )),
            "{text}"
        );
        assert_no_token(&o, &out);
    }
    assert_eq!(fake.count("GET", "/comments"), 0);
    // Blank is unset; digits with spaces around them are the number.
    let o = gate(Some(&fake), Some(&ev))
        .env("GATE_GITHUB_DEADLINE_MS", " 600000 ")
        .env("GATE_GITHUB_ATTEMPTS", "")
        .args(["comment", "--from"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", output_text(&o));
}

/// #43 item 16: comments that cannot be read to their end (a `Link` that
/// leads back to a page already read, or more pages than gate reads) leave
/// it unknown whether gate's comment is there: a warning, nothing posted,
/// never a duplicate; exit 0 (the comment is not the verdict).
#[test]
fn comments_unreadable_to_their_end_post_nothing_with_a_warning() {
    for (what, next) in [("a loop", (|_| 1) as fn(usize) -> usize), ("endless", |n| n + 1)] {
        let fake = Fake::start();
        let (tmp, ev) = setup_pr(&fake, 57);
        let out = tmp.path().join("out");
        fake.state.lock().unwrap().link_next = Some(next);
        for _ in 0..2 {
            let o = gate(Some(&fake), Some(&ev))
                .args(["comment", "--from"])
                .arg(&out)
                .output()
                .unwrap();
            let text = output_text(&o);
            assert_eq!(o.status.code(), Some(0), "{what}: {text}");
            assert!(
                text.contains("warning: cannot read the comments of #57 to their end (more than 300 pages, or a `Link` header that leads back to a page already read)"),
                "{what}: {text}"
            );
            assert!(text.contains("nothing posted, rather than a duplicate"), "{text}");
            assert!(text.contains("hint: "), "{text}");
        }
        assert_eq!(fake.count("POST", "/comments"), 0, "{what}");
        let pages = fake.count("GET", "/comments");
        assert!(pages <= 2 * 300, "{what}: {pages} pages read");
    }
}

/// #16 item 3: a pull request whose `mlp.params` regressed shows its
/// figure over the stored reports of the target branch, oldest first.
#[test]
fn the_comment_shows_the_history_of_a_regressed_budget() {
    let fake = Fake::start();
    fake.state.lock().unwrap().pulls.insert(40, sha(0xbeef));
    let tmp = tempfile::tempdir().unwrap();
    let seed = tmp.path().join("seed");
    check_mlp(&seed);
    let chain: Vec<String> = (0..30).map(|i| format!("{i:02x}{}", "ab".repeat(19))).collect();
    fake.add_chain(&chain);
    fake.state.lock().unwrap().merge_base = Some(chain[1].clone());
    let seed_report: Value = serde_json::from_str(&std::fs::read_to_string(seed.join("report.json")).unwrap()).unwrap();
    let params = seed_report["components"]["mlp"]["metrics"]["params"]["value"]
        .as_f64()
        .unwrap();
    // Newest first: the baseline (chain[3]) and three older reports, drifting up.
    let stored = [(3, 0.66), (8, 0.6), (15, 0.55), (25, 0.5)];
    for (i, share) in stored {
        let mut r = seed_report.clone();
        let v = (params * share).round();
        r["commit"] = json!(chain[i]);
        r["components"]["mlp"]["metrics"]["params"]["value"] = json!(v);
        for res in r["results"].as_array_mut().unwrap() {
            if res["component"] == "mlp" && res["metric"] == "params" {
                res["measured"] = json!(v);
            }
        }
        fake.store_file(&format!("reports/{}.json", chain[i]), &r.to_string());
    }
    // Not a report: skipped, with a warning.
    fake.store_file(&format!("reports/{}.json", chain[20]), "{\"schema\": 1}");
    // A report whose commit is not a SHA: left out of history.json with a
    // warning, so the comment job does not refuse the file (#28 item 17).
    let mut odd = seed_report.clone();
    odd["commit"] = json!("refs/heads/main");
    fake.store_file(&format!("reports/{}.json", chain[12]), &odd.to_string());

    let ev = pr_event(tmp.path(), 40, &chain[0], &sha(0xbeef));
    let out = tmp.path().join("out");
    let o = gate(Some(&fake), Some(&ev))
        .args(["check", "--budgets", MLP, "--acknowledge-label", "", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", output_text(&o));
    let h: Value = serde_json::from_str(&std::fs::read_to_string(out.join("history.json")).unwrap()).unwrap();
    // The file a run writes, as its published schema describes it.
    let problems = crate::schema::conforms_to("history", &h);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    let series = h["series"].as_array().unwrap();
    let names: Vec<String> = series
        .iter()
        .map(|s| format!("{}.{}", s["component"].as_str().unwrap(), s["metric"].as_str().unwrap()))
        .collect();
    assert!(names.contains(&"mlp.params".to_string()), "{names:?}");
    let p = series.iter().find(|s| s["metric"] == "params").unwrap();
    let commits: Vec<Value> = p["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["commit"].clone())
        .collect();
    assert_eq!(
        commits,
        [
            json!(chain[25]),
            json!(chain[15]),
            json!(chain[8]),
            json!(chain[3]),
            Value::Null
        ]
    );
    let values: Vec<f64> = p["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["value"].as_f64().unwrap())
        .collect();
    assert_eq!(
        values,
        [
            (params * 0.5).round(),
            (params * 0.55).round(),
            (params * 0.6).round(),
            (params * 0.66).round(),
            params
        ]
    );
    assert!(
        output_text(&o).contains("warning: history: skipping"),
        "{}",
        output_text(&o)
    );
    assert!(
        output_text(&o).contains(
            "warning: a stored report's commit \"refs/heads/main\" is not a SHA: it is left out of the history"
        ),
        "{}",
        output_text(&o)
    );
    // Bounded: one listing in all (the history reuses the baseline's), one
    // read per stored report in reach, one page of 100 commits.
    assert_eq!(fake.count("GET", "/git/trees/"), 1, "{:?}", fake.log());
    assert!(fake.count("GET", "/contents/reports/") <= 6, "{:?}", fake.log());
    assert_eq!(fake.count("GET", "/commits?"), 1, "{:?}", fake.log());
    let md = std::fs::read_to_string(out.join("comment.md")).unwrap();
    let section = &md[md.find("#### History on the target branch").expect("a history section")..];
    assert!(
        section.contains(&format!("| `{}` | ", &chain[25][..10])) && section.contains("| this PR | "),
        "{section}"
    );
    assert!(section.contains("| budget | % of budget |"), "{section}");

    // The comment job renders the same history from the artifact.
    let o = gate(Some(&fake), Some(&ev))
        .args(["comment", "--from"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", output_text(&o));
    let body = fake.comments(40)[0].body.clone();
    assert!(body.contains("#### History on the target branch"), "{body}");

    // A forged point is left out with a warning; the rest of the history
    // is still shown (#28 item 17).
    let forged = std::fs::read_to_string(out.join("history.json"))
        .unwrap()
        .replacen(&chain[25], "<img src=x>", 1);
    std::fs::write(out.join("history.json"), forged).unwrap();
    edit_report(&out, |v| v["wall_seconds"] = json!(1.5)); // a change, so the comment is rewritten
    let o = gate(Some(&fake), Some(&ev))
        .args(["comment", "--from"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", output_text(&o));
    assert!(
        output_text(&o).contains("warning: history.json: mlp.params: 1 point(s) left out (a commit that is not a SHA"),
        "{}",
        output_text(&o)
    );
    let body = &fake.comments(40)[0].body;
    assert!(body.contains("#### History on the target branch"), "{body}");
    assert!(!body.contains("img src") && !body.contains(&chain[25][..10]), "{body}");
    assert!(body.contains(&chain[15][..10]), "{body}");
    assert_no_token(&o, &out);
}

/// examples/mlp.yaml without its timed budget and its ensemble: bytes
/// only, so a baseline of the same run passes every budget, every time.
fn bytes_only_spec(dir: &Path) -> PathBuf {
    let text = std::fs::read_to_string(root().join(MLP)).unwrap();
    let kept: String = text
        .lines()
        .take_while(|l| !l.starts_with("ensemble:"))
        .filter(|l| !l.trim_start().starts_with("step_time:"))
        .map(|l| format!("{l}\n"))
        .collect();
    let p = dir.join("bytes.yaml");
    std::fs::write(&p, kept).unwrap();
    p
}

/// The last `GitHub API: ...; N in this command so far` line's N.
fn calls_said(o: &Output) -> usize {
    let text = output_text(o);
    let line = text
        .lines()
        .rfind(|l| l.starts_with("GitHub API: "))
        .unwrap_or_else(|| panic!("no `GitHub API:` line:\n{text}"));
    line.rsplit("; ")
        .next()
        .and_then(|t| t.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{line}"))
}

/// #41 item 10: a pull request whose budgets all pass costs four requests
/// (compare, the store's one tree listing, a page of commits, the
/// baseline), reads no history, and says what it made; so does a push.
#[test]
fn a_passing_pull_request_asks_github_four_times_and_says_so() {
    let fake = Fake::start();
    let tmp = tempfile::tempdir().unwrap();
    let spec = bytes_only_spec(tmp.path());
    let seed = tmp.path().join("seed");
    let o = gate(None, None)
        .args(["check", "--baseline", "none", "--budgets"])
        .arg(&spec)
        .arg("--out")
        .arg(&seed)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", output_text(&o));
    let chain: Vec<String> = (0..12).map(|i| sha(0x700 + i)).collect();
    fake.add_chain(&chain);
    fake.state.lock().unwrap().merge_base = Some(chain[1].clone());
    let seed_report = std::fs::read_to_string(seed.join("report.json")).unwrap();
    for i in [3, 5, 7, 9] {
        fake.store_file(&format!("reports/{}.json", chain[i]), &seed_report);
    }
    let ev = pr_event(tmp.path(), 60, &chain[0], &sha(0xfeed));
    let out = tmp.path().join("out");
    let o = gate(Some(&fake), Some(&ev))
        .args(["check", "--acknowledge-label", "", "--budgets"])
        .arg(&spec)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", output_text(&o));
    assert!(output_text(&o).contains("2 first-parent steps"), "{}", output_text(&o));
    assert!(!out.join("history.json").exists());
    let asked: Vec<String> = fake.log().iter().map(|r| format!("{} {}", r.method, r.path)).collect();
    assert_eq!(asked.len(), 4, "{asked:#?}");
    assert_eq!(
        fake.count("GET", "/git/trees/gate-baselines?recursive=1"),
        1,
        "{asked:#?}"
    );
    assert_eq!(
        fake.count("GET", "/contents/reports/"),
        1,
        "the baseline only: {asked:#?}"
    );
    assert_eq!(calls_said(&o), 4, "{}", output_text(&o));
    assert!(
        output_text(&o).contains("read the baseline store 2"),
        "{}",
        output_text(&o)
    );

    // A push: the tree, a page of commits, the baseline; then the publish
    // (the branch, the file, the write).
    let before = fake.log().len();
    let o = gate(Some(&fake), None)
        .env("GITHUB_SHA", &chain[2])
        .args(["check", "--budgets"])
        .arg(&spec)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", output_text(&o));
    assert_eq!(fake.log().len() - before, 3, "{:#?}", &fake.log()[before..]);
    assert_eq!(calls_said(&o), 3);
    let before = fake.log().len();
    let o = gate(Some(&fake), None)
        .args(["baseline", "publish", "--sha", &chain[2], "--from"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", output_text(&o));
    assert_eq!(fake.log().len() - before, 3, "{:#?}", &fake.log()[before..]);
    assert_eq!(calls_said(&o), 3, "{}", output_text(&o));
    assert_no_token(&o, &out);
}

/// A store too large for one listing (GitHub's `truncated`) is probed
/// commit by commit; a store branch whose name has a `/` is listed through
/// the contents API, as a name in the trees API's path cannot hold one.
#[test]
fn a_truncated_listing_probes_and_a_slashed_branch_lists_by_contents() {
    let fake = Fake::start();
    let tmp = tempfile::tempdir().unwrap();
    let seed = tmp.path().join("seed");
    check_mlp(&seed);
    let chain: Vec<String> = (0..6).map(|i| sha(0x800 + i)).collect();
    fake.add_chain(&chain);
    fake.state.lock().unwrap().merge_base = Some(chain[1].clone());
    let mut base: Value = serde_json::from_str(&std::fs::read_to_string(seed.join("report.json")).unwrap()).unwrap();
    base["commit"] = json!(chain[3]);
    fake.store_file(&format!("reports/{}.json", chain[3]), &base.to_string());
    fake.state.lock().unwrap().tree_truncated = true;
    let ev = pr_event(tmp.path(), 61, &chain[0], &sha(0xfeed));
    let out = tmp.path().join("out");
    let o = gate(Some(&fake), Some(&ev))
        .args(["check", "--budgets", MLP, "--history", "1", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(matches!(o.status.code(), Some(0 | 1)), "{}", output_text(&o));
    let r: Value = serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    assert_eq!(r["baseline"]["commit"], json!(chain[3]), "{}", output_text(&o));
    // chain[1] and chain[2] probed (404), chain[3] read.
    assert_eq!(fake.count("GET", "/contents/reports/"), 3, "{:#?}", fake.log());

    let before = fake.count("GET", "/git/trees/");
    let o = gate(Some(&fake), Some(&ev))
        .args([
            "check",
            "--budgets",
            MLP,
            "--baseline-branch",
            "gate/baselines",
            "--out",
        ])
        .arg(&out)
        .output()
        .unwrap();
    assert!(matches!(o.status.code(), Some(0 | 1)), "{}", output_text(&o));
    assert_eq!(fake.count("GET", "/git/trees/"), before);
    assert_eq!(fake.count("GET", "/contents/reports?ref=gate/baselines"), 1);
    let r: Value = serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    assert_eq!(r["baseline"]["commit"], json!(chain[3]), "{}", output_text(&o));
}

/// Concurrent publishes: eight attempts, each after a randomised wait
/// (see store::publish_wait), before gate gives up.
#[test]
fn publish_outlasts_seven_concurrent_writers() {
    let fake = Fake::start();
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    check_mlp(&out);
    fake.fault(
        "PUT",
        "/contents/reports/",
        7,
        FaultKind::Status(409, "is at abc but expected def".into()),
    );
    let o = gate(Some(&fake), None)
        .args(["baseline", "publish", "--sha", &sha(0x900), "--from"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", output_text(&o));
    assert_eq!(fake.count("PUT", "/contents/"), 8);
    assert!(fake
        .file(&format!("reports/{}/{}.json", cpu_card(), sha(0x900)))
        .is_some());
}

/// A ruleset that restricts creating branches refuses the store's first
/// write (GitHub's 422, "Repository rule violations found"): publish stops
/// at once (no retry, no write to a branch that does not exist), exits 3
/// and says where the rule is and what to change.
#[test]
fn a_ruleset_that_blocks_the_store_branch_names_the_fix() {
    let fake = Fake::start();
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    check_mlp(&out);
    fake.fault(
        "POST",
        "/git/refs",
        usize::MAX,
        FaultKind::Status(
            422,
            "Repository rule violations found\n\nCannot create ref due to creations being restricted.".into(),
        ),
    );
    let o = gate(Some(&fake), None)
        .args(["baseline", "publish", "--sha", &sha(0xabc), "--from"])
        .arg(&out)
        .output()
        .unwrap();
    let text = output_text(&o);
    assert_eq!(o.status.code(), Some(3), "{text}");
    assert!(text.contains("Repository rule violations found"), "{text}");
    assert!(
        text.contains("hint:") && text.contains("Rulesets") && text.contains("gate-baselines*"),
        "{text}"
    );
    assert_eq!(fake.count("POST", "/git/refs"), 1, "a rule is not retried");
    assert_eq!(fake.count("PUT", "/contents/"), 0, "nothing written");
    assert!(!fake.state.lock().unwrap().branch_exists);
}

/// A GitHub App's token: `GET /user` refuses it (as it refuses the
/// GITHUB_TOKEN), and GitHub writes its comments as `<app-slug>[bot]`.
const APP: &str = "gate-app[bot]";

#[test]
fn an_app_token_s_comment_is_found_again_by_author() {
    let fake = Fake::start();
    fake.as_app(APP);
    let (tmp, ev) = setup_pr(&fake, 60);
    let out = tmp.path().join("out");
    // Planted markers: a person's, another app's, and the Actions bot's
    // (which is not this token's either).
    let mallory = fake.add_comment(60, "<!-- gate:id=mlp.yaml -->\nplanted", "mallory");
    let other = fake.add_comment(60, "<!-- gate:id=mlp.yaml -->\nplanted", "other-app[bot]");
    let actions = fake.add_comment(60, "<!-- gate:id=mlp.yaml -->\nplanted", "github-actions[bot]");
    let comment = |extra: &[&str]| {
        gate(Some(&fake), Some(&ev))
            .args(["comment", "--from"])
            .arg(&out)
            .args(extra)
            .output()
            .unwrap()
    };
    // First run: created as the app, and the app's login named.
    let o = comment(&["--author", APP]);
    assert_eq!(o.status.code(), Some(0), "{}", output_text(&o));
    assert!(output_text(&o).contains("created comment"), "{}", output_text(&o));
    assert!(
        output_text(&o).contains("are by @mallory, @other-app[bot], @github-actions[bot], not by @gate-app[bot]"),
        "{}",
        output_text(&o)
    );
    assert!(
        !output_text(&o).contains("warning: GitHub wrote"),
        "{}",
        output_text(&o)
    );
    // GET /user is not asked when the workflow says who gate is.
    assert_eq!(fake.count("GET", "/user"), 0);
    // Second run, a changed report: the app's comment is updated, no other.
    edit_report(&out, |v| v["results"][0]["measured"] = json!(12345.0));
    let o = comment(&["--author", APP]);
    assert_eq!(o.status.code(), Some(0), "{}", output_text(&o));
    assert!(output_text(&o).contains("updated comment"), "{}", output_text(&o));
    let all = fake.comments(60);
    assert_eq!(all.len(), 4, "never a duplicate");
    for planted in [mallory, other, actions] {
        let c = all.iter().find(|c| c.id == planted).unwrap();
        assert!(c.body.ends_with("planted"), "a comment not ours was edited: {c:?}");
    }
    let ours = all.iter().find(|c| c.login == APP).unwrap();
    assert!(ours.body.contains("0.01177 MiB"), "{}", ours.body);
    // The same through the environment (the action's `comment-author`).
    let o = gate(Some(&fake), Some(&ev))
        .env("GATE_COMMENT_AUTHOR", APP)
        .args(["comment", "--from"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(output_text(&o).contains("already says this"), "{}", output_text(&o));
    assert_eq!(fake.comments(60).len(), 4);
    assert_no_token(&o, &out);
}

#[test]
fn without_author_an_app_token_is_told_which_login_to_pass() {
    let fake = Fake::start();
    fake.as_app(APP);
    let (tmp, ev) = setup_pr(&fake, 61);
    let out = tmp.path().join("out");
    let run = || {
        gate(Some(&fake), Some(&ev))
            .args(["comment", "--from"])
            .arg(&out)
            .output()
            .unwrap()
    };
    let o = run();
    assert_eq!(o.status.code(), Some(0), "{}", output_text(&o));
    // GET /user refused the installation token: gate assumed the Actions bot,
    // GitHub wrote the comment as the app, and the log says the fix.
    assert_eq!(fake.count("GET", "/user"), 1);
    let text = output_text(&o);
    assert!(
        text.contains("warning: GitHub wrote the comment as @gate-app[bot], not as @github-actions[bot]"),
        "{text}"
    );
    assert!(text.contains("hint: pass `--author gate-app[bot]`"), "{text}");
    // The next run without --author cannot trust the app's comment (it
    // cannot tell it from another app's planted marker): it says so, and
    // which login to pass.
    let o = run();
    let text = output_text(&o);
    assert!(
        text.contains("are by @gate-app[bot], not by @github-actions[bot]"),
        "{text}"
    );
    assert!(text.contains("hint: if @gate-app[bot] is the GitHub App"), "{text}");
    assert_eq!(fake.count("PATCH", "/comments/"), 0);
}

#[test]
fn a_bad_author_is_bad_input() {
    let fake = Fake::start();
    let (tmp, ev) = setup_pr(&fake, 62);
    let out = tmp.path().join("out");
    for bad in ["", "a b", "-x", "x[bot][bot]", "evil/../x"] {
        let o = gate(Some(&fake), Some(&ev))
            .args(["comment", &format!("--author={bad}"), "--from"])
            .arg(&out)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{bad:?}: {}", output_text(&o));
        assert!(output_text(&o).contains("hint: "), "{}", output_text(&o));
    }
    assert!(fake.log().is_empty(), "nothing asked of GitHub on bad input");
}

#[test]
fn a_check_run_carries_the_verdict_the_comment_s_summary_and_annotations_in_fifties() {
    let fake = Fake::start();
    let (tmp, ev) = setup_pr(&fake, 63);
    let out = tmp.path().join("out");
    let comment = |extra: &[&str]| {
        gate(Some(&fake), Some(&ev))
            .args(["comment", "--from"])
            .arg(&out)
            .args(extra)
            .output()
            .unwrap()
    };
    // Not asked: no check run.
    let o = comment(&[]);
    assert_eq!(o.status.code(), Some(0), "{}", output_text(&o));
    assert_eq!(fake.count("POST", "/check-runs"), 0);

    // A passing report: success, no annotations, the comment's own text.
    let o = comment(&["--check-run", "gate: cpu"]);
    assert_eq!(o.status.code(), Some(0), "{}", output_text(&o));
    assert!(
        output_text(&o).contains(&format!(
            "check run `gate: cpu` on {}: success (0 annotation(s))",
            sha(0xbeef)
        )),
        "{}",
        output_text(&o)
    );
    let runs = fake.check_runs();
    assert_eq!(runs.len(), 1);
    let run = &runs[0];
    assert_eq!(run["name"], "gate: cpu");
    assert_eq!(run["head_sha"], sha(0xbeef), "the PR's head, not a merge commit");
    assert_eq!(run["status"], "completed");
    assert_eq!(run["conclusion"], "success");
    let body = fake.comments(63)[0].body.clone();
    let (_, comment_text) = body.split_once('\n').unwrap();
    assert_eq!(
        run["output"]["summary"], comment_text,
        "the summary is the comment's text"
    );
    assert!(
        run["output"]["title"]
            .as_str()
            .unwrap()
            .starts_with("gate: PASS — 9 of 9 budgets pass"),
        "{}",
        run["output"]["title"]
    );

    // 120 failing budgets: failure, 50 annotations with the create and
    // the rest in updates of 50 to the same run, each at its line.
    edit_report(&out, |v| {
        let row = v["results"][0].clone();
        v["results"] = Value::Array(
            (1..=120)
                .map(|i| {
                    let mut r = row.clone();
                    r["status"] = json!("fail");
                    r["line"] = json!(i);
                    r["metric"] = json!(format!("m{i}"));
                    r
                })
                .collect(),
        );
        v["summary"]["status"] = json!("fail");
        v["summary"]["failed"] = json!(120);
        v["summary"]["passed"] = json!(0);
    });
    let o = comment(&["--check-run", "gate: cpu"]);
    assert_eq!(o.status.code(), Some(0), "{}", output_text(&o));
    let runs = fake.check_runs();
    assert_eq!(runs.len(), 2);
    let run = &runs[1];
    assert_eq!(run["conclusion"], "failure");
    let notes = run["output"]["annotations"].as_array().unwrap();
    assert_eq!(notes.len(), 120, "{}", output_text(&o));
    assert_eq!(fake.count("POST", "/check-runs"), 2);
    assert_eq!(fake.count("PATCH", &format!("/check-runs/{}", run["id"])), 2);
    for (i, a) in notes.iter().enumerate() {
        assert_eq!(a["path"], "examples/mlp.yaml");
        assert_eq!(a["start_line"], json!(i + 1));
        assert_eq!(a["annotation_level"], "failure");
        assert!(
            a["message"].as_str().unwrap().starts_with(&format!("mlp.m{}: ", i + 1)),
            "{a}"
        );
    }
    assert_no_token(&o, &out);
}

#[test]
fn a_refused_check_run_is_a_warning_and_the_comment_still_posts() {
    let fake = Fake::start();
    let (tmp, ev) = setup_pr(&fake, 64);
    let out = tmp.path().join("out");
    fake.fault(
        "POST",
        "/check-runs",
        usize::MAX,
        FaultKind::Status(403, "Resource not accessible by integration".into()),
    );
    let o = gate(Some(&fake), Some(&ev))
        .args(["comment", "--check-run", "gate", "--from"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", output_text(&o));
    let text = output_text(&o);
    assert!(text.contains("created comment"), "{text}");
    assert!(text.contains("warning: no check run `gate`"), "{text}");
    assert!(
        text.contains("hint: the token cannot write check runs: give the comment job `permissions: { checks: write }`"),
        "{text}"
    );
    assert_eq!(fake.comments(64).len(), 1);
    // A bad name is bad input, before anything is asked of GitHub.
    let before = fake.log().len();
    let o = gate(Some(&fake), Some(&ev))
        .args(["comment", "--check-run", " ", "--from"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", output_text(&o));
    assert_eq!(fake.log().len(), before);
}

/// GitHub checks a check run's summary in bytes, not characters (422
/// "summary exceeds a maximum bytesize of 65535": github/docs#35252): a
/// comment of many multi-byte characters, within the comment's own limit,
/// still gets its check run, the summary cut at a character boundary.
#[test]
fn a_check_run_summary_of_multibyte_text_is_cut_to_githubs_bytes() {
    let fake = Fake::start();
    let (tmp, ev) = setup_pr(&fake, 65);
    let out = tmp.path().join("out");
    edit_report(&out, |v| {
        let row = v["results"][0].clone();
        v["results"] = Value::Array(
            (1..=600)
                .map(|i| {
                    let mut r = row.clone();
                    r["status"] = json!("fail");
                    r["line"] = json!(i);
                    r["metric"] = json!(format!("m{i}—✂️—{}", "模型".repeat(20)));
                    r
                })
                .collect(),
        );
        v["summary"]["status"] = json!("fail");
        v["summary"]["failed"] = json!(600);
        v["summary"]["passed"] = json!(0);
    });
    let o = gate(Some(&fake), Some(&ev))
        .args(["comment", "--check-run", "gate report: cpu", "--from"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", output_text(&o));
    let text = output_text(&o);
    assert!(!text.contains("warning: no check run"), "{text}");
    let body = fake.comments(65)[0].body.clone();
    assert!(
        body.len() > 65_535,
        "the comment is longer than the summary may be: {}",
        body.len()
    );
    let runs = fake.check_runs();
    assert_eq!(runs.len(), 1, "{text}");
    let summary = runs[0]["output"]["summary"].as_str().unwrap();
    assert!(summary.len() <= 65_535, "{} bytes", summary.len());
    assert!(summary.ends_with('…'));
}

/// An anchor (#51 item 4): `gate baseline publish --anchor v1.4.0` stores
/// the report as `anchors/<card>/v1.4.0.json` beside the commit's; `gate check
/// --anchor auto` reads the spec's `anchor:` from there and judges every
/// `drift:` since it; a name the store lacks is a warning saying how to
/// store it.
#[test]
fn an_anchor_published_by_name_is_what_check_measures_drift_since() {
    let fake = Fake::start();
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    check_mlp(&out);
    let commit = sha(0xa0);
    let o = gate(Some(&fake), None)
        .args(["baseline", "publish", "--sha", &commit, "--anchor", "v1.4.0", "--from"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", output_text(&o));
    let anchor: Value = serde_json::from_str(
        &fake
            .file(&format!("anchors/{}/v1.4.0.json", cpu_card()))
            .expect("stored"),
    )
    .unwrap();
    assert_eq!(anchor["commit"], json!(commit));
    assert!(fake.file(&format!("reports/{}/{commit}.json", cpu_card())).is_some());
    // A name that is no tag is refused before anything is written.
    let o = gate(Some(&fake), None)
        .args(["baseline", "publish", "--sha", &commit, "--anchor", "../main", "--from"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", output_text(&o));

    let spec = |name: &str| {
        let p = tmp.path().join(format!("{name}.yaml"));
        let text = std::fs::read_to_string(root().join(MLP)).unwrap().replacen(
            "version: 1\n",
            &format!("version: 1\nanchor: {name}\n"),
            1,
        );
        std::fs::write(&p, text.replacen("defaults:\n", "defaults:\n  drift: 6%\n", 1)).unwrap();
        p
    };
    let check = |spec: &Path| {
        let out = tmp.path().join("checked");
        let o = gate(Some(&fake), None)
            .args(["check", "--baseline", "none", "--anchor", "auto", "--budgets"])
            .arg(spec)
            .arg("--out")
            .arg(&out)
            .output()
            .unwrap();
        let report: Value = serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
        (o, report)
    };
    let (o, report) = check(&spec("v1.4.0"));
    let params = report["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["metric"] == "params")
        .unwrap()
        .clone();
    assert_eq!(params["drift"]["anchor"], "v1.4.0", "{}", output_text(&o));
    assert_eq!(params["drift"]["anchor_commit"], json!(commit));
    assert_eq!(params["drift"]["exceeded"], false);
    let (_, report) = check(&spec("v9"));
    let warnings = report["summary"]["warnings"].as_array().unwrap();
    assert!(
        warnings.contains(&json!(
            "no drift judged: no anchor `v9` (the baseline store (branch `gate-baselines`) has no \
             `anchors/CARD/v9.json`: run `gate baseline publish --anchor v9` where v9 was built)"
        )),
        "{warnings:?}"
    );
}
