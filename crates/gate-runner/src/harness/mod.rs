//! The harness side of the protocol with the installed `gate`, for any
//! framework: what a harness binary answers (the stock `gate`, for its
//! built-in workloads, is one too). A framework adapter implements
//! [`Framework`] and calls [`serve`]; the requests,
//! the arguments, the answers, the events and their messages are this
//! file's, the same for every framework.
//!
//! The installed `gate` reads budgets.yaml and hands the harness the
//! validated spec as a JSON request file ([`Request`]): a harness compiles
//! no YAML reader, and a config error found by a workload's config check
//! still points at `budgets.yaml:LINE:COL` (the spec carries its
//! positions). Two commands:
//!
//! - `HARNESS __resolve --request FILE`: the spec's workloads checked and
//!   resolved by this binary's registry: one JSON line on stdout
//!   ([`ResolveAnswer`]: `{"protocol": 3, "configs": {COMPONENT: CONFIG},
//!   "framework": {"name": N, "version": V}}`, plus the legacy version field
//!   from a harness of the first framework); or the spec's errors on stderr, the line
//!   `{"protocol": 3}` on stdout and exit 2. A request of another protocol:
//!   the line `{"protocol": 3}`, the error on stderr, exit 3.
//! - `HARNESS profile --request FILE --component NAME [--backend cpu|cuda|auto]
//!   [--emulate-capacity] [--batch-size N]`: profiles one component in this
//!   process, one JSON event per line on stdout ([`crate::child`]).

pub mod registry;

/// The body of every adapter's `main!`, written once: the counting
/// allocator that measures CPU memory as the binary's global allocator, and
/// a `main` that registers the workloads with the adapter's `Harness`, names
/// the binary from cargo's environment and answers the installed `gate`.
/// `$adapter` is the adapter crate's `$crate`, which holds `CountingAlloc`
/// and `Harness`; an adapter forwards to this through its hidden `__runner`
/// re-export, since a team's crate depends on the adapter, not on this one.
#[doc(hidden)]
#[macro_export]
macro_rules! adapter_main {
    ($adapter:tt; $($workload:ty),*) => {
        #[global_allocator]
        static GATE_COUNTING_ALLOCATOR: $adapter::CountingAlloc = $adapter::CountingAlloc;

        fn main() -> ::std::process::ExitCode {
            $adapter::Harness::new()
                $(.register::<$workload>())*
                .identity(::core::env!("CARGO_PKG_NAME"), ::core::option_env!("CARGO_BIN_NAME"))
                .run()
        }
    };
}

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use gate_probe::{Backend, BackendError, CpuProbe, DeviceInfo, MemoryProbe, Recorder};
use gate_spec::budget::{Component, Spec};
use gate_spec::hint::Problem;
use gate_spec::metric::Metric;

use crate::adapter::Session;
use crate::child::emit;
use crate::exit::Exit;
use crate::phases::{profile, profile_generation, ratio_run, RatioPlan};
use gate_contract::measurement::{CheckpointedBlock, Failure, FailureKind, Measurement, Phase};
use gate_contract::protocol::{ChildEvent, FrameworkId, Request, ResolveAnswer, PROTOCOL, PROTOCOL_HINT};

pub use registry::{read_config, Registry, Resolvable, Workloads};

/// Reads the installed `gate`'s request file at `path`. Its protocol is
/// looked at before the rest, so a request of another gate is named as such.
pub fn read_request(path: &Path) -> Result<Request, ChildError> {
    let bytes = std::fs::read(path).map_err(|e| {
        ChildError::usage(format!(
            "cannot read the installed gate's request {}: {e}",
            path.display()
        ))
    })?;
    let value: serde_json::Value = serde_json::from_slice(&bytes).map_err(|e| {
        ChildError::usage(format!(
            "the request {} is not gate's JSON request: {e}",
            path.display()
        ))
    })?;
    let protocol = value.get("protocol").and_then(|p| p.as_u64());
    if protocol != Some(PROTOCOL.into()) {
        return Err(ChildError::infrastructure(
            Problem::new(format!(
                "the installed gate speaks gate's harness protocol {}, and this harness speaks {PROTOCOL}",
                protocol.map_or("(none)".to_string(), |p| p.to_string())
            ))
            .with_hint(PROTOCOL_HINT),
        ));
    }
    serde_json::from_value(value).map_err(|e| {
        ChildError::usage(format!(
            "the request {} is not gate's JSON request: {e}",
            path.display()
        ))
    })
}

