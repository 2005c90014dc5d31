//! The SDK: what a workload is made of. Everything here is below the runner
//! and knows nothing of specs, reports or GitHub; the built-in models
//! (`crate::models`) use exactly this, as an adopter's crate does.

pub mod checkpoint;
mod compat;
#[cfg(feature = "cuda")]
mod cuda_dropout;
mod lm;
pub mod nn;
pub mod optim;
mod params;
// Public to gate's own tests through `test_support`, crate-private otherwise.
#[cfg_attr(not(feature = "test-support"), allow(unreachable_pub))]
mod registry;
mod rng;
mod workload;

pub use gate_spec::config::{ConfigIssue, Pos, Problems};
pub use lm::{LanguageModel, Lm, LmConfig};
pub use nn::Step;
pub use params::ParamStore;
#[cfg_attr(not(feature = "test-support"), allow(unreachable_pub))]
pub use registry::{DynWorkload, Registry};
pub use rng::Rng;
pub(crate) use workload::candle_dtype;
pub use workload::{
    clip_grad_norm, Batch, Generator, Lever, Model, OptimizerStep, ParamCount, PlainForward, RunCtx, TrainingForward,
    Workload,
};

pub(crate) use checkpoint::prune_grads;
pub use gate_probe::{enter as scope, scoped, ScopeGuard};
#[cfg(any(test, feature = "test-support"))]
#[cfg_attr(not(feature = "test-support"), allow(unused_imports, unreachable_pub))]
pub use registry::{read_workload, test_config};
