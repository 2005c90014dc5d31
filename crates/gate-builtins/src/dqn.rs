//! The `dqn` workload (docs/models.md §2): a Q-network over a market state
//! (short / flat / long), trained with a Huber loss on the double-DQN target
//! r + γ(1−d)·Q_tgt(s′, argmax_a Q(s′, a)). The target network is frozen
//! state: plain tensors copied from the online network, never seen by the
//! optimizer, and re-synced every `target_sync` steps.

use candle_core::{Result, Tensor, D};
use candle_nn::{Linear, VarBuilder};

use gate::Rng;
use gate::{Batch, Model, ParamCount, Problems, RunCtx, Step, Workload};

/// Positions in a DQN [`Batch`] (a replay sample).
pub mod slot {
    /// States s, [B, state_dim].
    pub const STATES: usize = 0;
    /// Actions taken, u32 [B, 1].
    pub const ACTIONS: usize = 1;
    /// Rewards, [B].
    pub const REWARDS: usize = 2;
    /// Next states s′, [B, state_dim].
    pub const NEXT_STATES: usize = 3;
    /// 1 where the episode ended after the step, [B].
    pub const DONES: usize = 4;
}

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct Dqn {
    pub state_dim: usize,
    pub hidden_dim: usize,
    pub hidden_layers: usize,
    pub num_actions: usize,
    pub gamma: f64,
    pub huber_delta: f64,
    /// Optimizer steps between copies of the online weights into the target network.
    pub target_sync: usize,
    pub learning_rate: f64,
}

impl Default for Dqn {
    fn default() -> Self {
        Dqn {
            state_dim: 256,
            hidden_dim: 256,
            hidden_layers: 2,
            num_actions: 3,
            gamma: 0.99,
            huber_delta: 1.0,
            target_sync: 100,
            learning_rate: 1e-3,
        }
    }
}

impl Dqn {
    fn validate(c: Self) -> std::result::Result<Self, Problems> {
        let mut p = Problems::new();
        p.positive("state_dim", c.state_dim);
        p.positive("hidden_dim", c.hidden_dim);
        p.positive("hidden_layers", c.hidden_layers);
        p.positive("num_actions", c.num_actions);
        p.number("gamma", c.gamma, 0.0, 1.0);
        p.number("huber_delta", c.huber_delta, 1e-6, 1e6);
        p.positive("target_sync", c.target_sync);
        p.number("learning_rate", c.learning_rate, 1e-8, 1.0);
        // Tensors no machine can hold are spec errors, not failed builds (#28 item 16).
        let (s, h, l, a) = (c.state_dim, c.hidden_dim, c.hidden_layers, c.num_actions);
        p.allocatable("the first layer's weights", &[("state_dim", s), ("hidden_dim", h)]);
        p.allocatable(
            "the hidden layers' weights",
            &[("hidden_layers", l), ("hidden_dim", h), ("hidden_dim", h)],
        );
        p.allocatable("the last layer's weights", &[("hidden_dim", h), ("num_actions", a)]);
        if c.num_actions < 2 {
            p.error(
                "num_actions",
                "`num_actions` must be at least 2 for the argmax to choose",
                "the original model has 3 (short / flat / long)",
            );
        }
        p.finish(c)
    }

    fn dims(&self) -> Vec<usize> {
        let mut d = vec![self.state_dim];
        d.extend(std::iter::repeat_n(self.hidden_dim, self.hidden_layers));
        d.push(self.num_actions);
        d
    }

    fn net_elems(&self) -> u64 {
        self.dims().windows(2).map(|w| (w[0] * w[1] + w[1]) as u64).sum()
    }
}

/// A ReLU MLP given as (weight [out, in], bias [out]) pairs.
struct QNet {
    layers: Vec<Linear>,
}

