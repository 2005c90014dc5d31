//! `gate comment --from DIR`: upserts ONE comment per gate id on the pull
//! request, rendered again from DIR/report.json (never posted verbatim from
//! an artifact). Reads GITHUB_REPOSITORY, GITHUB_EVENT_PATH, GITHUB_TOKEN and
//! GITHUB_API_URL.

use std::path::{Path, PathBuf};

use clap::Args;

use super::CliError;
use crate::exit::Exit;
use crate::github::comment::{self, Upsert};
use crate::github::label::Finding;
use crate::github::{context, Client, Event, GithubError, PullRequest, Repo, Settings};
use crate::render::markdown;
use crate::report::Report;

#[derive(Debug, Args)]
pub struct CommentArgs {
    /// The output folder of `gate check` or `gate merge`.
    #[arg(long, default_value = super::DEFAULT_OUT)]
    pub from: PathBuf,
    /// The gate id: one comment per id on a pull request (default: the spec's file name).
    #[arg(long)]
    pub id: Option<String>,
    /// Post only when something failed or changed against the baseline (an existing comment is always kept current).
    #[arg(long)]
    pub quiet: bool,
    /// The pull request (default: the event in GITHUB_EVENT_PATH, then DIR/pr.json).
    #[arg(long)]
    pub pr: Option<u64>,
    /// OWNER/NAME (default: GITHUB_REPOSITORY).
    #[arg(long)]
    pub repo: Option<String>,
}

/// Reads DIR/report.json; a missing or bad one is bad input.
pub(super) fn read_report(dir: &Path) -> Result<Report, CliError> {
    let path = dir.join("report.json");
    // Scrubbed: what is posted or published from it is public, and the
    // folder may come from elsewhere (an artifact).
    crate::report::baseline::load_file(&path)
        .map(super::output::scrub)
        .map_err(|e| CliError::Usage {
            message: e.to_string().replacen("the baseline ", "", 1),
            hint: format!(
                "run `gate check --out {}` first (or download the job's output folder there)",
                dir.display()
            ),
        })
}

/// DIR/baseline.json, when `gate check` had a baseline; unreadable is a warning.
pub(super) fn read_baseline(dir: &Path) -> Option<Report> {
    let path = dir.join("baseline.json");
    if !path.exists() {
        return None;
    }
    match crate::report::baseline::load_file(&path) {
        Ok(r) => Some(super::output::scrub(r)),
        Err(e) => {
            eprintln!("warning: {e}; the comment has no diff");
            None
        }
    }
}

fn github_error(e: GithubError, from: &Path) -> CliError {
    CliError::Infrastructure {
        message: e.to_string(),
        hint: format!(
            "{}\nhint: nothing was lost: the report is on disk at {}",
            e.hint(),
            from.join("report.json").display()
        ),
    }
}

/// DIR/history.json, when `gate check` found stored reports; it comes from
/// an artifact, so it is checked, and a bad one is a warning.
pub(super) fn read_history(dir: &Path) -> Vec<crate::report::history::Series> {
    let path = dir.join("history.json");
    let Ok(file) = std::fs::File::open(&path) else {
        return Vec::new();
    };
    // Read one byte past the bound so an oversized file is refused, not cut.
    let mut text = String::new();
    let limit = crate::report::history::MAX_BYTES as u64 + 1;
    if let Err(e) = std::io::Read::read_to_string(&mut std::io::Read::take(file, limit), &mut text) {
        eprintln!(
            "warning: cannot read {}: {e}; the comment has no history",
            path.display()
        );
        return Vec::new();
    }
    match crate::report::history::parse(&text) {
        Ok(h) => h.series,
        Err(e) => {
            eprintln!("warning: {e}; the comment has no history");
            Vec::new()
        }
    }
}

/// The report is an artifact, which a fork's run could have written: an
/// acknowledgement it names (who added the label, when) is shown only when
/// GitHub still says the same. Otherwise the name is dropped and a warning
/// says why; the statuses stay as `gate check` decided them (its exit code
/// was the gate).
async fn confirm_acknowledgement(client: &Client, repo: &Repo, pr: u64, report: &mut Report) {
    let Some(claimed) = report.summary.acknowledgement.clone() else {
        return;
    };
    if report.summary.strict || report.summary.acknowledged == 0 {
        return; // nothing shown as accepted
    }
    let now = crate::github::label::find(client, repo, pr, &claimed.label).await;
    if let Ok(Finding::Confirmed(a)) = &now {
        if *a == claimed {
            return;
        }
    }
    let why = match now {
        Ok(Finding::Confirmed(a)) => format!("GitHub says @{} added it at {}", a.by, a.at),
        Ok(Finding::Absent) => "the label is not on the pull request now".to_string(),
        Ok(Finding::Unconfirmed(why)) => why,
        Err(e) => format!("GitHub could not be asked: {e}"),
    };
    eprintln!("warning: the report's acknowledgement is not confirmed: {why}");
    report.summary.warnings.push(format!(
        "the report says `{}` was added by @{} at {}, which is not confirmed ({why}): \
         its acknowledged regressions are not shown as accepted by anyone",
        claimed.label, claimed.by, claimed.at
    ));
    report.summary.acknowledgement = None;
}

