//! The top of the comment, built for review: the verdict, what the run was
//! compared with, budget changes made in this PR, the one next step, and
//! the budgets with what needs a decision first.

use std::fmt::Write;

use super::escape;
use super::escape::{code, escape_max};
use super::sections::baseline_phrase;
use super::Links;
use crate::view::{self, Rank, Row};
use gate_contract::report::{Note, NoteKind, Report, Status};
use gate_spec::units::Bytes;

/// At most this many warnings are listed one by one.
const MAX_WARNINGS: usize = 30;
/// With more rows than this, passing rows that did not change are folded.
const FOLD_AFTER: usize = 8;

pub(super) fn verdict_line(report: &Report) -> String {
    let (icon, word) = if report.summary.pass_unconfirmed() {
        ("⚠️", "NOT CONFIRMED")
    } else if report.summary.passed_run() {
        ("✅", "PASS")
    } else {
        ("❌", "FAIL")
    };
    format!("### {icon} gate: {word} — {}\n", crate::counts(report))
}

/// The verdict, the context line, the budget changes, the warnings and the notes.
pub(super) fn head(report: &Report, links: &Links) -> String {
    let mut out = verdict_line(report);
    out.push('\n');
    let run = links
        .run
        .as_deref()
        .map(|u| format!(" · [the run]({u})"))
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "{} on {} gating {} ({}); {}{run}\n",
        escape(&report.spec),
        escape(&format!("{} ({})", report.testbed.backend, report.testbed.device_name)),
        escape(&report.testbed.gated_device),
        Bytes(report.testbed.capacity_bytes),
        baseline_phrase(report)
    );
    let changes = &report.summary.budget_changes;
    let changed = match changes.len() {
        1 => "A budget changed".to_string(),
        n => format!("{n} budgets changed"),
    };
    callout(
        &mut out,
        &format!("[!IMPORTANT]\n> **{changed} in this PR** — review that the gate is not loosened unseen:"),
        changes.iter().map(|c| c.text.as_str()),
    );
    let warned = match report.summary.strict {
        true => "warnings fail the gate under `--strict`:",
        false => "warnings:",
    };
    callout(
        &mut out,
        &format!("[!WARNING]\n> {warned}"),
        report.summary.warnings.iter().map(|w| w.as_str()),
    );
    // How a figure was measured, when not the usual way: facts, never failures.
    let (tighter, notes): (Vec<&Note>, Vec<&Note>) = report
        .summary
        .notes
        .iter()
        .partition(|n| n.kind == NoteKind::TighterBudget);
    callout(
        &mut out,
        "[!NOTE]\n> how some figures were measured:",
        notes.iter().map(|n| n.text.as_str()),
    );
    // Proposals, decided by nobody here: the team tightens the spec or not.
    callout(
        &mut out,
        "[!TIP]\n> budgets with room to tighten:",
        tighter.iter().map(|n| n.text.as_str()),
    );
    out
}

/// A GitHub alert (`> [!KIND]` and its title) listing `lines`, at most
/// [`MAX_WARNINGS`] of them and a count of the rest; nothing when there
/// are none.
fn callout<'a>(out: &mut String, title: &str, lines: impl ExactSizeIterator<Item = &'a str>) {
    let n = lines.len();
    if n == 0 {
        return;
    }
    let _ = writeln!(out, "> {title}");
    for line in lines.take(MAX_WARNINGS) {
        let _ = writeln!(out, "> - {}", escape_max(line, 300));
    }
    if n > MAX_WARNINGS {
        let _ = writeln!(out, "> - … and {} more", n - MAX_WARNINGS);
    }
    out.push('\n');
}

/// On failure, one next step: the first failing budget, its block (the one
/// that grew most, else the largest) and the lever that helps it.
pub(super) fn next_step(report: &Report) -> String {
    let Some(step) = view::next_step(report) else {
        return String::new();
    };
    let what = view::what_words(&step, code, |t| escape_max(t, 200));
    let block = view::block_words(report, &step, code)
        .map(|w| format!(" {w}"))
        .unwrap_or_default();
    let lever = view::lever_words(report, &step, code);
    let mut out = format!("**Next step:** {what}.{block} {lever}\n\n");
    for name in report.plans.keys() {
        out.push_str(&plan_section(report, name));
    }
    out
}

