//! Memory probes: where the bytes are read from. The CPU probe is a counting
//! global allocator; the CUDA probe reads the device's memory pool. Scopes
//! attribute bytes to named model blocks on top of either.

pub mod alloc;
pub mod scope;

pub use alloc::{cpu_device_info, CountingAlloc, CpuProbe};
pub use scope::{enter, scoped, BlockStat, Recorder, ScopeGuard, Span};

/// Live and peak bytes of one memory domain.
pub trait MemoryProbe: Send + Sync {
    /// Short name of the backend this probe measures (`cpu`, `cuda`).
    fn backend(&self) -> &'static str;
    /// Bytes live now.
    fn live(&self) -> u64;
    /// Highest live bytes since the last reset.
    fn peak(&self) -> u64;
    /// Sets the peak to the current live bytes.
    fn reset_peak(&self);
    /// Waits for outstanding device work so the counters are current.
    fn sync(&self) {}
}
