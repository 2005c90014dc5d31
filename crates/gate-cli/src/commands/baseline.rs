//! `gate baseline publish`: stores this run's report as the baseline of its
//! commit in the repository's baseline store (run on the default branch),
//! in its card's folder, beside other cards' reports of the same commit.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use crate::errors::CliError;
use crate::pipeline::reports::read_report;
use gate_github::store::{Published, Store, DEFAULT_BRANCH};
use gate_github::{context, Client, Event, GithubError, Repo, Settings};
use gate_runner::exit::Exit;
use gate_spec::hint::Problem;

#[derive(Debug, Args)]
pub(crate) struct BaselineArgs {
    #[command(subcommand)]
    pub command: BaselineCommand,
}

#[derive(Debug, Subcommand)]
pub(crate) enum BaselineCommand {
    /// Store DIR/report.json as the baseline of its commit (on the default branch, after `gate check`).
    Publish(PublishArgs),
}

#[derive(Debug, Args)]
pub(crate) struct PublishArgs {
    /// The output folder of `gate check` or `gate merge`.
    #[arg(long, default_value = crate::app::DEFAULT_OUT)]
    pub from: PathBuf,
    /// The commit to store the report under (default: the run's own commit:
    /// a `workflow_run`'s head SHA, else GITHUB_SHA). Never the report's
    /// own `commit`: the report came from a runner, the commit from GitHub.
    #[arg(long)]
    pub sha: Option<String>,
    /// The branch of the baseline store.
    #[arg(long, default_value = DEFAULT_BRANCH)]
    pub branch: String,
    /// OWNER/NAME (default: GITHUB_REPOSITORY).
    #[arg(long)]
    pub repo: Option<String>,
    /// Also store the report as the anchor NAME of its card (`anchors/CARD/NAME.json`, e.g.
    /// the release tag `$GITHUB_REF_NAME`): the report a spec's `anchor:
    /// NAME` measures its `drift:` budgets since. Replaces an anchor of that name.
    #[arg(long, value_name = "NAME")]
    pub anchor: Option<String>,
}

pub(super) fn run(args: BaselineArgs) -> Result<Exit, CliError> {
    match args.command {
        BaselineCommand::Publish(a) => publish(a),
    }
}

fn publish(args: PublishArgs) -> Result<Exit, CliError> {
    if let Event::PullRequest(pr) = context::event_from_env() {
        return Err(CliError::Usage(
            Problem::new(format!(
                "refusing to publish a baseline from pull request #{}: baselines come from the default branch",
                pr.number
            ))
            .with_hint("run `gate baseline publish` in a workflow on `push` to the default branch"),
        ));
    }
    let report = read_report(&args.from)?;
    let sha = commit_to_store(&args)?;
    if let Some(name) = args.anchor.as_deref().filter(|n| !gate_spec::budget::is_anchor_name(n)) {
        return Err(CliError::Usage(
            Problem::new(format!("`{name}` is not a release tag or a baseline's name"))
                .with_hint("pass --anchor a name of letters, digits, `.`, `_`, `-` and `+`, such as `v1.4.0`"),
        ));
    }
    // The stored report names the commit it is stored under: a report that
    // claims another (measured elsewhere, or forged by the runner that made
    // it) would carry that claim into every later baseline.
    let mut report = report;
    if let Some(claimed) = report.commit.as_deref().filter(|c| *c != sha) {
        eprintln!(
            "warning: the report in {} says it measured commit {claimed}; it is stored as the baseline of {sha}, \
             the run's own commit, and says so",
            args.from.display()
        );
    }
    report.commit = Some(sha.clone());
    let branch = context::check_branch(&args.branch).map_err(CliError::github_usage)?;
    let repo = match &args.repo {
        Some(r) => Repo::parse(r),
        None => Repo::from_env(),
    }
    .map_err(CliError::github_usage)?;
    let settings = Settings::from_env();
    if settings.token.is_none() {
        return Err(GithubError::Config {
            message: "GITHUB_TOKEN is not set: cannot write the baseline store".into(),
            hint: "pass `GITHUB_TOKEN: ${{ github.token }}` in the step's env, with `permissions: { contents: write }`"
                .into(),
        }
        .into());
    }
    let json = serde_json::to_string_pretty(&report).expect("the report serializes");
    let result = gate_github::block_on(async {
        let client = Client::new(settings)?;
        let store = Store {
            client: &client,
            repo: &repo,
            branch: branch.clone(),
        };
        // Each card's reports in its own folder: one store holds several cards' side by side.
        let card = gate_github::store::card_of(&report.testbed);
        let published = store.publish(&sha, &card, &json).await?;
        let anchored = match &args.anchor {
            Some(name) => Some(store.publish_anchor(name, &card, &json).await?),
            None => None,
        };
        Ok::<_, GithubError>((published, anchored))
    })?;
    let (result, anchored) = result;
    for published in std::iter::once(result).chain(anchored) {
        let (what, path) = match published {
            Published::Created { path } => ("stored", path),
            Published::Updated { path } => ("replaced", path),
            Published::Unchanged { path } => ("already stored", path),
        };
        eprintln!("gate baseline publish: {what} {path} on branch {branch} of {repo}");
    }
    Ok(Exit::Pass)
}

/// The commit a published report is stored under: `--sha`, else the run's
/// (a `workflow_run`'s head, else `GITHUB_SHA`), checked as a commit id.
fn commit_to_store(args: &PublishArgs) -> Result<String, CliError> {
    let run_sha = match context::event_from_env() {
        Event::WorkflowRun { head_sha, .. } => Some(head_sha),
        _ => std::env::var("GITHUB_SHA").ok(),
    };
    let sha = args.sha.clone().or(run_sha).ok_or_else(|| {
        CliError::Usage(
            Problem::new("no commit to store the report under: GITHUB_SHA is not set")
                .with_hint("pass --sha SHA (the commit the report was measured at)"),
        )
    })?;
    context::check_sha(&sha).map_err(CliError::github_usage)
}
