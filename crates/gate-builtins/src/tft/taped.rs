//! A hand-written backward for a selection network's per-variable GRNs, used
//! when the encoder VSN is checkpointed (docs/levers.md). Recomputed under
//! candle's autograd, a chunk of that block kept ~42 chunk-sized tensors
//! alive and ran ~180 small kernels in backward alone: autograd records
//! every op, and adds each gradient into a fresh zero tensor. Here the
//! recompute keeps only what the gradient formulas read (7 tensors of the
//! chunk's size) and the backward is ~30 ops. Both are what checkpointing
//! costs: fewer kernels per chunk, and less workspace per position, so fewer
//! chunks under the same memory (issue #18, goal 3).
//!
//! The GRN, per variable: a1 = x·W1 + b1; h = ELU(a1); a2 = h·W2 + b2;
//! d = dropout(a2); [value | gate] = d·Wg + bg; s = value ⊙ σ(gate) + x;
//! out = LN(s)·γ + β, the layer norm in f32 whatever the compute dtype. Only
//! this form is written by hand (no resampling, no context: the original
//! config, whose prescale width equals the hidden width); for any other,
//! [`Grn::forward_taped`] returns `None` and the caller recomputes with
//! autograd.
//!
//! [`Detached`] gives the graph-free forward a checkpointed block runs first:
//! candle records an op whenever an operand is tracked, so with the
//! parameters attached, a forward whose output is detached still built and
//! held the chunk's whole graph until the chunk ended.

use candle_core::{DType, Result, Tensor};

use super::dense::{Dense, Stack, LN_EPS};
use super::grn::Grn;
use gate::Step;

/// What the backward reads from the forward, all detached.
pub(super) struct GrnTape {
    x: Tensor,
    /// W1·x + b1, before the ELU (ELU's derivative is read from it: from
    /// ELU(a1) = e^a1 − 1 it would lose its precision near −1 in bf16).
    a1: Tensor,
    mask: Option<Tensor>,
    /// The dropped-out a2, the gate projection's input.
    d: Tensor,
    /// `[value | gate]`.
    y: Tensor,
    /// σ(gate).
    sig: Tensor,
    normed: Tensor,
    /// sqrt(var + eps), `[V, N, 1]`; with `normed`, f32.
    std: Tensor,
}

/// Gradients computed by hand, each with the tensor it is the gradient of.
pub(super) type TensorGrads = Vec<(Tensor, Tensor)>;

/// A detached f32 view of a parameter (a copy when it is half precision).
fn f32(t: &Tensor) -> Result<Tensor> {
    t.detach().to_dtype(DType::F32)
}

/// `x·W + b` with the weights detached (`[V, N, in]` → `[V, N, out]`).
fn project(x: &Tensor, layer: &Dense) -> Result<Tensor> {
    let y = x.matmul(&layer.weight.detach())?;
    match &layer.bias {
        Some(b) => y.broadcast_add(&b.detach()),
        None => Ok(y),
    }
}

/// Pushes `layer`'s weight and bias gradients for output gradient `dy` of
/// `x·W + b`, and returns the input's gradient `dy·Wᵀ`.
fn project_backward(x: &Tensor, dy: &Tensor, layer: &Dense, grads: &mut TensorGrads) -> Result<Tensor> {
    grads.push((layer.weight.clone(), x.transpose(1, 2)?.matmul(dy)?));
    if let Some(b) = &layer.bias {
        grads.push((b.clone(), dy.sum_keepdim(1)?));
    }
    dy.matmul(&layer.weight.detach().transpose(1, 2)?)
}

impl Grn {
    /// Whether this GRN's backward is written by hand: per variable, with no
    /// resampling and no context.
    pub(super) fn is_taped_form(&self) -> bool {
        matches!(self.fc1.stack, Stack::PerVariable(_)) && self.resample.is_none() && self.context.is_none()
    }

