//! burn's side of gate-runner's adapter traits ([`Session`], [`Unbuilt`],
//! [`Train`]): a workload's model, its optimizer, and what a training step
//! does with them. It measures nothing: gate-runner's phases drive it a
//! piece at a time inside their spans, so every allocation lands in the
//! phase that counts it. A harness knows several workload types, so each
//! is reached through [`DynBurn`] and trained by a boxed [`DynTrainer`].

use std::any::Any;
use std::cell::RefCell;
use std::sync::Arc;

use burn::module::{Module, ModuleMapper, ModuleVisitor, Param};
use burn::optim::{GradientsParams, ModuleOptimizer};
use burn::tensor::{Device, Gradients, Tensor};
use gate_runner::adapter::{self, Analytic, Session, Train, Unbuilt};
use gate_runner::harness::Resolvable;
use gate_spec::config::{ConfigIssue, Node};

use crate::{BurnWorkload, RunCtx};

/// A burn workload of any type, as the registry holds it.
pub trait DynBurn: std::fmt::Debug + Send + Sync {
    /// The resolved config as the report records it.
    fn describe(&self) -> serde_json::Value;
    /// The closed-form parameter elements.
    fn param_elems(&self) -> u64;
    /// The modules the workload declares frozen ([`BurnWorkload::frozen_modules`]).
    fn frozen_modules(&self) -> Vec<String>;
    /// A trainer: the model built on `device` (an autodiff device), the
    /// modules `frozen` names set `no_grad`, the batch made on `plain`.
    /// An entry of `frozen` that names nothing of the model is an error.
    fn trainer<'w>(
        &'w self,
        device: &Device,
        plain: &Device,
        ctx: RunCtx,
        frozen: Vec<String>,
    ) -> Result<Box<dyn DynTrainer + 'w>, String>;
}

/// Reads `node` as a `W` workload (the registry's reader).
pub(crate) fn read_kind<W: BurnWorkload>(node: &Node) -> Result<Arc<dyn DynBurn>, Vec<ConfigIssue>> {
    gate_runner::harness::read_config(node, W::from_config).map(|w| Arc::new(Workload(w)) as Arc<dyn DynBurn>)
}

/// `W` as [`DynBurn`].
#[derive(Debug)]
struct Workload<W>(W);

// burn has no checkpointing lever gate can turn: `checkpoint:` is refused
// (the default) with the resolve step's error and hint.
impl Resolvable for dyn DynBurn {
    fn config(&self) -> serde_json::Value {
        self.describe()
    }

    // burn builds in its default float, f32: another `dtype:` is refused
    // when the spec is resolved, not at run time.
    fn dtypes(&self) -> Option<&'static [gate_spec::dtype::DType]> {
        Some(&[gate_spec::dtype::DType::F32])
    }
}

impl<W: BurnWorkload> DynBurn for Workload<W> {
    fn describe(&self) -> serde_json::Value {
        self.0.describe()
    }

    fn param_elems(&self) -> u64 {
        self.0.param_count().elems
    }

    fn frozen_modules(&self) -> Vec<String> {
        self.0.frozen_modules()
    }

    fn trainer<'w>(
        &'w self,
        device: &Device,
        plain: &Device,
        ctx: RunCtx,
        frozen: Vec<String>,
    ) -> Result<Box<dyn DynTrainer + 'w>, String> {
        // burn makes parameters lazily: each is made here, in the build,
        // not by whichever phase first reads it.
        let model = self.0.build(device);
        let record = Record::of(&model);
        let model = freeze(model, &frozen)?;
        Ok(Box::new(Trainer {
            workload: &self.0,
            plain: plain.clone(),
            ctx,
            model: Some(model),
            record,
            frozen,
            optimizer: None,
            batch: RefCell::new(None),
            leaked: RefCell::new(Vec::new()),
        }))
    }
}

/// Whether the tensor at `path` lies in a module `frozen` names (or is the
/// parameter it names).
fn is_frozen(frozen: &[String], path: &str) -> bool {
    frozen.iter().any(|f| under(f, path))
}

/// Whether `path` is `module` itself or lies inside it.
fn under(module: &str, path: &str) -> bool {
    path.strip_prefix(module)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('.'))
}

/// The paths of a model's float tensors, as burn's visitor names them.
fn paths<M: Module>(model: &M) -> Vec<String> {
    struct Paths {
        path: Vec<String>,
        all: Vec<String>,
    }
    impl ModuleVisitor for Paths {
        fn enter_module(&mut self, name: &str, _container_type: &str) {
            self.path.push(name.to_string());
        }
        fn exit_module(&mut self, _name: &str, _container_type: &str) {
            self.path.pop();
        }
        fn visit_float<const D: usize>(&mut self, _param: &Param<Tensor<D>>) {
            self.all.push(self.path.join("."));
        }
    }
    let mut p = Paths {
        path: Vec::new(),
        all: Vec::new(),
    };
    model.visit(&mut p);
    p.all
}

