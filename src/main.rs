use std::process::ExitCode;

// The CPU probe counts every allocation of the process.
#[global_allocator]
static ALLOC: gate::probe::CountingAlloc = gate::probe::CountingAlloc;

fn main() -> ExitCode {
    gate::cli::main().into()
}
