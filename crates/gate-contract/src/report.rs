//! The report (schema 1): the stable contract other tools read. Add fields
//! freely; never rename or drop one without bumping [`SCHEMA`].

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use gate_probe::{BlockStat, Timeline};
use gate_spec::budget::EnsembleMetric;
use gate_spec::budget::Op;
use gate_spec::metric::{Metric, Unit};
use gate_spec::units::SizeUnit;

/// report.json's version.
pub const SCHEMA: u32 = 1;

/// How a warning that a baseline is another testbed's begins (its
/// sentence, and how a report stored before warnings were typed is read).
pub const DIFFERENT_TESTBED: &str = "baseline from a different testbed: not compared";

/// A metric value with its unit. Bytes are written as integers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MetricValue {
    pub value: f64,
    pub unit: Unit,
}

impl Serialize for MetricValue {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut st = s.serialize_struct("MetricValue", 2)?;
        if self.unit == Unit::Bytes {
            st.serialize_field("value", &(self.value.max(0.0).round() as u64))?;
        } else {
            st.serialize_field("value", &self.value)?;
        }
        st.serialize_field("unit", &self.unit)?;
        st.end()
    }
}

impl<'de> Deserialize<'de> for MetricValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Raw {
            value: f64,
            unit: Unit,
        }
        let r = Raw::deserialize(d)?;
        Ok(MetricValue {
            value: r.value,
            unit: r.unit,
        })
    }
}

/// Where and with what the figures were measured. Reports from different
/// testbeds are never compared.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Testbed {
    pub backend: String,
    pub device_name: String,
    /// The capacity that is gated (the spec's card), whatever card ran the gate.
    pub capacity_bytes: u64,
    /// The declared card's name from the spec.
    pub gated_device: String,
    /// Memory of the device that actually ran the profiles, when known.
    pub device_total_bytes: Option<u64>,
    pub driver: Option<String>,
    pub cuda: Option<String>,
    /// The candle the models ran on; empty for another framework. Kept
    /// beside `framework` so stored reports and the fingerprints of their
    /// baselines read as before.
    #[serde(default)]
    pub candle_version: String,
    /// The framework and its version the models ran on (reports stored
    /// before it have none: their `candle_version` says it).
    // Unknown in a stored report is left out when it is written again, so
    // a report reads back as it was.
    #[serde(default, skip_serializing_if = "crate::protocol::FrameworkId::is_unknown")]
    pub framework: crate::protocol::FrameworkId,
    pub os: String,
    pub arch: String,
}

impl Testbed {
    /// Whether figures measured on `baseline` may be compared with this one's.
    pub fn comparable(&self, baseline: &Testbed) -> bool {
        self.fingerprint() == baseline.fingerprint()
    }

    /// A short stable hash of what makes figures comparable across runs.
    pub fn fingerprint(&self) -> String {
        let mut key = format!(
            "{}|{}|{}|{}|{}|{}|{}",
            self.backend,
            self.comparable_device(),
            self.capacity_bytes,
            self.driver.as_deref().unwrap_or(""),
            self.cuda.as_deref().unwrap_or(""),
            self.candle_version,
            self.arch
        );
        // Another framework than candle (no `candle_version`): its name and
        // version, so its figures meet only its own. A candle run's key is
        // the one its stored baselines were fingerprinted with.
        if self.candle_version.is_empty() && !self.framework.name.is_empty() {
            key.push_str(&format!("|{}|{}", self.framework.name, self.framework.version));
        }
        format!("{:016x}", fnv1a(&key))
    }
}

impl Testbed {
    /// The device as far as it changes the figures. On the CPU the model
    /// name does not: GitHub's hosted runners hand out AMD EPYC or Intel
    /// Xeon at random, and the counting allocator's bytes do not depend on
    /// the CPU (the matmul's cache-sized packing buffers are left out as
    /// scratch, see `probe::alloc::SCRATCH_ALIGN`; `tests/cpu_independence.rs`
    /// runs a profile under other cache sizes). Only the architecture
    /// (`arch`) stays in the fingerprint. On CUDA the card matters.
    pub fn comparable_device(&self) -> &str {
        if self.backend == "cpu" {
            "cpu"
        } else {
            &self.device_name
        }
    }
}

use gate_spec::hash::fnv1a;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// The component was not run (its workload is not available in this build).
    NotMeasured,
    /// The profile failed (out of memory, a device error, a crash, a
    /// non-finite loss); also a kind this gate does not know (a newer
    /// gate's report): its reason is kept, and its figures are never
    /// judged as passing (#54).
    Failed,
}

/// [`ErrorKind`] as a report writes it, any other name read as `failed`.
impl<'de> Deserialize<'de> for ErrorKind {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(rename = "ErrorKind", rename_all = "snake_case")]
        enum Written {
            NotMeasured,
            Failed,
            /// A newer gate's kind.
            #[serde(other)]
            Unknown,
        }
        Ok(match Written::deserialize(d)? {
            Written::NotMeasured => ErrorKind::NotMeasured,
            Written::Failed | Written::Unknown => ErrorKind::Failed,
        })
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ComponentError {
    pub kind: ErrorKind,
    /// The phase it happened in, for failures.
    pub phase: Option<String>,
    pub reason: String,
    /// Failures: the allocator's high-water in the failing phase (out of
    /// memory: about what the tensors held when an allocation failed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_bytes: Option<u64>,
    /// Failures: what kind of failure it was, as the adapter (or, for a
    /// crash, the parent) decided where it was seen: `model`,
    /// `out_of_memory`, `device` or `process`. Absent in reports of gates
    /// before protocol 3, whose kind is then not known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_kind: Option<crate::measurement::FailureKind>,
}

