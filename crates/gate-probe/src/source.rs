//! Where a probe's byte figures come from, and how the CUDA probe decides
//! it: whether the framework's tensors come from the device's default
//! memory pool (exact tensor bytes), or whether only NVML's per-process
//! figure is left (coarser: context, kernels and workspaces included).

/// The source of a run's byte figures: a fact of the run, carried into the
/// measurement and the report (`memory_source`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MemorySource {
    /// The counting global allocator (`--backend cpu`): exact bytes.
    Allocator,
    /// The CUDA device's default memory pool (`cuMemAllocAsync`): exact tensor bytes.
    CudaPool,
    /// NVML's figure of this process: the tensors were not allocated from
    /// the pool, so the figures are what the card holds for the process
    /// beyond its CUDA context as first made (library workspaces and loaded
    /// kernels included), and peaks are sampled at the probe's reads (scope
    /// boundaries, phase ends) rather than kept by a counter.
    NvmlProcess,
}

impl MemorySource {
    /// Whether the figures are exact bytes (an allocator's own count).
    pub fn is_exact(self) -> bool {
        self != MemorySource::NvmlProcess
    }
}

/// What the CUDA probe saw once the model's parameters were built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolEvidence {
    /// The pool's RESERVED_MEM_HIGH: what it ever took from the device
    /// (never reset by the probe, unlike USED_MEM_HIGH).
    pub pool_reserved_high: u64,
    /// How much more the device holds for this process than when the probe
    /// opened (NVML per process, else device-wide), if it can be read.
    pub process_growth: Option<u64>,
}

/// Why the source of the figures cannot be told: the pool is empty and
/// nothing says whether the process holds anything on the device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Undecidable;

/// Decides the source once the model's parameters are built (the first
/// phase that must put tensors on the device): the pool if it ever held
/// memory; NVML per process if the pool is still empty while the process
/// grew (the framework allocates elsewhere, e.g. `cuMemAlloc`); `None`
/// when nothing was allocated anywhere yet (keep reading the pool, and ask
/// again later). Never a silent 0: an empty pool with no way to see the
/// process is [`Undecidable`].
pub fn source_after_params(e: PoolEvidence) -> Result<Option<MemorySource>, Undecidable> {
    if e.pool_reserved_high > 0 {
        return Ok(Some(MemorySource::CudaPool));
    }
    match e.process_growth {
        Some(0) => Ok(None),
        Some(_) => Ok(Some(MemorySource::NvmlProcess)),
        None => Err(Undecidable),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decide(pool_reserved_high: u64, process_growth: Option<u64>) -> Result<Option<MemorySource>, Undecidable> {
        source_after_params(PoolEvidence {
            pool_reserved_high,
            process_growth,
        })
    }

    #[test]
    fn a_pool_that_held_memory_is_the_source_whatever_nvml_says() {
        assert_eq!(decide(2 << 20, Some(600 << 20)), Ok(Some(MemorySource::CudaPool)));
        assert_eq!(decide(1, Some(0)), Ok(Some(MemorySource::CudaPool)));
        assert_eq!(decide(1, None), Ok(Some(MemorySource::CudaPool)));
    }

    #[test]
    fn an_empty_pool_while_the_process_grew_switches_to_nvml() {
        assert_eq!(decide(0, Some(64 << 20)), Ok(Some(MemorySource::NvmlProcess)));
        assert_eq!(decide(0, Some(1)), Ok(Some(MemorySource::NvmlProcess)));
    }

    #[test]
    fn nothing_allocated_anywhere_is_not_decided_yet() {
        assert_eq!(decide(0, Some(0)), Ok(None));
    }

    #[test]
    fn an_empty_pool_and_no_view_of_the_process_is_never_a_silent_zero() {
        assert_eq!(decide(0, None), Err(Undecidable));
    }

    #[test]
    fn only_nvml_figures_are_not_exact() {
        assert!(MemorySource::Allocator.is_exact());
        assert!(MemorySource::CudaPool.is_exact());
        assert!(!MemorySource::NvmlProcess.is_exact());
    }

    #[test]
    fn sources_serialise_in_snake_case() {
        let json = serde_json::to_string(&MemorySource::NvmlProcess).unwrap();
        assert_eq!(json, "\"nvml_process\"");
        assert_eq!(
            serde_json::from_str::<MemorySource>("\"cuda_pool\"").unwrap(),
            MemorySource::CudaPool
        );
    }
}
