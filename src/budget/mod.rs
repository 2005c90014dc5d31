//! The spec: `budgets.yaml` → a validated [`Spec`]. The only module that
//! knows YAML (and only `yaml.rs` inside it).

mod diagnostic;
mod spec;
mod validate;
mod yaml;

use std::path::Path;

pub use diagnostic::{Diagnostic, Diagnostics};
pub use spec::*;
pub use yaml::Pos;

/// Why a spec could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    #[error("{path}: cannot read the spec: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("{0}")]
    Invalid(#[from] Diagnostics),
}

/// Checks a component's workload (its kind and config) while the spec is
/// validated, so its problems are reported with the spec's others, in one
/// go. The runner implements it with the binary's registry.
pub trait WorkloadCheck {
    /// The problems of `c`'s workload: position, message, hint.
    fn check(&self, c: &Component, has_harness: bool) -> Vec<(Pos, String, String)>;
}

/// Parses and validates `text` as the spec at `path` (its workloads' configs unchecked).
pub fn parse(path: &Path, text: &str) -> Result<Spec, Diagnostics> {
    parse_with(path, text, None)
}

/// Parses and validates `text`, checking each workload with `check`.
pub fn parse_with(path: &Path, text: &str, check: Option<&dyn WorkloadCheck>) -> Result<Spec, Diagnostics> {
    match yaml::parse(text) {
        Ok((root, issues)) => validate::validate(path, &root, issues, check),
        Err(issue) => Err(Diagnostics(vec![Diagnostic {
            file: path.display().to_string(),
            pos: issue.pos,
            message: issue.message,
            hint: issue.hint,
        }])),
    }
}

/// Reads and validates the spec file at `path` (its workloads' configs unchecked).
pub fn load(path: &Path) -> Result<Spec, SpecError> {
    load_with(path, None)
}

/// Reads and validates the spec file at `path`, checking each workload with `check`.
pub fn load_with(path: &Path, check: Option<&dyn WorkloadCheck>) -> Result<Spec, SpecError> {
    let text = std::fs::read_to_string(path).map_err(|source| SpecError::Read {
        path: path.display().to_string(),
        source,
    })?;
    Ok(parse_with(path, &text, check)?)
}
