//! Block attribution adds up, for every built-in workload (the TFT plain and
//! checkpointed): the top-level blocks plus the report's `(unattributed)`
//! row are the component's activations, the row is never below −1 % of them
//! (a negative row means blocks claim bytes the forward did not keep), and no
//! block retains more than the activations. A checkpointed block retains
//! what it keeps for backward (the inputs its recompute needs and its output
//! leaf), derived here from the shapes; its peak is its largest chunk's, not
//! the sum of its chunks' transients.

use crate::common;

use std::sync::OnceLock;

/// Batch size, encoder length and hidden size of the TFT below.
const B: u64 = 8;
const TE: u64 = 12;
const H: u64 = 8;
const TFT: &str = "{ input_dim: 25, hidden_dim: 8, num_heads: 2, num_layers: 1, sequence_length: 12, prediction_horizon: 3, num_quantiles: 3, num_static_features: 2, num_known_features: 3, num_unknown_features: 20 }";
const WORKLOADS: [&str; 6] = ["mlp", "tft", "tft_ck", "dqn", "ppo", "mamba2"];
/// Measured bytes include candle's metadata per tensor (README, "Probes"):
/// at most 512 B (as tests/it/adopter.rs allows) for each of the three tensors
/// the checkpointed block holds.
const METADATA_SLACK: f64 = 3.0 * 512.0;

/// One `gate check` of every workload, shared by the tests.
fn report() -> &'static serde_json::Value {
    static REPORT: OnceLock<serde_json::Value> = OnceLock::new();
    REPORT.get_or_init(check)
}

fn check() -> serde_json::Value {
    let t = tempfile::tempdir().unwrap();
    let spec = format!(
        "version: 1
device: {{ name: card, capacity: 4 GiB }}
defaults: {{ seed: 3, batch_size: {B} }}
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
    let o = common::gate()
        .args(["check", "--baseline", "none", "--out", out.to_str().unwrap()])
        .current_dir(t.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap()
}

fn block(component: &str, name: &str) -> &'static serde_json::Value {
    report()["components"][component]["blocks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["name"] == name)
        .unwrap_or_else(|| panic!("{component} has no block {name}"))
}

#[test]
fn blocks_and_the_unattributed_row_add_up_to_the_activations() {
    let r = report();
    let mut shares = Vec::new();
    for name in WORKLOADS {
        let c = &r["components"][name];
        let act = c["metrics"]["activations"]["value"].as_i64().unwrap();
        let blocks = c["blocks"].as_array().unwrap();
        let last = blocks.last().unwrap();
        assert_eq!(last["name"], "(unattributed)", "{name}: the row closes the blocks");
        assert!(blocks.len() > 1, "{name} has scoped blocks");
        let unattributed = last["retained_bytes"].as_i64().unwrap();
        let mut top = 0;
        for b in blocks {
            let retained = b["retained_bytes"].as_i64().unwrap();
            assert!(
                retained as f64 <= act as f64 * 1.01,
                "{name}: {} retains {retained} of {act}",
                b["name"]
            );
            if !b["name"].as_str().unwrap().contains('.') {
                top += retained;
            }
        }
        assert_eq!(
            top, act,
            "{name}: top-level blocks and (unattributed) sum to the activations"
        );
        assert!(
            unattributed as f64 >= -0.01 * act as f64,
            "{name}: the blocks claim {} more bytes than the forward kept ({act})",
            -unattributed
        );
        let share = 100.0 * unattributed as f64 / act as f64;
        assert_eq!(
            last["share_percent"].as_f64(),
            Some((share * 10.0).round() / 10.0),
            "{name}"
        );
        shares.push(format!("{name}: {unattributed} of {act} B unattributed ({share:.1} %)"));
    }
    // Shown with --nocapture: how much of each forward no block claims.
    eprintln!("{}", shares.join("\n"));
}

#[test]
fn a_checkpointed_block_retains_what_it_keeps_for_backward() {
    let r = report();
    // The checkpointed encoder VSN keeps, for its recompute, the encoder
    // reals (a view of the batch: no new bytes) and the static selection
    // context broadcast over the encoder steps, [B·Te, H] f32; and its
    // output leaf, [B·Te, H] f32, which the rest of the model runs from.
    // None of its chunks' graphs.
    let keeps = 2.0 * (B * TE * H * 4) as f64;
    let ck = block("tft_ck", "encoder_vsn");
    let retained = ck["retained_bytes"].as_f64().unwrap();
    assert!(
        retained >= keeps && retained <= keeps + METADATA_SLACK,
        "the checkpointed encoder_vsn retains {retained}, keeps {keeps}"
    );
    // Its sub-blocks run chunk by chunk and record nothing (their figures
    // would sum memory never held at once).
    let blocks = r["components"]["tft_ck"]["blocks"].as_array().unwrap();
    assert!(
        !blocks
            .iter()
            .any(|b| b["name"].as_str().unwrap().starts_with("encoder_vsn.")),
        "{blocks:?}"
    );
    // Its peak is one chunk's working memory on top of what it keeps, far
    // below the plain block's graph over all B·Te positions.
    let plain = block("tft", "encoder_vsn");
    assert!(retained < plain["retained_bytes"].as_f64().unwrap() / 2.0);
    let (peak, plain_peak) = (
        ck["peak_bytes"].as_f64().unwrap(),
        plain["peak_bytes"].as_f64().unwrap(),
    );
    assert!(
        peak >= keeps && peak < plain_peak / 2.0,
        "peak {peak} vs the plain block's {plain_peak}"
    );
}
