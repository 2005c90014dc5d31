//! The trainer: one workload's parameters, model and AdamW, and what a
//! training step does with them (forward, backward, gradient pruning, the
//! optimizer step, the recast from the master weights under mixed
//! precision). It measures nothing: `phases` drives it a piece at a time
//! inside its spans, so every allocation here happens where the phase that
//! counts it asks for it. This is candle's side of gate-runner's adapter
//! traits ([`Session`], [`Unbuilt`], [`Train`]).

use std::cell::OnceCell;

use candle_core::backprop::GradStore;
use candle_core::{DType, Result, Tensor, Var};
use candle_nn::optim::{AdamW, Optimizer as _};
use gate_runner::adapter::{self, Analytic, Session, Train, Unbuilt};

use crate::sdk::{prune_grads, Batch, DynWorkload, Model, OptimizerStep, ParamStore, RunCtx, Step, TrainingForward};

/// A candle error as gate's: its message (reports show the first line)
/// and its kind, told from what candle passes through of cudarc's driver
/// and cuBLAS errors (candle has no error variant of its own for either).
pub(crate) fn err(e: candle_core::Error) -> adapter::Error {
    let message = e.to_string();
    adapter::Error::of_kind(failure_kind(&message), message)
}

/// Out of memory: the driver's, cuBLAS's failed allocation, or a CPU
/// allocation candle reports; another driver or cuBLAS error: the device's.
pub(crate) fn failure_kind(message: &str) -> adapter::FailureKind {
    if message.contains("CUDA_ERROR_OUT_OF_MEMORY")
        || message.contains("CUBLAS_STATUS_ALLOC_FAILED")
        || message.to_ascii_lowercase().contains("out of memory")
    {
        adapter::FailureKind::OutOfMemory
    } else if message.contains("CUDA_ERROR_") || message.contains("CUBLAS_STATUS_") || message.contains("DriverError(")
    {
        adapter::FailureKind::Device
    } else {
        adapter::FailureKind::Model
    }
}

/// One workload in its run context: what the runner profiles.
pub(crate) struct CandleSession<'w> {
    pub(crate) workload: &'w dyn DynWorkload,
    // Owned: a harness makes the context per component (`crate::child`).
    pub(crate) ctx: RunCtx,
}

impl Session for CandleSession<'_> {
    type Params<'s>
        = Params<'s>
    where
        Self: 's;
    type Trainer<'s>
        = Trainer<'s>
    where
        Self: 's;

    fn analytic(&self) -> Analytic {
        // With master weights the model holds the masters and their casts.
        let ctx = &self.ctx;
        let dsize = (ctx.dtype.size_in_bytes() + ctx.master_dtype.map_or(0, |d| d.size_in_bytes())) as u64;
        let count = self.workload.param_count();
        // No closed form: nothing to check `params` against (0 says so).
        if !count.closed_form {
            return Analytic::default();
        }
        Analytic {
            param_bytes: (count.trainable + count.frozen) * dsize,
            frozen_elems: count.frozen,
        }
    }

    fn params(&self) -> Params<'_> {
        Params::new(self.workload, &self.ctx)
    }
}

impl<'w> Unbuilt for Params<'w> {
    type Trainer = Trainer<'w>;

    fn build(self) -> adapter::Result<Trainer<'w>> {
        Params::build(self).map_err(err)
    }
}

impl<'w> Train for Trainer<'w> {
    type Batch = Batch;
    type Forward<'t>
        = Box<dyn TrainingForward + 't>
    where
        Self: 't;
    type Grads = GradStore;
    type Inference = Box<dyn Model>;
    type Prediction = Tensor;

    fn param_elems(&self) -> u64 {
        Trainer::param_elems(self)
    }

    fn param_tensors(&self) -> u64 {
        // Under mixed precision the model also holds a cast of each master.
        let casts = u64::from(self.store.master().is_some());
        self.store.tensor_count() * (1 + casts)
    }

    fn batch(&self) -> adapter::Result<Batch> {
        Trainer::batch(self).map_err(err)
    }

