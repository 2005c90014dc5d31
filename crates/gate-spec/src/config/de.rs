//! The serde [`Deserializer`] over a config's [`Node`]: a workload's own
//! `#[derive(Deserialize)]` struct read from the spec's plain data, every
//! problem found (not only the first) with its position, key path and a
//! hint, the key's default when serde knows no fix.

use std::fmt::{self, Display};

use serde::de::{self, DeserializeSeed, Deserializer, IntoDeserializer, MapAccess, SeqAccess, Visitor};

use super::{ConfigIssue, Node, Pos, Value};
use crate::hint::Problem;

/// Reads `node` into `T`. Every problem found comes back, each with its
/// position and key path where the reader knows them. `defaults` (the
/// config's `Default`, as JSON) names the default of a mistyped key in its hint.
pub fn read<T: de::DeserializeOwned>(node: &Node, defaults: Option<&serde_json::Value>) -> Result<T, Vec<ConfigIssue>> {
    T::deserialize(NodeDe {
        node,
        path: String::new(),
    })
    .map_err(|e| {
        e.0.into_iter()
            .map(|f| ConfigIssue {
                pos: f.pos.or(Some(node.pos)),
                hint: f
                    .problem
                    .hint
                    .unwrap_or_else(|| default_hint(f.key.as_deref(), defaults)),
                key: f.key,
                message: f.problem.message,
            })
            .collect()
    })
}

fn default_hint(key: Option<&str>, defaults: Option<&serde_json::Value>) -> String {
    let Some(key) = key else {
        return "see the workload's documentation for its config keys".into();
    };
    let mut v = defaults;
    for part in key.split('.') {
        v = v.and_then(|d| d.get(part));
    }
    match v {
        Some(serde_json::Value::Null) | None => format!("check the value of `{key}`"),
        Some(serde_json::Value::String(s)) => format!("for example `{key}: {s}` (the default)"),
        Some(d) => format!("for example `{key}: {d}` (the default)"),
    }
}

/// The deserializer's error: every problem found, not only the first.
#[derive(Debug)]
pub struct DeError(Vec<Found>);

/// One problem as the deserializer finds it. Its hint is `None` where serde
/// knows no fix: [`read`] gives it the key's default, which only it knows.
#[derive(Debug)]
struct Found {
    pos: Option<Pos>,
    key: Option<String>,
    problem: Problem,
}

impl DeError {
    fn one(problem: Problem) -> Self {
        DeError(vec![Found {
            pos: None,
            key: None,
            problem,
        }])
    }

    /// Fills in the position and key path that the innermost reader did not know.
    fn at(mut self, pos: Pos, path: &str) -> Self {
        for i in &mut self.0 {
            if i.pos.is_none() {
                i.pos = Some(pos);
            }
            if i.key.is_none() && !path.is_empty() {
                i.key = Some(path.to_string());
                i.problem.message = format!("`{path}` {}", i.problem.message);
            }
        }
        self
    }
}

impl Display for DeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let msgs: Vec<&str> = self.0.iter().map(|i| i.problem.message.as_str()).collect();
        f.write_str(&msgs.join("; "))
    }
}

impl std::error::Error for DeError {}

/// serde's names for what a field expects, as a spec author reads them.
fn plain_expected(exp: &str) -> String {
    match exp {
        "u8" | "u16" | "u32" | "u64" | "u128" | "usize" => "a whole number of at least 0".into(),
        "i8" | "i16" | "i32" | "i64" | "i128" | "isize" => "a whole number".into(),
        "f32" | "f64" => "a number".into(),
        "a nonzero usize" | "a nonzero u64" | "a nonzero u32" | "a nonzero u16" | "a nonzero u8" => {
            "a whole number of at least 1".into()
        }
        "a string" => "text".into(),
        other => other.to_string(),
    }
}

fn plain_unexpected(u: &de::Unexpected) -> String {
    match u {
        de::Unexpected::Str(s) => format!("the text `{s}`"),
        de::Unexpected::Signed(i) => format!("{i}"),
        de::Unexpected::Unsigned(i) => format!("{i}"),
        de::Unexpected::Float(f) => format!("{f}"),
        de::Unexpected::Bool(b) => format!("{b}"),
        other => other.to_string(),
    }
}