/// The default gate id: the spec's file name (`budgets.yaml`), else `gate`.
pub(super) fn default_id(report: &Report) -> String {
    Path::new(&report.spec)
        .file_name()
        .and_then(|n| n.to_str())
        .map(comment::clean_id)
        .unwrap_or_else(|| "gate".into())
}

pub fn run(args: CommentArgs) -> Result<Exit, CliError> {
    let mut report = read_report(&args.from)?;
    let baseline = read_baseline(&args.from);
    let history = read_history(&args.from);
    let id = comment::clean_id(&args.id.clone().unwrap_or_else(|| default_id(&report)));

    // Without --pr the event is where the PR comes from: in a pull_request run
    // a broken event file is an error, not "nothing to post" (#15).
    let event = if args.pr.is_some() {
        context::event_from_env()
    } else {
        context::event_from_env_checked().map_err(|e| github_error(e, &args.from))?
    };
    // Links come from this run's trusted context, never from the artifact.
    let links = context::links(&event, &report.spec);
    let Some((pr, verify_head)) = target_pr(&args, &event) else {
        eprintln!(
            "gate comment: not a pull request (no --pr, no {}, and the event is not a pull_request); nothing posted",
            args.from.join("pr.json").display()
        );
        return Ok(Exit::Pass);
    };
    let repo = match &args.repo {
        Some(r) => Repo::parse(r),
        None => Repo::from_env(),
    }
    .map_err(|e| github_error(e, &args.from))?;
    let settings = Settings::from_env();
    if settings.token.is_none() {
        return Err(github_error(
            GithubError::Config {
                message: "GITHUB_TOKEN is not set: cannot comment".into(),
                hint: "pass `GITHUB_TOKEN: ${{ github.token }}` in the step's env, with `permissions: { pull-requests: write }`".into(),
            },
            &args.from,
        ));
    }
    let noteworthy = markdown::noteworthy(&report);
    let result = crate::github::block_on(async {
        let client = Client::new(settings)?;
        if let Some(head) = &verify_head {
            comment::verify_pr_head(&client, &repo, pr, head).await?;
        }
        confirm_acknowledgement(&client, &repo, pr, &mut report).await;
        let body = markdown::render_full(
            &report,
            baseline.as_ref(),
            &history,
            &links,
            markdown::COMMENT_LIMIT - comment::marker(&id).chars().count() - 1,
        );
        comment::upsert(
            &client,
            &comment::Request {
                repo: &repo,
                pr,
                id: &id,
                body: &body,
                quiet: args.quiet,
                noteworthy,
            },
        )
        .await
    });
    say_outcome(result, pr, &id).map_err(|e| github_error(e, &args.from))?;
    Ok(Exit::Pass)
}

/// The pull request to comment on: `--pr`, the event's, or (in a
/// `workflow_run`) the artifact's pr.json, with the run's head to check it
/// against; `None` when there is none.
fn target_pr(args: &CommentArgs, event: &Event) -> Option<(u64, Option<comment::RunHead>)> {
    let stored: Option<PullRequest> = std::fs::read_to_string(args.from.join("pr.json"))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok());
    match (&args.pr, event, &stored) {
        (Some(n), _, _) => Some((*n, None)),
        (None, Event::PullRequest(p), _) => Some((p.number, None)),
        // workflow_run: the number comes from the artifact, so check it against the run.
        // A PR at the same commit could redirect the comment, so the head
        // repository and branch must match the run's too (#14 item 5).
        (
            None,
            Event::WorkflowRun {
                head_sha,
                head_repo,
                head_branch,
                ..
            },
            Some(p),
        ) => Some((
            p.number,
            Some(comment::RunHead {
                sha: head_sha.clone(),
                repo: head_repo.clone(),
                branch: head_branch.clone(),
            }),
        )),
        (None, _, Some(p)) => Some((p.number, None)),
        (None, _, None) => None,
    }
}

/// Says what became of the comment: its URL on stdout, the rest on stderr.
/// A refusal (e.g. a PR number that does not match the run) is a warning;
/// any other error is returned.
fn say_outcome(result: Result<Upsert, GithubError>, pr: u64, id: &str) -> Result<(), GithubError> {
    match result {
        Ok(Upsert::Created { id: cid, url }) => {
            eprintln!("gate comment: created comment {cid} on #{pr} (id {id})");
            if let Some(u) = url {
                println!("{u}");
            }
        }
        Ok(Upsert::Updated { id: cid, url }) => {
            eprintln!("gate comment: updated comment {cid} on #{pr} (id {id})");
            if let Some(u) = url {
                println!("{u}");
            }
        }
        Ok(Upsert::Unchanged { id: cid, url }) => {
            eprintln!("gate comment: comment {cid} on #{pr} already says this (id {id})");
            if let Some(u) = url {
                println!("{u}");
            }
        }
        Ok(Upsert::Skipped) => {
            eprintln!("gate comment: --quiet and nothing failed or changed: no comment on #{pr}");
        }
        Err(GithubError::Refused { message, hint }) => {
            eprintln!("warning: {message}");
            eprintln!("hint: {hint}");
        }
        Err(e) => return Err(e),
    }
    Ok(())
}
