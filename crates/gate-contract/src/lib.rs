//! gate's machine contract: what gate writes for other programs to read,
//! as the types that write and read it, with their versions and the JSON
//! Schemas generated from them (the repository's schema/ folder holds the
//! checked-in copies; gate's tests hold every file gate writes to them).
//!
//! - [`report`]: report.json ([`report::SCHEMA`]), which the baseline store
//!   also keeps (`reports/CARD/SHA.json`), with its warnings, identities and
//!   statuses as types.
//! - [`history`]: history.json ([`history::SCHEMA`]), a budget's figure
//!   over the stored reports.
//! - [`shard`]: the shard.json a sharded check leaves for `gate merge`.
//! - [`protocol`]: the harness protocol ([`protocol::PROTOCOL`]) between
//!   the installed `gate` and a framework adapter's harness: the request,
//!   the `__resolve` answer and the lines `profile` writes, which carry a
//!   [`measurement`].
//! - [`plan`]: the levers a workload declares and `gate plan`'s plan.json
//!   ([`plan::SCHEMA`]).
//! - [`event`]: what a run says as it goes (`--message-format json`),
//!   versioned ([`event::VERSION`]).
//! - [`timing`]: how step times and ratios are summarised (the median,
//!   the pairs a ratio takes).
//! - [`schema`]: the JSON Schemas, traced from the types' serde readers.
//!
//! The files' modules (`report`, `history`, `shard`, `sweep`, `event`,
//! `schema`) are the `files` feature, on by default; a harness needs only
//! `protocol`, `measurement`, `plan` and `timing`, and gate's harness-side
//! crates (the SDK, the adapters and the runner) leave `files` off, which keeps
//! the files' serde code out of a team's harness build.
//!
//! A team's dashboard or harness can depend on this crate alone: it has no
//! runner, renderer, network or ML framework in its dependency tree.
//! Internal to gate before 1.0: the files' versions are the promise (a
//! field is never renamed or dropped without bumping its file's version),
//! the Rust API may change in any release.

// Before the modules whose types carry the profile facts (macros are
// in scope from their definition on).
#[macro_use]
mod profile_facts;

#[cfg(feature = "files")]
pub mod event;
#[cfg(feature = "files")]
pub mod history;
pub mod measurement;
pub mod plan;
pub mod protocol;
#[cfg(feature = "files")]
pub mod report;
#[cfg(feature = "files")]
pub mod schema;
#[cfg(feature = "files")]
pub mod shard;
#[cfg(feature = "files")]
pub mod sweep;
pub mod timing;
