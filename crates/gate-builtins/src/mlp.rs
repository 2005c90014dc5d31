//! A plain MLP regressor: the smallest real workload, whose memory follows
//! exactly from its shapes. It proves the measurement loop.

use candle_core::{Result, Tensor};
use candle_nn::{Linear, VarBuilder};
use serde::{Deserialize, Serialize};

use gate::Rng;
use gate::{Batch, Model, ParamCount, Problems, RunCtx, Step, Workload};

/// The config and the workload in one: every key may be left out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Mlp {
    pub input_dim: usize,
    pub hidden_dim: usize,
    pub hidden_layers: usize,
    pub output_dim: usize,
}

impl Default for Mlp {
    fn default() -> Self {
        Mlp {
            input_dim: 256,
            hidden_dim: 256,
            hidden_layers: 2,
            output_dim: 3,
        }
    }
}

impl Mlp {
    fn dims(&self) -> Vec<usize> {
        let mut d = vec![self.input_dim];
        d.extend(std::iter::repeat_n(self.hidden_dim, self.hidden_layers));
        d.push(self.output_dim);
        d
    }
}

struct MlpModel {
    layers: Vec<Linear>,
}

impl MlpModel {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        gate::nn::linear_stack(&self.layers, x, Tensor::relu)
    }
}

impl Model for MlpModel {
    fn loss(&self, batch: &Batch, _step: &Step) -> Result<Tensor> {
        let pred = gate::scoped("mlp", || self.forward(&batch.tensors[0]))?;
        gate::nn::mse(&pred, &batch.tensors[1])
    }

    fn predict(&self, batch: &Batch) -> Result<Tensor> {
        self.forward(&batch.tensors[0])
    }
}

impl Workload for Mlp {
    const KIND: &'static str = "mlp";
    type Config = Self;

    fn from_config(c: Self) -> std::result::Result<Self, Problems> {
        let mut p = Problems::new();
        p.positive("input_dim", c.input_dim);
        p.positive("hidden_dim", c.hidden_dim);
        p.positive("hidden_layers", c.hidden_layers);
        p.positive("output_dim", c.output_dim);
        // Every tensor the config sizes must be one a machine can hold:
        // `input_dim: 2^41` passed validation and failed at build (#28 item 16).
        let (i, h, l, o) = (c.input_dim, c.hidden_dim, c.hidden_layers, c.output_dim);
        p.allocatable("the first layer's weights", &[("input_dim", i), ("hidden_dim", h)]);
        p.allocatable(
            "the hidden layers' weights",
            &[("hidden_layers", l), ("hidden_dim", h), ("hidden_dim", h)],
        );
        p.allocatable("the last layer's weights", &[("hidden_dim", h), ("output_dim", o)]);
        p.allocatable("the target map", &[("input_dim", i), ("output_dim", o)]);
        p.finish(c)
    }

    fn config(&self) -> &Self {
        self
    }

    fn param_count(&self) -> ParamCount {
        let d = self.dims();
        let trainable = d.windows(2).map(|w| (w[0] * w[1] + w[1]) as u64).sum();
        ParamCount::new(trainable, 0)
    }

    fn build(&self, vb: VarBuilder, _ctx: &RunCtx) -> Result<Box<dyn Model>> {
        let d = self.dims();
        let layers = d
            .windows(2)
            .enumerate()
            .map(|(i, w)| candle_nn::linear(w[0], w[1], vb.pp(format!("fc{i}"))))
            .collect::<Result<Vec<_>>>()?;
        Ok(Box::new(MlpModel { layers }))
    }

    fn batch(&self, ctx: &RunCtx, seed: u64) -> Result<Batch> {
        let mut rng = Rng::new(seed);
        let b = ctx.batch_size;
        let x = Tensor::from_vec(
            rng.normal_vec(b * self.input_dim, 0.0, 1.0),
            (b, self.input_dim),
            &ctx.device,
        )?;
        // A learnable target: a fixed linear map of the input.
        let w = Tensor::from_vec(
            rng.normal_vec(self.input_dim * self.output_dim, 0.0, 0.1),
            (self.input_dim, self.output_dim),
            &ctx.device,
        )?;
        let y = x.matmul(&w)?;
        Ok(Batch::new(vec![x.to_dtype(ctx.dtype)?, y.to_dtype(ctx.dtype)?]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closed_form_count_matches_built_model() -> Result<()> {
        let mlp = Mlp {
            input_dim: 10,
            hidden_dim: 7,
            hidden_layers: 2,
            output_dim: 3,
        };
        let ctx = RunCtx::new(candle_core::Device::Cpu, candle_core::DType::F32, 4).with_seed(1);
        let store = gate::ParamStore::new(1);
        mlp.build(store.builder(ctx.dtype, &ctx.device), &ctx)?;
        assert_eq!(mlp.param_count().trainable, 10 * 7 + 7 + 7 * 7 + 7 + 7 * 3 + 3);
        assert_eq!(store.elem_count(), mlp.param_count().trainable);
        Ok(())
    }
}
