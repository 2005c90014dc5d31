//! `gate merge DIR...`: combines the reports of sharded jobs (`gate check
//! --shard I/N` or `--only ...` on a matrix of runners) into one report,
//! verdict and comment.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;

use clap::Args;

use crate::errors::CliError;
use crate::pipeline::conclude::{conclude, reserve, verdict_exit, Conclusion};
use crate::pipeline::emit::{Emitter, MessageFormat};
use crate::pipeline::reports::{read_baseline, read_found, read_report};
use gate_contract::report::Report;
use gate_report::baseline::Outcome;
use gate_runner::exit::Exit;
use gate_spec::hint::Problem;

#[derive(Debug, Args)]
pub(crate) struct MergeArgs {
    /// The shards' output folders, each with a report.json.
    #[arg(required = true, value_name = "DIR")]
    pub dirs: Vec<PathBuf>,
    /// Folder for the merged report.json, junit.xml and comment.md.
    #[arg(long, default_value = crate::app::DEFAULT_OUT)]
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
    #[arg(long, default_value = gate_github::label::DEFAULT_LABEL, value_name = "LABEL")]
    pub acknowledge_label: String,
    /// How the merged run's events are written on stdout: `human` (the
    /// table) or `json` (one JSON object a line, schema/events.schema.json).
    #[arg(long, value_enum, default_value_t = MessageFormat::Human, value_name = "FORMAT")]
    pub message_format: MessageFormat,
}

