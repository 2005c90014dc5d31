//! The one stream a run's output comes from: `check` and `merge` hand
//! every event (gate-contract's [`Event`]) to an [`Emitter`], which renders
//! it for a person (progress on stderr, the table on stdout) or, with
//! `--message-format json`, writes it as one JSON line on stdout. Logs
//! (`log`) go to stderr either way. The files (report.json, junit.xml, the
//! comment, the step summary, the annotations) are written by the
//! conclusion from the one report the `budget` and `run_finished` events
//! are taken from.

use std::io::{IsTerminal, Write};

use indicatif::{ProgressBar, ProgressStyle};

use gate_contract::event::Event;
use gate_contract::report::Report;

/// How a run writes its events on stdout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub(crate) enum MessageFormat {
    /// For a person: progress on stderr, the results' table on stdout.
    #[default]
    Human,
    /// For a program: one JSON object a line on stdout, every event of the
    /// run (schema/events.schema.json); logs stay on stderr.
    Json,
}

/// Where a run's events go (shared by the profiles' worker threads).
pub(crate) struct Emitter {
    format: MessageFormat,
    bar: ProgressBar,
}

impl Emitter {
    /// An emitter in `format` for a run of `profiles` profiles (0: no progress bar).
    pub(crate) fn new(format: MessageFormat, profiles: u64) -> Self {
        let bar = if format == MessageFormat::Json || profiles == 0 || !std::io::stderr().is_terminal() {
            ProgressBar::hidden()
        } else {
            let bar = ProgressBar::new(profiles);
            bar.set_style(
                ProgressStyle::with_template("{bar:30} {pos}/{len} {msg} [{elapsed}]")
                    .unwrap_or_else(|_| ProgressStyle::default_bar()),
            );
            bar.enable_steady_tick(std::time::Duration::from_millis(200));
            bar
        };
        Emitter { format, bar }
    }

    /// A log line, on stderr (above the progress bar when one is drawn).
    pub(crate) fn log(&self, line: String) {
        if self.bar.is_hidden() {
            eprintln!("{line}");
        } else {
            self.bar.println(line);
        }
    }

    /// One event of the run.
    pub(crate) fn emit(&self, event: &Event) {
        match self.format {
            MessageFormat::Json => {
                // Redacted as the human output is (#54): a failure's reason
                // may quote the token.
                // `##[` starts a workflow command anywhere in a line; in a
                // JSON line it can only be inside a string, where `\u005b`
                // is the same `[` to a JSON reader.
                let line = super::redact::redacted(&serde_json::to_string(event).expect("an event serializes"))
                    .replace("##[", "##\\u005b");
                let mut out = std::io::stdout().lock();
                // A closed stdout (a consumer that went away) is not the run's failure.
                let _ = writeln!(out, "{line}").and_then(|()| out.flush());
            }
            MessageFormat::Human => self.show(event),
        }
    }

    /// The progress a person sees. Outside a terminal (CI logs) a line as
    /// each profile and each of its phases starts, so a slow or stuck one
    /// shows where it is.
    fn show(&self, event: &Event) {
        let hidden = self.bar.is_hidden();
        match event {
            Event::ProfileStarted { component } if hidden => eprintln!("{component}: profile started"),
            Event::PhaseStarted { component, phase } => match hidden {
                true => eprintln!("{component}: phase {phase}"),
                false => self.bar.set_message(format!("{component}: {phase}")),
            },
            Event::ProfileFinished {
                component,
                seconds,
                failure,
                not_started,
            } => {
                match (not_started, failure) {
                    (Some(e), _) => self.log(format!("{component}: cannot start the profile: {e}")),
                    (None, Some(f)) => self.log(format!("{component}: failed in phase {}: {}", f.phase, f.reason)),
                    (None, None) => self.log(format!("{component}: profiled in {seconds:.1} s")),
                }
                self.bar.inc(1);
            }
            _ => {}
        }
    }

    /// The profiles are done: the progress bar goes.
    pub(crate) fn profiled(&self) {
        self.bar.finish_and_clear();
    }

    /// The run's outputs are written from `report` (at `report_path`): a
    /// person gets the table on stdout; a program each budget's event, then
    /// `run_finished`.
    pub(crate) fn concluded(&self, report: &Report, report_path: &std::path::Path) {
        match self.format {
            MessageFormat::Human => {
                // anstream decides: a terminal, and neither NO_COLOR nor TERM=dumb (CLICOLOR_FORCE forces it).
                let color = anstream::AutoStream::choice(&std::io::stdout()) != anstream::ColorChoice::Never;
                print!("{}", gate_render::table::render(report, color));
            }
            MessageFormat::Json => {
                for r in &report.results {
                    self.emit(&Event::Budget(Box::new(r.clone())));
                }
                self.emit(&Event::RunFinished {
                    status: report.summary.status,
                    summary: Box::new(report.summary.clone()),
                    report: report_path.display().to_string(),
                });
            }
        }
    }
}
