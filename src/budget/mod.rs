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
    #[error("{path}: the spec is larger than {limit} bytes, the most gate reads")]
    TooLarge { path: String, limit: u64 },
    #[error("{0}")]
    Invalid(#[from] Diagnostics),
}

/// The largest spec gate reads (64 MiB, some hundred thousand components):
/// a spec read from an endless source (`/dev/zero`) fails fast instead of
/// filling memory.
pub const MAX_SPEC_BYTES: u64 = 64 << 20;

/// Parses and validates `text` as the spec at `path`.
pub fn parse(path: &Path, text: &str) -> Result<Spec, Diagnostics> {
    match yaml::parse(text) {
        Ok((root, issues)) => validate::validate(path, &root, issues),
        Err(issue) => Err(one(path, issue)),
    }
}

/// Parses and validates raw file bytes: a UTF-8 byte-order mark is
/// skipped; UTF-16/UTF-32 (known by their mark) and any other non-UTF-8
/// bytes are refused by name, at the first bad byte.
pub fn parse_bytes(path: &Path, bytes: &[u8]) -> Result<Spec, Diagnostics> {
    let text = yaml::decode(bytes).map_err(|issue| one(path, issue))?;
    parse(path, text)
}

/// Reads and validates the spec file at `path`.
pub fn load(path: &Path) -> Result<Spec, SpecError> {
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
    Ok(parse_bytes(path, &bytes)?)
}

fn one(path: &Path, issue: yaml::YamlIssue) -> Diagnostics {
    Diagnostics(vec![Diagnostic {
        file: path.display().to_string(),
        pos: issue.pos,
        message: issue.message,
        hint: issue.hint,
    }])
}
