//! The shortest path for a language model that already exists: a type that
//! loads from its own config and a `VarBuilder` and maps token ids to
//! logits (candle-transformers' llama, qwen2, mistral..., or the team's own)
//! becomes a workload through [`Lm`]. gate makes the seeded token batches,
//! the next-token cross-entropy, reads the model's config from the spec in
//! its own form (the keys of its `config.json`) and records it as written.

use std::cell::RefCell;
use std::fmt;
use std::marker::PhantomData;

use candle_core::{DType, Device, Result, Tensor, Var, D};
use candle_nn::{Optimizer as _, VarBuilder};
use gate_spec::config::{self, Node, Pos};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::{Batch, Generator, Lever, Model, OptimizerStep, ParamCount, Problems, Rng, RunCtx, Step, Workload};

/// A language model as its crate ships it, gated through [`Lm`]: how it
/// loads, and its forward over a whole sequence ([`LanguageModel::forward`])
/// or its cached forward at an offset with a way to clear the cache
/// ([`LanguageModel::forward_cached`], [`LanguageModel::clear_cache`]; then
/// `generate:` works too). Nothing else is asked of it.
///
/// ```ignore
/// struct Llama3(Llama, Config);
/// impl gate::LanguageModel for Llama3 {
///     const KIND: &'static str = "llama";
///     type Config = LlamaConfig;
///     fn vocab_size(c: &LlamaConfig) -> usize { c.vocab_size }
///     fn load(vb: VarBuilder, c: &LlamaConfig, _: &gate::RunCtx) -> Result<Self> {
///         let cfg = c.clone().into_config(false);
///         Ok(Llama3(Llama::load(vb, &cfg)?, cfg))
///     }
///     fn forward(&mut self, ids: &Tensor) -> Result<Tensor> {
///         let mut cache = Cache::new(false, DType::F32, &self.1, ids.device())?;
///         self.0.forward(ids, 0, &mut cache)
///     }
/// }
/// gate::main!(gate::Lm<Llama3>);
/// ```
pub trait LanguageModel: Sized + 'static {
    /// The spec's `workload:` name.
    const KIND: &'static str;

    /// The model's own config type, read from the spec's `config.model`
    /// with the keys its `config.json` has (candle-transformers' configs
    /// derive `Deserialize`). A wrong type, a missing key or a key the type
    /// does not have is a spec error at its line.
    type Config: DeserializeOwned + fmt::Debug + Clone + Send + Sync + 'static;

    /// Token ids are drawn from `0..vocab_size`. The default, 0: the
    /// spec's `model.vocab_size` (the key a config.json writes it under),
    /// for a config type that keeps the field to itself (phi's, stable_lm's
    /// `pub(crate)` fields): leave it out.
    fn vocab_size(_config: &Self::Config) -> usize {
        0
    }

    /// Builds the model from `vb` (every weight from it, as candle-nn's
    /// layers take them).
    fn load(vb: VarBuilder, config: &Self::Config, ctx: &RunCtx) -> Result<Self>;

    /// Logits for `ids` (`[batch, seq]`, u32), a whole sequence:
    /// `[batch, n, vocab]`, the last `n` positions each predicting its next
    /// token (`n = seq`: every position; qwen2's `ModelForCausalLM` gives
    /// `n = 1`), or `[batch, vocab]`, the last position's only. `&mut self`:
    /// most of candle-transformers' models (mistral, qwen2, phi3, gemma...)
    /// keep their KV cache inside. The default: the cache cleared, then
    /// [`LanguageModel::forward_cached`] at offset 0, so such a model gives
    /// those two and nothing keeps growing across steps.
    fn forward(&mut self, ids: &Tensor) -> Result<Tensor> {
        self.clear_cache();
        self.forward_cached(ids, 0)
    }

    /// The model's own cached decoding, for a component with `generate:`:
    /// logits for `ids` at position `offset` of the sequence, its KV cache
    /// kept between calls (qwen2's `forward(ids, offset)`). gate then runs a
    /// greedy loop: the prompt at offset 0, each next token at the next
    /// offset. The default: none (such a component fails, saying so).
    fn forward_cached(&mut self, _ids: &Tensor, _offset: usize) -> Result<Tensor> {
        candle_core::bail!(
            "{} has no cached decoding: give `LanguageModel::forward_cached` and `clear_cache` (for `generate:`, \
             and then `forward` may be left out), or `forward`",
            Self::KIND
        )
    }

    /// Empties the KV cache `forward_cached` keeps (before each generation).
    fn clear_cache(&mut self) {}

    /// The closed-form parameter count, checked against what was built;
    /// `None` (the default): `params` is the bytes built, said so in the report.
    fn param_count(_config: &Self::Config) -> Option<ParamCount> {
        None
    }

    /// The team's own optimizer, as [`Workload::optimizer`]; the default,
    /// `None`: gate's AdamW.
    fn optimizer(_vars: Vec<Var>) -> Result<Option<Box<dyn OptimizerStep>>> {
        Ok(None)
    }

    /// Parameters kept frozen on purpose, as [`Workload::frozen_parameters`].
    fn frozen_parameters(_config: &Self::Config) -> Vec<String> {
        Vec::new()
    }
}

