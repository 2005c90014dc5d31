//! `gate init --harness`: a crate set up with a harness on gate's candle
//! SDK, the one adapter `gate init` scaffolds: the harness's source, the
//! SDK's feature for the crate's candle, the dependencies added to its
//! Cargo.toml. (The other adapters' crates are set up by hand, docs/burn.md.)

use std::path::{Path, PathBuf};

use super::{package_name, relative, with_harness_line, GateSource, InitArgs};
use crate::errors::CliError;
use gate_spec::hint::Problem;

/// The harness file `gate init --harness` writes.
const HARNESS: &str = "//! This crate's harness: the workloads named below (each a type that
//! implements `gate::Workload`; see docs/sdk.md). budgets.yaml names this
//! binary under `harness:`, so `gate check` builds and runs it.

gate::main!(/* your workloads, e.g. my_crate::MyForecaster */);
";

/// The harness file on candle 0.11: with gate's built-in `mlp`
/// (gate-builtins), which the starter spec measures until the crate's own
/// workloads replace it.
const HARNESS_WITH_MLP: &str = "//! This crate's harness: the workloads named below (each a type that
//! implements `gate::Workload`; see docs/sdk.md). budgets.yaml names this
//! binary under `harness:`, so `gate check` builds and runs it. gate's
//! built-in `mlp` runs the starter spec until your workloads replace it.

gate::main!(gate_builtins::Mlp /* , your workloads, e.g. my_crate::MyForecaster */);
";

/// gate's SDK on candle, the adapter `gate init --harness` sets a crate up
/// with (its library is `gate`).
pub(super) const SDK_PACKAGE: &str = "gate-sdk";

/// The crate whose version is candle's, as the SDK's
/// `[package.metadata.gate] framework-crate` says.
const CANDLE_CRATE: &str = "candle-core";

/// The package of gate's built-in models (a harness on candle 0.11 may register them).
const BUILTINS_PACKAGE: &str = "gate-builtins";

/// Whether a crate on `candle` (its gate feature; none yet means 0.11) can
/// have the built-in models, which are written against candle 0.11.
fn with_builtins(candle: Option<&str>) -> bool {
    candle.is_none_or(|c| c == "candle-0-11")
}

/// gate's candle feature for the crate at `manifest`: the one that serves
/// the candle-core it depends on (resolved in its Cargo.lock when there is
/// one, else its requirement), or `None` when it has no candle of its own
/// (gate's default, candle 0.11 with the built-in models).
fn candle_feature(manifest: &Path, text: &str) -> Result<Option<String>, CliError> {
    let Ok(package) = package_name(manifest, text) else {
        return Ok(None);
    };
    // Bounded, its errors shown (#54): a held lock or a broken manifest is
    // said, not waited on forever or swallowed.
    let resolved = match crate::pipeline::harness::cargo_metadata(manifest, &["--locked", "--offline"], false)? {
        Ok(o) => serde_json::from_slice::<serde_json::Value>(&o)
            .ok()
            .and_then(|m| crate::pipeline::versions::crate_version(&m, &package, CANDLE_CRATE)),
        // A crate without candle of its own has nothing to resolve: what
        // cargo said does not matter.
        Err(_) if candle_requirement(text).is_none() => None,
        Err(said) => {
            // Without a Cargo.lock that matches, cargo refuses `--locked`:
            // the requirement in Cargo.toml is read instead, and why is said.
            let last: Vec<&str> = said.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
            let last = last[last.len().saturating_sub(3)..].join(" / ");
            eprintln!(
                "note: `cargo metadata --locked --offline` could not resolve {} ({}); reading candle-core's \
                 requirement from it instead",
                manifest.display(),
                if last.is_empty() { "it said nothing" } else { &last }
            );
            None
        }
    };
    let Some(version) = resolved.or_else(|| candle_requirement(text)) else {
        return Ok(None);
    };
    Ok(sdk_feature(&version))
}

