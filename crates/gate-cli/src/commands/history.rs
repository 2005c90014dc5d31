//! `gate history METRIC`: one metric over the stored baselines, oldest
//! first, with its budget, so a budget that drifts up by small steps (none
//! of which fails a pull request) is seen. Reads a folder of report.json
//! files, or the local baseline branch (`reports/<card>/<sha>.json`, as
//! `gate baseline publish` stores them, or `reports/<sha>.json` as it did
//! before cards) in the commit order of a branch.

use std::path::{Path, PathBuf};

use clap::Args;

use crate::errors::CliError;
use gate_contract::report::Report;
use gate_runner::exit::Exit;
use gate_spec::hint::Problem;
use gate_spec::metric::{format_value, Metric};

#[derive(Debug, Args)]
pub(crate) struct HistoryArgs {
    /// The metric, e.g. `training_peak`, or `COMPONENT.METRIC` (`tft.activations`).
    pub metric: String,
    /// Only this component (default: every component that has the metric).
    #[arg(long)]
    pub component: Option<String>,
    /// A folder of report.json files (any names; ordered by their `commit`'s
    /// place in `--branch` when git knows it, else by modification time).
    #[arg(long, value_name = "DIR", conflicts_with = "store")]
    pub reports: Option<PathBuf>,
    /// The local baseline branch to read (fetch it first: `git fetch origin gate-baselines:gate-baselines`).
    #[arg(long, default_value = gate_github::store::DEFAULT_BRANCH)]
    pub store: String,
    /// The card whose reports to read from a store that holds several
    /// (its folder under `reports/`, e.g. `cuda-nvidia-h100-80gb-hbm3-x86_64`).
    #[arg(long, value_name = "CARD", conflicts_with = "reports")]
    pub card: Option<String>,
    /// The branch whose commits order the history.
    #[arg(long, default_value = "HEAD")]
    pub branch: String,
    /// How many of the newest reports to show.
    #[arg(long, default_value_t = 20)]
    pub last: usize,
}

/// One row: a report's figure for one component.
struct Row {
    commit: String,
    component: String,
    value: Option<f64>,
    budget: Option<(String, f64)>,
}

pub(super) fn run(args: HistoryArgs) -> Result<Exit, CliError> {
    let (component, metric_name) = match args.metric.split_once('.') {
        Some((c, m)) => (Some(c.to_string()), m.to_string()),
        None => (args.component.clone(), args.metric.clone()),
    };
    let metric = Metric::parse(&metric_name).ok_or_else(|| {
        let names: Vec<&str> = Metric::ALL.iter().map(|m| m.name()).collect();
        CliError::Usage(
            Problem::new(format!("unknown metric `{metric_name}`")).with_hint(gate_spec::hint::suggest(
                &metric_name,
                &names,
                "metrics",
            )),
        )
    })?;
    let order = commit_order(&args.branch);
    let mut reports = match &args.reports {
        Some(dir) => from_folder(dir)?,
        None => from_store(&args.store, args.card.as_deref(), &order)?,
    };
    // Oldest first: by the commits' places on the branch when git knows
    // every one of them, else in the order found (file times).
    let age = |r: &Report| r.commit.as_deref().and_then(|c| order.iter().position(|o| o == c));
    if reports.iter().all(|(r, _)| age(r).is_some()) {
        reports.sort_by_key(|(r, _)| std::cmp::Reverse(age(r)));
    } else {
        reports.sort_by_key(|(_, i)| *i);
    }
    let keep = reports.len().saturating_sub(args.last);
    let reports: Vec<Report> = reports.into_iter().skip(keep).map(|(r, _)| r).collect();
    if reports.is_empty() {
        return Err(CliError::Usage(Problem::new("no stored reports to show").with_hint(
            "pass `--reports DIR`, or fetch the baseline branch: `git fetch origin gate-baselines:gate-baselines`",
        )));
    }
    let rows = rows(&reports, metric, component.as_deref());
    if rows.is_empty() {
        return Err(CliError::Usage(
            Problem::new(format!(
                "no report has `{}`{}",
                metric.name(),
                component.map_or(String::new(), |c| format!(" for `{c}`"))
            ))
            .with_hint("check the metric and component names with `gate validate`"),
        ));
    }
    print!("{}", render(metric, &rows, reports.len()));
    Ok(Exit::Pass)
}

fn rows(reports: &[Report], metric: Metric, component: Option<&str>) -> Vec<Row> {
    let mut out = Vec::new();
    for r in reports {
        let commit = r.commit.as_deref().unwrap_or("?").chars().take(10).collect::<String>();
        for (name, c) in &r.components {
            if component.is_some_and(|w| w != name) {
                continue;
            }
            let value = c.metrics.get(&metric).map(|v| v.value);
            let budget = r
                .results
                .iter()
                .find(|b| &b.component == name && b.metric == metric.name())
                .map(|b| (b.op.symbol().to_string(), b.limit));
            if value.is_some() || budget.is_some() {
                out.push(Row {
                    commit: commit.clone(),
                    component: name.clone(),
                    value,
                    budget,
                });
            }
        }
    }
    out
}

