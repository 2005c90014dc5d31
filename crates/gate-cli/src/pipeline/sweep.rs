//! `gate plan COMPONENT --sweep`: "will it fit?" over a grid of batch
//! sizes × sequence lengths × dtypes, from a few exact profiles.
//!
//! Every byte figure of a training step grows with the rows and the
//! positions it holds: a constant part (parameters, gradients, optimizer
//! state, what does not depend on the input), a part per row, a part per
//! position that all rows share (a rotary table, a causal mask), and a part
//! per token (activations, batch × sequence). So each quantity — every
//! byte metric, each step phase's peak, each block's kept bytes — is fitted
//! as `constant + per_row·B + per_position·S + per_token·B·S` through four
//! profiles at the two smallest batches × the two smallest lengths, where
//! it is exact. A lower dtype is measured at two of those corners and its
//! figures predicted as a straight line in the spec dtype's. The training
//! peak is predicted as the highest of its phases' fitted peaks (plus what
//! lies outside the samples), so a peak that moves from the optimizer to
//! the backward as the batch grows is still followed.
//!
//! The fit is checked every run: one predicted point (the largest the
//! first capacity is predicted to hold) is measured, and its error is
//! printed and written beside it.

use std::collections::BTreeMap;
use std::path::Path;

use crate::errors::CliError;
use gate_contract::measurement::Measurement;
use gate_contract::plan::{Figure, Lever, Setting};
use gate_contract::sweep::{self, Capacity, DtypeScale, Fit, Point, SeqAxis, Source, Sweep};
use gate_probe::Backend;
use gate_spec::budget::{Component, Timing};
use gate_spec::dtype::DType;
use gate_spec::hint::Problem;
use gate_spec::metric::{format_value, Unit};

use super::plan::{apply, phase_peaks, with_components, Runner};

/// What the caller asked of the grid (`None`: the defaults below).
#[derive(Debug, Default)]
pub(crate) struct SweepOptions {
    pub batches: Option<Vec<usize>>,
    pub seq_lens: Option<Vec<usize>>,
    pub dtypes: Option<Vec<DType>>,
    /// Capacities asked for beside the spec's card, as written and in bytes.
    pub capacities: Vec<(String, f64)>,
    /// How many profiles run at once (`--jobs`).
    pub jobs: usize,
}

/// How a sweep's profiles are timed: they give the fit bytes, so each takes
/// the two training steps its byte figures come from (the first, then the
/// steady step, where the training peak is read) and none of the spec's
/// further timed steps, whose step time and growth the grid does not show.
/// The repository's TFT over its sweep test's five profiles: 36.2 s against
/// 58.7 s with the spec's `timing: { warmup: 1, steps: 3 }`, every figure
/// the same (docs/plan.md).
const BYTES_ONLY: Timing = Timing {
    warmup: 1,
    steps: 1,
    pairs: Some(0),
};

/// What lies outside the phases' samples: the training peak less the
/// highest phase peak, fitted as any other quantity.
const OUTSIDE: &str = "outside_phases";

/// A step phase's peak inside or outside the checkpointable blocks' scopes
/// (`part.backward.inside`): within one phase, a recomputed block's fixed
/// working memory and the rest's activations peak at different moments,
/// and the larger at the probes need not be the larger on the grid.
const PART: &str = "part.";

/// One grid coordinate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct At {
    dtype_rank: usize,
    batch: usize,
    seq: Option<usize>,
}

fn usage(message: String, hint: &str) -> CliError {
    CliError::Usage(Problem::new(message).with_hint(hint))
}

/// Sorted, without duplicates or zeros.
fn axis(mut v: Vec<usize>) -> Vec<usize> {
    v.retain(|&n| n >= 1);
    v.sort_unstable();
    v.dedup();
    v
}

