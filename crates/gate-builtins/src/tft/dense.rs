//! The two primitives every TFT block is made of, in two layouts: one shared
//! layer over `[.., in]`, or one independent layer per variable applied to
//! `[V, N, in]` with a batched matmul (weights stacked `[V, in, out]`). The
//! per-variable layout runs a VSN's V GRNs as a handful of large kernels
//! instead of V small ones, with exactly the same parameter count.

use candle_core::{DType, Result, Tensor};
use candle_nn::{Init, VarBuilder};

use gate::nn;

/// Softmax over the last axis, in f32 for half-precision inputs (its sum
/// would otherwise accumulate in bf16/f16).
pub fn softmax(x: &Tensor) -> Result<Tensor> {
    if x.dtype() == DType::F32 {
        return nn::softmax(x);
    }
    nn::softmax(&x.to_dtype(DType::F32)?)?.to_dtype(x.dtype())
}

/// How many independent copies of a layer there are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stack {
    /// One layer over the last axis of any input.
    One,
    /// One layer per variable; inputs are `[V, N, in]`.
    PerVariable(usize),
}

impl Stack {
    /// A per-feature vector parameter of width `n`: `[n]`, or `[V, n]` viewed as `[V, 1, n]`.
    fn vector(self, vb: &VarBuilder, name: &str, n: usize, init: Init) -> Result<Tensor> {
        match self {
            Stack::One => vb.get_with_hints(n, name, init),
            Stack::PerVariable(v) => vb.get_with_hints((v, n), name, init)?.reshape((v, 1, n)),
        }
    }
}

/// A linear layer, PyTorch-initialised: U(±1/√in) for weight and bias.
#[derive(Debug, Clone)]
pub struct Dense {
    /// `[out, in]` (shared) or `[V, in, out]` (per variable).
    pub(super) weight: Tensor,
    pub(super) bias: Option<Tensor>,
    pub(super) stack: Stack,
}

impl Dense {
    pub fn new(input: usize, output: usize, bias: bool, stack: Stack, vb: VarBuilder) -> Result<Self> {
        let bound = 1.0 / (input.max(1) as f64).sqrt();
        let init = Init::Uniform { lo: -bound, up: bound };
        let weight = match stack {
            Stack::One => vb.get_with_hints((output, input), "weight", init)?,
            Stack::PerVariable(v) => vb.get_with_hints((v, input, output), "weight", init)?,
        };
        let bias = if bias {
            Some(stack.vector(&vb, "bias", output, init)?)
        } else {
            None
        };
        Ok(Dense { weight, bias, stack })
    }

    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let y = match self.stack {
            Stack::One => {
                // Flatten the leading axes into one 2-D matmul: no broadcast
                // weight copies, and a contiguous operand (CUDA matmul rejects
                // row-strided views, docs/models.md §5 pitfall 4).
                let dims = x.dims().to_vec();
                let (lead, input) = dims.split_at(dims.len() - 1);
                let rows: usize = lead.iter().product();
                let y = x.contiguous()?.reshape((rows, input[0]))?.matmul(&self.weight.t()?)?;
                let mut out_dims = lead.to_vec();
                out_dims.push(y.dim(1)?);
                y.reshape(out_dims)?
            }
            Stack::PerVariable(_) => x.contiguous()?.matmul(&self.weight)?,
        };
        match &self.bias {
            Some(b) => y.broadcast_add(b),
            None => Ok(y),
        }
    }
}

/// Layer norm over the last axis (weight 1, bias 0), differentiable.
#[derive(Debug, Clone)]
pub struct LayerNorm {
    pub(super) weight: Tensor,
    pub(super) bias: Tensor,
}

/// PyTorch's default epsilon.
pub(super) const LN_EPS: f64 = 1e-5;

impl LayerNorm {
    pub fn new(dim: usize, stack: Stack, vb: VarBuilder) -> Result<Self> {
        Ok(LayerNorm {
            weight: stack.vector(&vb, "weight", dim, Init::Const(1.0))?,
            bias: stack.vector(&vb, "bias", dim, Init::Const(0.0))?,
        })
    }

    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        if x.dtype() == DType::F32 {
            return nn::layer_norm(x, &self.weight, &self.bias, LN_EPS);
        }
        // Half precision: the mean and variance in f32 (candle's CPU sums
        // accumulate in the tensor's dtype), as autocast does.
        let f = |t: &Tensor| t.to_dtype(DType::F32);
        nn::layer_norm(&f(x)?, &f(&self.weight)?, &f(&self.bias)?, LN_EPS)?.to_dtype(x.dtype())
    }
}

/// A per-feature vector parameter in the given layout (used by ResampleNorm's gate).
pub fn vector_param(stack: Stack, vb: &VarBuilder, name: &str, n: usize, init: Init) -> Result<Tensor> {
    stack.vector(vb, name, n, init)
}

/// A copy whose parameters are detached (sharing their storage, so the
/// optimizer's updates show through): its forward builds no graph.
pub(super) trait Detached {
    fn detached(&self) -> Self;
}

impl Detached for Dense {
    fn detached(&self) -> Self {
        Dense {
            weight: self.weight.detach(),
            bias: self.bias.as_ref().map(Tensor::detach),
            stack: self.stack,
        }
    }
}

impl Detached for LayerNorm {
    fn detached(&self) -> Self {
        LayerNorm {
            weight: self.weight.detach(),
            bias: self.bias.detach(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{DType, Device};
    use gate::ParamStore;

    #[test]
    fn per_variable_dense_equals_separate_layers() -> Result<()> {
        let dev = Device::Cpu;
        let store = ParamStore::new(3);
        let vb = store.builder(DType::F32, &dev);
        let d = Dense::new(4, 3, true, Stack::PerVariable(2), vb.pp("d"))?;
        let x = Tensor::arange(0f32, 2.0 * 5.0 * 4.0, &dev)?.reshape((2, 5, 4))?;
        let y = d.forward(&x)?;
        assert_eq!(y.dims(), [2, 5, 3]);
        for v in 0..2 {
            let w = d.weight.get(v)?;
            let b = d.bias.as_ref().unwrap().get(v)?;
            let want = x.get(v)?.matmul(&w)?.broadcast_add(&b)?;
            let diff = (y.get(v)? - want)?.abs()?.max_all()?.to_scalar::<f32>()?;
            assert!(diff < 1e-5);
        }
        assert_eq!(store.elem_count(), 2 * (4 * 3 + 3));
        Ok(())
    }
}
