//! `shard.json`: what a sharded `gate check --shard I/N` leaves beside its
//! report, so that `gate merge` can tell a complete set of shards from one
//! with a shard missing. Part of the contract (schema/shard.schema.json);
//! how components are dealt to shards is the command line's.

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

/// What `shard.json` says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "ShardJson", into = "ShardJson")]
pub struct Record {
    /// The shard this folder is.
    pub shard: Shard,
    /// The components it profiled (their variants with them).
    pub components: Vec<String>,
    /// The `--only` selection it was dealt from, sorted (empty: the whole
    /// spec): shards of different selections are not one split.
    pub only: Vec<String>,
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
        };
        let text = serde_json::to_string(&r).unwrap();
        assert_eq!(text, r#"{"index":2,"count":3,"components":["tft"]}"#);
        assert_eq!(serde_json::from_str::<Record>(&text).unwrap(), r);
    }
}
