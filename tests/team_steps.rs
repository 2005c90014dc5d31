//! A team's own steps, on the counting allocator, to the byte where the
//! maths is exact:
//! - a generation component: a model whose cache grows by its K and V rows
//!   each token has `kv_cache_per_token` equal to its closed form and no
//!   `decode_growth`; the same model keeping every old copy of its cache
//!   (what a concat cache that never frees does) grows O(N²) and
//!   `decode_growth` says so;
//! - the team's optimizer: `optimizer` is the state it holds (AdamW two
//!   moments per parameter, SGD none), gradient clipping and accumulation
//!   run in the training step.

use std::sync::Arc;

use gate::candle_core::backprop::GradStore;
use gate::candle_core::Var;
use gate::candle_core::{DType, Result, Tensor, D};
use gate::candle_nn::{Embedding, Linear, Module, VarBuilder};
use gate::test_support::runner::{profile, profile_generation};
use gate::{Batch, Generator, Model, OptimizerStep, Problems, RunCtx, Step, Workload};
use gate_probe::{CountingAlloc, CpuProbe, Recorder};
use gate_runner::phases::Timing;
use gate_spec::budget::Generate;
use gate_spec::metric::Metric;
use serde::{Deserialize, Serialize};

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

/// The counting allocator counts the whole process: one test at a time.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn alone() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner())
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Cfg {
    vocab: usize,
    d: usize,
    layers: usize,
    /// Keep every old copy of the cache (the leak).
    leak: bool,
}

#[derive(Debug)]
struct Cached(Cfg);

struct Net {
    embed: Embedding,
    kv: Vec<(Linear, Linear)>,
    cfg: Cfg,
}

impl Model for Net {
    fn loss(&self, batch: &Batch, _step: &Step) -> Result<Tensor> {
        self.embed.forward(&batch.tensors[0])?.sqr()?.mean_all()
    }
    fn predict(&self, batch: &Batch) -> Result<Tensor> {
        self.embed.forward(&batch.tensors[0])
    }
    fn generator(&self) -> Result<Box<dyn Generator + '_>> {
        Ok(Box::new(Loop {
            net: self,
            cache: Vec::new(),
            kept: Vec::new(),
            last: 0,
        }))
    }
}

/// The team's loop: its own cache, its own choice of the next token.
struct Loop<'a> {
    net: &'a Net,
    cache: Vec<(Tensor, Tensor)>,
    kept: Vec<Tensor>,
    last: u32,
}

impl Loop<'_> {
    fn step(&mut self, ids: &[u32]) -> Result<()> {
        let dev = self.net.embed.embeddings().device().clone();
        let x = self.net.embed.forward(&Tensor::new(ids, &dev)?)?;
        for (i, (wk, wv)) in self.net.kv.iter().enumerate() {
            let (k, v) = (wk.forward(&x)?, wv.forward(&x)?);
            let (k, v) = match self.cache.get(i) {
                Some((ck, cv)) => (Tensor::cat(&[ck, &k], 0)?, Tensor::cat(&[cv, &v], 0)?),
                None => (k, v),
            };
            if i < self.cache.len() {
                let old = std::mem::replace(&mut self.cache[i], (k, v));
                if self.net.cfg.leak {
                    self.kept.extend([old.0, old.1]);
                }
            } else {
                self.cache.push((k, v));
            }
        }
        let last = x.get(x.dim(0)? - 1)?.argmax(D::Minus1)?.to_scalar::<u32>()?;
        self.last = (last + 1) % self.net.cfg.vocab as u32;
        Ok(())
    }
}

impl Generator for Loop<'_> {
    fn prefill(&mut self, tokens: usize) -> Result<()> {
        let ids: Vec<u32> = (0..tokens as u32).map(|i| i % self.net.cfg.vocab as u32).collect();
        self.step(&ids)
    }
    fn decode(&mut self) -> Result<()> {
        self.step(&[self.last])
    }
}

