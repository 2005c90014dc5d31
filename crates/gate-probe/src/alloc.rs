//! A counting global allocator: live bytes, peak bytes and a resettable peak,
//! with two relaxed atomic operations per allocation and no lock. It is
//! registered only by the binary (`main.rs`); the library just reads it.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering::Relaxed};

use super::MemoryProbe;

static LIVE: AtomicU64 = AtomicU64::new(0);
static PEAK: AtomicU64 = AtomicU64::new(0);
/// Bytes of compute scratch live now (see [`SCRATCH_ALIGN`]).
static SCRATCH: AtomicU64 = AtomicU64::new(0);

/// Allocations aligned to this many bytes or more are compute scratch, not
/// tensors: a framework's CPU matmul (the `gemm` crate) packs its operands into
/// buffers aligned to a cache line pair (128 B on x86-64 and aarch64), and
/// sizes them from the CPU's cache sizes (`/sys/devices/system/cpu/*/cache`).
/// Counting them would make a report depend on which CPU ran it; tensors,
/// parameters and optimizer state are plain `Vec`s aligned to their element.
/// They are counted apart ([`scratch_live`]), like cuBLAS's workspace lies
/// outside the CUDA pool that the GPU probe reads.
pub const SCRATCH_ALIGN: usize = 128;

/// Wraps the system allocator and counts what passes through it.
// Deliberately a plain unit struct (not `#[non_exhaustive]`): `gate::main!`
// names it as `static A: CountingAlloc = CountingAlloc;` in the adopter's crate.
pub struct CountingAlloc;

#[inline]
fn grew(n: u64) {
    let now = LIVE.fetch_add(n, Relaxed) + n;
    // Load first: the common case (below the peak) then costs no write.
    if now > PEAK.load(Relaxed) {
        PEAK.fetch_max(now, Relaxed);
    }
}

#[inline]
fn shrank(n: u64) {
    LIVE.fetch_sub(n, Relaxed);
}

// SAFETY: every call is forwarded to `System` with the caller's layout; the
// counters are only bookkeeping and never affect the returned pointers.
#[inline]
fn add(layout: Layout, n: u64) {
    if layout.align() >= SCRATCH_ALIGN {
        SCRATCH.fetch_add(n, Relaxed);
    } else {
        grew(n);
    }
}

#[inline]
fn sub(layout: Layout, n: u64) {
    if layout.align() >= SCRATCH_ALIGN {
        SCRATCH.fetch_sub(n, Relaxed);
    } else {
        shrank(n);
    }
}

/// Block tags: each counted allocation carries, in a header before the
/// bytes it hands out, the block (scope) that was innermost when it was
/// made, so the bytes a block made and that still live can be read at any
/// moment, the end of the forward included, wherever they were freed
/// ([`tagged_live`]). Compute scratch (aligned to [`SCRATCH_ALIGN`] or more)
/// carries none. A tag is its span's generation and the block's slot; a
/// tag of an older generation counts nowhere.
const HEADER: usize = 16;
/// Slots of blocks one span can tell apart; slot 0 is "no block".
pub const TAG_SLOTS: usize = 4096;
static TAG: AtomicU64 = AtomicU64::new(0);
static TAGGED: [AtomicI64; TAG_SLOTS] = [const { AtomicI64::new(0) }; TAG_SLOTS];
/// Whether this allocator is the process's: set by its first allocation.
static IN_USE: AtomicBool = AtomicBool::new(false);

/// The header's size for `layout` (0: none), and the layout asked of `System`.
#[inline]
fn with_header(layout: Layout) -> (usize, Layout) {
    if layout.align() >= SCRATCH_ALIGN {
        return (0, layout);
    }
    let header = HEADER.max(layout.align());
    // A size that overflows with its header fails as `System` would: null.
    match Layout::from_size_align(layout.size().saturating_add(header), header) {
        Ok(l) => (header, l),
        Err(_) => (0, layout),
    }
}

#[inline]
fn tag_add(tag: u64, n: i64) {
    if tag & 0xffff_ffff == 0 || tag >> 32 != TAG.load(Relaxed) >> 32 {
        return;
    }
    if let Some(slot) = TAGGED.get((tag & 0xffff_ffff) as usize) {
        slot.fetch_add(n, Relaxed);
    }
}

/// Starts a new generation of block tags: every slot reads 0, and bytes
/// tagged before count in none. The scope module calls it as a span that
/// records blocks starts.
pub(crate) fn new_tag_generation() {
    let generation = (TAG.load(Relaxed) >> 32).wrapping_add(1) & 0xffff_ffff;
    TAG.store(generation << 32, Relaxed);
    for slot in &TAGGED {
        slot.store(0, Relaxed);
    }
}

/// Tags what is allocated from now on with `slot` (0: no block); returns
/// the slot tagged before.
pub(crate) fn set_tag_slot(slot: usize) -> usize {
    let slot = if slot < TAG_SLOTS { slot as u64 } else { 0 };
    let before = TAG.load(Relaxed);
    TAG.store((before & !0xffff_ffff) | slot, Relaxed);
    (before & 0xffff_ffff) as usize
}

/// The bytes allocated under `slot` in this generation that are live now.
pub(crate) fn tagged_live(slot: usize) -> i64 {
    TAGGED.get(slot).map_or(0, |s| s.load(Relaxed))
}

