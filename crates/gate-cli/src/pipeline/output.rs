//! Writing output files atomically: a temp file in the same folder, then a
//! rename, so a killed run leaves the old file or the new one, never a torn one.
//! Everything the subcommands print (`print!`, `eprint!` and their `ln`
//! forms below) or write here has the token redacted first (#15,
//! pipeline/redact.rs); what they print is also made inert as workflow
//! commands in GitHub Actions (pipeline/actions.rs).
//!
//! The temp file is `.NAME.tmp.PID.RANDOM` (hidden, next to NAME, created
//! exclusively). A run killed
//! between writing it and the rename leaves it behind; the next write of
//! NAME in that folder removes those of processes that no longer run.
//!
//! Tests of the gate itself can kill the process inside a write:
//! `GATE_INJECT_WRITE_KILL=NAME:POINT` SIGKILLs it while writing the file
//! NAME, at POINT: `partial` (half the temp file written), `before_rename`
//! (temp file complete) or `after_rename` (NAME replaced, before the next file);
//! `full` does not kill but fails NAME's write as a full disk would (ENOSPC).

use std::io::Write;
use std::path::{Path, PathBuf};

use super::actions::Stream;
use super::redact::{redact_bytes, redacted, secret};

/// `print!` for the subcommands: std's panics (exit 101) when stdout is a
/// closed pipe (`gate check | head -1`); a reader that stops reading must
/// not change the verdict, so what it no longer reads is dropped.
macro_rules! print {
    ($($t:tt)*) => {
        $crate::pipeline::output::stdout(format_args!($($t)*))
    };
}

/// `println!` for the subcommands: see `print!`.
macro_rules! println {
    () => {
        $crate::pipeline::output::stdout(format_args!("\n"))
    };
    ($($t:tt)*) => {
        $crate::pipeline::output::stdout(format_args!("{}\n", format_args!($($t)*)))
    };
}

/// `eprint!` for the subcommands: std's, with the token redacted.
macro_rules! eprint {
    ($($t:tt)*) => {
        $crate::pipeline::output::stderr(format_args!($($t)*))
    };
}

/// `eprintln!` for the subcommands: see `eprint!`.
macro_rules! eprintln {
    () => {
        $crate::pipeline::output::stderr(format_args!("\n"))
    };
    ($($t:tt)*) => {
        $crate::pipeline::output::stderr(format_args!("{}\n", format_args!($($t)*)))
    };
}

/// Writes to stdout; a closed or broken pipe (or any other write error) is
/// ignored: data on stdout is for a reader, and the exit code is the verdict.
pub(crate) fn stdout(args: std::fmt::Arguments) {
    let mut out = std::io::stdout().lock();
    let text = shown(Stream::Out, &args.to_string());
    let _ = out.write_all(text.as_bytes()).and_then(|()| out.flush());
}

/// Writes to stderr, like `stdout`.
pub(crate) fn stderr(args: std::fmt::Arguments) {
    let mut err = std::io::stderr().lock();
    let text = shown(Stream::Err, &args.to_string());
    let _ = err.write_all(text.as_bytes()).and_then(|()| err.flush());
}

/// What text is printed as on `stream` (locked by the caller): the token
/// redacted and, in GitHub Actions, no line a workflow command
/// (pipeline/actions.rs).
fn shown(stream: Stream, text: &str) -> String {
    super::actions::inert_on(stream, &redacted(text))
}

/// Writes bytes to stdout; a reader that closed the pipe is not an error.
pub(crate) fn stdout_bytes(bytes: &[u8]) -> std::io::Result<()> {
    let bytes = redact_bytes(bytes, secret());
    let mut out = std::io::stdout().lock();
    super::actions::wrote(Stream::Out, &bytes);
    match out.write_all(&bytes).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => r,
    }
}

/// A child's stderr (cargo's, a harness's `__resolve`) passed on as gate's
/// own text (#43): the token redacted, every line made inert in Actions.
/// Lines go out whole as they end; one longer than [`RELAY_LINE_MAX`] goes
/// out in pieces that never split the token (what could be its start is
/// kept for the next piece). The rest goes out on `flush` or drop.
#[derive(Default)]
pub(crate) struct Relay {
    buf: Vec<u8>,
}

