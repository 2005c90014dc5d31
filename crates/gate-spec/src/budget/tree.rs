//! The spec as a tree of positioned nodes: what the YAML reader (`yaml.rs`,
//! feature `yaml`) makes of the text, and what validation reads. No YAML
//! here, so a build without the reader (a harness) still has validation.

use crate::config::Pos;

/// One node of the spec's tree.
#[derive(Debug, Clone, PartialEq)]
pub enum Node {
    /// A scalar keeps its text; `quoted` tells `"300"` (a string) from `300`.
    Scalar {
        text: String,
        quoted: bool,
        pos: Pos,
    },
    Seq {
        items: Vec<Node>,
        pos: Pos,
    },
    /// Keys in file order, each with its own position.
    Map {
        entries: Vec<(String, Pos, Node)>,
        pos: Pos,
    },
    Null {
        pos: Pos,
    },
}

impl Node {
    pub fn pos(&self) -> Pos {
        match self {
            Node::Scalar { pos, .. } | Node::Seq { pos, .. } | Node::Map { pos, .. } | Node::Null { pos } => *pos,
        }
    }

    pub fn kind(&self) -> &'static str {
        match self {
            Node::Scalar { .. } => "a scalar",
            Node::Seq { .. } => "a list",
            Node::Map { .. } => "a mapping",
            Node::Null { .. } => "nothing",
        }
    }
}

/// A problem found while reading the YAML itself.
#[derive(Debug, Clone, PartialEq)]
pub struct YamlIssue {
    pub pos: Pos,
    pub message: String,
    pub hint: String,
}
