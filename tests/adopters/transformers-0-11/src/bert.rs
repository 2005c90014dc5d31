//! candle-transformers' BERT with its masked-LM head, gated as it ships:
//! `BertForMaskedLM::load` and its `forward` (logits at every position).

use candle_core::{Result, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertForMaskedLM, Config};
use gate::{Batch, Model, ParamCount, Problems, RunCtx, Step, Workload};
use serde::{Deserialize, Serialize};

/// `config:` of a `bert_mlm` component.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct BertConfig {
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub intermediate_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub max_position_embeddings: usize,
    pub seq_len: usize,
}

impl Default for BertConfig {
    fn default() -> Self {
        BertConfig {
            vocab_size: 1000,
            hidden_size: 128,
            intermediate_size: 512,
            num_hidden_layers: 4,
            num_attention_heads: 4,
            max_position_embeddings: 128,
            seq_len: 64,
        }
    }
}

#[derive(Debug)]
pub struct BertMlm(BertConfig);

impl Workload for BertMlm {
    const KIND: &'static str = "bert_mlm";
    type Config = BertConfig;

    fn from_config(c: BertConfig) -> std::result::Result<Self, Problems> {
        let mut p = Problems::new();
        p.positive("seq_len", c.seq_len);
        p.at_least("max_position_embeddings", c.max_position_embeddings, c.seq_len);
        p.finish(BertMlm(c))
    }

    fn config(&self) -> &BertConfig {
        &self.0
    }

    /// Word, position and (2) token-type embeddings and their LayerNorm; per
    /// layer q/k/v, the attention's output dense, the intermediate and
    /// output denses (all with biases) and two LayerNorms; the MLM head's
    /// transform dense, LayerNorm and decoder (with bias).
    fn param_count(&self) -> ParamCount {
        let c = &self.0;
        let (v, h, i) = (c.vocab_size as u64, c.hidden_size as u64, c.intermediate_size as u64);
        let embeddings = (v + c.max_position_embeddings as u64 + 2) * h + 2 * h;
        let layer = 4 * h * h + 9 * h + 2 * h * i + i;
        let head = h * h + 3 * h + h * v + v;
        ParamCount::new(embeddings + c.num_hidden_layers as u64 * layer + head, 0)
    }

    fn build(&self, vb: VarBuilder, _ctx: &RunCtx) -> Result<Box<dyn Model>> {
        let c = &self.0;
        let cfg = Config {
            vocab_size: c.vocab_size,
            hidden_size: c.hidden_size,
            intermediate_size: c.intermediate_size,
            num_hidden_layers: c.num_hidden_layers,
            num_attention_heads: c.num_attention_heads,
            max_position_embeddings: c.max_position_embeddings,
            ..Config::default()
        };
        Ok(Box::new(BertModel(BertForMaskedLM::load(vb, &cfg)?)))
    }

    /// Every 7th token replaced by `[MASK]` (the last id); the labels are the originals.
    fn batch(&self, ctx: &RunCtx, seed: u64) -> Result<Batch> {
        let (c, b) = (&self.0, ctx.batch_size);
        let labels = crate::tokens(seed, b, c.seq_len, c.vocab_size, &ctx.device)?;
        let mask = c.vocab_size as u32 - 1;
        let ids = labels.flatten_all()?.to_vec1::<u32>()?;
        let ids = ids
            .iter()
            .enumerate()
            .map(|(k, &id)| if k % 7 == 0 { mask } else { id });
        let input = Tensor::from_iter(ids, &ctx.device)?.reshape((b, c.seq_len))?;
        Ok(Batch::new(vec![input, labels]))
    }
}

struct BertModel(BertForMaskedLM);

impl Model for BertModel {
    fn loss(&self, batch: &Batch, _step: &Step) -> Result<Tensor> {
        crate::lm_loss(&self.predict(batch)?, &batch.tensors[1])
    }

    fn predict(&self, batch: &Batch) -> Result<Tensor> {
        let ids = &batch.tensors[0];
        self.0.forward(ids, &ids.zeros_like()?, None)
    }
}
