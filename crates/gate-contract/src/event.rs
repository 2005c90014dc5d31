//! What a run says as it goes, as `gate check --message-format json` and
//! `gate merge --message-format json` write it: one JSON object a line on
//! stdout (schema/events.schema.json), while logs stay on stderr. The
//! terminal's progress lines and table come from the same events.

use serde::{Deserialize, Serialize};

use crate::measurement::{Failure, Phase};
use crate::report::{BudgetResult, RunStatus, Summary};

/// The version of the event stream: a field is never renamed or dropped
/// without bumping it.
pub const VERSION: u32 = 1;

/// One event of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Event {
    /// The run starts (always the first event).
    RunStarted {
        /// [`VERSION`].
        version: u32,
        /// `check` or `merge`.
        command: String,
        /// The components it profiles (`check`) or merges (`merge`), variants as `NAME@VARIANT`.
        components: Vec<String>,
        /// Profiles run side by side (`check`); 0 for `merge`.
        jobs: usize,
    },
    /// A component's profile starts.
    ProfileStarted {
        /// The component.
        component: String,
    },
    /// A component's profile enters a phase.
    PhaseStarted {
        /// The component.
        component: String,
        /// The phase.
        phase: Phase,
    },
    /// A component's profile ended.
    ProfileFinished {
        /// The component.
        component: String,
        /// Its wall time.
        seconds: f64,
        /// Where and why it failed, if it did.
        failure: Option<Failure>,
        /// Why the profile could not start at all, if it could not.
        not_started: Option<String>,
    },
    /// One budget's verdict (one per row of report.json's `results`, in its order).
    Budget(Box<BudgetResult>),
    /// The run's outputs are written (always the last event of a run that
    /// wrote them; the process's exit code follows).
    RunFinished {
        /// The verdict.
        status: RunStatus,
        /// The counts and warnings, as report.json's `summary`.
        summary: Box<Summary>,
        /// Where report.json was written.
        report: String,
    },
}
