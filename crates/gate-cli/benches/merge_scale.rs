//! `gate merge` is linear in the number of components (#43 item 5): the
//! built `gate merge` of two `--only` shards of N components, each with
//! 8 blocks and a baseline.json beside it (so blocks are compared), for N
//! from 1k to 100k, with the time per component (flat when linear).
//! Before, JUnit's suites each filtered every result, the budget changes
//! looked every result up in a list, and blocks were compared pairwise:
//! 10k components took 13 s, 20k 64 s, 100k did not end in 300 s.
//!   cargo bench --bench merge_scale             (1k, 10k, 20k, 50k, 100k)
//!   cargo bench --bench merge_scale -- --quick  (1k and 10k)

use std::path::Path;
use std::process::Command;
use std::time::Instant;

const BLOCKS: usize = 8;

fn spec(n: usize) -> String {
    let mut s = String::from("version: 1\ndevice:\n  name: card\n  capacity: 4 GiB\n  reserve: 300 MiB\ncomponents:\n");
    for i in 0..n {
        s.push_str(&format!(
            "  m{i}:\n    workload: mlp\n    batch_size: 4\n    budgets:\n      params: < 1 MiB\n      activations: < 1 MiB\n"
        ));
    }
    s
}

/// A report of components `names` (of `spec`), as `gate check --only` writes it.
fn report(spec: &Path, names: &[String], grown: i64) -> serde_json::Value {
    let components: serde_json::Map<String, serde_json::Value> = names
        .iter()
        .map(|n| {
            let blocks: Vec<serde_json::Value> = (0..BLOCKS)
                .map(|b| {
                    serde_json::json!({"name": format!("block{b}"), "retained_bytes": 1000 + grown * b as i64,
                        "peak_bytes": 2000, "calls": 1, "share_percent": 12.5})
                })
                .collect();
            let c = serde_json::json!({
                "workload": "mlp", "dtype": "f32", "batch_size": 4, "seed": 42, "config": {"input_dim": 8},
                "metrics": {"params": {"value": 1000.0, "unit": "bytes"}, "activations": {"value": 8000.0 + grown as f64, "unit": "bytes"}},
                "param_count": 250, "analytic_params_bytes": 1000, "batch_bytes": 0, "blocks": blocks,
                "step_times_ms": [], "losses": [], "fingerprint": "fp", "error": null
            });
            (n.clone(), c)
        })
        .collect();
    serde_json::json!({
        "schema": 1, "gate_version": "0", "commit": "1111111111111111111111111111111111111111",
        "spec": spec.display().to_string(),
        "testbed": {"backend": "cpu", "device_name": "cpu", "capacity_bytes": 4u64 << 30, "gated_device": "card",
            "device_total_bytes": null, "driver": null, "cuda": null, "os": "linux", "arch": "x86_64"},
        "components": components, "ensemble": null, "results": [],
        "summary": {"status": "pass", "passed": 0, "failed": 0, "regressed": 0, "not_measured": 0, "warnings": [], "strict": false},
        "baseline": null, "wall_seconds": 1.0
    })
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let sizes: &[usize] = if quick {
        &[1_000, 10_000]
    } else {
        &[1_000, 10_000, 20_000, 50_000, 100_000]
    };
    for &n in sizes {
        let t = tempfile::tempdir().unwrap();
        let spec_path = t.path().join("budgets.yaml");
        std::fs::write(&spec_path, spec(n)).unwrap();
        let names: Vec<String> = (0..n).map(|i| format!("m{i}")).collect();
        let (a, b) = names.split_at(n / 2);
        for (dir, part) in [("s1", a), ("s2", b)] {
            let d = t.path().join(dir);
            std::fs::create_dir_all(&d).unwrap();
            let write = |file: &str, v: serde_json::Value| {
                std::fs::write(d.join(file), serde_json::to_vec(&v).unwrap()).unwrap();
            };
            write("report.json", report(&spec_path, part, 10));
            // The baseline holds every component, as the main branch's would.
            write("baseline.json", report(&spec_path, &names, 0));
        }
        let started = Instant::now();
        let o = Command::new(env!("CARGO_BIN_EXE_gate"))
            .args(["merge", "s1", "s2", "--out", "merged"])
            .current_dir(t.path())
            .env("NO_COLOR", "1")
            .env_remove("GITHUB_ACTIONS")
            .env_remove("GITHUB_STEP_SUMMARY")
            .output()
            .unwrap();
        let took = started.elapsed().as_secs_f64();
        assert!(
            matches!(o.status.code(), Some(0 | 1)),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        println!(
            "merge {n:>7} components ({:>7} blocks): {took:8.2} s, {:6.1} us per component",
            n * BLOCKS,
            took * 1e6 / n as f64
        );
    }
}
