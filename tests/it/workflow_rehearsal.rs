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
//! Then the release itself runs: `gate-release.yml`'s `package` and
//! `release` jobs, every `run:` step executed in bash from an empty
//! workspace, down to `gh release create` (see
//! `the_release_jobs_run_step_by_step_to_gh_release_create`).
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
    PathBuf::from(env!("GATE_REPO_ROOT"))
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

// ---------------------------------------------------------------------------
// The release, run for real: `gate-release.yml`'s `package` and `release`
// jobs, each `run:` step executed in bash (as the runner does: `bash
// --noprofile --norc -eo pipefail`, in the job's workspace, with the job's
// env, GITHUB_OUTPUT and GITHUB_PATH), each `uses:` step replaced by its
// action's documented effect. The build jobs are stood in for by a small
// `gate` of the test's (the archives' contents are not what is tested
// here; tests/it/packaging.rs and the strict gates are), and the tools a
// release job installs or calls on GitHub (minisign from apt, gh) by
// stand-ins that check what they are given.

use std::path::Path;

/// Step outputs, job outputs and artifacts of one rehearsed workflow run.
struct Run {
    doc: Yaml,
    github: BTreeMap<&'static str, String>,
    /// Artifact name → the folder holding what upload-artifact stored.
    artifacts: BTreeMap<String, PathBuf>,
    scratch: PathBuf,
    /// Folder with the stand-in tools, first on PATH.
    tools: PathBuf,
}

/// `${{ expr }}` with the contexts a job has.
struct Contexts<'a> {
    github: &'a BTreeMap<&'static str, String>,
    steps: &'a BTreeMap<String, BTreeMap<String, String>>,
    needs: &'a BTreeMap<String, BTreeMap<String, String>>,
}

impl Contexts<'_> {
    fn value(&self, expr: &str) -> Result<String, String> {
        let expr = expr.trim();
        let parts: Vec<&str> = expr.split('.').collect();
        let missing = || format!("`{expr}` is not set");
        match parts.as_slice() {
            ["github", key] => self.github.get(key).cloned().ok_or_else(missing),
            ["steps", id, "outputs", name] | ["needs", id, "outputs", name] => {
                let map = if parts[0] == "steps" { self.steps } else { self.needs };
                map.get(*id).and_then(|o| o.get(*name)).cloned().ok_or_else(missing)
            }
            _ => Err(format!("the rehearsal does not evaluate `{expr}`")),
        }
    }

    fn expand(&self, text: &str) -> Result<String, String> {
        let mut out = String::new();
        let mut rest = text;
        while let Some(i) = rest.find("${{") {
            out.push_str(&rest[..i]);
            let end = rest[i..].find("}}").ok_or("an unclosed ${{")? + i;
            out.push_str(&self.value(&rest[i + 3..end])?);
            rest = &rest[end + 2..];
        }
        out.push_str(rest);
        Ok(out)
    }

    /// A step's `if:`: the few forms the rehearsed jobs use.
    fn condition(&self, cond: &Yaml) -> Result<bool, String> {
        match cond
            .as_str()
            .map(|c| c.trim().trim_start_matches("${{").trim_end_matches("}}").trim())
        {
            None => Ok(true),
            Some("!cancelled()" | "always()" | "success()") => Ok(true),
            Some(other) => Err(format!("the rehearsal does not evaluate `if: {other}`")),
        }
    }
}

fn copy_tree(from: &Path, to: &Path) {
    if from.is_dir() {
        std::fs::create_dir_all(to).unwrap();
        for e in std::fs::read_dir(from).unwrap().flatten() {
            copy_tree(&e.path(), &to.join(e.file_name()));
        }
    } else {
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(from, to).unwrap();
    }
}

/// Files of `workspace` that an upload-artifact `path:` line names: a
/// file, a folder (everything under it) or `dir/*.ext`.
fn matched(workspace: &Path, line: &str) -> Vec<PathBuf> {
    fn walk(p: &Path, out: &mut Vec<PathBuf>) {
        if p.is_dir() {
            for e in std::fs::read_dir(p).unwrap().flatten() {
                walk(&e.path(), out);
            }
        } else if p.is_file() {
            out.push(p.to_path_buf());
        }
    }
    let line = line.trim().trim_end_matches('/');
    let mut out = Vec::new();
    match line.rsplit_once("/*") {
        Some((dir, suffix)) => {
            for e in std::fs::read_dir(workspace.join(dir)).into_iter().flatten().flatten() {
                if e.file_name().to_string_lossy().ends_with(suffix) && e.path().is_file() {
                    out.push(e.path());
                }
            }
        }
        None => walk(&workspace.join(line), &mut out),
    }
    out
}

