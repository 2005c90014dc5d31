//! A decoder-only transformer language model: token and position
//! embeddings, pre-LN blocks of causal multi-head attention and a GELU MLP,
//! a final norm and a head tied to the token embedding. Its workload trains
//! it on seeded token sequences that follow a fixed rule, so the loss falls.
//!
//! `checkpoint_blocks: true` checkpoints every block whole
//! (`gate::checkpoint::Block`): a block keeps only its input, and its
//! attention and MLP are recomputed in backward.

use gate::candle_core::{DType, Module, Result, Tensor};
use gate::candle_nn::{linear, loss, Embedding, Init, Linear, VarBuilder};
use gate::checkpoint::{Block, Checkpoints};
use gate::{nn, scoped, Batch, Model, ParamCount, Problems, Rng, RunCtx, Step, TrainingForward, Workload};
use serde::{Deserialize, Serialize};

/// `config:` of a `tiny_gpt` component; every key may be left out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct GptConfig {
    /// Tokens in the vocabulary.
    pub vocab: usize,
    /// Width of the residual stream.
    pub d_model: usize,
    /// Attention heads per block (`d_model` must divide by it).
    pub n_heads: usize,
    /// Blocks.
    pub n_layers: usize,
    /// Tokens per sequence (the context).
    pub seq_len: usize,
    /// Dropout on the attention weights and on each residual branch, in training.
    pub dropout: f64,
    /// Checkpoint every block whole: keep its input, recompute it in backward.
    pub checkpoint_blocks: bool,
}

impl Default for GptConfig {
    fn default() -> Self {
        GptConfig {
            vocab: 4096,
            d_model: 128,
            n_heads: 4,
            n_layers: 4,
            seq_len: 128,
            dropout: 0.1,
            checkpoint_blocks: false,
        }
    }
}

/// The workload: a validated config.
#[derive(Debug, Clone)]
pub struct TinyGpt {
    cfg: GptConfig,
}

impl TinyGpt {
    /// The closed form. Token embedding V·d and position embedding T·d; per
    /// block two norms (2·2d), the fused q/k/v projection (3d² + 3d), the
    /// output projection (d² + d), and the MLP (4d² + 4d and 4d² + d):
    /// 12d² + 13d; the final norm 2d. The head is the token embedding.
    pub fn closed_form(c: &GptConfig) -> u64 {
        let (v, d, t, l) = (c.vocab as u64, c.d_model as u64, c.seq_len as u64, c.n_layers as u64);
        v * d + t * d + l * (12 * d * d + 13 * d) + 2 * d
    }
}

impl Workload for TinyGpt {
    const KIND: &'static str = "tiny_gpt";
    type Config = GptConfig;

    fn from_config(cfg: GptConfig) -> std::result::Result<Self, Problems> {
        let mut p = Problems::new();
        p.positive("vocab", cfg.vocab);
        p.positive("d_model", cfg.d_model);
        p.positive("n_heads", cfg.n_heads);
        p.positive("n_layers", cfg.n_layers);
        p.positive("seq_len", cfg.seq_len);
        p.number("dropout", cfg.dropout, 0.0, 0.9);
        if cfg.n_heads > 0 && !cfg.d_model.is_multiple_of(cfg.n_heads) {
            p.error(
                "d_model",
                format!("d_model {} does not divide into {} heads", cfg.d_model, cfg.n_heads),
                "make d_model a multiple of n_heads",
            );
        }
        p.allocatable("the token embedding", &[("vocab", cfg.vocab), ("d_model", cfg.d_model)]);
        p.finish(TinyGpt { cfg })
    }

    fn config(&self) -> &GptConfig {
        &self.cfg
    }

    fn param_count(&self) -> ParamCount {
        ParamCount::new(Self::closed_form(&self.cfg), 0)
    }

