//! The team's Temporal Fusion Transformer (Lim, Arık, Loeff and Pfister,
//! International Journal of Forecasting 37(4), 2021), written with candle
//! 0.9.1's candle-nn layers, and its gate workload `tft_team`.
//!
//! The pipeline: static, encoder and decoder variable selection networks
//! (one gated residual network per variable, softmax weights from a GRN over
//! all of them), four static context GRNs, a 2-layer LSTM encoder and decoder
//! (`candle_nn::rnn`), a gated skip, static enrichment, interpretable
//! multi-head attention, a position-wise GRN and a quantile head trained with
//! the pinball loss. Every block runs inside `gate::scoped`, so its memory is
//! attributed to it.
//!
//! The candle types are this crate's own (`candle_core`, `candle_nn` 0.9.1),
//! not gate's re-exports: gate's `candle-0-9-1` feature builds gate against
//! the same crates, so `Workload::build` takes our `VarBuilder`.

use candle_core::{DType, Module, Result, Tensor, D};
use candle_nn::ops::{layer_norm_slow, sigmoid, softmax};
use candle_nn::rnn::{lstm, LSTMConfig, LSTMState, LSTM, RNN};
use candle_nn::{layer_norm, linear, linear_no_bias, LayerNorm, Linear, VarBuilder};
use gate::{scoped, Batch, Model, ParamCount, Problems, Rng, RunCtx, Step, Workload};
use serde::{Deserialize, Serialize};

/// `config:` of a `tft_team` component. The defaults are the production
/// model's: 256 real inputs, hidden 64, 4 heads, 2 LSTM layers, 60 steps of
/// history, 5 ahead, 9 quantiles.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TftConfig {
    /// Real inputs known once per series.
    pub static_reals: usize,
    /// Real inputs known in the past and the future (calendar, schedules).
    pub known_reals: usize,
    /// Real inputs observed only in the past.
    pub unknown_reals: usize,
    pub hidden_size: usize,
    pub attention_heads: usize,
    pub lstm_layers: usize,
    /// Steps of history the encoder reads.
    pub encoder_length: usize,
    /// Steps predicted.
    pub prediction_length: usize,
    /// Quantiles predicted per step, at i / (quantiles + 1).
    pub quantiles: usize,
    pub dropout: f64,
}

impl Default for TftConfig {
    fn default() -> Self {
        TftConfig {
            static_reals: 5,
            known_reals: 10,
            unknown_reals: 241,
            hidden_size: 64,
            attention_heads: 4,
            lstm_layers: 2,
            encoder_length: 60,
            prediction_length: 5,
            quantiles: 9,
            dropout: 0.1,
        }
    }
}

/// Parameters of Linear(i→o) with bias.
fn lin(i: u64, o: u64) -> u64 {
    i * o + o
}

/// GRN(i, hidden h, o, context width c): fc1, the context projection (no
/// bias), fc2, the GLU's Linear(h→2o), a Linear skip when i ≠ o, LayerNorm(o).
fn grn(i: u64, h: u64, o: u64, c: u64) -> u64 {
    lin(i, h) + c * h + lin(h, h) + lin(h, 2 * o) + if i == o { 0 } else { lin(i, o) } + 2 * o
}

/// VSN over v variables: a Linear(1→h) embedding and a GRN(h) per variable,
/// and the selection GRN(v·h → v) with context width c.
fn vsn(v: u64, h: u64, c: u64) -> u64 {
    v * (lin(1, h) + grn(h, h, h, 0)) + grn(v * h, h, v, c)
}

/// GLU(h→h) followed by LayerNorm(h).
fn gate_add_norm(h: u64) -> u64 {
    lin(h, 2 * h) + 2 * h
}

impl TftConfig {
    /// The closed-form parameter count, block by block (forward order).
    pub fn param_count(&self) -> u64 {
        let h = self.hidden_size as u64;
        let d = h / self.attention_heads as u64;
        let (vs, vk, vu) = (
            self.static_reals as u64,
            self.known_reals as u64,
            self.unknown_reals as u64,
        );
        let lstm_layer = 4 * h * h + 4 * h * h + 8 * h; // w_ih, w_hh, b_ih, b_hh
        vsn(vs, h, 0)
            + 4 * grn(h, h, h, 0)
            + vsn(vk + vu, h, h)
            + vsn(vk, h, h)
            + 2 * self.lstm_layers as u64 * lstm_layer
            + gate_add_norm(h)
            + grn(h, h, h, h)
            + (2 * self.attention_heads as u64 * lin(h, d) + lin(h, d) + d * h)
            + gate_add_norm(h)
            + grn(h, h, h, 0)
            + gate_add_norm(h)
            + lin(h, self.quantiles as u64)
    }
}

