//! `gate init --harness`: a crate set up with a harness on gate's SDK, the
//! one adapter `gate init` scaffolds: the harness's source, the SDK's
//! feature for the framework version the crate is on, the dependencies
//! added to its Cargo.toml. (The other adapters' crates are set up by
//! hand, as each adapter's guide says.)
//!
//! Which feature serves which framework version is the adapter's word, not
//! this file's: its Cargo.toml declares them (`[package.metadata.gate]`,
//! read as `gate check` reads it from `cargo metadata`,
//! crates/gate-cli/src/pipeline/versions.rs). This reads the declaration of
//! the checkout a path source names, else of the SDK this gate's built-in
//! models were built with.

use std::path::{Path, PathBuf};

use super::{package_name, relative, with_harness_line, GateSource, InitArgs};
use crate::errors::CliError;
use crate::pipeline::versions::Declared;
use gate_spec::hint::Problem;

/// The harness file `gate init --harness` writes.
const HARNESS: &str = "//! This crate's harness: the workloads named below (each a type that
//! implements `gate::Workload`; see docs/sdk.md). budgets.yaml names this
//! binary under `harness:`, so `gate check` builds and runs it.

gate::main!(/* your workloads, e.g. my_crate::MyForecaster */);
";

/// The harness file with gate's built-in `mlp` (gate-builtins), which the
/// starter spec measures until the crate's own workloads replace it.
const HARNESS_WITH_MLP: &str = "//! This crate's harness: the workloads named below (each a type that
//! implements `gate::Workload`; see docs/sdk.md). budgets.yaml names this
//! binary under `harness:`, so `gate check` builds and runs it. gate's
//! built-in `mlp` runs the starter spec until your workloads replace it.

gate::main!(gate_builtins::Mlp /* , your workloads, e.g. my_crate::MyForecaster */);
";

/// gate's SDK, the adapter `gate init --harness` sets a crate up with (its
/// library is `gate`).
pub(super) const SDK_PACKAGE: &str = "gate-sdk";

/// The SDK's folder in gate's repository.
const SDK_FOLDER: &str = "crates/gate-sdk";

/// The package of gate's built-in models, which are built on the SDK's
/// default features only.
const BUILTINS_PACKAGE: &str = "gate-builtins";

/// The SDK's declaration: the checkout's, for a path source whose SDK
/// declares one, else the one this gate's built-in models were built with.
fn sdk_declaration(source: &GateSource, built_in: Option<&str>) -> Option<Declared> {
    let checkout = match source {
        GateSource::Path(p) => std::fs::read_to_string(p.join(SDK_FOLDER).join("Cargo.toml")).ok(),
        _ => None,
    };
    checkout
        .as_deref()
        .and_then(Declared::read)
        .or_else(|| built_in.and_then(Declared::read))
}

/// The SDK's feature for the crate at `manifest`: the one that serves the
/// framework version it depends on (resolved in its Cargo.lock when there
/// is one, else its requirement), or `None` when it has none of its own or
/// none the SDK serves (then the SDK's defaults; `gate check` names the
/// feature to pick before it builds anything).
fn framework_feature(manifest: &Path, text: &str, sdk: &Declared) -> Result<Option<String>, CliError> {
    let Ok(package) = package_name(manifest, text) else {
        return Ok(None);
    };
    let krate = &sdk.adapter.krate;
    // Bounded, its errors shown (#54): a held lock or a broken manifest is
    // said, not waited on forever or swallowed.
    let resolved = match crate::pipeline::harness::cargo_metadata(manifest, &["--locked", "--offline"], false)? {
        Ok(o) => serde_json::from_slice::<serde_json::Value>(&o)
            .ok()
            .and_then(|m| crate::pipeline::versions::crate_version(&m, &package, krate)),
        // A crate without the framework of its own has nothing to resolve:
        // what cargo said does not matter.
        Err(_) if requirement(text, krate).is_none() => None,
        Err(said) => {
            // Without a Cargo.lock that matches, cargo refuses `--locked`:
            // the requirement in Cargo.toml is read instead, and why is said.
            let last: Vec<&str> = said.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
            let last = last[last.len().saturating_sub(3)..].join(" / ");
            eprintln!(
                "note: `cargo metadata --locked --offline` could not resolve {} ({}); reading {krate}'s \
                 requirement from it instead",
                manifest.display(),
                if last.is_empty() { "it said nothing" } else { &last }
            );
            None
        }
    };
    let Some(version) = resolved.or_else(|| requirement(text, krate)) else {
        return Ok(None);
    };
    let feature = sdk.serving(&version);
    match &feature {
        Some(f) => eprintln!(
            "{} is on {} {version}: gate's adapter for it is its feature `{f}`",
            manifest.display(),
            sdk.adapter.framework
        ),
        None => eprintln!(
            "note: {} is on {} {version}, which gate's adapter does not serve; it gets the adapter's \
             default features, and `gate check` names the versions it serves",
            manifest.display(),
            sdk.adapter.framework
        ),
    }
    Ok(feature)
}

/// The version in the manifest's requirement on `krate`, operators
/// stripped (`"=0.9.1"`, `{ version = "0.10" }`): what a fresh lock
/// resolves within.
fn requirement(text: &str, krate: &str) -> Option<String> {
    let doc = text.parse::<toml_edit::DocumentMut>().ok()?;
    let dep = doc.get("dependencies")?.get(krate)?;
    let req = dep.as_str().or_else(|| dep.get("version")?.as_str())?;
    // A bare `MAJOR.MINOR` stays so: the declaration's entries are version
    // prefixes, so it takes the entry of the whole minor, not of one release.
    Some(req.trim().trim_start_matches(['=', '^', '~', '>', ' ']).to_string())
}

