//! The command builder: the one way gate makes a child's command, with an
//! environment from an allow-list (a secret the job holds reaches no
//! build script or harness unless named), tied to this process, and the
//! `gate profile` command line with its allocator settings.

use std::path::Path;
use std::process::{Command, Stdio};

use super::ChildArgs;

/// The `gate profile` command for one component.
pub(super) fn profile_command(exe: &Path, request: &Path, component: &str, args: &ChildArgs) -> Command {
    let mut cmd = command(exe);
    cmd.arg("profile")
        .arg("--request")
        .arg(request)
        .arg("--component")
        .arg(component)
        .args(&args.extra)
        // One compute thread: the CPU matmul kernels keep a scratch buffer per
        // worker thread, and which workers run a kernel varies between runs,
        // so more threads would make the byte counts wobble.
        .env("RAYON_NUM_THREADS", args.threads.to_string())
        .env(crate::fault::COMPONENT_ENV, component)
        .env(TUNABLES_ENV, allocator_tunables(std::env::var_os(TUNABLES_ENV)))
        .envs(args.timing_lock.iter().map(|p| (crate::timing_lock::ENV, p)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    tie(&mut cmd);
    cmd
}

/// Variables a CI runner or a user sets to hold GitHub credentials: never
/// handed to a child, not even when [`PASS_ENV`] names them. gate needs
/// its token only in-process (`gate-github`).
const CREDENTIALS: &[&str] = &[
    "GITHUB_TOKEN",
    "GH_TOKEN",
    "GITHUB_PAT",
    "GH_ENTERPRISE_TOKEN",
    "GITHUB_ENTERPRISE_TOKEN",
    "ACTIONS_RUNTIME_TOKEN",
    "ACTIONS_ID_TOKEN_REQUEST_TOKEN",
    "ACTIONS_ID_TOKEN_REQUEST_URL",
    "INPUT_TOKEN",
    "INPUT_GITHUB_TOKEN",
];

/// The variable a user lists more names in, comma-separated, for a
/// harness or build that needs them (`GATE_PASS_ENV=HF_HOME,MY_MODEL_*`;
/// a name ending in `*` is a prefix). What it names passes as it is,
/// except [`CREDENTIALS`] and a value holding one of theirs.
pub const PASS_ENV: &str = "GATE_PASS_ENV";

/// The variables a child gets by name: what finding tools, building Rust
/// and C/CUDA code, and running a model need.
const ALLOWED: &[&str] = &[
    "PATH",
    "CARGO",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "PWD",
    "TMPDIR",
    "TMP",
    "TEMP",
    "TZ",
    "LANG",
    "LANGUAGE",
    "TERM",
    "COLORTERM",
    "NO_COLOR",
    "CLICOLOR",
    "CLICOLOR_FORCE",
    "CI",
    "RUSTFLAGS",
    "RUSTDOCFLAGS",
    "RUSTC",
    "RUSTDOC",
    "RUSTC_WRAPPER",
    "RUSTC_WORKSPACE_WRAPPER",
    "CC",
    "CXX",
    "AR",
    "LD",
    "NVCC",
    "NVCC_CCBIN",
    "CFLAGS",
    "CXXFLAGS",
    "CPPFLAGS",
    "LDFLAGS",
    "CPATH",
    "C_INCLUDE_PATH",
    "CPLUS_INCLUDE_PATH",
    "LIBRARY_PATH",
    "LD_LIBRARY_PATH",
    "DYLD_LIBRARY_PATH",
    "PKG_CONFIG",
    "PKG_CONFIG_PATH",
    "CMAKE",
    "MAKE",
    "MAKEFLAGS",
    "SDKROOT",
    "MACOSX_DEPLOYMENT_TARGET",
    // A build that downloads its crates needs the network's proxy (which
    // may hold a password: it is the job's own, for the build).
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "NO_PROXY",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "GLIBC_TUNABLES",
    "SYSTEMROOT",
    "WINDIR",
    "PATHEXT",
    "COMSPEC",
];

/// The prefixes a child gets: cargo's and rustup's settings, the locale,
/// the toolkits' and the runtimes' (CUDA, cuDNN, NCCL, ROCm, the BLAS and
/// thread pools), Rust's own (`RUST_LOG`, `RUST_BACKTRACE`), gate's, the
/// XDG folders, and the compilers' per-target settings (`CC_x86_64_…`).
/// The framework's own settings of the SDK built into gate are added at
/// start ([`pass_framework_settings`]).
const ALLOWED_PREFIXES: &[&str] = &[
    "CARGO_",
    "RUSTUP_",
    "RUST_",
    "LC_",
    "CUDA_",
    "CUDNN_",
    "NVIDIA_",
    "NCCL_",
    "ROCM_",
    "HIP_",
    "HSA_",
    "WGPU_",
    "MKL_",
    "OMP_",
    "OPENBLAS_",
    "RAYON_",
    "MALLOC_",
    "XDG_",
    "GATE_",
    "CC_",
    "CXX_",
    "AR_",
    "CFLAGS_",
    "CXXFLAGS_",
];

/// The prefixes of the frameworks' own settings that children get from now
/// on (`NAME_` for the framework `name`), added by [`pass_framework_settings`].
static FRAMEWORK_PREFIXES: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// From now on every child also gets the framework `name`'s own settings:
/// the variables named `NAME_*` (upper-cased, `-` as `_`), as a framework
/// names its build's and its runtime's switches after itself. gate-runner
/// names no framework; the command line calls this with a name it trusts
/// only: the framework of the SDK compiled into the binary (its built-in
/// models'), never one a harness answers or its crate's adapter declares.
/// Those are the pull request's to choose, and a framework "named" `ssh`,
/// `slack` or `google` would hand its build and its profiles
/// `SSH_AUTH_SOCK`, `SLACK_WEBHOOK_URL` or `GOOGLE_GHA_CREDS_PATH`; a
/// harness on another framework gets its settings where the job names
/// them ([`PASS_ENV`], `GATE_PASS_ENV=NAME_*`). A variable that looks like
/// a credential still stays out. A name that is not letters, digits, `-`
/// and `_`, or shorter than two characters, adds nothing (returns `false`).
pub fn pass_framework_settings(name: &str) -> bool {
    let valid = name.len() >= 2
        && name.starts_with(|c: char| c.is_ascii_alphabetic())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if !valid {
        return false;
    }
    let prefix = format!("{}_", name.to_ascii_uppercase().replace('-', "_"));
    let mut prefixes = FRAMEWORK_PREFIXES.lock().unwrap_or_else(|p| p.into_inner());
    if !prefixes.contains(&prefix) {
        prefixes.push(prefix);
    }
    true
}

/// Whether `upper` is one of a framework's settings ([`pass_framework_settings`]).
fn framework_setting(upper: &str) -> bool {
    let prefixes = FRAMEWORK_PREFIXES.lock().unwrap_or_else(|p| p.into_inner());
    prefixes.iter().any(|p| upper.starts_with(p.as_str()))
}

/// Words that make an allowed name a credential all the same: cargo's
/// registry tokens (`CARGO_REGISTRY_TOKEN`, `CARGO_REGISTRIES_*_TOKEN`)
/// start with `CARGO_` and still stay out.
const SECRET_WORDS: &[&str] = &["TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "_KEY", "_PAT"];

/// Whether `name` (upper-cased) looks like it holds a credential.
fn secret_shaped(upper: &str) -> bool {
    SECRET_WORDS.iter().any(|w| upper.contains(w)) || upper.ends_with("KEY")
}

/// The names [`PASS_ENV`] lists: exact names and `PREFIX*` patterns.
fn passed_names(list: Option<&std::ffi::OsStr>) -> Vec<String> {
    list.map(|l| {
        l.to_string_lossy()
            .split(',')
            .map(|n| n.trim().to_ascii_uppercase())
            .filter(|n| !n.is_empty() && n != "*")
            .collect()
    })
    .unwrap_or_default()
}

/// Whether a child may see the variable `name` with `value`: a name of
/// [`ALLOWED`] or with a prefix of [`ALLOWED_PREFIXES`] or of a framework's
/// settings ([`pass_framework_settings`]) that does not look
/// like a credential, or one [`PASS_ENV`] lists (`passed`); never one of
/// [`CREDENTIALS`], nor any variable whose value contains one of `secrets`
/// (the values of the variables left out for looking like credentials: a
/// token copied under another name).
pub fn is_passed(name: &std::ffi::OsStr, value: &std::ffi::OsStr, passed: &[String], secrets: &[Vec<u8>]) -> bool {
    let upper = name.to_string_lossy().to_ascii_uppercase();
    if CREDENTIALS.contains(&upper.as_str()) {
        return false;
    }
    let value = value.as_encoded_bytes();
    if secrets
        .iter()
        .any(|s| value.windows(s.len()).any(|w| w == s.as_slice()))
    {
        return false;
    }
    let listed = passed.iter().any(|p| match p.strip_suffix('*') {
        Some(prefix) => upper.starts_with(prefix),
        None => *p == upper,
    });
    if listed {
        return true;
    }
    let allowed = ALLOWED.contains(&upper.as_str())
        || ALLOWED_PREFIXES.iter().any(|p| upper.starts_with(p))
        || framework_setting(&upper);
    allowed && !secret_shaped(&upper)
}

/// The environment a child gets: this process's, through [`is_passed`].
pub fn child_env() -> Vec<(std::ffi::OsString, std::ffi::OsString)> {
    let vars: Vec<_> = std::env::vars_os().collect();
    let passed = passed_names(std::env::var_os(PASS_ENV).as_deref());
    // The values of what looks like a credential (of 8 bytes or more: a
    // shorter one would match by chance), wherever else they turn up.
    let secrets: Vec<Vec<u8>> = vars
        .iter()
        .filter(|(n, _)| {
            let upper = n.to_string_lossy().to_ascii_uppercase();
            CREDENTIALS.contains(&upper.as_str()) || secret_shaped(&upper)
        })
        .filter(|(n, v)| !is_passed(n, v, &passed, &[]))
        .map(|(_, v)| v.as_encoded_bytes().trim_ascii().to_vec())
        .filter(|v| v.len() >= 8)
        .collect();
    vars.into_iter()
        .filter(|(n, v)| is_passed(n, v, &passed, &secrets))
        .collect()
}

/// The one way gate makes a child's command (cargo, `cargo metadata`, the
/// harness's `__resolve` and profiles, git, the watchdog): `program` with
/// an environment built from an allow-list ([`child_env`]), never this
/// process's whole environment: cargo runs every build script of the pull
/// request's crates and the harness is its program, so a secret the job
/// holds reaches none of them unless named in [`PASS_ENV`].
/// `tests/it/architecture.rs` holds every `Command::new` of gate's sources
/// to this function.
pub fn command(program: impl AsRef<std::ffi::OsStr>) -> Command {
    let mut cmd = Command::new(program);
    cmd.env_clear().envs(child_env());
    cmd
}

/// Ties a child about to be started to this process: it leads a process
/// group of its own (so a signal reaches everything it starts: cargo's
/// compilers and build scripts, a harness's own children), and on Linux it
/// dies with this process even when this one is SIGKILLed (PDEATHSIG; its
/// own children are reached only through the group, on SIGINT/SIGTERM).
pub fn tie(cmd: &mut Command) {
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        cmd.process_group(0);
    }
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::process::CommandExt;
        // SAFETY: getpid/getppid/prctl/raise are async-signal-safe; nothing
        // else runs between fork and exec.
        let parent = unsafe { libc::getpid() };
        // SAFETY: the closure runs in the forked child before exec and calls
        // only async-signal-safe functions (prctl, getppid, raise).
        unsafe {
            cmd.pre_exec(move || {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                // The parent died before prctl: PDEATHSIG will never fire.
                if libc::getppid() != parent {
                    libc::raise(libc::SIGKILL);
                }
                Ok(())
            });
        }
    }
}

/// glibc reads its malloc settings from this variable when a process starts.
const TUNABLES_ENV: &str = "GLIBC_TUNABLES";

/// glibc malloc settings for a profile: every block from the heap, none
/// handed back to the kernel. By default glibc maps each block over 32 MiB
/// afresh and unmaps it on free, so a model whose activations are big
/// tensors (the plain TFT: a 5 GiB training peak) page-faults and zeroes
/// gigabytes every step: on 2 cores that was 50 s of kernel time in an 80 s
/// profile. Kept in the heap, the memory is reused from the second step on
/// (35 s, 4 s of it kernel). The counting allocator counts the sizes
/// asked for, so every byte figure is the same either way; only the
/// process's resident size grows a little (4.94 → 5.30 GiB for the plain
/// TFT). Other C libraries ignore the variable. Settings the user already
/// has come after ours, so theirs win.
/// <https://www.gnu.org/software/libc/manual/html_node/Memory-Allocation-Tunables.html>
fn allocator_tunables(user: Option<std::ffi::OsString>) -> std::ffi::OsString {
    let mut value = std::ffi::OsString::from(
        "glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=68719476736:glibc.malloc.top_pad=268435456",
    );
    if let Some(user) = user.filter(|u| !u.is_empty()) {
        value.push(":");
        value.push(user);
    }
    value
}

#[cfg(test)]
mod tests {
    use super::{allocator_tunables, is_passed, pass_framework_settings};

    /// A framework's settings pass once the command line has named it, not
    /// before; a credential-shaped one never; a name that is not one adds
    /// nothing.
    #[test]
    fn a_frameworks_settings_pass_once_its_name_is_known() {
        let passes = |name: &str| is_passed(name.as_ref(), "1".as_ref(), &[], &[]);
        assert!(!passes("FW_ONE_DEVICE"));
        assert!(pass_framework_settings("fw-one"));
        assert!(passes("FW_ONE_DEVICE") && passes("fw_one_cache"));
        assert!(!passes("FW_ONE_API_KEY") && !passes("FW_ONE_TOKEN"));
        assert!(!passes("FW_TWO_DEVICE"));
        for bad in ["", "x", "a b", "fw*", "-fw", "1fw"] {
            assert!(!pass_framework_settings(bad), "{bad:?}");
        }
    }

    #[test]
    fn the_users_tunables_come_last_so_they_win() {
        let ours = allocator_tunables(None);
        assert!(ours.to_str().unwrap().starts_with("glibc.malloc.mmap_max=0:"));
        assert_eq!(allocator_tunables(Some("".into())), ours);
        let both = allocator_tunables(Some("glibc.malloc.mmap_max=65536".into()));
        let both = both.to_str().unwrap();
        assert!(both.starts_with(ours.to_str().unwrap()));
        assert!(both.ends_with(":glibc.malloc.mmap_max=65536"));
    }
}
