//! The RL and state-space members end to end through the built binary, on
//! tiny configs (the full ones run in `gate check` on budgets.yaml), and
//! their sum into the ensemble: total = Σ members' training peak + reserve,
//! headroom = capacity − total, each with its own budget and JUnit suite.

use crate::common;

use crate::common::text;
use std::path::Path;
use std::process::Output;

fn gate(args: &[&str]) -> Output {
    common::gate()
        .args(args)
        .current_dir(env!("GATE_REPO_ROOT"))
        .output()
        .expect("the gate binary runs")
}

const TINY_SPEC: &str = "\
version: 1
device:
  name: card
  capacity: 4 GiB
  reserve: 300 MiB
defaults:
  seed: 7
  timing: { warmup: 0, steps: 1 }
components:
  dqn:
    workload: dqn
    batch_size: 16
    config: { state_dim: 32, hidden_dim: 32, target_sync: 2 }
    budgets:
      training_peak: < 64 MiB
  ppo:
    workload: ppo
    config: { obs_dim: 16, hidden_dim: 32, rollout_steps: 32, num_envs: 4, minibatch: 64 }
    budgets:
      training_peak: < 64 MiB
  mamba2:
    workload: mamba2
    batch_size: 2
    config: { input_dim: 16, d_model: 16, d_inner: 32, d_state: 8, head_dim: 8, chunk_size: 4, seq_len: 10 }
    budgets:
      training_peak: < 64 MiB
ensemble:
  members: [dqn, ppo, mamba2]
  metric: training_peak
  budgets:
    total: < 1 GiB
    headroom: \"> 3 GiB\"
";

