//! One component budget judged: the figure it reads (measured, or a ratio
//! to the reference), its status, and the reason a row says when it is not
//! a plain pass.

use std::collections::BTreeMap;

use gate_spec::budget::Spec;
use gate_spec::metric::{Metric, Unit};

use super::judging::{interval, judge, judge_interval, regressed, straddles};
use super::ratios::{not_measured_ratio, ratio};
use crate::compare::what_changed;
use gate_contract::report::*;

/// One component budget: against its limit, and (sizes only) against the
/// baseline's figure when the component's settings are the baseline's.
/// When they differ, the baseline's figure is shown and the reason said.
pub(super) fn judge_component_budget(
    spec: &Spec,
    c: &gate_spec::budget::Component,
    b: &gate_spec::budget::Budget,
    report: &ComponentReport,
    components: &BTreeMap<String, ComponentReport>,
    base: Option<&ComponentReport>,
) -> BudgetResult {
    // A change of settings is compared all the same: a config change that
    // grows the model is exactly what a reviewer must see judged, with the
    // change named beside the delta (issue #38 item 5).
    let config_changed = base
        .filter(|x| x.fingerprint != report.fingerprint && report.error.is_none() && x.error.is_none())
        .map(|x| what_changed(x, report));
    let base_value = base.and_then(|r| r.value(b.metric));
    let measured = report.value(b.metric).or_else(|| ratio(components, report, b.metric));
    let interval = measured.and(interval(report, b.metric));
    let (status, reason) = match measured {
        Some(v) => judge_figure(c, b, report, v, interval.as_ref(), base_value, config_changed.as_ref()),
        None => why_unmeasured(spec, components, report, b.metric),
    };
    // A serving capacity the card did not hold in one decode at that size
    // (an emulated card): the figure read is the card's own answer where
    // one was found, said beside it; where none was, it is over, whatever
    // it reads.
    let (status, reason) = match &report.kv_capacity_check {
        Some(check) if b.metric == Metric::KvCapacityTokens && measured.is_some() && !check.fits => {
            let status = if check.card_tokens.is_some() {
                status
            } else {
                Status::Fail
            };
            (status, Some(capacity_not_held(check)))
        }
        _ => (status, reason),
    };
    // A training figure of a step that leaves parameters untrained is
    // flagged on its row whatever its status.
    let untrained = report.untrained().filter(|_| b.metric.measures_training());
    let reason = match (reason, untrained) {
        (None, Some(u)) => Some(untrained_reason(u)),
        (Some(r), Some(u)) => Some(format!("{r}; {}", untrained_reason(u))),
        (r, None) => r,
    };
    BudgetResult {
        component: Subject::Component(c.name.clone()),
        metric: MetricId::Component(b.metric),
        unit: b.metric.unit(),
        op: b.limit.op,
        limit: b.limit.value,
        measured,
        baseline: base_value,
        tolerance_percent: c.tolerance.0,
        status,
        line: b.line,
        reason,
        display_unit: b.limit.unit,
        limit_in_seconds: b.limit.seconds,
        not_compared: None,
        config_changed,
        baseline_op: None,
        baseline_limit: None,
        interval,
        untrained: untrained.is_some(),
        drift: None,
    }
}

