//! What a component inherits and may write again: `defaults:` → each
//! component → each of its variants, with the one parser that writes a
//! mapping's keys over what it inherits.

use crate::dtype::DType;

use super::context::{find, Ctx};
use super::hints::{suggest, CHECKPOINT_KEYS, DEFAULT_KEYS, GENERATE_KEYS, TIMING_KEYS};
use crate::budget::tree::Node;
use crate::budget::{Budget, Component, Generate, SpanName, Timing};
use crate::config;
use crate::config::Pos;
use crate::metric::Metric;
use crate::units::Percent;

/// The most rows a step may hold (2^24): past this a built-in model's
/// batch arithmetic (rows × features) can overflow, and no training step
/// a card can hold comes near it.
const MAX_BATCH_SIZE: u64 = 1 << 24;
const MAX_BATCH_WHY: &str = "a step's rows times its features must stay a size a machine can hold";

/// What `defaults:` sets for every component: the values below when it does not.
#[derive(Clone, Copy)]
pub(super) struct Defaults {
    pub(super) dtype: DType,
    pub(super) batch_size: usize,
    pub(super) tolerance: Percent,
    /// `drift:` and where it was written (the spec then needs an `anchor:`).
    pub(super) drift: Option<(Percent, Pos)>,
    pub(super) seed: u64,
    pub(super) timing: Timing,
}

impl Default for Defaults {
    fn default() -> Self {
        Defaults {
            dtype: DType::F32,
            batch_size: 32,
            tolerance: Percent(5.0),
            drift: None,
            seed: 42,
            timing: Timing::default(),
        }
    }
}

impl Defaults {
    /// Writes `key` when it is one `defaults:` takes (false for any other
    /// key); a value that does not read keeps what was inherited.
    pub(super) fn write(&mut self, cx: &mut Ctx, key: &str, value: &Node) -> bool {
        match key {
            "dtype" => self.dtype = cx.dtype(value).unwrap_or(self.dtype),
            "batch_size" => {
                self.batch_size = cx
                    .positive_int_at_most(value, "batch_size", MAX_BATCH_SIZE, MAX_BATCH_WHY)
                    .unwrap_or(self.batch_size as u64) as usize
            }
            "tolerance" => self.tolerance = cx.percent(value, "tolerance").unwrap_or(self.tolerance),
            "drift" => {
                if let Some(p) = cx.percent(value, "drift") {
                    self.drift = Some((p, value.pos()));
                    cx.drift_at.get_or_insert(value.pos());
                }
            }
            "seed" => self.seed = cx.non_negative_int(value, "seed").unwrap_or(self.seed),
            "timing" => self.timing = cx.timing(value, self.timing),
            _ => return false,
        }
        true
    }
}

/// The spec's `defaults:` over [`Defaults::default`].
pub(super) fn defaults(cx: &mut Ctx, top: &[(String, Pos, Node)]) -> Defaults {
    let mut d = Defaults::default();
    if let Some(entries) = find(top, "defaults").and_then(|n| cx.map(n, "defaults")) {
        cx.known_keys(entries, DEFAULT_KEYS, "defaults");
        for (key, _, value) in entries {
            d.write(cx, key, value);
        }
    }
    d
}

/// A component's settings, or a variant's: what it inherits with its own keys written over it.
#[derive(Clone)]
pub(super) struct Settings {
    pub(super) defaults: Defaults,
    pub(super) checkpoint: Option<usize>,
    pub(super) checkpoint_pos: Pos,
    pub(super) master_dtype: Option<DType>,
    pub(super) config: config::Node,
    /// `spans: [attn, mlp]`: the span names attributed as blocks.
    pub(super) spans: Option<Vec<SpanName>>,
    /// `generate: { prefill: N, decode: M }`, and where it is written.
    pub(super) generate: Option<(Generate, Pos)>,
    /// `generate:` was written, well formed or not (a malformed one is
    /// reported once, not again as missing).
    pub(super) generate_written: bool,
    /// Never inherited: a variant has only the budgets it writes.
    pub(super) budgets: Vec<Budget>,
}

