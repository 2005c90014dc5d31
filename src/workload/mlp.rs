//! A plain MLP regressor: the smallest real workload, whose memory follows
//! exactly from its shapes. It proves the measurement loop.

use candle_core::{Result, Tensor};
use candle_nn::{Linear, VarBuilder};
use serde_json::json;

use super::{Batch, ConfigError, ConfigMap, ConfigReader, Model, ParamCount, RunCtx, Step, Workload};
use crate::workload::rng::Rng;

#[derive(Debug, Clone, PartialEq)]
pub struct Mlp {
    pub input_dim: usize,
    pub hidden_dim: usize,
    pub hidden_layers: usize,
    pub output_dim: usize,
}

impl Mlp {
    pub fn from_config(map: &ConfigMap) -> std::result::Result<Self, Vec<ConfigError>> {
        let r = ConfigReader::new(map);
        let mlp = Mlp {
            input_dim: r.positive("input_dim", 256),
            hidden_dim: r.positive("hidden_dim", 256),
            hidden_layers: r.positive("hidden_layers", 2),
            output_dim: r.positive("output_dim", 3),
        };
        r.finish()?;
        Ok(mlp)
    }

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
        super::nn::linear_stack(&self.layers, x, Tensor::relu)
    }
}

impl Model for MlpModel {
    fn loss(&self, batch: &Batch, _step: &Step) -> Result<Tensor> {
        let pred = crate::probe::scoped("mlp", || self.forward(&batch.tensors[0]))?;
        super::nn::mse(&pred, &batch.tensors[1])
    }

    fn predict(&self, batch: &Batch) -> Result<Tensor> {
        self.forward(&batch.tensors[0])
    }
}

impl Workload for Mlp {
    fn kind(&self) -> &'static str {
        "mlp"
    }

    fn config(&self) -> serde_json::Value {
        json!({
            "input_dim": self.input_dim,
            "hidden_dim": self.hidden_dim,
            "hidden_layers": self.hidden_layers,
            "output_dim": self.output_dim,
        })
    }

    fn param_count(&self) -> ParamCount {
        let d = self.dims();
        let trainable = d.windows(2).map(|w| (w[0] * w[1] + w[1]) as u64).sum();
        ParamCount { trainable, frozen: 0 }
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
        let ctx = RunCtx {
            device: candle_core::Device::Cpu,
            dtype: candle_core::DType::F32,
            batch_size: 4,
            seed: 1,
            master_dtype: None,
        };
        let store = crate::workload::ParamStore::new(1);
        mlp.build(store.builder(ctx.dtype, &ctx.device), &ctx)?;
        assert_eq!(mlp.param_count().trainable, 10 * 7 + 7 + 7 * 7 + 7 + 7 * 3 + 3);
        assert_eq!(store.elem_count(), mlp.param_count().trainable);
        Ok(())
    }
}
