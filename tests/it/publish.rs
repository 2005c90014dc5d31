//! crates.io, rehearsed (#41 item 14). The release workflow's `crates-io`
//! job publishes with scripts/publish.sh; here the very command of that step
//! publishes every crate to a registry on loopback that stands in for
//! crates.io: a sparse index (`config.json`, the index files) and the one
//! call of crates.io's web API that `cargo publish` makes, `PUT
//! /api/v1/crates/new` (cargo's "Registry Index" and "Web API" references).
//! It holds that the crates arrive in dependency order, each once, each
//! upload naming its version and its workspace dependencies with their
//! version requirements, each resolved against what was just published; that
//! a run stopped half-way is finished by the next one, which skips what is
//! there; and that a crate whose dependency is missing is refused with a
//! clear message before anything is uploaded.
//!
//! Why the registry stands in for crates.io as a whole (source replacement)
//! rather than being a second registry beside it: a workspace crate's
//! dependency on another (`path` and `version`, no `registry`) means
//! crates.io in the package cargo makes, whichever registry the package goes
//! to (a dependency without `registry` is from crates.io), so `cargo publish
//! --registry X -p gate-runner` still looks gate-probe up on crates.io: "no
//! matching package named `gate-probe` found, location searched: crates.io
//! index" (cargo 1.95). With `[source.crates-io] replace-with`, every
//! crates.io lookup comes here: the workspace's crates as they are uploaded,
//! and every other crate at the version Cargo.lock holds, its index entry
//! made from `cargo metadata` (the translation cargo's "Registry Index"
//! reference describes). Nothing goes to the network, so the rehearsal
//! takes seconds; what it does not exercise is crates.io itself (its own
//! checks, its index's delay) and the token exchange (docs/release.md).

use crate::common::{self, text};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use yaml_rust2::YamlLoader;

/// How cargo names crates.io in an upload to another registry, and in a lock file.
const CRATES_IO: &str = "https://github.com/rust-lang/crates.io-index";
/// The rehearsal's registry, as cargo's configuration names it.
const REGISTRY: &str = "gate-rehearsal";
const TOKEN: &str = "rehearsal-token-not-a-secret";

fn root() -> &'static Path {
    Path::new(env!("GATE_REPO_ROOT"))
}

/// Where cargo's sparse protocol finds a crate's index file.
fn index_path(name: &str) -> String {
    let n = name.to_lowercase();
    match n.len() {
        1 => format!("1/{n}"),
        2 => format!("2/{n}"),
        3 => format!("3/{}/{n}", &n[..1]),
        _ => format!("{}/{}/{n}", &n[..2], &n[2..4]),
    }
}

fn sha256(bytes: &[u8]) -> String {
    let mut child = Command::new("sha256sum")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("sha256sum runs");
    child.stdin.take().unwrap().write_all(bytes).unwrap();
    let o = child.wait_with_output().unwrap();
    text(&o.stdout).split_whitespace().next().unwrap().to_string()
}

struct Upload {
    meta: Value,
    krate: Vec<u8>,
}

#[derive(Default)]
struct State {
    /// Index entries by lower-case name: the crates.io crates the workspace
    /// uses, then each upload.
    index: BTreeMap<String, Vec<Value>>,
    uploads: Vec<Upload>,
    /// Crates whose index file answers 404 although their versions are held:
    /// crates.io's index behind its uploads.
    lagging: BTreeSet<String>,
    /// Crates whose next upload is refused (crates.io's rate limit on new
    /// crates, say), once each.
    refuse_once: BTreeSet<String>,
}

/// The registry on loopback: a thread accepting connections, one thread per
/// connection (cargo keeps several open), until dropped.
struct Registry {
    port: u16,
    state: Arc<Mutex<State>>,
    stop: Arc<AtomicBool>,
    accept: Option<std::thread::JoinHandle<()>>,
}