/// A measured figure's status and reason: failed when its component failed
/// after it; else against its limit, then (sizes only) the baseline.
fn judge_figure(
    c: &gate_spec::budget::Component,
    b: &gate_spec::budget::Budget,
    report: &ComponentReport,
    v: f64,
    interval: Option<&Interval>,
    base_value: Option<f64>,
    config_changed: Option<&String>,
) -> (Status, Option<String>) {
    // A figure measured before the component failed is kept and shown,
    // but the component did not complete: its every budget fails, so no
    // output can be green over a model that crashed, ran out of memory
    // or lost its loss in a later phase (issue #43 item 1).
    if let Some(e) = report.error.as_ref().filter(|e| e.kind == ErrorKind::Failed) {
        return (Status::Fail, Some(failed_later(e)));
    }
    // A timed figure with an interval is judged on all of it.
    let judged = match interval {
        Some(i) => judge_interval(&b.limit, i),
        None => judge(&b.limit, v),
    };
    match (judged, base_value) {
        (Status::Inconclusive, _) => (Status::Inconclusive, interval.map(|i| straddles(b, i))),
        (Status::Pass, Some(bv))
            // Every byte metric is a cost, so growth is the wrong way;
            // only a ceiling (`<`) is held to it: a floor (`>`) on a
            // size promises "at least", which growth keeps.
            if b.metric.unit() == Unit::Bytes
                && b.limit.op.is_max()
                && regressed(v, bv, c.tolerance.0, true) =>
        {
            (
                Status::Regressed,
                Some(match config_changed {
                    Some(why) => format!("grew more than {} over the baseline ({why})", c.tolerance),
                    None => format!("grew more than {} over the baseline", c.tolerance),
                }),
            )
        }
        (s, _) => (s, None),
    }
}

/// Why a budget has no figure: its component was not measured or failed,
/// or (a ratio) its reference did, or the metric was not measured here.
fn why_unmeasured(
    spec: &Spec,
    components: &BTreeMap<String, ComponentReport>,
    report: &ComponentReport,
    metric: Metric,
) -> (Status, Option<String>) {
    match &report.error {
        Some(e) if e.kind == ErrorKind::NotMeasured => (Status::NotMeasured, Some(e.reason.clone())),
        Some(e) => (
            Status::Fail,
            Some(format!(
                "measurement failed in phase {}: {}",
                e.phase.as_deref().unwrap_or("unknown"),
                e.reason
            )),
        ),
        None if metric.ratio_of().is_some() => (
            Status::NotMeasured,
            Some(not_measured_ratio(spec, components, report, metric)),
        ),
        None => (Status::NotMeasured, Some(not_measured_reason(metric))),
    }
}

/// Why a figure that was measured still fails: its component failed after it.
fn failed_later(e: &ComponentError) -> String {
    format!(
        "measured, but the component then failed in phase {}: {}",
        e.phase.as_deref().unwrap_or("unknown"),
        e.reason
    )
}

fn not_measured_reason(metric: Metric) -> String {
    match metric {
        Metric::DeviceUsed => "device_used is measured on CUDA runs only".into(),
        Metric::ModelState => "model_state was not measured: the model keeps no state it can empty (a KV cache \
                               its forward leaves full; `Model::clear_state`, or `LanguageModel::clear_cache` \
                               through gate::Lm, docs/sdk.md)"
            .into(),
        Metric::KvCapacityTokens => "kv_capacity_tokens was not measured: the decode steps grew no cache".into(),
        m => format!("{m} was not measured"),
    }
}

/// Why a `kv_capacity_tokens` the card was checked at is not held, and
/// what the card held instead where that was found.
pub(super) fn capacity_not_held(check: &gate_contract::measurement::CapacityCheck) -> String {
    let lead = format!(
        "one decode with the cache at {} tokens did not fit on the emulated card ({} held beside it): {}",
        check.tokens,
        gate_spec::units::Bytes(check.held_bytes),
        check.reason.as_deref().unwrap_or("no reason given")
    );
    match check.card_tokens {
        Some(held) => format!(
            "{lead}; the card held {held} ({:+.1} % against the arithmetic), the figure read",
            (held / check.tokens - 1.0) * 100.0
        ),
        None => lead,
    }
}

/// Why a training figure of a component whose step leaves parameters
/// without a gradient is not what it seems.
fn untrained_reason(c: &gate_contract::measurement::GradientCoverage) -> String {
    format!(
        "measures a step that does not train: {} of {} parameter tensors got no gradient",
        c.without_gradient, c.tensors
    )
}

