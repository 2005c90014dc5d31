//! burn through the same gate: `tests/adopters/burn-0-22`, a team's image
//! classifier written as burn code is, with its own Cargo.lock and gate's
//! burn adapter (`crates/gate-burn`) from this checkout, gated by the stock
//! `gate` binary through its spec's `harness:` (issue #40).
//!
//! The copy lives under `target/fixture-copies/` and its harness is built
//! with cargo, release, into `target/adopter-burn/` (`common::burn_target`,
//! where `.ci/run` prebuilds it), so burn is compiled once and its build
//! never waits on, nor holds up, the candle fixtures' (CONTRIBUTING.md,
//! "What `.ci/run` costs").

use crate::common;

use crate::common::text;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Output;

fn root() -> &'static Path {
    Path::new(env!("GATE_REPO_ROOT"))
}

const FIXTURE: &str = "burn-0-22";

/// Whether `test` can run: a Rust of at least burn 0.22's 1.95, and burn's
/// crates can be had (crates.io, or cargo's cache); when not, it says so
/// and is skipped (gate itself builds on 1.89).
fn ready(test: &str) -> bool {
    let why = old_rust()
        .or_else(|| common::crates_unavailable(&root().join("tests/adopters").join(FIXTURE).join("Cargo.toml")));
    common::available(test, why)
}

/// Why this toolchain cannot build burn 0.22, if it cannot.
fn old_rust() -> Option<String> {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let out = std::process::Command::new(&rustc).arg("--version").output().ok()?;
    let version = text(&out.stdout);
    // `rustc 1.95.0 (59807616e 2026-04-14)`
    let minor: u32 = version.split_whitespace().nth(1)?.split('.').nth(1)?.parse().ok()?;
    (minor < 95).then(|| format!("burn 0.22 needs Rust 1.95 and this is {}", version.trim()))
}

/// A copy of the fixture named `copy`, its gate-burn dependency pointed at
/// this checkout's crates/gate-burn.
fn fixture(copy: &str) -> common::CrateCopy {
    let from = r#"gate-burn = { path = "../../../crates/gate-burn" }"#;
    let to = format!(
        "gate-burn = {{ path = {:?} }}",
        root().join("crates/gate-burn").display().to_string()
    );
    common::crate_copy(&root().join("tests/adopters").join(FIXTURE), copy, move |rel, bytes| {
        if rel != Path::new("Cargo.toml") {
            return bytes;
        }
        let text = String::from_utf8(bytes).unwrap();
        assert!(text.contains(from), "the fixture's Cargo.toml has `{from}`");
        text.replace(from, &to).into_bytes()
    })
}

/// The stock gate in the copy `dir`, burn's harness built into its own
/// target folder ([`common::burn_target`]).
fn burn_gate(dir: &Path, args: &[&str]) -> Output {
    common::gate_for_adopter_in(dir, &common::burn_target(), args)
}

/// `gate check` in the copy with `--baseline BASELINE`, into `out`.
fn check(t: &common::CrateCopy, out: &str, baseline: &str) -> (Output, PathBuf) {
    let out = t.path().join(out);
    let r = burn_gate(
        t.path(),
        &["check", "--baseline", baseline, "--out", out.to_str().unwrap()],
    );
    (r, out)
}

fn report(out: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap()
}

/// The status of `component.metric`'s budget.
fn status<'a>(rep: &'a Value, component: &str, metric: &str) -> &'a str {
    rep["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["component"] == component && r["metric"] == metric)
        .unwrap_or_else(|| panic!("no budget {component}.{metric} in {}", rep["results"]))["status"]
        .as_str()
        .unwrap()
}

/// The fixture's closed form, written out again from its src/lib.rs:
/// conv(in→c) and conv(c→2c) with k×k kernels and biases, linear(2c→classes).
fn closed_form(in_channels: u64, channels: u64, kernel: u64, classes: u64) -> u64 {
    let conv = |i: u64, o: u64| i * o * kernel * kernel + o;
    conv(in_channels, channels) + conv(channels, 2 * channels) + 2 * channels * classes + classes
}

fn metric(c: &Value, name: &str) -> f64 {
    c["metrics"][name]["value"]
        .as_f64()
        .unwrap_or_else(|| panic!("no {name} in {}", c["metrics"]))
}

