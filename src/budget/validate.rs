//! The marked YAML tree → a validated [`Spec`]. Every problem is collected
//! (not just the first) with its position and a hint.

use std::collections::BTreeSet;
use std::path::Path;

use candle_core::DType;

use super::diagnostic::{did_you_mean, Diagnostic, Diagnostics};
use super::spec::Timing;
use super::spec::*;
use super::yaml::{Node, Pos};
use crate::metric::{Metric, Unit};
use crate::sdk::config;
use crate::units::{parse_millis, parse_percent, parse_size, Bytes, Percent};

struct Ctx {
    file: String,
    diags: Vec<Diagnostic>,
}

impl Ctx {
    fn err(&mut self, pos: Pos, message: impl Into<String>, hint: impl Into<String>) {
        self.diags.push(Diagnostic {
            file: self.file.clone(),
            pos,
            message: message.into(),
            hint: hint.into(),
        });
    }

    /// The entries of a mapping, or an error naming `what` it should be.
    fn map<'n>(&mut self, node: &'n Node, what: &str) -> Option<&'n [(String, Pos, Node)]> {
        match node {
            Node::Map { entries, .. } => Some(entries),
            other => {
                self.err(
                    other.pos(),
                    format!("{what} must be a mapping, found {}", other.kind()),
                    format!("write {what} as `key: value` lines indented under it"),
                );
                None
            }
        }
    }

    /// Reports keys of `entries` not in `known`.
    fn known_keys(&mut self, entries: &[(String, Pos, Node)], known: &[&str], where_: &str) {
        for (key, pos, _) in entries {
            if !known.contains(&key.as_str()) {
                let hint = match did_you_mean(key, known) {
                    Some(k) => format!("did you mean `{k}`? {where_} takes: {}", known.join(", ")),
                    None => format!("{where_} takes: {}", known.join(", ")),
                };
                self.err(*pos, format!("unknown key `{key}` in {where_}"), hint);
            }
        }
    }

    fn text<'n>(&mut self, node: &'n Node, what: &str) -> Option<&'n str> {
        match node {
            Node::Scalar { text, .. } => Some(text),
            other => {
                self.err(
                    other.pos(),
                    format!("{what} must be a value, found {}", other.kind()),
                    "",
                );
                None
            }
        }
    }

    fn positive_int(&mut self, node: &Node, what: &str) -> Option<u64> {
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

    fn non_negative_int(&mut self, node: &Node, what: &str) -> Option<u64> {
        let text = self.text(node, what)?;
        match text.trim().parse::<u64>() {
            Ok(v) => Some(v),
            Err(_) => {
                self.err(
                    node.pos(),
                    format!("{what} must be a whole number of 0 or more, found `{text}`"),
                    "",
                );
                None
            }
        }
    }

    fn size(&mut self, node: &Node, what: &str) -> Option<Bytes> {
        let text = self.text(node, what)?;
        match parse_size(text) {
            Ok(b) => Some(b),
            Err(e) => {
                self.err(node.pos(), format!("{what}: {}", e.message), e.hint);
                None
            }
        }
    }

    fn percent(&mut self, node: &Node, what: &str) -> Option<Percent> {
        let text = self.text(node, what)?;
        match parse_percent(text) {
            Ok(p) => Some(p),
            Err(e) => {
                self.err(node.pos(), format!("{what}: {}", e.message), e.hint);
                None
            }
        }
    }

    fn dtype(&mut self, node: &Node) -> Option<DType> {
        let text = self.text(node, "dtype")?;
        match text {
            "f32" => Some(DType::F32),
            "f16" => Some(DType::F16),
            "bf16" => Some(DType::BF16),
            other => {
                self.err(
                    node.pos(),
                    format!("unknown dtype `{other}`"),
                    "use one of: f32, f16, bf16",
                );
                None
            }
        }
    }

    fn timing(&mut self, node: &Node, base: Timing) -> Timing {
        let mut t = base;
        let Some(entries) = self.map(node, "timing") else {
            return t;
        };
        self.known_keys(entries, &["warmup", "steps", "pairs"], "timing");
        for (key, _, value) in entries {
            match key.as_str() {
                "warmup" => {
                    t.warmup = self.non_negative_int(value, "timing.warmup").unwrap_or(t.warmup as u64) as usize
                }
                "steps" => t.steps = self.positive_int(value, "timing.steps").unwrap_or(t.steps as u64) as usize,
                "pairs" => {
                    t.pairs = self
                        .non_negative_int(value, "timing.pairs")
                        .map(|n| n as usize)
                        .or(t.pairs)
                }
                _ => {}
            }
        }
        t
    }

    /// `checkpoint: { chunk: N }` (positions per recomputed chunk) or
    /// `checkpoint: none`. `Err` when it is malformed (already reported).
    fn checkpoint(&mut self, node: &Node) -> Result<Option<usize>, ()> {
        let hint = "write `checkpoint: { chunk: 64 }` (positions per recomputed chunk), or `checkpoint: none`";
        let (entries, pos) = match node {
            Node::Map { entries, pos } => (entries, pos),
            Node::Scalar { text, .. } if text.trim() == "none" => return Ok(None),
            other => {
                let found = match other {
                    Node::Scalar { text, .. } => format!("`{text}`"),
                    n => n.kind().to_string(),
                };
                self.err(
                    other.pos(),
                    format!("`checkpoint` must be `{{ chunk: N }}` or `none`, found {found}"),
                    hint,
                );
                return Err(());
            }
        };
        self.known_keys(entries, &["chunk"], "checkpoint");
        match find(entries, "chunk") {
            Some(n) => self
                .positive_int(n, "checkpoint.chunk")
                .map(|c| Some(c as usize))
                .ok_or(()),
            None => {
                // An unknown key was most likely the chunk misspelt: said once, above.
                if entries.is_empty() {
                    self.err(*pos, "missing `checkpoint.chunk`", hint);
                }
                Err(())
            }
        }
    }

    /// `master_weights: f32` (mixed precision) or `none`.
    fn master_weights(&mut self, node: &Node) -> Option<Option<DType>> {
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

    /// Master weights only make sense with a half-precision compute dtype.
    fn check_master(&mut self, master: Option<DType>, dtype: DType, pos: Pos, name: &str) -> Option<DType> {
        if master.is_some() && dtype == DType::F32 {
            self.err(
                pos,
                format!("`master_weights` of `{name}` needs `dtype: bf16` or `f16`; `{name}` computes in f32"),
                "set `dtype: bf16` (or f16) with it, or remove `master_weights`",
            );
            return None;
        }
        master
    }

    /// A component's (or a variant's) `budgets:` mapping.
    fn budgets(&mut self, bn: &Node, name: &str) -> Vec<Budget> {
        let mut budgets = Vec::new();
        if let Some(bentries) = self.map(bn, &format!("budgets of `{name}`")) {
            let names: Vec<&str> = Metric::ALL.iter().map(|m| m.name()).collect();
            for (key, kpos, value) in bentries {
                match Metric::parse(key) {
                    Some(metric) => {
                        if let Some(limit) = self.limit(value, metric.unit(), &format!("`{name}.{key}`")) {
                            budgets.push(Budget {
                                metric,
                                limit,
                                line: kpos.line,
                                col: kpos.col,
                            });
                        }
                    }
                    None => {
                        let hint = match did_you_mean(key, &names) {
                            Some(k) => format!("did you mean `{k}`? metrics: {}", names.join(", ")),
                            None => format!("metrics: {}", names.join(", ")),
                        };
                        self.err(
                            *kpos,
                            format!("unknown metric `{key}` in the budgets of `{name}`"),
                            hint,
                        );
                    }
                }
            }
        }
        budgets
    }

    /// `< 300 MB`, `"> 1 GB"`, `{ max: 300 MB }`, `{ min: 1 GB }` in `unit`.
    fn limit(&mut self, node: &Node, unit: Unit, what: &str) -> Option<Limit> {
        let example = match unit {
            Unit::Bytes => "`< 300 MB`, `<= 1 GiB` or `{ max: 300 MB }`",
            Unit::Ms => "`< 500 ms` or `{ max: 2 s }`",
            Unit::One => "`< 0.5` or `{ max: 0.5 }`",
        };
        let (op, text, pos) = match node {
            Node::Scalar { text, pos, .. } => {
                let t = text.trim();
                let (op, rest) = if let Some(r) = t.strip_prefix("<=") {
                    (Op::Le, r)
                } else if let Some(r) = t.strip_prefix(">=") {
                    (Op::Ge, r)
                } else if let Some(r) = t.strip_prefix('<') {
                    (Op::Lt, r)
                } else if let Some(r) = t.strip_prefix('>') {
                    (Op::Gt, r)
                } else {
                    self.err(
                        *pos,
                        format!("budget for {what} has no comparison: `{t}`"),
                        format!("write the limit with an operator, e.g. {example}"),
                    );
                    return None;
                };
                (op, rest.trim().to_string(), *pos)
            }
            Node::Map { entries, pos } => {
                if entries.len() != 1 || !matches!(entries[0].0.as_str(), "max" | "min") {
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
                (op, text, value.pos())
            }
            other => {
                self.err(
                    other.pos(),
                    format!("budget for {what} must be a limit, found {}", other.kind()),
                    format!("e.g. {example}"),
                );
                return None;
            }
        };
        let value = match unit {
            Unit::Bytes => parse_size(&text).map(|b| b.0 as f64),
            Unit::Ms => parse_millis(&text),
            Unit::One => text.parse::<f64>().map_err(|_| crate::units::UnitError {
                message: format!("`{text}` is not a number"),
                hint: "write a plain number".into(),
            }),
        };
        match value {
            Ok(v) => Some(Limit {
                op,
                value: v,
                unit: (unit == Unit::Bytes)
                    .then(|| crate::units::SizeUnit::of(&text))
                    .flatten(),
            }),
            Err(e) => {
                self.err(pos, format!("budget for {what}: {}", e.message), e.hint);
                None
            }
        }
    }
}

const TOP_KEYS: &[&str] = &["version", "device", "defaults", "components", "ensemble", "harness"];
const HARNESS_KEYS: &[&str] = &["package", "bin", "features", "manifest"];
const DEVICE_KEYS: &[&str] = &["name", "capacity", "reserve", "emulate"];
const DEFAULT_KEYS: &[&str] = &["dtype", "batch_size", "tolerance", "seed", "timing"];
const COMPONENT_KEYS: &[&str] = &[
    "workload",
    "config",
    "batch_size",
    "dtype",
    "seed",
    "tolerance",
    "timing",
    "budgets",
    "checkpoint",
    "variants",
    "reference",
    "master_weights",
];
const VARIANT_KEYS: &[&str] = &[
    "dtype",
    "batch_size",
    "checkpoint",
    "config",
    "budgets",
    "master_weights",
];
const ENSEMBLE_KEYS: &[&str] = &["members", "metric", "processes", "budgets"];

struct Defaults {
    dtype: DType,
    batch_size: usize,
    tolerance: Percent,
    seed: u64,
    timing: Timing,
}

/// Validates a parsed tree. `yaml_issues` are problems the YAML reader found.
pub fn validate(
    path: &Path,
    root: &Node,
    yaml_issues: Vec<super::yaml::YamlIssue>,
    check: Option<&dyn super::WorkloadCheck>,
) -> Result<Spec, Diagnostics> {
    let file = path.display().to_string();
    let mut cx = Ctx {
        file: file.clone(),
        diags: Vec::new(),
    };
    for i in yaml_issues {
        cx.err(i.pos, i.message, i.hint);
    }
    let spec = validate_root(&mut cx, path, root, check);
    spec.iter()
        .flat_map(super::measurable::unmeasurable)
        .for_each(|(p, m, h)| cx.err(p, m, h));
    let mut diags = cx.diags;
    diags.sort_by_key(|d| d.pos);
    match spec {
        Some(spec) if diags.is_empty() => Ok(spec),
        _ => Err(Diagnostics(diags)),
    }
}

fn find<'n>(entries: &'n [(String, Pos, Node)], key: &str) -> Option<&'n Node> {
    entries.iter().find(|(k, _, _)| k == key).map(|(_, _, n)| n)
}