/// `config:` of an [`Lm`] component: the sequence to train on, the model's
/// own config as the model's `config.json` writes it, and how gate trains
/// it (the optimizer, AdamW's slice, gradient accumulation): the settings a
/// team can change without touching the model's code, and so the levers
/// `gate plan` offers it (docs/plan.md).
///
/// Build one with `..LmConfig::default()` for the keys you do not set: the
/// struct gains keys as gate learns to turn more of them.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct LmConfig {
    /// Tokens a row feeds the model; the batch holds one more (the last target).
    pub seq_len: usize,
    /// The model's config, recorded as written and read into
    /// [`LanguageModel::Config`].
    pub model: serde_json::Value,
    /// The optimizer gate trains with; unset: the model's own
    /// ([`LanguageModel::optimizer`]) where it names one, else gate's AdamW.
    /// Set, it replaces the model's own.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub optimizer: Option<LmOptimizer>,
    /// gate's AdamW updates each parameter this many elements at a time
    /// ([`super::optim::SlicedAdamW`], the same arithmetic to the bit); 0,
    /// the default: whole tensors, as candle-nn's AdamW.
    #[serde(skip_serializing_if = "is_zero")]
    pub adamw_slice: usize,
    /// Gradient accumulation: each step runs this many micro-batches of
    /// `batch_size` rows, their gradients summed before one update (1, the
    /// default: none).
    #[serde(skip_serializing_if = "is_one")]
    pub accumulation: usize,
}

/// The optimizers gate can train an [`Lm`] with, by the name the spec gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LmOptimizer {
    /// gate's AdamW ([`super::optim::adamw_params`]): two moments a
    /// parameter, `optimizer` = 2 × params.
    AdamW,
    /// candle-nn's SGD, no momentum: no state, `optimizer` = 0. Trains
    /// differently, so `gate plan` shows its loss ratio.
    Sgd,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

fn is_one(n: &usize) -> bool {
    *n == 1
}

impl Default for LmConfig {
    fn default() -> Self {
        LmConfig {
            seq_len: 64,
            model: serde_json::Value::Object(Default::default()),
            optimizer: None,
            adamw_slice: 0,
            accumulation: 1,
        }
    }
}

/// The workload of a [`LanguageModel`]: register `gate::Lm<M>` with
/// [`main!`](crate::main). Batches are `seq_len + 1` seeded token ids a
/// row; the loss is the cross-entropy of the model's logits against the
/// next tokens; inference is the forward alone.
pub struct Lm<M: LanguageModel> {
    config: LmConfig,
    model: M::Config,
    /// Token ids are drawn from `0..vocab`: [`LanguageModel::vocab_size`],
    /// else the spec's `model.vocab_size`.
    vocab: usize,
    _model: PhantomData<fn() -> M>,
}

