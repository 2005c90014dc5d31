//! The pipeline wing: what the commands run on. Loading a spec and its
//! harness, the run around the profiles, concluding and emitting the
//! verdict, the output set and gate's own printing (redacted, inert in
//! GitHub Actions), shards, the planner and its sweep, reading reports and baselines.
//! It builds on the app settings and errors, never on a command
//! (tests/it/architecture.rs holds that).

// First, so its `print!`/`println!` (which survive a closed stdout) are the
// ones every module below uses.
#[macro_use]
pub(crate) mod output;
pub(crate) mod actions;
pub(crate) mod adapters;
pub(crate) mod conclude;
pub(crate) mod emit;
pub(crate) mod harness;
pub(crate) mod plan;
pub(crate) mod redact;
pub(crate) mod reports;
pub(crate) mod run;
pub(crate) mod shard;
pub(crate) mod sweep;
pub(crate) mod versions;
