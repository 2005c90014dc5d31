//! Attribution from the `tracing` spans a model already opens. The harness
//! installs [`install`] as the process's subscriber before the model is
//! built; each span the model then enters becomes a scope ([`enter`]), so
//! it is a block with a scope's accounting: nested by span, kept after the
//! forward, peak above entry. A transformers crate's models open TRACE spans
//! named `model`, `block`, `attn`, `mlp` ... created once per layer when the
//! model is built, so a layer is told apart by the order its span was
//! created in within its model's build: `block#0` … `block#3` (or by an
//! index field the span carries, `layer_idx = 3`). The adapter calls
//! [`new_build`] before each build, so a second model built from the same
//! weights (the inference model beside the trained one) numbers its layers
//! from 0 again. Leaf spans (`linear`, `rms-norm`: the transformers crate's
//! `with_tracing` wrappers) are rolled into their parent unless asked for.
//! A span that is the only one of its name under its parent block needs no
//! number (`block#2.mlp`); which are is learnt from the spans entered so far,
//! so the runner's warm-up forward settles it before anything is recorded.
//!
//! Bookkeeping: the tables are allocated when the first span is made, with
//! room for [`SPANS_KEPT`] live spans and [`NAMES_KEPT`] names, and a
//! thread's stack of open spans when it first enters one. The runner's
//! warm-up builds and steps a throwaway model first, so for a model that
//! opens spans that happens before anything is measured, and a model that
//! opens none costs nothing at all. Creating and entering spans then
//! allocates nothing of the subscriber's own inside a measured phase (a
//! scope's path is allocated on entry, as for [`crate::scoped`]). Past that
//! room spans still work; the tables grow and their bytes are counted where
//! they grow.

use std::cell::RefCell;
use std::num::NonZeroU64;
use std::sync::{Arc, Mutex};

use tracing::field::{Field, Visit};
use tracing::level_filters::LevelFilter;
use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::{Interest, Subscriber};
use tracing::{Event, Metadata};

use crate::scope::{enter, ScopeGuard};

/// Live spans the tables hold without growing.
pub const SPANS_KEPT: usize = 4096;
/// Distinct span names the tables hold without growing.
pub const NAMES_KEPT: usize = 256;
/// Spans open at once on a thread without growing its stack.
const DEPTH_KEPT: usize = 256;

/// The spans a transformers crate wraps single layers in (its
/// `with_tracing` module): rolled into the enclosing block by default.
pub const LEAF_SPANS: &[&str] = &[
    "linear",
    "embedding",
    "conv1d",
    "conv2d",
    "qmatmul",
    "layer-norm",
    "rms-norm",
];

/// Field names that give a span's layer index (`span!(TRACE, "block", layer_idx = i)`).
const INDEX_FIELDS: &[&str] = &[
    "layer_idx",
    "layer_index",
    "layer_id",
    "layer",
    "block_idx",
    "idx",
    "index",
];

/// Which spans become blocks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum SpanSelection {
    /// Every span but the [`LEAF_SPANS`].
    #[default]
    AllButLeaves,
    /// Exactly these names (leaf spans included when named).
    Only(Vec<String>),
}

struct Slot {
    name: &'static str,
    /// The model build it was made in (see [`new_build`]).
    build: u64,
    number: u32,
    /// Whether the number came from an index field (never reused by another span).
    from_field: bool,
    refs: u32,
    live: bool,
}

/// The spans of one name made in one build.
struct Name {
    name: &'static str,
    build: u64,
    /// Creation numbers held by live spans of this name (the first 128).
    used: u128,
    /// Live spans of this name.
    live: u32,
    /// Past 128 live spans: the next number.
    next: u32,
}

struct Table {
    slots: Vec<Slot>,
    free: Vec<usize>,
    names: Vec<Name>,
    /// Under each parent block, the spans of each name entered there: a
    /// name entered once under its parent needs no number
    /// (`block#2.mlp`). The warm-up's forward fills it before anything is
    /// recorded, so a block is named the same from its first call.
    siblings: Vec<Siblings>,
    /// Every name entered so far, in the order first entered.
    entered: Vec<&'static str>,
}

