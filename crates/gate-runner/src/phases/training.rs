//! A training component's phases in order: the warm-up and the baseline,
//! the build, the first and the steady step, the timed steps and
//! inference. Each helper measures one or a few phases; the trainer and
//! batch live across all of them, as the figures assume.

use std::time::Instant;

use gate_contract::measurement::{Measurement, Phase};
use gate_contract::timing::median;
use gate_probe::mark;
use gate_spec::metric::Metric;

use super::{finite_loss, first_line, in_phase, profile_steps, source_error, train_step, PhaseResult, Profile, Timing};
use crate::adapter::{Session, Train, Unbuilt};
use crate::fault;
use crate::timing_lock::Turn;

/// The phases in order. Each helper measures one or a few phases; the
/// trainer and batch live here, across all of them, as the figures assume.
pub(super) fn run<S: Session>(p: &mut Profile<S>, warm: Option<&S>, timing: Timing) -> PhaseResult<()> {
    let base = p.warm_up(warm)?;
    let (mut trainer, batch) = p.build()?;
    let (first_peak, counted) = p.first_step(&mut trainer, &batch)?;
    let first_peak = p.complete_state(&mut trainer, &batch, counted, first_peak)?;
    let turn = p.steady_step(&mut trainer, &batch, timing, base, first_peak)?;
    p.timed_steps(&mut trainer, &batch, timing, turn)?;
    p.inference(&mut trainer, &batch, base)
}

impl<'a, S: Session> Profile<'a, S> {
    /// Announces `phase` with the figures so far and applies any injected fault (see `fault`).
    pub(super) fn begin(&mut self, phase: Phase) -> PhaseResult<()> {
        (self.on_phase)(phase, self.m);
        in_phase(phase, fault::inject(phase))
    }

    /// The warm-up, then the baseline every peak is measured from.
    fn warm_up(&mut self, warm: Option<&S>) -> PhaseResult<u64> {
        // Warm up on a throwaway copy: thread pools and the CPU matmul kernels'
        // per-thread scratch buffers are allocated once and kept, and would
        // otherwise land in whichever phase first needs them.
        // A model too big for the (emulated) card fails here first; then go on
        // without the warm-up, so the failure is placed in the phase that really
        // runs out and the figures before it are still measured.
        self.begin(Phase::Warmup)?;
        let warmed = match warm.map_or_else(|| throwaway_run(self.session), throwaway_run) {
            Ok(()) => true,
            Err((_, e)) => {
                self.m.warmup_error = Some(first_line(&e.to_string()));
                false
            }
        };
        let rec = self.rec;
        let probe = rec.probe();
        // The throwaway model was built and stepped: the probe can tell where
        // its bytes come from before the baseline is read (else `build` does).
        if warmed {
            self.settle_source(Phase::Warmup)?;
        }
        probe.sync();
        let base = probe.live();
        self.sampler.set_base(base);
        let analytic = self.session.analytic();
        self.m.analytic_params_bytes = analytic.param_bytes;
        self.m.frozen_elems = analytic.frozen_elems;
        Ok(base)
    }

    /// Tells the probe the parameters are built (see
    /// [`MemoryProbe::params_built`](gate_probe::MemoryProbe::params_built));
    /// the source it settles on is recorded when the profile ends.
    pub(super) fn settle_source(&mut self, phase: Phase) -> PhaseResult<()> {
        self.rec.probe().params_built().map_err(|e| (phase, source_error(e)))
    }

    /// The model (`build`) and the batch (`batch`).
    #[allow(clippy::type_complexity)]
    fn build(&mut self) -> PhaseResult<(S::Trainer<'a>, <S::Trainer<'a> as Train>::Batch)> {
        self.begin(Phase::Build)?;
        let params = self.session.params();
        let probe = self.rec.probe();
        // Where the bytes come from is settled inside the span, before its
        // last reading, so the parameters' figure is read from the source
        // the rest of the profile uses (a no-op once the warm-up settled it).
        let ((trainer, settled), span, _) = self.rec.span(false, || {
            let trainer = params.build();
            let settled = if trainer.is_ok() { probe.params_built() } else { Ok(()) };
            (trainer, settled)
        });
        let trainer = in_phase(Phase::Build, trainer)?;
        settled.map_err(|e| (Phase::Build, source_error(e)))?;
        self.m.param_elems = trainer.param_elems();
        self.m.param_tensors = trainer.param_tensors();
        record_params(self.m, &trainer, span.retained());

        self.begin(Phase::Batch)?;
        let (batch, span, _) = self.rec.span(false, || trainer.batch());
        let batch = in_phase(Phase::Batch, batch)?;
        self.m.batch_bytes = span.retained().max(0) as u64;
        Ok((trainer, batch))
    }

