//! In GitHub Actions no line gate prints acts as a workflow command unless
//! gate means it to (issue #28 item 11): every subcommand's error paths are
//! driven with names, paths and arguments that carry `\n::error …`, `\r`
//! and `##[…]`, and both streams are read the way the runner reads them
//! (actions/runner, ActionCommand.cs: a line is a command when it starts
//! with `::NAME…::` after leading whitespace, or holds `##[NAME]` anywhere;
//! lines end at `\n` or `\r`). stderr holds no command at all; on stdout
//! the only ones outside gate's `::stop-commands::` guard are the guard's
//! own and gate's annotations, and the guard is closed when gate exits.

use crate::common;
use crate::github_fake;

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};

use serde_json::Value;

/// Text that would issue commands (an annotation, a second one after a
/// `\r`, an indented one, the old `##[` form) if printed raw.
const HOSTILE: &str =
    "x\n::error file=budgets.yaml::INJECTED\r::warning::INJECTED\n  ::add-mask::INJECTED ##[error]INJECTED";

const SPEC: &str = "version: 1\ndevice: { name: card, capacity: 4 GiB, reserve: 300 MiB }\ndefaults: { seed: 7, timing: { warmup: 0, steps: 1 } }\ncomponents:\n  m:\n    workload: mlp\n    batch_size: 4\n    config: { input_dim: 8, hidden_dim: 8, hidden_layers: 1, output_dim: 2 }\n    budgets:\n      params: < 64 MiB\n";

/// The name of the command the runner would read from `line`, if any.
fn command(line: &str) -> Option<String> {
    let body = line.trim_start();
    if let Some(rest) = body.strip_prefix("::") {
        if let Some(end) = rest.find("::") {
            return Some(rest[..end].split(' ').next().unwrap_or("").to_string());
        }
    }
    let start = line.find("##[")? + 3;
    let end = line[start..].find(']')? + start;
    Some(line[start..end].split(' ').next().unwrap_or("").to_string())
}

/// Reads `o` as the runner would; panics on any line that would act as a
/// command gate did not mean.
fn assert_no_injected_command(case: &str, o: &Output) {
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    for line in stderr.split(['\n', '\r']) {
        assert!(
            command(line).is_none(),
            "{case}: stderr line acts as a command: {line:?}\n{stderr}"
        );
    }
    let mut guard: Option<String> = None;
    let mut opened = 0;
    for line in stdout.split(['\n', '\r']) {
        let Some(name) = command(line) else { continue };
        if let Some(token) = &guard {
            // Stopped: only the token resumes.
            if &name == token {
                guard = None;
            }
            continue;
        }
        if name == "stop-commands" {
            let token = line.trim_start()["::stop-commands::".len()..].to_string();
            let hex = token.strip_prefix("gate-").unwrap_or("");
            assert!(
                hex.len() == 32 && hex.chars().all(|c| c.is_ascii_hexdigit()),
                "{case}: guard token {token:?}"
            );
            guard = Some(token);
            opened += 1;
        } else {
            assert!(
                matches!(name.as_str(), "error" | "warning") && line.starts_with("::"),
                "{case}: stdout line acts as a command outside the guard: {line:?}\n{stdout}"
            );
        }
    }
    assert!(opened > 0, "{case}: no guard on stdout\n{stdout}");
    assert!(
        guard.is_none(),
        "{case}: the guard is left open (later steps' commands would be ignored)\n{stdout}"
    );
}

fn gate_in_actions(dir: &Path) -> std::process::Command {
    let mut c = common::gate();
    c.current_dir(dir)
        .env("GITHUB_ACTIONS", "true")
        .env("CARGO_NET_OFFLINE", "true")
        .stdin(Stdio::null());
    c
}

/// A report (the h200 fixture) with hostile names: component, commit, spec.
fn hostile_report(negative: bool) -> Value {
    let mut r: Value = serde_json::from_str(include_str!("../fixtures/report-h200.json")).unwrap();
    let name = format!("dqn{HOSTILE}");
    let mut c = r["components"]["dqn"].take();
    if negative {
        c["metrics"]["params"]["value"] = (-5).into();
    }
    let comps = r["components"].as_object_mut().unwrap();
    comps.remove("dqn");
    comps.insert(name.clone(), c);
    for res in r["results"].as_array_mut().unwrap() {
        if res["component"] == "dqn" {
            res["component"] = name.clone().into();
        }
    }
    r["commit"] = format!("\n::error::{HOSTILE}").into();
    r["spec"] = format!("budgets.yaml{HOSTILE}").into();
    r
}

