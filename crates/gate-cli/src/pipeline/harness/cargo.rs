//! Building a spec's harness with cargo: its manifest found and held to
//! the spec's repository, the build serialised per target folder, the
//! framework versions checked from `cargo metadata`, cargo's output relayed
//! while only its end is kept, and the built binary found in its messages.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use gate_probe::Backend;
use gate_runner::child::{spawn_helper, status_words, Tail};
use gate_spec::budget::{HarnessSpec, Spec};
use gate_spec::hint::Problem;

use super::HarnessArgs;
use crate::errors::CliError;

/// The manifest the harness is built from: `manifest:` relative to the
/// spec, else the Cargo.toml beside the spec. It must exist, and lie in the
/// spec's repository (the git checkout the spec is in, else the spec's
/// folder) unless `--allow-outside-manifest`: gate builds that crate and
/// runs its build scripts and its harness.
pub(super) fn manifest(spec: &Spec, h: &HarnessSpec, opts: &HarnessArgs) -> Result<PathBuf, CliError> {
    let dir = spec
        .path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let manifest = dir.join(h.manifest.as_deref().unwrap_or(Path::new("Cargo.toml")));
    let at = match h.manifest_pos {
        Some(p) => format!("{}:{}:{}", spec.path.display(), p.line, p.col),
        None => format!("{}:{}", spec.path.display(), h.line),
    };
    if !manifest.is_file() {
        return Err(CliError::Usage(
            Problem::new(format!(
                "{at}: `harness:` builds from {}, which does not exist",
                manifest.display()
            ))
            .with_hint(
                "put budgets.yaml beside the workspace's Cargo.toml, or set `harness.manifest: path/to/Cargo.toml`",
            ),
        ));
    }
    if opts.allow_outside_manifest {
        return Ok(manifest);
    }
    let (Ok(real), Ok(dir)) = (manifest.canonicalize(), dir.canonicalize()) else {
        return Ok(manifest);
    };
    let root = repository_root(&dir);
    if real.starts_with(&root) {
        return Ok(manifest);
    }
    Err(CliError::Usage(
        Problem::new(format!(
            "{at}: `harness:` builds from {}, outside the spec's repository {}: gate would build and run code from there",
            real.display(),
            root.display()
        ))
        .with_hint(
            "keep the harness's crate in the spec's repository, or pass `--allow-outside-manifest` if you trust \
             that crate",
        ),
    ))
}

/// The git checkout `dir` is in (the nearest folder above it with a
/// `.git`), else `dir` itself.
fn repository_root(dir: &Path) -> PathBuf {
    dir.ancestors()
        .find(|d| d.join(".git").exists())
        .unwrap_or(dir)
        .to_path_buf()
}

/// `cargo build --release` of the harness (incremental: a second build with
/// nothing changed costs a second); returns the binary's path, when
/// `cargo metadata` said, the framework of the harness's adapter and its
/// exact version as the build resolved it, and the
/// build folder's harness lock (see [`lock_harness_builds`]), to be held
/// until the binary is copied.
pub(super) fn build(
    spec: &Spec,
    manifest: &Path,
    h: &HarnessSpec,
    backend: Option<Backend>,
) -> Result<
    (
        PathBuf,
        Option<gate_contract::protocol::FrameworkId>,
        Option<std::fs::File>,
    ),
    CliError,
> {
    let (framework, target_dir, limits) = check_versions(manifest, h)?;
    // What the adapter cannot run is refused before cargo builds anything.
    crate::pipeline::adapters::refuse(spec, backend, &limits)?;
    let lock = target_dir.as_deref().and_then(lock_harness_builds);
    let mut features = h.features.clone();
    if backend == Some(Backend::Cuda) && !features.iter().any(|f| f == "cuda") {
        features.push("cuda".into());
    }
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = gate_runner::child::command(&cargo);
    cmd.args(["build", "--release", "--message-format=json-render-diagnostics"])
        .arg("--manifest-path")
        .arg(manifest)
        .args(["-p", &h.package, "--bin", &h.bin]);
    if !features.is_empty() {
        cmd.arg("--features").arg(features.join(","));
    }
    eprintln!(
        "building the harness `{}` of `{}` ({}{})",
        h.bin,
        h.package,
        manifest.display(),
        if features.is_empty() {
            String::new()
        } else {
            format!(", features {}", features.join(","))
        }
    );
    let (status, exe, said_error) = run_cargo(cmd, Path::new(&cargo), &h.bin)?;
    if !status.success() {
        // cargo's errors went to stderr as they came: said once, not quoted again.
        return Err(CliError::Infrastructure(
            Problem::new(format!(
                "the harness `{}` of `{}` does not build: cargo ended: {}{}",
                h.bin,
                h.package,
                status_words(&status),
                if said_error { " (its errors are above)" } else { "" }
            ))
            .with_hint(format!(
                "fix the error above (`cargo build --release -p {} --bin {}` shows them all)",
                h.package, h.bin
            )),
        ));
    }
    let exe = exe.ok_or_else(|| {
        CliError::Infrastructure(
            Problem::new(format!("cargo built `{}` but did not say where the binary is", h.bin))
                .with_hint("check that `bin:` names a binary target, not a library or an example"),
        )
    })?;
    Ok((exe, framework, lock))
}

