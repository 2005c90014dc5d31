//! Workflow commands: in GitHub Actions the runner reads every line a step
//! prints, on stdout and on stderr, and acts on `::NAME props::data` (after
//! leading whitespace) and on `##[NAME props]data` (anywhere in the line).
//! See GitHub's "Workflow commands for GitHub Actions"
//! (<https://docs.github.com/en/actions/reference/workflow-commands-for-github-actions>,
//! "Stopping and starting workflow commands": `::stop-commands::TOKEN` …
//! `::TOKEN::`) and the runner's parser (actions/runner,
//! src/Runner.Common/ActionCommand.cs: `TryParseV2` trims, `TryParse` looks
//! for `##[` anywhere). A name from a spec, a report, a shard or the API
//! that carries a line break would otherwise start a command of its own.
//!
//! One rule for every line gate writes there, kept here:
//! - **Inert text.** Whatever passes `print!`/`eprint!` (pipeline/output.rs)
//!   goes through [`inert`]: a line the runner would parse as a command gets
//!   a `\` that stops it. This holds wherever the text is printed and
//!   whichever stream it is on, with no ordering to rely on.
//! - **A guard.** `::stop-commands::TOKEN` is gate's first line on stdout
//!   and `::TOKEN::` its last, also on `exit` from any thread (the Ctrl-C
//!   path's exit 130) and after a panic (`atexit`), so bytes gate does not
//!   write itself (a harness's or cargo's stderr) start no command either.
//!   TOKEN is 128 bits from the OS's random source: text written before the
//!   run cannot end the guard. The runner reads the two streams apart, so
//!   the guard covers the other stream only for what comes well after it
//!   (a child's output does); gate's own lines need no guard, being inert.
//! - **gate's own commands** (the annotations) go through [`commands`]: on
//!   the stream the guard is on, so the order is the written order:
//!   the guard is closed, each line is checked to be one command, and a new
//!   guard with a new token is opened.
//!
//! With `--message-format json` the guard and the commands are on stderr
//! ([`keep_stdout_for_data`]): stdout is JSON lines and nothing else.
//!
//! Outside Actions (`GITHUB_ACTIONS` is not `true`) nothing here changes a byte.
//!
//! Tests of gate itself can make a command panic with a message:
//! `GATE_INJECT_PANIC=TEXT` (tests/it/workflow_commands.rs).

use std::io::Write;
use std::sync::{Mutex, OnceLock};

/// See the module docs.
pub(crate) const PANIC_ENV: &str = "GATE_INJECT_PANIC";

/// The token of the guard open now, if one is.
static GUARD: Mutex<Option<String>> = Mutex::new(None);
/// Where each stream's current line stands: a line can be printed in
/// pieces (`print!` then `println!`), and the runner reads the whole line.
static STDOUT_LINE: Mutex<Line> = Mutex::new(Line::START);
static STDERR_LINE: Mutex<Line> = Mutex::new(Line::START);

/// Whether this process runs in GitHub Actions (read once).
pub(crate) fn active() -> bool {
    static ACTIVE: OnceLock<bool> = OnceLock::new();
    *ACTIVE.get_or_init(gate_github::context::in_actions)
}

/// The stream a piece of text goes to.
#[derive(Clone, Copy)]
pub(crate) enum Stream {
    Out,
    Err,
}

impl Stream {
    fn line(self) -> &'static Mutex<Line> {
        match self {
            Stream::Out => &STDOUT_LINE,
            Stream::Err => &STDERR_LINE,
        }
    }
}

/// What the part of a line already written means for the next piece.
#[derive(Clone, Copy, PartialEq, Debug)]
pub(crate) struct Line {
    /// Nothing but [`skipped`] characters so far (the runner's `TrimStart`
    /// would drop them) …
    blank: bool,
    /// … then one `:`.
    colon: bool,
    /// Trailing `#`s (at most 2).
    hashes: u8,
}

impl Line {
    const START: Line = Line {
        blank: true,
        colon: false,
        hashes: 0,
    };
}

/// `text` with every line that the runner would act on made inert: a `\`
/// before the `::` that starts it, and `##\[` for each `##[`. Lines end at
/// `\n` or `\r`, as the runner splits them. Other text is unchanged.
pub(crate) fn inert(text: &str) -> String {
    let mut line = Line::START;
    continue_line(&mut line, text)
}

