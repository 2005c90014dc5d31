//! gate's SDK on the candle minors before its own: two outside crates in
//! `tests/adopters/`, each written as a team on that candle would write it,
//! with its own Cargo.lock, and each gated by the stock `gate` binary
//! through its spec's `harness:`.
//!
//! - `candle-0-9-1`: candle-core/candle-nn `=0.9.1` and gate's `candle-0-9-1`
//!   feature; a Temporal Fusion Transformer at the original report's config,
//!   held to the report's budgets: activations and training peak fail, as
//!   they did then.
//! - `candle-0-10`: candle 0.10 and `candle-0-10`; a 1-D conv classifier with
//!   a budget that passes and one that fails.
//!
//! Each is copied under `target/fixture-copies/` (`common::crate_copy`, its
//! gate path dependency pointed at this checkout) and its harness is built
//! with cargo, release, into this checkout's `target/`, so candle 0.9.1 and
//! 0.10 are compiled once.

use crate::common;

use crate::common::text;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Output;

fn root() -> &'static Path {
    Path::new(env!("GATE_REPO_ROOT"))
}

/// Whether `test` can run: the crates of fixtures `names` can be had
/// (crates.io, or cargo's cache); when not, it says so and is skipped.
pub(crate) fn ready(test: &str, names: &[&str]) -> bool {
    let why = names
        .iter()
        .find_map(|n| common::crates_unavailable(&root().join("tests/adopters").join(n).join("Cargo.toml")));
    common::available(test, why)
}

/// A copy of `tests/adopters/NAME` (`common::crate_copy`, named `copy`),
/// depending on this checkout. The copy's lock keeps one test at a time in
/// it; tests of two fixtures run side by side (their builds take turns at
/// cargo's lock of the shared target folder).
pub(crate) fn fixture(name: &str, copy: &str) -> common::CrateCopy {
    common::crate_copy(
        &root().join("tests/adopters").join(name),
        copy,
        common::sdk_path_here("Cargo.toml", "../../../crates/gate-sdk"),
    )
}

/// The stock gate, run in the adopter's folder as a user would.
fn gate(dir: &Path, args: &[&str]) -> Output {
    common::gate_for_adopter(dir, args)
}

/// `gate check --baseline none` in a copy of the fixture: exit 1 (a budget
/// fails on purpose), and its report.
pub(crate) fn check(t: &common::CrateCopy, package: &str) -> Value {
    let out: PathBuf = t.path().join("out");
    let r = gate(
        t.path(),
        &["check", "--baseline", "none", "--out", out.to_str().unwrap()],
    );
    let stderr = text(&r.stderr);
    assert_eq!(
        r.status.code(),
        Some(1),
        "stderr: {stderr}\nstdout: {}",
        text(&r.stdout)
    );
    assert!(
        stderr.contains(&format!("building the harness `gate-harness` of `{package}`")),
        "{stderr}"
    );
    serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap()
}

/// The status of `component.metric`'s budget.
pub(crate) fn status<'a>(rep: &'a Value, component: &str, metric: &str) -> &'a str {
    rep["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["component"] == component && r["metric"] == metric)
        .unwrap_or_else(|| panic!("no budget {component}.{metric} in {}", rep["results"]))["status"]
        .as_str()
        .unwrap()
}

fn blocks(c: &Value) -> Vec<(String, i64)> {
    c["blocks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            (
                b["name"].as_str().unwrap().to_string(),
                b["retained_bytes"].as_i64().unwrap(),
            )
        })
        .collect()
}

/// `params` is the tensors' data plus candle's per-tensor metadata.
fn assert_params(c: &Value, elems: u64, tensors: u64) {
    assert_eq!(c["param_count"].as_u64(), Some(elems), "{}", c["param_count"]);
    assert_eq!(c["analytic_params_bytes"].as_u64(), Some(elems * 4));
    let measured = c["metrics"]["params"]["value"].as_f64().unwrap() as u64;
    assert!(
        measured >= elems * 4 && measured <= elems * 4 + tensors * 512,
        "params {measured} B vs {} B of data in {tensors} tensors",
        elems * 4
    );
}

// The TFT's closed form, written out again from the block list of the
// fixture's src/lib.rs (Linear(i→o) = i·o + o).
fn lin(i: u64, o: u64) -> u64 {
    i * o + o
}

/// GRN(i, h, o, context c): fc1, context (no bias), fc2, GLU(h→2o), a Linear
/// skip when i ≠ o, LayerNorm(o). Returns (elements, tensors).
fn grn(i: u64, h: u64, o: u64, c: u64) -> (u64, u64) {
    let skip = i != o;
    (
        lin(i, h) + c * h + lin(h, h) + lin(h, 2 * o) + if skip { lin(i, o) } else { 0 } + 2 * o,
        8 + u64::from(c > 0) + if skip { 2 } else { 0 },
    )
}

/// VSN over v variables: per variable a Linear(1→h) and a GRN(h); the
/// selection GRN(v·h → v) with context c.
fn vsn(v: u64, h: u64, c: u64) -> (u64, u64) {
    let (per, per_t) = grn(h, h, h, 0);
    let (sel, sel_t) = grn(v * h, h, v, c);
    (v * (lin(1, h) + per) + sel, v * (2 + per_t) + sel_t)
}