/// The sweep of `c` (a component of `loaded`'s spec).
pub(crate) fn sweep_component(
    loaded: &super::harness::Loaded,
    c: &Component,
    backend: Backend,
    opts: &SweepOptions,
) -> Result<Sweep, CliError> {
    let axes = axes(loaded, c, opts)?;
    let mut probe = Prober {
        loaded,
        c,
        axes: &axes,
        runner: Runner::new(loaded.profiler(), backend, opts.jobs),
    };

    // The exact points: the two smallest batches × the two smallest lengths.
    let (b1, b2) = (axes.batches[0], axes.batches[1]);
    let lens: Vec<Option<usize>> = match &axes.seq {
        Some(a) => vec![Some(a.lengths[0]), Some(a.lengths[1])],
        None => vec![None],
    };
    let corner = |batch, seq| At {
        dtype_rank: 0,
        batch,
        seq,
    };
    let base: Vec<At> = lens.iter().flat_map(|&s| [corner(b1, s), corner(b2, s)]).collect();
    let base_q = probe.measure(&base)?;
    let fits = fit_all(&base, &base_q);
    let mut measured: BTreeMap<At, BTreeMap<String, f64>> = base.iter().copied().zip(base_q).collect();
    let scales = dtype_scales(&mut probe, &fits, &base, &mut measured)?;
    let model = Model {
        fits,
        scales,
        dtypes: &axes.dtypes,
    };

    let capacities = capacities(loaded, &opts.capacities);
    let grid = grid(&axes);
    let check = point_to_check(&grid, &measured, &model, &capacities);
    if let Some(at) = check {
        let q = probe.measure(&[at])?;
        measured.extend([(at, q.into_iter().next().unwrap_or_default())]);
    }
    let points = grid
        .iter()
        .chain(measured.keys().filter(|a| !grid.contains(a)))
        .map(|at| {
            let source = match (measured.contains_key(at), Some(*at) == check) {
                (false, _) => Source::Predicted,
                (true, true) => Source::Remeasured,
                (true, false) => Source::Measured,
            };
            point(at, source, &model, measured.get(at), &capacities)
        })
        .collect();
    let profiles = probe.runner.profiles;
    let Model { fits, scales, .. } = model;
    Ok(Sweep {
        schema: sweep::SCHEMA,
        component: c.name.clone(),
        backend: backend.name().into(),
        batches: axes.batches,
        seq: axes.seq,
        dtypes: axes.dtypes,
        capacities,
        points,
        fits: fits.into_iter().filter(|(n, _)| n != OUTSIDE).collect(),
        dtype_scales: scales,
        profiles,
    })
}

/// What a sweep varies and reads: its batch sizes, its sequence axis
/// (where the workload declares one), its dtypes (the spec's first, where
/// the fit is made) and the checkpointable blocks whose kept bytes it fits.
struct Axes {
    batches: Vec<usize>,
    seq: Option<SeqAxis>,
    dtypes: Vec<DType>,
    blocks: Vec<String>,
}

/// The axes of `c`'s sweep: asked in `opts`, else from the spec and the
/// workload's levers.
fn axes(loaded: &super::harness::Loaded, c: &Component, opts: &SweepOptions) -> Result<Axes, CliError> {
    let levers = loaded.levers(&c.name);
    let b0 = c.batch_size.max(1);
    let batches = axis(
        opts.batches
            .clone()
            .unwrap_or_else(|| vec![b0 / 4, b0 / 2, b0, b0 * 2, b0 * 4]),
    );
    if batches.len() < 2 {
        return Err(usage(
            "a sweep needs two batch sizes at least".into(),
            "give them with --batches, e.g. --batches 8,16,32",
        ));
    }
    let config = loaded.config(&c.name).unwrap_or(serde_json::Value::Null);
    let seq = seq_axis(c, &config, &levers, opts.seq_lens.as_ref())?;
    let declared_dtypes = levers.iter().find_map(|l| match l {
        Lever::Dtype { dtypes } => Some(dtypes.clone()),
        _ => None,
    });
    let mut dtypes = vec![c.dtype];
    for d in opts.dtypes.clone().or(declared_dtypes).unwrap_or_default() {
        if !dtypes.contains(&d) {
            dtypes.push(d);
        }
    }
    let blocks: Vec<String> = levers
        .iter()
        .filter_map(|l| match l {
            Lever::Checkpoint { blocks, .. } => Some(blocks.clone()),
            _ => None,
        })
        .flatten()
        .collect();
    Ok(Axes {
        batches,
        seq,
        dtypes,
        blocks,
    })
}

