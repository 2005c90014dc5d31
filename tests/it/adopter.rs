//! gate pointed at a crate it has never seen: `examples/adopter/` copied
//! under `target/fixture-copies/` as an outside workspace (its path
//! dependency pointed at this checkout), gated by the stock `gate` binary
//! through the spec's
//! `harness:`. The harness is built with cargo, release, into this
//! checkout's `target/` (so the second test onwards reuses the first's
//! dependencies, and a local `cargo build --release` has already built them).

use crate::common;

use crate::common::text;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Mutex;

/// One adopter test at a time, from its copy to its last command. The
/// copy's own lock would already serialise the tests that share it; this
/// also keeps the two that build crates in fresh folders from sharing the
/// cores with a test that times a recompute (`step_time_ratio > 1.0`).
static BUILD: Mutex<()> = Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    BUILD.lock().unwrap_or_else(|e| e.into_inner())
}

fn root() -> &'static Path {
    Path::new(env!("GATE_REPO_ROOT"))
}

/// Whether `test` can run: the example's crates can be had (crates.io, or
/// cargo's cache). Asked once per run; each test that cannot run says so.
fn ready(test: &str) -> bool {
    static WHY_NOT: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    let why = WHY_NOT.get_or_init(|| common::crates_unavailable(&root().join("examples/adopter/Cargo.toml")));
    common::available(test, why.clone())
}

/// The example's copy (`common::crate_copy`), depending on this checkout.
fn adopter() -> common::CrateCopy {
    common::crate_copy(
        &root().join("examples/adopter"),
        "examples-adopter",
        common::sdk_path_here("crates/ml/Cargo.toml", "../../../../crates/gate-sdk"),
    )
}

/// The stock gate, run in the adopter's folder as a user would.
fn gate(dir: &Path, args: &[&str]) -> Output {
    common::gate_for_adopter(dir, args)
}

fn report(out: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap()
}

fn closed_form(input: u64, hidden: u64, horizon: u64) -> u64 {
    (input * hidden + hidden) + (6 * hidden * hidden + 6 * hidden) + (hidden * horizon + horizon)
}

fn out(t: &common::CrateCopy) -> PathBuf {
    t.path().join("out")
}

