//! Baselines as teams govern them (#51 item 4), through the built `gate`: a
//! size that grew within its tolerance over its baseline but past its
//! `drift:` since the spec's pinned `anchor:` regresses, in report.json
//! (typed), the terminal table, junit.xml and the comment alike; and a size
//! that fell well below its baseline gets a tighter budget proposed, as a
//! typed note that fails nothing.

use std::path::Path;
use std::process::Output;

use crate::common::{gate, output_text, text};

const SPEC: &str = "version: 1
anchor: v1.4.0
device: { name: card, capacity: 4 GiB, reserve: 300 MiB }
defaults: { seed: 7, tolerance: 5%, drift: 6% }
components:
  mlp:
    workload: mlp
    batch_size: 64
    config: { input_dim: 256, hidden_dim: 256, hidden_layers: 2, output_dim: 3 }
    budgets:
      params: < 1 MiB
      training_peak: < 8 MiB
";

fn check(spec: &Path, out: &Path, baseline: &str, anchor: &str) -> Output {
    gate()
        .args(["check", "--budgets"])
        .arg(spec)
        .arg("--out")
        .arg(out)
        .args(["--baseline", baseline, "--anchor", anchor, "--jobs", "1"])
        .current_dir(env!("GATE_REPO_ROOT"))
        .output()
        .expect("the gate binary runs")
}

fn json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// `report` with each of `scaled`'s metrics of `mlp` multiplied by its factor, stored at `commit`.
fn scaled(report: &serde_json::Value, scaled: &[(&str, f64)], commit: &str, to: &Path) -> String {
    let mut r = report.clone();
    for (metric, factor) in scaled {
        let v = &mut r["components"]["mlp"]["metrics"][*metric]["value"];
        *v = serde_json::json!((v.as_f64().unwrap() * factor).round());
    }
    r["commit"] = serde_json::json!(commit);
    std::fs::write(to, serde_json::to_string_pretty(&r).unwrap()).unwrap();
    to.to_str().unwrap().to_string()
}

#[test]
fn growth_within_the_tolerance_but_past_the_drift_since_the_anchor_regresses_in_every_output() {
    let t = tempfile::tempdir().unwrap();
    let spec = t.path().join("budgets.yaml");
    std::fs::write(&spec, SPEC).unwrap();
    // The first run has no anchor to measure since: said, not failed.
    let first = t.path().join("first");
    let o = check(&spec, &first, "none", "none");
    assert_eq!(o.status.code(), Some(0), "{}", output_text(&o));
    let run = json(&first.join("report.json"));
    let warnings = run["summary"]["warnings"].as_array().unwrap();
    assert!(
        warnings.contains(&serde_json::json!(
            "no drift judged: no anchor `v1.4.0` (--anchor none)"
        )),
        "{warnings:?}"
    );
    assert!(!first.join("anchor.json").exists());
    // The anchor measured params 10 % below this run; the baseline 3 %
    // below (within the 5 % tolerance) and a training peak 25 % above.
    let anchor = scaled(&run, &[("params", 1.0 / 1.10)], "a0", &t.path().join("anchor.json"));
    let baseline = scaled(
        &run,
        &[("params", 1.0 / 1.03), ("training_peak", 1.25)],
        "b1",
        &t.path().join("baseline.json"),
    );
    let out = t.path().join("out");
    let o = check(&spec, &out, &baseline, &anchor);
    assert_eq!(o.status.code(), Some(1), "{}", output_text(&o));
    let report = json(&out.join("report.json"));
    let row = |metric: &str| {
        report["results"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["metric"] == metric)
            .unwrap()
            .clone()
    };
    let params = row("params");
    let at_anchor = (run["components"]["mlp"]["metrics"]["params"]["value"].as_f64().unwrap() / 1.10).round();
    assert_eq!(params["status"], "regressed");
    assert_eq!(
        params["drift"],
        serde_json::json!({"anchor": "v1.4.0", "anchor_commit": "a0", "anchor_value": at_anchor,
                           "max_percent": 6.0, "exceeded": true})
    );
    let peak = row("training_peak");
    assert_eq!(peak["status"], "pass");
    assert_eq!(peak["drift"]["exceeded"], false);
    // The anchor travels with the run's outputs, for `gate merge`.
    assert_eq!(json(&out.join("anchor.json"))["commit"], "a0");

    // The terminal: the row and its drift.
    let stdout = text(&o.stdout);
    let line = stdout
        .lines()
        .find(|l| l.starts_with("mlp ") && l.contains(" params "))
        .unwrap();
    assert!(line.ends_with("regressed (drift since anchor)"), "{stdout}");
    assert!(
        stdout.contains("\nmlp.params: +10.0 % since anchor v1.4.0 ("),
        "{stdout}"
    );
    assert!(stdout.contains("), drift at most 6%\n"), "{stdout}");

    // junit.xml: the failure says the drift.
    let xml = std::fs::read_to_string(out.join("junit.xml")).unwrap();
    let doc = roxmltree::Document::parse(&xml).unwrap();
    let case = doc
        .descendants()
        .find(|n| n.has_tag_name("testcase") && n.attribute("name").is_some_and(|a| a.contains("params")))
        .unwrap();
    let failure = case.children().find(|n| n.has_tag_name("failure")).unwrap();
    assert_eq!(failure.attribute("type"), Some("regressed"));
    let message = failure.attribute("message").unwrap();
    assert!(message.contains(" grew +10.0 % since anchor v1.4.0 ("), "{message}");

    // The comment: the row's status names the anchor; the proposal is a tip.
    let comment = std::fs::read_to_string(out.join("comment.md")).unwrap();
    assert!(comment.contains("📈 **regressed** (> 6% since `v1.4.0`)"), "{comment}");
    assert!(
        comment.contains(
            "> [!TIP]\n> budgets with room to tighten:\n> - mlp.training\\_peak fell 20.0 % below its baseline"
        ),
        "{comment}"
    );

    // The proposal, typed: a note, never a status.
    let kinds = report["summary"]["note_kinds"].as_array().unwrap();
    let tip = kinds.iter().find(|k| k["kind"] == "tighter_budget").unwrap();
    let p = &tip["proposal"];
    assert_eq!(p["component"], "mlp");
    assert_eq!(p["metric"], "training_peak");
    assert_eq!(p["limit"], serde_json::json!({"op": "<", "value": 8388608.0}));
    let measured = peak["measured"].as_f64().unwrap();
    let proposed = p["proposed"]["value"].as_f64().unwrap();
    assert!(proposed >= measured * 1.05 && proposed < measured * 1.06, "{p}");
}
