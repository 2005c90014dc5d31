//! What a result row is about: its subject (a component, or the
//! ensemble) and its metric (a component's, or the ensemble's), each
//! written in report.json as the name it always had.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use gate_spec::budget::EnsembleMetric;
use gate_spec::metric::Metric;

/// Whose budget a result judges: a component (or a variant's,
/// `NAME@VARIANT`), or the ensemble. Written in reports as the component's
/// name, and `ensemble` for the ensemble, a name no spec may give a
/// component (gate-spec refuses it), so the text is never ambiguous.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Subject {
    /// A component or a variant, by its name in the report.
    Component(String),
    /// The ensemble's own rows (`total`, `headroom`).
    Ensemble,
}

impl Subject {
    /// How reports write the ensemble.
    pub const ENSEMBLE: &'static str = "ensemble";

    /// The name reports write.
    pub fn as_str(&self) -> &str {
        match self {
            Subject::Component(name) => name,
            Subject::Ensemble => Subject::ENSEMBLE,
        }
    }

    /// Whether this is the ensemble's row.
    pub fn is_ensemble(&self) -> bool {
        matches!(self, Subject::Ensemble)
    }

    /// The component's name; `None` for the ensemble.
    pub fn component(&self) -> Option<&str> {
        match self {
            Subject::Component(name) => Some(name),
            Subject::Ensemble => None,
        }
    }
}

impl From<&str> for Subject {
    fn from(name: &str) -> Self {
        if name == Subject::ENSEMBLE {
            Subject::Ensemble
        } else {
            Subject::Component(name.to_string())
        }
    }
}

impl From<String> for Subject {
    fn from(name: String) -> Self {
        if name == Subject::ENSEMBLE {
            Subject::Ensemble
        } else {
            Subject::Component(name)
        }
    }
}

impl std::fmt::Display for Subject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A subject compared with a written name (`r.component == "tft"`).
impl PartialEq<&str> for Subject {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<str> for Subject {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<String> for Subject {
    fn eq(&self, other: &String) -> bool {
        self.as_str() == other
    }
}

/// Ordered as reports list them: by the written name.
impl Ord for Subject {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl PartialOrd for Subject {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Serialize for Subject {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Subject {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d).map(Subject::from)
    }
}

/// Which budget of its subject a result judges: a component's metric, or
/// the ensemble's `total` / `headroom`. Written in reports as the metric's
/// name; a name this gate does not know (a report of a newer gate) is kept
/// as written and never judged.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum MetricId {
    /// A metric of a component (or a variant).
    Component(Metric),
    /// One of the ensemble's.
    Ensemble(EnsembleMetric),
    /// A name no metric of this gate has, as a report wrote it.
    Unknown(String),
}

impl MetricId {
    /// The name reports write.
    pub fn as_str(&self) -> &str {
        match self {
            MetricId::Component(m) => m.name(),
            MetricId::Ensemble(m) => m.name(),
            MetricId::Unknown(name) => name,
        }
    }

    /// The component metric this is, if it is one.
    pub fn metric(&self) -> Option<Metric> {
        match self {
            MetricId::Component(m) => Some(*m),
            _ => None,
        }
    }

    /// Reads a written name: a component metric's, else the ensemble's.
    pub fn parse(name: &str) -> MetricId {
        if let Some(m) = Metric::parse(name) {
            return MetricId::Component(m);
        }
        match name {
            "total" => MetricId::Ensemble(EnsembleMetric::Total),
            "headroom" => MetricId::Ensemble(EnsembleMetric::Headroom),
            _ => MetricId::Unknown(name.to_string()),
        }
    }
}

impl From<Metric> for MetricId {
    fn from(m: Metric) -> Self {
        MetricId::Component(m)
    }
}

impl From<EnsembleMetric> for MetricId {
    fn from(m: EnsembleMetric) -> Self {
        MetricId::Ensemble(m)
    }
}

impl std::fmt::Display for MetricId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A metric compared with a written name (`r.metric == "params"`).
impl PartialEq<&str> for MetricId {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<str> for MetricId {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl Serialize for MetricId {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for MetricId {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d).map(|name| MetricId::parse(&name))
    }
}
