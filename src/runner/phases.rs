//! One component's profile, in process: build, batch, forward, backward,
//! optimizer, a steady training step, timing, inference. Each phase's bytes
//! come from the probe through a [`Recorder`] span. A failing phase stops the
//! profile; figures measured before it are kept.

use std::time::Instant;

use candle_core::backprop::GradStore;
use candle_core::{Tensor, Var};
use candle_nn::optim::{AdamW, Optimizer, ParamsAdamW};

use super::measurement::{Failure, Measurement, Phase};
use crate::metric::Metric;
use crate::probe::{mark, Recorder, Sampler};
use crate::sdk::{prune_grads, DynWorkload, ParamStore, RunCtx, Step};

pub use crate::budget::Timing;

/// Profiles `workload`, reporting each phase and the figures so far to
/// `on_phase` before the phase starts (the child process forwards these, so
/// a crash can be placed and earlier figures survive it).
pub fn profile(
    workload: &dyn DynWorkload,
    ctx: &RunCtx,
    timing: Timing,
    recorder: &Recorder,
    on_phase: &mut dyn FnMut(Phase, &Measurement),
) -> Measurement {
    let mut m = Measurement::default();
    // Made (with all its room) before the baseline is read, so its own
    // bytes are part of the baseline and never of a figure.
    let mut sampler = Sampler::new();
    if let Err((phase, err)) = run(workload, ctx, timing, recorder, on_phase, &mut sampler, &mut m) {
        m.failure = Some(Failure {
            phase,
            reason: first_line(&err.to_string()),
        });
    }
    // Also after a failure: the samples up to it show where the memory went.
    m.timeline = sampler.finish(recorder.probe().backend());
    m
}

type PhaseResult<T> = Result<T, (Phase, candle_core::Error)>;

/// Announces `phase` with the figures so far and applies any injected fault (see `fault`).
fn begin(on_phase: &mut dyn FnMut(Phase, &Measurement), m: &Measurement, phase: Phase) -> PhaseResult<()> {
    on_phase(phase, m);
    at(phase, super::fault::at(phase))
}

fn at<T>(phase: Phase, r: candle_core::Result<T>) -> PhaseResult<T> {
    r.map_err(|e| (phase, e))
}

fn finite_loss(phase: Phase, loss: &Tensor) -> PhaseResult<f64> {
    let v = at(
        phase,
        loss.to_dtype(candle_core::DType::F64)
            .and_then(|l| l.to_scalar::<f64>()),
    )?;
    let v = super::fault::loss(v); // an injected `nan`/`inf` (tests only)
    if !v.is_finite() {
        return Err((
            phase,
            candle_core::Error::Msg(format!("the loss is {v}, not a finite number")),
        ));
    }
    Ok(v)
}

fn train_step(
    model: &dyn crate::sdk::Model,
    batch: &crate::sdk::Batch,
    vars: &[Var],
    opt: &mut AdamW,
    seed: u64,
    phase: Phase,
) -> PhaseResult<f64> {
    let fwd = at(phase, model.forward_train(batch, &Step::train(seed)))?;
    let value = finite_loss(phase, fwd.loss())?;
    // Timeline marks (no-ops unless the step is sampled).
    mark("backward");
    let mut grads = at(phase, fwd.backward(vars))?;
    at(phase, prune_grads(&mut grads, vars))?;
    mark("optimizer");
    at(phase, opt.step(&grads))?;
    Ok(value)
}

