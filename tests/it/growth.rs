//! `growth`: bytes a component keeps piling up over training steps and
//! inference calls. Every built-in model holds still (0 B) on the CPU; a
//! leak injected into one component (a copy of the batch kept per step) is
//! caught and fails its budget, and only its budget.

use crate::common;

use std::process::Output;

const SPEC: &str = "version: 1
device: { name: card, capacity: 4 GiB }
defaults: { seed: 3, batch_size: 4 }
components:
  mlp:
    workload: mlp
    config: { input_dim: 16, hidden_dim: 32, hidden_layers: 2, output_dim: 3 }
    budgets: { growth: < 1 KiB }
  tft:
    workload: tft
    config: { input_dim: 25, hidden_dim: 8, num_heads: 2, num_layers: 1, sequence_length: 12, prediction_horizon: 3, num_quantiles: 3, num_static_features: 2, num_known_features: 3, num_unknown_features: 20 }
    budgets: { growth: < 1 KiB }
  tft_ck:
    workload: tft
    checkpoint: { chunk: 2 }
    config: { input_dim: 25, hidden_dim: 8, num_heads: 2, num_layers: 1, sequence_length: 12, prediction_horizon: 3, num_quantiles: 3, num_static_features: 2, num_known_features: 3, num_unknown_features: 20 }
    budgets: { growth: < 1 KiB }
  dqn:
    workload: dqn
    config: { state_dim: 12, hidden_dim: 16, num_actions: 3, target_sync: 2 }
    budgets: { growth: < 1 KiB }
  ppo:
    workload: ppo
    config: { obs_dim: 8, hidden_dim: 16, rollout_steps: 12, num_envs: 3, minibatch: 20 }
    budgets: { growth: < 1 KiB }
  mamba2:
    workload: mamba2
    config: { input_dim: 12, d_model: 16, n_layers: 2, d_inner: 32, d_state: 8, head_dim: 8, chunk_size: 4, seq_len: 10 }
    budgets: { growth: < 1 KiB }
";

fn check(dir: &std::path::Path, envs: &[(&str, &str)]) -> (Output, serde_json::Value) {
    std::fs::write(dir.join("budgets.yaml"), SPEC).unwrap();
    let out = dir.join("out");
    let mut cmd = common::gate();
    cmd.args(["check", "--baseline", "none", "--out", out.to_str().unwrap()])
        .current_dir(dir);
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let o = cmd.output().unwrap();
    let report = std::fs::read_to_string(out.join("report.json")).unwrap_or_else(|_| {
        panic!("no report: {}", String::from_utf8_lossy(&o.stderr));
    });
    (o, serde_json::from_str(&report).unwrap())
}

fn growth(r: &serde_json::Value, c: &str) -> f64 {
    r["components"][c]["metrics"]["growth"]["value"]
        .as_f64()
        .unwrap_or_else(|| panic!("no growth for {c}: {}", r["components"][c]))
}

#[test]
fn every_built_in_model_holds_still() {
    let t = tempfile::tempdir().unwrap();
    let (o, r) = check(t.path(), &[]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    for c in ["mlp", "tft", "tft_ck", "dqn", "ppo", "mamba2"] {
        assert_eq!(growth(&r, c), 0.0, "{c}");
    }
}

#[test]
fn a_tensor_kept_per_step_is_caught_in_that_component_only() {
    let t = tempfile::tempdir().unwrap();
    let (o, r) = check(t.path(), &[("GATE_INJECT_FAULT", "mlp:timing:leak")]);
    assert_eq!(o.status.code(), Some(1), "{}", String::from_utf8_lossy(&o.stderr));
    // Two more timed steps and two inference calls each keep a copy of the
    // batch's input: 4 rows × 16 f32 = 256 bytes of data, plus candle's
    // per-tensor bookkeeping.
    let g = growth(&r, "mlp");
    assert!(g >= 4.0 * 256.0, "{g}");
    let failed: Vec<&str> = r["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|x| x["status"] == "fail")
        .map(|x| x["component"].as_str().unwrap())
        .collect();
    assert_eq!(failed, ["mlp"], "{}", r["results"]);
    assert_eq!(growth(&r, "dqn"), 0.0);
}
