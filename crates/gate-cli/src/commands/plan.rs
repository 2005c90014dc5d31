//! `gate plan COMPONENT`: the measured fix for a component over budget
//! (the planner itself, its probes and cost model: `pipeline::plan`).

use std::path::PathBuf;

use clap::Args;

use crate::errors::CliError;
use crate::pipeline::plan::{edits_of, plan_component, print_plan, write_plan, Measured, PlanOptions};
use crate::pipeline::sweep::{print_sweep, sweep_component, write_sweep, SweepOptions};
use gate_runner::exit::Exit;
use gate_spec::budget::Component;
use gate_spec::dtype::DType;
use gate_spec::hint::Problem;

#[derive(Debug, Args)]
pub(crate) struct PlanArgs {
    /// The component to plan for (a name in the spec, e.g. `tft`).
    pub component: String,
    #[arg(long, default_value = crate::app::DEFAULT_SPEC)]
    pub budgets: PathBuf,
    #[arg(long, value_enum, default_value_t = crate::app::BackendArg::Cpu)]
    pub backend: crate::app::BackendArg,
    /// How many candidates predicted to pass are measured, cheapest first.
    #[arg(long, default_value_t = 3, value_parser = crate::app::at_least_one, conflicts_with = "sweep")]
    pub measure: usize,
    /// Also probe the levers that change the loss (batch, dtype) when the
    /// others are predicted to suffice.
    #[arg(long, conflicts_with = "sweep")]
    pub all_levers: bool,
    /// Profiles run side by side (default: one per core on the CPU, one on
    /// a GPU), as `gate check --jobs`: a round's probes, candidates or
    /// sweep points are independent, so bytes are the same whatever the number.
    #[arg(long, short = 'j', value_name = "N", value_parser = crate::app::at_least_one)]
    pub jobs: Option<usize>,
    /// Write the chosen configuration into the spec.
    #[arg(long, conflicts_with = "sweep")]
    pub apply: bool,
    /// Where plan.json (sweep.json with --sweep) is written.
    #[arg(long, default_value = "target/gate")]
    pub out: PathBuf,
    /// "Will it fit?": fit the component's memory against batch size,
    /// sequence length and dtype from a few exact profiles, and answer a
    /// grid for the spec's card and each --capacity (no plan is made).
    #[arg(long)]
    pub sweep: bool,
    /// The sweep's batch sizes (default: a quarter of the spec's to four times it).
    #[arg(long, value_delimiter = ',', value_name = "B,B,…", requires = "sweep", value_parser = crate::app::grid_size)]
    pub batches: Option<Vec<usize>>,
    /// The sweep's sequence lengths (default: the workload's, the spec's, twice the spec's).
    #[arg(long, value_delimiter = ',', value_name = "S,S,…", requires = "sweep", value_parser = crate::app::grid_size)]
    pub seq_lens: Option<Vec<usize>>,
    /// The sweep's dtypes (default: the spec's and those the workload offers).
    #[arg(long, value_delimiter = ',', value_name = "D,D,…", requires = "sweep")]
    pub dtypes: Option<Vec<String>>,
    /// A memory to answer for beside the spec's card (`24GiB`); repeatable.
    #[arg(long, value_delimiter = ',', value_name = "SIZE", requires = "sweep")]
    pub capacity: Vec<String>,
    #[command(flatten)]
    pub harness: crate::pipeline::harness::HarnessArgs,
}

