//! Step-time ratios timed in interleaved pairs, end to end through the
//! built binary: a variant's steps alternate with its reference's in one
//! process after the byte profiles, and the report carries the median
//! ratio with its 95 % interval. No assertion on wall time: the figures
//! vary, so only their shape and the verdicts they must give are pinned.

use std::process::Command;

use gate::__private::units::trim_float;

const SPEC: &str = "version: 1
device: { name: card, capacity: 4 GiB, reserve: 300 MiB }
defaults: { seed: 7 }
components:
  mlp:
    workload: mlp
    batch_size: 64
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
    let o = Command::new(env!("CARGO_BIN_EXE_gate"))
        .args(["check", "--baseline", "none", "--budgets"])
        .arg(&spec)
        .arg("--out")
        .arg(&out)
        .env("NO_COLOR", "1")
        .env_remove("GATE_INJECT_FAULT")
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
