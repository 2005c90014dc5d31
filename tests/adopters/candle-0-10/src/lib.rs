//! The team's activity classifier: a window of multichannel sensor readings
//! through a stack of 1-D convolutions (same padding, ReLU, dropout), mean
//! pooled over time, and a linear head over the classes; cross-entropy loss.
//! Written with candle 0.10's candle-nn; [`ConvClassifier`] is its gate
//! workload `conv_classifier`.

use candle_core::{DType, Module, Result, Tensor, D};
use candle_nn::{conv1d, linear, Conv1d, Conv1dConfig, Linear, VarBuilder};
use gate::{scoped, Batch, Model, ParamCount, Problems, Rng, RunCtx, Step, Workload};
use serde::{Deserialize, Serialize};

/// `config:` of a `conv_classifier` component; every key may be left out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ClassifierConfig {
    /// Sensor channels per time step (3-axis accelerometer and gyroscope).
    pub in_channels: usize,
    /// Channels of every convolution.
    pub channels: usize,
    /// Convolution width (odd: same padding).
    pub kernel_size: usize,
    pub conv_layers: usize,
    /// Time steps per window.
    pub seq_len: usize,
    pub classes: usize,
    pub dropout: f64,
}

impl Default for ClassifierConfig {
    fn default() -> Self {
        ClassifierConfig {
            in_channels: 6,
            channels: 64,
            kernel_size: 7,
            conv_layers: 3,
            seq_len: 512,
            classes: 5,
            dropout: 0.1,
        }
    }
}

impl ClassifierConfig {
    /// The closed form: each convolution c_out·c_in·k + c_out, the head C·K + K.
    pub fn param_count(&self) -> u64 {
        let (i, c, k) = (self.in_channels as u64, self.channels as u64, self.kernel_size as u64);
        let first = c * i * k + c;
        let rest = (self.conv_layers as u64 - 1) * (c * c * k + c);
        first + rest + c * self.classes as u64 + self.classes as u64
    }
}

/// The workload: a validated config.
#[derive(Debug, Clone)]
pub struct ConvClassifier {
    cfg: ClassifierConfig,
}

impl Workload for ConvClassifier {
    const KIND: &'static str = "conv_classifier";
    type Config = ClassifierConfig;

    fn from_config(cfg: ClassifierConfig) -> std::result::Result<Self, Problems> {
        let mut p = Problems::new();
        p.positive("in_channels", cfg.in_channels);
        p.positive("channels", cfg.channels);
        p.positive("conv_layers", cfg.conv_layers);
        p.positive("seq_len", cfg.seq_len);
        p.at_least("classes", cfg.classes, 2);
        if cfg.kernel_size.is_multiple_of(2) {
            p.error(
                "kernel_size",
                format!("{} is even", cfg.kernel_size),
                "same padding needs an odd width",
            );
        }
        p.number("dropout", cfg.dropout, 0.0, 0.9);
        p.finish(ConvClassifier { cfg })
    }

    fn config(&self) -> &ClassifierConfig {
        &self.cfg
    }

    fn param_count(&self) -> ParamCount {
        ParamCount::new(self.cfg.param_count(), 0)
    }

    fn build(&self, vb: VarBuilder, _ctx: &RunCtx) -> Result<Box<dyn Model>> {
        let c = &self.cfg;
        let conv = Conv1dConfig {
            padding: c.kernel_size / 2,
            ..Default::default()
        };
        let convs = (0..c.conv_layers)
            .map(|l| {
                let i = if l == 0 { c.in_channels } else { c.channels };
                conv1d(i, c.channels, c.kernel_size, conv, vb.pp(format!("conv{l}")))
            })
            .collect::<Result<_>>()?;
        Ok(Box::new(Classifier {
            convs,
            head: linear(c.channels, c.classes, vb.pp("head"))?,
            dropout: c.dropout,
        }))
    }

    /// Gaussian windows [B, in_channels, seq_len]; the label is the channel
    /// (among the first `classes`) with the largest mean over the window.
    fn batch(&self, ctx: &RunCtx, seed: u64) -> Result<Batch> {
        let c = &self.cfg;
        let (b, ch, t) = (ctx.batch_size, c.in_channels, c.seq_len);
        let mut rng = Rng::new(seed);
        let x = rng.normal_vec(b * ch * t, 0.0, 1.0);
        let labels: Vec<u32> = (0..b)
            .map(|row| {
                let mean = |k: usize| x[(row * ch + k) * t..][..t].iter().sum::<f32>();
                (0..c.classes.min(ch))
                    .max_by(|&a, &b| mean(a).total_cmp(&mean(b)))
                    .unwrap_or(0) as u32
            })
            .collect();
        let x = Tensor::from_vec(x, (b, ch, t), &ctx.device)?.to_dtype(ctx.dtype)?;
        Ok(Batch::new(vec![x, Tensor::from_vec(labels, b, &ctx.device)?]))
    }
}

struct Classifier {
    convs: Vec<Conv1d>,
    head: Linear,
    dropout: f64,
}

impl Classifier {
    fn logits(&self, x: &Tensor, step: &Step) -> Result<Tensor> {
        let mut x = x.clone();
        for (l, conv) in self.convs.iter().enumerate() {
            x = scoped(&format!("conv{l}"), || {
                step.dropout(&conv.forward(&x)?.relu()?, self.dropout)
            })?;
        }
        let pooled = scoped("pool", || x.mean(D::Minus1))?;
        scoped("head", || self.head.forward(&pooled))
    }
}

impl Model for Classifier {
    fn loss(&self, batch: &Batch, step: &Step) -> Result<Tensor> {
        let logits = self.logits(&batch.tensors[0], step)?;
        scoped("loss", || {
            candle_nn::loss::cross_entropy(&logits.to_dtype(DType::F32)?, &batch.tensors[1])
        })
    }

    fn predict(&self, batch: &Batch) -> Result<Tensor> {
        self.logits(&batch.tensors[0], &Step::eval())
    }
}
