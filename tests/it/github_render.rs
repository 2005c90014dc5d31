//! Snapshots (insta) of every GitHub-facing text: the comment / step
//! summary markdown and the workflow-command annotations, on fixed reports;
//! plus the escaping of hostile names and the 65,536-character cap.

use gate_contract::report::Report;
use gate_render::{annotations, markdown};
use serde_json::{json, Value};

const MIB: f64 = 1024.0 * 1024.0;

fn testbed(device: &str) -> Value {
    json!({
        "backend": "cpu", "device_name": device, "capacity_bytes": 4u64 << 30,
        "gated_device": "RTX 3050 Ti Laptop GPU", "device_total_bytes": null,
        "driver": null, "cuda": null, "candle_version": "0.11.1", "os": "linux", "arch": "x86_64"
    })
}

fn component(workload: &str, metrics: &[(&str, f64)], blocks: &[(&str, i64)]) -> Value {
    let mut m = serde_json::Map::new();
    for (k, v) in metrics {
        let unit = match *k {
            "step_time" => "ms",
            "loss" => "1",
            _ => "bytes",
        };
        m.insert(k.to_string(), json!({ "value": v, "unit": unit }));
    }
    let total: i64 = blocks.iter().map(|b| b.1).sum();
    json!({
        "workload": workload, "dtype": "f32", "batch_size": 32, "seed": 7, "config": {},
        "metrics": m, "param_count": 1000, "analytic_params_bytes": 0, "batch_bytes": 0,
        "unpruned_gradient_bytes": 0,
        "blocks": blocks.iter().map(|(n, b)| json!({
            "name": n, "retained_bytes": b, "peak_bytes": (*b as u64) * 2, "calls": 1,
            "share_percent": if total > 0 { Some((*b as f64 / total as f64 * 1000.0).round() / 10.0) } else { None },
        })).collect::<Vec<_>>(),
        "step_times_ms": [], "losses": [], "fingerprint": format!("fp-{workload}"), "error": null,
    })
}

#[allow(clippy::too_many_arguments)]
fn result(
    c: &str,
    metric: &str,
    op: &str,
    limit: f64,
    measured: Option<f64>,
    baseline: Option<f64>,
    status: &str,
    line: usize,
) -> Value {
    let unit = match metric {
        "step_time" => "ms",
        "loss" => "1",
        _ => "bytes",
    };
    json!({
        "component": c, "metric": metric, "unit": unit, "op": op, "limit": limit,
        "measured": measured, "baseline": baseline, "tolerance_percent": 5.0,
        "status": status, "line": line,
        "reason": if status == "not_measured" { Some("mamba2 is not built in this binary") } else { None },
    })
}

/// A failing run: TFT over its activation budget, an MLP regressed, a DQN improved.
fn current() -> Value {
    let results = vec![
        result(
            "tft",
            "activations",
            "<",
            200.0 * MIB,
            Some(2952.0 * MIB),
            Some(2950.0 * MIB),
            "fail",
            14,
        ),
        result(
            "tft",
            "params",
            "<",
            300.0 * MIB,
            Some(12.5 * MIB),
            Some(12.5 * MIB),
            "pass",
            13,
        ),
        result(
            "mlp",
            "training_peak",
            "<",
            8.0 * MIB,
            Some(6.0 * MIB),
            Some(5.0 * MIB),
            "regressed",
            30,
        ),
        result("mlp", "step_time", "<", 1000.0, Some(8.25), Some(8.0), "pass", 31),
        result(
            "dqn",
            "training_peak",
            "<",
            50.0 * MIB,
            Some(5.0 * MIB),
            Some(6.0 * MIB),
            "pass",
            40,
        ),
        result(
            "mamba2",
            "training_peak",
            "<",
            300.0 * MIB,
            None,
            None,
            "not_measured",
            50,
        ),
        result(
            "ensemble",
            "total",
            "<",
            2560.0 * MIB,
            Some(3300.0 * MIB),
            Some(3290.0 * MIB),
            "fail",
            60,
        ),
        result(
            "ensemble",
            "headroom",
            ">",
            1024.0 * MIB,
            Some(796.0 * MIB),
            Some(806.0 * MIB),
            "fail",
            61,
        ),
    ];
    json!({
        "schema": 1, "gate_version": "0.1.0", "commit": "1111111111111111111111111111111111111111",
        "spec": "budgets.yaml", "testbed": testbed("AMD EPYC"),
        "components": {
            "tft": component("tft", &[("activations", 2952.0 * MIB), ("params", 12.5 * MIB)],
                &[("vsn", 2_000_000_000), ("attention", 700_000_000), ("grn", 200_000_000), ("lstm", 100_000_000), ("head", 5_000_000), ("quantile", 1_000)]),
            "mlp": component("mlp", &[("training_peak", 6.0 * MIB), ("step_time", 8.25)], &[("mlp", 400_000)]),
            "dqn": component("dqn", &[("training_peak", 5.0 * MIB)], &[]),
            "mamba2": component("mamba2", &[], &[]),
        },
        "ensemble": null,
        "results": results,
        "summary": { "status": "fail", "passed": 3, "failed": 3, "regressed": 1, "not_measured": 1,
            "warnings": ["mamba2: not measured: mamba2 is not built in this binary"], "strict": false },
        "baseline": { "source": "commit 0000000000000000000000000000000000000000",
            "commit": "0000000000000000000000000000000000000000", "comparable": true },
        "wall_seconds": 12.0,
    })
}

