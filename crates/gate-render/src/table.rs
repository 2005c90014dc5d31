//! The terminal table: readable without colour. Whether to colour is the
//! caller's choice (the CLI asks `anstream`, which honours `NO_COLOR`,
//! `CLICOLOR`, `CLICOLOR_FORCE` and `TERM=dumb`).

use std::fmt::Write;

use gate_contract::report::{Report, Status};
use gate_spec::metric::VariantTable;
use gate_spec::units::Bytes;

use super::measured_text;

/// How many blocks each component lists.
pub const TOP_BLOCKS: usize = 5;

pub fn render(report: &Report, color: bool) -> String {
    render_as(report, color, true)
}

/// The table as the comment's text diff compares it: without the columns
/// against the baseline and without the next step, which only one side of
/// the diff (the run compared with the baseline) would have.
pub fn render_for_diff(report: &Report) -> String {
    render_as(report, false, false)
}

fn render_as(report: &Report, color: bool, compared: bool) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "gate: {} on {} ({}), gating {} with {}",
        report.spec,
        report.testbed.backend,
        report.testbed.device_name,
        report.testbed.gated_device,
        Bytes(report.testbed.capacity_bytes)
    );
    out.push('\n');
    results_table(&mut out, report, color, compared && report.baseline.is_some());
    out.push_str(&variants(report));
    for (name, c) in &report.components {
        component_notes(&mut out, name, c, compared);
    }
    if let Some(e) = &report.ensemble {
        ensemble_line(&mut out, e);
    }
    for (component, why) in not_compared(report) {
        let _ = writeln!(out, "\n{component}: baseline shown, not compared: {why}");
    }
    for (component, why) in config_changes(report) {
        let _ = writeln!(
            out,
            "\n{component}: compared with the baseline across a settings change: {why}"
        );
    }
    for change in &report.summary.budget_changes {
        let _ = writeln!(out, "\nbudget changed: {change}");
    }
    for r in &report.results {
        if let Some(d) = super::drift_text(r) {
            let _ = writeln!(out, "\n{}.{}: {d}", r.component, r.metric);
        }
    }
    for n in &report.summary.notes {
        let _ = writeln!(out, "\nnote: {n}");
    }
    for w in &report.summary.warnings {
        let _ = writeln!(out, "\nwarning: {w}");
    }
    if compared {
        next_step(&mut out, report);
    }
    let s = &report.summary;
    let (verdict, status) = if s.passed_run() {
        ("PASS", Status::Pass)
    } else {
        ("FAIL", Status::Fail)
    };
    let _ = writeln!(out, "\n{}: {}", paint(verdict, status, color), super::counts(report));
    out
}

/// One row per budget result under a header, in aligned columns; the status
/// painted. With a baseline, its figure and the change against it too.
fn results_table(out: &mut String, report: &Report, color: bool, with_baseline: bool) {
    let mut header = vec!["component", "metric", "budget"];
    if with_baseline {
        header.push("baseline");
    }
    header.push("measured");
    if with_baseline {
        header.extend(["Δ", "Δ %"]);
    }
    header.extend(["used", "status"]);
    let mut rows: Vec<Vec<String>> = vec![header.into_iter().map(String::from).collect()];
    for r in &report.results {
        let row = super::view::row_of(r);
        let used = row.percent_of_budget.map_or_else(String::new, |p| format!("{p:.1}%"));
        let mut cells = vec![r.component.to_string(), r.metric.to_string(), row.limit.clone()];
        if with_baseline {
            cells.push(row.baseline.clone().unwrap_or_else(|| "—".into()));
        }
        cells.push(measured_text(r));
        if with_baseline {
            let (abs, pct) = row.delta.clone().unwrap_or_else(|| ("—".into(), "—".into()));
            cells.extend([abs, pct]);
        }
        cells.push(used);
        let mut status = match (&r.not_compared, r.budget_changed()) {
            (Some(_), _) => format!("{} (not compared)", r.status.name()),
            (None, true) => format!("{} (budget changed)", r.status.name()),
            (None, false) => r.status.name().to_string(),
        };
        if r.config_changed.is_some() {
            status.push_str(" (config changed)");
        }
        if r.untrained {
            status.push_str(" (step does not train)");
        }
        if super::drifted(r) {
            status.push_str(" (drift since anchor)");
        }
        cells.push(status);
        rows.push(cells);
    }
    let last = rows[0].len() - 1;
    let mut widths = vec![0usize; last + 1];
    for row in &rows {
        for (i, cell) in row.iter().enumerate() {
            widths[i] = widths[i].max(cell.chars().count());
        }
    }
    for (i, row) in rows.iter().enumerate() {
        let mut line = String::new();
        for (j, cell) in row.iter().enumerate() {
            let w = widths[j];
            // Right-align the numbers, left-align the names; the last column
            // is not padded (no trailing blanks).
            let padded = if j == last {
                cell.clone()
            } else if j >= 2 {
                format!("{cell:>w$}")
            } else {
                format!("{cell:<w$}")
            };
            let padded = if j == last && i > 0 {
                paint(&padded, report.results[i - 1].status, color)
            } else {
                padded
            };
            line.push_str(&padded);
            if j < last {
                line.push_str("  ");
            }
        }
        let _ = writeln!(out, "{}", line.trim_end());
    }
}