fn validate_root(cx: &mut Ctx, path: &Path, root: &Node, check: Option<&dyn super::WorkloadCheck>) -> Option<Spec> {
    if let Node::Null { .. } = root {
        cx.err(
            Pos { line: 1, col: 1 },
            "the spec is empty",
            "start with `version: 1`, then `device:` and `components:` (see the README's budgets.yaml reference)",
        );
        return None;
    }
    let top = cx.map(root, "the spec")?;
    cx.known_keys(top, TOP_KEYS, "the spec");

    let version = match find(top, "version") {
        None => {
            cx.err(
                root.pos(),
                "missing `version`",
                "add `version: 1` at the top of the spec",
            );
            None
        }
        Some(n) => match cx.text(n, "version") {
            Some("1") => Some(1),
            Some(other) => {
                cx.err(
                    n.pos(),
                    format!("unsupported spec version `{other}`"),
                    "this gate reads `version: 1`",
                );
                None
            }
            None => None,
        },
    };

    let device = match find(top, "device") {
        None => {
            cx.err(
                root.pos(),
                "missing `device`",
                "describe the card that is gated: `device: { name: RTX 3050 Ti, capacity: 4 GiB, reserve: 300 MiB }`",
            );
            None
        }
        Some(n) => validate_device(cx, n),
    };

    let mut defaults = Defaults {
        dtype: DType::F32,
        batch_size: 32,
        tolerance: Percent(5.0),
        seed: 42,
        timing: Timing::default(),
    };
    if let Some(n) = find(top, "defaults") {
        if let Some(entries) = cx.map(n, "defaults") {
            cx.known_keys(entries, DEFAULT_KEYS, "defaults");
            for (key, _, value) in entries {
                match key.as_str() {
                    "dtype" => defaults.dtype = cx.dtype(value).unwrap_or(defaults.dtype),
                    "batch_size" => defaults.batch_size = cx.positive_int(value, "batch_size").unwrap_or(32) as usize,
                    "tolerance" => defaults.tolerance = cx.percent(value, "tolerance").unwrap_or(defaults.tolerance),
                    "seed" => defaults.seed = cx.non_negative_int(value, "seed").unwrap_or(defaults.seed),
                    "timing" => defaults.timing = cx.timing(value, defaults.timing),
                    _ => {}
                }
            }
        }
    }

    let mut components = Vec::new();
    match find(top, "components") {
        None => cx.err(
            root.pos(),
            "missing `components`",
            "add `components:` with at least one model to gate",
        ),
        Some(n) => {
            if let Some(entries) = cx.map(n, "components") {
                if entries.is_empty() {
                    cx.err(n.pos(), "`components` is empty", "add at least one component");
                }
                for (name, pos, node) in entries {
                    if let Some(c) = validate_component(cx, name, *pos, node, &defaults) {
                        components.extend(c);
                    }
                }
            }
        }
    }

    let ensemble = find(top, "ensemble").and_then(|n| validate_ensemble(cx, n, top));
    let harness = match find(top, "harness") {
        None => Some(None),
        Some(n) => validate_harness(cx, n).map(Some),
    };
    if let Some(check) = check {
        check_workloads(cx, &components, check, find(top, "harness").is_some());
    }

    Some(Spec {
        path: path.to_path_buf(),
        version: version?,
        device: device?,
        default_tolerance: defaults.tolerance,
        components,
        ensemble,
        harness: harness?,
    })
}