fn baseline_of(cur: &Value) -> Value {
    let mut b = cur.clone();
    b["commit"] = json!("0000000000000000000000000000000000000000");
    for r in b["results"].as_array_mut().unwrap() {
        r["measured"] = r["baseline"].clone();
        r["baseline"] = Value::Null;
        if r["status"] == "regressed" {
            r["status"] = json!("pass");
        }
    }
    b["baseline"] = Value::Null;
    b
}

fn report(v: Value) -> Report {
    serde_json::from_value(v).expect("a valid report fixture")
}

#[test]
fn markdown_with_a_baseline() {
    let cur = current();
    let base = report(baseline_of(&cur));
    let md = markdown::render(&report(cur), Some(&base), markdown::COMMENT_LIMIT);
    insta::assert_snapshot!(md);
}

/// The run and its baseline, the TFT's `attention` block grown from 500 to
/// 700 MB (its `vsn` still the largest), the blocks compared by name as
/// `gate check` compares them.
fn grown_block() -> (Report, Report) {
    let cur = current();
    let mut base = baseline_of(&cur);
    for b in base["components"]["tft"]["blocks"].as_array_mut().unwrap() {
        if b["name"] == "attention" {
            b["retained_bytes"] = json!(500_000_000);
        }
    }
    compared(report(cur), report(base))
}

/// `cur` with its blocks compared with `base`'s, as `gate check` compares them.
fn compared(mut cur: Report, base: Report) -> (Report, Report) {
    let testbed = cur.testbed.clone();
    let outcome = gate_report::baseline::Outcome::Found {
        report: Box::new(base.clone()),
        source: "commit 0000000000000000000000000000000000000000".into(),
    };
    gate_report::compare_blocks(&mut cur.components, &outcome, &testbed);
    (cur, base)
}

#[test]
fn table_with_a_baseline_shows_it_the_change_and_the_block_that_grew() {
    let (cur, _) = grown_block();
    insta::assert_snapshot!(gate_render::table::render(&cur, false));
}

#[test]
fn markdown_next_step_names_the_block_that_grew() {
    let (cur, base) = grown_block();
    let md = markdown::render(&cur, Some(&base), markdown::COMMENT_LIMIT);
    let next = md.lines().find(|l| l.starts_with("**Next step:**")).unwrap_or_default();
    insta::assert_snapshot!(next);
}

/// A block the model checkpoints already is not told to be checkpointed:
/// what it keeps beyond its inputs and output is held outside the recompute.
#[test]
fn the_next_step_for_a_grown_block_that_is_checkpointed_already_says_so() {
    let (mut cur, base) = grown_block();
    let tft = cur.components.get_mut("tft").unwrap();
    tft.checkpointed = vec![serde_json::from_value(json!({ "block": "attention" })).unwrap()];
    let md = markdown::render(&cur, Some(&base), markdown::COMMENT_LIMIT);
    let next = md.lines().find(|l| l.starts_with("**Next step:**")).unwrap_or_default();
    assert!(next.contains("`attention` is checkpointed already"), "{next}");
    assert!(!next.contains("Recompute `attention`"), "{next}");
    let table = gate_render::table::render(&cur, false);
    assert!(
        table.contains("attention is checkpointed already") || table.contains("`attention` is checkpointed already"),
        "{table}"
    );
}

