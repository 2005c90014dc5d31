//! The run's GitHub context, from the environment Actions sets:
//! `GITHUB_REPOSITORY`, `GITHUB_EVENT_PATH`, `GITHUB_EVENT_NAME`, `GITHUB_SHA`.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::error::GithubError;

/// `owner/name`, checked so it can go into a URL path as is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repo(String);

impl Repo {
    pub fn parse(s: &str) -> Result<Repo, GithubError> {
        let ok_part = |p: &str| !p.is_empty() && p.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
        match s.trim().split_once('/') {
            Some((o, n)) if ok_part(o) && ok_part(n) && n != "." && n != ".." => Ok(Repo(s.trim().into())),
            _ => Err(GithubError::Config {
                message: format!("`{s}` is not a repository (expected OWNER/NAME)"),
                hint: "GITHUB_REPOSITORY is set by GitHub Actions; elsewhere pass --repo OWNER/NAME".into(),
            }),
        }
    }

    pub fn from_env() -> Result<Repo, GithubError> {
        match std::env::var("GITHUB_REPOSITORY") {
            Ok(s) if !s.trim().is_empty() => Repo::parse(&s),
            _ => Err(GithubError::Config {
                message: "GITHUB_REPOSITORY is not set".into(),
                hint: "run inside GitHub Actions, or pass --repo OWNER/NAME".into(),
            }),
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for Repo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A commit SHA (hex), checked so it can go into a URL path.
pub fn check_sha(s: &str) -> Result<String, GithubError> {
    let t = s.trim();
    if gate_contract::history::is_sha(t) {
        Ok(t.to_ascii_lowercase())
    } else {
        Err(GithubError::Config {
            message: format!("`{s}` is not a commit SHA"),
            hint: "pass the full 40-character SHA".into(),
        })
    }
}

/// A branch name, checked so it can go into a query string.
pub fn check_branch(s: &str) -> Result<String, GithubError> {
    let t = s.trim();
    if !t.is_empty()
        && !t.contains("..")
        && !t.starts_with('/')
        && t.chars().all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c))
    {
        Ok(t.into())
    } else {
        Err(GithubError::Config {
            message: format!("`{s}` is not a usable branch name"),
            hint: "use letters, digits, `-`, `_`, `.` and `/`, e.g. gate-baselines".into(),
        })
    }
}

/// The parts of a pull request event `gate` uses; also what `gate check`
/// writes to `pr.json` so a `workflow_run` job knows which PR to comment on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PullRequest {
    pub number: u64,
    pub base_ref: String,
    pub base_sha: String,
    pub head_sha: String,
    /// `owner/name` of the head repository (differs from the base for forks).
    pub head_repo: Option<String>,
    pub base_repo: Option<String>,
}

impl PullRequest {
    pub fn is_fork(&self) -> bool {
        match (&self.head_repo, &self.base_repo) {
            (Some(h), Some(b)) => h != b,
            _ => false,
        }
    }
}

/// The event that started the workflow, as far as `gate` cares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    PullRequest(PullRequest),
    /// A `workflow_run` event: the run whose artifact is being commented.
    WorkflowRun {
        head_sha: String,
        event: String,
        /// `owner/name` of the run's head repository (a fork's, for a fork PR).
        head_repo: Option<String>,
        /// The run's head branch.
        head_branch: Option<String>,
        /// The measuring run's id, for a link to it.
        run_id: Option<u64>,
    },
    /// Anything else (push, tag, schedule, dispatch).
    Other,
}

