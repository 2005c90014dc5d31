//! Child-process isolation. `gate check` profiles each component in a child
//! (`gate profile`) of the same binary, so one model's allocations, CUDA
//! context or crash never touch another's figures. The child writes one
//! JSON event per line on stdout: each phase as it starts, then the
//! measurement. A child that dies leaves the last phase it announced.
//!
//! Here: running one profile and turning what it left into a measurement.
//! The jobs around it have a module each: `signals` (the children a
//! signal reaches, and the run's stage), `command` (the one command
//! builder and its environment), `events` (reading the child's stdout)
//! and `death` (how a child's end is read). Their public items keep their
//! paths, `gate_runner::child::X`.

use std::io::{Read, Write};
use std::path::Path;

use gate_contract::measurement::{Failure, FailureKind, Measurement, Phase};
use gate_contract::protocol::ChildEvent;

mod command;
mod death;
mod events;
mod signals;

use command::profile_command;
use death::{describe_exit, exit_kind, no_measurement, panic_kind, STDERR_KEPT};
use events::{read_events, Events};
use signals::{spawn, wait_listed, Watchdog, RUNNING};

pub use command::{child_env, command, is_passed, pass_framework_settings, tie, PASS_ENV};
pub use death::{signal_name, status_words, Tail};
pub use signals::{
    begin_writing, forget_scratch, forward_signals, interrupted, scratch, spawn_helper, stopping, Helper,
};

/// How a profile child's panic hook starts its one line on stderr: the
/// panic's message and where it was raised (`... at src/model.rs:12:5`),
/// which Rust's own message puts on a line of its own.
pub const PANIC_LINE: &str = "gate: the profile panicked: ";

/// The line after [`PANIC_LINE`] that says the panic's kind as the
/// framework's adapter judged it (`model`, `out_of_memory`, `device`): a
/// framework or cudarc error that panics instead of returning is still the
/// adapter's to tell, and the parent takes the kind from here, not from
/// the message's words.
pub const PANIC_KIND_LINE: &str = "gate: the panic's kind: ";

/// Whether a failed measurement is the infrastructure's fault (a CUDA or
/// driver error other than out of memory; a profile that crashed, failed
/// its set-up, or ended without its measurement): no figure to judge the
/// model by. See [`FailureKind`].
pub fn infrastructure_failure(f: &Failure) -> bool {
    f.kind.is_infrastructure()
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
    /// Whether profiles side by side take turns to time their steps
    /// ([`profile_all`](crate::profile_all) then makes the lock file below).
    /// On one GPU, yes: the device time-slices between the processes' work.
    /// On the CPU, no: each profile has a core of its own, and the other core
    /// runs the other profile's untimed phases whether or not it times;
    /// measured on the repository's spec, the turns left a core idle 11.6 s
    /// of a 49 s run for step times no steadier (docs/performance.md).
    pub take_turns: bool,
    /// The lock file children take turns on to time their steps (see `timing_lock`).
    pub timing_lock: Option<std::path::PathBuf>,
}

impl Default for ChildArgs {
    fn default() -> Self {
        ChildArgs {
            extra: Vec::new(),
            threads: 1,
            take_turns: false,
            timing_lock: None,
        }
    }
}

/// Runs `exe profile --request FILE --component NAME` and collects its
/// measurement (`request`: the installed gate's request file, the
/// validated spec as JSON; the harness reads no YAML).
/// `Err` is an infrastructure problem (the child could not be started at all).
pub fn run_child(
    exe: &Path,
    request: &Path,
    component: &str,
    args: &ChildArgs,
    on_phase: &mut dyn FnMut(Phase),
) -> std::io::Result<Measurement> {
    let mut cmd = profile_command(exe, request, component, args);
    // Phases are timed here, from the events as they arrive: the child's
    // start-up (`setup`) counts too, and a crashed phase keeps its time.
    let started = std::time::Instant::now();
    let mut child = spawn(&mut cmd)?;
    // What the profile starts dies with it even if gate is SIGKILLed.
    let watchdog = Watchdog::start(child.id());
    let stdout = child.stdout.take().expect("stdout is piped");
    let mut stderr = child.stderr.take().expect("stderr is piped");
    // Drain stderr on its own thread so a chatty child never blocks on a
    // full pipe; only its end is kept (a reason is read from its last lines).
    let err_thread = std::thread::spawn(move || {
        let mut tail = Tail::new(STDERR_KEPT);
        let mut buf = [0u8; 8192];
        while let Ok(n) = stderr.read(&mut buf) {
            if n == 0 {
                break;
            }
            tail.push(&buf[..n]);
        }
        tail.text()
    });
    let events = read_events(stdout, started, on_phase);
    let status = wait_listed(&RUNNING, &mut child, || {
        watchdog.into_iter().for_each(Watchdog::stand_down)
    });
    let profile_seconds = Some(started.elapsed().as_secs_f64());
    let status = status?;
    let stderr_text = err_thread.join().unwrap_or_default();
    Ok(measurement_of(exe, events, &status, &stderr_text, profile_seconds))
}