/// A regressed peak whose block kept no more but needed more while it ran
/// (a temporary): the next step names that block by its working memory.
#[test]
fn a_peak_that_grew_by_working_memory_names_that_block() {
    let mut cur = current();
    // Only the MLP's training peak is bad (regressed).
    for r in cur["results"].as_array_mut().unwrap() {
        if !(r["component"] == "mlp" && r["metric"] == "training_peak") {
            r["status"] = json!("pass");
        }
    }
    let mut base = baseline_of(&cur);
    for b in base["components"]["mlp"]["blocks"].as_array_mut().unwrap() {
        b["peak_bytes"] = json!(500_000);
    }
    for b in cur["components"]["mlp"]["blocks"].as_array_mut().unwrap() {
        b["peak_bytes"] = json!(1_500_000);
    }
    let (cur, base) = compared(report(cur), report(base));
    let md = markdown::render(&cur, Some(&base), markdown::COMMENT_LIMIT);
    let next = md.lines().find(|l| l.starts_with("**Next step:**")).unwrap_or_default();
    insta::assert_snapshot!(next);
}

#[test]
fn a_leak_that_also_fails_the_inference_peak_is_the_next_step() {
    let results = vec![
        result(
            "llm",
            "inference_peak",
            "<",
            2.0 * MIB,
            Some(3.0 * MIB),
            None,
            "fail",
            8,
        ),
        result("llm", "growth", "<", 16.0 * 1024.0, Some(2.0 * MIB), None, "fail", 9),
    ];
    let r = report(json!({
        "schema": 1, "gate_version": "0.1.0", "commit": null, "spec": "budgets.yaml", "testbed": testbed("AMD EPYC"),
        "components": { "llm": component("llm", &[("inference_peak", 3.0 * MIB), ("growth", 2.0 * MIB)], &[("block2", 1_000_000)]) },
        "ensemble": null, "results": results,
        "summary": { "status": "fail", "passed": 0, "failed": 2, "regressed": 0, "not_measured": 0,
            "warnings": [], "strict": false },
        "baseline": null, "wall_seconds": 1.0,
    }));
    let table = gate_render::table::render(&r, false);
    let md = markdown::render(&r, None, markdown::COMMENT_LIMIT);
    let next = |text: &str, start: &str| {
        text.lines()
            .find(|l| l.starts_with(start))
            .unwrap_or_default()
            .to_string()
    };
    insta::assert_snapshot!(format!(
        "{}\n{}",
        next(&table, "next step:"),
        next(&md, "**Next step:**")
    ));
}

/// A failed profile whose error is not memory (here CUDA's matmul refusing
/// a strided operand, seen on the H200): no memory lever is offered.
#[test]
fn a_profile_that_failed_on_an_error_not_memory_says_to_fix_it_first() {
    let run = |reason: &str, failure_kind: &str| {
        let mut c = component("fc", &[("params", 0.1 * MIB)], &[]);
        c["error"] = json!({ "kind": "failed", "phase": "batch", "reason": reason, "failure_kind": failure_kind });
        let mut r = result("fc", "activations", "<", 16.0 * MIB, None, None, "fail", 8);
        r["reason"] = json!(format!("measurement failed in phase batch: {reason}"));
        let rep = report(json!({
            "schema": 1, "gate_version": "0.1.0", "commit": null, "spec": "budgets.yaml",
            "testbed": testbed("NVIDIA H200"), "components": { "fc": c }, "ensemble": null, "results": [r],
            "summary": { "status": "fail", "passed": 0, "failed": 1, "regressed": 0, "not_measured": 0,
                "warnings": [], "strict": false },
            "baseline": null, "wall_seconds": 1.0,
        }));
        gate_render::table::render(&rep, false)
    };
    let table = run("matmul is only supported for contiguous tensors", "model");
    assert!(
        table.contains("The profile stopped on an error, not on memory: fix it first")
            && table.contains("gate check --backend cpu --only fc")
            && !table.contains("Recompute"),
        "{table}"
    );
    // Out of memory, as the adapter said, is a memory figure after all: the
    // memory levers stay. The kind is what counts, not the words.
    let oom = run(
        "DriverError(CUDA_ERROR_OUT_OF_MEMORY, \"out of memory\")",
        "out_of_memory",
    );
    assert!(oom.contains("Recompute its largest block"), "{oom}");
    let said_model = run("out of memory, says the model's own message", "model");
    assert!(said_model.contains("fix it first"), "{said_model}");
}

