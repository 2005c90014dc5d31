//! Every workflow gate ships, walked step by step the way a runner runs it
//! (issue #51 item 1): `.github/workflows/*.yml`, the composite action
//! (`action.yml`) and `gate init`'s templates.
//!
//! A job's workspace starts empty (GitHub's runner gives each job a fresh
//! `GITHUB_WORKSPACE`; "Using jobs in a workflow": each job runs in a fresh
//! instance of the runner image). Each `uses:` step stands in for its
//! action's documented effect: `actions/checkout` fills the workspace with
//! the repository, `actions/download-artifact` lays out under its `path`
//! what an earlier job's `actions/upload-artifact` stored under that name,
//! and every other action sets the outputs its `action.yml` declares. Then
//! each `run:` step is checked where it stands:
//! - every file of this repository it calls (`scripts/...`, `.ci/...`)
//!   is in the workspace at that point, i.e. a checkout came first, or, in
//!   the composite action, it is called through `$GITHUB_ACTION_PATH`
//!   (the action's own copy; the caller's workspace is the caller's);
//! - every `steps.X.outputs.Y` it (or its `env:`, `with:` or `if:`) reads
//!   was set by an earlier step `X` of the same job;
//! - every `needs.J.outputs.Y` names a job `J` of its `needs:` whose
//!   `outputs:` declare `Y`.
//!
//! Why a runner of our own rather than `wrkflw`'s emulation mode: wrkflw is
//! not installed here and cannot be fetched offline, it runs the steps
//! (docker or the host's shell) rather than telling which file a step
//! lacks, and it would be a second YAML reading of the workflows beside
//! the one tests/it/workflows.rs already has. These rules are the few
//! facts of GitHub's runner that decided the bug this test was written
//! for: the release job ran `scripts/sign-release.sh` in a workspace that
//! no checkout had filled ("No such file or directory", exit 127).

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use yaml_rust2::{Yaml, YamlLoader};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A workflow file, with `gate init`'s placeholders filled in as `gate
/// init` would.
struct Shipped {
    file: String,
    doc: Yaml,
}

fn load(file: &str) -> Shipped {
    let text = std::fs::read_to_string(root().join(file))
        .unwrap()
        .replace("{{REPO}}", "acme/gate")
        .replace("{{REF}}", "v1.0.0")
        .replace("{{PIN}}", "v1.0.0")
        .replace("{{BRANCH}}", "main");
    let doc = YamlLoader::load_from_str(&text)
        .unwrap_or_else(|e| panic!("{file}: {e}"))
        .remove(0);
    Shipped {
        file: file.to_string(),
        doc,
    }
}

fn shipped_workflows() -> Vec<Shipped> {
    let mut files = Vec::new();
    for dir in [".github/workflows", "crates/gate-cli/src/templates"] {
        for e in std::fs::read_dir(root().join(dir)).unwrap().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.ends_with(".yml") || name.ends_with(".yaml") {
                files.push(format!("{dir}/{name}"));
            }
        }
    }
    files.sort();
    files
        .into_iter()
        .map(|f| load(&f))
        .filter(|w| !w.doc["jobs"].is_badvalue())
        .collect()
}

fn text_of(y: &Yaml) -> String {
    match y {
        Yaml::String(s) => s.clone(),
        Yaml::Integer(i) => i.to_string(),
        Yaml::Boolean(b) => b.to_string(),
        Yaml::Hash(h) => h
            .iter()
            .map(|(k, v)| format!("{}: {}\n", text_of(k), text_of(v)))
            .collect(),
        Yaml::Array(a) => a.iter().map(|v| text_of(v) + "\n").collect(),
        _ => String::new(),
    }
}

/// `PREFIX.X.outputs.Y` references in `text`, as (X, Y).
fn references(text: &str, prefix: &str) -> Vec<(String, String)> {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    let mut out = Vec::new();
    for (i, _) in text.match_indices(prefix) {
        if text[..i].chars().last().is_some_and(|c| ident(c) || c == '.') {
            continue;
        }
        let rest = &text[i + prefix.len()..];
        let x: String = rest.chars().take_while(|c| ident(*c)).collect();
        let Some(rest) = rest[x.len()..].strip_prefix(".outputs.") else {
            continue;
        };
        let y: String = rest.chars().take_while(|c| ident(*c)).collect();
        if !x.is_empty() && !y.is_empty() {
            out.push((x, y));
        }
    }
    out
}

