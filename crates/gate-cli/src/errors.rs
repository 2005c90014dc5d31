//! [`CliError`]: a failure that ends a command, the exit code it maps to
//! and the `hint:` it carries. Below both wings (commands, pipeline): it
//! imports neither.

use gate_runner::exit::Exit;
use gate_spec::hint::Problem;

/// A failure that ends the command, with the exit code it maps to.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CliError {
    #[error("{0}")]
    Spec(#[from] gate_spec::budget::SpecError),
    /// Bad input: a flag, a file or the repository is not what the command needs (exit 2).
    #[error("{0}")]
    Usage(Problem),
    /// The machine, a tool or a service failed (exit 3).
    #[error("{0}")]
    Infrastructure(Problem),
    /// Already told on stderr (by a harness): only the exit code is left.
    #[error("")]
    Reported(Exit),
}

impl CliError {
    pub(crate) fn exit(&self) -> Exit {
        match self {
            CliError::Spec(_) | CliError::Usage(_) => Exit::BadInput,
            CliError::Infrastructure(_) => Exit::Infrastructure,
            CliError::Reported(exit) => *exit,
        }
    }

    /// A GitHub error about what the user passed (a SHA, a branch, a
    /// login): bad input (exit 2), with its hint.
    pub(crate) fn github_usage(e: gate_github::GithubError) -> Self {
        CliError::Usage(github_problem(&e))
    }

    pub(crate) fn hint(&self) -> Option<&str> {
        match self {
            CliError::Usage(p) | CliError::Infrastructure(p) => p.hint(),
            CliError::Spec(gate_spec::budget::SpecError::Read { .. }) => {
                Some("pass the spec with `--budgets FILE` (default: budgets.yaml in the current folder)")
            }
            CliError::Spec(gate_spec::budget::SpecError::TooLarge { .. }) => {
                Some("check that --budgets names a spec file, not a device or a stream")
            }
            _ => None,
        }
    }
}

/// A spec's errors end a command as bad input (`?` on a [`gate_spec::budget::Diagnostics`]).
impl From<gate_spec::budget::Diagnostics> for CliError {
    fn from(d: gate_spec::budget::Diagnostics) -> Self {
        CliError::Spec(d.into())
    }
}

/// A GitHub failure ends a command as infrastructure (exit 3), with its
/// hint: the service, the token or the environment failed. The few that
/// judge the user's own input go through [`CliError::github_usage`].
impl From<gate_github::GithubError> for CliError {
    fn from(e: gate_github::GithubError) -> Self {
        CliError::Infrastructure(github_problem(&e))
    }
}

/// A GitHub failure's message and the fix its `hint()` names.
pub(crate) fn github_problem(e: &gate_github::GithubError) -> Problem {
    Problem::new(e.to_string()).with_hint(e.hint())
}
