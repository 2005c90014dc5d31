//! A checkpointed block's backward: its recompute, part by part (a chunk
//! of positions, or the whole block), each part's gradients accumulated
//! into the model's, and the inputs' and the hand-computed gradients pushed
//! into their own graphs once, at the end.

use std::collections::HashSet;

use candle_core::backprop::GradStore;
use candle_core::{Result, Tensor, TensorId, Var};

use super::chunks::{chunks, rows_or_all};
use super::record::{begin_backward, seen_name};
use super::{Checkpointed, Recompute, RowGrads};
use crate::sdk::nn::Step;

/// Keeps only the trainable variables' gradients, detached. candle's
/// backward also leaves gradients for untracked operands (inputs, masks),
/// and a gradient built from tracked tensors keeps their op chain alive
/// (docs/models.md §5 pitfall 3); a careful training loop drops both before the
/// optimizer step, and so does the runner.
pub(crate) fn prune_grads(grads: &mut GradStore, vars: &[Var]) -> candle_core::Result<()> {
    crate::sdk::compat::keep_only(grads, vars)
}

impl Checkpointed {
    /// [`Checkpointed::backward`] and [`Checkpointed::backward_whole`]: the
    /// block recomputed as `block` says, part by part.
    pub(super) fn backward_with(&self, block: Recompute<'_>, grads: &mut GradStore, vars: &[Var]) -> Result<()> {
        self.refuse_the_other_kind(&block)?;
        let kept = begin_backward(self.order)?;
        let Some(grad_out) = grads.remove(self.output.as_tensor()) else {
            return Ok(()); // the loss does not depend on the block
        };
        let vars: Vec<Var> = vars.iter().cloned().chain(kept).collect();
        let vars = vars.as_slice();
        // Drop the gradients of untracked operands (and the op chains they
        // hold) before the recompute adds its own graphs.
        prune_grads(grads, vars)?;
        let keep: HashSet<TensorId> = vars.iter().map(|v| v.as_tensor().id()).collect();
        // The recompute's memory shows in the timeline under the block's name.
        let _recompute = self
            .scope
            .and_then(seen_name)
            .map(|name| gate_probe::enter(&format!("{name} (recompute)")));
        let mut pass = Pass {
            block,
            grad_out,
            keep,
            step: if self.train { Step::train(0) } else { Step::eval() },
            tracked: self.inputs.iter().map(Tensor::track_op).collect(),
            input_grads: vec![Vec::new(); self.inputs.len()],
            by_hand: HandGrads::default(),
        };
        for (k, range) in self.parts()? {
            self.recompute_part(&mut pass, k, range, grads, vars)?;
        }
        self.push_upstream(pass, grads, vars)
    }

    /// A block checkpointed whole is recomputed whole, one in chunks in chunks.
    fn refuse_the_other_kind(&self, block: &Recompute<'_>) -> Result<()> {
        match (block, self.chunk) {
            (Recompute::Rows(_), None) => candle_core::bail!(
                "this block was checkpointed whole (`Checkpointed::whole`): call `Checkpointed::backward_whole`"
            ),
            (Recompute::Whole(_), Some(_)) => candle_core::bail!(
                "this block was checkpointed in chunks (`Checkpointed::forward`): call `Checkpointed::backward`"
            ),
            _ => Ok(()),
        }
    }

    /// The parts the block is recomputed in: each chunk's index and rows,
    /// or a whole block's one part (all of it, not narrowed).
    fn parts(&self) -> Result<Vec<Part>> {
        let n = self.output.dim(0)?;
        Ok(match self.chunk {
            Some(chunk) => chunks(n, chunk)
                .map(|(k, start, len)| (k, Some((start, len))))
                .collect(),
            None => vec![(0, None)],
        })
    }

    /// Part `k` (rows `range`) recomputed and backpropagated: its
    /// gradients accumulated into `grads`, the tracked inputs' kept for
    /// the end, the hand-computed ones summed.
    fn recompute_part(
        &self,
        pass: &mut Pass<'_>,
        k: usize,
        range: Option<(usize, usize)>,
        grads: &mut GradStore,
        vars: &[Var],
    ) -> Result<()> {
        let leaves: Vec<Tensor> = self
            .inputs
            .iter()
            .zip(&pass.tracked)
            .map(|(x, &t)| {
                let part = rows_or_all(&x.detach(), range)?;
                if t {
                    Ok(Var::from_tensor(&part)?.as_tensor().clone())
                } else {
                    Ok(part)
                }
            })
            .collect::<Result<_>>()?;
        let chunk_step = pass.step.chunk(self.seed, k);
        let g = rows_or_all(&pass.grad_out, range)?;
        let chunk_grads = match pass.block.by_hand(&leaves, &chunk_step, &g)? {
            Some(RowGrads { store, tensors }) => {
                for (of, grad) in tensors {
                    pass.by_hand.add(of, grad)?;
                }
                store
            }
            None => pass
                .block
                .forward(&leaves, &chunk_step)?
                .mul(&g)?
                .sum_all()?
                .backward()?,
        };
        accumulate(grads, &chunk_grads, &pass.keep, vars)?;
        for (i, leaf) in leaves.iter().enumerate() {
            if pass.tracked[i] {
                let g = match chunk_grads.get(leaf) {
                    Some(g) => g.detach(),
                    None => leaf.zeros_like()?,
                };
                pass.input_grads[i].push(g);
            }
        }
        Ok(())
    }

