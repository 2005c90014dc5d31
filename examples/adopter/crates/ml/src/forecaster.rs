//! A GRU forecaster: each time step's features are embedded, a GRU reads the
//! window, and a linear head predicts the next `horizon` values from its last
//! state. Its gate workload is the model plus a seeded synthetic batch.

use gate::candle_core::{DType, Module, Result, Tensor};
use gate::candle_nn::rnn::{gru, GRUConfig, GRU, RNN};
use gate::candle_nn::{linear, Linear, VarBuilder};
use gate::{scoped, Batch, Model, ParamCount, Problems, Rng, RunCtx, Step, Workload};
use serde::{Deserialize, Serialize};

/// `config:` of a `gru_forecaster` component; every key may be left out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ForecasterConfig {
    /// Features per time step.
    pub input_dim: usize,
    /// Width of the embedding and of the GRU state.
    pub hidden_dim: usize,
    /// Time steps in the input window.
    pub seq_len: usize,
    /// Values predicted.
    pub horizon: usize,
    /// Dropout on the embedding, in training.
    pub dropout: f64,
}

impl Default for ForecasterConfig {
    fn default() -> Self {
        ForecasterConfig {
            input_dim: 16,
            hidden_dim: 64,
            seq_len: 48,
            horizon: 12,
            dropout: 0.1,
        }
    }
}

/// The workload: a validated config.
#[derive(Debug, Clone)]
pub struct GruForecaster {
    cfg: ForecasterConfig,
}

impl GruForecaster {
    /// The closed form: embedding (I·H + H), GRU (three gates, each with an
    /// input and a recurrent matrix and bias: 6·H² + 6·H), head (H·P + P).
    pub fn closed_form(c: &ForecasterConfig) -> u64 {
        let (i, h, p) = (c.input_dim as u64, c.hidden_dim as u64, c.horizon as u64);
        (i * h + h) + (6 * h * h + 6 * h) + (h * p + p)
    }
}

impl Workload for GruForecaster {
    const KIND: &'static str = "gru_forecaster";
    type Config = ForecasterConfig;

    fn from_config(cfg: ForecasterConfig) -> std::result::Result<Self, Problems> {
        let mut p = Problems::new();
        p.positive("input_dim", cfg.input_dim);
        p.positive("hidden_dim", cfg.hidden_dim);
        p.positive("seq_len", cfg.seq_len);
        p.positive("horizon", cfg.horizon);
        p.number("dropout", cfg.dropout, 0.0, 0.9);
        p.finish(GruForecaster { cfg })
    }

    fn config(&self) -> &ForecasterConfig {
        &self.cfg
    }

    fn param_count(&self) -> ParamCount {
        ParamCount::new(Self::closed_form(&self.cfg), 0)
    }

    fn build(&self, vb: VarBuilder, _ctx: &RunCtx) -> Result<Box<dyn Model>> {
        let c = &self.cfg;
        Ok(Box::new(ForecasterModel {
            embed: linear(c.input_dim, c.hidden_dim, vb.pp("embed"))?,
            gru: gru(c.hidden_dim, c.hidden_dim, GRUConfig::default(), vb.pp("gru"))?,
            head: linear(c.hidden_dim, c.horizon, vb.pp("head"))?,
            dropout: c.dropout,
        }))
    }

    fn batch(&self, ctx: &RunCtx, seed: u64) -> Result<Batch> {
        let c = &self.cfg;
        let b = ctx.batch_size;
        let mut rng = Rng::new(seed);
        let x = Tensor::from_vec(
            rng.normal_vec(b * c.seq_len * c.input_dim, 0.0, 1.0),
            (b, c.seq_len, c.input_dim),
            &ctx.device,
        )?;
        // A learnable target: a fixed linear map of the last step.
        let w = Tensor::from_vec(
            rng.normal_vec(c.input_dim * c.horizon, 0.0, 0.3),
            (c.input_dim, c.horizon),
            &ctx.device,
        )?;
        // contiguous: CUDA's matmul refuses a strided operand that the CPU's takes.
        let y = x.narrow(1, c.seq_len - 1, 1)?.squeeze(1)?.contiguous()?.matmul(&w)?;
        Ok(Batch::new(vec![x.to_dtype(ctx.dtype)?, y.to_dtype(ctx.dtype)?]))
    }
}

struct ForecasterModel {
    embed: Linear,
    gru: GRU,
    head: Linear,
    dropout: f64,
}

impl ForecasterModel {
    fn forward(&self, x: &Tensor, step: &Step) -> Result<Tensor> {
        let h = scoped("embed", || -> Result<Tensor> {
            let h = self.embed.forward(x)?.relu()?;
            step.dropout(&h, self.dropout)
        })?;
        let last = scoped("gru", || -> Result<Tensor> {
            let states = self.gru.seq(&h)?;
            let last = states.last().expect("seq_len is at least 1");
            Ok(last.h().clone())
        })?;
        scoped("head", || self.head.forward(&last))
    }
}

impl Model for ForecasterModel {
    fn loss(&self, batch: &Batch, step: &Step) -> Result<Tensor> {
        let pred = self.forward(&batch.tensors[0], step)?;
        let target = &batch.tensors[1];
        // The loss in f32 whatever the compute dtype: a half-precision mean drifts.
        pred.to_dtype(DType::F32)?
            .sub(&target.to_dtype(DType::F32)?)?
            .sqr()?
            .mean_all()
    }

    fn predict(&self, batch: &Batch) -> Result<Tensor> {
        self.forward(&batch.tensors[0], &Step::eval())
    }
}
