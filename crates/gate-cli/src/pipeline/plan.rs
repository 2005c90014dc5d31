//! The planner behind `gate plan COMPONENT` and `check --plan`: the
//! measured fix for a component over budget.
//!
//! 1. The component is measured as the spec has it (the start).
//! 2. Each lever its workload declares (and the batch, gate's own) is
//!    measured alone at one or two settings (the probes): what it does to
//!    each phase's peak (forward, backward, optimizer, from the memory
//!    timeline), to every byte figure, to the step time and to the loss.
//! 3. Every combination of the levers' settings is predicted from those
//!    (the cost model below), and those predicted to pass every budget of
//!    the component are ranked: least predicted step-time cost first, then
//!    fewest levers changed, then fewest that change the loss.
//! 4. The most promising few are measured as variants of the start in one
//!    run each (exact bytes; the step-time ratio in interleaved pairs with
//!    the start, as `gate check` times a variant), and the cheapest that
//!    passes is printed as the spec lines to change (`--apply` writes them),
//!    with predicted against measured figures for every candidate run.
//!
//! The cost model: a training step's peak is the highest of its phases'
//! peaks; a lever moves each phase's peak by what its probe measured
//! (checkpointing moves the forward's and the backward's, AdamW in slices
//! the optimizer's), so levers that act on different phases compose
//! where the peak moves between phases; a setting between two probed ones
//! is interpolated (bytes linear in the chunk, time linear in the number of
//! chunks). Other byte figures add the probes' differences; times and
//! losses multiply their ratios. Levers that change the loss (batch,
//! dtype) are probed only when no other combination is predicted to pass,
//! or with `--all-levers`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::errors::CliError;
use gate_contract::measurement::Measurement;
use gate_contract::plan::{self, Candidate, Figure, Lever, Outcome, Plan, Probe, Setting};
use gate_probe::timeline::Event;
use gate_probe::{Backend, Timeline};
use gate_runner::exit::Exit;
use gate_runner::{run_child, ChildArgs};
use gate_spec::budget::{Budget, Component, Spec};
use gate_spec::config::Node;
use gate_spec::dtype::DType;
use gate_spec::hint::Problem;
use gate_spec::metric::{format_value, Metric, Unit};

/// The phases of a training step whose peaks make the training peak.
const STEP_PHASES: [&str; 3] = ["forward", "backward", "optimizer"];

/// A part of a step: a phase, inside the checkpointable blocks' scopes
/// (their forward, their recompute) or outside them.
type Part = (&'static str, bool);

/// What one profile gave the cost model.
#[derive(Debug, Clone, Default)]
struct Figures {
    values: BTreeMap<Metric, f64>,
    /// Each part's peak above the timeline's base.
    phase_peaks: BTreeMap<Part, f64>,
    /// training_peak − the highest phase peak (what lies outside the samples).
    offset: f64,
}

impl Figures {
    /// `m`'s figures, its ratios against `reference` (the component the
    /// ratio budgets compare with) where it ran no interleaved pairs, the
    /// timeline split at `blocks`.
    fn of(m: &Measurement, reference: Option<&Figures>, blocks: &[String]) -> Figures {
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
        }
    }
}

/// The highest live bytes in each step phase of a timeline, inside the
/// scopes of `blocks` and outside them: a sample's peak is the highest
/// since the sample before, so it belongs to where the step was before the
/// sample's own event.
pub(super) fn phase_peaks(t: &Timeline, blocks: &[String]) -> BTreeMap<Part, f64> {
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

/// Every part of a step.
fn parts() -> impl Iterator<Item = Part> {
    STEP_PHASES.iter().flat_map(|p| [(*p, false), (*p, true)])
}

/// One lever's options: the spec's own setting first, then the others.
struct Options {
    lever: Lever,
    current: Setting,
    others: Vec<Setting>,
}

/// A probed setting's effect, relative to the start.
#[derive(Debug, Clone)]
struct Effect {
    /// Difference of each part's peak (a part the profile did not see counts 0).
    phases: BTreeMap<Part, f64>,
    /// Difference of each byte figure.
    bytes: BTreeMap<Metric, f64>,
    /// Step time factor.
    time: f64,
    /// Loss factor.
    loss: f64,
    /// For a lever that changes the rows a step holds (the batch, the
    /// sequence length, micro-batches): the rows' ratio to the start's.
    rows: Option<f64>,
}

impl Effect {
    fn none() -> Effect {
        Effect {
            phases: BTreeMap::new(),
            bytes: BTreeMap::new(),
            time: 1.0,
            loss: 1.0,
            rows: None,
        }
    }

    fn between(start: &Figures, probe: &Figures) -> Effect {
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
        }
    }

    /// `a + (b − a)·w` for every part.
    fn lerp(a: &Effect, b: &Effect, w: f64, time_w: f64) -> Effect {
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
        }
    }
}