/// The SDK's feature for candle-core `version`, by the SDK's naming of its
/// features (`candle-MAJOR-MINOR`; 0.9.0 and 0.9.1 have `candle-0-9-1`,
/// as 0.9.2 added API they lack), so that a new minor of the SDK needs no
/// line here; `None` below 0.9, which the SDK never served. The SDK's
/// `[package.metadata.gate] versions` is the word on what it serves: a
/// crate it does not serve is told so, by that list, at its first `gate
/// check` (crates/gate-cli/src/pipeline/versions.rs).
fn sdk_feature(version: &str) -> Option<String> {
    let mut parts = version.split(['.', '-', '+']).map(|p| p.parse::<u64>().ok());
    let (major, minor, patch) = (parts.next()??, parts.next()??, parts.next().flatten());
    match (major, minor, patch) {
        (0, 0..=8, _) => None,
        (0, 9, Some(0 | 1)) => Some("candle-0-9-1".into()),
        (major, minor, _) => Some(format!("candle-{major}-{minor}")),
    }
}

/// The version in the manifest's `candle-core` requirement, operators
/// stripped (`"=0.9.1"`, `{ version = "0.10" }`): what a fresh lock resolves
/// within.
fn candle_requirement(text: &str) -> Option<String> {
    let doc = text.parse::<toml_edit::DocumentMut>().ok()?;
    let dep = doc.get("dependencies")?.get("candle-core")?;
    let req = dep.as_str().or_else(|| dep.get("version")?.as_str())?;
    let v = req.trim().trim_start_matches(['=', '^', '~', '>', ' ']);
    // A bare `0.9` resolves to the newest 0.9 (0.9.2 or later).
    Some(if v.matches('.').count() == 1 {
        format!("{v}.99")
    } else {
        v.to_string()
    })
}

/// Adds what a harness needs to a crate's manifest, keeping every key the
/// crate already has: gate's SDK (the package `gate-sdk`, from a path or
/// git until its first release on crates.io), serde (for the configs) and
/// a `cuda` feature that forwards to gate's; on candle 0.11 gate's built-in
/// models too. Returns the manifest, what was added, and whether the crate
/// has the built-in models.
fn with_harness_deps(
    manifest: &str,
    source: &GateSource,
    tag: &str,
    candle: Option<&str>,
) -> Result<(String, Vec<String>, bool), String> {
    use toml_edit::{value, Array, DocumentMut, InlineTable, Item, Table};
    let mut doc = manifest.parse::<DocumentMut>().map_err(|e| e.to_string())?;
    let mut added = Vec::new();
    let deps = doc.entry("dependencies").or_insert(Item::Table(Table::new()));
    let deps = deps.as_table_like_mut().ok_or("`dependencies` is not a table")?;
    // gate's SDK is the package `gate-sdk` (its library is `gate`); a crate
    // may already have it, under that key or renamed (`gate = { package =
    // "gate-sdk", ... }`, or `gate` from a checkout before the rename).
    let existing = deps.iter().find_map(|(key, dep)| {
        let package = dep.get("package").and_then(|p| p.as_str()).unwrap_or(key);
        (package == SDK_PACKAGE || key == "gate").then(|| key.to_string())
    });
    let key = existing.clone().unwrap_or_else(|| SDK_PACKAGE.to_string());
    if existing.is_none() {
        let mut t = source.dependency(tag, "crates/gate-sdk");
        // On the crate's candle, 0.11 when it names none yet.
        t.insert("default-features", false.into());
        let mut a = Array::new();
        a.push(candle.unwrap_or("candle-0-11"));
        t.insert("features", a.into());
        let line = t.to_string();
        deps.insert(SDK_PACKAGE, value(t));
        added.push(format!("{SDK_PACKAGE} = {}", line.trim()));
    }
    // On 0.11, gate's built-in models too (their crate, written against
    // 0.11 only), so that the starter spec's `mlp` runs before the crate
    // has a workload.
    let has_builtins = deps.contains_key(BUILTINS_PACKAGE);
    let builtins = has_builtins || (with_builtins(candle) && existing.is_none());
    if builtins && !has_builtins {
        let t = source.dependency(tag, "crates/gate-builtins");
        let line = t.to_string();
        deps.insert(BUILTINS_PACKAGE, value(t));
        added.push(format!("{BUILTINS_PACKAGE} = {}", line.trim()));
    }
    if !deps.contains_key("serde") {
        let mut t = InlineTable::new();
        t.insert("version", "1".into());
        let mut f = Array::new();
        f.push("derive");
        t.insert("features", f.into());
        deps.insert("serde", value(t));
        added.push("serde = { version = \"1\", features = [\"derive\"] }".into());
    }
    let features = doc.entry("features").or_insert(Item::Table(Table::new()));
    let features = features.as_table_like_mut().ok_or("`features` is not a table")?;
    if !features.contains_key("cuda") {
        let mut a = Array::new();
        let mut forwards = vec![format!("{key}/cuda")];
        if builtins && !has_builtins {
            forwards.push(format!("{BUILTINS_PACKAGE}/cuda"));
        }
        for f in &forwards {
            a.push(f.as_str());
        }
        features.insert("cuda", value(a));
        let list: Vec<String> = forwards.iter().map(|f| format!("\"{f}\"")).collect();
        added.push(format!("[features] cuda = [{}]", list.join(", ")));
    }
    Ok((doc.to_string(), added, builtins))
}

