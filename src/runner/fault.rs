//! Fault injection for tests of the gate itself: `GATE_INJECT_FAULT=PHASE:KIND`
//! makes the profile misbehave at the start of PHASE, so the tests can show
//! that a crash, an abort or a bad loss in one component becomes a failed
//! measurement while everything else is still measured and written.
//! KIND: `panic`, `abort`, `error`, `oom` (an allocation the process cannot get).

use super::measurement::Phase;

pub const ENV: &str = "GATE_INJECT_FAULT";

/// Misbehaves as asked if `phase` is the injected one; otherwise does nothing.
pub fn at(phase: Phase) -> candle_core::Result<()> {
    let Ok(spec) = std::env::var(ENV) else { return Ok(()) };
    let Some((p, kind)) = spec.split_once(':') else {
        return Ok(());
    };
    if p != phase.to_string() {
        return Ok(());
    }
    match kind {
        "panic" => panic!("injected panic in phase {phase}"),
        "abort" => std::process::abort(),
        "oom" => {
            // Far beyond any machine: the allocator reports the failure and aborts.
            let v: Vec<u8> = Vec::with_capacity(usize::MAX / 4);
            std::hint::black_box(v);
            Ok(())
        }
        "error" => Err(candle_core::Error::Msg(format!("injected error in phase {phase}"))),
        _ => Ok(()),
    }
}
