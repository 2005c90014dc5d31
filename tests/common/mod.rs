//! What the integration tests share: the built `gate` with a clean
//! environment. A test run inside GitHub Actions (gate's own CI) must not
//! hand the binary the job's GitHub context: with `--baseline auto` (the
//! default) it would look for a baseline on GitHub, and with
//! `GITHUB_STEP_SUMMARY` it would write into the job's summary.
#![allow(dead_code)] // each test crate uses a part of it

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

/// The `gate` binary cargo built beside these tests (crates/gate-cli's, a
/// default member: the root's `cargo test` builds it, as its own
/// integration tests need it). Refused when missing, or older than a
/// source of gate's: a `cargo test --test it` alone does not rebuild it.
pub(crate) fn gate_exe() -> &'static Path {
    static EXE: OnceLock<PathBuf> = OnceLock::new();
    EXE.get_or_init(|| {
        let test = std::env::current_exe().expect("the test binary's path");
        // <target>/<profile>/deps/<test> → <target>/<profile>/gate
        let exe = test
            .parent()
            .and_then(Path::parent)
            .expect("a test binary under <target>/<profile>/deps")
            .join(format!("gate{}", std::env::consts::EXE_SUFFIX));
        let built = std::fs::metadata(&exe).and_then(|m| m.modified()).unwrap_or_else(|_| {
            panic!(
                "{} is not built: run `cargo test` at the workspace root (it builds crates/gate-cli), or \
                 `cargo build -p gate-cli` before these tests",
                exe.display()
            )
        });
        let root = Path::new(env!("GATE_REPO_ROOT"));
        let newer = newest_source(&[root.join("crates")]).filter(|(t, _)| *t > built);
        if let Some((_, path)) = newer {
            panic!(
                "{} is older than {}: rebuild it (`cargo test` at the workspace root, or `cargo build -p gate-cli`)",
                exe.display(),
                path.display()
            );
        }
        exe
    })
}

/// The newest `.rs` or `Cargo.toml` under `dirs` (a build's own output excluded).
fn newest_source(dirs: &[PathBuf]) -> Option<(std::time::SystemTime, PathBuf)> {
    let mut newest: Option<(std::time::SystemTime, PathBuf)> = None;
    let mut stack: Vec<PathBuf> = dirs.to_vec();
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for e in entries.flatten() {
            let path = e.path();
            let Ok(kind) = e.file_type() else { continue };
            if kind.is_dir() {
                if e.file_name() != "target" && e.file_name() != "tests" && e.file_name() != "benches" {
                    stack.push(path);
                }
            } else if path.extension().is_some_and(|x| x == "rs") || e.file_name() == "Cargo.toml" {
                if let Ok(t) = e.metadata().and_then(|m| m.modified()) {
                    if newest.as_ref().is_none_or(|(n, _)| t > *n) {
                        newest = Some((t, path));
                    }
                }
            }
        }
    }
    newest
}

/// The built `gate`, started in the repository's root (cargo starts the
/// tests in their package's folder, tests/; a test that needs another
/// folder says so with its own `current_dir`): no `GITHUB_*` or `RUNNER_*`
/// variables, no injected fault, no colour. Tests that rehearse Actions set
/// what they need.
pub(crate) fn gate() -> Command {
    let mut cmd = Command::new(gate_exe());
    cmd.current_dir(env!("GATE_REPO_ROOT"));
    for (k, _) in std::env::vars_os() {
        let k = k.to_string_lossy();
        if k.starts_with("GITHUB_") || k.starts_with("RUNNER_") || k.starts_with("GATE_") || k == "CI" {
            cmd.env_remove(&*k);
        }
    }
    without_ci_lints(&mut cmd);
    cmd.env("NO_COLOR", "1");
    cmd
}

/// `cargo`, as a test starts it to build an adopter's crate: the crate is
/// built as its team builds it, without `.ci/run`'s lint wrapper.
pub(crate) fn cargo() -> Command {
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    without_ci_lints(&mut cmd);
    cmd.env_remove("CARGO_BUILD_TARGET");
    cmd
}