/// What ended a child command: the problem, and the exit code.
#[derive(Debug)]
pub struct ChildError {
    pub problem: Problem,
    pub exit: Exit,
}

impl ChildError {
    /// Bad input (exit 2), with no hint: the message names what to fix.
    fn usage(message: String) -> Self {
        ChildError {
            problem: Problem::new(message),
            exit: Exit::BadInput,
        }
    }

    /// An infrastructure failure (exit 3).
    pub fn infrastructure(problem: Problem) -> Self {
        ChildError {
            problem,
            exit: Exit::Infrastructure,
        }
    }
}

/// Which harness this binary is (an adapter's `main!` fills it in), so a
/// spec whose `harness:` names another one is refused.
#[derive(Debug, Clone, Copy, Default)]
pub struct Identity {
    pub package: Option<&'static str>,
    pub bin: Option<&'static str>,
}

/// A backend opened by a framework: where its tensors live and how their
/// bytes are read.
pub struct Opened<D> {
    /// The framework's device.
    pub device: D,
    pub probe: Arc<dyn MemoryProbe>,
    pub info: DeviceInfo,
    /// Bytes held back to emulate a smaller card (`--emulate-capacity`).
    pub emulated_block: Option<u64>,
}

/// The counting allocator's probe of the CPU, and the CPU's description:
/// refused when the binary does not install the allocator (an adapter's
/// `main!` does), as nothing could be measured.
pub fn open_cpu() -> Result<(Arc<dyn MemoryProbe>, DeviceInfo), BackendError> {
    if !CpuProbe::is_counting() {
        return Err(
            BackendError::new("the counting allocator is not installed in this binary")
                .with_hint("run the `gate` binary itself; the library alone cannot measure CPU memory"),
        );
    }
    Ok((Arc::new(CpuProbe), gate_probe::cpu_device_info()))
}

/// What a framework adapter gives the protocol: its workloads' registry,
/// its devices, and one component as a [`Session`] of gate-runner's phases.
pub trait Framework {
    /// The framework's workload as the registry builds it (`dyn Trait` or a type).
    type Workload: ?Sized + Resolvable;
    /// Where its tensors live.
    type Device;
    /// One component ready to profile.
    type Session<'a>: Session
    where
        Self: 'a;

    /// The framework and the version this harness runs its models on.
    fn id(&self) -> FrameworkId;

    /// The version the `__resolve` answer also gives under its legacy
    /// field (see [`ResolveAnswer::legacy_version`]): only the first
    /// framework's harnesses ([`gate_contract::protocol::FIRST_FRAMEWORK`])
    /// write it; `None` for any other.
    fn legacy_version(&self) -> Option<String> {
        None
    }

    /// The workload kinds this harness knows.
    fn registry(&self) -> &Registry<Self::Workload>;

    /// The kind of a panic raised inside the framework or the model, from
    /// its message (a framework that panics on a device error, through an
    /// `unwrap` on cudarc's result say, says so here). The
    /// default: the model's.
    fn panic_kind(_message: &str) -> FailureKind
    where
        Self: Sized,
    {
        FailureKind::Model
    }

    /// Opens `backend` (after [`gate_probe::resolve_backend`]), holding back
    /// what a card of `emulate` bytes would not have.
    fn open(&self, backend: Backend, emulate: Option<u64>) -> Result<Opened<Self::Device>, BackendError>;