/// On failure, the one next step (the comment's, in plain words).
fn next_step(out: &mut String, report: &Report) {
    let Some(step) = super::view::next_step(report) else {
        return;
    };
    let code = |t: &str| format!("`{t}`");
    let what = super::view::what_words(&step, code, str::to_string);
    let block = super::view::block_words(report, &step, code)
        .map(|w| format!(" {w}"))
        .unwrap_or_default();
    let lever = super::view::lever_words(report, &step, code);
    let _ = writeln!(out, "\nnext step: {what}.{block} {lever}");
    for name in report.plans.keys() {
        if let Some(fix) = super::view::fix_words(report, name, code) {
            let _ = writeln!(out, "{fix}");
        }
    }
}

/// A component's error, if any, and its blocks by activation memory kept for
/// backward (with what each gained or lost against the baseline, when compared).
fn component_notes(out: &mut String, name: &str, c: &gate_contract::report::ComponentReport, compared: bool) {
    if let Some(e) = &c.error {
        let phase = e.phase.as_deref().map(|p| format!(" in phase {p}")).unwrap_or_default();
        let what = match e.kind {
            gate_contract::report::ErrorKind::NotMeasured => "not measured",
            gate_contract::report::ErrorKind::Failed => "failed",
        };
        let _ = writeln!(out, "\n{name}: {what}{phase}: {}", e.reason);
    }
    generation_note(out, name, c);
    let top = super::view::top_blocks(c, TOP_BLOCKS);
    if top.is_empty() {
        return;
    }
    // A generating component's blocks are its prefill's: what each keeps is
    // its share of the cache.
    let heading = if c.value(gate_spec::metric::Metric::PrefillPeak).is_some() {
        "blocks of the prefill by memory kept (the cache)"
    } else {
        "blocks by activation memory kept for backward"
    };
    let _ = writeln!(out, "\n{name}: {heading}");
    let bytes = |v: i64| gate_spec::metric::format_value(gate_spec::metric::Unit::Bytes, v as f64);
    let share_text = |s: Option<f64>| s.map(|s| format!(" ({s:.1}%)")).unwrap_or_default();
    // The blocks left out are said (before the closing rest), so the rows still add up.
    let mut more = super::view::more_blocks(c, TOP_BLOCKS);
    let mut say_more = |out: &mut String| {
        if let Some((n, b, s)) = more.take() {
            let _ = writeln!(
                out,
                "  {:<28} {:>12}{}",
                super::view::more_blocks_label(n),
                bytes(b),
                share_text(s)
            );
        }
    };
    for b in top {
        let share = share_text(b.share_percent);
        let retained = bytes(b.retained_bytes);
        if b.name == super::view::UNATTRIBUTED {
            say_more(out);
            // Below 0 the blocks keep more than the forward added: it freed
            // bytes that were live before it began.
            let why = match b.share_percent {
                Some(s) if s < 0.0 => {
                    "   below 0: the forward freed bytes live before it began (a cache or buffer it replaced), \
                     so its blocks keep more than it added"
                }
                _ => "",
            };
            let _ = writeln!(out, "  {:<28} {retained:>12}{share}{why}", b.name);
        } else {
            let (moved, why) = block_remarks(b, compared);
            let _ = writeln!(
                out,
                "  {:<28} {retained:>12}{share}   peak +{}{moved}{why}",
                b.name,
                Bytes(b.peak_bytes)
            );
        }
    }
    say_more(out);
}

