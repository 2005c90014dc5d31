//! NVML, loaded from `libnvidia-ml.so.1` at run time: what the card holds
//! for this process (context, kernels and library workspaces included), and
//! the card's name and driver. Prototypes and values as in NVIDIA's `nvml.h`;
//! the `_v2` symbols are those `nvml.h` `#define`s the plain names to.

use std::ffi::{c_char, c_int, c_uint, c_void, CStr};
use std::sync::OnceLock;

use super::dl::{entry_points, Library};
use crate::BackendError;

type NvmlReturn = c_int;
type NvmlDevice = *mut c_void;

const NVML_SUCCESS: NvmlReturn = 0;
const NVML_ERROR_INSUFFICIENT_SIZE: NvmlReturn = 7;
/// `usedGpuMemory` when the driver cannot tell (Windows WDDM): `(unsigned long long)-1`.
const NVML_VALUE_NOT_AVAILABLE: u64 = u64::MAX;

/// `nvmlMemory_t`.
#[repr(C)]
#[derive(Default)]
pub(crate) struct Memory {
    total: u64,
    free: u64,
    used: u64,
}

/// `nvmlProcessInfo_t` of `nvmlDeviceGetComputeRunningProcesses_v3` (and
/// `nvmlProcessInfo_v2_t` of `_v2`, the same layout).
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct ProcessInfo {
    pid: c_uint,
    used_gpu_memory: u64,
    gpu_instance_id: c_uint,
    compute_instance_id: c_uint,
}

/// `nvmlProcessInfo_v1_t`, of the unversioned (oldest) entry point.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct ProcessInfoV1 {
    pid: c_uint,
    used_gpu_memory: u64,
}

entry_points! {
    /// NVML's entry points (prototypes as in nvml.h).
    Entries {
        nvmlInit = "nvmlInit_v2": fn() -> NvmlReturn;
        nvmlShutdown = "nvmlShutdown": fn() -> NvmlReturn;
        nvmlDeviceGetHandleByIndex = "nvmlDeviceGetHandleByIndex_v2": fn(c_uint, *mut NvmlDevice) -> NvmlReturn;
        nvmlDeviceGetMemoryInfo = "nvmlDeviceGetMemoryInfo": fn(NvmlDevice, *mut Memory) -> NvmlReturn;
        nvmlDeviceGetName = "nvmlDeviceGetName": fn(NvmlDevice, *mut c_char, c_uint) -> NvmlReturn;
        nvmlSystemGetDriverVersion = "nvmlSystemGetDriverVersion": fn(*mut c_char, c_uint) -> NvmlReturn;
        nvmlSystemGetCudaDriverVersion = "nvmlSystemGetCudaDriverVersion": fn(*mut c_int) -> NvmlReturn;
    }
}

/// The newest of the process-table entry points the driver has.
enum Processes {
    /// `_v3` or `_v2`: `nvmlProcessInfo_t`.
    Current(unsafe extern "C" fn(NvmlDevice, *mut c_uint, *mut ProcessInfo) -> NvmlReturn),
    /// The unversioned one of old drivers: `nvmlProcessInfo_v1_t`.
    V1(unsafe extern "C" fn(NvmlDevice, *mut c_uint, *mut ProcessInfoV1) -> NvmlReturn),
}

struct Lib {
    entries: Entries,
    processes: Option<Processes>,
}

