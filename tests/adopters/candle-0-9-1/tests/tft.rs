//! On a tiny config: the built model has the closed form's parameters, the
//! loss is finite, and every parameter gets a finite, non-zero gradient.

use gate::{ParamStore, RunCtx, Step, Workload};
use tft_team::{TemporalFusionTransformer, TftConfig};

fn tiny() -> TftConfig {
    TftConfig {
        static_reals: 2,
        known_reals: 2,
        unknown_reals: 3,
        hidden_size: 8,
        attention_heads: 2,
        lstm_layers: 2,
        encoder_length: 6,
        prediction_length: 3,
        quantiles: 3,
        dropout: 0.1,
    }
}

#[test]
fn the_closed_form_counts_the_original_config() {
    // Hand-summed from the block list in src/lib.rs at the default config.
    assert_eq!(TftConfig::default().param_count(), 9_954_315);
}

#[test]
fn every_parameter_gets_a_gradient_and_the_loss_is_finite() -> candle_core::Result<()> {
    let cfg = tiny();
    let w = TemporalFusionTransformer::from_config(cfg.clone()).expect("a valid config");
    let ctx = RunCtx::cpu(4);
    let store = ParamStore::new(ctx.seed);
    let model = w.build(store.builder(ctx.dtype, &ctx.device), &ctx)?;
    assert_eq!(store.elem_count(), cfg.param_count());
    let batch = w.batch(&ctx, 3)?;
    // gate's tensors are this crate's candle 0.9.1 tensors: one type.
    let target: &candle_core::Tensor = &batch.tensors[3];
    assert_eq!(target.dims(), &[4, 3]);
    let loss = model.loss(&batch, &Step::train(1))?;
    let value = loss.to_scalar::<f32>()?;
    assert!(value.is_finite() && value > 0.0, "loss {value}");
    let grads = loss.backward()?;
    for (name, var) in store.named_vars() {
        let g = grads
            .get(var.as_tensor())
            .unwrap_or_else(|| panic!("`{name}` gets no gradient"));
        let norm = g.abs()?.sum_all()?.to_scalar::<f32>()?;
        assert!(norm.is_finite() && norm > 0.0, "`{name}` has gradient norm {norm}");
    }
    let pred = model.predict(&batch)?;
    assert_eq!(pred.dims(), &[4, 3, 3]);
    Ok(())
}
