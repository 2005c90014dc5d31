//! `gate profile` (hidden): the child side of process isolation. Profiles one
//! component and writes JSON events on stdout (see `runner::child`).

use std::path::PathBuf;
use std::sync::Arc;

use candle_core::Device;
use clap::Args;

use super::CliError;
use crate::exit::Exit;
use crate::metric::Metric;
use crate::probe::{Backend, BackendError, CpuProbe, MemoryProbe, Recorder};
use crate::runner::{emit, profile, time_pairs, ChildEvent, DeviceInfo, Measurement};
use crate::sdk::{DynWorkload, RunCtx};

#[derive(Debug, Args)]
pub struct ProfileArgs {
    #[arg(long, default_value = super::DEFAULT_SPEC)]
    pub budgets: PathBuf,
    #[arg(long)]
    pub component: String,
    #[arg(long, value_enum, default_value_t = Backend::Cpu)]
    pub backend: Backend,
    /// Hold back the part of a larger card that the spec's card does not have.
    #[arg(long)]
    pub emulate_capacity: bool,
    /// Profile at this batch size instead of the spec's (used by `gate fit`).
    #[arg(long, hide = true)]
    pub batch_size: Option<usize>,
}

/// An opened backend: where tensors live and how their bytes are read.
struct Opened {
    device: Device,
    probe: Arc<dyn MemoryProbe>,
    info: DeviceInfo,
    emulated_block: Option<u64>,
}

fn open(backend: Backend, emulate: Option<u64>) -> Result<Opened, BackendError> {
    match crate::probe::resolve_backend(backend)? {
        Backend::Cuda => open_cuda(emulate),
        _ => {
            if !CpuProbe::is_counting() {
                return Err(BackendError {
                    message: "the counting allocator is not installed in this binary".into(),
                    hint: "run the `gate` binary itself; the library alone cannot measure CPU memory".into(),
                });
            }
            Ok(Opened {
                device: Device::Cpu,
                probe: Arc::new(CpuProbe),
                info: crate::probe::cpu_device_info(),
                emulated_block: None,
            })
        }
    }
}

#[cfg(feature = "cuda")]
fn open_cuda(emulate: Option<u64>) -> Result<Opened, BackendError> {
    let (mut probe, info) = crate::probe::cuda::CudaProbe::open(0)?;
    let emulated_block = match emulate {
        Some(capacity) => Some(probe.emulate_capacity(capacity)?),
        None => None,
    };
    Ok(Opened {
        device: probe.device().clone(),
        probe: Arc::new(probe),
        info,
        emulated_block,
    })
}

#[cfg(not(feature = "cuda"))]
fn open_cuda(_emulate: Option<u64>) -> Result<Opened, BackendError> {
    crate::probe::resolve_backend(Backend::Cuda).map(|_| unreachable!("cuda resolves only with the feature"))
}

pub fn run(args: ProfileArgs, app: &super::App) -> Result<Exit, CliError> {
    let (spec, workloads) = match super::harness::load(&args.budgets, app, Some(args.backend))? {
        super::harness::Loaded::Here(spec, w) => (spec, w),
        super::harness::Loaded::Delegated(exit) => return Ok(exit),
    };
    let (component, workload) = component_and_workload(&args, &spec, &workloads)?;
    let emulate = (args.emulate_capacity || spec.device.emulate).then_some(spec.device.capacity.0);
    let opened = open(args.backend, emulate).map_err(|e| CliError::Infrastructure {
        message: e.message,
        hint: e.hint,
    })?;
    let recorder = Recorder::new(opened.probe.clone());
    let ctx = run_ctx(
        &opened.device,
        component,
        args.batch_size.unwrap_or(component.batch_size),
    );
    let base = Measurement {
        device: opened.info.clone(),
        emulated_block_bytes: opened.emulated_block,
        ..Default::default()
    };
    let mut stdout = std::io::stdout().lock();
    let mut io_err = None;
    let mut m = profile(
        workload.as_ref(),
        &ctx,
        component.timing,
        &recorder,
        &mut |phase, so_far| {
            let so_far = Box::new(Measurement {
                device: base.device.clone(),
                emulated_block_bytes: base.emulated_block_bytes,
                ..so_far.clone()
            });
            if let Err(e) = emit(&mut stdout, &ChildEvent::Phase { phase, so_far }) {
                io_err = Some(e);
            }
        },
    );
    m.device = base.device;
    m.emulated_block_bytes = base.emulated_block_bytes;
    // A variant with a `step_time_ratio` budget: its steps and its
    // reference's, interleaved, now that this profile's bytes are measured
    // (`gate fit`'s batch sizes only need bytes).
    let pairs = component.timing.pairs_on(recorder.probe().backend() == "cuda");
    let reference = component
        .reference
        .as_deref()
        .filter(|_| component.budgets.iter().any(|b| b.metric == Metric::StepTimeRatio))
        .filter(|_| pairs > 0 && args.batch_size.is_none() && m.failure.is_none() && io_err.is_none())
        .and_then(|r| Some((spec.component(r)?, workloads.get(r)?)));
    if let Some((rc, rw)) = reference {
        let phase = crate::runner::Phase::Ratio;
        let so_far = Box::new(m.clone());
        emit(&mut stdout, &ChildEvent::Phase { phase, so_far }).map_err(parent_write_error)?;
        let rctx = run_ctx(&opened.device, rc, rc.batch_size);
        let sync = || recorder.probe().sync();
        match time_pairs(
            (workload.as_ref(), &ctx),
            (rw.as_ref(), &rctx),
            component.timing.warmup,
            pairs,
            &sync,
        ) {
            Ok(ratios) => m.step_time_ratios = ratios,
            Err(e) => m.ratio_error = Some(e),
        }
    }
    if let Some(e) = io_err {
        return Err(parent_write_error(e));
    }
    emit(&mut stdout, &ChildEvent::Done(Box::new(m))).map_err(parent_write_error)?;
    Ok(Exit::Pass)
}

/// The component `--component` names, and its workload in this build.
fn component_and_workload<'a>(
    args: &ProfileArgs,
    spec: &'a crate::budget::Spec,
    workloads: &'a crate::runner::Workloads,
) -> Result<(&'a crate::budget::Component, &'a Arc<dyn DynWorkload>), CliError> {
    let component = spec.component(&args.component).ok_or_else(|| CliError::Usage {
        message: format!("no component `{}` in {}", args.component, args.budgets.display()),
        hint: String::new(),
    })?;
    let Some(workload) = workloads.get(&component.name) else {
        return Err(CliError::Usage {
            message: format!("component `{}` cannot be profiled by this build", component.name),
            hint: String::new(),
        });
    };
    Ok((component, workload))
}

/// Component `c`'s run context on `device` at batch size `batch_size`.
fn run_ctx(device: &Device, c: &crate::budget::Component, batch_size: usize) -> RunCtx {
    RunCtx {
        device: device.clone(),
        dtype: crate::sdk::candle_dtype(c.dtype),
        batch_size,
        seed: c.seed,
        master_dtype: c.master_dtype.map(crate::sdk::candle_dtype),
    }
}

/// The events go to the parent gate process on stdout: a write that fails leaves it without the measurement.
fn parent_write_error(e: std::io::Error) -> CliError {
    CliError::Infrastructure {
        message: format!("cannot write to the parent gate process: {e}"),
        hint: String::new(),
    }
}
