//! Child-process isolation. `gate check` profiles each component in a child
//! (`gate profile`) of the same binary, so one model's allocations, CUDA
//! context or crash never touch another's figures. The child writes one
//! JSON event per line on stdout: each phase as it starts, then the
//! measurement. A child that dies leaves the last phase it announced.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};

use serde::{Deserialize, Serialize};

use super::measurement::{Failure, Measurement, Phase};

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChildEvent {
    /// A phase starts; the figures measured so far come with it.
    Phase {
        phase: Phase,
        so_far: Box<Measurement>,
    },
    Done(Box<Measurement>),
}

/// Writes one event line (the child side).
pub fn emit(out: &mut impl Write, event: &ChildEvent) -> std::io::Result<()> {
    let line = serde_json::to_string(event).map_err(std::io::Error::other)?;
    writeln!(out, "{line}")?;
    out.flush()
}

/// Options the parent passes through to each child.
#[derive(Debug, Clone)]
pub struct ChildArgs {
    /// Extra arguments for `gate profile` (e.g. `--backend cuda`).
    pub extra: Vec<String>,
    /// Compute threads for the child (1 keeps CPU byte counts repeatable).
    pub threads: usize,
}

impl Default for ChildArgs {
    fn default() -> Self {
        ChildArgs {
            extra: Vec::new(),
            threads: 1,
        }
    }
}

/// Runs `exe profile --budgets SPEC --component NAME` and collects its measurement.
/// `Err` is an infrastructure problem (the child could not be started at all).
pub fn run_child(
    exe: &Path,
    spec: &Path,
    component: &str,
    args: &ChildArgs,
    on_phase: &mut dyn FnMut(Phase),
) -> std::io::Result<Measurement> {
    let mut child = Command::new(exe)
        .arg("profile")
        .arg("--budgets")
        .arg(spec)
        .arg("--component")
        .arg(component)
        .args(&args.extra)
        // One compute thread: the CPU matmul kernels keep a scratch buffer per
        // worker thread, and which workers run a kernel varies between runs,
        // so more threads would make the byte counts wobble.
        .env("RAYON_NUM_THREADS", args.threads.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let stdout = child.stdout.take().expect("stdout is piped");
    let mut stderr = child.stderr.take().expect("stderr is piped");
    // Drain stderr on its own thread so a chatty child never blocks on a full pipe.
    let err_thread = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = stderr.read_to_end(&mut buf);
        String::from_utf8_lossy(&buf).into_owned()
    });
    let mut last_phase = Phase::Setup;
    let mut so_far = Measurement::default();
    let mut done = None;
    for line in BufReader::new(stdout).lines() {
        let Ok(line) = line else { break };
        match serde_json::from_str::<ChildEvent>(&line) {
            Ok(ChildEvent::Phase { phase, so_far: m }) => {
                last_phase = phase;
                so_far = *m;
                on_phase(phase);
            }
            Ok(ChildEvent::Done(m)) => done = Some(*m),
            Err(_) => {} // not ours (a library printing to stdout); ignore
        }
    }
    let status = child.wait()?;
    let stderr_text = err_thread.join().unwrap_or_default();
    if let Some(m) = done {
        if status.success() {
            return Ok(m);
        }
    }
    so_far.failure = Some(Failure {
        phase: last_phase,
        reason: describe_exit(&status, &stderr_text),
    });
    Ok(so_far)
}

/// A one-line reason for a child that ended without a measurement.
fn describe_exit(status: &std::process::ExitStatus, stderr: &str) -> String {
    let lines: Vec<&str> = stderr.lines().map(str::trim).collect();
    // A panic's message is the line after "panicked at"; otherwise the last
    // line that is not a backtrace or a note.
    let panic_message = lines
        .iter()
        .position(|l| l.contains("panicked at"))
        .and_then(|i| lines.get(i + 1))
        .copied();
    let detail = panic_message
        .or_else(|| {
            lines
                .iter()
                .rev()
                .find(|l| {
                    !l.is_empty()
                        && !l.starts_with("note:")
                        && !l.starts_with("stack backtrace")
                        && !l.starts_with("at ")
                        && !l.chars().next().is_some_and(|c| c.is_ascii_digit())
                })
                .copied()
        })
        .unwrap_or("")
        .to_string();
    let how = exit_how(status);
    let oom = stderr.contains("memory allocation of") || stderr.to_ascii_lowercase().contains("out of memory");
    let mut s = if oom { format!("out of memory ({how})") } else { how };
    if !detail.is_empty() {
        s.push_str(": ");
        s.push_str(&detail);
    }
    s
}

#[cfg(unix)]
fn exit_how(status: &std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(c), _) => format!("the profile exited with status {c}"),
        (None, Some(sig)) => {
            let name = match sig {
                6 => "SIGABRT",
                9 => "SIGKILL",
                11 => "SIGSEGV",
                15 => "SIGTERM",
                2 => "SIGINT",
                _ => "signal",
            };
            format!("the profile was killed by {name} ({sig})")
        }
        _ => "the profile ended abnormally".into(),
    }
}

#[cfg(not(unix))]
fn exit_how(status: &std::process::ExitStatus) -> String {
    format!("the profile ended with {status}")
}
