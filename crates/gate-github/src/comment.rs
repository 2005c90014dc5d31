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
    /// The comments could not be read to their end (more than `pages`
    /// pages, or a `Link` that loops): whether ours is among the unread
    /// ones is unknown, so nothing was posted (a create would be a
    /// duplicate on every run).
    Unread {
        pages: usize,
    },
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
    /// The login gate's comments are written as, when the workflow says it
    /// (`--author`): see [`identity`].
    pub author: Option<&'a str>,
}

fn normalize(s: &str) -> String {
    s.replace("\r\n", "\n").trim().to_string()
}

/// The marked comments of a pull request: gate's own (by `me`), the oldest
/// first, and the logins of anyone else whose comments carry the marker.
struct Marked {
    ours: Option<Comment>,
    others: Vec<String>,
    /// Every page was read: a comment not found is not there.
    complete: bool,
}

/// Finds this gate's comment, paging through all comments. Only a comment
/// written by `me` is ours: anyone can paste the marker into theirs, a
/// person or another app alike, and such a comment is never edited nor
/// trusted. Of several of ours, the oldest is kept current.
async fn find(client: &Client, repo: &Repo, pr: u64, id: &str, me: &str) -> Result<Marked, GithubError> {
    let mark = marker(id);
    let route = format!("/repos/{repo}/issues/{pr}/comments");
    let mut found = Vec::new();
    let complete = client
        .each_item(Call::ReadComments, &route, PER_PAGE, MAX_PAGES, |c: Comment| {
            if c.body.as_deref().is_some_and(|b| b.trim_start().starts_with(&mark)) {
                found.push(c);
            }
        })
        .await?;
    let mut marked = Marked {
        ours: None,
        others: Vec::new(),
        complete,
    };
    for c in found {
        let login = c.user.as_ref().map(|u| u.login.clone()).unwrap_or_default();
        if login.eq_ignore_ascii_case(me) {
            marked.ours.get_or_insert(c);
        } else if !marked.others.contains(&login) {
            marked.others.push(login);
        }
    }
    Ok(marked)
}

/// The login gate's comments are written as, and how gate knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Identity {
    /// Given by the workflow (`--author`, `GATE_COMMENT_AUTHOR`): for a
    /// GitHub App, `<app-slug>[bot]`.
    Given(String),
    /// What `GET /user` answered (a personal or OAuth token).
    User(String),
    /// `GET /user` refused the token: an installation token, taken to be
    /// the GITHUB_TOKEN of Actions, whose comments are `github-actions[bot]`'s.
    /// A GitHub App's own installation token is refused the same way
    /// (403 "Resource not accessible by integration", as in
    /// actions/create-github-app-token#258) and writes as
    /// `<app-slug>[bot]`: the guess is wrong for it, which the first
    /// comment it creates shows (see [`upsert`]).
    Assumed(String),
}

impl Identity {
    /// The login.
    pub fn login(&self) -> &str {
        match self {
            Identity::Given(l) | Identity::User(l) | Identity::Assumed(l) => l,
        }
    }
}

/// The GITHUB_TOKEN's comment author.
pub const ACTIONS_BOT: &str = "github-actions[bot]";

/// Checks a login given for `--author`: a user's login (letters, digits and
/// `-`) or an app's (`<app-slug>[bot]`).
pub fn check_author(login: &str) -> Result<String, GithubError> {
    let login = login.trim();
    let name = login.strip_suffix("[bot]").unwrap_or(login);
    let ok = !name.is_empty()
        && name.len() <= 100
        && !name.starts_with('-')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
    if ok {
        Ok(login.to_string())
    } else {
        Err(GithubError::Config {
            message: format!("`{login}` is not a GitHub login (--author, GATE_COMMENT_AUTHOR)"),
            hint: "give the login gate's comments are written as: `<app-slug>[bot]` for a GitHub App's token \
                   (e.g. `my-gate-app[bot]`), `github-actions[bot]` for the GITHUB_TOKEN"
                .into(),
        })
    }
}