impl ComponentError {
    /// Whether the component's profile failed because an allocation could
    /// not be had (the device's or the host's), as its adapter said.
    pub fn ran_out_of_memory(&self) -> bool {
        self.kind == ErrorKind::Failed && self.failure_kind == Some(crate::measurement::FailureKind::OutOfMemory)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BlockReport {
    pub name: String,
    pub retained_bytes: i64,
    pub peak_bytes: u64,
    pub calls: u64,
    /// Share of the component's retained activations, in percent (top-level blocks only).
    pub share_percent: Option<f64>,
    /// What the baseline's block of the same name retained, when the
    /// component was compared with the baseline (same testbed, same
    /// settings); 0 for a block the baseline did not have.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline_retained_bytes: Option<i64>,
    /// The baseline's block's peak, compared as `baseline_retained_bytes` is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline_peak_bytes: Option<u64>,
    /// What the block held at its exit, where its kept bytes were read at
    /// the forward's end (the CPU): above them, an op after the block freed
    /// the difference (the graph was cut downstream of it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_exit_bytes: Option<i64>,
}

impl BlockReport {
    /// Bytes the block held at its exit that the forward freed before it
    /// ended (a graph cut after it), when there are any.
    pub fn freed_after_exit(&self) -> Option<i64> {
        self.at_exit_bytes.map(|e| e - self.retained_bytes).filter(|&d| d > 0)
    }

    /// Retained bytes gained since the baseline (negative: shrunk); `None`
    /// when not compared.
    pub fn growth_bytes(&self) -> Option<i64> {
        Some(self.retained_bytes - self.baseline_retained_bytes?)
    }

    /// Peak bytes gained since the baseline (negative: shrunk): working
    /// memory the block needs while it runs, kept or not.
    pub fn peak_growth_bytes(&self) -> Option<i64> {
        Some(self.peak_bytes as i64 - self.baseline_peak_bytes? as i64)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ComponentReport {
    pub workload: String,
    pub dtype: String,
    pub batch_size: usize,
    pub seed: u64,
    pub config: serde_json::Value,
    /// The figures this gate knows: a metric or a unit of a newer gate in
    /// a stored report is left out here (its budget's row keeps it, as
    /// [`MetricId::Unknown`]), never compared and never a refusal.
    #[serde(deserialize_with = "known_metrics")]
    pub metrics: BTreeMap<Metric, MetricValue>,
    /// Parameter elements counted on the built model.
    pub param_count: u64,
    /// The closed-form parameter (and frozen-state) bytes, to check `params` against.
    pub analytic_params_bytes: u64,
    /// Parameter tensors the built model holds: each adds the framework's
    /// bookkeeping to `params` beyond the closed form's bytes.
    #[serde(default)]
    pub param_tensors: u64,
    pub batch_bytes: u64,
    /// The gradient store right after `backward()`, before only the parameters'
    /// gradients are kept: candle's extra gradients for untracked operands.
    #[serde(default)]
    pub unpruned_gradient_bytes: u64,
    /// CUDA runs: process memory outside the pool (context, kernels, workspaces).
    pub context_reserve_bytes: Option<u64>,
    /// CUDA runs: the pool's high-water reservation from the device.
    pub pool_reserved_peak_bytes: Option<u64>,
    /// Capacity emulation: bytes held back so the run saw only the spec's card.
    pub emulated_block_bytes: Option<u64>,
    /// Why the warm-up step failed (the profile then ran cold), if it did.
    pub warmup_error: Option<String>,
    pub blocks: Vec<BlockReport>,
    pub step_times_ms: Vec<f64>,
    pub losses: Vec<f64>,
    /// Fingerprint of what makes this component's figures comparable (dtype, batch, config).
    pub fingerprint: String,
    pub error: Option<ComponentError>,
    /// A variant's reference (the component its `loss_ratio` and
    /// `step_time_ratio` compare against); absent for the reference itself
    /// and for components without variants.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<String>,
    /// Mixed precision: the dtype of the master weights (and gradients and
    /// optimizer state); `dtype` is then the compute dtype.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub master_dtype: Option<String>,
    /// Wall time of the component's profile (the child process, start to
    /// exit), in seconds; absent in reports from before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile_seconds: Option<f64>,
    /// Of `profile_seconds`, the time the profile waited for its turn to
    /// time its steps while another one timed theirs (profiles side by
    /// side on one GPU take turns; CPU profiles do not); absent when it
    /// did not wait.
    #[serde(default, skip_serializing_if = "is_zero_seconds")]
    pub turn_wait_seconds: f64,
    /// How long each phase of the profile took, in the order they ran
    /// (`setup` is the child's start until its first phase).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub phase_seconds: Vec<PhaseTime>,
    /// Live bytes over the steady training step and the first inference
    /// call, sampled at every scope boundary and phase mark (the SVG
    /// `timeline-NAME.svg` draws it); absent when nothing was sampled.
    /// Each sample is a string `"T_US LIVE PEAK EVENT"`: microseconds since
    /// its span started, live bytes above `base_bytes`, the highest live
    /// bytes since the previous sample, and `phase:NAME`, `enter:BLOCK`,
    /// `exit:BLOCK` or `end`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeline: Option<Timeline>,
    /// A variant with a `step_time_ratio` budget: its step time over its
    /// reference's, one per interleaved pair of steps (variant, reference)
    /// timed in one process after the byte profiles. Its `step_time_ratio`
    /// is their median, judged with its interval.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub step_time_ratios: Vec<f64>,
    /// Why the interleaved pairs could not be timed (the ratio then comes
    /// from the two profiles' medians, without an interval).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ratio_error: Option<String>,
    /// A variant with a `loss_ratio` budget, from the ratio steps: its loss
    /// and its reference's, each after as many seeded steps as its profile
    /// takes. `loss_ratio` uses them when the reference's own profile has no
    /// loss (it does not fit the emulated card).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ratio_losses: Option<RatioLosses>,
    /// Capacity emulation: the bytes freed for the ratio steps (they measure
    /// time and loss; every byte figure is from the emulated card).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ratio_lifted_bytes: Option<u64>,
    /// The blocks the model checkpointed in its training steps (seen by
    /// the SDK as they ran), each by scope, whole or in chunks.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checkpointed: Vec<crate::measurement::CheckpointedBlock>,
    /// Where the byte figures come from, written only when it is not the
    /// backend's exact counter (the counting allocator, the CUDA pool):
    /// `nvml_process` when the model's tensors were not in the CUDA pool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_source: Option<gate_probe::MemorySource>,
    /// Which trainable parameters the first training step gave a gradient;
    /// absent when the harness could not tell (an older SDK).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gradient_coverage: Option<crate::measurement::GradientCoverage>,
    /// The live bytes the backward left above the pre-forward level once
    /// pruned: the gradient store and the framework's bookkeeping of it
    /// (`metrics.gradients` is the gradient tensors' own bytes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gradient_live_bytes: Option<u64>,
    /// The live bytes the build left, where `metrics.params` is the
    /// parameters' own tensor bytes as the framework's adapter counted them
    /// (burn's record); absent where `params` is these live bytes (candle).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub param_live_bytes: Option<u64>,
    /// The `tracing` spans the model entered, by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub spans_entered: Vec<String>,
    /// Why the model's spans could not be attributed (a reason and a hint).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spans_unavailable: Option<String>,
}

impl ComponentReport {
    /// The coverage when some trainable parameter got no gradient: the
    /// component's training figures then describe a step that does not
    /// train the whole model.
    pub fn untrained(&self) -> Option<&crate::measurement::GradientCoverage> {
        self.gradient_coverage.as_ref().filter(|c| !c.is_complete())
    }
}

/// A variant's and its reference's loss from the ratio steps.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RatioLosses {
    pub variant: f64,
    pub reference: f64,
}

/// One phase of a profile and its wall time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PhaseTime {
    /// The phase's name (`build`, `forward`, ..., as in `error.phase`).
    pub phase: String,
    pub seconds: f64,
}

impl ComponentReport {
    pub fn value(&self, metric: Metric) -> Option<f64> {
        self.metrics.get(&metric).map(|v| v.value)
    }

    /// Builds the component's block rows from raw block stats (ranked as
    /// given) and, when the activations were measured, closes them with the
    /// [`UNATTRIBUTED`] row, last.
    pub fn blocks_from(stats: &[BlockStat], activations: Option<f64>) -> Vec<BlockReport> {
        let share = |name: &str, bytes: i64| match activations {
            Some(a) if a > 0.0 && !name.contains('.') => Some((bytes as f64 / a * 1000.0).round() / 10.0),
            _ => None,
        };
        let mut rows: Vec<BlockReport> = stats
            .iter()
            .map(|b| BlockReport {
                name: b.name.clone(),
                retained_bytes: b.retained_bytes,
                peak_bytes: b.peak_bytes,
                calls: b.calls,
                share_percent: share(&b.name, b.retained_bytes),
                baseline_retained_bytes: None,
                baseline_peak_bytes: None,
                at_exit_bytes: None,
            })
            .collect();
        if let Some(a) = activations {
            let top: i64 = stats
                .iter()
                .filter(|b| !b.name.contains('.'))
                .map(|b| b.retained_bytes)
                .sum();
            let rest = a.round() as i64 - top;
            rows.push(BlockReport {
                name: UNATTRIBUTED.into(),
                retained_bytes: rest,
                peak_bytes: 0,
                calls: 0,
                share_percent: share(UNATTRIBUTED, rest),
                baseline_retained_bytes: None,
                baseline_peak_bytes: None,
                at_exit_bytes: None,
            });
        }
        rows
    }
}

/// The last block row of a measured component: its activations minus what
/// the top-level blocks (names without a `.`) retain, so those rows and this
/// one add up to the activations exactly. It is what the forward keeps
/// outside any scope (reshapes and copies between blocks, unscoped code).
/// It has no peak and no calls.
///
/// Negative means the top-level blocks claim more than the forward kept:
/// bytes a block held at its exit were freed later outside any block (not
/// kept for backward after all), or a checkpointed block's per-chunk figures
/// were summed. That is an attribution bug; the row stays negative so that
/// the sum still closes and the over-count shows instead of being clamped
/// away, and tests/attribution.rs fails every built-in workload whose row is
/// below −1 % of its activations.
pub const UNATTRIBUTED: &str = "(unattributed)";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EnsembleReport {
    pub members: Vec<String>,
    pub metric: Metric,
    /// Σ members' metric + reserve × processes; absent when a member was not measured.
    pub total_bytes: Option<u64>,
    /// capacity − total (negative when the ensemble does not fit).
    pub headroom_bytes: Option<i64>,
    pub reserve_bytes: u64,
    /// Where the per-process reserve came from.
    pub reserve_source: ReserveSource,
    pub processes: u64,
    pub capacity_bytes: u64,
    /// Members with no value for the metric.
    pub missing: Vec<String>,
}

/// Where an ensemble's per-process reserve came from (`reserve_source`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReserveSource {
    /// The spec's `reserve:` (CPU runs, or no measurement).
    Declared,
    /// Measured by NVML on the GPU (CUDA runs).
    Measured,
}

impl std::fmt::Display for ReserveSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ReserveSource::Declared => "declared",
            ReserveSource::Measured => "measured",
        })
    }
}

