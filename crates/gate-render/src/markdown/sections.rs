//! The comment's sections after the review table: variants side by side,
//! where the memory goes, the text diff and the footer.

use std::fmt::Write;

use super::escape;
use super::escape::{code_safe, escape_max, fence_for};
use super::DIFFERENT_TESTBED;
use crate::view::{self, UNATTRIBUTED};
use gate_contract::report::Report;

/// Components with `variants:`: each variant's settings and metrics side by
/// side, with the loss and step-time ratios against the reference.
pub(super) fn variants_section(report: &Report) -> String {
    use crate::table::{variant_groups, variant_metrics, variant_settings};
    let mut out = String::new();
    for (base, members) in variant_groups(report) {
        let reference = crate::view::variant_reference(report, &base, &members);
        let _ = writeln!(
            out,
            "#### Variants of {} (ratios against {})\n",
            escape(&base),
            escape(&reference)
        );
        let shown = variant_metrics(report, &members);
        let names: Vec<String> = shown.iter().map(|m| escape(m.name())).collect();
        let _ = writeln!(out, "| variant | settings | {} |", names.join(" | "));
        let _ = writeln!(out, "|---|---|{}", "--:|".repeat(names.len()));
        for m in &members {
            let c = &report.components[m];
            let cells: Vec<String> = shown
                .iter()
                .map(|metric| {
                    c.value(*metric)
                        .map_or("—".into(), |v| gate_spec::metric::format_value(metric.unit(), v))
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

/// For each failing component: why it failed (if its profile did), its top
/// blocks with the `(unattributed)` rest, and their chart.
pub(super) fn blocks_section(report: &Report, links: &super::Links) -> String {
    let mut out = String::new();
    for name in view::failing_components(report) {
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
        out.push_str(&super::chart::timeline_chart(name, c, links.run.as_deref()));
        let top = view::top_blocks(c, super::TOP_BLOCKS);
        if top.is_empty() {
            continue;
        }
        let _ = writeln!(
            out,
            "**{}**: activation memory kept for backward, by block{}\n",
            escape(name),
            c.value(gate_spec::metric::Metric::Activations)
                .map(|a| format!(" (activations {})", view::size_text(report, name, a)))
                .unwrap_or_default()
        );
        out.push_str("| block | retained | share | peak |\n|---|--:|--:|--:|\n");
        // The blocks left out are said (before the closing rest), so the rows still add up.
        let mut more = view::more_blocks(c, super::TOP_BLOCKS);
        let mut say_more = |out: &mut String| {
            if let Some((n, bytes, share)) = more.take() {
                let _ = writeln!(
                    out,
                    "| {} | {} | {} | — |",
                    view::more_blocks_label(n),
                    view::size_text(report, name, bytes as f64),
                    share.map_or_else(|| "—".into(), |s| format!("{s:.1}%")),
                );
            }
        };
        for b in top {
            if b.name == UNATTRIBUTED {
                say_more(&mut out);
            }
            let peak = if b.name == UNATTRIBUTED {
                "—".to_string()
            } else {
                format!("+{}", view::size_text(report, name, b.peak_bytes as f64))
            };
            let _ = writeln!(
                out,
                "| {} | {} | {} | {peak} |",
                escape(&b.name),
                view::size_text(report, name, b.retained_bytes as f64),
                b.share_percent.map_or_else(|| "—".into(), |s| format!("{s:.1}%")),
            );
        }
        say_more(&mut out);
        out.push('\n');
        out.push_str(&super::chart::blocks_chart(report, name, c));
        out.push('\n');
    }
    if out.is_empty() {
        return out;
    }
    format!("#### Where the memory goes\n\n{out}")
}

pub(super) fn diff_section(report: &Report, baseline: Option<&Report>) -> String {
    let Some(base) = baseline else {
        return String::new();
    };
    if !report.baseline.as_ref().is_some_and(|b| b.comparable) {
        return String::new();
    }
    let old = code_safe(&crate::table::render_for_diff(base));
    let new = code_safe(&crate::table::render_for_diff(report));
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

pub(super) fn footer(report: &Report) -> String {
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
    // Which testbeds are compared: any CPU of the architecture, or this card.
    let scope = if tb.backend == "cpu" {
        format!(
            " (compared with any {} CPU: bytes do not depend on the CPU model)",
            tb.arch
        )
    } else {
        " (compared with this card only)".to_string()
    };
    format!(
        "---\n<sub>{base} · testbed: {}{} · fingerprint `{}`{commit} · gate {}</sub>\n",
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
        escape(&scope),
        escape(&tb.fingerprint()),
        escape(&report.gate_version)
    )
}

pub(super) fn short(sha: &str) -> String {
    escape(&sha.chars().take(12).collect::<String>())
}

pub(super) fn baseline_phrase(report: &Report) -> String {
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
