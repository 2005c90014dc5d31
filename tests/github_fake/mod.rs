//! A small fake of the GitHub REST API, started by a test on 127.0.0.1: the
//! issue comments, issue events and labels, collaborator permissions, pulls, compare, commits, contents and git-data endpoints
//! `gate` uses, with scripted faults (status codes, delays). Bounded: it
//! answers at most `MAX_REQUESTS` requests and only on loopback.
//!
//! Why not `wiremock`: it matches a request to a canned response, while the
//! tests need GitHub's behaviour across requests: a comment created by one
//! call is listed, paged and edited by the next; a file put on the store
//! branch gets a blob sha that a later put must quote (409/422 when it does
//! not); commits walk back through their parents; label events accrue. In
//! wiremock that state would live in custom `Respond` impls, i.e. this same
//! code behind an async runtime the tests otherwise do without. Faults
//! (status, `retry-after` and rate-limit headers, delays, a proxy echoing
//! the request's headers) are scripted per path and count, which
//! wiremock's `up_to_n_times` also offers.

#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::Output;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine;
use serde_json::{json, Value};

pub(crate) const TOKEN: &str = "ghs_FAKEtoken_4f2a9c_DO_NOT_LEAK";
pub(crate) const REPO: &str = "octo/repo";
/// The repository's numeric id, which GitHub's `Link` URLs use.
pub(crate) const REPO_ID: u64 = 4242;
const MAX_REQUESTS: usize = 3000;

/// Every form of `secret` that counts as a leak: any 10 characters in a row
/// (as is, and as Markdown escapes `_`), its base64 alone and in the
/// basic-auth forms git sends, and its percent-encoding.
pub(crate) fn leak_forms(secret: &str) -> Vec<String> {
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let windows = |s: &str| -> Vec<String> {
        let chars: Vec<char> = s.chars().collect();
        chars.windows(10).map(|w| w.iter().collect()).collect()
    };
    let mut forms = windows(secret);
    forms.extend(windows(&secret.replace('_', "\\_")));
    forms.push(b64(secret));
    forms.push(b64(&format!("x-access-token:{secret}")));
    forms.push(b64(&format!(":{secret}")));
    let pct: String = secret.bytes().map(|b| format!("%{b:02X}")).collect();
    forms.push(pct.to_lowercase());
    forms.push(pct);
    forms
}

/// The first form of [`TOKEN`] found in `text`.
pub(crate) fn find_token(text: &str) -> Option<String> {
    leak_forms(TOKEN).into_iter().find(|f| text.contains(f.as_str()))
}

/// Fails the test when [`TOKEN`] shows in any form in the command's output
/// or in any file under `dir`.
pub(crate) fn assert_no_token(o: &Output, dir: &Path) {
    let out = format!(
        "{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    if let Some(f) = find_token(&out) {
        panic!("the token leaked ({f:?}) to the output:\n{out}");
    }
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                todo.push(p);
            } else if let Some(f) = find_token(&String::from_utf8_lossy(&std::fs::read(&p).unwrap_or_default())) {
                panic!("the token leaked ({f:?}) into {}", p.display());
            }
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Req {
    pub method: String,
    pub path: String,
    pub auth: Option<String>,
    pub body: String,
}

#[derive(Debug, Clone)]
pub(crate) enum FaultKind {
    Status(u16, String),
    Delay(Duration),
    /// A status with extra response headers (`retry-after`, `x-ratelimit-*`).
    StatusWithHeaders(u16, String, Vec<(String, String)>),
    /// A server (or proxy) that echoes the request's headers back, the
    /// Authorization header included, in the body and a response header.
    Echo(u16, Echo),
}

/// How [`FaultKind::Echo`] shapes its body.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Echo {
    /// `{"message": "... <authorization> ...", "request_headers": "..."}`.
    Json,
    /// Not JSON: an HTML page whose 200th character falls inside the token,
    /// so a message cut to 200 characters holds only part of it.
    Html,
    /// JSON of the wrong shape, the token where a number belongs
    /// (`[{"id": "<authorization>"}]`), so decoding fails on the value.
    WrongType,
}

#[derive(Debug, Clone)]
pub(crate) struct Fault {
    pub method: String,
    pub path_contains: String,
    /// How many matching requests it applies to (`usize::MAX`: all).
    pub times: usize,
    pub kind: FaultKind,
}

#[derive(Debug, Clone)]
pub(crate) struct Comment {
    pub id: u64,
    pub body: String,
    pub login: String,
}