/// `.ci/run` lints while it builds the tests (clippy-driver as the
/// workspace's rustc wrapper, with `CLIPPY_ARGS`), so that the dependencies
/// are compiled once. A cargo that a test starts, directly or through
/// `gate`'s harness build, would inherit both and lint the adopter's crate
/// too: they stop here.
fn without_ci_lints(cmd: &mut Command) {
    cmd.env_remove("RUSTC_WORKSPACE_WRAPPER").env_remove("CLIPPY_ARGS");
}

/// Output bytes as text.
pub(crate) fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A finished command's stdout, then stderr, as text (for messages and searches).
pub(crate) fn output_text(o: &Output) -> String {
    format!("{}\n{}", text(&o.stdout), text(&o.stderr))
}

/// Writes `text` to `path` as an executable script (mode 755), through a
/// child process rather than this one. A file this multi-threaded process
/// held open for writing is inherited, still open, by a child that another
/// test thread forks at that moment, until that child execs; running the
/// script then fails with ETXTBSY, "Text file busy" (rust-lang/rust#114554).
/// Seen once in a whole `.ci/run`: a fake `gh` that "did not run".
/// (`copy_executable` does the same for a copy of a program.)
pub(crate) fn write_executable(path: &Path, text: &str) {
    use std::io::Write;
    let mut child = Command::new("sh")
        .args(["-c", "cat > \"$1\" && chmod 755 \"$1\"", "sh"])
        .arg(path)
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    assert!(child.wait().unwrap().success(), "could not write {}", path.display());
}

/// Copies the program `from` to `to`, mode 755, through a child process,
/// for the reason `write_executable` gives.
pub(crate) fn copy_executable(from: &Path, to: &Path) {
    let ok = Command::new("install")
        .args(["-m", "755"])
        .arg(from)
        .arg(to)
        .status()
        .unwrap();
    assert!(ok.success(), "could not copy {} to {}", from.display(), to.display());
}

/// Copies the folder `from` to `to`, leaving out `target` folders: an
/// adopter crate as a team would check it out.
pub(crate) fn copy_crate(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_name() == "target" {
            continue;
        }
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_crate(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), dest).unwrap();
        }
    }
}

/// A fixture crate's copy at a fixed place, `target/fixture-copies/NAME`,
/// brought back to the fixture's files at each use rather than made anew.
/// A file whose bytes are unchanged keeps its time, so cargo reuses the
/// last test's build of the copy, where a fresh folder is a new package to
/// cargo and compiled again (about 9 s of wall time per adopter test on 2
/// cores, measured 2026-12-04). What a test changed (a spec, a source, its
/// outputs) is put back or removed by the next one. One test at a time
/// holds a copy: the lock file keeps two `cargo test` runs apart too.
pub(crate) struct CrateCopy {
    dir: std::path::PathBuf,
    _lock: std::fs::File,
}

impl CrateCopy {
    /// The copy's folder.
    pub(crate) fn path(&self) -> &std::path::Path {
        &self.dir
    }
}

/// The copy of `from` named `name` (see [`CrateCopy`]), each file's bytes
/// passed through `rewrite(path relative to the crate, bytes)` first: a
/// manifest's path dependency made absolute, say.
pub(crate) fn crate_copy(
    from: &std::path::Path,
    name: &str,
    rewrite: impl Fn(&std::path::Path, Vec<u8>) -> Vec<u8>,
) -> CrateCopy {
    let base = std::path::Path::new(env!("GATE_REPO_ROOT")).join("target/fixture-copies");
    std::fs::create_dir_all(&base).unwrap();
    let lock = std::fs::File::create(base.join(format!("{name}.lock"))).unwrap();
    lock.lock().unwrap();
    let dir = base.join(name);
    mirror(from, &dir, std::path::Path::new(""), &rewrite);
    CrateCopy { dir, _lock: lock }
}

