//! From plain spec data to workloads: each component's `workload:` kind is
//! looked up in the binary's registry and its `config:` read into the
//! kind's typed config (gate-runner's `harness::registry`, the same for
//! every framework). Problems are spec errors with their positions, like
//! any other (exit 2): an unknown kind, a wrong config value, a checkpoint
//! the workload cannot take.

#[cfg(feature = "test-support")]
use std::path::Path;

use crate::sdk::{DynWorkload, Registry};
#[cfg(feature = "test-support")]
use gate_spec::budget::SpecError;
use gate_spec::budget::{Diagnostics, Spec};

/// The spec's components as built candle workloads, by component name.
pub type Workloads = gate_runner::harness::Workloads<dyn DynWorkload>;

/// Reads and validates the spec at `path` with its workloads checked
/// against `registry` (every problem reported in one go), then builds them.
/// The YAML reader is the installed `gate`'s: a harness gets the spec
/// validated. Only gate's tests read a spec this way.
#[cfg(feature = "test-support")]
pub fn load(path: &Path, registry: &Registry) -> Result<(Spec, Workloads), SpecError> {
    Ok(parse_bytes(path, &gate_spec::budget::read(path)?, registry)?)
}

/// [`parse_bytes`] of a spec's text (gate's tests only).
#[cfg(feature = "test-support")]
pub fn parse(path: &Path, text: &str, registry: &Registry) -> Result<(Spec, Workloads), Diagnostics> {
    parse_bytes(path, text.as_bytes(), registry)
}

/// Validates a spec's raw bytes (encodings refused by name) with its
/// workloads checked against `registry` (every problem reported in one
/// go), then builds them (gate's tests only: the installed `gate` checks
/// a spec with the `Harness`'s [`gate_spec::budget::WorkloadCheck`]).
#[cfg(feature = "test-support")]
pub fn parse_bytes(path: &Path, bytes: &[u8], registry: &Registry) -> Result<(Spec, Workloads), Diagnostics> {
    let spec =
        gate_spec::budget::parse_bytes_with(path, bytes, Some(&gate_runner::harness::registry::Checker(&**registry)))?;
    let workloads = resolve(&spec, registry)?;
    Ok((spec, workloads))
}

/// Builds every component's workload of a validated `spec`.
pub fn resolve(spec: &Spec, registry: &Registry) -> Result<Workloads, Diagnostics> {
    gate_runner::harness::registry::resolve(spec, &**registry)
}
