//! `harness:`: the adopter's binary (made with `gate::main!`) that knows
//! the spec's workloads, and how cargo builds it.

use std::path::PathBuf;

use super::context::{find, Ctx};
use super::hints::HARNESS_KEYS;
use crate::budget::tree::Node;
use crate::budget::HarnessSpec;

/// `harness: { package: NAME, bin: NAME, features: [..], manifest: PATH }`.
pub(super) fn validate_harness(cx: &mut Ctx, node: &Node) -> Option<HarnessSpec> {
    let entries = cx.map(node, "harness")?;
    cx.known_keys(entries, HARNESS_KEYS, "harness");
    // Each value becomes one of cargo's arguments: only a name is let
    // through, never an option (`--config=...`) or a list cargo would split.
    let mut name = |key: &str, example: &str| {
        let what = format!("harness.{key}");
        let hint = format!("name the crate's {key} that calls `gate::main!`, e.g. `{key}: {example}`");
        let n = cx.required(entries, key, node.pos(), &what, &hint)?;
        match cx.text(n, &what)? {
            t if is_cargo_name(t) => Some(t.to_string()),
            t => {
                cx.err(
                    n.pos(),
                    format!("{what} `{t}` is not a cargo name"),
                    format!(
                        "write the name as in Cargo.toml (letters, digits, `-` and `_`, not starting with `-`), e.g. `{key}: {example}`"
                    ),
                );
                None
            }
        }
    };
    let package = name("package", "ml");
    let bin = name("bin", "gate-harness");
    let mut features = Vec::new();
    if let Some(n) = find(entries, "features") {
        match n {
            Node::Seq { items, .. } => {
                for item in items {
                    match cx.text(item, "a harness feature") {
                        Some(f) if is_feature(f) => features.push(f.to_string()),
                        Some(f) => cx.err(
                            item.pos(),
                            format!("harness.features: `{f}` is not a cargo feature name"),
                            "name a feature of the harness's crate (letters, digits, `_`, `-`, `+`, `.`, or `dependency/feature`), one per item: `features: [cuda, fast]`",
                        ),
                        None => {}
                    }
                }
            }
            other => cx.wrong_kind(other, "harness.features", "a list", "write `features: [name, other]`"),
        }
    }
    let manifest = find(entries, "manifest").and_then(|n| {
        let t = cx.text(n, "harness.manifest")?;
        let path = PathBuf::from(t);
        if path.file_name().is_some_and(|f| f == "Cargo.toml") && !t.starts_with('-') && !t.contains('\0') {
            Some((path, n.pos()))
        } else {
            cx.err(
                n.pos(),
                format!("harness.manifest `{t}` is not a path to a Cargo.toml"),
                "give the manifest's path relative to this spec, e.g. `manifest: crates/ml/Cargo.toml`",
            );
            None
        }
    });
    Some(HarnessSpec {
        package: package?,
        bin: bin?,
        features,
        manifest_pos: manifest.as_ref().map(|m| m.1),
        manifest: manifest.map(|m| m.0),
        line: node.pos().line,
    })
}

/// A package or binary target name as cargo accepts one.
pub fn is_cargo_name(t: &str) -> bool {
    !t.is_empty() && !t.starts_with('-') && t.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// A feature as `cargo build --features` takes one: `name` or `dep/name`.
fn is_feature(t: &str) -> bool {
    let part = |p: &str| {
        p.chars().next().is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
            && p.chars().all(|c| c.is_ascii_alphanumeric() || "_-+.".contains(c))
    };
    match t.split_once('/') {
        Some((dep, feature)) => is_cargo_name(dep) && part(feature),
        None => part(t),
    }
}
