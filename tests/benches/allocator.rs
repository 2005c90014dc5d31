//! The counting allocator's cost on a training step: the same steps run
//! with counting on and off (interleaved, median of each), for the MLP and
//! a small TFT. Goal: ≤ 5 % wall time. Run: `cargo bench --bench allocator`.
//!
//! A global allocator is fixed at compile time, so this bench installs a
//! switch that forwards to gate's `CountingAlloc` or to the system
//! allocator; both sides pay the same predictable branch, so the difference
//! is the counting itself.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::Instant;

use gate::candle_core::{DType, Device};
use gate::candle_nn::optim::{AdamW, Optimizer, ParamsAdamW};
use gate::test_support::DynWorkload;
use gate::{CountingAlloc, ParamStore, RunCtx, Step};
use gate_builtins::tft::config::TftConfig;
use gate_builtins::{Mlp, Tft};

static COUNTING: AtomicBool = AtomicBool::new(true);

struct Switch;

// SAFETY: forwards every call unchanged to one of two valid allocators; a
// block is always freed by the allocator family that made it (both end in System).
unsafe impl GlobalAlloc for Switch {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        if COUNTING.load(Relaxed) {
            // SAFETY: the caller's arguments, passed on unchanged (see the impl).
            unsafe { CountingAlloc.alloc(l) }
        } else {
            // SAFETY: the caller's arguments, passed on unchanged (see the impl).
            unsafe { System.alloc(l) }
        }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        if COUNTING.load(Relaxed) {
            // SAFETY: the caller's arguments, passed on unchanged (see the impl).
            unsafe { CountingAlloc.dealloc(p, l) }
        } else {
            // SAFETY: the caller's arguments, passed on unchanged (see the impl).
            unsafe { System.dealloc(p, l) }
        }
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        if COUNTING.load(Relaxed) {
            // SAFETY: the caller's arguments, passed on unchanged (see the impl).
            unsafe { CountingAlloc.alloc_zeroed(l) }
        } else {
            // SAFETY: the caller's arguments, passed on unchanged (see the impl).
            unsafe { System.alloc_zeroed(l) }
        }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        if COUNTING.load(Relaxed) {
            // SAFETY: the caller's arguments, passed on unchanged (see the impl).
            unsafe { CountingAlloc.realloc(p, l, n) }
        } else {
            // SAFETY: the caller's arguments, passed on unchanged (see the impl).
            unsafe { System.realloc(p, l, n) }
        }
    }
}

#[global_allocator]
static A: Switch = Switch;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn bench(name: &str, w: &dyn DynWorkload, batch: usize, rounds: usize) {
    let ctx = RunCtx::new(Device::Cpu, DType::F32, batch).with_seed(1);
    let store = ParamStore::new(1);
    let model = w.build(store.builder(ctx.dtype, &ctx.device), &ctx).expect("build");
    let data = w.batch(&ctx, 2).expect("batch");
    let mut opt = AdamW::new(store.vars(), ParamsAdamW::default()).expect("optimizer");
    let mut step = |seed: u64| {
        let loss = model.loss(&data, &Step::train(seed)).expect("loss");
        let grads = loss.backward().expect("backward");
        opt.step(&grads).expect("step");
    };
    step(0); // warm-up
    let (mut on, mut off) = (Vec::new(), Vec::new());
    for r in 0..rounds {
        for counting in [true, false] {
            COUNTING.store(counting, Relaxed);
            let t = Instant::now();
            step(r as u64);
            let ms = t.elapsed().as_secs_f64() * 1e3;
            if counting {
                on.push(ms)
            } else {
                off.push(ms)
            }
        }
    }
    COUNTING.store(true, Relaxed);
    let (a, b) = (median(on), median(off));
    println!("{name:<28} {b:>10.2} {a:>12.2} {:>+9.1}%", (a / b - 1.0) * 100.0);
}

fn main() {
    // Single-threaded kernels, as in `gate check`.
    std::env::set_var("RAYON_NUM_THREADS", "1");
    println!(
        "{:<28} {:>10} {:>12} {:>10}",
        "training step (median ms)", "system", "counting", "overhead"
    );
    bench(
        "mlp 1024x3, batch 256",
        &Mlp {
            input_dim: 256,
            hidden_dim: 1024,
            hidden_layers: 3,
            output_dim: 3,
        },
        256,
        15,
    );
    bench(
        "tft hidden 16, 40 vars",
        &Tft::new(TftConfig {
            input_dim: 45,
            hidden_dim: 16,
            num_heads: 2,
            num_layers: 1,
            sequence_length: 24,
            prediction_horizon: 4,
            num_quantiles: 3,
            num_static_features: 2,
            num_known_features: 3,
            num_unknown_features: 40,
            dropout: 0.1,
            prescale_dim: 16,
        }),
        16,
        9,
    );
    // The configuration of the report in the README's "Why" (docs/models.md §1), at its batch of 32.
    bench("tft original config, batch 32", &Tft::new(TftConfig::default()), 32, 3);
}
