use super::*;
use candle_nn::{Embedding, Module};

#[derive(Debug, Clone, Deserialize)]
struct TinyConfig {
    vocab_size: usize,
    hidden_size: usize,
    #[serde(default)]
    last_only: bool,
}

struct Tiny(Embedding, candle_nn::Linear, bool);

impl LanguageModel for Tiny {
    const KIND: &'static str = "tiny";
    type Config = TinyConfig;
    fn vocab_size(c: &TinyConfig) -> usize {
        c.vocab_size
    }
    fn load(vb: VarBuilder, c: &TinyConfig, _: &RunCtx) -> Result<Self> {
        let embed = candle_nn::embedding(c.vocab_size, c.hidden_size, vb.pp("embed"))?;
        let head = candle_nn::linear(c.hidden_size, c.vocab_size, vb.pp("head"))?;
        Ok(Tiny(embed, head, c.last_only))
    }
    fn forward(&mut self, ids: &Tensor) -> Result<Tensor> {
        let logits = self.1.forward(&self.0.forward(ids)?)?;
        match self.2 {
            true => logits.narrow(1, ids.dim(1)? - 1, 1)?.squeeze(1),
            false => Ok(logits),
        }
    }
}

fn lm(model: serde_json::Value) -> std::result::Result<Lm<Tiny>, Problems> {
    Lm::from_config(LmConfig {
        seq_len: 6,
        model,
        ..LmConfig::default()
    })
}

/// Tiny with the team's own optimizer (candle-nn's SGD).
struct TinyOwnSgd(Tiny);

impl LanguageModel for TinyOwnSgd {
    const KIND: &'static str = "tiny_own_sgd";
    type Config = TinyConfig;
    fn vocab_size(c: &TinyConfig) -> usize {
        c.vocab_size
    }
    fn load(vb: VarBuilder, c: &TinyConfig, ctx: &RunCtx) -> Result<Self> {
        Ok(TinyOwnSgd(Tiny::load(vb, c, ctx)?))
    }
    fn forward(&mut self, ids: &Tensor) -> Result<Tensor> {
        self.0.forward(ids)
    }
    fn optimizer(vars: Vec<Var>) -> Result<Option<Box<dyn OptimizerStep>>> {
        Ok(Some(Box::new(candle_nn::SGD::new(vars, 0.1)?)))
    }
}

fn tiny_with(keys: serde_json::Value) -> std::result::Result<Lm<Tiny>, Problems> {
    let mut config = serde_json::json!({ "seq_len": 6, "model": { "vocab_size": 11, "hidden_size": 4 } });
    config
        .as_object_mut()
        .unwrap()
        .extend(keys.as_object().unwrap().clone());
    Lm::from_config(serde_json::from_value(config).unwrap())
}

fn lever_names(levers: &[Lever]) -> Vec<String> {
    levers.iter().map(Lever::name).collect()
}

#[test]
fn a_model_on_gates_adamw_offers_slices_accumulation_sgd_bf16_and_length() {
    let w = tiny_with(serde_json::json!({})).unwrap();
    assert_eq!(
        lever_names(&w.levers()),
        [
            "config.adamw_slice",
            "config.accumulation",
            "config.optimizer",
            "dtype",
            "config.seq_len"
        ]
    );
    let changes_loss: Vec<bool> = w.levers().iter().map(Lever::changes_loss).collect();
    assert_eq!(changes_loss, [false, false, true, true, true]);
    // Once on SGD there is no AdamW to slice, nor to leave.
    let sgd = tiny_with(serde_json::json!({ "optimizer": "sgd" })).unwrap();
    assert_eq!(
        lever_names(&sgd.levers()),
        ["config.accumulation", "dtype", "config.seq_len"]
    );
}

#[test]
fn a_model_with_its_own_optimizer_gets_no_optimizer_lever_and_no_slice() {
    let model = serde_json::json!({ "vocab_size": 11, "hidden_size": 4 });
    let own = Lm::<TinyOwnSgd>::from_config(LmConfig {
        seq_len: 6,
        model: model.clone(),
        ..LmConfig::default()
    })
    .unwrap();
    assert_eq!(
        lever_names(&own.levers()),
        ["config.accumulation", "dtype", "config.seq_len"]
    );
    let sliced = Lm::<TinyOwnSgd>::from_config(LmConfig {
        seq_len: 6,
        model: model.clone(),
        adamw_slice: 1024,
        ..LmConfig::default()
    })
    .unwrap_err();
    let issue = &sliced.issues()[0];
    assert_eq!(issue.key.as_deref(), Some("adamw_slice"));
    assert_eq!(
        issue.message,
        "`adamw_slice` slices gate's AdamW, and tiny_own_sgd trains with its own optimizer"
    );
    // Asked for by name, gate's AdamW replaces the model's own and slices.
    let gates = Lm::<TinyOwnSgd>::from_config(LmConfig {
        seq_len: 6,
        model,
        adamw_slice: 1024,
        optimizer: Some(LmOptimizer::AdamW),
        ..LmConfig::default()
    })
    .unwrap();
    assert_eq!(
        lever_names(&gates.levers())[..2],
        ["config.adamw_slice", "config.accumulation"]
    );
}

