//! `gate validate`: load and check a spec, run nothing.

use std::path::PathBuf;

use clap::Args;

use super::CliError;
use crate::exit::Exit;
use crate::workload::Resolved;

#[derive(Debug, Args)]
pub struct ValidateArgs {
    /// The spec to check.
    #[arg(long, default_value = "budgets.yaml")]
    pub budgets: PathBuf,
}

pub fn run(args: ValidateArgs) -> Result<Exit, CliError> {
    let spec = crate::budget::load(&args.budgets)?;
    let budgets: usize = spec.components.iter().map(|c| c.budgets.len()).sum::<usize>()
        + spec.ensemble.as_ref().map_or(0, |e| e.budgets.len());
    println!(
        "{}: ok — {} components, {budgets} budgets",
        args.budgets.display(),
        spec.components.len()
    );
    for c in &spec.components {
        if let Resolved::Unavailable(reason) = &c.workload {
            eprintln!("warning: component `{}` will not be measured: {reason}", c.name);
        }
    }
    Ok(Exit::Pass)
}
