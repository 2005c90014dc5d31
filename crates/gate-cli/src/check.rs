//! `gate check`: profile each component in a child process, decide, write
//! report.json and junit.xml, print the table, exit with the verdict.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;

use clap::Args;

use super::conclude::{conclude, reserve, verdict_exit, Conclusion};
use super::emit::{Emitter, MessageFormat};
use super::harness::Loaded;
use super::output::OutputSet;
use super::App;
use super::CliError;
use gate_contract::event::Event;
use gate_contract::measurement::Failure;
use gate_contract::report::Report;
use gate_probe::Backend;
use gate_runner::exit::Exit;
use gate_runner::{ChildArgs, Progress};
use gate_spec::hint::Problem;

#[derive(Debug, Args)]
pub(crate) struct CheckArgs {
    /// The spec to gate.
    #[arg(long, default_value = super::DEFAULT_SPEC)]
    pub budgets: PathBuf,
    /// Folder for report.json and junit.xml.
    #[arg(long, default_value = super::DEFAULT_OUT)]
    pub out: PathBuf,
    /// Run only these components (comma-separated).
    #[arg(long, value_delimiter = ',')]
    pub only: Vec<String>,
    /// Run shard I of N: the components (with --only: the ones it selects),
    /// dealt by their profile times in the baseline, longest first, each to
    /// the shard with the least so far (without times: sorted by name,
    /// round-robin); `gate merge` of all N shards decides as one run would.
    #[arg(long, value_name = "I/N")]
    pub shard: Option<String>,
    /// Treat warnings (not measured, missing baseline, other testbed) as failures.
    #[arg(long)]
    pub strict: bool,
    /// Where to run the models: `cpu` (counting allocator), `cuda` (memory pool + NVML), or `auto`.
    #[arg(long, value_enum, default_value_t = super::BackendArg::Cpu)]
    pub backend: super::BackendArg,
    /// On a GPU larger than the spec's `capacity`, hold back the difference so
    /// a model that would not fit on the gated card runs out of memory here too.
    #[arg(long)]
    pub emulate_capacity: bool,
    /// What to compare with: a report FILE, `auto` (the baseline store, in GitHub Actions), or `none`.
    #[arg(long, default_value = "auto", value_name = "FILE|auto|none")]
    pub baseline: String,
    /// Profiles run side by side (default: one per core on the CPU, one on a GPU).
    /// Bytes are the same whatever the number; on a GPU, timed steps take turns (on the CPU each has its core).
    #[arg(long, short = 'j', value_name = "N")]
    pub jobs: Option<usize>,
    /// The branch of the baseline store read by `--baseline auto`.
    #[arg(long, default_value = gate_github::store::DEFAULT_BRANCH)]
    pub baseline_branch: String,
    /// In a pull request, this label on the PR turns regressions against the
    /// baseline into acknowledged warnings (never budget failures; never
    /// under --strict). An empty value turns it off.
    #[arg(long, default_value = gate_github::label::DEFAULT_LABEL, value_name = "LABEL")]
    pub acknowledge_label: String,
    /// Stored reports (the baseline included) the pull request comment's
    /// history shows for a failing or regressed budget: 0 to 20. Read only
    /// when some budget failed or regressed (each is a GitHub request); 0: none.
    #[arg(long, value_name = "N", default_value_t = gate_github::store::HISTORY_REPORTS as u64,
          value_parser = clap::value_parser!(u64).range(0..=gate_github::store::HISTORY_MAX as u64))]
    pub history: u64,
    /// How the run's events are written on stdout: `human` (progress on
    /// stderr, the table on stdout) or `json` (one JSON object a line,
    /// schema/events.schema.json; logs stay on stderr).
    #[arg(long, value_enum, default_value_t = MessageFormat::Human, value_name = "FORMAT")]
    pub message_format: MessageFormat,
    /// For each component that fails a size budget, find the measured fix
    /// as `gate plan` does (its levers probed, the cheapest passing
    /// configuration measured) and put it in the report, the table, the
    /// comment and JUnit. Costs more profiles; the verdict is unchanged.
    #[arg(long)]
    pub plan: bool,
    #[command(flatten)]
    pub harness: super::harness::HarnessArgs,
}

