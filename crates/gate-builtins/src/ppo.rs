//! The `ppo` workload (docs/models.md §3): separate actor and critic MLPs trained
//! with the clipped surrogate + value loss − entropy bonus, on advantages
//! from GAE over a seeded rollout. The whole rollout (observations, actions,
//! old log-probs, rewards, dones, values) is part of the batch, so it lives
//! on the device and counts in every phase, as it does on the card; each
//! loss computes GAE over all of it and trains on one minibatch of `minibatch`
//! samples drawn from it. `batch_size` is not used: the rollout shape and
//! `minibatch` fix every size.

use candle_core::{Result, Tensor, D};
use candle_nn::{Linear, VarBuilder};

use gate::scoped;
use gate::Rng;
use gate::{Batch, Model, ParamCount, Problems, RunCtx, Step, Workload};

/// Positions in a PPO [`Batch`] (T = rollout steps, E = environments).
pub mod slot {
    /// Observations, [T, E, obs_dim].
    pub const OBS: usize = 0;
    /// Actions taken, u32 [T, E].
    pub const ACTIONS: usize = 1;
    /// Log-probabilities of the actions under the policy that collected them, [T, E].
    pub const OLD_LOG_PROBS: usize = 2;
    /// Rewards, [T, E].
    pub const REWARDS: usize = 3;
    /// 1 where the episode ended after the step, [T, E].
    pub const DONES: usize = 4;
    /// The critic's values at collection, with the bootstrap value last, [T + 1, E].
    pub const VALUES: usize = 5;
    /// The minibatch: indices into the flattened T·E samples, u32 [M].
    pub const MINIBATCH: usize = 6;
}

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct Ppo {
    pub obs_dim: usize,
    pub hidden_dim: usize,
    pub hidden_layers: usize,
    pub num_actions: usize,
    pub rollout_steps: usize,
    pub num_envs: usize,
    pub minibatch: usize,
    pub gamma: f64,
    pub gae_lambda: f64,
    pub clip: f64,
    pub value_coef: f64,
    pub entropy_coef: f64,
    pub learning_rate: f64,
}

impl Default for Ppo {
    fn default() -> Self {
        Ppo {
            obs_dim: 256,
            hidden_dim: 512,
            hidden_layers: 2,
            num_actions: 3,
            rollout_steps: 2048,
            num_envs: 8,
            minibatch: 2048,
            gamma: 0.99,
            gae_lambda: 0.95,
            clip: 0.2,
            value_coef: 0.5,
            entropy_coef: 0.01,
            learning_rate: 3e-4,
        }
    }
}

impl Ppo {
    fn validate(c: Self) -> std::result::Result<Self, Problems> {
        let mut p = Problems::new();
        p.positive("obs_dim", c.obs_dim);
        p.positive("hidden_dim", c.hidden_dim);
        p.positive("hidden_layers", c.hidden_layers);
        p.positive("num_actions", c.num_actions);
        p.positive("rollout_steps", c.rollout_steps);
        p.positive("num_envs", c.num_envs);
        p.positive("minibatch", c.minibatch);
        p.number("gamma", c.gamma, 0.0, 1.0);
        p.number("gae_lambda", c.gae_lambda, 0.0, 1.0);
        p.number("clip", c.clip, 0.0, 1.0);
        p.number("value_coef", c.value_coef, 0.0, 1e3);
        p.number("entropy_coef", c.entropy_coef, 0.0, 1e3);
        p.number("learning_rate", c.learning_rate, 1e-8, 1.0);
        // Tensors no machine can hold are spec errors, not failed builds (#28 item 16).
        let (o, h, l, a) = (c.obs_dim, c.hidden_dim, c.hidden_layers, c.num_actions);
        let (t, e) = (c.rollout_steps, c.num_envs);
        p.allocatable("the first layer's weights", &[("obs_dim", o), ("hidden_dim", h)]);
        p.allocatable(
            "the hidden layers' weights",
            &[("hidden_layers", l), ("hidden_dim", h), ("hidden_dim", h)],
        );
        p.allocatable("the actor's last weights", &[("hidden_dim", h), ("num_actions", a)]);
        p.allocatable("the reward map", &[("obs_dim", o), ("num_actions", a)]);
        p.allocatable(
            "the rollout's observations",
            &[("rollout_steps", t), ("num_envs", e), ("obs_dim", o)],
        );
        let samples = c.rollout_steps.saturating_mul(c.num_envs);
        if c.minibatch > samples {
            p.error(
                "minibatch",
                format!(
                    "`minibatch` ({}) is larger than the rollout (rollout_steps × num_envs = {samples})",
                    c.minibatch
                ),
                "a minibatch is drawn from one rollout; make it at most rollout_steps × num_envs",
            );
        }
        if c.num_actions < 2 {
            p.error(
                "num_actions",
                "`num_actions` must be at least 2 for a policy to choose",
                "the original model has 3 (short / flat / long)",
            );
        }
        p.finish(c)
    }