fn run(
    workload: &dyn DynWorkload,
    ctx: &RunCtx,
    timing: Timing,
    rec: &Recorder,
    on_phase: &mut dyn FnMut(Phase, &Measurement),
    sampler: &mut Sampler,
    m: &mut Measurement,
) -> PhaseResult<()> {
    let probe = rec.probe().clone();
    // Warm up on a throwaway copy: thread pools and the CPU matmul kernels'
    // per-thread scratch buffers are allocated once and kept, and would
    // otherwise land in whichever phase first needs them.
    // A model too big for the (emulated) card fails here first; then go on
    // without the warm-up, so the failure is placed in the phase that really
    // runs out and the figures before it are still measured.
    begin(on_phase, m, Phase::Warmup)?;
    if let Err((_, e)) = warm_up(workload, ctx) {
        m.warmup_error = Some(first_line(&e.to_string()));
    }
    probe.sync();
    let base = probe.live();
    sampler.set_base(base);
    // With master weights the model holds the masters and their casts.
    let dsize = (ctx.dtype.size_in_bytes() + ctx.master_dtype.map_or(0, |d| d.size_in_bytes())) as u64;
    let count = workload.param_count();
    m.analytic_params_bytes = (count.trainable + count.frozen) * dsize;
    m.frozen_elems = count.frozen;

    begin(on_phase, m, Phase::Build)?;
    let store = ParamStore::with_master(ctx.seed, ctx.master_dtype);
    let (model, span, _) = rec.span(false, || workload.build(store.builder(ctx.dtype, &ctx.device), ctx));
    let mut model = at(Phase::Build, model)?;
    m.param_elems = store.elem_count();
    m.values.insert(Metric::Params, span.retained().max(0) as f64);

    begin(on_phase, m, Phase::Batch)?;
    let (batch, span, _) = rec.span(false, || workload.batch(ctx, ctx.seed ^ 0xBA7C));
    let batch = at(Phase::Batch, batch)?;
    m.batch_bytes = span.retained().max(0) as u64;

    // Forward with gradients: what stays live is what backward will need.
    begin(on_phase, m, Phase::Forward)?;
    // (A checkpointed model keeps its blocks' inputs and output leaves, not their graphs.)
    let (training, fwd, blocks) = rec.span(true, || model.forward_train(&batch, &Step::train(ctx.seed)));
    let training = at(Phase::Forward, training)?;
    m.values.insert(Metric::Activations, fwd.retained().max(0) as f64);
    m.blocks = blocks;

    begin(on_phase, m, Phase::Backward)?;
    let vars = store.vars();
    m.losses.push(finite_loss(Phase::Backward, training.loss())?);
    let (grads, span, _) = rec.span(false, || -> candle_core::Result<GradStore> { training.backward(&vars) });
    let mut grads = at(Phase::Backward, grads)?;
    let peak_first_step = span.peak;
    // The graph is gone; what is left above the pre-forward level is the gradient store.
    probe.sync();
    m.unpruned_gradient_bytes = probe.live().saturating_sub(fwd.live_before);
    at(Phase::Backward, prune_grads(&mut grads, &vars))?;
    probe.sync();
    m.values
        .insert(Metric::Gradients, probe.live().saturating_sub(fwd.live_before) as f64);

    begin(on_phase, m, Phase::Optimizer)?;
    let params = ParamsAdamW {
        lr: workload.learning_rate(),
        ..Default::default()
    };
    let (opt, span, _) = rec.span(false, || -> candle_core::Result<AdamW> {
        let mut opt = AdamW::new(vars.clone(), params)?;
        opt.step(&grads)?;
        Ok(opt)
    });
    let mut opt = at(Phase::Optimizer, opt)?;
    let peak_first_step = peak_first_step.max(span.peak);
    drop(grads);
    probe.sync();
    m.values
        .insert(Metric::Optimizer, probe.live().saturating_sub(fwd.live_before) as f64);
    at(Phase::Optimizer, model.after_step(0))?;
    recast(&mut model, workload, &store, ctx, Phase::Optimizer)?;

    // A steady step: parameters, optimizer state and batch resident.
    begin(on_phase, m, Phase::TrainingStep)?;
    // Step 0 above was the timing's first warm-up step, so this steady step
    // is timed too (unless more warm-up was asked for): one measurement
    // serves both the peak and the first timed sample. Timed steps of
    // profiles running side by side take turns (see `timing_lock`).
    let turn = super::timing_lock::acquire();
    let extra_warmup = timing.warmup.saturating_sub(1);
    let record = |i: usize, ms: f64, m: &mut Measurement| {
        if i >= extra_warmup {
            m.step_times_ms.push(ms);
        }
    };
    // The memory timeline samples this step and the first inference call.
    let (timed, span, _) = rec.span_sampled(sampler, false, || {
        mark("forward");
        let t = Instant::now();
        let loss = train_step(
            model.as_ref(),
            &batch,
            &vars,
            &mut opt,
            ctx.seed ^ 1,
            Phase::TrainingStep,
        );
        probe.sync();
        loss.map(|l| (l, t.elapsed().as_secs_f64() * 1e3))
    });
    let (loss, ms) = timed?;
    m.losses.push(loss);
    record(0, ms, m);
    at(Phase::TrainingStep, model.after_step(1))?;
    recast(&mut model, workload, &store, ctx, Phase::TrainingStep)?;
    let peak = span.peak.max(peak_first_step);
    m.values.insert(Metric::TrainingPeak, peak.saturating_sub(base) as f64);
    // The device's own view right after the peak step (the pool keeps its reservation).
    if let Some(used) = probe.device_used() {
        m.values.insert(Metric::DeviceUsed, used as f64);
    }
    m.context_reserve_bytes = probe.context_bytes();
    m.pool_reserved_peak_bytes = probe.pool_reserved_peak();

    begin(on_phase, m, Phase::Timing)?;
    let rest = (extra_warmup + timing.steps).saturating_sub(1);
    // Growth: what the steady state holds now, against what it holds after
    // the remaining steps. The figures' own vectors grow meanwhile: reserve.
    m.losses.reserve(rest + 2);
    m.step_times_ms.reserve(rest + 2);
    probe.sync();
    let steady_live = probe.live();
    // Steps 0 and 1 ran above; the rest of the warm-up and timed steps follow.
    for (i, step) in (1..=rest).zip(2..) {
        at(Phase::Timing, super::fault::leak(&batch.tensors[0]))?;
        let t = Instant::now();
        let loss = train_step(
            model.as_ref(),
            &batch,
            &vars,
            &mut opt,
            ctx.seed ^ step as u64,
            Phase::Timing,
        )?;
        probe.sync();
        record(i, t.elapsed().as_secs_f64() * 1e3, m);
        m.losses.push(loss);
        at(Phase::Timing, model.after_step(step))?;
        recast(&mut model, workload, &store, ctx, Phase::Timing)?;
    }
    drop(turn);
    if rest > 0 {
        probe.sync();
        m.growth_training_bytes = Some(probe.live().saturating_sub(steady_live));
    }
    if !m.step_times_ms.is_empty() {
        m.values.insert(Metric::StepTime, median(&m.step_times_ms));
    }
    // The loss after the seeded steps, without dropout.
    let final_loss = at(Phase::Timing, model.loss(&batch, &Step::eval()))?;
    m.values.insert(Metric::Loss, finite_loss(Phase::Timing, &final_loss)?);
    drop(final_loss);

    // Inference: weights as plain tensors (no graph), optimizer state gone.
    begin(on_phase, m, Phase::Inference)?;
    drop(opt);
    let infer = at(
        Phase::Inference,
        workload.build(store.detached(ctx.dtype, &ctx.device), ctx),
    )?;
    let (pred, span, _) = rec.span_sampled(sampler, false, || {
        mark("inference");
        infer.predict(&batch)
    });
    drop(at(Phase::Inference, pred)?);
    m.values
        .insert(Metric::InferencePeak, span.peak.saturating_sub(base) as f64);
    // Growth over inference calls: a model that keeps something per call
    // (a cache that is never cleared) runs out of memory in production.
    probe.sync();
    let first = probe.live();
    for _ in 0..INFERENCE_GROWTH_CALLS {
        at(Phase::Inference, super::fault::leak(&batch.tensors[0]))?;
        drop(at(Phase::Inference, infer.predict(&batch))?);
    }
    probe.sync();
    let inference_growth = probe.live().saturating_sub(first);
    m.growth_inference_bytes = Some(inference_growth);
    let growth = m.growth_training_bytes.unwrap_or(0).max(inference_growth);
    m.values.insert(Metric::Growth, growth as f64);
    Ok(())
}

