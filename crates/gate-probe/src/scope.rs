//! Named scopes: a workload wraps each block in `scoped("name", ..)`; while a
//! [`Recorder`] is active the probe's live bytes are read at entry and exit,
//! so the report can say which block keeps the memory. Scopes nest
//! (`encoder_vsn.grn`), and a nested scope's peak reset never hides the
//! enclosing scope's peak: each frame keeps the highest peak seen before a
//! child reset it.
//!
//! The state is per thread: a span and the scopes inside it run on the
//! thread that drives the model (kernels may use other threads; their
//! allocations are still counted by the probe). With no span open on this
//! thread, a scope costs one thread-local read.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::timeline::{self, Sampler};
use super::MemoryProbe;

/// What one named block did, summed over its calls.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockStat {
    pub name: String,
    /// What backward keeps of it: where the probe tags each block's bytes
    /// (the CPU's counting allocator), the bytes it and its nested blocks
    /// made that still live when the span (the forward) ends, so what a
    /// later op frees (a graph cut after it) is not claimed, and a nested
    /// block never exceeds its parent; elsewhere the bytes still live at its
    /// exit minus at its entry, summed over calls.
    pub retained_bytes: i64,
    /// Highest live bytes above the entry level during any one call.
    pub peak_bytes: u64,
    pub calls: u64,
}

/// The bytes of one measured span.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    pub live_before: u64,
    pub live_after: u64,
    /// Highest live bytes (absolute) during the span.
    pub peak: u64,
}

impl Span {
    pub fn retained(&self) -> i64 {
        self.live_after as i64 - self.live_before as i64
    }
}

struct Frame {
    path: String,
    live_at_entry: u64,
    peak_seen: u64,
}

/// Block paths given a tag slot in this span, by their hash: slot `i + 1`
/// is `PATH_KEYS[i]`. Static, as are the slots put back at each frame's
/// exit, so that tagging allocates nothing and leaves every figure's
/// bookkeeping as it was.
const PATHS_KEPT: usize = 1024;
static PATH_KEYS: [AtomicU64; PATHS_KEPT] = [const { AtomicU64::new(0) }; PATHS_KEPT];
static PATHS_USED: AtomicUsize = AtomicUsize::new(0);
/// What each tagged block held at its exit, summed over calls (see
/// [`exit_bytes`]); `NO_EXIT` where no figure was read.
static EXIT_BYTES: [AtomicI64; PATHS_KEPT] = [const { AtomicI64::new(NO_EXIT) }; PATHS_KEPT];
const NO_EXIT: i64 = i64::MIN;
/// Frames deep whose outer slot is kept; deeper frames tag as their parent.
const DEPTH_TAGGED: usize = 256;
/// The tag slot current before the frame at each depth opened (`NONE`: it set none).
static OUTER_SLOT: [AtomicUsize; DEPTH_TAGGED] = [const { AtomicUsize::new(NONE) }; DEPTH_TAGGED];
const NONE: usize = usize::MAX;

struct State {
    probe: Arc<dyn MemoryProbe>,
    stack: Vec<Frame>,
    blocks: BTreeMap<String, BlockStat>,
    record_blocks: bool,
    /// Open [`quiet`] guards: scopes under them track peaks but record nothing.
    quiet: u32,
    /// The probe tags each block's bytes (see [`PATH_KEYS`]).
    tagged: bool,
}

thread_local! {
    static STATE: RefCell<Option<State>> = const { RefCell::new(None) };
}

fn with_state<R>(f: impl FnOnce(&mut Option<State>) -> R) -> R {
    STATE.with(|s| f(&mut s.borrow_mut()))
}

/// Measures spans on one probe. One recorder is active per process at a time.
pub struct Recorder {
    probe: Arc<dyn MemoryProbe>,
}

impl Recorder {
    pub fn new(probe: Arc<dyn MemoryProbe>) -> Self {
        Recorder { probe }
    }

    pub fn probe(&self) -> &Arc<dyn MemoryProbe> {
        &self.probe
    }

