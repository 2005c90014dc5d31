//! Markdown for the pull-request comment and the step summary: the verdict
//! line, a component × metric table against the budget and the baseline, the
//! top blocks of failing components, a Mermaid chart per component, a
//! collapsed diff of the text report and a footer. Pure: report in, text out.
//!
//! Every name that comes from the spec (or from a report read off an
//! artifact) goes through [`escape`]: no HTML, no @mentions, no table breaks.

use std::fmt::Write;

use crate::metric::{format_value, Unit};
use crate::report::{BudgetResult, Report, Status};
use crate::units::Bytes;

use super::limit_text;

/// GitHub refuses comments longer than this many characters.
pub const COMMENT_LIMIT: usize = 65_536;
/// Names are cut to this many characters in the comment.
pub const NAME_LIMIT: usize = 100;
/// How many blocks each failing component lists.
pub const TOP_BLOCKS: usize = 5;
/// At most this many warnings are listed one by one.
const MAX_WARNINGS: usize = 30;

pub use crate::report::baseline::DIFFERENT_TESTBED;

/// Renders the whole comment body, at most `limit` characters (use
/// [`COMMENT_LIMIT`] minus whatever the caller adds, such as a marker).
/// `baseline` is the baseline report itself, used for the text diff.
pub fn render(report: &Report, baseline: Option<&Report>, limit: usize) -> String {
    let head = head(report);
    let footer = footer(report);
    let rows = table_rows(report);
    let sections: Vec<(&str, String)> = vec![
        ("the variants", variants_section(report)),
        ("the top blocks", blocks_section(report)),
        ("the charts", charts_section(report)),
        ("the text diff", diff_section(report, baseline)),
    ];

    // Reserve room for the truncation line so it always fits.
    let note_room = 400;
    let budget = limit.saturating_sub(chars(&head) + chars(&footer) + note_room);
    let mut body = String::new();
    let mut used = 0usize;
    let mut left_out: Vec<String> = Vec::new();

    let header = "| component | metric | budget | baseline | current | Δ | Δ % | status |\n\
                  |---|---|--:|--:|--:|--:|--:|---|\n";
    if !rows.is_empty() {
        body.push_str(header);
        used += chars(header);
        let mut shown = 0;
        for row in &rows {
            let n = chars(row);
            if used + n > budget {
                break;
            }
            body.push_str(row);
            used += n;
            shown += 1;
        }
        if shown < rows.len() {
            left_out.push(format!("{} of {} table rows", rows.len() - shown, rows.len()));
        }
        body.push('\n');
        used += 1;
    }
    for (what, text) in sections {
        if text.is_empty() {
            continue;
        }
        let n = chars(&text);
        if used + n > budget {
            left_out.push(what.to_string());
            continue;
        }
        body.push_str(&text);
        used += n;
    }

    let mut out = head;
    out.push_str(&body);
    if !left_out.is_empty() {
        let _ = writeln!(
            out,
            "> ✂️ **Truncated** to fit GitHub's {COMMENT_LIMIT}-character limit; left out: {}. \
             The full report is `report.json` in the job's output folder.\n",
            left_out.join(", ")
        );
    }
    out.push_str(&footer);
    // Last guard: never exceed the limit, whatever the inputs.
    if chars(&out) > limit {
        let line = "\n\n> ✂️ **Truncated** to fit GitHub's comment limit.\n";
        let keep = limit.saturating_sub(chars(line));
        out = out.chars().take(keep).collect::<String>() + line;
    }
    out
}

fn chars(s: &str) -> usize {
    s.chars().count()
}