    fn forward<'t>(&'t self, batch: &Batch) -> adapter::Result<Self::Forward<'t>> {
        Trainer::forward(self, batch).map_err(err)
    }

    fn loss_value<'t>(&'t self, forward: &Self::Forward<'t>) -> adapter::Result<f64> {
        scalar(forward.loss())
    }

    fn list_vars(&self) {
        Trainer::list_vars(self);
    }

    fn backward<'t>(&'t self, forward: Self::Forward<'t>, batch: &Batch) -> adapter::Result<GradStore> {
        Trainer::backward(self, forward, batch).map_err(err)
    }

    fn prune(&self, grads: &mut GradStore) -> adapter::Result<()> {
        Trainer::prune(self, grads).map_err(err)
    }

    fn update(&mut self, grads: &GradStore) -> adapter::Result<()> {
        Trainer::update(self, grads).map_err(err)
    }

    fn after_step(&mut self) -> adapter::Result<()> {
        Trainer::after_step(self).map_err(err)
    }

    fn eval_loss(&self, batch: &Batch) -> adapter::Result<f64> {
        scalar(&Trainer::eval_loss(self, batch).map_err(err)?)
    }

    fn drop_optimizer(&mut self) {
        Trainer::drop_optimizer(self)
    }

    fn clear_state(&mut self) -> adapter::Result<bool> {
        match &mut self.model {
            Some(model) => model.clear_state().map_err(err),
            None => Ok(false),
        }
    }

    fn drop_training_model(&mut self) {
        self.model = None;
    }

    fn inference_model(&self) -> adapter::Result<Box<dyn Model>> {
        Trainer::inference_model(self).map_err(err)
    }

    fn predict(&self, model: &Box<dyn Model>, batch: &Batch) -> adapter::Result<Tensor> {
        model.predict(batch).map_err(err)
    }

    fn gradient_bytes(&self, grads: &GradStore) -> Option<u64> {
        let bytes = self
            .list_vars()
            .iter()
            .filter_map(|v| grads.get(v.as_tensor()))
            .map(|g| (g.elem_count() * g.dtype().size_in_bytes()) as u64)
            .sum();
        Some(bytes)
    }

    fn gradient_coverage(&self, grads: &GradStore) -> Option<gate_contract::measurement::GradientCoverage> {
        let mut c = self.store.coverage(grads, &self.frozen);
        // Said only where something is missing: the text is the runner's
        // bytes, counted with the optimizer's (and subtracted there).
        if !c.is_complete() {
            c.likely_cause = Some(NO_BACKWARD.into());
            c.declare_frozen = Some("`Workload::frozen_parameters`".into());
        }
        Some(c)
    }

    fn stand_in_optimizer<'t>(
        &'t self,
        grads: &'t GradStore,
        elements: usize,
    ) -> adapter::Result<Option<Box<dyn adapter::StandInOptimizer + 't>>> {
        // On CUDA the pool counts the device's buffers alone: the state's
        // data already.
        if !self.ctx.device.is_cpu() {
            return Ok(None);
        }
        let stand_in = Trainer::stand_in_optimizer(self, grads, elements).map_err(err)?;
        Ok(Some(Box::new(stand_in)))
    }

    fn generation<'g>(&'g self, model: &'g Box<dyn Model>) -> adapter::Result<Box<dyn adapter::Generation + 'g>> {
        let g = model.generator().map_err(err)?;
        Ok(Box::new(CandleGeneration(g)))
    }

    fn leak(&self, batch: &Batch) -> adapter::Result<()> {
        match batch.tensors.first() {
            Some(t) => super::fault::leak(t).map_err(err),
            None => Ok(()),
        }
    }
}

/// The optimizer of a training step. gate's own AdamW is kept inline, not
/// boxed: a box would be the runner's bytes counted as optimizer state.
enum Optimizer {
    Gate(AdamW),
    Own(Box<dyn OptimizerStep>),
}

impl Optimizer {
    fn step(&mut self, grads: &GradStore) -> Result<()> {
        match self {
            Optimizer::Gate(adamw) => candle_nn::optim::Optimizer::step(adamw, grads),
            Optimizer::Own(own) => own.step(grads),
        }
    }
}