#[test]
fn a_burn_crate_is_gated_with_exact_params_and_blocks_that_add_up() {
    if !ready("a_burn_crate_is_gated_with_exact_params_and_blocks_that_add_up") {
        return;
    }
    let t = fixture("burn-0-22");
    let (r, out) = check(&t, "out", "none");
    let stderr = text(&r.stderr);
    // The activations budget fails on purpose.
    assert_eq!(
        r.status.code(),
        Some(1),
        "stderr: {stderr}\nstdout: {}",
        text(&r.stdout)
    );
    assert!(
        stderr.contains("building the harness `gate-harness` of `vision_team`"),
        "{stderr}"
    );
    let rep = report(&out);
    assert_eq!(rep["testbed"]["framework"]["name"], "burn", "{}", rep["testbed"]);
    assert_eq!(rep["testbed"]["framework"]["version"], "0.22.1", "{}", rep["testbed"]);
    assert_eq!(rep["testbed"]["candle_version"], "", "{}", rep["testbed"]);
    let c = &rep["components"]["classifier"];
    assert!(c["error"].is_null(), "{c}");
    assert_eq!(c["workload"], "conv_classifier");

    // params: the record's tensor bytes, to the byte, and the closed form.
    let elems = closed_form(3, 16, 3, 10);
    assert_eq!(elems, 5_418);
    assert_eq!(c["param_count"].as_u64(), Some(elems), "{c}");
    assert_eq!(c["analytic_params_bytes"].as_u64(), Some(elems * 4), "{c}");
    assert_eq!(metric(c, "params"), (elems * 4) as f64, "{}", c["metrics"]);
    // No BatchNorm, no buffer: the model keeps nothing of its own.
    assert_eq!(metric(c, "model_state"), 0.0, "{}", c["metrics"]);
    // The live bytes the build left: the tensors plus burn's bookkeeping of
    // its 6 parameter tensors (each `Param`'s state, its autodiff leaf's
    // graph entry, ndarray's `Arc`: about 2 KiB a tensor).
    let live = c["param_live_bytes"].as_u64().expect("param_live_bytes");
    assert!(
        live > elems * 4 && live <= elems * 4 + 6 * 3072,
        "{live} vs {}",
        elems * 4
    );
    // No warning that params and the closed form disagree.
    let warnings = rep["warnings"].to_string();
    assert!(!warnings.contains("disagree"), "{warnings}");

    // Every phase measured; AdamW's two moments a parameter.
    for m in [
        "activations",
        "gradients",
        "optimizer",
        "training_peak",
        "inference_peak",
        "growth",
    ] {
        assert!(metric(c, m) >= 0.0, "{m}");
    }
    assert_eq!(
        metric(c, "gradients"),
        (elems * 4) as f64,
        "one f32 gradient a parameter"
    );
    // The state's own tensors, as burn records them: two f32 moments a parameter.
    assert_eq!(
        metric(c, "optimizer"),
        (2 * elems * 4) as f64,
        "AdamW keeps two moments"
    );
    assert_eq!(metric(c, "growth"), 0.0, "{}", c["metrics"]);
    assert!(metric(c, "training_peak") > metric(c, "activations"));

    assert_eq!(status(&rep, "classifier", "params"), "pass");
    assert_eq!(status(&rep, "classifier", "optimizer"), "pass");
    assert_eq!(status(&rep, "classifier", "activations"), "fail");

    // Attributed: the model's scopes, closed by `(unattributed)` on the activations.
    let act = metric(c, "activations") as i64;
    let blocks = c["blocks"].as_array().unwrap();
    let names: Vec<&str> = blocks.iter().map(|b| b["name"].as_str().unwrap()).collect();
    for b in ["conv1", "conv2", "head", "loss"] {
        assert!(names.contains(&b), "block {b} in {names:?}");
    }
    assert_eq!(names.last(), Some(&"(unattributed)"), "{names:?}");
    // The model's own `tracing` span (`pool`, named under `spans:`) is a
    // block inside burn too, nested in gate's scope `head` where it opened.
    assert!(names.contains(&"head.pool"), "{names:?}");
    assert_eq!(c["spans_entered"], serde_json::json!(["pool"]));
    let peak = |name: &str| {
        blocks.iter().find(|b| b["name"] == name).unwrap()["peak_bytes"]
            .as_u64()
            .unwrap()
    };
    assert!(
        peak("head.pool") <= peak("head"),
        "a nested block's peak is within its parent's"
    );
    let top: i64 = blocks
        .iter()
        .filter(|b| !b["name"].as_str().unwrap().contains('.'))
        .map(|b| b["retained_bytes"].as_i64().unwrap())
        .sum();
    assert_eq!(
        top, act,
        "the top-level blocks and (unattributed) sum to the activations"
    );
    let conv = |name: &str| {
        blocks.iter().find(|b| b["name"] == name).unwrap()["retained_bytes"]
            .as_i64()
            .unwrap()
    };
    // conv2's output (16×32×32×32 f32, 2 MiB) at least is kept for its backward.
    assert!(conv("conv2") >= 16 * 32 * 32 * 32 * 4, "{}", conv("conv2"));
    assert!(conv("conv2") > conv("conv1"), "conv2 has twice the channels");
}

