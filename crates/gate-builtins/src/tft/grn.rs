//! The gated residual network and its resampling skip (docs/models.md §1):
//! η = ELU(W1·x + b1 [+ Wc·ctx]); η = W2·η + b2; out = LN(GLU(η) + residual),
//! where residual is x, or ResampleNorm(x) when the width changes.

use candle_core::{DType, Device, Result, Tensor};
use candle_nn::{Init, VarBuilder};

use super::dense::{vector_param, Dense, Detached, LayerNorm, Stack};
use super::glu::{GateAddNorm, Glu};
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

/// Each output point's lower and upper neighbour among `input` points, and
/// the upper one's weight.
pub(super) fn interpolation_points(input: usize, output: usize) -> (Vec<u32>, Vec<u32>, Vec<f32>) {
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
    (lower, upper, frac)
}

impl Interpolation {
    fn new(input: usize, output: usize, dtype: DType, device: &Device) -> Result<Self> {
        let (lower, upper, frac) = interpolation_points(input, output);
        Ok(Interpolation {
            lower: Tensor::new(lower, device)?,
            upper: Tensor::new(upper, device)?,
            frac: Tensor::new(frac, device)?.to_dtype(dtype)?,
        })
    }

    /// Each output point's two neighbours in `x`'s last axis.
    fn neighbours(&self, x: &Tensor) -> Result<(Tensor, Tensor)> {
        let last = x.rank() - 1;
        Ok((x.index_select(&self.lower, last)?, x.index_select(&self.upper, last)?))
    }

    /// The interpolation from each point's two neighbours: lo + (hi − lo)·frac.
    fn between(&self, lo: &Tensor, hi: &Tensor) -> Result<Tensor> {
        lo.broadcast_add(&(hi - lo)?.broadcast_mul(&self.frac)?)
    }

    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let (lo, hi) = self.neighbours(x)?;
        self.between(&lo, &hi)
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
        self.scaled_norm(&self.interpolation.forward(x)?)
    }

    /// The two neighbours of each output point in `x`'s last axis (what the
    /// interpolation reads of it).
    pub(super) fn neighbours(&self, x: &Tensor) -> Result<(Tensor, Tensor)> {
        self.interpolation.neighbours(x)
    }

    /// [`ResampleNorm::forward`] from the neighbours its input would give
    /// ([`ResampleNorm::neighbours`]): the same ops on the same values.
    pub(super) fn forward_between(&self, lo: &Tensor, hi: &Tensor) -> Result<Tensor> {
        self.scaled_norm(&self.interpolation.between(lo, hi)?)
    }

    fn scaled_norm(&self, resampled: &Tensor) -> Result<Tensor> {
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

    /// A copy whose every parameter is `f` of it (the layers', the
    /// norms', the resampling's gate).
    pub(super) fn map_tensors(&self, f: &mut dyn FnMut(&Tensor) -> Result<Tensor>) -> Result<Grn> {
        type Map<'a> = &'a mut dyn FnMut(&Tensor) -> Result<Tensor>;
        fn dense(d: &Dense, f: Map) -> Result<Dense> {
            let weight = f(&d.weight)?;
            let bias = d.bias.as_ref().map(&mut *f).transpose()?;
            Ok(Dense {
                weight,
                bias,
                stack: d.stack,
            })
        }
        fn norm(n: &LayerNorm, f: Map) -> Result<LayerNorm> {
            Ok(LayerNorm {
                weight: f(&n.weight)?,
                bias: f(&n.bias)?,
            })
        }
        let fc1 = dense(&self.fc1, f)?;
        let context = match &self.context {
            Some(c) => Some(dense(c, f)?),
            None => None,
        };
        let fc2 = dense(&self.fc2, f)?;
        let gate = GateAddNorm {
            glu: Glu {
                fc: dense(&self.gate.glu.fc, f)?,
                ..self.gate.glu.clone()
            },
            norm: norm(&self.gate.norm, f)?,
        };
        let resample = match &self.resample {
            Some(r) => Some(ResampleNorm {
                interpolation: r.interpolation.clone(),
                mask: f(&r.mask)?,
                norm: norm(&r.norm, f)?,
            }),
            None => None,
        };
        Ok(Grn {
            fc1,
            context,
            fc2,
            gate,
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