/// A model error after some figures were measured fails those budgets too:
/// the next step names the row the error left without a figure and why,
/// never a lever for the measured `params` (a smaller model, bf16).
#[test]
fn a_model_error_after_params_names_the_failed_row_never_a_smaller_model() {
    let run = |budgets: &[&str]| {
        let mut c = component("lm", &[("params", 0.1 * MIB)], &[]);
        let why = "shape mismatch in broadcast_add, lhs: [2, 8, 32], rhs: [1, 8, 32]";
        c["error"] = json!({ "kind": "failed", "phase": "forward", "reason": why, "failure_kind": "model" });
        let results: Vec<Value> = budgets
            .iter()
            .enumerate()
            .map(|(i, metric)| {
                let measured = (*metric == "params").then_some(0.1 * MIB);
                let mut r = result("lm", metric, "<", 16.0 * MIB, measured, None, "fail", 8 + i);
                r["reason"] = json!(match measured {
                    Some(_) => format!("measured, but the component then failed in phase forward: {why}"),
                    None => format!("measurement failed in phase forward: {why}"),
                });
                r
            })
            .collect();
        let rep = report(json!({
            "schema": 1, "gate_version": "0.1.0", "commit": null, "spec": "budgets.yaml",
            "testbed": testbed("AMD EPYC"), "components": { "lm": c }, "ensemble": null, "results": results,
            "summary": { "status": "fail", "passed": 0, "failed": budgets.len(), "regressed": 0, "not_measured": 0,
                "warnings": [], "strict": false },
            "baseline": null, "wall_seconds": 1.0,
        }));
        let table = gate_render::table::render(&rep, false);
        table
            .lines()
            .find(|l| l.starts_with("next step:"))
            .unwrap_or_default()
            .to_string()
    };
    let both = run(&["params", "activations"]);
    assert!(
        both.starts_with(
            "next step: `lm.activations` has no figure: measurement failed in phase forward: shape mismatch"
        ) && both.contains("fix it first"),
        "{both}"
    );
    let params_only = run(&["params"]);
    assert!(
        params_only.starts_with(
            "next step: `lm.params` is 0.1000 MiB, measured, but the component then failed in phase forward"
        ) && params_only.contains("fix it first"),
        "{params_only}"
    );
    for line in [&both, &params_only] {
        assert!(!line.contains("bf16") && !line.contains("smaller config"), "{line}");
    }
}

/// A forward that frees bytes live before it began (a cache it replaced)
/// adds less than its blocks keep: the table's own lines say why a share is
/// over 100 % or below 0, rather than leaving a negative row unexplained.
#[test]
fn a_share_outside_0_to_100_is_explained_on_its_own_line() {
    let mut c = component("lm", &[("activations", 1000.0)], &[]);
    c["blocks"] = json!([
        { "name": "block#0", "retained_bytes": 1500, "peak_bytes": 3000, "calls": 1, "share_percent": 150.0 },
        { "name": "(unattributed)", "retained_bytes": -500, "peak_bytes": 0, "calls": 0, "share_percent": -50.0 },
    ]);
    let rep = report(json!({
        "schema": 1, "gate_version": "0.1.0", "commit": null, "spec": "budgets.yaml",
        "testbed": testbed("AMD EPYC"), "components": { "lm": c }, "ensemble": null,
        "results": [result("lm", "activations", "<", 16.0 * MIB, Some(1000.0), None, "pass", 8)],
        "summary": { "status": "pass", "passed": 1, "failed": 0, "regressed": 0, "not_measured": 0,
            "warnings": [], "strict": false },
        "baseline": null, "wall_seconds": 1.0,
    }));
    let table = gate_render::table::render(&rep, false);
    let line = |name: &str| {
        table
            .lines()
            .find(|l| l.trim_start().starts_with(name))
            .unwrap_or_default()
    };
    assert!(
        line("block#0").ends_with(
            "over 100 %: the forward freed bytes live before it began, so it added less than this block keeps"
        ),
        "{table}"
    );
    assert!(
        line("(unattributed)").ends_with(
            "below 0: the forward freed bytes live before it began (a cache or buffer it replaced), so its blocks \
             keep more than it added"
        ),
        "{table}"
    );
}

