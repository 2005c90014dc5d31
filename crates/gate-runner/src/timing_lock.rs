//! Turns for the timed steps. `gate check --jobs N` runs profiles side by
//! side: their byte counts do not touch each other (separate processes),
//! but on one GPU their step times would (the device time-slices between
//! processes). There the parent names a lock file in `GATE_TIMING_LOCK`;
//! each child holds an exclusive `flock(2)` on it while it times its steps,
//! so no two profiles time at once. CPU profiles take no turns (see
//! `ChildArgs::take_turns`).

use std::fs::File;

/// The lock file's path, set by the parent for its children.
pub const ENV: &str = "GATE_TIMING_LOCK";

/// Held while the steps are timed; released when dropped (or when the
/// process dies, which the kernel does for flock).
pub struct Turn {
    _file: Option<File>,
}

/// Waits for this profile's turn to time its steps; no lock when the
/// parent set none (one profile at a time, or `gate profile` by hand).
pub fn acquire() -> Turn {
    let Some(path) = std::env::var_os(ENV) else {
        return Turn { _file: None };
    };
    let Ok(file) = File::options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
    else {
        return Turn { _file: None };
    };
    // A failure (EINTR on a signal) only means the steps are timed without a turn.
    let _ = file.lock();
    Turn { _file: Some(file) }
}
