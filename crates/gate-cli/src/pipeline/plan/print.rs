//! What a plan prints, and plan.json.

use std::collections::BTreeMap;
use std::path::Path;

use crate::errors::CliError;
use gate_contract::plan::{Candidate, Outcome, Plan, Setting};
use gate_spec::budget::Component;
use gate_spec::hint::Problem;
use gate_spec::metric::{format_value, Metric, Unit};

pub(super) fn names(ms: &[Metric]) -> String {
    ms.iter().map(|m| m.name()).collect::<Vec<_>>().join(", ")
}

pub(super) fn shown_values(values: &BTreeMap<Metric, f64>, ms: &[Metric]) -> String {
    ms.iter()
        .filter_map(|m| Some(format!("{} {}", m.name(), format_value(m.unit(), *values.get(m)?))))
        .collect::<Vec<_>>()
        .join(", ")
}

pub(super) fn yaml_of(settings: &[Setting]) -> String {
    settings.iter().map(Setting::yaml).collect::<Vec<_>>().join(", ")
}

pub(super) fn show(metric: Metric, v: f64) -> String {
    match metric.unit() {
        Unit::Bytes => format_value(Unit::Bytes, v),
        _ if metric.ratio_of().is_some() => format!("{v:.2}x"),
        unit => format_value(unit, v),
    }
}

/// `spec` is the spec file as the command named it: the line that writes the
/// chosen configuration names it unless it is the default; `None` when the
/// command writes it itself (`--apply`).
pub(crate) fn print_plan(c: &Component, plan: &Plan, spec: Option<&str>) {
    if plan.start_passes() {
        println!("{}: passes every budget as it is; nothing to plan", c.name);
        return;
    }
    println!(
        "{}: fails {} as the spec has it ({})",
        c.name,
        names(&plan.start_fails),
        shown_values(&plan.start, &plan.start_fails)
    );
    if let Some(floor) = &plan.recompute_floor {
        let blocks: Vec<String> = floor
            .forward_ms
            .iter()
            .map(|(b, ms)| format!("{b} {}", format_value(Unit::Ms, *ms)))
            .collect();
        println!(
            "  forward time of its checkpointable blocks: {} of a {} step (a recompute runs it again: {:.2}x the step before any chunk's own cost)",
            blocks.join(", "),
            format_value(Unit::Ms, floor.step_ms),
            floor.factor()
        );
    }
    let measured: Vec<&Candidate> = plan.candidates.iter().filter(|k| k.outcome.is_measured()).collect();
    let predicted_pass = plan
        .candidates
        .iter()
        .filter(|k| k.outcome == Outcome::PredictedPass)
        .count();
    println!(
        "\n{}: {} configurations predicted from {} probes, {} predicted to pass, {} measured ({} profiles in all)",
        c.name,
        plan.candidates.len(),
        plan.probes.len(),
        predicted_pass + measured.iter().filter(|k| k.outcome != Outcome::PredictedPass).count(),
        measured.len(),
        plan.profiles
    );
    for k in &measured {
        println!("\n  {}: {}", yaml_of(&k.settings), outcome_words(k));
        for (metric, f) in &k.figures {
            let measured = f.measured.map_or("—".into(), |v| show(*metric, v));
            let error = f
                .error()
                .map_or(String::new(), |e| format!("  error {:+.1} %", e * 100.0));
            println!(
                "    {:<16} predicted {:>12}  measured {:>12}{error}",
                metric.name(),
                show(*metric, f.predicted),
                measured
            );
        }
    }
    if let Some(i) = plan.chosen {
        let k = &plan.candidates[i];
        println!(
            "\nthe cheapest configuration that passes (least step-time cost, then least change), for component `{}`:",
            c.name
        );
        for s in &k.settings {
            println!("  + {}", s.yaml());
        }
        // The ranking puts levers that keep the loss first: a choice that
        // changes it says so in words, not only through its figure.
        if let Some(loss) = k.figures.get(&Metric::LossRatio).filter(|_| plan.changes_loss(k)) {
            let ratio = loss.measured.unwrap_or(loss.predicted);
            println!(
                "  no configuration found that keeps the loss passes: this one trains differently (loss ratio {ratio:.2}{})",
                if loss.measured.is_some() { ", measured" } else { ", predicted" }
            );
        }
        if let Some(spec) = spec {
            println!("  (`{}` writes it)", plan.apply_command(spec));
        }
    }
}

pub(super) fn outcome_words(k: &Candidate) -> String {
    match k.outcome {
        Outcome::Pass => "measured: passes every budget".into(),
        Outcome::Fail => format!("measured: fails {}", names(&k.fails)),
        Outcome::Error => format!("its profile failed: {}", k.error.clone().unwrap_or_default()),
        Outcome::PredictedPass => "predicted to pass (not measured)".into(),
        Outcome::PredictedFail => "predicted to fail".into(),
    }
}

pub(crate) fn write_plan(out: &Path, plan: &Plan) -> Result<(), CliError> {
    write_json(out, "plan.json", plan)
}

/// Writes `value` as `out/name` (the folder made first), and says so.
pub(in crate::pipeline) fn write_json(out: &Path, name: &str, value: &impl serde::Serialize) -> Result<(), CliError> {
    let path = out.join(name);
    let fail = |e: String| {
        CliError::Infrastructure(
            Problem::new(format!("cannot write {}: {e}", path.display()))
                .with_hint("pass a writable folder with --out"),
        )
    };
    std::fs::create_dir_all(out).map_err(|e| fail(e.to_string()))?;
    let json = serde_json::to_string_pretty(value).map_err(|e| fail(e.to_string()))?;
    std::fs::write(&path, json).map_err(|e| fail(e.to_string()))?;
    eprintln!("wrote {}", path.display());
    Ok(())
}