/// The model build spans are made in now (see [`new_build`]).
static BUILD: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Tells the subscriber a model is about to be built: the spans made from
/// now on number their layers from 0 again, apart from an earlier model's.
pub fn new_build() {
    BUILD.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
}

impl Table {
    /// Empty, with no room yet (see [`Table::make_room`]).
    const fn new() -> Self {
        Table {
            slots: Vec::new(),
            free: Vec::new(),
            names: Vec::new(),
            entered: Vec::new(),
            siblings: Vec::new(),
        }
    }

    /// The room for [`SPANS_KEPT`] spans and [`NAMES_KEPT`] names, once.
    fn make_room(&mut self) {
        if self.slots.capacity() == 0 {
            self.slots.reserve_exact(SPANS_KEPT);
            self.free.reserve_exact(SPANS_KEPT);
            self.names.reserve_exact(NAMES_KEPT);
            self.entered.reserve_exact(NAMES_KEPT);
            self.siblings.reserve_exact(SPANS_KEPT);
        }
    }

    fn name_mut(&mut self, name: &'static str, build: u64) -> &mut Name {
        let i = match self.names.iter().position(|n| n.name == name && n.build == build) {
            Some(i) => i,
            None => {
                self.names.push(Name {
                    name,
                    build,
                    used: 0,
                    live: 0,
                    next: 128,
                });
                self.names.len() - 1
            }
        };
        &mut self.names[i]
    }
}

thread_local! {
    /// The spans entered on this thread, innermost last, each with the
    /// scope it opened (none for a span rolled into its parent).
    static OPEN: RefCell<Vec<Open>> = const { RefCell::new(Vec::new()) };
}

/// A span entered on this thread.
struct Open {
    id: u64,
    /// Its name and number, when it opened a scope (the parent of the
    /// spans entered inside it).
    block: Option<(&'static str, u32)>,
    /// The scope it opened, closed when it exits.
    _guard: Option<ScopeGuard>,
}

/// Which numbers the spans of one name entered under one parent had.
struct Siblings {
    parent: (&'static str, u32),
    name: &'static str,
    first: u32,
    several: bool,
}

/// The subscriber that turns spans into scopes.
pub struct SpanScopes {
    table: Arc<Mutex<Table>>,
    selection: SpanSelection,
}

/// What the installed subscriber saw, asked after the model ran.
#[derive(Clone)]
pub struct SpanHandle {
    table: Arc<Mutex<Table>>,
}

impl SpanHandle {
    /// The names of the spans entered so far, in the order first made.
    pub fn entered(&self) -> Vec<&'static str> {
        let t = self.table.lock().unwrap_or_else(|p| p.into_inner());
        t.entered.clone()
    }
}

impl SpanScopes {
    /// A subscriber attributing `selection`'s spans; its tables have room
    /// for [`SPANS_KEPT`] spans. Make it (and [`install`] it) before anything
    /// is measured.
    pub fn new(selection: SpanSelection) -> Self {
        SpanScopes {
            table: Arc::new(Mutex::new(Table::new())),
            selection,
        }
    }

    /// A handle to ask what this subscriber saw once it is installed.
    pub fn handle(&self) -> SpanHandle {
        SpanHandle {
            table: self.table.clone(),
        }
    }

    fn table(&self) -> std::sync::MutexGuard<'_, Table> {
        // A poisoned lock only means a panic elsewhere; the table is still whole.
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn attributed(&self, name: &str) -> bool {
        match &self.selection {
            SpanSelection::AllButLeaves => !LEAF_SPANS.contains(&name),
            SpanSelection::Only(names) => names.iter().any(|n| n == name),
        }
    }
}

/// Reads a span's index field, if it has one.
struct IndexField(Option<u64>);

impl Visit for IndexField {
    fn record_u64(&mut self, field: &Field, value: u64) {
        if INDEX_FIELDS.contains(&field.name()) {
            self.0 = Some(value);
        }
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        if INDEX_FIELDS.contains(&field.name()) && value >= 0 {
            self.0 = Some(value as u64);
        }
    }
    fn record_debug(&mut self, _field: &Field, _value: &dyn std::fmt::Debug) {}
}

impl Subscriber for SpanScopes {
    fn register_callsite(&self, metadata: &'static Metadata<'static>) -> Interest {
        if metadata.is_span() {
            Interest::always()
        } else {
            Interest::never()
        }
    }

    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        metadata.is_span()
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        Some(LevelFilter::TRACE)
    }