#[cfg(test)]
mod tests {
    use super::super::decide;
    use super::super::fixtures::pair::*;
    use super::*;
    use crate::baseline::Outcome;
    use gate_spec::metric::Metric;
    use std::path::Path;

    #[test]
    fn a_time_limit_is_shown_in_the_unit_it_was_written_in() {
        let spec = gate_spec::budget::parse(
            Path::new("budgets.yaml"),
            "version: 1\ndevice: { name: card, capacity: 1000 B }\ncomponents:\n  a:\n    workload: mlp\n    budgets:\n      step_time: < 10 s\n  b:\n    workload: mlp\n    budgets:\n      step_time: < 1500 ms\n",
        )
        .unwrap();
        let c = reports(&[(Metric::StepTime, 12_000.0)], &[(Metric::StepTime, 12.0)]);
        let v = decide(&spec, &c, &no_baseline(), &Testbed::default(), RESERVE, false);
        let shown: Vec<String> = v.results.iter().map(|r| r.limit_text(r.op, r.limit)).collect();
        assert_eq!(shown, ["< 10 s", "< 1500 ms"]);
        assert_eq!(v.results[0].limit_value_text(v.results[0].limit), "10 s");
    }

    #[test]
    fn growth_past_the_tolerance_is_a_regression_for_sizes_only() {
        let base_components = reports(
            &[(Metric::Params, 300.0), (Metric::StepTime, 1.0)],
            &[(Metric::Params, 100.0), (Metric::TrainingPeak, 100.0)],
        );
        let baseline = Report {
            schema: 1,
            gate_version: "0".into(),
            commit: None,
            spec: "budgets.yaml".into(),
            testbed: Testbed::default(),
            ensemble: decide(
                &spec(),
                &base_components,
                &no_baseline(),
                &Testbed::default(),
                RESERVE,
                false,
            )
            .ensemble,
            components: base_components,
            results: vec![],
            summary: Summary {
                status: RunStatus::Pass,
                passed: 0,
                failed: 0,
                regressed: 0,
                not_measured: 0,
                inconclusive: 0,
                warnings: vec![],
                strict: false,
                not_compared: 0,
                budget_changes: vec![],
                acknowledged: 0,
                acknowledgement: None,
                notes: vec![],
            },
            baseline: None,
            wall_seconds: 0.0,
            plans: Default::default(),
        };
        // params 300 → 330 (+10 % > 5 %), step_time 1 → 5 ms (noise is not gated), b unchanged.
        let c = reports(
            &[(Metric::Params, 330.0), (Metric::StepTime, 5.0)],
            &[(Metric::Params, 100.0), (Metric::TrainingPeak, 100.0)],
        );
        let found = Outcome::Found {
            report: Box::new(baseline),
            source: "b.json".into(),
        };
        let v = decide(&spec(), &c, &found, &Testbed::default(), RESERVE, false);
        assert_eq!(v.results[0].status, Status::Regressed);
        assert_eq!(v.results[0].baseline, Some(300.0));
        assert_eq!(v.results[1].status, Status::Pass);
        assert_eq!(v.results[2].status, Status::Pass);
        // The ensemble total grew 500 → 530 (+6 %): regressed as well.
        assert_eq!(v.results[3].status, Status::Regressed);
        // From another testbed, nothing is compared.
        let elsewhere = Testbed {
            backend: "cuda".into(),
            ..Testbed::default()
        };
        let v = decide(&spec(), &c, &found, &elsewhere, RESERVE, false);
        assert!(v
            .results
            .iter()
            .all(|r| r.baseline.is_none() && r.status != Status::Regressed));
    }

