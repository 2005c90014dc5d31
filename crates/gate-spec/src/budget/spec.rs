//! The validated spec: typed values only, every budget with its line.

use std::path::PathBuf;

pub use crate::dtype::DType;

use crate::config;
use crate::config::Pos;
use crate::metric::Metric;
use crate::units::{Bytes, Percent};

/// How many training steps are timed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Timing {
    pub warmup: usize,
    pub steps: usize,
    /// A variant with a `step_time_ratio` budget: how many interleaved
    /// variant/reference step pairs time the ratio, in one process after
    /// the byte profiles (0: the ratio of the two profiles' medians, as
    /// before, with no interval). Unset: [`Timing::pairs_on`] decides.
    pub pairs: Option<usize>,
}

/// The default `timing.pairs` on a GPU: 15 pairs give a 96.5 % interval
/// between the 4th and 12th smallest pair ratios (`report::interval`).
pub const DEFAULT_PAIRS: usize = 15;

impl Timing {
    /// The pairs to time: as the spec says, else [`DEFAULT_PAIRS`] on a GPU
    /// and none on the CPU. A CPU step of the original TFT takes 4–11 s on
    /// one core, so even the 6 pairs an interval needs would add more than a
    /// minute to a run that takes one (issue #18, goal 1); the CPU keeps the
    /// ratio of the two profiles' medians unless the spec asks for pairs.
    pub fn pairs_on(&self, gpu: bool) -> usize {
        self.pairs.unwrap_or(if gpu { DEFAULT_PAIRS } else { 0 })
    }
}

impl Default for Timing {
    fn default() -> Self {
        Timing {
            warmup: 1,
            steps: 3,
            pairs: None,
        }
    }
}

/// A budget's comparison; written in reports as its symbol (`<`, `<=`, `>`, `>=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Lt,
    Le,
    Gt,
    Ge,
}

impl Op {
    pub fn symbol(self) -> &'static str {
        match self {
            Op::Lt => "<",
            Op::Le => "<=",
            Op::Gt => ">",
            Op::Ge => ">=",
        }
    }

    /// Whether `value` satisfies `op limit`.
    pub fn holds(self, value: f64, limit: f64) -> bool {
        match self {
            Op::Lt => value < limit,
            Op::Le => value <= limit,
            Op::Gt => value > limit,
            Op::Ge => value >= limit,
        }
    }

    pub fn parse(symbol: &str) -> Option<Op> {
        Some(match symbol {
            "<" => Op::Lt,
            "<=" => Op::Le,
            ">" => Op::Gt,
            ">=" => Op::Ge,
            _ => return None,
        })
    }

    /// An upper bound (`<`, `<=`) rather than a lower one.
    pub fn is_max(self) -> bool {
        matches!(self, Op::Lt | Op::Le)
    }
}

/// `< 300 MB`: an operator and a value in the metric's canonical unit.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Limit {
    pub op: Op,
    pub value: f64,
    /// For sizes, the unit the limit was written in: its figures are shown in it.
    pub unit: Option<crate::units::SizeUnit>,
    /// For times, whether the limit was written in seconds (`< 10 s`): it is shown so.
    pub seconds: bool,
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Budget {
    pub metric: Metric,
    pub limit: Limit,
    /// The budget's line in the spec (for annotations and `results[].line`).
    pub line: usize,
    /// The column of its metric's key, for messages about it.
    pub col: usize,
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Component {
    pub name: String,
    pub line: usize,
    /// The `workload:` kind, resolved against the binary's registry by the runner.
    pub kind: String,
    /// Where `workload:` is written (for an unknown kind).
    pub kind_pos: Pos,
    /// The workload's `config:` (without `batch_size` and `dtype`), plain
    /// data with positions; a variant's is its component's with its own keys over it.
    pub config: config::Node,
    pub batch_size: usize,
    pub dtype: DType,
    pub seed: u64,
    pub tolerance: Percent,
    /// `drift: 10%`: the most a size may grow since the spec's `anchor`
    /// (a release tag or a named baseline), however the growth was split
    /// between pull requests each within `tolerance`. `None`: not judged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drift: Option<Percent>,
    pub timing: Timing,
    pub budgets: Vec<Budget>,
    /// `checkpoint: { chunk: N }`: the workload's position-wise blocks are
    /// checkpointed in chunks of N positions.
    pub checkpoint: Option<usize>,
    /// Where `checkpoint:` is written (the component's line when it is not).
    pub checkpoint_pos: Pos,
    /// The component the ratio metrics (`loss_ratio`, `step_time_ratio`)
    /// compare against: a variant of the same component, or the component
    /// itself for its variants. `None` for the reference itself.
    pub reference: Option<String>,
    /// `master_weights: f32`: mixed precision, parameters (gradients, AdamW
    /// state) in this dtype, compute in `dtype`.
    pub master_dtype: Option<DType>,
    /// `spans: [attn, mlp]`: the `tracing` span names attributed as blocks
    /// (leaf spans too when named); `None`: every span but the leaves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spans: Option<Vec<SpanName>>,
    /// `generate: { prefill: N, decode: M }`: an inference-only component
    /// that runs the workload's generation loop (no training).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generate: Option<Generate>,
    /// Where `generate:` is written (the component's name when it is not).
    #[serde(default)]
    pub generate_pos: Pos,
}

/// A generation: a prompt of `prefill` tokens, then `decode` steps of one
/// token each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Generate {
    pub prefill: usize,
    pub decode: usize,
}

