//! GPU tests: only with `--features cuda` and a GPU (CI has neither; they are
//! run on the H200 by hand, see docs/gpu.md). Run them from the repository
//! root; set GATE_BIN to the CUDA gate binary when it was built elsewhere.
#![cfg(feature = "cuda")]

use std::process::Command;

/// The gate binary: `GATE_BIN` when the tests run on another machine than
/// the one that built them (the GPU machine), else the one cargo built
/// beside them (crates/gate-cli's: `cargo test --features cuda` at the root
/// builds it).
fn gate_bin() -> String {
    std::env::var("GATE_BIN").unwrap_or_else(|_| {
        let test = std::env::current_exe().expect("the test binary's path");
        let dir = test
            .parent()
            .and_then(std::path::Path::parent)
            .expect("<target>/<profile>/deps");
        dir.join("gate").display().to_string()
    })
}

/// The repository root: where the tests were built, or, when they run on
/// another machine (`GATE_BIN` set), the folder they are run from.
fn repo_root() -> std::path::PathBuf {
    match std::env::var_os("GATE_BIN") {
        Some(_) => std::env::current_dir().expect("a current folder"),
        None => env!("GATE_REPO_ROOT").into(),
    }
}

fn gate(args: &[&str]) -> (i32, serde_json::Value) {
    let out = tempfile::tempdir().unwrap();
    let o = Command::new(gate_bin())
        .args(args)
        .arg("--out")
        .arg(out.path())
        .current_dir(repo_root())
        .output()
        .unwrap();
    let report = std::fs::read_to_string(out.path().join("report.json")).unwrap_or_else(|_| "null".into());
    (o.status.code().unwrap_or(-1), serde_json::from_str(&report).unwrap())
}

#[test]
fn mlp_on_cuda_gives_exact_pool_bytes_close_to_the_cpu_figures() {
    let (code, gpu) = gate(&["check", "--backend", "cuda", "--budgets", "examples/mlp.yaml"]);
    assert_eq!(code, 0);
    let (_, cpu) = gate(&["check", "--budgets", "examples/mlp.yaml"]);
    assert_eq!(gpu["testbed"]["backend"], "cuda");
    let g = &gpu["components"]["mlp"];
    let c = &cpu["components"]["mlp"];
    // Pool bytes carry no tensor metadata: params are the closed form, rounded to the allocator's granularity.
    let params = g["metrics"]["params"]["value"].as_f64().unwrap();
    let analytic = g["analytic_params_bytes"].as_f64().unwrap();
    assert!(
        params >= analytic && params <= analytic * 1.05,
        "{params} vs {analytic}"
    );
    for m in ["params", "gradients", "optimizer"] {
        let (x, y) = (
            c["metrics"][m]["value"].as_f64().unwrap(),
            g["metrics"][m]["value"].as_f64().unwrap(),
        );
        assert!((x - y).abs() / x < 0.05, "{m}: cpu {x} gpu {y}");
    }
    assert!(g["metrics"]["device_used"]["value"].as_f64().unwrap() > params);
    assert!(g["context_reserve_bytes"].as_f64().unwrap() > 0.0);
}

#[test]
fn an_emulated_small_card_turns_out_of_memory_into_a_failed_measurement() {
    let (code, r) = gate(&[
        "check",
        "--backend",
        "cuda",
        "--emulate-capacity",
        "--budgets",
        "examples/seed-report.yaml",
    ]);
    assert_eq!(code, 1);
    let tft = &r["components"]["tft"];
    assert!(tft["emulated_block_bytes"].as_f64().unwrap() > 0.0);
}

