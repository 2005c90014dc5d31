//! The `ppo` workload (models.md). Not implemented yet: components using it
//! are reported `not_measured`.

use super::{ConfigError, ConfigMap, Resolved};

pub fn resolve(_config: &ConfigMap) -> Result<Resolved, Vec<ConfigError>> {
    Ok(Resolved::Unavailable(
        "the `ppo` workload is not implemented in this build of gate".into(),
    ))
}
