//! The `ratio` phase: a variant timed against its reference in one
//! process, their steps interleaved in pairs so that drift cancels in each
//! pair's ratio, and each side's loss taken after as many steps as its
//! profile.

use std::time::Instant;

use gate_contract::measurement::Phase;
use gate_contract::timing::{MIN_PAIRS, PAIR_SECONDS};

use super::{finite_loss, first_line, in_phase, profile_steps, train_step, PhaseResult, Timing};
use crate::adapter::{Session, Train};

/// One workload set up to train, with its batch, for the `ratio` phase.
struct Paired<T: Train> {
    trainer: T,
    batch: T::Batch,
    /// Training steps taken so far.
    steps: usize,
}

impl<T: Train> Paired<T> {
    fn new<'s, S: Session<Trainer<'s> = T>>(session: &'s S) -> PhaseResult<Self> {
        let trainer = in_phase(Phase::Ratio, session.trainer())?;
        let batch = in_phase(Phase::Ratio, trainer.batch())?;
        Ok(Paired {
            trainer,
            batch,
            steps: 0,
        })
    }

    /// One training step, its wall time in ms (after `sync`, which waits for the device).
    fn step(&mut self, sync: &dyn Fn()) -> PhaseResult<f64> {
        let t = Instant::now();
        train_step(&mut self.trainer, &self.batch, Phase::Ratio)?;
        sync();
        let ms = t.elapsed().as_secs_f64() * 1e3;
        in_phase(Phase::Ratio, self.trainer.after_step())?;
        self.steps += 1;
        Ok(ms)
    }

    /// The loss without dropout once exactly `target` steps are taken (the
    /// profile's final loss is taken after as many), into `slot`.
    fn loss_at(&self, target: Option<usize>, slot: &mut Option<f64>) -> PhaseResult<()> {
        if slot.is_none() && target == Some(self.steps) {
            *slot = Some(finite_loss(Phase::Ratio, self.trainer.eval_loss(&self.batch))?);
        }
        Ok(())
    }
}

/// What the `ratio` phase is asked to measure.
#[derive(Debug, Clone, Copy)]
pub struct RatioPlan {
    /// Untimed steps of each before the pairs (at least one).
    pub warmup: usize,
    /// Interleaved pairs to time (0: none).
    pub pairs: usize,
    /// The variant's and the reference's timing, when their losses after
    /// their profiles' steps are asked for too (see [`profile_steps`]).
    pub losses: Option<(Timing, Timing)>,
}

/// What the `ratio` phase measured.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RatioRun {
    /// Variant ms over reference ms, one per interleaved pair.
    pub step_time_ratios: Vec<f64>,
    /// The variant's and the reference's loss, when asked for.
    pub losses: Option<(f64, f64)>,
}

/// Times `variant` against `reference` in this one process: each is built
/// and trained `plan.warmup` steps (at least one), then their steps
/// alternate for up to `plan.pairs` pairs, and each pair gives one ratio,
/// variant ms over reference ms. Whatever drifts over the run (clocks, heat,
/// other load on the machine) moves both steps of a pair alike and cancels
/// in its ratio; which of the two goes first alternates (AB, BA, AB, ...)
/// so that going second (warm caches, a busy allocator) favours neither.
/// With `plan.losses`, each side's loss is also taken once it has trained
/// as many steps as its profile does (between pairs, never inside a timed
/// step; stepping on, untimed, if the pairs stop short). No bytes are
/// measured here: the byte profiles ran before, each in its own process.
/// `Err` is the failing step's message.
pub fn ratio_run<A: Session, B: Session>(
    variant: &A,
    reference: &B,
    plan: RatioPlan,
    sync: &dyn Fn(),
) -> Result<RatioRun, String> {
    let run = || -> PhaseResult<RatioRun> {
        let mut a = Paired::new(variant)?;
        let mut b = Paired::new(reference)?;
        let (ta, tb) = match plan.losses {
            Some((va, rb)) => (Some(profile_steps(va)), Some(profile_steps(rb))),
            None => (None, None),
        };
        let (mut la, mut lb) = (None, None);
        for _ in 0..plan.warmup.max(1) {
            a.step(sync)?;
            b.step(sync)?;
            a.loss_at(ta, &mut la)?;
            b.loss_at(tb, &mut lb)?;
        }
        let mut ratios = Vec::with_capacity(plan.pairs);
        if plan.pairs > 0 {
            let turn = crate::timing_lock::acquire();
            let started = Instant::now();
            for i in 0..plan.pairs {
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
                a.loss_at(ta, &mut la)?;
                b.loss_at(tb, &mut lb)?;
            }
            drop(turn);
        }
        // The pairs may stop before a side reached its profile's step count.
        while ta.is_some_and(|t| a.steps < t) {
            a.step(sync)?;
            a.loss_at(ta, &mut la)?;
        }
        while tb.is_some_and(|t| b.steps < t) {
            b.step(sync)?;
            b.loss_at(tb, &mut lb)?;
        }
        Ok(RatioRun {
            step_time_ratios: ratios,
            losses: la.zip(lb),
        })
    };
    run().map_err(|(_, e)| first_line(&e.to_string()))
}
