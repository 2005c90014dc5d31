//! The Temporal Fusion Transformer workload (models.md §1). Not implemented
//! yet: components using it are reported `not_measured`.

use super::{ConfigError, ConfigMap, Resolved};

pub fn resolve(_config: &ConfigMap) -> Result<Resolved, Vec<ConfigError>> {
    Ok(Resolved::Unavailable(
        "the `tft` workload is not implemented in this build of gate".into(),
    ))
}
