//! The stock `gate`: the built-in workloads, made through the same
//! `gate::main!` an adopter's harness uses.

gate::main!();
