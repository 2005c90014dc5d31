//! Small building blocks shared by workloads: seeded dropout, losses, and
//! norms that keep their gradients (candle's fused `layer_norm`,
//! `rms_norm` and `softmax_last_dim` silently cut the graph).

use std::cell::RefCell;

use candle_core::{DType, Result, Tensor, D};

use super::rng::Rng;

/// One forward pass's mode: training (dropout on, seeded) or evaluation.
pub struct Step {
    train: bool,
    rng: RefCell<Rng>,
}

impl Step {
    /// A training step: dropout on, its masks drawn from `seed`.
    pub fn train(seed: u64) -> Self {
        Step {
            train: true,
            rng: RefCell::new(Rng::new(seed)),
        }
    }

    /// An evaluation step: no dropout.
    pub fn eval() -> Self {
        Step {
            train: false,
            rng: RefCell::new(Rng::new(0)),
        }
    }

    /// Whether this is a training step.
    pub fn is_train(&self) -> bool {
        self.train
    }

    /// A seed drawn from this step's stream, for a block that must replay its
    /// dropout masks (a checkpointed block recomputed in backward).
    pub fn fork_seed(&self) -> u64 {
        self.rng.borrow_mut().next_u64()
    }

    /// The step for chunk `index` of a block forked at `seed`: the same
    /// (seed, index) gives the same masks; evaluation stays evaluation.
    pub fn chunk(&self, seed: u64, index: usize) -> Step {
        if !self.train {
            return Step::eval();
        }
        Step::train(seed ^ (index as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15))
    }

    /// Inverted dropout with a mask drawn from this step's seeded generator
    /// (on CUDA: drawn on the device from one seed of it, `cuda_dropout`).
    pub fn dropout(&self, x: &Tensor, p: f64) -> Result<Tensor> {
        match self.dropout_mask(x, p)? {
            Some(mask) => x.mul(&mask),
            None => Ok(x.clone()),
        }
    }

    /// The mask [`Step::dropout`] multiplies `x` by: 0 where an element is
    /// dropped, `1 / (1 - p)` where it is kept; `None` when dropout is off.
    /// It draws exactly what `dropout` would, so a block with a hand-written
    /// backward can keep the mask for its gradient and stay in step with the
    /// block's ordinary forward.
    pub fn dropout_mask(&self, x: &Tensor, p: f64) -> Result<Option<Tensor>> {
        if !self.train || p <= 0.0 {
            return Ok(None);
        }
        let scale = (1.0 / (1.0 - p)) as f32;
        let mut rng = self.rng.borrow_mut();
        #[cfg(feature = "cuda")]
        if x.device().is_cuda() {
            return super::cuda_dropout::mask(x, p, scale, rng.next_u64()).map(Some);
        }
        let mask: Vec<f32> = (0..x.elem_count())
            .map(|_| if rng.uniform() < p { 0.0 } else { scale })
            .collect();
        Tensor::from_vec(mask, x.shape(), x.device())?
            .to_dtype(x.dtype())
            .map(Some)
    }
}

/// A stack of linear layers with `activation` between them (not after the last).
pub fn linear_stack(
    layers: &[candle_nn::Linear],
    x: &Tensor,
    activation: fn(&Tensor) -> Result<Tensor>,
) -> Result<Tensor> {
    let mut h = x.clone();
    for (i, layer) in layers.iter().enumerate() {
        h = candle_core::Module::forward(layer, &h)?;
        if i + 1 < layers.len() {
            h = activation(&h)?;
        }
    }
    Ok(h)
}

/// Mean squared error.
pub fn mse(pred: &Tensor, target: &Tensor) -> Result<Tensor> {
    pred.sub(target)?.sqr()?.mean_all()
}

/// Huber loss (smooth L1) with threshold `delta`, averaged.
pub fn huber(pred: &Tensor, target: &Tensor, delta: f64) -> Result<Tensor> {
    let diff = pred.sub(target)?;
    let abs = diff.abs()?;
    let quad = abs.minimum(delta)?;
    let lin = abs.sub(&quad)?;
    // 0.5·q² + δ·(|d| − q)
    (quad.sqr()?.affine(0.5, 0.0)? + lin.affine(delta, 0.0)?)?.mean_all()
}

/// Layer norm over the last axis, composed of differentiable ops.
pub fn layer_norm(x: &Tensor, weight: &Tensor, bias: &Tensor, eps: f64) -> Result<Tensor> {
    candle_nn::ops::layer_norm_slow(x, weight, bias, eps as f32)
}

/// RMS norm over the last axis, composed of differentiable ops.
pub fn rms_norm(x: &Tensor, weight: &Tensor, eps: f64) -> Result<Tensor> {
    let dtype = x.dtype();
    let x32 = x.to_dtype(DType::F32)?;
    let ms = x32.sqr()?.mean_keepdim(D::Minus1)?;
    let normed = x32.broadcast_div(&(ms + eps)?.sqrt()?)?;
    normed.to_dtype(dtype)?.broadcast_mul(weight)
}