pub(super) fn run(args: CheckArgs, app: &App) -> Result<Exit, CliError> {
    let out = args.out.clone();
    let mut writing = false;
    let result = run_until_written(args, app, &mut writing);
    // A run that stopped before its outputs (a spec error, a harness that
    // does not build) leaves none of the previous run's: CI would upload or
    // comment them as this run's. A failed write keeps the old set (OutputSet).
    if result.is_err() && !writing {
        remove_previous_outputs(&out);
    }
    result
}

/// The files a run's set holds (and `timeline-*.svg`).
const OUTPUT_FILES: [&str; 7] = [
    "report.json",
    "shard.json",
    "junit.xml",
    "comment.md",
    "pr.json",
    "baseline.json",
    "history.json",
];

/// Removes the previous run's outputs from `out`, if any, and says so.
fn remove_previous_outputs(out: &std::path::Path) {
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

fn run_until_written(args: CheckArgs, app: &App, writing: &mut bool) -> Result<Exit, CliError> {
    let started = Instant::now();
    let shard = args.shard.as_deref().map(super::shard::parse).transpose()?;
    // Ctrl-C / SIGTERM (handled from `cli::run`): stop the profiles, write nothing, exit 130 (see `stopped`).
    let loaded = super::harness::load(&args.budgets, app, Some(args.backend.into()), &args.harness)?;
    let spec = &loaded.spec;
    check_only_names(spec, &args)?;
    // Read before the shard is dealt: its profile times are the deal's costs.
    let (baseline, history_from) = resolve_baseline(&args.baseline, &args.baseline_branch)?;
    let in_shard = shard.map(|s| shard_components(spec, &args.only, s, baseline.report()));
    let chosen = |name: &str| {
        is_selected(&args.only, name)
            && in_shard
                .as_ref()
                .is_none_or(|(record, _)| record.components.iter().any(|h| h == super::shard::base(name)))
    };
    let backend = loaded.backend(args.backend.into()).map_err(CliError::Infrastructure)?;
    // A budget this backend can never measure is refused before anything
    // runs, not left "not measured" with exit 0.
    if backend != Backend::Cuda {
        let refused = gate_spec::budget::cuda_only(spec, &chosen, true);
        if !refused.0.is_empty() {
            return Err(refused.into());
        }
    }
    let stored = stored_reports(baseline.report(), history_from, args.history as usize);
    // On the card itself (not emulated), a ratio whose reference the
    // baseline shows too big for it is said before the profiles run.
    if let (Backend::Cuda, false, Some(b)) = (backend, args.emulate_capacity || spec.device.emulate, baseline.report())
    {
        for line in gate_report::ratios_beyond_card(spec, b) {
            eprintln!("warning: {line}");
        }
    }
    let child_args = child_args(backend, args.emulate_capacity);
    let _gpu_lock = gpu_lock(backend)?;
    // A component's variants (`NAME@VARIANT`) come with it.
    let selected: Vec<_> = spec.components.iter().filter(|c| chosen(&c.name)).collect();
    if let Some((record, costs)) = &in_shard {
        log_shard(spec, record, costs, baseline.report().is_some());
    }
    let exe = loaded.profiler();

    let emitter = Emitter::new(args.message_format, selected.len() as u64);
    let names: Vec<String> = selected.iter().map(|c| c.name.clone()).collect();
    let jobs = args
        .jobs
        .unwrap_or_else(|| gate_runner::default_jobs(backend == Backend::Cuda));
    emitter.emit(&Event::RunStarted {
        version: gate_contract::event::VERSION,
        command: "check".into(),
        components: names.clone(),
        jobs,
    });
    if jobs > 1 && names.len() > 1 {
        emitter.log(format!("profiling {} components, {jobs} at a time", names.len()));
    }
    let request = loaded.request();
    let profiled = gate_runner::profile_all(exe, request, &names, &child_args, jobs, &|p| {
        emitter.emit(&progress_event(p))
    });
    if let Some(exit) = stopped() {
        return Ok(exit);
    }
    emitter.log(where_the_time_went(&profiled, jobs, started.elapsed()));
    let plans = if args.plan {
        plans_for_failing(&loaded, &selected, &profiled, backend)?
    } else {
        BTreeMap::new()
    };
    if let Some(exit) = stopped() {
        return Ok(exit);
    }
    let mut measured = gather(profiled, &selected, &loaded)?;
    measured.plans = plans;
    emitter.profiled();

    let infra = measured.infra.clone();
    *writing = true;
    let extra = match &in_shard {
        Some((record, _)) => vec![(
            gate_contract::shard::FILE,
            serde_json::to_vec_pretty(record).expect("the shard record serializes"),
        )],
        None => Vec::new(),
    };
    let Some(report) = write_outputs(&args, spec, measured, baseline, stored, started, extra, &emitter)? else {
        return Ok(stopped().unwrap_or(Exit::Interrupted));
    };
    if let Some(reason) = infra {
        eprintln!("error: infrastructure failure: {reason}");
        return Ok(Exit::Infrastructure);
    }
    Ok(verdict_exit(&report))
}

/// Whether `--only` selects component `name`; a variant (`NAME@VARIANT`)
/// comes with its component.
fn is_selected(only: &[String], name: &str) -> bool {
    let base = gate_spec::name::base_of(name);
    only.is_empty() || only.iter().any(|o| o == name || o == base)
}

/// The shard's record for shard.json (the components it holds, of those
/// `--only` selects, dealt by their profile times in `baseline`), and the
/// costs they were dealt by.
fn shard_components(
    spec: &gate_spec::budget::Spec,
    only: &[String],
    shard: gate_contract::shard::Shard,
    baseline: Option<&Report>,
) -> (gate_contract::shard::Record, super::shard::Costs) {
    let names = spec
        .components
        .iter()
        .map(|c| c.name.as_str())
        .filter(|n| is_selected(only, n));
    let costs = super::shard::costs(names, |n| super::shard::profile_time(baseline, n));
    let held = super::shard::deal(&costs.of, shard.count).swap_remove(shard.index - 1);
    let record = gate_contract::shard::Record {
        shard,
        components: held,
        only: {
            let mut only = only.to_vec();
            only.sort();
            only.dedup();
            only
        },
        dealt_by: costs.dealt_by,
        costs: costs.seconds(),
    };
    (record, costs)
}

/// Says what the shard holds and what it was dealt by, and what it cannot
/// judge: an ensemble whose members lie partly in other shards (judged by
/// `gate merge`).
fn log_shard(
    spec: &gate_spec::budget::Spec,
    record: &gate_contract::shard::Record,
    costs: &super::shard::Costs,
    with_baseline: bool,
) {
    use super::shard::seconds;
    let s = record.shard;
    if record.components.is_empty() {
        eprintln!("shard {s}: no component falls to this shard (fewer components than shards): it measures nothing");
    } else {
        eprintln!("shard {s}: {}", record.components.join(", "));
    }
    match record.dealt_by {
        gate_contract::shard::DealtBy::Baseline => {
            let totals = super::shard::totals(&costs.of, &super::shard::deal(&costs.of, s.count));
            let longest = totals.iter().copied().max().unwrap_or(0);
            eprintln!(
                "shard {s}: dealt by the baseline's profile times: {:.1} s here, {:.1} s the longest shard, {:.1} s in all",
                seconds(totals[s.index - 1]),
                seconds(longest),
                seconds(totals.iter().sum())
            );
            if !costs.estimated.is_empty() {
                eprintln!(
                    "note: shard {s}: the baseline has no profile time for {}: each counted at the median, {:.1} s",
                    costs.estimated.join(", "),
                    seconds(costs.median)
                );
            }
        }
        gate_contract::shard::DealtBy::Name if s.count > 1 => eprintln!(
            "shard {s}: dealt by name, round-robin ({}): pass every shard the same baseline to deal by profile time",
            if with_baseline {
                "the baseline records no profile times"
            } else {
                "no baseline"
            }
        ),
        gate_contract::shard::DealtBy::Name => {}
    }
    if let Some(e) = &spec.ensemble {
        let elsewhere: Vec<&str> = e
            .members
            .iter()
            .map(|m| super::shard::base(m))
            .filter(|m| !record.components.iter().any(|c| c == m))
            .collect();
        if !elsewhere.is_empty() {
            eprintln!(
                "note: shard {s}: the ensemble's members {} are in other shards: its budgets are not measured here \
                 (a warning, a failure under --strict) and are judged by `gate merge` of all {} shards",
                elsewhere.join(", "),
                s.count
            );
        }
    }
}

/// Refuses an `--only` name that is not a component of the spec.
fn check_only_names(spec: &gate_spec::budget::Spec, args: &CheckArgs) -> Result<(), CliError> {
    for name in &args.only {
        if spec.component(name).is_none() {
            // Variants (`NAME@VARIANT`) come with their component: list the components.
            let names: Vec<&str> = spec
                .components
                .iter()
                .map(|c| c.name.as_str())
                .filter(|n| !gate_spec::name::is_variant(n))
                .collect();
            return Err(CliError::Usage(
                Problem::new(format!(
                    "--only names `{name}`, which is not a component of {}",
                    args.budgets.display()
                ))
                .with_hint(format!("components: {}", names.join(", "))),
            ));
        }
    }
    Ok(())
}

/// The arguments each profile's child gets: the backend, and whether to emulate the spec's capacity.
fn child_args(backend: Backend, emulate_capacity: bool) -> ChildArgs {
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
fn gpu_lock(backend: Backend) -> Result<Option<gate_probe::lock::DeviceLock>, CliError> {
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
fn progress_event(p: Progress) -> Event {
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
struct Measured {
    components: BTreeMap<String, gate_contract::report::ComponentReport>,
    /// The device of the first profile that names one.
    device: Option<gate_probe::DeviceInfo>,
    /// The last infrastructure failure among the profiles.
    infra: Option<String>,
    /// The largest per-process context reserve measured (CUDA only).
    reserve: Option<u64>,
    /// The framework the profiles ran on (the harness's, when the spec has one).
    framework: gate_contract::protocol::FrameworkId,
    /// Its version when it is candle (the report's `candle_version`), else empty.
    candle: String,
    /// `--plan`: the measured fixes, by component.
    plans: BTreeMap<String, gate_contract::plan::Plan>,
}

/// `--plan`: a plan for each selected component (not a variant) whose
/// measured figures fail one of its size budgets, from its own profile and
/// its reference's.
fn plans_for_failing(
    loaded: &Loaded,
    selected: &[&gate_spec::budget::Component],
    profiled: &[gate_runner::Profiled],
    backend: Backend,
) -> Result<BTreeMap<String, gate_contract::plan::Plan>, CliError> {
    let measurement = |name: &str| {
        profiled
            .iter()
            .find(|p| p.name == name)
            .and_then(|p| p.result.as_ref().ok())
            .cloned()
    };
    let mut plans = BTreeMap::new();
    for c in selected
        .iter()
        .filter(|c| !c.name.contains('@') && c.generate.is_none())
    {
        let Some(m) = measurement(&c.name) else { continue };
        let fails_size = c.budgets.iter().any(|b| {
            b.metric.unit() == gate_spec::metric::Unit::Bytes
                && b.limit.op.is_max()
                && m.values
                    .get(&b.metric)
                    .is_some_and(|v| !b.limit.op.holds(*v, b.limit.value))
        });
        if !fails_size || m.failure.as_ref().is_some_and(gate_runner::infrastructure_failure) {
            continue;
        }
        eprintln!("{}: fails a size budget; planning its measured fix (--plan)", c.name);
        let given = super::plan::Measured {
            start: Some(m),
            reference: c.reference.as_deref().and_then(measurement),
        };
        let options = super::plan::PlanOptions {
            measure: 2,
            all_levers: false,
        };
        let plan = super::plan::plan_component(loaded, c, backend, &options, given)?;
        super::plan::print_plan(c, &plan);
        plans.insert(c.name.clone(), plan);
    }
    Ok(plans)
}

/// Turns the profiles of the selected components into component reports.
fn gather(
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
        candle: loaded.candle_version(),
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

/// Decides and writes the outputs of `check` (see [`conclude`]); `None`
/// when a signal arrived before writing began.
// Each argument comes from another step of `check`; they meet only here.
#[allow(clippy::too_many_arguments)]
fn write_outputs(
    args: &CheckArgs,
    spec: &gate_spec::budget::Spec,
    measured: Measured,
    baseline: gate_report::baseline::Outcome,
    stored: impl FnOnce() -> Vec<Report>,
    started: Instant,
    extra: Vec<(&'static str, Vec<u8>)>,
    emitter: &Emitter,
) -> Result<Option<Report>, CliError> {
    let device = measured.device.unwrap_or_else(gate_probe::cpu_device_info);
    let reserve = reserve(measured.reserve, spec);
    let testbed = gate_report::testbed(&device, spec, &measured.framework, &measured.candle);
    conclude(
        Conclusion {
            spec,
            spec_path: args.budgets.display().to_string(),
            commit: current_commit(),
            components: measured.components,
            baseline: &baseline,
            testbed,
            reserve,
            strict: args.strict,
            // Asked after the profiles, so a label added meanwhile counts.
            ack: gate_github::label::from_env(&args.acknowledge_label),
            stored: Box::new(stored),
            wall_seconds: started.elapsed().as_secs_f64(),
            out: &args.out,
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
fn where_the_time_went(profiled: &[gate_runner::Profiled], jobs: usize, wall: std::time::Duration) -> String {
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
fn stopped() -> Option<Exit> {
    let sig = gate_runner::interrupted()?;
    let name = if sig == 15 { "SIGTERM" } else { "SIGINT" };
    eprintln!("gate check: interrupted by {name}: profiles stopped, no output written");
    Some(Exit::Interrupted)
}

/// The commit under test: `GITHUB_SHA` in Actions, else `git rev-parse HEAD` when available.
fn current_commit() -> Option<String> {
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

/// `--baseline FILE|auto|none`: a bad FILE is bad input (exit 2); under
/// `auto` every problem is a missing baseline with its reason, never a
/// crash. With it, for a pull request, where its history can be read.
pub(super) fn resolve_baseline(
    arg: &str,
    branch: &str,
) -> Result<(gate_report::baseline::Outcome, Option<gate_github::HistorySource>), CliError> {
    use gate_report::baseline::Outcome;
    match arg {
        "none" => Ok((
            Outcome::Missing {
                reason: "--baseline none".into(),
            },
            None,
        )),
        "auto" => {
            let auto = gate_github::auto_baseline(gate_github::AutoInputs::from_env(
                branch,
                gate_github::store::DEFAULT_DEPTH,
            ));
            for n in &auto.notes {
                eprintln!("{n}");
            }
            Ok((auto.outcome, auto.history))
        }
        file => {
            let path = std::path::Path::new(file);
            let r = gate_report::baseline::load_file(path).map_err(|e| {
                CliError::Usage(
                    Problem::new(e.to_string())
                        .with_hint("pass a report.json written by `gate check`, `auto`, or `none`"),
                )
            })?;
            Ok((
                Outcome::Found {
                    report: Box::new(r),
                    source: file.to_string(),
                },
                None,
            ))
        }
    }
}

/// The stored reports for the history, newest first, when asked: the
/// baseline, then up to `count - 1` older ones read from the store.
fn stored_reports(
    baseline: Option<&Report>,
    from: Option<gate_github::HistorySource>,
    count: usize,
) -> impl FnOnce() -> Vec<Report> {
    let first = baseline.filter(|_| count > 0).cloned();
    move || {
        let mut all: Vec<Report> = first.into_iter().collect();
        if let (Some(from), false) = (from, all.is_empty()) {
            let (older, notes) = gate_github::history(from, count - 1);
            notes.iter().for_each(|n| eprintln!("warning: {n}"));
            all.extend(older);
        }
        all
    }
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
