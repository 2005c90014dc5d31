//! The one HTTP client of `gate`: octocrab against `GITHUB_API_URL`, with a
//! timeout per request and bounded retries with exponential backoff (5xx,
//! 429, rate-limited 403, timeouts, connection errors). Octocrab's own retry
//! layer is off so that the count is ours and non-idempotent requests are
//! never repeated blindly.

use std::time::Duration;

use octocrab::service::middleware::retry::RetryConfig;
use octocrab::Octocrab;
use serde::de::DeserializeOwned;

use super::error::{Call, GithubError};

pub const DEFAULT_API_URL: &str = "https://api.github.com";

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
}

impl std::fmt::Debug for Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Settings")
            .field("api_url", &self.api_url)
            .field("token", &self.token.as_ref().map(|_| "***"))
            .field("timeout", &self.timeout)
            .field("attempts", &self.attempts)
            .field("backoff", &self.backoff)
            .finish()
    }
}

fn env_ms(name: &str, default: u64) -> Duration {
    Duration::from_millis(
        std::env::var(name)
            .ok()
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(default),
    )
}

impl Settings {
    /// From `GITHUB_API_URL` and `GITHUB_TOKEN`; `GATE_GITHUB_TIMEOUT_MS`
    /// (default 15000), `GATE_GITHUB_ATTEMPTS` (4) and `GATE_GITHUB_BACKOFF_MS`
    /// (1000) tune the network behaviour.
    pub fn from_env() -> Settings {
        let api_url = std::env::var("GITHUB_API_URL")
            .ok()
            .filter(|s| !s.trim().is_empty())
            .unwrap_or_else(|| DEFAULT_API_URL.into());
        Settings {
            api_url: api_url.trim().trim_end_matches('/').to_string(),
            token: token_from_env(),
            timeout: env_ms("GATE_GITHUB_TIMEOUT_MS", 15_000),
            attempts: std::env::var("GATE_GITHUB_ATTEMPTS")
                .ok()
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(4u32)
                .clamp(1, 10),
            backoff: env_ms("GATE_GITHUB_BACKOFF_MS", 1_000),
            max_rate_wait: env_ms("GATE_GITHUB_MAX_RATE_WAIT_MS", 300_000),
        }
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

/// An answer: status and body text.
#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    pub body: String,
}

impl Response {
    pub fn ok(&self) -> bool {
        (200..300).contains(&self.status)
    }
}

/// Whether a request may be sent again when its outcome is unknown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retry {
    /// GET, PATCH, PUT with a blob sha: repeat on 5xx, 429, timeouts, connection errors.
    Idempotent,
    /// POST: sent once; the caller re-reads before trying again.
    Once,
}

pub struct Client {
    octo: Octocrab,
    settings: Settings,
}

