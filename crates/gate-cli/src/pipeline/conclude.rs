//! The conclusion `check` and `merge` share, outside both commands: the
//! verdict on the measured components, then report.json, junit.xml, the
//! history and the GitHub files written as one set, then the run's last
//! events (the table on stdout, or `--message-format json`'s lines). Every
//! output is rendered from the one report; none decides
//! anything the verdict did not.

use std::collections::BTreeMap;

use super::output::OutputSet;
use crate::errors::CliError;
use gate_contract::report::Report;
use gate_report::Reserve;
use gate_runner::exit::Exit;
use gate_spec::hint::Problem;

/// What `check` and `merge` hand to [`conclude`]: the measured components
/// and everything the verdict and the outputs need.
pub(crate) struct Conclusion<'a> {
    pub spec: &'a gate_spec::budget::Spec,
    pub spec_path: String,
    pub commit: Option<String>,
    pub components: BTreeMap<String, gate_contract::report::ComponentReport>,
    pub baseline: &'a gate_report::baseline::Outcome,
    /// The spec's anchor as it was looked up (`None`: the spec has none);
    /// written as anchor.json beside baseline.json, for `gate merge`.
    pub anchor: Option<&'a gate_report::baseline::Outcome>,
    pub testbed: gate_contract::report::Testbed,
    pub reserve: Reserve,
    pub strict: bool,
    /// The acknowledge label, as GitHub answered about it.
    pub ack: gate_contract::report::AckInput,
    /// Stored reports of the target branch, newest first, for the history:
    /// asked for only when a budget that shows one failed or regressed.
    pub stored: Box<dyn FnOnce() -> Vec<Report> + 'a>,
    pub wall_seconds: f64,
    pub out: &'a std::path::Path,
    /// More files for the set (merge: the shards' pr.json).
    pub extra: Vec<(&'static str, Vec<u8>)>,
    /// Where the run's events go (the table, or `--message-format json`).
    pub emitter: &'a super::emit::Emitter,
    /// `check --plan`: the measured fixes, by component (report.json's `plans`).
    pub plans: BTreeMap<String, gate_contract::plan::Plan>,
}

/// The one output path of `check` and `merge`: the verdict, then
/// report.json, junit.xml and the GitHub files as one set, then the table
/// on stdout. `None` when a signal arrived before writing began.
pub(crate) fn conclude(c: Conclusion<'_>, after_write: impl FnOnce(&Report)) -> Result<Option<Report>, CliError> {
    // The token never reaches an output, whatever text carried it (#15).
    let report = super::redact::scrub(gate_report::conclude(gate_report::Inputs {
        spec: c.spec,
        spec_path: c.spec_path,
        commit: c.commit,
        gate_version: env!("CARGO_PKG_VERSION").into(),
        components: c.components,
        baseline: c.baseline,
        anchor: c.anchor,
        testbed: c.testbed,
        reserve: c.reserve,
        strict: c.strict,
        ack: c.ack,
        wall_seconds: c.wall_seconds,
        plans: c.plans,
    }));
    let json = serde_json::to_string_pretty(&report).expect("the report serializes");
    let junit = gate_render::junit::render(&report, time::OffsetDateTime::now_utc())
        .map_err(|e| CliError::Infrastructure(Problem::new(format!("cannot render JUnit XML: {e}"))))?;
    // Interrupted before writing: write nothing. Once writing has begun the
    // signal waits (a few milliseconds) so the files are one run's set.
    if !gate_runner::begin_writing() {
        return Ok(None);
    }
    // One set: all files or none replace the old ones (see OutputSet).
    let mut set = begin_set(c.out)?;
    add(&mut set, "report.json", json.as_bytes())?;
    add(&mut set, "junit.xml", junit.as_bytes())?;
    for (name, bytes) in &c.extra {
        add(&mut set, name, bytes)?;
    }
    // A folder a sharded run wrote before holds its shard.json: this run's set has none.
    if !c.extra.iter().any(|(name, _)| *name == gate_contract::shard::FILE) {
        set.remove(gate_contract::shard::FILE);
    }
    // Reading the history costs GitHub requests: only for a budget it is shown for.
    let stored = if report.results.iter().any(|r| gate_contract::history::shown(r.status)) {
        (c.stored)()
    } else {
        Vec::new()
    };
    let history = gate_contract::history::series(&report, &stored);
    history.warnings.iter().for_each(|w| eprintln!("warning: {w}"));
    if history.series.is_empty() {
        set.remove("history.json");
    } else {
        let text = serde_json::to_string_pretty(&history).expect("the history serializes");
        add(&mut set, "history.json", text.as_bytes())?;
    }
    write_github_outputs(&mut set, &report, c.baseline.report(), &history.series)?;
    match c.anchor.and_then(|a| a.report()) {
        Some(a) => add(
            &mut set,
            "anchor.json",
            serde_json::to_string_pretty(a)
                .expect("the report serializes")
                .as_bytes(),
        )?,
        None => set.remove("anchor.json"),
    }
    write_timelines(&mut set, &report)?;
    commit_set(set)?;

    c.emitter.concluded(&report, &c.out.join("report.json"));
    after_write(&report);
    Ok(Some(report))
}