/// The original report's TFT: 5/10/241 reals, hidden 64, 4 heads, 2 LSTM layers, 9 quantiles.
fn tft_closed_form() -> (u64, u64) {
    let (h, heads, layers, q) = (64u64, 4u64, 2u64, 9u64);
    let d = h / heads;
    let (gan, gan_t) = (lin(h, 2 * h) + 2 * h, 4);
    let parts = [
        vsn(5, h, 0),
        (4 * grn(h, h, h, 0).0, 4 * grn(h, h, h, 0).1),
        vsn(10 + 241, h, h),
        vsn(10, h, h),
        (2 * layers * (8 * h * h + 8 * h), 2 * layers * 4),
        (gan, gan_t),
        grn(h, h, h, h),
        (2 * heads * lin(h, d) + lin(h, d) + d * h, 4 * heads + 3),
        (gan, gan_t),
        grn(h, h, h, 0),
        (gan, gan_t),
        (lin(h, q), 2),
    ];
    parts.iter().fold((0, 0), |(e, t), (pe, pt)| (e + pe, t + pt))
}

#[test]
fn a_crate_on_candle_0_9_1_gates_its_tft_and_fails_as_the_report_did() {
    if !ready(
        "a_crate_on_candle_0_9_1_gates_its_tft_and_fails_as_the_report_did",
        &["candle-0-9-1"],
    ) {
        return;
    }
    let t = fixture("candle-0-9-1", "candle-0-9-1");
    let rep = check(&t, "tft_team");
    let c = &rep["components"]["tft"];
    assert!(c["error"].is_null(), "{c}");
    assert_eq!(c["workload"], "tft_team");
    let (elems, tensors) = tft_closed_form();
    assert_eq!(elems, 9_954_315);
    assert_params(c, elems, tensors);

    // Attributed: every block of the pipeline, and the encoder's variable
    // selection holds most of what the forward keeps (as in the report).
    let b = blocks(c);
    let names: Vec<&str> = b.iter().map(|(n, _)| n.as_str()).collect();
    for name in [
        "static_vsn",
        "static_encoders",
        "encoder_vsn",
        "encoder_vsn.variable_grns",
        "decoder_vsn",
        "lstm_encoder",
        "lstm_decoder",
        "post_lstm_gate",
        "static_enrichment",
        "attention",
        "post_attention_gate",
        "positionwise_grn",
        "output",
        "quantile_loss",
    ] {
        assert!(names.contains(&name), "block {name} in {names:?}");
    }
    let activations = c["metrics"]["activations"]["value"].as_f64().unwrap();
    let encoder_vsn = b.iter().find(|(n, _)| n == "encoder_vsn").unwrap().1 as f64;
    assert!(
        encoder_vsn > 0.9 * activations,
        "encoder_vsn {encoder_vsn} of {activations}"
    );

    // The original report's verdicts: the plain TFT needs GBs.
    assert_eq!(status(&rep, "tft", "params"), "pass");
    assert_eq!(status(&rep, "tft", "gradients"), "pass");
    assert_eq!(status(&rep, "tft", "optimizer"), "pass");
    assert_eq!(status(&rep, "tft", "activations"), "fail");
    assert_eq!(status(&rep, "tft", "training_peak"), "fail");
    assert!(activations > 1e9, "{activations}");
    // The candle the harness, and so the model, ran on: exactly, from the
    // build's resolve (the harness alone knows only its minor).
    assert_eq!(rep["testbed"]["candle_version"], "0.9.1", "{}", rep["testbed"]);
}

#[test]
fn a_crate_on_candle_0_10_gates_its_classifier() {
    if !ready("a_crate_on_candle_0_10_gates_its_classifier", &["candle-0-10"]) {
        return;
    }
    let t = fixture("candle-0-10", "candle-0-10");
    let rep = check(&t, "sensor_team");
    let c = &rep["components"]["classifier"];
    assert!(c["error"].is_null(), "{c}");
    assert_eq!(c["workload"], "conv_classifier");
    // in 6, channels 64, kernel 7, 3 layers, 5 classes: three convolutions
    // (weight and bias each) and the head.
    let elems = (64 * 6 * 7 + 64) + 2 * (64 * 64 * 7 + 64) + (64 * 5 + 5);
    assert_params(c, elems, 8);
    let b = blocks(c);
    for name in ["conv0", "conv1", "conv2", "pool", "head", "loss"] {
        assert!(b.iter().any(|(n, _)| n == name), "block {name} in {b:?}");
    }
    let conv0 = b.iter().find(|(n, _)| n == "conv0").unwrap().1;
    assert!(conv0 > 0, "{b:?}");
    assert_eq!(status(&rep, "classifier", "params"), "pass");
    assert_eq!(status(&rep, "classifier", "activations"), "fail");
    assert_eq!(rep["testbed"]["candle_version"], "0.10.2", "{}", rep["testbed"]);
}

/// `cargo test --release` in a copy of fixture `name` of its own (so that
/// it runs beside that fixture's `gate check`), which prints `expect`.
pub(crate) fn own_tests_pass(test: &str, name: &str, expect: &str) {
    if !ready(test, &[name]) {
        return;
    }
    let t = fixture(name, &format!("{name}-own-tests"));
    // Release: the dependencies the harnesses build are reused.
    let o = common::cargo()
        .args(["test", "--release"])
        .current_dir(t.path())
        .env("CARGO_TARGET_DIR", root().join("target"))
        .output()
        .unwrap();
    let out = format!("{}{}", text(&o.stdout), text(&o.stderr));
    assert!(o.status.success(), "{name}: {out}");
    assert!(out.contains(expect), "{name}: {out}");
}

#[test]
fn a_crate_on_candle_0_9_1_passes_its_own_tests() {
    own_tests_pass(
        "a_crate_on_candle_0_9_1_passes_its_own_tests",
        "candle-0-9-1",
        "test every_parameter_gets_a_gradient_and_the_loss_is_finite ... ok",
    );
}

#[test]
fn a_crate_on_candle_0_10_passes_its_own_tests() {
    own_tests_pass(
        "a_crate_on_candle_0_10_passes_its_own_tests",
        "candle-0-10",
        "test builds_the_closed_form_and_learns ... ok",
    );
}
