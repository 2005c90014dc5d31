//! Behaviour of the whole model on tiny configs (fast in debug builds).

use candle_core::{DType, Device, Result, Tensor, Var};
use candle_nn::optim::{AdamW, Optimizer, ParamsAdamW};

use super::config::TftConfig;
use super::{data, Tft};
use crate::workload::{Batch, Model, ParamStore, RunCtx, Step, Workload};

/// Small, with a prescale width different from hidden (so ResampleNorm runs)
/// and a single static variable (the V = 1 path).
fn tiny() -> TftConfig {
    TftConfig {
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
        prescale_dim: 4,
    }
}

fn ctx(batch_size: usize) -> RunCtx {
    RunCtx {
        device: Device::Cpu,
        dtype: DType::F32,
        batch_size,
        seed: 11,
    }
}

/// A model over plain (untracked) weights: the store is filled by a trainable build first.
fn inference_model(tft: &Tft, seed: u64) -> Result<Box<dyn Model>> {
    let store = ParamStore::new(seed);
    tft.build(store.builder(DType::F32, &Device::Cpu), &ctx(1))?;
    tft.build(store.detached(DType::F32, &Device::Cpu), &ctx(1))
}

#[test]
fn built_model_has_exactly_the_closed_form_count() -> Result<()> {
    let configs = [
        tiny(),
        TftConfig {
            num_static_features: 3,
            input_dim: 3 + 3 + 4,
            prescale_dim: 8,
            num_heads: 4,
            num_layers: 1,
            ..tiny()
        },
    ];
    for cfg in configs {
        let tft = Tft::new(cfg.clone());
        let store = ParamStore::new(1);
        tft.build(store.builder(DType::F32, &Device::Cpu), &ctx(2))?;
        assert_eq!(store.elem_count(), tft.param_count().trainable, "{cfg:?}");
    }
    Ok(())
}

#[test]
fn output_is_batch_by_horizon_by_quantiles() -> Result<()> {
    let tft = Tft::new(tiny());
    let model = inference_model(&tft, 1)?;
    let batch = tft.batch(&ctx(5), 3)?;
    assert_eq!(batch.tensors[data::STATIC].dims(), [5, 1]);
    assert_eq!(batch.tensors[data::ENCODER].dims(), [5, 6, 7]);
    assert_eq!(batch.tensors[data::DECODER].dims(), [5, 3, 3]);
    assert_eq!(batch.tensors[data::TARGET].dims(), [5, 3]);
    assert_eq!(model.predict(&batch)?.dims(), [5, 3, 3]);
    Ok(())
}

#[test]
fn every_parameter_gets_a_nonzero_gradient() -> Result<()> {
    for cfg in [tiny(), TftConfig { num_static_features: 2, input_dim: 9, ..tiny() }] {
        let tft = Tft::new(cfg);
        let store = ParamStore::new(2);
        let model = tft.build(store.builder(DType::F32, &Device::Cpu), &ctx(4))?;
        let batch = tft.batch(&ctx(4), 5)?;
        let grads = model.loss(&batch, &Step::train(1))?.backward()?;
        for (name, var) in store.named_vars() {
            let g = grads
                .get(var.as_tensor())
                .unwrap_or_else(|| panic!("`{name}` got no gradient"));
            let norm: f32 = g.abs()?.sum_all()?.to_scalar()?;
            assert!(norm > 0.0, "`{name}` has an all-zero gradient");
        }
    }
    Ok(())
}

#[test]
fn loss_falls_under_adamw_on_the_synthetic_series() -> Result<()> {
    let tft = Tft::new(TftConfig { dropout: 0.0, ..tiny() });
    let store = ParamStore::new(3);
    let model = tft.build(store.builder(DType::F32, &Device::Cpu), &ctx(16))?;
    let batch = tft.batch(&ctx(16), 7)?;
    let params = ParamsAdamW {
        lr: 1e-2,
        ..Default::default()
    };
    let mut opt = AdamW::new(store.vars(), params)?;
    let first: f32 = model.loss(&batch, &Step::eval())?.to_scalar()?;
    for i in 0..40 {
        let loss = model.loss(&batch, &Step::train(i))?;
        opt.backward_step(&loss)?;
    }
    let last: f32 = model.loss(&batch, &Step::eval())?.to_scalar()?;
    assert!(last < 0.5 * first, "loss went from {first} to {last}");
    Ok(())
}