/// Parses an event payload.
pub fn parse_event(json: &serde_json::Value) -> Event {
    let s = |v: &serde_json::Value| v.as_str().map(str::to_string);
    if let Some(pr) = json.get("pull_request") {
        if let (Some(number), Some(base_sha), Some(head_sha)) = (
            pr.get("number")
                .and_then(|n| n.as_u64())
                .or_else(|| json.get("number").and_then(|n| n.as_u64())),
            pr.pointer("/base/sha").and_then(s),
            pr.pointer("/head/sha").and_then(s),
        ) {
            return Event::PullRequest(PullRequest {
                number,
                base_ref: pr.pointer("/base/ref").and_then(s).unwrap_or_default(),
                base_sha,
                head_sha,
                head_repo: pr.pointer("/head/repo/full_name").and_then(s),
                base_repo: pr.pointer("/base/repo/full_name").and_then(s),
            });
        }
    }
    if let Some(run) = json.get("workflow_run") {
        if let Some(head_sha) = run.get("head_sha").and_then(s) {
            return Event::WorkflowRun {
                head_sha,
                event: run.get("event").and_then(s).unwrap_or_default(),
                head_repo: run.pointer("/head_repository/full_name").and_then(s),
                head_branch: run.get("head_branch").and_then(s),
                run_id: run.get("id").and_then(|n| n.as_u64()),
            };
        }
    }
    Event::Other
}

/// Reads `GITHUB_EVENT_PATH` (absent or unreadable: [`Event::Other`]).
pub fn event_from_env() -> Event {
    let Some(path) = std::env::var_os("GITHUB_EVENT_PATH") else {
        return Event::Other;
    };
    read_event(Path::new(&path)).unwrap_or(Event::Other)
}

/// Like [`event_from_env`], but where `GITHUB_EVENT_NAME` says the run is for
/// a pull request (or a `workflow_run`), an event file that is missing,
/// unreadable or lacks the PR is an error rather than "not a pull request".
pub fn event_from_env_checked() -> Result<Event, crate::GithubError> {
    let name = std::env::var("GITHUB_EVENT_NAME").unwrap_or_default();
    let needs = matches!(name.as_str(), "pull_request" | "pull_request_target" | "workflow_run");
    let path = std::env::var_os("GITHUB_EVENT_PATH");
    if !needs {
        return Ok(event_from_env());
    }
    let bad = |what: String| {
        crate::GithubError::Config {
        message: format!("GITHUB_EVENT_NAME is {name} but {what}"),
        hint: "GitHub sets GITHUB_EVENT_PATH to the event's JSON payload; outside Actions, unset GITHUB_EVENT_NAME or pass --pr".into(),
    }
    };
    let Some(path) = path else {
        return Err(bad("GITHUB_EVENT_PATH is not set".into()));
    };
    let path = Path::new(&path);
    let text = std::fs::read_to_string(path)
        .map_err(|e| bad(format!("the event file {} cannot be read: {e}", path.display())))?;
    let json: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| bad(format!("the event file {} is not valid JSON: {e}", path.display())))?;
    match parse_event(&json) {
        Event::Other => Err(bad(format!(
            "the event file {} holds no {name} payload",
            path.display()
        ))),
        e => Ok(e),
    }
}

/// The pull request a merge queue's `merge_group` event was started for,
/// from the group's branch: GitHub's webhooks description gives
/// `merge_group.head_ref` as "the full ref of the merge group", and the
/// merge queue names that branch `gh-readonly-queue/<base>/pr-<N>-<head
/// SHA>` (docs.github.com, "Managing a merge queue": "the temporary branch
/// ... gh-readonly-queue/{base_branch}"). The base may hold `/`, so the PR
/// is the last segment. `Err` with the reason when the payload is a merge
/// group whose branch names no pull request.
pub fn queued_pull_request(json: &serde_json::Value) -> Result<u64, String> {
    let head_ref = json
        .pointer("/merge_group/head_ref")
        .and_then(|v| v.as_str())
        .ok_or("the merge_group payload has no merge_group.head_ref")?;
    let branch = head_ref.strip_prefix("refs/heads/").unwrap_or(head_ref);
    let last = branch
        .strip_prefix("gh-readonly-queue/")
        .and_then(|rest| rest.rsplit_once('/'))
        .map(|(_, last)| last)
        .ok_or_else(|| format!("the merge group's branch `{head_ref}` is not gh-readonly-queue/<base>/pr-<N>-<sha>"))?;
    let pr = last
        .strip_prefix("pr-")
        .and_then(|rest| rest.split_once('-'))
        .filter(|(n, sha)| {
            !n.is_empty()
                && n.bytes().all(|b| b.is_ascii_digit())
                && !sha.is_empty()
                && sha.bytes().all(|b| b.is_ascii_hexdigit())
        })
        .and_then(|(n, _)| n.parse::<u64>().ok())
        .filter(|n| *n > 0);
    pr.ok_or_else(|| format!("the merge group's branch `{head_ref}` names no pull request (pr-<N>-<sha>)"))
}

