//! `gate plan`'s machine contract: the levers a workload declares (carried
//! in the harness's `__resolve` answer) and the plan gate writes
//! (`plan.json`, [`SCHEMA`]): each candidate's predicted figures, and for
//! those it measured the measured ones beside them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use gate_spec::dtype::DType;
use gate_spec::metric::Metric;

/// plan.json's version.
pub const SCHEMA: u32 = 1;

/// A setting of a component that changes its memory, as its workload
/// declares it: what the planner may change, and the values worth trying.
/// The workload knows which of its blocks can be recomputed and which of
/// its settings exist; gate knows how to write each into the spec.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Lever {
    /// `checkpoint: { chunk: N }`: the workload's checkpointable blocks
    /// (`blocks`, as its scopes name them) dropped after the forward and
    /// recomputed in backward, `N` positions at a time. Costs step time,
    /// never changes the loss.
    Checkpoint { blocks: Vec<String>, chunks: Vec<usize> },
    /// A key of the workload's `config:` and the values worth trying
    /// (`about`: what it does, in the workload's words).
    Config {
        key: String,
        values: Vec<serde_json::Value>,
        about: String,
        /// Whether a value other than the spec's changes what is trained
        /// (the loss), not only how.
        #[serde(default)]
        changes_loss: bool,
    },
    /// `batch_size:` smaller. Changes the loss (fewer rows a step).
    Batch { sizes: Vec<usize> },
    /// `dtype:` lower, with `master_weights: f32` (parameters, gradients and
    /// optimizer state stay f32). Changes the loss (rounding).
    Dtype { dtypes: Vec<DType> },
    /// The sequence length, a key of the workload's `config:` (`seq_len`),
    /// and the lengths worth trying. Changes the loss (what a row sees);
    /// `gate plan --sweep` makes it an axis of its grid.
    Sequence { key: String, lengths: Vec<usize> },
    /// Gradient accumulation, a key of the workload's `config:`: the batch
    /// split into this many micro-batches run one after another, their
    /// gradients summed before one optimizer step (`batch_size` divided,
    /// the key set). The rows a step trains on stay the same.
    Accumulation { key: String, steps: Vec<usize> },
}

impl Lever {
    /// bf16 compute with f32 master weights: the dtype lever most workloads offer.
    pub fn bf16() -> Lever {
        Lever::Dtype {
            dtypes: vec![DType::BF16],
        }
    }

    /// The lever's name as the plan prints it.
    pub fn name(&self) -> String {
        match self {
            Lever::Checkpoint { .. } => "checkpoint".into(),
            Lever::Config { key, .. } => format!("config.{key}"),
            Lever::Batch { .. } => "batch_size".into(),
            Lever::Dtype { .. } => "dtype".into(),
            Lever::Sequence { key, .. } | Lever::Accumulation { key, .. } => format!("config.{key}"),
        }
    }

    /// Whether a setting other than the spec's changes the loss.
    pub fn changes_loss(&self) -> bool {
        match self {
            Lever::Checkpoint { .. } | Lever::Accumulation { .. } => false,
            Lever::Config { changes_loss, .. } => *changes_loss,
            Lever::Batch { .. } | Lever::Dtype { .. } | Lever::Sequence { .. } => true,
        }
    }
}

/// One lever's setting in a candidate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Setting {
    /// `checkpoint: { chunk: N }`, or `checkpoint: none` (`chunk` null).
    Checkpoint { chunk: Option<usize> },
    /// `config: { KEY: VALUE }`.
    Config { key: String, value: serde_json::Value },
    /// `batch_size: N`.
    Batch { size: usize },
    /// `dtype: D` (with `master_weights: f32` when lower than f32).
    Dtype { dtype: DType },
    /// `batch_size: B / steps` and `config: { KEY: steps }`: the same rows
    /// a step, in `steps` micro-batches.
    Accumulation { key: String, steps: usize, batch: usize },
}

impl Setting {
    /// The spec's own words for it (`checkpoint: { chunk: 64 }`).
    pub fn yaml(&self) -> String {
        match self {
            Setting::Checkpoint { chunk: Some(n) } => format!("checkpoint: {{ chunk: {n} }}"),
            Setting::Checkpoint { chunk: None } => "checkpoint: none".into(),
            Setting::Config { key, value } => format!("config: {{ {key}: {} }}", yaml_scalar(value)),
            Setting::Batch { size } => format!("batch_size: {size}"),
            Setting::Dtype { dtype } if *dtype == DType::F32 => "dtype: f32".into(),
            Setting::Dtype { dtype } => format!("dtype: {dtype}, master_weights: f32"),
            Setting::Accumulation { key, steps, batch } => format!("batch_size: {batch}, config: {{ {key}: {steps} }}"),
        }
    }
}