/// The phases whose work a metric's value comes from, as [`run`] measures
/// it (JUnit gives each budget their time). A ratio comes from the phases of
/// the metric it divides.
pub fn measured_in(metric: Metric) -> &'static [Phase] {
    match metric {
        Metric::Params => &[Phase::Build],
        Metric::Activations => &[Phase::Forward],
        Metric::Gradients => &[Phase::Backward],
        Metric::Optimizer => &[Phase::Optimizer],
        Metric::TrainingPeak | Metric::DeviceUsed => &[Phase::TrainingStep],
        // The steady step is the first timed step; the rest run in `timing`.
        Metric::StepTime => &[Phase::TrainingStep, Phase::Timing],
        // A variant's ratio comes from its interleaved pairs (the separate
        // medians when there are none).
        Metric::StepTimeRatio => &[Phase::TrainingStep, Phase::Timing, Phase::Ratio],
        Metric::Loss | Metric::LossRatio => &[Phase::Timing],
        Metric::InferencePeak => &[Phase::Inference],
        Metric::Growth => &[Phase::Timing, Phase::Inference],
    }
}

/// Inference calls after the first whose growth is measured.
const INFERENCE_GROWTH_CALLS: usize = 2;

/// Mixed precision: the model holds casts of the master weights taken when
/// it was built; after an optimizer step, build it again from the updated
/// masters (the old casts go when the new model replaces them, so both
/// sets of casts are live for a moment). Nothing to do otherwise.
fn recast(
    model: &mut Box<dyn crate::sdk::Model>,
    workload: &dyn DynWorkload,
    store: &ParamStore,
    ctx: &RunCtx,
    phase: Phase,
) -> PhaseResult<()> {
    if store.master().is_some() {
        *model = at(phase, workload.build(store.builder(ctx.dtype, &ctx.device), ctx))?;
    }
    Ok(())
}