impl Workload for Cached {
    const KIND: &'static str = "cached";
    type Config = Cfg;
    fn from_config(c: Cfg) -> std::result::Result<Self, Problems> {
        Ok(Cached(c))
    }
    fn config(&self) -> &Cfg {
        &self.0
    }
    fn build(&self, vb: VarBuilder, _ctx: &RunCtx) -> Result<Box<dyn Model>> {
        let c = &self.0;
        let kv = (0..c.layers)
            .map(|i| {
                let vb = vb.pp(format!("layer{i}"));
                Ok((
                    gate::candle_nn::linear_no_bias(c.d, c.d, vb.pp("k"))?,
                    gate::candle_nn::linear_no_bias(c.d, c.d, vb.pp("v"))?,
                ))
            })
            .collect::<Result<_>>()?;
        Ok(Box::new(Net {
            embed: gate::candle_nn::embedding(c.vocab, c.d, vb.pp("embed"))?,
            kv,
            cfg: c.clone(),
        }))
    }
    fn batch(&self, ctx: &RunCtx, _seed: u64) -> Result<Batch> {
        Ok(Batch::new(vec![Tensor::zeros(
            ctx.batch_size,
            DType::U32,
            &ctx.device,
        )?]))
    }
}

/// Where a case runs: the CPU's counting allocator, or (with `cuda`) the
/// CUDA pool, whose figures are the tensors' bytes with no bookkeeping.
fn on_cpu(batch_size: usize) -> (RunCtx, Recorder) {
    (RunCtx::cpu(batch_size), Recorder::new(Arc::new(CpuProbe)))
}

fn measure(leak: bool) -> gate_contract::measurement::Measurement {
    measure_on(leak, on_cpu(1))
}

fn measure_on(leak: bool, (ctx, rec): (RunCtx, Recorder)) -> gate_contract::measurement::Measurement {
    let w = Cached(Cfg {
        vocab: 64,
        d: 32,
        layers: 2,
        leak,
    });
    let generate = Generate { prefill: 16, decode: 8 };
    let m = profile_generation(&w, &ctx, generate, None, &rec, &mut |_, _| {});
    assert!(m.failure.is_none(), "{:?}", m.failure);
    m
}

fn a_cache_that_grows_by_its_rows_is_its_closed_form_and_one_that_keeps_its_copies_grows() {
    let _alone = alone();
    let bounded = measure(false);
    // K and V rows of d f32 in each of 2 layers.
    let per_token = (2 * 2 * 32 * 4) as f64;
    assert_eq!(bounded.values[&Metric::KvCachePerToken], per_token);
    assert_eq!(bounded.values[&Metric::DecodeGrowth], 0.0);
    // Parameters: the embedding and 2 × (K, V), f32, plus each tensor's bookkeeping.
    let params = ((64 * 32 + 2 * 2 * 32 * 32) * 4) as f64;
    assert!(bounded.values[&Metric::Params] >= params, "{:?}", bounded.values);
    // Built with candle's `cuda` feature a CPU tensor's bookkeeping is
    // larger (its storage can be a CUDA one): 3,000 B for these 5 tensors on
    // the H200 run of 2026-12-05 (docs/gpu.md), against under 512 B each.
    let per_tensor = if cfg!(feature = "cuda") { 640.0 } else { 512.0 };
    assert!(
        bounded.values[&Metric::Params] < params + 5.0 * per_tensor,
        "{} B for {params} B of data in 5 tensors",
        bounded.values[&Metric::Params]
    );
    assert!(bounded.values[&Metric::DecodePeak] > bounded.values[&Metric::Params]);
    assert!(bounded.values[&Metric::PrefillPeak] > bounded.values[&Metric::Params]);
    // No training ran: none of its figures.
    assert!(!bounded.values.contains_key(&Metric::TrainingPeak));

    let leaking = measure(true);
    // Decode step i (from 0) keeps the old caches of 16 + i rows besides
    // the row it adds. Counted from step 1: steps 1..=3, then 4..=7 keep
    // (17+18+19) and (20+21+22+23) rows of 512 B, plus their own rows; the
    // second half grows 14 rows more than the first's, scaled to 4 steps.
    assert_eq!(leaking.values[&Metric::DecodeGrowth], 14.0 * per_token);
    // Per token: those rows, and each of the 4 kept tensors' own bookkeeping.
    let rows = (140.0 + 7.0) * per_token / 7.0;
    let kept = leaking.values[&Metric::KvCachePerToken];
    assert!(kept > rows && kept < rows + 4.0 * 512.0, "{kept} against {rows}");
}

/// Two linear layers trained with the team's optimizer, clipping and accumulation.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
struct TwoCfg {
    /// `sgd` or `adamw` (candle-nn's, with the team's settings); empty: gate's AdamW.
    optimizer: String,
    clip: Option<f64>,
    accumulate: usize,
}

