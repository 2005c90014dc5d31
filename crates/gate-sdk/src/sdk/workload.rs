//! The traits a workload implements: [`Workload`] (a validated config that
//! builds a model and makes batches) and [`Model`] (forward, loss, predict).
//! The runner does everything else: phases, optimizer, measurement.

use std::fmt;

use candle_core::backprop::GradStore;
use candle_core::{DType, Device, Result, Tensor, Var};
use candle_nn::VarBuilder;
use serde::de::DeserializeOwned;
use serde::Serialize;

use super::nn::Step;
pub use gate_contract::plan::Lever;
use gate_spec::config::Problems;

/// Where and how a workload runs: the device, the compute dtype, the batch
/// size and seed of the component being measured.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct RunCtx {
    /// The device tensors live on (the CPU, or the CUDA device under `--backend cuda`).
    pub device: Device,
    /// The dtype the model computes in (the spec's `dtype:`).
    pub dtype: DType,
    /// Rows per batch (the spec's `batch_size:`).
    pub batch_size: usize,
    /// The component's seed: the same seed gives the same weights and batches.
    pub seed: u64,
    /// Mixed precision: parameters (and so gradients and optimizer state)
    /// kept in this dtype, cast to `dtype` for compute. `None`: all `dtype`.
    pub master_dtype: Option<DType>,
}

impl RunCtx {
    /// A context on `device` computing in `dtype` with `batch_size` rows,
    /// seed 0 and no master weights (see [`RunCtx::with_seed`],
    /// [`RunCtx::with_master_dtype`]). New fields come with defaults, so
    /// code that builds a context this way keeps compiling.
    pub fn new(device: Device, dtype: DType, batch_size: usize) -> Self {
        RunCtx {
            device,
            dtype,
            batch_size,
            seed: 0,
            master_dtype: None,
        }
    }

    /// This context with `seed`.
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// This context with parameters kept in `master` (mixed precision), or all in `dtype`.
    pub fn with_master_dtype(mut self, master: Option<DType>) -> Self {
        self.master_dtype = master;
        self
    }

    /// A context on the CPU in f32 with `batch_size` rows and seed 0 (tests, examples).
    pub fn cpu(batch_size: usize) -> Self {
        RunCtx {
            device: Device::Cpu,
            dtype: DType::F32,
            batch_size,
            seed: 0,
            master_dtype: None,
        }
    }
}

/// The closed-form count of elements a built model keeps, from its config
/// alone, or [`ParamCount::from_build`] when the workload gives none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct ParamCount {
    /// Parameters the optimizer trains.
    pub trainable: u64,
    /// Frozen state the model also holds (a DQN's target network).
    pub frozen: u64,
    /// Whether the counts are a closed form (`params` is then checked
    /// against them) or absent (`params` is the bytes of what was built).
    pub closed_form: bool,
}

impl ParamCount {
    /// A closed form: `trainable` parameters and `frozen` elements of other state.
    pub fn new(trainable: u64, frozen: u64) -> Self {
        ParamCount {
            trainable,
            frozen,
            closed_form: true,
        }
    }

    /// No closed form: `params` is the bytes of what the build made, and
    /// the report says so. The default of [`Workload::param_count`].
    pub fn from_build() -> Self {
        ParamCount::default()
    }
}

/// A batch of input tensors; each workload defines what its positions mean.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Batch {
    /// The tensors, in the workload's own order (inputs, targets, masks...).
    pub tensors: Vec<Tensor>,
}

impl Batch {
    /// A batch of these tensors.
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

/// A model kind `gate` can measure: the spec's `workload: KIND` with its
/// `config:` read into [`Workload::Config`].
///
/// Implement it for a small struct that holds the validated config, register
/// the type with [`main!`](crate::main) (or [`Harness::register`](crate::Harness::register)),
/// and name [`Workload::KIND`] in `budgets.yaml`. See docs/sdk.md.
pub trait Workload: fmt::Debug + Send + Sync + Sized + 'static {
    /// The `workload:` name in the spec (letters, digits, `_`).
    const KIND: &'static str;

    /// The config as the spec writes it under `config:`. Derive
    /// `Deserialize` (with `#[serde(default)]` so every key may be left out)
    /// and `Serialize` (the resolved config is recorded in the report).
    /// Unknown keys and wrong types are spec errors with their line.
    type Config: DeserializeOwned + Serialize + Default;

    /// Checks the config (ranges, keys that must agree) and builds the
    /// workload. Record each problem on a [`Problems`] with its key and
    /// return them all: they are reported at the keys' lines.
    fn from_config(config: Self::Config) -> std::result::Result<Self, Problems>;

