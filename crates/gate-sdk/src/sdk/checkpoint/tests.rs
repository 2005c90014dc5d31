//! The checkpointed blocks' gradients against the plain graph's.

use super::*;
use candle_core::{DType, Device};

/// y = tanh(x·W + c), position-wise.
struct Layer {
    w: Var,
}

impl RowWise for Layer {
    fn forward_rows(&self, inputs: &[Tensor], step: &Step) -> Result<Tensor> {
        let h = inputs[0].matmul(self.w.as_tensor())?.add(&inputs[1])?;
        step.dropout(&h.tanh()?, 0.3)
    }
}

#[test]
fn chunked_recompute_gives_the_full_graph_gradients() -> Result<()> {
    let dev = Device::Cpu;
    let w = Var::from_tensor(&Tensor::randn(0f32, 1.0, (3, 4), &dev)?)?;
    let u = Var::from_tensor(&Tensor::randn(0f32, 1.0, (7, 4), &dev)?)?;
    let x = Tensor::randn(0f32, 1.0, (7, 3), &dev)?;
    let layer = Layer { w: w.clone() };
    // The context input is tracked: c = u².
    let loss_of = |y: &Tensor| y.sqr()?.sum_all();
    let vars = vec![w.clone(), u.clone()];

    // Reference: the same chunks and masks, graph kept.
    let c = u.as_tensor().sqr()?;
    let y = forward_chunked(&layer, &[x.clone(), c], 3, &Step::train(5))?;
    let want = loss_of(&y)?.backward()?;

    let c = u.as_tensor().sqr()?;
    let ck = Checkpointed::forward(&layer, vec![x.clone(), c], 3, &Step::train(5))?;
    let mut got = loss_of(ck.output())?.backward()?;
    ck.backward(&layer, &mut got, &vars)?;
    for v in &vars {
        let a = want.get(v.as_tensor()).unwrap();
        let b = got.get(v.as_tensor()).unwrap();
        let diff = (a - b)?.abs()?.max_all()?.to_scalar::<f32>()?;
        let scale = a.abs()?.max_all()?.to_scalar::<f32>()?;
        assert!(diff <= 1e-5 * scale.max(1.0), "diff {diff} scale {scale}");
    }
    assert!(got.get(ck.output()).is_none());
    assert_eq!(w.dtype(), DType::F32);
    Ok(())
}

/// Three layers in a row, x → 1 → 2 → 3 → loss (each also reads a
/// tracked context), with any of them checkpointed.
struct Stack {
    layers: Vec<Layer>,
    u: Var,
}

impl Stack {
    fn new(dev: &Device) -> Result<Self> {
        let layers = (0..3)
            .map(|_| {
                Ok(Layer {
                    w: Var::from_tensor(&Tensor::randn(0f32, 0.5, (4, 4), dev)?)?,
                })
            })
            .collect::<Result<_>>()?;
        let u = Var::from_tensor(&Tensor::randn(0f32, 1.0, (9, 4), dev)?)?;
        Ok(Stack { layers, u })
    }

    fn vars(&self) -> Vec<Var> {
        let mut v: Vec<Var> = self.layers.iter().map(|l| l.w.clone()).collect();
        v.push(self.u.clone());
        v
    }

    /// The plain model's gradients: the same chunks and masks, graph kept.
    fn plain_grads(&self, x: &Tensor) -> Result<GradStore> {
        let mut h = x.clone();
        for (i, l) in self.layers.iter().enumerate() {
            let c = self.u.as_tensor().sqr()?;
            h = forward_chunked(l, &[h, c], 2, &Step::train(10 + i as u64))?;
        }
        h.sqr()?.sum_all()?.backward()
    }

    /// The checkpointed blocks' forward (those in `which`), then the
    /// loss's backward; the blocks' backward is the caller's.
    fn checkpointed(&self, x: &Tensor, which: &[usize]) -> Result<(Vec<Option<Checkpointed>>, GradStore)> {
        let mut h = x.clone();
        let mut blocks = Vec::new();
        for (i, l) in self.layers.iter().enumerate() {
            let c = self.u.as_tensor().sqr()?;
            let step = Step::train(10 + i as u64);
            if which.contains(&i) {
                let ck = Checkpointed::forward(l, vec![h, c], 2, &step)?;
                h = ck.output().clone();
                blocks.push(Some(ck));
            } else {
                h = forward_chunked(l, &[h, c], 2, &step)?;
                blocks.push(None);
            }
        }
        let grads = h.sqr()?.sum_all()?.backward()?;
        Ok((blocks, grads))
    }
}

