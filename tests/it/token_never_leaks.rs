//! #15: nothing gate prints or writes holds the token. Every subcommand
//! that `gate --help` lists runs here with GITHUB_TOKEN (and the other token
//! variables a runner has) set to sentinels, in the situations most likely
//! to echo it: success; a GitHub API (tests/github_fake) that answers
//! 401/403/404/422/500 echoing the request's headers, or the token where a
//! number belongs; the token in GITHUB_REPOSITORY, GITHUB_SHA, the event
//! file or its path, and a GITHUB_API_URL with the token as its userinfo.
//! stdout, stderr and every file written under the run's folders (its
//! current folder, HOME, TMPDIR, the output folders, the step summary) are
//! searched for the token, any 10 characters of it in a row (also as
//! Markdown escapes them), its base64 (`x-access-token:TOKEN` included) and
//! its percent-encoding; so is what gate sends the API (a comment, a stored
//! report), the Authorization header aside.
use crate::github_fake;

use crate::common::output_text;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::github_fake::{leak_forms, Echo, Fake, FaultKind, REPO, TOKEN};
use base64::Engine;
use serde_json::json;

/// Token variables gate does not read, but a runner may have set: they must
/// not show either.
const OTHER_SECRETS: &[(&str, &str)] = &[
    ("GH_TOKEN", "gho_GHTOKENsentinel_93be1f_NEVER_SHOWN"),
    ("GITHUB_PAT", "github_pat_SENTINEL_5c07aa_NEVER_SHOWN"),
    ("ACTIONS_RUNTIME_TOKEN", "ACTIONSruntimeSENTINEL_0b9d4e"),
    ("ACTIONS_ID_TOKEN_REQUEST_TOKEN", "IDtokenREQUESTsentinel_e21f70"),
];

fn find_leak(text: &str) -> Option<String> {
    std::iter::once(TOKEN)
        .chain(OTHER_SECRETS.iter().map(|(_, v)| *v))
        .flat_map(leak_forms)
        .find(|f| text.contains(f.as_str()))
}

fn sha(n: u32) -> String {
    format!("{n:040x}")
}

/// A run's world: `input` holds what the test wrote (specs, events; it
/// contains the token on purpose and is not searched), `work` is the run's
/// current folder, HOME and TMPDIR, where every output goes; it is searched
/// whole after each run.
struct Sandbox {
    _tmp: tempfile::TempDir,
    input: PathBuf,
    work: PathBuf,
    fake: Fake,
    /// What went wrong, every run's, reported together by `finish`.
    problems: std::cell::RefCell<Vec<String>>,
    /// Files already reported, with the text they were reported with (a
    /// file is reported again only once it changes).
    reported: std::cell::RefCell<std::collections::HashMap<PathBuf, String>>,
}

impl Sandbox {
    fn new() -> Sandbox {
        let tmp = tempfile::tempdir().unwrap();
        let input = tmp.path().join("input");
        let work = tmp.path().join("work");
        std::fs::create_dir_all(&input).unwrap();
        std::fs::create_dir_all(work.join("tmp")).unwrap();
        let spec = std::fs::read_to_string(Path::new(env!("GATE_REPO_ROOT")).join("examples/mlp.yaml")).unwrap();
        std::fs::write(input.join("mlp.yaml"), spec).unwrap();
        let fake = Fake::start();
        fake.state.lock().unwrap().pulls.insert(7, sha(0xbeef));
        std::fs::write(input.join("event.json"), pr_event(&sha(1), "main", REPO).to_string()).unwrap();
        Sandbox {
            _tmp: tmp,
            input,
            work,
            fake,
            problems: Default::default(),
            reported: Default::default(),
        }
    }

    fn spec(&self) -> PathBuf {
        self.input.join("mlp.yaml")
    }

    fn out(&self, name: &str) -> PathBuf {
        self.work.join(name)
    }