/// The longest piece of a child's stderr line held back before it is shown.
pub(crate) const RELAY_LINE_MAX: usize = 64 * 1024;

impl Relay {
    pub(crate) fn new() -> Relay {
        Relay { buf: Vec::new() }
    }

    fn emit(bytes: &[u8]) {
        if !bytes.is_empty() {
            stderr(format_args!("{}", String::from_utf8_lossy(bytes)));
        }
    }
}

impl Write for Relay {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(bytes);
        if let Some(end) = self.buf.iter().rposition(|&b| b == b'\n') {
            let rest = self.buf.split_off(end + 1);
            Relay::emit(&std::mem::replace(&mut self.buf, rest));
        }
        if self.buf.len() > RELAY_LINE_MAX {
            // Redacted whole, then all but a token's length less one: a
            // token that starts in what goes out ends there too.
            let mut held = redact_bytes(&self.buf, secret()).into_owned();
            let keep = secret().map_or(0, |s| s.len().saturating_sub(1)).min(held.len());
            let rest = held.split_off(held.len() - keep);
            Relay::emit(&held);
            self.buf = rest;
        }
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Relay::emit(&std::mem::take(&mut self.buf));
        Ok(())
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        let _ = self.flush();
    }
}

pub(crate) const WRITE_KILL_ENV: &str = "GATE_INJECT_WRITE_KILL";

pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = parent(path);
    std::fs::create_dir_all(dir)?;
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("out");
    let tmp = stage(dir, name, bytes)?;
    tmp.persist(path).map_err(|e| e.error)?;
    sync_dir(dir);
    if injected(name, "after_rename") {
        kill_self();
    }
    Ok(())
}

/// A set of output files (report.json, junit.xml, comment.md, …) that
/// replaces the old set as a whole: every file is first written to a temp
/// file, and only when all are written are they renamed into place, so a
/// full disk or a failed write leaves the old set untouched. The folder is
/// locked (`flock` on the folder itself) from the first temp file to the
/// last rename, so two runs on one `--out` write their sets one after the
/// other, never interleaved: the folder ends with one run's whole set.
/// A SIGKILL between two renames (a few microseconds) is the one case
/// that can leave a mix; each file is still whole.
pub(crate) struct OutputSet {
    dir: PathBuf,
    _lock: std::fs::File,
    staged: Vec<(String, tempfile::TempPath)>,
    removed: Vec<String>,
}

