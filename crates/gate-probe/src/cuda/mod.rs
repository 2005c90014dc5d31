//! The CUDA probe, framework-free: it talks to the CUDA driver and NVML
//! themselves, loaded at run time (`dl`), so it serves any framework
//! version (each ships its own cudarc) and a `cuda` build compiles without the
//! toolkit.
//!
//! cudarc (a framework's CUDA layer, 0.16 to 0.19 at least) allocates tensors
//! with `cuMemAllocAsync` from the device's default memory pool in the
//! device's primary context. The probe retains that same primary context,
//! so the pool's USED_MEM_CURRENT and (resettable) USED_MEM_HIGH are exact
//! tensor bytes, like PyTorch's `memory_allocated` / `max_memory_allocated`.
//! NVML gives what the card holds for this process (context, kernels and
//! library workspaces included). The pool's release threshold is raised so
//! it keeps its high-water reservation: NVML then sees the footprint of the peak.
//!
//! Whether a framework's tensors really come from the pool is checked once
//! its model's parameters are built ([`MemoryProbe::params_built`]): if the
//! pool never held memory while the process grew, the probe reads NVML per
//! process from then on and says so ([`MemorySource::NvmlProcess`]).

mod dl;
mod driver;
mod nvml;

use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use driver::{pool_attr, CuContext, CuDevice, CuDevicePtr, CuMemoryPool, Driver, CUDA_SUCCESS};
use nvml::Nvml;

use crate::source::{source_after_params, PoolEvidence};
use crate::{BackendError, DeviceInfo, MemoryProbe, MemorySource};

/// The CUDA driver's version (`cuDriverGetVersion`, e.g. `12.8`), without
/// a context: what `gate doctor` reports.
pub fn driver_version() -> Result<String, BackendError> {
    driver::driver()?.version().ok_or_else(|| {
        BackendError::new("the CUDA driver did not say its version")
            .with_hint("check the NVIDIA driver with `nvidia-smi`")
    })
}

/// The memory probe of one CUDA device.
pub struct CudaProbe {
    driver: &'static Driver,
    device: CuDevice,
    /// The device's primary context, retained by the probe (released on drop).
    ctx: CuContext,
    pool: CuMemoryPool,
    nvml: Option<Nvml>,
    /// Device memory NVML saw in use before this process made its context.
    used_before_context: Option<u64>,
    /// What the process held right after the probe made the context
    /// (NVML), and the device's used memory then (the driver): the growth
    /// `params_built` looks at counts from these.
    used_at_open: Option<u64>,
    driver_used_at_open: Option<u64>,
    /// A plain allocation holding the part of a larger card the spec does
    /// not have; behind a lock so the ratio steps can free it through `&self`.
    blocker: Mutex<Option<(CuDevicePtr, u64)>>,
    /// A plain allocation standing for a longer KV cache (`hold`).
    held: Mutex<Option<(CuDevicePtr, u64)>>,
    /// The source decided once the parameters were built; `None` until
    /// then (the pool is read).
    source: Mutex<Option<MemorySource>>,
    /// The highest process figure read since the last reset, in NVML mode
    /// (NVML keeps no high-water mark of its own).
    sampled_high: AtomicU64,
}

// SAFETY: the context, pool and blocker are plain driver handles, valid on
// any thread: every driver call through them binds the context first
// (`bind`), and the driver API is thread-safe. NVML is Send + Sync itself.
unsafe impl Send for CudaProbe {}
// SAFETY: as for Send; the mutable state is behind a Mutex or an atomic.
unsafe impl Sync for CudaProbe {}

/// The error of a device that cannot be opened, with the fix.
fn unusable(ordinal: usize, e: BackendError) -> BackendError {
    BackendError::new(format!("no usable CUDA GPU {ordinal}: {}", e.message))
        .with_hint("check `nvidia-smi`, or run with `--backend cpu`")
}