    /// Runs `f` and returns its bytes. Scopes inside `f` nest under the span;
    /// with `record_blocks` their figures are returned, ranked by retained bytes.
    pub fn span<T>(&self, record_blocks: bool, f: impl FnOnce() -> T) -> (T, Span, Vec<BlockStat>) {
        self.probe.sync();
        // Set up the bookkeeping before reading the baseline, so the
        // recorder's own allocations stay out of the span.
        let tagged = record_blocks && self.probe.tags_blocks();
        if tagged {
            crate::alloc::new_tag_generation();
            PATHS_USED.store(0, Relaxed);
            for o in &OUTER_SLOT {
                o.store(NONE, Relaxed);
            }
            for e in &EXIT_BYTES {
                e.store(NO_EXIT, Relaxed);
            }
        }
        with_state(|s| {
            *s = Some(State {
                probe: self.probe.clone(),
                stack: Vec::with_capacity(64),
                blocks: BTreeMap::new(),
                record_blocks,
                quiet: 0,
                tagged,
            })
        });
        self.probe.reset_peak();
        let live_before = self.probe.live();
        with_state(|s| {
            if let Some(st) = s.as_mut() {
                st.stack.push(Frame {
                    path: String::new(),
                    live_at_entry: live_before,
                    peak_seen: 0,
                });
            }
        });
        let out = f();
        self.probe.sync();
        let live_after = self.probe.live();
        timeline::record_end(live_after, self.probe.peak());
        let st = with_state(|s| s.take());
        let (root_peak, mut blocks) = match st {
            Some(mut st) => {
                let root = st.stack.first().map_or(0, |f| f.peak_seen);
                let mut blocks = std::mem::take(&mut st.blocks).into_values().collect::<Vec<_>>();
                if st.tagged {
                    crate::alloc::set_tag_slot(0);
                    kept_at_end(&mut blocks);
                }
                (root, blocks)
            }
            None => (0, Vec::new()),
        };
        let peak = root_peak.max(self.probe.peak());
        blocks.sort_by(|a, b| b.retained_bytes.cmp(&a.retained_bytes).then(a.name.cmp(&b.name)));
        (
            out,
            Span {
                live_before,
                live_after,
                peak,
            },
            blocks,
        )
    }

    /// [`Recorder::span`], with a timeline sample (into `sampler`) at every
    /// scope boundary and [`mark`] inside `f`, and at its end.
    pub fn span_sampled<T>(
        &self,
        sampler: &mut Sampler,
        record_blocks: bool,
        f: impl FnOnce() -> T,
    ) -> (T, Span, Vec<BlockStat>) {
        timeline::install(sampler);
        let out = self.span(record_blocks, f);
        timeline::uninstall(sampler);
        out
    }
}

/// Marks the start of phase `name` in a sampled span (see
/// [`Recorder::span_sampled`]); does nothing outside one.
pub fn mark(name: &str) {
    if !timeline::active() {
        return;
    }
    with_state(|s| {
        let Some(st) = s.as_mut() else { return };
        st.probe.sync();
        let peak_now = st.probe.peak();
        let Some(top) = st.stack.last_mut() else { return };
        top.peak_seen = top.peak_seen.max(peak_now);
        st.probe.reset_peak();
        timeline::record_phase(name, st.probe.live(), peak_now);
    });
}

/// Leaves its scope when dropped.
pub struct ScopeGuard {
    active: bool,
}

/// Enters the scope `name` (nested under any open scope) until the guard drops.
pub fn enter(name: &str) -> ScopeGuard {
    let active = with_state(|s| {
        let Some(st) = s.as_mut() else { return false };
        // The scope's own bookkeeping (its path, which the report keeps)
        // is no block's: untagged.
        let tagging = st.tagged && st.record_blocks && st.quiet == 0 && st.stack.len() < DEPTH_TAGGED;
        let outer = tagging.then(|| crate::alloc::set_tag_slot(0));
        st.probe.sync();
        let peak_now = st.probe.peak();
        let Some(top) = st.stack.last_mut() else {
            if let Some(outer) = outer {
                crate::alloc::set_tag_slot(outer);
            }
            return false;
        };
        top.peak_seen = top.peak_seen.max(peak_now);
        let path = if top.path.is_empty() {
            name.to_string()
        } else {
            format!("{}.{name}", top.path)
        };
        // What the block allocates from here is tagged with its slot (a
        // quiet scope's goes to its enclosing block's).
        let slot = if outer.is_some() { slot_of(&path) } else { 0 };
        let depth = st.stack.len();
        st.probe.reset_peak();
        let live = st.probe.live();
        timeline::record_enter(&path, live, peak_now);
        st.stack.push(Frame {
            path,
            live_at_entry: live,
            peak_seen: 0,
        });
        if let Some(outer) = outer {
            OUTER_SLOT[depth].store(outer, Relaxed);
            crate::alloc::set_tag_slot(slot);
        }
        true
    });
    ScopeGuard { active }
}

