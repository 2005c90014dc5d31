//! This crate's harness: budgets.yaml names it under `harness:`, and the
//! installed `gate check` builds and runs it.

gate::main!(tft_team::TemporalFusionTransformer);
