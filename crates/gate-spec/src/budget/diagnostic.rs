//! A spec error: `file:line:col`, what is wrong, and a hint that says the fix.

use std::fmt;

use crate::config::Pos;

#[derive(Debug, Clone, PartialEq)]
pub struct Diagnostic {
    pub file: String,
    pub pos: Pos,
    pub message: String,
    pub hint: String,
}

impl Diagnostic {
    /// The same text as a warning: `file:line:col: warning: ...` and its hint.
    pub fn warning(&self) -> String {
        let mut s = String::new();
        let _ = self.write(&mut s, "warning");
        s
    }

    fn write(&self, f: &mut impl fmt::Write, severity: &str) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: {severity}: {}",
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

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write(f, "error")
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

/// The errors found in one spec file, in file order: the first ones, and
/// how many more were found and not listed (a spec of countless errors is
/// not held and printed whole).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub struct Diagnostics(pub Vec<Diagnostic>, pub usize);

impl Diagnostics {
    /// Every one of `errors`, none left out.
    pub fn all(errors: Vec<Diagnostic>) -> Diagnostics {
        Diagnostics(errors, 0)
    }

    /// The closing line under the listed errors: `the spec has N error(s)`,
    /// and how many are listed where not all are.
    pub fn summary(&self) -> String {
        let n = self.0.len() + self.1;
        let s = if n == 1 { "" } else { "s" };
        match self.1 {
            0 => format!("the spec has {n} error{s}"),
            _ => format!(
                "the spec has {n} error{s}; the first {} are listed: fix them and run `gate validate` again",
                self.0.len()
            ),
        }
    }
}

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
}
