//! `shard.json`: what a sharded `gate check --shard I/N` leaves beside its
//! report, so that `gate merge` can tell a complete set of shards from one
//! with a shard missing, and shards dealt alike from ones dealt from
//! different inputs. Part of the contract (schema/shard.schema.json); how
//! components are dealt to shards is the command line's.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The file a sharded `gate check` adds to its output folder.
pub const FILE: &str = "shard.json";

/// One shard of a split: `index` of `count`, from 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    /// Which shard, from 1.
    pub index: usize,
    /// How many shards the split has.
    pub count: usize,
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// What the components were dealt by.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DealtBy {
    /// Sorted by name, dealt round-robin: no baseline, or one that
    /// recorded no profile times (and every shard.json from before costs).
    #[default]
    Name,
    /// By each component's profile time in the baseline report, longest
    /// first, each to the shard with the least so far.
    Baseline,
}

/// What `shard.json` says.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(from = "ShardJson", into = "ShardJson")]
pub struct Record {
    /// The shard this folder is.
    pub shard: Shard,
    /// The components it profiled (their variants with them).
    pub components: Vec<String>,
    /// The `--only` selection it was dealt from, sorted (empty: the whole
    /// spec): shards of different selections are not one split.
    pub only: Vec<String>,
    /// What the components were dealt by: shards dealt from different
    /// inputs (another baseline) may hold a component twice or not at all.
    pub dealt_by: DealtBy,
    /// Under [`DealtBy::Baseline`], the cost in seconds each component
    /// (its variants' included) was dealt by, of the whole selection, not
    /// only this shard's; empty when dealt by name.
    pub costs: BTreeMap<String, f64>,
}

impl Record {
    /// Whether two shards were dealt from the same inputs.
    pub fn same_deal(&self, other: &Record) -> bool {
        self.dealt_by == other.dealt_by && self.costs == other.costs
    }
}

/// `shard.json` as written: the shard's two numbers beside the lists, as
/// plain fields (a flattened `Shard` would read the same, but a schema
/// cannot be traced through serde's flattening).
#[derive(Serialize, Deserialize)]
struct ShardJson {
    index: usize,
    count: usize,
    components: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    only: Vec<String>,
    #[serde(default)]
    dealt_by: DealtBy,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    costs: BTreeMap<String, f64>,
}

impl From<ShardJson> for Record {
    fn from(f: ShardJson) -> Self {
        Record {
            shard: Shard {
                index: f.index,
                count: f.count,
            },
            components: f.components,
            only: f.only,
            dealt_by: f.dealt_by,
            costs: f.costs,
        }
    }
}

impl From<Record> for ShardJson {
    fn from(r: Record) -> Self {
        ShardJson {
            index: r.shard.index,
            count: r.shard.count,
            components: r.components,
            only: r.only,
            dealt_by: r.dealt_by,
            costs: r.costs,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_is_written_with_its_shard_beside_its_lists_and_read_back() {
        let r = Record {
            shard: Shard { index: 2, count: 3 },
            components: vec!["tft".into()],
            only: Vec::new(),
            dealt_by: DealtBy::Baseline,
            costs: BTreeMap::from([("tft".into(), 30.5), ("mlp".into(), 2.0)]),
        };
        let text = serde_json::to_string(&r).unwrap();
        assert_eq!(
            text,
            r#"{"index":2,"count":3,"components":["tft"],"dealt_by":"baseline","costs":{"mlp":2.0,"tft":30.5}}"#
        );
        assert_eq!(serde_json::from_str::<Record>(&text).unwrap(), r);
    }

    #[test]
    fn a_record_from_before_costs_reads_as_dealt_by_name() {
        let r: Record = serde_json::from_str(r#"{"index":1,"count":2,"components":["mlp"]}"#).unwrap();
        assert_eq!(r.dealt_by, DealtBy::Name);
        assert!(r.costs.is_empty());
        let by_cost = Record {
            dealt_by: DealtBy::Baseline,
            costs: BTreeMap::from([("mlp".into(), 1.0)]),
            ..r.clone()
        };
        assert!(!r.same_deal(&by_cost));
        assert!(r.same_deal(&r.clone()));
    }
}
