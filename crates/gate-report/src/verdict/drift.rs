//! Baselines as teams govern them: a size's growth since the spec's pinned
//! `anchor:` judged against its `drift:` (each pull request's growth over
//! its baseline may stay within the tolerance while the figure creeps a
//! tolerance's worth at a time), and a tighter budget proposed where a
//! size fell well below its baseline.

use gate_spec::budget::{Budget, Component, Spec};
use gate_spec::metric::Unit;

use super::judging::regressed;
use crate::baseline::Outcome;
use gate_contract::report::*;

/// The anchor's report, when it can be compared with this run.
pub(super) struct Anchored<'a> {
    name: &'a str,
    report: &'a Report,
}

/// One component's figures at the anchor.
pub(super) struct AtAnchor<'a> {
    name: &'a str,
    commit: Option<&'a str>,
    component: &'a ComponentReport,
}

impl<'a> Anchored<'a> {
    pub(super) fn of(&self, component: &str) -> Option<AtAnchor<'a>> {
        let c = self.report.components.get(component)?;
        c.error.is_none().then_some(AtAnchor {
            name: self.name,
            commit: self.report.commit.as_deref(),
            component: c,
        })
    }
}

/// The spec's anchor as looked up, when its figures can be compared; else
/// the warning that says why no drift is judged. `None` too for a spec
/// with no anchor (nothing to say).
pub(super) fn anchor<'a>(
    spec: &'a Spec,
    outcome: Option<&'a Outcome>,
    testbed: &Testbed,
    warnings: &mut Vec<Warning>,
) -> Option<Anchored<'a>> {
    let name = spec.anchor.as_ref()?.name.as_str();
    let mut warn = |why: String| {
        warnings.push(Warning::run_wide(
            WarningKind::NoAnchor,
            format!("no drift judged: {why}"),
        ))
    };
    match outcome {
        None => {
            warn(format!("the anchor `{name}` was not looked up"));
            None
        }
        Some(Outcome::Missing { reason }) => {
            warn(format!("no anchor `{name}` ({reason})"));
            None
        }
        Some(Outcome::Found { report, .. }) if !testbed.comparable(&report.testbed) => {
            let b = &report.testbed;
            warn(format!(
                "the anchor `{name}` was measured on another testbed ({} on {}, fingerprint {}; this run: {} on {}, \
                 fingerprint {})",
                b.backend,
                b.device_name,
                b.fingerprint(),
                testbed.backend,
                testbed.device_name,
                testbed.fingerprint()
            ));
            None
        }
        Some(Outcome::Found { report, .. }) => Some(Anchored { name, report }),
    }
}

/// Judges `row` (a budget of `c`) on its growth since the anchor: a size
/// held to a ceiling, as the tolerance is, whose component has a `drift:`.
/// A row that passed and grew past the drift is `regressed`; one already
/// regressed over its baseline says the drift beside.
pub(super) fn judge(c: &Component, b: &Budget, row: &mut BudgetResult, at: Option<&AtAnchor<'_>>) {
    let (Some(max), Some(at), Some(v)) = (c.drift, at, row.measured) else {
        return;
    };
    if b.metric.unit() != Unit::Bytes || !b.limit.op.is_max() {
        return;
    }
    let Some(anchor_value) = at.component.value(b.metric) else {
        return;
    };
    let exceeded = regressed(v, anchor_value, max.0, true);
    let drift = Drift {
        anchor: at.name.to_string(),
        anchor_commit: at.commit.map(str::to_string),
        anchor_value,
        max_percent: max.0,
        exceeded,
    };
    if exceeded {
        let said = format!(
            "grew {} since anchor {} ({}), more than its {max} drift",
            percent_text(drift.percent(v)),
            at.name,
            row.limit_value_text(anchor_value)
        );
        match row.status {
            Status::Pass => {
                row.status = Status::Regressed;
                row.reason = Some(match row.reason.take() {
                    Some(r) => format!("{said}; {r}"),
                    None => said,
                });
            }
            Status::Regressed => {
                row.reason = Some(match row.reason.take() {
                    Some(r) => format!("{r}; {said}"),
                    None => said,
                })
            }
            _ => {}
        }
    }
    row.drift = Some(drift);
}

fn percent_text(p: Option<f64>) -> String {
    match p {
        Some(p) => format!("{p:+.1} %"),
        None => "from nothing".into(),
    }
}