    /// A `pull_request` run in GitHub Actions, as a runner sets it up.
    fn command(&self) -> Command {
        let mut c = Command::new(crate::common::gate_exe());
        c.current_dir(&self.work).env_clear();
        if let Some(path) = std::env::var_os("PATH") {
            c.env("PATH", path);
        }
        c.env("HOME", &self.work)
            .env("TMPDIR", self.work.join("tmp"))
            .env("RUST_BACKTRACE", "full")
            .env("RUST_LOG", "trace")
            .env("GITHUB_ACTIONS", "true")
            .env("GITHUB_TOKEN", TOKEN)
            .env("GITHUB_API_URL", &self.fake.url)
            .env("GITHUB_REPOSITORY", REPO)
            .env("GITHUB_EVENT_NAME", "pull_request")
            .env("GITHUB_EVENT_PATH", self.input.join("event.json"))
            .env("GITHUB_SHA", sha(0xbeef))
            .env("GITHUB_STEP_SUMMARY", self.work.join("summary.md"))
            .env("GITHUB_OUTPUT", self.work.join("github_output"))
            .env("GATE_GITHUB_TIMEOUT_MS", "5000")
            .env("GATE_GITHUB_ATTEMPTS", "2")
            .env("GATE_GITHUB_BACKOFF_MS", "10")
            .env("GATE_GITHUB_MAX_RATE_WAIT_MS", "1000");
        for (k, v) in OTHER_SECRETS {
            c.env(k, v);
        }
        c
    }

    /// Runs `c` with `faults` on the fake, checks its exit code, and fails
    /// on any trace of a secret in its output or in any file under `work`.
    fn run(&self, what: &str, mut c: Command, faults: &[(&str, &str, FaultKind)], exit: i32) -> String {
        {
            let mut s = self.fake.state.lock().unwrap();
            s.faults.clear();
        }
        for (method, path, kind) in faults {
            self.fake.fault(method, path, usize::MAX, kind.clone());
        }
        // The step summary is the step's own (GitHub gives each step a new one).
        let _ = std::fs::remove_file(self.work.join("summary.md"));
        let sent = self.fake.log().len();
        let o = c.output().unwrap();
        let text = output_text(&o);
        let mut problems = self.problems.borrow_mut();
        if let Some(form) = find_leak(&text) {
            problems.push(format!("{what}: `{form}` leaked to stdout/stderr:\n{text}"));
        }
        // What gate posts (a comment, a stored report) is public.
        for r in &self.fake.log()[sent..] {
            // A stored file travels as base64 in `content`.
            let stored = serde_json::from_str::<serde_json::Value>(&r.body)
                .ok()
                .and_then(|v| v["content"].as_str().map(str::to_string))
                .and_then(|c| base64::engine::general_purpose::STANDARD.decode(c).ok())
                .map(|b| String::from_utf8_lossy(&b).into_owned())
                .unwrap_or_default();
            if let Some(form) = find_leak(&format!("{}\n{stored}", r.body)) {
                problems.push(format!("{what}: `{form}` sent in {} {}:\n{}", r.method, r.path, r.body));
            }
        }
        for (path, contents) in files(&self.work) {
            if let Some(form) = find_leak(&format!("{}\n{contents}", path.display())) {
                let mut reported = self.reported.borrow_mut();
                if reported.get(&path) != Some(&contents) {
                    problems.push(format!("{what}: `{form}` leaked into {}:\n{contents}", path.display()));
                    reported.insert(path, contents);
                }
            }
        }
        if o.status.code() != Some(exit) {
            problems.push(format!("{what}: exit {:?}, not {exit}:\n{text}", o.status.code()));
        }
        text
    }

    /// Records a problem unless `out` (a run's output) says `needle`: the
    /// run took the path it is there for.
    fn expect(&self, what: &str, out: &str, needle: &str) {
        if !out.contains(needle) {
            self.problems
                .borrow_mut()
                .push(format!("{what}: the output lacks `{needle}`:\n{out}"));
        }
    }

    /// Fails with every problem found, if any.
    fn finish(self) {
        let problems = self.problems.take();
        assert!(
            problems.is_empty(),
            "{} problems:\n\n{}",
            problems.len(),
            problems.join("\n----\n")
        );
    }
}

