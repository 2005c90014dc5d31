//! `gate check`: profile each component in a child process, decide, write
//! report.json and junit.xml, print the table, exit with the verdict.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Instant;

use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};

use super::output::write_atomic;
use super::CliError;
use crate::exit::Exit;
use crate::probe::Backend;
use crate::report::{self, Report, Reserve, SCHEMA};
use crate::runner::{run_child, ChildArgs, Failure, Phase};
use crate::workload::Resolved;

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The spec to gate.
    #[arg(long, default_value = "budgets.yaml")]
    pub budgets: PathBuf,
    /// Folder for report.json and junit.xml.
    #[arg(long, default_value = "target/gate")]
    pub out: PathBuf,
    /// Run only these components (comma-separated).
    #[arg(long, value_delimiter = ',')]
    pub only: Vec<String>,
    /// Treat warnings (not measured, missing baseline, other testbed) as failures.
    #[arg(long)]
    pub strict: bool,
    /// Where to run the models: `cpu` (counting allocator), `cuda` (memory pool + NVML), or `auto`.
    #[arg(long, value_enum, default_value_t = Backend::Cpu)]
    pub backend: Backend,
    /// On a GPU larger than the spec's `capacity`, hold back the difference so
    /// a model that would not fit on the gated card runs out of memory here too.
    #[arg(long)]
    pub emulate_capacity: bool,
}

