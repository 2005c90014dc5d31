//! The spec's `harness:`: when the workloads live in the adopter's crate,
//! this `gate` builds the adopter's harness binary with cargo, asks it to
//! resolve the spec's workloads, and starts it for each profile (the
//! protocol is `crate::child`'s). Everything else (the verdict, the outputs,
//! GitHub) stays here. A harness that is itself running never builds
//! another: it knows its own package and binary.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::{App, CliError};
use crate::budget::{HarnessSpec, Spec};
use crate::exit::Exit;
use crate::probe::Backend;
use crate::runner::Workloads;

/// A spec ready to run: the workloads of its components, and the binary
/// that profiles them.
pub struct Loaded {
    pub spec: Box<Spec>,
    source: Source,
}

enum Source {
    /// This binary knows every workload and profiles them itself.
    Here(Workloads),
    /// The spec's harness does: its binary (a private copy, see
    /// [`private_copy`]), and the configs it resolved.
    Harness {
        exe: PathBuf,
        configs: BTreeMap<String, serde_json::Value>,
        /// The candle the harness's SDK is built against (its report's testbed).
        candle_version: String,
        _copy: tempfile::TempDir,
    },
}

impl Loaded {
    /// The binary whose `profile` command measures a component.
    pub fn profiler(&self) -> Result<PathBuf, CliError> {
        match &self.source {
            Source::Harness { exe, .. } => Ok(exe.clone()),
            Source::Here(_) => std::env::current_exe().map_err(|e| CliError::Infrastructure {
                message: format!("cannot locate the gate binary to start profiles: {e}"),
                hint: String::new(),
            }),
        }
    }

    /// The backend the profiles run on. A harness is built with its `cuda`
    /// feature for `--backend cuda`, so this binary need not have it then.
    pub fn backend(&self, requested: Backend) -> Result<Backend, crate::probe::BackendError> {
        match (&self.source, requested) {
            (Source::Harness { .. }, Backend::Cuda) => Ok(Backend::Cuda),
            _ => crate::probe::resolve_backend(requested),
        }
    }

    /// The candle the components run on: the harness's, else this binary's.
    pub fn candle_version(&self) -> &str {
        match &self.source {
            Source::Harness { candle_version, .. } => candle_version,
            Source::Here(_) => crate::runner::CANDLE_VERSION,
        }
    }

    /// Component `name`'s resolved config, as the report records it.
    pub fn config(&self, name: &str) -> Option<serde_json::Value> {
        match &self.source {
            Source::Here(w) => w.get(name).map(|w| w.config()),
            Source::Harness { configs, .. } => configs.get(name).cloned(),
        }
    }
}

/// Loads the spec at `path`. When it names a harness that is not this
/// binary, builds the harness and has it resolve the spec's workloads (it
/// knows kinds this binary does not); else resolves them against `app`.
pub fn load(path: &Path, app: &App, backend: Option<Backend>) -> Result<Loaded, CliError> {
    // The file is read and parsed once. Only a spec with errors is parsed
    // again, with its workloads checked, so every error comes out in one go.
    let bytes = crate::budget::read(path)?;
    let checked = |plain| -> CliError {
        let all = crate::runner::parse_bytes(path, &bytes, &app.registry)
            .err()
            .unwrap_or(plain);
        crate::budget::SpecError::from(all).into()
    };
    let spec = crate::budget::parse_bytes(path, &bytes).map_err(checked)?;
    if let Some(h) = &spec.harness {
        if !app.is(h) {
            let (exe, copy) = private_copy(&build(&spec, h, backend)?)?;
            let (configs, candle_version) = resolve(&exe, path, h)?;
            return Ok(Loaded {
                spec: Box::new(spec),
                source: Source::Harness {
                    exe,
                    configs,
                    candle_version,
                    _copy: copy,
                },
            });
        }
    }
    // The spec is valid: its workloads are built from it, not from a second
    // parse of the file (#28 item 12). Only when one fails is it parsed
    // again, for the errors as above (a variant not repeating its component's).
    let workloads = crate::runner::resolve(&spec, &app.registry).map_err(checked)?;
    Ok(Loaded {
        spec: Box::new(spec),
        source: Source::Here(workloads),
    })
}

