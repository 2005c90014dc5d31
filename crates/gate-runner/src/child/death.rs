//! How a child's end is read: the exit status or signal in words, whose
//! fault it was (the model's, out of memory, the process's), the panic's
//! kind its adapter said on stderr, and the tail of stderr a reason is
//! read from.

use std::path::Path;

use gate_contract::measurement::{FailureKind, Phase};

use super::events::Events;
use super::{PANIC_KIND_LINE, PANIC_LINE};

/// How the reason of a profile killed by a signal other than SIGKILL
/// begins (SIGKILL is what the kernel's OOM killer sends: the model's).
const CRASHED: &str = "the profile crashed: ";

/// How the reason of a profile that exited 0 without its `done` event begins.
const NO_MEASUREMENT: &str = "no measurement: ";

/// The reason of a profile that exited 0 without its measurement: the
/// program, and what its stdout held instead.
pub(super) fn no_measurement(exe: &Path, events: &Events) -> String {
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
pub(super) const STDERR_KEPT: usize = 64 * 1024;

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

/// The kind the harness's panic hook said its adapter gave the panic: the
/// line right after the last [`PANIC_LINE`], which the hook writes as the
/// process panics. A line the model printed earlier (or one not following
/// the hook's) says nothing (#54).
pub(super) fn panic_kind(stderr: &str) -> Option<FailureKind> {
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
pub(super) fn describe_exit(status: &std::process::ExitStatus, stderr: &str) -> (String, bool) {
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
pub(super) fn exit_kind(status: &std::process::ExitStatus, last_phase: Phase) -> FailureKind {
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
    use super::Tail;

    #[cfg(unix)]
    #[test]
    fn whose_fault_an_abnormal_end_is() {
        use super::super::{PANIC_KIND_LINE, PANIC_LINE};
        use super::{describe_exit, exit_kind, panic_kind, FailureKind, Phase};
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
}
