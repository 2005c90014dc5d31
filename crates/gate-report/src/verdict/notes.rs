//! The run's notes: facts about how figures were measured (not from the
//! CUDA pool, ratios stepped with the emulation lifted, params with no
//! closed form, spans not attributed). Said, never warned: a note never
//! fails `--strict`.

use std::collections::BTreeMap;

use gate_spec::budget::Spec;
use gate_spec::metric::Metric;

use super::ratios::{loss_from_ratio_steps, ratio_budgets};
use gate_contract::report::*;

/// Every note of the run, in the order the summary shows them.
pub(super) fn notes(spec: &Spec, testbed: &Testbed, components: &BTreeMap<String, ComponentReport>) -> Vec<Note> {
    let mut notes = memory_notes(testbed, components);
    notes.extend(ratio_notes(spec, components));
    notes.extend(params_notes(spec, components));
    notes.extend(attribution_notes(spec, components));
    notes.extend(capacity_notes(spec, components));
    notes
}

/// Components whose `kv_capacity_tokens` is the card's own answer, the
/// arithmetic's figure having not fitted beside a decode on the emulated
/// card (where no answer was found, a warning says so instead).
fn capacity_notes(spec: &Spec, components: &BTreeMap<String, ComponentReport>) -> Vec<Note> {
    spec.components
        .iter()
        .filter_map(|c| {
            let check = components.get(&c.name)?.kv_capacity_check.as_ref()?;
            let held = check.card_tokens.filter(|_| !check.fits)?;
            let text = format!(
                "{}: kv_capacity_tokens is the card's own answer, {held} tokens: one decode beside the \
                 arithmetic's {} did not fit on the emulated card ({:+.1} %: what the allocator needs beside the \
                 cache, which the arithmetic does not count)",
                c.name,
                check.tokens,
                (held / check.tokens - 1.0) * 100.0
            );
            Some(Note::new(vec![c.name.clone()], NoteKind::CapacityFromCard, text))
        })
        .collect()
}

/// The components whose `params` is the bytes of what was built, with no
/// closed form to check it against (the workload gives no `param_count`).
fn params_notes(spec: &Spec, components: &BTreeMap<String, ComponentReport>) -> Vec<Note> {
    let unchecked: Vec<&str> = spec
        .components
        .iter()
        .filter(|c| {
            components
                .get(&c.name)
                .is_some_and(|r| r.error.is_none() && r.analytic_params_bytes == 0 && r.param_count > 0)
        })
        .map(|c| c.name.as_str())
        .collect();
    if unchecked.is_empty() {
        return Vec::new();
    }
    let text = format!(
        "params of {} is the bytes of what was built: the workload gives no closed-form `param_count` to check it against",
        unchecked.join(", ")
    );
    let names = unchecked.iter().map(|n| n.to_string()).collect();
    vec![Note::new(names, NoteKind::ParamsUnchecked, text)]
}

/// Components with no block of their own whose spans could not be
/// attributed (TRACE compiled out, another subscriber): said, with the
/// reason and its hint, instead of an empty table.
fn attribution_notes(spec: &Spec, components: &BTreeMap<String, ComponentReport>) -> Vec<Note> {
    spec.components
        .iter()
        .filter_map(|c| {
            let r = components.get(&c.name)?;
            let why = r.spans_unavailable.as_deref()?;
            let scoped = r.blocks.iter().any(|b| b.name != UNATTRIBUTED);
            (!scoped).then(|| {
                let text = format!("{}: no block attributed from its `tracing` spans: {why}", c.name);
                Note::new(vec![c.name.clone()], NoteKind::SpansUnattributed, text)
            })
        })
        .collect()
}

