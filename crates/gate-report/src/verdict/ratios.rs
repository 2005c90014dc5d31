//! Variants against their reference: the ratio metrics (`loss_ratio`,
//! `step_time_ratio`), where their two figures come from, why one cannot
//! be measured, and the ratios a card can never measure.

use std::collections::BTreeMap;

use gate_spec::budget::Spec;
use gate_spec::metric::Metric;

use gate_contract::report::*;

/// `metric / reference's metric` for a ratio metric, from the two reports.
/// A step-time ratio timed in interleaved pairs is their median instead.
pub(super) fn ratio(
    components: &BTreeMap<String, ComponentReport>,
    report: &ComponentReport,
    metric: Metric,
) -> Option<f64> {
    if metric == Metric::StepTimeRatio && !report.step_time_ratios.is_empty() {
        return Some(gate_contract::timing::median(&report.step_time_ratios)).filter(|v| v.is_finite());
    }
    let of = metric.ratio_of()?;
    // The reference's own profile did not reach its loss (it does not fit
    // the emulated card): the ratio steps took both losses in one process.
    let from_ratio_steps = || {
        let l = report.ratio_losses.filter(|_| metric == Metric::LossRatio)?;
        Some((l.variant, l.reference))
    };
    let (v, r) = from_profiles(components, report, of).or_else(from_ratio_steps)?;
    (r != 0.0 && v.is_finite() && r.is_finite()).then(|| v / r)
}

/// `metric` of the variant and of its reference, from their own profiles.
fn from_profiles(
    components: &BTreeMap<String, ComponentReport>,
    report: &ComponentReport,
    metric: Metric,
) -> Option<(f64, f64)> {
    let reference = components.get(report.reference.as_ref()?)?;
    report.value(metric).zip(reference.value(metric))
}

/// Whether `report`'s `loss_ratio` comes from the ratio steps' losses
/// rather than the two profiles' (see [`ratio`]).
pub(super) fn loss_from_ratio_steps(components: &BTreeMap<String, ComponentReport>, report: &ComponentReport) -> bool {
    report.ratio_losses.is_some() && from_profiles(components, report, Metric::Loss).is_none()
}

/// Component `c`'s ratio budgets (`loss_ratio`, `step_time_ratio`), by metric.
pub(super) fn ratio_budgets(c: &gate_spec::budget::Component) -> impl Iterator<Item = Metric> + '_ {
    c.budgets.iter().map(|b| b.metric).filter(|m| m.ratio_of().is_some())
}

/// Adds each variant's ratio metrics (`loss_ratio`, `step_time_ratio`,
/// against its reference) to its metrics. Pure; [`decide`](super::decide) computes the
/// same values on its own, so calling this only changes what is shown.
pub(super) fn add_ratios(components: &mut BTreeMap<String, ComponentReport>) {
    let ratios: Vec<(String, Metric, f64)> = components
        .iter()
        .flat_map(|(name, r)| {
            [Metric::LossRatio, Metric::StepTimeRatio]
                .into_iter()
                .filter_map(|m| ratio(components, r, m).map(|v| (name.clone(), m, v)))
                .collect::<Vec<_>>()
        })
        .collect();
    for (name, metric, value) in ratios {
        if let Some(r) = components.get_mut(&name) {
            r.metrics.insert(
                metric,
                MetricValue {
                    value,
                    unit: metric.unit(),
                },
            );
        }
    }
}

pub(super) fn not_measured_ratio(
    spec: &Spec,
    components: &BTreeMap<String, ComponentReport>,
    report: &ComponentReport,
    metric: Metric,
) -> String {
    let Some(r) = &report.reference else {
        return format!(
            "`{metric}` compares a variant with its reference, and this component is a reference \
             (add `variants:` and name one in `reference:`)"
        );
    };
    let failed = components
        .get(r)
        .and_then(|x| x.error.as_ref())
        .filter(|e| e.kind == ErrorKind::Failed);
    match failed {
        Some(e) if e.ran_out_of_memory() => {
            let held = e
                .peak_bytes
                .map(|b| {
                    format!(
                        " (its tensors held {} when an allocation failed)",
                        gate_spec::units::Bytes(b)
                    )
                })
                .unwrap_or_default();
            format!(
                "the reference `{r}` does not fit the {} card: out of memory in phase {}{held}, \
                 so `{metric}` cannot be measured on this card; hint: measure it on a larger GPU with \
                 `--emulate-capacity` (the ratio steps run with the emulation lifted), or keep ratio budgets \
                 out of the spec this card runs",
                gate_spec::units::Bytes(spec.device.capacity.0),
                e.phase.as_deref().unwrap_or("unknown"),
            )
        }
        Some(e) => format!(
            "the reference `{r}` failed in phase {}: {}, so `{metric}` cannot be measured",
            e.phase.as_deref().unwrap_or("unknown"),
            e.reason
        ),
        None => format!(
            "`{metric}` needs `{}` measured here and in `{r}`",
            metric.ratio_of().map(Metric::name).unwrap_or("")
        ),
    }
}