#[derive(Default)]
pub(crate) struct State {
    pub comments: BTreeMap<u64, Vec<Comment>>,
    pub next_id: u64,
    /// path → (text, blob sha) on the store branch.
    pub files: BTreeMap<String, (String, String)>,
    pub branch_exists: bool,
    /// sha → parents.
    pub commits: HashMap<String, Vec<String>>,
    /// pr → head sha.
    pub pulls: HashMap<u64, String>,
    /// pr → its head (repository, branch), where not `fork/repo`, `feature`.
    pub pull_heads: HashMap<u64, (String, String)>,
    pub merge_base: Option<String>,
    /// pr → its issue events, oldest first (as GitHub lists them).
    pub events: HashMap<u64, Vec<Value>>,
    /// pr → its labels now, where they are not what its events leave on.
    pub labels_now: HashMap<u64, Vec<String>>,
    /// login → permission (`admin`, `write`, `read`, `none`); a login not
    /// listed answers 404, as GitHub does for no such user.
    pub permissions: HashMap<String, String>,
    pub faults: Vec<Fault>,
    pub log: Vec<Req>,
    /// The host the comments' `Link` URLs name (default: the one asked).
    pub link_host: Option<String>,
    /// A hostile `Link` for the comments: page N's `next` is this of N
    /// (`|_| 1`: a loop; `|n| n + 1`: endless), whatever the comments.
    pub link_next: Option<fn(usize) -> usize>,
    /// The `html_url` every comment answer carries (default: GitHub's form);
    /// when set, answers are logged as scripted (`fault`), checked as requests only.
    pub html_url: Option<String>,
    /// Every exchange, for scripts/github-openapi/check.mjs: method, path
    /// with query, request body, status, answer body, and `fault` where the
    /// answer was scripted by the test rather than modelled on GitHub.
    pub exchanges: Vec<Value>,
    /// Where each exchange is also appended as a JSON line: the file named
    /// by `GATE_FAKE_GITHUB_LOG` when the fake starts, so that a whole test
    /// run can be checked (`.ci/run` does).
    pub exchange_log: Option<std::path::PathBuf>,
    blob_counter: u64,
    /// The login the token writes as (default: `github-actions[bot]`); see [`Fake::as_app`].
    pub token_login: Option<String>,
    /// Check runs created, each as its create request's body, with the
    /// annotations of later updates appended (see [`check_runs_route`]).
    pub check_runs: Vec<Value>,
    /// The store's tree listing says `truncated`, as GitHub's does past
    /// 100,000 entries or 7 MB.
    pub tree_truncated: bool,
}

#[derive(Clone)]
pub(crate) struct Fake {
    pub url: String,
    pub state: Arc<Mutex<State>>,
}

impl Fake {
    pub(crate) fn start() -> Fake {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        let addr = listener.local_addr().unwrap();
        assert!(addr.ip().is_loopback());
        let permissions = [("octocat", "admin"), ("hubot", "write"), ("someone", "read")]
            .into_iter()
            .map(|(l, p)| (l.to_string(), p.to_string()))
            .collect();
        let state = Arc::new(Mutex::new(State {
            next_id: 1000,
            permissions,
            exchange_log: std::env::var_os("GATE_FAKE_GITHUB_LOG").map(Into::into),
            ..Default::default()
        }));
        let st = state.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().take(MAX_REQUESTS) {
                let Ok(stream) = stream else { continue };
                let st = st.clone();
                std::thread::spawn(move || {
                    let _ = handle(stream, &st);
                });
            }
        });
        Fake {
            url: format!("http://{addr}"),
            state,
        }
    }

    pub(crate) fn fault(&self, method: &str, path_contains: &str, times: usize, kind: FaultKind) {
        self.state.lock().unwrap().faults.push(Fault {
            method: method.into(),
            path_contains: path_contains.into(),
            times,
            kind,
        });
    }

    /// Every exchange so far, one JSON line each, as check.mjs reads them.
    pub(crate) fn exchanges_jsonl(&self) -> String {
        let s = self.state.lock().unwrap();
        s.exchanges.iter().map(|x| format!("{x}\n")).collect()
    }

    pub(crate) fn log(&self) -> Vec<Req> {
        self.state.lock().unwrap().log.clone()
    }

    pub(crate) fn count(&self, method: &str, path_contains: &str) -> usize {
        self.log()
            .iter()
            .filter(|r| r.method == method && r.path.contains(path_contains))
            .count()
    }

    pub(crate) fn comments(&self, pr: u64) -> Vec<Comment> {
        self.state
            .lock()
            .unwrap()
            .comments
            .get(&pr)
            .cloned()
            .unwrap_or_default()
    }

    pub(crate) fn add_comment(&self, pr: u64, body: &str, login: &str) -> u64 {
        let mut s = self.state.lock().unwrap();
        s.next_id += 1;
        let id = s.next_id;
        s.comments.entry(pr).or_default().push(Comment {
            id,
            body: body.into(),
            login: login.into(),
        });
        id
    }

    /// An issue event on `pr`: `labeled`/`unlabeled` with a label name, or
    /// any other event (`label` empty), by `actor` at `at`.
    pub(crate) fn add_event(&self, pr: u64, event: &str, label: &str, actor: &str, at: &str) {
        let mut s = self.state.lock().unwrap();
        let list = s.events.entry(pr).or_default();
        let id = list.len() as u64 + 1;
        // GitHub's actors carry a type; an app's login ends in `[bot]`.
        let kind = if actor.ends_with("[bot]") { "Bot" } else { "User" };
        let mut e = answer("labeled-issue-event");
        e["id"] = json!(id);
        e["event"] = json!(event);
        e["actor"] = user(actor, kind);
        e["created_at"] = json!(at);
        e["url"] = json!(format!("https://api.github.com/repos/{REPO}/issues/events/{id}"));
        if label.is_empty() {
            e.as_object_mut().unwrap().remove("label");
        } else {
            e["label"] = json!({ "name": label, "color": "ededed" });
        }
        list.push(e);
    }

    /// Sets `login`'s permission on the repository.
    pub(crate) fn permit(&self, login: &str, permission: &str) {
        let mut s = self.state.lock().unwrap();
        s.permissions.insert(login.into(), permission.into());
    }

    /// A first-parent chain: `shas[0]` is the newest.
    pub(crate) fn add_chain(&self, shas: &[String]) {
        let mut s = self.state.lock().unwrap();
        for w in shas.windows(2) {
            s.commits.insert(w[0].clone(), vec![w[1].clone()]);
        }
        if let Some(last) = shas.last() {
            s.commits.entry(last.clone()).or_default();
        }
    }

    pub(crate) fn store_file(&self, path: &str, text: &str) {
        let mut s = self.state.lock().unwrap();
        s.branch_exists = true;
        s.blob_counter += 1;
        let blob = format!("blob{}", s.blob_counter);
        s.files.insert(path.into(), (text.into(), blob));
    }

    pub(crate) fn file(&self, path: &str) -> Option<String> {
        self.state.lock().unwrap().files.get(path).map(|f| f.0.clone())
    }
}