    /// Forward, backward and the first optimizer step, each measured on its
    /// own; gradients count from the live bytes before the forward, the
    /// optimizer's state from what its step left. Returns the higher of
    /// backward's and the optimizer's peaks, and whether the adapter
    /// counts the optimizer's state itself (see [`Profile::complete_state`]).
    fn first_step<T: Train>(&mut self, trainer: &mut T, batch: &T::Batch) -> PhaseResult<(u64, bool)> {
        let rec = self.rec;
        let probe = rec.probe();
        // Forward with gradients: what stays live is what backward will need.
        self.begin(Phase::Forward)?;
        // (A checkpointed model keeps its blocks' inputs and output leaves, not their graphs.)
        let (training, fwd, blocks) = self.rec.span(true, || trainer.forward(batch));
        let training = in_phase(Phase::Forward, training)?;
        self.m.values.insert(Metric::Activations, fwd.retained().max(0) as f64);
        self.m.blocks = blocks;

        self.begin(Phase::Backward)?;
        // Listed here, so the list counts with the gradients.
        trainer.list_vars();
        self.m
            .losses
            .push(finite_loss(Phase::Backward, trainer.loss_value(&training))?);
        let (grads, span, _) = self.rec.span(false, || trainer.backward(training, batch));
        let mut grads = in_phase(Phase::Backward, grads)?;
        let peak = span.peak;
        // The graph is gone; what is left above the pre-forward level is the gradient store.
        probe.sync();
        self.m.unpruned_gradient_bytes = probe.live().saturating_sub(fwd.live_before);
        in_phase(Phase::Backward, trainer.prune(&mut grads))?;
        probe.sync();
        let live_gradients = probe.live().saturating_sub(fwd.live_before);
        self.m.gradient_live_bytes = Some(live_gradients);
        // The gradient store's bytes where the adapter can count them.
        let gradients = trainer.gradient_bytes(&grads).unwrap_or(live_gradients);
        self.m.values.insert(Metric::Gradients, gradients as f64);
        // Which parameters this step trains.
        self.m.gradient_coverage = trainer.gradient_coverage(&grads);

        // AdamW is made in the span: its state is allocated by its first
        // step. What the span leaves is the optimizer, and nothing of the
        // runner's own (its list of the variables, the figures, the blocks).
        self.begin(Phase::Optimizer)?;
        let (updated, span, _) = self.rec.span(false, || trainer.update(&grads));
        in_phase(Phase::Optimizer, updated)?;
        let peak = peak.max(span.peak);
        let made = span.retained().max(0) as u64;
        // Less the optimizer's own bookkeeping (its list of the variables,
        // each state tensor's header), where the probe counts every heap
        // byte: what the same optimizer keeps over stand-ins of 1 and of 2
        // elements a variable, extrapolated to none.
        let mut kept = [0u64; 2];
        for (elements, kept) in (1..).zip(kept.iter_mut()) {
            let Some(mut stand_in) = in_phase(Phase::Optimizer, trainer.stand_in_optimizer(&grads, elements))? else {
                break;
            };
            let (made, span, _) = self.rec.span(false, || stand_in.make());
            in_phase(Phase::Optimizer, made)?;
            *kept = span.retained().max(0) as u64;
        }
        let bookkeeping = (2 * kept[0]).saturating_sub(kept[1]);
        drop(grads);
        probe.sync();
        let after_update = probe.live();
        // What the model keeps from its forward (a KV cache left full) is
        // its own figure: emptied here, what that frees is `model_state`.
        let keeps_state = in_phase(Phase::Optimizer, trainer.clear_state())?;
        probe.sync();
        let cleared = probe.live();
        if keeps_state {
            self.m
                .values
                .insert(Metric::ModelState, after_update.saturating_sub(cleared) as f64);
        }
        // The state's own tensors where the adapter counts them: read after
        // the live bytes, so what counting them allocates is in no figure.
        let counted = trainer.optimizer_bytes();
        let optimizer = counted.unwrap_or(made.saturating_sub(bookkeeping));
        self.m.values.insert(Metric::Optimizer, optimizer as f64);
        in_phase(Phase::Optimizer, trainer.after_step())?;
        // A state the adapter counts whole may not be whole in memory yet
        // (AMSGrad's running maximum shares the second moment's buffer at
        // the first step): see `complete_state`.
        Ok((peak, counted.is_some()))
    }

