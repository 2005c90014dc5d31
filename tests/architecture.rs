//! The module graph, read from the source: data flows one way (spec →
//! runner → report → render → github, the CLI on top, the SDK below the
//! runner), and the built-in models use nothing but the public SDK, exactly
//! as an adopter's crate does.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Top-level modules, lowest first: a module may import only those before it.
const LAYERS: &[&str] = &[
    "hash", "hint", "units", "metric", "exit", "probe", "sdk", "models", "budget", "runner", "report", "render",
    "github", "cli", "harness",
];

fn sources(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The top-level module a source file belongs to.
fn module_of(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).unwrap();
    let first = rel
        .components()
        .next()
        .unwrap()
        .as_os_str()
        .to_string_lossy()
        .into_owned();
    first.trim_end_matches(".rs").to_string()
}

/// `crate::NAME` paths in non-test code (a `#[cfg(test)]` module ends the scan).
fn crate_refs(text: &str) -> BTreeSet<String> {
    let code = match text.find("#[cfg(test)]\nmod tests") {
        Some(i) => &text[..i],
        None => text,
    };
    // Doc comments link to items anywhere (`[main!](crate::main)`): code only.
    let code: String = code
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    let code = code.as_str();
    let mut refs = BTreeSet::new();
    for (i, _) in code.match_indices("crate::") {
        let before = code[..i].chars().last();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$') {
            continue; // `$crate::` in macros, `gate_crate::`
        }
        let rest = &code[i + "crate::".len()..];
        let name: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
        if !name.is_empty() {
            refs.insert(name);
        }
    }
    refs
}

fn graph() -> BTreeMap<String, BTreeMap<String, Vec<String>>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let mut g: BTreeMap<String, BTreeMap<String, Vec<String>>> = BTreeMap::new();
    for f in files {
        let m = module_of(&src, &f);
        if m == "lib" || m == "main" {
            continue;
        }
        let text = std::fs::read_to_string(&f).unwrap();
        for r in crate_refs(&text) {
            if r != m {
                g.entry(m.clone())
                    .or_default()
                    .entry(r)
                    .or_default()
                    .push(f.strip_prefix(&src).unwrap().display().to_string());
            }
        }
    }
    g
}

#[test]
fn every_module_imports_only_modules_below_it() {
    let g = graph();
    let mut wrong = Vec::new();
    for (m, deps) in &g {
        let Some(mi) = LAYERS.iter().position(|l| l == m) else {
            wrong.push(format!("`{m}` is not placed in LAYERS (tests/architecture.rs)"));
            continue;
        };
        for (d, files) in deps {
            match LAYERS.iter().position(|l| l == d) {
                Some(di) if di < mi => {}
                Some(_) => wrong.push(format!("`{m}` imports `{d}`, which is above it ({})", files.join(", "))),
                None => wrong.push(format!("`{m}` imports `{d}`, which is not in LAYERS")),
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn the_built_in_models_use_only_the_sdk() {
    let g = graph();
    let deps: Vec<&String> = g.get("models").map(|d| d.keys().collect()).unwrap_or_default();
    assert_eq!(deps, ["sdk"], "{:?}", g.get("models"));
}
