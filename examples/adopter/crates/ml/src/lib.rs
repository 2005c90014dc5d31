//! The team's models, gated on their memory through `gate`'s SDK: a GRU
//! forecaster ([`GruForecaster`]) and a small decoder-only transformer
//! language model ([`TinyGpt`]), each a workload.

mod forecaster;
mod transformer;

pub use forecaster::{ForecasterConfig, GruForecaster};
pub use transformer::{GptConfig, TinyGpt};
