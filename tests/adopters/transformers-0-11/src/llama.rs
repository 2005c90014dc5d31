//! candle-transformers' llama, gated as it ships: `Llama::load`, and
//! `Llama::forward` (the next token's logits after the sequence).

use candle_core::{DType, IndexOp, Result, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::llama::{Cache, Config, Llama};
use gate::{Batch, Model, ParamCount, Problems, RunCtx, Step, Workload};
use serde::{Deserialize, Serialize};

/// `config:` of a `llama` component: the shape of the model and the prompt's length.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct LlamaConfig {
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub intermediate_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub num_key_value_heads: usize,
    pub max_position_embeddings: usize,
    pub seq_len: usize,
}

impl Default for LlamaConfig {
    fn default() -> Self {
        LlamaConfig {
            vocab_size: 1000,
            hidden_size: 128,
            intermediate_size: 344,
            num_hidden_layers: 4,
            num_attention_heads: 4,
            num_key_value_heads: 2,
            max_position_embeddings: 256,
            seq_len: 64,
        }
    }
}

impl LlamaConfig {
    fn model(&self) -> Config {
        Config {
            vocab_size: self.vocab_size,
            hidden_size: self.hidden_size,
            intermediate_size: self.intermediate_size,
            num_hidden_layers: self.num_hidden_layers,
            num_attention_heads: self.num_attention_heads,
            num_key_value_heads: self.num_key_value_heads,
            max_position_embeddings: self.max_position_embeddings,
            ..Config::config_7b_v2(false)
        }
    }
}

#[derive(Debug)]
pub struct LlamaLm(LlamaConfig);

impl Workload for LlamaLm {
    const KIND: &'static str = "llama";
    type Config = LlamaConfig;

    fn from_config(c: LlamaConfig) -> std::result::Result<Self, Problems> {
        let mut p = Problems::new();
        p.at_least("seq_len", c.seq_len, 2);
        p.at_least("max_position_embeddings", c.max_position_embeddings, c.seq_len);
        p.finish(LlamaLm(c))
    }

    fn config(&self) -> &LlamaConfig {
        &self.0
    }

    /// Embedding, per layer q/k/v/o (k and v at the kv heads' width), the
    /// gated MLP's three projections and two RMS norms; the final norm and
    /// an untied `lm_head`. No biases.
    fn param_count(&self) -> ParamCount {
        let c = &self.0;
        let (v, h, i) = (c.vocab_size as u64, c.hidden_size as u64, c.intermediate_size as u64);
        let kv = h / c.num_attention_heads as u64 * c.num_key_value_heads as u64;
        let layer = 2 * h * h + 2 * h * kv + 3 * h * i + 2 * h;
        ParamCount::new(v * h + c.num_hidden_layers as u64 * layer + h + h * v, 0)
    }

    fn build(&self, vb: VarBuilder, ctx: &RunCtx) -> Result<Box<dyn Model>> {
        let cfg = self.0.model();
        Ok(Box::new(LlamaModel(Llama::load(vb, &cfg)?, cfg, ctx.dtype)))
    }

    /// `seq_len + 1` tokens a row: the prompt, then the token to predict.
    fn batch(&self, ctx: &RunCtx, seed: u64) -> Result<Batch> {
        let c = &self.0;
        let ids = crate::tokens(seed, ctx.batch_size, c.seq_len + 1, c.vocab_size, &ctx.device)?;
        Ok(Batch::new(vec![
            ids.i((.., ..c.seq_len))?.contiguous()?,
            ids.i((.., c.seq_len))?.contiguous()?,
        ]))
    }
}

struct LlamaModel(Llama, Config, DType);

impl Model for LlamaModel {
    fn loss(&self, batch: &Batch, _step: &Step) -> Result<Tensor> {
        crate::lm_loss(&self.predict(batch)?, &batch.tensors[1])
    }

    fn predict(&self, batch: &Batch) -> Result<Tensor> {
        let ids = &batch.tensors[0];
        // A fresh cache per sequence, without KV caching: its rotary tables are the forward's.
        let mut cache = Cache::new(false, self.2, &self.1, ids.device())?;
        self.0.forward(ids, 0, &mut cache)
    }
}
