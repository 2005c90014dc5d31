//! AdamW whose update never holds more than a slice of a parameter at once.
//!
//! candle-nn's `AdamW` computes each parameter's update whole: about eleven
//! tensors the size of the parameter are live at its worst moment by a count
//! of its code (the new moments, their bias-corrected copies, the new
//! weights, the step's quotient and its terms), fourteen as the counting
//! allocator measured it. For a model whose largest parameter is large
//! that is the step's peak: the TFT's per-variable GLU weights
//! (`[251, 64, 128]`, 8.2 MB) put 115 MB of temporaries above its
//! parameters, gradients and state, more than its checkpointed activations.
//! [`SlicedAdamW`] runs the same operations, in the same order and dtype,
//! on slices of at most [`SlicedAdamW::slice`] elements and writes each
//! slice back in place, so the results are candle-nn's to the bit (tested)
//! and the temporaries are the slice's.

use candle_core::backprop::GradStore;
use candle_core::{Result, Tensor, Var};
use candle_nn::optim::ParamsAdamW;

/// gate's AdamW settings: candle-nn's defaults (β 0.9 / 0.999, ε 1e-8,
/// weight decay 0.01) at `lr`. The runner trains with these when a workload
/// names no optimizer of its own ([`crate::Workload::optimizer`]); a
/// workload that swaps in [`SlicedAdamW`] takes them from here, so the two
/// never drift apart.
pub fn adamw_params(lr: f64) -> ParamsAdamW {
    ParamsAdamW {
        lr,
        ..Default::default()
    }
}

/// candle-nn's `AdamW` (the same arithmetic, bit for bit), updating each
/// parameter in slices of at most [`SlicedAdamW::slice`] elements so the
/// step's temporaries are the slice's size, not the largest parameter's.
///
/// It is a `candle_nn::Optimizer` (so a [`crate::OptimizerStep`]): return it
/// from [`crate::Workload::optimizer`] to measure it, and use it in your own
/// training loop as you would candle-nn's.
///
/// ```
/// use gate::candle_nn::{optim::ParamsAdamW, Optimizer};
/// use gate::optim::SlicedAdamW;
/// # fn main() -> gate::candle_core::Result<()> {
/// # let vars = vec![gate::candle_core::Var::zeros((4, 3), gate::candle_core::DType::F32, &gate::candle_core::Device::Cpu)?];
/// let params = ParamsAdamW { lr: 1e-3, ..Default::default() };
/// let opt = SlicedAdamW::new(vars, params)?.with_slice(1 << 16);
/// assert_eq!(opt.slice(), 1 << 16);
/// # Ok(()) }
/// ```
pub struct SlicedAdamW {
    vars: Vec<Moments>,
    params: ParamsAdamW,
    step_t: usize,
    slice: usize,
}

/// One parameter with its first and second moments (as candle-nn keeps them:
/// floating-point parameters only, moments of the parameter's shape and dtype).
struct Moments {
    var: Var,
    first: Var,
    second: Var,
}

impl SlicedAdamW {
    /// The slice a new optimizer updates at once, in elements: 1 MiB of f32.
    pub const DEFAULT_SLICE: usize = 1 << 18;

    /// The same optimizer updating at most `elements` of a parameter at
    /// once (at least one).
    pub fn with_slice(mut self, elements: usize) -> Self {
        self.slice = elements.max(1);
        self
    }

    /// How many elements of a parameter one update holds at once.
    pub fn slice(&self) -> usize {
        self.slice
    }

    /// AdamW's settings.
    pub fn params(&self) -> &ParamsAdamW {
        &self.params
    }
}

impl candle_nn::Optimizer for SlicedAdamW {
    type Config = ParamsAdamW;

