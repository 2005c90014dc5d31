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
    // gate's own record of the steps' losses and times, whole before the
    // baseline is read: grown step by step, it was counted with the model
    // (a small TFT's training peak 32 B high, its inference peak 64 B at 1
    // timed step, 128 B at 3 and 184 B at 9).
    let steps = profile_steps(timing);
    p.m.losses.reserve_exact(steps + MAX_STATE_STEPS);
    p.m.step_times_ms.reserve_exact(steps);
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
            // Beside any buffers the adapter counted at the build.
            *self.m.values.entry(Metric::ModelState).or_insert(0.0) += after_update.saturating_sub(cleared) as f64;
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
    /// may share a buffer at the first step and part at a later one: an
    /// AMSGrad that keeps its running maximum in the second moment's
    /// buffer until its second step), further steps until one leaves the
    /// live bytes no higher than it found them, at most
    /// [`MAX_STATE_STEPS`]: their peaks count in `training_peak`, so the
    /// peak is read with the state whole (in the backward of the step
    /// after the parting), and the parting is no `growth`. None where the
    /// live bytes are the figure: that state is whole after its first
    /// step.
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
        // the remaining steps (the figures' own vectors were reserved whole
        // before the baseline, in `run`).
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
/// live bytes the build left kept beside them), else those live bytes;
/// `model_state`: the buffers, where the adapter tells them apart.
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
    if let Some(buffers) = trainer.buffer_bytes() {
        m.values.insert(Metric::ModelState, buffers as f64);
        // The team's closed form counts them as its framework's own count
        // of parameters does (every tensor of the record); `params` does not.
        m.analytic_params_bytes = m.analytic_params_bytes.saturating_sub(buffers);
    }
}

/// Steps after the first that may complete an optimizer's state (an
/// AMSGrad whose running maximum parts from the second moment at the
/// second step: the third step's backward holds all three).
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
mod tests;
