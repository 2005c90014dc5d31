//! The Temporal Fusion Transformer workload (docs/models.md §1, pytorch-forecasting
//! variant), one file per block. The encoder selection network sees the known
//! and the observed reals (Ve = known + unknown). Every block of docs/models.md §6
//! runs in a named scope so reports can rank where the memory goes.

pub mod attention;
pub mod config;
pub mod data;
pub mod dense;
pub mod glu;
pub mod grn;
pub mod loss;
pub mod lstm;
mod selection;
mod taped;
pub mod vsn;

use candle_core::{Result, Tensor};
use candle_nn::{Init, VarBuilder};

use self::attention::InterpretableAttention;
use self::config::{TftConfig, TftKeys};
use self::dense::{Dense, Stack};
use self::glu::GateAddNorm;
use self::grn::{Grn, GrnDims};
use self::lstm::{Lstm, LstmTape, State};
use self::selection::EncoderSelection;
use self::vsn::{Prescale, Vsn};
use candle_core::backprop::GradStore;
use candle_core::Var;
use candle_nn::Optimizer as _;
use gate::checkpoint::{self, Checkpointed, RowWise, Taped};
use gate::optim::SlicedAdamW;
use gate::scoped;
use gate::{Batch, Lever, Model, ParamCount, Problems, RunCtx, Step, TrainingForward, Workload};

/// The workload: a validated config.
#[derive(Debug, Clone)]
pub struct Tft {
    pub cfg: TftConfig,
    /// The keys the config came from (what the report records).
    keys: TftKeys,
    /// Positions per chunk when the encoder VSN is checkpointed (`checkpoint: { chunk: N }`).
    pub checkpoint: Option<usize>,
}

impl Tft {
    pub fn new(cfg: TftConfig) -> Self {
        Tft {
            keys: cfg.keys(),
            cfg,
            checkpoint: None,
        }
    }

    /// Builds the concrete model (the trait object hides its extra methods).
    pub fn build_model(&self, vb: VarBuilder) -> Result<TftModel> {
        let mut m = TftModel::new(&self.cfg, vb)?;
        m.checkpoint = self.checkpoint;
        Ok(m)
    }
}

impl Workload for Tft {
    const KIND: &'static str = "tft";
    type Config = TftKeys;

    fn from_config(keys: TftKeys) -> std::result::Result<Self, Problems> {
        let adamw_slice = keys.adamw_slice;
        let mut tft = Tft::new(TftConfig::from_keys(keys)?);
        tft.keys.adamw_slice = adamw_slice;
        Ok(tft)
    }

    fn config(&self) -> &TftKeys {
        &self.keys
    }

    fn describe(&self) -> serde_json::Value {
        let mut json = self.cfg.to_json();
        if let Some(map) = json.as_object_mut() {
            if let Some(chunk) = self.checkpoint {
                map.insert(
                    "checkpoint".into(),
                    serde_json::json!({ "block": "encoder_vsn", "chunk": chunk }),
                );
            }
            // Only when set, so the configs of earlier reports read the same.
            if self.keys.adamw_slice > 0 {
                map.insert("adamw_slice".into(), self.keys.adamw_slice.into());
            }
        }
        json
    }

    fn optimizer(&self, vars: Vec<Var>) -> Result<Option<Box<dyn gate::OptimizerStep>>> {
        if self.keys.adamw_slice == 0 {
            return Ok(None);
        }
        // gate's own AdamW's settings (the runner's default optimizer), in slices.
        let params = gate::optim::adamw_params(self.learning_rate());
        let opt = SlicedAdamW::new(vars, params)?.with_slice(self.keys.adamw_slice);
        Ok(Some(Box::new(opt)))
    }

    fn checkpointed(&self, chunk: usize) -> Option<Self> {
        Some(Tft {
            checkpoint: Some(chunk),
            ..self.clone()
        })
    }

    /// The TFT's levers (docs/levers.md): the encoder variable-selection
    /// network recomputed in chunks of positions (a position is one row's
    /// time step: batch × sequence length of them), AdamW in slices,
    /// bf16 compute with f32 masters, and the encoder's length.
    fn levers(&self) -> Vec<Lever> {
        vec![
            Lever::Checkpoint {
                blocks: vec!["encoder_vsn".into()],
                chunks: vec![32, 64, 96, 160, 320, 640],
            },
            Lever::Config {
                key: "adamw_slice".into(),
                values: vec![262_144.into()],
                about: "AdamW updates each parameter this many elements at a time (0: whole), the same \
                        arithmetic; its temporaries are the slice's, not the largest parameter's"
                    .into(),
                changes_loss: false,
            },
            Lever::bf16(),
            // Positions are batch × sequence: the encoder's length moves the
            // selection network's kept bytes as the batch does.
            Lever::Sequence {
                key: "sequence_length".into(),
                lengths: [self.cfg.sequence_length / 2].into_iter().filter(|&n| n >= 1).collect(),
            },
        ]
    }