fn respond_with(mut stream: TcpStream, status: u16, body: &str, headers: &[(String, String)]) -> std::io::Result<()> {
    let extra: String = headers.iter().map(|(k, v)| format!("{k}: {v}\r\n")).collect();
    let text = format!(
        "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\n{extra}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    std::io::Write::write_all(&mut stream, text.as_bytes())
}

fn respond(mut stream: TcpStream, status: u16, body: &str) -> std::io::Result<()> {
    let text = format!(
        "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(text.as_bytes())?;
    stream.flush()
}

fn handle(stream: TcpStream, state: &Arc<Mutex<State>>) -> std::io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or_default().to_string();
    let target = parts.next().unwrap_or_default().to_string();
    let mut len = 0usize;
    let mut auth = None;
    let mut host = String::new();
    let mut headers = String::new();
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h)? == 0 || h == "\r\n" {
            break;
        }
        headers.push_str(&h);
        let (k, v) = h.split_once(':').unwrap_or((&h, ""));
        match k.trim().to_ascii_lowercase().as_str() {
            "content-length" => len = v.trim().parse().unwrap_or(0),
            "authorization" => auth = Some(v.trim().to_string()),
            "host" => host = v.trim().to_string(),
            _ => {}
        }
    }
    let mut body = vec![0u8; len];
    reader.read_exact(&mut body)?;
    let body = String::from_utf8_lossy(&body).into_owned();
    // Absolute-form targets are reduced to the path.
    let path = match target.find("://") {
        Some(i) => target[i + 3..]
            .find('/')
            .map_or("/".to_string(), |j| target[i + 3 + j..].to_string()),
        None => target.clone(),
    };
    let fault = {
        let mut s = state.lock().unwrap();
        s.log.push(Req {
            method: method.clone(),
            path: path.clone(),
            auth: auth.clone(),
            body: body.clone(),
        });
        let f = s
            .faults
            .iter_mut()
            .find(|f| f.method == method && path.contains(&f.path_contains) && f.times > 0);
        f.map(|f| {
            if f.times != usize::MAX {
                f.times -= 1;
            }
            f.kind.clone()
        })
    };
    let keep = |status: u16, answer: &str, fault: bool| record(state, &method, &path, &body, status, answer, fault);
    match fault {
        Some(FaultKind::Status(code, msg)) => {
            let answer = json!({ "message": msg }).to_string();
            keep(code, &answer, true);
            return respond(stream, code, &answer);
        }
        Some(FaultKind::Delay(d)) => std::thread::sleep(d),
        Some(FaultKind::StatusWithHeaders(code, msg, headers)) => {
            let answer = json!({ "message": msg }).to_string();
            keep(code, &answer, true);
            return respond_with(stream, code, &answer, &headers);
        }
        Some(FaultKind::Echo(code, shape)) => {
            let auth = auth.unwrap_or_default();
            let body = match shape {
                Echo::Json => json!({
                    "message": format!("Bad credentials: Authorization: {auth}"),
                    "request_headers": headers,
                })
                .to_string(),
                Echo::Html => {
                    let lead = "Authorization: Bearer ";
                    format!(
                        "{}{lead}{}\n{headers}",
                        "x".repeat(190 - lead.len()),
                        auth.trim_start_matches("Bearer ")
                    )
                }
                Echo::WrongType => json!([{ "id": auth, "body": auth, "user": { "login": auth } }]).to_string(),
            };
            let echoed = vec![("x-echo-authorization".to_string(), auth.clone())];
            keep(code, &body, true);
            return respond_with(stream, code, &body, &echoed);
        }
        None => {}
    }
    if auth.as_deref() != Some(&format!("Bearer {TOKEN}")) {
        let answer =
            r#"{"message":"Bad credentials","documentation_url":"https://docs.github.com/rest","status":"401"}"#;
        keep(401, answer, false);
        return respond(stream, 401, answer);
    }
    let (status, out) = route(&method, &path, &body, state);
    keep(status, &out.to_string(), false);
    let links = if status == 200 {
        comment_links(&path, &host, state)
    } else {
        None
    };
    match links {
        Some(link) => respond_with(stream, status, &out.to_string(), &[("Link".into(), link)]),
        None => respond(stream, status, &out.to_string()),
    }
}

