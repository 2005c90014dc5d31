//! A rehearsal of a pull request's life on GitHub, against the fake API
//! (tests/github_fake), with the environment and event payloads GitHub gives
//! each step, and the action's own `run:` scripts (action.yml and
//! scripts/action/) with the built gate on PATH:
//! a fork's PR is measured (read-only) → its output folder is the artifact →
//! the `workflow_run` job comments → the PR is merged and the push to main is
//! measured and stored as the baseline → the next PR (a branch of the
//! repository) is compared with it and commented.
//! What GitHub itself does (running jobs, moving artifacts, evaluating `if:`)
//! is played by the test: each step says which `if:` it stands for. Artifacts
//! land where the pinned actions put them (see [`download_pattern`]).

use crate::github_fake;

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::github_fake::{Fake, REPO, TOKEN};
use serde_json::{json, Value};
use yaml_rust2::YamlLoader;

fn root() -> PathBuf {
    PathBuf::from(env!("GATE_REPO_ROOT"))
}

/// A 40-hex commit id whose short form is distinct for each `n`.
fn sha(n: u32) -> String {
    format!("{:08x}", n.wrapping_mul(0x9E37_79B1)).repeat(5)
}

/// The `run:` script of the action's step `name`.
fn action_step(name: &str) -> String {
    let text = std::fs::read_to_string(root().join("action.yml")).unwrap();
    let doc = YamlLoader::load_from_str(&text).unwrap().remove(0);
    let step = doc["runs"]["steps"]
        .as_vec()
        .unwrap()
        .iter()
        .find(|s| s["name"].as_str() == Some(name))
        .unwrap_or_else(|| panic!("no step `{name}` in action.yml"))
        .clone();
    step["run"].as_str().unwrap().to_string()
}

/// One job's runner: its temp folder and the files GitHub gives each step.
struct Job {
    dir: tempfile::TempDir,
    event_name: &'static str,
    sha: String,
    git_ref: String,
}

struct Step {
    code: Option<i32>,
    outputs: String,
    log: String,
}

impl Job {
    /// A job for `event_name` with the event payload `event`.
    fn new(event_name: &'static str, event: Value, sha: &str, git_ref: &str) -> Job {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("event.json"), event.to_string()).unwrap();
        Job {
            dir,
            event_name,
            sha: sha.into(),
            git_ref: git_ref.into(),
        }
    }

    fn path(&self, p: &str) -> PathBuf {
        self.dir.path().join(p)
    }

    /// Runs a step's script as GitHub does: `bash -e`, in the workspace,
    /// with GITHUB_* set, a fresh $GITHUB_OUTPUT, and `env`.
    fn run(&self, fake: &Fake, script: &str, env: &[(&str, &str)]) -> Step {
        let outputs = self.path("github_output");
        std::fs::write(&outputs, "").unwrap();
        let bin_dir = Path::new(crate::common::gate_exe()).parent().unwrap();
        let mut c = Command::new("bash");
        c.args(["-e", "-c", script])
            .current_dir(root())
            .env(
                "PATH",
                format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap()),
            )
            .env("GITHUB_ACTIONS", "true")
            .env("GITHUB_API_URL", &fake.url)
            .env("GITHUB_SERVER_URL", "https://github.com")
            .env("GITHUB_REPOSITORY", REPO)
            .env("GITHUB_EVENT_NAME", self.event_name)
            .env("GITHUB_EVENT_PATH", self.path("event.json"))
            .env("GITHUB_SHA", &self.sha)
            .env("GITHUB_REF", &self.git_ref)
            .env("GITHUB_OUTPUT", &outputs)
            .env("GITHUB_STEP_SUMMARY", self.path("step_summary.md"))
            .env("RUNNER_TEMP", self.dir.path())
            .env("RUNNER_OS", "Linux")
            .env("RUNNER_ARCH", "X64")
            .env("GATE_GITHUB_TIMEOUT_MS", "5000")
            .env("GATE_GITHUB_ATTEMPTS", "3")
            .env("GATE_GITHUB_BACKOFF_MS", "10")
            .env_remove("NO_COLOR");
        for (k, v) in env {
            c.env(k, v);
        }
        let o = c.output().unwrap();
        let log = format!(
            "{}\n{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(!log.contains(TOKEN), "the token leaked:\n{log}");
        Step {
            code: o.status.code(),
            outputs: std::fs::read_to_string(&outputs).unwrap(),
            log,
        }
    }

