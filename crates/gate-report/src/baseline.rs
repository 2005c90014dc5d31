//! Baselines: reading a stored report, deciding whether it is comparable
//! (same testbed fingerprint) and saying out loud what was compared. The
//! network side (finding the baseline of a pull request) is in `github/`.

use std::path::Path;

use gate_contract::report::{BaselineInfo, Report, Testbed, Warning, WarningKind, DIFFERENT_TESTBED, SCHEMA};

/// Said wherever a baseline from another testbed was not compared.

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
    Schema { path: String, found: u64 },
    #[error("the baseline {path} has {value} for `{component}.{metric}`; sizes and times are never negative")]
    Negative {
        path: String,
        component: String,
        metric: String,
        value: f64,
    },
    #[error("cannot read the baseline {path}: it is larger than {limit} bytes, the most gate reads")]
    TooLarge { path: String, limit: u64 },
    #[error(
        "the baseline {path} is not a gate report: the config of `{component}` nests {depth} levels, deeper than the {limit} gate writes"
    )]
    TooDeep {
        path: String,
        component: String,
        depth: usize,
        limit: usize,
    },
}

/// The largest baseline gate reads (256 MiB, far above any real report): a
/// baseline read from an endless source fails fast instead of filling memory.
pub const MAX_BASELINE_BYTES: u64 = 256 << 20;

/// Parses a report from text; `origin` names it in errors.
pub fn parse(text: &str, origin: &str) -> Result<Report, BaselineError> {
    // Read the schema first so a newer report says so instead of "missing field".
    if let Ok(v) = serde_json::from_str::<serde_json::Value>(text) {
        if let Some(found) = v.get("schema").and_then(|s| s.as_u64()) {
            if found != SCHEMA as u64 {
                return Err(BaselineError::Schema {
                    path: origin.into(),
                    found,
                });
            }
        }
    }
    let report: Report = serde_json::from_str(text).map_err(|source| BaselineError::Parse {
        path: origin.into(),
        source,
    })?;
    // The one depth limit of the spec's configs: what gate writes it reads
    // back, and what it could not have written is not its (issue #43 item 11).
    let limit = gate_spec::config::MAX_CONFIG_DEPTH;
    for (component, c) in &report.components {
        let depth = gate_spec::config::json_depth(&c.config);
        if depth > limit {
            return Err(BaselineError::TooDeep {
                path: origin.into(),
                component: component.clone(),
                depth,
                limit,
            });
        }
    }
    // A negative size or time would "regress" or "improve" against anything.
    for (component, c) in &report.components {
        for (metric, v) in &c.metrics {
            if v.unit != gate_spec::metric::Unit::One && (v.value < 0.0 || !v.value.is_finite()) {
                return Err(BaselineError::Negative {
                    path: origin.into(),
                    component: component.clone(),
                    metric: metric.to_string(),
                    value: v.value,
                });
            }
        }
    }
    Ok(report)
}

/// Reads a report file the user named (`--baseline FILE`): a stream
/// (`<(git show ...)`) is read as given.
pub fn load_file(path: &Path) -> Result<Report, BaselineError> {
    load(path, std::fs::File::open(path))
}

/// Reads a report gate found in a folder or an artifact (`DIR/report.json`,
/// `DIR/baseline.json`, a history folder's): only a regular file, see
/// [`crate::input`].
pub fn load_found(path: &Path) -> Result<Report, BaselineError> {
    load(path, crate::input::open_regular(path))
}

