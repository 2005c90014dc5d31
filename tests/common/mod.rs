//! What the integration tests share: the built `gate` with a clean
//! environment. A test run inside GitHub Actions (gate's own CI) must not
//! hand the binary the job's GitHub context: with `--baseline auto` (the
//! default) it would look for a baseline on GitHub, and with
//! `GITHUB_STEP_SUMMARY` it would write into the job's summary.
#![allow(dead_code)] // each test crate uses a part of it

use std::process::{Command, Output};

/// The built `gate`: no `GITHUB_*` or `RUNNER_*` variables, no injected
/// fault, no colour. Tests that rehearse Actions set what they need.
pub fn gate() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_gate"));
    for (k, _) in std::env::vars_os() {
        let k = k.to_string_lossy();
        if k.starts_with("GITHUB_") || k.starts_with("RUNNER_") || k.starts_with("GATE_") || k == "CI" {
            cmd.env_remove(&*k);
        }
    }
    cmd.env("NO_COLOR", "1");
    cmd
}

/// Output bytes as text.
pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A finished command's stdout, then stderr, as text (for messages and searches).
pub fn output_text(o: &Output) -> String {
    format!("{}\n{}", text(&o.stdout), text(&o.stderr))
}

/// Copies the folder `from` to `to`, leaving out `target` folders: an
/// adopter crate as a team would check it out.
pub fn copy_crate(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_name() == "target" {
            continue;
        }
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_crate(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), dest).unwrap();
        }
    }
}

/// The stock gate run in an adopter's folder, its harness built into this
/// checkout's `target/` (so one adopter's build reuses the last one's).
pub fn gate_for_adopter(dir: &std::path::Path, args: &[&str]) -> Output {
    gate()
        .args(args)
        .current_dir(dir)
        .env(
            "CARGO_TARGET_DIR",
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target"),
        )
        .env_remove("CARGO_BUILD_TARGET")
        .output()
        .expect("the gate binary runs")
}