impl Registry {
    fn start(crates_io: BTreeMap<String, Vec<Value>>) -> Registry {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let state = Arc::new(Mutex::new(State {
            index: crates_io,
            ..State::default()
        }));
        let stop = Arc::new(AtomicBool::new(false));
        let (s, st) = (state.clone(), stop.clone());
        let accept = std::thread::spawn(move || {
            for conn in listener.incoming() {
                if st.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                let s = s.clone();
                std::thread::spawn(move || serve(conn, port, &s));
            }
        });
        Registry {
            port,
            state,
            stop,
            accept: Some(accept),
        }
    }

    fn index_url(&self) -> String {
        format!("sparse+http://127.0.0.1:{}/index/", self.port)
    }

    /// The uploads' names, in the order they arrived.
    fn uploaded(&self) -> Vec<String> {
        let s = self.state.lock().unwrap();
        s.uploads
            .iter()
            .map(|u| u.meta["name"].as_str().unwrap().to_string())
            .collect()
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
    }
}

/// HTTP/1.1 with keep-alive, as much of it as cargo's requests use.
fn serve(conn: TcpStream, port: u16, state: &Mutex<State>) {
    conn.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let _ = conn.set_nodelay(true);
    let mut out = conn.try_clone().unwrap();
    let mut reader = BufReader::new(conn);
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let mut parts = line.split_whitespace();
        let (method, path) = (
            parts.next().unwrap_or("").to_string(),
            parts.next().unwrap_or("").to_string(),
        );
        let (mut length, mut auth, mut expect) = (0usize, None, false);
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            let (k, v) = h.split_once(':').unwrap_or((h, ""));
            match k.to_ascii_lowercase().as_str() {
                "content-length" => length = v.trim().parse().unwrap_or(0),
                "authorization" => auth = Some(v.trim().to_string()),
                "expect" => expect = v.trim().eq_ignore_ascii_case("100-continue"),
                _ => {}
            }
        }
        if expect && out.write_all(b"HTTP/1.1 100 Continue\r\n\r\n").is_err() {
            return;
        }
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let (code, answer) = route(&method, &path, auth.as_deref(), &body, port, state);
        let reason = match code {
            200 => "OK",
            400 => "Bad Request",
            403 => "Forbidden",
            404 => "Not Found",
            _ => "Too Many Requests",
        };
        let head = format!(
            "HTTP/1.1 {code} {reason}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            answer.len()
        );
        // One write: a head and a body sent apart wait on the peer's delayed
        // ACK (Nagle), some 40 ms a request.
        let mut response = head.into_bytes();
        response.extend_from_slice(&answer);
        if out.write_all(&response).is_err() {
            return;
        }
    }
}

/// A web API error as cargo shows it: `{"errors": [{"detail": ...}]}`.
fn refusal(code: u16, detail: String) -> (u16, Vec<u8>) {
    (code, json!({"errors": [{"detail": detail}]}).to_string().into_bytes())
}

