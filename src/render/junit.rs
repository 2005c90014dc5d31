//! JUnit XML: one testsuite per component plus one for the ensemble, one
//! testcase per budget. Failures carry `measured > budget (ratio)`; the
//! block attribution goes to system-out.

use junit_report::{ReportBuilder, TestCase, TestSuiteBuilder};
use time::{Duration, OffsetDateTime};

use crate::report::{Report, Status};
use crate::units::Bytes;

use super::{failure_message, limit_text, measured_text};

/// Renders the report; `timestamp` is the run's start (fixed in tests).
pub fn render(report: &Report, timestamp: OffsetDateTime) -> Result<String, junit_report::Error> {
    let mut suites = Vec::new();
    let mut names: Vec<&str> = report.components.keys().map(String::as_str).collect();
    if report.ensemble.is_some() {
        names.push("ensemble");
    }
    for name in names {
        let mut suite = TestSuiteBuilder::new(name);
        suite.set_timestamp(timestamp);
        for r in report.results.iter().filter(|r| r.component == name) {
            let case_name = format!("{}.{}", r.component, r.metric);
            let time = Duration::ZERO;
            let mut case = match r.status {
                Status::Pass => TestCase::success(&case_name, time),
                Status::Fail | Status::Regressed => {
                    TestCase::failure(&case_name, time, r.status.name(), &failure_message(r))
                }
                Status::NotMeasured => TestCase::skipped_with_cause(
                    &case_name,
                    "not_measured",
                    r.reason.as_deref().unwrap_or("not measured"),
                ),
            };
            case.set_classname(&format!("gate.{}", r.component));
            case.set_filepath(&report.spec);
            case.set_system_out(&format!(
                "{} budget {}, measured {} (line {})",
                r.metric,
                limit_text(r),
                measured_text(r),
                r.line
            ));
            suite.add_testcase(case);
        }
        if let Some(c) = report.components.get(name) {
            let mut out = String::new();
            if name.contains('@') || c.reference.is_some() {
                let figures: Vec<String> = super::table::VARIANT_METRICS
                    .iter()
                    .filter_map(|m| {
                        c.value(*m)
                            .map(|v| format!("{m} {}", crate::metric::format_value(m.unit(), v)))
                    })
                    .collect();
                out.push_str(&format!(
                    "variant ({}); against {}: {}\n",
                    super::table::variant_settings(c),
                    c.reference.as_deref().unwrap_or("itself (the reference)"),
                    figures.join(", ")
                ));
            }
            if let Some(e) = &c.error {
                out.push_str(&format!(
                    "{}: {}\n",
                    e.phase.as_deref().unwrap_or("not measured"),
                    e.reason
                ));
            }
            for b in c.blocks.iter().take(20) {
                let share = b.share_percent.map(|s| format!(" ({s:.1}%)")).unwrap_or_default();
                out.push_str(&format!(
                    "{} retains {}{share}, peak +{}\n",
                    b.name,
                    Bytes(b.retained_bytes.max(0) as u64),
                    Bytes(b.peak_bytes)
                ));
            }
            if !out.is_empty() {
                suite.set_system_out(&out);
            }
        }
        suites.push(suite.build());
    }
    // Warnings (not measured, no baseline, another testbed) are visible too:
    // skipped cases, or failures under --strict.
    if !report.summary.warnings.is_empty() {
        let mut suite = TestSuiteBuilder::new("gate");
        suite.set_timestamp(timestamp);
        for (i, w) in report.summary.warnings.iter().enumerate() {
            let name = format!("warning.{}", i + 1);
            let mut case = if report.summary.strict {
                TestCase::failure(&name, Duration::ZERO, "warning", w)
            } else {
                TestCase::skipped_with_cause(&name, "warning", w)
            };
            case.set_classname("gate.warnings");
            suite.add_testcase(case);
        }
        suites.push(suite.build());
    }
    let junit = ReportBuilder::new().add_testsuites(suites).build();
    let mut buf = Vec::new();
    junit.write_xml(&mut buf)?;
    Ok(String::from_utf8_lossy(&buf).into_owned())
}