    /// Where the adapter counts the optimizer's state whole (its tensors
    /// may share a buffer at the first step and part at a later one:
    /// burn's AMSGrad keeps its running maximum in the second moment's
    /// buffer until its second step), further steps until one leaves the
    /// live bytes no higher than it found them, at most
    /// [`MAX_STATE_STEPS`]: their peaks count in `training_peak`, so the
    /// peak is read with the state whole (burn's is in the backward, the
    /// step after the parting), and the parting is no `growth`. None where
    /// the live bytes are the figure (candle): its state is whole after
    /// its first step.
    fn complete_state<T: Train>(
        &mut self,
        trainer: &mut T,
        batch: &T::Batch,
        counted: bool,
        mut peak: u64,
    ) -> PhaseResult<u64> {
        if !counted {
            return Ok(peak);
        }
        let probe = self.rec.probe();
        let phase = Phase::TrainingStep;
        for _ in 0..MAX_STATE_STEPS {
            probe.sync();
            let before = probe.live();
            let (loss, span, _) = self.rec.span(false, || train_step(trainer, batch, phase));
            self.m.losses.push(loss?);
            in_phase(phase, trainer.after_step())?;
            peak = peak.max(span.peak);
            probe.sync();
            if probe.live() <= before {
                break;
            }
        }
        Ok(peak)
    }

    /// A steady step: parameters, optimizer state and batch resident. It
    /// takes the turn to time steps, which [`Profile::timed_steps`] gives back.
    fn steady_step<T: Train>(
        &mut self,
        trainer: &mut T,
        batch: &T::Batch,
        timing: Timing,
        base: u64,
        first_peak: u64,
    ) -> PhaseResult<Turn> {
        let rec = self.rec;
        let probe = rec.probe();
        self.begin(Phase::TrainingStep)?;
        // Step 0 above was the timing's first warm-up step, so this steady step
        // is timed too (unless more warm-up was asked for): one measurement
        // serves both the peak and the first timed sample. Timed steps of
        // profiles running side by side take turns (see `timing_lock`).
        let waited = Instant::now();
        let turn = crate::timing_lock::acquire();
        // Taking a free lock is microseconds: only a real wait is recorded.
        let waited = waited.elapsed().as_secs_f64();
        if waited >= 0.01 {
            self.m.turn_wait_seconds += waited;
        }
        let extra_warmup = timing.warmup.saturating_sub(1);
        // The memory timeline samples this step and the first inference call.
        let (timed, span, _) = self.rec.span_sampled(self.sampler, false, || {
            mark("forward");
            let t = Instant::now();
            let loss = train_step(trainer, batch, Phase::TrainingStep);
            probe.sync();
            loss.map(|l| (l, t.elapsed().as_secs_f64() * 1e3))
        });
        let (loss, ms) = timed?;
        self.m.losses.push(loss);
        record_time(self.m, extra_warmup, 0, ms);
        in_phase(Phase::TrainingStep, trainer.after_step())?;
        let peak = span.peak.max(first_peak);
        self.m
            .values
            .insert(Metric::TrainingPeak, peak.saturating_sub(base) as f64);
        // The device's own view right after the peak step (the pool keeps its reservation).
        if let Some(used) = probe.device_used() {
            self.m.values.insert(Metric::DeviceUsed, used as f64);
        }
        self.m.context_reserve_bytes = probe.context_bytes();
        self.m.pool_reserved_peak_bytes = probe.pool_reserved_peak();
        Ok(turn)
    }

