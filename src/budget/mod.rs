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

/// Parses and validates `text` as the spec at `path`.
pub fn parse(path: &Path, text: &str) -> Result<Spec, Diagnostics> {
    match yaml::parse(text) {
        Ok((root, issues)) => validate::validate(path, &root, issues),
        Err(issue) => Err(Diagnostics(vec![Diagnostic {
            file: path.display().to_string(),
            pos: issue.pos,
            message: issue.message,
            hint: issue.hint,
        }])),
    }
}

/// Reads and validates the spec file at `path`.
pub fn load(path: &Path) -> Result<Spec, SpecError> {
    let text = std::fs::read_to_string(path).map_err(|source| SpecError::Read {
        path: path.display().to_string(),
        source,
    })?;
    Ok(parse(path, &text)?)
}
