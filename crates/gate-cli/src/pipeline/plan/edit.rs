//! A candidate's settings as spec edits and as a variant component.

use gate_contract::plan::{self, Setting};
use gate_spec::budget::{Component, Spec};
use gate_spec::config::Node;
use gate_spec::dtype::DType;

/// `spec` with `extra` components added after its own.
pub(in crate::pipeline) fn with_components(spec: &Spec, extra: Vec<Component>) -> Spec {
    let mut s = spec.clone();
    s.components.extend(extra);
    s
}

/// `c` with `settings` applied, named `name`, its ratios against `reference`.
pub(in crate::pipeline) fn apply(
    c: &Component,
    settings: &[Setting],
    name: &str,
    reference: Option<String>,
) -> Component {
    let mut k = c.clone();
    k.name = name.to_string();
    k.reference = reference;
    for s in settings {
        match s {
            Setting::Checkpoint { chunk } => k.checkpoint = *chunk,
            Setting::Config { key, value } => {
                let over = Node::from_json(&serde_json::json!({ key.as_str(): value }), k.config.pos);
                k.config = k.config.overlaid(&over);
            }
            Setting::Batch { size } => k.batch_size = *size,
            Setting::Accumulation { key, steps, batch } => {
                k.batch_size = *batch;
                let over = Node::from_json(&serde_json::json!({ key.as_str(): steps }), k.config.pos);
                k.config = k.config.overlaid(&over);
            }
            Setting::Dtype { dtype } => {
                k.dtype = *dtype;
                if *dtype != DType::F32 && k.master_dtype.is_none() {
                    k.master_dtype = Some(DType::F32);
                }
            }
        }
    }
    if k.reference.is_none() {
        // A probe: no ratio phase, and no budget that needs one.
        k.budgets.retain(|b| b.metric.ratio_of().is_none());
    }
    k
}

/// The spec edits of `settings`, in gate-spec's terms.
pub(crate) fn edits_of(settings: &[Setting]) -> Vec<gate_spec::budget::edit::Edit> {
    use gate_spec::budget::edit::Edit;
    settings
        .iter()
        .flat_map(|s| match s {
            Setting::Checkpoint { chunk } => vec![Edit::Checkpoint(*chunk)],
            Setting::Config { key, value } => vec![Edit::Config(key.clone(), plan::yaml_scalar(value))],
            Setting::Batch { size } => vec![Edit::Key("batch_size".into(), size.to_string())],
            Setting::Accumulation { key, steps, batch } => vec![
                Edit::Key("batch_size".into(), batch.to_string()),
                Edit::Config(key.clone(), steps.to_string()),
            ],
            Setting::Dtype { dtype } if *dtype == DType::F32 => vec![Edit::Key("dtype".into(), dtype.to_string())],
            Setting::Dtype { dtype } => vec![
                Edit::Key("dtype".into(), dtype.to_string()),
                Edit::Key("master_weights".into(), "f32".into()),
            ],
        })
        .collect()
}
