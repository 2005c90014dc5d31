//! The harness protocol between the installed `gate` and a harness (a
//! framework adapter's binary): the request gate writes, the harness's
//! answer to `__resolve`, and the lines `profile` writes as it measures.
//! gate-runner's `harness` and `child` speak it; its JSON Schemas are
//! schema/harness-resolve.schema.json and schema/harness-event.schema.json.

use serde::{Deserialize, Serialize};

use std::collections::BTreeMap;

use crate::measurement::{Measurement, Phase};
use crate::plan::Lever;
use gate_spec::budget::Spec;

/// The protocol's version: requests and `__resolve` answers carry it, and
/// each side refuses the other's when it differs. 1: the harness read
/// budgets.yaml itself (`--budgets SPEC`); 2: it gets the validated spec as
/// a JSON request (`--request FILE`); 3: a failure's kind is the adapter's
/// (`out_of_memory` its own), not read from its words.
pub const PROTOCOL: u32 = 3;

/// How to make both sides speak one protocol.
pub const PROTOCOL_HINT: &str = "build the harness against the same gate release as the installed `gate`";

/// Which framework, at which version, a harness runs its models on: the
/// report's testbed records it (`framework`), and figures of another
/// framework or version are not compared.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FrameworkId {
    /// The framework's name, as its adapter says it.
    pub name: String,
    /// The release the harness was built against (`0.11.1`, `0.22.1`).
    pub version: String,
}

impl FrameworkId {
    /// Whether it is unknown (a report stored before it was recorded).
    pub fn is_unknown(&self) -> bool {
        self.name.is_empty() && self.version.is_empty()
    }

    /// The framework of a harness or a report from before [`FrameworkId`],
    /// which gave only [`FIRST_FRAMEWORK`]'s version (its legacy field);
    /// unknown when that is empty too.
    pub fn first(legacy_version: &str) -> FrameworkId {
        if legacy_version.is_empty() {
            return FrameworkId::default();
        }
        FrameworkId {
            name: FIRST_FRAMEWORK.into(),
            version: legacy_version.into(),
        }
    }
}

/// The field the first harnesses of protocol 2 and the reports before
/// [`FrameworkId`] carried their one framework's version in, named after
/// that framework (`NAME_version`): the answer and the testbed keep it (its
/// harnesses still write it, and the fingerprints of its stored baselines
/// hold it). serde's `rename`s of it spell it out; a test holds them to this.
pub const LEGACY_VERSION_FIELD: &str = "candle_version";

/// The one framework of the first harnesses and reports, as their version's
/// field names it ([`LEGACY_VERSION_FIELD`] without `_version`): read off
/// the wire's own history, the contract names no framework of its own.
pub const FIRST_FRAMEWORK: &str = LEGACY_VERSION_FIELD
    .split_at(LEGACY_VERSION_FIELD.len() - "_version".len())
    .0;

/// A harness's answer to `__resolve`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ResolveAnswer {
    /// [`PROTOCOL`].
    pub protocol: u32,
    /// Each component's resolved config, as the report records it.
    pub configs: serde_json::Map<String, serde_json::Value>,
    /// The framework the harness runs its models on.
    pub framework: FrameworkId,
    /// The same version under the field the first gates of protocol 2
    /// read; only a harness of [`FIRST_FRAMEWORK`] writes it.
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "candle_version")]
    pub legacy_version: Option<String>,
    /// Each component's levers, as its workload declares them (`gate
    /// plan`); absent from a harness built before levers existed, which
    /// then offers none but the batch.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub levers: BTreeMap<String, Vec<Lever>>,
}

/// Of any `__resolve` answer, however old (one of the first harnesses'
/// has no `framework`), its legacy field alone.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct LegacyAnswer {
    /// [`ResolveAnswer::legacy_version`].
    #[serde(default, rename = "candle_version")]
    pub legacy_version: Option<String>,
}

/// What the installed `gate` asks of a harness: the validated spec, each
/// workload's `config:` with its positions. Written to a file that each
/// `__resolve` and `profile` reads (`--request FILE`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Request {
    /// [`PROTOCOL`] of the gate that wrote it.
    pub protocol: u32,
    /// The spec, as the installed `gate` validated it.
    pub spec: Spec,
}

impl Request {
    /// The request for `spec` in this gate's protocol, as JSON (the
    /// installed `gate` writes it; a harness only reads one).
    pub fn json(spec: &Spec) -> serde_json::Result<String> {
        #[derive(Serialize)]
        struct Borrowed<'a> {
            protocol: u32,
            spec: &'a Spec,
        }
        serde_json::to_string(&Borrowed {
            protocol: PROTOCOL,
            spec,
        })
    }
}

/// One line `profile` writes on its stdout.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChildEvent {
    /// A phase starts; the figures measured so far come with it.
    Phase {
        /// The phase that starts.
        phase: Phase,
        /// The figures measured before it (all of them, should the profile die in it).
        so_far: Box<Measurement>,
    },
    /// The profile ended (a failure included): its measurement.
    Done(Box<Measurement>),
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The legacy field's name is the one serde writes and reads, and the
    /// first framework's name is its head.
    #[test]
    fn the_legacy_field_is_the_wires_and_names_the_first_framework() {
        let answer = ResolveAnswer {
            protocol: PROTOCOL,
            configs: serde_json::Map::new(),
            framework: FrameworkId::first("0.9.1"),
            legacy_version: Some("0.9.1".into()),
            levers: BTreeMap::new(),
        };
        let written = serde_json::to_value(&answer).unwrap();
        assert_eq!(written[LEGACY_VERSION_FIELD], "0.9.1", "{written}");
        let legacy: LegacyAnswer = serde_json::from_value(written).unwrap();
        assert_eq!(legacy.legacy_version.as_deref(), Some("0.9.1"));
        assert!(LEGACY_VERSION_FIELD.starts_with(FIRST_FRAMEWORK));
        assert_eq!(format!("{FIRST_FRAMEWORK}_version"), LEGACY_VERSION_FIELD);
    }
}
