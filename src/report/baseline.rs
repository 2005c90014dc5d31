//! Baselines: reading a stored report, deciding whether it is comparable
//! (same testbed fingerprint) and saying out loud what was compared. The
//! network side (finding the baseline of a pull request) is in `github/`.

use std::path::Path;

use super::model::{BaselineInfo, Report, Summary, Testbed, SCHEMA};

/// Said wherever a baseline from another testbed was not compared.
pub const DIFFERENT_TESTBED: &str = "baseline from a different testbed: not compared";

#[derive(Debug, thiserror::Error)]
pub enum BaselineError {
    #[error("cannot read the baseline {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("the baseline {path} is not a gate report: {source}")]
    Parse {
        path: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("the baseline {path} has report schema {found}; this gate reads schema {SCHEMA}")]
    Schema { path: String, found: u32 },
}

/// Parses a report from text; `origin` names it in errors.
pub fn parse(text: &str, origin: &str) -> Result<Report, BaselineError> {
    // Read the schema first so a newer report says so instead of "missing field".
    if let Ok(v) = serde_json::from_str::<serde_json::Value>(text) {
        if let Some(found) = v.get("schema").and_then(|s| s.as_u64()) {
            if found != SCHEMA as u64 {
                return Err(BaselineError::Schema {
                    path: origin.into(),
                    found: found as u32,
                });
            }
        }
    }
    serde_json::from_str(text).map_err(|source| BaselineError::Parse {
        path: origin.into(),
        source,
    })
}

/// Reads a report file (`--baseline FILE`).
pub fn load_file(path: &Path) -> Result<Report, BaselineError> {
    let text = std::fs::read_to_string(path).map_err(|source| BaselineError::Read {
        path: path.display().to_string(),
        source,
    })?;
    parse(&text, &path.display().to_string())
}

/// Whether figures measured on `baseline` may be compared with `current`'s.
pub fn comparable(current: &Testbed, baseline: &Testbed) -> bool {
    current.fingerprint() == baseline.fingerprint()
}

/// What the run is compared with.
#[derive(Debug, Clone)]
pub enum Outcome {
    /// A baseline report, from `source` (a path or `commit SHA`).
    Found { report: Box<Report>, source: String },
    /// No baseline; the reason is shown to the user.
    Missing { reason: String },
}

impl Outcome {
    pub fn report(&self) -> Option<&Report> {
        match self {
            Outcome::Found { report, .. } => Some(report),
            Outcome::Missing { .. } => None,
        }
    }
}

/// The report's `baseline` field for an outcome.
pub fn info(outcome: &Outcome, current: &Testbed) -> Option<BaselineInfo> {
    match outcome {
        Outcome::Found { report, source } => Some(BaselineInfo {
            source: source.clone(),
            commit: report.commit.clone(),
            comparable: comparable(current, &report.testbed),
        }),
        Outcome::Missing { .. } => None,
    }
}

/// The warning a baseline outcome adds to the summary, if any.
pub fn warning(outcome: &Outcome, current: &Testbed) -> Option<String> {
    match outcome {
        Outcome::Missing { reason } => Some(format!("no baseline ({reason}): regressions are not checked")),
        Outcome::Found { report, .. } if !comparable(current, &report.testbed) => {
            let b = &report.testbed;
            Some(format!(
                "{DIFFERENT_TESTBED} (baseline: {} on {}, fingerprint {}; this run: {} on {}, fingerprint {})",
                b.backend,
                b.device_name,
                b.fingerprint(),
                current.backend,
                current.device_name,
                current.fingerprint()
            ))
        }
        Outcome::Found { .. } => None,
    }
}

/// Adds the baseline's warning to a verdict's summary; under `strict` a
/// warning fails the run.
pub fn annotate(summary: &mut Summary, outcome: &Outcome, current: &Testbed) {
    if let Some(w) = warning(outcome, current) {
        summary.warnings.insert(0, w);
    }
    if summary.strict && !summary.warnings.is_empty() {
        summary.status = "fail".into();
    }
}
