//! A block run once with no graph, keeping its own tape (what its
//! hand-written backward reads) instead of being recomputed: the
//! counterpart of [`Checkpointed`](super::Checkpointed) for a block whose
//! tape is small and whose autograd backward is many small kernels (a
//! recurrent layer: each step's generic backward, each gradient added into
//! a fresh zero tensor). The rest of the model runs from leaves at its
//! outputs, as it does from a checkpointed block's; the gradients computed
//! by hand go where a checkpointed block's go.

use std::collections::HashSet;

use candle_core::backprop::GradStore;
use candle_core::{Result, Tensor, TensorId, Var};

use super::backward::{prune_grads, HandGrads};
use super::record::{begin_backward, enter_live, leave};
use crate::sdk::nn::Step;

/// A block whose backward is written by hand over a tape its forward keeps.
/// Its inputs and outputs may be several, and need not share a shape (an
/// LSTM: the sequence and each layer's initial state in; the output
/// sequence and each layer's final state out).
pub trait TapedBlock {
    /// What the forward keeps for the backward.
    type Tape;

    /// The block's outputs and its tape, with no graph: `inputs` come
    /// detached, and the parameters should be read detached too (a graph
    /// recorded here would be kept by nothing and cost its memory while the
    /// forward runs). `step`'s dropout is drawn here, once: the tape keeps
    /// the masks the backward needs.
    fn forward_taped(&self, inputs: &[Tensor], step: &Step) -> Result<(Vec<Tensor>, Self::Tape)>;

    /// The backward: `grad_outputs[i]` is the loss's gradient with respect
    /// to output `i` (`None`: the loss does not depend on it). Returns the
    /// inputs' gradients and those of the parameters.
    fn backward_taped(&self, tape: Self::Tape, grad_outputs: Vec<Option<Tensor>>) -> Result<TapedGrads>;
}

/// The gradients [`TapedBlock::backward_taped`] computed.
#[non_exhaustive]
pub struct TapedGrads {
    /// Each input's gradient, in the inputs' order (`None`: zero, or an
    /// input nothing upstream needs).
    pub inputs: Vec<Option<Tensor>>,
    /// Each parameter's gradient with the tensor it is the gradient of, as
    /// the block used it: a variable, or a tensor built from variables (a
    /// transposed or cast weight), whose gradient is pushed through its
    /// own graph. Several for one tensor are summed.
    pub params: Vec<(Tensor, Tensor)>,
}

impl TapedGrads {
    /// The `inputs`' gradients in order, and the `params`' with the tensors
    /// they are the gradients of.
    pub fn new(inputs: Vec<Option<Tensor>>, params: Vec<(Tensor, Tensor)>) -> Self {
        TapedGrads { inputs, params }
    }
}

/// A taped block's forward: its outputs as leaves, its tape, and its
/// inputs as the model computed them (their gradients go there).
///
/// Under a scope, its retained bytes are the tape and the output leaves
/// (the rest of the model runs from copies of the outputs, so an output the
/// tape also keeps is held twice).
pub struct Taped<T> {
    inputs: Vec<Tensor>,
    outputs: Vec<Var>,
    tape: T,
    /// Its place among the living blocks (checkpointed or taped), so that
    /// backwards run in the one right order and keep each other's leaves.
    live: LiveEntry,
}

/// A taped block's entry in the living blocks, left when it drops.
struct LiveEntry(u64);

impl Drop for LiveEntry {
    fn drop(&mut self) {
        leave(self.0);
    }
}

impl<T> Taped<T> {
    /// Runs `block` once with no graph ([`TapedBlock::forward_taped`] on
    /// detached inputs); its outputs become leaves.
    pub fn forward<B: TapedBlock<Tape = T> + ?Sized>(block: &B, inputs: Vec<Tensor>, step: &Step) -> Result<Self> {
        let detached: Vec<Tensor> = inputs.iter().map(Tensor::detach).collect();
        let (outputs, tape) = block.forward_taped(&detached, step)?;
        drop(detached);
        let outputs: Vec<Var> = outputs.iter().map(Var::from_tensor).collect::<Result<_>>()?;
        let live = LiveEntry(enter_live(&outputs));
        Ok(Taped {
            inputs,
            outputs,
            tape,
            live,
        })
    }

    /// Output `i`, the leaf the rest of the model reads.
    ///
    /// # Panics
    /// If the block has no output `i`.
    pub fn output(&self, i: usize) -> &Tensor {
        self.outputs[i].as_tensor()
    }

    /// How many outputs the block gave.
    pub fn output_count(&self) -> usize {
        self.outputs.len()
    }

    /// Backpropagates the block into `grads`, which holds the rest of the
    /// model's backward (and so its output leaves' gradients, which it
    /// removes): call it after the loss's `backward()`, in the reverse
    /// order of the forwards among the living blocks, as
    /// [`Checkpointed::backward`](super::Checkpointed::backward). `vars`'
    /// gradients are accumulated, and so are those of the living blocks'
    /// leaves; the inputs' and the parameters' computed by hand go through
    /// their own graphs (one tensor at a time: each one's product and
    /// upstream gradients are held beside the sums, not all at once).
    ///
    /// It takes the block (the tape moves into the backward), so a backward
    /// refused for its order drops the block with the error: that step's
    /// gradients cannot be completed, and the error says which order to use.
    pub fn backward<B: TapedBlock<Tape = T> + ?Sized>(
        self,
        block: &B,
        grads: &mut GradStore,
        vars: &[Var],
    ) -> Result<()> {
        let Taped {
            inputs,
            outputs,
            tape,
            live,
        } = self;
        let kept = begin_backward(live.0)?;
        // Detached: a leaf's gradient is built from the tracked tensors
        // that read the leaf, and its op chain would carry the pushes below
        // into their graphs.
        let grad_outputs: Vec<Option<Tensor>> = outputs
            .iter()
            .map(|leaf| grads.remove(leaf.as_tensor()).map(|g| g.detach()))
            .collect();
        drop(outputs);
        let vars: Vec<Var> = vars.iter().cloned().chain(kept).collect();
        let vars = vars.as_slice();
        if grad_outputs.iter().all(Option::is_none) {
            return Ok(()); // the loss does not depend on the block
        }
        prune_grads(grads, vars)?;
        let keep: HashSet<TensorId> = vars.iter().map(|v| v.as_tensor().id()).collect();
        let TapedGrads {
            inputs: input_grads,
            params,
        } = block.backward_taped(tape, grad_outputs)?;
        if input_grads.len() > inputs.len() {
            candle_core::bail!(
                "a taped block's backward gave {} input gradients for {} inputs",
                input_grads.len(),
                inputs.len()
            );
        }
        let mut sums = HandGrads::default();
        for (x, g) in inputs.into_iter().zip(input_grads) {
            if let Some(g) = g {
                sums.add(x, g)?;
            }
        }
        for (of, g) in params {
            sums.add(of, g)?;
        }
        sums.push(grads, &keep, vars)
    }
}