/// A budget's status. A name this gate does not know (a newer gate's
/// report) reads as `not_measured`: shown, never counted as a pass (#54).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Pass,
    Fail,
    Regressed,
    NotMeasured,
    /// Regressed against the baseline, and the pull request carries the
    /// acknowledge label (never under `--strict`): a warning, not a failure.
    Acknowledged,
    /// A timed figure whose confidence interval straddles the limit: it
    /// neither clearly passes nor clearly fails. A warning (it fails the
    /// run under `--strict`), never a failure on its own.
    Inconclusive,
}

impl<'de> Deserialize<'de> for Status {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(rename = "Status", rename_all = "snake_case")]
        enum Written {
            Pass,
            Fail,
            Regressed,
            NotMeasured,
            Acknowledged,
            Inconclusive,
            /// A newer gate's status.
            #[serde(other)]
            Unknown,
        }
        Ok(match Written::deserialize(d)? {
            Written::Pass => Status::Pass,
            Written::Fail => Status::Fail,
            Written::Regressed => Status::Regressed,
            Written::NotMeasured | Written::Unknown => Status::NotMeasured,
            Written::Acknowledged => Status::Acknowledged,
            Written::Inconclusive => Status::Inconclusive,
        })
    }
}

impl Status {
    pub fn name(self) -> &'static str {
        match self {
            Status::Pass => "pass",
            Status::Fail => "fail",
            Status::Regressed => "regressed",
            Status::NotMeasured => "not_measured",
            Status::Acknowledged => "acknowledged",
            Status::Inconclusive => "inconclusive",
        }
    }
}

/// A distribution-free confidence interval for a median (`report::interval`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    pub low: f64,
    pub high: f64,
    /// Its exact coverage (at least the 95 % asked for; 0.965 for 15 samples).
    pub confidence: f64,
    /// How many samples: interleaved pairs for `step_time_ratio`, timed steps for `step_time`.
    pub samples: usize,
}

/// Whose budget a result judges: a component (or a variant's,
/// `NAME@VARIANT`), or the ensemble. Written in reports as the component's
/// name, and `ensemble` for the ensemble, a name no spec may give a
/// component (gate-spec refuses it), so the text is never ambiguous.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Subject {
    /// A component or a variant, by its name in the report.
    Component(String),
    /// The ensemble's own rows (`total`, `headroom`).
    Ensemble,
}

impl Subject {
    /// How reports write the ensemble.
    pub const ENSEMBLE: &'static str = "ensemble";

    /// The name reports write.
    pub fn as_str(&self) -> &str {
        match self {
            Subject::Component(name) => name,
            Subject::Ensemble => Subject::ENSEMBLE,
        }
    }

    /// Whether this is the ensemble's row.
    pub fn is_ensemble(&self) -> bool {
        matches!(self, Subject::Ensemble)
    }

    /// The component's name; `None` for the ensemble.
    pub fn component(&self) -> Option<&str> {
        match self {
            Subject::Component(name) => Some(name),
            Subject::Ensemble => None,
        }
    }
}

impl From<&str> for Subject {
    fn from(name: &str) -> Self {
        if name == Subject::ENSEMBLE {
            Subject::Ensemble
        } else {
            Subject::Component(name.to_string())
        }
    }
}

impl From<String> for Subject {
    fn from(name: String) -> Self {
        if name == Subject::ENSEMBLE {
            Subject::Ensemble
        } else {
            Subject::Component(name)
        }
    }
}

impl std::fmt::Display for Subject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A subject compared with a written name (`r.component == "tft"`).
impl PartialEq<&str> for Subject {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<str> for Subject {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<String> for Subject {
    fn eq(&self, other: &String) -> bool {
        self.as_str() == other
    }
}

/// Ordered as reports list them: by the written name.
impl Ord for Subject {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl PartialOrd for Subject {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Serialize for Subject {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Subject {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d).map(Subject::from)
    }
}

/// Which budget of its subject a result judges: a component's metric, or
/// the ensemble's `total` / `headroom`. Written in reports as the metric's
/// name; a name this gate does not know (a report of a newer gate) is kept
/// as written and never judged.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum MetricId {
    /// A metric of a component (or a variant).
    Component(Metric),
    /// One of the ensemble's.
    Ensemble(EnsembleMetric),
    /// A name no metric of this gate has, as a report wrote it.
    Unknown(String),
}

impl MetricId {
    /// The name reports write.
    pub fn as_str(&self) -> &str {
        match self {
            MetricId::Component(m) => m.name(),
            MetricId::Ensemble(m) => m.name(),
            MetricId::Unknown(name) => name,
        }
    }