#[test]
fn accumulation_must_be_at_least_one_and_defaults_are_not_recorded() {
    let zero = tiny_with(serde_json::json!({ "accumulation": 0 })).unwrap_err();
    assert_eq!(zero.issues()[0].key.as_deref(), Some("accumulation"));
    let w = tiny_with(serde_json::json!({ "accumulation": 4 })).unwrap();
    assert_eq!(w.accumulation_steps(), 4);
    // A spec that sets none of the training keys records the config it
    // recorded before they existed: its fingerprint, and so its
    // baselines, stay.
    let recorded = serde_json::to_value(tiny_with(serde_json::json!({})).unwrap().config()).unwrap();
    let keys: Vec<&String> = recorded.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["model", "seq_len"]);
    let set = serde_json::to_value(
        tiny_with(serde_json::json!({ "optimizer": "sgd", "adamw_slice": 8, "accumulation": 2 }))
            .unwrap()
            .config(),
    )
    .unwrap();
    assert_eq!(set["optimizer"], "sgd");
    assert_eq!(set["adamw_slice"], 8);
    assert_eq!(set["accumulation"], 2);
}

#[test]
fn an_optimizer_gate_does_not_have_is_a_spec_error_at_its_key() {
    let node = Node::from_json(
        &serde_json::json!({ "seq_len": 6, "optimizer": "adam" }),
        Pos::default(),
    );
    let issues = config::read::<LmConfig>(&node, None).unwrap_err();
    assert_eq!(issues[0].key.as_deref(), Some("optimizer"), "{issues:?}");
    let said = format!("{} {}", issues[0].message, issues[0].hint);
    assert!(said.contains("adamw") && said.contains("sgd"), "{said}");
}

#[test]
fn sgd_updates_by_the_gradient_alone_and_sliced_adamw_is_adamw() -> Result<()> {
    let ctx = RunCtx::cpu(1);
    let var = || Var::from_vec(vec![1f32, 2., 3.], 3, &ctx.device);
    let grads_of = |v: &Var| -> Result<candle_core::backprop::GradStore> { v.as_tensor().sqr()?.sum_all()?.backward() };
    // SGD: w − lr · 2w at the workload's learning rate (1e-3).
    let w = var()?;
    let mut sgd = tiny_with(serde_json::json!({ "optimizer": "sgd" }))
        .unwrap()
        .optimizer(vec![w.clone()])?
        .expect("SGD is gate's to make");
    sgd.step(&grads_of(&w)?)?;
    let want: Vec<f32> = [1f32, 2., 3.].iter().map(|x| x - 1e-3 * 2. * x).collect();
    assert_eq!(w.as_tensor().to_vec1::<f32>()?, want);
    // Unset: the runner's own AdamW (None); sliced: gate's SlicedAdamW,
    // candle-nn's AdamW to the bit.
    assert!(tiny_with(serde_json::json!({}))
        .unwrap()
        .optimizer(vec![var()?])?
        .is_none());
    let (a, b) = (var()?, var()?);
    let mut whole = candle_nn::AdamW::new(vec![a.clone()], crate::sdk::optim::adamw_params(1e-3))?;
    let mut sliced = tiny_with(serde_json::json!({ "adamw_slice": 2 }))
        .unwrap()
        .optimizer(vec![b.clone()])?
        .expect("sliced AdamW");
    for _ in 0..3 {
        candle_nn::Optimizer::step(&mut whole, &grads_of(&a)?)?;
        sliced.step(&grads_of(&b)?)?;
    }
    assert_eq!(a.as_tensor().to_vec1::<f32>()?, b.as_tensor().to_vec1::<f32>()?);
    Ok(())
}

