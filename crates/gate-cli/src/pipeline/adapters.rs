//! Before a harness is built: what the framework adapter it links says it
//! can run. An adapter crate declares it in its own Cargo.toml,
//!
//! ```toml
//! [package.metadata.gate]
//! backends = ["cpu"]
//! dtypes = ["f32"]
//! ```
//!
//! and `cargo metadata` of the adopter's workspace carries it, so a
//! `--backend` or a `dtype:` the adapter cannot run is refused here, by
//! the adapter's own word, before cargo builds anything (a CUDA build of an
//! adapter that cannot measure CUDA would otherwise download a toolchain
//! and fail, or build for minutes and then be refused). gate names no
//! framework here: it reads what the adapter says. A list an adapter does
//! not give is no limit.

use std::collections::{HashMap, HashSet};

use gate_probe::Backend;
use gate_spec::budget::Spec;
use gate_spec::hint::Problem;
use serde_json::Value;

use crate::errors::CliError;

/// What one adapter the harness links says it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Limits {
    /// The adapter's package name.
    pub adapter: String,
    /// The backends it runs (`cpu`, `cuda`); `None`: no limit said.
    pub backends: Option<Vec<String>>,
    /// The dtypes it builds models in; `None`: no limit said.
    pub dtypes: Option<Vec<String>>,
}

