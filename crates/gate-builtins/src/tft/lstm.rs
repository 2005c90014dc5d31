//! A multi-layer LSTM with PyTorch's parameters (`weight_ih_l{k}` `[4H, I]`,
//! `weight_hh_l{k}`, `bias_ih_l{k}`, `bias_hh_l{k}`, gates i, f, g, o) and
//! dropout between layers. Each layer computes x·W_ihᵀ for all steps in one
//! matmul up front; only h·W_hhᵀ runs per step.
//!
//! When the TFT checkpoints, the encoder LSTM runs taped (a
//! [`gate::checkpoint::TapedBlock`]):
//! its forward keeps no graph, only each layer's input, hidden and cell
//! states, and its backward is written by hand. Under autograd each of its
//! ~120 cells kept about 30 tensors (30.6 MiB of the rest's 68.4 MiB kept
//! at the TFT's size) and ran ~45 small kernels in backward (counted from
//! the code and candle's backprop): every op's
//! generic backward, each gradient added into a fresh zero tensor, and the
//! per-step slice of the up-front product padded back to all T steps. The
//! hand-written backward recomputes the gates of all steps in one matmul and
//! runs 9 kernels a step; the weights' and input's gradients are one matmul
//! each over all steps.

use candle_core::{Result, Tensor, D};
use candle_nn::{Init, VarBuilder};