/// How a plan runs.
pub(crate) struct PlanOptions {
    /// How many candidates predicted to pass are measured.
    pub measure: usize,
    /// Whether the levers that change the loss are probed from the start.
    pub all_levers: bool,
}

/// The plan for `c` (a component of `loaded`'s spec), from `start` (its
/// measurement, when the caller has one) and the profiles it runs.
pub(crate) fn plan_component(
    loaded: &super::harness::Loaded,
    c: &Component,
    backend: Backend,
    opts: &PlanOptions,
    measured: Measured,
) -> Result<Plan, CliError> {
    let spec: &Spec = &loaded.spec;
    let config = loaded.config(&c.name).unwrap_or(serde_json::Value::Null);
    let options = options_of(c, &config, loaded.levers(&c.name));
    // The checkpointable blocks: the timeline is split at their scopes.
    let blocks: Vec<String> = options
        .iter()
        .filter_map(|o| match &o.lever {
            Lever::Checkpoint { blocks, .. } => Some(blocks.clone()),
            _ => None,
        })
        .flatten()
        .collect();
    let mut runner = Runner::new(loaded.profiler(), backend);
    // The ratio budgets compare with the component's reference; on the
    // CPU (no interleaved pairs) its own profile's step time and loss.
    let has_ratio = c.budgets.iter().any(|b| b.metric.ratio_of().is_some());
    let reference = match (&c.reference, measured.reference) {
        (Some(_), Some(m)) => Some(Figures::of(&m, None, &blocks)),
        (Some(r), None) if has_ratio => {
            eprintln!("{}: measuring its reference `{r}`", c.name);
            Some(Figures::of(&runner.measure(loaded.request(), r, r)?, None, &blocks))
        }
        _ => None,
    };
    let start_m = match measured.start {
        Some(m) => m,
        None => {
            eprintln!("{}: measuring it as the spec has it", c.name);
            runner.measure(loaded.request(), &c.name, "the start")?
        }
    };
    let start = Figures::of(&start_m, reference.as_ref(), &blocks);
    // A candidate's ratios are against the reference, or the start itself.
    let against = reference.clone().unwrap_or_else(|| start.clone());
    let mut plan = Plan {
        schema: plan::SCHEMA,
        component: c.name.clone(),
        backend: backend.name().into(),
        levers: options.iter().map(|o| o.lever.clone()).collect(),
        start: start.values.clone(),
        start_fails: failing(c, &start.values),
        probes: Vec::new(),
        candidates: Vec::new(),
        chosen: None,
        profiles: 0,
    };
    if plan.start_passes() {
        plan.profiles = runner.profiles;
        return Ok(plan);
    }

    // Probes: each lever alone; those that change the loss only when the
    // others cannot pass (or with --all-levers).
    let mut effects: Vec<BTreeMap<usize, (Setting, Effect)>> = options.iter().map(|_| BTreeMap::new()).collect();
    let probe = |plan: &mut Plan,
                 runner: &mut Runner,
                 effects: &mut Vec<BTreeMap<usize, (Setting, Effect)>>,
                 todo: Vec<(usize, Setting)>|
     -> Result<(), CliError> {
        let first = plan.probes.len();
        let probe_name = |k: usize| format!("{}@probe-{}", c.name, first + k);
        let probe_spec = with_components(
            spec,
            todo.iter()
                .enumerate()
                .map(|(k, (_, s))| apply(c, std::slice::from_ref(s), &probe_name(k), None))
                .collect(),
        );
        let request = super::harness::Loaded::request_for(&probe_spec)?;
        for (k, (i, setting)) in todo.into_iter().enumerate() {
            eprintln!("{}: probing {}", c.name, setting.yaml());
            let m = runner.measure(request.as_ref(), &probe_name(k), &setting.yaml())?;
            let f = Figures::of(&m, Some(&against), &blocks);
            let error = m.failure.as_ref().map(|f| format!("{} in phase {}", f.reason, f.phase));
            plan.probes.push(Probe {
                setting: setting.clone(),
                values: f.values.clone(),
                error: error.clone(),
            });
            if error.is_none() {
                let key = effects[i].len();
                let mut e = Effect::between(&start, &f);
                e.rows = rows_ratio(&options[i], &setting);
                effects[i].insert(key, (setting, e));
            }
        }
        Ok(())
    };
    for loss_round in [false, true] {
        let todo: Vec<(usize, Setting)> = options
            .iter()
            .enumerate()
            .filter(|(_, o)| match opts.all_levers {
                true => !loss_round,
                false => o.lever.changes_loss() == loss_round,
            })
            .flat_map(|(i, o)| probe_settings(o).into_iter().map(move |s| (i, s)))
            .collect();
        probe(&mut plan, &mut runner, &mut effects, todo)?;
        plan.candidates = predict_all(c, &options, &effects, &start);
        // Near the limit, an interpolated setting is measured before it is
        // ruled out: where a cheaper candidate than the cheapest predicted
        // to pass fails a size budget by little, its unprobed settings are
        // probed, and everything predicted again.
        for _ in 0..REFINEMENTS {
            let Some(todo) = refinement(c, &options, &effects, &plan.candidates) else {
                break;
            };
            probe(&mut plan, &mut runner, &mut effects, todo)?;
            plan.candidates = predict_all(c, &options, &effects, &start);
        }
        let any_pass = plan.candidates.iter().any(|k| k.outcome == Outcome::PredictedPass);
        if any_pass || opts.all_levers || !options.iter().any(|o| o.lever.changes_loss()) {
            break;
        }
    }

    // The most promising few, each measured as a variant of the start.
    let to_measure: Vec<usize> = plan
        .candidates
        .iter()
        .enumerate()
        .filter(|(_, k)| k.outcome == Outcome::PredictedPass)
        .map(|(i, _)| i)
        .take(opts.measure)
        .collect();
    let reference_name = c.reference.clone().unwrap_or_else(|| c.name.clone());
    let candidate_name = |i: usize| format!("{}@plan-{i}", c.name);
    let measured_spec = with_components(
        spec,
        to_measure
            .iter()
            .map(|&i| {
                apply(
                    c,
                    &plan.candidates[i].settings,
                    &candidate_name(i),
                    Some(reference_name.clone()),
                )
            })
            .collect(),
    );
    let request = super::harness::Loaded::request_for(&measured_spec)?;
    for &i in &to_measure {
        let what = yaml_of(&plan.candidates[i].settings);
        eprintln!("{}: measuring {what}", c.name);
        let m = runner.measure(request.as_ref(), &candidate_name(i), &what)?;
        let f = Figures::of(&m, Some(&against), &blocks);
        let k = &mut plan.candidates[i];
        for (metric, fig) in k.figures.iter_mut() {
            fig.measured = f.values.get(metric).copied();
        }
        if let Some(fail) = &m.failure {
            k.outcome = Outcome::Error;
            k.error = Some(format!("{} in phase {}", fail.reason, fail.phase));
            continue;
        }
        k.fails = failing(c, &f.values);
        k.outcome = if k.fails.is_empty() {
            Outcome::Pass
        } else {
            Outcome::Fail
        };
    }
    plan.chosen = plan.candidates.iter().position(|k| k.outcome == Outcome::Pass);
    plan.profiles = runner.profiles;
    Ok(plan)
}

