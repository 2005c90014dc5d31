//! The command wing: the clap tree ([`Cli`], [`Command`]), one file per
//! subcommand, and the dispatch from a parsed command line to its `run`.
//! A command builds on the pipeline (`crate::pipeline`) and on the app
//! settings and errors below it, never on another command
//! (tests/it/architecture.rs holds that).

mod baseline;
mod check;
mod comment;
mod completions;
mod doctor;
mod fit;
mod history;
mod init;
mod merge;
mod plan;
mod validate;

use clap::{Parser, Subcommand};

use crate::app::{App, LONG_VERSION};
use crate::errors::CliError;
use crate::pipeline::{actions, emit, output};
use gate_runner::exit::Exit;

#[derive(Debug, Parser)]
#[command(
    name = "gate",
    version,
    long_version = LONG_VERSION,
    about = "Stops GPU-memory regressions in ML models before they merge"
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

/// Runs the parsed command and returns the process exit.
pub(crate) fn run(cli: Cli, app: &App<'_>) -> Exit {
    // In GitHub Actions, the workflow-command guard, closed at exit however
    // the process ends (pipeline/actions.rs). Not for the commands whose stdout
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
        eprintln!("{}", crate::errors::github_problem(&e).lines());
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
            let shown = crate::pipeline::redact::redacted(&text);
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
