//! The report model (versioned JSON), its assembly from measurements, and
//! the verdict.

mod assemble;
pub mod baseline;
mod compare;
pub mod interval;
pub mod merge;
mod model;
mod verdict;

pub use assemble::{component_report, not_measured_report, testbed};
pub use model::*;
pub use verdict::{add_ratios, decide, Reserve, Verdict, PARAMS_AGREEMENT, PARAMS_AGREEMENT_FLOOR};
