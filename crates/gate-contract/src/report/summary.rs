//! The run's summary: its status and counts, its warnings and notes, the
//! budget changes against the baseline's spec and the acknowledge label;
//! and how report.json writes it (sentences with their kinds beside) and
//! reads it back, older reports included.

use serde::{Deserialize, Deserializer, Serialize};

use gate_spec::budget::Op;
use gate_spec::metric::Unit;

use super::{reads_as_acknowledgement, MetricId, Subject, Warning, WarningKind};

/// The run's verdict: `pass` or `fail`. A name this gate does not know (a
/// newer gate's report) reads as `fail`: never a pass it did not see (#54).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    Pass,
    Fail,
}

impl<'de> Deserialize<'de> for RunStatus {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(rename = "RunStatus", rename_all = "snake_case")]
        enum Written {
            Pass,
            Fail,
            /// A newer gate's verdict.
            #[serde(other)]
            Unknown,
        }
        Ok(match Written::deserialize(d)? {
            Written::Pass => RunStatus::Pass,
            Written::Fail | Written::Unknown => RunStatus::Fail,
        })
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(into = "SummaryFile", from = "SummaryFile")]
pub struct Summary {
    /// `pass` or `fail` (warnings do not fail unless `--strict`).
    pub status: RunStatus,
    pub passed: usize,
    pub failed: usize,
    pub regressed: usize,
    pub not_measured: usize,
    /// Budgets whose interval straddles the limit (each also a warning).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub inconclusive: usize,
    /// What the run warns about, each written in report.json as its
    /// sentence (see [`Warning`]).
    pub warnings: Vec<Warning>,
    pub strict: bool,
    /// Budgets whose baseline figure is shown but not compared (the
    /// component's config, dtype, batch or seed changed).
    #[serde(default)]
    pub not_compared: usize,
    /// Budgets this run has that the baseline's spec did not, had with
    /// another limit, or had and this one dropped: a PR cannot loosen its
    /// own gate unseen. In report.json `budget_changes` holds their
    /// sentences (`tft.activations: budget < 200 MB → < 250 MB in this PR`)
    /// and `budget_change_kinds` the facts, in the same order.
    pub budget_changes: Vec<BudgetChange>,
    /// Regressions the pull request's acknowledge label turned into warnings.
    #[serde(default)]
    pub acknowledged: usize,
    /// The acknowledge label on the pull request, who added it and when;
    /// recorded under `--strict` too, where it is ignored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acknowledgement: Option<Acknowledgement>,
    /// How a figure was measured where that is not the usual way, e.g. a
    /// ratio stepped with the card's emulation lifted. Facts, not warnings:
    /// they never fail a run, `--strict` included. Every output shows them.
    /// In report.json `notes` holds their sentences and `note_kinds` what
    /// each is about, in the same order (as the warnings).
    pub notes: Vec<Note>,
}

/// What a note is about. New kinds may come in any release.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum NoteKind {
    /// `params` is the bytes of what was built: the workload gives no
    /// closed form to check it against.
    ParamsUnchecked,
    /// No block was attributed from the model's `tracing` spans (the note
    /// says why).
    SpansUnattributed,
    /// Tensor bytes not from the CUDA pool: NVML's per-process figures.
    NotFromPool,
    /// The ratios stepped with the emulated card's hold-back lifted: they
    /// measure time and loss only.
    RatioEmulationLifted,
    /// `loss_ratio` compares losses from the ratio steps: the reference's
    /// own profile gave none.
    LossFromRatioSteps,
    /// `kv_capacity_tokens` is the card's own answer: a decode beside the
    /// arithmetic's figure did not fit on the emulated card.
    CapacityFromCard,
    /// A size fell past [`TIGHTEN_AFTER`] percent below its baseline: a
    /// tighter budget is proposed (the note's `proposal`), so the room the
    /// improvement made is not spent unseen. Never a pass or a fail.
    TighterBudget,
    /// Anything else (and every note of a report from before notes were typed).
    #[serde(other)]
    Other,
}

/// One note of the run: the sentence shown, with what it is about and the
/// components (or variants) it names (none: the whole run).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Note {
    /// The components it concerns.
    pub components: Vec<String>,
    /// What it is about.
    pub kind: NoteKind,
    /// The whole sentence, as shown.
    pub text: String,
    /// [`NoteKind::TighterBudget`]: the budget proposed, typed.
    pub proposal: Option<TighterBudget>,
}

