//! The package gate-tests has no library of its own: its tests, benches and
//! example are its targets (tests/Cargo.toml). This empty library is there
//! because `cargo package --workspace`, the release's packing step, packs
//! every member, an unpublished one too, and refuses a package with no
//! target in it.
