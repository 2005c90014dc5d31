//! The ensemble: its members' figures summed with a context reserve per
//! process, its headroom on the card, and one result per ensemble budget.

use std::collections::BTreeMap;

use gate_spec::budget::{EnsembleMetric, Spec};
use gate_spec::metric::Unit;

use super::judging::{judge, regressed};
use super::Reserve;
use gate_contract::report::*;

/// The ensemble's total and headroom, and one result per ensemble budget.
pub(super) fn judge_ensemble(
    spec: &Spec,
    e: &gate_spec::budget::Ensemble,
    components: &BTreeMap<String, ComponentReport>,
    baseline: Option<&Report>,
    reserve: Reserve,
) -> (EnsembleReport, Vec<BudgetResult>) {
    let report = ensemble_report(spec, e, components, reserve);
    let base = baseline.and_then(|b| b.ensemble.as_ref());
    let tolerance = spec.default_tolerance;
    let rows = e
        .budgets
        .iter()
        .map(|b| judge_ensemble_budget(b, &report, base, tolerance, components))
        .collect();
    (report, rows)
}

/// The members' figures summed, with a context reserve per process; no
/// total when a member has no figure.
fn ensemble_report(
    spec: &Spec,
    e: &gate_spec::budget::Ensemble,
    components: &BTreeMap<String, ComponentReport>,
    reserve: Reserve,
) -> EnsembleReport {
    let mut sum = 0u64;
    let mut missing = Vec::new();
    for m in &e.members {
        match components.get(m).and_then(|r| r.value(e.metric)) {
            Some(v) => sum = sum.saturating_add(v as u64),
            None => missing.push(m.clone()),
        }
    }
    // Saturating: a spec bounds each term, not their sum.
    let reserves = reserve.bytes.saturating_mul(e.processes);
    let total = missing.is_empty().then_some(sum.saturating_add(reserves));
    let capacity = spec.device.capacity.0;
    EnsembleReport {
        members: e.members.clone(),
        metric: e.metric,
        total_bytes: total,
        headroom_bytes: total
            .map(|t| (i128::from(capacity) - i128::from(t)).clamp(i64::MIN.into(), i64::MAX.into()) as i64),
        reserve_bytes: reserves,
        reserve_source: if reserve.measured {
            ReserveSource::Measured
        } else {
            ReserveSource::Declared
        },
        processes: e.processes,
        capacity_bytes: capacity,
        missing,
    }
}

/// One ensemble budget: against its limit, then against the baseline's
/// ensemble (the spec's default tolerance).
fn judge_ensemble_budget(
    b: &gate_spec::budget::EnsembleBudget,
    report: &EnsembleReport,
    base: Option<&EnsembleReport>,
    tolerance: gate_spec::units::Percent,
    components: &BTreeMap<String, ComponentReport>,
) -> BudgetResult {
    let of = |x: &EnsembleReport| match b.metric {
        EnsembleMetric::Total => x.total_bytes.map(|v| v as f64),
        EnsembleMetric::Headroom => x.headroom_bytes.map(|v| v as f64),
    };
    let (measured, base_value) = (of(report), base.and_then(of));
    // Total grows when memory grows; headroom shrinks.
    let lower_is_better = b.metric == EnsembleMetric::Total;
    let (status, reason) = match measured {
        // A member that failed after its figure fails the ensemble
        // too: its total is built on a model that does not run.
        Some(_) if !failed_members(&report.members, components).is_empty() => (
            Status::Fail,
            Some(format!(
                "{} failed after its {} was measured",
                failed_members(&report.members, components).join(", "),
                report.metric
            )),
        ),
        Some(v) => match (judge(&b.limit, v), base_value) {
            (Status::Pass, Some(bv)) if regressed(v, bv, tolerance.0, lower_is_better) => (
                Status::Regressed,
                Some(format!("moved more than {tolerance} the wrong way over the baseline")),
            ),
            (s, _) => (s, None),
        },
        None => unmeasured_ensemble(report, components),
    };
    BudgetResult {
        component: Subject::Ensemble,
        metric: MetricId::Ensemble(b.metric),
        unit: Unit::Bytes,
        op: b.limit.op,
        limit: b.limit.value,
        measured,
        baseline: base_value,
        tolerance_percent: tolerance.0,
        status,
        line: b.line,
        reason,
        display_unit: b.limit.unit,
        limit_in_seconds: false,
        not_compared: None,
        config_changed: None,
        baseline_op: None,
        baseline_limit: None,
        interval: None,
        untrained: false,
        drift: None,
    }
}

