//! The one HTTP client of `gate`: octocrab against `GITHUB_API_URL`.
//!
//! Requests go through octocrab's request API (`get`, `post`, its status
//! check `map_github_error`, its `Page` and `Link` pagination), and its typed
//! errors, which keep the answer's headers, are read in one place
//! (`classify`). Around each call: a timeout per attempt and bounded
//! retries with exponential backoff (5xx, 429, rate-limited 403, timeouts,
//! connection errors). Octocrab's own retry layer is off so that the count
//! is ours and a POST is never repeated blindly. Over all of that, one
//! deadline per command (`Settings::deadline`): the worst case is otherwise
//! pages × attempts × timeout, plus rate-limit waits.
//!
//! Answers decode into this crate's own small structs (the fields gate
//! reads, the rest ignored), not octocrab's models: those require every
//! field GitHub may send (an `Author` has 18 required fields), and GitHub
//! publishes no schema that says which may be missing or null, so a model
//! that is one field stricter than the live API turns a comment that was
//! written into an error. Octocrab's own tracker has such reports
//! (XAMPPRocky/octocrab#24, #344, #782).

use std::sync::Mutex;
use std::time::{Duration, Instant};

use octocrab::service::middleware::retry::RetryConfig;
use octocrab::{Octocrab, Page};
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::error::{Call, GithubError};

pub const DEFAULT_API_URL: &str = "https://api.github.com";
/// The default of `GATE_GITHUB_DEADLINE_MS`: ten minutes, above the default
/// rate-limit allowance (five) so a waited-out limit still has time to finish.
pub const DEFAULT_DEADLINE_MS: u64 = 600_000;

/// How the client talks to GitHub.
#[derive(Clone)]
pub struct Settings {
    pub api_url: String,
    pub token: Option<String>,
    /// Per request, connection to last byte.
    pub timeout: Duration,
    /// Attempts per request, the first included (at least 1).
    pub attempts: u32,
    /// The first retry waits this long; each next one twice as long.
    pub backoff: Duration,
    /// The most a run waits, in all, for rate limits to lift (then exit 3).
    pub max_rate_wait: Duration,
    /// The most one command spends on GitHub in all, every client it makes
    /// together (then exit 3, naming the call in flight).
    pub deadline: Duration,
}

/// GitHub time already spent by this process's earlier clients: `gate
/// check` asks GitHub in two phases (baseline, label) with profiling
/// between them, and the deadline counts GitHub's time only.
static SPENT: Mutex<Duration> = Mutex::new(Duration::ZERO);

fn spent() -> Duration {
    *SPENT.lock().unwrap_or_else(|e| e.into_inner())
}

impl std::fmt::Debug for Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Settings")
            .field("api_url", &self.api_url)
            .field("token", &self.token.as_ref().map(|_| "***"))
            .field("timeout", &self.timeout)
            .field("attempts", &self.attempts)
            .field("backoff", &self.backoff)
            .field("deadline", &self.deadline)
            .finish()
    }
}

/// The variables that tune the client, each a whole number (`ATTEMPTS`
/// from 1 to 10; the others milliseconds), with its default.
const TUNING: &[(&str, u64)] = &[
    ("GATE_GITHUB_TIMEOUT_MS", 15_000),
    ("GATE_GITHUB_ATTEMPTS", 4),
    ("GATE_GITHUB_BACKOFF_MS", 1_000),
    ("GATE_GITHUB_MAX_RATE_WAIT_MS", 300_000),
    ("GATE_GITHUB_DEADLINE_MS", DEFAULT_DEADLINE_MS),
];

/// Tuning variable `name`: unset or blank is its default; anything but a
/// whole number in range (`30s`, `-1`, `1e3`, `1.5`) is an error that says
/// the accepted form (#43: such values were the default without a word).
fn tuning(name: &str) -> Result<u64, GithubError> {
    let default = TUNING.iter().find(|(n, _)| *n == name).map_or(0, |(_, d)| *d);
    let Some(raw) = std::env::var_os(name) else {
        return Ok(default);
    };
    let text = raw.to_string_lossy();
    let value = text.trim();
    if value.is_empty() {
        return Ok(default);
    }
    let attempts = name == "GATE_GITHUB_ATTEMPTS";
    let parsed = value
        .bytes()
        .all(|b| b.is_ascii_digit())
        .then(|| value.parse::<u64>().ok())
        .flatten()
        .filter(|&n| !attempts || (1..=10).contains(&n));
    parsed.ok_or_else(|| GithubError::Config {
        message: format!(
            "{name}={value:?} is not {}",
            if attempts {
                "a whole number from 1 to 10"
            } else {
                "a whole number of milliseconds"
            }
        ),
        hint: format!("write digits only, e.g. `{name}={default}` (the default), or unset it"),
    })
}

