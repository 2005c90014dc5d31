//! A report (gate-contract's `report`) assembled from measurements, the
//! verdict, the baseline comparison and merging of shards' reports.
//!
//! No ML framework is in this crate's dependency tree. Internal to gate:
//! its API may change in any release.

mod assemble;
pub mod baseline;
mod compare;
pub mod input;
pub mod interval;
pub mod merge;
mod verdict;

pub use assemble::{component_report, not_measured_report, testbed};
pub use compare::compare_blocks;
pub use verdict::{
    conclude, decide, decide_anchored, ratios_beyond_card, Inputs, Reserve, Verdict, PARAMS_AGREEMENT,
    PARAMS_AGREEMENT_FLOOR,
};
