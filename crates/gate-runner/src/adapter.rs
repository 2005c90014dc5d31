//! What the runner's phases ask of an ML framework: the traits an adapter
//! implements for one component (a workload on a device), and the error
//! type they return. The phases (`phases.rs`) measure; the adapter only
//! builds, trains and predicts, each step when it is asked, so every byte
//! it allocates lands in the phase that counts it.

use std::fmt;

// The kind an adapter gives its errors, in the adapter's own API: an
// adapter crate implements these traits without naming the contract crate.
pub use gate_contract::measurement::FailureKind;

/// A failure inside the framework: its message (reports show the first
/// line) and what kind of failure it is, decided by the adapter that saw it
/// (it alone knows its framework's errors); nothing below reads the kind
/// back out of the words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    message: String,
    kind: FailureKind,
}

impl Error {
    /// An error of the model's own (a shape, a NaN, a bug): the default.
    pub fn msg(message: impl Into<String>) -> Self {
        Error::of_kind(FailureKind::Model, message)
    }

    /// The device (or the host) could not give an allocation: the model's
    /// figure, judged against its budget.
    pub fn out_of_memory(message: impl Into<String>) -> Self {
        Error::of_kind(FailureKind::OutOfMemory, message)
    }

    /// A device or driver error other than out of memory: infrastructure.
    pub fn device(message: impl Into<String>) -> Self {
        Error::of_kind(FailureKind::Device, message)
    }

    /// An error of `kind`.
    pub fn of_kind(kind: FailureKind, message: impl Into<String>) -> Self {
        Error {
            message: message.into(),
            kind,
        }
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// What kind of failure the adapter said it is.
    pub fn kind(&self) -> FailureKind {
        self.kind
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

/// A model's own generation loop: it chooses its tokens (greedy, sampled,
/// fixed) and keeps its cache as it does in production.
pub trait Generation {
    /// Runs a prompt of `tokens` tokens through the model into its empty cache.
    fn prefill(&mut self, tokens: usize) -> Result<()>;
    /// One decode step: the next token through the model, the cache one longer.
    fn decode(&mut self) -> Result<()>;
}

/// An optimizer over stand-ins of the trained variables (see
/// [`Train::stand_in_optimizer`]): the stand-ins and their gradients are
/// made beforehand, outside the runner's span; `make` builds the optimizer
/// over them and steps it once, keeping it.
pub trait StandInOptimizer {
    /// Builds the optimizer over the stand-ins and steps it once.
    fn make(&mut self) -> Result<()>;
}

/// What an adapter's steps return.
pub type Result<T> = std::result::Result<T, Error>;

/// The bytes the spec's closed form says a built model keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Analytic {
    /// Elements (trainable and frozen) times the bytes each is kept in.
    pub param_bytes: u64,
    /// Frozen elements (a DQN's target network), reported beside `params`.
    pub frozen_elems: u64,
}

/// One component ready to profile in this process: its workload, resolved
/// config, dtype, batch size and seed, on a device.
pub trait Session {
    /// A model's parameter store before the model is built.
    type Params<'s>: Unbuilt<Trainer = Self::Trainer<'s>>
    where
        Self: 's;
    /// A built model being trained.
    type Trainer<'s>: Train
    where
        Self: 's;

    /// The closed-form parameter bytes (from the config alone).
    fn analytic(&self) -> Analytic;

    /// An empty parameter store (made outside the build's span, so its own
    /// bookkeeping is never counted as parameters).
    fn params(&self) -> Self::Params<'_>;

    /// A trainer in one go, for runs that measure neither part.
    fn trainer(&self) -> Result<Self::Trainer<'_>> {
        self.params().build()
    }
}

/// A parameter store that builds its model.
pub trait Unbuilt {
    /// The trainer it becomes.
    type Trainer;
    /// Builds the model; its weights are created in the store.
    fn build(self) -> Result<Self::Trainer>;
}

/// A built model, its optimizer and what a training step does with them.
/// Step `n` (from 0) draws its dropout from `seed ^ n`.
pub trait Train {
    /// The seeded synthetic batch.
    type Batch;
    /// A training forward, kept (with its graph) for its backward.
    type Forward<'t>
    where
        Self: 't;
    /// The gradients of a backward.
    type Grads;
    /// The model over the same weights as plain tensors, for inference.
    type Inference;
    /// What inference returns (dropped by the runner after its span).
    type Prediction;

