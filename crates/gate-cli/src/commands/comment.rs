//! `gate comment --from DIR`: upserts ONE comment per gate id on the pull
//! request, rendered again from DIR/report.json (never posted verbatim from
//! an artifact). Reads GITHUB_REPOSITORY, GITHUB_EVENT_PATH, GITHUB_TOKEN and
//! GITHUB_API_URL.

use std::path::{Path, PathBuf};

use clap::Args;

use crate::errors::CliError;
use crate::pipeline::reports::{read_baseline, read_report, PR_JSON_BYTES};
use gate_contract::report::{Acknowledgement, Report, Status, Warning, WarningKind};
use gate_github::comment::{self, Upsert};
use gate_github::label::Finding;
use gate_github::{context, Client, Event, GithubError, PullRequest, Repo, Settings};
use gate_render::markdown;
use gate_runner::exit::Exit;
use gate_spec::hint::Problem;

#[derive(Debug, Args)]
pub(crate) struct CommentArgs {
    /// The output folder of `gate check` or `gate merge`.
    #[arg(long, default_value = crate::app::DEFAULT_OUT)]
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
    /// The acknowledge label `gate check` was given: an acknowledgement the
    /// report names is shown only for this label, confirmed on GitHub. An
    /// empty value shows none.
    #[arg(long, default_value = gate_github::label::DEFAULT_LABEL, value_name = "LABEL")]
    pub acknowledge_label: String,
    /// The login gate's comments are written as (default: GATE_COMMENT_AUTHOR,
    /// else `GET /user`, else `github-actions[bot]`). With a GitHub App's
    /// token: `<app-slug>[bot]`. Only a marked comment by this login is edited.
    #[arg(long, value_name = "LOGIN")]
    pub author: Option<String>,
    /// Also post a completed check run of this name on the measured commit:
    /// the comment's summary, the verdict as its conclusion, annotations at
    /// the spec's lines. Needs `checks: write`; a refusal is a warning and
    /// never fails the comment.
    #[arg(long, value_name = "NAME")]
    pub check_run: Option<String>,
}

/// `--check-run NAME`, checked: one line, at most 100 characters.
fn check_run_name(args: &CommentArgs) -> Result<Option<String>, CliError> {
    let Some(name) = &args.check_run else {
        return Ok(None);
    };
    let name = name.trim();
    if name.is_empty() || name.chars().count() > 100 || name.chars().any(char::is_control) {
        return Err(CliError::Usage(
            Problem::new(format!(
                "--check-run {name:?}: a check run's name is one line of 1 to 100 characters"
            ))
            .with_hint("name it as it should show among the pull request's checks, e.g. --check-run \"gate: cpu\""),
        ));
    }
    Ok(Some(name.to_string()))
}

/// The environment variable that stands for `--author`.
pub(super) const AUTHOR_ENV: &str = "GATE_COMMENT_AUTHOR";

/// `--author`, else a non-empty GATE_COMMENT_AUTHOR, checked.
fn author(args: &CommentArgs) -> Result<Option<String>, CliError> {
    let given = args
        .author
        .clone()
        .or_else(|| std::env::var(AUTHOR_ENV).ok().filter(|v| !v.trim().is_empty()));
    given
        .map(|a| comment::check_author(&a))
        .transpose()
        .map_err(CliError::github_usage)
}

fn github_error(e: GithubError, from: &Path) -> CliError {
    CliError::Infrastructure(Problem::new(e.to_string()).with_hint(format!(
        "{}\nhint: nothing was lost: the report is on disk at {}",
        e.hint(),
        from.join("report.json").display()
    )))
}

