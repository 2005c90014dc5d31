//! A lint of `.github/workflows/*.yml`, read as YAML: whatever file is added
//! or changed, these hold or the suite fails.
//! - A self-hosted (GPU) job never runs an untrusted fork's code: in a
//!   workflow that pull requests trigger, its `if:` is a disjunction whose
//!   every branch requires a same-repository PR or the maintainer's label.
//! - Least privilege: every workflow declares `permissions` (never
//!   `write-all`; writes per job); a workflow that runs PR code writes
//!   nothing. A reusable (`workflow_call`-only) workflow takes its caller's.
//! - No `pull_request_target` or `workflow_run` job checks out the PR's code.
//! - No `secrets.` in a job that runs PR code.
//! - No `${{ github.event... }}` expanded inside a `run:` script (script
//!   injection through a branch name or title); pass it through `env:`.

use crate::common;
use serde_json::json;
use std::path::{Path, PathBuf};

use yaml_rust2::{Yaml, YamlLoader};

/// Branches of an `if:` that admit a pull request's code onto a self-hosted runner.
const SAME_REPO: &str = "github.event.pull_request.head.repo.full_name == github.repository";
const MAINTAINER_LABEL: &str = "github.event.label.name == format('gate-gpu@{0}', github.event.pull_request.head.sha)";

struct Workflow {
    file: String,
    text: String,
    doc: Yaml,
}

fn workflows() -> Vec<Workflow> {
    let dir = PathBuf::from(env!("GATE_REPO_ROOT")).join(".github/workflows");
    let mut v = Vec::new();
    for e in std::fs::read_dir(&dir).unwrap().flatten() {
        let p = e.path();
        if !matches!(p.extension().and_then(|x| x.to_str()), Some("yml" | "yaml")) {
            continue;
        }
        let text = std::fs::read_to_string(&p).unwrap();
        let doc = YamlLoader::load_from_str(&text)
            .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
            .remove(0);
        v.push(Workflow {
            file: p.file_name().unwrap().to_string_lossy().into_owned(),
            text,
            doc,
        });
    }
    assert!(v.len() >= 4, "the workflows are found");
    v
}

fn key<'a>(y: &'a Yaml, k: &str) -> &'a Yaml {
    &y[k]
}

/// The events that trigger a workflow (`on:` as a string, list or map).
fn triggers(w: &Workflow) -> Vec<String> {
    match key(&w.doc, "on") {
        Yaml::String(s) => vec![s.clone()],
        Yaml::Array(a) => a.iter().filter_map(|x| x.as_str().map(String::from)).collect(),
        Yaml::Hash(h) => h.keys().filter_map(|x| x.as_str().map(String::from)).collect(),
        other => panic!("{}: no `on:` ({other:?})", w.file),
    }
}

/// Whether a workflow's jobs may run a pull request's code (its triggers come from PRs).
fn runs_pr_code(w: &Workflow) -> bool {
    triggers(w).iter().any(|t| t == "pull_request")
}

fn untrusted_trigger(w: &Workflow) -> bool {
    triggers(w).iter().any(|t| {
        matches!(
            t.as_str(),
            "pull_request"
                | "pull_request_target"
                | "workflow_run"
                | "issue_comment"
                | "pull_request_review"
                | "pull_request_review_comment"
                | "merge_group"
        )
    })
}

fn jobs(w: &Workflow) -> Vec<(String, &Yaml)> {
    key(&w.doc, "jobs")
        .as_hash()
        .unwrap_or_else(|| panic!("{}: no jobs", w.file))
        .iter()
        .map(|(k, v)| (k.as_str().unwrap().to_string(), v))
        .collect()
}

/// Whether a job may run on a self-hosted runner: its `runs-on`, or the
/// `runs-on` it passes to a reusable workflow (`with: { runs-on: ... }`).
fn self_hosted(job: &Yaml) -> bool {
    [&job["runs-on"], &job["with"]["runs-on"]].into_iter().any(|r| match r {
        // An expression may name any runner: treat it as possibly self-hosted.
        Yaml::String(s) => s.contains("self-hosted") || s.contains("${{"),
        Yaml::Array(a) => a.iter().any(|x| x.as_str().is_some_and(|s| s.contains("self-hosted"))),
        // A matrix or an expression: treat as possibly self-hosted.
        Yaml::Hash(_) => true,
        _ => false,
    })
}

/// A workflow only other workflows call: the caller's trigger, `if:` and
/// permissions apply (a called workflow can only lower them), and the
/// callers in this repository are checked as jobs of their own workflows.
fn only_called(w: &Workflow) -> bool {
    triggers(w) == ["workflow_call"]
}

/// The `if:` split into its top-level `||` branches (parentheses respected).
fn disjuncts(cond: &str) -> Vec<String> {
    let cond = cond.trim().trim_start_matches("${{").trim_end_matches("}}");
    let (mut depth, mut cur, mut out) = (0i32, String::new(), Vec::new());
    let chars: Vec<char> = cond.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            '|' if depth == 0 && chars.get(i + 1) == Some(&'|') => {
                out.push(std::mem::take(&mut cur));
                i += 2;
                continue;
            }
            _ => {}
        }
        cur.push(c);
        i += 1;
    }
    out.push(cur);
    out.into_iter()
        .map(|d| d.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect()
}

/// Whether one branch of an `if:` admits only trusted code: it requires the
/// same-repo check or the label, as a conjunct (not negated, not inside an
/// `||`), and it is not weakened by a `!`.
fn trusted_branch(d: &str) -> bool {
    let d = d.trim().trim_start_matches('(').trim_end_matches(')');
    let bare = |c: &'static str| c.trim_matches(|c| c == '(' || c == ')');
    let conjuncts: Vec<&str> = d
        .split("&&")
        .map(|c| c.trim().trim_matches(|c| c == '(' || c == ')').trim())
        .collect();
    // Both sides lose their outer parentheses (the label's `format(...)` its last one too).
    conjuncts
        .iter()
        .any(|c| *c == bare(SAME_REPO) || *c == bare(MAINTAINER_LABEL))
}

/// `gate init`'s gate.yml (#51): the `pr` job, which every fork's pull
/// request runs and which must never skip, suggests no self-hosted runner;
/// the GPU gate is a job of its own, commented out, whose `if:` admits
/// only trusted code (same repository and not Dependabot, or the
/// maintainer's label for the exact head).
#[test]
fn the_init_template_keeps_self_hosted_runners_to_a_separate_guarded_gpu_job() {
    let text =
        std::fs::read_to_string(Path::new(env!("GATE_REPO_ROOT")).join("crates/gate-cli/src/templates/gate.yml"))
            .unwrap()
            .replace("{{REPO}}", "acme/gate")
            .replace("{{PIN}}", "v1.0.0")
            .replace("{{REF}}", "v1.0.0")
            .replace("{{BRANCH}}", "main");
    let doc = YamlLoader::load_from_str(&text).unwrap().remove(0);
    let pr_start = text.find("\n  pr:\n").expect("the pr job");
    let pr_end = text[pr_start + 1..].find("\n  baseline:").unwrap() + pr_start + 1;
    assert!(
        !text[pr_start..pr_end].contains("self-hosted"),
        "the pr job suggests a self-hosted runner:\n{}",
        &text[pr_start..pr_end]
    );
    assert!(!self_hosted(&doc["jobs"]["pr"]));
    // The GPU job, uncommented as a reader would.
    let at = text.find("\n  # gpu:\n").expect("a commented GPU job") + 1;
    let job: String = text[at..]
        .lines()
        .take_while(|l| l.starts_with("  #"))
        .map(|l| format!("  {}\n", l[2..].strip_prefix("# ").unwrap_or(&l[3..])))
        .collect();
    let doc = YamlLoader::load_from_str(&format!("jobs:\n{job}")).unwrap().remove(0);
    let gpu = &doc["jobs"]["gpu"];
    assert!(self_hosted(gpu), "{job}");
    assert_eq!(gpu["with"]["backend"].as_str(), Some("cuda"));
    let cond = gpu["if"].as_str().expect("the GPU job has an if:");
    for d in disjuncts(cond) {
        assert!(trusted_branch(&d), "an open branch of the GPU job's if: {d}");
        if d.contains(SAME_REPO) {
            assert!(
                d.contains("github.event.pull_request.user.login != 'dependabot[bot]'"),
                "{d}"
            );
        }
    }
}

#[test]
fn a_self_hosted_job_never_runs_untrusted_fork_code() {
    let mut checked = 0;
    for w in workflows() {
        if !untrusted_trigger(&w) {
            continue; // push to a branch, tags, workflow_dispatch: maintainers' code
        }
        for (name, job) in jobs(&w) {
            if !self_hosted(job) {
                continue;
            }
            let cond = job["if"]
                .as_str()
                .unwrap_or_else(|| panic!("{}: job `{name}` runs on a self-hosted runner with no `if:`", w.file));
            for d in disjuncts(cond) {
                assert!(
                    trusted_branch(&d),
                    "{}: job `{name}`: the branch `{d}` of its `if:` admits a fork's code to the self-hosted runner; require `{SAME_REPO}` or `{MAINTAINER_LABEL}`",
                    w.file
                );
            }
            assert!(
                !triggers(&w)
                    .iter()
                    .any(|t| t == "pull_request_target" || t == "workflow_run"),
                "{}: job `{name}`: a self-hosted job on a privileged trigger",
                w.file
            );
            checked += 1;
        }
    }
    assert!(checked >= 1, "the PR workflow's GPU job is checked");
}

#[test]
fn the_lint_catches_an_open_condition() {
    assert!(trusted_branch(SAME_REPO));
    assert!(trusted_branch(&format!(
        "github.event.action == 'labeled' && {MAINTAINER_LABEL}"
    )));
    assert!(!trusted_branch("github.event.action != 'labeled'"));
    assert!(!trusted_branch(&format!("!({SAME_REPO})")));
    let open = format!("({SAME_REPO}) || github.event.action == 'opened'");
    assert!(!disjuncts(&open).iter().all(|d| trusted_branch(d)));
    let ok = format!("(github.event.action != 'labeled' && {SAME_REPO}) ||\n (github.event.action == 'labeled' && {MAINTAINER_LABEL})");
    assert_eq!(disjuncts(&ok).len(), 2);
    assert!(disjuncts(&ok).iter().all(|d| trusted_branch(d)));
}

fn permissions_write(p: &Yaml) -> Vec<String> {
    match p {
        Yaml::String(s) => vec![s.clone()],
        Yaml::Hash(h) => h
            .iter()
            .filter(|(_, v)| v.as_str() == Some("write"))
            .map(|(k, _)| k.as_str().unwrap_or("?").to_string())
            .collect(),
        _ => vec![],
    }
}

#[test]
fn every_workflow_declares_least_privilege() {
    for w in workflows() {
        if only_called(&w) {
            continue;
        }
        let top = key(&w.doc, "permissions");
        assert!(!top.is_badvalue(), "{}: no top-level `permissions`", w.file);
        for (name, job) in jobs(&w) {
            let p = if job["permissions"].is_badvalue() {
                top
            } else {
                &job["permissions"]
            };
            let writes = permissions_write(p);
            assert!(
                !writes.iter().any(|s| s == "write-all"),
                "{}: job `{name}`: write-all",
                w.file
            );
            if runs_pr_code(&w) {
                assert!(
                    writes.is_empty(),
                    "{}: job `{name}` runs PR code and may write {writes:?}",
                    w.file
                );
            }
        }
        // The top level grants writes only where every job needs them: a
        // workflow's write permission is either per job or in a one-job workflow.
        let top_writes = permissions_write(top);
        assert!(
            top_writes.is_empty() || jobs(&w).len() == 1,
            "{}: write permissions {top_writes:?} at the top of a multi-job workflow; grant them per job",
            w.file
        );
    }
}

fn steps(job: &Yaml) -> Vec<&Yaml> {
    job["steps"].as_vec().map(|v| v.iter().collect()).unwrap_or_default()
}

