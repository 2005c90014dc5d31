//! Comparing with the baseline beyond the figures: what changed in a
//! component's settings (so a comparison that is not made says why) and
//! which budgets this run's spec added, changed or dropped. Pure.

use gate_spec::budget::Spec;

use gate_contract::report::*;

/// What differs between the baseline's component and this run's, e.g.
/// `config changed: hidden_dim 256 → 300`, so a comparison that is not made
/// says why.
pub(super) fn what_changed(base: &ComponentReport, now: &ComponentReport) -> String {
    let mut parts = Vec::new();
    let mut field = |name: &str, old: String, new: String| {
        if old != new {
            parts.push(format!("{name} {old} → {new}"));
        }
    };
    field("workload", base.workload.clone(), now.workload.clone());
    field("dtype", base.dtype.clone(), now.dtype.clone());
    field("batch_size", base.batch_size.to_string(), now.batch_size.to_string());
    field("seed", base.seed.to_string(), now.seed.to_string());
    let master = |r: &ComponentReport| r.master_dtype.clone().unwrap_or_else(|| "none".into());
    field("master_dtype", master(base), master(now));
    let mut config = Vec::new();
    diff_json("", &base.config, &now.config, &mut config);
    const SHOWN: usize = 4;
    if !config.is_empty() {
        let more = config.len().saturating_sub(SHOWN);
        let mut text = format!("config changed: {}", config[..config.len().min(SHOWN)].join(", "));
        if more > 0 {
            text.push_str(&format!(" and {more} more"));
        }
        parts.push(text);
    }
    if parts.is_empty() {
        // The fingerprint also covers settings a report does not spell out.
        return "the component's settings changed".into();
    }
    parts.join("; ")
}

/// Leaf-by-leaf differences of two JSON values, as `path old → new`.
fn diff_json(path: &str, old: &serde_json::Value, new: &serde_json::Value, out: &mut Vec<String>) {
    use serde_json::Value;
    let join = |k: &str| {
        if path.is_empty() {
            k.to_string()
        } else {
            format!("{path}.{k}")
        }
    };
    match (old, new) {
        (Value::Object(a), Value::Object(b)) => {
            let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            for k in keys {
                let absent = Value::Null;
                diff_json(&join(k), a.get(k).unwrap_or(&absent), b.get(k).unwrap_or(&absent), out);
            }
        }
        (a, b) if a != b => {
            let show = |v: &Value| match v {
                Value::Null => "(unset)".to_string(),
                Value::String(s) => s.clone(),
                v => v.to_string(),
            };
            let name = if path.is_empty() { "config" } else { path };
            out.push(format!("{name} {} → {}", show(a), show(b)));
        }
        _ => {}
    }
}

/// Budgets added, changed or dropped against the baseline's spec. Marks each
/// changed row with the baseline's limit and returns each change, typed, with
/// its sentence.
pub(super) fn budget_changes(spec: &Spec, results: &mut [BudgetResult], baseline: &Report) -> Vec<BudgetChange> {
    let mut out = added_or_changed(results, baseline);
    out.extend(removed_or_unknown(spec, results, baseline));
    out
}