impl<M: LanguageModel> fmt::Debug for Lm<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lm")
            .field("kind", &M::KIND)
            .field("seq_len", &self.config.seq_len)
            .field("model", &self.model)
            .finish()
    }
}

/// Reads the model's own config from its JSON; each problem keyed
/// `model.<key>` so the spec's reader places it at its line.
fn read_model<C: DeserializeOwned>(model: &serde_json::Value, problems: &mut Problems) -> Option<C> {
    let node = Node::from_json(model, Pos::default());
    match config::read::<C>(&node, None) {
        Ok(c) => Some(c),
        Err(issues) => {
            for issue in issues {
                let (key, message) = match &issue.key {
                    Some(k) => (
                        format!("model.{k}"),
                        issue.message.replacen(&format!("`{k}`"), &format!("`model.{k}`"), 1),
                    ),
                    None => ("model".to_string(), format!("`model` {}", issue.message)),
                };
                let hint = if issue.key.is_none() {
                    "write the model's config under `model:` with the keys of its config.json".to_string()
                } else {
                    issue.hint
                };
                problems.error(&key, message, hint);
            }
            None
        }
    }
}

/// The spec's `model.vocab_size`, as written (a whole number).
fn spec_vocab(model: &serde_json::Value) -> Option<usize> {
    model.get("vocab_size")?.as_u64().and_then(|v| usize::try_from(v).ok())
}

impl<M: LanguageModel> Workload for Lm<M> {
    const KIND: &'static str = M::KIND;
    type Config = LmConfig;

    fn from_config(config: LmConfig) -> std::result::Result<Self, Problems> {
        let mut p = Problems::new();
        p.positive("seq_len", config.seq_len);
        p.positive("accumulation", config.accumulation);
        if config.adamw_slice > 0 && config.optimizer.is_none() && !matches!(M::optimizer(Vec::new()), Ok(None)) {
            p.error(
                "adamw_slice",
                format!(
                    "`adamw_slice` slices gate's AdamW, and {} trains with its own optimizer",
                    M::KIND
                ),
                "set `optimizer: adamw` to train with gate's AdamW, or remove `adamw_slice`",
            );
        }
        match read_model::<M::Config>(&config.model, &mut p) {
            Some(model) => {
                let vocab = match M::vocab_size(&model) {
                    0 => spec_vocab(&config.model),
                    given => Some(given),
                };
                match vocab {
                    Some(0) => p.error(
                        "model.vocab_size",
                        "the model's vocabulary is empty",
                        "give it a `vocab_size` of at least 1",
                    ),
                    None => p.error(
                        "model",
                        "`model` has no `vocab_size`, which gate draws the token ids from",
                        "write the vocabulary's size under `model:` (`vocab_size: N`, as its config.json has \
                         it), or give `LanguageModel::vocab_size`",
                    ),
                    Some(_) => {}
                }
                p.finish(Lm {
                    config,
                    model,
                    vocab: vocab.unwrap_or(0),
                    _model: PhantomData,
                })
            }
            None => Err(p),
        }
    }

    fn config(&self) -> &LmConfig {
        &self.config
    }

    fn param_count(&self) -> ParamCount {
        M::param_count(&self.model).unwrap_or_else(ParamCount::from_build)
    }

    fn optimizer(&self, vars: Vec<Var>) -> Result<Option<Box<dyn OptimizerStep>>> {
        let lr = self.learning_rate();
        match self.config.optimizer {
            Some(LmOptimizer::Sgd) => Ok(Some(Box::new(candle_nn::SGD::new(vars, lr)?))),
            Some(LmOptimizer::AdamW) => self.adamw(vars, lr),
            None if self.trains_with_gates_adamw() => self.adamw(vars, lr),
            None => M::optimizer(vars),
        }
    }

    fn accumulation_steps(&self) -> usize {
        self.config.accumulation
    }

    fn frozen_parameters(&self) -> Vec<String> {
        M::frozen_parameters(&self.model)
    }