/// How far below its baseline (in percent) a size must fall before a
/// tighter budget is proposed: past the noise of a tolerance, where the
/// room it made is worth a decision.
pub const TIGHTEN_AFTER: f64 = 10.0;

/// A tighter budget proposed for a size that improved: the figure, its
/// baseline, the budget as it is and as proposed (the figure plus the
/// component's tolerance, rounded up in the unit the limit is written in).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TighterBudget {
    pub component: Subject,
    pub metric: MetricId,
    pub unit: Unit,
    pub measured: f64,
    pub baseline: f64,
    pub limit: Limit,
    pub proposed: Limit,
}

impl Note {
    /// A note of `kind` about `components`.
    pub fn new(components: Vec<String>, kind: NoteKind, text: impl Into<String>) -> Self {
        Note {
            components,
            kind,
            text: text.into(),
            proposal: None,
        }
    }

    /// The note proposing `proposal`, about its component.
    pub fn tighter(proposal: TighterBudget, text: impl Into<String>) -> Self {
        Note {
            components: vec![proposal.component.as_str().to_string()],
            kind: NoteKind::TighterBudget,
            text: text.into(),
            proposal: Some(proposal),
        }
    }
}

impl std::fmt::Display for Note {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

/// How a budget differs from the baseline spec's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BudgetChangeKind {
    /// The baseline's spec had no such budget (on a component it measured).
    Added,
    /// Another comparison or limit.
    Changed,
    /// This run's spec dropped it.
    Removed,
    /// A kind this gate does not know, read from a report of a newer gate:
    /// its sentence is shown as written, nothing is judged by it.
    #[serde(other)]
    Unknown,
}

/// A budget's limit as a spec states it, in its metric's unit (the fact's
/// `unit`): `< 200 MB` is `Lt` and 200,000,000 bytes, `< 10 s` is `Lt` and
/// 10,000 ms, `< 2` of a ratio is `Lt` and 2.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Limit {
    pub op: Op,
    pub value: f64,
}

/// One budget changed against the baseline: which, how, the limits before
/// and after, and the sentence every output shows.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct BudgetChange {
    /// What it is of; `None` in a report from before budget changes were
    /// typed (its sentence is all there is).
    pub fact: Option<BudgetChangeFact>,
    /// The whole sentence, as shown.
    pub text: String,
}

/// What a [`BudgetChange`] states, typed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BudgetChangeFact {
    pub component: Subject,
    pub metric: MetricId,
    /// The limits' unit: the metric's.
    pub unit: Unit,
    pub change: BudgetChangeKind,
    /// The baseline spec's limit; none when added.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<Limit>,
    /// This run's limit; none when removed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<Limit>,
}

impl BudgetChange {
    /// A change stated by `fact` and shown as `text`.
    pub fn new(fact: BudgetChangeFact, text: impl Into<String>) -> Self {
        BudgetChange {
            fact: Some(fact),
            text: text.into(),
        }
    }
}

impl std::fmt::Display for BudgetChange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

/// What one note is about, as report.json's `summary.note_kinds` says it.
#[derive(Serialize, Deserialize)]
struct NoteTag {
    components: Vec<String>,
    kind: NoteKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    proposal: Option<TighterBudget>,
}

/// A label on the pull request that accepts its regressions against the
/// baseline: the label, who added it (a login) and when (as GitHub writes
/// it, `2026-01-02T03:04:05Z`). Only someone with triage or write access to
/// the repository can add a label, so the label is the approval.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Acknowledgement {
    pub label: String,
    pub by: String,
    pub at: String,
}

/// What the verdict is told about the acknowledge label.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum AckInput {
    /// Not asked: not a pull request, `--strict`, or no label configured.
    #[default]
    NotAsked,
    /// Asked: the label is not on the pull request.
    Absent { label: String },
    /// The label is on the pull request.
    Present(Acknowledgement),
    /// GitHub could not be asked; regressions stay regressions.
    Unverified { label: String, reason: String },
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// What a warning is about, beside its sentence in report.json.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct WarningTag {
    component: Option<String>,
    kind: WarningKind,
}