/// The run's note on byte figures that are not exact: the components whose
/// tensors were not in the CUDA pool, measured by NVML per process instead
/// (`MemorySource::NvmlProcess`). One line for the run.
fn memory_notes(testbed: &Testbed, components: &BTreeMap<String, ComponentReport>) -> Vec<Note> {
    let coarse: Vec<String> = components
        .iter()
        .filter(|(_, r)| r.memory_source.is_some_and(|s| !s.is_exact()))
        .map(|(name, _)| name.clone())
        .collect();
    if coarse.is_empty() {
        return Vec::new();
    }
    // The harness's own framework and version (a report from before that
    // field: the first framework at its legacy version).
    let f = testbed.framework_id();
    let framework = if f.name.is_empty() {
        "this framework".to_string()
    } else {
        format!("{} {}", f.name, f.version)
    };
    let quoted: Vec<String> = coarse.iter().map(|n| format!("`{n}`")).collect();
    let text = format!(
        "{}: tensor bytes not from the CUDA pool on {framework}: figures are NVML per process (what it holds beyond \
         its CUDA context as first made, library workspaces and loaded kernels included; peaks sampled at scope \
         boundaries)",
        quoted.join(", ")
    );
    vec![Note::new(coarse, NoteKind::NotFromPool, text)]
}