pub(super) fn run(args: MergeArgs) -> Result<Exit, CliError> {
    let (records, shards) = read_shards(&args.dirs)?;
    let merged = merge_shards(&shards)?;
    warn_of_shards(&merged, &shards);
    let budgets = args.budgets.clone().unwrap_or_else(|| PathBuf::from(&merged.spec));
    let spec = gate_spec::budget::load(&budgets)?;
    check_settings(&spec, &shards, &budgets)?;
    let strict = args.strict || merged.strict;
    let components = every_component(&spec, &merged, &budgets, &records)?;
    let baseline = shards_baseline(&args.dirs);
    let anchor = spec.anchor.as_ref().map(|a| shards_anchor(&args.dirs, &a.name));
    let reserve = reserve(merged.measured_reserve, &spec);
    // A shard's pr.json tells the comment job which pull request this is.
    let mut extra = Vec::new();
    if let Some(pr) = args.dirs.iter().map(|d| d.join("pr.json")).find(|p| p.exists()) {
        if let Ok(text) = gate_report::input::read_regular(&pr, crate::pipeline::reports::PR_JSON_BYTES) {
            extra.push(("pr.json", text.into_bytes()));
        }
    }
    let emitter = Emitter::new(args.message_format, 0);
    emitter.emit(&gate_contract::event::Event::RunStarted {
        version: gate_contract::event::VERSION,
        command: "merge".into(),
        components: components.keys().cloned().collect(),
        jobs: 0,
    });
    let report = conclude(
        Conclusion {
            spec: &spec,
            spec_path: budgets.display().to_string(),
            commit: merged.commit.clone(),
            components,
            baseline: &baseline,
            anchor: anchor.as_ref(),
            testbed: merged.testbed.clone(),
            reserve,
            strict,
            ack: gate_github::label::from_env(&args.acknowledge_label),
            stored: Box::new(Vec::new),
            wall_seconds: merged.wall_seconds,
            out: &args.out,
            extra,
            emitter: &emitter,
            // Each shard planned its own components (`check --plan`).
            plans: shards.iter().flat_map(|(_, r)| r.plans.clone()).collect(),
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

/// A shard's folder and its record (none from a gate before records).
type ShardRecord = (String, Option<gate_contract::shard::Record>);

/// A shard's report.json (its path as said in messages) and the report.
type ShardReport = (String, Report);

/// The shard records and reports of `dirs` (each `check --shard I/N`'s
/// output): all N shards, once each, of one selection and one deal, each
/// report what its record claims, or the verdict would not be the
/// unsharded run's.
fn read_shards(dirs: &[PathBuf]) -> Result<(Vec<ShardRecord>, Vec<ShardReport>), CliError> {
    let mut records = Vec::new();
    for d in dirs {
        records.push((d.display().to_string(), crate::pipeline::shard::read(d)?));
    }
    crate::pipeline::shard::check_complete(&records)?;
    crate::pipeline::shard::check_one_selection(&records)?;
    crate::pipeline::shard::check_one_deal(&records)?;
    let mut shards = Vec::new();
    for (d, (_, record)) in dirs.iter().zip(&records) {
        let report = read_report(d)?;
        if let Some(record) = record {
            crate::pipeline::shard::check_claims(d, record, &report)?;
        }
        shards.push((d.join("report.json").display().to_string(), report));
    }
    Ok((records, shards))
}

/// The shards' reports as one, or why they are not one run's.
fn merge_shards(shards: &[(String, Report)]) -> Result<gate_report::merge::Merged, CliError> {
    gate_report::merge::merge(shards).map_err(|e| {
        let hint = match e {
            gate_report::merge::MergeError::Commit { .. } => {
                "merge the output folders of one run of the matrix, at one commit: re-run the stale shard's job"
            }
            _ => {
                "merge the output folders of one `gate check` matrix: same spec, same kind of runner, \
                 each component in one shard"
            }
        };
        CliError::Usage(Problem::new(e.to_string()).with_hint(hint))
    })
}

/// What the merge takes on trust, said: shards without a commit, and a
/// newer gate's budgets (a metric or a unit this gate does not know),
/// shown, never judged and never a refusal of the shard (#54).
fn warn_of_shards(merged: &gate_report::merge::Merged, shards: &[(String, Report)]) {
    if let Some(commit) = &merged.commit {
        for origin in &merged.without_commit {
            eprintln!(
                "warning: {origin} records no commit; the merged report is of commit {commit}, as the other shards say"
            );
        }
    }
    for (origin, r) in shards {
        for row in r.results.iter().filter(|row| {
            matches!(row.metric, gate_contract::report::MetricId::Unknown(_))
                || row.unit == gate_spec::metric::Unit::Unknown
        }) {
            eprintln!(
                "warning: {origin}: `{}.{}` is of a metric or unit this gate does not know (a newer gate's \
                 report): shown, not judged",
                row.component, row.metric
            );
        }
    }
}

/// The shards' components, which must be every component of the spec,
/// each measured: one no shard measured would pass as "not measured"
/// (issue #43 item 6), so it is refused, named; one the spec lacks too.
fn every_component(
    spec: &gate_spec::budget::Spec,
    merged: &gate_report::merge::Merged,
    budgets: &std::path::Path,
    records: &[(String, Option<gate_contract::shard::Record>)],
) -> Result<BTreeMap<String, gate_contract::report::ComponentReport>, CliError> {
    let names: HashSet<&str> = spec.components.iter().map(|c| c.name.as_str()).collect();
    if let Some(name) = merged.components.keys().find(|n| !names.contains(n.as_str())) {
        return Err(CliError::Usage(
            Problem::new(format!(
                "the shards measured `{name}`, which is not a component of {}",
                budgets.display()
            ))
            .with_hint("pass the spec the shards ran with: --budgets FILE"),
        ));
    }
    let unmeasured: Vec<&str> = spec
        .components
        .iter()
        .filter(|c| {
            merged.components.get(&c.name).is_none_or(|r| {
                r.error
                    .as_ref()
                    .is_some_and(|e| e.kind == gate_contract::report::ErrorKind::NotMeasured)
            })
        })
        .map(|c| c.name.as_str())
        .collect();
    if !unmeasured.is_empty() {
        let only = records
            .iter()
            .find_map(|(_, r)| r.as_ref().filter(|r| !r.only.is_empty()));
        let hint = match only {
            Some(r) => format!(
                "the shards ran with --only {}: a merged report judges every component of the spec, \
                 so run the matrix without --only (or add jobs for the rest)",
                r.only.join(",")
            ),
            None => "give every component of the spec to one job of the matrix (`--only NAME` or \
                     `--shard I/N`), and merge every job's folder"
                .into(),
        };
        return Err(CliError::Usage(
            Problem::new(format!(
                "no shard measured {} of {}",
                listed(&unmeasured),
                budgets.display()
            ))
            .with_hint(hint),
        ));
    }
    Ok(merged.components.clone())
}

/// Names, quoted, the first few of them: `a`, `b` and 3 more.
fn listed(names: &[&str]) -> String {
    const SHOWN: usize = 8;
    let mut text = names
        .iter()
        .take(SHOWN)
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ");
    if names.len() > SHOWN {
        text.push_str(&format!(" and {} more", names.len() - SHOWN));
    }
    text
}

/// Refuses figures measured under other settings than the spec gives
/// (issue #43 item 7): another card, or a component whose workload,
/// dtype, batch, seed or config changed since the shards ran. `check`
/// judges a change against the baseline and names it; here the figures
/// would be judged as the spec's own, so the change is refused, named at
/// the spec's line.
fn check_settings(
    spec: &gate_spec::budget::Spec,
    shards: &[(String, gate_contract::report::Report)],
    budgets: &std::path::Path,
) -> Result<(), CliError> {
    let by_name: HashMap<&str, &gate_spec::budget::Component> =
        spec.components.iter().map(|c| (c.name.as_str(), c)).collect();
    let rerun = "run the shards again with this spec, or pass the spec they ran with: --budgets FILE";
    for (origin, r) in shards {
        let t = &r.testbed;
        if t.capacity_bytes != spec.device.capacity.0 || t.gated_device != spec.device.name {
            return Err(CliError::Usage(
                Problem::new(format!(
                    "{origin} was measured for the card `{}` ({} bytes) but {} gates `{}` ({} bytes)",
                    t.gated_device,
                    t.capacity_bytes,
                    budgets.display(),
                    spec.device.name,
                    spec.device.capacity.0
                ))
                .with_hint(rerun),
            ));
        }
        for (name, measured) in &r.components {
            let Some(c) = by_name.get(name.as_str()) else { continue };
            let changes = gate_report::merge::setting_changes(c, measured);
            let Some(first) = changes.first() else { continue };
            let at = first
                .key
                .strip_prefix("config.")
                .and_then(|k| c.config.key_pos(k.split('[').next().unwrap_or(k)))
                .map_or(format!("{}:{}", budgets.display(), c.line), |p| {
                    format!("{}:{}:{}", budgets.display(), p.line, p.col)
                });
            let shown: Vec<String> = changes.iter().take(4).map(|x| x.to_string()).collect();
            let more = changes.len().saturating_sub(shown.len());
            return Err(CliError::Usage(
                Problem::new(format!(
                    "{at}: `{name}` was measured under other settings than this spec gives ({origin}): {}{}",
                    shown.join(", "),
                    if more > 0 {
                        format!(" and {more} more")
                    } else {
                        String::new()
                    }
                ))
                .with_hint(rerun),
            ));
        }
    }
    Ok(())
}

/// The first shard's anchor.json: the anchor each shard looked up.
fn shards_anchor(dirs: &[PathBuf], name: &str) -> Outcome {
    dirs.iter()
        .find_map(|d| read_found(d, "anchor.json", "no drift is judged from it"))
        .map(|r| Outcome::Found {
            source: format!("anchor {name}"),
            report: Box::new(r),
        })
        .unwrap_or(Outcome::Missing {
            reason: "no shard had its anchor.json".into(),
        })
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