/// The harness binary copied for this run: every profile then runs the
/// binary that was built for it, even if a build in the same target folder
/// (another crate's harness of the same name, or the user's next build)
/// replaces cargo's copy meanwhile.
fn private_copy(built: &Path) -> Result<(PathBuf, tempfile::TempDir), CliError> {
    let fail = |e: std::io::Error| CliError::Infrastructure {
        message: format!("cannot copy the harness {} to run it: {e}", built.display()),
        hint: "check that the temporary folder (TMPDIR) is writable and has room".into(),
    };
    let dir = tempfile::Builder::new()
        .prefix("gate-harness-")
        .tempdir()
        .map_err(fail)?;
    let exe = dir
        .path()
        .join(built.file_name().unwrap_or(std::ffi::OsStr::new("gate-harness")));
    std::fs::copy(built, &exe).map_err(fail)?;
    Ok((exe, dir))
}

/// The configs of a spec's workloads by component, as a harness resolved them.
type Configs = BTreeMap<String, serde_json::Value>;

/// `HARNESS __resolve --budgets SPEC` (see `crate::child`): the configs of
/// the spec's workloads and the harness's candle. The harness prints the
/// spec's errors itself.
fn resolve(exe: &Path, spec: &Path, h: &HarnessSpec) -> Result<(Configs, String), CliError> {
    let out = Command::new(exe)
        .arg("__resolve")
        .arg("--budgets")
        .arg(spec)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| CliError::Infrastructure {
            message: format!("cannot start the harness {}: {e}", exe.display()),
            hint: String::new(),
        })?;
    match out.status.code() {
        Some(0) => {}
        Some(2) => return Err(CliError::Reported(Exit::BadInput)),
        _ => {
            return Err(CliError::Infrastructure {
                message: format!(
                    "the harness `{}` of `{}` could not read {} ({})",
                    h.bin,
                    h.package,
                    spec.display(),
                    out.status
                ),
                hint: format!(
                    "run `{} __resolve --budgets {}` to see why",
                    exe.display(),
                    spec.display()
                ),
            })
        }
    }
    let answer: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    let protocol = answer["protocol"].as_u64();
    if protocol != Some(crate::child::PROTOCOL.into()) {
        return Err(CliError::Infrastructure {
            message: format!(
                "the harness `{}` speaks gate's harness protocol {}, and this gate speaks {}",
                h.bin,
                protocol.map_or("(none)".to_string(), |p| p.to_string()),
                crate::child::PROTOCOL
            ),
            hint: "build the harness against the same gate release as the installed `gate`".into(),
        });
    }
    let configs = answer["configs"]
        .as_object()
        .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
        .unwrap_or_default();
    let candle = answer["candle_version"].as_str().unwrap_or("unknown").to_string();
    Ok((configs, candle))
}

/// The manifest the harness is built from: `manifest:` relative to the spec,
/// else the Cargo.toml beside the spec.
fn manifest(spec: &Spec, h: &HarnessSpec) -> PathBuf {
    let dir = spec
        .path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    match &h.manifest {
        Some(m) => dir.join(m),
        None => dir.join("Cargo.toml"),
    }
}

/// `cargo build --release` of the harness (incremental: a second build with
/// nothing changed costs a second); returns the binary's path.
fn build(spec: &Spec, h: &HarnessSpec, backend: Option<Backend>) -> Result<PathBuf, CliError> {
    let manifest = manifest(spec, h);
    if !manifest.is_file() {
        return Err(CliError::Usage {
            message: format!(
                "{}:{}: `harness:` builds from {}, which does not exist",
                spec.path.display(),
                h.line,
                manifest.display()
            ),
            hint: "put budgets.yaml beside the workspace's Cargo.toml, or set `harness.manifest: path/to/Cargo.toml`"
                .into(),
        });
    }
    check_candle(&manifest, h)?;
    let mut features = h.features.clone();
    if backend == Some(Backend::Cuda) && !features.iter().any(|f| f == "cuda") {
        features.push("cuda".into());
    }
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(&cargo);
    cmd.args(["build", "--release", "--message-format=json-render-diagnostics"])
        .arg("--manifest-path")
        .arg(&manifest)
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
    let (status, stdout, stderr) = run_cargo(cmd, Path::new(&cargo))?;
    if !status.success() {
        return Err(CliError::Infrastructure {
            message: format!(
                "the harness `{}` of `{}` does not build:\n{}",
                h.bin,
                h.package,
                first_error(&stderr)
            ),
            hint: format!(
                "fix the error above (`cargo build --release -p {} --bin {}` shows them all)",
                h.package, h.bin
            ),
        });
    }
    executable(&stdout, &h.bin).ok_or_else(|| CliError::Infrastructure {
        message: format!("cargo built `{}` but did not say where the binary is", h.bin),
        hint: "check that `bin:` names a binary target, not a library or an example".into(),
    })
}