/// A model whose every layer runs inside one span (`model`) shows that
/// span's own blocks, one level deeper, in the table and the comment.
#[test]
fn a_single_top_level_block_shows_its_own_blocks_one_level_deeper() {
    let mut c = component("lm", &[("activations", 1000.0)], &[]);
    c["blocks"] = json!([
        { "name": "model", "retained_bytes": 1000, "peak_bytes": 3000, "calls": 1, "share_percent": 100.0 },
        { "name": "model.block#0", "retained_bytes": 600, "peak_bytes": 900, "calls": 1, "share_percent": null },
        { "name": "model.block#1", "retained_bytes": 400, "peak_bytes": 800, "calls": 1, "share_percent": null },
        { "name": "model.block#1.attn", "retained_bytes": 300, "peak_bytes": 500, "calls": 1, "share_percent": null },
        { "name": "(unattributed)", "retained_bytes": 0, "peak_bytes": 0, "calls": 0, "share_percent": 0.0 },
    ]);
    let rep = report(json!({
        "schema": 1, "gate_version": "0.1.0", "commit": null, "spec": "budgets.yaml",
        "testbed": testbed("AMD EPYC"), "components": { "lm": c }, "ensemble": null,
        "results": [result("lm", "activations", "<", 100.0, Some(1000.0), None, "fail", 8)],
        "summary": { "status": "fail", "passed": 0, "failed": 1, "regressed": 0, "not_measured": 0,
            "warnings": [], "strict": false },
        "baseline": null, "wall_seconds": 1.0,
    }));
    let table = gate_render::table::render(&rep, false);
    let md = markdown::render(&rep, None, markdown::COMMENT_LIMIT);
    // (The comment writes `#` with a joiner after it, so GitHub links no issue.)
    for text in [&table, &md] {
        let rows: Vec<&str> = text
            .lines()
            .filter(|l| l.contains("model.block") && !l.contains("x-axis"))
            .collect();
        assert_eq!(rows.len(), 2, "model.block#0 and model.block#1: {text}");
        assert!(!text.contains("attn"), "one level deeper only: {text}");
    }
}

/// A generation's cache per token is the batch's: the table says it a row
/// too, and how many tokens a row's cache fits on the card.
#[test]
fn a_generations_cache_is_said_per_batch_and_per_row_with_its_capacity() {
    let mut c = component(
        "lm",
        &[
            ("kv_cache_per_token", 2048.0),
            ("kv_capacity_tokens", 40960.0),
            ("prefill_peak", 1e6),
        ],
        &[],
    );
    c["batch_size"] = json!(2);
    let rep = report(json!({
        "schema": 1, "gate_version": "0.1.0", "commit": null, "spec": "budgets.yaml",
        "testbed": testbed("AMD EPYC"), "components": { "lm": c }, "ensemble": null,
        "results": [result("lm", "kv_cache_per_token", "<", 4096.0, Some(2048.0), None, "pass", 8)],
        "summary": { "status": "pass", "passed": 1, "failed": 0, "regressed": 0, "not_measured": 0,
            "warnings": [], "strict": false },
        "baseline": null, "wall_seconds": 1.0,
    }));
    let table = gate_render::table::render(&rep, false);
    assert!(
        table.contains(
            "lm: the cache grows 2.000 KiB a token for its 2 rows (1.000 KiB a row); a row's cache fits 40960 \
             tokens on the card"
        ),
        "{table}"
    );
}

/// A block upstream of a graph cut keeps only what still lives at the
/// forward's end, and its line says what it held at its exit was freed.
#[test]
fn a_block_upstream_of_a_cut_says_so() {
    let mut c = component("lm", &[("activations", 1100.0)], &[]);
    c["blocks"] = json!([
        { "name": "fused", "retained_bytes": 100, "peak_bytes": 200, "calls": 1, "share_percent": 9.1 },
        { "name": "layer", "retained_bytes": 1000, "peak_bytes": 5000, "calls": 1, "share_percent": 90.9,
          "at_exit_bytes": 5000 },
        { "name": "(unattributed)", "retained_bytes": 0, "peak_bytes": 0, "calls": 0, "share_percent": 0.0 },
    ]);
    let rep = report(json!({
        "schema": 1, "gate_version": "0.1.0", "commit": null, "spec": "budgets.yaml",
        "testbed": testbed("AMD EPYC"), "components": { "lm": c }, "ensemble": null,
        "results": [result("lm", "activations", "<", 16.0 * MIB, Some(1100.0), None, "pass", 8)],
        "summary": { "status": "pass", "passed": 1, "failed": 0, "regressed": 0, "not_measured": 0,
            "warnings": [], "strict": false },
        "baseline": null, "wall_seconds": 1.0,
    }));
    let table = gate_render::table::render(&rep, false);
    let line = |name: &str| {
        table
            .lines()
            .find(|l| l.trim_start().starts_with(name))
            .unwrap_or_default()
    };
    assert!(
        line("layer").ends_with("cut after it: 3.906 KiB it held at its exit was freed before the forward ended"),
        "{table}"
    );
    assert!(!line("fused").contains("cut after it"), "{table}");
}

