//! What a pull request's model chooses (its component, block and parameter
//! names, the text of its warnings, notes and failures) rendered into every
//! output gate writes (#54 item 1): the comment and step summary, the check
//! run's title, summary and annotations, JUnit and the terminal table. None
//! of it reaches Markdown raw: no line break, no HTML but gate's own tags,
//! no @mention, no link, no code span it opened, no extra table cell, and
//! nothing of it longer than a name's limit; and the headline of a
//! `--strict` failure on warnings alone is gate's own sentence.

use gate_contract::report::Report;
use gate_render::{checks, junit, markdown, table};
use serde_json::{json, Value};

/// Everything a hostile name tries at once: a line break that would start
/// a heading, raw HTML that would close gate's folds, a mention, a link to
/// `javascript:`, a code span, a table cell, and a very long tail.
fn hostile(tag: &str) -> String {
    format!(
        "{tag}\n# INJECTED {tag}</details></summary><img src=x onerror=alert(1)> @team \
         [click](javascript:alert(1)) <https://evil.example> `evil` | cell | {}",
        "Z".repeat(5_000)
    )
}

/// The h200 fixture, its `dqn` renamed to a hostile name, with hostile
/// blocks, a failure, a not-measured reason, a comparison note, a config
/// change, a budget change, a note and a warning.
fn hostile_report() -> Report {
    let mut r: Value = serde_json::from_str(include_str!("../fixtures/report-h200.json")).unwrap();
    let name = hostile("COMPONENT");
    let mut c = r["components"]["dqn"].take();
    // A `.` nests a block under another: these are top-level.
    c["blocks"][0]["name"] = json!(hostile("BLOCK").replace('.', "_"));
    c["blocks"][1]["name"] = json!(hostile("BLOCK2").replace('.', "_"));
    c["error"] = json!({
        "kind": "failed", "phase": hostile("PHASE"), "reason": hostile("REASON"), "failure_kind": "model",
    });
    let comps = r["components"].as_object_mut().unwrap();
    comps.remove("dqn");
    comps.insert(name.clone(), c);
    for res in r["results"].as_array_mut().unwrap() {
        if res["component"] == "dqn" {
            res["component"] = json!(name);
            res["status"] = json!("fail");
            res["measured"] = Value::Null;
            res["reason"] = json!(hostile("NOTMEASURED"));
        } else if res["component"] == "ppo" {
            res["not_compared"] = json!(hostile("NOTCOMPARED"));
            res["config_changed"] = json!(hostile("CONFIG"));
        }
    }
    r["summary"]["warnings"] = json!([hostile("WARNING")]);
    r["summary"]["notes"] = json!([hostile("NOTE")]);
    r["summary"]["budget_changes"] = json!([hostile("CHANGE")]);
    serde_json::from_value(r).unwrap()
}

/// A `--strict` run that fails on a warning alone, the warning the model's.
fn strict_warning_only() -> Report {
    let mut r: Value = serde_json::from_str(include_str!("../fixtures/report-h200.json")).unwrap();
    for res in r["results"].as_array_mut().unwrap() {
        res["status"] = json!("pass");
        res["measured"] = json!(1.0);
    }
    let n = r["results"].as_array().unwrap().len();
    r["summary"] = json!({
        "status": "fail", "passed": n, "failed": 0, "regressed": 0, "not_measured": 0,
        "warnings": [hostile("WARNING")], "strict": true,
    });
    serde_json::from_value(r).unwrap()
}

/// gate's own HTML tags in the comment; any other `<` is hostile.
const OWN_TAGS: [&str; 7] = [
    "<details>",
    "</details>",
    "<summary>",
    "</summary>",
    "<br>",
    "<sub>",
    "</sub>",
];