/// The sequence axis: the workload's `Lever::Sequence` key, at the lengths
/// asked, else those it declares, the config's own and twice that.
fn seq_axis(
    c: &Component,
    config: &serde_json::Value,
    levers: &[Lever],
    asked: Option<&Vec<usize>>,
) -> Result<Option<SeqAxis>, CliError> {
    let declared = levers.iter().find_map(|l| match l {
        Lever::Sequence { key, lengths } => Some((key.clone(), lengths.clone())),
        _ => None,
    });
    let Some((key, declared)) = declared else {
        return match asked {
            Some(_) => Err(usage(
                format!("`{}`'s workload declares no sequence length", c.name),
                "sweep the batch and the dtype alone (leave out --seq-lens), or declare a \
                 `Lever::Sequence` in the workload's `levers`",
            )),
            None => Ok(None),
        };
    };
    let now = config.get(&key).and_then(serde_json::Value::as_u64).map(|n| n as usize);
    let lengths = axis(match asked {
        Some(v) => v.clone(),
        None => declared.into_iter().chain(now).chain(now.map(|n| n * 2)).collect(),
    });
    if lengths.len() < 2 {
        return Err(usage(
            "a sweep needs two sequence lengths at least".into(),
            "give them with --seq-lens, e.g. --seq-lens 30,60,120",
        ));
    }
    Ok(Some(SeqAxis { key, lengths }))
}

/// Profiles points of the grid: the spec with one variant per point,
/// started in turn and counted.
struct Prober<'a> {
    loaded: &'a super::harness::Loaded,
    c: &'a Component,
    axes: &'a Axes,
    runner: Runner,
}

impl Prober<'_> {
    /// The settings that make the spec's component the point `at`.
    fn settings(&self, at: &At) -> Vec<Setting> {
        let mut s = vec![Setting::Batch { size: at.batch }];
        if let (Some(axis), Some(n)) = (&self.axes.seq, at.seq) {
            s.push(Setting::Config {
                key: axis.key.clone(),
                value: n.into(),
            });
        }
        let dtype = self.axes.dtypes[at.dtype_rank];
        if dtype != self.c.dtype {
            s.push(Setting::Dtype { dtype });
        }
        s
    }

    fn describe(&self, at: &At) -> String {
        let key = self.axes.seq.as_ref().map(|a| a.key.as_str());
        point_words(at.batch, key, at.seq, self.axes.dtypes[at.dtype_rank])
    }

    /// Each point's quantities, exactly; a point whose profile fails ends
    /// the sweep (it fits from exact points only).
    fn measure(&mut self, points: &[At]) -> Result<Vec<BTreeMap<String, f64>>, CliError> {
        let c = self.c;
        let names: Vec<String> = (0..points.len())
            .map(|k| format!("{}@sweep-{}", c.name, self.runner.profiles + k))
            .collect();
        let variants = points
            .iter()
            .zip(&names)
            .map(|(at, n)| Component {
                timing: BYTES_ONLY,
                ..apply(c, &self.settings(at), n, None)
            })
            .collect();
        let spec = with_components(&self.loaded.spec, variants);
        let request = super::harness::Loaded::request_for(&spec)?;
        let named: Vec<(String, String)> = (names.into_iter())
            .zip(points.iter().map(|at| self.describe(at)))
            .collect();
        let ms = (self.runner).measure_all(request.as_ref(), &named, &|what| {
            eprintln!("{}: profiling {what}", c.name)
        })?;
        let mut out = Vec::new();
        for ((_, what), m) in named.iter().zip(ms) {
            if let Some(f) = &m.failure {
                return Err(CliError::Infrastructure(
                    Problem::new(format!(
                        "the profile at {what} failed in phase {}: {}",
                        f.phase, f.reason
                    ))
                    .with_hint("a sweep fits from exact points: give smaller --batches or --seq-lens"),
                ));
            }
            out.push(quantities(&m, &self.axes.blocks));
        }
        Ok(out)
    }
}

