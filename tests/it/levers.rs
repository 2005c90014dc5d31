//! The memory levers end to end without profiling: a spec with `checkpoint:`
//! and `variants:` → components → verdict with ratio budgets → every
//! renderer shows the variants side by side.

use crate::common;

use std::collections::BTreeMap;
use std::path::Path;

use gate_contract::report::{MetricValue, Status, Testbed};
use gate_render::{junit, markdown, table};
use gate_report::Reserve;
use gate_spec::metric::Metric;

const SPEC: &str = "version: 1
device: { name: card, capacity: 4 GiB, reserve: 300 MiB }
components:
  tft:
    workload: tft
    checkpoint: { chunk: 64 }
    config: { hidden_dim: 8, num_heads: 2, sequence_length: 6, prediction_horizon: 2, num_known_features: 2, num_unknown_features: 3, num_static_features: 1, input_dim: 6 }
    budgets:
      training_peak: < 400 MiB
      loss_ratio: < 1.05
      step_time_ratio: < 2
    reference: plain
    variants:
      plain: { checkpoint: none }
      half: { batch_size: 16 }
";

const MIB: f64 = 1024.0 * 1024.0;

/// The spec's workloads, resolved as the stock gate resolves them.
fn config_of(spec: &gate_spec::budget::Spec, name: &str) -> serde_json::Value {
    let w = gate::test_support::runner::resolve(spec, &gate_builtins::registry()).unwrap();
    w.get(name).unwrap().config()
}

fn reports(spec: &gate_spec::budget::Spec) -> BTreeMap<String, gate_contract::report::ComponentReport> {
    let figures = [
        ("tft", 307.0, 6200.0, 0.441),
        ("tft@plain", 5387.0, 13900.0, 0.443),
        ("tft@half", 180.0, 3300.0, 0.47),
    ];
    figures
        .iter()
        .map(|(name, peak, ms, loss)| {
            let c = spec.component(name).unwrap();
            let mut r = gate_report::component_report(c, config_of(spec, name), &Default::default());
            for (m, v) in [
                (Metric::TrainingPeak, peak * MIB),
                (Metric::StepTime, *ms),
                (Metric::Loss, *loss),
            ] {
                r.metrics.insert(
                    m,
                    MetricValue {
                        value: v,
                        unit: m.unit(),
                    },
                );
            }
            (name.to_string(), r)
        })
        .collect()
}

#[test]
fn the_spec_expands_variants_with_their_settings() {
    let spec = gate_spec::budget::parse(Path::new("budgets.yaml"), SPEC).unwrap();
    let got: Vec<(&str, usize, Option<usize>, Option<&str>)> = spec
        .components
        .iter()
        .map(|c| (c.name.as_str(), c.batch_size, c.checkpoint, c.reference.as_deref()))
        .collect();
    assert_eq!(
        got,
        [
            ("tft", 32, Some(64), Some("tft@plain")),
            ("tft@plain", 32, None, None),
            ("tft@half", 16, Some(64), Some("tft@plain")),
        ]
    );
    let config = config_of(&spec, "tft");
    assert_eq!(config["checkpoint"]["chunk"], 64);
    assert!(config_of(&spec, "tft@plain").get("checkpoint").is_none());
}