/// Adds what a harness needs to a crate's manifest, keeping every key the
/// crate already has: gate's SDK (the package `gate-sdk`, from a path or
/// git until its first release on crates.io), serde (for the configs) and
/// a `cuda` feature that forwards to gate's; `with_builtins`, gate's
/// built-in models too. Returns the manifest, what was added, and whether
/// the crate has the built-in models.
fn with_harness_deps(
    manifest: &str,
    source: &GateSource,
    tag: &str,
    feature: Option<&str>,
    with_builtins: bool,
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
        let mut t = source.dependency(tag, SDK_FOLDER);
        // The feature for the crate's framework version, by name; else the
        // SDK's defaults.
        if let Some(feature) = feature {
            t.insert("default-features", false.into());
            let mut a = Array::new();
            a.push(feature);
            t.insert("features", a.into());
        }
        let line = t.to_string();
        deps.insert(SDK_PACKAGE, value(t));
        added.push(format!("{SDK_PACKAGE} = {}", line.trim()));
    }
    // Where the crate is on the SDK's defaults, gate's built-in models too
    // (their crate is built on those only), so that the starter spec's
    // `mlp` runs before the crate has a workload.
    let has_builtins = deps.contains_key(BUILTINS_PACKAGE);
    let builtins = has_builtins || (with_builtins && existing.is_none());
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
    sdk_manifest: Option<&str>,
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
    let checkout = source.clone();
    // A path dependency is written relative to the crate, so it can be committed.
    let source = match source {
        GateSource::Path(p) => {
            let abs = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
            GateSource::Path(relative(&abs(&crate_dir), &abs(p)))
        }
        other => other.clone(),
    };
    let (feature, with_builtins) = match sdk_declaration(&checkout, sdk_manifest) {
        Some(sdk) => {
            // The crate's framework version's feature, else the SDK's default
            // (the one the built-in models are on).
            let feature = framework_feature(&manifest, &text, &sdk)?.or_else(|| sdk.defaults.first().cloned());
            let builtins = feature.as_deref().is_none_or(|f| sdk.has_builtins_on(f));
            (feature, builtins)
        }
        None => {
            eprintln!(
                "note: this gate has no declaration of gate's SDK at hand (built without its built-in models, \
                 and `--gate-repo` is not a checkout of gate), so the crate gets the SDK's default features; \
                 `gate check` names the feature for the crate's framework version before it builds anything"
            );
            (None, true)
        }
    };
    let (edited, added, builtins) =
        with_harness_deps(&text, &source, &args.gate_ref, feature.as_deref(), with_builtins).map_err(|e| {
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

    /// A requirement's version, operators stripped; a bare minor stays a minor.
    #[test]
    fn a_requirement_reads_as_the_version_it_resolves_within() {
        assert_eq!(
            requirement("[dependencies]\nfw-core = \"=0.9.1\"\n", "fw-core").as_deref(),
            Some("0.9.1")
        );
        assert_eq!(
            requirement("[dependencies]\nfw-core = { version = \"0.10\" }\n", "fw-core").as_deref(),
            Some("0.10")
        );
        assert_eq!(requirement("[dependencies]\nother = \"1\"\n", "fw-core"), None);
    }

    #[test]
    fn the_harness_dependency_is_gate_sdk_and_cuda_forwards_to_it() {
        let manifest = "[package]\nname = \"m\"\nversion = \"0.1.0\"\n";
        let source = GateSource::Path(PathBuf::from("../gate"));
        let (edited, added, builtins) = with_harness_deps(manifest, &source, "v0.1.0", Some("fw-0-9"), false).unwrap();
        let line =
            r#"gate-sdk = { path = "../gate/crates/gate-sdk", default-features = false, features = ["fw-0-9"] }"#;
        assert!(edited.contains(line), "{edited}");
        assert!(edited.contains(r#"cuda = ["gate-sdk/cuda"]"#), "{edited}");
        assert_eq!(added[0], line);
        // The built-in models are on the SDK's defaults only.
        assert!(!builtins && !edited.contains("gate-builtins"), "{edited}");
        // No feature known: the SDK's defaults.
        let (edited, _, _) = with_harness_deps(manifest, &source, "v0.1.0", None, true).unwrap();
        assert!(
            edited.contains(r#"gate-sdk = { path = "../gate/crates/gate-sdk" }"#),
            "{edited}"
        );
    }

    #[test]
    fn on_the_sdks_defaults_the_built_in_models_come_too_with_their_cuda() {
        let manifest = "[package]\nname = \"m\"\nversion = \"0.1.0\"\n";
        let source = GateSource::Path(PathBuf::from("../gate"));
        let (edited, _, builtins) = with_harness_deps(manifest, &source, "v0.1.0", Some("fw-0-10"), true).unwrap();
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
        let (edited, added, builtins) = with_harness_deps(manifest, &source, "v0.1.0", None, true).unwrap();
        assert!(!builtins, "a crate that has gate already gets no second dependency");
        assert!(!edited.contains("gate-sdk = "), "{edited}");
        assert!(edited.contains(r#"cuda = ["gate/cuda"]"#), "{edited}");
        assert!(added.iter().all(|a| !a.starts_with("gate")), "{added:?}");
    }
}
