//! The spec side of gate: `budgets.yaml` read and validated into a typed
//! [`budget::Spec`], with the units, metrics and diagnostics it is written
//! in. No ML framework is in this crate's dependency tree: a component's
//! dtype is gate's own [`dtype::DType`], and a workload's `config:` is kept
//! as a positioned tree ([`config::Node`]) that the harness reads into its
//! own type.
//!
//! The YAML reader (`budget::parse`, `budget::load`) is the `yaml` feature,
//! on by default: the installed `gate` has it. A harness builds without it
//! and gets the validated spec as JSON (every type here is serde), its
//! workloads checked with `budget::check_workloads`.
//!
//! Internal to gate: the installed `gate` and the harness use it; its API
//! may change in any release.

pub mod budget;
pub mod config;
pub mod dtype;
pub mod hash;
pub mod hint;
pub mod metric;
pub mod name;
pub mod units;
