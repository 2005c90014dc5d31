//! Typed workload configs. The spec's `config:` mapping reaches a workload as
//! plain data with positions ([`Node`]; no YAML here), read into the
//! workload's own `#[derive(Deserialize)]` struct by the serde
//! [`Deserializer`] below. Every problem keeps the
//! position and key path it came from, so a wrong type, an unknown key or an
//! out-of-range value reads like any other spec error: `file:line:col`, what
//! is wrong, a `hint:`.

use std::fmt::{self, Display};

use serde::de::{self, DeserializeSeed, Deserializer, IntoDeserializer, MapAccess, SeqAccess, Visitor};

use crate::hint::Problem;

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

/// The most bytes one tensor that a workload's config sizes may take, as
/// [`Problems::allocatable`] checks it: 1 TiB, more than any one
/// accelerator holds and than most hosts do. A larger one fails only when
/// the model is built; refused when the spec is validated, it is a spec
/// error at its key.
pub const MAX_TENSOR_BYTES: u64 = 1 << 40;

/// The bytes of an element [`Problems::allocatable`] counts with: the widest
/// dtype (f64), since a config is checked before the run's dtype is known.
pub const WIDEST_ELEMENT_BYTES: u64 = 8;

/// A byte count far past MiB, in the largest binary unit it fills: `2.0 PiB`.
fn large(bytes: u64) -> String {
    let units = ["bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    let (mut v, mut u) = (bytes as f64, 0);
    while v >= 1024.0 && u + 1 < units.len() {
        v /= 1024.0;
        u += 1;
    }
    format!("{v:.1} {}", units[u])
}

/// One problem with a config: where, which key, what, and the fix.
/// Read from [`Problems::issues`]; built with [`ConfigIssue::new`] (and
/// [`ConfigIssue::at`]), so a field added later breaks no one.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ConfigIssue {
    /// Where it was found; `None` until the reader knows.
    pub pos: Option<Pos>,
    /// The key path (`hidden_dim`, `encoder.width`), or `None` for the whole config.
    pub key: Option<String>,
    /// What is wrong.
    pub message: String,
    /// How to fix it.
    pub hint: String,
}

impl ConfigIssue {
    /// A problem with `key` (`None`: the whole config), at no position yet:
    /// `message` says what is wrong, `hint` how to fix it.
    ///
    /// ```
    /// let i = gate_spec::config::ConfigIssue::new(Some("heads"), "`heads` must divide `hidden_dim`", "use 4 heads");
    /// assert_eq!((i.key.as_deref(), i.pos), (Some("heads"), None));
    /// ```
    pub fn new(key: Option<&str>, message: impl Into<String>, hint: impl Into<String>) -> Self {
        ConfigIssue {
            pos: None,
            key: key.map(str::to_string),
            message: message.into(),
            hint: hint.into(),
        }
    }

    /// This problem at `pos` in the spec file.
    pub fn at(mut self, pos: Pos) -> Self {
        self.pos = Some(pos);
        self
    }
}

/// The problems a workload finds in its config after it was read: values
/// out of range, keys that disagree. Each names its key, so the spec error
/// points at the line where the key is written.
///
/// ```
/// let mut p = gate_spec::config::Problems::new();
/// p.at_least("hidden_dim", 0usize, 1);
/// p.error("heads", "`heads` must divide `hidden_dim`", "use 4 heads for hidden_dim 64");
/// assert_eq!(p.len(), 2);
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Problems {
    issues: Vec<ConfigIssue>,
}

impl Problems {
    /// No problems yet.
    pub fn new() -> Self {
        Problems::default()
    }

    /// Records a problem with `key` (a top-level key of the config, or a
    /// dotted path into it).
    pub fn error(&mut self, key: &str, message: impl Into<String>, hint: impl Into<String>) {
        self.issues.push(ConfigIssue::new(Some(key), message, hint));
    }

    /// Records that `key` must be a positive integer when `value` is 0.
    pub fn positive(&mut self, key: &str, value: usize) {
        if value == 0 {
            self.error(
                key,
                format!("`{key}` must be a positive integer, found 0"),
                "use a whole number of at least 1",
            );
        }
    }

    /// Records that the number `key` must lie in `[lo, hi]` when `value` does not.
    pub fn number(&mut self, key: &str, value: f64, lo: f64, hi: f64) {
        if !(value >= lo && value <= hi) {
            self.error(
                key,
                format!("`{key}` must be a number from {lo} to {hi}, found {value}"),
                format!("set `{key}` to a number from {lo} to {hi}"),
            );
        }
    }

    /// Records that `key` must be at least `min` when `value` is below it.
    pub fn at_least<T: PartialOrd + Display>(&mut self, key: &str, value: T, min: T) {
        if value < min {
            self.error(
                key,
                format!("`{key}` must be at least {min}, found {value}"),
                format!("set `{key}` to {min} or more"),
            );
        }
    }