/// Escapes text for Markdown and HTML: `&`, `<`, `>` become entities,
/// Markdown punctuation (table pipes included) is backslash-escaped, `@` is
/// followed by a zero-width joiner so it never mentions anyone, control
/// characters become spaces, and the text is cut to `max` characters.
pub fn escape_max(text: &str, max: usize) -> String {
    let mut out = String::new();
    let count = text.chars().count();
    for (i, c) in text.chars().enumerate() {
        if i == max && count > max {
            out.push('…');
            break;
        }
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '@' => out.push_str("@\u{200D}"),
            '\\' | '`' | '*' | '_' | '[' | ']' | '|' | '~' | '$' => {
                out.push('\\');
                out.push(c);
            }
            c if c.is_control() => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// [`escape_max`] with the default name length.
pub fn escape(text: &str) -> String {
    escape_max(text, NAME_LIMIT)
}

fn verdict_line(report: &Report) -> String {
    let s = &report.summary;
    let (icon, word) = if s.status == "pass" {
        ("✅", "PASS")
    } else {
        ("❌", "FAIL")
    };
    format!(
        "### {icon} gate: {word} — {} of {} budgets pass, {} fail, {} regressed, {} not measured{}\n",
        s.passed,
        report.results.len(),
        s.failed,
        s.regressed,
        s.not_measured,
        super::strict_suffix(s)
    )
}

fn head(report: &Report) -> String {
    let mut out = verdict_line(report);
    out.push('\n');
    let _ = writeln!(
        out,
        "{} on {} gating {} ({}); {}\n",
        escape(&report.spec),
        escape(&format!("{} ({})", report.testbed.backend, report.testbed.device_name)),
        escape(&report.testbed.gated_device),
        Bytes(report.testbed.capacity_bytes),
        baseline_phrase(report)
    );
    let w = &report.summary.warnings;
    if !w.is_empty() {
        let _ = writeln!(
            out,
            "> [!WARNING]\n> {}",
            if report.summary.strict {
                "warnings fail the gate under `--strict`:"
            } else {
                "warnings:"
            }
        );
        for line in w.iter().take(MAX_WARNINGS) {
            let _ = writeln!(out, "> - {}", escape_max(line, 300));
        }
        if w.len() > MAX_WARNINGS {
            let _ = writeln!(out, "> - … and {} more", w.len() - MAX_WARNINGS);
        }
        out.push('\n');
    }
    out
}

fn short(sha: &str) -> String {
    escape(&sha.chars().take(12).collect::<String>())
}

fn baseline_phrase(report: &Report) -> String {
    match &report.baseline {
        None => "no baseline: regressions are not checked".into(),
        Some(b) if !b.comparable => format!(
            "{DIFFERENT_TESTBED} (`{}`)",
            b.commit.as_deref().map(short).unwrap_or_else(|| escape(&b.source))
        ),
        Some(b) => format!(
            "compared with the baseline {}",
            match &b.commit {
                Some(c) => format!("`{}`", short(c)),
                None => escape(&b.source),
            }
        ),
    }
}

fn lower_is_better(r: &BudgetResult) -> bool {
    r.op.starts_with('<')
}

fn delta_text(r: &BudgetResult) -> (String, String) {
    let Some(d) = r.delta() else {
        return ("—".into(), "—".into());
    };
    if d == 0.0 {
        return ("±0".into(), "0.0%".into());
    }
    let abs = match r.unit {
        Unit::Bytes => crate::units::fmt_delta_bytes(d.round() as i128),
        Unit::Ms => format!("{d:+.1} ms"),
        Unit::One => {
            let v = format_value(Unit::One, d.abs());
            format!("{}{v}", if d < 0.0 { "-" } else { "+" })
        }
    };
    let pct = match r.baseline {
        Some(b) if b != 0.0 => format!("{:+.1}%", d / b.abs() * 100.0),
        _ => "—".into(),
    };
    (abs, pct)
}

fn status_cell(r: &BudgetResult) -> String {
    let improved = r
        .delta()
        .is_some_and(|d| if lower_is_better(r) { d < 0.0 } else { d > 0.0 });
    match r.status {
        Status::Pass if improved => "✅ pass, improved".into(),
        Status::Pass => "✅ pass".into(),
        Status::Fail => "❌ fail".into(),
        Status::Regressed => format!("📈 regressed (> {}%)", crate::units::trim_float(r.tolerance_percent)),
        Status::NotMeasured => "⚪ not measured".into(),
    }
}

fn table_rows(report: &Report) -> Vec<String> {
    report
        .results
        .iter()
        .map(|r| {
            let (d, pct) = delta_text(r);
            format!(
                "| {} | {} | {} | {} | {} | {d} | {pct} | {} |\n",
                escape(&r.component),
                escape(&r.metric),
                escape(&limit_text(r)),
                r.baseline.map_or_else(|| "—".into(), |b| format_value(r.unit, b)),
                r.measured.map_or_else(
                    || r.reason.as_deref().map_or("—".into(), |x| escape_max(x, 120)),
                    |v| format_value(r.unit, v)
                ),
                status_cell(r)
            )
        })
        .collect()
}

fn failing_components(report: &Report) -> Vec<&str> {
    let mut names: Vec<&str> = Vec::new();
    for r in &report.results {
        if matches!(r.status, Status::Fail | Status::Regressed)
            && report.components.contains_key(&r.component)
            && !names.contains(&r.component.as_str())
        {
            names.push(&r.component);
        }
    }
    names
}

/// Components with `variants:`: each variant's settings and metrics side by
/// side, with the loss and step-time ratios against the reference.
fn variants_section(report: &Report) -> String {
    use super::table::{variant_groups, variant_settings, VARIANT_METRICS};
    let mut out = String::new();
    for (base, members) in variant_groups(report) {
        let reference = members
            .iter()
            .find_map(|m| report.components[m].reference.clone())
            .unwrap_or_else(|| base.clone());
        let _ = writeln!(
            out,
            "#### Variants of {} (ratios against {})\n",
            escape(&base),
            escape(&reference)
        );
        let names: Vec<String> = VARIANT_METRICS.iter().map(|m| escape(m.name())).collect();
        let _ = writeln!(out, "| variant | settings | {} |", names.join(" | "));
        let _ = writeln!(out, "|---|---|{}", "--:|".repeat(names.len()));
        for m in &members {
            let c = &report.components[m];
            let cells: Vec<String> = VARIANT_METRICS
                .iter()
                .map(|metric| {
                    c.value(*metric)
                        .map_or("—".into(), |v| crate::metric::format_value(metric.unit(), v))
                })
                .collect();
            let _ = writeln!(
                out,
                "| {} | {} | {} |",
                escape(m),
                escape(&variant_settings(c)),
                cells.join(" | ")
            );
        }
        out.push('\n');
    }
    out
}

fn blocks_section(report: &Report) -> String {
    let mut out = String::new();
    for name in failing_components(report) {
        let c = &report.components[name];
        if let Some(e) = &c.error {
            let _ = writeln!(
                out,
                "**{}** failed{}: {}\n",
                escape(name),
                e.phase
                    .as_deref()
                    .map(|p| format!(" in phase {}", escape(p)))
                    .unwrap_or_default(),
                escape_max(&e.reason, 500)
            );
        }
        let top: Vec<_> = c
            .blocks
            .iter()
            .filter(|b| !b.name.contains('.'))
            .take(TOP_BLOCKS)
            .collect();
        if top.is_empty() {
            continue;
        }
        let _ = writeln!(
            out,
            "**{}**: {} by activation memory kept for backward\n",
            escape(name),
            if top.len() == 1 {
                "the top block".to_string()
            } else {
                format!("top {} blocks", top.len())
            }
        );
        out.push_str("| block | retained | share | peak |\n|---|--:|--:|--:|\n");
        for b in top {
            let _ = writeln!(
                out,
                "| {} | {} | {} | +{} |",
                escape(&b.name),
                Bytes(b.retained_bytes.max(0) as u64),
                b.share_percent.map_or_else(|| "—".into(), |s| format!("{s:.1}%")),
                Bytes(b.peak_bytes)
            );
        }
        out.push('\n');
    }
    if out.is_empty() {
        return out;
    }
    format!("#### Where the memory goes\n\n{out}")
}

/// Text safe inside a quoted Mermaid string: letters, digits and a few marks.
fn mermaid_text(s: &str) -> String {
    let cleaned: String = s
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || " _.-+/".contains(c) {
                c
            } else {
                '_'
            }
        })
        .take(60)
        .collect();
    cleaned
}