    fn param_count(&self) -> ParamCount {
        ParamCount::new(self.cfg.param_count(), 0)
    }

    fn build(&self, vb: VarBuilder, _ctx: &RunCtx) -> Result<Box<dyn Model>> {
        Ok(Box::new(self.build_model(vb)?))
    }

    fn batch(&self, ctx: &RunCtx, seed: u64) -> Result<Batch> {
        data::synthetic(&self.cfg, ctx.batch_size, seed, ctx.dtype, &ctx.device)
    }
}

pub struct TftModel {
    cfg: TftConfig,
    static_vsn: Vsn,
    /// Contexts for variable selection, LSTM hidden and cell state, and enrichment.
    static_encoders: [Grn; 4],
    encoder_vsn: Vsn,
    decoder_vsn: Vsn,
    lstm_encoder: Lstm,
    lstm_decoder: Lstm,
    /// Shared by the encoder and decoder outputs, as in the library.
    post_lstm_gate: GateAddNorm,
    static_enrichment: Grn,
    attention: InterpretableAttention,
    post_attention_gate: GateAddNorm,
    positionwise_grn: Grn,
    pre_output_gate: GateAddNorm,
    output: Dense,
    mask: Tensor,
    quantiles: Tensor,
    /// Run the encoder VSN in chunks of this many positions (B·T rows):
    /// checkpointed in training, chunk by chunk with no graph in inference.
    checkpoint: Option<usize>,
}

/// The encoder VSN over positions as a row-wise block: `[N, V]` reals and
/// `[N, c]` context → `[N, H]`, chunk by chunk, recomputed under autograd.
/// For the forms [`EncoderSelection`] does not split (per-variable GRNs
/// that resample, a single variable).
struct VsnRows {
    vsn: Vsn,
    hidden: usize,
}

impl RowWise for VsnRows {
    fn forward_rows(&self, inputs: &[Tensor], step: &Step) -> Result<Tensor> {
        let (n, v) = inputs[0].dims2()?;
        let x = inputs[0].reshape((1, n, v))?;
        let context = inputs[1].unsqueeze(0)?;
        self.vsn.forward(&x, Some(&context), step)?.reshape((n, self.hidden))
    }

    fn forward_rows_detached(&self, inputs: &[Tensor], step: &Step) -> Result<Tensor> {
        let (n, v) = inputs[0].dims2()?;
        let x = inputs[0].reshape((1, n, v))?;
        let context = inputs[1].detach().unsqueeze(0)?;
        self.vsn
            .detached()
            .forward(&x, Some(&context), step)?
            .reshape((n, self.hidden))
    }
}

/// The static part of a forward: contexts for selection, LSTM state and enrichment.
struct Statics {
    selection: Tensor,
    hidden: Tensor,
    cell: Tensor,
    enrichment: Tensor,
}

/// A checkpointed training forward: the encoder VSN's output leaf, the
/// encoder LSTM's tape and leaves, and the rest's graph.
struct CheckpointedForward<'a> {
    model: &'a TftModel,
    vsn: Checkpointed,
    lstm: Taped<LstmTape>,
    /// Positions per chunk, as the forward ran.
    chunk: usize,
    loss: Tensor,
}

impl TrainingForward for CheckpointedForward<'_> {
    fn loss(&self) -> &Tensor {
        &self.loss
    }

    fn backward(self: Box<Self>, vars: &[Var]) -> Result<GradStore> {
        let CheckpointedForward {
            model,
            vsn,
            lstm,
            chunk,
            loss,
        } = *self;
        let mut grads = loss.backward()?;
        drop(loss);
        // The LSTM first (the reverse of the forwards): its input is the
        // VSN's leaf, whose backward needs the whole of that leaf's gradient.
        lstm.backward(&model.lstm_encoder, &mut grads, vars)?;
        match EncoderSelection::new(&model.encoder_vsn, chunk)? {
            Some(block) => vsn.backward_whole(&block, &mut grads, vars)?,
            None => vsn.backward(&model.encoder_vsn_rows()?, &mut grads, vars)?,
        }
        Ok(grads)
    }
}

