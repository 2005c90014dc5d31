//! A generation component's phases: a throwaway generation, the build,
//! the prefill and the decode steps one at a time, with the cache's growth
//! per token read from them; and how long a cache can grow on a card.

use gate_contract::measurement::{Measurement, Phase};
use gate_probe::Recorder;
use gate_spec::metric::Metric;

use super::training::record_params;
use super::{first_line, in_phase, measure, source_error, PhaseResult, Profile};
use crate::adapter::{Session, Train, Unbuilt};

/// A generation component's profile (`generate: { prefill, decode }`): no
/// training. A throwaway generation first (kernels' buffers, the tables of
/// whatever the model keeps once), then the build (`params`), the prefill
/// (`prefill_peak`) and the decode steps, one at a time: `decode_peak`, the
/// bytes the cache grew by per token (`kv_cache_per_token`) and how much
/// more the second half of the steps grew it than the first
/// (`decode_growth`: 0 for a cache that grows the same each token).
///
/// On an emulated card (`card`: the spec's, which the probe holds the rest
/// of the device back from), `kv_capacity_tokens` is checked there: see
/// [`check_capacity`].
pub fn profile_generation<S: Session>(
    session: &S,
    generate: gate_spec::budget::Generate,
    card: Option<Card>,
    recorder: &Recorder,
    on_phase: &mut dyn FnMut(Phase, &Measurement),
) -> Measurement {
    measure(session, recorder, on_phase, false, |p| {
        generation_run(p, generate, card)
    })
}

/// The spec's card: its capacity and the reserve written for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Card {
    pub capacity: u64,
    pub reserve: u64,
}

impl Card {
    /// The reserve as the probe measures it where it can (the CUDA context
    /// and workspaces), else as the spec writes it.
    pub fn reserve_measured(&self, probe: &dyn gate_probe::MemoryProbe) -> u64 {
        probe.context_bytes().unwrap_or(self.reserve)
    }
}

/// The generation phases in order (see [`profile_generation`]).
fn generation_run<S: Session>(
    p: &mut Profile<S>,
    generate: gate_spec::budget::Generate,
    card: Option<Card>,
) -> PhaseResult<()> {
    let (prefill, decode) = (generate.prefill, generate.decode);
    generation_warm_up(p, prefill)?;
    let rec = p.rec;
    let probe = rec.probe();
    probe.sync();
    let base = probe.live();
    let analytic = p.session.analytic();
    p.m.analytic_params_bytes = analytic.param_bytes;
    p.m.frozen_elems = analytic.frozen_elems;

    p.begin(Phase::Build)?;
    let params = p.session.params();
    let ((trainer, settled), span, _) = rec.span(false, || {
        let trainer = params.build();
        let settled = if trainer.is_ok() { probe.params_built() } else { Ok(()) };
        (trainer, settled)
    });
    let mut trainer = in_phase(Phase::Build, trainer)?;
    settled.map_err(|e| (Phase::Build, source_error(e)))?;
    p.m.param_elems = trainer.param_elems();
    p.m.param_tensors = trainer.param_tensors();
    record_params(p.m, &trainer, span.retained());

    p.begin(Phase::Prefill)?;
    // Only the generation model runs: the training model built with the
    // parameters goes first, so its own tables are not counted twice.
    trainer.drop_training_model();
    let infer = in_phase(Phase::Prefill, trainer.inference_model())?;
    let (made, span, blocks) = rec.span(true, || -> crate::adapter::Result<_> {
        let mut g = trainer.generation(&infer)?;
        g.prefill(prefill)?;
        Ok(g)
    });
    let mut g = in_phase(Phase::Prefill, made)?;
    p.m.values
        .insert(Metric::PrefillPeak, span.peak.saturating_sub(base) as f64);
    p.m.blocks = blocks;

    decode_steps(p, g.as_mut(), decode, base)?;
    // What of the card the process holds beside its tensors (the CUDA
    // context): the serving capacity's reserve, where it is measured.
    p.m.context_reserve_bytes = rec.probe().context_bytes();
    if let Some(card) = card {
        p.m.kv_capacity_check = check_capacity(p, g.as_mut(), generate, card);
    }
    Ok(())
}

