//! Snapshots (insta) of the terminal table and the JUnit XML, rendered from a
//! real report: the repository's budgets measured on an H200 on 2026-12-02
//! (tests/fixtures/report-h200.json; the TFT fails, the others pass).
//! The fixture predates recorded phase times: it also shows that older
//! reports still render.

use gate_contract::report::{Report, Warning, WarningKind};

fn fixture() -> Report {
    serde_json::from_str(include_str!("../fixtures/report-h200.json")).expect("the fixture is a schema-1 report")
}

#[test]
fn table_without_colour() {
    insta::assert_snapshot!(gate_render::table::render(&fixture(), false));
}

#[test]
fn table_with_colour_marks_only_statuses() {
    let text = gate_render::table::render(&fixture(), true);
    let plain = gate_render::table::render(&fixture(), false);
    // Colour adds escape codes around statuses and the verdict, nothing else.
    let stripped = text
        .replace("\x1b[31m", "")
        .replace("\x1b[32m", "")
        .replace("\x1b[33m", "")
        .replace("\x1b[0m", "");
    assert_eq!(stripped, plain);
    assert!(text.contains("\x1b[31mfail"));
}

#[test]
fn junit_xml() {
    let ts = time::OffsetDateTime::from_unix_timestamp(1_764_684_000).unwrap();
    let xml = gate_render::junit::render(&fixture(), ts).unwrap();
    insta::assert_snapshot!(xml);
}

/// The fixture as a newer gate writes it: each profile's phases timed, the
/// TFT with a variant (`tft@plain`, the reference of its ratio budget), a
/// warning about the variant and a run-wide one, under `--strict`.
fn timed_with_a_variant() -> Report {
    use gate_contract::report::{BudgetResult, PhaseTime, Status};
    let mut r = fixture();
    let phases = [
        ("setup", 0.25),
        ("warmup", 1.5),
        ("build", 0.125),
        ("batch", 0.0625),
        ("forward", 0.5),
        ("backward", 0.75),
        ("optimizer", 0.25),
        ("training_step", 1.0),
        ("timing", 3.0),
        ("inference", 0.375),
    ];
    for c in r.components.values_mut() {
        c.phase_seconds = phases
            .iter()
            .map(|(p, s)| PhaseTime {
                phase: p.to_string(),
                seconds: *s,
            })
            .collect();
        c.profile_seconds = Some(8.0);
    }
    let mut plain = r.components["tft"].clone();
    plain.config["checkpoint"] = serde_json::Value::Null;
    plain.profile_seconds = Some(10.0);
    plain.blocks.truncate(2);
    r.components.get_mut("tft").unwrap().reference = Some("tft@plain".into());
    r.components.get_mut("tft").unwrap().config["checkpoint"] = serde_json::json!({ "chunk": 64 });
    r.components.insert("tft@plain".into(), plain);
    let result =
        |component: &str, metric: &str, unit, limit, measured, status, line, reason: Option<&str>| BudgetResult {
            component: component.into(),
            metric: gate_contract::report::MetricId::parse(metric),
            unit,
            op: gate_spec::budget::Op::Lt,
            limit,
            measured,
            baseline: None,
            tolerance_percent: 5.0,
            status,
            line,
            reason: reason.map(String::from),
            display_unit: None,
            limit_in_seconds: false,
            not_compared: None,
            config_changed: None,
            baseline_op: None,
            baseline_limit: None,
            interval: None,
            untrained: false,
            drift: None,
        };
    use gate_spec::metric::Unit;
    let at = r.results.iter().position(|x| x.component != "tft").unwrap();
    r.results.insert(
        at,
        result("tft", "loss_ratio", Unit::One, 1.05, Some(1.01), Status::Pass, 42, None),
    );
    r.results.insert(
        at + 1,
        result(
            "tft@plain",
            "device_used",
            Unit::Bytes,
            1e9,
            None,
            Status::NotMeasured,
            45,
            Some("device_used is measured on CUDA runs only"),
        ),
    );
    r.summary.not_measured = 1;
    r.summary.passed += 1;
    r.summary.warnings.push(Warning::new(
        Some("tft@plain"),
        WarningKind::NotMeasured,
        "tft@plain.device_used: device_used is measured on CUDA runs only",
    ));
    r.summary.strict = true;
    r.wall_seconds = 42.5;
    r
}

#[test]
fn junit_xml_with_durations_variants_and_strict_warnings() {
    let ts = time::OffsetDateTime::from_unix_timestamp(1_764_684_000).unwrap();
    let xml = gate_render::junit::render(&timed_with_a_variant(), ts).unwrap();
    insta::assert_snapshot!(xml);
}