/// Each lower dtype, measured at two corners of `base` (kept in
/// `measured`): its figures as a straight line in the spec dtype's fitted
/// ones, per quantity.
fn dtype_scales(
    probe: &mut Prober<'_>,
    fits: &BTreeMap<String, Fit>,
    base: &[At],
    measured: &mut BTreeMap<At, BTreeMap<String, f64>>,
) -> Result<BTreeMap<String, BTreeMap<String, DtypeScale>>, CliError> {
    let mut scales = BTreeMap::new();
    for (rank, dtype) in probe.axes.dtypes.iter().enumerate().skip(1) {
        let pair = [base[0], base[base.len() - 1]].map(|at| At { dtype_rank: rank, ..at });
        let q = probe.measure(&pair)?;
        let mut per = BTreeMap::new();
        for (name, f) in fits {
            let (Some(w1), Some(w2)) = (q[0].get(name), q[1].get(name)) else {
                continue;
            };
            let (u1, u2) = (f.at(pair[0].batch, pair[0].seq), f.at(pair[1].batch, pair[1].seq));
            let scale = if (u2 - u1).abs() > f64::EPSILON {
                (w2 - w1) / (u2 - u1)
            } else {
                1.0
            };
            per.insert(
                name.clone(),
                DtypeScale {
                    constant: w1 - scale * u1,
                    scale,
                },
            );
        }
        scales.insert(dtype.to_string(), per);
        measured.extend(pair.into_iter().zip(q));
    }
    Ok(scales)
}

/// The fitted figures: each quantity's fit in the spec's dtype and each
/// lower dtype's line through it.
struct Model<'a> {
    fits: BTreeMap<String, Fit>,
    scales: BTreeMap<String, BTreeMap<String, DtypeScale>>,
    dtypes: &'a [DType],
}

impl Model<'_> {
    /// Every quantity predicted at `at`; the step's peak its highest
    /// part's (each fitted alone) plus what lies outside the phases.
    fn predict(&self, at: &At) -> BTreeMap<String, f64> {
        let scale = (at.dtype_rank > 0).then(|| &self.scales[self.dtypes[at.dtype_rank].as_str()]);
        let mut out: BTreeMap<String, f64> = self
            .fits
            .iter()
            .filter_map(|(name, f)| {
                let v = f.at(at.batch, at.seq);
                match scale {
                    None => Some((name.clone(), v)),
                    Some(s) => s.get(name).map(|d| (name.clone(), d.constant + d.scale * v)),
                }
            })
            .collect();
        let phases = out.iter().filter(|(k, _)| k.starts_with(PART)).map(|(_, v)| *v);
        if let (Some(top), Some(outside)) = (phases.reduce(f64::max), out.get(OUTSIDE).copied()) {
            out.insert(sweep::TRAINING_PEAK.into(), top + outside);
        }
        out
    }

    fn peak(&self, at: &At) -> f64 {
        self.predict(at)
            .get(sweep::TRAINING_PEAK)
            .copied()
            .unwrap_or(f64::INFINITY)
    }
}

/// Every point of the grid: each dtype × batch × length.
fn grid(axes: &Axes) -> Vec<At> {
    let lens: Vec<Option<usize>> = match &axes.seq {
        Some(a) => a.lengths.iter().map(|&n| Some(n)).collect(),
        None => vec![None],
    };
    let mut grid = Vec::new();
    for dtype_rank in 0..axes.dtypes.len() {
        for &batch in &axes.batches {
            for &seq in &lens {
                grid.push(At { dtype_rank, batch, seq });
            }
        }
    }
    grid
}

/// The one predicted point measured again: the largest the first capacity
/// is predicted to hold (the answer a team acts on), else the smallest.
fn point_to_check(
    grid: &[At],
    measured: &BTreeMap<At, BTreeMap<String, f64>>,
    model: &Model<'_>,
    capacities: &[Capacity],
) -> Option<At> {
    let fits_first = |v: f64| capacities.first().is_none_or(|cap| v <= cap.usable_bytes);
    let unmeasured: Vec<At> = grid.iter().copied().filter(|a| !measured.contains_key(a)).collect();
    unmeasured
        .iter()
        .filter(|a| fits_first(model.peak(a)))
        .max_by(|a, b| model.peak(a).total_cmp(&model.peak(b)))
        .or_else(|| unmeasured.iter().min_by(|a, b| model.peak(a).total_cmp(&model.peak(b))))
        .copied()
}