/// The lock file in a build folder that gate holds from a harness's build
/// until its private copy is made: cargo writes every package's binary of
/// one name (`gate-harness`) to the same path in the folder, and another
/// crate's build finishing in between would hand this run that crate's
/// harness (seen: two crates gated at once over one target folder). Every
/// gate building there takes turns; `.ci/run`'s prebuilds take it too.
pub(crate) const HARNESS_BUILD_LOCK: &str = ".gate-harness-build.lock";

/// Takes the lock of `target_dir`'s harness builds, waiting for another
/// gate's turn (said on stderr); `None` where the lock cannot be had (the
/// build goes on unguarded, as before).
fn lock_harness_builds(target_dir: &Path) -> Option<std::fs::File> {
    std::fs::create_dir_all(target_dir).ok()?;
    let path = target_dir.join(HARNESS_BUILD_LOCK);
    let mut options = std::fs::File::options();
    options.read(true).write(true).create(true).truncate(false);
    // Never through a symbolic link planted at the lock's path: it would
    // make gate create (or open) the file it points to (#54).
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NOFOLLOW);
    }
    let file = match options.open(&path) {
        Ok(f) => f,
        Err(e) => {
            let link = std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_symlink());
            if link {
                eprintln!(
                    "warning: {} is a symbolic link, not followed: the harness builds there go on without \
                     their lock (remove it)",
                    path.display()
                );
            } else {
                let _ = e;
            }
            return None;
        }
    };
    if let Err(std::fs::TryLockError::WouldBlock) = file.try_lock() {
        eprintln!(
            "waiting for another harness build in {} to finish (its binary shares the path)",
            target_dir.display()
        );
        file.lock().ok()?;
    }
    Some(file)
}

/// Says, before cargo's errors, when the harness would link two versions
/// of its framework (see `versions`, read from what the adapter declares).
/// Quiet when `cargo metadata` cannot answer: the build that follows
/// reports that itself. Else gives the framework gate's adapter resolved
/// to, its version exactly (a git revision's commit included), which the
/// harness itself may know only by its minor.
#[allow(clippy::type_complexity)]
fn check_versions(
    manifest: &Path,
    h: &HarnessSpec,
) -> Result<
    (
        Option<gate_contract::protocol::FrameworkId>,
        Option<PathBuf>,
        Vec<crate::pipeline::adapters::Limits>,
    ),
    CliError,
> {
    let Ok(stdout) = cargo_metadata(manifest, &[], true)? else {
        return Ok((None, None, Vec::new()));
    };
    let Ok(metadata) = serde_json::from_slice::<serde_json::Value>(&stdout) else {
        return Ok((None, None, Vec::new()));
    };
    let target_dir = metadata["target_directory"].as_str().map(PathBuf::from);
    let limits = crate::pipeline::adapters::limits(&metadata, &h.package);
    match crate::pipeline::versions::mismatch(&metadata) {
        Some(m) => Err(CliError::Usage(Problem::new(m.message(&h.package)).with_hint(m.hint()))),
        None => Ok((
            crate::pipeline::versions::resolved_framework(&metadata),
            target_dir,
            limits,
        )),
    }
}

