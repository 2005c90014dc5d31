//! From plain spec data to workloads: each component's `workload:` kind is
//! looked up in the binary's registry and its `config:` read into the
//! kind's typed config. Problems are spec errors with their positions, like
//! any other (exit 2): an unknown kind, a wrong config value, a checkpoint
//! the workload cannot take.

use std::collections::BTreeMap;
use std::sync::Arc;

#[cfg(feature = "cli")]
use std::path::Path;

#[cfg(all(feature = "cli", feature = "test-support"))]
use crate::budget::SpecError;
use crate::budget::{Component, Diagnostic, Diagnostics, Spec, WorkloadCheck};
use crate::sdk::{DynWorkload, Registry};

/// The spec's components as built workloads, by component name.
#[derive(Debug, Clone, Default)]
pub struct Workloads {
    by_name: BTreeMap<String, Arc<dyn DynWorkload>>,
}

impl Workloads {
    /// The workload of component `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn DynWorkload>> {
        self.by_name.get(name)
    }
}

/// Checks workloads against a registry while a spec is validated.
struct Checker<'r>(&'r Registry);

impl WorkloadCheck for Checker<'_> {
    fn check(&self, c: &Component, has_harness: bool) -> Vec<Problem> {
        // A kind this binary does not know may be the harness's own: the
        // harness judges it (`resolve` still reports it in the harness).
        if has_harness && !self.0.knows(&c.kind) {
            return Vec::new();
        }
        resolve_one(c, self.0, has_harness).err().unwrap_or_default()
    }
}

/// Reads and validates the spec at `path` with its workloads checked
/// against `registry` (every problem reported in one go), then builds them.
/// The YAML reader is the installed `gate`'s (feature `cli`): a harness
/// gets the spec validated ([`workloads_of`]). Only gate's tests read a
/// spec this way (the CLI reads the bytes itself: [`parse_bytes`]).
#[cfg(all(feature = "cli", feature = "test-support"))]
pub fn load(path: &Path, registry: &Registry) -> Result<(Spec, Workloads), SpecError> {
    Ok(parse_bytes(path, &crate::budget::read(path)?, registry)?)
}

/// [`parse_bytes`] of a spec's text (gate's tests only).
#[cfg(all(feature = "cli", feature = "test-support"))]
pub fn parse(path: &Path, text: &str, registry: &Registry) -> Result<(Spec, Workloads), Diagnostics> {
    parse_bytes(path, text.as_bytes(), registry)
}

/// Validates a spec's raw bytes (encodings refused by name) with its
/// workloads checked against `registry` (every problem reported in one
/// go), then builds them.
#[cfg(feature = "cli")]
pub fn parse_bytes(path: &Path, bytes: &[u8], registry: &Registry) -> Result<(Spec, Workloads), Diagnostics> {
    let spec = crate::budget::parse_bytes_with(path, bytes, Some(&Checker(registry)))?;
    let workloads = resolve(&spec, registry)?;
    Ok((spec, workloads))
}

/// The workloads of a spec validated elsewhere (the installed `gate` sends
/// it to a harness): checked against `registry` with the same diagnostics
/// as [`parse_bytes`] gives, then built.
pub fn workloads_of(spec: &Spec, registry: &Registry) -> Result<Workloads, Diagnostics> {
    crate::budget::check_workloads(spec, &Checker(registry))?;
    resolve(spec, registry)
}

/// Builds every component's workload of a validated `spec`.
pub fn resolve(spec: &Spec, registry: &Registry) -> Result<Workloads, Diagnostics> {
    let mut out = Workloads::default();
    let mut diags = Vec::new();
    for c in &spec.components {
        match resolve_one(c, registry, spec.harness.is_some()) {
            Ok(w) => {
                out.by_name.insert(c.name.clone(), w);
            }
            Err(errs) => diags.extend(errs.into_iter().map(|(pos, message, hint)| Diagnostic {
                file: spec.path.display().to_string(),
                pos,
                message,
                hint,
            })),
        }
    }
    if diags.is_empty() {
        Ok(out)
    } else {
        Err(Diagnostics(diags))
    }
}

type Problem = (crate::sdk::Pos, String, String);

fn resolve_one(c: &Component, registry: &Registry, has_harness: bool) -> Result<Arc<dyn DynWorkload>, Vec<Problem>> {
    let Some(read) = registry.read(&c.kind, &c.config) else {
        let known = registry.names();
        let mut hint = crate::hint::suggest(&c.kind, &known, "known workloads");
        if !has_harness {
            hint.push_str(
                "; a model of your own crate is measured by its harness: add `harness: { package: NAME, bin: NAME }` \
                 to the spec (docs/sdk.md)",
            );
        }
        return Err(vec![(c.kind_pos, format!("unknown workload `{}`", c.kind), hint)]);
    };
    let whose = if gate_spec::name::is_variant(&c.name) {
        format!("variant `{}`", c.name)
    } else {
        format!("component `{}`", c.name)
    };
    let workload = read.map_err(|issues| {
        issues
            .into_iter()
            .map(|i| {
                (
                    i.pos.unwrap_or(c.config.pos),
                    format!("{} ({whose})", i.message),
                    i.hint,
                )
            })
            .collect::<Vec<_>>()
    })?;
    let Some(chunk) = c.checkpoint else {
        return Ok(workload);
    };
    workload.checkpointed(chunk).ok_or_else(|| {
        vec![(
            c.checkpoint_pos,
            format!("workload `{}` of `{}` has no position-wise block to checkpoint", c.kind, c.name),
            "remove `checkpoint:`; it applies to workloads with a position-wise block (tft: the encoder variable selection)"
                .to_string(),
        )]
    })
}
