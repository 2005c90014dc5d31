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
//! `budgets.yaml` names that binary under `harness:`; the installed `gate
//! check` builds it, has it resolve the spec's workloads and profile each
//! component, and does everything after (verdict, outputs, GitHub). With
//! gate's default features the binary is also a complete `gate` with the
//! built-in workloads; with `default-features = false` and a candle feature
//! it is only the harness, and compiles no command line, renderer or HTTP
//! stack. docs/sdk.md walks through a workload in full.
//!
//! # Stability
//!
//! Everything documented here follows semver from 1.0; before 1.0 a minor
//! release (0.x → 0.x+1) may change it and says how in the changelog. Items
//! hidden from these docs (`__private`) are for gate's own tests and macros
//! and may change in any release.
//!
//! # Which candle
//!
//! The SDK is built against one candle minor, chosen by a feature:
//! `candle-0-11` (the default, with the built-in models), `candle-0-10` or
//! `candle-0-9` (0.9.1 and 0.9.2). It is re-exported as [`candle_core`] and
//! [`candle_nn`], and it is the crate's own candle when the minors agree, so
//! a workload's tensors are gate's. A crate on candle 0.9 depends on
//! `gate-sdk = { ..., default-features = false, features = ["candle-0-9"] }`
//! (the package is `gate-sdk`; this library keeps the name `gate`).

#![warn(missing_docs)]

// The chosen minor's crates under the names the SDK is written with: an
// `extern crate` at the root puts `candle_core` and `candle_nn` in every
// module's scope, so one source serves each minor (shims in `sdk::compat`).
#[cfg(all(feature = "candle-0-10", not(feature = "candle-0-11")))]
#[doc(no_inline)]
pub extern crate candle_core_0_10 as candle_core;
#[cfg(feature = "candle-0-11")]
#[doc(no_inline)]
pub extern crate candle_core_0_11 as candle_core;
#[cfg(all(feature = "candle-0-9", not(any(feature = "candle-0-10", feature = "candle-0-11"))))]
#[doc(no_inline)]
pub extern crate candle_core_0_9 as candle_core;
#[cfg(all(feature = "candle-0-10", not(feature = "candle-0-11")))]
#[doc(no_inline)]
pub extern crate candle_nn_0_10 as candle_nn;
#[cfg(feature = "candle-0-11")]
#[doc(no_inline)]
pub extern crate candle_nn_0_11 as candle_nn;
#[cfg(all(feature = "candle-0-9", not(any(feature = "candle-0-10", feature = "candle-0-11"))))]
#[doc(no_inline)]
pub extern crate candle_nn_0_9 as candle_nn;

#[cfg(not(any(feature = "candle-0-9", feature = "candle-0-10", feature = "candle-0-11")))]
compile_error!(
    "gate needs a candle: enable one of its features `candle-0-9`, `candle-0-10`, `candle-0-11` \
     (the one your crate's candle-core is on)"
);
#[cfg(any(
    all(feature = "candle-0-9", feature = "candle-0-10"),
    all(feature = "candle-0-9", feature = "candle-0-11"),
    all(feature = "candle-0-10", feature = "candle-0-11"),
))]
compile_error!(
    "gate is built against two candle minors at once: enable only the `candle-0-*` feature of your crate's \
     candle, with `default-features = false` (the default is `candle-0-11` with the built-in models)"
);

#[doc(hidden)]
pub use gate_runner::exit;
#[doc(hidden)]
pub use gate_spec::{budget, hash, hint, metric, units};
#[cfg(feature = "cli")]
#[doc(hidden)]
pub use {gate_github as github, gate_render as render, gate_report as report};
mod child;
#[cfg(feature = "cli")]
#[doc(hidden)]
pub mod cli;
mod harness;
#[cfg(feature = "builtins")]
#[doc(hidden)]
pub mod models;
#[doc(hidden)]
pub mod probe;
#[doc(hidden)]
pub mod runner;
mod sdk;

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
    #[cfg(feature = "builtins")]
    pub use crate::models;
    pub use crate::{budget, exit, hash, hint, metric, probe, runner, units};
    #[cfg(feature = "cli")]
    pub use crate::{cli, github, render, report};
    /// The harness protocol's request (src/child.rs).
    pub mod child {
        pub use crate::child::{Request, PROTOCOL};
    }
    /// The runner's face of a workload, and the kinds a binary knows.
    pub mod sdk {
        pub use crate::sdk::{DynWorkload, Registry};
    }

    /// A registry of the built-in workloads, as the stock `gate` has.
    pub fn builtins() -> crate::sdk::Registry {
        #[allow(unused_mut)]
        let mut r = crate::sdk::Registry::default();
        #[cfg(feature = "builtins")]
        crate::models::register_builtins(&mut r);
        r
    }
}
