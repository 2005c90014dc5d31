//! Reading a profile's stdout: one JSON event per line (each phase as it
//! starts, then the measurement), timed as they arrive; lines that are not
//! gate's events counted, never kept whole.

use std::io::{BufRead, BufReader, Read};
use std::time::Instant;

use gate_contract::measurement::{Measurement, Phase};
use gate_contract::protocol::ChildEvent;

/// What a child's stdout said, read to its end.
pub(super) struct Events {
    /// The last phase announced (`setup` if none was).
    pub(super) last_phase: Phase,
    /// Each phase's wall time, in the order they ran.
    pub(super) phase_seconds: Vec<(Phase, f64)>,
    /// The figures that came with the last phase.
    pub(super) so_far: Measurement,
    /// The measurement, if the child finished one.
    pub(super) done: Option<Measurement>,
    /// How many `done` events came: one per profile; a second is the
    /// protocol broken (it would replace a failing figure with a passing one).
    pub(super) dones: usize,
    /// Lines that were not events (a library printing to stdout), and the
    /// first of them (cut short).
    pub(super) strays: usize,
    pub(super) first_stray: Option<String>,
}

/// Reads the child's events until its stdout closes, timing each phase
/// from `started` and passing each phase to `on_phase` as it begins.
pub(super) fn read_events(stdout: impl Read, started: Instant, on_phase: &mut dyn FnMut(Phase)) -> Events {
    let mut ev = Events {
        last_phase: Phase::Setup,
        phase_seconds: Vec::new(),
        so_far: Measurement::default(),
        done: None,
        dones: 0,
        strays: 0,
        first_stray: None,
    };
    let mut phase_started = started;
    let mut reader = BufReader::new(stdout);
    while let Some(line) = next_line(&mut reader) {
        let line = String::from_utf8_lossy(&line);
        match serde_json::from_str::<ChildEvent>(&line) {
            Ok(ChildEvent::Phase { phase, so_far: m }) => {
                let now = Instant::now();
                ev.phase_seconds
                    .push((ev.last_phase, (now - phase_started).as_secs_f64()));
                phase_started = now;
                ev.last_phase = phase;
                ev.so_far = *m;
                on_phase(phase);
            }
            Ok(ChildEvent::Done(m)) => {
                ev.dones += 1;
                // The first stands; a later one is never taken for it.
                if ev.done.is_none() {
                    ev.done = Some(*m);
                }
            }
            // Not ours (a library printing to stdout): counted, else ignored.
            Err(_) => {
                ev.strays += 1;
                if ev.first_stray.is_none() {
                    ev.first_stray = Some(line.chars().take(120).collect());
                }
            }
        }
    }
    // The last phase ran until the measurement came (or the child died).
    ev.phase_seconds
        .push((ev.last_phase, phase_started.elapsed().as_secs_f64()));
    ev
}

/// The longest line of a profile's stdout that is read as an event (a
/// measurement with its timeline is a few MiB); a longer one is skipped as
/// it comes, so a child printing without newlines cannot fill memory.
const EVENT_LINE_MAX: u64 = 64 << 20;

/// The next line of `r` (without its newline; `[]` for one too long to be
/// an event), or `None` at its end.
fn next_line(r: &mut impl BufRead) -> Option<Vec<u8>> {
    let mut line = Vec::new();
    match r.by_ref().take(EVENT_LINE_MAX).read_until(b'\n', &mut line) {
        Ok(0) | Err(_) => return None,
        Ok(_) if line.ends_with(b"\n") => {
            line.pop();
            return Some(line);
        }
        Ok(n) if (n as u64) < EVENT_LINE_MAX => return Some(line), // the last line, unterminated
        Ok(_) => {}
    }
    // Too long: drop the rest of it without keeping it.
    loop {
        let Ok(buf) = r.fill_buf() else { return None };
        if buf.is_empty() {
            return Some(Vec::new());
        }
        match buf.iter().position(|&c| c == b'\n') {
            Some(i) => {
                r.consume(i + 1);
                return Some(Vec::new());
            }
            None => {
                let n = buf.len();
                r.consume(n);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_endless_line_on_a_profiles_stdout_is_skipped_not_kept() {
        // 200 MiB without a newline, then a phase event: read through, the
        // long line counted as a stray (empty), the event still seen.
        struct Endless(usize);
        impl std::io::Read for Endless {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                let n = self.0.min(buf.len());
                buf[..n].fill(b'x');
                self.0 -= n;
                Ok(n)
            }
        }
        let event = ChildEvent::Phase {
            phase: Phase::Build,
            so_far: Box::default(),
        };
        let line = format!("\n{}\n", serde_json::to_string(&event).unwrap());
        let stdout = std::io::Read::chain(Endless(200 << 20), line.as_bytes());
        let mut phases = Vec::new();
        let ev = read_events(stdout, std::time::Instant::now(), &mut |p| phases.push(p));
        assert_eq!(phases, [Phase::Build]);
        assert_eq!(ev.strays, 1);
        assert_eq!(ev.first_stray.as_deref(), Some(""));
    }
}