impl de::Error for DeError {
    fn custom<M: Display>(msg: M) -> Self {
        DeError::one(Problem::new(msg.to_string()))
    }

    fn invalid_type(unexp: de::Unexpected, exp: &dyn de::Expected) -> Self {
        DeError::one(Problem::new(format!(
            "must be {}, found {}",
            plain_expected(&exp.to_string()),
            plain_unexpected(&unexp)
        )))
    }

    fn invalid_value(unexp: de::Unexpected, exp: &dyn de::Expected) -> Self {
        DeError::one(Problem::new(format!(
            "must be {}, found {}",
            plain_expected(&exp.to_string()),
            plain_unexpected(&unexp)
        )))
    }

    fn unknown_variant(variant: &str, expected: &'static [&'static str]) -> Self {
        let hint = crate::hint::suggest(variant, expected, "one of");
        DeError::one(Problem::new(format!("must be one of {}, found `{variant}`", expected.join(", "))).with_hint(hint))
    }

    fn missing_field(field: &'static str) -> Self {
        DeError::one(
            Problem::new(format!("has no `{field}`, which this workload needs"))
                .with_hint(format!("add `{field}:` to the config")),
        )
    }
}

struct NodeDe<'a> {
    node: &'a Node,
    path: String,
}

impl<'a> NodeDe<'a> {
    fn child(&self, key: &str, node: &'a Node) -> NodeDe<'a> {
        let path = if self.path.is_empty() {
            key.to_string()
        } else {
            format!("{}.{key}", self.path)
        };
        NodeDe { node, path }
    }

    fn scalar(&self) -> Option<(&'a str, bool)> {
        match &self.node.value {
            Value::Scalar { text, quoted } => Some((text.as_str(), *quoted)),
            _ => None,
        }
    }

    fn wrong(&self, expected: &str) -> DeError {
        DeError::one(Problem::new(format!(
            "must be {expected}, found {}",
            self.node.describe()
        )))
    }

    fn fix<T>(&self, r: Result<T, DeError>) -> Result<T, DeError> {
        r.map_err(|e| e.at(self.node.pos, &self.path))
    }
}

impl<'de, 'a> Deserializer<'de> for NodeDe<'a> {
    type Error = DeError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        let r = match &self.node.value {
            Value::Null => visitor.visit_unit(),
            Value::Scalar { text, quoted: true } => visitor.visit_str(text),
            Value::Scalar { text, quoted: false } => {
                if let Ok(u) = text.parse::<u64>() {
                    visitor.visit_u64(u)
                } else if let Ok(i) = text.parse::<i64>() {
                    visitor.visit_i64(i)
                } else if let Ok(f) = text.parse::<f64>() {
                    visitor.visit_f64(f)
                } else {
                    match text.as_str() {
                        "true" => visitor.visit_bool(true),
                        "false" => visitor.visit_bool(false),
                        _ => visitor.visit_str(text),
                    }
                }
            }
            Value::Seq(items) => visitor.visit_seq(Seq {
                parent: &self,
                items: items.iter().enumerate(),
            }),
            Value::Map(entries) => visitor.visit_map(Map {
                parent: &self,
                entries: entries.iter(),
                value: None,
            }),
        };
        self.fix(r)
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        // Unquoted text is text too: `activation: relu`, `name: 300`.
        match self.scalar() {
            Some((text, _)) => {
                let r = visitor.visit_str(text);
                self.fix(r)
            }
            None => self.deserialize_any(visitor),
        }
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        self.deserialize_str(visitor)
    }

