//! Block attribution adds up: for every built-in workload (the TFT plain
//! and checkpointed), no block retains more than the component's
//! activations, and the top-level blocks together retain no more than them.
//! A checkpointed block reports what it keeps (its output) and its peak
//! (the largest chunk), not the sum of its chunks' transients.

use std::process::Command;

const TFT: &str = "{ input_dim: 25, hidden_dim: 8, num_heads: 2, num_layers: 1, sequence_length: 12, prediction_horizon: 3, num_quantiles: 3, num_static_features: 2, num_known_features: 3, num_unknown_features: 20 }";

#[test]
fn blocks_never_retain_more_than_the_activations() {
    let t = tempfile::tempdir().unwrap();
    let spec = format!(
        "version: 1
device: {{ name: card, capacity: 4 GiB }}
defaults: {{ seed: 3, batch_size: 8 }}
components:
  mlp: {{ workload: mlp, config: {{ input_dim: 16, hidden_dim: 32 }}, budgets: {{ activations: < 1 GiB }} }}
  tft: {{ workload: tft, config: {TFT}, budgets: {{ activations: < 1 GiB }} }}
  tft_ck: {{ workload: tft, checkpoint: {{ chunk: 2 }}, config: {TFT}, budgets: {{ activations: < 1 GiB }} }}
  dqn: {{ workload: dqn, config: {{ state_dim: 12, hidden_dim: 16 }}, budgets: {{ activations: < 1 GiB }} }}
  ppo: {{ workload: ppo, config: {{ obs_dim: 8, hidden_dim: 16, rollout_steps: 12, num_envs: 3, minibatch: 20 }}, budgets: {{ activations: < 1 GiB }} }}
  mamba2: {{ workload: mamba2, config: {{ input_dim: 12, d_model: 16, d_inner: 32, d_state: 8, head_dim: 8, chunk_size: 4, seq_len: 10 }}, budgets: {{ activations: < 1 GiB }} }}
"
    );
    std::fs::write(t.path().join("budgets.yaml"), spec).unwrap();
    let out = t.path().join("out");
    let o = Command::new(env!("CARGO_BIN_EXE_gate"))
        .args(["check", "--baseline", "none", "--out", out.to_str().unwrap()])
        .current_dir(t.path())
        .env("NO_COLOR", "1")
        .env_remove("GATE_INJECT_FAULT")
        .env_remove("GITHUB_ACTIONS")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    for name in ["mlp", "tft", "tft_ck", "dqn", "ppo", "mamba2"] {
        let c = &r["components"][name];
        let act = c["metrics"]["activations"]["value"].as_f64().unwrap();
        let blocks = c["blocks"].as_array().unwrap();
        assert!(!blocks.is_empty(), "{name} has blocks");
        let mut top = 0.0;
        for b in blocks {
            let retained = b["retained_bytes"].as_f64().unwrap();
            assert!(
                retained <= act * 1.01,
                "{name}: {} retains {retained} of {act}",
                b["name"]
            );
            if !b["name"].as_str().unwrap().contains('.') {
                top += retained;
            }
        }
        assert!(top <= act * 1.01, "{name}: top-level blocks retain {top} of {act}");
    }
    // The checkpointed encoder VSN keeps its output, far less than the plain one keeps.
    let vsn = |c: &str| {
        r["components"][c]["blocks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|b| b["name"] == "encoder_vsn")
            .map(|b| b["retained_bytes"].as_f64().unwrap())
            .unwrap()
    };
    assert!(vsn("tft_ck") < vsn("tft") / 2.0, "{} vs {}", vsn("tft_ck"), vsn("tft"));
}