/// DIR/history.json, when `gate check` found stored reports; it comes from
/// an artifact, so it is checked, and a bad one is a warning.
pub(super) fn read_history(dir: &Path) -> Vec<gate_contract::history::Series> {
    let path = dir.join("history.json");
    if std::fs::symlink_metadata(&path).is_err() {
        return Vec::new();
    }
    let text = match gate_report::input::read_regular(&path, gate_contract::history::MAX_BYTES as u64) {
        Ok(text) => text,
        Err(e) => {
            eprintln!(
                "warning: cannot read {}: {e}; the comment has no history",
                path.display()
            );
            return Vec::new();
        }
    };
    match gate_contract::history::parse(&text) {
        Ok(h) => {
            h.warnings.iter().for_each(|w| eprintln!("warning: {w}"));
            h.series
        }
        Err(e) => {
            eprintln!("warning: {e}; the comment has no history");
            Vec::new()
        }
    }
}

/// The report is an artifact, which a fork's run could have written, down
/// to its counts and warnings: an acknowledgement (its rows, its claim of
/// who added the label, its warnings) is checked whenever any part of it is
/// there. The count comes from the rows; the artifact's own warnings about
/// it are dropped, and the line that says who acknowledged is written here,
/// from what GitHub says, with the head the comment is for. A claim GitHub
/// does not confirm (another label, someone else, a label not on the pull
/// request, added by someone who may not write) is named nowhere; the
/// statuses stay as `gate check` decided them (its exit code was the gate),
/// and the rows say "not confirmed".
async fn confirm_acknowledgement(
    client: &Client,
    target: &Target<'_>,
    label: &str,
    report: &mut Report,
) -> Result<(), GithubError> {
    let marked = report
        .results
        .iter()
        .filter(|r| r.status == Status::Acknowledged)
        .count();
    report.summary.acknowledged = marked;
    let claimed = report.summary.acknowledgement.take();
    report.summary.warnings.retain(|w| !claims_acknowledgement(w));
    let Some(claimed) = claimed else {
        if marked > 0 {
            not_confirmed(report, marked, "the report names no one who added the label");
        }
        return Ok(());
    };
    let label = label.trim();
    let why = if label.is_empty() {
        "gate comment was given no acknowledge label (--acknowledge-label '')".to_string()
    } else if claimed.label != label {
        format!(
            "it names the label `{}`, not the acknowledge label `{label}` (--acknowledge-label)",
            claimed.label
        )
    } else {
        match gate_github::label::find(client, target.repo, target.pr, label).await {
            Ok(Finding::Confirmed(a)) if a == claimed => {
                let head = match target.head {
                    Some(h) => h.to_string(),
                    None => comment::pr_head(client, target.repo, target.pr).await?,
                };
                acknowledged_line(report, &a, &head);
                report.summary.acknowledgement = Some(a);
                return Ok(());
            }
            Ok(Finding::Confirmed(a)) => format!("GitHub says @{} added it at {}", a.by, a.at),
            Ok(Finding::Absent) => "the label is not on the pull request now".to_string(),
            Ok(Finding::Unconfirmed(why)) => why,
            // The command's deadline ends all of its GitHub work: exit 3.
            Err(e @ GithubError::Deadline { .. }) => return Err(e),
            Err(e) => format!("GitHub could not be asked: {e}"),
        }
    };
    if marked > 0 || report.summary.strict {
        not_confirmed(report, marked, &why);
    }
    Ok(())
}

/// Whether an artifact's warning speaks for an acknowledgement: the
/// verdict's own lines ("N regression(s) acknowledged by @...", "--strict
/// ignores the `...` label (added by @...)") or any line in their words
/// (reading report.json gives every such line this kind:
/// `Warning::from_text`). Such lines are written again from what GitHub
/// confirms, never copied.
fn claims_acknowledgement(warning: &Warning) -> bool {
    warning.kind == WarningKind::Acknowledgement
}

/// The line that says who acknowledged, after GitHub confirmed it.
fn acknowledged_line(report: &mut Report, a: &Acknowledgement, head: &str) {
    let regressed = report.results.iter().filter(|r| r.status == Status::Regressed).count();
    let s = &mut report.summary;
    let line = if s.strict {
        if regressed == 0 {
            return;
        }
        format!(
            "--strict ignores the `{}` label (added by @{} at {}, on head {head}): {regressed} regression(s) stay regressions",
            a.label, a.by, a.at
        )
    } else if s.acknowledged > 0 {
        format!(
            "{} regression(s) acknowledged by @{} via `{}` at {}, on head {head} (confirmed on GitHub)",
            s.acknowledged, a.by, a.label, a.at
        )
    } else {
        return;
    };
    s.warnings.push(Warning::run_wide(WarningKind::Acknowledgement, line));
}