    /// The reusable workflow's measuring job: the action's input check and
    /// `gate check` steps on examples/mlp.yaml. Returns the artifact's
    /// name, its folder and `gate check`'s exit code.
    fn measure(&self, fake: &Fake) -> (String, PathBuf, String) {
        self.measure_as(fake, "")
    }

    /// [`Job::measure`] with the action's `id` input (empty: its default).
    fn measure_as(&self, fake: &Fake, id: &str) -> (String, PathBuf, String) {
        let inputs = self.run(
            fake,
            &action_step("Check the inputs"),
            &[
                ("COMMAND", "check"),
                ("BACKEND", "cpu"),
                ("COMMENT", "always"),
                ("STRICT", "false"),
                ("ID", id),
                ("BUDGETS", "examples/mlp.yaml"),
                ("ARGS", ""),
                ("BASELINE_BRANCH", ""),
                ("PUBLISH", "false"),
            ],
        );
        assert_eq!(inputs.code, Some(0), "{}", inputs.log);
        let output = |o: &str, k: &str| {
            o.lines()
                .find_map(|l| l.strip_prefix(&format!("{k}=")))
                .unwrap_or_else(|| panic!("no {k} in {o}"))
                .to_string()
        };
        let artifact = output(&inputs.outputs, "artifact");
        let out = self.path(&format!("out-{artifact}"));
        let check = self.run(
            fake,
            &action_step("gate check"),
            &[
                ("GITHUB_TOKEN", TOKEN),
                ("BUDGETS", "examples/mlp.yaml"),
                ("BACKEND", "cpu"),
                ("BASELINE", "auto"),
                ("BASELINE_BRANCH", &output(&inputs.outputs, "baseline-branch")),
                ("STRICT", "false"),
                ("OUT", out.to_str().unwrap()),
                ("ARGS", ""),
                ("COMMENT", "always"),
                ("ARTIFACT", &artifact),
                ("INSTALLED_FROM", "source"),
            ],
        );
        assert_eq!(check.code, Some(0), "{}", check.log);
        // The artifact names itself: a lone one is downloaded with no folder of its name.
        assert_eq!(
            std::fs::read_to_string(out.join("artifact-name")).unwrap(),
            format!("{artifact}\n")
        );
        (artifact, out, output(&check.outputs, "exit-code"))
    }
}

/// What upload-artifact@v6 (of a folder) then download-artifact@v7 with
/// `name:` do: the folder's files, subfolders included, land straight in
/// `to`, the step's `path`, except hidden ones (a name starting with `.`, or
/// inside such a folder: upload-artifact's `include-hidden-files` defaults to
/// `false`, src/shared/search.ts `excludeHiddenFiles`), and every file comes
/// back `644` (both READMEs, "Permission Loss"). So nothing gate reads from
/// an artifact may be a dot file or rely on its mode.
fn download_named(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        if e.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        let (src, dst) = (e.path(), to.join(e.file_name()));
        if src.is_dir() {
            download_named(&src, &dst);
        } else if src.is_file() {
            std::fs::copy(&src, &dst).unwrap();
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&dst, std::fs::Permissions::from_mode(0o644)).unwrap();
        }
    }
}