    fn new_span(&self, span: &Attributes<'_>) -> Id {
        let name = span.metadata().name();
        let mut index = IndexField(None);
        span.record(&mut index);
        let build = BUILD.load(std::sync::atomic::Ordering::Relaxed);
        let mut t = self.table();
        t.make_room();
        let n = t.name_mut(name, build);
        n.live += 1;
        let (number, from_field) = match index.0 {
            Some(i) => (i.min(u32::MAX as u64) as u32, true),
            // The lowest number no live span of this name holds: a span
            // made again on every call gets the same number every call.
            None if n.used != u128::MAX => {
                let k = n.used.trailing_ones();
                n.used |= 1 << k;
                (k, false)
            }
            None => {
                n.next += 1;
                (n.next - 1, false)
            }
        };
        let slot = Slot {
            name,
            build,
            number,
            from_field,
            refs: 1,
            live: true,
        };
        let i = match t.free.pop() {
            Some(i) => {
                t.slots[i] = slot;
                i
            }
            None => {
                t.slots.push(slot);
                t.slots.len() - 1
            }
        };
        Id::from_non_zero_u64(NonZeroU64::MIN.saturating_add(i as u64))
    }

    fn record(&self, _span: &Id, _values: &Record<'_>) {}

    fn record_follows_from(&self, _span: &Id, _follows: &Id) {}

    fn event(&self, _event: &Event<'_>) {}

    fn enter(&self, span: &Id) {
        let i = (span.into_u64() - 1) as usize;
        // The innermost span entered here that is a block: the parent.
        let parent = OPEN
            .with(|o| o.borrow().iter().rev().find_map(|s| s.block))
            .unwrap_or(("", 0));
        let (name, number, numbered) = {
            let mut t = self.table();
            let Some(s) = t.slots.get(i).filter(|s| s.live) else {
                return;
            };
            let (name, number, from_field) = (s.name, s.number, s.from_field);
            if !t.entered.contains(&name) {
                t.entered.push(name);
            }
            let several = match t.siblings.iter_mut().find(|x| x.parent == parent && x.name == name) {
                Some(x) => {
                    x.several |= x.first != number;
                    x.several
                }
                None => {
                    t.siblings.push(Siblings {
                        parent,
                        name,
                        first: number,
                        several: false,
                    });
                    false
                }
            };
            (name, number, from_field || several)
        };
        let attributed = self.attributed(name);
        let guard = attributed.then(|| {
            if numbered {
                enter(&format!("{name}#{number}"))
            } else {
                enter(name)
            }
        });
        OPEN.with(|o| {
            let mut open = o.borrow_mut();
            if open.capacity() == 0 {
                open.reserve_exact(DEPTH_KEPT);
            }
            open.push(Open {
                id: span.into_u64(),
                block: attributed.then_some((name, number)),
                _guard: guard,
            })
        });
    }

    fn exit(&self, span: &Id) {
        let id = span.into_u64();
        OPEN.with(|o| {
            let mut open = o.borrow_mut();
            // Spans exit in the order they were entered; a span exited out
            // of order closes the scopes opened inside it with it.
            if let Some(at) = open.iter().rposition(|s| s.id == id) {
                while open.len() > at {
                    drop(open.pop());
                }
            }
        });
    }

    fn clone_span(&self, span: &Id) -> Id {
        let i = (span.into_u64() - 1) as usize;
        if let Some(s) = self.table().slots.get_mut(i) {
            s.refs += 1;
        }
        span.clone()
    }

    fn try_close(&self, span: Id) -> bool {
        let i = (span.into_u64() - 1) as usize;
        let mut t = self.table();
        let Some(s) = t.slots.get_mut(i).filter(|s| s.live) else {
            return false;
        };
        s.refs = s.refs.saturating_sub(1);
        if s.refs > 0 {
            return false;
        }
        s.live = false;
        let (name, build, number, from_field) = (s.name, s.build, s.number, s.from_field);
        let n = t.name_mut(name, build);
        n.live = n.live.saturating_sub(1);
        if !from_field && number < 128 {
            n.used &= !(1u128 << number);
        }
        // A build's names go with its last span: the table stays its size.
        if n.live == 0 {
            if let Some(at) = t.names.iter().position(|n| n.name == name && n.build == build) {
                t.names.swap_remove(at);
            }
        }
        t.free.push(i);
        true
    }
}

/// Why spans cannot be attributed in this process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SpansUnavailable {
    /// `tracing`'s compile-time ceiling is below TRACE: a `max_level_*` or
    /// `release_max_level_*` feature of `tracing` is on somewhere in the
    /// build, and TRACE spans were compiled out. Holds the ceiling.
    CompiledOut(LevelFilter),
    /// The process already has a global subscriber (the harness set one).
    SubscriberSet,
}

impl std::fmt::Display for SpansUnavailable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SpansUnavailable::CompiledOut(level) => {
                let feature = match *level {
                    LevelFilter::OFF => "off".to_string(),
                    l => l.to_string().to_lowercase(),
                };
                write!(
                    f,
                    "this build compiled TRACE spans out: `tracing`'s features `max_level_{feature}` or \
                     `release_max_level_{feature}` are on (its static ceiling is {level}); \
                     hint: `cargo tree -e features -i tracing` shows which crate turns it on"
                )
            }
            SpansUnavailable::SubscriberSet => write!(
                f,
                "the harness already set a global `tracing` subscriber, so gate could not install its own; \
                 hint: do not set one in the harness's `main` (gate's `main!` installs its own)"
            ),
        }
    }
}

