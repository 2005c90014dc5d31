//! Memory probes: gate-probe's, the CUDA pool probe (`probe::cuda`) of a
//! `cuda` build included. gate-probe's CUDA probe talks to the driver
//! itself, so it serves whichever candle minor this build is on.

pub use gate_probe::*;
