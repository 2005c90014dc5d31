//! The TFT's configuration: the keys of the report in the README's "Why"
//! (2,952 MB at batch 32) plus `prescale_dim`,
//! validated with every problem collected, and the closed-form parameter
//! count of docs/models.md §1 (pytorch-forecasting variant).

use serde_json::json;

use serde::{Deserialize, Serialize};

use gate::Problems;

/// The TFT's `config:` keys as the spec writes them; each may be left out
/// (the value of the report in the README's "Why"; docs/models.md §1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TftKeys {
    pub input_dim: usize,
    pub hidden_dim: usize,
    pub num_heads: usize,
    pub num_layers: usize,
    pub prediction_horizon: usize,
    pub sequence_length: usize,
    pub num_quantiles: usize,
    pub num_static_features: usize,
    pub num_known_features: usize,
    pub num_unknown_features: usize,
    pub dropout: f64,
    /// Width of each real variable's prescaled embedding; `hidden_dim` when not given.
    pub prescale_dim: Option<usize>,
    /// AdamW updates each parameter in slices of at most this many elements
    /// (`gate::optim::SlicedAdamW`: the same arithmetic, the temporaries of
    /// a slice); 0, the default, updates whole tensors (candle-nn's AdamW).
    /// Not the architecture: no part of `TftConfig`.
    #[serde(skip_serializing_if = "is_zero")]
    pub adamw_slice: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl Default for TftKeys {
    fn default() -> Self {
        let mut k = TftConfig::default().keys();
        k.prescale_dim = None;
        k
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct TftConfig {
    pub input_dim: usize,
    pub hidden_dim: usize,
    pub num_heads: usize,
    pub num_layers: usize,
    pub prediction_horizon: usize,
    pub sequence_length: usize,
    pub num_quantiles: usize,
    pub num_static_features: usize,
    pub num_known_features: usize,
    pub num_unknown_features: usize,
    pub dropout: f64,
    /// Width of each real variable's prescaled embedding (the library's `hidden_continuous_size`).
    pub prescale_dim: usize,
}

impl Default for TftConfig {
    /// The configuration of the report in the README's "Why" (docs/models.md §1).
    fn default() -> Self {
        TftConfig {
            input_dim: 256,
            hidden_dim: 64,
            num_heads: 4,
            num_layers: 2,
            prediction_horizon: 5,
            sequence_length: 60,
            num_quantiles: 9,
            num_static_features: 5,
            num_known_features: 10,
            num_unknown_features: 241,
            dropout: 0.1,
            prescale_dim: 64,
        }
    }
}

impl TftConfig {
    /// Resolves the spec's keys (`prescale_dim` follows `hidden_dim` when
    /// not given) and checks them, every problem collected.
    pub fn from_keys(k: TftKeys) -> Result<Self, Problems> {
        let mut p = Problems::new();
        for (key, v) in [
            ("input_dim", k.input_dim),
            ("hidden_dim", k.hidden_dim),
            ("num_heads", k.num_heads),
            ("num_layers", k.num_layers),
            ("prediction_horizon", k.prediction_horizon),
            ("sequence_length", k.sequence_length),
            ("num_quantiles", k.num_quantiles),
            ("num_static_features", k.num_static_features),
            ("num_known_features", k.num_known_features),
            ("num_unknown_features", k.num_unknown_features),
        ] {
            p.positive(key, v);
        }
        p.number("dropout", k.dropout, 0.0, 0.9);
        if let Some(d) = k.prescale_dim {
            p.positive("prescale_dim", d);
        }
        let cfg = TftConfig {
            input_dim: k.input_dim,
            hidden_dim: k.hidden_dim,
            num_heads: k.num_heads,
            num_layers: k.num_layers,
            prediction_horizon: k.prediction_horizon,
            sequence_length: k.sequence_length,
            num_quantiles: k.num_quantiles,
            num_static_features: k.num_static_features,
            num_known_features: k.num_known_features,
            num_unknown_features: k.num_unknown_features,
            dropout: k.dropout,
            // The default follows hidden_dim, as in the paper (the library's default is 8).
            prescale_dim: k.prescale_dim.unwrap_or(k.hidden_dim),
        };
        if cfg.num_heads == 0 || cfg.hidden_dim == 0 {
            return Err(p);
        }
        // Saturating: feature counts near usize::MAX must be an error, not an overflow.
        let features = cfg
            .num_static_features
            .saturating_add(cfg.num_known_features)
            .saturating_add(cfg.num_unknown_features);
        if cfg.input_dim != features {
            p.error(
                "input_dim",
                format!(
                    "`input_dim` is {} but the feature counts add up to {features} \
                     ({} static + {} known + {} unknown)",
                    cfg.input_dim, cfg.num_static_features, cfg.num_known_features, cfg.num_unknown_features
                ),
                format!(
                    "set `input_dim: {features}`, or change the feature counts to add up to {}",
                    cfg.input_dim
                ),
            );
        }
        if !cfg.hidden_dim.is_multiple_of(cfg.num_heads) {
            p.error(
                "num_heads",
                format!(
                    "`num_heads` ({}) must divide `hidden_dim` ({})",
                    cfg.num_heads, cfg.hidden_dim
                ),
                "each head gets hidden_dim / num_heads features; pick a divisor such as 1, 2 or 4",
            );
        }
        cfg.refuse_what_no_machine_holds(&mut p);
        p.finish(cfg)
    }

    /// Tensors no machine can hold are spec errors, not failed builds
    /// (#28 item 16): a network per input variable, the layers, the
    /// attention over the whole window, the quantile outputs.
    fn refuse_what_no_machine_holds(&self, p: &mut Problems) {
        let cfg = self;
        let (h, t) = (
            cfg.hidden_dim,
            cfg.sequence_length.saturating_add(cfg.prediction_horizon),
        );
        p.allocatable(
            "the variable selection networks",
            &[("input_dim", cfg.input_dim), ("hidden_dim", h), ("hidden_dim", h)],
        );
        p.allocatable(
            "the layers' weights",
            &[("num_layers", cfg.num_layers), ("hidden_dim", h), ("hidden_dim", h)],
        );
        p.allocatable(
            "the attention scores",
            &[
                ("sequence_length", t),
                ("sequence_length", t),
                ("num_heads", cfg.num_heads),
            ],
        );
        p.allocatable(
            "the prescaling",
            &[("input_dim", cfg.input_dim), ("prescale_dim", cfg.prescale_dim)],
        );
        p.allocatable(
            "the quantile outputs",
            &[
                ("prediction_horizon", cfg.prediction_horizon),
                ("hidden_dim", h),
                ("num_quantiles", cfg.num_quantiles),
            ],
        );
    }

    /// The keys that give this config.
    pub fn keys(&self) -> TftKeys {
        TftKeys {
            input_dim: self.input_dim,
            hidden_dim: self.hidden_dim,
            num_heads: self.num_heads,
            num_layers: self.num_layers,
            prediction_horizon: self.prediction_horizon,
            sequence_length: self.sequence_length,
            num_quantiles: self.num_quantiles,
            num_static_features: self.num_static_features,
            num_known_features: self.num_known_features,
            num_unknown_features: self.num_unknown_features,
            dropout: self.dropout,
            prescale_dim: Some(self.prescale_dim),
            adamw_slice: 0,
        }
    }

    /// Variables the encoder selection network sees: known and observed reals.
    pub fn encoder_vars(&self) -> usize {
        self.num_known_features + self.num_unknown_features
    }

    pub fn decoder_vars(&self) -> usize {
        self.num_known_features
    }

    pub fn head_dim(&self) -> usize {
        self.hidden_dim / self.num_heads
    }

    /// Evenly spaced quantile levels i/(Q+1): deciles 0.1..0.9 at Q = 9, and
    /// always symmetric around the median, for any Q.
    pub fn quantiles(&self) -> Vec<f64> {
        let q = self.num_quantiles;
        (1..=q).map(|i| i as f64 / (q + 1) as f64).collect()
    }

    pub fn to_json(&self) -> serde_json::Value {
        json!({
            "input_dim": self.input_dim,
            "hidden_dim": self.hidden_dim,
            "num_heads": self.num_heads,
            "num_layers": self.num_layers,
            "prediction_horizon": self.prediction_horizon,
            "sequence_length": self.sequence_length,
            "num_quantiles": self.num_quantiles,
            "num_static_features": self.num_static_features,
            "num_known_features": self.num_known_features,
            "num_unknown_features": self.num_unknown_features,
            "dropout": self.dropout,
            "prescale_dim": self.prescale_dim,
            "quantiles": self.quantiles(),
            "encoder_vsn_variables": self.encoder_vars(),
        })
    }

    /// The closed form of docs/models.md §1, block by block.
    pub fn param_count(&self) -> u64 {
        let h = self.hidden_dim as u64;
        let dc = self.prescale_dim as u64;
        let vs = self.num_static_features as u64;
        let ve = self.encoder_vars() as u64;
        let vd = self.decoder_vars() as u64;
        let reals = (self.num_static_features + self.num_known_features + self.num_unknown_features) as u64;
        let d = self.head_dim() as u64;
        let heads = self.num_heads as u64;
        let layers = self.num_layers as u64;
        let prescalers = 2 * dc * reals;
        let static_vsn = count::vsn(vs, dc, h, 0);
        let static_encoders = 4 * count::grn(h, h, h, 0);
        let encoder_vsn = count::vsn(ve, dc, h, h);
        let decoder_vsn = count::vsn(vd, dc, h, h);
        // Encoder and decoder LSTMs: per layer 4H(I+H) + two 4H biases (I = H).
        let lstms = 2 * layers * (4 * h * (h + h) + 8 * h);
        let post_lstm_gate = count::gate_add_norm(h, h);
        let enrichment = count::grn(h, h, h, h);
        let attention = (2 * heads + 1) * (h * d + d) + d * h;
        let post_attention_gate = count::gate_add_norm(h, h);
        let positionwise = count::grn(h, h, h, 0);
        let pre_output_gate = count::gate_add_norm(h, h);
        let output = h * self.num_quantiles as u64 + self.num_quantiles as u64;
        prescalers
            + static_vsn
            + static_encoders
            + encoder_vsn
            + decoder_vsn
            + lstms
            + post_lstm_gate
            + enrichment
            + attention
            + post_attention_gate
            + positionwise
            + pre_output_gate
            + output
    }
}

/// Parameter counts of the building blocks (docs/models.md §1).
pub mod count {
    /// GLU(i→o): one Linear(i, 2o).
    pub fn glu(i: u64, o: u64) -> u64 {
        2 * o * (i + 1)
    }

    /// GLU then LayerNorm(o).
    pub fn gate_add_norm(i: u64, o: u64) -> u64 {
        glu(i, o) + 2 * o
    }

    /// GRN(i, h, o) with a context of width `c` (0: none).
    pub fn grn(i: u64, h: u64, o: u64, c: u64) -> u64 {
        let resample = if i != o { 3 * o } else { 0 };
        h * (i + 1) + c * h + h * (h + 1) + gate_add_norm(h, o) + resample
    }

    /// VSN over `v` variables of width `dc` into `hidden`, flattened GRN with context `c`.
    pub fn vsn(v: u64, dc: u64, hidden: u64, c: u64) -> u64 {
        let single = grn(dc, dc.min(hidden), hidden, 0);
        match v {
            0 => 0,
            1 => single,
            _ => v * single + grn(v * dc, hidden.min(v), v, c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closed_form_matches_models_md() {
        assert_eq!(count::grn(64, 64, 64, 0), 16_768);
        assert_eq!(count::grn(64, 64, 64, 64), 20_864);
        assert_eq!(count::vsn(5, 64, 64, 0), 85_560);
        assert_eq!(count::vsn(10, 64, 64, 64), 175_110);
        assert_eq!(count::grn(251 * 64, 64, 251, 64), 1_070_301);
        assert_eq!(TftConfig::default().param_count(), 5_846_644);
        let small = TftConfig {
            prescale_dim: 8,
            ..TftConfig::default()
        };
        assert_eq!(small.param_count(), 880_956);
    }

    #[test]
    fn defaults_are_the_original_config() {
        let cfg = TftConfig::from_keys(TftKeys::default()).unwrap();
        assert_eq!(cfg, TftConfig::default());
        assert_eq!(cfg.quantiles().len(), 9);
        assert!((cfg.quantiles()[4] - 0.5).abs() < 1e-12);
    }

    #[test]
    fn input_dim_mismatch_and_heads_are_reported_by_key() {
        let map = gate::test_support::test_config(&[("input_dim", "250"), ("num_heads", "5")]);
        let errs = gate::test_support::read_workload::<super::super::Tft>(&map).unwrap_err();
        let keys: Vec<_> = errs.iter().map(|e| e.key.clone().unwrap()).collect();
        assert_eq!(keys, ["input_dim", "num_heads"]);
        assert!(errs[0].message.contains("add up to 256"), "{}", errs[0].message);
        assert_eq!(
            errs[0].hint,
            "set `input_dim: 256`, or change the feature counts to add up to 250"
        );
    }

    #[test]
    fn prescale_defaults_to_hidden() {
        let map = gate::test_support::test_config(&[("hidden_dim", "32"), ("num_heads", "4")]);
        let tft = gate::test_support::read_workload::<super::super::Tft>(&map).unwrap();
        assert_eq!(tft.cfg.prescale_dim, 32);
    }
}