/// Each component's workload through `check`, its problems among the
/// spec's others. A variant shares its component's config: when the
/// component's fails, the variant's would only repeat it.
fn check_workloads(cx: &mut Ctx, components: &[Component], check: &dyn super::WorkloadCheck, has_harness: bool) {
    let mut failed: Vec<&str> = Vec::new();
    for c in components {
        let base = c.name.split('@').next().unwrap_or(&c.name);
        if c.name.contains('@') && failed.contains(&base) {
            continue;
        }
        let problems = check.check(c, has_harness);
        if !problems.is_empty() && !c.name.contains('@') {
            failed.push(base);
        }
        for (pos, message, hint) in problems {
            if !cx.diags.iter().any(|d| d.pos == pos && d.message == message) {
                cx.err(pos, message, hint);
            }
        }
    }
}

/// `harness: { package: NAME, bin: NAME, features: [..], manifest: PATH }`.
fn validate_harness(cx: &mut Ctx, node: &Node) -> Option<HarnessSpec> {
    let entries = cx.map(node, "harness")?;
    cx.known_keys(entries, HARNESS_KEYS, "harness");
    let mut name = |key: &str, example: &str| match find(entries, key) {
        Some(n) => match cx.text(n, &format!("harness.{key}")) {
            Some(t) if !t.is_empty() && !t.starts_with('-') && !t.chars().any(char::is_whitespace) => {
                Some(t.to_string())
            }
            Some(t) => {
                cx.err(
                    n.pos(),
                    format!("harness.{key} `{t}` is not a cargo name"),
                    format!("write the name as in Cargo.toml, e.g. `{key}: {example}`"),
                );
                None
            }
            None => None,
        },
        None => {
            cx.err(
                node.pos(),
                format!("missing `harness.{key}`"),
                format!("name the crate's {key} that calls `gate::main!`, e.g. `{key}: {example}`"),
            );
            None
        }
    };
    let package = name("package", "ml");
    let bin = name("bin", "gate-harness");
    let mut features = Vec::new();
    if let Some(n) = find(entries, "features") {
        match n {
            Node::Seq { items, .. } => {
                for item in items {
                    if let Some(f) = cx.text(item, "a harness feature") {
                        features.push(f.to_string());
                    }
                }
            }
            other => cx.err(
                other.pos(),
                format!("harness.features must be a list, found {}", other.kind()),
                "write `features: [name, other]`",
            ),
        }
    }
    let manifest = find(entries, "manifest").and_then(|n| cx.text(n, "harness.manifest").map(std::path::PathBuf::from));
    Some(HarnessSpec {
        package: package?,
        bin: bin?,
        features,
        manifest,
        line: node.pos().line,
    })
}