impl Drop for ScopeGuard {
    fn drop(&mut self) {
        if !self.active {
            return;
        }
        with_state(|s| {
            let Some(st) = s.as_mut() else { return };
            st.probe.sync();
            // The root frame is never popped here: it belongs to the span.
            if st.stack.len() < 2 {
                return;
            }
            let Some(frame) = st.stack.pop() else { return };
            // The exit's bookkeeping (the block's entry in the report) is no block's.
            let outer = OUTER_SLOT
                .get(st.stack.len())
                .map(|o| o.swap(NONE, Relaxed))
                .filter(|&o| o != NONE);
            if outer.is_some() {
                crate::alloc::set_tag_slot(0);
            }
            let peak_now = st.probe.peak();
            let peak = frame.peak_seen.max(peak_now);
            let live = st.probe.live();
            if let Some(parent) = st.stack.last_mut() {
                parent.peak_seen = parent.peak_seen.max(peak);
            }
            if timeline::active() {
                // The parent holds the peak so far: from here the probe's
                // peak is the next sample's, as at every boundary.
                timeline::record_exit(&frame.path, live, peak_now);
                st.probe.reset_peak();
            }
            if st.record_blocks && st.quiet == 0 {
                let retained = live as i64 - frame.live_at_entry as i64;
                let above = peak.saturating_sub(frame.live_at_entry);
                let entry = st.blocks.entry(frame.path.clone()).or_insert_with(|| BlockStat {
                    name: frame.path,
                    retained_bytes: 0,
                    peak_bytes: 0,
                    calls: 0,
                });
                entry.retained_bytes += retained;
                entry.peak_bytes = entry.peak_bytes.max(above);
                entry.calls += 1;
            }
            if let Some(outer) = outer {
                crate::alloc::set_tag_slot(outer);
            }
        });
    }
}

/// Each block's kept bytes at the span's end: what it and its nested
/// blocks made (their tagged bytes) that is still live. A block past the
/// tag slots keeps its exit figure.
fn kept_at_end(blocks: &mut [BlockStat]) {
    let used = PATHS_USED.load(Relaxed).min(PATHS_KEPT);
    let slot = |name: &str| {
        let key = path_key(name);
        PATH_KEYS[..used]
            .iter()
            .position(|p| p.load(Relaxed) == key)
            .map(|i| i + 1)
    };
    let kept: Vec<Option<i64>> = blocks
        .iter()
        .map(|b| {
            slot(&b.name)?;
            let nested = |c: &&BlockStat| {
                c.name == b.name || (c.name.starts_with(b.name.as_str()) && c.name[b.name.len()..].starts_with('.'))
            };
            Some(
                blocks
                    .iter()
                    .filter(nested)
                    .filter_map(|c| slot(&c.name))
                    .map(crate::alloc::tagged_live)
                    .sum(),
            )
        })
        .collect();
    for (b, k) in blocks.iter_mut().zip(kept) {
        if let (Some(k), Some(s)) = (k, slot(&b.name)) {
            EXIT_BYTES[s - 1].store(b.retained_bytes, Relaxed);
            b.retained_bytes = k;
        }
    }
}

/// What block `name` held at its exit (summed over its calls) in the last
/// span whose kept bytes were read at its end (the forward): above its kept
/// bytes, what an op after it freed (a graph cut downstream). `None` where
/// no such span ran or the block was not in it. Kept outside [`BlockStat`]
/// so that the figures' own bookkeeping, live in later phases, keeps its size.
pub fn exit_bytes(name: &str) -> Option<i64> {
    let used = PATHS_USED.load(Relaxed).min(PATHS_KEPT);
    let key = path_key(name);
    let i = PATH_KEYS[..used].iter().position(|p| p.load(Relaxed) == key)?;
    Some(EXIT_BYTES[i].load(Relaxed)).filter(|&e| e != NO_EXIT)
}