/// Whether this allocator counts the process's allocations (so its tags
/// can be read).
pub(crate) fn tags_in_use() -> bool {
    IN_USE.load(Relaxed)
}

// SAFETY: every call is passed to `System` with the caller's layout grown
// by a header of at least 16 bytes aligned as the caller asked (so the
// bytes handed out, `header` past `System`'s pointer, keep the caller's
// alignment), and every pointer handed back is moved back by the same
// header before it reaches `System`; the header's first 8 bytes hold the
// tag. The counters are atomics and never allocate.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let (header, real) = with_header(layout);
        // SAFETY: the caller's contract for `alloc` (a non-zero-size layout) is `System`'s; `real` is larger.
        let p = unsafe { System.alloc(real) };
        if p.is_null() {
            return p;
        }
        // SAFETY: as `alloc` above; `header` bytes lie before what is handed out.
        unsafe { tagged(p, header, layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let (header, real) = with_header(layout);
        // SAFETY: as for `alloc`.
        let p = unsafe { System.alloc_zeroed(real) };
        if p.is_null() {
            return p;
        }
        // SAFETY: as for `alloc`.
        unsafe { tagged(p, header, layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        let (header, real) = with_header(layout);
        // SAFETY: `ptr` came from `alloc` with `layout`: `header` bytes before it are `System`'s
        // allocation of `real`, whose first 8 bytes hold the tag.
        unsafe {
            let base = ptr.sub(header);
            if header > 0 {
                tag_add((base as *const u64).read(), -(layout.size() as i64));
            }
            System.dealloc(base, real);
        }
        sub(layout, layout.size() as u64);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let (header, real) = with_header(layout);
        let Some(new_real) = new_size.checked_add(header) else {
            return std::ptr::null_mut();
        };
        // SAFETY: `ptr` came from `alloc` with `layout`, so `ptr - header` from `System` with
        // `real`; `System.realloc` keeps the header's bytes (the tag) and the alignment.
        let p = unsafe { System.realloc(ptr.sub(header), real, new_real) };
        if p.is_null() {
            return p;
        }
        // `realloc` keeps the alignment, so the bytes stay on one side.
        let old = layout.size() as u64;
        let new = new_size as u64;
        let tag = if header > 0 {
            // SAFETY: `p` is `System`'s block of `new_real` bytes, the tag in its first 8.
            unsafe { (p as *const u64).read() }
        } else {
            0
        };
        if new >= old {
            add(layout, new - old);
            tag_add(tag, (new - old) as i64);
        } else {
            sub(layout, old - new);
            tag_add(tag, -((old - new) as i64));
        }
        // SAFETY: `header < new_real`, within the block.
        unsafe { p.add(header) }
    }
}

/// Writes the tag into a new block's header and counts it; the pointer to
/// hand out.
///
/// # Safety
/// `p` is a fresh `System` block of `layout.size() + header` bytes aligned to `header`.
#[inline]
unsafe fn tagged(p: *mut u8, header: usize, layout: Layout) -> *mut u8 {
    IN_USE.store(true, Relaxed);
    add(layout, layout.size() as u64);
    if header == 0 {
        return p;
    }
    let tag = TAG.load(Relaxed);
    tag_add(tag, layout.size() as i64);
    // SAFETY: the block starts with `header >= 16` bytes of its own, aligned to at least 16.
    unsafe {
        (p as *mut u64).write(tag);
        p.add(header)
    }
}

/// Compute scratch live now: allocations of [`SCRATCH_ALIGN`] or more,
/// which the live and peak figures leave out.
pub fn scratch_live() -> u64 {
    SCRATCH.load(Relaxed)
}

/// Reads the counting allocator's figures.
#[derive(Debug, Default, Clone, Copy)]
pub struct CpuProbe;

impl CpuProbe {
    /// Whether the counting allocator is the process's global allocator:
    /// a 64 KiB allocation must show up in the live count.
    pub fn is_counting() -> bool {
        let before = LIVE.load(Relaxed);
        let v: Vec<u8> = Vec::with_capacity(64 * 1024);
        let during = LIVE.load(Relaxed);
        drop(std::hint::black_box(v));
        during >= before + 64 * 1024
    }
}

impl MemoryProbe for CpuProbe {
    fn backend(&self) -> &'static str {
        "cpu"
    }

    fn live(&self) -> u64 {
        LIVE.load(Relaxed)
    }

    fn peak(&self) -> u64 {
        PEAK.load(Relaxed)
    }

    fn reset_peak(&self) {
        PEAK.store(LIVE.load(Relaxed), Relaxed);
    }

    fn tags_blocks(&self) -> bool {
        tags_in_use()
    }
}

/// The host CPU as a device: its model name and total memory, when readable.
pub fn cpu_device_info() -> super::DeviceInfo {
    let name = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|s| s.trim().to_string())
        })
        .unwrap_or_else(|| std::env::consts::ARCH.to_string());
    let total = std::fs::read_to_string("/proc/meminfo").ok().and_then(|s| {
        let line = s.lines().find(|l| l.starts_with("MemTotal:"))?;
        let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kb * 1024)
    });
    super::DeviceInfo {
        backend: "cpu".into(),
        name,
        total_bytes: total,
        driver: None,
        cuda: None,
    }
}