/// The members among `names` whose measurement failed.
fn failed_members<'a>(names: &'a [String], components: &BTreeMap<String, ComponentReport>) -> Vec<&'a str> {
    names
        .iter()
        .filter(|m| {
            components
                .get(*m)
                .and_then(|r| r.error.as_ref())
                .is_some_and(|x| x.kind == ErrorKind::Failed)
        })
        .map(String::as_str)
        .collect()
}

/// Why the ensemble has no figure: a member failed (a failure) or was not
/// measured (not measured).
fn unmeasured_ensemble(e: &EnsembleReport, components: &BTreeMap<String, ComponentReport>) -> (Status, Option<String>) {
    let failed = failed_members(&e.missing, components);
    if failed.is_empty() {
        (
            Status::NotMeasured,
            Some(format!("no {} for: {}", e.metric, e.missing.join(", "))),
        )
    } else {
        (
            Status::Fail,
            Some(format!("the measurement of {} failed", failed.join(", "))),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::super::decide;
    use super::super::fixtures::pair::*;
    use super::*;
    use gate_spec::metric::Metric;

    #[test]
    fn budgets_pass_and_fail_and_the_ensemble_sums_with_the_reserve() {
        let c = reports(
            &[(Metric::Params, 400.0), (Metric::StepTime, 12.0)],
            &[(Metric::Params, 300.0), (Metric::TrainingPeak, 300.0)],
        );
        let v = decide(&spec(), &c, &no_baseline(), &Testbed::default(), RESERVE, false);
        assert_eq!(
            statuses(&v),
            [
                ("a", "params", Status::Pass),
                ("a", "step_time", Status::Fail),
                ("b", "training_peak", Status::Pass),
                ("ensemble", "total", Status::Pass),
                ("ensemble", "headroom", Status::Pass)
            ]
        );
        let e = v.ensemble.unwrap();
        assert_eq!((e.total_bytes, e.headroom_bytes), (Some(800), Some(200)));
        assert_eq!(v.summary.status, RunStatus::Fail);
    }

    #[test]
    fn a_failed_member_fails_the_ensemble_and_unmeasured_metrics_are_warnings() {
        let mut c = reports(&[(Metric::Params, 400.0)], &[]);
        c.get_mut("b").unwrap().error = Some(ComponentError {
            kind: ErrorKind::Failed,
            phase: Some("forward".into()),
            reason: "out of memory".into(),
            peak_bytes: None,
            failure_kind: Some(gate_contract::measurement::FailureKind::OutOfMemory),
        });
        let v = decide(&spec(), &c, &no_baseline(), &Testbed::default(), RESERVE, false);
        assert_eq!(
            v.results[1].status,
            Status::NotMeasured,
            "a's step_time was not measured"
        );
        assert_eq!(v.results[2].status, Status::Fail);
        assert_eq!(
            v.results[2].reason.as_deref(),
            Some("measurement failed in phase forward: out of memory")
        );
        assert_eq!(v.results[3].status, Status::Fail);
        reads_back(&v);
        assert!(v.summary.warnings.iter().any(|w| w.text.starts_with("a.step_time")
            && w.kind == WarningKind::NotMeasured
            && w.component.as_deref() == Some("a")));
        assert_eq!(
            decide(
                &spec(),
                &reports(
                    &[(Metric::Params, 1.0)],
                    &[(Metric::Params, 1.0), (Metric::TrainingPeak, 1.0)]
                ),
                &no_baseline(),
                &Testbed::default(),
                RESERVE,
                true
            )
            .summary
            .status,
            RunStatus::Fail,
            "strict: the unmeasured step_time fails"
        );
    }
}
