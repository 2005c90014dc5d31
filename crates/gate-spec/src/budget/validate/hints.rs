//! The keys each part of the spec takes, and the "did you mean" hint for a
//! name that is none of those it could be.

use super::context::Ctx;
use crate::budget::tree::Node;
use crate::config::Pos;

pub(super) const TOP_KEYS: &[&str] = &[
    "version",
    "device",
    "defaults",
    "components",
    "ensemble",
    "harness",
    "anchor",
];
pub(super) const HARNESS_KEYS: &[&str] = &["package", "bin", "features", "manifest"];
pub(super) const DEVICE_KEYS: &[&str] = &["name", "capacity", "reserve", "emulate"];
pub(super) const DEFAULT_KEYS: &[&str] = &["dtype", "batch_size", "tolerance", "drift", "seed", "timing"];
pub(super) const COMPONENT_KEYS: &[&str] = &[
    "workload",
    "config",
    "batch_size",
    "dtype",
    "seed",
    "tolerance",
    "drift",
    "timing",
    "budgets",
    "checkpoint",
    "variants",
    "reference",
    "master_weights",
    "spans",
    "generate",
];
pub(super) const VARIANT_KEYS: &[&str] = &[
    "dtype",
    "batch_size",
    "checkpoint",
    "config",
    "budgets",
    "master_weights",
    "spans",
    "generate",
];
pub(super) const GENERATE_KEYS: &[&str] = &["prefill", "decode"];
pub(super) const TIMING_KEYS: &[&str] = &["warmup", "steps", "pairs"];
pub(super) const CHECKPOINT_KEYS: &[&str] = &["chunk"];
pub(super) const ENSEMBLE_KEYS: &[&str] = &["members", "metric", "processes", "budgets"];
pub(super) const ENSEMBLE_BUDGET_KEYS: &[&str] = &["total", "headroom"];

/// The hint for `word`, which is none of `known`: the nearest as "did you
/// mean", then every one after `listed`; `otherwise` leads the list when
/// none is near.
pub(super) fn suggest(word: &str, known: &[&str], listed: &str, otherwise: &str) -> String {
    crate::hint::suggest_or(word, known, listed, otherwise)
}

impl Ctx {
    /// Reports keys of `entries` not in `known`.
    pub(super) fn known_keys(&mut self, entries: &[(String, Pos, Node)], known: &[&str], where_: &str) {
        let takes = format!("{where_} takes");
        for (key, pos, _) in entries {
            if !known.contains(&key.as_str()) {
                self.err(
                    *pos,
                    format!("unknown key `{key}` in {where_}"),
                    suggest(key, known, &takes, &takes),
                );
            }
        }
    }
}
