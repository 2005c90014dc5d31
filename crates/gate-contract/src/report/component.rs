//! What a component's run measured, as report.json keeps it: its figures,
//! the blocks that hold its activations, its error if it stopped, and the
//! ensemble's sum over the components.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use gate_probe::BlockStat;
use gate_spec::metric::{Metric, Unit};

use crate::measurement::Measurement;

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

profile_facts!(struct_with_profile_facts! {
    /// A component as report.json keeps it: what it ran (workload, dtype,
    /// batch, config and their fingerprint), its figures with their units,
    /// its blocks, its error, then the profile facts its measurement carried
    /// (`profile_facts`).
    #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
    pub struct ComponentReport {
        pub workload: String,
        pub dtype: String,
        pub batch_size: usize,
        pub seed: u64,
        pub config: serde_json::Value,
        /// The figures this gate knows: a metric or a unit of a newer gate in
        /// a stored report is left out here (its budget's row keeps it, as
        /// [`MetricId::Unknown`](super::MetricId::Unknown)), never compared and never a refusal.
        #[serde(deserialize_with = "known_metrics")]
        pub metrics: BTreeMap<Metric, MetricValue>,
        /// Parameter elements counted on the built model.
        pub param_count: u64,
        pub blocks: Vec<BlockReport>,
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
        /// How long each phase of the profile took, in the order they ran
        /// (`setup` is the child's start until its first phase).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        pub phase_seconds: Vec<PhaseTime>,
        /// A variant with a `loss_ratio` budget, from the ratio steps: its loss
        /// and its reference's, each after as many seeded steps as its profile
        /// takes. `loss_ratio` uses them when the reference's own profile has no
        /// loss (it does not fit the emulated card).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub ratio_losses: Option<RatioLosses>,
    } copied_from Measurement
});

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