    fn dims(&self, out: usize) -> Vec<usize> {
        let mut d = vec![self.obs_dim];
        d.extend(std::iter::repeat_n(self.hidden_dim, self.hidden_layers));
        d.push(out);
        d
    }

    fn mlp_elems(dims: &[usize]) -> u64 {
        dims.windows(2).map(|w| (w[0] * w[1] + w[1]) as u64).sum()
    }
}

/// A tanh MLP.
struct Trunk {
    layers: Vec<Linear>,
}

impl Trunk {
    fn new(dims: &[usize], vb: VarBuilder) -> Result<Self> {
        let layers = dims
            .windows(2)
            .enumerate()
            .map(|(i, w)| candle_nn::linear(w[0], w[1], vb.pp(format!("fc{i}"))))
            .collect::<Result<Vec<_>>>()?;
        Ok(Trunk { layers })
    }

    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        gate::nn::linear_stack(&self.layers, x, Tensor::tanh)
    }
}

struct PpoModel {
    cfg: Ppo,
    actor: Trunk,
    critic: Trunk,
}

/// One minibatch, gathered from the rollout.
struct Minibatch {
    obs: Tensor,
    actions: Tensor,
    old_log_probs: Tensor,
    advantages: Tensor,
    returns: Tensor,
}

/// Generalised advantage estimation over the whole rollout, on the device:
/// δ_t = r_t + γ(1−d_t)V_{t+1} − V_t, A_t = δ_t + γλ(1−d_t)A_{t+1}.
/// Returns (advantages, returns), both [T, E].
pub fn gae(rewards: &Tensor, dones: &Tensor, values: &Tensor, gamma: f64, lambda: f64) -> Result<(Tensor, Tensor)> {
    let steps = rewards.dim(0)?;
    let not_done = dones.affine(-1.0, 1.0)?;
    let v_now = values.narrow(0, 0, steps)?;
    let v_next = values.narrow(0, 1, steps)?;
    let delta = (rewards + v_next.mul(&not_done)?.affine(gamma, 0.0)?)?.sub(&v_now)?;
    let carry = not_done.affine(gamma * lambda, 0.0)?;
    // The recurrence runs backwards in time over [E]-sized rows.
    let mut rows = Vec::with_capacity(steps);
    let mut next = delta.get(steps - 1)?;
    rows.push(next.clone());
    for t in (0..steps - 1).rev() {
        next = delta.get(t)?.add(&carry.get(t)?.mul(&next)?)?;
        rows.push(next.clone());
    }
    rows.reverse();
    let advantages = Tensor::stack(&rows, 0)?;
    let returns = advantages.add(&v_now)?;
    Ok((advantages, returns))
}

impl PpoModel {
    fn minibatch(&self, batch: &Batch) -> Result<Minibatch> {
        let t = &batch.tensors;
        let (advantages, returns) = scoped("gae", || {
            gae(
                &t[slot::REWARDS],
                &t[slot::DONES],
                &t[slot::VALUES],
                self.cfg.gamma,
                self.cfg.gae_lambda,
            )
        })?;
        scoped("minibatch", || {
            let idx = &t[slot::MINIBATCH];
            let pick = |x: &Tensor| x.flatten_all()?.index_select(idx, 0);
            let obs = t[slot::OBS].reshape(((), self.cfg.obs_dim))?.index_select(idx, 0)?;
            let adv = pick(&advantages)?;
            // Per-minibatch normalisation, as PPO implementations do.
            let centred = adv.broadcast_sub(&adv.mean_all()?)?;
            let std = centred.sqr()?.mean_all()?.sqrt()?;
            let advantages = centred.broadcast_div(&(std + 1e-8)?)?;
            Ok(Minibatch {
                obs,
                actions: pick(&t[slot::ACTIONS])?.unsqueeze(1)?,
                old_log_probs: pick(&t[slot::OLD_LOG_PROBS])?,
                advantages,
                returns: pick(&returns)?,
            })
        })
    }
}