/// The login the token writes comments as: `given` when the workflow says
/// it, else what `GET /user` answers (a user's token), else
/// `github-actions[bot]` (docs.github.com, "Automatic token
/// authentication": the GITHUB_TOKEN is an installation token of the
/// GitHub Actions app, and `GET /user` refuses installation tokens).
pub async fn identity(client: &Client, given: Option<&str>) -> Identity {
    #[derive(Deserialize)]
    struct User {
        login: String,
    }
    if let Some(g) = given {
        return Identity::Given(g.to_string());
    }
    match client.get::<User>(Call::ReadComments, "/user").await {
        Ok(u) => Identity::User(u.login),
        Err(_) => Identity::Assumed(ACTIONS_BOT.into()),
    }
}

/// Creates or updates the comment. Never creates a duplicate: a create whose
/// outcome is unknown (5xx, timeout) is followed by a fresh look. Only a
/// marked comment by the token's [`identity`] is edited; when GitHub says a
/// created comment is by someone else (an App's token taken for the
/// GITHUB_TOKEN, a wrong `--author`), the log says which login to pass, as
/// the next run would otherwise post another.
pub async fn upsert(client: &Client, req: &Request<'_>) -> Result<Upsert, GithubError> {
    let full = with_marker(req.id, req.body);
    let repo = req.repo;
    const ROUNDS: u32 = 3;
    let mut last_err = None;
    let mut skip_update = false;
    let who = identity(client, req.author).await;
    let me = who.login();
    let mut noted = false;
    for _ in 0..ROUNDS {
        let marked = find(client, repo, req.pr, req.id, me).await?;
        if marked.ours.is_none() && !marked.others.is_empty() && !noted {
            noted = true;
            note_others(&who, &marked.others);
        }
        match marked.ours {
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
                // Comments are listed oldest first: ours, if it is among
                // the unread ones, is not found, and a create duplicates it.
                if !marked.complete {
                    return Ok(Upsert::Unread { pages: MAX_PAGES });
                }
                match create(client, req, &full).await? {
                    Create::Made(u, author) => {
                        if let Some(a) = author.filter(|a| !a.eq_ignore_ascii_case(me)) {
                            warn_author(&who, &a);
                        }
                        return Ok(u);
                    }
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

/// Says that marked comments by others were left alone, and, where gate
/// only guessed its identity and one of them is an app's, which login to pass.
fn note_others(who: &Identity, others: &[String]) {
    let names: Vec<String> = others.iter().map(|o| format!("@{o}")).collect();
    crate::log(format_args!(
        "note: {} comment(s) carry this gate's marker but are by {}, not by @{} (gate's login): left alone",
        names.len(),
        names.join(", "),
        who.login()
    ));
    if let (Identity::Assumed(_), Some(app)) = (who, others.iter().find(|o| o.ends_with("[bot]"))) {
        crate::log(format_args!(
            "hint: if @{app} is the GitHub App whose token gate uses, pass `--author {app}` \
             (GATE_COMMENT_AUTHOR) so gate keeps that comment current"
        ));
    }
}

/// Says that GitHub wrote the new comment as `author`, not as gate's login,
/// so the next run will not find it.
fn warn_author(who: &Identity, author: &str) {
    let how = match who {
        Identity::Given(_) => "given by --author / GATE_COMMENT_AUTHOR",
        Identity::User(_) => "from GET /user",
        Identity::Assumed(_) => "assumed: GET /user refused the token, as it refuses every installation token",
    };
    crate::log(format_args!(
        "warning: GitHub wrote the comment as @{author}, not as @{} ({how}): the next run will not find it and will post another",
        who.login()
    ));
    crate::log(format_args!(
        "hint: pass `--author {author}` to `gate comment` (or GATE_COMMENT_AUTHOR={author}; the action's `comment-author` input)"
    ));
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
    /// Made, by the login GitHub names as its author.
    Made(Upsert, Option<String>),
    Unknown(GithubError),
}

/// Posts `full` as a new comment on the pull request.
async fn create(client: &Client, req: &Request<'_>, full: &str) -> Result<Create, GithubError> {
    let path = format!("/repos/{}/issues/{}/comments", req.repo, req.pr);
    let body = serde_json::json!({ "body": full });
    match client.post::<Comment>(Call::WriteComment, &path, &body).await {
        Ok(c) => Ok(Create::Made(
            Upsert::Created {
                id: c.id,
                url: c.html_url,
            },
            c.user.map(|u| u.login),
        )),
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
