//! The few CUDA driver API entry points the probe needs, loaded from
//! `libcuda.so.1` at run time. The driver API is a stable C ABI; the
//! values and prototypes below are CUDA's `cuda.h` (CUDA 12), and where
//! `cuda.h` `#define`s a name to a `_v2` symbol (cuMemAlloc, cuMemFree,
//! cuMemGetInfo, cuDevicePrimaryCtxRelease) the `_v2` symbol is the one
//! taken, as a program compiled against `cuda.h` would.

use std::ffi::{c_char, c_int, c_uint, c_void, CStr};
use std::sync::OnceLock;

use super::dl::{entry_points, Library};
use crate::BackendError;

/// `CUresult`: 0 is `CUDA_SUCCESS`.
pub(crate) type CuResult = c_int;
/// `CUdevice` (an ordinal's handle).
pub(crate) type CuDevice = c_int;
/// `CUcontext`.
pub(crate) type CuContext = *mut c_void;
/// `CUmemoryPool`.
pub(crate) type CuMemoryPool = *mut c_void;
/// `CUdeviceptr` (`unsigned long long` since CUDA 3.2, the `_v2` ABI).
pub(crate) type CuDevicePtr = u64;

pub(crate) const CUDA_SUCCESS: CuResult = 0;

/// `CUmemPool_attribute` values (cuda.h, `enum CUmemPool_attribute_enum`).
/// Each is a `cuuint64_t` when read or written.
pub(crate) mod pool_attr {
    pub(crate) const RELEASE_THRESHOLD: std::ffi::c_int = 4;
    pub(crate) const RESERVED_MEM_CURRENT: std::ffi::c_int = 5;
    pub(crate) const RESERVED_MEM_HIGH: std::ffi::c_int = 6;
    pub(crate) const USED_MEM_CURRENT: std::ffi::c_int = 7;
    pub(crate) const USED_MEM_HIGH: std::ffi::c_int = 8;
}

/// `CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED` (cuda.h, `CUdevice_attribute`):
/// whether the device has the stream-ordered allocator and its pools.
pub(crate) const DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED: c_int = 115;

/// The library's soname: the driver installs it (the toolkit is not needed).
pub(crate) const LIBRARY: &str = "libcuda.so.1";

entry_points! {
    /// The CUDA driver's entry points (prototypes as in cuda.h).
    Driver {
        cuInit = "cuInit": fn(c_uint) -> CuResult;
        cuDriverGetVersion = "cuDriverGetVersion": fn(*mut c_int) -> CuResult;
        cuDeviceGet = "cuDeviceGet": fn(*mut CuDevice, c_int) -> CuResult;
        cuDeviceGetAttribute = "cuDeviceGetAttribute": fn(*mut c_int, c_int, CuDevice) -> CuResult;
        cuDeviceGetName = "cuDeviceGetName": fn(*mut c_char, c_int, CuDevice) -> CuResult;
        cuDevicePrimaryCtxRetain = "cuDevicePrimaryCtxRetain": fn(*mut CuContext, CuDevice) -> CuResult;
        cuDevicePrimaryCtxRelease = "cuDevicePrimaryCtxRelease_v2": fn(CuDevice) -> CuResult;
        cuCtxSetCurrent = "cuCtxSetCurrent": fn(CuContext) -> CuResult;
        cuCtxSynchronize = "cuCtxSynchronize": fn() -> CuResult;
        cuDeviceGetDefaultMemPool = "cuDeviceGetDefaultMemPool": fn(*mut CuMemoryPool, CuDevice) -> CuResult;
        cuMemPoolGetAttribute = "cuMemPoolGetAttribute": fn(CuMemoryPool, c_int, *mut c_void) -> CuResult;
        cuMemPoolSetAttribute = "cuMemPoolSetAttribute": fn(CuMemoryPool, c_int, *mut c_void) -> CuResult;
        cuMemPoolTrimTo = "cuMemPoolTrimTo": fn(CuMemoryPool, usize) -> CuResult;
        cuMemAlloc = "cuMemAlloc_v2": fn(*mut CuDevicePtr, usize) -> CuResult;
        cuMemFree = "cuMemFree_v2": fn(CuDevicePtr) -> CuResult;
        cuMemGetInfo = "cuMemGetInfo_v2": fn(*mut usize, *mut usize) -> CuResult;
        cuGetErrorName = "cuGetErrorName": fn(CuResult, *mut *const c_char) -> CuResult;
    }
}

/// The hint for a machine where the driver cannot be loaded.
pub(crate) const NO_DRIVER_HINT: &str = "`--backend cuda` needs an NVIDIA GPU and its driver (check `nvidia-smi`); \
     on a machine without one, use `--backend cpu`";

/// The driver library of this process, loaded once (and kept loaded).
pub(crate) fn driver() -> Result<&'static Driver, BackendError> {
    static DRIVER: OnceLock<Result<Driver, BackendError>> = OnceLock::new();
    DRIVER.get_or_init(|| load(LIBRARY)).as_ref().map_err(Clone::clone)
}

/// Loads the driver's entry points from the library `name`.
pub(crate) fn load(name: &'static str) -> Result<Driver, BackendError> {
    let lib = Library::open(name, "the CUDA driver", NO_DRIVER_HINT)?;
    Driver::resolve(&lib)
}

impl Driver {
    /// `CUDA_ERROR_…`'s name for `r` (`cuGetErrorName`), or its number.
    pub(crate) fn error_name(&self, r: CuResult) -> String {
        let mut name: *const c_char = std::ptr::null();
        // SAFETY: writes one pointer to a static string, or fails for an
        // unknown code; needs no context and no cuInit.
        let got = unsafe { (self.cuGetErrorName)(r, &mut name) };
        if got != CUDA_SUCCESS || name.is_null() {
            return format!("CUresult {r}");
        }
        // SAFETY: the driver's static, NUL-terminated name of the code.
        unsafe { CStr::from_ptr(name) }.to_string_lossy().into_owned()
    }

    /// `Ok` for `CUDA_SUCCESS`, else an error naming `what` and the code.
    pub(crate) fn check(&self, r: CuResult, what: &str) -> Result<(), BackendError> {
        if r == CUDA_SUCCESS {
            Ok(())
        } else {
            Err(BackendError::new(format!("{what} failed: {}", self.error_name(r)))
                .with_hint("check the NVIDIA driver with `nvidia-smi`"))
        }
    }

    /// The driver's CUDA version (`cuDriverGetVersion`), e.g. `12.8`.
    pub(super) fn version(&self) -> Option<String> {
        let mut v: c_int = 0;
        // SAFETY: writes one int; valid before cuInit.
        let r = unsafe { (self.cuDriverGetVersion)(&mut v) };
        (r == CUDA_SUCCESS).then(|| format!("{}.{}", v / 1000, (v % 1000) / 10))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_machine_without_the_driver_gets_an_error_and_a_hint() {
        let Err(e) = load("libgate-test-no-cuda.so.1") else {
            panic!("loaded a driver that does not exist");
        };
        assert!(
            e.message
                .starts_with("cannot load the CUDA driver `libgate-test-no-cuda.so.1`"),
            "{}",
            e.message
        );
        assert!(e.hint().is_some_and(|h| h.contains("--backend cpu")), "{e:?}");
    }
}
