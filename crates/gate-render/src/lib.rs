//! Renderers: report → text. They never decide pass or fail; they show the
//! statuses the verdict gave.
//!
//! No ML framework is in this crate's dependency tree. Internal to gate:
//! its API may change in any release.

pub mod annotations;
pub mod checks;
pub mod junit;
pub mod markdown;
pub mod table;
pub mod timeline;
pub mod view;

use gate_contract::report::{Acknowledgement, BudgetResult, RunStatus, Status, Summary};
use gate_spec::metric::{format_in, Unit};

/// The headline's strict suffix: ` (strict)`, and when only `--strict`
/// failed the run, what it failed on, so the reader need not guess. In
/// gate's own words only: a warning's text may be the model's (a parameter
/// or block name it chose), so the headline counts the warnings and the
/// lines below it list them, escaped (#54).
pub fn strict_suffix(s: &Summary) -> String {
    if !s.strict {
        return String::new();
    }
    if s.status == RunStatus::Pass || s.failed + s.regressed > 0 {
        return " (strict)".into();
    }
    let mut reasons: Vec<String> = Vec::new();
    match s.warnings.len() {
        0 => {}
        1 => reasons.push("1 warning".into()),
        n => reasons.push(format!("{n} warnings")),
    }
    if s.not_measured > 0 {
        reasons.push(format!("{} budget(s) not measured", s.not_measured));
    }
    if reasons.is_empty() {
        return " (strict)".into();
    }
    format!(" (strict: failed on {})", reasons.join("; "))
}

/// The headline's counts: `9 of 10 budgets pass, 1 fail, 0 regressed, 0
/// not measured`, then what was not compared, and the strict suffix.
pub fn counts(report: &gate_contract::report::Report) -> String {
    let s = &report.summary;
    let mut text = format!(
        "{} of {} budgets pass, {} fail, {} regressed, {} not measured",
        s.passed,
        report.results.len(),
        s.failed,
        s.regressed,
        s.not_measured
    );
    if s.acknowledged > 0 {
        text.push_str(&format!(", {} acknowledged", s.acknowledged));
    }
    if s.inconclusive > 0 {
        text.push_str(&format!(", {} inconclusive", s.inconclusive));
    }
    if s.not_compared > 0 {
        text.push_str(&format!(", {} not compared (settings changed)", s.not_compared));
    }
    text + &strict_suffix(s)
}

/// `< 300 MB` — the limit as written in the spec.
pub fn limit_text(r: &BudgetResult) -> String {
    r.limit_text(r.op, r.limit)
}

/// The baseline's limit when this run changed it.
pub fn baseline_limit_text(r: &BudgetResult) -> Option<String> {
    r.budget_changed()
        .then(|| r.limit_text(r.baseline_op.unwrap_or(r.op), r.baseline_limit.unwrap_or(r.limit)))
}

/// A figure of `r` (measured, baseline) in the unit its limit was written in.
pub fn value_text(r: &BudgetResult, v: f64) -> String {
    format_in(r.unit, r.display_unit, v)
}

/// The measured value, or `—`; a timed median with its 95 % interval:
/// `1.48 (1.41–1.56)`.
pub fn measured_text(r: &BudgetResult) -> String {
    let Some(v) = r.measured else {
        return "—".to_string();
    };
    match &r.interval {
        Some(i) => format!(
            "{} ({}–{})",
            value_text(r, v),
            value_text(r, i.low),
            value_text(r, i.high)
        ),
        None => value_text(r, v),
    }
}

/// A signed change of `r`'s figures (`+1.250 MB`, `-3.0 ms`).
pub fn delta_value_text(r: &BudgetResult, d: f64) -> String {
    let sign = if d < 0.0 { "-" } else { "+" };
    match r.unit {
        Unit::Ms => format!("{d:+.1} ms"),
        _ => format!("{sign}{}", value_text(r, d.abs())),
    }
}

/// How much of the budget is used, for upper bounds on sizes and times (`93.4%`).
pub fn percent_of_budget(r: &BudgetResult) -> Option<f64> {
    match (r.ratio(), r.unit) {
        (Some(x), Unit::Bytes | Unit::Ms) if r.op.is_max() => Some(x * 100.0),
        _ => None,
    }
}

/// The distance to the limit on the passing side, negative when over it:
/// `limit − measured` for an upper bound, `measured − limit` for a lower one.
pub fn headroom(r: &BudgetResult) -> Option<f64> {
    let m = r.measured?;
    Some(if r.op.is_max() { r.limit - m } else { m - r.limit })
}

/// [`headroom`] as text: `12.40 MB`; `-2.400 GB over` an upper bound,
/// `-228.0 MiB short` of a lower one.
pub fn headroom_text(r: &BudgetResult) -> Option<String> {
    let h = headroom(r)?;
    Some(if h < 0.0 {
        let side = if r.op.is_max() { "over" } else { "short" };
        format!("{} {side}", delta_value_text(r, h))
    } else {
        value_text(r, h)
    })
}

/// `acknowledged by @user via `gate:accept-regression` at 2026-…`, raw
/// (each renderer escapes for its format).
pub fn acknowledged_by(a: &Acknowledgement) -> String {
    format!("acknowledged by @{} via `{}` at {}", a.by, a.label, a.at)
}