/// Where a mapping wrote what a later check needs: `batch_size` and `dtype`
/// (a component's config may not write them again), and `master_weights`,
/// checked once the dtype is final.
#[derive(Default)]
pub(super) struct Written {
    pub(super) batch_size: Option<Pos>,
    pub(super) dtype: Option<Pos>,
    pub(super) master: Option<(Pos, Option<DType>)>,
}

impl Settings {
    /// The defaults, as a component starts; `name_pos` stands for a
    /// `checkpoint:` and `config:` that are not written.
    pub(super) fn of_component(defaults: Defaults, name_pos: Pos, config_pos: Pos) -> Self {
        Settings {
            defaults,
            checkpoint: None,
            checkpoint_pos: name_pos,
            master_dtype: None,
            config: config::Node::empty_map(config_pos),
            spans: None,
            generate: None,
            generate_written: false,
            budgets: Vec::new(),
        }
    }

    /// Writes the keys of `entries` that `keys` allows over these settings:
    /// the one parser of a component's own keys and of each variant's.
    /// `config:` is the caller's: a component's may also carry `batch_size`
    /// and `dtype`, a variant's is laid over its component's.
    pub(super) fn overrides(
        &mut self,
        cx: &mut Ctx,
        entries: &[(String, Pos, Node)],
        keys: &[&str],
        name: &str,
    ) -> Written {
        let mut written = Written::default();
        for (key, kpos, value) in entries.iter().filter(|(k, _, _)| keys.contains(&k.as_str())) {
            if self.defaults.write(cx, key, value) {
                match key.as_str() {
                    "batch_size" => written.batch_size = Some(*kpos),
                    "dtype" => written.dtype = Some(*kpos),
                    _ => {}
                }
                continue;
            }
            match key.as_str() {
                "checkpoint" => {
                    if let Ok(c) = cx.checkpoint(value) {
                        self.checkpoint = c;
                        self.checkpoint_pos = *kpos;
                    }
                }
                "master_weights" => written.master = cx.master_weights(value).map(|m| (*kpos, m)),
                "spans" => self.spans = cx.span_names(value),
                "generate" => {
                    self.generate_written = true;
                    if let Some(g) = cx.generate(value) {
                        self.generate = Some((g, *kpos));
                    }
                }
                "budgets" => self.budgets = cx.budgets(value, name),
                _ => {}
            }
        }
        written
    }

    /// The master weights as `master` writes them (checked against the final
    /// dtype), else as inherited.
    pub(super) fn settle_master(&mut self, cx: &mut Ctx, master: Option<(Pos, Option<DType>)>, name: &str) {
        self.master_dtype = match master {
            Some((pos, m)) => cx.check_master(m, self.defaults.dtype, pos, name),
            // Inherited: a variant back in f32 computes in f32 with no masters.
            None => self.master_dtype.filter(|_| self.defaults.dtype != DType::F32),
        };
    }

    /// A generation component measures its build and its generation only;
    /// a generation metric needs `generate:`. Each budget that cannot be
    /// measured is an error at its key.
    pub(super) fn check_generation(&self, cx: &mut Ctx, name: &str) {
        for b in &self.budgets {
            let at = Pos {
                line: b.line,
                col: b.col,
            };
            match &self.generate {
                Some((_, gpos)) if !b.metric.measured_when_generating() => cx.err(
                    at,
                    format!(
                        "`{}` of `{name}` is not measured: `{name}` generates (`generate:` at line {}) and runs no training",
                        b.metric, gpos.line
                    ),
                    format!(
                        "budget it on a component without `generate:` (the same workload can be both); a generating \
                         component takes {}",
                        Metric::generating_names()
                    ),
                ),
                None if b.metric.needs_generation() && !self.generate_written => cx.err(
                    at,
                    format!("`{}` of `{name}` needs a generation: `{name}` has no `generate:`", b.metric),
                    "add `generate: { prefill: 64, decode: 32 }` (the prompt's tokens, then the decode steps)",
                ),
                _ => {}
            }
        }
    }

