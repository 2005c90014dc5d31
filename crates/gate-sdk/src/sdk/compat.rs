//! Where candle's API differs between the minors the SDK is built against
//! (the `candle-0-*` features), one function per difference; the rest of
//! the SDK is one source for every minor. The next minor's breaks go here.
//!
//! - candle 0.9.1 has no `GradStore::insert_id` (0.9.2 added it) and no
//!   way to make an empty store but a backward; `candle-0-9-1` takes the
//!   long way round for both.

use candle_core::backprop::GradStore;
use candle_core::{Result, Tensor, TensorId, Var};

/// Sets the gradient of variable `id`, one of `vars`.
pub(crate) fn set_var_grad(grads: &mut GradStore, id: TensorId, vars: &[Var], grad: Tensor) {
    #[cfg(not(feature = "candle-0-9-1"))]
    {
        let _ = vars;
        grads.insert_id(id, grad);
    }
    #[cfg(feature = "candle-0-9-1")]
    if let Some(v) = vars.iter().find(|v| v.as_tensor().id() == id) {
        grads.insert(v.as_tensor(), grad);
    }
}

/// Keeps only `vars`' gradients, detached (see `checkpoint::prune_grads`).
#[cfg(not(feature = "candle-0-9-1"))]
pub(crate) fn keep_only(grads: &mut GradStore, vars: &[Var]) -> Result<()> {
    let keep: std::collections::HashSet<TensorId> = vars.iter().map(|v| v.as_tensor().id()).collect();
    let ids: Vec<TensorId> = grads.get_ids().copied().collect();
    for id in ids {
        if keep.contains(&id) {
            if let Some(g) = grads.get_id(id) {
                let detached = g.detach();
                grads.insert_id(id, detached);
            }
        } else if let Some(g) = grads.get_id(id) {
            // GradStore has no remove-by-id: swap in an empty tensor.
            let empty = Tensor::zeros(0, g.dtype(), g.device())?;
            grads.insert_id(id, empty);
        }
    }
    Ok(())
}

/// Keeps only `vars`' gradients, detached: candle 0.9.1 can neither set nor
/// remove a gradient by id, so the kept ones move to a new store (made
/// empty from the backward of a lone scalar, the only way 0.9.1 makes one).
#[cfg(feature = "candle-0-9-1")]
pub(crate) fn keep_only(grads: &mut GradStore, vars: &[Var]) -> Result<()> {
    let seed = Tensor::zeros((), candle_core::DType::F32, &candle_core::Device::Cpu)?;
    let mut kept = seed.backward()?;
    kept.remove(&seed);
    for v in vars {
        if let Some(g) = grads.get(v.as_tensor()) {
            kept.insert(v.as_tensor(), g.detach());
        }
    }
    *grads = kept;
    Ok(())
}