/// A component's measured fix: one line, and the candidates the plan
/// measured, predicted against measured, in a collapsed table.
fn plan_section(report: &Report, name: &str) -> String {
    let Some(fix) = view::fix_words(report, name, code) else {
        return String::new();
    };
    let plan = &report.plans[name];
    let mut out = format!("**{fix}**\n\n");
    let measured: Vec<_> = plan.candidates.iter().filter(|k| k.outcome.is_measured()).collect();
    if measured.is_empty() {
        return out;
    }
    let _ = write!(
        out,
        "<details><summary>The plan for {}: {} probes, {} candidates measured, predicted against measured</summary>\n\n\
         | configuration | figure | predicted | measured | error | outcome |\n|---|---|--:|--:|--:|---|\n",
        code(name),
        plan.probes.len(),
        measured.len()
    );
    for k in measured {
        let settings: Vec<String> = k.settings.iter().map(|s| code(&s.yaml())).collect();
        let outcome = match k.outcome {
            gate_contract::plan::Outcome::Pass => "passes".to_string(),
            gate_contract::plan::Outcome::Fail => format!(
                "fails {}",
                k.fails.iter().map(|m| m.name()).collect::<Vec<_>>().join(", ")
            ),
            _ => "profile failed".to_string(),
        };
        for (i, (m, f)) in k.figures.iter().enumerate() {
            let first = i == 0;
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} |",
                if first { settings.join(", ") } else { String::new() },
                m.name(),
                view::plan_figure_text(report, name, *m, f.predicted),
                f.measured
                    .map_or("—".into(), |v| view::plan_figure_text(report, name, *m, v)),
                f.error().map_or(String::new(), |e| format!("{:+.1} %", e * 100.0)),
                if first { outcome.as_str() } else { "" }
            );
        }
    }
    out.push_str("\n</details>\n\n");
    out
}

const HEADER: &str = "| budget | limit | baseline | current | Δ | Δ % | used | headroom | status |\n\
                      |---|--:|--:|--:|--:|--:|--:|--:|---|\n";

/// The budgets' rows in review order; unchanged passing rows go in a
/// folded table when there are many. Returns (text before the fold, the
/// folded part) so the caller can trim rows to the comment's limit.
pub(super) fn table_rows(report: &Report, links: &Links) -> (Vec<String>, Vec<String>) {
    let rows = view::rows(report);
    let unchanged = rows.iter().filter(|r| r.rank == Rank::Unchanged).count();
    let fold = rows.len() > FOLD_AFTER && unchanged >= 2;
    let (mut open, mut folded) = (Vec::new(), Vec::new());
    for r in &rows {
        let line = row_line(report, r, links);
        if fold && r.rank == Rank::Unchanged {
            folded.push(line);
        } else {
            open.push(line);
        }
    }
    (open, folded)
}

pub(super) fn header() -> &'static str {
    HEADER
}

/// The summary line of the folded rows.
pub(super) fn fold_summary(report: &Report, n: usize) -> String {
    let unchanged = if report.baseline.as_ref().is_some_and(|b| b.comparable) {
        ", unchanged"
    } else {
        ""
    };
    format!("<details><summary>{n} passing budgets{unchanged}</summary>\n\n")
}

fn row_line(report: &Report, r: &Row, links: &Links) -> String {
    let res = r.result;
    let name = escape(&r.name());
    let budget = match links.spec_line(&report.spec, res.line) {
        Some(url) => format!("[{name}]({url})"),
        None => name,
    };
    let limit = match &r.was_limit {
        Some(was) => format!("{}<br><sub>was {}</sub>", escape(&r.limit), escape(was)),
        None => escape(&r.limit),
    };
    let current = r
        .measured
        .clone()
        .unwrap_or_else(|| res.reason.as_deref().map_or("—".into(), |x| escape_max(x, 120)));
    let (d, pct) = r.delta.clone().unwrap_or_else(|| ("—".into(), "—".into()));
    let used = r.percent_of_budget.map_or_else(|| "—".into(), |p| format!("{p:.1}%"));
    let headroom = r.headroom.clone().unwrap_or_else(|| "—".into());
    format!(
        "| {budget} | {limit} | {} | {current} | {d} | {pct} | {used} | {headroom} | {} |\n",
        r.baseline.as_deref().unwrap_or("—"),
        status_cell(report, r)
    )
}

fn status_cell(report: &Report, r: &Row) -> String {
    let res = r.result;
    let mut cell = match res.status {
        Status::Pass if r.improved => "✅ pass, improved".to_string(),
        Status::Pass => "✅ pass".into(),
        Status::Fail => "❌ **fail**".into(),
        Status::Regressed if crate::drifted(res) => format!(
            "📈 **regressed** (> {}% since {})",
            gate_spec::units::trim_float(res.drift.as_ref().map_or(0.0, |d| d.max_percent)),
            code(res.drift.as_ref().map_or("", |d| d.anchor.as_str()))
        ),
        Status::Regressed => format!(
            "📈 **regressed** (> {}%)",
            gate_spec::units::trim_float(res.tolerance_percent)
        ),
        Status::NotMeasured => "⚪ not measured".into(),
        Status::Acknowledged => match &report.summary.acknowledgement {
            Some(a) => format!(
                "📈 regressed, acknowledged by {} via {} at {}",
                escape(&format!("@{}", a.by)),
                code(&a.label),
                escape(&a.at)
            ),
            // `gate comment` could not confirm who added the label.
            None => "📈 regressed, acknowledged (not confirmed)".into(),
        },
        Status::Inconclusive => "🟡 inconclusive".into(),
    };
    if let Some(why) = &res.not_compared {
        let _ = write!(cell, "<br><sub>⚠️ not compared: {}</sub>", escape_max(why, 200));
    }
    if let Some(why) = &res.config_changed {
        let _ = write!(cell, "<br><sub>⚙️ {}</sub>", escape_max(why, 200));
    }
    if res.untrained {
        let _ = write!(
            cell,
            "<br><sub>⚠️ measures a step that does not train the whole model</sub>"
        );
    }
    cell
}
