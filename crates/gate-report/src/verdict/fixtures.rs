//! Reports and specs the verdict's tests share: two components in an
//! ensemble, and a component with two variants.

pub(crate) mod pair {
    use std::collections::BTreeMap;
    use std::path::Path;

    use super::super::{Reserve, Verdict};
    use crate::baseline::Outcome;
    use gate_contract::report::*;
    use gate_spec::budget::Spec;
    use gate_spec::metric::Metric;

    pub(crate) const SPEC: &str = "version: 1
device: { name: card, capacity: 1000 B, reserve: 100 B }
components:
  a:
    workload: mlp
    budgets:
      params: < 500 B
      step_time: < 10 ms
  b:
    workload: mlp
    budgets:
      training_peak: <= 300 B
ensemble:
  members: [a, b]
  metric: params
  budgets:
    total: < 900 B
    headroom: \"> 100 B\"
";

    pub(crate) fn spec() -> Spec {
        gate_spec::budget::parse(Path::new("budgets.yaml"), SPEC).unwrap()
    }

    pub(crate) fn comp(metrics: &[(Metric, f64)], fingerprint: &str) -> ComponentReport {
        let mut c = crate::not_measured_report(&spec().components[0], "");
        c.error = None;
        c.fingerprint = fingerprint.into();
        for (m, v) in metrics {
            c.metrics.insert(
                *m,
                MetricValue {
                    value: *v,
                    unit: m.unit(),
                },
            );
        }
        c
    }

    pub(crate) fn reports(a: &[(Metric, f64)], b: &[(Metric, f64)]) -> BTreeMap<String, ComponentReport> {
        BTreeMap::from([("a".to_string(), comp(a, "x")), ("b".to_string(), comp(b, "x"))])
    }

    /// Each warning the verdict built reads back from its sentence alone
    /// (as from report.json) with the same component and kind.
    pub(crate) fn reads_back(v: &Verdict) {
        assert!(!v.summary.warnings.is_empty());
        for w in &v.summary.warnings {
            assert_eq!(&Warning::from_text(w.text.clone()), w);
        }
    }

    pub(crate) fn no_baseline() -> Outcome {
        Outcome::Missing {
            reason: "--baseline none".into(),
        }
    }

    pub(crate) const RESERVE: Reserve = Reserve {
        bytes: 100,
        measured: false,
    };

    pub(crate) fn statuses(v: &Verdict) -> Vec<(&str, &str, Status)> {
        v.results
            .iter()
            .map(|r| (r.component.as_str(), r.metric.as_str(), r.status))
            .collect()
    }
}

pub(crate) mod variants {
    use std::collections::BTreeMap;

    use gate_contract::report::*;
    use gate_spec::budget::Spec;
    use gate_spec::metric::Metric;

    pub(crate) const SPEC: &str = "version: 1
device: { name: card, capacity: 1000 B, reserve: 100 B }
components:
  t:
    workload: mlp
    reference: plain
    budgets:
      loss_ratio: < 1.05
      step_time_ratio: < 2
    variants:
      plain: { batch_size: 4 }
      half: { dtype: bf16, budgets: { loss_ratio: < 1.01 } }
";

    pub(crate) fn report(c: &gate_spec::budget::Component, loss: f64, ms: f64) -> ComponentReport {
        let mut r = crate::not_measured_report(c, "");
        r.error = None;
        for (m, v) in [(Metric::Loss, loss), (Metric::StepTime, ms)] {
            r.metrics.insert(
                m,
                MetricValue {
                    value: v,
                    unit: m.unit(),
                },
            );
        }
        r
    }

    /// `t` on an emulated card whose `t@plain` ran out of memory: the
    /// variant's ratio steps ran with the emulation lifted.
    pub(crate) fn emulated(spec: &Spec) -> BTreeMap<String, ComponentReport> {
        let mut reports: BTreeMap<String, ComponentReport> = spec
            .components
            .iter()
            .map(|c| (c.name.clone(), report(c, 0.5, 100.0)))
            .collect();
        let plain = reports.get_mut("t@plain").unwrap();
        plain.metrics.clear();
        plain.error = Some(ComponentError {
            kind: ErrorKind::Failed,
            phase: Some("backward".into()),
            reason: "DriverError(CUDA_ERROR_OUT_OF_MEMORY, \"out of memory\")".into(),
            peak_bytes: Some(900),
            failure_kind: Some(gate_contract::measurement::FailureKind::OutOfMemory),
        });
        let t = reports.get_mut("t").unwrap();
        t.step_time_ratios = vec![1.2; 15];
        t.ratio_losses = Some(RatioLosses {
            variant: 0.5,
            reference: 0.49,
        });
        t.ratio_lifted_bytes = Some(1 << 30);
        reports
    }
}