    /// The component `name` (at `line`) with these settings, built by workload `kind`.
    pub(super) fn into_component(self, name: String, line: usize, kind: String, kind_pos: Pos) -> Component {
        let d = self.defaults;
        Component {
            name,
            line,
            kind,
            kind_pos,
            config: self.config,
            batch_size: d.batch_size,
            dtype: d.dtype,
            seed: d.seed,
            tolerance: d.tolerance,
            drift: d.drift.map(|(p, _)| p),
            timing: d.timing,
            budgets: self.budgets,
            checkpoint: self.checkpoint,
            checkpoint_pos: self.checkpoint_pos,
            reference: None,
            master_dtype: self.master_dtype,
            spans: self.spans,
            generate_pos: self.generate.map_or(self.checkpoint_pos, |(_, p)| p),
            generate: self.generate.map(|(g, _)| g),
        }
    }
}

impl Ctx {
    /// `spans: [attn, mlp, linear]`: each a span name as the model's
    /// `tracing::span!` writes it, listed once.
    fn span_names(&mut self, node: &Node) -> Option<Vec<SpanName>> {
        let hint = "write `spans: [attn, mlp]`: the names the model's `tracing` spans carry";
        let Node::Seq { items, pos } = node else {
            self.wrong_kind(node, "`spans`", "a list", hint);
            return None;
        };
        if items.is_empty() {
            self.err(*pos, "`spans` is empty", "list at least one span name, or leave `spans` out to attribute every span but the leaves (`linear`, `rms-norm` ...)");
            return None;
        }
        let mut out: Vec<SpanName> = Vec::new();
        for item in items {
            let Some(name) = self.text(item, "a span name") else {
                continue;
            };
            let name = name.trim();
            // A name from the model's code (`attn`, `rms-norm`): none of the
            // marks gate writes between and after names, nor what would be
            // markup, a mention or a line break where reports show it.
            let foreign = |c: char| c.is_whitespace() || c.is_control() || ".#`<>@|".contains(c);
            if name.is_empty() || name.contains(foreign) || name.chars().count() > 256 {
                self.err(
                    item.pos(),
                    format!("`{}` is not a span name", name.escape_debug()),
                    "a span's name is the one word the model's code gives it (256 characters at most): no `.` or `#` \
                     (gate writes those between and after names), spaces, `<`, `>`, `@`, `|` or backticks",
                );
            } else if out.iter().any(|s| s.name == name) {
                self.err(
                    item.pos(),
                    format!("span `{name}` is listed twice"),
                    "list each name once",
                );
            } else {
                let p = item.pos();
                out.push(SpanName {
                    name: name.to_string(),
                    line: p.line,
                    col: p.col,
                });
            }
        }
        Some(out)
    }

    /// `generate: { prefill: 64, decode: 32 }`: prefill at least 1, decode
    /// at least 3 (the cache is read from the second step on, and the
    /// steps after it are compared by halves).
    fn generate(&mut self, node: &Node) -> Option<Generate> {
        let hint = "write `generate: { prefill: 64, decode: 32 }`: the prompt's tokens, then the decode steps";
        let Node::Map { entries, pos } = node else {
            self.wrong_kind(node, "`generate`", "a mapping", hint);
            return None;
        };
        self.known_keys(entries, GENERATE_KEYS, "generate");
        let prefill = match find(entries, "prefill") {
            Some(n) => self.positive_int(n, "generate.prefill"),
            None => {
                self.err(*pos, "missing `generate.prefill`", hint);
                None
            }
        };
        let decode = match find(entries, "decode") {
            Some(n) => {
                let d = self.positive_int(n, "generate.decode");
                if let Some(few @ 1..=2) = d {
                    self.err(
                        n.pos(),
                        format!("generate.decode must be at least 3, found {few}"),
                        "give at least 3 decode steps: the cache's growth is read from the second on, by halves",
                    );
                    return None;
                }
                d
            }
            None => {
                self.err(*pos, "missing `generate.decode`", hint);
                None
            }
        };
        Some(Generate {
            prefill: prefill? as usize,
            decode: decode? as usize,
        })
    }