/// `cargo metadata --format-version 1 EXTRA --manifest-path MANIFEST`, as
/// every command of gate runs it: through the one command builder, its
/// stderr passed on (redacted) as it comes, so what it waits for and why
/// it failed are shown, and stopped past [`metadata_limit`] (exit 3, with
/// cargo's last word). Its stdout when it succeeded; else what it said on
/// stderr (empty when it could not start). `relay: false` keeps its stderr
/// for the caller to show instead of passing it on.
pub(crate) fn cargo_metadata(
    manifest: &Path,
    extra: &[&str],
    relay: bool,
) -> Result<Result<Vec<u8>, String>, CliError> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = gate_runner::child::command(&cargo);
    cmd.args(["metadata", "--format-version", "1"])
        .args(extra)
        .arg("--manifest-path")
        .arg(manifest)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut helper = match spawn_helper(&mut cmd) {
        Ok(h) => h,
        Err(e) => return Ok(Err(format!("cannot start {}: {e}", Path::new(&cargo).display()))),
    };
    // What cargo says is passed on: a held lock is "Blocking waiting for
    // file lock on ...", said while it waits (issue #43 item 13).
    let (echo, answer) = relay_and_keep(&mut helper, u64::MAX, relay);
    let limit = metadata_limit()?;
    let status = helper.wait_within(limit);
    let stdout = answer.and_then(|t| t.join().ok()).unwrap_or_default();
    let said = echo
        .and_then(|t| t.join().ok())
        .map(|tail| tail.text())
        .unwrap_or_default();
    match status {
        Ok(Some(s)) if s.success() => Ok(Ok(stdout)),
        Ok(None) => {
            let last = said
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("nothing")
                .trim();
            Err(CliError::Infrastructure(
                Problem::new(format!(
                    "`cargo metadata --manifest-path {}` did not finish in {} s and was stopped (cargo's last word: {last})",
                    manifest.display(),
                    limit.as_secs()
                ))
                .with_hint(format!(
                    "another cargo may hold the lock of the package cache or of the build folder: let it finish, \
                     or give cargo longer with {METADATA_LIMIT_ENV}=SECONDS"
                )),
            ))
        }
        _ => Ok(Err(said)),
    }
}

/// A helper's stderr passed on as it comes (or, `relay: false`, only kept) (its tail kept), and its stdout
/// kept up to `limit` bytes; past that it is drained, so the helper is
/// never blocked on a full pipe. Each on a thread of its own, joined by
/// the caller after it waited for the helper.
#[allow(clippy::type_complexity)]
pub(super) fn relay_and_keep(
    helper: &mut gate_runner::child::Helper,
    limit: u64,
    relay: bool,
) -> (
    Option<std::thread::JoinHandle<Tail>>,
    Option<std::thread::JoinHandle<Vec<u8>>>,
) {
    let echo = helper.child().stderr.take().map(|pipe| {
        std::thread::spawn(move || match relay {
            true => pump(pipe, &mut crate::pipeline::output::Relay::new()),
            false => pump(pipe, &mut std::io::sink()),
        })
    });
    let kept = helper.child().stdout.take().map(|mut pipe| {
        std::thread::spawn(move || {
            let mut kept = Vec::new();
            let _ = (&mut pipe).take(limit).read_to_end(&mut kept);
            let _ = std::io::copy(&mut pipe, &mut std::io::sink());
            kept
        })
    });
    (echo, kept)
}

/// How long `cargo metadata` may take (seconds; a cold registry index is fetched).
const METADATA_LIMIT_ENV: &str = "GATE_CARGO_METADATA_TIMEOUT_S";

const METADATA_LIMIT: std::time::Duration = std::time::Duration::from_secs(300);

/// [`METADATA_LIMIT`], or the whole seconds of [`METADATA_LIMIT_ENV`] (1 or more).
fn metadata_limit() -> Result<std::time::Duration, CliError> {
    match std::env::var(METADATA_LIMIT_ENV) {
        Ok(v) if !v.trim().is_empty() => match v.trim().parse::<u64>() {
            Ok(s) if s > 0 => Ok(std::time::Duration::from_secs(s)),
            _ => Err(CliError::Usage(
                Problem::new(format!(
                    "{METADATA_LIMIT_ENV}={v:?} is not a whole number of seconds above 0"
                ))
                .with_hint(format!(
                    "e.g. {METADATA_LIMIT_ENV}=600; unset, it is {}",
                    METADATA_LIMIT.as_secs()
                )),
            )),
        },
        _ => Ok(METADATA_LIMIT),
    }
}

