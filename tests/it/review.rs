//! A verdict a reviewer can trust (issue #13), end to end through the built
//! binary with the MLP: a config change never drops the comparison
//! silently, a budget changed in the PR is shown, limits keep the unit they
//! were written in, rows link to their budget's line, failing rows come
//! first and the comment suggests one next step.

use crate::common::text;
use std::path::Path;
use std::process::Output;

use crate::common;

const SHA: &str = "0123456789abcdef0123456789abcdef01234567";

fn spec(hidden: u32, budgets: &str) -> String {
    format!(
        "version: 1
device: {{ name: card, capacity: 4 GiB, reserve: 300 MiB }}
defaults: {{ seed: 7 }}
components:
  mlp:
    workload: mlp
    batch_size: 64
    config: {{ input_dim: 256, hidden_dim: {hidden}, hidden_layers: 2, output_dim: 3 }}
    budgets:
{budgets}"
    )
}

const BUDGETS: &str = "      params: < 1 MB
      activations: < 1 MiB
      gradients: < 1 MiB
      training_peak: < 8 MiB
";

/// `gate check` in `dir` on its budgets.yaml, outside GitHub unless `envs` say so.
fn check(dir: &Path, out: &str, baseline: &str, envs: &[(&str, &str)]) -> Output {
    let mut cmd = common::gate();
    cmd.args([
        "check",
        "--budgets",
        "budgets.yaml",
        "--out",
        out,
        "--baseline",
        baseline,
    ])
    .current_dir(dir);
    for (k, v) in envs {
        cmd.env(k, v);
    }
    cmd.output().expect("the gate binary runs")
}

fn read(dir: &Path, file: &str) -> String {
    std::fs::read_to_string(dir.join(file)).unwrap()
}

#[test]
fn a_config_change_is_compared_judged_and_named_in_every_output() {
    let t = tempfile::tempdir().unwrap();
    std::fs::write(t.path().join("budgets.yaml"), spec(256, BUDGETS)).unwrap();
    let o = check(t.path(), "old", "none", &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));

    // A wider hidden layer: every figure grows past the 5 % tolerance, and
    // the config change that did it is named beside each delta (#38 item 5).
    std::fs::write(t.path().join("budgets.yaml"), spec(300, BUDGETS)).unwrap();
    let o = check(t.path(), "new", "old/report.json", &[]);
    let stdout = text(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "a regression: {stdout}");
    assert!(
        stdout
            .contains("mlp: compared with the baseline across a settings change: config changed: hidden_dim 256 → 300"),
        "{stdout}"
    );
    let params_row = stdout.lines().find(|l| l.starts_with("mlp        params")).unwrap();
    assert!(params_row.ends_with("regressed (config changed)"), "{params_row}");
    let new = t.path().join("new");
    let junit = read(&new, "junit.xml");
    let doc = roxmltree::Document::parse(&junit).unwrap();
    let case = doc
        .descendants()
        .find(|n| n.attribute("name") == Some("mlp.params"))
        .unwrap();
    assert!(case.children().any(|n| n.has_tag_name("failure")), "{junit}");
    let out = case
        .children()
        .find(|n| n.has_tag_name("system-out"))
        .and_then(|n| n.text())
        .unwrap();
    assert!(
        out.contains(" MB (line 10); baseline ")
            && out.ends_with("(compared across a settings change: config changed: hidden_dim 256 → 300)"),
        "{out}"
    );
    let report: serde_json::Value = serde_json::from_str(&read(&new, "report.json")).unwrap();
    assert_eq!(report["summary"]["not_compared"], 0);
    let params = &report["results"][0];
    assert_eq!(params["status"], "regressed");
    assert_eq!(params["config_changed"], "config changed: hidden_dim 256 → 300");
    assert!(params["not_compared"].is_null());
    assert!(params["baseline"].as_f64().unwrap() < params["measured"].as_f64().unwrap());
    let comment = read(&new, "comment.md");
    assert!(
        comment.contains("⚙️ config changed: hidden\\_dim 256 → 300"),
        "{comment}"
    );
}

