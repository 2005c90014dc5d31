//! The acknowledge label: regressions against the baseline a reviewer
//! accepted, and what `--strict` and an unverifiable label do to them.

use gate_contract::report::*;

/// The acknowledge label: with it on the pull request, each regression
/// against the baseline becomes [`Status::Acknowledged`], a warning that
/// names the label, who added it and when. A budget's own limit is never
/// acknowledged (`Fail` stays `Fail`), `--strict` (the release gate) ignores
/// the label and says so, and a label GitHub could not be asked about
/// leaves regressions as they are, with a warning. Returns the label to
/// record in the summary.
pub(super) fn acknowledge(
    results: &mut [BudgetResult],
    warnings: &mut Vec<Warning>,
    ack: &AckInput,
    strict: bool,
) -> Option<Acknowledgement> {
    let regressed = results.iter().filter(|r| r.status == Status::Regressed).count();
    match ack {
        AckInput::NotAsked | AckInput::Absent { .. } => None,
        AckInput::Unverified { label, reason } => {
            if regressed > 0 && !strict {
                warnings.push(Warning::run_wide(
                    WarningKind::AckUnconfirmed,
                    format!(
                        "the `{label}` label could not be verified, so {regressed} regression(s) stay regressions: {reason}"
                    ),
                ));
            }
            None
        }
        AckInput::Present(a) if strict => {
            if regressed > 0 {
                warnings.push(Warning::run_wide(
                    WarningKind::Acknowledgement,
                    format!(
                        "--strict ignores the `{}` label (added by @{} at {}): {regressed} regression(s) stay regressions",
                        a.label, a.by, a.at
                    ),
                ));
            }
            Some(a.clone())
        }
        AckInput::Present(a) => {
            for r in results.iter_mut().filter(|r| r.status == Status::Regressed) {
                r.status = Status::Acknowledged;
            }
            if regressed > 0 {
                warnings.push(Warning::run_wide(
                    WarningKind::Acknowledgement,
                    format!(
                        "{regressed} regression(s) acknowledged by @{} via `{}` at {}",
                        a.by, a.label, a.at
                    ),
                ));
            }
            Some(a.clone())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::pair::*;
    use super::super::{decide, decide_acknowledged, Verdict};
    use super::*;
    use crate::baseline::Outcome;
    use gate_spec::metric::Metric;
    use std::collections::BTreeMap;

    /// A baseline at params 300 / 100 and a run at 330 (regressed) with
    /// `a.step_time` at 12 ms, over its 10 ms budget (an absolute failure).
    fn regressing_run() -> (BTreeMap<String, ComponentReport>, Outcome) {
        let base_components = reports(
            &[(Metric::Params, 300.0), (Metric::StepTime, 1.0)],
            &[(Metric::Params, 100.0), (Metric::TrainingPeak, 100.0)],
        );
        let mut baseline_verdict = decide(
            &spec(),
            &base_components,
            &no_baseline(),
            &Testbed::default(),
            RESERVE,
            false,
        );
        let baseline = Report {
            schema: 1,
            gate_version: "0".into(),
            commit: None,
            spec: "budgets.yaml".into(),
            testbed: Testbed::default(),
            ensemble: baseline_verdict.ensemble.take(),
            components: base_components,
            results: vec![],
            summary: baseline_verdict.summary,
            baseline: None,
            wall_seconds: 0.0,
            plans: Default::default(),
        };
        let run = reports(
            &[(Metric::Params, 330.0), (Metric::StepTime, 12.0)],
            &[(Metric::Params, 100.0), (Metric::TrainingPeak, 100.0)],
        );
        let found = Outcome::Found {
            report: Box::new(baseline),
            source: "b.json".into(),
        };
        (run, found)
    }

    fn label() -> Acknowledgement {
        Acknowledgement {
            label: "gate:accept-regression".into(),
            by: "octocat".into(),
            at: "2026-12-01T10:20:30Z".into(),
        }
    }

    fn with_ack(run: &BTreeMap<String, ComponentReport>, found: &Outcome, ack: &AckInput, strict: bool) -> Verdict {
        decide_acknowledged(&spec(), run, found, None, &Testbed::default(), RESERVE, strict, ack)
    }

    #[test]
    fn the_label_acknowledges_regressions_but_never_a_budget_failure() {
        let (run, found) = regressing_run();
        let v = with_ack(&run, &found, &AckInput::Present(label()), false);
        assert_eq!(
            statuses(&v),
            [
                ("a", "params", Status::Acknowledged),
                ("a", "step_time", Status::Fail),
                ("b", "training_peak", Status::Pass),
                ("ensemble", "total", Status::Acknowledged),
                ("ensemble", "headroom", Status::Acknowledged)
            ]
        );
        assert_eq!(
            (v.summary.regressed, v.summary.acknowledged, v.summary.failed),
            (0, 3, 1)
        );
        assert_eq!(v.summary.status, RunStatus::Fail, "the step_time budget still fails");
        assert_eq!(v.summary.acknowledgement, Some(label()));
        assert_eq!(
            v.summary.warnings,
            ["3 regression(s) acknowledged by @octocat via `gate:accept-regression` at 2026-12-01T10:20:30Z"]
        );
        // Without the budget failure, the acknowledged run passes.
        let mut passing = run.clone();
        passing
            .get_mut("a")
            .unwrap()
            .metrics
            .get_mut(&Metric::StepTime)
            .unwrap()
            .value = 1.0;
        let v = with_ack(&passing, &found, &AckInput::Present(label()), false);
        assert_eq!(v.summary.status, RunStatus::Pass);
        assert_eq!(v.summary.acknowledged, 3);
    }

    #[test]
    fn strict_an_absent_label_and_an_unverified_one_leave_regressions_as_they_are() {
        let (mut run, found) = regressing_run();
        run.get_mut("a")
            .unwrap()
            .metrics
            .get_mut(&Metric::StepTime)
            .unwrap()
            .value = 1.0;
        let regressed = |v: &Verdict| {
            (
                v.summary.regressed,
                v.summary.acknowledged,
                v.summary.status,
                v.summary.warnings.clone(),
            )
        };
        let absent = AckInput::Absent {
            label: "gate:accept-regression".into(),
        };
        assert_eq!(
            regressed(&with_ack(&run, &found, &absent, false)),
            (3, 0, RunStatus::Fail, vec![])
        );
        assert_eq!(
            regressed(&with_ack(&run, &found, &AckInput::Present(label()), true)),
            (
                3,
                0,
                RunStatus::Fail,
                vec![Warning::run_wide(
                    WarningKind::Acknowledgement,
                    "--strict ignores the `gate:accept-regression` label (added by @octocat at \
                      2026-12-01T10:20:30Z): 3 regression(s) stay regressions"
                )]
            )
        );
        let unverified = AckInput::Unverified {
            label: "gate:accept-regression".into(),
            reason: "GitHub did not answer".into(),
        };
        assert_eq!(
            regressed(&with_ack(&run, &found, &unverified, false)),
            (
                3,
                0,
                RunStatus::Fail,
                vec![Warning::run_wide(
                    WarningKind::AckUnconfirmed,
                    "the `gate:accept-regression` label could not be verified, so 3 regression(s) stay \
                      regressions: GitHub did not answer"
                )]
            )
        );
        // No regression: nothing to acknowledge and nothing to say.
        let v = with_ack(
            &reports(
                &[(Metric::Params, 300.0), (Metric::StepTime, 1.0)],
                &[(Metric::Params, 100.0), (Metric::TrainingPeak, 100.0)],
            ),
            &found,
            &unverified,
            false,
        );
        assert_eq!(regressed(&v), (0, 0, RunStatus::Pass, vec![]));
    }
}
