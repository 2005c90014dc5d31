//! Child-process isolation. `gate check` profiles each component in a child
//! (`gate profile`) of the same binary, so one model's allocations, CUDA
//! context or crash never touch another's figures. The child writes one
//! JSON event per line on stdout: each phase as it starts, then the
//! measurement. A child that dies leaves the last phase it announced.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Instant;

use std::sync::atomic::{AtomicI32, AtomicU8, Ordering};
use std::sync::Mutex;

use gate_contract::measurement::{Failure, FailureKind, Measurement, Phase};
use gate_contract::protocol::ChildEvent;

/// How a profile child's panic hook starts its one line on stderr: the
/// panic's message and where it was raised (`... at src/model.rs:12:5`),
/// which Rust's own message puts on a line of its own.
pub const PANIC_LINE: &str = "gate: the profile panicked: ";

/// The line after [`PANIC_LINE`] that says the panic's kind as the
/// framework's adapter judged it (`model`, `out_of_memory`, `device`): a
/// candle or cudarc error that panics instead of returning is still the
/// adapter's to tell, and the parent takes the kind from here, not from
/// the message's words.
pub const PANIC_KIND_LINE: &str = "gate: the panic's kind: ";

/// The profiles running now (pids of children not yet waited for, so a pid
/// here is never a recycled one).
static RUNNING: Mutex<Vec<u32>> = Mutex::new(Vec::new());
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

/// Whether a failed measurement is the infrastructure's fault (a CUDA or
/// driver error other than out of memory; a profile that crashed, failed
/// its set-up, or ended without its measurement): no figure to judge the
/// model by. See [`FailureKind`].
pub fn infrastructure_failure(f: &Failure) -> bool {
    f.kind.is_infrastructure()
}

/// How the reason of a profile killed by a signal other than SIGKILL
/// begins (SIGKILL is what the kernel's OOM killer sends: the model's).
const CRASHED: &str = "the profile crashed: ";
/// How the reason of a profile that exited 0 without its `done` event begins.
const NO_MEASUREMENT: &str = "no measurement: ";

/// Writes one event line (the child side).
pub fn emit(out: &mut impl Write, event: &ChildEvent) -> std::io::Result<()> {
    let line = serde_json::to_string(event).map_err(std::io::Error::other)?;
    writeln!(out, "{line}")?;
    out.flush()
}

/// Options the parent passes through to each child.
#[derive(Debug, Clone)]
pub struct ChildArgs {
    /// Extra arguments for `gate profile` (e.g. `--backend cuda`).
    pub extra: Vec<String>,
    /// Compute threads for the child (1 keeps CPU byte counts repeatable).
    pub threads: usize,
    /// Whether profiles side by side take turns to time their steps
    /// ([`profile_all`](crate::profile_all) then makes the lock file below).
    /// On one GPU, yes: the device time-slices between the processes' work.
    /// On the CPU, no: each profile has a core of its own, and the other core
    /// runs the other profile's untimed phases whether or not it times;
    /// measured on the repository's spec, the turns left a core idle 11.6 s
    /// of a 49 s run for step times no steadier (docs/performance.md).
    pub take_turns: bool,
    /// The lock file children take turns on to time their steps (see `timing_lock`).
    pub timing_lock: Option<std::path::PathBuf>,
}

impl Default for ChildArgs {
    fn default() -> Self {
        ChildArgs {
            extra: Vec::new(),
            threads: 1,
            take_turns: false,
            timing_lock: None,
        }
    }
}

