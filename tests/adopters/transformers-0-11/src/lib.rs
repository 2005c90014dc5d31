//! The team's language models: candle-transformers' own llama, BERT with
//! its masked-LM head, T5 (encoder-decoder with its LM head), mamba, qwen2
//! and mistral, built unmodified from gate's `VarBuilder` at small configs
//! with random weights, each a gate workload. A module per model holds all
//! of its glue: a config the spec can write, the closed-form parameter
//! count, `build`, seeded token batches, and a cross-entropy over the
//! model's LM logits.

use candle_core::{Device, Result, Tensor};
use gate::Rng;

pub mod bert;
pub mod llama;
pub mod llama_gen;
pub mod mamba;
pub mod mistral;
pub mod qwen2;
pub mod t5;

/// Seeded token ids in `0..vocab`, `(rows, len)`, as a u32 tensor.
pub fn tokens(seed: u64, rows: usize, len: usize, vocab: usize, device: &Device) -> Result<Tensor> {
    let mut rng = Rng::new(seed);
    let ids: Vec<u32> = (0..rows * len).map(|_| rng.below(vocab as u64) as u32).collect();
    Tensor::from_vec(ids, (rows, len), device)
}

/// Cross-entropy of `logits` (`[.., vocab]`) against the token ids `targets`
/// (the same leading shape), over every position.
pub fn lm_loss(logits: &Tensor, targets: &Tensor) -> Result<Tensor> {
    let vocab = logits.dim(candle_core::D::Minus1)?;
    let logits = logits.to_dtype(candle_core::DType::F32)?.reshape(((), vocab))?;
    candle_nn::loss::cross_entropy(&logits, &targets.flatten_all()?)
}
