//! The `mamba2` workload (docs/models.md §4): a Linear embedding, a stack of
//! Mamba-2 (SSD, ngroups = 1) blocks, a final RMSNorm and a Linear head,
//! regressing a causal, exponentially decaying signal of the inputs at every
//! step. Each block runs under named scopes: `layerI.{norm, in_proj, conv,
//! ssd, gated_norm, out_proj}`.

pub mod ssd;

use candle_core::{Module, Result, Tensor, D};
use candle_nn::init::Init;
use candle_nn::{Linear, VarBuilder};
use serde_json::json;

use gate::nn::{rms_norm, softplus};
use gate::scoped;
use gate::Rng;
use gate::{Batch, Model, ParamCount, Problems, RunCtx, Step, Workload};

/// Positions in a Mamba-2 [`Batch`].
pub mod slot {
    /// Inputs, [B, L, input_dim].
    pub const INPUTS: usize = 0;
    /// Targets, [B, L, output_dim].
    pub const TARGETS: usize = 1;
}

const NORM_EPS: f64 = 1e-5;

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct Mamba2 {
    pub input_dim: usize,
    /// D.
    pub d_model: usize,
    pub n_layers: usize,
    /// E, the inner width (expand × D).
    pub d_inner: usize,
    /// N.
    pub d_state: usize,
    /// P; the head count is H = E / P.
    pub head_dim: usize,
    /// K.
    pub d_conv: usize,
    /// Q, the SSD chunk length.
    pub chunk_size: usize,
    /// L.
    pub seq_len: usize,
    pub output_dim: usize,
    pub learning_rate: f64,
}

impl Default for Mamba2 {
    fn default() -> Self {
        Mamba2 {
            input_dim: 256,
            d_model: 128,
            n_layers: 2,
            d_inner: 256,
            d_state: 64,
            head_dim: 32,
            d_conv: 4,
            chunk_size: 32,
            seq_len: 64,
            output_dim: 1,
            learning_rate: 1e-3,
        }
    }
}

impl Mamba2 {
    fn validate(c: Self) -> std::result::Result<Self, Problems> {
        let mut p = Problems::new();
        p.positive("input_dim", c.input_dim);
        p.positive("d_model", c.d_model);
        p.positive("n_layers", c.n_layers);
        p.positive("d_inner", c.d_inner);
        p.positive("d_state", c.d_state);
        p.positive("head_dim", c.head_dim);
        p.positive("d_conv", c.d_conv);
        p.positive("chunk_size", c.chunk_size);
        p.positive("seq_len", c.seq_len);
        p.positive("output_dim", c.output_dim);
        p.number("learning_rate", c.learning_rate, 1e-8, 1.0);
        // Tensors no machine can hold are spec errors, not failed builds
        // (#28 item 16); the input projection is wider than d_inner and
        // d_state each, so these bound it from below.
        let (d, e, n) = (c.d_model, c.d_inner, c.d_state);
        p.allocatable("the input's projection", &[("input_dim", c.input_dim), ("d_model", d)]);
        p.allocatable(
            "the blocks' projections",
            &[("n_layers", c.n_layers), ("d_model", d), ("d_inner", e)],
        );
        p.allocatable(
            "the blocks' state projections",
            &[("n_layers", c.n_layers), ("d_model", d), ("d_state", n)],
        );
        p.allocatable("the convolution", &[("d_inner", e), ("d_conv", c.d_conv)]);
        p.allocatable(
            "a sequence's inner activations",
            &[("seq_len", c.seq_len), ("d_inner", e)],
        );
        p.allocatable(
            "a chunk's states",
            &[("chunk_size", c.chunk_size), ("d_inner", e), ("d_state", n)],
        );
        p.allocatable(
            "the output's projection",
            &[("d_model", d), ("output_dim", c.output_dim)],
        );
        if !c.d_inner.is_multiple_of(c.head_dim) {
            p.error(
                "head_dim",
                format!(
                    "`head_dim` ({}) must divide `d_inner` ({}): the heads split the inner width",
                    c.head_dim, c.d_inner
                ),
                format!(
                    "for example `head_dim: {}`",
                    largest_divisor_at_most(c.d_inner, c.head_dim)
                ),
            );
        }
        p.finish(c)
    }

    /// H.
    pub fn heads(&self) -> usize {
        self.d_inner / self.head_dim
    }

    fn in_proj_width(&self) -> usize {
        2 * self.d_inner + 2 * self.d_state + self.heads()
    }

    /// Parameters of one block:
    /// D(2E+2N+H) + (E+2N)(K+1) + 3H + E + D·E + D.
    pub fn layer_params(&self) -> u64 {
        let (d, e, n, h, k) = (self.d_model, self.d_inner, self.d_state, self.heads(), self.d_conv);
        (d * self.in_proj_width() + (e + 2 * n) * (k + 1) + 3 * h + e + d * e + d) as u64
    }
}

fn largest_divisor_at_most(n: usize, at_most: usize) -> usize {
    (1..=at_most.min(n)).rev().find(|k| n.is_multiple_of(*k)).unwrap_or(1)
}

