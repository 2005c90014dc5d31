//! candle-transformers' mistral through `gate::Lm`, as it ships: a model
//! that keeps its KV cache inside, which the default training forward
//! (the cache cleared, then `forward_cached` at offset 0) leaves full:
//! gate measures it as `model_state`. Trained with gate's AdamW
//! (`mistral`) and with candle-nn's SGD (`mistral_sgd`, the team's
//! optimizer), whose state is 2 × and 0 × the parameters' bytes.

use candle_core::{Result, Tensor, Var};
use candle_nn::{Optimizer as _, VarBuilder};
use candle_transformers::models::mistral::{Config, Model};

pub struct MistralLm<const SGD: bool = false>(Model);
pub type MistralSgd = MistralLm<true>;

impl<const SGD: bool> gate::LanguageModel for MistralLm<SGD> {
    const KIND: &'static str = if SGD { "mistral_sgd" } else { "mistral" };
    // No `vocab_size`: gate reads the spec's `model.vocab_size`.
    type Config = Config;
    fn load(vb: VarBuilder, c: &Config, _: &gate::RunCtx) -> Result<Self> {
        Ok(MistralLm(Model::new(c, vb)?))
    }
    fn forward_cached(&mut self, ids: &Tensor, offset: usize) -> Result<Tensor> {
        self.0.forward(ids, offset)
    }
    fn clear_cache(&mut self) {
        self.0.clear_kv_cache()
    }
    fn optimizer(vars: Vec<Var>) -> Result<Option<Box<dyn gate::OptimizerStep>>> {
        // None: gate's AdamW.
        Ok(if SGD { Some(Box::new(candle_nn::SGD::new(vars, 1e-3)?)) } else { None })
    }
}
