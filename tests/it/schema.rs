//! The contract's JSON Schemas (#39 item 3): report.json's (also what the
//! baseline store holds, `reports/CARD/SHA.json`), history.json's, shard.json's
//! (a sharded check's record for `gate merge`), the events of
//! `--message-format json`, and the harness
//! protocol's two answers (`__resolve`'s line, `profile`'s event lines),
//! generated from the types that read them (gate_contract::schema), checked
//! in under schema/ for a team's dashboard or harness, and what gate writes
//! conforms to them: the stored reports, a report written now, and the
//! answers of the stock gate's own harness. `GATE_BLESS=1 cargo test --test
//! it schema::` rewrites the checked-in copies after a change to the types.

use std::path::Path;

use serde_json::Value;

fn root() -> &'static Path {
    Path::new(env!("GATE_REPO_ROOT"))
}

/// Every schema with the file it is checked in as.
fn schemas() -> Vec<(String, Value)> {
    let mut all = vec![
        ("report".to_string(), gate_contract::schema::report_schema()),
        ("history".to_string(), gate_contract::schema::history_schema()),
        ("shard".to_string(), gate_contract::schema::shard_schema()),
        ("events".to_string(), gate_contract::schema::events_schema()),
        ("plan".to_string(), gate_contract::schema::plan_schema()),
        ("sweep".to_string(), gate_contract::schema::sweep_schema()),
    ];
    all.extend(
        gate_contract::schema::protocol_schemas()
            .into_iter()
            .map(|(name, s)| (name.to_string(), s)),
    );
    all
}

#[test]
fn the_checked_in_schemas_are_the_types() {
    for (name, generated) in schemas() {
        let path = root().join(format!("schema/{name}.schema.json"));
        let text = format!("{}\n", serde_json::to_string_pretty(&generated).unwrap());
        if std::env::var_os("GATE_BLESS").is_some() {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &text).unwrap();
        }
        let stored = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            stored == text,
            "{} is not what the types give\n\
             hint: after a change to their types, run `GATE_BLESS=1 cargo test --test it schema::` and commit it",
            path.display()
        );
    }
}

/// The problems of `value` against `schema` (draft 2020-12's keywords the
/// generator writes), with `at` its path. Stricter than the schema on one
/// point: an object of a struct with a key the struct does not have is a
/// problem here (the schema lets a reader skip it), so a field gate writes
/// and does not read is found.
fn problems(value: &Value, schema: &Value, defs: &Value, at: &str, out: &mut Vec<String>) {
    if let Some(r) = schema["$ref"].as_str() {
        let name = r.strip_prefix("#/$defs/").expect("a local reference");
        return problems(value, &defs[name], defs, at, out);
    }
    if let Some(any) = schema["anyOf"].as_array() {
        let fits = any.iter().any(|s| {
            let mut p = Vec::new();
            problems(value, s, defs, at, &mut p);
            p.is_empty()
        });
        if !fits {
            out.push(format!("{at}: {value} fits none of anyOf"));
        }
        return;
    }
    if let Some(one) = schema["oneOf"].as_array() {
        let n = one
            .iter()
            .filter(|s| {
                let mut p = Vec::new();
                problems(value, s, defs, at, &mut p);
                p.is_empty()
            })
            .count();
        if n != 1 {
            out.push(format!("{at}: {value} fits {n} of oneOf"));
        }
        return;
    }
    if let Some(values) = schema["enum"].as_array() {
        if !values.contains(value) {
            out.push(format!("{at}: {value} is not one of {values:?}"));
        }
        return;
    }
    if let Some(c) = schema.get("const") {
        if c != value {
            out.push(format!("{at}: {value} is not {c}"));
        }
        return;
    }
    let ok = match schema["type"].as_str() {
        None => true,
        Some("object") => value.is_object(),
        Some("array") => value.is_array(),
        Some("string") => value.is_string(),
        Some("integer") => value.is_i64() || value.is_u64(),
        Some("number") => value.is_number(),
        Some("boolean") => value.is_boolean(),
        Some("null") => value.is_null(),
        Some(other) => panic!("a type the generator does not write: {other}"),
    };
    if !ok {
        out.push(format!("{at}: {value} is not of type {}", schema["type"]));
        return;
    }
    if let (Some(min), Some(n)) = (schema["minimum"].as_f64(), value.as_f64()) {
        if n < min {
            out.push(format!("{at}: {n} is below {min}"));
        }
    }
    if schema.as_object().is_some_and(|s| s.is_empty()) {
        return; // any JSON (a model's own config)
    }
    if let Some(obj) = value.as_object() {
        let properties = schema["properties"].as_object();
        for (k, v) in obj {
            match (properties.and_then(|p| p.get(k)), schema.get("additionalProperties")) {
                (Some(s), _) => problems(v, s, defs, &format!("{at}.{k}"), out),
                (None, Some(s)) if s.is_object() => problems(v, s, defs, &format!("{at}.{k}"), out),
                _ => out.push(format!("{at}: key `{k}` is not in the schema")),
            }
        }
        if let Some(required) = schema["required"].as_array() {
            for r in required {
                if !obj.contains_key(r.as_str().unwrap()) {
                    out.push(format!("{at}: no `{r}`"));
                }
            }
        }
    }
    if let Some(items) = value.as_array() {
        for (i, v) in items.iter().enumerate() {
            if let Some(s) = schema["prefixItems"].as_array().and_then(|p| p.get(i)) {
                problems(v, s, defs, &format!("{at}[{i}]"), out);
            } else if schema.get("items").is_some() {
                problems(v, &schema["items"], defs, &format!("{at}[{i}]"), out);
            }
        }
    }
}

