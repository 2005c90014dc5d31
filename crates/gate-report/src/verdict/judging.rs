//! Judging one figure: against its limit, its interval against the limit,
//! and against the baseline's figure; and counting the results into the
//! run's summary. The rules every budget shares, kept apart from which
//! figure a budget reads.

use gate_spec::budget::Limit;
use gate_spec::metric::Metric;

use gate_contract::report::*;

pub(super) fn judge(limit: &Limit, measured: f64) -> Status {
    if limit.op.holds(measured, limit.value) {
        Status::Pass
    } else {
        Status::Fail
    }
}

/// Whether `measured` moved the wrong way past `baseline` by more than
/// `tolerance` percent. Only sizes are held to it: wall time on shared
/// runners varies more than any useful tolerance, so `step_time` and `loss`
/// are shown against the baseline but gated only by their budgets.
pub(super) fn regressed(measured: f64, baseline: f64, tolerance: f64, lower_is_better: bool) -> bool {
    if lower_is_better {
        measured > baseline * (1.0 + tolerance / 100.0) && measured - baseline > 0.0
    } else {
        measured < baseline * (1.0 - tolerance / 100.0)
    }
}

/// Judges a timed figure by its interval: pass when all of it satisfies
/// the limit, fail when none of it does, inconclusive when it straddles the
/// limit (the limit is monotone in the value, so the two ends decide).
pub(super) fn judge_interval(limit: &Limit, i: &Interval) -> Status {
    match (limit.op.holds(i.low, limit.value), limit.op.holds(i.high, limit.value)) {
        (true, true) => Status::Pass,
        (false, false) => Status::Fail,
        _ => Status::Inconclusive,
    }
}

/// The interval of a timed metric's median: `step_time_ratio` from the
/// variant's interleaved pairs, `step_time` from the timed steps. `None`
/// for other metrics and with fewer than 6 samples (then the median alone
/// is judged, as before).
pub(super) fn interval(report: &ComponentReport, metric: Metric) -> Option<Interval> {
    let samples = match metric {
        Metric::StepTimeRatio => &report.step_time_ratios,
        Metric::StepTime => &report.step_times_ms,
        _ => return None,
    };
    crate::interval::median_interval(samples, crate::interval::CONFIDENCE)
}

/// Why an interval is inconclusive, e.g. `the 96.5 % interval of 15 pairs,
/// 1.80 to 2.10, straddles the limit < 2`.
pub(super) fn straddles(b: &gate_spec::budget::Budget, i: &Interval) -> String {
    let unit = b.metric.unit();
    let what = if b.metric == Metric::StepTimeRatio {
        "pairs"
    } else {
        "steps"
    };
    format!(
        "the {:.1} % interval of {} {what}, {} to {}, straddles the limit {} {}",
        i.confidence * 100.0,
        i.samples,
        gate_spec::metric::format_value(unit, i.low),
        gate_spec::metric::format_value(unit, i.high),
        b.limit.op,
        gate_spec::metric::format_value(unit, b.limit.value)
    )
}

