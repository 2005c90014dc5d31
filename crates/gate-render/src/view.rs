//! The view model: what the renderers show of a report, derived once so the
//! table, the comment and JUnit agree. Ordering, top blocks and the next
//! step live here; pass/fail was decided by the verdict and is only read.

use gate_contract::report::{BlockReport, BudgetResult, ComponentReport, ErrorKind, MetricId, Report, Status};
use gate_spec::metric::{Metric, Remedy, Unit};

pub use gate_contract::report::UNATTRIBUTED;

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
    let mut rows: Vec<Row> = report.results.iter().map(row_of).collect();
    rows.sort_by_key(|r| r.rank);
    rows
}

/// [`rows`]' row of one result.
pub fn row_of(r: &BudgetResult) -> Row<'_> {
    let delta = r.delta().filter(|_| r.not_compared.is_none());
    let improved = delta.is_some_and(|d| if r.op.is_max() { d < 0.0 } else { d > 0.0 });
    let changed =
        delta.is_some_and(|d| d != 0.0) || r.budget_changed() || r.not_compared.is_some() || r.config_changed.is_some();
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
            let v = gate_spec::metric::format_value(Unit::One, d.abs());
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
            && report.components.contains_key(r.component.as_str())
            && !names.contains(&r.component.as_str())
        {
            names.push(r.component.as_str());
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
    // A single top-level block (a model's `model` span around everything)
    // says nothing by itself: its own blocks, one level deeper, follow it.
    if let [only] = top[..] {
        let prefix = format!("{}.", only.name);
        top.extend(
            c.blocks
                .iter()
                .filter(|b| b.name.strip_prefix(&prefix).is_some_and(|rest| !rest.contains('.')))
                .take(n),
        );
    }
    top.extend(c.blocks.iter().filter(|b| b.name == UNATTRIBUTED));
    top
}

/// The top-level blocks [`top_blocks`] leaves out: how many, and what they
/// retain and their share together, so a list can say "and N more".
pub fn more_blocks(c: &ComponentReport, n: usize) -> Option<(usize, i64, Option<f64>)> {
    let rest: Vec<&BlockReport> = c
        .blocks
        .iter()
        .filter(|b| !b.name.contains('.') && b.name != UNATTRIBUTED)
        .skip(n)
        .collect();
    if rest.is_empty() {
        return None;
    }
    let bytes = rest.iter().map(|b| b.retained_bytes).sum();
    let share = rest.iter().map(|b| b.share_percent).sum::<Option<f64>>();
    Some((rest.len(), bytes, share.map(|s| (s * 10.0).round() / 10.0)))
}

/// "and 1 more block", "and 3 more blocks".
pub fn more_blocks_label(count: usize) -> String {
    format!("and {count} more block{}", if count == 1 { "" } else { "s" })
}

/// The one next step a failing run suggests: the first failing (else
/// regressed) budget, its block (the one that grew most against the
/// baseline, else the one that keeps the most), and the lever for it.
#[derive(Debug, Clone)]
pub struct NextStep<'a> {
    pub row: Row<'a>,
    pub block: Option<&'a BlockReport>,
    /// The block is named for its peak's growth (a peak budget), not its kept bytes'.
    pub by_peak: bool,
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
    /// A generation's memory: its KV cache and what a prefill or decode
    /// step holds at once.
    Cache,
    /// Time, loss and ratios: see the levers' trade-offs.
    Tradeoff,
    /// The ensemble: its largest member.
    Ensemble,
    /// The profile failed for another reason than memory (an error in the
    /// model's code, a device error): no lever helps until that is fixed.
    FixFailure,
}

impl Lever {
    /// A metric's remedy, as its facts declare it (gate-spec's
    /// `Metric::facts`). `None` for a metric this gate does not know (a
    /// newer gate's report): no step is named for it.
    fn of(metric: &MetricId) -> Option<Lever> {
        let metric = match metric {
            MetricId::Component(m) => *m,
            MetricId::Ensemble(_) => return Some(Lever::Ensemble),
            MetricId::Unknown(_) => return None,
        };
        Some(match metric.remedy() {
            Remedy::Checkpoint => Lever::Checkpoint,
            Remedy::SmallerModel => Lever::SmallerModel,
            Remedy::Leak => Lever::Leak,
            Remedy::Cache => Lever::Cache,
            Remedy::Tradeoff => Lever::Tradeoff,
        })
    }
}