fn lib() -> Result<&'static Lib, BackendError> {
    static LIB: OnceLock<Result<Lib, BackendError>> = OnceLock::new();
    LIB.get_or_init(|| {
        let lib = Library::open(
            "libnvidia-ml.so.1",
            "NVML",
            "NVML comes with the NVIDIA driver; without it device_used is not measured",
        )?;
        let entries = Entries::resolve(&lib)?;
        let current = [
            "nvmlDeviceGetComputeRunningProcesses_v3",
            "nvmlDeviceGetComputeRunningProcesses_v2",
        ]
        .into_iter()
        .find_map(|s| lib.symbol(s).ok());
        let processes = match current {
            // SAFETY: the address of `_v3` or `_v2`, both declared in nvml.h
            // as (nvmlDevice_t, unsigned int *, nvmlProcessInfo_t *) -> nvmlReturn_t.
            Some(address) => Some(Processes::Current(unsafe {
                std::mem::transmute::<
                    *mut c_void,
                    unsafe extern "C" fn(NvmlDevice, *mut c_uint, *mut ProcessInfo) -> NvmlReturn,
                >(address)
            })),
            None => lib.symbol("nvmlDeviceGetComputeRunningProcesses").ok().map(|address| {
                // SAFETY: the unversioned entry point of old nvml.h, with
                // nvmlProcessInfo_v1_t (pid, usedGpuMemory).
                Processes::V1(unsafe {
                    std::mem::transmute::<
                        *mut c_void,
                        unsafe extern "C" fn(NvmlDevice, *mut c_uint, *mut ProcessInfoV1) -> NvmlReturn,
                    >(address)
                })
            }),
        };
        Ok(Lib { entries, processes })
    })
    .as_ref()
    .map_err(Clone::clone)
}

/// An initialised NVML and one of its devices; shut down when dropped
/// (NVML counts its inits).
pub(crate) struct Nvml {
    lib: &'static Lib,
    device: NvmlDevice,
}

// SAFETY: NVML is thread-safe (nvml.h: "all NVML functions are thread-safe"),
// and the device handle is an opaque token valid until nvmlShutdown.
unsafe impl Send for Nvml {}
// SAFETY: as for Send: every call through `&self` is a thread-safe NVML call.
unsafe impl Sync for Nvml {}

impl Nvml {
    /// NVML's view of GPU `ordinal`, or why not.
    pub(crate) fn open(ordinal: u32) -> Result<Self, BackendError> {
        let lib = lib()?;
        let failed = |what: &str, r: NvmlReturn| {
            BackendError::new(format!("NVML's {what} failed (nvmlReturn_t {r})"))
                .with_hint("check the NVIDIA driver with `nvidia-smi`")
        };
        // SAFETY: no arguments; counted, and undone by `Drop`.
        let r = unsafe { (lib.entries.nvmlInit)() };
        if r != NVML_SUCCESS {
            return Err(failed("nvmlInit_v2", r));
        }
        let mut device: NvmlDevice = std::ptr::null_mut();
        // SAFETY: writes one handle; NVML is initialised.
        let r = unsafe { (lib.entries.nvmlDeviceGetHandleByIndex)(ordinal, &mut device) };
        let nvml = Nvml { lib, device };
        if r != NVML_SUCCESS {
            return Err(failed("nvmlDeviceGetHandleByIndex_v2", r)); // `nvml` drops: nvmlShutdown
        }
        Ok(nvml)
    }

    /// Bytes in use on the whole device.
    pub(crate) fn device_used(&self) -> Option<u64> {
        let mut m = Memory::default();
        // SAFETY: fills one nvmlMemory_t for a valid handle.
        let r = unsafe { (self.lib.entries.nvmlDeviceGetMemoryInfo)(self.device, &mut m) };
        (r == NVML_SUCCESS).then_some(m.used)
    }

    /// What the device holds for process `pid`, when the process table
    /// shows it (not inside a container with its own pid namespace).
    pub(crate) fn process_used(&self, pid: u32) -> Option<u64> {
        let used = match self.lib.processes.as_ref()? {
            Processes::Current(f) => table(|n, buf| {
                // SAFETY: `buf` has room for `*n` entries; NVML writes at most
                // that many and sets `*n` to how many there are.
                unsafe { f(self.device, n, buf) }
            })?
            .iter()
            .find(|p| p.pid == pid)
            .map(|p| p.used_gpu_memory),
            Processes::V1(f) => table(|n, buf| {
                // SAFETY: as above, with the v1 entries.
                unsafe { f(self.device, n, buf) }
            })?
            .iter()
            .find(|p| p.pid == pid)
            .map(|p| p.used_gpu_memory),
        }?;
        (used != NVML_VALUE_NOT_AVAILABLE).then_some(used)
    }