#[test]
fn the_models_own_config_is_read_with_each_problem_at_its_key() {
    let ok = lm(serde_json::json!({ "vocab_size": 11, "hidden_size": 4 })).unwrap();
    assert_eq!(
        (ok.model.vocab_size, ok.model.hidden_size, ok.model.last_only),
        (11, 4, false)
    );
    let bad = lm(serde_json::json!({ "vocab_size": "many", "hiden_size": 4 })).unwrap_err();
    let got: Vec<(Option<&str>, &str, &str)> = bad
        .issues()
        .iter()
        .map(|i| (i.key.as_deref(), i.message.as_str(), i.hint.as_str()))
        .collect();
    assert_eq!(got[0].0, Some("model.hiden_size"));
    assert_eq!(got[0].1, "unknown config key `model.hiden_size`");
    assert!(got[0].2.starts_with("did you mean `hidden_size`?"), "{}", got[0].2);
    assert_eq!(got[1].0, Some("model.vocab_size"));
    assert_eq!(
        got[1].1,
        "`model.vocab_size` must be a whole number of at least 0, found the text `many`"
    );
    let missing = lm(serde_json::json!({})).unwrap_err();
    let issue = &missing.issues()[0];
    assert_eq!(issue.key.as_deref(), Some("model"));
    assert_eq!(issue.message, "`model` has no `vocab_size`, which this workload needs");
}

#[test]
fn the_loss_is_the_next_tokens_cross_entropy_for_every_position_or_the_last() -> Result<()> {
    for last_only in [false, true] {
        let w = lm(serde_json::json!({ "vocab_size": 11, "hidden_size": 4, "last_only": last_only })).unwrap();
        let ctx = RunCtx::cpu(3);
        let batch = w.batch(&ctx, 5)?;
        assert_eq!(batch.tensors[0].dims(), &[3, 7]);
        let vb = VarBuilder::zeros(DType::F32, &ctx.device);
        let model = w.build(vb, &ctx)?;
        // Zero weights: uniform logits, so the loss is ln(vocab) whatever the targets.
        let loss = model.loss(&batch, &Step::eval())?.to_scalar::<f32>()?;
        assert!((loss - (11f32).ln()).abs() < 1e-5, "{loss}");
        let want: &[usize] = if last_only { &[3, 11] } else { &[3, 6, 11] };
        assert_eq!(model.predict(&batch)?.dims(), want);
    }
    Ok(())
}

/// A config type whose `vocab_size` the impl does not read out (phi's
/// and stable_lm's fields are `pub(crate)`).
#[derive(Debug, Clone, Deserialize)]
struct HiddenConfig {
    #[serde(default)]
    vocab_size: usize,
    hidden_size: usize,
}

struct Hidden(Embedding, candle_nn::Linear);

impl LanguageModel for Hidden {
    const KIND: &'static str = "hidden";
    type Config = HiddenConfig;
    // Its own crate builds from the field; the impl cannot name it.
    fn load(vb: VarBuilder, c: &HiddenConfig, _: &RunCtx) -> Result<Self> {
        let embed = candle_nn::embedding(c.vocab_size, c.hidden_size, vb.pp("embed"))?;
        let head = candle_nn::linear(c.hidden_size, c.vocab_size, vb.pp("head"))?;
        Ok(Hidden(embed, head))
    }
    fn forward(&mut self, ids: &Tensor) -> Result<Tensor> {
        self.1.forward(&self.0.forward(ids)?)
    }
}

#[test]
fn a_model_that_hides_its_vocabulary_is_read_from_the_specs_model_key() -> Result<()> {
    let config = |model| LmConfig {
        seq_len: 6,
        model,
        ..LmConfig::default()
    };
    let w = Lm::<Hidden>::from_config(config(serde_json::json!({ "vocab_size": 11, "hidden_size": 4 }))).unwrap();
    let ctx = RunCtx::cpu(3);
    let batch = w.batch(&ctx, 5)?;
    let ids = batch.tensors[0].flatten_all()?.to_vec1::<u32>()?;
    assert!(ids.iter().all(|&id| id < 11), "{ids:?}");
    let model = w.build(VarBuilder::zeros(DType::F32, &ctx.device), &ctx)?;
    let loss = model.loss(&batch, &Step::eval())?.to_scalar::<f32>()?;
    assert!((loss - (11f32).ln()).abs() < 1e-5, "{loss}");
    // Neither the impl nor the spec gives it: said at `model`, with both ways.
    let missing = Lm::<Hidden>::from_config(config(serde_json::json!({ "hidden_size": 4 }))).unwrap_err();
    let issue = &missing.issues()[0];
    assert_eq!(issue.key.as_deref(), Some("model"));
    assert_eq!(
        issue.message,
        "`model` has no `vocab_size`, which gate draws the token ids from"
    );
    assert!(issue.hint.contains("LanguageModel::vocab_size"), "{}", issue.hint);
    Ok(())
}