    /// The component metric this is, if it is one.
    pub fn metric(&self) -> Option<Metric> {
        match self {
            MetricId::Component(m) => Some(*m),
            _ => None,
        }
    }

    /// Reads a written name: a component metric's, else the ensemble's.
    pub fn parse(name: &str) -> MetricId {
        if let Some(m) = Metric::parse(name) {
            return MetricId::Component(m);
        }
        match name {
            "total" => MetricId::Ensemble(EnsembleMetric::Total),
            "headroom" => MetricId::Ensemble(EnsembleMetric::Headroom),
            _ => MetricId::Unknown(name.to_string()),
        }
    }
}

impl From<Metric> for MetricId {
    fn from(m: Metric) -> Self {
        MetricId::Component(m)
    }
}

impl From<EnsembleMetric> for MetricId {
    fn from(m: EnsembleMetric) -> Self {
        MetricId::Ensemble(m)
    }
}

impl std::fmt::Display for MetricId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A metric compared with a written name (`r.metric == "params"`).
impl PartialEq<&str> for MetricId {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<str> for MetricId {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl Serialize for MetricId {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for MetricId {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d).map(|name| MetricId::parse(&name))
    }
}

/// A component's figures as a report wrote them, less those of a metric
/// or a unit this gate does not know (a newer gate's): nothing compares
/// them, and reading them must not refuse the report (#54).
fn known_metrics<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeMap<Metric, MetricValue>, D::Error> {
    let raw = BTreeMap::<String, MetricValue>::deserialize(d)?;
    Ok(raw
        .into_iter()
        .filter_map(|(name, v)| Some((Metric::parse(&name)?, v)))
        .filter(|(_, v)| v.unit != Unit::Unknown)
        .collect())
}

/// One budget's verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BudgetResult {
    /// Whose budget: a component's, or the ensemble's.
    pub component: Subject,
    /// Which of its budgets: a metric, or the ensemble's `total` / `headroom`.
    pub metric: MetricId,
    pub unit: Unit,
    /// `<`, `<=`, `>`, `>=`.
    pub op: Op,
    pub limit: f64,
    pub measured: Option<f64>,
    pub baseline: Option<f64>,
    /// Allowed growth over the baseline, in percent.
    pub tolerance_percent: f64,
    pub status: Status,
    /// The budget's line in the spec.
    pub line: usize,
    /// Why it is not measured or failed without a value; or a note on the comparison.
    pub reason: Option<String>,
    /// Sizes: the unit the limit was written in (`300 MB`); figures are shown in it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_unit: Option<SizeUnit>,
    /// Times: the limit was written in seconds (`< 10 s`), and is shown so.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub limit_in_seconds: bool,
    /// Why the baseline's figure is shown but not compared, e.g.
    /// `config changed: hidden_dim 256 → 300`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_compared: Option<String>,
    /// The component's settings differ from the baseline's (e.g. `config
    /// changed: intermediate_size 64 → 128`): the figures are compared and
    /// judged all the same, and this names the change beside the delta.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_changed: Option<String>,
    /// The baseline's budget when this run's differs from it (the change is
    /// in this PR): its operator and limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline_op: Option<Op>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline_limit: Option<f64>,
    /// Timed figures: the 95 % interval of the median `measured` is; the
    /// status is judged on it (pass or fail only when all of it is on one
    /// side of the limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<Interval>,
    /// A training figure of a step that left trainable parameters without
    /// a gradient: it describes a smaller model than was built.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub untrained: bool,
}

impl BudgetResult {
    /// A limit of this budget as written in the spec: `< 300 MB`, `< 10 s`.
    pub fn limit_text(&self, op: Op, value: f64) -> String {
        format!("{} {}", op.symbol(), self.limit_value_text(value))
    }

    /// A limit's figure as written, without its comparison: `300 MB`, `10 s`.
    pub fn limit_value_text(&self, value: f64) -> String {
        if self.unit == Unit::Ms && self.limit_in_seconds {
            return gate_spec::metric::format_limit_in_seconds("", value)
                .trim_start()
                .to_string();
        }
        gate_spec::metric::format_limit(self.unit, self.display_unit, "", value)
            .trim_start()
            .to_string()
    }

    /// measured / limit, the factor by which a budget is used.
    pub fn ratio(&self) -> Option<f64> {
        self.measured.filter(|_| self.limit != 0.0).map(|m| m / self.limit)
    }

    /// Change against the baseline (measured − baseline).
    pub fn delta(&self) -> Option<f64> {
        Some(self.measured? - self.baseline?)
    }

    /// Whether the budget changed against the baseline's.
    pub fn budget_changed(&self) -> bool {
        self.baseline_limit.is_some() || self.baseline_op.is_some()
    }
}

/// What a warning is about. New kinds may come in any release.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum WarningKind {
    /// No baseline was found: regressions are not checked.
    NoBaseline,
    /// The baseline is from another testbed: its figures are not compared.
    DifferentTestbed,
    /// A component, or one budget's metric, was not measured.
    NotMeasured,
    /// A budget's interval straddles its limit.
    Inconclusive,
    /// A component's `growth` and `inference_peak` both fail: a leak.
    Leak,
    /// The interleaved steps of `step_time_ratio` failed.
    RatioFailed,
    /// Measured params and the closed form disagree.
    ParamsDisagree,
    /// A line that speaks for the acknowledge label: who acknowledged the
    /// regressions, or that `--strict` ignored the label. Read from an
    /// artifact, such a line is never trusted (the comment writes it again
    /// from what GitHub confirms).
    Acknowledgement,
    /// The acknowledge label could not be verified or confirmed.
    AckUnconfirmed,
    /// A training step left trainable parameters without a gradient.
    Untrained,
    /// A generation's decode steps grew no memory: no cache, or one made
    /// whole in the prefill.
    CacheNeverGrew,
    /// Anything else (and whatever an older report says that is none of the above).
    #[serde(other)]
    Other,
}

/// One warning of the run: the sentence said to the reader, with what it
/// is about. In report.json `summary.warnings` holds the sentences (schema
/// 1 has strings there) and `summary.warning_kinds` what each is about, in
/// the same order, so a reader of the file gets them typed, never from the
/// words. Only a report of an older gate, which has no `warning_kinds`, is
/// read back from its sentences ([`Warning::from_text`]).
#[derive(Debug, Clone, Eq)]
#[non_exhaustive]
pub struct Warning {
    /// The component or variant (`NAME@VARIANT`) it concerns, `ensemble`
    /// for the ensemble, `None` for the whole run.
    pub component: Option<String>,
    /// What it is about.
    pub kind: WarningKind,
    /// The whole sentence, as shown.
    pub text: String,
    /// Read back from its sentence (a report of an older gate): its
    /// component and kind are a reading, not a fact, and a report written
    /// again does not state them as typed.
    from_sentence: bool,
}

/// Two warnings are the same when they say the same thing about the same
/// component, however each was come by.
impl PartialEq for Warning {
    fn eq(&self, other: &Self) -> bool {
        (&self.component, self.kind, &self.text) == (&other.component, other.kind, &other.text)
    }
}

impl Warning {
    /// A warning about `component` (`None`: the whole run).
    pub fn new(component: Option<&str>, kind: WarningKind, text: impl Into<String>) -> Self {
        Warning {
            component: component.map(str::to_string),
            kind,
            text: text.into(),
            from_sentence: false,
        }
    }