/// Runs `exe profile --request FILE --component NAME` and collects its
/// measurement (`request`: the installed gate's request file, the
/// validated spec as JSON; the harness reads no YAML).
/// `Err` is an infrastructure problem (the child could not be started at all).
pub fn run_child(
    exe: &Path,
    request: &Path,
    component: &str,
    args: &ChildArgs,
    on_phase: &mut dyn FnMut(Phase),
) -> std::io::Result<Measurement> {
    let mut cmd = profile_command(exe, request, component, args);
    // Phases are timed here, from the events as they arrive: the child's
    // start-up (`setup`) counts too, and a crashed phase keeps its time.
    let started = std::time::Instant::now();
    let mut child = spawn(&mut cmd)?;
    // What the profile starts dies with it even if gate is SIGKILLed.
    let watchdog = Watchdog::start(child.id());
    let stdout = child.stdout.take().expect("stdout is piped");
    let mut stderr = child.stderr.take().expect("stderr is piped");
    // Drain stderr on its own thread so a chatty child never blocks on a
    // full pipe; only its end is kept (a reason is read from its last lines).
    let err_thread = std::thread::spawn(move || {
        let mut tail = Tail::new(STDERR_KEPT);
        let mut buf = [0u8; 8192];
        while let Ok(n) = stderr.read(&mut buf) {
            if n == 0 {
                break;
            }
            tail.push(&buf[..n]);
        }
        tail.text()
    });
    let events = read_events(stdout, started, on_phase);
    let status = wait_listed(&RUNNING, &mut child, || {
        watchdog.into_iter().for_each(Watchdog::stand_down)
    });
    let profile_seconds = Some(started.elapsed().as_secs_f64());
    let status = status?;
    let stderr_text = err_thread.join().unwrap_or_default();
    if events.dones > 1 {
        // Never a figure of either: the harness's protocol is broken.
        let program = exe.file_name().unwrap_or(exe.as_os_str()).to_string_lossy();
        let mut m = Measurement {
            phase_seconds: events.phase_seconds,
            profile_seconds,
            ..Measurement::default()
        };
        m.failure = Some(Failure {
            phase: events.last_phase,
            reason: format!(
                "protocol error: `{program} profile` wrote {} `done` events; a profile writes one",
                events.dones
            ),
            kind: FailureKind::Process,
        });
        return Ok(m);
    }
    if status.success() {
        if let Some(mut m) = events.done {
            m.phase_seconds = events.phase_seconds;
            m.profile_seconds = profile_seconds;
            // A figure no measurement can have is the harness's protocol
            // broken, not a model to judge (#43): never clamped to 0.
            if let Some(what) = drop_impossible(&mut m) {
                let program = exe.file_name().unwrap_or(exe.as_os_str()).to_string_lossy();
                m.failure = Some(Failure {
                    phase: events.last_phase,
                    reason: format!("protocol error: `{program} profile` measured {what}"),
                    kind: FailureKind::Process,
                });
            }
            return Ok(m);
        }
    }
    let (reason, kind) = if status.success() && events.done.is_none() {
        (no_measurement(exe, &events), FailureKind::Process)
    } else {
        let (reason, oom) = describe_exit(&status, &stderr_text);
        // The allocator's out of memory aborts: the model's, as out of
        // memory. A panic is of the kind its adapter said; any other crash
        // the model's or the process's by how it ended, never by the words
        // it printed.
        let kind = if oom {
            FailureKind::OutOfMemory
        } else {
            match (exit_kind(&status, events.last_phase), panic_kind(&stderr_text)) {
                (FailureKind::Model, Some(said)) => said,
                (by_exit, _) => by_exit,
            }
        };
        (reason, kind)
    };
    let mut so_far = events.so_far;
    let (reason, kind) = match drop_impossible(&mut so_far) {
        Some(what) => {
            let program = exe.file_name().unwrap_or(exe.as_os_str()).to_string_lossy();
            (
                format!("protocol error: `{program} profile` measured {what} (then: {reason})"),
                FailureKind::Process,
            )
        }
        None => (reason, kind),
    };
    so_far.phase_seconds = events.phase_seconds;
    so_far.profile_seconds = profile_seconds;
    so_far.failure = Some(Failure {
        phase: events.last_phase,
        reason,
        kind,
    });
    Ok(so_far)
}

/// Takes out of `m` every figure no measurement can have, and says the
/// first in words: a size or a time that is negative or not finite, a size
/// past 2^64 bytes, a negative ratio of times. Losses may be any finite
/// number. Taken out, not kept: the report never shows a figure gate did
/// not believe.
fn drop_impossible(m: &mut Measurement) -> Option<String> {
    use gate_spec::metric::{Metric, Unit};
    let bad = |metric: Metric, v: f64| {
        let signed = matches!(metric, Metric::Loss | Metric::LossRatio);
        !v.is_finite() || (!signed && v < 0.0) || (metric.unit() == Unit::Bytes && v > u64::MAX as f64)
    };
    let mut first = None;
    let mut note = |name: &str, metric: Metric, v: f64| {
        if first.is_none() {
            let (unit, never) = match metric.unit() {
                Unit::Bytes => (" bytes", "sizes are never negative and never past 2^64 bytes"),
                Unit::Ms => (" ms", "times are never negative"),
                Unit::One | Unit::Unknown => ("", "ratios of times are never negative"),
            };
            first = Some(format!("`{name}` = {v:e}{unit}: {never}"));
        }
    };
    m.values.retain(|&k, &mut v| {
        let keep = !bad(k, v);
        if !keep {
            note(k.name(), k, v);
        }
        keep
    });
    for (list, name, metric) in [
        (&mut m.step_times_ms, "a step time", Metric::StepTime),
        (&mut m.step_time_ratios, "a step time ratio", Metric::StepTimeRatio),
    ] {
        if let Some(&v) = list.iter().find(|&&v| bad(metric, v)) {
            note(name, metric, v);
            list.clear();
        }
    }
    first
}

