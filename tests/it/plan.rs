//! `gate plan` through the built binary: the repository's TFT from its
//! plain model to a configuration that passes, every measured candidate's
//! predicted bytes within 10 % of what was measured; `--apply` writing the
//! chosen settings into a spec that still validates; `gate check --plan`
//! putting the fix in report.json, the table and JUnit.

use crate::common;

use std::path::Path;

use serde_json::Value;

pub(crate) const MIB: f64 = 1024.0 * 1024.0;

pub(crate) fn plan_json(dir: &Path) -> Value {
    let text = std::fs::read_to_string(dir.join("plan.json")).expect("plan.json written");
    let plan: Value = serde_json::from_str(&text).unwrap();
    // It reads back as the contract's type, and conforms to its schema.
    serde_json::from_value::<gate_contract::plan::Plan>(plan.clone()).expect("plan.json is a Plan");
    assert_eq!(crate::schema::conforms_to("plan", &plan), Vec::<String>::new());
    plan
}

/// Every measured candidate's byte figures within `tolerance` of its
/// prediction; how many were measured. The adopter fixtures' plans are
/// held to it too.
pub(crate) fn assert_predictions_hold(plan: &Value, tolerance: f64) -> usize {
    let mut measured = 0;
    for k in plan["candidates"].as_array().unwrap() {
        for (metric, f) in k["figures"].as_object().unwrap() {
            let (Some(p), Some(m)) = (f["predicted"].as_f64(), f["measured"].as_f64()) else {
                continue;
            };
            if metric.ends_with("_ratio") || metric == "step_time" {
                continue;
            }
            measured += 1;
            if m == 0.0 {
                // A figure a lever empties (SGD's optimizer state) has no
                // relative error: its prediction must be as near nothing.
                assert!(
                    p.abs() <= 64.0 * 1024.0,
                    "{metric} of {}: predicted {p}, measured 0",
                    k["settings"]
                );
                continue;
            }
            let error = (m - p).abs() / m;
            assert!(
                error <= tolerance,
                "{metric} of {}: predicted {p}, measured {m} ({:.1} %)",
                k["settings"],
                error * 100.0
            );
        }
    }
    measured
}

const MLP: &str = "version: 1
device: { name: card, capacity: 4 GiB, reserve: 300 MiB }
defaults: { dtype: f32, seed: 7 }
components:
  mlp:
    workload: mlp # the small one
    batch_size: 4096
    config: { input_dim: 256, hidden_dim: 256, hidden_layers: 2, output_dim: 3 }
    budgets:
      training_peak: < 40 MiB
";

/// `gate plan mlp` on `spec`, plan.json into `out`.
fn plan_mlp(spec: &Path, out: &Path, extra: &[&str]) -> std::process::Output {
    plan_of("mlp", spec, out, extra)
}

/// `gate plan COMPONENT` on `spec`, plan.json into `out`.
fn plan_of(component: &str, spec: &Path, out: &Path, extra: &[&str]) -> std::process::Output {
    common::gate()
        .args(["plan", component, "--budgets"])
        .arg(spec)
        .arg("--out")
        .arg(out)
        .args(extra)
        .output()
        .unwrap()
}

