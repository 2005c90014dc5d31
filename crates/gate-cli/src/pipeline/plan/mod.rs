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
//! chunks; a chunk past the positions the blocks ran over is one chunk of
//! them). Recomputing a block runs its forward again: the blocks'
//! forward time in the start's step (read from its memory timeline) is
//! reported with the plan, and on a GPU, where it is the least any chunk
//! costs, a checkpoint it alone puts over a `step_time_ratio` budget is
//! not probed (on the CPU a checkpointed step can be the faster one).
//! Other byte figures add the probes' differences; times and
//! losses multiply their ratios. Levers that change the loss (batch,
//! dtype) are probed only when no other combination is predicted to pass,
//! or with `--all-levers`.

mod edit;
mod model;
mod print;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::errors::CliError;
use gate_contract::measurement::Measurement;
use gate_contract::plan::{self, Candidate, Lever, Outcome, Plan, Probe, Setting};
use gate_probe::Backend;
use gate_runner::exit::Exit;
use gate_runner::ChildArgs;
use gate_spec::budget::{Component, Spec};
use gate_spec::hint::Problem;
use gate_spec::metric::{Metric, Unit};

pub(crate) use edit::edits_of;
pub(super) use edit::{apply, with_components};
pub(super) use model::phase_peaks;
use model::*;
pub(super) use print::write_json;
use print::*;
pub(crate) use print::{print_plan, write_plan};