    fn deserialize_identifier<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        self.deserialize_str(visitor)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        let r = match &self.node.value {
            Value::Null => visitor.visit_none(),
            _ => visitor.visit_some(NodeDe {
                node: self.node,
                path: self.path.clone(),
            }),
        };
        self.fix(r)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(self, _name: &'static str, visitor: V) -> Result<V::Value, DeError> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        visitor.visit_unit()
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DeError> {
        let entries: &[(String, Pos, Node)] = match &self.node.value {
            Value::Map(entries) => entries,
            // `config:` with nothing under it: every key takes its default.
            Value::Null => &[],
            _ => return Err(self.wrong("a mapping of keys").at(self.node.pos, &self.path)),
        };
        // Unknown keys are errors whether or not the struct denies them:
        // a misspelt key silently taking its default is the bug to catch.
        let mut unknown = Vec::new();
        for (key, kpos, _) in entries {
            if !fields.contains(&key.as_str()) {
                let path = self.child(key, self.node).path;
                let hint = crate::hint::suggest(key, fields, "this workload takes");
                unknown.push(Found {
                    pos: Some(*kpos),
                    key: Some(path),
                    problem: Problem::new(format!("unknown config key `{key}`")).with_hint(hint),
                });
            }
        }
        let r = visitor.visit_map(Map {
            parent: &self,
            entries: entries.iter(),
            value: None,
        });
        let r = self.fix(r);
        match (r, unknown.is_empty()) {
            (Ok(v), true) => Ok(v),
            (Ok(_), false) => Err(DeError(unknown)),
            (Err(e), _) => {
                unknown.extend(e.0);
                unknown.sort_by_key(|i| i.pos);
                Err(DeError(unknown))
            }
        }
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DeError> {
        let r = match &self.node.value {
            Value::Scalar { text, .. } => {
                if !variants.contains(&text.as_str()) {
                    Err(<DeError as de::Error>::unknown_variant(text, variants))
                } else {
                    visitor.visit_enum(text.as_str().into_deserializer())
                }
            }
            _ => Err(self.wrong(&format!("one of {}", variants.join(", ")))),
        };
        self.fix(r)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char
        bytes byte_buf unit unit_struct seq tuple tuple_struct map
    }
}

struct Seq<'a, 'p> {
    parent: &'p NodeDe<'a>,
    items: std::iter::Enumerate<std::slice::Iter<'a, Node>>,
}

impl<'de, 'a, 'p> SeqAccess<'de> for Seq<'a, 'p> {
    type Error = DeError;

    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<Option<T::Value>, DeError> {
        match self.items.next() {
            None => Ok(None),
            Some((i, node)) => seed.deserialize(self.parent.child(&i.to_string(), node)).map(Some),
        }
    }
}

struct Map<'a, 'p> {
    parent: &'p NodeDe<'a>,
    entries: std::slice::Iter<'a, (String, Pos, Node)>,
    value: Option<(&'a str, &'a Node)>,
}

impl<'de, 'a, 'p> MapAccess<'de> for Map<'a, 'p> {
    type Error = DeError;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, DeError> {
        match self.entries.next() {
            None => Ok(None),
            Some((key, kpos, node)) => {
                self.value = Some((key, node));
                let r = seed.deserialize(key.as_str().into_deserializer());
                r.map(Some).map_err(|e: DeError| e.at(*kpos, ""))
            }
        }
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, DeError> {
        let (key, node) = self.value.take().expect("serde asks for a value after its key");
        seed.deserialize(self.parent.child(key, node))
    }
}

#[cfg(test)]
mod tests {
    use serde::{Deserialize, Serialize};

    use super::*;

    fn scalar(text: &str, line: usize) -> Node {
        Node {
            value: Value::Scalar {
                text: text.into(),
                quoted: false,
            },
            pos: Pos { line, col: 10 },
        }
    }

    fn map(entries: &[(&str, Node)]) -> Node {
        Node {
            value: Value::Map(
                entries
                    .iter()
                    .map(|(k, n)| {
                        (
                            k.to_string(),
                            Pos {
                                line: n.pos.line,
                                col: 3,
                            },
                            n.clone(),
                        )
                    })
                    .collect(),
            ),
            pos: Pos { line: 1, col: 1 },
        }
    }

    #[derive(Debug, Deserialize, Serialize, PartialEq)]
    #[serde(default)]
    struct Cfg {
        hidden_dim: usize,
        dropout: f64,
        activation: Act,
        name: String,
        width: Option<std::num::NonZeroUsize>,
    }

    #[derive(Debug, Deserialize, Serialize, PartialEq, Clone, Copy)]
    #[serde(rename_all = "snake_case")]
    enum Act {
        Relu,
        Gelu,
    }

    impl Default for Cfg {
        fn default() -> Self {
            Cfg {
                hidden_dim: 64,
                dropout: 0.1,
                activation: Act::Relu,
                name: "x".into(),
                width: None,
            }
        }
    }

    #[test]
    fn reads_typed_values_and_fills_defaults() {
        let n = map(&[
            ("hidden_dim", scalar("128", 2)),
            ("activation", scalar("gelu", 3)),
            ("name", scalar("300", 4)),
        ]);
        let c: Cfg = read(&n, None).unwrap();
        assert_eq!(
            c,
            Cfg {
                hidden_dim: 128,
                activation: Act::Gelu,
                name: "300".into(),
                ..Cfg::default()
            }
        );
    }

    #[test]
    fn every_problem_with_its_line_key_and_hint() {
        let defaults = serde_json::to_value(Cfg::default()).unwrap();
        let n = map(&[
            ("hiden_dim", scalar("3", 2)),
            ("dropout", scalar("lots", 3)),
            ("activation", scalar("rlu", 4)),
        ]);
        let errs = read::<Cfg>(&n, Some(&defaults)).unwrap_err();
        let got: Vec<(usize, Option<&str>, &str, &str)> = errs
            .iter()
            .map(|i| {
                (
                    i.pos.unwrap().line,
                    i.key.as_deref(),
                    i.message.as_str(),
                    i.hint.as_str(),
                )
            })
            .collect();
        assert_eq!(
            got[0],
            (
                2,
                Some("hiden_dim"),
                "unknown config key `hiden_dim`",
                "did you mean `hidden_dim`? this workload takes: hidden_dim, dropout, activation, name, width"
            )
        );
        // serde stops at the first bad value; unknown keys are all found up front.
        assert_eq!(
            got[1],
            (
                3,
                Some("dropout"),
                "`dropout` must be a number, found the text `lots`",
                "for example `dropout: 0.1` (the default)"
            )
        );
        assert_eq!(errs.len(), 2);
        let n = map(&[("activation", scalar("rlu", 4)), ("width", scalar("0", 5))]);
        let errs = read::<Cfg>(&n, Some(&defaults)).unwrap_err();
        assert_eq!(errs[0].message, "`activation` must be one of relu, gelu, found `rlu`");
        assert_eq!(errs[0].hint, "did you mean `relu`? one of: relu, gelu");
        assert_eq!(errs[0].pos.unwrap().line, 4);
    }

    #[test]
    fn out_of_range_for_the_type_names_the_key() {
        let n = map(&[("width", scalar("0", 5))]);
        let errs = read::<Cfg>(&n, None).unwrap_err();
        assert_eq!(errs[0].message, "`width` must be a whole number of at least 1, found 0");
        let n = map(&[("hidden_dim", scalar("-4", 6))]);
        let errs = read::<Cfg>(&n, None).unwrap_err();
        assert_eq!(
            errs[0].message,
            "`hidden_dim` must be a whole number of at least 0, found -4"
        );
        assert_eq!(errs[0].pos.unwrap().line, 6);
    }

    #[test]
    fn key_positions_and_overlay() {
        let base = map(&[("hidden_dim", scalar("8", 2)), ("dropout", scalar("0.2", 3))]);
        let over = map(&[("hidden_dim", scalar("16", 9))]);
        let merged = base.overlaid(&over);
        assert_eq!(merged.key_pos("hidden_dim").unwrap().line, 9);
        assert_eq!(merged.key_pos("dropout").unwrap().line, 3);
        let c: Cfg = read(&merged, None).unwrap();
        assert_eq!((c.hidden_dim, c.dropout), (16, 0.2));
    }
}
