//! The metrics `gate` measures, their units and how values are written.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::units::{trim_float, Bytes};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    Params,
    Activations,
    Gradients,
    Optimizer,
    TrainingPeak,
    InferencePeak,
    DeviceUsed,
    StepTime,
    Loss,
    /// loss / the reference variant's loss (a component with `variants:`).
    LossRatio,
    /// step_time / the reference variant's step_time.
    StepTimeRatio,
    /// Bytes still held after further training steps (or inference calls)
    /// beyond what the first steady one held: a leak.
    Growth,
    /// A generation component (`generate:`): the peak of the prefill, its
    /// prompt through the model into an empty cache, above the pre-build level.
    PrefillPeak,
    /// The highest peak of one decode step, above the pre-build level.
    DecodePeak,
    /// What the cache grows by per decoded token: the live bytes the decode
    /// steps added, divided by their count.
    KvCachePerToken,
    /// The decode steps' second half grew the live bytes by this much more
    /// than their first half: 0 for a cache that grows a constant amount a
    /// token (or none); a cache that keeps its old copies grows O(N²).
    DecodeGrowth,
    /// What the model itself keeps once a training step is over that is
    /// neither its parameters, their gradients nor the optimizer's state:
    /// a KV cache its forward leaves full, buffers it fills as it runs.
    /// Measured as what the model's `clear_state` frees after the first
    /// step (0 for a model that keeps nothing or cannot clear it).
    ModelState,
    /// A generation component: tokens a row's KV cache can grow to on the
    /// spec's device at the component's batch, after the reserve and the
    /// higher of the prefill and decode peaks (weights included), the
    /// cache growing `kv_cache_per_token` a token. A floor (`> 32768`).
    KvCapacityTokens,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Unit {
    Bytes,
    Ms,
    /// A plain number (the loss).
    #[serde(rename = "1")]
    One,
    /// A unit this gate does not know, read from a report of a newer gate:
    /// shown as a plain number marked unknown and never judged (no spec of
    /// this gate gives it). Written back as `unknown`.
    #[serde(other)]
    Unknown,
}

impl Metric {
    pub const ALL: [Metric; 18] = [
        Metric::Params,
        Metric::Activations,
        Metric::Gradients,
        Metric::Optimizer,
        Metric::TrainingPeak,
        Metric::InferencePeak,
        Metric::DeviceUsed,
        Metric::StepTime,
        Metric::Loss,
        Metric::LossRatio,
        Metric::StepTimeRatio,
        Metric::Growth,
        Metric::PrefillPeak,
        Metric::DecodePeak,
        Metric::KvCachePerToken,
        Metric::DecodeGrowth,
        Metric::ModelState,
        Metric::KvCapacityTokens,
    ];

    /// Whether the figure comes from the training steps, so that a step
    /// which leaves parameters without a gradient (and so trains a smaller
    /// model than was built) makes it describe the wrong model.
    pub fn measures_training(self) -> bool {
        match self {
            Metric::Activations
            | Metric::Gradients
            | Metric::Optimizer
            | Metric::TrainingPeak
            | Metric::DeviceUsed
            | Metric::StepTime
            | Metric::Loss
            | Metric::LossRatio
            | Metric::StepTimeRatio
            | Metric::Growth
            | Metric::ModelState => true,
            Metric::Params
            | Metric::InferencePeak
            | Metric::PrefillPeak
            | Metric::DecodePeak
            | Metric::KvCachePerToken
            | Metric::DecodeGrowth
            | Metric::KvCapacityTokens => false,
        }
    }

    /// Whether a generation component (`generate:`) measures it: the build
    /// and the generation phases only, no training.
    pub fn measured_when_generating(self) -> bool {
        match self {
            Metric::Params
            | Metric::PrefillPeak
            | Metric::DecodePeak
            | Metric::KvCachePerToken
            | Metric::DecodeGrowth
            | Metric::KvCapacityTokens => true,
            Metric::Activations
            | Metric::Gradients
            | Metric::Optimizer
            | Metric::TrainingPeak
            | Metric::InferencePeak
            | Metric::DeviceUsed
            | Metric::StepTime
            | Metric::Loss
            | Metric::LossRatio
            | Metric::StepTimeRatio
            | Metric::Growth
            | Metric::ModelState => false,
        }
    }

