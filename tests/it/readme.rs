//! The README is a newcomer's five minutes and the manual under docs/ is
//! the rest (issue #51 item 5): the README fits on a screen, every page of
//! the manual is reachable from it, and what the README and the manual
//! show (the budgets.yaml reference, the workflow snippets, the files a
//! reader copies) is what gate reads and writes.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn the_manuals_budgets_yaml_reference_validates() {
    let reference = include_str!("../../docs/budgets.md");
    let start = reference.find("```yaml\n").expect("a yaml block") + "```yaml\n".len();
    let end = reference[start..].find("```").expect("the block ends") + start;
    let spec = gate_spec::budget::parse(Path::new("docs/budgets.md"), &reference[start..end])
        .unwrap_or_else(|d| panic!("the manual's example spec is invalid:\n{d}"));
    assert!(spec.component("tft").is_some());
}

#[test]
fn the_readme_is_at_most_250_lines() {
    let lines = include_str!("../../README.md").lines().count();
    assert!(
        lines <= 250,
        "README.md has {lines} lines: the rest belongs in the manual (docs/)"
    );
}

/// The two set-up commands, as the README has always given them, with
/// their measured cost beside them.
#[test]
fn the_readme_keeps_the_two_set_up_commands_and_their_measured_time() {
    let readme = include_str!("../../README.md");
    let at = readme.find("## Set-up: two commands\n").expect("the set-up section");
    let section = &readme[at..];
    assert!(section.contains(
        "cargo run --release -- check      # the gate on this repository's budgets.yaml, on the CPU\n\
         cargo test                        # the test suite\n"
    ));
    assert!(
        section.contains("29.6 s, the median of 3 runs"),
        "the run's measured time"
    );
    assert!(
        section.contains("took 2,048 s cold on 2 cores"),
        "the test suite's measured time"
    );
}

/// Relative Markdown links of `text` (a file in `dir`), as paths from the root.
fn relative_links(dir: &Path, text: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for piece in text.split("](").skip(1) {
        let target = piece.split(')').next().unwrap_or("");
        let target = target.split('#').next().unwrap_or("");
        if target.is_empty() || target.contains("://") || target.contains(' ') {
            continue;
        }
        let mut path = dir.to_path_buf();
        for part in target.split('/') {
            match part {
                "" | "." => {}
                ".." => {
                    path.pop();
                }
                p => path.push(p),
            }
        }
        out.push(path);
    }
    out
}

/// Every page of the manual is reachable from the README by links a
/// reader follows (the README, then the index, then the pages).
#[test]
fn every_page_of_the_manual_is_reachable_from_the_readme() {
    let mut seen: BTreeSet<PathBuf> = BTreeSet::new();
    let mut queue = vec![PathBuf::from("README.md")];
    while let Some(page) = queue.pop() {
        if !seen.insert(page.clone()) {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(root().join(&page)) else {
            continue;
        };
        let dir = page.parent().unwrap_or(Path::new("")).to_path_buf();
        for link in relative_links(&dir, &text) {
            if link.extension().is_some_and(|e| e == "md")
                && (link.starts_with("docs") || link == Path::new("README.md"))
            {
                queue.push(link);
            }
        }
    }
    let mut pages: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .flatten()
        .map(|e| PathBuf::from("docs").join(e.file_name()))
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    pages.sort();
    let unreachable: Vec<_> = pages.iter().filter(|p| !seen.contains(*p)).collect();
    assert!(unreachable.is_empty(), "not reachable from README.md: {unreachable:?}");
    // The index names every page itself, so a reader walks it in one place.
    let index = std::fs::read_to_string(root().join("docs/README.md")).unwrap();
    let named: BTreeSet<PathBuf> = relative_links(Path::new("docs"), &index).into_iter().collect();
    for page in &pages {
        if page != Path::new("docs/README.md") {
            assert!(
                named.contains(page),
                "docs/README.md (the index) does not name {}",
                page.display()
            );
        }
    }
}

/// The README's fenced blocks in `lang`, each with its first line number.
fn blocks<'a>(text: &'a str, langs: &[&str]) -> Vec<(usize, &'a str)> {
    let mut out = Vec::new();
    let mut open: Option<(usize, usize)> = None;
    let mut offset = 0;
    for (n, line) in text.split_inclusive('\n').enumerate() {
        let t = line.trim();
        match open {
            None if t.starts_with("```") && langs.contains(&t.trim_start_matches('`')) => {
                open = Some((n + 2, offset + line.len()));
            }
            Some((first, start)) if t == "```" => {
                out.push((first, &text[start..offset]));
                open = None;
            }
            _ => {}
        }
        offset += line.len();
    }
    out
}

