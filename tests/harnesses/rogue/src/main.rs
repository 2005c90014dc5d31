//! A harness that goes wrong as `ROGUE_MODE` says (read when it runs):
//!
//! - `resolve-silent` / `resolve-garbage` / `resolve-no-configs`: `__resolve`
//!   exits 0 with nothing, with text that is not JSON, or with an answer
//!   that lacks the configs; `resolve-other`: an answer without the
//!   spec's component;
//! - `resolve-segv` / `resolve-abort`: `__resolve` dies of SIGSEGV / SIGABRT;
//! - `resolve-sleep`: `__resolve` sleeps 3 s, then writes `ROGUE_LATE`;
//! - `resolve-old` / `resolve-newer`: `__resolve` refuses the request as a
//!   harness of protocol 1 does (exit 2, nothing on stdout), or as one of
//!   protocol 3 would (its protocol on stdout, exit 3);
//! - `profile-silent` / `profile-garbage`: `profile` exits 0 without its
//!   `done` event, or with text that is not JSON;
//! - `profile-segv`: `profile` dies of SIGSEGV;
//! - `profile-sleep`: `profile` sleeps 3 s, then writes `ROGUE_LATE`;
//! - `profile-spawn`: `profile` starts itself as `profile-sleep`, then
//!   sleeps 10 s (a child of a profile, which gate never started).
//!
//! - `profile-negative`: `profile` measures `-1e18` bytes of `params`;
//!   `profile-huge`: a `training_peak` of 1e30 bytes (past 2^64);
//!   `profile-negative-time`: a `step_time` of -5 ms;
//! - `profile-ok`: `profile` measures 1 KiB of `params`.
//! - `profile-two-done`: `profile` writes a `done` with 1 TiB of `params`
//!   (over any budget), then a second with 1 KiB;
//! - `profile-oom-segv`: `profile` says "CUDA out of memory" on stderr,
//!   then dies of SIGSEGV;
//! - `profile-forged-kind`: `profile` prints the SDK's panic-kind line
//!   (`device`) early, then panics as the SDK's hook says a model's panic
//!   (its two lines, `model`), exit 101;
//! - `profile-fail-said`: `profile` writes a `done` whose failure's reason
//!   is the text of `ROGUE_SAY_FILE`.
//!
//! Otherwise `__resolve` answers for one component, `rogue`, and `profile`
//! exits 2 at once (as a harness that cannot read its request does).
//! `ROGUE_CONFIG_DEPTH=N`: `__resolve` answers a config nested N levels.
//! `ROGUE_FRAMEWORK=NAME`: `__resolve` names its framework `NAME`.
//! In every mode, `ROGUE_ENV_OUT` names a folder where each command
//! records its environment (`__resolve.env`, `profile.env`), and the text
//! of the file `ROGUE_SAY_FILE` is printed on stderr first.

use std::io::Write;