    fn build(&self, vb: VarBuilder, ctx: &RunCtx) -> Result<Box<dyn Model>> {
        let c = &self.cfg;
        let d = c.d_model;
        let blocks = (0..c.n_layers)
            .map(|i| DecoderBlock::new(c, vb.pp(format!("block{i}"))))
            .collect::<Result<_>>()?;
        // The causal mask: 0 on and below the diagonal, -inf above.
        let t = c.seq_len;
        let mask: Vec<f32> = (0..t * t)
            .map(|i| if i % t > i / t { f32::NEG_INFINITY } else { 0.0 })
            .collect();
        // Embeddings drawn small (GPT-2's 0.02): the head is tied to the
        // token embedding, and candle's default N(0, 1) would start it with
        // logits of deviation √d and a loss far above ln(vocab).
        let small = Init::Randn { mean: 0.0, stdev: 0.02 };
        let tok = vb.pp("tok").get_with_hints((c.vocab, d), "weight", small)?;
        Ok(Box::new(GptModel {
            tok: Embedding::new(tok, d),
            pos: vb.get_with_hints((t, d), "pos", small)?,
            blocks,
            ln_f: Norm::new(d, vb.pp("ln_f"))?,
            mask: Tensor::from_vec(mask, (t, t), &ctx.device)?.to_dtype(ctx.dtype)?,
            vocab: c.vocab,
            checkpoint_blocks: c.checkpoint_blocks,
        }))
    }

    /// Token ids (u32, not `ctx.dtype`): `[B, T]` inputs and their `[B, T]`
    /// next tokens. Each sequence starts at a random token and steps by a
    /// fixed rule, so the next token is learnable.
    fn batch(&self, ctx: &RunCtx, seed: u64) -> Result<Batch> {
        let c = &self.cfg;
        let (b, t, v) = (ctx.batch_size, c.seq_len, c.vocab as u64);
        let mut rng = Rng::new(seed);
        let mut ids = Vec::with_capacity(b * (t + 1));
        for _ in 0..b {
            let mut tok = rng.next_u64() % v;
            for _ in 0..=t {
                ids.push(tok as u32);
                tok = (tok * 5 + 3) % v;
            }
        }
        let all = Tensor::from_vec(ids, (b, t + 1), &ctx.device)?;
        let x = all.narrow(1, 0, t)?.contiguous()?;
        let y = all.narrow(1, 1, t)?.contiguous()?;
        Ok(Batch::new(vec![x, y]))
    }
}

/// A layer norm's weight and bias, through gate's `nn::layer_norm`
/// (candle's fused one cuts the graph: docs/sdk.md §8).
struct Norm {
    w: Tensor,
    b: Tensor,
}

impl Norm {
    fn new(d: usize, vb: VarBuilder) -> Result<Self> {
        Ok(Norm {
            w: vb.get_with_hints(d, "weight", Init::Const(1.0))?,
            b: vb.get_with_hints(d, "bias", Init::Const(0.0))?,
        })
    }

    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        nn::layer_norm(x, &self.w, &self.b, 1e-5)
    }
}

/// One pre-LN block: x + attn(ln1(x)), then + mlp(ln2(x)).
struct DecoderBlock {
    ln1: Norm,
    qkv: Linear,
    proj: Linear,
    ln2: Norm,
    fc1: Linear,
    fc2: Linear,
    heads: usize,
    dropout: f64,
}

impl DecoderBlock {
    fn new(c: &GptConfig, vb: VarBuilder) -> Result<Self> {
        let d = c.d_model;
        Ok(DecoderBlock {
            ln1: Norm::new(d, vb.pp("ln1"))?,
            qkv: linear(d, 3 * d, vb.pp("qkv"))?,
            proj: linear(d, d, vb.pp("proj"))?,
            ln2: Norm::new(d, vb.pp("ln2"))?,
            fc1: linear(d, 4 * d, vb.pp("fc1"))?,
            fc2: linear(4 * d, d, vb.pp("fc2"))?,
            heads: c.n_heads,
            dropout: c.dropout,
        })
    }