/// Keeps one exchange for [`Fake::exchanges_jsonl`], and appends it to
/// [`State::exchange_log`] when one is set.
fn record(state: &Arc<Mutex<State>>, method: &str, path: &str, body: &str, status: u16, answer: &str, fault: bool) {
    let mut s = state.lock().unwrap();
    // A test-set `html_url` is a hostile answer on purpose, no GitHub's.
    let fault = fault || s.html_url.is_some();
    let x = json!({
        "method": method, "path": path, "request_body": body,
        "status": status, "response_body": answer, "fault": fault,
    });
    if let Some(file) = &s.exchange_log {
        // One write per line on a file opened for appending: the fakes of
        // tests running in parallel do not interleave within a line.
        let line = format!("{x}\n");
        let _ = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(file)
            .and_then(|mut f| f.write_all(line.as_bytes()));
    }
    s.exchanges.push(x);
}

/// A webhook payload as GitHub puts it in GITHUB_EVENT_PATH for `hook`
/// (`pull-request-opened`, `pull-request-synchronize`, `pull-request-labeled`,
/// `push`, `workflow-run-completed`, `merge-group-checks-requested`): the
/// smallest payload GitHub's webhooks description accepts (events.json,
/// written by scripts/github-openapi/events.mjs) with `overlay` merged in,
/// objects field by field, anything else replaced. With
/// `GATE_FAKE_GITHUB_LOG` set, the payload is also appended to that file
/// with `.events` added, for check.mjs (`.ci/run` checks them).
pub(crate) fn event(hook: &str, overlay: Value) -> Value {
    static EVENTS: std::sync::OnceLock<Value> = std::sync::OnceLock::new();
    let mut payload = EVENTS
        .get_or_init(|| serde_json::from_str(include_str!("events.json")).expect("events.json is JSON"))
        .get(hook)
        .cloned()
        .unwrap_or_else(|| panic!("no webhook {hook} in events.json"));
    merge(&mut payload, overlay);
    if let Some(log) = std::env::var_os("GATE_FAKE_GITHUB_LOG") {
        let mut file = std::path::PathBuf::from(log).into_os_string();
        file.push(".events");
        let line = format!("{}\n", json!({ "hook": hook, "payload": payload }));
        let _ = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(file)
            .and_then(|mut f| f.write_all(line.as_bytes()));
    }
    payload
}

/// `overlay` into `base`: objects field by field, anything else replaced.
fn merge(base: &mut Value, overlay: Value) {
    match (base, overlay) {
        (Value::Object(b), Value::Object(o)) => {
            for (k, v) in o {
                match b.get_mut(&k) {
                    Some(slot) => merge(slot, v),
                    None => {
                        b.insert(k, v);
                    }
                }
            }
        }
        (slot, v) => *slot = v,
    }
}

/// GitHub's `Link` header for a page of a pull request's comments: absolute
/// URLs by the repository's id (`/repositories/ID/...`), as api.github.com
/// writes them, so a client that follows the header is told apart from one
/// that counts pages. The events listing sends none, as some servers in
/// front of an API do, so the client's fallback is exercised too.
fn comment_links(path: &str, host: &str, state: &Arc<Mutex<State>>) -> Option<String> {
    let (p, q) = query(path);
    let rest = p
        .strip_prefix(&format!("/repos/{REPO}/issues/"))
        .or_else(|| p.strip_prefix(&format!("/repositories/{REPO_ID}/issues/")))?;
    let pr: u64 = rest.strip_suffix("/comments")?.parse().ok()?;
    let per: usize = q
        .get("per_page")
        .and_then(|v| v.parse().ok())
        .unwrap_or(30)
        .clamp(1, 100);
    let page: usize = q.get("page").and_then(|v| v.parse().ok()).unwrap_or(1).max(1);
    let (total, host, hostile) = {
        let s = state.lock().unwrap();
        let total = s.comments.get(&pr).map_or(0, Vec::len);
        (
            total,
            s.link_host.clone().unwrap_or_else(|| host.to_string()),
            s.link_next,
        )
    };
    let last = total.div_ceil(per).max(1);
    let url = |n: usize| format!("<http://{host}/repositories/{REPO_ID}/issues/{pr}/comments?per_page={per}&page={n}>");
    if let Some(next) = hostile {
        return Some(format!("{}; rel=\"next\"", url(next(page))));
    }
    let mut links = Vec::new();
    if page < last {
        links.push(format!("{}; rel=\"next\"", url(page + 1)));
        links.push(format!("{}; rel=\"last\"", url(last)));
    }
    if page > 1 {
        links.push(format!("{}; rel=\"first\"", url(1)));
        links.push(format!("{}; rel=\"prev\"", url(page - 1)));
    }
    (!links.is_empty()).then(|| links.join(", "))
}

fn query(path: &str) -> (String, HashMap<String, String>) {
    let (p, q) = path.split_once('?').unwrap_or((path, ""));
    let map = q
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    (p.to_string(), map)
}

/// One of GitHub's own example answers, from its REST description
/// (answers.json, written by scripts/github-openapi/answers.mjs): the fake
/// sets the fields it models and leaves the rest as GitHub shows them, so
/// every answer has the shape scripts/github-openapi/check.mjs holds it to.
fn answer(name: &str) -> Value {
    static ANSWERS: std::sync::OnceLock<Value> = std::sync::OnceLock::new();
    ANSWERS
        .get_or_init(|| serde_json::from_str(include_str!("answers.json")).expect("answers.json is JSON"))
        .get(name)
        .cloned()
        .unwrap_or_else(|| panic!("no example answer {name} in answers.json"))
}

