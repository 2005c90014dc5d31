//! JUnit XML: one testsuite per component, its variants' budgets as cases
//! of the same suite (`tft@plain.step_time`) and their settings as
//! properties; one suite for the ensemble; and one for the run (`gate`)
//! when something is run-wide. A case's time is that of the phases that
//! measured its metric, a suite's the wall time of its profiles (reports
//! from before they were recorded give 0).
//!
//! Warnings are not tests: they go to the `<system-err>` of the suite they
//! concern. Under `--strict` the run's suite holds one case, `gate.strict`,
//! which fails naming each warning the run failed on.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write;

use time::OffsetDateTime;

use gate_contract::report::{BudgetResult, ComponentReport, Report, Status, Subject, Warning};
use gate_spec::metric::Metric;
use gate_spec::units::Bytes;

use super::{failure_message, limit_text, measured_text};

/// Blocks listed per component in its suite's system-out.
const BLOCKS: usize = 20;

/// Renders the report; `timestamp` is the run's start (fixed in tests).
pub fn render(report: &Report, timestamp: OffsetDateTime) -> Result<String, std::fmt::Error> {
    let stamp = rfc3339(timestamp);
    let mut names = Names::default();
    let mut suites = Vec::new();

    let groups = groups(report);
    let (mut warnings_of, mut run_wide) = warnings_by_suite(&report.summary.warnings, &groups);
    // Each suite's results, found once: a suite that searched every result
    // made JUnit quadratic in components (issue #43 item 5).
    let mut results_of: HashMap<&str, Vec<&BudgetResult>> = HashMap::new();
    for r in &report.results {
        results_of.entry(base_of(r.component.as_str())).or_default().push(r);
    }
    for (base, members) in &groups {
        let warnings = warnings_of.remove(base).unwrap_or_default();
        let results = results_of.remove(base).unwrap_or_default();
        match component_suite(report, base, members, &results, &stamp, &mut names, &warnings)? {
            Some(s) => suites.push(s),
            // No budget, no test: what it warned about is still said, run-wide.
            None => run_wide.extend(warnings),
        }
    }

    let ensemble_warnings = warnings_of.remove(Subject::ENSEMBLE).unwrap_or_default();
    match ensemble_suite(report, &stamp, &mut names, &ensemble_warnings)? {
        Some(s) => suites.push(s),
        // No ensemble budget: its warnings are said run-wide.
        None => run_wide.extend(ensemble_warnings),
    }
    // Warnings about a component no suite shows (not in this report).
    run_wide.extend(warnings_of.into_values().flatten());

    let mut strict = Counts::default();
    // The run's notes too: they say how figures were measured (e.g. not
    // from the CUDA pool), which a reader of the tests must see.
    if report.summary.strict || !run_wide.is_empty() || !report.summary.notes.is_empty() {
        let (s, counts) = run_suite(report, &stamp, &mut names, &run_wide)?;
        suites.push(s);
        strict = counts;
    }

    let mut total = cases_summary(&report.results);
    total.tests += strict.tests;
    total.failures += strict.failures;
    let mut xml = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    writeln!(
        xml,
        "<testsuites name=\"gate\" tests=\"{}\" failures=\"{}\" errors=\"0\" skipped=\"{}\" time=\"{}\" timestamp=\"{stamp}\">",
        total.tests,
        total.failures,
        total.skipped,
        seconds(report.wall_seconds)
    )?;
    for s in suites {
        xml.push_str(&s);
    }
    xml.push_str("</testsuites>\n");
    Ok(xml)
}

/// The ensemble's suite, one case per ensemble budget; `None` without one.
fn ensemble_suite(
    report: &Report,
    stamp: &str,
    names: &mut Names,
    warnings: &[&str],
) -> Result<Option<String>, std::fmt::Error> {
    let cases: Vec<String> = report
        .results
        .iter()
        .filter(|r| r.component.is_ensemble())
        .map(|r| {
            case(
                report,
                r,
                &names.unique(format!("{}.{}", Subject::ENSEMBLE, r.metric)),
                0.0,
            )
        })
        .collect::<Result<_, _>>()?;
    if cases.is_empty() {
        return Ok(None);
    }
    let counts = cases_summary(report.results.iter().filter(|r| r.component.is_ensemble()));
    suite(Subject::ENSEMBLE, stamp, 0.0, &[], &counts, &cases, "", warnings).map(Some)
}

