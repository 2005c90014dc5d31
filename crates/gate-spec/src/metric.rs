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

    /// Everything gate says of this metric, declared once: one arm per
    /// metric and no catch-all, so a new metric does not compile until each
    /// of its facts is given (its unit, when it is measured, what helps it,
    /// what it divides, its column). Its report.json and schema name is
    /// serde's (`rename_all`), which [`Facts::name`] is held to by a test.
    pub const fn facts(self) -> Facts {
        use Phase::*;
        use Remedy::*;
        use Unit::{Bytes, Ms, One};
        use VariantTable::{Generating, Training as TrainingTable};
        match self {
            Metric::Params => Facts::new("params", Bytes, Build, SmallerModel),
            Metric::Activations => Facts::new("activations", Bytes, Training, Checkpoint).column(TrainingTable, 1),
            Metric::Gradients => Facts::new("gradients", Bytes, Training, SmallerModel),
            Metric::Optimizer => Facts::new("optimizer", Bytes, Training, SmallerModel),
            Metric::TrainingPeak => Facts::new("training_peak", Bytes, Training, Checkpoint).column(TrainingTable, 0),
            Metric::InferencePeak => {
                Facts::new("inference_peak", Bytes, Inference, Checkpoint).column(TrainingTable, 2)
            }
            Metric::DeviceUsed => Facts::new("device_used", Bytes, Training, Checkpoint),
            Metric::StepTime => Facts::new("step_time", Ms, Training, Tradeoff).column(TrainingTable, 3),
            Metric::Loss => Facts::new("loss", One, Training, Tradeoff).column(TrainingTable, 4),
            Metric::LossRatio => Facts::new("loss_ratio", One, Training, Tradeoff)
                .column(TrainingTable, 5)
                .ratio_of(Metric::Loss),
            Metric::StepTimeRatio => Facts::new("step_time_ratio", One, Training, Tradeoff)
                .column(TrainingTable, 6)
                .ratio_of(Metric::StepTime),
            Metric::Growth => Facts::new("growth", Bytes, Training, Leak),
            Metric::PrefillPeak => Facts::new("prefill_peak", Bytes, Generation, Cache).column(Generating, 0),
            Metric::DecodePeak => Facts::new("decode_peak", Bytes, Generation, Cache).column(Generating, 1),
            Metric::KvCachePerToken => Facts::new("kv_cache_per_token", Bytes, Generation, Cache).column(Generating, 2),
            Metric::DecodeGrowth => Facts::new("decode_growth", Bytes, Generation, Leak).column(Generating, 3),
            Metric::ModelState => Facts::new("model_state", Bytes, Training, Cache),
            Metric::KvCapacityTokens => Facts::new("kv_capacity_tokens", One, Generation, Cache),
        }
    }

    /// Whether the figure comes from the training steps, so that a step
    /// which leaves parameters without a gradient (and so trains a smaller
    /// model than was built) makes it describe the wrong model.
    pub fn measures_training(self) -> bool {
        matches!(self.facts().phase, Phase::Training)
    }

    /// Whether a generation component (`generate:`) measures it: the build
    /// and the generation phases only, no training.
    pub fn measured_when_generating(self) -> bool {
        matches!(self.facts().phase, Phase::Build | Phase::Generation)
    }

    /// Whether only a generation component measures it.
    pub fn needs_generation(self) -> bool {
        matches!(self.facts().phase, Phase::Generation)
    }

    pub fn name(self) -> &'static str {
        self.facts().name
    }

    pub fn parse(name: &str) -> Option<Metric> {
        Metric::ALL.into_iter().find(|m| m.name() == name)
    }

    pub fn unit(self) -> Unit {
        self.facts().unit
    }

    /// The measured metric a ratio metric divides, against the reference's.
    pub fn ratio_of(self) -> Option<Metric> {
        self.facts().ratio_of
    }

    /// What helps a budget of this metric that fails.
    pub fn remedy(self) -> Remedy {
        self.facts().remedy
    }

    /// The metrics a generating component takes, in [`Metric::ALL`]'s
    /// order, as a hint lists them (`params, prefill_peak, ...`).
    pub fn generating_names() -> String {
        let names: Vec<&str> = Metric::ALL
            .iter()
            .filter(|m| m.measured_when_generating())
            .map(|m| m.name())
            .collect();
        names.join(", ")
    }
}

/// What gate says of one metric ([`Metric::facts`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Facts {
    /// Its name in budgets.yaml, report.json and the tables.
    pub name: &'static str,
    /// The unit its values are in.
    pub unit: Unit,
    /// When it is measured.
    pub phase: Phase,
    /// What helps a budget of it that fails.
    pub remedy: Remedy,
    /// A ratio metric: the metric it divides, against the reference's.
    pub ratio_of: Option<Metric>,
    /// The side-by-side table of variants that shows it, and its column there.
    pub column: Option<(VariantTable, usize)>,
}

impl Facts {
    const fn new(name: &'static str, unit: Unit, phase: Phase, remedy: Remedy) -> Facts {
        Facts {
            name,
            unit,
            phase,
            remedy,
            ratio_of: None,
            column: None,
        }
    }

    const fn column(mut self, table: VariantTable, at: usize) -> Facts {
        self.column = Some((table, at));
        self
    }

    const fn ratio_of(mut self, metric: Metric) -> Facts {
        self.ratio_of = Some(metric);
        self
    }
}

