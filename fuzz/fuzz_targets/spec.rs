//! Any bytes through the spec loader's byte-level entry point,
//! `gate_spec::budget::parse_bytes` (what `load` calls on the file's bytes): the
//! raw input, NUL bytes, byte-order marks and invalid UTF-8 included, must
//! give a Spec or diagnostics (rendered here), with no panic, no hang and no
//! stack overflow.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    match gate_spec::budget::parse_bytes(std::path::Path::new("budgets.yaml"), data) {
        Ok(spec) => {
            std::hint::black_box(format!("{spec:?}"));
        }
        Err(diags) => {
            std::hint::black_box(diags.to_string());
        }
    }
});