fn mib(v: f64) -> String {
    format!("{:.2}", v / crate::units::MIB as f64)
}

fn charts_section(report: &Report) -> String {
    let mut out = String::new();
    for name in report.components.keys() {
        let rows: Vec<&BudgetResult> = report
            .results
            .iter()
            .filter(|r| &r.component == name && r.unit == Unit::Bytes && r.measured.is_some())
            .collect();
        if rows.is_empty() {
            continue;
        }
        let labels: Vec<String> = rows
            .iter()
            .map(|r| format!("\"{}\"", mermaid_text(&r.metric)))
            .collect();
        let measured: Vec<String> = rows.iter().map(|r| mib(r.measured.unwrap_or(0.0))).collect();
        let limits: Vec<String> = rows.iter().map(|r| mib(r.limit)).collect();
        let top = rows
            .iter()
            .flat_map(|r| [r.measured.unwrap_or(0.0), r.limit])
            .fold(0.0f64, f64::max);
        let y_max = format!("{:.2}", (top * 1.1 / crate::units::MIB as f64).max(0.01));
        let _ = writeln!(
            out,
            "```mermaid\nxychart-beta\n    title \"{}: measured (bars) vs budget (line), MiB\"\n    \
             x-axis [{}]\n    y-axis \"MiB\" 0 --> {}\n    bar [{}]\n    line [{}]\n```\n",
            mermaid_text(name),
            labels.join(", "),
            y_max,
            measured.join(", "),
            limits.join(", ")
        );
    }
    if out.is_empty() {
        return out;
    }
    format!("<details><summary>Memory against budget, per component</summary>\n\n{out}</details>\n\n")
}

