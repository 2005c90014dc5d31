//! Snapshots (insta) of the terminal table and the JUnit XML, rendered from a
//! real report: the repository's budgets measured on an H200 on 2026-12-02
//! (tests/fixtures/report-h200.json; the TFT fails, the others pass).

use gate::__private::report::Report;

fn fixture() -> Report {
    serde_json::from_str(include_str!("fixtures/report-h200.json")).expect("the fixture is a schema-1 report")
}

#[test]
fn table_without_colour() {
    insta::assert_snapshot!(gate::__private::render::table::render(&fixture(), false));
}

#[test]
fn table_with_colour_marks_only_statuses() {
    let text = gate::__private::render::table::render(&fixture(), true);
    let plain = gate::__private::render::table::render(&fixture(), false);
    // Colour adds escape codes around statuses and the verdict, nothing else.
    let stripped = text
        .replace("\x1b[31m", "")
        .replace("\x1b[32m", "")
        .replace("\x1b[33m", "")
        .replace("\x1b[0m", "");
    assert_eq!(stripped, plain);
    assert!(text.contains("\x1b[31mfail"));
}

#[test]
fn junit_xml() {
    let ts = time::OffsetDateTime::from_unix_timestamp(1_764_684_000).unwrap();
    let xml = gate::__private::render::junit::render(&fixture(), ts).unwrap();
    insta::assert_snapshot!(xml);
}

#[test]
fn the_report_round_trips_through_json() {
    let r = fixture();
    let again: Report = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
    assert_eq!(r, again);
}