/// Tuning variable `name` in milliseconds; its default when malformed
/// (which [`Settings::check_env`] has refused before any command ran).
fn env_ms(name: &str) -> Duration {
    let default = TUNING.iter().find(|(n, _)| *n == name).map_or(0, |(_, d)| *d);
    Duration::from_millis(tuning(name).unwrap_or(default))
}

impl Settings {
    /// From `GITHUB_API_URL` and `GITHUB_TOKEN`; `GATE_GITHUB_TIMEOUT_MS`
    /// (default 15000), `GATE_GITHUB_ATTEMPTS` (4), `GATE_GITHUB_BACKOFF_MS`
    /// (1000), `GATE_GITHUB_MAX_RATE_WAIT_MS` (300000) and
    /// `GATE_GITHUB_DEADLINE_MS` (600000) tune the network behaviour.
    pub fn from_env() -> Settings {
        let api_url = std::env::var("GITHUB_API_URL")
            .ok()
            .filter(|s| !s.trim().is_empty())
            .unwrap_or_else(|| DEFAULT_API_URL.into());
        Settings {
            api_url: api_url.trim().trim_end_matches('/').to_string(),
            token: token_from_env(),
            timeout: env_ms("GATE_GITHUB_TIMEOUT_MS"),
            attempts: tuning("GATE_GITHUB_ATTEMPTS").unwrap_or(4).clamp(1, 10) as u32,
            backoff: env_ms("GATE_GITHUB_BACKOFF_MS"),
            max_rate_wait: env_ms("GATE_GITHUB_MAX_RATE_WAIT_MS"),
            deadline: env_ms("GATE_GITHUB_DEADLINE_MS"),
        }
    }

    /// Checks the tuning variables (see [`Settings::from_env`]): the first
    /// that is not a whole number in range, as an error naming the accepted
    /// form. The command line calls it before any command runs, so a bad
    /// value never turns into a default.
    pub fn check_env() -> Result<(), GithubError> {
        TUNING.iter().try_for_each(|(name, _)| tuning(name).map(|_| ()))
    }
}

/// `GITHUB_TOKEN`, trimmed (unset or blank: none): what the client sends,
/// and what nothing gate prints or writes may contain.
pub fn token_from_env() -> Option<String> {
    std::env::var("GITHUB_TOKEN")
        .ok()
        .map(|t| t.trim().to_string())
        .filter(|t| !t.is_empty())
}

/// The wait a rate-limited answer asks for, following GitHub's documented
/// rules (docs.github.com, "Rate limits for the REST API": "If you exceed a
/// rate limit"): `retry-after` seconds when given; else, with
/// `x-ratelimit-remaining: 0`, until `x-ratelimit-reset` (epoch seconds);
/// else, for a secondary rate limit, at least one minute. `None`: not a
/// rate limit.
fn rate_limit_wait(
    status: u16,
    retry_after: Option<u64>,
    remaining: Option<u64>,
    reset: Option<u64>,
    body: &str,
    now: u64,
) -> Option<Duration> {
    if status != 403 && status != 429 {
        return None;
    }
    let secondary = body.to_ascii_lowercase().contains("secondary rate limit");
    if let Some(s) = retry_after {
        return Some(Duration::from_secs(s));
    }
    if remaining == Some(0) {
        return Some(Duration::from_secs(reset.map_or(60, |r| r.saturating_sub(now).max(1))));
    }
    (secondary || status == 429).then(|| Duration::from_secs(60))
}

fn now_epoch() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

pub struct Client {
    octo: Octocrab,
    settings: Settings,
    /// When this client started; with [`SPENT`], where the deadline is.
    started: Instant,
    /// The deadline's time left when this client was made.
    budget: Duration,
}

impl Drop for Client {
    fn drop(&mut self) {
        *SPENT.lock().unwrap_or_else(|e| e.into_inner()) += self.started.elapsed();
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    Get,
    Post,
    Patch,
    Put,
}

impl Method {
    /// The HTTP method as it is written in requests and messages.
    pub fn name(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Post => "POST",
            Method::Patch => "PATCH",
            Method::Put => "PUT",
        }
    }
}