pub(super) fn run(args: PlanArgs, app: &crate::app::App) -> Result<Exit, CliError> {
    let loaded = crate::pipeline::harness::load(&args.budgets, app, Some(args.backend.into()), &args.harness)?;
    let c = loaded.component_named(&args.component)?.clone();
    if args.sweep {
        return sweep(&args, &loaded, &c);
    }
    if c.generate.is_some() {
        return Err(CliError::Usage(
            Problem::new(format!(
                "`{}` is a generation component: gate plan plans training steps",
                c.name
            ))
            .with_hint("plan the component that trains the model, or change `generate:` by hand"),
        ));
    }
    if c.budgets.is_empty() {
        return Err(CliError::Usage(
            Problem::new(format!("`{}` has no budgets: there is nothing to plan for", c.name))
                .with_hint("add the budgets it must meet, e.g. `training_peak: < 180 MiB`"),
        ));
    }
    if args.apply && c.name.contains('@') {
        return Err(CliError::Usage(
            Problem::new(format!("--apply writes a component, and `{}` is a variant", c.name))
                .with_hint("plan the component itself, or write the plan's lines into the variant by hand"),
        ));
    }
    let backend = loaded.backend(args.backend.into()).map_err(CliError::Infrastructure)?;
    let opts = PlanOptions {
        measure: args.measure,
        all_levers: args.all_levers,
        jobs: jobs(&args, backend),
    };
    let plan = plan_component(&loaded, &c, backend, &opts, Measured::default())?;
    let spec = args.budgets.display().to_string();
    print_plan(&c, &plan, (!args.apply).then_some(spec.as_str()));
    write_plan(&args.out, &plan)?;
    if plan.start_passes() {
        return Ok(Exit::Pass);
    }
    let Some(chosen) = plan.chosen else {
        println!("\nno measured configuration passes every budget of `{}`", c.name);
        return Ok(Exit::Fail);
    };
    if args.apply {
        let settings = &plan.candidates[chosen].settings;
        gate_spec::budget::edit::apply_settings(&args.budgets, &c.name, &edits_of(settings))
            .map_err(CliError::Usage)?;
        println!("\nwritten to {}", args.budgets.display());
    }
    Ok(Exit::Pass)
}

/// `--jobs`, else the backend's default (`gate check`'s).
fn jobs(args: &PlanArgs, backend: gate_probe::Backend) -> usize {
    args.jobs
        .unwrap_or_else(|| gate_runner::default_jobs(backend == gate_probe::Backend::Cuda))
}

/// `gate plan COMPONENT --sweep`.
fn sweep(args: &PlanArgs, loaded: &crate::pipeline::harness::Loaded, c: &Component) -> Result<Exit, CliError> {
    let dtypes = match &args.dtypes {
        None => None,
        Some(names) => Some(
            names
                .iter()
                .map(|n| {
                    DType::from_name(n).ok_or_else(|| {
                        CliError::Usage(
                            Problem::new(format!("--dtypes: `{n}` is not a dtype")).with_hint("write f32, f16 or bf16"),
                        )
                    })
                })
                .collect::<Result<Vec<_>, _>>()?,
        ),
    };
    let capacities = args
        .capacity
        .iter()
        .map(|text| match gate_spec::units::parse_size(text) {
            Ok(b) => Ok((text.clone(), b.0 as f64)),
            Err(e) => Err(CliError::Usage(
                Problem::new(format!("--capacity `{text}`: {}", e.message)).with_hint(e.hint),
            )),
        })
        .collect::<Result<Vec<_>, _>>()?;
    // Each capacity is answered less the spec's per-process reserve: one no
    // larger than it could hold nothing.
    let reserve = loaded.spec.device.reserve;
    if let Some((text, _)) = capacities.iter().find(|(_, bytes)| *bytes <= reserve.0 as f64) {
        return Err(CliError::Usage(
            Problem::new(format!(
                "--capacity `{text}` is no larger than the spec's per-process reserve ({reserve})"
            ))
            .with_hint("give the card's whole memory; the reserve (`device: reserve:`) is taken from it"),
        ));
    }
    if c.generate.is_some() {
        return Err(CliError::Usage(
            Problem::new(format!(
                "`{}` is a generation component: the sweep fits training steps",
                c.name
            ))
            .with_hint("sweep the component that trains the model"),
        ));
    }
    let backend = loaded.backend(args.backend.into()).map_err(CliError::Infrastructure)?;
    let opts = SweepOptions {
        batches: args.batches.clone(),
        seq_lens: args.seq_lens.clone(),
        dtypes,
        capacities,
        jobs: jobs(args, backend),
    };
    let s = sweep_component(loaded, c, backend, &opts)?;
    print_sweep(&s);
    write_sweep(&args.out, &s)?;
    Ok(Exit::Pass)
}
