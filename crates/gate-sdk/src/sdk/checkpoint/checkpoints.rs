//! The gatherer of one training forward's checkpointed blocks, and the
//! loss whose backward runs theirs.

use candle_core::backprop::GradStore;
use candle_core::{Result, Tensor, Var};

use super::{forward_chunked, Block, Checkpointed, Recompute, RowWise};
use crate::sdk::nn::Step;
use crate::sdk::workload::TrainingForward;

/// The checkpointed blocks of one training forward, whole or in chunks:
/// each returns the leaf the model goes on from, and
/// [`Checkpoints::backward`] runs the loss's backward and then every
/// block's, in the reverse order of their forwards. What a model's
/// `forward_train` builds:
///
/// ```ignore
/// let mut ck = if self.checkpoint { Checkpoints::new() } else { Checkpoints::off() };
/// let mut h = self.embed(batch)?;
/// for block in &self.blocks {
///     h = ck.whole(block, vec![h], step)?;
/// }
/// Ok(ck.into_forward(self.head_loss(&h, batch)?))
/// ```
///
/// [`Checkpoints::off`] runs the same blocks with candle's graph kept and
/// the same dropout masks, so the plain model and the checkpointed one
/// differ only in what they keep: their losses and gradients are equal.
pub struct Checkpoints<'a> {
    blocks: Vec<(Checkpointed, Recompute<'a>)>,
    on: bool,
}

impl Default for Checkpoints<'_> {
    fn default() -> Self {
        Checkpoints::new()
    }
}

impl<'a> Checkpoints<'a> {
    /// Checkpointing on, no block yet.
    pub fn new() -> Self {
        Checkpoints {
            blocks: Vec::new(),
            on: true,
        }
    }

    /// Checkpointing off: every block runs with its graph kept, as plain
    /// candle runs it, drawing the masks a checkpointed run draws.
    pub fn off() -> Self {
        Checkpoints {
            blocks: Vec::new(),
            on: false,
        }
    }

    /// Whether blocks are checkpointed.
    pub fn is_on(&self) -> bool {
        self.on
    }

    /// Runs `block` whole with no graph kept ([`Checkpointed::whole`]) and
    /// returns its output, the leaf the rest of the model runs from.
    pub fn whole(&mut self, block: &'a dyn Block, inputs: Vec<Tensor>, step: &Step) -> Result<Tensor> {
        if !self.on {
            return block.forward_block(&inputs, &step.chunk(step.fork_seed(), 0));
        }
        let ck = Checkpointed::whole(block, inputs, step)?;
        let out = ck.output().clone();
        self.blocks.push((ck, Recompute::Whole(block)));
        Ok(out)
    }

    /// Runs a position-wise `block` in chunks of `chunk` positions with no
    /// graph kept ([`Checkpointed::forward`]) and returns its output leaf.
    pub fn rows(&mut self, block: &'a dyn RowWise, inputs: Vec<Tensor>, chunk: usize, step: &Step) -> Result<Tensor> {
        if !self.on {
            return forward_chunked(block, &inputs, chunk, step);
        }
        let ck = Checkpointed::forward(block, inputs, chunk, step)?;
        let out = ck.output().clone();
        self.blocks.push((ck, Recompute::Rows(block)));
        Ok(out)
    }

    /// How many blocks are checkpointed (none when off).
    pub fn len(&self) -> usize {
        self.blocks.len()
    }

    /// Whether no block is checkpointed (the plain model's forward).
    pub fn is_empty(&self) -> bool {
        self.blocks.is_empty()
    }

    /// The loss's backward, then each block's recompute and backward, the
    /// last block first; `vars`' gradients hold the whole model's.
    pub fn backward(self, loss: &Tensor, vars: &[Var]) -> Result<GradStore> {
        let mut grads = loss.backward()?;
        // Forwards were pushed in order; a block feeding another waits for it.
        for (ck, block) in self.blocks.iter().rev() {
            ck.backward_with(*block, &mut grads, vars)?;
        }
        Ok(grads)
    }

    /// A [`TrainingForward`] of `loss` whose backward is
    /// [`Checkpoints::backward`]: what `Model::forward_train` returns.
    pub fn into_forward(self, loss: Tensor) -> Box<dyn TrainingForward + 'a> {
        Box::new(CheckpointedLoss { loss, blocks: self })
    }
}

/// The loss of a forward with checkpointed blocks, kept for its backward.
struct CheckpointedLoss<'a> {
    loss: Tensor,
    blocks: Checkpoints<'a>,
}

impl TrainingForward for CheckpointedLoss<'_> {
    fn loss(&self) -> &Tensor {
        &self.loss
    }

    fn backward(self: Box<Self>, vars: &[Var]) -> Result<GradStore> {
        let CheckpointedLoss { loss, blocks } = *self;
        blocks.backward(&loss, vars)
    }
}