/// A [`crate_copy`] rewrite: in the copy's `manifest` (a path relative to
/// the crate), gate's SDK dependency `gate-sdk = { path = "RELATIVE"`
/// points at this checkout instead.
pub(crate) fn sdk_path_here(
    manifest: &'static str,
    relative: &'static str,
) -> impl Fn(&std::path::Path, Vec<u8>) -> Vec<u8> {
    let from = format!("gate-sdk = {{ path = {relative:?}");
    let to = format!(
        "gate-sdk = {{ path = {:?}",
        concat!(env!("GATE_REPO_ROOT"), "/crates/gate-sdk")
    );
    move |rel, bytes| {
        if rel != std::path::Path::new(manifest) {
            return bytes;
        }
        let text = String::from_utf8(bytes).unwrap();
        assert!(
            text.contains(&from),
            "{manifest} has `{from}` to point at this checkout"
        );
        text.replace(&from, &to).into_bytes()
    }
}

/// Makes `to` hold what `from` holds, but `target` folders, writing only
/// the files whose bytes differ and removing what `from` does not have.
fn mirror(
    from: &std::path::Path,
    to: &std::path::Path,
    rel: &std::path::Path,
    rewrite: &dyn Fn(&std::path::Path, Vec<u8>) -> Vec<u8>,
) {
    std::fs::create_dir_all(to).unwrap();
    let mut wanted = std::collections::HashSet::new();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_name() == "target" {
            continue;
        }
        wanted.insert(e.file_name());
        let dest = to.join(e.file_name());
        let is_dir = dest.symlink_metadata().map(|m| m.is_dir());
        if e.file_type().unwrap().is_dir() {
            if is_dir.is_ok_and(|d| !d) {
                std::fs::remove_file(&dest).unwrap();
            }
            mirror(&e.path(), &dest, &rel.join(e.file_name()), rewrite);
        } else {
            if is_dir.is_ok_and(|d| d) {
                std::fs::remove_dir_all(&dest).unwrap();
            }
            let bytes = rewrite(&rel.join(e.file_name()), std::fs::read(e.path()).unwrap());
            if std::fs::read(&dest).ok().as_deref() != Some(&bytes[..]) {
                std::fs::write(&dest, &bytes).unwrap();
            }
        }
    }
    for e in std::fs::read_dir(to).unwrap() {
        let e = e.unwrap();
        if !wanted.contains(&e.file_name()) {
            if e.file_type().unwrap().is_dir() {
                std::fs::remove_dir_all(e.path()).unwrap();
            } else {
                std::fs::remove_file(e.path()).unwrap();
            }
        }
    }
}

/// The stock gate run in an adopter's folder, its harness built into this
/// checkout's `target/` (so one adopter's build reuses the last one's).
pub(crate) fn gate_for_adopter(dir: &std::path::Path, args: &[&str]) -> Output {
    gate_for_adopter_in(dir, &std::path::Path::new(env!("GATE_REPO_ROOT")).join("target"), args)
}

/// The target folder of the burn fixture's harness: a folder of its own
/// inside `target/`, so that burn's long build never holds cargo's lock of
/// the folder the candle fixtures build in (`.ci/run` builds it beside
/// them, from the start). Burn's graph shares next to no build with the
/// candle fixtures' (its workspace resolves other features of serde, half
/// and the proc macros), so nothing is compiled twice for it.
pub(crate) fn burn_target() -> std::path::PathBuf {
    std::path::Path::new(env!("GATE_REPO_ROOT")).join("target/adopter-burn")
}

/// [`gate_for_adopter`] with the harness built into `target`.
pub(crate) fn gate_for_adopter_in(dir: &std::path::Path, target: &std::path::Path, args: &[&str]) -> Output {
    gate()
        .args(args)
        .current_dir(dir)
        .env("CARGO_TARGET_DIR", target)
        .env_remove("CARGO_BUILD_TARGET")
        .output()
        .expect("the gate binary runs")
}

/// Whether a test that needs something from outside the repository
/// (Node.js, the npm registry, crates.io) can run: `why_not` is `None`
/// when it can. When it cannot, the reason is printed as the test's skip
/// line and `false` returned, so a contributor without them sees what did
/// not run and why. With `GATE_TESTS_REQUIRE_ALL=1` (`.ci/run` sets it)
/// the test fails with that reason instead: CI never passes by skipping.
pub(crate) fn available(test: &str, why_not: Option<String>) -> bool {
    let Some(why) = why_not else { return true };
    if std::env::var_os("GATE_TESTS_REQUIRE_ALL").is_some_and(|v| v == "1") {
        panic!("{test} cannot run: {why}\n(GATE_TESTS_REQUIRE_ALL=1: every test must run here)");
    }
    // Straight to the stream: the test harness captures `eprintln!` of a
    // passing test, and a skip must be seen.
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "skipped: {test}: {why}");
    false
}

