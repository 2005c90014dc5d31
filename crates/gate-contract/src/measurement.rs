//! What one component's profile produced; crosses the child-process boundary as JSON.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use gate_probe::BlockStat;
use gate_spec::metric::Metric;

/// The phases of a profile, in the order they run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Starting the child process and the device.
    Setup,
    /// One throwaway training step, so lazily allocated runtime buffers exist before measuring.
    Warmup,
    Build,
    Batch,
    Forward,
    Backward,
    Optimizer,
    TrainingStep,
    Timing,
    Inference,
    /// A variant with a `step_time_ratio` budget: its steps and its
    /// reference's, interleaved, after the byte phases (no bytes measured).
    Ratio,
    /// A generation component: the prompt through the model into its cache.
    Prefill,
    /// A generation component: the decode steps, one token each.
    Decode,
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = serde_json::to_value(self)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        f.write_str(&s)
    }
}

/// Why a profile stopped early, and where.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Failure {
    pub phase: Phase,
    pub reason: String,
    /// Whose fault it is, decided where the failure was seen.
    #[serde(default)]
    pub kind: FailureKind,
}

/// Whose fault a failed measurement is: the model's (exit 1) or the
/// infrastructure's (exit 3). Decided once, where the failure is seen, so
/// nothing downstream reads it back out of the reason's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    /// An error or a panic in the model's code, or the kernel's OOM killer:
    /// a figure the model is judged by.
    #[default]
    Model,
    /// The device or the host could not give an allocation (as the adapter
    /// or the allocator saw it): the model's, judged by its budgets, and
    /// the memory levers are the next step.
    OutOfMemory,
    /// A CUDA or driver error other than out of memory.
    Device,
    /// The profile process: crashed on a signal, failed its set-up (exit
    /// 3), or ended without its measurement.
    Process,
    /// A kind this gate does not know, read from a report of a newer gate:
    /// shown as unknown; as no one can say whose fault it was, no figure is
    /// judged by it (infrastructure, exit 3), never a refusal of the file.
    #[serde(other)]
    Unknown,
}

impl FailureKind {
    /// Whether no figure can be judged: the infrastructure failed, not the model.
    pub fn is_infrastructure(self) -> bool {
        matches!(self, FailureKind::Device | FailureKind::Process | FailureKind::Unknown)
    }
}

pub use gate_probe::DeviceInfo;

profile_facts!(struct_with_profile_facts! {
    /// What one component's profile measured, as the harness writes it on
    /// its `profile` line: its figures, the blocks of its forward, its
    /// failure, then the profile facts report.json keeps as they are
    /// (`profile_facts`).
    #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
    pub struct Measurement {
        pub device: DeviceInfo,
        /// Metric values in canonical units (bytes, ms, plain number).
        pub values: BTreeMap<Metric, f64>,
        /// Parameter elements counted on the built model.
        pub param_elems: u64,
        /// Elements of frozen (non-trained) state the model holds, from the closed form.
        pub frozen_elems: u64,
        /// Blocks of the grad-enabled forward pass, ranked by retained bytes.
        pub blocks: Vec<BlockStat>,
        /// Where the blocks' kept bytes were read at the forward's end (the
        /// CPU): what each held at its exit, by name. Above what it keeps, an
        /// op after it freed the difference (a graph cut downstream).
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        pub block_exit_bytes: BTreeMap<String, i64>,
        pub failure: Option<Failure>,
        /// Live bytes after the timed training steps beyond those after the first
        /// steady step (`None` with a single timed step).
        #[serde(default)]
        pub growth_training_bytes: Option<u64>,
        /// Live bytes after further inference calls beyond those after the first.
        #[serde(default)]
        pub growth_inference_bytes: Option<u64>,
        /// How long each phase took, in order; timed by the parent from the
        /// child's phase events (the child leaves it empty).
        #[serde(default)]
        pub phase_seconds: Vec<(Phase, f64)>,
        /// The `ratio` phase: the variant's and the reference's loss, each after
        /// as many seeded steps as its own profile takes, in this one process.
        /// `loss_ratio` falls back on them when the reference's own profile did
        /// not reach its loss (it does not fit the emulated card).
        #[serde(default)]
        pub ratio_losses: Option<(f64, f64)>,
        /// A failed profile: the allocator's high-water in the failing phase
        /// (for an out-of-memory failure, about what it held when it ran out).
        #[serde(default)]
        pub failure_peak_bytes: Option<u64>,
    }
});