/// Each base component with its variants (`NAME@VARIANT`), base first.
fn groups(report: &Report) -> BTreeMap<&str, Vec<&str>> {
    let mut groups: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    let results_of = report.results.iter().filter_map(|r| r.component.component());
    for name in report.components.keys().map(String::as_str).chain(results_of) {
        let members = groups.entry(base_of(name)).or_default();
        if !members.contains(&name) {
            members.push(name);
        }
    }
    for members in groups.values_mut() {
        members.sort_by_key(|m| (gate_spec::name::is_variant(m), *m));
    }
    groups
}

/// Warnings by the suite they concern, and those about the whole run.
type Warnings<'a> = (BTreeMap<&'a str, Vec<&'a str>>, Vec<&'a str>);

/// The verdict's warnings by the suite they concern (a base component or
/// `ensemble`, from each warning's component), and those about the whole
/// run or about a component this report does not hold.
fn warnings_by_suite<'a>(warnings: &'a [Warning], groups: &BTreeMap<&'a str, Vec<&'a str>>) -> Warnings<'a> {
    let members: HashSet<&str> = groups.values().flatten().copied().collect();
    let known = |c: &str| c == Subject::ENSEMBLE || members.contains(c);
    let mut run_wide = Vec::new();
    let mut warnings_of: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for w in warnings {
        match w.component.as_deref().filter(|c| known(c)) {
            Some(c) => warnings_of.entry(base_of(c)).or_default().push(w.as_str()),
            None => run_wide.push(w.as_str()),
        }
    }
    (warnings_of, run_wide)
}

/// The suite of base component `base` and its variants `members`; `None`
/// when none of them has a budget.
fn component_suite(
    report: &Report,
    base: &str,
    members: &[&str],
    results: &[&BudgetResult],
    stamp: &str,
    names: &mut Names,
    warnings: &[&str],
) -> Result<Option<String>, std::fmt::Error> {
    let cases: Vec<String> = results
        .iter()
        .map(|r| {
            let time = report
                .components
                .get(r.component.as_str())
                .map_or(0.0, |c| metric_seconds(c, r));
            case(report, r, &names.unique(format!("{}.{}", r.component, r.metric)), time)
        })
        .collect::<Result<_, _>>()?;
    if cases.is_empty() {
        return Ok(None);
    }
    let with_variants = members.len() > 1;
    let mut properties = Vec::new();
    let mut out = String::new();
    let mut seconds = 0.0;
    for m in members {
        let Some(c) = report.components.get(*m) else {
            continue;
        };
        seconds += c.profile_seconds.unwrap_or(0.0);
        properties.push((format!("{m}.settings"), settings(c)));
        if let Some(r) = &c.reference {
            properties.push((format!("{m}.reference"), r.clone()));
        }
        component_out(&mut out, m, c, with_variants);
    }
    suite(
        base,
        stamp,
        seconds,
        &properties,
        &cases_summary(results.iter().copied()),
        &cases,
        &out,
        warnings,
    )
    .map(Some)
}

/// The run's suite (`gate`): the run's settings as properties, the
/// `gate.strict` case under `--strict`, and the run-wide warnings; with its counts.
fn run_suite(
    report: &Report,
    stamp: &str,
    names: &mut Names,
    run_wide: &[&str],
) -> Result<(String, Counts), std::fmt::Error> {
    let s = &report.summary;
    let mut strict = Counts::default();
    let mut cases = Vec::new();
    if s.strict {
        let (case, failed) = strict_case(report, names)?;
        cases.push(case);
        strict.tests = 1;
        strict.failures = usize::from(failed);
    }
    let testbed = &report.testbed;
    let properties = [
        ("gate_version".to_string(), report.gate_version.clone()),
        ("spec".to_string(), report.spec.clone()),
        (
            "testbed".to_string(),
            format!("{} ({})", testbed.device_name, testbed.backend),
        ),
        (
            "baseline".to_string(),
            report.baseline.as_ref().map_or("none".into(), |b| b.source.clone()),
        ),
        ("strict".to_string(), s.strict.to_string()),
    ];
    // The run's notes (how some figures were measured) as the suite's output.
    let notes: Vec<String> = s.notes.iter().map(|n| format!("note: {n}")).collect();
    let suite = suite(
        "gate",
        stamp,
        0.0,
        &properties,
        &strict,
        &cases,
        &notes.join("\n"),
        run_wide,
    )?;
    Ok((suite, strict))
}