fn route(method: &str, path: &str, auth: Option<&str>, body: &[u8], port: u16, state: &Mutex<State>) -> (u16, Vec<u8>) {
    let mut s = state.lock().unwrap();
    match (method, path.strip_prefix("/index/")) {
        ("GET", Some("config.json")) => (
            200,
            json!({"dl": format!("http://127.0.0.1:{port}/dl"), "api": format!("http://127.0.0.1:{port}")})
                .to_string()
                .into_bytes(),
        ),
        ("GET", Some(file)) => {
            let name = file.rsplit('/').next().unwrap_or("");
            match s.index.get(name) {
                Some(lines) if index_path(name) == file && !s.lagging.contains(name) => {
                    let mut out = String::new();
                    for l in lines {
                        out.push_str(&l.to_string());
                        out.push('\n');
                    }
                    (200, out.into_bytes())
                }
                _ => (404, Vec::new()),
            }
        }
        ("PUT", None) if path == "/api/v1/crates/new" => {
            if auth != Some(TOKEN) {
                return refusal(403, "this token may not publish".into());
            }
            let (meta, krate) = unpack(body);
            let (name, vers) = (
                meta["name"].as_str().unwrap().to_string(),
                meta["vers"].as_str().unwrap().to_string(),
            );
            let key = name.to_lowercase();
            if s.refuse_once.remove(&name) {
                return refusal(
                    429,
                    format!("{name}: too many new crates in a short time (a failure the rehearsal injects)"),
                );
            }
            if s.index.get(&key).is_some_and(|l| l.iter().any(|e| e["vers"] == vers)) {
                // The wording crates.io's API has been quoted with; the script
                // also asks the index again, whatever the words.
                return refusal(400, format!("crate version `{vers}` is already uploaded"));
            }
            let mut deps = Vec::new();
            for d in meta["deps"].as_array().unwrap() {
                let dep = d["name"].as_str().unwrap();
                // crates.io takes dependencies from crates.io only; cargo
                // names crates.io's index in an upload to another registry.
                if !(d["registry"].is_null() || d["registry"] == CRATES_IO) {
                    return refusal(400, format!("`{dep}` comes from {}, not crates.io", d["registry"]));
                }
                if !s.index.contains_key(&dep.to_lowercase()) {
                    return refusal(400, format!("no crate named `{dep}` (a dependency of {name} {vers})"));
                }
                let renamed = !d["explicit_name_in_toml"].is_null();
                let mut e = json!({
                    "name": if renamed { d["explicit_name_in_toml"].clone() } else { d["name"].clone() },
                    "req": d["version_req"], "features": d["features"], "optional": d["optional"],
                    "default_features": d["default_features"], "target": d["target"], "kind": d["kind"],
                    // This registry is crates.io here: its own crates are `null`.
                    "registry": null,
                });
                if renamed {
                    e["package"] = d["name"].clone();
                }
                deps.push(e);
            }
            let entry = json!({
                "name": name, "vers": vers, "deps": deps, "cksum": sha256(&krate),
                "features": meta["features"], "yanked": false, "links": meta["links"],
                "rust_version": meta["rust_version"], "v": 2,
            });
            s.index.entry(key).or_default().push(entry);
            s.uploads.push(Upload { meta, krate });
            (
                200,
                json!({"warnings": {"invalid_categories": [], "invalid_badges": [], "other": []}})
                    .to_string()
                    .into_bytes(),
            )
        }
        _ => refusal(404, format!("{method} {path}: not served here")),
    }
}

/// The publish body: a little-endian u32 length and the JSON metadata, then
/// the same for the `.crate` file.
fn unpack(body: &[u8]) -> (Value, Vec<u8>) {
    let len = |at: usize| u32::from_le_bytes(body[at..at + 4].try_into().unwrap()) as usize;
    let json_len = len(0);
    let meta = serde_json::from_slice(&body[4..4 + json_len]).expect("the metadata is JSON");
    let at = 4 + json_len;
    (meta, body[at + 4..at + 4 + len(at)].to_vec())
}

