//! Step-time ratios timed in interleaved pairs, end to end through the
//! built binary: a variant's steps alternate with its reference's in one
//! process after the byte profiles, and the report carries the median
//! ratio with its 95 % interval. No assertion on wall time: the figures
//! vary, so only their shape and the verdicts they must give are pinned.

use crate::common;

use gate_spec::units::trim_float;

const SPEC: &str = "version: 1
device: { name: card, capacity: 4 GiB, reserve: 300 MiB }
defaults: { seed: 7 }
components:
  mlp:
    workload: mlp
    batch_size: 64
    # The CPU times no pairs unless asked (a GPU's default is 15).
    timing: { pairs: 15 }
    reference: small
    budgets:
      step_time_ratio: < 1000
    variants:
      small: { batch_size: 8 }
  huge:
    workload: mlp
    batch_size: 512
    timing: { pairs: 7 }
    reference: small
    budgets:
      step_time_ratio: < 0.001
    variants:
      small: { batch_size: 8 }
";

#[test]
fn ratios_come_from_interleaved_pairs_with_an_interval_and_are_judged_on_it() {
    let t = tempfile::tempdir().unwrap();
    let spec = t.path().join("budgets.yaml");
    std::fs::write(&spec, SPEC).unwrap();
    let out = t.path().join("out");
    let o = common::gate()
        .args(["check", "--baseline", "none", "--budgets"])
        .arg(&spec)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    // The impossible limit fails: the whole interval is over it.
    assert_eq!(o.status.code(), Some(1), "{stdout}\n{stderr}");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();

    let results = report["results"].as_array().unwrap();
    let row = |c: &str| results.iter().find(|r| r["component"] == c).unwrap();
    for (component, pairs, status) in [("mlp", 15, "pass"), ("huge", 7, "fail")] {
        let r = row(component);
        assert_eq!(
            (r["metric"].as_str(), r["status"].as_str()),
            (Some("step_time_ratio"), Some(status))
        );
        let i = &r["interval"];
        // The default 15 pairs, or the component's own `timing: { pairs: 7 }`.
        assert_eq!(i["samples"], pairs, "{component}: {r}");
        let c = &report["components"][component];
        let ratios: Vec<f64> = c["step_time_ratios"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap())
            .collect();
        assert_eq!(ratios.len(), pairs, "{component}");
        // The figure is the pairs' median; the interval two of the pairs
        // (4th and 12th smallest of 15; the smallest and largest of 7).
        let mut sorted = ratios.clone();
        sorted.sort_by(f64::total_cmp);
        let (k, conf) = if pairs == 15 {
            (4, 1.0 - 2.0 * 576.0 / 32768.0)
        } else {
            (1, 1.0 - 2.0 / 128.0)
        };
        assert_eq!(r["measured"].as_f64(), Some(sorted[pairs / 2]));
        assert_eq!(i["low"].as_f64(), Some(sorted[k - 1]));
        assert_eq!(i["high"].as_f64(), Some(sorted[pairs - k]));
        assert_eq!(i["confidence"].as_f64(), Some(conf));
        assert_eq!(
            c["metrics"]["step_time_ratio"]["value"].as_f64(),
            Some(sorted[pairs / 2])
        );
        // The pairs ran in the variant's own profile, after its byte phases.
        let phases: Vec<&str> = c["phase_seconds"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["phase"].as_str().unwrap())
            .collect();
        assert_eq!(phases.last(), Some(&"ratio"), "{component}: {phases:?}");
        assert!(phases.contains(&"inference"));
        // The table shows the median with its interval.
        let shown = format!(
            "{} ({}–{})",
            trim_float(sorted[pairs / 2]),
            trim_float(sorted[k - 1]),
            trim_float(sorted[pairs - k])
        );
        assert!(
            stdout
                .lines()
                .any(|l| l.starts_with(component) && l.contains(&shown) && l.ends_with(status)),
            "{shown} not in:\n{stdout}"
        );
    }
    // A reference times no pairs of its own, and has no ratio budget.
    for small in ["mlp@small", "huge@small"] {
        let c = &report["components"][small];
        assert!(c.get("step_time_ratios").is_none(), "{c}");
    }
    assert_eq!(results.len(), 2);
    assert_eq!(report["summary"]["failed"], 1);
    assert!(report["summary"].get("inconclusive").is_none());
}