pub fn next_step(report: &Report) -> Option<NextStep<'_>> {
    let rows = rows(report);
    let bad = |r: &&Row| matches!(r.rank, Rank::Failing | Rank::Regressed);
    let mut first = rows.iter().find(bad)?.clone();
    // A leak keeps its bytes live into inference: when the component's
    // growth fails too, the leak is the step to take, not a checkpoint.
    if first.result.metric == MetricId::Component(Metric::InferencePeak) {
        if let Some(growth) = rows.iter().filter(bad).find(|r| {
            r.result.component == first.result.component && r.result.metric == MetricId::Component(Metric::Growth)
        }) {
            first = growth.clone();
        }
    }
    // A component that stopped on an error (not memory) fails every
    // budget, those measured before the error too: the step is the error,
    // named on the row it left without a figure where there is one, never
    // a lever for the figure that happens to rank first.
    let failed_not_oom = report
        .components
        .get(first.result.component.as_str())
        .and_then(|c| c.error.as_ref())
        .is_some_and(|e| e.kind == ErrorKind::Failed && !e.ran_out_of_memory());
    if failed_not_oom && first.measured.is_some() {
        if let Some(unmeasured) = rows
            .iter()
            .filter(bad)
            .find(|r| r.result.component == first.result.component && r.measured.is_none())
        {
            first = unmeasured.clone();
        }
    }
    let lever = if first.result.component.is_ensemble() {
        Lever::Ensemble
    } else if failed_not_oom {
        Lever::FixFailure
    } else {
        Lever::of(&first.result.metric)?
    };
    let component = report
        .components
        .get(first.result.component.as_str())
        .filter(|_| lever == Lever::Checkpoint);
    // A peak budget: the block whose working memory grew the most, when one did.
    let peak_metric = matches!(
        first.result.metric.metric(),
        Some(Metric::TrainingPeak | Metric::InferencePeak | Metric::DeviceUsed)
    );
    let peak_grown = component.filter(|_| peak_metric).and_then(peak_grown_most);
    let block = peak_grown.or_else(|| {
        component.and_then(|c| grown_most(c).or_else(|| top_blocks(c, 1).into_iter().find(|b| b.name != UNATTRIBUTED)))
    });
    Some(NextStep {
        row: first,
        block,
        by_peak: peak_grown.is_some(),
        lever,
    })
}

/// The top-level block that gained the most retained bytes against the
/// baseline's block of the same name, if any grew.
pub fn grown_most(c: &ComponentReport) -> Option<&BlockReport> {
    c.blocks
        .iter()
        .filter(|b| !b.name.contains('.') && b.name != UNATTRIBUTED)
        .filter(|b| b.growth_bytes().is_some_and(|g| g > 0))
        .max_by_key(|b| b.growth_bytes())
}

/// The top-level block whose peak grew the most against the baseline's
/// block of the same name, if any grew by more than its kept bytes did
/// (then the growth is working memory, not what it keeps).
pub fn peak_grown_most(c: &ComponentReport) -> Option<&BlockReport> {
    c.blocks
        .iter()
        .filter(|b| !b.name.contains('.') && b.name != UNATTRIBUTED)
        .filter(|b| {
            b.peak_growth_bytes()
                .is_some_and(|g| g > 0 && g > b.growth_bytes().unwrap_or(0))
        })
        .max_by_key(|b| b.peak_growth_bytes())
}

/// What a next step is about: its budget and figure; `code` quotes a name
/// and `text` escapes free text the renderer's way.
pub fn what_words(step: &NextStep, code: impl Fn(&str) -> String, text: impl Fn(&str) -> String) -> String {
    let r = step.row.result;
    match (&step.row.measured, r.status) {
        (Some(m), Status::Regressed) if crate::drifted(r) => format!(
            "{} grew to {m}: {}",
            code(&step.row.name()),
            text(&crate::drift_text(r).unwrap_or_default())
        ),
        (Some(m), Status::Regressed) => format!(
            "{} grew to {m} from {} (more than its {}% tolerance)",
            code(&step.row.name()),
            step.row.baseline.as_deref().unwrap_or("—"),
            gate_spec::units::trim_float(r.tolerance_percent)
        ),
        // Measured, then the component stopped on an error: the error is what failed it.
        (Some(m), _) if step.lever == Lever::FixFailure => format!(
            "{} is {m}, {}",
            code(&step.row.name()),
            text(r.reason.as_deref().unwrap_or("but the component then failed"))
        ),
        (Some(m), _) => format!("{} is {m} against {}", code(&step.row.name()), text(&step.row.limit)),
        (None, _) => format!(
            "{} has no figure: {}",
            code(&step.row.name()),
            text(r.reason.as_deref().unwrap_or("not measured"))
        ),
    }
}

