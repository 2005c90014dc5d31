//! The spec's workloads, always in a harness: the one its `harness:`
//! names, which this `gate` builds with cargo, or, for a spec without
//! one, gate's built-in models that this binary serves itself (the stock
//! `gate`, gate-builtins). Either way gate asks the harness to resolve the
//! spec's workloads (`__resolve`) and starts it for each profile
//! (`profile`): one seam, gate-runner's `harness` protocol. Everything
//! else (the verdict, the outputs, GitHub) stays here.//!
//! Here: loading a spec with its harness. `cargo` builds a spec's harness,
//! `resolve` asks it for the spec's configs.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::{app::App, errors::CliError};
use gate_contract::plan::Lever;
use gate_contract::protocol::FrameworkId;
use gate_probe::Backend;
use gate_spec::budget::{Spec, WorkloadCheck};
use gate_spec::hint::Problem;

mod cargo;
mod resolve;

pub(crate) use cargo::cargo_metadata;
use cargo::{build, manifest};
use resolve::{resolve, Resolved};

/// What the commands that read a spec with `harness:` let the user decide.
#[derive(Debug, Clone, Default, clap::Args)]
pub(crate) struct HarnessArgs {
    /// Let `harness.manifest` name a Cargo.toml outside the spec's repository
    /// (gate builds that crate and runs its code: its build scripts and the harness).
    #[arg(long)]
    pub allow_outside_manifest: bool,
    /// Run this already-built harness binary instead of building the spec's
    /// `harness:` with cargo: built where the toolchain is (e.g. with
    /// `--features cuda` on a CPU runner), run where the GPU is. It must be
    /// the spec's harness; gate still asks it to resolve the spec and checks
    /// its protocol version.
    #[arg(long, value_name = "PATH")]
    pub harness_bin: Option<PathBuf>,
}

/// A spec ready to run: the harness that profiles its components, and the
/// configs it resolved.
pub(crate) struct Loaded {
    pub spec: Box<Spec>,
    source: Source,
    /// The request the harness reads (gate-runner's `harness::Request`):
    /// written before the harness resolves the spec, read by each profile.
    request: RequestFile,
}

/// The request file: the validated spec as JSON, in a private folder of
/// its own, removed with it.
struct RequestFile {
    path: PathBuf,
    _dir: Scratch,
}

impl AsRef<Path> for RequestFile {
    fn as_ref(&self) -> &Path {
        &self.path
    }
}

/// The harness a spec's components run in.
struct Source {
    /// Its binary: a private copy of the spec's harness (see
    /// [`private_copy`]), or this binary for the built-ins.
    exe: PathBuf,
    /// The configs it resolved, by component.
    configs: BTreeMap<String, serde_json::Value>,
    /// The levers each component's workload declared (`gate plan`).
    levers: BTreeMap<String, Vec<Lever>>,
    /// The framework its adapter is built against (the report's testbed).
    framework: FrameworkId,
    /// This binary's own built-in models (its `cuda` feature decides the backend).
    built_in: bool,
    _copy: Option<Scratch>,
}

/// The harness's private copy's folder: removed when dropped, or by the
/// signal handler when a signal ends the process first.
struct Scratch(tempfile::TempDir);

impl Scratch {
    /// A new private folder (an unpredictable name under TMPDIR, this user's
    /// only), registered for removal on a signal.
    fn create(prefix: &str) -> std::io::Result<Self> {
        let dir = tempfile::Builder::new().prefix(prefix).tempdir()?;
        gate_runner::child::scratch(dir.path());
        Ok(Scratch(dir))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        gate_runner::child::forget_scratch(self.0.path());
    }
}

impl Loaded {
    /// The binary whose `profile` command measures a component.
    pub(crate) fn profiler(&self) -> &Path {
        &self.source.exe
    }

    /// The request file each `profile` reads (`--request`): the spec as
    /// this gate validated it, so the profiling binary parses no YAML.
    pub(crate) fn request(&self) -> &Path {
        &self.request.path
    }

    /// The backend the profiles run on. A harness is built with its `cuda`
    /// feature for `--backend cuda`, so this binary need not have it then;
    /// the built-ins run on what this binary has.
    pub(crate) fn backend(&self, requested: Backend) -> Result<Backend, gate_probe::BackendError> {
        match (self.source.built_in, requested) {
            (false, Backend::Cuda) => Ok(Backend::Cuda),
            _ => gate_probe::resolve_backend(requested),
        }
    }

    /// The framework the components run on, as their harness said.
    pub(crate) fn framework(&self) -> FrameworkId {
        self.source.framework.clone()
    }

    /// The version the report keeps under the testbed's legacy field: the
    /// framework's, when it is the first framework (whose stored baselines
    /// were fingerprinted with it); empty for any other.
    pub(crate) fn legacy_version(&self) -> String {
        let f = self.framework();
        if f.name == gate_contract::protocol::FIRST_FRAMEWORK {
            f.version
        } else {
            String::new()
        }
    }

