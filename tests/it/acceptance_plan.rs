//! The README's plan and sweep of the repository's TFT through the built
//! binary (the rest of `gate plan`'s tests: plan.rs). Each runs five to
//! seven of the TFT's profiles (the plan's start is the plain model's 5.4
//! GB): the suite's two longest, in a file first by name so that libtest
//! starts them first and the other tests run beside them, not after them.

use crate::common;
use crate::plan::{assert_predictions_hold, plan_json, sweep_json, MIB};

use serde_json::Value;

#[test]
fn the_tft_is_planned_from_its_plain_model_to_a_configuration_that_passes() {
    let dir = tempfile::tempdir().unwrap();
    let out = common::gate()
        .args([
            "plan",
            "tft",
            "--budgets",
            "examples/plan-tft.yaml",
            "--measure",
            "1",
            "--out",
        ])
        .arg(dir.path())
        .output()
        .unwrap();
    let text = common::output_text(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("fails training_peak as the spec has it"), "{text}");
    assert!(text.contains("the cheapest configuration that passes"), "{text}");
    // `plain: {}` is the start itself: one profile serves as both.
    assert!(
        text.contains("its reference `tft@plain` is the same configuration")
            && !text.contains("measuring its reference"),
        "{text}"
    );
    let plan = plan_json(dir.path());
    // The TFT's own levers were offered, and the batch (gate's own).
    let levers: Vec<String> = plan["levers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_object().unwrap().keys().next().unwrap().clone())
        .collect();
    for lever in ["checkpoint", "config", "batch"] {
        assert!(levers.iter().any(|l| l == lever), "{levers:?}");
    }
    // The start fails its peak by far: the plain model's 5.4 GB.
    assert!(
        plan["start"]["training_peak"].as_f64().unwrap() > 4000.0 * MIB,
        "{plan}"
    );
    let chosen = &plan["candidates"][plan["chosen"].as_u64().expect("a configuration passes") as usize];
    assert_eq!(chosen["outcome"], "pass");
    let peak = chosen["figures"]["training_peak"]["measured"].as_f64().unwrap();
    assert!(peak < 180.0 * MIB, "{chosen}");
    let ratio = chosen["figures"]["step_time_ratio"]["measured"].as_f64().unwrap();
    assert!(ratio < 2.0, "{chosen}");
    // Both levers that keep the loss: recompute in chunks, AdamW in slices;
    // nothing that changes what is trained.
    let settings = chosen["settings"].to_string();
    assert!(
        settings.contains("checkpoint") && settings.contains("adamw_slice"),
        "{settings}"
    );
    assert!(!settings.contains("batch") && !settings.contains("dtype"), "{settings}");
    // And it does not say that it trains differently (it did, whenever the
    // spec budgeted the loss ratio).
    assert!(!text.contains("trains differently"), "{text}");
    assert!(assert_predictions_hold(&plan, 0.10) >= 1, "{plan}");
    // Predicted and measured side by side for what it ran.
    assert!(text.contains("predicted") && text.contains("measured"), "{text}");
    // The checkpointable block's forward time in the plain step, measured:
    // what a recompute runs again.
    let floor = &plan["recompute_floor"];
    let forward = floor["forward_ms"]["encoder_vsn"]
        .as_f64()
        .expect("encoder_vsn's forward time");
    let step = floor["step_ms"].as_f64().unwrap();
    assert!(forward > 0.0 && forward < step, "{floor}");
    assert!(
        text.contains("forward time of its checkpointable blocks: encoder_vsn"),
        "{text}"
    );
}

/// "Will it fit?" for the repository's TFT (budgets.yaml: chunk 96, AdamW
/// in slices) over batch × encoder length, from four exact profiles at the
/// grid's smallest corner, and one predicted point measured again: its
/// bytes within 10 % of the prediction. The re-measured point (batch 64 ×
/// 60) is past where the training peak stops being the recompute's fixed
/// working memory and grows with the rest's backward (167.5 MiB at 32 × 60,
/// about 257 MiB here): what the phases' parts are fitted for.
#[test]
fn a_sweep_of_the_tft_answers_a_batch_by_sequence_grid_and_publishes_its_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = common::gate()
        .args([
            "plan",
            "tft",
            "--sweep",
            "--batches",
            "8,16,64",
            "--seq-lens",
            "30,60",
            "--dtypes",
            "f32",
            "--capacity",
            "1GiB",
            "--out",
        ])
        .arg(dir.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s = sweep_json(dir.path());
    assert_eq!(s["profiles"], 5, "four corners and one re-measured point");
    let points = s["points"].as_array().unwrap();
    assert_eq!(points.len(), 6, "3 batches × 2 lengths");
    let source = |p: &Value| p["source"].as_str().unwrap().to_string();
    let measured: Vec<(u64, u64)> = points
        .iter()
        .filter(|p| source(p) == "measured")
        .map(|p| (p["batch"].as_u64().unwrap(), p["seq_len"].as_u64().unwrap()))
        .collect();
    assert_eq!(measured, vec![(8, 30), (8, 60), (16, 30), (16, 60)]);
    // A predicted figure says so: no measured value beside it.
    for p in points.iter().filter(|p| source(p) == "predicted") {
        for (name, f) in p["figures"].as_object().unwrap() {
            assert!(
                f.get("measured").is_none(),
                "{name} of a predicted point has a measured value"
            );
        }
    }
    let again: Vec<&Value> = points.iter().filter(|p| source(p) == "remeasured").collect();
    assert_eq!(again.len(), 1);
    let f = &again[0]["figures"];
    for name in ["training_peak", "activations", "inference_peak"] {
        let (p, m) = (
            f[name]["predicted"].as_f64().unwrap(),
            f[name]["measured"].as_f64().unwrap(),
        );
        assert!((m - p).abs() / m <= 0.10, "{name}: predicted {p}, measured {m}");
    }
    // A fit that holds raises no doubt about itself.
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("the fit misses"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Each phase's peak and the selection network's kept bytes are fitted too.
    let fits = s["fits"].as_object().unwrap();
    assert!(
        fits.contains_key("phase.backward") && fits.contains_key("block.encoder_vsn"),
        "{fits:?}"
    );
    assert!(fits["block.encoder_vsn"]["per_token"].as_f64().unwrap() > 0.0);
    // The person's view: the grid, the marks, and an answer per capacity.
    assert!(stdout.contains("training peak, f32"), "{stdout}");
    assert!(stdout.contains("sequence_length 60"), "{stdout}");
    assert!(stdout.contains("1GiB — "), "{stdout}");
    assert!(stdout.contains("re-measured batch "), "{stdout}");
    // The card fits each re-measured decision the way the figures say.
    let cap = s["capacities"][1]["usable_bytes"].as_f64().unwrap();
    for p in points {
        let tp = &p["figures"]["training_peak"];
        let v = tp["measured"].as_f64().unwrap_or(tp["predicted"].as_f64().unwrap());
        assert_eq!(p["fits"][1].as_bool().unwrap(), v <= cap, "{p}");
    }
}
