//! Before a harness is built: does every crate of the harness use the
//! framework version gate's adapter is built against in that build? Cargo
//! treats each minor of a 0.x framework as another crate, so a mismatch
//! compiles two copies of the framework whose tensor types differ and fails
//! with a page of "multiple different versions of crate ...". Said here
//! first, by name, with the feature to pick.
//!
//! gate names no framework here. Each adapter declares in its own
//! Cargo.toml which framework it serves, the crate that carries that
//! framework's version, and which of its features serves which versions,
//! most specific first:
//!
//! ```toml
//! [package.metadata.gate]
//! framework = "fw"
//! framework-crate = "fw-core"
//! guide = "docs/fw.md"
//! versions = [
//!     { feature = "fw-0-9-1", serves = ["0.9.0", "0.9.1"] },
//!     { feature = "fw-0-9", serves = ["0.9"] },
//! ]
//! ```
//!
//! and `cargo metadata` of the adopter's workspace carries it (the resolved
//! versions and the adapter's enabled features with it). A version in
//! `serves` is a prefix of dotted numbers (`0.9`: any 0.9; `0.9.1`: that
//! release); an entry without `feature` is always on (an adapter of one
//! version). A new version of a framework is a line in its adapter's
//! Cargo.toml, nothing here.

use std::collections::HashMap;

use serde_json::Value;

/// One entry of an adapter's `versions`: a feature (none: always on) and
/// the framework versions it serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Served {
    pub feature: Option<String>,
    pub serves: Vec<String>,
}

impl Served {
    /// Whether it serves `version` (`0.9.2-alpha.1` is 0.9.2's).
    fn serves(&self, version: &str) -> bool {
        let numbers: Vec<&str> = version.split(['-', '+']).next().unwrap_or("").split('.').collect();
        self.serves.iter().any(|prefix| {
            let prefix: Vec<&str> = prefix.split('.').collect();
            prefix.len() <= numbers.len() && prefix.iter().zip(&numbers).all(|(p, n)| p == n)
        })
    }

    /// How the list of choices names it: its versions and its feature (or,
    /// for an adapter of one version, the adapter).
    fn choice(&self, adapter: &str) -> String {
        format!(
            "{}: `{}`",
            self.serves.join(", "),
            self.feature.as_deref().unwrap_or(adapter)
        )
    }
}

/// What a framework adapter's `[package.metadata.gate]` says of the
/// framework versions it serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Adapter {
    /// The adapter's package name.
    pub package: String,
    /// The framework's name, as its harness reports it (`framework.name`);
    /// its own crates are named after it (`NAME`, `NAME-*`).
    pub framework: String,
    /// The crate whose version is the framework's.
    pub krate: String,
    /// Where a team reads about picking the version, if the adapter says.
    pub guide: Option<String>,
    /// Most specific first.
    pub versions: Vec<Served>,
}

impl Adapter {
    /// A package's declaration, where it makes one.
    pub(crate) fn read(package: &Value) -> Option<Adapter> {
        let gate = package["metadata"].get("gate")?;
        let text = |v: &Value| v.as_str().map(str::to_string);
        let versions = gate
            .get("versions")?
            .as_array()?
            .iter()
            .map(|v| Served {
                feature: text(&v["feature"]),
                serves: v["serves"].as_array().into_iter().flatten().filter_map(text).collect(),
            })
            .collect();
        Some(Adapter {
            package: text(&package["name"])?,
            framework: text(&gate["framework"])?,
            krate: text(&gate["framework-crate"])?,
            guide: text(&gate["guide"]),
            versions,
        })
    }

    /// The entry that serves framework `version`, if one does.
    pub(crate) fn pick(&self, version: &str) -> Option<&Served> {
        self.versions.iter().find(|s| s.serves(version))
    }

    /// The entry built, given the adapter's enabled features: the first
    /// (most specific) one on.
    fn built(&self, enabled: &[&str]) -> Option<&Served> {
        self.versions
            .iter()
            .find(|s| s.feature.as_deref().is_none_or(|f| enabled.contains(&f)))
    }

    /// Whether `package` is one of the framework's own crates.
    fn is_framework_crate(&self, package: &str) -> bool {
        package == self.framework
            || package
                .strip_prefix(self.framework.as_str())
                .is_some_and(|rest| rest.starts_with('-'))
    }
}

