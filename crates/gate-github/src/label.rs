//! The acknowledge label (`gate:accept-regression`): whether it is on a pull
//! request, who added it and when, and whether they may write to the
//! repository. The labels say what is on now, the issue events who added
//! it, the collaborators API what that person may do.

use serde::Deserialize;

use super::client::Client;
use super::context::{Event, Repo};
use super::error::{Call, GithubError};
use super::Settings;
use gate_contract::report::{AckInput, Acknowledgement};

/// The label `gate check` looks for unless `--acknowledge-label` names another.
pub const DEFAULT_LABEL: &str = "gate:accept-regression";
/// Events per page (GitHub's maximum).
pub const PER_PAGE: usize = 100;
/// Pages read at most (3,000 events), so a very busy pull request costs a
/// bounded number of requests; past that the label is not confirmed.
pub const MAX_PAGES: usize = 30;

#[derive(Debug, Deserialize)]
struct Actor {
    login: String,
    /// `User`, `Bot` or `Organization`.
    #[serde(rename = "type", default)]
    kind: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Label {
    name: String,
}

#[derive(Debug, Deserialize)]
struct IssueEvent {
    event: String,
    actor: Option<Actor>,
    created_at: Option<String>,
    label: Option<Label>,
}

/// What GitHub says about the acknowledge label on a pull request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finding {
    /// On the pull request now, last added by a person who may write to
    /// the repository: an acknowledgement.
    Confirmed(Acknowledgement),
    /// Not on the pull request now.
    Absent,
    /// On the pull request, but what GitHub says does not make it an
    /// approval; the reason, for people.
    Unconfirmed(String),
}

/// The label as it now stands on pull request `pr`, three ways, all of
/// which must agree: the pull request's labels now say it is on; the events
/// (oldest first, every page read) end, for it, with a `labeled` one, which
/// says who added it and when; and that person is no bot and may write to
/// the repository (a triage role may label a pull request too, and a
/// workflow's token labels as `github-actions[bot]`).
pub async fn find(client: &Client, repo: &Repo, pr: u64, label: &str) -> Result<Finding, GithubError> {
    // docs.github.com, "REST API endpoints for labels": "List labels for an
    // issue", GET /repos/{owner}/{repo}/issues/{issue_number}/labels.
    let mut on = false;
    let route = format!("/repos/{repo}/issues/{pr}/labels");
    let all_labels = client
        .each_item(Call::ReadLabels, &route, PER_PAGE, MAX_PAGES, |l: Label| {
            on |= l.name == label;
        })
        .await?;
    if !on {
        return Ok(if all_labels {
            Finding::Absent
        } else {
            Finding::Unconfirmed("the pull request has more labels than gate reads".into())
        });
    }
    let mut last: Option<IssueEvent> = None;
    let route = format!("/repos/{repo}/issues/{pr}/events");
    let all_events = client
        .each_item(Call::ReadLabels, &route, PER_PAGE, MAX_PAGES, |e: IssueEvent| {
            let ours = e.label.as_ref().is_some_and(|l| l.name == label);
            if ours && (e.event == "labeled" || e.event == "unlabeled") {
                last = Some(e);
            }
        })
        .await?;
    // A later page could remove the label and add it again as someone else.
    if !all_events {
        return Ok(Finding::Unconfirmed(format!(
            "the pull request has more than {} events and gate reads only the first {}, \
             so who added the label last is not known",
            PER_PAGE * MAX_PAGES,
            PER_PAGE * MAX_PAGES
        )));
    }
    let Some(e) = last.filter(|e| e.event == "labeled") else {
        return Ok(Finding::Unconfirmed(
            "the label is on the pull request, but its events do not say who added it".into(),
        ));
    };
    let at = e.created_at.unwrap_or_default();
    let Some(actor) = e.actor else {
        return Ok(Finding::Unconfirmed(format!(
            "the label was added at {at} by a deleted account"
        )));
    };
    let by = actor.login;
    if actor.kind.as_deref() == Some("Bot") || by.ends_with("[bot]") {
        return Ok(Finding::Unconfirmed(format!(
            "the label was added by @{by} at {at}, a bot: only a person who may write to the repository acknowledges"
        )));
    }
    // A login is letters, digits and single hyphens; anything else would
    // change the path below.
    if by.is_empty() || !by.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
        return Ok(Finding::Unconfirmed(format!(
            "the label's events name an actor that is no GitHub login ({by:?})"
        )));
    }
    let permission = permission(client, repo, &by).await?;
    if !WRITERS.contains(&permission.as_str()) {
        return Ok(Finding::Unconfirmed(format!(
            "the label was added by @{by} at {at}, whose permission on {repo} is `{permission}`: \
             an acknowledgement needs write, maintain or admin"
        )));
    }
    Ok(Finding::Confirmed(Acknowledgement {
        label: label.to_string(),
        by,
        at,
    }))
}

/// The legacy permissions that may write: GitHub maps the maintain role to
/// `write` and triage to `read` in `permission` (docs.github.com, "REST API
/// endpoints for collaborators": "Get repository permissions for a user").
const WRITERS: [&str; 2] = ["admin", "write"];

/// `login`'s permission on `repo` (`admin`, `write`, `read` or `none`); a
/// 404 (no such user, or none of the repository's) is `none`.
async fn permission(client: &Client, repo: &Repo, login: &str) -> Result<String, GithubError> {
    #[derive(Deserialize)]
    struct Permission {
        permission: String,
    }
    let route = format!("/repos/{repo}/collaborators/{login}/permission");
    Ok(client
        .get_opt::<Permission>(Call::ReadPermission, &route)
        .await?
        .map_or_else(|| "none".into(), |p| p.permission))
}

/// What the verdict is told about `label` in this run: asked only in a
/// pull request run and not for an empty label. Under `--strict` it is
/// still asked so the verdict can say the label was ignored. Any failure to
/// ask is [`AckInput::Unverified`] with the reason: regressions then stay
/// regressions, never a silent pass.
pub fn from_env(label: &str) -> AckInput {
    let label = label.trim();
    if label.is_empty() {
        return AckInput::NotAsked;
    }
    let unverified = |reason: String| AckInput::Unverified {
        label: label.to_string(),
        reason,
    };
    // A pull request's run, or a merge queue's run for the queued pull
    // request (its label is read there too, else an acknowledged
    // regression fails again on the queued commit and never merges).
    let number = match super::context::event_from_env() {
        Event::PullRequest(pr) => pr.number,
        _ => match super::context::queued_pull_request_from_env() {
            Some(Ok(n)) => n,
            Some(Err(reason)) => return unverified(format!("in a merge queue: {reason}")),
            None => return AckInput::NotAsked,
        },
    };
    let repo = match Repo::from_env() {
        Ok(r) => r,
        Err(e) => return unverified(e.to_string()),
    };
    let settings = Settings::from_env();
    if settings.token.is_none() {
        return unverified("GITHUB_TOKEN is not set".into());
    }
    super::block_on(async {
        let client = match Client::new(settings) {
            Ok(c) => c,
            Err(e) => return unverified(e.to_string()),
        };
        match find(&client, &repo, number, label).await {
            Ok(Finding::Confirmed(a)) => AckInput::Present(a),
            Ok(Finding::Absent) => AckInput::Absent { label: label.into() },
            Ok(Finding::Unconfirmed(reason)) => unverified(reason),
            Err(e) => unverified(format!("{e} (hint: {})", e.hint())),
        }
    })
}
