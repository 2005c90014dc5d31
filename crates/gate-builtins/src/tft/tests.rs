//! Behaviour of the whole model on tiny configs (fast in debug builds).

use candle_core::{DType, Device, Result, Tensor, Var};
use candle_nn::optim::{AdamW, Optimizer, ParamsAdamW};

use super::config::TftConfig;
use super::{data, Tft};
use gate::{Batch, Model, ParamStore, RunCtx, Step, Workload};

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
    RunCtx::new(Device::Cpu, DType::F32, batch_size).with_seed(11)
}

/// `ctx(batch_size)` in `dtype`, its master copy in `master` (RunCtx is
/// non-exhaustive outside gate: set field by field, as a team's test does).
fn ctx_in(batch_size: usize, dtype: DType, master: Option<DType>) -> RunCtx {
    let mut c = ctx(batch_size);
    c.dtype = dtype;
    c.master_dtype = master;
    c
}

/// A model over plain (untracked) weights: the store is filled by a trainable build first.
fn inference_model(tft: &Tft, seed: u64) -> Result<Box<dyn Model>> {
    let store = ParamStore::new(seed);
    tft.build(store.builder(DType::F32, &Device::Cpu), &ctx(1))?;
    tft.build(store.detached(DType::F32, &Device::Cpu), &ctx(1))
}

/// docs/models.md §1's closed form, written out here on its own.
fn closed_form(c: &TftConfig) -> u64 {
    let glu = |i: u64, o: u64| 2 * o * (i + 1);
    let gan = |i: u64, o: u64| glu(i, o) + 2 * o;
    let grn = |i: u64, h: u64, o: u64, ctx: u64| {
        h * (i + 1) + ctx * h + h * (h + 1) + gan(h, o) + if i != o { 3 * o } else { 0 }
    };
    let h = c.hidden_dim as u64;
    let dc = c.prescale_dim as u64;
    let vsn = |v: u64, ctx: u64| match v {
        0 => 0,
        1 => grn(dc, dc.min(h), h, 0),
        _ => v * grn(dc, dc.min(h), h, 0) + grn(v * dc, h.min(v), v, ctx),
    };
    let (vs, vk, vo) = (
        c.num_static_features as u64,
        c.num_known_features as u64,
        c.num_unknown_features as u64,
    );
    let d = h / c.num_heads as u64;
    let q = c.num_quantiles as u64;
    2 * dc * (vs + vk + vo)
        + vsn(vs, 0)
        + 4 * grn(h, h, h, 0)
        + vsn(vk + vo, h)
        + vsn(vk, h)
        + 2 * c.num_layers as u64 * (4 * h * 2 * h + 8 * h)
        + gan(h, h)
        + grn(h, h, h, h)
        + (2 * c.num_heads as u64 + 1) * (h * d + d)
        + d * h
        + gan(h, h)
        + grn(h, h, h, 0)
        + gan(h, h)
        + h * q
        + q
}

