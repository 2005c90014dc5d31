//! From plain spec data to workloads: each component's `workload:` kind is
//! looked up in the binary's registry and its `config:` read into the
//! kind's typed config. Problems are spec errors with their positions, like
//! any other (exit 2): an unknown kind, a wrong config value, a checkpoint
//! the workload cannot take.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::budget::{Component, Diagnostic, Diagnostics, Spec};
use crate::hint::did_you_mean;
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

/// Resolves every component of `spec`; every problem comes back at once.
pub fn resolve(spec: &Spec, registry: &Registry) -> Result<Workloads, Diagnostics> {
    let file = spec.path.display().to_string();
    let mut diags: Vec<Diagnostic> = Vec::new();
    let mut out = Workloads::default();
    let mut failed_bases: Vec<&str> = Vec::new();
    for c in &spec.components {
        let base = c.name.split('@').next().unwrap_or(&c.name);
        // A variant inherits its component's config: its errors are the component's.
        if c.name.contains('@') && failed_bases.contains(&base) {
            continue;
        }
        match resolve_one(c, registry, spec.harness.is_some()) {
            Ok(w) => {
                out.by_name.insert(c.name.clone(), w);
            }
            Err(errs) => {
                if !c.name.contains('@') {
                    failed_bases.push(base);
                }
                for (pos, message, hint) in errs {
                    let d = Diagnostic {
                        file: file.clone(),
                        pos,
                        message,
                        hint,
                    };
                    if !diags.contains(&d) {
                        diags.push(d);
                    }
                }
            }
        }
    }
    if diags.is_empty() {
        Ok(out)
    } else {
        diags.sort_by_key(|d| d.pos);
        Err(Diagnostics(diags))
    }
}

type Problem = (crate::sdk::Pos, String, String);

fn resolve_one(c: &Component, registry: &Registry, has_harness: bool) -> Result<Arc<dyn DynWorkload>, Vec<Problem>> {
    let Some(read) = registry.read(&c.kind, &c.config) else {
        let known = registry.names();
        let list = known.join(", ");
        let mut hint = match did_you_mean(&c.kind, &known) {
            Some(k) => format!("did you mean `{k}`? known workloads: {list}"),
            None => format!("known workloads: {list}"),
        };
        if !has_harness {
            hint.push_str(
                "; a model of your own crate is measured by its harness: add `harness: { package: NAME, bin: NAME }` \
                 to the spec (docs/sdk.md)",
            );
        }
        return Err(vec![(c.kind_pos, format!("unknown workload `{}`", c.kind), hint)]);
    };
    let whose = if c.name.contains('@') {
        format!("variant `{}`", c.name)
    } else {
        format!("component `{}`", c.name)
    };
    let workload = read.map_err(|issues| {
        issues
            .into_iter()
            .map(|i| (i.pos.unwrap_or(c.config.pos), format!("{} ({whose})", i.message), i.hint))
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