/// Makes `text` inert when it goes to `stream` (in Actions), as the rest of
/// the line already written there: a command split over two prints is
/// stopped too. Call it with the stream locked, just before writing.
pub(crate) fn inert_on(stream: Stream, text: &str) -> String {
    if !active() {
        return text.to_string();
    }
    let mut line = stream.line().lock().unwrap_or_else(|e| e.into_inner());
    continue_line(&mut line, text)
}

/// Records bytes written to `stream` as they are (a file's content, a guard
/// line), for the next piece.
pub(crate) fn wrote(stream: Stream, bytes: &[u8]) {
    let mut line = stream.line().lock().unwrap_or_else(|e| e.into_inner());
    if bytes.is_empty() {
        return;
    }
    *line = if matches!(bytes.last(), Some(b'\n' | b'\r')) {
        Line::START
    } else {
        let hashes = bytes.len() - bytes.iter().rposition(|&b| b != b'#').map_or(0, |i| i + 1);
        Line {
            blank: false,
            colon: false,
            hashes: hashes.min(2) as u8,
        }
    };
}

fn continue_line(line: &mut Line, text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    for piece in text.split_inclusive(['\n', '\r']) {
        let body = piece.trim_end_matches(['\n', '\r']);
        let start = out.len();
        let mut rest = body;
        if line.blank && line.colon && rest.starts_with(':') {
            // `:` was written; this piece adds the second one.
            out.push('\\');
        } else if line.blank && !line.colon {
            let visible = rest.trim_start_matches(skipped);
            out.push_str(&rest[..rest.len() - visible.len()]);
            rest = visible;
            if rest.starts_with("::") {
                out.push('\\');
            }
        }
        if (line.hashes == 2 && rest.starts_with('[')) || (line.hashes == 1 && rest.starts_with("#[")) {
            // `##[` across the pieces.
            out.push('\\');
        }
        out.push_str(&rest.replace("##[", "##\\["));
        // Where the line now stands.
        let written = &out[start..];
        let visible = written.trim_start_matches(skipped);
        let trailing = written.len() - written.trim_end_matches('#').len();
        let hashes = if trailing == written.len() {
            (line.hashes as usize + trailing).min(2)
        } else {
            trailing.min(2)
        } as u8;
        *line = match (line.blank, line.colon) {
            (true, false) if visible.is_empty() => Line { hashes, ..*line },
            (true, false) if visible == ":" => Line {
                colon: true,
                hashes,
                ..*line
            },
            (true, true) if written.is_empty() => *line,
            _ => Line {
                blank: false,
                colon: false,
                hashes,
            },
        };
        out.push_str(&piece[body.len()..]);
        if body.len() < piece.len() {
            *line = Line::START;
        }
    }
    out
}

/// What the runner's `TrimStart` may drop before `::`: whitespace, and (to
/// be safe against its idea of whitespace differing from Rust's) control
/// and zero-width characters.
fn skipped(c: char) -> bool {
    (c.is_whitespace() || c.is_control() || matches!(c, '\u{180E}' | '\u{200B}'..='\u{200D}' | '\u{2060}' | '\u{FEFF}'))
        && c != '\n'
        && c != '\r'
}

/// Whether `line` (one line) is something the runner would act on.
pub(crate) fn is_command(line: &str) -> bool {
    let body = line.trim_start_matches(skipped);
    body.strip_prefix("::").is_some_and(|rest| rest.contains("::")) || line.contains("##[")
}

/// Opens the guard (in Actions): `::stop-commands::TOKEN` on stdout. Closed
/// by [`close`], which also runs at exit.
pub(crate) fn open() {
    if !active() {
        return;
    }
    close_at_exit();
    let mut guard = GUARD.lock().unwrap_or_else(|e| e.into_inner());
    if guard.is_some() {
        return;
    }
    let token = match token() {
        Ok(t) => t,
        Err(e) => {
            // Without an unguessable token a guard would be one a line of
            // input could end; text stays inert all the same.
            eprintln!("warning: no workflow-command guard: cannot read the OS's random source ({e})");
            return;
        }
    };
    write_stdout(&format!("::stop-commands::{token}\n"));
    *guard = Some(token);
}

