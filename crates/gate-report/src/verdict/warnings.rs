//! The run's warnings that the verdict raises: a component's own (not run,
//! untrained, a cache that never grew, params against the closed form),
//! the rows that are inconclusive or not measured, and a leak named as the
//! likely cause of an inflated inference peak.

use std::collections::BTreeMap;

use gate_spec::metric::Metric;

use super::{PARAMS_AGREEMENT, PARAMS_AGREEMENT_FLOOR, PARAMS_BOOKKEEPING_PER_TENSOR};
use gate_contract::report::*;

/// The warnings of the judged rows: each inconclusive row, then each row
/// not measured whose component ran (one that did not already has its
/// warning).
pub(super) fn result_warnings(
    results: &[BudgetResult],
    components: &BTreeMap<String, ComponentReport>,
) -> Vec<Warning> {
    let mut warnings = Vec::new();
    for r in results.iter().filter(|r| r.status == Status::Inconclusive) {
        warnings.push(Warning::new(
            Some(r.component.as_str()),
            WarningKind::Inconclusive,
            format!(
                "{}.{}: inconclusive: {}",
                r.component,
                r.metric,
                r.reason.clone().unwrap_or_default()
            ),
        ));
    }
    for r in results.iter().filter(|r| r.status == Status::NotMeasured) {
        // A component that was not run already has its one warning.
        let measured = |name: &str| components.get(name).is_some_and(|c| c.error.is_none());
        if r.component.component().is_none_or(measured) {
            warnings.push(Warning::new(
                Some(r.component.as_str()),
                WarningKind::NotMeasured,
                format!("{}.{}: {}", r.component, r.metric, r.reason.clone().unwrap_or_default()),
            ));
        }
    }
    warnings
}

/// A component whose `growth` and `inference_peak` both fail (or regress):
/// what a leak keeps is still live when inference runs, so it inflates the
/// inference peak too, and the leak is the likely cause of both.
pub(super) fn leak_warnings(results: &[BudgetResult]) -> Vec<Warning> {
    let bad = |r: &&BudgetResult| matches!(r.status, Status::Fail | Status::Regressed);
    let mut out = Vec::new();
    // Found once, not per growth row: linear in components (#43 item 5).
    let inflated_peaks: std::collections::HashSet<&str> = results
        .iter()
        .filter(bad)
        .filter(|r| r.metric == Metric::InferencePeak.name())
        .map(|r| r.component.as_str())
        .collect();
    for g in results.iter().filter(|r| r.metric == Metric::Growth.name()).filter(bad) {
        let inflated = inflated_peaks.contains(g.component.as_str());
        if let (true, Some(grown)) = (inflated, g.measured) {
            let text = format!(
                "{c}: growth ({}) and inference_peak both fail: what leaks across steps is still live in inference, \
                 so the leak is the likely cause of both; fix it first (docs/sdk.md §7, `growth`)",
                gate_spec::units::Bytes(grown as u64),
                c = g.component
            );
            out.push(Warning::new(Some(g.component.as_str()), WarningKind::Leak, text));
        }
    }
    out
}