impl Model for PpoModel {
    fn loss(&self, batch: &Batch, _step: &Step) -> Result<Tensor> {
        let mb = self.minibatch(batch)?;
        let logits = scoped("actor", || self.actor.forward(&mb.obs))?;
        let value = scoped("critic", || self.critic.forward(&mb.obs)?.squeeze(D::Minus1))?;
        scoped("loss", || {
            let log_probs = candle_nn::ops::log_softmax(&logits, D::Minus1)?;
            let taken = log_probs.gather(&mb.actions, D::Minus1)?.squeeze(D::Minus1)?;
            let ratio = taken.sub(&mb.old_log_probs)?.exp()?;
            let clipped = ratio.clamp(1.0 - self.cfg.clip, 1.0 + self.cfg.clip)?;
            let surrogate = ratio.mul(&mb.advantages)?.minimum(&clipped.mul(&mb.advantages)?)?;
            let policy_loss = surrogate.mean_all()?.neg()?;
            let value_loss = gate::nn::mse(&value, &mb.returns)?.affine(self.cfg.value_coef, 0.0)?;
            let entropy = log_probs.exp()?.mul(&log_probs)?.sum(D::Minus1)?.neg()?.mean_all()?;
            (policy_loss + value_loss)? - entropy.affine(self.cfg.entropy_coef, 0.0)?
        })
    }

    /// Action logits and value for the minibatch's observations, [M, actions + 1].
    fn predict(&self, batch: &Batch) -> Result<Tensor> {
        let obs = batch.tensors[slot::OBS]
            .reshape(((), self.cfg.obs_dim))?
            .index_select(&batch.tensors[slot::MINIBATCH], 0)?;
        let logits = scoped("actor", || self.actor.forward(&obs))?;
        let value = scoped("critic", || self.critic.forward(&obs))?;
        Tensor::cat(&[logits, value], D::Minus1)
    }
}

impl Workload for Ppo {
    const KIND: &'static str = "ppo";
    type Config = Self;

    fn from_config(config: Self) -> std::result::Result<Self, Problems> {
        Ppo::validate(config)
    }

    fn config(&self) -> &Self {
        self
    }

    fn param_count(&self) -> ParamCount {
        ParamCount::new(
            Self::mlp_elems(&self.dims(self.num_actions)) + Self::mlp_elems(&self.dims(1)),
            0,
        )
    }

    fn build(&self, vb: VarBuilder, _ctx: &RunCtx) -> Result<Box<dyn Model>> {
        Ok(Box::new(PpoModel {
            cfg: self.clone(),
            actor: Trunk::new(&self.dims(self.num_actions), vb.pp("actor"))?,
            critic: Trunk::new(&self.dims(1), vb.pp("critic"))?,
        }))
    }

    /// A rollout from a uniform behaviour policy in environments whose reward
    /// is a fixed linear map of (observation, action), with ~1 % episode ends;
    /// collection-time values are small noise. The minibatch is a seeded
    /// sample without replacement.
    fn batch(&self, ctx: &RunCtx, seed: u64) -> Result<Batch> {
        let mut rng = Rng::new(seed);
        let (t, e, o, a) = (self.rollout_steps, self.num_envs, self.obs_dim, self.num_actions);
        let n = t * e;
        let obs = rng.normal_vec(n * o, 0.0, 1.0);
        let actions: Vec<u32> = (0..n).map(|_| rng.below(a as u64) as u32).collect();
        let old_log_probs = vec![-(a as f32).ln(); n];
        let reward_map = rng.normal_vec(o * a, 0.0, 1.0 / (o as f64).sqrt());
        let rewards: Vec<f32> = (0..n)
            .map(|i| {
                let act = actions[i] as usize;
                (0..o).map(|j| obs[i * o + j] * reward_map[j * a + act]).sum()
            })
            .collect();
        let dones: Vec<f32> = (0..n).map(|_| if rng.uniform() < 0.01 { 1.0 } else { 0.0 }).collect();
        let values = rng.normal_vec((t + 1) * e, 0.0, 0.1);
        let minibatch = sample_without_replacement(&mut rng, n, self.minibatch);
        let dev = &ctx.device;
        let dt = ctx.dtype;
        Ok(Batch::new(vec![
            Tensor::from_vec(obs, (t, e, o), dev)?.to_dtype(dt)?,
            Tensor::from_vec(actions, (t, e), dev)?,
            Tensor::from_vec(old_log_probs, (t, e), dev)?.to_dtype(dt)?,
            Tensor::from_vec(rewards, (t, e), dev)?.to_dtype(dt)?,
            Tensor::from_vec(dones, (t, e), dev)?.to_dtype(dt)?,
            Tensor::from_vec(values, (t + 1, e), dev)?.to_dtype(dt)?,
            Tensor::from_vec(minibatch, self.minibatch, dev)?,
        ]))
    }