/// This run's budgets the baseline did not have (of a component it had),
/// or had with another limit (recorded on the row).
fn added_or_changed(results: &mut [BudgetResult], baseline: &Report) -> Vec<BudgetChange> {
    let mut out = Vec::new();
    let limit_text = |r: &BudgetResult, op: gate_spec::budget::Op, value: f64| r.limit_text(op, value);
    // Looked up by (component, metric), not searched: linear in budgets (#43 item 5).
    let mut old_of: std::collections::HashMap<(&str, &str), &BudgetResult> = std::collections::HashMap::new();
    for b in &baseline.results {
        old_of.entry((b.component.as_str(), b.metric.as_str())).or_insert(b);
    }
    for r in results.iter_mut() {
        let old = old_of.get(&(r.component.as_str(), r.metric.as_str())).copied();
        match old {
            None if r.component.is_ensemble() || baseline.components.contains_key(r.component.as_str()) => {
                let text = format!(
                    "{}.{}: budget {} added in this PR",
                    r.component,
                    r.metric,
                    limit_text(r, r.op, r.limit)
                );
                out.push(change(r, BudgetChangeKind::Added, None, Some((r.op, r.limit)), text));
            }
            None => {}
            // A limit in a unit this gate does not know (a newer gate's
            // baseline) is not compared with one in its own.
            Some(b) if b.unit == gate_spec::metric::Unit::Unknown => {}
            Some(b) if b.op != r.op || !same_limit(b.limit, r.limit) => {
                let text = format!(
                    "{}.{}: budget {} → {} in this PR",
                    r.component,
                    r.metric,
                    limit_text(r, b.op, b.limit),
                    limit_text(r, r.op, r.limit)
                );
                out.push(change(
                    r,
                    BudgetChangeKind::Changed,
                    Some((b.op, b.limit)),
                    Some((r.op, r.limit)),
                    text,
                ));
                r.baseline_op = Some(b.op);
                r.baseline_limit = Some(b.limit);
            }
            Some(_) => {}
        }
    }
    out
}

/// The baseline's budgets this run lacks because the spec dropped them,
/// and those of a newer gate this one cannot read.
fn removed_or_unknown(spec: &Spec, results: &[BudgetResult], baseline: &Report) -> Vec<BudgetChange> {
    let mut out = Vec::new();
    let now: std::collections::HashSet<(gate_contract::report::Subject, gate_contract::report::MetricId)> = results
        .iter()
        .map(|r| (r.component.clone(), r.metric.clone()))
        .collect();
    let components: std::collections::HashMap<&str, &gate_spec::budget::Component> =
        spec.components.iter().map(|c| (c.name.as_str(), c)).collect();
    for b in &baseline.results {
        let still = now.contains(&(b.component.clone(), b.metric.clone()));
        // A budget of a newer gate (a metric or a unit this one does not
        // know): shown as unknown, never called removed or compared (#54).
        let unknown = matches!(b.metric, gate_contract::report::MetricId::Unknown(_))
            || b.unit == gate_spec::metric::Unit::Unknown;
        if unknown {
            if !still {
                let text = format!(
                    "{}.{}: the baseline's budget is of a metric or unit this gate does not know \
                     (a newer gate's report): not compared",
                    b.component, b.metric
                );
                out.push(change(b, BudgetChangeKind::Unknown, None, None, text));
            }
            continue;
        }
        // A budget is dropped when the spec no longer has it; components
        // left out of this run (`--only`) are still in the spec.
        let has = |names: Vec<&str>| names.contains(&b.metric.as_str());
        let dropped = !still
            && if b.component.is_ensemble() {
                spec.ensemble
                    .as_ref()
                    .is_none_or(|e| !has(e.budgets.iter().map(|x| x.metric.name()).collect()))
            } else {
                components
                    .get(b.component.as_str())
                    .is_none_or(|c| !has(c.budgets.iter().map(|x| x.metric.name()).collect()))
            };
        if dropped {
            let text = format!(
                "{}.{}: budget {} removed in this PR",
                b.component,
                b.metric,
                b.limit_text(b.op, b.limit)
            );
            out.push(change(b, BudgetChangeKind::Removed, Some((b.op, b.limit)), None, text));
        }
    }
    out
}

/// One budget change of `row`'s budget, with its limits before and after.
fn change(
    row: &BudgetResult,
    kind: BudgetChangeKind,
    before: Option<(gate_spec::budget::Op, f64)>,
    after: Option<(gate_spec::budget::Op, f64)>,
    text: String,
) -> BudgetChange {
    let limit = |(op, value)| Limit { op, value };
    BudgetChange::new(
        BudgetChangeFact {
            component: row.component.clone(),
            metric: row.metric.clone(),
            unit: row.unit,
            change: kind,
            before: before.map(limit),
            after: after.map(limit),
        },
        text,
    )
}