impl Run {
    /// Runs job `name` from an empty workspace; its outputs, or the first
    /// step that failed.
    fn job(
        &mut self,
        name: &str,
        needs: &BTreeMap<String, BTreeMap<String, String>>,
    ) -> Result<BTreeMap<String, String>, String> {
        let job = self.doc["jobs"][name].clone();
        let workspace = self.scratch.join(format!("{name}-workspace"));
        let temp = self.scratch.join(format!("{name}-temp"));
        for d in [&workspace, &temp] {
            let _ = std::fs::remove_dir_all(d);
            std::fs::create_dir_all(d).unwrap();
        }
        let mut env: BTreeMap<String, String> = BTreeMap::new();
        for scope in [&self.doc["env"], &job["env"]] {
            for (k, v) in scope.as_hash().into_iter().flatten() {
                env.insert(text_of(k), text_of(v));
            }
        }
        let mut path_prefix: Vec<String> = Vec::new();
        let mut steps: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
        for (n, step) in job["steps"].as_vec().unwrap().iter().enumerate() {
            let label = step["name"]
                .as_str()
                .or(step["uses"].as_str())
                .or(step["run"].as_str())
                .unwrap_or("");
            let at = format!("{name}: step {} ({})", n + 1, label.lines().next().unwrap_or(""));
            let ctx = Contexts {
                github: &self.github,
                steps: &steps,
                needs,
            };
            if !ctx.condition(&step["if"]).map_err(|e| format!("{at}: {e}"))? {
                continue;
            }
            let with = |key: &str| -> Result<String, String> {
                ctx.expand(&text_of(&step["with"][key]))
                    .map_err(|e| format!("{at}: {e}"))
            };
            let mut outputs = BTreeMap::new();
            if let Some(uses) = step["uses"].as_str() {
                match uses.split('@').next().unwrap() {
                    "actions/checkout" => {
                        let o = std::process::Command::new("git")
                            .args(["ls-files", "-z", "--cached", "--others", "--exclude-standard"])
                            .current_dir(root())
                            .output()
                            .unwrap();
                        for f in String::from_utf8_lossy(&o.stdout).split('\0').filter(|f| !f.is_empty()) {
                            if root().join(f).is_file() {
                                copy_tree(&root().join(f), &workspace.join(f));
                            }
                        }
                    }
                    "actions/upload-artifact" => {
                        let lines = with("path")?;
                        let files: Vec<PathBuf> = lines
                            .lines()
                            .filter(|l| !l.trim().is_empty())
                            .flat_map(|l| matched(&workspace, l))
                            .collect();
                        if files.is_empty() {
                            return Err(format!("{at}: no files match `{lines}`"));
                        }
                        // The least common ancestor of what is uploaded is the
                        // artifact's root (upload-artifact's README).
                        let mut base = files[0].parent().unwrap().to_path_buf();
                        while !files.iter().all(|f| f.starts_with(&base)) {
                            base.pop();
                        }
                        let store = self.scratch.join("artifacts").join(with("name")?);
                        let _ = std::fs::remove_dir_all(&store);
                        for f in &files {
                            copy_tree(f, &store.join(f.strip_prefix(&base).unwrap()));
                        }
                        self.artifacts.insert(with("name")?, store);
                    }
                    "actions/download-artifact" => {
                        let name = with("name")?;
                        let stored = self
                            .artifacts
                            .get(&name)
                            .ok_or_else(|| format!("{at}: no artifact `{name}` was uploaded"))?;
                        let to = workspace.join(with("path")?);
                        copy_tree(stored, &to);
                        outputs.insert("download-path".into(), to.display().to_string());
                    }
                    "actions/attest-build-provenance" => {
                        let sums = workspace.join(with("subject-checksums")?);
                        if !sums.is_file() {
                            return Err(format!("{at}: no subject-checksums file {}", sums.display()));
                        }
                        let bundle = temp.join("attestation.jsonl");
                        std::fs::write(
                            &bundle,
                            "{\"mediaType\":\"application/vnd.dev.sigstore.bundle.v0.3+json\"}\n",
                        )
                        .unwrap();
                        outputs.insert("bundle-path".into(), bundle.display().to_string());
                        outputs.insert("attestation-id".into(), "1".into());
                        outputs.insert("attestation-url".into(), "https://github.com/attestations/1".into());
                    }
                    other => return Err(format!("{at}: the rehearsal has no stand-in for `{other}`")),
                }
            } else if let Some(script) = step["run"].as_str() {
                let mut step_env = env.clone();
                for (k, v) in step["env"].as_hash().into_iter().flatten() {
                    step_env.insert(
                        text_of(k),
                        ctx.expand(&text_of(v))
                            .map_err(|e| format!("{at}: env {}: {e}", text_of(k)))?,
                    );
                }
                let script = ctx.expand(script).map_err(|e| format!("{at}: {e}"))?;
                let file = temp.join(format!("step-{n}.sh"));
                std::fs::write(&file, &script).unwrap();
                let output_file = temp.join(format!("output-{n}"));
                let path_file = temp.join(format!("path-{n}"));
                std::fs::write(&output_file, "").unwrap();
                std::fs::write(&path_file, "").unwrap();
                let path = path_prefix
                    .iter()
                    .rev()
                    .cloned()
                    .chain([
                        self.tools.display().to_string(),
                        std::env::var("PATH").unwrap_or_default(),
                    ])
                    .collect::<Vec<_>>()
                    .join(":");
                let o = std::process::Command::new("bash")
                    .args(["--noprofile", "--norc", "-eo", "pipefail"])
                    .arg(&file)
                    .current_dir(&workspace)
                    .env_clear()
                    .envs(&step_env)
                    .env("PATH", path)
                    .env("HOME", &temp)
                    .env("TMPDIR", &temp)
                    .env("RUNNER_TEMP", &temp)
                    .env("RUNNER_OS", "Linux")
                    .env("RUNNER_ARCH", "X64")
                    .env("GITHUB_WORKSPACE", &workspace)
                    .env("GITHUB_OUTPUT", &output_file)
                    .env("GITHUB_PATH", &path_file)
                    .env("GITHUB_STEP_SUMMARY", temp.join("summary"))
                    .env("GITHUB_REF_NAME", &self.github["ref_name"])
                    .env("GITHUB_SHA", &self.github["sha"])
                    .env("GITHUB_REPOSITORY", &self.github["repository"])
                    .output()
                    .unwrap();
                if !o.status.success() {
                    return Err(format!(
                        "{at}: exit {:?}\n{}{}",
                        o.status.code(),
                        String::from_utf8_lossy(&o.stdout),
                        String::from_utf8_lossy(&o.stderr)
                    ));
                }
                let written = std::fs::read_to_string(&output_file).unwrap();
                let mut lines = written.lines();
                while let Some(line) = lines.next() {
                    if let Some((k, delim)) = line.split_once("<<") {
                        let value: Vec<&str> = lines.by_ref().take_while(|l| *l != delim).collect();
                        outputs.insert(k.to_string(), value.join("\n"));
                    } else if let Some((k, v)) = line.split_once('=') {
                        outputs.insert(k.to_string(), v.to_string());
                    }
                }
                path_prefix.extend(std::fs::read_to_string(&path_file).unwrap().lines().map(String::from));
            }
            if let Some(id) = step["id"].as_str() {
                steps.insert(id.to_string(), outputs);
            }
        }
        let ctx = Contexts {
            github: &self.github,
            steps: &steps,
            needs,
        };
        let mut outputs = BTreeMap::new();
        for (k, v) in job["outputs"].as_hash().into_iter().flatten() {
            outputs.insert(
                text_of(k),
                ctx.expand(&text_of(v))
                    .map_err(|e| format!("{name}: output {}: {e}", text_of(k)))?,
            );
        }
        Ok(outputs)
    }
}

