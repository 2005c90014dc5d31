//! `gate merge` of shards that are not one run (issue #43 items 6 and 7):
//! different `--only` selections, a `shard.json` that claims what its
//! report lacks, figures measured under other settings or at other
//! commits. Each is refused (exit 2), naming what is wrong, with a hint;
//! nothing passes as "not measured".

use crate::common;

use crate::common::text;
use std::path::{Path, PathBuf};
use std::process::Output;

/// Three small MLPs and an ensemble over them.
fn spec_text(hidden: u32, batch: u32, capacity: &str, params: &str) -> String {
    let component = |name: &str| {
        format!(
            "  {name}:\n    workload: mlp\n    batch_size: {batch}\n    config: {{ input_dim: 8, hidden_dim: {hidden}, hidden_layers: 1, output_dim: 2 }}\n    budgets:\n      params: {params}\n"
        )
    };
    format!(
        "version: 1\ndevice:\n  name: card\n  capacity: {capacity}\n  reserve: 300 MiB\ndefaults:\n  seed: 7\ncomponents:\n{}{}{}\
         ensemble:\n  members: [alpha, bravo, charlie]\n  metric: training_peak\n  budgets:\n    total: < 1 GiB\n",
        component("alpha"),
        component("bravo"),
        component("charlie"),
    )
}

struct Run {
    t: tempfile::TempDir,
    spec: PathBuf,
}

impl Run {
    fn new() -> Run {
        let t = tempfile::tempdir().unwrap();
        let spec = t.path().join("budgets.yaml");
        std::fs::write(&spec, spec_text(8, 4, "4 GiB", "< 1 MiB")).unwrap();
        Run { t, spec }
    }

    fn dir(&self, name: &str) -> PathBuf {
        self.t.path().join(name)
    }

    /// `gate check` into `dir/NAME` at commit `sha`, with `extra` arguments.
    fn check(&self, name: &str, sha: &str, extra: &[&str]) {
        let o = common::gate()
            .args(["check", "--baseline", "none", "--budgets"])
            .arg(&self.spec)
            .arg("--out")
            .arg(self.dir(name))
            .args(extra)
            .env("GITHUB_SHA", sha)
            .current_dir(self.t.path())
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{name}: {}", text(&o.stderr));
    }

    fn merge(&self, dirs: &[&str], extra: &[&str]) -> Output {
        let mut cmd = common::gate();
        cmd.arg("merge");
        for d in dirs {
            cmd.arg(self.dir(d));
        }
        cmd.arg("--out")
            .arg(self.dir("merged"))
            .args(extra)
            .current_dir(self.t.path())
            .output()
            .unwrap()
    }

    fn edit_json(&self, file: &Path, edit: impl FnOnce(&mut serde_json::Value)) {
        let mut v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
        edit(&mut v);
        std::fs::write(file, serde_json::to_string_pretty(&v).unwrap()).unwrap();
    }

    /// A copy of folder `from` as `to`.
    fn copy(&self, from: &str, to: &str) {
        std::fs::create_dir_all(self.dir(to)).unwrap();
        for e in std::fs::read_dir(self.dir(from)).unwrap() {
            let e = e.unwrap();
            std::fs::copy(e.path(), self.dir(to).join(e.file_name())).unwrap();
        }
    }
}