/// One point of the sweep: each figure predicted, and measured where it was.
fn point(
    at: &At,
    source: Source,
    model: &Model<'_>,
    exact: Option<&BTreeMap<String, f64>>,
    capacities: &[Capacity],
) -> Point {
    let predicted = model.predict(at);
    let mut names: Vec<&String> = predicted.keys().collect();
    if let Some(e) = exact {
        names.extend(e.keys());
    }
    names.sort();
    names.dedup();
    let figures: BTreeMap<String, Figure> = names
        .into_iter()
        .filter(|n| n.as_str() != OUTSIDE && !n.starts_with(PART))
        .map(|n| {
            let m = exact.and_then(|e| e.get(n)).copied();
            let p = predicted.get(n).copied().or(m).unwrap_or(0.0);
            (
                n.clone(),
                Figure {
                    predicted: p,
                    measured: m,
                },
            )
        })
        .collect();
    let mut point = Point {
        batch: at.batch,
        seq_len: at.seq,
        dtype: model.dtypes[at.dtype_rank],
        source,
        figures,
        fits: Vec::new(),
    };
    let peak = point.training_peak().unwrap_or(f64::INFINITY);
    point.fits = capacities.iter().map(|cap| peak <= cap.usable_bytes).collect();
    point
}

/// The card of the spec and those asked for, each less the spec's
/// per-process reserve (the context a process costs beside its tensors).
fn capacities(loaded: &super::harness::Loaded, asked: &[(String, f64)]) -> Vec<Capacity> {
    let device = &loaded.spec.device;
    let reserve = device.reserve.0 as f64;
    let mut out = vec![Capacity {
        name: format!("card ({}, {})", device.name, device.capacity),
        usable_bytes: device.capacity.0 as f64 - reserve,
    }];
    out.extend(asked.iter().map(|(name, bytes)| Capacity {
        name: name.clone(),
        usable_bytes: bytes - reserve,
    }));
    out
}

/// Every quantity a profile gives the fit: its byte metrics, each phase's
/// peak (and its parts inside and outside the checkpointable `blocks`,
/// which the training peak is predicted from), each block's kept bytes,
/// and what lies outside the phases.
fn quantities(m: &Measurement, blocks: &[String]) -> BTreeMap<String, f64> {
    let mut q: BTreeMap<String, f64> = m
        .values
        .iter()
        .filter(|(metric, _)| metric.unit() == Unit::Bytes)
        .map(|(metric, v)| (metric.name().to_string(), *v))
        .collect();
    if let Some(t) = &m.timeline {
        let mut highest: f64 = 0.0;
        for ((phase, inside), v) in phase_peaks(t, blocks) {
            let e = q.entry(format!("phase.{phase}")).or_insert(0.0);
            *e = e.max(v);
            let side = if inside { "inside" } else { "outside" };
            q.insert(format!("{PART}{phase}.{side}"), v);
            highest = highest.max(v);
        }
        if let Some(tp) = m.values.get(&gate_spec::metric::Metric::TrainingPeak) {
            q.insert(OUTSIDE.into(), tp - highest);
        }
    }
    for b in &m.blocks {
        q.insert(format!("block.{}", b.name), b.retained_bytes as f64);
    }
    q
}

/// Each quantity every base point has, fitted through them: exact at the
/// four corners (two with no sequence axis).
fn fit_all(points: &[At], q: &[BTreeMap<String, f64>]) -> BTreeMap<String, Fit> {
    let mut out = BTreeMap::new();
    let Some(first) = q.first() else {
        return out;
    };
    for name in first.keys() {
        let v: Option<Vec<f64>> = q.iter().map(|m| m.get(name).copied()).collect();
        let Some(v) = v else { continue };
        out.insert(name.clone(), fit(points, &v));
    }
    out
}