/// A user as GitHub shows one (`simple-user`); an app's login ends in `[bot]`.
fn user(login: &str, kind: &str) -> Value {
    let mut u = answer("issue-comment")["user"].clone();
    u["login"] = json!(login);
    u["type"] = json!(kind);
    // An app's page is under /apps/ (`[` and `]` are no part of a URL path).
    let page = match login.strip_suffix("[bot]") {
        Some(app) => format!("apps/{app}"),
        None => login
            .bytes()
            .map(|b| {
                if b.is_ascii_alphanumeric() || b == b'-' {
                    (b as char).to_string()
                } else {
                    format!("%{b:02X}")
                }
            })
            .collect(),
    };
    u["html_url"] = json!(format!("https://github.com/{page}"));
    u
}

/// A 40-hex-digit sha standing for a fake name (`tree1`), as git writes them.
fn hex_sha(name: &str) -> String {
    let hex: String = name.bytes().map(|b| format!("{b:02x}")).collect();
    format!("{hex:0<40}")[..40].to_string()
}

fn comment_json(c: &Comment, pr: u64, html_url: Option<&str>) -> Value {
    let mut v = answer("issue-comment");
    v["id"] = json!(c.id);
    v["body"] = json!(c.body);
    v["user"] = user(&c.login, if c.login.ends_with("[bot]") { "Bot" } else { "User" });
    v["url"] = json!(format!("https://api.github.com/repos/{REPO}/issues/comments/{}", c.id));
    v["issue_url"] = json!(format!("https://api.github.com/repos/{REPO}/issues/{pr}"));
    v["html_url"] = json!(html_url.map_or_else(
        || format!("https://github.com/{REPO}/pull/{pr}#issuecomment-{}", c.id),
        str::to_string
    ));
    v
}

