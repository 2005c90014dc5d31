//! Making text from the spec (or from a report read off an artifact) safe in
//! Markdown, in code spans, in code blocks and in Mermaid.

/// Escapes text for Markdown and HTML: `&`, `<`, `>` become entities,
/// Markdown punctuation (table pipes included) is backslash-escaped, `@` is
/// followed by a zero-width joiner so it never mentions anyone, `#` before a
/// digit and `://` get a zero-width joiner so they never become issue links
/// or URLs, control characters become spaces, and the text is cut to `max`
/// characters.
pub fn escape_max(text: &str, max: usize) -> String {
    let mut out = String::new();
    let count = text.chars().count();
    let mut chars = text.chars().peekable();
    let mut i = 0;
    while let Some(c) = chars.next() {
        if i == max && count > max {
            out.push('…');
            break;
        }
        i += 1;
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '@' => out.push_str("@\u{200D}"),
            '#' if chars.peek().is_some_and(|n| n.is_ascii_digit()) => out.push_str("#\u{200D}"),
            ':' if chars.peek() == Some(&'/') => out.push_str(":\u{200D}"),
            '\\' | '`' | '*' | '_' | '[' | ']' | '|' | '~' | '$' => {
                out.push('\\');
                out.push(c);
            }
            c if c.is_control() => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// A code span for names and commands: shown literally, with no
/// backslashes. Text with anything but plain name characters is escaped
/// instead, so a hostile name never carries HTML, a mention or a link
/// into the comment, even inside a code span.
pub fn code(text: &str) -> String {
    // `tft@plain` (a variant) is no mention: `@` mentions only at a word's start.
    let mut prev = ' ';
    let plain = !text.is_empty()
        && text.chars().count() <= super::NAME_LIMIT
        && text.chars().all(|c| {
            let ok = c.is_ascii_alphanumeric() || " _-.,=+/:".contains(c) || (c == '@' && prev.is_ascii_alphanumeric());
            prev = c;
            ok
        });
    if plain && !text.contains("://") {
        format!("`{text}`")
    } else {
        escape_max(text, super::NAME_LIMIT)
    }
}

fn longest_run(text: &str, ch: char) -> usize {
    let (mut longest, mut run) = (0, 0);
    for c in text.chars() {
        if c == ch {
            run += 1;
            longest = longest.max(run);
        } else {
            run = 0;
        }
    }
    longest
}

/// Text safe inside a quoted Mermaid string: letters, digits and a few marks.
pub fn mermaid_text(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_alphanumeric() || " _.-+/%()".contains(c) {
                c
            } else {
                '_'
            }
        })
        .take(60)
        .collect()
}

/// The fence for a code block around `text`: longer than any backtick run in it.
pub fn fence_for(text: &str) -> String {
    "`".repeat((longest_run(text, '`') + 1).max(3))
}

/// Control characters would end lines inside the code block; make them visible.
pub fn code_safe(text: &str) -> String {
    text.lines()
        .map(|l| {
            l.chars()
                .map(|c| if c.is_control() { '�' } else { c })
                .collect::<String>()
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_never_link_mention_or_break_out() {
        assert_eq!(escape_max("a|b", 10), "a\\|b");
        assert_eq!(escape_max("@team", 10), "@\u{200D}team");
        assert_eq!(escape_max("fix #123", 20), "fix #\u{200D}123");
        assert_eq!(escape_max("https://x.io", 20), "https:\u{200D}//x.io");
        assert_eq!(escape_max("<b>", 10), "&lt;b&gt;");
        assert_eq!(escape_max("abcdef", 3), "abc…");
    }

    #[test]
    fn code_spans_show_plain_names_as_is_and_escape_the_rest() {
        assert_eq!(code("gate fit tft_v2"), "`gate fit tft_v2`");
        assert_eq!(code("a`b"), "a\\`b");
        assert_eq!(code("@here <b>"), "@\u{200D}here &lt;b&gt;");
        assert_eq!(code("a|b"), "a\\|b");
        assert_eq!(code("gate fit tft@plain"), "`gate fit tft@plain`");
        assert_eq!(code("@here"), "@\u{200D}here");
    }
}