/// Exit 2, every needle in stderr, a hint, nothing merged.
fn refused(o: &Output, needles: &[&str]) {
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    for n in needles {
        assert!(err.contains(n), "no {n:?} in:\n{err}");
    }
    assert!(err.contains("hint: "), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

const SHA: &str = "1111111111111111111111111111111111111111";
const OTHER_SHA: &str = "2222222222222222222222222222222222222222";

#[test]
fn shards_of_different_selections_are_refused_naming_what_no_shard_measured() {
    let r = Run::new();
    // `--only` jobs that leave `charlie` out: it was never measured.
    r.check("a", SHA, &["--only", "alpha"]);
    r.check("b", SHA, &["--only", "bravo"]);
    let o = r.merge(&["a", "b"], &[]);
    refused(&o, &["no shard measured `charlie`", "budgets.yaml"]);
    assert!(!r.dir("merged/report.json").exists());
    // Shards of two selections: each is its own split.
    r.check("s1", SHA, &["--only", "alpha,bravo", "--shard", "1/2"]);
    r.check("s2", SHA, &["--only", "charlie", "--shard", "2/2"]);
    refused(
        &r.merge(&["s1", "s2"], &[]),
        &["with --only charlie", "with --only alpha,bravo", "two different splits"],
    );
    // One selection, sharded whole: what it left out is named.
    r.check("t1", SHA, &["--only", "bravo,alpha", "--shard", "1/2"]);
    r.check("t2", SHA, &["--only", "alpha,bravo", "--shard", "2/2"]);
    refused(
        &r.merge(&["t1", "t2"], &[]),
        &["no shard measured `charlie`", "the shards ran with --only alpha,bravo"],
    );
    // A shard of a selection with one of the whole spec.
    r.check("u2", SHA, &["--shard", "2/2"]);
    refused(
        &r.merge(&["t1", "u2"], &[]),
        &["without --only", "two different splits"],
    );
    // The whole matrix merges, as before.
    r.check("w1", SHA, &["--shard", "1/2"]);
    let o = r.merge(&["w1", "u2"], &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
}

#[test]
fn a_shard_json_that_disagrees_with_its_report_is_refused() {
    let r = Run::new();
    r.check("s1", SHA, &["--shard", "1/2"]);
    r.check("s2", SHA, &["--shard", "2/2"]);
    // s1 holds alpha and charlie, s2 bravo.
    // Claims a component its report lacks.
    r.copy("s2", "claims");
    r.edit_json(&r.dir("claims/shard.json"), |v| {
        v["components"] = serde_json::json!(["bravo", "charlie"])
    });
    refused(
        &r.merge(&["s1", "claims"], &[]),
        &["shard.json: shard 2/2 claims `charlie`", "has no measurement of"],
    );
    // A report that lacks a claimed component.
    r.copy("s1", "cut");
    r.edit_json(&r.dir("cut/report.json"), |v| {
        v["components"].as_object_mut().unwrap().remove("charlie");
    });
    refused(&r.merge(&["cut", "s2"], &[]), &["claims `charlie`"]);
    // A report that holds it, marked not measured.
    r.copy("s1", "unmeasured");
    r.edit_json(&r.dir("unmeasured/report.json"), |v| {
        v["components"]["charlie"]["metrics"] = serde_json::json!({});
        v["components"]["charlie"]["error"] =
            serde_json::json!({"kind": "not_measured", "phase": null, "reason": "x", "peak_bytes": null});
    });
    refused(&r.merge(&["unmeasured", "s2"], &[]), &["claims `charlie`"]);
    // A report that holds a component its shard.json does not claim.
    r.copy("s2", "extra");
    r.edit_json(&r.dir("extra/shard.json"), |v| v["components"] = serde_json::json!([]));
    refused(
        &r.merge(&["s1", "extra"], &[]),
        &["does not claim `bravo`", "report.json holds"],
    );
}

#[test]
fn figures_of_other_settings_or_commits_are_refused_or_said() {
    let r = Run::new();
    r.check("s1", SHA, &["--shard", "1/2"]);
    r.check("s2", SHA, &["--shard", "2/2"]);
    let spec = |name: &str, text: String| {
        let p = r.dir(name);
        std::fs::write(&p, text).unwrap();
        p.to_str().unwrap().to_string()
    };
    // Another config, batch or card under --budgets: named at the spec's line.
    let hidden = spec("hidden.yaml", spec_text(16, 4, "4 GiB", "< 1 MiB"));
    refused(
        &r.merge(&["s1", "s2"], &["--budgets", &hidden]),
        &[
            "hidden.yaml:12:29: `alpha` was measured under other settings than this spec gives",
            "config.hidden_dim 8 → 16",
        ],
    );
    let batch = spec("batch.yaml", spec_text(8, 2, "4 GiB", "< 1 MiB"));
    refused(
        &r.merge(&["s1", "s2"], &["--budgets", &batch]),
        &["batch.yaml:9: `alpha`", "batch_size 4 → 2"],
    );
    let card = spec("card.yaml", spec_text(8, 4, "8 GiB", "< 1 MiB"));
    refused(
        &r.merge(&["s1", "s2"], &["--budgets", &card]),
        &[
            "was measured for the card `card` (4294967296 bytes)",
            "(8589934592 bytes)",
        ],
    );
    // New limits over the same figures are what --budgets is for.
    let limits = spec("limits.yaml", spec_text(8, 4, "4 GiB", "< 1 KiB"));
    let o = r.merge(&["s1", "s2"], &["--budgets", &limits]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));

    // Two commits: refused, both named.
    r.check("late", OTHER_SHA, &["--shard", "2/2"]);
    refused(
        &r.merge(&["s1", "late"], &[]),
        &["the shards measured different commits", SHA, OTHER_SHA],
    );
    // A shard without a commit: said, and the others' commit kept.
    r.copy("s2", "nocommit");
    r.edit_json(&r.dir("nocommit/report.json"), |v| {
        v["commit"] = serde_json::Value::Null
    });
    let o = r.merge(&["nocommit", "s1"], &[]);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(
        err.contains(&format!("records no commit; the merged report is of commit {SHA}")),
        "{err}"
    );
    let merged: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(r.dir("merged/report.json")).unwrap()).unwrap();
    assert_eq!(merged["commit"], SHA);
}

/// `gate check` of the built-in MLP into `out`, with `extra` arguments.
fn check_mlp(out: &Path, extra: &[&str]) -> Output {
    let root = Path::new(env!("GATE_REPO_ROOT"));
    common::gate()
        .current_dir(root)
        .args(["check", "--budgets", "examples/mlp.yaml"])
        .args(extra)
        .arg("--out")
        .arg(out)
        .output()
        .unwrap()
}

/// `report` as a newer gate would write it: a metric, a unit, a failure
/// kind and a budget-change kind this gate does not know.
fn from_a_newer_gate(report: &mut serde_json::Value, failed: bool) {
    let row = report["results"][0].clone();
    let rows = report["results"].as_array_mut().unwrap();
    let mut other_metric = row.clone();
    other_metric["metric"] = "tokens_per_joule".into();
    other_metric["unit"] = "1".into();
    rows.push(other_metric);
    let mut other_unit = row;
    other_unit["metric"] = "joules".into();
    other_unit["unit"] = "joule".into();
    rows.push(other_unit);
    let mlp = &mut report["components"]["mlp"];
    mlp["metrics"]["tokens_per_joule"] = serde_json::json!({ "value": 3.0, "unit": "1" });
    mlp["metrics"]["energy"] = serde_json::json!({ "value": 3.0, "unit": "joule" });
    if failed {
        // An error of a kind this gate does not know either: failed, never passed.
        mlp["error"] = serde_json::json!({
            "kind": "throttled", "phase": "forward", "reason": "the card overheated", "failure_kind": "thermal",
        });
    }
    // A status and a verdict of a newer gate too.
    report["results"][1]["status"] = "flaky".into();
    let summary = &mut report["summary"];
    summary["status"] = "pass_with_notes".into();
    summary["budget_changes"] = serde_json::json!(["mlp.params: budget tightened by policy"]);
    summary["budget_change_kinds"] = serde_json::json!([
        { "component": "mlp", "metric": "params", "unit": "bytes", "change": "tightened_by_policy" }
    ]);
}

/// A report, baseline or shard from a newer gate is read forward (#54
/// item 4): what this gate does not know is kept or said as unknown,
/// never judged, never a refusal (exit 2).
#[test]
fn a_newer_gates_report_is_read_as_a_baseline_and_merged() {
    let t = tempfile::tempdir().unwrap();
    // As a baseline.
    let base = t.path().join("base");
    assert_eq!(check_mlp(&base, &["--baseline", "none"]).status.code(), Some(0));
    let path = base.join("report.json");
    let mut report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    from_a_newer_gate(&mut report, false);
    std::fs::write(&path, serde_json::to_string(&report).unwrap()).unwrap();
    let o = check_mlp(&t.path().join("now"), &["--baseline", path.to_str().unwrap()]);
    let all = format!("{}{}", text(&o.stdout), text(&o.stderr));
    assert_eq!(o.status.code(), Some(0), "{all}");
    for unknown in ["mlp.tokens_per_joule", "mlp.joules"] {
        assert!(
            all.contains(&format!(
                "{unknown}: the baseline's budget is of a metric or unit this gate does not know"
            )),
            "{unknown}: {all}"
        );
    }
    assert!(!all.contains("removed in this PR"), "{all}");

    // As a shard, failed of a kind this gate does not know: merged, failing.
    let shard = t.path().join("shard");
    assert_eq!(
        check_mlp(&shard, &["--baseline", "none", "--shard", "1/1"])
            .status
            .code(),
        Some(0)
    );
    let path = shard.join("report.json");
    let mut report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    from_a_newer_gate(&mut report, true);
    std::fs::write(&path, serde_json::to_string(&report).unwrap()).unwrap();
    let merged = t.path().join("merged");
    let o = common::gate()
        .current_dir(env!("GATE_REPO_ROOT"))
        .arg("merge")
        .arg(&shard)
        .arg("--out")
        .arg(&merged)
        .output()
        .unwrap();
    let stderr = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "the failed component fails the run: {stderr}");
    assert!(
        stderr.contains("`mlp.tokens_per_joule` is of a metric or unit this gate does not know"),
        "{stderr}"
    );
    let out: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(merged.join("report.json")).unwrap()).unwrap();
    assert_eq!(out["components"]["mlp"]["error"]["failure_kind"], "unknown", "{out}");
    assert_eq!(out["components"]["mlp"]["error"]["kind"], "failed", "{out}");
    assert_eq!(
        out["components"]["mlp"]["error"]["reason"], "the card overheated",
        "{out}"
    );
    assert!(
        out["results"].as_array().unwrap().iter().all(|r| r["status"] != "pass"),
        "no figure of the failed component passes: {out}"
    );
}
