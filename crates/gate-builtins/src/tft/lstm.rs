//! A multi-layer LSTM with PyTorch's parameters (`weight_ih_l{k}` `[4H, I]`,
//! `weight_hh_l{k}`, `bias_ih_l{k}`, `bias_hh_l{k}`, gates i, f, g, o) and
//! dropout between layers. Each layer computes x·W_ihᵀ for all steps in one
//! matmul up front; only h·W_hhᵀ runs per step.

use candle_core::{Result, Tensor, D};
use candle_nn::{Init, VarBuilder};

use gate::Step;

#[derive(Debug, Clone)]
struct Layer {
    w_ih: Tensor,
    w_hh: Tensor,
    b_ih: Tensor,
    b_hh: Tensor,
}

/// One layer's final hidden and cell state, each `[B, H]`.
#[derive(Debug, Clone)]
pub struct State {
    pub h: Tensor,
    pub c: Tensor,
}

#[derive(Debug, Clone)]
pub struct Lstm {
    layers: Vec<Layer>,
    hidden: usize,
    dropout: f64,
}

impl Lstm {
    pub fn new(input: usize, hidden: usize, layers: usize, dropout: f64, vb: VarBuilder) -> Result<Self> {
        let bound = 1.0 / (hidden as f64).sqrt();
        let init = Init::Uniform { lo: -bound, up: bound };
        let layers = (0..layers)
            .map(|k| {
                let i = if k == 0 { input } else { hidden };
                Ok(Layer {
                    w_ih: vb.get_with_hints((4 * hidden, i), &format!("weight_ih_l{k}"), init)?,
                    w_hh: vb.get_with_hints((4 * hidden, hidden), &format!("weight_hh_l{k}"), init)?,
                    b_ih: vb.get_with_hints(4 * hidden, &format!("bias_ih_l{k}"), init)?,
                    b_hh: vb.get_with_hints(4 * hidden, &format!("bias_hh_l{k}"), init)?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Lstm {
            layers,
            hidden,
            dropout,
        })
    }

    /// `x` `[B, T, I]`, one initial state per layer → output `[B, T, H]` and
    /// each layer's final state.
    pub fn forward(&self, x: &Tensor, init: &[State], step: &Step) -> Result<(Tensor, Vec<State>)> {
        if init.len() != self.layers.len() {
            candle_core::bail!(
                "the LSTM has {} layers but got {} initial states",
                self.layers.len(),
                init.len()
            );
        }
        let hsz = self.hidden;
        let (b, t, _) = x.dims3()?;
        let mut input = x.clone();
        let mut finals = Vec::with_capacity(self.layers.len());
        for (k, (layer, state)) in self.layers.iter().zip(init).enumerate() {
            let i = input.dim(2)?;
            // [B·T, I]·W_ihᵀ + b_ih, laid out [T, B, 4H] so each step is a contiguous slice.
            let xw = input
                .transpose(0, 1)?
                .contiguous()?
                .reshape((t * b, i))?
                .matmul(&layer.w_ih.t()?)?
                .broadcast_add(&layer.b_ih)?
                .reshape((t, b, 4 * hsz))?;
            let w_hh_t = layer.w_hh.t()?;
            let (mut h, mut c) = (state.h.clone(), state.c.clone());
            let mut outputs = Vec::with_capacity(t);
            for s in 0..t {
                let gates = xw.get(s)?.add(&h.matmul(&w_hh_t)?)?.broadcast_add(&layer.b_hh)?;
                let input_gate = candle_nn::ops::sigmoid(&gates.narrow(D::Minus1, 0, hsz)?)?;
                let forget_gate = candle_nn::ops::sigmoid(&gates.narrow(D::Minus1, hsz, hsz)?)?;
                let cell_input = gates.narrow(D::Minus1, 2 * hsz, hsz)?.tanh()?;
                let output_gate = candle_nn::ops::sigmoid(&gates.narrow(D::Minus1, 3 * hsz, hsz)?)?;
                c = ((forget_gate * &c)? + (input_gate * cell_input)?)?;
                h = (output_gate * c.tanh()?)?;
                outputs.push(h.clone());
            }
            finals.push(State { h, c });
            let out = Tensor::stack(&outputs, 1)?;
            input = if k + 1 < self.layers.len() {
                step.dropout(&out, self.dropout)?
            } else {
                out
            };
        }
        Ok((input, finals))
    }
}