/// An octocrab error as the retry loop sees it.
enum Failure {
    /// GitHub answered with an error status (octocrab's `GitHubError`,
    /// which keeps the answer's headers); `wait` is set for a rate limit.
    Status {
        status: u16,
        message: String,
        wait: Option<Duration>,
    },
    /// A 2xx answer that is not the JSON the API documents.
    Decode(String),
    /// No answer: connection, TLS or protocol failure.
    Transport(String),
}

/// The one place octocrab's errors are read: each becomes a [`Failure`],
/// which the retry loop acts on and then turns into a [`GithubError`] (whose
/// `hint()` says the fix).
fn classify(e: octocrab::Error) -> Failure {
    match e {
        octocrab::Error::GitHub { source, .. } => {
            let header = |name: &str| {
                source
                    .headers
                    .as_ref()
                    .and_then(|h| h.get(name))
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.trim().parse::<u64>().ok())
            };
            let status = source.status_code.as_u16();
            let wait = rate_limit_wait(
                status,
                header("retry-after"),
                header("x-ratelimit-remaining"),
                header("x-ratelimit-reset"),
                &source.message,
                now_epoch(),
            );
            Failure::Status {
                status,
                message: source.message.trim().to_string(),
                wait,
            }
        }
        // Octocrab decodes the body with serde (`Json`), a page with
        // `Serde`, and names a page of an unknown shape `Other`; a `Link`
        // header that is no URL fails as `Uri`. None of these is the
        // network, so none is retried.
        e @ (octocrab::Error::Json { .. }
        | octocrab::Error::Serde { .. }
        | octocrab::Error::Other { .. }
        | octocrab::Error::Uri { .. }
        | octocrab::Error::UriParse { .. }
        | octocrab::Error::SerdeUrlEncoded { .. }
        | octocrab::Error::Http { .. }) => Failure::Decode(error_chain(&e)),
        e => Failure::Transport(error_chain(&e)),
    }
}

impl Client {
    /// Builds the client; call inside a tokio runtime.
    pub fn new(settings: Settings) -> Result<Client, GithubError> {
        let bad_url = || GithubError::Config {
            message: format!("GITHUB_API_URL `{}` is not a URL", shown_url(&settings.api_url)),
            hint: "use https://api.github.com, or https://HOST/api/v3 on GitHub Enterprise".into(),
        };
        if !(settings.api_url.starts_with("https://") || settings.api_url.starts_with("http://")) {
            return Err(bad_url());
        }
        // The upload URL too, which octocrab would otherwise point at
        // uploads.github.com and send the token to: gate uploads nothing.
        let mut builder = Octocrab::builder()
            .base_uri(settings.api_url.as_str())
            .map_err(|_| bad_url())?
            .upload_uri(settings.api_url.as_str())
            .map_err(|_| bad_url())?
            .add_retry_config(RetryConfig::None)
            .set_connect_timeout(Some(settings.timeout))
            .set_read_timeout(Some(settings.timeout))
            .set_write_timeout(Some(settings.timeout));
        if let Some(t) = &settings.token {
            builder = builder.personal_token(t.clone());
        }
        let octo = builder.build().map_err(|e| GithubError::Config {
            message: format!(
                "cannot set up the GitHub client: {}",
                redact(&e.to_string(), settings.token.as_deref())
            ),
            hint: "the runner needs TLS root certificates (the ca-certificates package)".into(),
        })?;
        let budget = settings.deadline.saturating_sub(spent());
        Ok(Client {
            octo,
            settings,
            started: Instant::now(),
            budget,
        })
    }

    /// What is left of the command's deadline.
    fn time_left(&self) -> Duration {
        self.budget.saturating_sub(self.started.elapsed())
    }

    /// The error for a deadline reached during (or before retrying) a call.
    fn past_deadline(&self, op: Call, method: Method, path: &str) -> GithubError {
        GithubError::Deadline {
            op,
            method: method.name().into(),
            path: self.redact(path),
            secs: self.settings.deadline.as_secs_f64().ceil() as u64,
        }
    }

    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    fn redact(&self, s: &str) -> String {
        redact(s, self.settings.token.as_deref())
    }