/// The fit through two points in the batch (`points` `[b1, b2]`), or four
/// (`[(b1,s1), (b2,s1), (b1,s2), (b2,s2)]`).
fn fit(points: &[At], v: &[f64]) -> Fit {
    let line = |i: usize| {
        let (x1, x2) = (points[i].batch as f64, points[i + 1].batch as f64);
        let slope = (v[i + 1] - v[i]) / (x2 - x1);
        (v[i] - slope * x1, slope)
    };
    let (p1, q1) = line(0);
    if points.len() < 4 {
        return Fit {
            constant: p1,
            per_row: q1,
            per_position: 0.0,
            per_token: 0.0,
        };
    }
    let (p2, q2) = line(2);
    let (s1, s2) = (points[0].seq.unwrap_or(1) as f64, points[2].seq.unwrap_or(1) as f64);
    let per_position = (p2 - p1) / (s2 - s1);
    let per_token = (q2 - q1) / (s2 - s1);
    Fit {
        constant: p1 - per_position * s1,
        per_row: q1 - per_token * s1,
        per_position,
        per_token,
    }
}

/// A grid point in words: `batch 64 × sequence_length 120 (f32)`.
fn point_words(batch: usize, key: Option<&str>, seq: Option<usize>, dtype: DType) -> String {
    match (key, seq) {
        (Some(k), Some(n)) => format!("batch {batch} × {k} {n} ({dtype})"),
        _ => format!("batch {batch} ({dtype})"),
    }
}

/// The grid as a person reads it: the training peak, batch by sequence
/// length for each dtype, each cell marked measured or predicted; then,
/// per capacity, the largest batch it holds at each length; then the
/// re-measured point's error.
pub(crate) fn print_sweep(s: &Sweep) {
    println!(
        "{}: will it fit? ({}; {} profiles; m: measured, r: predicted then measured, else predicted)",
        s.component, s.backend, s.profiles
    );
    let lens: Vec<Option<usize>> = match &s.seq {
        Some(a) => a.lengths.iter().map(|&n| Some(n)).collect(),
        None => vec![None],
    };
    print_grid(s, &lens);
    print_capacities(s, &lens);
    if let Some(p) = s.remeasured() {
        print_remeasured(s, p);
    }
}

/// The training peak of every point, a table per dtype: batch by length.
fn print_grid(s: &Sweep, lens: &[Option<usize>]) {
    let key = s.seq.as_ref().map(|a| a.key.as_str());
    for &dtype in &s.dtypes {
        println!("\ntraining peak, {dtype}");
        let mut header = format!("{:>8}", "batch");
        for l in lens {
            header += &match (key, l) {
                (Some(k), Some(n)) => format!("  {:>18}", format!("{k} {n}")),
                _ => format!("  {:>18}", ""),
            };
        }
        println!("{header}");
        for &b in &s.batches {
            let mut row = format!("{b:>8}");
            for l in lens {
                let cell = s
                    .points
                    .iter()
                    .find(|p| p.batch == b && p.seq_len == *l && p.dtype == dtype)
                    .and_then(|p| {
                        let mark = match p.source {
                            Source::Measured => " m",
                            Source::Remeasured => " r",
                            Source::Predicted => "  ",
                        };
                        Some(format!("{}{mark}", format_value(Unit::Bytes, p.training_peak()?)))
                    })
                    .unwrap_or_else(|| "—".into());
                row += &format!("  {cell:>18}");
            }
            println!("{row}");
        }
    }
}

/// For each capacity asked, the largest batch of the grid that fits it.
fn print_capacities(s: &Sweep, lens: &[Option<usize>]) {
    let key = s.seq.as_ref().map(|a| a.key.as_str());
    for (i, cap) in s.capacities.iter().enumerate() {
        println!(
            "\n{} — {} usable:",
            cap.name,
            format_value(Unit::Bytes, cap.usable_bytes)
        );
        for &dtype in &s.dtypes {
            for l in lens {
                let largest = s
                    .points
                    .iter()
                    .filter(|p| p.dtype == dtype && p.seq_len == *l && p.fits.get(i) == Some(&true))
                    .map(|p| p.batch)
                    .max();
                let at = match (key, l) {
                    (Some(k), Some(n)) => format!("{dtype}, {k} {n}"),
                    _ => dtype.to_string(),
                };
                match largest {
                    Some(b) => println!("  {at}: batch {b} fits"),
                    None => println!("  {at}: no batch of the grid fits"),
                }
            }
        }
    }
}