/// How a plan runs.
pub(crate) struct PlanOptions {
    /// How many candidates predicted to pass are measured.
    pub measure: usize,
    /// Whether the levers that change the loss are probed from the start.
    pub all_levers: bool,
    /// How many profiles run at once (`--jobs`).
    pub jobs: usize,
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
    let mut runner = Runner::new(loaded.profiler(), backend, opts.jobs);
    // The ratio budgets compare with the component's reference; on the
    // CPU (no interleaved pairs) its own profile's step time and loss.
    let has_ratio = c.budgets.iter().any(|b| b.metric.ratio_of().is_some());
    // A reference profiled exactly as the start (`plain: {}` beside a
    // component that sets neither lever) is measured once, as the start.
    let same_as_start = c
        .reference
        .as_deref()
        .and_then(|r| spec.component(r))
        .is_some_and(|r| profiled_alike(loaded, c, r));
    let mut start_m = measured.start;
    let reference = match (&c.reference, measured.reference) {
        (Some(_), Some(m)) => Some(Figures::of(&m, None, &blocks)),
        (Some(r), None) if has_ratio && same_as_start => {
            let m = match start_m.take() {
                Some(m) => m,
                None => {
                    eprintln!(
                        "{}: measuring it as the spec has it (its reference `{r}` is the same configuration)",
                        c.name
                    );
                    runner.measure(loaded.request(), &c.name, "the start")?
                }
            };
            let reference = Figures::of(&m, None, &blocks);
            start_m = Some(m);
            Some(reference)
        }
        (Some(r), None) if has_ratio => {
            // Its reference and, when the caller has not measured it, the
            // start: side by side.
            let mut todo = vec![(r.clone(), r.clone())];
            if start_m.is_none() {
                todo.push((c.name.clone(), "the start".into()));
            }
            let mut ms = runner.measure_all(loaded.request(), &todo, &|what| {
                if what == r {
                    eprintln!("{}: measuring its reference `{r}`", c.name)
                } else {
                    eprintln!("{}: measuring it as the spec has it", c.name)
                }
            })?;
            if ms.len() == 2 {
                start_m = ms.pop();
            }
            Some(Figures::of(&ms.remove(0), None, &blocks))
        }
        _ => None,
    };
    let start_m = match start_m {
        Some(m) => m,
        None => {
            eprintln!("{}: measuring it as the spec has it", c.name);
            runner.measure(loaded.request(), &c.name, "the start")?
        }
    };
    let start = Figures::of(&start_m, reference.as_ref(), &blocks);
    if backend == Backend::Cpu {
        // A lever lowers the start's memory or leaves it: each later
        // profile holds about as much as the start did, in this machine's RAM.
        if let Some(&peak) = start.values.get(&Metric::TrainingPeak) {
            runner.fit_in_memory(&c.name, peak, available_memory());
        }
    }
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
        recompute_floor: start_m.timeline.as_ref().and_then(|t| recompute_floor(t, &blocks)),
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
        let named: Vec<(String, String)> = (todo.iter().enumerate())
            .map(|(k, (_, setting))| (probe_name(k), setting.yaml()))
            .collect();
        let ms = runner.measure_all(request.as_ref(), &named, &|what| {
            eprintln!("{}: probing {what}", c.name)
        })?;
        for ((i, setting), m) in todo.into_iter().zip(ms) {
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
                e.micro_batches = matches!(setting, Setting::Accumulation { steps, .. } if steps > 1);
                effects[i].insert(key, (setting, e));
            }
        }
        Ok(())
    };
    // On a GPU, from a start that recomputes nothing, the blocks' forward
    // time is what any chunk costs at least (their kernels run again):
    // past a step-time ceiling already, the checkpoint is not probed. Not
    // on the CPU, where the smaller working set can make a checkpointed
    // step faster than the plain one (the TFT's: 0.93-0.95x).
    let floor_fails = match (&plan.recompute_floor, c.checkpoint) {
        (Some(floor), None) if backend == Backend::Cuda => {
            let start_ratio = start.values.get(&Metric::StepTimeRatio).copied().unwrap_or(1.0);
            floor_fails_time(c, start_ratio, floor)
        }
        _ => None,
    };
    if let Some(least) = floor_fails {
        eprintln!(
            "{}: not probing the checkpoint: recomputing its blocks costs at least {least:.2}x the step (their forward time), over its step_time_ratio budget",
            c.name
        );
    }
    for loss_round in [false, true] {
        let todo: Vec<(usize, Setting)> = options
            .iter()
            .enumerate()
            .filter(|(_, o)| floor_fails.is_none() || !matches!(o.lever, Lever::Checkpoint { .. }))
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
    let named: Vec<(String, String)> = (to_measure.iter())
        .map(|&i| (candidate_name(i), yaml_of(&plan.candidates[i].settings)))
        .collect();
    let ms = runner.measure_all(request.as_ref(), &named, &|what| {
        eprintln!("{}: measuring {what}", c.name)
    })?;
    for (&i, m) in to_measure.iter().zip(ms) {
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
                let probed = effects[i].values().any(|(p, _)| p == s) || ran_as_probed(&options[i], &effects[i], s);
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

/// Starts profiles, up to `jobs` at a time, and counts them.
pub(super) struct Runner {
    exe: PathBuf,
    args: ChildArgs,
    jobs: usize,
    pub(super) profiles: usize,
}

impl Runner {
    /// `jobs` as `gate check --jobs`: the profiles of one round (a plan's
    /// probes, its candidates, a sweep's points) are independent processes,
    /// so their bytes are the same whatever it is; on a GPU their timed
    /// steps take turns.
    pub(super) fn new(exe: &Path, backend: Backend, jobs: usize) -> Runner {
        Runner {
            exe: exe.to_path_buf(),
            args: crate::pipeline::run::child_args(backend, false),
            jobs: jobs.max(1),
            profiles: 0,
        }
    }

    /// No more profiles side by side than the machine's available memory
    /// holds, each taking `peak` bytes (a CPU profile's training peak) and
    /// a quarter more for what the process holds besides its tensors.
    pub(super) fn fit_in_memory(&mut self, component: &str, peak: f64, available: Option<u64>) {
        let Some(available) = available else { return };
        let fits = jobs_in_memory(self.jobs, peak, available);
        if fits < self.jobs {
            eprintln!(
                "{component}: {fits} profile{} at a time, not {}: each may hold {:.1} GiB of the {:.1} GiB available",
                if fits == 1 { "" } else { "s" },
                self.jobs,
                peak * 1.25 / GIB,
                available as f64 / GIB
            );
            self.jobs = fits;
        }
    }

    /// One profile: `name` of `request`, `what` it is in messages.
    pub(super) fn measure(&mut self, request: &Path, name: &str, what: &str) -> Result<Measurement, CliError> {
        let todo = [(name.to_string(), what.to_string())];
        let mut all = self.measure_all(request, &todo, &|_| {})?;
        Ok(all.remove(0))
    }

    /// The profiles `todo` (each a component of `request` and what it is,
    /// for messages), side by side; `started` hears each as it starts.
    /// Their measurements in `todo`'s order; the first that could not be
    /// started or failed for the machine's reasons is the error.
    pub(super) fn measure_all(
        &mut self,
        request: &Path,
        todo: &[(String, String)],
        started: &(dyn Fn(&str) + Sync),
    ) -> Result<Vec<Measurement>, CliError> {
        let names: Vec<String> = todo.iter().map(|(name, _)| name.clone()).collect();
        let announce = |name: &str| {
            if let Some((_, what)) = todo.iter().find(|(n, _)| n == name) {
                started(what);
            }
        };
        self.profiles += todo.len();
        let profiled = gate_runner::profile_all(&self.exe, request, &names, &self.args, self.jobs, &|p| {
            if let gate_runner::Progress::Start(name) = p {
                announce(name);
            }
        });
        if let Some(sig) = gate_runner::interrupted() {
            let name = if sig == 15 { "SIGTERM" } else { "SIGINT" };
            eprintln!("gate plan: interrupted by {name}: profile stopped");
            return Err(CliError::Reported(Exit::Interrupted));
        }
        profiled
            .into_iter()
            .zip(todo)
            .map(|(p, (_, what))| {
                let m = p.result.map_err(|e| {
                    CliError::Infrastructure(Problem::new(format!("cannot start the profile of {what}: {e}")))
                })?;
                if let Some(f) = m.failure.as_ref().filter(|f| gate_runner::infrastructure_failure(f)) {
                    return Err(CliError::Infrastructure(
                        Problem::new(format!(
                            "the profile of {what} failed in phase {}: {}",
                            f.phase, f.reason
                        ))
                        .with_hint(
                            "this is not the configuration's memory: fix the harness or the machine, then plan again",
                        ),
                    ));
                }
                Ok(m)
            })
            .collect()
    }
}

const GIB: f64 = (1u64 << 30) as f64;

/// How many of `jobs` profiles of `peak` bytes each (and a quarter more)
/// fit in `available` bytes at once: at least one.
fn jobs_in_memory(jobs: usize, peak: f64, available: u64) -> usize {
    if peak <= 0.0 {
        return jobs;
    }
    let each = peak * 1.25;
    ((available as f64 / each).floor() as usize).clamp(1, jobs.max(1))
}

/// The machine's available memory (Linux's `MemAvailable`); `None`
/// where it cannot be read, and then nothing is limited.
fn available_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    Some(crate::pipeline::run::meminfo_kib(&text, "MemAvailable:")? * 1024)
}

/// `--plan`: a plan for each selected component (not a variant) whose
/// measured figures fail one of its size budgets, from its own profile and
/// its reference's.
pub(crate) fn plans_for_failing(
    loaded: &crate::pipeline::harness::Loaded,
    selected: &[&gate_spec::budget::Component],
    profiled: &[gate_runner::Profiled],
    backend: Backend,
    jobs: usize,
    spec_path: &str,
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
            jobs,
        };
        let plan = plan_component(loaded, c, backend, &options, given)?;
        print_plan(c, &plan, Some(spec_path));
        plans.insert(c.name.clone(), plan);
    }
    Ok(plans)
}

/// Whether `a` and `b` run the same profile: the same workload and
/// resolved config, batch, dtype, seed, timing, checkpoint, master
/// weights, spans and generation. Budgets and names do not change what a
/// profile measures (the ratio phase pairs the two only on a card, where
/// the pair is then the model with itself).
fn profiled_alike(loaded: &super::harness::Loaded, a: &Component, b: &Component) -> bool {
    let spans = |c: &Component| {
        c.spans
            .as_ref()
            .map(|s| s.iter().map(|n| n.name.clone()).collect::<Vec<_>>())
    };
    let config = |c: &Component| loaded.config(&c.name);
    a.kind == b.kind
        && a.batch_size == b.batch_size
        && a.dtype == b.dtype
        && a.seed == b.seed
        && a.timing == b.timing
        && a.checkpoint == b.checkpoint
        && a.master_dtype == b.master_dtype
        && a.generate == b.generate
        && spans(a) == spans(b)
        && config(a).is_some()
        && config(a) == config(b)
}