/// The index entries of every crates.io crate in the workspace's lock file,
/// from `cargo metadata` (all features: a package's lock file covers them
/// all) and Cargo.lock's checksums. `cargo metadata` reads each package's
/// manifest, so a crate cargo has not downloaded yet needs crates.io once.
fn crates_io_entries() -> Result<BTreeMap<String, Vec<Value>>, String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let metadata = |offline: bool| {
        let mut cmd = Command::new(&cargo);
        cmd.args(["metadata", "--format-version", "1", "--all-features", "--locked"])
            .current_dir(root());
        if offline {
            cmd.arg("--offline");
        }
        cmd.output().expect("cargo runs")
    };
    let mut o = metadata(true);
    if !o.status.success() {
        o = metadata(false);
    }
    if !o.status.success() {
        let err = text(&o.stderr);
        let first = err.lines().find(|l| l.starts_with("error")).unwrap_or("failed");
        return Err(format!(
            "`cargo metadata --all-features` needs every locked crate (crates.io or cargo's cache): {first}"
        ));
    }
    let meta: Value = serde_json::from_slice(&o.stdout).unwrap();
    let lock: toml_edit::DocumentMut = std::fs::read_to_string(root().join("Cargo.lock"))
        .unwrap()
        .parse()
        .unwrap();
    let mut checksums = BTreeMap::new();
    for p in lock["package"].as_array_of_tables().unwrap() {
        if let Some(sum) = p.get("checksum").and_then(|c| c.as_str()) {
            checksums.insert(
                (
                    p["name"].as_str().unwrap().to_string(),
                    p["version"].as_str().unwrap().to_string(),
                ),
                sum.to_string(),
            );
        }
    }
    let mut index: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for p in meta["packages"].as_array().unwrap() {
        if p["source"].as_str() != Some(&format!("registry+{CRATES_IO}")) {
            continue;
        }
        let (name, version) = (p["name"].as_str().unwrap(), p["version"].as_str().unwrap());
        let deps: Vec<Value> = p["dependencies"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| {
                let mut e = json!({
                    "name": if d["rename"].is_null() { d["name"].clone() } else { d["rename"].clone() },
                    "req": d["req"], "features": d["features"], "optional": d["optional"],
                    "default_features": d["uses_default_features"], "target": d["target"],
                    "kind": if d["kind"].is_null() { json!("normal") } else { d["kind"].clone() },
                    // `null` is crates.io in `cargo metadata` and "this
                    // registry" in an index: the same registry here.
                    "registry": d["registry"],
                });
                if !d["rename"].is_null() {
                    e["package"] = d["name"].clone();
                }
                e
            })
            .collect();
        let cksum = checksums
            .get(&(name.to_string(), version.to_string()))
            .unwrap_or_else(|| panic!("Cargo.lock has no checksum for {name} {version}"));
        index.entry(name.to_lowercase()).or_default().push(json!({
            "name": name, "vers": version, "deps": deps, "cksum": cksum, "features": p["features"],
            "yanked": false, "links": p["links"], "rust_version": p["rust_version"], "v": 2,
        }));
    }
    Ok(index)
}

/// A CARGO_HOME of the rehearsal's own (cargo caches the registry's index
/// there): crates.io is the registry on loopback.
fn cargo_home(registry: &Registry) -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        format!(
            "[registries.{REGISTRY}]\nindex = \"{url}\"\n\n[source.crates-io]\nreplace-with = \"{REGISTRY}\"\n",
            url = registry.index_url()
        ),
    )
    .unwrap();
    home
}

/// The release workflow's publish step: the `run:` of the step that is
/// handed the crates.io token.
fn workflow_publish_command() -> String {
    let text = std::fs::read_to_string(root().join(".github/workflows/gate-release.yml")).unwrap();
    let doc = YamlLoader::load_from_str(&text).unwrap().remove(0);
    let steps = doc["jobs"]["crates-io"]["steps"]
        .as_vec()
        .expect("gate-release.yml has a `crates-io` job");
    let step = steps
        .iter()
        .find(|s| !s["env"]["CARGO_REGISTRY_TOKEN"].is_badvalue())
        .expect("a step is handed CARGO_REGISTRY_TOKEN");
    let run = step["run"].as_str().unwrap().trim().to_string();
    assert!(
        run.starts_with("scripts/publish.sh") && !run.contains('\n'),
        "the publish step is one call of scripts/publish.sh: {run}"
    );
    run
}

