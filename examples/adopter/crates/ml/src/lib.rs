//! The team's models. One of them, a GRU forecaster, is gated on its memory
//! through `gate`'s SDK: [`GruForecaster`] is its workload.

mod forecaster;

pub use forecaster::{ForecasterConfig, GruForecaster};