/// The run's notes on how ratios were measured: with the emulation lifted,
/// and a loss ratio taken from the ratio steps. One line per variant.
fn ratio_notes(spec: &Spec, components: &BTreeMap<String, ComponentReport>) -> Vec<Note> {
    let mut notes = Vec::new();
    for c in &spec.components {
        let Some(report) = components.get(&c.name) else {
            continue;
        };
        let Some(reference) = report.reference.as_deref() else {
            continue;
        };
        let ratios: Vec<&str> = ratio_budgets(c).map(Metric::name).collect();
        if ratios.is_empty() {
            continue;
        }
        if let Some(freed) = report.ratio_lifted_bytes {
            let text = format!(
                "{}: {} stepped `{}` and `{reference}` with the {} card's emulation lifted ({} freed): \
                 they measure time and loss only; every memory figure is from the emulated card",
                c.name,
                ratios.join(" and "),
                c.name,
                gate_spec::units::Bytes(spec.device.capacity.0),
                gate_spec::units::Bytes(freed),
            );
            notes.push(Note::new(vec![c.name.clone()], NoteKind::RatioEmulationLifted, text));
        }
        if ratios.contains(&"loss_ratio") && loss_from_ratio_steps(components, report) {
            let why = match components.get(reference).and_then(|r| r.error.as_ref()) {
                Some(e) => format!(
                    "`{reference}`'s own profile stopped in phase {}",
                    e.phase.as_deref().unwrap_or("unknown")
                ),
                None => format!("`{reference}`'s own profile has no loss"),
            };
            let text = format!(
                "{}: loss_ratio compares both losses from the ratio steps (each after as many seeded steps as its profile), because {why}",
                c.name
            );
            notes.push(Note::new(vec![c.name.clone()], NoteKind::LossFromRatioSteps, text));
        }
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{pair, variants::*};
    use super::super::judging::summarize;
    use super::super::{decide, Reserve};
    use super::*;
    use crate::baseline::Outcome;
    use gate_spec::metric::Metric;
    use std::path::Path;

    #[test]
    fn params_without_a_closed_form_are_noted_as_the_built_bytes_never_warned() {
        let mut c = pair::reports(&[(Metric::Params, 400.0)], &[(Metric::Params, 100.0)]);
        c.get_mut("a").unwrap().param_count = 100;
        let v = decide(
            &pair::spec(),
            &c,
            &pair::no_baseline(),
            &Testbed::default(),
            pair::RESERVE,
            true,
        );
        assert!(v.summary.notes.contains(&Note::new(
            vec!["a".into()],
            NoteKind::ParamsUnchecked,
            "params of a is the bytes of what was built: the workload gives no closed-form `param_count` to check it against"
        )));
        assert!(!v.summary.warnings.iter().any(|w| w.kind == WarningKind::ParamsDisagree));
    }

    #[test]
    fn figures_not_from_the_cuda_pool_are_noted_with_the_framework_never_silent() {
        let spec = gate_spec::budget::parse(Path::new("budgets.yaml"), SPEC).unwrap();
        let mut reports: BTreeMap<String, ComponentReport> = spec
            .components
            .iter()
            .map(|c| (c.name.clone(), report(c, 0.5, 10.0)))
            .collect();
        // A report of before `framework`: its legacy version names the framework.
        let testbed = Testbed {
            legacy_version: "0.9.2".into(),
            ..Testbed::default()
        };
        let reserve = Reserve {
            bytes: 0,
            measured: false,
        };
        let none = Outcome::Missing {
            reason: "--baseline none".into(),
        };
        // The pool (or the allocator): exact, nothing to say.
        let v = decide(&spec, &reports, &none, &testbed, reserve, false);
        assert_eq!(v.summary.notes, Vec::<Note>::new());

        for name in ["t", "t@half"] {
            reports.get_mut(name).unwrap().memory_source = Some(gate_probe::MemorySource::NvmlProcess);
        }
        let v = decide(&spec, &reports, &none, &testbed, reserve, false);
        assert_eq!(
            v.summary.notes,
            [Note::new(
                vec!["t".into(), "t@half".into()],
                NoteKind::NotFromPool,
                format!(
                    "`t`, `t@half`: tensor bytes not from the CUDA pool on {} 0.9.2: figures are NVML per process \
                     (what it holds beyond its CUDA context as first made, library workspaces and loaded kernels \
                     included; peaks sampled at scope boundaries)",
                    gate_contract::protocol::FIRST_FRAMEWORK
                )
            )]
        );
        // A fact of the run, not a warning: the figures are judged as measured.
        assert!(
            v.summary.warnings.iter().all(|w| !w.text.contains("CUDA pool")),
            "{:?}",
            v.summary.warnings
        );
        // report.json carries it for those components only (an additive field).
        let json = serde_json::to_value(&reports).unwrap();
        assert_eq!(json["t"]["memory_source"], "nvml_process");
        assert!(json["t@plain"].get("memory_source").is_none(), "{}", json["t@plain"]);
    }

    #[test]
    fn ratios_stepped_with_the_emulation_lifted_are_measured_and_noted_never_warned() {
        let mut spec = gate_spec::budget::parse(Path::new("budgets.yaml"), SPEC).unwrap();
        spec.components.retain(|c| c.name != "t@half");
        let reports = emulated(&spec);
        let reserve = Reserve {
            bytes: 0,
            measured: false,
        };
        let found = Outcome::Found {
            report: Box::new(Report {
                schema: 1,
                gate_version: "0".into(),
                commit: None,
                spec: "budgets.yaml".into(),
                testbed: Testbed::default(),
                components: BTreeMap::new(),
                ensemble: None,
                results: vec![],
                summary: summarize(&[], vec![], vec![], false),
                baseline: None,
                wall_seconds: 0.0,
                plans: Default::default(),
            }),
            source: "test".into(),
        };
        let v = decide(&spec, &reports, &found, &Testbed::default(), reserve, true);
        let got: Vec<(&str, Status, Option<f64>)> = v
            .results
            .iter()
            .map(|r| (r.metric.as_str(), r.status, r.measured))
            .collect();
        assert_eq!(
            got,
            [
                ("loss_ratio", Status::Pass, Some(0.5 / 0.49)),
                ("step_time_ratio", Status::Pass, Some(1.2))
            ]
        );
        let kinds: Vec<(Vec<String>, NoteKind)> =
            v.summary.notes.iter().map(|n| (n.components.clone(), n.kind)).collect();
        assert_eq!(
            kinds,
            [
                (vec!["t".to_string()], NoteKind::RatioEmulationLifted),
                (vec!["t".to_string()], NoteKind::LossFromRatioSteps)
            ]
        );
        assert_eq!(
            v.summary.notes.iter().map(|n| n.text.as_str()).collect::<Vec<_>>(),
            [
                "t: loss_ratio and step_time_ratio stepped `t` and `t@plain` with the 0.9766 KiB card's emulation \
                 lifted (1024.0 MiB freed): they measure time and loss only; every memory figure is from the \
                 emulated card",
                "t: loss_ratio compares both losses from the ratio steps (each after as many seeded steps as its \
                 profile), because `t@plain`'s own profile stopped in phase backward"
            ]
        );
        // Facts, not warnings: the release gate (`--strict`) passes.
        assert_eq!(v.summary.warnings, Vec::<String>::new());
        assert_eq!(v.summary.status, RunStatus::Pass);
    }
}