/// A note for each size held to a ceiling that passed and fell more than
/// [`TIGHTEN_AFTER`] percent below its baseline, proposing the figure plus
/// its tolerance as the budget, where that is tighter than the budget.
/// Proposed, never decided: a note fails nothing.
pub(super) fn tighter_notes(spec: &Spec, results: &[BudgetResult]) -> Vec<Note> {
    let mut notes = Vec::new();
    for r in results {
        let (Some(v), Some(base)) = (r.measured, r.baseline) else {
            continue;
        };
        if r.status != Status::Pass || r.unit != Unit::Bytes || !r.op.is_max() || base <= 0.0 {
            continue;
        }
        // A changed setting explains the fall: it is not an improvement of the same model.
        if r.config_changed.is_some() || r.not_compared.is_some() {
            continue;
        }
        let fell = (base - v) / base * 100.0;
        if fell < TIGHTEN_AFTER {
            continue;
        }
        let Some(c) = spec.component(r.component.as_str()) else {
            continue;
        };
        let proposed = round_up(v * (1.0 + c.tolerance.0 / 100.0), r.display_unit);
        if proposed >= r.limit {
            continue;
        }
        let proposal = TighterBudget {
            component: r.component.clone(),
            metric: r.metric.clone(),
            unit: r.unit,
            measured: v,
            baseline: base,
            limit: Limit {
                op: r.op,
                value: r.limit,
            },
            proposed: Limit {
                op: r.op,
                value: proposed,
            },
        };
        let text = format!(
            "{}.{} fell {:.1} % below its baseline ({} → {}): its budget `{}` could be `{}` (the figure and its {} \
             tolerance), so the room is not spent unseen",
            r.component.as_str(),
            r.metric,
            fell,
            r.limit_value_text(base),
            r.limit_value_text(v),
            r.limit_text(r.op, r.limit),
            r.limit_text(r.op, proposed),
            c.tolerance
        );
        notes.push(Note::tighter(proposal, text));
    }
    notes
}

