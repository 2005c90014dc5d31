//! `gate completions SHELL` and `gate man`: generated from the clap
//! definition, so they never drift from the real arguments.

use std::io::Write;

use clap::{Args, CommandFactory};
use clap_complete::Shell;

use super::Cli;
use crate::errors::CliError;
use gate_runner::exit::Exit;
use gate_spec::hint::Problem;

#[derive(Debug, Args)]
pub(crate) struct CompletionsArgs {
    /// The shell to complete for. Install, e.g.:
    /// bash: `gate completions bash > ~/.local/share/bash-completion/completions/gate`;
    /// zsh: `gate completions zsh > "${fpath[1]}/_gate"`;
    /// fish: `gate completions fish > ~/.config/fish/completions/gate.fish`.
    #[arg(value_enum)]
    pub shell: Shell,
}

#[derive(Debug, Args)]
pub(crate) struct ManArgs {}

fn io_error(e: std::io::Error) -> CliError {
    CliError::Infrastructure(Problem::new(format!("cannot write to stdout: {e}")))
}

pub(super) fn run(args: CompletionsArgs) -> Result<Exit, CliError> {
    let mut cmd = Cli::command();
    let mut out = Vec::new();
    clap_complete::generate(args.shell, &mut cmd, "gate", &mut out);
    crate::pipeline::output::stdout_bytes(&out).map_err(io_error)?;
    Ok(Exit::Pass)
}

/// The man page of `gate` with one section per (visible) subcommand, so
/// `man gate` documents every flag.
pub(super) fn man(_args: ManArgs) -> Result<Exit, CliError> {
    let out = render_man().map_err(io_error)?;
    crate::pipeline::output::stdout_bytes(&out).map_err(io_error)?;
    Ok(Exit::Pass)
}

fn render_man() -> std::io::Result<Vec<u8>> {
    let cmd = Cli::command();
    let man = clap_mangen::Man::new(cmd.clone());
    let mut out = Vec::new();
    man.render_title(&mut out)?;
    man.render_name_section(&mut out)?;
    man.render_synopsis_section(&mut out)?;
    man.render_description_section(&mut out)?;
    man.render_options_section(&mut out)?;
    man.render_subcommands_section(&mut out)?;
    // Each subcommand's own options, under a heading of its own.
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = sub.get_name();
        writeln!(out, ".SH \"GATE {}\"", name.to_uppercase())?;
        let mut sub_page = Vec::new();
        // clap names need a 'static str; this runs once per process.
        let full: &'static str = Box::leak(format!("gate {name}").into_boxed_str());
        let sub_man = clap_mangen::Man::new(sub.clone().name(full));
        sub_man.render_synopsis_section(&mut sub_page)?;
        sub_man.render_description_section(&mut sub_page)?;
        sub_man.render_options_section(&mut sub_page)?;
        // The sub-page's own `.SH` headings become sub-headings here.
        let text = String::from_utf8_lossy(&sub_page).replace(".SH ", ".SS ");
        out.extend_from_slice(text.as_bytes());
    }
    writeln!(
        out,
        ".SH \"EXIT STATUS\"\n0 pass; 1 a budget or regression tolerance is exceeded (with \\-\\-strict, also a warning); \
         2 bad input (the spec or the arguments); 3 infrastructure (no GPU where one was required, CUDA/driver or network failure)."
    )?;
    man.render_version_section(&mut out)?;
    Ok(out)
}