/// Files of this repository that a script names as a word (`scripts/x.sh`,
/// `"$GITHUB_ACTION_PATH/scripts/x.sh"`), with whether the action's own
/// path prefixes it.
fn repository_files_called(script: &str) -> Vec<(String, bool)> {
    // A comment calls nothing.
    let script: String = script
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .map(|l| format!("{l}\n"))
        .collect();
    let script = script.as_str();
    let mut out = Vec::new();
    let word = |c: char| c.is_ascii_alphanumeric() || "_./-".contains(c);
    for dir in ["scripts/", ".ci/"] {
        for (i, _) in script.match_indices(dir) {
            let before = &script[..i];
            let prev = before.chars().last();
            // The action's steps pass `github.action_path` as ACTION_PATH.
            let via_action = [
                "$GITHUB_ACTION_PATH/",
                "${GITHUB_ACTION_PATH}/",
                "$ACTION_PATH/",
                "${ACTION_PATH}/",
            ]
            .iter()
            .any(|p| before.ends_with(p))
                || before.ends_with("${{ github.action_path }}/");
            if !via_action && prev.is_some_and(|c| word(c) || c == '/') {
                continue;
            }
            let path: String = script[i..].chars().take_while(|c| word(*c)).collect();
            let path = path.trim_end_matches('.').to_string();
            if root().join(&path).is_file() {
                out.push((path, via_action));
            }
        }
    }
    out
}

/// Output names a script writes to `$GITHUB_OUTPUT` (`echo "NAME=..."`,
/// `printf 'NAME=%s'`, gate's scripts' `out NAME VALUE`), in `script` and
/// in the files of this repository it calls.
fn outputs_written(script: &str) -> BTreeSet<String> {
    let mut texts = vec![script.to_string()];
    for (path, _) in repository_files_called(script) {
        texts.push(std::fs::read_to_string(root().join(path)).unwrap_or_default());
    }
    let mut names = BTreeSet::new();
    for text in texts {
        for line in text.lines() {
            for verb in ["echo ", "printf ", "out "] {
                for (i, _) in line.match_indices(verb) {
                    if line[..i]
                        .chars()
                        .last()
                        .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
                    {
                        continue;
                    }
                    let rest = line[i + verb.len()..].trim_start().trim_start_matches(['"', '\'']);
                    let name: String = rest
                        .chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-')
                        .collect();
                    let after = &rest[name.len()..];
                    if !name.is_empty() && (after.starts_with('=') || (verb == "out " && after.starts_with(' '))) {
                        names.insert(name);
                    }
                }
            }
        }
    }
    names
}

/// The outputs an action declares in its `action.yml`: this repository's
/// own action, or the ones gate's workflows pin (from their documentation
/// at the pinned tags).
fn action_outputs(uses: &str) -> Option<BTreeSet<String>> {
    let name = uses.split('@').next().unwrap_or(uses);
    let known: &[&str] = match name {
        "actions/checkout" => &["ref", "commit"],
        "actions/upload-artifact" => &["artifact-id", "artifact-url", "artifact-digest"],
        "actions/download-artifact" => &["download-path"],
        "actions/cache" | "actions/cache/restore" => &["cache-hit", "cache-primary-key", "cache-matched-key"],
        "actions/cache/save" => &[],
        "actions/attest-build-provenance" => &["bundle-path", "attestation-id", "attestation-url"],
        "rust-lang/crates-io-auth-action" => &["token"],
        "actions/create-github-app-token" => &["token", "installation-id", "app-slug"],
        // gate's action: this repository (`./`), gate's checkout beside the
        // caller's (`./.gate-action` in the reusable workflow), or `OWNER/gate`.
        _ if name.starts_with("./") || name.ends_with("/gate") => {
            let action = load("action.yml");
            return Some(action.doc["outputs"].as_hash()?.keys().map(text_of).collect());
        }
        _ => return None,
    };
    Some(known.iter().map(|s| s.to_string()).collect())
}

/// What the workflow's reusable workflow (called by a job's `uses:`)
/// declares under `on.workflow_call.outputs`.
fn reusable_outputs(uses: &str) -> Option<BTreeSet<String>> {
    let file = uses.split("/.github/workflows/").nth(1)?.split('@').next()?;
    let called = load(&format!(".github/workflows/{file}"));
    Some(
        called.doc["on"]["workflow_call"]["outputs"]
            .as_hash()
            .map(|h| h.keys().map(text_of).collect())
            .unwrap_or_default(),
    )
}