/// On CUDA a dropout mask is drawn on the device from one seed of the step
/// (`crates/gate-sdk/src/sdk/cuda_dropout.rs`): the same step seed must give the same mask
/// (a checkpointed block's recompute depends on it), another seed another
/// mask, with about `p` of the elements dropped and the rest scaled.
#[test]
fn device_dropout_masks_replay_from_the_step_seed() -> gate::candle_core::Result<()> {
    use gate::candle_core::{DType, Device, Tensor};
    let dev = Device::new_cuda(0)?;
    let x = Tensor::ones((256, 4096), DType::F32, &dev)?;
    let mask = |seed: u64| -> gate::candle_core::Result<Vec<f32>> {
        gate::Step::train(seed)
            .dropout(&x, 0.1)?
            .flatten_all()?
            .to_vec1::<f32>()
    };
    let (a, b, c) = (mask(7)?, mask(7)?, mask(8)?);
    assert_eq!(a, b, "the same seed replays the mask");
    assert_ne!(a, c, "another seed draws another mask");
    let dropped = a.iter().filter(|v| **v == 0.0).count() as f64 / a.len() as f64;
    assert!((dropped - 0.1).abs() < 0.002, "dropped {dropped}");
    let scale = (1.0 / 0.9) as f32;
    assert!(a.iter().all(|v| *v == 0.0 || *v == scale));
    Ok(())
}

/// `gate::optim::SlicedAdamW` on the GPU: slices written back with
/// `slice_set` (a copy kernel into the parameter's storage) give candle-nn's
/// AdamW to the bit, as on the CPU (crates/gate-sdk/src/sdk/optim.rs).
#[test]
fn sliced_adamw_on_cuda_equals_candle_nns_adamw_bit_for_bit() -> gate::candle_core::Result<()> {
    use gate::candle_core::{Device, Tensor, Var};
    use gate::candle_nn::optim::{AdamW, ParamsAdamW};
    use gate::candle_nn::Optimizer;
    use gate::optim::SlicedAdamW;
    let dev = Device::new_cuda(0)?;
    let vars = || -> gate::candle_core::Result<Vec<Var>> {
        let filled = |n: usize| Tensor::arange(0f32, n as f32, &dev)?.affine(0.37, 0.11)?.sin();
        Ok(vec![
            Var::from_tensor(&filled(251 * 64 * 3)?.reshape((251, 64, 3))?)?,
            Var::from_tensor(&filled(1000)?)?,
        ])
    };
    let (a, b) = (vars()?, vars()?);
    let params = ParamsAdamW {
        lr: 0.05,
        weight_decay: 0.1,
        ..Default::default()
    };
    let mut whole = AdamW::new(a.clone(), params.clone())?;
    let mut sliced = SlicedAdamW::new(b.clone(), params)?.with_slice(4099);
    for step in 1..=3 {
        let loss = |vs: &[Var]| -> gate::candle_core::Result<Tensor> {
            let x = (vs[0].as_tensor().sqr()?.sum_all()? * step as f64)?;
            x + vs[1].as_tensor().sin()?.sum_all()?
        };
        whole.backward_step(&loss(&a)?)?;
        sliced.backward_step(&loss(&b)?)?;
    }
    for (x, y) in a.iter().zip(&b) {
        let bits = |v: &Var| -> gate::candle_core::Result<Vec<u32>> {
            Ok(v.flatten_all()?
                .to_vec1::<f32>()?
                .into_iter()
                .map(f32::to_bits)
                .collect())
        };
        assert_eq!(bits(x)?, bits(y)?);
    }
    Ok(())
}