/// An interval across the limit: `inconclusive` on the row, a warning in
/// the summary, and each renderer says so (the run passes unless `--strict`).
#[test]
fn an_inconclusive_ratio_is_shown_by_every_renderer_as_a_warning() {
    use gate_contract::report::{Report, RunStatus, Status, Testbed};
    use gate_render::{annotations, junit, markdown, table};
    use gate_report::Reserve;
    use gate_spec::metric::Metric;

    // The MLP group only, with a limit its pairs straddle.
    let text = SPEC.replace("step_time_ratio: < 1000", "step_time_ratio: < 2");
    let mut spec = gate_spec::budget::parse(std::path::Path::new("budgets.yaml"), &text).unwrap();
    spec.components.retain(|c| c.name.starts_with("mlp"));
    let components = spec
        .components
        .iter()
        .map(|c| {
            let mut r = gate_report::not_measured_report(c, "");
            r.error = None;
            if c.reference.is_some() {
                // 15 pairs 1.0, 1.1, ..., 2.4: median 1.7, the 4th to 12th smallest 1.3–2.1.
                r.step_time_ratios = (0..15).map(|i| 1.0 + i as f64 / 10.0).collect();
            }
            (c.name.clone(), r)
        })
        .collect();
    let none = gate_report::baseline::Outcome::Missing {
        reason: "--baseline none".into(),
    };
    let reserve = Reserve {
        bytes: 0,
        measured: false,
    };
    let v = gate_report::decide(&spec, &components, &none, &Testbed::default(), reserve, false);
    assert_eq!(v.results[0].status, Status::Inconclusive);
    assert_eq!(v.summary.status, RunStatus::Pass);
    let why = "the 96.5 % interval of 15 pairs, 1.3 to 2.1, straddles the limit < 2";
    let report = Report {
        schema: gate_contract::report::SCHEMA,
        gate_version: "test".into(),
        commit: None,
        spec: "budgets.yaml".into(),
        testbed: Testbed::default(),
        components,
        ensemble: None,
        results: v.results,
        summary: v.summary,
        baseline: None,
        wall_seconds: 0.0,
        plans: Default::default(),
    };
    assert_eq!(report.results[0].metric, Metric::StepTimeRatio.name());

    let t = table::render(&report, false);
    let lines: Vec<&str> = t.lines().collect();
    assert_eq!(
        lines[3],
        "mlp        step_time_ratio     < 2  1.7 (1.3–2.1)        inconclusive"
    );
    assert!(
        lines.contains(&format!("warning: mlp.step_time_ratio: inconclusive: {why}").as_str()),
        "{t}"
    );
    assert_eq!(
        lines.last(),
        Some(&"PASS: 0 of 1 budgets pass, 0 fail, 0 regressed, 0 not measured, 1 inconclusive")
    );

    let md = markdown::render(&report, None, 60_000);
    assert!(md.contains("| 1.7 (1.3–2.1) |"), "{md}");
    assert!(md.contains("🟡 inconclusive"), "{md}");

    let xml = junit::render(&report, time::OffsetDateTime::UNIX_EPOCH).unwrap();
    assert!(
        xml.contains(&format!(
            "<skipped message=\"inconclusive: {}\"/>",
            why.replace('<', "&lt;")
        )),
        "{xml}"
    );
    assert!(xml.contains("skipped=\"1\""), "{xml}");

    let a = annotations::render(&report);
    // Workflow commands escape `%`.
    let escaped = why.replace('%', "%25");
    assert!(
        a.contains(&format!(
            "::warning title=gate::mlp.step_time_ratio: inconclusive: {escaped}"
        )),
        "{a}"
    );
}

/// A variant against a reference that runs out of memory (as `tft@plain`
/// does on the emulated 4 GiB card): gate's profile of the reference fails
/// in backward, the variant's own profile is whole.
const OOM_SPEC: &str = "version: 1
device: { name: card, capacity: 4 GiB, reserve: 300 MiB }
defaults: { seed: 7 }
components:
  m:
    workload: mlp
    batch_size: 16
    timing: { warmup: 1, steps: 3, pairs: PAIRS }
    reference: plain
    budgets:
      loss_ratio: < 1.05
      step_time_ratio: < 1000
    variants:
      plain: { batch_size: 16 }
";

/// `gate check` of [`OOM_SPEC`] with `pairs` and the reference's backward
/// running out of device memory: exit code, report, terminal.
fn check_with_oom_reference(pairs: usize, extra: &[&str]) -> (Option<i32>, serde_json::Value, String) {
    let t = tempfile::tempdir().unwrap();
    let spec = t.path().join("budgets.yaml");
    std::fs::write(&spec, OOM_SPEC.replace("PAIRS", &pairs.to_string())).unwrap();
    let out = t.path().join("out");
    let o = common::gate()
        .env("GATE_INJECT_FAULT", "m@plain:backward:cuda_oom")
        .args(["check", "--baseline", "none", "--budgets"])
        .arg(&spec)
        .arg("--out")
        .arg(&out)
        .args(extra)
        .output()
        .unwrap();
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    let report = serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    (o.status.code(), report, text)
}