fn assert_same_grads(want: &GradStore, got: &GradStore, vars: &[Var]) -> Result<()> {
    for (i, v) in vars.iter().enumerate() {
        let a = want.get(v.as_tensor()).unwrap();
        let b = got
            .get(v.as_tensor())
            .unwrap_or_else(|| panic!("var {i} has no gradient"));
        let diff = (a - b)?.abs()?.max_all()?.to_scalar::<f32>()?;
        let scale = a.abs()?.max_all()?.to_scalar::<f32>()?;
        assert!(diff <= 1e-5 * scale.max(1.0), "var {i}: diff {diff} scale {scale}");
    }
    Ok(())
}

#[test]
fn any_number_of_blocks_in_a_row_checkpoint_with_the_plain_gradients() -> Result<()> {
    let dev = Device::Cpu;
    let stack = Stack::new(&dev)?;
    let x = Tensor::randn(0f32, 1.0, (9, 4), &dev)?;
    let vars = stack.vars();
    let want = stack.plain_grads(&x)?;
    for which in [vec![0, 1, 2], vec![0, 2], vec![1, 2], vec![0, 1]] {
        let (blocks, mut got) = stack.checkpointed(&x, &which)?;
        // Given in forward order; backward_all runs them in reverse.
        let given: Vec<(&Checkpointed, &dyn RowWise)> = blocks
            .iter()
            .zip(&stack.layers)
            .filter_map(|(b, l)| Some((b.as_ref()?, l as &dyn RowWise)))
            .collect();
        backward_all(&given, &mut got, &vars)?;
        assert_same_grads(&want, &got, &vars)?;
    }
    // By hand, in the reverse order of the forwards, it is the same.
    let (blocks, mut got) = stack.checkpointed(&x, &[0, 1, 2])?;
    for i in [2, 1, 0] {
        blocks[i]
            .as_ref()
            .unwrap()
            .backward(&stack.layers[i], &mut got, &vars)?;
    }
    assert_same_grads(&want, &got, &vars)?;
    Ok(())
}

#[test]
fn a_block_run_backward_before_the_block_it_feeds_is_refused_with_the_fix() -> Result<()> {
    let dev = Device::Cpu;
    let stack = Stack::new(&dev)?;
    let x = Tensor::randn(0f32, 1.0, (9, 4), &dev)?;
    let (blocks, mut got) = stack.checkpointed(&x, &[0, 1])?;
    let err = blocks[0]
        .as_ref()
        .unwrap()
        .backward(&stack.layers[0], &mut got, &stack.vars())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("reverse order of their forwards") && err.contains("checkpoint::backward_all"),
        "{err}"
    );
    Ok(())
}

/// Single-head causal self-attention with a residual and dropout: row
/// `i` of the output reads every row up to `i`, so it is no `RowWise`.
struct Attention {
    wq: Var,
    wk: Var,
    wv: Var,
}

impl Attention {
    fn new(d: usize, dev: &Device) -> Result<Self> {
        let w = || Var::from_tensor(&Tensor::randn(0f32, 0.4, (d, d), dev)?);
        Ok(Attention {
            wq: w()?,
            wk: w()?,
            wv: w()?,
        })
    }
}

impl Block for Attention {
    fn forward_block(&self, inputs: &[Tensor], step: &Step) -> Result<Tensor> {
        let (x, mask) = (&inputs[0], &inputs[1]);
        let q = x.matmul(self.wq.as_tensor())?;
        let k = x.matmul(self.wk.as_tensor())?;
        let v = x.matmul(self.wv.as_tensor())?;
        let scores = q.matmul(&k.t()?)?.broadcast_add(mask)?;
        let att = step.dropout(&crate::sdk::nn::softmax(&scores)?, 0.2)?;
        x + att.matmul(&v)?
    }
}

/// Three attention blocks, then a position-wise layer, then the loss.
struct Decoder {
    blocks: Vec<Attention>,
    head: Layer,
    u: Var,
    mask: Tensor,
}

