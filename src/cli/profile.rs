//! `gate profile` (hidden): the child side of process isolation. Profiles one
//! component and writes JSON events on stdout (see `runner::child`).

use std::path::PathBuf;
use std::sync::Arc;

use candle_core::Device;
use clap::Args;

use super::CliError;
use crate::exit::Exit;
use crate::probe::{Backend, CpuProbe, MemoryProbe, Recorder};
use crate::runner::{emit, profile, ChildEvent, Measurement};
use crate::workload::RunCtx;

#[derive(Debug, Args)]
pub struct ProfileArgs {
    #[arg(long, default_value = "budgets.yaml")]
    pub budgets: PathBuf,
    #[arg(long)]
    pub component: String,
    #[arg(long, value_enum, default_value_t = Backend::Cpu)]
    pub backend: Backend,
}

pub fn run(args: ProfileArgs) -> Result<Exit, CliError> {
    let spec = crate::budget::load(&args.budgets)?;
    let component = spec.component(&args.component).ok_or_else(|| CliError::Usage {
        message: format!("no component `{}` in {}", args.component, args.budgets.display()),
        hint: String::new(),
    })?;
    let Some(workload) = component.ready() else {
        return Err(CliError::Usage {
            message: format!("component `{}` cannot be profiled by this build", component.name),
            hint: String::new(),
        });
    };
    if args.backend != Backend::Cpu {
        let b = crate::probe::resolve_backend(args.backend).map_err(|e| CliError::Infrastructure {
            message: e.message,
            hint: e.hint,
        })?;
        return Err(CliError::Infrastructure {
            message: format!("the {} backend is not available in this build", b.name()),
            hint: String::new(),
        });
    }
    if !CpuProbe::is_counting() {
        return Err(CliError::Infrastructure {
            message: "the counting allocator is not installed in this binary".into(),
            hint: "run the `gate` binary itself; the library alone cannot measure CPU memory".into(),
        });
    }
    let probe: Arc<dyn MemoryProbe> = Arc::new(CpuProbe);
    let recorder = Recorder::new(probe);
    let ctx = RunCtx {
        device: Device::Cpu,
        dtype: component.dtype,
        batch_size: component.batch_size,
        seed: component.seed,
    };
    let mut stdout = std::io::stdout().lock();
    let mut io_err = None;
    let device = crate::probe::cpu_device_info();
    let mut m = profile(workload.as_ref(), &ctx, component.timing, &recorder, &mut |phase, so_far| {
        let so_far = Box::new(Measurement { device: device.clone(), ..so_far.clone() });
        if let Err(e) = emit(&mut stdout, &ChildEvent::Phase { phase, so_far }) {
            io_err = Some(e);
        }
    });
    m.device = device;
    if let Some(e) = io_err {
        return Err(CliError::Infrastructure {
            message: format!("cannot write to the parent gate process: {e}"),
            hint: String::new(),
        });
    }
    emit(&mut stdout, &ChildEvent::Done(Box::new(m))).map_err(|e| CliError::Infrastructure {
        message: format!("cannot write to the parent gate process: {e}"),
        hint: String::new(),
    })?;
    Ok(Exit::Pass)
}
