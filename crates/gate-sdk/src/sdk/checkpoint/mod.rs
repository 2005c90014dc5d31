//! Activation checkpointing, which candle does not offer. A checkpointed
//! block runs with no graph kept: the rest of the model runs from a leaf at
//! the block's output, and in backward the block is recomputed from the
//! inputs it kept and backpropagated with that leaf's gradient, accumulating
//! the parameters' gradients. The cost is one more forward of the block per
//! step.
//!
//! Any block can be checkpointed whole ([`Block`], [`Checkpointed::whole`]):
//! attention, a transformer block, an LSTM. Its working memory is then held
//! only while it runs, one block at a time, as `torch.utils.checkpoint`
//! does. A block whose output at a position depends only on its inputs at
//! that position ([`RowWise`]) can also run in chunks of positions
//! ([`Checkpointed::forward`]): its memory then scales with the chunk, not
//! the batch.
//!
//! [`Checkpoints`] gathers a training forward's checkpointed blocks and
//! runs their backwards in the one right order.
//!
//! Dropout inside the block is replayed exactly: the block's chunk `k` runs
//! with [`Step::chunk`] of a seed forked from the step, in forward and in the
//! recompute alike.
//!
//! Inputs may be tracked (a static context computed from parameters): their
//! gradients are gathered chunk by chunk and pushed into their own graph
//! once, at the end.
//!
//! A block whose backward is written by hand can instead keep a tape of its
//! own from one forward ([`TapedBlock`], [`Taped`]), not recomputed: for a
//! block whose tape is small beside its autograd graph and whose autograd
//! backward is many small kernels (a recurrent layer). Its outputs are
//! leaves too, and it takes its place among the checkpointed blocks' order.

//!
//! One file per job: the chunks a row-wise block runs in (`chunks`), the
//! record of the blocks alive and seen (`record`), the recompute and its
//! gradients (`backward`), the taped blocks (`taped`), and the gatherer of a
//! forward's blocks (`checkpoints`). The paths stay `gate::checkpoint::X`.

use candle_core::backprop::GradStore;
use candle_core::{Result, Tensor, Var};

use super::nn::Step;

mod backward;
mod checkpoints;
mod chunks;
mod record;
mod taped;
#[cfg(test)]
mod tests;

pub(crate) use backward::prune_grads;
pub use checkpoints::Checkpoints;
pub use chunks::forward_chunked;
use chunks::{chunks, rows_of};
pub(crate) use record::take_checkpointed;
use record::{enter_live, leave, note_checkpointed};
pub use taped::{Taped, TapedBlock, TapedGrads};

/// A block whose output row `i` depends only on its inputs' row `i`. Every
/// input has the positions as axis 0 (the same count for all); the output
/// too.
pub trait RowWise {
    /// The block's output for these rows of its inputs (axis 0), with `step`'s dropout.
    fn forward_rows(&self, inputs: &[Tensor], step: &Step) -> Result<Tensor>;

    /// The block's output for these rows with no graph: what
    /// [`Checkpointed`] keeps. The default runs [`RowWise::forward_rows`]
    /// and detaches the result, so the chunk's graph (candle records one
    /// whenever a parameter is tracked) lives until the chunk ends; a block
    /// that can run on detached parameters keeps only its live tensors.
    fn forward_rows_detached(&self, inputs: &[Tensor], step: &Step) -> Result<Tensor> {
        Ok(self.forward_rows(inputs, step)?.detach())
    }

    /// The block's backward over these rows, written by hand: `grad_out` is
    /// the loss's gradient with respect to the rows' output. It must draw
    /// `step`'s dropout as [`RowWise::forward_rows`] does. The default,
    /// `None`, makes [`Checkpointed`] recompute the rows under autograd,
    /// which is always right but keeps every intermediate of the chunk and
    /// runs every op's generic backward; a block written by hand keeps what
    /// its formulas read and so affords larger chunks.
    fn backward_rows(&self, inputs: &[Tensor], step: &Step, grad_out: &Tensor) -> Result<Option<RowGrads>> {
        let _ = (inputs, step, grad_out);
        Ok(None)
    }
}

/// How a checkpointed block is recomputed in backward.
#[derive(Clone, Copy)]
enum Recompute<'a> {
    Rows(&'a dyn RowWise),
    Whole(&'a dyn Block),
}

impl Recompute<'_> {
    /// The block's forward over these inputs (a chunk's rows, or all).
    fn forward(self, inputs: &[Tensor], step: &Step) -> Result<Tensor> {
        match self {
            Recompute::Rows(b) => b.forward_rows(inputs, step),
            Recompute::Whole(b) => b.forward_block(inputs, step),
        }
    }

    /// The block's backward written by hand, if it has one.
    fn by_hand(self, inputs: &[Tensor], step: &Step, grad_out: &Tensor) -> Result<Option<RowGrads>> {
        match self {
            Recompute::Rows(b) => b.backward_rows(inputs, step, grad_out),
            Recompute::Whole(b) => b.backward_block(inputs, step, grad_out),
        }
    }
}

