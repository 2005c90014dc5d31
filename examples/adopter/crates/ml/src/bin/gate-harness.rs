//! This crate's harness: the workloads below. budgets.yaml
//! and lm.yaml name this binary under `harness:`, so the installed
//! `gate check` builds and runs it.

gate::main!(ml::GruForecaster, ml::TinyGpt);