/// One package of `cargo metadata`: its name, version and source (`None`
/// for a path package), and the package itself.
#[derive(Clone, Copy)]
struct Package<'m> {
    name: &'m str,
    version: &'m str,
    source: Option<&'m str>,
    value: &'m Value,
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
                    value: p,
                };
                Some((p["id"].as_str()?, package))
            })
            .collect();
        Some(Resolve {
            packages,
            nodes: metadata["resolve"]["nodes"].as_array()?,
        })
    }

    /// The package of a resolve node.
    fn package(&self, node: &Value) -> Option<Package<'m>> {
        self.packages.get(node["id"].as_str()?).copied()
    }

    /// The packages named `krate` that `node` depends on directly.
    fn deps_named(&self, node: &Value, krate: &str) -> Vec<Package<'m>> {
        node["deps"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|d| self.packages.get(d["pkg"].as_str()?).copied())
            .filter(|p| p.name == krate)
            .collect()
    }

    /// Each adapter of the resolve that builds one of its entries: its
    /// declaration, its node, the entry built and the framework version it
    /// depends on.
    fn adapters(&self) -> Vec<(Adapter, &'m Value, Served, Package<'m>)> {
        let mut out = Vec::new();
        for node in self.nodes {
            let Some(adapter) = self.package(node).and_then(|p| Adapter::read(p.value)) else {
                continue;
            };
            let enabled: Vec<&str> = node["features"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            let Some(built) = adapter.built(&enabled).cloned() else {
                continue;
            };
            let Some(framework) = self.deps_named(node, &adapter.krate).into_iter().next() else {
                continue;
            };
            out.push((adapter, node, built, framework));
        }
        out
    }
}

/// What an adapter's Cargo.toml declares, read from its text (the SDK the
/// stock `gate` is built with, or a checkout's) rather than from `cargo
/// metadata`: the declaration, and its default features.
#[derive(Debug)]
pub(crate) struct Declared {
    pub adapter: Adapter,
    pub defaults: Vec<String>,
}

impl Declared {
    /// The declaration in an adapter's Cargo.toml text, if it makes one.
    pub(crate) fn read(manifest: &str) -> Option<Declared> {
        let doc = manifest.parse::<toml_edit::DocumentMut>().ok()?;
        let package = doc.get("package")?;
        let json = serde_json::json!({
            "name": package.get("name")?.as_str()?,
            "metadata": { "gate": toml_json(package.get("metadata")?.get("gate")?) },
        });
        let adapter = Adapter::read(&json)?;
        let defaults = doc
            .get("features")
            .and_then(|f| f.get("default"))
            .and_then(|d| d.as_array())
            .map(|a| a.iter().filter_map(|f| f.as_str().map(str::to_string)).collect())
            .unwrap_or_default();
        Some(Declared { adapter, defaults })
    }

    /// The feature that serves `version` of the framework, if one does.
    pub(crate) fn serving(&self, version: &str) -> Option<String> {
        self.adapter.pick(version)?.feature.clone()
    }

    /// Whether the crate, on the SDK's `feature`, can have the built-in
    /// models (built on the SDK's defaults).
    pub(crate) fn has_builtins_on(&self, feature: &str) -> bool {
        self.defaults.iter().any(|d| d == feature)
    }
}

/// A TOML item as JSON (strings, numbers, booleans, arrays, tables).
fn toml_json(item: &toml_edit::Item) -> serde_json::Value {
    fn value(v: &toml_edit::Value) -> serde_json::Value {
        use toml_edit::Value as V;
        match v {
            V::String(s) => s.value().as_str().into(),
            V::Integer(i) => (*i.value()).into(),
            V::Float(f) => (*f.value()).into(),
            V::Boolean(b) => (*b.value()).into(),
            V::Datetime(d) => d.value().to_string().into(),
            V::Array(a) => a.iter().map(value).collect(),
            V::InlineTable(t) => t.iter().map(|(k, v)| (k.to_string(), value(v))).collect(),
        }
    }
    match item {
        toml_edit::Item::None => serde_json::Value::Null,
        toml_edit::Item::Value(v) => value(v),
        toml_edit::Item::Table(t) => t.iter().map(|(k, i)| (k.to_string(), toml_json(i))).collect(),
        toml_edit::Item::ArrayOfTables(a) => a
            .iter()
            .map(|t| {
                t.iter()
                    .map(|(k, i)| (k.to_string(), toml_json(i)))
                    .collect::<serde_json::Value>()
            })
            .collect(),
    }
}

