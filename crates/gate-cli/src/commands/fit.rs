//! `gate fit COMPONENT [--metric M]`: the largest batch size at which the
//! component passes every budget. The spec's batch is measured (in its own
//! child process, as `gate check` does), or read from the check's
//! report.json when it measured this very component; what a step keeps whatever its
//! batch (parameters, gradients, optimizer and model state) is set apart
//! and the rest taken as proportional to the rows, which points at a
//! second batch, measured too. Each size budget's metric is then a straight
//! line through the two (activations and peaks grow linearly with the
//! batch, as `gate plan --sweep` fits them), the largest batch under every
//! limit is predicted, and confirmed by measuring it where it is not one of
//! the two already; where it fails, the line is drawn again through the
//! nearest measured batches. Most fits take two or three full profiles
//! (three at least before: two probes and a confirmation); the count is
//! printed. Prints the batch and the predicted vs measured bytes.

use std::path::PathBuf;

use clap::Args;

use crate::errors::CliError;
use gate_contract::measurement::Measurement;
use gate_probe::Backend;
use gate_runner::exit::Exit;
use gate_runner::{run_child, ChildArgs};
use gate_spec::budget::{Budget, Component};
use gate_spec::hint::Problem;
use gate_spec::metric::{format_value, Metric, Unit};

#[derive(Debug, Args)]
pub(crate) struct FitArgs {
    /// The component to fit (a name in the spec, e.g. `tft` or `tft@plain`).
    pub component: String,
    #[arg(long, default_value = crate::app::DEFAULT_SPEC)]
    pub budgets: PathBuf,
    /// Fit only this metric's budget (default: every size budget of the component).
    #[arg(long)]
    pub metric: Option<String>,
    #[arg(long, value_enum, default_value_t = crate::app::BackendArg::Cpu)]
    pub backend: crate::app::BackendArg,
    /// The two batch sizes measured for the slope (default: half the spec's batch, and the spec's).
    #[arg(long, value_delimiter = ',', value_name = "A,B")]
    pub probe: Option<Vec<usize>>,
    /// Never predict beyond this batch size.
    #[arg(long, default_value_t = 4096)]
    pub max_batch: usize,
    /// A `gate check` output folder whose report.json measured this very
    /// component (same fingerprint, same backend): its figures are the
    /// spec's batch's, one profile fewer.
    #[arg(long, default_value = "target/gate")]
    pub from: PathBuf,
    #[command(flatten)]
    pub harness: crate::pipeline::harness::HarnessArgs,
}

/// A size budget's straight line: bytes = intercept + slope · batch.
#[derive(Debug, Clone, Copy)]
pub(super) struct Line {
    pub intercept: f64,
    pub slope: f64,
}

impl Line {
    pub(super) fn through(b1: usize, v1: f64, b2: usize, v2: f64) -> Line {
        let slope = (v2 - v1) / (b2 as f64 - b1 as f64);
        Line {
            intercept: v1 - slope * b1 as f64,
            slope,
        }
    }

    pub(super) fn at(&self, batch: usize) -> f64 {
        self.intercept + self.slope * batch as f64
    }

    /// The largest batch (≤ `max`) the budget allows; 0 when none does.
    pub(super) fn largest_batch(&self, budget: &Budget, max: usize) -> usize {
        if self.slope <= 0.0 {
            return if budget.limit.op.holds(self.at(1), budget.limit.value) {
                max
            } else {
                0
            };
        }
        let mut b = ((budget.limit.value - self.intercept) / self.slope).floor().max(0.0) as usize;
        b = b.min(max);
        while b > 0 && !budget.limit.op.holds(self.at(b), budget.limit.value) {
            b -= 1;
        }
        b
    }
}

fn usage(message: String) -> CliError {
    CliError::Usage(Problem::new(message))
}

