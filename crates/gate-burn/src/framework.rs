//! What burn gives gate-runner's harness protocol: this binary's registry
//! of burn workloads, burn's devices (ndarray on the CPU, CubeCL's CUDA
//! with the `cuda` feature) and a component as a [`BurnSession`].

use std::sync::{Arc, Mutex};

use burn::tensor::{Device, Tensor};
use gate_contract::protocol::FrameworkId;
use gate_probe::{Backend, BackendError};
use gate_probe::{MemoryProbe, MemorySource};
use gate_runner::harness::{Framework, Opened, Registry};
use gate_spec::budget::Component;

use crate::session::{BurnSession, DynBurn};
use crate::RunCtx;

/// burn, with the workloads of one harness binary.
pub(crate) struct Burn<'r> {
    pub(crate) registry: &'r Registry<dyn DynBurn>,
}

impl Framework for Burn<'_> {
    type Workload = dyn DynBurn;
    type Device = Device;
    type Session<'a>
        = BurnSession<'a>
    where
        Self: 'a;

    fn id(&self) -> FrameworkId {
        FrameworkId {
            name: "burn".into(),
            version: crate::BURN_VERSION.into(),
        }
    }

    fn registry(&self) -> &Registry<dyn DynBurn> {
        self.registry
    }

    /// A panic that escapes the phases' catch (burn's errors are panics).
    fn panic_kind(message: &str) -> gate_contract::measurement::FailureKind {
        crate::session::panic_kind(message)
    }

    fn open(&self, backend: Backend, emulate: Option<u64>) -> Result<Opened<Device>, BackendError> {
        match backend {
            Backend::Cuda => open_cuda(emulate),
            _ => {
                let (counting, info) = gate_runner::harness::open_cpu()?;
                // ndarray, though burn 0.22 deprecates it for `flex`: its
                // tensors are plain heap buffers, which the counting
                // allocator sees as they are made and freed.
                #[allow(deprecated)]
                let device = Device::ndarray();
                let probe = Arc::new(Swept {
                    counting,
                    leaf: Mutex::new(Tensor::zeros([1], &device.clone().autodiff()).require_grad()),
                });
                Ok(Opened {
                    device,
                    probe,
                    info,
                    emulated_block: None,
                })
            }
        }
    }

    fn session<'a>(
        &'a self,
        workload: &'a dyn DynBurn,
        device: &'a Device,
        component: &'a Component,
        batch_size: usize,
    ) -> BurnSession<'a> {
        BurnSession {
            workload,
            device: device.clone().autodiff(),
            plain: device.clone(),
            dtype: component.dtype,
            ctx: RunCtx {
                batch_size,
                seed: component.seed,
            },
        }
    }
}

/// The counting allocator's probe, whose `sync` also runs what burn's
/// autodiff defers: it frees the graph entries of tensors dropped since the
/// last backward only at the next one, so without this the first measured
/// backward would free the warm-up's leftovers, and the gradients and
/// optimizer figures (counted from the live bytes before the forward) would
/// come out short by them. A one-element backward over a leaf kept for the
/// whole process does the sweep and leaves nothing behind itself.
struct Swept {
    counting: Arc<dyn MemoryProbe>,
    leaf: Mutex<Tensor<1>>,
}

impl MemoryProbe for Swept {
    fn backend(&self) -> &'static str {
        self.counting.backend()
    }

    fn live(&self) -> u64 {
        self.counting.live()
    }

    fn peak(&self) -> u64 {
        self.counting.peak()
    }

    fn reset_peak(&self) {
        self.counting.reset_peak()
    }

    fn sync(&self) {
        let leaf = self.leaf.lock().unwrap_or_else(|e| e.into_inner());
        drop(leaf.clone().sum().backward());
    }

    fn memory_source(&self) -> MemorySource {
        self.counting.memory_source()
    }
}

/// burn's CUDA backend: CubeCL allocates pages from pools of its own, so
/// neither the counting allocator nor the CUDA pool probe sees its tensors.
/// Until the probe of burn's own figures (`Device::memory_pool_usage`) is
/// wired in (docs/burn.md, "CUDA"), a run on CUDA is refused rather than
/// measured with pages reported as bytes in use.
fn open_cuda(_emulate: Option<u64>) -> Result<Opened<Device>, BackendError> {
    Err(BackendError::new(
        "gate-burn does not yet measure burn's CUDA backend: CubeCL's pools hold pages, not the bytes tensors use",
    )
    .with_hint("run with `--backend cpu` (ndarray, exact bytes); docs/burn.md says what CUDA needs"))
}