#[test]
fn the_adopters_model_is_measured_attributed_and_judged_like_a_built_in() {
    if !ready("the_adopters_model_is_measured_attributed_and_judged_like_a_built_in") {
        return;
    }
    let _one = one_at_a_time();
    let t = adopter();
    let o = out(&t);
    let r = gate(t.path(), &["check", "--baseline", "none", "--out", o.to_str().unwrap()]);
    let stderr = text(&r.stderr);
    // One of the example's budgets fails on purpose.
    assert_eq!(
        r.status.code(),
        Some(1),
        "stderr: {stderr}\nstdout: {}",
        text(&r.stdout)
    );
    assert!(
        stderr.contains("building the harness `gate-harness` of `ml`"),
        "{stderr}"
    );
    let rep = report(&o);
    let c = &rep["components"]["forecaster"];
    assert_eq!(c["workload"], "gru_forecaster", "{c}");
    // The example's config: input 16, hidden 64, horizon 12, f32.
    let elems = closed_form(16, 64, 12);
    assert_eq!(c["analytic_params_bytes"].as_u64(), Some(elems * 4), "{c}");
    assert_eq!(c["param_count"].as_u64(), Some(elems), "{c}");
    let measured = c["metrics"]["params"]["value"].as_f64().unwrap() as u64;
    // Live bytes: the tensors' data plus candle's per-tensor metadata (7 tensors).
    assert!(
        measured >= elems * 4 && measured <= elems * 4 + 7 * 512,
        "{measured} vs {}",
        elems * 4
    );
    let blocks: Vec<&str> = c["blocks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["name"].as_str().unwrap())
        .collect();
    for b in ["embed", "gru", "head"] {
        assert!(blocks.contains(&b), "block {b} in {blocks:?}");
    }
    let gru = c["blocks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["name"] == "gru")
        .unwrap();
    assert!(gru["retained_bytes"].as_i64().unwrap() > 0, "{gru}");
    // The same outputs as for the built-ins.
    let junit = std::fs::read_to_string(o.join("junit.xml")).unwrap();
    let doc = roxmltree::Document::parse(&junit).unwrap();
    assert!(doc.descendants().any(|n| n.has_tag_name("failure")), "{junit}");
    assert!(o.join("comment.md").is_file());
    assert!(text(&r.stdout).contains("forecaster"), "the table names it");

    // The failing budget's measured fix, from the levers a team's harness
    // offers without declaring any (the batch, bf16): a smaller batch that
    // passes, measured, with its loss ratio shown, and the predicted bytes
    // of what it measured within 10 % (#49).
    let p = gate(t.path(), &["plan", "forecaster", "--out", o.to_str().unwrap()]);
    let said = format!("stderr: {}\nstdout: {}", text(&p.stderr), text(&p.stdout));
    assert_eq!(p.status.code(), Some(0), "{said}");
    let plan: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(o.join("plan.json")).unwrap()).unwrap();
    let chosen = &plan["candidates"][plan["chosen"].as_u64().expect("a measured fix") as usize];
    assert_eq!(chosen["outcome"], "pass", "{chosen}");
    assert!(chosen["figures"]["loss_ratio"]["predicted"].is_number(), "{chosen}");
    assert!(crate::plan::assert_predictions_hold(&plan, 0.10) >= 1, "{plan}");

    // `validate --build` goes through the harness too, and says it is fine;
    // with only budgets.yaml changed, nothing is compiled again (the
    // harness never reads it: the spec reaches it as a request).
    let spec = t.path().join("budgets.yaml");
    let edited = std::fs::read_to_string(&spec).unwrap() + "# edited after the first build\n";
    std::fs::write(&spec, edited).unwrap();
    let v = gate(t.path(), &["validate", "--build"]);
    assert_eq!(v.status.code(), Some(0), "{}", text(&v.stderr));
    assert!(!text(&v.stderr).contains("Compiling"), "{}", text(&v.stderr));
    assert!(text(&v.stdout).contains("budgets.yaml: ok"), "{}", text(&v.stdout));

    // The harness answers the installed gate only, and says so to a person
    // who runs it; `--help` says what it is.
    let harness = root().join("target/release/gate-harness");
    let alone = Command::new(&harness)
        .arg("check")
        .current_dir(t.path())
        .output()
        .unwrap();
    assert_eq!(alone.status.code(), Some(2), "{}", text(&alone.stderr));
    assert!(
        text(&alone.stderr).contains("it answers the installed `gate`, and got `check`"),
        "{}",
        text(&alone.stderr)
    );
    let help = Command::new(&harness).arg("--help").output().unwrap();
    assert_eq!(help.status.code(), Some(0), "{}", text(&help.stderr));
    assert!(
        text(&help.stdout).contains("the gate harness of `ml`"),
        "{}",
        text(&help.stdout)
    );
    // It reads no YAML: the installed gate's request is the spec as JSON.
    let spec = gate_spec::budget::load(&t.path().join("budgets.yaml")).unwrap();
    let request = t.path().join("request.json");
    std::fs::write(&request, gate::test_support::Request::json(&spec).unwrap()).unwrap();
    let resolved = Command::new(&harness)
        .arg("__resolve")
        .arg("--request")
        .arg(&request)
        .current_dir(t.path())
        .output()
        .unwrap();
    assert_eq!(resolved.status.code(), Some(0), "{}", text(&resolved.stderr));
    let answer: serde_json::Value = serde_json::from_slice(&resolved.stdout).unwrap();
    assert_eq!(answer["protocol"], gate::test_support::PROTOCOL, "{answer}");
    assert_eq!(answer["configs"]["forecaster"]["hidden_dim"], 64, "{answer}");

    // `--harness-bin`: the binary built above, run where there is no cargo
    // (a GPU runner): nothing is built, the same params are measured.
    let o2 = t.path().join("out-prebuilt");
    let pre = common::gate()
        .args(["check", "--baseline", "none", "--only", "forecaster", "--harness-bin"])
        .arg(&harness)
        .args(["--out", o2.to_str().unwrap()])
        .current_dir(t.path())
        .env("CARGO", "/nonexistent/cargo")
        .output()
        .unwrap();
    let pre_err = text(&pre.stderr);
    assert!(pre_err.contains("(--harness-bin; not built here)"), "{pre_err}");
    assert!(!pre_err.contains("building the harness"), "{pre_err}");
    let again = &report(&o2)["components"]["forecaster"];
    assert_eq!(
        again["metrics"]["params"]["value"], c["metrics"]["params"]["value"],
        "{again}"
    );
    let missing = gate(t.path(), &["check", "--harness-bin", "no-such-harness"]);
    assert_eq!(missing.status.code(), Some(2), "{}", text(&missing.stderr));
    assert!(
        text(&missing.stderr).contains("--harness-bin no-such-harness: no such file"),
        "{}",
        text(&missing.stderr)
    );
}

/// A workload written in the test's own harness: it panics or runs the host
/// out of memory inside its model, as a broken adopter model would.
const EXPLODING: &str = r#"
use gate::candle_core::{Result, Tensor};
use gate::candle_nn::VarBuilder;
use gate::{Batch, Model, ParamCount, Problems, RunCtx, Step, Workload};

#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
enum Mode { Panic, Oom }

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
#[serde(default)]
struct Cfg { mode: Mode }

impl Default for Cfg {
    fn default() -> Self { Cfg { mode: Mode::Panic } }
}

#[derive(Debug)]
struct Exploding { cfg: Cfg }

impl Workload for Exploding {
    const KIND: &'static str = "exploding";
    type Config = Cfg;
    fn from_config(cfg: Cfg) -> std::result::Result<Self, Problems> { Ok(Exploding { cfg }) }
    fn config(&self) -> &Cfg { &self.cfg }
    fn param_count(&self) -> ParamCount { ParamCount::new(4, 0) }
    fn build(&self, vb: VarBuilder, _ctx: &RunCtx) -> Result<Box<dyn Model>> {
        let w = vb.get((2, 2), "w")?;
        Ok(Box::new(Boom { w, mode: self.cfg.mode }))
    }
    fn batch(&self, ctx: &RunCtx, _seed: u64) -> Result<Batch> {
        Ok(Batch::new(vec![Tensor::ones((ctx.batch_size, 2), ctx.dtype, &ctx.device)?]))
    }
}

struct Boom { w: Tensor, mode: Mode }

impl Model for Boom {
    fn loss(&self, batch: &Batch, _step: &Step) -> Result<Tensor> {
        match self.mode {
            Mode::Panic => panic!("the adopter's model panicked in its forward"),
            Mode::Oom => {
                let v: Vec<u8> = Vec::with_capacity(usize::MAX / 4);
                std::hint::black_box(&v);
            }
        }
        batch.tensors[0].matmul(&self.w)?.sum_all()
    }
    fn predict(&self, batch: &Batch) -> Result<Tensor> { batch.tensors[0].matmul(&self.w) }
}

gate::main!(ml::GruForecaster, Exploding);
"#;

#[test]
fn a_panic_or_oom_inside_the_adopters_model_fails_that_component_only() {
    if !ready("a_panic_or_oom_inside_the_adopters_model_fails_that_component_only") {
        return;
    }
    let _one = one_at_a_time();
    let t = adopter();
    std::fs::write(t.path().join("crates/ml/src/bin/gate-harness.rs"), EXPLODING).unwrap();
    let spec = t.path().join("budgets.yaml");
    let text_spec = std::fs::read_to_string(&spec).unwrap();
    let extra = "  boom:\n    workload: exploding\n    config: { mode: panic }\n    budgets: { training_peak: < 1 GB }\n  oom:\n    workload: exploding\n    config: { mode: oom }\n    budgets: { training_peak: < 1 GB }\n";
    std::fs::write(&spec, format!("{text_spec}{extra}")).unwrap();
    let o = out(&t);
    let r = gate(t.path(), &["check", "--baseline", "none", "--out", o.to_str().unwrap()]);
    let stderr = text(&r.stderr);
    assert_eq!(
        r.status.code(),
        Some(1),
        "a failed measurement fails the gate, it does not crash it: {stderr}"
    );
    let rep = report(&o);
    let boom = &rep["components"]["boom"];
    assert_eq!(boom["error"]["kind"], "failed", "{boom}");
    assert!(
        boom["error"]["reason"]
            .as_str()
            .unwrap()
            .contains("panicked in its forward"),
        "{boom}"
    );
    let oom = &rep["components"]["oom"];
    assert!(
        oom["error"]["reason"].as_str().unwrap().contains("out of memory"),
        "{oom}"
    );
    // The neighbour is measured in full.
    let f = &rep["components"]["forecaster"];
    assert!(f["error"].is_null(), "{f}");
    assert!(f["metrics"]["training_peak"]["value"].as_f64().unwrap() > 0.0, "{f}");
}

#[test]
fn a_mistake_in_the_adopters_config_is_a_spec_error_with_its_line() {
    if !ready("a_mistake_in_the_adopters_config_is_a_spec_error_with_its_line") {
        return;
    }
    let _one = one_at_a_time();
    let t = adopter();
    let spec = t.path().join("budgets.yaml");
    let s = std::fs::read_to_string(&spec).unwrap();
    let s = s
        .replace("hidden_dim: 64", "hiden_dim: 64")
        .replace("horizon: 12", "horizon: twelve");
    std::fs::write(&spec, &s).unwrap();
    let line_of = |needle: &str| s.lines().position(|l| l.contains(needle)).unwrap() + 1;
    // The configs are the harness's to check: `validate` builds it when asked.
    let r = gate(t.path(), &["validate", "--build"]);
    let stderr = text(&r.stderr);
    assert_eq!(r.status.code(), Some(2), "{stderr}");
    let l = line_of("hiden_dim");
    assert!(
        stderr.contains(&format!("budgets.yaml:{l}:")) && stderr.contains("unknown config key `hiden_dim`"),
        "{stderr}"
    );
    assert!(stderr.contains("hint: did you mean `hidden_dim`?"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn a_harness_that_does_not_compile_is_exit_3_with_cargos_first_error() {
    if !ready("a_harness_that_does_not_compile_is_exit_3_with_cargos_first_error") {
        return;
    }
    let _one = one_at_a_time();
    let t = adopter();
    let lib = t.path().join("crates/ml/src/lib.rs");
    let s = std::fs::read_to_string(&lib).unwrap();
    std::fs::write(
        &lib,
        format!("{s}\npub fn broken() -> u32 {{ not_defined_anywhere }}\n"),
    )
    .unwrap();
    let r = gate(
        t.path(),
        &["check", "--baseline", "none", "--out", out(&t).to_str().unwrap()],
    );
    let stderr = text(&r.stderr);
    assert_eq!(r.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("does not build"), "{stderr}");
    assert!(
        stderr.contains("not_defined_anywhere"),
        "cargo's error is quoted: {stderr}"
    );
    assert!(stderr.contains("hint: fix the error above"), "{stderr}");
}

/// The fenced blocks of `lang` in a markdown text, in order.
fn blocks<'a>(md: &'a str, lang: &str) -> Vec<&'a str> {
    let fence = format!("```{lang}\n");
    md.match_indices(&fence)
        .map(|(i, _)| {
            let body = &md[i + fence.len()..];
            &body[..body.find("```").unwrap()]
        })
        .collect()
}

#[test]
fn a_model_written_from_docs_sdk_md_alone_is_gated() {
    if !ready("a_model_written_from_docs_sdk_md_alone_is_gated") {
        return;
    }
    let _one = one_at_a_time();
    let md = std::fs::read_to_string(root().join("docs/sdk.md")).unwrap();
    let (toml, rust, yaml) = (blocks(&md, "toml"), blocks(&md, "rust"), blocks(&md, "yaml"));
    let t = tempfile::tempdir().unwrap();
    let dir = t.path();
    std::fs::create_dir_all(dir.join("src/bin")).unwrap();
    // The doc's dependency lines, gate taken from this checkout instead of crates.io.
    let deps = toml[0]
        .lines()
        .map(|l| {
            if l.starts_with("gate-sdk = ") {
                // The doc's features kept: the harness it describes is the slim one.
                let source = format!("path = {:?}", root().join("crates/gate-sdk").display().to_string());
                assert!(
                    l.contains(r#"default-features = false, features = ["candle-0-11"]"#),
                    "{l}"
                );
                l.replace(r#"version = "0.1""#, &source)
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    let manifest =
        format!("[package]\nname = \"my_crate\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n{deps}\n\n[workspace]\n");
    std::fs::write(dir.join("Cargo.toml"), manifest).unwrap();
    std::fs::copy(root().join("Cargo.lock"), dir.join("Cargo.lock")).unwrap();
    std::fs::write(dir.join("src/lib.rs"), rust[0]).unwrap();
    std::fs::write(dir.join("src/bin/gate-harness.rs"), rust[1]).unwrap();
    // The first whole spec; excerpts of one (a component alone) come before it.
    let spec = yaml
        .iter()
        .find(|b| b.starts_with("version:"))
        .expect("a whole budgets.yaml in docs/sdk.md");
    std::fs::write(dir.join("budgets.yaml"), spec).unwrap();
    let o = dir.join("out");
    let r = gate(dir, &["check", "--baseline", "none", "--out", o.to_str().unwrap()]);
    assert_eq!(r.status.code(), Some(0), "{}\n{}", text(&r.stderr), text(&r.stdout));
    let rep = report(&o);
    let c = &rep["components"]["mlp"];
    assert_eq!(c["workload"], "my_mlp");
    // input 32, hidden 256: 32·256 + 256 + 256 + 1
    assert_eq!(c["param_count"].as_u64(), Some(32 * 256 + 256 + 256 + 1), "{c}");
}

#[test]
fn the_adopters_own_tests_pass() {
    if !ready("the_adopters_own_tests_pass") {
        return;
    }
    let _one = one_at_a_time();
    let t = adopter();
    // Release: the dependencies the harness builds are reused.
    let o = common::cargo()
        .args(["test", "--release", "-p", "ml", "--test", "forecaster"])
        .current_dir(t.path())
        .env("CARGO_TARGET_DIR", root().join("target"))
        .output()
        .unwrap();
    let out = format!("{}{}", text(&o.stdout), text(&o.stderr));
    assert!(o.status.success(), "{out}");
    assert!(out.contains("test builds_the_closed_form_and_learns ... ok"), "{out}");
}

#[test]
fn gate_init_harness_makes_a_crate_its_own_gate() {
    if !ready("gate_init_harness_makes_a_crate_its_own_gate") {
        return;
    }
    let _one = one_at_a_time();
    let t = tempfile::tempdir().unwrap();
    let dir = t.path();
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::write(
        dir.join("Cargo.toml"),
        "[package]\nname = \"forecasting\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\n\n[workspace]\n",
    )
    .unwrap();
    std::fs::write(dir.join("src/lib.rs"), "").unwrap();
    let run = |args: &[&str]| gate(dir, args);
    let o = run(&[
        "init",
        "--harness",
        "--no-workflows",
        "--gate-repo",
        "acme/gate",
        "--gate-ref",
        "v0.1.0",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let harness = std::fs::read_to_string(dir.join("src/bin/gate-harness.rs")).unwrap();
    assert!(harness.contains("gate::main!("), "{harness}");
    let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
    // The slim harness, on candle 0.11 when the crate names no candle yet,
    // with the built-ins its starter spec's `mlp` needs.
    let from_tag = r#"gate-sdk = { git = "https://github.com/acme/gate", tag = "v0.1.0", default-features = false, features = ["candle-0-11"] }"#;
    let builtins_from_tag = r#"gate-builtins = { git = "https://github.com/acme/gate", tag = "v0.1.0" }"#;
    assert!(manifest.contains(builtins_from_tag), "{manifest}");
    assert!(manifest.contains(from_tag), "{manifest}");
    assert!(
        manifest.contains(r#"cuda = ["gate-sdk/cuda", "gate-builtins/cuda"]"#),
        "{manifest}"
    );
    assert!(harness.contains("gate::main!(gate_builtins::Mlp"), "{harness}");
    let budgets = std::fs::read_to_string(dir.join("budgets.yaml")).unwrap();
    assert!(
        budgets.contains("harness: { package: \"forecasting\", bin: gate-harness }"),
        "{budgets}"
    );
    // Run again: nothing is overwritten.
    let again = run(&["init", "--harness", "--no-workflows"]);
    assert_eq!(again.status.code(), Some(2), "{}", text(&again.stderr));
    // With gate from this checkout instead of the tag, the starter spec runs through the harness.
    let local = manifest
        .replace(
            builtins_from_tag,
            &format!(
                "gate-builtins = {{ path = {:?} }}",
                root().join("crates/gate-builtins").display().to_string()
            ),
        )
        .replace(
            r#"git = "https://github.com/acme/gate", tag = "v0.1.0""#,
            &format!("path = {:?}", root().join("crates/gate-sdk").display().to_string()),
        );
    std::fs::write(dir.join("Cargo.toml"), local).unwrap();
    std::fs::copy(root().join("Cargo.lock"), dir.join("Cargo.lock")).unwrap();
    let v = run(&["validate", "--build"]);
    assert_eq!(v.status.code(), Some(0), "{}", text(&v.stderr));
    assert!(text(&v.stderr).contains("building the harness `gate-harness` of `forecasting`"));
}

/// The adopter's transformer (its blocks are attention + MLP, not
/// position-wise) with every block checkpointed whole, gated through its
/// `lm.yaml` against the same model with its graph kept.
#[test]
fn a_transformer_checkpointed_block_by_block_is_gated_against_its_plain_self() {
    if !ready("a_transformer_checkpointed_block_by_block_is_gated_against_its_plain_self") {
        return;
    }
    let _one = one_at_a_time();
    let t = adopter();
    let o = out(&t);
    let r = gate(
        t.path(),
        &[
            "check",
            "--budgets",
            "lm.yaml",
            "--baseline",
            "none",
            "--out",
            o.to_str().unwrap(),
        ],
    );
    let stderr = text(&r.stderr);
    assert_eq!(
        r.status.code(),
        Some(0),
        "stderr: {stderr}\nstdout: {}",
        text(&r.stdout)
    );
    let rep = report(&o);
    let (ck, plain) = (&rep["components"]["lm"], &rep["components"]["lm@plain"]);
    let metric = |c: &serde_json::Value, m: &str| c["metrics"][m]["value"].as_f64().unwrap();
    // vocab 4096, d 128, seq 128, 4 blocks: V·d + T·d + 4·(12d² + 13d) + 2d.
    let (v, d, s) = (4096u64, 128u64, 128u64);
    assert_eq!(
        ck["param_count"].as_u64(),
        Some(v * d + s * d + 4 * (12 * d * d + 13 * d) + 2 * d)
    );
    // The same seeded dropout masks: the very same loss, so loss_ratio is 1.
    assert_eq!(metric(ck, "loss"), metric(plain, "loss"), "{ck}");
    assert_eq!(metric(ck, "loss_ratio"), 1.0);
    // Each checkpointed block keeps its output leaf (B·T·d f32 = 512 KiB) and
    // nothing of its graph; the plain blocks keep tens of MiB each.
    let block = |c: &serde_json::Value, name: &str| {
        c["blocks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|b| b["name"] == name)
            .unwrap_or_else(|| panic!("block {name} in {c}"))["retained_bytes"]
            .as_i64()
            .unwrap()
    };
    for i in 0..4 {
        let name = format!("block{i}");
        let (kept, full) = (block(ck, &name), block(plain, &name));
        assert!(kept < 600 * 1024, "{name} keeps {kept} B checkpointed");
        assert!(full > 20 * kept, "{name}: {full} B plain vs {kept} B checkpointed");
    }
    assert!(metric(ck, "activations") < metric(plain, "activations") / 2.0);
    assert!(metric(ck, "training_peak") < metric(plain, "training_peak"));
    assert!(metric(ck, "step_time_ratio") > 1.0, "a recompute costs time");
    // What was checkpointed, as the SDK saw the blocks run: no describe of its own.
    let names: Vec<serde_json::Value> = (0..4)
        .map(|i| serde_json::json!({ "block": format!("block{i}") }))
        .collect();
    assert_eq!(ck["checkpointed"], serde_json::Value::Array(names), "{ck}");
    assert!(plain.get("checkpointed").is_none(), "{plain}");
    let stdout = text(&r.stdout);
    assert!(stdout.contains("checkpoint 4 blocks whole"), "{stdout}");
}

/// The worked transformer in docs/sdk.md is the adopter's, verbatim: the
/// one above builds, trains and is gated, so the doc's cannot rot.
#[test]
fn the_worked_transformer_in_docs_sdk_md_is_the_adopters() {
    let md = std::fs::read_to_string(root().join("docs/sdk.md")).unwrap();
    let file = std::fs::read_to_string(root().join("examples/adopter/crates/ml/src/transformer.rs")).unwrap();
    assert!(
        blocks(&md, "rust").iter().any(|b| *b == file),
        "docs/sdk.md's worked transformer differs from examples/adopter/crates/ml/src/transformer.rs: copy the file into the doc"
    );
}
