//! Mermaid charts: one chart of % of budget per budget with the 100 % line,
//! and for a failing component the blocks that keep its memory.
//!
//! `xychart-beta` (Mermaid ≥ 10.5, which GitHub renders). Bars of one series
//! share one colour, so the figure that matters is also in each label.

use std::fmt::Write;

use super::escape::mermaid_text;
use crate::view::{self, Row};
use gate_contract::report::{ComponentReport, Report};

/// Bars are cut at this % so one 1,500 % figure does not flatten the rest;
/// the label keeps the real figure.
const AXIS_CAP: f64 = 200.0;
/// More bars than this are drawn horizontally, so the labels stay readable.
const HORIZONTAL_AFTER: usize = 6;

/// Strong colours (GitHub's blue for bars, red for the budget line): the
/// default palette's first colours are pale on a white page.
const FRONTMATTER: &str =
    "---\nconfig:\n  themeVariables:\n    xyChart:\n      plotColorPalette: \"#0969da, #cf222e\"\n---\n";

/// `text` as a quoted Mermaid string, cleaned by [`mermaid_text`].
fn quoted(text: &str) -> String {
    format!("\"{}\"", mermaid_text(text))
}

/// % of budget used by every upper-bound size or time budget that was measured.
pub(super) fn budget_chart(report: &Report) -> String {
    let rows: Vec<Row> = view::rows(report)
        .into_iter()
        .filter(|r| r.percent_of_budget.is_some())
        .collect();
    if rows.is_empty() {
        return String::new();
    }
    let labels: Vec<String> = rows
        .iter()
        .map(|r| {
            format!(
                "\"{} {:.0}%\"",
                mermaid_text(&r.name()),
                r.percent_of_budget.unwrap_or(0.0)
            )
        })
        .collect();
    let bars: Vec<String> = rows
        .iter()
        .map(|r| format!("{:.1}", r.percent_of_budget.unwrap_or(0.0).min(AXIS_CAP)))
        .collect();
    let top = rows
        .iter()
        .filter_map(|r| r.percent_of_budget)
        .fold(100.0f64, f64::max)
        .min(AXIS_CAP);
    let y_max = ((top * 1.1) / 10.0).ceil() * 10.0;
    let mut out = String::new();
    let _ =
        write!(
        out,
        "```mermaid\n{FRONTMATTER}xychart-beta{}\n    title \"% of budget used (the line is the budget, 100%)\"\n    \
         x-axis [{}]\n    y-axis \"% of budget\" 0 --> {y_max}\n    bar [{}]\n",
        if rows.len() > HORIZONTAL_AFTER { " horizontal" } else { "" },
        labels.join(", "),
        bars.join(", ")
    );
    // One point is no line: with a single bar the axis and title carry the 100 %.
    if rows.len() > 1 {
        let _ = writeln!(out, "    line [{}]", vec!["100"; rows.len()].join(", "));
    }
    out.push_str("```\n");
    out
}

/// A failing component's top blocks by bytes kept for backward, with the
/// `(unattributed)` rest; none when fewer than two blocks were scoped.
pub(super) fn blocks_chart(report: &Report, name: &str, c: &ComponentReport) -> String {
    use gate_spec::units::SizeUnit;
    let top = view::top_blocks(c, super::TOP_BLOCKS);
    if top.iter().filter(|b| b.name != view::UNATTRIBUTED).count() < 2 {
        return String::new();
    }
    let max = top.iter().map(|b| b.retained_bytes.max(0)).max().unwrap_or(0) as f64;
    // A block (most often `(unattributed)`, when a model's blocks overlap or
    // its graph was cut) can hold less than nothing: drawn below zero, never as 0.
    let min = top.iter().map(|b| b.retained_bytes.min(0)).min().unwrap_or(0) as f64;
    // The unit of the component's budgets, as the table beside it; else MiB
    // (KiB for a small model).
    let unit = view::size_unit(report, name).unwrap_or(if max < gate_spec::units::MIB as f64 {
        SizeUnit::KiB
    } else {
        SizeUnit::MiB
    });
    let (unit, scale) = (unit.name(), unit.scale() as f64);
    let size = |b: i64| b as f64 / scale;
    let labels: Vec<String> = top
        .iter()
        .map(|b| format!("\"{} {:.1}\"", mermaid_text(&b.name), size(b.retained_bytes)))
        .collect();
    let bars: Vec<String> = top.iter().map(|b| format!("{:.2}", size(b.retained_bytes))).collect();
    let y_max = format!("{:.2}", (max / scale * 1.1).max(0.01));
    let y_min = if min < 0.0 {
        format!("{:.2}", min / scale * 1.1)
    } else {
        "0".into()
    };
    format!(
        "```mermaid\n{FRONTMATTER}xychart-beta horizontal\n    title \"{}: activation memory kept for backward, {unit}\"\n    \
         x-axis [{}]\n    y-axis \"{unit}\" {y_min} --> {y_max}\n    bar [{}]\n```\n",
        mermaid_text(name),
        labels.join(", "),
        bars.join(", ")
    )
}

/// A failing component's memory timeline, compact (at most 40 points, the
/// peak kept), and the sentence naming the full SVG in the run's artifact.
pub(super) fn timeline_chart(name: &str, c: &ComponentReport, run: Option<&str>) -> String {
    use crate::timeline;
    let Some(t) = &c.timeline else {
        return String::new();
    };
    let points = timeline::compact(t, 40);
    let Some(max) = points.iter().map(|p| p.bytes).max().filter(|_| points.len() > 1) else {
        return String::new();
    };
    let (unit, scale) = timeline::unit_for(max);
    // Quoted and cleaned like every other text put into Mermaid: a label is
    // its phase's initial, and a phase may start with `]`, `"` or a backtick
    // (#28 item 18).
    let labels: Vec<String> = points.iter().map(|p| quoted(&p.label)).collect();
    let values: Vec<String> = points
        .iter()
        .map(|p| format!("{:.2}", p.bytes as f64 / scale))
        .collect();
    let mut phases: Vec<String> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for (p, _, _) in t.phases() {
        let key = format!("{} {}", p.chars().next().unwrap_or('x'), super::escape(&p));
        if seen.insert(key.clone()) {
            phases.push(key);
        }
    }
    let peak = timeline::peak_text(t)
        .map(|(a, b)| format!(" P{}, {b}.", a.trim_start_matches('p')))
        .unwrap_or_default();
    // Wider, with smaller axis labels: forty of them must not overlap.
    let frontmatter = FRONTMATTER.replace(
        "config:\n",
        "config:\n  xyChart:\n    width: 900\n    xAxis:\n      labelFontSize: 11\n",
    );
    format!(
        "```mermaid\n{frontmatter}xychart-beta\n    title \"{}: highest live {unit} between samples, one training step then one inference call\"\n    \
         x-axis [{}]\n    y-axis \"{unit}\" 0 --> {:.2}\n    line [{}]\n```\n\n\
         Each point is the highest live memory over a few samples; by phase: {}.{} \
         The full timeline is `{}` in {}.\n\n",
        mermaid_text(name),
        labels.join(", "),
        (max as f64 / scale * 1.1).max(0.01),
        values.join(", "),
        phases.join(", "),
        super::escape(&peak),
        timeline::file_name(name),
        // The run's page lists its artifacts (a direct artifact URL is not
        // known until the upload step has run).
        run.map_or_else(|| "this run's artifact".to_string(), |u| format!("[this run's artifact]({u})")),
    )
}
