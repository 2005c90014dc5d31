//! The runner: profiles components (each in its own child process) and
//! returns their measurements. The protocol, the pool and the measurement
//! types are gate-runner's; the phases, the trainer and the fault
//! injection run here, over candle's tensors.

mod fault;
mod resolve;
mod trainer;

use crate::probe::Recorder;
use crate::sdk::{DynWorkload, RunCtx};

pub use gate_runner::{emit, ChildEvent, DeviceInfo, Measurement, Phase, RatioPlan, PANIC_LINE};
// The parent's side: the installed `gate` (feature `cli`) starts the children.
#[cfg(feature = "cli")]
pub use gate_runner::{
    begin_writing, default_jobs, forward_signals, infrastructure_failure, interrupted, profile_all, run_child,
    ChildArgs, Failure, Profiled, Progress,
};
/// The candle the models run on (the `candle-0-*` feature; the 0.11 figure
/// is checked against Cargo.lock by a test), recorded in each testbed.
#[cfg(feature = "candle-0-11")]
pub const CANDLE_VERSION: &str = "0.11.1";
#[cfg(all(feature = "candle-0-10", not(feature = "candle-0-11")))]
pub const CANDLE_VERSION: &str = "0.10";
#[cfg(all(feature = "candle-0-9", not(any(feature = "candle-0-10", feature = "candle-0-11"))))]
pub const CANDLE_VERSION: &str = "0.9";

pub use gate_runner::phases::Timing;
#[cfg(feature = "cli")]
pub use resolve::parse_bytes;
#[cfg(any(feature = "cli", feature = "test-support"))]
pub use resolve::resolve;
#[cfg(all(feature = "cli", feature = "test-support"))]
pub use resolve::{load, parse};
pub use resolve::{workloads_of, Workloads};

/// Profiles `workload` in `ctx` (gate-runner's phases over candle).
pub fn profile(
    workload: &dyn DynWorkload,
    ctx: &RunCtx,
    timing: Timing,
    recorder: &Recorder,
    on_phase: &mut dyn FnMut(Phase, &Measurement),
) -> Measurement {
    gate_runner::phases::profile(&trainer::CandleSession { workload, ctx }, timing, recorder, on_phase)
}

/// The `ratio` phase: `variant` against `reference` in this process (see
/// gate-runner's `ratio_run`).
pub fn ratio_run(
    variant: (&dyn DynWorkload, &RunCtx),
    reference: (&dyn DynWorkload, &RunCtx),
    plan: gate_runner::RatioPlan,
    sync: &dyn Fn(),
) -> Result<gate_runner::RatioRun, String> {
    let a = trainer::CandleSession {
        workload: variant.0,
        ctx: variant.1,
    };
    let b = trainer::CandleSession {
        workload: reference.0,
        ctx: reference.1,
    };
    gate_runner::phases::ratio_run(&a, &b, plan, sync)
}

#[cfg(test)]
mod tests {
    /// The stock `gate` names the candle-core its built-ins are locked to in
    /// this repository's Cargo.lock (the requirement is `^0.11.0`, so that a
    /// git revision can be patched in; docs/sdk.md). A harness's exact
    /// version comes from its own build's resolve (cli/harness.rs).
    #[cfg(feature = "candle-0-11")]
    #[test]
    fn candle_version_is_the_one_cargo_lock_holds() {
        let lock = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.lock");
        // A crate unpacked from its package has no lockfile to hold it to.
        let Ok(text) = std::fs::read_to_string(&lock) else {
            return;
        };
        let entry = format!("name = \"candle-core\"\nversion = \"{}\"", super::CANDLE_VERSION);
        assert!(text.contains(&entry), "{entry} in {}", lock.display());
    }
}