/// The trainer's optimizer made again over stand-ins of its variables
/// (`Train::stand_in_optimizer`): the stand-ins and their gradients are
/// made first, the optimizer in `make`.
pub(crate) struct StandInOptimizer<'t, 'w> {
    trainer: &'t Trainer<'w>,
    vars: Vec<Var>,
    grads: GradStore,
    made: Option<Optimizer>,
}

impl adapter::StandInOptimizer for StandInOptimizer<'_, '_> {
    fn make(&mut self) -> adapter::Result<()> {
        let mut opt = self.trainer.new_optimizer(&self.vars).map_err(err)?;
        opt.step(&self.grads).map_err(err)?;
        self.made = Some(opt);
        Ok(())
    }
}

/// The candle ops with no backward, in every minor gate supports (read in
/// candle-nn 0.9.1, 0.9.2, 0.10.2 and 0.11.1: `apply_op*_no_bwd`).
const NO_BACKWARD: &str = "an op without a backward on their path (candle-nn's fused ops::rms_norm, ops::layer_norm \
     (RmsNorm and LayerNorm on a contiguous input), ops::softmax_last_dim and rotary_emb::rope/rope_i/rope_thd have none)";

/// A model's generation loop as the runner drives it.
struct CandleGeneration<'g>(Box<dyn crate::sdk::Generator + 'g>);

impl adapter::Generation for CandleGeneration<'_> {
    fn prefill(&mut self, tokens: usize) -> adapter::Result<()> {
        self.0.prefill(tokens).map_err(err)
    }

    fn decode(&mut self) -> adapter::Result<()> {
        self.0.decode().map_err(err)
    }
}

/// A scalar loss tensor's value.
fn scalar(loss: &Tensor) -> adapter::Result<f64> {
    loss.to_dtype(DType::F64)
        .and_then(|l| l.to_scalar::<f64>())
        .map_err(err)
}

/// A trainer before its model is built: the parameter store alone. It is
/// made before the build is measured, so the store's own bookkeeping is
/// never counted as parameters.
pub(crate) struct Params<'w> {
    workload: &'w dyn DynWorkload,
    ctx: &'w RunCtx,
    store: ParamStore,
    /// Read here, outside every span, so a workload's `learning_rate` never
    /// counts in the optimizer's figures.
    lr: f64,
    /// [`crate::Workload::frozen_parameters`], read here for the same reason.
    frozen: Vec<String>,
}

impl<'w> Params<'w> {
    pub(super) fn new(workload: &'w dyn DynWorkload, ctx: &'w RunCtx) -> Self {
        Params {
            workload,
            ctx,
            store: ParamStore::with_master(ctx.seed, ctx.master_dtype),
            lr: workload.learning_rate(),
            frozen: workload.frozen_parameters(),
        }
    }

    /// Builds the model; its weights are created in the store on first use.
    pub(super) fn build(self) -> Result<Trainer<'w>> {
        // Its spans number its layers from 0 (gate-probe's `spans`).
        gate_probe::spans::new_build();
        let model = self
            .workload
            .build(self.store.builder(self.ctx.dtype, &self.ctx.device), self.ctx)?;
        let unknown = self.store.unknown_frozen(&self.frozen);
        if !unknown.is_empty() {
            let names: Vec<String> = self.store.named_vars().into_iter().map(|(n, _)| n).collect();
            candle_core::bail!(
                "frozen_parameters names {} that the built model does not have: {}; its parameters are: {}",
                if unknown.len() == 1 {
                    "a parameter"
                } else {
                    "parameters"
                },
                unknown.join(", "),
                shortened(&names)
            );
        }
        Ok(Trainer {
            workload: self.workload,
            ctx: self.ctx,
            store: self.store,
            lr: self.lr,
            frozen: self.frozen,
            model: Some(model),
            vars: OnceCell::new(),
            opt: None,
            steps: 0,
        })
    }
}