pub fn run(args: CheckArgs) -> Result<Exit, CliError> {
    let started = Instant::now();
    let spec = crate::budget::load(&args.budgets)?;
    for name in &args.only {
        if spec.component(name).is_none() {
            let names: Vec<&str> = spec.components.iter().map(|c| c.name.as_str()).collect();
            return Err(CliError::Usage {
                message: format!(
                    "--only names `{name}`, which is not a component of {}",
                    args.budgets.display()
                ),
                hint: format!("components: {}", names.join(", ")),
            });
        }
    }
    let backend = crate::probe::resolve_backend(args.backend).map_err(|e| CliError::Infrastructure {
        message: e.message,
        hint: e.hint,
    })?;
    let mut child_args = ChildArgs::new();
    child_args.extra = vec!["--backend".into(), backend.name().into()];
    if args.emulate_capacity {
        child_args.extra.push("--emulate-capacity".into());
    }
    // Two gate runs on one GPU would see each other's memory: one at a time.
    let _gpu_lock = match backend {
        Backend::Cuda => Some(
            crate::probe::lock::acquire("cuda0", |p| {
                eprintln!("waiting for another gate run on this GPU ({})", p.display())
            })
            .map_err(|e| CliError::Infrastructure {
                message: format!("cannot take the GPU lock: {e}"),
                hint: String::new(),
            })?,
        ),
        _ => None,
    };
    let selected: Vec<_> = spec
        .components
        .iter()
        .filter(|c| args.only.is_empty() || args.only.contains(&c.name))
        .collect();
    let exe = std::env::current_exe().map_err(|e| CliError::Infrastructure {
        message: format!("cannot locate the gate binary to start profiles: {e}"),
        hint: String::new(),
    })?;

    let bar = progress_bar(selected.len() as u64);
    let mut components = BTreeMap::new();
    let mut device = None;
    let mut infra: Option<String> = None;
    let mut measured_reserve: Option<u64> = None;
    for c in &selected {
        match &c.workload {
            Resolved::Unavailable(reason) => {
                bar.println(format!("{}: not measured: {reason}", c.name));
                components.insert(c.name.clone(), report::not_measured_report(c, reason));
            }
            Resolved::Ready(w) => {
                let t = Instant::now();
                bar.set_message(format!("{}: starting", c.name));
                let name = c.name.clone();
                let bar2 = bar.clone();
                let m = run_child(&exe, &spec.path, &c.name, &child_args, &mut |p: Phase| {
                    bar2.set_message(format!("{name}: {p}"));
                })
                .map_err(|e| CliError::Infrastructure {
                    message: format!("cannot start the profile of `{}`: {e}", c.name),
                    hint: String::new(),
                })?;
                if let Some(Failure { phase, reason }) = &m.failure {
                    bar.println(format!("{}: failed in phase {phase}: {reason}", c.name));
                    if *phase == Phase::Setup && reason.contains("status 3") {
                        infra = Some(format!("{}: {reason}", c.name));
                    }
                } else {
                    bar.println(format!("{}: profiled in {:.1} s", c.name, t.elapsed().as_secs_f64()));
                }
                if let Some(r) = m.context_reserve_bytes {
                    measured_reserve = Some(measured_reserve.map_or(r, |x| x.max(r)));
                }
                if device.is_none() && !m.device.backend.is_empty() {
                    device = Some(m.device.clone());
                }
                components.insert(c.name.clone(), report::component_report(c, w.config(), &m));
            }
        }
        bar.inc(1);
    }
    bar.finish_and_clear();

    let device = device.unwrap_or_else(crate::probe::cpu_device_info);
    // Ensemble members left out by --only are not measured: say so rather than sum less.
    // On CUDA the reserve is measured (the largest per-process context seen);
    // on the CPU it is the spec's declared figure.
    let reserve = match measured_reserve {
        Some(bytes) => Reserve { bytes, measured: true },
        None => Reserve {
            bytes: spec.device.reserve.0,
            measured: false,
        },
    };
    let verdict = report::decide(&spec, &components, None, false, reserve, args.strict);
    let mut summary = verdict.summary;
    summary
        .warnings
        .insert(0, "no baseline to compare with (regressions are not checked)".into());
    if args.strict && summary.status == "pass" {
        summary.status = "fail".into();
    }
    let report = Report {
        schema: SCHEMA,
        gate_version: env!("CARGO_PKG_VERSION").into(),
        commit: current_commit(),
        spec: args.budgets.display().to_string(),
        testbed: report::testbed(&device, &spec),
        components,
        ensemble: verdict.ensemble,
        results: verdict.results,
        summary,
        baseline: None,
        wall_seconds: started.elapsed().as_secs_f64(),
    };

    let json = serde_json::to_string_pretty(&report).expect("the report serializes");
    let junit = crate::render::junit::render(&report, time::OffsetDateTime::now_utc()).map_err(|e| {
        CliError::Infrastructure {
            message: format!("cannot render JUnit XML: {e}"),
            hint: String::new(),
        }
    })?;
    let write = |name: &str, bytes: &[u8]| {
        let path = args.out.join(name);
        write_atomic(&path, bytes).map_err(|e| CliError::Infrastructure {
            message: format!("cannot write {}: {e}", path.display()),
            hint: "check that --out names a writable folder".into(),
        })
    };
    write("report.json", json.as_bytes())?;
    write("junit.xml", junit.as_bytes())?;

    let color = crate::render::table::use_color(std::io::stdout().is_terminal());
    print!("{}", crate::render::table::render(&report, color));
    eprintln!(
        "wrote {} and {} in {:.1} s",
        args.out.join("report.json").display(),
        args.out.join("junit.xml").display(),
        report.wall_seconds
    );

    if let Some(reason) = infra {
        eprintln!("error: infrastructure failure: {reason}");
        return Ok(Exit::Infrastructure);
    }
    Ok(if report.summary.status == "pass" {
        Exit::Pass
    } else {
        Exit::Fail
    })
}

fn progress_bar(len: u64) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(len);
    bar.set_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} {msg} [{elapsed}]")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar.enable_steady_tick(std::time::Duration::from_millis(200));
    bar
}

/// The commit under test: `GITHUB_SHA` in Actions, else `git rev-parse HEAD` when available.
fn current_commit() -> Option<String> {
    if let Ok(sha) = std::env::var("GITHUB_SHA") {
        if !sha.is_empty() {
            return Some(sha);
        }
    }
    let out = std::process::Command::new("git")
        .args(["rev-parse", "HEAD"])
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
        .filter(|s| !s.is_empty())
}