/// Where `GITHUB_EVENT_NAME` is `merge_group`: the queued pull request
/// ([`queued_pull_request`]), or why it cannot be told; `None` for any
/// other event.
pub fn queued_pull_request_from_env() -> Option<Result<u64, String>> {
    if std::env::var("GITHUB_EVENT_NAME").ok()?.as_str() != "merge_group" {
        return None;
    }
    let Some(path) = std::env::var_os("GITHUB_EVENT_PATH") else {
        return Some(Err("GITHUB_EVENT_PATH is not set".into()));
    };
    let json = std::fs::read_to_string(&path)
        .map_err(|e| format!("the event file cannot be read: {e}"))
        .and_then(|t| {
            serde_json::from_str::<serde_json::Value>(&t).map_err(|e| format!("the event file is not JSON: {e}"))
        });
    Some(json.and_then(|j| queued_pull_request(&j)))
}

pub fn read_event(path: &Path) -> Option<Event> {
    let text = std::fs::read_to_string(path).ok()?;
    let json: serde_json::Value = serde_json::from_str(&text).ok()?;
    Some(parse_event(&json))
}

/// The comment's links in GitHub Actions: each budget's line in `spec` at
/// the commit under review (a PR's head, else `GITHUB_SHA`) and the
/// measuring run. Every part is checked before it goes into a URL; outside
/// Actions, or with anything unexpected, there is simply no link.
pub fn links(event: &Event, spec: &str) -> gate_render::markdown::Links {
    use gate_render::markdown::Links;
    if !in_actions() {
        return Links::default();
    }
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
    // GitHub Enterprise Server has its own host; github.com otherwise.
    let server = env("GITHUB_SERVER_URL").unwrap_or_else(|| "https://github.com".into());
    let server = server.trim_end_matches('/');
    let server_ok = server.starts_with("https://")
        && server[8..]
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-.:".contains(c));
    let Some(repo) = Repo::from_env().ok().filter(|_| server_ok) else {
        return Links::default();
    };
    let sha = match event {
        Event::PullRequest(pr) => Some(pr.head_sha.clone()),
        Event::WorkflowRun { head_sha, .. } => Some(head_sha.clone()),
        Event::Other => env("GITHUB_SHA"),
    }
    .and_then(|s| check_sha(&s).ok());
    let run_id = match event {
        Event::WorkflowRun { run_id, .. } => *run_id,
        _ => env("GITHUB_RUN_ID").and_then(|id| id.trim().parse::<u64>().ok()),
    };
    Links {
        blob_base: sha.map(|sha| format!("{server}/{repo}/blob/{sha}/")),
        spec_path: repo_path(spec, env("GITHUB_WORKSPACE").as_deref()),
        run: run_id.map(|id| format!("{server}/{repo}/actions/runs/{id}")),
    }
}

/// The spec's path inside the repository, as URL path segments: relative
/// (as the spec names it) or under `workspace`; plain names only.
fn repo_path(spec: &str, workspace: Option<&str>) -> Option<String> {
    use std::path::Component;
    let path = Path::new(spec);
    let rel = if path.is_absolute() {
        path.strip_prefix(workspace?).ok()?
    } else {
        path
    };
    let mut parts = Vec::new();
    for c in rel.components() {
        match c {
            Component::CurDir => {}
            Component::Normal(p) => {
                let p = p.to_str()?;
                if !p.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)) {
                    return None;
                }
                parts.push(p);
            }
            _ => return None,
        }
    }
    (!parts.is_empty()).then(|| parts.join("/"))
}