/// What the caller measured already: the component, its reference.
#[derive(Default)]
pub(crate) struct Measured {
    pub start: Option<Measurement>,
    pub reference: Option<Measurement>,
}

/// How many rounds of probes near the limit a plan may add.
const REFINEMENTS: usize = 3;

/// How far over a size budget a predicted figure may be and still be
/// probed: interpolation's error near a limit is this order.
const NEAR: f64 = 0.25;

/// The settings to probe next: those of the cheapest candidate ranked
/// before the first predicted to pass that fails only size budgets, each
/// by less than [`NEAR`], and has settings not yet probed.
fn refinement(
    c: &Component,
    options: &[Options],
    effects: &[BTreeMap<usize, (Setting, Effect)>],
    candidates: &[Candidate],
) -> Option<Vec<(usize, Setting)>> {
    let mut ranked: Vec<&Candidate> = candidates.iter().collect();
    ranked.sort_by(|a, b| {
        rank(a, c.batch_size, options)
            .partial_cmp(&rank(b, c.batch_size, options))
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    for k in ranked {
        if k.outcome == Outcome::PredictedPass {
            return None;
        }
        let near = !k.fails.is_empty()
            && k.fails.iter().all(|m| {
                let Some(b) = c.budgets.iter().find(|b| b.metric == *m) else {
                    return false;
                };
                m.unit() == Unit::Bytes
                    && b.limit.op.is_max()
                    && k.figures
                        .get(m)
                        .is_some_and(|f| f.predicted <= b.limit.value * (1.0 + NEAR))
            });
        if !near {
            continue;
        }
        let todo: Vec<(usize, Setting)> = k
            .settings
            .iter()
            .filter_map(|s| {
                let i = options.iter().position(|o| o.others.contains(s))?;
                let probed = effects[i].values().any(|(p, _)| p == s);
                (!probed).then(|| (i, s.clone()))
            })
            .collect();
        if !todo.is_empty() {
            return Some(todo);
        }
    }
    None
}

/// A candidate's place in the ranking, whatever its outcome: fewer levers
/// that change the loss, then less predicted time a sample (a smaller
/// batch's step is shorter, and there are more of them), then fewer levers.
fn rank(k: &Candidate, batch: usize, options: &[Options]) -> (usize, f64, usize) {
    // As its lever says: a config key a workload marks `changes_loss` counts
    // as the batch and the dtype do.
    let loss = k
        .settings
        .iter()
        .filter(|s| options.iter().any(|o| o.others.contains(s) && o.lever.changes_loss()))
        .count();
    let per_step = k.figures.get(&Metric::StepTimeRatio).map_or(1.0, |f| f.predicted);
    let rows = k
        .settings
        .iter()
        .find_map(|s| match s {
            Setting::Batch { size } => Some(*size as f64 / batch as f64),
            _ => None,
        })
        .unwrap_or(1.0);
    (loss, per_step / rows, k.settings.len())
}

/// Starts profiles and counts them.
pub(super) struct Runner {
    exe: PathBuf,
    backend: Backend,
    pub(super) profiles: usize,
}

impl Runner {
    pub(super) fn new(exe: &Path, backend: Backend) -> Runner {
        Runner {
            exe: exe.to_path_buf(),
            backend,
            profiles: 0,
        }
    }

    pub(super) fn measure(&mut self, request: &Path, name: &str, what: &str) -> Result<Measurement, CliError> {
        let args = ChildArgs {
            extra: vec!["--backend".into(), self.backend.name().into()],
            ..Default::default()
        };
        self.profiles += 1;
        let m = run_child(&self.exe, request, name, &args, &mut |_| {});
        if let Some(sig) = gate_runner::interrupted() {
            let name = if sig == 15 { "SIGTERM" } else { "SIGINT" };
            eprintln!("gate plan: interrupted by {name}: profile stopped");
            return Err(CliError::Reported(Exit::Interrupted));
        }
        let m =
            m.map_err(|e| CliError::Infrastructure(Problem::new(format!("cannot start the profile of {what}: {e}"))))?;
        if let Some(f) = m.failure.as_ref().filter(|f| gate_runner::infrastructure_failure(f)) {
            return Err(CliError::Infrastructure(
                Problem::new(format!(
                    "the profile of {what} failed in phase {}: {}",
                    f.phase, f.reason
                ))
                .with_hint("this is not the configuration's memory: fix the harness or the machine, then plan again"),
            ));
        }
        Ok(m)
    }
}

/// Each lever's options for `c`: its setting in the spec, and the others
/// the lever offers. The batch is gate's own lever, offered for every
/// component with a batch of 2 or more.
fn options_of(c: &Component, config: &serde_json::Value, mut levers: Vec<Lever>) -> Vec<Options> {
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
            let (current, others): (Setting, Vec<Setting>) = match &lever {
                Lever::Checkpoint { chunks, .. } => (
                    Setting::Checkpoint { chunk: c.checkpoint },
                    chunks
                        .iter()
                        .filter(|&&n| Some(n) != c.checkpoint && n > 0)
                        .map(|&n| Setting::Checkpoint { chunk: Some(n) })
                        .collect(),
                ),
                Lever::Config { key, values, .. } => {
                    let now = config.get(key).cloned().unwrap_or(serde_json::Value::Null);
                    (
                        Setting::Config {
                            key: key.clone(),
                            value: now.clone(),
                        },
                        values
                            .iter()
                            .filter(|v| **v != now)
                            .map(|v| Setting::Config {
                                key: key.clone(),
                                value: v.clone(),
                            })
                            .collect(),
                    )
                }
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
                    let now = config.get(key).cloned().unwrap_or(serde_json::Value::Null);
                    let setting = |value: serde_json::Value| Setting::Config {
                        key: key.clone(),
                        value,
                    };
                    (
                        setting(now.clone()),
                        lengths
                            .iter()
                            .map(|&n| serde_json::Value::from(n))
                            .filter(|v| *v != now)
                            .map(setting)
                            .collect(),
                    )
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
            };
            (!others.is_empty()).then_some(Options { lever, current, others })
        })
        .collect()
}