    /// Component `component`'s `workload` on `device` at `batch_size`.
    fn session<'a>(
        &'a self,
        workload: &'a Self::Workload,
        device: &'a Self::Device,
        component: &'a Component,
        batch_size: usize,
    ) -> Self::Session<'a>;

    /// The batch size the throwaway warm-up step runs at, for a profile at
    /// `batch_size` on `backend`. The warm-up is there for what the
    /// framework allocates once per process and keeps (thread pools, kernel
    /// scratch, loaded kernels), which would otherwise land in whichever
    /// measured phase first needs it; a smaller batch is right only where
    /// none of that depends on the batch. The default: the profile's own.
    fn warm_up_batch(&self, _backend: Backend, batch_size: usize) -> usize {
        batch_size
    }

    /// The blocks the profile's model checkpointed (and their chunks), taken
    /// once its own steps are done; none where the framework has no such lever.
    fn checkpointed(&self) -> Vec<CheckpointedBlock> {
        Vec::new()
    }
}

/// What a harness does with a command that is not the installed `gate`'s
/// request (after [`serve`] said `None`): `--help` and `--version` say what
/// it is (exit 0); anything else is refused with the command to run
/// instead (exit 2). The same for every framework's adapter.
pub fn refuse<F: Framework>(args: &[OsString], framework: &F, identity: Identity, kinds: &[&str]) -> Exit {
    let id = framework.id();
    let what = format!(
        "the gate harness of `{}` (it knows {}; {} {})",
        identity.package.unwrap_or("this crate"),
        kinds.join(", "),
        id.name,
        id.version
    );
    let run_instead = "run the installed `gate check` where budgets.yaml names this harness; it builds and starts \
                       this binary (install gate from a release archive, or `cargo install --locked --path \
                       crates/gate-cli` in a clone of gate)";
    match args.get(1).map(|a| a.to_string_lossy()) {
        Some(a) if a == "--help" || a == "-h" || a == "--version" || a == "-V" => {
            println!("{what}");
            println!("It answers the installed `gate` (`__resolve`, `profile`) and nothing else: {run_instead}.");
            Exit::Pass
        }
        command => {
            let got = command.map_or("no command".to_string(), |c| format!("`{c}`"));
            eprintln!("error: this is {what}: it answers the installed `gate`, and got {got}");
            eprintln!("hint: {run_instead}");
            Exit::BadInput
        }
    }
}

/// Runs a child command if `args` (the program name first) is one; `None`
/// when it is not (the binary's own command line takes it).
pub fn serve<F: Framework>(args: &[OsString], framework: &F, identity: Identity) -> Option<Exit> {
    let result = match args.get(1).and_then(|a| a.to_str()) {
        Some("profile") => ProfileArgs::parse(&args[2..]).and_then(|a| run_profile(a, framework, identity)),
        Some("__resolve") => request_arg(&args[2..]).and_then(|p| run_resolve(&p, framework, identity)),
        _ => return None,
    };
    Some(result.unwrap_or_else(|e| {
        eprintln!("{}", e.problem.lines());
        e.exit
    }))
}

/// `gate profile`'s arguments.
#[derive(Debug, Clone)]
pub struct ProfileArgs {
    /// The installed gate's request file.
    pub request: PathBuf,
    pub component: String,
    pub backend: Backend,
    /// Hold back the part of a larger card that the spec's card does not have.
    pub emulate_capacity: bool,
    /// Profile at this batch size instead of the spec's (used by `gate fit`).
    pub batch_size: Option<usize>,
}