/// The crate's Cargo.toml with the harness's dependencies added, and the keys added.
pub(super) struct ManifestEdit {
    pub(super) manifest: PathBuf,
    pub(super) edited: String,
    pub(super) added: Vec<String>,
}

/// `--harness`: names the harness in `budgets`, and returns the harness's
/// source file and the edit of the crate's Cargo.toml (nothing written yet).
pub(super) fn harness(
    args: &InitArgs,
    source: &GateSource,
    budgets: &mut String,
) -> Result<((PathBuf, String), ManifestEdit), CliError> {
    let crate_dir = args.crate_dir.clone().unwrap_or_else(|| args.dir.clone());
    let manifest = crate_dir.join("Cargo.toml");
    let text = std::fs::read_to_string(&manifest).map_err(|e| {
        CliError::Usage(
            Problem::new(format!("--harness: cannot read {}: {e}", manifest.display()))
                .with_hint("run it in the crate that holds your models, or pass `--crate-dir path/to/crate`"),
        )
    })?;
    let package = package_name(&manifest, &text)?;
    // A path dependency is written relative to the crate, so it can be committed.
    let source = match source {
        GateSource::Path(p) => {
            let abs = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
            GateSource::Path(relative(&abs(&crate_dir), &abs(p)))
        }
        other => other.clone(),
    };
    let candle = candle_feature(&manifest, &text)?;
    if let Some(f) = &candle {
        eprintln!("{} is on candle `{f}`: gate's adapter for it", manifest.display());
    }
    let (edited, added, builtins) =
        with_harness_deps(&text, &source, &args.gate_ref, candle.as_deref()).map_err(|e| {
            CliError::Usage(
                Problem::new(format!("--harness: cannot edit {}: {e}", manifest.display()))
                    .with_hint("add the lines by hand (docs/sdk.md, step 1)"),
            )
        })?;
    *budgets = with_harness_line(budgets, &package)
        // The harness knows the kinds its `gate::main!` registers, not every built-in.
        .replace(
            "# mlp | tft | dqn | ppo | mamba2",
            "# a kind src/bin/gate-harness.rs registers in gate::main!(...)",
        );
    let harness = if builtins { HARNESS_WITH_MLP } else { HARNESS };
    let source = (crate_dir.join("src/bin/gate-harness.rs"), harness.to_string());
    Ok((
        source,
        ManifestEdit {
            manifest,
            edited,
            added,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_candle_version_gets_the_sdk_feature_of_its_name() {
        assert_eq!(sdk_feature("0.9.1").as_deref(), Some("candle-0-9-1"));
        assert_eq!(sdk_feature("0.9.0").as_deref(), Some("candle-0-9-1"));
        assert_eq!(sdk_feature("0.9.2").as_deref(), Some("candle-0-9"));
        assert_eq!(sdk_feature("0.9.2-alpha.1").as_deref(), Some("candle-0-9"));
        assert_eq!(sdk_feature("0.10.2").as_deref(), Some("candle-0-10"));
        assert_eq!(sdk_feature("0.11.1").as_deref(), Some("candle-0-11"));
        assert_eq!(sdk_feature("0.12.0").as_deref(), Some("candle-0-12"));
        assert_eq!(sdk_feature("0.8.4"), None);
        assert_eq!(sdk_feature("x"), None);
    }

    /// Every feature the SDK's naming gives for a version the SDK declares
    /// it serves is a feature of the SDK.
    #[test]
    fn the_sdk_features_named_are_the_sdks_own() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../gate-sdk/Cargo.toml");
        let doc: toml_edit::DocumentMut = std::fs::read_to_string(root).unwrap().parse().unwrap();
        let versions = doc["package"]["metadata"]["gate"]["versions"].as_array().unwrap();
        for entry in versions {
            let entry = entry.as_inline_table().unwrap();
            let feature = entry.get("feature").and_then(|f| f.as_str()).unwrap();
            for served in entry.get("serves").and_then(|s| s.as_array()).unwrap() {
                let served = served.as_str().unwrap();
                let version = if served.matches('.').count() == 1 {
                    format!("{served}.99")
                } else {
                    served.to_string()
                };
                assert_eq!(sdk_feature(&version).as_deref(), Some(feature), "{served}");
                assert!(doc["features"].get(feature).is_some(), "{feature}");
            }
        }
    }

    #[test]
    fn the_harness_dependency_is_gate_sdk_and_cuda_forwards_to_it() {
        let manifest = "[package]\nname = \"m\"\nversion = \"0.1.0\"\n";
        let source = GateSource::Path(PathBuf::from("../gate"));
        let (edited, added, builtins) = with_harness_deps(manifest, &source, "v0.1.0", Some("candle-0-10")).unwrap();
        let line =
            r#"gate-sdk = { path = "../gate/crates/gate-sdk", default-features = false, features = ["candle-0-10"] }"#;
        assert!(edited.contains(line), "{edited}");
        assert!(edited.contains(r#"cuda = ["gate-sdk/cuda"]"#), "{edited}");
        assert_eq!(added[0], line);
        // The built-in models are candle 0.11's only.
        assert!(!builtins && !edited.contains("gate-builtins"), "{edited}");
    }

    #[test]
    fn on_candle_0_11_the_built_in_models_come_too_with_their_cuda() {
        let manifest = "[package]\nname = \"m\"\nversion = \"0.1.0\"\n";
        let source = GateSource::Path(PathBuf::from("../gate"));
        let (edited, _, builtins) = with_harness_deps(manifest, &source, "v0.1.0", None).unwrap();
        assert!(builtins);
        assert!(
            edited.contains(r#"gate-builtins = { path = "../gate/crates/gate-builtins" }"#),
            "{edited}"
        );
        assert!(
            edited.contains(r#"cuda = ["gate-sdk/cuda", "gate-builtins/cuda"]"#),
            "{edited}"
        );
    }

    #[test]
    fn a_crate_that_has_gate_sdk_under_another_key_keeps_it() {
        let manifest = "[package]\nname = \"m\"\nversion = \"0.1.0\"\n\n[dependencies]\n\
                        gate = { package = \"gate-sdk\", version = \"0.1\" }\n";
        let source = GateSource::GitHub("acme/gate".into());
        let (edited, added, builtins) = with_harness_deps(manifest, &source, "v0.1.0", None).unwrap();
        assert!(!builtins, "a crate that has gate already gets no second dependency");
        assert!(!edited.contains("gate-sdk = "), "{edited}");
        assert!(edited.contains(r#"cuda = ["gate/cuda"]"#), "{edited}");
        assert!(added.iter().all(|a| !a.starts_with("gate")), "{added:?}");
    }
}