    /// A warning about the whole run.
    pub fn run_wide(kind: WarningKind, text: impl Into<String>) -> Self {
        Warning::new(None, kind, text)
    }

    /// The sentence.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The one parser of warning sentences, used only where a report of
    /// an older gate is read (its report.json, baselines and shards store
    /// the sentence alone). The component is the sentence's `NAME: ` or `NAME.metric: `
    /// lead when that is a component name; the kind is recovered from the
    /// verdict's wording, and any line in the words of an acknowledgement
    /// ("acknowledged by", "accepted by", "(added by @") is read as
    /// [`WarningKind::Acknowledgement`], whoever wrote it.
    pub fn from_text(text: impl Into<String>) -> Self {
        let text = text.into();
        let lead = lead_component(&text);
        let component = lead.map(|(name, _)| name.to_string());
        let of_metric = lead.is_some_and(|(_, metric)| metric);
        let lower = text.to_lowercase();
        let rest = component
            .as_deref()
            .and_then(|c| text.get(c.len()..))
            .map(|r| r.split_once(": ").map_or(r, |(_, after)| after))
            .unwrap_or("");
        let kind = if reads_as_acknowledgement(&text) {
            WarningKind::Acknowledgement
        } else if lower.contains("label could not be verified") || lower.contains("acknowledgement is not confirmed") {
            WarningKind::AckUnconfirmed
        } else if text.starts_with("no baseline (") {
            WarningKind::NoBaseline
        } else if text.starts_with(DIFFERENT_TESTBED) {
            WarningKind::DifferentTestbed
        } else if component.is_none() {
            WarningKind::Other
        } else if rest.starts_with("inconclusive: ") {
            WarningKind::Inconclusive
        } else if of_metric || rest.starts_with("not measured") {
            // `NAME.metric: why` is the verdict's only other line about a metric.
            WarningKind::NotMeasured
        } else if rest.starts_with("growth (") && rest.contains("leak") {
            WarningKind::Leak
        } else if rest.starts_with("the interleaved steps for step_time_ratio failed") {
            WarningKind::RatioFailed
        } else if rest.starts_with("measured params (") {
            WarningKind::ParamsDisagree
        } else if rest.starts_with(UNTRAINED_LEAD) {
            WarningKind::Untrained
        } else if rest.starts_with(CACHE_NEVER_GREW_LEAD) {
            WarningKind::CacheNeverGrew
        } else {
            WarningKind::Other
        };
        Warning {
            component,
            kind,
            text,
            from_sentence: true,
        }
    }
}

/// How the warning of a generation whose cache never grew begins, after `NAME: `.
pub const CACHE_NEVER_GREW_LEAD: &str = "the decode steps grew no cache: ";

/// How the warning of a step that leaves parameters without a gradient
/// begins, after `NAME: `.
pub const UNTRAINED_LEAD: &str = "the training step does not train the whole model: ";

/// The component a sentence leads with: `NAME: ` or `NAME.metric: `, where
/// NAME is written as component names are (letters, digits, `_`, `-`, and
/// `@` before a variant's name), and whether a metric follows it.
fn lead_component(text: &str) -> Option<(&str, bool)> {
    let (lead, _) = text.split_once(": ")?;
    let (name, of_metric) = lead.split_once('.').map_or((lead, false), |(n, _)| (n, true));
    let ok = gate_spec::name::is_component_name(name);
    ok.then_some((name, of_metric))
}

impl std::fmt::Display for Warning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

/// A warning equals a sentence when its text is that sentence.
impl PartialEq<str> for Warning {
    fn eq(&self, other: &str) -> bool {
        self.text == other
    }
}

impl PartialEq<&str> for Warning {
    fn eq(&self, other: &&str) -> bool {
        self.text == *other
    }
}

impl PartialEq<String> for Warning {
    fn eq(&self, other: &String) -> bool {
        &self.text == other
    }
}

impl Serialize for Warning {
    /// The sentence alone: report.json is what schema 1 always wrote.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text)
    }
}

impl<'de> Deserialize<'de> for Warning {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d).map(Warning::from_text)
    }
}

/// The run's verdict: `pass` or `fail`. A name this gate does not know (a
/// newer gate's report) reads as `fail`: never a pass it did not see (#54).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    Pass,
    Fail,
}

impl<'de> Deserialize<'de> for RunStatus {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(rename = "RunStatus", rename_all = "snake_case")]
        enum Written {
            Pass,
            Fail,
            /// A newer gate's verdict.
            #[serde(other)]
            Unknown,
        }
        Ok(match Written::deserialize(d)? {
            Written::Pass => RunStatus::Pass,
            Written::Fail | Written::Unknown => RunStatus::Fail,
        })
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(into = "SummaryFile", from = "SummaryFile")]
pub struct Summary {
    /// `pass` or `fail` (warnings do not fail unless `--strict`).
    pub status: RunStatus,
    pub passed: usize,
    pub failed: usize,
    pub regressed: usize,
    pub not_measured: usize,
    /// Budgets whose interval straddles the limit (each also a warning).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub inconclusive: usize,
    /// What the run warns about, each written in report.json as its
    /// sentence (see [`Warning`]).
    pub warnings: Vec<Warning>,
    pub strict: bool,
    /// Budgets whose baseline figure is shown but not compared (the
    /// component's config, dtype, batch or seed changed).
    #[serde(default)]
    pub not_compared: usize,
    /// Budgets this run has that the baseline's spec did not, had with
    /// another limit, or had and this one dropped: a PR cannot loosen its
    /// own gate unseen. In report.json `budget_changes` holds their
    /// sentences (`tft.activations: budget < 200 MB → < 250 MB in this PR`)
    /// and `budget_change_kinds` the facts, in the same order.
    pub budget_changes: Vec<BudgetChange>,
    /// Regressions the pull request's acknowledge label turned into warnings.
    #[serde(default)]
    pub acknowledged: usize,
    /// The acknowledge label on the pull request, who added it and when;
    /// recorded under `--strict` too, where it is ignored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acknowledgement: Option<Acknowledgement>,
    /// How a figure was measured where that is not the usual way, e.g. a
    /// ratio stepped with the card's emulation lifted. Facts, not warnings:
    /// they never fail a run, `--strict` included. Every output shows them.
    /// In report.json `notes` holds their sentences and `note_kinds` what
    /// each is about, in the same order (as the warnings).
    pub notes: Vec<Note>,
}

/// What a note is about. New kinds may come in any release.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum NoteKind {
    /// `params` is the bytes of what was built: the workload gives no
    /// closed form to check it against.
    ParamsUnchecked,
    /// No block was attributed from the model's `tracing` spans (the note
    /// says why).
    SpansUnattributed,
    /// Tensor bytes not from the CUDA pool: NVML's per-process figures.
    NotFromPool,
    /// The ratios stepped with the emulated card's hold-back lifted: they
    /// measure time and loss only.
    RatioEmulationLifted,
    /// `loss_ratio` compares losses from the ratio steps: the reference's
    /// own profile gave none.
    LossFromRatioSteps,
    /// Anything else (and every note of a report from before notes were typed).
    #[serde(other)]
    Other,
}

