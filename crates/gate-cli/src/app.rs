//! What every command shares and no command owns: the binary's built-in
//! workloads ([`App`]), the default paths, `--version`'s text and
//! `--backend`. Below both wings (commands, pipeline): it imports neither.

use gate_spec::budget::WorkloadCheck;

/// The spec every subcommand reads unless `--budgets` names another.
pub(crate) const DEFAULT_SPEC: &str = gate_spec::budget::DEFAULT_FILE;
/// The output folder `check` writes and `comment`, `merge`, `baseline` read.
pub(crate) const DEFAULT_OUT: &str = "target/gate";

/// A count that must be 1 or more (`--jobs`, `--measure`): clap's parser,
/// so 0 is refused as the usage error it is, not run as "0 at a time".
pub(crate) fn at_least_one(text: &str) -> Result<usize, String> {
    match text.trim().parse::<usize>() {
        Ok(0) => Err("must be 1 or more".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(e.to_string()),
    }
}

/// A sweep's batch size or sequence length: 1 to 2^32 - 1. Beyond that a
/// predicted figure would pass the largest byte count gate can hold, and
/// print as a clamped number instead of a prediction.
pub(crate) fn grid_size(text: &str) -> Result<usize, String> {
    match text.trim().parse::<u64>() {
        Ok(0) => Err("must be 1 or more".into()),
        Ok(n) if n > u64::from(u32::MAX) => Err(format!("must be at most {}", u32::MAX)),
        Ok(n) => Ok(n as usize),
        Err(e) => Err(e.to_string()),
    }
}

/// `gate --version`'s line on the built-in models (the `builtins` feature).
#[cfg(feature = "builtins")]
macro_rules! builtins_line {
    () => {
        "\nbuilt-in models: yes (mlp, tft, dqn, ppo, mamba2)"
    };
}
#[cfg(not(feature = "builtins"))]
macro_rules! builtins_line {
    () => {
        "\nbuilt-in models: no (built without `builtins`: every spec names its `harness:`)"
    };
}

/// `gate --version`: the version, the commit it was built from (`unknown`
/// outside a git checkout), whether this build has CUDA, its target, the
/// repository `gate init` takes gate from (see build.rs) and whether it
/// has the built-in models.
#[cfg(feature = "cuda")]
pub(crate) const LONG_VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    "\ncommit: ",
    env!("GATE_GIT_COMMIT"),
    "\ncuda: yes (compute capability ",
    env!("GATE_CUDA_COMPUTE_CAP"),
    ")\ntarget: ",
    env!("GATE_TARGET"),
    "\nrepository: ",
    env!("GATE_REPOSITORY"),
    builtins_line!(),
);
#[cfg(not(feature = "cuda"))]
pub(crate) const LONG_VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    "\ncommit: ",
    env!("GATE_GIT_COMMIT"),
    "\ncuda: no (CPU build: `--backend cpu` only; a GPU run needs a build with `--features cuda`)",
    "\ntarget: ",
    env!("GATE_TARGET"),
    "\nrepository: ",
    env!("GATE_REPOSITORY"),
    builtins_line!(),
);

/// What this binary serves itself: the checks of its built-in workloads'
/// configs, when it has them (the stock `gate`, feature `builtins`). A spec
/// without `harness:` runs on them; one with `harness:` on the harness it
/// names.
#[derive(Clone, Copy, Default)]
pub(crate) struct App<'a> {
    pub builtins: Option<&'a dyn WorkloadCheck>,
    /// The Cargo.toml of the SDK the built-in models are built on.
    pub sdk_manifest: Option<&'static str>,
}

/// The built-in workloads a binary built on this crate serves itself:
/// how their configs are checked. Their profiles run in the same binary,
/// through the harness protocol (its `__resolve` and `profile` requests),
/// so `main` needs nothing else of them.
#[derive(Clone, Copy)]
pub struct Builtins<'a> {
    /// The built-in kinds' checks of a component's workload (gate-builtins').
    pub check: &'a dyn WorkloadCheck,
    /// The Cargo.toml of the SDK they are built on, whose declaration of the
    /// framework versions it serves `gate init --harness` reads
    /// (`gate_builtins::SDK_MANIFEST`).
    pub sdk_manifest: &'static str,
}

/// `--backend`: the command line's face of [`Backend`], so the probe
/// knows nothing of clap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum BackendArg {
    /// The CPU, measured by the counting allocator (the embedded default).
    Cpu,
    /// An NVIDIA GPU, measured by the CUDA memory pool and NVML (`cuda` feature).
    Cuda,
    /// CUDA when this build has it and a GPU is usable, else the CPU.
    Auto,
}

impl From<BackendArg> for gate_probe::Backend {
    fn from(b: BackendArg) -> gate_probe::Backend {
        match b {
            BackendArg::Cpu => gate_probe::Backend::Cpu,
            BackendArg::Cuda => gate_probe::Backend::Cuda,
            BackendArg::Auto => gate_probe::Backend::Auto,
        }
    }
}
