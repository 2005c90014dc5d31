//! Renderers: report → text. They never decide pass or fail; they show the
//! statuses the verdict gave.

pub mod annotations;
pub mod junit;
pub mod markdown;
pub mod table;

use crate::metric::{format_value, Unit};
use crate::report::{BudgetResult, Summary};

/// The headline's strict suffix: ` (strict)`, and when only `--strict`
/// failed the run, what it failed on, so the reader need not guess.
pub fn strict_suffix(s: &Summary) -> String {
    if !s.strict {
        return String::new();
    }
    if s.status == "pass" || s.failed + s.regressed > 0 {
        return " (strict)".into();
    }
    let mut reasons: Vec<String> = s.warnings.clone();
    if s.not_measured > 0 {
        reasons.push(format!("{} budget(s) not measured", s.not_measured));
    }
    if reasons.is_empty() {
        return " (strict)".into();
    }
    format!(" (strict: failed on {})", reasons.join("; "))
}

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

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(status: &str, strict: bool, warnings: &[&str], not_measured: usize) -> Summary {
        Summary {
            status: status.into(),
            passed: 10,
            failed: 0,
            regressed: 0,
            not_measured,
            warnings: warnings.iter().map(|w| w.to_string()).collect(),
            strict,
        }
    }

    #[test]
    fn strict_names_what_it_failed_on() {
        assert_eq!(strict_suffix(&summary("pass", false, &["w"], 0)), "");
        assert_eq!(strict_suffix(&summary("pass", true, &[], 0)), " (strict)");
        assert_eq!(
            strict_suffix(&summary("fail", true, &["baseline testbed differs"], 1)),
            " (strict: failed on baseline testbed differs; 1 budget(s) not measured)"
        );
    }
}