/// A config value as a team writes it in YAML: a word plain (`sgd`), any
/// other text quoted (JSON's quoting is YAML's), numbers and the rest as
/// JSON writes them.
pub fn yaml_scalar(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::String(s)
            if s.starts_with(|c: char| c.is_ascii_alphabetic())
                && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
                && !matches!(
                    s.to_ascii_lowercase().as_str(),
                    "true" | "false" | "null" | "yes" | "no" | "on" | "off" | "y" | "n"
                ) =>
        {
            s.clone()
        }
        other => other.to_string(),
    }
}

/// A figure of a candidate: what the cost model predicted, and what the
/// run measured where it measured the candidate.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Figure {
    pub predicted: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured: Option<f64>,
}

impl Figure {
    /// (measured − predicted) / measured, where measured.
    pub fn error(&self) -> Option<f64> {
        let m = self.measured?;
        (m != 0.0).then(|| (m - self.predicted) / m)
    }
}

/// Whether a candidate passes the component's budgets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Predicted to pass; not measured.
    PredictedPass,
    /// Predicted to fail; not measured.
    PredictedFail,
    /// Measured, and passes every budget.
    Pass,
    /// Measured, and fails at least one budget.
    Fail,
    /// Its profile failed (a figure is missing).
    Error,
}

impl Outcome {
    /// Whether the candidate was measured (its figures have measured values).
    pub fn is_measured(self) -> bool {
        matches!(self, Outcome::Pass | Outcome::Fail | Outcome::Error)
    }
}

/// A configuration the planner considered: its settings (only the levers
/// it changes from the spec's component), its figures and its outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Candidate {
    pub settings: Vec<Setting>,
    /// Each budgeted metric's figure (and `training_peak`, `step_time_ratio`).
    pub figures: BTreeMap<Metric, Figure>,
    pub outcome: Outcome,
    /// Budgets the measured (else predicted) figures fail, by metric name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fails: Vec<Metric>,
    /// Why its profile failed, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A profile the planner ran to learn one lever's effect: the lever at one
/// setting, everything else as the spec has it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Probe {
    pub setting: Setting,
    /// Its measured figures (bytes, ms, ratio), by metric.
    pub values: BTreeMap<Metric, f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Plan {
    /// Whether `candidate` trains differently from the spec: one of its
    /// settings is of a lever that changes the loss ([`Lever::changes_loss`];
    /// a config key counts as its lever says, an undeclared one as a change).
    pub fn changes_loss(&self, candidate: &Candidate) -> bool {
        candidate.settings.iter().any(|s| match s {
            Setting::Checkpoint { .. } | Setting::Accumulation { .. } => false,
            Setting::Batch { .. } | Setting::Dtype { .. } => true,
            Setting::Config { key, .. } => self
                .levers
                .iter()
                .find(|l| matches!(l, Lever::Config { key: k, .. } | Lever::Sequence { key: k, .. } if k == key))
                .is_none_or(Lever::changes_loss),
        })
    }

    /// Whether the component passes as the spec has it (nothing to plan).
    pub fn start_passes(&self) -> bool {
        self.start_fails.is_empty()
    }

    /// The chosen candidate, if a measured one passes.
    pub fn chosen(&self) -> Option<&Candidate> {
        self.candidates.get(self.chosen?)
    }

    /// The command that writes the chosen configuration into `spec` (the
    /// spec file as the run named it): `--budgets` only where the spec is
    /// not [`gate_spec::budget::DEFAULT_FILE`], so the line runs as printed
    /// where the run ran; a word a POSIX shell would split or expand is
    /// single-quoted.
    pub fn apply_command(&self, spec: &str) -> String {
        let mut words = vec![
            "gate".to_string(),
            "plan".into(),
            shell_word(&self.component),
            "--apply".into(),
        ];
        if !spec.is_empty() && spec != gate_spec::budget::DEFAULT_FILE {
            words.push("--budgets".into());
            words.push(shell_word(spec));
        }
        words.join(" ")
    }

    /// The chosen candidate's settings in the spec's words, one string.
    pub fn chosen_yaml(&self) -> Option<String> {
        let k = self.chosen()?;
        Some(k.settings.iter().map(Setting::yaml).collect::<Vec<_>>().join(", "))
    }
}