fn warm_up(workload: &dyn DynWorkload, ctx: &RunCtx) -> PhaseResult<()> {
    let w = Phase::Warmup;
    let store = ParamStore::with_master(ctx.seed, ctx.master_dtype);
    let model = at(w, workload.build(store.builder(ctx.dtype, &ctx.device), ctx))?;
    let batch = at(w, workload.batch(ctx, ctx.seed ^ 0xBA7C))?;
    let vars = store.vars();
    let mut opt = at(w, AdamW::new(vars.clone(), ParamsAdamW::default()))?;
    train_step(model.as_ref(), &batch, &vars, &mut opt, ctx.seed, w)?;
    let infer = at(w, workload.build(store.detached(ctx.dtype, &ctx.device), ctx))?;
    at(w, infer.predict(&batch))?;
    Ok(())
}

/// One workload set up to train (model, batch, optimizer), for the `ratio` phase.
struct Trainer<'w> {
    workload: &'w dyn DynWorkload,
    ctx: &'w RunCtx,
    store: ParamStore,
    model: Box<dyn crate::sdk::Model>,
    batch: crate::sdk::Batch,
    vars: Vec<Var>,
    opt: AdamW,
    steps: usize,
}

impl<'w> Trainer<'w> {
    fn new(workload: &'w dyn DynWorkload, ctx: &'w RunCtx) -> PhaseResult<Self> {
        let r = Phase::Ratio;
        let store = ParamStore::with_master(ctx.seed, ctx.master_dtype);
        let model = at(r, workload.build(store.builder(ctx.dtype, &ctx.device), ctx))?;
        let batch = at(r, workload.batch(ctx, ctx.seed ^ 0xBA7C))?;
        let vars = store.vars();
        let params = ParamsAdamW {
            lr: workload.learning_rate(),
            ..Default::default()
        };
        let opt = at(r, AdamW::new(vars.clone(), params))?;
        Ok(Trainer {
            workload,
            ctx,
            store,
            model,
            batch,
            vars,
            opt,
            steps: 0,
        })
    }

