//! A check run on the measured commit, from the `workflow_run` comment job
//! (which can hold `checks: write` even for a fork's pull request): the
//! comment's summary, the verdict as its conclusion, and the budgets that
//! need a look as annotations at their lines of the spec.
//!
//! The Checks API (docs.github.com, "REST API endpoints for check runs";
//! the same in the `@octokit/openapi` description): `POST
//! /repos/{owner}/{repo}/check-runs` with `name` and `head_sha` (required),
//! `status: completed` and a `conclusion`, and `output` (`title` and
//! `summary` required). At most 50 annotations per request; "to create more
//! than 50 annotations, you have to make multiple requests to the Update a
//! check run endpoint", `PATCH .../check-runs/{check_run_id}`, each of which
//! appends its annotations to those already there.

use serde::Deserialize;
use serde_json::json;

use super::client::{Client, Method};
use super::context::{check_sha, Repo};
use super::error::{Call, GithubError};
use gate_contract::report::Report;
use gate_render::checks::Output;

/// Annotations per request (GitHub's most).
pub const PER_REQUEST: usize = 50;

/// A check run's conclusion, as the Checks API names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Conclusion {
    Success,
    Failure,
    Neutral,
}

impl Conclusion {
    /// The API's word.
    pub fn name(self) -> &'static str {
        match self {
            Conclusion::Success => "success",
            Conclusion::Failure => "failure",
            Conclusion::Neutral => "neutral",
        }
    }
}

/// The conclusion the report's verdict gives, read, not decided: `failure`
/// when the run failed; `neutral` when it passed without judging any budget
/// (nothing was measured, e.g. a shard that held no component, or every
/// budget not measured), or when the pass rests on acknowledged
/// regressions whose acknowledgement GitHub did not confirm
/// (`Summary::pass_unconfirmed`); `success` otherwise.
pub fn conclusion(report: &Report) -> Conclusion {
    let s = &report.summary;
    if !s.passed_run() {
        Conclusion::Failure
    } else if s.passed + s.acknowledged == 0 || s.pass_unconfirmed() {
        Conclusion::Neutral
    } else {
        Conclusion::Success
    }
}

/// What was posted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckRun {
    pub id: u64,
    pub url: Option<String>,
    /// Annotations sent (in `ceil(n / 50)` requests).
    pub annotations: usize,
}

/// Creates the completed check run `name` on `head_sha`, its first 50
/// annotations with it, then the rest by updates of 50.
pub async fn post(
    client: &Client,
    repo: &Repo,
    name: &str,
    head_sha: &str,
    conclusion: Conclusion,
    output: &Output,
) -> Result<CheckRun, GithubError> {
    #[derive(Deserialize)]
    struct Created {
        id: u64,
        html_url: Option<String>,
    }
    let head_sha = check_sha(head_sha)?;
    let mut batches = output.annotations.chunks(PER_REQUEST);
    let out = |batch: &[gate_render::checks::Annotation]| json!({ "title": output.title, "summary": output.summary, "annotations": batch });
    let body = json!({
        "name": name,
        "head_sha": head_sha,
        "status": "completed",
        "conclusion": conclusion.name(),
        "output": out(batches.next().unwrap_or_default()),
    });
    let created: Created = client
        .post(Call::WriteCheckRun, &format!("/repos/{repo}/check-runs"), &body)
        .await?;
    let path = format!("/repos/{repo}/check-runs/{}", created.id);
    for batch in batches {
        client
            .write(
                Call::WriteCheckRun,
                Method::Patch,
                &path,
                &json!({ "output": out(batch) }),
            )
            .await?;
    }
    Ok(CheckRun {
        id: created.id,
        url: created.html_url,
        annotations: output.annotations.len(),
    })
}
