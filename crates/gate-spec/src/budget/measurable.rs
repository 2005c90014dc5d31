//! Budgets that can never be measured: refused at validate time, so
//! `check` does not warn and exit 0 on a gate that never gated anything.
//! Those only a CUDA run measures are refused where the backend is known
//! to be the CPU (see [`cuda_only`]).

use std::collections::HashSet;

use super::{Diagnostic, Diagnostics, Spec};
use crate::config::Pos;
use crate::metric::Metric;

/// Position, message and hint of each budget in `spec` no run can measure.
pub(super) fn unmeasurable(spec: &Spec) -> Vec<(Pos, String, String)> {
    let mut out = Vec::new();
    // Every name some variant refers to, found once: asking each component
    // "has anyone a reference to me?" by a scan was quadratic (#28 item 12).
    let referenced: HashSet<&str> = spec
        .components
        .iter()
        .inspect(|_| looked())
        .filter_map(|o| o.reference.as_deref())
        .collect();
    for c in &spec.components {
        looked();
        // A ratio compares a variant with its reference; a component with
        // neither a reference nor variants has nothing to compare with.
        if c.reference.is_some() || referenced.contains(c.name.as_str()) {
            continue;
        }
        for b in c
            .budgets
            .iter()
            .filter(|b| matches!(b.metric, Metric::LossRatio | Metric::StepTimeRatio))
        {
            out.push((
                Pos {
                    line: b.line,
                    col: b.col,
                },
                format!(
                    "`{}` on component `{}` can never be measured: it has no variants to compare with",
                    b.metric.name(),
                    c.name
                ),
                format!(
                    "add `variants:` to `{}` and put the ratio budget on a variant, or budget `{}` directly",
                    c.name,
                    if b.metric == Metric::LossRatio {
                        "loss"
                    } else {
                        "step_time"
                    }
                ),
            ));
        }
    }
    out
}

/// The budgets of the components `selected` picks that only a CUDA run can
/// measure: `device_used` is read from the device itself. `on_cpu`: the run
/// is known to be on the CPU, so each is an error; otherwise the backend is
/// not known yet and each is a warning (see [`Diagnostic::warning`]).
pub fn cuda_only(spec: &Spec, selected: &dyn Fn(&str) -> bool, on_cpu: bool) -> Diagnostics {
    let mut out = Vec::new();
    for c in spec.components.iter().filter(|c| selected(&c.name)) {
        for b in c.budgets.iter().filter(|b| b.metric == Metric::DeviceUsed) {
            let (message, hint) = if on_cpu {
                (
                    format!(
                        "`device_used` on component `{}` can never be measured on the CPU: it is read from the CUDA device",
                        c.name
                    ),
                    "run on a GPU (`--backend cuda`), or budget `training_peak`, which every backend measures",
                )
            } else {
                (
                    format!(
                        "`device_used` on component `{}` is measured on CUDA only: a run on the CPU refuses this spec",
                        c.name
                    ),
                    "pass `--backend cuda` (or `--backend cpu`) to check the spec for the backend that will run it",
                )
            };
            out.push(Diagnostic {
                file: spec.path.display().to_string(),
                pos: Pos {
                    line: b.line,
                    col: b.col,
                },
                message,
                hint: hint.into(),
            });
        }
    }
    // An ensemble that sums `device_used` has no total (nor headroom) on the CPU.
    if let Some(e) = spec
        .ensemble
        .as_ref()
        .filter(|e| e.metric == Metric::DeviceUsed && !e.budgets.is_empty() && e.members.iter().any(|m| selected(m)))
    {
        let (message, hint) = if on_cpu {
            (
                "`ensemble.metric: device_used` can never be measured on the CPU: it is read from the CUDA device",
                "run on a GPU (`--backend cuda`), or sum `training_peak`, which every backend measures",
            )
        } else {
            (
                "`ensemble.metric: device_used` is measured on CUDA only: a run on the CPU refuses this spec",
                "pass `--backend cuda` (or `--backend cpu`) to check the spec for the backend that will run it",
            )
        };
        out.push(Diagnostic {
            file: spec.path.display().to_string(),
            pos: e.metric_pos,
            message: message.into(),
            hint: hint.into(),
        });
    }
    Diagnostics::all(out)
}

/// Counts each look at a component in [`unmeasurable`], so a test can hold
/// it linear without timing anything.
#[cfg(all(test, feature = "yaml"))]
fn looked() {
    tests::LOOKS.with(|n| n.set(n.get() + 1));
}
#[cfg(not(all(test, feature = "yaml")))]
fn looked() {}

#[cfg(all(test, feature = "yaml"))]
mod tests {
    use std::cell::Cell;
    use std::path::Path;

    thread_local! {
        pub(super) static LOOKS: Cell<usize> = const { Cell::new(0) };
    }

    /// `n` components, each with one variant.
    fn spec(n: usize) -> super::Spec {
        let mut s =
            String::from("version: 1\ndevice: { name: card, capacity: 4 GiB, reserve: 300 MiB }\ncomponents:\n");
        for i in 0..n {
            s.push_str(&format!(
                "  m{i}:\n    workload: mlp\n    variants:\n      half: {{ batch_size: 8 }}\n    budgets:\n      params: < 1 MiB\n"
            ));
        }
        crate::budget::parse(Path::new("budgets.yaml"), &s).unwrap()
    }

    /// Each component is looked at a fixed number of times, whatever their
    /// number: asking every component about every other one was quadratic
    /// (50,000 components took 22 s in `gate validate`, #28 item 12).
    #[test]
    fn unmeasurable_looks_at_each_component_a_fixed_number_of_times() {
        for n in [10, 1_000, 4_000] {
            let spec = spec(n);
            let components = spec.components.len();
            assert_eq!(components, 2 * n, "each component and its variant");
            LOOKS.with(|l| l.set(0));
            assert!(super::unmeasurable(&spec).is_empty());
            let looks = LOOKS.with(|l| l.get());
            assert_eq!(looks, 2 * components, "{n} components: {looks} looks");
        }
    }
}