/// The problems of `value` against the schema called `name`.
pub(crate) fn conforms_to(name: &str, value: &Value) -> Vec<String> {
    let (_, schema) = schemas().into_iter().find(|(n, _)| n == name).expect("a known schema");
    let mut out = Vec::new();
    problems(value, &schema, &schema["$defs"], name, &mut out);
    out
}

fn conforms(report: &Value) -> Vec<String> {
    conforms_to("report", report)
}

#[test]
fn every_stored_report_conforms() {
    let mut checked = 0;
    for dir in ["tests/fixtures", "crates/gate-report/testdata"] {
        for e in std::fs::read_dir(root().join(dir)).unwrap() {
            let path = e.unwrap().path();
            let Ok(text) = std::fs::read_to_string(&path) else {
                continue;
            };
            let Ok(v) = serde_json::from_str::<Value>(&text) else {
                continue;
            };
            if v.get("gate_version").is_none() || v.get("results").is_none() {
                continue; // not a report
            }
            let p = conforms(&v);
            assert!(p.is_empty(), "{}:\n{}", path.display(), p.join("\n"));
            checked += 1;
        }
    }
    assert!(checked >= 3, "{checked} reports checked");
}

/// The built `gate` run in the repository with `args`, which must exit 0.
fn gate_ok(args: &[&std::ffi::OsStr]) -> std::process::Output {
    let o = crate::common::gate().args(args).current_dir(root()).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", crate::common::output_text(&o));
    o
}

/// `gate check` of the built-in MLP with `extra` arguments, into `out`.
fn check_mlp(extra: &[&str], out: &Path) -> std::process::Output {
    let mut args: Vec<&std::ffi::OsStr> = ["check", "--budgets", "examples/mlp.yaml", "--baseline", "none"]
        .iter()
        .chain(extra)
        .map(|a| a.as_ref())
        .collect();
    args.extend([std::ffi::OsStr::new("--out"), out.as_os_str()]);
    gate_ok(&args)
}