/// What a finished profile leaves: its measurement, or the figures it had
/// so far with the failure that ended it (a protocol broken, a crash, an
/// exit without its measurement).
fn measurement_of(
    exe: &Path,
    events: Events,
    status: &std::process::ExitStatus,
    stderr_text: &str,
    profile_seconds: Option<f64>,
) -> Measurement {
    if events.dones > 1 {
        // Never a figure of either: the harness's protocol is broken.
        let program = exe.file_name().unwrap_or(exe.as_os_str()).to_string_lossy();
        let mut m = Measurement {
            phase_seconds: events.phase_seconds,
            profile_seconds,
            ..Measurement::default()
        };
        m.failure = Some(Failure {
            phase: events.last_phase,
            reason: format!(
                "protocol error: `{program} profile` wrote {} `done` events; a profile writes one",
                events.dones
            ),
            kind: FailureKind::Process,
        });
        return m;
    }
    if status.success() {
        if let Some(mut m) = events.done {
            m.phase_seconds = events.phase_seconds;
            m.profile_seconds = profile_seconds;
            // A figure no measurement can have is the harness's protocol
            // broken, not a model to judge (#43): never clamped to 0.
            if let Some(what) = drop_impossible(&mut m) {
                let program = exe.file_name().unwrap_or(exe.as_os_str()).to_string_lossy();
                m.failure = Some(Failure {
                    phase: events.last_phase,
                    reason: format!("protocol error: `{program} profile` measured {what}"),
                    kind: FailureKind::Process,
                });
            }
            return m;
        }
    }
    let (reason, kind) = why_it_ended(exe, &events, status, stderr_text);
    let mut so_far = events.so_far;
    let (reason, kind) = match drop_impossible(&mut so_far) {
        Some(what) => {
            let program = exe.file_name().unwrap_or(exe.as_os_str()).to_string_lossy();
            (
                format!("protocol error: `{program} profile` measured {what} (then: {reason})"),
                FailureKind::Process,
            )
        }
        None => (reason, kind),
    };
    so_far.phase_seconds = events.phase_seconds;
    so_far.profile_seconds = profile_seconds;
    so_far.failure = Some(Failure {
        phase: events.last_phase,
        reason,
        kind,
    });
    so_far
}

/// Why a profile ended without its measurement, and whose fault that is.
fn why_it_ended(
    exe: &Path,
    events: &Events,
    status: &std::process::ExitStatus,
    stderr_text: &str,
) -> (String, FailureKind) {
    if status.success() && events.done.is_none() {
        (no_measurement(exe, events), FailureKind::Process)
    } else {
        let (reason, oom) = describe_exit(status, stderr_text);
        // The allocator's out of memory aborts: the model's, as out of
        // memory. A panic is of the kind its adapter said; any other crash
        // the model's or the process's by how it ended, never by the words
        // it printed.
        let kind = if oom {
            FailureKind::OutOfMemory
        } else {
            match (exit_kind(status, events.last_phase), panic_kind(stderr_text)) {
                (FailureKind::Model, Some(said)) => said,
                (by_exit, _) => by_exit,
            }
        };
        (reason, kind)
    }
}

/// Takes out of `m` every figure no measurement can have, and says the
/// first in words: a size or a time that is negative or not finite, a size
/// past 2^64 bytes, a negative ratio of times. Losses may be any finite
/// number. Taken out, not kept: the report never shows a figure gate did
/// not believe.
fn drop_impossible(m: &mut Measurement) -> Option<String> {
    use gate_spec::metric::{Metric, Unit};
    let bad = |metric: Metric, v: f64| {
        let signed = matches!(metric, Metric::Loss | Metric::LossRatio);
        !v.is_finite() || (!signed && v < 0.0) || (metric.unit() == Unit::Bytes && v > u64::MAX as f64)
    };
    let mut first = None;
    let mut note = |name: &str, metric: Metric, v: f64| {
        if first.is_none() {
            let (unit, never) = match metric.unit() {
                Unit::Bytes => (" bytes", "sizes are never negative and never past 2^64 bytes"),
                Unit::Ms => (" ms", "times are never negative"),
                Unit::One | Unit::Unknown => ("", "ratios of times are never negative"),
            };
            first = Some(format!("`{name}` = {v:e}{unit}: {never}"));
        }
    };
    m.values.retain(|&k, &mut v| {
        let keep = !bad(k, v);
        if !keep {
            note(k.name(), k, v);
        }
        keep
    });
    for (list, name, metric) in [
        (&mut m.step_times_ms, "a step time", Metric::StepTime),
        (&mut m.step_time_ratios, "a step time ratio", Metric::StepTimeRatio),
    ] {
        if let Some(&v) = list.iter().find(|&&v| bad(metric, v)) {
            note(name, metric, v);
            list.clear();
        }
    }
    first
}