#[test]
fn markdown_with_a_baseline_from_another_testbed() {
    let mut cur = current();
    cur["baseline"]["comparable"] = json!(false);
    for r in cur["results"].as_array_mut().unwrap() {
        r["baseline"] = Value::Null;
        if r["status"] == "regressed" {
            r["status"] = json!("pass");
        }
    }
    cur["summary"]["warnings"] = json!([
        "baseline from a different testbed: not compared (baseline: cuda on NVIDIA H200, fingerprint aaaa; this run: cpu on AMD EPYC, fingerprint bbbb)"
    ]);
    let mut base = baseline_of(&cur);
    base["testbed"] = testbed("NVIDIA H200");
    let md = markdown::render(&report(cur), Some(&report(base)), markdown::COMMENT_LIMIT);
    assert!(md.contains("baseline from a different testbed: not compared"));
    assert!(!md.contains("Text report: baseline"), "never diffed");
    insta::assert_snapshot!(md);
}

#[test]
fn markdown_of_a_pass_without_baseline() {
    let v = json!({
        "schema": 1, "gate_version": "0.1.0", "commit": null, "spec": "examples/mlp.yaml",
        "testbed": testbed("AMD EPYC"),
        "components": { "mlp": component("mlp", &[("params", 0.5 * MIB)], &[("mlp", 400_000)]) },
        "ensemble": null,
        "results": [ result("mlp", "params", "<", MIB, Some(0.5 * MIB), None, "pass", 18) ],
        "summary": { "status": "pass", "passed": 1, "failed": 0, "regressed": 0, "not_measured": 0,
            "warnings": ["no baseline (--baseline none): regressions are not checked"], "strict": false },
        "baseline": null, "wall_seconds": 0.3,
    });
    let md = markdown::render(&report(v), None, markdown::COMMENT_LIMIT);
    assert!(md.contains("no baseline"));
    insta::assert_snapshot!(md);
}

#[test]
fn annotations_one_error_per_failing_budget() {
    let a = annotations::render(&report(current()));
    assert_eq!(
        a.lines()
            .filter(|l| l.starts_with("::error file=budgets.yaml,line="))
            .count(),
        4
    );
    insta::assert_snapshot!(a);
}

#[test]
fn annotations_under_strict_make_warnings_errors() {
    let mut v = current();
    v["summary"]["strict"] = json!(true);
    let a = annotations::render(&report(v));
    assert!(a.contains("::error title=gate::mamba2: not measured"));
    insta::assert_snapshot!(a);
}

/// `regressed` regressions (spec lines 1..) before `failed` failures in the
/// spec, and `warnings` warnings: more than GitHub shows of a type.
fn many(regressed: usize, failed: usize, warnings: usize) -> Report {
    let mut v = current();
    let mut results = Vec::new();
    for i in 0..regressed {
        let c = format!("r{i}");
        results.push(result(
            &c,
            "params",
            "<",
            MIB,
            Some(0.5 * MIB),
            Some(0.25 * MIB),
            "regressed",
            1 + i,
        ));
    }
    for i in 0..failed {
        let c = format!("f{i}");
        results.push(result(&c, "params", "<", MIB, Some(2.0 * MIB), None, "fail", 100 + i));
    }
    v["results"] = json!(results);
    v["summary"]["warnings"] = json!((0..warnings).map(|i| format!("w{i}: not measured")).collect::<Vec<_>>());
    report(v)
}

#[test]
fn annotations_show_failures_first_and_count_what_github_would_drop() {
    let a = annotations::render(&many(3, 12, 11));
    let errors: Vec<&str> = a.lines().filter(|l| l.starts_with("::error ")).collect();
    let warnings: Vec<&str> = a.lines().filter(|l| l.starts_with("::warning ")).collect();
    assert_eq!(
        (errors.len(), warnings.len()),
        (annotations::PER_TYPE, annotations::PER_TYPE)
    );
    // Failures before the regressions that come first in the spec.
    assert!(errors[0].starts_with("::error file=budgets.yaml,line=100,title=gate%3A f0.params fail::"));
    assert!(errors[8].starts_with("::error file=budgets.yaml,line=108,"));
    assert_eq!(
        errors[9],
        "::error title=gate%3A 6 more errors::6 more (3 failures, 3 regressions) of 15 errors not shown: \
         GitHub shows 10 error annotations per step. See this job's step summary, or report.json for every result"
    );
    assert_eq!(warnings[8], "::warning title=gate::w8: not measured");
    assert_eq!(
        warnings[9],
        "::warning title=gate%3A 2 more warnings::2 more (2 warnings) of 11 warnings not shown: \
         GitHub shows 10 warning annotations per step. See this job's step summary, or report.json for every result"
    );
    insta::assert_snapshot!(a);
}

