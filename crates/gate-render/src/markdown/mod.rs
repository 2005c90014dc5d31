//! Markdown for the pull-request comment and the step summary, built for
//! review: the verdict, budget changes in this PR, one next step, the
//! budgets with what needs a decision first (unchanged passing rows
//! folded), one chart of % of budget, where a failing component's memory
//! goes, the variants, a folded text diff and a footer. Pure: report in,
//! text out.
//!
//! Every name that comes from the spec (or from a report read off an
//! artifact) goes through [`escape()`] or [`escape::code`]: no HTML, no
//! @mentions, no links, no table breaks.

use std::fmt::Write;

mod chart;
pub mod escape;
mod history;
mod review;
mod sections;

pub use escape::{escape_max, mermaid_text};

use gate_contract::report::{Report, Status};

/// GitHub refuses comments longer than this many characters.
pub const COMMENT_LIMIT: usize = 65_536;
/// Names are cut to this many characters in the comment.
pub const NAME_LIMIT: usize = 100;
/// How many blocks each failing component lists.
pub const TOP_BLOCKS: usize = 5;

pub use gate_contract::report::DIFFERENT_TESTBED;

/// Where the comment's links point: each budget's line in the spec at the
/// PR's head commit, and the run that measured it. Built by the caller from
/// what GitHub says (never from the report, which may come from a fork).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Links {
    /// `https://github.com/OWNER/REPO/blob/SHA/`, ending in `/`.
    pub blob_base: Option<String>,
    /// The spec's path in the repository, when it is known to be one.
    pub spec_path: Option<String>,
    /// The run's page.
    pub run: Option<String>,
}

impl Links {
    /// The URL of line `line` of the spec, when both ends are known.
    pub fn spec_line(&self, _spec: &str, line: usize) -> Option<String> {
        let base = self.blob_base.as_deref()?;
        let path = self.spec_path.as_deref()?;
        (line > 0).then(|| format!("{base}{path}#L{line}"))
    }
}

/// [`escape_max`] with the default name length.
pub fn escape(text: &str) -> String {
    escape_max(text, NAME_LIMIT)
}

/// Renders the whole comment body without links, at most `limit` characters.
pub fn render(report: &Report, baseline: Option<&Report>, limit: usize) -> String {
    render_with(report, baseline, &Links::default(), limit)
}

/// Renders the whole comment body, at most `limit` characters (use
/// [`COMMENT_LIMIT`] minus whatever the caller adds, such as a marker).
/// `baseline` is the baseline report itself, used for the text diff.
pub fn render_with(report: &Report, baseline: Option<&Report>, links: &Links, limit: usize) -> String {
    render_full(report, baseline, &[], links, limit)
}

/// [`render_with`], with the history of the failing and regressed budgets
/// on the target branch (`gate_contract::history`), shown under the table.
pub fn render_full(
    report: &Report,
    baseline: Option<&Report>,
    history: &[gate_contract::history::Series],
    links: &Links,
    limit: usize,
) -> String {
    let head = review::head(report, links);
    let footer = sections::footer(report);
    let (rows, folded) = review::table_rows(report, links);
    let sections: Vec<(&str, String)> = vec![
        ("the next step", review::next_step(report)),
        ("the history", history::section(history)),
        ("the chart", chart_section(report)),
        ("where the memory goes", sections::blocks_section(report, links)),
        ("the variants", sections::variants_section(report)),
        ("the text diff", sections::diff_section(report, baseline)),
    ];

    // Reserve room for the truncation line so it always fits.
    let note_room = 400;
    let budget = limit.saturating_sub(chars(&head) + chars(&footer) + note_room);
    let mut body = String::new();
    let mut left_out: Vec<String> = Vec::new();
    let mut sections = sections.into_iter();
    // The next step comes right under the headline.
    if let Some((what, text)) = sections.next() {
        push_section(&mut body, budget, what, &text, &mut left_out);
    }
    let total = rows.len() + folded.len();
    let mut shown = push_rows(&mut body, budget, review::header(), &rows);
    if !folded.is_empty() && shown == rows.len() {
        let summary = review::fold_summary(report, folded.len());
        if chars(&body) + chars(&summary) + chars(review::header()) + 20 <= budget {
            body.push_str(&summary);
            shown += push_rows(&mut body, budget.saturating_sub(12), review::header(), &folded);
            body.push_str("</details>\n\n");
        }
    }
    if shown < total {
        left_out.push(format!("{} of {total} table rows", total - shown));
    }
    for (what, text) in sections {
        push_section(&mut body, budget, what, &text, &mut left_out);
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

fn push_section(body: &mut String, budget: usize, what: &str, text: &str, left_out: &mut Vec<String>) {
    if text.is_empty() {
        return;
    }
    if chars(body) + chars(text) > budget {
        left_out.push(what.to_string());
        return;
    }
    body.push_str(text);
}

/// A table of `rows` under `header`, as many rows as fit; returns how many did.
fn push_rows(body: &mut String, budget: usize, header: &str, rows: &[String]) -> usize {
    if rows.is_empty() || chars(body) + chars(header) > budget {
        return 0;
    }
    body.push_str(header);
    let mut used = chars(body);
    let mut shown = 0;
    for row in rows {
        let n = chars(row);
        if used + n > budget {
            break;
        }
        body.push_str(row);
        used += n;
        shown += 1;
    }
    body.push('\n');
    shown
}

fn chart_section(report: &Report) -> String {
    let chart = chart::budget_chart(report);
    if chart.is_empty() {
        return chart;
    }
    format!("#### Budgets used\n\n{chart}\n")
}

fn chars(s: &str) -> usize {
    s.chars().count()
}

/// Whether a quiet comment is worth posting: something failed or regressed,
/// a figure changed against the baseline, a budget changed, or a comparison
/// could not be made.
pub fn noteworthy(report: &Report) -> bool {
    !report.summary.passed_run()
        || !report.summary.budget_changes.is_empty()
        || report.summary.not_compared > 0
        || report.results.iter().any(|r| {
            matches!(r.status, Status::Fail | Status::Regressed | Status::Acknowledged)
                || r.delta().is_some_and(|d| d != 0.0)
        })
}