impl ProfileArgs {
    /// Parses the arguments after `profile`.
    pub fn parse(args: &[OsString]) -> Result<Self, ChildError> {
        let mut request = None;
        let mut component = None;
        let mut backend = Backend::Cpu;
        let mut emulate_capacity = false;
        let mut batch_size = None;
        let mut it = args.iter();
        let value = |it: &mut std::slice::Iter<OsString>, flag: &str| {
            it.next()
                .cloned()
                .ok_or_else(|| ChildError::usage(format!("`{flag}` needs a value")))
        };
        while let Some(a) = it.next() {
            match a.to_str() {
                Some("--request") => request = Some(PathBuf::from(value(&mut it, "--request")?)),
                Some("--budgets") => return Err(older_gate("profile")),
                Some("--component") => component = Some(value(&mut it, "--component")?.to_string_lossy().into_owned()),
                Some("--backend") => {
                    backend = match value(&mut it, "--backend")?.to_str() {
                        Some("cpu") => Backend::Cpu,
                        Some("cuda") => Backend::Cuda,
                        Some("auto") => Backend::Auto,
                        other => {
                            return Err(ChildError::usage(format!(
                                "unknown backend {other:?} (cpu, cuda, auto)"
                            )))
                        }
                    }
                }
                Some("--emulate-capacity") => emulate_capacity = true,
                Some("--batch-size") => {
                    let v = value(&mut it, "--batch-size")?;
                    batch_size = Some(
                        v.to_str()
                            .and_then(|s| s.parse().ok())
                            .ok_or_else(|| ChildError::usage(format!("`--batch-size {v:?}` is not a number")))?,
                    );
                }
                _ => return Err(ChildError::usage(format!("`profile` does not take {a:?}"))),
            }
        }
        let component = component.ok_or_else(|| ChildError::usage("`profile` needs `--component NAME`".into()))?;
        let request = request.ok_or_else(|| ChildError::usage("`profile` needs `--request FILE`".into()))?;
        Ok(ProfileArgs {
            request,
            component,
            backend,
            emulate_capacity,
            batch_size,
        })
    }
}

fn request_arg(args: &[OsString]) -> Result<PathBuf, ChildError> {
    match args {
        [flag, path] if flag == "--request" => Ok(PathBuf::from(path)),
        [flag, ..] if flag == "--budgets" => Err(older_gate("__resolve")),
        _ => Err(ChildError::usage("`__resolve` takes `--request FILE`".into())),
    }
}

/// A gate of protocol 1 names the spec (`--budgets`) for the harness to read.
fn older_gate(command: &str) -> ChildError {
    ChildError {
        problem: Problem::new(format!(
            "the installed gate speaks gate's harness protocol 1 (`{command} --budgets`), and this harness speaks {PROTOCOL}"
        ))
        .with_hint(PROTOCOL_HINT),
        exit: Exit::BadInput,
    }
}

/// The spec of the request at `path` with its workloads checked and
/// resolved by the framework's registry; the spec's errors go to stderr as
/// the installed `gate` prints them (exit 2).
fn load_here<F: Framework>(
    path: &Path,
    framework: &F,
    identity: Identity,
) -> Result<(Spec, Workloads<F::Workload>), ChildError> {
    let spec = read_request(path)?.spec;
    if let (Some(h), Some(package)) = (&spec.harness, identity.package) {
        if h.package != package || identity.bin.is_some_and(|b| b != h.bin) {
            return Err(ChildError::infrastructure(
                Problem::new(format!(
                    "this harness is `{}` of package `{package}`, and {} names `{}` of `{}`",
                    identity.bin.unwrap_or("?"),
                    spec.path.display(),
                    h.bin,
                    h.package
                ))
                .with_hint("make `harness:` name the binary that calls `gate::main!` (`bin:` is its target name)"),
            ));
        }
    }
    match registry::workloads_of(&spec, framework.registry()) {
        Ok(workloads) => Ok((spec, workloads)),
        Err(d) => {
            eprintln!("{d}");
            Err(ChildError::usage(d.summary()))
        }
    }
}