/// ln(eˣ − 1): the dt_bias that makes softplus give `dt`.
fn inverse_softplus(dt: f64) -> f64 {
    dt.exp_m1().ln()
}

struct Block {
    cfg: Mamba2,
    norm: Tensor,
    in_proj: Linear,
    conv_weight: Tensor,
    conv_bias: Tensor,
    dt_bias: Tensor,
    a_log: Tensor,
    d_skip: Tensor,
    gate_norm: Tensor,
    out_proj: Linear,
}

impl Block {
    fn new(cfg: &Mamba2, vb: VarBuilder) -> Result<Self> {
        let (d, e, n, h, k) = (cfg.d_model, cfg.d_inner, cfg.d_state, cfg.heads(), cfg.d_conv);
        let conv_bound = 1.0 / (k as f64).sqrt();
        let conv_init = Init::Uniform {
            lo: -conv_bound,
            up: conv_bound,
        };
        Ok(Block {
            cfg: cfg.clone(),
            norm: vb.get_with_hints(d, "norm.weight", Init::Const(1.0))?,
            in_proj: candle_nn::linear_no_bias(d, cfg.in_proj_width(), vb.pp("in_proj"))?,
            conv_weight: vb.get_with_hints((e + 2 * n, k), "conv.weight", conv_init)?,
            conv_bias: vb.get_with_hints(e + 2 * n, "conv.bias", conv_init)?,
            // Uniform in softplus⁻¹ space over dt ∈ [1e-3, 0.1] is close to
            // the reference's log-uniform dt (softplus⁻¹(dt) ≈ ln dt there);
            // VarBuilder hints only draw affine distributions.
            dt_bias: vb.get_with_hints(
                h,
                "dt_bias",
                Init::Uniform {
                    lo: inverse_softplus(1e-3),
                    up: inverse_softplus(0.1),
                },
            )?,
            // A = −exp(A_log) spans [1, 16] as in the reference (log-uniform here).
            a_log: vb.get_with_hints(
                h,
                "A_log",
                Init::Uniform {
                    lo: 0.0,
                    up: 16f64.ln(),
                },
            )?,
            d_skip: vb.get_with_hints(h, "D", Init::Const(1.0))?,
            gate_norm: vb.get_with_hints(e, "gated_norm.weight", Init::Const(1.0))?,
            out_proj: candle_nn::linear_no_bias(e, d, vb.pp("out_proj"))?,
        })
    }

    fn forward(&self, u: &Tensor) -> Result<Tensor> {
        let c = &self.cfg;
        let (bs, len, _) = u.dims3()?;
        let (e, n, h, p) = (c.d_inner, c.d_state, c.heads(), c.head_dim);
        let normed = scoped("norm", || rms_norm(u, &self.norm, NORM_EPS))?;
        let zxbcdt = scoped("in_proj", || self.in_proj.forward(&normed))?;
        let z = zxbcdt.narrow(D::Minus1, 0, e)?;
        let xbc = zxbcdt.narrow(D::Minus1, e, e + 2 * n)?;
        let dt = zxbcdt.narrow(D::Minus1, 2 * e + 2 * n, h)?;
        let xbc = scoped("conv", || {
            ssd::causal_depthwise_conv(&xbc, &self.conv_weight, &self.conv_bias)?.silu()
        })?;
        let y = scoped("ssd", || {
            let x = xbc.narrow(D::Minus1, 0, e)?.reshape((bs, len, h, p))?;
            let b = xbc.narrow(D::Minus1, e, n)?;
            let cm = xbc.narrow(D::Minus1, e + n, n)?;
            let dt = softplus(&dt.broadcast_add(&self.dt_bias)?)?;
            let a = self.a_log.exp()?.neg()?;
            ssd::ssd(&x, &dt, &a, &b, &cm, &self.d_skip, c.chunk_size)?.reshape((bs, len, e))
        })?;
        let gated = scoped("gated_norm", || {
            rms_norm(&y.mul(&z.silu()?)?, &self.gate_norm, NORM_EPS)
        })?;
        let out = scoped("out_proj", || self.out_proj.forward(&gated))?;
        u.add(&out)
    }
}

struct Mamba2Model {
    embed: Linear,
    blocks: Vec<Block>,
    norm_f: Tensor,
    head: Linear,
}

impl Mamba2Model {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let mut h = scoped("embed", || self.embed.forward(x))?;
        for (i, block) in self.blocks.iter().enumerate() {
            h = scoped(&format!("layer{i}"), || block.forward(&h))?;
        }
        scoped("head", || self.head.forward(&rms_norm(&h, &self.norm_f, NORM_EPS)?))
    }
}

impl Model for Mamba2Model {
    fn loss(&self, batch: &Batch, _step: &Step) -> Result<Tensor> {
        let pred = self.forward(&batch.tensors[slot::INPUTS])?;
        gate::nn::mse(&pred, &batch.tensors[slot::TARGETS])
    }