#[derive(Debug)]
struct Two(TwoCfg);

struct TwoNet(Linear, Linear);

impl Model for TwoNet {
    fn loss(&self, batch: &Batch, _step: &Step) -> Result<Tensor> {
        self.1
            .forward(&self.0.forward(&batch.tensors[0])?.relu()?)?
            .sqr()?
            .mean_all()
    }
    fn predict(&self, batch: &Batch) -> Result<Tensor> {
        self.1.forward(&self.0.forward(&batch.tensors[0])?.relu()?)
    }
}

impl Workload for Two {
    const KIND: &'static str = "two";
    type Config = TwoCfg;
    fn from_config(c: TwoCfg) -> std::result::Result<Self, Problems> {
        Ok(Two(c))
    }
    fn config(&self) -> &TwoCfg {
        &self.0
    }
    fn build(&self, vb: VarBuilder, _ctx: &RunCtx) -> Result<Box<dyn Model>> {
        Ok(Box::new(TwoNet(
            gate::candle_nn::linear(64, 128, vb.pp("a"))?,
            gate::candle_nn::linear(128, 8, vb.pp("b"))?,
        )))
    }
    fn batch(&self, ctx: &RunCtx, _seed: u64) -> Result<Batch> {
        Ok(Batch::new(vec![Tensor::ones(
            (ctx.batch_size, 64),
            DType::F32,
            &ctx.device,
        )?]))
    }
    fn optimizer(&self, vars: Vec<Var>) -> Result<Option<Box<dyn OptimizerStep>>> {
        use gate::candle_nn::Optimizer;
        Ok(match self.0.optimizer.as_str() {
            "sgd" => Some(Box::new(gate::candle_nn::SGD::new(vars, 0.01)?)),
            "adamw" => Some(Box::new(gate::candle_nn::AdamW::new_lr(vars, 3e-4)?)),
            _ => None,
        })
    }
    fn before_update(&self, grads: &mut GradStore, vars: &[Var]) -> Result<()> {
        if let Some(max) = self.0.clip {
            let norm = gate::clip_grad_norm(grads, vars, max)?;
            assert!(norm > max, "the test's gradients are large enough to clip");
            let after = gate::clip_grad_norm(grads, vars, f64::INFINITY)?;
            assert!((after - max).abs() < 1e-3 * max, "clipped to {after}");
        }
        Ok(())
    }
    fn accumulation_steps(&self) -> usize {
        self.0.accumulate.max(1)
    }
}

fn train(cfg: TwoCfg) -> gate_contract::measurement::Measurement {
    train_on(cfg, on_cpu(4))
}

fn train_on(cfg: TwoCfg, (ctx, rec): (RunCtx, Recorder)) -> gate_contract::measurement::Measurement {
    let timing = Timing {
        warmup: 0,
        steps: 2,
        pairs: Some(0),
    };
    let m = profile(&Two(cfg), &ctx, timing, &rec, &mut |_, _| {});
    assert!(m.failure.is_none(), "{:?}", m.failure);
    m
}

fn the_teams_optimizer_is_what_optimizer_measures_and_its_clipping_and_accumulation_run() {
    let _alone = alone();
    let param_bytes = ((64 * 128 + 128 + 128 * 8 + 8) * 4) as f64;
    let cfg = |o: &str| TwoCfg {
        optimizer: o.into(),
        ..TwoCfg::default()
    };
    let (sgd, adamw, gates) = (train(cfg("sgd")), train(cfg("adamw")), train(cfg("")));
    // AdamW: two moments of every parameter, to the byte: what the
    // optimizer keeps beside them (its list of the variables, each
    // moment's header, the box of the team's) is not its state.
    let own = adamw.values[&Metric::Optimizer];
    assert_eq!(own, 2.0 * param_bytes);
    // The same optimizer, the same state: the team's (boxed) and gate's (inline).
    assert_eq!(
        own,
        gates.values[&Metric::Optimizer],
        "the same optimizer, the same state"
    );
    // SGD keeps no state.
    assert_eq!(sgd.values[&Metric::Optimizer], 0.0);
    // The gradients are the same whatever steps them.
    assert_eq!(sgd.values[&Metric::Gradients], param_bytes);
    assert_eq!(adamw.values[&Metric::Gradients], param_bytes);

    let clipped = train(TwoCfg {
        clip: Some(1e-3),
        ..cfg("sgd")
    });
    assert_eq!(clipped.values[&Metric::Gradients], param_bytes);
    // Accumulating 3 micro-batches: one micro-batch's activations, the same
    // gradient store, and a higher peak (the others run in backward).
    let accumulated = train(TwoCfg {
        accumulate: 3,
        ..cfg("sgd")
    });
    assert_eq!(
        accumulated.values[&Metric::Activations],
        sgd.values[&Metric::Activations]
    );
    assert_eq!(accumulated.values[&Metric::Gradients], param_bytes);
    assert!(accumulated.values[&Metric::TrainingPeak] >= sgd.values[&Metric::TrainingPeak]);
}

