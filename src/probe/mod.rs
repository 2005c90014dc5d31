//! Memory probes: gate-probe's, and the CUDA pool probe of a `cuda` build.

pub use gate_probe::*;

#[cfg(feature = "cuda")]
pub mod cuda;