/// `kv_capacity_tokens` on the emulated card itself: the bytes the cache
/// would grow by up to one token short of the figure are taken outside the
/// framework's allocator, and one decode step runs beside them, growing
/// the cache to the figure. It fits, or the figure promises more than the
/// card holds (peers' figures have been 40 % over: kvcached#448), and the
/// card's own answer is found by halving what is held: the longest cache
/// with which a decode step still ran. `None` where there is no figure to
/// check, or the probe cannot hold memory.
fn check_capacity<S: Session>(
    p: &Profile<S>,
    g: &mut dyn crate::adapter::Generation,
    generate: gate_spec::budget::Generate,
    card: Card,
) -> Option<gate_contract::measurement::CapacityCheck> {
    let probe = p.rec.probe();
    let reserve = card.reserve_measured(probe.as_ref());
    let tokens = kv_capacity_tokens(p.m, generate, card.capacity, reserve)?;
    let per_token = *p.m.values.get(&Metric::KvCachePerToken)?;
    // Each decode that runs makes the generation's own cache a token longer.
    let mut cached = (generate.prefill + generate.decode) as f64;
    let extra = (tokens - cached - 1.0).max(0.0);
    let held_bytes = capacity_hold_bytes(tokens, cached, per_token);
    // One decode step beside `extra` tokens' bytes held: the cache's
    // length then, or why it did not run (and whether for want of memory).
    let mut decode_beside = |extra: f64| -> Option<Result<f64, (String, bool)>> {
        let ran = match probe.hold((extra * per_token).round() as u64)? {
            Err(e) => Err((e.to_string(), true)),
            Ok(()) => {
                let stepped = g.decode().map_err(|e| {
                    let memory = e.kind() == gate_contract::measurement::FailureKind::OutOfMemory;
                    (e.to_string(), memory)
                });
                probe.sync();
                stepped
            }
        };
        probe.release();
        Some(ran.map(|()| {
            cached += 1.0;
            cached + extra
        }))
    };
    let (fits, reason, card_tokens) = match decode_beside(extra)? {
        Ok(_) => (true, None, None),
        Err((why, memory)) => {
            // Halving the held tokens: `lo` ran (nothing held: the
            // generation itself did), `hi` did not.
            let (mut lo, mut hi, mut longest) = (0.0f64, extra, None);
            while memory && hi - lo > 1.0 {
                let mid = ((lo + hi) / 2.0).floor();
                match decode_beside(mid)? {
                    Ok(length) => (lo, longest) = (mid, Some(length)),
                    Err((_, true)) => hi = mid,
                    Err((_, false)) => break,
                }
            }
            (false, Some(first_line(&why)), longest)
        }
    };
    Some(gate_contract::measurement::CapacityCheck {
        tokens,
        held_bytes,
        fits,
        reason,
        card_tokens,
    })
}

/// The bytes that stand for a cache of `tokens` where `cached` tokens are
/// already in it and one decode step is still to come, at `per_token` a
/// token (the batch's).
fn capacity_hold_bytes(tokens: f64, cached: f64, per_token: f64) -> u64 {
    ((tokens - cached - 1.0).max(0.0) * per_token).round() as u64
}

/// A throwaway generation (kernels' buffers, the tables of whatever the
/// model keeps once); if it fails, its error is kept and the run goes on.
fn generation_warm_up<S: Session>(p: &mut Profile<S>, prefill: usize) -> PhaseResult<()> {
    p.begin(Phase::Warmup)?;
    let warmed = (|| -> PhaseResult<()> {
        let w = Phase::Warmup;
        let trainer = in_phase(w, p.session.trainer())?;
        let infer = in_phase(w, trainer.inference_model())?;
        let mut g = in_phase(w, trainer.generation(&infer))?;
        in_phase(w, g.prefill(prefill))?;
        in_phase(w, g.decode())?;
        Ok(())
    })();
    if let Err((_, e)) = warmed {
        p.m.warmup_error = Some(first_line(&e.to_string()));
    } else {
        p.settle_source(Phase::Warmup)?;
    }
    Ok(())
}

