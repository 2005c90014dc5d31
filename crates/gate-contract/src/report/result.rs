//! One budget's result: the figure against its limit and the baseline,
//! its status, and the interval a timed figure was judged on.

use serde::{Deserialize, Deserializer, Serialize};

use gate_spec::budget::Op;
use gate_spec::metric::Unit;
use gate_spec::units::SizeUnit;

use super::{MetricId, Subject};

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
    /// A size with a `drift:` budget: its figure at the spec's anchor and
    /// how far it may grow since (a figure cannot creep past it by a
    /// tolerance's worth per pull request).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drift: Option<Drift>,
}

/// A budget's growth since the spec's `anchor:` (a release tag or a named
/// baseline), against its `drift:`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Drift {
    /// The anchor's name, as the spec writes it (`v1.4.0`).
    pub anchor: String,
    /// The commit the anchor's report measured, where it says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub anchor_commit: Option<String>,
    /// The figure at the anchor, in the result's unit.
    pub anchor_value: f64,
    /// The most the figure may grow since the anchor, in percent.
    pub max_percent: f64,
    /// The figure grew past `max_percent` since the anchor: the row is
    /// `regressed` on it (whatever its growth over the baseline).
    pub exceeded: bool,
}

impl Drift {
    /// The growth since the anchor, in percent of the anchor's figure
    /// (`None` when the anchor measured nothing).
    pub fn percent(&self, measured: f64) -> Option<f64> {
        (self.anchor_value > 0.0).then(|| (measured - self.anchor_value) / self.anchor_value * 100.0)
    }
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