fn validate_device(cx: &mut Ctx, node: &Node) -> Option<DeviceSpec> {
    let entries = cx.map(node, "device")?;
    cx.known_keys(entries, DEVICE_KEYS, "device");
    let name = match find(entries, "name") {
        Some(n) => cx.text(n, "device.name").map(str::to_string),
        None => {
            cx.err(
                node.pos(),
                "missing `device.name`",
                "name the card, e.g. `name: RTX 3050 Ti Laptop`",
            );
            None
        }
    };
    let capacity = match find(entries, "capacity") {
        Some(n) => cx.size(n, "device.capacity"),
        None => {
            cx.err(
                node.pos(),
                "missing `device.capacity`",
                "give the card's memory, e.g. `capacity: 4 GiB`",
            );
            None
        }
    };
    let reserve = match find(entries, "reserve") {
        Some(n) => cx.size(n, "device.reserve"),
        None => Some(Bytes(0)),
    };
    if let (Some(c), Some(r), Some(n)) = (capacity, reserve, find(entries, "reserve")) {
        if r >= c {
            cx.err(
                n.pos(),
                format!("device.reserve ({r}) is not smaller than device.capacity ({c})"),
                "the reserve is the per-process context cost; it must leave room for the models",
            );
        }
    }
    let emulate = match find(entries, "emulate") {
        None => Some(false),
        Some(n) => match cx.text(n, "device.emulate") {
            Some("true") => Some(true),
            Some("false") => Some(false),
            Some(other) => {
                cx.err(
                    n.pos(),
                    format!("device.emulate must be true or false, found `{other}`"),
                    "write `emulate: true` to emulate the card's capacity on a larger GPU",
                );
                None
            }
            None => None,
        },
    };
    Some(DeviceSpec {
        name: name?,
        capacity: capacity?,
        reserve: reserve?,
        emulate: emulate?,
    })
}

