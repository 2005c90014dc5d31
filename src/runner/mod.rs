//! The runner: profiles components (each in its own child process) and
//! returns their measurements.

mod child;
pub mod fault;
mod measurement;
mod phases;
mod pool;
mod resolve;
mod timing_lock;
mod trainer;

pub use child::{
    begin_writing, emit, forward_signals, infrastructure_failure, interrupted, run_child, ChildArgs, ChildEvent,
};
pub use measurement::{DeviceInfo, Failure, Measurement, Phase};
pub use phases::{measured_in, median, profile, time_pairs, Timing, MIN_PAIRS, PAIR_SECONDS};
pub use pool::{default_jobs, profile_all, Profiled, Progress};
pub use resolve::{load, parse, parse_bytes, resolve, Workloads};
