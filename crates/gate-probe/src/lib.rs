//! Memory probes: where the bytes are read from. The CPU probe is a counting
//! global allocator; the CUDA probe (`cuda` feature) reads the device's
//! memory pool through the CUDA driver, loaded at run time. Scopes
//! attribute bytes to named model blocks on top of either, and a sampled
//! span records live bytes at every scope boundary (`timeline.rs`).
//!
//! No ML framework is in this crate's dependency tree: what a probe reads
//! is the allocator's (or the driver's) count of bytes, whatever made them.
//! Internal to gate: its API may change in any release.

pub mod alloc;
#[cfg(feature = "cuda")]
pub mod cuda;
pub mod lock;
pub mod scope;
pub mod source;
pub mod spans;
pub mod timeline;

pub use alloc::{cpu_device_info, CountingAlloc, CpuProbe};
pub use scope::{enter, mark, quiet, scoped, with_current_path, BlockStat, QuietGuard, Recorder, ScopeGuard, Span};
pub use source::MemorySource;
pub use timeline::{Sampler, Timeline};

/// Where models run and memory is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// The CPU, measured by the counting allocator (the embedded default).
    Cpu,
    /// An NVIDIA GPU, measured by the CUDA memory pool and NVML (`cuda` feature).
    Cuda,
    /// CUDA when this build has it and a GPU is usable, else the CPU.
    Auto,
}

impl Backend {
    pub fn name(self) -> &'static str {
        match self {
            Backend::Cpu => "cpu",
            Backend::Cuda => "cuda",
            Backend::Auto => "auto",
        }
    }
}

/// Why a backend cannot be used, and the fix when there is one: gate's one
/// problem type, under the name the probe's callers know it by.
pub type BackendError = gate_spec::hint::Problem;

/// Resolves `auto` and checks that the backend exists in this build.
pub fn resolve_backend(requested: Backend) -> Result<Backend, BackendError> {
    match requested {
        Backend::Cpu => Ok(Backend::Cpu),
        Backend::Auto => Ok(if cfg!(feature = "cuda") {
            Backend::Cuda
        } else {
            Backend::Cpu
        }),
        Backend::Cuda if cfg!(feature = "cuda") => Ok(Backend::Cuda),
        Backend::Cuda => Err(
            BackendError::new("--backend cuda needs a gate built with the `cuda` feature").with_hint(
                "build with `cargo build --release --features cuda` (see docs/gpu.md), or use `--backend cpu`",
            ),
        ),
    }
}

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
    /// Whether the bytes each block made can be told apart from the rest
    /// (the counting allocator's tags): a block's kept bytes are then what
    /// still lives, of what it made, when its span ends, not what it held
    /// as it exited. The default: no.
    fn tags_blocks(&self) -> bool {
        false
    }
    /// What the device holds for this process (context included), if the probe can see it.
    fn device_used(&self) -> Option<u64> {
        None
    }
    /// Process memory outside the tensor allocator (CUDA context, kernels, workspaces).
    fn context_bytes(&self) -> Option<u64> {
        None
    }
    /// The allocator's high-water reservation from the device.
    fn pool_reserved_peak(&self) -> Option<u64> {
        None
    }
    /// Ends capacity emulation: frees the memory held back so the process
    /// saw only the spec's card. Returns the bytes freed, or `None` when
    /// nothing was held back. The ratio steps run after it (see docs/levers.md).
    fn lift_emulation(&self) -> Option<u64> {
        None
    }
    /// Takes `bytes` of the device's memory outside the framework's
    /// allocator and holds them until [`MemoryProbe::release`]: the memory a
    /// longer KV cache would take, for one decode step to run beside
    /// (`kv_capacity_tokens` checked on an emulated card). `None`: this
    /// probe has no card to fill (the CPU's); `Some(Err)`: the device does
    /// not have them.
    fn hold(&self, _bytes: u64) -> Option<Result<(), BackendError>> {
        None
    }
    /// Frees what [`MemoryProbe::hold`] took, if anything.
    fn release(&self) {}
    /// Where the byte figures come from (see [`MemorySource`]).
    fn memory_source(&self) -> MemorySource {
        MemorySource::Allocator
    }
    /// Told once the model's parameters are built, the first point where a
    /// framework must have put tensors where the probe reads: a probe that
    /// can only tell then where its bytes come from decides here (the CUDA
    /// probe: its pool, or NVML per process). An error when no figure can
    /// be measured at all.
    fn params_built(&self) -> Result<(), BackendError> {
        Ok(())
    }
}

/// The device a measurement was taken on.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct DeviceInfo {
    pub backend: String,
    pub name: String,
    /// Total memory of the device, when the probe knows it.
    pub total_bytes: Option<u64>,
    pub driver: Option<String>,
    pub cuda: Option<String>,
}