    fn new(vars: Vec<Var>, params: ParamsAdamW) -> Result<Self> {
        let vars = vars
            .into_iter()
            .filter(|var| var.dtype().is_float())
            .map(|var| {
                let first = Var::zeros(var.shape(), var.dtype(), var.device())?;
                let second = Var::zeros(var.shape(), var.dtype(), var.device())?;
                Ok(Moments { var, first, second })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(SlicedAdamW {
            vars,
            params,
            step_t: 0,
            slice: Self::DEFAULT_SLICE,
        })
    }

    fn learning_rate(&self) -> f64 {
        self.params.lr
    }

    fn set_learning_rate(&mut self, lr: f64) {
        self.params.lr = lr
    }

    fn step(&mut self, grads: &GradStore) -> Result<()> {
        self.step_t += 1;
        let p = &self.params;
        let step = Update {
            lr: p.lr,
            decay: 1f64 - p.lr * p.weight_decay,
            beta1: p.beta1,
            beta2: p.beta2,
            eps: p.eps,
            scale_m: 1f64 / (1f64 - p.beta1.powi(self.step_t as i32)),
            scale_v: 1f64 / (1f64 - p.beta2.powi(self.step_t as i32)),
        };
        for m in &self.vars {
            let Some(g) = grads.get(m.var.as_tensor()) else {
                continue;
            };
            if m.var.elem_count() <= self.slice || !m.var.is_contiguous() {
                // Whole, as candle-nn does: a small parameter needs no slices
                // (and a strided one, which a `Var` never is, has no flat view
                // to write them into).
                let (theta, first, second) =
                    step.apply(m.var.as_tensor(), m.first.as_tensor(), m.second.as_tensor(), g)?;
                m.first.set(&first)?;
                m.second.set(&second)?;
                m.var.set(&theta)?;
                continue;
            }
            // Flat views of the parameter and its moments share their storage
            // (each is contiguous), so `slice_set` writes into them in place.
            let theta = m.var.as_tensor().detach().flatten_all()?;
            let first = m.first.as_tensor().detach().flatten_all()?;
            let second = m.second.as_tensor().detach().flatten_all()?;
            let g = g.flatten_all()?;
            let n = theta.elem_count();
            let mut at = 0;
            while at < n {
                let len = self.slice.min(n - at);
                let (t, f, s) = step.apply(
                    &theta.narrow(0, at, len)?,
                    &first.narrow(0, at, len)?,
                    &second.narrow(0, at, len)?,
                    &g.narrow(0, at, len)?,
                )?;
                first.slice_set(&f, 0, at)?;
                second.slice_set(&s, 0, at)?;
                theta.slice_set(&t, 0, at)?;
                at += len;
            }
        }
        Ok(())
    }
}

/// One step's constants.
struct Update {
    lr: f64,
    decay: f64,
    beta1: f64,
    beta2: f64,
    eps: f64,
    scale_m: f64,
    scale_v: f64,
}

impl Update {
    /// candle-nn's AdamW update of one parameter (or a slice of it), op for
    /// op: the new parameter, first and second moments.
    fn apply(&self, theta: &Tensor, m: &Tensor, v: &Tensor, g: &Tensor) -> Result<(Tensor, Tensor, Tensor)> {
        let next_m = ((m * self.beta1)? + (g * (1.0 - self.beta1))?)?;
        let next_v = ((v * self.beta2)? + (g.sqr()? * (1.0 - self.beta2))?)?;
        let m_hat = (&next_m * self.scale_m)?;
        let v_hat = (&next_v * self.scale_v)?;
        let next_theta = (theta * self.decay)?;
        let adjusted = (m_hat / (v_hat.sqrt()? + self.eps)?)?;
        let next_theta = (next_theta - (adjusted * self.lr)?)?;
        Ok((next_theta, next_m, next_v))
    }
}

#[cfg(test)]
mod tests {
    use candle_core::{DType, Device, Tensor, Var};
    use candle_nn::optim::{AdamW, ParamsAdamW};
    use candle_nn::Optimizer;

    use super::SlicedAdamW;

    /// Three parameters of awkward sizes, with values that are not round.
    fn vars() -> candle_core::Result<Vec<Var>> {
        let filled = |n: usize| Tensor::arange(0f32, n as f32, &Device::Cpu)?.affine(0.37, 0.11)?.sin();
        Ok(vec![
            Var::from_tensor(&filled(105)?.reshape((7, 5, 3))?)?,
            Var::from_tensor(&filled(13)?)?,
            Var::from_tensor(&filled(4)?.reshape((2, 2))?)?,
        ])
    }

    /// Each step's parameters and moments are candle-nn's to the bit, with
    /// slices that split a parameter unevenly, one element, and none needed.
    #[test]
    fn every_slice_gives_candle_nns_adamw_bit_for_bit() -> candle_core::Result<()> {
        let params = ParamsAdamW {
            lr: 0.05,
            weight_decay: 0.1,
            ..Default::default()
        };
        for slice in [1, 4, 16, 1 << 20] {
            let (a, b) = (vars()?, vars()?);
            let mut whole = AdamW::new(a.clone(), params.clone())?;
            let mut sliced = SlicedAdamW::new(b.clone(), params.clone())?.with_slice(slice);
            for step in 0..4 {
                let loss = |vs: &[Var]| -> candle_core::Result<Tensor> {
                    let mut sum = Tensor::zeros((), DType::F32, &Device::Cpu)?;
                    for (i, v) in vs.iter().enumerate() {
                        let w = (v.as_tensor().sqr()? * (1.0 + i as f64 + step as f64))?;
                        sum = (sum + (w.sum_all()? + v.as_tensor().sin()?.sum_all()?)?)?;
                    }
                    Ok(sum)
                };
                whole.backward_step(&loss(&a)?)?;
                sliced.backward_step(&loss(&b)?)?;
                for (x, y) in a.iter().zip(&b) {
                    let (x, y) = (x.flatten_all()?.to_vec1::<f32>()?, y.flatten_all()?.to_vec1::<f32>()?);
                    let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
                    assert_eq!(bits(&x), bits(&y), "slice {slice}, step {step}");
                }
            }
        }
        Ok(())
    }
}
