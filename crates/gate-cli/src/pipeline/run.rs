//! The steps of `gate check`'s run around its profiles: the previous
//! outputs cleared, the children's arguments, the GPU lock, the profiles'
//! events, their measurements gathered into component reports, and the
//! outputs decided and written.

use std::collections::BTreeMap;
use std::time::Instant;

use crate::errors::CliError;
use crate::pipeline::conclude::{conclude, reserve, Conclusion};
use crate::pipeline::emit::Emitter;
use crate::pipeline::harness::Loaded;
use crate::pipeline::output::OutputSet;
use gate_contract::event::Event;
use gate_contract::measurement::Failure;
use gate_contract::report::Report;
use gate_probe::Backend;
use gate_runner::exit::Exit;
use gate_runner::{ChildArgs, Progress};
use gate_spec::hint::Problem;

/// The files a run's set holds (and `timeline-*.svg`).
pub(crate) const OUTPUT_FILES: [&str; 7] = [
    "report.json",
    "shard.json",
    "junit.xml",
    "comment.md",
    "pr.json",
    "baseline.json",
    "history.json",
];

/// Removes the previous run's outputs from `out`, if any, and says so.
pub(crate) fn remove_previous_outputs(out: &std::path::Path) {
    let mut previous: Vec<String> = std::fs::read_dir(out)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|f| OUTPUT_FILES.contains(&f.as_str()) || (f.starts_with("timeline-") && f.ends_with(".svg")))
        .collect();
    if previous.is_empty() {
        return;
    }
    previous.sort();
    let Ok(mut set) = OutputSet::begin(out) else { return };
    previous.iter().for_each(|f| set.remove(f));
    if set.commit().is_ok() {
        eprintln!(
            "note: removed the previous run's outputs from {} ({}): this run wrote none",
            out.display(),
            previous.join(", ")
        );
    }
}

/// A `/proc/meminfo` line's value (`key` with its colon), in KiB.
pub(crate) fn meminfo_kib(text: &str, key: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with(key))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// The arguments each profile's child gets: the backend, and whether to emulate the spec's capacity.
pub(crate) fn child_args(backend: Backend, emulate_capacity: bool) -> ChildArgs {
    let mut child_args = ChildArgs {
        extra: vec!["--backend".into(), backend.name().into()],
        take_turns: backend == Backend::Cuda,
        ..Default::default()
    };
    if emulate_capacity {
        child_args.extra.push("--emulate-capacity".into());
    }
    child_args
}

/// Two gate runs on one GPU would see each other's memory: one at a time.
pub(crate) fn gpu_lock(backend: Backend) -> Result<Option<gate_probe::lock::DeviceLock>, CliError> {
    match backend {
        Backend::Cuda => gate_probe::lock::acquire("cuda0", |p| {
            eprintln!("waiting for another gate run on this GPU ({})", p.display())
        })
        .map(Some)
        .map_err(|e| CliError::Infrastructure(Problem::new(format!("cannot take the GPU lock: {e}")))),
        _ => Ok(None),
    }
}

/// A profile's progress as the run's event.
pub(crate) fn progress_event(p: Progress) -> Event {
    match p {
        Progress::Start(name) => Event::ProfileStarted { component: name.into() },
        Progress::Phase(name, phase) => Event::PhaseStarted {
            component: name.into(),
            phase,
        },
        Progress::Done(name, result, elapsed) => Event::ProfileFinished {
            component: name.into(),
            seconds: elapsed.as_secs_f64(),
            failure: result.as_ref().ok().and_then(|m| m.failure.clone()),
            not_started: result.as_ref().err().map(|e| e.to_string()),
        },
    }
}

