//! gate: a declarative GPU-memory regression gate for ML models written with candle.

pub mod budget;
pub mod cli;
pub mod exit;
pub mod github;
pub mod metric;
pub mod probe;
pub mod render;
pub mod report;
pub mod runner;
pub mod units;
pub mod workload;
