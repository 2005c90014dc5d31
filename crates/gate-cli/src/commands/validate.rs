//! `gate validate`: load and check a spec, run nothing. A spec whose
//! `harness:` names another binary has its workloads' configs checked only
//! by that harness, once built: `--build` builds it (cargo runs the crate's
//! build scripts) and has it check them; without it they are said to be
//! unchecked.

use std::path::PathBuf;

use clap::Args;

use crate::app::App;
use crate::errors::CliError;
use gate_probe::Backend;
use gate_runner::exit::Exit;

#[derive(Debug, Args)]
pub(crate) struct ValidateArgs {
    /// The spec to check.
    #[arg(long, default_value = crate::app::DEFAULT_SPEC)]
    pub budgets: PathBuf,
    /// The backend `gate check` will run on: budgets it can never measure
    /// (`device_used` on the CPU) are then errors. Without it they are warnings.
    #[arg(long, value_enum)]
    pub backend: Option<crate::app::BackendArg>,
    /// With a spec's `harness:`, build the harness (`cargo build`: the crate's
    /// build scripts run) and have it check the workloads' configs. Without
    /// it nothing is built or run, and those configs are left unchecked.
    #[arg(long)]
    pub build: bool,
    #[command(flatten)]
    pub harness: crate::pipeline::harness::HarnessArgs,
}

pub(super) fn run(args: ValidateArgs, app: &App) -> Result<Exit, CliError> {
    let backend = args.backend.map(Backend::from);
    let (spec, unchecked) = if args.build {
        // A backend or dtype the harness's adapter cannot run is refused
        // before anything is built.
        crate::pipeline::harness::load_unbuilt(&args.budgets, app, backend, &args.harness)?;
        (
            *crate::pipeline::harness::load(&args.budgets, app, None, &args.harness)?.spec,
            false,
        )
    } else {
        crate::pipeline::harness::load_unbuilt(&args.budgets, app, backend, &args.harness)?
    };
    // `auto` is what this build would pick; `cuda` is checked as written
    // even by a build without it (validate runs nothing).
    let on_cpu = match args.backend.map(Backend::from) {
        None => None,
        Some(Backend::Cuda) => Some(false),
        Some(Backend::Cpu) => Some(true),
        Some(Backend::Auto) => Some(!cfg!(feature = "cuda")),
    };
    let cuda_only = gate_spec::budget::cuda_only(&spec, &|_| true, on_cpu == Some(true));
    match on_cpu {
        Some(true) if !cuda_only.0.is_empty() => return Err(cuda_only.into()),
        Some(_) => {}
        None => cuda_only.0.iter().for_each(|d| eprintln!("{}", d.warning())),
    }
    let budgets: usize = spec.components.iter().map(|c| c.budgets.len()).sum::<usize>()
        + spec.ensemble.as_ref().map_or(0, |e| e.budgets.len());
    let n = |count: usize, what: &str| format!("{count} {what}{}", if count == 1 { "" } else { "s" });
    // Variants are counted apart: `tft` with `tft@plain` is one component.
    let variants = spec
        .components
        .iter()
        .filter(|c| gate_spec::name::is_variant(&c.name))
        .count();
    let components = n(spec.components.len() - variants, "component");
    let components = match variants {
        0 => components,
        v => format!("{components} and {}", n(v, "variant")),
    };
    println!(
        "{}: ok — {components}, {}",
        args.budgets.display(),
        n(budgets, "budget")
    );
    if let (true, Some(h)) = (unchecked, &spec.harness) {
        eprintln!(
            "note: the workloads' configs were not checked: only the harness `{}` of `{}` knows them, and validate builds nothing; `gate validate --build` builds it and has it check them",
            h.bin, h.package
        );
    }
    Ok(Exit::Pass)
}
