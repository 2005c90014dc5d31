//! The `leak` fault's store: the copies of candle tensors an injected
//! `leak` keeps alive (gate-runner's `fault` decides when).

use std::sync::Mutex;

/// What the injected leak keeps.
static LEAKED: Mutex<Vec<candle_core::Tensor>> = Mutex::new(Vec::new());

/// Keeps a copy of `t` for good (the injected `leak`, tests only).
pub(super) fn leak(t: &candle_core::Tensor) -> candle_core::Result<()> {
    let copy = t.copy()?;
    LEAKED.lock().unwrap_or_else(|e| e.into_inner()).push(copy);
    Ok(())
}
