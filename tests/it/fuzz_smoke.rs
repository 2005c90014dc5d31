//! A small, deterministic version of the spec loader's fuzzing (the real
//! run is cargo-fuzz, see fuzz/README.md): 10,000 mutations of the fuzz
//! corpus as raw bytes (NUL, byte-order marks, invalid UTF-8 included)
//! through the spec loader with the built-in workloads' config checks, none
//! panicking. Any crash cargo-fuzz finds is added to fuzz/corpus and so
//! replayed here too.

use std::path::Path;

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

/// Bytes no `&str` token can hold: invalid UTF-8, the UTF-16/UTF-32 and
/// UTF-8 byte-order marks, C0/C1 controls.
const RAW: &[&[u8]] = &[
    b"\xFF",
    b"\xC3",
    b"\xE2\x82",
    b"\xF0\x9F\x98",
    b"\xED\xA0\x80",
    b"\xFF\xFE",
    b"\xFE\xFF",
    b"\xFF\xFE\x00\x00",
    b"\x00\x00\xFE\xFF",
    b"\xEF\xBB\xBF",
    b"\x00",
    b"\x01",
    b"\x1B[31m",
    b"\x7F",
    b"\xC2\x85",
    b"\xC2\x9B",
    b"\xEF\xBF\xBE",
];

fn next(s: &mut u64) -> u64 {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    *s
}

fn mutate(seed: &[u8], rng: &mut u64) -> Vec<u8> {
    let mut b: Vec<u8> = seed.to_vec();
    for _ in 0..1 + next(rng) % 8 {
        let at = if b.is_empty() {
            0
        } else {
            (next(rng) as usize) % (b.len() + 1)
        };
        match next(rng) % 7 {
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
            5 => {
                let t = RAW[(next(rng) as usize) % RAW.len()];
                // At the very start half the time: where a byte-order mark counts.
                let at = if next(rng).is_multiple_of(2) { 0 } else { at };
                b.splice(at..at, t.iter().copied());
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
    b
}

#[test]
fn ten_thousand_mutated_specs_never_panic_or_hang() {
    let dir = Path::new(env!("GATE_REPO_ROOT")).join("fuzz/corpus/spec");
    let mut seeds: Vec<Vec<u8>> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| std::fs::read(e.path()).unwrap())
        .collect();
    seeds.sort();
    assert!(seeds.len() >= 10, "the corpus is there");
    let path = Path::new("budgets.yaml");
    let registry = gate_builtins::registry();
    // Every corpus file as it is (crashes found by cargo-fuzz are kept there).
    for s in &seeds {
        let _ = gate::test_support::runner::parse_bytes(path, s, &registry).map_err(|d| d.to_string());
    }
    let mut rng = 0x9E37_79B9_7F4A_7C15u64;
    for i in 0..10_000 {
        let input = mutate(&seeds[i % seeds.len()], &mut rng);
        let _ = gate::test_support::runner::parse_bytes(path, &input, &registry).map_err(|d| d.to_string());
    }
}