/// Closes the guard, if one is open: `::TOKEN::` on stdout.
pub(crate) fn close() {
    let mut guard = GUARD.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(token) = guard.take() {
        write_stdout(&format!("::{token}::\n"));
    }
}

/// The commands gate issues: messages and log groups, never one that
/// changes the job (`add-mask`, `stop-commands`, `set-output`, …).
const OWN: [&str; 5] = ["error", "warning", "notice", "group", "endgroup"];

/// Writes gate's own workflow commands (one per line, data and properties
/// already escaped) where the runner acts on them: on stdout, outside the
/// guard, which is opened again after them with a new token. A line that
/// is not one of [`OWN`] (a `\r` in it, another command, no `::` start) is
/// written inert.
pub(crate) fn commands(text: &str) {
    if text.is_empty() {
        return;
    }
    let mut guard = GUARD.lock().unwrap_or_else(|e| e.into_inner());
    let mut out = String::new();
    if let Some(token) = guard.take() {
        out.push_str(&format!("::{token}::\n"));
    }
    for line in text.lines() {
        out.push_str(&own(line));
        out.push('\n');
    }
    if active() {
        if let Ok(token) = token() {
            out.push_str(&format!("::stop-commands::{token}\n"));
            *guard = Some(token);
        }
    }
    write_stdout(&super::redact::redacted(&out));
}

/// `line` as [`commands`] writes it: as it is when it is one of gate's
/// own commands, else inert.
fn own(line: &str) -> String {
    let name = line.strip_prefix("::").and_then(|l| l.split([' ', ':']).next());
    if name.is_some_and(|n| OWN.contains(&n)) && !line.contains('\r') && is_command(line) {
        line.to_string()
    } else {
        inert(&line.replace('\r', "%0D"))
    }
}

/// Whether the guard and gate's own commands go to stderr: with
/// `--message-format json` stdout is JSON lines and nothing else (#54).
static ON_STDERR: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Puts the guard and gate's own commands on stderr from now on, for a
/// command whose stdout is for a program (`--message-format json`). Call it
/// before [`open`]. The runner reads stderr for commands as it reads stdout,
/// and a child's output (which the guard is for) goes to stderr then too.
pub(crate) fn keep_stdout_for_data() {
    ON_STDERR.store(true, std::sync::atomic::Ordering::SeqCst);
}

/// Writes `lines` to the guard's stream (stdout, or stderr after
/// [`keep_stdout_for_data`]), starting on a line of their own, flushed.
fn write_stdout(lines: &str) {
    let stream = if ON_STDERR.load(std::sync::atomic::Ordering::SeqCst) {
        Stream::Err
    } else {
        Stream::Out
    };
    let at_start = *stream.line().lock().unwrap_or_else(|e| e.into_inner()) == Line::START;
    let newline = if at_start { "" } else { "\n" };
    let bytes = format!("{newline}{lines}");
    let _ = match stream {
        Stream::Out => {
            let mut out = std::io::stdout().lock();
            out.write_all(bytes.as_bytes()).and_then(|()| out.flush())
        }
        Stream::Err => {
            let mut err = std::io::stderr().lock();
            err.write_all(bytes.as_bytes()).and_then(|()| err.flush())
        }
    };
    wrote(stream, lines.as_bytes());
}

/// `gate-` and 32 hex digits: 128 bits from the OS's random source
/// (getrandom(2) where there is one, else /dev/urandom), never derived
/// from the time, the pid or the input.
fn token() -> std::io::Result<String> {
    let mut bytes = [0u8; 16];
    random(&mut bytes)?;
    Ok(format!(
        "gate-{}",
        bytes.iter().map(|b| format!("{b:02x}")).collect::<String>()
    ))
}

