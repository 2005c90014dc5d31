//! Typed workload configs. The spec's `config:` mapping reaches a workload as
//! plain data with positions ([`Node`]; no YAML here), read into the
//! workload's own `#[derive(Deserialize)]` struct by the serde
//! [`Deserializer`] below. Every problem keeps the
//! position and key path it came from, so a wrong type, an unknown key or an
//! out-of-range value reads like any other spec error: `file:line:col`, what
//! is wrong, a `hint:`.//!
//! Here the plain data ([`Node`], [`Value`], [`Pos`]); `problems` holds
//! what a workload's checks find ([`Problems`], [`ConfigIssue`]) and `de`
//! the deserializer ([`read`]). Their paths stay `gate_spec::config::X`.

mod de;
mod problems;

pub use de::{read, DeError};
pub use problems::{ConfigIssue, Problems, MAX_TENSOR_BYTES, WIDEST_ELEMENT_BYTES};

/// A 1-based position in the spec file.
// Deliberately a plain closed value (not `#[non_exhaustive]`): a line and a
// column are all a position is, and code across gate builds it by its fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, Hash, serde::Serialize, serde::Deserialize)]
pub struct Pos {
    /// Line, from 1.
    pub line: usize,
    /// Column, from 1.
    pub col: usize,
}

/// One value of a config tree.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Value {
    Null,
    /// A scalar keeps its text; `quoted` tells `"300"` (text) from `300`.
    Scalar {
        text: String,
        quoted: bool,
    },
    Seq(Vec<Node>),
    /// Keys in file order, each with its own position.
    Map(Vec<(String, Pos, Node)>),
}

/// A value and where it was written.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Node {
    pub value: Value,
    pub pos: Pos,
}

impl Node {
    pub fn empty_map(pos: Pos) -> Node {
        Node {
            value: Value::Map(Vec::new()),
            pos,
        }
    }

    /// The position of the key path `a.b` (its key), if the tree has it.
    pub fn key_pos(&self, path: &str) -> Option<Pos> {
        let mut node = self;
        let mut found = None;
        for part in path.split('.') {
            let Value::Map(entries) = &node.value else {
                return found;
            };
            let (_, kpos, child) = entries.iter().rev().find(|(k, _, _)| k == part)?;
            found = Some(*kpos);
            node = child;
        }
        found
    }

    /// `self` with the top-level keys of `over` replacing or adding to its own
    /// (a variant's `config:` over its component's).
    pub fn overlaid(&self, over: &Node) -> Node {
        let (Value::Map(base), Value::Map(top)) = (&self.value, &over.value) else {
            return over.clone();
        };
        let mut entries = base.clone();
        for (k, p, n) in top {
            match entries.iter_mut().find(|(bk, _, _)| bk == k) {
                Some(e) => *e = (k.clone(), *p, n.clone()),
                None => entries.push((k.clone(), *p, n.clone())),
            }
        }
        Node {
            value: Value::Map(entries),
            pos: self.pos,
        }
    }

    /// A tree of plain JSON data, every value at `pos`: the part of a
    /// config a workload kept as JSON (a model's own config under `model:`),
    /// read again with [`read`] into the model's type. Keys keep their
    /// paths, so a problem found there is placed by the whole config's
    /// [`Node::key_pos`].
    pub fn from_json(value: &serde_json::Value, pos: Pos) -> Node {
        use serde_json::Value as J;
        let scalar = |text: String, quoted: bool| Value::Scalar { text, quoted };
        let value = match value {
            J::Null => Value::Null,
            J::Bool(b) => scalar(b.to_string(), false),
            J::Number(n) => scalar(n.to_string(), false),
            J::String(s) => scalar(s.clone(), true),
            J::Array(items) => Value::Seq(items.iter().map(|v| Node::from_json(v, pos)).collect()),
            J::Object(map) => Value::Map(
                map.iter()
                    .map(|(k, v)| (k.clone(), pos, Node::from_json(v, pos)))
                    .collect(),
            ),
        };
        Node { value, pos }
    }

    fn describe(&self) -> String {
        match &self.value {
            Value::Null => "nothing".into(),
            Value::Scalar { text, quoted: true } => format!("the text \"{text}\""),
            Value::Scalar { text, .. } => format!("`{text}`"),
            Value::Seq(_) => "a list".into(),
            Value::Map(_) => "a mapping".into(),
        }
    }
}

/// How deep a component's `config:` may nest: `config: { a: 1 }` is 1 level,
/// `{ a: { b: [1] } }` 3. One limit for every side (issue #43 item 11): the
/// spec's validation refuses a deeper config at its position, a harness's
/// resolved config deeper than this is a protocol error, and the readers
/// of gate's files (reports, baselines) refuse one as not gate's. Far below
/// what JSON readers take (serde_json: 128 levels), which the config
/// reaches inside gate's files: 4 levels each in the harness's request
/// (the positions), 1 each in a report below its 3 of its own.
pub const MAX_CONFIG_DEPTH: usize = 16;

/// How many levels of mappings and lists `v` nests (a scalar: 0).
pub fn json_depth(v: &serde_json::Value) -> usize {
    match v {
        serde_json::Value::Array(items) => 1 + items.iter().map(json_depth).max().unwrap_or(0),
        serde_json::Value::Object(m) => 1 + m.values().map(json_depth).max().unwrap_or(0),
        _ => 0,
    }
}

impl Node {
    /// The first value nested past [`MAX_CONFIG_DEPTH`] levels (counting
    /// this node's own), with its key path (`a.b[0]`), if any.
    pub fn past_depth_limit(&self) -> Option<(Pos, String)> {
        fn walk(n: &Node, level: usize, path: &str) -> Option<(Pos, String)> {
            let children: Vec<(String, &Node)> = match &n.value {
                Value::Map(entries) => entries
                    .iter()
                    .map(|(k, _, c)| {
                        (
                            if path.is_empty() {
                                k.clone()
                            } else {
                                format!("{path}.{k}")
                            },
                            c,
                        )
                    })
                    .collect(),
                Value::Seq(items) => items
                    .iter()
                    .enumerate()
                    .map(|(i, c)| (format!("{path}[{i}]"), c))
                    .collect(),
                _ => return None,
            };
            if level > MAX_CONFIG_DEPTH {
                return Some((n.pos, path.to_string()));
            }
            children.iter().find_map(|(p, c)| walk(c, level + 1, p))
        }
        walk(self, 1, "")
    }
}