/// Every file under `dir` (hidden and temporary ones included), with its
/// text (lossy, so a binary file is searched too).
fn files(dir: &Path) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let bytes = std::fs::read(&p).unwrap_or_default();
                out.push((p, String::from_utf8_lossy(&bytes).into_owned()));
            }
        }
    }
    out
}

fn pr_event(base_sha: &str, base_ref: &str, repo: &str) -> serde_json::Value {
    github_fake::event(
        "pull-request-opened",
        json!({
            "number": 7,
            "pull_request": {
                "number": 7,
                "title": "a change",
                "base": { "ref": base_ref, "sha": base_sha, "repo": { "full_name": repo } },
                "head": { "ref": "topic", "sha": sha(0xbeef), "repo": { "full_name": repo } },
            }
        }),
    )
}

/// The subcommands `gate --help` lists (`help` aside).
fn listed_subcommands(sb: &Sandbox) -> BTreeSet<String> {
    let help = sb.run(
        "gate --help",
        {
            let mut c = sb.command();
            c.arg("--help");
            c
        },
        &[],
        0,
    );
    help.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| *n != "help")
        .map(str::to_string)
        .collect()
}

/// How a server answers `status` echoing the token: the request's headers
/// as JSON, and for a 500 also as an HTML page cut inside the token.
fn echoes(status: u16) -> Vec<FaultKind> {
    let mut v = vec![FaultKind::Echo(status, Echo::Json)];
    if status == 500 {
        v.push(FaultKind::Echo(status, Echo::Html));
    }
    v
}

const STATUSES: [u16; 5] = [401, 403, 404, 422, 500];