/// `kv_capacity_tokens` checked on the card: the memory a row's cache
/// would hold one token short of the figure (`held_bytes`, the batch's,
/// beyond the tokens the generation already cached) taken outside the
/// framework's allocator, then one decode step, which grows the cache to
/// the figure. It fits, or the figure is over what the card holds, and the
/// card's own answer is searched for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CapacityCheck {
    /// The figure checked: tokens a row's cache reaches.
    pub tokens: f64,
    /// Bytes held beside the generation's own cache.
    pub held_bytes: u64,
    /// Whether the decode step ran.
    pub fits: bool,
    /// Why it did not (the framework's error, first line).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Where it did not: the longest cache (tokens a row) with which one
    /// decode step ran on the card, found by halving what was held. The
    /// card's own answer, which `kv_capacity_tokens` then reads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub card_tokens: Option<f64>,
}

/// How much of the model a training step trains: the trainable parameter
/// tensors, and those the backward gave no gradient (a no-backward op on
/// their path, a `detach`, or a parameter the loss never reaches). A step
/// that leaves parameters without gradients does not train them, and its
/// activations, gradients and optimizer figures describe a smaller model.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GradientCoverage {
    /// Trainable parameter tensors (those declared frozen excluded).
    pub tensors: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Of those, the tensors with no gradient.
    pub without_gradient: u64,
    /// Their bytes.
    pub without_gradient_bytes: u64,
    /// The first names without a gradient, in creation order (at most
    /// [`GradientCoverage::NAMES_KEPT`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing: Vec<String>,
    /// Parameter tensors the workload declared frozen on purpose: neither
    /// trained nor counted above.
    #[serde(default)]
    pub frozen: u64,
    /// Tensors the model keeps in its record that no optimizer trains, by
    /// the framework's own flag (running statistics such as BatchNorm's,
    /// parameters the model set not to require a gradient): neither
    /// trained nor counted above, and never warned about.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub buffers: u64,
    /// How a parameter frozen on purpose is declared, in the adapter's own
    /// API (`Workload::frozen_parameters`), named by the warning's hint:
    /// the verdict names no framework.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub declare_frozen: Option<String>,
    /// The framework's own words for the likely cause (which of its ops
    /// have no backward), from its adapter: the runner and the verdict
    /// name no framework.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub likely_cause: Option<String>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl GradientCoverage {
    /// How many names of tensors without a gradient are kept.
    pub const NAMES_KEPT: usize = 8;

    /// Whether every trainable tensor got a gradient.
    pub fn is_complete(&self) -> bool {
        self.without_gradient == 0
    }
}

/// A block a model checkpointed: named by the scope it ran in, recomputed
/// whole (`chunk: None`) or in chunks of `chunk` positions.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct CheckpointedBlock {
    pub block: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chunk: Option<usize>,
    /// The most positions one measured training forward ran the block's
    /// chunks over (absent: run whole, or not said). A chunk of this many
    /// positions or more is one chunk: `gate plan` predicts every larger
    /// chunk as this one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub positions: Option<usize>,
}

/// The phases whose work a metric's value comes from, as `phases` measures
/// it (JUnit gives each budget their time). A ratio comes from the phases of
/// the metric it divides.
pub fn measured_in(metric: Metric) -> &'static [Phase] {
    match metric {
        Metric::Params => &[Phase::Build],
        Metric::Activations => &[Phase::Forward],
        Metric::Gradients => &[Phase::Backward],
        Metric::Optimizer | Metric::ModelState => &[Phase::Optimizer],
        Metric::TrainingPeak | Metric::DeviceUsed => &[Phase::TrainingStep],
        // The steady step is the first timed step; the rest run in `timing`.
        Metric::StepTime => &[Phase::TrainingStep, Phase::Timing],
        // A variant's ratio comes from its interleaved pairs (the separate
        // medians when there are none).
        Metric::StepTimeRatio => &[Phase::TrainingStep, Phase::Timing, Phase::Ratio],
        Metric::Loss => &[Phase::Timing],
        // The reference's loss may come from the ratio steps (see `ratio_losses`).
        Metric::LossRatio => &[Phase::Timing, Phase::Ratio],
        Metric::InferencePeak => &[Phase::Inference],
        Metric::Growth => &[Phase::Timing, Phase::Inference],
        Metric::PrefillPeak => &[Phase::Prefill],
        Metric::DecodePeak | Metric::KvCachePerToken | Metric::DecodeGrowth | Metric::KvCapacityTokens => {
            &[Phase::Decode]
        }
    }
}
