//! Everything that talks to GitHub (the only module that uses the network):
//! the event context from the environment, the comment upsert, the baseline
//! store. Errors are [`GithubError`]s that say the fix; the token never
//! appears in any of them.
//!
//! No ML framework is in this crate's dependency tree. Internal to gate:
//! its API may change in any release.

pub mod checks;
pub mod client;
pub mod comment;
pub mod context;
pub mod error;
pub mod label;
pub mod store;

pub use client::{block_on, Client, Settings};
pub use context::{Event, PullRequest, Repo};
pub use error::{Call, GithubError};
pub use store::Known;

use gate_report::baseline::{Candidates, Outcome};

/// Where this crate's notes and warnings for the log go: stderr, or the
/// writer the command line sets with [`set_log`] (gate's own, which in
/// GitHub Actions keeps a name from a stored report from acting as a
/// workflow command).
static LOG: std::sync::OnceLock<fn(std::fmt::Arguments)> = std::sync::OnceLock::new();

/// Sends this crate's log lines (each ends without a newline) to `write`.
pub fn set_log(write: fn(std::fmt::Arguments)) {
    let _ = LOG.set(write);
}

/// Writes one log line.
pub(crate) fn log(line: std::fmt::Arguments) {
    match LOG.get() {
        Some(write) => write(line),
        None => eprintln!("{line}"),
    }
}

/// Where `--baseline auto` starts looking, and what it found: the nearest
/// report of each card the store holds, the run's own chosen once measured.
pub struct AutoBaseline {
    pub outcome: Candidates,
    /// Notes for the log (stderr): where the walk started, what failed.
    pub notes: Vec<String>,
    /// For a pull request whose baseline was found: where the comment's
    /// history is read from, by [`history`], once the verdict shows a
    /// budget that needs it. A run whose budgets all pass never asks.
    pub history: Option<HistorySource>,
}

/// What [`history`] needs: the store, each card's baseline commit, and what
/// the baseline's walk already learnt (the listing, the first parents), so
/// it asks GitHub only for the rest.
pub struct HistorySource {
    settings: Settings,
    repo: Repo,
    branch: String,
    /// (card, commit) of each card's baseline, nearest first.
    baselines: Vec<(String, String)>,
    known: store::Known,
}

/// The stored reports of the card of `baseline` (the one the run was
/// compared with) older than it, nearest first, at most `max` within
/// [`store::HISTORY_DEPTH`] first-parent commits, and notes for the log. A
/// network failure is a note: the history is shorter.
pub fn history(
    from: HistorySource,
    baseline: &gate_contract::report::Report,
    max: usize,
) -> (Vec<gate_contract::report::Report>, Vec<String>) {
    let card = store::card_of(&baseline.testbed);
    let Some((card, sha)) = from
        .baselines
        .iter()
        .find(|(c, _)| *c == card)
        .or(from.baselines.first())
        .cloned()
    else {
        return (Vec::new(), Vec::new());
    };
    if max == 0 {
        return (Vec::new(), Vec::new());
    }
    block_on(async move {
        let mut known = from.known;
        let client = match Client::new(from.settings) {
            Ok(c) => c,
            Err(e) => {
                return (
                    Vec::new(),
                    vec![format!("cannot read the history of the baseline store: {e}")],
                )
            }
        };
        let store = store::Store {
            client: &client,
            repo: &from.repo,
            branch: from.branch,
        };
        match store.older(&sha, &card, store::HISTORY_DEPTH, max, &mut known).await {
            Ok(older) => (older.into_iter().map(|(_, r)| r).collect(), Vec::new()),
            Err(e) => (
                Vec::new(),
                vec![format!("cannot read the history of the baseline store: {e}")],
            ),
        }
    })
}