/// The reason of a profile that exited 0 without its measurement: the
/// program, and what its stdout held instead.
fn no_measurement(exe: &Path, events: &Events) -> String {
    let program = exe.file_name().unwrap_or(exe.as_os_str()).to_string_lossy();
    let instead = match (&events.first_stray, events.strays) {
        (None, _) => "its stdout had no line of gate's protocol".to_string(),
        (Some(first), n) => format!(
            "its stdout had {n} line{} that {} not gate's JSON events, the first: {first:?}",
            if n == 1 { "" } else { "s" },
            if n == 1 { "is" } else { "are" }
        ),
    };
    format!("{NO_MEASUREMENT}`{program} profile` exited with status 0 without its `done` event ({instead})")
}

/// How much of a profile's stderr is kept for its failure's reason.
const STDERR_KEPT: usize = 64 * 1024;

/// The last `cap` bytes of a stream (a hostile or chatty child may write
/// gigabytes; memory stays bounded).
pub struct Tail {
    cap: usize,
    buf: std::collections::VecDeque<u8>,
    dropped: bool,
}

impl Tail {
    pub fn new(cap: usize) -> Self {
        Tail {
            cap,
            buf: std::collections::VecDeque::with_capacity(cap.min(8192)),
            dropped: false,
        }
    }

    pub fn push(&mut self, bytes: &[u8]) {
        let bytes = &bytes[bytes.len().saturating_sub(self.cap)..];
        let over = (self.buf.len() + bytes.len()).saturating_sub(self.cap);
        if over > 0 {
            self.buf.drain(..over);
            self.dropped = true;
        }
        self.buf.extend(bytes);
    }

    /// The bytes kept, as text; when the start was dropped, from the first
    /// whole line on.
    pub fn text(&self) -> String {
        let (a, b) = self.buf.as_slices();
        let mut all = Vec::with_capacity(self.buf.len());
        all.extend_from_slice(a);
        all.extend_from_slice(b);
        let start = match self.dropped {
            true => all.iter().position(|&c| c == b'\n').map_or(0, |i| i + 1),
            false => 0,
        };
        String::from_utf8_lossy(&all[start..]).into_owned()
    }

    /// Bytes kept now.
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }
}