#[test]
fn a_budget_changed_in_the_pr_is_shown_and_limits_read_as_written() {
    let t = tempfile::tempdir().unwrap();
    std::fs::write(t.path().join("budgets.yaml"), spec(256, BUDGETS)).unwrap();
    assert_eq!(check(t.path(), "old", "none", &[]).status.code(), Some(0));
    let loosened = BUDGETS.replace("activations: < 1 MiB", "activations: < 2 MiB");
    std::fs::write(t.path().join("budgets.yaml"), spec(256, &loosened)).unwrap();
    let o = check(t.path(), "new", "old/report.json", &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let stdout = text(&o.stdout);
    assert!(
        stdout.contains("budget changed: mlp.activations: budget < 1 MiB → < 2 MiB in this PR"),
        "{stdout}"
    );
    // `< 1 MB` stays in MB: the limit as written, the figure in the same unit.
    let params = stdout.lines().find(|l| l.contains("params")).unwrap();
    assert!(params.contains("< 1 MB"), "{params}");
    assert!(params.contains(" MB "), "{params}");
    let comment = read(&t.path().join("new"), "comment.md");
    assert!(
        comment.contains("> [!IMPORTANT]\n> **A budget changed in this PR**"),
        "{comment}"
    );
    assert!(
        comment.contains("> - mlp.activations: budget &lt; 1 MiB → &lt; 2 MiB in this PR"),
        "{comment}"
    );
    assert!(
        comment.contains("&lt; 2 MiB<br><sub>was &lt; 1 MiB</sub>"),
        "the row shows the old limit: {comment}"
    );
    // report.json states the change typed beside its sentence, and conforms.
    let report: serde_json::Value = serde_json::from_str(&read(&t.path().join("new"), "report.json")).unwrap();
    let summary = &report["summary"];
    assert_eq!(
        summary["budget_changes"],
        serde_json::json!(["mlp.activations: budget < 1 MiB → < 2 MiB in this PR"])
    );
    assert_eq!(
        summary["budget_change_kinds"],
        serde_json::json!([{
            "component": "mlp",
            "metric": "activations",
            "unit": "bytes",
            "change": "changed",
            "before": { "op": "<", "value": 1048576.0 },
            "after": { "op": "<", "value": 2097152.0 },
        }])
    );
    assert_eq!(crate::schema::conforms_to("report", &report), Vec::<String>::new());
}

#[test]
fn failing_rows_come_first_link_to_their_line_and_the_comment_says_what_to_do() {
    let t = tempfile::tempdir().unwrap();
    let budgets = BUDGETS.replace("training_peak: < 8 MiB", "training_peak: < 100 KiB");
    std::fs::write(t.path().join("budgets.yaml"), spec(256, &budgets)).unwrap();
    let o = check(
        t.path(),
        "out",
        "none",
        &[
            ("GITHUB_ACTIONS", "true"),
            ("GITHUB_REPOSITORY", "octo/models"),
            ("GITHUB_SHA", SHA),
            ("GITHUB_RUN_ID", "42"),
            ("GITHUB_SERVER_URL", "https://github.com"),
        ],
    );
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    let comment = read(&t.path().join("out"), "comment.md");
    let rows: Vec<&str> = comment.lines().filter(|l| l.starts_with("| [mlp.")).collect();
    assert_eq!(rows.len(), 4, "{comment}");
    assert!(
        rows[0].starts_with(&format!(
            "| [mlp.training\\_peak](https://github.com/octo/models/blob/{SHA}/budgets.yaml#L13) | &lt; 100 KiB |"
        )),
        "the failing row first, linked to its line: {}",
        rows[0]
    );
    assert!(rows[0].ends_with("| ❌ **fail** |"), "{}", rows[0]);
    assert!(
        comment.contains("[the run](https://github.com/octo/models/actions/runs/42)"),
        "{comment}"
    );
    let step = comment.lines().find(|l| l.starts_with("**Next step:**")).unwrap();
    assert!(step.contains("`mlp.training_peak` is "), "{step}");
    assert!(step.contains("`gate fit mlp`"), "{step}");
    assert!(
        comment.contains("#### Budgets used\n\n```mermaid\n"),
        "one chart, not folded: {comment}"
    );
}

#[test]
fn a_cpu_baseline_from_another_cpu_model_is_compared() {
    let t = tempfile::tempdir().unwrap();
    std::fs::write(t.path().join("budgets.yaml"), spec(256, BUDGETS)).unwrap();
    assert_eq!(check(t.path(), "old", "none", &[]).status.code(), Some(0));
    // The baseline ran on another hosted runner's CPU.
    let path = t.path().join("old/report.json");
    let mut old: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    old["testbed"]["device_name"] = "Intel(R) Xeon(R) Platinum 8370C CPU @ 2.80GHz".into();
    std::fs::write(&path, old.to_string()).unwrap();
    let o = check(t.path(), "new", "old/report.json", &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let stdout = text(&o.stdout);
    assert!(!stdout.contains("different testbed"), "{stdout}");
    let comment = read(&t.path().join("new"), "comment.md");
    assert!(
        comment.contains("compared with the baseline old/report.json"),
        "{comment}"
    );
    assert!(comment.contains("| ±0 | 0.0% |"), "figures compared: {comment}");
    let arch = std::env::consts::ARCH.replace('_', "\\_");
    assert!(
        comment.contains(&format!(
            "(compared with any {arch} CPU: bytes do not depend on the CPU model)"
        )),
        "{comment}"
    );
}