    /// What a language model's team can change without touching its code
    /// (docs/plan.md): AdamW in slices and gradient accumulation (the loss
    /// stays), then SGD for AdamW, bf16 with f32 masters and the sequence
    /// length (each shown with its loss ratio); gate adds the batch. A
    /// model that trains with its own optimizer gets no optimizer lever:
    /// gate cannot say what its state is.
    fn levers(&self) -> Vec<Lever> {
        let seq = self.config.seq_len;
        let mut levers = Vec::new();
        let gates_adamw = self.trains_with_gates_adamw();
        if gates_adamw {
            levers.push(Lever::Config {
                key: "adamw_slice".into(),
                values: vec![super::optim::SlicedAdamW::DEFAULT_SLICE.into()],
                about: "gate's AdamW updates each parameter this many elements at a time, the same \
                        arithmetic; its temporaries are the slice's, not the largest parameter's"
                    .into(),
                changes_loss: false,
            });
        }
        levers.push(Lever::Accumulation {
            key: "accumulation".into(),
            steps: vec![2, 4],
        });
        if gates_adamw {
            levers.push(Lever::Config {
                key: "optimizer".into(),
                values: vec!["sgd".into()],
                about: "SGD instead of AdamW: no optimizer state (AdamW keeps two moments a parameter)".into(),
                changes_loss: true,
            });
        }
        levers.push(Lever::bf16());
        let lengths: Vec<usize> = [seq / 2, seq / 4].into_iter().filter(|&n| n >= 1 && n != seq).collect();
        if !lengths.is_empty() {
            levers.push(Lever::Sequence {
                key: "seq_len".into(),
                lengths,
            });
        }
        levers
    }

    fn build(&self, vb: VarBuilder, ctx: &RunCtx) -> Result<Box<dyn Model>> {
        let model = RefCell::new(M::load(vb, &self.model, ctx)?);
        Ok(Box::new(LmModel {
            model,
            device: ctx.device.clone(),
            vocab: self.vocab,
            rows: ctx.batch_size,
        }))
    }

    /// `seq_len + 1` token ids a row: the inputs, and each one's next token.
    fn batch(&self, ctx: &RunCtx, seed: u64) -> Result<Batch> {
        let (rows, len) = (ctx.batch_size, self.config.seq_len + 1);
        let vocab = self.vocab as u64;
        let mut rng = Rng::new(seed);
        let ids: Vec<u32> = (0..rows * len).map(|_| rng.below(vocab) as u32).collect();
        Ok(Batch::new(vec![Tensor::from_vec(ids, (rows, len), &ctx.device)?]))
    }
}

impl<M: LanguageModel> Lm<M> {
    /// gate's AdamW, whole or in `adamw_slice`s.
    fn adamw(&self, vars: Vec<Var>, lr: f64) -> Result<Option<Box<dyn OptimizerStep>>> {
        let params = super::optim::adamw_params(lr);
        Ok(match self.config.adamw_slice {
            0 => None,
            slice => Some(Box::new(
                super::optim::SlicedAdamW::new(vars, params)?.with_slice(slice),
            )),
        })
    }

    /// Whether a step updates with gate's AdamW: the spec asks for it, or
    /// leaves the choice to a model that names no optimizer of its own
    /// (asked with no variables: a model's optimizer that cannot be made
    /// so counts as its own).
    fn trains_with_gates_adamw(&self) -> bool {
        match self.config.optimizer {
            Some(LmOptimizer::AdamW) => true,
            Some(LmOptimizer::Sgd) => false,
            None => matches!(M::optimizer(Vec::new()), Ok(None)),
        }
    }
}

/// The model behind a `RefCell`: `Model`'s calls take `&self`, a model's
/// forward may take `&mut self`; gate never calls it re-entrantly.
struct LmModel<M> {
    model: RefCell<M>,
    device: Device,
    vocab: usize,
    /// The component's batch: the rows a generation decodes.
    rows: usize,
}

impl<M: LanguageModel> LmModel<M> {
    fn inputs(batch: &Batch) -> Result<Tensor> {
        let ids = &batch.tensors[0];
        ids.narrow(1, 0, ids.dim(1)? - 1)?.contiguous()
    }
}