/// What the profiles measured, gathered for the report.
pub(crate) struct Measured {
    components: BTreeMap<String, gate_contract::report::ComponentReport>,
    /// The device of the first profile that names one.
    device: Option<gate_probe::DeviceInfo>,
    /// The last infrastructure failure among the profiles.
    pub(crate) infra: Option<String>,
    /// The largest per-process context reserve measured (CUDA only).
    reserve: Option<u64>,
    /// The framework the profiles ran on (the harness's, when the spec has one).
    framework: gate_contract::protocol::FrameworkId,
    /// Its version under the testbed's legacy field (see
    /// [`Loaded::legacy_version`]), else empty.
    legacy_version: String,
    /// `--plan`: the measured fixes, by component.
    pub(crate) plans: BTreeMap<String, gate_contract::plan::Plan>,
}

/// Turns the profiles of the selected components into component reports.
pub(crate) fn gather(
    profiled: Vec<gate_runner::Profiled>,
    selected: &[&gate_spec::budget::Component],
    loaded: &Loaded,
) -> Result<Measured, CliError> {
    let mut out = Measured {
        components: BTreeMap::new(),
        device: None,
        infra: None,
        reserve: None,
        framework: loaded.framework(),
        legacy_version: loaded.legacy_version(),
        plans: BTreeMap::new(),
    };
    for p in profiled {
        let Some(c) = selected.iter().find(|c| c.name == p.name) else {
            continue;
        };
        let Some(config) = loaded.config(&c.name) else {
            continue;
        };
        let m = p.result.map_err(|e| {
            CliError::Infrastructure(Problem::new(format!("cannot start the profile of `{}`: {e}", c.name)))
        })?;
        if let Some(f @ Failure { reason, .. }) = &m.failure {
            if gate_runner::infrastructure_failure(f) {
                out.infra = Some(format!("{}: {reason}", c.name));
            }
        }
        if let Some(r) = m.context_reserve_bytes {
            out.reserve = Some(out.reserve.map_or(r, |x| x.max(r)));
        }
        if out.device.is_none() && !m.device.backend.is_empty() {
            out.device = Some(m.device.clone());
        }
        out.components
            .insert(c.name.clone(), gate_report::component_report(c, config, &m));
    }
    Ok(out)
}

/// What of `check`'s command line decides its outputs and places them.
pub(crate) struct OutputArgs<'a> {
    /// The spec's path, as the report names it (`--budgets`).
    pub budgets: &'a std::path::Path,
    /// The output folder (`--out`).
    pub out: &'a std::path::Path,
    /// `--strict`.
    pub strict: bool,
    /// `--acknowledge-label`.
    pub acknowledge_label: &'a str,
    /// The spec's anchor as `--anchor` found it (each card's); `None`: the spec has none.
    pub anchor: Option<&'a gate_report::baseline::Candidates>,
}