/// One note of the run: the sentence shown, with what it is about and the
/// components (or variants) it names (none: the whole run).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Note {
    /// The components it concerns.
    pub components: Vec<String>,
    /// What it is about.
    pub kind: NoteKind,
    /// The whole sentence, as shown.
    pub text: String,
}

impl Note {
    /// A note of `kind` about `components`.
    pub fn new(components: Vec<String>, kind: NoteKind, text: impl Into<String>) -> Self {
        Note {
            components,
            kind,
            text: text.into(),
        }
    }
}

impl std::fmt::Display for Note {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

/// How a budget differs from the baseline spec's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BudgetChangeKind {
    /// The baseline's spec had no such budget (on a component it measured).
    Added,
    /// Another comparison or limit.
    Changed,
    /// This run's spec dropped it.
    Removed,
    /// A kind this gate does not know, read from a report of a newer gate:
    /// its sentence is shown as written, nothing is judged by it.
    #[serde(other)]
    Unknown,
}

/// A budget's limit as a spec states it, in its metric's unit (the fact's
/// `unit`): `< 200 MB` is `Lt` and 200,000,000 bytes, `< 10 s` is `Lt` and
/// 10,000 ms, `< 2` of a ratio is `Lt` and 2.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Limit {
    pub op: Op,
    pub value: f64,
}

/// One budget changed against the baseline: which, how, the limits before
/// and after, and the sentence every output shows.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct BudgetChange {
    /// What it is of; `None` in a report from before budget changes were
    /// typed (its sentence is all there is).
    pub fact: Option<BudgetChangeFact>,
    /// The whole sentence, as shown.
    pub text: String,
}

/// What a [`BudgetChange`] states, typed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BudgetChangeFact {
    pub component: Subject,
    pub metric: MetricId,
    /// The limits' unit: the metric's.
    pub unit: Unit,
    pub change: BudgetChangeKind,
    /// The baseline spec's limit; none when added.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<Limit>,
    /// This run's limit; none when removed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<Limit>,
}

impl BudgetChange {
    /// A change stated by `fact` and shown as `text`.
    pub fn new(fact: BudgetChangeFact, text: impl Into<String>) -> Self {
        BudgetChange {
            fact: Some(fact),
            text: text.into(),
        }
    }
}

impl std::fmt::Display for BudgetChange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

/// What one note is about, as report.json's `summary.note_kinds` says it.
#[derive(Serialize, Deserialize)]
struct NoteTag {
    components: Vec<String>,
    kind: NoteKind,
}

/// A label on the pull request that accepts its regressions against the
/// baseline: the label, who added it (a login) and when (as GitHub writes
/// it, `2026-01-02T03:04:05Z`). Only someone with triage or write access to
/// the repository can add a label, so the label is the approval.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Acknowledgement {
    pub label: String,
    pub by: String,
    pub at: String,
}

/// What the verdict is told about the acknowledge label.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum AckInput {
    /// Not asked: not a pull request, `--strict`, or no label configured.
    #[default]
    NotAsked,
    /// Asked: the label is not on the pull request.
    Absent { label: String },
    /// The label is on the pull request.
    Present(Acknowledgement),
    /// GitHub could not be asked; regressions stay regressions.
    Unverified { label: String, reason: String },
}

fn is_zero_seconds(s: &f64) -> bool {
    *s == 0.0
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// What a warning is about, beside its sentence in report.json.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct WarningTag {
    component: Option<String>,
    kind: WarningKind,
}

/// [`Summary`] as report.json writes it: the warnings' sentences where
/// schema 1 always had them, and what each is about beside them.
#[derive(Serialize, Deserialize)]
struct SummaryFile {
    status: RunStatus,
    passed: usize,
    failed: usize,
    regressed: usize,
    not_measured: usize,
    #[serde(default, skip_serializing_if = "is_zero")]
    inconclusive: usize,
    warnings: Vec<String>,
    /// Absent from reports of gates before it: their warnings are read from their sentences.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    warning_kinds: Option<Vec<WarningTag>>,
    strict: bool,
    #[serde(default)]
    not_compared: usize,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    budget_changes: Vec<String>,
    /// Absent from reports of gates before budget changes were typed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    budget_change_kinds: Option<Vec<BudgetChangeFact>>,
    #[serde(default)]
    acknowledged: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    acknowledgement: Option<Acknowledgement>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    notes: Vec<String>,
    /// Absent from reports of gates before notes were typed (each is then `other`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    note_kinds: Vec<NoteTag>,
}

impl From<Summary> for SummaryFile {
    fn from(s: Summary) -> Self {
        // Kinds read back from an older report's sentences are not stated as
        // typed: such a report is written again as it was.
        let kinds = (!s.warnings.iter().any(|w| w.from_sentence)).then(|| {
            s.warnings
                .iter()
                .map(|w| WarningTag {
                    component: w.component.clone(),
                    kind: w.kind,
                })
                .collect()
        });
        SummaryFile {
            status: s.status,
            passed: s.passed,
            failed: s.failed,
            regressed: s.regressed,
            not_measured: s.not_measured,
            inconclusive: s.inconclusive,
            warnings: s.warnings.into_iter().map(|w| w.text).collect(),
            warning_kinds: kinds,
            strict: s.strict,
            not_compared: s.not_compared,
            // Facts only when every change has one: a report read from
            // before is written again as it was.
            budget_change_kinds: (!s.budget_changes.is_empty())
                .then(|| {
                    s.budget_changes
                        .iter()
                        .map(|c| c.fact.clone())
                        .collect::<Option<Vec<_>>>()
                })
                .flatten(),
            budget_changes: s.budget_changes.into_iter().map(|c| c.text).collect(),
            acknowledged: s.acknowledged,
            acknowledgement: s.acknowledgement,
            note_kinds: s
                .notes
                .iter()
                .map(|n| NoteTag {
                    components: n.components.clone(),
                    kind: n.kind,
                })
                .collect(),
            notes: s.notes.into_iter().map(|n| n.text).collect(),
        }
    }
}

impl From<SummaryFile> for Summary {
    fn from(f: SummaryFile) -> Self {
        let warnings = match f.warning_kinds {
            Some(tags) if tags.len() == f.warnings.len() => f
                .warnings
                .into_iter()
                .zip(tags)
                .map(|(text, tag)| {
                    // Whatever a file says it is, a line in the words of an
                    // acknowledgement is one: `gate comment` then writes it
                    // again from what GitHub confirms, or drops it.
                    let kind = if reads_as_acknowledgement(&text) {
                        WarningKind::Acknowledgement
                    } else {
                        tag.kind
                    };
                    Warning {
                        component: tag.component,
                        kind,
                        text,
                        from_sentence: false,
                    }
                })
                .collect(),
            _ => f.warnings.into_iter().map(Warning::from_text).collect(),
        };
        Summary {
            status: f.status,
            passed: f.passed,
            failed: f.failed,
            regressed: f.regressed,
            not_measured: f.not_measured,
            inconclusive: f.inconclusive,
            warnings,
            strict: f.strict,
            not_compared: f.not_compared,
            budget_changes: match f.budget_change_kinds {
                Some(facts) if facts.len() == f.budget_changes.len() => f
                    .budget_changes
                    .into_iter()
                    .zip(facts)
                    .map(|(text, fact)| BudgetChange::new(fact, text))
                    .collect(),
                _ => f
                    .budget_changes
                    .into_iter()
                    .map(|text| BudgetChange { fact: None, text })
                    .collect(),
            },
            acknowledged: f.acknowledged,
            acknowledgement: f.acknowledgement,
            notes: match f.note_kinds.len() == f.notes.len() {
                true => f
                    .notes
                    .into_iter()
                    .zip(f.note_kinds)
                    .map(|(text, tag)| Note::new(tag.components, tag.kind, text))
                    .collect(),
                false => f
                    .notes
                    .into_iter()
                    .map(|text| Note::new(Vec::new(), NoteKind::Other, text))
                    .collect(),
            },
        }
    }
}