/// The workflow's command, here: to the rehearsal's registry, from a work
/// tree that may hold uncommitted changes. `extra` goes after it.
fn publish(registry: &Registry, home: &Path, target: &Path, extra: &str) -> Output {
    let workflow = workflow_publish_command();
    // The workflow publishes a tree it changed itself (the binstall key).
    let dirty = if workflow.contains("--allow-dirty") {
        ""
    } else {
        "--allow-dirty"
    };
    let command = format!("{workflow} --registry {REGISTRY} {dirty} {extra}");
    let var = REGISTRY.to_uppercase().replace('-', "_");
    let mut cmd = Command::new("bash");
    cmd.arg("-c").arg(&command);
    // No `.ci/run` lint wrapper (nothing is compiled), no token or proxy of
    // the caller's.
    for k in [
        "RUSTC_WORKSPACE_WRAPPER",
        "CLIPPY_ARGS",
        "CARGO_REGISTRY_TOKEN",
        "http_proxy",
        "HTTP_PROXY",
        "https_proxy",
        "HTTPS_PROXY",
        "all_proxy",
        "ALL_PROXY",
    ] {
        cmd.env_remove(k);
    }
    cmd.env("CARGO", std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .env("CARGO_HOME", home)
        .env("CARGO_TARGET_DIR", target)
        .env("CARGO_TERM_COLOR", "never")
        .env(format!("CARGO_REGISTRIES_{var}_INDEX"), registry.index_url())
        .env(format!("CARGO_REGISTRIES_{var}_TOKEN"), TOKEN)
        .current_dir(root())
        .output()
        .expect("bash runs")
}

/// The workspace's publishable crates: (name, version, the workspace crates
/// each names in its package with their requirement and kind).
type Member = (String, String, Vec<(String, String, String)>);

fn members() -> Vec<Member> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let o = Command::new(cargo)
        .args(["metadata", "--no-deps", "--format-version", "1", "--offline"])
        .current_dir(root())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let meta: Value = serde_json::from_slice(&o.stdout).unwrap();
    let packages = meta["packages"].as_array().unwrap();
    let names: BTreeSet<&str> = packages.iter().map(|p| p["name"].as_str().unwrap()).collect();
    packages
        .iter()
        .filter(|p| p["publish"].is_null())
        .map(|p| {
            let name = p["name"].as_str().unwrap();
            let deps = p["dependencies"]
                .as_array()
                .unwrap()
                .iter()
                // A path-only dev-dependency (`*`) is left out of the package.
                .filter(|d| names.contains(d["name"].as_str().unwrap()) && d["req"] != "*")
                .map(|d| {
                    (
                        d["name"].as_str().unwrap().to_string(),
                        d["req"].as_str().unwrap().to_string(),
                        d["kind"].as_str().unwrap_or("normal").to_string(),
                    )
                })
                .collect();
            (name.to_string(), p["version"].as_str().unwrap().to_string(), deps)
        })
        .collect()
}

/// A file of a `.crate` (a gzipped tar whose folder is NAME-VERSION).
fn file_in_crate(krate: &[u8], file: &str) -> Option<String> {
    let mut child = Command::new("tar")
        .args(["-xzOf", "-", file])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let bytes = krate.to_vec();
    let feed = std::thread::spawn(move || stdin.write_all(&bytes));
    let o = child.wait_with_output().unwrap();
    let _ = feed.join();
    o.status.success().then(|| text(&o.stdout))
}