/// Ratio budgets the spec's card itself can never measure: the baseline
/// shows their reference's training peak above the card's capacity, so on
/// that card the reference runs out of memory before it has a step time or
/// a loss. One line per variant, said before anything runs. Pure.
pub fn ratios_beyond_card(spec: &Spec, baseline: &Report) -> Vec<String> {
    let capacity = spec.device.capacity.0;
    let mut lines = Vec::new();
    for c in &spec.components {
        let Some(reference) = c.reference.as_deref() else {
            continue;
        };
        let ratios: Vec<String> = ratio_budgets(c).map(|m| format!("{}.{m}", c.name)).collect();
        let peak = baseline
            .components
            .get(reference)
            .and_then(|r| r.value(Metric::TrainingPeak));
        if let (false, Some(peak)) = (ratios.is_empty(), peak.filter(|&p| p > capacity as f64)) {
            let (verb, them, are) = if ratios.len() == 1 {
                ("compares", "it", "it is")
            } else {
                ("compare", "them", "they are")
            };
            lines.push(format!(
                "{} {verb} with `{reference}`, whose training peak in the baseline ({}) is above the {} card: \
                 the card itself can never measure {them}; with `--emulate-capacity` on a larger GPU {are} \
                 measured with the emulation lifted",
                ratios.join(" and "),
                gate_spec::units::Bytes(peak as u64),
                gate_spec::units::Bytes(capacity),
            ));
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::variants::*;
    use super::super::judging::summarize;
    use super::super::{decide, Reserve};
    use super::*;
    use crate::baseline::Outcome;
    use gate_spec::metric::{Metric, Unit};
    use std::collections::BTreeMap;
    use std::path::Path;

    #[test]
    fn variants_are_judged_by_their_ratios_to_the_reference() {
        let spec = gate_spec::budget::parse(Path::new("budgets.yaml"), SPEC).unwrap();
        let names: Vec<&str> = spec.components.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["t", "t@plain", "t@half"]);
        let refs: Vec<Option<&str>> = spec.components.iter().map(|c| c.reference.as_deref()).collect();
        assert_eq!(refs, [Some("t@plain"), None, Some("t@plain")]);
        assert_eq!(spec.components[1].batch_size, 4);
        assert!(spec.components[1].budgets.is_empty());
        let figures = [(0.41, 300.0), (0.40, 200.0), (0.41, 100.0)];
        let mut reports: BTreeMap<String, ComponentReport> = spec
            .components
            .iter()
            .zip(figures)
            .map(|(c, (l, ms))| (c.name.clone(), report(c, l, ms)))
            .collect();
        let reserve = Reserve {
            bytes: 0,
            measured: false,
        };
        let none = Outcome::Missing { reason: "test".into() };
        let v = decide(&spec, &reports, &none, &Testbed::default(), reserve, false);
        let got: Vec<(&str, &str, Status, f64)> = v
            .results
            .iter()
            .map(|r| (r.component.as_str(), r.metric.as_str(), r.status, r.measured.unwrap()))
            .collect();
        assert_eq!(got.len(), 3);
        assert_eq!((got[0].0, got[0].1, got[0].2), ("t", "loss_ratio", Status::Pass));
        assert!((got[0].3 - 1.025).abs() < 1e-12, "{got:?}");
        assert_eq!((got[1].1, got[1].2), ("step_time_ratio", Status::Pass));
        assert!((got[1].3 - 1.5).abs() < 1e-12);
        assert_eq!((got[2].0, got[2].2), ("t@half", Status::Fail)); // 0.41 / 0.40 = 1.025
        add_ratios(&mut reports);
        assert_eq!(reports["t@half"].value(Metric::StepTimeRatio), Some(0.5));
        assert_eq!(reports["t@plain"].value(Metric::LossRatio), None);
    }

    #[test]
    fn a_baseline_whose_reference_outgrows_the_card_names_the_ratios_it_can_never_measure() {
        let spec = gate_spec::budget::parse(Path::new("budgets.yaml"), SPEC).unwrap();
        let mut components: BTreeMap<String, ComponentReport> = spec
            .components
            .iter()
            .map(|c| (c.name.clone(), report(c, 0.5, 100.0)))
            .collect();
        let baseline = |components: BTreeMap<String, ComponentReport>| Report {
            schema: 1,
            gate_version: "0".into(),
            commit: None,
            spec: "budgets.yaml".into(),
            testbed: Testbed::default(),
            components,
            ensemble: None,
            results: vec![],
            summary: summarize(&[], vec![], vec![], false),
            baseline: None,
            wall_seconds: 0.0,
            plans: Default::default(),
        };
        let peak = |c: &mut BTreeMap<String, ComponentReport>, bytes: f64| {
            c.get_mut("t@plain").unwrap().metrics.insert(
                Metric::TrainingPeak,
                MetricValue {
                    value: bytes,
                    unit: Unit::Bytes,
                },
            );
        };
        peak(&mut components, 1000.0); // the card's capacity: it fits
        assert!(ratios_beyond_card(&spec, &baseline(components.clone())).is_empty());
        peak(&mut components, 1001.0);
        assert_eq!(
            ratios_beyond_card(&spec, &baseline(components)),
            [
                "t.loss_ratio and t.step_time_ratio compare with `t@plain`, whose training peak in the baseline \
                 (0.9775 KiB) is above the 0.9766 KiB card: the card itself can never measure them; with \
                 `--emulate-capacity` on a larger GPU they are measured with the emulation lifted",
                "t@half.loss_ratio compares with `t@plain`, whose training peak in the baseline (0.9775 KiB) is \
                 above the 0.9766 KiB card: the card itself can never measure it; with `--emulate-capacity` on a \
                 larger GPU it is measured with the emulation lifted"
            ]
        );
    }
}