/// One job or composite action walked step by step; problems as
/// `file: job: step N (name): what`.
fn walk_steps(
    file: &str,
    job: &str,
    steps: &[Yaml],
    composite: bool,
    needs: &BTreeMap<String, BTreeSet<String>>,
    problems: &mut Vec<String>,
) -> BTreeMap<String, BTreeSet<String>> {
    let mut checked_out = false;
    let mut set: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (n, step) in steps.iter().enumerate() {
        let label = step["name"]
            .as_str()
            .or(step["id"].as_str())
            .or(step["uses"].as_str())
            .unwrap_or("")
            .to_string();
        let at = format!("{file}: {job}: step {} ({label})", n + 1);
        // What the step reads, before it runs.
        // A shell comment reads nothing.
        let run: String = text_of(&step["run"])
            .lines()
            .filter(|l| !l.trim_start().starts_with('#'))
            .map(|l| format!("{l}\n"))
            .collect();
        let read = [run]
            .into_iter()
            .chain([&step["env"], &step["with"], &step["if"]].into_iter().map(text_of))
            .collect::<Vec<_>>()
            .join("\n");
        for (x, y) in references(&read, "steps.") {
            match set.get(&x) {
                None => problems.push(format!(
                    "{at}: reads steps.{x}.outputs.{y}, but no earlier step has id `{x}`"
                )),
                Some(names) if !names.contains(&y) => problems.push(format!(
                    "{at}: reads steps.{x}.outputs.{y}, which step `{x}` never sets (it sets {names:?})"
                )),
                _ => {}
            }
        }
        for (j, y) in references(&read, "needs.") {
            match needs.get(&j) {
                None => problems.push(format!(
                    "{at}: reads needs.{j}.outputs.{y}, but `{j}` is not in its needs"
                )),
                Some(names) if !names.contains(&y) => problems.push(format!(
                    "{at}: reads needs.{j}.outputs.{y}, which job `{j}` does not declare (it declares {names:?})"
                )),
                _ => {}
            }
        }
        let id = step["id"].as_str().map(String::from);
        if let Some(uses) = step["uses"].as_str() {
            if uses.starts_with("actions/checkout@") {
                checked_out = true;
            }
            if uses.starts_with("./") && !composite && !checked_out {
                problems.push(format!("{at}: uses the local action `{uses}` before any checkout"));
            }
            if let Some(id) = id {
                let outputs = action_outputs(uses).unwrap_or_else(|| {
                    problems.push(format!("{at}: `{uses}`: this rehearsal does not know its outputs"));
                    BTreeSet::new()
                });
                set.insert(id, outputs);
            }
        } else if let Some(script) = step["run"].as_str() {
            for (path, via_action) in repository_files_called(script) {
                if composite && !via_action {
                    problems.push(format!(
                        "{at}: calls `{path}` from the caller's workspace, not the action's own copy ($GITHUB_ACTION_PATH)"
                    ));
                } else if !composite && !checked_out {
                    problems.push(format!(
                        "{at}: runs `{path}`, but the job's workspace is empty: no actions/checkout before it"
                    ));
                }
            }
            if let Some(id) = id {
                set.insert(id, outputs_written(script));
            }
        }
    }
    set
}

/// Every problem a runner would meet in the shipped workflows.
fn rehearse(workflows: &[Shipped]) -> Vec<String> {
    let mut problems = Vec::new();
    for w in workflows {
        let jobs = w.doc["jobs"].as_hash().unwrap_or_else(|| panic!("{}: no jobs", w.file));
        // Each job's declared outputs, for the jobs that need it.
        let mut declared: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (name, job) in jobs {
            let name = text_of(name);
            let outputs = match job["uses"].as_str() {
                Some(uses) => reusable_outputs(uses).unwrap_or_default(),
                None => job["outputs"]
                    .as_hash()
                    .map(|h| h.keys().map(text_of).collect())
                    .unwrap_or_default(),
            };
            declared.insert(name, outputs);
        }
        for (name, job) in jobs {
            let name = text_of(name);
            let needs: Vec<String> = match &job["needs"] {
                Yaml::String(s) => vec![s.clone()],
                Yaml::Array(a) => a.iter().map(text_of).collect(),
                _ => Vec::new(),
            };
            let visible: BTreeMap<String, BTreeSet<String>> = needs
                .iter()
                .map(|j| (j.clone(), declared.get(j).cloned().unwrap_or_default()))
                .collect();
            let Some(steps) = job["steps"].as_vec() else {
                // A call of a reusable workflow: its `with:` may read needs.
                for (j, y) in references(&text_of(&job["with"]), "needs.") {
                    if !visible.get(&j).is_some_and(|o| o.contains(&y)) {
                        problems.push(format!(
                            "{}: {name}: passes needs.{j}.outputs.{y}, which is not set",
                            w.file
                        ));
                    }
                }
                continue;
            };
            let set = walk_steps(&w.file, &name, steps, false, &visible, &mut problems);
            // The job's outputs read its steps' outputs.
            for (x, y) in references(&text_of(&job["outputs"]), "steps.") {
                if !set.get(&x).is_some_and(|o| o.contains(&y)) {
                    problems.push(format!(
                        "{}: {name}: its output reads steps.{x}.outputs.{y}, which no step sets",
                        w.file
                    ));
                }
            }
        }
    }
    problems
}