fn executable(path: &Path, text: &str) {
    crate::common::write_executable(path, text);
}

fn sha256_of(path: &Path) -> String {
    let o = std::process::Command::new("sha256sum").arg(path).output().unwrap();
    String::from_utf8_lossy(&o.stdout)
        .split(' ')
        .next()
        .unwrap()
        .to_string()
}

/// A rehearsed run of gate-release.yml (`doc`, maybe edited) from the
/// build jobs' artifacts to `gh release create`; what `gh` was asked.
fn rehearse_release(doc: Yaml) -> Result<(String, BTreeMap<String, String>), String> {
    let t = tempfile::tempdir().unwrap();
    rehearse_release_in(doc, t.path())
}

/// The workspace's version (Cargo.toml's `[workspace.package]`), which a
/// release's tag names.
pub(crate) fn workspace_version() -> String {
    std::fs::read_to_string(root().join("Cargo.toml"))
        .unwrap()
        .lines()
        .find_map(|l| {
            l.strip_prefix("version = \"")
                .map(|v| v.trim_end_matches('"').to_string())
        })
        .unwrap()
}

/// The release job's workspace under a rehearsal's `scratch` folder: what
/// `gh release create` published lies in its `dist/`.
pub(crate) fn release_workspace(scratch: &Path) -> PathBuf {
    scratch.join("release-workspace")
}