    /// Rate limits are waited out as GitHub asks, within a total budget
    /// (`rate_waited` so far); past it the run stops (exit 3) and says so.
    async fn wait_out_rate_limit(
        &self,
        op: Call,
        method: Method,
        path: &str,
        wait: Duration,
        rate_waited: &mut Duration,
    ) -> Result<(), GithubError> {
        let left = self.settings.max_rate_wait.saturating_sub(*rate_waited);
        if wait > left {
            return Err(GithubError::RateLimited {
                op,
                method: method.name().into(),
                path: self.redact(path),
                asked: wait.as_secs(),
                waited: rate_waited.as_secs(),
            });
        }
        if wait >= self.time_left() {
            return Err(self.past_deadline(op, method, path));
        }
        crate::log(format_args!(
            "GitHub rate limit on {} {}: waiting {} s as asked ({} s waited so far)",
            method.name(),
            self.redact(path),
            wait.as_secs_f64().ceil(),
            rate_waited.as_secs()
        ));
        *rate_waited += wait;
        tokio::time::sleep(wait).await;
        Ok(())
    }

    /// Runs one octocrab call (`attempt` sends it afresh each time) with a
    /// timeout per attempt, rate-limit waits, and bounded retries with
    /// exponential backoff: 5xx, 429, timeouts and lost connections are
    /// retried unless the method is a POST, which creates something each
    /// time it lands and is sent once (a rate limit refused it, so it is
    /// sent again after the wait).
    async fn send<T, F, Fut>(&self, op: Call, method: Method, route: &str, attempt: F) -> Result<T, GithubError>
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = octocrab::Result<T>>,
    {
        // GET, PATCH and PUT (a PUT quotes the blob sha it replaces) may be
        // repeated; a POST is sent once and the caller re-reads instead.
        let attempts = match method {
            Method::Get | Method::Patch | Method::Put => self.settings.attempts.max(1),
            Method::Post => 1,
        };
        let path = route;
        let mut tried: u32 = 0;
        let mut rate_waited = Duration::ZERO;
        loop {
            tried += 1;
            let last = tried >= attempts;
            let left = self.time_left();
            if left.is_zero() {
                return Err(self.past_deadline(op, method, path));
            }
            // An attempt gets its own timeout, or what the deadline leaves.
            match tokio::time::timeout(self.settings.timeout.min(left), attempt()).await {
                Ok(Ok(value)) => return Ok(value),
                Ok(Err(e)) => match classify(e) {
                    Failure::Status { wait: Some(wait), .. } => {
                        self.wait_out_rate_limit(op, method, path, wait, &mut rate_waited)
                            .await?;
                        tried -= 1; // the wait is GitHub's, not a failed attempt
                        continue;
                    }
                    Failure::Status { status, message, .. } => {
                        if !(status >= 500 || status == 429) || last {
                            return Err(self.status_error(op, method, path, status, &message));
                        }
                    }
                    Failure::Decode(reason) => {
                        return Err(GithubError::Decode {
                            method: method.name().into(),
                            path: self.redact(path),
                            // serde quotes the value it could not use, which may be the token.
                            reason: self.redact(&reason),
                        });
                    }
                    Failure::Transport(reason) if last => {
                        return Err(GithubError::Transport {
                            op,
                            method: method.name().into(),
                            path: self.redact(path),
                            attempts: tried,
                            reason: self.redact(&reason),
                        })
                    }
                    Failure::Transport(_) => {}
                },
                Err(_) if self.time_left().is_zero() => return Err(self.past_deadline(op, method, path)),
                Err(_) if last => {
                    return Err(GithubError::Timeout {
                        op,
                        method: method.name().into(),
                        path: self.redact(path),
                        attempts: tried,
                    })
                }
                Err(_) => {}
            }
            let backoff = self
                .settings
                .backoff
                .saturating_mul(1 << (tried - 1).min(6))
                .min(Duration::from_secs(30));
            if backoff >= self.time_left() {
                return Err(self.past_deadline(op, method, path));
            }
            tokio::time::sleep(backoff).await;
        }
    }

    /// The error for an error status GitHub answered with.
    fn status_error(&self, op: Call, method: Method, path: &str, status: u16, message: &str) -> GithubError {
        // Octocrab's message is the body's `message`, or the whole body when
        // that is not JSON (an HTML error page): cut to 200 characters, after
        // redaction, since a cut through the token would keep a part of it
        // that redaction no longer recognises (#15).
        let message: String = self.redact(message).chars().take(200).collect();
        GithubError::Status {
            op,
            method: method.name().into(),
            path: self.redact(path),
            status,
            message: message.trim().to_string(),
        }
    }