#[test]
fn every_subcommand_in_every_situation_keeps_the_token_to_itself() {
    let sb = Sandbox::new();
    let mut covered = BTreeSet::new();
    let cmd = |args: &[&dyn AsRef<std::ffi::OsStr>]| {
        let mut c = sb.command();
        for a in args {
            c.arg(a);
        }
        c
    };
    let out = sb.out("out");
    let spec = sb.spec();

    // Help and version of every subcommand.
    let listed = listed_subcommands(&sb);
    sb.run("gate --version", cmd(&[&"--version"]), &[], 0);
    for name in &listed {
        sb.run(&format!("gate {name} --help"), cmd(&[name, &"--help"]), &[], 0);
    }
    sb.run(
        "gate baseline publish --help",
        cmd(&[&"baseline", &"publish", &"--help"]),
        &[],
        0,
    );

    // Success, the whole Actions flow: check, comment, publish, then the rest.
    covered.insert("validate");
    sb.run("validate", cmd(&[&"validate", &"--budgets", &spec]), &[], 0);
    covered.insert("check");
    let o = sb.run(
        "check --baseline none",
        cmd(&[&"check", &"--baseline", &"none", &"--budgets", &spec, &"--out", &out]),
        &[],
        0,
    );
    assert!(out.join("pr.json").exists(), "{o}");
    covered.insert("comment");
    let o = sb.run("comment", cmd(&[&"comment", &"--from", &out]), &[], 0);
    sb.expect("comment", &o, "created comment");
    covered.insert("baseline");
    // Publishing refuses a pull_request run: publish as the push to main would.
    let push = |mut c: Command| {
        c.env("GITHUB_EVENT_NAME", "push").env_remove("GITHUB_EVENT_PATH");
        c
    };
    let o = sb.run(
        "baseline publish",
        push(cmd(&[&"baseline", &"publish", &"--from", &out, &"--sha", &sha(1)])),
        &[],
        0,
    );
    sb.expect("baseline publish", &o, "stored reports/");
    {
        let mut s = sb.fake.state.lock().unwrap();
        s.merge_base = Some(sha(1));
    }
    sb.fake.add_chain(&[sha(1), sha(0)]);
    let auto = cmd(&[&"check", &"--budgets", &spec, &"--out", &out]);
    let o = sb.run("check --baseline auto", auto, &[], 0);
    sb.expect(
        "check --baseline auto",
        &o,
        &format!("baseline: the report of {}", sha(1)),
    );
    covered.insert("merge");
    sb.run(
        "merge",
        cmd(&[&"merge", &out, &"--budgets", &spec, &"--out", &sb.out("merged")]),
        &[],
        0,
    );
    covered.insert("history");
    sb.run("history", cmd(&[&"history", &"params", &"--reports", &out]), &[], 0);
    covered.insert("doctor");
    sb.run("doctor", cmd(&[&"doctor"]), &[], 0);
    covered.insert("fit");
    sb.run("fit", cmd(&[&"fit", &"mlp", &"--budgets", &spec]), &[], 0);
    covered.insert("plan");
    sb.run(
        "plan",
        cmd(&[&"plan", &"mlp", &"--budgets", &spec, &"--out", &sb.out("plan")]),
        &[],
        0,
    );
    covered.insert("init");
    sb.run(
        "init",
        cmd(&[&"init", &"--dir", &sb.out("init"), &"--gate-repo", &"acme/gate"]),
        &[],
        0,
    );
    covered.insert("completions");
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        sb.run(&format!("completions {shell}"), cmd(&[&"completions", &shell]), &[], 0);
    }
    covered.insert("man");
    sb.run("man", cmd(&[&"man"]), &[], 0);

    // A GitHub API that echoes the token, on each call gate makes.
    for status in STATUSES {
        for kind in echoes(status) {
            let what = format!("comment, GET comments {kind:?}");
            let o = sb.run(
                &what,
                cmd(&[&"comment", &"--from", &out]),
                &[("GET", "/comments", kind.clone())],
                3,
            );
            sb.expect(&what, &o, "GitHub refused to read the pull request's comments");
            let what = format!("check --baseline auto, GET contents {kind:?}");
            let o = sb.run(
                &what,
                cmd(&[&"check", &"--budgets", &spec, &"--out", &out]),
                &[("GET", "/contents", kind.clone())],
                0,
            );
            sb.expect(&what, &o, "no baseline");
            let what = format!("baseline publish, PUT contents {kind:?}");
            let o = sb.run(
                &what,
                push(cmd(&[&"baseline", &"publish", &"--from", &out, &"--sha", &sha(2)])),
                &[("PUT", "/contents", kind.clone())],
                3,
            );
            // A 422 on a write means someone else wrote first: retried, then given up.
            let said = match status {
                422 => "the baseline store kept changing under us",
                _ => "GitHub refused to write the baseline store",
            };
            sb.expect(&what, &o, said);
        }
    }
    let what = "comment, POST comment echoes 403";
    sb.run(
        what,
        cmd(&[&"comment", &"--id", &"other", &"--from", &out]),
        &[("POST", "/comments", FaultKind::Echo(403, Echo::Json))],
        3,
    );
    let wrong = FaultKind::Echo(200, Echo::WrongType);
    let what = "comment, comments with the token for an id";
    let o = sb.run(
        what,
        cmd(&[&"comment", &"--from", &out]),
        &[("GET", "/comments", wrong.clone())],
        3,
    );
    sb.expect(what, &o, "unexpected answer from GitHub");
    let what = "check --baseline auto, a store listing with the token for a name";
    let o = sb.run(
        what,
        cmd(&[&"check", &"--budgets", &spec, &"--out", &out]),
        &[("GET", "/contents", wrong.clone()), ("GET", "/compare", wrong)],
        0,
    );
    sb.expect(what, &o, "unexpected answer from GitHub");
    sb.run(
        "comment, a rate limit longer than the run may wait",
        cmd(&[&"comment", &"--from", &out]),
        &[(
            "GET",
            "/comments",
            FaultKind::StatusWithHeaders(
                429,
                format!("secondary rate limit for {TOKEN}"),
                vec![("retry-after".into(), "3600".into())],
            ),
        )],
        3,
    );

    assert_eq!(
        covered.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>(),
        listed,
        "a subcommand `gate --help` lists is not run here"
    );
    sb.finish();
}