/// `model` with the parameters in the modules `frozen` names set
/// `no_grad`: burn's autodiff keeps no gradient for them and its
/// optimizers make no state. An entry that names no tensor of the model
/// is refused, with the paths there are.
fn freeze<M: Module>(model: M, frozen: &[String]) -> Result<M, String> {
    if frozen.is_empty() {
        return Ok(model);
    }
    let all = paths(&model);
    let unknown: Vec<&str> = frozen
        .iter()
        .filter(|f| !all.iter().any(|p| under(f, p)))
        .map(String::as_str)
        .collect();
    if !unknown.is_empty() {
        const SHOWN: usize = 12;
        let mut shown = all.iter().take(SHOWN).cloned().collect::<Vec<_>>().join(", ");
        if all.len() > SHOWN {
            shown.push_str(&format!(" and {} more", all.len() - SHOWN));
        }
        return Err(format!(
            "frozen_modules names {} that the built model does not have: {}; its tensors are: {shown}",
            if unknown.len() == 1 { "a module" } else { "modules" },
            unknown.join(", ")
        ));
    }
    struct Freeze<'f> {
        frozen: &'f [String],
        path: Vec<String>,
    }
    impl ModuleMapper for Freeze<'_> {
        fn enter_module(&mut self, name: &str, _container_type: &str) {
            self.path.push(name.to_string());
        }
        fn exit_module(&mut self, _name: &str, _container_type: &str) {
            self.path.pop();
        }
        fn map_float<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
            if is_frozen(self.frozen, &self.path.join(".")) {
                param.set_require_grad(false)
            } else {
                param
            }
        }
    }
    Ok(model.map(&mut Freeze {
        frozen,
        path: Vec::new(),
    }))
}

/// What the record of a built model holds: its parameter tensors (trained
/// or frozen), and apart from them its buffers.
#[derive(Debug, Clone, Copy, Default)]
struct Record {
    elems: u64,
    bytes: u64,
    tensors: u64,
    /// Tensors the built model trains none of (before the team's modules
    /// are frozen): burn's `RunningState` (BatchNorm's running statistics)
    /// and parameters the model itself set `no_grad`. The model's own
    /// state: `model_state`.
    buffer_bytes: u64,
}

impl Record {
    /// Visits every float tensor of `model` (making any lazy one), before
    /// any module is frozen: what does not require a gradient then is a
    /// buffer.
    fn of<M: Module>(model: &M) -> Record {
        struct Count(Record);
        impl ModuleVisitor for Count {
            fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
                let t = param.val();
                let elems = t.shape().num_elements() as u64;
                let bytes = elems * t.dtype().size() as u64;
                if !t.is_require_grad() {
                    self.0.buffer_bytes += bytes;
                    return;
                }
                self.0.elems += elems;
                self.0.bytes += bytes;
                self.0.tensors += 1;
            }
        }
        let mut c = Count(Record::default());
        model.visit(&mut c);
        c.0
    }
}

/// The object-safe face of one workload's trainer. The batch and the
/// optimizer live in it, so the phases' handles are plain values.
pub trait DynTrainer {
    /// The record's parameters: elements, bytes and tensors.
    fn record(&self) -> (u64, u64, u64);
    /// The record's buffers' bytes.
    fn buffer_bytes(&self) -> u64;
    /// Draws the batch into the trainer.
    fn make_batch(&self);
    /// The training forward: the loss, its graph kept by autodiff.
    fn forward(&self) -> adapter::Result<Tensor<1>>;
    /// The loss on the batch, without training.
    fn eval_loss(&self) -> adapter::Result<f64>;
    /// The parameters' gradients of `loss`'s graph, as burn's optimizers take them.
    fn gradients_params(&self, grads: Gradients) -> GradientsParams;
    /// Which parameters have a gradient in `grads`, and the gradient tensors' bytes.
    fn gradient_stats(&self, grads: &GradientsParams) -> (gate_contract::measurement::GradientCoverage, u64);
    /// The bytes of the optimizer's state tensors (`None` before the first step).
    fn optimizer_bytes(&self) -> Option<u64>;
    /// One optimizer step (the first makes the optimizer).
    fn step(&mut self, grads: GradientsParams) -> adapter::Result<()>;
    /// Frees the optimizer and its state.
    fn drop_optimizer(&mut self);
    /// The inference model over the trained weights.
    fn inference_model(&self) -> adapter::Result<Box<dyn Any>>;
    /// One inference call, its output dropped.
    fn predict(&self, model: &dyn Any) -> adapter::Result<()>;
    /// Keeps another batch for good (the injected `leak` fault).
    fn leak(&self);
}