use gate::checkpoint::{Taped, TapedBlock, TapedGrads};
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

    fn check_init(&self, init: &[State]) -> Result<()> {
        if init.len() != self.layers.len() {
            candle_core::bail!(
                "the LSTM has {} layers but got {} initial states",
                self.layers.len(),
                init.len()
            );
        }
        Ok(())
    }

    /// `x` `[B, T, I]`, one initial state per layer → output `[B, T, H]` and
    /// each layer's final state.
    pub fn forward(&self, x: &Tensor, init: &[State], step: &Step) -> Result<(Tensor, Vec<State>)> {
        self.check_init(init)?;
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

/// What one layer's backward reads, kept by the taped forward: detached,
/// time-major (`[T, B, ·]`).
struct LayerTape {
    /// The layer's input (after the dropout between layers), `[T, B, I]`.
    input: Tensor,
    /// The hidden and cell state after every step, `[T, B, H]` each.
    h: Tensor,
    c: Tensor,
    /// The state the layer started from, `[B, H]` each.
    init: State,
    /// The dropout mask on this layer's output (the next layer's input), `[T, B, H]`.
    mask: Option<Tensor>,
}

/// The gradients [`Lstm::backprop_tape`] computes.
struct LstmGrads {
    /// The input's, `[B, T, I]`.
    input: Tensor,
    /// Each layer's initial state's.
    init: Vec<State>,
    /// Each parameter's, with the parameter as the layer uses it.
    params: Vec<(Tensor, Tensor)>,
}

impl Lstm {
    /// [`Lstm::forward`]'s arithmetic, op for op (the same output to the
    /// bit, the same dropout masks drawn), with no graph: the output
    /// `[B, T, H]`, each layer's final state, and the tape.
    fn run_tape(&self, x: &Tensor, init: &[State], step: &Step) -> Result<(Tensor, Vec<State>, Vec<LayerTape>)> {
        self.check_init(init)?;
        let hsz = self.hidden;
        let (b, t, _) = x.dims3()?;
        let mut input = x.detach().transpose(0, 1)?.contiguous()?;
        let mut finals = Vec::with_capacity(self.layers.len());
        let mut tapes = Vec::with_capacity(self.layers.len());
        let mut out = input.clone();
        for (k, (layer, state)) in self.layers.iter().zip(init).enumerate() {
            let i = input.dim(2)?;
            let xw = input
                .reshape((t * b, i))?
                .matmul(&layer.w_ih.detach().t()?)?
                .broadcast_add(&layer.b_ih.detach())?
                .reshape((t, b, 4 * hsz))?;
            let w_hh_t = layer.w_hh.detach().t()?;
            let b_hh = layer.b_hh.detach();
            let start = State {
                h: state.h.detach(),
                c: state.c.detach(),
            };
            let (mut h, mut c) = (start.h.clone(), start.c.clone());
            let mut hs = Vec::with_capacity(t);
            let mut cs = Vec::with_capacity(t);
            for s in 0..t {
                let gates = xw.get(s)?.add(&h.matmul(&w_hh_t)?)?.broadcast_add(&b_hh)?;
                // One sigmoid over all four gates: elementwise, so each gate's
                // values are those of a sigmoid over its own slice.
                let sig = candle_nn::ops::sigmoid(&gates)?;
                let cell_input = gates.narrow(D::Minus1, 2 * hsz, hsz)?.tanh()?;
                c = ((sig.narrow(D::Minus1, hsz, hsz)? * &c)? + (sig.narrow(D::Minus1, 0, hsz)? * cell_input)?)?;
                h = (sig.narrow(D::Minus1, 3 * hsz, hsz)? * c.tanh()?)?;
                hs.push(h.clone());
                cs.push(c.clone());
            }
            drop(xw);
            out = Tensor::stack(&hs, 1)?;
            drop(hs);
            let mask = if k + 1 < self.layers.len() {
                step.dropout_mask(&out, self.dropout)?
            } else {
                None
            };
            let next = match &mask {
                Some(m) => out.mul(m)?,
                None => out.clone(),
            };
            finals.push(State { h, c });
            // The next layer's input, time-major; above the top layer no
            // layer reads it, so no copy is made.
            let next_input = if k + 1 < self.layers.len() {
                next.transpose(0, 1)?.contiguous()?
            } else {
                next
            };
            tapes.push(LayerTape {
                input: std::mem::replace(&mut input, next_input),
                h: out.transpose(0, 1)?.contiguous()?,
                c: Tensor::stack(&cs, 0)?,
                init: start,
                mask: mask
                    .map(|m| m.transpose(0, 1).and_then(|m| m.contiguous()))
                    .transpose()?,
            });
        }
        Ok((out, finals, tapes))
    }

    /// Backpropagation through time from the tape: `d_out` is the loss's
    /// gradient with respect to the output `[B, T, H]`, `d_finals` each
    /// layer's final state's (absent: zero).
    fn backprop_tape(
        &self,
        tapes: Vec<LayerTape>,
        d_out: Tensor,
        d_finals: Vec<(Option<Tensor>, Option<Tensor>)>,
    ) -> Result<LstmGrads> {
        let hsz = self.hidden;
        let mut init = Vec::with_capacity(self.layers.len());
        let mut params = Vec::with_capacity(4 * self.layers.len());
        // The gradient of the layer above's input (the top layer's: the output's).
        let mut d_input = d_out.transpose(0, 1)?.contiguous()?;
        // Only its time-major copy is read from here on.
        drop(d_out);
        for ((layer, tape), (dh_final, dc_final)) in self.layers.iter().zip(tapes).zip(d_finals).rev() {
            let d_seq = match &tape.mask {
                Some(mask) => d_input.mul(mask)?,
                None => d_input,
            };
            let (t, b, i) = tape.input.dims3()?;
            let rows = |x: &Tensor, w: usize| x.reshape((t * b, w));
            let w_hh = layer.w_hh.detach();
            let h_prev = Tensor::cat(&[&tape.init.h.unsqueeze(0)?, &tape.h.narrow(0, 0, t - 1)?], 0)?;
            let Factors { q, a_o, a_ifg, f } = Factors::new(layer, &tape, &h_prev, hsz)?;
            // gates = x·W_ihᵀ + h·W_hhᵀ: dh_prev = d_gates·W_hh, split at the o gate.
            let w_ifg = w_hh.narrow(0, 0, 3 * hsz)?;
            let w_o = w_hh.narrow(0, 3 * hsz, hsz)?;
            let zeros = || Tensor::zeros((b, hsz), d_seq.dtype(), d_seq.device());
            let mut dh_next = dh_final.map_or_else(zeros, Ok)?;
            let mut dc = dc_final.map_or_else(zeros, Ok)?;
            let mut d_ifg = Vec::with_capacity(t);
            let mut d_o = Vec::with_capacity(t);
            for s in (0..t).rev() {
                let dh = dh_next.add(&d_seq.get(s)?)?;
                let dc_s = dc.add(&dh.mul(&q.get(s)?)?)?;
                let ifg = a_ifg
                    .get(s)?
                    .broadcast_mul(&dc_s.unsqueeze(1)?)?
                    .reshape((b, 3 * hsz))?;
                let o = dh.mul(&a_o.get(s)?)?;
                dh_next = ifg.matmul(&w_ifg)?.add(&o.matmul(&w_o)?)?;
                dc = dc_s.mul(&f.get(s)?)?;
                d_ifg.push(ifg);
                d_o.push(o);
            }
            d_ifg.reverse();
            d_o.reverse();
            let d_gates =
                Tensor::cat(&[Tensor::stack(&d_ifg, 0)?, Tensor::stack(&d_o, 0)?], 2)?.reshape((t * b, 4 * hsz))?;
            drop((d_ifg, d_o));
            let d_gates_t = d_gates.t()?;
            params.push((layer.w_ih.clone(), d_gates_t.matmul(&rows(&tape.input, i)?)?));
            params.push((layer.w_hh.clone(), d_gates_t.matmul(&rows(&h_prev, hsz)?)?));
            let d_bias = d_gates.sum(0)?;
            params.push((layer.b_ih.clone(), d_bias.clone()));
            params.push((layer.b_hh.clone(), d_bias));
            d_input = d_gates.matmul(&layer.w_ih.detach())?.reshape((t, b, i))?;
            init.push(State { h: dh_next, c: dc });
        }
        init.reverse();
        Ok(LstmGrads {
            input: d_input.transpose(0, 1)?.contiguous()?,
            init,
            params,
        })
    }
}

/// One layer's per-step factors of backpropagation through time, every
/// step at once (`[T, B, ·]`): dc += dh ⊙ q; the gates' pre-activation
/// gradients are dc ⊙ [a_i a_f a_g] and dh ⊙ a_o; dc passes back as dc ⊙ f.
struct Factors {
    q: Tensor,
    a_o: Tensor,
    /// `[T, B, 3, H]`: a_i, a_f, a_g.
    a_ifg: Tensor,
    f: Tensor,
}

impl Factors {
    /// From the kept states: every step's gates recomputed in one matmul.
    fn new(layer: &Layer, tape: &LayerTape, h_prev: &Tensor, hsz: usize) -> Result<Self> {
        let (t, b, i) = tape.input.dims3()?;
        let rows = |x: &Tensor, w: usize| x.reshape((t * b, w));
        let c_prev = Tensor::cat(&[&tape.init.c.unsqueeze(0)?, &tape.c.narrow(0, 0, t - 1)?], 0)?;
        let gates = rows(&tape.input, i)?
            .matmul(&layer.w_ih.detach().t()?)?
            .broadcast_add(&layer.b_ih.detach())?
            .add(&rows(h_prev, hsz)?.matmul(&layer.w_hh.detach().t()?)?)?
            .broadcast_add(&layer.b_hh.detach())?;
        let sig = candle_nn::ops::sigmoid(&gates)?;
        let gate = |k: usize| sig.narrow(1, k * hsz, hsz);
        let (ig, fg, og) = (gate(0)?, gate(1)?, gate(3)?);
        let g = gates.narrow(1, 2 * hsz, hsz)?.tanh()?;
        drop(gates);
        let tc = rows(&tape.c, hsz)?.tanh()?;
        let one_minus = |x: &Tensor| x.affine(-1.0, 1.0);
        let dsigmoid = |s: &Tensor| s.mul(&one_minus(s)?);
        let steps = |x: Tensor| x.reshape((t, b, hsz));
        let a_i = g.mul(&dsigmoid(&ig)?)?;
        let a_f = rows(&c_prev, hsz)?.mul(&dsigmoid(&fg)?)?;
        let a_g = ig.mul(&one_minus(&g.sqr()?)?)?;
        Ok(Factors {
            q: steps(og.mul(&one_minus(&tc.sqr()?)?)?)?,
            a_o: steps(tc.mul(&dsigmoid(&og)?)?)?,
            a_ifg: Tensor::stack(&[a_i, a_f, a_g], 1)?.reshape((t, b, 3, hsz))?,
            f: steps(fg.contiguous()?)?,
        })
    }
}

/// The LSTM's tape from a taped forward: each layer's, bottom first.
pub struct LstmTape(Vec<LayerTape>);

/// The LSTM as a taped block (the encoder LSTM of a checkpointed TFT's
/// training forward): inputs the sequence `[B, T, I]` then each layer's
/// initial `h` and `c` ([`taped_inputs`]); outputs the output `[B, T, H]`
/// then each layer's final `h` and `c` ([`taped_finals`]).
impl TapedBlock for Lstm {
    type Tape = LstmTape;

    fn forward_taped(&self, inputs: &[Tensor], step: &Step) -> Result<(Vec<Tensor>, LstmTape)> {
        let (x, init) = split_inputs(inputs)?;
        let (out, finals, tapes) = self.run_tape(x, &init, step)?;
        let outputs = std::iter::once(out)
            .chain(finals.into_iter().flat_map(|s| [s.h, s.c]))
            .collect();
        Ok((outputs, LstmTape(tapes)))
    }

    fn backward_taped(&self, tape: LstmTape, grad_outputs: Vec<Option<Tensor>>) -> Result<TapedGrads> {
        let LstmTape(tapes) = tape;
        let mut grad_outputs = grad_outputs.into_iter();
        let d_out = match grad_outputs.next().flatten() {
            Some(g) => g,
            None => {
                let Some(top) = tapes.last().map(|tape| &tape.h) else {
                    candle_core::bail!("a taped LSTM's tape has no layer")
                };
                let (t, b, h) = top.dims3()?;
                Tensor::zeros((b, t, h), top.dtype(), top.device())?
            }
        };
        let rest: Vec<Option<Tensor>> = grad_outputs.collect();
        let d_finals = rest
            .chunks(2)
            .map(|hc| (hc[0].clone(), hc.get(1).cloned().flatten()))
            .collect();
        drop(rest);
        let grads = self.backprop_tape(tapes, d_out, d_finals)?;
        let inputs = std::iter::once(Some(grads.input))
            .chain(grads.init.into_iter().flat_map(|s| [Some(s.h), Some(s.c)]))
            .collect();
        Ok(TapedGrads::new(inputs, grads.params))
    }
}

/// A taped LSTM's inputs: the sequence, then each layer's initial state.
pub(super) fn taped_inputs(x: &Tensor, init: &[State]) -> Vec<Tensor> {
    std::iter::once(x.clone())
        .chain(init.iter().flat_map(|s| [s.h.clone(), s.c.clone()]))
        .collect()
}

/// Each layer's final state from a taped LSTM's outputs, as leaves.
pub(super) fn taped_finals(run: &Taped<LstmTape>) -> Vec<State> {
    (0..run.output_count().saturating_sub(1) / 2)
        .map(|k| State {
            h: run.output(1 + 2 * k).clone(),
            c: run.output(2 + 2 * k).clone(),
        })
        .collect()
}

/// [`taped_inputs`] back: the sequence and each layer's initial state.
fn split_inputs(inputs: &[Tensor]) -> Result<(&Tensor, Vec<State>)> {
    let Some((x, states)) = inputs.split_first() else {
        candle_core::bail!("a taped LSTM's inputs are the sequence and each layer's initial h and c; got none")
    };
    if states.len() % 2 != 0 {
        candle_core::bail!(
            "a taped LSTM's initial states come in pairs (h, c); got {}",
            states.len()
        )
    }
    let init = states
        .chunks(2)
        .map(|hc| State {
            h: hc[0].clone(),
            c: hc[1].clone(),
        })
        .collect();
    Ok((x, init))
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::backprop::GradStore;
    use candle_core::{DType, Device, Var};
    use candle_nn::VarMap;

    /// The largest |a − b| / max|b| over every gradient the two stores hold for `of`.
    fn rel(a: &GradStore, b: &GradStore, of: &Tensor) -> Result<f32> {
        let (x, y) = (
            a.get(of).expect("taped gradient"),
            b.get(of).expect("autograd gradient"),
        );
        let diff = (x - y)?.abs()?.flatten_all()?.max(0)?.to_scalar::<f32>()?;
        let scale = y.abs()?.flatten_all()?.max(0)?.to_scalar::<f32>()?;
        Ok(diff / scale.max(1e-12))
    }

    #[test]
    fn the_taped_backward_equals_autograd() -> Result<()> {
        let dev = Device::Cpu;
        for (dropout, train, t, layers) in [
            (0.0, true, 7, 2),
            (0.3, true, 7, 2),
            (0.3, false, 7, 2),
            (0.3, true, 1, 2),
            (0.3, true, 5, 3),
            (0.3, true, 5, 1),
        ] {
            let map = VarMap::new();
            let vb = VarBuilder::from_varmap(&map, DType::F32, &dev);
            let lstm = Lstm::new(5, 4, layers, dropout, vb.pp("lstm"))?;
            let decoder = Lstm::new(5, 4, layers, dropout, vb.pp("decoder"))?;
            let xd = Tensor::randn(0f32, 1.0, (3, 2, 5), &dev)?;
            let x = Var::from_tensor(&Tensor::randn(0f32, 1.0, (3, t, 5), &dev)?)?;
            let h0 = Var::from_tensor(&Tensor::randn(0f32, 1.0, (3, 4), &dev)?)?;
            let c0 = Var::from_tensor(&Tensor::randn(0f32, 1.0, (3, 4), &dev)?)?;
            let init = vec![
                State {
                    h: h0.as_tensor().affine(2.0, 0.0)?,
                    c: c0.as_tensor().affine(3.0, 0.0)?,
                };
                layers
            ];
            let r = Tensor::randn(0f32, 1.0, (3, t, 4), &dev)?;
            let rh = Tensor::randn(0f32, 1.0, (3, 4), &dev)?;
            let step = || if train { Step::train(11) } else { Step::eval() };
            let loss = |out: &Tensor, finals: &[State]| -> Result<Tensor> {
                let (dec, _) = decoder.forward(&xd, finals, &step())?;
                let mut l = (out.mul(&r)?.sum_all()? + dec.sum_all()?)?;
                for s in finals {
                    l = (l + s.h.mul(&rh)?.sum_all()? + s.c.mul(&rh)?.affine(2.0, 0.0)?.sum_all()?)?;
                }
                Ok(l)
            };
            let (out, finals) = lstm.forward(x.as_tensor(), &init, &step())?;
            let reference = loss(&out, &finals)?.backward()?;
            let taped = Taped::forward(&lstm, taped_inputs(x.as_tensor(), &init), &step())?;
            assert_eq!(
                taped.output(0).flatten_all()?.to_vec1::<f32>()?,
                out.flatten_all()?.to_vec1::<f32>()?,
                "the taped forward is the forward to the bit"
            );
            let mut grads = loss(taped.output(0), &taped_finals(&taped))?.backward()?;
            // The input's and the initial state's leaves kept too, as a
            // checkpointed block's output feeding the LSTM is.
            let mut vars = map.all_vars();
            vars.extend([x.clone(), h0.clone(), c0.clone()]);
            taped.backward(&lstm, &mut grads, &vars)?;
            for (name, t) in [("x", x.as_tensor()), ("h0", h0.as_tensor()), ("c0", c0.as_tensor())].into_iter() {
                let worst = rel(&grads, &reference, t)?;
                assert!(
                    worst < 1e-5,
                    "dropout {dropout}, train {train}, {t} steps, {layers} layers: {name} {:?} differs by {worst}",
                    t.dims()
                );
            }
            for (name, v) in map.data().lock().expect("the var map").iter() {
                let worst = rel(&grads, &reference, v.as_tensor())?;
                assert!(
                    worst < 1e-5,
                    "dropout {dropout}, train {train}, {t} steps, {layers} layers: `{name}` differs by {worst}"
                );
            }
        }
        Ok(())
    }
}
