//! GitHub errors that say the fix. Messages never contain the token.

/// What a call to GitHub was for; it picks the hint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    ReadComments,
    WriteComment,
    ReadPull,
    ReadLabels,
    ReadPermission,
    ReadCommits,
    ReadBaseline,
    WriteBaseline,
    WriteCheckRun,
}

impl Call {
    /// What the call was for, as messages say it.
    pub fn what(self) -> &'static str {
        match self {
            Call::ReadComments => "read the pull request's comments",
            Call::WriteComment => "write the pull request comment",
            Call::ReadPull => "read the pull request",
            Call::ReadLabels => "read the pull request's label events",
            Call::ReadPermission => "read the label author's permission on the repository",
            Call::ReadCommits => "read the commit history",
            Call::ReadBaseline => "read the baseline store",
            Call::WriteBaseline => "write the baseline store",
            Call::WriteCheckRun => "write the check run",
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum GithubError {
    /// The environment lacks something (GITHUB_REPOSITORY, a token, the event).
    #[error("{message}")]
    Config { message: String, hint: String },
    /// GitHub answered with an error status.
    #[error("GitHub refused to {} ({method} {path}): {status} {message}", op.what())]
    Status {
        op: Call,
        method: String,
        path: String,
        status: u16,
        message: String,
    },
    /// No answer in time, after every retry.
    #[error("GitHub did not answer in time to {} ({method} {path}) after {attempts} attempts", op.what())]
    Timeout {
        op: Call,
        method: String,
        path: String,
        attempts: u32,
    },
    /// The connection failed, after every retry.
    #[error("cannot reach the GitHub API to {} ({method} {path}) after {attempts} attempts: {reason}", op.what())]
    Transport {
        op: Call,
        method: String,
        path: String,
        attempts: u32,
        reason: String,
    },
    /// The answer was not what the API documents.
    #[error("unexpected answer from GitHub to {method} {path}: {reason}")]
    Decode {
        method: String,
        path: String,
        reason: String,
    },
    /// A rate limit asked for a longer wait than the run allows.
    #[error(
        "GitHub's rate limit stopped the request to {} ({method} {path}): it asks to wait {asked} s, after {waited} s already waited",
        op.what()
    )]
    RateLimited {
        op: Call,
        method: String,
        path: String,
        asked: u64,
        waited: u64,
    },
    /// The command's GitHub work ran past its deadline (`Settings::deadline`)
    /// while this call was in flight or about to be retried.
    #[error(
        "gate's GitHub work ran past its deadline of {secs} s while it tried to {} ({method} {path})",
        op.what()
    )]
    Deadline {
        op: Call,
        method: String,
        path: String,
        secs: u64,
    },
    /// Concurrent writers kept winning.
    #[error("the baseline store kept changing under us ({path}); gave up after {attempts} attempts")]
    Conflict { path: String, attempts: u32 },
    /// Refused for safety (e.g. a PR number that does not match the run).
    #[error("{message}")]
    Refused { message: String, hint: String },
}

