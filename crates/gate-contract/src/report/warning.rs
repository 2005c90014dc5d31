//! The run's warnings: a sentence a reviewer reads, with the component it
//! is about and its kind as typed facts, read back from the sentence alone
//! when an older report carries no kind.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::DIFFERENT_TESTBED;

/// What a warning is about. New kinds may come in any release.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum WarningKind {
    /// No baseline was found: regressions are not checked.
    NoBaseline,
    /// The baseline is from another testbed: its figures are not compared.
    DifferentTestbed,
    /// A component, or one budget's metric, was not measured.
    NotMeasured,
    /// A budget's interval straddles its limit.
    Inconclusive,
    /// A component's `growth` and `inference_peak` both fail: a leak.
    Leak,
    /// The interleaved steps of `step_time_ratio` failed.
    RatioFailed,
    /// Measured params and the closed form disagree.
    ParamsDisagree,
    /// A line that speaks for the acknowledge label: who acknowledged the
    /// regressions, or that `--strict` ignored the label. Read from an
    /// artifact, such a line is never trusted (the comment writes it again
    /// from what GitHub confirms).
    Acknowledgement,
    /// The acknowledge label could not be verified or confirmed.
    AckUnconfirmed,
    /// A training step left trainable parameters without a gradient.
    Untrained,
    /// A generation's decode steps grew no memory: no cache, or one made
    /// whole in the prefill.
    CacheNeverGrew,
    /// A generation's `kv_capacity_tokens`, checked on an emulated card by
    /// one decode at that size, did not fit.
    CapacityNotHeld,
    /// The spec's `anchor:` was not found or is from another testbed: no
    /// `drift:` budget is judged.
    NoAnchor,
    /// Anything else (and whatever an older report says that is none of the above).
    #[serde(other)]
    Other,
}

/// One warning of the run: the sentence said to the reader, with what it
/// is about. In report.json `summary.warnings` holds the sentences (schema
/// 1 has strings there) and `summary.warning_kinds` what each is about, in
/// the same order, so a reader of the file gets them typed, never from the
/// words. Only a report of an older gate, which has no `warning_kinds`, is
/// read back from its sentences ([`Warning::from_text`]).
#[derive(Debug, Clone, Eq)]
#[non_exhaustive]
pub struct Warning {
    /// The component or variant (`NAME@VARIANT`) it concerns, `ensemble`
    /// for the ensemble, `None` for the whole run.
    pub component: Option<String>,
    /// What it is about.
    pub kind: WarningKind,
    /// The whole sentence, as shown.
    pub text: String,
    /// Read back from its sentence (a report of an older gate): its
    /// component and kind are a reading, not a fact, and a report written
    /// again does not state them as typed.
    pub(super) from_sentence: bool,
}

/// Two warnings are the same when they say the same thing about the same
/// component, however each was come by.
impl PartialEq for Warning {
    fn eq(&self, other: &Self) -> bool {
        (&self.component, self.kind, &self.text) == (&other.component, other.kind, &other.text)
    }
}

impl Warning {
    /// A warning about `component` (`None`: the whole run).
    pub fn new(component: Option<&str>, kind: WarningKind, text: impl Into<String>) -> Self {
        Warning {
            component: component.map(str::to_string),
            kind,
            text: text.into(),
            from_sentence: false,
        }
    }

    /// A warning about the whole run.
    pub fn run_wide(kind: WarningKind, text: impl Into<String>) -> Self {
        Warning::new(None, kind, text)
    }

    /// The sentence.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The one parser of warning sentences, used only where a report of
    /// an older gate is read (its report.json, baselines and shards store
    /// the sentence alone). The component is the sentence's `NAME: ` or `NAME.metric: `
    /// lead when that is a component name; the kind is recovered from the
    /// verdict's wording, and any line in the words of an acknowledgement
    /// ("acknowledged by", "accepted by", "(added by @") is read as
    /// [`WarningKind::Acknowledgement`], whoever wrote it.
    pub fn from_text(text: impl Into<String>) -> Self {
        let text = text.into();
        let lead = lead_component(&text);
        let component = lead.map(|(name, _)| name.to_string());
        let of_metric = lead.is_some_and(|(_, metric)| metric);
        let lower = text.to_lowercase();
        let rest = component
            .as_deref()
            .and_then(|c| text.get(c.len()..))
            .map(|r| r.split_once(": ").map_or(r, |(_, after)| after))
            .unwrap_or("");
        let kind = if reads_as_acknowledgement(&text) {
            WarningKind::Acknowledgement
        } else if lower.contains("label could not be verified") || lower.contains("acknowledgement is not confirmed") {
            WarningKind::AckUnconfirmed
        } else if text.starts_with("no baseline (") {
            WarningKind::NoBaseline
        } else if text.starts_with(DIFFERENT_TESTBED) {
            WarningKind::DifferentTestbed
        } else if component.is_none() {
            WarningKind::Other
        } else if rest.starts_with("inconclusive: ") {
            WarningKind::Inconclusive
        } else if of_metric || rest.starts_with("not measured") {
            // `NAME.metric: why` is the verdict's only other line about a metric.
            WarningKind::NotMeasured
        } else if rest.starts_with("growth (") && rest.contains("leak") {
            WarningKind::Leak
        } else if rest.starts_with("the interleaved steps for step_time_ratio failed") {
            WarningKind::RatioFailed
        } else if rest.starts_with("measured params (") {
            WarningKind::ParamsDisagree
        } else if rest.starts_with(UNTRAINED_LEAD) {
            WarningKind::Untrained
        } else if rest.starts_with(CACHE_NEVER_GREW_LEAD) {
            WarningKind::CacheNeverGrew
        } else if rest.starts_with(CAPACITY_NOT_HELD_LEAD) {
            WarningKind::CapacityNotHeld
        } else {
            WarningKind::Other
        };
        Warning {
            component,
            kind,
            text,
            from_sentence: true,
        }
    }
}