fn measure(
    exe: &std::path::Path,
    c: &Component,
    request: &std::path::Path,
    backend: Backend,
    batch: usize,
) -> Result<Measurement, CliError> {
    let args = ChildArgs {
        extra: vec![
            "--backend".into(),
            backend.name().into(),
            "--batch-size".into(),
            batch.to_string(),
        ],
        ..Default::default()
    };
    eprintln!("{}: profiling at batch {batch}", c.name);
    let m = run_child(exe, request, &c.name, &args, &mut |_| {});
    if let Some(sig) = gate_runner::interrupted() {
        let name = if sig == 15 { "SIGTERM" } else { "SIGINT" };
        eprintln!("gate fit: interrupted by {name}: profile stopped");
        return Err(CliError::Reported(Exit::Interrupted));
    }
    let m = m.map_err(|e| {
        CliError::Infrastructure(Problem::new(format!("cannot start the profile of `{}`: {e}", c.name)))
    })?;
    // A crash, or no measurement, says nothing of the batch's size: not a
    // budget the batch fails.
    if let Some(f) = m.failure.as_ref().filter(|f| gate_runner::infrastructure_failure(f)) {
        return Err(CliError::Infrastructure(
            Problem::new(format!(
                "the profile of `{}` at batch {batch} failed in phase {}: {}",
                c.name, f.phase, f.reason
            ))
            .with_hint("this is not the batch's memory: fix the harness or the machine, then fit again"),
        ));
    }
    Ok(m)
}

/// The budgets `m` fails (ratio budgets need a reference run and are skipped).
fn failing<'a>(c: &'a Component, m: &Measurement) -> Vec<&'a Budget> {
    c.budgets
        .iter()
        .filter(|b| b.metric.ratio_of().is_none())
        .filter(|b| match m.values.get(&b.metric) {
            Some(v) => !b.limit.op.holds(*v, b.limit.value),
            None => m.failure.is_some(),
        })
        .collect()
}

pub(super) fn run(args: FitArgs, app: &crate::app::App) -> Result<Exit, CliError> {
    let loaded = crate::pipeline::harness::load(&args.budgets, app, Some(args.backend.into()), &args.harness)?;
    let exe = loaded.profiler().to_path_buf();
    let request = loaded.request().to_path_buf();
    let c = loaded.component_named(&args.component)?;
    let metric = match &args.metric {
        None => None,
        Some(name) => Some(Metric::parse(name).ok_or_else(|| usage(format!("unknown metric `{name}`")))?),
    };
    let fitted = size_budgets(c, metric)?;
    let backend = gate_probe::resolve_backend(args.backend.into()).map_err(CliError::Infrastructure)?;
    let mut profiles = Profiles::new(&exe, c, &request, backend);
    let points: Vec<(usize, Measurement)> = match args.probe.as_deref() {
        Some([a, b]) if a != b && *a > 0 && *b > 0 => {
            let (b1, b2) = (*a.min(b), *a.max(b));
            vec![(b1, profiles.measure(b1)?), (b2, profiles.measure(b2)?)]
        }
        Some(_) => return Err(usage("--probe takes two different batch sizes of at least 1".into())),
        None => {
            // The spec's batch, then the batch its figures point at: what
            // a step keeps whatever the batch (parameters, gradients,
            // optimizer state, the model's state) stays, the rest scales
            // with the rows. The second profile is both a point of the
            // line and, most often, the answer.
            let b0 = c.batch_size.max(1);
            let config = loaded.config(&c.name).unwrap_or(serde_json::Value::Null);
            let m0 = match measured_before(&args.from, c, config, backend) {
                Some(m) => {
                    println!(
                        "{}: batch {b0} as {} measured it (same component, same backend)",
                        c.name,
                        args.from.join("report.json").display()
                    );
                    m
                }
                None => profiles.measure(b0)?,
            };
            failed_probe(b0, &m0)?;
            let guess = proportional_guess(&fitted, &m0, b0, args.max_batch);
            let b1 = if guess == b0 { (b0 / 2).max(1) } else { guess.max(1) };
            if b1 == b0 {
                return Err(usage(format!(
                    "`{}` has a batch of 1: there is no second batch size to fit through",
                    c.name
                )));
            }
            vec![(b0, m0), (b1, profiles.measure(b1)?)]
        }
    };
    for (b, m) in &points {
        failed_probe(*b, m)?;
    }
    let lines = fit_lines(&points, &fitted)?;
    let predicted = largest(&lines, args.max_batch);
    let (b1, b2) = (points[0].0, points[1].0);
    println!("{}: fitted at batch {b1} and {b2} ({})", c.name, backend.name());
    for (b, l) in &lines {
        println!(
            "  {:<16} {} + {} per sample; limit {} {} → batch ≤ {}",
            b.metric.name(),
            show(l.intercept),
            show(l.slope),
            b.limit.op.symbol(),
            show(b.limit.value),
            l.largest_batch(b, args.max_batch)
        );
    }
    if predicted == 0 {
        println!("no batch size passes every size budget of `{}`", c.name);
        println!("{} full profiles", profiles.count);
        return Ok(Exit::Fail);
    }
    let exit = confirm(&mut profiles, &lines, predicted, points, args.max_batch)?;
    println!("{} full profiles", profiles.count);
    Ok(exit)
}

