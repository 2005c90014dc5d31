//! `gate doctor`: what this machine offers (CPU, memory, GPU, driver, CUDA,
//! NVML) and what a `gate check` here would be able to measure. It reads
//! /proc and, in a `cuda` build, asks NVML and the CUDA driver; it never
//! panics without a GPU, and exits 0 unless `--require-gpu` is not met.

use clap::Args;

use crate::errors::CliError;
use gate_runner::exit::Exit;
use gate_spec::hint::Problem;

#[derive(Debug, Args)]
pub(crate) struct DoctorArgs {
    /// Exit 3 (infrastructure) unless a CUDA run is possible here.
    #[arg(long)]
    pub require_gpu: bool,
}

/// What `--backend cuda` found, for the summary.
struct GpuFinding {
    usable: bool,
    /// Why not, with the fix.
    reason: Option<Problem>,
    nvml: bool,
}

pub(super) fn run(args: DoctorArgs) -> Result<Exit, CliError> {
    println!("gate {}", crate::app::LONG_VERSION.replace('\n', "\n  "));
    println!();
    println!("machine");
    let cpu = cpu_summary();
    println!("  cpu:     {}", cpu.0);
    println!("  cores:   {}", cpu.1);
    println!("  memory:  {}", memory_summary());
    println!("  os:      {} {}", std::env::consts::OS, std::env::consts::ARCH);
    println!();
    println!("gpu");
    let gpu = gpu_section();
    println!();
    println!("what a run here can measure");
    println!(
        "  --backend cpu:  yes: params, activations, gradients, optimizer, training_peak, inference_peak, step_time, loss"
    );
    println!("                  (counting allocator, exact to the byte; device_used is CUDA only: not measured)");
    if gpu.usable {
        let nvml = if gpu.nvml {
            "device_used (NVML) and a measured context reserve"
        } else {
            "no device_used (NVML unavailable: the spec's declared reserve is used)"
        };
        println!("  --backend cuda: yes: every metric from the memory pool's exact counters; {nvml}");
        println!("                  --emulate-capacity can shrink this GPU to the spec's card");
        println!("  --backend auto: cuda");
    } else {
        let why = gpu.reason.as_ref().map_or("", |p| p.message.as_str());
        println!("  --backend cuda: no: {why}");
        println!("  --backend auto: cpu");
    }
    if let Some(hint) = gpu.reason.as_ref().and_then(Problem::hint) {
        println!("hint: {hint}");
    }
    if args.require_gpu && !gpu.usable {
        let reason = gpu
            .reason
            .unwrap_or_else(|| Problem::new("no usable CUDA device was found"));
        return Err(CliError::Infrastructure(Problem {
            message: format!("--require-gpu: no CUDA run is possible here: {}", reason.message),
            hint: reason.hint,
        }));
    }
    Ok(Exit::Pass)
}

fn read(path: &str) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

/// (model, cores line) from /proc/cpuinfo and the scheduler.
fn cpu_summary() -> (String, String) {
    let info = read("/proc/cpuinfo").unwrap_or_default();
    let model = info
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_string())
        .unwrap_or_else(|| "unknown (no /proc/cpuinfo model name)".into());
    let logical = info.lines().filter(|l| l.starts_with("processor")).count();
    let usable = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0);
    let cores = match (logical, usable) {
        (0, 0) => "unknown".to_string(),
        (0, u) => format!("{u} available to this process"),
        (l, u) if u == l || u == 0 => format!("{l}"),
        (l, u) => format!("{l} ({u} available to this process)"),
    };
    (model, cores)
}

fn gib(bytes: u64) -> String {
    format!("{:.1} GiB", bytes as f64 / (1u64 << 30) as f64)
}

fn memory_summary() -> String {
    let Some(text) = read("/proc/meminfo") else {
        return "unknown (no /proc/meminfo)".into();
    };
    match (
        crate::pipeline::run::meminfo_kib(&text, "MemTotal:"),
        crate::pipeline::run::meminfo_kib(&text, "MemAvailable:"),
    ) {
        (Some(t), Some(a)) => format!("{} total, {} available", gib(t * 1024), gib(a * 1024)),
        (Some(t), None) => format!("{} total", gib(t * 1024)),
        _ => "unknown".into(),
    }
}

/// The kernel driver's own line, readable without NVML or CUDA.
fn kernel_driver() -> Option<String> {
    let v = read("/proc/driver/nvidia/version")?;
    let line = v.lines().next()?.to_string();
    // "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.95.05  ..."
    let ver = line
        .split_whitespace()
        .find(|w| w.chars().next().is_some_and(|c| c.is_ascii_digit()) && w.contains('.'))
        .map(str::to_string);
    Some(ver.unwrap_or(line))
}