#[test]
fn every_crate_is_published_once_in_dependency_order_and_a_rerun_finishes_a_stopped_release() {
    let crates_io = crates_io_entries();
    let why = crates_io.as_ref().err().cloned();
    if !common::available(
        "every_crate_is_published_once_in_dependency_order_and_a_rerun_finishes_a_stopped_release",
        why,
    ) {
        return;
    }
    let started = Instant::now();
    let registry = Registry::start(crates_io.unwrap());
    let home = cargo_home(&registry);
    let target = tempfile::tempdir().unwrap();
    let members = members();

    // A release that stops half-way: crates.io refuses gate-report (its rate
    // limit on new crates, say). What went before stays published.
    registry.state.lock().unwrap().refuse_once.insert("gate-report".into());
    let o = publish(&registry, home.path(), target.path(), "");
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert_eq!(o.status.code(), Some(1), "{out}\n{err}");
    let first = registry.uploaded();
    assert_eq!(
        first,
        ["gate-spec", "gate-probe", "gate-contract", "gate-render"],
        "{out}\n{err}"
    );
    assert!(
        out.contains("too many new crates in a short time (a failure the rehearsal injects)"),
        "{out}"
    );
    assert!(
        err.ends_with(
            "error: `cargo publish -p gate-report` failed (above); on registry `gate-rehearsal` now: \
             gate-spec gate-probe gate-contract gate-render\n\
             hint: fix the cause and run again: what is on the registry is skipped\n"
        ),
        "{err}"
    );

    // The same command again finishes it, skipping what is there.
    let o = publish(&registry, home.path(), target.path(), "");
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    for name in &first {
        assert!(
            out.contains(&format!(
                "{name} 0.1.0: already on registry `gate-rehearsal`, skipped\n"
            )),
            "{out}"
        );
    }
    assert!(
        out.ends_with(
            "published: gate-report gate-runner gate-burn gate-github gate-sdk gate-builtins gate-cli; \
             already there: gate-spec gate-probe gate-contract gate-render\n"
        ),
        "{out}"
    );

    // Every crate, once, in dependency order: the order docs/release.md and
    // CONTRIBUTING.md give, and `cargo package --workspace` packs in
    // (tests/it/packaging.rs).
    let order = registry.uploaded();
    assert_eq!(
        order,
        [
            "gate-spec",
            "gate-probe",
            "gate-contract",
            "gate-render",
            "gate-report",
            "gate-runner",
            "gate-burn",
            "gate-github",
            "gate-sdk",
            "gate-builtins",
            "gate-cli"
        ]
    );
    let names: BTreeSet<&str> = members.iter().map(|m| m.0.as_str()).collect();
    assert_eq!(order.iter().map(String::as_str).collect::<BTreeSet<_>>(), names);

    let s = registry.state.lock().unwrap();
    let cksum = |name: &str| sha256(&s.uploads.iter().find(|u| u.meta["name"] == name).unwrap().krate);
    for (name, version, deps) in &members {
        let at = order.iter().position(|n| n == name).unwrap();
        let upload = &s.uploads[at];
        assert_eq!(upload.meta["vers"].as_str(), Some(version.as_str()), "{name}");
        let sent = upload.meta["deps"].as_array().unwrap();
        // Every dependency is a crates.io one: the workspace's own as cargo
        // records crates.io in an upload to another registry.
        for d in sent {
            assert_eq!(d["registry"], CRATES_IO, "{name}: {d}");
        }
        // cargo packs a lock file into every package (each one here has one).
        let lock = file_in_crate(&upload.krate, &format!("{name}-{version}/Cargo.lock"))
            .unwrap_or_else(|| panic!("{name}'s package has no Cargo.lock"));
        for (dep, req, kind) in deps {
            assert!(
                order.iter().position(|n| n == dep).unwrap() < at,
                "{name} was uploaded before its dependency {dep}"
            );
            let ws_version = &members.iter().find(|m| &m.0 == dep).unwrap().1;
            assert_eq!(req, &format!("^{ws_version}"), "{name} asks for the workspace's {dep}");
            assert!(
                sent.iter().any(|d| d["name"] == dep.as_str()
                    && d["version_req"] == req.as_str()
                    && d["kind"] == kind.as_str()),
                "{name}'s upload names {dep} {req} ({kind}): {sent:?}"
            );
            // Resolved against what was just published: the package's lock
            // file holds that upload's checksum.
            let entry = format!(
                "name = \"{dep}\"\nversion = \"{ws_version}\"\nsource = \"registry+{CRATES_IO}\"\nchecksum = \"{}\"",
                cksum(dep)
            );
            assert!(lock.contains(&entry), "{name}'s Cargo.lock lacks\n{entry}\nin\n{lock}");
        }
        // gate-sdk's dev-dependency on itself (path only) is not in its package.
        assert!(!sent.iter().any(|d| d["name"] == name.as_str()), "{name}");
    }
    drop(s);

    // Once more: nothing to do.
    let o = publish(&registry, home.path(), target.path(), "");
    let out = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{out}\n{}", text(&o.stderr));
    assert!(out.ends_with("published: none; already there: gate-spec gate-probe gate-contract gate-render gate-report gate-runner gate-burn gate-github gate-sdk gate-builtins gate-cli\n"), "{out}");
    assert_eq!(registry.uploaded().len(), 11);

    // An index behind its uploads: the script and cargo both see no
    // gate-cli, crates.io refuses the upload as a duplicate, and that counts
    // as published.
    registry.state.lock().unwrap().lagging.insert("gate-cli".into());
    let o = publish(&registry, home.path(), target.path(), "gate-cli");
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    // cargo's words, which the script passes on to its output.
    assert!(out.contains("crate version `0.1.0` is already uploaded"), "{out}");
    assert!(
        out.ends_with(
            "gate-cli 0.1.0: already on registry `gate-rehearsal` (uploaded by an earlier attempt), skipped\n\
             published: none; already there: gate-cli\n"
        ),
        "{out}"
    );
    assert_eq!(registry.uploaded().len(), 11);
    eprintln!("the rehearsal took {:.1} s", started.elapsed().as_secs_f64());
}