impl GithubError {
    pub fn status(&self) -> Option<u16> {
        match self {
            GithubError::Status { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// Whether a repository rule (a ruleset, or classic branch protection)
    /// refused a write: GitHub answers 422 (creating a ref, per its REST
    /// docs for `POST /repos/{owner}/{repo}/git/refs`), 409 (the contents
    /// API) or 403, its message naming the rule ("Repository rule
    /// violations found", "Protected branch update failed"). Never a
    /// concurrent update to retry: the same rule refuses the next attempt.
    pub fn rule_violation(&self) -> bool {
        match self {
            GithubError::Status {
                status: 403 | 409 | 422,
                message,
                ..
            } => {
                let m = message.to_ascii_lowercase();
                m.contains("rule violation") || m.contains("ruleset") || m.contains("protected branch")
            }
            _ => false,
        }
    }

    /// The fix, for people.
    pub fn hint(&self) -> String {
        let rule = self.rule_violation();
        match self {
            GithubError::Config { hint, .. } | GithubError::Refused { hint, .. } => hint.clone(),
            GithubError::Status { op, status, .. } => match (status, op) {
                (_, Call::WriteBaseline) if rule => {
                    "a repository ruleset or branch protection refuses writes to the baseline branch: in Settings → Rules → \
                     Rulesets, leave `gate-baselines*` out of the rule's target branches (or add the GitHub Actions app to its \
                     bypass list), or create the branch once by hand and let the ruleset allow updates to it"
                        .into()
                }
                (403, Call::WriteCheckRun) | (404, Call::WriteCheckRun) => {
                    "the token cannot write check runs: give the comment job `permissions: { checks: write }` (a GitHub \
                     App: its `checks: write` permission), or leave out --check-run (the action's `check-run: false`)"
                        .into()
                }
                (422, Call::WriteCheckRun) => {
                    "GitHub refused the check run's contents: an annotation's path must be a file of the repository at \
                     the head commit, relative to its root (`gate check --budgets` with a relative path)"
                        .into()
                }
                (401, _) => "the token is missing, expired or wrong: pass `GITHUB_TOKEN: ${{ github.token }}` in the step's `env`".into(),
                (403, Call::WriteComment) | (404, Call::WriteComment) => {
                    "the token cannot write to the pull request: give the job `permissions: { pull-requests: write }`. \
                     Pull requests from forks always get a read-only token: measure under `pull_request`, upload the output \
                     folder, and comment from a `workflow_run` workflow (see docs/github.md)"
                        .into()
                }
                (403, Call::WriteBaseline) | (404, Call::WriteBaseline) => {
                    "the token cannot push to the baseline branch: give the publishing job `permissions: { contents: write }` \
                     (and allow that branch in any branch protection rules)"
                        .into()
                }
                (403, _) => "the token lacks a permission: the gate needs `contents: read` and `pull-requests: read` (write to comment); \
                             a 403 can also be a rate limit"
                    .into(),
                (404, Call::ReadPull) | (404, Call::ReadComments) | (404, Call::ReadLabels) => {
                    "check the pull request number and GITHUB_REPOSITORY; a token without access to a private repository also gets 404".into()
                }
                (404, _) => "check GITHUB_REPOSITORY; a token without access to a private repository also gets 404".into(),
                (409, _) | (422, _) => "another job wrote at the same time; run it again".into(),
                (s, _) if *s >= 500 => "GitHub is failing (a 5xx after every retry): check https://www.githubstatus.com and rerun the job".into(),
                _ => "see the message above; GITHUB_API_URL must point at the REST API (https://api.github.com, or https://HOST/api/v3 on GitHub Enterprise)".into(),
            },
            GithubError::Timeout { .. } | GithubError::Transport { .. } => {
                "check GITHUB_API_URL and the runner's network; the GitHub API may be degraded: rerun the job".into()
            }
            GithubError::Decode { .. } => "GITHUB_API_URL must point at the GitHub REST API".into(),
            GithubError::Deadline { .. } => {
                "the GitHub API is slow or the pull request is very busy: rerun the job later, or raise \
                 GATE_GITHUB_DEADLINE_MS, the most one command spends on GitHub in all (default 600000)"
                    .into()
            }
            GithubError::Conflict { .. } => "several jobs publish at once; run the publish again".into(),
            GithubError::RateLimited { .. } => {
                "rerun the job later; many jobs sharing one token hit GitHub's limits sooner. \
                 GATE_GITHUB_MAX_RATE_WAIT_MS sets how long gate waits in all (default 300000)"
                    .into()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(op: Call, status: u16, message: &str) -> GithubError {
        GithubError::Status {
            op,
            method: "POST".into(),
            path: "/repos/acme/model/git/refs".into(),
            status,
            message: message.into(),
        }
    }

    #[test]
    fn a_ruleset_refusing_the_store_says_the_fix_and_a_race_does_not() {
        let ruled = status(
            Call::WriteBaseline,
            422,
            "Repository rule violations found\n\nCannot create ref due to creations being restricted.",
        );
        assert!(ruled.rule_violation());
        assert!(
            ruled.hint().contains("Rulesets") && ruled.hint().contains("gate-baselines*"),
            "{}",
            ruled.hint()
        );
        let protected = status(
            Call::WriteBaseline,
            409,
            "Protected branch update failed for refs/heads/gate-baselines.",
        );
        assert!(protected.rule_violation());
        // A concurrent creation or update is no rule: it keeps its own hint.
        let race = status(Call::WriteBaseline, 422, "Reference already exists");
        assert!(!race.rule_violation());
        assert_eq!(race.hint(), "another job wrote at the same time; run it again");
        let moved = status(Call::WriteBaseline, 409, "is at abc but expected def");
        assert!(!moved.rule_violation());
        // 404 is a missing branch or token scope, whatever its text says.
        assert!(!status(Call::WriteBaseline, 404, "ruleset").rule_violation());
    }
}