impl OutputSet {
    /// Creates `dir` if needed and waits for any other run writing there.
    pub(crate) fn begin(dir: &Path) -> std::io::Result<OutputSet> {
        std::fs::create_dir_all(dir)?;
        let lock = std::fs::File::open(dir)?;
        // std's lock is flock(2) on unix: released when the file closes.
        if let Err(std::fs::TryLockError::WouldBlock) = lock.try_lock() {
            eprintln!(
                "waiting for another gate run writing to {} (its set goes first)",
                dir.display()
            );
        }
        // Blocks until the other run's set is written (a signal may interrupt it).
        loop {
            match lock.lock() {
                Ok(()) => break,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
        Ok(OutputSet {
            dir: dir.to_path_buf(),
            _lock: lock,
            staged: Vec::new(),
            removed: Vec::new(),
        })
    }

    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// Writes NAME's new content to its temp file (not yet in place).
    pub(crate) fn add(&mut self, name: &str, bytes: &[u8]) -> std::io::Result<()> {
        let tmp = stage(&self.dir, name, bytes)?;
        self.staged.push((name.to_string(), tmp));
        Ok(())
    }

    /// NAME is not part of the new set: removed when the set is put in place.
    pub(crate) fn remove(&mut self, name: &str) {
        self.removed.push(name.to_string());
    }

    /// Puts every staged file in place. Dropped without this, the temp
    /// files are deleted and the old set stays as it was.
    pub(crate) fn commit(mut self) -> std::io::Result<()> {
        for (name, tmp) in std::mem::take(&mut self.staged) {
            let name: String = name;
            tmp.persist(self.dir.join(&name)).map_err(|e| e.error)?;
            if injected(&name, "after_rename") {
                kill_self();
            }
        }
        for name in &self.removed {
            let _ = std::fs::remove_file(self.dir.join(name));
        }
        sync_dir(&self.dir);
        Ok(())
    }
}

fn parent(path: &Path) -> &Path {
    path.parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

/// NAME's content in a fresh temp file `.NAME.tmp.PID.RANDOM` in `dir`:
/// created exclusively (O_EXCL, so never through a symlink or over a file
/// someone planted) under an unpredictable name, written and fsynced.
/// Deleted again if anything fails.
fn stage(dir: &Path, name: &str, bytes: &[u8]) -> std::io::Result<tempfile::TempPath> {
    let bytes = &*redact_bytes(bytes, secret());
    sweep_stale(dir, name);
    let mut f = tempfile::Builder::new()
        .prefix(&format!(".{name}.tmp.{}.", std::process::id()))
        .rand_bytes(12)
        .tempfile_in(dir)?;
    if injected(name, "full") {
        return Err(std::io::Error::from_raw_os_error(28)); // ENOSPC
    }
    if injected(name, "partial") {
        f.write_all(&bytes[..bytes.len() / 2])?;
        f.as_file().sync_all()?;
        kill_self();
    }
    f.write_all(bytes)?;
    f.as_file().sync_all()?;
    if injected(name, "before_rename") {
        kill_self();
    }
    Ok(f.into_temp_path())
}

/// Makes renames in `dir` durable (best effort: not every file system allows it).
fn sync_dir(dir: &Path) {
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
}

/// Appends `bytes` to a file someone else owns (GitHub's step summary),
/// atomically: the old content and the new part go to a temp file that
/// replaces the file, so a killed run leaves it as it was or with the whole
/// part added. Where no temp file can be made next to it, a single append.
pub(crate) fn append_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut all = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(e),
    };
    all.extend_from_slice(bytes);
    write_atomic(path, &all).or_else(|_| {
        let mut f = std::fs::OpenOptions::new().append(true).create(true).open(path)?;
        f.write_all(&redact_bytes(bytes, secret()))
    })
}

/// Removes `.NAME.tmp.PID.*` files in `dir` left by processes that are gone.
fn sweep_stale(dir: &Path, name: &str) {
    let prefix = format!(".{name}.tmp.");
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let file = e.file_name();
        // `.NAME.tmp.PID.RANDOM` (and `.NAME.tmp.PID` of older gates).
        let Some(pid) = file
            .to_str()
            .and_then(|f| f.strip_prefix(&prefix))
            .and_then(|p| p.split('.').next())
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if pid != std::process::id() && !alive(pid) {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

#[cfg(unix)]
fn alive(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: signal 0 only checks that the process exists.
    let r = unsafe { libc::kill(pid, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

#[cfg(not(unix))]
fn alive(_pid: u32) -> bool {
    true
}

fn injected(name: &str, point: &str) -> bool {
    std::env::var(WRITE_KILL_ENV).is_ok_and(|v| v.split_once(':') == Some((name, point)))
}

fn kill_self() {
    #[cfg(unix)]
    // SAFETY: kill(2) on our own pid.
    unsafe {
        libc::kill(libc::getpid(), libc::SIGKILL);
    }
    std::process::abort();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_the_file_and_leaves_no_temp_file() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("report.json");
        std::fs::write(&p, "old").unwrap();
        // A temp file of a process that is gone (pid beyond pid_max) is swept.
        let stale = t.path().join(".report.json.tmp.4294967295");
        std::fs::write(&stale, "torn").unwrap();
        write_atomic(&p, b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "new");
        let names: Vec<_> = std::fs::read_dir(t.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names, ["report.json"]);
    }

    #[test]
    fn the_token_is_redacted_from_bytes() {
        let t = Some("ghs_secret1");
        assert_eq!(&*redact_bytes(b"a ghs_secret1 b\xffghs_secret1", t), b"a *** b\xff***");
        assert_eq!(&*redact_bytes(b"ghs_secret", t), b"ghs_secret");
        assert_eq!(&*redact_bytes(b"abc", None), b"abc");
    }

    #[test]
    fn append_keeps_what_was_there() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("summary.md");
        append_atomic(&p, b"one\n").unwrap();
        append_atomic(&p, b"two\n").unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "one\ntwo\n");
    }
}
