//! A harness: the adopter's own binary that the installed `gate` builds
//! and starts. One file in the adopter's crate registers its workloads with
//! [`main!`](crate::main) (or builds a [`Harness`] by hand); the binary
//! answers the installed `gate`'s requests (`__resolve`, `profile`) with
//! them and the counting allocator. The command line itself is the
//! installed `gate` (crate `gate-cli`), which a harness never compiles.

use std::ffi::OsString;
use std::process::ExitCode;

use crate::sdk::{Registry, Workload};
use gate_runner::exit::Exit;

/// Builds a harness binary that knows a crate's workloads.
///
/// ```no_run
/// # #[derive(Debug)] struct MyForecaster;
/// # impl gate::Workload for MyForecaster {
/// #     const KIND: &'static str = "my_forecaster";
/// #     type Config = ();
/// #     fn from_config(_: ()) -> Result<Self, gate::Problems> { Ok(MyForecaster) }
/// #     fn config(&self) -> &() { &() }
/// #     fn param_count(&self) -> gate::ParamCount { Default::default() }
/// #     fn build(&self, _: gate::candle_nn::VarBuilder, _: &gate::RunCtx) -> gate::candle_core::Result<Box<dyn gate::Model>> { unimplemented!() }
/// #     fn batch(&self, _: &gate::RunCtx, _: u64) -> gate::candle_core::Result<gate::Batch> { unimplemented!() }
/// # }
/// // What `gate::main!(MyForecaster)` expands to, less the global allocator.
/// fn main() -> std::process::ExitCode {
///     gate::Harness::new().register::<MyForecaster>().run()
/// }
/// ```
#[derive(Debug, Clone)]
pub struct Harness {
    registry: Registry,
    package: Option<&'static str>,
    bin: Option<&'static str>,
    error: Option<String>,
}

impl Default for Harness {
    fn default() -> Self {
        Harness::new()
    }
}

impl Harness {
    /// A harness that knows no workload yet: [`register`](Self::register)
    /// adds them. (gate's built-in models are a crate of their own,
    /// `gate-builtins`, served by the stock `gate`.)
    pub fn new() -> Self {
        Harness {
            registry: Registry::default(),
            package: None,
            bin: None,
            error: None,
        }
    }

    /// The same as [`new`](Self::new): kept for harnesses written when
    /// `new` also registered the built-in models.
    pub fn without_builtins() -> Self {
        Harness::new()
    }

    /// Adds workload `W` (its [`Workload::KIND`] must be new to this harness).
    pub fn register<W: Workload>(mut self) -> Self {
        if let Err(e) = self.registry.register::<W>() {
            self.error.get_or_insert(e);
        }
        self
    }

    /// Names the cargo package and binary this harness is, so that it runs a
    /// spec whose `harness:` names it instead of building it again.
    /// [`main!`](crate::main) fills it in from cargo's environment.
    pub fn identity(mut self, package: &'static str, bin: Option<&'static str>) -> Self {
        self.package = Some(package);
        self.bin = bin;
        self
    }

