//! A file gate finds in a folder or an artifact is read only when it is a
//! regular file (#28 item 15): a FIFO named `report.json` blocked `gate
//! merge` forever at the open. Each command here must answer at once.
#![cfg(unix)]

use crate::common;

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const REPORT: &str = concat!(env!("GATE_REPO_ROOT"), "/tests/fixtures/report-h200.json");

fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo(3) on a path in the test's own temp folder.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
}

/// Runs `cmd`; a gate still blocked after a minute is killed and fails the test.
fn answers(mut cmd: Command) -> Output {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(60) {
            child.kill().unwrap();
            panic!(
                "gate is blocked: {:?}",
                common::output_text(&child.wait_with_output().unwrap())
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

#[test]
fn merge_refuses_a_fifo_named_report_json_at_once() {
    let t = tempfile::tempdir().unwrap();
    let shard = t.path().join("shard");
    std::fs::create_dir(&shard).unwrap();
    mkfifo(&shard.join("report.json"));
    let mut cmd = common::gate();
    cmd.arg("merge").arg(&shard).arg("--out").arg(t.path().join("out"));
    let out = answers(cmd);
    let text = common::output_text(&out);
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(
        text.contains("report.json: it is a FIFO (named pipe), not a regular file"),
        "{text}"
    );
    assert!(text.contains("hint: "), "{text}");
}

#[test]
fn comment_reads_a_report_beside_fifos_and_warns_about_them() {
    let t = tempfile::tempdir().unwrap();
    std::fs::copy(REPORT, t.path().join("report.json")).unwrap();
    for name in ["baseline.json", "history.json", "pr.json"] {
        mkfifo(&t.path().join(name));
    }
    let mut cmd = common::gate();
    cmd.arg("comment").arg("--from").arg(t.path());
    let out = answers(cmd);
    let text = common::output_text(&out);
    // No pull request (pr.json is no file): nothing to post, exit 0.
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("not a pull request"), "{text}");
    for name in ["baseline.json", "history.json"] {
        assert!(
            text.contains(&format!("{name}: it is a FIFO (named pipe), not a regular file")),
            "{name}: {text}"
        );
    }
}

#[test]
fn comment_refuses_a_device_or_folder_as_its_report() {
    let t = tempfile::tempdir().unwrap();
    std::fs::create_dir(t.path().join("report.json")).unwrap();
    let mut cmd = common::gate();
    cmd.arg("comment").arg("--from").arg(t.path());
    let out = answers(cmd);
    let text = common::output_text(&out);
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(
        text.contains("report.json: it is a folder, not a regular file"),
        "{text}"
    );
}

#[test]
fn history_skips_a_fifo_among_the_reports() {
    let t = tempfile::tempdir().unwrap();
    std::fs::copy(REPORT, t.path().join("a.json")).unwrap();
    mkfifo(&t.path().join("b.json"));
    let mut cmd = common::gate();
    cmd.args(["history", "params", "--reports"]).arg(t.path());
    let out = answers(cmd);
    let text = common::output_text(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(
        text.contains("b.json: cannot read the baseline") && text.contains("it is a FIFO (named pipe)"),
        "{text}"
    );
}