/// The same cases on the CUDA pool (#44 item 2; run on the GPU machine with
/// the CUDA build of this test, docs/gpu.md): the pool holds the tensors'
/// bytes and nothing else, so every figure is its closed form exactly.
#[cfg(feature = "cuda")]
mod on_cuda {
    use super::*;

    fn on_cuda(batch_size: usize) -> (RunCtx, Recorder) {
        // The probe first, as `gate check` does: candle's context is then
        // the primary one whose default pool the probe reads.
        let (probe, _) = gate_probe::cuda::CudaProbe::open(0).expect("a CUDA GPU");
        let device = gate::candle_core::Device::new_cuda(0).expect("candle opens GPU 0");
        (
            RunCtx::new(device, DType::F32, batch_size),
            Recorder::new(Arc::new(probe)),
        )
    }

    #[test]
    fn on_cuda_the_cache_is_its_closed_form_and_the_leak_grows_by_its_rows() {
        let _alone = alone();
        let per_token = (2 * 2 * 32 * 4) as f64;
        let bounded = measure_on(false, on_cuda(1));
        assert_eq!(bounded.values[&Metric::KvCachePerToken], per_token);
        assert_eq!(bounded.values[&Metric::DecodeGrowth], 0.0);
        let params = ((64 * 32 + 2 * 2 * 32 * 32) * 4) as f64;
        assert_eq!(bounded.values[&Metric::Params], params);
        let leaking = measure_on(true, on_cuda(1));
        assert_eq!(leaking.values[&Metric::DecodeGrowth], 14.0 * per_token);
        assert_eq!(
            leaking.values[&Metric::KvCachePerToken],
            (140.0 + 7.0) * per_token / 7.0
        );
    }

    #[test]
    fn on_cuda_the_teams_optimizer_state_is_its_closed_form() {
        let _alone = alone();
        let param_bytes = ((64 * 128 + 128 + 128 * 8 + 8) * 4) as f64;
        let cfg = |o: &str| TwoCfg {
            optimizer: o.into(),
            ..TwoCfg::default()
        };
        let sgd = train_on(cfg("sgd"), on_cuda(4));
        let adamw = train_on(cfg("adamw"), on_cuda(4));
        let gates = train_on(cfg(""), on_cuda(4));
        assert_eq!(sgd.values[&Metric::Optimizer], 0.0, "SGD keeps no tensors");
        assert_eq!(
            adamw.values[&Metric::Optimizer],
            2.0 * param_bytes,
            "AdamW: two moments"
        );
        assert_eq!(gates.values[&Metric::Optimizer], 2.0 * param_bytes);
        for m in [&sgd, &adamw, &gates] {
            assert_eq!(m.values[&Metric::Params], param_bytes);
            assert_eq!(m.values[&Metric::Gradients], param_bytes);
        }
        let accumulated = train_on(
            TwoCfg {
                accumulate: 3,
                ..cfg("sgd")
            },
            on_cuda(4),
        );
        assert_eq!(accumulated.values[&Metric::Gradients], param_bytes);
        assert_eq!(
            accumulated.values[&Metric::Activations],
            sgd.values[&Metric::Activations]
        );
    }
}

/// A language model through `gate::Lm` that keeps its KV cache inside, as
/// candle-transformers' mistral and phi do: each layer's keys and values
/// over every position so far, concatenated on each call. Its build also
/// makes a table that is not a parameter (a rope table's place).
#[derive(Debug, Clone, Deserialize)]
struct KeepsCfg {
    vocab_size: usize,
    d: usize,
    layers: usize,
    /// Elements of the non-parameter table its build makes.
    table: usize,
    /// Whether the cache stays full after a forward (the default `forward`
    /// of `LanguageModel`), or is emptied at its end.
    keep_cache: bool,
}