/// Whether this process runs inside GitHub Actions.
pub fn in_actions() -> bool {
    std::env::var("GITHUB_ACTIONS").is_ok_and(|v| v == "true")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_paths_become_repository_paths_or_nothing() {
        assert_eq!(repo_path("budgets.yaml", None).as_deref(), Some("budgets.yaml"));
        assert_eq!(repo_path("./ml/budgets.yaml", None).as_deref(), Some("ml/budgets.yaml"));
        assert_eq!(repo_path("/w/r/ml/b.yaml", Some("/w/r")).as_deref(), Some("ml/b.yaml"));
        assert_eq!(repo_path("/etc/b.yaml", Some("/w/r")), None);
        assert_eq!(repo_path("../b.yaml", None), None);
        assert_eq!(repo_path("a b.yaml", None), None);
        assert_eq!(repo_path("x?.yaml", None), None);
    }

    #[test]
    fn repo_names_are_checked() {
        assert!(Repo::parse("octo/repo").is_ok());
        assert!(Repo::parse("octo/re.po-1_x").is_ok());
        for bad in ["octo", "octo/", "/repo", "o/r/x", "o/..", "o/r?x=1", "o/r#", "o /r"] {
            assert!(Repo::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn shas_and_branches_are_checked() {
        assert_eq!(check_sha(&"A".repeat(40)).unwrap(), "a".repeat(40));
        assert!(check_sha("main").is_err());
        assert!(check_sha("abc/../x").is_err());
        assert!(check_branch("gate-baselines").is_ok());
        assert!(check_branch("a/../b").is_err());
        assert!(check_branch("x&ref=main").is_err());
    }

    #[test]
    fn a_merge_groups_branch_names_the_queued_pull_request() {
        let group = |head_ref: &str| serde_json::json!({ "action": "checks_requested", "merge_group": { "head_ref": head_ref } });
        let sha = "ec26c3e57ca3a959ca5aad62de7213c562f8c821";
        assert_eq!(
            queued_pull_request(&group(&format!("refs/heads/gh-readonly-queue/main/pr-42-{sha}"))),
            Ok(42)
        );
        // A base branch with a slash.
        assert_eq!(
            queued_pull_request(&group(&format!("refs/heads/gh-readonly-queue/release/1.x/pr-7-{sha}"))),
            Ok(7)
        );
        for bad in [
            "refs/heads/main".to_string(),
            format!("refs/heads/gh-readonly-queue/main/pr--{sha}"),
            format!("refs/heads/gh-readonly-queue/main/pr-x1-{sha}"),
            "refs/heads/gh-readonly-queue/main/pr-3-".to_string(),
            format!("refs/heads/gh-readonly-queue/pr-3-{sha}"),
        ] {
            assert!(queued_pull_request(&group(&bad)).is_err(), "{bad}");
        }
        assert!(queued_pull_request(&serde_json::json!({})).is_err());
    }

    #[test]
    fn events_are_parsed() {
        let pr = serde_json::json!({
            "number": 3,
            "pull_request": {
                "number": 3,
                "base": { "ref": "main", "sha": "aaa", "repo": { "full_name": "o/r" } },
                "head": { "sha": "bbb", "repo": { "full_name": "fork/r" } }
            }
        });
        match parse_event(&pr) {
            Event::PullRequest(p) => {
                assert_eq!((p.number, p.base_sha.as_str(), p.head_sha.as_str()), (3, "aaa", "bbb"));
                assert!(p.is_fork());
            }
            e => panic!("{e:?}"),
        }
        let run = serde_json::json!({ "workflow_run": { "head_sha": "ccc", "event": "pull_request" } });
        assert_eq!(
            parse_event(&run),
            Event::WorkflowRun {
                head_sha: "ccc".into(),
                event: "pull_request".into(),
                head_repo: None,
                head_branch: None,
                run_id: None,
            }
        );
        assert_eq!(
            parse_event(&serde_json::json!({ "ref": "refs/heads/main" })),
            Event::Other
        );
    }
}
