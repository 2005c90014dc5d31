//! Every Mermaid block that gate writes, or that the repository's documents
//! hold, parses with Mermaid's own parser (scripts/mermaid/check.mjs, Mermaid
//! 11.9.0 and 11.17.2): a block that does not shows on GitHub as an error box
//! where the chart should be. Checked: the comment of every report in
//! tests/fixtures (alone, against itself as baseline, and with hostile
//! component and phase names), every insta snapshot, README.md,
//! CONTRIBUTING.md and docs/. And the checker bites: a broken block is
//! reported, exactly.
//!
//! Needs Node.js 20+ and npm. The tool's packages (pinned by
//! scripts/mermaid/package-lock.json) are installed once into
//! target/mermaid-node with `npm ci`, again whenever the lock file changes.
//! Without them the tests say why and are skipped (`.ci/run` fails them).

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use gate_contract::report::Report;
use gate_render::markdown;
use serde_json::Value;

fn root() -> PathBuf {
    PathBuf::from(env!("GATE_REPO_ROOT"))
}

/// The comment exactly as `gate check` posts it.
fn comment(report: &Report, baseline: Option<&Report>) -> String {
    markdown::render(report, baseline, markdown::COMMENT_LIMIT)
}

/// target/mermaid-node, holding the tool and its node_modules; installed
/// once per test run. `Err`: why it cannot be (no Node.js 20, or npm could
/// not install the pinned packages), the tests' skip reason.
fn tool() -> Result<&'static Path, String> {
    static DIR: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    DIR.get_or_init(|| common::node_tool("mermaid", "parsing the comment's Mermaid charts with Mermaid itself"))
        .as_deref()
        .map_err(Clone::clone)
}

/// Whether `test` can run: Mermaid's parser is installed, or why not.
fn ready(test: &str) -> bool {
    common::available(test, tool().err())
}

/// Runs the checker on `files`, from `cwd`, so that it names them as given.
fn check(cwd: &Path, files: &[PathBuf]) -> Output {
    Command::new("node")
        .arg(tool().expect("ready() was asked first").join("check.mjs"))
        .args(files)
        .current_dir(cwd)
        .output()
        .unwrap()
}

/// A fresh folder for one test's files.
fn scratch(name: &str) -> PathBuf {
    let dir = root().join("target/mermaid-node/work").join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// How many ```mermaid fences a text opens (a cross-check on the checker's own count).
fn fences(text: &str) -> usize {
    text.lines()
        .filter(|l| l.trim_start().starts_with("```mermaid"))
        .count()
}

/// Renames component `from` to `to` everywhere in a report (map keys and string values).
fn rename(v: &mut Value, from: &str, to: &str) {
    match v {
        Value::String(s) if s == from => *s = to.to_string(),
        Value::Array(a) => a.iter_mut().for_each(|x| rename(x, from, to)),
        Value::Object(m) => {
            if let Some(x) = m.remove(from) {
                m.insert(to.to_string(), x);
            }
            m.values_mut().for_each(|x| rename(x, from, to));
        }
        _ => {}
    }
}

/// Gives the timeline's phases names that start with what ends or opens a
/// Mermaid list or string: `]`, `"`, a backtick, in turn (#28 item 18).
fn hostile_phases(v: &mut Value, n: &mut usize) {
    match v {
        Value::String(s) if s.contains(" phase:") => {
            *s = s.replacen(" phase:", &format!(" phase:{}", ["]", "\"", "`"][*n % 3]), 1);
            *n += 1;
        }
        Value::Array(a) => a.iter_mut().for_each(|x| hostile_phases(x, n)),
        Value::Object(m) => m.values_mut().for_each(|x| hostile_phases(x, n)),
        _ => {}
    }
}

/// Names that have broken Mermaid labels elsewhere: quotes, brackets, a
/// comment marker, an arrow, a directive, HTML, a newline, non-ASCII.
const HOSTILE: &str = "enc \"x\"] [y]; %% --> %%{init: {}}%% <b>b</b> a:b #1\nzé";

#[test]
fn every_comment_and_document_parses() {
    if !ready("every_comment_and_document_parses") {
        return;
    }
    let dir = scratch("all");
    let mut files = Vec::new();
    let mut expected = 0;
    let mut from_comments = 0;

    let mut fixtures: Vec<PathBuf> = std::fs::read_dir(root().join("tests/fixtures"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    fixtures.sort();
    assert!(!fixtures.is_empty(), "tests/fixtures holds reports");
    for path in &fixtures {
        let text = std::fs::read_to_string(path).unwrap();
        let report: Report =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: not a report: {e}", path.display()));
        let mut hostile: Value = serde_json::from_str(&text).unwrap();
        for name in report.components.keys() {
            rename(&mut hostile, name, &format!("{HOSTILE} {name}"));
        }
        hostile_phases(&mut hostile, &mut 0);
        let hostile: Report = serde_json::from_value(hostile).unwrap();
        let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
        for (case, md) in [
            ("alone", comment(&report, None)),
            ("against-itself", comment(&report, Some(&report))),
            ("hostile-names", comment(&hostile, Some(&hostile))),
        ] {
            let file = dir.join(format!("{stem}.{case}.md"));
            from_comments += fences(&md);
            expected += fences(&md);
            std::fs::write(&file, md).unwrap();
            files.push(file);
        }
    }
    assert!(from_comments > 0, "the fixtures' comments draw at least one chart");

    let mut documents: Vec<PathBuf> = ["README.md", "CONTRIBUTING.md"]
        .iter()
        .map(|f| root().join(f))
        .collect();
    let mut stack = vec![root().join("docs"), root().join("tests/it/snapshots")];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|e| e == "md" || e == "snap") {
                documents.push(p);
            }
        }
    }
    documents.sort();
    for p in documents {
        let text = std::fs::read_to_string(&p).unwrap();
        if fences(&text) > 0 {
            expected += fences(&text);
            files.push(p);
        }
    }

    let out = check(&dir, &files);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "some Mermaid blocks do not parse:\n{stdout}{stderr}"
    );
    assert_eq!(stdout, "");
    assert_eq!(
        stderr,
        format!(
            "mermaid 11.9.0 and 11.17.2: {expected} blocks in {} files, all parse\n",
            files.len()
        ),
        "the checker found every block"
    );
}