fn run_resolve<F: Framework>(path: &Path, framework: &F, identity: Identity) -> Result<Exit, ChildError> {
    let (spec, workloads) = match load_here(path, framework, identity) {
        Ok(loaded) => loaded,
        Err(e) => {
            // This line tells the installed gate which protocol failed: a
            // harness of protocol 1 exits 2 without it (`--request` is new
            // to it), one of a later protocol names its own.
            println!("{}", serde_json::json!({ "protocol": PROTOCOL }));
            return Err(e);
        }
    };
    let configs = spec
        .components
        .iter()
        .filter_map(|c| Some((c.name.clone(), workloads.get(&c.name)?.config())))
        .collect();
    let levers = spec
        .components
        .iter()
        .filter_map(|c| Some((c.name.clone(), workloads.get(&c.name)?.levers())))
        .filter(|(_, l)| !l.is_empty())
        .collect();
    let answer = ResolveAnswer {
        protocol: PROTOCOL,
        configs,
        levers,
        framework: framework.id(),
        legacy_version: framework.legacy_version(),
    };
    let line = serde_json::to_string(&answer)
        .map_err(|e| ChildError::infrastructure(Problem::new(format!("cannot write the answer: {e}"))))?;
    println!("{line}");
    Ok(Exit::Pass)
}

/// Adds a line with the panic's message and its `file:line:col` to stderr
/// (then Rust's own report, backtrace included): the parent keeps one line
/// as the failure's reason, and Rust's message leaves the location out of
/// it. A second line gives the panic's kind as `kind_of` (the framework's
/// adapter) judges it. Both on stderr: a panic on another thread must not
/// wait for stdout, which the profile holds.
fn locate_panics(kind_of: fn(&str) -> FailureKind) {
    let rust_own = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic without a message".into());
        let at = info
            .location()
            .map(|l| format!(" at {}:{}:{}", l.file(), l.line(), l.column()))
            .unwrap_or_default();
        let kind = serde_json::to_value(kind_of(&message))
            .ok()
            .and_then(|v| v.as_str().map(String::from))
            .unwrap_or_default();
        let line = format!(
            "{}{}{at}\n{}{kind}\n",
            crate::child::PANIC_LINE,
            message.replace('\n', " "),
            crate::child::PANIC_KIND_LINE
        );
        // A closed stderr loses the line; the hook must not panic over it.
        let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
        rust_own(info);
    }));
}

