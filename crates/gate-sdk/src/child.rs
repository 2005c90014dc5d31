//! The candle side of the harness protocol with the installed `gate`: the
//! protocol itself (the request, `__resolve` and `profile`, the events and
//! their messages) is gate-runner's `harness`, the same for every
//! framework; this file is what candle gives it ([`Candle`]): the registry
//! of candle workloads, candle's devices (the CPU, a CUDA GPU with the pool
//! probe), and a component as gate-runner's `Session` (`runner::trainer`).
//!
//! No command line parser, renderer or network here: an adopter's harness
//! compiles the SDK, the runner and the probe, and the installed `gate`
//! does everything else.

use candle_core::Device;
use gate_contract::protocol::FrameworkId;
use gate_runner::harness::Opened;

use crate::runner::trainer::CandleSession;
use crate::sdk::{DynWorkload, Registry, RunCtx};
use gate_probe::{Backend, BackendError};

pub(crate) use gate_runner::harness::{serve, Identity};

/// The candle SDK as gate-runner's harness sees it: this binary's registry.
pub(crate) struct Candle<'r>(pub(crate) &'r Registry);

impl gate_runner::harness::Framework for Candle<'_> {
    type Workload = dyn DynWorkload;
    type Device = Device;
    type Session<'a>
        = CandleSession<'a>
    where
        Self: 'a;

    /// candle panics on some device errors (an `unwrap` of cudarc's
    /// result): told apart as its returned errors are.
    fn panic_kind(message: &str) -> gate_contract::measurement::FailureKind {
        crate::runner::trainer::failure_kind(message)
    }

    fn id(&self) -> FrameworkId {
        FrameworkId {
            name: "candle".into(),
            version: crate::runner::CANDLE_VERSION.into(),
        }
    }

    fn legacy_version(&self) -> Option<String> {
        Some(crate::runner::CANDLE_VERSION.into())
    }

    fn registry(&self) -> &gate_runner::harness::Registry<dyn DynWorkload> {
        self.0
    }

    /// On the CPU, a batch of 2: what candle keeps there once set up does
    /// not grow with the batch (no thread pool at one compute thread; the
    /// matmul's cache-sized packing buffers are scratch, which the counting
    /// allocator leaves out), so the throwaway step need not touch the full
    /// batch's gigabytes (the plain TFT's warm-up: 8.6 s at 32 rows, 0.8 s
    /// at 2, every figure the same). Two rows, not one, keep the matmuls off
    /// their matrix-vector paths. On a GPU the full batch: cuBLAS picks its
    /// kernels and workspace by shape, and loads each on first use.
    fn warm_up_batch(&self, backend: Backend, batch_size: usize) -> usize {
        match backend {
            Backend::Cuda => batch_size,
            _ => batch_size.min(2),
        }
    }

    fn open(&self, backend: Backend, emulate: Option<u64>) -> Result<Opened<Device>, BackendError> {
        match backend {
            Backend::Cuda => open_cuda(emulate),
            _ => {
                let (probe, info) = gate_runner::harness::open_cpu()?;
                Ok(Opened {
                    device: Device::Cpu,
                    probe,
                    info,
                    emulated_block: None,
                })
            }
        }
    }

    fn session<'a>(
        &'a self,
        workload: &'a dyn DynWorkload,
        device: &'a Device,
        component: &'a gate_spec::budget::Component,
        batch_size: usize,
    ) -> CandleSession<'a> {
        CandleSession {
            workload,
            ctx: run_ctx(device, component, batch_size),
        }
    }

    fn checkpointed(&self) -> Vec<gate_contract::measurement::CheckpointedBlock> {
        crate::sdk::checkpoint::take_checkpointed()
    }
}

#[cfg(feature = "cuda")]
fn open_cuda(emulate: Option<u64>) -> Result<Opened<Device>, BackendError> {
    // The probe first: NVML's reading from before any context, then the
    // device's primary context, which candle's cudarc retains in turn, so
    // its tensors come from the pool the probe reads (whatever the minor).
    let (mut probe, info) = gate_probe::cuda::CudaProbe::open(0)?;
    let device = Device::new_cuda(0).map_err(|e| {
        BackendError::new(format!(
            "no usable CUDA GPU 0: candle {}: {e}",
            crate::runner::CANDLE_VERSION
        ))
        .with_hint("check `nvidia-smi`, or run with `--backend cpu`")
    })?;
    // After candle's context: the block leaves room for what it holds too.
    let emulated_block = match emulate {
        Some(capacity) => Some(probe.emulate_capacity(capacity)?),
        None => None,
    };
    Ok(Opened {
        device,
        probe: std::sync::Arc::new(probe),
        info,
        emulated_block,
    })
}

#[cfg(not(feature = "cuda"))]
fn open_cuda(_emulate: Option<u64>) -> Result<Opened<Device>, BackendError> {
    gate_probe::resolve_backend(Backend::Cuda).map(|_| unreachable!("cuda resolves only with the feature"))
}

/// Component `c`'s run context on `device` at batch size `batch_size`.
fn run_ctx(device: &Device, c: &gate_spec::budget::Component, batch_size: usize) -> RunCtx {
    RunCtx {
        device: device.clone(),
        dtype: crate::sdk::candle_dtype(c.dtype),
        batch_size,
        seed: c.seed,
        master_dtype: c.master_dtype.map(crate::sdk::candle_dtype),
    }
}