/// A workload config as plain data: the YAML tree without YAML, every
/// value with its position. Unquoted `~` and `null` are nothing.
fn to_config(node: &Node) -> config::Node {
    let (value, pos) = match node {
        Node::Null { pos } => (config::Value::Null, *pos),
        Node::Scalar {
            text,
            quoted: false,
            pos,
        } if text == "~" || text == "null" => (config::Value::Null, *pos),
        Node::Scalar { text, quoted, pos } => (
            config::Value::Scalar {
                text: text.clone(),
                quoted: *quoted,
            },
            *pos,
        ),
        Node::Seq { items, pos } => (config::Value::Seq(items.iter().map(to_config).collect()), *pos),
        Node::Map { entries, pos } => (
            config::Value::Map(entries.iter().map(|(k, p, n)| (k.clone(), *p, to_config(n))).collect()),
            *pos,
        ),
    };
    config::Node { value, pos }
}

/// A component and its variants (`NAME@VARIANT`), base first.
fn validate_component(cx: &mut Ctx, name: &str, name_pos: Pos, node: &Node, d: &Defaults) -> Option<Vec<Component>> {
    let entries = cx.map(node, &format!("component `{name}`"))?;
    let where_ = format!("component `{name}`");
    cx.known_keys(entries, COMPONENT_KEYS, &where_);
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
        cx.err(
            name_pos,
            format!("component name `{name}` is not a plain name"),
            "use letters, digits, `_` and `-` only",
        );
    }

    let mut batch_size = d.batch_size;
    let mut dtype = d.dtype;
    let mut seed = d.seed;
    let mut tolerance = d.tolerance;
    let mut timing = d.timing;
    let mut batch_pos = None;
    let mut dtype_pos = None;
    for (key, kpos, value) in entries {
        match key.as_str() {
            "batch_size" => {
                batch_size = cx.positive_int(value, "batch_size").unwrap_or(batch_size as u64) as usize;
                batch_pos = Some(*kpos);
            }
            "dtype" => {
                dtype = cx.dtype(value).unwrap_or(dtype);
                dtype_pos = Some(*kpos);
            }
            "seed" => seed = cx.non_negative_int(value, "seed").unwrap_or(seed),
            "tolerance" => tolerance = cx.percent(value, "tolerance").unwrap_or(tolerance),
            "timing" => timing = cx.timing(value, timing),
            _ => {}
        }
    }
    let checkpoint = entries
        .iter()
        .find(|(k, _, _)| k == "checkpoint")
        .map(|(_, kpos, n)| (*kpos, cx.checkpoint(n)));
    let master = entries
        .iter()
        .find(|(k, _, _)| k == "master_weights")
        .and_then(|(_, kpos, n)| cx.master_weights(n).map(|m| (*kpos, m)));

    // The workload's own keys; `batch_size` and `dtype` may also be written here
    // (the original TFT config lists them), but only once per component.
    let config_node = find(entries, "config");
    let mut config = config::Node::empty_map(config_node.map_or(name_pos, Node::pos));
    if let Some(cn) = config_node {
        if let Some(centries) = cx.map(cn, &format!("config of `{name}`")) {
            let mut kept = Vec::new();
            for (key, kpos, value) in centries {
                match key.as_str() {
                    "batch_size" => {
                        if let Some(p) = batch_pos {
                            cx.err(
                                *kpos,
                                format!("`batch_size` of `{name}` is given twice (also at line {})", p.line),
                                "keep one: either in the component or in its config",
                            );
                        } else if let Some(b) = cx.positive_int(value, "batch_size") {
                            batch_size = b as usize;
                        }
                    }
                    "dtype" => {
                        if let Some(p) = dtype_pos {
                            cx.err(
                                *kpos,
                                format!("`dtype` of `{name}` is given twice (also at line {})", p.line),
                                "keep one: either in the component or in its config",
                            );
                        } else if let Some(t) = cx.dtype(value) {
                            dtype = t;
                        }
                    }
                    _ => kept.push((key.clone(), *kpos, to_config(value))),
                }
            }
            config.value = config::Value::Map(kept);
        }
    }

    // Which workload builds it is checked against the binary's registry when
    // the runner resolves the spec: a harness knows kinds this module cannot.
    let kind = match find(entries, "workload") {
        None => {
            cx.err(
                name_pos,
                format!("component `{name}` has no `workload`"),
                "say which model to build, e.g. `workload: mlp` (or a kind your harness registers)",
            );
            None
        }
        Some(n) => cx.text(n, "workload").map(|k| (k.to_string(), n.pos())),
    };

    let budgets = match find(entries, "budgets") {
        None => {
            cx.err(
                name_pos,
                format!("component `{name}` has no `budgets`"),
                "add `budgets:` with at least one metric, e.g. `training_peak: < 1 GB`",
            );
            Vec::new()
        }
        Some(bn) => cx.budgets(bn, name),
    };

    let (kind, kind_pos) = kind?;
    let (ck_pos, chunk) = match &checkpoint {
        Some((pos, Ok(c))) => (*pos, *c),
        _ => (name_pos, None),
    };
    let master_dtype = match master {
        Some((pos, m)) => cx.check_master(m, dtype, pos, name),
        None => None,
    };
    let base = Component {
        name: name.to_string(),
        line: name_pos.line,
        kind,
        kind_pos,
        config,
        batch_size,
        dtype,
        seed,
        tolerance,
        timing,
        budgets,
        checkpoint: chunk,
        checkpoint_pos: ck_pos,
        reference: None,
        master_dtype,
    };
    let mut out = vec![base.clone()];
    let Some(vnode) = find(entries, "variants") else {
        if let Some((_, kpos, _)) = entries.iter().find(|(k, _, _)| k == "reference") {
            cx.err(
                *kpos,
                format!("`reference` of `{name}` names a variant, but `{name}` has no `variants`"),
                "add `variants:` (e.g. `plain: { checkpoint: none }`) or remove `reference`",
            );
        }
        return Some(out);
    };
    let Some(ventries) = cx.map(vnode, &format!("variants of `{name}`")) else {
        return Some(out);
    };
    for (vname, vpos, vnode) in ventries {
        let full = format!("{name}@{vname}");
        if vname.is_empty() || !vname.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
            cx.err(
                *vpos,
                format!("variant name `{vname}` of `{name}` is not a plain name"),
                "use letters, digits, `_` and `-` only",
            );
            continue;
        }
        let Some(ventries) = cx.map(vnode, &format!("variant `{full}`")) else {
            continue;
        };
        cx.known_keys(ventries, VARIANT_KEYS, &format!("variant `{full}`"));
        let mut v = base.clone();
        v.name = full.clone();
        v.line = vpos.line;
        v.budgets = Vec::new();
        let mut vck = (ck_pos, chunk);
        let mut vmaster: Option<(Pos, Option<DType>)> = None;
        for (key, kpos, value) in ventries {
            match key.as_str() {
                "dtype" => v.dtype = cx.dtype(value).unwrap_or(v.dtype),
                "batch_size" => {
                    v.batch_size = cx.positive_int(value, "batch_size").unwrap_or(v.batch_size as u64) as usize
                }
                "checkpoint" => {
                    if let Ok(c) = cx.checkpoint(value) {
                        vck = (*kpos, c);
                    }
                }
                "budgets" => v.budgets = cx.budgets(value, &full),
                "master_weights" => {
                    if let Some(m) = cx.master_weights(value) {
                        vmaster = Some((*kpos, m));
                    }
                }
                "config" if cx.map(value, &format!("config of `{full}`")).is_some() => {
                    v.config = v.config.overlaid(&to_config(value));
                }
                _ => {}
            }
        }
        v.checkpoint = vck.1;
        v.checkpoint_pos = vck.0;
        v.master_dtype = match vmaster {
            Some((pos, m)) => cx.check_master(m, v.dtype, pos, &full),
            // Inherited: a variant back in f32 computes in f32 with no masters.
            None => v.master_dtype.filter(|_| v.dtype != DType::F32),
        };
        out.push(v);
    }
    // Ratios compare against `reference` (a variant), or against the component itself.
    let reference = match entries.iter().find(|(k, _, _)| k == "reference") {
        None => name.to_string(),
        Some((_, _, rnode)) => match cx.text(rnode, "reference") {
            Some(r) if r == name => name.to_string(),
            Some(r) if ventries.iter().any(|(k, _, _)| k == r) => format!("{name}@{r}"),
            Some(r) => {
                let known: Vec<&str> = ventries.iter().map(|(k, _, _)| k.as_str()).collect();
                let hint = match did_you_mean(r, &known) {
                    Some(k) => format!("did you mean `{k}`? variants of `{name}`: {}", known.join(", ")),
                    None => format!("name one of the variants of `{name}`: {}", known.join(", ")),
                };
                cx.err(rnode.pos(), format!("`reference` of `{name}`: no variant `{r}`"), hint);
                name.to_string()
            }
            None => name.to_string(),
        },
    };
    for c in &mut out {
        if c.name != reference {
            c.reference = Some(reference.clone());
        }
    }
    Some(out)
}