impl CudaProbe {
    /// Opens GPU `ordinal`: its primary context (the one a framework's cudarc
    /// uses), its default pool, and NVML. A machine without the driver gets
    /// an error with a hint, never a panic.
    pub fn open(ordinal: usize) -> Result<(Self, DeviceInfo), BackendError> {
        let driver = driver::driver()?;
        let ordinal_c = c_int::try_from(ordinal)
            .map_err(|_| BackendError::new(format!("GPU ordinal {ordinal} is out of range")))?;
        let nvml = Nvml::open(ordinal as u32).ok();
        let used_before_context = nvml.as_ref().and_then(Nvml::device_used);
        // SAFETY: cuInit's only argument is flags, which must be 0.
        let r = unsafe { (driver.cuInit)(0) };
        driver.check(r, "cuInit").map_err(|e| unusable(ordinal, e))?;
        let mut device: CuDevice = 0;
        // SAFETY: writes one device handle; the driver is initialised.
        let r = unsafe { (driver.cuDeviceGet)(&mut device, ordinal_c) };
        driver.check(r, "cuDeviceGet").map_err(|e| unusable(ordinal, e))?;
        let mut pools: c_int = 0;
        // SAFETY: writes one int, for a valid device and a cuda.h attribute.
        let r = unsafe {
            (driver.cuDeviceGetAttribute)(&mut pools, driver::DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, device)
        };
        if r != CUDA_SUCCESS || pools == 0 {
            return Err(BackendError::new(
                "this GPU or driver has no stream-ordered allocator (cuMemAllocAsync); pool figures would be wrong",
            )
            .with_hint("use a driver and GPU with memory-pool support, or `--backend cpu`"));
        }
        let mut ctx: CuContext = std::ptr::null_mut();
        // SAFETY: writes one context handle; released in `Drop`.
        let r = unsafe { (driver.cuDevicePrimaryCtxRetain)(&mut ctx, device) };
        driver
            .check(r, "cuDevicePrimaryCtxRetain")
            .map_err(|e| unusable(ordinal, e))?;
        let mut probe = CudaProbe {
            driver,
            device,
            ctx,
            pool: std::ptr::null_mut(),
            nvml,
            used_before_context,
            used_at_open: None,
            driver_used_at_open: None,
            blocker: Mutex::new(None),
            held: Mutex::new(None),
            source: Mutex::new(None),
            sampled_high: AtomicU64::new(0),
        };
        probe.bind()?;
        let mut pool: CuMemoryPool = std::ptr::null_mut();
        // SAFETY: writes one pool handle, for the context's own device.
        let r = unsafe { (driver.cuDeviceGetDefaultMemPool)(&mut pool, device) };
        driver.check(r, "cuDeviceGetDefaultMemPool")?;
        probe.pool = pool;
        probe.set(pool_attr::RELEASE_THRESHOLD, u64::MAX)?;
        probe.used_at_open = probe.process_used();
        probe.driver_used_at_open = probe.mem_info().map(|(free, total)| total.saturating_sub(free));
        let info = probe.info();
        Ok((probe, info))
    }

    /// Makes the probe's context current on this thread.
    fn bind(&self) -> Result<(), BackendError> {
        // SAFETY: the retained primary context stays valid until `Drop`.
        let r = unsafe { (self.driver.cuCtxSetCurrent)(self.ctx) };
        self.driver.check(r, "cuCtxSetCurrent")
    }

    fn get(&self, attr: c_int) -> u64 {
        let _ = self.bind();
        let mut v: u64 = 0;
        // SAFETY: the pool is the device's default pool (it lives as long as
        // the context); each attribute read here is one cuuint64_t into `v`.
        let r = unsafe { (self.driver.cuMemPoolGetAttribute)(self.pool, attr, &mut v as *mut u64 as *mut c_void) };
        if r == CUDA_SUCCESS {
            v
        } else {
            0
        }
    }

    fn set(&self, attr: c_int, mut v: u64) -> Result<(), BackendError> {
        self.bind()?;
        // SAFETY: as in `get`: the default pool, one cuuint64_t read from `v`.
        let r = unsafe { (self.driver.cuMemPoolSetAttribute)(self.pool, attr, &mut v as *mut u64 as *mut c_void) };
        self.driver.check(r, "cuMemPoolSetAttribute")
    }

    /// Bytes the pool holds from the device (≥ used).
    pub fn reserved(&self) -> u64 {
        self.get(pool_attr::RESERVED_MEM_CURRENT)
    }

    /// The pool's high-water reservation (never reset by the probe).
    pub fn reserved_high(&self) -> u64 {
        self.get(pool_attr::RESERVED_MEM_HIGH)
    }