/// The composite action: its steps, and its declared outputs' sources.
fn rehearse_action(action: &Shipped) -> Vec<String> {
    let mut problems = Vec::new();
    let steps = action.doc["runs"]["steps"].as_vec().expect("a composite action");
    let set = walk_steps(&action.file, "runs", steps, true, &BTreeMap::new(), &mut problems);
    for (x, y) in references(&text_of(&action.doc["outputs"]), "steps.") {
        if !set.get(&x).is_some_and(|o| o.contains(&y)) {
            problems.push(format!(
                "action.yml: outputs: reads steps.{x}.outputs.{y}, which no step sets"
            ));
        }
    }
    problems
}

#[test]
fn every_shipped_workflow_runs_step_by_step_from_an_empty_workspace() {
    let workflows = shipped_workflows();
    let files: Vec<&str> = workflows.iter().map(|w| w.file.as_str()).collect();
    for expected in [
        ".github/workflows/gate-release.yml",
        ".github/workflows/gate-reusable.yml",
        "crates/gate-cli/src/templates/gate.yml",
        "crates/gate-cli/src/templates/gate-comment.yml",
    ] {
        assert!(files.contains(&expected), "{expected} is rehearsed: {files:?}");
    }
    let mut problems = rehearse(&workflows);
    problems.extend(rehearse_action(&load("action.yml")));
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The release job signs with a script of the repository: it must check
/// the repository out first (the bug this rehearsal was written for).
#[test]
fn the_rehearsal_catches_a_script_run_before_any_checkout() {
    let yml = "jobs:\n  release:\n    runs-on: ubuntu-24.04\n    steps:\n\
               \x20     - uses: actions/download-artifact@37930b1c2abaa49bbe596cd826c3c89aef350131\n\
               \x20       with: { name: dist, path: dist }\n\
               \x20     - id: sign\n        run: scripts/sign-release.sh dist \"$TAG\" >> \"$GITHUB_OUTPUT\"\n";
    let doc = YamlLoader::load_from_str(yml).unwrap().remove(0);
    let problems = rehearse(&[Shipped {
        file: "t.yml".into(),
        doc,
    }]);
    assert_eq!(
        problems,
        ["t.yml: release: step 2 (sign): runs `scripts/sign-release.sh`, but the job's workspace is empty: no actions/checkout before it"]
    );
}

#[test]
fn the_rehearsal_catches_outputs_no_step_or_job_sets() {
    let yml = "jobs:\n  a:\n    outputs: { digest: '${{ steps.d.outputs.sha }}' }\n    steps:\n\
               \x20     - id: d\n        run: echo \"sha256=$(sha256sum x)\" >> \"$GITHUB_OUTPUT\"\n\
               \x20 b:\n    needs: a\n    steps:\n\
               \x20     - env: { X: '${{ needs.a.outputs.sha256 }}', Y: '${{ steps.nope.outputs.z }}' }\n        run: 'true'\n";
    let doc = YamlLoader::load_from_str(yml).unwrap().remove(0);
    let problems = rehearse(&[Shipped {
        file: "t.yml".into(),
        doc,
    }]);
    assert_eq!(
        problems,
        [
            "t.yml: a: its output reads steps.d.outputs.sha, which no step sets",
            "t.yml: b: step 1 (): reads steps.nope.outputs.z, but no earlier step has id `nope`",
            "t.yml: b: step 1 (): reads needs.a.outputs.sha256, which job `a` does not declare (it declares {\"digest\"})",
        ]
    );
    // The sign script's own `printf 'pubkey=%s'` counts as setting `pubkey`.
    assert!(outputs_written("scripts/sign-release.sh dist \"$TAG\" >> \"$GITHUB_OUTPUT\"").contains("pubkey"));
}
