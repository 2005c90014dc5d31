//! The report (schema 1): the stable contract other tools read. Add fields
//! freely; never rename or drop one without bumping [`SCHEMA`].
//!
//! One file per part of report.json: [`Report`] and its testbed here; the
//! components' figures in `component`, what a row is about in `subject`,
//! each budget's result in `result`, the warnings in `warning`, the
//! summary (with its notes and the acknowledge label) in `summary`. The
//! paths stay `gate_contract::report::X`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use gate_spec::hash::fnv1a;

mod component;
mod result;
mod subject;
mod summary;
mod warning;

pub use component::{
    BlockReport, ComponentError, ComponentReport, EnsembleReport, ErrorKind, MetricValue, PhaseTime, RatioLosses,
    ReserveSource, UNATTRIBUTED,
};
pub use result::{BudgetResult, Drift, Interval, Status};
pub use subject::{MetricId, Subject};
pub use summary::{
    AckInput, Acknowledgement, BudgetChange, BudgetChangeFact, BudgetChangeKind, Limit, Note, NoteKind, RunStatus,
    Summary, TighterBudget, TIGHTEN_AFTER,
};
use warning::reads_as_acknowledgement;
pub use warning::{Warning, WarningKind, CACHE_NEVER_GREW_LEAD, CAPACITY_NOT_HELD_LEAD, UNTRAINED_LEAD};

/// report.json's version.
pub const SCHEMA: u32 = 1;

/// How a warning that a baseline is another testbed's begins (its
/// sentence, and how a report stored before warnings were typed is read).
pub const DIFFERENT_TESTBED: &str = "baseline from a different testbed: not compared";

/// Where and with what the figures were measured. Reports from different
/// testbeds are never compared.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Testbed {
    pub backend: String,
    pub device_name: String,
    /// The capacity that is gated (the spec's card), whatever card ran the gate.
    pub capacity_bytes: u64,
    /// The declared card's name from the spec.
    pub gated_device: String,
    /// Memory of the device that actually ran the profiles, when known.
    pub device_total_bytes: Option<u64>,
    pub driver: Option<String>,
    pub cuda: Option<String>,
    /// The version of [`FIRST_FRAMEWORK`](crate::protocol::FIRST_FRAMEWORK)
    /// the models ran on, under its field of before `framework`; empty for
    /// another framework. Kept beside `framework` so stored reports and the
    /// fingerprints of their baselines read as before.
    #[serde(default, rename = "candle_version")]
    pub legacy_version: String,
    /// The framework and its version the models ran on (reports stored
    /// before it have none: their legacy version says it, see
    /// [`Testbed::framework_id`]).
    // Unknown in a stored report is left out when it is written again, so
    // a report reads back as it was.
    #[serde(default, skip_serializing_if = "crate::protocol::FrameworkId::is_unknown")]
    pub framework: crate::protocol::FrameworkId,
    pub os: String,
    pub arch: String,
}

impl Testbed {
    /// Whether figures measured on `baseline` may be compared with this one's.
    pub fn comparable(&self, baseline: &Testbed) -> bool {
        self.fingerprint() == baseline.fingerprint()
    }

    /// A short stable hash of what makes figures comparable across runs.
    pub fn fingerprint(&self) -> String {
        let mut key = format!(
            "{}|{}|{}|{}|{}|{}|{}",
            self.backend,
            self.comparable_device(),
            self.capacity_bytes,
            self.driver.as_deref().unwrap_or(""),
            self.cuda.as_deref().unwrap_or(""),
            self.legacy_version,
            self.arch
        );
        // Another framework than the first (no legacy version): its name
        // and version, so its figures meet only its own. A run of the first
        // framework keeps the key its stored baselines were fingerprinted with.
        if self.legacy_version.is_empty() && !self.framework.name.is_empty() {
            key.push_str(&format!("|{}|{}", self.framework.name, self.framework.version));
        }
        format!("{:016x}", fnv1a(&key))
    }
}

impl Testbed {
    /// The framework the models ran on: `framework`, or for a report stored
    /// before it, the first framework at its legacy version (unknown when
    /// that is empty too).
    pub fn framework_id(&self) -> crate::protocol::FrameworkId {
        if self.framework.name.is_empty() {
            crate::protocol::FrameworkId::first(&self.legacy_version)
        } else {
            self.framework.clone()
        }
    }

