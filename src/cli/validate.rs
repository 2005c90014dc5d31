//! `gate validate`: load and check a spec, run nothing.

use std::path::PathBuf;

use clap::Args;

use super::harness::Loaded;
use super::App;
use super::CliError;
use crate::exit::Exit;

#[derive(Debug, Args)]
pub struct ValidateArgs {
    /// The spec to check.
    #[arg(long, default_value = "budgets.yaml")]
    pub budgets: PathBuf,
}

pub fn run(args: ValidateArgs, app: &App) -> Result<Exit, CliError> {
    let spec = match super::harness::load(&args.budgets, app, None)? {
        Loaded::Here(spec, _) => spec,
        Loaded::Delegated(exit) => return Ok(exit),
    };
    let budgets: usize = spec.components.iter().map(|c| c.budgets.len()).sum::<usize>()
        + spec.ensemble.as_ref().map_or(0, |e| e.budgets.len());
    println!(
        "{}: ok — {} components, {budgets} budgets",
        args.budgets.display(),
        spec.components.len()
    );
    Ok(Exit::Pass)
}