struct Keeps {
    embed: Embedding,
    kv: Vec<(Linear, Linear)>,
    head: Linear,
    _table: Tensor,
    cache: Vec<(Tensor, Tensor)>,
    keep_cache: bool,
}

impl gate::LanguageModel for Keeps {
    const KIND: &'static str = "keeps";
    type Config = KeepsCfg;
    fn vocab_size(c: &KeepsCfg) -> usize {
        c.vocab_size
    }
    fn load(vb: VarBuilder, c: &KeepsCfg, ctx: &RunCtx) -> Result<Self> {
        let kv = (0..c.layers)
            .map(|i| {
                let vb = vb.pp(format!("layer{i}"));
                Ok((
                    gate::candle_nn::linear_no_bias(c.d, c.d, vb.pp("k"))?,
                    gate::candle_nn::linear_no_bias(c.d, c.d, vb.pp("v"))?,
                ))
            })
            .collect::<Result<_>>()?;
        Ok(Keeps {
            embed: gate::candle_nn::embedding(c.vocab_size, c.d, vb.pp("embed"))?,
            kv,
            head: gate::candle_nn::linear_no_bias(c.d, c.vocab_size, vb.pp("head"))?,
            _table: Tensor::zeros(c.table.max(1), DType::F32, &ctx.device)?,
            cache: Vec::new(),
            keep_cache: c.keep_cache,
        })
    }
    fn forward(&mut self, ids: &Tensor) -> Result<Tensor> {
        self.clear_cache();
        let logits = self.forward_cached(ids, 0)?;
        if !self.keep_cache {
            self.clear_cache();
        }
        Ok(logits)
    }
    fn forward_cached(&mut self, ids: &Tensor, offset: usize) -> Result<Tensor> {
        let mut x = self.embed.forward(ids)?;
        for (i, (wk, wv)) in self.kv.iter().enumerate() {
            let (k, v) = (wk.forward(&x)?, wv.forward(&x)?);
            x = (x + (&k * &v)?)?;
            let (k, v) = match self.cache.get(i).filter(|_| offset > 0) {
                Some((ck, cv)) => (Tensor::cat(&[ck, &k], 1)?, Tensor::cat(&[cv, &v], 1)?),
                None => (k, v),
            };
            if i < self.cache.len() {
                self.cache[i] = (k, v);
            } else {
                self.cache.push((k, v));
            }
        }
        self.head.forward(&x)
    }
    fn clear_cache(&mut self) {
        self.cache = Vec::new();
    }
    fn optimizer(vars: Vec<Var>) -> Result<Option<Box<dyn OptimizerStep>>> {
        use gate::candle_nn::Optimizer;
        // The test's choice travels in a thread-local: `optimizer` has no config.
        Ok(match OPTIMIZER.with(|o| o.get()) {
            "sgd" => Some(Box::new(gate::candle_nn::SGD::new(vars, 0.01)?)),
            _ => Some(Box::new(gate::candle_nn::AdamW::new_lr(vars, 3e-4)?)),
        })
    }
}

thread_local! {
    static OPTIMIZER: std::cell::Cell<&'static str> = const { std::cell::Cell::new("adamw") };
}

const KEEPS: (usize, usize, usize) = (64, 32, 2); // vocab, d, layers
const SEQ: usize = 8;

fn keeps(table: usize, keep_cache: bool, optimizer: &'static str) -> gate::Lm<Keeps> {
    OPTIMIZER.with(|o| o.set(optimizer));
    let (vocab, d, layers) = KEEPS;
    let model = serde_json::json!({
        "vocab_size": vocab, "d": d, "layers": layers, "table": table,
        "keep_cache": keep_cache,
    });
    <gate::Lm<Keeps> as Workload>::from_config(gate::LmConfig {
        seq_len: SEQ,
        model,
        ..Default::default()
    })
    .expect("the config reads")
}

fn keeps_trained(table: usize, keep_cache: bool, optimizer: &'static str) -> gate_contract::measurement::Measurement {
    let timing = Timing {
        warmup: 0,
        steps: 2,
        pairs: Some(0),
    };
    let (ctx, rec) = on_cpu(2);
    let m = profile(&keeps(table, keep_cache, optimizer), &ctx, timing, &rec, &mut |_, _| {});
    assert!(m.failure.is_none(), "{:?}", m.failure);
    m
}