#[test]
fn parameter_count_is_the_closed_form_for_three_configs() -> Result<()> {
    let original = TftConfig::default();
    assert_eq!(closed_form(&original), 5_846_644);
    assert_eq!(Tft::new(original.clone()).param_count().trainable, 5_846_644);

    let library_default = TftConfig {
        prescale_dim: 8,
        ..original.clone()
    };
    assert_eq!(closed_form(&library_default), 880_956);
    assert_eq!(Tft::new(library_default).param_count().trainable, 880_956);

    // A third, built for real: the store holds exactly the closed form.
    let third = TftConfig {
        input_dim: 3 + 4 + 20,
        hidden_dim: 32,
        num_heads: 2,
        num_layers: 1,
        num_quantiles: 7,
        num_static_features: 3,
        num_known_features: 4,
        num_unknown_features: 20,
        prescale_dim: 12,
        ..original
    };
    let tft = Tft::new(third.clone());
    assert_eq!(tft.param_count().trainable, closed_form(&third));
    let store = ParamStore::new(1);
    tft.build(store.builder(DType::F32, &Device::Cpu), &ctx(1))?;
    assert_eq!(store.elem_count(), closed_form(&third));
    Ok(())
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
    for cfg in [
        tiny(),
        TftConfig {
            num_static_features: 2,
            input_dim: 9,
            ..tiny()
        },
    ] {
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
    assert!(
        diff(&before.narrow(1, k, 1)?, &after.narrow(1, k, 1)?)? > 1e-4,
        "the changed step must move"
    );
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

/// The encoder VSN concatenates the known and observed prescalers; a copy
/// taken at build time once left it training on the initial weights.
#[test]
fn an_update_to_a_shared_prescaler_reaches_the_encoder() -> Result<()> {
    for checkpoint in [None, Some(5)] {
        let tft = Tft {
            checkpoint,
            ..Tft::new(tiny())
        };
        let store = ParamStore::new(6);
        let model = tft.build(store.builder(DType::F32, &Device::Cpu), &ctx(3))?;
        let batch = tft.batch(&ctx(3), 1)?;
        let before = model.predict(&batch)?;
        for (name, var) in store.named_vars() {
            if name.starts_with("prescalers.observed.") {
                var.set(&(var.as_tensor() * 3.0)?)?;
            }
        }
        let after = model.predict(&batch)?;
        let fresh = tft
            .build(store.detached(DType::F32, &Device::Cpu), &ctx(3))?
            .predict(&batch)?;
        assert_ne!(before.to_vec3::<f32>()?, after.to_vec3::<f32>()?, "{checkpoint:?}");
        assert_eq!(after.to_vec3::<f32>()?, fresh.to_vec3::<f32>()?, "{checkpoint:?}");
    }
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
        let c = ctx_in(2, dtype, None);
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

/// The largest relative difference between two models' parameter gradients,
/// relative to each gradient's own largest magnitude. A gradient that is
/// zero in exact arithmetic (the attention's key biases: a shift of every
/// score of a query leaves its softmax unchanged) is rounding noise, 1e-11
/// against a largest gradient of 0.3 in the tiny config, and moves whenever
/// the forward sums in another order; so no gradient's scale is taken below
/// a ten-thousandth of the largest one's.
fn max_relative_grad_diff(
    store: &ParamStore,
    want: &candle_core::backprop::GradStore,
    got: &candle_core::backprop::GradStore,
) -> Result<f32> {
    let mut pairs = Vec::new();
    for (name, var) in store.named_vars() {
        let a = want.get(var.as_tensor());
        let b = got.get(var.as_tensor());
        match (a, b) {
            (Some(a), Some(b)) => pairs.push((a.abs()?.max_all()?.to_scalar::<f32>()?, (a - b)?)),
            (None, None) => continue,
            _ => panic!("`{name}` has a gradient in one model only"),
        }
    }
    let floor = pairs.iter().map(|(scale, _)| *scale).fold(0f32, f32::max) * 1e-4;
    let mut worst = 0f32;
    for (scale, diff) in pairs {
        let diff = diff.abs()?.max_all()?.to_scalar::<f32>()?;
        worst = worst.max(diff / scale.max(floor).max(1e-12));
    }
    Ok(worst)
}

/// Checkpointed gradients against a reference model's, on the same weights.
fn checkpoint_grads(cfg: TftConfig, chunk: usize, reference_chunked: bool) -> Result<f32> {
    checkpoint_grads_in(cfg, chunk, reference_chunked, DType::F32)
}

/// [`checkpoint_grads`] computing in `dtype` (f32 masters for a half precision).
fn checkpoint_grads_in(cfg: TftConfig, chunk: usize, reference_chunked: bool, dtype: DType) -> Result<f32> {
    let plain = Tft::new(cfg);
    let ck = Tft {
        checkpoint: Some(chunk),
        ..plain.clone()
    };
    let master = (dtype != DType::F32).then_some(DType::F32);
    let c = ctx_in(3, dtype, master);
    let store = ParamStore::with_master(4, master);
    let reference = if reference_chunked { &ck } else { &plain };
    let reference = reference.build(store.builder(dtype, &Device::Cpu), &c)?;
    let model = ck.build(store.builder(dtype, &Device::Cpu), &c)?;
    let batch = plain.batch(&c, 9)?;
    let want = reference.loss(&batch, &Step::train(5))?.backward()?;
    let fwd = model.forward_train(&batch, &Step::train(5))?;
    let loss_gap = (reference.loss(&batch, &Step::train(5))? - fwd.loss())?
        .abs()?
        .to_scalar::<f32>()?;
    assert!(loss_gap < 1e-6, "losses differ by {loss_gap}");
    let got = fwd.backward(&store.vars())?;
    max_relative_grad_diff(&store, &want, &got)
}

/// `tiny` with the prescale width equal to the hidden width, as in the
/// original config: the encoder VSN's backward is then written by hand
/// (`taped`); `tiny`'s resampled GRNs recompute under autograd.
fn tiny_square() -> TftConfig {
    TftConfig {
        prescale_dim: 8,
        ..tiny()
    }
}

#[test]
fn checkpointed_gradients_equal_the_plain_model_without_dropout() -> Result<()> {
    // 3 × 6 = 18 positions: chunks of 4 leave a ragged last one; 18 is one chunk.
    for base in [tiny(), tiny_square()] {
        for chunk in [4, 18, 64] {
            let cfg = TftConfig { dropout: 0.0, ..base };
            let worst = checkpoint_grads(cfg, chunk, false)?;
            assert!(worst <= 1e-5, "chunk {chunk}: relative gradient difference {worst}");
        }
    }
    Ok(())
}

#[test]
fn checkpointed_gradients_replay_the_dropout_masks() -> Result<()> {
    // With dropout the reference keeps every chunk's graph (same chunks, same masks).
    for cfg in [tiny(), tiny_square()] {
        let worst = checkpoint_grads(cfg, 5, true)?;
        assert!(worst <= 1e-5, "relative gradient difference {worst}");
    }
    Ok(())
}

#[test]
fn checkpointed_gradients_in_bf16_follow_the_full_graph() -> Result<()> {
    // The hand-written backward keeps the layer norm in f32, as the forward
    // does; the rest rounds to bf16 (8 bits of mantissa) in its own order.
    let worst = checkpoint_grads_in(tiny_square(), 5, true, DType::BF16)?;
    assert!(worst <= 0.05, "relative gradient difference {worst}");
    Ok(())
}

#[test]
fn chunked_inference_equals_the_plain_prediction() -> Result<()> {
    // tiny: row-wise chunks; tiny_square: the split selection (selection.rs).
    for cfg in [tiny(), tiny_square()] {
        let plain = Tft::new(cfg);
        let ck = Tft {
            checkpoint: Some(4),
            ..plain.clone()
        };
        let a = inference_model(&plain, 3)?;
        let b = inference_model(&ck, 3)?;
        let batch = plain.batch(&ctx(3), 2)?;
        let diff = (a.predict(&batch)? - b.predict(&batch)?)?
            .abs()?
            .max_all()?
            .to_scalar::<f32>()?;
        assert!(diff < 1e-5, "{diff}");
    }
    Ok(())
}

#[test]
fn mixed_precision_computes_in_bf16_and_trains_f32_masters() -> Result<()> {
    let tft = Tft {
        checkpoint: Some(5),
        ..Tft::new(tiny())
    };
    let c = ctx_in(3, DType::BF16, Some(DType::F32));
    let store = ParamStore::with_master(2, Some(DType::F32));
    let model = tft.build(store.builder(DType::BF16, &Device::Cpu), &c)?;
    let batch = tft.batch(&c, 4)?;
    let fwd = model.forward_train(&batch, &Step::train(1))?;
    // Computed in bf16; the loss itself is reduced in f32.
    assert_eq!(fwd.loss().dtype(), DType::F32);
    let grads = fwd.backward(&store.vars())?;
    for (name, var) in store.named_vars() {
        assert_eq!(var.dtype(), DType::F32, "`{name}`");
        let g = grads
            .get(var.as_tensor())
            .unwrap_or_else(|| panic!("`{name}` gets no gradient"));
        assert_eq!(g.dtype(), DType::F32, "`{name}`");
        let norm = g.abs()?.sum_all()?.to_scalar::<f32>()?;
        assert!(norm.is_finite(), "`{name}`: {norm}");
    }
    Ok(())
}

/// `adamw_slice` picks the SDK's sliced AdamW, trains the model to the bit as
/// candle-nn's AdamW does, and is recorded in the config only when set.
#[test]
fn adamw_in_slices_trains_as_candle_nns_and_is_recorded_when_set() -> Result<()> {
    let keys = |slice: usize| super::config::TftKeys {
        adamw_slice: slice,
        ..tiny().keys()
    };
    let whole = Tft::from_config(keys(0)).expect("valid");
    let sliced = Tft::from_config(keys(100)).expect("valid");
    assert!(whole.describe().get("adamw_slice").is_none());
    assert_eq!(sliced.describe()["adamw_slice"], 100);
    assert_eq!(sliced.config().adamw_slice, 100);

    let train = |tft: &Tft| -> Result<Vec<Vec<u32>>> {
        let store = ParamStore::new(5);
        let model = tft.build(store.builder(DType::F32, &Device::Cpu), &ctx(4))?;
        let batch = tft.batch(&ctx(4), 9)?;
        let mut opt: Box<dyn gate::OptimizerStep> = match tft.optimizer(store.vars())? {
            Some(own) => own,
            None => Box::new(AdamW::new(
                store.vars(),
                gate::optim::adamw_params(tft.learning_rate()),
            )?),
        };
        for i in 0..3 {
            let grads = model.loss(&batch, &Step::train(i))?.backward()?;
            opt.step(&grads)?;
        }
        store
            .named_vars()
            .into_iter()
            .map(|(_, v)| {
                Ok(v.flatten_all()?
                    .to_vec1::<f32>()?
                    .into_iter()
                    .map(f32::to_bits)
                    .collect())
            })
            .collect()
    };
    assert!(whole.optimizer(vec![])?.is_none());
    assert_eq!(train(&whole)?, train(&sliced)?);
    Ok(())
}
