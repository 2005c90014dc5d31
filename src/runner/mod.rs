//! The runner: profiles components (each in its own child process) and
//! returns their measurements.

pub mod checkpoint;
mod child;
pub mod fault;
mod measurement;
mod phases;

pub use child::{
    begin_writing, emit, forward_signals, infrastructure_failure, interrupted, run_child, ChildArgs, ChildEvent,
};
pub use measurement::{DeviceInfo, Failure, Measurement, Phase};
pub use phases::{median, profile, Timing};
