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

/// `config:` of a `llama_gen` component: the model as `llama`'s, and
/// whether the team's loop keeps each step's cache (`keep_history`: a
/// "rewind" buffer that never drops a step, so every old cache stays live).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct LlamaGenConfig {
    pub model: LlamaConfig,
    pub keep_history: bool,
}

/// candle-transformers' llama generating as the team runs it: its own KV
/// `Cache`, greedy decoding. A component with `generate:` runs it.
#[derive(Debug)]
pub struct LlamaGen(LlamaGenConfig);

impl Workload for LlamaGen {
    const KIND: &'static str = "llama_gen";
    type Config = LlamaGenConfig;

    fn from_config(c: LlamaGenConfig) -> std::result::Result<Self, Problems> {
        Ok(LlamaGen(c))
    }

    fn config(&self) -> &LlamaGenConfig {
        &self.0
    }

    fn build(&self, vb: VarBuilder, ctx: &RunCtx) -> Result<Box<dyn Model>> {
        let cfg = self.0.model.model();
        let lm = LlamaModel(Llama::load(vb, &cfg)?, cfg, ctx.dtype);
        Ok(Box::new(Generating(lm, self.0.clone(), ctx.device.clone())))
    }

    fn batch(&self, ctx: &RunCtx, seed: u64) -> Result<Batch> {
        LlamaLm(self.0.model.clone()).batch(ctx, seed)
    }
}

struct Generating(LlamaModel, LlamaGenConfig, candle_core::Device);

impl Model for Generating {
    fn loss(&self, batch: &Batch, step: &Step) -> Result<Tensor> {
        self.0.loss(batch, step)
    }

    fn predict(&self, batch: &Batch) -> Result<Tensor> {
        self.0.predict(batch)
    }

    fn generator(&self) -> Result<Box<dyn gate::Generator + '_>> {
        let LlamaModel(llama, cfg, dtype) = &self.0;
        let device = self.2.clone();
        Ok(Box::new(Greedy {
            llama,
            cache: Cache::new(true, *dtype, cfg, &device)?,
            history: Vec::new(),
            keep_history: self.1.keep_history,
            vocab: self.1.model.vocab_size,
            device,
            pos: 0,
            next: 0,
        }))
    }
}

/// Greedy decoding with the model's own KV cache.
struct Greedy<'a> {
    llama: &'a Llama,
    cache: Cache,
    history: Vec<Cache>,
    keep_history: bool,
    vocab: usize,
    device: candle_core::Device,
    pos: usize,
    next: u32,
}

impl Greedy<'_> {
    fn run(&mut self, ids: Tensor) -> Result<()> {
        let n = ids.dim(1)?;
        let logits = self.llama.forward(&ids, self.pos, &mut self.cache)?;
        self.pos += n;
        self.next = logits.argmax(candle_core::D::Minus1)?.i(0)?.to_scalar::<u32>()?;
        if self.keep_history {
            self.history.push(self.cache.clone());
        }
        Ok(())
    }
}

impl gate::Generator for Greedy<'_> {
    fn prefill(&mut self, tokens: usize) -> Result<()> {
        let ids = crate::tokens(0x9e7, 1, tokens, self.vocab, &self.device)?;
        self.run(ids)
    }

    fn decode(&mut self) -> Result<()> {
        let ids = Tensor::new(&[[self.next]], &self.device)?;
        self.run(ids)
    }
}