fn load(path: &Path, file: std::io::Result<std::fs::File>) -> Result<Report, BaselineError> {
    let read_err = |source| BaselineError::Read {
        path: path.display().to_string(),
        source,
    };
    let mut text = String::new();
    let file = file.map_err(read_err)?;
    std::io::Read::read_to_string(&mut std::io::Read::take(file, MAX_BASELINE_BYTES + 1), &mut text)
        .map_err(read_err)?;
    if text.len() as u64 > MAX_BASELINE_BYTES {
        return Err(BaselineError::TooLarge {
            path: path.display().to_string(),
            limit: MAX_BASELINE_BYTES,
        });
    }
    parse(&text, &path.display().to_string())
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

/// What `--baseline` (or `--anchor`) found before the run's card is known:
/// a store that keeps several cards' reports side by side gives the nearest
/// of each, and which one the run is compared with is decided once its
/// testbed is measured ([`Candidates::for_testbed`]).
#[derive(Debug, Clone)]
pub struct Candidates {
    /// Nearest first, each with its source; empty when none was found.
    found: Vec<(Box<Report>, String)>,
    /// Why none was found, when `found` is empty.
    missing: String,
}

impl From<Outcome> for Candidates {
    fn from(outcome: Outcome) -> Candidates {
        match outcome {
            Outcome::Found { report, source } => Candidates {
                found: vec![(report, source)],
                missing: String::new(),
            },
            Outcome::Missing { reason } => Candidates {
                found: Vec::new(),
                missing: reason,
            },
        }
    }
}

impl Candidates {
    /// Reports found (nearest first, with their sources), or why there is none.
    pub fn new(found: Vec<(Box<Report>, String)>, missing: impl Into<String>) -> Candidates {
        Candidates {
            found,
            missing: missing.into(),
        }
    }

    /// The nearest report, whatever its card: what is read before the
    /// profiles run and the card is known (a shard's profile times).
    pub fn nearest(&self) -> Option<&Report> {
        self.found.first().map(|(r, _)| r.as_ref())
    }

    /// The nearest report measured on `backend` (`cuda`), else the nearest.
    pub fn nearest_on(&self, backend: &str) -> Option<&Report> {
        self.found
            .iter()
            .map(|(r, _)| r.as_ref())
            .find(|r| r.testbed.backend == backend)
            .or_else(|| self.nearest())
    }

    /// Whether no report was found.
    pub fn is_empty(&self) -> bool {
        self.found.is_empty()
    }

    /// The report a run on `testbed` is compared with: one comparable with
    /// it; else one of its card with another driver or framework; else the
    /// nearest. One that is not comparable is then said to be another
    /// testbed's ([`warning`]) and never compared, as a lone baseline
    /// from another card always was.
    pub fn for_testbed(self, testbed: &Testbed) -> Outcome {
        let same_card =
            |b: &Testbed| b.backend == testbed.backend && b.comparable_device() == testbed.comparable_device();
        let at = self
            .found
            .iter()
            .position(|(r, _)| testbed.comparable(&r.testbed))
            .or_else(|| self.found.iter().position(|(r, _)| same_card(&r.testbed)))
            .unwrap_or(0);
        match self.found.into_iter().nth(at) {
            Some((report, source)) => Outcome::Found { report, source },
            None => Outcome::Missing { reason: self.missing },
        }
    }
}

/// The report's `baseline` field for an outcome.
pub fn info(outcome: &Outcome, current: &Testbed) -> Option<BaselineInfo> {
    match outcome {
        Outcome::Found { report, source } => Some(BaselineInfo {
            source: source.clone(),
            commit: report.commit.clone(),
            comparable: current.comparable(&report.testbed),
        }),
        Outcome::Missing { .. } => None,
    }
}

/// The warning a baseline outcome adds to the summary, if any.
pub fn warning(outcome: &Outcome, current: &Testbed) -> Option<Warning> {
    match outcome {
        Outcome::Missing { reason } => Some(Warning::run_wide(
            WarningKind::NoBaseline,
            format!("no baseline ({reason}): regressions are not checked"),
        )),
        Outcome::Found { report, .. } if !current.comparable(&report.testbed) => {
            let b = &report.testbed;
            let text = format!(
                "{DIFFERENT_TESTBED} (baseline: {} on {}, fingerprint {}; this run: {} on {}, fingerprint {})",
                b.backend,
                b.device_name,
                b.fingerprint(),
                current.backend,
                current.device_name,
                current.fingerprint()
            );
            Some(Warning::run_wide(WarningKind::DifferentTestbed, text))
        }
        Outcome::Found { .. } => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture() -> serde_json::Value {
        // A copy of the repository's tests/fixtures/report-h200.json inside
        // the crate, so the published package's tests build (tests/packaging.rs
        // holds the two equal).
        let text = include_str!("../testdata/report-h200.json");
        serde_json::from_str(text).unwrap()
    }

    #[test]
    fn a_negative_size_or_time_is_refused() {
        let mut v = fixture();
        let (name, c) = v["components"].as_object_mut().unwrap().iter_mut().next().unwrap();
        let name = name.clone();
        let (metric, m) = c["metrics"]
            .as_object_mut()
            .unwrap()
            .iter_mut()
            .find(|(_, m)| m["unit"] == "bytes")
            .unwrap();
        let metric = metric.clone();
        m["value"] = serde_json::json!(-5);
        let e = parse(&v.to_string(), "b.json").unwrap_err().to_string();
        assert_eq!(
            e,
            format!("the baseline b.json has -5 for `{name}.{metric}`; sizes and times are never negative")
        );
        assert!(parse(&fixture().to_string(), "b.json").is_ok());
    }

    /// The fixture's report as measured on `device` (`cpu`: the CPU).
    fn on(device: &str) -> Box<Report> {
        let mut r: Report = serde_json::from_value(fixture()).unwrap();
        r.testbed.backend = if device == "cpu" { "cpu" } else { "cuda" }.into();
        r.testbed.device_name = device.into();
        r.commit = Some(device.into());
        Box::new(r)
    }

    #[test]
    fn each_card_is_compared_with_its_own_cards_report_and_another_card_is_said() {
        let found =
            |devices: &[&str]| Candidates::new(devices.iter().map(|d| (on(d), format!("commit {d}"))).collect(), "");
        let both = found(&["NVIDIA H100", "cpu"]);
        // Before the card is known: the nearest, or the backend's.
        assert_eq!(both.nearest().unwrap().testbed.device_name, "NVIDIA H100");
        assert_eq!(both.nearest_on("cpu").unwrap().testbed.device_name, "cpu");
        // Once it is: each run its own card's, whichever is nearer.
        for device in ["NVIDIA H100", "cpu"] {
            let run = on(device).testbed;
            let chosen = both.clone().for_testbed(&run);
            assert_eq!(chosen.report().unwrap().commit.as_deref(), Some(device));
            assert!(warning(&chosen, &run).is_none());
        }
        // Only another card's: kept, and said as another testbed's (never compared).
        let run = on("NVIDIA A100").testbed;
        let chosen = found(&["NVIDIA H100", "cpu"]).for_testbed(&run);
        assert_eq!(chosen.report().unwrap().testbed.device_name, "NVIDIA H100");
        assert_eq!(warning(&chosen, &run).unwrap().kind, WarningKind::DifferentTestbed);
        assert!(!info(&chosen, &run).unwrap().comparable);
        // Its own card under another driver before another card.
        let mut newer_driver = on("NVIDIA A100");
        newer_driver.testbed.driver = Some("590".into());
        let chosen =
            Candidates::new(vec![(on("NVIDIA H100"), "h".into()), (newer_driver, "a".into())], "").for_testbed(&run);
        assert_eq!(chosen.report().unwrap().testbed.device_name, "NVIDIA A100");
        // None found: why.
        let none = Candidates::new(Vec::new(), "the store is empty");
        assert!(matches!(none.for_testbed(&run), Outcome::Missing { reason } if reason == "the store is empty"));
    }

    #[test]
    fn a_schema_beyond_32_bits_is_shown_exactly() {
        let mut v = fixture();
        v["schema"] = serde_json::json!(4_294_967_297u64);
        let e = parse(&v.to_string(), "b.json").unwrap_err().to_string();
        assert_eq!(
            e,
            format!("the baseline b.json has report schema 4294967297; this gate reads schema {SCHEMA}")
        );
    }

    #[cfg(unix)]
    #[test]
    fn an_endless_baseline_fails_fast_with_the_cap() {
        let e = load_file(Path::new("/dev/zero")).unwrap_err().to_string();
        assert_eq!(
            e,
            "cannot read the baseline /dev/zero: it is larger than 268435456 bytes, the most gate reads"
        );
    }
}