/// A model with no lever but the batch and the dtype (both change the
/// loss): the plan says so, measures, and `--apply` writes the lines.
#[test]
fn a_plan_of_loss_changing_levers_shows_its_loss_and_apply_writes_it() {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("budgets.yaml");
    std::fs::write(&spec, MLP).unwrap();
    let out = plan_mlp(&spec, dir.path(), &["--apply"]);
    let text = common::output_text(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    let plan = plan_json(dir.path());
    let chosen = &plan["candidates"][plan["chosen"].as_u64().expect("a configuration passes") as usize];
    // A lever that changes the loss is shown with its loss ratio, and the
    // choice says in words that it trains differently.
    assert!(chosen["figures"]["loss_ratio"]["predicted"].is_number(), "{chosen}");
    assert!(
        text.contains("no configuration found that keeps the loss passes: this one trains differently (loss ratio"),
        "{text}"
    );
    assert!(assert_predictions_hold(&plan, 0.10) >= 1, "{plan}");
    // Written where a person would write it, the rest untouched.
    let edited = std::fs::read_to_string(&spec).unwrap();
    assert!(edited.contains("    workload: mlp # the small one\n"), "{edited}");
    let settings = chosen["settings"].to_string();
    if let Some(size) = chosen["settings"]
        .as_array()
        .unwrap()
        .iter()
        .find_map(|s| s["batch"]["size"].as_u64())
    {
        assert!(edited.contains(&format!("    batch_size: {size}\n")), "{edited}");
    }
    if settings.contains("dtype") {
        assert!(edited.contains("    master_weights: f32\n"), "{edited}");
    }
    let valid = common::gate()
        .args(["validate", "--budgets"])
        .arg(&spec)
        .output()
        .unwrap();
    assert_eq!(valid.status.code(), Some(0), "{}", common::output_text(&valid));
    // Planned again, the spec passes as it is: nothing to plan.
    let again = plan_mlp(&spec, dir.path(), &[]);
    let text = common::output_text(&again);
    assert_eq!(again.status.code(), Some(0), "{text}");
    assert!(text.contains("passes every budget as it is"), "{text}");
}

/// Neither the dtype nor a smaller batch alone brings the MLP under its
/// budget (33.2 and 17.1 MiB against 12), both do (9.95 MiB): the plan
/// predicts the pair from the two probes and measures it. Added, the two
/// cuts took more than the start held (a prediction of nothing); the
/// batch's rows keep the dtype's share.
#[test]
fn a_smaller_batch_in_bf16_is_predicted_from_each_alone() {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("budgets.yaml");
    std::fs::write(&spec, MLP.replace("training_peak: < 40 MiB", "training_peak: < 12 MiB")).unwrap();
    let out = plan_mlp(&spec, dir.path(), &[]);
    let text = common::output_text(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    let plan = plan_json(dir.path());
    let chosen = &plan["candidates"][plan["chosen"].as_u64().expect("a configuration passes") as usize];
    let settings = chosen["settings"].to_string();
    assert!(settings.contains("bf16") && settings.contains("1024"), "{settings}");
    let peak = &chosen["figures"]["training_peak"];
    assert!(peak["measured"].as_f64().unwrap() < 12.0 * MIB, "{peak}");
    assert!(assert_predictions_hold(&plan, 0.10) >= 1, "{plan}");
}

/// The TFT at batch 2 × 80 steps runs its encoder's selection network
/// over 160 positions: a chunk of 160 or more is one chunk (19.98 MiB at
/// 160, 320 and 640 alike; 14.41 at 96, 13.51 at 64 and below). The probe
/// at 640 ran that one chunk, so 160 is predicted as it measured, and 320
/// and 640 are no candidates of their own. Before, the line drawn from the
/// probes at 32 and 640 predicted 160 at 13.51 MiB and 320 at 15.46 (32 %
/// and 23 % low): both predicted to pass the 19 MiB they fail, and each
/// measured for nothing.
#[test]
fn a_chunk_past_the_blocks_positions_is_predicted_as_one_chunk_of_them() {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("budgets.yaml");
    std::fs::write(
        &spec,
        "version: 1
device: { name: card, capacity: 4 GiB }
defaults: { dtype: f32, seed: 42, timing: { warmup: 1, steps: 2 } }
components:
  tft:
    workload: tft
    batch_size: 2
    checkpoint: none
    config:
      input_dim: 64
      hidden_dim: 32
      num_heads: 4
      num_layers: 1
      sequence_length: 80
      prediction_horizon: 5
      num_quantiles: 9
      num_static_features: 5
      num_known_features: 10
      num_unknown_features: 49
    budgets:
      training_peak: < 19 MiB
",
    )
    .unwrap();
    let out = plan_of("tft", &spec, dir.path(), &["--measure", "20"]);
    let text = common::output_text(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    let plan = plan_json(dir.path());
    let chunk_of = |settings: &Value| {
        settings
            .as_array()
            .unwrap()
            .iter()
            .find_map(|s| s["checkpoint"]["chunk"].as_u64())
    };
    let probe_640 = plan["probes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["setting"]["checkpoint"]["chunk"] == 640)
        .expect("the checkpoint probed at its largest chunk");
    let one_chunk = probe_640["values"]["training_peak"].as_f64().unwrap();
    let candidates = plan["candidates"].as_array().unwrap();
    let chunks: Vec<Option<u64>> = candidates.iter().map(|k| chunk_of(&k["settings"])).collect();
    assert!(
        !chunks.contains(&Some(320)) && !chunks.contains(&Some(640)),
        "{chunks:?}"
    );
    let at_160: Vec<&Value> = candidates
        .iter()
        .filter(|k| chunk_of(&k["settings"]) == Some(160))
        .collect();
    assert!(!at_160.is_empty(), "{chunks:?}");
    for k in at_160 {
        let predicted = k["figures"]["training_peak"]["predicted"].as_f64().unwrap();
        assert!((predicted - one_chunk).abs() / one_chunk < 0.01, "{k}");
        assert_eq!(k["outcome"], "predicted_fail", "{k}");
    }
    // Every candidate predicted to pass was measured, each within 10 %.
    assert!(candidates.iter().all(|k| k["outcome"] != "predicted_pass"), "{plan}");
    assert!(assert_predictions_hold(&plan, 0.10) >= 1, "{plan}");
    let chosen = &candidates[plan["chosen"].as_u64().expect("a configuration passes") as usize];
    assert!(chunk_of(&chosen["settings"]).is_some_and(|c| c < 160), "{chosen}");
}

/// A round's profiles run side by side (`--jobs`, one per core by
/// default): each is its own process, so every probe's and candidate's
/// figures but the times are what they are one at a time, and so is the
/// choice.
#[test]
fn a_plans_profiles_side_by_side_measure_what_they_measure_one_at_a_time() {
    let figures = |jobs: &str| {
        let dir = tempfile::tempdir().unwrap();
        let spec = dir.path().join("budgets.yaml");
        std::fs::write(&spec, MLP.replace("training_peak: < 40 MiB", "training_peak: < 12 MiB")).unwrap();
        let out = plan_mlp(&spec, dir.path(), &["--jobs", jobs]);
        let text = common::output_text(&out);
        assert_eq!(out.status.code(), Some(0), "{text}");
        let plan = plan_json(dir.path());
        let untimed = |values: &Value| {
            let mut v = values.as_object().unwrap().clone();
            v.retain(|metric, _| !metric.contains("time"));
            v
        };
        let probes: Vec<_> = plan["probes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| (p["setting"].clone(), untimed(&p["values"])))
            .collect();
        // The candidates by their settings (their ranking weighs the
        // measured step times), each with its predicted figures but the times.
        let predicted: std::collections::BTreeMap<String, _> = plan["candidates"]
            .as_array()
            .unwrap()
            .iter()
            .map(|k| {
                let mut f = k["figures"].as_object().unwrap().clone();
                f.retain(|metric, _| !metric.contains("time"));
                f.values_mut().for_each(|v| {
                    v.as_object_mut().unwrap().remove("measured");
                });
                (k["settings"].to_string(), f)
            })
            .collect();
        let chosen = &plan["candidates"][plan["chosen"].as_u64().expect("a configuration passes") as usize];
        let chosen = (
            chosen["settings"].clone(),
            chosen["figures"]["training_peak"]["measured"].clone(),
        );
        assert!(probes.len() >= 2, "{plan}");
        (probes, predicted, chosen)
    };
    assert_eq!(figures("3"), figures("1"));
}

#[test]
fn check_with_plan_names_the_measured_fix_in_the_report_the_table_and_junit() {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("budgets.yaml");
    std::fs::write(&spec, MLP).unwrap();
    let out = common::gate()
        .args(["check", "--plan", "--baseline", "none", "--budgets"])
        .arg(&spec)
        .arg("--out")
        .arg(dir.path())
        .output()
        .unwrap();
    let text = common::output_text(&out);
    // The verdict is the spec's: the budget fails.
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("Measured fix for `mlp`"), "{text}");
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("report.json")).unwrap()).unwrap();
    assert_eq!(crate::schema::conforms_to("report", &report), Vec::<String>::new());
    let plan = &report["plans"]["mlp"];
    assert!(plan["chosen"].is_u64(), "{plan}");
    let junit = std::fs::read_to_string(dir.path().join("junit.xml")).unwrap();
    let doc = roxmltree::Document::parse(&junit).unwrap();
    let failure = doc
        .descendants()
        .find(|n| n.has_tag_name("failure"))
        .expect("the failing budget");
    let message = failure.attribute("message").unwrap();
    assert!(message.contains("Measured fix for `mlp`"), "{message}");
    // The comment: one line and the collapsed table.
    let r: gate_contract::report::Report = serde_json::from_value(report).unwrap();
    let comment = gate_render::markdown::render(&r, None, gate_render::markdown::COMMENT_LIMIT);
    assert!(comment.contains("**Measured fix for `mlp`"), "{comment}");
    assert!(comment.contains("<details><summary>The plan for `mlp`"), "{comment}");
    // The command it names writes the fix into this spec, run as printed
    // from where the check ran: it names the spec, which is not the default.
    let command = message
        .split("Write it into the spec with `")
        .nth(1)
        .and_then(|rest| rest.split('`').next())
        .expect("the command that writes the fix");
    assert!(
        command.starts_with("gate plan mlp --apply --budgets ") && command.contains(spec.to_str().unwrap()),
        "{command}"
    );
    let before = std::fs::read_to_string(&spec).unwrap();
    let exe = common::gate_exe().to_str().unwrap().to_string();
    let applied = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "'{exe}' {} --out '{}'",
            &command["gate ".len()..],
            dir.path().display()
        ))
        .current_dir(env!("GATE_REPO_ROOT"))
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    assert_eq!(applied.status.code(), Some(0), "{}", common::output_text(&applied));
    let after = std::fs::read_to_string(&spec).unwrap();
    assert_ne!(before, after, "the spec was not written");
    // And where `--apply` writes it, the plan does not tell the reader to.
    assert!(
        !common::output_text(&applied).contains("--apply` writes it"),
        "{}",
        common::output_text(&applied)
    );
}