    /// The resolved config (defaults filled in), recorded in the report and
    /// compared with the baseline's.
    fn config(&self) -> &Self::Config;

    /// What the report records as this component's config (and compares
    /// with the baseline's). The default is [`Workload::config`] as JSON; a
    /// workload may add derived figures. A workload returned by
    /// [`Workload::checkpointed`] needs no override: gate adds
    /// `checkpoint: { chunk: N }` to it (unless it has a `checkpoint` key).
    fn describe(&self) -> serde_json::Value {
        serde_json::to_value(self.config()).unwrap_or(serde_json::Value::Null)
    }

    /// Closed-form element counts, computed from the config, not from a
    /// built model: `params` is checked against it. The default,
    /// [`ParamCount::from_build`], gives none: `params` is then the bytes of
    /// what was built, and the report says that it was not checked.
    fn param_count(&self) -> ParamCount {
        ParamCount::from_build()
    }

    /// Builds the model. Take every weight from `vb` (candle-nn's layers do):
    /// with the trainable store they are `Var`s the optimizer updates; with
    /// the detached one, plain tensors for inference.
    fn build(&self, vb: VarBuilder, ctx: &RunCtx) -> Result<Box<dyn Model>>;

    /// A seeded synthetic batch of `ctx.batch_size` rows on `ctx.device`;
    /// the same seed must give the same bytes.
    fn batch(&self, ctx: &RunCtx, seed: u64) -> Result<Batch>;

    /// AdamW learning rate.
    fn learning_rate(&self) -> f64 {
        1e-3
    }

    /// The team's own optimizer over the trainable variables: candle-nn's
    /// `SGD` or `AdamW` with its own settings, or any type implementing
    /// `candle_nn::Optimizer` (or [`OptimizerStep`]). It is made inside the
    /// `optimizer` phase, so what it allocates (its state) is `optimizer`.
    /// The default, `None`: gate's AdamW at [`Workload::learning_rate`].
    fn optimizer(&self, _vars: Vec<Var>) -> Result<Option<Box<dyn OptimizerStep>>> {
        Ok(None)
    }

    /// What the team's step does to the gradients between backward and the
    /// optimizer: clipping (see [`clip_grad_norm`](crate::clip_grad_norm)),
    /// scaling. Runs in the `backward` phase. The default: nothing.
    fn before_update(&self, _grads: &mut GradStore, _vars: &[Var]) -> Result<()> {
        Ok(())
    }

    /// Gradient accumulation: a training step runs this many forwards and
    /// backwards on the batch (micro-batches), summing their gradients,
    /// before one optimizer step. `activations` is one micro-batch's; the
    /// others run in the `backward` phase and count in its peak. Default 1.
    fn accumulation_steps(&self) -> usize {
        1
    }

    /// Parameters the team keeps frozen on purpose (a frozen embedding, a
    /// fine-tuned head over a fixed body): each entry a parameter's name as
    /// the `VarBuilder` names it (`model.embed_tokens.weight`) or a prefix
    /// ending in `.` (`model.embed_tokens.`). They are not trained (no
    /// gradient is kept, no optimizer state made) and a step that leaves
    /// them without a gradient is not flagged. An entry that names no
    /// parameter of the built model fails the build, with the names there
    /// are. The default: none, every parameter is trained.
    fn frozen_parameters(&self) -> Vec<String> {
        Vec::new()
    }

    /// This workload with its position-wise blocks checkpointed in chunks of
    /// `chunk` positions (the spec's `checkpoint: { chunk: N }`); `None` (the
    /// default) when it has no block that can opt in. See [`checkpoint`](crate::checkpoint).
    fn checkpointed(&self, _chunk: usize) -> Option<Self> {
        None
    }

    /// The levers `gate plan` may turn to fit this workload in its budgets
    /// (docs/plan.md), beyond the batch size, which gate offers for every
    /// workload. The default: `checkpoint:` in chunks of 16 to 256 positions
    /// when [`Workload::checkpointed`] gives a model, and bf16 compute with
    /// f32 master weights. Override it to offer your own settings
    /// ([`Lever::Config`]: a key of your config and the values worth
    /// trying), other chunks, or to take a lever away (a model that must
    /// stay f32). Levers that change the loss (batch, dtype, a config key
    /// marked so) are tried last, and shown with their loss ratio.
    fn levers(&self) -> Vec<Lever> {
        let mut levers = Vec::new();
        if self.checkpointed(64).is_some() {
            levers.push(Lever::Checkpoint {
                blocks: Vec::new(),
                chunks: vec![16, 32, 64, 128, 256],
            });
        }
        levers.push(Lever::bf16());
        levers
    }