/// The tag slot of block `path` in this span, given one if it has none
/// (0: past the slots, untagged).
fn slot_of(path: &str) -> usize {
    let key = path_key(path);
    let used = PATHS_USED.load(Relaxed).min(PATHS_KEPT);
    if let Some(i) = PATH_KEYS[..used].iter().position(|p| p.load(Relaxed) == key) {
        return i + 1;
    }
    if used < PATHS_KEPT && used + 1 < crate::alloc::TAG_SLOTS {
        PATH_KEYS[used].store(key, Relaxed);
        PATHS_USED.store(used + 1, Relaxed);
        return used + 1;
    }
    0
}

/// A block path's key among the tag slots (hashing allocates nothing).
fn path_key(path: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    path.hash(&mut h);
    h.finish()
}

/// While a span is measured on this thread: `f` of the path of the
/// innermost scope open in it (`block0`, `encoder.block0`; empty outside
/// any scope), lent without a copy so that asking allocates nothing inside
/// the measured scope. `None` when nothing is measured. How a checkpointed
/// block is named in the report.
pub fn with_current_path<R>(f: impl FnOnce(&str) -> R) -> Option<R> {
    with_state(|s| {
        let st = s.as_ref()?;
        Some(f(st.stack.last().map_or("", |fr| fr.path.as_str())))
    })
}

/// Until dropped, scopes entered on this thread record no block figures (the
/// enclosing scope still sees their peaks).
pub struct QuietGuard {
    active: bool,
}

/// Silences block figures of nested scopes: a checkpointed block runs its
/// sub-blocks chunk by chunk and drops what they built, so their per-chunk
/// "retained" bytes would add up to memory that was never held at once.
/// The checkpointed block itself reports what it keeps and its peak (the
/// largest chunk).
pub fn quiet() -> QuietGuard {
    let active = with_state(|s| match s.as_mut() {
        Some(st) => {
            st.quiet += 1;
            true
        }
        None => false,
    });
    QuietGuard { active }
}

impl Drop for QuietGuard {
    fn drop(&mut self) {
        if self.active {
            with_state(|s| {
                if let Some(st) = s.as_mut() {
                    st.quiet = st.quiet.saturating_sub(1);
                }
            });
        }
    }
}