/// Under --strict every warning fails the run: one case says which (and
/// whether it failed).
fn strict_case(report: &Report, names: &mut Names) -> Result<(String, bool), std::fmt::Error> {
    let s = &report.summary;
    let mut failed_on: Vec<String> = s.warnings.iter().map(|w| w.text.clone()).collect();
    if failed_on.is_empty() && s.not_measured > 0 {
        failed_on.push(format!("{} budget(s) not measured", s.not_measured));
    }
    let name = names.unique("gate.strict".into());
    let mut x = String::new();
    write!(
        x,
        "    <testcase name=\"{}\" classname=\"gate\" time=\"0\"",
        attr(&name)
    )?;
    if failed_on.is_empty() {
        x.push_str(">\n      <system-out>--strict: no warnings</system-out>\n    </testcase>\n");
    } else {
        write!(
            x,
            ">\n      <failure type=\"strict\" message=\"{}\">{}</failure>\n    </testcase>\n",
            attr(&format!(
                "--strict: failed on {} warning(s): {}",
                failed_on.len(),
                failed_on.join("; ")
            )),
            text(&failed_on.join("\n"))
        )?;
    }
    Ok((x, !failed_on.is_empty()))
}

/// `tft` for `tft@plain`.
fn base_of(name: &str) -> &str {
    gate_spec::name::base_of(name)
}

/// Test names, each used once in the file.
#[derive(Default)]
struct Names(HashSet<String>);

impl Names {
    fn unique(&mut self, name: String) -> String {
        let mut candidate = name.clone();
        let mut n = 1;
        while !self.0.insert(candidate.clone()) {
            n += 1;
            candidate = format!("{name}#{n}");
        }
        candidate
    }
}

#[derive(Default)]
struct Counts {
    tests: usize,
    failures: usize,
    skipped: usize,
}

/// Counts of `results`.
fn cases_summary<'a>(results: impl IntoIterator<Item = &'a BudgetResult>) -> Counts {
    let mut c = Counts::default();
    for r in results {
        c.tests += 1;
        match r.status {
            Status::Pass | Status::Acknowledged => {}
            Status::Fail | Status::Regressed => c.failures += 1,
            // Warnings, not failures (`--strict` fails the run on them).
            Status::NotMeasured | Status::Inconclusive => c.skipped += 1,
        }
    }
    c
}

/// The time of the phases that measured `r`'s metric in `c`'s profile
/// (none for a budget with no value: nothing measured it).
fn metric_seconds(c: &ComponentReport, r: &BudgetResult) -> f64 {
    let Some(metric) = r.metric.metric().filter(|_| r.measured.is_some()) else {
        return 0.0;
    };
    let phases: Vec<String> = gate_contract::measurement::measured_in(metric)
        .iter()
        .map(|p| p.to_string())
        .collect();
    c.phase_seconds
        .iter()
        .filter(|p| phases.contains(&p.phase))
        .map(|p| p.seconds)
        .sum()
}