    /// The forward with no graph, keeping what [`Grn::backward_taped`] needs;
    /// `None` when this GRN is not of the form written by hand. Draws
    /// `step`'s dropout exactly as [`Grn::forward`] does, and computes the
    /// same values with the same ops.
    pub(super) fn forward_taped(&self, x: &Tensor, step: &Step) -> Result<Option<(Tensor, GrnTape)>> {
        if !self.is_taped_form() {
            return Ok(None);
        }
        let x = x.detach().contiguous()?;
        let a1 = project(&x, &self.fc1)?;
        let a2 = project(&a1.elu(1.0)?, &self.fc2)?;
        let glu = &self.gate.glu;
        let mask = step.dropout_mask(&a2, glu.dropout)?;
        // `a2` moved in both arms: a borrow in one would keep it to the end.
        let d = match &mask {
            Some(m) => (a2 * m)?,
            None => a2,
        };
        let y = project(&d, &glu.fc)?;
        let o = glu.output;
        let sig = candle_nn::ops::sigmoid(&y.narrow(2, o, o)?)?;
        // The layer norm as `dense::LayerNorm` runs it, op for op (candle's
        // layer_norm_slow, in f32 for half precision): the same values.
        let s = (y.narrow(2, 0, o)?.mul(&sig)? + &x)?.to_dtype(DType::F32)?;
        let centred = s.broadcast_sub(&(s.sum_keepdim(2)? / o as f64)?)?;
        drop(s);
        let std = ((centred.sqr()?.sum_keepdim(2)? / o as f64)? + LN_EPS)?.sqrt()?;
        let normed = centred.broadcast_div(&std)?;
        drop(centred);
        let norm = &self.gate.norm;
        let out = normed
            .broadcast_mul(&f32(&norm.weight)?)?
            .broadcast_add(&f32(&norm.bias)?)?
            .to_dtype(x.dtype())?;
        let tape = GrnTape {
            x,
            a1,
            mask,
            d,
            y,
            sig,
            normed,
            std,
        };
        Ok(Some((out, tape)))
    }

