//! The gate end to end through the built binary, on the CPU, with the MLP
//! workload (profiles in well under a second).

use crate::common;

use crate::common::text;
use std::path::{Path, PathBuf};
use std::process::Output;

fn gate(args: &[&str], envs: &[(&str, &str)]) -> Output {
    let mut cmd = common::gate();
    cmd.args(args).current_dir(env!("GATE_REPO_ROOT"));
    for (k, v) in envs {
        cmd.env(k, v);
    }
    cmd.output().expect("the gate binary runs")
}

fn report(dir: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap()).unwrap()
}

fn out_dir(t: &tempfile::TempDir) -> PathBuf {
    t.path().join("out")
}

/// A spec with the MLP and the budgets given (YAML lines under `budgets:`).
fn spec_with(t: &tempfile::TempDir, budgets: &str, extra: &str) -> PathBuf {
    let p = t.path().join("budgets.yaml");
    let text = format!(
        "version: 1\ndevice:\n  name: card\n  capacity: 4 GiB\n  reserve: 300 MiB\ndefaults:\n  seed: 7\ncomponents:\n  mlp:\n    workload: mlp\n    batch_size: 64\n    budgets:\n{budgets}{extra}"
    );
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn check_passes_writes_report_and_junit_and_prints_the_table() {
    let t = tempfile::tempdir().unwrap();
    let out = out_dir(&t);
    let o = gate(
        &[
            "check",
            "--budgets",
            "examples/mlp.yaml",
            "--out",
            out.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(0), "stderr: {}", text(&o.stderr));
    let stdout = text(&o.stdout);
    assert!(stdout.contains("mlp        params"), "{stdout}");
    assert!(stdout.contains("PASS: 9 of 9 budgets pass"), "{stdout}");
    assert!(!stdout.contains('\x1b'), "NO_COLOR: no escape codes");
    assert!(text(&o.stderr).contains("report.json"), "logs go to stderr");

    let r = report(&out);
    assert_eq!(r["schema"], 1);
    assert_eq!(r["testbed"]["backend"], "cpu");
    assert_eq!(r["results"].as_array().unwrap().len(), 9);
    assert!(r["results"].as_array().unwrap().iter().all(|x| x["status"] == "pass"));
    assert_eq!(r["results"][0]["line"], 17, "the budget's line in the spec");

    let xml = std::fs::read_to_string(out.join("junit.xml")).unwrap();
    let doc = roxmltree::Document::parse(&xml).unwrap();
    let suites: Vec<_> = doc.descendants().filter(|n| n.has_tag_name("testsuite")).collect();
    let names: Vec<_> = suites.iter().map(|s| s.attribute("name").unwrap()).collect();
    // One suite per component, the ensemble, and the run's (here: its no-baseline warning).
    assert_eq!(names, ["mlp", "ensemble", "gate"]);
    let cases: Vec<_> = doc.descendants().filter(|n| n.has_tag_name("testcase")).collect();
    assert_eq!(cases.len(), 9, "one case per budget, none for the warning");
    let warning = suites[2].children().find(|n| n.has_tag_name("system-err")).unwrap();
    assert!(warning.text().unwrap().starts_with("warning: no baseline ("), "{xml}");
    assert_eq!(doc.descendants().filter(|n| n.has_tag_name("failure")).count(), 0);
    // Real durations: the profile's wall time, and each budget its phase's.
    let time = |n: &roxmltree::Node| n.attribute("time").unwrap().parse::<f64>().unwrap();
    assert!(time(&suites[0]) > 0.0, "{xml}");
    let mlp_cases = suites[0].children().filter(|n| n.has_tag_name("testcase"));
    assert!(
        mlp_cases.clone().count() == 7 && mlp_cases.clone().all(|c| time(&c) > 0.0),
        "{xml}"
    );
    let phases = r["components"]["mlp"]["phase_seconds"].as_array().unwrap();
    let order: Vec<&str> = phases.iter().map(|p| p["phase"].as_str().unwrap()).collect();
    assert_eq!(
        order,
        [
            "setup",
            "warmup",
            "build",
            "batch",
            "forward",
            "backward",
            "optimizer",
            "training_step",
            "timing",
            "inference"
        ]
    );
    assert!(r["components"]["mlp"]["profile_seconds"].as_f64().unwrap() > 0.0);
}

/// Under --strict a warning fails the run, and JUnit says which: one case,
/// `gate.strict`, whose failure names it; the warning itself is no test.
#[test]
fn strict_fails_on_a_warning_and_junit_names_it() {
    let t = tempfile::tempdir().unwrap();
    let out = out_dir(&t);
    let o = gate(
        &[
            "check",
            "--budgets",
            "examples/mlp.yaml",
            "--out",
            out.to_str().unwrap(),
            "--baseline",
            "none",
            "--strict",
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    let xml = std::fs::read_to_string(out.join("junit.xml")).unwrap();
    let doc = roxmltree::Document::parse(&xml).unwrap();
    let failures: Vec<_> = doc.descendants().filter(|n| n.has_tag_name("failure")).collect();
    assert_eq!(failures.len(), 1, "{xml}");
    assert_eq!(failures[0].parent().unwrap().attribute("name"), Some("gate.strict"));
    assert_eq!(
        failures[0].attribute("message"),
        Some("--strict: failed on 1 warning(s): no baseline (--baseline none): regressions are not checked")
    );
    let root = doc.root_element();
    assert_eq!(
        (root.attribute("tests"), root.attribute("failures")),
        (Some("10"), Some("1"))
    );
}

/// `0.4 s` → `N s`: durations change from run to run, the lines do not.
fn without_seconds(log: &str) -> String {
    log.lines()
        .map(|line| {
            let words: Vec<&str> = line.split(' ').collect();
            let kept: Vec<&str> = words
                .iter()
                .enumerate()
                .map(|(i, w)| {
                    let unit = words.get(i + 1).is_some_and(|n| n.trim_end_matches([',', ')']) == "s");
                    if unit && w.parse::<f64>().is_ok() {
                        "N"
                    } else {
                        w
                    }
                })
                .collect();
            kept.join(" ") + "\n"
        })
        .collect()
}

/// Outside a terminal (stderr is a pipe here) a line as each profile and
/// each of its phases starts: a CI log shows where a slow run is.
#[test]
fn outside_a_terminal_each_component_and_phase_logs_its_start() {
    let t = tempfile::tempdir().unwrap();
    let out = out_dir(&t);
    let o = gate(
        &[
            "check",
            "--budgets",
            "examples/mlp.yaml",
            "--out",
            out.to_str().unwrap(),
            "--baseline",
            "none",
            "--jobs",
            "1",
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let log = without_seconds(&text(&o.stderr)).replace(out.to_str().unwrap(), "OUT");
    assert_eq!(
        log,
        "mlp: profile started
mlp: phase warmup
mlp: phase build
mlp: phase batch
mlp: phase forward
mlp: phase backward
mlp: phase optimizer
mlp: phase training_step
mlp: phase timing
mlp: phase inference
mlp: profiled in N s
time: 1 profiles in N s (1 at a time; N s one after another); slowest: mlp N s
wrote OUT/report.json and OUT/junit.xml in N s
"
    );
}

/// The MLP's figures against exact arithmetic: 256→256→256→3 in f32.
#[test]
fn mlp_figures_follow_the_arithmetic_and_repeat_to_the_byte() {
    let params: f64 = ((256 * 256 + 256) * 2 + 256 * 3 + 3) as f64 * 4.0;
    let mut runs = Vec::new();
    for _ in 0..2 {
        let t = tempfile::tempdir().unwrap();
        let out = out_dir(&t);
        let o = gate(
            &[
                "check",
                "--budgets",
                "examples/mlp.yaml",
                "--out",
                out.to_str().unwrap(),
            ],
            &[],
        );
        assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
        runs.push(report(&out)["components"]["mlp"].clone());
    }
    let c = &runs[0];
    let v = |m: &str| c["metrics"][m]["value"].as_f64().unwrap();
    assert_eq!(c["analytic_params_bytes"].as_f64().unwrap(), params);
    assert_eq!(c["param_count"].as_u64().unwrap() as f64 * 4.0, params);
    // Measured bytes = tensor storage + a few hundred bytes of metadata per tensor (6 tensors).
    let meta = 6.0 * 512.0;
    assert!(
        v("params") >= params && v("params") <= params + meta,
        "params {}",
        v("params")
    );
    assert!((v("gradients") - params).abs() <= meta, "gradients {}", v("gradients"));
    // AdamW's two moments of every parameter, to the byte: what the
    // optimizer keeps beside them (its list of the variables, each moment's
    // header) is not its state (#50).
    assert_eq!(v("optimizer"), 2.0 * params, "optimizer");
    // Retained by the forward pass at batch 64: at least the three layer outputs
    // (matmul and bias add each, ReLU for the hidden ones) ...
    let b = 64.0 * 4.0;
    let floor = b * (256.0 * 3.0 * 2.0 + 3.0 * 2.0);
    assert!(
        v("activations") >= floor && v("activations") <= 2.0 * floor,
        "activations {}",
        v("activations")
    );
    assert!(v("training_peak") > v("params") + v("optimizer") + v("gradients"));
    assert!(v("inference_peak") < v("training_peak") / 2.0);
    // The same seed gives the same bytes and the same loss.
    for m in [
        "params",
        "activations",
        "gradients",
        "optimizer",
        "training_peak",
        "inference_peak",
        "loss",
    ] {
        assert_eq!(
            runs[0]["metrics"][m]["value"], runs[1]["metrics"][m]["value"],
            "{m} repeats"
        );
    }
    let losses = c["losses"].as_array().unwrap();
    assert!(
        losses.last().unwrap().as_f64().unwrap() < losses[0].as_f64().unwrap(),
        "the loss falls"
    );
}

#[test]
fn an_exceeded_budget_exits_1_with_the_ratio_in_junit() {
    let t = tempfile::tempdir().unwrap();
    let spec = spec_with(&t, "      params: < 100 KiB\n      gradients: < 10 MiB\n", "");
    let out = out_dir(&t);
    let o = gate(
        &[
            "check",
            "--budgets",
            spec.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    let xml = std::fs::read_to_string(out.join("junit.xml")).unwrap();
    let doc = roxmltree::Document::parse(&xml).unwrap();
    let failure = doc.descendants().find(|n| n.has_tag_name("failure")).unwrap();
    let msg = failure.attribute("message").unwrap();
    // In the unit the budget was written in.
    assert!(msg.starts_with("519.2 KiB > 100 KiB budget (5.2x)"), "{msg}");
    assert!(text(&o.stdout).contains("FAIL: 1 of 2 budgets pass, 1 fail"));
}

#[test]
fn only_runs_a_subset_and_rejects_unknown_names() {
    let o = gate(&["check", "--only", "nope"], &[]);
    assert_eq!(o.status.code(), Some(2));
    let e = text(&o.stderr);
    assert!(e.contains("error: --only names `nope`"), "{e}");
    assert!(e.contains("hint: components: tft, dqn, ppo, mamba2"), "{e}");

    let t = tempfile::tempdir().unwrap();
    let out = out_dir(&t);
    let o = gate(
        &[
            "check",
            "--budgets",
            "examples/mlp.yaml",
            "--only",
            "mlp",
            "--out",
            out.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(0));
    assert!(out.join("report.json").exists() && out.join("junit.xml").exists());
}

#[test]
fn validate_accepts_good_specs_and_rejects_bad_ones_with_position_and_hint() {
    let o = gate(&["validate", "--budgets", "examples/mlp.yaml"], &[]);
    assert_eq!(o.status.code(), Some(0));
    assert!(text(&o.stdout).contains("examples/mlp.yaml: ok"));

    let t = tempfile::tempdir().unwrap();
    let spec = spec_with(&t, "      params: 300\n", "");
    let o = gate(&["validate", "--budgets", spec.to_str().unwrap()], &[]);
    assert_eq!(o.status.code(), Some(2));
    let e = text(&o.stderr);
    assert!(
        e.contains("budgets.yaml:13:15: error: budget for `mlp.params` has no comparison: `300`"),
        "{e}"
    );
    assert!(e.contains("\n  hint: "), "{e}");

    let o = gate(&["validate", "--budgets", "missing.yaml"], &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("hint: pass the spec with `--budgets FILE`"));
}

/// `device_used` is read from the CUDA device: `check` on the CPU refuses
/// it before measuring anything; `validate` warns, or refuses with
/// `--backend cpu`.
#[test]
fn device_used_on_the_cpu_is_refused_before_anything_runs() {
    let t = tempfile::tempdir().unwrap();
    let p = t.path().join("budgets.yaml");
    std::fs::write(
        &p,
        "version: 1\ndevice: { name: card, capacity: 4 GiB }\ncomponents:\n  future:\n    workload: mlp\n    budgets:\n      device_used: < 1 GiB\n",
    )
    .unwrap();
    let spec = p.to_str().unwrap();
    let error = format!(
        "{spec}:7:7: error: `device_used` on component `future` can never be measured on the CPU: it is read from the CUDA device
  hint: run on a GPU (`--backend cuda`), or budget `training_peak`, which every backend measures
error: the spec has 1 error
"
    );
    let out = out_dir(&t);
    let o = gate(&["check", "--budgets", spec, "--out", out.to_str().unwrap()], &[]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(text(&o.stderr), error);
    assert!(!out.exists(), "nothing ran, nothing written");

    let o = gate(&["validate", "--budgets", spec, "--backend", "cpu"], &[]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(text(&o.stderr), error);

    let o = gate(&["validate", "--budgets", spec], &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert_eq!(
        text(&o.stderr),
        format!(
            "{spec}:7:7: warning: `device_used` on component `future` is measured on CUDA only: a run on the CPU refuses this spec
  hint: pass `--backend cuda` (or `--backend cpu`) to check the spec for the backend that will run it
"
        )
    );
    assert_eq!(text(&o.stdout), format!("{spec}: ok — 1 component, 1 budget\n"));

    let o = gate(&["validate", "--budgets", spec, "--backend", "cuda"], &[]);
    assert_eq!((o.status.code(), text(&o.stderr)), (Some(0), String::new()));
}

/// A component's variants are counted as variants, not as more components.
#[test]
fn validate_counts_variants_apart_from_components() {
    let o = gate(&["validate"], &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert_eq!(
        text(&o.stdout),
        "budgets.yaml: ok — 4 components and 1 variant, 13 budgets\n"
    );
}

#[test]
fn a_crash_in_a_component_is_a_failed_measurement_and_outputs_are_still_written() {
    // A crash (SIGABRT with no allocator's out-of-memory) gives no figure
    // to judge the model by: the infrastructure's, exit 3, outputs written.
    for (kind, needle, code) in [
        ("panic", "injected panic in phase forward", 1),
        ("abort", "the profile crashed: killed by SIGABRT", 3),
        ("oom", "out of memory", 1),
    ] {
        let t = tempfile::tempdir().unwrap();
        let out = out_dir(&t);
        let fault = "forward:".to_string() + kind;
        let o = gate(
            &[
                "check",
                "--budgets",
                "examples/mlp.yaml",
                "--out",
                out.to_str().unwrap(),
            ],
            &[("GATE_INJECT_FAULT", &fault)],
        );
        assert_eq!(o.status.code(), Some(code), "{kind}: {}", text(&o.stderr));
        let r = report(&out);
        let c = &r["components"]["mlp"];
        assert_eq!(c["error"]["kind"], "failed");
        assert_eq!(c["error"]["phase"], "forward");
        assert!(
            c["error"]["reason"].as_str().unwrap().contains(needle),
            "{kind}: {}",
            c["error"]["reason"]
        );
        // Figures measured before the crash survive it.
        assert!(c["metrics"]["params"]["value"].as_u64().unwrap() > 0);
        assert!(out.join("junit.xml").exists());
    }
}

#[test]
fn cuda_backend_without_the_feature_is_an_infrastructure_error() {
    let o = gate(&["check", "--budgets", "examples/mlp.yaml", "--backend", "cuda"], &[]);
    if cfg!(feature = "cuda") {
        return;
    }
    assert_eq!(o.status.code(), Some(3));
    assert!(text(&o.stderr).contains("hint: build with"));
}

#[test]
fn bad_arguments_exit_2() {
    let o = gate(&["check", "--no-such-flag"], &[]);
    assert_eq!(o.status.code(), Some(2));
}

/// Across processes the counting allocator repeats to the byte, for a model
/// with dropout, LSTMs and attention too (a small TFT).
#[test]
fn a_small_tft_repeats_to_the_byte_across_runs() {
    let t = tempfile::tempdir().unwrap();
    let p = t.path().join("budgets.yaml");
    std::fs::write(
        &p,
        "version: 1\ndevice: { name: card, capacity: 4 GiB }\ncomponents:\n  tft:\n    workload: tft\n    batch_size: 4\n    config: { input_dim: 25, hidden_dim: 8, num_heads: 2, num_layers: 1, sequence_length: 12, prediction_horizon: 3, num_quantiles: 3, num_static_features: 2, num_known_features: 3, num_unknown_features: 20 }\n    budgets: { training_peak: < 1 GiB }\n",
    )
    .unwrap();
    let mut runs = Vec::new();
    for i in 0..2 {
        let out = t.path().join(format!("out{i}"));
        let o = gate(
            &[
                "check",
                "--budgets",
                p.to_str().unwrap(),
                "--out",
                out.to_str().unwrap(),
            ],
            &[],
        );
        assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
        runs.push(report(&out)["components"]["tft"].clone());
    }
    for m in [
        "params",
        "activations",
        "gradients",
        "optimizer",
        "training_peak",
        "inference_peak",
        "loss",
    ] {
        assert_eq!(
            runs[0]["metrics"][m]["value"], runs[1]["metrics"][m]["value"],
            "{m} repeats"
        );
    }
    assert_eq!(runs[0]["blocks"], runs[1]["blocks"]);
}

#[test]
fn validate_reports_spec_and_config_errors_in_one_go() {
    let t = tempfile::tempdir().unwrap();
    let p = t.path().join("budgets.yaml");
    std::fs::write(
        &p,
        "version: 1\ndevice: { name: card, capacity: 4 GiB }\ncomponents:\n  m:\n    workload: mlp\n    config: { hiden_dim: 8 }\n    budgets: { activation: < 1 MiB }\n",
    )
    .unwrap();
    let o = gate(&["validate", "--budgets", p.to_str().unwrap()], &[]);
    let e = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(e.contains(":6:") && e.contains("unknown config key `hiden_dim`"), "{e}");
    assert!(e.contains(":7:") && e.contains("unknown metric `activation`"), "{e}");
    assert!(e.contains("the spec has 2 errors"), "{e}");
}

/// #28 item 16: a built-in's dimension no machine can allocate is a spec
/// error at its key, with a hint, from `gate validate`; before, `input_dim:
/// 2^41` passed validation and failed when the model was built.
#[test]
fn built_in_dimensions_past_what_can_be_allocated_are_spec_errors_at_their_key() {
    let t = tempfile::tempdir().unwrap();
    let spec = t.path().join("budgets.yaml");
    let big = 1u64 << 41;
    let components: Vec<(&str, String)> = vec![
        ("mlp", format!("input_dim: {big}")),
        ("dqn", format!("hidden_layers: {big}")),
        ("ppo", format!("rollout_steps: {big}, minibatch: 8")),
        ("mamba2", format!("seq_len: {big}")),
        ("tft", format!("num_layers: {big}")),
        // Past a 64-bit count: refused the same way, never an overflow.
        ("mlp", format!("input_dim: {}, hidden_dim: {}", u64::MAX, u64::MAX)),
    ];
    let mut yaml = String::from("version: 1\ndevice: { name: card, capacity: 4 GiB }\ncomponents:\n");
    for (i, (kind, config)) in components.iter().enumerate() {
        yaml.push_str(&format!(
            "  c{i}:\n    workload: {kind}\n    config: {{ {config} }}\n    budgets:\n      params: < 1 MiB\n"
        ));
    }
    std::fs::write(&spec, &yaml).unwrap();
    let o = gate(&["validate", "--budgets", spec.to_str().unwrap()], &[]);
    let stderr = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    let at = |line: usize, key: &str| {
        let col = yaml.lines().nth(line - 1).unwrap().find(key).unwrap() + 1;
        format!("{}:{line}:{col}: error: ", spec.display())
    };
    let expected = [
        (6, "input_dim", "`input_dim` (2199023255552) × `hidden_dim` (256) is too large to allocate: the first layer's weights would take 4.0 PiB at 8 bytes an element, and gate allows 1.0 TiB (component `c0`)\n  hint: lower `input_dim` (now 2199023255552): the first layer's weights must fit in 1.0 TiB"),
        (11, "hidden_layers", "`hidden_layers` (2199023255552) × `hidden_dim` (256) × `hidden_dim` (256) is too large to allocate"),
        (16, "rollout_steps", "`rollout_steps` (2199023255552) × `num_envs` (8) × `obs_dim` (256) is too large to allocate: the rollout's observations"),
        (21, "seq_len", "`seq_len` (2199023255552) × `d_inner` (256) is too large to allocate: a sequence's inner activations"),
        (26, "num_layers", "`num_layers` (2199023255552) × `hidden_dim` (64) × `hidden_dim` (64) is too large to allocate: the layers' weights"),
        (31, "input_dim", "`input_dim` (18446744073709551615) × `hidden_dim` (18446744073709551615) is too large to allocate: the first layer's weights would take more than 16.0 EiB"),
    ];
    for (line, key, message) in expected {
        let want = format!("{}{message}", at(line, key));
        assert!(stderr.contains(&want), "missing:\n{want}\nin:\n{stderr}");
    }
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// A run that writes no outputs (here a spec error) removes the previous
/// run's, so CI never uploads or comments them as this run's; other files
/// in the folder stay.
#[test]
fn a_run_that_writes_nothing_leaves_no_previous_outputs_behind() {
    let t = tempfile::tempdir().unwrap();
    let out = out_dir(&t);
    std::fs::create_dir_all(&out).unwrap();
    for f in [
        "report.json",
        "junit.xml",
        "comment.md",
        "timeline-mlp.svg",
        "notes.txt",
    ] {
        std::fs::write(out.join(f), "from the run before").unwrap();
    }
    let spec = spec_with(&t, "      activations: < 200\n", "");
    let o = gate(
        &[
            "check",
            "--budgets",
            spec.to_str().unwrap(),
            "--baseline",
            "none",
            "--out",
            out.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    assert_eq!(
        text(&o.stderr),
        format!(
            "note: removed the previous run's outputs from {out} (comment.md, junit.xml, report.json, timeline-mlp.svg): this run wrote none
{spec}:13:20: error: budget for `mlp.activations`: size `200` has no unit
  hint: write a number and a unit: B, KB, MB, GB (powers of 1000) or KiB, MiB, GiB (powers of 1024), e.g. `300 MB`
error: the spec has 1 error
",
            out = out.display(),
            spec = spec.display()
        )
    );
    let mut left: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    left.sort();
    assert_eq!(left, ["notes.txt"]);
}

/// Three MLP components (one failing its `params` budget) and an ensemble
/// over all three: what a shard cannot judge on its own.
fn sharded_spec(t: &tempfile::TempDir) -> PathBuf {
    let p = t.path().join("budgets.yaml");
    let component = |name: &str, batch: u32, params: &str| {
        format!(
            "  {name}:\n    workload: mlp\n    batch_size: {batch}\n    budgets:\n      params: {params}\n      training_peak: < 64 MiB\n"
        )
    };
    let text = format!(
        "version: 1\ndevice:\n  name: card\n  capacity: 4 GiB\n  reserve: 300 MiB\ndefaults:\n  seed: 7\ncomponents:\n{}{}{}\
         ensemble:\n  members: [alpha, bravo, charlie]\n  metric: training_peak\n  budgets:\n    total: < 1 GiB\n",
        component("charlie", 16, "< 1 KiB"),
        component("alpha", 64, "< 1 MiB"),
        component("bravo", 32, "< 1 MiB"),
    );
    std::fs::write(&p, text).unwrap();
    p
}

/// (component, metric, status) of every result, in order.
fn verdicts(r: &serde_json::Value) -> Vec<(String, String, String)> {
    r["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| {
            let s = |k: &str| x[k].as_str().unwrap_or_default().to_string();
            (s("component"), s("metric"), s("status"))
        })
        .collect()
}

#[test]
fn shards_split_the_components_and_their_merge_decides_as_one_run() {
    let t = tempfile::tempdir().unwrap();
    let spec = sharded_spec(&t);
    let spec = spec.to_str().unwrap();
    let dir = |n: &str| t.path().join(n);
    let check = |out: &Path, extra: &[&str]| {
        let mut args = vec![
            "check",
            "--budgets",
            spec,
            "--baseline",
            "none",
            "--out",
            out.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        gate(&args, &[])
    };
    let whole = check(&dir("whole"), &[]);
    assert_eq!(whole.status.code(), Some(1), "{}", text(&whole.stderr));
    let s1 = check(&dir("s1"), &["--shard", "1/2"]);
    let s2 = check(&dir("s2"), &["--shard", "2/2"]);
    // Sorted (alpha, bravo, charlie) and dealt: 1/2 holds alpha and charlie, 2/2 bravo.
    let held = |d: &str| -> Vec<String> {
        let r = report(&dir(d));
        r["components"].as_object().unwrap().keys().cloned().collect()
    };
    assert_eq!(held("s1"), ["alpha", "charlie"]);
    assert_eq!(held("s2"), ["bravo"]);
    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir("s1").join("shard.json")).unwrap()).unwrap();
    assert_eq!(
        record,
        serde_json::json!({"index": 1, "count": 2, "components": ["alpha", "charlie"], "dealt_by": "name"})
    );
    // Each shard judges its own components; the ensemble needs all three.
    assert_eq!(s1.status.code(), Some(1), "charlie fails: {}", text(&s1.stderr));
    assert_eq!(s2.status.code(), Some(0), "{}", text(&s2.stderr));
    assert!(text(&s2.stderr).contains("shard 2/2: bravo"), "{}", text(&s2.stderr));
    assert!(
        text(&s2.stderr).contains("the ensemble's members alpha, charlie are in other shards"),
        "{}",
        text(&s2.stderr)
    );
    let ens = |d: &str| {
        verdicts(&report(&dir(d)))
            .into_iter()
            .find(|v| v.0 == "ensemble")
            .unwrap()
            .2
    };
    assert_eq!(ens("s2"), "not_measured");
    assert_eq!(ens("whole"), "pass");

    // Merged, the shards decide as the unsharded run did, row for row.
    let merged = dir("merged");
    let m = gate(
        &[
            "merge",
            dir("s2").to_str().unwrap(),
            dir("s1").to_str().unwrap(),
            "--out",
            merged.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(m.status.code(), whole.status.code(), "{}", text(&m.stderr));
    let (mr, wr) = (report(&merged), report(&dir("whole")));
    assert_eq!(verdicts(&mr), verdicts(&wr));
    assert_eq!(mr["summary"]["status"], wr["summary"]["status"]);
    assert_eq!(mr["ensemble"]["total_bytes"], wr["ensemble"]["total_bytes"]);
    assert!(!merged.join("shard.json").exists(), "a merged folder is not a shard");

    // A shard missing is refused (exit 3), not merged into "not measured".
    let m = gate(
        &["merge", dir("s1").to_str().unwrap(), "--out", merged.to_str().unwrap()],
        &[],
    );
    assert_eq!(m.status.code(), Some(3), "{}", text(&m.stderr));
    assert!(text(&m.stderr).contains("shard 2/2 missing"), "{}", text(&m.stderr));
    assert!(text(&m.stderr).contains("hint: "), "{}", text(&m.stderr));
    // The same shard twice, or a sharded folder with an unsharded one: bad input.
    for other in ["s1", "whole"] {
        let m = gate(
            &[
                "merge",
                dir("s1").to_str().unwrap(),
                dir(other).to_str().unwrap(),
                "--out",
                merged.to_str().unwrap(),
            ],
            &[],
        );
        assert_eq!(m.status.code(), Some(2), "{other}: {}", text(&m.stderr));
    }

    // An unsharded run into a shard's folder leaves no stale shard.json.
    let again = check(&dir("s1"), &[]);
    assert_eq!(again.status.code(), Some(1), "{}", text(&again.stderr));
    assert!(!dir("s1").join("shard.json").exists());
}

/// With a baseline, shards are dealt by its profile times, not round-robin
/// by name; shard.json records the costs, and `gate merge` refuses shards
/// dealt from different baselines when a component fell to two of them.
#[test]
fn shards_are_dealt_by_the_baselines_profile_times() {
    let t = tempfile::tempdir().unwrap();
    let spec = sharded_spec(&t);
    let spec = spec.to_str().unwrap();
    let dir = |n: &str| t.path().join(n);
    let check = |out: &str, baseline: &str, extra: &[&str]| {
        let out = dir(out);
        let mut args = vec![
            "check",
            "--budgets",
            spec,
            "--baseline",
            baseline,
            "--out",
            out.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        gate(&args, &[])
    };
    let whole = check("whole", "none", &[]);
    assert_eq!(whole.status.code(), Some(1), "{}", text(&whole.stderr));
    // The run's own report as the baseline, its times set so that
    // round-robin by name (alpha and charlie, then bravo) would give one
    // shard 55 s and the other 5 s. Alpha's wait for a turn is not its cost.
    let baseline = |name: &str, times: &[(&str, f64, f64)]| {
        let mut r = report(&dir("whole"));
        for (c, seconds, waited) in times {
            r["components"][c]["profile_seconds"] = serde_json::json!(seconds);
            r["components"][c]["turn_wait_seconds"] = serde_json::json!(waited);
        }
        let p = dir(name);
        std::fs::write(&p, serde_json::to_string_pretty(&r).unwrap()).unwrap();
        p.to_str().unwrap().to_string()
    };
    let b = baseline(
        "baseline.json",
        &[("alpha", 40.0, 10.0), ("bravo", 5.0, 0.0), ("charlie", 25.0, 0.0)],
    );
    let s1 = check("s1", &b, &["--shard", "1/2"]);
    let s2 = check("s2", &b, &["--shard", "2/2"]);
    let held = |d: &str| -> Vec<String> {
        let r = report(&dir(d));
        r["components"].as_object().unwrap().keys().cloned().collect()
    };
    // Longest first: alpha (30 s) to shard 1, charlie (25 s) to shard 2,
    // bravo (5 s) to the lesser, shard 2: 30 s each.
    assert_eq!(held("s1"), ["alpha"], "{}", text(&s1.stderr));
    assert_eq!(held("s2"), ["bravo", "charlie"], "{}", text(&s2.stderr));
    let record = |d: &str| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(dir(d).join("shard.json")).unwrap()).unwrap()
    };
    assert_eq!(
        record("s1"),
        serde_json::json!({"index": 1, "count": 2, "components": ["alpha"], "dealt_by": "baseline",
                           "costs": {"alpha": 30.0, "bravo": 5.0, "charlie": 25.0}})
    );
    assert!(
        text(&s2.stderr).contains(
            "shard 2/2: bravo, charlie\n\
             shard 2/2: dealt by the baseline's profile times: 30.0 s here, 30.0 s the longest shard, 60.0 s in all\n"
        ),
        "{}",
        text(&s2.stderr)
    );
    let merge = |dirs: &[&str]| {
        let merged = dir("merged");
        let mut args = vec!["merge".to_string()];
        args.extend(dirs.iter().map(|d| dir(d).display().to_string()));
        args.extend(["--out".to_string(), merged.display().to_string()]);
        gate(&args.iter().map(String::as_str).collect::<Vec<_>>(), &[])
    };
    let m = merge(&["s1", "s2"]);
    assert_eq!(m.status.code(), whole.status.code(), "{}", text(&m.stderr));
    assert_eq!(verdicts(&report(&dir("merged"))), verdicts(&report(&dir("whole"))));
    assert!(!text(&m.stderr).contains("dealt from different"), "{}", text(&m.stderr));

    // Without a baseline, shard 1 is dealt by name (alpha, charlie): with
    // the baseline's shard 2, charlie is in both, and the merge says why.
    let n1 = check("n1", "none", &["--shard", "1/2"]);
    assert_eq!(held("n1"), ["alpha", "charlie"], "{}", text(&n1.stderr));
    assert_eq!(record("n1")["dealt_by"], "name");
    let m = merge(&["n1", "s2"]);
    assert_eq!(m.status.code(), Some(2), "{}", text(&m.stderr));
    let said = text(&m.stderr);
    assert!(
        said.contains(&format!(
            "error: shards dealt from different inputs: {} was dealt by the baseline's profile times, {} by name \
             (no baseline times); `charlie` fell to both {} and {}",
            dir("s2").display(),
            dir("n1").display(),
            dir("n1").display(),
            dir("s2").display()
        )),
        "{said}"
    );
    assert!(
        said.contains("hint: give every shard of the matrix the same baseline"),
        "{said}"
    );

    // Another baseline that deals the same split: merged, with a warning.
    let other = baseline(
        "other.json",
        &[("alpha", 30.0, 0.0), ("bravo", 5.0, 0.0), ("charlie", 20.0, 0.0)],
    );
    let o2 = check("o2", &other, &["--shard", "2/2"]);
    assert_eq!(held("o2"), ["bravo", "charlie"], "{}", text(&o2.stderr));
    let m = merge(&["s1", "o2"]);
    assert_eq!(m.status.code(), whole.status.code(), "{}", text(&m.stderr));
    assert!(
        text(&m.stderr).contains(&format!(
            "warning: shards dealt from different inputs: {} was dealt with `charlie` at 20.000 s, {} with it at \
             25.000 s; no component fell to two shards",
            dir("o2").display(),
            dir("s1").display()
        )),
        "{}",
        text(&m.stderr)
    );
}

#[test]
fn a_bad_shard_is_bad_input_with_a_hint() {
    for bad in ["0/2", "3/2", "1/0", "2", "x/y", "1/2/3"] {
        let o = gate(
            &["check", "--budgets", "examples/mlp.yaml", &format!("--shard={bad}")],
            &[],
        );
        assert_eq!(o.status.code(), Some(2), "{bad}: {}", text(&o.stderr));
        let err = text(&o.stderr);
        assert!(err.contains(&format!("--shard {bad}")), "{err}");
        assert!(err.contains("hint: write --shard I/N with 1 <= I <= N"), "{err}");
    }
}

#[test]
fn more_shards_than_components_leaves_a_shard_empty_not_broken() {
    let t = tempfile::tempdir().unwrap();
    let out = out_dir(&t);
    let o = gate(
        &[
            "check",
            "--budgets",
            "examples/mlp.yaml",
            "--baseline",
            "none",
            "--shard",
            "2/2",
            "--out",
            out.to_str().unwrap(),
        ],
        &[],
    );
    // The MLP is shard 1's; shard 2 measures nothing and says so; the
    // ensemble is left to the merge.
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("no component falls to this shard"),
        "{}",
        text(&o.stderr)
    );
    assert!(report(&out)["components"].as_object().unwrap().is_empty());
}
