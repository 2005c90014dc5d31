//! Profiles side by side: `gate check --jobs N` runs up to N children at
//! once. Each is its own process, so one's bytes never touch another's; on
//! a GPU their timed steps take turns on a lock file (`timing_lock`).

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::child::{interrupted, run_child, ChildArgs};
use gate_contract::measurement::{Measurement, Phase};

/// What the caller hears while the profiles run (from any worker thread).
pub enum Progress<'a> {
    /// Component `name`'s profile is starting (its child is about to be started).
    Start(&'a str),
    /// Component `name` entered `phase`.
    Phase(&'a str, Phase),
    /// Component `name` finished (or could not start), after `elapsed`.
    Done(&'a str, &'a std::io::Result<Measurement>, Duration),
}

/// One component's outcome, in the order the components were given.
pub struct Profiled {
    /// The component.
    pub name: String,
    /// Its measurement; `Err` when the child could not be started at all.
    pub result: std::io::Result<Measurement>,
    /// Wall time of its profile.
    pub elapsed: Duration,
}

/// The default `--jobs`: every core for CPU profiles (each runs one
/// compute thread), one at a time on a GPU (one device, and capacity
/// emulation holds back memory per process).
pub fn default_jobs(cuda: bool) -> usize {
    if cuda {
        1
    } else {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    }
}

/// Profiles `names` with up to `jobs` children at once, each reading the
/// request file `request` (see `run_child`). Stops starting new ones once
/// the run is interrupted; those never started are left out.
pub fn profile_all(
    exe: &Path,
    request: &Path,
    names: &[String],
    args: &ChildArgs,
    jobs: usize,
    on: &(dyn Fn(Progress) + Sync),
) -> Vec<Profiled> {
    let jobs = jobs.clamp(1, names.len().max(1));
    let lock = (jobs > 1 && args.take_turns).then(|| {
        std::env::temp_dir().join(format!(
            "gate-timing-{}-{}.lock",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.subsec_nanos())
        ))
    });
    let args = ChildArgs {
        timing_lock: lock.clone(),
        ..args.clone()
    };
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Profiled>>> = Mutex::new((0..names.len()).map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..jobs {
            s.spawn(|| loop {
                if interrupted().is_some() {
                    return;
                }
                let i = next.fetch_add(1, Ordering::SeqCst);
                let Some(name) = names.get(i) else { return };
                on(Progress::Start(name));
                let t = Instant::now();
                let result = run_child(exe, request, name, &args, &mut |p| on(Progress::Phase(name, p)));
                let elapsed = t.elapsed();
                on(Progress::Done(name, &result, elapsed));
                results.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(Profiled {
                    name: name.clone(),
                    result,
                    elapsed,
                });
            });
        }
    });
    if let Some(p) = lock {
        let _ = std::fs::remove_file(p);
    }
    results
        .into_inner()
        .unwrap_or_else(|e| e.into_inner())
        .into_iter()
        .flatten()
        .collect()
}
