//! The view model: what the renderers show of a report, derived once so the
//! table, the comment and JUnit agree. Ordering, top blocks and the next
//! step live here; pass/fail was decided by the verdict and is only read.

use crate::metric::{Metric, Unit};
use crate::report::{BlockReport, BudgetResult, ComponentReport, Report, Status};

pub use crate::report::UNATTRIBUTED;

/// Where a row goes in a review: what needs a decision first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Rank {
    Failing,
    Regressed,
    /// Regressed, and accepted by the pull request's acknowledge label.
    Acknowledged,
    /// A timed figure whose interval straddles the limit (a warning).
    Inconclusive,
    NotMeasured,
    /// Passing, but its figure, its budget or its comparison changed.
    Changed,
    /// Passing and unchanged against the baseline (or there is none).
    Unchanged,
}

/// One budget as every renderer shows it; names are raw (each renderer
/// escapes for its format).
#[derive(Debug, Clone)]
pub struct Row<'a> {
    pub result: &'a BudgetResult,
    pub rank: Rank,
    /// `< 300 MB`, as written in the spec.
    pub limit: String,
    /// The baseline's limit when this run changed it.
    pub was_limit: Option<String>,
    pub measured: Option<String>,
    pub baseline: Option<String>,
    /// Change against the baseline: absolute and percent.
    pub delta: Option<(String, String)>,
    pub percent_of_budget: Option<f64>,
    pub headroom: Option<String>,
    /// The figure moved the good way against the baseline.
    pub improved: bool,
}

impl Row<'_> {
    pub fn name(&self) -> String {
        format!("{}.{}", self.result.component, self.result.metric)
    }
}

/// Every budget in review order (failing, regressed, not measured, changed,
/// unchanged), the spec's order within each group.
pub fn rows(report: &Report) -> Vec<Row<'_>> {
    let mut rows: Vec<Row> = report.results.iter().map(row).collect();
    rows.sort_by_key(|r| r.rank);
    rows
}

fn row(r: &BudgetResult) -> Row<'_> {
    let delta = r.delta().filter(|_| r.not_compared.is_none());
    let improved = delta.is_some_and(|d| if r.op.is_max() { d < 0.0 } else { d > 0.0 });
    let changed = delta.is_some_and(|d| d != 0.0) || r.budget_changed() || r.not_compared.is_some();
    let rank = match r.status {
        Status::Fail => Rank::Failing,
        Status::Regressed => Rank::Regressed,
        Status::Acknowledged => Rank::Acknowledged,
        Status::Inconclusive => Rank::Inconclusive,
        Status::NotMeasured => Rank::NotMeasured,
        Status::Pass if changed => Rank::Changed,
        Status::Pass => Rank::Unchanged,
    };
    Row {
        result: r,
        rank,
        limit: super::limit_text(r),
        was_limit: super::baseline_limit_text(r),
        measured: r.measured.map(|_| super::measured_text(r)),
        baseline: r.baseline.map(|b| super::value_text(r, b)),
        delta: delta.map(|d| delta_text(r, d)),
        percent_of_budget: super::percent_of_budget(r),
        headroom: super::headroom_text(r),
        improved,
    }
}

fn delta_text(r: &BudgetResult, d: f64) -> (String, String) {
    if d == 0.0 {
        return ("±0".into(), "0.0%".into());
    }
    let abs = match r.unit {
        Unit::One => {
            let v = crate::metric::format_value(Unit::One, d.abs());
            format!("{}{v}", if d < 0.0 { "-" } else { "+" })
        }
        _ => super::delta_value_text(r, d),
    };
    let pct = match r.baseline {
        Some(b) if b != 0.0 => format!("{:+.1}%", d / b.abs() * 100.0),
        _ => "—".into(),
    };
    (abs, pct)
}

/// Components with a failing or regressed budget, in report order.
pub fn failing_components(report: &Report) -> Vec<&str> {
    let mut names: Vec<&str> = Vec::new();
    for r in &report.results {
        if matches!(r.status, Status::Fail | Status::Regressed)
            && report.components.contains_key(&r.component)
            && !names.contains(&r.component.as_str())
        {
            names.push(&r.component);
        }
    }
    names
}

