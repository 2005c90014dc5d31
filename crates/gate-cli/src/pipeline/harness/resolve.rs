//! Asking a harness to resolve the spec (`__resolve`): its answer read
//! and checked (the protocol it speaks, a config for every component, the
//! framework, configs no deeper than gate reads back) before anything runs.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;

use gate_contract::plan::Lever;
use gate_contract::protocol::FrameworkId;
use gate_runner::child::{spawn_helper, status_words};
use gate_runner::exit::Exit;
use gate_spec::budget::Spec;
use gate_spec::hint::Problem;

use super::cargo::relay_and_keep;
use crate::errors::CliError;

/// The configs of a spec's workloads by component, as a harness resolved them.
type Configs = BTreeMap<String, serde_json::Value>;

/// The most a harness's `__resolve` answer may hold (its configs as JSON).
const ANSWER_LIMIT: u64 = 16 << 20;

/// `HARNESS __resolve --request FILE` (see `crate::child`): the configs of
/// the spec's workloads and the harness's framework. The harness prints the
/// spec's errors itself (exit 2). Every other way it can end without its
/// answer (a signal, another status, nothing or not JSON on stdout, an
/// answer without a component's config) is an infrastructure failure that
/// names the harness and what was missing; an answer of another protocol,
/// or none with exit 2 (a harness of protocol 1 does not take
/// `--request`), names both protocols.
pub(super) fn resolve(exe: &Path, spec: &Spec, who: &str, bin: &str, request: &Path) -> Result<Resolved, CliError> {
    let fail = |what: String| no_answer(spec, who, bin, what);
    let (status, stdout) = ask(exe, who, request)?;
    let status = status.map_err(|e| fail(format!("cannot wait for it: {e}")))?;
    if stdout.len() as u64 > ANSWER_LIMIT {
        return Err(fail(format!("it wrote more than {} MiB on stdout", ANSWER_LIMIT >> 20)));
    }
    let text = String::from_utf8_lossy(&stdout);
    let answer = accepted(&status, &text, who, &fail)?;
    let Some(configs) = answer["configs"].as_object() else {
        return Err(fail("its answer has no `configs`".into()));
    };
    let missing: Vec<String> = spec
        .components
        .iter()
        .filter(|c| !configs.contains_key(&c.name))
        .map(|c| format!("`{}`", c.name))
        .collect();
    if !missing.is_empty() {
        return Err(fail(format!(
            "its answer has no config for component{} {}",
            if missing.len() == 1 { "" } else { "s" },
            missing.join(", ")
        )));
    }
    let framework = framework_of(&answer).ok_or_else(|| fail("its answer has no `framework`".into()))?;
    // A config deeper than a spec may write goes into the report all the
    // same, which gate could then not read back (issue #43 item 11).
    let limit = gate_spec::config::MAX_CONFIG_DEPTH;
    if let Some((name, depth)) = configs
        .iter()
        .map(|(k, v)| (k, gate_spec::config::json_depth(v)))
        .find(|(_, d)| *d > limit)
    {
        return Err(fail(format!(
            "its config for `{name}` nests {depth} levels, deeper than the {limit} gate reads back from its reports"
        )));
    }
    let configs = configs.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    Ok(Resolved {
        configs,
        framework,
        levers: levers_of(&answer["levers"]),
    })
}

/// The failure of a harness that gave no usable answer, and what a harness is.
fn no_answer(spec: &Spec, who: &str, bin: &str, what: String) -> CliError {
    CliError::Infrastructure(
        Problem::new(format!("{who} gave no answer for {}: {what}", spec.path.display())).with_hint(format!(
            "a harness is built with gate's SDK (`gate::main!` in `{}`) and answers `__resolve --request FILE` \
             with one JSON line",
            bin
        )),
    )
}

/// The failure of a harness that speaks another protocol than this gate.
fn mismatch(who: &str, theirs: String) -> CliError {
    CliError::Infrastructure(
        Problem::new(format!(
            "{who} speaks gate's harness protocol {theirs}, and this gate speaks {}",
            gate_contract::protocol::PROTOCOL
        ))
        .with_hint(gate_contract::protocol::PROTOCOL_HINT),
    )
}