/// What download-artifact@v7 (the version action.yml and the workflows pin)
/// does with `pattern:` and no `merge-multiple`, given the run's matching
/// artifacts (name, uploaded folder): a lone one lands straight in `path`,
/// each of several in `path/NAME`. Its src/download-artifact.ts at v7.0.0
/// (37930b1; since v5.0.0): the destination is `resolvedPath` when
/// `isSingleArtifactDownload || inputs.mergeMultiple || artifacts.length === 1`,
/// else `path.join(resolvedPath, artifact.name)`.
fn download_pattern(artifacts: &[(&str, &Path)], path: &Path) {
    std::fs::create_dir_all(path).unwrap();
    match artifacts {
        [(_, from)] => download_named(from, path),
        several => {
            for (name, from) in several {
                download_named(from, &path.join(name));
            }
        }
    }
}

/// The comment workflow (`workflow_run` after the measured run): the
/// action's `gate comment` step (scripts/action/comment.sh).
fn comment_job(fake: &Fake, run: Value, artifacts: &Path) -> Step {
    comment_job_with(fake, run, artifacts, &[])
}

/// [`comment_job`] with more of the step's env (the action's `check-run`
/// and `comment-author` inputs arrive as CHECK_RUN and GATE_COMMENT_AUTHOR).
fn comment_job_with(fake: &Fake, run: Value, artifacts: &Path, extra: &[(&str, &str)]) -> Step {
    let event = run["event"].as_str().unwrap().to_string();
    let head = run["head_sha"].as_str().unwrap().to_string();
    let job = Job::new(
        "workflow_run",
        github_fake::event("workflow-run-completed", json!({ "workflow_run": run })),
        &head,
        "refs/heads/main",
    );
    let action_path = root();
    let mut env = vec![
        ("ACTION_PATH", action_path.to_str().unwrap()),
        ("GITHUB_TOKEN", TOKEN),
        ("ARTIFACTS", artifacts.to_str().unwrap()),
        ("EVENT", &event),
    ];
    env.extend_from_slice(extra);
    job.run(fake, &action_step("gate comment"), &env)
}

fn pr_payload(number: u64, head: &str, head_repo: &str, branch: &str, base: &str) -> Value {
    github_fake::event(
        "pull-request-synchronize",
        json!({
            "number": number,
            "pull_request": {
                "number": number,
                "head": { "sha": head, "ref": branch, "repo": { "full_name": head_repo } },
                "base": { "sha": base, "ref": "main", "repo": { "full_name": REPO } },
            },
            "repository": { "full_name": REPO, "default_branch": "main" },
        }),
    )
}

/// An entry of `workflow_run.pull_requests`, as GitHub's webhooks
/// description requires it: a same-repository PR from `branch` into main.
fn pr_ref(number: u64, head: &str, branch: &str) -> Value {
    let repo = json!({ "id": 4242, "name": "repo", "url": format!("https://api.github.com/repos/{REPO}") });
    json!({ "number": number, "id": 7000 + number, "url": format!("https://api.github.com/repos/{REPO}/pulls/{number}"),
            "head": { "sha": head, "ref": branch, "repo": repo },
            "base": { "sha": sha(0xc0), "ref": "main", "repo": repo } })
}

fn report(dir: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap()).unwrap()
}