/// The re-measured point's predicted and measured figures, and a warning
/// where the fit misses it by more than [`MISS`].
fn print_remeasured(s: &Sweep, p: &Point) {
    let bytes = |v: f64| format_value(Unit::Bytes, v);
    let key = s.seq.as_ref().map(|a| a.key.as_str());
    println!(
        "\nre-measured {}, the fit's error there:",
        point_words(p.batch, key, p.seq_len, p.dtype)
    );
    // The point is the largest the first capacity is predicted to hold;
    // where none is, the smallest, and the reader is told why.
    let predicted_peak = p.figures.get(sweep::TRAINING_PEAK).map(|f| f.predicted);
    if let (Some(cap), Some(peak)) = (s.capacities.first(), predicted_peak) {
        if peak > cap.usable_bytes {
            println!(
                "  (no point is predicted to fit {} ({} usable): the smallest predicted is measured again instead)",
                cap.name,
                bytes(cap.usable_bytes)
            );
        }
    }
    let mut worst = 0f64;
    for name in [sweep::TRAINING_PEAK, "inference_peak", "activations"] {
        if let Some(f) = p.figures.get(name) {
            if let (Some(m), Some(e)) = (f.measured, f.error()) {
                println!(
                    "  {name:<16} predicted {:>12}  measured {:>12}  error {:+.1} %",
                    bytes(f.predicted),
                    bytes(m),
                    -e * 100.0
                );
                if name != "activations" {
                    worst = worst.max(e.abs());
                }
            }
        }
    }
    // Memory is bilinear in batch × length only once a step holds more
    // positions than its fixed costs (a checkpoint chunk, a kernel's
    // workspace): a grid below that fits badly, and its own
    // re-measured point is the only thing that can tell.
    if worst > MISS {
        eprintln!(
            "warning: the fit misses its re-measured point by {:.1} %: the grid's predicted figures are not to \
             be trusted near it",
            worst * 100.0
        );
        eprintln!(
            "hint: fit from points nearer those you ask about (`--batches`, `--seq-lens` with larger smallest \
             values), or measure the point itself with `gate check`"
        );
    }
}

/// The re-measured point's largest peak error above which the sweep says
/// its grid cannot be trusted.
const MISS: f64 = 0.10;

/// Writes `sweep.json` under `out`.
pub(crate) fn write_sweep(out: &Path, s: &Sweep) -> Result<(), CliError> {
    super::plan::write_json(out, "sweep.json", s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(batch: usize, seq: usize) -> At {
        At {
            dtype_rank: 0,
            batch,
            seq: Some(seq),
        }
    }

    #[test]
    fn a_bilinear_quantity_is_recovered_from_four_corners() {
        // 1 MiB fixed, 1 KiB a row, 4 KiB a position, 64 B a token.
        let truth = |b: usize, s: usize| 1048576.0 + 1024.0 * b as f64 + 4096.0 * s as f64 + 64.0 * (b * s) as f64;
        let corners = [at(8, 30), at(16, 30), at(8, 60), at(16, 60)];
        let v: Vec<f64> = corners.iter().map(|a| truth(a.batch, a.seq.unwrap())).collect();
        let f = fit(&corners, &v);
        assert_eq!(
            (f.constant, f.per_row, f.per_position, f.per_token),
            (1048576.0, 1024.0, 4096.0, 64.0)
        );
        assert_eq!(f.at(128, Some(240)), truth(128, 240));
    }

    #[test]
    fn with_no_sequence_axis_the_fit_is_a_line_in_the_batch() {
        let pts = [
            At {
                dtype_rank: 0,
                batch: 4,
                seq: None,
            },
            At {
                dtype_rank: 0,
                batch: 8,
                seq: None,
            },
        ];
        let f = fit(&pts, &[500.0, 900.0]);
        assert_eq!(
            (f.constant, f.per_row, f.per_position, f.per_token),
            (100.0, 100.0, 0.0, 0.0)
        );
    }
}
