//! The forecaster trains, and its built model has the closed form's parameters.

use gate::candle_nn::optim::{AdamW, Optimizer, ParamsAdamW};
use gate::{ParamStore, RunCtx, Step, Workload};
use ml::{ForecasterConfig, GruForecaster};

#[test]
fn builds_the_closed_form_and_learns() -> gate::candle_core::Result<()> {
    let cfg = ForecasterConfig {
        input_dim: 4,
        hidden_dim: 8,
        seq_len: 6,
        horizon: 3,
        dropout: 0.0,
    };
    let w = GruForecaster::from_config(cfg.clone()).expect("a valid config");
    let ctx = RunCtx::cpu(16);
    let store = ParamStore::new(ctx.seed);
    let model = w.build(store.builder(ctx.dtype, &ctx.device), &ctx)?;
    assert_eq!(store.elem_count(), GruForecaster::closed_form(&cfg));
    let batch = w.batch(&ctx, 1)?;
    let first = model.loss(&batch, &Step::eval())?.to_scalar::<f32>()?;
    let mut opt = AdamW::new(
        store.vars(),
        ParamsAdamW {
            lr: 1e-2,
            ..Default::default()
        },
    )?;
    for i in 0..30 {
        let loss = model.loss(&batch, &Step::train(i))?;
        opt.step(&loss.backward()?)?;
    }
    let last = model.loss(&batch, &Step::eval())?.to_scalar::<f32>()?;
    assert!(last < first * 0.8, "loss {first} -> {last}");
    Ok(())
}