    fn attention(&self, x: &Tensor, mask: &Tensor, step: &Step) -> Result<Tensor> {
        let (b, t, d) = x.dims3()?;
        let hd = d / self.heads;
        // [B, T, 3d] → three [B, heads, T, hd].
        let qkv = self.qkv.forward(x)?.reshape((b, t, 3, self.heads, hd))?;
        let part = |i: usize| qkv.narrow(2, i, 1)?.squeeze(2)?.transpose(1, 2)?.contiguous();
        let (q, k, v) = (part(0)?, part(1)?, part(2)?);
        let scores = (q.matmul(&k.t()?)? / (hd as f64).sqrt())?.broadcast_add(mask)?;
        let weights = step.dropout(&nn::softmax(&scores)?, self.dropout)?;
        let out = weights.matmul(&v)?.transpose(1, 2)?.reshape((b, t, d))?;
        step.dropout(&self.proj.forward(&out)?, self.dropout)
    }

    fn mlp(&self, x: &Tensor, step: &Step) -> Result<Tensor> {
        let h = self.fc1.forward(x)?.gelu()?;
        step.dropout(&self.fc2.forward(&h)?, self.dropout)
    }
}

/// Not position-wise (attention reads every earlier position), so it is
/// checkpointed whole: inputs `[x, mask]`.
impl Block for DecoderBlock {
    fn forward_block(&self, inputs: &[Tensor], step: &Step) -> Result<Tensor> {
        let (x, mask) = (&inputs[0], &inputs[1]);
        let x = (x + self.attention(&self.ln1.forward(x)?, mask, step)?)?;
        &x + self.mlp(&self.ln2.forward(&x)?, step)?
    }
}

struct GptModel {
    tok: Embedding,
    pos: Tensor,
    blocks: Vec<DecoderBlock>,
    ln_f: Norm,
    mask: Tensor,
    vocab: usize,
    checkpoint_blocks: bool,
}

impl GptModel {
    /// The logits `[B, T, V]`, each block run through `ck` (checkpointed
    /// whole when it is on, plain with the same dropout when it is off).
    fn logits<'a>(&'a self, x: &Tensor, step: &Step, ck: &mut Checkpoints<'a>) -> Result<Tensor> {
        let mut h = scoped("embed", || self.tok.forward(x)?.broadcast_add(&self.pos))?;
        for (i, block) in self.blocks.iter().enumerate() {
            let inputs = vec![h, self.mask.clone()];
            h = scoped(&format!("block{i}"), || ck.whole(block, inputs, step))?;
        }
        scoped("head", || {
            let h = self.ln_f.forward(&h)?;
            // Tied: the head is the token embedding, transposed.
            h.broadcast_matmul(&self.tok.embeddings().t()?)
        })
    }

    /// Next-token cross-entropy, in f32 whatever the compute dtype.
    fn loss_of(&self, logits: &Tensor, y: &Tensor) -> Result<Tensor> {
        scoped("loss", || {
            let logits = logits.to_dtype(DType::F32)?.reshape(((), self.vocab))?;
            loss::cross_entropy(&logits, &y.flatten_all()?)
        })
    }

    fn checkpoints(&self) -> Checkpoints<'_> {
        if self.checkpoint_blocks {
            Checkpoints::new()
        } else {
            Checkpoints::off()
        }
    }
}

impl Model for GptModel {
    fn loss(&self, batch: &Batch, step: &Step) -> Result<Tensor> {
        let logits = self.logits(&batch.tensors[0], step, &mut Checkpoints::off())?;
        self.loss_of(&logits, &batch.tensors[1])
    }

    fn predict(&self, batch: &Batch) -> Result<Tensor> {
        self.logits(&batch.tensors[0], &Step::eval(), &mut Checkpoints::off())
    }

    fn forward_train<'a>(&'a self, batch: &Batch, step: &Step) -> Result<Box<dyn TrainingForward + 'a>> {
        let mut ck = self.checkpoints();
        let logits = self.logits(&batch.tensors[0], step, &mut ck)?;
        let loss = self.loss_of(&logits, &batch.tensors[1])?;
        Ok(ck.into_forward(loss))
    }
}