    /// Free and total device memory as the driver sees it.
    pub fn mem_info(&self) -> Option<(u64, u64)> {
        self.bind().ok()?;
        let (mut free, mut total) = (0usize, 0usize);
        // SAFETY: writes two sizes, with the context bound.
        let r = unsafe { (self.driver.cuMemGetInfo)(&mut free, &mut total) };
        (r == CUDA_SUCCESS).then_some((free as u64, total as u64))
    }

    /// What the card holds for this process: NVML's per-process figure, or
    /// the device-wide growth since before the context when the process
    /// table is not visible (containers with their own pid namespace).
    pub fn process_used(&self) -> Option<u64> {
        let nvml = self.nvml.as_ref()?;
        // The emulation block is this process's too, but it stands for memory
        // the gated card does not have: it is never part of the figures.
        let blocked = self.blocked().map_or(0, |(_, b)| b);
        if let Some(b) = nvml.process_used(std::process::id()) {
            return Some(b.saturating_sub(blocked));
        }
        let used = nvml.device_used()?;
        Some(used.saturating_sub(self.used_before_context?).saturating_sub(blocked))
    }

    /// How much more the process holds than when the probe opened: NVML's
    /// figure, else the device's used memory as the driver sees it.
    fn growth_since_open(&self) -> Option<u64> {
        if let (Some(now), Some(then)) = (self.process_used(), self.used_at_open) {
            return Some(now.saturating_sub(then));
        }
        let blocked = self.blocked().map_or(0, |(_, b)| b);
        let (free, total) = self.mem_info()?;
        let used = total.saturating_sub(free).saturating_sub(blocked);
        Some(used.saturating_sub(self.driver_used_at_open?))
    }

    /// The byte figure of NVML mode: what the process holds beyond what it
    /// held once the probe had made the context (so the figures start where
    /// the empty pool's did), library workspaces and loaded kernels included.
    fn process_figure(&self) -> u64 {
        self.growth_since_open().unwrap_or(0)
    }