/// One budget as a testcase.
fn case(report: &Report, r: &BudgetResult, name: &str, time: f64) -> Result<String, std::fmt::Error> {
    let mut x = String::new();
    writeln!(
        x,
        "    <testcase name=\"{}\" classname=\"gate.{}\" file=\"{}\" time=\"{}\">",
        attr(name),
        attr(base_of(r.component.as_str())),
        attr(&report.spec),
        seconds(time)
    )?;
    match r.status {
        Status::Pass | Status::Acknowledged => {}
        Status::Fail | Status::Regressed => writeln!(
            x,
            "      <failure type=\"{}\" message=\"{}\"/>",
            r.status.name(),
            attr(&with_fix(report, r, failure_message(r)))
        )?,
        Status::NotMeasured => writeln!(
            x,
            "      <skipped message=\"{}\"/>",
            attr(r.reason.as_deref().unwrap_or("not measured"))
        )?,
        Status::Inconclusive => writeln!(
            x,
            "      <skipped message=\"inconclusive: {}\"/>",
            attr(r.reason.as_deref().unwrap_or(""))
        )?,
    }
    writeln!(
        x,
        "      <system-out>{}</system-out>\n    </testcase>",
        text(&comparison_note(
            r,
            format!(
                "{} budget {}, measured {} (line {}){}",
                r.metric,
                limit_text(r),
                measured_text(r),
                r.line,
                // JUnit has no warning: an accepted regression passes and says so.
                match (r.status, &report.summary.acknowledgement) {
                    (Status::Acknowledged, Some(a)) =>
                        format!("; regressed, {}: {}", crate::acknowledged_by(a), failure_message(r)),
                    (Status::Acknowledged, None) => format!("; regressed, acknowledged: {}", failure_message(r)),
                    _ => String::new(),
                }
            )
        ))
    )?;
    Ok(x)
}

/// A case's system-out with what the comment says of its comparison: the
/// baseline's figure, why it was not compared, a budget changed in this PR.
fn comparison_note(r: &BudgetResult, mut out: String) -> String {
    if let Some(b) = r.baseline {
        out.push_str(&format!("; baseline {}", super::value_text(r, b)));
    }
    if let Some(why) = &r.not_compared {
        out.push_str(&format!(" (not compared: {why})"));
    }
    if let Some(why) = &r.config_changed {
        out.push_str(&format!(" (compared across a settings change: {why})"));
    }
    if let Some(was) = super::baseline_limit_text(r) {
        out.push_str(&format!("; budget was {was} before this change"));
    }
    out
}

#[allow(clippy::too_many_arguments)]
fn suite(
    name: &str,
    stamp: &str,
    time: f64,
    properties: &[(String, String)],
    counts: &Counts,
    cases: &[String],
    out: &str,
    warnings: &[&str],
) -> Result<String, std::fmt::Error> {
    let mut x = String::new();
    writeln!(
        x,
        "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"0\" skipped=\"{}\" time=\"{}\" timestamp=\"{stamp}\">",
        attr(name),
        counts.tests,
        counts.failures,
        counts.skipped,
        seconds(time)
    )?;
    if !properties.is_empty() {
        x.push_str("    <properties>\n");
        for (k, v) in properties {
            writeln!(x, "      <property name=\"{}\" value=\"{}\"/>", attr(k), attr(v))?;
        }
        x.push_str("    </properties>\n");
    }
    for c in cases {
        x.push_str(c);
    }
    if !out.is_empty() {
        writeln!(x, "    <system-out>{}</system-out>", text(out))?;
    }
    if !warnings.is_empty() {
        let lines: Vec<String> = warnings.iter().map(|w| format!("warning: {w}")).collect();
        writeln!(x, "    <system-err>{}</system-err>", text(&lines.join("\n")))?;
    }
    x.push_str("  </testsuite>\n");
    Ok(x)
}

/// A component's settings in a few words: workload, dtype, batch, checkpointing.
fn settings(c: &ComponentReport) -> String {
    format!("{}, {}", c.workload, super::table::variant_settings(c))
}

/// What a suite's system-out says of one member: its figures against the
/// reference (variants), why it failed, where its activations go.
fn component_out(out: &mut String, name: &str, c: &ComponentReport, with_variants: bool) {
    let lead = if with_variants {
        format!("{name}: ")
    } else {
        String::new()
    };
    if with_variants {
        let figures: Vec<String> = [
            Metric::TrainingPeak,
            Metric::Activations,
            Metric::InferencePeak,
            Metric::StepTime,
            Metric::Loss,
            Metric::LossRatio,
            Metric::StepTimeRatio,
        ]
        .iter()
        .filter_map(|m| {
            c.value(*m)
                .map(|v| format!("{m} {}", gate_spec::metric::format_value(m.unit(), v)))
        })
        .collect();
        let _ = writeln!(
            out,
            "{lead}against {}: {}",
            c.reference.as_deref().unwrap_or("itself (the reference)"),
            if figures.is_empty() {
                "—".into()
            } else {
                figures.join(", ")
            }
        );
    }
    if let Some(e) = &c.error {
        let _ = writeln!(
            out,
            "{lead}{}: {}",
            e.phase.as_deref().unwrap_or("not measured"),
            e.reason
        );
    }
    for b in c.blocks.iter().take(BLOCKS) {
        let share = b.share_percent.map(|s| format!(" ({s:.1}%)")).unwrap_or_default();
        let _ = writeln!(
            out,
            "{lead}{} retains {}{share}, peak +{}",
            b.name,
            Bytes(b.retained_bytes.max(0) as u64),
            Bytes(b.peak_bytes)
        );
    }
}