/// A span name the spec asks for, with where it is written (so a name the
/// model never opens is reported at its place).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SpanName {
    pub name: String,
    pub line: usize,
    pub col: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum EnsembleMetric {
    Total,
    Headroom,
}

impl EnsembleMetric {
    pub fn name(self) -> &'static str {
        match self {
            EnsembleMetric::Total => "total",
            EnsembleMetric::Headroom => "headroom",
        }
    }
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct EnsembleBudget {
    pub metric: EnsembleMetric,
    pub limit: Limit,
    pub line: usize,
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Ensemble {
    pub members: Vec<String>,
    /// The member metric that is summed (a byte metric; `training_peak` by default).
    pub metric: Metric,
    /// How many processes (CUDA contexts) the ensemble runs in; each costs the reserve.
    pub processes: u64,
    pub budgets: Vec<EnsembleBudget>,
    pub line: usize,
    /// Where `metric:` is written (the ensemble's position when it is not).
    pub metric_pos: Pos,
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct DeviceSpec {
    pub name: String,
    pub capacity: Bytes,
    /// Per-process context cost assumed on CPU runs (measured on CUDA).
    pub reserve: Bytes,
    /// On a larger GPU, hold back the difference so the run sees only `capacity`.
    pub emulate: bool,
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Spec {
    /// The file as the user named it (used in messages and annotations).
    #[serde(with = "path_text")]
    pub path: PathBuf,
    pub version: u32,
    pub device: DeviceSpec,
    pub default_tolerance: Percent,
    /// `anchor: v1.4.0`: the pinned report every `drift:` is measured
    /// since: a release tag or a baseline stored under a name (`gate
    /// baseline publish --anchor NAME`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub anchor: Option<AnchorName>,
    pub components: Vec<Component>,
    pub ensemble: Option<Ensemble>,
    /// `harness:`: the adopter's binary that knows the spec's workloads.
    pub harness: Option<HarnessSpec>,
}

/// The name of the report `drift:` budgets are measured since, with where
/// the spec writes it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct AnchorName {
    pub name: String,
    pub line: usize,
    pub col: usize,
}

/// Whether `name` may name an anchor: a release tag or a stored baseline's
/// name, which becomes a file name in the baseline store (`anchors/CARD/NAME.json`):
/// letters, digits, `.`, `_`, `-` and `+`, not starting with `.` and
/// without `..`, at most 100 characters.
pub fn is_anchor_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 100
        && !name.starts_with('.')
        && !name.contains("..")
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '+'))
}

/// `harness:` in the spec: how to build the binary (made with `gate::main!`
/// in the adopter's crate) that measures this spec's workloads.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct HarnessSpec {
    /// The cargo package that has the harness binary.
    pub package: String,
    /// The binary target (`src/bin/NAME.rs`).
    pub bin: String,
    /// Cargo features to build it with (the backend's `cuda` is added on CUDA).
    pub features: Vec<String>,
    /// The manifest to build from, relative to the spec (default: the
    /// `Cargo.toml` beside the spec).
    #[serde(with = "opt_path_text")]
    pub manifest: Option<PathBuf>,
    /// Where `manifest:`'s value is in the spec.
    pub manifest_pos: Option<Pos>,
    /// The line of `harness:`.
    pub line: usize,
}

// The spec travels to a harness as JSON (gate-sdk's src/child.rs), where a path only
// names the file in messages: one that is not UTF-8 goes as its lossy text
// rather than failing the run (serde refuses such a `PathBuf`).
mod path_text {
    use std::path::{Path, PathBuf};

    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(p: &Path, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&p.to_string_lossy())
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<PathBuf, D::Error> {
        String::deserialize(d).map(PathBuf::from)
    }
}

mod opt_path_text {
    use std::path::PathBuf;

    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(p: &Option<PathBuf>, s: S) -> Result<S::Ok, S::Error> {
        match p {
            Some(p) => s.serialize_some(&p.to_string_lossy()),
            None => s.serialize_none(),
        }
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<PathBuf>, D::Error> {
        Option::<String>::deserialize(d).map(|p| p.map(PathBuf::from))
    }
}

impl Spec {
    pub fn component(&self, name: &str) -> Option<&Component> {
        self.components.iter().find(|c| c.name == name)
    }
}

impl std::fmt::Display for Op {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.symbol())
    }
}

impl serde::Serialize for Op {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.symbol())
    }
}

impl<'de> serde::Deserialize<'de> for Op {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Op::parse(&text).ok_or_else(|| serde::de::Error::custom(format!("`{text}` is not one of <, <=, >, >=")))
    }
}