#[test]
fn attention_is_causal_over_the_decoder() -> Result<()> {
    let cfg = tiny();
    let tft = Tft::new(cfg.clone());
    let model = inference_model(&tft, 4)?;
    let batch = tft.batch(&ctx(2), 9)?;
    let before = model.predict(&batch)?;
    // Change every known input of the last decoder step.
    let k = cfg.prediction_horizon - 1;
    let dec = &batch.tensors[data::DECODER];
    let bump = Tensor::ones(dec.dims(), DType::F32, &Device::Cpu)?
        .narrow(1, k, 1)?
        .pad_with_zeros(1, k, 0)?;
    let mut changed = batch.tensors.clone();
    changed[data::DECODER] = (dec + (bump * 5.0)?)?;
    let after = model.predict(&Batch::new(changed))?;
    let diff = |a: &Tensor, b: &Tensor| -> Result<f32> { (a - b)?.abs()?.max_all()?.to_scalar() };
    assert_eq!(diff(&before.narrow(1, 0, k)?, &after.narrow(1, 0, k)?)?, 0.0);
    assert!(diff(&before.narrow(1, k, 1)?, &after.narrow(1, k, 1)?)? > 1e-4, "the changed step must move");
    Ok(())
}

#[test]
fn detached_model_tracks_nothing_and_matches_the_trainable_one() -> Result<()> {
    let tft = Tft::new(tiny());
    let store = ParamStore::new(6);
    let train = tft.build(store.builder(DType::F32, &Device::Cpu), &ctx(3))?;
    let infer = tft.build(store.detached(DType::F32, &Device::Cpu), &ctx(3))?;
    let batch = tft.batch(&ctx(3), 1)?;
    let a = train.predict(&batch)?;
    let b = infer.predict(&batch)?;
    assert!(a.track_op() && !b.track_op());
    assert_eq!(a.to_vec3::<f32>()?, b.to_vec3::<f32>()?);
    Ok(())
}

#[test]
fn same_seed_same_batch_and_loss() -> Result<()> {
    let tft = Tft::new(tiny());
    let run = || -> Result<(Vec<Vec<f32>>, f32)> {
        let store = ParamStore::new(8);
        let model = tft.build(store.builder(DType::F32, &Device::Cpu), &ctx(3))?;
        let batch = tft.batch(&ctx(3), 2)?;
        let loss = model.loss(&batch, &Step::train(5))?.to_scalar::<f32>()?;
        Ok((batch.tensors[data::STATIC].to_vec2()?, loss))
    };
    let (a, b) = (run()?, run()?);
    assert_eq!(a.0, b.0);
    assert_eq!(a.1.to_bits(), b.1.to_bits());
    Ok(())
}

#[test]
fn runs_in_half_precision() -> Result<()> {
    for dtype in [DType::BF16, DType::F16] {
        let tft = Tft::new(tiny());
        let store = ParamStore::new(1);
        let c = RunCtx { dtype, ..ctx(2) };
        let model = tft.build(store.builder(dtype, &Device::Cpu), &c)?;
        let loss = model.loss(&tft.batch(&c, 1)?, &Step::train(1))?;
        let v: f32 = loss.to_dtype(DType::F32)?.to_scalar()?;
        assert!(v.is_finite(), "{dtype:?}: {v}");
        let grads = loss.backward()?;
        let any: Vec<Var> = store.vars();
        assert!(grads.get(any[0].as_tensor()).is_some());
    }
    Ok(())
}