fn write_json(path: &Path, v: &Value) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, serde_json::to_string_pretty(v).unwrap()).unwrap();
}

/// Every subcommand, on an error path that quotes hostile text.
#[test]
fn no_subcommand_prints_a_workflow_command_from_its_input() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path();
    std::fs::write(dir.join("budgets.yaml"), SPEC).unwrap();
    let missing: PathBuf = dir.join(format!("no{HOSTILE}")).join("budgets.yaml");

    // Output folders: a report with a negative metric (refused, quoting its
    // names), a readable one with hostile names, and a clean one.
    let negative = dir.join("negative");
    write_json(&negative.join("report.json"), &hostile_report(true));
    write_json(&negative.join("baseline.json"), &hostile_report(true));
    let named = dir.join("named");
    write_json(&named.join("report.json"), &hostile_report(false));
    let clean = dir.join("clean");
    write_json(
        &clean.join("report.json"),
        &serde_json::from_str(include_str!("../fixtures/report-h200.json")).unwrap(),
    );
    let reports = dir.join("reports");
    write_json(&reports.join("a.json"), &hostile_report(false));
    write_json(&reports.join("b.json"), &hostile_report(true));

    // A harness whose manifest, and one whose features, carry a line break.
    let manifest = dir.join("manifest");
    std::fs::create_dir_all(&manifest).unwrap();
    std::fs::write(
        manifest.join("budgets.yaml"),
        SPEC.replace(
            "version: 1\n",
            "version: 1\nharness: { package: p, bin: b, manifest: \"m\\n::error::INJECTED/Cargo.toml\" }\n",
        ),
    )
    .unwrap();
    let features = dir.join("features");
    std::fs::create_dir_all(&features).unwrap();
    std::fs::write(
        features.join("budgets.yaml"),
        SPEC.replace(
            "version: 1\n",
            "version: 1\nharness: { package: p, bin: b, features: [\"f\\n::error::INJECTED\"] }\n",
        ),
    )
    .unwrap();
    std::fs::write(
        features.join("Cargo.toml"),
        "[package]\nname = \"p\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[[bin]]\nname = \"b\"\npath = \"b.rs\"\n",
    )
    .unwrap();
    std::fs::write(features.join("b.rs"), "fn main() {}\n").unwrap();

    let p = |p: &Path| p.as_os_str().to_owned();
    let s = |s: &str| std::ffi::OsString::from(s);
    let cases: Vec<(&str, Vec<std::ffi::OsString>)> = vec![
        (
            "validate: a missing spec",
            vec![s("validate"), s("--budgets"), p(&missing)],
        ),
        (
            "validate: a bad argument",
            vec![s("validate"), s("--backend"), s(HOSTILE)],
        ),
        ("check: a missing spec", vec![s("check"), s("--budgets"), p(&missing)]),
        (
            "check: a negative baseline",
            vec![
                s("check"),
                s("--baseline"),
                p(&negative.join("baseline.json")),
                s("--out"),
                p(&dir.join("out")),
            ],
        ),
        (
            "check: a harness manifest",
            vec![s("check"), s("--budgets"), p(&manifest.join("budgets.yaml"))],
        ),
        (
            "check: harness features",
            vec![s("check"), s("--budgets"), p(&features.join("budgets.yaml"))],
        ),
        ("fit: an unknown component", vec![s("fit"), s(HOSTILE)]),
        (
            "fit: a missing spec",
            vec![s("fit"), s("m"), s("--budgets"), p(&missing)],
        ),
        (
            "comment: a negative report",
            vec![s("comment"), s("--from"), p(&negative)],
        ),
        (
            "comment: a missing folder",
            vec![s("comment"), s("--from"), p(&missing)],
        ),
        ("merge: a negative report", vec![s("merge"), p(&negative), p(&clean)]),
        ("merge: specs that differ", vec![s("merge"), p(&named), p(&clean)]),
        (
            "baseline publish: a negative report",
            vec![s("baseline"), s("publish"), s("--from"), p(&negative)],
        ),
        (
            "history: names and commits",
            vec![s("history"), s("params"), s("--reports"), p(&reports)],
        ),
        (
            "history: an unknown metric",
            vec![s("history"), s(HOSTILE), s("--reports"), p(&reports)],
        ),
        (
            "history: an unknown component",
            vec![
                s("history"),
                s("params"),
                s("--component"),
                s(HOSTILE),
                s("--reports"),
                p(&reports),
            ],
        ),
        (
            "init: a hostile folder",
            vec![
                s("init"),
                s("--no-workflows"),
                s("--dir"),
                p(&dir.join(format!("init{HOSTILE}"))),
            ],
        ),
        ("doctor", vec![s("doctor")]),
    ];
    for (case, args) in cases {
        let o = gate_in_actions(dir).args(&args).output().unwrap();
        let all = common::output_text(&o);
        assert!(
            case == "doctor" || all.contains("INJECTED"),
            "{case}: the hostile text is not quoted, so this case tests nothing:\n{all}"
        );
        assert_no_injected_command(case, &o);
    }
}

