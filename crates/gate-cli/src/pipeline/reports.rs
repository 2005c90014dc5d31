//! Reading what a run wrote and what it compares with: an output folder's
//! report.json, baseline.json and pr.json (`comment`, `merge`, `baseline
//! publish`), and the baseline and stored reports `check` resolves before
//! its profiles run.

use std::path::Path;

use crate::errors::CliError;
use gate_contract::report::Report;
use gate_report::baseline::Candidates;
use gate_spec::hint::Problem;

/// The most bytes of `pr.json` read (it holds a number, a repository and a branch).
pub(crate) const PR_JSON_BYTES: u64 = 64 << 10;

/// Reads DIR/report.json; a missing or bad one is bad input.
pub(crate) fn read_report(dir: &Path) -> Result<Report, CliError> {
    let path = dir.join("report.json");
    // Scrubbed: what is posted or published from it is public, and the
    // folder may come from elsewhere (an artifact).
    gate_report::baseline::load_found(&path)
        .map(crate::pipeline::redact::scrub)
        .map_err(|e| {
            CliError::Usage(
                Problem::new(e.to_string().replacen("the baseline ", "", 1)).with_hint(format!(
                    "run `gate check --out {}` first (or download the job's output folder there)",
                    dir.display()
                )),
            )
        })
}

/// DIR/baseline.json, when `gate check` had a baseline; unreadable is a warning.
pub(crate) fn read_baseline(dir: &Path) -> Option<Report> {
    read_found(dir, "baseline.json", "the comment has no diff")
}

/// DIR/NAME (baseline.json, anchor.json), when `gate check` wrote it;
/// unreadable is a warning.
pub(crate) fn read_found(dir: &Path, name: &str, then: &str) -> Option<Report> {
    let path = dir.join(name);
    if !path.exists() {
        return None;
    }
    match gate_report::baseline::load_found(&path) {
        Ok(r) => Some(crate::pipeline::redact::scrub(r)),
        Err(e) => {
            eprintln!("warning: {e}; {then}");
            None
        }
    }
}

/// `--baseline FILE|auto|none`: a bad FILE is bad input (exit 2); under
/// `auto` every problem is a missing baseline with its reason, never a
/// crash, and a store of several cards gives each card's nearest report
/// (the run's own is chosen once it has measured). With it, for a pull
/// request, where its history can be read.
pub(crate) fn resolve_baseline(
    arg: &str,
    branch: &str,
) -> Result<(Candidates, Option<gate_github::HistorySource>), CliError> {
    use gate_report::baseline::Outcome;
    match arg {
        "none" => Ok((
            Outcome::Missing {
                reason: "--baseline none".into(),
            }
            .into(),
            None,
        )),
        "auto" => {
            let auto = gate_github::auto_baseline(gate_github::AutoInputs::from_env(
                branch,
                gate_github::store::DEFAULT_DEPTH,
            ));
            for n in &auto.notes {
                eprintln!("{n}");
            }
            Ok((auto.outcome, auto.history))
        }
        file => {
            let path = std::path::Path::new(file);
            let r = gate_report::baseline::load_file(path).map_err(|e| {
                CliError::Usage(
                    Problem::new(e.to_string())
                        .with_hint("pass a report.json written by `gate check`, `auto`, or `none`"),
                )
            })?;
            Ok((
                Outcome::Found {
                    report: Box::new(r),
                    source: file.to_string(),
                }
                .into(),
                None,
            ))
        }
    }
}

/// `--anchor FILE|auto|none` for a spec with an `anchor:` (`None` for one
/// without: nothing is measured since an anchor). A bad FILE is bad input
/// (exit 2); under `auto` every problem is a missing anchor with its
/// reason, and each card's anchor is found (the run's own chosen once measured).
pub(crate) fn resolve_anchor(
    arg: &str,
    spec: &gate_spec::budget::Spec,
    branch: &str,
) -> Result<Option<Candidates>, CliError> {
    use gate_report::baseline::Outcome;
    let Some(anchor) = &spec.anchor else {
        return Ok(None);
    };
    Ok(Some(match arg {
        "none" => Outcome::Missing {
            reason: "--anchor none".into(),
        }
        .into(),
        "auto" => gate_github::auto_anchor(&anchor.name, branch),
        file => {
            let r = gate_report::baseline::load_file(std::path::Path::new(file)).map_err(|e| {
                CliError::Usage(
                    Problem::new(e.to_string().replacen("the baseline ", "the anchor ", 1)).with_hint(
                        "pass the report.json of the anchor's run (`gate check` at the tag), `auto`, or `none`",
                    ),
                )
            })?;
            Outcome::Found {
                report: Box::new(r),
                source: file.to_string(),
            }
            .into()
        }
    }))
}

/// The stored reports for the history, newest first, when asked: the
/// baseline the run was compared with, then up to `count - 1` older ones
/// of its card read from the store.
pub(crate) fn stored_reports(
    from: Option<gate_github::HistorySource>,
    count: usize,
) -> impl FnOnce(Option<&Report>) -> Vec<Report> {
    move |baseline| {
        let mut all: Vec<Report> = baseline.filter(|_| count > 0).cloned().into_iter().collect();
        if let (Some(from), Some(first)) = (from, all.first()) {
            let (older, notes) = gate_github::history(from, first, count - 1);
            notes.iter().for_each(|n| eprintln!("warning: {n}"));
            all.extend(older);
        }
        all
    }
}
