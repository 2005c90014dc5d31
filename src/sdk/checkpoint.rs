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

use std::collections::HashSet;

use candle_core::backprop::GradStore;
use candle_core::{Result, Tensor, TensorId, Var};

use super::nn::Step;
use super::workload::TrainingForward;

/// Keeps only the trainable variables' gradients, detached. candle's
/// backward also leaves gradients for untracked operands (inputs, masks),
/// and a gradient built from tracked tensors keeps their op chain alive
/// (docs/models.md §5 pitfall 3); a careful training loop drops both before the
/// optimizer step, and so does the runner.
pub(crate) fn prune_grads(grads: &mut GradStore, vars: &[Var]) -> candle_core::Result<()> {
    super::compat::keep_only(grads, vars)
}

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

    /// The block's backward written by hand, if it has one (row-wise only).
    fn by_hand(self, inputs: &[Tensor], step: &Step, grad_out: &Tensor) -> Result<Option<RowGrads>> {
        match self {
            Recompute::Rows(b) => b.backward_rows(inputs, step, grad_out),
            Recompute::Whole(_) => Ok(None),
        }
    }
}

/// `x`'s rows `start..start + len` (axis 0), or all of it.
fn rows_or_all(x: &Tensor, range: Option<(usize, usize)>) -> Result<Tensor> {
    match range {
        Some((start, len)) => x.narrow(0, start, len),
        None => Ok(x.clone()),
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

fn chunks(rows: usize, chunk: usize) -> impl Iterator<Item = (usize, usize, usize)> {
    let chunk = chunk.max(1);
    (0..rows.div_ceil(chunk)).map(move |k| (k, k * chunk, chunk.min(rows - k * chunk)))
}

fn rows_of(inputs: &[Tensor]) -> Result<usize> {
    let Some(first) = inputs.first() else {
        candle_core::bail!("a checkpointed block needs at least one input");
    };
    let n = first.dim(0)?;
    for x in inputs {
        if x.dim(0)? != n {
            candle_core::bail!(
                "the inputs of a checkpointed block disagree on the positions: {n} and {}",
                x.dim(0)?
            );
        }
    }
    Ok(n)
}

/// Runs `block` chunk by chunk and concatenates the outputs, each chunk's
/// intermediates dropped before the next starts. With tracked weights the
/// result still carries each chunk's graph; use it for inference (detached
/// weights), or through [`Checkpointed`] for training.
pub fn forward_chunked(block: &dyn RowWise, inputs: &[Tensor], chunk: usize, step: &Step) -> Result<Tensor> {
    let n = rows_of(inputs)?;
    let seed = step.fork_seed();
    let mut outs = Vec::with_capacity(n.div_ceil(chunk.max(1)));
    for (k, start, len) in chunks(n, chunk) {
        let part: Vec<Tensor> = inputs.iter().map(|x| x.narrow(0, start, len)).collect::<Result<_>>()?;
        outs.push(block.forward_rows(&part, &step.chunk(seed, k))?);
    }
    Tensor::cat(&outs, 0)
}

/// Any block, checkpointed whole: its output may depend on all of its
/// inputs (attention, a transformer block, a recurrent layer). The inputs
/// need not share a shape: a mask or a static context may be one of them.
pub trait Block {
    /// The block's output, with `step`'s dropout. A checkpointed block runs
    /// it twice per training step, in forward and again in backward, with
    /// a step that draws the same masks both times.
    fn forward_block(&self, inputs: &[Tensor], step: &Step) -> Result<Tensor>;
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

/// A checkpointed block's output leaf, while its [`Checkpointed`] lives,
/// and whether its backward has run. Another block's backward must keep
/// these leaves' gradients: the model's backward left them there, and a
/// later block's recompute adds to an earlier one's (the earlier block's
/// output is its input).
struct LiveLeaf {
    order: u64,
    /// The thread that ran its forward: blocks of models trained side by
    /// side on other threads are neither waited for nor kept.
    thread: std::thread::ThreadId,
    leaf: Var,
    done: bool,
}

/// Every living checkpointed block's leaf, in forward order. Process-wide,
/// so a block dropped on another thread than its forward's still leaves.
static LIVE: std::sync::Mutex<Vec<LiveLeaf>> = std::sync::Mutex::new(Vec::new());
static NEXT_ORDER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

fn live() -> std::sync::MutexGuard<'static, Vec<LiveLeaf>> {
    LIVE.lock().unwrap_or_else(|e| e.into_inner())
}

/// A checkpointed block's name and chunk, as the record keeps it. Aligned
/// as compute scratch (`gate_probe::alloc::SCRATCH_ALIGN`), so the record's
/// memory, taken while a block's scope is measured, is no part of the
/// block's bytes; a name is cut at [`SeenBlock::NAME`] bytes.
#[repr(align(128))]
#[derive(Clone, Copy, PartialEq, Eq)]
struct SeenBlock {
    name: [u8; SeenBlock::NAME],
    len: u8,
    chunk: Option<usize>,
}

impl SeenBlock {
    const NAME: usize = 96;

    fn new(path: &str, unscoped_index: usize, chunk: Option<usize>) -> Self {
        use std::io::Write;
        let mut name = [0u8; SeenBlock::NAME];
        let len = if path.is_empty() {
            let mut w = &mut name[..];
            let _ = write!(w, "(no scope) #{unscoped_index}");
            SeenBlock::NAME - w.len()
        } else {
            let mut end = path.len().min(SeenBlock::NAME);
            while !path.is_char_boundary(end) {
                end -= 1;
            }
            name[..end].copy_from_slice(&path.as_bytes()[..end]);
            end
        };
        SeenBlock {
            name,
            len: len as u8,
            chunk,
        }
    }

    fn name(&self) -> String {
        String::from_utf8_lossy(&self.name[..self.len as usize]).into_owned()
    }
}

/// Every block checkpointed in a measured training forward in this
/// process, once each: what the report says the model checkpointed (the
/// SDK saw it, whatever the config calls it).
static SEEN: std::sync::Mutex<Vec<SeenBlock>> = std::sync::Mutex::new(Vec::new());

/// The blocks checkpointed in measured training forwards since the last
/// call, by scope path (`block0`) and chunk (`None`: whole), sorted; the
/// record is emptied.
pub(crate) fn take_checkpointed() -> Vec<(String, Option<usize>)> {
    let seen = std::mem::take(&mut *SEEN.lock().unwrap_or_else(|e| e.into_inner()));
    let mut out: Vec<(String, Option<usize>)> = seen.iter().map(|b| (b.name(), b.chunk)).collect();
    out.sort();
    out
}

/// Notes a block checkpointed now, if a training step is being measured,
/// and returns its name's place in the record.
fn note_checkpointed(chunk: Option<usize>, step: &Step) -> Option<u16> {
    if !step.is_train() {
        return None;
    }
    let thread = std::thread::current().id();
    let unscoped_index = live().iter().filter(|l| l.thread == thread).count();
    // None: not measured (warm-up, or no recorder).
    let block = gate_probe::with_current_path(|path| SeenBlock::new(path, unscoped_index, chunk))?;
    let mut seen = SEEN.lock().unwrap_or_else(|e| e.into_inner());
    let at = match seen.iter().position(|b| *b == block) {
        Some(at) => at,
        None => {
            seen.push(block);
            seen.len() - 1
        }
    };
    u16::try_from(at).ok()
}

/// The name recorded at `at` by [`note_checkpointed`].
fn seen_name(at: u16) -> Option<String> {
    let seen = SEEN.lock().unwrap_or_else(|e| e.into_inner());
    seen.get(usize::from(at)).map(SeenBlock::name)
}

impl Drop for Checkpointed {
    fn drop(&mut self) {
        live().retain(|l| l.order != self.order);
    }
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
        Checkpointed::register(inputs, &output, Some(chunk.max(1)), seed, step)
    }

    /// Runs any block whole with no graph kept; in backward it is
    /// recomputed whole from `inputs`. `step` is the training step's (a
    /// seed for the block's dropout is forked from it, so the recompute
    /// draws the same masks).
    pub fn whole(block: &dyn Block, inputs: Vec<Tensor>, step: &Step) -> Result<Self> {
        if inputs.is_empty() {
            candle_core::bail!("a checkpointed block needs at least one input");
        }
        let seed = step.fork_seed();
        // What the block builds is dropped when it returns; none of it is
        // kept for backward, so its own scopes record nothing.
        let _quiet = gate_probe::quiet();
        let detached: Vec<Tensor> = inputs.iter().map(Tensor::detach).collect();
        let output = block.forward_block(&detached, &step.chunk(seed, 0))?.detach();
        Checkpointed::register(inputs, &output, None, seed, step)
    }

    /// The block's output as a leaf, entered in [`LIVE`] in forward order.
    fn register(inputs: Vec<Tensor>, output: &Tensor, chunk: Option<usize>, seed: u64, step: &Step) -> Result<Self> {
        let scope = note_checkpointed(chunk, step);
        let output = Var::from_tensor(output)?;
        let order = NEXT_ORDER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        live().push(LiveLeaf {
            order,
            thread: std::thread::current().id(),
            leaf: output.clone(),
            done: false,
        });
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

    fn backward_with(&self, block: Recompute<'_>, grads: &mut GradStore, vars: &[Var]) -> Result<()> {
        match (&block, self.chunk) {
            (Recompute::Rows(_), None) => candle_core::bail!(
                "this block was checkpointed whole (`Checkpointed::whole`): call `Checkpointed::backward_whole`"
            ),
            (Recompute::Whole(_), Some(_)) => candle_core::bail!(
                "this block was checkpointed in chunks (`Checkpointed::forward`): call `Checkpointed::backward`"
            ),
            _ => {}
        }
        let kept = self.begin_backward()?;
        let Some(grad_out) = grads.remove(self.output.as_tensor()) else {
            return Ok(()); // the loss does not depend on the block
        };
        let vars: Vec<Var> = vars.iter().cloned().chain(kept).collect();
        let vars = vars.as_slice();
        // Drop the gradients of untracked operands (and the op chains they
        // hold) before the recompute adds its own graphs.
        prune_grads(grads, vars)?;
        let keep: HashSet<TensorId> = vars.iter().map(|v| v.as_tensor().id()).collect();
        let step = if self.train { Step::train(0) } else { Step::eval() };
        let n = self.output.dim(0)?;
        // A whole block is one part: all of it, not narrowed.
        let parts: Vec<(usize, Option<(usize, usize)>)> = match self.chunk {
            Some(chunk) => chunks(n, chunk)
                .map(|(k, start, len)| (k, Some((start, len))))
                .collect(),
            None => vec![(0, None)],
        };
        // The recompute's memory shows in the timeline under the block's name.
        let _recompute = self
            .scope
            .and_then(seen_name)
            .map(|name| gate_probe::enter(&format!("{name} (recompute)")));
        let tracked: Vec<bool> = self.inputs.iter().map(Tensor::track_op).collect();
        let mut input_grads: Vec<Vec<Tensor>> = vec![Vec::new(); self.inputs.len()];
        let mut by_hand = HandGrads::default();
        for (k, range) in parts {
            let leaves: Vec<Tensor> = self
                .inputs
                .iter()
                .zip(&tracked)
                .map(|(x, &t)| {
                    let part = rows_or_all(&x.detach(), range)?;
                    if t {
                        Ok(Var::from_tensor(&part)?.as_tensor().clone())
                    } else {
                        Ok(part)
                    }
                })
                .collect::<Result<_>>()?;
            let chunk_step = step.chunk(self.seed, k);
            let g = rows_or_all(&grad_out, range)?;
            let chunk_grads = match block.by_hand(&leaves, &chunk_step, &g)? {
                Some(RowGrads { store, tensors }) => {
                    for (of, grad) in tensors {
                        by_hand.add(of, grad)?;
                    }
                    store
                }
                None => block.forward(&leaves, &chunk_step)?.mul(&g)?.sum_all()?.backward()?,
            };
            accumulate(grads, &chunk_grads, &keep, vars)?;
            for (i, leaf) in leaves.iter().enumerate() {
                if tracked[i] {
                    let g = match chunk_grads.get(leaf) {
                        Some(g) => g.detach(),
                        None => leaf.zeros_like()?,
                    };
                    input_grads[i].push(g);
                }
            }
        }
        // Push the inputs' gradients, and those computed by hand for tensors
        // built from variables, into their own graphs in one backward.
        let mut surrogate: Option<Tensor> = None;
        let mut terms = Vec::new();
        for (x, parts) in self.inputs.iter().zip(input_grads) {
            if !parts.is_empty() {
                terms.push((x.clone(), Tensor::cat(&parts, 0)?));
            }
        }
        for (of, grad) in by_hand.into_sums()? {
            if keep.contains(&of.id()) {
                let sum = match grads.get_id(of.id()) {
                    Some(old) => old.add(&grad)?.detach(),
                    None => grad,
                };
                grads.insert(&of, sum);
            } else {
                terms.push((of, grad));
            }
        }
        for (x, g) in terms {
            let term = x.mul(&g)?.sum_all()?;
            surrogate = Some(match surrogate {
                Some(s) => (s + term)?,
                None => term,
            });
        }
        if let Some(s) = surrogate {
            let upstream = s.backward()?;
            accumulate(grads, &upstream, &keep, vars)?;
        }
        Ok(())
    }
}

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

impl Checkpointed {
    /// Marks this block's backward as run, after checking that every block
    /// that ran forward after it (and so may read its output) ran backward
    /// first. Returns the other living blocks' leaves, whose gradients stay.
    fn begin_backward(&self) -> Result<Vec<Var>> {
        let mut live = live();
        let thread = std::thread::current().id();
        let mine = |l: &&mut LiveLeaf| l.thread == thread || l.order == self.order;
        if let Some(later) = live.iter_mut().filter(mine).find(|l| l.order > self.order && !l.done) {
            let (later, mine) = (later.order - self.order, self.order);
            candle_core::bail!(
                "checkpointed blocks must run backward in the reverse order of their forwards: \
                 block #{mine} ran backward before the block that ran forward {later} after it; \
                 call `Checkpointed::backward` on the later block first, or give all of them to \
                 `checkpoint::backward_all`"
            );
        }
        let mut kept = Vec::new();
        for l in live.iter_mut().filter(mine) {
            if l.order == self.order {
                l.done = true;
            } else {
                kept.push(l.leaf.clone());
            }
        }
        Ok(kept)
    }
}

/// Hand-computed gradients summed per tensor over the chunks, in first-seen
/// order. Sums are kept in f32 whatever the tensor's dtype (a bf16 sum over
/// many chunks would round at every add, as autograd's f32 masters do not),
/// and cast back by [`HandGrads::into_sums`].
#[derive(Default)]
struct HandGrads {
    sums: Vec<(Tensor, Tensor)>,
    index: std::collections::HashMap<TensorId, usize>,
}

impl HandGrads {
    /// Each tensor with its summed gradient, in the tensor's dtype.
    fn into_sums(self) -> Result<Vec<(Tensor, Tensor)>> {
        self.sums
            .into_iter()
            .map(|(of, g)| {
                let g = g.to_dtype(of.dtype())?;
                Ok((of, g))
            })
            .collect()
    }

    fn add(&mut self, of: Tensor, grad: Tensor) -> Result<()> {
        let grad = grad.detach().to_dtype(candle_core::DType::F32)?;
        match self.index.get(&of.id()) {
            Some(&i) => {
                let sum = self.sums[i].1.add(&grad)?;
                self.sums[i].1 = sum;
            }
            None => {
                self.index.insert(of.id(), self.sums.len());
                self.sums.push((of, grad));
            }
        }
        Ok(())
    }
}

/// Adds `from`'s gradients of the `keep` tensors into `into`, detached.
fn accumulate(into: &mut GradStore, from: &GradStore, keep: &HashSet<TensorId>, vars: &[Var]) -> Result<()> {
    for &id in from.get_ids() {
        if !keep.contains(&id) {
            continue;
        }
        let Some(g) = from.get_id(id) else { continue };
        let sum = match into.get_id(id) {
            Some(old) => old.add(g)?.detach(),
            None => g.detach(),
        };
        super::compat::set_var_grad(into, id, vars, sum);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
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
}
