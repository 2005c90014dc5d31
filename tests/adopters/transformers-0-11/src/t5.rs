//! candle-transformers' T5, encoder-decoder with its LM head, gated as it
//! ships: `T5ForConditionalGeneration::load` and its `forward` (the next
//! target token's logits).

use std::cell::RefCell;

use candle_core::{IndexOp, Result, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::t5::{Config, T5ForConditionalGeneration};
use gate::{Batch, Model, ParamCount, Problems, RunCtx, Step, Workload};
use serde::{Deserialize, Serialize};

/// `config:` of a `t5` component: the model, the source and target lengths.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct T5Config {
    pub vocab_size: usize,
    pub d_model: usize,
    pub d_kv: usize,
    pub d_ff: usize,
    pub num_layers: usize,
    pub num_decoder_layers: usize,
    pub num_heads: usize,
    pub relative_attention_num_buckets: usize,
    pub tie_word_embeddings: bool,
    pub source_len: usize,
    pub target_len: usize,
}

impl Default for T5Config {
    fn default() -> Self {
        T5Config {
            vocab_size: 1000,
            d_model: 128,
            d_kv: 32,
            d_ff: 512,
            num_layers: 2,
            num_decoder_layers: 2,
            num_heads: 4,
            relative_attention_num_buckets: 32,
            tie_word_embeddings: true,
            source_len: 64,
            target_len: 16,
        }
    }
}

#[derive(Debug)]
pub struct T5Lm(T5Config);

impl Workload for T5Lm {
    const KIND: &'static str = "t5";
    type Config = T5Config;

    fn from_config(c: T5Config) -> std::result::Result<Self, Problems> {
        let mut p = Problems::new();
        p.positive("source_len", c.source_len);
        p.positive("target_len", c.target_len);
        p.positive("num_decoder_layers", c.num_decoder_layers);
        p.finish(T5Lm(c))
    }

    fn config(&self) -> &T5Config {
        &self.0
    }

    /// The shared embedding; per encoder layer q/k/v/o, wi/wo and two
    /// layer norms, per decoder layer self and cross attention, wi/wo and
    /// three; each stack's relative-attention bias (first block) and final
    /// norm; an `lm_head` unless tied. No biases.
    fn param_count(&self) -> ParamCount {
        let c = &self.0;
        let (v, d, f) = (c.vocab_size as u64, c.d_model as u64, c.d_ff as u64);
        let (inner, bias) = (
            (c.num_heads * c.d_kv) as u64,
            (c.relative_attention_num_buckets * c.num_heads) as u64,
        );
        let encoder = c.num_layers as u64 * (4 * d * inner + 2 * d * f + 2 * d) + bias + d;
        let decoder = c.num_decoder_layers as u64 * (8 * d * inner + 2 * d * f + 3 * d) + bias + d;
        let lm_head = if c.tie_word_embeddings { 0 } else { d * v };
        ParamCount::new(v * d + encoder + decoder + lm_head, 0)
    }

    fn build(&self, vb: VarBuilder, _ctx: &RunCtx) -> Result<Box<dyn Model>> {
        let c = &self.0;
        let cfg = Config {
            vocab_size: c.vocab_size,
            d_model: c.d_model,
            d_kv: c.d_kv,
            d_ff: c.d_ff,
            num_layers: c.num_layers,
            num_decoder_layers: Some(c.num_decoder_layers),
            num_heads: c.num_heads,
            relative_attention_num_buckets: c.relative_attention_num_buckets,
            tie_word_embeddings: c.tie_word_embeddings,
            use_cache: false,
            ..Config::default()
        };
        Ok(Box::new(T5Model(RefCell::new(T5ForConditionalGeneration::load(
            vb, &cfg,
        )?))))
    }

    /// A source sequence, a target prefix, and the target token after it.
    fn batch(&self, ctx: &RunCtx, seed: u64) -> Result<Batch> {
        let (c, b) = (&self.0, ctx.batch_size);
        let source = crate::tokens(seed, b, c.source_len, c.vocab_size, &ctx.device)?;
        let target = crate::tokens(seed + 1, b, c.target_len + 1, c.vocab_size, &ctx.device)?;
        let prefix = target.i((.., ..c.target_len))?.contiguous()?;
        Ok(Batch::new(vec![
            source,
            prefix,
            target.i((.., c.target_len))?.contiguous()?,
        ]))
    }
}

/// `forward` takes `&mut self` (its KV cache, off here).
struct T5Model(RefCell<T5ForConditionalGeneration>);

impl Model for T5Model {
    fn loss(&self, batch: &Batch, _step: &Step) -> Result<Tensor> {
        crate::lm_loss(&self.predict(batch)?, &batch.tensors[2])
    }

    fn predict(&self, batch: &Batch) -> Result<Tensor> {
        self.0.borrow_mut().forward(&batch.tensors[0], &batch.tensors[1])
    }
}
