//! Fault injection for tests of the gate itself:
//! `GATE_INJECT_FAULT=[COMPONENT:]PHASE:KIND` makes the profile misbehave at
//! the start of PHASE (of COMPONENT only, when one is named), so the tests
//! can show that each kind of fault in one component becomes a failed
//! measurement while everything else is still measured and written.
//!
//! KIND:
//! - `panic`: a panic inside the workload;
//! - `abort`: `abort()` (SIGABRT);
//! - `kill`: the profile SIGKILLs itself (as the kernel's OOM killer would);
//! - `oom`: an allocation the process cannot get (the allocator aborts);
//! - `error`: an error from the framework;
//! - `cuda`: a CUDA driver error (`CUDA_ERROR_ILLEGAL_ADDRESS`), as a
//!   framework's cudarc words it, of the device's kind;
//! - `cuda_panic`: a panic whose message is that CUDA driver error (a
//!   framework that unwraps cudarc's result); its adapter says its kind;
//! - `cuda_oom`: the device runs out of memory (`CUDA_ERROR_OUT_OF_MEMORY`),
//!   of the out-of-memory kind;
//! - `nan`, `inf`: every loss from PHASE on is NaN / +inf (the runner's
//!   finite-loss check places the failure where it first sees one);
//! - `leak`: from PHASE on, every training step and inference call keeps a
//!   copy of the batch's first tensor alive (what `growth` must catch; the
//!   adapter keeps it, see `Train::leak`).
//!
//! The parent passes the component's name to each child in
//! [`COMPONENT_ENV`]; without it a filter never matches.

use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};

use crate::adapter::{Error, Result};
use gate_contract::measurement::Phase;

/// `GATE_INJECT_FAULT=[COMPONENT:]PHASE:KIND` (tests of gate itself).
pub const ENV: &str = "GATE_INJECT_FAULT";
/// The component a `gate profile` child measures (set by `run_child`).
pub const COMPONENT_ENV: &str = "GATE_PROFILE_COMPONENT";

/// 0: losses are left alone; 1: NaN; 2: +inf.
static POISON: AtomicU8 = AtomicU8::new(0);
/// Whether each step keeps a tensor alive (`leak`).
static LEAKING: AtomicBool = AtomicBool::new(false);

/// A CUDA driver error, worded as cudarc's `DriverError` is (a framework
/// on cudarc passes it through), of the kind an adapter gives it.
fn driver_error(kind: gate_contract::measurement::FailureKind, code: &str, text: &str) -> Error {
    Error::of_kind(kind, format!("DriverError({code}, {text:?})"))
}

/// The injected `(phase, kind)` if it applies to `component`.
fn parse<'a>(spec: &'a str, component: Option<&str>) -> Option<(&'a str, &'a str)> {
    let parts: Vec<&str> = spec.split(':').collect();
    match parts[..] {
        [phase, kind] => Some((phase, kind)),
        [c, phase, kind] if Some(c) == component => Some((phase, kind)),
        _ => None,
    }
}

/// Misbehaves as asked if `phase` is the injected one; otherwise does nothing.
pub fn inject(phase: Phase) -> Result<()> {
    let Ok(spec) = std::env::var(ENV) else { return Ok(()) };
    let component = std::env::var(COMPONENT_ENV).ok();
    let Some((p, kind)) = parse(&spec, component.as_deref()) else {
        return Ok(());
    };
    if p != phase.to_string() {
        return Ok(());
    }
    match kind {
        "panic" => panic!("injected panic in phase {phase}"),
        "abort" => std::process::abort(),
        "kill" => {
            #[cfg(unix)]
            // SAFETY: kill(2) on our own pid; no memory is touched.
            unsafe {
                libc::kill(libc::getpid(), libc::SIGKILL);
            }
            std::process::abort()
        }
        "oom" => {
            // Far beyond any machine: the allocator reports the failure and aborts.
            let v: Vec<u8> = Vec::with_capacity(usize::MAX / 4);
            std::hint::black_box(v);
            Ok(())
        }
        "error" => Err(Error::msg(format!("injected error in phase {phase}"))),
        "cuda" => Err(driver_error(
            gate_contract::measurement::FailureKind::Device,
            "CUDA_ERROR_ILLEGAL_ADDRESS",
            "an illegal memory access was encountered",
        )),
        "cuda_panic" => panic!(
            "DriverError(CUDA_ERROR_ILLEGAL_ADDRESS, \"an illegal memory access was encountered\") in phase {phase}"
        ),
        "cuda_oom" => Err(driver_error(
            gate_contract::measurement::FailureKind::OutOfMemory,
            "CUDA_ERROR_OUT_OF_MEMORY",
            "out of memory",
        )),
        "nan" => {
            POISON.store(1, Ordering::Relaxed);
            Ok(())
        }
        "inf" => {
            POISON.store(2, Ordering::Relaxed);
            Ok(())
        }
        "leak" => {
            LEAKING.store(true, Ordering::Relaxed);
            Ok(())
        }
        _ => Ok(()),
    }
}

/// A loss value as the model computed it, or NaN / inf once `nan` / `inf` was injected.
pub fn loss(v: f64) -> f64 {
    match POISON.load(Ordering::Relaxed) {
        1 => f64::NAN,
        2 => f64::INFINITY,
        _ => v,
    }
}

/// Whether an injected `leak` is on: each step then calls `Train::leak`.
pub fn leaking() -> bool {
    LEAKING.load(Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn a_component_filter_applies_to_that_component_only() {
        assert_eq!(parse("forward:panic", None), Some(("forward", "panic")));
        assert_eq!(parse("forward:panic", Some("a")), Some(("forward", "panic")));
        assert_eq!(parse("b:forward:panic", Some("b")), Some(("forward", "panic")));
        assert_eq!(parse("b:forward:panic", Some("a")), None);
        assert_eq!(parse("b:forward:panic", None), None);
        assert_eq!(parse("nonsense", Some("a")), None);
    }
}