/// The structure a CI reader relies on, checked on both the old fixture (no
/// times recorded) and the timed one with a variant and warnings.
#[test]
fn junit_structure_one_suite_per_component_unique_names_warnings_not_tests() {
    let ts = time::OffsetDateTime::from_unix_timestamp(1_764_684_000).unwrap();
    for (report, timed) in [(fixture(), false), (timed_with_a_variant(), true)] {
        let xml = gate_render::junit::render(&report, ts).unwrap();
        let doc = roxmltree::Document::parse(&xml).unwrap();
        let suites: Vec<_> = doc.descendants().filter(|n| n.has_tag_name("testsuite")).collect();
        let names: Vec<_> = suites.iter().map(|s| s.attribute("name").unwrap()).collect();
        // A variant is not a suite of its own; the run's suite carries the run-wide warning.
        assert_eq!(names, ["dqn", "mamba2", "ppo", "tft", "ensemble", "gate"], "{xml}");
        let cases: Vec<_> = doc.descendants().filter(|n| n.has_tag_name("testcase")).collect();
        let case_names: Vec<_> = cases.iter().map(|c| c.attribute("name").unwrap()).collect();
        let unique: std::collections::HashSet<_> = case_names.iter().collect();
        assert_eq!(unique.len(), case_names.len(), "names repeat: {case_names:?}");
        assert!(!case_names.iter().any(|n| n.starts_with("warning")), "{case_names:?}");
        assert!(!doc
            .descendants()
            .any(|n| n.has_tag_name("skipped") && n.attribute("type") == Some("warning")));
        for s in &suites {
            let tests = s.children().filter(|n| n.has_tag_name("testcase")).count();
            assert_eq!(s.attribute("tests").unwrap(), tests.to_string());
            // The run's suite may hold only warnings (no --strict); every other has tests.
            let has_err = s.children().any(|n| n.has_tag_name("system-err"));
            assert!(
                tests > 0 || (s.attribute("name") == Some("gate") && has_err),
                "empty suite in {xml}"
            );
        }
        let gate_err = suites[5]
            .children()
            .find(|n| n.has_tag_name("system-err"))
            .and_then(|n| n.text())
            .unwrap();
        assert!(gate_err.starts_with("warning: no baseline"), "{gate_err}");
        let time = |n: &roxmltree::Node| n.attribute("time").unwrap().parse::<f64>().unwrap();
        let component_cases = cases.iter().filter(|c| {
            let name = c.attribute("name").unwrap();
            !name.starts_with("ensemble.") && !name.starts_with("gate.")
        });
        if timed {
            assert!(suites[..4].iter().all(|s| time(s) > 0.0), "{xml}");
            assert_eq!(time(&suites[3]), 18.0, "tft and tft@plain's profiles");
            // Every measured case has its phase's time; the unmeasured one none.
            for c in component_cases {
                let measured = !c.children().any(|n| n.has_tag_name("skipped"));
                assert_eq!(time(c) > 0.0, measured, "{:?}", c.attribute("name"));
            }
            let tft = suites[3];
            let props: Vec<_> = tft
                .descendants()
                .filter(|n| n.has_tag_name("property"))
                .map(|p| (p.attribute("name").unwrap(), p.attribute("value").unwrap()))
                .collect();
            assert!(
                props.contains(&("tft@plain.settings", "tft, f32, batch 32, no checkpoint")),
                "{props:?}"
            );
            assert!(props.contains(&("tft.reference", "tft@plain")), "{props:?}");
            let err = tft.children().find(|n| n.has_tag_name("system-err")).unwrap();
            assert_eq!(
                err.text(),
                Some("warning: tft@plain.device_used: device_used is measured on CUDA runs only")
            );
            let strict = cases
                .iter()
                .find(|c| c.attribute("name") == Some("gate.strict"))
                .unwrap();
            let failure = strict.children().find(|n| n.has_tag_name("failure")).unwrap();
            for w in &report.summary.warnings {
                assert!(failure.attribute("message").unwrap().contains(w.as_str()), "{w}");
            }
        } else {
            assert!(cases.iter().all(|c| time(c) == 0.0), "no times recorded: {xml}");
            assert!(!case_names.contains(&"gate.strict"));
        }
    }
}

#[test]
fn the_report_round_trips_through_json() {
    let r = fixture();
    let again: Report = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
    assert_eq!(r, again);
}

/// Warnings are typed in memory and sentences in report.json: a stored
/// report read and written again says the same, and what this gate writes
/// it writes again byte for byte.
#[test]
fn stored_reports_are_written_again_as_they_were() {
    for (name, text) in [
        ("report-h200.json", include_str!("../fixtures/report-h200.json")),
        ("report-timeline.json", include_str!("../fixtures/report-timeline.json")),
    ] {
        let r: Report = serde_json::from_str(text).expect("a schema-1 report");
        assert!(!r.summary.warnings.is_empty(), "{name} has warnings to carry");
        let written = serde_json::to_string_pretty(&r).unwrap();
        // The fixtures predate two summary counts this gate writes (as 0).
        let mut stored: serde_json::Value = serde_json::from_str(text).unwrap();
        let mut again: serde_json::Value = serde_json::from_str(&written).unwrap();
        for key in ["not_compared", "acknowledged"] {
            if stored["summary"].get(key).is_none() {
                assert_eq!(again["summary"][key], 0, "{name}: {key}");
                again["summary"].as_object_mut().unwrap().remove(key);
            }
        }
        // Their components too predate fields this gate writes: the rest,
        // the summary and its warnings included, is as stored.
        for v in [&mut stored, &mut again] {
            v.as_object_mut().unwrap().remove("components");
        }
        assert_eq!(again, stored, "{name}");
        let reread: Report = serde_json::from_str(&written).unwrap();
        assert_eq!(serde_json::to_string_pretty(&reread).unwrap(), written, "{name}");
    }
    let timeline: Report = serde_json::from_str(include_str!("../fixtures/report-timeline.json")).unwrap();
    let kinds: Vec<_> = timeline
        .summary
        .warnings
        .iter()
        .map(|w| (w.component.as_deref(), w.kind))
        .collect();
    assert_eq!(
        kinds,
        [
            (None, WarningKind::NoBaseline),
            (Some("tft"), WarningKind::ParamsDisagree)
        ]
    );
}
