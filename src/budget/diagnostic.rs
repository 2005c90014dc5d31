//! A spec error: `file:line:col`, what is wrong, and a hint that says the fix.

use std::fmt;

use super::yaml::Pos;

#[derive(Debug, Clone, PartialEq)]
pub struct Diagnostic {
    pub file: String,
    pub pos: Pos,
    pub message: String,
    pub hint: String,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: error: {}",
            one_line(&self.file),
            self.pos.line,
            self.pos.col,
            one_line(&self.message)
        )?;
        if !self.hint.is_empty() {
            write!(f, "\n  hint: {}", one_line(&self.hint))?;
        }
        Ok(())
    }
}

/// Spec text quoted in a message stays on its line: a line break or other
/// control character from a quoted string is shown escaped, so no line of a
/// diagnostic can start with spec text (in GitHub Actions, a line starting
/// `::error::` on stderr would be a workflow command).
fn one_line(s: &str) -> std::borrow::Cow<'_, str> {
    if !s
        .chars()
        .any(|c| c.is_control() || matches!(c, '\u{2028}' | '\u{2029}'))
    {
        return s.into();
    }
    s.chars()
        .map(|c| match c {
            '\n' => "\\n".to_string(),
            '\r' => "\\r".to_string(),
            '\t' => "\\t".to_string(),
            c if c.is_control() || matches!(c, '\u{2028}' | '\u{2029}') => format!("\\u{{{:X}}}", c as u32),
            c => c.to_string(),
        })
        .collect::<String>()
        .into()
}

/// Every error found in one spec file, in file order.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub struct Diagnostics(pub Vec<Diagnostic>);

impl fmt::Display for Diagnostics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, d) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{d}")?;
        }
        Ok(())
    }
}

/// The closest of `candidates` to `word`, if it is a plausible typo.
pub fn did_you_mean<'a>(word: &str, candidates: &[&'a str]) -> Option<&'a str> {
    candidates
        .iter()
        .map(|c| (edit_distance(word, c), *c))
        .filter(|(d, c)| *d <= (c.len() / 3).max(2) && *d < c.len())
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != *cb);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_text_in_a_message_cannot_start_a_line() {
        let d = Diagnostic {
            file: "budgets.yaml".into(),
            pos: Pos { line: 4, col: 13 },
            message: "device.capacity: `1\n::error::pwned\u{1b}` is not a size".into(),
            hint: "a\r\nb".into(),
        };
        assert_eq!(
            d.to_string(),
            "budgets.yaml:4:13: error: device.capacity: `1\\n::error::pwned\\u{1B}` is not a size\n  hint: a\\r\\nb"
        );
    }

    #[test]
    fn suggests_near_names_only() {
        assert_eq!(
            did_you_mean("activation", &["activations", "params"]),
            Some("activations")
        );
        assert_eq!(did_you_mean("zzz", &["activations", "params"]), None);
        assert_eq!(did_you_mean("mpl", &["mlp", "tft", "dqn"]), Some("mlp"));
        assert_eq!(did_you_mean("xyz", &["mlp", "tft", "dqn"]), None);
    }
}