/// `bytes` rounded up to three significant digits of `unit` (MiB when the
/// limit was written without one), so the proposal reads as a budget would.
fn round_up(bytes: f64, unit: Option<gate_spec::units::SizeUnit>) -> f64 {
    let scale = unit.map_or(gate_spec::units::MIB, |u| u.scale()) as f64;
    let x = bytes / scale;
    if x <= 0.0 {
        return bytes;
    }
    let step = 10f64.powi(x.log10().floor() as i32 - 2);
    (x / step).ceil() * step * scale
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::path::Path;

    use super::super::fixtures::pair::{comp, no_baseline, RESERVE};
    use super::super::{conclude, decide, decide_anchored, Inputs};
    use super::*;
    use gate_spec::metric::Metric;

    const SPEC: &str = "version: 1
anchor: v1.4.0
device: { name: card, capacity: 1 GiB }
defaults: { tolerance: 5%, drift: 6% }
components:
  a:
    workload: mlp
    budgets:
      params: < 1 KiB
      training_peak: < 1 MiB
      step_time: < 10 ms
";

    fn spec() -> Spec {
        gate_spec::budget::parse(Path::new("budgets.yaml"), SPEC).unwrap()
    }

    fn run(params: f64, peak: f64) -> BTreeMap<String, ComponentReport> {
        BTreeMap::from([(
            "a".to_string(),
            comp(
                &[
                    (Metric::Params, params),
                    (Metric::TrainingPeak, peak),
                    (Metric::StepTime, 1.0),
                ],
                "x",
            ),
        )])
    }

    /// A stored report of a run (a baseline, or the anchor), at `commit`.
    fn stored(params: f64, peak: f64, commit: &str) -> Outcome {
        let spec = spec();
        let report = conclude(Inputs {
            spec: &spec,
            spec_path: "budgets.yaml".into(),
            commit: Some(commit.into()),
            gate_version: "0".into(),
            components: run(params, peak),
            baseline: &no_baseline(),
            anchor: None,
            testbed: Testbed::default(),
            reserve: RESERVE,
            strict: false,
            ack: AckInput::NotAsked,
            wall_seconds: 0.0,
            plans: BTreeMap::new(),
        });
        Outcome::Found {
            report: Box::new(report),
            source: format!("commit {commit}"),
        }
    }

    #[test]
    fn growth_within_the_tolerance_each_time_regresses_once_past_the_drift_since_the_anchor() {
        // The anchor measured 100 B; the last baseline 104 B (+4 %, within
        // 5 %); this run 108 B: +3.8 % over the baseline, +8 % since the anchor.
        let anchor = stored(100.0, 1000.0, "a0");
        let baseline = stored(104.0, 1000.0, "b1");
        let v = decide_anchored(
            &spec(),
            &run(108.0, 1000.0),
            &baseline,
            &anchor,
            &Testbed::default(),
            RESERVE,
            false,
        );
        let params = &v.results[0];
        assert_eq!(params.status, Status::Regressed);
        assert_eq!(
            params.drift,
            Some(Drift {
                anchor: "v1.4.0".into(),
                anchor_commit: Some("a0".into()),
                anchor_value: 100.0,
                max_percent: 6.0,
                exceeded: true,
            })
        );
        assert_eq!(
            params.reason.as_deref(),
            Some("grew +8.0 % since anchor v1.4.0 (0.097656 KiB), more than its 6% drift")
        );
        // Unchanged since the anchor: judged, recorded, passed.
        assert_eq!(v.results[1].status, Status::Pass);
        assert_eq!(v.results[1].drift.as_ref().map(|d| d.exceeded), Some(false));
        // Times are never held to a drift (as to a tolerance).
        assert_eq!(v.results[2].drift, None);
        assert_eq!(v.summary.regressed, 1);
        assert_eq!(v.summary.status, RunStatus::Fail);
        // Without the anchor, the same run passes: the tolerance alone lets it creep.
        let v = decide(
            &spec(),
            &run(108.0, 1000.0),
            &baseline,
            &Testbed::default(),
            RESERVE,
            false,
        );
        assert_eq!(v.results[0].status, Status::Pass);
        assert_eq!(v.summary.warnings[0].kind, WarningKind::NoAnchor);
        assert_eq!(
            v.summary.warnings[0].text,
            "no drift judged: the anchor `v1.4.0` was not looked up"
        );
    }

    #[test]
    fn an_anchor_not_found_or_from_another_testbed_is_a_warning_and_judges_nothing() {
        let missing = Outcome::Missing {
            reason: "the baseline store has no `anchors/v1.4.0.json`".into(),
        };
        let v = decide_anchored(
            &spec(),
            &run(108.0, 1000.0),
            &no_baseline(),
            &missing,
            &Testbed::default(),
            RESERVE,
            false,
        );
        assert!(v.results.iter().all(|r| r.drift.is_none() && r.status == Status::Pass));
        let texts: Vec<&str> = v.summary.warnings.iter().map(|w| w.text.as_str()).collect();
        assert!(
            texts.contains(&"no drift judged: no anchor `v1.4.0` (the baseline store has no `anchors/v1.4.0.json`)"),
            "{texts:?}"
        );
        let elsewhere = Testbed {
            backend: "cuda".into(),
            ..Testbed::default()
        };
        let v = decide_anchored(
            &spec(),
            &run(108.0, 1000.0),
            &no_baseline(),
            &stored(100.0, 1000.0, "a0"),
            &elsewhere,
            RESERVE,
            false,
        );
        assert!(v.results.iter().all(|r| r.drift.is_none()));
        assert!(v
            .summary
            .warnings
            .iter()
            .any(|w| w.kind == WarningKind::NoAnchor && w.text.contains("was measured on another testbed")));
    }

    #[test]
    fn a_size_that_fell_past_the_threshold_gets_a_tighter_budget_proposed_as_a_note() {
        // training_peak 1,000,000 B → 800,000 B (-20 %), limit < 1 MiB.
        let baseline = stored(100.0, 1_000_000.0, "b1");
        let v = decide_anchored(
            &spec(),
            &run(100.0, 800_000.0),
            &baseline,
            &baseline,
            &Testbed::default(),
            RESERVE,
            false,
        );
        assert_eq!(v.summary.status, RunStatus::Pass);
        let tighter: Vec<&Note> = v
            .summary
            .notes
            .iter()
            .filter(|n| n.kind == NoteKind::TighterBudget)
            .collect();
        assert_eq!(tighter.len(), 1, "{:?}", v.summary.notes);
        let p = tighter[0].proposal.as_ref().unwrap();
        assert_eq!((p.measured, p.baseline), (800_000.0, 1_000_000.0));
        assert_eq!(
            p.limit,
            Limit {
                op: gate_spec::budget::Op::Lt,
                value: 1_048_576.0
            }
        );
        // 800,000 B and 5 % is 0.8011 MiB, rounded up to 0.802 MiB.
        assert_eq!(p.proposed.value, 0.802 * 1_048_576.0);
        assert_eq!(
            tighter[0].text,
            "a.training_peak fell 20.0 % below its baseline (0.953674 MiB → 0.762939 MiB): its budget `< 1 MiB` could be \
             `< 0.802 MiB` (the figure and its 5% tolerance), so the room is not spent unseen"
        );
        // A fall under the threshold proposes nothing (params did not move).
        let v = decide(
            &spec(),
            &run(100.0, 950_000.0),
            &baseline,
            &Testbed::default(),
            RESERVE,
            false,
        );
        assert!(v.summary.notes.iter().all(|n| n.kind != NoteKind::TighterBudget));
        // The proposal survives report.json.
        let summary: Summary = serde_json::from_str(&serde_json::to_string(&v.summary).unwrap()).unwrap();
        assert_eq!(summary.notes, v.summary.notes);
    }
}