    /// Records that `key` must lie in `[lo, hi]` when `value` does not.
    pub fn within<T: PartialOrd + Display>(&mut self, key: &str, value: T, lo: T, hi: T) {
        if !(value >= lo && value <= hi) {
            self.error(
                key,
                format!("`{key}` must be from {lo} to {hi}, found {value}"),
                format!("set `{key}` to a value from {lo} to {hi}"),
            );
        }
    }

    /// Records that what `shape` describes cannot be allocated: its
    /// elements, the product of the dimensions, at [`WIDEST_ELEMENT_BYTES`]
    /// each, would take more than [`MAX_TENSOR_BYTES`] (or their count
    /// overflows). Each dimension comes with the config key it is read from;
    /// the problem is put at the largest one's. `what` names it in the
    /// message (`the first layer's weights`). Returns whether it fits.
    ///
    /// A built-in or an adopter's workload calls it for each tensor its
    /// config sizes (and for a stack of layers as a whole), so a dimension
    /// no machine can hold is a spec error at `file:line:col`, not a failed
    /// allocation when the model is built.
    ///
    /// ```
    /// let mut p = gate_spec::config::Problems::new();
    /// assert!(p.allocatable("the first layer's weights", &[("input_dim", 256), ("hidden_dim", 512)]));
    /// assert!(!p.allocatable("the first layer's weights", &[("input_dim", 1 << 41), ("hidden_dim", 512)]));
    /// assert_eq!(p.issues()[0].key.as_deref(), Some("input_dim"));
    /// ```
    pub fn allocatable(&mut self, what: &str, shape: &[(&str, usize)]) -> bool {
        let elements = shape.iter().try_fold(1u64, |n, &(_, d)| n.checked_mul(d as u64));
        let bytes = elements.and_then(|n| n.checked_mul(WIDEST_ELEMENT_BYTES));
        if bytes.is_some_and(|b| b <= MAX_TENSOR_BYTES) {
            return true;
        }
        // The largest dimension, the first of equals.
        let Some(&(key, largest)) = shape.iter().rev().max_by_key(|(_, d)| *d) else {
            return true;
        };
        // One problem a key: the same dimension often sizes several tensors.
        if self.issues.iter().any(|i| i.key.as_deref() == Some(key)) {
            return false;
        }
        let dims = shape
            .iter()
            .map(|(k, d)| format!("`{k}` ({d})"))
            .collect::<Vec<_>>()
            .join(" × ");
        let size = match bytes {
            Some(b) => large(b),
            None => format!("more than {}", large(u64::MAX)),
        };
        self.error(
            key,
            format!(
                "{dims} is too large to allocate: {what} would take {size} at {WIDEST_ELEMENT_BYTES} bytes an element, and gate allows {}",
                large(MAX_TENSOR_BYTES)
            ),
            format!("lower `{key}` (now {largest}): {what} must fit in {}", large(MAX_TENSOR_BYTES)),
        );
        false
    }

    /// How many problems were recorded.
    pub fn len(&self) -> usize {
        self.issues.len()
    }

    /// Whether none were.
    pub fn is_empty(&self) -> bool {
        self.issues.is_empty()
    }

    /// `Ok(value)` when nothing was recorded, else the problems.
    pub fn finish<T>(self, value: T) -> Result<T, Problems> {
        if self.issues.is_empty() {
            Ok(value)
        } else {
            Err(self)
        }
    }

    /// The recorded problems.
    pub fn issues(&self) -> &[ConfigIssue] {
        &self.issues
    }

    pub fn into_issues(self) -> Vec<ConfigIssue> {
        self.issues
    }
}

impl Display for Problems {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, p) in self.issues.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{}", p.message)?;
        }
        Ok(())
    }
}

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

    /// #28 item 16: what no machine can allocate is a problem at its
    /// largest dimension's key, once a key; a 64-bit overflow is one too.
    #[test]
    fn allocatable_bounds_what_a_config_sizes_at_the_largest_key() {
        let mut p = Problems::new();
        assert!(
            p.allocatable("w", &[("a", 1 << 18), ("b", 1 << 19)]),
            "exactly 1 TiB fits"
        );
        assert!(p.is_empty());
        assert!(!p.allocatable("w", &[("a", 1 << 18), ("b", (1 << 19) + 1)]));
        assert!(!p.allocatable("v", &[("b", 1 << 40)]), "refused again, said once");
        assert!(!p.allocatable("u", &[("c", usize::MAX), ("d", usize::MAX)]));
        let keys: Vec<_> = p.issues().iter().map(|i| i.key.as_deref().unwrap()).collect();
        assert_eq!(keys, ["b", "c"]);
        assert_eq!(
            p.issues()[0].message,
            "`a` (262144) × `b` (524289) is too large to allocate: w would take 1.0 TiB at 8 bytes an element, and gate allows 1.0 TiB"
        );
        assert_eq!(p.issues()[0].hint, "lower `b` (now 524289): w must fit in 1.0 TiB");
        assert!(
            p.issues()[1].message.contains("would take more than 16.0 EiB"),
            "{}",
            p.issues()[1].message
        );
    }

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
