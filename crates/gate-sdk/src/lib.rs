//! `gate`: a GPU-memory regression gate for ML models written with candle.
//!
//! This library is what an adopter's crate builds its harness from: a
//! workload ([`Workload`] + [`Model`]) for each model to gate, and one file
//! that registers them:
//!
//! ```ignore
//! // src/bin/gate-harness.rs
//! gate::main!(my_crate::MyForecaster);
//! ```
//!
//! `budgets.yaml` names that binary under `harness:`; the installed `gate
//! check` (crate `gate-cli`) builds it, has it resolve the spec's workloads
//! and profile each component, and does everything after (verdict,
//! outputs, GitHub). The harness answers only those requests: it compiles
//! no command line, renderer or HTTP stack. docs/sdk.md walks through a
//! workload in full.
//!
//! # Stability
//!
//! Everything documented here follows semver from 1.0; before 1.0 a minor
//! release (0.x → 0.x+1) may change it and says how in CHANGELOG.md. That
//! is the whole API: gate's other modules are private, and `test_support`
//! (only with the `test-support` feature, which gate's own tests and
//! benches turn on) is not API and may change in any release.
//!
//! # Which candle
//!
//! The SDK is built against one candle minor, chosen by a feature:
//! `candle-0-11` (the default), `candle-0-10` or
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
#[cfg(feature = "builtins")]
compile_error!(
    "gate-sdk has no built-in models any more: drop its `builtins` feature, add \
     `gate-builtins` (the same source as gate-sdk) and register the ones you use in your harness, \
     e.g. `gate::main!(gate_builtins::Mlp, my_crate::MyModel)` (CHANGELOG.md)"
);
#[cfg(feature = "cli")]
compile_error!(
    "gate-sdk has no command line any more: drop its `cli` feature; the command line is the installed \
     `gate` (package gate-cli), which builds and starts your harness (CHANGELOG.md)"
);
#[cfg(any(
    all(feature = "candle-0-9", feature = "candle-0-10"),
    all(feature = "candle-0-9", feature = "candle-0-11"),
    all(feature = "candle-0-10", feature = "candle-0-11"),
))]
compile_error!(
    "gate is built against two candle minors at once: enable only the `candle-0-*` feature of your crate's \
     candle, with `default-features = false` (the default is `candle-0-11`)"
);

// Every module is private: the API is the re-exports below. What gate's own
// tests and benches need besides is `test_support` (feature `test-support`).
mod child;
mod harness;
mod runner;
mod sdk;

pub use gate_probe::CountingAlloc;
pub use harness::Harness;

/// This adapter's Cargo.toml as it was built. Its `[package.metadata.gate]`
/// declares the framework it serves, the crate that carries the framework's
/// version, and which feature serves which versions; its `[features]` the
/// default. The installed `gate` reads a team's harness's adapter from
/// `cargo metadata` before it builds it; the stock `gate` reads this one,
/// through its built-in models, to set a crate up on the feature for its
/// framework version (`gate init --harness`).
pub const ADAPTER_MANIFEST: &str = include_str!("../Cargo.toml");

/// gate-runner, for [`main!`]'s expansion in a team's crate (which depends
/// on gate-sdk only). Not API.
#[doc(hidden)]
pub use gate_runner as __runner;
pub use sdk::{
    checkpoint, clip_grad_norm, nn, optim, scope, scoped, Batch, ConfigIssue, Generator, LanguageModel, Lever, Lm,
    LmConfig, Model, OptimizerStep, ParamCount, ParamStore, PlainForward, Pos, Problems, Rng, RunCtx, ScopeGuard, Step,
    TrainingForward, Workload,
};

/// gate's internals for gate's own tests and benchmarks (feature
/// `test-support`, which the package turns on for them through a
/// dev-dependency on itself). Not API: anything here may change in any
/// release, and an adopter's crate has no use for the feature.
#[cfg(feature = "test-support")]
#[doc(hidden)]
pub mod test_support {
    /// The harness protocol's request (gate-contract's), and how a harness
    /// reads it (gate-runner's, as src/child.rs serves it).
    pub use gate_contract::protocol::{Request, PROTOCOL};
    pub use gate_runner::harness::read_request;
    /// The spec's workloads resolved by a registry, and the candle profile
    /// of one (src/runner).
    pub mod runner {
        pub use crate::runner::{load, parse, parse_bytes, profile, profile_generation, resolve, Workloads};
    }
    /// A workload's config read from `key: value` pairs, and a kind read from one.
    pub use crate::sdk::{read_workload, test_config};
    /// The runner's face of a workload, and the kinds a binary knows.
    pub use crate::sdk::{DynWorkload, Registry};
    /// The helpers a model's own tests use: a context, a few steps, gradient coverage.
    pub mod nn {
        pub use crate::sdk::nn::test_support::*;
    }

    /// The kinds `h` knows, as the registry its harness resolves with.
    pub fn registry_of(h: &crate::Harness) -> Registry {
        h.registry().clone()
    }
}
