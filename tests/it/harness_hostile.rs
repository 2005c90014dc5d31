//! A harness that misbehaves (issue #28): `tests/harnesses/rogue`, a crate
//! with no dependency that speaks gate's harness protocol by hand and goes
//! wrong as `ROGUE_MODE` says. No measurement from a harness is an
//! infrastructure failure (exit 3) that names the harness and what was
//! missing; a crash names its signal; gate's children end with gate;
//! `validate` builds nothing unless asked; the harness's fields are names
//! and paths, not cargo's arguments.
#![cfg(target_os = "linux")]

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::common::{gate, text};

const SPEC: &str = "version: 1\nharness: { package: rogue, bin: rogue-harness }\ndevice: { name: card, capacity: 4 GiB, reserve: 300 MiB }\ncomponents:\n  rogue:\n    workload: rogue\n    budgets: { params: < 1 MiB }\n";

/// A copy of the rogue crate in `dir/crate` with `SPEC` beside it; the spec's path.
fn rogue(dir: &Path) -> PathBuf {
    let krate = dir.join("crate");
    common::copy_crate(&Path::new(env!("GATE_REPO_ROOT")).join("tests/harnesses/rogue"), &krate);
    std::fs::write(krate.join("budgets.yaml"), SPEC).unwrap();
    krate.join("budgets.yaml")
}

/// `gate ARGS` in the spec's folder, the harness built into `dir/target`
/// (one per test: nothing waits on another test's cargo lock).
fn gate_in(dir: &Path, spec: &Path, mode: &str) -> Command {
    // gate's private copy of the harness goes here, to be looked for.
    std::fs::create_dir_all(dir.join("tmp")).unwrap();
    let mut cmd = gate();
    cmd.env("TMPDIR", dir.join("tmp"));
    cmd.current_dir(spec.parent().unwrap())
        .env("CARGO_TARGET_DIR", dir.join("target"))
        .env_remove("CARGO_BUILD_TARGET")
        // The rogue harness's settings reach it as a team's would: named.
        .env("GATE_PASS_ENV", "ROGUE_*")
        .env("ROGUE_MODE", mode)
        .env("ROGUE_LATE", dir.join("late"))
        .env("ROGUE_BUILD_MARK", dir.join("built"))
        .stdin(Stdio::null());
    cmd
}

fn check(mode: &str) -> (tempfile::TempDir, Output) {
    let t = tempfile::tempdir().unwrap();
    let spec = rogue(t.path());
    let out = gate_in(t.path(), &spec, mode)
        .args(["check", "--baseline", "none", "--out"])
        .arg(t.path().join("out"))
        .output()
        .unwrap();
    (t, out)
}