    /// The kinds this harness knows, in registration order.
    pub fn kinds(&self) -> Vec<&'static str> {
        self.registry.names()
    }

    /// Answers the installed `gate`'s request in this process's arguments
    /// and returns its exit code; any other command is refused with a hint
    /// (a harness is not the command line).
    pub fn run(self) -> ExitCode {
        let args: Vec<OsString> = std::env::args_os().collect();
        match self.serve(&args) {
            Some(exit) => exit,
            None => self.refuse(&args).into(),
        }
    }

    /// The installed `gate`'s request in `args` (`__resolve`, `profile`)
    /// answered, or `None` when `args` are not one: what a binary that is
    /// both a harness and a command line (the stock `gate`) routes with.
    pub fn serve(&self, args: &[OsString]) -> Option<ExitCode> {
        self.serve_exit(args).map(Into::into)
    }

    fn serve_exit(&self, args: &[OsString]) -> Option<Exit> {
        if let Some(e) = &self.error {
            eprintln!("error: {e}");
            eprintln!(
                "hint: give each workload its own `KIND` (this harness knows {})",
                self.kinds().join(", ")
            );
            return Some(Exit::BadInput);
        }
        let identity = crate::child::Identity {
            package: self.package,
            bin: self.bin,
        };
        crate::child::serve(args, &crate::child::Candle(&self.registry), identity)
    }

    /// A command that is not the installed `gate`'s request (gate-runner's
    /// [`refuse`](gate_runner::harness::refuse), as every adapter's).
    fn refuse(&self, args: &[OsString]) -> Exit {
        let identity = crate::child::Identity {
            package: self.package,
            bin: self.bin,
        };
        gate_runner::harness::refuse(args, &crate::child::Candle(&self.registry), identity, &self.kinds())
    }

    #[cfg(feature = "test-support")]
    pub(crate) fn registry(&self) -> &Registry {
        &self.registry
    }
}

/// A harness checks a spec's workloads against the kinds it knows, with
/// the diagnostics its own `__resolve` gives (a kind it does not know is
/// left to the spec's `harness:` where it names one): what `gate validate`
/// reports beside the file's own problems. The stock `gate` checks its
/// built-in models this way, in its own process.
impl gate_spec::budget::WorkloadCheck for Harness {
    fn check(
        &self,
        c: &gate_spec::budget::Component,
        has_harness: bool,
    ) -> Vec<(gate_spec::budget::Pos, String, String)> {
        gate_runner::harness::registry::Checker(&*self.registry).check(c, has_harness)
    }
}

/// Makes this binary the harness of the given workloads: put it alone in
/// `src/bin/gate-harness.rs` and name the binary in `budgets.yaml`'s
/// `harness:`. It also installs the counting allocator that measures CPU
/// memory, so the file must not declare another `#[global_allocator]`.
///
/// ```ignore
/// gate::main!(my_crate::MyForecaster, my_crate::MyPolicy);
/// ```
#[macro_export]
macro_rules! main {
    ($($workload:ty),* $(,)?) => {
        $crate::__runner::adapter_main!($crate; $($workload),*);
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Twice;

    impl Workload for Twice {
        const KIND: &'static str = "twice";
        type Config = ();
        fn from_config(_: ()) -> Result<Self, crate::Problems> {
            Ok(Twice)
        }
        fn config(&self) -> &() {
            &()
        }
        fn param_count(&self) -> crate::ParamCount {
            Default::default()
        }
        fn build(&self, _: candle_nn::VarBuilder, _: &crate::RunCtx) -> candle_core::Result<Box<dyn crate::Model>> {
            unreachable!("never built")
        }
        fn batch(&self, _: &crate::RunCtx, _: u64) -> candle_core::Result<crate::Batch> {
            unreachable!("never built")
        }
    }

    #[test]
    fn a_duplicate_kind_is_bad_input_not_a_panic() {
        let h = Harness::new().register::<Twice>().register::<Twice>();
        let args = ["h".into(), "__resolve".into(), "--request".into(), "r.json".into()];
        assert_eq!(h.serve_exit(&args), Some(Exit::BadInput));
    }

    #[test]
    fn a_command_line_command_is_refused_with_a_hint_and_help_is_answered() {
        let h = Harness::new().register::<Twice>();
        let args: Vec<OsString> = vec!["h".into(), "check".into()];
        assert_eq!(h.serve_exit(&args), None);
        assert_eq!(h.refuse(&args), Exit::BadInput);
        assert_eq!(h.refuse(&["h".into()]), Exit::BadInput);
        for flag in ["--help", "-h", "--version", "-V"] {
            assert_eq!(h.refuse(&["h".into(), flag.into()]), Exit::Pass, "{flag}");
        }
    }
}
