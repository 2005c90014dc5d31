//! Budgets that can never be measured: refused at validate time, so
//! `check` does not warn and exit 0 on a gate that never gated anything.

use super::yaml::Pos;
use super::Spec;
use crate::metric::Metric;

/// Position, message and hint of each budget in `spec` no run can measure.
pub(super) fn unmeasurable(spec: &Spec) -> Vec<(Pos, String, String)> {
    let mut out = Vec::new();
    for c in &spec.components {
        // A ratio compares a variant with its reference; a component with
        // neither a reference nor variants has nothing to compare with.
        let has_variants = spec
            .components
            .iter()
            .any(|o| o.reference.as_deref() == Some(c.name.as_str()));
        if c.reference.is_some() || has_variants {
            continue;
        }
        for b in c
            .budgets
            .iter()
            .filter(|b| matches!(b.metric, Metric::LossRatio | Metric::StepTimeRatio))
        {
            out.push((
                Pos { line: b.line, col: 1 },
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