/// A built model being trained. Step `n` (from 0) draws its dropout from
/// `seed ^ n`, so a profile and a timed pair train alike.
pub(crate) struct Trainer<'w> {
    workload: &'w dyn DynWorkload,
    ctx: &'w RunCtx,
    store: ParamStore,
    lr: f64,
    frozen: Vec<String>,
    /// The training model; dropped (`drop_training_model`) before the
    /// inference or generation model is built, so what it holds beside the
    /// weights is not counted in their peaks.
    model: Option<Box<dyn Model>>,
    /// The trainable variables, listed when first needed (see [`Trainer::list_vars`]).
    vars: OnceCell<Vec<Var>>,
    /// Made by the first [`Trainer::update`]: the workload's own, or AdamW.
    opt: Option<Optimizer>,
    /// Steps completed (`after_step` counts them).
    steps: usize,
}

impl<'w> Trainer<'w> {
    /// Parameter elements in the store (masters counted once).
    pub(super) fn param_elems(&self) -> u64 {
        self.store.elem_count()
    }

    /// The training batch; every user of a workload draws the same one.
    pub(super) fn batch(&self) -> Result<Batch> {
        self.workload.batch(self.ctx, self.ctx.seed ^ 0xBA7C)
    }

    /// The forward of the next step, kept for its backward.
    pub(super) fn forward(&self, batch: &Batch) -> Result<Box<dyn TrainingForward + '_>> {
        let seed = self.ctx.seed ^ self.steps as u64;
        self.model()?.forward_train(batch, &Step::train(seed))
    }

    /// Lists the trainable variables (once; later calls do nothing). The
    /// profile calls this where its `backward` phase starts, so the list is
    /// counted with the gradients; otherwise `backward` lists them.
    pub(super) fn list_vars(&self) -> &[Var] {
        self.vars.get_or_init(|| self.store.vars_except(&self.frozen))
    }

    /// The gradients of `fwd`'s loss, every one backward produced; with
    /// gradient accumulation, the parameters' gradients summed over that
    /// many micro-batches (the first is `fwd`).
    pub(super) fn backward(&self, fwd: Box<dyn TrainingForward + '_>, batch: &Batch) -> Result<GradStore> {
        let mut grads = fwd.backward(self.list_vars())?;
        for _ in 1..self.workload.accumulation_steps().max(1) {
            prune_grads(&mut grads, self.list_vars())?;
            let more = self.forward(batch)?.backward(self.list_vars())?;
            for v in self.list_vars() {
                let t = v.as_tensor();
                let sum = match (grads.remove(t), more.get(t)) {
                    (Some(a), Some(b)) => Some((a + b)?),
                    (a, b) => a.or_else(|| b.cloned()),
                };
                if let Some(sum) = sum {
                    grads.insert(t, sum);
                }
            }
        }
        Ok(grads)
    }

    /// Keeps only the trainable variables' gradients (see `prune_grads`),
    /// then the workload's own treatment of them (clipping).
    pub(super) fn prune(&self, grads: &mut GradStore) -> Result<()> {
        prune_grads(grads, self.list_vars())?;
        self.workload.before_update(grads, self.list_vars())
    }

    /// One AdamW step; the first call makes the optimizer (its state is
    /// allocated by that first step).
    pub(super) fn update(&mut self, grads: &GradStore) -> Result<()> {
        if let Some(opt) = &mut self.opt {
            return opt.step(grads);
        }
        let mut opt = self.new_optimizer(self.list_vars())?;
        opt.step(grads)?;
        self.opt = Some(opt);
        Ok(())
    }

    /// The workload's own optimizer over `vars`, or AdamW.
    fn new_optimizer(&self, vars: &[Var]) -> Result<Optimizer> {
        Ok(match self.workload.optimizer(vars.to_vec())? {
            Some(own) => Optimizer::Own(own),
            None => {
                let params = crate::sdk::optim::adamw_params(self.lr);
                Optimizer::Gate(AdamW::new(vars.to_vec(), params)?)
            }
        })
    }

    /// Stand-ins of the trainable variables, each of its dtype and rank
    /// with `elements` elements along its first axis (a rank-0 variable
    /// keeps its one), and a gradient of each stand-in whose variable
    /// `grads` has one for: the same optimizer over them keeps its
    /// bookkeeping (its list of the variables, each state tensor's header
    /// and layout) and its state of that many elements. Not empty: candle
    /// gives an empty tensor's arithmetic back as the tensor itself, which
    /// a `Var` cannot be set to.
    pub(super) fn stand_in_optimizer(&self, grads: &GradStore, elements: usize) -> Result<StandInOptimizer<'_, 'w>> {
        let shape = |rank: usize| (0..rank).map(|d| if d == 0 { elements } else { 1 }).collect::<Vec<_>>();
        let vars = self
            .list_vars()
            .iter()
            .map(|v| Var::zeros(shape(v.rank()), v.dtype(), v.device()))
            .collect::<Result<Vec<_>>>()?;
        // A backward through the stand-ins gives each its gradient.
        let mut sum = Tensor::zeros((), DType::F32, &self.ctx.device)?;
        for (stand_in, var) in vars.iter().zip(self.list_vars()) {
            if grads.get(var.as_tensor()).is_some() {
                sum = (sum + stand_in.as_tensor().sum_all()?.to_dtype(DType::F32)?)?;
            }
        }
        let grads = sum.backward()?;
        Ok(StandInOptimizer {
            trainer: self,
            vars,
            grads,
            made: None,
        })
    }

    /// Ends a step: the model's own hook (a DQN syncs its target net), then
    /// the recast under mixed precision.
    pub(super) fn after_step(&mut self) -> Result<()> {
        if let Some(model) = &mut self.model {
            model.after_step(self.steps)?;
        }
        self.recast()?;
        self.steps += 1;
        Ok(())
    }

    /// Mixed precision: the model holds casts of the master weights taken
    /// when it was built; after an optimizer step, build it again from the
    /// updated masters (the old casts go when the new model replaces them,
    /// so both sets of casts are live for a moment). Nothing to do otherwise.
    fn recast(&mut self) -> Result<()> {
        if self.store.master().is_some() && self.model.is_some() {
            gate_probe::spans::new_build();
            self.model = Some(
                self.workload
                    .build(self.store.builder(self.ctx.dtype, &self.ctx.device), self.ctx)?,
            );
        }
        Ok(())
    }

    /// The loss on `batch` without dropout (`Model::eval_loss`).
    pub(super) fn eval_loss(&self, batch: &Batch) -> Result<Tensor> {
        self.model()?.eval_loss(batch)
    }

    /// The training model, unless it was dropped for inference.
    fn model(&self) -> Result<&dyn Model> {
        match &self.model {
            Some(model) => Ok(model.as_ref()),
            None => candle_core::bail!("the training model was dropped for inference: no training step runs after it"),
        }
    }

    /// Frees the optimizer state (inference needs none).
    pub(super) fn drop_optimizer(&mut self) {
        self.opt = None;
    }

    /// A model over the same weights as plain tensors (no graph), for inference.
    pub(super) fn inference_model(&self) -> Result<Box<dyn Model>> {
        gate_probe::spans::new_build();
        self.workload
            .build(self.store.detached(self.ctx.dtype, &self.ctx.device), self.ctx)
    }
}