    /// The remaining warm-up and timed steps (`timing`), the growth over
    /// them, the step time and the final loss.
    fn timed_steps<T: Train>(
        &mut self,
        trainer: &mut T,
        batch: &T::Batch,
        timing: Timing,
        turn: Turn,
    ) -> PhaseResult<()> {
        let rec = self.rec;
        let probe = rec.probe();
        self.begin(Phase::Timing)?;
        let extra_warmup = timing.warmup.saturating_sub(1);
        // The first step and the steady step ran before.
        let rest = profile_steps(timing) - 2;
        // Growth: what the steady state holds now, against what it holds after
        // the remaining steps. The figures' own vectors grow meanwhile: reserve.
        self.m.losses.reserve(rest + 2);
        self.m.step_times_ms.reserve(rest + 2);
        probe.sync();
        let steady_live = probe.live();
        // Steps 0 and 1 ran before; the rest of the warm-up and timed steps follow.
        for i in 1..=rest {
            if fault::leaking() {
                in_phase(Phase::Timing, trainer.leak(batch))?;
            }
            let t = Instant::now();
            let loss = train_step(trainer, batch, Phase::Timing)?;
            probe.sync();
            record_time(self.m, extra_warmup, i, t.elapsed().as_secs_f64() * 1e3);
            self.m.losses.push(loss);
            in_phase(Phase::Timing, trainer.after_step())?;
        }
        drop(turn);
        if rest > 0 {
            probe.sync();
            self.m.growth_training_bytes = Some(probe.live().saturating_sub(steady_live));
        }
        if !self.m.step_times_ms.is_empty() {
            self.m.values.insert(Metric::StepTime, median(&self.m.step_times_ms));
        }
        // The loss after the seeded steps, without dropout.
        let final_loss = finite_loss(Phase::Timing, trainer.eval_loss(batch))?;
        self.m.values.insert(Metric::Loss, final_loss);
        Ok(())
    }

    /// Inference: weights as plain tensors (no graph), optimizer state gone.
    fn inference<T: Train>(&mut self, trainer: &mut T, batch: &T::Batch, base: u64) -> PhaseResult<()> {
        let rec = self.rec;
        let probe = rec.probe();
        self.begin(Phase::Inference)?;
        trainer.drop_optimizer();
        // Inference runs without the training model beside it: what that
        // holds beside the weights would otherwise count twice.
        trainer.drop_training_model();
        let infer = in_phase(Phase::Inference, trainer.inference_model())?;
        let (pred, span, _) = self.rec.span_sampled(self.sampler, false, || {
            mark("inference");
            trainer.predict(&infer, batch)
        });
        drop(in_phase(Phase::Inference, pred)?);
        self.m
            .values
            .insert(Metric::InferencePeak, span.peak.saturating_sub(base) as f64);
        // Growth over inference calls: a model that keeps something per call
        // (a cache that is never cleared) runs out of memory in production.
        probe.sync();
        let first = probe.live();
        for _ in 0..INFERENCE_GROWTH_CALLS {
            if fault::leaking() {
                in_phase(Phase::Inference, trainer.leak(batch))?;
            }
            drop(in_phase(Phase::Inference, trainer.predict(&infer, batch))?);
        }
        probe.sync();
        let inference_growth = probe.live().saturating_sub(first);
        self.m.growth_inference_bytes = Some(inference_growth);
        let growth = self.m.growth_training_bytes.unwrap_or(0).max(inference_growth);
        self.m.values.insert(Metric::Growth, growth as f64);
        Ok(())
    }
}

/// Keeps a step's time once the extra warm-up steps are past (step `i`
/// counts from the steady step, 0).
fn record_time(m: &mut Measurement, extra_warmup: usize, i: usize, ms: f64) {
    if i >= extra_warmup {
        m.step_times_ms.push(ms);
    }
}

/// `params`: the record's tensor bytes where the adapter counts them (the
/// live bytes the build left kept beside them), else those live bytes.
pub(super) fn record_params<T: Train>(m: &mut Measurement, trainer: &T, retained: i64) {
    let live = retained.max(0) as u64;
    let params = match trainer.param_bytes() {
        Some(bytes) => {
            m.param_live_bytes = Some(live);
            bytes
        }
        None => live,
    };
    m.values.insert(Metric::Params, params as f64);
}

/// Steps after the first that may complete an optimizer's state (burn's
/// AMSGrad: its running maximum parts from the second moment at the
/// second step, and the third step's backward holds all three).
const MAX_STATE_STEPS: usize = 3;

/// Inference calls after the first whose growth is measured.
const INFERENCE_GROWTH_CALLS: usize = 2;

/// A throwaway training step and inference call (see [`Profile::warm_up`]).
fn throwaway_run<S: Session>(session: &S) -> PhaseResult<()> {
    let w = Phase::Warmup;
    let mut trainer = in_phase(w, session.trainer())?;
    let batch = in_phase(w, trainer.batch())?;
    train_step(&mut trainer, &batch, w)?;
    let infer = in_phase(w, trainer.inference_model())?;
    drop(in_phase(w, trainer.predict(&infer, &batch))?);
    Ok(())
}

#[cfg(test)]
mod tests {
    //! The profile and a probe that can only tell where the bytes come
    //! from once the parameters exist (the CUDA probe's case), on a toy
    //! session whose "device" is a byte counter.

