//! Combining the reports of sharded jobs (`gate check --only ...` on a
//! matrix of runners) into one set of components, to be decided again as one
//! report. Pure: reports in, components out.

use std::collections::BTreeMap;

use super::model::{ComponentReport, Report, Testbed};

#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    #[error("no reports to merge")]
    Empty,
    #[error("component `{component}` is in two shards: {first} and {second}")]
    Duplicate {
        component: String,
        first: String,
        second: String,
    },
    #[error("the shards ran on different testbeds: {first} ({first_fp}) and {second} ({second_fp})")]
    Testbed {
        first: String,
        first_fp: String,
        second: String,
        second_fp: String,
    },
    #[error("the shards gate different specs: `{first}` and `{second}`")]
    Spec { first: String, second: String },
}

/// The union of the shards, ready to be decided again.
#[derive(Debug, Clone)]
pub struct Merged {
    pub spec: String,
    pub commit: Option<String>,
    pub testbed: Testbed,
    pub components: BTreeMap<String, ComponentReport>,
    /// Whether any shard ran under `--strict`.
    pub strict: bool,
    /// The longest shard (shards run in parallel).
    pub wall_seconds: f64,
    /// The measured context reserve per process, when a shard measured one.
    pub measured_reserve: Option<u64>,
}

/// Merges shard reports, each named by where it came from.
pub fn merge(shards: &[(String, Report)]) -> Result<Merged, MergeError> {
    let (first_origin, first) = shards.first().ok_or(MergeError::Empty)?;
    let mut components: BTreeMap<String, ComponentReport> = BTreeMap::new();
    let mut owner: BTreeMap<String, &str> = BTreeMap::new();
    let mut merged = Merged {
        spec: first.spec.clone(),
        commit: first.commit.clone(),
        testbed: first.testbed.clone(),
        components: BTreeMap::new(),
        strict: false,
        wall_seconds: 0.0,
        measured_reserve: None,
    };
    for (origin, r) in shards {
        if r.testbed.fingerprint() != first.testbed.fingerprint() {
            return Err(MergeError::Testbed {
                first: first_origin.clone(),
                first_fp: first.testbed.fingerprint(),
                second: origin.clone(),
                second_fp: r.testbed.fingerprint(),
            });
        }
        if r.spec != first.spec {
            return Err(MergeError::Spec {
                first: first.spec.clone(),
                second: r.spec.clone(),
            });
        }
        for (name, c) in &r.components {
            if let Some(prev) = owner.get(name) {
                return Err(MergeError::Duplicate {
                    component: name.clone(),
                    first: prev.to_string(),
                    second: origin.clone(),
                });
            }
            owner.insert(name.clone(), origin);
            components.insert(name.clone(), c.clone());
        }
        merged.strict |= r.summary.strict;
        merged.wall_seconds = merged.wall_seconds.max(r.wall_seconds);
        if merged.commit.is_none() {
            merged.commit = r.commit.clone();
        }
        if let Some(e) = &r.ensemble {
            if e.reserve_source == crate::model::ReserveSource::Measured && e.processes > 0 {
                let per = e.reserve_bytes / e.processes;
                merged.measured_reserve = Some(merged.measured_reserve.map_or(per, |m: u64| m.max(per)));
            }
        }
    }
    merged.components = components;
    Ok(merged)
}
