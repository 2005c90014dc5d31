//! The transformer has the closed form's parameters, learns, and with every
//! block checkpointed whole gives the plain model's loss and gradients,
//! dropout included.

use gate::candle_core::{Result, Var};
use gate::candle_nn::optim::{AdamW, Optimizer, ParamsAdamW};
use gate::{ParamStore, RunCtx, Step, Workload};
use ml::{GptConfig, TinyGpt};

fn small(checkpoint_blocks: bool) -> GptConfig {
    GptConfig {
        vocab: 64,
        d_model: 16,
        n_heads: 2,
        n_layers: 3,
        seq_len: 12,
        dropout: 0.1,
        checkpoint_blocks,
    }
}

#[test]
fn builds_the_closed_form_and_learns() -> Result<()> {
    let cfg = GptConfig {
        dropout: 0.0,
        ..small(false)
    };
    let w = TinyGpt::from_config(cfg.clone()).expect("a valid config");
    let ctx = RunCtx::cpu(4);
    let store = ParamStore::new(ctx.seed);
    let model = w.build(store.builder(ctx.dtype, &ctx.device), &ctx)?;
    assert_eq!(store.elem_count(), TinyGpt::closed_form(&cfg));
    let batch = w.batch(&ctx, 1)?;
    let first = model.loss(&batch, &Step::eval())?.to_scalar::<f32>()?;
    let mut opt = AdamW::new(
        store.vars(),
        ParamsAdamW {
            lr: 1e-2,
            ..Default::default()
        },
    )?;
    for i in 0..40 {
        let loss = model.loss(&batch, &Step::train(i))?;
        opt.step(&loss.backward()?)?;
    }
    let last = model.loss(&batch, &Step::eval())?.to_scalar::<f32>()?;
    assert!(last < first * 0.8, "loss {first} -> {last}");
    Ok(())
}

/// The loss and every variable's gradient after one training forward and
/// backward, as the runner takes them.
fn step(checkpoint_blocks: bool) -> Result<(f32, Vec<(String, Vec<f32>)>)> {
    let w = TinyGpt::from_config(small(checkpoint_blocks)).expect("a valid config");
    let ctx = RunCtx::cpu(4);
    let store = ParamStore::new(ctx.seed);
    let model = w.build(store.builder(ctx.dtype, &ctx.device), &ctx)?;
    let batch = w.batch(&ctx, 3)?;
    let fwd = model.forward_train(&batch, &Step::train(9))?;
    let loss = fwd.loss().to_scalar::<f32>()?;
    let vars: Vec<Var> = store.vars();
    let grads = fwd.backward(&vars)?;
    let mut out = Vec::new();
    for (name, v) in store.named_vars() {
        let g = grads
            .get(v.as_tensor())
            .unwrap_or_else(|| panic!("{name} has no gradient"));
        out.push((name, g.flatten_all()?.to_vec1::<f32>()?));
    }
    Ok((loss, out))
}

#[test]
fn every_block_checkpointed_whole_gives_the_plain_gradients() -> Result<()> {
    let (plain_loss, plain) = step(false)?;
    let (ck_loss, ck) = step(true)?;
    assert_eq!(plain_loss, ck_loss, "the same dropout masks, the same loss");
    assert_eq!(plain.len(), ck.len());
    for ((name, a), (_, b)) in plain.iter().zip(&ck) {
        let scale = a.iter().fold(0f32, |m, x| m.max(x.abs())).max(1e-3);
        let diff = a.iter().zip(b).fold(0f32, |m, (x, y)| m.max((x - y).abs()));
        assert!(diff <= 1e-5 * scale.max(1.0), "{name}: diff {diff}, scale {scale}");
    }
    Ok(())
}
