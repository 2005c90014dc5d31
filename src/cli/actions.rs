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
//! - **Inert text.** Whatever passes `print!`/`eprint!` (cli/output.rs)
//!   goes through [`inert`]: a line the runner would parse as a command gets
//!   a `\` that stops it. This holds wherever the text is printed and
//!   whichever stream it is on, with no ordering to rely on.
//! - **A guard.** `::stop-commands::TOKEN` is gate's first line on stdout
//!   and `::TOKEN::` its last, also on `exit` from any thread (the Ctrl-C
//!   path's exit 130) and after a panic (`atexit`), so bytes gate does not
//!   write itself (a harness's or cargo's stderr) start no command either.
//!   TOKEN is 128 bits from the OS's random source: text written before the
//!   run cannot end the guard.
//! - **gate's own commands** (the annotations) go through [`commands`]: on
//!   stdout, the stream the guard is on, so the order is the written order:
//!   the guard is closed, each line is checked to be one command, and a new
//!   guard with a new token is opened.
//!
//! Outside Actions (`GITHUB_ACTIONS` is not `true`) nothing here changes a byte.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};

/// The token of the guard open now, if one is.
static GUARD: Mutex<Option<String>> = Mutex::new(None);
/// Whether the last byte gate wrote to stdout ended a line (a guard line
/// glued to the end of another would not be read as a command).
static STDOUT_AT_LINE_START: AtomicBool = AtomicBool::new(true);

/// Whether this process runs in GitHub Actions (read once).
pub fn active() -> bool {
    static ACTIVE: OnceLock<bool> = OnceLock::new();
    *ACTIVE.get_or_init(crate::github::context::in_actions)
}

/// `text` with every line that the runner would act on made inert: a `\`
/// before the `::` that starts it, and `##\[` for each `##[`. Lines end at
/// `\n` or `\r`, as the runner splits them. Other text is unchanged.
pub fn inert(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.contains("::") && !text.contains("##[") {
        return text.into();
    }
    let mut out = String::with_capacity(text.len() + 8);
    for line in text.split_inclusive(['\n', '\r']) {
        let body = line.trim_start_matches(skipped);
        let lead = &line[..line.len() - body.len()];
        out.push_str(lead);
        if body.starts_with("::") {
            out.push('\\');
        }
        out.push_str(&body.replace("##[", "##\\["));
    }
    out.into()
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
pub fn is_command(line: &str) -> bool {
    let body = line.trim_start_matches(skipped);
    body.strip_prefix("::").is_some_and(|rest| rest.contains("::")) || line.contains("##[")
}

/// Records what was written to stdout (for the line-start check).
pub(super) fn wrote_stdout(text: &[u8]) {
    if let Some(&last) = text.last() {
        STDOUT_AT_LINE_START.store(last == b'\n', Ordering::SeqCst);
    }
}

/// Opens the guard (in Actions): `::stop-commands::TOKEN` on stdout. Closed
/// by [`close`], which also runs at exit.
pub fn open() {
    if !active() {
        return;
    }
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
    close_at_exit();
    write_stdout(&format!("::stop-commands::{token}\n"));
    *guard = Some(token);
}

/// Closes the guard, if one is open: `::TOKEN::` on stdout.
pub fn close() {
    let mut guard = GUARD.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(token) = guard.take() {
        write_stdout(&format!("::{token}::\n"));
    }
}

/// Writes gate's own workflow commands (one per line, data and properties
/// already escaped) where the runner acts on them: on stdout, outside the
/// guard, which is opened again after them with a new token. A line that
/// is not one command (a `\r` in it, or no `::` start) is written inert.
pub fn commands(text: &str) {
    if text.is_empty() {
        return;
    }
    let mut guard = GUARD.lock().unwrap_or_else(|e| e.into_inner());
    let mut out = String::new();
    if let Some(token) = guard.take() {
        out.push_str(&format!("::{token}::\n"));
    }
    for line in text.lines() {
        if line.starts_with("::") && !line.contains('\r') && is_command(line) {
            out.push_str(line);
        } else {
            out.push_str(&inert(&line.replace('\r', "%0D")));
        }
        out.push('\n');
    }
    if active() {
        if let Ok(token) = token() {
            out.push_str(&format!("::stop-commands::{token}\n"));
            *guard = Some(token);
        }
    }
    write_stdout(&super::output::redacted(&out));
}

/// Writes `line` to stdout on a line of its own, flushed.
fn write_stdout(line: &str) {
    let mut out = std::io::stdout().lock();
    let newline = if STDOUT_AT_LINE_START.load(Ordering::SeqCst) {
        ""
    } else {
        "\n"
    };
    let _ = out
        .write_all(format!("{newline}{line}").as_bytes())
        .and_then(|()| out.flush());
    wrote_stdout(line.as_bytes());
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
/// ends main), once.
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
            super::output::stderr(format_args!(
                "thread '{}' {info}\n{trace}",
                thread.name().unwrap_or("<unnamed>")
            ));
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

    #[test]
    fn tokens_are_random_and_long() {
        let (a, b) = (token().unwrap(), token().unwrap());
        assert_ne!(a, b);
        assert_eq!(a.len(), "gate-".len() + 32);
        assert!(a[5..].chars().all(|c| c.is_ascii_hexdigit()), "{a}");
    }
}
