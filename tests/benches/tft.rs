//! CPU baseline for the TFT at the original configuration (batch 32, f32):
//! milliseconds per training step (forward, backward, AdamW) and per
//! no-grad inference forward, median of a few runs after one warm-up.
//!   cargo bench --bench tft            (TFT_BENCH_RUNS=N to change the count)

use std::time::Instant;

use gate::candle_core::{DType, Device};
use gate::candle_nn::optim::{AdamW, Optimizer, ParamsAdamW};
use gate::{ParamStore, RunCtx, Step, Workload};
use gate_builtins::tft::config::TftConfig;
use gate_builtins::tft::Tft;
use gate_contract::timing::median;

fn main() -> gate::candle_core::Result<()> {
    let runs: usize = std::env::var("TFT_BENCH_RUNS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5)
        .max(1);
    let tft = Tft::new(TftConfig::default());
    let ctx = RunCtx::new(Device::Cpu, DType::F32, 32).with_seed(42);
    let store = ParamStore::new(ctx.seed);
    let model = tft.build(store.builder(ctx.dtype, &ctx.device), &ctx)?;
    let batch = tft.batch(&ctx, 1)?;
    let mut opt = AdamW::new(store.vars(), ParamsAdamW::default())?;
    let mut train_ms = Vec::new();
    for i in 0..=runs {
        let t = Instant::now();
        let loss = model.loss(&batch, &Step::train(i as u64))?;
        opt.backward_step(&loss)?;
        drop(loss);
        if i > 0 {
            train_ms.push(t.elapsed().as_secs_f64() * 1e3);
        }
    }
    drop(opt);
    let infer = tft.build(store.detached(ctx.dtype, &ctx.device), &ctx)?;
    let mut infer_ms = Vec::new();
    for i in 0..=runs {
        let t = Instant::now();
        drop(infer.predict(&batch)?);
        if i > 0 {
            infer_ms.push(t.elapsed().as_secs_f64() * 1e3);
        }
    }
    let threads = std::env::var("RAYON_NUM_THREADS").unwrap_or_else(|_| "all cores".into());
    println!("TFT, original config (hidden 64, Ve 251, T 60+5, batch 32, f32), CPU, threads: {threads}");
    println!("{:<22} {:>12} {:>12} {:>12}", "", "median ms", "min ms", "max ms");
    for (name, xs) in [("training step", &train_ms), ("inference forward", &infer_ms)] {
        let min = xs.iter().copied().fold(f64::INFINITY, f64::min);
        let max = xs.iter().copied().fold(0.0, f64::max);
        println!("{name:<22} {:>12.1} {min:>12.1} {max:>12.1}", median(xs));
    }
    Ok(())
}