/// Children get the own settings (`NAME_*`) of the framework of the SDK
/// compiled into this gate, whose Cargo.toml is `sdk_manifest`: the one
/// framework gate trusts by name (see `gate_runner::child::pass_framework_settings`).
pub(crate) fn trust_framework_of(sdk_manifest: &str) {
    if let Some(sdk) = Declared::read(sdk_manifest) {
        gate_runner::child::pass_framework_settings(&sdk.adapter.framework);
    }
}

/// The version of crate `krate` that `package` depends on directly in this resolve.
pub(crate) fn crate_version(metadata: &Value, package: &str, krate: &str) -> Option<String> {
    let r = Resolve::new(metadata)?;
    let node = r
        .nodes
        .iter()
        .find(|n| r.package(n).is_some_and(|p| p.name == package))?;
    r.deps_named(node, krate).first().map(|p| p.version.to_string())
}

/// The framework an adapter of the resolve is built against, as a report
/// names it: the framework's name, and its version, with, for a git or
/// path source, where it came from (a team on a git revision of its
/// framework sees that revision, not the minor).
pub(crate) fn resolved_framework(metadata: &Value) -> Option<gate_contract::protocol::FrameworkId> {
    let r = Resolve::new(metadata)?;
    let (adapter, _, _, framework) = r.adapters().into_iter().next()?;
    let version = framework.version;
    let said = match framework.source {
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
    };
    Some(gate_contract::protocol::FrameworkId {
        name: adapter.framework,
        version: said,
    })
}

/// A harness whose crates and gate's adapter are on different versions of
/// its framework.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Mismatch {
    pub adapter: Adapter,
    /// The crate that depends on its own version of the framework, and that version.
    pub dependent: String,
    pub theirs: String,
    /// The adapter's version of the framework and the entry it was built with.
    pub gates: String,
    pub built: Served,
    /// The entry that serves `theirs`, if the adapter has one.
    pub pick: Option<Served>,
}

impl Mismatch {
    pub(crate) fn message(&self, package: &str) -> String {
        let a = &self.adapter;
        format!(
            "the harness `{package}` would link two {}s: `{}` depends on {} {}, and gate is built against {} {} \
             ({}); their tensor types do not match",
            a.framework,
            self.dependent,
            a.krate,
            self.theirs,
            a.krate,
            self.gates,
            match &self.built.feature {
                Some(f) => format!("its feature `{f}`"),
                None => format!("its adapter `{}`", a.package),
            }
        )
    }

