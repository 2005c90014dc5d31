//! Ctrl-C: SIGINT or SIGTERM to `gate check` stops its profile (child)
//! processes, writes no output (a fresh folder stays empty, older files are
//! left as they were) and exits 130. A `gate check` killed outright
//! (SIGKILL) takes its profile with it.
#![cfg(target_os = "linux")]

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// An MLP slow enough to be caught mid-profile (200 timed steps).
fn slow_spec(dir: &Path) -> PathBuf {
    let p = dir.join("budgets.yaml");
    std::fs::write(
        &p,
        "version: 1\ndevice: { name: card, capacity: 4 GiB, reserve: 300 MiB }\ndefaults: { seed: 7, timing: { warmup: 0, steps: 200 } }\ncomponents:\n  slow:\n    workload: mlp\n    batch_size: 256\n    config: { input_dim: 512, hidden_dim: 1024, hidden_layers: 3, output_dim: 3 }\n    budgets:\n      params: < 64 MiB\n",
    )
    .unwrap();
    p
}

/// gate's TMPDIR for a run on `spec`: a folder beside it, where its
/// harness request goes (removed by gate's signal handler, looked at by the
/// tests; a SIGKILLed run's stays there and goes with the test's folder).
fn tmp_of(spec: &Path) -> PathBuf {
    spec.parent().unwrap().join("tmp")
}

/// What gate left in its TMPDIR.
fn left_in_tmp(spec: &Path) -> Vec<std::ffi::OsString> {
    std::fs::read_dir(tmp_of(spec))
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect()
}

fn start(spec: &Path, out: &Path) -> Child {
    std::fs::create_dir_all(tmp_of(spec)).unwrap();
    common::gate()
        .current_dir(env!("GATE_REPO_ROOT"))
        .env("TMPDIR", tmp_of(spec))
        .args(["check", "--baseline", "none", "--budgets"])
        .arg(spec)
        .arg("--out")
        .arg(out)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// The pids whose parent is `ppid` (from /proc).
fn children_of(ppid: u32) -> Vec<u32> {
    let mut v = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // pid (comm) state ppid ...: comm may hold spaces, so split after the last ')'.
        let Some(rest) = stat.rsplit_once(')').map(|r| r.1) else {
            continue;
        };
        if rest.split_whitespace().nth(1).and_then(|p| p.parse().ok()) == Some(ppid) {
            v.push(pid);
        }
    }
    v
}

/// Waits until `gate check` has started its profile and the profile is busy.
fn wait_for_profile(gate: &Child) -> u32 {
    let t = Instant::now();
    loop {
        // gate's other child beside each profile is its watchdog shell.
        let profile = children_of(gate.id())
            .into_iter()
            .find(|p| std::fs::read_to_string(format!("/proc/{p}/comm")).is_ok_and(|c| c.trim() != "sh"));
        if let Some(pid) = profile {
            // Well into the profile (past start-up), not at its very first instruction.
            std::thread::sleep(Duration::from_millis(400));
            return pid;
        }
        assert!(t.elapsed() < Duration::from_secs(60), "no profile process started");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        // A zombie has stopped running too.
        Ok(s) => s.rsplit_once(')').is_some_and(|r| r.1.trim_start().starts_with('Z')),
    }
}

