//! A YAML value → a typed one: whole numbers, sizes, percentages, dtypes and
//! budget limits (sizes, durations, plain numbers), each refused with its
//! position and a hint.

use crate::dtype::DType;

use super::context::Ctx;
use crate::budget::tree::Node;
use crate::budget::{Limit, Op};
use crate::config::Pos;
use crate::metric::Unit;
use crate::units::{parse_millis, parse_percent, parse_size, Bytes, Percent, SizeUnit, UnitError};

impl Ctx {
    pub(super) fn text<'n>(&mut self, node: &'n Node, what: &str) -> Option<&'n str> {
        match node {
            Node::Scalar { text, .. } => Some(text),
            other => {
                self.wrong_kind(other, what, "a value", "");
                None
            }
        }
    }

    /// A whole number from 1 to `max`; `why` says what the limit is for.
    pub(super) fn positive_int_at_most(&mut self, node: &Node, what: &str, max: u64, why: &str) -> Option<u64> {
        let v = self.positive_int(node, what)?;
        if v > max {
            self.err(
                node.pos(),
                format!("{what} is {v}, more than the {max} gate allows"),
                format!("{why}; give {what} of at most {max}"),
            );
            return None;
        }
        Some(v)
    }

    pub(super) fn positive_int(&mut self, node: &Node, what: &str) -> Option<u64> {
        let text = self.text(node, what)?;
        match text.trim().parse::<i64>() {
            Ok(v) if v >= 1 => Some(v as u64),
            Ok(v) => {
                self.err(
                    node.pos(),
                    format!("{what} must be at least 1, found {v}"),
                    format!("give {what} as a whole number of at least 1"),
                );
                None
            }
            Err(_) => {
                self.err(
                    node.pos(),
                    format!("{what} must be a whole number, found `{text}`"),
                    format!("give {what} as a whole number of at least 1"),
                );
                None
            }
        }
    }

    pub(super) fn non_negative_int(&mut self, node: &Node, what: &str) -> Option<u64> {
        let text = self.text(node, what)?;
        match text.trim().parse::<u64>() {
            Ok(v) => Some(v),
            Err(_) => {
                self.err(
                    node.pos(),
                    format!("{what} must be a whole number of 0 or more, found `{text}`"),
                    format!("give {what} as a whole number from 0 to {}", u64::MAX),
                );
                None
            }
        }
    }

    pub(super) fn size(&mut self, node: &Node, what: &str) -> Option<Bytes> {
        self.quantity(node, what, parse_size)
    }

    pub(super) fn percent(&mut self, node: &Node, what: &str) -> Option<Percent> {
        self.quantity(node, what, parse_percent)
    }

    /// `node`'s text read by `parse`, a value with its unit.
    fn quantity<T>(&mut self, node: &Node, what: &str, parse: fn(&str) -> Result<T, UnitError>) -> Option<T> {
        let text = self.text(node, what)?;
        match parse(text) {
            Ok(v) => Some(v),
            Err(e) => {
                self.err(node.pos(), format!("{what}: {}", e.message), e.hint);
                None
            }
        }
    }

    pub(super) fn dtype(&mut self, node: &Node) -> Option<DType> {
        let text = self.text(node, "dtype")?;
        let dtype = DType::from_name(text);
        if dtype.is_none() {
            let names: Vec<&str> = DType::ALL.iter().map(|d| d.as_str()).collect();
            self.err(
                node.pos(),
                format!("unknown dtype `{text}`"),
                format!("use one of: {}", names.join(", ")),
            );
        }
        dtype
    }

    /// `master_weights: f32` (mixed precision) or `none`.
    pub(super) fn master_weights(&mut self, node: &Node) -> Option<Option<DType>> {
        match self.text(node, "master_weights")?.trim() {
            "f32" => Some(Some(DType::F32)),
            "none" => Some(None),
            other => {
                self.err(
                    node.pos(),
                    format!("unknown master_weights `{other}`"),
                    "write `master_weights: f32` (f32 parameters, optimizer state and gradients; compute in `dtype`) or `none`",
                );
                None
            }
        }
    }

    /// `< 300 MB`, `"> 1 GB"`, `{ max: 300 MB }`, `{ min: 1 GB }` in `unit`.
    pub(super) fn limit(&mut self, node: &Node, unit: Unit, what: &str) -> Option<Limit> {
        let (op, text, pos) = self.comparison(node, unit, what)?;
        let value = match unit {
            Unit::Bytes => parse_size(&text).map(|b| b.0 as f64),
            Unit::Ms => parse_millis(&text),
            // Every metric of a spec has a unit this gate knows.
            // A finite one: NaN or infinity (which Rust reads from `NaN`,
            // `inf`, `1e999`) compares false or true with every figure.
            Unit::One | Unit::Unknown => match text.trim().parse::<f64>() {
                Ok(v) if v.is_finite() => Ok(v),
                Ok(_) => Err(UnitError {
                    message: format!("`{text}` is not a finite number"),
                    hint: "write a plain number, e.g. `< 1.2`".into(),
                }),
                Err(_) => Err(UnitError {
                    message: format!("`{text}` is not a number"),
                    hint: "write a plain number".into(),
                }),
            },
        };
        match value {
            Ok(v) => Some(Limit {
                op,
                value: v,
                unit: (unit == Unit::Bytes).then(|| SizeUnit::of(&text)).flatten(),
                seconds: unit == Unit::Ms && !text.trim().ends_with("ms"),
            }),
            Err(e) => {
                self.err(pos, format!("budget for {what}: {}", e.message), e.hint);
                None
            }
        }
    }

    /// A limit's comparison, and its value's text and position (not yet read in `unit`).
    fn comparison(&mut self, node: &Node, unit: Unit, what: &str) -> Option<(Op, String, Pos)> {
        let example = match unit {
            Unit::Bytes => "`< 300 MB`, `<= 1 GiB` or `{ max: 300 MB }`",
            Unit::Ms => "`< 500 ms` or `{ max: 2 s }`",
            Unit::One | Unit::Unknown => "`< 0.5` or `{ max: 0.5 }`",
        };
        match node {
            Node::Scalar { text, pos, .. } => {
                let t = text.trim();
                let Some((op, rest)) = split_op(t) else {
                    self.err(
                        *pos,
                        format!("budget for {what} has no comparison: `{t}`"),
                        format!("write the limit with an operator, e.g. {example}"),
                    );
                    return None;
                };
                Some((op, rest.trim().to_string(), *pos))
            }
            Node::Map { entries, pos } => {
                if let Some((key, kpos, _)) = entries.iter().find(|(k, _, _)| !matches!(k.as_str(), "max" | "min")) {
                    self.err(
                        *kpos,
                        format!("unknown key `{key}` in the budget for {what}"),
                        format!("a limit as a mapping is `max` or `min` alone, e.g. {example}"),
                    );
                    return None;
                }
                if entries.len() != 1 {
                    self.err(
                        *pos,
                        format!("budget for {what} must have exactly one of `max` or `min`"),
                        format!("e.g. {example}"),
                    );
                    return None;
                }
                let (key, _, value) = &entries[0];
                let op = if key == "max" { Op::Le } else { Op::Ge };
                let text = self.text(value, what)?.to_string();
                Some((op, text, value.pos()))
            }
            other => {
                self.wrong_kind(
                    other,
                    &format!("budget for {what}"),
                    "a limit",
                    format!("e.g. {example}"),
                );
                None
            }
        }
    }
}

/// `<= 1 GB` → `Le` and ` 1 GB`; two-character operators first, so `<=` is not read as `<`.
fn split_op(t: &str) -> Option<(Op, &str)> {
    [("<=", Op::Le), (">=", Op::Ge), ("<", Op::Lt), (">", Op::Gt)]
        .into_iter()
        .find_map(|(symbol, op)| t.strip_prefix(symbol).map(|rest| (op, rest)))
}