impl QNet {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        gate::nn::linear_stack(&self.layers, x, Tensor::relu)
    }

    /// A view of the same storage with gradient tracking off: sees every optimizer update.
    fn detached_view(&self) -> QNet {
        let layers = self
            .layers
            .iter()
            .map(|l| Linear::new(l.weight().detach(), l.bias().map(|b| b.detach())))
            .collect();
        QNet { layers }
    }

    /// An independent copy of the current values (new storage, no graph).
    fn snapshot(&self) -> Result<QNet> {
        let layers = self
            .layers
            .iter()
            .map(|l| {
                let w = l.weight().detach().copy()?;
                let b = l.bias().map(|b| b.detach().copy()).transpose()?;
                Ok(Linear::new(w, b))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(QNet { layers })
    }
}

struct DqnModel {
    cfg: Dqn,
    online: QNet,
    /// The online weights without tracking, for the argmax over s′.
    online_view: QNet,
    target: QNet,
}

impl DqnModel {
    /// r + γ(1−d)·Q_tgt(s′, argmax_a Q(s′, a)), with no graph.
    fn double_dqn_target(&self, batch: &Batch) -> Result<Tensor> {
        let next = &batch.tensors[slot::NEXT_STATES];
        let best = self.online_view.forward(next)?.argmax_keepdim(D::Minus1)?;
        let q_next = self
            .target
            .forward(next)?
            .gather(&best, D::Minus1)?
            .squeeze(D::Minus1)?;
        let dones = &batch.tensors[slot::DONES];
        let not_done = dones.affine(-1.0, 1.0)?;
        let bootstrap = q_next.mul(&not_done)?.affine(self.cfg.gamma, 0.0)?;
        batch.tensors[slot::REWARDS]
            .add(&bootstrap)?
            .detach()
            .to_dtype(q_next.dtype())
    }
}

impl Model for DqnModel {
    fn loss(&self, batch: &Batch, _step: &Step) -> Result<Tensor> {
        let q_taken = gate::scoped("online", || {
            let q = self.online.forward(&batch.tensors[slot::STATES])?;
            q.gather(&batch.tensors[slot::ACTIONS], D::Minus1)?.squeeze(D::Minus1)
        })?;
        let target = gate::scoped("target", || self.double_dqn_target(batch))?;
        gate::scoped("loss", || gate::nn::huber(&q_taken, &target, self.cfg.huber_delta))
    }

    fn predict(&self, batch: &Batch) -> Result<Tensor> {
        gate::scoped("online", || self.online.forward(&batch.tensors[slot::STATES]))
    }

    fn after_step(&mut self, step: usize) -> Result<()> {
        if (step + 1).is_multiple_of(self.cfg.target_sync) {
            self.target = self.online.snapshot()?;
        }
        Ok(())
    }
}

impl Workload for Dqn {
    const KIND: &'static str = "dqn";
    type Config = Self;

    fn from_config(config: Self) -> std::result::Result<Self, Problems> {
        Dqn::validate(config)
    }

    fn config(&self) -> &Self {
        self
    }

    fn param_count(&self) -> ParamCount {
        let n = self.net_elems();
        ParamCount::new(n, n)
    }

    fn build(&self, vb: VarBuilder, _ctx: &RunCtx) -> Result<Box<dyn Model>> {
        let d = self.dims();
        let layers = d
            .windows(2)
            .enumerate()
            .map(|(i, w)| candle_nn::linear(w[0], w[1], vb.pp(format!("online.fc{i}"))))
            .collect::<Result<Vec<_>>>()?;
        let online = QNet { layers };
        let target = online.snapshot()?;
        let online_view = online.detached_view();
        Ok(Box::new(DqnModel {
            cfg: self.clone(),
            online,
            online_view,
            target,
        }))
    }

    /// A replay sample whose rewards follow a fixed linear map of (s, a), so
    /// the Q-function has something to learn; about 5 % of steps end an episode.
    fn batch(&self, ctx: &RunCtx, seed: u64) -> Result<Batch> {
        let mut rng = Rng::new(seed);
        let (b, s, a) = (ctx.batch_size, self.state_dim, self.num_actions);
        let states = rng.normal_vec(b * s, 0.0, 1.0);
        let next_states = rng.normal_vec(b * s, 0.0, 1.0);
        let actions: Vec<u32> = (0..b).map(|_| rng.below(a as u64) as u32).collect();
        let reward_map = rng.normal_vec(s * a, 0.0, 1.0 / (s as f64).sqrt());
        let rewards: Vec<f32> = (0..b)
            .map(|i| {
                let act = actions[i] as usize;
                (0..s).map(|j| states[i * s + j] * reward_map[j * a + act]).sum()
            })
            .collect();
        let dones: Vec<f32> = (0..b).map(|_| if rng.uniform() < 0.05 { 1.0 } else { 0.0 }).collect();
        let dev = &ctx.device;
        let dt = ctx.dtype;
        Ok(Batch::new(vec![
            Tensor::from_vec(states, (b, s), dev)?.to_dtype(dt)?,
            Tensor::from_vec(actions, (b, 1), dev)?,
            Tensor::from_vec(rewards, b, dev)?.to_dtype(dt)?,
            Tensor::from_vec(next_states, (b, s), dev)?.to_dtype(dt)?,
            Tensor::from_vec(dones, b, dev)?.to_dtype(dt)?,
        ]))
    }

    fn learning_rate(&self) -> f64 {
        self.learning_rate
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gate::test_support::nn::{assert_every_param_has_grad, ctx, loss_after_steps};

    fn tiny() -> Dqn {
        Dqn {
            state_dim: 12,
            hidden_dim: 16,
            hidden_layers: 2,
            num_actions: 3,
            target_sync: 1000,
            ..Dqn::default()
        }
    }

    #[test]
    fn default_count_is_models_md() {
        assert_eq!(Dqn::default().param_count().trainable, 132_355);
        assert_eq!(Dqn::default().param_count().frozen, 132_355);
    }

    #[test]
    fn closed_form_count_matches_built_model() -> Result<()> {
        let w = tiny();
        let store = gate::ParamStore::new(3);
        let c = ctx(8);
        w.build(store.builder(c.dtype, &c.device), &c)?;
        assert_eq!(store.elem_count(), w.param_count().trainable);
        Ok(())
    }

    #[test]
    fn loss_falls_and_every_param_gets_a_gradient() -> Result<()> {
        let w = tiny();
        let (first, last) = loss_after_steps(&w, 32, 30)?;
        assert!(last < 0.7 * first, "loss {first} → {last}");
        assert_every_param_has_grad(&w, 32)
    }

    #[test]
    fn target_network_is_frozen_until_sync() -> Result<()> {
        let w = Dqn {
            target_sync: 2,
            ..tiny()
        };
        let c = ctx(8);
        let store = gate::ParamStore::new(3);
        let mut model = w.build(store.builder(c.dtype, &c.device), &c)?;
        let batch = w.batch(&c, 1)?;
        let before = model.loss(&batch, &Step::eval())?.to_scalar::<f32>()?;
        // Move the online weights; the target must not follow until the sync.
        for v in store.vars() {
            v.set(&v.as_tensor().affine(1.1, 0.01)?)?;
        }
        let dm = |m: &dyn Model| -> Result<f32> { m.loss(&batch, &Step::eval())?.to_scalar::<f32>() };
        let moved = dm(model.as_ref())?;
        assert_ne!(before, moved);
        model.after_step(0)?; // step 1 of 2: no sync
        assert_eq!(dm(model.as_ref())?, moved);
        model.after_step(1)?; // sync
        assert_ne!(dm(model.as_ref())?, moved);
        Ok(())
    }

    #[test]
    fn config_rejects_one_action_and_unknown_keys() {
        let map = gate::test_support::test_config(&[("num_actions", "1"), ("gama", "0.9")]);
        let errs = gate::test_support::read_workload::<Dqn>(&map).unwrap_err();
        assert_eq!(errs.len(), 1, "an unknown key stops the reading: {errs:?}");
        assert_eq!(errs[0].hint, "did you mean `gamma`? this workload takes: state_dim, hidden_dim, hidden_layers, num_actions, gamma, huber_delta, target_sync, learning_rate");
        let map = gate::test_support::test_config(&[("num_actions", "1")]);
        let errs = gate::test_support::read_workload::<Dqn>(&map).unwrap_err();
        assert_eq!(
            errs[0].message,
            "`num_actions` must be at least 2 for the argmax to choose"
        );
        assert_eq!(errs[0].pos.unwrap().line, 2);
    }
}
