//! The CUDA probe. cudarc allocates candle's tensors from the device's
//! default memory pool (`cuMemAllocAsync`), so the pool's USED_MEM_CURRENT
//! and (resettable) USED_MEM_HIGH are exact tensor bytes, like PyTorch's
//! `memory_allocated` / `max_memory_allocated`. NVML gives what the card
//! holds for this process (context, kernels and library workspaces
//! included). The pool's release threshold is raised so it keeps its
//! high-water reservation: NVML then sees the footprint of the peak.

use std::sync::{Arc, Mutex};

use candle_core::cuda_backend::cudarc::driver::{sys, CudaContext};
use candle_core::Device;
use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::Nvml;

use super::DeviceInfo;
use super::{BackendError, MemoryProbe};

fn check(r: sys::CUresult, what: &str) -> Result<(), BackendError> {
    if r == sys::CUresult::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(BackendError {
            message: format!("{what} failed: {r:?}"),
            hint: "check the NVIDIA driver with `nvidia-smi`".into(),
        })
    }
}

pub struct CudaProbe {
    device: Device,
    ctx: Arc<CudaContext>,
    pool: sys::CUmemoryPool,
    nvml: Option<Nvml>,
    ordinal: u32,
    /// Device memory NVML saw in use before this process made its context.
    used_before_context: Option<u64>,
    /// A plain allocation holding the part of a larger card the spec does
    /// not have; behind a lock so the ratio steps can free it through `&self`.
    blocker: Mutex<Option<(sys::CUdeviceptr, u64)>>,
}

// SAFETY: the pool and blocker handles are plain driver handles, valid on
// any thread once the context is bound; every use binds the context first.
unsafe impl Send for CudaProbe {}
unsafe impl Sync for CudaProbe {}

impl CudaProbe {
    /// Opens GPU `ordinal`, its default pool, and NVML.
    pub fn open(ordinal: usize) -> Result<(Self, DeviceInfo), BackendError> {
        let nvml = Nvml::init().ok();
        let used_before_context = nvml
            .as_ref()
            .and_then(|n| n.device_by_index(ordinal as u32).ok())
            .and_then(|d| d.memory_info().ok())
            .map(|m| m.used);
        let device = Device::new_cuda(ordinal).map_err(|e| BackendError {
            message: format!("no usable CUDA GPU {ordinal}: {e}"),
            hint: "check `nvidia-smi`, or run with `--backend cpu`".into(),
        })?;
        let Device::Cuda(cuda) = &device else {
            unreachable!("new_cuda gives a CUDA device")
        };
        let ctx = cuda.cuda_stream().context().clone();
        if !ctx.has_async_alloc() {
            return Err(BackendError {
                message:
                    "this GPU or driver has no stream-ordered allocator (cuMemAllocAsync); pool figures would be wrong"
                        .into(),
                hint: "use a driver and GPU with memory-pool support, or `--backend cpu`".into(),
            });
        }
        ctx.bind_to_thread().map_err(|e| BackendError {
            message: format!("cannot bind the CUDA context: {e}"),
            hint: String::new(),
        })?;
        let mut pool: sys::CUmemoryPool = std::ptr::null_mut();
        // SAFETY: writes one pool handle into `pool`, for the context's own device.
        unsafe {
            check(
                sys::cuDeviceGetDefaultMemPool(&mut pool, ctx.cu_device()),
                "cuDeviceGetDefaultMemPool",
            )?
        };
        let probe = CudaProbe {
            device: device.clone(),
            ctx,
            pool,
            nvml,
            ordinal: ordinal as u32,
            used_before_context,
            blocker: Mutex::new(None),
        };
        probe.set(sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, u64::MAX)?;
        let info = probe.info();
        Ok((probe, info))
    }

    pub fn device(&self) -> &Device {
        &self.device
    }

    fn get(&self, attr: sys::CUmemPool_attribute) -> u64 {
        let _ = self.ctx.bind_to_thread();
        let mut v: u64 = 0;
        // SAFETY: the pool is the device's default pool (it lives as long as
        // the context); each attribute read here is one u64 into `v`.
        let r = unsafe { sys::cuMemPoolGetAttribute(self.pool, attr, &mut v as *mut u64 as *mut std::ffi::c_void) };
        if r == sys::CUresult::CUDA_SUCCESS {
            v
        } else {
            0
        }
    }

    fn set(&self, attr: sys::CUmemPool_attribute, mut v: u64) -> Result<(), BackendError> {
        let _ = self.ctx.bind_to_thread();
        // SAFETY: as in `get`: the default pool, one u64 read from `v`.
        unsafe {
            check(
                sys::cuMemPoolSetAttribute(self.pool, attr, &mut v as *mut u64 as *mut std::ffi::c_void),
                "cuMemPoolSetAttribute",
            )
        }
    }

    /// Bytes the pool holds from the device (≥ used).
    pub fn reserved(&self) -> u64 {
        self.get(sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT)
    }

    pub fn reserved_high(&self) -> u64 {
        self.get(sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH)
    }

