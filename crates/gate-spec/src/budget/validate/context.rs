//! One validation's running state: the file's name and every problem found
//! so far, so that all of them are reported at once, not the first alone.

use crate::budget::tree::Node;
use crate::budget::Diagnostic;
use crate::config::Pos;

/// The most problems one validation keeps (a few MB): a spec of a million
/// unknown keys would otherwise hold and print a million (a review found a
/// 9 MB file taking a GB); those past it are counted as "more".
pub(crate) const MAX_KEPT: usize = 10_000;

pub(super) struct Ctx {
    file: String,
    pub(super) diags: Vec<Diagnostic>,
    /// Problems found past [`MAX_KEPT`], counted and not kept.
    pub(super) unkept: usize,
    /// Where the first `drift:` is written: a spec with one needs an `anchor:`.
    pub(super) drift_at: Option<Pos>,
}

impl Ctx {
    pub(super) fn new(file: String) -> Self {
        Ctx {
            file,
            diags: Vec::new(),
            unkept: 0,
            drift_at: None,
        }
    }

    pub(super) fn err(&mut self, pos: Pos, message: impl Into<String>, hint: impl Into<String>) {
        if self.diags.len() >= MAX_KEPT {
            self.unkept += 1;
            return;
        }
        self.diags.push(Diagnostic {
            file: self.file.clone(),
            pos,
            message: message.into(),
            hint: hint.into(),
        });
    }

    /// The entries of a mapping, or an error naming `what` it should be.
    pub(super) fn map<'n>(&mut self, node: &'n Node, what: &str) -> Option<&'n [(String, Pos, Node)]> {
        match node {
            Node::Map { entries, .. } => Some(entries),
            other => {
                let hint = format!("write {what} as `key: value` lines indented under it");
                self.wrong_kind(other, what, "a mapping", hint);
                None
            }
        }
    }

    /// "`what` must be `must_be`, found" whatever `node` is.
    pub(super) fn wrong_kind(&mut self, node: &Node, what: &str, must_be: &str, hint: impl Into<String>) {
        self.err(
            node.pos(),
            format!("{what} must be {must_be}, found {}", node.kind()),
            hint,
        );
    }
}

impl Ctx {
    /// The value of `key` among `entries`, or "missing `what`" and `hint`
    /// reported at `at` (the mapping's own position).
    pub(super) fn required<'n>(
        &mut self,
        entries: &'n [(String, Pos, Node)],
        key: &str,
        at: Pos,
        what: &str,
        hint: &str,
    ) -> Option<&'n Node> {
        let found = find(entries, key);
        if found.is_none() {
            self.err(at, format!("missing `{what}`"), hint);
        }
        found
    }
}

/// The value of `key` among a mapping's entries.
pub(super) fn find<'n>(entries: &'n [(String, Pos, Node)], key: &str) -> Option<&'n Node> {
    entries.iter().find(|(k, _, _)| k == key).map(|(_, _, n)| n)
}
