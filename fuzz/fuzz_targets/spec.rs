//! Any bytes through the spec loader: `gate::budget::parse` must return a
//! Spec or diagnostics (and render them) for every input: no panic, no hang,
//! no stack overflow.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    match gate::budget::parse(std::path::Path::new("budgets.yaml"), &text) {
        Ok(spec) => {
            std::hint::black_box(format!("{spec:?}"));
        }
        Err(diags) => {
            std::hint::black_box(diags.to_string());
        }
    }
});