/// A crate whose dependency the registry lacks is refused before cargo runs,
/// naming what is missing; nothing is uploaded.
#[test]
fn a_crate_whose_dependency_is_not_on_the_registry_is_refused_before_anything_is_uploaded() {
    let registry = Registry::start(BTreeMap::new());
    let home = cargo_home(&registry);
    let target = tempfile::tempdir().unwrap();
    let o = publish(&registry, home.path(), target.path(), "gate-runner");
    assert_eq!(o.status.code(), Some(1), "{}", common::output_text(&o));
    let err = text(&o.stderr);
    // Said while Cargo.toml's `repository` is the placeholder.
    let err = err
        .strip_prefix("note: `repository` is still the OWNER placeholder; allowed for registry `gate-rehearsal`, refused for crates.io\n")
        .unwrap_or(&err);
    assert_eq!(
        err,
        "error: gate-runner 0.1.0 depends on gate-contract 0.1.0, gate-probe 0.1.0, gate-spec 0.1.0, which registry `gate-rehearsal` does \
         not have and this run does not publish before it\n\
         hint: publish them first: scripts/publish.sh with no package names publishes every crate in dependency order\n"
    );
    assert!(registry.uploaded().is_empty());
}

/// crates.io keeps a version's metadata for good: while `repository` is the
/// placeholder, the script refuses crates.io before it reads or uploads
/// anything (here crates.io is also replaced by a folder that does not
/// exist, so a mistake could not reach it).
#[test]
fn crates_io_is_refused_while_the_repository_is_the_placeholder() {
    let t = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(t.path().join("src")).unwrap();
    std::fs::write(
        t.path().join("Cargo.toml"),
        "[package]\nname = \"rehearsal-a\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\
         description = \"x\"\nlicense = \"MIT\"\nrepository = \"https://github.com/OWNER/gate\"\n\n[workspace]\n",
    )
    .unwrap();
    std::fs::write(t.path().join("src/lib.rs"), "").unwrap();
    let home = t.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(
        home.join("config.toml"),
        "[source.crates-io]\nreplace-with = \"nowhere\"\n[source.nowhere]\ndirectory = \"/nonexistent\"\n",
    )
    .unwrap();
    let o = Command::new(root().join("scripts/publish.sh"))
        .arg("--no-verify")
        .env("CARGO_HOME", &home)
        .env("CARGO", std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .env_remove("CARGO_REGISTRY_TOKEN")
        .current_dir(t.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", common::output_text(&o));
    assert_eq!(
        text(&o.stderr),
        "error: the `repository` of rehearsal-a is still the placeholder https://github.com/OWNER/gate, which \
         crates.io would show for every version published now\n\
         hint: set `repository` in Cargo.toml ([package] and [workspace.package]) to the real repository and tag again\n"
    );
    assert!(text(&o.stdout).is_empty(), "{}", text(&o.stdout));
}