/// The workload: a validated config.
#[derive(Debug, Clone)]
pub struct TemporalFusionTransformer {
    cfg: TftConfig,
}

impl Workload for TemporalFusionTransformer {
    const KIND: &'static str = "tft_team";
    type Config = TftConfig;

    fn from_config(cfg: TftConfig) -> std::result::Result<Self, Problems> {
        let mut p = Problems::new();
        for (key, v) in [
            ("static_reals", cfg.static_reals),
            ("known_reals", cfg.known_reals),
            ("unknown_reals", cfg.unknown_reals),
            ("hidden_size", cfg.hidden_size),
            ("attention_heads", cfg.attention_heads),
            ("lstm_layers", cfg.lstm_layers),
            ("encoder_length", cfg.encoder_length),
            ("prediction_length", cfg.prediction_length),
            ("quantiles", cfg.quantiles),
        ] {
            p.positive(key, v);
        }
        if cfg.attention_heads > 0 && !cfg.hidden_size.is_multiple_of(cfg.attention_heads) {
            p.error(
                "attention_heads",
                format!(
                    "{} heads do not divide hidden_size {}",
                    cfg.attention_heads, cfg.hidden_size
                ),
                "pick a divisor of hidden_size",
            );
        }
        p.number("dropout", cfg.dropout, 0.0, 0.9);
        p.finish(TemporalFusionTransformer { cfg })
    }

    fn config(&self) -> &TftConfig {
        &self.cfg
    }

    fn param_count(&self) -> ParamCount {
        ParamCount::new(self.cfg.param_count(), 0)
    }

    fn build(&self, vb: VarBuilder, _ctx: &RunCtx) -> Result<Box<dyn Model>> {
        Ok(Box::new(Tft::new(&self.cfg, vb)?))
    }

    /// Standard-normal inputs; the target is a noisy mix of the known
    /// inputs of the predicted steps, so the model has something to learn.
    fn batch(&self, ctx: &RunCtx, seed: u64) -> Result<Batch> {
        let c = &self.cfg;
        let (b, te, td) = (ctx.batch_size, c.encoder_length, c.prediction_length);
        let mut rng = Rng::new(seed);
        let dev = &ctx.device;
        let mut normal =
            |shape: &[usize], std: f64| Tensor::from_vec(rng.normal_vec(shape.iter().product(), 0.0, std), shape, dev);
        let statics = normal(&[b, c.static_reals], 1.0)?;
        let encoder = normal(&[b, te, c.known_reals + c.unknown_reals], 1.0)?;
        let decoder = normal(&[b, td, c.known_reals], 1.0)?;
        let target = (decoder.mean(D::Minus1)? + normal(&[b, td], 0.1)?)?;
        let ts = [statics, encoder, decoder, target];
        Ok(Batch::new(
            ts.iter().map(|t| t.to_dtype(ctx.dtype)).collect::<Result<_>>()?,
        ))
    }
}

/// GLU, dropout on its input, then LayerNorm(GLU + skip). candle-nn's
/// `LayerNorm::forward` is fused without a backward on contiguous inputs, so
/// its weights go through `layer_norm_slow`.
struct GateAddNorm {
    glu: Linear,
    norm: LayerNorm,
    dropout: f64,
}

impl GateAddNorm {
    fn new(i: usize, o: usize, dropout: f64, vb: VarBuilder) -> Result<Self> {
        Ok(GateAddNorm {
            glu: linear(i, 2 * o, vb.pp("glu"))?,
            norm: layer_norm(o, 1e-5, vb.pp("norm"))?,
            dropout,
        })
    }