/// Installs `scopes` as the process's global subscriber (before the model
/// is first built).
pub fn install(scopes: SpanScopes) -> Result<(), SpansUnavailable> {
    if tracing::level_filters::STATIC_MAX_LEVEL < LevelFilter::TRACE {
        return Err(SpansUnavailable::CompiledOut(tracing::level_filters::STATIC_MAX_LEVEL));
    }
    tracing::subscriber::set_global_default(scopes).map_err(|_| SpansUnavailable::SubscriberSet)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scope::Recorder;
    use crate::MemoryProbe;
    use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

    #[derive(Default)]
    struct FakeProbe {
        live: AtomicU64,
        peak: AtomicU64,
    }

    impl FakeProbe {
        fn alloc(&self, n: u64) {
            let now = self.live.fetch_add(n, Relaxed) + n;
            self.peak.fetch_max(now, Relaxed);
        }
    }

    impl MemoryProbe for FakeProbe {
        fn backend(&self) -> &'static str {
            "fake"
        }
        fn live(&self) -> u64 {
            self.live.load(Relaxed)
        }
        fn peak(&self) -> u64 {
            self.peak.load(Relaxed)
        }
        fn reset_peak(&self) {
            self.peak.store(self.live.load(Relaxed), Relaxed);
        }
    }

    /// A model as a transformers crate writes one: spans made when built,
    /// entered on each forward.
    struct Block {
        span: tracing::Span,
        linear: tracing::Span,
    }

    #[test]
    fn spans_become_numbered_nested_blocks_and_leaves_roll_into_their_parent() {
        let dispatch = tracing::Dispatch::new(SpanScopes::new(SpanSelection::AllButLeaves));
        tracing::dispatcher::with_default(&dispatch, || {
            let model = tracing::span!(tracing::Level::TRACE, "model");
            let blocks: Vec<Block> = (0..3)
                .map(|_| Block {
                    span: tracing::span!(tracing::Level::TRACE, "block"),
                    linear: tracing::span!(tracing::Level::TRACE, "linear"),
                })
                .collect();
            let layer = tracing::span!(tracing::Level::TRACE, "layer", layer_idx = 7u64);
            let probe = Arc::new(FakeProbe::default());
            let forward = || {
                let _m = model.enter();
                for (i, b) in blocks.iter().enumerate() {
                    let _b = b.span.enter();
                    probe.alloc(10 * (i as u64 + 1));
                    let _l = b.linear.enter();
                    probe.alloc(1);
                }
                let _l = layer.enter();
                probe.alloc(100);
            };
            // The runner's warm-up forward: siblings are known from then on.
            forward();
            let rec = Recorder::new(probe.clone());
            let ((), _, stats) = rec.span(true, forward);
            let got: Vec<(&str, i64)> = stats.iter().map(|b| (b.name.as_str(), b.retained_bytes)).collect();
            assert_eq!(
                got,
                [
                    ("model", 163),
                    ("model.layer#7", 100),
                    ("model.block#2", 31),
                    ("model.block#1", 21),
                    ("model.block#0", 11),
                ]
            );
        });
    }

    #[test]
    fn a_second_build_of_the_model_numbers_its_layers_from_zero() {
        let dispatch = tracing::Dispatch::new(SpanScopes::new(SpanSelection::AllButLeaves));
        tracing::dispatcher::with_default(&dispatch, || {
            let build = || -> Vec<tracing::Span> {
                new_build();
                (0..2).map(|_| tracing::span!(tracing::Level::TRACE, "block")).collect()
            };
            let (trained, inference) = (build(), build());
            let probe = Arc::new(FakeProbe::default());
            let forward = |model: &[tracing::Span]| {
                for b in model {
                    let _b = b.enter();
                    probe.alloc(1);
                }
            };
            forward(&trained);
            let rec = Recorder::new(probe.clone());
            let ((), _, stats) = rec.span(true, || forward(&inference));
            let names: Vec<&str> = stats.iter().map(|b| b.name.as_str()).collect();
            assert_eq!(names, ["block#0", "block#1"]);
            drop(trained);
        });
    }

    #[test]
    fn a_span_alone_of_its_name_in_its_parent_block_has_no_number() {
        let dispatch = tracing::Dispatch::new(SpanScopes::new(SpanSelection::AllButLeaves));
        tracing::dispatcher::with_default(&dispatch, || {
            // llama's shape: a block per layer, an `mlp` span in each.
            let layers: Vec<(tracing::Span, tracing::Span)> = (0..2)
                .map(|_| {
                    (
                        tracing::span!(tracing::Level::TRACE, "block"),
                        tracing::span!(tracing::Level::TRACE, "mlp"),
                    )
                })
                .collect();
            let probe = Arc::new(FakeProbe::default());
            let forward = || {
                for (b, m) in &layers {
                    let _b = b.enter();
                    let _m = m.enter();
                    probe.alloc(1);
                }
            };
            forward();
            let rec = Recorder::new(probe.clone());
            let ((), _, stats) = rec.span(true, forward);
            let mut names: Vec<&str> = stats.iter().map(|b| b.name.as_str()).collect();
            names.sort();
            assert_eq!(names, ["block#0", "block#0.mlp", "block#1", "block#1.mlp"]);
        });
    }

    #[test]
    fn a_span_made_on_every_call_keeps_its_number_and_named_leaves_are_kept() {
        let only = SpanSelection::Only(vec!["attn".into(), "linear".into()]);
        let dispatch = tracing::Dispatch::new(SpanScopes::new(only));
        tracing::dispatcher::with_default(&dispatch, || {
            let probe = Arc::new(FakeProbe::default());
            let rec = Recorder::new(probe.clone());
            let ((), _, stats) = rec.span(true, || {
                for _ in 0..2 {
                    let _a = tracing::span!(tracing::Level::TRACE, "attn").entered();
                    let _b = tracing::span!(tracing::Level::TRACE, "attn-rot").entered();
                    let _l = tracing::span!(tracing::Level::TRACE, "linear").entered();
                    probe.alloc(5);
                }
            });
            let got: Vec<(&str, i64, u64)> = stats
                .iter()
                .map(|b| (b.name.as_str(), b.retained_bytes, b.calls))
                .collect();
            // `attn-rot` is not asked for: its bytes stay in `attn`.
            assert_eq!(got, [("attn", 10, 2), ("attn.linear", 10, 2)]);
        });
    }
}