fn route(method: &str, path: &str, body: &str, state: &Arc<Mutex<State>>) -> (u16, Value) {
    let (p, q) = query(path);
    let prefix = format!("/repos/{REPO}/");
    let by_id = format!("/repositories/{REPO_ID}/");
    let Some(rest) = p.strip_prefix(&prefix).or_else(|| p.strip_prefix(&by_id)) else {
        return outside_repo(method, &p);
    };
    let segs: Vec<&str> = rest.split('/').collect();
    let input: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    let mut s = state.lock().unwrap();
    let html_url = s.html_url.clone();
    let html_url = html_url.as_deref();
    match (method, segs.as_slice()) {
        ("GET", ["issues", pr, "comments"]) => {
            let pr: u64 = pr.parse().unwrap_or(0);
            if !s.pulls.contains_key(&pr) {
                return (404, json!({"message": "Not Found"}));
            }
            let per: usize = q.get("per_page").and_then(|v| v.parse().ok()).unwrap_or(30).min(100);
            let page: usize = q.get("page").and_then(|v| v.parse().ok()).unwrap_or(1).max(1);
            let all = s.comments.get(&pr).cloned().unwrap_or_default();
            let items: Vec<Value> = all
                .iter()
                .skip((page - 1) * per)
                .take(per)
                .map(|c| comment_json(c, pr, html_url))
                .collect();
            (200, Value::Array(items))
        }
        ("GET", ["issues", pr, "events"]) => {
            let pr: u64 = pr.parse().unwrap_or(0);
            if !s.pulls.contains_key(&pr) {
                return (404, json!({"message": "Not Found"}));
            }
            let per: usize = q.get("per_page").and_then(|v| v.parse().ok()).unwrap_or(30).min(100);
            let page: usize = q.get("page").and_then(|v| v.parse().ok()).unwrap_or(1).max(1);
            let all = s.events.get(&pr).cloned().unwrap_or_default();
            (
                200,
                Value::Array(all.into_iter().skip((page - 1) * per).take(per).collect()),
            )
        }
        // docs.github.com, "List labels for an issue": the labels on it now,
        // paged like any listing. Here: what its events leave on, unless set.
        ("GET", ["issues", pr, "labels"]) => {
            let pr: u64 = pr.parse().unwrap_or(0);
            if !s.pulls.contains_key(&pr) {
                return (404, json!({"message": "Not Found"}));
            }
            let names = s.labels_now.get(&pr).cloned().unwrap_or_else(|| {
                let mut on: Vec<String> = Vec::new();
                for e in s.events.get(&pr).into_iter().flatten() {
                    let name = e["label"]["name"].as_str().unwrap_or_default().to_string();
                    match e["event"].as_str() {
                        Some("labeled") if !on.contains(&name) => on.push(name),
                        Some("unlabeled") => on.retain(|n| *n != name),
                        _ => {}
                    }
                }
                on
            });
            let per: usize = q.get("per_page").and_then(|v| v.parse().ok()).unwrap_or(30).min(100);
            let page: usize = q.get("page").and_then(|v| v.parse().ok()).unwrap_or(1).max(1);
            let items = names
                .iter()
                .skip((page - 1) * per)
                .take(per)
                .enumerate()
                .map(|(i, n)| {
                    let mut l = answer("label");
                    l["id"] = json!(i + 1);
                    l["name"] = json!(n);
                    l["color"] = json!("ededed");
                    l["url"] = json!(format!("https://api.github.com/repos/{REPO}/labels/{n}"));
                    l
                })
                .collect();
            (200, Value::Array(items))
        }
        // docs.github.com, "Get repository permissions for a user": 200 with
        // `permission` (maintain shows as `write`, triage as `read`) and
        // `role_name`; 404 when there is no such user.
        ("GET", ["collaborators", login, "permission"]) => match s.permissions.get(*login) {
            Some(p) => {
                let mut v = answer("repository-collaborator-permission");
                v["permission"] = json!(p);
                v["role_name"] = json!(p);
                let mut u = user(login, "User");
                if let Some(perms) = v["user"].get("permissions") {
                    u["permissions"] = perms.clone();
                }
                u["role_name"] = json!(p);
                v["user"] = u;
                (200, v)
            }
            None => (404, json!({"message": "Not Found"})),
        },
        ("POST", ["issues", pr, "comments"]) => {
            let pr: u64 = pr.parse().unwrap_or(0);
            if !s.pulls.contains_key(&pr) {
                return (404, json!({"message": "Not Found"}));
            }
            s.next_id += 1;
            let c = Comment {
                id: s.next_id,
                body: input["body"].as_str().unwrap_or_default().into(),
                login: s.token_login.clone().unwrap_or_else(|| "github-actions[bot]".into()),
            };
            let out = comment_json(&c, pr, html_url);
            s.comments.entry(pr).or_default().push(c);
            (201, out)
        }
        ("PATCH", ["issues", "comments", id]) => {
            let id: u64 = id.parse().unwrap_or(0);
            for (pr, list) in s.comments.iter_mut() {
                if let Some(c) = list.iter_mut().find(|c| c.id == id) {
                    if !c.login.ends_with("[bot]") {
                        return (403, json!({"message": "Resource not accessible by integration"}));
                    }
                    c.body = input["body"].as_str().unwrap_or_default().into();
                    return (200, comment_json(c, *pr, html_url));
                }
            }
            (404, json!({"message": "Not Found"}))
        }
        ("GET", ["pulls", n]) => match s.pulls.get(&n.parse().unwrap_or(0)) {
            Some(head) => {
                // A fake PR comes from branch `feature` of `fork/repo` unless `pull_heads` says otherwise.
                let (repo, branch) = s
                    .pull_heads
                    .get(&n.parse().unwrap_or(0))
                    .cloned()
                    .unwrap_or(("fork/repo".into(), "feature".into()));
                let mut v = answer("pull-request");
                v["number"] = json!(n.parse::<u64>().unwrap_or(0));
                // GitHub's own example lists a team without the `type` its
                // schema requires; no reviewer teams here.
                v["requested_teams"] = json!([]);
                v["head"]["sha"] = json!(head);
                v["head"]["ref"] = json!(branch);
                v["head"]["label"] = json!(format!("{}:{branch}", repo.split('/').next().unwrap_or_default()));
                v["head"]["repo"]["full_name"] = json!(repo);
                (200, v)
            }
            None => (404, json!({"message": "Not Found"})),
        },
        ("GET", ["compare", _range]) => match &s.merge_base {
            Some(mb) => {
                let mut v = answer("commit-comparison");
                v["merge_base_commit"]["sha"] = json!(mb);
                (200, v)
            }
            None => (404, json!({"message": "Not Found"})),
        },
        ("GET", ["commits"]) => {
            let mut cur = q.get("sha").cloned();
            let per: usize = q.get("per_page").and_then(|v| v.parse().ok()).unwrap_or(30).min(100);
            let mut out = Vec::new();
            while let Some(sha) = cur {
                if out.len() >= per {
                    break;
                }
                let Some(parents) = s.commits.get(&sha) else { break };
                let mut c = answer("commit");
                c["sha"] = json!(sha);
                c["parents"] = parents
                    .iter()
                    .map(|p| json!({ "sha": p, "url": format!("https://api.github.com/repos/{REPO}/commits/{p}") }))
                    .collect();
                out.push(c);
                cur = parents.first().cloned();
            }
            if out.is_empty() {
                return (422, json!({"message": "No commit found for SHA"}));
            }
            (200, Value::Array(out))
        }
        // docs.github.com, "Get a tree": by the branch's name, `recursive`
        // listing the subtrees' entries too (a `tree` entry for `reports`,
        // a `blob` for each file); `truncated` past GitHub's limit, which a
        // test sets with `tree_truncated`. 404 when there is no such branch.
        ("GET", ["git", "trees", _branch]) => {
            if !s.branch_exists {
                return (404, json!({"message": "Not Found"}));
            }
            let entry = |path: &str, kind: &str, sha: &str, size: Option<usize>| {
                let mut e = answer("git-tree")["tree"][0].clone();
                e["path"] = json!(path);
                e["type"] = json!(kind);
                e["mode"] = json!(if kind == "tree" { "040000" } else { "100644" });
                e["sha"] = json!(sha);
                e["url"] = json!(format!("https://api.github.com/repos/{REPO}/git/{kind}s/{sha}"));
                match (size, e.as_object_mut()) {
                    (Some(n), _) => e["size"] = json!(n),
                    (None, Some(o)) => {
                        o.remove("size");
                    }
                    (None, None) => {}
                }
                e
            };
            let recursive = q.contains_key("recursive");
            let mut items = vec![entry("README.md", "blob", &hex_sha("readme"), Some(90))];
            // Each folder a file is in (`reports`, `reports/<card>`, `anchors`):
            // the top ones, or with `recursive` all of them.
            let folders: std::collections::BTreeSet<String> = s
                .files
                .keys()
                .flat_map(|p| {
                    let parts: Vec<&str> = p.split('/').collect();
                    (1..parts.len()).map(move |n| parts[..n].join("/")).collect::<Vec<_>>()
                })
                .filter(|f| recursive || !f.contains('/'))
                .collect();
            for f in &folders {
                items.push(entry(f, "tree", &hex_sha(f), None));
            }
            if recursive {
                items.extend(
                    s.files
                        .iter()
                        .map(|(path, (text, blob))| entry(path, "blob", blob, Some(text.len()))),
                );
            }
            let mut v = answer("git-tree");
            v["sha"] = json!(hex_sha("tree0"));
            v["url"] = json!(format!(
                "https://api.github.com/repos/{REPO}/git/trees/{}",
                hex_sha("tree0")
            ));
            v["tree"] = Value::Array(items);
            v["truncated"] = json!(s.tree_truncated);
            (200, v)
        }
        // A file (a commit's report, a card's, an anchor's), or a folder's
        // listing as GitHub gives it: its files and, as `dir` entries, its
        // folders (`reports/` holds a folder per card).
        ("GET", ["contents", dir @ ("reports" | "anchors"), rest @ ..]) => {
            let path = std::iter::once(*dir)
                .chain(rest.iter().copied())
                .collect::<Vec<_>>()
                .join("/");
            let file = path.rsplit('/').next().unwrap().to_string();
            if !s.branch_exists {
                return (404, json!({"message": "Not Found"}));
            }
            if let Some((text, blob)) = s.files.get(&path) {
                let mut v = answer("content-file");
                v["name"] = json!(file);
                v["path"] = json!(path);
                v["sha"] = json!(blob);
                v["size"] = json!(text.len());
                v["encoding"] = json!("base64");
                v["content"] = json!(base64::engine::general_purpose::STANDARD.encode(text.as_bytes()));
                return (200, v);
            }
            let under = format!("{path}/");
            let mut items: Vec<Value> = Vec::new();
            let mut folders = std::collections::BTreeSet::new();
            for (p, (text, blob)) in s.files.iter().filter(|(p, _)| p.starts_with(&under)) {
                let rel = &p[under.len()..];
                match rel.split_once('/') {
                    Some((folder, _)) => {
                        folders.insert(folder.to_string());
                    }
                    None => {
                        let mut e = answer("content-directory-entry");
                        e["name"] = json!(rel);
                        e["path"] = json!(p);
                        e["sha"] = json!(blob);
                        e["size"] = json!(text.len());
                        items.push(e);
                    }
                }
            }
            for folder in folders {
                let mut e = answer("content-directory-entry");
                e["type"] = json!("dir");
                e["name"] = json!(folder);
                e["path"] = json!(format!("{under}{folder}"));
                e["sha"] = json!(hex_sha(&folder));
                e["size"] = json!(0);
                e["download_url"] = Value::Null;
                items.push(e);
            }
            if items.is_empty() {
                return (404, json!({"message": "Not Found"}));
            }
            (200, Value::Array(items))
        }
        ("PUT", ["contents", dir @ ("reports" | "anchors"), rest @ .., file]) => {
            let path = std::iter::once(*dir)
                .chain(rest.iter().copied())
                .chain([*file])
                .collect::<Vec<_>>()
                .join("/");
            if !s.branch_exists {
                return (404, json!({"message": "Branch not found"}));
            }
            let given = input["sha"].as_str().map(str::to_string);
            match (s.files.get(&path).map(|f| f.1.clone()), given) {
                (Some(_), None) => return (422, json!({"message": "\"sha\" wasn't supplied."})),
                (Some(cur), Some(g)) if cur != g => return (409, json!({"message": "does not match"})),
                (None, Some(_)) => return (409, json!({"message": "does not match"})),
                _ => {}
            }
            let existed = s.files.contains_key(&path);
            let text = base64::engine::general_purpose::STANDARD
                .decode(input["content"].as_str().unwrap_or_default())
                .map(|b| String::from_utf8_lossy(&b).into_owned())
                .unwrap_or_default();
            s.blob_counter += 1;
            let blob = format!("blob{}", s.blob_counter);
            s.files.insert(path.clone(), (text, blob.clone()));
            let mut v = answer("file-commit");
            v["content"]["name"] = json!(file);
            v["content"]["path"] = json!(path);
            v["content"]["sha"] = json!(blob);
            (if existed { 200 } else { 201 }, v)
        }
        ("GET", ["git", "ref", "heads", _b]) => {
            if s.branch_exists {
                let mut v = answer("git-ref");
                v["ref"] = json!("refs/heads/gate-baselines");
                v["object"]["sha"] = json!(hex_sha("c0ffee"));
                (200, v)
            } else {
                (404, json!({"message": "Not Found"}))
            }
        }
        ("POST", ["check-runs"]) | ("PATCH", ["check-runs", _]) => check_runs_route(method, &segs, &input, &mut s),
        ("POST", ["git", "trees"]) => {
            let mut v = answer("git-tree");
            v["sha"] = json!(hex_sha("tree1"));
            (201, v)
        }
        ("POST", ["git", "commits"]) => {
            let mut v = answer("git-commit");
            v["sha"] = json!(hex_sha("commit1"));
            (201, v)
        }
        ("POST", ["git", "refs"]) => {
            if s.branch_exists {
                return (422, json!({"message": "Reference already exists"}));
            }
            s.branch_exists = true;
            let mut v = answer("git-ref");
            v["ref"] = input["ref"].clone();
            v["object"]["sha"] = input["sha"].clone();
            (201, v)
        }
        _ => (404, json!({"message": "Not Found"})),
    }
}