    fn timing(&mut self, node: &Node, base: Timing) -> Timing {
        let mut t = base;
        let Some(entries) = self.map(node, "timing") else {
            return t;
        };
        self.known_keys(entries, TIMING_KEYS, "timing");
        for (key, _, value) in entries {
            match key.as_str() {
                "warmup" => {
                    t.warmup = self.non_negative_int(value, "timing.warmup").unwrap_or(t.warmup as u64) as usize
                }
                "steps" => t.steps = self.positive_int(value, "timing.steps").unwrap_or(t.steps as u64) as usize,
                "pairs" => {
                    t.pairs = self
                        .non_negative_int(value, "timing.pairs")
                        .map(|n| n as usize)
                        .or(t.pairs)
                }
                _ => {}
            }
        }
        t
    }

    /// `checkpoint: { chunk: N }` (positions per recomputed chunk) or
    /// `checkpoint: none`. `Err` when it is malformed (already reported).
    fn checkpoint(&mut self, node: &Node) -> Result<Option<usize>, ()> {
        let hint = "write `checkpoint: { chunk: 64 }` (positions per recomputed chunk), or `checkpoint: none`";
        let (entries, pos) = match node {
            Node::Map { entries, pos } => (entries, pos),
            Node::Scalar { text, .. } if text.trim() == "none" => return Ok(None),
            other => {
                let found = match other {
                    Node::Scalar { text, .. } => format!("`{text}`"),
                    n => n.kind().to_string(),
                };
                self.err(
                    other.pos(),
                    format!("`checkpoint` must be `{{ chunk: N }}` or `none`, found {found}"),
                    hint,
                );
                return Err(());
            }
        };
        self.known_keys(entries, CHECKPOINT_KEYS, "checkpoint");
        match find(entries, "chunk") {
            Some(n) => self
                .positive_int(n, "checkpoint.chunk")
                .map(|c| Some(c as usize))
                .ok_or(()),
            None => {
                // An unknown key was most likely the chunk misspelt: said once, above.
                if entries.is_empty() {
                    self.err(*pos, "missing `checkpoint.chunk`", hint);
                }
                Err(())
            }
        }
    }

    /// Master weights only make sense with a half-precision compute dtype.
    fn check_master(&mut self, master: Option<DType>, dtype: DType, pos: Pos, name: &str) -> Option<DType> {
        if master.is_some() && dtype == DType::F32 {
            self.err(
                pos,
                format!("`master_weights` of `{name}` needs `dtype: bf16` or `f16`; `{name}` computes in f32"),
                "set `dtype: bf16` (or f16) with it, or remove `master_weights`",
            );
            return None;
        }
        master
    }

    /// A component's (or a variant's) `budgets:` mapping.
    fn budgets(&mut self, bn: &Node, name: &str) -> Vec<Budget> {
        let mut budgets = Vec::new();
        let Some(bentries) = self.map(bn, &format!("budgets of `{name}`")) else {
            return budgets;
        };
        let names: Vec<&str> = Metric::ALL.iter().map(|m| m.name()).collect();
        for (key, kpos, value) in bentries {
            let Some(metric) = Metric::parse(key) else {
                self.err(
                    *kpos,
                    format!("unknown metric `{key}` in the budgets of `{name}`"),
                    suggest(key, &names, "metrics", "metrics"),
                );
                continue;
            };
            if let Some(limit) = self.limit(value, metric.unit(), &format!("`{name}.{key}`")) {
                budgets.push(Budget {
                    metric,
                    limit,
                    line: kpos.line,
                    col: kpos.col,
                });
            }
        }
        budgets
    }
}