/// The `gate profile` command for one component.
fn profile_command(exe: &Path, request: &Path, component: &str, args: &ChildArgs) -> Command {
    let mut cmd = command(exe);
    cmd.arg("profile")
        .arg("--request")
        .arg(request)
        .arg("--component")
        .arg(component)
        .args(&args.extra)
        // One compute thread: the CPU matmul kernels keep a scratch buffer per
        // worker thread, and which workers run a kernel varies between runs,
        // so more threads would make the byte counts wobble.
        .env("RAYON_NUM_THREADS", args.threads.to_string())
        .env(crate::fault::COMPONENT_ENV, component)
        .env(TUNABLES_ENV, allocator_tunables(std::env::var_os(TUNABLES_ENV)))
        .envs(args.timing_lock.iter().map(|p| (crate::timing_lock::ENV, p)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    tie(&mut cmd);
    cmd
}

/// Variables a CI runner or a user sets to hold GitHub credentials: never
/// handed to a child, not even when [`PASS_ENV`] names them. gate needs
/// its token only in-process (`gate-github`).
const CREDENTIALS: &[&str] = &[
    "GITHUB_TOKEN",
    "GH_TOKEN",
    "GITHUB_PAT",
    "GH_ENTERPRISE_TOKEN",
    "GITHUB_ENTERPRISE_TOKEN",
    "ACTIONS_RUNTIME_TOKEN",
    "ACTIONS_ID_TOKEN_REQUEST_TOKEN",
    "ACTIONS_ID_TOKEN_REQUEST_URL",
    "INPUT_TOKEN",
    "INPUT_GITHUB_TOKEN",
];

/// The variable a user lists more names in, comma-separated, for a
/// harness or build that needs them (`GATE_PASS_ENV=HF_HOME,MY_MODEL_*`;
/// a name ending in `*` is a prefix). What it names passes as it is,
/// except [`CREDENTIALS`] and a value holding one of theirs.
pub const PASS_ENV: &str = "GATE_PASS_ENV";

/// The variables a child gets by name: what finding tools, building Rust
/// and C/CUDA code, and running a model need.
const ALLOWED: &[&str] = &[
    "PATH",
    "CARGO",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "PWD",
    "TMPDIR",
    "TMP",
    "TEMP",
    "TZ",
    "LANG",
    "LANGUAGE",
    "TERM",
    "COLORTERM",
    "NO_COLOR",
    "CLICOLOR",
    "CLICOLOR_FORCE",
    "CI",
    "RUSTFLAGS",
    "RUSTDOCFLAGS",
    "RUSTC",
    "RUSTDOC",
    "RUSTC_WRAPPER",
    "RUSTC_WORKSPACE_WRAPPER",
    "CC",
    "CXX",
    "AR",
    "LD",
    "NVCC",
    "NVCC_CCBIN",
    "CFLAGS",
    "CXXFLAGS",
    "CPPFLAGS",
    "LDFLAGS",
    "CPATH",
    "C_INCLUDE_PATH",
    "CPLUS_INCLUDE_PATH",
    "LIBRARY_PATH",
    "LD_LIBRARY_PATH",
    "DYLD_LIBRARY_PATH",
    "PKG_CONFIG",
    "PKG_CONFIG_PATH",
    "CMAKE",
    "MAKE",
    "MAKEFLAGS",
    "SDKROOT",
    "MACOSX_DEPLOYMENT_TARGET",
    // A build that downloads its crates needs the network's proxy (which
    // may hold a password: it is the job's own, for the build).
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "NO_PROXY",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "GLIBC_TUNABLES",
    "SYSTEMROOT",
    "WINDIR",
    "PATHEXT",
    "COMSPEC",
];

/// The prefixes a child gets: cargo's and rustup's settings, the locale,
/// the toolkits' and the runtimes' (CUDA, cuDNN, NCCL, ROCm, the BLAS and
/// thread pools), Rust's own (`RUST_LOG`, `RUST_BACKTRACE`), gate's, the
/// XDG folders, and the compilers' per-target settings (`CC_x86_64_…`).
const ALLOWED_PREFIXES: &[&str] = &[
    "CARGO_",
    "RUSTUP_",
    "RUST_",
    "LC_",
    "CUDA_",
    "CUDNN_",
    "NVIDIA_",
    "NCCL_",
    "ROCM_",
    "HIP_",
    "HSA_",
    "CANDLE_",
    "BURN_",
    "WGPU_",
    "MKL_",
    "OMP_",
    "OPENBLAS_",
    "RAYON_",
    "MALLOC_",
    "XDG_",
    "GATE_",
    "CC_",
    "CXX_",
    "AR_",
    "CFLAGS_",
    "CXXFLAGS_",
];

/// Words that make an allowed name a credential all the same: cargo's
/// registry tokens (`CARGO_REGISTRY_TOKEN`, `CARGO_REGISTRIES_*_TOKEN`)
/// start with `CARGO_` and still stay out.
const SECRET_WORDS: &[&str] = &["TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "_KEY", "_PAT"];

/// Whether `name` (upper-cased) looks like it holds a credential.
fn secret_shaped(upper: &str) -> bool {
    SECRET_WORDS.iter().any(|w| upper.contains(w)) || upper.ends_with("KEY")
}

/// The names [`PASS_ENV`] lists: exact names and `PREFIX*` patterns.
fn passed_names(list: Option<&std::ffi::OsStr>) -> Vec<String> {
    list.map(|l| {
        l.to_string_lossy()
            .split(',')
            .map(|n| n.trim().to_ascii_uppercase())
            .filter(|n| !n.is_empty() && n != "*")
            .collect()
    })
    .unwrap_or_default()
}

/// Whether a child may see the variable `name` with `value`: a name of
/// [`ALLOWED`] or with a prefix of [`ALLOWED_PREFIXES`] that does not look
/// like a credential, or one [`PASS_ENV`] lists (`passed`); never one of
/// [`CREDENTIALS`], nor any variable whose value contains one of `secrets`
/// (the values of the variables left out for looking like credentials: a
/// token copied under another name).
pub fn is_passed(name: &std::ffi::OsStr, value: &std::ffi::OsStr, passed: &[String], secrets: &[Vec<u8>]) -> bool {
    let upper = name.to_string_lossy().to_ascii_uppercase();
    if CREDENTIALS.contains(&upper.as_str()) {
        return false;
    }
    let value = value.as_encoded_bytes();
    if secrets
        .iter()
        .any(|s| value.windows(s.len()).any(|w| w == s.as_slice()))
    {
        return false;
    }
    let listed = passed.iter().any(|p| match p.strip_suffix('*') {
        Some(prefix) => upper.starts_with(prefix),
        None => *p == upper,
    });
    if listed {
        return true;
    }
    let allowed = ALLOWED.contains(&upper.as_str()) || ALLOWED_PREFIXES.iter().any(|p| upper.starts_with(p));
    allowed && !secret_shaped(&upper)
}

/// The environment a child gets: this process's, through [`is_passed`].
pub fn child_env() -> Vec<(std::ffi::OsString, std::ffi::OsString)> {
    let vars: Vec<_> = std::env::vars_os().collect();
    let passed = passed_names(std::env::var_os(PASS_ENV).as_deref());
    // The values of what looks like a credential (of 8 bytes or more: a
    // shorter one would match by chance), wherever else they turn up.
    let secrets: Vec<Vec<u8>> = vars
        .iter()
        .filter(|(n, _)| {
            let upper = n.to_string_lossy().to_ascii_uppercase();
            CREDENTIALS.contains(&upper.as_str()) || secret_shaped(&upper)
        })
        .filter(|(n, v)| !is_passed(n, v, &passed, &[]))
        .map(|(_, v)| v.as_encoded_bytes().trim_ascii().to_vec())
        .filter(|v| v.len() >= 8)
        .collect();
    vars.into_iter()
        .filter(|(n, v)| is_passed(n, v, &passed, &secrets))
        .collect()
}

/// The one way gate makes a child's command (cargo, `cargo metadata`, the
/// harness's `__resolve` and profiles, git, the watchdog): `program` with
/// an environment built from an allow-list ([`child_env`]), never this
/// process's whole environment: cargo runs every build script of the pull
/// request's crates and the harness is its program, so a secret the job
/// holds reaches none of them unless named in [`PASS_ENV`].
/// `tests/it/architecture.rs` holds every `Command::new` of gate's sources
/// to this function.
pub fn command(program: impl AsRef<std::ffi::OsStr>) -> Command {
    let mut cmd = Command::new(program);
    cmd.env_clear().envs(child_env());
    cmd
}

/// Ties a child about to be started to this process: it leads a process
/// group of its own (so a signal reaches everything it starts: cargo's
/// compilers and build scripts, a harness's own children), and on Linux it
/// dies with this process even when this one is SIGKILLed (PDEATHSIG; its
/// own children are reached only through the group, on SIGINT/SIGTERM).
pub fn tie(cmd: &mut Command) {
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        cmd.process_group(0);
    }
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::process::CommandExt;
        // SAFETY: getpid/getppid/prctl/raise are async-signal-safe; nothing
        // else runs between fork and exec.
        let parent = unsafe { libc::getpid() };
        // SAFETY: the closure runs in the forked child before exec and calls
        // only async-signal-safe functions (prctl, getppid, raise).
        unsafe {
            cmd.pre_exec(move || {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                // The parent died before prctl: PDEATHSIG will never fire.
                if libc::getppid() != parent {
                    libc::raise(libc::SIGKILL);
                }
                Ok(())
            });
        }
    }
}

/// glibc reads its malloc settings from this variable when a process starts.
const TUNABLES_ENV: &str = "GLIBC_TUNABLES";

/// glibc malloc settings for a profile: every block from the heap, none
/// handed back to the kernel. By default glibc maps each block over 32 MiB
/// afresh and unmaps it on free, so a model whose activations are big
/// tensors (the plain TFT: a 5 GiB training peak) page-faults and zeroes
/// gigabytes every step: on 2 cores that was 50 s of kernel time in an 80 s
/// profile. Kept in the heap, the memory is reused from the second step on
/// (35 s, 4 s of it kernel). The counting allocator counts the sizes
/// asked for, so every byte figure is the same either way; only the
/// process's resident size grows a little (4.94 → 5.30 GiB for the plain
/// TFT). Other C libraries ignore the variable. Settings the user already
/// has come after ours, so theirs win.
/// <https://www.gnu.org/software/libc/manual/html_node/Memory-Allocation-Tunables.html>
fn allocator_tunables(user: Option<std::ffi::OsString>) -> std::ffi::OsString {
    let mut value = std::ffi::OsString::from(
        "glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=68719476736:glibc.malloc.top_pad=268435456",
    );
    if let Some(user) = user.filter(|u| !u.is_empty()) {
        value.push(":");
        value.push(user);
    }
    value
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

fn spawn(cmd: &mut Command) -> std::io::Result<Child> {
    spawn_into(&RUNNING, cmd)
}

/// Waits for `child` to end and takes it off `list` before it is reaped,
/// so a signal never reaches a recycled pid (Linux: waitid with WNOWAIT).
/// What it left running in its process group is killed then: nothing it
/// started outlives it (or holds its pipes open).
fn wait_listed(
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
struct Watchdog {
    #[cfg(target_os = "linux")]
    shell: Child,
    #[cfg(target_os = "linux")]
    pipe: std::io::PipeWriter,
}

impl Watchdog {
    #[cfg(target_os = "linux")]
    fn start(group: u32) -> Option<Watchdog> {
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
    fn start(_group: u32) -> Option<Watchdog> {
        None
    }

    /// The helper ended (not reaped yet, so its group id is not reused):
    /// the shell leaves without killing anything.
    fn stand_down(self) {
        #[cfg(target_os = "linux")]
        {
            let Watchdog { mut shell, mut pipe } = self;
            let _ = pipe.write_all(b"done\n");
            drop(pipe);
            let _ = shell.wait();
        }
    }
}

/// What a child's stdout said, read to its end.
struct Events {
    /// The last phase announced (`setup` if none was).
    last_phase: Phase,
    /// Each phase's wall time, in the order they ran.
    phase_seconds: Vec<(Phase, f64)>,
    /// The figures that came with the last phase.
    so_far: Measurement,
    /// The measurement, if the child finished one.
    done: Option<Measurement>,
    /// How many `done` events came: one per profile; a second is the
    /// protocol broken (it would replace a failing figure with a passing one).
    dones: usize,
    /// Lines that were not events (a library printing to stdout), and the
    /// first of them (cut short).
    strays: usize,
    first_stray: Option<String>,
}

/// Reads the child's events until its stdout closes, timing each phase
/// from `started` and passing each phase to `on_phase` as it begins.
fn read_events(stdout: impl Read, started: Instant, on_phase: &mut dyn FnMut(Phase)) -> Events {
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

/// The kind the harness's panic hook said its adapter gave the panic: the
/// line right after the last [`PANIC_LINE`], which the hook writes as the
/// process panics. A line the model printed earlier (or one not following
/// the hook's) says nothing (#54).
fn panic_kind(stderr: &str) -> Option<FailureKind> {
    let lines: Vec<&str> = stderr.lines().map(str::trim).collect();
    let hook = lines.iter().rposition(|l| l.starts_with(PANIC_LINE))?;
    let said = lines.get(hook + 1)?.strip_prefix(PANIC_KIND_LINE)?;
    serde_json::from_value(serde_json::Value::String(said.trim().to_string())).ok()
}

/// Whether the process ended as Rust's allocator ends it when an allocation
/// cannot be had: SIGABRT, right after its `memory allocation of N bytes
/// failed` on stderr, followed by nothing but the backtrace std prints
/// with it (`RUST_BACKTRACE`). Words elsewhere in the output ("out of
/// memory" printed by the model, or by a framework before a crash of
/// another kind) decide nothing (#54).
fn allocator_aborted(status: &std::process::ExitStatus, stderr: &str) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if status.signal() != Some(libc::SIGABRT) {
            return false;
        }
    }
    #[cfg(not(unix))]
    let _ = status;
    let backtrace = |l: &str| {
        l.is_empty()
            || l.starts_with("stack backtrace:")
            || l.starts_with("note: ")
            || l.starts_with("at ")
            || l.split_once(": ")
                .is_some_and(|(n, _)| n.chars().all(|c| c.is_ascii_digit()))
    };
    stderr
        .lines()
        .map(str::trim)
        .rfind(|l| !backtrace(l))
        .is_some_and(|l| l.starts_with("memory allocation of ") && l.ends_with(" failed"))
}

/// A one-line reason for a child that ended without a measurement, and
/// whether it ran out of memory.
fn describe_exit(status: &std::process::ExitStatus, stderr: &str) -> (String, bool) {
    let lines: Vec<&str> = stderr.lines().map(str::trim).collect();
    // A panic's message with its location is the hook's line; without the
    // hook (a harness of an older gate), the line after "panicked at";
    // otherwise the last line that is not a backtrace or a note.
    let hooked = lines.iter().rev().find_map(|l| l.strip_prefix(PANIC_LINE));
    let panic_message = lines
        .iter()
        .position(|l| l.contains("panicked at"))
        .and_then(|i| lines.get(i + 1))
        .copied();
    let detail = hooked
        .or(panic_message)
        .or_else(|| {
            lines
                .iter()
                .rev()
                .find(|l| {
                    !l.is_empty()
                        && !l.starts_with("note:")
                        && !l.starts_with("stack backtrace")
                        && !l.starts_with("at ")
                        && !l.chars().next().is_some_and(|c| c.is_ascii_digit())
                })
                .copied()
        })
        .unwrap_or("")
        .to_string();
    let how = exit_how(status);
    let oom = allocator_aborted(status, stderr);
    let mut s = if oom { format!("out of memory ({how})") } else { how };
    if !detail.is_empty() {
        s.push_str(": ");
        s.push_str(&detail);
    }
    (s, oom)
}

/// Whose fault a profile's abnormal end is: a crash on a signal other than
/// SIGKILL (the kernel's OOM killer sends that one: the model's), or, before
/// the first phase, exit 2 (it could not read its request or arguments),
/// exit 3 (gate's infrastructure code), or 126/127 (it could not be
/// executed), is the process's: no model ran yet.
fn exit_kind(status: &std::process::ExitStatus, last_phase: Phase) -> FailureKind {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if status.signal().is_some_and(|s| s != libc::SIGKILL) {
            return FailureKind::Process;
        }
    }
    if matches!(status.code(), Some(2 | 3 | 126 | 127)) && last_phase == Phase::Setup {
        return FailureKind::Process;
    }
    FailureKind::Model
}

#[cfg(unix)]
fn exit_how(status: &std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(c), _) => format!("the profile exited with status {c}"),
        (None, Some(libc::SIGKILL)) => format!("the profile was killed by SIGKILL ({})", libc::SIGKILL),
        (None, Some(sig)) => format!("{CRASHED}killed by {} ({sig})", signal_name(sig)),
        _ => "the profile ended abnormally".into(),
    }
}