impl Decoder {
    fn new(t: usize, d: usize, dev: &Device) -> Result<Self> {
        let blocks = (0..3).map(|_| Attention::new(d, dev)).collect::<Result<_>>()?;
        let head = Layer {
            w: Var::from_tensor(&Tensor::randn(0f32, 0.5, (d, d), dev)?)?,
        };
        let u = Var::from_tensor(&Tensor::randn(0f32, 1.0, (t, d), dev)?)?;
        let mask: Vec<f32> = (0..t * t)
            .map(|i| if i % t > i / t { f32::NEG_INFINITY } else { 0.0 })
            .collect();
        let mask = Tensor::from_vec(mask, (t, t), dev)?;
        Ok(Decoder { blocks, head, u, mask })
    }

    fn vars(&self) -> Vec<Var> {
        let mut v: Vec<Var> = self
            .blocks
            .iter()
            .flat_map(|b| [b.wq.clone(), b.wk.clone(), b.wv.clone()])
            .collect();
        v.push(self.head.w.clone());
        v.push(self.u.clone());
        v
    }

    /// The loss; blocks in `whole` are checkpointed whole, and the head
    /// in chunks when `rows`. One step seed, so the plain run and every
    /// checkpointed one draw the same masks.
    fn loss<'a>(&'a self, x: &Tensor, whole: &[usize], rows: bool, ck: &mut Checkpoints<'a>) -> Result<Tensor> {
        let step = Step::train(77);
        // The first block's input is tracked: x + u.
        let mut h = x.broadcast_add(self.u.as_tensor())?;
        // Blocks not checkpointed run plain, with the same masks.
        let mut off = Checkpoints::off();
        for (i, b) in self.blocks.iter().enumerate() {
            let inputs = vec![h, self.mask.clone()];
            h = if whole.contains(&i) {
                ck.whole(b, inputs, &step)?
            } else {
                off.whole(b, inputs, &step)?
            };
        }
        let c = self.u.as_tensor().sqr()?;
        let y = if rows {
            ck.rows(&self.head, vec![h, c], 3, &step)?
        } else {
            off.rows(&self.head, vec![h, c], 3, &step)?
        };
        assert!(off.is_empty(), "off keeps no block");
        y.sqr()?.sum_all()
    }
}

#[test]
fn whole_blocks_that_are_not_position_wise_checkpoint_with_the_plain_gradients() -> Result<()> {
    let dev = Device::Cpu;
    let (t, d) = (6, 4);
    let model = Decoder::new(t, d, &dev)?;
    let x = Tensor::randn(0f32, 1.0, (t, d), &dev)?;
    let vars = model.vars();
    let mut none = Checkpoints::new();
    let want = model.loss(&x, &[], false, &mut none)?.backward()?;
    assert!(none.is_empty());
    // Off, asked for every block, is the plain model.
    let mut off = Checkpoints::off();
    let plain = model.loss(&x, &[0, 1, 2], true, &mut off)?;
    assert!(off.is_empty() && !off.is_on());
    assert_same_grads(&want, &off.into_forward(plain).backward(&vars)?, &vars)?;
    for (whole, rows) in [
        (vec![0, 1, 2], false),
        (vec![0, 1, 2], true),
        (vec![1], true),
        (vec![0, 2], false),
    ] {
        let mut ck = Checkpoints::new();
        let loss = model.loss(&x, &whole, rows, &mut ck)?;
        assert_eq!(ck.len(), whole.len() + rows as usize);
        let got = ck.into_forward(loss).backward(&vars)?;
        assert_same_grads(&want, &got, &vars)?;
    }
    Ok(())
}

#[test]
fn a_whole_block_keeps_its_inputs_and_output_not_its_graph() -> Result<()> {
    let dev = Device::Cpu;
    let model = Decoder::new(6, 4, &dev)?;
    let x = Tensor::randn(0f32, 1.0, (6, 4), &dev)?;
    let h = x.broadcast_add(model.u.as_tensor())?;
    let ck = Checkpointed::whole(&model.blocks[0], vec![h, model.mask.clone()], &Step::train(3))?;
    assert!(ck.output().is_variable(), "the rest of the model runs from a leaf");
    // Asked for the wrong kind of backward, it says which one.
    let mut grads = ck.output().sum_all()?.backward()?;
    let err = ck
        .backward(&model.head, &mut grads, &model.vars())
        .unwrap_err()
        .to_string();
    assert!(err.contains("backward_whole"), "{err}");
    Ok(())
}