    fn learning_rate(&self) -> f64 {
        self.learning_rate
    }
}

/// `k` distinct indices below `n` (partial Fisher–Yates).
fn sample_without_replacement(rng: &mut Rng, n: usize, k: usize) -> Vec<u32> {
    let mut idx: Vec<u32> = (0..n as u32).collect();
    for i in 0..k.min(n) {
        let j = i + rng.below((n - i) as u64) as usize;
        idx.swap(i, j);
    }
    idx.truncate(k.min(n));
    idx
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;
    use gate::test_support::nn::{assert_every_param_has_grad, ctx, loss_after_steps};

    fn tiny() -> Ppo {
        Ppo {
            obs_dim: 8,
            hidden_dim: 16,
            rollout_steps: 12,
            num_envs: 3,
            minibatch: 20,
            learning_rate: 3e-3,
            ..Ppo::default()
        }
    }

    #[test]
    fn default_count_is_models_md() {
        assert_eq!(Ppo::default().param_count().trainable, 790_532);
    }

    #[test]
    fn closed_form_count_matches_built_model() -> Result<()> {
        let w = tiny();
        let store = gate::ParamStore::new(3);
        let c = ctx(1);
        w.build(store.builder(c.dtype, &c.device), &c)?;
        assert_eq!(store.elem_count(), w.param_count().trainable);
        Ok(())
    }

    #[test]
    fn loss_falls_and_every_param_gets_a_gradient() -> Result<()> {
        let w = tiny();
        let (first, last) = loss_after_steps(&w, 1, 40)?;
        assert!(first > 0.0 && last < 0.7 * first, "loss {first} → {last}");
        assert_every_param_has_grad(&w, 1)
    }

    #[test]
    fn gae_matches_a_scalar_loop() -> Result<()> {
        let (t, e, g, l) = (7, 2, 0.9, 0.8);
        let mut rng = Rng::new(4);
        let r = rng.normal_vec(t * e, 0.0, 1.0);
        let d: Vec<f32> = (0..t * e).map(|i| if i % 5 == 3 { 1.0 } else { 0.0 }).collect();
        let v = rng.normal_vec((t + 1) * e, 0.0, 1.0);
        let dev = Device::Cpu;
        let (adv, ret) = gae(
            &Tensor::from_vec(r.clone(), (t, e), &dev)?,
            &Tensor::from_vec(d.clone(), (t, e), &dev)?,
            &Tensor::from_vec(v.clone(), (t + 1, e), &dev)?,
            g,
            l,
        )?;
        let (adv, ret) = (adv.to_vec2::<f32>()?, ret.to_vec2::<f32>()?);
        for env in 0..e {
            let mut next = 0.0f64;
            for s in (0..t).rev() {
                let i = s * e + env;
                let nd = 1.0 - d[i] as f64;
                let delta = r[i] as f64 + g * nd * v[i + e] as f64 - v[i] as f64;
                next = delta + g * l * nd * next;
                assert!((adv[s][env] as f64 - next).abs() < 1e-5);
                assert!((ret[s][env] as f64 - next - v[i] as f64).abs() < 1e-5);
            }
        }
        Ok(())
    }

    #[test]
    fn rollout_is_in_the_batch_and_minibatch_indices_are_distinct() -> Result<()> {
        let w = tiny();
        let b = w.batch(&ctx(1), 3)?;
        assert_eq!(b.tensors[slot::OBS].dims(), &[12, 3, 8]);
        let mut idx = b.tensors[slot::MINIBATCH].to_vec1::<u32>()?;
        idx.sort();
        idx.dedup();
        assert_eq!(idx.len(), 20);
        assert!(idx.iter().all(|&i| i < 36));
        Ok(())
    }

    #[test]
    fn minibatch_larger_than_rollout_is_an_error() {
        let map = gate::test_support::test_config(&[("rollout_steps", "4"), ("num_envs", "2")]);
        let errs = gate::test_support::read_workload::<Ppo>(&map).unwrap_err();
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].key.as_deref(), Some("minibatch"));
    }
}