/// Each run's guard token comes from the OS's random source: two runs of the
/// same command never share one, and none is derived from the input.
#[test]
fn the_guard_token_is_fresh_each_run() {
    let t = tempfile::tempdir().unwrap();
    let tokens: Vec<String> = (0..2)
        .map(|_| {
            let o = gate_in_actions(t.path()).args(["validate"]).output().unwrap();
            let out = String::from_utf8_lossy(&o.stdout).into_owned();
            out.lines()
                .next()
                .and_then(|l| l.strip_prefix("::stop-commands::"))
                .unwrap_or_else(|| panic!("the guard is the first line: {out}"))
                .to_string()
        })
        .collect();
    assert_ne!(tokens[0], tokens[1]);
}

/// Ctrl-C (exit 130 from the signal thread) closes the guard too.
#[cfg(target_os = "linux")]
#[test]
fn an_interrupted_run_closes_its_guard() {
    use std::os::unix::fs::OpenOptionsExt;
    use std::time::{Duration, Instant};
    let t = tempfile::tempdir().unwrap();
    std::fs::write(t.path().join("budgets.yaml"), SPEC).unwrap();
    let fifo = t.path().join("baseline.json");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo(3) on a path in our temp folder.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let gate = gate_in_actions(t.path())
        .args(["check", "--baseline"])
        .arg(&fifo)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // gate has the FIFO open for reading once a non-blocking writer can open it.
    let started = Instant::now();
    let _writer = loop {
        match std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&fifo)
        {
            Ok(w) => break w,
            Err(_) => {
                assert!(
                    started.elapsed() < Duration::from_secs(60),
                    "gate never opened the baseline"
                );
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    };
    // SAFETY: kill(2) on our child.
    assert_eq!(unsafe { libc::kill(gate.id() as libc::pid_t, libc::SIGINT) }, 0);
    let o = gate.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(130), "{}", common::output_text(&o));
    assert_no_injected_command("interrupted", &o);
}