fn keeps_generating(table: usize, rows: usize) -> gate_contract::measurement::Measurement {
    let (ctx, rec) = on_cpu(rows);
    let generate = Generate { prefill: 8, decode: 8 };
    let m = profile_generation(&keeps(table, true, "adamw"), &ctx, generate, None, &rec, &mut |_, _| {});
    assert!(m.failure.is_none(), "{:?}", m.failure);
    m
}

fn a_kv_cache_the_model_keeps_is_model_state_never_the_optimizers() {
    let _alone = alone();
    let (vocab, d, layers) = KEEPS;
    let param_bytes = ((vocab * d + layers * 2 * d * d + d * vocab) * 4) as f64;
    // K and V of every layer: 2 rows × SEQ positions × d, f32.
    let cache = (layers * 2 * 2 * SEQ * d * 4) as f64;
    for optimizer in ["sgd", "adamw"] {
        let kept = keeps_trained(0, true, optimizer);
        let emptied = keeps_trained(0, false, optimizer);
        // The optimizer's state is the same to the byte whether or not the
        // forward leaves its cache full.
        assert_eq!(
            kept.values[&Metric::Optimizer],
            emptied.values[&Metric::Optimizer],
            "{optimizer}"
        );
        assert_eq!(emptied.values[&Metric::ModelState], 0.0, "{optimizer}");
        // The cache, and what of the forward's graph its keys and values
        // keep alive (their inputs): never more than the forward kept.
        let state = kept.values[&Metric::ModelState];
        assert!(
            state >= cache && state <= kept.values[&Metric::Activations],
            "{optimizer}: {state} B of model state for {cache} B of cache"
        );
    }
    // SGD keeps no state, AdamW two moments of every parameter: to the byte.
    let sgd = keeps_trained(0, true, "sgd").values[&Metric::Optimizer];
    assert_eq!(sgd, 0.0);
    let adamw = keeps_trained(0, true, "adamw").values[&Metric::Optimizer];
    assert_eq!(adamw, 2.0 * param_bytes);
}

fn a_table_the_build_makes_moves_each_peak_by_its_own_bytes_once() {
    let _alone = alone();
    // 4 KiB more of table (1024 f32 elements), the same tensors otherwise.
    let (small, large) = (1024, 2048);
    let more = ((large - small) * 4) as f64;
    // Once before measuring: what the process sets up at its first
    // profile (lazily made thread pools and buffers, whichever test of
    // this binary runs first) is no part of either figure.
    keeps_trained(small, true, "adamw");
    keeps_generating(small, 1);
    let (a, b) = (keeps_trained(small, true, "adamw"), keeps_trained(large, true, "adamw"));
    assert_eq!(
        b.values[&Metric::InferencePeak] - a.values[&Metric::InferencePeak],
        more
    );
    let (a, b) = (keeps_generating(small, 1), keeps_generating(large, 1));
    for peak in [Metric::PrefillPeak, Metric::DecodePeak] {
        assert_eq!(b.values[&peak] - a.values[&peak], more, "{peak}");
    }
}

fn a_generation_decodes_the_batchs_rows_and_its_cache_per_token_is_the_batchs() {
    let _alone = alone();
    let (_, d, layers) = KEEPS;
    // K and V rows of d f32 in every layer, for each row of the batch.
    let per_row = (layers * 2 * d * 4) as f64;
    let one = keeps_generating(0, 1);
    let two = keeps_generating(0, 2);
    assert_eq!(one.values[&Metric::KvCachePerToken], per_row);
    assert_eq!(two.values[&Metric::KvCachePerToken], 2.0 * per_row);
}

/// The CPU's probe with a card's `hold`: it holds up to `room` bytes and
/// refuses more, as cuMemAlloc does on an emulated card.
struct Holding {
    room: u64,
    held: std::sync::atomic::AtomicU64,
}

