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
//! - `error`: a candle error;
//! - `cuda`: a CUDA driver error (`CUDA_ERROR_ILLEGAL_ADDRESS`), as candle returns it;
//! - `cuda_oom`: the device runs out of memory (`CUDA_ERROR_OUT_OF_MEMORY`);
//! - `nan`, `inf`: every loss from PHASE on is NaN / +inf (the runner's
//!   finite-loss check places the failure where it first sees one);
//! - `leak`: from PHASE on, every training step and inference call keeps a
//!   copy of the batch's first tensor alive (what `growth` must catch).
//!
//! The parent passes the component's name to each child in
//! [`COMPONENT_ENV`]; without it a filter never matches.

use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::Mutex;

use super::measurement::Phase;

pub const ENV: &str = "GATE_INJECT_FAULT";
/// The component a `gate profile` child measures (set by `run_child`).
pub const COMPONENT_ENV: &str = "GATE_PROFILE_COMPONENT";

/// 0: losses are left alone; 1: NaN; 2: +inf.
static POISON: AtomicU8 = AtomicU8::new(0);
/// Whether each step keeps a tensor alive (`leak`).
static LEAKING: AtomicBool = AtomicBool::new(false);
/// What the injected leak keeps.
static LEAKED: Mutex<Vec<candle_core::Tensor>> = Mutex::new(Vec::new());

/// Keeps a copy of `t` for good once `leak` was injected (tests only).
pub fn leak(t: &candle_core::Tensor) -> candle_core::Result<()> {
    if LEAKING.load(Ordering::Relaxed) {
        let copy = t.copy()?;
        LEAKED.lock().unwrap_or_else(|e| e.into_inner()).push(copy);
    }
    Ok(())
}

/// A CUDA driver error, displayed as cudarc's `DriverError` is.
#[derive(Debug)]
struct DriverError(&'static str, &'static str);

impl std::fmt::Display for DriverError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DriverError({}, {:?})", self.0, self.1)
    }
}

impl std::error::Error for DriverError {}

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
pub fn inject(phase: Phase) -> candle_core::Result<()> {
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
        "error" => Err(candle_core::Error::Msg(format!("injected error in phase {phase}"))),
        "cuda" => Err(candle_core::Error::Cuda(Box::new(DriverError(
            "CUDA_ERROR_ILLEGAL_ADDRESS",
            "an illegal memory access was encountered",
        )))),
        "cuda_oom" => Err(candle_core::Error::Cuda(Box::new(DriverError(
            "CUDA_ERROR_OUT_OF_MEMORY",
            "out of memory",
        )))),
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

/// Whether a failure's reason is a device (driver, CUDA library) error
/// other than running out of memory: an infrastructure failure (exit 3),
/// not the model's fault. Out of memory is the model's (exit 1).
pub fn is_device_error(reason: &str) -> bool {
    let device = reason.contains("CUDA_ERROR_") || reason.contains("CUBLAS_STATUS_") || reason.contains("DriverError(");
    device && !reason.contains("CUDA_ERROR_OUT_OF_MEMORY") && !reason.contains("CUBLAS_STATUS_ALLOC_FAILED")
}

#[cfg(test)]
mod tests {
    use super::{is_device_error, parse};

    #[test]
    fn a_component_filter_applies_to_that_component_only() {
        assert_eq!(parse("forward:panic", None), Some(("forward", "panic")));
        assert_eq!(parse("forward:panic", Some("a")), Some(("forward", "panic")));
        assert_eq!(parse("b:forward:panic", Some("b")), Some(("forward", "panic")));
        assert_eq!(parse("b:forward:panic", Some("a")), None);
        assert_eq!(parse("b:forward:panic", None), None);
        assert_eq!(parse("nonsense", Some("a")), None);
    }

    #[test]
    fn device_errors_are_told_from_running_out_of_memory() {
        assert!(is_device_error(
            "DriverError(CUDA_ERROR_ILLEGAL_ADDRESS, \"an illegal memory access was encountered\")"
        ));
        assert!(!is_device_error(
            "DriverError(CUDA_ERROR_OUT_OF_MEMORY, \"out of memory\")"
        ));
        assert!(!is_device_error("the loss is NaN, not a finite number"));
    }
}