fn render(metric: Metric, rows: &[Row], reports: usize) -> String {
    let unit = metric.unit();
    let mut s = format!(
        "{} over the last {reports} stored reports, oldest first\n\n",
        metric.name()
    );
    s.push_str(&format!(
        "{:<12} {:<16} {:>14} {:>16} {:>8} {:>9}\n",
        "commit", "component", "value", "budget", "used", "change"
    ));
    let mut last: std::collections::BTreeMap<&str, f64> = Default::default();
    for r in rows {
        let value = r.value.map_or("—".into(), |v| format_value(unit, v));
        let budget = r
            .budget
            .as_ref()
            .map_or("—".into(), |(op, l)| format!("{op} {}", format_value(unit, *l)));
        let used = match (r.value, &r.budget) {
            (Some(v), Some((_, l))) if *l > 0.0 => format!("{:.1}%", v / l * 100.0),
            _ => "—".into(),
        };
        let change = match (r.value, last.get(r.component.as_str())) {
            (Some(v), Some(p)) if *p > 0.0 => format!("{:+.1}%", (v / p - 1.0) * 100.0),
            _ => String::new(),
        };
        if let Some(v) = r.value {
            last.insert(&r.component, v);
        }
        s.push_str(&format!(
            "{:<12} {:<16} {value:>14} {budget:>16} {used:>8} {change:>9}\n",
            r.commit, r.component
        ));
    }
    s
}

/// The commits of `branch`, newest first (empty outside a git checkout).
fn commit_order(branch: &str) -> Vec<String> {
    git(&["log", "--first-parent", "--format=%H", "-n", "2000", branch])
        .map(|o| o.lines().map(str::to_string).collect())
        .unwrap_or_default()
}

fn git(args: &[&str]) -> Option<String> {
    let o = gate_runner::child::command("git")
        .args(args)
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    o.status
        .success()
        .then(|| String::from_utf8_lossy(&o.stdout).into_owned())
}

/// Every report.json in `dir`, with its place among the files by modification time.
fn from_folder(dir: &Path) -> Result<Vec<(Report, usize)>, CliError> {
    let entries = std::fs::read_dir(dir).map_err(|e| {
        CliError::Usage(
            Problem::new(format!("cannot read {}: {e}", dir.display()))
                .with_hint("pass a folder of report.json files written by `gate check`"),
        )
    })?;
    let mut files: Vec<(std::time::SystemTime, PathBuf)> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .map(|p| {
            (
                std::fs::metadata(&p)
                    .and_then(|m| m.modified())
                    .unwrap_or(std::time::UNIX_EPOCH),
                p,
            )
        })
        .collect();
    files.sort();
    let mut out = Vec::new();
    for (i, (_, p)) in files.into_iter().enumerate() {
        match gate_report::baseline::load_found(&p) {
            Ok(r) => out.push((r, i)),
            Err(e) => eprintln!("warning: skipping {}: {e}", p.display()),
        }
    }
    Ok(out)
}

/// The reports of one card stored on the local baseline branch for the
/// commits in `order`: the card's folder, else (a store written before
/// cards) the file straight under `reports/`.
fn from_store(store: &str, card: Option<&str>, order: &[String]) -> Result<Vec<(Report, usize)>, CliError> {
    use gate_github::store::Place;
    let listing = git(&["ls-tree", "-r", "--name-only", store, "reports/"])
        .filter(|l| !l.trim().is_empty())
        .ok_or_else(|| {
            CliError::Usage(
                Problem::new(format!("no local branch `{store}` with reports/ (the baseline store)")).with_hint(
                    format!("fetch it: `git fetch origin {store}:{store}`, or pass `--reports DIR`"),
                ),
            )
        })?;
    let stored: Vec<(String, Place)> = listing
        .lines()
        .filter_map(|l| l.strip_prefix("reports/"))
        .filter_map(gate_github::store::stored_at)
        .collect();
    let cards: std::collections::BTreeSet<&str> = stored
        .iter()
        .filter_map(|(_, p)| match p {
            Place::Card(c) => Some(c.as_str()),
            Place::BeforeCards => None,
        })
        .collect();
    let listed = || cards.iter().copied().collect::<Vec<_>>().join(", ");
    let card = match (card, cards.len()) {
        (Some(c), _) if cards.contains(c) => Some(c.to_string()),
        (Some(c), _) => {
            return Err(CliError::Usage(
                Problem::new(format!("the store `{store}` holds no reports of card `{c}`"))
                    .with_hint(format!("its cards: {}", listed())),
            ))
        }
        (None, 0) => None,
        (None, 1) => cards.first().map(|c| c.to_string()),
        (None, _) => {
            return Err(CliError::Usage(
                Problem::new(format!("the store `{store}` holds several cards' reports"))
                    .with_hint(format!("pass --card with one of: {}", listed())),
            ))
        }
    };
    let own = card.map(Place::Card);
    let mut out = Vec::new();
    for (i, sha) in order.iter().enumerate() {
        let at = |p: &Place| stored.iter().any(|(s, q)| s == sha && q == p);
        let file = match &own {
            Some(p @ Place::Card(c)) if at(p) => format!("reports/{c}/{sha}.json"),
            _ if at(&Place::BeforeCards) => format!("reports/{sha}.json"),
            _ => continue,
        };
        let Some(text) = git(&["show", &format!("{store}:{file}")]) else {
            continue;
        };
        // The one reader of reports (its limits, its checks), as everywhere.
        match gate_report::baseline::parse(&text, &format!("{file} on {store}")) {
            Ok(r) => out.push((r, order.len() - i)),
            Err(e) => eprintln!("warning: skipping {file} on {store}: {e}"),
        }
    }
    Ok(out)
}