    /// One training step, its wall time in ms (after `sync`, which waits for the device).
    fn step(&mut self, sync: &dyn Fn()) -> PhaseResult<f64> {
        let t = Instant::now();
        let seed = self.ctx.seed ^ self.steps as u64;
        train_step(
            self.model.as_ref(),
            &self.batch,
            &self.vars,
            &mut self.opt,
            seed,
            Phase::Ratio,
        )?;
        sync();
        let ms = t.elapsed().as_secs_f64() * 1e3;
        at(Phase::Ratio, self.model.after_step(self.steps))?;
        recast(&mut self.model, self.workload, &self.store, self.ctx, Phase::Ratio)?;
        self.steps += 1;
        Ok(ms)
    }
}

/// The fewest pairs with a 95 % interval for their median (`report::interval`).
pub const MIN_PAIRS: usize = 6;

/// After [`MIN_PAIRS`], no new pair starts once the pairs have taken this
/// long: a model whose step takes seconds (the plain TFT on one CPU core
/// takes 11 s) stops at 6 pairs instead of 15. On a GPU, 15 pairs of
/// sub-second steps fit well inside it.
pub const PAIR_SECONDS: f64 = 30.0;

/// Times `variant` against `reference` in this one process: each is built
/// and trained `warmup` steps (at least one), then their steps alternate
/// for up to `pairs` pairs, and each pair gives one ratio, variant ms over
/// reference ms. Whatever drifts over the run (clocks, heat, other load on
/// the machine) moves both steps of a pair alike and cancels in its ratio;
/// which of the two goes first alternates (AB, BA, AB, ...) so that going
/// second (warm caches, a busy allocator) favours neither. No bytes are
/// measured here: the byte profiles ran before, each in its own process.
/// `Err` is the failing step's message.
pub fn time_pairs(
    variant: (&dyn DynWorkload, &RunCtx),
    reference: (&dyn DynWorkload, &RunCtx),
    warmup: usize,
    pairs: usize,
    sync: &dyn Fn(),
) -> Result<Vec<f64>, String> {
    let run = || -> PhaseResult<Vec<f64>> {
        let mut a = Trainer::new(variant.0, variant.1)?;
        let mut b = Trainer::new(reference.0, reference.1)?;
        for _ in 0..warmup.max(1) {
            a.step(sync)?;
            b.step(sync)?;
        }
        let turn = super::timing_lock::acquire();
        let started = Instant::now();
        let mut ratios = Vec::with_capacity(pairs);
        for i in 0..pairs {
            if i >= MIN_PAIRS && started.elapsed().as_secs_f64() > PAIR_SECONDS {
                break;
            }
            let (va, vb) = if i % 2 == 0 {
                let va = a.step(sync)?;
                (va, b.step(sync)?)
            } else {
                let vb = b.step(sync)?;
                (a.step(sync)?, vb)
            };
            ratios.push(va / vb);
        }
        drop(turn);
        Ok(ratios)
    };
    run().map_err(|(_, e)| first_line(&e.to_string()))
}

/// The error's first line: candle appends a backtrace when one was captured.
fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or("").trim().to_string()
}

/// The median of `xs` (the mean of the two middle values for an even count).
pub fn median(xs: &[f64]) -> f64 {
    let mut v = xs.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

#[cfg(test)]
mod tests {
    use super::median;

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
    }
}