/// A component's top-level blocks by retained bytes, at most `n`, then the
/// `(unattributed)` row when the report has one, so the rows shown always
/// say how much of the activations they cover.
pub fn top_blocks(c: &ComponentReport, n: usize) -> Vec<&BlockReport> {
    let mut top: Vec<&BlockReport> = c
        .blocks
        .iter()
        .filter(|b| !b.name.contains('.') && b.name != UNATTRIBUTED)
        .take(n)
        .collect();
    top.extend(c.blocks.iter().filter(|b| b.name == UNATTRIBUTED));
    top
}

/// The one next step a failing run suggests: the first failing (else
/// regressed) budget, the block that keeps the most, and the lever for it.
#[derive(Debug, Clone)]
pub struct NextStep<'a> {
    pub row: Row<'a>,
    pub block: Option<&'a BlockReport>,
    pub lever: Lever,
}

/// What helps a budget, by what it measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lever {
    /// Activation memory: recompute the top block in backward, or a smaller batch.
    Checkpoint,
    /// Parameter-sized state (params, gradients, optimizer): a smaller model or dtype.
    SmallerModel,
    /// Memory kept across steps.
    Leak,
    /// Time, loss and ratios: see the levers' trade-offs.
    Tradeoff,
    /// The ensemble: its largest member.
    Ensemble,
}

impl Lever {
    fn of(metric: &str) -> Lever {
        match Metric::parse(metric) {
            Some(Metric::Activations | Metric::TrainingPeak | Metric::InferencePeak | Metric::DeviceUsed) => {
                Lever::Checkpoint
            }
            Some(Metric::Params | Metric::Gradients | Metric::Optimizer) => Lever::SmallerModel,
            Some(Metric::Growth) => Lever::Leak,
            Some(_) => Lever::Tradeoff,
            None => Lever::Ensemble,
        }
    }
}

pub fn next_step(report: &Report) -> Option<NextStep<'_>> {
    let rows = rows(report);
    let first = rows
        .into_iter()
        .find(|r| matches!(r.rank, Rank::Failing | Rank::Regressed))?;
    let lever = if first.result.component == "ensemble" {
        Lever::Ensemble
    } else {
        Lever::of(&first.result.metric)
    };
    let block = report
        .components
        .get(&first.result.component)
        .filter(|_| lever == Lever::Checkpoint)
        .and_then(|c| top_blocks(c, 1).into_iter().find(|b| b.name != UNATTRIBUTED));
    Some(NextStep {
        row: first,
        block,
        lever,
    })
}

/// The ensemble's member with the largest figure of its metric.
pub fn largest_member(report: &Report) -> Option<(&str, f64)> {
    let e = report.ensemble.as_ref()?;
    e.members
        .iter()
        .filter_map(|m| Some((m.as_str(), report.components.get(m)?.value(e.metric)?)))
        .max_by(|a, b| a.1.total_cmp(&b.1))
}

/// The unit a component's sizes were budgeted in (its `activations` budget's,
/// else its first size budget's), so block figures read like its budgets.
pub fn size_unit(report: &Report, component: &str) -> Option<crate::units::SizeUnit> {
    let sizes = || {
        report
            .results
            .iter()
            .filter(move |r| r.component == component && r.unit == Unit::Bytes)
    };
    sizes()
        .find(|r| r.metric == Metric::Activations.name())
        .or_else(|| sizes().find(|r| r.display_unit.is_some()))
        .and_then(|r| r.display_unit)
}

/// A block's (or any) size of `component` in [`size_unit`].
pub fn size_text(report: &Report, component: &str, bytes: f64) -> String {
    crate::metric::format_in(Unit::Bytes, size_unit(report, component), bytes)
}

/// The component a group of variants is compared with: the one their
/// `reference:` names, else the base component.
pub fn variant_reference(report: &Report, base: &str, members: &[String]) -> String {
    members
        .iter()
        .find_map(|m| report.components.get(m).and_then(|c| c.reference.clone()))
        .unwrap_or_else(|| base.to_string())
}