/// A component's warnings: not run, or params that disagree with the closed form.
pub(super) fn component_warnings(
    name: &str,
    report: &ComponentReport,
    components: &BTreeMap<String, ComponentReport>,
) -> Vec<Warning> {
    let mut warnings = Vec::new();
    if let Some(ComponentError {
        kind: ErrorKind::NotMeasured,
        reason,
        ..
    }) = &report.error
    {
        warnings.push(Warning::new(
            Some(name),
            WarningKind::NotMeasured,
            format!("{name}: not measured: {reason}"),
        ));
    }
    // A reference that failed is said once, in each ratio budget's reason.
    let reference_failed = report
        .reference
        .as_ref()
        .and_then(|r| components.get(r))
        .is_some_and(|r| r.error.is_some());
    if let Some(e) = report.ratio_error.as_ref().filter(|_| !reference_failed) {
        warnings.push(Warning::new(
            Some(name),
            WarningKind::RatioFailed,
            format!(
                "{name}: the interleaved steps for step_time_ratio failed ({e}); it is the ratio of the two profiles' medians, without an interval"
            ),
        ));
    }
    warnings.extend(capacity_not_held(name, report));
    if let Some(c) = report.untrained() {
        warnings.push(Warning::new(
            Some(name),
            WarningKind::Untrained,
            untrained_text(name, c),
        ));
    }
    if report.value(Metric::KvCachePerToken) == Some(0.0) {
        warnings.push(Warning::new(
            Some(name),
            WarningKind::CacheNeverGrew,
            format!(
                "{name}: {CACHE_NEVER_GREW_LEAD}kv_cache_per_token is 0 B, so the loop either keeps no KV cache \
                 (each step runs the whole sequence again) or made its cache whole in the prefill (its size is in \
                 prefill_peak); hint: a loop meant to cache its keys and values does not: check that `decode` feeds \
                 one token and keeps the cache it grew"
            ),
        ));
    }
    if let (Some(p), true) = (report.value(Metric::Params), report.analytic_params_bytes > 0) {
        let a = report.analytic_params_bytes as f64;
        // Each tensor's bookkeeping (~430 B a tensor on the CPU adapters) is live too: a
        // model of thousands of small tensors is not wrong by its count.
        let bookkeeping = (report.param_tensors * PARAMS_BOOKKEEPING_PER_TENSOR) as f64;
        let allowed = (a * PARAMS_AGREEMENT).max(PARAMS_AGREEMENT_FLOOR as f64) + bookkeeping;
        if (p - a).abs() > allowed {
            warnings.push(Warning::new(
                Some(name),
                WarningKind::ParamsDisagree,
                format!(
                    "{name}: measured params ({}) and the closed form ({}) disagree",
                    gate_spec::units::Bytes(p as u64),
                    gate_spec::units::Bytes(a as u64)
                ),
            ));
        }
    }
    warnings
}

/// The warning of a serving capacity the card did not hold in one decode
/// at that size, where it was checked (an emulated card) and no length it
/// held was found (where one was, the figure is it and a note says so).
fn capacity_not_held(name: &str, report: &ComponentReport) -> Option<Warning> {
    let check = report
        .kv_capacity_check
        .as_ref()
        .filter(|c| !c.fits && c.card_tokens.is_none())?;
    Some(Warning::new(
        Some(name),
        WarningKind::CapacityNotHeld,
        format!(
            "{name}: {CAPACITY_NOT_HELD_LEAD}{}; hint: no shorter cache was found with which a decode step ran \
             beside the held bytes (or the step failed for another reason than memory, given above): run it \
             without `--emulate-capacity` to see the decode alone",
            super::budgets::capacity_not_held(check)
        ),
    ))
}

/// The warning of a step that leaves trainable parameters without a gradient.
fn untrained_text(name: &str, c: &gate_contract::measurement::GradientCoverage) -> String {
    let more = c.without_gradient.saturating_sub(c.missing.len() as u64);
    let names = if more > 0 {
        format!("{} and {more} more", c.missing.join(", "))
    } else {
        c.missing.join(", ")
    };
    let no_backward = c
        .likely_cause
        .as_deref()
        .unwrap_or("an op without a backward on their path");
    // The adapter names its own way to declare a frozen parameter; a
    // report written before it did names none.
    let declare = c
        .declare_frozen
        .as_deref()
        .map_or_else(|| "in its workload".to_string(), |how| format!("with {how}"));
    format!(
        "{name}: {}{} of {} parameter tensors ({} of {}) got no gradient ({names}), so its training figures \
         measure a step that trains only the rest. Likely cause: {no_backward}, a `detach`, or parameters \
         the loss never reaches; hint: docs/sdk.md §8 says what to do, and a parameter frozen on purpose is \
         declared {declare}",
        UNTRAINED_LEAD,
        c.without_gradient,
        c.tensors,
        gate_spec::units::Bytes(c.without_gradient_bytes),
        gate_spec::units::Bytes(c.bytes),
    )
}