/// Counts and grids that cannot mean anything are refused before anything
/// is built or profiled, as the usage errors they are (exit 2), naming the
/// value; options a sweep does not take are refused with it, not ignored.
#[test]
fn a_plan_refuses_zero_counts_empty_grid_values_and_options_a_sweep_does_not_take() {
    let refused = |args: &[&str], says: &str| {
        let out = common::gate().args(args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    };
    refused(&["plan", "tft", "--measure", "0"], "must be 1 or more");
    refused(&["plan", "tft", "--jobs", "0"], "must be 1 or more");
    refused(&["check", "--jobs", "0"], "must be 1 or more");
    refused(&["plan", "tft", "--sweep", "--batches", "0,8,16"], "must be 1 or more");
    refused(&["plan", "tft", "--sweep", "--seq-lens", "10,0"], "must be 1 or more");
    refused(
        &["plan", "tft", "--sweep", "--batches", "4,8,18446744073709551615"],
        "must be at most 4294967295",
    );
    for option in [&["--apply"][..], &["--all-levers"], &["--measure", "2"]] {
        let mut args = vec!["plan", "tft", "--sweep"];
        args.extend_from_slice(option);
        refused(&args, "cannot be used with");
    }
}

pub(crate) fn sweep_json(dir: &Path) -> Value {
    let text = std::fs::read_to_string(dir.join("sweep.json")).expect("sweep.json written");
    let sweep: Value = serde_json::from_str(&text).unwrap();
    serde_json::from_value::<gate_contract::sweep::Sweep>(sweep.clone()).expect("sweep.json is a Sweep");
    assert_eq!(crate::schema::conforms_to("sweep", &sweep), Vec::<String>::new());
    sweep
}

#[test]
fn a_sweep_refuses_a_sequence_axis_its_workload_does_not_declare_and_a_capacity_under_the_reserve() {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("budgets.yaml");
    std::fs::write(&spec, MLP).unwrap();
    let out = common::gate()
        .args(["plan", "mlp", "--sweep", "--seq-lens", "8,16", "--budgets"])
        .arg(&spec)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("declares no sequence length") && err.contains("hint:"),
        "{err}"
    );
    // A capacity the spec's 300 MiB reserve would leave nothing of.
    let out = common::gate()
        .args(["plan", "mlp", "--sweep", "--capacity", "256MiB", "--budgets"])
        .arg(&spec)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--capacity `256MiB` is no larger than the spec's per-process reserve") && err.contains("hint:"),
        "{err}"
    );
}

