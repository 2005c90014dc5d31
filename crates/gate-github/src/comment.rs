//! One pull-request comment per gate id, found again by a hidden marker
//! (paging through every comment), updated in place, created if absent.

use serde::Deserialize;

use super::client::{Client, Method};
use super::context::Repo;
use super::error::{Call, GithubError};

/// Comments per page (GitHub's maximum).
pub const PER_PAGE: usize = 100;
/// Pages read at most (30,000 comments).
pub const MAX_PAGES: usize = 300;

/// The gate id as it goes into the marker: letters, digits, `-_./`, at most 64.
pub fn clean_id(id: &str) -> String {
    let s: String = id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_./".contains(c) {
                c
            } else {
                '-'
            }
        })
        .take(64)
        .collect();
    if s.is_empty() {
        "gate".into()
    } else {
        s
    }
}

/// The hidden marker, e.g. `<!-- gate:id=budgets.yaml -->`.
pub fn marker(id: &str) -> String {
    format!("<!-- gate:id={} -->", clean_id(id))
}

/// The full comment: the marker line, then the rendered body.
pub fn with_marker(id: &str, body: &str) -> String {
    format!("{}\n{body}", marker(id))
}

#[derive(Debug, Deserialize)]
struct User {
    login: String,
}

#[derive(Debug, Deserialize)]
struct Comment {
    id: u64,
    body: Option<String>,
    user: Option<User>,
    html_url: Option<String>,
}

/// What the upsert did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Upsert {
    Created {
        id: u64,
        url: Option<String>,
    },
    Updated {
        id: u64,
        url: Option<String>,
    },
    /// The comment already says exactly this.
    Unchanged {
        id: u64,
        url: Option<String>,
    },
    /// Quiet mode and nothing worth saying: no comment posted.
    Skipped,
}

pub struct Request<'a> {
    pub repo: &'a Repo,
    pub pr: u64,
    pub id: &'a str,
    /// The rendered body, without the marker.
    pub body: &'a str,
    /// `--quiet`: create a comment only when `noteworthy`.
    pub quiet: bool,
    /// Something failed or changed against the baseline.
    pub noteworthy: bool,
}

fn normalize(s: &str) -> String {
    s.replace("\r\n", "\n").trim().to_string()
}

/// Finds this gate's comment, paging through all comments.
async fn find(client: &Client, repo: &Repo, pr: u64, id: &str, me: &str) -> Result<Option<Comment>, GithubError> {
    let mark = marker(id);
    let route = format!("/repos/{repo}/issues/{pr}/comments");
    let mut found = Vec::new();
    client
        .each_item(Call::ReadComments, &route, PER_PAGE, MAX_PAGES, |c: Comment| {
            if c.body.as_deref().is_some_and(|b| b.trim_start().starts_with(&mark)) {
                found.push(c);
            }
        })
        .await?;
    // Only the token's own comments: anyone can paste the marker into theirs.
    Ok(found
        .into_iter()
        .find(|c| c.user.as_ref().is_some_and(|u| u.login.eq_ignore_ascii_case(me))))
}

/// The login the token writes comments as. A user token answers `GET /user`;
/// the GITHUB_TOKEN of Actions is an installation token, which `GET /user`
/// refuses, and its comments are authored by the `github-actions[bot]` app
/// (docs.github.com, "Automatic token authentication").
pub async fn identity(client: &Client) -> String {
    #[derive(Deserialize)]
    struct User {
        login: String,
    }
    match client.get::<User>(Call::ReadComments, "/user").await {
        Ok(u) => u.login,
        Err(_) => "github-actions[bot]".into(),
    }
}

/// Creates or updates the comment. Never creates a duplicate: a create whose
/// outcome is unknown (5xx, timeout) is followed by a fresh look.
pub async fn upsert(client: &Client, req: &Request<'_>) -> Result<Upsert, GithubError> {
    let full = with_marker(req.id, req.body);
    let repo = req.repo;
    const ROUNDS: u32 = 3;
    let mut last_err = None;
    let mut skip_update = false;
    let me = identity(client).await;
    for _ in 0..ROUNDS {
        let existing = find(client, repo, req.pr, req.id, &me).await?;
        match existing {
            Some(c) if !skip_update => match update(client, repo, c, &full).await? {
                Update::Done(u) => return Ok(u),
                // Deleted meanwhile: look again.
                Update::Gone => continue,
                // Someone else's comment carrying our marker: post our own.
                Update::NotOurs => skip_update = true,
            },
            _ => {
                if req.quiet && !req.noteworthy {
                    return Ok(Upsert::Skipped);
                }
                match create(client, req, &full).await? {
                    Create::Made(u) => return Ok(u),
                    Create::Unknown(e) => last_err = Some(e),
                }
                // The create may have happened: wait, then look before trying again.
                tokio::time::sleep(client.settings().backoff).await;
            }
        }
    }
    Err(last_err.unwrap_or(GithubError::Conflict {
        path: format!("/repos/{repo}/issues/{}/comments", req.pr),
        attempts: ROUNDS,
    }))
}

/// What an update of the existing comment came to.
enum Update {
    Done(Upsert),
    /// Deleted meanwhile (404).
    Gone,
    /// Refused (403) on a comment a person wrote, not a bot.
    NotOurs,
}