#[test]
fn a_reference_that_runs_out_of_memory_still_gives_both_ratios_from_the_ratio_steps() {
    let (code, report, text) = check_with_oom_reference(6, &[]);
    let row = |metric: &str| {
        report["results"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["metric"] == metric)
            .unwrap()
            .clone()
    };
    // The reference really failed where it was told to.
    let plain = &report["components"]["m@plain"];
    assert_eq!(plain["error"]["phase"], "backward", "{text}");
    assert!(plain["metrics"].get("loss").is_none());
    // Both ratios are measured: the pairs' median, and the two losses the
    // ratio steps took after as many steps as each profile takes.
    let m = &report["components"]["m"];
    let (variant, reference) = (
        m["ratio_losses"]["variant"].as_f64().unwrap(),
        m["ratio_losses"]["reference"].as_f64().unwrap(),
    );
    // The same model and seed on both sides, and the variant's loss is its
    // own profile's: the ratio steps replay the profile's steps.
    assert_eq!(variant, reference, "{m}");
    assert_eq!(Some(variant), m["metrics"]["loss"]["value"].as_f64(), "{m}");
    assert_eq!(row("loss_ratio")["measured"], 1.0, "{text}");
    assert_eq!(row("loss_ratio")["status"], "pass");
    assert_eq!(row("step_time_ratio")["status"], "pass", "{text}");
    assert_eq!(m["step_time_ratios"].as_array().unwrap().len(), 6);
    // How the loss ratio was taken is a note (in every output), not a
    // warning: the only warning is the missing baseline's.
    let notes = report["summary"]["notes"].as_array().unwrap();
    assert_eq!(notes.len(), 1, "{notes:?}");
    let note = notes[0].as_str().unwrap();
    assert!(
        note.starts_with("m: loss_ratio compares both losses from the ratio steps")
            && note.ends_with("because `m@plain`'s own profile stopped in phase backward"),
        "{note}"
    );
    assert!(text.contains(&format!("note: {note}")), "{text}");
    // The same note in JUnit (the `gate` suite's output) and in the comment.
    let typed: gate_contract::report::Report = serde_json::from_value(report.clone()).unwrap();
    let xml = gate_render::junit::render(&typed, time::OffsetDateTime::UNIX_EPOCH).unwrap();
    let escaped = note.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;");
    assert!(xml.contains(&format!("note: {escaped}")), "{xml}");
    let md = gate_render::markdown::render(&typed, None, 60_000);
    assert!(
        md.contains("> [!NOTE]\n> how some figures were measured:\n> - m: loss\\_ratio compares"),
        "{md}"
    );
    let warnings = report["summary"]["warnings"].as_array().unwrap();
    assert_eq!(warnings.len(), 1, "{text}");
    assert!(warnings[0].as_str().unwrap().starts_with("no baseline"), "{text}");
    assert_eq!(code, Some(0), "{text}");
}

#[test]
fn a_ratio_whose_reference_cannot_fit_the_card_says_so_once_with_the_fix() {
    // No pairs on the CPU and no emulation: nothing can step the reference.
    let (code, report, text) = check_with_oom_reference(0, &[]);
    let rows = report["results"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    for r in rows {
        assert_eq!(r["status"], "not_measured", "{r}");
        let reason = r["reason"].as_str().unwrap();
        assert!(
            reason.starts_with(
                "the reference `m@plain` does not fit the 4096.0 MiB card: out of memory in phase backward (its tensors held "
            ) && reason.contains("--emulate-capacity"),
            "{reason}"
        );
    }
    // One warning per ratio, each that one sentence: not a second one about
    // the interleaved steps, nor "needs `step_time` measured".
    let warnings: Vec<&str> = report["summary"]["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_str().unwrap())
        .collect();
    assert_eq!(warnings.len(), 3, "{warnings:?}");
    assert!(warnings[0].starts_with("no baseline"), "{warnings:?}");
    assert!(warnings[1].starts_with("m.loss_ratio: the reference `m@plain` does not fit"));
    assert!(warnings[2].starts_with("m.step_time_ratio: the reference `m@plain` does not fit"));
    assert!(!text.contains("needs `"), "{text}");
    assert_eq!(code, Some(0), "{text}");
}