/// A next step's sentence on its block, as every renderer words it; `code`
/// quotes a name the renderer's way.
pub fn block_words(report: &Report, step: &NextStep, code: impl Fn(&str) -> String) -> Option<String> {
    let b = step.block?;
    let component = step.row.result.component.as_str();
    let size = |bytes: i64| size_text(report, component, bytes as f64);
    let share = b.share_percent.map(|s| format!(" ({s:.1}%)")).unwrap_or_default();
    if step.by_peak {
        if let (Some(g), Some(was)) = (b.peak_growth_bytes(), b.baseline_peak_bytes) {
            return Some(format!(
                "Block {}'s working memory grew the most against the baseline: its peak above what it \
                 found by {}, from {} to {} (it keeps {}).",
                code(&b.name),
                size(g),
                size(was as i64),
                size(b.peak_bytes as i64),
                size(b.retained_bytes)
            ));
        }
    }
    Some(match (b.growth_bytes().filter(|g| *g > 0), b.baseline_retained_bytes) {
        (Some(g), Some(was)) => format!(
            "Block {} grew the most against the baseline: by {}, from {} to {}{}.",
            code(&b.name),
            size(g),
            size(was),
            size(b.retained_bytes),
            b.share_percent
                .map(|s| format!(", {s:.1}% of the activations kept for backward"))
                .unwrap_or_default()
        ),
        _ => format!(
            "Block {} keeps {}{share} of the activations for backward.",
            code(&b.name),
            size(b.retained_bytes)
        ),
    })
}