impl gate_probe::MemoryProbe for Holding {
    fn backend(&self) -> &'static str {
        CpuProbe.backend()
    }
    fn live(&self) -> u64 {
        CpuProbe.live()
    }
    fn peak(&self) -> u64 {
        CpuProbe.peak()
    }
    fn reset_peak(&self) {
        CpuProbe.reset_peak()
    }
    fn tags_blocks(&self) -> bool {
        CpuProbe.tags_blocks()
    }
    fn hold(&self, bytes: u64) -> Option<std::result::Result<(), gate_probe::BackendError>> {
        if bytes > self.room {
            return Some(Err(gate_probe::BackendError::new("out of memory (cuMemAlloc)")));
        }
        self.held.store(bytes, std::sync::atomic::Ordering::Relaxed);
        Some(Ok(()))
    }
    fn release(&self) {
        self.held.store(0, std::sync::atomic::Ordering::Relaxed);
    }
}

/// On an emulated card `kv_capacity_tokens` is checked by one decode with
/// the cache's memory held one token short of the figure (#50 item 6): the
/// held bytes are the figure's arithmetic, the step runs, and a card that
/// cannot hold them says so with the figure unconfirmed.
fn the_serving_capacity_is_checked_by_one_decode_at_that_size() {
    let _alone = alone();
    let w = Cached(Cfg {
        vocab: 64,
        d: 32,
        layers: 2,
        leak: false,
    });
    let generate = Generate { prefill: 16, decode: 8 };
    let card = gate_runner::phases::Card {
        capacity: 8 << 20,
        reserve: 1 << 20,
    };
    let run = |room: u64| {
        let probe = Arc::new(Holding {
            room,
            held: Default::default(),
        });
        let rec = Recorder::new(probe.clone());
        let m = profile_generation(&w, &RunCtx::cpu(1), generate, Some(card), &rec, &mut |_, _| {});
        assert!(m.failure.is_none(), "{:?}", m.failure);
        assert_eq!(probe.held.load(std::sync::atomic::Ordering::Relaxed), 0, "released");
        m
    };
    let m = run(u64::MAX);
    let check = m.kv_capacity_check.clone().expect("checked on the card");
    // The figure's arithmetic: the cached tokens, and as many more as the
    // room above the reserve and the higher peak takes at 512 B a token.
    let per_token = m.values[&Metric::KvCachePerToken];
    assert_eq!(per_token, 512.0);
    let peak = m.values[&Metric::PrefillPeak].max(m.values[&Metric::DecodePeak]);
    let tokens = 24.0 + ((card.capacity - card.reserve) as f64 - peak) / per_token;
    assert_eq!(check.tokens, tokens.floor());
    assert_eq!(check.held_bytes, ((check.tokens - 24.0 - 1.0) * per_token) as u64);
    assert!(check.fits && check.reason.is_none(), "{check:?}");
    // A card with less room than the figure promises: said, and its own
    // answer found by halving what is held: the room's tokens beside the
    // generation's own cache (24 tokens, one more for each decode that ran
    // in the search).
    let room = check.held_bytes / 2;
    let m = run(room);
    let short = m.kv_capacity_check.expect("checked on the card");
    assert!(!short.fits, "{short:?}");
    assert!(
        short.reason.as_deref().unwrap_or("").contains("out of memory"),
        "{short:?}"
    );
    let beside = short.card_tokens.expect("the card's own answer") - (room / 512) as f64;
    assert!((25.0..=24.0 + 40.0).contains(&beside), "{short:?}");
    // Without a card to check on (the CPU's probe holds nothing): no check.
    let (ctx, rec) = on_cpu(1);
    let m = profile_generation(&w, &ctx, generate, Some(card), &rec, &mut |_, _| {});
    assert!(m.kv_capacity_check.is_none());
}

/// Every case above, in one test: the counting allocator counts the whole
/// process, and libtest's own thread allocates as each test ends (its
/// result, its captured output) while the next one measures. One test
/// leaves that thread waiting, so each figure is the model's alone.
#[test]
fn every_team_step_one_at_a_time() {
    a_cache_that_grows_by_its_rows_is_its_closed_form_and_one_that_keeps_its_copies_grows();
    the_teams_optimizer_is_what_optimizer_measures_and_its_clipping_and_accumulation_run();
    a_kv_cache_the_model_keeps_is_model_state_never_the_optimizers();
    a_table_the_build_makes_moves_each_peak_by_its_own_bytes_once();
    a_generation_decodes_the_batchs_rows_and_its_cache_per_token_is_the_batchs();
    the_serving_capacity_is_checked_by_one_decode_at_that_size();
}
