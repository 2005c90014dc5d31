//! A small, deterministic version of the spec loader's fuzzing (the real
//! run is cargo-fuzz, see fuzz/README.md): 10,000 mutations of the fuzz
//! corpus through `gate::__private::budget::parse`, each within a time bound, none
//! panicking. Any crash cargo-fuzz finds is added to fuzz/corpus and so
//! replayed here too.

use std::path::Path;
use std::time::{Duration, Instant};

const TOKENS: &[&str] = &[
    ":",
    ": ",
    "- ",
    "\n",
    "\n  ",
    "{",
    "}",
    "[",
    "]",
    ",",
    "&a ",
    "*a",
    "!!str ",
    "|",
    ">",
    "\"",
    "'",
    "#",
    "---",
    "? ",
    "< ",
    "<= ",
    "> ",
    "max: ",
    "min: ",
    "version: 1",
    "components:",
    "budgets:",
    "workload: mlp",
    "config:",
    "ensemble:",
    "members: ",
    "params: ",
    "loss: ",
    "timing: ",
    " MiB",
    " GiB",
    " ms",
    "%",
    "1e308",
    "-1",
    "NaN",
    "18446744073709551615",
    "\u{0}",
    "\u{feff}",
    "\t",
    "é",
    "\r\n",
];

fn next(s: &mut u64) -> u64 {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    *s
}

fn mutate(seed: &str, rng: &mut u64) -> String {
    let mut b: Vec<u8> = seed.as_bytes().to_vec();
    for _ in 0..1 + next(rng) % 8 {
        let at = if b.is_empty() {
            0
        } else {
            (next(rng) as usize) % (b.len() + 1)
        };
        match next(rng) % 6 {
            0 if at < b.len() => b[at] = next(rng) as u8,
            1 => b.truncate(at),
            2 => {
                let t = TOKENS[(next(rng) as usize) % TOKENS.len()];
                b.splice(at..at, t.bytes());
            }
            3 if at < b.len() => {
                let end = (at + (next(rng) as usize) % 64).min(b.len());
                b.drain(at..end);
            }
            4 => {
                // Duplicate a slice (repeated keys, deep nesting).
                let end = (at + (next(rng) as usize) % 128).min(b.len());
                let piece = b[at..end].to_vec();
                b.splice(at..at, piece);
            }
            _ => {
                let t = ["[", "{", "- "][(next(rng) as usize) % 3].repeat((next(rng) % 200) as usize);
                b.splice(at..at, t.bytes());
            }
        }
    }
    String::from_utf8_lossy(&b).into_owned()
}

#[test]
fn ten_thousand_mutated_specs_never_panic_or_hang() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/spec");
    let mut seeds: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| String::from_utf8_lossy(&std::fs::read(e.path()).unwrap()).into_owned())
        .collect();
    seeds.sort();
    assert!(seeds.len() >= 10, "the corpus is there");
    let path = Path::new("budgets.yaml");
    let registry = gate::__private::builtins();
    // Every corpus file as it is (crashes found by cargo-fuzz are kept there).
    for s in &seeds {
        let _ = gate::__private::runner::parse(path, s, &registry).map_err(|d| d.to_string());
    }
    let mut rng = 0x9E37_79B9_7F4A_7C15u64;
    let mut slowest = Duration::ZERO;
    for i in 0..10_000 {
        let input = mutate(&seeds[i % seeds.len()], &mut rng);
        let t = Instant::now();
        let _ = gate::__private::runner::parse(path, &input, &registry).map_err(|d| d.to_string());
        slowest = slowest.max(t.elapsed());
    }
    assert!(slowest < Duration::from_secs(1), "an input took {slowest:?}");
}
