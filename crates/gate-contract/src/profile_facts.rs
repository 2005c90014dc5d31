//! The facts a profile measures that report.json keeps as the harness sent
//! them: declared once, here, and written into both
//! [`Measurement`](crate::measurement::Measurement) (the harness protocol's
//! `profile` line) and [`ComponentReport`](crate::report::ComponentReport)
//! (report.json), each with its name, type, documentation and serde
//! attributes.
//!
//! Why a declaration and not a struct both embed with `#[serde(flatten)]`:
//! both wires are flat and versioned (protocol 3, report.json schema 1), and
//! a flattened struct is read through serde's `deserialize_map`, where the
//! schema tracer ([`crate::schema`]) can no longer see the reading type's
//! fields. So the two types carry the same fields, and one place declares
//! them: a field added here is in both, written and read alike, and copied
//! by `ComponentReport::copy_profile_facts`.
//!
//! The serde attributes are each field's widest of the two types' before
//! they shared it: a field report.json left out when empty is left out of
//! the protocol's line too (every reader of it has a default).

/// Calls `$then! { [$($input)*] FIELD, FIELD, ... }` with every profile
/// fact: its attributes (documentation, serde), its name, its type.
macro_rules! profile_facts {
    ($then:ident! { $($input:tt)* }) => {
        $then! {
            [$($input)*]
            /// Closed-form parameter (and frozen-state) elements × dtype
            /// size, to check `params` against.
            analytic_params_bytes: u64,
            /// Parameter tensors the built model holds (0: the adapter does
            /// not say): each adds the framework's bookkeeping to `params`
            /// beyond the closed form's bytes.
            #[serde(default)]
            param_tensors: u64,
            /// Bytes of the synthetic batch (kept on the device during the
            /// whole profile).
            batch_bytes: u64,
            /// The gradient store straight after `backward()`, before only
            /// the parameters' gradients are kept (the difference is the
            /// framework's extra gradients for untracked operands).
            #[serde(default)]
            unpruned_gradient_bytes: u64,
            /// CUDA runs: process memory outside the tensor allocator (the
            /// context, kernels, workspaces), measured.
            context_reserve_bytes: Option<u64>,
            /// CUDA runs: the pool's high-water reservation from the device.
            pool_reserved_peak_bytes: Option<u64>,
            /// Capacity emulation: bytes held back so the run saw only the
            /// spec's card.
            emulated_block_bytes: Option<u64>,
            /// Why the warm-up step failed (the profile then ran cold), if
            /// it did.
            warmup_error: Option<String>,
            /// Each timed training step's wall time, in order.
            step_times_ms: Vec<f64>,
            /// Loss after each training step, in order.
            losses: Vec<f64>,
            /// The profile's wall time (the child process, start to exit),
            /// in seconds; set by the parent (absent in reports from before
            /// it was recorded).
            #[serde(default, skip_serializing_if = "Option::is_none")]
            profile_seconds: Option<f64>,
            /// Of `profile_seconds`, the time the profile waited for its
            /// turn to time its steps while another one timed theirs
            /// (profiles side by side on one GPU take turns; CPU profiles
            /// do not): not work, and no part of what a run one profile at
            /// a time would take.
            #[serde(default, skip_serializing_if = "crate::profile_facts::is_zero_seconds")]
            turn_wait_seconds: f64,
            /// Live bytes over the steady training step and the first
            /// inference call, sampled at every scope boundary and phase
            /// mark (the SVG `timeline-NAME.svg` draws it); absent when
            /// nothing was sampled. Each sample is a string `"T_US LIVE PEAK
            /// EVENT"`: microseconds since its span started, live bytes above
            /// `base_bytes`, the highest live bytes since the previous
            /// sample, and `phase:NAME`, `enter:BLOCK`, `exit:BLOCK` or `end`.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            timeline: Option<gate_probe::Timeline>,
            /// A variant with a `step_time_ratio` budget: its step time over
            /// its reference's, one per interleaved pair of steps (variant,
            /// reference) timed in one process after the byte profiles. Its
            /// `step_time_ratio` is their median, judged with its interval.
            #[serde(default, skip_serializing_if = "Vec::is_empty")]
            step_time_ratios: Vec<f64>,
            /// Why the interleaved pairs could not be timed (the ratio then
            /// comes from the two profiles' medians, without an interval;
            /// the byte figures stand).
            #[serde(default, skip_serializing_if = "Option::is_none")]
            ratio_error: Option<String>,
            /// Capacity emulation: the bytes freed for the ratio steps (they
            /// measure time and loss; every byte figure is from the emulated
            /// card).
            #[serde(default, skip_serializing_if = "Option::is_none")]
            ratio_lifted_bytes: Option<u64>,
            /// The blocks the model checkpointed in its training steps, as
            /// the SDK saw them run (not as its config says), each by scope,
            /// whole or in chunks.
            #[serde(default, skip_serializing_if = "Vec::is_empty")]
            checkpointed: Vec<crate::measurement::CheckpointedBlock>,
            /// Where the byte figures come from: the probe's exact counter,
            /// or NVML per process when the framework's tensors were not in
            /// the CUDA pool. report.json writes it only when it is not the
            /// exact counter.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            memory_source: Option<gate_probe::MemorySource>,
            /// Which trainable parameters the first backward gave a gradient
            /// (absent: the adapter cannot tell).
            #[serde(default, skip_serializing_if = "Option::is_none")]
            gradient_coverage: Option<crate::measurement::GradientCoverage>,
            /// The live bytes the backward left above the pre-forward level
            /// once pruned (the gradient store plus the framework's
            /// bookkeeping of it), where `gradients` is the gradient
            /// tensors' own bytes as the adapter counted them.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            gradient_live_bytes: Option<u64>,
            /// A generation on an emulated card (`--emulate-capacity`): one
            /// decode step run with the cache's memory held at
            /// `kv_capacity_tokens` (see
            /// [`CapacityCheck`](crate::measurement::CapacityCheck)).
            #[serde(default, skip_serializing_if = "Option::is_none")]
            kv_capacity_check: Option<crate::measurement::CapacityCheck>,
            /// The live bytes the build left (the parameters' tensors plus
            /// the framework's bookkeeping of them), where `params` is the
            /// record's tensor bytes as the adapter counted them; absent
            /// where `params` is these live bytes.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            param_live_bytes: Option<u64>,
            /// The names of the `tracing` spans the model entered (gate's
            /// blocks come from those it attributes).
            #[serde(default, skip_serializing_if = "Vec::is_empty")]
            spans_entered: Vec<String>,
            /// Why the model's spans could not be attributed in this harness
            /// (TRACE compiled out, another subscriber set): a reason and a
            /// hint.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            spans_unavailable: Option<String>,
        }
    };
}

