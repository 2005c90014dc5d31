//! The library's quantile loss: e = y − ŷ_q, loss = 2·max((q − 1)·e, q·e),
//! averaged over batch, horizon and quantiles.

use candle_core::{Result, Tensor};

/// `pred` `[B, Td, Q]`, `target` `[B, Td]`, `quantiles` `[Q]` → scalar.
pub fn quantile_loss(pred: &Tensor, target: &Tensor, quantiles: &Tensor) -> Result<Tensor> {
    let errors = target.unsqueeze(2)?.broadcast_sub(pred)?;
    let below = errors.broadcast_mul(&(quantiles - 1.0)?)?;
    let above = errors.broadcast_mul(quantiles)?;
    (below.maximum(&above)? * 2.0)?.mean_all()
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    #[test]
    fn matches_a_hand_computed_case() -> Result<()> {
        let dev = Device::Cpu;
        // One sample, two horizon steps, quantiles 0.25 and 0.75.
        let q = Tensor::new(&[0.25f32, 0.75], &dev)?;
        let y = Tensor::new(&[[1.0f32, -2.0]], &dev)?;
        let pred = Tensor::new(&[[[0.0f32, 2.0], [-2.0, -1.0]]], &dev)?;
        // e = [[1, -1], [0, -1]]
        // q=.25: e=1 → max(-.75, .25) = .25;  e=0 → 0
        // q=.75: e=-1 → max(.25, -.75) = .25; e=-1 → .25
        // 2·(.25 + .25 + 0 + .25) / 4 = 0.375
        let v: f32 = quantile_loss(&pred, &y, &q)?.to_scalar()?;
        assert!((v - 0.375).abs() < 1e-7, "{v}");
        Ok(())
    }
}