/// One chunk's gradients from [`RowWise::backward_rows`].
#[non_exhaustive]
pub struct RowGrads {
    /// A backward the block ran over part of its graph, from the chunk's
    /// inputs and the parameters: the trainable variables' gradients and the
    /// tracked inputs' are read from it.
    pub store: GradStore,
    /// Gradients the block computed by hand, each with the tensor it is the
    /// gradient of: a parameter as the block uses it (a variable, or a
    /// tensor built from variables, such as a reshaped bias). Summed over
    /// the chunks, then pushed into the variables once, at the end.
    pub tensors: Vec<(Tensor, Tensor)>,
}

impl RowGrads {
    /// The chunk's autograd `store` and its hand-computed `tensors`
    /// (each gradient with the tensor it is the gradient of).
    pub fn new(store: GradStore, tensors: Vec<(Tensor, Tensor)>) -> Self {
        RowGrads { store, tensors }
    }
}

/// Any block, checkpointed whole: its output may depend on all of its
/// inputs (attention, a transformer block, a recurrent layer). The inputs
/// need not share a shape: a mask or a static context may be one of them.
pub trait Block {
    /// The block's output, with `step`'s dropout. A checkpointed block runs
    /// it twice per training step, in forward and again in backward, with
    /// a step that draws the same masks both times.
    fn forward_block(&self, inputs: &[Tensor], step: &Step) -> Result<Tensor>;

    /// The block's output with no graph: what [`Checkpointed::whole`] keeps.
    /// The default runs [`Block::forward_block`] and detaches the result, so
    /// the block's whole graph lives until it returns; a block that can run
    /// on detached parameters (and in parts of its own) keeps only its live
    /// tensors.
    fn forward_block_detached(&self, inputs: &[Tensor], step: &Step) -> Result<Tensor> {
        Ok(self.forward_block(inputs, step)?.detach())
    }

    /// The block's backward written by hand, with the same contract as
    /// [`RowWise::backward_rows`] over all of the block's inputs: the
    /// gradients of the tracked inputs and of the variables in `store`, the
    /// rest in `tensors`. The default, `None`, makes [`Checkpointed`]
    /// recompute the block under autograd, whole. A block written by hand
    /// can run its own parts: the positions in chunks, and what every
    /// position shares once.
    fn backward_block(&self, inputs: &[Tensor], step: &Step, grad_out: &Tensor) -> Result<Option<RowGrads>> {
        let _ = (inputs, step, grad_out);
        Ok(None)
    }

    /// Positions per chunk, for a block that runs its own chunks (with
    /// [`Block::forward_block_detached`] and [`Block::backward_block`]) over
    /// its first input's axis 0: recorded with the block and that axis's
    /// length, as a row-wise block's chunk and positions are. `None`, the
    /// default: the block runs whole.
    fn chunk(&self) -> Option<usize> {
        None
    }
}

/// A checkpointed block's forward: its output as a leaf, and what the
/// recompute needs (the inputs and the dropout seed), nothing else.
///
/// Under a scope, the block's retained bytes are therefore what it keeps for
/// backward: the inputs built inside the scope (a view of a tensor that
/// already existed costs nothing) and the output leaf, which every block
/// counts because the next one runs from it. Its peak is the largest chunk's
/// working memory on top of that; chunks run one after the other, so their
/// transients are never summed (tests/it/attribution.rs pins both on the TFT).
pub struct Checkpointed {
    inputs: Vec<Tensor>,
    output: Var,
    /// Positions per recomputed chunk, or `None` for a block recomputed whole.
    chunk: Option<usize>,
    seed: u64,
    train: bool,
    /// Its place in [`LIVE`]: the order blocks ran forward in.
    order: u64,
    /// Its name's place in [`SEEN`], when its forward was measured: its
    /// recompute in backward runs in a scope of that name.
    scope: Option<u16>,
}

impl Drop for Checkpointed {
    fn drop(&mut self) {
        leave(self.order);
    }
}

/// Runs `block` with its graph, drawing the masks [`Checkpointed::whole`]
/// draws for the same `step`: for inference on detached weights, or as the
/// reference a checkpointed block's gradients are tested against.
pub fn forward_whole(block: &dyn Block, inputs: &[Tensor], step: &Step) -> Result<Tensor> {
    let seed = step.fork_seed();
    block.forward_block(inputs, &step.chunk(seed, 0))
}