/// `gate comment` prints the comment's address as the API gave it: an
/// `html_url` with a line break starts no command.
#[test]
fn the_apis_html_url_starts_no_command() {
    use crate::github_fake::{Fake, REPO, TOKEN};
    let fake = Fake::start();
    fake.state.lock().unwrap().pulls.insert(9, format!("{:040x}", 2));
    fake.state.lock().unwrap().html_url = Some(format!("https://github.com/{HOSTILE}"));
    let t = tempfile::tempdir().unwrap();
    let event = t.path().join("event.json");
    std::fs::write(
        &event,
        github_fake::event(
            "pull-request-opened",
            serde_json::json!({
                "number": 9,
                "pull_request": {
                    "number": 9,
                    "base": { "ref": "main", "sha": format!("{:040x}", 1), "repo": { "full_name": REPO } },
                    "head": { "ref": "feature", "sha": format!("{:040x}", 2), "repo": { "full_name": "fork/repo" } },
                }
            }),
        )
        .to_string(),
    )
    .unwrap();
    let out = t.path().join("out");
    let gate = || {
        let mut c = gate_in_actions(Path::new(env!("GATE_REPO_ROOT")));
        c.env("GITHUB_API_URL", &fake.url)
            .env("GITHUB_TOKEN", TOKEN)
            .env("GITHUB_REPOSITORY", REPO)
            .env("GITHUB_EVENT_PATH", &event)
            .env("GATE_GITHUB_TIMEOUT_MS", "5000");
        c
    };
    let o = gate()
        .args(["check", "--budgets", "examples/mlp.yaml", "--baseline", "none", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(out.join("report.json").exists(), "{}", common::output_text(&o));
    assert_no_injected_command("check", &o);
    let o = gate().args(["comment", "--from"]).arg(&out).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", common::output_text(&o));
    assert!(
        common::output_text(&o).contains("INJECTED"),
        "{}",
        common::output_text(&o)
    );
    assert_no_injected_command("comment: html_url", &o);
}

/// A panic's message is printed inert, and the guard is still closed
/// (exit 101 unwinds out of main; the guard closes at exit).
#[test]
fn a_panic_prints_inert_and_closes_the_guard() {
    let t = tempfile::tempdir().unwrap();
    let o = gate_in_actions(t.path())
        .env("GATE_INJECT_PANIC", HOSTILE)
        .args(["validate"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(101), "{}", common::output_text(&o));
    assert!(
        common::output_text(&o).contains("INJECTED"),
        "{}",
        common::output_text(&o)
    );
    assert_no_injected_command("panic", &o);
}

/// Stored reports the GitHub layer reads for `--baseline auto`: the
/// comment's history skips one refused for a negative figure with a
/// warning that quotes its names (the GitHub layer's own log line), and a
/// baseline refused so says why in an annotation; both inert.
#[test]
fn stored_reports_from_the_api_start_no_command() {
    use crate::github_fake::{Fake, REPO, TOKEN};
    let fake = Fake::start();
    let t = tempfile::tempdir().unwrap();
    let chain: Vec<String> = (0..6).map(|i| format!("{:040x}", 0x100 + i)).collect();
    fake.add_chain(&chain);
    fake.state.lock().unwrap().merge_base = Some(chain[0].clone());
    let event = t.path().join("event.json");
    std::fs::write(
        &event,
        github_fake::event(
            "pull-request-opened",
            serde_json::json!({
                "number": 9,
                "pull_request": {
                    "number": 9,
                    "base": { "ref": "main", "sha": chain[0], "repo": { "full_name": REPO } },
                    "head": { "ref": "topic", "sha": format!("{:040x}", 0xfeed), "repo": { "full_name": REPO } },
                }
            }),
        )
        .to_string(),
    )
    .unwrap();
    let gate = || {
        let mut c = gate_in_actions(Path::new(env!("GATE_REPO_ROOT")));
        c.env("GITHUB_API_URL", &fake.url)
            .env("GITHUB_TOKEN", TOKEN)
            .env("GITHUB_REPOSITORY", REPO)
            .env("GITHUB_EVENT_PATH", &event)
            .env("GATE_GITHUB_TIMEOUT_MS", "5000");
        c
    };
    let seed = t.path().join("seed");
    let o = gate()
        .args(["check", "--budgets", "examples/mlp.yaml", "--baseline", "none", "--out"])
        .arg(&seed)
        .output()
        .unwrap();
    assert!(seed.join("report.json").exists(), "{}", common::output_text(&o));
    let clean: Value = serde_json::from_str(&std::fs::read_to_string(seed.join("report.json")).unwrap()).unwrap();
    let mut hostile = clean.clone();
    let mut c = hostile["components"]["mlp"].take();
    c["metrics"]["params"]["value"] = (-5).into();
    hostile["components"] = serde_json::json!({ format!("mlp{HOSTILE}"): c });
    let store = |sha: &String, report: &Value| {
        let mut r = report.clone();
        r["commit"] = sha.clone().into();
        fake.store_file(&format!("reports/{sha}.json"), &r.to_string());
    };
    // The baseline is clean, older reports (the comment's history) are not.
    // Its `params` is half this run's, so `params` regresses and the
    // history, read only for a failing or regressed budget, is read.
    let mut smaller = clean.clone();
    let half = (clean["components"]["mlp"]["metrics"]["params"]["value"]
        .as_f64()
        .unwrap()
        / 2.0)
        .round();
    smaller["components"]["mlp"]["metrics"]["params"]["value"] = half.into();
    for r in smaller["results"].as_array_mut().unwrap() {
        if r["component"] == "mlp" && r["metric"] == "params" {
            r["measured"] = half.into();
        }
    }
    store(&chain[0], &smaller);
    for sha in &chain[1..4] {
        store(sha, &hostile);
    }
    let o = gate()
        .args(["check", "--budgets", "examples/mlp.yaml", "--out"])
        .arg(t.path().join("out"))
        .output()
        .unwrap();
    let all = common::output_text(&o);
    assert!(all.contains("history: skipping") && all.contains("INJECTED"), "{all}");
    assert_no_injected_command("check: stored history", &o);
    // The baseline itself refused.
    store(&chain[0], &hostile);
    let o = gate()
        .args(["check", "--budgets", "examples/mlp.yaml", "--out"])
        .arg(t.path().join("out"))
        .output()
        .unwrap();
    assert!(
        common::output_text(&o).contains("INJECTED"),
        "{}",
        common::output_text(&o)
    );
    assert_no_injected_command("check: stored baseline", &o);
}