/// Runs `f` inside the scope `name`.
pub fn scoped<T>(name: &str, f: impl FnOnce() -> T) -> T {
    let _guard = enter(name);
    f()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

    /// A probe driven by hand, so the nesting logic is tested exactly.
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
        fn free(&self, n: u64) {
            self.live.fetch_sub(n, Relaxed);
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

    #[test]
    fn nested_scopes_keep_outer_peaks_and_attribute_retained_bytes() {
        let probe = Arc::new(FakeProbe::default());
        probe.alloc(1000); // live before the span
        let rec = Recorder::new(probe.clone());
        let ((), span, blocks) = rec.span(true, || {
            scoped("enc", || {
                probe.alloc(500);
                probe.free(500); // transient: peak 1500
                scoped("grn", || probe.alloc(100)); // retained by enc.grn
                scoped("grn", || probe.alloc(50));
            });
            scoped("dec", || {
                probe.alloc(20);
            });
        });
        assert_eq!(span.live_before, 1000);
        assert_eq!(span.live_after, 1170);
        assert_eq!(span.peak, 1500, "the child's peak reset must not hide the outer peak");
        let get = |n: &str| blocks.iter().find(|b| b.name == n).unwrap().clone();
        assert_eq!(get("enc").retained_bytes, 150);
        assert_eq!(get("enc").peak_bytes, 500);
        assert_eq!(
            get("enc.grn"),
            BlockStat {
                name: "enc.grn".into(),
                retained_bytes: 150,
                peak_bytes: 100,
                calls: 2
            }
        );
        assert_eq!(get("dec").retained_bytes, 20);
        assert_eq!(blocks[0].name, "enc"); // ranked by retained bytes (ties by name)
    }

    #[test]
    fn scopes_outside_a_span_cost_nothing_and_record_nothing() {
        assert_eq!(scoped("x", || 7), 7);
    }

    fn tags(t: &super::super::Timeline) -> Vec<(u64, u64, String)> {
        t.samples.iter().map(|s| (s.live, s.peak, s.event.tag())).collect()
    }

    #[test]
    fn a_sampled_span_records_each_boundary_with_the_peak_since_the_last_and_the_blocks_open_at_the_peak() {
        use super::super::timeline::{Sampler, TimelinePeak};
        let probe = Arc::new(FakeProbe::default());
        probe.alloc(1000); // the baseline
        let rec = Recorder::new(probe.clone());
        let mut sampler = Sampler::with_capacity(64);
        sampler.set_base(1000);
        let ((), span, _) = rec.span_sampled(&mut sampler, false, || {
            mark("forward");
            scoped("enc", || {
                probe.alloc(300);
                scoped("grn", || {
                    probe.alloc(500);
                    probe.free(500); // transient: the peak, 1800, inside enc.grn
                    probe.alloc(100);
                });
            });
            mark("backward");
            probe.alloc(50);
            probe.free(450);
        });
        let ((), _, _) = rec.span_sampled(&mut sampler, false, || {
            mark("inference");
            probe.alloc(10);
            probe.free(10);
        });
        // Outside a sampled span nothing is recorded.
        rec.span(false, || scoped("x", || mark("nothing")));
        let t = sampler.finish("fake").unwrap();
        let s = |live, peak, tag: &str| (live, peak, tag.to_string());
        assert_eq!(
            tags(&t),
            vec![
                s(0, 0, "phase:forward"),
                s(0, 0, "enter:enc"),
                s(300, 300, "enter:enc.grn"),
                s(400, 800, "exit:enc.grn"),
                s(400, 400, "exit:enc"),
                s(400, 400, "phase:backward"),
                s(0, 450, "end"),
                s(0, 0, "phase:inference"),
                s(0, 10, "end"),
            ]
        );
        assert_eq!(span.peak, 1800, "the scopes' bookkeeping is unchanged by sampling");
        assert_eq!(
            t.peak,
            Some(TimelinePeak {
                bytes: 800,
                sample: 3,
                phase: Some("forward".into()),
                blocks: Some(vec!["enc".into(), "enc.grn".into()]),
            })
        );
        assert_eq!((t.base_bytes, t.dropped, t.source.as_str()), (1000, 0, "fake"));
        assert_eq!(
            t.phases(),
            vec![
                ("forward".to_string(), 0, 5),
                ("backward".to_string(), 5, 6),
                ("inference".to_string(), 7, 8)
            ]
        );
        // The compact form, `"T_US LIVE PEAK EVENT"`, round-trips through JSON.
        let mut first = t.samples[..3].to_vec();
        first.iter_mut().for_each(|s| s.t_us = 0);
        let json = serde_json::to_string(&first).unwrap();
        assert_eq!(
            json,
            r#"["0 0 0 phase:forward","0 0 0 enter:enc","0 300 300 enter:enc.grn"]"#
        );
        let back: Vec<super::super::timeline::Sample> = serde_json::from_str(&json).unwrap();
        assert_eq!(back, first);
        let bad = |s: &str| {
            serde_json::from_str::<Vec<super::super::timeline::Sample>>(s)
                .unwrap_err()
                .to_string()
        };
        assert!(bad(r#"["0 0 0 jump:x"]"#).contains("unknown timeline event `jump:x`"));
        assert!(bad(r#"["0 x 0 end"]"#).contains("timeline sample `0 x 0 end`: no live bytes"));
    }

    #[test]
    fn past_the_bound_scope_boundaries_are_dropped_but_their_bytes_reach_the_next_sample() {
        use super::super::timeline::Sampler;
        let probe = Arc::new(FakeProbe::default());
        let rec = Recorder::new(probe.clone());
        // 16 slots are kept for phase marks and ends: room for 4 scope boundaries.
        let mut sampler = Sampler::with_capacity(20);
        rec.span_sampled(&mut sampler, false, || {
            mark("forward");
            for i in 0..5 {
                scoped(&format!("s{i}"), || {
                    if i == 3 {
                        probe.alloc(7000);
                        probe.free(7000);
                    }
                });
            }
            mark("backward");
        });
        let t = sampler.finish("fake").unwrap();
        let names: Vec<String> = t.samples.iter().map(|s| s.event.tag()).collect();
        assert_eq!(
            names,
            [
                "phase:forward",
                "enter:s0",
                "exit:s0",
                "enter:s1",
                "phase:backward",
                "end"
            ]
        );
        assert_eq!(t.dropped, 7);
        let peak = t.peak.unwrap();
        assert_eq!(
            (peak.bytes, peak.sample),
            (7000, 4),
            "the dropped part's peak lands on the next sample"
        );
        assert_eq!(peak.blocks, None, "which blocks were open there is not known");
    }
}