/// What a block's row adds after its figures: how it moved against the
/// baseline's block of the same name, and why its share reads as it does.
fn block_remarks(b: &gate_contract::report::BlockReport, compared: bool) -> (String, String) {
    let bytes = |v: i64| gate_spec::metric::format_value(gate_spec::metric::Unit::Bytes, v as f64);
    let moved = match b.growth_bytes().filter(|_| compared) {
        Some(g) if g > 0 => format!("   grew {} since the baseline", bytes(g)),
        Some(g) if g < 0 => format!("   shrank {} since the baseline", bytes(-g)),
        _ => String::new(),
    };
    // A block whose bytes an op after it freed (at least a tenth of
    // what it keeps) says so: the graph was cut downstream of it.
    let why = match (b.freed_after_exit(), b.share_percent) {
        (Some(d), _) if d * 10 > b.retained_bytes.max(0) => {
            format!(
                "   cut after it: {} it held at its exit was freed before the forward ended",
                bytes(d)
            )
        }
        (_, Some(s)) if s > 100.0 => {
            "   over 100 %: the forward freed bytes live before it began, so it added less than this block keeps"
                .to_string()
        }
        (_, Some(s)) if s < 0.0 => {
            "   below 0: the block freed more, of what was live before it, than it keeps".to_string()
        }
        _ => String::new(),
    };
    (moved, why)
}

/// A generating component's cache, per batch and per row, and how long a
/// row's cache can grow on the card (`kv_capacity_tokens`).
fn generation_note(out: &mut String, name: &str, c: &gate_contract::report::ComponentReport) {
    use gate_spec::metric::{format_value, Metric, Unit};
    let Some(per_token) = c.value(Metric::KvCachePerToken).filter(|v| *v > 0.0) else {
        return;
    };
    let rows = c.batch_size.max(1);
    let row = if rows > 1 {
        format!(
            " for its {rows} rows ({} a row)",
            format_value(Unit::Bytes, per_token / rows as f64)
        )
    } else {
        " for its one row".to_string()
    };
    let capacity = c
        .value(Metric::KvCapacityTokens)
        .map(|t| format!("; a row's cache fits {t:.0} tokens on the card"))
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "\n{name}: the cache grows {} a token{row}{capacity}",
        format_value(Unit::Bytes, per_token)
    );
}

/// The ensemble's sum: its members, the reserve, the total and the headroom.
fn ensemble_line(out: &mut String, e: &gate_contract::report::EnsembleReport) {
    let total = e.total_bytes.map_or("—".into(), |t| Bytes(t).to_string());
    let headroom = e.headroom_bytes.map_or("—".into(), |h| {
        if h < 0 {
            format!("-{}", Bytes(h.unsigned_abs()))
        } else {
            Bytes(h as u64).to_string()
        }
    });
    let _ = writeln!(
        out,
        "\nensemble ({}): Σ {} + reserve {} ({}) = {total}; headroom on {} = {headroom}",
        e.members.join(" + "),
        e.metric,
        Bytes(e.reserve_bytes),
        e.reserve_source,
        Bytes(e.capacity_bytes)
    );
}

/// Each component whose baseline figures are shown but not compared, and why.
pub fn not_compared(report: &Report) -> Vec<(&str, &str)> {
    let mut out: Vec<(&str, &str)> = Vec::new();
    for r in &report.results {
        if let Some(why) = &r.not_compared {
            if !out.iter().any(|(c, _)| r.component == *c) {
                out.push((r.component.as_str(), why));
            }
        }
    }
    out
}

/// Each component compared with its baseline across a change of its
/// settings, and the change.
pub fn config_changes(report: &Report) -> Vec<(&str, &str)> {
    let mut out: Vec<(&str, &str)> = Vec::new();
    for r in &report.results {
        if let Some(why) = &r.config_changed {
            if !out.iter().any(|(c, _)| r.component == *c) {
                out.push((r.component.as_str(), why));
            }
        }
    }
    out
}

fn paint(text: &str, status: Status, color: bool) -> String {
    use anstyle::{AnsiColor, Style};
    if !color {
        return text.to_string();
    }
    let hue = match status {
        Status::Pass => AnsiColor::Green,
        Status::Fail | Status::Regressed => AnsiColor::Red,
        Status::NotMeasured | Status::Acknowledged | Status::Inconclusive => AnsiColor::Yellow,
    };
    let style = Style::new().fg_color(Some(hue.into()));
    format!("{style}{text}{style:#}")
}

/// Components with `variants:`: (base name, `[base, base@variant, …]`), in report order.
pub fn variant_groups(report: &Report) -> Vec<(String, Vec<String>)> {
    let mut groups: Vec<(String, Vec<String>)> = Vec::new();
    for name in report.components.keys() {
        // `NAME@VARIANT`, both plain names as the spec loader makes them.
        let gate_spec::name::ComponentName {
            base,
            variant: Some(variant),
        } = gate_spec::name::ComponentName::parse(name)
        else {
            continue;
        };
        if !gate_spec::name::is_plain(base) || !gate_spec::name::is_plain(variant) {
            continue;
        }
        match groups.iter_mut().find(|(b, _)| b == base) {
            Some((_, members)) => members.push(name.clone()),
            None => {
                let mut members = Vec::new();
                if report.components.contains_key(base) {
                    members.push(base.to_string());
                }
                members.push(name.clone());
                groups.push((base.to_string(), members));
            }
        }
    }
    groups
}