    #[test]
    fn a_component_that_fails_after_its_budgeted_figures_fails_every_budget_and_the_ensemble() {
        // b's params and training_peak were measured and are under their
        // limits; its profile then failed in inference.
        let mut c = reports(
            &[(Metric::Params, 400.0), (Metric::StepTime, 0.001)],
            &[(Metric::Params, 100.0), (Metric::TrainingPeak, 200.0)],
        );
        c.get_mut("b").unwrap().error = Some(ComponentError {
            kind: ErrorKind::Failed,
            phase: Some("inference".into()),
            reason: "the profile exited with status 1".into(),
            peak_bytes: None,
            failure_kind: Some(gate_contract::measurement::FailureKind::Model),
        });
        for strict in [false, true] {
            let v = decide(&spec(), &c, &no_baseline(), &Testbed::default(), RESERVE, strict);
            let b_rows: Vec<_> = v.results.iter().filter(|r| r.component == "b").collect();
            assert_eq!(b_rows.len(), 1);
            assert_eq!(b_rows[0].status, Status::Fail);
            assert_eq!(b_rows[0].measured, Some(200.0), "the figure is kept");
            assert_eq!(
                b_rows[0].reason.as_deref(),
                Some("measured, but the component then failed in phase inference: the profile exited with status 1")
            );
            let ensemble: Vec<_> = v.results.iter().filter(|r| r.component.is_ensemble()).collect();
            assert!(ensemble.iter().all(|r| r.status == Status::Fail), "{ensemble:?}");
            assert!(v
                .results
                .iter()
                .filter(|r| r.component == "a")
                .all(|r| r.status == Status::Pass));
            assert_eq!(v.summary.status, RunStatus::Fail);
            reads_back(&v);
        }
    }

    #[test]
    fn a_serving_capacity_the_card_did_not_hold_reads_its_own_answer_or_fails_and_is_warned() {
        let spec = gate_spec::budget::parse(
            Path::new("budgets.yaml"),
            "version: 1\ndevice: { name: card, capacity: 4 GiB }\ncomponents:\n  g:\n    workload: lm\n    generate: { prefill: 16, decode: 8 }\n    budgets:\n      kv_capacity_tokens: \"> 32768\"\n",
        )
        .unwrap();
        let check = |fits: bool| gate_contract::measurement::CapacityCheck {
            tokens: 40_960.0,
            held_bytes: 83_834_880,
            fits,
            reason: (!fits).then(|| "CUDA_ERROR_OUT_OF_MEMORY".to_string()),
            card_tokens: None,
        };
        let mut c = BTreeMap::from([("g".to_string(), comp(&[(Metric::KvCapacityTokens, 40_960.0)], "x"))]);
        c.get_mut("g").unwrap().kv_capacity_check = Some(check(true));
        let v = decide(&spec, &c, &no_baseline(), &Testbed::default(), RESERVE, false);
        assert_eq!(v.results[0].status, Status::Pass);
        assert!(v
            .summary
            .warnings
            .iter()
            .all(|w| w.kind != WarningKind::CapacityNotHeld));

        c.get_mut("g").unwrap().kv_capacity_check = Some(check(false));
        let v = decide(&spec, &c, &no_baseline(), &Testbed::default(), RESERVE, false);
        assert_eq!(v.results[0].status, Status::Fail, "{:?}", v.results[0]);
        assert_eq!(
            v.results[0].reason.as_deref(),
            Some(
                "one decode with the cache at 40960 tokens did not fit on the emulated card (79.95 MiB held beside \
                 it): CUDA_ERROR_OUT_OF_MEMORY"
            )
        );
        let w: Vec<_> = v
            .summary
            .warnings
            .iter()
            .filter(|w| w.kind == WarningKind::CapacityNotHeld)
            .collect();
        assert_eq!(w.len(), 1);
        assert!(
            w[0].text
                .starts_with("g: kv_capacity_tokens is over what the card holds: "),
            "{}",
            w[0].text
        );
        reads_back(&v);

        // The card's own answer found: the figure read is it (the harness
        // writes it), judged as any figure, the arithmetic's miss said.
        let mut found = check(false);
        found.card_tokens = Some(36_864.0);
        *c.get_mut("g").unwrap() = comp(&[(Metric::KvCapacityTokens, 36_864.0)], "x");
        c.get_mut("g").unwrap().kv_capacity_check = Some(found);
        let v = decide(&spec, &c, &no_baseline(), &Testbed::default(), RESERVE, false);
        assert_eq!(v.results[0].status, Status::Pass, "{:?}", v.results[0]);
        assert!(
            v.results[0]
                .reason
                .as_deref()
                .unwrap()
                .ends_with("; the card held 36864 (-10.0 % against the arithmetic), the figure read"),
            "{:?}",
            v.results[0].reason
        );
        // Said as a note (a measured figure, not one to distrust).
        assert!(v
            .summary
            .warnings
            .iter()
            .all(|w| w.kind != WarningKind::CapacityNotHeld));
        let note = v
            .summary
            .notes
            .iter()
            .find(|n| n.kind == NoteKind::CapacityFromCard)
            .unwrap();
        assert_eq!(
            note.text,
            "g: kv_capacity_tokens is the card's own answer, 36864 tokens: one decode beside the arithmetic's 40960 \
             did not fit on the emulated card (-10.0 %: what the allocator needs beside the cache, which the \
             arithmetic does not count)"
        );
    }