    use std::cell::Cell;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::{Arc, Mutex};

    use super::super::profile;
    use super::*;
    use crate::adapter::{Analytic, Error, Result, StandInOptimizer};
    use gate_probe::Recorder;
    use gate_probe::{BackendError, MemoryProbe, MemorySource};

    const PARAMS: u64 = 4096;
    /// A library workspace the first forward allocates and keeps (cuBLAS's).
    const WORKSPACE: u64 = 1024;

    /// The toy device: bytes its tensors hold, and whether the workspace is made.
    #[derive(Default)]
    struct Device {
        bytes: AtomicU64,
        workspace: AtomicBool,
    }

    /// A toy tensor of `n` bytes on the device.
    struct Buf(Arc<Device>, u64);

    impl Buf {
        fn new(d: &Arc<Device>, n: u64) -> Buf {
            d.bytes.fetch_add(n, Ordering::SeqCst);
            Buf(d.clone(), n)
        }
    }

    impl Drop for Buf {
        fn drop(&mut self) {
            self.0.bytes.fetch_sub(self.1, Ordering::SeqCst);
        }
    }

    /// A probe of a framework that does not allocate from the pool: the
    /// pool reads 0, the process's growth is its tensors and the workspace.
    struct NoPoolProbe {
        device: Arc<Device>,
        switched: Mutex<Option<MemorySource>>,
        high: AtomicU64,
        told: AtomicU64,
        fail: AtomicBool,
    }

    impl NoPoolProbe {
        fn new(device: &Arc<Device>) -> Self {
            NoPoolProbe {
                device: device.clone(),
                switched: Mutex::new(None),
                high: AtomicU64::new(0),
                told: AtomicU64::new(0),
                fail: AtomicBool::new(false),
            }
        }
        fn nvml(&self) -> bool {
            *self.switched.lock().unwrap() == Some(MemorySource::NvmlProcess)
        }
        fn process(&self) -> u64 {
            self.device.bytes.load(Ordering::SeqCst)
        }
    }