/// When a metric is measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// When the model is built: every component, generating or not.
    Build,
    /// In the training steps.
    Training,
    /// In the inference calls of a training component.
    Inference,
    /// In a generation (`generate:`) only.
    Generation,
}

/// What helps a budget that fails, by what its metric measures (the
/// comment's and the table's next step).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Remedy {
    /// Activation memory: recompute the top block in backward, or a smaller batch.
    Checkpoint,
    /// Parameter-sized state (params, gradients, optimizer): a smaller model or dtype.
    SmallerModel,
    /// Memory kept across steps.
    Leak,
    /// A generation's memory: its KV cache and what a prefill or decode
    /// step holds at once; or what the model keeps between steps.
    Cache,
    /// Time, loss and ratios: see the levers' trade-offs.
    Tradeoff,
}

/// The side-by-side tables of a component's variants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VariantTable {
    /// Variants that train.
    Training,
    /// Variants that generate (`generate:`): no training figure to show.
    Generating,
}

impl VariantTable {
    /// How many metrics its table shows.
    pub const fn width(self) -> usize {
        let mut n = 0;
        let mut i = 0;
        while i < Metric::ALL.len() {
            if let Some((t, _)) = Metric::ALL[i].facts().column {
                if t as u8 == self as u8 {
                    n += 1;
                }
            }
            i += 1;
        }
        n
    }

    /// The metrics its table shows, in column order (each column's metric
    /// is the one whose facts give it that column; a gap or a clash fails
    /// the build).
    pub const fn metrics<const N: usize>(self) -> [Metric; N] {
        let mut out = [Metric::Params; N];
        let mut filled = [false; N];
        let mut i = 0;
        while i < Metric::ALL.len() {
            if let Some((t, at)) = Metric::ALL[i].facts().column {
                if t as u8 == self as u8 {
                    assert!(
                        at < N && !filled[at],
                        "two metrics in one column, or a column past the table"
                    );
                    out[at] = Metric::ALL[i];
                    filled[at] = true;
                }
            }
            i += 1;
        }
        let mut k = 0;
        while k < N {
            assert!(filled[k], "a column no metric fills");
            k += 1;
        }
        out
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The variant names serde gives `Metric` (report.json's, the
    /// schema's), read as its derived `Deserialize` offers them.
    fn serde_names() -> &'static [&'static str] {
        struct Names(Option<&'static [&'static str]>);
        impl<'de> serde::Deserializer<'de> for &mut Names {
            type Error = serde::de::value::Error;
            fn deserialize_any<V: serde::de::Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
                Err(serde::de::Error::custom("only an enum"))
            }
            fn deserialize_enum<V: serde::de::Visitor<'de>>(
                self,
                _: &'static str,
                variants: &'static [&'static str],
                _: V,
            ) -> Result<V::Value, Self::Error> {
                self.0 = Some(variants);
                Err(serde::de::Error::custom("read"))
            }
            serde::forward_to_deserialize_any! {
                bool i8 i16 i32 i64 u8 u16 u32 u64 f32 f64 char str string bytes byte_buf option unit
                unit_struct newtype_struct seq tuple tuple_struct map struct identifier ignored_any
            }
        }
        let mut names = Names(None);
        let _ = Metric::deserialize(&mut names);
        names.0.expect("Metric deserializes as an enum")
    }

    /// `Metric::ALL` is every metric, once, in the enum's order, and each
    /// one's name is its serde name: ALL is checked against the variants
    /// serde derives from the enum itself, so a metric left out of ALL (or
    /// named otherwise than report.json names it) fails here.
    #[test]
    fn all_is_every_metric_once_under_its_serde_name() {
        let all: Vec<&str> = Metric::ALL.iter().map(|m| m.name()).collect();
        assert_eq!(all, serde_names());
        for m in Metric::ALL {
            assert_eq!(serde_json::to_value(m).unwrap(), m.name());
            assert_eq!(Metric::parse(m.name()), Some(m));
        }
    }

    /// Every metric's facts agree with each other: a ratio is a plain
    /// number dividing a measured metric of its own phase, a metric shown
    /// for generating variants is measured by a generation, and the facts
    /// the budgets' checks read follow from its phase.
    #[test]
    fn every_metrics_facts_agree() {
        for m in Metric::ALL {
            let f = m.facts();
            if let Some(of) = f.ratio_of {
                assert_eq!(
                    (f.unit, of.ratio_of(), of.facts().phase),
                    (Unit::One, None, f.phase),
                    "{m}"
                );
            }
            match f.column {
                Some((VariantTable::Generating, _)) => assert!(m.needs_generation(), "{m}"),
                Some((VariantTable::Training, _)) => assert!(!m.measured_when_generating(), "{m}"),
                None => {}
            }
            assert!(!(m.measures_training() && m.measured_when_generating()), "{m}");
            assert_ne!(f.unit, Unit::Unknown, "{m}");
        }
        assert_eq!(
            VariantTable::Training.metrics::<7>(),
            [
                Metric::TrainingPeak,
                Metric::Activations,
                Metric::InferencePeak,
                Metric::StepTime,
                Metric::Loss,
                Metric::LossRatio,
                Metric::StepTimeRatio,
            ]
        );
        assert_eq!(VariantTable::Generating.width(), 4);
        assert_eq!(
            Metric::generating_names(),
            "params, prefill_peak, decode_peak, kv_cache_per_token, decode_growth, kv_capacity_tokens"
        );
    }
}
