//! A reader that closes stdout early (`gate check | head -1`, `| true`) must
//! not turn the verdict into a panic (exit 101): every command that prints
//! to stdout exits with its own code.
#![cfg(unix)]

use crate::common;

use std::path::Path;
use std::process::Stdio;

const PASSING: &str = "version: 1\ndevice: { name: card, capacity: 4 GiB, reserve: 300 MiB }\ndefaults: { seed: 7, timing: { warmup: 0, steps: 1 } }\ncomponents:\n  m:\n    workload: mlp\n    batch_size: 4\n    config: { input_dim: 8, hidden_dim: 8, hidden_layers: 1, output_dim: 2 }\n    budgets:\n      params: < 64 MiB\n";

/// Runs gate with a stdout pipe whose reading end is already closed, as
/// after `| true`; returns the exit code and stderr.
fn run_closed(args: &[&str], dir: &Path) -> (Option<i32>, String) {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = common::gate()
        .current_dir(dir)
        .args(args)
        .stdin(Stdio::null())
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn check_with_a_closed_stdout_exits_with_the_verdict() {
    let t = tempfile::tempdir().unwrap();
    std::fs::write(t.path().join("budgets.yaml"), PASSING).unwrap();
    let (code, stderr) = run_closed(&["check", "--baseline", "none", "--out", "out"], t.path());
    assert_eq!(code, Some(0), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(t.path().join("out/report.json").exists());
    // A failing verdict stays a failure.
    std::fs::write(
        t.path().join("budgets.yaml"),
        PASSING.replace("params: < 64 MiB", "params: < 1 B"),
    )
    .unwrap();
    let (code, stderr) = run_closed(&["check", "--baseline", "none", "--out", "out"], t.path());
    assert_eq!(code, Some(1), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn every_other_printing_command_survives_a_closed_stdout() {
    let t = tempfile::tempdir().unwrap();
    std::fs::write(t.path().join("budgets.yaml"), PASSING).unwrap();
    std::fs::create_dir(t.path().join("shard")).unwrap();
    std::fs::copy(
        concat!(env!("GATE_REPO_ROOT"), "/tests/fixtures/report-h200.json"),
        t.path().join("shard/report.json"),
    )
    .unwrap();
    for (args, want) in [
        (vec!["validate"], 0),
        (vec!["doctor"], 0),
        (vec!["completions", "bash"], 0),
        (vec!["man"], 0),
        (vec!["init", "--force", "--no-workflows"], 0),
        // Its verdict is the fixture's; what matters is that it is not a panic.
        (vec!["merge", "--out", "merged", "shard"], -1),
    ] {
        let (code, stderr) = run_closed(&args, t.path());
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert_ne!(code, Some(101), "{args:?}: {stderr}");
        if want >= 0 {
            assert_eq!(code, Some(0), "{args:?}: {stderr}");
        }
    }
}
