//! The only file that knows YAML (feature `yaml`): text → a [`Node`] tree,
//! each node with its position, so every later error can say
//! `file:line:col`. Duplicate keys, anchors and tags are reported here as
//! they are found.

use std::collections::HashMap;

use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser};
use yaml_rust2::scanner::{Marker, TScalarStyle};

use super::tree::{Node, YamlIssue};
use crate::config::Pos;

impl Pos {
    fn from_marker(m: &Marker) -> Self {
        Pos {
            line: m.line(),
            col: m.col() + 1,
        }
    }
}

enum Frame {
    Seq(Vec<Node>, Pos),
    /// Entries, position, the key awaiting its value, and the keys seen
    /// (with their first position) so a duplicate is found in O(1), not by
    /// a scan of the entries: a scan made 80,000 components take 80 s.
    Map(
        Vec<(String, Pos, Node)>,
        Pos,
        Option<(String, Pos, bool)>,
        HashMap<String, Pos>,
    ),
}

#[derive(Default)]
struct Builder {
    stack: Vec<Frame>,
    root: Option<Node>,
    issues: Vec<YamlIssue>,
    documents: usize,
    /// Levels of mappings and lists open past [`MAX_NESTING`], not built.
    skipped: usize,
    /// Problems found past [`MAX_KEPT`](super::validate::MAX_KEPT), counted only.
    dropped: usize,
}

/// The deepest a spec's mappings and lists may nest: the spec's own
/// levels and a config's [`MAX_CONFIG_DEPTH`](crate::config::MAX_CONFIG_DEPTH)
/// fit many times over. The YAML parser limits flow nesting (`[[[…`) itself
/// but not block nesting (`- - - …`, indentation): past this, the levels
/// are not built into the tree, whose walks and drop recurse per level and
/// would run out of stack (a few thousand levels: an 8 KB file).
const MAX_NESTING: usize = 256;

/// A problem the reader found; past [`MAX_KEPT`](super::validate::MAX_KEPT)
/// it is counted in `dropped`, not kept (the validation says how many more).
fn note(issues: &mut Vec<YamlIssue>, dropped: &mut usize, issue: YamlIssue) {
    if issues.len() < super::validate::MAX_KEPT {
        issues.push(issue);
    } else {
        *dropped += 1;
    }
}

impl Builder {
    /// Past the nesting limit, events only count levels: the too-deep
    /// value is reported once and stands as a null in the tree. Whether
    /// `ev` was one of those.
    fn past_the_nesting_limit(&mut self, ev: &Event, pos: Pos) -> bool {
        match ev {
            Event::SequenceStart(..) | Event::MappingStart(..)
                if self.skipped > 0 || self.stack.len() >= MAX_NESTING =>
            {
                if self.skipped == 0 {
                    note(
                        &mut self.issues,
                        &mut self.dropped,
                        YamlIssue {
                            pos,
                            message: format!("the spec nests mappings and lists deeper than {MAX_NESTING} levels"),
                            hint: "a spec is a few levels deep; a config's keys nest 16 levels at most".into(),
                        },
                    );
                }
                self.skipped += 1;
                true
            }
            Event::SequenceEnd | Event::MappingEnd if self.skipped > 0 => {
                self.skipped -= 1;
                if self.skipped == 0 {
                    self.push_value(Node::Null { pos });
                }
                true
            }
            _ => self.skipped > 0,
        }
    }