/// Runs the cargo build `cmd`: its exit status, the path of binary `bin`
/// if cargo built it, and whether cargo printed an error. stdout carries
/// cargo's JSON messages, read as they come; stderr its progress and the
/// rendered compiler errors: passed through as they come (a cold build
/// takes minutes), only a bounded tail kept (a build can print hundreds of
/// MiB of warnings).
fn run_cargo(
    mut cmd: Command,
    cargo: &Path,
    bin: &str,
) -> Result<(std::process::ExitStatus, Option<PathBuf>, bool), CliError> {
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut helper = spawn_helper(&mut cmd).map_err(|e| {
        CliError::Infrastructure(
            Problem::new(format!(
                "cannot run cargo ({}) to build the harness: {e}",
                cargo.display()
            ))
            .with_hint("install a Rust toolchain (rustup.rs), or set CARGO to the cargo binary"),
        )
    })?;
    let err_pipe = helper.child().stderr.take().expect("stderr is piped");
    let echo = std::thread::spawn(move || pump(err_pipe, &mut crate::pipeline::output::Relay::new()));
    let mut exe = None;
    if let Some(pipe) = helper.child().stdout.take() {
        use std::io::BufRead;
        for line in std::io::BufReader::new(pipe).lines().map_while(Result::ok) {
            if let Some(e) = executable(&line, bin) {
                exe = Some(e);
            }
        }
    }
    let status = helper.wait().map_err(|e| {
        CliError::Infrastructure(Problem::new(format!("cargo did not finish building the harness: {e}")))
    })?;
    let tail = echo.join().map(|t| t.text()).unwrap_or_default();
    let said_error = tail.lines().any(|l| l.starts_with("error"));
    Ok((status, exe, said_error))
}

/// How much of cargo's stderr is kept (its end: where its errors are).
const CARGO_STDERR_KEPT: usize = 64 * 1024;

/// Copies `from` to `to` as it comes (on gate's stderr: a [`Relay`](crate::pipeline::output::Relay),
/// which redacts it as gate's own text); returns the last bytes.
fn pump(mut from: impl Read, to: &mut impl Write) -> Tail {
    let mut tail = Tail::new(CARGO_STDERR_KEPT);
    let mut buf = [0u8; 8192];
    loop {
        match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                let _ = to.write_all(&buf[..n]);
                tail.push(&buf[..n]);
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    let _ = to.flush();
    tail
}

/// The path of binary `bin` among cargo's `compiler-artifact` messages.
fn executable(messages: &str, bin: &str) -> Option<PathBuf> {
    messages
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|m| m["reason"] == "compiler-artifact" && m["target"]["name"] == bin)
        .filter_map(|m| m["executable"].as_str().map(PathBuf::from))
        .next_back()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cargos_stderr_goes_through_whole_and_only_its_end_is_kept() {
        // 200 MiB of warnings, then the error, produced without holding them.
        struct Warnings(usize);
        impl Read for Warnings {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                let line = b"warning: unused variable\n";
                if self.0 == 0 {
                    return Ok(0);
                }
                self.0 -= 1;
                let n = line.len().min(buf.len());
                buf[..n].copy_from_slice(&line[..n]);
                Ok(n)
            }
        }
        struct Count(usize);
        impl Write for Count {
            fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
                self.0 += b.len();
                Ok(b.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let lines = (200 << 20) / 25;
        let source = Warnings(lines).chain(&b"error: could not compile `ml`\n"[..]);
        let mut seen = Count(0);
        let tail = pump(source, &mut seen);
        assert_eq!(seen.0, lines * 25 + 30);
        assert!(tail.len() <= CARGO_STDERR_KEPT);
        assert!(tail.text().ends_with("error: could not compile `ml`\n"));
    }

    #[test]
    fn finds_the_binary_in_cargo_messages() {
        let msgs = r#"{"reason":"compiler-artifact","target":{"name":"ml"},"executable":null}
{"reason":"compiler-artifact","target":{"name":"gate-harness"},"executable":"/w/target/release/gate-harness"}
{"reason":"build-finished","success":true}"#;
        assert_eq!(
            executable(msgs, "gate-harness"),
            Some(PathBuf::from("/w/target/release/gate-harness"))
        );
        assert_eq!(executable(msgs, "other"), None);
    }
}
