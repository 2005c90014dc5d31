//! The acknowledge label (`gate:accept-regression`): whether it is on a pull
//! request, who added it and when, from the issue events API. The events
//! say who added a label; the labels themselves do not.

use serde::Deserialize;

use super::client::Client;
use super::context::{Event, Repo};
use super::error::{Call, GithubError};
use super::Settings;
use crate::report::{AckInput, Acknowledgement};

/// The label `gate check` looks for unless `--acknowledge-label` names another.
pub const DEFAULT_LABEL: &str = "gate:accept-regression";
/// Events per page (GitHub's maximum).
pub const PER_PAGE: usize = 100;
/// Pages read at most (3,000 events), so a very busy pull request costs a
/// bounded number of requests; its last events past that are not seen.
pub const MAX_PAGES: usize = 30;

#[derive(Debug, Deserialize)]
struct Actor {
    login: String,
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

/// The label as it now stands on pull request `pr`: the events come oldest
/// first, so the last `labeled` or `unlabeled` event for it says whether it
/// is on, and a `labeled` one says who added it and when.
pub async fn find(client: &Client, repo: &Repo, pr: u64, label: &str) -> Result<Option<Acknowledgement>, GithubError> {
    let mut last: Option<IssueEvent> = None;
    let route = format!("/repos/{repo}/issues/{pr}/events");
    client
        .each_item(Call::ReadLabels, &route, PER_PAGE, MAX_PAGES, |e: IssueEvent| {
            let ours = e.label.as_ref().is_some_and(|l| l.name == label);
            if ours && (e.event == "labeled" || e.event == "unlabeled") {
                last = Some(e);
            }
        })
        .await?;
    Ok(last.filter(|e| e.event == "labeled").map(|e| Acknowledgement {
        label: label.to_string(),
        by: e.actor.map_or_else(|| "ghost".into(), |a| a.login),
        at: e.created_at.unwrap_or_default(),
    }))
}

/// What the verdict is told about `label` in this run: asked only in a
/// pull request run and not for an empty label. Under `--strict` it is
/// still asked so the verdict can say the label was ignored. Any failure to
/// ask is [`AckInput::Unverified`] with the reason: regressions then stay
/// regressions, never a silent pass.
pub fn from_env(label: &str) -> AckInput {
    let label = label.trim();
    let Event::PullRequest(pr) = super::context::event_from_env() else {
        return AckInput::NotAsked;
    };
    if label.is_empty() {
        return AckInput::NotAsked;
    }
    let unverified = |reason: String| AckInput::Unverified {
        label: label.to_string(),
        reason,
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
        match find(&client, &repo, pr.number, label).await {
            Ok(Some(a)) => AckInput::Present(a),
            Ok(None) => AckInput::Absent { label: label.into() },
            Err(e) => unverified(format!("{e} (hint: {})", e.hint())),
        }
    })
}
