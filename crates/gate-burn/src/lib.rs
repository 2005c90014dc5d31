//! gate's adapter for [burn](https://burn.dev): a team's burn models
//! gated by the installed `gate` through the same budgets.yaml, report and
//! comment as candle's. A team's crate writes its workloads as burn code is
//! written ([`BurnWorkload`]: a config, `build(device)`, a seeded batch, the
//! loss, the prediction, burn's own optimizer) and one harness file:
//!
//! ```ignore
//! // src/bin/gate-harness.rs
//! gate_burn::main!(my_crate::MyClassifier);
//! ```
//!
//! The protocol with the installed `gate` (`__resolve`, `profile`) is
//! gate-runner's `harness`, the same as candle's; this crate gives it
//! burn's devices and a component as gate-runner's `Session`
//! ([`session`]). On burn's ndarray backend the counting allocator (which
//! [`main!`] installs) measures every phase to the byte; `params` is the
//! bytes of the model's record (its parameter tensors), with the live bytes
//! the build left beside it.
//!
//! burn 0.22 is the release this adapter is built against (`burn` below);
//! a newer minor is a new feature and a fixture, as for candle (docs/burn.md).

mod framework;
pub mod session;

use std::fmt;

pub use burn;
pub use gate_probe::{enter as scope, scoped, CountingAlloc, ScopeGuard};
pub use gate_spec::config::Problems;

use burn::module::Module;
use burn::optim::{AdamWConfig, ModuleOptimizer};
use burn::tensor::{Device, Tensor};

/// The burn this adapter is built against (the report's testbed names it).
pub const BURN_VERSION: &str = "0.22.1";

/// A burn model's parameter count from its config alone: the closed form
/// `params` is checked against (0 elements: none).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ParamCount {
    /// Every parameter element the model holds.
    pub elems: u64,
}

/// What a component is run with: its batch size and seed (from the spec).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct RunCtx {
    /// Rows per batch (the spec's `batch_size:`, or `gate fit`'s).
    pub batch_size: usize,
    /// The component's seed: the same seed gives the same weights and batches.
    pub seed: u64,
}

impl RunCtx {
    /// The context of a batch of `batch_size` rows drawn from `seed` (for
    /// a team's own tests of its workload; gate makes it from the spec).
    pub fn new(batch_size: usize, seed: u64) -> Self {
        RunCtx { batch_size, seed }
    }
}

/// A burn model a team gates: built from its spec config, trained a few
/// seeded steps with its own optimizer, then run for inference.
///
/// The model is a burn [`Module`] as the team writes it. gate builds it on
/// an autodiff device for training and takes [`Module::valid`] of it for
/// inference (no autodiff); the batch is made on the plain device, so its
/// tensors are constants of the graph.
pub trait BurnWorkload: fmt::Debug + Send + Sync + Sized + 'static {
    /// The `workload:` name in budgets.yaml.
    const KIND: &'static str;
    /// The `config:` keys, read with positions (unknown keys are errors);
    /// `Default` fills the ones the spec leaves out.
    type Config: serde::Serialize + serde::de::DeserializeOwned + Default + fmt::Debug + Send + Sync;
    /// The model.
    type Model: Module + 'static;
    /// One seeded batch (inputs and targets).
    type Batch: Send + 'static;
    /// What inference returns.
    type Output;

    /// Checks the config (each problem names its key: `Problems::at`).
    fn from_config(config: Self::Config) -> Result<Self, Problems>;
    /// The config as read.
    fn config(&self) -> &Self::Config;
    /// The resolved config as the report records it.
    fn describe(&self) -> serde_json::Value {
        serde_json::to_value(self.config()).unwrap_or(serde_json::Value::Null)
    }
    /// The closed-form parameter count.
    fn param_count(&self) -> ParamCount;
    /// Builds the model on `device` (its parameters are made here).
    fn build(&self, device: &Device) -> Self::Model;
    /// The batch drawn from `seed` on `device`.
    fn batch(&self, device: &Device, ctx: &RunCtx, seed: u64) -> Self::Batch;
    /// The training loss of `model` on `batch`: a one-element tensor.
    fn loss(&self, model: &Self::Model, batch: &Self::Batch) -> Tensor<1>;
    /// Inference: `model` is [`Module::valid`] of the trained one.
    fn predict(&self, model: &Self::Model, batch: &Self::Batch) -> Self::Output;
    /// The optimizer, made at the first step (its state is the
    /// `optimizer` figure). Default: burn's AdamW with its defaults.
    fn optimizer(&self) -> ModuleOptimizer {
        AdamWConfig::new().init()
    }
    /// The learning rate of each step.
    fn learning_rate(&self) -> f64 {
        1e-3
    }
    /// Modules kept frozen on purpose (a pretrained backbone, a fixed
    /// embedding): each entry a module's path as burn's `ModuleVisitor`
    /// names it, fields joined by `.` (`backbone`, `blocks.0.attention`),
    /// or one parameter's (`head.weight`). gate sets them `no_grad` once the
    /// model is built, so burn keeps no gradient and the optimizer makes no
    /// state for them, and a step that leaves them without a gradient is
    /// not flagged: they are counted as frozen beside `params`. An entry
    /// that names nothing of the built model fails the build, with the
    /// paths there are. The default: none.
    ///
    /// Running statistics (BatchNorm's `running_mean` and `running_var`,
    /// burn's `RunningState`) and parameters the model already set
    /// `no_grad` are never trained by burn's optimizers: they are counted
    /// as buffers without being named here.
    fn frozen_modules(&self) -> Vec<String> {
        Vec::new()
    }
}