#[test]
fn a_broken_block_is_reported_with_its_place_and_mermaids_error() {
    if !ready("a_broken_block_is_reported_with_its_place_and_mermaids_error") {
        return;
    }
    let dir = scratch("broken");
    let md = "\
# A comment

```mermaid
xychart-beta
    x-axis [\"a\", \"b\"]
    bar [1.0, 2.0]
```

A fence inside another is an example, not a chart:

````markdown
```mermaid
not a diagram
```
````

```mermaid
xychart-beta
    x-axis [\"a\", \"b\"]
    bar [1.0,]
```

```mermaid
xychart
    bar [1.0]
```
";
    std::fs::write(dir.join("comment.md"), md).unwrap();
    let out = check(&dir, &[PathBuf::from("comment.md")]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "\
comment.md:17:1: this Mermaid block (lines 17-21) does not parse with mermaid 11.9.0 and 11.17.2
  17 | ```mermaid
  18 | xychart-beta
  19 |     x-axis [\"a\", \"b\"]
  20 |     bar [1.0,]
  21 | ```
  mermaid 11.9.0 (its line 3 is line 20 of the file):
    Parse error on line 3:
    ..., \"b\"]    bar [1.0,]
    ----------------------^
    Expecting 'NUMBER_WITH_DECIMAL', got 'SQUARE_BRACES_END'
  mermaid 11.17.2 (its line 3 is line 20 of the file):
    Parse error on line 3:
    ..., \"b\"]    bar [1.0,]
    ----------------------^
    Expecting 'NUMBER_WITH_DECIMAL', got 'SQUARE_BRACES_END'
hint: GitHub shows an error box instead of this chart; the syntax is at https://mermaid.js.org/syntax/

comment.md:23:1: this Mermaid block (lines 23-26) does not parse with mermaid 11.9.0
  23 | ```mermaid
  24 | xychart
  25 |     bar [1.0]
  26 | ```
  mermaid 11.9.0:
    No diagram type detected matching given configuration for text: xychart
        bar [1.0]
hint: GitHub shows an error box instead of this chart; the syntax is at https://mermaid.js.org/syntax/

"
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "mermaid 11.9.0 and 11.17.2: 3 blocks in 1 file, 2 do not parse\n"
    );
}