/// Says that the report's acknowledgement is not confirmed, and why,
/// without repeating whom it names.
fn not_confirmed(report: &mut Report, marked: usize, why: &str) {
    eprintln!("warning: the report's acknowledgement is not confirmed: {why}");
    let text = if marked == 0 {
        format!("the report's acknowledgement is not confirmed ({why})")
    } else {
        format!(
            "the report's acknowledgement is not confirmed ({why}): its {marked} acknowledged regression(s) \
             are not shown as accepted by anyone"
        )
    };
    report
        .summary
        .warnings
        .push(Warning::run_wide(WarningKind::AckUnconfirmed, text));
}

/// The pull request a comment goes to, and the head it is for when the
/// run's event says it (else it is read from GitHub when needed).
struct Target<'a> {
    repo: &'a Repo,
    pr: u64,
    head: Option<&'a str>,
}

/// The default gate id: the spec's file name (`budgets.yaml`), else `gate`.
pub(super) fn default_id(report: &Report) -> String {
    Path::new(&report.spec)
        .file_name()
        .and_then(|n| n.to_str())
        .map(comment::clean_id)
        .unwrap_or_else(|| "gate".into())
}

pub(super) fn run(args: CommentArgs) -> Result<Exit, CliError> {
    let mut report = read_report(&args.from)?;
    let baseline = baseline_unacknowledged(&args.from);
    let history = read_history(&args.from);
    let author = author(&args)?;
    let check_run = check_run_name(&args)?;
    let id = comment::clean_id(&args.id.clone().unwrap_or_else(|| default_id(&report)));

    let event = event_of(&args)?;
    // Links come from this run's trusted context, never from the artifact.
    let links = context::links(&event, &report.spec);
    let Some((pr, verify_head)) = target_pr(&args, &event) else {
        eprintln!(
            "gate comment: not a pull request (no --pr, no {}, and the event is not a pull_request); nothing posted",
            args.from.join("pr.json").display()
        );
        return Ok(Exit::Pass);
    };
    let (repo, settings) = repo_and_settings(&args)?;
    let noteworthy = markdown::noteworthy(&report);
    let result = gate_github::block_on(async {
        let client = Client::new(settings)?;
        if let Some(head) = &verify_head {
            comment::verify_pr_head(&client, &repo, pr, head).await?;
        }
        let head = comment_head(&args, &event, verify_head.is_some());
        let target = Target { repo: &repo, pr, head };
        confirm_acknowledgement(&client, &target, &args.acknowledge_label, &mut report).await?;
        let body = markdown::render_full(
            &report,
            baseline.as_ref(),
            &history,
            &links,
            markdown::COMMENT_LIMIT - comment::marker(&id).chars().count() - 1,
        );
        let upserted = comment::upsert(
            &client,
            &comment::Request {
                repo: &repo,
                pr,
                id: &id,
                body: &body,
                quiet: args.quiet,
                noteworthy,
                author: author.as_deref(),
            },
        )
        .await;
        // After the comment, and only when it went through (a refused
        // head is not the PR's any more): a check run is extra, never a
        // reason for the comment to fail.
        if let (Some(name), Ok(_)) = (&check_run, &upserted) {
            let summary = markdown::render_full(
                &report,
                baseline.as_ref(),
                &history,
                &links,
                gate_render::checks::SUMMARY_LIMIT,
            );
            post_check_run(&client, &repo, pr, head, name, &report, &summary).await;
        }
        upserted
    });
    say_outcome(result, pr, &id).map_err(|e| github_error(e, &args.from))?;
    Ok(Exit::Pass)
}

/// The baseline's report, without the acknowledgement it names: its text
/// is in the comment's diff, and that acknowledgement is a past run's, as
/// unconfirmed as any in the artifact.
fn baseline_unacknowledged(from: &std::path::Path) -> Option<Report> {
    read_baseline(from).map(|mut b| {
        b.summary.acknowledgement = None;
        b.summary.warnings.retain(|w| !claims_acknowledgement(w));
        b
    })
}

