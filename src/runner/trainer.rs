//! The trainer: one workload's parameters, model and AdamW, and what a
//! training step does with them (forward, backward, gradient pruning, the
//! optimizer step, the recast from the master weights under mixed
//! precision). It measures nothing: `phases` drives it a piece at a time
//! inside its spans, so every allocation here happens where the phase that
//! counts it asks for it.

use std::cell::OnceCell;

use candle_core::backprop::GradStore;
use candle_core::{Result, Tensor, Var};
use candle_nn::optim::{AdamW, Optimizer, ParamsAdamW};

use crate::sdk::{prune_grads, Batch, DynWorkload, Model, ParamStore, RunCtx, Step, TrainingForward};

/// A trainer before its model is built: the parameter store alone. It is
/// made before the build is measured, so the store's own bookkeeping is
/// never counted as parameters.
pub(super) struct Params<'w> {
    workload: &'w dyn DynWorkload,
    ctx: &'w RunCtx,
    store: ParamStore,
    /// Read here, outside every span, so a workload's `learning_rate` never
    /// counts in the optimizer's figures.
    lr: f64,
}

impl<'w> Params<'w> {
    pub(super) fn new(workload: &'w dyn DynWorkload, ctx: &'w RunCtx) -> Self {
        Params {
            workload,
            ctx,
            store: ParamStore::with_master(ctx.seed, ctx.master_dtype),
            lr: workload.learning_rate(),
        }
    }

    /// Builds the model; its weights are created in the store on first use.
    pub(super) fn build(self) -> Result<Trainer<'w>> {
        let model = self
            .workload
            .build(self.store.builder(self.ctx.dtype, &self.ctx.device), self.ctx)?;
        Ok(Trainer {
            workload: self.workload,
            ctx: self.ctx,
            store: self.store,
            lr: self.lr,
            model,
            vars: OnceCell::new(),
            opt: None,
            steps: 0,
        })
    }
}

/// A built model being trained. Step `n` (from 0) draws its dropout from
/// `seed ^ n`, so a profile and a timed pair train alike.
pub(super) struct Trainer<'w> {
    workload: &'w dyn DynWorkload,
    ctx: &'w RunCtx,
    store: ParamStore,
    lr: f64,
    model: Box<dyn Model>,
    /// The trainable variables, listed when first needed (see [`Trainer::list_vars`]).
    vars: OnceCell<Vec<Var>>,
    /// Made by the first [`Trainer::update`].
    opt: Option<AdamW>,
    /// Steps completed (`after_step` counts them).
    steps: usize,
}

impl<'w> Trainer<'w> {
    /// Params and build in one go, for callers that measure neither.
    pub(super) fn new(workload: &'w dyn DynWorkload, ctx: &'w RunCtx) -> Result<Self> {
        Params::new(workload, ctx).build()
    }

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
        self.model.forward_train(batch, &Step::train(seed))
    }

    /// Lists the trainable variables (once; later calls do nothing). The
    /// profile calls this where its `backward` phase starts, so the list is
    /// counted with the gradients; otherwise `backward` lists them.
    pub(super) fn list_vars(&self) -> &[Var] {
        self.vars.get_or_init(|| self.store.vars())
    }

    /// The gradients of `fwd`'s loss, every one backward produced.
    pub(super) fn backward(&self, fwd: Box<dyn TrainingForward + '_>) -> Result<GradStore> {
        fwd.backward(self.list_vars())
    }

    /// Keeps only the trainable variables' gradients (see `prune_grads`).
    pub(super) fn prune(&self, grads: &mut GradStore) -> Result<()> {
        prune_grads(grads, self.list_vars())
    }

    /// [`Trainer::backward`], then [`Trainer::prune`].
    pub(super) fn gradients(&self, fwd: Box<dyn TrainingForward + '_>) -> Result<GradStore> {
        let mut grads = self.backward(fwd)?;
        self.prune(&mut grads)?;
        Ok(grads)
    }

    /// One AdamW step; the first call makes the optimizer (its state is
    /// allocated by that first step).
    pub(super) fn update(&mut self, grads: &GradStore) -> Result<()> {
        if let Some(opt) = &mut self.opt {
            return opt.step(grads);
        }
        let params = ParamsAdamW {
            lr: self.lr,
            ..Default::default()
        };
        let mut opt = AdamW::new(self.list_vars().to_vec(), params)?;
        opt.step(grads)?;
        self.opt = Some(opt);
        Ok(())
    }

    /// Ends a step: the model's own hook (a DQN syncs its target net), then
    /// the recast under mixed precision.
    pub(super) fn after_step(&mut self) -> Result<()> {
        self.model.after_step(self.steps)?;
        self.recast()?;
        self.steps += 1;
        Ok(())
    }

    /// Mixed precision: the model holds casts of the master weights taken
    /// when it was built; after an optimizer step, build it again from the
    /// updated masters (the old casts go when the new model replaces them,
    /// so both sets of casts are live for a moment). Nothing to do otherwise.
    fn recast(&mut self) -> Result<()> {
        if self.store.master().is_some() {
            self.model = self
                .workload
                .build(self.store.builder(self.ctx.dtype, &self.ctx.device), self.ctx)?;
        }
        Ok(())
    }

    /// The loss on `batch` without dropout (`Model::eval_loss`).
    pub(super) fn eval_loss(&self, batch: &Batch) -> Result<Tensor> {
        self.model.eval_loss(batch)
    }

    /// Frees the optimizer state (inference needs none).
    pub(super) fn drop_optimizer(&mut self) {
        self.opt = None;
    }

    /// A model over the same weights as plain tensors (no graph), for inference.
    pub(super) fn inference_model(&self) -> Result<Box<dyn Model>> {
        self.workload
            .build(self.store.detached(self.ctx.dtype, &self.ctx.device), self.ctx)
    }
}