/// Softmax over the last axis that keeps its gradient.
pub fn softmax(x: &Tensor) -> Result<Tensor> {
    candle_nn::ops::softmax(x, D::Minus1)
}

/// softplus(x) = ln(1 + eˣ), computed stably as max(x,0) + ln(1 + e^−|x|).
pub fn softplus(x: &Tensor) -> Result<Tensor> {
    let relu = x.relu()?;
    let tail = x.abs()?.neg()?.exp()?.affine(1.0, 1.0)?.log()?;
    relu + tail
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    #[test]
    fn huber_matches_hand_computation() -> Result<()> {
        let p = Tensor::new(&[0.0f32, 0.0, 0.0], &Device::Cpu)?;
        let t = Tensor::new(&[0.5f32, 2.0, -3.0], &Device::Cpu)?;
        // 0.125, 1.5, 2.5 → mean 4.125 / 3
        let v: f32 = huber(&p, &t, 1.0)?.to_scalar()?;
        assert!((v - 4.125 / 3.0).abs() < 1e-6);
        Ok(())
    }

    #[test]
    fn softplus_is_stable_and_correct() -> Result<()> {
        let x = Tensor::new(&[-50.0f32, 0.0, 50.0], &Device::Cpu)?;
        let v = softplus(&x)?.to_vec1::<f32>()?;
        assert!(v[0] < 1e-20 && (v[1] - 2f32.ln()).abs() < 1e-6 && (v[2] - 50.0).abs() < 1e-4);
        Ok(())
    }

    #[test]
    fn dropout_repeats_with_the_seed_and_is_off_in_eval() -> Result<()> {
        let x = Tensor::ones((4, 8), DType::F32, &Device::Cpu)?;
        let a = Step::train(9).dropout(&x, 0.5)?.to_vec2::<f32>()?;
        let b = Step::train(9).dropout(&x, 0.5)?.to_vec2::<f32>()?;
        assert_eq!(a, b);
        assert_eq!(Step::eval().dropout(&x, 0.5)?.to_vec2::<f32>()?, x.to_vec2::<f32>()?);
        Ok(())
    }
}

/// Checks shared by the workloads' unit tests: seeded training on a tiny
/// config, and gradient coverage of every parameter.
#[cfg(any(test, feature = "test-support"))]
#[allow(unreachable_pub, missing_docs)]
pub(crate) mod test_support {
    use candle_core::{DType, Device, Result};
    use candle_nn::optim::{AdamW, Optimizer};

    use super::Step;
    use crate::sdk::{DynWorkload, ParamStore, RunCtx};

    /// A CPU context in f32 with seed 7.
    pub fn ctx(batch_size: usize) -> RunCtx {
        RunCtx {
            device: Device::Cpu,
            dtype: DType::F32,
            batch_size,
            seed: 7,
            master_dtype: None,
        }
    }

    /// Trains `steps` AdamW steps on one seeded batch; returns the loss before
    /// and the evaluation loss after.
    pub fn loss_after_steps(w: &dyn DynWorkload, batch_size: usize, steps: usize) -> Result<(f64, f64)> {
        let c = ctx(batch_size);
        let store = ParamStore::new(c.seed);
        let mut model = w.build(store.builder(c.dtype, &c.device), &c)?;
        let batch = w.batch(&c, 11)?;
        let first = model.loss(&batch, &Step::eval())?.to_scalar::<f32>()? as f64;
        let mut opt = AdamW::new(store.vars(), crate::sdk::optim::adamw_params(w.learning_rate()))?;
        for i in 0..steps {
            let loss = model.loss(&batch, &Step::train(i as u64))?;
            opt.step(&loss.backward()?)?;
            model.after_step(i)?;
        }
        let last = model.loss(&batch, &Step::eval())?.to_scalar::<f32>()? as f64;
        Ok((first, last))
    }

    /// Every trainable parameter receives a finite, non-zero gradient.
    pub fn assert_every_param_has_grad(w: &dyn DynWorkload, batch_size: usize) -> Result<()> {
        let c = ctx(batch_size);
        let store = ParamStore::new(c.seed);
        let model = w.build(store.builder(c.dtype, &c.device), &c)?;
        let batch = w.batch(&c, 11)?;
        let grads = model.loss(&batch, &Step::train(1))?.backward()?;
        for (name, var) in store.named_vars() {
            let g = grads
                .get(var.as_tensor())
                .unwrap_or_else(|| panic!("`{name}` gets no gradient"));
            let norm = g.abs()?.sum_all()?.to_scalar::<f32>()?;
            assert!(norm.is_finite() && norm > 0.0, "`{name}` has gradient norm {norm}");
        }
        Ok(())
    }
}
