//! `gate plan --sweep`'s machine contract (`sweep.json`, [`SCHEMA`]): "will
//! it fit?" over a grid of batch sizes, sequence lengths and dtypes,
//! answered from a few exact profiles. Every figure says whether it was
//! measured or predicted; one predicted point is measured again each run,
//! and its error is published beside it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use gate_spec::dtype::DType;

use crate::plan::Figure;

/// sweep.json's version.
pub const SCHEMA: u32 = 1;

/// The quantity every grid point is judged by: the training step's peak.
pub const TRAINING_PEAK: &str = "training_peak";

/// A memory a point must fit in: the spec's card (`device:`) or one asked
/// for with `--capacity`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Capacity {
    /// `card` for the spec's device, else the size as written (`24GiB`).
    pub name: String,
    /// Bytes a process may use: the capacity less the per-process reserve
    /// (the spec's `reserve:`; on a GPU the context measured).
    pub usable_bytes: f64,
}

/// Whether a point's figures were measured or predicted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// A profile the fit was made from: exact.
    Measured,
    /// From the fit alone.
    Predicted,
    /// Predicted, then measured in the same run to publish the fit's error.
    Remeasured,
}

/// One point of the grid.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Point {
    pub batch: usize,
    /// The sequence length (`None`: the workload has no sequence lever).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq_len: Option<usize>,
    pub dtype: DType,
    pub source: Source,
    /// Every fitted quantity, bytes: `training_peak`, `inference_peak` and
    /// the other byte metrics by name; each step phase's peak as
    /// `phase.NAME`; each block's kept bytes as `block.NAME`. A measured
    /// point's figures carry `measured`; a predicted one's only `predicted`.
    pub figures: BTreeMap<String, Figure>,
    /// Per capacity (in [`Sweep::capacities`]' order): whether the training
    /// peak fits (the measured figure where there is one).
    pub fits: Vec<bool>,
}

impl Point {
    /// The figure the point is judged by: measured where it was, else predicted.
    pub fn training_peak(&self) -> Option<f64> {
        let f = self.figures.get(TRAINING_PEAK)?;
        Some(f.measured.unwrap_or(f.predicted))
    }
}

/// The axis of sequence lengths: the workload's config key and its values.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SeqAxis {
    pub key: String,
    pub lengths: Vec<usize>,
}

/// How each quantity was fitted, so a reader can predict points off the grid.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fit {
    /// bytes = constant + per_row · batch + per_position · seq + per_token · batch · seq
    /// (with no sequence axis, seq is 1 and only the first two are fitted).
    pub constant: f64,
    pub per_row: f64,
    pub per_position: f64,
    pub per_token: f64,
}

/// A lower dtype's bytes from the spec dtype's prediction of the same point.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct DtypeScale {
    pub constant: f64,
    pub scale: f64,
}

impl Fit {
    /// The fitted bytes at `batch` rows of `seq` positions (`None`: a
    /// workload with no sequence axis).
    pub fn at(&self, batch: usize, seq: Option<usize>) -> f64 {
        let (b, s) = (batch as f64, seq.unwrap_or(1) as f64);
        self.constant + self.per_row * b + self.per_position * s + self.per_token * b * s
    }
}

/// `gate plan --sweep`'s answer for one component (sweep.json).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sweep {
    /// [`SCHEMA`].
    pub schema: u32,
    pub component: String,
    /// `cpu` or `cuda`.
    pub backend: String,
    pub batches: Vec<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<SeqAxis>,
    pub dtypes: Vec<DType>,
    pub capacities: Vec<Capacity>,
    /// Every point: the grid's, then any measured point off it.
    pub points: Vec<Point>,
    /// The fit of each quantity at the spec's dtype, by quantity name.
    pub fits: BTreeMap<String, Fit>,
    /// A lower dtype's figures as the spec dtype's: bytes = constant +
    /// scale · (the spec dtype's prediction − its constant), by dtype and
    /// quantity.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub dtype_scales: BTreeMap<String, BTreeMap<String, DtypeScale>>,
    /// How many full profiles the sweep ran.
    pub profiles: usize,
}

impl Sweep {
    /// The point measured again to publish the fit's error.
    pub fn remeasured(&self) -> Option<&Point> {
        self.points.iter().find(|p| p.source == Source::Remeasured)
    }
}