#[test]
fn annotations_under_strict_put_warnings_after_failures_and_regressions() {
    let mut r = many(3, 4, 5);
    r.summary.strict = true;
    let a = annotations::render(&r);
    assert_eq!(a.lines().count(), annotations::PER_TYPE);
    assert!(a.lines().all(|l| l.starts_with("::error ")), "{a}");
    let last: Vec<&str> = a.lines().skip(7).collect();
    assert_eq!(
        last,
        [
            "::error title=gate::w0: not measured",
            "::error title=gate::w1: not measured",
            "::error title=gate%3A 3 more errors::3 more (3 warnings) of 12 errors not shown: \
             GitHub shows 10 error annotations per step. See this job's step summary, or report.json for every result",
        ]
    );
}

#[test]
fn annotations_at_the_limit_are_all_shown() {
    let a = annotations::render(&many(0, 10, 10));
    assert_eq!(a.lines().count(), 20);
    assert!(!a.contains("more"), "{a}");
    assert!(a.contains("line=109,"), "{a}");
    assert!(a.contains("::warning title=gate::w9: not measured"), "{a}");
}

const HOSTILE: &str =
    "@org/team <img src=x onerror=alert(1)> %0A::error::pwned\n::warning::x `code` | pipe *b* [l](http://e) &amp;";

fn hostile() -> Report {
    let mut v = current();
    let c = v["components"]["tft"].clone();
    v["components"].as_object_mut().unwrap().insert(HOSTILE.into(), c);
    v["results"][0]["component"] = json!(HOSTILE);
    v["components"][HOSTILE]["blocks"][0]["name"] = json!("@here <script>");
    v["summary"]["warnings"] = json!([format!("{HOSTILE}: not measured")]);
    v["spec"] = json!("spec,with:odd%chars.yaml");
    report(v)
}

#[test]
fn hostile_names_are_escaped_in_markdown() {
    let md = markdown::render(&hostile(), None, markdown::COMMENT_LIMIT);
    assert!(!md.contains("<img"), "no raw HTML");
    assert!(!md.contains("<script"), "no raw HTML");
    assert!(!md.contains("@org"), "no mention");
    assert!(!md.contains("@here"), "no mention");
    assert!(
        md.contains("@\u{200D}org/team &lt;img src=x onerror=alert\\(1\\)&gt;")
            || md.contains("@\u{200D}org/team &lt;img")
    );
    for line in md.lines().filter(|l| l.starts_with("| ") && l.contains("org/team")) {
        // The row keeps its 9 cells: the name's pipe is escaped.
        assert_eq!(line.matches(" | ").count(), 8, "{line}");
    }
    assert!(
        !md.lines().any(|l| l.starts_with("::")),
        "no line starts a workflow command"
    );
    insta::assert_snapshot!(md);
}

#[test]
fn hostile_names_are_escaped_in_annotations() {
    let a = annotations::render(&hostile());
    for line in a.lines() {
        assert!(line.starts_with("::error ") || line.starts_with("::warning "), "{line}");
    }
    assert!(a.contains("file=spec%2Cwith%3Aodd%25chars.yaml"), "{a}");
    assert!(
        a.contains("%250A%3A%3Aerror%3A%3Apwned%0A%3A%3Awarning"),
        "properties: {a}"
    );
    assert!(a.contains("%250A::error::pwned%0A::warning::x"), "data: {a}");
    insta::assert_snapshot!(a);
}

#[test]
fn escape_rules() {
    assert_eq!(markdown::escape("a|b"), "a\\|b");
    assert_eq!(markdown::escape("<b>&"), "&lt;b&gt;&amp;");
    assert_eq!(markdown::escape("@me"), "@\u{200D}me");
    assert_eq!(markdown::escape("x\ny\rz"), "x y z");
    assert_eq!(markdown::escape("`tick`"), "\\`tick\\`");
    let long = "n".repeat(10_000);
    assert_eq!(markdown::escape(&long).chars().count(), markdown::NAME_LIMIT + 1);
    assert_eq!(annotations::escape_data("100%\r\n"), "100%25%0D%0A");
    assert_eq!(annotations::escape_property("a:b,c"), "a%3Ab%2Cc");
}

