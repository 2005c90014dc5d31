//! The spec's workloads, always in a harness: the one its `harness:`
//! names, which this `gate` builds with cargo, or, for a spec without
//! one, gate's built-in models that this binary serves itself (the stock
//! `gate`, gate-builtins). Either way gate asks the harness to resolve the
//! spec's workloads (`__resolve`) and starts it for each profile
//! (`profile`): one seam, gate-runner's `harness` protocol. Everything
//! else (the verdict, the outputs, GitHub) stays here.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use gate_contract::plan::Lever;
use gate_contract::protocol::FrameworkId;
use gate_runner::child::{spawn_helper, status_words, Tail};

use crate::{app::App, errors::CliError};
use gate_probe::Backend;
use gate_runner::exit::Exit;
use gate_spec::budget::{HarnessSpec, Spec, WorkloadCheck};
use gate_spec::hint::Problem;

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

    /// The candle the components run on (the report's `candle_version`);
    /// empty when they run on another framework.
    pub(crate) fn candle_version(&self) -> String {
        let f = self.framework();
        if f.name == "candle" {
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
            let (built, resolved_candle, build_lock) = match &opts.harness_bin {
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
            if let Some(exact) = resolved_candle.filter(|_| framework.name == "candle") {
                framework.version = exact;
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
            if let Ok(Ok(stdout)) = cargo_metadata(&manifest, &["--offline"], false) {
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

/// The configs of a spec's workloads by component, as a harness resolved them.
type Configs = BTreeMap<String, serde_json::Value>;

/// The most a harness's `__resolve` answer may hold (its configs as JSON).
const ANSWER_LIMIT: u64 = 16 << 20;

/// `HARNESS __resolve --request FILE` (see `crate::child`): the configs of
/// the spec's workloads and the harness's framework. The harness prints the
/// spec's errors itself (exit 2). Every other way it can end without its
/// answer (a signal, another status, nothing or not JSON on stdout, an
/// answer without a component's config) is an infrastructure failure that
/// names the harness and what was missing; an answer of another protocol,
/// or none with exit 2 (a harness of protocol 1 does not take
/// `--request`), names both protocols.
fn resolve(exe: &Path, spec: &Spec, who: &str, bin: &str, request: &Path) -> Result<Resolved, CliError> {
    let fail = |what: String| {
        CliError::Infrastructure(
            Problem::new(format!("{who} gave no answer for {}: {what}", spec.path.display())).with_hint(format!(
                "a harness is built with gate's SDK (`gate::main!` in `{}`) and answers `__resolve --request FILE` \
                 with one JSON line",
                bin
            )),
        )
    };
    let mismatch = |theirs: String| {
        CliError::Infrastructure(
            Problem::new(format!(
                "{who} speaks gate's harness protocol {theirs}, and this gate speaks {}",
                gate_contract::protocol::PROTOCOL
            ))
            .with_hint(gate_contract::protocol::PROTOCOL_HINT),
        )
    };
    let mut cmd = gate_runner::child::command(exe);
    cmd.arg("__resolve")
        .arg("--request")
        .arg(request)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut helper = spawn_helper(&mut cmd)
        .map_err(|e| CliError::Infrastructure(Problem::new(format!("cannot start {who} ({}): {e}", exe.display()))))?;
    // Its own process group is not the terminal's foreground one: it
    // never writes to the terminal itself (a `stty tostop` terminal would
    // stop it); what it says, the spec's errors included, is passed on.
    let (echo, answer) = relay_and_keep(&mut helper, ANSWER_LIMIT + 1, true);
    // Waited for first: what it left running is killed with its group, so
    // both pipes close.
    let status = helper.wait();
    let stdout = answer.and_then(|t| t.join().ok()).unwrap_or_default();
    if let Some(echo) = echo {
        let _ = echo.join();
    }
    let status = status.map_err(|e| fail(format!("cannot wait for it: {e}")))?;
    if stdout.len() as u64 > ANSWER_LIMIT {
        return Err(fail(format!("it wrote more than {} MiB on stdout", ANSWER_LIMIT >> 20)));
    }
    let text = String::from_utf8_lossy(&stdout);
    // The answer is its last line of JSON: a library may print before it.
    let answer = text.lines().rev().find_map(|l| {
        serde_json::from_str::<serde_json::Value>(l)
            .ok()
            .filter(|v| v.is_object())
    });
    let protocol = answer.as_ref().map(|a| a["protocol"].as_u64());
    match (status.code(), protocol) {
        (Some(0 | 2 | 3), Some(Some(p))) if p != u64::from(gate_contract::protocol::PROTOCOL) => {
            return Err(mismatch(p.to_string()))
        }
        (Some(2), Some(Some(_))) => return Err(CliError::Reported(Exit::BadInput)),
        // Its usage error is above; a harness of this protocol answers with a line.
        (Some(2), _) => return Err(mismatch("1 (it takes `--budgets`, not `--request`)".into())),
        (Some(0), _) => {}
        _ => return Err(fail(format!("`__resolve` ended: {}", status_words(&status)))),
    }
    let Some(answer) = answer else {
        return Err(fail(match text.lines().find(|l| !l.trim().is_empty()) {
            None => "`__resolve` exited with status 0 and wrote nothing on stdout".into(),
            Some(first) => format!(
                "`__resolve` exited with status 0 and its stdout is not gate's JSON answer (it begins {:?})",
                first.chars().take(120).collect::<String>()
            ),
        }));
    };
    if protocol != Some(Some(gate_contract::protocol::PROTOCOL.into())) {
        return Err(mismatch("(none)".into()));
    }
    let Some(configs) = answer["configs"].as_object() else {
        return Err(fail("its answer has no `configs`".into()));
    };
    let missing: Vec<String> = spec
        .components
        .iter()
        .filter(|c| !configs.contains_key(&c.name))
        .map(|c| format!("`{}`", c.name))
        .collect();
    if !missing.is_empty() {
        return Err(fail(format!(
            "its answer has no config for component{} {}",
            if missing.len() == 1 { "" } else { "s" },
            missing.join(", ")
        )));
    }
    // `framework` is newer than protocol 2's first harnesses, which say
    // only `candle_version`.
    let framework = match (
        serde_json::from_value::<FrameworkId>(answer["framework"].clone()),
        answer["candle_version"].as_str(),
    ) {
        (Ok(f), _) if !f.name.is_empty() => f,
        (_, Some(candle)) => FrameworkId {
            name: "candle".into(),
            version: candle.to_string(),
        },
        _ => return Err(fail("its answer has no `framework`".into())),
    };
    // A config deeper than a spec may write goes into the report all the
    // same, which gate could then not read back (issue #43 item 11).
    let limit = gate_spec::config::MAX_CONFIG_DEPTH;
    if let Some((name, depth)) = configs
        .iter()
        .map(|(k, v)| (k, gate_spec::config::json_depth(v)))
        .find(|(_, d)| *d > limit)
    {
        return Err(fail(format!(
            "its config for `{name}` nests {depth} levels, deeper than the {limit} gate reads back from its reports"
        )));
    }
    let configs = configs.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    Ok(Resolved {
        configs,
        framework,
        levers: levers_of(&answer["levers"]),
    })
}

/// What `__resolve` answered: each component's config and levers, and the framework.
struct Resolved {
    configs: Configs,
    framework: FrameworkId,
    levers: BTreeMap<String, Vec<Lever>>,
}

/// The levers of an answer, each read alone: one of a kind this gate does
/// not know (a newer harness's) is left out, never an error, as a harness
/// of before levers answers none.
fn levers_of(value: &serde_json::Value) -> BTreeMap<String, Vec<Lever>> {
    let Some(map) = value.as_object() else {
        return BTreeMap::new();
    };
    map.iter()
        .map(|(name, levers)| {
            let known = levers
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|l| serde_json::from_value::<Lever>(l.clone()).ok())
                .collect();
            (name.clone(), known)
        })
        .collect()
}

/// The manifest the harness is built from: `manifest:` relative to the
/// spec, else the Cargo.toml beside the spec. It must exist, and lie in the
/// spec's repository (the git checkout the spec is in, else the spec's
/// folder) unless `--allow-outside-manifest`: gate builds that crate and
/// runs its build scripts and its harness.
fn manifest(spec: &Spec, h: &HarnessSpec, opts: &HarnessArgs) -> Result<PathBuf, CliError> {
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
/// `cargo metadata` said, the exact candle the build resolved, and the
/// build folder's harness lock (see [`lock_harness_builds`]), to be held
/// until the binary is copied.
fn build(
    spec: &Spec,
    manifest: &Path,
    h: &HarnessSpec,
    backend: Option<Backend>,
) -> Result<(PathBuf, Option<String>, Option<std::fs::File>), CliError> {
    let (candle, target_dir, limits) = check_candle(manifest, h)?;
    // What the adapter cannot run is refused before cargo builds anything.
    super::adapters::refuse(spec, backend, &limits)?;
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
    Ok((exe, candle, lock))
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

/// Says, before cargo's errors, when the harness would link two candles
/// (see `minors`). Quiet when `cargo metadata` cannot answer: the build
/// that follows reports that itself. Else gives the candle-core gate's SDK
/// resolved to, exactly (a git revision's commit included), which the
/// harness itself knows only by its minor.
#[allow(clippy::type_complexity)]
fn check_candle(
    manifest: &Path,
    h: &HarnessSpec,
) -> Result<(Option<String>, Option<PathBuf>, Vec<super::adapters::Limits>), CliError> {
    let Ok(stdout) = cargo_metadata(manifest, &[], true)? else {
        return Ok((None, None, Vec::new()));
    };
    let Ok(metadata) = serde_json::from_slice::<serde_json::Value>(&stdout) else {
        return Ok((None, None, Vec::new()));
    };
    let target_dir = metadata["target_directory"].as_str().map(PathBuf::from);
    let limits = super::adapters::limits(&metadata, &h.package);
    match super::minors::mismatch(&metadata) {
        Some(m) => Err(CliError::Usage(Problem::new(m.message(&h.package)).with_hint(m.hint()))),
        None => Ok((super::minors::gates_candle(&metadata), target_dir, limits)),
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
fn relay_and_keep(
    helper: &mut gate_runner::child::Helper,
    limit: u64,
    relay: bool,
) -> (
    Option<std::thread::JoinHandle<Tail>>,
    Option<std::thread::JoinHandle<Vec<u8>>>,
) {
    let echo = helper.child().stderr.take().map(|pipe| {
        std::thread::spawn(move || match relay {
            true => pump(pipe, &mut super::output::Relay::new()),
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
    let echo = std::thread::spawn(move || pump(err_pipe, &mut super::output::Relay::new()));
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

/// Copies `from` to `to` as it comes (on gate's stderr: a [`Relay`](super::output::Relay),
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
