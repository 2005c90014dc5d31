//! `gate check`: profile each component in a child process, decide, write
//! report.json and junit.xml, print the table, exit with the verdict.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;

use clap::Args;

use crate::app::App;
use crate::errors::CliError;
use crate::pipeline::conclude::verdict_exit;
use crate::pipeline::emit::{Emitter, MessageFormat};
use crate::pipeline::plan::plans_for_failing;
use crate::pipeline::reports::{resolve_anchor, resolve_baseline, stored_reports};
use crate::pipeline::run::{
    child_args, gather, gpu_lock, progress_event, remove_previous_outputs, stopped, where_the_time_went, write_outputs,
    OutputArgs,
};
use crate::pipeline::shard::{is_selected, log_shard, shard_components};
use gate_contract::event::Event;
use gate_probe::Backend;
use gate_runner::exit::Exit;
use gate_spec::hint::Problem;

#[derive(Debug, Args)]
pub(crate) struct CheckArgs {
    /// The spec to gate.
    #[arg(long, default_value = crate::app::DEFAULT_SPEC)]
    pub budgets: PathBuf,
    /// Folder for report.json and junit.xml.
    #[arg(long, default_value = crate::app::DEFAULT_OUT)]
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
    #[arg(long, value_enum, default_value_t = crate::app::BackendArg::Cpu)]
    pub backend: crate::app::BackendArg,
    /// On a GPU larger than the spec's `capacity`, hold back the difference so
    /// a model that would not fit on the gated card runs out of memory here too.
    #[arg(long)]
    pub emulate_capacity: bool,
    /// What to compare with: a report FILE, `auto` (the baseline store, in GitHub Actions), or `none`.
    #[arg(long, default_value = "auto", value_name = "FILE|auto|none")]
    pub baseline: String,
    /// What the spec's `drift:` budgets are measured since: a report FILE,
    /// `auto` (the spec's `anchor:` in the baseline store, `anchors/CARD/NAME.json`:
    /// this run's card's),
    /// or `none`. Read only when the spec has an `anchor:`.
    #[arg(long, default_value = "auto", value_name = "FILE|auto|none")]
    pub anchor: String,
    /// Profiles run side by side (default: one per core on the CPU, one on a GPU).
    /// Bytes are the same whatever the number; on a GPU, timed steps take turns (on the CPU each has its core).
    #[arg(long, short = 'j', value_name = "N", value_parser = crate::app::at_least_one)]
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
    pub harness: crate::pipeline::harness::HarnessArgs,
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

fn run_until_written(args: CheckArgs, app: &App, writing: &mut bool) -> Result<Exit, CliError> {
    let started = Instant::now();
    let shard = args.shard.as_deref().map(crate::pipeline::shard::parse).transpose()?;
    // Ctrl-C / SIGTERM (handled from `commands::run`): stop the profiles, write nothing, exit 130 (see `stopped`).
    let loaded = crate::pipeline::harness::load(&args.budgets, app, Some(args.backend.into()), &args.harness)?;
    let spec = &loaded.spec;
    check_only_names(spec, &args)?;
    // Read before the shard is dealt: its profile times are the deal's
    // costs. The nearest report deals, whatever its card (the run's card is
    // known once it has measured; every shard deals alike from the same store).
    let (baseline, history_from) = resolve_baseline(&args.baseline, &args.baseline_branch)?;
    let anchor = resolve_anchor(&args.anchor, spec, &args.baseline_branch)?;
    let in_shard = shard.map(|s| shard_components(spec, &args.only, s, baseline.nearest()));
    let chosen = |name: &str| {
        is_selected(&args.only, name)
            && in_shard.as_ref().is_none_or(|(record, _)| {
                record
                    .components
                    .iter()
                    .any(|h| h == crate::pipeline::shard::base(name))
            })
    };
    let backend = loaded.backend(args.backend.into()).map_err(CliError::Infrastructure)?;
    refuse_or_warn_before_profiles(spec, backend, &chosen, &args, &baseline)?;
    let stored = stored_reports(history_from, args.history as usize);
    let child_args = child_args(backend, args.emulate_capacity);
    let _gpu_lock = gpu_lock(backend)?;
    // A component's variants (`NAME@VARIANT`) come with it.
    let selected: Vec<_> = spec.components.iter().filter(|c| chosen(&c.name)).collect();
    if let Some((record, costs)) = &in_shard {
        log_shard(spec, record, costs, !baseline.is_empty());
    }
    let exe = loaded.profiler();

    let names: Vec<String> = selected.iter().map(|c| c.name.clone()).collect();
    let (emitter, jobs) = run_started(&args, &names, backend);
    let request = loaded.request();
    let profiled = gate_runner::profile_all(exe, request, &names, &child_args, jobs, &|p| {
        emitter.emit(&progress_event(p))
    });
    if let Some(exit) = stopped() {
        return Ok(exit);
    }
    emitter.log(where_the_time_went(&profiled, jobs, started.elapsed()));
    let plans = if args.plan {
        let spec_path = args.budgets.display().to_string();
        plans_for_failing(&loaded, &selected, &profiled, backend, jobs, &spec_path)?
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
    // A shard's record is written with its outputs.
    let extra: Vec<_> = in_shard.iter().map(|(record, _)| shard_file(record)).collect();
    let placed = OutputArgs {
        budgets: &args.budgets,
        out: &args.out,
        strict: args.strict,
        acknowledge_label: &args.acknowledge_label,
        anchor: anchor.as_ref(),
    };
    let Some(report) = write_outputs(&placed, spec, measured, baseline, stored, started, extra, &emitter)? else {
        return Ok(stopped().unwrap_or(Exit::Interrupted));
    };
    if let Some(reason) = infra {
        eprintln!("error: infrastructure failure: {reason}");
        return Ok(Exit::Infrastructure);
    }
    Ok(verdict_exit(&report))
}

/// What is refused or said before any profile runs: a budget this backend
/// can never measure (refused, not left "not measured" with exit 0); on the
/// card itself (not emulated), a ratio whose reference the baseline (a
/// GPU's, where the store has one) shows too big for it.
fn refuse_or_warn_before_profiles(
    spec: &gate_spec::budget::Spec,
    backend: Backend,
    chosen: &dyn Fn(&str) -> bool,
    args: &CheckArgs,
    baseline: &gate_report::baseline::Candidates,
) -> Result<(), CliError> {
    if backend != Backend::Cuda {
        let refused = gate_spec::budget::cuda_only(spec, chosen, true);
        if !refused.0.is_empty() {
            return Err(refused.into());
        }
    }
    if let (Backend::Cuda, false, Some(b)) = (
        backend,
        args.emulate_capacity || spec.device.emulate,
        baseline.nearest_on(Backend::Cuda.name()),
    ) {
        for line in gate_report::ratios_beyond_card(spec, b) {
            eprintln!("warning: {line}");
        }
    }
    Ok(())
}

/// The run's event stream, started: the components it profiles and how
/// many at a time (`--jobs`, else the backend's default).
fn run_started(args: &CheckArgs, names: &[String], backend: Backend) -> (Emitter, usize) {
    let emitter = Emitter::new(args.message_format, names.len() as u64);
    let jobs = args
        .jobs
        .unwrap_or_else(|| gate_runner::default_jobs(backend == Backend::Cuda));
    emitter.emit(&Event::RunStarted {
        version: gate_contract::event::VERSION,
        command: "check".into(),
        components: names.to_vec(),
        jobs,
    });
    if jobs > 1 && names.len() > 1 {
        emitter.log(format!("profiling {} components, {jobs} at a time", names.len()));
    }
    (emitter, jobs)
}

/// A shard's record as the file written beside its report.
fn shard_file(record: &gate_contract::shard::Record) -> (&'static str, Vec<u8>) {
    (
        gate_contract::shard::FILE,
        serde_json::to_vec_pretty(record).expect("the shard record serializes"),
    )
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