pub(super) fn summarize(
    results: &[BudgetResult],
    warnings: Vec<Warning>,
    budget_changes: Vec<BudgetChange>,
    strict: bool,
) -> Summary {
    let count = |s: Status| results.iter().filter(|r| r.status == s).count();
    let (passed, failed, regressed_n, not_measured) = (
        count(Status::Pass),
        count(Status::Fail),
        count(Status::Regressed),
        count(Status::NotMeasured),
    );
    // Acknowledged regressions are warnings, and `--strict` never has any.
    let failing = failed + regressed_n > 0 || (strict && (!warnings.is_empty() || not_measured > 0));
    Summary {
        status: if failing { RunStatus::Fail } else { RunStatus::Pass },
        passed,
        failed,
        regressed: regressed_n,
        not_measured,
        inconclusive: count(Status::Inconclusive),
        not_compared: results.iter().filter(|r| r.not_compared.is_some()).count(),
        warnings,
        strict,
        budget_changes,
        acknowledged: count(Status::Acknowledged),
        acknowledgement: None,
        notes: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::super::{decide, Reserve, Verdict};
    use super::*;
    use crate::baseline::Outcome;
    use gate_spec::metric::{Metric, Unit};
    use std::collections::BTreeMap;
    use std::path::Path;

    const SPEC: &str = "version: 1
device: { name: card, capacity: 1000 B, reserve: 100 B }
components:
  t:
    workload: mlp
    reference: plain
    budgets:
      step_time_ratio: < 2
      step_time: < 10 ms
    variants:
      plain: { batch_size: 4, budgets: { step_time: < 10 ms } }
";

    /// 15 pair ratios spread evenly over `low..=high`, and 7 step times.
    fn verdict(low: f64, high: f64, steps: &[f64], strict: bool) -> Verdict {
        let spec = gate_spec::budget::parse(Path::new("budgets.yaml"), SPEC).unwrap();
        let reports: BTreeMap<String, ComponentReport> = spec
            .components
            .iter()
            .map(|c| {
                let mut r = crate::not_measured_report(c, "");
                r.error = None;
                r.step_times_ms = steps.to_vec();
                let ms = gate_contract::timing::median(steps);
                r.metrics.insert(
                    Metric::StepTime,
                    MetricValue {
                        value: ms,
                        unit: Unit::Ms,
                    },
                );
                if c.reference.is_some() {
                    r.step_time_ratios = (0..15).map(|i| low + (high - low) * i as f64 / 14.0).rev().collect();
                }
                (c.name.clone(), r)
            })
            .collect();
        let reserve = Reserve {
            bytes: 0,
            measured: false,
        };
        // A baseline of the same figures: no warning of its own.
        let none = Outcome::Missing { reason: "test".into() };
        let first = decide(&spec, &reports, &none, &Testbed::default(), reserve, false);
        let baseline = Outcome::Found {
            report: Box::new(Report {
                schema: 1,
                gate_version: "0".into(),
                commit: None,
                spec: "budgets.yaml".into(),
                testbed: Testbed::default(),
                components: reports.clone(),
                ensemble: None,
                results: first.results,
                summary: first.summary,
                baseline: None,
                wall_seconds: 0.0,
                plans: Default::default(),
            }),
            source: "b.json".into(),
        };
        decide(&spec, &reports, &baseline, &Testbed::default(), reserve, strict)
    }

    fn ratio_row(v: &Verdict) -> &BudgetResult {
        v.results.iter().find(|r| r.metric == "step_time_ratio").unwrap()
    }

    const STEADY: [f64; 7] = [5.0, 6.0, 5.5, 5.2, 5.1, 5.3, 5.4];

    #[test]
    fn a_ratio_whose_interval_is_under_the_limit_passes_on_its_median() {
        // 1.0, 1.05, ..., 1.7: the 4th and 12th smallest are 1.15 and 1.55.
        let v = verdict(1.0, 1.7, &STEADY, true);
        let r = ratio_row(&v);
        assert_eq!(r.status, Status::Pass);
        assert!((r.measured.unwrap() - 1.35).abs() < 1e-12);
        let i = r.interval.unwrap();
        assert_eq!((i.samples, i.confidence), (15, 1.0 - 2.0 * 576.0 / 32768.0));
        assert!((i.low - 1.15).abs() < 1e-12 && (i.high - 1.55).abs() < 1e-12, "{i:?}");
        assert_eq!(v.summary.status, RunStatus::Pass);
        assert!(v.summary.warnings.is_empty(), "{:?}", v.summary.warnings);
    }

    #[test]
    fn a_ratio_whose_interval_is_all_over_the_limit_fails() {
        let v = verdict(2.1, 2.8, &STEADY, false);
        assert_eq!(ratio_row(&v).status, Status::Fail);
        assert_eq!(v.summary.status, RunStatus::Fail);
    }

    #[test]
    fn an_interval_across_the_limit_is_inconclusive_a_warning_and_a_failure_under_strict() {
        // Median 2.05 > 2, but the interval 1.9–2.2 holds values on both sides.
        let v = verdict(1.7, 2.4, &STEADY, false);
        let r = ratio_row(&v);
        assert_eq!(r.status, Status::Inconclusive);
        assert_eq!(r.measured.map(|m| (m * 1000.0).round()), Some(2050.0));
        let why = "the 96.5 % interval of 15 pairs, 1.85 to 2.25, straddles the limit < 2";
        assert_eq!(r.reason.as_deref(), Some(why));
        assert_eq!(v.summary.warnings, [format!("t.step_time_ratio: inconclusive: {why}")]);
        assert_eq!((v.summary.inconclusive, v.summary.failed), (1, 0));
        assert_eq!(v.summary.status, RunStatus::Pass);
        let strict = verdict(1.7, 2.4, &STEADY, true);
        assert_eq!(ratio_row(&strict).status, Status::Inconclusive);
        assert_eq!(strict.summary.status, RunStatus::Fail);
    }

    #[test]
    fn step_time_is_judged_on_its_interval_from_six_steps_and_on_its_median_below() {
        // 7 steps: [min, max] = 5–12 ms at 98.4 %, across the 10 ms limit.
        let spread = [5.0, 6.0, 5.5, 12.0, 5.1, 5.3, 5.4];
        let v = verdict(1.0, 1.7, &spread, false);
        let t = &v.results[1];
        assert_eq!((t.component.as_str(), t.metric.as_str()), ("t", "step_time"));
        assert_eq!(t.status, Status::Inconclusive);
        assert_eq!(t.interval.map(|i| (i.low, i.high, i.samples)), Some((5.0, 12.0, 7)));
        assert_eq!(
            t.reason.as_deref(),
            Some("the 98.4 % interval of 7 steps, 5.0 ms to 12.0 ms, straddles the limit < 10.0 ms")
        );
        let v = verdict(1.0, 1.7, &STEADY, false);
        assert_eq!((v.results[1].status, v.results[1].measured), (Status::Pass, Some(5.3)));
        // Three steps have no 95 % interval: the median is judged, as before.
        let v = verdict(1.0, 1.7, &[5.0, 12.0, 11.0], false);
        assert_eq!((v.results[1].status, v.results[1].interval), (Status::Fail, None));
    }
}