/// Decides and writes the outputs of `check` (see [`conclude`]); `None`
/// when a signal arrived before writing began. The run's card is known
/// here, once measured: of the baselines (and anchors) found for several
/// cards, its own card's is the one compared with.
// Each argument comes from another step of `check`; they meet only here.
#[allow(clippy::too_many_arguments)]
pub(crate) fn write_outputs(
    args: &OutputArgs<'_>,
    spec: &gate_spec::budget::Spec,
    measured: Measured,
    baseline: gate_report::baseline::Candidates,
    stored: impl FnOnce(Option<&Report>) -> Vec<Report>,
    started: Instant,
    extra: Vec<(&'static str, Vec<u8>)>,
    emitter: &Emitter,
) -> Result<Option<Report>, CliError> {
    let device = measured.device.unwrap_or_else(gate_probe::cpu_device_info);
    let reserve = reserve(measured.reserve, spec);
    let testbed = gate_report::testbed(&device, spec, &measured.framework, &measured.legacy_version);
    let baseline = baseline.for_testbed(&testbed);
    let anchor = args.anchor.cloned().map(|a| a.for_testbed(&testbed));
    let compared = baseline.report().cloned();
    conclude(
        Conclusion {
            spec,
            spec_path: args.budgets.display().to_string(),
            commit: current_commit(),
            components: measured.components,
            baseline: &baseline,
            anchor: anchor.as_ref(),
            testbed,
            reserve,
            strict: args.strict,
            // Asked after the profiles, so a label added meanwhile counts.
            ack: gate_github::label::from_env(args.acknowledge_label),
            stored: Box::new(move || stored(compared.as_ref())),
            wall_seconds: started.elapsed().as_secs_f64(),
            out: args.out,
            extra,
            emitter,
            plans: measured.plans,
        },
        |report| {
            eprintln!(
                "wrote {} and {} in {:.1} s",
                args.out.join("report.json").display(),
                args.out.join("junit.xml").display(),
                report.wall_seconds
            )
        },
    )
}

/// One line on where a run's time went: the profiles' wall time, their sum
/// (what one-at-a-time would cost) and the slowest ones.
pub(crate) fn where_the_time_went(
    profiled: &[gate_runner::Profiled],
    jobs: usize,
    wall: std::time::Duration,
) -> String {
    // (name, wall time, of it waiting for the turn to time steps)
    let mut by_time: Vec<(&str, f64, f64)> = profiled
        .iter()
        .map(|p| {
            let waited = p.result.as_ref().map_or(0.0, |m| m.turn_wait_seconds);
            (p.name.as_str(), p.elapsed.as_secs_f64(), waited)
        })
        .collect();
    by_time.sort_by(|a, b| b.1.total_cmp(&a.1));
    // One profile at a time none would wait.
    let sum: f64 = by_time.iter().map(|(_, s, w)| s - w).sum();
    let top: Vec<String> = by_time
        .iter()
        .take(3)
        .map(|(n, s, w)| match *w >= 0.05 {
            true => format!("{n} {s:.1} s ({w:.1} s of it waiting its turn to time steps)"),
            false => format!("{n} {s:.1} s"),
        })
        .collect();
    format!(
        "time: {} profiles in {:.1} s ({jobs} at a time; {sum:.1} s one after another); slowest: {}",
        profiled.len(),
        wall.as_secs_f64(),
        top.join(", ")
    )
}

/// `Some(Exit::Interrupted)` once SIGINT/SIGTERM arrived (the profiles are already stopped).
pub(crate) fn stopped() -> Option<Exit> {
    let sig = gate_runner::interrupted()?;
    let name = if sig == 15 { "SIGTERM" } else { "SIGINT" };
    eprintln!("gate check: interrupted by {name}: profiles stopped, no output written");
    Some(Exit::Interrupted)
}

/// The commit under test: `GITHUB_SHA` in Actions, else `git rev-parse HEAD` when available.
pub(crate) fn current_commit() -> Option<String> {
    if let Ok(sha) = std::env::var("GITHUB_SHA") {
        if !sha.is_empty() {
            return Some(sha);
        }
    }
    let out = gate_runner::child::command("git")
        .args(["rev-parse", "HEAD"])
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
        .filter(|s| !s.is_empty())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{child_args, where_the_time_went};
    use gate_contract::measurement::Measurement;
    use gate_probe::Backend;
    use gate_runner::Profiled;

    #[test]
    fn profiles_on_one_gpu_take_turns_to_time_and_cpu_profiles_do_not() {
        assert!(child_args(Backend::Cuda, false).take_turns);
        assert!(!child_args(Backend::Cpu, false).take_turns);
    }

    fn profiled(name: &str, seconds: f64, waited: f64) -> Profiled {
        Profiled {
            name: name.into(),
            result: Ok(Measurement {
                turn_wait_seconds: waited,
                ..Default::default()
            }),
            elapsed: Duration::from_secs_f64(seconds),
        }
    }

    #[test]
    fn the_time_a_profile_waited_for_its_turn_is_said_and_left_out_of_the_sum() {
        let line = where_the_time_went(
            &[
                profiled("tft", 25.5, 0.0),
                profiled("dqn", 12.0, 11.9),
                profiled("ppo", 2.0, 0.0),
            ],
            2,
            Duration::from_secs_f64(41.2),
        );
        assert_eq!(
            line,
            "time: 3 profiles in 41.2 s (2 at a time; 27.6 s one after another); slowest: tft 25.5 s, \
             dqn 12.0 s (11.9 s of it waiting its turn to time steps), ppo 2.0 s"
        );
    }
}
