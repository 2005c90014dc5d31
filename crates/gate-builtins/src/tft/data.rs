//! Seeded synthetic batches with a learnable signal. Known reals are
//! sinusoids of time with per-sample phases; the target is a fixed function
//! of the known reals at the same step and of the first static real, plus
//! noise; the first observed real is the past target, the rest are noise.
//!
//! Batch positions: 0 static reals `[B, Vs]`, 1 encoder reals (known then
//! observed) `[B, Te, Vk + Vo]`, 2 decoder known reals `[B, Td, Vk]`,
//! 3 target `[B, Td]`.

use candle_core::{DType, Device, Result, Tensor};

use super::config::TftConfig;
use gate::{Batch, Rng};

pub const STATIC: usize = 0;
pub const ENCODER: usize = 1;
pub const DECODER: usize = 2;
pub const TARGET: usize = 3;

pub fn synthetic(cfg: &TftConfig, batch: usize, seed: u64, dtype: DType, device: &Device) -> Result<Batch> {
    let mut rng = Rng::new(seed);
    let (vs, vk, vo) = (
        cfg.num_static_features,
        cfg.num_known_features,
        cfg.num_unknown_features,
    );
    let (te, td) = (cfg.sequence_length, cfg.prediction_horizon);
    let t_all = te + td;
    let statics: Vec<f32> = rng.normal_vec(batch * vs, 0.0, 1.0);
    let mut known = vec![0f32; batch * t_all * vk];
    let mut target = vec![0f32; batch * t_all];
    for b in 0..batch {
        let phases: Vec<f64> = (0..vk).map(|_| rng.uniform() * std::f64::consts::TAU).collect();
        let level = statics[b * vs] as f64;
        for t in 0..t_all {
            for (j, phase) in phases.iter().enumerate() {
                let period = 6.0 + 3.0 * j as f64;
                known[(b * t_all + t) * vk + j] = (std::f64::consts::TAU * t as f64 / period + phase).sin() as f32;
            }
            let k = |j: usize| known[(b * t_all + t) * vk + j % vk] as f64;
            let y = 0.8 * k(0) - 0.5 * k(1) * k(2) + 0.3 * level + 0.1 * rng.normal();
            target[b * t_all + t] = y as f32;
        }
    }
    let ve = vk + vo;
    let mut encoder = Vec::with_capacity(batch * te * ve);
    let mut decoder = Vec::with_capacity(batch * td * vk);
    let mut future = Vec::with_capacity(batch * td);
    for b in 0..batch {
        for t in 0..t_all {
            let row = &known[(b * t_all + t) * vk..(b * t_all + t + 1) * vk];
            if t < te {
                encoder.extend_from_slice(row);
                encoder.push(target[b * t_all + t]);
                encoder.extend(rng.normal_vec(vo - 1, 0.0, 1.0));
            } else {
                decoder.extend_from_slice(row);
                future.push(target[b * t_all + t]);
            }
        }
    }
    let tensors = vec![
        Tensor::from_vec(statics, (batch, vs), device)?,
        Tensor::from_vec(encoder, (batch, te, ve), device)?,
        Tensor::from_vec(decoder, (batch, td, vk), device)?,
        Tensor::from_vec(future, (batch, td), device)?,
    ];
    let tensors = tensors
        .into_iter()
        .map(|t| t.to_dtype(dtype))
        .collect::<Result<Vec<_>>>()?;
    Ok(Batch::new(tensors))
}
