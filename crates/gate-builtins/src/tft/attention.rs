//! Interpretable multi-head attention (pytorch-forecasting): per-head Q and K
//! projections with bias, one value projection shared by all heads, heads
//! averaged, then W_h (no bias). The mask is additive: 0 where a query may
//! look, −1e9 where it may not.

use candle_core::{DType, Device, Result, Tensor};
use candle_nn::VarBuilder;

use super::dense::{Dense, Stack};
use gate::Step;

#[derive(Debug, Clone)]
pub struct InterpretableAttention {
    value: Dense,
    queries: Vec<Dense>,
    keys: Vec<Dense>,
    w_h: Dense,
    head_dim: usize,
    dropout: f64,
}

impl InterpretableAttention {
    pub fn new(hidden: usize, heads: usize, dropout: f64, vb: VarBuilder) -> Result<Self> {
        let d = hidden / heads;
        let queries = (0..heads)
            .map(|h| Dense::new(hidden, d, true, Stack::One, vb.pp(format!("q_layers.{h}"))))
            .collect::<Result<Vec<_>>>()?;
        let keys = (0..heads)
            .map(|h| Dense::new(hidden, d, true, Stack::One, vb.pp(format!("k_layers.{h}"))))
            .collect::<Result<Vec<_>>>()?;
        Ok(InterpretableAttention {
            value: Dense::new(hidden, d, true, Stack::One, vb.pp("v_layer"))?,
            queries,
            keys,
            w_h: Dense::new(d, hidden, false, Stack::One, vb.pp("w_h"))?,
            head_dim: d,
            dropout,
        })
    }

    /// `q` `[B, Tq, H]`, `kv` `[B, T, H]`, `mask` `[Tq, T]` → (`[B, Tq, H]`,
    /// attention weights `[B, Tq, heads, T]`).
    pub fn forward(&self, q: &Tensor, kv: &Tensor, mask: &Tensor, step: &Step) -> Result<(Tensor, Tensor)> {
        let values = self.value.forward(kv)?;
        let scale = 1.0 / (self.head_dim as f64).sqrt();
        let mut heads = Vec::with_capacity(self.queries.len());
        let mut weights = Vec::with_capacity(self.queries.len());
        for (wq, wk) in self.queries.iter().zip(&self.keys) {
            let qs = wq.forward(q)?;
            let ks = wk.forward(kv)?;
            let scores = (qs.matmul(&ks.t()?.contiguous()?)? * scale)?.broadcast_add(mask)?;
            let attn = super::dense::softmax(&scores)?;
            heads.push(step.dropout(&attn.matmul(&values)?, self.dropout)?);
            weights.push(attn);
        }
        let mean = Tensor::stack(&heads, 2)?.mean(2)?;
        let out = step.dropout(&self.w_h.forward(&mean)?, self.dropout)?;
        Ok((out, Tensor::stack(&weights, 2)?))
    }
}

/// The library's decoder mask: decoder step i sees every encoder step and
/// the decoder steps j < i (not itself). `[decoder, encoder + decoder]`.
pub fn decoder_mask(encoder: usize, decoder: usize, dtype: DType, device: &Device) -> Result<Tensor> {
    let total = encoder + decoder;
    let values: Vec<f32> = (0..decoder)
        .flat_map(|i| (0..total).map(move |j| if j < encoder + i { 0.0 } else { -1e9 }))
        .collect();
    // In f16, −1e9 becomes −∞, which softmax still maps to 0 (every row sees the encoder).
    Tensor::from_vec(values, (decoder, total), device)?.to_dtype(dtype)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decoder_step_sees_encoder_and_earlier_decoder_steps_only() -> Result<()> {
        let m = decoder_mask(2, 3, DType::F32, &Device::Cpu)?.to_vec2::<f32>()?;
        let open: Vec<Vec<bool>> = m.iter().map(|r| r.iter().map(|v| *v == 0.0).collect()).collect();
        assert_eq!(
            open,
            [
                [true, true, false, false, false],
                [true, true, true, false, false],
                [true, true, true, true, false]
            ]
        );
        Ok(())
    }
}