/// Exit 3, every line of `needles` in the error, and (when the harness gave
/// no configs) no report written.
fn assert_infrastructure(mode: &str, needles: &[&str], written: bool) {
    let (t, o) = check(mode);
    let stderr = text(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{mode}: {stderr}");
    for n in needles {
        assert!(stderr.contains(n), "{mode}: no {n:?} in {stderr}");
    }
    assert_eq!(t.path().join("out/report.json").exists(), written, "{mode}: {stderr}");
}

const NAMED: &str = "the harness `rogue-harness` of `rogue` gave no answer for budgets.yaml";

#[test]
fn a_resolve_that_exits_0_without_its_answer_is_exit_3() {
    assert_infrastructure(
        "resolve-silent",
        &[NAMED, "`__resolve` exited with status 0 and wrote nothing on stdout"],
        false,
    );
    assert_infrastructure(
        "resolve-garbage",
        &[
            NAMED,
            "its stdout is not gate's JSON answer (it begins \"hello from the harness",
        ],
        false,
    );
    assert_infrastructure("resolve-no-configs", &[NAMED, "its answer has no `configs`"], false);
    // Before: the component without a config was left out, and 0 of 0 budgets passed.
    assert_infrastructure(
        "resolve-other",
        &[NAMED, "its answer has no config for component `rogue`"],
        false,
    );
}

#[test]
fn a_harness_of_another_protocol_is_exit_3_naming_both() {
    let hint = "hint: build the harness against the same gate release as the installed `gate`";
    assert_infrastructure(
        "resolve-old",
        &[
            "the harness `rogue-harness` of `rogue` speaks gate's harness protocol 1 (it takes `--budgets`, not `--request`), and this gate speaks 3",
            hint,
        ],
        false,
    );
    assert_infrastructure(
        "resolve-newer",
        &[
            "the harness `rogue-harness` of `rogue` speaks gate's harness protocol 4, and this gate speaks 3",
            hint,
        ],
        false,
    );
}

#[test]
fn a_profile_that_exits_0_without_its_measurement_is_exit_3() {
    assert_infrastructure(
        "profile-silent",
        &["error: infrastructure failure: rogue: no measurement: `rogue-harness profile` exited with status 0 without its `done` event (its stdout had no line of gate's protocol)"],
        true,
    );
    assert_infrastructure(
        "profile-garbage",
        &["`rogue-harness profile` exited with status 0 without its `done` event (its stdout had 1 line that is not gate's JSON events, the first: \"hello from the harness, not JSON\")"],
        true,
    );
}

#[test]
fn a_harness_that_crashes_is_exit_3_with_its_signal_named() {
    assert_infrastructure(
        "resolve-segv",
        &[NAMED, "`__resolve` ended: killed by SIGSEGV (signal 11)"],
        false,
    );
    assert_infrastructure(
        "resolve-abort",
        &[NAMED, "`__resolve` ended: killed by SIGABRT (signal 6)"],
        false,
    );
    assert_infrastructure(
        "profile-segv",
        &["error: infrastructure failure: rogue: the profile crashed: killed by SIGSEGV (11)"],
        true,
    );
}

/// Starts `gate check` in `mode`, waits until `ready` says the moment has
/// come, sends `sig`; returns gate's exit code (and how long it took to
/// exit) and, 4 s later, whether anything landed.
fn signal_midway(mode: &str, sig: i32, ready: &dyn Fn(&Path) -> bool) -> (Option<i32>, Duration, bool, String) {
    let t = tempfile::tempdir().unwrap();
    let spec = rogue(t.path());
    let out = t.path().join("out");
    let child = gate_in(t.path(), &spec, mode)
        .args(["check", "--baseline", "none", "--out"])
        .arg(&out)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while !ready(t.path()) {
        assert!(started.elapsed() < Duration::from_secs(120), "{mode}: never got there");
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(child.id() as i32, sig) };
    let signalled = Instant::now();
    let o = child.wait_with_output().unwrap();
    let took = signalled.elapsed();
    // The harness would have written 3 s after it started.
    std::thread::sleep(Duration::from_secs(4));
    let landed = t.path().join("late").exists() || out.join("report.json").exists();
    // Nor is gate's private copy of the harness, nor its request, left behind.
    let left: Vec<_> = std::fs::read_dir(t.path().join("tmp"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .filter(|n| {
            ["gate-harness-", "gate-request-"]
                .iter()
                .any(|p| n.to_string_lossy().starts_with(p))
        })
        .collect();
    let landed = landed || (sig != libc::SIGKILL && !left.is_empty());
    let code = o.status.code().or_else(|| {
        use std::os::unix::process::ExitStatusExt;
        o.status.signal().map(|s| 128 + s)
    });
    (code, took, landed, text(&o.stderr))
}

/// Whether this test's harness (gate's copy of it, under `dir/tmp`) runs
/// command `arg` now (from /proc).
fn running(dir: &Path, arg: &str) -> bool {
    let exe = dir.join("tmp").to_string_lossy().into_owned();
    std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
        std::fs::read(e.path().join("cmdline")).is_ok_and(|c| {
            let c = String::from_utf8_lossy(&c);
            c.contains(&exe) && c.contains("rogue-harness") && c.contains(arg)
        })
    })
}

#[test]
fn sigterm_or_sigkill_to_gate_ends_its_harness_and_nothing_lands_after() {
    // The harness answers `__resolve` 3 s late, then writes a file.
    let resolving = |dir: &Path| running(dir, "__resolve");
    let (code, took, landed, stderr) = signal_midway("resolve-sleep", libc::SIGTERM, &resolving);
    assert_eq!(code, Some(130), "{stderr}");
    assert!(took < Duration::from_secs(2), "{took:?}: {stderr}");
    assert!(
        !landed,
        "the harness wrote, or its copy stayed, after gate exited: {stderr}"
    );
    assert!(stderr.contains("interrupted by SIGTERM"), "{stderr}");

    let (code, _, landed, stderr) = signal_midway("resolve-sleep", libc::SIGKILL, &resolving);
    assert_eq!(code, Some(128 + 9), "{stderr}");
    assert!(!landed, "the harness outlived a SIGKILLed gate: {stderr}");

    // The same harness as a profile: stopped, and nothing written.
    let profiling = |dir: &Path| running(dir, "profile");
    let (code, _, landed, stderr) = signal_midway("profile-sleep", libc::SIGTERM, &profiling);
    assert_eq!(code, Some(130), "{stderr}");
    assert!(!landed, "the profile wrote after gate exited: {stderr}");

    // A process the profile started itself ends too when gate is SIGKILLed.
    let (code, _, landed, stderr) = signal_midway("profile-spawn", libc::SIGKILL, &|dir: &Path| {
        running(dir, "profile") && {
            std::thread::sleep(Duration::from_millis(300));
            true
        }
    });
    assert_eq!(code, Some(128 + 9), "{stderr}");
    assert!(!landed, "the profile's child outlived a SIGKILLed gate: {stderr}");
}

#[test]
fn sigterm_to_gate_during_the_harness_build_ends_cargo_and_its_build_scripts() {
    // The crate's build script sleeps 3 s, then writes a file.
    let building = |dir: &Path| dir.join("built").exists();
    let (code, took, landed, stderr) = signal_midway("build-sleep", libc::SIGTERM, &building);
    assert_eq!(code, Some(130), "{stderr}");
    assert!(took < Duration::from_secs(2), "{took:?}: {stderr}");
    assert!(!landed, "the build script wrote after gate exited: {stderr}");

    // SIGKILL: cargo dies with gate (PDEATHSIG), and its build script with
    // cargo's process group (gate's watchdog).
    let (code, _, landed, stderr) = signal_midway("build-sleep", libc::SIGKILL, &building);
    assert_eq!(code, Some(128 + 9), "{stderr}");
    assert!(!landed, "the build script outlived a SIGKILLed gate: {stderr}");
}

#[test]
fn validate_builds_and_runs_nothing_unless_asked() {
    let t = tempfile::tempdir().unwrap();
    let spec = rogue(t.path());
    let o = gate_in(t.path(), &spec, "resolve-other")
        .arg("validate")
        .output()
        .unwrap();
    let stderr = text(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    assert!(!t.path().join("built").exists(), "a build script ran: {stderr}");
    assert!(!t.path().join("target").exists(), "cargo ran: {stderr}");
    assert!(text(&o.stdout).contains("budgets.yaml: ok — 1 component, 1 budget"));
    assert!(
        stderr.contains("the workloads' configs were not checked") && stderr.contains("gate validate --build"),
        "{stderr}"
    );
    // `--build` builds the harness and has it read the spec: here it answers wrong.
    let o = gate_in(t.path(), &spec, "resolve-other")
        .args(["validate", "--build"])
        .output()
        .unwrap();
    let stderr = text(&o.stderr);
    assert!(t.path().join("built").exists(), "{stderr}");
    assert_eq!(o.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("its answer has no config for component `rogue`"),
        "{stderr}"
    );
}

#[test]
fn a_harness_field_that_is_a_cargo_option_is_exit_2_before_cargo_runs() {
    let t = tempfile::tempdir().unwrap();
    let spec = rogue(t.path());
    std::fs::write(
        &spec,
        SPEC.replace(
            "bin: rogue-harness }",
            "bin: rogue-harness, features: [\"--config=build.rustc-wrapper=/tmp/w\"] }",
        ),
    )
    .unwrap();
    for cmd in [&["check", "--baseline", "none"][..], &["validate", "--build"]] {
        let o = gate_in(t.path(), &spec, "").args(cmd).output().unwrap();
        let stderr = text(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{cmd:?}: {stderr}");
        assert!(
            stderr.contains("budgets.yaml:2:59: error: harness.features: `--config=build.rustc-wrapper=/tmp/w` is not a cargo feature name"),
            "{cmd:?}: {stderr}"
        );
        assert!(stderr.contains("hint: name a feature"), "{stderr}");
        assert!(!t.path().join("target").exists(), "cargo ran: {stderr}");
    }
}

#[test]
fn a_manifest_outside_the_specs_repository_is_refused_unless_allowed() {
    let t = tempfile::tempdir().unwrap();
    rogue(t.path());
    // The spec in a folder of its own (not in git: the folder is the
    // repository), its harness's crate beside that folder.
    let specs = t.path().join("specs");
    std::fs::create_dir(&specs).unwrap();
    let spec = specs.join("budgets.yaml");
    std::fs::write(
        &spec,
        SPEC.replace(
            "bin: rogue-harness }",
            "bin: rogue-harness, manifest: ../crate/Cargo.toml }",
        ),
    )
    .unwrap();
    for cmd in [&["check", "--baseline", "none"][..], &["validate"]] {
        let o = gate_in(t.path(), &spec, "").args(cmd).output().unwrap();
        let stderr = text(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{cmd:?}: {stderr}");
        assert!(
            stderr.contains("error: budgets.yaml:2:58: `harness:` builds from "),
            "{stderr}"
        );
        assert!(stderr.contains("outside the spec's repository"), "{stderr}");
        assert!(stderr.contains("--allow-outside-manifest"), "{stderr}");
        assert!(!t.path().join("built").exists(), "a build script ran: {stderr}");
    }
    let o = gate_in(t.path(), &spec, "")
        .args(["validate", "--allow-outside-manifest"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    // Inside a git checkout the checkout is the repository.
    std::fs::create_dir(t.path().join(".git")).unwrap();
    let o = gate_in(t.path(), &spec, "").arg("validate").output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
}

#[test]
fn a_harness_that_does_not_compile_shows_cargos_error_once() {
    let t = tempfile::tempdir().unwrap();
    let spec = rogue(t.path());
    std::fs::write(
        t.path().join("crate/src/main.rs"),
        "fn main() { let _ = not_defined_anywhere; }\n",
    )
    .unwrap();
    let o = gate_in(t.path(), &spec, "")
        .args(["check", "--baseline", "none"])
        .output()
        .unwrap();
    let stderr = text(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{stderr}");
    assert_eq!(stderr.matches("error[E0425]").count(), 1, "{stderr}");
    assert!(
        stderr.contains("error: the harness `rogue-harness` of `rogue` does not build: cargo ended: exit status 101 (its errors are above)"),
        "{stderr}"
    );
    assert!(stderr.contains("hint: fix the error above"), "{stderr}");
}

#[test]
fn gate_fit_on_a_crashing_profile_is_exit_3_not_a_batch_too_large() {
    let t = tempfile::tempdir().unwrap();
    let spec = rogue(t.path());
    let o = gate_in(t.path(), &spec, "profile-segv")
        .args(["fit", "rogue"])
        .output()
        .unwrap();
    let stderr = text(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("error: the profile of `rogue` at batch 32 failed in phase setup: the profile crashed: killed by SIGSEGV (11)"),
        "{stderr}"
    );
}

/// A token as the action's `gate check` step holds it.
const TOKEN: &str = "ghs_SENTINEL0123456789abcdefXYZ";

/// What each child gate starts sees of GitHub's credentials (#43 item 2):
/// `cargo metadata` and `cargo build` (through a `CARGO` wrapper that
/// records its environment), the crate's build script, the harness's
/// `__resolve` and its `profile` each record theirs; none holds a
/// credential's name or the token's value: the environment is an
/// allow-list (what a build and a model need, and what `GATE_PASS_ENV`
/// names), not a deny-list of patterns (#54 item 3).
#[test]
fn no_child_gate_starts_gets_a_github_credential() {
    let t = tempfile::tempdir().unwrap();
    let spec = rogue(t.path());
    let envs = t.path().join("env");
    std::fs::create_dir(&envs).unwrap();
    let real = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let wrapper = t.path().join("cargo-wrapper");
    crate::common::write_executable(
        &wrapper,
        &format!("#!/bin/sh\nenv > \"$ROGUE_ENV_OUT/cargo-$1.env\"\nexec '{real}' \"$@\"\n"),
    );
    // Every credential-shaped name GitHub, the cloud providers and the
    // registries use (#54 item 3: `…_KEY` names passed the deny-list).
    let credentials = [
        "GITHUB_TOKEN",
        "GH_TOKEN",
        "GITHUB_PAT",
        "GH_ENTERPRISE_TOKEN",
        "ACTIONS_RUNTIME_TOKEN",
        "ACTIONS_ID_TOKEN_REQUEST_TOKEN",
        "ACTIONS_ID_TOKEN_REQUEST_URL",
        "ACTIONS_SIGNING_KEY",
        "INPUT_TOKEN",
        "INPUT_API_KEY",
        "GITHUB_APP_PRIVATE_KEY",
        "GITHUB_APP_KEY",
        "GH_DEPLOY_KEY",
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AZURE_CLIENT_SECRET",
        "AZURE_CLIENT_CERTIFICATE_PASSWORD",
        "GOOGLE_APPLICATION_CREDENTIALS",
        "GOOGLE_GHA_CREDS_PATH",
        "CLOUDSDK_AUTH_ACCESS_TOKEN",
        "CARGO_REGISTRY_TOKEN",
        "CARGO_REGISTRIES_MINE_TOKEN",
        "CARGO_REGISTRIES_MINE_CREDENTIAL_PROVIDER",
        "NPM_TOKEN",
        "NODE_AUTH_TOKEN",
        "PYPI_API_TOKEN",
        "TWINE_PASSWORD",
        "HF_TOKEN",
        "HUGGING_FACE_HUB_TOKEN",
        "WANDB_API_KEY",
        "OPENAI_API_KEY",
        "DOCKER_PASSWORD",
        "SSH_AUTH_SOCK",
        "GPG_PRIVATE_KEY",
        "GATE_SIGNING_KEY",
        "CUDA_LICENSE_KEY",
        "SLACK_WEBHOOK_URL",
    ];
    let mut cmd = gate_in(t.path(), &spec, "profile-ok");
    for name in credentials {
        cmd.env(name, format!("{TOKEN}-{name}"));
    }
    // The token copied under a name of the user's own, and that name listed
    // to pass: its value still keeps it out. What a build needs passes.
    cmd.env("MY_DEPLOY_SETTING", format!("x-access-token:{TOKEN}-GITHUB_TOKEN"))
        .env("GATE_PASS_ENV", "ROGUE_*,MY_DEPLOY_SETTING,MY_MODEL_DIR")
        .env("MY_MODEL_DIR", "/models")
        .env("UNLISTED_SETTING", "not for children")
        .env("CARGO_TERM_COLOR", "never")
        .env("RUST_BACKTRACE", "1")
        .env("LC_ALL", "C.UTF-8")
        .env("CUDA_VISIBLE_DEVICES", "")
        // The settings of the framework of the SDK built into this gate (its
        // built-in models'): every child gets them. The harness names its
        // framework `ssh`: its own choice widens nothing (SSH_AUTH_SOCK
        // is among the credentials above).
        .env("CANDLE_GATE_TEST_SETTING", "on")
        .env("ROGUE_FRAMEWORK", "ssh")
        .env("SSH_GATE_TEST_SETTING", "a harness's own choice")
        .env("CARGO", &wrapper)
        .env("ROGUE_ENV_OUT", &envs);
    let o = cmd
        .args(["check", "--baseline", "none", "--out"])
        .arg(t.path().join("out"))
        .output()
        .unwrap();
    let stderr = text(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    for child in ["cargo-metadata", "cargo-build", "build", "__resolve", "profile"] {
        let seen = std::fs::read_to_string(envs.join(format!("{child}.env")))
            .unwrap_or_else(|e| panic!("{child} recorded no environment ({e}): {stderr}"));
        assert!(!seen.contains(&TOKEN[4..14]), "{child} saw the token:\n{seen}");
        for name in credentials.iter().chain(&["MY_DEPLOY_SETTING", "UNLISTED_SETTING"]) {
            assert!(
                !seen.starts_with(&format!("{name}=")) && !seen.contains(&format!("\n{name}=")),
                "{child} saw {name}:\n{seen}"
            );
        }
        for kept in [
            "MY_MODEL_DIR=/models",
            "CARGO_TERM_COLOR=never",
            "RUST_BACKTRACE=1",
            "LC_ALL=C.UTF-8",
            "CUDA_VISIBLE_DEVICES=",
            "ROGUE_ENV_OUT=",
            "PATH=",
            "HOME=",
        ] {
            assert!(seen.contains(kept), "{child} lacks {kept}:\n{seen}");
        }
        assert!(seen.contains("CANDLE_GATE_TEST_SETTING=on"), "{child}:\n{seen}");
        assert!(!seen.contains("SSH_GATE_TEST_SETTING="), "{child}:\n{seen}");
    }
}

/// What cargo and the harness print on stderr is gate's output too (#43
/// item 3): the token, printed by a build script (a cargo warning) and by
/// `__resolve`, shows as `***`.
#[test]
fn cargo_and_harness_stderr_are_redacted_as_gates_own() {
    let t = tempfile::tempdir().unwrap();
    let spec = rogue(t.path());
    let say = t.path().join("say");
    std::fs::write(&say, format!("the token is {TOKEN} here\n")).unwrap();
    for actions in [false, true] {
        let mut cmd = gate_in(t.path(), &spec, "profile-ok");
        if actions {
            cmd.env("GITHUB_ACTIONS", "true");
        }
        // A new ROGUE_BUILD_MARK runs the build script again: its warning is printed when it runs.
        let o = cmd
            .env("GITHUB_TOKEN", TOKEN)
            .env("ROGUE_SAY_FILE", &say)
            .env("ROGUE_BUILD_MARK", t.path().join(format!("built-{actions}")))
            .args(["check", "--baseline", "none", "--out"])
            .arg(t.path().join("out"))
            .output()
            .unwrap();
        let all = format!("{}{}", text(&o.stdout), text(&o.stderr));
        assert_eq!(o.status.code(), Some(0), "{all}");
        assert!(!all.contains(&TOKEN[4..14]), "the token shows:\n{all}");
        assert!(all.contains("the harness says: the token is *** here"), "{all}");
        assert!(all.contains("the token is *** here"), "{all}");
        assert_eq!(all.matches("the token is *** here").count(), 2, "{all}");
    }
}

/// A `profile` that exits 2 before any phase could not read its request:
/// infrastructure, exit 3, not the model failing (#43 item 8).
#[test]
fn a_profile_that_exits_2_before_any_phase_is_exit_3() {
    assert_infrastructure(
        "",
        &["error: infrastructure failure: rogue: the profile exited with status 2"],
        true,
    );
}

/// A harness that measures a figure no measurement can have broke the
/// protocol: exit 3, the figure named, and never shown as a figure in the
/// report (#43 item 10: -1e18 bytes passed, shown as 0).
#[test]
fn impossible_figures_from_a_harness_are_a_protocol_error() {
    for (mode, said) in [
        (
            "profile-negative",
            "`params` = -1e18 bytes: sizes are never negative and never past 2^64 bytes",
        ),
        (
            "profile-huge",
            "`training_peak` = 1e30 bytes: sizes are never negative and never past 2^64 bytes",
        ),
        (
            "profile-negative-time",
            "`step_time` = -5e0 ms: times are never negative",
        ),
    ] {
        let (t, o) = check(mode);
        let stderr = text(&o.stderr);
        assert_eq!(o.status.code(), Some(3), "{mode}: {stderr}");
        assert!(
            stderr.contains(&format!(
                "rogue: protocol error: `rogue-harness profile` measured {said}"
            )),
            "{mode}: {stderr}"
        );
        let report: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(t.path().join("out/report.json")).unwrap()).unwrap();
        let c = &report["components"]["rogue"];
        assert_eq!(c["error"]["kind"], "failed", "{mode}: {report}");
        let metrics = c["metrics"].as_object().unwrap();
        assert!(
            !metrics.contains_key("params") || mode != "profile-negative",
            "{report}"
        );
        assert!(!metrics.contains_key("training_peak"), "{mode}: {report}");
        assert!(!metrics.contains_key("step_time"), "{mode}: {report}");
        if mode == "profile-negative" {
            assert_eq!(report["results"][0]["measured"], serde_json::Value::Null, "{report}");
        }
    }
}

/// `--harness-bin` with a spec that names no harness would be ignored:
/// refused, exit 2, before anything runs (#43 item 12).
#[test]
fn harness_bin_without_a_harness_in_the_spec_is_refused() {
    let t = tempfile::tempdir().unwrap();
    let spec = t.path().join("budgets.yaml");
    std::fs::write(
        &spec,
        "version: 1\ndevice: { name: card, capacity: 4 GiB, reserve: 300 MiB }\ncomponents:\n  m:\n    workload: mlp\n    config: { input_dim: 4, hidden_dim: 4, output_dim: 1, depth: 1 }\n    budgets: { params: < 1 MiB }\n",
    )
    .unwrap();
    let bin = t.path().join("my-harness");
    std::fs::write(&bin, "").unwrap();
    for cmd in [&["check", "--baseline", "none"][..], &["validate"], &["fit", "m"]] {
        let o = gate()
            .current_dir(t.path())
            .args(cmd)
            .arg("--harness-bin")
            .arg(&bin)
            .output()
            .unwrap();
        let stderr = text(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{cmd:?}: {stderr}");
        assert!(
            stderr.contains(&format!(
                "error: --harness-bin {}: budgets.yaml has no `harness:`, so gate runs its own built-in workloads, and would not run it",
                bin.display()
            )),
            "{cmd:?}: {stderr}"
        );
        assert!(stderr.contains("hint: name the harness in the spec"), "{stderr}");
        assert!(!t.path().join("target/gate").exists(), "{cmd:?} ran: {stderr}");
    }
}

/// SIGTERM while `__resolve` runs is 130, every time: the signal thread
/// kills the harness, and the main thread, seeing it die, must not end the
/// process first as a crash (#43 item 9: exit 3 in 2–5 runs of 14).
#[test]
fn sigterm_during_resolve_is_130_every_time() {
    let t = tempfile::tempdir().unwrap();
    let spec = rogue(t.path());
    for round in 0..12 {
        // The last round's harness is SIGKILLed as gate exits and may still
        // be listed for a moment: seen as this round's, the signal would
        // reach this gate before it handles signals (and end it by default).
        let gone = Instant::now();
        while running(t.path(), "__resolve") {
            assert!(
                gone.elapsed() < Duration::from_secs(10),
                "the last round's harness outlived it"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        let child = gate_in(t.path(), &spec, "resolve-sleep")
            .args(["check", "--baseline", "none", "--out"])
            .arg(t.path().join("out"))
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let started = Instant::now();
        while !running(t.path(), "__resolve") {
            assert!(started.elapsed() < Duration::from_secs(120), "never resolved");
            std::thread::sleep(Duration::from_millis(5));
        }
        // SAFETY: kill(2) on our own child.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let o = child.wait_with_output().unwrap();
        let stderr = text(&o.stderr);
        assert_eq!(o.status.code(), Some(130), "round {round}: {stderr}");
        assert!(
            stderr.contains("gate: interrupted by SIGTERM: no output written"),
            "round {round}: {stderr}"
        );
        assert!(!stderr.contains("SIGKILL"), "round {round}: {stderr}");
    }
}

/// One config depth limit on both sides (#43 item 11): a harness's config
/// nested as deep as a spec may write is written to report.json, and
/// `gate merge` and `--baseline` read it back; one level deeper is a
/// protocol error (exit 3), never a report gate cannot read.
#[test]
fn a_config_as_deep_as_the_limit_is_read_back_and_a_deeper_one_is_refused() {
    let limit = 16;
    let t = tempfile::tempdir().unwrap();
    let spec = rogue(t.path());
    let out = t.path().join("out");
    let o = gate_in(t.path(), &spec, "profile-ok")
        .env("ROGUE_CONFIG_DEPTH", limit.to_string())
        .args(["check", "--baseline", "none", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let written = std::fs::read_to_string(out.join("report.json")).unwrap();
    let mut config = &serde_json::from_str::<serde_json::Value>(&written).unwrap()["components"]["rogue"]["config"];
    for _ in 0..limit {
        config = &config["a"];
    }
    assert_eq!(config, &serde_json::json!(1), "{written}");
    let merged = gate_in(t.path(), &spec, "profile-ok")
        .arg("merge")
        .arg(&out)
        .arg("--out")
        .arg(t.path().join("merged"))
        .output()
        .unwrap();
    assert_eq!(merged.status.code(), Some(0), "{}", text(&merged.stderr));
    let again = gate_in(t.path(), &spec, "profile-ok")
        .env("ROGUE_CONFIG_DEPTH", limit.to_string())
        .args(["check", "--out"])
        .arg(t.path().join("again"))
        .arg("--baseline")
        .arg(out.join("report.json"))
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(0), "{}", text(&again.stderr));
    assert!(
        !text(&again.stderr).contains("not a gate report"),
        "{}",
        text(&again.stderr)
    );

    let deeper = gate_in(t.path(), &spec, "profile-ok")
        .env("ROGUE_CONFIG_DEPTH", (limit + 1).to_string())
        .args(["check", "--baseline", "none", "--out"])
        .arg(t.path().join("deeper"))
        .output()
        .unwrap();
    let err = text(&deeper.stderr);
    assert_eq!(deeper.status.code(), Some(3), "{err}");
    assert!(
        err.contains("its config for `rogue` nests 17 levels, deeper than the 16 gate reads back from its reports"),
        "{err}"
    );
    assert!(err.contains("hint: "), "{err}");
    assert!(!t.path().join("deeper/report.json").exists());

    // A report deeper than gate writes (made by hand) is not gate's: said,
    // as a reader says it, not a parser's recursion error.
    let mut v: serde_json::Value = serde_json::from_str(&written).unwrap();
    let mut deep = serde_json::json!(1);
    for _ in 0..=limit {
        deep = serde_json::json!({ "a": deep });
    }
    v["components"]["rogue"]["config"] = deep;
    let hand = t.path().join("hand.json");
    std::fs::write(&hand, serde_json::to_string(&v).unwrap()).unwrap();
    let o = gate_in(t.path(), &spec, "profile-ok")
        .args(["check", "--out"])
        .arg(t.path().join("third"))
        .arg("--baseline")
        .arg(&hand)
        .output()
        .unwrap();
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("the config of `rogue` nests 17 levels, deeper than the 16 gate writes"),
        "{err}"
    );
}

/// A `cargo metadata` that waits on a held lock (#43 item 13): what cargo
/// says is passed on while it waits, and past GATE_CARGO_METADATA_TIMEOUT_S
/// it is stopped with its process group, exit 3, naming what it waited for.
#[test]
fn a_cargo_metadata_held_by_a_lock_is_said_and_bounded() {
    let t = tempfile::tempdir().unwrap();
    let spec = rogue(t.path());
    let real = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let wrapper = t.path().join("cargo-wrapper");
    let alive = t.path().join("sleeper.pid");
    crate::common::write_executable(
        &wrapper,
        &format!(
            "#!/bin/sh\nif [ \"$1\" = metadata ]; then\n  echo '    Blocking waiting for file lock on package cache' >&2\n  sleep 30 &\n  echo $! > '{}'\n  wait\n  exit 0\nfi\nexec '{real}' \"$@\"\n",
            alive.display()
        ),
    );
    let started = Instant::now();
    let o = gate_in(t.path(), &spec, "profile-ok")
        .env("CARGO", &wrapper)
        .env("GATE_CARGO_METADATA_TIMEOUT_S", "2")
        .args(["check", "--baseline", "none", "--out"])
        .arg(t.path().join("out"))
        .output()
        .unwrap();
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(started.elapsed() < Duration::from_secs(25), "{err}");
    assert!(err.contains("Blocking waiting for file lock on package cache"), "{err}");
    assert!(err.contains("did not finish in 2 s and was stopped"), "{err}");
    assert!(err.contains("hint: another cargo may hold the lock"), "{err}");
    // Its group went with it: the `sleep` it started is gone too.
    let sleeper = std::fs::read_to_string(&alive).unwrap();
    let gone = Instant::now();
    while Path::new(&format!("/proc/{}", sleeper.trim())).exists() && gone.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        !Path::new(&format!("/proc/{}", sleeper.trim())).exists(),
        "sleep {sleeper} outlived gate"
    );

    // The bound is read strictly.
    let o = gate_in(t.path(), &spec, "profile-ok")
        .env("CARGO", &wrapper)
        .env("GATE_CARGO_METADATA_TIMEOUT_S", "2s")
        .args(["check", "--baseline", "none", "--out"])
        .arg(t.path().join("out"))
        .output()
        .unwrap();
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("GATE_CARGO_METADATA_TIMEOUT_S=\"2s\" is not a whole number of seconds"),
        "{err}"
    );
}

/// The report's failure kind of the rogue component.
fn failure_kind(dir: &Path) -> String {
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("out/report.json")).unwrap()).unwrap();
    report["components"]["rogue"]["error"]["failure_kind"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// One `done` per profile (#54 item 5): a second one, which would replace
/// a failing figure with a passing one, is the protocol broken, exit 3.
#[test]
fn a_second_done_event_is_a_protocol_error() {
    let (t, o) = check("profile-two-done");
    let stderr = text(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("protocol error: `rogue-harness profile` wrote 2 `done` events; a profile writes one"),
        "{stderr}"
    );
    assert_eq!(failure_kind(t.path()), "process");
}

/// A failure's kind comes from how the profile ended, never from the words
/// it printed (#54 item 5): "out of memory" on stderr before a SIGSEGV is
/// still a crash (exit 3), and a panic-kind line the model printed early
/// does not outweigh the one the SDK's hook writes at the panic.
#[test]
fn a_failures_kind_comes_from_how_it_ended_not_from_words() {
    let (t, o) = check("profile-oom-segv");
    let stderr = text(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("killed by SIGSEGV"), "{stderr}");
    assert_eq!(failure_kind(t.path()), "process", "{stderr}");

    let (t, o) = check("profile-forged-kind");
    let stderr = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "the model's own panic: {stderr}");
    assert_eq!(failure_kind(t.path()), "model", "{stderr}");
    assert!(stderr.contains("index out of bounds at src/model.rs:3:1"), "{stderr}");
}

/// `--message-format json` in GitHub Actions (#54 item 2): stdout is JSON
/// lines and nothing else, each an event of the schema (the command guard
/// and the annotations go to stderr), and a failure's reason that quotes
/// the token shows `***` there as it does in the human output.
#[test]
fn json_events_in_actions_are_only_json_and_hide_the_token() {
    let t = tempfile::tempdir().unwrap();
    let spec = rogue(t.path());
    let say = t.path().join("say");
    std::fs::write(&say, format!("the model read {TOKEN} from somewhere\n")).unwrap();
    for command in ["check", "merge"] {
        let out = t.path().join(format!("out-{command}"));
        let mut cmd = gate_in(t.path(), &spec, "profile-fail-said");
        cmd.env("GITHUB_ACTIONS", "true")
            .env("GITHUB_TOKEN", TOKEN)
            .env("ROGUE_SAY_FILE", &say);
        if command == "check" {
            cmd.args(["check", "--baseline", "none", "--message-format", "json", "--out"])
                .arg(&out);
        } else {
            let shard = t.path().join("shard");
            let o = gate_in(t.path(), &spec, "profile-fail-said")
                .env("ROGUE_SAY_FILE", &say)
                .args(["check", "--baseline", "none", "--shard", "1/1", "--out"])
                .arg(&shard)
                .output()
                .unwrap();
            assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
            cmd.arg("merge")
                .arg(&shard)
                .args(["--message-format", "json", "--out"])
                .arg(&out);
        }
        let o = cmd.output().unwrap();
        let (stdout, stderr) = (text(&o.stdout), text(&o.stderr));
        assert_eq!(o.status.code(), Some(1), "{command}: {stderr}");
        let mut reasons = 0;
        for line in stdout.lines() {
            let event: serde_json::Value =
                serde_json::from_str(line).unwrap_or_else(|e| panic!("{command}: not a JSON line ({e}): {line}"));
            let p = crate::schema::conforms_to("events", &event);
            assert!(p.is_empty(), "{command}: {line}\n{}", p.join("\n"));
            if let Some(f) = event.pointer("/profile_finished/failure/reason") {
                assert_eq!(f, "the model read *** from somewhere", "{line}");
                reasons += 1;
            }
        }
        assert_eq!(reasons, usize::from(command == "check"), "{command}: {stdout}");
        assert!(
            !stdout.contains(&TOKEN[4..14]) && !stderr.contains(&TOKEN[4..14]),
            "{command}: the token shows"
        );
        // The guard and the annotations are there, on stderr.
        assert!(stderr.contains("::stop-commands::"), "{command}: {stderr}");
        assert!(stderr.contains("::error "), "{command}: {stderr}");
    }
}

/// A symbolic link planted at the build folder's harness lock is never
/// followed (#54 item 5): gate said so and built, and the file it points
/// to was not created.
#[test]
fn the_build_lock_never_follows_a_symbolic_link() {
    let t = tempfile::tempdir().unwrap();
    let spec = rogue(t.path());
    let target = t.path().join("target");
    std::fs::create_dir_all(&target).unwrap();
    let planted = t.path().join("planted-by-the-pr");
    std::os::unix::fs::symlink(&planted, target.join(".gate-harness-build.lock")).unwrap();
    let o = gate_in(t.path(), &spec, "profile-ok")
        .args(["check", "--baseline", "none", "--out"])
        .arg(t.path().join("out"))
        .output()
        .unwrap();
    let stderr = text(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    assert!(!planted.exists(), "gate created the file the link points to: {stderr}");
    assert!(
        stderr.contains(".gate-harness-build.lock is a symbolic link, not followed"),
        "{stderr}"
    );
}

/// The stock gate given as `--harness-bin` for a spec that names another
/// harness refuses it (#54 item 5): it knows it is `gate` of `gate-cli`,
/// and never measures its own models under that harness's name.
#[test]
fn the_stock_gate_as_another_harness_is_refused() {
    let t = tempfile::tempdir().unwrap();
    let spec = t.path().join("budgets.yaml");
    std::fs::write(
        &spec,
        "version: 1\nharness: { package: my-models, bin: my-harness }\ndevice: { name: card, capacity: 4 GiB, reserve: 300 MiB }\ncomponents:\n  m:\n    workload: mlp\n    config: { input_dim: 4, hidden_dim: 4, output_dim: 1, hidden_layers: 1 }\n    budgets: { params: < 1 MiB }\n",
    )
    .unwrap();
    let o = gate()
        .current_dir(t.path())
        .env("TMPDIR", t.path())
        .args(["check", "--baseline", "none", "--out"])
        .arg(t.path().join("out"))
        .arg("--harness-bin")
        .arg(common::gate_exe())
        .output()
        .unwrap();
    let stderr = text(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains(
            "this harness is `gate` of package `gate-cli`, and budgets.yaml names `my-harness` of `my-models`"
        ),
        "{stderr}"
    );
    assert!(!t.path().join("out/report.json").exists(), "{stderr}");
}

/// The stock gate starts itself again for each profile of its built-in
/// models; a file put at its path mid-run is never what runs (#54 item 5):
/// every profile is this gate's.
#[test]
fn a_gate_binary_replaced_mid_run_is_not_what_its_profiles_run() {
    use std::io::BufRead;
    let t = tempfile::tempdir().unwrap();
    let exe = t.path().join("gate");
    common::copy_executable(common::gate_exe(), &exe);
    let spec = t.path().join("budgets.yaml");
    let component = |name: &str| {
        format!("  {name}:\n    workload: mlp\n    batch_size: 4\n    config: {{ input_dim: 8, hidden_dim: 8, hidden_layers: 1, output_dim: 2 }}\n    budgets: {{ params: < 64 MiB }}\n")
    };
    std::fs::write(
        &spec,
        format!(
            "version: 1\ndevice: {{ name: card, capacity: 4 GiB, reserve: 300 MiB }}\ndefaults: {{ seed: 7, timing: {{ warmup: 0, steps: 1 }} }}\ncomponents:\n{}{}{}",
            component("a"),
            component("b"),
            component("c")
        ),
    )
    .unwrap();
    let marker = t.path().join("impostor-ran");
    let mut child = std::process::Command::new(&exe)
        .current_dir(t.path())
        .env_remove("GITHUB_ACTIONS")
        .args(["check", "--baseline", "none", "--jobs", "1", "--out"])
        .arg(t.path().join("out"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let mut seen = String::new();
    for line in lines.by_ref() {
        let line = line.unwrap();
        seen.push_str(&line);
        seen.push('\n');
        if line.contains("a: profile started") {
            // Replaced as an installer replaces a binary: a new file renamed over it.
            let impostor = t.path().join("impostor");
            crate::common::write_executable(&impostor, &format!("#!/bin/sh\ntouch '{}'\nexit 0\n", marker.display()));
            std::fs::rename(&impostor, &exe).unwrap();
            break;
        }
    }
    for line in lines {
        seen.push_str(&line.unwrap());
        seen.push('\n');
    }
    let status = child.wait().unwrap();
    assert!(seen.contains("a: profile started"), "{seen}");
    assert_eq!(status.code(), Some(0), "{seen}");
    assert!(!marker.exists(), "a profile ran the file now at gate's path:\n{seen}");
    assert!(seen.contains("c: profiled in"), "{seen}");
}

/// `gate init --harness` asks `cargo metadata` which candle the crate is
/// on: bounded like every child gate starts, and what cargo said on a
/// failure shown, not discarded (#54 item 5).
#[test]
fn init_bounds_cargo_metadata_and_shows_its_error() {
    for (case, body, code, said) in [
        (
            "held",
            "echo '    Blocking waiting for file lock on package cache' >&2\n  sleep 30\n  exit 0",
            3,
            "did not finish in 1 s and was stopped (cargo's last word: Blocking waiting for file lock on package cache)",
        ),
        (
            "failing",
            "echo 'error: failed to parse lock file at: Cargo.lock (a test said so)' >&2\n  exit 101",
            0,
            "note: `cargo metadata --locked --offline` could not resolve",
        ),
    ] {
        let t = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(t.path().join("src")).unwrap();
        std::fs::write(
            t.path().join("Cargo.toml"),
            "[package]\nname = \"ml\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\n\n[dependencies]\ncandle-core = \"0.9\"\n",
        )
        .unwrap();
        std::fs::write(t.path().join("src/main.rs"), "fn main() {}\n").unwrap();
        let wrapper = t.path().join("cargo-wrapper");
        crate::common::write_executable(&wrapper, &format!("#!/bin/sh\nif [ \"$1\" = metadata ]; then\n  {body}\nfi\nexec cargo \"$@\"\n"));
        let started = Instant::now();
        let o = gate()
            .current_dir(t.path())
            .env("CARGO", &wrapper)
            .env("GATE_CARGO_METADATA_TIMEOUT_S", "1")
            .args(["init", "--harness", "--no-workflows", "--gate-repo", "acme/gate"])
            .output()
            .unwrap();
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(code), "{case}: {err}");
        assert!(started.elapsed() < Duration::from_secs(20), "{case}: {err}");
        assert!(err.contains(said), "{case}: {err}");
        if case == "failing" {
            assert!(err.contains("failed to parse lock file at: Cargo.lock (a test said so)"), "{err}");
        }
    }
}