/// A struct with its own fields, then every profile fact
/// ([`profile_facts!`]); with `copied_from SOURCE`, also
/// `copy_profile_facts(&mut self, &SOURCE)`.
macro_rules! struct_with_profile_facts {
    (
        [$(#[$meta:meta])* pub struct $name:ident { $($own:tt)* } copied_from $source:ident]
        $($(#[$fact_meta:meta])* $fact:ident: $ty:ty,)*
    ) => {
        struct_with_profile_facts! {
            [$(#[$meta])* pub struct $name { $($own)* }]
            $($(#[$fact_meta])* $fact: $ty,)*
        }
        impl $name {
            /// Takes every profile fact of `from` as it is (declared once,
            /// in `profile_facts`).
            pub fn copy_profile_facts(&mut self, from: &$source) {
                $(self.$fact = Clone::clone(&from.$fact);)*
            }
        }
    };
    (
        [$(#[$meta:meta])* pub struct $name:ident { $($own:tt)* }]
        $($(#[$fact_meta:meta])* $fact:ident: $ty:ty,)*
    ) => {
        $(#[$meta])*
        pub struct $name {
            $($own)*
            $($(#[$fact_meta])* pub $fact: $ty,)*
        }
    };
}

pub(crate) fn is_zero_seconds(s: &f64) -> bool {
    *s == 0.0
}

/// The names of the profile facts, in their order (for tests).
#[cfg(all(test, feature = "files"))]
macro_rules! profile_fact_names {
    ([] $($(#[$fact_meta:meta])* $fact:ident: $ty:ty,)*) => {
        &[$(stringify!($fact)),*]
    };
}

#[cfg(all(test, feature = "files"))]
mod tests {
    use crate::measurement::Measurement;
    use crate::report::ComponentReport;

    const NAMES: &[&str] = profile_facts!(profile_fact_names! {});

    /// Every profile fact reaches report.json through the copy, under its
    /// name: a measurement whose every fact is set is written with each.
    #[test]
    fn every_fact_is_copied_into_the_component_and_written() {
        let mut m = serde_json::to_value(Measurement::default()).unwrap();
        let facts = serde_json::json!({
            "analytic_params_bytes": 7, "param_tensors": 2, "batch_bytes": 3,
            "unpruned_gradient_bytes": 4,
            "context_reserve_bytes": 5, "pool_reserved_peak_bytes": 6,
            "emulated_block_bytes": 8, "warmup_error": "w",
            "step_times_ms": [1.5], "losses": [0.5],
            "profile_seconds": 2.5, "turn_wait_seconds": 0.25,
            "timeline": { "source": "cpu", "base_bytes": 0, "samples": ["0 0 0 end"], "peak": null },
            "step_time_ratios": [1.1], "ratio_error": "r", "ratio_lifted_bytes": 9,
            "checkpointed": [{ "block": "b" }], "memory_source": "nvml_process",
            "gradient_coverage": { "tensors": 1, "bytes": 4, "without_gradient": 0, "without_gradient_bytes": 0 },
            "gradient_live_bytes": 10,
            "kv_capacity_check": { "tokens": 1.0, "held_bytes": 1, "fits": true },
            "param_live_bytes": 11, "spans_entered": ["s"], "spans_unavailable": "u"
        });
        m.as_object_mut().unwrap().extend(facts.as_object().unwrap().clone());
        let m: Measurement = serde_json::from_value(m).unwrap();
        let mut c = ComponentReport::default();
        c.copy_profile_facts(&m);
        let written = serde_json::to_value(&c).unwrap();
        let from = serde_json::to_value(&m).unwrap();
        assert_eq!(NAMES.len(), 24);
        for name in NAMES {
            assert!(!from[name].is_null(), "{name} not set in the test's measurement");
            assert_eq!(written[name], from[name], "{name}");
        }
    }
}