/// The decode steps, one at a time: `decode_peak`, the cache's growth per
/// token and how much more the second half grew it than the first.
fn decode_steps<S: Session>(
    p: &mut Profile<S>,
    g: &mut dyn crate::adapter::Generation,
    decode: usize,
    base: u64,
) -> PhaseResult<()> {
    let rec = p.rec;
    let probe = rec.probe();
    p.begin(Phase::Decode)?;
    // The cache's growth is read from the second step on: the first also
    // replaces what the prefill made (its tensors' own bookkeeping differs
    // from a decode step's by a few bytes).
    let counted = decode - 1;
    let half = counted / 2;
    let (mut start, mut at_half, mut peak) = (0u64, 0u64, 0u64);
    for i in 0..decode {
        let (stepped, span, _) = rec.span(false, || g.decode());
        in_phase(Phase::Decode, stepped)?;
        peak = peak.max(span.peak);
        // Read outside the span: its own bookkeeping is live inside it.
        probe.sync();
        let live = probe.live();
        if i == 0 {
            start = live;
        }
        if i == half {
            at_half = live;
        }
    }
    probe.sync();
    let end = probe.live();
    p.m.values.insert(Metric::DecodePeak, peak.saturating_sub(base) as f64);
    let grown = end as f64 - start as f64;
    p.m.values
        .insert(Metric::KvCachePerToken, (grown / counted as f64).max(0.0));
    // The second half's growth against the first's, scaled to as many steps.
    let first = at_half as f64 - start as f64;
    let second = end as f64 - at_half as f64;
    let excess = second - first * (counted - half) as f64 / half as f64;
    p.m.values.insert(Metric::DecodeGrowth, excess.max(0.0).round());
    Ok(())
}

/// `kv_capacity_tokens`: how long each of the component's rows can grow
/// its KV cache on a card of `capacity` bytes holding back `reserve`. The
/// higher of the prefill and decode peaks already holds the weights, one
/// step's working memory and the cache of the `prefill + decode` tokens
/// generated; each token more costs `kv_cache_per_token` (the whole
/// batch's): `prefill + decode + ⌊(capacity − reserve − peak) / per_token⌋`,
/// at least 0. `None` where the profile has no such figures or the cache
/// never grew (nothing to divide by).
pub fn kv_capacity_tokens(
    m: &Measurement,
    generate: gate_spec::budget::Generate,
    capacity: u64,
    reserve: u64,
) -> Option<f64> {
    let per_token = *m.values.get(&Metric::KvCachePerToken)?;
    let peak = m
        .values
        .get(&Metric::PrefillPeak)?
        .max(*m.values.get(&Metric::DecodePeak)?);
    if per_token <= 0.0 {
        return None;
    }
    let free = capacity as f64 - reserve as f64 - peak;
    let held = (generate.prefill + generate.decode) as f64;
    Some((held + (free / per_token).floor()).max(0.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_capacity_check_holds_the_cache_one_token_short_of_the_figure() {
        // 40,960 tokens, 24 cached, 2,048 B a token: the decode step makes
        // the 40,960th.
        assert_eq!(capacity_hold_bytes(40_960.0, 24.0, 2048.0), (40_960 - 24 - 1) * 2048);
        // A figure at or below what is cached holds nothing.
        assert_eq!(capacity_hold_bytes(10.0, 24.0, 2048.0), 0);
    }

    #[test]
    fn kv_capacity_is_the_tokens_held_and_those_the_free_bytes_take() {
        let mut m = Measurement::default();
        let generate = gate_spec::budget::Generate { prefill: 8, decode: 4 };
        assert_eq!(kv_capacity_tokens(&m, generate, 1 << 20, 0), None);
        m.values.insert(Metric::PrefillPeak, 10_000.0);
        m.values.insert(Metric::DecodePeak, 12_000.0);
        m.values.insert(Metric::KvCachePerToken, 1_024.0);
        // 100,000 − 20,000 − 12,000 = 68,000 B free: 66 tokens more (66.4).
        assert_eq!(kv_capacity_tokens(&m, generate, 100_000, 20_000), Some(12.0 + 66.0));
        // Already past the card: fewer tokens than were generated, never below 0.
        assert_eq!(kv_capacity_tokens(&m, generate, 30_000, 20_000), Some(12.0 - 2.0));
        assert_eq!(kv_capacity_tokens(&m, generate, 10_000, 20_000), Some(0.0));
        m.values.insert(Metric::KvCachePerToken, 0.0);
        assert_eq!(kv_capacity_tokens(&m, generate, 100_000, 20_000), None);
    }
}
