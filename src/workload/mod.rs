//! Workloads: the models `gate` builds and runs. A workload is a validated
//! config that can build a candle model on a device, make seeded synthetic
//! batches, and compute a loss; the runner does everything else (phases,
//! optimizer, measurement). New models implement [`Workload`] and [`Model`]
//! and are added to [`resolve`].

pub mod config;
pub mod dqn;
pub mod mamba2;
pub mod mlp;
pub mod nn;
pub mod params;
pub mod ppo;
pub mod rng;
pub mod tft;

use std::fmt;
use std::sync::Arc;

use candle_core::backprop::GradStore;
use candle_core::{DType, Device, Result, Tensor, Var};
use candle_nn::VarBuilder;

pub use config::{ConfigError, ConfigMap, ConfigReader, ConfigValue};
pub use nn::Step;
pub use params::ParamStore;
pub use rng::Rng;

/// Where and how a workload runs.
#[derive(Debug, Clone)]
pub struct RunCtx {
    pub device: Device,
    pub dtype: DType,
    pub batch_size: usize,
    pub seed: u64,
    /// Mixed precision: parameters (and so gradients and optimizer state)
    /// kept in this dtype, cast to `dtype` for compute. `None`: all `dtype`.
    pub master_dtype: Option<DType>,
}

/// The closed-form count of elements a built model keeps, from its config alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ParamCount {
    /// Parameters the optimizer trains.
    pub trainable: u64,
    /// Frozen state the model also holds (a DQN's target network).
    pub frozen: u64,
}

/// A batch of input tensors; each workload defines what its positions mean.
#[derive(Debug, Clone)]
pub struct Batch {
    pub tensors: Vec<Tensor>,
}

impl Batch {
    pub fn new(tensors: Vec<Tensor>) -> Self {
        Batch { tensors }
    }

    /// Bytes the batch's tensors occupy (storage shared between them counted once per tensor).
    pub fn bytes(&self) -> u64 {
        self.tensors
            .iter()
            .map(|t| (t.elem_count() * t.dtype().size_in_bytes()) as u64)
            .sum()
    }
}

pub trait Workload: Send + Sync + fmt::Debug {
    /// The `workload:` kind in the spec.
    fn kind(&self) -> &'static str;
    /// The resolved config (defaults filled in), recorded in the report.
    fn config(&self) -> serde_json::Value;
    /// Closed-form element counts, computed from the config, not from a built model.
    fn param_count(&self) -> ParamCount;
    /// Builds the model. With [`ParamStore::builder`] the weights are trainable
    /// `Var`s; with [`ParamStore::detached`] they are plain tensors (inference).
    fn build(&self, vb: VarBuilder, ctx: &RunCtx) -> Result<Box<dyn Model>>;
    /// A seeded synthetic batch; the same seed gives the same bytes.
    fn batch(&self, ctx: &RunCtx, seed: u64) -> Result<Batch>;
    /// AdamW learning rate.
    fn learning_rate(&self) -> f64 {
        1e-3
    }
    /// This workload with its position-wise blocks checkpointed in chunks of
    /// `chunk` positions (the spec's `checkpoint: { chunk: N }`); `None` when
    /// it has no block that can opt in.
    fn checkpointed(&self, _chunk: usize) -> Option<Arc<dyn Workload>> {
        None
    }
}

/// A training forward pass whose graph is held until [`TrainingForward::backward`]:
/// what it keeps alive is what the runner reports as `activations`.
pub trait TrainingForward {
    /// The scalar loss.
    fn loss(&self) -> &Tensor;
    /// Gradients of the loss (the trainable variables' at least). A
    /// checkpointed model recomputes its dropped blocks here.
    fn backward(self: Box<Self>, vars: &[Var]) -> Result<GradStore>;
}

/// The plain forward: candle's graph, candle's backward.
pub struct PlainForward(pub Tensor);

impl TrainingForward for PlainForward {
    fn loss(&self) -> &Tensor {
        &self.0
    }

    fn backward(self: Box<Self>, _vars: &[Var]) -> Result<GradStore> {
        self.0.backward()
    }
}

pub trait Model {
    /// Forward pass and scalar loss. Gradients are tracked when the model
    /// was built from trainable weights; `step` drives dropout.
    fn loss(&self, batch: &Batch, step: &Step) -> Result<Tensor>;
    /// Forward pass for inference (no dropout), returning the prediction.
    fn predict(&self, batch: &Batch) -> Result<Tensor>;
    /// The forward of a training step, kept for its backward. The default is
    /// [`Model::loss`] with candle's own backward; a model that checkpoints
    /// blocks overrides it.
    fn forward_train<'a>(&'a self, batch: &Batch, step: &Step) -> Result<Box<dyn TrainingForward + 'a>> {
        Ok(Box::new(PlainForward(self.loss(batch, step)?)))
    }
    /// Called after each optimizer step (e.g. to sync a target network).
    fn after_step(&mut self, _step: usize) -> Result<()> {
        Ok(())
    }
}

/// Every workload kind a spec may name.
pub const KINDS: &[&str] = &["mlp", "tft", "dqn", "ppo", "mamba2"];

/// The outcome of resolving a kind and its config.
#[derive(Debug, Clone)]
pub enum Resolved {
    Ready(Arc<dyn Workload>),
    /// A known kind this build cannot run yet; the component is reported `not_measured`.
    Unavailable(String),
}

/// Validates `config` for `kind`. `kind` must be one of [`KINDS`].
pub fn resolve(kind: &str, config: &ConfigMap) -> std::result::Result<Resolved, Vec<ConfigError>> {
    match kind {
        "mlp" => Ok(Resolved::Ready(Arc::new(mlp::Mlp::from_config(config)?))),
        "tft" => tft::resolve(config),
        "dqn" => dqn::resolve(config),
        "ppo" => ppo::resolve(config),
        "mamba2" => mamba2::resolve(config),
        other => Ok(Resolved::Unavailable(format!(
            "`{other}` has no implementation in this build of gate"
        ))),
    }
}