    /// Component `name` of the spec (a variant as `NAME@VARIANT`), or a
    /// usage error naming the spec's components.
    pub(crate) fn component_named(&self, name: &str) -> Result<&gate_spec::budget::Component, CliError> {
        self.spec.component(name).ok_or_else(|| {
            let names: Vec<&str> = self.spec.components.iter().map(|c| c.name.as_str()).collect();
            CliError::Usage(
                Problem::new(format!("no component `{name}` in {}", self.spec.path.display()))
                    .with_hint(format!("components: {}", names.join(", "))),
            )
        })
    }

    /// The levers component `name`'s workload declared.
    pub(crate) fn levers(&self, name: &str) -> Vec<Lever> {
        self.source.levers.get(name).cloned().unwrap_or_default()
    }

    /// A request file for `spec` (the loaded spec with components added,
    /// as `gate plan` runs its candidates): kept while the value lives.
    pub(crate) fn request_for(spec: &Spec) -> Result<impl AsRef<Path>, CliError> {
        write_request(spec)
    }

    /// Component `name`'s resolved config, as the report records it.
    pub(crate) fn config(&self, name: &str) -> Option<serde_json::Value> {
        self.source.configs.get(name).cloned()
    }
}

/// Loads the spec at `path` and has its harness resolve the spec's
/// workloads: the harness it names, built here (it knows kinds this binary
/// does not), else this binary's built-in models.
pub(crate) fn load(path: &Path, app: &App, backend: Option<Backend>, opts: &HarnessArgs) -> Result<Loaded, CliError> {
    let spec = parse(path, app)?;
    refuse_unused_harness_bin(&spec, opts)?;
    let (source, request) = match &spec.harness {
        Some(h) => {
            let (built, resolved_framework, build_lock) = match &opts.harness_bin {
                Some(bin) => (prebuilt(bin)?, None, None),
                None => build(&spec, &manifest(&spec, h, opts)?, h, backend)?,
            };
            let (exe, copy) = private_copy(&built)?;
            // Copied: another build may now write the shared path.
            drop(build_lock);
            let request = write_request(&spec)?;
            let who = format!("the harness `{}` of `{}`", h.bin, h.package);
            let Resolved {
                configs,
                mut framework,
                levers,
            } = resolve(&exe, &spec, &who, &h.bin, &request.path)?;
            // The build's resolve is exact where the harness knows its minor only.
            if let Some(exact) = resolved_framework.filter(|f| f.name == framework.name) {
                framework.version = exact.version;
            }
            (
                Source {
                    exe,
                    configs,
                    levers,
                    framework,
                    built_in: false,
                    _copy: Some(copy),
                },
                request,
            )
        }
        None => {
            // Their configs are checked here first: every problem of the
            // file at once, in file order, before any process starts.
            gate_spec::budget::check_workloads(&spec, builtins(&spec, app)?)?;
            let exe = own_exe()?;
            let request = write_request(&spec)?;
            let Resolved {
                configs,
                framework,
                levers,
            } = resolve(&exe, &spec, "gate's built-in models", "gate", &request.path)?;
            (
                Source {
                    exe,
                    configs,
                    levers,
                    framework,
                    built_in: true,
                    _copy: None,
                },
                request,
            )
        }
    };
    Ok(Loaded {
        spec: Box::new(spec),
        source,
        request,
    })
}

/// This very binary, to start again for its built-in models' `__resolve`
/// and profiles: on Linux `/proc/self/exe`, which is the running program's
/// own file whatever has since been put at its path (a binary replaced
/// mid-run would otherwise measure some profiles with another gate, #54);
/// elsewhere its path.
fn own_exe() -> Result<PathBuf, CliError> {
    let own = Path::new("/proc/self/exe");
    if cfg!(target_os = "linux") && own.exists() {
        return Ok(own.to_path_buf());
    }
    std::env::current_exe().map_err(|e| {
        CliError::Infrastructure(Problem::new(format!(
            "cannot locate the gate binary to start its built-in models: {e}"
        )))
    })
}

/// The spec at `path` checked without building or running anything: the
/// file, and the harness's fields when it names a harness. `true` when it
/// does: its workloads' configs are then unchecked (only the built harness
/// knows their kinds). Where the spec asks for a backend or a dtype beyond
/// the defaults, what the harness's adapter says it runs is read from
/// `cargo metadata` (offline; it builds nothing), and refused there.
pub(crate) fn load_unbuilt(
    path: &Path,
    app: &App,
    backend: Option<Backend>,
    opts: &HarnessArgs,
) -> Result<(Spec, bool), CliError> {
    let spec = parse(path, app)?;
    refuse_unused_harness_bin(&spec, opts)?;
    if let Some(h) = &spec.harness {
        let manifest = manifest(&spec, h, opts)?;
        let beyond_defaults =
            backend == Some(Backend::Cuda) || spec.components.iter().any(|c| c.dtype != gate_spec::dtype::DType::F32);
        if beyond_defaults {
            // Quiet where cargo cannot answer offline: `--build` and
            // `check` read it again before they build.
            if let Ok(Ok(stdout)) = cargo::cargo_metadata(&manifest, &["--offline"], false) {
                if let Ok(metadata) = serde_json::from_slice::<serde_json::Value>(&stdout) {
                    super::adapters::refuse(&spec, backend, &super::adapters::limits(&metadata, &h.package))?;
                }
            }
        }
        return Ok((spec, true));
    }
    gate_spec::budget::check_workloads(&spec, builtins(&spec, app)?)?;
    Ok((spec, false))
}

