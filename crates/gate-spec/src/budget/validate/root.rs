//! The whole spec: its top-level keys, each part validated in turn, and
//! every problem found, sorted by position.

use std::collections::HashSet;
use std::path::Path;

use super::component::validate_component;
use super::context::{find, Ctx};
use super::device::validate_device;
use super::ensemble::validate_ensemble;
use super::harness::validate_harness;
use super::hints::TOP_KEYS;
use super::overrides::{defaults, Defaults};
use crate::budget::tree::{Node, YamlIssue};
use crate::budget::{is_anchor_name, measurable, AnchorName, Component, Diagnostics, Spec, WorkloadCheck};
use crate::config::Pos;

/// The most problems a validation lists: the rest are one line.
const MAX_LISTED: usize = 200;

/// Validates a parsed tree. `yaml_issues` are problems the YAML reader
/// found, and `yaml_dropped` how many more it counted and did not keep.
pub(crate) fn validate(
    path: &Path,
    root: &Node,
    yaml_issues: Vec<YamlIssue>,
    yaml_dropped: usize,
    check: Option<&dyn WorkloadCheck>,
) -> Result<Spec, Diagnostics> {
    let mut cx = Ctx::new(path.display().to_string());
    cx.unkept = yaml_dropped;
    for i in yaml_issues {
        cx.err(i.pos, i.message, i.hint);
    }
    let spec = validate_root(&mut cx, path, root, check);
    spec.iter()
        .flat_map(measurable::unmeasurable)
        .for_each(|(p, m, h)| cx.err(p, m, h));
    let unkept = cx.unkept;
    let mut diags = cx.diags;
    diags.sort_by_key(|d| d.pos);
    // The first problems by position, and how many more.
    let unlisted = diags.len().saturating_sub(MAX_LISTED) + unkept;
    diags.truncate(MAX_LISTED);
    match spec {
        Some(spec) if diags.is_empty() => Ok(spec),
        _ => Err(Diagnostics(diags, unlisted)),
    }
}

fn validate_root(cx: &mut Ctx, path: &Path, root: &Node, check: Option<&dyn WorkloadCheck>) -> Option<Spec> {
    if let Node::Null { .. } = root {
        cx.err(
            Pos { line: 1, col: 1 },
            "the spec is empty",
            "start with `version: 1`, then `device:` and `components:` (see docs/budgets.md, the budgets.yaml reference)",
        );
        return None;
    }
    let top = cx.map(root, "the spec")?;
    cx.known_keys(top, TOP_KEYS, "the spec");
    let version = version(cx, root, top);
    let device = cx
        .required(
            top,
            "device",
            root.pos(),
            "device",
            "describe the card that is gated: `device: { name: RTX 3050 Ti, capacity: 4 GiB, reserve: 300 MiB }`",
        )
        .and_then(|n| validate_device(cx, n));
    let defaults = defaults(cx, top);
    let components = components(cx, root, top, &defaults);
    let ensemble = find(top, "ensemble").and_then(|n| validate_ensemble(cx, n, top));
    let anchor = anchor(cx, top);
    let harness = match find(top, "harness") {
        None => Some(None),
        Some(n) => validate_harness(cx, n).map(Some),
    };
    if let Some(check) = check {
        let said: Vec<(Pos, String)> = cx.diags.iter().map(|d| (d.pos, d.message.clone())).collect();
        for (pos, message, hint) in check_workloads(&components, check, find(top, "harness").is_some(), said) {
            cx.err(pos, message, hint);
        }
    }
    Some(Spec {
        path: path.to_path_buf(),
        version: version?,
        device: device?,
        default_tolerance: defaults.tolerance,
        anchor: anchor?,
        components,
        ensemble,
        harness: harness?,
    })
}

