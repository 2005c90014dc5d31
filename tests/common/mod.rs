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