/// A row's drift since the spec's anchor, as every renderer words it:
/// `+8.0 % since anchor v1.4.0 (300.0 MB), drift at most 6%`. `None`
/// for a row with no drift judged.
pub fn drift_text(r: &BudgetResult) -> Option<String> {
    let d = r.drift.as_ref()?;
    let since = match r.measured.and_then(|v| d.percent(v)) {
        Some(p) => format!("{p:+.1} %"),
        None => "—".into(),
    };
    Some(format!(
        "{since} since anchor {} ({}), drift at most {}%",
        d.anchor,
        value_text(r, d.anchor_value),
        gate_spec::units::trim_float(d.max_percent)
    ))
}

/// Whether the verdict found the row past its drift since the anchor (a
/// fact it recorded; read, not judged).
pub fn drifted(r: &BudgetResult) -> bool {
    r.drift.as_ref().is_some_and(|d| d.exceeded)
}

/// A failing budget's one-line message, e.g. `2952.0 MiB > 200.0 MiB budget (14.8x)`.
pub fn failure_message(r: &BudgetResult) -> String {
    match r.measured {
        Some(v) if matches!(r.status, Status::Regressed | Status::Acknowledged) && drifted(r) => {
            format!("{} grew {}", value_text(r, v), drift_text(r).unwrap_or_default())
        }
        Some(v) if matches!(r.status, Status::Regressed | Status::Acknowledged) => format!(
            "{} grew from {} (baseline) by more than the {}% tolerance",
            value_text(r, v),
            r.baseline.map_or_else(|| "—".into(), |b| value_text(r, b)),
            gate_spec::units::trim_float(r.tolerance_percent)
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
                (Some(x), Unit::Bytes | Unit::Ms) if r.limit > 0.0 && x > 0.0 => format!(" ({})", factor_text(x)),
                _ => String::new(),
            };
            format!(
                "{} {negated} {} budget{factor}",
                value_text(r, v),
                r.limit_value_text(r.limit)
            )
        }
        None => r.reason.clone().unwrap_or_else(|| "not measured".into()),
    }
}

/// A figure against its limit as a factor: one decimal, more (up to four)
/// where one would round a figure over or under its limit to `1.0x`.
fn factor_text(x: f64) -> String {
    let decimals = (1..=4)
        .find(|&d| format!("{x:.d$}") != format!("{:.d$}", 1.0) || x == 1.0)
        .unwrap_or(4);
    format!("{x:.decimals$}x")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A figure just over its limit never reads as exactly its limit.
    #[test]
    fn a_factor_near_one_keeps_the_digits_that_show_which_side_it_is() {
        assert_eq!(factor_text(5.597 / 5.58), "1.003x");
        assert_eq!(factor_text(0.9996), "0.9996x");
        assert_eq!(factor_text(1.0), "1.0x");
        assert_eq!(factor_text(2.04), "2.0x");
        assert_eq!(factor_text(31.26), "31.3x");
    }

    fn summary(status: &str, strict: bool, warnings: &[&str], not_measured: usize) -> Summary {
        Summary {
            status: if status == "pass" {
                RunStatus::Pass
            } else {
                RunStatus::Fail
            },
            not_compared: 0,
            budget_changes: vec![],
            passed: 10,
            failed: 0,
            regressed: 0,
            not_measured,
            inconclusive: 0,
            warnings: warnings
                .iter()
                .map(|w| gate_contract::report::Warning::run_wide(gate_contract::report::WarningKind::Other, *w))
                .collect(),
            strict,
            acknowledged: 0,
            acknowledgement: None,
            notes: vec![],
        }
    }

    /// The note of a run whose tensors were not in the CUDA pool reaches
    /// every output: the terminal, JUnit and the PR comment.
    #[test]
    fn the_memory_source_note_is_in_every_output() {
        let note = "`tft`: tensor bytes not from the CUDA pool on fw 0.9.2: figures are NVML per process";
        let mut s = summary("pass", false, &[], 0);
        s.notes = vec![gate_contract::report::Note::new(
            vec!["tft".into()],
            gate_contract::report::NoteKind::NotFromPool,
            note,
        )];
        let r = gate_contract::report::Report {
            schema: 1,
            gate_version: "0".into(),
            commit: None,
            spec: "budgets.yaml".into(),
            testbed: gate_contract::report::Testbed::default(),
            components: Default::default(),
            ensemble: None,
            results: vec![],
            summary: s,
            baseline: None,
            wall_seconds: 0.0,
            plans: Default::default(),
        };
        assert!(table::render(&r, false).contains(note), "{}", table::render(&r, false));
        let junit = junit::render(&r, time::OffsetDateTime::UNIX_EPOCH).unwrap();
        assert!(junit.contains(&format!("note: {note}")), "{junit}");
        let md = markdown::render(&r, None, 60_000);
        assert!(md.contains(&markdown::escape(note)), "{md}");
    }

    #[test]
    fn strict_names_what_it_failed_on() {
        assert_eq!(strict_suffix(&summary("pass", false, &["w"], 0)), "");
        assert_eq!(strict_suffix(&summary("pass", true, &[], 0)), " (strict)");
        assert_eq!(
            strict_suffix(&summary("fail", true, &["baseline testbed differs"], 1)),
            " (strict: failed on 1 warning; 1 budget(s) not measured)"
        );
        // A warning's text is the model's to choose: never in the headline.
        assert_eq!(
            strict_suffix(&summary("fail", true, &["<img src=x>\n@team", "b"], 0)),
            " (strict: failed on 2 warnings)"
        );
    }
}