#[test]
fn a_pull_requests_life_from_a_fork_to_main_and_the_next_pr() {
    let fake = Fake::start();
    let (c0, c1) = (sha(0xc0), sha(0xc1));
    fake.add_chain(std::slice::from_ref(&c0));

    // 1. A fork's PR #1 (fork/repo, branch feature) at h1 on main's c0.
    //    GitHub's GITHUB_SHA for a PR is the merge commit's; the PR's head
    //    is in the payload.
    let h1 = sha(0xf1);
    fake.state.lock().unwrap().pulls.insert(1, h1.clone());
    fake.state.lock().unwrap().merge_base = Some(c0.clone());
    let pr1 = Job::new(
        "pull_request",
        pr_payload(1, &h1, "fork/repo", "feature", &c0),
        &sha(0x3e1),
        "refs/pull/1/merge",
    );
    let (artifact, out1, code) = pr1.measure(&fake);
    assert_eq!(code, "0", "no baseline yet is a warning, not a failure");
    let r1 = report(&out1);
    // What actions/checkout checks out on a PR, and so what is measured: the merge commit.
    assert_eq!(r1["commit"], json!(sha(0x3e1)));
    assert!(r1["baseline"]["commit"].is_null(), "{}", r1["baseline"]);
    let pr_json: Value = serde_json::from_str(&std::fs::read_to_string(out1.join("pr.json")).unwrap()).unwrap();
    assert_eq!(pr_json["number"], json!(1));
    assert_eq!(pr_json["head_repo"], json!("fork/repo"));
    assert_eq!(pr_json["head_sha"], json!(h1));
    assert_eq!(std::fs::read_to_string(out1.join("comment-mode")).unwrap(), "always\n");
    // The publish step's `if:` (a push to the default branch) is false on a
    // pull request; a PR never writes: no comment, no store.
    assert_eq!(fake.count("POST", "/comments"), 0);
    assert_eq!(fake.count("PUT", "/contents/"), 0);

    // 2. The artifact, then the workflow_run job. For a fork's PR, GitHub's
    //    `workflow_run.pull_requests` is empty: the number comes from pr.json,
    //    checked against the run's head commit, repository and branch.
    //    The run's only artifact: straight into the download's path.
    let artifacts1 = pr1.path("artifacts");
    download_pattern(&[(&artifact, &out1)], &artifacts1);
    assert!(artifacts1.join("report.json").exists() && !artifacts1.join(&artifact).exists());
    let run1 = json!({ "id": 101, "event": "pull_request", "head_sha": h1, "head_branch": "feature",
        "head_repository": { "full_name": "fork/repo" }, "pull_requests": [] });
    let c = comment_job(&fake, run1, &artifacts1);
    assert_eq!(c.code, Some(0), "{}", c.log);
    let comments = fake.comments(1);
    assert_eq!(comments.len(), 1, "{}", c.log);
    assert!(
        comments[0].body.contains(&format!("<!-- gate:id={artifact} -->")),
        "{}",
        comments[0].body
    );

    // 3. Merged: a push to main at c1 (parent c0). Measured read-only, then
    //    the baseline stored (the publish job's `if:` holds: push to main).
    fake.add_chain(&[c1.clone(), c0.clone()]);
    let push = Job::new(
        "push",
        github_fake::event(
            "push",
            json!({ "ref": "refs/heads/main", "before": c0, "after": c1,
                    "repository": { "full_name": REPO, "default_branch": "main" } }),
        ),
        &c1,
        "refs/heads/main",
    );
    let (push_artifact, out_main, code) = push.measure(&fake);
    assert_eq!(code, "0");
    assert_eq!(report(&out_main)["commit"], json!(c1));
    // The reusable workflow's `publish` job: another (GitHub-hosted) runner
    // downloads the artifact and runs the action with `command: publish`.
    let hosted = Job::new(
        "push",
        github_fake::event(
            "push",
            json!({ "ref": "refs/heads/main", "before": c0, "after": c1,
                    "repository": { "full_name": REPO, "default_branch": "main" } }),
        ),
        &c1,
        "refs/heads/main",
    );
    // The report's `commit` is whatever the measuring runner wrote: a forged
    // one must not choose which reports/<card>/<sha>.json is written. The step
    // stores under `SHA` (github.sha: this run's commit).
    let publish_step = |out: &Path| {
        hosted.run(
            &fake,
            &action_step("gate baseline publish"),
            &[
                ("GITHUB_TOKEN", TOKEN),
                ("OUT", out.to_str().unwrap()),
                ("BRANCH", "gate-baselines"),
                ("SHA", &c1),
            ],
        )
    };
    let forged = hosted.path("forged");
    download_named(&out_main, &forged);
    let mut r = report(&forged);
    r["commit"] = json!(c0);
    std::fs::write(forged.join("report.json"), r.to_string()).unwrap();
    let publish = publish_step(&forged);
    let card = format!("cpu-{}", std::env::consts::ARCH);
    assert!(
        fake.file(&format!("reports/{card}/{c0}.json")).is_none(),
        "{}",
        publish.log
    );
    // The real artifact, downloaded by `name:`: straight into the path.
    let downloaded = hosted.path("gate-out");
    download_named(&out_main, &downloaded);
    let publish = publish_step(&downloaded);
    assert_eq!(publish.code, Some(0), "{}", publish.log);
    let stored: Value = serde_json::from_str(
        &fake
            .file(&format!("reports/{card}/{c1}.json"))
            .expect("the baseline is stored"),
    )
    .unwrap();
    assert_eq!(stored["commit"], json!(c1));
    // The push's run also triggers the comment workflow: nothing to comment.
    let artifacts_main = push.path("artifacts");
    download_pattern(&[(&push_artifact, &out_main)], &artifacts_main);
    let run_main = json!({ "id": 102, "event": "push", "head_sha": c1, "head_branch": "main",
        "head_repository": { "full_name": REPO }, "pull_requests": [] });
    let c = comment_job(&fake, run_main, &artifacts_main);
    assert_eq!(c.code, Some(0), "{}", c.log);
    assert!(
        c.log.contains("was a 'push' event, not a pull request: no comment"),
        "{}",
        c.log
    );
    assert_eq!(fake.count("POST", "/comments"), 1);

    // 4. The next PR, #2, from a branch of this repository, on c1: compared
    //    with the stored baseline, and commented.
    let h2 = sha(0xf2);
    {
        let mut s = fake.state.lock().unwrap();
        s.pulls.insert(2, h2.clone());
        s.pull_heads.insert(2, (REPO.into(), "topic".into()));
        s.merge_base = Some(c1.clone());
    }
    let pr2 = Job::new(
        "pull_request",
        pr_payload(2, &h2, REPO, "topic", &c1),
        &sha(0x3e2),
        "refs/pull/2/merge",
    );
    let (artifact2, out2, code) = pr2.measure(&fake);
    assert_eq!(code, "0");
    assert_eq!(artifact2, artifact, "one id across the PRs of one spec and backend");
    let r2 = report(&out2);
    assert_eq!(r2["baseline"]["commit"], json!(c1), "{}", r2["baseline"]);
    assert_eq!(r2["baseline"]["comparable"], json!(true));
    let artifacts2 = pr2.path("artifacts");
    download_pattern(&[(&artifact2, &out2)], &artifacts2);
    let run2 = json!({ "id": 103, "event": "pull_request", "head_sha": h2, "head_branch": "topic",
        "head_repository": { "full_name": REPO },
        "pull_requests": [pr_ref(2, &h2, "topic")] });
    let c = comment_job(&fake, run2, &artifacts2);
    assert_eq!(c.code, Some(0), "{}", c.log);
    let comments = fake.comments(2);
    assert_eq!(comments.len(), 1, "{}", c.log);
    assert!(
        comments[0].body.contains(&c1[..7]),
        "the comment names the baseline commit:\n{}",
        comments[0].body
    );
    assert!(!fake.comments(1)[0].body.contains(&c1[..7]), "PR #1 had no baseline");
    // PR #1's comment is untouched.
    assert_eq!(fake.comments(1).len(), 1);
}