    /// GET `route` and decode its JSON into `T`; any error status is an error.
    pub async fn get<T: DeserializeOwned>(&self, op: Call, route: &str) -> Result<T, GithubError> {
        self.send(op, Method::Get, route, || self.octo.get::<T, _, ()>(route, None))
            .await
    }

    /// GET `route` and decode its JSON into `T`; a 404 is `None`.
    pub async fn get_opt<T: DeserializeOwned>(&self, op: Call, route: &str) -> Result<Option<T>, GithubError> {
        match self.get(op, route).await {
            Ok(v) => Ok(Some(v)),
            Err(e) if e.status() == Some(404) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Whether `route` exists: a 2xx answer (its body not read) or a 404.
    pub async fn exists(&self, op: Call, route: &str) -> Result<bool, GithubError> {
        match self.unread(op, Method::Get, route, None).await {
            Ok(()) => Ok(true),
            Err(e) if e.status() == Some(404) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Hands every item of a listing to `each`, a page at a time (a pull
    /// request's comments may be thousands; only what `each` keeps stays in
    /// memory), through octocrab's [`Page`]: the next page is
    /// the one GitHub's `Link` header names (docs.github.com, "Using
    /// pagination in the REST API"). A server that sends no `Link` header at
    /// all is asked for the numbered pages in turn until one is not full.
    /// At most `max_pages` pages are read; the answer is whether the listing
    /// was read to its end (`false`: a page past `max_pages` exists, or may,
    /// and its items were not seen; or a `Link` named a page already read). The `Link` URL's path and query
    /// are asked of GITHUB_API_URL's host, whatever host it names
    /// (tests/github_security.rs); on GitHub Enterprise its `/api/v3` prefix
    /// is kept as it is (octocrab's base-URI layer joins only a path that
    /// lacks it).
    pub async fn each_item<T: DeserializeOwned>(
        &self,
        op: Call,
        route: &str,
        per_page: usize,
        max_pages: usize,
        mut each: impl FnMut(T),
    ) -> Result<bool, GithubError> {
        let sep = if route.contains('?') { '&' } else { '?' };
        let numbered = |n: usize| format!("{route}{sep}per_page={per_page}&page={n}");
        let mut next = Some(numbered(1));
        let mut read = 0;
        // A `Link` that leads back to a page already read would be followed
        // to `max_pages`, its items counted again: stop there, unfinished.
        let mut seen = std::collections::HashSet::new();
        while let Some(at) = next.take() {
            if !seen.insert(at.clone()) {
                return Ok(false);
            }
            let page: Page<T> = self
                .send(op, Method::Get, &at, || self.octo.get::<Page<T>, _, ()>(&at, None))
                .await?;
            read += 1;
            let linked = page.next.is_some() || page.prev.is_some() || page.first.is_some() || page.last.is_some();
            let full = page.items.len() >= per_page;
            page.items.into_iter().for_each(&mut each);
            next = match page.next {
                // Its path and query, on GITHUB_API_URL's host: requests go
                // nowhere else, and the token goes with them (a Link naming
                // the host otherwise, `:443` or an alias, would get none).
                Some(uri) => Some(uri.path_and_query().map_or("/", |p| p.as_str()).to_string()),
                None if !linked && full => Some(numbered(read + 1)),
                None => None,
            };
            if next.is_some() && read >= max_pages {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// POST `body` to `route` and decode the answer into `T`. Sent once: a
    /// POST whose outcome is unknown must be checked by reading, not repeated.
    pub async fn post<T: DeserializeOwned>(&self, op: Call, route: &str, body: &Value) -> Result<T, GithubError> {
        self.send(op, Method::Post, route, || self.octo.post::<_, T>(route, Some(body)))
            .await
    }

    /// Sends `body` with `method` (POST, PATCH or PUT) to `route` for its
    /// effect; the answer's body is not read (an empty one is as good as a
    /// full one).
    pub async fn write(&self, op: Call, method: Method, route: &str, body: &Value) -> Result<(), GithubError> {
        self.unread(op, method, route, Some(body)).await
    }

    /// One request whose answer's status is all that counts.
    async fn unread(&self, op: Call, method: Method, route: &str, body: Option<&Value>) -> Result<(), GithubError> {
        self.send(op, method, route, || async {
            let answer = match method {
                Method::Get => self.octo._get(route).await?,
                Method::Post => self.octo._post(route, body).await?,
                Method::Patch => self.octo._patch(route, body).await?,
                Method::Put => self.octo._put(route, body).await?,
            };
            // Octocrab's own status check, which keeps the headers.
            octocrab::map_github_error(answer).await.map(drop)
        })
        .await
    }
}

/// An error with its sources, on one line.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let t = c.to_string();
        if !s.contains(&t) {
            s.push_str(": ");
            s.push_str(&t);
        }
        cur = c.source();
    }
    // Octocrab appends backtraces to some messages; keep the first line.
    s.lines().next().unwrap_or_default().to_string()
}

/// A URL as messages show it: userinfo (`user:secret@`) hidden.
fn shown_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let authority = &rest[..rest.find('/').unwrap_or(rest.len())];
    match authority.rfind('@') {
        Some(at) => format!("{scheme}://***@{}", &rest[at + 1..]),
        None => url.to_string(),
    }
}

/// Removes the token from any text that may be shown.
pub fn redact(text: &str, token: Option<&str>) -> String {
    match token {
        Some(t) if t.len() >= 4 => text.replace(t, "***"),
        _ => text.to_string(),
    }
}

/// Runs a future to completion on a small runtime of its own.
pub fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime starts")
        .block_on(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_is_redacted_everywhere() {
        assert_eq!(
            redact("Bearer ghs_secret1 and ghs_secret1", Some("ghs_secret1")),
            "Bearer *** and ***"
        );
        assert_eq!(redact("nothing", None), "nothing");
        let s = Settings {
            api_url: "http://127.0.0.1:1".into(),
            token: Some("ghs_secret1".into()),
            timeout: Duration::from_millis(1),
            attempts: 1,
            backoff: Duration::from_millis(1),
            max_rate_wait: Duration::from_millis(1),
            deadline: Duration::from_millis(1),
        };
        assert!(!format!("{s:?}").contains("ghs_secret1"));
        assert_eq!(
            shown_url("https://x-access-token:ghs_secret1@ghe.example/api/v3"),
            "https://***@ghe.example/api/v3"
        );
        assert_eq!(shown_url("https://ghe.example/a@b"), "https://ghe.example/a@b");
        assert_eq!(shown_url("not a url"), "not a url");
    }

    #[test]
    fn a_spent_deadline_stops_the_next_call_before_it_is_sent() {
        let settings = Settings {
            api_url: "http://127.0.0.1:1".into(),
            token: None,
            timeout: Duration::from_secs(5),
            attempts: 3,
            backoff: Duration::from_millis(1),
            max_rate_wait: Duration::from_secs(1),
            deadline: Duration::ZERO,
        };
        let e = block_on(async {
            let client = Client::new(settings).unwrap();
            client
                .get::<Value>(Call::ReadPull, "/repos/o/r/pulls/1")
                .await
                .unwrap_err()
        });
        assert_eq!(
            e.to_string(),
            "gate's GitHub work ran past its deadline of 0 s while it tried to read the pull request (GET /repos/o/r/pulls/1)"
        );
        assert!(e.hint().contains("GATE_GITHUB_DEADLINE_MS"), "{}", e.hint());
    }

    #[test]
    fn rate_limits_wait_as_github_documents() {
        let secs = |d: Option<Duration>| d.map(|d| d.as_secs());
        // Secondary: retry-after when given, else at least a minute.
        let body = r#"{"message":"You have exceeded a secondary rate limit"}"#;
        assert_eq!(secs(rate_limit_wait(403, Some(7), None, None, body, 0)), Some(7));
        assert_eq!(secs(rate_limit_wait(403, None, None, None, body, 0)), Some(60));
        assert_eq!(secs(rate_limit_wait(429, None, None, None, "{}", 0)), Some(60));
        // Primary: until the reset time.
        assert_eq!(
            secs(rate_limit_wait(403, None, Some(0), Some(1_090), "{}", 1_000)),
            Some(90)
        );
        // A plain 403 (a permission) is no rate limit; nor is a 500.
        assert_eq!(
            rate_limit_wait(
                403,
                None,
                Some(4_000),
                None,
                r#"{"message":"Resource not accessible"}"#,
                0
            ),
            None
        );
        assert_eq!(rate_limit_wait(500, Some(3), None, None, body, 0), None);
    }
}
