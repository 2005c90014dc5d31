//! Faults in one component (out of memory, a CUDA error, a NaN/inf loss, a
//! panic, an abort, a SIGKILL) become a failed measurement of that component
//! with its reason and phase; the other component's figures are the same as
//! in a clean run; report.json, junit.xml and comment.md are still written;
//! the exit code is the design's (1, or 3 for a device error).
//! Faults are injected with `GATE_INJECT_FAULT=COMPONENT:PHASE:KIND`.

use crate::common;

use crate::common::output_text;
use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;

fn gate(args: &[&str], fault: Option<&str>) -> Output {
    let mut cmd = common::gate();
    cmd.args(args).current_dir(env!("GATE_REPO_ROOT"));
    if let Some(f) = fault {
        cmd.env("GATE_INJECT_FAULT", f);
    }
    cmd.output().expect("the gate binary runs")
}

/// Two small MLPs, `a` and `b`, each with budgets.
fn two_mlps(dir: &Path) -> PathBuf {
    let p = dir.join("budgets.yaml");
    let budgets = "    budgets:\n      params: < 1 MiB\n      activations: < 1 MiB\n      training_peak: < 8 MiB\n      inference_peak: < 2 MiB\n      loss: < 100\n";
    let comp = |name: &str| {
        format!(
            "  {name}:\n    workload: mlp\n    batch_size: 16\n    config: {{ input_dim: 32, hidden_dim: 32, hidden_layers: 1, output_dim: 3 }}\n{budgets}"
        )
    };
    let text = format!(
        "version: 1\ndevice:\n  name: card\n  capacity: 4 GiB\n  reserve: 300 MiB\ndefaults:\n  seed: 7\n  timing: {{ warmup: 0, steps: 1 }}\ncomponents:\n{}{}",
        comp("a"),
        comp("b")
    );
    std::fs::write(&p, text).unwrap();
    p
}

fn run(spec: &Path, out: &Path, fault: Option<&str>) -> (Output, Value) {
    let o = gate(
        &[
            "check",
            "--budgets",
            spec.to_str().unwrap(),
            "--baseline",
            "none",
            "--out",
            out.to_str().unwrap(),
        ],
        fault,
    );
    let report = std::fs::read_to_string(out.join("report.json"))
        .unwrap_or_else(|e| panic!("{fault:?}: no report.json ({e}): {}", output_text(&o)));
    (o, serde_json::from_str(&report).unwrap())
}