    fn push_value(&mut self, node: Node) {
        match self.stack.last_mut() {
            None => self.root = Some(node),
            Some(Frame::Seq(items, _)) => items.push(node),
            Some(Frame::Map(entries, _, pending, seen)) => match pending.take() {
                None => {
                    // A key: only scalars can be keys in a spec.
                    match node {
                        Node::Scalar { text, pos, .. } => {
                            let duplicate = match seen.get(&text) {
                                Some(first) => {
                                    note(
                                        &mut self.issues,
                                        &mut self.dropped,
                                        YamlIssue {
                                            pos,
                                            message: format!("duplicate key `{text}` (first at line {})", first.line),
                                            hint: "each key may appear once in a mapping; remove or rename one".into(),
                                        },
                                    );
                                    true
                                }
                                None => false,
                            };
                            *pending = Some((text, pos, duplicate));
                        }
                        Node::Null { pos } => *pending = Some((String::new(), pos, false)),
                        other => {
                            note(
                                &mut self.issues,
                                &mut self.dropped,
                                YamlIssue {
                                    pos: other.pos(),
                                    message: format!("a key must be a plain name, found {}", other.kind()),
                                    hint: "write keys as `name: value`".into(),
                                },
                            );
                            *pending = Some((String::new(), other.pos(), false));
                        }
                    }
                }
                Some((key, kpos, duplicate)) => {
                    // Keep only the first of duplicate keys; the duplicate is already reported.
                    // (An empty or non-scalar key is kept as `""` once, as before.)
                    if !duplicate && !seen.contains_key(&key) {
                        seen.insert(key.clone(), kpos);
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
        if self.past_the_nesting_limit(&ev, pos) {
            return;
        }
        match ev {
            Event::DocumentStart => self.documents += 1,
            Event::Scalar(text, style, anchor, tag) => {
                if anchor != 0 || tag.is_some() {
                    note(
                        &mut self.issues,
                        &mut self.dropped,
                        YamlIssue {
                            pos,
                            message: "anchors and tags are not supported in a spec".into(),
                            hint: "write the value out in full".into(),
                        },
                    );
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
                note(
                    &mut self.issues,
                    &mut self.dropped,
                    YamlIssue {
                        pos,
                        message: "aliases (`*name`) are not supported in a spec".into(),
                        hint: "write the value out in full".into(),
                    },
                );
                self.push_value(Node::Null { pos });
            }
            Event::SequenceStart(anchor, _) | Event::MappingStart(anchor, _) if anchor != 0 => {
                note(
                    &mut self.issues,
                    &mut self.dropped,
                    YamlIssue {
                        pos,
                        message: "anchors (`&name`) are not supported in a spec".into(),
                        hint: "write the value out in full".into(),
                    },
                );
                if matches!(ev, Event::SequenceStart(..)) {
                    self.stack.push(Frame::Seq(Vec::new(), pos));
                } else {
                    self.stack.push(Frame::Map(Vec::new(), pos, None, HashMap::new()));
                }
            }
            Event::SequenceStart(..) => self.stack.push(Frame::Seq(Vec::new(), pos)),
            Event::MappingStart(..) => self.stack.push(Frame::Map(Vec::new(), pos, None, HashMap::new())),
            Event::SequenceEnd => {
                if let Some(Frame::Seq(items, p)) = self.stack.pop() {
                    self.push_value(Node::Seq { items, pos: p });
                }
            }
            Event::MappingEnd => {
                if let Some(Frame::Map(entries, p, _, _)) = self.stack.pop() {
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

/// Raw file bytes → text. A UTF-8 byte-order mark is skipped (YAML allows
/// it); UTF-16/UTF-32 are known by their mark and refused by name; other
/// invalid UTF-8 is refused at its first bad byte.
pub(super) fn decode(bytes: &[u8]) -> Result<&str, YamlIssue> {
    let start = Pos { line: 1, col: 1 };
    // UTF-32 first: its LE mark begins with UTF-16 LE's.
    for (mark, name) in [
        (&[0xFF, 0xFE, 0, 0][..], "UTF-32 LE"),
        (&[0, 0, 0xFE, 0xFF][..], "UTF-32 BE"),
        (&[0xFF, 0xFE][..], "UTF-16 LE"),
        (&[0xFE, 0xFF][..], "UTF-16 BE"),
    ] {
        if bytes.starts_with(mark) {
            return Err(YamlIssue {
                pos: start,
                message: format!("the spec is {name}; gate reads UTF-8"),
                hint: "save it as UTF-8".into(),
            });
        }
    }
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    std::str::from_utf8(bytes).map_err(|e| {
        let good = &bytes[..e.valid_up_to()];
        let line = good.iter().filter(|&&b| b == b'\n').count() + 1;
        let line_start = good.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        // Columns count characters, as the YAML parser's do.
        let col = String::from_utf8_lossy(&good[line_start..]).chars().count() + 1;
        YamlIssue {
            pos: Pos { line, col },
            message: format!("the spec is not valid UTF-8 (byte 0x{:02X})", bytes[e.valid_up_to()]),
            hint: "save it as UTF-8".into(),
        }
    })
}

/// The first character YAML does not allow in a document (a NUL, other C0
/// controls but tab and line breaks, DEL, C1 controls but NEL, surrogates
/// cannot occur in a `str`, U+FFFE/U+FFFF), at its position. The YAML
/// parser would otherwise stop at a NUL as if the file ended there.
fn check_chars(text: &str) -> Result<(), YamlIssue> {
    let allowed = |c: char| matches!(c, '\t' | '\n' | '\r' | ' '..='~' | '\u{85}' | '\u{A0}'..='\u{D7FF}' | '\u{E000}'..='\u{FFFD}' | '\u{10000}'..);
    let (mut line, mut col) = (1, 1);
    for c in text.chars() {
        if !allowed(c) {
            let what = match c {
                '\0' => "a NUL byte".to_string(),
                c => format!("the control character U+{:04X}", c as u32),
            };
            return Err(YamlIssue {
                pos: Pos { line, col },
                message: format!("{what}, which YAML does not allow in a document"),
                hint: "remove it; write special characters inside a quoted string as escapes (`\\u0000`)".into(),
            });
        }
        if c == '\n' {
            (line, col) = (line + 1, 1);
        } else {
            col += 1;
        }
    }
    Ok(())
}

/// Parses `text` into one document tree, with the problems found and how
/// many more were found and not kept. A syntax error stops parsing (the
/// YAML parser cannot resume) and is returned as the only issue.
pub(super) fn parse(text: &str) -> Result<(Node, Vec<YamlIssue>, usize), YamlIssue> {
    // A byte-order mark is allowed at the start of a stream.
    let text = text.strip_prefix('\u{FEFF}').unwrap_or(text);
    check_chars(text)?;
    let mut builder = Builder::default();
    let mut parser = Parser::new_from_str(text);
    // The parser's events one by one: `Parser::load` hands over the same
    // events in the same order, but recurses once per level of nesting, and
    // a few thousand block levels (an 8 KB file) ran out of stack.
    let mut events = std::iter::from_fn(|| match parser.next_token() {
        Ok((Event::StreamEnd, _)) => None,
        other => Some(other),
    });
    if let Err(e) = events.try_for_each(|ev| ev.map(|(ev, mark)| builder.on_event(ev, mark))) {
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
    Ok((root, builder.issues, builder.dropped))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_are_one_based_and_point_at_values() {
        let (root, issues, _) = parse("a: 1\nb:\n  c: \"x\"\n").unwrap();
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
        let (_, issues, _) = parse("a: 1\nb: 2\na: 3\n").unwrap();
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
