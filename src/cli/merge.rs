//! `gate merge DIR...`: combines the reports of sharded jobs (`gate check
//! --only ...` on a matrix of runners) into one report, verdict and comment.

use std::io::IsTerminal;
use std::path::PathBuf;

use clap::Args;

use super::check::{add, begin_set, commit_set, guard_commands, write_github_outputs};
use super::comment::{read_baseline, read_report};
use super::CliError;
use crate::exit::Exit;
use crate::report::{self, baseline::Outcome, Report, Reserve, SCHEMA};

#[derive(Debug, Args)]
pub struct MergeArgs {
    /// The shards' output folders, each with a report.json.
    #[arg(required = true, value_name = "DIR")]
    pub dirs: Vec<PathBuf>,
    /// Folder for the merged report.json, junit.xml and comment.md.
    #[arg(long, default_value = "target/gate")]
    pub out: PathBuf,
    /// The spec (default: the one the shards name).
    #[arg(long)]
    pub budgets: Option<PathBuf>,
    /// Treat warnings as failures (also on when any shard ran with --strict).
    #[arg(long)]
    pub strict: bool,
}

pub fn run(args: MergeArgs) -> Result<Exit, CliError> {
    let mut shards = Vec::new();
    for d in &args.dirs {
        shards.push((d.join("report.json").display().to_string(), read_report(d)?));
    }
    let merged = report::merge::merge(&shards).map_err(|e| CliError::Usage {
        message: e.to_string(),
        hint: "merge the output folders of one `gate check` matrix: same spec, same kind of runner, each component in one shard".into(),
    })?;
    let budgets = args.budgets.clone().unwrap_or_else(|| PathBuf::from(&merged.spec));
    let spec = crate::budget::load(&budgets)?;
    let strict = args.strict || merged.strict;

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
            return Err(CliError::Usage {
                message: format!(
                    "the shards measured `{name}`, which is not a component of {}",
                    budgets.display()
                ),
                hint: "pass the spec the shards ran with: --budgets FILE".into(),
            });
        }
    }
    let baseline = args
        .dirs
        .iter()
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
        });
    let reserve = match merged.measured_reserve {
        Some(bytes) => Reserve { bytes, measured: true },
        None => Reserve {
            bytes: spec.device.reserve.0,
            measured: false,
        },
    };
    let testbed = merged.testbed.clone();
    let base = baseline.report();
    let comparable = base.is_some_and(|b| report::baseline::comparable(&testbed, &b.testbed));
    report::add_ratios(&mut components); // variants: loss and step-time ratios
    let verdict = report::decide(&spec, &components, base, comparable, reserve, strict);
    let mut summary = verdict.summary;
    report::baseline::annotate(&mut summary, &baseline, &testbed);
    let report = super::output::scrub(Report {
        schema: SCHEMA,
        gate_version: env!("CARGO_PKG_VERSION").into(),
        commit: merged.commit.clone(),
        spec: budgets.display().to_string(),
        baseline: report::baseline::info(&baseline, &testbed),
        testbed,
        components,
        ensemble: verdict.ensemble,
        results: verdict.results,
        summary,
        wall_seconds: merged.wall_seconds,
    });

    let json = serde_json::to_string_pretty(&report).expect("the report serializes");
    let junit = crate::render::junit::render(&report, time::OffsetDateTime::now_utc()).map_err(|e| {
        CliError::Infrastructure {
            message: format!("cannot render JUnit XML: {e}"),
            hint: String::new(),
        }
    })?;
    if !crate::runner::begin_writing() {
        return Ok(Exit::Interrupted);
    }
    // One set: all files or none replace the old ones (see OutputSet).
    let mut set = begin_set(&args.out)?;
    add(&mut set, "report.json", json.as_bytes())?;
    add(&mut set, "junit.xml", junit.as_bytes())?;
    // A shard's pr.json tells the comment job which pull request this is.
    if let Some(pr) = args.dirs.iter().map(|d| d.join("pr.json")).find(|p| p.exists()) {
        if let Ok(bytes) = std::fs::read(pr) {
            add(&mut set, "pr.json", &bytes)?;
        }
    }
    write_github_outputs(&mut set, &report, base)?;
    commit_set(set)?;
    let color = crate::render::table::use_color(std::io::stdout().is_terminal());
    print!("{}", guard_commands(crate::render::table::render(&report, color)));
    eprintln!(
        "merged {} shards into {}",
        args.dirs.len(),
        args.out.join("report.json").display()
    );
    Ok(if report.summary.status == "pass" {
        Exit::Pass
    } else {
        Exit::Fail
    })
}