/// The spec at `path`, its workloads not yet resolved. A spec with errors
/// is checked again with the built-in kinds (where this binary has them),
/// so its config errors come out with the file's, in one go.
fn parse(path: &Path, app: &App) -> Result<Spec, CliError> {
    let bytes = gate_spec::budget::read(path)?;
    match gate_spec::budget::parse_bytes(path, &bytes) {
        Ok(spec) => Ok(spec),
        Err(plain) => {
            let all = app
                .builtins
                .and_then(|check| gate_spec::budget::parse_bytes_with(path, &bytes, Some(check)).err())
                .unwrap_or(plain);
            Err(all.into())
        }
    }
}

/// The built-in kinds' checks for a spec without `harness:`, or the reason
/// this binary cannot run it: installed without the built-in models.
fn builtins<'a>(spec: &Spec, app: &App<'a>) -> Result<&'a dyn WorkloadCheck, CliError> {
    app.builtins.ok_or_else(|| {
        CliError::Usage(
            Problem::new(format!(
                "{} names no `harness:`, and this gate has no built-in models (it was built without its \
                 `builtins` feature)",
                spec.path.display()
            ))
            .with_hint(
                "name the harness that registers your models (`harness: { package: NAME, bin: NAME }`, \
                 docs/sdk.md), or use a gate with the built-ins (a release archive, or `cargo install --locked \
                 --path crates/gate-cli` in a clone of gate without `--no-default-features`)",
            ),
        )
    })
}

/// `--harness-bin` where the spec names no harness to replace: gate would
/// run its own built-in workloads and ignore it, so the run would not
/// measure what the user built (#43).
fn refuse_unused_harness_bin(spec: &Spec, opts: &HarnessArgs) -> Result<(), CliError> {
    let Some(bin) = &opts.harness_bin else { return Ok(()) };
    if spec.harness.is_some() {
        return Ok(());
    }
    Err(CliError::Usage(
        Problem::new(format!(
            "--harness-bin {}: {} has no `harness:`, so gate runs its own built-in workloads, and would not run it",
            bin.display(),
            spec.path.display()
        ))
        .with_hint("name the harness in the spec (`harness: { package: NAME, bin: NAME }`), or drop `--harness-bin`"),
    ))
}

/// `--harness-bin`: a file that exists, said before anything runs.
fn prebuilt(bin: &Path) -> Result<PathBuf, CliError> {
    if bin.is_file() {
        eprintln!("using the harness {} (--harness-bin; not built here)", bin.display());
        return Ok(bin.to_path_buf());
    }
    Err(CliError::Usage(
        Problem::new(format!("--harness-bin {}: no such file", bin.display())).with_hint(
            "build it with `cargo build --release -p PACKAGE --bin BIN` (add `--features cuda` for a GPU) \
             and pass target/release/BIN",
        ),
    ))
}

/// The harness binary copied for this run: every profile then runs the
/// binary that was built for it, even if a build in the same target folder
/// (another crate's harness of the same name, or the user's next build)
/// replaces cargo's copy meanwhile.
fn private_copy(built: &Path) -> Result<(PathBuf, Scratch), CliError> {
    let fail = |e: std::io::Error| {
        CliError::Infrastructure(
            Problem::new(format!("cannot copy the harness {} to run it: {e}", built.display()))
                .with_hint("check that the temporary folder (TMPDIR) is writable and has room"),
        )
    };
    let dir = Scratch::create("gate-harness-").map_err(fail)?;
    let exe = dir
        .0
        .path()
        .join(built.file_name().unwrap_or(std::ffi::OsStr::new("gate-harness")));
    std::fs::copy(built, &exe).map_err(fail)?;
    Ok((exe, dir))
}

/// Writes the request for `spec` (`gate_contract::protocol::Request`) into a new
/// private folder: created by `tempfile` under an unpredictable name,
/// readable by this user only, and the file created there, never opened if
/// it exists. Removed with the folder, or by the signal handler.
fn write_request(spec: &Spec) -> Result<RequestFile, CliError> {
    let fail = |e: String| {
        CliError::Infrastructure(
            Problem::new(format!(
                "cannot write the harness's request for {}: {e}",
                spec.path.display()
            ))
            .with_hint("check that the temporary folder (TMPDIR) is writable and has room"),
        )
    };
    let json = gate_contract::protocol::Request::json(spec).map_err(|e| fail(e.to_string()))?;
    let dir = Scratch::create("gate-request-").map_err(|e| fail(e.to_string()))?;
    let path = dir.0.path().join("request.json");
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&path)
        .and_then(|mut f| f.write_all(json.as_bytes()))
        .map_err(|e| fail(e.to_string()))?;
    Ok(RequestFile { path, _dir: dir })
}
