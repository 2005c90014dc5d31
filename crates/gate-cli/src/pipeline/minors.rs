//! Before a harness is built: does the adopter's candle match the candle
//! gate's SDK is built against in that build? Cargo treats each candle
//! minor as another crate, so a mismatch compiles two candles whose tensor
//! types differ and fails with a page of "multiple different versions of
//! crate `candle_core`". Read from `cargo metadata` of the adopter's
//! workspace (the resolved versions and gate's enabled features), it is
//! said here first, by name, with the feature to pick.

use std::collections::HashMap;

use serde_json::Value;

/// gate's SDK package: the one whose features pick the candle (its library is `gate`).
pub(crate) const SDK_PACKAGE: &str = "gate-sdk";

/// gate's candle features, each with the candle-core versions it serves.
const ADAPTERS: &[(&str, &str)] = &[
    ("candle-0-9-1", "0.9.1"),
    ("candle-0-9", "0.9.2 and later 0.9"),
    ("candle-0-10", "0.10"),
    ("candle-0-11", "0.11"),
];

/// The gate feature that serves candle-core `version`, if one does.
pub(crate) fn adapter_for(version: &str) -> Option<&'static str> {
    let mut parts = version.split(['.', '-', '+']).map(|p| p.parse::<u64>().ok());
    let (major, minor, patch) = (parts.next()??, parts.next()??, parts.next().flatten());
    match (major, minor, patch) {
        (0, 9, Some(0 | 1)) => Some("candle-0-9-1"),
        (0, 9, _) => Some("candle-0-9"),
        (0, 10, _) => Some("candle-0-10"),
        (0, 11, _) => Some("candle-0-11"),
        _ => None,
    }
}

/// One package of `cargo metadata`: its name, version and source (`None`
/// for a path package).
#[derive(Clone, Copy)]
struct Package<'m> {
    name: &'m str,
    version: &'m str,
    source: Option<&'m str>,
}

/// `cargo metadata`'s resolve, with each package id's package at hand.
struct Resolve<'m> {
    packages: HashMap<&'m str, Package<'m>>,
    nodes: &'m [Value],
}

impl<'m> Resolve<'m> {
    fn new(metadata: &'m Value) -> Option<Self> {
        let packages = metadata["packages"]
            .as_array()?
            .iter()
            .filter_map(|p| {
                let package = Package {
                    name: p["name"].as_str()?,
                    version: p["version"].as_str()?,
                    source: p["source"].as_str(),
                };
                Some((p["id"].as_str()?, package))
            })
            .collect();
        Some(Resolve {
            packages,
            nodes: metadata["resolve"]["nodes"].as_array()?,
        })
    }

    /// The package (name, version) of a resolve node.
    fn package(&self, node: &Value) -> Option<(&'m str, &'m str)> {
        let p = self.packages.get(node["id"].as_str()?)?;
        Some((p.name, p.version))
    }

    /// The resolve node of the package named `name`.
    fn node(&self, name: &str) -> Option<&'m Value> {
        self.nodes
            .iter()
            .find(|n| self.package(n).is_some_and(|(n, _)| n == name))
    }

    /// The candle-core packages `node` depends on directly.
    fn candle_packages(&self, node: &Value) -> Vec<Package<'m>> {
        node["deps"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|d| self.packages.get(d["pkg"].as_str()?).copied())
            .filter(|p| p.name == "candle-core")
            .collect()
    }

    /// The candle-core versions `node` depends on directly.
    fn candle_deps(&self, node: &Value) -> Vec<String> {
        self.candle_packages(node)
            .iter()
            .map(|p| p.version.to_string())
            .collect()
    }
}

/// The candle-core version `package` depends on directly in this resolve.
pub(crate) fn crate_candle(metadata: &Value, package: &str) -> Option<String> {
    let r = Resolve::new(metadata)?;
    r.candle_deps(r.node(package)?).into_iter().next()
}

/// The candle-core gate's SDK resolved to, as a report names it: the
/// version, and for a git or path source where it came from (a team on a
/// git revision of candle sees that revision, not the minor).
pub(crate) fn gates_candle(metadata: &Value) -> Option<String> {
    let r = Resolve::new(metadata)?;
    let candle = r.candle_packages(r.node(SDK_PACKAGE)?).into_iter().next()?;
    let version = candle.version;
    Some(match candle.source {
        None => format!("{version} (path)"),
        Some(s) if s.starts_with("registry+") => version.to_string(),
        Some(s) => match s.strip_prefix("git+").and_then(|g| g.rsplit_once('#')) {
            Some((repo, commit)) => format!(
                "{version} (git {} {})",
                repo.split('?').next().unwrap_or(repo),
                commit.get(..12).unwrap_or(commit)
            ),
            None => format!("{version} ({s})"),
        },
    })
}