/// [`Summary`] as report.json writes it: the warnings' sentences where
/// schema 1 always had them, and what each is about beside them.
#[derive(Serialize, Deserialize)]
struct SummaryFile {
    status: RunStatus,
    passed: usize,
    failed: usize,
    regressed: usize,
    not_measured: usize,
    #[serde(default, skip_serializing_if = "is_zero")]
    inconclusive: usize,
    warnings: Vec<String>,
    /// Absent from reports of gates before it: their warnings are read from their sentences.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    warning_kinds: Option<Vec<WarningTag>>,
    strict: bool,
    #[serde(default)]
    not_compared: usize,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    budget_changes: Vec<String>,
    /// Absent from reports of gates before budget changes were typed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    budget_change_kinds: Option<Vec<BudgetChangeFact>>,
    #[serde(default)]
    acknowledged: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    acknowledgement: Option<Acknowledgement>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    notes: Vec<String>,
    /// Absent from reports of gates before notes were typed (each is then `other`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    note_kinds: Vec<NoteTag>,
}

impl From<Summary> for SummaryFile {
    fn from(s: Summary) -> Self {
        // Kinds read back from an older report's sentences are not stated as
        // typed: such a report is written again as it was.
        let kinds = (!s.warnings.iter().any(|w| w.from_sentence)).then(|| {
            s.warnings
                .iter()
                .map(|w| WarningTag {
                    component: w.component.clone(),
                    kind: w.kind,
                })
                .collect()
        });
        SummaryFile {
            status: s.status,
            passed: s.passed,
            failed: s.failed,
            regressed: s.regressed,
            not_measured: s.not_measured,
            inconclusive: s.inconclusive,
            warnings: s.warnings.into_iter().map(|w| w.text).collect(),
            warning_kinds: kinds,
            strict: s.strict,
            not_compared: s.not_compared,
            // Facts only when every change has one: a report read from
            // before is written again as it was.
            budget_change_kinds: (!s.budget_changes.is_empty())
                .then(|| {
                    s.budget_changes
                        .iter()
                        .map(|c| c.fact.clone())
                        .collect::<Option<Vec<_>>>()
                })
                .flatten(),
            budget_changes: s.budget_changes.into_iter().map(|c| c.text).collect(),
            acknowledged: s.acknowledged,
            acknowledgement: s.acknowledgement,
            note_kinds: s
                .notes
                .iter()
                .map(|n| NoteTag {
                    components: n.components.clone(),
                    kind: n.kind,
                    proposal: n.proposal.clone(),
                })
                .collect(),
            notes: s.notes.into_iter().map(|n| n.text).collect(),
        }
    }
}

impl From<SummaryFile> for Summary {
    fn from(f: SummaryFile) -> Self {
        let warnings = match f.warning_kinds {
            Some(tags) if tags.len() == f.warnings.len() => f
                .warnings
                .into_iter()
                .zip(tags)
                .map(|(text, tag)| {
                    // Whatever a file says it is, a line in the words of an
                    // acknowledgement is one: `gate comment` then writes it
                    // again from what GitHub confirms, or drops it.
                    let kind = if reads_as_acknowledgement(&text) {
                        WarningKind::Acknowledgement
                    } else {
                        tag.kind
                    };
                    Warning {
                        component: tag.component,
                        kind,
                        text,
                        from_sentence: false,
                    }
                })
                .collect(),
            _ => f.warnings.into_iter().map(Warning::from_text).collect(),
        };
        Summary {
            status: f.status,
            passed: f.passed,
            failed: f.failed,
            regressed: f.regressed,
            not_measured: f.not_measured,
            inconclusive: f.inconclusive,
            warnings,
            strict: f.strict,
            not_compared: f.not_compared,
            budget_changes: match f.budget_change_kinds {
                Some(facts) if facts.len() == f.budget_changes.len() => f
                    .budget_changes
                    .into_iter()
                    .zip(facts)
                    .map(|(text, fact)| BudgetChange::new(fact, text))
                    .collect(),
                _ => f
                    .budget_changes
                    .into_iter()
                    .map(|text| BudgetChange { fact: None, text })
                    .collect(),
            },
            acknowledged: f.acknowledged,
            acknowledgement: f.acknowledgement,
            notes: match f.note_kinds.len() == f.notes.len() {
                true => f
                    .notes
                    .into_iter()
                    .zip(f.note_kinds)
                    .map(|(text, tag)| Note {
                        proposal: tag.proposal,
                        ..Note::new(tag.components, tag.kind, text)
                    })
                    .collect(),
                false => f
                    .notes
                    .into_iter()
                    .map(|text| Note::new(Vec::new(), NoteKind::Other, text))
                    .collect(),
            },
        }
    }
}