    fn decided(&self) -> Option<MemorySource> {
        *self.source.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn nvml_mode(&self) -> bool {
        self.decided() == Some(MemorySource::NvmlProcess)
    }

    /// A process figure, kept as the sampled high-water mark if higher.
    fn sample(&self) -> u64 {
        let v = self.process_figure();
        self.sampled_high.fetch_max(v, Ordering::Relaxed);
        v
    }

    fn info(&self) -> DeviceInfo {
        let nvml = self.nvml.as_ref();
        let name = nvml
            .and_then(Nvml::name)
            .or_else(|| self.driver_name())
            .unwrap_or_else(|| format!("CUDA device {}", self.device));
        DeviceInfo {
            backend: "cuda".into(),
            name,
            total_bytes: self.mem_info().map(|(_, t)| t),
            driver: nvml.and_then(Nvml::driver_version),
            cuda: nvml.and_then(Nvml::cuda_version).or_else(|| self.driver.version()),
        }
    }

    /// The device's name as the driver gives it.
    fn driver_name(&self) -> Option<String> {
        let mut buf = [0 as c_char; 256];
        // SAFETY: writes at most `len` bytes, NUL included, into `buf`.
        let r = unsafe { (self.driver.cuDeviceGetName)(buf.as_mut_ptr(), buf.len() as c_int, self.device) };
        if r != CUDA_SUCCESS {
            return None;
        }
        buf[buf.len() - 1] = 0;
        // SAFETY: `buf` ends with a NUL, so it holds a C string.
        Some(unsafe { CStr::from_ptr(buf.as_ptr()) }.to_string_lossy().into_owned())
    }

    /// Capacity emulation: takes (outside the pool) everything above what a
    /// card of `capacity` bytes would have left for this process, so a model
    /// that would not fit there runs out of memory here.
    pub fn emulate_capacity(&mut self, capacity: u64) -> Result<u64, BackendError> {
        let (free, _total) = self
            .mem_info()
            .ok_or_else(|| BackendError::new("cuMemGetInfo failed"))?;
        let held = self.process_used().unwrap_or(0);
        let allowed = capacity.saturating_sub(held);
        if free <= allowed {
            return Ok(0); // the card is not larger than the spec's
        }
        let block = free - allowed;
        self.bind()?;
        let mut ptr: CuDevicePtr = 0;
        // SAFETY: writes one device pointer; it is kept in `blocker` and freed once (`free_blocker`).
        let r = unsafe { (self.driver.cuMemAlloc)(&mut ptr, block as usize) };
        self.driver
            .check(r, "reserving the emulated card's missing memory (cuMemAlloc)")?;
        *self.blocker.lock().unwrap_or_else(|e| e.into_inner()) = Some((ptr, block));
        Ok(block)
    }

    /// The emulation block, if one is held.
    fn blocked(&self) -> Option<(CuDevicePtr, u64)> {
        *self.blocker.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Frees the emulation block, if one is held; its size.
    fn free_blocker(&self) -> Option<u64> {
        let (ptr, size) = self.blocker.lock().unwrap_or_else(|e| e.into_inner()).take()?;
        let _ = self.bind();
        // SAFETY: `ptr` came from cuMemAlloc_v2 in `emulate_capacity` on this
        // context and was taken out of the lock, so it is freed exactly once.
        unsafe {
            let _ = (self.driver.cuMemFree)(ptr);
        }
        Some(size)
    }
}

impl Drop for CudaProbe {
    fn drop(&mut self) {
        self.free_blocker();
        MemoryProbe::release(self);
        // SAFETY: pairs with the retain in `open`; other holders (the
        // framework's cudarc) keep their own retain, so the context lives on for them.
        unsafe {
            let _ = (self.driver.cuDevicePrimaryCtxRelease)(self.device);
        }
    }
}

impl MemoryProbe for CudaProbe {
    fn backend(&self) -> &'static str {
        "cuda"
    }

    fn live(&self) -> u64 {
        if self.nvml_mode() {
            self.sample()
        } else {
            self.get(pool_attr::USED_MEM_CURRENT)
        }
    }

    fn peak(&self) -> u64 {
        if self.nvml_mode() {
            let now = self.sample();
            self.sampled_high.load(Ordering::Relaxed).max(now)
        } else {
            self.get(pool_attr::USED_MEM_HIGH)
        }
    }

    fn reset_peak(&self) {
        if self.nvml_mode() {
            self.sampled_high.store(self.process_figure(), Ordering::Relaxed);
        } else {
            // Setting the high-water mark to 0 resets it to the current value.
            let _ = self.set(pool_attr::USED_MEM_HIGH, 0);
        }
    }

    fn sync(&self) {
        let _ = self.bind();
        // SAFETY: no arguments; waits for every stream of the bound context,
        // the framework's among them (it runs in the same primary context).
        unsafe {
            let _ = (self.driver.cuCtxSynchronize)();
        }
    }

    fn device_used(&self) -> Option<u64> {
        self.process_used()
    }

    fn context_bytes(&self) -> Option<u64> {
        if self.nvml_mode() {
            // Nothing is in the pool: the context is what the process held
            // once the probe had made it.
            return self.used_at_open;
        }
        Some(self.process_used()?.saturating_sub(self.reserved()))
    }

    fn pool_reserved_peak(&self) -> Option<u64> {
        (!self.nvml_mode()).then(|| self.reserved_high())
    }

    fn lift_emulation(&self) -> Option<u64> {
        self.free_blocker()
    }

    fn hold(&self, bytes: u64) -> Option<Result<(), BackendError>> {
        MemoryProbe::release(self);
        Some((|| {
            self.bind()?;
            // A cache grows in the pool: what the pool keeps and does not
            // use (it releases nothing, `RELEASE_THRESHOLD`) is room the
            // cache would have, so it goes back to the device first.
            self.sync();
            // SAFETY: the device's default pool, alive with the context.
            let r = unsafe { (self.driver.cuMemPoolTrimTo)(self.pool, 0) };
            self.driver.check(r, "cuMemPoolTrimTo")?;
            let mut ptr: CuDevicePtr = 0;
            // SAFETY: writes one device pointer; it is kept in `held` and freed once (`release`).
            let r = unsafe { (self.driver.cuMemAlloc)(&mut ptr, bytes.max(1) as usize) };
            self.driver.check(r, "holding a longer cache's memory (cuMemAlloc)")?;
            *self.held.lock().unwrap_or_else(|e| e.into_inner()) = Some((ptr, bytes));
            Ok(())
        })())
    }

    fn release(&self) {
        let Some((ptr, _)) = self.held.lock().unwrap_or_else(|e| e.into_inner()).take() else {
            return;
        };
        let _ = self.bind();
        // SAFETY: `ptr` came from cuMemAlloc_v2 in `hold` on this context and
        // was taken out of the lock, so it is freed exactly once.
        unsafe {
            let _ = (self.driver.cuMemFree)(ptr);
        }
    }

    fn memory_source(&self) -> MemorySource {
        self.decided().unwrap_or(MemorySource::CudaPool)
    }

    fn params_built(&self) -> Result<(), BackendError> {
        if self.decided().is_some() {
            return Ok(());
        }
        self.sync();
        let evidence = PoolEvidence {
            pool_reserved_high: self.reserved_high(),
            process_growth: self.growth_since_open(),
        };
        match source_after_params(evidence) {
            Ok(Some(source)) => {
                if source == MemorySource::NvmlProcess {
                    self.sampled_high.store(self.process_figure(), Ordering::Relaxed);
                }
                *self.source.lock().unwrap_or_else(|e| e.into_inner()) = Some(source);
                Ok(())
            }
            Ok(None) => Ok(()),
            Err(_) => Err(BackendError::new(
                "the model's tensors are not in the CUDA memory pool, and neither NVML nor the driver \
                          shows what this process holds: no byte figure can be measured",
            )
            .with_hint("check NVML and the driver with `nvidia-smi`, or use `--backend cpu`")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opening_never_panics_and_an_unusable_gpu_says_why_and_what_to_do() {
        match CudaProbe::open(0) {
            // A machine with a GPU: the probe reads the pool.
            Ok((probe, info)) => {
                assert_eq!(info.backend, "cuda");
                assert_eq!(probe.memory_source(), MemorySource::CudaPool);
            }
            // No driver (this is the case on a machine without a GPU):
            Err(e) => {
                assert!(
                    !e.message.is_empty() && e.hint().is_some_and(|h| !h.is_empty()),
                    "{e:?}"
                );
                if driver::driver().is_err() {
                    assert!(
                        e.message.starts_with("cannot load the CUDA driver `libcuda.so.1`"),
                        "{}",
                        e.message
                    );
                    assert!(e.hint().is_some_and(|h| h.contains("--backend cpu")), "{e:?}");
                }
            }
        }
    }

    /// `cuMemAllocAsync`/`cuMemFreeAsync` on the legacy default stream, as
    /// cudarc allocates a framework's tensors (from the default pool), and
    /// `cuStreamSynchronize`: taken here, for the GPU tests only.
    struct Async {
        alloc: unsafe extern "C" fn(*mut CuDevicePtr, usize, *mut c_void) -> c_int,
        free: unsafe extern "C" fn(CuDevicePtr, *mut c_void) -> c_int,
        sync: unsafe extern "C" fn(*mut c_void) -> c_int,
    }

    fn async_api() -> Async {
        let lib = dl::Library::open(driver::LIBRARY, "the CUDA driver", "").unwrap();
        let f = |s| lib.symbol(s).unwrap();
        // SAFETY: cuda.h's prototypes: cuMemAllocAsync(CUdeviceptr *, size_t,
        // CUstream), cuMemFreeAsync(CUdeviceptr, CUstream), cuStreamSynchronize(CUstream).
        unsafe {
            Async {
                alloc: std::mem::transmute::<
                    *mut c_void,
                    unsafe extern "C" fn(*mut CuDevicePtr, usize, *mut c_void) -> c_int,
                >(f("cuMemAllocAsync")),
                free: std::mem::transmute::<*mut c_void, unsafe extern "C" fn(CuDevicePtr, *mut c_void) -> c_int>(f(
                    "cuMemFreeAsync",
                )),
                sync: std::mem::transmute::<*mut c_void, unsafe extern "C" fn(*mut c_void) -> c_int>(f(
                    "cuStreamSynchronize",
                )),
            }
        }
    }

    const MIB: u64 = 1 << 20;

    /// On a GPU (run alone: the pool's high-water is the process's):
    /// `cargo test -p gate-probe --features cuda -- --ignored --exact cuda::tests::on_a_gpu_pool_allocations_are_read_exactly`
    #[test]
    #[ignore = "needs an NVIDIA GPU"]
    fn on_a_gpu_pool_allocations_are_read_exactly() {
        let (probe, info) = CudaProbe::open(0).unwrap();
        eprintln!("{info:?}, NVML at open {:?}", probe.used_at_open);
        assert!(info.total_bytes.unwrap() > 0 && !info.name.is_empty());
        let a = async_api();
        assert_eq!(probe.live(), 0);
        // Nothing allocated yet: not decided, the pool is read.
        probe.params_built().unwrap();
        assert_eq!(probe.decided(), None);
        let mut ptr: CuDevicePtr = 0;
        // SAFETY: one allocation of 64 MiB on the default stream, freed below.
        let r = unsafe { (a.alloc)(&mut ptr, (64 * MIB) as usize, std::ptr::null_mut()) };
        assert_eq!(r, CUDA_SUCCESS);
        probe.params_built().unwrap();
        assert_eq!(probe.memory_source(), MemorySource::CudaPool);
        assert_eq!(probe.live(), 64 * MIB);
        assert!(probe.peak() >= 64 * MIB);
        assert!(probe.reserved() >= 64 * MIB);
        let used = probe.device_used().unwrap();
        eprintln!("pool 64 MiB: device_used {used}, context {:?}", probe.context_bytes());
        assert!(used >= 64 * MIB, "{used}");
        // SAFETY: frees the allocation above once; then waits for it.
        unsafe {
            assert_eq!((a.free)(ptr, std::ptr::null_mut()), 0);
            assert_eq!((a.sync)(std::ptr::null_mut()), 0);
        }
        probe.sync();
        assert_eq!(probe.live(), 0);
        probe.reset_peak();
        assert_eq!(probe.peak(), 0);
        assert_eq!(probe.pool_reserved_peak(), Some(probe.reserved_high()));
    }

    /// On a GPU, alone (a fresh process: its pool never held memory):
    /// `cargo test -p gate-probe --features cuda -- --ignored --exact cuda::tests::on_a_gpu_allocations_outside_the_pool_switch_to_nvml`
    #[test]
    #[ignore = "needs an NVIDIA GPU"]
    fn on_a_gpu_allocations_outside_the_pool_switch_to_nvml() {
        let (probe, _) = CudaProbe::open(0).unwrap();
        probe.bind().unwrap();
        let mut ptr: CuDevicePtr = 0;
        // SAFETY: one plain allocation (outside the pool) of 256 MiB, freed below.
        let r = unsafe { (probe.driver.cuMemAlloc)(&mut ptr, (256 * MIB) as usize) };
        assert_eq!(r, CUDA_SUCCESS);
        probe.params_built().unwrap();
        assert_eq!(probe.memory_source(), MemorySource::NvmlProcess);
        assert_eq!(probe.pool_reserved_peak(), None);
        let live = probe.live();
        eprintln!(
            "256 MiB outside the pool: live {live}, context {:?}",
            probe.context_bytes()
        );
        // NVML's figure: the allocation, rounded to the driver's granularity.
        assert!((256 * MIB..=280 * MIB).contains(&live), "{live}");
        assert!(probe.peak() >= live);
        // SAFETY: frees the allocation above once.
        unsafe {
            assert_eq!((probe.driver.cuMemFree)(ptr), CUDA_SUCCESS);
        }
        let after = probe.live();
        assert!(after < 16 * MIB, "{after}");
        // The sampled high-water kept the allocation's figure.
        assert!(probe.peak() >= 256 * MIB);
        probe.reset_peak();
        assert!(probe.peak() < 16 * MIB);
    }

    /// On a GPU, alone: the emulation block stays out of every figure.
    #[test]
    #[ignore = "needs an NVIDIA GPU"]
    fn on_a_gpu_the_emulation_block_is_held_and_lifted() {
        let (mut probe, info) = CudaProbe::open(0).unwrap();
        let before = probe.device_used().unwrap();
        let block = probe.emulate_capacity(4 << 30).unwrap();
        let (free, _) = probe.mem_info().unwrap();
        eprintln!("block {block} of {:?}, free then {free}", info.total_bytes);
        assert!(block > 0);
        assert!(free < 4 << 30, "{free}");
        let during = probe.device_used().unwrap();
        assert!(during.abs_diff(before) < 16 * MIB, "{before} → {during}");
        assert_eq!(probe.lift_emulation(), Some(block));
        assert_eq!(probe.lift_emulation(), None);
        assert!(probe.mem_info().unwrap().0 > 4 << 30);
    }
}