    fn forward(&self, x: &Tensor, skip: &Tensor, step: &Step) -> Result<Tensor> {
        let g = self.glu.forward(&step.dropout(x, self.dropout)?)?;
        let o = g.dim(D::Minus1)? / 2;
        let gated = g.narrow(D::Minus1, 0, o)?.mul(&sigmoid(&g.narrow(D::Minus1, o, o)?)?)?;
        let bias = self.norm.bias().expect("layer_norm has a bias");
        layer_norm_slow(&(gated + skip)?, self.norm.weight(), bias, 1e-5)
    }
}

/// Gated residual network: LN(x' + GLU(W2·ELU(W1·x + Wc·c) + b2)), x' = x or
/// a Linear skip when the width changes.
struct Grn {
    fc1: Linear,
    context: Option<Linear>,
    fc2: Linear,
    skip: Option<Linear>,
    out: GateAddNorm,
}

impl Grn {
    fn new(i: usize, h: usize, o: usize, c: usize, dropout: f64, vb: VarBuilder) -> Result<Self> {
        Ok(Grn {
            fc1: linear(i, h, vb.pp("fc1"))?,
            context: if c > 0 {
                Some(linear_no_bias(c, h, vb.pp("context"))?)
            } else {
                None
            },
            fc2: linear(h, h, vb.pp("fc2"))?,
            skip: if i != o {
                Some(linear(i, o, vb.pp("skip"))?)
            } else {
                None
            },
            out: GateAddNorm::new(h, o, dropout, vb.pp("gate"))?,
        })
    }

    fn forward(&self, x: &Tensor, ctx: Option<&Tensor>, step: &Step) -> Result<Tensor> {
        let skip = match &self.skip {
            Some(s) => s.forward(x)?,
            None => x.clone(),
        };
        let mut a = self.fc1.forward(x)?;
        if let (Some(proj), Some(c)) = (&self.context, ctx) {
            let mut c = proj.forward(c)?; // [B, h], broadcast over time
            while c.rank() < a.rank() {
                c = c.unsqueeze(1)?;
            }
            a = a.broadcast_add(&c)?;
        }
        let a = self.fc2.forward(&a.elu(1.0)?)?;
        self.out.forward(&a, &skip, step)
    }
}

/// Variable selection network over the last axis of its input [.., V].
struct Vsn {
    embed: Vec<Linear>,
    grns: Vec<Grn>,
    select: Grn,
}

impl Vsn {
    fn new(v: usize, h: usize, c: usize, dropout: f64, vb: VarBuilder) -> Result<Self> {
        let mut embed = Vec::with_capacity(v);
        let mut grns = Vec::with_capacity(v);
        for i in 0..v {
            embed.push(linear(1, h, vb.pp(format!("embed{i}")))?);
            grns.push(Grn::new(h, h, h, 0, dropout, vb.pp(format!("grn{i}")))?);
        }
        let select = Grn::new(v * h, h, v, c, dropout, vb.pp("select"))?;
        Ok(Vsn { embed, grns, select })
    }

    fn forward(&self, x: &Tensor, ctx: Option<&Tensor>, step: &Step) -> Result<Tensor> {
        let embedded = scoped("prescale", || -> Result<Vec<Tensor>> {
            let cols = self.embed.iter().enumerate();
            cols.map(|(i, e)| e.forward(&x.narrow(D::Minus1, i, 1)?.contiguous()?))
                .collect()
        })?;
        let weights = scoped("selection", || -> Result<Tensor> {
            let flat = Tensor::cat(&embedded, D::Minus1)?;
            softmax(&self.select.forward(&flat, ctx, step)?, D::Minus1)
        })?;
        let processed = scoped("variable_grns", || -> Result<Tensor> {
            let each = embedded.iter().zip(&self.grns).map(|(e, g)| g.forward(e, None, step));
            Tensor::stack(&each.collect::<Result<Vec<_>>>()?, D::Minus1) // [.., h, V]
        })?;
        scoped("combine", || {
            processed.broadcast_mul(&weights.unsqueeze(D::Minus2)?)?.sum(D::Minus1)
        })
    }
}

/// Interpretable multi-head attention: a query and key projection per head,
/// one value projection shared by all, heads averaged, then projected back.
struct Attention {
    queries: Vec<Linear>,
    keys: Vec<Linear>,
    value: Linear,
    out: Linear,
    dropout: f64,
}

