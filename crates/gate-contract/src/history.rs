//! The comment's history: for each budget that failed, regressed or was
//! acknowledged, its figure in the stored reports of the target branch
//! (oldest first) and in this run, each with the budget of its day, so a
//! budget that drifts up by small steps is seen. Pure. `gate check` writes
//! it as `history.json`; `gate comment` reads it back from an artifact, so
//! [`parse`] checks it like a baseline.

use serde::{Deserialize, Serialize};

use crate::report::{Report, Status};
use gate_spec::budget::Op;
use gate_spec::metric::Unit;
use gate_spec::units::SizeUnit;

/// The version of `history.json`.
pub const SCHEMA: u32 = 1;
/// Series kept at most (the first budgets in review order).
pub const MAX_SERIES: usize = 10;
/// Points per series at most: the stored reports and this run.
pub const MAX_POINTS: usize = 21;
/// `history.json` read at most this many bytes.
pub const MAX_BYTES: usize = 1 << 20;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct History {
    pub schema: u32,
    pub series: Vec<Series>,
    /// The entries left out, each said once: a stored report or a point that
    /// was not fit to show. Never written into `history.json` nor into a
    /// report, only printed (`warning: ...` on stderr), so plain sentences:
    /// a [`crate::report::Warning`]'s component and kind are for the
    /// renderers and `--strict`, which never see these, and no
    /// [`crate::report::WarningKind`] names them.
    #[serde(skip)]
    pub warnings: Vec<String>,
}

/// Whether `commit` is written as a commit SHA (7 to 64 hex digits): the
/// comment links it, so nothing else may pass for one.
pub fn is_sha(commit: &str) -> bool {
    (7..=64).contains(&commit.len()) && commit.chars().all(|c| c.is_ascii_hexdigit())
}

/// One budget over time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Series {
    pub component: String,
    pub metric: String,
    pub unit: Unit,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_unit: Option<SizeUnit>,
    /// Times: the limit was written in seconds (see `BudgetResult::limit_in_seconds`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub limit_in_seconds: bool,
    /// Oldest first; the last point is this run (`commit: None`).
    pub points: Vec<Point>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Point {
    /// The stored report's commit; `None` for this run.
    pub commit: Option<String>,
    pub value: Option<f64>,
    pub op: Op,
    pub limit: f64,
}

/// The series of `report`'s failing, regressed and acknowledged budgets
/// over `stored` (newest first, as the store walk finds them). Reports from
/// another testbed are left out: their figures are not comparable.
/// Whether a budget of this status gets a history: a failing, regressed
/// or acknowledged one. Reading the history costs GitHub requests, so
/// `gate check` asks for it only when some budget has one of these.
pub fn shown(status: Status) -> bool {
    matches!(status, Status::Fail | Status::Regressed | Status::Acknowledged)
}

pub fn series(report: &Report, stored: &[Report]) -> History {
    // A stored report whose commit is not a SHA is left out here, at the
    // writer, with a warning: written, it made every reader refuse the
    // whole file (#28 item 17).
    let mut warnings = Vec::new();
    let comparable: Vec<&Report> = stored
        .iter()
        .filter(|s| match s.commit.as_deref() {
            Some(c) if is_sha(c) => true,
            c => {
                warnings.push(format!(
                    "a stored report's commit {} is not a SHA: it is left out of the history",
                    c.map_or("(none)".to_string(), |c| format!(
                        "{:?}",
                        c.chars().take(80).collect::<String>()
                    ))
                ));
                false
            }
        })
        .filter(|s| report.testbed.comparable(&s.testbed))
        .take(MAX_POINTS - 1)
        .collect();
    let series = report
        .results
        .iter()
        .filter(|r| shown(r.status))
        .filter_map(|r| {
            let mut points: Vec<Point> = comparable
                .iter()
                .rev()
                .filter_map(|s| {
                    let b = s
                        .results
                        .iter()
                        .find(|b| b.component == r.component && b.metric == r.metric)?;
                    Some(Point {
                        commit: s.commit.clone(),
                        value: b.measured,
                        op: b.op,
                        limit: b.limit,
                    })
                })
                .collect();
            if points.is_empty() {
                return None;
            }
            points.push(Point {
                commit: None,
                value: r.measured,
                op: r.op,
                limit: r.limit,
            });
            Some(Series {
                component: r.component.to_string(),
                metric: r.metric.to_string(),
                unit: r.unit,
                display_unit: r.display_unit,
                limit_in_seconds: r.limit_in_seconds,
                points,
            })
        })
        .take(MAX_SERIES)
        .collect();
    History {
        schema: SCHEMA,
        series,
        warnings,
    }
}

