//! The `gate` command line, over gate's framework-neutral crates (spec, runner, report, render,
//! github). It names no framework's types: a spec's workloads run in a
//! harness (gate-runner's protocol), the spec's own or, in the stock
//! `gate`, the built-in models the same binary serves (gate-builtins, the
//! `builtins` feature). Data goes to stdout, logs and errors to stderr
//! (with `hint:` lines).
//!
//! The floor plan, each floor importing only those below it
//! (tests/it/architecture.rs holds it):
//! - `commands`: the clap tree, the dispatch and one file per subcommand;
//!   no command imports another.
//! - `pipeline`: what the commands run on: loading a spec's harness,
//!   profiling, concluding and emitting, the output set and Actions
//!   output, shards, the planner, reading reports and baselines.
//! - `app` and `errors`: the settings every command shares and
//!   [`CliError`](errors::CliError).
//!
//! Internal to gate: the installed `gate` is the product, this library's
//! API is only [`main`] for the binary, and any release may change it.

// First, so its `print!`/`println!` (which survive a closed stdout) are the
// ones every module below uses.
#[macro_use]
mod pipeline;
mod app;
mod commands;
mod errors;

pub use app::{BackendArg, Builtins};

use app::App;

/// Runs `gate` with the command line `args` (the program name first) and
/// returns its exit code (DESIGN.md: 0 pass, 1 fail, 2 bad input, 3
/// infrastructure, 130 interrupted). `builtins`: the built-in workloads
/// this binary serves, if any.
pub fn main(args: Vec<std::ffi::OsString>, builtins: Option<Builtins<'_>>) -> std::process::ExitCode {
    if let Some(b) = builtins {
        pipeline::versions::trust_framework_of(b.sdk_manifest);
    }
    let app = App {
        builtins: builtins.map(|b| b.check),
        sdk_manifest: builtins.map(|b| b.sdk_manifest),
    };
    commands::main_with(args, &app).into()
}