/// `gate fit` after `gate check`: the check's report.json measured the
/// spec's batch already, the proportional guess is the first profile and
/// the line through the two is confirmed by the second; before, a fit ran
/// two probes and a confirmation at least. A spec changed since the check
/// is measured again.
#[test]
fn fit_after_a_check_finds_the_largest_batch_in_two_profiles() {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("budgets.yaml");
    std::fs::write(&spec, MLP).unwrap();
    let out_dir = dir.path().join("out");
    let check = common::gate()
        .args(["check", "--baseline", "none", "--budgets"])
        .arg(&spec)
        .arg("--out")
        .arg(&out_dir)
        .output()
        .unwrap();
    assert_eq!(
        check.status.code(),
        Some(1),
        "batch 4096 is over 40 MiB: {}",
        common::output_text(&check)
    );
    let fit = |spec: &Path| {
        let out = common::gate()
            .args(["fit", "mlp", "--budgets"])
            .arg(spec)
            .arg("--from")
            .arg(&out_dir)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).to_string();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let profiles: usize = stdout
            .lines()
            .find_map(|l| l.strip_suffix(" full profiles")?.parse().ok())
            .expect("the count is printed");
        (profiles, stdout)
    };
    let (profiles, stdout) = fit(&spec);
    assert!(stdout.contains("mlp: batch 4096 as "), "{stdout}");
    assert!(profiles <= 2, "{profiles} profiles:\n{stdout}");
    let largest: usize = stdout
        .lines()
        .find_map(|l| {
            l.split("the largest batch that passes every budget is ")
                .nth(1)?
                .split(' ')
                .next()?
                .parse()
                .ok()
        })
        .expect("a batch is confirmed");
    // Another config: the report is not this component's any more.
    let changed = dir.path().join("changed.yaml");
    std::fs::write(&changed, MLP.replace("output_dim: 3", "output_dim: 4")).unwrap();
    let (_, stdout) = fit(&changed);
    assert!(!stdout.contains(" as "), "{stdout}");
    assert!(
        stdout.contains("the largest batch that passes every budget is "),
        "{stdout}"
    );
    assert!(largest > 2048 && largest < 4096, "{largest}");
}