/// One Linear(1 → d_c) per variable, `[V, d_c]` each.
fn prescalers(vars: usize, dc: usize, vb: VarBuilder) -> Result<(Tensor, Tensor)> {
    // PyTorch's Linear(1, d_c) default: U(±1/√1).
    let init = Init::Uniform { lo: -1.0, up: 1.0 };
    Ok((
        vb.get_with_hints((vars, dc), "weight", init)?,
        vb.get_with_hints((vars, dc), "bias", init)?,
    ))
}

impl TftModel {
    pub fn new(cfg: &TftConfig, vb: VarBuilder) -> Result<Self> {
        let h = cfg.hidden_dim;
        let dc = cfg.prescale_dim;
        let p = cfg.dropout;
        let (vs, vk, vo) = (
            cfg.num_static_features,
            cfg.num_known_features,
            cfg.num_unknown_features,
        );
        let (sw, sb) = prescalers(vs, dc, vb.pp("prescalers.static"))?;
        let (kw, kb) = prescalers(vk, dc, vb.pp("prescalers.known"))?;
        let (ow, ob) = prescalers(vo, dc, vb.pp("prescalers.observed"))?;
        let static_prescale = Prescale::new(&[(&sw, &sb)])?;
        let encoder_prescale = Prescale::new(&[(&kw, &kb), (&ow, &ob)])?;
        let decoder_prescale = Prescale::new(&[(&kw, &kb)])?;
        let square = |context| GrnDims {
            input: h,
            hidden: h,
            output: h,
            context,
        };
        let static_grn = |name: &str| Grn::new(square(0), p, Stack::One, vb.pp("static_encoders").pp(name));
        Ok(TftModel {
            cfg: cfg.clone(),
            static_vsn: Vsn::new(vs, static_prescale, dc, h, 0, p, vb.pp("static_vsn"))?,
            static_encoders: [
                static_grn("variable_selection")?,
                static_grn("initial_hidden")?,
                static_grn("initial_cell")?,
                static_grn("enrichment")?,
            ],
            encoder_vsn: Vsn::new(vk + vo, encoder_prescale, dc, h, h, p, vb.pp("encoder_vsn"))?,
            decoder_vsn: Vsn::new(vk, decoder_prescale, dc, h, h, p, vb.pp("decoder_vsn"))?,
            lstm_encoder: Lstm::new(h, h, cfg.num_layers, p, vb.pp("lstm_encoder"))?,
            lstm_decoder: Lstm::new(h, h, cfg.num_layers, p, vb.pp("lstm_decoder"))?,
            post_lstm_gate: GateAddNorm::new(h, h, p, Stack::One, vb.pp("post_lstm_gate"))?,
            static_enrichment: Grn::new(square(h), p, Stack::One, vb.pp("static_enrichment"))?,
            attention: InterpretableAttention::new(h, cfg.num_heads, p, vb.pp("attention"))?,
            post_attention_gate: GateAddNorm::new(h, h, p, Stack::One, vb.pp("post_attention_gate"))?,
            positionwise_grn: Grn::new(square(0), p, Stack::One, vb.pp("positionwise_grn"))?,
            // The library's pre-output gate has no dropout.
            pre_output_gate: GateAddNorm::new(h, h, 0.0, Stack::One, vb.pp("pre_output_gate"))?,
            output: Dense::new(h, cfg.num_quantiles, true, Stack::One, vb.pp("output"))?,
            mask: attention::decoder_mask(cfg.sequence_length, cfg.prediction_horizon, vb.dtype(), vb.device())?,
            quantiles: {
                let q: Vec<f32> = cfg.quantiles().iter().map(|&q| q as f32).collect();
                Tensor::new(q, vb.device())?.to_dtype(vb.dtype())?
            },
            checkpoint: None,
        })
    }

    fn encoder_vsn_rows(&self) -> Result<VsnRows> {
        Ok(VsnRows {
            vsn: self.encoder_vsn.with_concatenated_prescale()?,
            hidden: self.cfg.hidden_dim,
        })
    }

    /// The encoder VSN's inputs as rows: reals `[B·T, V]`, context `[B·T, H]`.
    fn encoder_vsn_inputs(&self, x: &Tensor, selection: &Tensor) -> Result<Vec<Tensor>> {
        let (b, t, v) = x.dims3()?;
        let c = selection.dim(2)?;
        let context = selection.broadcast_as((b, t, c))?.contiguous()?.reshape((b * t, c))?;
        Ok(vec![x.reshape((b * t, v))?, context])
    }