/// `anchor: v1.4.0`, checked against the `drift:` budgets it serves: a
/// drift with nothing to measure it since, or an anchor no drift reads, is
/// a spec that does not do what its author meant. `None`: a problem was
/// reported.
fn anchor(cx: &mut Ctx, top: &[(String, Pos, Node)]) -> Option<Option<AnchorName>> {
    let written = top.iter().find(|(k, _, _)| k == "anchor");
    let anchor = match written {
        None => None,
        Some((_, kpos, node)) => {
            let name = cx.text(node, "anchor")?.trim();
            if !is_anchor_name(name) {
                cx.err(
                    node.pos(),
                    format!("`anchor` `{name}` is not a release tag or a baseline's name"),
                    "write a release tag such as `v1.4.0`, or a name of letters, digits, `.`, `_`, `-` and `+` \
                     (at most 100, not starting with `.`)",
                );
                return None;
            }
            if cx.drift_at.is_none() {
                cx.err(
                    *kpos,
                    format!("`anchor` `{name}` judges nothing: no component has a `drift:`"),
                    "add `drift: 10%` under `defaults:` (or a component): the most a size may grow since the anchor",
                );
                return None;
            }
            let p = node.pos();
            Some(AnchorName {
                name: name.to_string(),
                line: p.line,
                col: p.col,
            })
        }
    };
    if let (None, None, Some(at)) = (written, &anchor, cx.drift_at) {
        cx.err(
            at,
            "`drift` needs an anchor: the spec has no `anchor:`",
            "add `anchor: v1.4.0` at the top level: a release tag, or a baseline stored with \
             `gate baseline publish --anchor NAME`; drift is the growth since that report",
        );
        return None;
    }
    Some(anchor)
}

/// `version: 1`, the only one this gate reads.
fn version(cx: &mut Ctx, root: &Node, top: &[(String, Pos, Node)]) -> Option<u32> {
    let n = cx.required(
        top,
        "version",
        root.pos(),
        "version",
        "add `version: 1` at the top of the spec",
    )?;
    match cx.text(n, "version")? {
        "1" => Some(1),
        other => {
            cx.err(
                n.pos(),
                format!("unsupported spec version `{other}`"),
                "this gate reads `version: 1`",
            );
            None
        }
    }
}

/// Every component, each followed by its variants.
fn components(cx: &mut Ctx, root: &Node, top: &[(String, Pos, Node)], defaults: &Defaults) -> Vec<Component> {
    let mut components = Vec::new();
    let hint = "add `components:` with at least one model to gate";
    let Some(n) = cx.required(top, "components", root.pos(), "components", hint) else {
        return components;
    };
    let Some(entries) = cx.map(n, "components") else {
        return components;
    };
    if entries.is_empty() {
        cx.err(n.pos(), "`components` is empty", "add at least one component");
    }
    for (name, pos, node) in entries {
        if let Some(c) = validate_component(cx, name, *pos, node, defaults) {
            components.extend(c);
        }
    }
    components
}

/// Each component's workload through `check`: the problems not already
/// in `said` (position and message). A variant shares its component's
/// config: when the component's fails, the variant's would only repeat it.
pub(crate) fn check_workloads(
    components: &[Component],
    check: &dyn WorkloadCheck,
    has_harness: bool,
    said: Vec<(Pos, String)>,
) -> Vec<(Pos, String, String)> {
    // Sets, not scans of the lists so far: a spec of many broken components
    // stays linear (#28 item 12).
    let mut failed: HashSet<&str> = HashSet::new();
    let mut said: HashSet<(Pos, String)> = said.into_iter().collect();
    let mut out = Vec::new();
    for c in components {
        let base = crate::name::base_of(&c.name);
        if crate::name::is_variant(&c.name) && failed.contains(base) {
            continue;
        }
        let problems = check.check(c, has_harness);
        if !problems.is_empty() && !crate::name::is_variant(&c.name) {
            failed.insert(base);
        }
        for (pos, message, hint) in problems {
            if said.insert((pos, message.clone())) {
                out.push((pos, message, hint));
            }
        }
    }
    out
}
