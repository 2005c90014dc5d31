//! The chunks of positions a row-wise block runs in, forward and in its
//! recompute.

use candle_core::{Result, Tensor};

use super::RowWise;
use crate::sdk::nn::Step;

/// `x`'s rows `start..start + len` (axis 0), or all of it.
pub(super) fn rows_or_all(x: &Tensor, range: Option<(usize, usize)>) -> Result<Tensor> {
    match range {
        Some((start, len)) => x.narrow(0, start, len),
        None => Ok(x.clone()),
    }
}

pub(super) fn chunks(rows: usize, chunk: usize) -> impl Iterator<Item = (usize, usize, usize)> {
    let chunk = chunk.max(1);
    (0..rows.div_ceil(chunk)).map(move |k| (k, k * chunk, chunk.min(rows - k * chunk)))
}

pub(super) fn rows_of(inputs: &[Tensor]) -> Result<usize> {
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
/// weights), or through [`Checkpointed`](super::Checkpointed) for training.
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
