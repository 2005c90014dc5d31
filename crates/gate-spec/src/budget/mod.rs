//! The spec: `budgets.yaml` → a validated [`Spec`]. The only module that
//! knows YAML (and only `yaml.rs` inside it).

mod diagnostic;
mod measurable;
mod spec;
mod validate;
mod yaml;

use std::path::Path;

pub use diagnostic::{Diagnostic, Diagnostics};
pub use measurable::cuda_only;
pub use spec::*;
pub use yaml::Pos;

/// Why a spec could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    #[error("{path}: cannot read the spec: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("{path}: the spec is larger than {limit} bytes, the most gate reads")]
    TooLarge { path: String, limit: u64 },
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

/// The largest spec gate reads (64 MiB, some hundred thousand components):
/// a spec read from an endless source (`/dev/zero`) fails fast instead of
/// filling memory.
pub const MAX_SPEC_BYTES: u64 = 64 << 20;

/// Parses and validates `text` as the spec at `path` (its workloads' configs unchecked).
pub fn parse(path: &Path, text: &str) -> Result<Spec, Diagnostics> {
    parse_with(path, text, None)
}

/// Parses and validates `text`, checking each workload with `check`.
pub fn parse_with(path: &Path, text: &str, check: Option<&dyn WorkloadCheck>) -> Result<Spec, Diagnostics> {
    match yaml::parse(text) {
        Ok((root, issues)) => validate::validate(path, &root, issues, check),
        Err(issue) => Err(one(path, issue)),
    }
}

/// Parses and validates raw file bytes: a UTF-8 byte-order mark is
/// skipped; UTF-16/UTF-32 (known by their mark) and any other non-UTF-8
/// bytes are refused by name, at the first bad byte.
pub fn parse_bytes(path: &Path, bytes: &[u8]) -> Result<Spec, Diagnostics> {
    parse_bytes_with(path, bytes, None)
}

/// [`parse_bytes`], checking each workload with `check`.
pub fn parse_bytes_with(path: &Path, bytes: &[u8], check: Option<&dyn WorkloadCheck>) -> Result<Spec, Diagnostics> {
    let text = yaml::decode(bytes).map_err(|issue| one(path, issue))?;
    parse_with(path, text, check)
}

/// Reads and validates the spec file at `path` (its workloads' configs unchecked).
pub fn load(path: &Path) -> Result<Spec, SpecError> {
    load_with(path, None)
}

/// Reads and validates the spec file at `path`, checking each workload with `check`.
pub fn load_with(path: &Path, check: Option<&dyn WorkloadCheck>) -> Result<Spec, SpecError> {
    Ok(parse_bytes_with(path, &read(path)?, check)?)
}

/// The spec file's bytes, at most [`MAX_SPEC_BYTES`].
pub fn read(path: &Path) -> Result<Vec<u8>, SpecError> {
    let read_err = |source| SpecError::Read {
        path: path.display().to_string(),
        source,
    };
    let mut bytes = Vec::new();
    let file = std::fs::File::open(path).map_err(read_err)?;
    std::io::Read::read_to_end(&mut std::io::Read::take(file, MAX_SPEC_BYTES + 1), &mut bytes).map_err(read_err)?;
    if bytes.len() as u64 > MAX_SPEC_BYTES {
        return Err(SpecError::TooLarge {
            path: path.display().to_string(),
            limit: MAX_SPEC_BYTES,
        });
    }
    Ok(bytes)
}

fn one(path: &Path, issue: yaml::YamlIssue) -> Diagnostics {
    Diagnostics(vec![Diagnostic {
        file: path.display().to_string(),
        pos: issue.pos,
        message: issue.message,
        hint: issue.hint,
    }])
}
