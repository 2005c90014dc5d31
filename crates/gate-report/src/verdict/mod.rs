//! The verdict: spec + measurements (+ baseline) → one result per budget.
//! A pure function: no I/O, no printing, no exit codes.
//!
//! [`conclude`] is the one entry a caller needs: it adds the ratio metrics,
//! names the blocks that grew, judges every budget and assembles the
//! report, in the order that makes each step see the last one's facts
//! (the order used to be kept by the command line). The modules below hold
//! one job each: judging a figure, a component budget, the ensemble, the
//! ratios of variants, the run's notes, its warnings and the acknowledge
//! label.

use std::collections::BTreeMap;

use gate_spec::budget::Spec;

use crate::baseline::Outcome;
use crate::compare::budget_changes;
use gate_contract::report::*;

mod acknowledge;
mod budgets;
mod drift;
mod ensemble;
#[cfg(test)]
mod fixtures;
mod judging;
mod notes;
mod ratios;
mod warnings;

pub use ratios::ratios_beyond_card;

/// How far the measured `params` may sit above the closed form before the
/// two are said to disagree: tensor metadata (shapes, names, reference
/// counts) is counted by the CPU allocator, a few hundred bytes per tensor.
pub const PARAMS_AGREEMENT: f64 = 0.01;
pub const PARAMS_AGREEMENT_FLOOR: u64 = 64 * 1024;
/// Bytes of bookkeeping allowed per parameter tensor on top of that (the
/// team TFT of the oldest adopter fixture: 2,790 tensors, ~427 B each).
pub(crate) const PARAMS_BOOKKEEPING_PER_TENSOR: u64 = 512;

/// The context reserve used for the ensemble and where it came from.
#[derive(Debug, Clone, Copy)]
pub struct Reserve {
    pub bytes: u64,
    pub measured: bool,
}

pub struct Verdict {
    pub results: Vec<BudgetResult>,
    pub ensemble: Option<EnsembleReport>,
    pub summary: Summary,
}

/// Everything [`conclude`] turns into a report: the measured components
/// and what the verdict and the report's header need.
pub struct Inputs<'a> {
    pub spec: &'a Spec,
    /// The spec's path as the report names it.
    pub spec_path: String,
    pub commit: Option<String>,
    /// The version of gate that ran (the command line's, not this crate's).
    pub gate_version: String,
    pub components: BTreeMap<String, ComponentReport>,
    pub baseline: &'a Outcome,
    /// The spec's `anchor:` as it was looked up; `None`: not looked up
    /// (said as a warning when the spec has a `drift:`).
    pub anchor: Option<&'a Outcome>,
    pub testbed: Testbed,
    pub reserve: Reserve,
    pub strict: bool,
    /// The acknowledge label, as GitHub answered about it.
    pub ack: AckInput,
    pub wall_seconds: f64,
    /// `check --plan`: the measured fixes, by component.
    pub plans: BTreeMap<String, gate_contract::plan::Plan>,
}

/// The report of a run: the variants' ratio metrics added to their
/// components, the blocks compared with the baseline's, every budget
/// judged (the acknowledge label included) and the whole assembled. Pure.
pub fn conclude(inputs: Inputs<'_>) -> Report {
    let Inputs {
        spec,
        spec_path,
        commit,
        gate_version,
        mut components,
        baseline,
        anchor,
        testbed,
        reserve,
        strict,
        ack,
        wall_seconds,
        plans,
    } = inputs;
    // The ratios first: the verdict computes its own, but the report shows
    // these in each variant's metrics.
    ratios::add_ratios(&mut components);
    crate::compare::compare_blocks(&mut components, baseline, &testbed);
    let verdict = decide_acknowledged(spec, &components, baseline, anchor, &testbed, reserve, strict, &ack);
    let baseline = crate::baseline::info(baseline, &testbed);
    Report {
        schema: SCHEMA,
        gate_version,
        commit,
        spec: spec_path,
        baseline,
        testbed,
        components,
        ensemble: verdict.ensemble,
        results: verdict.results,
        summary: verdict.summary,
        wall_seconds,
        plans,
    }
}

/// The whole verdict, baseline included: each budget against its limit and
/// (sizes only) against the baseline's figure when the testbed and the
/// component's settings match; the baseline's own warning; budget changes
/// against the baseline's spec; and the run's status. Pure. [`conclude`]
/// is this plus the report around it.
pub fn decide(
    spec: &Spec,
    components: &BTreeMap<String, ComponentReport>,
    outcome: &Outcome,
    testbed: &Testbed,
    reserve: Reserve,
    strict: bool,
) -> Verdict {
    decide_acknowledged(
        spec,
        components,
        outcome,
        None,
        testbed,
        reserve,
        strict,
        &AckInput::NotAsked,
    )
}

/// [`decide`] with the spec's anchor as it was looked up: each size with a
/// `drift:` is also judged on its growth since the anchor's figure. Pure.
pub fn decide_anchored(
    spec: &Spec,
    components: &BTreeMap<String, ComponentReport>,
    outcome: &Outcome,
    anchor: &Outcome,
    testbed: &Testbed,
    reserve: Reserve,
    strict: bool,
) -> Verdict {
    decide_acknowledged(
        spec,
        components,
        outcome,
        Some(anchor),
        testbed,
        reserve,
        strict,
        &AckInput::NotAsked,
    )
}

/// [`decide`], told whether the pull request carries the acknowledge label:
/// see [`acknowledge::acknowledge`]. Pure.
#[allow(clippy::too_many_arguments)]
pub(crate) fn decide_acknowledged(
    spec: &Spec,
    components: &BTreeMap<String, ComponentReport>,
    outcome: &Outcome,
    anchor: Option<&Outcome>,
    testbed: &Testbed,
    reserve: Reserve,
    strict: bool,
    ack: &AckInput,
) -> Verdict {
    let baseline = outcome.report();
    // Figures are compared only with a baseline from the same testbed.
    let comparable = baseline.filter(|b| testbed.comparable(&b.testbed));
    let mut results = Vec::new();
    // The baseline's own warning (missing, another testbed) comes first.
    let mut warnings: Vec<Warning> = crate::baseline::warning(outcome, testbed).into_iter().collect();
    let anchor = drift::anchor(spec, anchor, testbed, &mut warnings);
    for c in &spec.components {
        if let Some(report) = components.get(&c.name) {
            warnings.extend(warnings::component_warnings(&c.name, report, components));
            let base = comparable.and_then(|b| b.components.get(&c.name));
            let at_anchor = anchor.as_ref().and_then(|a| a.of(&c.name));
            for b in &c.budgets {
                let mut row = budgets::judge_component_budget(spec, c, b, report, components, base);
                drift::judge(c, b, &mut row, at_anchor.as_ref());
                results.push(row);
            }
        }
    }
    let ensemble = spec.ensemble.as_ref().map(|e| {
        let (report, rows) = ensemble::judge_ensemble(spec, e, components, comparable, reserve);
        results.extend(rows);
        report
    });
    warnings.extend(warnings::result_warnings(&results, components));
    warnings.extend(warnings::leak_warnings(&results));
    let budget_changes = baseline
        .map(|b| budget_changes(spec, &mut results, b))
        .unwrap_or_default();
    let acknowledgement = acknowledge::acknowledge(&mut results, &mut warnings, ack, strict);
    let mut summary = judging::summarize(&results, warnings, budget_changes, strict);
    summary.acknowledgement = acknowledgement;
    summary.notes = notes::notes(spec, testbed, components);
    summary.notes.extend(drift::tighter_notes(spec, &results));
    Verdict {
        summary,
        results,
        ensemble,
    }
}