/// The team widens conv2 (three times the channels of conv1, not two) in
/// its code, its config unchanged: against the run before it, the comment
/// names conv2 as the block that grew.
#[test]
fn a_wider_layer_is_named_against_the_baseline() {
    if !ready("a_wider_layer_is_named_against_the_baseline") {
        return;
    }
    // The first test's copy, so the two take turns: two copies of one
    // package would build `target/release/gate-harness` side by side, and
    // a check could start the other's binary.
    let t = fixture("burn-0-22");
    let (r, base) = check(&t, "base", "none");
    assert_eq!(r.status.code(), Some(1), "{}", text(&r.stderr));
    let lib = t.path().join("src/lib.rs");
    let code = std::fs::read_to_string(&lib).unwrap();
    let wider = code
        .replace("2 * c.channels", "3 * c.channels")
        .replace("2 * ch", "3 * ch");
    assert_ne!(code, wider, "the fixture's src/lib.rs sizes conv2 as `2 * c.channels`");
    std::fs::write(&lib, wider).unwrap();
    let baseline = base.join("report.json");
    let (r, out) = check(&t, "wider", baseline.to_str().unwrap());
    // Restored for the next run of this copy (a copy is refreshed, not made anew).
    std::fs::write(&lib, code).unwrap();
    assert_eq!(r.status.code(), Some(1), "{}", text(&r.stderr));
    let rep = report(&out);
    let c = &rep["components"]["classifier"];
    assert_eq!(c["param_count"].as_u64(), Some(closed_form_wider()), "{c}");
    assert_eq!(metric(c, "params"), (closed_form_wider() * 4) as f64);
    let conv2 = c["blocks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["name"] == "conv2")
        .unwrap();
    let (now, was) = (
        conv2["retained_bytes"].as_i64().unwrap(),
        conv2["baseline_retained_bytes"]
            .as_i64()
            .expect("compared with the baseline"),
    );
    // 48 channels at 32×32 for 16 images where there were 32: half as much again.
    assert_eq!(now - was, 16 * 16 * 32 * 32 * 4 * 2, "{conv2}");
    assert_eq!(status(&rep, "classifier", "params"), "regressed");
    let comment = std::fs::read_to_string(out.join("comment.md")).unwrap();
    let next = comment
        .lines()
        .find(|l| l.starts_with("**Next step:**"))
        .unwrap_or_else(|| panic!("{comment}"));
    assert!(next.contains("`conv2`"), "{next}");
}

/// [`closed_form`] with conv2 at three times conv1's channels.
fn closed_form_wider() -> u64 {
    let (i, ch, k, n) = (3u64, 16u64, 3u64, 10u64);
    let conv = |a: u64, b: u64| a * b * k * k + b;
    conv(i, ch) + conv(ch, 3 * ch) + 3 * ch * n + n
}

/// `bn_classifier`'s closed form, written out again from the fixture's
/// src/lib.rs: (trained, frozen, running statistics) elements. A frozen
/// stem conv(in→stem) with its BatchNorm trained (γ, β), a trained
/// conv(stem→width) and BatchNorm, a linear head; each BatchNorm keeps a
/// running mean and variance a channel.
fn bn_closed_form(in_channels: u64, stem: u64, width: u64, kernel: u64, classes: u64) -> (u64, u64, u64) {
    let conv = |i: u64, o: u64| i * o * kernel * kernel + o;
    (
        2 * stem + conv(stem, width) + 2 * width + width * classes + classes,
        conv(in_channels, stem),
        2 * stem + 2 * width,
    )
}

/// A BatchNorm CNN whose stem the team froze on purpose, declared with
/// `BurnWorkload::frozen_modules` (issue #50): BatchNorm's running
/// statistics are buffers and the stem is frozen, so nothing is warned and
/// `--strict` passes; the stem keeps no gradient and no optimizer state;
/// AMSGrad's state is three tensors a trained parameter, Adam's two,
/// SGD's none, to the byte, and AMSGrad's training peak holds its three.
#[test]
fn a_batchnorm_cnn_with_a_frozen_stem_passes_strict_and_its_optimizer_state_is_exact() {
    if !ready("a_batchnorm_cnn_with_a_frozen_stem_passes_strict_and_its_optimizer_state_is_exact") {
        return;
    }
    let t = fixture("burn-0-22");
    // A first run is the baseline: `--strict` fails on having none.
    let base = t.path().join("bn-base");
    let r = burn_gate(
        t.path(),
        &[
            "check",
            "--only",
            "bn_cnn",
            "--baseline",
            "none",
            "--out",
            base.to_str().unwrap(),
        ],
    );
    assert_eq!(r.status.code(), Some(0), "{}", text(&r.stderr));
    let out = t.path().join("strict");
    let r = burn_gate(
        t.path(),
        &[
            "check",
            "--only",
            "bn_cnn",
            "--strict",
            "--baseline",
            base.join("report.json").to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ],
    );
    let stderr = text(&r.stderr);
    assert_eq!(
        r.status.code(),
        Some(0),
        "stderr: {stderr}\nstdout: {}",
        text(&r.stdout)
    );
    let rep = report(&out);
    let warnings = rep["warnings"].to_string();
    assert!(!warnings.contains("does not train"), "{warnings}");
    assert!(!warnings.contains("disagree"), "{warnings}");

    let (trained, frozen, running) = bn_closed_form(3, 8, 16, 3, 10);
    assert_eq!((trained, frozen, running), (1_386, 224, 48));
    for (name, moments) in [("bn_cnn", 3), ("bn_cnn@adam", 2), ("bn_cnn@sgd", 0)] {
        let c = &rep["components"][name];
        assert!(c["error"].is_null(), "{name}: {c}");
        // params: the record's parameters, the frozen stem included; the
        // running statistics are the model's own state, apart.
        let elems = trained + frozen;
        assert_eq!(c["param_count"].as_u64(), Some(elems), "{name}: {c}");
        assert_eq!(metric(c, "params"), (elems * 4) as f64, "{name}");
        assert_eq!(metric(c, "model_state"), (running * 4) as f64, "{name}");
        // The team's closed form counts them as burn's `num_params` does,
        // and agrees with the two together.
        assert_eq!(c["analytic_params_bytes"].as_u64(), Some(elems * 4), "{name}: {c}");
        // The frozen stem keeps no gradient; the running statistics have none.
        assert_eq!(metric(c, "gradients"), (trained * 4) as f64, "{name}");
        assert_eq!(
            metric(c, "optimizer"),
            (moments * trained * 4) as f64,
            "{name}: {moments} f32 tensors a trained parameter"
        );
        let coverage = &c["gradient_coverage"];
        assert_eq!(coverage["without_gradient"], 0, "{name}: {coverage}");
        // stem_norm's γ and β, conv's weight and bias, norm's γ and β, head's weight and bias.
        assert_eq!(coverage["tensors"], 8, "{name}: {coverage}");
        assert_eq!(coverage["bytes"], trained * 4, "{name}: {coverage}");
        assert_eq!(coverage["frozen"], 2, "{name}: the stem's weight and bias");
        assert_eq!(
            coverage["buffers"], 4,
            "{name}: two BatchNorms' running mean and variance"
        );
        // The state's parting (AMSGrad's) is no growth.
        assert_eq!(metric(c, "growth"), 0.0, "{name}");
    }
    // AMSGrad's peak is read with its third buffer live: its running
    // maximum parts from the second moment at the second step, and the
    // peak (in the backward) is the next step's. At least one trained
    // parameter's bytes above Adam's (#50 item 1).
    let peak = |name: &str| metric(&rep["components"][name], "training_peak");
    assert!(
        peak("bn_cnn") - peak("bn_cnn@adam") >= (trained * 4) as f64,
        "AMSGrad {} B against Adam {} B",
        peak("bn_cnn"),
        peak("bn_cnn@adam")
    );
}

/// `--backend cuda` on a burn spec is refused before cargo builds anything
/// (gate-burn's Cargo.toml says it runs on the CPU only), by `check` and by
/// `validate`; a `dtype:` burn does not build is refused by `validate`,
/// at the component's line (issue #50).
#[test]
fn what_burn_cannot_run_is_refused_before_anything_is_built() {
    if !ready("what_burn_cannot_run_is_refused_before_anything_is_built") {
        return;
    }
    let t = fixture("burn-0-22");
    let out = t.path().join("cuda");
    let r = burn_gate(
        t.path(),
        &[
            "check",
            "--backend",
            "cuda",
            "--baseline",
            "none",
            "--out",
            out.to_str().unwrap(),
        ],
    );
    let stderr = text(&r.stderr);
    assert_eq!(r.status.code(), Some(2), "{stderr}");
    assert!(!stderr.contains("building the harness"), "{stderr}");
    assert!(
        stderr.contains(
            "error: --backend cuda: the harness's framework adapter `gate-burn` runs on cpu only (its Cargo.toml's \
             `[package.metadata.gate] backends`), so nothing was built"
        ),
        "{stderr}"
    );
    assert!(stderr.contains("hint: run with `--backend cpu`"), "{stderr}");
    let r = burn_gate(t.path(), &["validate", "--backend", "cuda"]);
    assert_eq!(r.status.code(), Some(2), "{}", text(&r.stderr));
    assert!(text(&r.stderr).contains("runs on cpu only"), "{}", text(&r.stderr));

    // The same spec with `dtype: bf16` on its classifier.
    let spec = std::fs::read_to_string(t.path().join("budgets.yaml")).unwrap();
    let bf16 = spec.replace(
        "    workload: conv_classifier\n",
        "    workload: conv_classifier\n    dtype: bf16\n",
    );
    assert_ne!(spec, bf16);
    std::fs::write(t.path().join("bf16.yaml"), bf16).unwrap();
    let r = burn_gate(t.path(), &["validate", "--budgets", "bf16.yaml"]);
    let stderr = text(&r.stderr);
    std::fs::remove_file(t.path().join("bf16.yaml")).unwrap();
    assert_eq!(r.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(
            "bf16.yaml:13: component `classifier` asks for `dtype: bf16`, and the harness's framework adapter \
             `gate-burn` builds models in f32 only"
        ),
        "{stderr}"
    );
    assert!(stderr.contains("hint: remove `dtype:` from `classifier`"), "{stderr}");
}

/// A `frozen_modules` entry that names nothing of the built model fails
/// the component's build, naming the entry and the tensors there are
/// (a typo would otherwise train what the team meant to freeze).
#[test]
fn a_frozen_module_the_model_does_not_have_fails_the_build_with_the_tensors_there_are() {
    if !ready("a_frozen_module_the_model_does_not_have_fails_the_build_with_the_tensors_there_are") {
        return;
    }
    let t = fixture("burn-0-22");
    let lib = t.path().join("src/lib.rs");
    let code = std::fs::read_to_string(&lib).unwrap();
    let typo = code.replace(r#"vec!["stem".into()]"#, r#"vec!["stems".into()]"#);
    assert_ne!(code, typo, "the fixture freezes `stem`");
    std::fs::write(&lib, typo).unwrap();
    let out = t.path().join("typo");
    let r = burn_gate(
        t.path(),
        &[
            "check",
            "--only",
            "bn_cnn",
            "--baseline",
            "none",
            "--out",
            out.to_str().unwrap(),
        ],
    );
    // Restored for the next run of this copy.
    std::fs::write(&lib, code).unwrap();
    assert_eq!(r.status.code(), Some(1), "{}", text(&r.stderr));
    let rep = report(&out);
    let error = rep["components"]["bn_cnn"]["error"].to_string();
    assert!(
        error.contains("frozen_modules names a module that the built model does not have: stems; its tensors are: stem.weight, stem.bias, stem_norm.gamma"),
        "{error}"
    );
}