    /// The device's name.
    pub(crate) fn name(&self) -> Option<String> {
        string(|buf, len| {
            // SAFETY: writes at most `len` bytes, NUL included, into `buf`.
            unsafe { (self.lib.entries.nvmlDeviceGetName)(self.device, buf, len) }
        })
    }

    /// The driver's version, e.g. `570.86.15`.
    pub(crate) fn driver_version(&self) -> Option<String> {
        string(|buf, len| {
            // SAFETY: writes at most `len` bytes, NUL included, into `buf`.
            unsafe { (self.lib.entries.nvmlSystemGetDriverVersion)(buf, len) }
        })
    }

    /// The CUDA version the driver supports, e.g. `12.8`.
    pub(crate) fn cuda_version(&self) -> Option<String> {
        let mut v: c_int = 0;
        // SAFETY: writes one int.
        let r = unsafe { (self.lib.entries.nvmlSystemGetCudaDriverVersion)(&mut v) };
        (r == NVML_SUCCESS).then(|| format!("{}.{}", v / 1000, (v % 1000) / 10))
    }
}

impl Drop for Nvml {
    fn drop(&mut self) {
        // SAFETY: pairs with the nvmlInit_v2 of `open`; the handle is not used after.
        unsafe {
            (self.lib.entries.nvmlShutdown)();
        }
    }
}

/// A table NVML fills in (`count` in, entries written and `count` out),
/// grown while NVML says it is too small.
fn table<T: Copy + Default>(mut fill: impl FnMut(*mut c_uint, *mut T) -> NvmlReturn) -> Option<Vec<T>> {
    let mut room: c_uint = 64;
    for _ in 0..4 {
        let mut buf = vec![T::default(); room as usize];
        let mut n = room;
        match fill(&mut n, buf.as_mut_ptr()) {
            NVML_SUCCESS => {
                buf.truncate(n.min(room) as usize);
                return Some(buf);
            }
            // Processes came and went: ask again with what NVML says (and some).
            NVML_ERROR_INSUFFICIENT_SIZE => room = n.max(room) + 16,
            _ => return None,
        }
    }
    None
}

/// A string NVML writes into a buffer.
fn string(fill: impl FnOnce(*mut c_char, c_uint) -> NvmlReturn) -> Option<String> {
    let mut buf = [0 as c_char; 256];
    if fill(buf.as_mut_ptr(), buf.len() as c_uint) != NVML_SUCCESS {
        return None;
    }
    buf[buf.len() - 1] = 0; // NUL-terminated whatever NVML wrote
                            // SAFETY: `buf` ends with a NUL, so it holds a C string.
    Some(unsafe { CStr::from_ptr(buf.as_ptr()) }.to_string_lossy().into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn process_info_has_nvml_h_layout() {
        // nvml.h: unsigned int pid; unsigned long long usedGpuMemory;
        // unsigned int gpuInstanceId, computeInstanceId (v2/v3: 24 bytes; v1: 16).
        assert_eq!(std::mem::size_of::<ProcessInfo>(), 24);
        assert_eq!(std::mem::size_of::<ProcessInfoV1>(), 16);
        assert_eq!(std::mem::size_of::<Memory>(), 24);
    }

    #[test]
    fn a_table_grows_until_nvml_has_room() {
        let mut calls = 0;
        let rows = table(|n, buf: *mut u64| {
            calls += 1;
            // SAFETY: `n` points at the table's count.
            let room = unsafe { *n };
            // SAFETY: as above; sets how many entries there are.
            unsafe { *n = 100 };
            if room < 100 {
                return NVML_ERROR_INSUFFICIENT_SIZE;
            }
            // SAFETY: `buf` has `room` ≥ 100 entries.
            unsafe { *buf.add(99) = 7 };
            NVML_SUCCESS
        })
        .unwrap();
        assert_eq!((calls, rows.len(), rows[99]), (2, 100, 7));
    }

    #[test]
    fn a_failed_table_is_none() {
        assert!(table(|_, _: *mut u64| 999).is_none());
    }
}
