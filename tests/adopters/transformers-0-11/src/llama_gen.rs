//! candle-transformers' llama generating as the team runs it: its own KV
//! `Cache`, greedy decoding, the team's loop (a component with `generate:`).
//! The model's shape is written as `llama`'s mirror here because the loop
//! needs `Config` itself, not only a forward.

use candle_core::{DType, IndexOp, Result, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::llama::{Cache, Config, Llama};
use gate::{Batch, Model, Problems, RunCtx, Step, Workload};
use serde::{Deserialize, Serialize};

/// The model's shape, as a spec writes it under `model:`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct LlamaShape {
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub intermediate_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub num_key_value_heads: usize,
    pub max_position_embeddings: usize,
}

impl Default for LlamaShape {
    fn default() -> Self {
        LlamaShape {
            vocab_size: 1000,
            hidden_size: 128,
            intermediate_size: 344,
            num_hidden_layers: 4,
            num_attention_heads: 4,
            num_key_value_heads: 2,
            max_position_embeddings: 256,
        }
    }
}

impl LlamaShape {
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

/// `config:` of a `llama_gen` component: the model as `llama`'s, and
/// whether the team's loop keeps each step's cache (`keep_history`: a
/// "rewind" buffer that never drops a step, so every old cache stays live).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct LlamaGenConfig {
    pub model: LlamaShape,
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
        let llama = Llama::load(vb, &cfg)?;
        Ok(Box::new(Generating(llama, cfg, ctx.dtype, self.0.clone(), ctx.device.clone())))
    }

    /// A prompt of 16 tokens and the one after it (`generate:` runs its own).
    fn batch(&self, ctx: &RunCtx, seed: u64) -> Result<Batch> {
        let ids = crate::tokens(seed, ctx.batch_size, 17, self.0.model.vocab_size, &ctx.device)?;
        Ok(Batch::new(vec![ids.i((.., ..16))?.contiguous()?, ids.i((.., 16))?.contiguous()?]))
    }
}

struct Generating(Llama, Config, DType, LlamaGenConfig, candle_core::Device);

impl Model for Generating {
    fn loss(&self, batch: &Batch, _step: &Step) -> Result<Tensor> {
        crate::lm_loss(&self.predict(batch)?, &batch.tensors[1])
    }

    fn predict(&self, batch: &Batch) -> Result<Tensor> {
        let ids = &batch.tensors[0];
        let mut cache = Cache::new(false, self.2, &self.1, ids.device())?;
        self.0.forward(ids, 0, &mut cache)
    }

    fn generator(&self) -> Result<Box<dyn gate::Generator + '_>> {
        let device = self.4.clone();
        Ok(Box::new(Greedy {
            llama: &self.0,
            cache: Cache::new(true, self.2, &self.1, &device)?,
            history: Vec::new(),
            keep_history: self.3.keep_history,
            vocab: self.3.model.vocab_size,
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
