//! The marked YAML tree → a validated [`Spec`](crate::budget::Spec). Every problem
//! is collected (not just the first) with its position and a hint.

mod coerce;
mod component;
mod context;
mod device;
mod ensemble;
mod harness;
mod hints;
mod overrides;
mod root;

#[cfg(feature = "yaml")]
pub(crate) use context::MAX_KEPT;

pub use harness::is_cargo_name;
pub(super) use root::{check_workloads, validate};
