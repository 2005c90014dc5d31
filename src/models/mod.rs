//! The built-in workloads: the models of docs/models.md, written against the
//! public SDK only (`crate::sdk`, re-exported at the crate root), exactly as
//! an adopter's crate would write its own. They are the demo and the proof
//! that the API is enough.

pub mod dqn;
pub mod mamba2;
pub mod mlp;
pub mod ppo;
pub mod tft;

pub use dqn::Dqn;
pub use mamba2::Mamba2;
pub use mlp::Mlp;
pub use ppo::Ppo;
pub use tft::Tft;

use crate::sdk::Registry;

/// Registers every built-in workload (`mlp`, `tft`, `dqn`, `ppo`, `mamba2`).
pub fn register_builtins(registry: &mut Registry) {
    // Built-in kinds have distinct plain names: registration cannot fail.
    for result in [
        registry.register::<Mlp>(),
        registry.register::<Tft>(),
        registry.register::<Dqn>(),
        registry.register::<Ppo>(),
        registry.register::<Mamba2>(),
    ] {
        debug_assert!(result.is_ok(), "{result:?}");
    }
}
