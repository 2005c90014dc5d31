//! "Did you mean": the nearest known name to a misspelt one, shared by every
//! message that offers a correction (spec keys, metrics, workloads, config keys).

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