/// A next step's lever, as every renderer words it; `code` quotes a name
/// (or a command) the renderer's way.
pub fn lever_words(report: &Report, step: &NextStep, code: impl Fn(&str) -> String) -> String {
    let component = step.row.result.component.as_str();
    // A peak step, and a block that is checkpointed already, always name their block.
    let block = step.block.map_or("", |b| b.name.as_str());
    let already = report
        .components
        .get(component)
        .is_some_and(|c| c.checkpointed.iter().any(|k| k.block == block));
    match step.lever {
        Lever::Checkpoint if step.by_peak => format!(
            "Look for a temporary {} builds and drops (an intermediate larger than before): its working memory \
             grew more than what it keeps. A position-wise block can run in chunks ({}, docs/sdk.md §6); \
             or find the largest batch that passes: {}.",
            code(block),
            code("checkpoint::RowWise"),
            code(&format!("gate fit {component}"))
        ),
        Lever::Checkpoint if already => format!(
            "{} is checkpointed already, so it should keep only its inputs and its output: what it keeps beyond \
             them is held outside the recompute (a tensor stored in the model, or returned beside the output; \
             docs/sdk.md §6). Or find the largest batch that passes: {}.",
            code(block),
            code(&format!("gate fit {component}"))
        ),
        Lever::Checkpoint => format!(
            "Recompute {} in backward instead of keeping it (activation checkpointing: {} in the spec, \
             or {} in your model; docs/levers.md), or find the largest batch that passes: {}.",
            step.block
                .map_or_else(|| "its largest block".to_string(), |b| code(&b.name)),
            code("checkpoint:"),
            code("gate::checkpoint"),
            code(&format!("gate fit {component}"))
        ),
        Lever::SmallerModel => format!(
            "These scale with the parameters, not the batch: a smaller config, or {} \
             weights ({} in the spec; docs/levers.md).",
            code("bf16"),
            code("dtype:")
        ),
        Lever::Leak => "Memory is kept from step to step: look for tensors stored across steps (a history, \
                        a cache, a metric kept as a tensor; docs/sdk.md §8)."
            .to_string(),
        Lever::Cache => format!(
            "A generation holds its KV cache (each layer's keys and values for every token) and one step's \
             working memory: fewer key/value heads (grouped-query attention) or a smaller cache dtype shrink \
             both; a shorter prompt ({} in the spec) lowers the peaks. Where the model opens spans, the \
             prefill's blocks show what each layer keeps.",
            code("generate: { prefill }")
        ),
        Lever::Tradeoff => {
            "Compare the variants above: each lever trades memory for time or loss (docs/levers.md).".to_string()
        }
        Lever::Ensemble => match largest_member(report) {
            Some((m, v)) => format!(
                "The largest member is {} ({}); its own budgets are above.",
                code(m),
                gate_spec::metric::format_value(Unit::Bytes, v)
            ),
            None => "A member was not measured; see its row above.".to_string(),
        },
        Lever::FixFailure => format!(
            "The profile stopped on an error, not on memory: fix it first (it is the model's own code or the \
             device; {} shows whether the CPU takes it), then the budget can be judged.",
            code(&format!("gate check --backend cpu --only {component}"))
        ),
    }
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
pub fn size_unit(report: &Report, component: &str) -> Option<gate_spec::units::SizeUnit> {
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
    gate_spec::metric::format_in(Unit::Bytes, size_unit(report, component), bytes)
}

/// The component a group of variants is compared with: the one their
/// `reference:` names, else the base component.
pub fn variant_reference(report: &Report, base: &str, members: &[String]) -> String {
    members
        .iter()
        .find_map(|m| report.components.get(m).and_then(|c| c.reference.clone()))
        .unwrap_or_else(|| base.to_string())
}

/// A plan's figure as the renderers show it: bytes in the report's units,
/// a ratio as `1.23x`.
pub fn plan_figure_text(report: &Report, component: &str, metric: Metric, value: f64) -> String {
    match metric.unit() {
        Unit::Bytes => size_text(report, component, value),
        _ if metric.ratio_of().is_some() => format!("{value:.2}x"),
        unit => gate_spec::metric::format_value(unit, value),
    }
}

/// A component's measured fix (`gate check --plan`, docs/plan.md), in the
/// words every renderer shares; `code` quotes the spec's words and the
/// command. `None` where no plan was made for it.
pub fn fix_words(report: &Report, component: &str, code: impl Fn(&str) -> String) -> Option<String> {
    let plan = report.plans.get(component)?;
    if plan.start_passes() {
        return None;
    }
    let measured = plan.candidates.iter().filter(|k| k.outcome.is_measured()).count();
    Some(match plan.chosen() {
        Some(k) => {
            let settings: Vec<String> = k.settings.iter().map(|s| code(&s.yaml())).collect();
            let figures: Vec<String> = k
                .figures
                .iter()
                .filter_map(|(m, f)| {
                    Some(format!(
                        "{} {}",
                        m.name(),
                        plan_figure_text(report, component, *m, f.measured?)
                    ))
                })
                .collect();
            format!(
                "Measured fix for {}: {} (measured: {}; the cheapest of {measured} measured, {} profiles). \
                 Write it into the spec with {}.",
                code(component),
                settings.join(", "),
                figures.join(", "),
                plan.profiles,
                code(&plan.apply_command(&report.spec))
            )
        }
        None => format!(
            "No measured fix for {}: {} configurations of its levers predicted, {measured} measured, none passes \
             every budget (report.json's `plans`; docs/plan.md).",
            code(component),
            plan.candidates.len()
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::Lever;
    use gate_spec::metric::Metric;

    #[test]
    fn a_generations_memory_gets_the_cache_lever_not_a_tradeoff() {
        for m in [Metric::PrefillPeak, Metric::DecodePeak, Metric::KvCachePerToken] {
            assert_eq!(Lever::of(&m.into()), Some(Lever::Cache), "{m:?}");
        }
        assert_eq!(Lever::of(&Metric::DecodeGrowth.into()), Some(Lever::Leak));
        assert_eq!(Lever::of(&Metric::StepTimeRatio.into()), Some(Lever::Tradeoff));
        assert_eq!(
            Lever::of(&gate_contract::report::MetricId::parse("total")),
            Some(Lever::Ensemble)
        );
        assert_eq!(
            Lever::of(&gate_contract::report::MetricId::parse("a_newer_gates_metric")),
            None
        );
    }
}