impl Fake {
    /// The token is `login`'s installation token (a GitHub App's, whose
    /// comments GitHub writes as `<app-slug>[bot]`), not the GITHUB_TOKEN.
    pub(crate) fn as_app(&self, login: &str) {
        self.state.lock().unwrap().token_login = Some(login.into());
    }
}

/// Routes outside `/repos/{owner}/{repo}`. `GET /user` refuses every token
/// here, as GitHub refuses an installation token (the GITHUB_TOKEN and a
/// GitHub App's): 403 "Resource not accessible by integration"
/// (docs.github.com, "Get the authenticated user"; seen in
/// actions/create-github-app-token#258).
fn outside_repo(method: &str, path: &str) -> (u16, Value) {
    match (method, path) {
        ("GET", "/user") => (
            403,
            json!({
                "message": "Resource not accessible by integration",
                "documentation_url": "https://docs.github.com/rest/users/users#get-the-authenticated-user",
            }),
        ),
        _ => (404, json!({"message": "Not Found"})),
    }
}

impl Fake {
    /// The check runs created so far (see [`check_runs_route`]).
    pub(crate) fn check_runs(&self) -> Vec<Value> {
        self.state.lock().unwrap().check_runs.clone()
    }
}

/// A check run as GitHub answers it (its description's example), with
/// what the fake models: id, name, head sha, status, conclusion, title,
/// summary and the annotations' count.
fn check_run_answer(run: &Value) -> Value {
    let id = run["id"].as_u64().unwrap_or(0);
    let mut v = answer("check-run");
    v["id"] = json!(id);
    v["name"] = run["name"].clone();
    v["head_sha"] = run["head_sha"].clone();
    v["status"] = json!(run["status"].as_str().unwrap_or("completed"));
    v["conclusion"] = run["conclusion"].clone();
    v["url"] = json!(format!("https://api.github.com/repos/{REPO}/check-runs/{id}"));
    v["html_url"] = json!(format!("https://github.com/{REPO}/runs/{id}"));
    v["output"]["title"] = run["output"]["title"].clone();
    v["output"]["summary"] = run["output"]["summary"].clone();
    v["output"]["text"] = Value::Null;
    let count = run["output"]["annotations"].as_array().map_or(0, Vec::len);
    v["output"]["annotations_count"] = json!(count);
    v
}

