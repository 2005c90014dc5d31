//! The `gate` command line: clap definitions and one file per subcommand,
//! over gate's framework-neutral crates (spec, runner, report, render,
//! github). It names no framework's types: a spec's workloads run in a
//! harness (gate-runner's protocol), the spec's own or, in the stock
//! `gate`, the built-in models the same binary serves (gate-builtins, the
//! `builtins` feature). Data goes to stdout, logs and errors to stderr
//! (with `hint:` lines).
//!
//! Internal to gate: the installed `gate` is the product, this library's
//! API is only [`main`] for the binary, and any release may change it.

// First, so its `print!`/`println!` (which survive a closed stdout) are the
// ones every subcommand below uses.
#[macro_use]
mod output;
mod actions;
mod baseline;
mod check;
mod comment;
mod completions;
mod conclude;
mod doctor;
mod emit;
mod fit;
mod harness;
mod history;
mod init;
mod merge;
mod minors;
mod plan;
mod shard;
mod validate;

use clap::{Parser, Subcommand};

use gate_runner::exit::Exit;
use gate_spec::budget::WorkloadCheck;
use gate_spec::hint::Problem;

/// The spec every subcommand reads unless `--budgets` names another.
const DEFAULT_SPEC: &str = "budgets.yaml";
/// The output folder `check` writes and `comment`, `merge`, `baseline` read.
const DEFAULT_OUT: &str = "target/gate";

#[derive(Debug, Parser)]
#[command(
    name = "gate",
    version,
    long_version = LONG_VERSION,
    about = "Stops GPU-memory regressions in candle and burn models before they merge"
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Profile every component of the spec, decide, write the report; exit 0 pass, 1 fail.
    Check(check::CheckArgs),
    /// Upsert the pull-request comment from an output folder (one comment per gate id).
    Comment(comment::CommentArgs),
    /// Combine the output folders of sharded `check --only` jobs into one report and verdict.
    Merge(merge::MergeArgs),
    /// The baseline store: `publish` this run's report (on the default branch).
    Baseline(baseline::BaselineArgs),
    /// Check a spec and run nothing.
    Validate(validate::ValidateArgs),
    /// Print what this machine offers (CPU, GPU, driver, CUDA, NVML, memory) and what a run here can measure.
    Doctor(doctor::DoctorArgs),
    /// Write a starter budgets.yaml and the GitHub Actions workflows for your repository.
    Init(init::InitArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell) to stdout.
    Completions(completions::CompletionsArgs),
    /// Print the man page (roff) to stdout.
    Man(completions::ManArgs),
    /// The largest batch of a component that passes every budget (two measured batches, a linear fit, confirmed).
    Fit(fit::FitArgs),
    /// The measured fix for a component over budget: its levers probed, every combination predicted, the cheapest that passes measured (docs/plan.md).
    Plan(plan::PlanArgs),
    /// One metric over the stored baselines, oldest first, with its budget (slow drift).
    History(history::HistoryArgs),
}

/// `gate --version`'s line on the built-in models (the `builtins` feature).
#[cfg(feature = "builtins")]
macro_rules! builtins_line {
    () => {
        "\nbuilt-in models: yes (mlp, tft, dqn, ppo, mamba2)"
    };
}
#[cfg(not(feature = "builtins"))]
macro_rules! builtins_line {
    () => {
        "\nbuilt-in models: no (built without `builtins`: every spec names its `harness:`)"
    };
}

/// `gate --version`: the version, the commit it was built from (`unknown`
/// outside a git checkout), whether this build has CUDA, its target, the
/// repository `gate init` takes gate from (see build.rs) and whether it
/// has the built-in models.
#[cfg(feature = "cuda")]
pub const LONG_VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    "\ncommit: ",
    env!("GATE_GIT_COMMIT"),
    "\ncuda: yes (compute capability ",
    env!("GATE_CUDA_COMPUTE_CAP"),
    ")\ntarget: ",
    env!("GATE_TARGET"),
    "\nrepository: ",
    env!("GATE_REPOSITORY"),
    builtins_line!(),
);
#[cfg(not(feature = "cuda"))]
pub(crate) const LONG_VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    "\ncommit: ",
    env!("GATE_GIT_COMMIT"),
    "\ncuda: no (CPU build: `--backend cpu` only; a GPU run needs a build with `--features cuda`)",
    "\ntarget: ",
    env!("GATE_TARGET"),
    "\nrepository: ",
    env!("GATE_REPOSITORY"),
    builtins_line!(),
);

/// What this binary serves itself: the checks of its built-in workloads'
/// configs, when it has them (the stock `gate`, feature `builtins`). A spec
/// without `harness:` runs on them; one with `harness:` on the harness it
/// names.
#[derive(Clone, Copy, Default)]
pub(crate) struct App<'a> {
    pub builtins: Option<&'a dyn WorkloadCheck>,
}

/// The built-in workloads a binary built on this crate serves itself:
/// how their configs are checked. Their profiles run in the same binary,
/// through the harness protocol (its `__resolve` and `profile` requests),
/// so `main` needs nothing else of them.
#[derive(Clone, Copy)]
pub struct Builtins<'a> {
    /// The built-in kinds' checks of a component's workload (gate-builtins').
    pub check: &'a dyn WorkloadCheck,
}