/// The figures a check's report.json in `dir` holds for `c` as the spec
/// has it now: the same fingerprint (workload, dtype, batch, config) on the
/// same backend, measured without error. Anything else: `None`, measured
/// again.
fn measured_before(
    dir: &std::path::Path,
    c: &Component,
    config: serde_json::Value,
    backend: Backend,
) -> Option<Measurement> {
    let path = dir.join("report.json");
    if !path.is_file() {
        return None;
    }
    let report = gate_report::baseline::load_found(&path).ok()?;
    if report.testbed.backend != backend.name() {
        return None;
    }
    let stored = report.components.get(&c.name)?;
    let now = gate_report::component_report(c, config, &Measurement::default());
    if stored.fingerprint != now.fingerprint || stored.error.is_some() {
        return None;
    }
    Some(Measurement {
        values: stored.metrics.iter().map(|(m, v)| (*m, v.value)).collect(),
        ..Measurement::default()
    })
}

/// The largest batch every line allows.
fn largest(lines: &[(&Budget, Line)], max: usize) -> usize {
    lines.iter().map(|(b, l)| l.largest_batch(b, max)).min().unwrap_or(0)
}

/// The batch the first profile points at: each budget's figure split into
/// what a step keeps whatever its batch (parameters, gradients, optimizer
/// state and the model's state, where the figure holds them) and the rest,
/// taken as proportional to the rows.
fn proportional_guess(fitted: &[&Budget], m: &Measurement, batch: usize, max: usize) -> usize {
    let fixed: f64 = [Metric::Params, Metric::Gradients, Metric::Optimizer, Metric::ModelState]
        .iter()
        .filter_map(|k| m.values.get(k))
        .sum();
    fitted
        .iter()
        .filter_map(|b| {
            let v = *m.values.get(&b.metric)?;
            let intercept = if v > fixed { fixed } else { 0.0 };
            Some(Line::through(0, intercept, batch, v).largest_batch(b, max))
        })
        .min()
        .unwrap_or(batch)
}

/// Full profiles of one component at any batch, counted.
struct Profiles<'a> {
    exe: &'a std::path::Path,
    c: &'a Component,
    request: &'a std::path::Path,
    backend: Backend,
    count: usize,
}

impl<'a> Profiles<'a> {
    fn new(exe: &'a std::path::Path, c: &'a Component, request: &'a std::path::Path, backend: Backend) -> Self {
        Profiles {
            exe,
            c,
            request,
            backend,
            count: 0,
        }
    }

    fn measure(&mut self, batch: usize) -> Result<Measurement, CliError> {
        self.count += 1;
        measure(self.exe, self.c, self.request, self.backend, batch)
    }
}

fn failed_probe(batch: usize, m: &Measurement) -> Result<(), CliError> {
    match &m.failure {
        Some(f) => Err(CliError::Infrastructure(
            Problem::new(format!(
                "the profile at batch {batch} failed in phase {}: {}",
                f.phase, f.reason
            ))
            .with_hint("pick smaller probe batches with --probe A,B"),
        )),
        None => Ok(()),
    }
}

/// Bytes as the fit prints them.
fn show(v: f64) -> String {
    format_value(Unit::Bytes, v)
}

/// The budgets to fit: upper limits on a size metric (only `metric`'s when given).
fn size_budgets(c: &Component, metric: Option<Metric>) -> Result<Vec<&Budget>, CliError> {
    let fitted: Vec<&Budget> = c
        .budgets
        .iter()
        .filter(|b| b.metric.unit() == Unit::Bytes && b.limit.op.is_max())
        .filter(|b| metric.is_none_or(|m| b.metric == m))
        .collect();
    if fitted.is_empty() {
        return Err(CliError::Usage(
            Problem::new(format!(
                "`{}` has no size budget to fit{}",
                c.name,
                metric.map(|m| format!(" for `{m}`")).unwrap_or_default()
            ))
            .with_hint("fit needs an upper limit on a size metric, e.g. `training_peak: < 1 GB`"),
        ));
    }
    Ok(fitted)
}