fn run_profile<F: Framework>(args: ProfileArgs, framework: &F, identity: Identity) -> Result<Exit, ChildError> {
    locate_panics(F::panic_kind);
    let (spec, workloads) = load_here(&args.request, framework, identity)?;
    let (component, workload) = component_and_workload(&args, &spec, &workloads)?;
    let emulate = (args.emulate_capacity || spec.device.emulate).then_some(spec.device.capacity.0);
    let backend = gate_probe::resolve_backend(args.backend).map_err(ChildError::infrastructure)?;
    let opened = framework.open(backend, emulate).map_err(ChildError::infrastructure)?;
    let (spans_seen, spans_unavailable) = install_spans(component);
    let recorder = Recorder::new(opened.probe.clone());
    let batch = args.batch_size.unwrap_or(component.batch_size);
    let session = framework.session(workload, &opened.device, component, batch);
    let base = Measurement {
        device: opened.info.clone(),
        emulated_block_bytes: opened.emulated_block,
        ..Default::default()
    };
    let mut stdout = std::io::stdout().lock();
    let mut io_err = None;
    let mut on_phase = |phase, so_far: &Measurement| {
        let so_far = Box::new(Measurement {
            device: base.device.clone(),
            emulated_block_bytes: base.emulated_block_bytes,
            ..so_far.clone()
        });
        if let Err(e) = emit(&mut stdout, &ChildEvent::Phase { phase, so_far }) {
            io_err = Some(e);
        }
    };
    let mut m = match component.generate {
        // Inference only: the model's own generation loop, no training.
        Some(generate) => {
            let card = crate::phases::Card {
                capacity: spec.device.capacity.0,
                reserve: spec.device.reserve.0,
            };
            // Checked on the card where it is the spec's (emulated).
            let checked = opened.emulated_block.is_some().then_some(card);
            let mut m = profile_generation(&session, generate, checked, &recorder, &mut on_phase);
            serving_capacity(&mut m, generate, card, &recorder);
            m
        }
        None => {
            // The throwaway warm-up's own session, where the adapter says a
            // smaller batch sets up all its framework keeps (see `warm_up_batch`).
            let warm_batch = framework.warm_up_batch(backend, batch);
            let warm =
                (warm_batch != batch).then(|| framework.session(workload, &opened.device, component, warm_batch));
            profile(&session, warm.as_ref(), component.timing, &recorder, &mut on_phase)
        }
    };
    m.device = base.device;
    m.emulated_block_bytes = base.emulated_block_bytes;
    record_spans(&mut m, component, &spans_seen, spans_unavailable);
    // Taken before the ratio steps, which also run the reference.
    m.checkpointed = framework.checkpointed();
    // A variant with a ratio budget: its steps and its reference's, in this
    // one process, now that this profile's bytes are measured (`gate fit`'s
    // batch sizes only need bytes). See `ratio_plan`.
    let gpu = recorder.probe().backend() == "cuda";
    let emulated = opened.emulated_block.is_some_and(|b| b > 0);
    let reference = component
        .reference
        .as_deref()
        .filter(|_| args.batch_size.is_none() && m.failure.is_none() && io_err.is_none())
        .and_then(|r| Some((spec.component(r)?, workloads.get(r)?)))
        .and_then(|(rc, rw)| Some((rc, rw, ratio_plan(component, rc, gpu, emulated)?)));
    if let Some((rc, rw, plan)) = reference {
        let phase = Phase::Ratio;
        let so_far = Box::new(m.clone());
        emit(&mut stdout, &ChildEvent::Phase { phase, so_far }).map_err(parent_write_error)?;
        let reference = || framework.session(rw, &opened.device, rc, rc.batch_size);
        run_ratios(&mut m, &session, reference, plan, &recorder);
    }
    if let Some(e) = io_err {
        return Err(parent_write_error(e));
    }
    emit(&mut stdout, &ChildEvent::Done(Box::new(m))).map_err(parent_write_error)?;
    Ok(Exit::Pass)
}

/// The spans the model opens become blocks: installed before anything is
/// built or measured, with its tables' room made now. The handle says which
/// spans were entered; an error, why spans cannot be attributed here.
fn install_spans(
    component: &Component,
) -> (
    gate_probe::spans::SpanHandle,
    Option<gate_probe::spans::SpansUnavailable>,
) {
    let selection = match &component.spans {
        Some(names) => gate_probe::spans::SpanSelection::Only(names.iter().map(|n| n.name.clone()).collect()),
        None => gate_probe::spans::SpanSelection::AllButLeaves,
    };
    let spans = gate_probe::spans::SpanScopes::new(selection);
    let seen = spans.handle();
    (seen, gate_probe::spans::install(spans).err())
}

/// The card's serving capacity, `kv_capacity_tokens`: the spec's card, its
/// reserve as measured where the probe can (CUDA), else as written; where
/// the card was checked, the figure it held (its own answer where the
/// arithmetic's did not fit).
fn serving_capacity(
    m: &mut Measurement,
    generate: gate_spec::budget::Generate,
    card: crate::phases::Card,
    recorder: &Recorder,
) {
    let tokens = match &m.kv_capacity_check {
        Some(check) => Some(check.card_tokens.unwrap_or(check.tokens)),
        None => {
            let reserve = card.reserve_measured(recorder.probe().as_ref());
            crate::phases::kv_capacity_tokens(m, generate, card.capacity, reserve)
        }
    };
    if let (None, Some(t)) = (&m.failure, tokens) {
        m.values.insert(gate_spec::metric::Metric::KvCapacityTokens, t);
    }
}

