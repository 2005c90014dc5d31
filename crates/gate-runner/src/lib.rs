//! The framework-free side of gate's runner: the child processes that
//! measure a profile (what they send is gate-contract's `measurement` and
//! `protocol`), the pool that runs profiles, the exit
//! codes, the phases of a profile over the [`adapter`] traits that an
//! ML framework's adapter implements, and the harness side of the protocol
//! ([`harness`]) every adapter serves through. No ML framework is in this crate's
//! dependency tree.
//!
//! Internal to gate: its API may change in any release.

pub mod adapter;
pub mod child;
pub mod exit;
pub mod fault;
pub mod harness;
pub mod phases;
pub mod pool;
pub mod timing_lock;

pub use child::{
    begin_writing, emit, forward_signals, infrastructure_failure, interrupted, run_child, ChildArgs, PANIC_LINE,
};
pub use phases::{profile, profile_generation, profile_steps, ratio_run, RatioPlan, RatioRun, Timing};
pub use pool::{default_jobs, profile_all, Profiled, Progress};