/// The metrics shown side by side for variants: those whose facts give
/// them a column of the training table, in its order.
pub const VARIANT_METRICS: [gate_spec::metric::Metric; VariantTable::Training.width()] =
    VariantTable::Training.metrics();

/// The metrics shown side by side for variants that generate (`generate:`).
pub const GENERATION_VARIANT_METRICS: [gate_spec::metric::Metric; VariantTable::Generating.width()] =
    VariantTable::Generating.metrics();

/// The metrics to show side by side for `members`: a generation's when
/// they generate (no training figure to show), else training's.
pub fn variant_metrics(report: &Report, members: &[String]) -> &'static [gate_spec::metric::Metric] {
    let generating = members
        .iter()
        .filter_map(|m| report.components.get(m))
        .any(|c| c.value(gate_spec::metric::Metric::PrefillPeak).is_some());
    if generating {
        &GENERATION_VARIANT_METRICS
    } else {
        &VARIANT_METRICS
    }
}

/// A variant's settings in a few words: dtype, batch and checkpointing.
pub fn variant_settings(c: &gate_contract::report::ComponentReport) -> String {
    let chunk = c
        .config
        .get("checkpoint")
        .and_then(|k| k.get("chunk"))
        .and_then(|v| v.as_u64());
    let whole = c.checkpointed.iter().filter(|b| b.chunk.is_none()).count();
    let ck = match (chunk, whole) {
        (Some(n), 0) => format!("checkpoint {n}"),
        (Some(n), w) => format!("checkpoint {n} + {w} whole"),
        (None, 0) if !c.checkpointed.is_empty() => format!("checkpoint {} blocks", c.checkpointed.len()),
        (None, 0) => "no checkpoint".to_string(),
        (None, 1) => "checkpoint 1 block whole".to_string(),
        (None, w) => format!("checkpoint {w} blocks whole"),
    };
    let dtype = match &c.master_dtype {
        Some(m) => format!("{} ({m} master)", c.dtype),
        None => c.dtype.clone(),
    };
    format!("{dtype}, batch {}, {ck}", c.batch_size)
}

/// The variants of each component side by side, with their ratios to the reference.
fn variants(report: &Report) -> String {
    let mut out = String::new();
    for (base, members) in variant_groups(report) {
        let reference = crate::view::variant_reference(report, &base, &members);
        let _ = writeln!(
            out,
            "
{base}: variants side by side (ratios against {reference})"
        );
        let shown = variant_metrics(report, &members);
        let mut rows: Vec<Vec<String>> = vec![std::iter::once("variant".to_string())
            .chain(std::iter::once("settings".to_string()))
            .chain(shown.iter().map(|m| m.name().to_string()))
            .collect()];
        for m in &members {
            let c = &report.components[m];
            let mut row = vec![m.clone(), variant_settings(c)];
            for &metric in shown {
                row.push(
                    c.value(metric)
                        .map_or("—".into(), |v| gate_spec::metric::format_value(metric.unit(), v)),
                );
            }
            rows.push(row);
        }
        let mut widths = vec![0usize; rows[0].len()];
        for row in &rows {
            for (i, cell) in row.iter().enumerate() {
                widths[i] = widths[i].max(cell.chars().count());
            }
        }
        for row in &rows {
            let line: Vec<String> = row
                .iter()
                .enumerate()
                .map(|(i, cell)| {
                    let w = widths[i];
                    if i < 2 {
                        format!("{cell:<w$}")
                    } else {
                        format!("{cell:>w$}")
                    }
                })
                .collect();
            let _ = writeln!(out, "  {}", line.join("  ").trim_end());
        }
    }
    out
}

#[cfg(test)]
mod color_tests {
    use super::paint;
    use gate_contract::report::Status;

    #[test]
    fn status_colours_are_plain_ansi_and_off_means_no_escape_at_all() {
        assert_eq!(paint("pass", Status::Pass, true), "\x1b[32mpass\x1b[0m");
        assert_eq!(paint("FAIL", Status::Fail, true), "\x1b[31mFAIL\x1b[0m");
        assert_eq!(paint("warn", Status::Inconclusive, true), "\x1b[33mwarn\x1b[0m");
        assert_eq!(paint("pass", Status::Pass, false), "pass");
    }
}
