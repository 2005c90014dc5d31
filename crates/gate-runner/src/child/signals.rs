//! Signals and the children they reach. Every child gate waits on is
//! started here and listed (profiles, helpers such as cargo and a
//! harness's `__resolve`), so SIGINT/SIGTERM reaches each one's process
//! group, a watchdog ends them even when gate is SIGKILLed, and the stage
//! of the run (before output, writing, stopping) decides whether a signal
//! ends the process now or waits for the files.

use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicI32, AtomicU8, Ordering};
use std::sync::Mutex;

use super::command::{command, tie};

/// The profiles running now (pids of children not yet waited for, so a pid
/// here is never a recycled one).
pub(super) static RUNNING: Mutex<Vec<u32>> = Mutex::new(Vec::new());

/// The other children this process waits on for an answer (the harness's
/// cargo build, its `__resolve`): pids, each its process group's leader.
/// A signal kills their groups outright: what they would answer is no
/// longer wanted.
static HELPERS: Mutex<Vec<u32>> = Mutex::new(Vec::new());

/// Folders this process made for the run (the harness's private copy):
/// removed when a signal ends the process, since their owners' destructors
/// do not run then.
static SCRATCH: Mutex<Vec<std::path::PathBuf>> = Mutex::new(Vec::new());

/// The first SIGINT/SIGTERM received (0: none).
static INTERRUPTED: AtomicI32 = AtomicI32::new(0);

/// Where the run is, for the signal handler: before any output (a signal
/// ends the process at once), writing (the signal waits for the set), or
/// stopped (the handler is ending the process).
static STAGE: AtomicU8 = AtomicU8::new(EARLY);

const EARLY: u8 = 0;

const WRITING: u8 = 1;

const STOPPED: u8 = 2;

/// Ctrl-C for every command but `gate profile`: on the first SIGINT or
/// SIGTERM while profiles run, the signal is passed on to each of them
/// (SIGKILL follows after 2 s if one is still there) and [`interrupted`]
/// says so, so `gate check` stops and writes nothing. In any other phase
/// before [`begin_writing`] (reading a spec or baseline from a slow source,
/// waiting on the GitHub API) the process exits 130 at once, whatever the
/// main thread is blocked in. Once writing has begun the signal waits for
/// the files. A second signal ends the process at once (exit 130). Profiles
/// also die with the parent if it is killed outright (Linux: PDEATHSIG).
/// Installing it twice is harmless.
#[cfg(unix)]
pub fn forward_signals() -> std::io::Result<()> {
    static INSTALLED: Mutex<bool> = Mutex::new(false);
    let mut installed = INSTALLED.lock().unwrap_or_else(|e| e.into_inner());
    if *installed {
        return Ok(());
    }
    use signal_hook::consts::{SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM])?;
    std::thread::Builder::new().name("gate-signals".into()).spawn(move || {
        for sig in signals.forever() {
            let interrupted = crate::exit::Exit::Interrupted.code().into();
            if INTERRUPTED
                .compare_exchange(0, sig, Ordering::SeqCst, Ordering::SeqCst)
                .is_err()
            {
                signal_running(libc::SIGKILL);
                kill_helpers();
                remove_scratch();
                std::process::exit(interrupted);
            }
            let profiling = !RUNNING.lock().unwrap_or_else(|e| e.into_inner()).is_empty();
            if !profiling
                && STAGE
                    .compare_exchange(EARLY, STOPPED, Ordering::SeqCst, Ordering::SeqCst)
                    .is_ok()
            {
                // Said before the helpers are killed: the main thread, seeing
                // its helper die, may end the process first (`stopping`
                // tells it to end it as interrupted); the line is out then.
                let name = if sig == SIGTERM { "SIGTERM" } else { "SIGINT" };
                eprintln!("gate: interrupted by {name}: no output written");
                kill_helpers();
                // A profile being started right now dies with us (PDEATHSIG).
                remove_scratch();
                std::process::exit(interrupted);
            }
            kill_helpers();
            signal_running(sig);
            std::thread::spawn(|| {
                std::thread::sleep(std::time::Duration::from_secs(2));
                signal_running(libc::SIGKILL);
            });
        }
    })?;
    *installed = true;
    Ok(())
}

/// Has `dir` removed if a signal ends the process (see `SCRATCH`); its
/// owner removes it otherwise, after [`forget_scratch`].
pub fn scratch(dir: &Path) {
    SCRATCH
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(dir.to_path_buf());
}

/// Takes `dir` off the folders a signal removes.
pub fn forget_scratch(dir: &Path) {
    SCRATCH.lock().unwrap_or_else(|e| e.into_inner()).retain(|d| d != dir);
}