/// The inputs of `--baseline auto`, read from the environment by the caller.
pub struct AutoInputs {
    pub settings: Settings,
    pub repo: Option<Repo>,
    pub event: Event,
    /// `GITHUB_SHA`: the commit under test.
    pub sha: Option<String>,
    pub branch: String,
    pub depth: usize,
}

impl AutoInputs {
    pub fn from_env(branch: &str, depth: usize) -> AutoInputs {
        AutoInputs {
            settings: Settings::from_env(),
            repo: Repo::from_env().ok(),
            event: context::event_from_env(),
            sha: std::env::var("GITHUB_SHA").ok().filter(|s| !s.trim().is_empty()),
            branch: branch.to_string(),
            depth,
        }
    }
}

/// The baseline under `--baseline auto`: for a pull request, the stored
/// report of the nearest first-parent ancestor of its merge-base on the
/// target branch; for a push, of the pushed commit's nearest ancestor.
/// Network errors become a missing baseline with the reason, never a crash.
pub fn auto_baseline(inputs: AutoInputs) -> AutoBaseline {
    let Some(repo) = inputs.repo.clone() else {
        return missing("not in GitHub Actions (GITHUB_REPOSITORY is not set); pass --baseline FILE to compare");
    };
    if inputs.settings.token.is_none() {
        return missing(
            "GITHUB_TOKEN is not set: pass `GITHUB_TOKEN: ${{ github.token }}` to the step to read the baseline store",
        );
    }
    let branch = match context::check_branch(&inputs.branch) {
        Ok(b) => b,
        Err(e) => return missing(&e.to_string()),
    };
    block_on(async move {
        let client = match Client::new(inputs.settings.clone()) {
            Ok(c) => c,
            Err(e) => return missing(&e.to_string()),
        };
        let mut notes = Vec::new();
        let (start, skip_start) = match start_commit(&client, &repo, &inputs, &mut notes).await {
            Ok(s) => s,
            Err(reason) => return missing(&reason),
        };
        let store = store::Store {
            client: &client,
            repo: &repo,
            branch,
        };
        read_store(&store, &start, skip_start, &inputs, notes).await
    })
}

/// Where the walk starts, and whether that commit itself is skipped: a
/// pull request's merge-base (else its base), or the pushed commit (itself
/// skipped). `Err` is why there is no baseline.
async fn start_commit(
    client: &Client,
    repo: &Repo,
    inputs: &AutoInputs,
    notes: &mut Vec<String>,
) -> Result<(String, bool), String> {
    let (start, skip_start) = match &inputs.event {
        Event::PullRequest(pr) => match merge_base(client, repo, pr).await {
            Ok(mb) => {
                notes.push(format!(
                    "pull request #{}: merge-base {mb} with {}",
                    pr.number, pr.base_ref
                ));
                (mb, false)
            }
            Err(e) => {
                notes.push(format!(
                    "cannot find the merge-base ({e}); starting from the base {}",
                    pr.base_sha
                ));
                (pr.base_sha.clone(), false)
            }
        },
        _ => match inputs.sha.as_deref().map(context::check_sha) {
            Some(Ok(sha)) => (sha, true),
            _ => return Err("GITHUB_SHA is not set: no commit to start from".into()),
        },
    };
    match context::check_sha(&start) {
        Ok(s) => Ok((s, skip_start)),
        Err(e) => Err(e.to_string()),
    }
}