/// y = x ⊙ w over rows, its backward written by hand and run in chunks of
/// its own: a block checkpointed whole that runs its own parts.
struct Scaled {
    w: Var,
    backwards: std::cell::Cell<usize>,
}

impl Block for Scaled {
    fn forward_block(&self, inputs: &[Tensor], _step: &Step) -> Result<Tensor> {
        inputs[0].broadcast_mul(self.w.as_tensor())
    }

    fn forward_block_detached(&self, inputs: &[Tensor], _step: &Step) -> Result<Tensor> {
        inputs[0].detach().broadcast_mul(&self.w.as_tensor().detach())
    }

    fn backward_block(&self, inputs: &[Tensor], _step: &Step, grad_out: &Tensor) -> Result<Option<RowGrads>> {
        self.backwards.set(self.backwards.get() + 1);
        let x = &inputs[0];
        let (mut dw, mut dx) = (self.w.as_tensor().zeros_like()?, Vec::new());
        for (_, start, len) in chunks(x.dim(0)?, 2) {
            let (xc, g) = (x.narrow(0, start, len)?.detach(), grad_out.narrow(0, start, len)?);
            dw = (dw + xc.mul(&g)?.sum_keepdim(0)?)?;
            dx.push(g.broadcast_mul(&self.w.as_tensor().detach())?);
        }
        // The tracked input's gradient goes in the store, keyed by the leaf.
        let mut store = Tensor::zeros((), DType::F32, x.device())?.backward()?;
        store.insert(x, Tensor::cat(&dx, 0)?);
        Ok(Some(RowGrads::new(store, vec![(self.w.as_tensor().clone(), dw)])))
    }

    fn chunk(&self) -> Option<usize> {
        Some(2)
    }
}

#[test]
fn a_whole_block_with_its_own_backward_gives_autograds_gradients() -> Result<()> {
    let dev = Device::Cpu;
    let u = Var::from_tensor(&Tensor::randn(0f32, 1.0, (5, 3), &dev)?)?;
    let block = Scaled {
        w: Var::from_tensor(&Tensor::randn(0f32, 1.0, (1, 3), &dev)?)?,
        backwards: std::cell::Cell::new(0),
    };
    let vars = vec![u.clone(), block.w.clone()];
    // The block's input is tracked (built from `u`), as the TFT's context is.
    let x = u.as_tensor().tanh()?;
    let head = |y: &Tensor| y.sqr()?.sum_all();
    let want = head(&forward_whole(&block, std::slice::from_ref(&x), &Step::train(1))?)?.backward()?;

    let ck = Checkpointed::whole(&block, vec![x], &Step::train(1))?;
    let mut grads = head(ck.output())?.backward()?;
    ck.backward_whole(&block, &mut grads, &vars)?;
    assert_eq!(
        block.backwards.get(),
        1,
        "the block's own backward ran, not autograd's recompute"
    );
    assert_same_grads(&want, &grads, &vars)
}

/// y = tanh(x·W + c) and z = y ⊙ y, backpropagated by hand from a tape of
/// x and y; a `Taped` block's gradients against autograd's of the same.
struct Cell {
    w: Var,
}

struct CellTape {
    x: Tensor,
    y: Tensor,
}

impl Cell {
    fn forward(&self, x: &Tensor, c: &Tensor) -> Result<(Tensor, Tensor)> {
        let y = x.matmul(self.w.as_tensor())?.add(c)?.tanh()?;
        let z = y.sqr()?;
        Ok((y, z))
    }
}

impl TapedBlock for Cell {
    type Tape = CellTape;

    fn forward_taped(&self, inputs: &[Tensor], _step: &Step) -> Result<(Vec<Tensor>, CellTape)> {
        let y = inputs[0]
            .matmul(&self.w.as_tensor().detach())?
            .add(&inputs[1])?
            .tanh()?;
        let z = y.sqr()?;
        let tape = CellTape {
            x: inputs[0].clone(),
            y: y.clone(),
        };
        Ok((vec![y, z], tape))
    }