/// The name of signal `sig` (`SIGSEGV`), or `signal N`.
#[cfg(unix)]
pub fn signal_name(sig: i32) -> String {
    let known = [
        (libc::SIGHUP, "SIGHUP"),
        (libc::SIGINT, "SIGINT"),
        (libc::SIGQUIT, "SIGQUIT"),
        (libc::SIGILL, "SIGILL"),
        (libc::SIGTRAP, "SIGTRAP"),
        (libc::SIGABRT, "SIGABRT"),
        (libc::SIGBUS, "SIGBUS"),
        (libc::SIGFPE, "SIGFPE"),
        (libc::SIGKILL, "SIGKILL"),
        (libc::SIGUSR1, "SIGUSR1"),
        (libc::SIGSEGV, "SIGSEGV"),
        (libc::SIGUSR2, "SIGUSR2"),
        (libc::SIGPIPE, "SIGPIPE"),
        (libc::SIGALRM, "SIGALRM"),
        (libc::SIGTERM, "SIGTERM"),
        (libc::SIGXCPU, "SIGXCPU"),
        (libc::SIGXFSZ, "SIGXFSZ"),
        (libc::SIGSYS, "SIGSYS"),
    ];
    known
        .iter()
        .find(|(n, _)| *n == sig)
        .map_or_else(|| format!("signal {sig}"), |(_, name)| name.to_string())
}