/// Each budget's line through the first two points.
fn fit_lines<'a>(points: &[(usize, Measurement)], fitted: &[&'a Budget]) -> Result<Vec<(&'a Budget, Line)>, CliError> {
    let [(b1, m1), (b2, m2), ..] = points else {
        return Ok(Vec::new());
    };
    let mut lines = Vec::new();
    for b in fitted {
        let (Some(v1), Some(v2)) = (m1.values.get(&b.metric), m2.values.get(&b.metric)) else {
            return Err(CliError::Infrastructure(Problem::new(format!(
                "`{}` was not measured, so it cannot be fitted",
                b.metric
            ))));
        };
        lines.push((*b, Line::through(*b1, *v1, *b2, *v2)));
    }
    Ok(lines)
}

/// Confirms the prediction by measuring it (a batch already measured is
/// not measured again). Where it still fails, or passes with room the
/// line did not see, the line is drawn again through the two measured
/// batches nearest the prediction and the batch predicted again.
fn confirm(
    profiles: &mut Profiles,
    first_lines: &[(&Budget, Line)],
    predicted: usize,
    mut points: Vec<(usize, Measurement)>,
    max_batch: usize,
) -> Result<Exit, CliError> {
    let c = profiles.c;
    let mut lines: Vec<(&Budget, Line)> = first_lines.to_vec();
    let mut batch = predicted;
    let mut best: Option<usize> = None;
    for _ in 0..6 {
        if !points.iter().any(|(b, _)| *b == batch) {
            let m = profiles.measure(batch)?;
            failed_probe(batch, &m)?;
            points.push((batch, m));
        }
        let m = &points.iter().find(|(b, _)| *b == batch).expect("measured above").1;
        let fails = failing(c, m);
        println!("\nbatch {batch}: predicted vs measured");
        for (b, l) in &lines {
            let measured = m.values.get(&b.metric).map_or("—".to_string(), |v| show(*v));
            println!(
                "  {:<16} predicted {:>12}  measured {:>12}  limit {} {}",
                b.metric.name(),
                show(l.at(batch)),
                measured,
                b.limit.op.symbol(),
                show(b.limit.value)
            );
        }
        if fails.is_empty() {
            best = best.max(Some(batch));
        } else {
            let names: Vec<&str> = fails.iter().map(|b| b.metric.name()).collect();
            println!("  fails: {}", names.join(", "));
        }
        // The two measured batches nearest this one: the line there.
        let mut near: Vec<&(usize, Measurement)> = points.iter().collect();
        near.sort_by_key(|(b, _)| b.abs_diff(batch));
        let pair = [(near[0].0, near[0].1.clone()), (near[1].0, near[1].1.clone())];
        lines = fit_lines(&pair, &lines.iter().map(|(b, _)| *b).collect::<Vec<_>>())?;
        let next = largest(&lines, max_batch);
        let next = match best {
            // Passed here: done unless the line says a larger one passes too
            // and that one has not been measured and failed.
            Some(b)
                if b == batch
                    && (next <= batch || points.iter().any(|(p, m)| *p == next && !failing(c, m).is_empty())) =>
            {
                break
            }
            _ if fails.is_empty() => next,
            // Failed here: below this batch, whatever the line says.
            _ => next.min(batch.saturating_sub(1)),
        };
        if next == 0 || next == batch {
            break;
        }
        batch = next;
    }
    match best {
        Some(b) => {
            println!(
                "\n{}: the largest batch that passes every budget is {b} (predicted {predicted})",
                c.name
            );
            Ok(Exit::Pass)
        }
        None => {
            println!("\n{}: no passing batch confirmed", c.name);
            Ok(Exit::Fail)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gate_spec::budget::{Limit, Op};

    fn budget(op: Op, value: f64) -> Budget {
        Budget {
            metric: Metric::TrainingPeak,
            limit: Limit {
                op,
                value,
                unit: None,
                seconds: false,
            },
            line: 1,
            col: 1,
        }
    }

    #[test]
    fn the_line_gives_the_largest_batch_under_the_limit() {
        // 100 + 10 per sample.
        let l = Line::through(4, 140.0, 8, 180.0);
        assert_eq!(l.at(0), 100.0);
        assert_eq!(l.largest_batch(&budget(Op::Le, 200.0), 1000), 10);
        assert_eq!(l.largest_batch(&budget(Op::Lt, 200.0), 1000), 9);
        assert_eq!(l.largest_batch(&budget(Op::Lt, 100.0), 1000), 0);
        assert_eq!(l.largest_batch(&budget(Op::Le, 1e9), 64), 64);
        let flat = Line::through(1, 50.0, 2, 50.0);
        assert_eq!(flat.largest_batch(&budget(Op::Le, 60.0), 64), 64);
    }
}
