//! A counting global allocator: live bytes, peak bytes and a resettable peak,
//! with two relaxed atomic operations per allocation and no lock. It is
//! registered only by the binary (`main.rs`); the library just reads it.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use super::MemoryProbe;

static LIVE: AtomicU64 = AtomicU64::new(0);
static PEAK: AtomicU64 = AtomicU64::new(0);
/// Bytes of compute scratch live now (see [`SCRATCH_ALIGN`]).
static SCRATCH: AtomicU64 = AtomicU64::new(0);

/// Allocations aligned to this many bytes or more are compute scratch, not
/// tensors: candle's CPU matmul (the `gemm` crate) packs its operands into
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

// SAFETY: every call is passed straight to `System` with the caller's
// arguments, so `System`'s guarantees hold; the counters beside it are
// atomics and never allocate.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract for `alloc` (a non-zero-size layout) is `System`'s.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            add(layout, layout.size() as u64);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as for `alloc`.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            add(layout, layout.size() as u64);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from this allocator, i.e. from `System`, with `layout`.
        unsafe { System.dealloc(ptr, layout) };
        sub(layout, layout.size() as u64);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `ptr` came from `System` with `layout`; the caller's contract for `new_size` is `System`'s.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            // `realloc` keeps the alignment, so the bytes stay on one side.
            let old = layout.size() as u64;
            let new = new_size as u64;
            if new >= old {
                add(layout, new - old);
            } else {
                sub(layout, old - new);
            }
        }
        p
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