    impl MemoryProbe for NoPoolProbe {
        fn backend(&self) -> &'static str {
            "cuda"
        }
        fn live(&self) -> u64 {
            if !self.nvml() {
                return 0; // the empty pool
            }
            let v = self.process();
            self.high.fetch_max(v, Ordering::SeqCst);
            v
        }
        fn peak(&self) -> u64 {
            if self.nvml() {
                self.high.load(Ordering::SeqCst).max(self.live())
            } else {
                0
            }
        }
        fn reset_peak(&self) {
            self.high
                .store(if self.nvml() { self.process() } else { 0 }, Ordering::SeqCst);
        }
        fn memory_source(&self) -> MemorySource {
            self.switched.lock().unwrap().unwrap_or(MemorySource::CudaPool)
        }
        fn params_built(&self) -> std::result::Result<(), BackendError> {
            self.told.fetch_add(1, Ordering::SeqCst);
            if self.fail.load(Ordering::SeqCst) {
                return Err(BackendError::new("no byte figure can be measured").with_hint("check `nvidia-smi`"));
            }
            if self.device.bytes.load(Ordering::SeqCst) > 0 {
                *self.switched.lock().unwrap() = Some(MemorySource::NvmlProcess);
            }
            Ok(())
        }
    }

    struct Toy {
        device: Arc<Device>,
        /// Builds that fail before the next one succeeds (a warm-up that runs out).
        failing_builds: Cell<usize>,
        /// Models built so far.
        builds: Cell<usize>,
        /// A table each model's build makes beside its parameters (a rope table).
        table: u64,
        /// A cache each forward leaves full, emptied by `clear_state`.
        cache: u64,
        /// The optimizer state as the adapter counts it (`optimizer_bytes`).
        counted: Option<u64>,
        /// AMSGrad's running maximum: a third buffer of the parameters'
        /// size that parts from the second moment at the second step.
        amsgrad: bool,
        /// What the optimizer keeps beside its state's data (its list of
        /// the variables); made again over stand-ins by
        /// `stand_in_optimizer` where it is not 0.
        books: u64,
    }

    struct Params<'s>(&'s Toy);

    impl<'s> Unbuilt for Params<'s> {
        type Trainer = Trainer;
        fn build(self) -> Result<Trainer> {
            if self.0.failing_builds.get() > 0 {
                self.0.failing_builds.set(self.0.failing_builds.get() - 1);
                return Err(Error::msg("out of memory"));
            }
            self.0.builds.set(self.0.builds.get() + 1);
            Ok(Trainer {
                device: self.0.device.clone(),
                _params: Buf::new(&self.0.device, PARAMS),
                optimizer: None,
                model: Some(Model {
                    _table: Buf::new(&self.0.device, self.0.table),
                    cache: None.into(),
                }),
                cache: self.0.cache,
                table: self.0.table,
                counted: self.0.counted,
                amsgrad: self.0.amsgrad,
                books: self.0.books,
                updates: 0,
                maximum: None,
            })
        }
    }

    struct Trainer {
        device: Arc<Device>,
        _params: Buf,
        optimizer: Option<Buf>,
        /// The training model: its table and the cache its forward keeps.
        model: Option<Model>,
        cache: u64,
        table: u64,
        counted: Option<u64>,
        amsgrad: bool,
        books: u64,
        updates: usize,
        maximum: Option<Buf>,
    }

    struct Model {
        _table: Buf,
        cache: std::cell::RefCell<Option<Buf>>,
    }

    impl Train for Trainer {
        type Batch = Buf;
        type Forward<'t> = Buf;
        type Grads = Buf;
        type Inference = Buf;
        type Prediction = Buf;
        fn param_elems(&self) -> u64 {
            PARAMS / 4
        }
        fn batch(&self) -> Result<Buf> {
            Ok(Buf::new(&self.device, 64))
        }
        fn forward(&self, _: &Buf) -> Result<Buf> {
            if !self.device.workspace.swap(true, Ordering::SeqCst) {
                std::mem::forget(Buf::new(&self.device, WORKSPACE));
            }
            if let Some(m) = &self.model {
                *m.cache.borrow_mut() = None;
                *m.cache.borrow_mut() = Some(Buf::new(&self.device, self.cache));
            }
            Ok(Buf::new(&self.device, 256))
        }
        fn loss_value(&self, _: &Buf) -> Result<f64> {
            Ok(1.0)
        }
        fn list_vars(&self) {}
        fn backward(&self, _: Buf, _: &Buf) -> Result<Buf> {
            Ok(Buf::new(&self.device, PARAMS))
        }
        fn prune(&self, _: &mut Buf) -> Result<()> {
            Ok(())
        }
        fn update(&mut self, _: &Buf) -> Result<()> {
            if self.optimizer.is_none() {
                self.optimizer = Some(Buf::new(&self.device, 2 * PARAMS + self.books));
            }
            self.updates += 1;
            if self.amsgrad && self.updates == 2 {
                self.maximum = Some(Buf::new(&self.device, PARAMS));
            }
            Ok(())
        }
        fn after_step(&mut self) -> Result<()> {
            Ok(())
        }
        fn eval_loss(&self, _: &Buf) -> Result<f64> {
            Ok(1.0)
        }
        fn drop_optimizer(&mut self) {
            self.optimizer = None;
            self.maximum = None;
        }
        fn optimizer_bytes(&self) -> Option<u64> {
            self.counted
        }
        fn clear_state(&mut self) -> Result<bool> {
            if let Some(m) = &self.model {
                *m.cache.borrow_mut() = None;
            }
            Ok(self.cache > 0)
        }
        fn drop_training_model(&mut self) {
            self.model = None;
        }
        fn stand_in_optimizer<'t>(
            &'t self,
            _: &'t Buf,
            elements: usize,
        ) -> Result<Option<Box<dyn StandInOptimizer + 't>>> {
            Ok((self.books > 0).then(|| {
                Box::new(StandIn {
                    device: self.device.clone(),
                    bytes: self.books + 2 * 4 * elements as u64,
                    made: None,
                }) as Box<dyn StandInOptimizer>
            }))
        }
        fn inference_model(&self) -> Result<Buf> {
            // Its own table, as a second model built over the weights makes.
            Ok(Buf::new(&self.device, self.table))
        }
        fn predict(&self, _: &Buf, _: &Buf) -> Result<Buf> {
            Ok(Buf::new(&self.device, 32))
        }
        fn leak(&self, _: &Buf) -> Result<()> {
            Ok(())
        }
    }

    /// The toy optimizer over stand-ins: its bookkeeping, and two moments
    /// of the stand-ins' f32 elements.
    struct StandIn {
        device: Arc<Device>,
        bytes: u64,
        made: Option<Buf>,
    }

    impl StandInOptimizer for StandIn {
        fn make(&mut self) -> Result<()> {
            self.made = Some(Buf::new(&self.device, self.bytes));
            Ok(())
        }
    }

    impl Session for Toy {
        type Params<'s> = Params<'s>;
        type Trainer<'s> = Trainer;
        fn analytic(&self) -> Analytic {
            Analytic {
                param_bytes: PARAMS,
                frozen_elems: 0,
            }
        }
        fn params(&self) -> Params<'_> {
            Params(self)
        }
    }

    fn run_toy(failing_builds: usize, fail: bool) -> (Measurement, Arc<NoPoolProbe>) {
        let device = Arc::new(Device::default());
        let probe = Arc::new(NoPoolProbe::new(&device));
        probe.fail.store(fail, Ordering::SeqCst);
        let toy = Toy {
            device,
            failing_builds: Cell::new(failing_builds),
            builds: Cell::new(0),
            table: 0,
            cache: 0,
            counted: None,
            amsgrad: false,
            books: 0,
        };
        let recorder = Recorder::new(probe.clone());
        let m = profile(&toy, None, Timing::default(), &recorder, &mut |_, _| {});
        (m, probe)
    }

    #[test]
    fn a_warm_up_settles_the_source_before_the_baseline_and_figures_are_nvmls() {
        let (m, probe) = run_toy(0, false);
        assert_eq!(m.failure, None);
        assert_eq!(m.memory_source, Some(MemorySource::NvmlProcess));
        // Told after the warm-up; the build's call then changes nothing.
        assert_eq!(probe.told.load(Ordering::SeqCst), 2);
        // Read from NVML from the baseline on: the parameters' bytes, not a silent 0.
        assert_eq!(m.values[&Metric::Params], PARAMS as f64);
        assert_eq!(m.values[&Metric::Optimizer], (2 * PARAMS) as f64);
        assert_eq!(m.values[&Metric::Activations], 256.0);
        // A model that keeps nothing has no such figure.
        assert!(!m.values.contains_key(&Metric::ModelState));
    }

    #[test]
    fn the_warm_up_runs_on_its_own_session_and_every_measured_phase_on_the_profiles() {
        let device = Arc::new(Device::default());
        let probe = Arc::new(NoPoolProbe::new(&device));
        let toy = |device: &Arc<Device>| Toy {
            device: device.clone(),
            failing_builds: Cell::new(0),
            builds: Cell::new(0),
            table: 0,
            cache: 0,
            counted: None,
            amsgrad: false,
            books: 0,
        };
        // The adapter's smaller warm-up (`Framework::warm_up_batch`) on the same device.
        let (measured, warm) = (toy(&device), toy(&device));
        let m = profile(
            &measured,
            Some(&warm),
            Timing::default(),
            &Recorder::new(probe),
            &mut |_, _| {},
        );
        assert_eq!(m.failure, None);
        assert_eq!((warm.builds.get(), measured.builds.get()), (1, 1));
        // The workspace the warm-up's forward made stays out of every figure.
        assert_eq!(m.values[&Metric::Activations], 256.0);
        assert_eq!(m.values[&Metric::Params], PARAMS as f64);
    }

    #[test]
    fn a_failed_warm_up_settles_the_source_inside_the_build_span() {
        let (m, probe) = run_toy(1, false);
        assert!(m.warmup_error.is_some());
        assert_eq!(m.memory_source, Some(MemorySource::NvmlProcess));
        assert_eq!(probe.told.load(Ordering::SeqCst), 1);
        // The span began on the empty pool and ended on NVML, whose figures
        // count from the same zero: the parameters, never a silent 0.
        assert_eq!(m.values[&Metric::Params], PARAMS as f64);
        // The workspace the first forward made is in the activations' figure.
        assert_eq!(m.values[&Metric::Activations], (256 + WORKSPACE) as f64);
    }

    #[test]
    fn a_probe_that_cannot_measure_fails_the_profile_with_its_hint() {
        let (m, _) = run_toy(0, true);
        let failure = m.failure.expect("the profile must fail");
        assert_eq!(failure.phase, Phase::Warmup);
        assert_eq!(
            failure.reason,
            "no byte figure can be measured (hint: check `nvidia-smi`)"
        );
        assert!(!m.values.contains_key(&Metric::Params));
    }

    #[test]
    fn the_cpu_probe_reports_its_allocator() {
        struct Counting;
        impl MemoryProbe for Counting {
            fn backend(&self) -> &'static str {
                "cpu"
            }
            fn live(&self) -> u64 {
                0
            }
            fn peak(&self) -> u64 {
                0
            }
            fn reset_peak(&self) {}
        }
        let toy = Toy {
            device: Arc::new(Device::default()),
            failing_builds: Cell::new(0),
            builds: Cell::new(0),
            table: 0,
            cache: 0,
            counted: None,
            amsgrad: false,
            books: 0,
        };
        let m = profile(
            &toy,
            None,
            Timing::default(),
            &Recorder::new(Arc::new(Counting)),
            &mut |_, _| {},
        );
        assert_eq!(m.memory_source, Some(MemorySource::Allocator));
    }

    #[test]
    fn a_cache_the_model_keeps_is_model_state_and_inference_counts_its_own_table_once() {
        const TABLE: u64 = 512;
        const CACHE: u64 = 768;
        let device = Arc::new(Device::default());
        let probe = Arc::new(NoPoolProbe::new(&device));
        let toy = Toy {
            device,
            failing_builds: Cell::new(0),
            builds: Cell::new(0),
            table: TABLE,
            cache: CACHE,
            counted: None,
            amsgrad: false,
            books: 0,
        };
        let m = profile(&toy, None, Timing::default(), &Recorder::new(probe), &mut |_, _| {});
        assert_eq!(m.failure, None);
        // The optimizer's two moments, not the cache the forward left full.
        assert_eq!(m.values[&Metric::Optimizer], (2 * PARAMS) as f64);
        assert_eq!(m.values[&Metric::ModelState], CACHE as f64);
        // Parameters, the batch, the inference model's table and one
        // prediction: the training model's table and cache are gone.
        assert_eq!(m.values[&Metric::InferencePeak], (PARAMS + 64 + TABLE + 32) as f64);
    }

    /// AMSGrad's running maximum starts as the second moment itself (one
    /// buffer at the first step) and parts from it later: the live bytes
    /// after the first step say two moments, the state holds three.
    #[test]
    fn the_optimizer_state_the_adapter_counts_is_the_figure_not_the_first_steps_live_bytes() {
        let device = Arc::new(Device::default());
        let probe = Arc::new(NoPoolProbe::new(&device));
        let toy = Toy {
            device,
            failing_builds: Cell::new(0),
            builds: Cell::new(0),
            table: 0,
            cache: 0,
            counted: Some(3 * PARAMS),
            amsgrad: false,
            books: 0,
        };
        let m = profile(&toy, None, Timing::default(), &Recorder::new(probe), &mut |_, _| {});
        assert_eq!(m.failure, None);
        assert_eq!(m.values[&Metric::Optimizer], (3 * PARAMS) as f64);
    }

    fn toy_with(amsgrad: bool, counted: Option<u64>, books: u64) -> Measurement {
        let device = Arc::new(Device::default());
        let probe = Arc::new(NoPoolProbe::new(&device));
        let toy = Toy {
            device,
            failing_builds: Cell::new(0),
            builds: Cell::new(0),
            table: 0,
            cache: 0,
            counted,
            amsgrad,
            books,
        };
        let m = profile(&toy, None, Timing::default(), &Recorder::new(probe), &mut |_, _| {});
        assert_eq!(m.failure, None);
        m
    }

    /// AMSGrad's third buffer parts from the second moment at the second
    /// step: the training peak is read once it exists (one buffer of the
    /// parameters' size above the same model's with Adam), and its parting
    /// is not `growth`.
    #[test]
    fn the_training_peak_is_read_once_the_optimizer_state_is_complete() {
        let adam = toy_with(false, None, 0);
        let amsgrad = toy_with(true, Some(3 * PARAMS), 0);
        assert_eq!(amsgrad.values[&Metric::Optimizer], (3 * PARAMS) as f64);
        assert_eq!(
            amsgrad.values[&Metric::TrainingPeak] - adam.values[&Metric::TrainingPeak],
            PARAMS as f64
        );
        assert_eq!(amsgrad.values[&Metric::Growth], 0.0);
        // The steps that completed it are trained and their losses kept.
        assert_eq!(amsgrad.losses.len(), adam.losses.len() + 2);
    }

    /// What the optimizer keeps beside its state's data (its list of the
    /// variables, each state tensor's header) is told from what the same
    /// optimizer keeps over stand-ins of 1 and 2 elements: subtracted,
    /// `optimizer` is the data to the byte.
    #[test]
    fn the_optimizers_own_bookkeeping_is_not_its_state() {
        let m = toy_with(false, None, 40);
        assert_eq!(m.values[&Metric::Optimizer], (2 * PARAMS) as f64);
    }
}