/// The ways `md` lets hostile text through as Markdown, for `what`.
fn markdown_problems(what: &str, md: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut say = |p: String| out.push(format!("{what}: {p}"));
    for (i, _) in md.match_indices('<') {
        if !OWN_TAGS.iter().any(|t| md[i..].starts_with(t)) {
            say(format!(
                "raw HTML at {:?}",
                md[i..].chars().take(40).collect::<String>()
            ));
        }
    }
    if md.lines().any(|l| l.trim_start().starts_with("# INJECTED")) {
        say("a line break started a heading".into());
    }
    if md.contains("@team") {
        say("a mention".into());
    }
    let link = md.match_indices("](").any(|(i, _)| i == 0 || !md[..i].ends_with('\\'));
    if link || md.contains("https://evil") {
        say("a link".into());
    }
    if md.contains("`evil`") {
        say("a code span".into());
    }
    if md.contains(&"Z".repeat(600)) {
        say("overlong text not cut".into());
    }
    // Every row of a table has its header's cells.
    let cells = |l: &str| {
        let b = l.as_bytes();
        (0..b.len())
            .filter(|&i| b[i] == b'|' && (i == 0 || b[i - 1] != b'\\'))
            .count()
    };
    let mut header: Option<usize> = None;
    for line in md.lines() {
        if line.starts_with('|') {
            let n = cells(line);
            match header {
                None => header = Some(n),
                Some(h) if h != n => say(format!("a table row with {n} cells against {h}: {line:.120}")),
                _ => {}
            }
        } else {
            header = None;
        }
    }
    out
}

#[test]
fn hostile_names_reach_no_output_raw() {
    let report = hostile_report();
    let md = markdown::render(&report, None, markdown::COMMENT_LIMIT);
    // Each hostile text is shown (escaped), not dropped.
    for tag in [
        "COMPONENT",
        "BLOCK",
        "REASON",
        "WARNING",
        "NOTE",
        "CHANGE",
        "NOTCOMPARED",
        "CONFIG",
    ] {
        assert!(md.contains(tag), "{tag} is not shown:\n{md}");
    }
    let mut problems = markdown_problems("comment", &md);
    let out = checks::render(&report, &md);
    problems.extend(markdown_problems("check run summary", &out.summary));
    for (what, text) in [("check run title", &out.title)]
        .into_iter()
        .chain(out.annotations.iter().map(|a| ("annotation title", &a.title)))
    {
        if text.contains('\n') || text.contains(&"Z".repeat(600)) {
            problems.push(format!("{what}: {text:.200}"));
        }
    }
    assert!(problems.is_empty(), "{}\n\n{md}", problems.join("\n"));
    junit_keeps_names_text(&report);
}

#[test]
fn a_strict_failure_on_warnings_alone_is_headed_by_gates_own_sentence() {
    let report = strict_warning_only();
    let md = markdown::render(&report, None, markdown::COMMENT_LIMIT);
    let headline = md.lines().next().unwrap();
    assert!(
        headline.ends_with("(strict: failed on 1 warning)"),
        "the headline: {headline}"
    );
    assert!(!headline.contains("WARNING"), "the headline: {headline}");
    // The warning itself is listed below, escaped.
    assert!(md.contains("WARNING"), "{md}");
    let problems = markdown_problems("strict comment", &md);
    assert!(problems.is_empty(), "{}\n\n{md}", problems.join("\n"));
    let out = checks::render(&report, &md);
    assert!(out.title.ends_with("(strict: failed on 1 warning)"), "{}", out.title);
    let text = table::render(&report, false);
    let last = text.lines().last().unwrap();
    assert!(last.ends_with("(strict: failed on 1 warning)"), "{last}");
}

/// JUnit parses, and a name's markup stays text in it.
fn junit_keeps_names_text(report: &Report) {
    let xml = junit::render(report, time::OffsetDateTime::UNIX_EPOCH).unwrap();
    let doc = roxmltree::Document::parse(&xml).expect("well-formed JUnit");
    let names: Vec<&str> = doc.descendants().filter_map(|n| n.attribute("name")).collect();
    assert!(names.iter().any(|n| n.contains("COMPONENT")), "{names:?}");
    // The only elements are JUnit's own: a name's markup stays text.
    for n in doc.descendants().filter(|n| n.is_element()) {
        let tag = n.tag_name().name();
        assert!(
            [
                "testsuites",
                "testsuite",
                "testcase",
                "failure",
                "skipped",
                "system-out",
                "system-err",
                "properties",
                "property",
                "error"
            ]
            .contains(&tag),
            "an element {tag} from a name"
        );
    }
}