struct Trainer<'w, W: BurnWorkload> {
    workload: &'w W,
    plain: Device,
    ctx: RunCtx,
    /// `None` only while a step moves it through the optimizer.
    model: Option<W::Model>,
    record: Record,
    /// The modules declared frozen (set `no_grad` at the build).
    frozen: Vec<String>,
    optimizer: Option<ModuleOptimizer>,
    batch: RefCell<Option<W::Batch>>,
    leaked: RefCell<Vec<W::Batch>>,
}

impl<W: BurnWorkload> Trainer<'_, W> {
    fn model(&self) -> adapter::Result<&W::Model> {
        self.model
            .as_ref()
            .ok_or_else(|| adapter::Error::msg("the model was lost by a failed optimizer step"))
    }

    /// Runs `f` on the batch.
    fn with_batch<T>(&self, f: impl FnOnce(&W::Batch) -> T) -> adapter::Result<T> {
        let batch = self.batch.borrow();
        let b = batch
            .as_ref()
            .ok_or_else(|| adapter::Error::msg("no batch was drawn before the forward"))?;
        Ok(f(b))
    }
}

/// A panic inside burn (its errors are panics) as the phase's error, of
/// its kind: CubeCL's out-of-memory errors (`LaunchError::OutOfMemory`,
/// "An out-of-memory error happened during launch", and the memory
/// manager's "out of device memory allocating N bytes", cubecl-runtime
/// 0.11) are running out of memory; anything else is the model's.
fn caught<T>(f: impl FnOnce() -> T) -> adapter::Result<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).map_err(|p| {
        let message = p
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "burn panicked".into());
        adapter::Error::of_kind(panic_kind(&message), message)
    })
}

/// CubeCL's out-of-memory panics are running out of memory; any other the model's.
pub(crate) fn panic_kind(message: &str) -> adapter::FailureKind {
    if message.contains("out-of-memory error") || message.contains("out of device memory") {
        adapter::FailureKind::OutOfMemory
    } else {
        adapter::FailureKind::Model
    }
}

/// A one-element tensor as a number.
fn scalar(t: Tensor<1>) -> f64 {
    f64::from(t.inner().into_scalar::<f32>())
}

