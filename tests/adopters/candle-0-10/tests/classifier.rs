//! On a small config: the closed form, a finite loss, a gradient for every
//! parameter, and a loss that falls with training.

use candle_nn::optim::{AdamW, Optimizer, ParamsAdamW};
use gate::{ParamStore, RunCtx, Step, Workload};
use sensor_team::{ClassifierConfig, ConvClassifier};

#[test]
fn builds_the_closed_form_and_learns() -> candle_core::Result<()> {
    let cfg = ClassifierConfig {
        channels: 8,
        kernel_size: 3,
        conv_layers: 2,
        seq_len: 32,
        dropout: 0.0,
        ..Default::default()
    };
    let w = ConvClassifier::from_config(cfg.clone()).expect("a valid config");
    let ctx = RunCtx::cpu(16);
    let store = ParamStore::new(ctx.seed);
    let model = w.build(store.builder(ctx.dtype, &ctx.device), &ctx)?;
    assert_eq!(store.elem_count(), cfg.param_count());
    assert_eq!(ClassifierConfig::default().param_count(), 60_549);
    let batch = w.batch(&ctx, 1)?;
    let first = model.loss(&batch, &Step::eval())?.to_scalar::<f32>()?;
    assert!(first.is_finite(), "{first}");
    let grads = model.loss(&batch, &Step::train(0))?.backward()?;
    for (name, var) in store.named_vars() {
        let g = grads
            .get(var.as_tensor())
            .unwrap_or_else(|| panic!("`{name}` gets no gradient"));
        let norm = g.abs()?.sum_all()?.to_scalar::<f32>()?;
        assert!(norm.is_finite() && norm > 0.0, "`{name}` has gradient norm {norm}");
    }
    let mut opt = AdamW::new(
        store.vars(),
        ParamsAdamW {
            lr: 1e-2,
            ..Default::default()
        },
    )?;
    for i in 0..40 {
        opt.step(&model.loss(&batch, &Step::train(i))?.backward()?)?;
    }
    let last = model.loss(&batch, &Step::eval())?.to_scalar::<f32>()?;
    assert!(last < first * 0.8, "loss {first} -> {last}");
    Ok(())
}