#[test]
fn ratio_budgets_are_judged_and_every_renderer_shows_the_variants() {
    let spec = gate_spec::budget::parse(Path::new("budgets.yaml"), SPEC).unwrap();
    let components = reports(&spec);
    let reserve = Reserve {
        bytes: 0,
        measured: false,
    };
    let none = gate_report::baseline::Outcome::Missing {
        reason: "--baseline none".into(),
    };
    // The one entry the command line calls: the ratios added, then judged.
    let mut report = gate_report::conclude(gate_report::Inputs {
        spec: &spec,
        spec_path: "budgets.yaml".into(),
        commit: None,
        gate_version: "test".into(),
        components,
        baseline: &none,
        anchor: None,
        testbed: Testbed::default(),
        reserve,
        strict: false,
        ack: Default::default(),
        wall_seconds: 0.0,
        plans: Default::default(),
    });
    let statuses: Vec<(&str, &str, Status)> = report
        .results
        .iter()
        .map(|r| (r.component.as_str(), r.metric.as_str(), r.status))
        .collect();
    assert_eq!(
        statuses,
        [
            ("tft", "training_peak", Status::Pass),
            ("tft", "loss_ratio", Status::Pass),
            ("tft", "step_time_ratio", Status::Pass),
        ]
    );
    // Only the missing baseline's warning: this test is about the variants.
    assert_eq!(
        report.summary.warnings,
        ["no baseline (--baseline none): regressions are not checked"]
    );
    report.summary.warnings.clear();
    let step_ratio = report.results[2].measured.unwrap();
    assert!((step_ratio - 6200.0 / 13900.0).abs() < 1e-12);
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["components"]["tft"]["reference"], "tft@plain");
    assert!(json["components"]["tft@plain"].get("reference").is_none());
    assert_eq!(json["components"]["tft@half"]["metrics"]["loss_ratio"]["unit"], "1");

    let t = table::render(&report, false);
    assert!(
        t.contains("tft: variants side by side (ratios against tft@plain)"),
        "{t}"
    );
    let row = t.lines().find(|l| l.trim_start().starts_with("tft@half")).unwrap();
    assert!(row.contains("batch 16, checkpoint 64") && row.contains("1.06"), "{row}");
    let md = markdown::render(&report, None, markdown::COMMENT_LIMIT);
    // (`@` gets a zero-width joiner: no mentions.)
    assert!(
        md.contains("#### Variants of tft (ratios against tft@\u{200D}plain)"),
        "{md}"
    );
    assert!(md.contains("| loss\\_ratio | step\\_time\\_ratio |"), "{md}");
    let half = md.lines().find(|l| l.starts_with("| tft@\u{200D}half")).unwrap();
    assert_eq!(half.matches(" | ").count(), 8, "{half}");
    let x = junit::render(&report, time::OffsetDateTime::UNIX_EPOCH).unwrap();
    // One suite for tft and its variants: their settings are properties, their figures its system-out.
    assert_eq!(x.matches("<testsuite ").count(), 1, "{x}");
    assert!(
        x.contains(r#"<property name="tft@plain.settings" value="tft, f32, batch 32, no checkpoint"/>"#),
        "{x}"
    );
    assert!(x.contains("tft@plain: against itself (the reference): "), "{x}");
    assert!(x.contains("step_time_ratio 0.446"), "{x}");
}

#[test]
fn master_weights_are_a_variant_setting_with_their_own_fingerprint() {
    let text = SPEC.replace(
        "      half: { batch_size: 16 }",
        "      mixed: { dtype: bf16, master_weights: f32 }",
    );
    let spec = gate_spec::budget::parse(Path::new("budgets.yaml"), &text).unwrap();
    let mixed = spec.component("tft@mixed").unwrap();
    assert_eq!(mixed.dtype, gate_spec::budget::DType::BF16);
    assert_eq!(mixed.master_dtype, Some(gate_spec::budget::DType::F32));
    let config = config_of(&spec, "tft@mixed");
    let r = gate_report::component_report(mixed, config.clone(), &Default::default());
    assert_eq!(r.master_dtype.as_deref(), Some("f32"));
    let mut pure = mixed.clone();
    pure.master_dtype = None;
    let p = gate_report::component_report(&pure, config, &Default::default());
    assert_ne!(r.fingerprint, p.fingerprint);
    assert_eq!(
        table::variant_settings(&r),
        "bf16 (f32 master), batch 32, checkpoint 64"
    );
}

#[test]
fn fit_rejects_bad_probes_and_specs_without_size_budgets() {
    let run = |args: &[&str]| common::gate().args(args).output().unwrap();
    let o = run(&["fit", "tft", "--probe", "8,8"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--probe takes two different batch sizes"));
    let o = run(&["fit", "nope"]);
    assert_eq!(o.status.code(), Some(2));
    let o = run(&["fit", "tft", "--metric", "step_time"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("`tft` has no size budget to fit for `step_time`"));
}