#[cfg(any(target_os = "linux", target_os = "android"))]
fn random(buf: &mut [u8]) -> std::io::Result<()> {
    let mut filled = 0;
    while filled < buf.len() {
        // SAFETY: getrandom(2) writes at most `len` bytes into the buffer we own.
        let n = unsafe { libc::getrandom(buf[filled..].as_mut_ptr().cast(), buf.len() - filled, 0) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        filled += n as usize;
    }
    Ok(())
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn random(buf: &mut [u8]) -> std::io::Result<()> {
    use std::io::Read;
    std::fs::File::open("/dev/urandom")?.read_exact(buf)
}

/// Registers [`close`] to run when the process exits by `exit` (returning
/// from main, `std::process::exit` from the signal thread, a panic that
/// ends main), and a panic hook that prints inert, once.
fn close_at_exit() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        #[cfg(unix)]
        {
            extern "C" fn at_exit() {
                // Nothing may unwind out of an atexit handler.
                let _ = std::panic::catch_unwind(close);
            }
            // SAFETY: atexit(3) with a handler that neither unwinds nor calls exit.
            unsafe {
                libc::atexit(at_exit);
            }
        }
        // A panic's message quotes whatever the panicking code had: written
        // inert, like every other line.
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !active() {
                return previous(info);
            }
            let thread = std::thread::current();
            let trace = std::backtrace::Backtrace::capture();
            let trace = match trace.status() {
                std::backtrace::BacktraceStatus::Captured => format!("stack backtrace:\n{trace}"),
                _ => "note: run with `RUST_BACKTRACE=1` for a backtrace\n".into(),
            };
            // As pipeline/output.rs prints to stderr: redacted, then inert.
            let text = format!("thread '{}' {info}\n{trace}", thread.name().unwrap_or("<unnamed>"));
            let mut err = std::io::stderr().lock();
            let text = inert_on(Stream::Err, &super::redact::redacted(&text));
            let _ = err.write_all(text.as_bytes()).and_then(|()| err.flush());
        }));
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_that_would_be_a_command_is_made_inert() {
        let hostile = "series `a\n::error file=budgets.yaml::INJECTED` \r  ::warning::x\n\u{feff}::set-output name=a::b\nok ##[error]y";
        let shown = inert(hostile);
        assert_eq!(
            shown,
            "series `a\n\\::error file=budgets.yaml::INJECTED` \r  \\::warning::x\n\u{feff}\\::set-output name=a::b\nok ##\\[error]y"
        );
        for line in shown.split(['\n', '\r']) {
            assert!(!is_command(line), "{line:?}");
        }
        // Text with nothing to stop is left alone, `::` inside a line too.
        assert_eq!(inert("a::b c\n d"), "a::b c\n d");
        assert!(is_command(" ::error::x") && is_command("x ##[group]y") && !is_command("a ::error::x"));
    }

    /// A command printed in pieces is stopped too: the runner reads lines.
    #[test]
    fn a_command_split_over_prints_is_made_inert() {
        for pieces in [
            &["  ", "::error::x\n"][..],
            &["a\n :", ":error::x"],
            &["a\n", ":", ":", "error::x"],
            &["x ##", "[error]y"],
            &["x #", "#", "[error]y"],
            &["x #", "#[error]y"],
            &["::", "error::x"],
            &["\u{feff}", " :", "", ":error::x"],
        ] {
            let mut line = Line::START;
            let shown: String = pieces.iter().map(|p| continue_line(&mut line, p)).collect();
            for l in shown.split(['\n', '\r']) {
                assert!(!is_command(l), "{pieces:?}: {l:?}");
            }
        }
        // A line with text before its `:` is no command, and left alone.
        let mut line = Line::START;
        let shown: String = ["a :", ":b::c"].iter().map(|p| continue_line(&mut line, p)).collect();
        assert_eq!(shown, "a ::b::c");
    }

    #[test]
    fn only_gates_own_kinds_of_command_pass_as_commands() {
        assert_eq!(own("::error file=a,line=1::x"), "::error file=a,line=1::x");
        assert_eq!(own("::warning title=gate::x"), "::warning title=gate::x");
        assert_eq!(own("::add-mask::x"), "\\::add-mask::x");
        assert_eq!(own("::stop-commands::t"), "\\::stop-commands::t");
        assert_eq!(
            own("::error::a\r::add-mask::b"),
            "::error::a%0D::add-mask::b".replace("::error", "\\::error")
        );
        assert_eq!(own("x ##[error]y"), "x ##\\[error]y");
    }

    #[test]
    fn tokens_are_random_and_long() {
        let (a, b) = (token().unwrap(), token().unwrap());
        assert_ne!(a, b);
        assert_eq!(a.len(), "gate-".len() + 32);
        assert!(a[5..].chars().all(|c| c.is_ascii_hexdigit()), "{a}");
    }
}