    fn backward_taped(&self, tape: CellTape, grad_outputs: Vec<Option<Tensor>>) -> Result<TapedGrads> {
        let mut dy = tape.y.zeros_like()?;
        if let Some(g) = &grad_outputs[0] {
            dy = dy.add(g)?;
        }
        if let Some(g) = &grad_outputs[1] {
            dy = dy.add(&g.mul(&tape.y)?.affine(2.0, 0.0)?)?;
        }
        let d_pre = dy.mul(&tape.y.sqr()?.affine(-1.0, 1.0)?)?;
        let dw = tape.x.t()?.matmul(&d_pre)?;
        let dx = d_pre.matmul(&self.w.as_tensor().detach().t()?)?;
        Ok(TapedGrads::new(
            vec![Some(dx), Some(d_pre)],
            vec![(self.w.as_tensor().clone(), dw)],
        ))
    }
}

#[test]
fn a_taped_block_fed_by_a_checkpointed_one_gives_the_plain_gradients() -> Result<()> {
    let dev = Device::Cpu;
    let layer = Layer {
        w: Var::from_tensor(&Tensor::randn(0f32, 0.5, (3, 3), &dev)?)?,
    };
    let cell = Cell {
        w: Var::from_tensor(&Tensor::randn(0f32, 0.5, (3, 4), &dev)?)?,
    };
    // The cell's context is tracked (c = u²): its gradient goes through
    // its own graph into u.
    let u = Var::from_tensor(&Tensor::randn(0f32, 1.0, (6, 4), &dev)?)?;
    let u3 = Var::from_tensor(&Tensor::randn(0f32, 1.0, (6, 3), &dev)?)?;
    let x = Tensor::randn(0f32, 1.0, (6, 3), &dev)?;
    let r = Tensor::randn(0f32, 1.0, (6, 4), &dev)?;
    let vars = vec![layer.w.clone(), cell.w.clone(), u.clone(), u3.clone()];
    let loss_of = |y: &Tensor, z: &Tensor| y.mul(&r)?.sum_all()? + z.sum_all()?.affine(0.5, 0.0)?;
    // A step forks the block's seed: each run gets its own, the same masks.
    let step = || Step::train(3);

    let h = forward_chunked(&layer, &[x.clone(), u3.as_tensor().sqr()?], 2, &step())?;
    let (y, z) = cell.forward(&h, &u.as_tensor().sqr()?)?;
    let want = loss_of(&y, &z)?.backward()?;

    let step = step();
    let ck = Checkpointed::forward(&layer, vec![x.clone(), u3.as_tensor().sqr()?], 2, &step)?;
    let taped = Taped::forward(&cell, vec![ck.output().clone(), u.as_tensor().sqr()?], &step)?;
    assert_eq!(taped.output_count(), 2);
    let mut got = loss_of(taped.output(0), taped.output(1))?.backward()?;
    // The checkpointed block first is refused: the taped one read its output.
    let err = ck.backward(&layer, &mut got, &vars).unwrap_err().to_string();
    assert!(err.contains("reverse order of their forwards"), "{err}");
    taped.backward(&cell, &mut got, &vars)?;
    ck.backward(&layer, &mut got, &vars)?;
    assert_same_grads(&want, &got, &vars)?;
    Ok(())
}

#[test]
fn a_taped_blocks_input_given_twice_gets_both_gradients() -> Result<()> {
    let dev = Device::Cpu;
    let cell = Cell {
        w: Var::from_tensor(&Tensor::randn(0f32, 0.5, (4, 4), &dev)?)?,
    };
    let u = Var::from_tensor(&Tensor::randn(0f32, 1.0, (5, 4), &dev)?)?;
    let vars = vec![cell.w.clone(), u.clone()];
    // One tensor as both inputs (an LSTM's layers sharing one initial state).
    let x = u.as_tensor().affine(0.5, 0.1)?;
    let (y, z) = cell.forward(&x, &x)?;
    let want = (y.sum_all()? + z.sum_all()?)?.backward()?;

    let x = u.as_tensor().affine(0.5, 0.1)?;
    let taped = Taped::forward(&cell, vec![x.clone(), x], &Step::eval())?;
    let mut got = (taped.output(0).sum_all()? + taped.output(1).sum_all()?)?.backward()?;
    taped.backward(&cell, &mut got, &vars)?;
    assert_same_grads(&want, &got, &vars)?;

    // A loss that reads none of the outputs leaves the gradients as they are.
    let taped = Taped::forward(&cell, vec![u.as_tensor().clone(), u.as_tensor().clone()], &Step::eval())?;
    let mut none = u.as_tensor().sum_all()?.backward()?;
    taped.backward(&cell, &mut none, &vars)?;
    assert!(none.get(cell.w.as_tensor()).is_none());
    Ok(())
}
