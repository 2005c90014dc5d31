//! A component and its variants (`NAME@VARIANT`), base first: each variant
//! starts from its component's settings and writes its own keys over them
//! with the same parser ([`Settings::overrides`]); ratios compare against
//! the `reference`.

use super::context::{find, Ctx};
use super::hints::{suggest, COMPONENT_KEYS, VARIANT_KEYS};
use super::overrides::{Defaults, Settings, Written};
use crate::budget::tree::Node;
use crate::budget::Component;
use crate::config;
use crate::config::Pos;

/// The name the reports give the ensemble's rows: no component may take it.
const ENSEMBLE: &str = "ensemble";

pub(super) fn validate_component(
    cx: &mut Ctx,
    name: &str,
    name_pos: Pos,
    node: &Node,
    d: &Defaults,
) -> Option<Vec<Component>> {
    let where_ = format!("component `{name}`");
    let entries = cx.map(node, &where_)?;
    cx.known_keys(entries, COMPONENT_KEYS, &where_);
    if !crate::name::is_plain(name) {
        cx.err(
            name_pos,
            format!("component name `{name}` is not a plain name"),
            "use letters, digits, `_` and `-` only",
        );
    } else if name == ENSEMBLE {
        // Every report, JUnit file and comment names the ensemble's rows
        // (`total`, `headroom`) so: a component of that name would be read
        // as the ensemble's.
        cx.err(
            name_pos,
            "component name `ensemble` is reserved: the report names the ensemble's own rows so".to_string(),
            "name the component after its model (e.g. `ensemble_net`); the ensemble's budgets go under the top-level `ensemble:`",
        );
    }
    let config_node = find(entries, "config");
    let mut settings = Settings::of_component(*d, name_pos, config_node.map_or(name_pos, Node::pos));
    let written = settings.overrides(cx, entries, COMPONENT_KEYS, name);
    if let Some(cn) = config_node {
        if let Some(own) = split_config(cx, cn, name, &mut settings, &written) {
            settings.config.value = own.value;
        }
    }
    let kind = workload(cx, entries, name, name_pos);
    if find(entries, "budgets").is_none() {
        cx.err(
            name_pos,
            format!("component `{name}` has no `budgets`"),
            "add `budgets:` with at least one metric, e.g. `training_peak: < 1 GB`",
        );
    }
    let (kind, kind_pos) = kind?;
    settings.settle_master(cx, written.master, name);
    settings.check_generation(cx, name);
    let mut out = vec![settings
        .clone()
        .into_component(name.to_string(), name_pos.line, kind, kind_pos)];
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
    let variants: Vec<Component> = ventries
        .iter()
        .filter_map(|entry| variant(cx, &out[0], &settings, entry))
        .collect();
    out.extend(variants);
    let reference = reference(cx, entries, ventries, name);
    for c in &mut out {
        if c.name != reference {
            c.reference = Some(reference.clone());
        }
    }
    Some(out)
}

/// The workload's own keys of a component's or a variant's `config:`;
/// `batch_size` and `dtype` may also be written there (the original TFT
/// config lists them) and are settings, never workload keys, but only once
/// per component or variant. `None` when `config:` is not a mapping.
fn split_config(
    cx: &mut Ctx,
    cn: &Node,
    name: &str,
    settings: &mut Settings,
    written: &Written,
) -> Option<config::Node> {
    let centries = cx.map(cn, &format!("config of `{name}`"))?;
    let mut kept = Vec::new();
    for (key, kpos, value) in centries {
        let first = match key.as_str() {
            "batch_size" => written.batch_size,
            "dtype" => written.dtype,
            _ => {
                kept.push((key.clone(), *kpos, to_config(value)));
                continue;
            }
        };
        match first {
            Some(p) => cx.err(
                *kpos,
                format!("`{key}` of `{name}` is given twice (also at line {})", p.line),
                "keep one: either beside `config:` or in it",
            ),
            None => {
                settings.defaults.write(cx, key, value);
            }
        }
    }
    let own = config::Node {
        value: config::Value::Map(kept),
        pos: cn.pos(),
    };
    if let Some((pos, path)) = own.past_depth_limit() {
        cx.err(
            pos,
            format!(
                "config of `{name}` nests deeper than {} levels at `{}`",
                config::MAX_CONFIG_DEPTH,
                shortened(&path)
            ),
            format!(
                "gate writes a config into its reports and reads it back to {} levels: flatten it (`a_b: 1` for `a: {{ b: 1 }}`)",
                config::MAX_CONFIG_DEPTH
            ),
        );
        return None;
    }
    Some(own)
}

/// A key path cut to its first and last parts when long (a deep one is
/// mostly the same key again).
fn shortened(path: &str) -> String {
    const KEEP: usize = 60;
    if path.chars().count() <= 2 * KEEP {
        return path.to_string();
    }
    let head: String = path.chars().take(KEEP).collect();
    let tail: String = path
        .chars()
        .rev()
        .take(KEEP)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    format!("{head}…{tail}")
}

/// Which workload builds it is checked against the binary's registry when
/// the runner resolves the spec: a harness knows kinds this module cannot.
fn workload(cx: &mut Ctx, entries: &[(String, Pos, Node)], name: &str, name_pos: Pos) -> Option<(String, Pos)> {
    match find(entries, "workload") {
        None => {
            cx.err(
                name_pos,
                format!("component `{name}` has no `workload`"),
                "say which model to build, e.g. `workload: mlp` (or a kind your harness registers)",
            );
            None
        }
        Some(n) => cx.text(n, "workload").map(|k| (k.to_string(), n.pos())),
    }
}

/// The variant `entry` of `base`: `inherited` (its component's settings) with its own keys over them.
fn variant(cx: &mut Ctx, base: &Component, inherited: &Settings, entry: &(String, Pos, Node)) -> Option<Component> {
    let (vname, vpos, vnode) = entry;
    let name = &base.name;
    let full = crate::name::variant_name(name, vname);
    if !crate::name::is_plain(vname) {
        cx.err(
            *vpos,
            format!("variant name `{vname}` of `{name}` is not a plain name"),
            "use letters, digits, `_` and `-` only",
        );
        return None;
    }
    let ventries = cx.map(vnode, &format!("variant `{full}`"))?;
    cx.known_keys(ventries, VARIANT_KEYS, &format!("variant `{full}`"));
    let mut v = Settings {
        budgets: Vec::new(),
        ..inherited.clone()
    };
    let written = v.overrides(cx, ventries, VARIANT_KEYS, &full);
    if let Some(cn) = find(ventries, "config") {
        if let Some(own) = split_config(cx, cn, &full, &mut v, &written) {
            v.config = v.config.overlaid(&own);
        }
    }
    v.settle_master(cx, written.master, &full);
    v.check_generation(cx, &full);
    Some(v.into_component(full, vpos.line, base.kind.clone(), base.kind_pos))
}

/// What ratios compare against: `reference:` (a variant), or the component itself.
fn reference(cx: &mut Ctx, entries: &[(String, Pos, Node)], ventries: &[(String, Pos, Node)], name: &str) -> String {
    let Some(rnode) = find(entries, "reference") else {
        return name.to_string();
    };
    match cx.text(rnode, "reference") {
        Some(r) if r == name => name.to_string(),
        Some(r) if ventries.iter().any(|(k, _, _)| k == r) => crate::name::variant_name(name, r),
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
    }
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