/// The per-process context reserve: on CUDA measured (the largest
/// per-process context seen); on the CPU the spec's declared figure.
pub(crate) fn reserve(measured: Option<u64>, spec: &gate_spec::budget::Spec) -> Reserve {
    match measured {
        Some(bytes) => Reserve { bytes, measured: true },
        None => Reserve {
            bytes: spec.device.reserve.0,
            measured: false,
        },
    }
}

/// The exit code of a verdict.
pub(crate) fn verdict_exit(report: &Report) -> Exit {
    if report.summary.passed_run() {
        Exit::Pass
    } else {
        Exit::Fail
    }
}

/// Writes what GitHub uses next to report.json: comment.md, baseline.json
/// (for the diff when `gate comment` re-renders), pr.json (for the
/// `workflow_run` comment job); in Actions also the step summary and the
/// annotations (workflow commands, on stdout).
pub(crate) fn write_github_outputs(
    set: &mut OutputSet,
    report: &Report,
    baseline: Option<&Report>,
    history: &[gate_contract::history::Series],
) -> Result<(), CliError> {
    use gate_render::markdown;
    let event = gate_github::context::event_from_env();
    let links = gate_github::context::links(&event, &report.spec);
    // Room for the marker `gate comment` puts in front.
    let body = markdown::render_full(report, baseline, history, &links, markdown::COMMENT_LIMIT - 100);
    add(set, "comment.md", body.as_bytes())?;
    match baseline {
        Some(b) => add(
            set,
            "baseline.json",
            serde_json::to_string_pretty(b)
                .expect("the report serializes")
                .as_bytes(),
        )?,
        None => set.remove("baseline.json"),
    }
    if let gate_github::Event::PullRequest(pr) = event {
        add(
            set,
            "pr.json",
            serde_json::to_string_pretty(&pr).expect("serializes").as_bytes(),
        )?;
    }
    if let Some(path) = std::env::var_os("GITHUB_STEP_SUMMARY").filter(|p| !p.is_empty()) {
        if let Err(e) = super::output::append_atomic(std::path::Path::new(&path), format!("{body}\n").as_bytes()) {
            eprintln!("warning: cannot write the step summary: {e}");
        }
    }
    if super::actions::active() {
        super::actions::commands(&gate_render::annotations::render(report));
    }
    Ok(())
}

/// `timeline-NAME.svg` for each component with a memory timeline; those
/// an earlier run left for components this run has not are removed with
/// the set. A timeline that cannot be drawn is a warning, not a failure.
fn write_timelines(set: &mut OutputSet, report: &Report) -> Result<(), CliError> {
    use gate_render::timeline;
    let mut written = std::collections::BTreeSet::new();
    for (name, c) in &report.components {
        let Some(t) = &c.timeline else { continue };
        match timeline::svg(name, t) {
            Ok(svg) => {
                let file = timeline::file_name(name);
                add(set, &file, svg.as_bytes())?;
                written.insert(file);
            }
            Err(e) => eprintln!("warning: {e}"),
        }
    }
    let stale: Vec<String> = std::fs::read_dir(set.dir())
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|f| f.starts_with("timeline-") && f.ends_with(".svg") && !written.contains(f))
        .collect();
    for f in stale {
        set.remove(&f);
    }
    Ok(())
}

fn write_error(path: &std::path::Path, e: std::io::Error) -> CliError {
    CliError::Infrastructure(Problem::new(format!("cannot write {}: {e}", path.display())).with_hint(
        "check that --out names a writable folder with room for the files; the old files are left as they were",
    ))
}

/// Locks `out` for this run's set of files (another run's set waits).
pub(crate) fn begin_set(out: &std::path::Path) -> Result<OutputSet, CliError> {
    OutputSet::begin(out).map_err(|e| write_error(out, e))
}

pub(crate) fn add(set: &mut OutputSet, name: &str, bytes: &[u8]) -> Result<(), CliError> {
    set.add(name, bytes).map_err(|e| write_error(&set.dir().join(name), e))
}

pub(crate) fn commit_set(set: OutputSet) -> Result<(), CliError> {
    let dir = set.dir().to_path_buf();
    set.commit().map_err(|e| write_error(&dir, e))
}