/// How a child ended, in words: `exit status 4`, `SIGSEGV (signal 11)`.
pub fn status_words(status: &std::process::ExitStatus) -> String {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(sig) = status.signal() {
            return format!("killed by {} (signal {sig})", signal_name(sig));
        }
    }
    match status.code() {
        Some(c) => format!("exit status {c}"),
        None => status.to_string(),
    }
}

#[cfg(not(unix))]
fn exit_how(status: &std::process::ExitStatus) -> String {
    format!("the profile ended with {status}")
}

#[cfg(test)]
mod tests {
    use super::{allocator_tunables, Tail};

    #[cfg(unix)]
    #[test]
    fn whose_fault_an_abnormal_end_is() {
        use super::{describe_exit, exit_kind, panic_kind, FailureKind, Phase, PANIC_KIND_LINE, PANIC_LINE};
        use std::os::unix::process::ExitStatusExt;
        let exited = |code: i32| std::process::ExitStatus::from_raw(code << 8);
        let signalled = std::process::ExitStatus::from_raw;
        assert_eq!(
            exit_kind(&signalled(libc::SIGSEGV), Phase::Forward),
            FailureKind::Process
        );
        // SIGKILL is the kernel's OOM killer: the model's.
        assert_eq!(exit_kind(&signalled(libc::SIGKILL), Phase::Forward), FailureKind::Model);
        assert_eq!(exit_kind(&exited(3), Phase::Setup), FailureKind::Process);
        assert_eq!(exit_kind(&exited(3), Phase::Forward), FailureKind::Model);
        // It could not read its request (a usage error) or be executed: no model ran (#43).
        for code in [2, 126, 127] {
            assert_eq!(exit_kind(&exited(code), Phase::Setup), FailureKind::Process);
        }
        assert_eq!(exit_kind(&exited(2), Phase::Build), FailureKind::Model);
        assert_eq!(exit_kind(&exited(1), Phase::Setup), FailureKind::Model);
        assert_eq!(exit_kind(&exited(101), Phase::Forward), FailureKind::Model);
        let (reason, oom) = describe_exit(&signalled(libc::SIGABRT), "memory allocation of 64 bytes failed\n");
        assert!(oom && reason.starts_with("out of memory"), "{reason}");
        // A panic's kind is the one its adapter said on the hook's line.
        let said =
            format!("{PANIC_LINE}DriverError(CUDA_ERROR_ILLEGAL_ADDRESS, ..) at a.rs:1:1\n{PANIC_KIND_LINE}device\n");
        assert_eq!(panic_kind(&said), Some(FailureKind::Device));
        assert_eq!(panic_kind(&format!("{PANIC_KIND_LINE}no_such_kind\n")), None);
        assert_eq!(panic_kind("thread 'main' panicked at a.rs:1:1"), None);
        // The model prints a kind line early; the hook's own, at the panic, wins.
        let forged = format!(
            "{PANIC_KIND_LINE}device\nstep 1\n{PANIC_LINE}index out of range at m.rs:3:1\n{PANIC_KIND_LINE}model\n"
        );
        assert_eq!(panic_kind(&forged), Some(FailureKind::Model));
        // A kind line not right after the hook's is no one's.
        assert_eq!(
            panic_kind(&format!("{PANIC_LINE}x at m.rs:1:1\nnoise\n{PANIC_KIND_LINE}device\n")),
            None
        );
        // Words decide nothing: "out of memory" printed before a SIGSEGV, or
        // the allocator's line not last, or not ended by SIGABRT.
        let (_, oom) = describe_exit(
            &signalled(libc::SIGSEGV),
            "CUDA out of memory\nmemory allocation of 64 bytes failed\n",
        );
        assert!(!oom);
        let (_, oom) = describe_exit(&exited(101), "out of memory\n");
        assert!(!oom);
        let (_, oom) = describe_exit(
            &signalled(libc::SIGABRT),
            "memory allocation of 64 bytes failed\nthen more\n",
        );
        assert!(!oom);
        // std's backtrace after the allocator's line changes nothing.
        let (_, oom) = describe_exit(
            &signalled(libc::SIGABRT),
            "memory allocation of 64 bytes failed\nstack backtrace:\n   0: std::alloc::rust_oom\n             at alloc.rs:1:5\nnote: Some details are omitted\n",
        );
        assert!(oom);
    }

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
        let event = super::ChildEvent::Phase {
            phase: super::Phase::Build,
            so_far: Box::default(),
        };
        let line = format!("\n{}\n", serde_json::to_string(&event).unwrap());
        let stdout = std::io::Read::chain(Endless(200 << 20), line.as_bytes());
        let mut phases = Vec::new();
        let ev = super::read_events(stdout, std::time::Instant::now(), &mut |p| phases.push(p));
        assert_eq!(phases, [super::Phase::Build]);
        assert_eq!(ev.strays, 1);
        assert_eq!(ev.first_stray.as_deref(), Some(""));
    }

    #[test]
    fn a_tail_keeps_the_last_bytes_from_a_whole_line_whatever_was_written() {
        let mut t = Tail::new(1024);
        // 64 MiB of warnings, then the error: memory stays at the cap.
        let warning = "warning: unused variable `x`\n".repeat(1000);
        for _ in 0..(64 << 20) / warning.len() {
            t.push(warning.as_bytes());
            assert!(t.len() <= 1024);
        }
        t.push(b"error: the last words\n");
        let text = t.text();
        assert!(text.ends_with("error: the last words\n"), "{text}");
        assert!(text.starts_with("warning: unused"), "{text}");
        assert!(text.len() <= 1024);
        let mut small = Tail::new(1024);
        small.push(b"all of it");
        assert_eq!(small.text(), "all of it");
    }

    #[cfg(unix)]
    #[test]
    fn signals_are_named() {
        assert_eq!(super::signal_name(libc::SIGSEGV), "SIGSEGV");
        assert_eq!(super::signal_name(libc::SIGBUS), "SIGBUS");
        assert_eq!(super::signal_name(libc::SIGILL), "SIGILL");
        assert_eq!(super::signal_name(libc::SIGABRT), "SIGABRT");
        assert_eq!(super::signal_name(64), "signal 64");
    }

    #[test]
    fn the_users_tunables_come_last_so_they_win() {
        let ours = allocator_tunables(None);
        assert!(ours.to_str().unwrap().starts_with("glibc.malloc.mmap_max=0:"));
        assert_eq!(allocator_tunables(Some("".into())), ours);
        let both = allocator_tunables(Some("glibc.malloc.mmap_max=65536".into()));
        let both = both.to_str().unwrap();
        assert!(both.starts_with(ours.to_str().unwrap()));
        assert!(both.ends_with(":glibc.malloc.mmap_max=65536"));
    }
}
