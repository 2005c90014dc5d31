//! The cost model: a lever's probed effect on each phase's peak, every
//! byte figure, the step time and the loss, and a candidate's figures
//! predicted from its levers' effects.

use std::collections::BTreeMap;

use gate_contract::measurement::Measurement;
use gate_contract::plan::{Candidate, Figure, Lever, Outcome, RecomputeFloor, Setting};
use gate_probe::timeline::Event;
use gate_probe::Timeline;
use gate_spec::budget::{Budget, Component};
use gate_spec::metric::{Metric, Unit};

use super::rank;

/// The phases of a training step whose peaks make the training peak.
pub(super) const STEP_PHASES: [&str; 3] = ["forward", "backward", "optimizer"];

/// A part of a step: a phase, inside the checkpointable blocks' scopes
/// (their forward, their recompute) or outside them.
pub(super) type Part = (&'static str, bool);

/// What one profile gave the cost model.
#[derive(Debug, Clone, Default)]
pub(super) struct Figures {
    pub(super) values: BTreeMap<Metric, f64>,
    /// Each part's peak above the timeline's base.
    pub(super) phase_peaks: BTreeMap<Part, f64>,
    /// training_peak − the highest phase peak (what lies outside the samples).
    pub(super) offset: f64,
    /// The most positions a checkpointed block's chunks ran over.
    pub(super) positions: Option<usize>,
}

impl Figures {
    /// `m`'s figures, its ratios against `reference` (the component the
    /// ratio budgets compare with) where it ran no interleaved pairs, the
    /// timeline split at `blocks`.
    pub(super) fn of(m: &Measurement, reference: Option<&Figures>, blocks: &[String]) -> Figures {
        let mut values = m.values.clone();
        // As `gate check` takes them: the interleaved pairs (a GPU), else
        // the two profiles' medians.
        let of_reference = |metric: Metric| {
            let mine = values.get(&metric)?;
            let theirs = reference?.values.get(&metric).filter(|v| **v > 0.0)?;
            Some(mine / theirs)
        };
        let time_ratio = match m.step_time_ratios.is_empty() {
            false => Some(gate_contract::timing::median(&m.step_time_ratios)),
            true => of_reference(Metric::StepTime),
        };
        let loss_ratio = match m.ratio_losses.filter(|(_, r)| *r != 0.0) {
            Some((variant, reference)) => Some(variant / reference),
            None => of_reference(Metric::Loss),
        };
        values.extend(time_ratio.map(|r| (Metric::StepTimeRatio, r)));
        values.extend(loss_ratio.map(|r| (Metric::LossRatio, r)));
        let phase_peaks = m.timeline.as_ref().map(|t| phase_peaks(t, blocks)).unwrap_or_default();
        let highest = phase_peaks.values().copied().fold(0.0, f64::max);
        let offset = values.get(&Metric::TrainingPeak).map_or(0.0, |tp| tp - highest);
        Figures {
            values,
            phase_peaks,
            offset,
            positions: m.checkpointed.iter().filter_map(|b| b.positions).max(),
        }
    }
}

/// The highest live bytes in each step phase of a timeline, inside the
/// scopes of `blocks` and outside them: a sample's peak is the highest
/// since the sample before, so it belongs to where the step was before the
/// sample's own event.
pub(in crate::pipeline) fn phase_peaks(t: &Timeline, blocks: &[String]) -> BTreeMap<Part, f64> {
    let mut peaks = BTreeMap::new();
    let mut current: Option<&'static str> = None;
    let mut open: Vec<&str> = Vec::new();
    let in_block = |path: &str| {
        path.split('.').any(|seg| {
            blocks
                .iter()
                .any(|b| seg == b || seg.strip_prefix(b.as_str()).is_some_and(|r| r.starts_with(' ')))
        })
    };
    for s in &t.samples {
        if let Some(p) = current {
            let inside = open.iter().any(|path| in_block(path));
            let e = peaks.entry((p, inside)).or_insert(0.0f64);
            *e = e.max(s.peak as f64);
        }
        match &s.event {
            Event::Phase(name) => current = STEP_PHASES.iter().copied().find(|p| p == name),
            Event::Enter(path) => open.push(path),
            Event::Exit(path) => {
                if let Some(i) = open.iter().rposition(|p| p == path) {
                    open.remove(i);
                }
            }
            Event::End => {
                current = None;
                open.clear();
            }
        }
    }
    peaks
}

/// Each checkpointable block's forward time in the timeline's sampled
/// training step (its top-level scope, entered and left in the forward
/// phase, all its calls), against that step's time: what recomputing them
/// costs at least. `None` where no block's scope is in the step.
pub(in crate::pipeline) fn recompute_floor(t: &Timeline, blocks: &[String]) -> Option<RecomputeFloor> {
    // A block's own scope, under whatever scopes the workload opens around it.
    let block_of = |path: &str| {
        let last = path.rsplit('.').next().unwrap_or(path);
        blocks.iter().any(|b| b == last).then(|| last.to_string())
    };
    let mut forward_us: BTreeMap<String, u64> = BTreeMap::new();
    // Each open block scope: its path, its block, when it was entered.
    let mut entered: Vec<(&str, String, u64)> = Vec::new();
    let (mut phase, mut started) = (None::<&str>, None::<u64>);
    for s in &t.samples {
        match &s.event {
            Event::Phase(name) => {
                phase = Some(name);
                if name == "forward" && started.is_none() {
                    started = Some(s.t_us);
                }
            }
            Event::Enter(path) if phase == Some("forward") => {
                if let Some(block) = block_of(path) {
                    entered.push((path, block, s.t_us));
                }
            }
            Event::Exit(path) => {
                if let Some(i) = entered.iter().rposition(|(p, _, _)| p == path) {
                    let (_, block, since) = entered.remove(i);
                    *forward_us.entry(block).or_default() += s.t_us.saturating_sub(since);
                }
            }
            Event::Enter(_) => {}
            // The training step's end: the inference call after it is another span.
            Event::End => {
                let step_us = s.t_us.saturating_sub(started?);
                return (!forward_us.is_empty() && step_us > 0).then(|| RecomputeFloor {
                    forward_ms: forward_us.into_iter().map(|(b, us)| (b, us as f64 / 1e3)).collect(),
                    step_ms: step_us as f64 / 1e3,
                });
            }
        }
    }
    None
}

/// Whether the floor alone already fails a `step_time_ratio` ceiling of
/// `c` from a start at `start_ratio`: then no chunk of a checkpoint can
/// pass, and its probes are not run.
pub(super) fn floor_fails_time(c: &Component, start_ratio: f64, floor: &RecomputeFloor) -> Option<f64> {
    let least = start_ratio * floor.factor();
    c.budgets
        .iter()
        .filter(|b| b.metric == Metric::StepTimeRatio && b.limit.op.is_max())
        .any(|b| !b.limit.op.holds(least, b.limit.value))
        .then_some(least)
}

/// Every part of a step.
pub(super) fn parts() -> impl Iterator<Item = Part> {
    STEP_PHASES.iter().flat_map(|p| [(*p, false), (*p, true)])
}

/// One lever's options: the spec's own setting first, then the others.
pub(super) struct Options {
    pub(super) lever: Lever,
    pub(super) current: Setting,
    pub(super) others: Vec<Setting>,
}

/// A probed setting's effect, relative to the start.
#[derive(Debug, Clone)]
pub(super) struct Effect {
    /// Difference of each part's peak (a part the profile did not see counts 0).
    pub(super) phases: BTreeMap<Part, f64>,
    /// Difference of each byte figure.
    pub(super) bytes: BTreeMap<Metric, f64>,
    /// Step time factor.
    pub(super) time: f64,
    /// Loss factor.
    pub(super) loss: f64,
    /// For a lever that changes the rows a step holds (the batch, the
    /// sequence length, micro-batches): the rows' ratio to the start's.
    pub(super) rows: Option<f64>,
    /// The setting runs two or more micro-batches a step.
    pub(super) micro_batches: bool,
    /// For a checkpoint's probe: the most positions its blocks' chunks ran
    /// over (a larger chunk is the same run).
    pub(super) positions: Option<usize>,
}

impl Effect {
    pub(super) fn none() -> Effect {
        Effect {
            phases: BTreeMap::new(),
            bytes: BTreeMap::new(),
            time: 1.0,
            loss: 1.0,
            rows: None,
            micro_batches: false,
            positions: None,
        }
    }

    pub(super) fn between(start: &Figures, probe: &Figures) -> Effect {
        let phases = parts()
            .map(|p| {
                let of = |f: &Figures| f.phase_peaks.get(&p).copied().unwrap_or(0.0);
                (p, of(probe) - of(start))
            })
            .collect();
        let bytes = probe
            .values
            .iter()
            .filter(|(m, _)| m.unit() == Unit::Bytes)
            .filter_map(|(m, v)| Some((*m, v - start.values.get(m)?)))
            .collect();
        let factor = |m: Metric| match (probe.values.get(&m), start.values.get(&m)) {
            (Some(p), Some(s)) if *s > 0.0 => p / s,
            _ => 1.0,
        };
        Effect {
            phases,
            bytes,
            time: factor(Metric::StepTime),
            loss: factor(Metric::Loss),
            rows: None,
            micro_batches: false,
            positions: probe.positions,
        }
    }

    /// `a + (b − a)·w` for every part.
    pub(super) fn lerp(a: &Effect, b: &Effect, w: f64, time_w: f64) -> Effect {
        fn mix<K: Ord + Copy>(x: &BTreeMap<K, f64>, y: &BTreeMap<K, f64>, w: f64) -> BTreeMap<K, f64> {
            x.iter()
                .filter_map(|(k, xv)| Some((*k, xv + (y.get(k)? - xv) * w)))
                .collect()
        }
        Effect {
            phases: mix(&a.phases, &b.phases, w),
            bytes: mix(&a.bytes, &b.bytes, w),
            time: a.time + (b.time - a.time) * time_w,
            loss: a.loss + (b.loss - a.loss) * w,
            rows: None,
            micro_batches: a.micro_batches || b.micro_batches,
            positions: a.positions.max(b.positions),
        }
    }
}

/// Each lever's options for `c`: its setting in the spec, and the others
/// the lever offers. The batch is gate's own lever, offered for every
/// component with a batch of 2 or more.
pub(super) fn options_of(c: &Component, config: &serde_json::Value, mut levers: Vec<Lever>) -> Vec<Options> {
    if c.batch_size >= 2 && !levers.iter().any(|l| matches!(l, Lever::Batch { .. })) {
        let sizes = [c.batch_size / 2, c.batch_size / 4]
            .into_iter()
            .filter(|&b| b >= 1)
            .collect();
        levers.push(Lever::Batch { sizes });
    }
    levers
        .into_iter()
        .filter_map(|lever| {
            let (current, others) = settings_of(&lever, c, config);
            (!others.is_empty()).then_some(Options { lever, current, others })
        })
        .collect()
}

/// A lever's setting in the spec (`c`, its workload's `config`) and the
/// others it offers.
fn settings_of(lever: &Lever, c: &Component, config: &serde_json::Value) -> (Setting, Vec<Setting>) {
    match lever {
        Lever::Checkpoint { chunks, .. } => (
            Setting::Checkpoint { chunk: c.checkpoint },
            chunks
                .iter()
                .filter(|&&n| Some(n) != c.checkpoint && n > 0)
                .map(|&n| Setting::Checkpoint { chunk: Some(n) })
                .collect(),
        ),
        Lever::Config { key, values, .. } => config_settings(key, config, values.iter().cloned()),
        Lever::Batch { sizes } => (
            Setting::Batch { size: c.batch_size },
            sizes
                .iter()
                .filter(|&&b| b != c.batch_size && b >= 1)
                .map(|&size| Setting::Batch { size })
                .collect(),
        ),
        Lever::Dtype { dtypes } => (
            Setting::Dtype { dtype: c.dtype },
            dtypes
                .iter()
                .filter(|&&d| d != c.dtype)
                .map(|&dtype| Setting::Dtype { dtype })
                .collect(),
        ),
        Lever::Sequence { key, lengths } => {
            config_settings(key, config, lengths.iter().map(|&n| serde_json::Value::from(n)))
        }
        Lever::Accumulation { key, steps } => {
            // The rows a step trains on stay the spec's: batch × steps.
            let now = config.get(key).and_then(serde_json::Value::as_u64).unwrap_or(1).max(1) as usize;
            let rows = c.batch_size * now;
            let setting = |steps: usize| Setting::Accumulation {
                key: key.clone(),
                steps,
                batch: rows / steps,
            };
            (
                setting(now),
                steps
                    .iter()
                    .filter(|&&k| k != now && k >= 1 && rows.is_multiple_of(k))
                    .map(|&k| setting(k))
                    .collect(),
            )
        }
    }
}

/// A `config:` key's value in the spec and the other `values` offered.
fn config_settings(
    key: &str,
    config: &serde_json::Value,
    values: impl Iterator<Item = serde_json::Value>,
) -> (Setting, Vec<Setting>) {
    let now = config.get(key).cloned().unwrap_or(serde_json::Value::Null);
    let setting = |value: serde_json::Value| Setting::Config {
        key: key.to_string(),
        value,
    };
    (
        setting(now.clone()),
        values.filter(|v| *v != now).map(setting).collect(),
    )
}

/// The settings a lever is probed at: the two ends of its range where it
/// has one (a chunk, a batch), else each.
pub(super) fn probe_settings(o: &Options) -> Vec<Setting> {
    match o.lever {
        Lever::Checkpoint { .. } | Lever::Batch { .. } if o.others.len() > 2 => {
            let mut ends = o.others.clone();
            ends.sort_by(|a, b| scalar(a).total_cmp(&scalar(b)));
            vec![ends[0].clone(), ends[ends.len() - 1].clone()]
        }
        _ => o.others.clone(),
    }
}

/// A setting's position on its lever's axis (chunk or batch), for interpolation.
pub(super) fn scalar(s: &Setting) -> f64 {
    match s {
        Setting::Checkpoint { chunk: Some(n) } => *n as f64,
        Setting::Checkpoint { chunk: None } => f64::INFINITY,
        Setting::Batch { size } => *size as f64,
        _ => 0.0,
    }
}

/// The most positions a checkpoint's probes saw its blocks' chunks run
/// over: past them, a chunk is one chunk (`None`: no probe said).
pub(super) fn positions_of(probed: &BTreeMap<usize, (Setting, Effect)>) -> Option<usize> {
    probed.values().filter_map(|(_, e)| e.positions).max()
}

/// A setting's position on its lever's axis as it runs: a chunk past the
/// blocks' `positions` is one chunk of them.
fn effective(s: &Setting, positions: Option<usize>) -> f64 {
    match (s, positions) {
        (Setting::Checkpoint { chunk: Some(n) }, Some(p)) => (*n).min(p.max(1)) as f64,
        _ => scalar(s),
    }
}

/// Whether `s` runs as another setting of its lever does that is simpler
/// to write (the spec's own, or a smaller chunk): a chunk past the
/// checkpointed blocks' positions is the same run as the smallest offered
/// chunk that covers them. Such a setting is neither predicted nor probed.
pub(super) fn same_run_as_another(o: &Options, probed: &BTreeMap<usize, (Setting, Effect)>, s: &Setting) -> bool {
    let Some(p) = positions_of(probed).filter(|_| matches!(o.lever, Lever::Checkpoint { .. })) else {
        return false;
    };
    let at = effective(s, Some(p));
    std::iter::once(&o.current).chain(&o.others).any(|t| {
        t != s && scalar(t).is_finite() && effective(t, Some(p)) == at && (*t == o.current || scalar(t) < scalar(s))
    })
}

/// Whether a probe ran `s` as it would run: a chunk past the blocks'
/// positions, probed at another such chunk.
pub(super) fn ran_as_probed(o: &Options, probed: &BTreeMap<usize, (Setting, Effect)>, s: &Setting) -> bool {
    let positions = positions_of(probed);
    matches!(o.lever, Lever::Checkpoint { .. })
        && positions.is_some()
        && probed
            .values()
            .any(|(p, _)| effective(p, positions) == effective(s, positions))
}

/// The effect of `setting` on the start: probed, or interpolated between
/// the probed settings around it (and the start, where it lies between).
/// `None`: nothing to predict it from.
pub(super) fn effect_of(o: &Options, probed: &BTreeMap<usize, (Setting, Effect)>, setting: &Setting) -> Option<Effect> {
    if *setting == o.current {
        return Some(Effect::none());
    }
    if let Some((_, e)) = probed.values().find(|(s, _)| s == setting) {
        return Some(e.clone());
    }
    if !matches!(o.lever, Lever::Checkpoint { .. } | Lever::Batch { .. }) {
        return None;
    }
    // Points on the axis: the probes, and the start where it is on it. A
    // chunk of the blocks' positions or more is one chunk: the TFT at batch
    // 2 × 80 steps (160 positions) peaks at 19.98 MiB at chunks 160, 320
    // and 640 alike, where a line from 32 to 640 predicted 160 and 320
    // 32 % and 23 % low (tests/it/plan.rs).
    let positions = positions_of(probed);
    let mut points: Vec<(f64, Effect)> = probed
        .values()
        .map(|(s, e)| (effective(s, positions), e.clone()))
        .collect();
    let here = effective(&o.current, positions);
    if here.is_finite() {
        points.push((here, Effect::none()));
    }
    points.sort_by(|a, b| a.0.total_cmp(&b.0));
    let x = effective(setting, positions);
    let lower = points.iter().rev().find(|(p, _)| *p <= x)?;
    let upper = points.iter().find(|(p, _)| *p >= x)?;
    if upper.0 == lower.0 {
        return Some(lower.1.clone());
    }
    let w = (x - lower.0) / (upper.0 - lower.0);
    // A chunk's time is in its number of chunks (1/chunk); a batch's in its rows.
    let time_w = match o.lever {
        Lever::Checkpoint { .. } => (1.0 / x - 1.0 / lower.0) / (1.0 / upper.0 - 1.0 / lower.0),
        _ => w,
    };
    let mut e = Effect::lerp(&lower.1, &upper.1, w, time_w);
    e.rows = rows_ratio(o, setting).or(e.rows);
    Some(e)
}

/// The rows a step holds under `setting` over the start's (its lever's
/// current setting), for a lever that changes them: the batch, the
/// sequence length, micro-batches. `None` for any other lever.
pub(super) fn rows_ratio(o: &Options, setting: &Setting) -> Option<f64> {
    let ratio = |now: f64, then: f64| (now > 0.0).then(|| then / now);
    match (&o.lever, &o.current, setting) {
        (Lever::Batch { .. }, Setting::Batch { size: now }, Setting::Batch { size }) => {
            ratio(*now as f64, *size as f64)
        }
        (Lever::Accumulation { .. }, Setting::Accumulation { batch: now, .. }, Setting::Accumulation { batch, .. }) => {
            ratio(*now as f64, *batch as f64)
        }
        (Lever::Sequence { .. }, Setting::Config { value: now, .. }, Setting::Config { value, .. }) => {
            ratio(now.as_f64()?, value.as_f64()?)
        }
        _ => None,
    }
}

/// A figure `start` moved by `effects`' differences `delta`, of which
/// `state` is each lever's change of the state the figure holds
/// (parameters, gradients, the optimizer's state: bytes that do not grow
/// with the rows).
///
/// Levers of the rows (the batch, the sequence length, micro-batches) split
/// the figure into a part that stays and parts that scale with them. Each
/// such probe reads the part its lever scales: with rows ρ, a figure s → q
/// keeps (q − ρ·s)/(1 − ρ) and scales g = s − that. Two such parts are
/// taken to overlap as far as they can ([`rows_scaled`]): where both
/// levers scale the same bytes they multiply (half the batch at half the
/// length is a quarter of the rows, not the two halvings added), and where
/// one lever moves bytes the other leaves, only that lever scales them (a
/// language model whose kept activations grow with the batch and not with
/// the length: a quarter of the batch at half the length keeps the quarter
/// batch's figure, where one fixed part averaged over both probes
/// predicted 77,293 B against 40,096 B measured).
/// Any other lever was probed at the start's rows: its change of the
/// state stays as it is, and the rest scales the rows' part by the share it
/// took of it (bf16 halves the activations at any batch). Added, bf16 and a
/// quarter of the batch took more than the plain TFT's figure held:
/// predicted 106.9 MiB, measured 935.7 MiB on an H100 (docs/gpu.md).
/// Without a lever of the rows, levers compose in proportion (each takes
/// its share of what the others left), so two cuts of the same bytes are
/// not counted twice. A figure the start does not have (a recompute's part
/// where nothing recomputed) is added to.
pub(super) fn moved(
    start: f64,
    effects: &[Effect],
    delta: impl Fn(&Effect) -> f64,
    state: impl Fn(&Effect) -> f64,
) -> f64 {
    if start <= 0.0 {
        return effects.iter().map(&delta).sum();
    }
    // A lever of the rows at the start's own rows moves the figure as any other.
    let rows_of = |e: &Effect| e.rows.filter(|rho| (rho - 1.0).abs() > f64::EPSILON);
    let scaling: Vec<(f64, f64)> = effects.iter().filter_map(|e| Some((rows_of(e)?, delta(e)))).collect();
    let others = effects.iter().filter(|e| rows_of(e).is_none());
    if scaling.is_empty() {
        let proportion: f64 = others.map(|e| ((start + delta(e)) / start).max(0.0)).product();
        return start * proportion - start;
    }
    let parts: Vec<(f64, f64)> = scaling
        .iter()
        .map(|&(rho, d)| {
            let kept = (((start + d) - rho * start) / (1.0 - rho)).clamp(0.0, start);
            (rho, start - kept)
        })
        .collect();
    let (scaled, rows_part) = rows_scaled(&parts);
    let mut fixed = start - scaled;
    let mut share = 1.0;
    for e in others {
        let d = delta(e);
        let of_rows = d - state(e);
        // What the rows' part cannot give stays with the fixed part (AdamW
        // in slices: the optimizer's temporaries, whatever the batch).
        let taken = if scaled > 0.0 { of_rows.max(-scaled) } else { 0.0 };
        fixed += d - taken;
        if scaled > 0.0 {
            share *= 1.0 + taken / scaled;
        }
    }
    fixed.max(0.0) + rows_part * share - start
}

/// The bytes levers of the rows scale, and what is left of them under
/// their settings, from each lever's rows ratio ρ and the part g it was
/// measured to scale alone. The parts are nested, largest outermost: the
/// smallest is scaled by every lever, the next one's excess by every
/// lever but the smallest's, and so on, so the bytes any lever scales are
/// the largest part, and two levers that scale the same bytes multiply.
pub(super) fn rows_scaled(parts: &[(f64, f64)]) -> (f64, f64) {
    let mut parts = parts.to_vec();
    parts.sort_by(|a, b| b.1.total_cmp(&a.1));
    let mut left = 0.0;
    let mut rows = 1.0;
    for (i, (rho, g)) in parts.iter().enumerate() {
        rows *= rho;
        let inner = parts.get(i + 1).map_or(0.0, |p| p.1);
        left += (g - inner) * rows;
    }
    (parts.first().map_or(0.0, |p| p.1), left)
}

/// Every combination of settings (the spec's own excluded), predicted and
/// ranked.
pub(super) fn predict_all(
    c: &Component,
    options: &[Options],
    effects: &[BTreeMap<usize, (Setting, Effect)>],
    start: &Figures,
) -> Vec<Candidate> {
    let mut combos: Vec<Vec<(usize, Setting)>> = vec![Vec::new()];
    for (i, o) in options.iter().enumerate() {
        let mut next = Vec::new();
        for combo in &combos {
            for s in std::iter::once(&o.current).chain(&o.others) {
                if *s != o.current && same_run_as_another(o, &effects[i], s) {
                    continue;
                }
                let mut k = combo.clone();
                if *s != o.current {
                    k.push((i, s.clone()));
                }
                next.push(k);
            }
        }
        combos = next;
    }
    let out: Vec<Candidate> = combos
        .into_iter()
        .filter(|k| !k.is_empty())
        // Both set the batch: accumulation keeps the rows a step, the batch
        // lever changes them.
        .filter(|k| {
            !(k.iter().any(|(_, s)| matches!(s, Setting::Batch { .. }))
                && k.iter().any(|(_, s)| matches!(s, Setting::Accumulation { .. })))
        })
        .filter_map(|k| {
            let parts: Option<Vec<Effect>> = k
                .iter()
                .map(|(i, s)| effect_of(&options[*i], &effects[*i], s))
                .collect();
            let figures = predict(c, start, &parts?);
            let predicted: BTreeMap<Metric, f64> = figures.iter().map(|(m, f)| (*m, f.predicted)).collect();
            let fails = failing(c, &predicted);
            Some(Candidate {
                settings: k.into_iter().map(|(_, s)| s).collect(),
                figures,
                outcome: if fails.is_empty() {
                    Outcome::PredictedPass
                } else {
                    Outcome::PredictedFail
                },
                fails,
                error: None,
            })
        })
        .collect();
    let riders: Vec<bool> = out.iter().map(|k| carries_a_rider(k, &out)).collect();
    let mut out: Vec<(bool, Candidate)> = riders.into_iter().zip(out).collect();
    // Those predicted to pass first, then those with no setting along for
    // the ride, each group cheapest first.
    out.sort_by(|(ra, a), (rb, b)| {
        let fails = |k: &Candidate| k.outcome != Outcome::PredictedPass;
        fails(a).cmp(&fails(b)).then(ra.cmp(rb)).then(
            rank(a, c.batch_size, options)
                .partial_cmp(&rank(b, c.batch_size, options))
                .unwrap_or(std::cmp::Ordering::Equal),
        )
    });
    out.into_iter().map(|(_, k)| k).collect()
}

/// The step-time ratios two predictions must differ by to be told apart:
/// separate profiles' steps vary by 7–9 % on a loaded CPU (docs/plan.md).
const TIME_NOISE: f64 = 0.10;

/// Whether `k`, predicted to pass, carries a setting it does not need: the
/// same settings less that one are also predicted to pass, at a step time
/// within the noise. A lever's time probe can come out lower by chance (a
/// loaded machine), and a setting that changes nothing (AdamW's slices
/// where `optimizer: sgd` leaves no AdamW) then ranked ahead of the same
/// candidate without it.
pub(super) fn carries_a_rider(k: &Candidate, all: &[Candidate]) -> bool {
    let time = |k: &Candidate| k.figures.get(&Metric::StepTimeRatio).map_or(1.0, |f| f.predicted);
    k.outcome == Outcome::PredictedPass
        && k.settings.len() >= 2
        && all.iter().any(|less| {
            less.outcome == Outcome::PredictedPass
                && less.settings.len() + 1 == k.settings.len()
                && less.settings.iter().all(|s| k.settings.contains(s))
                && time(less) <= time(k) * (1.0 + TIME_NOISE)
        })
}

/// The figures of what a step keeps whatever its rows: what the model and
/// its optimizer hold.
const STATE: [Metric; 3] = [Metric::Params, Metric::Gradients, Metric::Optimizer];

/// A lever's change of the state every phase of a step holds.
pub(super) fn state_of(e: &Effect) -> f64 {
    STATE.iter().filter_map(|m| e.bytes.get(m)).sum()
}

/// A candidate's figures from the start's and its settings' effects.
pub(super) fn predict(c: &Component, start: &Figures, parts: &[Effect]) -> BTreeMap<Metric, Figure> {
    let mut values = start.values.clone();
    for (metric, v) in values.iter_mut() {
        if metric.unit() == Unit::Bytes {
            let m = *metric;
            let delta = |e: &Effect| e.bytes.get(&m).copied().unwrap_or(0.0);
            // A state figure is all state; the inference peak holds the
            // parameters (bf16 with f32 masters adds their casts there, and
            // halves the rows' part: qwen2 of tests/adopters/transformers-0-11
            // at a quarter of the batch in bf16 measured 3.80 MB, predicted
            // 3.07 MB when the added parameters were read as rows); any
            // other holds none of it.
            let state = |e: &Effect| match m {
                _ if STATE.contains(&m) => delta(e),
                Metric::InferencePeak => e.bytes.get(&Metric::Params).copied().unwrap_or(0.0),
                _ => 0.0,
            };
            *v = (*v + moved(*v, parts, delta, state)).max(0.0);
        }
    }
    // The training peak: the highest of the step's phases, each moved by
    // every lever.
    if !start.phase_peaks.is_empty() {
        let part = |p: Part| {
            let base = start.phase_peaks.get(&p).copied().unwrap_or(0.0);
            base + moved(base, parts, |e| e.phases.get(&p).copied().unwrap_or(0.0), state_of)
        };
        let mut peaks: BTreeMap<Part, f64> = self::parts().map(|p| (p, part(p))).collect();
        // Micro-batches after the first run their forward inside the
        // step's backward, beside the gradients summed so far: that
        // forward's peak and the gradients, wherever the probes put it. The
        // llama of tests/adopters/transformers-0-11 at four micro-batches
        // of 2, half the length and SGD peaked there at 7.53 MB, where the
        // backward moved as a phase predicted 5.6 MB.
        if parts.iter().any(|e| e.micro_batches) {
            let gradients = values.get(&Metric::Gradients).copied().unwrap_or(0.0);
            for inside in [false, true] {
                let forward = peaks.get(&("forward", inside)).copied().unwrap_or(0.0);
                if forward > 0.0 {
                    let backward = peaks.entry(("backward", inside)).or_insert(0.0);
                    *backward = backward.max(forward + gradients);
                }
            }
        }
        let highest = peaks.values().copied().fold(0.0, f64::max);
        values.insert(Metric::TrainingPeak, start.offset + highest);
    }
    let time: f64 = parts.iter().map(|e| e.time).product();
    let loss: f64 = parts.iter().map(|e| e.loss).product();
    if let Some(t) = values.get_mut(&Metric::StepTime) {
        *t *= time;
    }
    if let Some(l) = values.get_mut(&Metric::Loss) {
        *l *= loss;
    }
    // Ratios against the start's reference (the start itself when it has none).
    let start_ratio = start.values.get(&Metric::StepTimeRatio).copied().unwrap_or(1.0);
    values.insert(Metric::StepTimeRatio, start_ratio * time);
    let start_loss = start.values.get(&Metric::LossRatio).copied().unwrap_or(1.0);
    values.insert(Metric::LossRatio, start_loss * loss);
    let mut shown: Vec<Metric> = c.budgets.iter().map(|b| b.metric).collect();
    shown.extend([Metric::TrainingPeak, Metric::StepTimeRatio]);
    if parts.iter().any(|e| e.loss != 1.0) {
        shown.push(Metric::LossRatio);
    }
    shown
        .into_iter()
        .filter_map(|m| {
            Some((
                m,
                Figure {
                    predicted: *values.get(&m)?,
                    measured: None,
                },
            ))
        })
        .collect()
}

/// The budgets of `c` that `values` fail (a figure absent is not judged).
pub(super) fn failing(c: &Component, values: &BTreeMap<Metric, f64>) -> Vec<Metric> {
    c.budgets
        .iter()
        .filter(|b: &&Budget| {
            values
                .get(&b.metric)
                .is_some_and(|v| !b.limit.op.holds(*v, b.limit.value))
        })
        .map(|b| b.metric)
        .collect()
}