/// The nearest stored report from `start`, and for a pull request where
/// its history is to be read.
async fn read_store(
    store: &store::Store<'_>,
    start: &str,
    skip_start: bool,
    inputs: &AutoInputs,
    mut notes: Vec<String>,
) -> AutoBaseline {
    let mut known = store::Known::default();
    match store.find_nearest(start, skip_start, inputs.depth, &mut known).await {
        Ok(store::Found::Reports(found)) => {
            for f in &found {
                let card = match f.place {
                    store::Place::Card(_) => format!(" on {}", f.card),
                    store::Place::BeforeCards => String::new(),
                };
                notes.push(format!(
                    "baseline: the report of {}{card}, {} first-parent steps from {start}",
                    f.sha, f.steps
                ));
            }
            if found.len() > 1 {
                notes.push("baseline: the store holds several cards; this run is compared with its own card's".into());
            }
            // Only a pull request's comment shows the history.
            let history = matches!(inputs.event, Event::PullRequest(_)).then(|| HistorySource {
                settings: inputs.settings.clone(),
                repo: store.repo.clone(),
                branch: store.branch.clone(),
                baselines: found.iter().map(|f| (f.card.clone(), f.sha.clone())).collect(),
                known,
            });
            let found = found
                .into_iter()
                .map(|f| (f.report, format!("commit {}", f.sha)))
                .collect();
            AutoBaseline {
                outcome: Candidates::new(found, ""),
                notes,
                history,
            }
        }
        Ok(store::Found::Missing { reason }) => AutoBaseline {
            outcome: Outcome::Missing { reason }.into(),
            notes,
            history: None,
        },
        Err(e) => {
            notes.push(format!("hint: {}", e.hint()));
            AutoBaseline {
                outcome: Outcome::Missing {
                    reason: format!("cannot read the baseline store: {e}"),
                }
                .into(),
                notes,
                history: None,
            }
        }
    }
}

/// The spec's anchor under `--anchor auto`: the report each card stored as
/// `anchors/CARD/NAME.json` on the store's branch (or, stored before cards,
/// `anchors/NAME.json`); the run's card's is chosen once measured. Every
/// problem is a missing anchor with its reason (a warning: no drift is
/// judged), never a crash.
pub fn auto_anchor(name: &str, branch: &str) -> Candidates {
    let missing = |reason: String| Candidates::from(Outcome::Missing { reason });
    let Ok(repo) = Repo::from_env() else {
        return missing("not in GitHub Actions (GITHUB_REPOSITORY is not set); pass --anchor FILE".into());
    };
    let settings = Settings::from_env();
    if settings.token.is_none() {
        return missing("GITHUB_TOKEN is not set: cannot read the baseline store".into());
    }
    let branch = match context::check_branch(branch) {
        Ok(b) => b,
        Err(e) => return missing(e.to_string()),
    };
    block_on(async move {
        let client = match Client::new(settings) {
            Ok(c) => c,
            Err(e) => return missing(e.to_string()),
        };
        let store = store::Store {
            client: &client,
            repo: &repo,
            branch,
        };
        match store.get_anchors(name).await {
            Ok(found) if found.is_empty() => missing(format!(
                "the baseline store (branch `{}`) has no `anchors/CARD/{name}.json`: run `gate baseline publish \
                 --anchor {name}` where {name} was built",
                store.branch
            )),
            Ok(found) => Candidates::new(
                found
                    .into_iter()
                    .map(|(_, report)| (Box::new(report), format!("anchor {name}")))
                    .collect(),
                "",
            ),
            Err(e) => missing(format!("cannot read the baseline store: {e}")),
        }
    })
}

fn missing(reason: &str) -> AutoBaseline {
    AutoBaseline {
        outcome: Outcome::Missing { reason: reason.into() }.into(),
        notes: Vec::new(),
        history: None,
    }
}

/// The merge-base of a pull request's base and head (compare API).
async fn merge_base(client: &Client, repo: &Repo, pr: &PullRequest) -> Result<String, GithubError> {
    #[derive(serde::Deserialize)]
    struct Sha {
        sha: String,
    }
    #[derive(serde::Deserialize)]
    struct Compare {
        merge_base_commit: Sha,
    }
    let base = context::check_sha(&pr.base_sha)?;
    let head = context::check_sha(&pr.head_sha)?;
    let path = format!("/repos/{repo}/compare/{base}...{head}?per_page=1");
    let c: Compare = client.get(Call::ReadCommits, &path).await?;
    Ok(c.merge_base_commit.sha)
}