/// Each line of `stdout` as JSON, every one held to the schema `name`.
fn conforming_lines(stdout: &[u8], name: &str) -> Vec<Value> {
    let lines: Vec<Value> = String::from_utf8_lossy(stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON line ({e}): {l}")))
        .collect();
    for v in &lines {
        let p = conforms_to(name, v);
        assert!(p.is_empty(), "{v}\n{}", p.join("\n"));
    }
    lines
}

/// A report and a shard's record written now, by the built binary, on the
/// built-in MLP (one shard of one: the whole spec, and its shard.json).
#[test]
fn a_report_and_a_shards_record_written_now_conform() {
    let t = tempfile::tempdir().unwrap();
    check_mlp(&["--shard", "1/1"], t.path());
    let read =
        |f: &str| -> Value { serde_json::from_str(&std::fs::read_to_string(t.path().join(f)).unwrap()).unwrap() };
    let p = conforms(&read("report.json"));
    assert!(p.is_empty(), "{}", p.join("\n"));
    let record = read("shard.json");
    let p = conforms_to("shard", &record);
    assert!(p.is_empty(), "{record}\n{}", p.join("\n"));
    assert_eq!(record["index"], 1, "{record}");
}

/// The stock gate is a harness too: its `__resolve` answer and every line
/// of a `profile` of the MLP conform to the protocol's schemas.
#[test]
fn the_harness_protocols_answers_conform() {
    let t = tempfile::tempdir().unwrap();
    let spec = gate_spec::budget::load(&root().join("examples/mlp.yaml")).unwrap();
    let request = t.path().join("request.json");
    std::fs::write(&request, gate::test_support::Request::json(&spec).unwrap()).unwrap();
    let run = |args: &[&str]| {
        let o = crate::common::gate()
            .args(args)
            .arg("--request")
            .arg(&request)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{}", crate::common::output_text(&o));
        String::from_utf8(o.stdout).unwrap()
    };
    let answer: Value = serde_json::from_str(run(&["__resolve"]).trim()).unwrap();
    let p = conforms_to("harness-resolve", &answer);
    assert!(p.is_empty(), "{}", p.join("\n"));
    let component = &spec.components[0].name;
    let events = run(&["profile", "--component", component]);
    let mut lines = 0;
    for line in events.lines().filter(|l| l.starts_with('{')) {
        let event: Value = serde_json::from_str(line).unwrap();
        let p = conforms_to("harness-event", &event);
        assert!(p.is_empty(), "{line}\n{}", p.join("\n"));
        lines += 1;
    }
    assert!(lines >= 2, "a profile writes its phases and `done`: {events}");
}

/// `--message-format json`: stdout is the run's events and nothing else,
/// one JSON object a line, each conforming to the events' schema: the run
/// starts, each profile starts, enters its phases and finishes, each budget
/// is said in report.json's order, and the run finishes with report.json's
/// verdict and where it is.
#[test]
fn a_runs_json_events_conform_and_tell_what_its_report_holds() {
    let t = tempfile::tempdir().unwrap();
    let o = check_mlp(&["--message-format", "json"], t.path());
    let events = conforming_lines(&o.stdout, "events");
    let kind = |e: &Value| e.as_object().unwrap().keys().next().unwrap().clone();
    let kinds: Vec<String> = events.iter().map(kind).collect();
    assert_eq!(kinds.first().map(String::as_str), Some("run_started"), "{kinds:?}");
    assert_eq!(kinds.last().map(String::as_str), Some("run_finished"), "{kinds:?}");
    assert_eq!(events[0]["run_started"]["components"], serde_json::json!(["mlp"]));
    for k in ["profile_started", "phase_started", "profile_finished"] {
        assert!(kinds.iter().any(|x| x == k), "no {k}: {kinds:?}");
    }
    let report: Value = serde_json::from_str(&std::fs::read_to_string(t.path().join("report.json")).unwrap()).unwrap();
    let budgets: Vec<&Value> = events.iter().filter_map(|e| e.get("budget")).collect();
    assert_eq!(
        budgets,
        report["results"].as_array().unwrap().iter().collect::<Vec<_>>()
    );
    let finished = &events.last().unwrap()["run_finished"];
    assert_eq!(finished["status"], report["summary"]["status"]);
    assert_eq!(finished["summary"], report["summary"]);
    assert!(
        finished["report"].as_str().unwrap().ends_with("report.json"),
        "{finished}"
    );
    // The logs (where the time went, where the report went) stay on stderr.
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("time: 1 profiles in") && stderr.contains("wrote "),
        "{stderr}"
    );
}

/// `gate merge --message-format json` says the merged run the same way.
#[test]
fn a_merges_json_events_conform() {
    let t = tempfile::tempdir().unwrap();
    let (shard, merged) = (t.path().join("shard"), t.path().join("merged"));
    check_mlp(&["--shard", "1/1"], &shard);
    let o = gate_ok(&[
        "merge".as_ref(),
        shard.as_os_str(),
        "--message-format".as_ref(),
        "json".as_ref(),
        "--out".as_ref(),
        merged.as_os_str(),
    ]);
    let events = conforming_lines(&o.stdout, "events");
    assert_eq!(events[0]["run_started"]["command"], "merge", "{events:?}");
    assert!(events.last().unwrap().get("run_finished").is_some(), "{events:?}");
}