    /// Parameter elements in the store (master weights counted once).
    fn param_elems(&self) -> u64;
    /// Parameter tensors the built model holds: each carries the
    /// framework's own bookkeeping beside its data (0: unknown).
    fn param_tensors(&self) -> u64 {
        0
    }
    /// The training batch; every user of a workload draws the same one.
    fn batch(&self) -> Result<Self::Batch>;
    /// The forward of the next step.
    fn forward<'t>(&'t self, batch: &Self::Batch) -> Result<Self::Forward<'t>>;
    /// The forward's scalar loss as a number.
    fn loss_value<'t>(&'t self, forward: &Self::Forward<'t>) -> Result<f64>;
    /// Lists the trainable variables (once); the profile calls it where its
    /// `backward` phase starts, so the list counts with the gradients.
    fn list_vars(&self);
    /// Every gradient the backward of `forward` produces.
    /// `batch` is the forward's: a step that accumulates gradients runs
    /// its further micro-batches on it here.
    fn backward<'t>(&'t self, forward: Self::Forward<'t>, batch: &Self::Batch) -> Result<Self::Grads>;
    /// Keeps only the trainable variables' gradients.
    fn prune(&self, grads: &mut Self::Grads) -> Result<()>;
    /// One optimizer (AdamW) step; the first makes the optimizer's state.
    fn update(&mut self, grads: &Self::Grads) -> Result<()>;
    /// Ends a step: the model's hook, the recast under mixed precision.
    fn after_step(&mut self) -> Result<()>;
    /// The loss on `batch` without dropout, never backpropagated.
    fn eval_loss(&self, batch: &Self::Batch) -> Result<f64>;
    /// Frees the optimizer state.
    fn drop_optimizer(&mut self);
    /// Empties what the model keeps from one forward to the next that is
    /// neither a parameter nor a gradient (a KV cache its forward leaves
    /// full). The runner calls it once, after the first optimizer step:
    /// what it frees is `model_state`, never `optimizer`. The next forward
    /// fills it again as it always does. `false`: the model keeps nothing
    /// it can empty, and no `model_state` is reported (the default).
    fn clear_state(&mut self) -> Result<bool> {
        Ok(false)
    }
    /// Drops the training model (its parameters stay in the store), before
    /// the inference or generation model is built over the same weights:
    /// what the training model holds beside its weights (rope tables,
    /// masks, a cache) is then not counted again in the inference,
    /// prefill and decode peaks. No training step runs after it. The
    /// default: the adapter's inference model is the training model.
    fn drop_training_model(&mut self) {}
    /// The inference model over the trained weights.
    fn inference_model(&self) -> Result<Self::Inference>;
    /// One inference call.
    fn predict(&self, model: &Self::Inference, batch: &Self::Batch) -> Result<Self::Prediction>;
    /// The parameters' own bytes: the bytes of the tensors the built
    /// model's record holds (`None`: the adapter does not count them, and
    /// the runner reports the live bytes the build left, bookkeeping
    /// included). Where it is `Some`, those live bytes are kept beside it
    /// (`param_live_bytes`).
    fn param_bytes(&self) -> Option<u64> {
        None
    }
    /// The bytes of what the built model holds beside its parameters that
    /// no optimizer trains and no step frees (buffers, such as BatchNorm's
    /// running statistics), where the adapter tells them apart: reported
    /// as `model_state` and left out of `param_bytes`. The team's closed
    /// form is taken to count them, as a framework's own parameter count
    /// does (every tensor of its record), so they are taken from it too.
    /// `None`: the adapter does not tell them apart (the default).
    fn buffer_bytes(&self) -> Option<u64> {
        None
    }
    /// The gradient store's own bytes: the bytes of the gradient tensors
    /// `grads` holds (`None`: the adapter cannot count them, and the runner
    /// reports the live bytes the backward left instead).
    fn gradient_bytes(&self, _grads: &Self::Grads) -> Option<u64> {
        None
    }
    /// The optimizer state's own bytes: the bytes of every state tensor the
    /// optimizer holds, as a complete state holds them (`None`: the adapter
    /// cannot count them, and the runner reports the live bytes the first
    /// step left above the pre-forward level). It is asked once, after the
    /// first step's figures are read. A state whose tensors share a buffer
    /// at the first step and part at a later one (AMSGrad's running
    /// maximum starts as the second moment itself) is counted whole here,
    /// where the live bytes would miss it.
    fn optimizer_bytes(&self) -> Option<u64> {
        None
    }
    /// The same optimizer over stand-ins of the trained variables, each of
    /// its dtype and rank with `elements` elements, with a gradient for
    /// each variable `grads` has one for; made and stepped once by
    /// [`StandInOptimizer::make`] inside a span of the runner's. Made with
    /// 1 and with 2 elements, what it keeps tells the optimizer's own
    /// bookkeeping (its list of the variables, each state tensor's header:
    /// `2 × kept(1) − kept(2)`) from its state's data; the runner
    /// subtracts that bookkeeping from what the first step left, so
    /// `optimizer` is the state's data alone, to the byte, where the probe
    /// counts every heap byte (the CPU). `None` (the default): the probe
    /// counts the data alone already, or the adapter cannot make one.
    fn stand_in_optimizer<'t>(
        &'t self,
        _grads: &'t Self::Grads,
        _elements: usize,
    ) -> Result<Option<Box<dyn StandInOptimizer + 't>>> {
        Ok(None)
    }
    /// Which trainable parameters `grads` (pruned) has a gradient for
    /// (`None`: the adapter cannot tell).
    fn gradient_coverage(&self, _grads: &Self::Grads) -> Option<gate_contract::measurement::GradientCoverage> {
        None
    }
    /// The workload's own generation loop over `model` (the inference
    /// model), its cache empty. The default: the workload has none.
    fn generation<'g>(&'g self, _model: &'g Self::Inference) -> Result<Box<dyn Generation + 'g>> {
        Err(Error::msg(
            "this workload has no generation loop: its model does not implement one (docs/sdk.md, \"Generation\")",
        ))
    }
    /// Keeps a copy of the batch's first input for good (the injected
    /// `leak` fault, for gate's own tests of `growth`).
    fn leak(&self, batch: &Self::Batch) -> Result<()>;

    /// [`Train::backward`], then [`Train::prune`].
    fn gradients<'t>(&'t self, forward: Self::Forward<'t>, batch: &Self::Batch) -> Result<Self::Grads> {
        let mut grads = self.backward(forward, batch)?;
        self.prune(&mut grads)?;
        Ok(grads)
    }
}
