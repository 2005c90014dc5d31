//! The runner: profiles components (each in its own child process) and
//! returns their measurements. The protocol, the pool and the measurement
//! types are gate-runner's; the phases, the trainer and the fault
//! injection run here, over candle's tensors.

mod fault;
// gate's tests' resolve step (a harness resolves in gate-runner's `harness`).
#[cfg(feature = "test-support")]
mod resolve;
pub(crate) mod trainer;

#[cfg(any(test, feature = "test-support"))]
use crate::sdk::{DynWorkload, RunCtx};
#[cfg(any(test, feature = "test-support"))]
use gate_contract::measurement::{Measurement, Phase};
#[cfg(any(test, feature = "test-support"))]
use gate_probe::Recorder;
#[cfg(any(test, feature = "test-support"))]
use gate_runner::phases::Timing;

/// The candle the models run on (the `candle-0-*` feature; the 0.11 figure
/// is checked against Cargo.lock by a test), recorded in each testbed.
#[cfg(feature = "candle-0-11")]
pub(crate) const CANDLE_VERSION: &str = "0.11.1";
#[cfg(all(feature = "candle-0-10", not(feature = "candle-0-11")))]
pub(crate) const CANDLE_VERSION: &str = "0.10";
#[cfg(all(feature = "candle-0-9", not(any(feature = "candle-0-10", feature = "candle-0-11"))))]
pub(crate) const CANDLE_VERSION: &str = "0.9";

#[cfg(feature = "test-support")]
pub use resolve::{load, parse, parse_bytes, resolve, Workloads};

/// Profiles `workload` in `ctx` (gate-runner's phases over candle); a
/// harness profiles through `crate::child`, gate's own tests here.
#[cfg(any(test, feature = "test-support"))]
pub fn profile(
    workload: &dyn DynWorkload,
    ctx: &RunCtx,
    timing: Timing,
    recorder: &Recorder,
    on_phase: &mut dyn FnMut(Phase, &Measurement),
) -> Measurement {
    let session = trainer::CandleSession {
        workload,
        ctx: ctx.clone(),
    };
    gate_runner::phases::profile(&session, None, timing, recorder, on_phase)
}

/// Profiles a generation component of `workload` in `ctx` (gate-runner's
/// `profile_generation` over candle): no training.
#[cfg(any(test, feature = "test-support"))]
pub fn profile_generation(
    workload: &dyn DynWorkload,
    ctx: &RunCtx,
    generate: gate_spec::budget::Generate,
    card: Option<gate_runner::phases::Card>,
    recorder: &Recorder,
    on_phase: &mut dyn FnMut(Phase, &Measurement),
) -> Measurement {
    let session = trainer::CandleSession {
        workload,
        ctx: ctx.clone(),
    };
    gate_runner::phases::profile_generation(&session, generate, card, recorder, on_phase)
}

#[cfg(test)]
mod coverage_tests {
    //! Gradient coverage: which parameters a training step trains.
    use std::sync::Arc;

    use candle_core::{Result, Tensor, D};
    use candle_nn::{Module, VarBuilder};
    use serde::{Deserialize, Serialize};

    use crate::sdk::{Batch, Model, ParamCount, Problems, RunCtx, Step, Workload};
    use gate_probe::{CpuProbe, Recorder};

    #[derive(Debug, Default, Clone, Serialize, Deserialize)]
    struct Cfg {
        frozen: Vec<String>,
    }

    /// `w1` → candle-nn's fused `rms_norm` (no backward) → `w2`.
    #[derive(Debug)]
    struct Normed(Cfg);

    struct Net {
        w1: candle_nn::Linear,
        alpha: Tensor,
        w2: candle_nn::Linear,
    }

    impl Net {
        fn forward(&self, x: &Tensor) -> Result<Tensor> {
            let h = self.w1.forward(x)?;
            let h = candle_nn::ops::rms_norm(&h, &self.alpha, 1e-5)?;
            self.w2.forward(&h)
        }
    }

    impl Model for Net {
        fn loss(&self, batch: &Batch, _step: &Step) -> Result<Tensor> {
            self.forward(&batch.tensors[0])?.sqr()?.mean_all()
        }
        fn predict(&self, batch: &Batch) -> Result<Tensor> {
            self.forward(&batch.tensors[0])
        }
    }

