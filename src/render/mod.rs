//! Renderers: report → text. They never decide pass or fail; they show the
//! statuses the verdict gave.

pub mod annotations;
pub mod junit;
pub mod markdown;
pub mod table;

use crate::metric::{format_value, Unit};
use crate::report::BudgetResult;

/// `< 200.0 MiB` — the limit as written for people.
pub fn limit_text(r: &BudgetResult) -> String {
    format!("{} {}", r.op, format_value(r.unit, r.limit))
}

/// The measured value, or `—`.
pub fn measured_text(r: &BudgetResult) -> String {
    r.measured.map_or_else(|| "—".to_string(), |v| format_value(r.unit, v))
}

/// A failing budget's one-line message, e.g. `2952.0 MiB > 200.0 MiB budget (14.8x)`.
pub fn failure_message(r: &BudgetResult) -> String {
    match r.measured {
        Some(v) if r.status == crate::report::Status::Regressed => format!(
            "{} grew from {} (baseline) by more than the {}% tolerance",
            format_value(r.unit, v),
            r.baseline.map_or_else(|| "—".into(), |b| format_value(r.unit, b)),
            crate::units::trim_float(r.tolerance_percent)
        ),
        Some(v) => {
            let negated = if v == r.limit {
                "="
            } else if v > r.limit {
                ">"
            } else {
                "<"
            };
            let factor = match (r.ratio(), r.unit) {
                (Some(x), Unit::Bytes | Unit::Ms) if r.limit > 0.0 && x > 0.0 => format!(" ({x:.1}x)"),
                _ => String::new(),
            };
            format!(
                "{} {negated} {} budget{factor}",
                format_value(r.unit, v),
                format_value(r.unit, r.limit)
            )
        }
        None => r.reason.clone().unwrap_or_else(|| "not measured".into()),
    }
}