/// Whether a sentence is in the words of an acknowledgement.
fn reads_as_acknowledgement(text: &str) -> bool {
    let lower = text.to_lowercase();
    ["acknowledged by", "accepted by", "(added by @"]
        .iter()
        .any(|w| lower.contains(w))
}

impl Summary {
    pub fn passed_run(&self) -> bool {
        self.status == RunStatus::Pass
    }

    /// The run passed only because regressions count as acknowledged, and
    /// no one's acknowledgement stands (`gate comment` found none GitHub
    /// confirms, and took the claim away): neither a pass nor a failure
    /// until a writer adds the label (#43: was shown as PASS, `success`).
    pub fn pass_unconfirmed(&self) -> bool {
        self.passed_run() && self.acknowledged > 0 && self.acknowledgement.is_none()
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BaselineInfo {
    /// Where it came from: a file path or `commit SHA`.
    pub source: String,
    pub commit: Option<String>,
    /// Whether its testbed matched; figures are compared only when it does.
    pub comparable: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub schema: u32,
    pub gate_version: String,
    pub commit: Option<String>,
    /// The spec file as named on the command line.
    pub spec: String,
    pub testbed: Testbed,
    pub components: BTreeMap<String, ComponentReport>,
    pub ensemble: Option<EnsembleReport>,
    pub results: Vec<BudgetResult>,
    pub summary: Summary,
    pub baseline: Option<BaselineInfo>,
    /// Wall time of the whole run, in seconds.
    pub wall_seconds: f64,
    /// `gate check --plan`: the measured fix of each component that failed
    /// a budget, by component (`gate plan`'s plan.json for each).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub plans: BTreeMap<String, crate::plan::Plan>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_testbed_without_framework_loads_and_keeps_its_fingerprint() {
        let stored = r#"{"backend": "cpu", "device_name": "x", "capacity_bytes": 1, "gated_device": "card",
            "device_total_bytes": null, "driver": null, "cuda": null, "candle_version": "0.11.1", "os": "linux",
            "arch": "x86_64"}"#;
        let old: Testbed = serde_json::from_str(stored).unwrap();
        assert_eq!(old.framework, crate::protocol::FrameworkId::default());
        let now = Testbed {
            framework: crate::protocol::FrameworkId {
                name: "candle".into(),
                version: "0.11.1".into(),
            },
            ..old.clone()
        };
        assert_eq!(old.fingerprint(), now.fingerprint());
        // Another framework meets only its own figures.
        let burn = |version: &str| Testbed {
            candle_version: String::new(),
            framework: crate::protocol::FrameworkId {
                name: "burn".into(),
                version: version.into(),
            },
            ..old.clone()
        };
        assert_ne!(burn("0.22.1").fingerprint(), old.fingerprint());
        assert_ne!(burn("0.22.1").fingerprint(), burn("0.23.0").fingerprint());
        // A report without `candle_version` (a burn run's) loads too.
        let json = serde_json::to_value(burn("0.22.1")).unwrap();
        let mut obj = json.as_object().unwrap().clone();
        obj.remove("candle_version");
        let back: Testbed = serde_json::from_value(obj.into()).unwrap();
        assert_eq!(back, burn("0.22.1"));
    }

    #[test]
    fn a_cpu_testbed_is_any_cpu_of_its_architecture_a_gpu_is_its_card() {
        let epyc = Testbed {
            backend: "cpu".into(),
            device_name: "AMD EPYC 7763 64-Core Processor".into(),
            arch: "x86_64".into(),
            ..Testbed::default()
        };
        let xeon = Testbed {
            device_name: "Intel(R) Xeon(R) Platinum 8370C CPU @ 2.80GHz".into(),
            ..epyc.clone()
        };
        assert_eq!(epyc.fingerprint(), xeon.fingerprint());
        let arm = Testbed {
            arch: "aarch64".into(),
            ..epyc.clone()
        };
        assert_ne!(epyc.fingerprint(), arm.fingerprint());
        let h200 = Testbed {
            backend: "cuda".into(),
            device_name: "NVIDIA H200".into(),
            ..epyc.clone()
        };
        let a100 = Testbed {
            device_name: "NVIDIA A100".into(),
            ..h200.clone()
        };
        assert_ne!(h200.fingerprint(), a100.fingerprint());
    }

    fn stat(name: &str, retained_bytes: i64) -> BlockStat {
        BlockStat {
            name: name.into(),
            retained_bytes,
            peak_bytes: 7,
            calls: 1,
        }
    }

    fn row(name: &str, retained_bytes: i64, peak_bytes: u64, calls: u64, share: Option<f64>) -> BlockReport {
        BlockReport {
            name: name.into(),
            retained_bytes,
            peak_bytes,
            calls,
            share_percent: share,
            baseline_retained_bytes: None,
            baseline_peak_bytes: None,
            at_exit_bytes: None,
        }
    }

    #[test]
    fn the_unattributed_row_closes_the_top_level_blocks_on_the_activations() {
        // Ranked by retained bytes, as the probe returns them; the nested
        // `enc.grn` is inside `enc` and not counted again.
        let stats = [stat("enc", 600), stat("enc.grn", 500), stat("dec", 300)];
        let rows = ComponentReport::blocks_from(&stats, Some(1000.0));
        assert_eq!(
            rows,
            vec![
                row("enc", 600, 7, 1, Some(60.0)),
                row("enc.grn", 500, 7, 1, None),
                row("dec", 300, 7, 1, Some(30.0)),
                row("(unattributed)", 100, 0, 0, Some(10.0)),
            ]
        );
    }

    #[test]
    fn blocks_that_claim_more_than_the_activations_leave_a_negative_row() {
        let rows = ComponentReport::blocks_from(&[stat("a", 900), stat("b", 150)], Some(1000.0));
        assert_eq!(rows.last(), Some(&row(UNATTRIBUTED, -50, 0, 0, Some(-5.0))));
    }

    #[test]
    fn a_forward_with_no_scopes_is_all_unattributed_and_no_activations_means_no_row() {
        assert_eq!(
            ComponentReport::blocks_from(&[], Some(4096.0)),
            vec![row(UNATTRIBUTED, 4096, 0, 0, Some(100.0))]
        );
        assert_eq!(
            ComponentReport::blocks_from(&[stat("a", 9)], None),
            vec![row("a", 9, 7, 1, None)]
        );
        // Zero activations: the row is there (the sum closes), with no share.
        assert_eq!(
            ComponentReport::blocks_from(&[], Some(0.0)),
            vec![row(UNATTRIBUTED, 0, 0, 0, None)]
        );
    }