/// This run's event. Without --pr the event is where the PR comes from:
/// in a pull_request run a broken event file is an error, not "nothing to
/// post" (#15).
fn event_of(args: &CommentArgs) -> Result<Event, CliError> {
    if args.pr.is_some() {
        return Ok(context::event_from_env());
    }
    context::event_from_env_checked().map_err(|e| github_error(e, &args.from))
}

/// The repository to comment on and the API settings, which must carry a token.
fn repo_and_settings(args: &CommentArgs) -> Result<(Repo, Settings), CliError> {
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
    Ok((repo, settings))
}

/// The head the comment is for: the run's (a workflow_run's, once checked
/// against the pull request), else none: the pull request's head now.
fn comment_head<'e>(args: &CommentArgs, event: &'e Event, head_verified: bool) -> Option<&'e str> {
    match (&args.pr, event) {
        (None, Event::PullRequest(p)) => Some(p.head_sha.as_str()),
        (None, Event::WorkflowRun { head_sha, .. }) if head_verified => Some(head_sha.as_str()),
        _ => None,
    }
}

/// Posts the check run `name` on the commit the comment is for (the run's
/// head; with `--pr`, the pull request's head now) and says how it went;
/// every failure is a warning with its hint.
async fn post_check_run(
    client: &Client,
    repo: &Repo,
    pr: u64,
    head: Option<&str>,
    name: &str,
    report: &Report,
    summary: &str,
) {
    use gate_github::checks;
    let sha = match head {
        Some(h) => Ok(h.to_string()),
        None => comment::pr_head(client, repo, pr).await,
    };
    let output = gate_render::checks::render(report, summary);
    if output.annotations.is_empty() && gate_render::checks::repo_path(&report.spec).is_none() {
        eprintln!(
            "note: the check run has no annotations: the spec `{}` is not a path in the repository",
            report.spec
        );
    }
    let conclusion = checks::conclusion(report);
    let posted = match sha {
        Ok(sha) => checks::post(client, repo, name, &sha, conclusion, &output)
            .await
            .map(|run| (run, sha)),
        Err(e) => Err(e),
    };
    match posted {
        Ok((run, sha)) => {
            eprintln!(
                "gate comment: check run `{name}` on {sha}: {}{} ({} annotation(s)){}",
                conclusion.name(),
                if report.summary.pass_unconfirmed() {
                    ", not success: the pass rests on an acknowledgement GitHub did not confirm"
                } else {
                    ""
                },
                run.annotations,
                run.url.map(|u| format!(": {u}")).unwrap_or_default()
            );
        }
        Err(e) => {
            eprintln!("warning: no check run `{name}`: {e}");
            eprintln!("hint: {}", e.hint());
        }
    }
}

/// The pull request to comment on: `--pr`, the event's, or (in a
/// `workflow_run`) the artifact's pr.json, with the run's head to check it
/// against; `None` when there is none.
fn target_pr(args: &CommentArgs, event: &Event) -> Option<(u64, Option<comment::RunHead>)> {
    let stored: Option<PullRequest> = gate_report::input::read_regular(&args.from.join("pr.json"), PR_JSON_BYTES)
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
        Ok(Upsert::Unread { pages }) => {
            eprintln!(
                "warning: cannot read the comments of #{pr} to their end (more than {pages} pages, or a `Link` \
                 header that leads back to a page already read), so gate cannot tell whether its comment \
                 (id {id}) is there: nothing posted, rather than a duplicate"
            );
            eprintln!(
                "hint: the report is in the run's artifact and job summary; delete old comments on #{pr}, or check \
                 the API's `Link` headers (GITHUB_API_URL)"
            );
        }
        Err(GithubError::Refused { message, hint }) => {
            eprintln!("warning: {message}");
            eprintln!("hint: {hint}");
        }
        Err(e) => return Err(e),
    }
    Ok(())
}