    impl Workload for Normed {
        const KIND: &'static str = "normed";
        type Config = Cfg;
        fn from_config(c: Cfg) -> std::result::Result<Self, Problems> {
            Ok(Normed(c))
        }
        fn config(&self) -> &Cfg {
            &self.0
        }
        fn param_count(&self) -> ParamCount {
            ParamCount::new(4 * 4 + 4 + 4 + 4 + 1, 0)
        }
        fn build(&self, vb: VarBuilder, _ctx: &RunCtx) -> Result<Box<dyn Model>> {
            Ok(Box::new(Net {
                w1: candle_nn::linear(4, 4, vb.pp("w1"))?,
                alpha: vb.get_with_hints(4, "norm.alpha", candle_nn::Init::Const(1.0))?,
                w2: candle_nn::linear(4, 1, vb.pp("w2"))?,
            }))
        }
        fn batch(&self, ctx: &RunCtx, _seed: u64) -> Result<Batch> {
            let x = Tensor::arange(0f32, (ctx.batch_size * 4) as f32, &ctx.device)?.reshape((ctx.batch_size, 4))?;
            Ok(Batch::new(vec![
                x.broadcast_div(&x.sum_keepdim(D::Minus1)?.affine(1.0, 1.0)?)?
            ]))
        }
        fn frozen_parameters(&self) -> Vec<String> {
            self.0.frozen.clone()
        }
    }

    fn measure(frozen: &[&str]) -> gate_contract::measurement::Measurement {
        let w = Normed(Cfg {
            frozen: frozen.iter().map(|s| s.to_string()).collect(),
        });
        let timing = super::Timing {
            warmup: 0,
            steps: 2,
            pairs: Some(0),
        };
        let rec = Recorder::new(Arc::new(CpuProbe));
        super::profile(&w, &RunCtx::cpu(2), timing, &rec, &mut |_, _| {})
    }

    #[test]
    fn parameters_behind_a_no_backward_op_are_found_with_their_names_and_bytes() {
        let m = measure(&[]);
        assert!(m.failure.is_none(), "{:?}", m.failure);
        let c = m.gradient_coverage.expect("the candle adapter tells");
        assert_eq!((c.tensors, c.bytes), (5, 29 * 4));
        assert_eq!((c.without_gradient, c.without_gradient_bytes), (3, 24 * 4));
        assert_eq!(c.missing, ["w1.weight", "w1.bias", "norm.alpha"]);
        assert_eq!(c.frozen, 0);
        // The warning's hint names candle's own way to declare a frozen parameter.
        assert_eq!(c.declare_frozen.as_deref(), Some("`Workload::frozen_parameters`"));
        // `gradients` is the gradient store: w2's weight and bias, in f32.
        assert_eq!(m.values[&gate_spec::metric::Metric::Gradients], 5.0 * 4.0);
    }

    #[test]
    fn parameters_frozen_on_purpose_are_neither_trained_nor_flagged() {
        let m = measure(&["w1.", "norm.alpha"]);
        assert!(m.failure.is_none(), "{:?}", m.failure);
        let c = m.gradient_coverage.unwrap();
        assert_eq!((c.tensors, c.without_gradient, c.frozen), (2, 0, 3));
        assert!(c.is_complete());
    }

    #[test]
    fn a_frozen_name_the_model_does_not_have_fails_the_build_naming_what_it_has() {
        let m = measure(&["w3."]);
        let f = m.failure.expect("the build fails");
        assert_eq!(f.phase, gate_contract::measurement::Phase::Build);
        assert!(
            f.reason
                .contains("frozen_parameters names a parameter that the built model does not have: w3.")
                && f.reason.contains("w1.weight, w1.bias, norm.alpha, w2.weight, w2.bias"),
            "{}",
            f.reason
        );
    }
}

#[cfg(test)]
mod tests {
    /// The stock `gate` names the candle-core its built-ins are locked to in
    /// this repository's Cargo.lock (the requirement is `^0.11.0`, so that a
    /// git revision can be patched in; docs/sdk.md). A harness's exact
    /// version comes from its own build's resolve (cli/harness.rs).
    #[cfg(feature = "candle-0-11")]
    #[test]
    fn candle_version_is_the_one_cargo_lock_holds() {
        let lock = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../Cargo.lock");
        // A crate unpacked from its package has no lockfile to hold it to.
        let Ok(text) = std::fs::read_to_string(&lock) else {
            return;
        };
        let entry = format!("name = \"candle-core\"\nversion = \"{}\"", super::CANDLE_VERSION);
        assert!(text.contains(&entry), "{entry} in {}", lock.display());
    }
}