impl Attention {
    fn new(h: usize, heads: usize, dropout: f64, vb: VarBuilder) -> Result<Self> {
        let d = h / heads;
        let (mut queries, mut keys) = (Vec::new(), Vec::new());
        for i in 0..heads {
            queries.push(linear(h, d, vb.pp(format!("q{i}")))?);
            keys.push(linear(h, d, vb.pp(format!("k{i}")))?);
        }
        Ok(Attention {
            queries,
            keys,
            value: linear(h, d, vb.pp("v"))?,
            out: linear_no_bias(d, h, vb.pp("out"))?,
            dropout,
        })
    }

    /// The decoder steps (those after `past`) attend to every step up to their own.
    fn forward(&self, x: &Tensor, past: usize, step: &Step) -> Result<Tensor> {
        let (_, t, h) = x.dims3()?;
        let future = t - past;
        let query = x.narrow(1, past, future)?.contiguous()?;
        let mask: Vec<f32> = (0..future)
            .flat_map(|i| (0..t).map(move |j| if j <= past + i { 0.0 } else { -1e9 }))
            .collect();
        let mask = Tensor::from_vec(mask, (future, t), x.device())?.to_dtype(x.dtype())?;
        let scale = 1.0 / ((h / self.queries.len()) as f64).sqrt();
        let v = self.value.forward(x)?;
        let mut heads = Vec::with_capacity(self.queries.len());
        for (q, k) in self.queries.iter().zip(&self.keys) {
            let scores = (q.forward(&query)?.matmul(&k.forward(x)?.t()?)? * scale)?.broadcast_add(&mask)?;
            let attn = step.dropout(&softmax(&scores, D::Minus1)?, self.dropout)?;
            heads.push(attn.matmul(&v)?);
        }
        let mean = Tensor::stack(&heads, 0)?.mean(0)?;
        step.dropout(&self.out.forward(&mean)?, self.dropout)
    }
}

/// The built model.
struct Tft {
    static_vsn: Vsn,
    /// Static contexts: variable selection, enrichment, LSTM h0 and c0.
    static_grns: Vec<Grn>,
    encoder_vsn: Vsn,
    decoder_vsn: Vsn,
    encoder_lstm: Vec<LSTM>,
    decoder_lstm: Vec<LSTM>,
    post_lstm: GateAddNorm,
    enrichment: Grn,
    attention: Attention,
    post_attention: GateAddNorm,
    positionwise: Grn,
    final_gate: GateAddNorm,
    head: Linear,
    quantiles: usize,
    dropout: f64,
}

impl Tft {
    fn new(c: &TftConfig, vb: VarBuilder) -> Result<Self> {
        let (h, p) = (c.hidden_size, c.dropout);
        let lstms = |name: &str| -> Result<Vec<LSTM>> {
            (0..c.lstm_layers)
                .map(|l| lstm(h, h, LSTMConfig::default(), vb.pp(format!("{name}{l}"))))
                .collect()
        };
        Ok(Tft {
            static_vsn: Vsn::new(c.static_reals, h, 0, p, vb.pp("static_vsn"))?,
            static_grns: (0..4)
                .map(|i| Grn::new(h, h, h, 0, p, vb.pp(format!("static_context{i}"))))
                .collect::<Result<_>>()?,
            encoder_vsn: Vsn::new(c.known_reals + c.unknown_reals, h, h, p, vb.pp("encoder_vsn"))?,
            decoder_vsn: Vsn::new(c.known_reals, h, h, p, vb.pp("decoder_vsn"))?,
            encoder_lstm: lstms("encoder_lstm")?,
            decoder_lstm: lstms("decoder_lstm")?,
            post_lstm: GateAddNorm::new(h, h, p, vb.pp("post_lstm"))?,
            enrichment: Grn::new(h, h, h, h, p, vb.pp("enrichment"))?,
            attention: Attention::new(h, c.attention_heads, p, vb.pp("attention"))?,
            post_attention: GateAddNorm::new(h, h, p, vb.pp("post_attention"))?,
            positionwise: Grn::new(h, h, h, 0, p, vb.pp("positionwise"))?,
            final_gate: GateAddNorm::new(h, h, 0.0, vb.pp("final_gate"))?,
            head: linear(h, c.quantiles, vb.pp("head"))?,
            quantiles: c.quantiles,
            dropout: p,
        })
    }