/// What would build the reader's own crate instead of gate, in a workflow
/// of theirs (issue #14 item 1).
const BUILDS_THE_CHECKOUT: [&str; 2] = ["cargo build", "target/release/gate"];

#[test]
fn the_readmes_workflow_snippets_use_the_action_never_a_build_of_the_checkout() {
    let readme = include_str!("../../README.md");
    let manual = include_str!("../../docs/github.md");
    let snippets = [blocks(readme, &["yaml", "yml"]), blocks(manual, &["yaml", "yml"])].concat();
    let workflows: Vec<&(usize, &str)> = snippets
        .iter()
        .filter(|(_, b)| {
            b.lines().map(|l| l.trim_start().trim_start_matches("- ")).any(|l| {
                l.starts_with("uses:") || l.starts_with("run:") || l.starts_with("jobs:") || l.starts_with("steps:")
            }) && !b.contains("components:")
        })
        .collect();
    assert!(
        workflows.len() >= 2,
        "the README's and the manual's workflow snippets were not found"
    );
    for (line, block) in workflows {
        for bad in BUILDS_THE_CHECKOUT {
            assert!(
                !block.contains(bad),
                "README.md or docs/github.md:{line}: a workflow snippet runs `{bad}`:\n{block}"
            );
        }
        assert!(
            block.contains("uses: OWNER/gate"),
            "README.md or docs/github.md:{line}: a workflow snippet that does not take gate from the action or the reusable workflow:\n{block}"
        );
    }
    for (name, template) in [
        ("gate.yml", include_str!("../../crates/gate-cli/src/templates/gate.yml")),
        (
            "gate-comment.yml",
            include_str!("../../crates/gate-cli/src/templates/gate-comment.yml"),
        ),
    ] {
        for bad in BUILDS_THE_CHECKOUT {
            assert!(
                !template.contains(bad),
                "crates/gate-cli/src/templates/{name} runs `{bad}`"
            );
        }
    }
}

/// The files the manual tells a reader to put in their repository are the
/// ones `gate init` writes; gate's own workflows are listed apart.
#[test]
fn the_manual_hands_readers_only_what_gate_init_writes() {
    let readme = include_str!("../../docs/github.md");
    let section = |title: &str| {
        let start = readme
            .find(title)
            .unwrap_or_else(|| panic!("docs/github.md has `{title}`"));
        let rest = &readme[start + title.len()..];
        &rest[..rest.find("\n## ").unwrap_or(rest.len())]
    };
    let yours = section("## What goes in your repository\n");
    let named: Vec<&str> = yours
        .split('`')
        .filter(|w| w.starts_with(".github/workflows/") && w.ends_with(".yml"))
        .collect();
    assert_eq!(
        named,
        [".github/workflows/gate.yml", ".github/workflows/gate-comment.yml"]
    );
    for file in named {
        let template = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("crates/gate-cli/src/templates")
            .join(file.trim_start_matches(".github/workflows/"));
        assert!(template.exists(), "{file} is not a template of `gate init`");
    }
    // Every workflow of this repository that builds gate from its checkout
    // is named in the "own" section and says so in its name.
    let own = section("## gate's own workflows (not to copy)\n");
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(".github/workflows");
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let text = std::fs::read_to_string(e.path()).unwrap();
        let file = e.file_name().to_string_lossy().into_owned();
        assert!(
            own.contains(&format!("`{file}`")),
            "docs/github.md: {file} is missing from gate's own workflows"
        );
        if BUILDS_THE_CHECKOUT.iter().any(|b| text.contains(b)) {
            let name = text.lines().find_map(|l| l.strip_prefix("name: ")).unwrap_or("");
            assert!(
                name.starts_with("gate (own CI, ") || name == "ci",
                "{file}: builds gate from the checkout but is named `{name}`"
            );
        }
    }
}

/// A GitHub App's installation token carries the App's permissions, not
/// the workflow's (#51): the manual's App section lists every one the
/// comment job uses, `Actions: read` (the artifacts) included.
#[test]
fn the_manuals_github_app_section_lists_the_permissions_the_comment_job_uses() {
    let manual = include_str!("../../docs/github.md");
    let at = manual.find("## Commenting as a GitHub App").expect("the App section");
    let section = &manual[at..];
    let section = &section[..section[3..].find("\n## ").map_or(section.len(), |e| e + 3)];
    for permission in [
        "**Actions: read**",
        "**Pull requests:",
        "**Contents: read**",
        "**Checks: read and write**",
    ] {
        assert!(
            section.contains(permission),
            "docs/github.md's App section omits {permission}"
        );
    }
}