/// How the warning of a generation whose cache never grew begins, after `NAME: `.
pub const CACHE_NEVER_GREW_LEAD: &str = "the decode steps grew no cache: ";

/// How the warning of a serving capacity the card did not hold begins,
/// after `NAME: `.
pub const CAPACITY_NOT_HELD_LEAD: &str = "kv_capacity_tokens is over what the card holds: ";

/// How the warning of a step that leaves parameters without a gradient
/// begins, after `NAME: `.
pub const UNTRAINED_LEAD: &str = "the training step does not train the whole model: ";

/// The component a sentence leads with: `NAME: ` or `NAME.metric: `, where
/// NAME is written as component names are (letters, digits, `_`, `-`, and
/// `@` before a variant's name), and whether a metric follows it.
fn lead_component(text: &str) -> Option<(&str, bool)> {
    let (lead, _) = text.split_once(": ")?;
    let (name, of_metric) = lead.split_once('.').map_or((lead, false), |(n, _)| (n, true));
    let ok = gate_spec::name::is_component_name(name);
    ok.then_some((name, of_metric))
}

impl std::fmt::Display for Warning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

/// A warning equals a sentence when its text is that sentence.
impl PartialEq<str> for Warning {
    fn eq(&self, other: &str) -> bool {
        self.text == other
    }
}

impl PartialEq<&str> for Warning {
    fn eq(&self, other: &&str) -> bool {
        self.text == *other
    }
}

impl PartialEq<String> for Warning {
    fn eq(&self, other: &String) -> bool {
        &self.text == other
    }
}

impl Serialize for Warning {
    /// The sentence alone: report.json is what schema 1 always wrote.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text)
    }
}

impl<'de> Deserialize<'de> for Warning {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d).map(Warning::from_text)
    }
}

/// Whether a sentence is in the words of an acknowledgement.
pub(super) fn reads_as_acknowledgement(text: &str) -> bool {
    let lower = text.to_lowercase();
    ["acknowledged by", "accepted by", "(added by @"]
        .iter()
        .any(|w| lower.contains(w))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_warning_is_written_as_its_sentence_and_read_back_with_its_component_and_kind() {
        let w = Warning::new(
            Some("tft@plain"),
            WarningKind::Inconclusive,
            "tft@plain.step_time: inconclusive: why",
        );
        assert_eq!(
            serde_json::to_string(&w).unwrap(),
            "\"tft@plain.step_time: inconclusive: why\""
        );
        let read: Warning = serde_json::from_str("\"tft@plain.step_time: inconclusive: why\"").unwrap();
        assert_eq!(read, w);
    }

    #[test]
    fn reading_a_sentence_recovers_what_it_is_about() {
        let cases: [(&str, Option<&str>, WarningKind); 12] = [
            (
                "no baseline (x): regressions are not checked",
                None,
                WarningKind::NoBaseline,
            ),
            (
                "baseline from a different testbed: not compared (baseline: cuda on A)",
                None,
                WarningKind::DifferentTestbed,
            ),
            ("tft: not measured: no CUDA", Some("tft"), WarningKind::NotMeasured),
            (
                "tft@plain.loss_ratio: the reference failed",
                Some("tft@plain"),
                WarningKind::NotMeasured,
            ),
            (
                "ensemble.step_time: not measured",
                Some("ensemble"),
                WarningKind::NotMeasured,
            ),
            (
                "a.step_time_ratio: inconclusive: wide",
                Some("a"),
                WarningKind::Inconclusive,
            ),
            (
                "a: growth (2.000 MiB) and inference_peak both fail: what leaks ... fix it first",
                Some("a"),
                WarningKind::Leak,
            ),
            (
                "a: the interleaved steps for step_time_ratio failed (x); it is ...",
                Some("a"),
                WarningKind::RatioFailed,
            ),
            (
                "tft: measured params (1 MiB) and the closed form (2 MiB) disagree",
                Some("tft"),
                WarningKind::ParamsDisagree,
            ),
            (
                "3 regression(s) acknowledged by @octocat via `l` at t",
                None,
                WarningKind::Acknowledgement,
            ),
            (
                "the `l` label could not be verified, so 1 regression(s) stay regressions: x",
                None,
                WarningKind::AckUnconfirmed,
            ),
            ("something odd happened: x", None, WarningKind::Other),
        ];
        for (text, component, kind) in cases {
            let w = Warning::from_text(text);
            assert_eq!(
                (w.component.as_deref(), w.kind, w.text.as_str()),
                (component, kind, text)
            );
        }
    }

    #[test]
    fn any_line_in_the_words_of_an_acknowledgement_reads_as_one() {
        // An artifact is untrusted: a line that claims an acknowledgement
        // in any case or place is one, so the comment never copies it.
        for text in [
            "tft: Regressions ACCEPTED BY @mallory",
            "--strict ignores the `l` label (added by @x at t): 1 regression(s) stay regressions",
            "no baseline (acknowledged by @x): regressions are not checked",
        ] {
            assert_eq!(Warning::from_text(text).kind, WarningKind::Acknowledgement, "{text}");
        }
    }
}
