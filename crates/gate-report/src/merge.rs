//! Combining the reports of sharded jobs (`gate check --only ...` on a
//! matrix of runners) into one set of components, to be decided again as one
//! report. Pure: reports in, components out.

use std::collections::BTreeMap;

use gate_spec::config::{Node, Value};

use gate_contract::report::{ComponentReport, Report, Testbed};
use gate_spec::budget::Component;

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
    /// Figures of two commits are not one run's (issue #43 item 7).
    #[error("the shards measured different commits: {first} at {first_commit}, {second} at {second_commit}")]
    Commit {
        first: String,
        first_commit: String,
        second: String,
        second_commit: String,
    },
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
    /// The shards that recorded no commit while another did: the merged
    /// report takes the others' commit, which the caller says.
    pub without_commit: Vec<String>,
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
        without_commit: Vec::new(),
    };
    // The first shard that recorded a commit, and where it came from.
    let mut commit_of: Option<(&str, &str)> = None;
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
        match (&r.commit, commit_of) {
            (Some(c), Some((first, fc))) if c != fc => {
                return Err(MergeError::Commit {
                    first: first.to_string(),
                    first_commit: fc.to_string(),
                    second: origin.clone(),
                    second_commit: c.clone(),
                })
            }
            (Some(c), None) => commit_of = Some((origin, c)),
            (None, _) => merged.without_commit.push(origin.clone()),
            _ => {}
        }
        merged.strict |= r.summary.strict;
        merged.wall_seconds = merged.wall_seconds.max(r.wall_seconds);
        if let Some(e) = &r.ensemble {
            if e.reserve_source == gate_contract::report::ReserveSource::Measured && e.processes > 0 {
                let per = e.reserve_bytes / e.processes;
                merged.measured_reserve = Some(merged.measured_reserve.map_or(per, |m: u64| m.max(per)));
            }
        }
    }
    merged.components = components;
    merged.commit = commit_of.map(|(_, c)| c.to_string());
    if merged.commit.is_none() {
        // No shard knew its commit: nothing to say about the ones without.
        merged.without_commit.clear();
    }
    Ok(merged)
}

/// One setting a shard measured under that the spec now gives otherwise
/// (issue #43 item 7): `key` as the spec writes it, each side as text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettingChange {
    pub key: String,
    pub measured: String,
    pub spec: String,
}

impl std::fmt::Display for SettingChange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {} → {}", self.key, self.measured, self.spec)
    }
}

/// The settings of component `c` in the spec that differ from those the
/// shard's `measured` figures were taken under: workload, dtype, batch,
/// seed, master weights, and every config value the spec writes (the
/// report's config is the resolved one, defaults filled in, so only the
/// spec's own keys are compared; a key the report does not show, or a
/// value whose form cannot be compared, e.g. a size the workload read into
/// bytes, is not called a change).
pub fn setting_changes(c: &Component, measured: &ComponentReport) -> Vec<SettingChange> {
    let mut out = Vec::new();
    let mut field = |key: &str, measured: String, spec: String| {
        if measured != spec {
            out.push(SettingChange {
                key: key.into(),
                measured,
                spec,
            });
        }
    };
    field("workload", measured.workload.clone(), c.kind.clone());
    field("dtype", measured.dtype.clone(), c.dtype.as_str().into());
    field("batch_size", measured.batch_size.to_string(), c.batch_size.to_string());
    field("seed", measured.seed.to_string(), c.seed.to_string());
    field(
        "master_weights",
        measured.master_dtype.clone().unwrap_or_else(|| "none".into()),
        c.master_dtype.map_or("none", |d| d.as_str()).into(),
    );
    config_changes("config", &c.config, &measured.config, &mut out);
    out
}

fn config_changes(path: &str, spec: &Node, measured: &serde_json::Value, out: &mut Vec<SettingChange>) {
    use serde_json::Value as J;
    let change = |out: &mut Vec<SettingChange>, spec: String| {
        out.push(SettingChange {
            key: path.into(),
            measured: match measured {
                J::String(s) => s.clone(),
                J::Null => "(unset)".into(),
                v => v.to_string(),
            },
            spec,
        })
    };
    match (&spec.value, measured) {
        (Value::Map(entries), J::Object(m)) => {
            for (k, _, v) in entries {
                if let Some(mv) = m.get(k) {
                    config_changes(&format!("{path}.{k}"), v, mv, out);
                }
            }
        }
        (Value::Seq(items), J::Array(m)) if items.len() == m.len() => {
            for (i, (v, mv)) in items.iter().zip(m).enumerate() {
                config_changes(&format!("{path}[{i}]"), v, mv, out);
            }
        }
        (Value::Seq(items), J::Array(_)) => change(out, format!("a list of {} items", items.len())),
        (Value::Scalar { text, .. }, J::String(s)) if text != s => change(out, text.clone()),
        (Value::Scalar { text, quoted: false }, J::Number(n)) => {
            let differs = match (text.trim().parse::<f64>(), n.as_f64()) {
                (Ok(a), Some(b)) => a != b,
                // `64 MiB` read into bytes: not comparable here.
                _ => false,
            };
            if differs {
                change(out, text.clone());
            }
        }
        (Value::Scalar { text, quoted: false }, J::Bool(b))
            if matches!(text.as_str(), "true" | "false") && text.as_str() != b.to_string() =>
        {
            change(out, text.clone())
        }
        // Other pairs (a scalar the workload read into a mapping, a size
        // into bytes) cannot be told apart from the same setting.
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn component(config: &str) -> Component {
        let text = format!(
            "version: 1\ndevice: {{ name: card, capacity: 4 GiB }}\ncomponents:\n  a:\n    workload: mlp\n    batch_size: 4\n    config: {config}\n    budgets: {{ params: < 1 MiB }}\n"
        );
        gate_spec::budget::parse(std::path::Path::new("budgets.yaml"), &text)
            .unwrap()
            .components
            .remove(0)
    }

    fn measured(config: serde_json::Value) -> ComponentReport {
        let c = component("{}");
        let mut r = crate::not_measured_report(&c, "");
        r.config = config;
        r
    }

    #[test]
    fn only_a_setting_the_spec_writes_and_that_differs_is_a_change() {
        let m = measured(serde_json::json!({
            "width": 64, "rate": 0.5, "act": "gelu", "bias": true, "sizes": [1, 2], "cap": 67108864,
            "nested": { "depth": 2 }, "derived": 9
        }));
        // The same values in the spec's own forms: `64.0` for 64, a size
        // the workload read into bytes; keys it does not write are defaults.
        let same = component(
            "{ width: 64.0, rate: 0.5, act: gelu, bias: true, sizes: [1, 2], cap: 64 MiB, nested: { depth: 2 } }",
        );
        assert_eq!(setting_changes(&same, &m), vec![]);
        let other = component("{ width: 32, act: relu, bias: false, sizes: [1, 3], nested: { depth: 3 }, absent: 1 }");
        let said: Vec<String> = setting_changes(&other, &m).iter().map(|c| c.to_string()).collect();
        assert_eq!(
            said,
            [
                "config.width 64 → 32",
                "config.act gelu → relu",
                "config.bias true → false",
                "config.sizes[1] 2 → 3",
                "config.nested.depth 2 → 3"
            ]
        );
    }
}