fn validate_ensemble(cx: &mut Ctx, node: &Node, top: &[(String, Pos, Node)]) -> Option<Ensemble> {
    let entries = cx.map(node, "ensemble")?;
    cx.known_keys(entries, ENSEMBLE_KEYS, "ensemble");
    let declared: BTreeSet<&str> = match find(top, "components") {
        Some(Node::Map { entries, .. }) => entries.iter().map(|(k, _, _)| k.as_str()).collect(),
        _ => BTreeSet::new(),
    };
    let mut members = Vec::new();
    match find(entries, "members") {
        None => cx.err(
            node.pos(),
            "missing `ensemble.members`",
            "list the components that share the card, e.g. `members: [tft, dqn]`",
        ),
        Some(Node::Seq { items, pos }) => {
            if items.is_empty() {
                cx.err(*pos, "`ensemble.members` is empty", "list at least one component");
            }
            for item in items {
                if let Some(m) = cx.text(item, "an ensemble member") {
                    if !declared.contains(m) {
                        let known: Vec<&str> = declared.iter().copied().collect();
                        let hint = match did_you_mean(m, &known) {
                            Some(k) => format!("did you mean `{k}`? components: {}", known.join(", ")),
                            None => format!("members must be components of this spec: {}", known.join(", ")),
                        };
                        cx.err(item.pos(), format!("ensemble member `{m}` is not a component"), hint);
                    } else if members.iter().any(|x| x == m) {
                        cx.err(
                            item.pos(),
                            format!("ensemble member `{m}` is listed twice"),
                            "list each component once",
                        );
                    } else {
                        members.push(m.to_string());
                    }
                }
            }
        }
        Some(other) => cx.err(
            other.pos(),
            format!("`ensemble.members` must be a list, found {}", other.kind()),
            "write `members: [tft, dqn, ppo]`",
        ),
    }
    // Where `metric:` is written (the ensemble's own position when it is not).
    let metric_pos = find(entries, "metric").map_or(node.pos(), |n| n.pos());
    let metric = match find(entries, "metric") {
        None => Some(Metric::TrainingPeak),
        Some(n) => match cx.text(n, "ensemble.metric") {
            Some(t) => match Metric::parse(t) {
                Some(m) if m.unit() == Unit::Bytes => Some(m),
                Some(m) => {
                    cx.err(
                        n.pos(),
                        format!("ensemble.metric `{m}` is not a size"),
                        "sum a byte metric such as `training_peak` or `inference_peak`",
                    );
                    None
                }
                None => {
                    cx.err(
                        n.pos(),
                        format!("unknown metric `{t}`"),
                        "use a byte metric such as `training_peak`",
                    );
                    None
                }
            },
            None => None,
        },
    };
    let processes = match find(entries, "processes") {
        None => Some(1),
        Some(n) => cx.positive_int(n, "ensemble.processes"),
    };
    let mut budgets = Vec::new();
    match find(entries, "budgets") {
        None => cx.err(
            node.pos(),
            "missing `ensemble.budgets`",
            "add `budgets: { total: < 2.5 GB, headroom: \"> 1 GB\" }`",
        ),
        Some(bn) => {
            if let Some(bentries) = cx.map(bn, "ensemble.budgets") {
                cx.known_keys(bentries, &["total", "headroom"], "ensemble.budgets");
                for (key, kpos, value) in bentries {
                    let metric = match key.as_str() {
                        "total" => EnsembleMetric::Total,
                        "headroom" => EnsembleMetric::Headroom,
                        _ => continue,
                    };
                    if let Some(limit) = cx.limit(value, Unit::Bytes, &format!("`ensemble.{key}`")) {
                        budgets.push(EnsembleBudget {
                            metric,
                            limit,
                            line: kpos.line,
                        });
                    }
                }
            }
        }
    }
    Some(Ensemble {
        members,
        metric: metric?,
        processes: processes?,
        budgets,
        line: node.pos().line,
        metric_pos,
    })
}