/// The limits of every package `package` depends on (itself included),
/// from `cargo metadata`'s resolve; none when the metadata says nothing.
pub(crate) fn limits(metadata: &Value, package: &str) -> Vec<Limits> {
    let packages: HashMap<&str, &Value> = metadata["packages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| Some((p["id"].as_str()?, p)))
        .collect();
    let nodes: HashMap<&str, &Value> = metadata["resolve"]["nodes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|n| Some((n["id"].as_str()?, n)))
        .collect();
    // The harness package among the workspace's members (a dependency of
    // the same name elsewhere in the graph is another crate).
    let members: HashSet<&str> = metadata["workspace_members"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let Some(start) = packages
        .iter()
        .find(|(id, p)| p["name"] == package && members.contains(*id))
        .map(|(id, _)| *id)
    else {
        return Vec::new();
    };
    let mut seen = HashSet::from([start]);
    let mut todo = vec![start];
    let mut out = Vec::new();
    while let Some(id) = todo.pop() {
        if let Some(limits) = packages.get(id).and_then(|p| read(p)) {
            out.push(limits);
        }
        let deps = nodes.get(id).and_then(|n| n["deps"].as_array());
        for dep in deps.into_iter().flatten().filter_map(|d| d["pkg"].as_str()) {
            if seen.insert(dep) {
                todo.push(dep);
            }
        }
    }
    out.sort_by(|a, b| a.adapter.cmp(&b.adapter));
    out
}

/// A package's `[package.metadata.gate]`, where it says a limit.
fn read(package: &Value) -> Option<Limits> {
    let gate = package["metadata"].get("gate")?;
    let list = |key: &str| {
        gate.get(key)?
            .as_array()
            .map(|a| a.iter().filter_map(|v| v.as_str().map(str::to_string)).collect())
    };
    let (backends, dtypes) = (list("backends"), list("dtypes"));
    if backends.is_none() && dtypes.is_none() {
        return None;
    }
    Some(Limits {
        adapter: package["name"].as_str()?.to_string(),
        backends,
        dtypes,
    })
}

/// Refuses what `limits` says the harness cannot run: `backend` (as asked
/// on the command line; `auto` runs where it can) and each component's
/// `dtype:`, every problem at once, each with why and what to do.
pub(crate) fn refuse(spec: &Spec, backend: Option<Backend>, limits: &[Limits]) -> Result<(), CliError> {
    let mut problems = Vec::new();
    for l in limits {
        if let (Some(Backend::Cuda), Some(backends)) = (backend, &l.backends) {
            if !backends.iter().any(|b| b == "cuda") {
                problems.push(
                    Problem::new(format!(
                        "--backend cuda: the harness's framework adapter `{}` runs on {} only (its Cargo.toml's \
                         `[package.metadata.gate] backends`), so nothing was built",
                        l.adapter,
                        backends.join(", ")
                    ))
                    .with_hint(format!(
                        "run with `--backend {}`; the adapter's docs say what a GPU run needs",
                        backends.first().map_or("cpu", String::as_str)
                    )),
                );
            }
        }
        let Some(dtypes) = &l.dtypes else { continue };
        for c in &spec.components {
            if dtypes.iter().any(|d| d == c.dtype.as_str()) {
                continue;
            }
            problems.push(
                Problem::new(format!(
                    "{}:{}: component `{}` asks for `dtype: {}`, and the harness's framework adapter `{}` builds \
                     models in {} only (its Cargo.toml's `[package.metadata.gate] dtypes`)",
                    spec.path.display(),
                    c.line,
                    c.name,
                    c.dtype.as_str(),
                    l.adapter,
                    dtypes.join(", ")
                ))
                .with_hint(format!(
                    "remove `dtype:` from `{}` (and from `defaults:` if it comes from there), or set `dtype: {}`",
                    c.name,
                    dtypes.first().map_or("f32", String::as_str)
                )),
            );
        }
    }
    let mut problems = problems.into_iter();
    let Some(first) = problems.next() else { return Ok(()) };
    // One error carries them all: every line a problem, the first one's hint.
    let rest: Vec<String> = problems.map(|p| p.message).collect();
    if rest.is_empty() {
        return Err(CliError::Usage(first));
    }
    let hint = first.hint.clone();
    let mut all = Problem::new(format!("{}\n{}", first.message, rest.join("\n")));
    if let Some(h) = hint {
        all = all.with_hint(h);
    }
    Err(CliError::Usage(all))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A workspace of `team` depending on `adapter`, which says `gate`.
    fn metadata(gate: Value) -> Value {
        serde_json::json!({
            "workspace_members": ["team 0.1.0 (path+file:///t)"],
            "packages": [
                { "id": "team 0.1.0 (path+file:///t)", "name": "team", "metadata": null },
                { "id": "adapter 0.1.0 (path+file:///a)", "name": "adapter", "metadata": { "gate": gate } },
                { "id": "other 1.0.0 (registry+x)", "name": "other", "metadata": { "gate": { "backends": ["tpu"] } } },
            ],
            "resolve": { "nodes": [
                { "id": "team 0.1.0 (path+file:///t)", "deps": [{ "pkg": "adapter 0.1.0 (path+file:///a)" }] },
                { "id": "adapter 0.1.0 (path+file:///a)", "deps": [] },
                { "id": "other 1.0.0 (registry+x)", "deps": [] },
            ] },
        })
    }

    fn spec(dtype: &str) -> Spec {
        let text = format!(
            "version: 1\ndevice: {{ name: card, capacity: 4 GiB, reserve: 300 MiB }}\nharness: {{ package: team, bin: h }}\n\
             components:\n  cnn:\n    workload: cnn\n{dtype}    budgets: {{ params: < 1 MiB }}\n"
        );
        gate_spec::budget::parse(std::path::Path::new("budgets.yaml"), &text).expect("the spec parses")
    }

    fn usage(r: Result<(), CliError>) -> Problem {
        match r {
            Err(CliError::Usage(p)) => p,
            other => panic!("a usage error (exit 2), not {other:?}"),
        }
    }

    #[test]
    fn an_adapter_reached_from_the_harness_says_its_limits_and_one_it_does_not_reach_says_nothing() {
        let m = metadata(serde_json::json!({ "backends": ["cpu"], "dtypes": ["f32"] }));
        assert_eq!(
            limits(&m, "team"),
            vec![Limits {
                adapter: "adapter".into(),
                backends: Some(vec!["cpu".into()]),
                dtypes: Some(vec!["f32".into()]),
            }]
        );
        assert!(limits(&m, "nobody").is_empty());
        assert!(limits(&metadata(serde_json::json!({})), "team").is_empty());
    }

    #[test]
    fn cuda_on_a_cpu_only_adapter_is_refused_before_the_build_with_what_to_run() {
        let l = limits(&metadata(serde_json::json!({ "backends": ["cpu"] })), "team");
        assert!(refuse(&spec(""), Some(Backend::Cpu), &l).is_ok());
        assert!(refuse(&spec(""), Some(Backend::Auto), &l).is_ok());
        assert!(refuse(&spec(""), None, &l).is_ok());
        let p = usage(refuse(&spec(""), Some(Backend::Cuda), &l));
        assert_eq!(
            p.message,
            "--backend cuda: the harness's framework adapter `adapter` runs on cpu only (its Cargo.toml's \
             `[package.metadata.gate] backends`), so nothing was built"
        );
        assert_eq!(
            p.hint.as_deref(),
            Some("run with `--backend cpu`; the adapter's docs say what a GPU run needs")
        );
    }

    #[test]
    fn a_dtype_the_adapter_does_not_build_is_refused_at_its_component_with_what_to_set() {
        let l = limits(&metadata(serde_json::json!({ "dtypes": ["f32"] })), "team");
        assert!(refuse(&spec(""), None, &l).is_ok());
        assert!(refuse(&spec("    dtype: f32\n"), None, &l).is_ok());
        let p = usage(refuse(&spec("    dtype: bf16\n"), Some(Backend::Cpu), &l));
        assert_eq!(
            p.message,
            "budgets.yaml:5: component `cnn` asks for `dtype: bf16`, and the harness's framework adapter \
             `adapter` builds models in f32 only (its Cargo.toml's `[package.metadata.gate] dtypes`)"
        );
        assert_eq!(
            p.hint.as_deref(),
            Some("remove `dtype:` from `cnn` (and from `defaults:` if it comes from there), or set `dtype: f32`")
        );
    }
}
