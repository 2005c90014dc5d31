//! The token kept out of everything gate prints or writes (#15): its value,
//! read once from the environment, replaced by `***` in text, in bytes and
//! in a report before it is rendered. Printing (pipeline/output.rs) and
//! gate's own workflow commands (pipeline/actions.rs) both go through here;
//! neither needs the other for it.

/// The token (GITHUB_TOKEN), read once. Whatever gate prints or writes
/// passes through here first, so its value never shows wherever the text
/// came from: a server that echoes it, a variable set to it by mistake, the
/// event file (#15).
pub(crate) fn secret() -> Option<&'static str> {
    static TOKEN: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    TOKEN.get_or_init(gate_github::client::token_from_env).as_deref()
}

/// `text` with the token replaced by `***`.
pub(crate) fn redacted(text: &str) -> String {
    gate_github::client::redact(text, secret())
}

/// `value` (a report) with the token replaced wherever it got in: a commit
/// taken from GITHUB_SHA, a reason quoting an environment variable or the
/// event. Done before rendering, because renderers escape and shorten text
/// (`ghs\_…` in Markdown, a 12-character commit), after which `redacted`
/// could no longer recognise it.
pub(crate) fn scrub<T: serde::Serialize + serde::de::DeserializeOwned>(value: T) -> T {
    let Some(token) = secret() else { return value };
    match serde_json::to_string(&value) {
        Ok(json) if json.contains(token) => serde_json::from_str(&redacted(&json)).unwrap_or(value),
        _ => value,
    }
}

/// `bytes` with the token replaced by `***`.
pub(crate) fn redact_bytes<'a>(bytes: &'a [u8], secret: Option<&str>) -> std::borrow::Cow<'a, [u8]> {
    let Some(s) = secret.map(str::as_bytes).filter(|s| s.len() >= 4) else {
        return bytes.into();
    };
    if !bytes.windows(s.len()).any(|w| w == s) {
        return bytes.into();
    }
    let mut out = Vec::with_capacity(bytes.len());
    let mut rest = bytes;
    while !rest.is_empty() {
        if rest.starts_with(s) {
            out.extend_from_slice(b"***");
            rest = &rest[s.len()..];
        } else {
            out.push(rest[0]);
            rest = &rest[1..];
        }
    }
    out.into()
}