/// Runs `gate` with the command line `args` (the program name first) and
/// returns its exit code (DESIGN.md: 0 pass, 1 fail, 2 bad input, 3
/// infrastructure, 130 interrupted). `builtins`: the built-in workloads
/// this binary serves, if any.
pub fn main(args: Vec<std::ffi::OsString>, builtins: Option<Builtins<'_>>) -> std::process::ExitCode {
    let app = App {
        builtins: builtins.map(|b| b.check),
    };
    main_with(args, &app).into()
}

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
    fn github_usage(e: gate_github::GithubError) -> Self {
        CliError::Usage(github_problem(&e))
    }

    fn hint(&self) -> Option<&str> {
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
fn github_problem(e: &gate_github::GithubError) -> Problem {
    Problem::new(e.to_string()).with_hint(e.hint())
}

/// Runs the parsed command and returns the process exit.
pub(crate) fn run(cli: Cli, app: &App<'_>) -> Exit {
    // In GitHub Actions, the workflow-command guard, closed at exit however
    // the process ends (cli/actions.rs). Not for the commands whose stdout
    // is a file's content.
    if !matches!(cli.command, Command::Completions(_) | Command::Man(_)) {
        let json = match &cli.command {
            Command::Check(a) => a.message_format == emit::MessageFormat::Json,
            Command::Merge(a) => a.message_format == emit::MessageFormat::Json,
            _ => false,
        };
        if json {
            actions::keep_stdout_for_data();
        }
        actions::open();
    }
    // The GitHub layer's log lines go through the same writer as ours.
    gate_github::set_log(|line| output::stderr(format_args!("{line}\n")));
    let exit = run_command(cli, app);
    actions::close();
    exit
}

fn run_command(cli: Cli, app: &App<'_>) -> Exit {
    if let Some(text) = std::env::var_os(actions::PANIC_ENV) {
        panic!("{}", text.to_string_lossy());
    }
    // SIGINT/SIGTERM: exit 130 promptly in every phase (see forward_signals).
    // A profile child (`crate::child`) never gets here: it is stopped by its
    // parent and keeps the default.
    if let Err(e) = gate_runner::forward_signals() {
        eprintln!("warning: cannot handle Ctrl-C ({e}); an interrupted run may leave profiles running");
    }
    // gate's GitHub tuning variables are checked whatever the command: a
    // malformed one is a mistake in the environment, never a silent default.
    if let Err(e) = gate_github::client::Settings::check_env() {
        eprintln!("{}", github_problem(&e).lines());
        return Exit::BadInput;
    }
    let result = match cli.command {
        Command::Check(a) => check::run(a, app),
        Command::Fit(a) => fit::run(a, app),
        Command::Plan(a) => plan::run(a, app),
        Command::Validate(a) => validate::run(a, app),
        Command::Comment(a) => comment::run(a),
        Command::Merge(a) => merge::run(a),
        Command::Baseline(a) => baseline::run(a),
        Command::Doctor(a) => doctor::run(a),
        Command::History(a) => history::run(a),
        Command::Init(a) => init::run(a, app),
        Command::Completions(a) => completions::run(a),
        Command::Man(a) => completions::man(a),
    };
    match result {
        Ok(exit) => exit,
        // A helper killed by our own SIGINT/SIGTERM (a harness's build or
        // `__resolve`) fails its caller; the signal is what ended the run,
        // and the signal thread has said so (#43: was exit 3 "killed by SIGKILL").
        Err(_) if gate_runner::child::stopping() => Exit::Interrupted,
        Err(e) => {
            match &e {
                // Diagnostics already carry their own `hint:` lines.
                CliError::Reported(_) => {}
                CliError::Spec(gate_spec::budget::SpecError::Invalid(d)) => {
                    eprintln!("{d}");
                    eprintln!("error: {}", d.summary());
                }
                other => eprintln!("{}", gate_spec::hint::lines(other, other.hint())),
            }
            e.exit()
        }
    }
}

/// Parses `args` (the program name first) and runs them.
pub(crate) fn main_with(args: Vec<std::ffi::OsString>, app: &App<'_>) -> Exit {
    let cli = match Cli::try_parse_from(args) {
        Ok(c) => c,
        Err(e) => {
            // clap repeats a value it refuses, which may be the token.
            let text = e.render().to_string();
            let shown = output::redacted(&text);
            // An error (not --help or --version) is guarded like any command.
            if e.use_stderr() {
                actions::open();
            }
            // In Actions every line goes through `eprint!`/`print!`, which
            // make it inert as a workflow command (an argument may be hostile).
            if shown == text && !actions::active() {
                let _ = e.print();
            } else if e.use_stderr() {
                eprint!("{shown}");
            } else {
                print!("{shown}");
            }
            actions::close();
            return if e.use_stderr() { Exit::BadInput } else { Exit::Pass };
        }
    };
    run(cli, app)
}

/// `--backend`: the command line's face of [`Backend`], so the probe
/// knows nothing of clap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum BackendArg {
    /// The CPU, measured by the counting allocator (the embedded default).
    Cpu,
    /// An NVIDIA GPU, measured by the CUDA memory pool and NVML (`cuda` feature).
    Cuda,
    /// CUDA when this build has it and a GPU is usable, else the CPU.
    Auto,
}

impl From<BackendArg> for gate_probe::Backend {
    fn from(b: BackendArg) -> gate_probe::Backend {
        match b {
            BackendArg::Cpu => gate_probe::Backend::Cpu,
            BackendArg::Cuda => gate_probe::Backend::Cuda,
            BackendArg::Auto => gate_probe::Backend::Auto,
        }
    }
}