/// `names` for an error message: all of them up to a dozen, else the first
/// dozen and how many more.
fn shortened(names: &[String]) -> String {
    const SHOWN: usize = 12;
    if names.len() <= SHOWN {
        return names.join(", ");
    }
    format!("{}, and {} more", names[..SHOWN].join(", "), names.len() - SHOWN)
}

#[cfg(test)]
mod failure_kind_tests {
    use super::failure_kind;
    use gate_contract::measurement::FailureKind;

    #[test]
    fn device_errors_are_told_from_running_out_of_memory() {
        let device = "DriverError(CUDA_ERROR_ILLEGAL_ADDRESS, \"an illegal memory access was encountered\")";
        assert_eq!(failure_kind(device), FailureKind::Device);
        let oom = "DriverError(CUDA_ERROR_OUT_OF_MEMORY, \"out of memory\")";
        assert_eq!(failure_kind(oom), FailureKind::OutOfMemory);
        assert_eq!(
            failure_kind("cuBLAS: CUBLAS_STATUS_ALLOC_FAILED"),
            FailureKind::OutOfMemory
        );
        assert_eq!(failure_kind("CUBLAS_STATUS_EXECUTION_FAILED"), FailureKind::Device);
        assert_eq!(failure_kind("the loss is NaN, not a finite number"), FailureKind::Model);
    }
}