impl<W: BurnWorkload> DynTrainer for Trainer<'_, W> {
    fn record(&self) -> (u64, u64, u64) {
        (self.record.elems, self.record.bytes, self.record.tensors)
    }

    fn buffer_bytes(&self) -> u64 {
        self.record.buffer_bytes
    }

    fn make_batch(&self) {
        let seed = self.ctx.seed ^ 0xBA7C;
        *self.batch.borrow_mut() = Some(self.workload.batch(&self.plain, &self.ctx, seed));
    }

    fn forward(&self) -> adapter::Result<Tensor<1>> {
        let model = self.model()?;
        self.with_batch(|b| caught(|| self.workload.loss(model, b)))?
    }

    fn eval_loss(&self) -> adapter::Result<f64> {
        let model = self.model()?.valid();
        self.with_batch(|b| caught(|| scalar(self.workload.loss(&model, b))))?
    }

    fn gradients_params(&self, grads: Gradients) -> GradientsParams {
        match &self.model {
            Some(m) => GradientsParams::from_grads(grads, m),
            None => GradientsParams::new(),
        }
    }

    fn gradient_stats(&self, grads: &GradientsParams) -> (gate_contract::measurement::GradientCoverage, u64) {
        struct Stats<'g> {
            grads: &'g GradientsParams,
            frozen: &'g [String],
            c: gate_contract::measurement::GradientCoverage,
            with_gradient_bytes: u64,
            /// The module path down to the parameter being visited.
            path: Vec<String>,
        }
        impl ModuleVisitor for Stats<'_> {
            fn enter_module(&mut self, name: &str, _container_type: &str) {
                self.path.push(name.to_string());
            }
            fn exit_module(&mut self, _name: &str, _container_type: &str) {
                self.path.pop();
            }
            fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
                let bytes = |t: &Tensor<D>| (t.shape().num_elements() * t.dtype().size()) as u64;
                // Every gradient the store holds is in the figure, whatever
                // the tensor is.
                let gradient = self.grads.get::<D>(param.id);
                if let Some(g) = &gradient {
                    self.with_gradient_bytes += bytes(g);
                }
                // Declared frozen: set `no_grad` at the build, trained by nothing.
                if !self.frozen.is_empty() && is_frozen(self.frozen, &self.path.join(".")) {
                    self.c.frozen += 1;
                    return;
                }
                let value = param.val();
                // burn's own flag: a tensor its autodiff tracks no gradient
                // for (a `RunningState` such as BatchNorm's running
                // statistics, a parameter set `no_grad`) is never trained
                // by its optimizers, and no gradient is missing.
                if !value.is_require_grad() {
                    self.c.buffers += 1;
                    return;
                }
                let own = bytes(&value);
                self.c.tensors += 1;
                self.c.bytes += own;
                if gradient.is_none() {
                    self.c.without_gradient += 1;
                    self.c.without_gradient_bytes += own;
                    if self.c.missing.len() < gate_contract::measurement::GradientCoverage::NAMES_KEPT {
                        self.c.missing.push(self.path.join("."));
                    }
                }
            }
        }
        let mut s = Stats {
            grads,
            frozen: &self.frozen,
            c: gate_contract::measurement::GradientCoverage::default(),
            with_gradient_bytes: 0,
            path: Vec::new(),
        };
        if let Some(m) = &self.model {
            m.visit(&mut s);
        }
        // Said only where something is missing, as candle's adapter does.
        if !s.c.is_complete() {
            s.c.declare_frozen = Some("`BurnWorkload::frozen_modules`".into());
        }
        (s.c, s.with_gradient_bytes)
    }

    fn optimizer_bytes(&self) -> Option<u64> {
        // The state as burn records it: every tensor of it, whole. At the
        // first step AMSGrad's running maximum is the second moment itself
        // (one buffer, two tensors); it parts from it at a later step,
        // where the live bytes after the first step would miss it.
        let optimizer = self.optimizer.as_ref()?;
        let tensors = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let bytes = optimizer.to_record().into_bytes().ok()?;
            burn_pack::Reader::from_bytes(bytes).ok()?.into_tensors().ok()
        }))
        .ok()
        .flatten()?;
        Some(tensors.iter().map(|t| t.byte_len() as u64).sum())
    }

    fn step(&mut self, grads: GradientsParams) -> adapter::Result<()> {
        let lr = self.workload.learning_rate();
        let optimizer = self.optimizer.get_or_insert_with(|| self.workload.optimizer());
        let model = self
            .model
            .take()
            .ok_or_else(|| adapter::Error::msg("the model was lost by a failed optimizer step"))?;
        let stepped = caught(std::panic::AssertUnwindSafe(|| optimizer.step(lr, model, grads)))?;
        self.model = Some(stepped);
        Ok(())
    }

    fn drop_optimizer(&mut self) {
        self.optimizer = None;
    }

    fn inference_model(&self) -> adapter::Result<Box<dyn Any>> {
        Ok(Box::new(self.model()?.valid()))
    }

    fn predict(&self, model: &dyn Any) -> adapter::Result<()> {
        let model = model
            .downcast_ref::<W::Model>()
            .ok_or_else(|| adapter::Error::msg("the inference model is not this workload's"))?;
        self.with_batch(|b| caught(|| drop(self.workload.predict(model, b))))?
    }

    fn leak(&self) {
        let seed = self.ctx.seed ^ 0xBA7C;
        self.leaked
            .borrow_mut()
            .push(self.workload.batch(&self.plain, &self.ctx, seed));
    }
}

/// One component's workload on a device: what gate-runner profiles.
pub struct BurnSession<'a> {
    pub(crate) workload: &'a dyn DynBurn,
    /// The autodiff device the model trains on.
    pub(crate) device: Device,
    /// The same device without autodiff: batches and inference.
    pub(crate) plain: Device,
    /// The spec's `dtype:` (only f32 is built).
    pub(crate) dtype: gate_spec::dtype::DType,
    pub(crate) ctx: RunCtx,
}

/// A session's parameter store before the build: the device, seeded.
pub struct Params<'a> {
    session: &'a BurnSession<'a>,
    /// [`BurnWorkload::frozen_modules`], read outside the build's span.
    frozen: Vec<String>,
}

impl<'a> Session for BurnSession<'a> {
    type Params<'s>
        = Params<'s>
    where
        Self: 's;
    type Trainer<'s>
        = BurnTrainer<'s>
    where
        Self: 's;

    fn analytic(&self) -> Analytic {
        // burn builds in f32 (its default float): four bytes an element.
        Analytic {
            param_bytes: self.workload.param_elems() * 4,
            frozen_elems: 0,
        }
    }