/// Runs `__resolve`, relaying what it says on stderr: how it ended and
/// its stdout (at most one byte past [`ANSWER_LIMIT`]).
fn ask(
    exe: &Path,
    who: &str,
    request: &Path,
) -> Result<(std::io::Result<std::process::ExitStatus>, Vec<u8>), CliError> {
    let mut cmd = gate_runner::child::command(exe);
    cmd.arg("__resolve")
        .arg("--request")
        .arg(request)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut helper = spawn_helper(&mut cmd)
        .map_err(|e| CliError::Infrastructure(Problem::new(format!("cannot start {who} ({}): {e}", exe.display()))))?;
    // Its own process group is not the terminal's foreground one: it
    // never writes to the terminal itself (a `stty tostop` terminal would
    // stop it); what it says, the spec's errors included, is passed on.
    let (echo, answer) = relay_and_keep(&mut helper, ANSWER_LIMIT + 1, true);
    // Waited for first: what it left running is killed with its group, so
    // both pipes close.
    let status = helper.wait();
    let stdout = answer.and_then(|t| t.join().ok()).unwrap_or_default();
    if let Some(echo) = echo {
        let _ = echo.join();
    }
    Ok((status, stdout))
}

/// The answer on `text` (its last line of JSON: a library may print
/// before it), once how `__resolve` ended and the protocol it speaks are
/// this gate's.
fn accepted(
    status: &std::process::ExitStatus,
    text: &str,
    who: &str,
    fail: &dyn Fn(String) -> CliError,
) -> Result<serde_json::Value, CliError> {
    let answer = text.lines().rev().find_map(|l| {
        serde_json::from_str::<serde_json::Value>(l)
            .ok()
            .filter(|v| v.is_object())
    });
    let protocol = answer.as_ref().map(|a| a["protocol"].as_u64());
    match (status.code(), protocol) {
        (Some(0 | 2 | 3), Some(Some(p))) if p != u64::from(gate_contract::protocol::PROTOCOL) => {
            return Err(mismatch(who, p.to_string()))
        }
        (Some(2), Some(Some(_))) => return Err(CliError::Reported(Exit::BadInput)),
        // Its usage error is above; a harness of this protocol answers with a line.
        (Some(2), _) => return Err(mismatch(who, "1 (it takes `--budgets`, not `--request`)".into())),
        (Some(0), _) => {}
        _ => return Err(fail(format!("`__resolve` ended: {}", status_words(status)))),
    }
    let Some(answer) = answer else {
        return Err(fail(match text.lines().find(|l| !l.trim().is_empty()) {
            None => "`__resolve` exited with status 0 and wrote nothing on stdout".into(),
            Some(first) => format!(
                "`__resolve` exited with status 0 and its stdout is not gate's JSON answer (it begins {:?})",
                first.chars().take(120).collect::<String>()
            ),
        }));
    };
    if protocol != Some(Some(gate_contract::protocol::PROTOCOL.into())) {
        return Err(mismatch(who, "(none)".into()));
    }
    Ok(answer)
}

/// The harness's framework. `framework` is newer than protocol 2's first
/// harnesses, which say only the first framework's version (the answer's
/// legacy field).
fn framework_of(answer: &serde_json::Value) -> Option<FrameworkId> {
    match serde_json::from_value::<FrameworkId>(answer["framework"].clone()) {
        Ok(f) if !f.name.is_empty() => Some(f),
        _ => serde_json::from_value::<gate_contract::protocol::LegacyAnswer>(answer.clone())
            .ok()?
            .legacy_version
            .map(|v| FrameworkId::first(&v)),
    }
}

/// What `__resolve` answered: each component's config and levers, and the framework.
pub(super) struct Resolved {
    pub(super) configs: Configs,
    pub(super) framework: FrameworkId,
    pub(super) levers: BTreeMap<String, Vec<Lever>>,
}

/// The levers of an answer, each read alone: one of a kind this gate does
/// not know (a newer harness's) is left out, never an error, as a harness
/// of before levers answers none.
fn levers_of(value: &serde_json::Value) -> BTreeMap<String, Vec<Lever>> {
    let Some(map) = value.as_object() else {
        return BTreeMap::new();
    };
    map.iter()
        .map(|(name, levers)| {
            let known = levers
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|l| serde_json::from_value::<Lever>(l.clone()).ok())
                .collect();
            (name.clone(), known)
        })
        .collect()
}
