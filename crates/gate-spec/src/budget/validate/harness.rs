//! `harness:`: the adopter's binary (made with `gate::main!`) that knows
//! the spec's workloads, and how cargo builds it.

use std::path::PathBuf;

use super::context::{find, Ctx};
use super::hints::HARNESS_KEYS;
use crate::budget::yaml::Node;
use crate::budget::HarnessSpec;

/// `harness: { package: NAME, bin: NAME, features: [..], manifest: PATH }`.
pub(super) fn validate_harness(cx: &mut Ctx, node: &Node) -> Option<HarnessSpec> {
    let entries = cx.map(node, "harness")?;
    cx.known_keys(entries, HARNESS_KEYS, "harness");
    let mut name = |key: &str, example: &str| {
        let what = format!("harness.{key}");
        let hint = format!("name the crate's {key} that calls `gate::main!`, e.g. `{key}: {example}`");
        let n = cx.required(entries, key, node.pos(), &what, &hint)?;
        match cx.text(n, &what)? {
            t if !t.is_empty() && !t.starts_with('-') && !t.chars().any(char::is_whitespace) => Some(t.to_string()),
            t => {
                cx.err(
                    n.pos(),
                    format!("{what} `{t}` is not a cargo name"),
                    format!("write the name as in Cargo.toml, e.g. `{key}: {example}`"),
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
                    if let Some(f) = cx.text(item, "a harness feature") {
                        features.push(f.to_string());
                    }
                }
            }
            other => cx.wrong_kind(other, "harness.features", "a list", "write `features: [name, other]`"),
        }
    }
    let manifest = find(entries, "manifest").and_then(|n| cx.text(n, "harness.manifest").map(PathBuf::from));
    Some(HarnessSpec {
        package: package?,
        bin: bin?,
        features,
        manifest,
        line: node.pos().line,
    })
}