/// The checkpointed TFT's hand-written backward (`crates/gate-builtins/src/tft/taped.rs`)
/// on the GPU: its gradients equal those of a reference that keeps every
/// chunk's graph (same chunks, same device-drawn dropout masks), and the
/// loss is the same.
#[test]
fn checkpointed_tft_gradients_on_cuda_equal_the_full_graph() -> gate::candle_core::Result<()> {
    use gate::candle_core::{DType, Device};
    use gate::{ParamStore, RunCtx, Step, Workload};
    use gate_builtins::tft::{config::TftConfig, Tft};
    let dev = Device::new_cuda(0)?;
    // Prescale width = hidden width, as in the original config: the form written by hand.
    let cfg = TftConfig {
        input_dim: 1 + 3 + 4,
        hidden_dim: 8,
        num_heads: 2,
        num_layers: 2,
        prediction_horizon: 3,
        sequence_length: 6,
        num_quantiles: 3,
        num_static_features: 1,
        num_known_features: 3,
        num_unknown_features: 4,
        dropout: 0.1,
        prescale_dim: 8,
    };
    let tft = Tft::new(cfg).checkpointed(5).expect("the TFT checkpoints");
    let ctx = RunCtx::new(dev.clone(), DType::F32, 3).with_seed(11);
    let store = ParamStore::new(4);
    let model = tft.build(store.builder(DType::F32, &dev), &ctx)?;
    let batch = tft.batch(&ctx, 9)?;
    // `loss` runs the chunks with their graphs kept: the reference.
    let reference = model.loss(&batch, &Step::train(5))?;
    let want = reference.backward()?;
    let fwd = model.forward_train(&batch, &Step::train(5))?;
    let gap = (reference - fwd.loss())?.abs()?.to_scalar::<f32>()?;
    assert!(gap < 1e-5, "losses differ by {gap}");
    let got = fwd.backward(&store.vars())?;
    for (name, var) in store.named_vars() {
        let a = want
            .get(var.as_tensor())
            .unwrap_or_else(|| panic!("`{name}`: no reference gradient"));
        let b = got
            .get(var.as_tensor())
            .unwrap_or_else(|| panic!("`{name}`: no gradient"));
        let scale = a.abs()?.max_all()?.to_scalar::<f32>()?.max(1e-12);
        let diff = (a - b)?.abs()?.max_all()?.to_scalar::<f32>()?;
        assert!(diff <= 1e-4 * scale, "`{name}`: relative difference {}", diff / scale);
    }
    Ok(())
}

/// The adopter example's transformer (docs/sdk.md §10), built here from its
/// source: the SDK on the GPU is this crate's. Its `pub` items are the
/// adopter crate's API there, private to this test here.
#[allow(dead_code, unreachable_pub)]
#[path = "../examples/adopter/crates/ml/src/transformer.rs"]
mod transformer;

/// Whole-block checkpointing on the GPU: the transformer of lm.yaml with
/// every block checkpointed whole gives the plain model's loss and
/// gradients, the dropout masks drawn on the device from the same seeds.
#[test]
fn transformer_blocks_checkpointed_whole_on_cuda_give_the_plain_gradients() -> gate::candle_core::Result<()> {
    use gate::candle_core::{DType, Device};
    use gate::{ParamStore, RunCtx, Step, Workload};
    use transformer::{GptConfig, TinyGpt};
    let dev = Device::new_cuda(0)?;
    let ctx = RunCtx::new(dev.clone(), DType::F32, 8).with_seed(7);
    let run = |checkpoint_blocks: bool| -> gate::candle_core::Result<_> {
        let w = TinyGpt::from_config(GptConfig {
            checkpoint_blocks,
            ..GptConfig::default()
        })
        .expect("a valid config");
        let store = ParamStore::new(4);
        let model = w.build(store.builder(DType::F32, &dev), &ctx)?;
        let batch = w.batch(&ctx, 9)?;
        let fwd = model.forward_train(&batch, &Step::train(5))?;
        let loss = fwd.loss().to_scalar::<f32>()?;
        let grads = fwd.backward(&store.vars())?;
        let named: Vec<(String, gate::candle_core::Tensor)> = store
            .named_vars()
            .into_iter()
            .map(|(n, v)| {
                let g = grads
                    .get(v.as_tensor())
                    .unwrap_or_else(|| panic!("`{n}`: no gradient"))
                    .clone();
                (n, g)
            })
            .collect();
        Ok((loss, named))
    };
    let (plain_loss, plain) = run(false)?;
    let (ck_loss, ck) = run(true)?;
    assert_eq!(plain_loss, ck_loss, "the same masks, the same loss");
    for ((name, a), (_, b)) in plain.iter().zip(&ck) {
        let scale = a.abs()?.max_all()?.to_scalar::<f32>()?.max(1e-12);
        let diff = (a - b)?.abs()?.max_all()?.to_scalar::<f32>()?;
        assert!(diff <= 1e-4 * scale, "`{name}`: relative difference {}", diff / scale);
    }
    Ok(())
}
