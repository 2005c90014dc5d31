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
//! release (0.x → 0.x+1) may change it and says how in the changelog. That
//! is the whole API: gate's other modules are private, and `test_support`
//! (only with the `test-support` feature, which gate's own tests and
//! benches turn on) is not API and may change in any release.
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

// The core crates under the module names the root's code was written with
// (`crate::budget::...`): the crate's own paths, not API (tests name the
// core crates themselves).
pub(crate) use gate_runner::exit;
pub(crate) use gate_spec::{budget, hash};
#[cfg(feature = "cli")]
pub(crate) use gate_spec::{hint, metric};
#[cfg(feature = "cli")]
pub(crate) use {gate_github as github, gate_render as render, gate_report as report};
// Every module is private: the API is the re-exports below. What gate's own
// tests and benches need besides is `test_support` (feature `test-support`).
mod child;
#[cfg(feature = "cli")]
mod cli;
mod harness;
#[cfg(feature = "builtins")]
// Their items are public to the crate's tests only (`test_support`), as
// they were when hidden: not held to the API's documentation.
#[cfg_attr(feature = "test-support", allow(missing_docs))]
#[cfg_attr(not(feature = "test-support"), allow(unreachable_pub))]
mod models;
mod probe;
mod runner;
mod sdk;

pub use harness::Harness;
pub use probe::CountingAlloc;
pub use sdk::{
    checkpoint, clip_grad_norm, nn, scope, scoped, Batch, ConfigIssue, Generator, LanguageModel, Lm, LmConfig, Model,
    OptimizerStep, ParamCount, ParamStore, PlainForward, Pos, Problems, Rng, RunCtx, ScopeGuard, Step, TrainingForward,
    Workload,
};

/// gate's internals for gate's own tests and benchmarks (feature
/// `test-support`, which the package turns on for them through a
/// dev-dependency on itself). Not API: anything here may change in any
/// release, and an adopter's crate has no use for the feature.
#[cfg(feature = "test-support")]
#[doc(hidden)]
pub mod test_support {
    /// The harness protocol's request (gate-runner's, as src/child.rs serves it).
    pub use gate_runner::harness::{Request, PROTOCOL};
    /// The built-in models (src/models). A module of their own: `models`
    /// is private, and only its public items can be re-exported.
    #[cfg(feature = "builtins")]
    pub mod models {
        pub use crate::models::*;
    }
    /// The spec's workloads resolved by a registry, and the candle profile
    /// of one (src/runner).
    pub mod runner {
        #[cfg(feature = "cli")]
        pub use crate::runner::{load, parse, parse_bytes};
        pub use crate::runner::{profile, profile_generation, resolve, Workloads};
    }
    /// The runner's face of a workload, and the kinds a binary knows.
    pub use crate::sdk::{DynWorkload, Registry};

    /// A registry of the built-in workloads, as the stock `gate` has.
    pub fn builtins() -> Registry {
        #[allow(unused_mut)]
        let mut r = Registry::default();
        #[cfg(feature = "builtins")]
        crate::models::register_builtins(&mut r);
        r
    }
}
