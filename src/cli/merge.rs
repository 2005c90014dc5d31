//! `gate merge DIR...`: combines the reports of sharded jobs (`gate check
//! --shard I/N` or `--only ...` on a matrix of runners) into one report,
//! verdict and comment.

use std::collections::BTreeMap;
use std::path::PathBuf;

use clap::Args;

use super::check::{conclude, reserve, verdict_exit, Conclusion};
use super::comment::{read_baseline, read_report};
use super::CliError;
use crate::exit::Exit;
use crate::hint::Problem;
use crate::report::{self, baseline::Outcome};

#[derive(Debug, Args)]
pub struct MergeArgs {
    /// The shards' output folders, each with a report.json.
    #[arg(required = true, value_name = "DIR")]
    pub dirs: Vec<PathBuf>,
    /// Folder for the merged report.json, junit.xml and comment.md.
    #[arg(long, default_value = super::DEFAULT_OUT)]
    pub out: PathBuf,
    /// The spec (default: the one the shards name).
    #[arg(long)]
    pub budgets: Option<PathBuf>,
    /// Treat warnings as failures (also on when any shard ran with --strict).
    #[arg(long)]
    pub strict: bool,
    /// In a pull request, this label on the PR turns regressions against the
    /// baseline into acknowledged warnings (never budget failures; never
    /// under --strict). An empty value turns it off.
    #[arg(long, default_value = crate::github::label::DEFAULT_LABEL, value_name = "LABEL")]
    pub acknowledge_label: String,
}

pub fn run(args: MergeArgs) -> Result<Exit, CliError> {
    // Shards of `check --shard I/N`: all N of them, once each, or the
    // verdict would not be the unsharded run's.
    let mut records = Vec::new();
    for d in &args.dirs {
        records.push((d.display().to_string(), super::shard::read(d)?));
    }
    super::shard::check_complete(&records)?;
    let mut shards = Vec::new();
    for d in &args.dirs {
        shards.push((d.join("report.json").display().to_string(), read_report(d)?));
    }
    let merged = report::merge::merge(&shards).map_err(|e| {
        CliError::Usage(Problem::new(e.to_string()).with_hint(
            "merge the output folders of one `gate check` matrix: same spec, same kind of runner, \
             each component in one shard",
        ))
    })?;
    let budgets = args.budgets.clone().unwrap_or_else(|| PathBuf::from(&merged.spec));
    let spec = crate::budget::load(&budgets)?;
    let strict = args.strict || merged.strict;
    let components = every_component(&spec, &merged, &budgets)?;
    let baseline = shards_baseline(&args.dirs);
    let reserve = reserve(merged.measured_reserve, &spec);
    // A shard's pr.json tells the comment job which pull request this is.
    let mut extra = Vec::new();
    if let Some(pr) = args.dirs.iter().map(|d| d.join("pr.json")).find(|p| p.exists()) {
        if let Ok(text) = crate::report::input::read_regular(&pr, super::comment::PR_JSON_BYTES) {
            extra.push(("pr.json", text.into_bytes()));
        }
    }
    let report = conclude(
        Conclusion {
            spec: &spec,
            spec_path: budgets.display().to_string(),
            commit: merged.commit.clone(),
            components,
            baseline: &baseline,
            testbed: merged.testbed.clone(),
            reserve,
            strict,
            ack: crate::github::label::from_env(&args.acknowledge_label),
            stored: Box::new(Vec::new),
            wall_seconds: merged.wall_seconds,
            out: &args.out,
            extra,
        },
        |_| {
            eprintln!(
                "merged {} shards into {}",
                args.dirs.len(),
                args.out.join("report.json").display()
            )
        },
    )?;
    Ok(report.as_ref().map_or(Exit::Interrupted, verdict_exit))
}

/// The shards' components, and each component of the spec no shard
/// measured as not measured; a component the spec lacks is refused.
fn every_component(
    spec: &crate::budget::Spec,
    merged: &report::merge::Merged,
    budgets: &std::path::Path,
) -> Result<BTreeMap<String, report::ComponentReport>, CliError> {
    let mut components = merged.components.clone();
    for c in &spec.components {
        if !components.contains_key(&c.name) {
            components.insert(
                c.name.clone(),
                report::not_measured_report(c, "no shard measured it (is it missing from the matrix?)"),
            );
        }
    }
    for name in components.keys() {
        if spec.component(name).is_none() {
            return Err(CliError::Usage(
                Problem::new(format!(
                    "the shards measured `{name}`, which is not a component of {}",
                    budgets.display()
                ))
                .with_hint("pass the spec the shards ran with: --budgets FILE"),
            ));
        }
    }
    Ok(components)
}

/// The first shard's baseline.json, named by its commit.
fn shards_baseline(dirs: &[PathBuf]) -> Outcome {
    dirs.iter()
        .find_map(|d| read_baseline(d))
        .map(|r| Outcome::Found {
            source: r
                .commit
                .as_deref()
                .map_or_else(|| "the shards' baseline.json".into(), |c| format!("commit {c}")),
            report: Box::new(r),
        })
        .unwrap_or(Outcome::Missing {
            reason: "no shard had one".into(),
        })
}
