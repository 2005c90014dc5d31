//! candle-transformers' llama, gated as it ships, in the fewest lines gate
//! asks for: its own `LlamaConfig` (the spec writes its config.json keys
//! under `model:`), `Llama::load`, and `Llama::forward` (the next token's
//! logits). `gate::Lm` makes the batches and the loss. The fixture's tests
//! count this file's code lines (at most 25).

use candle_core::{Result, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::llama::{Cache, Config, Llama, LlamaConfig};

pub struct LlamaLm(Llama, Config, candle_core::DType);

impl gate::LanguageModel for LlamaLm {
    const KIND: &'static str = "llama";
    type Config = LlamaConfig;
    fn vocab_size(c: &LlamaConfig) -> usize {
        c.vocab_size
    }
    fn load(vb: VarBuilder, c: &LlamaConfig, ctx: &gate::RunCtx) -> Result<Self> {
        let cfg = c.clone().into_config(false);
        Ok(LlamaLm(Llama::load(vb, &cfg)?, cfg, ctx.dtype))
    }
    fn forward(&mut self, ids: &Tensor) -> Result<Tensor> {
        // A fresh cache per sequence, without KV caching: its rotary tables are the forward's.
        let mut cache = Cache::new(false, self.2, &self.1, ids.device())?;
        self.0.forward(ids, 0, &mut cache)
    }
}