    fn check_batch(&self, batch: &Batch) -> Result<()> {
        if batch.tensors.len() < 3 {
            candle_core::bail!(
                "a TFT batch holds static, encoder and decoder reals; got {} tensors",
                batch.tensors.len()
            );
        }
        Ok(())
    }

    fn statics(&self, batch: &Batch, step: &Step) -> Result<Statics> {
        let static_in = batch.tensors[data::STATIC].unsqueeze(1)?;
        let static_embedding = scoped("static_vsn", || self.static_vsn.forward(&static_in, None, step))?;
        let mut contexts = scoped("static_encoders", || {
            self.static_encoders
                .iter()
                .map(|g| g.forward(&static_embedding, None, step))
                .collect::<Result<Vec<_>>>()
        })?
        .into_iter();
        let mut next = || contexts.next().expect("four static encoders");
        Ok(Statics {
            selection: next(),
            hidden: next(),
            cell: next(),
            enrichment: next(),
        })
    }

    /// The encoder VSN, plain or (when checkpointing is on) chunk by chunk.
    fn encoder_vsn(&self, batch: &Batch, statics: &Statics, step: &Step) -> Result<Tensor> {
        let x = &batch.tensors[data::ENCODER];
        scoped("encoder_vsn", || match self.checkpoint {
            None => self.encoder_vsn.forward(x, Some(&statics.selection), step),
            Some(chunk) => {
                let (b, t, _) = x.dims3()?;
                let inputs = self.encoder_vsn_inputs(x, &statics.selection)?;
                let out = match EncoderSelection::new(&self.encoder_vsn, chunk)? {
                    Some(block) => checkpoint::forward_whole(&block, &inputs, step)?,
                    None => checkpoint::forward_chunked(&self.encoder_vsn_rows()?, &inputs, chunk, step)?,
                };
                out.reshape((b, t, self.cfg.hidden_dim))
            }
        })
    }

    /// Quantile forecasts `[B, horizon, quantiles]`.
    pub fn forward(&self, batch: &Batch, step: &Step) -> Result<Tensor> {
        self.check_batch(batch)?;
        let statics = self.statics(batch, step)?;
        let encoder_in = self.encoder_vsn(batch, &statics, step)?;
        self.rest(batch, &statics, &encoder_in, step, None)
    }

    fn loss_of(&self, pred: &Tensor, batch: &Batch) -> Result<Tensor> {
        let Some(target) = batch.tensors.get(data::TARGET) else {
            candle_core::bail!("a TFT training batch needs the target at position {}", data::TARGET);
        };
        // The loss in f32 whatever the compute dtype: its mean over B·horizon·Q
        // terms would accumulate in bf16 and lose most of them (as autocast does).
        scoped("quantile_loss", || {
            let f = |t: &Tensor| t.to_dtype(candle_core::DType::F32);
            loss::quantile_loss(&f(pred)?, &f(target)?, &f(&self.quantiles)?)
        })
    }

    /// The loss with the encoder VSN checkpointed and the encoder LSTM
    /// taped: what their backwards need and the loss over the rest's graph.
    fn checkpointed_loss(
        &self,
        batch: &Batch,
        step: &Step,
        chunk: usize,
    ) -> Result<(Checkpointed, Taped<LstmTape>, Tensor)> {
        self.check_batch(batch)?;
        let statics = self.statics(batch, step)?;
        let x = &batch.tensors[data::ENCODER];
        let (b, t, _) = x.dims3()?;
        let vsn = scoped("encoder_vsn", || {
            let inputs = self.encoder_vsn_inputs(x, &statics.selection)?;
            match EncoderSelection::new(&self.encoder_vsn, chunk)? {
                Some(block) => Checkpointed::whole(&block, inputs, step),
                None => Checkpointed::forward(&self.encoder_vsn_rows()?, inputs, chunk, step),
            }
        })?;
        let encoder_in = vsn.output().reshape((b, t, self.cfg.hidden_dim))?;
        let mut lstm = None;
        let pred = self.rest(batch, &statics, &encoder_in, step, Some(&mut lstm))?;
        let loss = self.loss_of(&pred, batch)?;
        let lstm = lstm.expect("`rest` runs the encoder LSTM taped when asked to");
        Ok((vsn, lstm, loss))
    }

