//! A harness: the adopter's own `gate` binary. One file in the adopter's
//! crate registers its workloads with [`main!`](crate::main) (or builds a
//! [`Harness`] by hand) and gets every `gate` command — check, validate,
//! fit, doctor, comment, merge — with its workloads beside the built-ins,
//! the child-process profiles and the counting allocator.

use std::ffi::OsString;
use std::process::ExitCode;

use crate::exit::Exit;
use crate::sdk::{Registry, Workload};

/// Builds a `gate` binary that knows extra workloads.
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
    /// A harness with the built-in workloads (`mlp`, `tft`, `dqn`, `ppo`,
    /// `mamba2`) when gate is built with its `builtins` feature (the
    /// default; they need candle 0.11), else with none.
    pub fn new() -> Self {
        #[allow(unused_mut)]
        let mut h = Harness::without_builtins();
        #[cfg(feature = "builtins")]
        crate::models::register_builtins(&mut h.registry);
        h
    }

    /// A harness that knows only what is registered on it.
    pub fn without_builtins() -> Self {
        Harness {
            registry: Registry::default(),
            package: None,
            bin: None,
            error: None,
        }
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

    /// Runs the command line of this process and returns its exit code.
    /// The installed `gate`'s requests (`profile`, `__resolve`) are
    /// answered here; with gate's `cli` feature every other `gate` command
    /// runs too.
    pub fn run(self) -> ExitCode {
        self.run_with(std::env::args_os()).into()
    }

    fn run_with(self, args: impl IntoIterator<Item = OsString>) -> Exit {
        if let Some(e) = &self.error {
            eprintln!("error: {e}");
            eprintln!(
                "hint: give each workload its own `KIND`; the built-ins are {}",
                builtin_kinds()
            );
            return Exit::BadInput;
        }
        let args: Vec<OsString> = args.into_iter().collect();
        let identity = crate::child::Identity {
            package: self.package,
            bin: self.bin,
        };
        if let Some(exit) = crate::child::serve(&args, &crate::child::Candle(&self.registry), identity) {
            return exit;
        }
        self.command_line(args)
    }

    /// Any other command: the whole command line with gate's `cli` feature
    /// (the stock `gate`, or a harness built with it).
    #[cfg(feature = "cli")]
    fn command_line(self, args: Vec<OsString>) -> Exit {
        let app = crate::cli::App {
            registry: self.registry,
            package: self.package,
            bin: self.bin,
        };
        crate::cli::main_with(bench_args(args), &app)
    }

    /// Without the `cli` feature a harness answers the installed `gate` only.
    #[cfg(not(feature = "cli"))]
    fn command_line(self, args: Vec<OsString>) -> Exit {
        let what = args
            .get(1)
            .map_or("no command".into(), |a| format!("`{}`", a.to_string_lossy()));
        eprintln!(
            "error: this is the gate harness of `{}` (it knows {}); it answers the installed `gate`, not {what}",
            self.package.unwrap_or("this crate"),
            self.kinds().join(", ")
        );
        eprintln!(
            "hint: run the installed `gate check` where budgets.yaml names this harness (`cargo install gate-cli`, \
             or a release of gate); it builds and starts this binary"
        );
        Exit::BadInput
    }
}

fn builtin_kinds() -> String {
    Harness::new().kinds().join(", ")
}

/// `cargo bench` runs a `harness = false` bench as `BIN --bench`: that
/// means `check` (what a bench of this crate is for).
#[cfg(feature = "cli")]
fn bench_args(mut args: Vec<OsString>) -> Vec<OsString> {
    if let Some(i) = args.iter().skip(1).position(|a| a == "--bench") {
        args.remove(i + 1);
        if args.len() == 1 {
            args.push("check".into());
        }
    }
    args
}

/// Makes this binary a complete `gate` that knows the given workloads
/// besides the built-ins: put it alone in `src/bin/gate-harness.rs` (or a
/// `harness = false` bench) and name the binary in `budgets.yaml`'s
/// `harness:`. It also installs the counting allocator that measures CPU
/// memory, so the file must not declare another `#[global_allocator]`.
///
/// ```ignore
/// gate::main!(my_crate::MyForecaster, my_crate::MyPolicy);
/// ```
#[macro_export]
macro_rules! main {
    ($($workload:ty),* $(,)?) => {
        #[global_allocator]
        static GATE_COUNTING_ALLOCATOR: $crate::CountingAlloc = $crate::CountingAlloc;

        fn main() -> ::std::process::ExitCode {
            $crate::Harness::new()
                $(.register::<$workload>())*
                .identity(::core::env!("CARGO_PKG_NAME"), ::core::option_env!("CARGO_BIN_NAME"))
                .run()
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cargo_bench_means_check() {
        let a = |v: &[&str]| v.iter().map(OsString::from).collect::<Vec<_>>();
        assert_eq!(bench_args(a(&["h", "--bench"])), a(&["h", "check"]));
        assert_eq!(bench_args(a(&["h", "check", "--bench"])), a(&["h", "check"]));
        assert_eq!(bench_args(a(&["h", "validate"])), a(&["h", "validate"]));
    }

    #[cfg(feature = "builtins")]
    #[test]
    fn a_duplicate_kind_is_bad_input_not_a_panic() {
        let h = Harness::new().register::<crate::models::Mlp>();
        assert_eq!(h.run_with(["gate".into(), "validate".into()]), Exit::BadInput);
    }
}