/// Seconds with at most microsecond digits: `12.5`, `0.000421`, `0`.
fn seconds(s: f64) -> String {
    // (An empty sum is -0.0.)
    if !(s > 0.0 && s.is_finite()) {
        return "0".into();
    }
    let s = format!("{s:.6}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// `2025-12-02T14:00:00Z`.
fn rfc3339(t: OffsetDateTime) -> String {
    let t = t.to_offset(time::UtcOffset::UTC);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second()
    )
}

/// Text content: markup escaped, and characters XML 1.0 cannot hold replaced.
fn text(s: &str) -> String {
    escape(s, false)
}

/// An attribute value (line breaks kept as character references).
fn attr(s: &str) -> String {
    escape(s, true)
}

fn escape(s: &str, attribute: bool) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' if attribute => out.push_str("&quot;"),
            '\n' if attribute => out.push_str("&#10;"),
            '\r' => out.push_str("&#13;"),
            '\t' if attribute => out.push_str("&#9;"),
            '\n' | '\t' => out.push(c),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

/// A failing budget's message, with its component's measured fix where
/// `gate check --plan` found one.
fn with_fix(report: &Report, r: &BudgetResult, message: String) -> String {
    match super::view::fix_words(report, r.component.as_str(), |t| format!("`{t}`")) {
        Some(fix) if !r.component.is_ensemble() => format!("{message} — {fix}"),
        _ => message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_and_control_characters_are_escaped() {
        assert_eq!(attr("a<b & \"c\"\nd\u{1b}"), "a&lt;b &amp; &quot;c&quot;&#10;d\u{FFFD}");
        assert_eq!(text("x > y\n]]>"), "x &gt; y\n]]&gt;");
    }

    #[test]
    fn seconds_keep_microseconds_and_drop_trailing_zeros() {
        assert_eq!(seconds(12.5), "12.5");
        assert_eq!(seconds(0.000421), "0.000421");
        assert_eq!(seconds(0.0), "0");
        assert_eq!(seconds(-0.0), "0");
        assert_eq!(seconds(100.0), "100");
        assert_eq!(seconds(3.0), "3");
    }

    #[test]
    fn a_warning_goes_to_the_suite_of_its_component() {
        use gate_contract::report::WarningKind;
        let groups = BTreeMap::from([("tft", vec!["tft", "tft@plain"])]);
        let w = |c: Option<&str>, text: &str| Warning::new(c, WarningKind::Other, text);
        let warnings = [
            // The component says where it goes, not the text.
            w(Some("tft@plain"), "said about the variant"),
            w(Some("ensemble"), "said about the ensemble"),
            w(None, "tft: run-wide, whatever its text says"),
            // A component no suite shows (a ghost variant too) is run-wide.
            w(Some("tfts"), "tfts: x"),
            w(Some("tft@ghost"), "tft@ghost: x"),
        ];
        let (of, run_wide) = warnings_by_suite(&warnings, &groups);
        assert_eq!(
            of,
            BTreeMap::from([
                ("tft", vec!["said about the variant"]),
                ("ensemble", vec!["said about the ensemble"]),
            ])
        );
        assert_eq!(
            run_wide,
            ["tft: run-wide, whatever its text says", "tfts: x", "tft@ghost: x"]
        );
    }

    #[test]
    fn a_repeated_name_gets_a_number() {
        let mut n = Names::default();
        assert_eq!(n.unique("a.b".into()), "a.b");
        assert_eq!(n.unique("a.b".into()), "a.b#2");
        assert_eq!(n.unique("a.b".into()), "a.b#3");
    }
}
