//! candle-transformers' mamba, gated as it ships: `Model::new` and its
//! `forward`, which takes one token per row and a recurrent `State`, run
//! over the sequence as a team runs it.

use candle_core::{IndexOp, Result, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::mamba::{Config, Model as Mamba, State};
use gate::{Batch, Model, ParamCount, Problems, RunCtx, Step, Workload};
use serde::{Deserialize, Serialize};

/// `config:` of a `mamba` component.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct MambaConfig {
    pub vocab_size: usize,
    pub pad_vocab_size_multiple: usize,
    pub d_model: usize,
    pub n_layer: usize,
    pub seq_len: usize,
}

impl Default for MambaConfig {
    fn default() -> Self {
        MambaConfig {
            vocab_size: 1000,
            pad_vocab_size_multiple: 8,
            d_model: 128,
            n_layer: 4,
            seq_len: 32,
        }
    }
}

#[derive(Debug)]
pub struct MambaLm(MambaConfig);

impl Workload for MambaLm {
    const KIND: &'static str = "mamba";
    type Config = MambaConfig;

    fn from_config(c: MambaConfig) -> std::result::Result<Self, Problems> {
        let mut p = Problems::new();
        p.positive("pad_vocab_size_multiple", c.pad_vocab_size_multiple);
        p.positive("seq_len", c.seq_len);
        p.finish(MambaLm(c))
    }

    fn config(&self) -> &MambaConfig {
        &self.0
    }

    /// The embedding (padded vocabulary; the LM head is tied to it); per
    /// layer an RMS norm, in_proj (d → 2·inner), the depthwise conv (width 4,
    /// with bias), x_proj (inner → dt_rank + 2·16), dt_proj (with bias),
    /// A_log (inner × 16), D and out_proj; the final norm. inner = 2·d,
    /// dt_rank = ⌈d/16⌉.
    fn param_count(&self) -> ParamCount {
        let c = &self.0;
        let (d, pad) = (c.d_model as u64, c.pad_vocab_size_multiple as u64);
        let (inner, rank) = (2 * d, d.div_ceil(16));
        let layer = d + 3 * d * inner + inner * (2 * rank + 32) + 23 * inner;
        ParamCount::new(
            (c.vocab_size as u64).div_ceil(pad) * pad * d + c.n_layer as u64 * layer + d,
            0,
        )
    }

    fn build(&self, vb: VarBuilder, _ctx: &RunCtx) -> Result<Box<dyn Model>> {
        let c = &self.0;
        let cfg = Config {
            d_model: c.d_model,
            n_layer: c.n_layer,
            vocab_size: c.vocab_size,
            pad_vocab_size_multiple: c.pad_vocab_size_multiple,
        };
        Ok(Box::new(MambaModel(Mamba::new(&cfg, vb)?, cfg)))
    }

    /// `seq_len + 1` tokens a row: each step predicts the next.
    fn batch(&self, ctx: &RunCtx, seed: u64) -> Result<Batch> {
        let c = &self.0;
        if ctx.batch_size != 1 {
            // Its step broadcasts B, [batch, 16], to [batch, inner, 16]: that holds at batch 1 only.
            candle_core::bail!("candle-transformers' mamba runs one row at a time: `batch_size: 1`");
        }
        let ids = crate::tokens(seed, ctx.batch_size, c.seq_len + 1, c.vocab_size, &ctx.device)?;
        Ok(Batch::new(vec![
            ids.i((.., ..c.seq_len))?.contiguous()?,
            ids.i((.., 1..))?.contiguous()?,
        ]))
    }
}

struct MambaModel(Mamba, Config);

impl Model for MambaModel {
    fn loss(&self, batch: &Batch, _step: &Step) -> Result<Tensor> {
        crate::lm_loss(&self.predict(batch)?, &batch.tensors[1])
    }

    /// The logits of every step, `[batch, seq_len, vocab]`.
    fn predict(&self, batch: &Batch) -> Result<Tensor> {
        let ids = &batch.tensors[0];
        let (b, t) = ids.dims2()?;
        let mut state = State::new(b, &self.1, self.0.dtype(), ids.device())?;
        let steps = (0..t).map(|i| self.0.forward(&ids.i((.., i))?, &mut state));
        Tensor::stack(&steps.collect::<Result<Vec<_>>>()?, 1)
    }
}