/// Two gates in one run (the action's default id and `second`): the pinned
/// download-artifact puts each in `path/NAME`, and each gets its own comment,
/// named by the `artifact-name` inside it. The same gate alone in a run
/// lands straight in `path` and finds the same comment.
#[test]
fn each_layout_of_the_downloaded_artifacts_is_commented() {
    let fake = Fake::start();
    let c0 = sha(0xd0);
    fake.add_chain(std::slice::from_ref(&c0));
    let h = sha(0xd1);
    {
        let mut s = fake.state.lock().unwrap();
        s.pulls.insert(7, h.clone());
        s.pull_heads.insert(7, (REPO.into(), "two".into()));
        s.merge_base = Some(c0.clone());
    }
    let pr = Job::new(
        "pull_request",
        pr_payload(7, &h, REPO, "two", &c0),
        &sha(0x3e7),
        "refs/pull/7/merge",
    );
    let (a, out_a, code) = pr.measure_as(&fake, "");
    assert_eq!(code, "0");
    let (b, out_b, code) = pr.measure_as(&fake, "second");
    assert_eq!(code, "0");
    assert_eq!(b, "gate-second");
    assert_ne!(a, b);
    let run = json!({ "id": 201, "event": "pull_request", "head_sha": h, "head_branch": "two",
        "head_repository": { "full_name": REPO },
        "pull_requests": [pr_ref(7, &h, "two")] });

    // Several artifacts: one folder each.
    let both = pr.path("both");
    download_pattern(&[(&a, &out_a), (&b, &out_b)], &both);
    assert!(both.join(&a).join("report.json").exists() && !both.join("report.json").exists());
    let c = comment_job(&fake, run.clone(), &both);
    assert_eq!(c.code, Some(0), "{}", c.log);
    let comments = fake.comments(7);
    assert_eq!(comments.len(), 2, "{}", c.log);
    for id in [&a, &b] {
        assert!(
            comments
                .iter()
                .any(|x| x.body.contains(&format!("<!-- gate:id={id} -->"))),
            "no comment for {id}: {}",
            c.log
        );
    }

    // One artifact: its files straight in the path; its comment is found and kept, not added again.
    let alone = pr.path("alone");
    download_pattern(&[(&b, &out_b)], &alone);
    let c = comment_job(&fake, run.clone(), &alone);
    assert_eq!(c.code, Some(0), "{}", c.log);
    assert_eq!(fake.comments(7).len(), 2, "{}", c.log);
    assert_eq!(fake.count("POST", "/comments"), 2, "{}", c.log);

    // An artifact that does not name itself (an older action's): nothing is
    // posted, and the job fails saying why rather than passing silently.
    std::fs::remove_file(alone.join("artifact-name")).unwrap();
    let c = comment_job(&fake, run, &alone);
    assert_eq!(c.code, Some(2), "{}", c.log);
    assert!(c.log.contains("holds no valid artifact-name"), "{}", c.log);
    assert_eq!(fake.count("POST", "/comments"), 2, "{}", c.log);
}

