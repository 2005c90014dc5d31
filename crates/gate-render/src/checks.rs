//! A check run's output (the Checks API's `output`): its title, its summary
//! (the comment's own Markdown, passed in, so both say the same) and one
//! annotation per budget that needs a look, at that budget's line of the
//! spec. Pure: report in, output out. The conclusion is not decided here: it
//! is read from the verdict (see `gate_github::checks::conclusion`).
//!
//! GitHub's limits (its REST reference, "Create a check run", and the
//! `@octokit/openapi` description of it): `summary` at most 65,535
//! characters, an annotation's `title` at most 255, its `message` 64 KB;
//! but GitHub counts the summary in *bytes*: a longer UTF-8 body is refused
//! with 422 "summary exceeds a maximum bytesize of 65535" (github/docs#35252,
//! dorny/test-reporter#57), so the summary is cut by bytes, at a character;
//! at most 50 annotations per request (more go in later updates of the same
//! check run, in batches of 50).

use serde::Serialize;

use gate_contract::report::{Report, Status};

use super::failure_message;

/// The most bytes (UTF-8) of a check run's summary: GitHub checks its bytesize.
pub const SUMMARY_LIMIT: usize = 65_535;
/// The most characters of an annotation's title.
const TITLE_LIMIT: usize = 255;
/// The most characters gate puts in an annotation's message (GitHub takes 64 KB).
const MESSAGE_LIMIT: usize = 4_000;
/// The most annotations one check run gets from gate (20 requests of 50).
pub const MAX_ANNOTATIONS: usize = 1_000;

/// One annotation, as the Checks API takes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Annotation {
    pub path: String,
    pub start_line: u32,
    pub end_line: u32,
    /// `failure`, `warning` or `notice`.
    pub annotation_level: &'static str,
    pub title: String,
    pub message: String,
}

/// A check run's output, before it is sent in batches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Output {
    pub title: String,
    pub summary: String,
    pub annotations: Vec<Annotation>,
}

/// The output for `report`. `summary` is the rendered comment body (cut to
/// [`SUMMARY_LIMIT`] bytes, at a character boundary, if longer). Annotations need the spec's path
/// in the repository: a relative path without `..`; an absolute one (a spec
/// outside the checkout) gets none, as GitHub refuses paths it cannot find.
pub fn render(report: &Report, summary: &str) -> Output {
    Output {
        title: cut(
            &format!("gate: {} — {}", verdict_word(report), crate::counts(report)),
            TITLE_LIMIT,
        ),
        summary: cut_bytes(summary, SUMMARY_LIMIT),
        annotations: annotations(report),
    }
}

/// `PASS` or `FAIL`, as the verdict says; `NOT CONFIRMED` for a pass that
/// rests on an acknowledgement no one's stands for.
fn verdict_word(report: &Report) -> &'static str {
    if report.summary.pass_unconfirmed() {
        "NOT CONFIRMED"
    } else if report.summary.passed_run() {
        "PASS"
    } else {
        "FAIL"
    }
}

/// The spec's path in the repository, when it is one.
pub fn repo_path(spec: &str) -> Option<String> {
    let p = spec.trim().trim_start_matches("./");
    let ok = !p.is_empty()
        && !p.starts_with('/')
        && !p.contains('\\')
        && !p.contains(':')
        && p.split('/').all(|part| !part.is_empty() && part != "..");
    ok.then(|| p.to_string())
}

/// One annotation per failing, regressed, acknowledged, inconclusive or
/// unmeasured budget (failures first), at its line; `failure` for what
/// failed the run, `warning` for the rest (`failure` under `--strict`,
/// which fails on them too).
fn annotations(report: &Report) -> Vec<Annotation> {
    let Some(path) = repo_path(&report.spec) else {
        return Vec::new();
    };
    let strict = report.summary.strict;
    let mut out = Vec::new();
    for (status, level) in [
        (Status::Fail, "failure"),
        (Status::Regressed, "failure"),
        (Status::Acknowledged, "warning"),
        (Status::Inconclusive, if strict { "failure" } else { "warning" }),
        (Status::NotMeasured, if strict { "failure" } else { "warning" }),
    ] {
        for r in report.results.iter().filter(|r| r.status == status && r.line > 0) {
            let message = match r.status {
                Status::NotMeasured | Status::Inconclusive => r.reason.clone().unwrap_or_default(),
                _ => failure_message(r),
            };
            let line = u32::try_from(r.line).unwrap_or(u32::MAX);
            out.push(Annotation {
                path: path.clone(),
                start_line: line,
                end_line: line,
                annotation_level: level,
                title: cut(
                    &format!("gate: {}.{} {}", r.component, r.metric, r.status.name()),
                    TITLE_LIMIT,
                ),
                message: cut(&format!("{}.{}: {message}", r.component, r.metric), MESSAGE_LIMIT),
            });
        }
    }
    out.truncate(MAX_ANNOTATIONS);
    out
}

/// `text` on one line (a control character, a line break included, shown
/// as a space: a title or message names what a model chose), cut to `max`
/// characters (the last one `…` when cut).
fn cut(text: &str, max: usize) -> String {
    let text: String = text.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    if text.chars().count() <= max {
        return text;
    }
    let mut s: String = text.chars().take(max - 1).collect();
    s.push('…');
    s
}

/// `text` cut to at most `max` bytes of UTF-8, never inside a character
/// (the last one `…`, 3 bytes, when cut).
fn cut_bytes(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max.saturating_sub('…'.len_utf8());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let mut s = text[..end].to_string();
    s.push('…');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_path_in_the_repository_is_annotated() {
        assert_eq!(repo_path("budgets.yaml").as_deref(), Some("budgets.yaml"));
        assert_eq!(repo_path("./examples/mlp.yaml").as_deref(), Some("examples/mlp.yaml"));
        for bad in ["/tmp/x/budgets.yaml", "../b.yaml", "a//b", "C:\\b.yaml", ""] {
            assert_eq!(repo_path(bad), None, "{bad}");
        }
    }

    #[test]
    fn cut_keeps_the_limit_in_characters() {
        assert_eq!(cut("abc", 3), "abc");
        assert_eq!(cut("abcd", 3), "ab…");
        assert_eq!(cut(&"é".repeat(300), TITLE_LIMIT).chars().count(), TITLE_LIMIT);
    }

    #[test]
    fn the_summary_is_cut_by_bytes_at_a_character_boundary() {
        // 40,000 characters, 120,000 bytes: under the limit in characters.
        let long = "—".repeat(40_000);
        let s = cut_bytes(&long, SUMMARY_LIMIT);
        assert!(s.len() <= SUMMARY_LIMIT, "{} bytes", s.len());
        assert!(s.len() > SUMMARY_LIMIT - 6, "cut no further than it must: {}", s.len());
        assert!(s.ends_with('…'));
        // a 4-byte character straddling the limit is dropped whole
        let mixed = format!("{}✂️{}", "a".repeat(SUMMARY_LIMIT - 5), "b".repeat(10));
        let s = cut_bytes(&mixed, SUMMARY_LIMIT);
        assert!(s.len() <= SUMMARY_LIMIT && s.ends_with('…'));
        assert_eq!(cut_bytes("short", SUMMARY_LIMIT), "short");
    }
}