/// The fence for a code block around `text`: longer than any backtick run in it.
fn fence_for(text: &str) -> String {
    let mut longest = 0;
    let mut run = 0;
    for c in text.chars() {
        if c == '`' {
            run += 1;
            longest = longest.max(run);
        } else {
            run = 0;
        }
    }
    "`".repeat((longest + 1).max(3))
}

/// Control characters would end lines inside the code block; make them visible.
fn code_safe(text: &str) -> String {
    text.lines()
        .map(|l| {
            l.chars()
                .map(|c| if c.is_control() { '�' } else { c })
                .collect::<String>()
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

fn diff_section(report: &Report, baseline: Option<&Report>) -> String {
    let Some(base) = baseline else {
        return String::new();
    };
    if !report.baseline.as_ref().is_some_and(|b| b.comparable) {
        return String::new();
    }
    let old = code_safe(&super::table::render(base, false));
    let new = code_safe(&super::table::render(report, false));
    let label = |r: &Report, what: &str| {
        let c = r.commit.as_deref().map(|c| c.chars().take(12).collect::<String>());
        format!("{what} {}", c.unwrap_or_default()).trim_end().to_string()
    };
    let diff = similar::TextDiff::from_lines(&old, &new);
    let text = if old == new {
        "(no change)\n".to_string()
    } else {
        diff.unified_diff()
            .context_radius(3)
            .header(&label(base, "baseline"), &label(report, "current"))
            .to_string()
    };
    let fence = fence_for(&text);
    format!(
        "<details><summary>Text report: baseline → current (unified diff)</summary>\n\n{fence}diff\n{text}{}{fence}\n\n</details>\n\n",
        if text.ends_with('\n') { "" } else { "\n" }
    )
}

fn footer(report: &Report) -> String {
    let tb = &report.testbed;
    let base = match &report.baseline {
        None => "baseline: none".to_string(),
        Some(b) => format!(
            "baseline: {}{}",
            b.commit
                .as_deref()
                .map_or_else(|| escape(&b.source), |c| format!("`{}`", short(c))),
            if b.comparable {
                String::new()
            } else {
                format!(" ({DIFFERENT_TESTBED})")
            }
        ),
    };
    let commit = report
        .commit
        .as_deref()
        .map(|c| format!(" · commit `{}`", short(c)))
        .unwrap_or_default();
    format!(
        "---\n<sub>{base} · testbed: {} · fingerprint `{}`{commit} · gate {}</sub>\n",
        escape(&format!(
            "{} on {}{}{}",
            tb.backend,
            tb.device_name,
            tb.driver
                .as_deref()
                .map(|d| format!(", driver {d}"))
                .unwrap_or_default(),
            tb.cuda.as_deref().map(|d| format!(", CUDA {d}")).unwrap_or_default()
        )),
        escape(&tb.fingerprint()),
        escape(&report.gate_version)
    )
}

/// Whether a quiet comment is worth posting: something failed or regressed,
/// or a figure changed against the baseline.
pub fn noteworthy(report: &Report) -> bool {
    report.summary.status != "pass"
        || report
            .results
            .iter()
            .any(|r| matches!(r.status, Status::Fail | Status::Regressed) || r.delta().is_some_and(|d| d != 0.0))
}