fn main() {
    let mode = std::env::var("ROGUE_MODE").unwrap_or_default();
    let command = std::env::args().nth(1).unwrap_or_default();
    let mode = match (command.as_str(), mode.split_once('-')) {
        ("__resolve", Some(("resolve", how))) | ("profile", Some(("profile", how))) => how.to_string(),
        _ => String::new(),
    };
    if let Some(dir) = std::env::var_os("ROGUE_ENV_OUT") {
        let env: String = std::env::vars_os()
            .map(|(k, v)| format!("{}={}\n", k.to_string_lossy(), v.to_string_lossy()))
            .collect();
        std::fs::write(std::path::Path::new(&dir).join(format!("{command}.env")), env).unwrap();
    }
    if let Some(say) = std::env::var_os("ROGUE_SAY_FILE") {
        eprintln!("the harness says: {}", std::fs::read_to_string(say).unwrap().trim());
    }
    let mut out = std::io::stdout().lock();
    let done = |values: &str| {
        format!(
            r#"{{"done":{{"device":{{"name":"cpu","backend":"cpu","total_bytes":null}},"values":{{{values}}},"param_elems":1,"frozen_elems":0,"analytic_params_bytes":4,"batch_bytes":0,"unpruned_gradient_bytes":0,"blocks":[],"step_times_ms":[],"context_reserve_bytes":null,"pool_reserved_peak_bytes":null,"emulated_block_bytes":null,"losses":[],"failure":null,"warmup_error":null}}}}"#
        )
    };
    match mode.as_str() {
        "negative" => {
            let _ = writeln!(out, "{}", done(r#""params":-1e18"#));
        }
        "huge" => {
            let _ = writeln!(out, "{}", done(r#""params":1024,"training_peak":1e30"#));
        }
        "negative-time" => {
            let _ = writeln!(out, "{}", done(r#""params":1024,"step_time":-5"#));
        }
        "ok" => {
            let _ = writeln!(out, "{}", done(r#""params":1024"#));
        }
        "two-done" => {
            let _ = writeln!(out, "{}", done(r#""params":1099511627776"#));
            let _ = writeln!(out, "{}", done(r#""params":1024"#));
        }
        "oom-segv" => {
            eprintln!("CUDA out of memory. Tried to allocate 2.00 GiB");
            unsafe { std::ptr::null_mut::<u8>().write_volatile(1) }
        }
        "forged-kind" => {
            eprintln!("gate: the panic's kind: device");
            eprintln!("epoch 1 of the model's own logging");
            eprintln!("gate: the profile panicked: index out of bounds at src/model.rs:3:1");
            eprintln!("gate: the panic's kind: model");
            std::process::exit(101);
        }
        "fail-said" => {
            let said = std::fs::read_to_string(std::env::var_os("ROGUE_SAY_FILE").unwrap()).unwrap();
            let m = done(r#""params":1024"#).replace(
                r#""failure":null"#,
                &format!(
                    r#""failure":{{"phase":"forward","reason":{},"kind":"model"}}"#,
                    json_quote(said.trim())
                ),
            );
            let _ = writeln!(out, "{m}");
        }
        "silent" => {}
        "garbage" => {
            let _ = writeln!(out, "hello from the harness, not JSON");
        }
        "other" => {
            let _ = writeln!(
                out,
                r#"{{"protocol":3,"configs":{{"other":{{}}}},"candle_version":"0.0.0"}}"#
            );
        }
        "no-configs" => {
            let _ = writeln!(out, r#"{{"protocol":3,"candle_version":"0.0.0"}}"#);
        }
        "old" => {
            eprintln!("error: `__resolve` takes `--budgets SPEC`");
            std::process::exit(2);
        }
        "newer" => {
            let _ = writeln!(out, r#"{{"protocol":4}}"#);
            eprintln!("error: the installed gate speaks gate's harness protocol 3, and this harness speaks 4");
            std::process::exit(3);
        }
        "segv" => unsafe { std::ptr::null_mut::<u8>().write_volatile(1) },
        "abort" => std::process::abort(),
        "spawn" => {
            std::process::Command::new(std::env::current_exe().unwrap())
                .arg("profile")
                .env("ROGUE_MODE", "profile-sleep")
                .spawn()
                .unwrap();
            std::thread::sleep(std::time::Duration::from_secs(10));
        }
        "sleep" => {
            std::thread::sleep(std::time::Duration::from_secs(3));
            if let Some(late) = std::env::var_os("ROGUE_LATE") {
                std::fs::write(late, "written by the harness after gate stopped\n").unwrap();
            }
        }
        _ if command == "__resolve" => {
            let depth: usize = std::env::var("ROGUE_CONFIG_DEPTH")
                .ok()
                .and_then(|d| d.parse().ok())
                .unwrap_or(1);
            let config = format!("{}1{}", r#"{"a":"#.repeat(depth), "}".repeat(depth));
            // A framework of its own choosing, else the first framework's
            // legacy answer (its version alone).
            let framework = match std::env::var("ROGUE_FRAMEWORK") {
                Ok(name) => format!(r#""framework":{{"name":{},"version":"1"}}"#, json_quote(&name)),
                Err(_) => r#""candle_version":"0.0.0""#.to_string(),
            };
            let _ = writeln!(out, r#"{{"protocol":3,"configs":{{"rogue":{config}}},{framework}}}"#);
        }
        _ => std::process::exit(2),
    }
}

/// `text` as a JSON string (this crate has no dependency).
fn json_quote(text: &str) -> String {
    let mut out = String::from('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}