/// Says, before cargo's errors, when the harness would link two candles
/// (see `minors`). Quiet when `cargo metadata` cannot answer: the build
/// that follows reports that itself.
fn check_candle(manifest: &Path, h: &HarnessSpec) -> Result<(), CliError> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = Command::new(&cargo)
        .args(["metadata", "--format-version", "1", "--manifest-path"])
        .arg(manifest)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output();
    let Ok(out) = out else { return Ok(()) };
    if !out.status.success() {
        return Ok(());
    }
    let Ok(metadata) = serde_json::from_slice::<serde_json::Value>(&out.stdout) else {
        return Ok(());
    };
    match super::minors::mismatch(&metadata) {
        Some(m) => Err(CliError::Usage {
            message: m.message(&h.package),
            hint: m.hint(),
        }),
        None => Ok(()),
    }
}

/// Runs the cargo build `cmd`; its exit status, stdout and stderr.
/// stdout carries cargo's JSON messages; stderr its progress and the
/// rendered compiler errors: shown as they come (a cold build takes
/// minutes) and kept to quote the first error.
fn run_cargo(mut cmd: Command, cargo: &Path) -> Result<(std::process::ExitStatus, String, String), CliError> {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| CliError::Infrastructure {
            message: format!("cannot run cargo ({}) to build the harness: {e}", cargo.display()),
            hint: "install a Rust toolchain (rustup.rs), or set CARGO to the cargo binary".into(),
        })?;
    let err_pipe = child.stderr.take().expect("stderr is piped");
    let echo = std::thread::spawn(move || {
        use std::io::BufRead;
        let mut kept = String::new();
        for line in std::io::BufReader::new(err_pipe).lines().map_while(Result::ok) {
            eprintln!("{line}");
            kept.push_str(&line);
            kept.push('\n');
        }
        kept
    });
    let mut stdout = String::new();
    if let Some(mut pipe) = child.stdout.take() {
        use std::io::Read;
        let _ = pipe.read_to_string(&mut stdout);
    }
    let status = child.wait().map_err(|e| CliError::Infrastructure {
        message: format!("cargo did not finish building the harness: {e}"),
        hint: String::new(),
    })?;
    let stderr = echo.join().unwrap_or_default();
    Ok((status, stdout, stderr))
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

/// cargo's first `error` block: from its first `error` line up to the next
/// blank line (what a reader needs to fix it), or the last lines when there
/// is none.
fn first_error(stderr: &str) -> String {
    let lines: Vec<&str> = stderr.lines().collect();
    if let Some(start) = lines.iter().position(|l| l.starts_with("error")) {
        let end = lines[start..]
            .iter()
            .position(|l| l.trim().is_empty())
            .map_or(lines.len(), |n| start + n);
        return lines[start..end.min(start + 30)].join("\n");
    }
    lines[lines.len().saturating_sub(10)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_compiler_error_is_quoted_whole() {
        let stderr = "   Compiling ml v0.1.0\nerror[E0425]: cannot find value `x` in this scope\n --> src/lib.rs:3:5\n  |\n3 |     x\n  |     ^ not found\n\nerror: could not compile `ml`\n";
        assert_eq!(
            first_error(stderr),
            "error[E0425]: cannot find value `x` in this scope\n --> src/lib.rs:3:5\n  |\n3 |     x\n  |     ^ not found"
        );
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