/// The settings a lever is probed at: the two ends of its range where it
/// has one (a chunk, a batch), else each.
fn probe_settings(o: &Options) -> Vec<Setting> {
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
fn scalar(s: &Setting) -> f64 {
    match s {
        Setting::Checkpoint { chunk: Some(n) } => *n as f64,
        Setting::Checkpoint { chunk: None } => f64::INFINITY,
        Setting::Batch { size } => *size as f64,
        _ => 0.0,
    }
}

/// The effect of `setting` on the start: probed, or interpolated between
/// the probed settings around it (and the start, where it lies between).
/// `None`: nothing to predict it from.
fn effect_of(o: &Options, probed: &BTreeMap<usize, (Setting, Effect)>, setting: &Setting) -> Option<Effect> {
    if *setting == o.current {
        return Some(Effect::none());
    }
    if let Some((_, e)) = probed.values().find(|(s, _)| s == setting) {
        return Some(e.clone());
    }
    if !matches!(o.lever, Lever::Checkpoint { .. } | Lever::Batch { .. }) {
        return None;
    }
    // Points on the axis: the probes, and the start where it is on it.
    let mut points: Vec<(f64, Effect)> = probed.values().map(|(s, e)| (scalar(s), e.clone())).collect();
    let here = scalar(&o.current);
    if here.is_finite() {
        points.push((here, Effect::none()));
    }
    points.sort_by(|a, b| a.0.total_cmp(&b.0));
    let x = scalar(setting);
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
fn rows_ratio(o: &Options, setting: &Setting) -> Option<f64> {
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

/// A figure `start` moved by `effects`' differences `delta`: added, except
/// where every lever that moves it changes only the rows a step holds.
/// Then it is a part that stays (`fixed`, read from each such probe: with
/// rows ρ, a figure s → q has fixed part (q − ρ·s)/(1 − ρ)) and a part that
/// scales with the rows, so two of them multiply (half the batch at half
/// the length is a quarter of the rows, not the two halvings added).
fn moved(start: f64, effects: &[Effect], delta: impl Fn(&Effect) -> f64) -> f64 {
    let added: f64 = effects.iter().map(&delta).sum();
    let others_move = effects
        .iter()
        .filter(|e| e.rows.is_none())
        .any(|e| delta(e).abs() > 0.01 * start.abs().max(1.0));
    let scaling: Vec<(f64, f64)> = effects
        .iter()
        .filter_map(|e| Some((e.rows?, delta(e))))
        .filter(|(rho, _)| (rho - 1.0).abs() > f64::EPSILON)
        .collect();
    if others_move || scaling.len() < 2 {
        return added;
    }
    let fixed = scaling
        .iter()
        .map(|(rho, d)| ((start + d) - rho * start) / (1.0 - rho))
        .sum::<f64>()
        / scaling.len() as f64;
    let fixed = fixed.clamp(0.0, start.max(0.0));
    let rows: f64 = scaling.iter().map(|(rho, _)| rho).product();
    let others: f64 = effects.iter().filter(|e| e.rows.is_none()).map(&delta).sum();
    fixed + (start - fixed) * rows + others - start
}

/// Every combination of settings (the spec's own excluded), predicted and
/// ranked.
fn predict_all(
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
                let mut k = combo.clone();
                if *s != o.current {
                    k.push((i, s.clone()));
                }
                next.push(k);
            }
        }
        combos = next;
    }
    let mut out: Vec<Candidate> = combos
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
    // Those predicted to pass first, each group cheapest first.
    out.sort_by(|a, b| {
        let fails = |k: &Candidate| k.outcome != Outcome::PredictedPass;
        fails(a).cmp(&fails(b)).then(
            rank(a, c.batch_size, options)
                .partial_cmp(&rank(b, c.batch_size, options))
                .unwrap_or(std::cmp::Ordering::Equal),
        )
    });
    out
}

