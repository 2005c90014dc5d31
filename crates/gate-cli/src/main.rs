//! The installed `gate` (`cargo install gate-cli`): the same stock binary
//! as gate-sdk's own `gate`, with the built-in workloads.

gate::main!();
