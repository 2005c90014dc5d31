//! `gate`: a GPU-memory regression gate for ML models written with candle.
//!
//! This library is what an adopter's crate builds its own `gate` from: a
//! workload ([`Workload`] + [`Model`]) for each model to gate, and one file
//! that registers them:
//!
//! ```ignore
//! // src/bin/gate-harness.rs
//! gate::main!(my_crate::MyForecaster);
//! ```
//!
//! The binary is then a complete `gate` (`check`, `validate`, `fit`,
//! `doctor`, ...) that knows the crate's workloads beside the built-in ones;
//! `budgets.yaml` names it under `harness:` so the installed `gate check`
//! builds and runs it. docs/sdk.md walks through a workload in full.
//!
//! # Stability
//!
//! Everything documented here follows semver from 1.0; before 1.0 a minor
//! release (0.x → 0.x+1) may change it and says how in the changelog. Items
//! hidden from these docs (`__private`) are for gate's own tests and macros
//! and may change in any release. A gate release supports exactly one candle
//! minor version, re-exported as [`candle_core`] and [`candle_nn`]: build
//! against those (this release: candle 0.11).

#![warn(missing_docs)]

pub use candle_core;
pub use candle_nn;

#[doc(hidden)]
pub mod budget;
#[doc(hidden)]
pub mod cli;
#[doc(hidden)]
pub mod exit;
#[doc(hidden)]
pub mod github;
mod harness;
#[doc(hidden)]
pub mod hash;
#[doc(hidden)]
pub mod hint;
#[doc(hidden)]
pub mod metric;
#[doc(hidden)]
pub mod models;
#[doc(hidden)]
pub mod probe;
#[doc(hidden)]
pub mod render;
#[doc(hidden)]
pub mod report;
#[doc(hidden)]
pub mod runner;
mod sdk;
#[doc(hidden)]
pub mod units;

pub use harness::Harness;
pub use probe::CountingAlloc;
pub use sdk::{
    checkpoint, nn, scope, scoped, Batch, ConfigIssue, Model, ParamCount, ParamStore, PlainForward, Pos, Problems, Rng,
    RunCtx, ScopeGuard, Step, TrainingForward, Workload,
};

/// gate's internals (the modules hidden above), for its own tests and
/// benchmarks. Not part of the API: anything here may change in any release.
#[doc(hidden)]
pub mod __private {
    pub use crate::{budget, cli, exit, github, hash, hint, metric, models, probe, render, report, runner, units};
    /// The runner's face of a workload, and the kinds a binary knows.
    pub mod sdk {
        pub use crate::sdk::{DynWorkload, Registry};
    }

    /// A registry of the built-in workloads, as the stock `gate` has.
    pub fn builtins() -> crate::sdk::Registry {
        let mut r = crate::sdk::Registry::default();
        crate::models::register_builtins(&mut r);
        r
    }
}