    /// Runs `layers` over `x`, layer l from `init(l)`; dropout between layers.
    fn lstm(
        &self,
        layers: &[LSTM],
        x: &Tensor,
        init: impl Fn(usize) -> LSTMState,
        step: &Step,
    ) -> Result<(Tensor, Vec<LSTMState>)> {
        let (mut x, mut last) = (x.clone(), Vec::with_capacity(layers.len()));
        for (l, layer) in layers.iter().enumerate() {
            if l > 0 {
                x = step.dropout(&x, self.dropout)?;
            }
            let states = layer.seq_init(&x, &init(l))?;
            x = layer.states_to_tensor(&states)?;
            last.push(states.last().expect("at least one step").clone());
        }
        Ok((x, last))
    }

    /// Inputs: statics [B, Vs], encoder reals [B, Te, Vk+Vu], decoder reals
    /// [B, Td, Vk]. Output: quantiles [B, Td, Q].
    fn forward(&self, batch: &Batch, step: &Step) -> Result<Tensor> {
        let [statics, enc_x, dec_x, ..] = &batch.tensors[..] else {
            candle_core::bail!("a batch holds statics, encoder and decoder inputs and the target")
        };
        let (te, td) = (enc_x.dim(1)?, dec_x.dim(1)?);
        let s = scoped("static_vsn", || self.static_vsn.forward(statics, None, step))?;
        let ctx = scoped("static_encoders", || -> Result<Vec<Tensor>> {
            self.static_grns.iter().map(|g| g.forward(&s, None, step)).collect()
        })?;
        let (c_select, c_enrich, c_h, c_c) = (&ctx[0], &ctx[1], &ctx[2], &ctx[3]);
        let enc = scoped("encoder_vsn", || self.encoder_vsn.forward(enc_x, Some(c_select), step))?;
        let dec = scoped("decoder_vsn", || self.decoder_vsn.forward(dec_x, Some(c_select), step))?;
        let (enc_out, finals) = scoped("lstm_encoder", || {
            self.lstm(
                &self.encoder_lstm,
                &enc,
                |_| LSTMState::new(c_h.clone(), c_c.clone()),
                step,
            )
        })?;
        let (dec_out, _) = scoped("lstm_decoder", || {
            self.lstm(&self.decoder_lstm, &dec, |l| finals[l].clone(), step)
        })?;
        let phi = scoped("post_lstm_gate", || -> Result<Tensor> {
            let lstm_out = Tensor::cat(&[&enc_out, &dec_out], 1)?;
            self.post_lstm.forward(&lstm_out, &Tensor::cat(&[&enc, &dec], 1)?, step)
        })?;
        let theta = scoped("static_enrichment", || {
            self.enrichment.forward(&phi, Some(c_enrich), step)
        })?;
        let attended = scoped("attention", || self.attention.forward(&theta, te, step))?;
        let x = scoped("post_attention_gate", || {
            self.post_attention.forward(&attended, &theta.narrow(1, te, td)?, step)
        })?;
        let x = scoped("positionwise_grn", || self.positionwise.forward(&x, None, step))?;
        scoped("output", || {
            self.head
                .forward(&self.final_gate.forward(&x, &phi.narrow(1, te, td)?, step)?)
        })
    }
}

/// Pinball loss averaged over batch, steps and quantiles, in f32.
pub fn quantile_loss(pred: &Tensor, target: &Tensor, quantiles: usize) -> Result<Tensor> {
    let levels: Vec<f32> = (1..=quantiles).map(|i| i as f32 / (quantiles + 1) as f32).collect();
    let levels = Tensor::from_vec(levels, quantiles, pred.device())?;
    let err = target
        .to_dtype(DType::F32)?
        .unsqueeze(D::Minus1)?
        .broadcast_sub(&pred.to_dtype(DType::F32)?)?;
    let over = err.broadcast_mul(&levels)?;
    let under = err.broadcast_mul(&(levels - 1.0)?)?;
    over.maximum(&under)?.mean_all()
}

impl Model for Tft {
    fn loss(&self, batch: &Batch, step: &Step) -> Result<Tensor> {
        let pred = self.forward(batch, step)?;
        scoped("quantile_loss", || {
            quantile_loss(&pred, &batch.tensors[3], self.quantiles)
        })
    }

    fn predict(&self, batch: &Batch) -> Result<Tensor> {
        self.forward(batch, &Step::eval())
    }
}
