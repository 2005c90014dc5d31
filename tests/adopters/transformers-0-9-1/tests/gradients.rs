//! At the configs of budgets.yaml (the workloads' defaults): each model
//! builds exactly its closed form, its loss is finite, and backward reaches
//! only the parameters listed here. candle-nn's fused `rms_norm`,
//! `layer_norm` and `softmax_last_dim` have no backward, so the graph stops
//! at them: in llama and mamba at the final norm, in BERT at every
//! LayerNorm, in T5 (whose layer norm is written out) at the attention
//! softmax. The team's training has the same holes; gate's figures measure
//! these steps as they are.

use gate::{Lm, LmConfig, ParamStore, RunCtx, Step, Workload};
use transformers_team_0_9_1::{bert::BertMlm, llama::LlamaLm, mamba::MambaLm, t5::T5Lm};

/// Builds `W` at its default config with `batch` rows; returns (parameter
/// tensors, the names of those that get a gradient).
fn coverage<W: Workload>(batch: usize) -> candle_core::Result<(usize, Vec<String>)> {
    coverage_of(W::from_config(W::Config::default()).expect("a valid config"), batch)
}

fn coverage_of<W: Workload>(w: W, batch: usize) -> candle_core::Result<(usize, Vec<String>)> {
    let ctx = RunCtx::cpu(batch);
    let store = ParamStore::new(ctx.seed);
    let model = w.build(store.builder(ctx.dtype, &ctx.device), &ctx)?;
    if w.param_count().closed_form {
        assert_eq!(store.elem_count(), w.param_count().trainable, "{}", W::KIND);
    }
    let loss = model.loss(&w.batch(&ctx, 1)?, &Step::train(0))?;
    assert!(loss.to_scalar::<f32>()?.is_finite(), "{}", W::KIND);
    let grads = loss.backward()?;
    let vars = store.named_vars();
    let reached = vars.iter().filter(|(_, v)| grads.get(v.as_tensor()).is_some());
    Ok((vars.len(), reached.map(|(n, _)| n.clone()).collect()))
}

#[test]
fn llama_trains_only_its_lm_head() -> candle_core::Result<()> {
    // budgets.yaml's llama, written as its config.json would be.
    let config = LmConfig {
        seq_len: 64,
        model: serde_json::json!({
            "vocab_size": 1000, "hidden_size": 128, "intermediate_size": 344,
            "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2,
            "max_position_embeddings": 256, "rms_norm_eps": 1e-5,
        }),
        ..LmConfig::default()
    };
    let llama = Lm::<LlamaLm>::from_config(config).expect("a valid config");
    assert_eq!(coverage_of(llama, 2)?, (39, vec!["lm_head.weight".to_string()]));
    Ok(())
}

#[test]
fn mamba_trains_only_its_tied_embedding() -> candle_core::Result<()> {
    assert_eq!(coverage::<MambaLm>(1)?, (42, vec!["embedding.weight".to_string()]));
    Ok(())
}

#[test]
fn bert_trains_only_its_decoder() -> candle_core::Result<()> {
    let (tensors, reached) = coverage::<BertMlm>(2)?;
    assert_eq!(tensors, 75);
    assert_eq!(
        reached,
        ["cls.predictions.decoder.weight", "cls.predictions.decoder.bias"]
    );
    Ok(())
}

#[test]
fn t5_trains_31_of_47_tensors() -> candle_core::Result<()> {
    let (tensors, reached) = coverage::<T5Lm>(2)?;
    assert_eq!((tensors, reached.len()), (47, 31), "{reached:?}");
    Ok(())
}