#[test]
fn the_comment_job_posts_a_check_run_per_gate_id_when_asked() {
    let fake = Fake::start();
    let c0 = sha(0xc0);
    fake.add_chain(std::slice::from_ref(&c0));
    let h1 = sha(0xf2);
    fake.state.lock().unwrap().pulls.insert(2, h1.clone());
    fake.state.lock().unwrap().merge_base = Some(c0.clone());
    let pr = Job::new(
        "pull_request",
        pr_payload(2, &h1, "fork/repo", "feature", &c0),
        &sha(0x3e2),
        "refs/pull/2/merge",
    );
    let (artifact, out, code) = pr.measure(&fake);
    assert_eq!(code, "0");
    let artifacts = pr.path("artifacts");
    download_pattern(&[(&artifact, &out)], &artifacts);
    let run = json!({ "id": 102, "event": "pull_request", "head_sha": h1, "head_branch": "feature",
        "head_repository": { "full_name": "fork/repo" }, "pull_requests": [] });
    let c = comment_job_with(&fake, run, &artifacts, &[("CHECK_RUN", "true")]);
    assert_eq!(c.code, Some(0), "{}", c.log);
    assert_eq!(fake.comments(2).len(), 1, "{}", c.log);
    let runs = fake.check_runs();
    assert_eq!(runs.len(), 1, "{}", c.log);
    // Named as a report of the gate id, never like a job (GitHub may list
    // it under another workflow's check suite), on the PR's head (not the
    // merge commit measured).
    assert_eq!(runs[0]["name"], json!(format!("gate report: {artifact}")));
    assert_eq!(runs[0]["head_sha"], json!(h1));
    assert_eq!(runs[0]["conclusion"], "success");
}