    fn predict(&self, batch: &Batch) -> Result<Tensor> {
        self.forward(&batch.tensors[slot::INPUTS])
    }
}

impl Workload for Mamba2 {
    const KIND: &'static str = "mamba2";
    type Config = Self;

    fn from_config(config: Self) -> std::result::Result<Self, Problems> {
        Mamba2::validate(config)
    }

    fn config(&self) -> &Self {
        self
    }

    fn describe(&self) -> serde_json::Value {
        json!({
            "input_dim": self.input_dim,
            "d_model": self.d_model,
            "n_layers": self.n_layers,
            "d_inner": self.d_inner,
            "d_state": self.d_state,
            "head_dim": self.head_dim,
            "heads": self.heads(),
            "d_conv": self.d_conv,
            "chunk_size": self.chunk_size,
            "seq_len": self.seq_len,
            "output_dim": self.output_dim,
            "learning_rate": self.learning_rate,
        })
    }

    /// Embedding + blocks + final norm + head.
    fn param_count(&self) -> ParamCount {
        let d = self.d_model as u64;
        let embed = self.input_dim as u64 * d + d;
        let head = d * self.output_dim as u64 + self.output_dim as u64;
        ParamCount::new(embed + self.n_layers as u64 * self.layer_params() + d + head, 0)
    }

    fn build(&self, vb: VarBuilder, _ctx: &RunCtx) -> Result<Box<dyn Model>> {
        let blocks = (0..self.n_layers)
            .map(|i| Block::new(self, vb.pp(format!("layers.{i}"))))
            .collect::<Result<Vec<_>>>()?;
        Ok(Box::new(Mamba2Model {
            embed: candle_nn::linear(self.input_dim, self.d_model, vb.pp("embed"))?,
            blocks,
            norm_f: vb.get_with_hints(self.d_model, "norm_f.weight", Init::Const(1.0))?,
            head: candle_nn::linear(self.d_model, self.output_dim, vb.pp("head"))?,
        }))
    }

    /// Gaussian inputs; targets y_t = 0.8·y_{t−1} + 0.6·(x_t·W), a causal
    /// decaying memory of a fixed projection (unit variance), which a
    /// state-space model can learn.
    fn batch(&self, ctx: &RunCtx, seed: u64) -> Result<Batch> {
        let mut rng = Rng::new(seed);
        let (b, l, i, o) = (ctx.batch_size, self.seq_len, self.input_dim, self.output_dim);
        let x = rng.normal_vec(b * l * i, 0.0, 1.0);
        let w = rng.normal_vec(i * o, 0.0, 1.0 / (i as f64).sqrt());
        let mut y = vec![0f32; b * l * o];
        for bi in 0..b {
            for t in 0..l {
                for oi in 0..o {
                    let drive: f32 = (0..i).map(|j| x[(bi * l + t) * i + j] * w[j * o + oi]).sum();
                    let prev = if t == 0 { 0.0 } else { y[(bi * l + t - 1) * o + oi] };
                    y[(bi * l + t) * o + oi] = 0.8 * prev + 0.6 * drive;
                }
            }
        }
        let dev = &ctx.device;
        Ok(Batch::new(vec![
            Tensor::from_vec(x, (b, l, i), dev)?.to_dtype(ctx.dtype)?,
            Tensor::from_vec(y, (b, l, o), dev)?.to_dtype(ctx.dtype)?,
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

    /// L = 10 is not a multiple of Q = 4, so the padded path is trained too.
    fn tiny() -> Mamba2 {
        Mamba2 {
            input_dim: 12,
            d_model: 16,
            n_layers: 2,
            d_inner: 32,
            d_state: 8,
            head_dim: 8,
            d_conv: 4,
            chunk_size: 4,
            seq_len: 10,
            output_dim: 1,
            learning_rate: 3e-3,
        }
    }

    #[test]
    fn default_count_is_models_md() {
        let m = Mamba2::default();
        assert_eq!(m.heads(), 8);
        assert_eq!(m.param_count().trainable, 269_233);
    }

    #[test]
    fn closed_form_count_matches_built_model() -> Result<()> {
        for w in [tiny(), Mamba2::default()] {
            let store = gate::ParamStore::new(3);
            let c = ctx(2);
            w.build(store.builder(c.dtype, &c.device), &c)?;
            assert_eq!(store.elem_count(), w.param_count().trainable);
        }
        Ok(())
    }

    #[test]
    fn loss_falls_and_every_param_gets_a_gradient() -> Result<()> {
        let w = tiny();
        let (first, last) = loss_after_steps(&w, 4, 40)?;
        assert!(last < 0.7 * first, "loss {first} → {last}");
        assert_every_param_has_grad(&w, 4)
    }

    #[test]
    fn head_dim_must_divide_d_inner() {
        let map = gate::test_support::test_config(&[("head_dim", "30")]);
        let errs = gate::test_support::read_workload::<Mamba2>(&map).unwrap_err();
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].hint, "for example `head_dim: 16`");
    }
}