/// docs.github.com, "Create a check run" / "Update a check run": `name`
/// and `head_sha` required; `conclusion` one of the API's words; `output`
/// needs `title` and `summary` (at most 65,535: the docs say characters,
/// GitHub counts bytes, github/docs#35252); at most 50
/// annotations per request, each with `path`, `start_line`, `end_line`,
/// `annotation_level` (notice, warning, failure) and `message`; an update's
/// annotations are appended to the run's. 422 for what GitHub refuses.
fn check_runs_route(method: &str, segs: &[&str], input: &Value, s: &mut State) -> (u16, Value) {
    let invalid = |why: &str| (422, json!({ "message": format!("Invalid request.\n\n{why}") }));
    let output = &input["output"];
    if !output.is_null() {
        if !output["title"].is_string() || !output["summary"].is_string() {
            return invalid("output needs title and summary");
        }
        if output["summary"].as_str().unwrap_or_default().len() > 65_535 {
            // GitHub's own answer (github/docs#35252, dorny/test-reporter#57).
            return (
                422,
                json!({ "message": "Validation Failed", "errors": [{ "resource": "CheckRun", "code": "custom", "field": "summary", "message": "summary exceeds a maximum bytesize of 65535" }] }),
            );
        }
        let annotations = output["annotations"].as_array().cloned().unwrap_or_default();
        if annotations.len() > 50 {
            return invalid("Only 50 annotations are allowed per request");
        }
        for a in &annotations {
            let level = a["annotation_level"].as_str().unwrap_or_default();
            let has = |k: &str| !a[k].is_null();
            let whole = ["path", "start_line", "end_line", "message"].iter().all(|k| has(k));
            if !whole || !["notice", "warning", "failure"].contains(&level) {
                return invalid("an annotation lacks a field or has a bad annotation_level");
            }
        }
    }
    match (method, segs) {
        ("POST", _) => {
            let sha = input["head_sha"].as_str().unwrap_or_default();
            if input["name"].as_str().unwrap_or_default().is_empty() || sha.len() != 40 {
                return invalid("name and head_sha are required");
            }
            let conclusion = input["conclusion"].as_str().unwrap_or_default();
            if ![
                "success",
                "failure",
                "neutral",
                "cancelled",
                "skipped",
                "timed_out",
                "action_required",
            ]
            .contains(&conclusion)
            {
                return invalid("conclusion is not one of the allowed values");
            }
            let id = 7000 + s.check_runs.len() as u64;
            let mut run = input.clone();
            run["id"] = json!(id);
            s.check_runs.push(run.clone());
            (201, check_run_answer(&run))
        }
        (_, [_, id]) => {
            let id: u64 = id.parse().unwrap_or(0);
            let Some(run) = s.check_runs.iter_mut().find(|r| r["id"] == json!(id)) else {
                return (404, json!({"message": "Not Found"}));
            };
            let more = output["annotations"].as_array().cloned().unwrap_or_default();
            if let Some(list) = run["output"]["annotations"].as_array_mut() {
                list.extend(more);
            }
            (200, check_run_answer(run))
        }
        _ => (404, json!({"message": "Not Found"})),
    }
}
