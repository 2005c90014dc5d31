//! A component and its variants (`NAME@VARIANT`), base first, and the
//! values only they write: timing, checkpointing, master weights, budgets.

use candle_core::DType;

use super::context::{find, Ctx};
use super::hints::{suggest, CHECKPOINT_KEYS, COMPONENT_KEYS, TIMING_KEYS, VARIANT_KEYS};
use super::root::Defaults;
use crate::budget::yaml::{Node, Pos};
use crate::budget::{Budget, Component, Timing};
use crate::metric::Metric;
use crate::sdk::config;

/// A component and its variants (`NAME@VARIANT`), base first.
pub(super) fn validate_component(
    cx: &mut Ctx,
    name: &str,
    name_pos: Pos,
    node: &Node,
    d: &Defaults,
) -> Option<Vec<Component>> {
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
                let hint = suggest(
                    r,
                    &known,
                    &format!("variants of `{name}`"),
                    &format!("name one of the variants of `{name}`"),
                );
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

impl Ctx {
    pub(super) fn timing(&mut self, node: &Node, base: Timing) -> Timing {
        let mut t = base;
        let Some(entries) = self.map(node, "timing") else {
            return t;
        };
        self.known_keys(entries, TIMING_KEYS, "timing");
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
    pub(super) fn checkpoint(&mut self, node: &Node) -> Result<Option<usize>, ()> {
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
        self.known_keys(entries, CHECKPOINT_KEYS, "checkpoint");
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

    /// Master weights only make sense with a half-precision compute dtype.
    pub(super) fn check_master(&mut self, master: Option<DType>, dtype: DType, pos: Pos, name: &str) -> Option<DType> {
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
    pub(super) fn budgets(&mut self, bn: &Node, name: &str) -> Vec<Budget> {
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
                        let hint = suggest(key, &names, "metrics", "metrics");
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
}
