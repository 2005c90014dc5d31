//! The installed `gate` (`cargo install gate-cli`). With the `builtins`
//! feature (the default) the binary is also the harness of gate's built-in
//! models: the command line starts it again for their `__resolve` and
//! `profile`, as it starts a team's harness for theirs.

use std::process::ExitCode;

// A profile of a built-in model measures the CPU through this allocator.
#[cfg(feature = "builtins")]
#[global_allocator]
static GATE_COUNTING_ALLOCATOR: gate_probe::CountingAlloc = gate_probe::CountingAlloc;

fn main() -> ExitCode {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    #[cfg(feature = "builtins")]
    {
        // Named, so that this binary given as `--harness-bin` for a spec
        // that names another harness refuses it instead of measuring its
        // own models under that harness's name (#54).
        let models = gate_builtins::harness().identity(env!("CARGO_PKG_NAME"), Some(env!("CARGO_BIN_NAME")));
        if let Some(exit) = models.serve(&args) {
            return exit;
        }
        let builtins = gate_cli::Builtins {
            check: &models,
            sdk_manifest: gate_builtins::SDK_MANIFEST,
        };
        gate_cli::main(args, Some(builtins))
    }
    #[cfg(not(feature = "builtins"))]
    gate_cli::main(args, None)
}