#[cfg(test)]
mod tests {
    use super::super::decide;
    use super::super::fixtures::pair::*;
    use super::*;
    use gate_spec::metric::Metric;
    use std::collections::BTreeMap;
    use std::path::Path;

    #[test]
    fn params_may_exceed_the_closed_form_by_each_tensors_bookkeeping() {
        // 2,790 tensors of ~427 B over 37.97 MiB: 3 % above, and not wrong.
        let analytic = 39_817_260u64;
        let mut c = comp(&[(Metric::Params, (analytic + 2_790 * 427) as f64)], "f");
        c.analytic_params_bytes = analytic;
        assert_eq!(
            component_warnings("tft", &c, &BTreeMap::new()).len(),
            1,
            "without the count it disagrees"
        );
        c.param_tensors = 2_790;
        assert!(
            component_warnings("tft", &c, &BTreeMap::new()).is_empty(),
            "{:?}",
            component_warnings("tft", &c, &BTreeMap::new())
        );
        // A real difference still shows.
        let mut doubled = comp(&[(Metric::Params, (analytic * 2) as f64)], "f");
        doubled.analytic_params_bytes = analytic;
        doubled.param_tensors = 2_790;
        assert_eq!(component_warnings("tft", &doubled, &BTreeMap::new()).len(), 1);
    }

    #[test]
    fn a_leak_that_inflates_the_inference_peak_is_named_as_its_likely_cause() {
        let spec = gate_spec::budget::parse(
            Path::new("budgets.yaml"),
            "version: 1\ndevice: { name: card, capacity: 1 GiB }\ncomponents:\n  a:\n    workload: mlp\n    budgets: { growth: < 16 KiB, inference_peak: < 1 MiB }\n  b:\n    workload: mlp\n    budgets: { growth: < 16 KiB, inference_peak: < 1 MiB }\n",
        )
        .unwrap();
        let mib = 1024.0 * 1024.0;
        // `a` leaks 1 MiB a step (2 further steps); `b` only exceeds its inference peak.
        let c = reports(
            &[(Metric::Growth, 2.0 * mib), (Metric::InferencePeak, 3.0 * mib)],
            &[(Metric::Growth, 0.0), (Metric::InferencePeak, 3.0 * mib)],
        );
        let v = decide(&spec, &c, &no_baseline(), &Testbed::default(), RESERVE, false);
        reads_back(&v);
        let leaks: Vec<&Warning> = v
            .summary
            .warnings
            .iter()
            .filter(|w| w.kind == WarningKind::Leak)
            .collect();
        assert_eq!(leaks.len(), 1);
        assert_eq!(leaks[0].component.as_deref(), Some("a"));
        assert_eq!(
            leaks[0].text,
            "a: growth (2.000 MiB) and inference_peak both fail: what leaks across steps is still live in \
              inference, so the leak is the likely cause of both; fix it first (docs/sdk.md §7, `growth`)"
        );
    }

    #[test]
    fn a_generation_whose_cache_never_grew_is_warned_and_read_back() {
        let c = reports(&[(Metric::Params, 400.0), (Metric::KvCachePerToken, 0.0)], &[]);
        let v = decide(&spec(), &c, &no_baseline(), &Testbed::default(), RESERVE, false);
        let w: Vec<_> = v
            .summary
            .warnings
            .iter()
            .filter(|w| w.kind == WarningKind::CacheNeverGrew)
            .collect();
        assert_eq!(w.len(), 1);
        assert!(
            w[0].text
                .starts_with("a: the decode steps grew no cache: kv_cache_per_token is 0 B"),
            "{}",
            w[0].text
        );
        assert_eq!(Warning::from_text(w[0].text.clone()), *w[0]);
    }
}
