//! candle-transformers' qwen2 through `gate::Lm`, as it ships: a model that
//! keeps its KV cache inside and takes `&mut self`. gate calls
//! `forward_cached` at offset 0 after `clear_cache` for each training
//! sequence, and at each next offset for a `generate:` component. Its
//! causal-LM head gives the last position's logits.

use candle_core::{Result, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::qwen2::{Config, ModelForCausalLM};

pub struct Qwen2Lm(ModelForCausalLM);

impl gate::LanguageModel for Qwen2Lm {
    const KIND: &'static str = "qwen2";
    type Config = Config;
    fn vocab_size(c: &Config) -> usize {
        c.vocab_size
    }
    fn load(vb: VarBuilder, c: &Config, _: &gate::RunCtx) -> Result<Self> {
        Ok(Qwen2Lm(ModelForCausalLM::new(c, vb)?))
    }
    fn forward_cached(&mut self, ids: &Tensor, offset: usize) -> Result<Tensor> {
        self.0.forward(ids, offset)
    }
    fn clear_cache(&mut self) {
        self.0.clear_kv_cache()
    }
}