#[cfg(unix)]
fn remove_scratch() {
    for dir in SCRATCH.lock().unwrap_or_else(|e| e.into_inner()).iter() {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// Called just before the first output file is written: from here on a
/// signal waits until the set is written. `false`: a signal came first and
/// the process is ending; write nothing.
pub fn begin_writing() -> bool {
    match STAGE.compare_exchange(EARLY, WRITING, Ordering::SeqCst, Ordering::SeqCst) {
        Ok(_) => interrupted().is_none(),
        Err(s) => s == WRITING,
    }
}

#[cfg(not(unix))]
pub fn forward_signals() -> std::io::Result<()> {
    Ok(())
}

/// Sends `sig` to every profile's process group (the profile and
/// anything it started).
#[cfg(unix)]
fn signal_running(sig: i32) {
    let pids = RUNNING.lock().unwrap_or_else(|e| e.into_inner()).clone();
    for pid in pids {
        // SAFETY: kill(2) on the group of a child we have not reaped yet.
        unsafe {
            libc::kill(-(pid as libc::pid_t), sig);
        }
    }
}

/// SIGKILLs every helper's process group (cargo and its compilers and
/// build scripts; a harness's `__resolve` and whatever it started). None
/// starts after this: [`spawn_helper`] checks [`interrupted`] under the lock.
#[cfg(unix)]
fn kill_helpers() {
    for &pid in HELPERS.lock().unwrap_or_else(|e| e.into_inner()).iter() {
        // SAFETY: kill(2) on the group of a child we have not reaped yet.
        unsafe {
            libc::kill(-(pid as libc::pid_t), libc::SIGKILL);
        }
    }
}

/// Whether a signal is ending the process (it came before any output and
/// while no profile ran): whatever failed since (a helper it killed) is the
/// interruption, exit 130, and the signal's line is already on stderr.
pub fn stopping() -> bool {
    STAGE.load(Ordering::SeqCst) == STOPPED
}

/// The signal that interrupted this run (SIGINT 2, SIGTERM 15), if one did.
pub fn interrupted() -> Option<i32> {
    match INTERRUPTED.load(Ordering::SeqCst) {
        0 => None,
        s => Some(s),
    }
}

/// Starts the child and lists it in `list` (under the lock, so a signal
/// either sees it or stops it from starting).
fn spawn_into(list: &Mutex<Vec<u32>>, cmd: &mut Command) -> std::io::Result<Child> {
    let mut running = list.lock().unwrap_or_else(|e| e.into_inner());
    if interrupted().is_some() {
        return Err(std::io::Error::new(std::io::ErrorKind::Interrupted, "interrupted"));
    }
    let child = cmd.spawn()?;
    running.push(child.id());
    Ok(child)
}

pub(super) fn spawn(cmd: &mut Command) -> std::io::Result<Child> {
    spawn_into(&RUNNING, cmd)
}

/// Waits for `child` to end and takes it off `list` before it is reaped,
/// so a signal never reaches a recycled pid (Linux: waitid with WNOWAIT).
/// What it left running in its process group is killed then: nothing it
/// started outlives it (or holds its pipes open).
pub(super) fn wait_listed(
    list: &Mutex<Vec<u32>>,
    child: &mut Child,
    before_reap: impl FnOnce(),
) -> std::io::Result<std::process::ExitStatus> {
    #[cfg(target_os = "linux")]
    loop {
        // SAFETY: waitid(2) on our own child, into a zeroed siginfo_t.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: `info` is a valid siginfo_t this frame owns; the pid is our own unreaped child.
        let r = unsafe {
            libc::waitid(
                libc::P_PID,
                child.id() as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOWAIT,
            )
        };
        if r == 0 {
            // SAFETY: the group of our unreaped child (its pid, not yet reusable).
            unsafe {
                libc::kill(-(child.id() as libc::pid_t), libc::SIGKILL);
            }
            break;
        }
        if std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            break;
        }
    }
    list.lock()
        .unwrap_or_else(|e| e.into_inner())
        .retain(|&p| p != child.id());
    before_reap();
    child.wait()
}

/// A child started with [`spawn_helper`]: a program whose answer this
/// process waits for. Dropped before [`Helper::wait`] (an early return),
/// its process group is killed and reaped.
pub struct Helper {
    child: Option<Child>,
    watchdog: Option<Watchdog>,
}

impl Helper {
    /// The child (to take its pipes).
    pub fn child(&mut self) -> &mut Child {
        self.child.as_mut().expect("a helper is waited for once")
    }

    /// Waits for it to end.
    pub fn wait(mut self) -> std::io::Result<std::process::ExitStatus> {
        let mut child = self.child.take().expect("a helper is waited for once");
        let watchdog = self.watchdog.take();
        wait_listed(&HELPERS, &mut child, || {
            watchdog.into_iter().for_each(Watchdog::stand_down)
        })
    }
}

impl Helper {
    /// Waits for it to end, at most `limit`: past it, its process group is
    /// killed and it is reaped (`None`). It is killed through this handle,
    /// while it is unreaped, so the pid is still its own, never a recycled one.
    pub fn wait_within(self, limit: std::time::Duration) -> std::io::Result<Option<std::process::ExitStatus>> {
        let started = std::time::Instant::now();
        loop {
            if self.ended()? {
                return self.wait().map(Some);
            }
            if started.elapsed() >= limit {
                drop(self);
                return Ok(None);
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }

    /// Whether it has ended, leaving it unreaped.
    fn ended(&self) -> std::io::Result<bool> {
        let child = self.child.as_ref().expect("a helper is waited for once");
        #[cfg(target_os = "linux")]
        {
            // SAFETY: waitid(2) on our own unreaped child, into a zeroed siginfo_t.
            let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
            // SAFETY: `info` is a valid siginfo_t this frame owns; WNOWAIT leaves the child unreaped.
            let r = unsafe {
                libc::waitid(
                    libc::P_PID,
                    child.id() as libc::id_t,
                    &mut info,
                    libc::WEXITED | libc::WNOWAIT | libc::WNOHANG,
                )
            };
            if r != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // SAFETY: filled by waitid; 0 when the child has not changed state.
            Ok(unsafe { info.si_pid() } != 0)
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = child;
            Ok(false)
        }
    }
}

impl Drop for Helper {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            #[cfg(unix)]
            // SAFETY: kill(2) on the group of a child we have not reaped yet.
            unsafe {
                libc::kill(-(child.id() as libc::pid_t), libc::SIGKILL);
            }
            #[cfg(not(unix))]
            let _ = child.kill();
            let watchdog = self.watchdog.take();
            let _ = wait_listed(&HELPERS, &mut child, || {
                watchdog.into_iter().for_each(Watchdog::stand_down)
            });
        }
    }
}

/// Starts `cmd` tied to this process (see [`tie`]): a SIGINT/SIGTERM to
/// this process kills its whole process group, and it dies with this
/// process. `Interrupted` once a signal has arrived.
pub fn spawn_helper(cmd: &mut Command) -> std::io::Result<Helper> {
    tie(cmd);
    let child = spawn_into(&HELPERS, cmd)?;
    Ok(Helper {
        watchdog: Watchdog::start(child.id()),
        child: Some(child),
    })
}

/// Ends a helper's (or a profile's) process group if this process is SIGKILLed.
/// PDEATHSIG reaches the helper alone, not what it started (cargo's
/// compilers and build scripts): a shell outside the group reads a pipe
/// whose only writer is this process, and kills the group when the pipe
/// closes without `done` (this process died). Linux only, like PDEATHSIG.
/// (`kill -s KILL -- -GROUP` is the POSIX form dash accepts.)
pub(super) struct Watchdog {
    #[cfg(target_os = "linux")]
    shell: Child,
    #[cfg(target_os = "linux")]
    pipe: std::io::PipeWriter,
}

impl Watchdog {
    #[cfg(target_os = "linux")]
    pub(super) fn start(group: u32) -> Option<Watchdog> {
        use std::os::unix::process::CommandExt;
        let (read, pipe) = std::io::pipe().ok()?;
        let shell = command("/bin/sh")
            .args([
                "-c",
                r#"read x; [ "$x" = done ] || kill -s KILL -- "-$1""#,
                "gate-watchdog",
            ])
            .arg(group.to_string())
            .stdin(read)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            // Not in the terminal's group: a Ctrl-C is gate's to handle.
            .process_group(0)
            .spawn()
            .ok()?;
        Some(Watchdog { shell, pipe })
    }

    #[cfg(not(target_os = "linux"))]
    pub(super) fn start(_group: u32) -> Option<Watchdog> {
        None
    }

    /// The helper ended (not reaped yet, so its group id is not reused):
    /// the shell leaves without killing anything.
    pub(super) fn stand_down(self) {
        #[cfg(target_os = "linux")]
        {
            let Watchdog { mut shell, mut pipe } = self;
            let _ = pipe.write_all(b"done\n");
            drop(pipe);
            let _ = shell.wait();
        }
    }
}
