//! The gated residual network and its resampling skip (docs/models.md §1):
//! η = ELU(W1·x + b1 [+ Wc·ctx]); η = W2·η + b2; out = LN(GLU(η) + residual),
//! where residual is x, or ResampleNorm(x) when the width changes.

use candle_core::{DType, Device, Result, Tensor};
use candle_nn::{Init, VarBuilder};

use super::dense::{vector_param, Dense, Detached, LayerNorm, Stack};
use super::glu::GateAddNorm;
use gate::Step;

/// Linear interpolation of the last axis from `input` to `output` points,
/// with the end points aligned (PyTorch's `align_corners=True`).
#[derive(Debug, Clone)]
struct Interpolation {
    lower: Tensor,
    upper: Tensor,
    /// Weight of the upper neighbour, `[output]`.
    frac: Tensor,
}

impl Interpolation {
    fn new(input: usize, output: usize, dtype: DType, device: &Device) -> Result<Self> {
        let scale = if output > 1 {
            (input - 1) as f64 / (output - 1) as f64
        } else {
            0.0
        };
        let mut lower = Vec::with_capacity(output);
        let mut upper = Vec::with_capacity(output);
        let mut frac = Vec::with_capacity(output);
        for j in 0..output {
            let pos = j as f64 * scale;
            let lo = (pos.floor() as usize).min(input - 1);
            lower.push(lo as u32);
            upper.push((lo + 1).min(input - 1) as u32);
            frac.push((pos - lo as f64) as f32);
        }
        Ok(Interpolation {
            lower: Tensor::new(lower, device)?,
            upper: Tensor::new(upper, device)?,
            frac: Tensor::new(frac, device)?.to_dtype(dtype)?,
        })
    }

    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let last = x.rank() - 1;
        let lo = x.index_select(&self.lower, last)?;
        let hi = x.index_select(&self.upper, last)?;
        // lo + (hi − lo)·frac
        lo.broadcast_add(&(hi - &lo)?.broadcast_mul(&self.frac)?)
    }
}

/// Interpolate to the new width, scale by 2σ(m), LayerNorm.
#[derive(Debug, Clone)]
pub struct ResampleNorm {
    interpolation: Interpolation,
    mask: Tensor,
    norm: LayerNorm,
}

impl ResampleNorm {
    pub fn new(input: usize, output: usize, stack: Stack, vb: VarBuilder) -> Result<Self> {
        Ok(ResampleNorm {
            interpolation: Interpolation::new(input, output, vb.dtype(), vb.device())?,
            mask: vector_param(stack, &vb, "mask", output, Init::Const(0.0))?,
            norm: LayerNorm::new(output, stack, vb.pp("norm"))?,
        })
    }

    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let resampled = self.interpolation.forward(x)?;
        let gate = (candle_nn::ops::sigmoid(&self.mask)? * 2.0)?;
        self.norm.forward(&resampled.broadcast_mul(&gate)?)
    }
}

impl Detached for ResampleNorm {
    fn detached(&self) -> Self {
        ResampleNorm {
            interpolation: self.interpolation.clone(),
            mask: self.mask.detach(),
            norm: self.norm.detached(),
        }
    }
}

#[derive(Debug, Clone)]
pub struct Grn {
    pub(super) fc1: Dense,
    pub(super) context: Option<Dense>,
    pub(super) fc2: Dense,
    pub(super) gate: GateAddNorm,
    pub(super) resample: Option<ResampleNorm>,
}

/// The widths of a GRN.
#[derive(Debug, Clone, Copy)]
pub struct GrnDims {
    pub input: usize,
    pub hidden: usize,
    pub output: usize,
    /// Context width; 0 for none.
    pub context: usize,
}

impl Grn {
    pub fn new(dims: GrnDims, dropout: f64, stack: Stack, vb: VarBuilder) -> Result<Self> {
        let GrnDims {
            input,
            hidden,
            output,
            context,
        } = dims;
        let resample = if input != output {
            Some(ResampleNorm::new(input, output, stack, vb.pp("resample"))?)
        } else {
            None
        };
        let context = if context > 0 {
            Some(Dense::new(context, hidden, false, stack, vb.pp("context"))?)
        } else {
            None
        };
        Ok(Grn {
            fc1: Dense::new(input, hidden, true, stack, vb.pp("fc1"))?,
            context,
            fc2: Dense::new(hidden, hidden, true, stack, vb.pp("fc2"))?,
            gate: GateAddNorm::new(hidden, output, dropout, stack, vb.pp("gate"))?,
            resample,
        })
    }

    /// `context` must broadcast against `x`'s leading axes (e.g. `[B, 1, c]` for `x` `[B, T, i]`).
    pub fn forward(&self, x: &Tensor, context: Option<&Tensor>, step: &Step) -> Result<Tensor> {
        let residual = match &self.resample {
            Some(r) => r.forward(x)?,
            None => x.clone(),
        };
        // Intermediates go out of scope as soon as the next one exists, so a
        // forward with no graph holds as few full-size tensors as it can.
        let hidden = {
            let mut h = self.fc1.forward(x)?;
            if let (Some(layer), Some(ctx)) = (&self.context, context) {
                h = h.broadcast_add(&layer.forward(ctx)?)?;
            }
            h = h.elu(1.0)?;
            self.fc2.forward(&h)?
        };
        self.gate.forward(hidden, &residual, step)
    }
}

impl Detached for Grn {
    fn detached(&self) -> Self {
        Grn {
            fc1: self.fc1.detached(),
            context: self.context.as_ref().map(Detached::detached),
            fc2: self.fc2.detached(),
            gate: self.gate.detached(),
            resample: self.resample.as_ref().map(Detached::detached),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interpolation_aligns_corners() -> Result<()> {
        let dev = Device::Cpu;
        let x = Tensor::new(&[[0f32, 10.0, 20.0]], &dev)?;
        let up = Interpolation::new(3, 5, DType::F32, &dev)?.forward(&x)?;
        assert_eq!(up.to_vec2::<f32>()?, [[0.0, 5.0, 10.0, 15.0, 20.0]]);
        let down = Interpolation::new(3, 2, DType::F32, &dev)?.forward(&x)?;
        assert_eq!(down.to_vec2::<f32>()?, [[0.0, 20.0]]);
        Ok(())
    }
}