/// [`rehearse_release`] in `scratch`, which the caller keeps (the
/// published files stay in [`release_workspace`]).
pub(crate) fn rehearse_release_in(doc: Yaml, scratch: &Path) -> Result<(String, BTreeMap<String, String>), String> {
    let tools = scratch.join("tools");
    std::fs::create_dir_all(&tools).unwrap();
    // apt-get runs under sudo on GitHub's images; here minisign is a stand-in already.
    executable(&tools.join("sudo"), "#!/bin/sh\nexit 0\n");
    executable(&tools.join("minisign"), crate::packaging::FAKE_MINISIGN);
    let gh_log = scratch.join("gh.log");
    executable(
        &tools.join("gh"),
        &format!(
            "#!/usr/bin/env bash\n\
             [ \"$1 $2\" = \"release create\" ] || {{ echo \"gh: unexpected $*\" >&2; exit 64; }}\n\
             for f in \"${{@:4}}\"; do case $f in --*) ;; *) [ -f \"$f\" ] || {{ echo \"gh: $f: no such file\" >&2; exit 1; }} ;; esac; done\n\
             echo \"$*\" > '{}'\n",
            gh_log.display()
        ),
    );
    // The build jobs' binaries: a gate that answers what packaging asks.
    let version = workspace_version();
    let tag = format!("v{version}");
    let mut artifacts = BTreeMap::new();
    let mut needs = BTreeMap::new();
    for (job, artifact) in [("build-cpu", "bin-cpu"), ("build-cuda", "bin-cuda")] {
        let dir = scratch.join("artifacts").join(artifact);
        std::fs::create_dir_all(&dir).unwrap();
        executable(
            &dir.join("gate"),
            &format!(
                "#!/bin/sh\ncase $1 in\n  --version) printf 'gate {version}\\ncommit: {}\\n' ;;\n  completions) echo \"# $2 completions ({artifact})\" ;;\n  man) echo '.TH GATE 1' ;;\nesac\n",
                "c".repeat(40)
            ),
        );
        needs.insert(
            job.to_string(),
            BTreeMap::from([("sha256".to_string(), sha256_of(&dir.join("gate")))]),
        );
        artifacts.insert(artifact.to_string(), dir);
    }
    let mut run = Run {
        doc,
        github: BTreeMap::from([
            ("ref_name", tag.clone()),
            ("ref", format!("refs/tags/{tag}")),
            ("sha", "c".repeat(40)),
            ("repository", "acme/gate".to_string()),
            ("token", "ghs_rehearsal".to_string()),
        ]),
        artifacts,
        scratch: scratch.to_path_buf(),
        tools,
    };
    let package = run.job("package", &needs)?;
    // The strict gates hand on nothing; `release` needs them only to wait.
    let needs = BTreeMap::from([
        ("package".to_string(), package),
        ("gate-cpu".to_string(), BTreeMap::new()),
        ("gate-gpu".to_string(), BTreeMap::new()),
    ]);
    let release = run.job("release", &needs)?;
    let asked = std::fs::read_to_string(&gh_log).map_err(|_| "gh release create never ran".to_string())?;
    Ok((asked, release))
}

/// The release, run: `package` packs from the build jobs' binaries,
/// `release` (from an empty workspace) checks SHA256SUMS against the
/// package job's digest, attests, copies the bundle, signs every archive
/// for binstall with the repository's own script and publishes the
/// archives, their `.sig` files, SHA256SUMS and the bundle; its output is
/// the binstall public key `crates-package` and `crates-io` write.
#[test]
fn the_release_jobs_run_step_by_step_to_gh_release_create() {
    let doc = load(".github/workflows/gate-release.yml").doc;
    let (asked, outputs) = rehearse_release(doc.clone()).unwrap_or_else(|e| panic!("{e}"));
    let version = workspace_version();
    let tag = format!("v{version}");
    let cpu = format!("dist/gate-{tag}-x86_64-unknown-linux-gnu.tar.gz");
    let cuda = format!("dist/gate-{tag}-x86_64-unknown-linux-gnu-cuda.tar.gz");
    assert_eq!(
        asked.trim_end(),
        format!(
            "release create {tag} --verify-tag --generate-notes {cuda} {cpu} {cuda}.sig {cpu}.sig dist/SHA256SUMS dist/gate-{tag}.sigstore.json"
        )
    );
    let key = &outputs["binstall-pubkey"];
    assert!(key.starts_with("RW") && key.len() == 56, "{key}");

    // The release job as it was (no checkout): the signing step finds no
    // script, exit 127, and nothing is published.
    let mut old = doc;
    if let Yaml::Hash(jobs) = &mut old["jobs"] {
        let release = jobs.get_mut(&Yaml::String("release".into())).unwrap();
        if let Yaml::Hash(job) = release {
            let steps = job.get_mut(&Yaml::String("steps".into())).unwrap();
            if let Yaml::Array(steps) = steps {
                steps.retain(|s| !s["uses"].as_str().is_some_and(|u| u.starts_with("actions/checkout@")));
            }
        }
    }
    let err = rehearse_release(old).expect_err("the release job without a checkout");
    assert!(err.contains("release: step") && err.contains("exit Some(127)"), "{err}");
    assert!(
        err.contains("scripts/sign-release.sh: No such file or directory"),
        "{err}"
    );
}