#[test]
fn the_comment_never_exceeds_65536_characters() {
    let mut v = current();
    let tft = v["components"]["tft"].clone();
    let row = v["results"][0].clone();
    let mut results = Vec::new();
    for i in 0..3000 {
        let name = format!("{i}-{}", "x".repeat(10_000));
        v["components"]
            .as_object_mut()
            .unwrap()
            .insert(name.clone(), tft.clone());
        let mut r = row.clone();
        r["component"] = json!(name);
        results.push(r);
    }
    v["results"] = Value::Array(results);
    v["summary"]["warnings"] = json!((0..500)
        .map(|i| format!("warning {i} {}", "w".repeat(5000)))
        .collect::<Vec<_>>());
    let r = report(v);
    let base = report(baseline_of(&current()));
    let md = markdown::render(&r, Some(&base), markdown::COMMENT_LIMIT);
    assert!(md.chars().count() <= markdown::COMMENT_LIMIT, "{}", md.chars().count());
    assert!(
        md.contains("**Truncated** to fit GitHub's 65536-character limit"),
        "says so"
    );
    assert!(md.contains("table rows"), "names what was left out");
    assert!(md.trim_end().ends_with("</sub>"), "the footer survives");
    // And with the marker the comment adds, still within GitHub's limit.
    let full = gate_github::comment::with_marker("gate", &markdown::render(&r, None, markdown::COMMENT_LIMIT - 30));
    assert!(full.chars().count() <= markdown::COMMENT_LIMIT);
}

#[test]
fn diff_fence_survives_backticks_in_names() {
    let mut cur = current();
    let c = cur["components"]["mlp"].clone();
    cur["components"]
        .as_object_mut()
        .unwrap()
        .insert("a```b````c".into(), c);
    cur["results"][2]["component"] = json!("a```b````c");
    let base = report(baseline_of(&cur));
    let md = markdown::render(&report(cur), Some(&base), markdown::COMMENT_LIMIT);
    assert!(md.contains("`````diff\n"), "fence longer than any run inside");
}

/// An acknowledged regression: a warning annotation at its line naming who
/// added the label, and a comment cell that escapes the login and the label
/// (both come from the report, an artifact).
#[test]
fn an_acknowledged_regression_is_a_named_warning_everywhere() {
    let mut v = current();
    for r in v["results"].as_array_mut().unwrap() {
        if r["status"] == "regressed" {
            r["status"] = json!("acknowledged");
        }
    }
    v["summary"]["regressed"] = json!(0);
    v["summary"]["acknowledged"] = json!(1);
    v["summary"]["acknowledgement"] =
        json!({ "label": "gate:accept-regression", "by": "octocat", "at": "2026-12-01T10:20:30Z" });
    let a = annotations::render(&report(v.clone()));
    let line = a.lines().find(|l| l.contains("acknowledged")).unwrap();
    assert_eq!(
        line,
        "::warning file=budgets.yaml,line=30,title=gate%3A mlp.training_peak acknowledged::mlp.training_peak: \
         6.000 MiB grew from 5.000 MiB (baseline) by more than the 5%25 tolerance \
         (acknowledged by @octocat via `gate:accept-regression` at 2026-12-01T10:20:30Z)"
    );
    let md = markdown::render(&report(v.clone()), None, markdown::COMMENT_LIMIT);
    assert!(
        md.contains(
            "| 📈 regressed, acknowledged by @\u{200D}octocat via `gate:accept-regression` at 2026-12-01T10:20:30Z |"
        ),
        "{md}"
    );
    assert!(md.contains("0 regressed, 1 not measured, 1 acknowledged"), "{md}");
    // A hostile login or label from an artifact stays text.
    v["summary"]["acknowledgement"] = json!({ "label": "<b>x</b>", "by": "a|b`c", "at": "[l](http://e)" });
    let md = markdown::render(&report(v), None, markdown::COMMENT_LIMIT);
    assert!(
        md.contains("| 📈 regressed, acknowledged by @\u{200D}a\\|b\\`c via &lt;b&gt;x&lt;/b&gt; at \\[l\\](http:\u{200D}//e) |"),
        "{md}"
    );
}