    /// Pushes the inputs' gradients, and those computed by hand for tensors
    /// built from variables, into their own graphs, one tensor at a time
    /// (each its own `sum(x ⊙ g)` and backward): one tensor's cast, product
    /// and upstream gradients are held beside the sums, not every tensor's
    /// at once (with half-precision copies of f32 masters, whose gradients
    /// all go this way, all at once was the recompute's peak).
    fn push_upstream(&self, pass: Pass<'_>, grads: &mut GradStore, vars: &[Var]) -> Result<()> {
        for (x, parts) in self.inputs.iter().zip(pass.input_grads) {
            if !parts.is_empty() {
                let g = Tensor::cat(&parts, 0)?;
                drop(parts);
                push_into_graph(x, g, grads, &pass.keep, vars)?;
            }
        }
        pass.by_hand.push(grads, &pass.keep, vars)
    }
}

/// `x`'s gradient `g` pushed through `x`'s graph into the `keep` tensors'
/// gradients in `grads`.
fn push_into_graph(x: &Tensor, g: Tensor, grads: &mut GradStore, keep: &HashSet<TensorId>, vars: &[Var]) -> Result<()> {
    let upstream = x.mul(&g)?.sum_all()?.backward()?;
    drop(g);
    accumulate(grads, &upstream, keep, vars)
}

/// A part of a recompute: its chunk's index, and its rows (start, count),
/// or `None` for all of them.
type Part = (usize, Option<(usize, usize)>);

/// One backward's state across its parts.
struct Pass<'a> {
    block: Recompute<'a>,
    /// The loss's gradient with respect to the block's output.
    grad_out: Tensor,
    /// The tensors whose gradients are kept: the variables and the living
    /// blocks' leaves.
    keep: HashSet<TensorId>,
    step: Step,
    /// Which inputs are tracked (their gradients go upstream at the end).
    tracked: Vec<bool>,
    /// Each tracked input's gradient, part by part.
    input_grads: Vec<Vec<Tensor>>,
    by_hand: HandGrads,
}

/// Hand-computed gradients summed per tensor over the chunks, in first-seen
/// order. Sums are kept in f32 whatever the tensor's dtype (a bf16 sum over
/// many chunks would round at every add, as autograd's f32 masters do not),
/// and cast back by [`HandGrads::into_sums`].
#[derive(Default)]
pub(super) struct HandGrads {
    sums: Vec<(Tensor, Tensor)>,
    index: std::collections::HashMap<TensorId, usize>,
}

impl HandGrads {
    /// Each tensor with its summed gradient, in the tensor's dtype, cast
    /// one at a time as they are taken.
    fn into_sums(self) -> impl Iterator<Item = Result<(Tensor, Tensor)>> {
        self.sums.into_iter().map(|(of, g)| {
            let g = g.to_dtype(of.dtype())?;
            Ok((of, g))
        })
    }

    /// Adds each sum into `grads`: where its tensor is kept (a variable, a
    /// living block's leaf) directly, else through the tensor's own graph
    /// into the kept tensors' gradients. A tensor that is neither (an
    /// untracked input, a detached weight) has nowhere to send it.
    pub(super) fn push(self, grads: &mut GradStore, keep: &HashSet<TensorId>, vars: &[Var]) -> Result<()> {
        for sum in self.into_sums() {
            let (of, grad) = sum?;
            if keep.contains(&of.id()) {
                let sum = match grads.get_id(of.id()) {
                    Some(old) => old.add(&grad)?.detach(),
                    None => grad,
                };
                crate::sdk::compat::set_var_grad(grads, of.id(), vars, sum);
            } else if of.track_op() {
                push_into_graph(&of, grad, grads, keep, vars)?;
            }
        }
        Ok(())
    }

    pub(super) fn add(&mut self, of: Tensor, grad: Tensor) -> Result<()> {
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
        crate::sdk::compat::set_var_grad(into, id, vars, sum);
    }
    Ok(())
}