/// A harness whose crates and gate are on different candles.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Mismatch {
    /// The crate that depends on its own candle-core, and that version.
    pub dependent: String,
    pub theirs: String,
    /// gate's candle-core version and the candle feature it was built with.
    pub gates: String,
    pub feature: String,
    /// The feature that serves `theirs`, if gate has one.
    pub pick: Option<&'static str>,
}

impl Mismatch {
    pub(crate) fn message(&self, package: &str) -> String {
        format!(
            "the harness `{package}` would link two candles: `{}` depends on candle-core {}, and gate is built \
             against candle-core {} (its feature `{}`); their tensor types do not match",
            self.dependent, self.theirs, self.gates, self.feature
        )
    }

    pub(crate) fn hint(&self) -> String {
        match self.pick {
            Some(f) => format!(
                "build gate against your candle: `gate-sdk = {{ ..., default-features = false, features = [\"{f}\"] }}` \
                 in the Cargo.toml of `{}` (docs/sdk.md, \"Which candle\")",
                self.dependent
            ),
            None => format!(
                "gate has no adapter for candle-core {} (it has {}); move the crate to one of those, or see \
                 CONTRIBUTING.md for adding the next minor",
                self.theirs,
                ADAPTERS
                    .iter()
                    .map(|(f, v)| format!("{v}: `{f}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }
}

/// The first mismatch between gate's candle and a candle-core another
/// crate of the resolve depends on directly; `None` when they agree, when
/// gate is not in the graph, or when the metadata does not say.
pub(crate) fn mismatch(metadata: &Value) -> Option<Mismatch> {
    let r = Resolve::new(metadata)?;
    let gate = r.nodes.iter().find(|n| {
        r.package(n).is_some_and(|(name, _)| name == SDK_PACKAGE)
            && n["features"]
                .as_array()
                .is_some_and(|f| f.iter().any(|f| ADAPTERS.iter().any(|(a, _)| f == a)))
    })?;
    let gates = r.candle_deps(gate).into_iter().next()?;
    let enabled: Vec<&str> = gate["features"].as_array()?.iter().filter_map(Value::as_str).collect();
    // The most specific candle feature enabled (`candle-0-9-1` implies `candle-0-9`).
    let feature = ADAPTERS
        .iter()
        .map(|(f, _)| *f)
        .find(|f| enabled.contains(f))?
        .to_string();
    for node in r.nodes {
        let Some((dependent, _)) = r.package(node) else {
            continue;
        };
        if dependent == SDK_PACKAGE || dependent.starts_with("candle-") {
            continue;
        }
        for theirs in r.candle_deps(node) {
            let pick = adapter_for(&theirs);
            if theirs != gates || pick != Some(feature.as_str()) {
                return Some(Mismatch {
                    dependent: dependent.to_string(),
                    theirs,
                    gates,
                    feature,
                    pick,
                });
            }
        }
    }
    // gate alone, on a 0.9 it was not built for (0.9.1 under `candle-0-9`).
    match adapter_for(&gates) {
        Some(f) if f != feature => Some(Mismatch {
            dependent: SDK_PACKAGE.into(),
            theirs: gates.clone(),
            gates,
            feature,
            pick: Some(f),
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn gates_candle_names_a_git_revision_and_keeps_a_registry_version_plain() {
        let with = |source: Value| {
            json!({
                "packages": [
                    {"id": "gate-id", "name": "gate-sdk", "version": "0.1.0", "source": null},
                    {"id": "cc", "name": "candle-core", "version": "0.11.0", "source": source},
                ],
                "resolve": {"nodes": [{"id": "gate-id", "features": ["candle-0-11"], "deps": [{"name": "candle_core_0_11", "pkg": "cc"}]}]}
            })
        };
        let registry = with(json!("registry+https://github.com/rust-lang/crates.io-index"));
        assert_eq!(gates_candle(&registry).as_deref(), Some("0.11.0"));
        let git = with(json!(
            "git+https://github.com/huggingface/candle?rev=2a13b0f#2a13b0f3f0e1d2c3b4a5968778695a4b3c2d1e0f"
        ));
        assert_eq!(
            gates_candle(&git).as_deref(),
            Some("0.11.0 (git https://github.com/huggingface/candle 2a13b0f3f0e1)")
        );
        assert_eq!(gates_candle(&with(Value::Null)).as_deref(), Some("0.11.0 (path)"));
    }

    fn metadata(gate_features: &[&str], gates: &str, theirs: Option<&str>) -> Value {
        let mut packages = vec![
            json!({"id": "gate-id", "name": "gate-sdk", "version": "0.1.0"}),
            json!({"id": "cc-gate", "name": "candle-core", "version": gates}),
            json!({"id": "ml-id", "name": "ml", "version": "0.1.0"}),
        ];
        let mut ml_deps = vec![json!({"name": "gate", "pkg": "gate-id"})];
        if let Some(v) = theirs {
            if v != gates {
                packages.push(json!({"id": "cc-ml", "name": "candle-core", "version": v}));
                ml_deps.push(json!({"name": "candle_core", "pkg": "cc-ml"}));
            } else {
                ml_deps.push(json!({"name": "candle_core", "pkg": "cc-gate"}));
            }
        }
        json!({
            "packages": packages,
            "resolve": {"nodes": [
                {"id": "gate-id", "features": gate_features, "deps": [{"name": "candle_core_x", "pkg": "cc-gate"}]},
                {"id": "ml-id", "features": [], "deps": ml_deps},
                {"id": "cc-gate", "features": [], "deps": []},
            ]}
        })
    }

    #[test]
    fn each_candle_version_has_its_feature() {
        assert_eq!(adapter_for("0.9.1"), Some("candle-0-9-1"));
        assert_eq!(adapter_for("0.9.2"), Some("candle-0-9"));
        assert_eq!(adapter_for("0.9.2-alpha.1"), Some("candle-0-9"));
        assert_eq!(adapter_for("0.10.2"), Some("candle-0-10"));
        assert_eq!(adapter_for("0.11.1"), Some("candle-0-11"));
        assert_eq!(adapter_for("0.8.4"), None);
        assert_eq!(adapter_for("x"), None);
    }

    #[test]
    fn a_crate_on_another_minor_is_named_with_the_feature_to_pick() {
        let m = mismatch(&metadata(&["default", "candle-0-11"], "0.11.1", Some("0.9.1"))).unwrap();
        assert_eq!(
            (
                m.dependent.as_str(),
                m.theirs.as_str(),
                m.gates.as_str(),
                m.feature.as_str(),
                m.pick
            ),
            ("ml", "0.9.1", "0.11.1", "candle-0-11", Some("candle-0-9-1"))
        );
        assert!(m.message("ml").contains("candle-core 0.9.1"), "{}", m.message("ml"));
        assert!(m.hint().contains("features = [\"candle-0-9-1\"]"), "{}", m.hint());
    }

    #[test]
    fn the_same_candle_is_no_mismatch() {
        assert_eq!(
            mismatch(&metadata(&["candle-0-9", "candle-0-9-1"], "0.9.1", Some("0.9.1"))),
            None
        );
        assert_eq!(mismatch(&metadata(&["candle-0-10"], "0.10.2", None)), None);
        assert_eq!(mismatch(&metadata(&["candle-0-11"], "0.11.1", Some("0.11.1"))), None);
    }

    #[test]
    fn the_wrong_patch_feature_inside_0_9_is_named() {
        let m = mismatch(&metadata(&["candle-0-9"], "0.9.1", Some("0.9.1"))).unwrap();
        assert_eq!((m.feature.as_str(), m.pick), ("candle-0-9", Some("candle-0-9-1")));
        let m = mismatch(&metadata(&["candle-0-9"], "0.9.1", None)).unwrap();
        assert_eq!((m.dependent.as_str(), m.pick), ("gate-sdk", Some("candle-0-9-1")));
    }

    #[test]
    fn a_minor_without_an_adapter_lists_the_ones_there_are() {
        let m = mismatch(&metadata(&["candle-0-11"], "0.11.1", Some("0.8.4"))).unwrap();
        assert_eq!(m.pick, None);
        assert!(m.hint().contains("0.9.1: `candle-0-9-1`"), "{}", m.hint());
    }
}
