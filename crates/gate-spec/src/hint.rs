//! How gate tells a person what is wrong: [`Problem`] (the message and,
//! where gate knows it, the fix), and "did you mean": the nearest known name
//! to a misspelt one, shared by every message that offers a correction
//! (spec keys, metrics, workloads, config keys).

use std::fmt;

/// What is wrong, and the fix when there is one to give: the one error
/// type of every command and probe that is not a spec error at a position
/// (those are [`crate::budget::Diagnostic`]s, whose hint is never absent).
///
/// ```
/// use gate_spec::hint::Problem;
/// let p = Problem::new("cannot write out/report.json").with_hint("check that --out is writable");
/// assert_eq!(p.to_string(), "cannot write out/report.json");
/// assert_eq!(p.lines().to_string(), "error: cannot write out/report.json\nhint: check that --out is writable");
/// assert_eq!(Problem::new("no GPU").lines().to_string(), "error: no GPU");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// What is wrong, one sentence, shown after `error: `.
    pub message: String,
    /// The fix, shown on a `hint:` line; `None` when gate has none to give.
    pub hint: Option<String>,
}

impl Problem {
    /// A problem without a hint yet.
    pub fn new(message: impl Into<String>) -> Self {
        Problem {
            message: message.into(),
            hint: None,
        }
    }

    /// The same problem, with `hint` as its fix.
    #[must_use]
    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    /// The fix, if there is one.
    pub fn hint(&self) -> Option<&str> {
        self.hint.as_deref()
    }

    /// The lines a command prints for it on stderr (see [`lines`]).
    pub fn lines(&self) -> Lines<'_> {
        lines(&self.message, self.hint())
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Problem {}

/// `error: MESSAGE`, then `hint: HINT` on a line of its own when there is
/// one, with no line break after: the one wording of a failed command on
/// stderr, for a [`Problem`] and for errors that keep their hint elsewhere.
pub fn lines<'a>(message: &'a dyn fmt::Display, hint: Option<&'a str>) -> Lines<'a> {
    Lines { message, hint }
}

/// What [`lines`] returns: shown with `{}`.
pub struct Lines<'a> {
    message: &'a dyn fmt::Display,
    hint: Option<&'a str>,
}

impl fmt::Display for Lines<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "error: {}", self.message)?;
        match self.hint {
            Some(h) => write!(f, "\nhint: {h}"),
            None => Ok(()),
        }
    }
}

/// The candidate closest to `word` by edit distance, when it is close enough
/// to be a plausible typo (at most a third of its length, and at least 2 edits allowed).
pub fn did_you_mean<'a>(word: &str, candidates: &[&'a str]) -> Option<&'a str> {
    candidates
        .iter()
        .map(|c| (strsim::levenshtein(word, c), *c))
        .filter(|(d, c)| *d <= (c.len() / 3).max(2) && *d < c.len())
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// The hint for `word`, which is none of `known`: "did you mean `k`?
/// {listed}: a, b, …" when one is near, else "{listed}: a, b, …". The one
/// wording of every such hint.
pub fn suggest(word: &str, known: &[&str], listed: &str) -> String {
    suggest_or(word, known, listed, listed)
}

/// [`suggest`], with `otherwise` leading the list when no name is near.
pub fn suggest_or(word: &str, known: &[&str], listed: &str, otherwise: &str) -> String {
    let list = known.join(", ");
    match did_you_mean(word, known) {
        Some(k) => format!("did you mean `{k}`? {listed}: {list}"),
        None => format!("{otherwise}: {list}"),
    }
}

#[cfg(test)]
mod tests {
    use super::did_you_mean;

    #[test]
    fn suggests_near_names_only() {
        assert_eq!(
            did_you_mean("activation", &["activations", "params"]),
            Some("activations")
        );
        assert_eq!(did_you_mean("zzz", &["activations", "params"]), None);
        assert_eq!(did_you_mean("mpl", &["mlp", "tft", "dqn"]), Some("mlp"));
        assert_eq!(did_you_mean("xyz", &["mlp", "tft", "dqn"]), None);
        assert_eq!(
            did_you_mean("my_forcaster", &["my_forecaster", "tft"]),
            Some("my_forecaster")
        );
    }

    #[test]
    fn one_wording_with_or_without_a_near_name() {
        use super::suggest;
        assert_eq!(
            suggest("mpl", &["mlp", "tft"], "known workloads"),
            "did you mean `mlp`? known workloads: mlp, tft"
        );
        assert_eq!(
            suggest("xyz", &["mlp", "tft"], "known workloads"),
            "known workloads: mlp, tft"
        );
    }
}
