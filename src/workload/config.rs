//! A workload's configuration as the spec gives it: plain typed values by
//! key, with no YAML and no positions. A workload reads it through
//! [`ConfigReader`], which collects every problem (wrong type, out of range,
//! unknown key) so the spec loader can report them all with their lines.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum ConfigValue {
    Int(i64),
    Float(f64),
    Bool(bool),
    Str(String),
}

impl ConfigValue {
    fn describe(&self) -> String {
        match self {
            ConfigValue::Int(i) => format!("the integer {i}"),
            ConfigValue::Float(f) => format!("the number {f}"),
            ConfigValue::Bool(b) => format!("the boolean {b}"),
            ConfigValue::Str(s) => format!("the text `{s}`"),
        }
    }
}

pub type ConfigMap = BTreeMap<String, ConfigValue>;

/// A problem with one key (or with the whole config when `key` is `None`).
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigError {
    pub key: Option<String>,
    pub message: String,
    pub hint: String,
}

pub struct ConfigReader<'a> {
    map: &'a ConfigMap,
    known: RefCell<BTreeSet<&'static str>>,
    errors: RefCell<Vec<ConfigError>>,
    resolved: RefCell<BTreeMap<&'static str, ConfigValue>>,
}

impl<'a> ConfigReader<'a> {
    pub fn new(map: &'a ConfigMap) -> Self {
        ConfigReader {
            map,
            known: RefCell::default(),
            errors: RefCell::default(),
            resolved: RefCell::default(),
        }
    }

    /// A positive integer (sizes, counts); `default` when absent.
    pub fn positive(&self, key: &'static str, default: usize) -> usize {
        self.known.borrow_mut().insert(key);
        let v = match self.map.get(key) {
            None => default,
            Some(ConfigValue::Int(i)) if *i >= 1 && *i <= (1 << 40) => *i as usize,
            Some(ConfigValue::Int(i)) => {
                self.error(
                    key,
                    format!("`{key}` must be a positive integer, found {i}"),
                    "use a whole number of at least 1",
                );
                default
            }
            Some(other) => {
                self.error(
                    key,
                    format!("`{key}` must be a positive integer, found {}", other.describe()),
                    "use a whole number of at least 1",
                );
                default
            }
        };
        self.resolved.borrow_mut().insert(key, ConfigValue::Int(v as i64));
        v
    }

    /// A number within `[lo, hi]`.
    pub fn number(&self, key: &'static str, default: f64, lo: f64, hi: f64) -> f64 {
        self.known.borrow_mut().insert(key);
        let v = match self.map.get(key) {
            None => default,
            Some(ConfigValue::Int(i)) if (*i as f64) >= lo && (*i as f64) <= hi => *i as f64,
            Some(ConfigValue::Float(f)) if *f >= lo && *f <= hi => *f,
            Some(other) => {
                self.error(
                    key,
                    format!("`{key}` must be a number from {lo} to {hi}, found {}", other.describe()),
                    format!("for example `{key}: {default}`"),
                );
                default
            }
        };
        self.resolved.borrow_mut().insert(key, ConfigValue::Float(v));
        v
    }

    pub fn boolean(&self, key: &'static str, default: bool) -> bool {
        self.known.borrow_mut().insert(key);
        let v = match self.map.get(key) {
            None => default,
            Some(ConfigValue::Bool(b)) => *b,
            Some(other) => {
                self.error(
                    key,
                    format!("`{key}` must be true or false, found {}", other.describe()),
                    "write `true` or `false`",
                );
                default
            }
        };
        self.resolved.borrow_mut().insert(key, ConfigValue::Bool(v));
        v
    }

    /// Records a problem with `key` (a cross-key rule, say).
    pub fn error(&self, key: &str, message: impl Into<String>, hint: impl Into<String>) {
        self.errors.borrow_mut().push(ConfigError {
            key: Some(key.to_string()),
            message: message.into(),
            hint: hint.into(),
        });
    }

    /// Ends reading: unknown keys become errors naming the known ones.
    /// Returns the resolved config (defaults filled in) for the report.
    pub fn finish(self) -> Result<BTreeMap<&'static str, ConfigValue>, Vec<ConfigError>> {
        let known = self.known.into_inner();
        let mut errors = self.errors.into_inner();
        for key in self.map.keys() {
            if !known.contains(key.as_str()) {
                let names: Vec<&str> = known.iter().copied().collect();
                errors.push(ConfigError {
                    key: Some(key.clone()),
                    message: format!("unknown config key `{key}`"),
                    hint: format!("this workload takes: {}", names.join(", ")),
                });
            }
        }
        if errors.is_empty() {
            Ok(self.resolved.into_inner())
        } else {
            Err(errors)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collects_every_problem_and_unknown_keys() {
        let mut map = ConfigMap::new();
        map.insert("hidden".into(), ConfigValue::Int(0));
        map.insert("rate".into(), ConfigValue::Str("x".into()));
        map.insert("hiden".into(), ConfigValue::Int(3));
        let r = ConfigReader::new(&map);
        assert_eq!(r.positive("hidden", 8), 8);
        r.number("rate", 0.1, 0.0, 1.0);
        let errs = r.finish().unwrap_err();
        let msgs: Vec<_> = errs.iter().map(|e| e.message.as_str()).collect();
        assert_eq!(
            msgs,
            [
                "`hidden` must be a positive integer, found 0",
                "`rate` must be a number from 0 to 1, found the text `x`",
                "unknown config key `hiden`"
            ]
        );
        assert_eq!(errs[2].hint, "this workload takes: hidden, rate");
    }
}