/// A variant's ratio steps beside its reference's (`reference` builds the
/// reference's session), into `m`. The ratios compare time and loss, not
/// bytes: on an emulated card the held-back memory is freed for them, so a
/// reference too big for the card is still stepped (docs/levers.md,
/// "Ratios on an emulated card").
fn run_ratios<S: Session>(
    m: &mut Measurement,
    session: &S,
    reference: impl FnOnce() -> S,
    plan: RatioPlan,
    recorder: &Recorder,
) {
    m.ratio_lifted_bytes = recorder.probe().lift_emulation().filter(|&b| b > 0);
    let reference = reference();
    let sync = || recorder.probe().sync();
    match ratio_run(session, &reference, plan, &sync) {
        Ok(run) => {
            m.step_time_ratios = run.step_time_ratios;
            m.ratio_losses = run.losses;
        }
        Err(e) => m.ratio_error = Some(e),
    }
}

/// Which spans the model entered, why spans could not be attributed (if
/// so), and a `spans:` name never entered as the profile's failure.
fn record_spans(
    m: &mut Measurement,
    component: &Component,
    seen: &gate_probe::spans::SpanHandle,
    unavailable: Option<gate_probe::spans::SpansUnavailable>,
) {
    m.spans_entered = seen.entered().into_iter().map(String::from).collect();
    m.spans_unavailable = unavailable.map(|e| e.to_string());
    if m.failure.is_none() {
        m.failure = unseen_spans(component, m);
    }
}

/// The spec's `spans:` names the model never entered, as a failure of the
/// forward (where spans are attributed), with the names it did enter.
fn unseen_spans(component: &Component, m: &Measurement) -> Option<Failure> {
    let asked = component.spans.as_ref()?;
    let unseen: Vec<String> = asked
        .iter()
        .filter(|a| !m.spans_entered.contains(&a.name))
        .map(|a| format!("`{}` (line {}:{})", a.name, a.line, a.col))
        .collect();
    if unseen.is_empty() {
        return None;
    }
    let entered = if m.spans_entered.is_empty() {
        "none".to_string()
    } else {
        m.spans_entered.join(", ")
    };
    let why = m
        .spans_unavailable
        .as_deref()
        .map(|u| format!("; {u}"))
        .unwrap_or_else(|| "; hint: a span's name is the one its `tracing::span!` call writes".into());
    Some(Failure {
        phase: Phase::Forward,
        reason: format!(
            "`spans:` asks for {} that the model never entered; the spans it entered: {entered}{why}",
            unseen.join(", ")
        ),
        kind: FailureKind::Model,
    })
}

/// What the `ratio` phase measures for `variant` against `reference`, if
/// anything: interleaved pairs for a `step_time_ratio` budget (on the CPU
/// only when the spec asks for pairs), and both losses for a `loss_ratio`
/// budget when the phase runs anyway or the card is emulated (the
/// reference may not fit it, and then its own profile has no loss).
fn ratio_plan(variant: &Component, reference: &Component, gpu: bool, emulated: bool) -> Option<RatioPlan> {
    let has = |metric: Metric| variant.budgets.iter().any(|b| b.metric == metric);
    let pairs = if has(Metric::StepTimeRatio) {
        variant.timing.pairs_on(gpu)
    } else {
        0
    };
    let losses = has(Metric::LossRatio) && (pairs > 0 || emulated);
    (pairs > 0 || losses).then_some(RatioPlan {
        warmup: variant.timing.warmup,
        pairs,
        losses: losses.then_some((variant.timing, reference.timing)),
    })
}

/// The component `--component` names, and its workload in this build.
fn component_and_workload<'a, D: ?Sized>(
    args: &ProfileArgs,
    spec: &'a Spec,
    workloads: &'a Workloads<D>,
) -> Result<(&'a Component, &'a D), ChildError> {
    let component = spec
        .component(&args.component)
        .ok_or_else(|| ChildError::usage(format!("no component `{}` in {}", args.component, spec.path.display())))?;
    let Some(workload) = workloads.get(&component.name) else {
        return Err(ChildError::usage(format!(
            "component `{}` cannot be profiled by this build",
            component.name
        )));
    };
    Ok((component, workload.as_ref()))
}

