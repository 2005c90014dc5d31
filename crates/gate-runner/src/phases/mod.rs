//! One component's profile, in process: build, batch, forward, backward,
//! optimizer, a steady training step, timing, inference. The training
//! itself is the adapter's ([`Session`], [`Train`]); this module measures it: each phase's bytes
//! come from the probe through a [`Recorder`] span, with the timeline's
//! marks and the injected faults (`fault`) in between. A failing phase
//! stops the profile; figures measured before it are kept.
//!
//! The phases live by kind: `training` (a training component's), and
//! `generation` (a generation component's) and `ratio` (a variant timed
//! against its reference); here, what all of them share.

use crate::adapter::{Error, Session, Train};
use crate::fault;
use gate_contract::measurement::{Failure, Measurement, Phase};
use gate_probe::{mark, Recorder, Sampler};

mod generation;
mod ratio;
mod training;

use training::run;

pub use gate_spec::budget::Timing;
pub use generation::{kv_capacity_tokens, profile_generation, Card};
pub use ratio::{ratio_run, RatioPlan, RatioRun};

/// Profiles `workload`, reporting each phase and the figures so far to
/// `on_phase` before the phase starts (the child process forwards these, so
/// a crash can be placed and earlier figures survive it). The throwaway
/// warm-up runs on `warm` when given (the same workload at the batch its
/// adapter's `Framework::warm_up_batch` chose), else on `session`.
pub fn profile<S: Session>(
    session: &S,
    warm: Option<&S>,
    timing: Timing,
    recorder: &Recorder,
    on_phase: &mut dyn FnMut(Phase, &Measurement),
) -> Measurement {
    measure(session, recorder, on_phase, true, |p| run(p, warm, timing))
}

/// Runs `phases` over a fresh measurement, then records where they
/// stopped, if they did, and where the figures came from; with `timeline`,
/// the memory timeline sampled along the way.
fn measure<S: Session>(
    session: &S,
    recorder: &Recorder,
    on_phase: &mut dyn FnMut(Phase, &Measurement),
    timeline: bool,
    phases: impl FnOnce(&mut Profile<S>) -> PhaseResult<()>,
) -> Measurement {
    let mut m = Measurement::default();
    // Made (with all its room) before the baseline is read, so its own
    // bytes are part of the baseline and never of a figure.
    let mut sampler = Sampler::new();
    let mut p = Profile {
        session,
        rec: recorder,
        on_phase,
        sampler: &mut sampler,
        m: &mut m,
    };
    if let Err((phase, err)) = phases(&mut p) {
        m.failure = Some(Failure {
            phase,
            kind: err.kind(),
            reason: first_line(&err.to_string()),
        });
        // Each phase's span reset the peak as it began: this is the failing phase's.
        m.failure_peak_bytes = Some(recorder.probe().peak());
    }
    if timeline {
        // Also after a failure: the samples up to it show where the memory went.
        m.timeline = sampler.finish(recorder.probe().backend());
    }
    // Where the figures came from, as the probe settled it (failures included).
    m.memory_source = Some(recorder.probe().memory_source());
    // What each block held at its exit, where its kept bytes were read at the
    // forward's end: read now, so that their bookkeeping is in no figure.
    m.block_exit_bytes = m
        .blocks
        .iter()
        .filter_map(|b| Some((b.name.clone(), gate_probe::scope::exit_bytes(&b.name)?)))
        .collect();
    m
}

type PhaseResult<T> = Result<T, (Phase, Error)>;

/// Tags a failure with the phase it happened in.
fn in_phase<T>(phase: Phase, r: crate::adapter::Result<T>) -> PhaseResult<T> {
    r.map_err(|e| (phase, e))
}

/// A loss that must be a finite number.
fn finite_loss(phase: Phase, loss: crate::adapter::Result<f64>) -> PhaseResult<f64> {
    let v = fault::loss(in_phase(phase, loss)?); // an injected `nan`/`inf` (tests only)
    if !v.is_finite() {
        return Err((phase, Error::msg(format!("the loss is {v}, not a finite number"))));
    }
    Ok(v)
}

/// One whole training step, its loss checked before backward; the marks
/// place its parts on the timeline (no-ops unless the step is sampled).
fn train_step<T: Train>(trainer: &mut T, batch: &T::Batch, phase: Phase) -> PhaseResult<f64> {
    let fwd = in_phase(phase, trainer.forward(batch))?;
    let value = finite_loss(phase, trainer.loss_value(&fwd))?;
    mark("backward");
    let grads = in_phase(phase, trainer.gradients(fwd, batch))?;
    mark("optimizer");
    in_phase(phase, trainer.update(&grads))?;
    Ok(value)
}

/// What every phase uses: the component, the recorder, and where the
/// figures go.
struct Profile<'a, S: Session> {
    session: &'a S,
    rec: &'a Recorder,
    on_phase: &'a mut dyn FnMut(Phase, &Measurement),
    sampler: &'a mut Sampler,
    m: &'a mut Measurement,
}

/// A probe that cannot measure where the model's bytes are, as the phase's error.
fn source_error(e: gate_probe::BackendError) -> Error {
    match e.hint() {
        Some(h) => Error::msg(format!("{} (hint: {h})", e.message)),
        None => Error::msg(e.message),
    }
}

/// The training steps a profile takes before its final loss: the first
/// step, the steady step, then the rest of `timing`'s warm-up and timed
/// steps (see `Profile::timed_steps`).
pub fn profile_steps(timing: Timing) -> usize {
    2 + (timing.warmup.saturating_sub(1) + timing.steps).saturating_sub(1)
}

/// The error's first line: a framework may append a backtrace when one was captured.
fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or("").trim().to_string()
}