    /// Everything after the encoder VSN, from its output `encoder_in` `[B, T, H]`.
    /// With `taped`, the encoder LSTM runs taped and is left there for the
    /// backward; without, under autograd.
    fn rest(
        &self,
        batch: &Batch,
        statics: &Statics,
        encoder_in: &Tensor,
        step: &Step,
        taped: Option<&mut Option<Taped<LstmTape>>>,
    ) -> Result<Tensor> {
        let t = &batch.tensors;
        let te = self.cfg.sequence_length;
        let td = self.cfg.prediction_horizon;
        let (c_selection, c_hidden, c_cell, c_enrichment) =
            (&statics.selection, &statics.hidden, &statics.cell, &statics.enrichment);
        let decoder_in = scoped("decoder_vsn", || {
            self.decoder_vsn.forward(&t[data::DECODER], Some(c_selection), step)
        })?;
        let init = State {
            h: c_hidden.squeeze(1)?,
            c: c_cell.squeeze(1)?,
        };
        // Every encoder layer starts from the static state; each decoder layer
        // continues from the matching encoder layer.
        let (encoder_out, states) = scoped("lstm_encoder", || {
            // Built in the scope, so its bytes are the block's while it runs.
            let init = vec![init; self.cfg.num_layers];
            let Some(slot) = taped else {
                return self.lstm_encoder.forward(encoder_in, &init, step);
            };
            let run = Taped::forward(&self.lstm_encoder, lstm::taped_inputs(encoder_in, &init), step)?;
            let outs = (run.output(0).clone(), lstm::taped_finals(&run));
            *slot = Some(run);
            Ok(outs)
        })?;
        let (decoder_out, _) = scoped("lstm_decoder", || self.lstm_decoder.forward(&decoder_in, &states, step))?;
        let phi = scoped("post_lstm_gate", || {
            let lstm_out = Tensor::cat(&[&encoder_out, &decoder_out], 1)?;
            let selected = Tensor::cat(&[encoder_in, &decoder_in], 1)?;
            self.post_lstm_gate.forward(lstm_out, &selected, step)
        })?;
        let theta = scoped("static_enrichment", || {
            self.static_enrichment.forward(&phi, Some(c_enrichment), step)
        })?;
        let queries = theta.narrow(1, te, td)?.contiguous()?;
        // The interpretable weights are no part of the loss: dropped inside
        // the scope, so `attention` retains only what backward keeps.
        let attended = scoped("attention", || {
            let (out, _weights) = self.attention.forward(&queries, &theta, &self.mask, step)?;
            Ok::<_, candle_core::Error>(out)
        })?;
        let gated = scoped("post_attention_gate", || {
            self.post_attention_gate.forward(attended, &queries, step)
        })?;
        let ff = scoped("positionwise_grn", || self.positionwise_grn.forward(&gated, None, step))?;
        scoped("output", || {
            let skip = phi.narrow(1, te, td)?.contiguous()?;
            let y = self.pre_output_gate.forward(ff, &skip, step)?;
            self.output.forward(&y)
        })
    }
}

impl Model for TftModel {
    /// With checkpointing on, this keeps every chunk's graph (the reference
    /// the checkpointed backward is tested against); training uses
    /// [`Model::forward_train`].
    fn loss(&self, batch: &Batch, step: &Step) -> Result<Tensor> {
        let pred = self.forward(batch, step)?;
        self.loss_of(&pred, batch)
    }

    fn forward_train<'a>(&'a self, batch: &Batch, step: &Step) -> Result<Box<dyn TrainingForward + 'a>> {
        let Some(chunk) = self.checkpoint else {
            return Ok(Box::new(gate::PlainForward(self.loss(batch, step)?)));
        };
        let (vsn, lstm, loss) = self.checkpointed_loss(batch, step, chunk)?;
        Ok(Box::new(CheckpointedForward {
            model: self,
            vsn,
            lstm,
            chunk,
            loss,
        }))
    }

    /// With checkpointing on, the encoder VSN runs as in training (no graph
    /// kept): `loss` would keep every chunk's graph, as much memory as the
    /// plain model's activations, for a figure nobody backpropagates.
    fn eval_loss(&self, batch: &Batch) -> Result<Tensor> {
        match self.checkpoint {
            Some(chunk) => Ok(self.checkpointed_loss(batch, &Step::eval(), chunk)?.2),
            None => self.loss(batch, &Step::eval()),
        }
    }

    fn predict(&self, batch: &Batch) -> Result<Tensor> {
        self.forward(batch, &Step::eval())
    }
}

#[cfg(test)]
mod tests;