/// Parses `history.json` from an artifact. What makes the whole file
/// unusable (not JSON, another schema, over [`MAX_BYTES`]) is an error; a
/// bad entry (a commit that is not a SHA, a figure that is not finite, a
/// series or point past the bounds) is left out with a warning in
/// [`History::warnings`], and the rest is shown.
pub fn parse(text: &str) -> Result<History, String> {
    if text.len() > MAX_BYTES {
        return Err(format!("history.json is over {MAX_BYTES} bytes"));
    }
    let mut h: History = serde_json::from_str(text).map_err(|e| format!("history.json is not a history: {e}"))?;
    if h.schema != SCHEMA {
        return Err(format!(
            "history.json has schema {}, this gate reads {SCHEMA}",
            h.schema
        ));
    }
    let mut warnings = Vec::new();
    if h.series.len() > MAX_SERIES {
        warnings.push(format!(
            "history.json has {} series, at most {MAX_SERIES}: the rest are left out",
            h.series.len()
        ));
        h.series.truncate(MAX_SERIES);
    }
    for s in &mut h.series {
        let whose = format!("history.json: {}.{}", s.component, s.metric);
        let before = s.points.len();
        s.points.retain(|p| {
            p.commit.as_deref().is_none_or(is_sha) && p.limit.is_finite() && p.value.is_none_or(f64::is_finite)
        });
        if s.points.len() < before {
            warnings.push(format!(
                "{whose}: {} point(s) left out (a commit that is not a SHA, or a figure that is not finite)",
                before - s.points.len()
            ));
        }
        if s.points.len() > MAX_POINTS {
            warnings.push(format!(
                "{whose} has {} points, at most {MAX_POINTS}: the oldest are left out",
                s.points.len()
            ));
            s.points.drain(..s.points.len() - MAX_POINTS);
        }
    }
    h.series.retain(|s| !s.points.is_empty());
    h.warnings = warnings;
    Ok(h)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A report measured on `backend` (a CPU run's testbed is any CPU).
    fn report(commit: Option<&str>, backend: &str, figures: &[(&str, f64, Status)]) -> Report {
        let results: Vec<serde_json::Value> = figures
            .iter()
            .map(|(metric, v, status)| {
                serde_json::json!({
                    "component": "m", "metric": metric, "unit": "bytes", "op": "<", "limit": 100.0,
                    "measured": v, "baseline": null, "tolerance_percent": 5.0, "status": status.name(),
                    "line": 3, "reason": null,
                })
            })
            .collect();
        serde_json::from_value(serde_json::json!({
            "schema": 1, "gate_version": "0", "commit": commit, "spec": "b.yaml",
            "testbed": { "backend": backend, "device_name": "d", "capacity_bytes": 1, "gated_device": "x",
                "device_total_bytes": null, "driver": null, "cuda": null, "candle_version": "0", "os": "linux", "arch": "x" },
            "components": {}, "ensemble": null, "results": results,
            "summary": { "status": "pass", "passed": 0, "failed": 0, "regressed": 0, "not_measured": 0,
                "warnings": [], "strict": false },
            "baseline": null, "wall_seconds": 0.0,
        }))
        .unwrap()
    }

    #[test]
    fn failing_budgets_get_their_figures_oldest_first_from_comparable_reports() {
        let now = report(
            None,
            "cpu",
            &[("params", 90.0, Status::Regressed), ("activations", 10.0, Status::Pass)],
        );
        // Newest first, as the store walk finds them; one from another testbed.
        let stored = [
            report(Some("cccccccc"), "cpu", &[("params", 80.0, Status::Pass)]),
            report(Some("bbbbbbbb"), "gpu", &[("params", 1.0, Status::Pass)]),
            report(Some("aaaaaaaa"), "cpu", &[("params", 70.0, Status::Pass)]),
        ];
        let h = series(&now, &stored);
        assert_eq!(h.series.len(), 1, "passing budgets have no history");
        let points: Vec<(Option<&str>, Option<f64>)> = h.series[0]
            .points
            .iter()
            .map(|p| (p.commit.as_deref(), p.value))
            .collect();
        assert_eq!(
            points,
            [
                (Some("aaaaaaaa"), Some(70.0)),
                (Some("cccccccc"), Some(80.0)),
                (None, Some(90.0))
            ]
        );
        // Round trip through history.json, and what an artifact may not carry.
        let text = serde_json::to_string(&h).unwrap();
        assert_eq!(parse(&text), Ok(h.clone()));
        // A bad point is left out, not the whole file.
        let bad = parse(&text.replace("aaaaaaaa", "javascript:x")).unwrap();
        assert_eq!(bad.series[0].points, h.series[0].points[1..]);
        assert_eq!(
            bad.warnings,
            ["history.json: m.params: 1 point(s) left out (a commit that is not a SHA, or a figure that is not finite)"]
        );
        assert_eq!(
            parse(&text.replace("\"schema\":1", "\"schema\":2")),
            Err("history.json has schema 2, this gate reads 1".into())
        );
        assert!(series(&now, &[]).series.is_empty(), "no stored report, no history");
    }

    /// A stored report whose commit is not a SHA is dropped at the writer,
    /// with a warning; the others still make the history (#28 item 17).
    #[test]
    fn a_stored_report_without_a_sha_is_left_out_with_a_warning() {
        let now = report(None, "cpu", &[("params", 90.0, Status::Regressed)]);
        let stored = [
            report(Some("cccccccc"), "cpu", &[("params", 80.0, Status::Pass)]),
            report(Some("main"), "cpu", &[("params", 75.0, Status::Pass)]),
            report(None, "cpu", &[("params", 72.0, Status::Pass)]),
            report(Some("aaaaaaaa"), "cpu", &[("params", 70.0, Status::Pass)]),
        ];
        let h = series(&now, &stored);
        let commits: Vec<Option<&str>> = h.series[0].points.iter().map(|p| p.commit.as_deref()).collect();
        assert_eq!(commits, [Some("aaaaaaaa"), Some("cccccccc"), None]);
        assert_eq!(
            h.warnings,
            [
                "a stored report's commit \"main\" is not a SHA: it is left out of the history",
                "a stored report's commit (none) is not a SHA: it is left out of the history",
            ]
        );
        // What it writes, every reader takes whole.
        let read = parse(&serde_json::to_string(&h).unwrap()).unwrap();
        assert_eq!(read.series, h.series);
        assert!(read.warnings.is_empty());
    }
}
