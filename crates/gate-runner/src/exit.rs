//! The exit codes of `gate`, documented in one place (README "Exit codes" mirrors this).

use std::process::ExitCode;

/// What a run ended with; each maps to one process exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// 0: every budget and regression tolerance holds.
    Pass = 0,
    /// 1: a budget or regression tolerance is exceeded (or, under `--strict`, a warning).
    Fail = 1,
    /// 2: bad input: the spec or the arguments.
    BadInput = 2,
    /// 3: infrastructure: no GPU where one was required, CUDA/driver error, a
    /// profile or harness that crashed or ended without its answer, network failure.
    Infrastructure = 3,
    /// 130: interrupted (gate's own SIGINT or SIGTERM): every child was stopped and no output was written.
    Interrupted = 130,
}

impl Exit {
    pub fn code(self) -> u8 {
        self as u8
    }
}

impl From<Exit> for ExitCode {
    fn from(e: Exit) -> Self {
        ExitCode::from(e.code())
    }
}