/// Backpropagates checkpointed blocks in the order that is always right:
/// the reverse of their forwards, so a block that feeds another receives
/// that block's gradient first. Give them in any order.
pub fn backward_all(blocks: &[(&Checkpointed, &dyn RowWise)], grads: &mut GradStore, vars: &[Var]) -> Result<()> {
    let mut ordered: Vec<&(&Checkpointed, &dyn RowWise)> = blocks.iter().collect();
    ordered.sort_by_key(|(c, _)| std::cmp::Reverse(c.order));
    for (c, block) in ordered {
        c.backward(*block, grads, vars)?;
    }
    Ok(())
}

impl Checkpointed {
    /// Runs the block with no graph kept. `step` is the training step's
    /// (a seed for the block's dropout is forked from it).
    pub fn forward(block: &dyn RowWise, inputs: Vec<Tensor>, chunk: usize, step: &Step) -> Result<Self> {
        let n = rows_of(&inputs)?;
        let seed = step.fork_seed();
        let mut outs = Vec::with_capacity(n.div_ceil(chunk.max(1)));
        // The sub-blocks' per-chunk figures would sum memory never held at
        // once, and what they build is dropped with the chunk: none of it is
        // kept for backward, so they record nothing.
        let _quiet = gate_probe::quiet();
        for (k, start, len) in chunks(n, chunk) {
            let part: Vec<Tensor> = inputs
                .iter()
                .map(|x| x.detach().narrow(0, start, len))
                .collect::<Result<_>>()?;
            outs.push(block.forward_rows_detached(&part, &step.chunk(seed, k))?);
        }
        let output = Tensor::cat(&outs, 0)?;
        let chunk = Some(chunk.max(1));
        Checkpointed::register(inputs, &output, (chunk, chunk, Some(n)), seed, step)
    }

    /// Runs any block whole with no graph kept
    /// ([`Block::forward_block_detached`]); in backward it is recomputed
    /// whole from `inputs`, or runs its own [`Block::backward_block`].
    /// `step` is the training step's (a seed for the block's dropout is
    /// forked from it, so the recompute draws the same masks).
    pub fn whole(block: &dyn Block, inputs: Vec<Tensor>, step: &Step) -> Result<Self> {
        if inputs.is_empty() {
            candle_core::bail!("a checkpointed block needs at least one input");
        }
        let seed = step.fork_seed();
        // What the block builds is dropped when it returns; none of it is
        // kept for backward, so its own scopes record nothing.
        let _quiet = gate_probe::quiet();
        let detached: Vec<Tensor> = inputs.iter().map(Tensor::detach).collect();
        let output = block.forward_block_detached(&detached, &step.chunk(seed, 0))?.detach();
        // A block that runs its own chunks runs them over its first input's
        // axis 0 ([`Block::chunk`]).
        let positions = match block.chunk() {
            Some(_) => Some(inputs[0].dim(0)?),
            None => None,
        };
        Checkpointed::register(inputs, &output, (None, block.chunk(), positions), seed, step)
    }

    /// The block's output as a leaf, entered in [`LIVE`] in forward order.
    /// `chunk`: positions per part of the recompute (`None`: whole), per
    /// chunk as recorded (a block run whole may run its own chunks), and the
    /// positions the chunks ran over.
    fn register(
        inputs: Vec<Tensor>,
        output: &Tensor,
        (chunk, recorded, positions): (Option<usize>, Option<usize>, Option<usize>),
        seed: u64,
        step: &Step,
    ) -> Result<Self> {
        let scope = note_checkpointed(recorded, positions, step);
        let output = Var::from_tensor(output)?;
        let order = enter_live(std::slice::from_ref(&output));
        Ok(Checkpointed {
            inputs,
            output,
            chunk,
            seed,
            train: step.is_train(),
            order,
            scope,
        })
    }

    /// The leaf the rest of the model runs from.
    pub fn output(&self) -> &Tensor {
        self.output.as_tensor()
    }

    /// Backpropagates the block into `grads`, which holds the rest of the
    /// model's backward (and so the leaf's gradient): call it after the
    /// loss's `backward()`. `vars`' gradients are accumulated, and so are
    /// those of the other living checkpointed blocks' output leaves (a
    /// block fed by another passes its gradient on); the leaf's own
    /// gradient is removed. With several blocks, call each in the reverse
    /// order of their forwards, or give them all to [`backward_all`]: a
    /// block whose output feeds a later one must wait for that one's
    /// backward, and is refused if it does not.
    pub fn backward(&self, block: &dyn RowWise, grads: &mut GradStore, vars: &[Var]) -> Result<()> {
        self.backward_with(Recompute::Rows(block), grads, vars)
    }

    /// [`Checkpointed::backward`] for a block checkpointed with
    /// [`Checkpointed::whole`]: the same contract, the block recomputed whole.
    pub fn backward_whole(&self, block: &dyn Block, grads: &mut GradStore, vars: &[Var]) -> Result<()> {
        self.backward_with(Recompute::Whole(block), grads, vars)
    }
}