/// (trainable, frozen) parameter elements of TINY_SPEC's members, in closed form.
fn tiny_counts() -> [(&'static str, u64, u64); 3] {
    let mlp = |d: &[u64]| d.windows(2).map(|w| w[0] * w[1] + w[1]).sum::<u64>();
    let dqn = mlp(&[32, 32, 32, 3]);
    let ppo = mlp(&[16, 32, 32, 3]) + mlp(&[16, 32, 32, 1]);
    // D=16, E=32, N=8, H=4, K=4: per layer D(2E+2N+H) + (E+2N)(K+1) + 3H + E + D·E + D.
    let layer = 16 * (64 + 16 + 4) + 48 * 5 + 12 + 32 + 16 * 32 + 16;
    let mamba = (16 * 16 + 16) + 2 * layer + 16 + (16 + 1);
    [("dqn", dqn, dqn), ("ppo", ppo, 0), ("mamba2", mamba, 0)]
}

#[test]
fn members_are_measured_and_summed_into_the_ensemble() {
    let t = tempfile::tempdir().unwrap();
    let spec = t.path().join("budgets.yaml");
    std::fs::write(&spec, TINY_SPEC).unwrap();
    let out = t.path().join("out");
    let o = gate(&[
        "check",
        "--budgets",
        spec.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "stdout: {}\nstderr: {}",
        text(&o.stdout),
        text(&o.stderr)
    );
    let stdout = text(&o.stdout);
    assert!(stdout.contains("total") && stdout.contains("headroom"), "{stdout}");

    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    let mut sum = 0u64;
    for (name, trainable, frozen) in tiny_counts() {
        let c = &r["components"][name];
        assert!(c["error"].is_null(), "{name}: {}", c["error"]);
        let v = |m: &str| {
            c["metrics"][m]["value"]
                .as_f64()
                .unwrap_or_else(|| panic!("{name} {m}"))
        };
        assert_eq!(
            c["analytic_params_bytes"].as_f64().unwrap(),
            ((trainable + frozen) * 4) as f64,
            "{name}: closed-form parameter bytes"
        );
        assert!(v("params") >= ((trainable + frozen) * 4) as f64, "{name} params");
        assert!(v("training_peak") > v("params") + v("optimizer"), "{name} peak");
        let losses: Vec<f64> = c["losses"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l.as_f64().unwrap())
            .collect();
        assert!(
            losses.last().unwrap() < &losses[0],
            "{name}: the loss falls: {losses:?}"
        );
        sum += v("training_peak") as u64;
    }
    let blocks = |name: &str| -> Vec<String> {
        r["components"][name]["blocks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b["name"].as_str().unwrap().to_string())
            .collect()
    };
    for (name, want) in [
        ("dqn", &["online", "target", "loss"][..]),
        ("ppo", &["gae", "minibatch", "actor", "critic", "loss"][..]),
        (
            "mamba2",
            &[
                "embed",
                "layer0.in_proj",
                "layer0.conv",
                "layer0.ssd",
                "layer0.gated_norm",
                "layer1.out_proj",
                "head",
            ][..],
        ),
    ] {
        let got = blocks(name);
        for w in want {
            assert!(got.iter().any(|g| g == w), "{name}: no block `{w}` in {got:?}");
        }
    }

    let e = &r["ensemble"];
    let reserve = e["reserve_bytes"].as_u64().unwrap() * e["processes"].as_u64().unwrap();
    let total = e["total_bytes"].as_u64().unwrap();
    assert_eq!(total, sum + reserve, "total = Σ training_peak + reserve");
    assert_eq!(
        e["headroom_bytes"].as_i64().unwrap(),
        e["capacity_bytes"].as_i64().unwrap() - total as i64
    );
    let ensemble_results: Vec<&serde_json::Value> = r["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|x| x["component"] == "ensemble")
        .collect();
    let metrics: Vec<&str> = ensemble_results.iter().map(|x| x["metric"].as_str().unwrap()).collect();
    assert_eq!(metrics, ["total", "headroom"]);
    assert!(ensemble_results.iter().all(|x| x["status"] == "pass"));

    let xml = std::fs::read_to_string(out.join("junit.xml")).unwrap();
    let doc = roxmltree::Document::parse(&xml).unwrap();
    let suites: Vec<&str> = doc
        .descendants()
        .filter(|n| n.has_tag_name("testsuite"))
        .map(|s| s.attribute("name").unwrap())
        .collect();
    // One suite per component (in name order), the ensemble's own, then the run's (its warnings).
    assert_eq!(suites, ["dqn", "mamba2", "ppo", "ensemble", "gate"]);
    let ensemble = doc
        .descendants()
        .find(|n| n.has_tag_name("testsuite") && n.attribute("name") == Some("ensemble"))
        .unwrap();
    assert_eq!(ensemble.children().filter(|n| n.has_tag_name("testcase")).count(), 2);
}

#[test]
fn the_repository_spec_gates_all_four_members() {
    let spec = gate_spec::budget::load(Path::new(concat!(env!("GATE_REPO_ROOT"), "/budgets.yaml")))
        .expect("budgets.yaml is valid");
    let workloads =
        gate::test_support::runner::resolve(&spec, &gate_builtins::registry()).expect("every workload resolves");
    for name in ["dqn", "ppo", "mamba2"] {
        let c = spec.component(name).unwrap_or_else(|| panic!("no component `{name}`"));
        assert!(workloads.get(name).is_some(), "`{name}` runs in this build");
        assert!(
            c.budgets
                .iter()
                .any(|b| b.metric == gate_spec::metric::Metric::TrainingPeak),
            "`{name}` has a training_peak budget"
        );
    }
    assert!(spec.component("tft").is_some());
    let e = spec.ensemble.expect("an ensemble");
    assert_eq!(e.members, ["tft", "dqn", "ppo", "mamba2"]);
    let gated: Vec<&str> = e.budgets.iter().map(|b| b.metric.name()).collect();
    assert_eq!(gated, ["total", "headroom"]);
}

/// A card of 2^63 bytes and the most processes a spec allows: the sum and
/// the headroom are figures, not an overflow (a review found a panic
/// here); the headroom is the capacity less the total.
#[test]
fn an_ensemble_on_the_largest_card_and_the_most_processes_is_summed_without_overflow() {
    let t = tempfile::tempdir().unwrap();
    let spec = t.path().join("budgets.yaml");
    std::fs::write(
        &spec,
        "version: 1\ndevice: { name: big, capacity: 8589934592 GiB, reserve: 1 GiB }\n\
         defaults: { timing: { warmup: 0, steps: 1 } }\ncomponents:\n  mlp:\n    workload: mlp\n    \
         config: { input_dim: 8, hidden_dim: 8, hidden_layers: 1, output_dim: 2 }\n    budgets: { params: < 1 MiB }\n\
         ensemble: { members: [mlp], processes: 65536, budgets: { headroom: \"> 1 MiB\" } }\n",
    )
    .unwrap();
    let out = t.path().join("out");
    let o = gate(&[
        "check",
        "--baseline",
        "none",
        "--budgets",
        spec.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    let e = &report["ensemble"];
    let total = e["total_bytes"].as_u64().unwrap();
    assert_eq!(e["reserve_bytes"].as_u64(), Some(65536u64 << 30), "{e}");
    assert_eq!(e["headroom_bytes"].as_i64(), Some(((1u64 << 63) - total) as i64), "{e}");
}