    /// The most rows [`Model::generator`]'s loop decodes at once. A
    /// component with `generate:` runs `batch_size` rows (`ctx.batch_size`
    /// at build), so a loop that makes one row whatever the batch says
    /// `Some(1)`, and a spec asking it for more is refused by `gate
    /// validate` instead of reporting one row's cache as the batch's. The
    /// default, `None`: the loop decodes the whole batch.
    fn generation_rows(&self) -> Option<usize> {
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
// Deliberately a plain newtype (not `#[non_exhaustive]`): a workload builds
// it as `PlainForward(loss)`, and the loss is all it is.
pub struct PlainForward(pub Tensor);

impl TrainingForward for PlainForward {
    fn loss(&self) -> &Tensor {
        &self.0
    }

    fn backward(self: Box<Self>, _vars: &[Var]) -> Result<GradStore> {
        self.0.backward()
    }
}

/// A built model. Wrap each block's forward in [`scoped`](crate::scoped) to
/// have its memory attributed to it.
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
    /// The loss without dropout that the report records after training;
    /// never backpropagated. The default is [`Model::loss`] with an
    /// evaluation step; a model whose `loss` would keep a large graph for
    /// nothing (a checkpointed block keeps every chunk's) may skip it.
    fn eval_loss(&self, batch: &Batch) -> Result<Tensor> {
        self.loss(batch, &Step::eval())
    }
    /// Called after each optimizer step (e.g. to sync a target network).
    fn after_step(&mut self, _step: usize) -> Result<()> {
        Ok(())
    }
    /// Empties what the model keeps from one forward to the next beside its
    /// weights (a KV cache its forward leaves full). gate calls it once,
    /// after the first optimizer step, and reports what it frees as
    /// `model_state` (never as `optimizer`); the next forward fills it again.
    /// Return `true` where the model keeps such state; the default, `false`:
    /// nothing to empty, and no `model_state` figure. [`crate::Lm`] calls
    /// the model's `clear_cache`.
    fn clear_state(&mut self) -> Result<bool> {
        Ok(false)
    }
    /// The model's own generation loop over these (inference) weights, its
    /// cache empty: what a component with `generate:` runs. The default:
    /// none (such a component fails, saying so).
    fn generator(&self) -> Result<Box<dyn Generator + '_>> {
        candle_core::bail!(
            "this model has no generation loop: implement `Model::generator` (docs/sdk.md, \"Generation\")"
        )
    }
}

/// One optimizer step over a gradient store: what gate asks of a team's
/// optimizer. Every `candle_nn::Optimizer` is one.
pub trait OptimizerStep {
    /// Updates the variables from `grads`.
    fn step(&mut self, grads: &GradStore) -> Result<()>;
}

impl<O: candle_nn::Optimizer> OptimizerStep for O {
    fn step(&mut self, grads: &GradStore) -> Result<()> {
        candle_nn::Optimizer::step(self, grads)
    }
}

/// Scales `grads` of `vars` so that their global L2 norm is at most
/// `max_norm` (PyTorch's `clip_grad_norm_`); returns the norm before.
pub fn clip_grad_norm(grads: &mut GradStore, vars: &[Var], max_norm: f64) -> Result<f64> {
    let mut sq = 0f64;
    for v in vars {
        if let Some(g) = grads.get(v.as_tensor()) {
            sq += g.to_dtype(DType::F64)?.sqr()?.sum_all()?.to_scalar::<f64>()?;
        }
    }
    let norm = sq.sqrt();
    if norm > max_norm && norm > 0.0 {
        let scale = max_norm / norm;
        for v in vars {
            if let Some(g) = grads.remove(v.as_tensor()) {
                grads.insert(v.as_tensor(), g.affine(scale, 0.0)?);
            }
        }
    }
    Ok(norm)
}

/// A model's own generation loop, as the team runs it in production: it
/// picks its tokens (greedy, sampled, fixed) and keeps its KV cache its own
/// way. gate measures the prefill and each decode step; the cache's growth
/// per token and across the steps are budgets (`kv_cache_per_token`,
/// `decode_growth`).
pub trait Generator {
    /// Runs a prompt of `tokens` tokens (the loop makes them, seeded)
    /// through the model into its empty cache.
    fn prefill(&mut self, tokens: usize) -> Result<()>;
    /// One decode step: the next token through the model, the cache one longer.
    fn decode(&mut self) -> Result<()>;
}

/// candle's dtype for the spec's.
pub(crate) fn candle_dtype(dtype: gate_spec::dtype::DType) -> DType {
    match dtype {
        gate_spec::dtype::DType::F32 => DType::F32,
        gate_spec::dtype::DType::F16 => DType::F16,
        gate_spec::dtype::DType::BF16 => DType::BF16,
    }
}