    pub(crate) fn hint(&self) -> String {
        let a = &self.adapter;
        let guide = a.guide.as_deref().map(|g| format!(" ({g})")).unwrap_or_default();
        match self.pick.as_ref().map(|p| p.feature.as_deref()) {
            Some(Some(f)) => format!(
                "build gate against your {}: `{} = {{ ..., default-features = false, features = [\"{f}\"] }}` in \
                 the Cargo.toml of `{}`{guide}",
                a.framework, a.package, self.dependent
            ),
            Some(None) => format!(
                "move `{}` to {} {}, the one gate's adapter `{}` is built against{guide}",
                self.dependent, a.krate, self.gates, a.package
            ),
            None => format!(
                "gate has no adapter for {} {} (it has {}); move the crate to one of those, or see \
                 CONTRIBUTING.md for adding the next minor",
                a.krate,
                self.theirs,
                a.versions
                    .iter()
                    .map(|s| s.choice(&a.package))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }
}

/// The first mismatch between an adapter's framework version and one
/// another crate of the resolve depends on directly; `None` when they
/// agree, when no adapter is in the graph, or when the metadata does not say.
pub(crate) fn mismatch(metadata: &Value) -> Option<Mismatch> {
    let r = Resolve::new(metadata)?;
    for (adapter, _, built, framework) in r.adapters() {
        let gates = framework.version.to_string();
        let mismatch = |dependent: &str, theirs: &str| {
            let pick = adapter.pick(theirs);
            (theirs != gates || pick != Some(&built)).then(|| Mismatch {
                adapter: adapter.clone(),
                dependent: dependent.to_string(),
                theirs: theirs.to_string(),
                gates: gates.clone(),
                built: built.clone(),
                pick: pick.cloned(),
            })
        };
        for node in r.nodes {
            let Some(dependent) = r.package(node).map(|p| p.name) else {
                continue;
            };
            if dependent == adapter.package || adapter.is_framework_crate(dependent) {
                continue;
            }
            for theirs in r.deps_named(node, &adapter.krate) {
                if let Some(m) = mismatch(dependent, theirs.version) {
                    return Some(m);
                }
            }
        }
        // The adapter alone, on a version its built entry does not serve
        // (a more specific entry's release, picked by a less specific feature).
        if let Some(m) = mismatch(&adapter.package, &gates) {
            return Some(m);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// An adapter `sdk` of the framework `fw` (crate `fw-core`) with a
    /// feature per minor, 0.9.0 and 0.9.1 apart.
    fn declaration() -> Value {
        json!({
            "framework": "fw",
            "framework-crate": "fw-core",
            "guide": "docs/fw.md",
            "versions": [
                {"feature": "fw-0-9-1", "serves": ["0.9.0", "0.9.1"]},
                {"feature": "fw-0-9", "serves": ["0.9"]},
                {"feature": "fw-0-10", "serves": ["0.10"]},
                {"feature": "fw-0-11", "serves": ["0.11"]},
            ]
        })
    }

    fn adapter() -> Adapter {
        Adapter::read(&json!({"name": "sdk", "metadata": {"gate": declaration()}})).unwrap()
    }

    #[test]
    fn resolved_framework_names_a_git_revision_and_keeps_a_registry_version_plain() {
        let with = |source: Value| {
            json!({
                "packages": [
                    {"id": "sdk-id", "name": "sdk", "version": "0.1.0", "source": null, "metadata": {"gate": declaration()}},
                    {"id": "cc", "name": "fw-core", "version": "0.11.0", "source": source},
                ],
                "resolve": {"nodes": [{"id": "sdk-id", "features": ["fw-0-11"], "deps": [{"name": "fw_core_0_11", "pkg": "cc"}]}]}
            })
        };
        let said = |m: &Value| resolved_framework(m).map(|f| format!("{} {}", f.name, f.version));
        let registry = with(json!("registry+https://github.com/rust-lang/crates.io-index"));
        assert_eq!(said(&registry).as_deref(), Some("fw 0.11.0"));
        let git = with(json!(
            "git+https://github.com/o/fw?rev=2a13b0f#2a13b0f3f0e1d2c3b4a5968778695a4b3c2d1e0f"
        ));
        assert_eq!(
            said(&git).as_deref(),
            Some("fw 0.11.0 (git https://github.com/o/fw 2a13b0f3f0e1)")
        );
        assert_eq!(said(&with(Value::Null)).as_deref(), Some("fw 0.11.0 (path)"));
    }

    /// A crate `ml` on `theirs` (if any) beside the adapter, on `gates`
    /// under `features`; `declaration` is what the adapter declares.
    fn metadata_of(declaration: Value, features: &[&str], gates: &str, theirs: Option<&str>) -> Value {
        let mut packages = vec![
            json!({"id": "sdk-id", "name": "sdk", "version": "0.1.0", "metadata": {"gate": declaration}}),
            json!({"id": "cc-gate", "name": "fw-core", "version": gates}),
            json!({"id": "fw-nn", "name": "fw-nn", "version": "0.0.1"}),
            json!({"id": "ml-id", "name": "ml", "version": "0.1.0"}),
        ];
        let mut ml_deps = vec![json!({"name": "gate", "pkg": "sdk-id"})];
        if let Some(v) = theirs {
            if v != gates {
                packages.push(json!({"id": "cc-ml", "name": "fw-core", "version": v}));
                ml_deps.push(json!({"name": "fw_core", "pkg": "cc-ml"}));
            } else {
                ml_deps.push(json!({"name": "fw_core", "pkg": "cc-gate"}));
            }
        }
        json!({
            "packages": packages,
            "resolve": {"nodes": [
                {"id": "sdk-id", "features": features, "deps": [{"name": "fw_core_x", "pkg": "cc-gate"}]},
                {"id": "ml-id", "features": [], "deps": ml_deps},
                // The framework's own crates depend on its core as they please.
                {"id": "fw-nn", "features": [], "deps": [{"name": "fw_core", "pkg": "cc-ml"}]},
                {"id": "cc-gate", "features": [], "deps": []},
            ]}
        })
    }

    fn metadata(features: &[&str], gates: &str, theirs: Option<&str>) -> Value {
        metadata_of(declaration(), features, gates, theirs)
    }

    #[test]
    fn each_version_has_the_feature_its_adapter_declares() {
        let a = adapter();
        let pick = |v: &str| a.pick(v).and_then(|s| s.feature.clone());
        assert_eq!(pick("0.9.1").as_deref(), Some("fw-0-9-1"));
        assert_eq!(pick("0.9.2").as_deref(), Some("fw-0-9"));
        assert_eq!(pick("0.9.2-alpha.1").as_deref(), Some("fw-0-9"));
        assert_eq!(pick("0.10.2").as_deref(), Some("fw-0-10"));
        assert_eq!(pick("0.11.1").as_deref(), Some("fw-0-11"));
        assert_eq!(pick("0.1.0"), None, "`0.1` is not a prefix of `0.11`'s numbers");
        assert_eq!(pick("0.8.4"), None);
        assert_eq!(pick("x"), None);
    }

    #[test]
    fn a_crate_on_another_minor_is_named_with_the_feature_to_pick() {
        let m = mismatch(&metadata(&["default", "fw-0-11"], "0.11.1", Some("0.9.1"))).unwrap();
        assert_eq!(
            (
                m.dependent.as_str(),
                m.theirs.as_str(),
                m.gates.as_str(),
                m.built.feature.as_deref(),
                m.pick.as_ref().and_then(|p| p.feature.as_deref())
            ),
            ("ml", "0.9.1", "0.11.1", Some("fw-0-11"), Some("fw-0-9-1"))
        );
        assert_eq!(
            m.message("ml"),
            "the harness `ml` would link two fws: `ml` depends on fw-core 0.9.1, and gate is built against fw-core \
             0.11.1 (its feature `fw-0-11`); their tensor types do not match"
        );
        assert_eq!(
            m.hint(),
            "build gate against your fw: `sdk = { ..., default-features = false, features = [\"fw-0-9-1\"] }` in the \
             Cargo.toml of `ml` (docs/fw.md)"
        );
    }

    #[test]
    fn the_same_version_is_no_mismatch() {
        assert_eq!(
            mismatch(&metadata(&["fw-0-9", "fw-0-9-1"], "0.9.1", Some("0.9.1"))),
            None
        );
        assert_eq!(mismatch(&metadata(&["fw-0-10"], "0.10.2", None)), None);
        assert_eq!(mismatch(&metadata(&["fw-0-11"], "0.11.1", Some("0.11.1"))), None);
        // An adapter without one of its features on builds nothing to check.
        assert_eq!(mismatch(&metadata(&[], "0.11.1", Some("0.9.1"))), None);
    }

    #[test]
    fn the_wrong_patch_feature_inside_a_minor_is_named() {
        let m = mismatch(&metadata(&["fw-0-9"], "0.9.1", Some("0.9.1"))).unwrap();
        let feature = |s: &Served| s.feature.clone();
        assert_eq!(
            (feature(&m.built), m.pick.as_ref().and_then(feature)),
            (Some("fw-0-9".into()), Some("fw-0-9-1".into()))
        );
        let m = mismatch(&metadata(&["fw-0-9"], "0.9.1", None)).unwrap();
        assert_eq!(
            (m.dependent.as_str(), m.pick.as_ref().and_then(feature)),
            ("sdk", Some("fw-0-9-1".into()))
        );
    }

    #[test]
    fn a_minor_without_an_adapter_lists_the_ones_there_are() {
        let m = mismatch(&metadata(&["fw-0-11"], "0.11.1", Some("0.8.4"))).unwrap();
        assert_eq!(m.pick, None);
        assert_eq!(
            m.hint(),
            "gate has no adapter for fw-core 0.8.4 (it has 0.9.0, 0.9.1: `fw-0-9-1`, 0.9: `fw-0-9`, 0.10: `fw-0-10`, \
             0.11: `fw-0-11`); move the crate to one of those, or see CONTRIBUTING.md for adding the next minor"
        );
    }

    /// An adapter of one version (no features) gets the same check: a crate
    /// on another minor of its framework is named before the build.
    #[test]
    fn an_adapter_of_one_version_is_checked_the_same_way() {
        let one = json!({"framework": "fw", "framework-crate": "fw-core", "versions": [{"serves": ["0.22"]}]});
        assert_eq!(mismatch(&metadata_of(one.clone(), &[], "0.22.1", Some("0.22.1"))), None);
        let m = mismatch(&metadata_of(one, &[], "0.22.1", Some("0.21.0"))).unwrap();
        assert_eq!(
            m.message("ml"),
            "the harness `ml` would link two fws: `ml` depends on fw-core 0.21.0, and gate is built against fw-core \
             0.22.1 (its adapter `sdk`); their tensor types do not match"
        );
        assert_eq!(
            m.hint(),
            "gate has no adapter for fw-core 0.21.0 (it has 0.22: `sdk`); move the crate to one of those, or see \
             CONTRIBUTING.md for adding the next minor"
        );
    }

    /// What the workspace's own adapters declare, as `cargo metadata` hands
    /// it over, reads as a declaration: each names its framework, the crate
    /// of its version and at least one version it serves.
    #[test]
    fn the_workspaces_adapters_declare_their_versions() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../Cargo.toml");
        let out = std::process::Command::new(env!("CARGO"))
            .args([
                "metadata",
                "--format-version",
                "1",
                "--no-deps",
                "--offline",
                "--manifest-path",
            ])
            .arg(root)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let metadata: Value = serde_json::from_slice(&out.stdout).unwrap();
        let adapters: Vec<Adapter> = metadata["packages"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Adapter::read)
            .collect();
        assert_eq!(adapters.len(), 2, "{adapters:?}");
        for a in &adapters {
            assert!(
                !a.versions.is_empty() && a.versions.iter().all(|s| !s.serves.is_empty()),
                "{a:?}"
            );
            // The features it names are its own.
            let package = metadata["packages"]
                .as_array()
                .unwrap()
                .iter()
                .find(|p| p["name"] == a.package.as_str())
                .unwrap();
            for f in a.versions.iter().filter_map(|s| s.feature.as_deref()) {
                assert!(package["features"].get(f).is_some(), "{}: no feature `{f}`", a.package);
            }
        }
    }

    /// An adapter's Cargo.toml as the SDK's is laid out, for a framework `fw`.
    const DECLARED: &str = r#"[package]
name = "gate-sdk"

[package.metadata.gate]
framework = "fw"
framework-crate = "fw-core"
versions = [
    { feature = "fw-0-9-1", serves = ["0.9.0", "0.9.1"] },
    { feature = "fw-0-9", serves = ["0.9"] },
    { feature = "fw-0-10", serves = ["0.10"] },
]

[features]
default = ["fw-0-10"]
"#;

    #[test]
    fn each_version_gets_the_feature_the_adapter_declares_for_it() {
        let sdk = Declared::read(DECLARED).unwrap();
        assert_eq!(sdk.adapter.krate, "fw-core");
        assert_eq!(sdk.defaults, ["fw-0-10"]);
        for (version, feature) in [
            ("0.9.1", Some("fw-0-9-1")),
            ("0.9.0", Some("fw-0-9-1")),
            ("0.9.2", Some("fw-0-9")),
            ("0.9.2-alpha.1", Some("fw-0-9")),
            ("0.10.99", Some("fw-0-10")),
            ("0.11.0", None),
            ("0.8.4", None),
        ] {
            assert_eq!(sdk.serving(version).as_deref(), feature, "{version}");
        }
        assert!(sdk.has_builtins_on("fw-0-10") && !sdk.has_builtins_on("fw-0-9"));
    }

    /// The SDK's own Cargo.toml, as it is built into gate (and a checkout
    /// holds it), declares what `gate init --harness` reads: each entry a
    /// feature of the SDK's, the default among them.
    #[test]
    fn the_sdks_declaration_reads_and_names_its_own_features() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../gate-sdk/Cargo.toml");
        let text = std::fs::read_to_string(path).unwrap();
        let sdk = Declared::read(&text).unwrap();
        let doc: toml_edit::DocumentMut = text.parse().unwrap();
        assert!(!sdk.adapter.versions.is_empty());
        for entry in &sdk.adapter.versions {
            let feature = entry.feature.as_deref().unwrap();
            assert!(doc["features"].get(feature).is_some(), "{feature}");
            for served in &entry.serves {
                let version = if served.matches('.').count() == 1 {
                    format!("{served}.99")
                } else {
                    served.clone()
                };
                assert_eq!(sdk.serving(&version).as_deref(), Some(feature), "{served}");
            }
        }
        assert_eq!(sdk.defaults.len(), 1, "{:?}", sdk.defaults);
        assert!(sdk
            .adapter
            .versions
            .iter()
            .any(|v| v.feature == Some(sdk.defaults[0].clone())));
    }
}
