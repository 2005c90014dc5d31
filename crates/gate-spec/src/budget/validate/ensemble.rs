//! `ensemble:`: components that share one card, their summed metric and
//! the budgets on the total and on the headroom left.

use std::collections::BTreeSet;

use super::context::{find, Ctx};
use super::hints::{suggest, ENSEMBLE_BUDGET_KEYS, ENSEMBLE_KEYS};
use crate::budget::tree::Node;
use crate::budget::{Ensemble, EnsembleBudget, EnsembleMetric};
use crate::config::Pos;
use crate::metric::{Metric, Unit};

/// The ensemble `node`; `top` (the spec's entries) declares the components it may name.
pub(super) fn validate_ensemble(cx: &mut Ctx, node: &Node, top: &[(String, Pos, Node)]) -> Option<Ensemble> {
    let entries = cx.map(node, "ensemble")?;
    cx.known_keys(entries, ENSEMBLE_KEYS, "ensemble");
    let declared: BTreeSet<&str> = match find(top, "components") {
        Some(Node::Map { entries, .. }) => entries.iter().map(|(k, _, _)| k.as_str()).collect(),
        _ => BTreeSet::new(),
    };
    let members = members(cx, node, entries, &declared);
    // Where `metric:` is written (the ensemble's own position when it is not).
    let metric_pos = find(entries, "metric").map_or(node.pos(), |n| n.pos());
    let metric = metric(cx, entries);
    // A card's processes times their reserve must stay a byte count.
    const MAX_PROCESSES: u64 = 65_536;
    let processes = match find(entries, "processes") {
        None => Some(1),
        Some(n) => cx.positive_int_at_most(
            n,
            "ensemble.processes",
            MAX_PROCESSES,
            "the processes that share one card, each with its reserve",
        ),
    };
    let budgets = budgets(cx, node, entries);
    Some(Ensemble {
        members,
        metric: metric?,
        processes: processes?,
        budgets,
        line: node.pos().line,
        metric_pos,
    })
}

/// `members:`, each a component of this spec, listed once.
fn members(cx: &mut Ctx, node: &Node, entries: &[(String, Pos, Node)], declared: &BTreeSet<&str>) -> Vec<String> {
    let mut members: Vec<String> = Vec::new();
    // What is listed so far, in a set: a long list stays linear.
    let mut listed: BTreeSet<&str> = BTreeSet::new();
    let items = match find(entries, "members") {
        Some(Node::Seq { items, pos }) => {
            if items.is_empty() {
                cx.err(*pos, "`ensemble.members` is empty", "list at least one component");
            }
            items
        }
        None => {
            cx.err(
                node.pos(),
                "missing `ensemble.members`",
                "list the components that share the card, e.g. `members: [tft, dqn]`",
            );
            return members;
        }
        Some(other) => {
            cx.wrong_kind(
                other,
                "`ensemble.members`",
                "a list",
                "write `members: [tft, dqn, ppo]`",
            );
            return members;
        }
    };
    for item in items {
        let Some(m) = cx.text(item, "an ensemble member") else {
            continue;
        };
        if !declared.contains(m) {
            let known: Vec<&str> = declared.iter().copied().collect();
            let hint = suggest(m, &known, "components", "members must be components of this spec");
            cx.err(item.pos(), format!("ensemble member `{m}` is not a component"), hint);
        } else if !listed.insert(m) {
            cx.err(
                item.pos(),
                format!("ensemble member `{m}` is listed twice"),
                "list each component once",
            );
        } else {
            members.push(m.to_string());
        }
    }
    members
}

/// `metric:`, the byte metric summed over the members (`training_peak` when not written).
fn metric(cx: &mut Ctx, entries: &[(String, Pos, Node)]) -> Option<Metric> {
    let Some(n) = find(entries, "metric") else {
        return Some(Metric::TrainingPeak);
    };
    let t = cx.text(n, "ensemble.metric")?;
    match Metric::parse(t) {
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
    }
}

/// `budgets:` on the `total` and the `headroom`.
fn budgets(cx: &mut Ctx, node: &Node, entries: &[(String, Pos, Node)]) -> Vec<EnsembleBudget> {
    let mut budgets = Vec::new();
    let hint = "add `budgets: { total: < 2.5 GB, headroom: \"> 1 GB\" }`";
    let found = cx.required(entries, "budgets", node.pos(), "ensemble.budgets", hint);
    let Some(bentries) = found.and_then(|bn| cx.map(bn, "ensemble.budgets")) else {
        return budgets;
    };
    cx.known_keys(bentries, ENSEMBLE_BUDGET_KEYS, "ensemble.budgets");
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
    budgets
}