/// A candidate's figures from the start's and its settings' effects.
fn predict(c: &Component, start: &Figures, parts: &[Effect]) -> BTreeMap<Metric, Figure> {
    let mut values = start.values.clone();
    for (metric, v) in values.iter_mut() {
        if metric.unit() == Unit::Bytes {
            let m = *metric;
            *v = (*v + moved(*v, parts, |e| e.bytes.get(&m).copied().unwrap_or(0.0))).max(0.0);
        }
    }
    // The training peak: the highest of the step's phases, each moved by
    // every lever.
    if !start.phase_peaks.is_empty() {
        let highest = self::parts()
            .map(|p| {
                let base = start.phase_peaks.get(&p).copied().unwrap_or(0.0);
                base + moved(base, parts, |e| e.phases.get(&p).copied().unwrap_or(0.0))
            })
            .fold(0.0, f64::max);
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
fn failing(c: &Component, values: &BTreeMap<Metric, f64>) -> Vec<Metric> {
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

fn names(ms: &[Metric]) -> String {
    ms.iter().map(|m| m.name()).collect::<Vec<_>>().join(", ")
}

fn shown_values(values: &BTreeMap<Metric, f64>, ms: &[Metric]) -> String {
    ms.iter()
        .filter_map(|m| Some(format!("{} {}", m.name(), format_value(m.unit(), *values.get(m)?))))
        .collect::<Vec<_>>()
        .join(", ")
}

fn yaml_of(settings: &[Setting]) -> String {
    settings.iter().map(Setting::yaml).collect::<Vec<_>>().join(", ")
}

/// `spec` with `extra` components added after its own.
pub(super) fn with_components(spec: &Spec, extra: Vec<Component>) -> Spec {
    let mut s = spec.clone();
    s.components.extend(extra);
    s
}

/// `c` with `settings` applied, named `name`, its ratios against `reference`.
pub(super) fn apply(c: &Component, settings: &[Setting], name: &str, reference: Option<String>) -> Component {
    let mut k = c.clone();
    k.name = name.to_string();
    k.reference = reference;
    for s in settings {
        match s {
            Setting::Checkpoint { chunk } => k.checkpoint = *chunk,
            Setting::Config { key, value } => {
                let over = Node::from_json(&serde_json::json!({ key.as_str(): value }), k.config.pos);
                k.config = k.config.overlaid(&over);
            }
            Setting::Batch { size } => k.batch_size = *size,
            Setting::Accumulation { key, steps, batch } => {
                k.batch_size = *batch;
                let over = Node::from_json(&serde_json::json!({ key.as_str(): steps }), k.config.pos);
                k.config = k.config.overlaid(&over);
            }
            Setting::Dtype { dtype } => {
                k.dtype = *dtype;
                if *dtype != DType::F32 && k.master_dtype.is_none() {
                    k.master_dtype = Some(DType::F32);
                }
            }
        }
    }
    if k.reference.is_none() {
        // A probe: no ratio phase, and no budget that needs one.
        k.budgets.retain(|b| b.metric.ratio_of().is_none());
    }
    k
}

/// The spec edits of `settings`, in gate-spec's terms.
pub(crate) fn edits_of(settings: &[Setting]) -> Vec<gate_spec::budget::edit::Edit> {
    use gate_spec::budget::edit::Edit;
    settings
        .iter()
        .flat_map(|s| match s {
            Setting::Checkpoint { chunk } => vec![Edit::Checkpoint(*chunk)],
            Setting::Config { key, value } => vec![Edit::Config(key.clone(), value.to_string())],
            Setting::Batch { size } => vec![Edit::Key("batch_size".into(), size.to_string())],
            Setting::Accumulation { key, steps, batch } => vec![
                Edit::Key("batch_size".into(), batch.to_string()),
                Edit::Config(key.clone(), steps.to_string()),
            ],
            Setting::Dtype { dtype } if *dtype == DType::F32 => vec![Edit::Key("dtype".into(), dtype.to_string())],
            Setting::Dtype { dtype } => vec![
                Edit::Key("dtype".into(), dtype.to_string()),
                Edit::Key("master_weights".into(), "f32".into()),
            ],
        })
        .collect()
}

fn show(metric: Metric, v: f64) -> String {
    match metric.unit() {
        Unit::Bytes => format_value(Unit::Bytes, v),
        _ if metric.ratio_of().is_some() => format!("{v:.2}x"),
        unit => format_value(unit, v),
    }
}

pub(crate) fn print_plan(c: &Component, plan: &Plan) {
    if plan.start_passes() {
        println!("{}: passes every budget as it is; nothing to plan", c.name);
        return;
    }
    println!(
        "{}: fails {} as the spec has it ({})",
        c.name,
        names(&plan.start_fails),
        shown_values(&plan.start, &plan.start_fails)
    );
    let measured: Vec<&Candidate> = plan.candidates.iter().filter(|k| k.outcome.is_measured()).collect();
    let predicted_pass = plan
        .candidates
        .iter()
        .filter(|k| k.outcome == Outcome::PredictedPass)
        .count();
    println!(
        "\n{}: {} configurations predicted from {} probes, {} predicted to pass, {} measured ({} profiles in all)",
        c.name,
        plan.candidates.len(),
        plan.probes.len(),
        predicted_pass + measured.iter().filter(|k| k.outcome != Outcome::PredictedPass).count(),
        measured.len(),
        plan.profiles
    );
    for k in &measured {
        println!("\n  {}: {}", yaml_of(&k.settings), outcome_words(k));
        for (metric, f) in &k.figures {
            let measured = f.measured.map_or("—".into(), |v| show(*metric, v));
            let error = f
                .error()
                .map_or(String::new(), |e| format!("  error {:+.1} %", e * 100.0));
            println!(
                "    {:<16} predicted {:>12}  measured {:>12}{error}",
                metric.name(),
                show(*metric, f.predicted),
                measured
            );
        }
    }
    if let Some(i) = plan.chosen {
        let k = &plan.candidates[i];
        println!(
            "\nthe cheapest configuration that passes (least step-time cost, then least change), for component `{}`:",
            c.name
        );
        for s in &k.settings {
            println!("  + {}", s.yaml());
        }
        println!("  (`gate plan {} --apply` writes it)", c.name);
    }
}

fn outcome_words(k: &Candidate) -> String {
    match k.outcome {
        Outcome::Pass => "measured: passes every budget".into(),
        Outcome::Fail => format!("measured: fails {}", names(&k.fails)),
        Outcome::Error => format!("its profile failed: {}", k.error.clone().unwrap_or_default()),
        Outcome::PredictedPass => "predicted to pass (not measured)".into(),
        Outcome::PredictedFail => "predicted to fail".into(),
    }
}

pub(crate) fn write_plan(out: &Path, plan: &Plan) -> Result<(), CliError> {
    write_json(out, "plan.json", plan)
}

/// Writes `value` as `out/name` (the folder made first), and says so.
pub(super) fn write_json(out: &Path, name: &str, value: &impl serde::Serialize) -> Result<(), CliError> {
    let path = out.join(name);
    let fail = |e: String| {
        CliError::Infrastructure(
            Problem::new(format!("cannot write {}: {e}", path.display()))
                .with_hint("pass a writable folder with --out"),
        )
    };
    std::fs::create_dir_all(out).map_err(|e| fail(e.to_string()))?;
    let json = serde_json::to_string_pretty(value).map_err(|e| fail(e.to_string()))?;
    std::fs::write(&path, json).map_err(|e| fail(e.to_string()))?;
    eprintln!("wrote {}", path.display());
    Ok(())
}

/// `--plan`: a plan for each selected component (not a variant) whose
/// measured figures fail one of its size budgets, from its own profile and
/// its reference's.
pub(crate) fn plans_for_failing(
    loaded: &crate::pipeline::harness::Loaded,
    selected: &[&gate_spec::budget::Component],
    profiled: &[gate_runner::Profiled],
    backend: Backend,
) -> Result<BTreeMap<String, gate_contract::plan::Plan>, CliError> {
    let measurement = |name: &str| {
        profiled
            .iter()
            .find(|p| p.name == name)
            .and_then(|p| p.result.as_ref().ok())
            .cloned()
    };
    let mut plans = BTreeMap::new();
    for c in selected
        .iter()
        .filter(|c| !c.name.contains('@') && c.generate.is_none())
    {
        let Some(m) = measurement(&c.name) else { continue };
        let fails_size = c.budgets.iter().any(|b| {
            b.metric.unit() == gate_spec::metric::Unit::Bytes
                && b.limit.op.is_max()
                && m.values
                    .get(&b.metric)
                    .is_some_and(|v| !b.limit.op.holds(*v, b.limit.value))
        });
        if !fails_size || m.failure.as_ref().is_some_and(gate_runner::infrastructure_failure) {
            continue;
        }
        eprintln!("{}: fails a size budget; planning its measured fix (--plan)", c.name);
        let given = Measured {
            start: Some(m),
            reference: c.reference.as_deref().and_then(measurement),
        };
        let options = PlanOptions {
            measure: 2,
            all_levers: false,
        };
        let plan = plan_component(loaded, c, backend, &options, given)?;
        print_plan(c, &plan);
        plans.insert(c.name.clone(), plan);
    }
    Ok(plans)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn effect(phases: &[(&'static str, bool, f64)], time: f64) -> Effect {
        Effect {
            phases: phases.iter().map(|(p, i, v)| ((*p, *i), *v)).collect(),
            bytes: BTreeMap::new(),
            time,
            loss: 1.0,
            rows: None,
        }
    }

    #[test]
    fn two_levers_of_the_rows_multiply_where_they_alone_move_a_figure() {
        // 100 fixed + 5,300 that scales with the rows; half the batch and
        // half the length each measured alone at 2,750.
        let rows = |rho: f64| Effect {
            rows: Some(rho),
            ..Effect::none()
        };
        let start = 5400.0;
        let both = [rows(0.5), rows(0.5)];
        let d = moved(start, &both, |_| 2750.0 - start);
        assert_eq!(start + d, 100.0 + 5300.0 * 0.25);
        // A lever that is not of the rows moving the figure: added, as before.
        let mut checkpoint = Effect::none();
        checkpoint.bytes.insert(Metric::TrainingPeak, -5000.0);
        let three = [rows(0.5), rows(0.5), checkpoint];
        let d = moved(start, &three, |e| {
            e.bytes.get(&Metric::TrainingPeak).copied().unwrap_or(2750.0 - start)
        });
        assert_eq!(d, -5000.0 - 2.0 * 2650.0);
    }

    #[test]
    fn levers_on_different_phases_compose_where_the_peak_moves() {
        // The start: its peak in backward (1000), optimizer 300.
        let start = Figures {
            values: [(Metric::TrainingPeak, 1000.0)].into_iter().collect(),
            phase_peaks: [
                (("forward", false), 600.0),
                (("backward", false), 1000.0),
                (("optimizer", false), 300.0),
            ]
            .into_iter()
            .collect(),
            offset: 0.0,
        };
        let c = component_with(&[(Metric::TrainingPeak, 250.0)]);
        // Checkpointing takes backward outside the block to 200 and puts
        // its recompute (inside the block) at 180; the peak is then the
        // optimizer's 300. Slicing takes the optimizer to 150.
        let ckpt = effect(
            &[
                ("forward", false, -500.0),
                ("backward", false, -800.0),
                ("backward", true, 180.0),
            ],
            1.5,
        );
        let slice = effect(&[("optimizer", false, -150.0)], 1.0);
        let alone = predict(&c, &start, std::slice::from_ref(&ckpt));
        assert_eq!(alone[&Metric::TrainingPeak].predicted, 300.0);
        let both = predict(&c, &start, &[ckpt, slice]);
        assert_eq!(both[&Metric::TrainingPeak].predicted, 200.0);
        assert_eq!(both[&Metric::StepTimeRatio].predicted, 1.5);
    }

    #[test]
    fn a_chunk_between_two_probes_is_interpolated_in_bytes_and_in_chunks() {
        let o = Options {
            lever: Lever::Checkpoint {
                blocks: vec![],
                chunks: vec![32, 64, 128],
            },
            current: Setting::Checkpoint { chunk: None },
            others: [32, 64, 128].map(|n| Setting::Checkpoint { chunk: Some(n) }).to_vec(),
        };
        let probed: BTreeMap<usize, (Setting, Effect)> = [
            (
                0,
                (
                    Setting::Checkpoint { chunk: Some(32) },
                    effect(&[("backward", true, 300.0)], 2.0),
                ),
            ),
            (
                1,
                (
                    Setting::Checkpoint { chunk: Some(128) },
                    effect(&[("backward", true, 600.0)], 1.25),
                ),
            ),
        ]
        .into_iter()
        .collect();
        let e = effect_of(&o, &probed, &Setting::Checkpoint { chunk: Some(64) }).unwrap();
        // Bytes: a third of the way from 32 to 128.
        assert_eq!(e.phases[&("backward", true)], 400.0);
        // Time: 1/64 lies 2/3 of the way from 1/32 to 1/128.
        assert!((e.time - 1.5).abs() < 1e-12, "{}", e.time);
        assert_eq!(probe_settings(&o).len(), 2);
    }

    #[test]
    fn a_sample_peak_belongs_to_where_the_step_was_before_its_event() {
        use gate_probe::timeline::Sample;
        let s = |peak, event| Sample {
            t_us: 0,
            live: 0,
            peak,
            event,
        };
        let t = Timeline {
            source: "cpu".into(),
            base_bytes: 0,
            samples: vec![
                s(0, Event::Phase("forward".into())),
                s(50, Event::Enter("tft.encoder_vsn".into())),
                s(60, Event::Exit("tft.encoder_vsn".into())),
                s(70, Event::Phase("backward".into())),
                s(80, Event::Enter("encoder_vsn (recompute)".into())),
                s(95, Event::Exit("encoder_vsn (recompute)".into())),
                s(90, Event::Phase("optimizer".into())),
                s(40, Event::End),
            ],
            dropped: 0,
            peak: None,
        };
        let p = phase_peaks(&t, &["encoder_vsn".to_string()]);
        assert_eq!(p[&("forward", false)], 70.0);
        assert_eq!(p[&("forward", true)], 60.0);
        assert_eq!(p[&("backward", false)], 90.0);
        assert_eq!(p[&("backward", true)], 95.0);
        assert_eq!(p[&("optimizer", false)], 40.0);
        // No blocks: nothing inside.
        assert!(phase_peaks(&t, &[]).keys().all(|(_, inside)| !inside));
    }

    fn component_with(budgets: &[(Metric, f64)]) -> Component {
        let yaml = "version: 1\ndevice: { name: card, capacity: 4 GiB, reserve: 300 MiB }\ncomponents:\n  m:\n    workload: mlp\n    budgets:\n      training_peak: < 1 GB\n";
        let spec = gate_spec::budget::parse_bytes(Path::new("b.yaml"), yaml.as_bytes()).unwrap();
        let mut c = spec.components[0].clone();
        for (b, (m, v)) in c.budgets.iter_mut().zip(budgets) {
            b.metric = *m;
            b.limit.value = *v;
        }
        c
    }
}