impl Summary {
    pub fn passed_run(&self) -> bool {
        self.status == RunStatus::Pass
    }

    /// The run passed only because regressions count as acknowledged, and
    /// no one's acknowledgement stands (`gate comment` found none GitHub
    /// confirms, and took the claim away): neither a pass nor a failure
    /// until a writer adds the label (#43: was shown as PASS, `success`).
    pub fn pass_unconfirmed(&self) -> bool {
        self.passed_run() && self.acknowledged > 0 && self.acknowledgement.is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(warnings: Vec<Warning>) -> Summary {
        Summary {
            status: RunStatus::Pass,
            passed: 1,
            failed: 0,
            regressed: 0,
            not_measured: 0,
            inconclusive: 0,
            warnings,
            strict: false,
            not_compared: 0,
            budget_changes: vec![],
            acknowledged: 0,
            acknowledgement: None,
            notes: vec![],
        }
    }

    #[test]
    fn warnings_are_written_as_sentences_with_their_kinds_beside_and_read_back_typed() {
        // A sentence whose words alone would read as another kind: the kind travels typed.
        let w = Warning::new(Some("llama"), WarningKind::Untrained, "llama: worded freely");
        let s = summary(vec![w.clone(), Warning::run_wide(WarningKind::NoBaseline, "none here")]);
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(
            json["warnings"],
            serde_json::json!(["llama: worded freely", "none here"])
        );
        assert_eq!(
            json["warning_kinds"],
            serde_json::json!([
                { "component": "llama", "kind": "untrained" },
                { "component": null, "kind": "no_baseline" }
            ])
        );
        let back: Summary = serde_json::from_value(json).unwrap();
        assert_eq!(back, s);
        assert_eq!(Warning::from_text("llama: worded freely").kind, WarningKind::Other);
    }

    #[test]
    fn notes_are_written_as_their_sentences_with_their_kinds_beside_and_read_back_typed() {
        let mut s = summary(vec![]);
        s.notes = vec![Note::new(
            vec!["t".into(), "t@half".into()],
            NoteKind::NotFromPool,
            "`t`, `t@half`: not from the pool",
        )];
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(json["notes"], serde_json::json!(["`t`, `t@half`: not from the pool"]));
        assert_eq!(
            json["note_kinds"],
            serde_json::json!([{ "components": ["t", "t@half"], "kind": "not_from_pool" }])
        );
        assert_eq!(serde_json::from_value::<Summary>(json.clone()).unwrap(), s);
        // A report from before notes were typed: each note is `other`, about nothing named.
        let mut old = json;
        old.as_object_mut().unwrap().remove("note_kinds");
        let back: Summary = serde_json::from_value(old).unwrap();
        assert_eq!(
            (back.notes[0].kind, back.notes[0].components.len()),
            (NoteKind::Other, 0)
        );
        assert_eq!(back.notes[0].text, "`t`, `t@half`: not from the pool");
    }

    #[test]
    fn an_older_report_is_read_from_its_sentences_and_no_tag_hides_an_acknowledgement() {
        let mut json = serde_json::to_value(summary(vec![])).unwrap();
        json["warnings"] = serde_json::json!(["tft.step_time: inconclusive: why"]);
        json.as_object_mut().unwrap().remove("warning_kinds");
        let old: Summary = serde_json::from_value(json.clone()).unwrap();
        assert_eq!(old.warnings[0].kind, WarningKind::Inconclusive);
        assert_eq!(old.warnings[0].component.as_deref(), Some("tft"));
        // Written again as it was: its kinds were read, not told.
        assert_eq!(serde_json::to_value(&old).unwrap(), json);
        // An artifact that tags an acknowledgement's words as something else.
        json["warnings"] = serde_json::json!(["regressions acknowledged by @someone"]);
        json["warning_kinds"] = serde_json::json!([{ "component": null, "kind": "other" }]);
        let forged: Summary = serde_json::from_value(json.clone()).unwrap();
        assert_eq!(forged.warnings[0].kind, WarningKind::Acknowledgement);
        // A kind this gate does not know yet is `other`.
        json["warning_kinds"] = serde_json::json!([{ "component": "x", "kind": "from_the_future" }]);
        json["warnings"] = serde_json::json!(["x: something new"]);
        let newer: Summary = serde_json::from_value(json).unwrap();
        assert_eq!(newer.warnings[0].kind, WarningKind::Other);
    }
}