/// A harness binary's workloads: [`main!`] builds one; by hand,
/// `Harness::new().register::<MyModel>().run()`.
#[derive(Debug, Clone, Default)]
pub struct Harness {
    registry: gate_runner::harness::Registry<dyn session::DynBurn>,
    identity: gate_runner::harness::Identity,
    error: Option<String>,
}

impl Harness {
    /// A harness that knows no workload yet.
    pub fn new() -> Self {
        Harness::default()
    }

    /// Adds workload `W` (its [`BurnWorkload::KIND`] must be new to this harness).
    pub fn register<W: BurnWorkload>(mut self) -> Self {
        if let Err(e) = self.registry.add(W::KIND, session::read_kind::<W>) {
            self.error.get_or_insert(e);
        }
        self
    }

    /// Names the cargo package and binary this harness is ([`main!`] fills
    /// it in), so a spec whose `harness:` names another one is refused.
    pub fn identity(mut self, package: &'static str, bin: Option<&'static str>) -> Self {
        self.identity = gate_runner::harness::Identity {
            package: Some(package),
            bin,
        };
        self
    }

    /// Answers the installed `gate` (`__resolve`, `profile`) and
    /// `--help`/`--version`; anything else is a usage error that says how
    /// this binary is run.
    pub fn run(self) -> std::process::ExitCode {
        self.run_with(std::env::args_os().collect()).into()
    }

    fn run_with(self, args: Vec<std::ffi::OsString>) -> gate_runner::exit::Exit {
        use gate_runner::exit::Exit;
        if let Some(e) = &self.error {
            eprintln!("error: {e}");
            eprintln!("hint: give each workload its own `KIND`");
            return Exit::BadInput;
        }
        let framework = framework::Burn {
            registry: &self.registry,
        };
        if let Some(exit) = gate_runner::harness::serve(&args, &framework, self.identity) {
            return exit;
        }
        gate_runner::harness::refuse(&args, &framework, self.identity, &self.registry.names())
    }
}

/// Makes this binary a burn team's gate harness for the given workloads:
/// put it alone in `src/bin/gate-harness.rs` and name the binary in
/// budgets.yaml's `harness:`. It installs the counting allocator that
/// measures CPU memory, so the file must not declare another
/// `#[global_allocator]`.
///
/// ```ignore
/// gate_burn::main!(my_crate::MyClassifier, my_crate::MyEncoder);
/// ```
#[macro_export]
macro_rules! main {
    ($($workload:ty),* $(,)?) => {
        $crate::__runner::adapter_main!($crate; $($workload),*);
    };
}

/// gate-runner, for [`main!`]'s expansion in a team's crate (which depends
/// on this adapter only). Not API.
#[doc(hidden)]
pub use gate_runner as __runner;