#[derive(Clone, Copy)]
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
        let mut builder = Octocrab::builder()
            .base_uri(settings.api_url.as_str())
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
        Ok(Client { octo, settings })
    }

    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    fn redact(&self, s: &str) -> String {
        redact(s, self.settings.token.as_deref())
    }

    async fn once(
        &self,
        method: Method,
        path: &str,
        body: Option<&serde_json::Value>,
    ) -> Result<(u16, Option<Duration>, String), String> {
        let resp = match method {
            Method::Get => self.octo._get(path).await,
            Method::Post => self.octo._post(path, body).await,
            Method::Patch => self.octo._patch(path, body).await,
            Method::Put => self.octo._put(path, body).await,
        }
        .map_err(|e| error_chain(&e))?;
        let status = resp.status().as_u16();
        let header = |name: &str| {
            resp.headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<u64>().ok())
        };
        let (retry_after, remaining, reset) = (
            header("retry-after"),
            header("x-ratelimit-remaining"),
            header("x-ratelimit-reset"),
        );
        let text = self.octo.body_to_string(resp).await.map_err(|e| error_chain(&e))?;
        let limit = rate_limit_wait(status, retry_after, remaining, reset, &text, now_epoch());
        // A rate-limited 403 is retried like a 429, after the wait GitHub asks for.
        Ok((if limit.is_some() { 429 } else { status }, limit, text))
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
        eprintln!(
            "GitHub rate limit on {} {}: waiting {} s as asked ({} s waited so far)",
            method.name(),
            self.redact(path),
            wait.as_secs_f64().ceil(),
            rate_waited.as_secs()
        );
        *rate_waited += wait;
        tokio::time::sleep(wait).await;
        Ok(())
    }

    async fn send(
        &self,
        op: Call,
        method: Method,
        path: &str,
        body: Option<&serde_json::Value>,
        retry: Retry,
    ) -> Result<Response, GithubError> {
        let attempts = match retry {
            Retry::Idempotent => self.settings.attempts.max(1),
            Retry::Once => 1,
        };
        let mut attempt: u32 = 0;
        let mut rate_waited = Duration::ZERO;
        loop {
            attempt += 1;
            let outcome = tokio::time::timeout(self.settings.timeout, self.once(method, path, body)).await;
            let wait_hint = match &outcome {
                Ok(Ok((status, Some(wait), _))) if *status == 429 => {
                    self.wait_out_rate_limit(op, method, path, *wait, &mut rate_waited)
                        .await?;
                    attempt = attempt.saturating_sub(1); // the wait is GitHub's, not a failed attempt
                    continue;
                }
                Ok(Ok((status, _, text))) => {
                    let retryable = *status >= 500 || *status == 429;
                    if !retryable || attempt >= attempts {
                        return Ok(Response {
                            status: *status,
                            body: text.clone(),
                        });
                    }
                    None
                }
                Ok(Err(reason)) => {
                    if attempt >= attempts {
                        return Err(GithubError::Transport {
                            op,
                            method: method.name().into(),
                            path: self.redact(path),
                            attempts: attempt,
                            reason: self.redact(reason),
                        });
                    }
                    None
                }
                Err(_) => {
                    if attempt >= attempts {
                        return Err(GithubError::Timeout {
                            op,
                            method: method.name().into(),
                            path: self.redact(path),
                            attempts: attempt,
                        });
                    }
                    None
                }
            };
            let backoff = self.settings.backoff.saturating_mul(1 << (attempt - 1).min(6));
            let wait = wait_hint.unwrap_or(backoff).min(Duration::from_secs(30));
            tokio::time::sleep(wait).await;
        }
    }

    /// Sends and maps any non-2xx status to an error (after retries).
    pub async fn request(
        &self,
        op: Call,
        method: Method,
        path: &str,
        body: Option<&serde_json::Value>,
    ) -> Result<Response, GithubError> {
        // A POST creates something each time it lands: sent once, never retried.
        let retry = match method {
            Method::Get | Method::Patch | Method::Put => Retry::Idempotent,
            Method::Post => Retry::Once,
        };
        self.send(op, method, path, body, retry).await
    }

    /// The error for a non-2xx response.
    pub fn status_error(&self, op: Call, method: Method, path: &str, resp: &Response) -> GithubError {
        // Redacted before it is cut: a cut through the token would keep a
        // part of it that redaction no longer recognises (#15).
        let body = self.redact(&resp.body);
        let message = serde_json::from_str::<serde_json::Value>(&body)
            .ok()
            .and_then(|v| v.get("message").and_then(|m| m.as_str()).map(str::to_string))
            .unwrap_or_else(|| body.chars().take(200).collect());
        GithubError::Status {
            op,
            method: method.name().into(),
            path: self.redact(path),
            status: resp.status,
            message: self.redact(message.trim()),
        }
    }

    /// GET a JSON document; a 404 is `None`.
    pub async fn get_json_opt<T: DeserializeOwned>(&self, op: Call, path: &str) -> Result<Option<T>, GithubError> {
        let resp = self.request(op, Method::Get, path, None).await?;
        if resp.status == 404 {
            return Ok(None);
        }
        if !resp.ok() {
            return Err(self.status_error(op, Method::Get, path, &resp));
        }
        self.decode(Method::Get, path, &resp).map(Some)
    }

    /// GET a JSON document; any non-2xx is an error.
    pub async fn get_json<T: DeserializeOwned>(&self, op: Call, path: &str) -> Result<T, GithubError> {
        let resp = self.request(op, Method::Get, path, None).await?;
        if !resp.ok() {
            return Err(self.status_error(op, Method::Get, path, &resp));
        }
        self.decode(Method::Get, path, &resp)
    }

    pub fn decode<T: DeserializeOwned>(&self, method: Method, path: &str, resp: &Response) -> Result<T, GithubError> {
        serde_json::from_str(&resp.body).map_err(|e| GithubError::Decode {
            method: method.name().into(),
            path: self.redact(path),
            // serde quotes the value it could not use, which may be the token.
            reason: self.redact(&e.to_string()),
        })
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