/// The events go to the parent gate process on stdout: a write that fails leaves it without the measurement.
fn parent_write_error(e: std::io::Error) -> ChildError {
    ChildError::infrastructure(Problem::new(format!("cannot write to the parent gate process: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPEC: &str = "version: 1\ndevice: { name: card, capacity: 4 GiB, reserve: 300 MiB }\ncomponents:\n  mlp:\n    workload: mlp\n    config: { hidden_dim: 32 }\n    budgets: { params: < 1 MB }\n";

    fn written(text: &str) -> (std::path::PathBuf, PathBuf) {
        let dir = std::env::temp_dir().join(format!(
            "gate-runner-request-{}-{}",
            std::process::id(),
            TEMP.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("request.json");
        std::fs::write(&path, text).unwrap();
        (dir, path)
    }

    static TEMP: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

    #[test]
    fn a_request_carries_the_spec_with_its_positions() {
        let spec = gate_spec::budget::parse(Path::new("budgets.yaml"), SPEC).unwrap();
        let (dir, path) = written(&Request::json(&spec).unwrap());
        let read = read_request(&path).unwrap();
        std::fs::remove_dir_all(dir).unwrap();
        assert_eq!(read.protocol, PROTOCOL);
        assert_eq!(format!("{:?}", read.spec), format!("{spec:?}"));
        assert_eq!(
            read.spec.components[0].config.key_pos("hidden_dim").map(|p| p.line),
            Some(6)
        );
    }

    #[test]
    fn a_request_of_another_protocol_names_both() {
        let (dir, path) = written(r#"{"protocol": 1, "budgets": "budgets.yaml"}"#);
        let e = read_request(&path).unwrap_err();
        assert_eq!(
            e.problem.message,
            format!("the installed gate speaks gate's harness protocol 1, and this harness speaks {PROTOCOL}")
        );
        assert_eq!(e.problem.hint(), Some(PROTOCOL_HINT));
        assert_eq!(e.exit, Exit::Infrastructure);
        std::fs::write(&path, "not json").unwrap();
        let e = read_request(&path).unwrap_err();
        std::fs::remove_dir_all(dir).unwrap();
        assert!(
            e.problem.message.contains("is not gate's JSON request"),
            "{}",
            e.problem.message
        );
        assert_eq!(e.exit, Exit::BadInput);
    }

    #[test]
    fn a_gate_of_protocol_1_is_told_so() {
        let args: Vec<OsString> = ["--budgets", "budgets.yaml"].iter().map(OsString::from).collect();
        let e = request_arg(&args).unwrap_err();
        assert!(
            e.problem
                .message
                .contains("protocol 1 (`__resolve --budgets`), and this harness speaks 3"),
            "{}",
            e.problem.message
        );
        let mut profile = args.clone();
        profile.extend(["--component", "mlp"].iter().map(OsString::from));
        let e = ProfileArgs::parse(&profile).unwrap_err();
        assert!(
            e.problem.message.contains("protocol 1 (`profile --budgets`)"),
            "{}",
            e.problem.message
        );
    }

    #[test]
    fn an_answer_names_its_framework_and_only_the_first_framework_says_its_legacy_version() {
        let answer = ResolveAnswer {
            protocol: PROTOCOL,
            configs: Default::default(),
            framework: FrameworkId {
                name: "other".into(),
                version: "0.22.1".into(),
            },
            legacy_version: None,
            levers: Default::default(),
        };
        let line = serde_json::to_string(&answer).unwrap();
        assert_eq!(
            line,
            r#"{"protocol":3,"configs":{},"framework":{"name":"other","version":"0.22.1"}}"#
        );
    }
}