/// A component's figures without what is timed (wall time varies run to run).
fn figures(report: &Value, name: &str) -> String {
    let mut c = report["components"][name].clone();
    c["metrics"].as_object_mut().unwrap().remove("step_time");
    for timed in ["step_times_ms", "profile_seconds", "phase_seconds", "turn_wait_seconds"] {
        c.as_object_mut().unwrap().remove(timed);
    }
    // The timeline's bytes stay; its times (`"T_US LIVE PEAK EVENT"`) go.
    if let Some(samples) = c["timeline"]["samples"].as_array_mut() {
        for s in samples {
            let bytes = s
                .as_str()
                .and_then(|t| t.split_once(' '))
                .map(|(_, rest)| rest.to_string());
            *s = Value::from(bytes);
        }
    }
    let results: Vec<Value> = report["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["component"] == name && r["metric"] != "step_time")
        .cloned()
        .collect();
    serde_json::to_string_pretty(&(c, results)).unwrap()
}

#[test]
fn each_fault_fails_only_its_component_and_every_output_is_written() {
    let t = tempfile::tempdir().unwrap();
    let spec = two_mlps(t.path());
    let (o, clean) = run(&spec, &t.path().join("clean"), None);
    assert_eq!(o.status.code(), Some(0), "{}", output_text(&o));
    let clean_a = figures(&clean, "a");
    assert!(clean_a.contains("\"params\""), "{clean_a}");

    // (phase, kind, the phase the failure is placed in, reason contains,
    // exit code, the failure's kind as report.json says it)
    let cases = [
        (
            "forward",
            "panic",
            "forward",
            "injected panic in phase forward",
            1,
            "model",
        ),
        // A crash gives no figure to judge the model by: the infrastructure's (exit 3).
        (
            "backward",
            "abort",
            "backward",
            "the profile crashed: killed by SIGABRT (6)",
            3,
            "process",
        ),
        ("optimizer", "kill", "optimizer", "killed by SIGKILL (9)", 1, "model"),
        ("build", "oom", "build", "out of memory", 1, "out_of_memory"),
        ("batch", "error", "batch", "injected error in phase batch", 1, "model"),
        (
            "forward",
            "cuda_oom",
            "forward",
            "CUDA_ERROR_OUT_OF_MEMORY",
            1,
            "out_of_memory",
        ),
        // A device error is the infrastructure's, not the model's: exit 3.
        (
            "training_step",
            "cuda",
            "training_step",
            "CUDA_ERROR_ILLEGAL_ADDRESS",
            3,
            "device",
        ),
        // Also when the framework panics on it: candle's adapter says so.
        (
            "forward",
            "cuda_panic",
            "forward",
            "CUDA_ERROR_ILLEGAL_ADDRESS",
            3,
            "device",
        ),
        (
            "backward",
            "nan",
            "backward",
            "the loss is NaN, not a finite number",
            1,
            "model",
        ),
        (
            "training_step",
            "inf",
            "training_step",
            "the loss is inf, not a finite number",
            1,
            "model",
        ),
    ];
    let mut rows = Vec::new();
    for (phase, kind, placed, needle, code, failure_kind) in cases {
        let out = t.path().join(format!("{phase}-{kind}"));
        let fault = format!("b:{phase}:{kind}");
        let (o, r) = run(&spec, &out, Some(&fault));
        let all = output_text(&o);
        assert_eq!(o.status.code(), Some(code), "{fault}: {all}");
        let e = &r["components"]["b"]["error"];
        assert_eq!(e["kind"], "failed", "{fault}: {e}");
        assert_eq!(e["phase"], placed, "{fault}: {e}");
        let reason = e["reason"].as_str().unwrap();
        assert!(reason.contains(needle), "{fault}: {reason}");
        assert_eq!(e["failure_kind"], failure_kind, "{fault}: {e}");
        // The other component is untouched, to the byte.
        assert!(r["components"]["a"]["error"].is_null(), "{fault}");
        assert_eq!(figures(&r, "a"), clean_a, "{fault}: a's figures changed");
        // Every output is written, and each says what failed.
        let xml = std::fs::read_to_string(out.join("junit.xml")).unwrap();
        let doc = roxmltree::Document::parse(&xml).unwrap();
        assert!(doc.descendants().any(|n| n.has_tag_name("failure")), "{fault}: {xml}");
        let md = std::fs::read_to_string(out.join("comment.md")).unwrap();
        assert!(md.contains("FAIL") || md.contains("fail"), "{fault}: {md}");
        assert!(all.contains(&format!("b: failed in phase {placed}")), "{fault}: {all}");
        rows.push(format!("{fault} -> exit {code}, b failed in {placed}: {reason}"));
    }
    // The observed outcomes (docs/reliability.md quotes them): `--nocapture` shows them.
    println!("{}", rows.join("\n"));
}

/// A panic's reason carries where it was raised, in every output: Rust's own
/// message puts the location on a line the parent does not keep, so the
/// profile's panic hook adds it.
#[test]
fn a_panic_names_its_file_and_line_in_every_output() {
    let t = tempfile::tempdir().unwrap();
    let spec = two_mlps(t.path());
    let out = t.path().join("out");
    let (o, r) = run(&spec, &out, Some("b:forward:panic"));
    let all = output_text(&o);
    assert_eq!(o.status.code(), Some(1), "{all}");
    // The injected panic's own line and column in crates/gate-runner/src/fault.rs.
    let source =
        std::fs::read_to_string(std::path::Path::new(env!("GATE_REPO_ROOT")).join("crates/gate-runner/src/fault.rs"))
            .unwrap();
    let (line, col) = source
        .lines()
        .enumerate()
        .find_map(|(i, l)| l.find("panic!(\"injected panic").map(|c| (i + 1, c + 1)))
        .unwrap();
    let reason = format!(
        "the profile exited with status 101: injected panic in phase forward \
         at crates/gate-runner/src/fault.rs:{line}:{col}"
    );
    assert_eq!(r["components"]["b"]["error"]["reason"], reason.as_str(), "{all}");
    assert!(all.contains(&reason), "terminal: {all}");
    let xml = std::fs::read_to_string(out.join("junit.xml")).unwrap();
    assert!(xml.contains(&reason), "junit: {xml}");
    let md = std::fs::read_to_string(out.join("comment.md")).unwrap();
    assert!(md.contains(&reason), "comment: {md}");
}

/// A component whose profile fails after the phases its budgets measure
/// (timing, inference) is still a failure in every output: the figures it
/// measured are kept, each of its budgets fails, the run exits 1 (3 for a
/// crash), `--strict` too, and no report says PASS (issue #43 item 1).
#[test]
fn a_fault_after_the_budgeted_phases_still_fails_the_component_everywhere() {
    let t = tempfile::tempdir().unwrap();
    let p = t.path().join("budgets.yaml");
    std::fs::write(
        &p,
        "version: 1\ndevice:\n  name: card\n  capacity: 4 GiB\n  reserve: 300 MiB\ndefaults:\n  seed: 7\n  timing: { warmup: 0, steps: 1 }\n\
         components:\n  b:\n    workload: mlp\n    batch_size: 16\n    config: { input_dim: 32, hidden_dim: 32, hidden_layers: 1, output_dim: 3 }\n\
         \x20   budgets:\n      params: < 1 MiB\n      training_peak: < 8 MiB\n",
    )
    .unwrap();
    let cases = [
        ("inference", "panic", 1),
        ("inference", "kill", 1),
        ("timing", "panic", 1),
        ("timing", "error", 1),
        ("inference", "abort", 3),
    ];
    for (phase, kind, code) in cases {
        for strict in [false, true] {
            let out = t.path().join(format!("{phase}-{kind}-{strict}"));
            let fault = format!("b:{phase}:{kind}");
            let mut args = vec![
                "check",
                "--budgets",
                p.to_str().unwrap(),
                "--baseline",
                "none",
                "--out",
                out.to_str().unwrap(),
            ];
            if strict {
                args.push("--strict");
            }
            let o = gate(&args, Some(&fault));
            let all = output_text(&o);
            assert_eq!(o.status.code(), Some(code), "{fault} strict={strict}: {all}");
            let r: Value = serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
            assert_eq!(r["components"]["b"]["error"]["phase"], phase, "{fault}");
            assert_eq!(r["summary"]["status"], "fail", "{fault}: {}", r["summary"]);
            for row in r["results"].as_array().unwrap() {
                assert_eq!(row["status"], "fail", "{fault}: {row}");
                assert!(row["measured"].is_number(), "the figure is kept: {row}");
            }
            let xml = std::fs::read_to_string(out.join("junit.xml")).unwrap();
            let doc = roxmltree::Document::parse(&xml).unwrap();
            let failures = doc.descendants().filter(|n| n.has_tag_name("failure")).count();
            assert!(failures >= 2, "{fault}: {xml}");
            let md = std::fs::read_to_string(out.join("comment.md")).unwrap();
            assert!(!md.contains("PASS"), "{fault}: {md}");
        }
    }
}