/// `word` as one word of a POSIX shell command: as it is where it holds
/// nothing a shell would split, expand or quote, else in single quotes.
fn shell_word(word: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "_-./@+=:,%".contains(c);
    if !word.is_empty() && word.chars().all(plain) {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// `gate plan`'s answer for one component (plan.json).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    /// [`SCHEMA`].
    pub schema: u32,
    pub component: String,
    /// `cpu` or `cuda`.
    pub backend: String,
    /// The levers the workload declared (and gate's own: batch).
    pub levers: Vec<Lever>,
    /// The component as the spec has it, measured.
    pub start: BTreeMap<Metric, f64>,
    /// The budgets it fails so (empty: it passes, and nothing was planned).
    #[serde(default)]
    pub start_fails: Vec<Metric>,
    /// The single-lever profiles the cost model was fitted from.
    pub probes: Vec<Probe>,
    /// Every candidate, cheapest first (least predicted step-time cost,
    /// then fewest levers changed).
    pub candidates: Vec<Candidate>,
    /// The index in `candidates` of the cheapest measured candidate that
    /// passes, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chosen: Option<usize>,
    /// How many full profiles the plan ran.
    pub profiles: usize,
    /// What recomputing the checkpointable blocks costs at least, from the
    /// start's own step; absent where the workload declares no blocks or
    /// the start's timeline has none of their scopes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recompute_floor: Option<RecomputeFloor>,
}

/// What recomputing the checkpointable blocks costs in step time before
/// any chunk's own overhead: their forward runs once more. On a GPU the
/// least a checkpoint costs (its kernels run again); on the CPU a smaller
/// working set can make the checkpointed step faster, so there it is only
/// the recompute's share. Read from the start's memory timeline: each
/// block's scope's time in the forward phase, against the sampled step's
/// time on the same clock.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecomputeFloor {
    /// Each checkpointable block's forward time in ms, all its calls.
    pub forward_ms: BTreeMap<String, f64>,
    /// The sampled training step's time in ms (forward to the optimizer's end).
    pub step_ms: f64,
}

impl RecomputeFloor {
    /// `1 + Σ forward / step`: the step-time factor of recomputing every
    /// block once.
    pub fn factor(&self) -> f64 {
        match self.step_ms > 0.0 {
            true => 1.0 + self.forward_ms.values().sum::<f64>() / self.step_ms,
            false => 1.0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_config_setting_is_written_as_a_team_writes_yaml() {
        let yaml = |value: serde_json::Value| {
            Setting::Config {
                key: "optimizer".into(),
                value,
            }
            .yaml()
        };
        assert_eq!(yaml("sgd".into()), "config: { optimizer: sgd }");
        assert_eq!(yaml(262_144.into()), "config: { optimizer: 262144 }");
        // Words YAML would read as something else, and other text, quoted.
        assert_eq!(yaml("no".into()), "config: { optimizer: \"no\" }");
        assert_eq!(yaml("a b: c".into()), "config: { optimizer: \"a b: c\" }");
        assert_eq!(yaml("1e3".into()), "config: { optimizer: \"1e3\" }");
        assert_eq!(yaml(serde_json::Value::Null), "config: { optimizer: null }");
    }

    /// The TFT's plan chose recompute in chunks and AdamW in slices (its
    /// loss ratio 1.00, measured): it printed "this one trains differently"
    /// because the spec budgets the loss ratio. Only a setting of a lever
    /// that changes the loss makes a candidate train differently.
    #[test]
    fn a_candidate_trains_differently_only_through_a_lever_that_changes_the_loss() {
        let config = |key: &str, changes_loss| Lever::Config {
            key: key.into(),
            values: vec![],
            about: String::new(),
            changes_loss,
        };
        let plan = Plan {
            schema: SCHEMA,
            component: "tft".into(),
            backend: "cpu".into(),
            levers: vec![config("adamw_slice", false), config("optimizer", true)],
            start: BTreeMap::new(),
            start_fails: vec![],
            probes: vec![],
            candidates: vec![],
            chosen: None,
            profiles: 0,
            recompute_floor: None,
        };
        let with = |settings: Vec<Setting>| Candidate {
            settings,
            figures: BTreeMap::new(),
            outcome: Outcome::Pass,
            fails: vec![],
            error: None,
        };
        let set = |key: &str, value: serde_json::Value| Setting::Config { key: key.into(), value };
        let kept = with(vec![
            Setting::Checkpoint { chunk: Some(96) },
            set("adamw_slice", 262_144.into()),
        ]);
        assert!(!plan.changes_loss(&kept));
        assert!(plan.changes_loss(&with(vec![set("optimizer", "sgd".into())])));
        assert!(plan.changes_loss(&with(vec![Setting::Batch { size: 8 }])));
        assert!(plan.changes_loss(&with(vec![set("undeclared", 1.into())])));
    }
}