    /// The device as far as it changes the figures. On the CPU the model
    /// name does not: GitHub's hosted runners hand out AMD EPYC or Intel
    /// Xeon at random, and the counting allocator's bytes do not depend on
    /// the CPU (the matmul's cache-sized packing buffers are left out as
    /// scratch, see `probe::alloc::SCRATCH_ALIGN`; `tests/cpu_independence.rs`
    /// runs a profile under other cache sizes). Only the architecture
    /// (`arch`) stays in the fingerprint. On CUDA the card matters.
    pub fn comparable_device(&self) -> &str {
        if self.backend == "cpu" {
            "cpu"
        } else {
            &self.device_name
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BaselineInfo {
    /// Where it came from: a file path or `commit SHA`.
    pub source: String,
    pub commit: Option<String>,
    /// Whether its testbed matched; figures are compared only when it does.
    pub comparable: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub schema: u32,
    pub gate_version: String,
    pub commit: Option<String>,
    /// The spec file as named on the command line.
    pub spec: String,
    pub testbed: Testbed,
    pub components: BTreeMap<String, ComponentReport>,
    pub ensemble: Option<EnsembleReport>,
    pub results: Vec<BudgetResult>,
    pub summary: Summary,
    pub baseline: Option<BaselineInfo>,
    /// Wall time of the whole run, in seconds.
    pub wall_seconds: f64,
    /// `gate check --plan`: the measured fix of each component that failed
    /// a budget, by component (`gate plan`'s plan.json for each).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub plans: BTreeMap<String, crate::plan::Plan>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_testbed_without_framework_loads_and_keeps_its_fingerprint() {
        let stored = r#"{"backend": "cpu", "device_name": "x", "capacity_bytes": 1, "gated_device": "card",
            "device_total_bytes": null, "driver": null, "cuda": null, "candle_version": "0.11.1", "os": "linux",
            "arch": "x86_64"}"#;
        let old: Testbed = serde_json::from_str(stored).unwrap();
        assert_eq!(old.framework, crate::protocol::FrameworkId::default());
        // Its framework is the first one, at the version it kept.
        assert_eq!(
            old.framework_id(),
            crate::protocol::FrameworkId {
                name: crate::protocol::FIRST_FRAMEWORK.into(),
                version: "0.11.1".into(),
            }
        );
        let now = Testbed {
            framework: old.framework_id(),
            ..old.clone()
        };
        assert_eq!(old.fingerprint(), now.fingerprint());
        // Another framework meets only its own figures.
        let other = |version: &str| Testbed {
            legacy_version: String::new(),
            framework: crate::protocol::FrameworkId {
                name: "other".into(),
                version: version.into(),
            },
            ..old.clone()
        };
        assert_ne!(other("0.22.1").fingerprint(), old.fingerprint());
        assert_ne!(other("0.22.1").fingerprint(), other("0.23.0").fingerprint());
        assert_eq!(other("0.22.1").framework_id(), other("0.22.1").framework);
        // A report without the legacy field (another framework's run) loads too.
        let json = serde_json::to_value(other("0.22.1")).unwrap();
        let mut obj = json.as_object().unwrap().clone();
        assert!(
            obj.remove("candle_version").is_some(),
            "report.json keeps its field name"
        );
        let back: Testbed = serde_json::from_value(obj.into()).unwrap();
        assert_eq!(back, other("0.22.1"));
    }

    #[test]
    fn a_cpu_testbed_is_any_cpu_of_its_architecture_a_gpu_is_its_card() {
        let epyc = Testbed {
            backend: "cpu".into(),
            device_name: "AMD EPYC 7763 64-Core Processor".into(),
            arch: "x86_64".into(),
            ..Testbed::default()
        };
        let xeon = Testbed {
            device_name: "Intel(R) Xeon(R) Platinum 8370C CPU @ 2.80GHz".into(),
            ..epyc.clone()
        };
        assert_eq!(epyc.fingerprint(), xeon.fingerprint());
        let arm = Testbed {
            arch: "aarch64".into(),
            ..epyc.clone()
        };
        assert_ne!(epyc.fingerprint(), arm.fingerprint());
        let h200 = Testbed {
            backend: "cuda".into(),
            device_name: "NVIDIA H200".into(),
            ..epyc.clone()
        };
        let a100 = Testbed {
            device_name: "NVIDIA A100".into(),
            ..h200.clone()
        };
        assert_ne!(h200.fingerprint(), a100.fingerprint());
    }
}
