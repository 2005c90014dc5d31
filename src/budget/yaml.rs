//! The only file that knows YAML: text → a tree of nodes, each with its
//! position, so every later error can say `file:line:col`. Duplicate keys,
//! anchors and tags are reported here as they are found.

use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser};
use yaml_rust2::scanner::{Marker, TScalarStyle};

pub use crate::sdk::Pos;

impl Pos {
    fn from_marker(m: &Marker) -> Self {
        Pos {
            line: m.line(),
            col: m.col() + 1,
        }
    }
}

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

enum Frame {
    Seq(Vec<Node>, Pos),
    Map(Vec<(String, Pos, Node)>, Pos, Option<(String, Pos)>),
}

#[derive(Default)]
struct Builder {
    stack: Vec<Frame>,
    root: Option<Node>,
    issues: Vec<YamlIssue>,
    documents: usize,
}

impl Builder {
    fn push_value(&mut self, node: Node) {
        match self.stack.last_mut() {
            None => self.root = Some(node),
            Some(Frame::Seq(items, _)) => items.push(node),
            Some(Frame::Map(entries, _, pending)) => match pending.take() {
                None => {
                    // A key: only scalars can be keys in a spec.
                    match node {
                        Node::Scalar { text, pos, .. } => {
                            if let Some((_, first, _)) = entries.iter().find(|(k, _, _)| *k == text) {
                                self.issues.push(YamlIssue {
                                    pos,
                                    message: format!("duplicate key `{text}` (first at line {})", first.line),
                                    hint: "each key may appear once in a mapping; remove or rename one".into(),
                                });
                            }
                            *pending = Some((text, pos));
                        }
                        Node::Null { pos } => *pending = Some((String::new(), pos)),
                        other => {
                            self.issues.push(YamlIssue {
                                pos: other.pos(),
                                message: format!("a key must be a plain name, found {}", other.kind()),
                                hint: "write keys as `name: value`".into(),
                            });
                            *pending = Some((String::new(), other.pos()));
                        }
                    }
                }
                Some((key, kpos)) => {
                    // Keep only the first of duplicate keys; the duplicate is already reported.
                    if !entries.iter().any(|(k, _, _)| *k == key) {
                        entries.push((key, kpos, node));
                    }
                }
            },
        }
    }
}

impl MarkedEventReceiver for Builder {
    fn on_event(&mut self, ev: Event, mark: Marker) {
        let pos = Pos::from_marker(&mark);
        match ev {
            Event::DocumentStart => self.documents += 1,
            Event::Scalar(text, style, anchor, tag) => {
                if anchor != 0 || tag.is_some() {
                    self.issues.push(YamlIssue {
                        pos,
                        message: "anchors and tags are not supported in a spec".into(),
                        hint: "write the value out in full".into(),
                    });
                }
                let quoted = !matches!(style, TScalarStyle::Plain);
                let node = if !quoted && matches!(text.as_str(), "" | "~" | "null" | "Null" | "NULL") {
                    Node::Null { pos }
                } else {
                    Node::Scalar { text, quoted, pos }
                };
                self.push_value(node);
            }
            Event::Alias(_) => {
                self.issues.push(YamlIssue {
                    pos,
                    message: "aliases (`*name`) are not supported in a spec".into(),
                    hint: "write the value out in full".into(),
                });
                self.push_value(Node::Null { pos });
            }
            Event::SequenceStart(anchor, _) | Event::MappingStart(anchor, _) if anchor != 0 => {
                self.issues.push(YamlIssue {
                    pos,
                    message: "anchors (`&name`) are not supported in a spec".into(),
                    hint: "write the value out in full".into(),
                });
                if matches!(ev, Event::SequenceStart(..)) {
                    self.stack.push(Frame::Seq(Vec::new(), pos));
                } else {
                    self.stack.push(Frame::Map(Vec::new(), pos, None));
                }
            }
            Event::SequenceStart(..) => self.stack.push(Frame::Seq(Vec::new(), pos)),
            Event::MappingStart(..) => self.stack.push(Frame::Map(Vec::new(), pos, None)),
            Event::SequenceEnd => {
                if let Some(Frame::Seq(items, p)) = self.stack.pop() {
                    self.push_value(Node::Seq { items, pos: p });
                }
            }
            Event::MappingEnd => {
                if let Some(Frame::Map(entries, p, _)) = self.stack.pop() {
                    // A block mapping's start event is marked after its first key;
                    // the first key's own position is what a reader looks for.
                    let pos = entries.first().map_or(p, |(_, kpos, _)| *kpos);
                    self.push_value(Node::Map { entries, pos });
                }
            }
            _ => {}
        }
    }
}

/// Parses `text` into one document tree. A syntax error stops parsing (the
/// YAML parser cannot resume) and is returned as the only issue.
pub fn parse(text: &str) -> Result<(Node, Vec<YamlIssue>), YamlIssue> {
    let mut builder = Builder::default();
    let mut parser = Parser::new_from_str(text);
    if let Err(e) = parser.load(&mut builder, true) {
        let m = e.marker();
        let pos = Pos {
            line: m.line(),
            col: m.col() + 1,
        };
        let mut hint = "check the indentation and quoting around this position".to_string();
        if text
            .lines()
            .nth(pos.line.saturating_sub(1))
            .is_some_and(|l| l.contains(": >") || l.contains(":>"))
        {
            hint = "a value starting with `>` must be quoted in YAML: write `\"> 1 GB\"` or `{ min: 1 GB }`".into();
        }
        return Err(YamlIssue {
            pos,
            message: format!("invalid YAML: {}", e.info()),
            hint,
        });
    }
    if builder.documents > 1 {
        builder.issues.push(YamlIssue {
            pos: Pos { line: 1, col: 1 },
            message: "the spec holds more than one YAML document".into(),
            hint: "keep one document per budgets file".into(),
        });
    }
    let root = builder.root.unwrap_or(Node::Null {
        pos: Pos { line: 1, col: 1 },
    });
    Ok((root, builder.issues))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_are_one_based_and_point_at_values() {
        let (root, issues) = parse("a: 1\nb:\n  c: \"x\"\n").unwrap();
        assert!(issues.is_empty());
        let Node::Map { entries, .. } = root else { panic!() };
        assert_eq!(entries[0].1, Pos { line: 1, col: 1 });
        assert_eq!(entries[0].2.pos(), Pos { line: 1, col: 4 });
        let Node::Map { entries: inner, .. } = &entries[1].2 else {
            panic!()
        };
        assert_eq!(inner[0].1, Pos { line: 3, col: 3 });
        assert!(matches!(&inner[0].2, Node::Scalar { quoted: true, .. }));
    }

    #[test]
    fn duplicate_keys_are_reported_with_both_lines() {
        let (_, issues) = parse("a: 1\nb: 2\na: 3\n").unwrap();
        assert_eq!(issues.len(), 1);
        assert_eq!(issues[0].pos, Pos { line: 3, col: 1 });
        assert_eq!(issues[0].message, "duplicate key `a` (first at line 1)");
    }

    #[test]
    fn unquoted_greater_than_gets_the_quoting_hint() {
        let err = parse("headroom: > 1 GB\nx: 1\n").unwrap_err();
        assert!(err.hint.contains("must be quoted"), "{err:?}");
    }
}
