//! The adopter example's transformer (examples/adopter/crates/ml), built
//! inside this crate as a whole `gate` binary: with `--features cuda` it
//! shares the CUDA build of `gate` itself, so the checkpointed transformer
//! can be measured on a GPU machine that has no cargo (docs/gpu.md).
//!
//! `cargo run --release --example lm_harness -- check --budgets <spec>`

// The adopter's public API, a private module here.
#[path = "adopter/crates/ml/src/transformer.rs"]
#[allow(unreachable_pub)]
mod transformer;

gate::main!(transformer::TinyGpt);
