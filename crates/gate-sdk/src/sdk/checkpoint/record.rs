//! What the process knows of checkpointed blocks: the output leaves of
//! those alive, in forward order (a block's backward keeps the later ones'
//! gradients and is refused before theirs), and the blocks a measured
//! training forward checkpointed, which the report lists.

use candle_core::{Result, Var};
use gate_contract::measurement::CheckpointedBlock;

use crate::sdk::nn::Step;

/// A checkpointed block's output leaf while its [`super::Checkpointed`]
/// lives (or one of a [`super::Taped`] block's), and whether its backward
/// has run. Another block's backward must keep
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

/// A checkpointed block's name and chunk, as the record keeps it, and the
/// most positions its chunks ran over. Aligned as compute scratch
/// (`gate_probe::alloc::SCRATCH_ALIGN`), so the record's memory, taken
/// while a block's scope is measured, is no part of the block's bytes; a
/// name is cut at [`SeenBlock::NAME`] bytes.
#[repr(align(128))]
#[derive(Clone, Copy)]
struct SeenBlock {
    name: [u8; SeenBlock::NAME],
    len: u8,
    chunk: Option<usize>,
    positions: Option<usize>,
}

impl SeenBlock {
    const NAME: usize = 96;

    fn new(path: &str, unscoped_index: usize, chunk: Option<usize>, positions: Option<usize>) -> Self {
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
            positions,
        }
    }

    /// The same block at the same chunk (whatever its positions).
    fn same(&self, other: &SeenBlock) -> bool {
        (self.name, self.len, self.chunk) == (other.name, other.len, other.chunk)
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
/// call, by scope path (`block0`), chunk (`None`: whole) and the most
/// positions their chunks ran over, sorted; the record is emptied.
pub(crate) fn take_checkpointed() -> Vec<CheckpointedBlock> {
    let seen = std::mem::take(&mut *SEEN.lock().unwrap_or_else(|e| e.into_inner()));
    let mut out: Vec<CheckpointedBlock> = seen
        .iter()
        .map(|b| CheckpointedBlock {
            block: b.name(),
            chunk: b.chunk,
            positions: b.positions,
        })
        .collect();
    out.sort();
    out
}

/// Notes a block checkpointed now over `positions` (in chunks of `chunk`),
/// if a training step is being measured, and returns its name's place in
/// the record.
pub(super) fn note_checkpointed(chunk: Option<usize>, positions: Option<usize>, step: &Step) -> Option<u16> {
    if !step.is_train() {
        return None;
    }
    let thread = std::thread::current().id();
    // Blocks, not leaves: a taped block enters one leaf per output, all
    // under its order, side by side (nothing allocated here: this runs
    // inside the scope being measured).
    let unscoped_index = {
        let live = live();
        let mut last = None;
        live.iter()
            .filter(|l| l.thread == thread)
            .filter(|l| last.replace(l.order) != Some(l.order))
            .count()
    };
    // None: not measured (warm-up, or no recorder).
    let block = gate_probe::with_current_path(|path| SeenBlock::new(path, unscoped_index, chunk, positions))?;
    let mut seen = SEEN.lock().unwrap_or_else(|e| e.into_inner());
    let at = match seen.iter().position(|b| b.same(&block)) {
        Some(at) => {
            seen[at].positions = seen[at].positions.max(positions);
            at
        }
        None => {
            seen.push(block);
            seen.len() - 1
        }
    };
    u16::try_from(at).ok()
}

/// The name recorded at `at` by [`note_checkpointed`].
pub(super) fn seen_name(at: u16) -> Option<String> {
    let seen = SEEN.lock().unwrap_or_else(|e| e.into_inner());
    seen.get(usize::from(at)).map(SeenBlock::name)
}

/// Marks the backward of the block (checkpointed or taped) entered in
/// [`LIVE`] as `order` as run, after checking that every block that ran
/// forward after it (and so may read its output) ran backward first.
/// Returns the other living blocks' leaves, whose gradients stay.
pub(super) fn begin_backward(order: u64) -> Result<Vec<Var>> {
    let mut live = live();
    let thread = std::thread::current().id();
    let mine = |l: &&mut LiveLeaf| l.thread == thread || l.order == order;
    if let Some(later) = live.iter_mut().filter(mine).find(|l| l.order > order && !l.done) {
        let later = later.order - order;
        candle_core::bail!(
            "checkpointed blocks must run backward in the reverse order of their forwards: \
             block #{order} ran backward before the block that ran forward {later} after it; \
             run the later block's backward first (`Checkpointed::backward`, `Taped::backward`), \
             or give all of them to `checkpoint::backward_all`"
        );
    }
    let mut kept = Vec::new();
    for l in live.iter_mut().filter(mine) {
        if l.order == order {
            l.done = true;
        } else {
            kept.push(l.leaf.clone());
        }
    }
    Ok(kept)
}

/// Enters `leaves` (one block's outputs) in [`LIVE`] under one new order,
/// which it returns; [`leave`] takes them out.
pub(super) fn enter_live(leaves: &[Var]) -> u64 {
    let order = NEXT_ORDER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let thread = std::thread::current().id();
    live().extend(leaves.iter().map(|leaf| LiveLeaf {
        order,
        thread,
        leaf: leaf.clone(),
        done: false,
    }));
    order
}

/// Takes the block entered as `order` out of [`LIVE`].
pub(super) fn leave(order: u64) {
    live().retain(|l| l.order != order);
}