    /// Whether only a generation component measures it.
    pub fn needs_generation(self) -> bool {
        matches!(
            self,
            Metric::PrefillPeak
                | Metric::DecodePeak
                | Metric::KvCachePerToken
                | Metric::DecodeGrowth
                | Metric::KvCapacityTokens
        )
    }

    pub fn name(self) -> &'static str {
        match self {
            Metric::Params => "params",
            Metric::Activations => "activations",
            Metric::Gradients => "gradients",
            Metric::Optimizer => "optimizer",
            Metric::TrainingPeak => "training_peak",
            Metric::InferencePeak => "inference_peak",
            Metric::DeviceUsed => "device_used",
            Metric::StepTime => "step_time",
            Metric::Loss => "loss",
            Metric::LossRatio => "loss_ratio",
            Metric::StepTimeRatio => "step_time_ratio",
            Metric::Growth => "growth",
            Metric::PrefillPeak => "prefill_peak",
            Metric::DecodePeak => "decode_peak",
            Metric::KvCachePerToken => "kv_cache_per_token",
            Metric::DecodeGrowth => "decode_growth",
            Metric::ModelState => "model_state",
            Metric::KvCapacityTokens => "kv_capacity_tokens",
        }
    }

    pub fn parse(name: &str) -> Option<Metric> {
        Metric::ALL.into_iter().find(|m| m.name() == name)
    }

    pub fn unit(self) -> Unit {
        match self {
            Metric::StepTime => Unit::Ms,
            Metric::Loss | Metric::LossRatio | Metric::StepTimeRatio | Metric::KvCapacityTokens => Unit::One,
            _ => Unit::Bytes,
        }
    }

    /// The measured metric a ratio metric divides, against the reference's.
    pub fn ratio_of(self) -> Option<Metric> {
        match self {
            Metric::LossRatio => Some(Metric::Loss),
            Metric::StepTimeRatio => Some(Metric::StepTime),
            _ => None,
        }
    }
}

impl fmt::Display for Metric {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A value in its budget's unit as written (`312.4 MB` under `< 300 MB`);
/// without one, as [`format_value`].
pub fn format_in(unit: Unit, shown: Option<crate::units::SizeUnit>, value: f64) -> String {
    match (unit, shown) {
        (Unit::Bytes, Some(u)) => u.format(value),
        _ => format_value(unit, value),
    }
}

/// A budget's limit: `< 300 MB` as written, a time in ms (`BudgetResult::limit_text`
/// shows one written in seconds so), `< 1.05`.
pub fn format_limit(unit: Unit, shown: Option<crate::units::SizeUnit>, op: &str, value: f64) -> String {
    let v = match (unit, shown) {
        (Unit::Bytes, Some(u)) => u.format_limit(value),
        (Unit::Ms, _) => format!("{} ms", trim_float(value)),
        _ => format_value(unit, value),
    };
    format!("{op} {v}")
}

/// A time limit (in ms) written in seconds, shown so: `< 10 s`.
pub fn format_limit_in_seconds(op: &str, ms: f64) -> String {
    format!("{op} {} s", trim_float(ms / 1000.0))
}

/// Writes a value of `unit` for people: MiB for bytes, ms, or the plain number.
pub fn format_value(unit: Unit, value: f64) -> String {
    match unit {
        // Headroom can be negative: the ensemble does not fit.
        Unit::Bytes if value < 0.0 => format!("-{}", Bytes((-value).round() as u64)),
        Unit::Bytes => Bytes(value.round() as u64).to_string(),
        Unit::Ms => format!("{value:.1} ms"),
        Unit::One => {
            if value.abs() >= 1e-3 || value == 0.0 {
                trim_float(value)
            } else {
                format!("{value:.3e}")
            }
        }
        Unit::Unknown => format!("{} (unknown unit)", format_value(Unit::One, value)),
    }
}