#[test]
fn the_token_in_the_environment_where_it_does_not_belong_is_never_repeated() {
    let sb = Sandbox::new();
    let out = sb.out("out");
    let spec = sb.spec();
    let cmd = |args: &[&dyn AsRef<std::ffi::OsStr>]| {
        let mut c = sb.command();
        for a in args {
            c.arg(a);
        }
        c
    };
    let check = || cmd(&[&"check", &"--budgets", &spec, &"--out", &out]);
    let comment = || cmd(&[&"comment", &"--from", &out]);
    let publish = || {
        let mut c = cmd(&[&"baseline", &"publish", &"--from", &out]);
        c.env("GITHUB_EVENT_NAME", "push").env_remove("GITHUB_EVENT_PATH");
        c
    };
    sb.run("check", check(), &[], 0);

    // GITHUB_REPOSITORY: the token instead of OWNER/NAME, or as the name
    // (a well-formed one: the requests go out and come back 404).
    for (repo, publish_exit) in [
        (TOKEN.to_string(), 2),
        (format!("octo/{TOKEN}"), 3),
        (format!("{TOKEN}/x y"), 2),
    ] {
        let what = format!("GITHUB_REPOSITORY={repo}");
        let mut c = check();
        c.env("GITHUB_REPOSITORY", &repo);
        sb.run(&format!("check, {what}"), c, &[], 0);
        let mut c = comment();
        c.env("GITHUB_REPOSITORY", &repo);
        let o = sb.run(&format!("comment, {what}"), c, &[], 3);
        sb.expect(&what, &o, "error: ");
        let mut c = publish();
        c.env("GITHUB_REPOSITORY", &repo).env("GITHUB_SHA", sha(3));
        sb.run(&format!("publish, {what}"), c, &[], publish_exit);
    }
    // --repo on the command line, as a workflow might pass it from a variable.
    let mut c = comment();
    c.args(["--repo", TOKEN]);
    sb.run("comment --repo TOKEN", c, &[], 3);
    // A value clap refuses, which it repeats.
    let mut c = comment();
    c.args(["--pr", TOKEN]);
    sb.run("comment --pr TOKEN", c, &[], 2);

    // GITHUB_SHA: the token instead of a commit.
    let mut c = check();
    c.env("GITHUB_SHA", TOKEN);
    sb.run("check, GITHUB_SHA=TOKEN", c, &[], 0);
    let mut c = publish();
    c.env("GITHUB_SHA", TOKEN);
    sb.run("publish, GITHUB_SHA=TOKEN", c, &[], 2);

    // GITHUB_API_URL: the token as userinfo or in the query (both still
    // reach the API: exit 0), as a path (404s), or as the whole value.
    let port = sb.fake.url.trim_start_matches("http://");
    // The URL with the token as a path is a misconfiguration whose requests
    // are not GitHub's API: its own fake, kept out of the exchanges checked
    // against GitHub's description (tests/it/github_openapi.rs).
    let stray = Fake::start();
    stray.state.lock().unwrap().exchange_log = None;
    for (url, comment_exit) in [
        (format!("http://x-access-token:{TOKEN}@{port}"), 0),
        (format!("http://{TOKEN}@{port}"), 0),
        (format!("{}/?access_token={TOKEN}", sb.fake.url), 0),
        (format!("{}/{TOKEN}", stray.url), 3),
        (TOKEN.to_string(), 3),
        (format!("not a url {TOKEN}"), 3),
    ] {
        let mut c = check();
        c.env("GITHUB_API_URL", &url);
        sb.run(&format!("check, GITHUB_API_URL={url}"), c, &[], 0);
        let mut c = comment();
        c.env("GITHUB_API_URL", &url);
        sb.run(&format!("comment, GITHUB_API_URL={url}"), c, &[], comment_exit);
    }

    // The event file: the token in every field gate reads from it.
    let evil = sb.input.join("evil-event.json");
    let mut ev = pr_event(TOKEN, TOKEN, TOKEN);
    ev["pull_request"]["head"]["sha"] = json!(TOKEN);
    ev["pull_request"]["head"]["ref"] = json!(TOKEN);
    ev["pull_request"]["head"]["repo"]["full_name"] = json!(TOKEN);
    ev["pull_request"]["title"] = json!(TOKEN);
    std::fs::write(&evil, ev.to_string()).unwrap();
    let mut c = check();
    c.env("GITHUB_EVENT_PATH", &evil);
    sb.run("check, the token all over the event", c, &[], 0);
    let mut c = comment();
    c.env("GITHUB_EVENT_PATH", &evil);
    sb.run("comment, the token all over the event", c, &[], 0);
    // A workflow_run event and an artifact's pr.json that carry it.
    let run_ev = sb.input.join("run-event.json");
    std::fs::write(
        &run_ev,
        github_fake::event(
            "workflow-run-completed",
            json!({ "workflow_run": { "head_sha": TOKEN, "event": "pull_request",
                    "head_repository": { "full_name": TOKEN }, "head_branch": TOKEN } }),
        )
        .to_string(),
    )
    .unwrap();
    let mut c = comment();
    c.env("GITHUB_EVENT_NAME", "workflow_run")
        .env("GITHUB_EVENT_PATH", &run_ev);
    sb.run("comment, workflow_run with the token", c, &[], 0);
    // Not JSON, holding the token.
    let junk = sb.input.join("junk-event.json");
    std::fs::write(&junk, format!("{TOKEN}\n{{\"pull_request\": {TOKEN}}}")).unwrap();
    for (what, path) in [
        ("an event file that holds the token and is not JSON", junk),
        (
            "an event path that names the token",
            sb.input.join(format!("{TOKEN}.json")),
        ),
    ] {
        let mut c = comment();
        c.env("GITHUB_EVENT_PATH", &path);
        let o = sb.run(&format!("comment, {what}"), c, &[], 3);
        sb.expect(what, &o, "GITHUB_EVENT_NAME is pull_request but the event file");
        let mut c = check();
        c.env("GITHUB_EVENT_PATH", &path);
        sb.run(&format!("check, {what}"), c, &[], 0);
    }

    // An output folder from elsewhere (an artifact of an older gate) whose
    // report carries the token: what is posted and published from it does not.
    let artifact = sb.input.join("artifact");
    std::fs::create_dir_all(&artifact).unwrap();
    for name in ["report.json", "baseline.json"] {
        let mut r: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
        r["commit"] = json!(TOKEN);
        r["spec"] = json!(format!("{TOKEN}.yaml"));
        r["results"][0]["measured"] = json!(1);
        std::fs::write(artifact.join(name), r.to_string()).unwrap();
    }
    let mut c = sb.command();
    c.arg("comment").arg("--from").arg(&artifact);
    let o = sb.run("comment from an artifact that holds the token", c, &[], 0);
    sb.expect("comment from an artifact", &o, "comment");
    let mut c = sb.command();
    c.args(["baseline", "publish", "--sha", &sha(5), "--from"])
        .arg(&artifact);
    c.env("GITHUB_EVENT_NAME", "push").env_remove("GITHUB_EVENT_PATH");
    let o = sb.run("publish from an artifact that holds the token", c, &[], 0);
    sb.expect("publish from an artifact", &o, "stored reports/");

    // The token itself padded, and the token in the tuning variables.
    let mut c = comment();
    c.env("GITHUB_TOKEN", format!("  {TOKEN}\n"));
    sb.run(
        "comment, a padded token",
        c,
        &[("GET", "/comments", FaultKind::Echo(401, Echo::Json))],
        3,
    );
    let mut c = comment();
    for k in [
        "GATE_GITHUB_TIMEOUT_MS",
        "GATE_GITHUB_ATTEMPTS",
        "GATE_GITHUB_BACKOFF_MS",
        "GATE_GITHUB_MAX_RATE_WAIT_MS",
        "GATE_GITHUB_DEADLINE_MS",
        "GITHUB_STEP_SUMMARY",
        "GITHUB_EVENT_NAME",
    ] {
        c.env(k, TOKEN);
    }
    // A tuning variable that is not a number is refused (#43), its value
    // quoted in the error: redacted like every other line.
    sb.run("comment, the token in every tuning variable", c, &[], 2);
    sb.finish();
}