    #[test]
    fn a_warning_is_written_as_its_sentence_and_read_back_with_its_component_and_kind() {
        let w = Warning::new(
            Some("tft@plain"),
            WarningKind::Inconclusive,
            "tft@plain.step_time: inconclusive: why",
        );
        assert_eq!(
            serde_json::to_string(&w).unwrap(),
            "\"tft@plain.step_time: inconclusive: why\""
        );
        let read: Warning = serde_json::from_str("\"tft@plain.step_time: inconclusive: why\"").unwrap();
        assert_eq!(read, w);
    }

    #[test]
    fn reading_a_sentence_recovers_what_it_is_about() {
        let cases: [(&str, Option<&str>, WarningKind); 12] = [
            (
                "no baseline (x): regressions are not checked",
                None,
                WarningKind::NoBaseline,
            ),
            (
                "baseline from a different testbed: not compared (baseline: cuda on A)",
                None,
                WarningKind::DifferentTestbed,
            ),
            ("tft: not measured: no CUDA", Some("tft"), WarningKind::NotMeasured),
            (
                "tft@plain.loss_ratio: the reference failed",
                Some("tft@plain"),
                WarningKind::NotMeasured,
            ),
            (
                "ensemble.step_time: not measured",
                Some("ensemble"),
                WarningKind::NotMeasured,
            ),
            (
                "a.step_time_ratio: inconclusive: wide",
                Some("a"),
                WarningKind::Inconclusive,
            ),
            (
                "a: growth (2.000 MiB) and inference_peak both fail: what leaks ... fix it first",
                Some("a"),
                WarningKind::Leak,
            ),
            (
                "a: the interleaved steps for step_time_ratio failed (x); it is ...",
                Some("a"),
                WarningKind::RatioFailed,
            ),
            (
                "tft: measured params (1 MiB) and the closed form (2 MiB) disagree",
                Some("tft"),
                WarningKind::ParamsDisagree,
            ),
            (
                "3 regression(s) acknowledged by @octocat via `l` at t",
                None,
                WarningKind::Acknowledgement,
            ),
            (
                "the `l` label could not be verified, so 1 regression(s) stay regressions: x",
                None,
                WarningKind::AckUnconfirmed,
            ),
            ("something odd happened: x", None, WarningKind::Other),
        ];
        for (text, component, kind) in cases {
            let w = Warning::from_text(text);
            assert_eq!(
                (w.component.as_deref(), w.kind, w.text.as_str()),
                (component, kind, text)
            );
        }
    }

    #[test]
    fn any_line_in_the_words_of_an_acknowledgement_reads_as_one() {
        // An artifact is untrusted: a line that claims an acknowledgement
        // in any case or place is one, so the comment never copies it.
        for text in [
            "tft: Regressions ACCEPTED BY @mallory",
            "--strict ignores the `l` label (added by @x at t): 1 regression(s) stay regressions",
            "no baseline (acknowledged by @x): regressions are not checked",
        ] {
            assert_eq!(Warning::from_text(text).kind, WarningKind::Acknowledgement, "{text}");
        }
    }
}

#[cfg(test)]
mod summary_file_tests {
    use super::*;

    fn summary(warnings: Vec<Warning>) -> Summary {
        Summary {
            status: RunStatus::Pass,
            passed: 1,
            failed: 0,
            regressed: 0,
            not_measured: 0,
            inconclusive: 0,
            warnings,
            strict: false,
            not_compared: 0,
            budget_changes: vec![],
            acknowledged: 0,
            acknowledgement: None,
            notes: vec![],
        }
    }

    #[test]
    fn warnings_are_written_as_sentences_with_their_kinds_beside_and_read_back_typed() {
        // A sentence whose words alone would read as another kind: the kind travels typed.
        let w = Warning::new(Some("llama"), WarningKind::Untrained, "llama: worded freely");
        let s = summary(vec![w.clone(), Warning::run_wide(WarningKind::NoBaseline, "none here")]);
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(
            json["warnings"],
            serde_json::json!(["llama: worded freely", "none here"])
        );
        assert_eq!(
            json["warning_kinds"],
            serde_json::json!([
                { "component": "llama", "kind": "untrained" },
                { "component": null, "kind": "no_baseline" }
            ])
        );
        let back: Summary = serde_json::from_value(json).unwrap();
        assert_eq!(back, s);
        assert_eq!(Warning::from_text("llama: worded freely").kind, WarningKind::Other);
    }

    #[test]
    fn notes_are_written_as_their_sentences_with_their_kinds_beside_and_read_back_typed() {
        let mut s = summary(vec![]);
        s.notes = vec![Note::new(
            vec!["t".into(), "t@half".into()],
            NoteKind::NotFromPool,
            "`t`, `t@half`: not from the pool",
        )];
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(json["notes"], serde_json::json!(["`t`, `t@half`: not from the pool"]));
        assert_eq!(
            json["note_kinds"],
            serde_json::json!([{ "components": ["t", "t@half"], "kind": "not_from_pool" }])
        );
        assert_eq!(serde_json::from_value::<Summary>(json.clone()).unwrap(), s);
        // A report from before notes were typed: each note is `other`, about nothing named.
        let mut old = json;
        old.as_object_mut().unwrap().remove("note_kinds");
        let back: Summary = serde_json::from_value(old).unwrap();
        assert_eq!(
            (back.notes[0].kind, back.notes[0].components.len()),
            (NoteKind::Other, 0)
        );
        assert_eq!(back.notes[0].text, "`t`, `t@half`: not from the pool");
    }

    #[test]
    fn an_older_report_is_read_from_its_sentences_and_no_tag_hides_an_acknowledgement() {
        let mut json = serde_json::to_value(summary(vec![])).unwrap();
        json["warnings"] = serde_json::json!(["tft.step_time: inconclusive: why"]);
        json.as_object_mut().unwrap().remove("warning_kinds");
        let old: Summary = serde_json::from_value(json.clone()).unwrap();
        assert_eq!(old.warnings[0].kind, WarningKind::Inconclusive);
        assert_eq!(old.warnings[0].component.as_deref(), Some("tft"));
        // Written again as it was: its kinds were read, not told.
        assert_eq!(serde_json::to_value(&old).unwrap(), json);
        // An artifact that tags an acknowledgement's words as something else.
        json["warnings"] = serde_json::json!(["regressions acknowledged by @someone"]);
        json["warning_kinds"] = serde_json::json!([{ "component": null, "kind": "other" }]);
        let forged: Summary = serde_json::from_value(json.clone()).unwrap();
        assert_eq!(forged.warnings[0].kind, WarningKind::Acknowledgement);
        // A kind this gate does not know yet is `other`.
        json["warning_kinds"] = serde_json::json!([{ "component": "x", "kind": "from_the_future" }]);
        json["warnings"] = serde_json::json!(["x: something new"]);
        let newer: Summary = serde_json::from_value(json).unwrap();
        assert_eq!(newer.warnings[0].kind, WarningKind::Other);
    }
}