    /// The input's gradient for output gradient `dout`, and every
    /// parameter's (as this GRN holds it), from a [`Grn::forward_taped`].
    /// Each saved tensor, and `dout`, is dropped once its last formula has
    /// read it: the chunk's workspace is what the checkpoint's memory is.
    pub(super) fn backward_taped(&self, tape: GrnTape, dout: Tensor) -> Result<(Tensor, TensorGrads)> {
        let GrnTape {
            x,
            a1,
            mask,
            d,
            y,
            sig,
            normed,
            std,
        } = tape;
        let norm = &self.gate.norm;
        let glu = &self.gate.glu;
        let o = glu.output;
        let dtype = x.dtype();
        let mut grads = Vec::with_capacity(8);
        // The layer norm's statistics are f32 (`normed`, `std`), and so is
        // its backward; what leaves it is cast back to the compute dtype.
        // Moved into the block, so the caller's tensor goes with the f32 one
        // (in f32 they share storage; a shadowed binding would keep it to the end).
        let dout = {
            let given = dout;
            given.to_dtype(DType::F32)?
        };
        let param_grad = |g: Tensor| g.to_dtype(dtype);
        grads.push((norm.weight.clone(), param_grad(dout.mul(&normed)?.sum_keepdim(1)?)?));
        grads.push((norm.bias.clone(), param_grad(dout.sum_keepdim(1)?)?));
        // Layer norm: ds = (dn − (mean(dn) + n·mean(dn ⊙ n))) / std.
        let ds = {
            let dn = dout.broadcast_mul(&f32(&norm.weight)?)?;
            drop(dout);
            let mean_dn = dn.mean_keepdim(2)?;
            let mean_dnn = dn.mul(&normed)?.mean_keepdim(2)?;
            let along = normed.broadcast_mul(&mean_dnn)?.broadcast_add(&mean_dn)?;
            drop(normed);
            dn.sub(&along)?.broadcast_div(&std)?.to_dtype(dtype)?
        };
        drop(std);
        // GLU: value ⊙ σ(gate), σ' = σ(1 − σ).
        let dy = {
            let dvalue = ds.mul(&sig)?;
            let slope = sig.affine(-1.0, 1.0)?.mul(&sig)?;
            drop(sig);
            let dgate = ds.mul(&y.narrow(2, 0, o)?)?.mul(&slope)?;
            Tensor::cat(&[&dvalue, &dgate], 2)?
        };
        drop(y);
        let dd = project_backward(&d, &dy, &glu.fc, &mut grads)?;
        drop((d, dy));
        let da2 = match mask {
            Some(m) => (dd * m)?,
            None => dd,
        };
        // h = ELU(a1) again, the same op on the same input as the forward's.
        let dh = project_backward(&a1.elu(1.0)?, &da2, &self.fc2, &mut grads)?;
        drop(da2);
        // ELU′(a1): 1 above 0, e^a1 below.
        let da1 = (dh * a1.minimum(0.0)?.exp()?)?;
        drop(a1);
        let dx = project_backward(&x, &da1, &self.fc1, &mut grads)?;
        drop((x, da1));
        let dx = (dx + ds)?;
        Ok((dx, grads))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tft::grn::GrnDims;
    use candle_core::Device;
    use gate::ParamStore;

    /// The hand-written gradients equal autograd's, with and without dropout.
    #[test]
    fn taped_backward_equals_autograd() -> Result<()> {
        let dev = Device::Cpu;
        for p in [0.0, 0.3] {
            let store = ParamStore::new(3);
            let vb = store.builder(DType::F32, &dev);
            let dims = GrnDims {
                input: 6,
                hidden: 6,
                output: 6,
                context: 0,
            };
            let grn = Grn::new(dims, p, Stack::PerVariable(3), vb.pp("g"))?;
            let x = candle_core::Var::from_tensor(&Tensor::randn(0f32, 1.0, (3, 7, 6), &dev)?)?;
            let dout = Tensor::randn(0f32, 1.0, (3, 7, 6), &dev)?;

            let out = grn.forward(x.as_tensor(), None, &Step::train(8))?;
            let want = out.mul(&dout)?.sum_all()?.backward()?;

            let (taped, tape) = grn.forward_taped(x.as_tensor(), &Step::train(8))?.expect("taped form");
            let same = (taped - out.detach())?.abs()?.max_all()?.to_scalar::<f32>()?;
            assert_eq!(same, 0.0, "the taped forward computes the same values");
            let (dx, grads) = grn.backward_taped(tape, dout.clone())?;

            let close = |a: &Tensor, b: &Tensor, what: &str| -> Result<()> {
                let diff = (a - b)?.abs()?.max_all()?.to_scalar::<f32>()?;
                let scale = a.abs()?.max_all()?.to_scalar::<f32>()?.max(1e-6);
                assert!(diff <= 1e-5 * scale, "p {p}, {what}: diff {diff}, scale {scale}");
                Ok(())
            };
            close(want.get(x.as_tensor()).expect("input grad"), &dx, "input")?;
            assert_eq!(grads.len(), 8, "W1, b1, W2, b2, Wg, bg, γ, β");
            // Biases and norms are reshaped variables: push every gradient
            // into the variables, as the checkpoint does.
            let mut surrogate = Tensor::zeros((), DType::F32, &dev)?;
            for (param, g) in &grads {
                surrogate = (surrogate + param.mul(g)?.sum_all()?)?;
            }
            let got = surrogate.backward()?;
            for (name, var) in store.named_vars() {
                let w = want.get(var.as_tensor()).expect("autograd reaches every parameter");
                let g = got
                    .get(var.as_tensor())
                    .unwrap_or_else(|| panic!("no gradient for `{name}`"));
                close(w, g, &name)?;
            }
        }
        Ok(())
    }

    #[test]
    fn other_forms_fall_back_to_autograd() -> Result<()> {
        let store = ParamStore::new(3);
        let vb = store.builder(DType::F32, &Device::Cpu);
        let resampled = GrnDims {
            input: 4,
            hidden: 4,
            output: 6,
            context: 0,
        };
        let grn = Grn::new(resampled, 0.1, Stack::PerVariable(2), vb.pp("g"))?;
        let x = Tensor::zeros((2, 3, 4), DType::F32, &Device::Cpu)?;
        assert!(grn.forward_taped(&x, &Step::train(1))?.is_none());
        Ok(())
    }
}
