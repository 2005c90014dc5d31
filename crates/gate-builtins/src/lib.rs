//! gate's built-in workloads: the models of docs/models.md (`mlp`, `tft`,
//! `dqn`, `ppo`, `mamba2`), written against gate's public SDK only
//! (`gate-sdk`, library `gate`), exactly as an adopter's crate writes its
//! own. They are the demo and the proof that the API is enough.
//!
//! The stock `gate` (crates/gate-cli, feature `builtins`) reaches them as
//! it reaches any team's models: through the harness protocol. Its binary
//! answers the installed `gate`'s `__resolve` and `profile` with
//! [`harness`], and runs every other command as the command line.
//!
//! Internal to gate: any release may change this crate; a team's API is
//! `gate-sdk`.

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

/// The manifest of the SDK the built-in models are built on
/// ([`gate::ADAPTER_MANIFEST`]): `gate init --harness` sets a crate up on
/// the SDK's feature for the crate's framework version from it.
pub use gate::ADAPTER_MANIFEST as SDK_MANIFEST;

/// The kinds registered here, in order (what an unknown kind's hint lists).
pub const KINDS: [&str; 5] = ["mlp", "tft", "dqn", "ppo", "mamba2"];

/// A harness that knows every built-in workload and nothing else: what the
/// stock `gate` serves its profiles with.
pub fn harness() -> gate::Harness {
    register(gate::Harness::new())
}

/// `h` with every built-in workload registered: a team's harness may add
/// them beside its own models.
pub fn register(h: gate::Harness) -> gate::Harness {
    h.register::<Mlp>()
        .register::<Tft>()
        .register::<Dqn>()
        .register::<Ppo>()
        .register::<Mamba2>()
}

/// The registry of the built-ins, for gate's own tests and benches
/// (`test-support`; not API).
#[cfg(feature = "test-support")]
#[doc(hidden)]
pub fn registry() -> gate::test_support::Registry {
    gate::test_support::registry_of(&harness())
}

#[cfg(test)]
mod tests {
    #[test]
    fn kinds_are_the_registered_ones() {
        assert_eq!(super::harness().kinds(), super::KINDS);
    }
}