fn same_limit(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs())
}

/// Records the baseline's retained bytes beside each block of every
/// component compared with it (a baseline of the same testbed, the
/// component's settings unchanged), matched by name; a block the baseline
/// lacked had 0. The renderers then name the block that grew. Pure.
pub fn compare_blocks(
    components: &mut std::collections::BTreeMap<String, ComponentReport>,
    outcome: &super::baseline::Outcome,
    testbed: &Testbed,
) {
    let Some(base) = outcome.report().filter(|b| testbed.comparable(&b.testbed)) else {
        return;
    };
    for (name, now) in components.iter_mut() {
        let Some(was) = base.components.get(name) else {
            continue;
        };
        // Settings that changed are compared too (the verdict names the
        // change), so the block that grew with a config change is named.
        if was.error.is_some() || now.error.is_some() || was.blocks.is_empty() {
            continue;
        }
        // By name through a map: a pairwise search was quadratic in a
        // component's blocks (#43 item 5). The first of a repeated name, as before.
        let mut by_name: std::collections::HashMap<&str, &BlockReport> = std::collections::HashMap::new();
        for o in &was.blocks {
            by_name.entry(o.name.as_str()).or_insert(o);
        }
        for b in &mut now.blocks {
            let old = by_name.get(b.name.as_str());
            b.baseline_retained_bytes = Some(old.map_or(0, |o| o.retained_bytes));
            b.baseline_peak_bytes = Some(old.map_or(0, |o| o.peak_bytes));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::baseline::Outcome;
    use crate::verdict::{decide, Reserve, Verdict};
    use gate_spec::metric::Metric;
    use std::collections::BTreeMap;
    use std::path::Path;

    const OLD: &str = "version: 1
device: { name: card, capacity: 1 GB }
components:
  f:
    workload: mlp
    budgets:
      params: < 300 MB
      activations: < 200 MB
      growth: < 1 MiB
";

    fn component(spec: &Spec, hidden: u64, params: f64) -> ComponentReport {
        let c = &spec.components[0];
        let mut r = crate::not_measured_report(c, "");
        r.error = None;
        r.config = serde_json::json!({ "hidden_dim": hidden, "input_dim": 8 });
        r.fingerprint = format!("fp-{hidden}");
        for (m, v) in [
            (Metric::Params, params),
            (Metric::Activations, 1e6),
            (Metric::Growth, 0.0),
        ] {
            r.metrics.insert(
                m,
                MetricValue {
                    value: v,
                    unit: m.unit(),
                },
            );
        }
        r
    }

    fn baseline(spec: &Spec, hidden: u64, params: f64) -> Outcome {
        let components = BTreeMap::from([("f".to_string(), component(spec, hidden, params))]);
        let none = Outcome::Missing { reason: "x".into() };
        let v = decide(
            spec,
            &components,
            &none,
            &Testbed::default(),
            Reserve {
                bytes: 0,
                measured: false,
            },
            false,
        );
        Outcome::Found {
            report: Box::new(Report {
                schema: 1,
                gate_version: "0".into(),
                commit: None,
                spec: "budgets.yaml".into(),
                testbed: Testbed::default(),
                components,
                ensemble: None,
                results: v.results,
                summary: v.summary,
                baseline: None,
                wall_seconds: 0.0,
                plans: Default::default(),
            }),
            source: "old.json".into(),
        }
    }

    fn run(spec: &Spec, base: &Outcome, hidden: u64, params: f64) -> Verdict {
        let components = BTreeMap::from([("f".to_string(), component(spec, hidden, params))]);
        decide(
            spec,
            &components,
            base,
            &Testbed::default(),
            Reserve {
                bytes: 0,
                measured: false,
            },
            false,
        )
    }

    #[test]
    fn a_config_change_is_compared_and_judged_with_the_change_named() {
        let spec = gate_spec::budget::parse(Path::new("budgets.yaml"), OLD).unwrap();
        let base = baseline(&spec, 256, 200e6);
        // +30 % with the config changed: a regression all the same, named.
        let v = run(&spec, &base, 300, 260e6);
        let p = &v.results[0];
        assert_eq!(p.status, Status::Regressed);
        assert_eq!((p.baseline, p.measured), (Some(200e6), Some(260e6)));
        assert_eq!(
            p.config_changed.as_deref(),
            Some("config changed: hidden_dim 256 → 300")
        );
        assert_eq!(
            p.reason.as_deref(),
            Some("grew more than 5% over the baseline (config changed: hidden_dim 256 → 300)")
        );
        assert_eq!(p.not_compared, None);
        assert_eq!(v.summary.not_compared, 0);
        assert_eq!(v.summary.regressed, 1);
        assert_eq!(v.summary.status, RunStatus::Fail);
        // A config change that shrinks the model passes, the change named.
        let v = run(&spec, &base, 300, 150e6);
        assert_eq!(v.results[0].status, Status::Pass);
        assert!(v.results[0].config_changed.is_some());
        // The same config regresses, with no change to name.
        let v = run(&spec, &base, 256, 260e6);
        assert_eq!(v.results[0].status, Status::Regressed);
        assert_eq!(v.results[0].config_changed, None);
    }

    #[test]
    fn settings_and_nested_config_differences_are_named() {
        let spec = gate_spec::budget::parse(Path::new("budgets.yaml"), OLD).unwrap();
        let mut a = component(&spec, 1, 0.0);
        let mut b = a.clone();
        b.batch_size = 64;
        b.dtype = "bf16".into();
        a.config = serde_json::json!({ "enc": { "layers": 2 }, "drop": "x" });
        b.config = serde_json::json!({ "enc": { "layers": 3 }, "extra": true });
        assert_eq!(
            what_changed(&a, &b),
            "dtype f32 → bf16; batch_size 32 → 64; config changed: drop x → (unset), enc.layers 2 → 3, extra (unset) → true"
        );
    }

    #[test]
    fn budgets_changed_added_or_dropped_in_the_pr_are_listed_and_marked() {
        let old = gate_spec::budget::parse(Path::new("budgets.yaml"), OLD).unwrap();
        let base = baseline(&old, 256, 200e6);
        let new = gate_spec::budget::parse(
            Path::new("budgets.yaml"),
            &OLD.replace("activations: < 200 MB", "activations: < 250 MB")
                .replace("      growth: < 1 MiB\n", "      gradients: < 1 GB\n"),
        )
        .unwrap();
        let v = run(&new, &base, 256, 200e6);
        let texts: Vec<&str> = v.summary.budget_changes.iter().map(|c| c.text.as_str()).collect();
        assert_eq!(
            texts,
            [
                "f.activations: budget < 200 MB → < 250 MB in this PR",
                "f.gradients: budget < 1 GB added in this PR",
                "f.growth: budget < 1 MiB removed in this PR",
            ]
        );
        // The same, typed: what, how, and the limits in base units.
        use gate_spec::budget::Op::Lt;
        let facts: Vec<_> = v
            .summary
            .budget_changes
            .iter()
            .map(|c| {
                let f = c.fact.as_ref().expect("typed");
                (
                    f.component.as_str(),
                    f.metric.as_str(),
                    f.change,
                    f.before.map(|l| (l.op, l.value)),
                    f.after.map(|l| (l.op, l.value)),
                )
            })
            .collect();
        assert_eq!(
            facts,
            [
                (
                    "f",
                    "activations",
                    BudgetChangeKind::Changed,
                    Some((Lt, 200e6)),
                    Some((Lt, 250e6))
                ),
                ("f", "gradients", BudgetChangeKind::Added, None, Some((Lt, 1e9))),
                (
                    "f",
                    "growth",
                    BudgetChangeKind::Removed,
                    Some((Lt, 1024.0 * 1024.0)),
                    None
                ),
            ]
        );
        // report.json carries both, and reads back to the same.
        let json = serde_json::to_value(&v.summary).unwrap();
        assert_eq!(json["budget_change_kinds"][0]["change"], "changed");
        assert_eq!(json["budget_change_kinds"][0]["before"]["op"], "<");
        assert_eq!(json["budget_change_kinds"][2].get("after"), None);
        let back: Summary = serde_json::from_value(json).unwrap();
        assert_eq!(back.budget_changes, v.summary.budget_changes);
        let act = &v.results[1];
        assert_eq!(
            (act.baseline_op, act.baseline_limit),
            (Some(gate_spec::budget::Op::Lt), Some(200e6))
        );
        assert!(!v.results[0].budget_changed());
    }

    #[test]
    fn limits_keep_the_unit_they_were_written_in() {
        let spec = gate_spec::budget::parse(Path::new("budgets.yaml"), OLD).unwrap();
        let v = run(&spec, &Outcome::Missing { reason: "x".into() }, 1, 1.0);
        let units: Vec<Option<gate_spec::units::SizeUnit>> = v.results.iter().map(|r| r.display_unit).collect();
        use gate_spec::units::SizeUnit::*;
        assert_eq!(units, [Some(MB), Some(MB), Some(MiB)]);
        assert_eq!(v.summary.warnings, ["no baseline (x): regressions are not checked"]);
    }
}

#[cfg(test)]
mod block_tests {
    use super::*;
    use crate::baseline::Outcome;

    fn comp(blocks: &[(&str, i64)]) -> ComponentReport {
        let mut c: ComponentReport = serde_json::from_value(serde_json::json!({
            "workload": "w", "dtype": "f32", "batch_size": 1, "seed": 0, "config": {}, "metrics": {},
            "param_count": 0, "analytic_params_bytes": 0, "batch_bytes": 0, "blocks": [],
            "step_times_ms": [], "losses": [], "fingerprint": "fp", "error": null
        }))
        .unwrap();
        c.blocks = blocks
            .iter()
            .map(|(n, b)| BlockReport {
                name: n.to_string(),
                retained_bytes: *b,
                peak_bytes: 0,
                calls: 1,
                share_percent: None,
                baseline_retained_bytes: None,
                baseline_peak_bytes: None,
                at_exit_bytes: None,
            })
            .collect();
        c
    }

    fn report(c: ComponentReport) -> Report {
        Report {
            schema: 1,
            gate_version: "0".into(),
            commit: None,
            spec: "s".into(),
            testbed: Testbed::default(),
            components: [("a".to_string(), c)].into(),
            ensemble: None,
            results: vec![],
            summary: serde_json::from_value(serde_json::json!({
                "status": "pass", "passed": 0, "failed": 0, "regressed": 0, "not_measured": 0,
                "warnings": [], "strict": false
            }))
            .unwrap(),
            baseline: None,
            wall_seconds: 0.0,
            plans: Default::default(),
        }
    }

    #[test]
    fn blocks_are_compared_by_name_and_a_new_block_had_nothing() {
        let base = Outcome::Found {
            report: Box::new(report(comp(&[("embed", 10), ("block2", 30)]))),
            source: "x".into(),
        };
        let mut now = report(comp(&[("block2", 45), ("embed", 10), ("head", 5)])).components;
        compare_blocks(&mut now, &base, &Testbed::default());
        let grown: Vec<(&str, Option<i64>)> = now["a"]
            .blocks
            .iter()
            .map(|b| (b.name.as_str(), b.growth_bytes()))
            .collect();
        assert_eq!(grown, [("block2", Some(15)), ("embed", Some(0)), ("head", Some(5))]);

        // Other settings (another fingerprint, a config change): compared
        // all the same, so the block that grew with it is named.
        let mut other = report(comp(&[("block2", 45)])).components;
        other.get_mut("a").unwrap().fingerprint = "fp2".into();
        compare_blocks(&mut other, &base, &Testbed::default());
        assert_eq!(other["a"].blocks[0].baseline_retained_bytes, Some(30));
    }
}