    fn params(&self) -> Params<'_> {
        // Seeded here, outside the build's span: the same seed, the same weights.
        self.plain.seed(self.ctx.seed);
        Params {
            session: self,
            frozen: self.workload.frozen_modules(),
        }
    }
}

impl<'a> Unbuilt for Params<'a> {
    type Trainer = BurnTrainer<'a>;

    fn build(self) -> adapter::Result<BurnTrainer<'a>> {
        let s = self.session;
        check_dtype(s.dtype).map_err(adapter::Error::msg)?;
        let frozen = self.frozen;
        let inner = caught(|| s.workload.trainer(&s.device, &s.plain, s.ctx, frozen))?.map_err(adapter::Error::msg)?;
        Ok(BurnTrainer { inner })
    }
}

/// A built burn model being trained.
pub struct BurnTrainer<'a> {
    inner: Box<dyn DynTrainer + 'a>,
}

/// A backward's gradients: burn's raw store, then (pruned) the parameters'.
pub struct Grads {
    raw: Option<Gradients>,
    params: RefCell<Option<GradientsParams>>,
}

impl Train for BurnTrainer<'_> {
    /// The batch lives in the trainer (drawn by `batch`).
    type Batch = ();
    type Forward<'t>
        = Tensor<1>
    where
        Self: 't;
    type Grads = Grads;
    type Inference = Box<dyn Any>;
    type Prediction = ();

    fn param_elems(&self) -> u64 {
        self.inner.record().0
    }

    fn param_tensors(&self) -> u64 {
        self.inner.record().2
    }

    fn param_bytes(&self) -> Option<u64> {
        Some(self.inner.record().1)
    }

    fn buffer_bytes(&self) -> Option<u64> {
        Some(self.inner.buffer_bytes())
    }

    fn batch(&self) -> adapter::Result<()> {
        caught(|| self.inner.make_batch())
    }

    fn forward(&self, _batch: &()) -> adapter::Result<Tensor<1>> {
        self.inner.forward()
    }

    fn loss_value(&self, forward: &Tensor<1>) -> adapter::Result<f64> {
        caught(|| scalar(forward.clone()))
    }

    fn list_vars(&self) {}

    fn backward(&self, forward: Tensor<1>, _batch: &()) -> adapter::Result<Grads> {
        let raw = caught(|| forward.backward())?;
        drop(forward);
        Ok(Grads {
            raw: Some(raw),
            params: RefCell::new(None),
        })
    }

    fn prune(&self, grads: &mut Grads) -> adapter::Result<()> {
        if let Some(raw) = grads.raw.take() {
            *grads.params.get_mut() = Some(self.inner.gradients_params(raw));
        }
        Ok(())
    }

    fn update(&mut self, grads: &Grads) -> adapter::Result<()> {
        let params = grads
            .params
            .borrow_mut()
            .take()
            .ok_or_else(|| adapter::Error::msg("the gradients were used by an earlier step"))?;
        self.inner.step(params)
    }

    fn after_step(&mut self) -> adapter::Result<()> {
        Ok(())
    }

    fn eval_loss(&self, _batch: &()) -> adapter::Result<f64> {
        self.inner.eval_loss()
    }

    fn drop_optimizer(&mut self) {
        self.inner.drop_optimizer()
    }

    fn inference_model(&self) -> adapter::Result<Box<dyn Any>> {
        self.inner.inference_model()
    }

    fn predict(&self, model: &Box<dyn Any>, _batch: &()) -> adapter::Result<()> {
        self.inner.predict(model.as_ref())
    }

    fn gradient_bytes(&self, grads: &Grads) -> Option<u64> {
        let params = grads.params.borrow();
        params.as_ref().map(|g| self.inner.gradient_stats(g).1)
    }

    fn optimizer_bytes(&self) -> Option<u64> {
        self.inner.optimizer_bytes()
    }

    fn gradient_coverage(&self, grads: &Grads) -> Option<gate_contract::measurement::GradientCoverage> {
        let params = grads.params.borrow();
        params.as_ref().map(|g| self.inner.gradient_stats(g).0)
    }

    fn leak(&self, _batch: &()) -> adapter::Result<()> {
        caught(|| self.inner.leak())
    }
}

/// The dtype gate-burn builds in: burn's default float, f32.
fn check_dtype(dtype: gate_spec::dtype::DType) -> Result<(), String> {
    if dtype == gate_spec::dtype::DType::F32 {
        return Ok(());
    }
    Err(format!(
        "gate-burn builds models in f32 (burn's default float), and the spec asks for `dtype: {}`; \
         hint: remove `dtype:` (f32) for a burn component",
        dtype.as_str()
    ))
}