/// Why the crates `manifest`'s lock file names cannot be had (no registry
/// and not in cargo's cache), if they cannot: `cargo fetch --locked`.
pub(crate) fn crates_unavailable(manifest: &std::path::Path) -> Option<String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let o = match Command::new(cargo)
        .args(["fetch", "--locked", "--manifest-path"])
        .arg(manifest)
        .output()
    {
        Ok(o) => o,
        Err(e) => return Some(format!("cargo did not start: {e}")),
    };
    if o.status.success() {
        return None;
    }
    let err = text(&o.stderr);
    let first = err
        .lines()
        .find(|l| l.starts_with("error"))
        .unwrap_or("cargo fetch failed");
    Some(format!(
        "the crates of {} cannot be fetched ({first}); it needs crates.io or a warm cargo cache",
        manifest.display()
    ))
}

/// The Node.js tool of `scripts/NAME` ready in `target/NAME-node`: its
/// pinned packages (`package-lock.json`) installed with `npm ci`, again
/// only when the lock file changed, and its `.mjs` scripts copied on every
/// call, so an edit to them is what runs. `Err`: why it cannot be had (no
/// Node.js 20+ or npm, or `npm ci` failed), a test's skip reason; `what`
/// says what the tool checks.
pub(crate) fn node_tool(name: &str, what: &str) -> Result<std::path::PathBuf, String> {
    let root = std::path::Path::new(env!("GATE_REPO_ROOT"));
    let src = root.join("scripts").join(name);
    let dir = root.join("target").join(format!("{name}-node"));
    let hint = "hint: install Node.js 20 or newer with npm (Debian: apt-get install nodejs npm)";
    for program in ["node", "npm"] {
        let ok = Command::new(program)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success());
        if !ok {
            return Err(format!("`{program}` was not found: {what} runs on Node.js\n{hint}"));
        }
    }
    let version = Command::new("node")
        .arg("--version")
        .output()
        .map_err(|e| e.to_string())?
        .stdout;
    let version = String::from_utf8_lossy(&version).trim().to_string();
    let major: u32 = version
        .trim_start_matches('v')
        .split('.')
        .next()
        .and_then(|m| m.parse().ok())
        .unwrap_or(0);
    if major < 20 {
        return Err(format!(
            "node {version} is too old for scripts/{name} (it needs Node.js 20)\n{hint}"
        ));
    }
    let io = |e: std::io::Error| e.to_string();
    let lock = std::fs::read(src.join("package-lock.json")).map_err(io)?;
    let installed = std::fs::read(dir.join("package-lock.json")).ok();
    if installed.as_deref() != Some(&lock[..]) || !dir.join("node_modules/.package-lock.json").exists() {
        std::fs::create_dir_all(&dir).map_err(io)?;
        std::fs::copy(src.join("package.json"), dir.join("package.json")).map_err(io)?;
        std::fs::write(dir.join("package-lock.json"), &lock).map_err(io)?;
        let out = Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund", "--prefix"])
            .arg(&dir)
            .output()
            .map_err(io)?;
        if !out.status.success() {
            // Without the lock file the next call installs again.
            let _ = std::fs::remove_file(dir.join("package-lock.json"));
            return Err(format!(
                "`npm ci --prefix target/{name}-node` failed ({}):\n{}\nhint: it needs the npm registry (or a warm \
                 npm cache); run it by hand to see why",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            ));
        }
    }
    for entry in std::fs::read_dir(&src).map_err(io)?.flatten() {
        let p = entry.path();
        if p.extension().is_some_and(|e| e == "mjs") {
            std::fs::copy(&p, dir.join(entry.file_name())).map_err(io)?;
        }
    }
    Ok(dir)
}