#[test]
fn no_privileged_workflow_checks_out_pr_code() {
    for w in workflows() {
        let privileged = triggers(&w)
            .iter()
            .any(|t| t == "pull_request_target" || t == "workflow_run");
        for (name, job) in jobs(&w) {
            for step in steps(job) {
                let uses = step["uses"].as_str().unwrap_or("");
                if uses.starts_with("actions/checkout") {
                    assert_eq!(
                        step["with"]["persist-credentials"].as_bool(),
                        Some(false),
                        "{}: job `{name}`: checkout keeps the token in .git/config",
                        w.file
                    );
                    if privileged {
                        let r = step["with"]["ref"].as_str().unwrap_or("");
                        let repo = step["with"]["repository"].as_str().unwrap_or("");
                        for bad in [
                            "pull_request.head",
                            "workflow_run.head",
                            "refs/pull",
                            "head_sha",
                            "head_ref",
                            "head.repo",
                        ] {
                            assert!(
                                !r.contains(bad) && !repo.contains(bad),
                                "{}: job `{name}` checks out the PR's code ({r} {repo}) with a privileged token",
                                w.file
                            );
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn no_secrets_where_pr_code_runs() {
    for w in workflows() {
        let pr_code = runs_pr_code(&w) || triggers(&w).iter().any(|t| t == "pull_request_target");
        if !pr_code {
            continue;
        }
        assert!(
            !w.text.contains("secrets."),
            "{}: a workflow that runs PR code names a secret",
            w.file
        );
    }
}

#[test]
fn no_event_text_is_expanded_inside_a_script() {
    for w in workflows() {
        for (name, job) in jobs(&w) {
            for step in steps(job) {
                let Some(run) = step["run"].as_str() else { continue };
                for bad in ["github.event.", "github.head_ref", "inputs.", "matrix."] {
                    assert!(
                        !run.contains(&format!("${{{{ {bad}")),
                        "{}: job `{name}`: `run:` expands `{bad}...` into the script; pass it through `env:`",
                        w.file
                    );
                }
            }
        }
    }
}

/// The `run:` script of the action step named `name`.
fn action_step(name: &str) -> String {
    let text = std::fs::read_to_string(Path::new(env!("GATE_REPO_ROOT")).join("action.yml")).unwrap();
    let doc = YamlLoader::load_from_str(&text).unwrap().remove(0);
    let steps = key(key(&doc, "runs"), "steps").as_vec().unwrap();
    let step = steps
        .iter()
        .find(|s| key(s, "name").as_str() == Some(name))
        .unwrap_or_else(|| panic!("no step `{name}`"));
    key(step, "run").as_str().unwrap().to_string()
}

/// Runs an action script with the environment GitHub gives a step.
fn run_action_script(script: &str, envs: &[(&str, &str)]) -> (Option<i32>, String, String) {
    let t = tempfile::tempdir().unwrap();
    let out = t.path().join("github_output");
    std::fs::write(&out, "").unwrap();
    let mut cmd = std::process::Command::new("bash");
    cmd.arg("-e")
        .arg("-c")
        .arg(script)
        .current_dir(env!("GATE_REPO_ROOT"))
        .env("GITHUB_OUTPUT", &out)
        .env("RUNNER_OS", "Linux")
        .env("RUNNER_ARCH", "X64")
        .env_remove("CARGO_TARGET_DIR");
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let o = cmd.output().unwrap();
    (
        o.status.code(),
        std::fs::read_to_string(&out).unwrap(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
    )
}

#[test]
fn the_action_finds_a_harness_and_keys_its_cache() {
    let script = action_step("Find the spec's harness");
    let (code, outputs, _) = run_action_script(
        &script,
        &[
            ("BUDGETS", "examples/adopter/budgets.yaml"),
            ("BACKEND", "cpu"),
            ("HARNESS", "auto"),
        ],
    );
    assert_eq!(code, Some(0));
    assert!(outputs.contains("uses=true\n"), "{outputs}");
    assert!(outputs.contains("target=examples/adopter/target\n"), "{outputs}");
    let cpu_key = outputs
        .lines()
        .find(|l| l.starts_with("key=gate-harness-Linux-X64-cpu-"))
        .unwrap()
        .to_string();
    // The cuda backend builds another binary: another cache.
    let (_, cuda, _) = run_action_script(
        &script,
        &[
            ("BUDGETS", "examples/adopter/budgets.yaml"),
            ("BACKEND", "cuda"),
            ("HARNESS", "auto"),
        ],
    );
    assert!(cuda.contains("key=gate-harness-Linux-X64-cuda-"), "{cuda}");
    assert!(!cuda.contains(&cpu_key), "{cuda}");
    // A spec of built-ins needs no toolchain and no cache.
    let (code, outputs, _) = run_action_script(
        &script,
        &[("BUDGETS", "budgets.yaml"), ("BACKEND", "cpu"), ("HARNESS", "auto")],
    );
    assert_eq!(code, Some(0));
    assert_eq!(outputs, "uses=false\n");
    // No cargo on the runner: a clear error, exit 3.
    let (code, _, stdout) = run_action_script(
        &script,
        &[
            ("BUDGETS", "examples/adopter/budgets.yaml"),
            ("BACKEND", "cpu"),
            ("HARNESS", "auto"),
            ("PATH", "/usr/bin:/bin"),
        ],
    );
    if !Path::new("/usr/bin/cargo").exists() {
        assert_eq!(code, Some(3));
        assert!(
            stdout.contains("::error title=gate action::") && stdout.contains("Rust toolchain"),
            "{stdout}"
        );
    }
}

/// The first release of each action that runs on Node 24 (GitHub runs
/// Node 20 actions on Node 24 from June 2026 and removes Node 20 in
/// September 2026). The evidence, from each release's notes, is in
/// docs/release.md ("The actions the workflows use"). A floating major tag
/// (`@v5`) is the newest release of that major.
const NODE24_FIRST: &[(&str, (u32, u32, u32))] = &[
    ("actions/checkout", (5, 0, 0)),
    ("actions/upload-artifact", (6, 0, 0)),
    ("actions/download-artifact", (7, 0, 0)),
    ("actions/cache", (5, 0, 0)),
    ("Swatinem/rust-cache", (2, 9, 1)),
    ("actions/create-github-app-token", (2, 1, 0)),
    ("actions/attest-build-provenance", (3, 0, 0)),
    ("rust-lang/crates-io-auth-action", (1, 0, 4)),
];

/// `v5`, `v2.9`, `v2.9.1` → (major, minor, patch); a part left out is the
/// newest (`u32::MAX`), as a floating tag moves to the newest release.
fn version(reference: &str) -> Option<(u32, u32, u32)> {
    let mut parts = reference.strip_prefix('v')?.split('.');
    let mut next = || parts.next().map_or(Some(u32::MAX), |p| p.parse().ok());
    Some((next()?, next()?, next()?))
}

/// What is wrong with each `uses:` of `text` (a file of workflows, an
/// action, templates or documents): an action below its first Node 24
/// release, or one not in [`NODE24_FIRST`].
fn node20_pins(file: &str, text: &str) -> Vec<String> {
    let mut problems = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let Some(rest) = line.trim_start().trim_start_matches("- ").strip_prefix("uses:") else {
            continue;
        };
        let spec = rest.split_whitespace().next().unwrap_or("");
        let at = format!("{file}:{}", n + 1);
        // This repository's own action and workflows, and the placeholders of templates.
        if spec.starts_with("./") || spec.starts_with("{{REPO}}") || spec.starts_with("OWNER/gate") {
            continue;
        }
        let Some((path, reference)) = spec.split_once('@') else {
            problems.push(format!("{at}: `{spec}` names no version"));
            continue;
        };
        let action = path.splitn(3, '/').take(2).collect::<Vec<_>>().join("/");
        let Some((_, min)) = NODE24_FIRST.iter().find(|(a, _)| *a == action) else {
            problems.push(format!(
                "{at}: `{spec}`: not in NODE24_FIRST; add its first release that runs on node24, with the evidence in docs/release.md"
            ));
            continue;
        };
        // A SHA pin names its release in the comment after it (`@SHA  # v5.1.0`).
        let reference = if is_sha(reference) {
            rest.split_once('#').map_or("", |(_, c)| c.trim())
        } else {
            reference
        };
        match version(reference) {
            Some(v) if v >= *min => {}
            _ => problems.push(format!(
                "{at}: `{spec}` runs on Node 20; use v{}.{}.{} or newer",
                min.0, min.1, min.2
            )),
        }
    }
    problems
}

#[test]
fn every_action_used_runs_on_node24() {
    let root = PathBuf::from(env!("GATE_REPO_ROOT"));
    let mut files = vec!["action.yml".to_string(), "README.md".into()];
    for dir in [".github/workflows", "crates/gate-cli/src/templates", "docs"] {
        for e in std::fs::read_dir(root.join(dir)).unwrap().flatten() {
            // Text files only (docs/img holds pictures).
            if e.file_type().is_ok_and(|t| t.is_file()) {
                files.push(format!("{dir}/{}", e.file_name().to_string_lossy()));
            }
        }
    }
    let mut problems = Vec::new();
    let mut seen = 0;
    for f in &files {
        let text = std::fs::read_to_string(root.join(f)).unwrap();
        seen += text
            .lines()
            .filter(|l| l.trim_start().trim_start_matches("- ").starts_with("uses:"))
            .count();
        problems.extend(node20_pins(f, &text));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(seen > 40, "only {seen} `uses:` lines found: the scan is broken");
}

#[test]
fn the_node24_check_catches_node20_majors() {
    let text = "steps:\n  - uses: actions/checkout@v4\n  - uses: actions/checkout@v5\n\
                \x20     uses: actions/cache/restore@v4.3.0\n  - uses: Swatinem/rust-cache@v2\n\
                \x20 - uses: Swatinem/rust-cache@v2.8.2\n  - uses: someone/else@v9\n  - uses: ./.gate-action\n";
    assert_eq!(
        node20_pins("w.yml", text),
        [
            "w.yml:2: `actions/checkout@v4` runs on Node 20; use v5.0.0 or newer",
            "w.yml:4: `actions/cache/restore@v4.3.0` runs on Node 20; use v5.0.0 or newer",
            "w.yml:6: `Swatinem/rust-cache@v2.8.2` runs on Node 20; use v2.9.1 or newer",
            "w.yml:7: `someone/else@v9`: not in NODE24_FIRST; add its first release that runs on node24, with the evidence in docs/release.md",
        ]
    );
}

/// A caller's repository that breaks any cargo run inside it: a workspace
/// root, a toolchain that does not exist, and a Cargo config that does not
/// parse. gate's source is nested in it, as `actions/checkout` with `path:`
/// (or `uses: ./`) would put it. Returns (caller root, gate's copy).
fn hostile_caller(root: &Path) -> (PathBuf, PathBuf) {
    let caller = root.join("caller");
    std::fs::create_dir_all(caller.join(".cargo")).unwrap();
    std::fs::write(caller.join("Cargo.toml"), "[workspace]\nmembers = [\"crates/*\"]\n").unwrap();
    std::fs::write(
        caller.join("rust-toolchain.toml"),
        "[toolchain]\nchannel = \"0.0.1-no-such-toolchain\"\n",
    )
    .unwrap();
    std::fs::write(
        caller.join(".cargo/config.toml"),
        "[build]\ntarget = \"no-such-triple\"\nrustflags = [\"--cfg\", \"broken\"]\nthis is not toml\n",
    )
    .unwrap();
    let gate = caller.join(".gate-action");
    std::fs::create_dir_all(&gate).unwrap();
    let copied = std::process::Command::new("bash")
        .arg("-c")
        // As a checkout holds it: no build output, no `target` folder at any
        // depth (a contributor's fixture builds in place leave gigabytes
        // under tests/adopters/*/target).
        .arg(r#"tar -C "$1" --exclude=target --exclude=./.git -cf - . | tar -C "$2" -xf -"#)
        .arg("copy")
        .arg(env!("GATE_REPO_ROOT"))
        .arg(&gate)
        .status()
        .unwrap();
    assert!(copied.success());
    (caller, gate)
}

/// The cargo that `cargo` on PATH runs (rustup's proxy, where rustup is used).
fn real_cargo() -> String {
    let o = std::process::Command::new("bash")
        .args(["-c", "command -v cargo"])
        .output()
        .unwrap();
    String::from_utf8(o.stdout).unwrap().trim().to_string()
}

fn executable(path: &Path, text: &str) {
    crate::common::write_executable(path, text);
}

/// A release build takes minutes: returns a folder with a `cargo` shim that
/// records how `cargo build` was run (into `log`), then runs the real cargo's
/// `metadata` in the same directory with the same environment (it reads the
/// manifest, the workspace, the toolchain file and the Cargo config, as the
/// build would), and puts the debug gate where the build's binary would be.
fn cargo_shim(root: &Path, log: &Path) -> PathBuf {
    let shim = root.join("shim");
    std::fs::create_dir_all(&shim).unwrap();
    let real = real_cargo();
    executable(
        &shim.join("cargo"),
        &format!(
            "#!/usr/bin/env bash\n\
             [ \"$1\" = build ] || exec '{real}' \"$@\"\n\
             {{ echo \"cwd=$PWD\"; echo \"toolchain=${{RUSTUP_TOOLCHAIN:-}}\"; echo \"args=$*\"; }} > '{log}'\n\
             '{real}' metadata --format-version 1 --no-deps --offline >/dev/null || exit 101\n\
             mkdir -p \"$CARGO_TARGET_DIR/release\" && cp '{bin}' \"$CARGO_TARGET_DIR/release/gate\"\n",
            log = log.display(),
            bin = crate::common::gate_exe().display(),
        ),
    );
    shim
}

/// Runs the action's install step (scripts/action/install.sh of `gate`, a
/// copy of this repository) in `cwd` as GitHub would, with `cargo` shimmed
/// and no prebuilt release found. Returns (exit code, stderr, $GITHUB_OUTPUT).
fn run_install(root: &Path, gate: &Path, cwd: &Path, envs: &[(&str, &Path)]) -> (Option<i32>, String, String) {
    let shim = cargo_shim(root, &root.join("cargo.log"));
    let output = root.join("github_output");
    let mut cmd = std::process::Command::new("bash");
    cmd.arg(gate.join("scripts/action/install.sh"))
        .current_dir(cwd)
        .env("PATH", format!("{}:{}", shim.display(), std::env::var("PATH").unwrap()))
        .env("GITHUB_OUTPUT", &output)
        .env("GITHUB_PATH", root.join("github_path"))
        .env("ACTION_PATH", gate)
        .env("FOUND", "false")
        .env("BIN_DIR", root.join("bin"))
        .env("TARGET_DIR", root.join("target"))
        .env("FEATURES", "cpu")
        .env("SOURCE_KEY", "k1")
        // The pin is install.sh's default; the test pins what every machine has.
        .env("GATE_RUST_TOOLCHAIN", "stable")
        // rustup tells the processes it starts which toolchain it chose: the
        // test must not pass that on, or the caller's rust-toolchain.toml is moot.
        .env_remove("RUSTUP_TOOLCHAIN")
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("CARGO");
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let o = cmd.output().unwrap();
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
        std::fs::read_to_string(&output).unwrap_or_default(),
    )
}

#[test]
fn the_action_builds_gate_apart_from_the_callers_workspace_toolchain_and_cargo_config() {
    let t = tempfile::tempdir().unwrap();
    let (caller, gate) = hostile_caller(t.path());
    // The fixture is hostile: cargo run inside gate's nested copy fails.
    let o = std::process::Command::new(real_cargo())
        .args(["metadata", "--format-version", "1", "--no-deps", "--offline"])
        .current_dir(&gate)
        .env_remove("RUSTUP_TOOLCHAIN")
        .env_remove("CARGO")
        .output()
        .unwrap();
    assert!(!o.status.success(), "the caller's files must break a build in its tree");

    let runner_temp = t.path().join("runner_temp");
    std::fs::create_dir_all(&runner_temp).unwrap();
    // GitHub runs a step in the caller's workspace; the caller's RUSTFLAGS would break the build too.
    let (code, stderr, outputs) = run_install(
        t.path(),
        &gate,
        &caller,
        &[("RUNNER_TEMP", &runner_temp), ("RUSTFLAGS", Path::new("--cfg broken"))],
    );
    assert_eq!(code, Some(0), "{stderr}");
    let log = std::fs::read_to_string(t.path().join("cargo.log")).unwrap();
    let cwd = log.lines().find_map(|l| l.strip_prefix("cwd=")).unwrap();
    assert!(
        Path::new(cwd).starts_with(&runner_temp) && !Path::new(cwd).starts_with(&caller),
        "built outside the caller's tree: {log}"
    );
    assert!(log.contains("toolchain=stable\n"), "{log}");
    assert!(log.contains("args=build --release --locked --bin gate\n"), "{log}");
    assert!(outputs.contains("from=source\n"), "{outputs}");
    assert_eq!(
        std::fs::read_to_string(t.path().join("bin/.source-key")).unwrap(),
        "k1\n"
    );
    assert!(t.path().join("bin/gate").exists());
    assert!(
        std::fs::read_dir(&runner_temp).unwrap().next().is_none(),
        "the copy is removed"
    );
}

#[test]
fn the_action_never_runs_a_cached_gate_whose_hash_does_not_match() {
    let t = tempfile::tempdir().unwrap();
    let gate = Path::new(env!("GATE_REPO_ROOT"));
    let rt = t.path().join("runner_temp");
    std::fs::create_dir_all(&rt).unwrap();
    let bin = t.path().join("bin");
    // A first job builds gate and records its hash beside it.
    let (code, stderr, outputs) = run_install(t.path(), gate, t.path(), &[("RUNNER_TEMP", &rt)]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(outputs.contains("from=source\n"), "{outputs}");
    let recorded = std::fs::read_to_string(bin.join("gate.sha256")).unwrap();
    assert!(recorded.ends_with("  gate\n"), "{recorded}");

    // The next job restores it intact: used as it is, no build.
    std::fs::remove_file(t.path().join("cargo.log")).unwrap();
    let (code, stderr, outputs) = run_install(t.path(), gate, t.path(), &[("RUNNER_TEMP", &rt)]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(outputs.contains("from=cache\n"), "{outputs}");
    assert!(!t.path().join("cargo.log").exists(), "no build");

    // A binary swapped after its build (same source key): never run, rebuilt.
    let marker = t.path().join("tampered-gate-ran");
    executable(
        &bin.join("gate"),
        &format!("#!/bin/sh\ntouch '{}'\necho 'gate 6.6.6'\n", marker.display()),
    );
    let (code, stderr, outputs) = run_install(t.path(), gate, t.path(), &[("RUNNER_TEMP", &rt)]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(!marker.exists(), "the tampered binary ran");
    assert!(outputs.contains("from=source\n"), "{outputs}");
    assert!(t.path().join("cargo.log").exists(), "rebuilt");
    assert_eq!(std::fs::read_to_string(bin.join("gate.sha256")).unwrap(), recorded);

    // A binary with no recorded hash (an older cache, or planted): the same.
    std::fs::remove_file(bin.join("gate.sha256")).unwrap();
    executable(&bin.join("gate"), &format!("#!/bin/sh\ntouch '{}'\n", marker.display()));
    let (code, stderr, outputs) = run_install(t.path(), gate, t.path(), &[("RUNNER_TEMP", &rt)]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(!marker.exists(), "the unverified binary ran");
    assert!(outputs.contains("from=source\n"), "{outputs}");
}

#[test]
fn the_cuda_runtime_venv_is_fresh_per_job_under_runner_temp() {
    let t = tempfile::tempdir().unwrap();
    let shim = t.path().join("shim");
    std::fs::create_dir_all(&shim).unwrap();
    let log = t.path().join("python.log");
    // No CUDA here: `ldd` says the runtime is missing, `python3 -m venv`
    // makes the venv's layout and a `pip` that installs nothing.
    executable(
        &shim.join("ldd"),
        "#!/bin/sh\nprintf '\\tlibcublas.so.13 => not found\\n\\tlibc.so.6 => /lib/libc.so.6\\n'\n",
    );
    executable(
        &shim.join("python3"),
        &format!(
            "#!/usr/bin/env bash\necho \"$*\" >> '{}'\nd=\"${{@: -1}}\"\n\
             mkdir -p \"$d/bin\" \"$d/lib/python3.12/site-packages/nvidia/cu13/lib\"\n\
             printf '#!/bin/sh\\n' > \"$d/bin/pip\" && chmod +x \"$d/bin/pip\"\n",
            log.display()
        ),
    );
    // What an earlier job (maybe a fork's) left where the old venv lived.
    let home = t.path().join("home");
    let planted = home.join(".cache/gate-action/cuda-runtime-13.0");
    std::fs::create_dir_all(planted.join("bin")).unwrap();
    let ran = t.path().join("planted-pip-ran");
    executable(
        &planted.join("bin/pip"),
        &format!("#!/bin/sh\ntouch '{}'\n", ran.display()),
    );
    let rt = t.path().join("runner_temp");
    std::fs::create_dir_all(&rt).unwrap();
    let env_file = t.path().join("github_env");
    let run = || {
        let o = std::process::Command::new("bash")
            .arg(Path::new(env!("GATE_REPO_ROOT")).join("scripts/action/cuda-runtime.sh"))
            .arg("/bin/true")
            .env("PATH", format!("{}:/usr/bin:/bin", shim.display()))
            .env("HOME", &home)
            .env("RUNNER_TEMP", &rt)
            .env("GITHUB_ENV", &env_file)
            .env_remove("GATE_CUDA_RUNTIME")
            .env_remove("LD_LIBRARY_PATH")
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
        PathBuf::from(String::from_utf8(o.stdout).unwrap().trim())
    };
    let (first, second) = (run(), run());
    for lib in [&first, &second] {
        assert!(lib.starts_with(&rt), "the venv is under RUNNER_TEMP: {}", lib.display());
        assert!(lib.ends_with("lib/python3.12/site-packages/nvidia/cu13/lib"));
    }
    assert_ne!(first, second, "a fresh venv each time");
    let calls = std::fs::read_to_string(&log).unwrap();
    assert_eq!(
        calls.lines().filter(|l| l.starts_with("-m venv --clear ")).count(),
        2,
        "{calls}"
    );
    assert!(!ran.exists(), "the venv an earlier job left was used");
    let env = std::fs::read_to_string(&env_file).unwrap();
    assert!(
        env.starts_with(&format!("LD_LIBRARY_PATH={}", first.display())),
        "{env}"
    );
}

/// The write permissions a job holds: its own `permissions`, else the
/// workflow's. A reusable workflow's job without its own takes the caller's,
/// which may write: reported as `(the caller's)`.
fn job_writes(w: &Workflow, job: &Yaml) -> Vec<String> {
    if !job["permissions"].is_badvalue() {
        return permissions_write(&job["permissions"]);
    }
    let top = key(&w.doc, "permissions");
    if top.is_badvalue() && only_called(w) {
        return vec!["(the caller's)".into()];
    }
    permissions_write(top)
}

/// A persistent self-hosted runner may have run a fork's code (a labelled
/// PR, or a workflow a fork changed): it must never hold a token that
/// writes. Measure there read-only; publish from a GitHub-hosted job.
/// https://docs.github.com/en/actions/hosting-your-own-runners/managing-self-hosted-runners/about-self-hosted-runners#self-hosted-runner-security
#[test]
fn no_self_hosted_job_holds_a_write_token() {
    let mut checked = 0;
    for w in workflows() {
        for (name, job) in jobs(&w) {
            if !self_hosted(job) || !job["uses"].is_badvalue() {
                continue; // a reusable workflow's call is checked in that workflow
            }
            let writes = job_writes(&w, job);
            assert!(
                writes.is_empty(),
                "{}: job `{name}` may run on a self-hosted runner and holds a write token {writes:?}; \
                 measure there with `contents: read` and write from a GitHub-hosted job",
                w.file
            );
            checked += 1;
        }
    }
    // gate-pr, gate-main, gate-release GPU jobs and the reusable workflow's measuring job.
    assert!(checked >= 4, "{checked}");

    // The lint catches a write there.
    let bad = YamlLoader::load_from_str(
        "on: push\npermissions:\n  contents: read\njobs:\n  gpu:\n    runs-on: [self-hosted, gpu]\n    permissions:\n      contents: write\n",
    )
    .unwrap()
    .remove(0);
    let w = Workflow {
        file: "bad.yml".into(),
        text: String::new(),
        doc: bad,
    };
    let (_, job) = jobs(&w).remove(0);
    assert!(self_hosted(job));
    assert_eq!(job_writes(&w, job), ["contents"]);
    let called =
        YamlLoader::load_from_str("on: workflow_call\njobs:\n  gate:\n    runs-on: ${{ fromJSON(inputs.runs-on) }}\n")
            .unwrap()
            .remove(0);
    let w = Workflow {
        file: "called.yml".into(),
        text: String::new(),
        doc: called,
    };
    let (_, job) = jobs(&w).remove(0);
    assert_eq!(job_writes(&w, job), ["(the caller's)"]);
}

/// The permissions a `permissions:` value grants, as scope → level.
fn granted(p: &Yaml) -> Vec<(String, String)> {
    p.as_hash()
        .map(|h| {
            h.iter()
                .filter_map(|(k, v)| Some((k.as_str()?.to_string(), v.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

/// GitHub refuses to start a called workflow's job that asks for more than
/// its caller grants ("can be only downgraded"). The measuring job of the
/// reusable workflow asks for its own read-only set: every caller of it
/// that this repository ships (`gate init`'s template, docs/github.md's example)
/// grants at least that.
#[test]
fn every_caller_of_the_reusable_workflow_grants_what_its_jobs_ask_for() {
    let reusable = workflows().into_iter().find(|w| w.file == "gate-reusable.yml").unwrap();
    let asked: Vec<(String, String)> = jobs(&reusable)
        .iter()
        .flat_map(|(_, j)| granted(&j["permissions"]))
        .collect();
    assert!(asked.contains(&("pull-requests".into(), "read".into())), "{asked:?}");
    let root = Path::new(env!("GATE_REPO_ROOT"));
    let template = std::fs::read_to_string(root.join("crates/gate-cli/src/templates/gate.yml"))
        .unwrap()
        .replace("{{REPO}}", "acme/gate")
        .replace("{{REF}}", "v1.0.0")
        .replace("{{BRANCH}}", "main");
    let readme = std::fs::read_to_string(root.join("docs/github.md")).unwrap();
    let example = readme
        .split("```yaml\n")
        .filter_map(|b| b.split("```").next())
        .find(|b| b.contains("gate-reusable.yml@") && b.contains("jobs:"))
        .expect("the manual's example (docs/github.md)")
        .to_string();
    for (what, text) in [("gate init's gate.yml", template), ("the manual's example", example)] {
        let doc = YamlLoader::load_from_str(&text).unwrap().remove(0);
        let mut callers = 0;
        for (name, job) in doc["jobs"].as_hash().unwrap() {
            if !job["uses"].as_str().is_some_and(|u| u.contains("gate-reusable.yml")) {
                continue;
            }
            callers += 1;
            let has = if job["permissions"].is_badvalue() {
                granted(&doc["permissions"])
            } else {
                granted(&job["permissions"])
            };
            for (scope, level) in &asked {
                let ok = has.iter().any(|(s, l)| s == scope && (l == level || l == "write"));
                assert!(
                    ok,
                    "{what}: job `{}` grants {has:?}, but the reusable workflow asks for `{scope}: {level}`",
                    name.as_str().unwrap()
                );
            }
        }
        assert!(callers >= 2, "{what}");
    }
}

/// upload-artifact v4 and later refuse a name the run already has (409), so
/// re-running a job whose upload went through fails unless the step sets
/// `overwrite: true` (upload-artifact v6's action.yml: the artifact of that
/// name is deleted before the new one is uploaded).
#[test]
fn every_upload_replaces_an_earlier_attempts_artifact() {
    let all = every_step();
    let mut uploads = 0;
    for (at, step, _) in all {
        if action_of(&step) != Some("actions/upload-artifact") {
            continue;
        }
        uploads += 1;
        assert_eq!(
            step["with"]["overwrite"].as_bool(),
            Some(true),
            "{at}: the upload of `{}` has no `overwrite: true`: a re-run of the job fails with 409",
            step["with"]["name"].as_str().unwrap_or("?")
        );
    }
    assert!(uploads >= 10, "only {uploads} uploads found: the scan is broken");
}

/// `gate init`'s template `name`, with its placeholders filled, as YAML.
fn template(name: &str) -> Yaml {
    let text = std::fs::read_to_string(
        Path::new(env!("GATE_REPO_ROOT"))
            .join("crates/gate-cli/src/templates")
            .join(name),
    )
    .unwrap()
    .replace("{{REPO}}", "acme/gate")
    .replace("{{PIN}}", "v1.0.0")
    .replace("{{REF}}", "v1.0.0")
    .replace("{{BRANCH}}", "main");
    YamlLoader::load_from_str(&text).unwrap().remove(0)
}

/// Two comment runs for one pull request race between finding the comment
/// and creating it (two comments, or an older verdict written last): each
/// `workflow_run` job (gate's own and the one `gate init` writes) runs one
/// at a time per PR (its head repository and branch: a fork's run carries
/// no PR number), and is never cancelled midway.
#[test]
fn comment_jobs_run_one_at_a_time_per_pull_request() {
    let mut docs = vec![(
        "crates/gate-cli/src/templates/gate-comment.yml".to_string(),
        template("gate-comment.yml"),
    )];
    for w in workflows() {
        if triggers(&w).iter().any(|t| t == "workflow_run") {
            docs.push((w.file.clone(), w.doc.clone()));
        }
    }
    assert!(docs.len() >= 2, "the comment workflows are found");
    for (file, doc) in docs {
        for (name, job) in doc["jobs"].as_hash().unwrap() {
            let name = name.as_str().unwrap_or("?");
            let c = &job["concurrency"];
            let group = c["group"]
                .as_str()
                .unwrap_or_else(|| panic!("{file}: job `{name}` has no concurrency group"));
            for part in [
                "github.event.workflow_run.head_repository.full_name",
                "github.event.workflow_run.head_branch",
            ] {
                assert!(
                    group.contains(part),
                    "{file}: job `{name}`: the group `{group}` lacks `{part}`"
                );
            }
            assert_eq!(
                c["cancel-in-progress"].as_bool(),
                Some(false),
                "{file}: job `{name}`: a comment job is never cancelled midway"
            );
        }
    }
}

/// A required check that a merge queue never gets keeps the queue waiting:
/// the PR gate (gate's own and the one `gate init` writes) runs on
/// `merge_group` too, and gate-pr.yml's cancelling group keeps each queued
/// merge apart (a merge_group event has no pull request number).
#[test]
fn the_pull_request_gate_runs_in_a_merge_queue() {
    let pr = workflows().into_iter().find(|w| w.file == "gate-pr.yml").unwrap();
    assert!(triggers(&pr).iter().any(|t| t == "merge_group"), "gate-pr.yml");
    let group = pr.doc["concurrency"]["group"].as_str().unwrap();
    assert!(
        group.contains("github.event.pull_request.number || github.ref"),
        "gate-pr.yml: {group}"
    );
    let gate = template("gate.yml");
    assert!(
        gate["on"]
            .as_hash()
            .unwrap()
            .contains_key(&Yaml::String("merge_group".into())),
        "crates/gate-cli/src/templates/gate.yml"
    );
    let cond = gate["jobs"]["pr"]["if"].as_str().unwrap();
    assert!(
        disjuncts(cond)
            .iter()
            .any(|d| d == "github.event_name == 'merge_group'"),
        "crates/gate-cli/src/templates/gate.yml: the `pr` job's `if:` skips merge_group: {cond}"
    );
}

/// A full commit SHA, as GitHub's SHA-pinning policy requires: 40 hex digits.
fn is_sha(s: &str) -> bool {
    s.len() == 40 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// What is wrong with each `uses:` of `text` under a SHA-pinning policy
/// (organisations may require every action, the composite action's nested
/// ones included, to be pinned by a full commit SHA:
/// https://github.blog/changelog/2025-08-15-github-actions-policy-now-supports-blocking-and-sha-pinning-actions/).
/// Each must be `OWNER/NAME[/PATH]@<40 hex>  # vX.Y.Z`, so a reader (and
/// Dependabot, which updates the comment with the SHA) sees the release;
/// local `./` actions are this repository's own code.
fn unpinned(file: &str, text: &str) -> Vec<String> {
    let mut problems = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let Some(rest) = line.trim_start().trim_start_matches("- ").strip_prefix("uses:") else {
            continue;
        };
        let spec = rest.split_whitespace().next().unwrap_or("");
        if spec.starts_with("./") {
            continue;
        }
        let at = format!("{file}:{}", n + 1);
        let sha = spec.split_once('@').map_or("", |(_, r)| r);
        let comment = rest.split_once('#').map_or("", |(_, c)| c.trim());
        let tag = comment.split_whitespace().next().unwrap_or("");
        let release = tag.strip_prefix('v').is_some_and(|v| {
            let parts: Vec<&str> = v.split('.').collect();
            parts.len() == 3
                && parts
                    .iter()
                    .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
        });
        if !is_sha(sha) {
            problems.push(format!("{at}: `{spec}` is not pinned by a full commit SHA"));
        } else if !release {
            problems.push(format!("{at}: `{spec}` has no `# vX.Y.Z` comment naming its release"));
        }
    }
    problems
}

/// `gate init`'s two workflows as it writes them with `--gate-sha`.
fn generated_pinned(sha: &str) -> Vec<(String, String)> {
    let t = tempfile::tempdir().unwrap();
    let o = std::process::Command::new(crate::common::gate_exe())
        .args([
            "init",
            "--gate-repo",
            "acme/gate",
            "--gate-ref",
            "v1.2.3",
            "--gate-sha",
            sha,
        ])
        .current_dir(t.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    ["gate.yml", "gate-comment.yml"]
        .iter()
        .map(|f| {
            let p = t.path().join(".github/workflows").join(f);
            (format!("gate init: {f}"), std::fs::read_to_string(p).unwrap())
        })
        .collect()
}

#[test]
fn every_action_is_pinned_by_a_commit_sha_with_its_release_in_a_comment() {
    let root = PathBuf::from(env!("GATE_REPO_ROOT"));
    let mut files = vec![(
        "action.yml".to_string(),
        std::fs::read_to_string(root.join("action.yml")).unwrap(),
    )];
    for w in workflows() {
        files.push((format!(".github/workflows/{}", w.file), w.text));
    }
    let sha = "0123456789abcdef0123456789abcdef01234567";
    let generated = generated_pinned(sha);
    for (file, text) in &generated {
        assert!(
            text.contains(&format!("@{sha}  # v1.2.3")),
            "{file}: gate itself is pinned by --gate-sha:\n{text}"
        );
    }
    files.extend(generated);
    // A short or mistyped SHA is refused with the way to find the real one.
    let t = tempfile::tempdir().unwrap();
    let o = std::process::Command::new(crate::common::gate_exe())
        .args(["init", "--gate-repo", "acme/gate", "--gate-sha", "fbc6f39"])
        .current_dir(t.path())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("not a full commit SHA") && err.contains("hint:") && err.contains("git ls-remote"),
        "{err}"
    );
    assert!(!t.path().join(".github").exists(), "nothing written");
    let mut problems = Vec::new();
    let mut seen = 0;
    for (file, text) in &files {
        seen += text
            .lines()
            .filter(|l| l.trim_start().trim_start_matches("- ").starts_with("uses:"))
            .count();
        problems.extend(unpinned(file, text));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(seen > 40, "only {seen} `uses:` lines found: the scan is broken");
}

#[test]
fn the_pin_check_catches_tags_short_shas_and_missing_releases() {
    let text = "steps:\n  - uses: actions/checkout@v5\n\
                \x20 - uses: actions/checkout@fbc6f39  # v5.1.0\n\
                \x20 - uses: actions/checkout@fbc6f3992d24b796d5a048ff273f7fcc4a7b6c09\n\
                \x20 - uses: actions/checkout@fbc6f3992d24b796d5a048ff273f7fcc4a7b6c09  # v5\n\
                \x20 - uses: actions/checkout@fbc6f3992d24b796d5a048ff273f7fcc4a7b6c09  # v5.1.0\n\
                \x20 - uses: ./.gate-action\n";
    assert_eq!(
        unpinned("w.yml", text),
        [
            "w.yml:2: `actions/checkout@v5` is not pinned by a full commit SHA",
            "w.yml:3: `actions/checkout@fbc6f39` is not pinned by a full commit SHA",
            "w.yml:4: `actions/checkout@fbc6f3992d24b796d5a048ff273f7fcc4a7b6c09` has no `# vX.Y.Z` comment naming its release",
            "w.yml:5: `actions/checkout@fbc6f3992d24b796d5a048ff273f7fcc4a7b6c09` has no `# vX.Y.Z` comment naming its release",
        ]
    );
}

/// Dependabot (#51): an action's new release is offered only after a
/// cooldown, and Dependabot's pull requests, branches of this repository
/// whose code nobody reviewed, never reach a self-hosted runner by the
/// same-repository route of an `if:`.
#[test]
fn dependabot_waits_a_cooldown_and_its_pull_requests_take_the_forks_route() {
    let root = PathBuf::from(env!("GATE_REPO_ROOT"));
    let text = std::fs::read_to_string(root.join(".github/dependabot.yml")).unwrap();
    let doc = YamlLoader::load_from_str(&text).unwrap().remove(0);
    for u in doc["updates"].as_vec().unwrap() {
        let days = u["cooldown"]["default-days"].as_i64();
        assert!(
            days.is_some_and(|d| (1..=90).contains(&d)),
            "{:?}: cooldown {days:?}",
            u["package-ecosystem"]
        );
    }
    let mut checked = 0;
    for w in workflows() {
        if !runs_pr_code(&w) {
            continue;
        }
        for (name, job) in jobs(&w) {
            if !self_hosted(job) {
                continue;
            }
            for d in disjuncts(job["if"].as_str().unwrap_or("")) {
                if d.contains(SAME_REPO) {
                    checked += 1;
                    assert!(
                        d.contains("github.event.pull_request.user.login != 'dependabot[bot]'"),
                        "{}: job `{name}` admits Dependabot's pull requests by the same-repository route: {d}",
                        w.file
                    );
                }
            }
        }
    }
    assert!(checked >= 1, "gate-pr.yml's GPU job is checked");
}

#[test]
fn dependabot_keeps_the_pinned_actions_current() {
    let root = PathBuf::from(env!("GATE_REPO_ROOT"));
    let text = std::fs::read_to_string(root.join(".github/dependabot.yml"))
        .expect(".github/dependabot.yml: Dependabot updates SHA pins and their comments");
    let doc = YamlLoader::load_from_str(&text).unwrap().remove(0);
    assert_eq!(doc["version"].as_i64(), Some(2));
    let dirs: Vec<&str> = doc["updates"]
        .as_vec()
        .unwrap()
        .iter()
        .filter(|u| u["package-ecosystem"].as_str() == Some("github-actions"))
        .flat_map(|u| {
            let one = u["directory"].as_str().into_iter();
            let many = u["directories"]
                .as_vec()
                .into_iter()
                .flatten()
                .filter_map(|d| d.as_str());
            one.chain(many)
        })
        .collect();
    // `/` covers .github/workflows and the root action.yml.
    assert!(
        dirs.contains(&"/"),
        "github-actions updates for the workflows: {dirs:?}"
    );
}

/// The `needs:` of a job, as a list.
fn needs(job: &Yaml) -> Vec<String> {
    match &job["needs"] {
        Yaml::String(s) => vec![s.clone()],
        Yaml::Array(a) => a.iter().filter_map(|x| x.as_str().map(String::from)).collect(),
        _ => Vec::new(),
    }
}

/// The artifact a step uploads or downloads by a literal name (`uses:` of `action`).
fn artifact_of(step: &Yaml, action: &str) -> Option<String> {
    let uses = step["uses"].as_str()?;
    if !uses.starts_with(action) {
        return None;
    }
    step["with"]["name"]
        .as_str()
        .filter(|n| !n.contains("${{"))
        .map(String::from)
}

/// What is wrong in `w`: an artifact a GitHub-hosted job built, consumed by
/// another job of a run in which a self-hosted job also runs, without a
/// check of its SHA-256 against the builder's job output. Every job of a run
/// holds the run's artifact token and can delete and re-upload an artifact
/// by name; a job output is set by its own job only
/// (https://docs.github.com/en/actions/using-jobs/defining-outputs-for-jobs).
fn unverified_artifacts(w: &Workflow) -> Vec<String> {
    let all = jobs(w);
    if !all.iter().any(|(_, j)| self_hosted(j)) {
        return Vec::new();
    }
    let mut builder = std::collections::HashMap::new();
    for (name, job) in &all {
        if self_hosted(job) {
            continue; // what a self-hosted job uploads is data (a report), read as such
        }
        for s in steps(job) {
            if let Some(a) = artifact_of(s, "actions/upload-artifact") {
                builder.insert(a, name.clone());
            }
        }
    }
    let mut problems = Vec::new();
    for (name, job) in &all {
        let st = steps(job);
        for (i, s) in st.iter().enumerate() {
            let Some(a) = artifact_of(s, "actions/download-artifact") else {
                continue;
            };
            let Some(b) = builder.get(&a) else { continue };
            let at = format!("{}: job `{name}`, artifact `{a}` (built by `{b}`)", w.file);
            if !needs(job).contains(b) {
                problems.push(format!(
                    "{at}: `{b}` is not in its `needs:`, so its outputs cannot be read"
                ));
                continue;
            }
            let outputs: Vec<String> = all
                .iter()
                .find(|(n, _)| n == b)
                .and_then(|(_, j)| j["outputs"].as_hash())
                .map(|h| h.keys().filter_map(|k| k.as_str().map(String::from)).collect())
                .unwrap_or_default();
            // A later step that hands one of the builder's outputs to a `sha256sum -c`.
            let verified = st[i + 1..].iter().any(|v| {
                let env = v["env"].as_hash().into_iter().flatten().filter_map(|(_, x)| x.as_str());
                let reads = env
                    .into_iter()
                    .any(|x| outputs.iter().any(|o| x.contains(&format!("needs.{b}.outputs.{o}"))));
                reads && v["run"].as_str().is_some_and(|r| r.contains("sha256sum -c"))
            });
            if !verified {
                problems.push(format!(
                    "{at}: no later step checks it with `sha256sum -c` against `needs.{b}.outputs.*` ({outputs:?})"
                ));
            }
        }
    }
    problems
}

#[test]
fn a_built_artifact_is_verified_against_its_builders_output_where_a_self_hosted_job_shares_the_run() {
    let mut problems = Vec::new();
    for w in workflows() {
        problems.extend(unverified_artifacts(&w));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));

    // The lint catches the shape gate-release.yml had: `release` trusting the
    // SHA256SUMS inside the artifact the self-hosted job could replace.
    let bad = "on: push\npermissions: {contents: read}\njobs:\n\
               \x20 package:\n    runs-on: ubuntu-latest\n    outputs: {sums: x}\n    steps:\n\
               \x20     - uses: actions/upload-artifact@v6\n        with: {name: dist, path: dist/}\n\
               \x20 gpu:\n    needs: package\n    runs-on: [self-hosted, gpu]\n    steps: [{run: 'true'}]\n\
               \x20 release:\n    needs: [gpu]\n    runs-on: ubuntu-latest\n    steps:\n\
               \x20     - uses: actions/download-artifact@v7\n        with: {name: dist, path: dist}\n\
               \x20     - run: (cd dist && sha256sum -c SHA256SUMS)\n\
               \x20 late:\n    needs: [package, gpu]\n    runs-on: ubuntu-latest\n    steps:\n\
               \x20     - uses: actions/download-artifact@v7\n        with: {name: dist, path: dist}\n\
               \x20     - run: sha256sum -c SHA256SUMS\n        env: {S: '${{ needs.package.outputs.sums }}'}\n";
    let w = Workflow {
        file: "bad.yml".into(),
        text: bad.into(),
        doc: YamlLoader::load_from_str(bad).unwrap().remove(0),
    };
    let found = unverified_artifacts(&w);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].contains("job `release`") && found[0].contains("not in its `needs:`"),
        "{found:?}"
    );
}

/// A step that restores or saves a build cache (GitHub's cache service).
fn uses_cache(step: &Yaml) -> bool {
    step["uses"]
        .as_str()
        .is_some_and(|u| u.starts_with("actions/cache") || u.starts_with("Swatinem/rust-cache"))
}

/// A step that runs gate's own action (this repository's, or the one the templates name).
fn uses_gate_action(step: &Yaml) -> bool {
    step["uses"]
        .as_str()
        .is_some_and(|u| u.starts_with("./") || u.starts_with("acme/gate@"))
}

/// What is wrong in a workflow `doc`: a job that holds a write token (or a
/// release build) and restores a cache, directly or through gate's action
/// with `command: check` (the only command whose steps touch a cache). A
/// cache entry is written by whichever job saved it under the key (a
/// self-hosted runner's too), so a hash stored in it proves nothing.
fn privileged_caches(file: &str, w: &Workflow) -> Vec<String> {
    let release = match &w.doc["on"]["push"] {
        Yaml::Hash(h) => h.contains_key(&Yaml::String("tags".into())),
        _ => false,
    };
    let mut problems = Vec::new();
    for (name, job) in jobs(w) {
        let writes = job_writes(w, job);
        if writes.is_empty() && !release {
            continue;
        }
        let why = if release {
            "a release build".to_string()
        } else {
            format!("it writes {writes:?}")
        };
        for s in steps(job) {
            if uses_cache(s) {
                problems.push(format!(
                    "{file}: job `{name}` ({why}) uses the cache `{}`",
                    s["uses"].as_str().unwrap()
                ));
            }
            if uses_gate_action(s) {
                let command = s["with"]["command"].as_str().unwrap_or("check");
                if command == "check" {
                    problems.push(format!(
                        "{file}: job `{name}` ({why}) runs gate's action with `command: check`, which restores caches"
                    ));
                }
            }
        }
    }
    problems
}

#[test]
fn no_job_that_writes_and_no_release_build_uses_a_cache() {
    let mut docs: Vec<(String, Workflow)> = workflows()
        .into_iter()
        .map(|w| (format!(".github/workflows/{}", w.file), w))
        .collect();
    for t in ["gate.yml", "gate-comment.yml"] {
        let w = Workflow {
            file: t.into(),
            text: String::new(),
            doc: template(t),
        };
        docs.push((format!("crates/gate-cli/src/templates/{t}"), w));
    }
    let mut problems = Vec::new();
    for (file, w) in &docs {
        problems.extend(privileged_caches(file, w));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));

    // The action touches a cache only for `check`: each cache step's `if:`
    // says so, or reads the outputs of a step whose `if:` does.
    let root = PathBuf::from(env!("GATE_REPO_ROOT"));
    let action = YamlLoader::load_from_str(&std::fs::read_to_string(root.join("action.yml")).unwrap())
        .unwrap()
        .remove(0);
    let st = action["runs"]["steps"].as_vec().unwrap();
    let check_only = |s: &Yaml| {
        s["if"]
            .as_str()
            .is_some_and(|c| c.contains("inputs.command == 'check'"))
    };
    let mut cache_steps = 0;
    for s in st.iter().filter(|s| uses_cache(s)) {
        cache_steps += 1;
        let cond = s["if"].as_str().unwrap_or("");
        let through = st.iter().any(|o| {
            o["id"]
                .as_str()
                .is_some_and(|id| cond.contains(&format!("steps.{id}.outputs")))
                && check_only(o)
        });
        assert!(
            check_only(s) || through,
            "action.yml: the cache step `{}` may run for `comment` or `publish` (its if: `{cond}`)",
            s["name"].as_str().unwrap_or("?")
        );
    }
    assert!(cache_steps >= 4, "only {cache_steps} cache steps found in action.yml");

    // The lint catches a cache in a job that writes and in a release build.
    let bad = "on: {push: {tags: ['v*']}}\npermissions: {contents: read}\njobs:\n\
               \x20 build:\n    runs-on: ubuntu-latest\n    steps: [{uses: Swatinem/rust-cache@v2}]\n\
               \x20 comment:\n    runs-on: ubuntu-latest\n    permissions: {pull-requests: write}\n\
               \x20   steps: [{uses: ./.gate-action}]\n";
    let w = Workflow {
        file: "bad.yml".into(),
        text: bad.into(),
        doc: YamlLoader::load_from_str(bad).unwrap().remove(0),
    };
    let found = privileged_caches("bad.yml", &w);
    assert_eq!(found.len(), 2, "{found:?}");
}

/// gate init's PR workflow: a new push cancels the PR's run in progress, a
/// label change groups with its own label only, and pushes (baselines) are
/// never cancelled nor queued behind each other; a manual run on the
/// default branch stores a baseline, elsewhere it stores nothing.
#[test]
fn the_templates_group_runs_and_a_manual_run_backfills_the_baseline() {
    let gate = template("gate.yml");
    let group = gate["concurrency"]["group"].as_str().unwrap();
    for part in [
        "github.event.pull_request.number || github.sha",
        "github.event.label.name",
    ] {
        assert!(
            group.contains(part),
            "crates/gate-cli/src/templates/gate.yml: the group `{group}` lacks `{part}`"
        );
    }
    assert_eq!(
        gate["concurrency"]["cancel-in-progress"].as_str(),
        Some("${{ github.event_name == 'pull_request' }}")
    );
    assert!(gate["on"]
        .as_hash()
        .unwrap()
        .contains_key(&Yaml::String("workflow_dispatch".into())));
    let baseline = &gate["jobs"]["baseline"];
    assert!(baseline["if"]
        .as_str()
        .unwrap()
        .contains("github.event_name == 'workflow_dispatch'"));
    assert_eq!(
        baseline["with"]["publish-baseline"].as_str(),
        Some("${{ github.ref == 'refs/heads/main' && 'true' || 'false' }}")
    );
    // The comment template's job: one at a time per PR (held by
    // comment_jobs_run_one_at_a_time_per_pull_request).
    assert!(!template("gate-comment.yml")["jobs"]["comment"]["concurrency"].is_badvalue());

    // gate's own default-branch workflow: a manual run's jobs run for main only.
    let main = workflows().into_iter().find(|w| w.file == "gate-main.yml").unwrap();
    assert!(triggers(&main).iter().any(|t| t == "workflow_dispatch"));
    for (name, job) in jobs(&main) {
        if !job["needs"].is_badvalue() {
            continue; // skipped with the jobs it needs
        }
        assert_eq!(
            job["if"].as_str(),
            Some("github.ref == 'refs/heads/main'"),
            "gate-main.yml: job `{name}`"
        );
    }
}

/// Runs scripts/runner/refuse-fork-jobs.sh as the runner would before a
/// job: the event's name, its payload in a file, this repository's name.
fn runner_hook(event: &str, payload: &serde_json::Value) -> (Option<i32>, String) {
    let t = tempfile::tempdir().unwrap();
    let path = t.path().join("event.json");
    std::fs::write(&path, payload.to_string()).unwrap();
    let o = std::process::Command::new("bash")
        .arg(PathBuf::from(env!("GATE_REPO_ROOT")).join("scripts/runner/refuse-fork-jobs.sh"))
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("GITHUB_EVENT_NAME", event)
        .env("GITHUB_EVENT_PATH", &path)
        .env("GITHUB_REPOSITORY", "acme/model")
        .output()
        .unwrap();
    (o.status.code(), String::from_utf8_lossy(&o.stdout).into_owned())
}

/// The workflow's `if:` is the PR's to edit; the runner's job-started hook
/// is not. It admits trusted events and same-repository pull requests, a
/// fork's pull request only for the label naming its exact head, and
/// refuses the rest with the fix.
#[test]
fn the_runner_hook_refuses_a_forks_code_unless_the_label_names_its_head() {
    let head = "1111111111111111111111111111111111111111";
    let pr = |repo: &str, action: &str, label: Option<&str>| {
        let mut v = json!({
            "action": action,
            "pull_request": { "head": { "sha": head, "repo": { "full_name": repo } } }
        });
        if let Some(l) = label {
            v["label"] = json!({ "name": l });
        }
        v
    };
    let push = |r: &str| json!({ "ref": r, "repository": { "default_branch": "main" } });
    for (event, payload) in [
        ("push", push("refs/heads/main")),
        ("push", push("refs/tags/v1.0.0")),
        ("workflow_dispatch", json!({})),
        ("pull_request", pr("acme/model", "synchronize", None)),
        (
            "pull_request",
            pr("stranger/model", "labeled", Some(&format!("gate-gpu@{head}"))),
        ),
    ] {
        let (code, out) = runner_hook(event, &payload);
        assert_eq!(code, Some(0), "{event} {payload}: {out}");
    }
    // Dependabot's pull request, once a maintainer labels its reviewed head.
    let mut labelled = pr("acme/model", "labeled", Some(&format!("gate-gpu@{head}")));
    labelled["pull_request"]["user"] = json!({ "login": "dependabot[bot]" });
    assert_eq!(runner_hook("pull_request", &labelled).0, Some(0));
    for (event, payload, says) in [
        (
            "pull_request",
            pr("stranger/model", "synchronize", None),
            "the fork stranger/model",
        ),
        (
            "pull_request",
            pr("stranger/model", "labeled", Some("gate-gpu")),
            "the fork",
        ),
        (
            "pull_request",
            pr(
                "stranger/model",
                "labeled",
                Some("gate-gpu@2222222222222222222222222222222222222222"),
            ),
            "the fork",
        ),
        (
            "pull_request",
            pr("stranger/model", "opened", Some(&format!("gate-gpu@{head}"))),
            "the fork",
        ),
        ("merge_group", json!({}), "event 'merge_group'"),
        // The merge queue's own push of a queued merge (#51).
        (
            "push",
            push("refs/heads/gh-readonly-queue/main/pr-7-1111111111111111111111111111111111111111"),
            "a push to 'refs/heads/gh-readonly-queue/main/pr-7-",
        ),
        (
            "push",
            push("refs/heads/dependabot/cargo/serde-1.0.1"),
            "neither a tag nor the default branch (main)",
        ),
        ("push", json!({}), "neither a tag nor the default branch"),
        // Dependabot's branch: of this repository, reviewed by nobody (#51).
        (
            "pull_request",
            {
                let mut v = pr("acme/model", "synchronize", None);
                v["pull_request"]["user"] = json!({ "login": "dependabot[bot]" });
                v
            },
            "Dependabot's branch in acme/model",
        ),
        (
            "pull_request_target",
            pr("acme/model", "opened", None),
            "event 'pull_request_target'",
        ),
        ("workflow_run", json!({}), "event 'workflow_run'"),
        ("pull_request", json!({}), "no pull request head"),
    ] {
        let (code, out) = runner_hook(event, &payload);
        assert_eq!(code, Some(1), "{event} {payload}: {out}");
        assert!(out.contains(says) && out.contains("\nhint: "), "{event}: {out}");
    }
}

/// A folder with a `gh` stub for scripts/action/verdict.sh: `gh api PATH
/// --jq FILTER` answers `runs.json` for the runs list and `jobs-<ID>.json`
/// for a run's jobs (the fields GitHub's REST description gives those
/// answers, as many as the script reads), filtered with jq as gh's built-in
/// jq would, and logs each PATH to `gh.log`.
fn verdict_gh(root: &Path, runs: &serde_json::Value, jobs: &[(u64, serde_json::Value)]) -> PathBuf {
    let bin = root.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::write(root.join("runs.json"), runs.to_string()).unwrap();
    for (id, j) in jobs {
        std::fs::write(root.join(format!("jobs-{id}.json")), j.to_string()).unwrap();
    }
    let dir = root.display();
    executable(
        &bin.join("gh"),
        &format!(
            r#"#!/usr/bin/env bash
[ "$1" = api ] && [ "$3" = --jq ] || exit 64
echo "$2" >> "{dir}/gh.log"
case "$2" in
  */runs\?*) f="{dir}/runs.json" ;;
  */actions/runs/*/jobs\?*) id="${{2#*/actions/runs/}}"; f="{dir}/jobs-${{id%%/*}}.json" ;;
  *) echo "gh: not found" >&2; exit 1 ;;
esac
[ -f "$f" ] || {{ echo "HTTP 404" >&2; exit 1; }}
jq -r "$4" "$f"
"#
        ),
    );
    bin
}

/// Runs scripts/action/verdict.sh as gate-pr.yml's `verdict` step does.
fn run_verdict(path: &Path, results: &str, event: &str, fork: bool) -> (Option<i32>, String) {
    let o = std::process::Command::new("bash")
        .arg(PathBuf::from(env!("GATE_REPO_ROOT")).join("scripts/action/verdict.sh"))
        .env(
            "PATH",
            format!("{}:{}", path.display(), std::env::var("PATH").unwrap_or_default()),
        )
        .env("RESULTS", results)
        .env("LOOKUP", "gpu")
        .env("EVENT", event)
        .env("FORK", fork.to_string())
        .env("HEAD_SHA", "1111111111111111111111111111111111111111")
        .env("WORKFLOW", "gate-pr.yml")
        .env("GITHUB_REPOSITORY", "acme/model")
        .env("GITHUB_RUN_ID", "30")
        .env("GH_TOKEN", "t")
        .output()
        .unwrap();
    (o.status.code(), String::from_utf8_lossy(&o.stdout).into_owned())
}

/// A re-run of an older run's `verdict` alone (#51): it would replace the
/// required check with that run's results although a newer run of the
/// workflow for the same head commit judged since (a label added or
/// removed). Runs are ordered by `run_number`, which a re-run keeps.
#[test]
fn a_re_run_of_an_older_verdict_never_replaces_a_newer_runs_check() {
    let t = tempfile::tempdir().unwrap();
    let runs = json!({ "total_count": 2, "workflow_runs": [
        { "id": 31, "run_number": 12 },
        { "id": 30, "run_number": 11 },
    ] });
    let bin = verdict_gh(t.path(), &runs, &[]);
    let run = |number: &str| {
        let o = std::process::Command::new("bash")
            .arg(PathBuf::from(env!("GATE_REPO_ROOT")).join("scripts/action/verdict.sh"))
            .env(
                "PATH",
                format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default()),
            )
            .env("RESULTS", "cpu=success gpu=success")
            .env("LOOKUP", "gpu")
            .env("EVENT", "pull_request")
            .env("FORK", "false")
            .env("HEAD_SHA", "1111111111111111111111111111111111111111")
            .env("WORKFLOW", "gate-pr.yml")
            .env("GITHUB_REPOSITORY", "acme/model")
            .env("GITHUB_RUN_ID", "30")
            .env("GITHUB_RUN_NUMBER", number)
            .env("GH_TOKEN", "t")
            .output()
            .unwrap();
        (o.status.code(), String::from_utf8_lossy(&o.stdout).into_owned())
    };
    let (code, out) = run("11");
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("run #12 of this workflow is newer for 1111111111111111111111111111111111111111"),
        "{out}"
    );
    assert!(out.contains("hint: re-run the newest run (#12)"), "{out}");
    let (code, out) = run("12");
    assert_eq!(code, Some(0), "the newest run decides: {out}");
}

/// A label change starts a run on the same head commit whose check runs
/// replace the earlier ones of the same names, and a skipped job reports
/// success to a required check (docs.github.com, "Handling skipped but
/// required checks"). So in gate-pr.yml the jobs a label can skip are
/// never the check to require: `cpu` has no `if:`, and `verdict` (the
/// required check) runs on every event (`always()`), needs both gates, and
/// reads `actions` only; in `gate init`'s gate.yml the measuring job runs on
/// every pull-request event. The comment jobs comment only on a run that
/// finished measuring (`success`/`failure`): a cancelled run's job would
/// take the group's one pending slot from a run that measured.
#[test]
fn a_label_never_turns_a_red_required_check_green() {
    let pr = workflows().into_iter().find(|w| w.file == "gate-pr.yml").unwrap();
    assert!(
        pr.doc["jobs"]["cpu"]["if"].is_badvalue(),
        "gate-pr.yml: cpu must measure on every event"
    );
    let v = &pr.doc["jobs"]["verdict"];
    assert_eq!(v["if"].as_str(), Some("always()"));
    assert_eq!(needs(v), ["cpu", "gpu"]);
    assert!(!self_hosted(v));
    assert_eq!(
        granted(&v["permissions"]),
        [("contents".into(), "read".into()), ("actions".into(), "read".into())]
    );
    let step = steps(v).into_iter().find(|s| s["run"].as_str().is_some()).unwrap();
    assert_eq!(step["run"].as_str(), Some("bash scripts/action/verdict.sh"));
    assert_eq!(
        step["env"]["RESULTS"].as_str(),
        Some("cpu=${{ needs.cpu.result }} gpu=${{ needs.gpu.result }}")
    );
    assert_eq!(step["env"]["WORKFLOW"].as_str(), Some("gate-pr.yml"));
    // Every other job of gate-pr.yml is in the verdict's `needs:`.
    for (name, _) in jobs(&pr) {
        assert!(
            name == "verdict" || needs(v).contains(&name),
            "gate-pr.yml: `{name}` is not judged by verdict"
        );
    }
    let t = template("gate.yml");
    let cond = t["jobs"]["pr"]["if"].as_str().unwrap();
    assert!(
        disjuncts(cond)
            .iter()
            .any(|d| d == "github.event_name == 'pull_request'"),
        "gate init's `pr` job must run on every pull-request event: {cond}"
    );
    assert!(!cond.contains("label"), "{cond}");

    let mut comments = vec![(
        "crates/gate-cli/src/templates/gate-comment.yml".to_string(),
        template("gate-comment.yml"),
    )];
    for w in workflows() {
        if triggers(&w).iter().any(|t| t == "workflow_run") {
            comments.push((w.file.clone(), w.doc.clone()));
        }
    }
    assert!(comments.len() >= 2);
    for (file, doc) in &comments {
        for (name, job) in doc["jobs"].as_hash().unwrap() {
            let cond = job["if"].as_str().unwrap_or("");
            assert!(
                cond.contains("github.event.workflow_run.conclusion == 'success' || github.event.workflow_run.conclusion == 'failure'"),
                "{file}: job `{}` must admit only runs that concluded success or failure ({cond})",
                name.as_str().unwrap_or("?")
            );
        }
    }
}

/// scripts/action/verdict.sh, the required check: a gate that ran here
/// decides; a skipped GPU gate is looked up in the latest run of the
/// workflow for the same head commit that ran it (the current run and runs
/// that skipped it passed over); none is a failure with the fix; a lookup
/// GitHub refuses fails closed; a merge queue does not judge the GPU.
#[test]
fn the_verdict_reports_the_latest_measurement_of_the_head_never_a_skip() {
    let t = tempfile::tempdir().unwrap();
    let runs = json!({ "total_count": 3, "workflow_runs": [{ "id": 30 }, { "id": 29 }, { "id": 28 }, { "id": 27 }] });
    let job = |status: &str, conclusion: Option<&str>| {
        json!({ "total_count": 2, "jobs": [
        { "name": "cpu", "status": "completed", "conclusion": "success" },
        { "name": "gpu", "status": status, "conclusion": conclusion },
    ] })
    };
    // Run 29 was an unrelated label (gpu skipped); 28 measured and failed; 27 passed.
    let bin = verdict_gh(
        t.path(),
        &runs,
        &[
            (30, job("completed", Some("skipped"))),
            (29, job("completed", Some("skipped"))),
            (28, job("completed", Some("failure"))),
            (27, job("completed", Some("success"))),
        ],
    );
    assert_eq!(
        run_verdict(&bin, "cpu=success gpu=success", "pull_request", false).0,
        Some(0)
    );
    let (code, out) = run_verdict(&bin, "cpu=success gpu=skipped", "pull_request", false);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("gpu: failure on 1111111111111111111111111111111111111111 in run 28"),
        "{out}"
    );
    let log = std::fs::read_to_string(t.path().join("gh.log")).unwrap();
    assert!(log.starts_with("repos/acme/model/actions/workflows/gate-pr.yml/runs?head_sha=1111111111111111111111111111111111111111&event=pull_request&per_page=100\n"), "{log}");
    assert!(
        log.contains("repos/acme/model/actions/runs/29/jobs?filter=latest&per_page=100"),
        "{log}"
    );
    assert!(!log.contains("runs/30/"), "the current run is passed over: {log}");
    assert!(!log.contains("runs/27/"), "the latest measurement decides: {log}");

    // The latest measurement passed: so does this run's verdict.
    let t = tempfile::tempdir().unwrap();
    let bin = verdict_gh(
        t.path(),
        &runs,
        &[
            (29, job("completed", Some("skipped"))),
            (28, job("completed", Some("success"))),
        ],
    );
    let (code, out) = run_verdict(&bin, "cpu=success gpu=skipped", "pull_request", true);
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains("gpu passed on 1111111111111111111111111111111111111111 in run 28"),
        "{out}"
    );
    // ...but not when cpu failed here.
    assert_eq!(
        run_verdict(&bin, "cpu=failure gpu=skipped", "pull_request", true).0,
        Some(1)
    );

    // A measurement still running: fail now, that run's verdict follows.
    let t = tempfile::tempdir().unwrap();
    let bin = verdict_gh(t.path(), &runs, &[(29, job("in_progress", None))]);
    let (code, out) = run_verdict(&bin, "cpu=success gpu=skipped", "pull_request", false);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("still in_progress"), "{out}");

    // Never measured on this head: the fix for a fork and for a branch.
    let t = tempfile::tempdir().unwrap();
    let none = json!({ "total_count": 0, "workflow_runs": [] });
    let bin = verdict_gh(t.path(), &none, &[]);
    let (code, out) = run_verdict(&bin, "cpu=success gpu=skipped", "pull_request", true);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("has not run on this fork's commit") && out.contains("hint: a maintainer reviews that commit, then adds the label gate-gpu@1111111111111111111111111111111111111111"), "{out}");
    let (code, out) = run_verdict(&bin, "cpu=success gpu=skipped", "pull_request", false);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("hint: re-run the workflow"), "{out}");
    for results in [
        "cpu=success gpu=failure",
        "cpu=skipped gpu=success",
        "cpu=cancelled gpu=success",
        "cpu=success gpu=cancelled",
    ] {
        assert_eq!(
            run_verdict(&bin, results, "pull_request", false).0,
            Some(1),
            "{results}"
        );
    }
    // A merge queue: the GPU decided on the PR; cpu must still pass.
    assert_eq!(
        run_verdict(&bin, "cpu=success gpu=skipped", "merge_group", false).0,
        Some(0)
    );
    assert_eq!(
        run_verdict(&bin, "cpu=failure gpu=skipped", "merge_group", false).0,
        Some(1)
    );

    // GitHub refuses the lookup (no actions: read): fail closed, with the fix.
    let t = tempfile::tempdir().unwrap();
    let bin = t.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    executable(
        &bin.join("gh"),
        "#!/bin/sh\necho 'HTTP 403: Resource not accessible by integration' >&2\nexit 1\n",
    );
    let (code, out) = run_verdict(&bin, "cpu=success gpu=skipped", "pull_request", false);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("hint: the job needs `permissions: { actions: read }`"),
        "{out}"
    );
}

/// The `uses:` of a step, without its `@ref`.
fn action_of(step: &Yaml) -> Option<&str> {
    step["uses"].as_str().map(|u| u.split('@').next().unwrap_or(u))
}

#[test]
fn the_release_attests_only_the_checked_archives_from_one_job_with_its_own_permissions() {
    let w = workflows().into_iter().find(|w| w.file == "gate-release.yml").unwrap();
    let mut attesting = Vec::new();
    for (name, job) in jobs(&w) {
        let p = &job["permissions"];
        let grants = |scope: &str| p[scope].as_str() == Some("write");
        let attests = steps(job)
            .iter()
            .any(|s| action_of(s) == Some("actions/attest-build-provenance"));
        // The other use of an OIDC token: crates.io's trusted publishing.
        let exchanges = steps(job)
            .iter()
            .any(|s| action_of(s) == Some("rust-lang/crates-io-auth-action"));
        if attests {
            attesting.push(name.clone());
            assert!(
                grants("id-token") && grants("attestations"),
                "job `{name}` attests without id-token/attestations: write"
            );
        } else {
            assert!(
                !grants("attestations"),
                "job `{name}` holds attestations: write but attests nothing"
            );
            assert_eq!(
                grants("id-token"),
                exchanges,
                "job `{name}`: id-token: write is for a job that attests or exchanges it for a crates.io token, and only for it"
            );
        }
    }
    // Neither at the top of the workflow.
    let top = key(&w.doc, "permissions");
    assert!(top["id-token"].is_badvalue() && top["attestations"].is_badvalue());
    assert_eq!(attesting, ["release"], "one job attests: the hosted one that publishes");

    // In `release`: SHA256SUMS checked against the package job's digest,
    // then the attestation of what it lists, then the publication.
    let job = jobs(&w).into_iter().find(|(n, _)| n == "release").unwrap().1;
    assert!(!self_hosted(job));
    let s = steps(job);
    let at = |pred: &dyn Fn(&Yaml) -> bool| s.iter().position(|x| pred(x)).unwrap();
    let checked = at(&|x| {
        let run = x["run"].as_str().unwrap_or_default();
        run.contains("dist/SHA256SUMS\" | sha256sum -c -")
            && x["env"]["SUMS_SHA256"]
                .as_str()
                .is_some_and(|v| v.contains("needs.package.outputs"))
    });
    let attest = at(&|x| action_of(x) == Some("actions/attest-build-provenance"));
    let publish = at(&|x| x["run"].as_str().is_some_and(|r| r.contains("gh release create")));
    assert!(
        checked < attest && attest < publish,
        "check {checked}, attest {attest}, publish {publish}"
    );
    assert_eq!(s[attest]["with"]["subject-checksums"].as_str(), Some("dist/SHA256SUMS"));
    // The attestation's bundle goes out with the release, under the name
    // find-release.sh downloads (#41 item 5).
    let id = s[attest]["id"].as_str().expect("the attest step has an id");
    let shipped = at(&|x| {
        x["env"]["BUNDLE"].as_str() == Some(&format!("${{{{ steps.{id}.outputs.bundle-path }}}}"))
            && x["run"]
                .as_str()
                .is_some_and(|r| r.contains("dist/gate-$TAG.sigstore.json"))
    });
    assert!(attest < shipped && shipped < publish);
    assert!(s[publish]["run"]
        .as_str()
        .unwrap()
        .contains("\"dist/gate-$TAG.sigstore.json\""));
    let find =
        std::fs::read_to_string(Path::new(env!("GATE_REPO_ROOT")).join("scripts/action/find-release.sh")).unwrap();
    assert!(
        find.contains("bundle=\"gate-${tag}.sigstore.json\""),
        "find-release.sh fetches that name"
    );
}

/// Every string of a YAML value (keys and values), for a search.
fn strings(y: &Yaml, out: &mut Vec<String>) {
    match y {
        Yaml::String(s) => out.push(s.clone()),
        Yaml::Array(a) => a.iter().for_each(|x| strings(x, out)),
        Yaml::Hash(h) => h.iter().for_each(|(k, v)| {
            strings(k, out);
            strings(v, out);
        }),
        _ => {}
    }
}

/// crates.io (#41 item 14): one hosted job, after the GitHub release,
/// publishes with a token crates.io issues for the run (trusted publishing)
/// and no stored one; the token goes to the publish step alone, after every
/// package was built from its own contents. tests/it/publish.rs runs that
/// step's command against a registry on loopback.
#[test]
fn crates_io_is_published_by_one_job_with_a_token_of_the_run_and_none_stored() {
    let w = workflows().into_iter().find(|w| w.file == "gate-release.yml").unwrap();
    let (_, job) = jobs(&w)
        .into_iter()
        .find(|(n, _)| n == "crates-io")
        .expect("gate-release.yml has a `crates-io` job");
    assert!(
        needs(job).contains(&"release".to_string()),
        "after the release: {:?}",
        needs(job)
    );
    assert!(!self_hosted(job));
    // crates.io's trusted publisher names this environment (docs/release.md).
    assert_eq!(job["environment"].as_str(), Some("crates-io"));
    let granted: Vec<(String, String)> = job["permissions"]
        .as_hash()
        .expect("the job declares its permissions")
        .iter()
        .map(|(k, v)| (k.as_str().unwrap().to_string(), v.as_str().unwrap().to_string()))
        .collect();
    assert_eq!(
        granted,
        [
            ("contents".to_string(), "read".to_string()),
            ("id-token".into(), "write".into())
        ]
    );
    let mut all = Vec::new();
    strings(job, &mut all);
    assert!(
        !all.iter().any(|t| t.contains("secrets.")),
        "no stored token: the job reads no secret"
    );

    let s = steps(job);
    let at = |pred: &dyn Fn(&Yaml) -> bool| s.iter().position(|x| pred(x));
    // Packed without compiling here; built and verified by `crates-package`.
    let packed = at(&|x| {
        x["run"].as_str().is_some_and(|r| {
            r.trim_start()
                .starts_with("cargo package --workspace --locked --allow-dirty --no-verify")
        })
    })
    .expect("every package is packed before the first upload");
    let (_, builder) = jobs(&w)
        .into_iter()
        .find(|(n, _)| n == "crates-package")
        .expect("a job without id-token builds the packages");
    assert!(needs(job).contains(&"crates-package".to_string()));
    assert!(builder["permissions"]["id-token"].is_badvalue());
    assert!(steps(builder)
        .iter()
        .any(|x| x["run"].as_str().map(str::trim) == Some("cargo package --workspace --locked --allow-dirty")));
    let auth = at(&|x| action_of(x) == Some("rust-lang/crates-io-auth-action")).expect("the token exchange");
    assert!(s[auth]["with"].is_badvalue(), "crates.io, the action's default `url`");
    let id = s[auth]["id"].as_str().expect("the exchange has an id");
    let token = format!("${{{{ steps.{id}.outputs.token }}}}");
    let publish = at(&|x| x["env"]["CARGO_REGISTRY_TOKEN"].as_str() == Some(token.as_str()))
        .expect("the token goes to cargo as CARGO_REGISTRY_TOKEN");
    assert!(
        packed < auth && auth < publish,
        "package {packed}, token {auth}, publish {publish}"
    );
    // --allow-dirty: the job wrote the release's binstall key into
    // gate-cli's manifest (docs/release.md, "cargo binstall gate-cli").
    assert_eq!(
        s[publish]["run"].as_str().map(str::trim),
        Some("scripts/publish.sh --no-verify --allow-dirty")
    );
    // The token is named once in the whole workflow: that step's env.
    assert_eq!(
        w.text.matches(&format!("steps.{id}.outputs.token")).count(),
        1,
        "{}",
        w.text
    );
    assert_eq!(w.text.matches("CARGO_REGISTRY_TOKEN").count(), 1);

    let docs = std::fs::read_to_string(Path::new(env!("GATE_REPO_ROOT")).join("docs/release.md")).unwrap();
    for setting in ["Workflow filename: `gate-release.yml`", "Environment: `crates-io`"] {
        assert!(
            docs.contains(setting),
            "docs/release.md tells the trusted publisher's `{setting}`"
        );
    }
}

/// Commands that compile, so run third-party build scripts and proc-macros.
fn compiles(line: &str) -> bool {
    let l = line.trim();
    let cargo = |sub: &str| l.contains(&format!("cargo {sub}"));
    [
        "build", "test", "check", "run", "install", "clippy", "doc", "bench", "rustc",
    ]
    .iter()
    .any(|sub| cargo(sub))
        || ((cargo("package") || cargo("publish") || l.contains("scripts/publish.sh")) && !l.contains("--no-verify"))
}

/// A job that holds `id-token: write` compiles nothing (#51): the runner
/// gives every step of such a job the variables to request the OIDC token
/// (ACTIONS_ID_TOKEN_REQUEST_URL / _TOKEN; GitHub's "About security
/// hardening with OpenID Connect"), so any dependency's build script run
/// there could mint it and exchange it for a crates.io publish token.
#[test]
fn no_job_that_can_mint_an_oidc_token_compiles() {
    let mut problems = Vec::new();
    for w in workflows() {
        for (name, job) in jobs(&w) {
            if job["permissions"]["id-token"].as_str() != Some("write") {
                continue;
            }
            for step in steps(job) {
                for line in step["run"].as_str().unwrap_or("").lines() {
                    if compiles(line) {
                        problems.push(format!(
                            "{}: job `{name}` holds id-token: write and runs `{}`",
                            w.file,
                            line.trim()
                        ));
                    }
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    // The check itself: the release workflow's former one-job publish.
    assert!(compiles("cargo package --workspace --locked --allow-dirty"));
    assert!(compiles("cargo build --release"));
    assert!(!compiles(
        "cargo package --workspace --locked --allow-dirty --no-verify"
    ));
    assert!(!compiles("scripts/publish.sh --no-verify --allow-dirty"));
}

/// A folder with `gate` (a stub that says its version) and, unless `gh` is
/// `None`, a `gh` stub that logs its arguments and GH_TOKEN to `gh.log` and
/// exits with `gh`'s code for `attestation verify` (0 for `--help`).
fn provenance_case(root: &Path, gh: Option<i32>) -> (PathBuf, PathBuf) {
    provenance_case_with(root, gh, "2.63.0", "")
}

/// As [`provenance_case`], the `gh` stub saying it is `version` and
/// writing `said` to stderr when it verifies.
fn provenance_case_with(root: &Path, gh: Option<i32>, version: &str, said: &str) -> (PathBuf, PathBuf) {
    let tools = root.join("tools");
    let bin = root.join("bin");
    std::fs::create_dir_all(&tools).unwrap();
    std::fs::create_dir_all(&bin).unwrap();
    executable(&bin.join("gate"), "#!/bin/sh\necho 'gate 9.9.9'\n");
    // Only what install.sh needs on this path, so a gh on the machine is not found.
    for tool in ["tr", "rm", "basename"] {
        let o = std::process::Command::new("bash")
            .args(["-c", &format!("command -v {tool}")])
            .output()
            .unwrap();
        let real = String::from_utf8(o.stdout).unwrap().trim().to_string();
        std::os::unix::fs::symlink(real, tools.join(tool)).unwrap();
    }
    if let Some(code) = gh {
        executable(
            &tools.join("gh"),
            &format!(
                "#!/bin/sh\ncase \"$*\" in *--help*) exit 0;; --version) echo 'gh version {version} (2025-01-01)'; \
                 echo 'https://github.com/cli/cli/releases/tag/v{version}'; exit 0;; esac\n\
                 echo \"args=$* token=$GH_TOKEN\" >> '{}'\necho '{said}' >&2\nexit {code}\n",
                root.join("gh.log").display()
            ),
        );
    }
    (tools, bin)
}

/// install.sh with a release binary found (FOUND=true), PATH = `tools`.
fn run_release_install(root: &Path, tools: &Path, bin: &Path, token: &str) -> (Option<i32>, String) {
    run_release_install_with(root, tools, bin, token, None)
}

/// As [`run_release_install`], with the release's Sigstore bundle at `bundle`.
fn run_release_install_with(
    root: &Path,
    tools: &Path,
    bin: &Path,
    token: &str,
    bundle: Option<&Path>,
) -> (Option<i32>, String) {
    let mut cmd = std::process::Command::new("/bin/bash");
    cmd.arg(Path::new(env!("GATE_REPO_ROOT")).join("scripts/action/install.sh"))
        .env_clear();
    if let Some(b) = bundle {
        cmd.env("BUNDLE", b);
    }
    let o = cmd
        .env("PATH", tools)
        .env("GITHUB_OUTPUT", root.join("github_output"))
        .env("GITHUB_PATH", root.join("github_path"))
        .env("ACTION_PATH", env!("GATE_REPO_ROOT"))
        .env("FOUND", "true")
        .env("BIN_DIR", bin)
        .env("FEATURES", "cpu")
        .env("ARCHIVE", root.join("gate-v9.9.9-x86_64-unknown-linux-gnu.tar.gz"))
        .env("RELEASE_REPO", "octo/gate")
        .env("GH_TOKEN", token)
        .output()
        .unwrap();
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr),
    )
}

#[test]
fn the_action_verifies_a_release_s_provenance_where_gh_is_present() {
    // No gh: a note, and the release binary is used (SHA256SUMS was checked).
    let t = tempfile::tempdir().unwrap();
    let (tools, bin) = provenance_case(t.path(), None);
    let (code, out) = run_release_install(t.path(), &tools, &bin, "tok");
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains("gh is not installed: the release's build provenance is not verified"),
        "{out}"
    );
    assert!(bin.join("gate").exists());

    // gh verifies: against the release's repository and its release workflow,
    // with the token given to gh alone.
    let t = tempfile::tempdir().unwrap();
    let (tools, bin) = provenance_case(t.path(), Some(0));
    let (code, out) = run_release_install(t.path(), &tools, &bin, "tok");
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("build provenance verified"), "{out}");
    let log = std::fs::read_to_string(t.path().join("gh.log")).unwrap();
    let archive = t.path().join("gate-v9.9.9-x86_64-unknown-linux-gnu.tar.gz");
    assert_eq!(
        log.trim(),
        format!(
            "args=attestation verify {} --repo octo/gate --signer-workflow octo/gate/.github/workflows/gate-release.yml token=tok",
            archive.display()
        )
    );
    assert!(std::fs::read_to_string(t.path().join("github_output"))
        .unwrap()
        .contains("from=release\n"));

    // gh says no: the job fails and the binary is gone, unrun.
    let t = tempfile::tempdir().unwrap();
    let (tools, bin) = provenance_case(t.path(), Some(1));
    let (code, out) = run_release_install(t.path(), &tools, &bin, "tok");
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains(
            "::error title=gate action::gate-v9.9.9-x86_64-unknown-linux-gnu.tar.gz has no valid build provenance"
        ),
        "{out}"
    );
    assert!(out.contains("hint: "), "{out}");
    assert!(!bin.join("gate").exists(), "the unverified binary is removed");

    // gh without a token to ask GitHub with: a note, not a failure.
    let t = tempfile::tempdir().unwrap();
    let (tools, bin) = provenance_case(t.path(), Some(1));
    let (code, out) = run_release_install(t.path(), &tools, &bin, "");
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("no token for gh"), "{out}");
    assert!(!t.path().join("gh.log").exists());
}

/// #43 item 17: a `gh` that cannot run is a failed check, not an old gh;
/// only a gh whose version says it predates the one that reads Sigstore's
/// current trusted root (2.56.0, #41 item 5) is a note.
#[test]
fn a_gh_that_cannot_run_fails_the_provenance_check() {
    let cases = [
        // Not executable as a program (a broken install).
        (
            "#!/nonexistent/interpreter\n",
            Some(1),
            "gh is on PATH but does not run (`gh --version` failed)",
        ),
        (
            "#!/bin/sh\necho 'error while loading shared libraries' >&2\nexit 127\n",
            Some(1),
            "gh is on PATH but does not run",
        ),
        // Runs, says 2.60, yet its `gh attestation` fails.
        (
            "#!/bin/sh\ncase \"$*\" in --version) echo 'gh version 2.60.0 (2024-10-01)'; exit 0;; esac\nexit 1\n",
            Some(1),
            "this gh says it is `gh version 2.60.0 (2024-10-01)`, and `gh attestation verify --help` fails",
        ),
        // Old: a note, and the SHA256SUMS check stands.
        (
            "#!/bin/sh\ncase \"$*\" in --version) echo 'gh version 2.45.0 (2024-03-04)'; exit 0;; esac\nexit 1\n",
            Some(0),
            "this gh (gh version 2.45.0 (2024-03-04)) cannot verify Sigstore's current attestations (2.56.0 or newer can)",
        ),
    ];
    for (script, exit, said) in cases {
        let t = tempfile::tempdir().unwrap();
        let (tools, bin) = provenance_case(t.path(), None);
        executable(&tools.join("gh"), script);
        let (code, out) = run_release_install(t.path(), &tools, &bin, "tok");
        assert_eq!(code, exit, "{script}: {out}");
        assert!(out.contains(said), "{script}: {out}");
        if exit == Some(1) {
            assert!(out.contains("::error title=gate action::"), "{out}");
            assert!(out.contains("hint: repair or remove that gh"), "{out}");
            assert!(!bin.join("gate").exists(), "{script}: the unchecked binary is removed");
        } else {
            assert!(bin.join("gate").exists());
        }
    }
}

/// #41 item 5: the release's Sigstore bundle is verified offline (`--bundle`,
/// no attestations API, no token needed); a gh older than 2.56.0, which
/// cannot read Sigstore's current trusted root, is not asked; a refusal to
/// reach GitHub or Sigstore is a warning (SHA256SUMS was checked), a
/// verdict against the archive fails the job.
#[test]
fn the_release_bundle_is_verified_offline_and_a_refusal_is_told_from_a_mismatch() {
    let bundle_of = |t: &Path| {
        let b = t.join("gate-v9.9.9.sigstore.json");
        std::fs::write(&b, "{}\n").unwrap();
        b
    };
    // An old gh: not asked; a note.
    let t = tempfile::tempdir().unwrap();
    let (tools, bin) = provenance_case_with(t.path(), Some(0), "2.55.0", "");
    let (code, out) = run_release_install_with(t.path(), &tools, &bin, "tok", Some(&bundle_of(t.path())));
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains("this gh (gh version 2.55.0 (2025-01-01)) cannot verify Sigstore's current attestations (2.56.0 or newer can)"),
        "{out}"
    );
    assert!(!t.path().join("gh.log").exists(), "an old gh is not asked");
    assert!(bin.join("gate").exists());

    // The bundle, with no token: verified offline.
    let t = tempfile::tempdir().unwrap();
    let (tools, bin) = provenance_case_with(t.path(), Some(0), "2.56.0", "");
    let bundle = bundle_of(t.path());
    let (code, out) = run_release_install_with(t.path(), &tools, &bin, "", Some(&bundle));
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains("build provenance verified offline, from the release bundle"),
        "{out}"
    );
    let log = std::fs::read_to_string(t.path().join("gh.log")).unwrap();
    assert_eq!(
        log.trim(),
        format!(
            "args=attestation verify {} --repo octo/gate --signer-workflow octo/gate/.github/workflows/gate-release.yml --bundle {} token=",
            t.path().join("gate-v9.9.9-x86_64-unknown-linux-gnu.tar.gz").display(),
            bundle.display()
        )
    );

    // gh could not reach GitHub or Sigstore: a warning; the binary is used.
    for said in [
        "Error: failed to fetch attestations from octo/gate: HTTP 403: Resource not accessible by integration (https://api.github.com/repos/octo/gate/attestations/sha256:ab)",
        "Error: failed to create TUF client: Get \"https://tuf-repo-cdn.sigstore.dev/13.root.json\": dial tcp: lookup tuf-repo-cdn.sigstore.dev: no such host",
        "Error: HTTP 503: Service Unavailable",
    ] {
        let t = tempfile::tempdir().unwrap();
        let (tools, bin) = provenance_case_with(t.path(), Some(1), "2.70.1", said);
        let (code, out) = run_release_install_with(t.path(), &tools, &bin, "tok", Some(&bundle_of(t.path())));
        assert_eq!(code, Some(0), "{said}: {out}");
        assert!(
            out.contains("::warning title=gate action::gh could not reach GitHub or Sigstore to verify"),
            "{out}"
        );
        assert!(out.contains(said), "gh's own words are shown: {out}");
        assert!(bin.join("gate").exists());
    }

    // A verdict: another repository's workflow, a bad signature, no
    // attestation for these bytes. The job fails; the binary is removed.
    for said in [
        "Error: verifying with issuer \"sigstore.dev\": failed to verify certificate identity: no matching CertificateIdentity found, last error: expected SAN value \"https://github.com/octo/gate/.github/workflows/gate-release.yml\", got \"https://github.com/evil/gate/.github/workflows/release.yml@refs/tags/v9.9.9\"",
        "Error: failed to verify signature: invalid signature when validating ASN.1 encoded signature",
        "Error: no attestations found for subject sha256:ab in the bundle",
    ] {
        let t = tempfile::tempdir().unwrap();
        let (tools, bin) = provenance_case_with(t.path(), Some(1), "2.70.1", said);
        let (code, out) = run_release_install_with(t.path(), &tools, &bin, "tok", Some(&bundle_of(t.path())));
        assert_eq!(code, Some(1), "{said}: {out}");
        assert!(out.contains("has no valid build provenance from octo/gate"), "{out}");
        assert!(!bin.join("gate").exists(), "{said}");
    }
}

// What gate relies on in each pinned action (docs/release.md, "What gate
// relies on in each pinned action"): the inputs its steps must set.

/// Every step of `action.yml` and of every workflow, with where it is
/// (`file: job` or `action.yml`) and the permissions its job holds (none
/// for the action's own steps: those are the caller's job's).
fn every_step() -> Vec<(String, Yaml, Option<Yaml>)> {
    let root = Path::new(env!("GATE_REPO_ROOT"));
    let action = YamlLoader::load_from_str(&std::fs::read_to_string(root.join("action.yml")).unwrap())
        .unwrap()
        .remove(0);
    let mut all: Vec<(String, Yaml, Option<Yaml>)> = action["runs"]["steps"]
        .as_vec()
        .unwrap()
        .iter()
        .map(|s| ("action.yml".to_string(), s.clone(), None))
        .collect();
    for w in workflows() {
        for (name, job) in jobs(&w) {
            let perms = if job["permissions"].is_badvalue() {
                w.doc["permissions"].clone()
            } else {
                job["permissions"].clone()
            };
            for s in steps(job) {
                all.push((format!("{}: job `{name}`", w.file), s.clone(), Some(perms.clone())));
            }
        }
    }
    all
}

/// A `with:` value as written: a string, or a YAML integer or boolean as text.
fn with_text(v: &Yaml) -> Option<String> {
    match v {
        Yaml::String(s) => Some(s.clone()),
        Yaml::Integer(i) => Some(i.to_string()),
        Yaml::Boolean(b) => Some(b.to_string()),
        _ => None,
    }
}

/// A value in `action.yml`'s steps with `${{ inputs.NAME }}` replaced by
/// that input's default (what a caller that does not set it gets).
fn action_default(value: &str) -> String {
    let root = Path::new(env!("GATE_REPO_ROOT"));
    let action = YamlLoader::load_from_str(&std::fs::read_to_string(root.join("action.yml")).unwrap())
        .unwrap()
        .remove(0);
    let mut v = value.to_string();
    for (k, input) in action["inputs"].as_hash().unwrap() {
        let Some(default) = with_text(&input["default"]) else {
            continue;
        };
        v = v.replace(&format!("${{{{ inputs.{} }}}}", k.as_str().unwrap()), &default);
    }
    v
}

/// What is wrong with one upload-artifact step's `retention-days`: unset
/// (the repository's default: up to 90 days on a public repository, 400 on
/// a private one), not a whole number, or outside 1–90. upload-artifact
/// v6.0.0's action.yml: "Minimum 1 day. Maximum 90 days unless changed from
/// the repository settings page"; its README: "between 1 and 90 inclusive".
fn retention_problem(at: &str, step: &Yaml) -> Option<String> {
    let name = step["with"]["name"].as_str().unwrap_or("?");
    let Some(raw) = with_text(&step["with"]["retention-days"]) else {
        return Some(format!(
            "{at}: the upload of `{name}` sets no `retention-days` (the repository's default applies)"
        ));
    };
    let days = if at == "action.yml" {
        action_default(&raw)
    } else {
        raw.clone()
    };
    match days.trim().parse::<u32>() {
        Ok(d) if (1..=90).contains(&d) => None,
        _ => Some(format!(
            "{at}: the upload of `{name}` keeps it `{raw}` days; upload-artifact takes 1 to 90"
        )),
    }
}

/// What is wrong with one upload-artifact step's `path`: a hidden file or
/// folder (a component starting with `.`), which upload-artifact v6 leaves
/// out unless `include-hidden-files: true` (its action.yml: default
/// `false`; src/shared/search.ts: `excludeHiddenFiles: !includeHiddenFiles`).
/// gate sets that nowhere, so nothing it uploads may live there.
fn hidden_upload_problem(at: &str, step: &Yaml) -> Option<String> {
    let raw = step["with"]["path"].as_str()?;
    let paths = if at == "action.yml" {
        action_default(raw)
    } else {
        raw.to_string()
    };
    if step["with"]["include-hidden-files"].as_bool() == Some(true) {
        return Some(format!("{at}: an upload sets `include-hidden-files: true`"));
    }
    paths
        .lines()
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .find(|p| {
            p.trim_start_matches('!')
                .split('/')
                .any(|c| c.starts_with('.') && c != "." && c != "..")
        })
        .map(|p| format!("{at}: uploads `{p}`, a hidden path upload-artifact leaves out"))
}

#[test]
fn every_upload_is_kept_within_githubs_retention_bounds_and_uploads_no_hidden_file() {
    let mut problems = Vec::new();
    let mut uploads = 0;
    for (at, step, _) in every_step() {
        if action_of(&step) != Some("actions/upload-artifact") {
            continue;
        }
        uploads += 1;
        problems.extend(retention_problem(&at, &step));
        problems.extend(hidden_upload_problem(&at, &step));
    }
    assert!(uploads >= 10, "only {uploads} uploads found: the scan is broken");
    assert!(problems.is_empty(), "{}", problems.join("\n"));

    // A caller of the action that sets `retention-days` stays within them too.
    for w in workflows() {
        for (name, job) in jobs(&w) {
            for s in steps(job) {
                if !uses_gate_action(s) {
                    continue;
                }
                if let Some(d) = with_text(&s["with"]["retention-days"]) {
                    assert!(
                        d.parse::<u32>().is_ok_and(|d| (1..=90).contains(&d)),
                        "{}: job `{name}` passes the action `retention-days: {d}`",
                        w.file
                    );
                }
            }
        }
    }

    // The lint catches each shape.
    let step = |with: &str| {
        YamlLoader::load_from_str(&format!("uses: actions/upload-artifact@v6\nwith: {with}\n"))
            .unwrap()
            .remove(0)
    };
    assert!(retention_problem("w.yml", &step("{name: a, path: out/}")).is_some());
    assert!(retention_problem("w.yml", &step("{name: a, path: out/, retention-days: 0}")).is_some());
    assert!(retention_problem("w.yml", &step("{name: a, path: out/, retention-days: 91}")).is_some());
    assert!(retention_problem("w.yml", &step("{name: a, path: out/, retention-days: 90}")).is_none());
    assert!(retention_problem(
        "action.yml",
        &step("{name: a, path: out/, retention-days: '${{ inputs.retention-days }}'}")
    )
    .is_none());
    assert!(hidden_upload_problem("w.yml", &step("{name: a, path: out/}")).is_none());
    assert!(hidden_upload_problem("w.yml", &step("{name: a, path: .gate/out/}")).is_some());
    assert!(hidden_upload_problem("w.yml", &step("{name: a, path: \"out/\\nx/.report.json\\n\"}")).is_some());
    assert!(hidden_upload_problem("w.yml", &step("{name: a, path: ./out/}")).is_none());
    assert!(hidden_upload_problem("w.yml", &step("{name: a, path: out/, include-hidden-files: true}")).is_some());
}

/// Whether a `permissions:` value lets the job's token read Actions data
/// (artifacts of another run): `actions: read` or `write`, `read-all` or
/// `write-all`. Unset scopes are `none` once any scope is set.
fn reads_actions(p: &Yaml) -> bool {
    match p {
        Yaml::String(s) => s == "read-all" || s == "write-all",
        _ => granted(p)
            .iter()
            .any(|(s, l)| s == "actions" && (l == "read" || l == "write")),
    }
}

/// What is wrong with one download-artifact step that reads another run
/// (`run-id`): download-artifact v7.0.0's action.yml says `github-token` "is
/// required when downloading artifacts from a different repository or from
/// a different workflow run" (src/download-artifact.ts looks only in the
/// current run without it: `options.findBy` is set only `if (inputs.token)`),
/// and its README asks for a token "with actions:read permissions"; the
/// job's `permissions` must grant it (unset scopes are `none`).
fn cross_run_problem(at: &str, step: &Yaml, perms: Option<&Yaml>) -> Option<String> {
    step["with"]["run-id"].as_str()?;
    if step["with"]["github-token"].as_str().is_none_or(str::is_empty) {
        return Some(format!(
            "{at}: a download with `run-id` has no `github-token`: it reads this run instead"
        ));
    }
    match perms {
        Some(p) if !reads_actions(p) => Some(format!(
            "{at}: a download from another run, but the job does not grant `actions: read`"
        )),
        _ => None,
    }
}

#[test]
fn every_download_from_another_run_carries_a_token_that_reads_actions() {
    let mut problems = Vec::new();
    let mut cross = 0;
    for (at, step, perms) in every_step() {
        if action_of(&step) != Some("actions/download-artifact") {
            continue;
        }
        if !step["with"]["run-id"].is_badvalue() {
            cross += 1;
        }
        problems.extend(cross_run_problem(&at, &step, perms.as_ref()));
    }
    // gate-comment.yml's own and the action's `comment` step.
    assert!(cross >= 2, "only {cross} cross-run downloads found: the scan is broken");

    // The action downloads with the caller's token: every job that runs it
    // with `command: comment` (gate init's template included) grants
    // `actions: read`.
    let mut docs: Vec<(String, Yaml)> = workflows()
        .into_iter()
        .map(|w| (format!(".github/workflows/{}", w.file), w.doc))
        .collect();
    docs.push((
        "crates/gate-cli/src/templates/gate-comment.yml".into(),
        template("gate-comment.yml"),
    ));
    let mut comment_jobs = 0;
    for (file, doc) in &docs {
        for (name, job) in doc["jobs"].as_hash().into_iter().flatten() {
            let runs_comment = steps(job)
                .iter()
                .any(|s| uses_gate_action(s) && s["with"]["command"].as_str() == Some("comment"));
            if !runs_comment {
                continue;
            }
            comment_jobs += 1;
            let p = if job["permissions"].is_badvalue() {
                &doc["permissions"]
            } else {
                &job["permissions"]
            };
            if !reads_actions(p) {
                problems.push(format!(
                    "{file}: job `{}` runs the action's comment (a download from another run) without `actions: read`",
                    name.as_str().unwrap_or("?")
                ));
            }
        }
    }
    assert!(comment_jobs >= 1, "gate init's comment job is found");
    assert!(problems.is_empty(), "{}", problems.join("\n"));

    // The lint catches a missing token and a missing permission.
    let step = |with: &str| {
        YamlLoader::load_from_str(&format!("uses: actions/download-artifact@v7\nwith: {with}\n"))
            .unwrap()
            .remove(0)
    };
    let read = YamlLoader::load_from_str("{contents: read, actions: read}")
        .unwrap()
        .remove(0);
    let none = YamlLoader::load_from_str("{contents: read, pull-requests: write}")
        .unwrap()
        .remove(0);
    let run = "{run-id: '${{ github.event.workflow_run.id }}', pattern: gate-*";
    assert!(cross_run_problem("w.yml", &step(&format!("{run}}}")), Some(&read)).is_some());
    assert!(cross_run_problem("w.yml", &step(&format!("{run}, github-token: t}}")), Some(&none)).is_some());
    assert!(cross_run_problem("w.yml", &step(&format!("{run}, github-token: t}}")), Some(&read)).is_none());
    assert!(cross_run_problem("w.yml", &step("{name: dist}"), Some(&none)).is_none());
}

/// What is wrong in one job: a file of a downloaded artifact run as a
/// command (`PATH/...` first on a line or after `&&`, `||`, `;`, `|`)
/// with no `chmod` of it on an earlier line. upload-artifact and
/// download-artifact keep no modes: every file comes back `644` (both
/// READMEs at the pinned commits, "Permission Loss").
fn mode_problems(at: &str, job: &Yaml) -> Vec<String> {
    let st = steps(job);
    let mut problems = Vec::new();
    for (i, s) in st.iter().enumerate() {
        if action_of(s) != Some("actions/download-artifact") {
            continue;
        }
        let Some(path) = s["with"]["path"].as_str().filter(|p| !p.contains("${{")) else {
            continue;
        };
        let dir = format!("{}/", path.trim_end_matches('/'));
        let mut before: Vec<&str> = Vec::new();
        for later in &st[i + 1..] {
            for line in later["run"].as_str().unwrap_or("").lines() {
                let runs = line
                    .split(['&', '|', ';'])
                    .filter_map(|part| {
                        part.split_whitespace()
                            .find(|w| !w.contains('='))
                            .map(|w| w.trim_start_matches("./").trim_matches('"'))
                    })
                    .any(|cmd| cmd.starts_with(&dir));
                let made_executable = before
                    .iter()
                    .any(|l| (l.contains("chmod") || l.contains("install -m")) && l.contains(&dir));
                if runs && !made_executable {
                    problems.push(format!(
                        "{at}: runs `{}` from the artifact downloaded to `{path}` with no `chmod +x` first (artifacts come back 644)",
                        line.trim()
                    ));
                }
                before.push(line);
            }
        }
    }
    problems
}

#[test]
fn a_downloaded_file_is_made_executable_before_it_runs() {
    let mut problems = Vec::new();
    for w in workflows() {
        for (name, job) in jobs(&w) {
            problems.extend(mode_problems(&format!("{}: job `{name}`", w.file), job));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));

    // The lint catches a binary run straight from the download, and passes
    // one made executable first, or only handed on as an argument.
    let job = |script: &str| {
        YamlLoader::load_from_str(&format!(
            "steps:\n  - uses: actions/download-artifact@v7\n    with: {{name: gate-bin, path: bin}}\n  - run: |\n{}",
            script.lines().map(|l| format!("      {l}\n")).collect::<String>()
        ))
        .unwrap()
        .remove(0)
    };
    assert_eq!(mode_problems("w", &job("bin/gate check")).len(), 1);
    assert_eq!(mode_problems("w", &job("X=1 ./bin/gate check")).len(), 1);
    assert_eq!(mode_problems("w", &job("echo ok && bin/gate check")).len(), 1);
    assert!(mode_problems("w", &job("chmod +x bin/gate\nbin/gate check")).is_empty());
    assert!(mode_problems("w", &job("scripts/package.sh v1 bin/gate dist")).is_empty());
    // gate-main.yml's gpu-publish runs the CPU job's gate: without its chmod the lint fires.
    let main = workflows().into_iter().find(|w| w.file == "gate-main.yml").unwrap();
    assert!(
        main.text.contains("chmod +x bin/gate\n"),
        "gpu-publish makes bin/gate executable"
    );
    let doc = YamlLoader::load_from_str(&main.text.replace("chmod +x bin/gate\n", ""))
        .unwrap()
        .remove(0);
    assert_eq!(mode_problems("gate-main.yml", &doc["jobs"]["gpu-publish"]).len(), 1);
}

/// The action's cache key for a gate built from its source covers every
/// file that build compiles: the workspace's crates too, not only the root
/// package's (a change under crates/ must not bring back an older build).
#[test]
fn the_source_build_cache_key_covers_the_workspace_crates() {
    let root = std::path::Path::new(env!("GATE_REPO_ROOT"));
    let t = tempfile::tempdir().unwrap();
    let action = t.path().join("action");
    std::fs::create_dir_all(&action).unwrap();
    for f in ["Cargo.toml", "Cargo.lock"] {
        std::fs::copy(root.join(f), action.join(f)).unwrap();
    }
    std::fs::create_dir_all(action.join("src")).unwrap();
    std::fs::write(action.join("src/main.rs"), "fn main() {}\n").unwrap();
    std::fs::create_dir_all(action.join("crates/gate-spec/src")).unwrap();
    let key = |lib: &str| {
        std::fs::write(action.join("crates/gate-spec/src/lib.rs"), lib).unwrap();
        let output = t.path().join("output");
        let _ = std::fs::remove_file(&output);
        let run = std::process::Command::new("bash")
            .arg(root.join("scripts/action/find-release.sh"))
            .env("ACTION_PATH", &action)
            .env("RUNNER_TEMP", t.path())
            .env("GITHUB_OUTPUT", &output)
            .env("COMMAND", "check")
            .env("BACKEND", "cpu")
            .env("VERSION", "source")
            .env("RUNNER_OS_NAME", "Linux")
            .env("RUNNER_ARCH_NAME", "X64")
            .output()
            .unwrap();
        assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
        let outputs = std::fs::read_to_string(&output).unwrap();
        outputs
            .lines()
            .find_map(|l| l.strip_prefix("cache-key=").map(str::to_string))
            .unwrap()
    };
    let before = key("pub fn a() {}\n");
    assert_eq!(before, key("pub fn a() {}\n"), "the key is stable");
    assert_ne!(before, key("pub fn b() {}\n"), "a change under crates/ changes the key");
}

/// The action's build from source copies gate's checkout without any folder
/// named `target` (scripts/action/install.sh, an unanchored `tar
/// --exclude`), which holds only while gate tracks no path of that name.
#[test]
fn no_tracked_path_is_named_target() {
    let o = std::process::Command::new("git")
        .args(["ls-files", "-z"])
        .current_dir(env!("GATE_REPO_ROOT"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", common::text(&o.stderr));
    let named_target: Vec<String> = common::text(&o.stdout)
        .split('\0')
        .filter(|p| p.split('/').any(|c| c == "target"))
        .map(str::to_string)
        .collect();
    assert!(
        named_target.is_empty(),
        "install.sh's source copy would leave these out: {named_target:?}\nhint: rename them, or anchor the copy's `--exclude=target`"
    );
}

/// CI's cache keeps every crate the adopter fixtures build. rust-cache
/// keeps in `target/` only the packages that the root workspace's `cargo
/// metadata --all-features` lists, matched by name (ci.yml; its model,
/// scripts/rust-cache-save.py), so a fixture's dependency that no crate of
/// the workspace lists is compiled again by every warm `.ci/run`, as
/// candle-transformers was (168 s and 96 s of one warm run, for its two
/// fixtures) until tests/Cargo.toml listed it under a feature never
/// turned on.
#[test]
fn the_ci_cache_keeps_every_crate_the_adopter_fixtures_build() {
    let test = "workflows::the_ci_cache_keeps_every_crate_the_adopter_fixtures_build";
    let root = Path::new(env!("GATE_REPO_ROOT"));
    let mut fixtures = vec![root.join("examples/adopter")];
    for e in std::fs::read_dir(root.join("tests/adopters")).unwrap() {
        let dir = e.unwrap().path();
        if dir.join("Cargo.toml").is_file() {
            fixtures.push(dir);
        }
    }
    fixtures.sort();
    assert!(fixtures.len() >= 6, "{fixtures:?}");
    // Every crate of each lock file in cargo's cache (`cargo fetch`), so
    // that `cargo metadata` below reads their manifests offline.
    for dir in std::iter::once(&root.to_path_buf()).chain(&fixtures) {
        if !common::available(test, common::crates_unavailable(&dir.join("Cargo.toml"))) {
            return;
        }
    }
    let host = {
        let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
        let o = std::process::Command::new(rustc).arg("-vV").output().unwrap();
        let text = common::text(&o.stdout);
        text.lines()
            .find_map(|l| l.strip_prefix("host: "))
            .expect("rustc -vV names the host")
            .to_string()
    };
    // The registry's packages `cargo metadata` lists in `dir` (the local
    // ones, gate's and the fixture's own, are kept or rebuilt by other rules).
    let registry_packages = |dir: &Path, args: &[&str]| -> std::collections::BTreeSet<String> {
        let o = common::cargo()
            .args(["metadata", "--format-version", "1", "--locked", "--offline"])
            .args(args)
            .current_dir(dir)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}: {}", dir.display(), common::text(&o.stderr));
        let meta: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        meta["packages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| !p["source"].is_null())
            .map(|p| p["name"].as_str().unwrap().to_string())
            .collect()
    };
    let kept = registry_packages(root, &["--all-features"]);
    let mut missing = Vec::new();
    for dir in &fixtures {
        // What the fixture's build compiles on this machine: its default
        // features, as `.ci/run`'s prebuild and the adopter tests build it.
        for name in registry_packages(dir, &["--filter-platform", &host]) {
            if !kept.contains(&name) {
                missing.push(format!(
                    "{name} (built by {})",
                    dir.strip_prefix(root).unwrap().display()
                ));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "not in the root workspace's `cargo metadata --all-features`, so CI's cache drops them and \
         every warm run compiles them again:\n{}\nhint: list them as tests/Cargo.toml lists candle-transformers",
        missing.join("\n")
    );
}

/// A PATH of every tool in /usr/bin and /bin but `sha256sum` (a macOS
/// image has only Perl's `shasum`), plus `extra` first.
fn path_without_sha256sum(root: &Path, extra: &[&Path]) -> String {
    let dir = root.join("nosum");
    std::fs::create_dir_all(&dir).unwrap();
    for sys in ["/usr/bin", "/bin", "/usr/local/bin"] {
        let Ok(entries) = std::fs::read_dir(sys) else { continue };
        for e in entries.flatten() {
            let name = e.file_name();
            if name == "sha256sum" || dir.join(&name).exists() {
                continue;
            }
            let _ = std::os::unix::fs::symlink(e.path(), dir.join(&name));
        }
    }
    let mut parts: Vec<String> = extra.iter().map(|p| p.display().to_string()).collect();
    parts.push(dir.display().to_string());
    parts.join(":")
}

/// `command: publish` publishes a report another job measured, from an
/// artifact any job of the run can replace: the action's first step
/// refuses it without the measuring job's digest (#51), rather than
/// publishing unchecked as an empty `report-sha256` once did.
#[test]
fn the_action_refuses_publish_without_the_measuring_jobs_digest() {
    let script = action_step("Check the inputs");
    let base = [
        ("COMMAND", "publish"),
        ("BACKEND", "cpu"),
        ("COMMENT", "never"),
        ("STRICT", "false"),
        ("ID", "cpu"),
        ("BUDGETS", "budgets.yaml"),
        ("ARGS", ""),
        ("BASELINE_BRANCH", ""),
        ("PUBLISH", "auto"),
        ("JOB_ID", "publish"),
        ("MATRIX", "null"),
    ];
    let run = |sha: &str| {
        let mut envs = base.to_vec();
        envs.push(("REPORT_SHA256", sha));
        run_action_script(&script, &envs)
    };
    for bad in ["", "abc", &"G".repeat(64)] {
        let (code, _, stdout) = run(bad);
        assert_eq!(code, Some(2), "report-sha256 `{bad}`: {stdout}");
        assert!(stdout.contains("command: publish needs report-sha256"), "{stdout}");
    }
    let (code, outputs, stdout) = run(&"a".repeat(64));
    assert_eq!(code, Some(0), "{stdout}");
    assert!(outputs.contains("id=cpu\n"), "{outputs}");
}

/// The action's first step: Linux runners only, refused first with the fix
/// (gate releases and tests Linux builds only); its default id hashes the
/// job, the runner's OS/arch, the matrix and GATE_ID_CONTEXT (the reusable
/// workflow's runs-on), so two jobs of one run never share an artifact that
/// `overwrite: true` would let one replace; and it gives the same id where
/// only `shasum` is installed.
#[test]
fn the_action_refuses_non_linux_runners_and_its_default_id_tells_jobs_apart() {
    if !Path::new("/usr/bin/shasum").exists() && !Path::new("/bin/shasum").exists() {
        common::available("the_action_refuses_non_linux_runners", Some("no shasum here".into()));
        return;
    }
    let script = action_step("Check the inputs");
    let t = tempfile::tempdir().unwrap();
    let nosum = path_without_sha256sum(t.path(), &[]);
    let base = [
        ("COMMAND", "check"),
        ("BACKEND", "cpu"),
        ("COMMENT", "always"),
        ("STRICT", "false"),
        ("ID", ""),
        ("BUDGETS", "budgets.yaml"),
        ("ARGS", ""),
        ("BASELINE_BRANCH", ""),
        ("PUBLISH", "auto"),
        ("JOB_ID", "gate"),
        ("MATRIX", "null"),
    ];
    let id = |over: &[(&str, &str)]| {
        let mut envs: Vec<(&str, &str)> = base.to_vec();
        envs.extend_from_slice(over);
        let (code, outputs, stdout) = run_action_script(&script, &envs);
        assert_eq!(code, Some(0), "{stdout}");
        outputs
            .lines()
            .find_map(|l| l.strip_prefix("id=").map(str::to_string))
            .unwrap()
    };
    let plain = id(&[]);
    assert!(plain.starts_with("cpu-") && plain.len() == 12, "{plain}");
    assert_eq!(plain, id(&[]), "stable across runs (a PR's pushes)");
    assert_eq!(plain, id(&[("PATH", nosum.as_str())]), "the same with shasum alone");
    for over in [
        [("JOB_ID", "gpu")],
        [("RUNNER_ARCH", "ARM64")],
        [("MATRIX", "{\"os\": \"ubuntu-24.04\"}")],
        [("GATE_ID_CONTEXT", "[\"self-hosted\", \"gpu\"]")],
        [("BUDGETS", "other.yaml")],
    ] {
        assert_ne!(plain, id(&over), "{over:?}");
    }
    assert_eq!(id(&[("ID", "mine")]), "mine");
    for os in ["macOS", "Windows"] {
        let mut envs: Vec<(&str, &str)> = base.to_vec();
        envs.push(("RUNNER_OS", os));
        let (code, outputs, stdout) = run_action_script(&script, &envs);
        assert_eq!(code, Some(2), "{os}: {stdout}");
        assert!(outputs.is_empty(), "{outputs}");
        assert!(
            stdout.contains(&format!(
                "::error title=gate action::this runner is {os}/X64: the gate action runs on Linux runners only"
            )),
            "{stdout}"
        );
        assert!(stdout.contains("hint: use runs-on: ubuntu-latest"), "{stdout}");
    }
}

/// Runs find-release.sh with `curl` answering from `releases` (a folder of
/// release assets), ACTION_PATH `action` (no git checkout) and `envs`.
fn find_release(root: &Path, action: &Path, path: &str, envs: &[(&str, &str)]) -> (bool, String, String) {
    let output = root.join("find-output");
    let _ = std::fs::remove_file(&output);
    let mut cmd = std::process::Command::new("bash");
    cmd.arg(Path::new(env!("GATE_REPO_ROOT")).join("scripts/action/find-release.sh"))
        .env("PATH", path)
        .env("ACTION_PATH", action)
        .env("RUNNER_TEMP", root)
        .env("GITHUB_OUTPUT", &output)
        .env("COMMAND", "check")
        .env("BACKEND", "cpu")
        .env("VERSION", "")
        .env("REPO", "acme/gate")
        .env("RUNNER_OS_NAME", "Linux")
        .env("RUNNER_ARCH_NAME", "X64")
        .env_remove("RUNNER_ENVIRONMENT")
        .env_remove("ACTION_REF");
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let o = cmd.output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let outputs = std::fs::read_to_string(&output).unwrap();
    (
        outputs.contains("found=true\n"),
        outputs,
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// The comment step posts at most GATE_MAX_COMMENTS (20) comments a run
/// (#51): the artifacts come from a run whose workflow a fork can edit,
/// and each one would be a comment posted with the repository's token.
#[test]
fn the_comment_step_posts_at_most_twenty_comments_a_run() {
    let t = tempfile::tempdir().unwrap();
    let bin = t.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let log = t.path().join("gate.log");
    executable(
        &bin.join("gate"),
        &format!("#!/bin/sh\necho \"$*\" >> '{}'\n", log.display()),
    );
    let artifacts = t.path().join("artifacts");
    for i in 0..25 {
        let dir = artifacts.join(format!("gate-id{i:02}"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("artifact-name"), format!("gate-id{i:02}\n")).unwrap();
        std::fs::write(dir.join("comment-mode"), "always\n").unwrap();
    }
    let run = |extra: &[(&str, &str)]| {
        let _ = std::fs::remove_file(&log);
        let mut cmd = std::process::Command::new("bash");
        cmd.arg(Path::new(env!("GATE_REPO_ROOT")).join("scripts/action/comment.sh"))
            .env(
                "PATH",
                format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default()),
            )
            .env("ARTIFACTS", &artifacts)
            .env("EVENT", "pull_request")
            .env_remove("GATE_MAX_COMMENTS")
            .env_remove("CHECK_RUN");
        for (k, v) in extra {
            cmd.env(k, v);
        }
        let o = cmd.output().unwrap();
        let calls = std::fs::read_to_string(&log).unwrap_or_default().lines().count();
        (o.status.code(), calls, String::from_utf8_lossy(&o.stdout).into_owned())
    };
    let (code, calls, stdout) = run(&[]);
    assert_eq!((code, calls), (Some(2), 20), "{stdout}");
    assert!(
        stdout.contains("uploaded more than 20 gate artifacts: only the first 20 are commented"),
        "{stdout}"
    );
    let (code, calls, stdout) = run(&[("GATE_MAX_COMMENTS", "30")]);
    assert_eq!((code, calls), (Some(0), 25), "{stdout}");
}

/// find-release.sh without `curl` on the runner (#51): it says that curl is
/// missing and builds from source, not that the release has no asset.
#[test]
fn a_runner_without_curl_is_told_so_not_that_there_is_no_release() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("nocurl");
    std::fs::create_dir_all(&dir).unwrap();
    for sys in ["/usr/bin", "/bin", "/usr/local/bin"] {
        let Ok(entries) = std::fs::read_dir(sys) else { continue };
        for e in entries.flatten() {
            let name = e.file_name();
            if name == "curl" || dir.join(&name).exists() {
                continue;
            }
            let _ = std::os::unix::fs::symlink(e.path(), dir.join(&name));
        }
    }
    let action = t.path().join("action");
    std::fs::create_dir_all(&action).unwrap();
    std::fs::write(action.join("Cargo.toml"), "[package]\nversion = \"1.2.3\"\n").unwrap();
    let (found, outputs, _) = find_release(t.path(), &action, dir.to_str().unwrap(), &[]);
    assert!(!found, "{outputs}");
    let o = std::process::Command::new("bash")
        .arg(Path::new(env!("GATE_REPO_ROOT")).join("scripts/action/find-release.sh"))
        .env("PATH", &dir)
        .env("ACTION_PATH", &action)
        .env("RUNNER_TEMP", t.path())
        .env("GITHUB_OUTPUT", t.path().join("out2"))
        .env("COMMAND", "check")
        .env("BACKEND", "cpu")
        .env("VERSION", "")
        .env("REPO", "acme/gate")
        .env("RUNNER_OS_NAME", "Linux")
        .env("RUNNER_ARCH_NAME", "X64")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        stdout.contains("::warning title=gate action::curl is not installed on this runner, so the release v1.2.3 was not looked for"),
        "{stdout}"
    );
    assert!(stdout.contains("\nhint: install curl"), "{stdout}");
    assert!(!String::from_utf8_lossy(&o.stderr).contains("no release asset"));
}

/// find-release.sh: a `uses: OWNER/gate@<full SHA>` pin (downloaded without
/// .git) uses the release binary only when the release is that commit, and
/// builds its own source otherwise; a tag ref keeps the release. Only a
/// GitHub-hosted runner gets a build cache (a self-hosted one may have run a
/// fork's code and saved a tampered build under the key's prefix). It all
/// works where only `shasum` is installed.
#[test]
fn a_commit_pin_runs_only_its_own_commits_release_and_self_hosted_runners_get_no_build_cache() {
    if !Path::new("/usr/bin/shasum").exists() && !Path::new("/bin/shasum").exists() {
        common::available(
            "a_commit_pin_runs_only_its_own_commits_release",
            Some("no shasum here".into()),
        );
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let root = t.path();
    let action = root.join("action");
    std::fs::create_dir_all(&action).unwrap();
    std::fs::write(
        action.join("Cargo.toml"),
        "[package]\nname = \"gate-sdk\"\nversion = \"9.8.7\"\n",
    )
    .unwrap();
    // The release v9.8.7 (built from commit abcdef012345...): archive + SHA256SUMS.
    let rel = root.join("releases");
    let pack = rel.join("gate-v9.8.7-x86_64-unknown-linux-gnu");
    std::fs::create_dir_all(&pack).unwrap();
    executable(&pack.join("gate"), "#!/bin/sh\necho gate 9.8.7\n");
    std::fs::write(pack.join("VERSION"), "gate 9.8.7\ncommit: abcdef012345\n").unwrap();
    let asset = "gate-v9.8.7-x86_64-unknown-linux-gnu.tar.gz";
    let ok = std::process::Command::new("tar")
        .current_dir(&rel)
        .args(["-czf", asset, "gate-v9.8.7-x86_64-unknown-linux-gnu"])
        .status()
        .unwrap();
    assert!(ok.success());
    let sum = std::process::Command::new("sha256sum")
        .current_dir(&rel)
        .arg(asset)
        .output()
        .unwrap();
    std::fs::write(rel.join("SHA256SUMS"), &sum.stdout).unwrap();
    // curl -fsSL --retry 3 -o FILE URL: the URL's last part from `releases`.
    let bin = root.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    executable(
        &bin.join("curl"),
        &format!(
            "#!/bin/sh\nwhile [ $# -gt 1 ]; do case \"$1\" in -o) out=$2; shift 2;; *) shift;; esac; done\ncp \"{}/${{1##*/}}\" \"$out\"\n",
            rel.display()
        ),
    );
    let path = path_without_sha256sum(root, &[&bin]);
    fn pin(r: &str) -> [(&str, &str); 1] {
        [("ACTION_REF", r)]
    }
    let (found, outputs, err) = find_release(root, &action, &path, &[]);
    assert!(found, "{err}");
    assert!(outputs.contains("build-cache=false\n"), "{outputs}");
    // The downloaded archive is kept for install.sh under the job's
    // RUNNER_TEMP (emptied after the job), never in /tmp, which a
    // self-hosted runner keeps.
    let archive = outputs.lines().find_map(|l| l.strip_prefix("archive=")).unwrap();
    assert!(Path::new(archive).starts_with(root.join("gate-action")), "{outputs}");
    let downloads = || std::fs::read_dir(root.join("gate-action")).unwrap().count();
    assert!(!outputs.contains("bundle="), "a release without a bundle: {outputs}");
    // A release that ships its Sigstore bundle: handed to install.sh.
    std::fs::write(rel.join("gate-v9.8.7.sigstore.json"), "{}\n").unwrap();
    let (_, outputs, _) = find_release(root, &action, &path, &[]);
    assert!(
        outputs
            .lines()
            .any(|l| l.starts_with("bundle=") && l.ends_with("/gate-v9.8.7.sigstore.json")),
        "{outputs}"
    );
    let (found, _, err) = find_release(root, &action, &path, &pin("abcdef0123456789abcdef0123456789abcdef01"));
    assert!(found, "the release's own commit: {err}");
    let (found, _, err) = find_release(root, &action, &path, &pin("v9.8.7"));
    assert!(found, "a tag keeps the release: {err}");
    let before = downloads();
    let (found, _, err) = find_release(root, &action, &path, &pin("1234567890123456789012345678901234567890"));
    assert!(!found, "a commit between releases builds its own source: {err}");
    assert_eq!(downloads(), before, "a release not used is not left behind");
    assert!(
        err.contains("release v9.8.7 is commit abcdef012345, this action is 123456789012: building from source"),
        "{err}"
    );
    // gate called from another composite action (#51): github.action_ref is
    // the outer action's, and GitHub does not promise it inside a composite
    // action (github/docs#25336); the runner's download folder
    // _actions/OWNER/REPO/REF is gate's own ref and decides.
    let between = "1234567890123456789012345678901234567890";
    for (own_ref, outer_ref, expect) in [(between, "v1.0.0", false), ("v9.8.7", between, true)] {
        let downloaded = root.join("_actions/acme/gate").join(own_ref);
        std::fs::create_dir_all(&downloaded).unwrap();
        std::fs::copy(action.join("Cargo.toml"), downloaded.join("Cargo.toml")).unwrap();
        let (found, _, err) = find_release(root, &downloaded, &path, &pin(outer_ref));
        assert_eq!(found, expect, "gate@{own_ref} inside an action @{outer_ref}: {err}");
    }
    let (_, outputs, _) = find_release(root, &action, &path, &[("RUNNER_ENVIRONMENT", "github-hosted")]);
    assert!(outputs.contains("build-cache=true\n"), "{outputs}");
    let (_, outputs, err) = find_release(root, &action, &path, &[("RUNNER_ENVIRONMENT", "self-hosted")]);
    assert!(outputs.contains("build-cache=false\n"), "{outputs}");
    assert!(err.contains("no build cache"), "{err}");
    // A tampered archive is refused, shasum checking it.
    std::fs::write(rel.join(asset), b"not the archive").unwrap();
    let o = std::process::Command::new("bash")
        .arg(Path::new(env!("GATE_REPO_ROOT")).join("scripts/action/find-release.sh"))
        .env("PATH", &path)
        .env("ACTION_PATH", &action)
        .env("RUNNER_TEMP", root)
        .env("GITHUB_OUTPUT", root.join("o2"))
        .env("COMMAND", "check")
        .env("BACKEND", "cpu")
        .env("VERSION", "")
        .env("REPO", "acme/gate")
        .env("RUNNER_OS_NAME", "Linux")
        .env("RUNNER_ARCH_NAME", "X64")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stdout).contains("does not match its SHA256SUMS entry"));
}

/// The action's steps that restore a build cache (gate's, the harness's)
/// run only where find-release.sh said `build-cache=true` (GitHub-hosted).
#[test]
fn the_action_restores_no_build_cache_on_a_self_hosted_runner() {
    let text = std::fs::read_to_string(Path::new(env!("GATE_REPO_ROOT")).join("action.yml")).unwrap();
    let doc = YamlLoader::load_from_str(&text).unwrap().remove(0);
    let steps = key(key(&doc, "runs"), "steps").as_vec().unwrap();
    let mut n = 0;
    for s in steps {
        let uses = key(s, "uses").as_str().unwrap_or("");
        if !uses.starts_with("actions/cache@") {
            continue; // actions/cache/restore: the GPU kernels, restore-only here
        }
        n += 1;
        let cond = key(s, "if").as_str().unwrap_or("");
        assert!(
            cond.contains("steps.release.outputs.build-cache == 'true'"),
            "action.yml: `{}` restores (and saves) a build cache on any runner: {cond}",
            key(s, "name").as_str().unwrap_or("?")
        );
    }
    assert_eq!(n, 2, "gate's build and the harness's");
}

/// The compiled GPU kernels (code the GPU runs) go through the Actions
/// cache only on a GitHub-hosted runner (#51): the step that keys them runs
/// only there, and the restore and the save run only when it gave a key.
#[test]
fn the_action_keeps_no_gpu_kernel_cache_on_a_self_hosted_runner() {
    let text = std::fs::read_to_string(Path::new(env!("GATE_REPO_ROOT")).join("action.yml")).unwrap();
    let doc = YamlLoader::load_from_str(&text).unwrap().remove(0);
    let steps = key(key(&doc, "runs"), "steps").as_vec().unwrap();
    let jit = steps
        .iter()
        .find(|s| s["id"].as_str() == Some("jit"))
        .expect("the kernels' step");
    assert!(
        jit["if"]
            .as_str()
            .unwrap_or("")
            .contains("runner.environment == 'github-hosted'"),
        "{:?}",
        jit["if"]
    );
    let mut n = 0;
    for s in steps {
        let uses = s["uses"].as_str().unwrap_or("");
        if uses.starts_with("actions/cache/restore@") || uses.starts_with("actions/cache/save@") {
            n += 1;
            assert!(
                s["if"].as_str().unwrap_or("").contains("steps.jit.outputs.key != ''"),
                "{}: {:?}",
                s["name"].as_str().unwrap_or("?"),
                s["if"]
            );
        }
    }
    assert_eq!(n, 2, "the restore and the save of the kernels");
}

/// gate-reusable.yml's `publish` holds the caller's write token and
/// downloads `gate-<id>` by name, which any job of the caller's run (a
/// self-hosted one included) can replace: the `gate` job hands on the
/// report's SHA-256 as its output (set by that job only), `publish` runs
/// only with it, and the action's publish step refuses a report that does
/// not match it, before gate runs. Also: "Which gate" needs no jq.
#[test]
fn the_reusable_workflow_publishes_only_the_report_its_measuring_job_wrote() {
    let w = workflows().into_iter().find(|w| w.file == "gate-reusable.yml").unwrap();
    let gate = &w.doc["jobs"]["gate"];
    assert_eq!(
        gate["outputs"]["report-sha256"].as_str(),
        Some("${{ steps.gate.outputs.report-sha256 }}")
    );
    let publish = &w.doc["jobs"]["publish"];
    assert!(publish["if"]
        .as_str()
        .unwrap()
        .contains("needs.gate.outputs.report-sha256 != ''"));
    let action = steps(publish)
        .into_iter()
        .find(|s| s["uses"].as_str() == Some("./.gate-action"))
        .unwrap();
    assert_eq!(
        action["with"]["report-sha256"].as_str(),
        Some("${{ needs.gate.outputs.report-sha256 }}")
    );
    for (name, job) in jobs(&w) {
        for s in steps(job) {
            let run = s["run"].as_str().unwrap_or("");
            assert!(!run.contains("jq "), "gate-reusable.yml: job `{name}` needs jq: {run}");
        }
    }

    // The action's publish step, with a stub gate that logs its arguments.
    let script = action_step("gate baseline publish");
    let t = tempfile::tempdir().unwrap();
    let bin = t.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let log = t.path().join("gate.log");
    executable(
        &bin.join("gate"),
        &format!("#!/bin/sh\necho \"$@\" >> '{}'\n", log.display()),
    );
    let out = t.path().join("out");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join("report.json"), "{\"schema\": 1}\n").unwrap();
    let wrong = "6e3a5e1d5e1b0b6c1f5c6d5f9b0f2f0f8c4d2f0e5d3c1b0a9f8e7d6c5b4a3928";
    let digest = {
        let o = std::process::Command::new("sha256sum")
            .arg(out.join("report.json"))
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout)
            .split_whitespace()
            .next()
            .unwrap()
            .to_string()
    };
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let run = |sha: &str| {
        run_action_script(
            &script,
            &[
                ("PATH", path.as_str()),
                ("OUT", out.to_str().unwrap()),
                ("BRANCH", "gate-baselines"),
                ("SHA", "1111111111111111111111111111111111111111"),
                ("REPORT_SHA256", sha),
                ("GITHUB_TOKEN", "t"),
            ],
        )
    };
    let (code, _, stdout) = run(wrong);
    assert_eq!(code, Some(1), "{stdout}");
    assert!(stdout.contains("is not the report the measuring job wrote"), "{stdout}");
    assert!(!log.exists(), "gate ran on a replaced report");
    let (code, _, stdout) = run(&digest);
    assert_eq!(code, Some(0), "{stdout}");
    assert!(std::fs::read_to_string(&log)
        .unwrap()
        .starts_with("baseline publish --from "));
}

/// The manual's own-job example (docs/github.md) (the action in a job of one's own) is the
/// one adopters copy: it grants least privilege in a `permissions:` block
/// and checks out with `persist-credentials: false`, so no later step finds
/// the token in .git/config.
#[test]
fn the_readmes_own_job_example_is_least_privilege_and_keeps_no_credentials() {
    let readme = std::fs::read_to_string(Path::new(env!("GATE_REPO_ROOT")).join("docs/github.md")).unwrap();
    let at = readme.find("**Without the reusable workflow.**").expect("the section");
    let block = readme[at..]
        .split("```yaml\n")
        .nth(1)
        .unwrap()
        .split("```")
        .next()
        .unwrap();
    let doc = YamlLoader::load_from_str(block).unwrap().remove(0);
    let job = &doc["gate"];
    assert_eq!(
        granted(&job["permissions"]),
        [
            ("contents".into(), "read".into()),
            ("pull-requests".into(), "read".into())
        ]
    );
    let checkout = steps(job)
        .into_iter()
        .find(|s| s["uses"].as_str().is_some_and(|u| u.starts_with("actions/checkout@")))
        .unwrap();
    assert_eq!(checkout["with"]["persist-credentials"].as_bool(), Some(false));
}

/// The majors dependabot offers next (#41 item 16; docs/release.md, "The
/// next majors"): each pin, its release, and the inputs its `action.yml`
/// declares there (read at that commit). What moving to them takes is
/// checked here, before the pull request: every `with:` gate sets is still
/// an input, the Node 24 check passes, and no checkout in a `workflow_run`
/// job names the pull request's head, which checkout v7 refuses for a fork
/// (`src/unsafe-pr-checkout-helper.ts` at v7.0.1).
const NEXT_MAJORS: &[(&str, &str, &str, &[&str])] = &[
    (
        "actions/checkout",
        "3d3c42e5aac5ba805825da76410c181273ba90b1",
        "v7.0.1",
        &[
            "allow-unsafe-pr-checkout",
            "clean",
            "fetch-depth",
            "fetch-tags",
            "filter",
            "github-server-url",
            "lfs",
            "path",
            "persist-credentials",
            "ref",
            "repository",
            "set-safe-directory",
            "show-progress",
            "sparse-checkout",
            "sparse-checkout-cone-mode",
            "ssh-key",
            "ssh-known-hosts",
            "ssh-strict",
            "ssh-user",
            "submodules",
            "token",
        ],
    ),
    (
        "actions/upload-artifact",
        "bbbca2ddaa5d8feaa63e36b76fdaad77386f024f",
        "v7.0.0",
        &[
            "archive",
            "compression-level",
            "if-no-files-found",
            "include-hidden-files",
            "name",
            "overwrite",
            "path",
            "retention-days",
        ],
    ),
    (
        "actions/download-artifact",
        "3e5f45b2cfb9172054b4087a40e8e0b5a5461e7c",
        "v8.0.1",
        &[
            "artifact-ids",
            "digest-mismatch",
            "github-token",
            "merge-multiple",
            "name",
            "path",
            "pattern",
            "repository",
            "run-id",
            "skip-decompress",
        ],
    ),
];

#[test]
fn the_next_majors_take_every_input_gate_sets_and_refuse_no_checkout_of_gate_s() {
    // Every `with:` key gate sets on these actions is an input there.
    let mut problems = Vec::new();
    for (at, step, _) in every_step() {
        let Some((_, _, _, inputs)) = NEXT_MAJORS.iter().find(|(a, ..)| action_of(&step) == Some(*a)) else {
            continue;
        };
        for (k, _) in step["with"].as_hash().into_iter().flatten() {
            let k = k.as_str().unwrap_or_default();
            if !inputs.contains(&k) {
                problems.push(format!(
                    "{at}: `{k}` is no input of {}'s next major",
                    action_of(&step).unwrap()
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));

    // Pinned to them, every file passes the Node 24 check.
    let root = PathBuf::from(env!("GATE_REPO_ROOT"));
    let mut files: Vec<PathBuf> = vec![
        root.join("action.yml"),
        root.join("README.md"),
        root.join("docs/github.md"),
    ];
    files.extend(
        workflows()
            .into_iter()
            .map(|w| root.join(".github/workflows").join(w.file)),
    );
    let mut moved = 0;
    for f in &files {
        let mut text = std::fs::read_to_string(f).unwrap();
        for (action, sha, tag, _) in NEXT_MAJORS {
            let lines: Vec<String> = text
                .lines()
                .map(|l| match l.find(&format!("{action}@")) {
                    Some(i) if is_sha(l[i + action.len() + 1..].split_whitespace().next().unwrap_or("")) => {
                        moved += 1;
                        format!("{}{action}@{sha}  # {tag}", &l[..i])
                    }
                    _ => l.to_string(),
                })
                .collect();
            text = lines.join("\n");
        }
        let problems = node20_pins(&f.display().to_string(), &text);
        assert!(problems.is_empty(), "{}", problems.join("\n"));
    }
    assert!(moved > 30, "only {moved} pins moved: the scan is broken");

    // checkout v7 refuses, in a `workflow_run` or `pull_request_target`
    // run of a fork's pull request, a checkout of the head's repository, a
    // `refs/pull/N/...` ref or the head's SHA. gate's such jobs check out
    // the default branch: no `ref:` or `repository:` at all.
    let mut checked = 0;
    for w in workflows() {
        let on = key(&w.doc, "on");
        if on["workflow_run"].is_badvalue() && on["pull_request_target"].is_badvalue() {
            continue;
        }
        for (name, job) in jobs(&w) {
            for s in steps(job) {
                if action_of(s) == Some("actions/checkout") {
                    checked += 1;
                    assert!(
                        s["with"]["ref"].is_badvalue() && s["with"]["repository"].is_badvalue(),
                        "{}: job `{name}` checks out another ref or repository",
                        w.file
                    );
                }
            }
        }
    }
    assert!(checked > 0, "gate-comment.yml's checkout was not seen");
}