    #[test]
    fn a_step_that_leaves_parameters_untrained_is_warned_flagged_on_its_training_rows_and_fails_strict() {
        let mut c = reports(
            &[(Metric::Params, 400.0), (Metric::StepTime, 0.001)],
            &[(Metric::Params, 100.0), (Metric::TrainingPeak, 200.0)],
        );
        c.get_mut("b").unwrap().gradient_coverage = Some(gate_contract::measurement::GradientCoverage {
            tensors: 39,
            bytes: 1000,
            without_gradient: 38,
            without_gradient_bytes: 900,
            missing: (0..8).map(|i| format!("layers.{i}.w")).collect(),
            frozen: 0,
            likely_cause: Some("the framework's own words".into()),
            declare_frozen: Some("`Framework::freeze`".into()),
            ..Default::default()
        });
        let v = decide(&spec(), &c, &no_baseline(), &Testbed::default(), RESERVE, false);
        assert_eq!(v.summary.status, RunStatus::Pass, "a warning, not a failure");
        let w: Vec<_> = v
            .summary
            .warnings
            .iter()
            .filter(|w| w.kind == WarningKind::Untrained)
            .collect();
        assert_eq!(w.len(), 1);
        assert_eq!(w[0].component.as_deref(), Some("b"));
        assert!(
            w[0].text.starts_with("b: the training step does not train the whole model: 38 of 39 parameter tensors (0.8789 KiB of 0.9766 KiB) got no gradient (layers.0.w, ")
                && w[0].text.contains("layers.7.w and 30 more"),
            "{}",
            w[0].text
        );
        assert!(
            w[0].text
                .contains("Likely cause: the framework's own words, a `detach`"),
            "{}",
            w[0].text
        );
        // The hint names the adapter's own way to declare a frozen
        // parameter, not one framework's for every framework.
        assert!(
            w[0].text
                .ends_with("a parameter frozen on purpose is declared with `Framework::freeze`"),
            "{}",
            w[0].text
        );
        assert_eq!(
            Warning::from_text(w[0].text.clone()),
            *w[0],
            "read back from report.json"
        );
        let peak = v.results.iter().find(|r| r.metric == "training_peak").unwrap();
        assert!(peak.untrained && peak.status == Status::Pass);
        assert_eq!(
            peak.reason.as_deref(),
            Some("measures a step that does not train: 38 of 39 parameter tensors got no gradient")
        );
        assert!(v.results.iter().filter(|r| r.metric == "params").all(|r| !r.untrained));
        reads_back(&v);
        let strict = decide(&spec(), &c, &no_baseline(), &Testbed::default(), RESERVE, true);
        assert_eq!(strict.summary.status, RunStatus::Fail);
    }
}