impl<M: LanguageModel> Model for LmModel<M> {
    fn loss(&self, batch: &Batch, _step: &Step) -> Result<Tensor> {
        let ids = &batch.tensors[0];
        let seq = ids.dim(1)? - 1;
        let logits = self.model.borrow_mut().forward(&Self::inputs(batch)?)?;
        let vocab = logits.dim(D::Minus1)?;
        // The next token of each of the last `n` positions (every one, or the last).
        let n = match logits.rank() {
            3 => logits.dim(1)?,
            2 => 1,
            _ => 0,
        };
        if n == 0 || n > seq {
            candle_core::bail!(
                "{}'s forward returned logits of shape {:?} for {seq} positions: gate::Lm takes \
                 [batch, n, vocab] with n at most the positions, or [batch, vocab]",
                M::KIND,
                logits.dims()
            );
        }
        let targets = ids.narrow(1, seq + 1 - n, n)?;
        let logits = logits.to_dtype(DType::F32)?.reshape(((), vocab))?;
        candle_nn::loss::cross_entropy(&logits, &targets.flatten_all()?)
    }

    fn predict(&self, batch: &Batch) -> Result<Tensor> {
        self.model.borrow_mut().forward(&Self::inputs(batch)?)
    }

    /// The cache the default `forward` leaves full is the model's state,
    /// not the optimizer's: emptied here, it is measured as `model_state`.
    fn clear_state(&mut self) -> Result<bool> {
        self.model.get_mut().clear_cache();
        Ok(true)
    }

    fn generator(&self) -> Result<Box<dyn Generator + '_>> {
        let mut model = self.model.borrow_mut();
        model.clear_cache();
        Ok(Box::new(Greedy {
            model,
            device: self.device.clone(),
            vocab: self.vocab,
            rows: self.rows,
            offset: 0,
            next: Vec::new(),
        }))
    }
}

/// Greedy decoding through the model's own cache, `rows` sequences at once
/// (the component's batch): the prompts, then each row's most likely next
/// token each step.
struct Greedy<'a, M> {
    model: std::cell::RefMut<'a, M>,
    device: Device,
    vocab: usize,
    rows: usize,
    offset: usize,
    /// Each row's next token.
    next: Vec<u32>,
}

impl<M: LanguageModel> Greedy<'_, M> {
    fn run(&mut self, ids: Tensor) -> Result<()> {
        let n = ids.dim(1)?;
        let logits = self.model.forward_cached(&ids, self.offset)?;
        self.offset += n;
        // Each row's last position: `[rows, n, vocab]` or `[rows, vocab]`.
        let last = match logits.rank() {
            3 => logits.narrow(1, logits.dim(1)? - 1, 1)?.squeeze(1)?,
            2 => logits,
            _ => candle_core::bail!(
                "{}'s cached forward returned logits of shape {:?}: gate::Lm takes [batch, n, vocab] or [batch, vocab]",
                M::KIND,
                logits.dims()
            ),
        };
        if last.dim(0)? != self.rows {
            candle_core::bail!(
                "{}'s cached forward returned {} rows of logits for a batch of {}: gate::Lm decodes `batch_size` rows",
                M::KIND,
                last.dim(0)?,
                self.rows
            );
        }
        self.next = last.argmax(D::Minus1)?.to_vec1::<u32>()?;
        Ok(())
    }
}

impl<M: LanguageModel> Generator for Greedy<'_, M> {
    fn prefill(&mut self, tokens: usize) -> Result<()> {
        let mut rng = Rng::new(0x9e7);
        let ids: Vec<u32> = (0..self.rows * tokens)
            .map(|_| rng.below(self.vocab as u64) as u32)
            .collect();
        let ids = Tensor::from_vec(ids, (self.rows, tokens), &self.device)?;
        self.run(ids)
    }

    fn decode(&mut self) -> Result<()> {
        let ids = Tensor::from_vec(self.next.clone(), (self.rows, 1), &self.device)?;
        self.run(ids)
    }
}

#[cfg(test)]
mod tests;