#[cfg(not(feature = "cuda"))]
fn gpu_section() -> GpuFinding {
    println!("  this binary:   CPU build (no CUDA)");
    let driver = kernel_driver();
    let devices = std::fs::read_dir("/dev")
        .map(|d| {
            d.filter_map(Result::ok)
                .filter(|e| {
                    let n = e.file_name().to_string_lossy().into_owned();
                    n.strip_prefix("nvidia")
                        .is_some_and(|r| !r.is_empty() && r.chars().all(|c| c.is_ascii_digit()))
                })
                .count()
        })
        .unwrap_or(0);
    match &driver {
        Some(v) => println!("  nvidia driver: {v} (from /proc/driver/nvidia/version)"),
        None => println!("  nvidia driver: none found"),
    }
    println!("  gpus:          {devices} (/dev/nvidia*)");
    let hint = if driver.is_some() || devices > 0 {
        "this machine has an NVIDIA GPU: to measure on it, use the `cuda` build of gate (release asset \
         `gate-*-x86_64-unknown-linux-gnu-cuda.tar.gz`, or `cargo build --release --features cuda`, see docs/release.md)"
    } else {
        "a GPU run needs an NVIDIA GPU and the `cuda` build of gate (see docs/release.md); the CPU gate works here as it is"
    };
    GpuFinding {
        usable: false,
        reason: Some(Problem::new("this gate is a CPU build (no `cuda` feature)").with_hint(hint)),
        nvml: false,
    }
}

#[cfg(feature = "cuda")]
fn gpu_section() -> GpuFinding {
    println!(
        "  this binary:   cuda build (kernels for compute capability {})",
        env!("GATE_CUDA_COMPUTE_CAP")
    );
    if let Some(v) = kernel_driver() {
        println!("  kernel driver: {v} (from /proc/driver/nvidia/version)");
    }
    match gate_probe::cuda::driver_version() {
        Ok(v) => println!("  cuda driver:   {v}"),
        Err(e) => println!("  cuda driver:   unknown ({})", e.message),
    }
    let built_cap: Option<i32> = env!("GATE_CUDA_COMPUTE_CAP")
        .trim_end_matches(|c: char| c.is_ascii_alphabetic())
        .parse()
        .ok();
    let mut too_old = Vec::new();
    let nvml = nvml_section(built_cap, &mut too_old);
    let finding = context_section(nvml);
    if !too_old.is_empty() {
        println!(
            "warning: this build's kernels need compute capability ≥ {}: {} cannot run them",
            env!("GATE_CUDA_COMPUTE_CAP"),
            too_old.join(", ")
        );
    }
    finding
}

/// NVML's view: the driver and each GPU; those older than this build's
/// kernels go to `too_old`. Whether NVML answered.
#[cfg(feature = "cuda")]
fn nvml_section(built_cap: Option<i32>, too_old: &mut Vec<String>) -> bool {
    match nvml_wrapper::Nvml::init() {
        Ok(n) => {
            let driver = n.sys_driver_version().unwrap_or_else(|e| format!("unknown ({e})"));
            println!("  nvml:          yes (driver {driver})");
            let count = n.device_count().unwrap_or(0);
            println!("  gpus:          {count}");
            for i in 0..count {
                let Ok(d) = n.device_by_index(i) else { continue };
                let name = d.name().unwrap_or_else(|_| format!("GPU {i}"));
                let mem = d
                    .memory_info()
                    .map(|m| format!("{} total, {} free", gib(m.total), gib(m.free)))
                    .unwrap_or_else(|_| "memory unknown".into());
                let cc = d.cuda_compute_capability().ok();
                let cc_text = cc
                    .as_ref()
                    .map(|c| format!(", compute capability {}.{}", c.major, c.minor))
                    .unwrap_or_default();
                println!("    {i}: {name}: {mem}{cc_text}");
                if let (Some(c), Some(b)) = (cc, built_cap) {
                    if c.major * 10 + c.minor < b {
                        too_old.push(format!("GPU {i} ({name}, {}.{})", c.major, c.minor));
                    }
                }
            }
            true
        }
        Err(e) => {
            println!("  nvml:          no ({e}): device_used will not be measured");
            false
        }
    }
}

/// Whether GPU 0 takes a CUDA context and its memory pool.
#[cfg(feature = "cuda")]
fn context_section(nvml: bool) -> GpuFinding {
    // Opening the probe makes a CUDA context and checks the memory pool.
    let opened = std::panic::catch_unwind(|| gate_probe::cuda::CudaProbe::open(0).map(|(_, info)| info));
    match opened {
        Ok(Ok(info)) => {
            println!("  gpu 0 context: yes ({})", info.name);
            println!("  memory pool:   yes (cuMemAllocAsync): exact tensor bytes");
            GpuFinding {
                usable: true,
                reason: None,
                nvml,
            }
        }
        Ok(Err(e)) => {
            println!("  gpu 0:         not usable: {}", e.message);
            GpuFinding {
                usable: false,
                reason: Some(e),
                nvml,
            }
        }
        Err(_) => {
            println!("  gpu 0:         not usable: the CUDA driver library failed (see the message above)");
            GpuFinding {
                usable: false,
                reason: Some(
                    Problem::new("the CUDA driver library failed")
                        .with_hint("check the NVIDIA driver with `nvidia-smi`"),
                ),
                nvml,
            }
        }
    }
}