fn wait_exit(child: &mut Child, limit: Duration) -> std::process::ExitStatus {
    let t = Instant::now();
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        if t.elapsed() > limit {
            let _ = child.kill();
            panic!("gate check did not stop within {limit:?} of the signal");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn signal(pid: u32, sig: i32) {
    // SAFETY: kill(2) on a child of this test.
    assert_eq!(unsafe { libc::kill(pid as libc::pid_t, sig) }, 0);
}

fn stderr(child: &mut Child) -> String {
    use std::io::Read;
    let mut s = String::new();
    child.stderr.take().unwrap().read_to_string(&mut s).unwrap();
    s
}

#[test]
fn sigint_stops_the_profiles_and_writes_nothing() {
    let t = tempfile::tempdir().unwrap();
    let spec = slow_spec(t.path());
    let out = t.path().join("out");
    let mut gate = start(&spec, &out);
    let profile = wait_for_profile(&gate);
    signal(gate.id(), libc::SIGINT);
    let status = wait_exit(&mut gate, Duration::from_secs(10));
    let err = stderr(&mut gate);
    assert_eq!(status.code(), Some(130), "{err}");
    assert!(err.contains("interrupted by SIGINT"), "{err}");
    assert!(gone(profile), "the profile {profile} still runs");
    // The handler removed the harness's request folder.
    assert_eq!(left_in_tmp(&spec), Vec::<std::ffi::OsString>::new());
    // Nothing written: the folder holds no output (and no temp file).
    let left: Vec<_> = std::fs::read_dir(&out)
        .map(|d| d.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn sigterm_leaves_the_old_outputs_as_they_were() {
    let t = tempfile::tempdir().unwrap();
    let spec = slow_spec(t.path());
    let out = t.path().join("out");
    std::fs::create_dir_all(&out).unwrap();
    for name in ["report.json", "junit.xml", "comment.md"] {
        std::fs::write(out.join(name), format!("old {name}")).unwrap();
    }
    let mut gate = start(&spec, &out);
    let profile = wait_for_profile(&gate);
    signal(gate.id(), libc::SIGTERM);
    let status = wait_exit(&mut gate, Duration::from_secs(10));
    let err = stderr(&mut gate);
    assert_eq!(status.code(), Some(130), "{err}");
    assert!(err.contains("interrupted by SIGTERM"), "{err}");
    assert!(gone(profile), "the profile {profile} still runs");
    assert_eq!(left_in_tmp(&spec), Vec::<std::ffi::OsString>::new());
    for name in ["report.json", "junit.xml", "comment.md"] {
        assert_eq!(std::fs::read_to_string(out.join(name)).unwrap(), format!("old {name}"));
    }
    assert_eq!(std::fs::read_dir(&out).unwrap().count(), 3);
}

#[test]
fn a_killed_gate_takes_its_profile_with_it() {
    let t = tempfile::tempdir().unwrap();
    let spec = slow_spec(t.path());
    let out = t.path().join("out");
    let mut gate = start(&spec, &out);
    let profile = wait_for_profile(&gate);
    gate.kill().unwrap(); // SIGKILL: no handler runs
    gate.wait().unwrap();
    let t0 = Instant::now();
    while !gone(profile) {
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "orphaned profile {profile} still runs"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!out.join("report.json").exists());
}

use crate::github_fake;

/// A tiny spec that checks in well under a second.
const QUICK: &str = "version: 1\ndevice: { name: card, capacity: 4 GiB, reserve: 300 MiB }\ndefaults: { seed: 7, timing: { warmup: 0, steps: 1 } }\ncomponents:\n  m:\n    workload: mlp\n    batch_size: 4\n    config: { input_dim: 8, hidden_dim: 8, hidden_layers: 1, output_dim: 2 }\n    budgets:\n      params: < 64 MiB\n";

#[test]
fn a_signal_while_reading_a_baseline_from_a_fifo_exits_130_at_once() {
    use std::os::unix::fs::OpenOptionsExt;
    let t = tempfile::tempdir().unwrap();
    let spec = t.path().join("budgets.yaml");
    std::fs::write(&spec, QUICK).unwrap();
    let fifo = t.path().join("baseline.json");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo(3) on a path in our temp folder.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let out = t.path().join("out");
    for sig in [libc::SIGINT, libc::SIGTERM] {
        let mut gate = common::gate()
            .args(["check", "--budgets"])
            .arg(&spec)
            .arg("--baseline")
            .arg(&fifo)
            .arg("--out")
            .arg(&out)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // A non-blocking open for writing succeeds once gate has the FIFO
        // open for reading: gate is then blocked reading a baseline that never
        // comes (the writer stays open and writes nothing).
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
        signal(gate.id(), sig);
        let status = wait_exit(&mut gate, Duration::from_secs(20));
        let err = stderr(&mut gate);
        assert_eq!(status.code(), Some(130), "{err}");
        let name = if sig == libc::SIGINT { "SIGINT" } else { "SIGTERM" };
        assert!(err.contains(&format!("interrupted by {name}")), "{err}");
        assert!(!out.exists(), "nothing is written");
    }
}

#[test]
fn a_signal_while_waiting_on_the_github_api_exits_130_at_once() {
    let fake = github_fake::Fake::start();
    fake.state.lock().unwrap().pulls.insert(5, format!("{:040x}", 0xbeef));
    fake.fault(
        "GET",
        "/issues/5/comments",
        usize::MAX,
        github_fake::FaultKind::Delay(Duration::from_secs(30)),
    );
    let t = tempfile::tempdir().unwrap();
    let spec = t.path().join("budgets.yaml");
    std::fs::write(&spec, QUICK).unwrap();
    let out = t.path().join("out");
    let o = common::gate()
        .args(["check", "--baseline", "none", "--budgets"])
        .arg(&spec)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        out.join("report.json").exists(),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let event = t.path().join("event.json");
    let head = format!("{:040x}", 0xbeef);
    std::fs::write(
        &event,
        github_fake::event(
            "pull-request-opened",
            serde_json::json!({
                "number": 5,
                "pull_request": {
                    "number": 5,
                    "base": { "ref": "main", "sha": format!("{:040x}", 1), "repo": { "full_name": github_fake::REPO } },
                    "head": { "ref": "topic", "sha": head, "repo": { "full_name": github_fake::REPO } },
                }
            }),
        )
        .to_string(),
    )
    .unwrap();
    let mut gate = common::gate()
        .args(["comment", "--from"])
        .arg(&out)
        .env("GITHUB_API_URL", &fake.url)
        .env("GITHUB_TOKEN", github_fake::TOKEN)
        .env("GITHUB_REPOSITORY", github_fake::REPO)
        .env("GITHUB_EVENT_PATH", &event)
        .env("GITHUB_EVENT_NAME", "pull_request")
        .env("GATE_GITHUB_TIMEOUT_MS", "60000")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while fake.count("GET", "/issues/5/comments") == 0 {
        assert!(
            gate.try_wait().unwrap().is_none(),
            "gate comment ended before asking for the comments"
        );
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "gate never asked for the comments"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    signal(gate.id(), libc::SIGINT);
    // Far below the 30 s the fake holds the answer back.
    let status = wait_exit(&mut gate, Duration::from_secs(10));
    let err = stderr(&mut gate);
    assert_eq!(status.code(), Some(130), "{err}");
    assert!(err.contains("interrupted by SIGINT"), "{err}");
}
