//! `gate fit COMPONENT [--metric M]`: the largest batch size at which the
//! component passes every budget. Two batch sizes are measured (each in its
//! own child process, as `gate check` does), each size budget's metric is
//! fitted as a straight line in the batch size (activations and peaks grow
//! linearly with it), the largest batch under every limit is predicted, and
//! the prediction is confirmed by measuring it (stepping down while a budget
//! still fails). Prints the batch and the predicted vs measured bytes.

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
    let (b1, b2) = match args.probe.as_deref() {
        Some([a, b]) if a != b && *a > 0 && *b > 0 => (*a.min(b), *a.max(b)),
        Some(_) => return Err(usage("--probe takes two different batch sizes of at least 1".into())),
        None if c.batch_size >= 2 => (c.batch_size / 2, c.batch_size),
        None => (1, 2),
    };
    let lines = fit_lines(&exe, c, &request, backend, (b1, b2), &fitted)?;
    let predicted = lines
        .iter()
        .map(|(b, l)| l.largest_batch(b, args.max_batch))
        .min()
        .unwrap_or(0);
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
        return Ok(Exit::Fail);
    }
    confirm(&exe, c, &request, backend, &lines, predicted)
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

/// Measures the two probe batches and fits each budget's line through them.
fn fit_lines<'a>(
    exe: &std::path::Path,
    c: &Component,
    request: &std::path::Path,
    backend: Backend,
    (b1, b2): (usize, usize),
    fitted: &[&'a Budget],
) -> Result<Vec<(&'a Budget, Line)>, CliError> {
    let m1 = measure(exe, c, request, backend, b1)?;
    let m2 = measure(exe, c, request, backend, b2)?;
    for (b, m) in [(b1, &m1), (b2, &m2)] {
        if let Some(f) = &m.failure {
            return Err(CliError::Infrastructure(
                Problem::new(format!(
                    "the profile at batch {b} failed in phase {}: {}",
                    f.phase, f.reason
                ))
                .with_hint("pick smaller probe batches with --probe A,B"),
            ));
        }
    }
    let mut lines = Vec::new();
    for b in fitted {
        let (Some(v1), Some(v2)) = (m1.values.get(&b.metric), m2.values.get(&b.metric)) else {
            return Err(CliError::Infrastructure(Problem::new(format!(
                "`{}` was not measured, so it cannot be fitted",
                b.metric
            ))));
        };
        lines.push((*b, Line::through(b1, *v1, b2, *v2)));
    }
    Ok(lines)
}

/// Confirms the prediction by measuring it; steps down while a budget still fails.
fn confirm(
    exe: &std::path::Path,
    c: &Component,
    request: &std::path::Path,
    backend: Backend,
    lines: &[(&Budget, Line)],
    predicted: usize,
) -> Result<Exit, CliError> {
    let mut batch = predicted;
    for _ in 0..6 {
        let m = measure(exe, c, request, backend, batch)?;
        let fails = failing(c, &m);
        println!("\nbatch {batch}: predicted vs measured");
        for (b, l) in lines {
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
            println!(
                "\n{}: the largest batch that passes every budget is {batch} (predicted {predicted})",
                c.name
            );
            return Ok(Exit::Pass);
        }
        let names: Vec<&str> = fails.iter().map(|b| b.metric.name()).collect();
        println!("  fails: {}", names.join(", "));
        if batch == 1 {
            break;
        }
        batch = batch.saturating_sub((batch / 20).max(1)).max(1);
    }
    println!("\n{}: no passing batch confirmed", c.name);
    Ok(Exit::Fail)
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
