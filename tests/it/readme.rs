//! The README's budgets.yaml reference is a valid spec (it is the example a
//! new user copies first).

#[test]
fn the_readme_spec_example_validates() {
    let readme = include_str!("../../README.md");
    let section = readme
        .find("## budgets.yaml")
        .expect("the README has a budgets.yaml section");
    let start = readme[section..].find("```yaml\n").expect("a yaml block") + section + "```yaml\n".len();
    let end = readme[start..].find("```").expect("the block ends") + start;
    let spec = gate_spec::budget::parse(std::path::Path::new("README.md"), &readme[start..end])
        .unwrap_or_else(|d| panic!("the README's example spec is invalid:\n{d}"));
    assert!(spec.component("tft").is_some());
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
    let snippets = blocks(readme, &["yaml", "yml"]);
    let workflows: Vec<&(usize, &str)> = snippets
        .iter()
        .filter(|(_, b)| {
            b.lines().map(|l| l.trim_start().trim_start_matches("- ")).any(|l| {
                l.starts_with("uses:") || l.starts_with("run:") || l.starts_with("jobs:") || l.starts_with("steps:")
            }) && !b.contains("components:")
        })
        .collect();
    assert!(workflows.len() >= 2, "the README's workflow snippets were not found");
    for (line, block) in workflows {
        for bad in BUILDS_THE_CHECKOUT {
            assert!(
                !block.contains(bad),
                "README.md:{line}: a workflow snippet runs `{bad}`:\n{block}"
            );
        }
        assert!(
            block.contains("uses: OWNER/gate"),
            "README.md:{line}: a workflow snippet that does not take gate from the action or the reusable workflow:\n{block}"
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

/// The files the README tells a reader to put in their repository are the
/// ones `gate init` writes; gate's own workflows are listed apart.
#[test]
fn the_readme_hands_readers_only_what_gate_init_writes() {
    let readme = include_str!("../../README.md");
    let section = |title: &str| {
        let start = readme.find(title).unwrap_or_else(|| panic!("the README has `{title}`"));
        let rest = &readme[start + title.len()..];
        &rest[..rest.find("\n### ").unwrap_or(rest.len())]
    };
    let yours = section("### What goes in your repository\n");
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
    let own = section("### gate's own workflows (not to copy)\n");
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(".github/workflows");
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let text = std::fs::read_to_string(e.path()).unwrap();
        let file = e.file_name().to_string_lossy().into_owned();
        assert!(
            own.contains(&format!("`{file}`")),
            "README: {file} is missing from gate's own workflows"
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
