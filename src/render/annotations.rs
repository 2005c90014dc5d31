//! GitHub Actions workflow commands: one `::error file=SPEC,line=N::`
//! annotation per failing budget at that budget's line, and one
//! `::warning::` per warning (`::error::` under `--strict`). Pure: report in,
//! text out; escaped by the workflow-command rules so a name can never start
//! a command of its own.

use std::fmt::Write;

use crate::report::{Report, Status};

use super::failure_message;

/// Escapes a command's message: `%`, `\r`, `\n`.
pub fn escape_data(s: &str) -> String {
    s.replace('%', "%25").replace('\r', "%0D").replace('\n', "%0A")
}

/// Escapes a property value: as data, plus `:` and `,`.
pub fn escape_property(s: &str) -> String {
    escape_data(s).replace(':', "%3A").replace(',', "%2C")
}

pub fn render(report: &Report) -> String {
    let mut out = String::new();
    let file = escape_property(&report.spec);
    for r in &report.results {
        let (level, note) = match (r.status, &report.summary.acknowledgement) {
            (Status::Fail | Status::Regressed, _) => ("error", String::new()),
            // An accepted regression stays visible, as a warning at its line.
            (Status::Acknowledged, Some(a)) => ("warning", format!(" ({})", super::acknowledged_by(a))),
            (Status::Acknowledged, None) => ("warning", String::new()),
            _ => continue,
        };
        let title = format!("gate: {}.{} {}", r.component, r.metric, r.status.name());
        let _ = writeln!(
            out,
            "::{level} file={file},line={},title={}::{}",
            r.line,
            escape_property(&title),
            escape_data(&format!("{}.{}: {}{note}", r.component, r.metric, failure_message(r)))
        );
    }
    let level = if report.summary.strict { "error" } else { "warning" };
    for w in &report.summary.warnings {
        let _ = writeln!(out, "::{level} title=gate::{}", escape_data(w));
    }
    out
}
