//! GitHub Actions workflow commands: one `::error file=SPEC,line=N::`
//! annotation per failing budget at that budget's line, and one
//! `::warning::` per warning (`::error::` under `--strict`). Pure: report in,
//! text out; escaped by the workflow-command rules so a name can never start
//! a command of its own.
//!
//! GitHub keeps only the first 10 annotations of each type (error, warning,
//! notice) that a step prints, and drops the rest without a word (the
//! "Limitations" section of GitHub's problem-matcher document,
//! <https://github.com/actions/toolkit/blob/main/docs/problem-matchers.md#limitations>:
//! "10 warning annotations, 10 error annotations, and 10 notice annotations
//! per step"). So the most important come first (failures, then
//! regressions, then warnings), and a type with more than 10 shows 9 and,
//! as its 10th, how many were left out and where they all are.

use std::fmt::Write;

use gate_contract::report::{Report, Status};

use super::failure_message;

/// Annotations of one type GitHub shows per step (see the module docs).
pub const PER_TYPE: usize = 10;

/// Escapes a command's message: `%`, `\r`, `\n`.
pub fn escape_data(s: &str) -> String {
    s.replace('%', "%25").replace('\r', "%0D").replace('\n', "%0A")
}

/// Escapes a property value: as data, plus `:` and `,`.
pub fn escape_property(s: &str) -> String {
    escape_data(s).replace(':', "%3A").replace(',', "%2C")
}

/// What an annotation says, before its type is chosen.
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Failure,
    Regression,
    Warning,
}

pub fn render(report: &Report) -> String {
    let file = escape_property(&report.spec);
    let mut items: Vec<(Kind, String)> = Vec::new();
    // Failures before regressions before accepted regressions (which stay
    // visible, as warnings at their line); within each, the spec's order.
    for (kind, status) in [
        (Kind::Failure, Status::Fail),
        (Kind::Regression, Status::Regressed),
        (Kind::Warning, Status::Acknowledged),
    ] {
        for r in report.results.iter().filter(|r| r.status == status) {
            let note = match (r.status, &report.summary.acknowledgement) {
                (Status::Acknowledged, Some(a)) => format!(" ({})", super::acknowledged_by(a)),
                _ => String::new(),
            };
            let title = format!("gate: {}.{} {}", r.component, r.metric, r.status.name());
            let text = format!(
                "file={file},line={},title={}::{}",
                r.line,
                escape_property(&title),
                escape_data(&format!("{}.{}: {}{note}", r.component, r.metric, failure_message(r)))
            );
            items.push((kind, text));
        }
    }
    for w in &report.summary.warnings {
        items.push((Kind::Warning, format!("title=gate::{}", escape_data(w.as_str()))));
    }
    let warning_type = if report.summary.strict { "error" } else { "warning" };
    let type_of = |k: &Kind| match k {
        Kind::Failure | Kind::Regression => "error",
        Kind::Warning => warning_type,
    };
    let mut out = String::new();
    for ty in ["error", "warning"] {
        let of_type: Vec<&(Kind, String)> = items.iter().filter(|(k, _)| type_of(k) == ty).collect();
        let shown = if of_type.len() > PER_TYPE {
            PER_TYPE - 1
        } else {
            of_type.len()
        };
        for (_, text) in &of_type[..shown] {
            let _ = writeln!(out, "::{ty} {text}");
        }
        let left: Vec<Kind> = of_type[shown..].iter().map(|(k, _)| *k).collect();
        if !left.is_empty() {
            let title = format!("gate: {} more {ty}s", left.len());
            let _ = writeln!(
                out,
                "::{ty} title={}::{}",
                escape_property(&title),
                escape_data(&left_out(ty, of_type.len(), &left))
            );
        }
    }
    out
}

/// `3 more (2 failures, 1 regression) of 12 errors not shown: ...`
fn left_out(ty: &str, total: usize, left: &[Kind]) -> String {
    let count = |want: Kind, one: &str, many: &str| {
        let n = left.iter().filter(|k| **k == want).count();
        (n > 0).then(|| format!("{n} {}", if n == 1 { one } else { many }))
    };
    let parts: Vec<String> = [
        count(Kind::Failure, "failure", "failures"),
        count(Kind::Regression, "regression", "regressions"),
        count(Kind::Warning, "warning", "warnings"),
    ]
    .into_iter()
    .flatten()
    .collect();
    format!(
        "{} more ({}) of {total} {ty}s not shown: GitHub shows {PER_TYPE} {ty} annotations per step. \
         See this job's step summary, or report.json for every result",
        left.len(),
        parts.join(", ")
    )
}