/// Updates comment `c` to `full`, unless it already says that.
async fn update(client: &Client, repo: &Repo, c: Comment, full: &str) -> Result<Update, GithubError> {
    if normalize(c.body.as_deref().unwrap_or_default()) == normalize(full) {
        return Ok(Update::Done(Upsert::Unchanged {
            id: c.id,
            url: c.html_url,
        }));
    }
    let path = format!("/repos/{repo}/issues/comments/{}", c.id);
    let body = serde_json::json!({ "body": full });
    match client.write(Call::WriteComment, Method::Patch, &path, &body).await {
        // An edit keeps the comment's address.
        Ok(()) => Ok(Update::Done(Upsert::Updated {
            id: c.id,
            url: c.html_url,
        })),
        Err(e) => match e.status() {
            Some(404) => Ok(Update::Gone),
            Some(403) if c.user.as_ref().is_some_and(|u| !u.login.ends_with("[bot]")) => Ok(Update::NotOurs),
            _ => Err(e),
        },
    }
}

/// What a create came to: made, or unknown (a 5xx, 429, timeout or lost
/// connection: it may have happened) with the error.
enum Create {
    Made(Upsert),
    Unknown(GithubError),
}

/// Posts `full` as a new comment on the pull request.
async fn create(client: &Client, req: &Request<'_>, full: &str) -> Result<Create, GithubError> {
    let path = format!("/repos/{}/issues/{}/comments", req.repo, req.pr);
    let body = serde_json::json!({ "body": full });
    match client.post::<Comment>(Call::WriteComment, &path, &body).await {
        Ok(c) => Ok(Create::Made(Upsert::Created {
            id: c.id,
            url: c.html_url,
        })),
        Err(e @ (GithubError::Timeout { .. } | GithubError::Transport { .. })) => Ok(Create::Unknown(e)),
        Err(e) if e.status().is_some_and(|s| s >= 500 || s == 429) => Ok(Create::Unknown(e)),
        Err(e) => Err(e),
    }
}

/// What a `workflow_run` says about the commit it measured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunHead {
    pub sha: String,
    /// `owner/name` of the head repository, where the event names it.
    pub repo: Option<String>,
    pub branch: Option<String>,
}

/// The commit `pr`'s head is at now.
pub async fn pr_head(client: &Client, repo: &Repo, pr: u64) -> Result<String, GithubError> {
    #[derive(Deserialize)]
    struct Head {
        sha: String,
    }
    #[derive(Deserialize)]
    struct Pull {
        head: Head,
    }
    let pull: Pull = client.get(Call::ReadPull, &format!("/repos/{repo}/pulls/{pr}")).await?;
    Ok(pull.head.sha)
}

/// Checks that `pr`'s head is the run's commit, repository and branch (a
/// `workflow_run` job must not be steered by a forged PR number inside an
/// artifact, nor by another PR at the same commit).
pub async fn verify_pr_head(client: &Client, repo: &Repo, pr: u64, head: &RunHead) -> Result<(), GithubError> {
    #[derive(Deserialize)]
    struct HeadRepo {
        full_name: String,
    }
    #[derive(Deserialize)]
    struct Head {
        sha: String,
        #[serde(rename = "ref", default)]
        branch: Option<String>,
        #[serde(default)]
        repo: Option<HeadRepo>,
    }
    #[derive(Deserialize)]
    struct Pull {
        head: Head,
    }
    let path = format!("/repos/{repo}/pulls/{pr}");
    let pull: Pull = client.get(Call::ReadPull, &path).await?;
    let refuse = |what: String| GithubError::Refused {
        message: format!("{what}; not commenting"),
        hint: "the PR moved on (a newer run will comment), or the artifact's pr.json does not belong to this run"
            .into(),
    };
    if !pull.head.sha.eq_ignore_ascii_case(&head.sha) {
        return Err(refuse(format!(
            "pull request #{pr} is at {} but the measured run was for {}",
            pull.head.sha, head.sha
        )));
    }
    if let Some(want) = &head.repo {
        let got = pull.head.repo.as_ref().map(|r| r.full_name.as_str());
        if !got.is_some_and(|g| g.eq_ignore_ascii_case(want)) {
            return Err(refuse(format!(
                "pull request #{pr} comes from {} but the measured run was for {want}",
                got.unwrap_or("a deleted repository")
            )));
        }
    }
    if let Some(want) = &head.branch {
        if pull.head.branch.as_deref() != Some(want.as_str()) {
            return Err(refuse(format!(
                "pull request #{pr} is from branch {} but the measured run was for {want}",
                pull.head.branch.as_deref().unwrap_or("(none)")
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_marker_carries_a_clean_id() {
        assert_eq!(marker("budgets.yaml"), "<!-- gate:id=budgets.yaml -->");
        assert_eq!(marker("a b-->c"), "<!-- gate:id=a-b---c -->");
        assert_eq!(marker(""), "<!-- gate:id=gate -->");
        assert_eq!(clean_id(&"x".repeat(500)).len(), 64);
        assert!(with_marker("gpu", "body").starts_with("<!-- gate:id=gpu -->\nbody"));
    }
}