    /// Free and total device memory as the driver sees it.
    pub fn mem_info(&self) -> Option<(u64, u64)> {
        let _ = self.ctx.bind_to_thread();
        let (mut free, mut total) = (0usize, 0usize);
        // SAFETY: writes two sizes, with the context bound.
        let r = unsafe { sys::cuMemGetInfo_v2(&mut free, &mut total) };
        (r == sys::CUresult::CUDA_SUCCESS).then_some((free as u64, total as u64))
    }

    /// What the card holds for this process: NVML's per-process figure, or
    /// the device-wide growth since before the context when the process
    /// table is not visible (containers with their own pid namespace).
    pub fn process_used(&self) -> Option<u64> {
        let nvml = self.nvml.as_ref()?;
        let dev = nvml.device_by_index(self.ordinal).ok()?;
        // The emulation block is this process's too, but it stands for memory
        // the gated card does not have: it is never part of the figures.
        let blocked = self.blocked().map_or(0, |(_, b)| b);
        let me = std::process::id();
        if let Ok(procs) = dev.running_compute_processes() {
            if let Some(p) = procs.iter().find(|p| p.pid == me) {
                if let UsedGpuMemory::Used(b) = p.used_gpu_memory {
                    return Some(b.saturating_sub(blocked));
                }
            }
        }
        let used = dev.memory_info().ok()?.used;
        Some(used.saturating_sub(self.used_before_context?).saturating_sub(blocked))
    }

    fn info(&self) -> DeviceInfo {
        let nvml = self.nvml.as_ref();
        let dev = nvml.and_then(|n| n.device_by_index(self.ordinal).ok());
        let name = dev
            .as_ref()
            .and_then(|d| d.name().ok())
            .unwrap_or_else(|| format!("CUDA device {}", self.ordinal));
        let total = self.mem_info().map(|(_, t)| t);
        let driver = nvml.and_then(|n| n.sys_driver_version().ok());
        let cuda = nvml
            .and_then(|n| n.sys_cuda_driver_version().ok())
            .map(|v| format!("{}.{}", v / 1000, (v % 1000) / 10));
        DeviceInfo {
            backend: "cuda".into(),
            name,
            total_bytes: total,
            driver,
            cuda,
        }
    }

    /// Capacity emulation: takes (outside the pool) everything above what a
    /// card of `capacity` bytes would have left for this process, so a model
    /// that would not fit there runs out of memory here.
    pub fn emulate_capacity(&mut self, capacity: u64) -> Result<u64, BackendError> {
        let (free, _total) = self.mem_info().ok_or_else(|| BackendError {
            message: "cuMemGetInfo failed".into(),
            hint: String::new(),
        })?;
        let held = self.process_used().unwrap_or(0);
        let allowed = capacity.saturating_sub(held);
        if free <= allowed {
            return Ok(0); // the card is not larger than the spec's
        }
        let block = free - allowed;
        let _ = self.ctx.bind_to_thread();
        let mut ptr: sys::CUdeviceptr = 0;
        // SAFETY: writes one device pointer; it is kept in `blocker` and freed once (`free_blocker`).
        unsafe {
            check(
                sys::cuMemAlloc_v2(&mut ptr, block as usize),
                "reserving the emulated card's missing memory (cuMemAlloc)",
            )?
        };
        *self.blocker.lock().unwrap_or_else(|e| e.into_inner()) = Some((ptr, block));
        Ok(block)
    }

    /// The emulation block, if one is held.
    fn blocked(&self) -> Option<(sys::CUdeviceptr, u64)> {
        *self.blocker.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Frees the emulation block, if one is held; its size.
    fn free_blocker(&self) -> Option<u64> {
        let (ptr, size) = self.blocker.lock().unwrap_or_else(|e| e.into_inner()).take()?;
        let _ = self.ctx.bind_to_thread();
        // SAFETY: `ptr` came from cuMemAlloc_v2 in `emulate_capacity` on this
        // context and was taken out of the lock, so it is freed exactly once.
        unsafe {
            let _ = sys::cuMemFree_v2(ptr);
        }
        Some(size)
    }
}

impl Drop for CudaProbe {
    fn drop(&mut self) {
        self.free_blocker();
    }
}

impl MemoryProbe for CudaProbe {
    fn backend(&self) -> &'static str {
        "cuda"
    }

    fn live(&self) -> u64 {
        self.get(sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_USED_MEM_CURRENT)
    }

    fn peak(&self) -> u64 {
        self.get(sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_USED_MEM_HIGH)
    }

    fn reset_peak(&self) {
        // Setting the high-water mark to 0 resets it to the current value.
        let _ = self.set(sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_USED_MEM_HIGH, 0);
    }

    fn sync(&self) {
        let _ = self.device.synchronize();
    }

    fn device_used(&self) -> Option<u64> {
        self.process_used()
    }

    fn context_bytes(&self) -> Option<u64> {
        Some(self.process_used()?.saturating_sub(self.reserved()))
    }

    fn pool_reserved_peak(&self) -> Option<u64> {
        Some(self.reserved_high())
    }

    fn lift_emulation(&self) -> Option<u64> {
        self.free_blocker()
    }
}
