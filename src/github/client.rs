//! The one HTTP client of `gate`: octocrab against `GITHUB_API_URL`, with a
//! timeout per request and bounded retries with exponential backoff (5xx,
//! 429, rate-limited 403, timeouts, connection errors). Octocrab's own retry
//! layer is off so that the count is ours and non-idempotent requests are
//! never repeated blindly.

use std::time::Duration;

use octocrab::service::middleware::retry::RetryConfig;
use octocrab::Octocrab;
use serde::de::DeserializeOwned;

use super::error::{GithubError, Op};

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
        let token = std::env::var("GITHUB_TOKEN").ok().filter(|s| !s.trim().is_empty());
        Settings {
            api_url: api_url.trim().trim_end_matches('/').to_string(),
            token: token.map(|t| t.trim().to_string()),
            timeout: env_ms("GATE_GITHUB_TIMEOUT_MS", 15_000),
            attempts: std::env::var("GATE_GITHUB_ATTEMPTS")
                .ok()
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(4u32)
                .clamp(1, 10),
            backoff: env_ms("GATE_GITHUB_BACKOFF_MS", 1_000),
        }
    }
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
enum Method {
    Get,
    Post,
    Patch,
    Put,
}

impl Method {
    fn name(self) -> &'static str {
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
            message: format!("GITHUB_API_URL `{}` is not a URL", settings.api_url),
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
    ) -> Result<(u16, Option<u64>, String), String> {
        let resp = match method {
            Method::Get => self.octo._get(path).await,
            Method::Post => self.octo._post(path, body).await,
            Method::Patch => self.octo._patch(path, body).await,
            Method::Put => self.octo._put(path, body).await,
        }
        .map_err(|e| error_chain(&e))?;
        let status = resp.status().as_u16();
        let retry_after = resp
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok());
        let limited = status == 403
            && resp
                .headers()
                .get("x-ratelimit-remaining")
                .and_then(|v| v.to_str().ok())
                .is_some_and(|v| v.trim() == "0");
        let text = self.octo.body_to_string(resp).await.map_err(|e| error_chain(&e))?;
        // A rate-limited 403 is retried like a 429.
        Ok((if limited { 429 } else { status }, retry_after, text))
    }

    async fn send(
        &self,
        op: Op,
        method: Method,
        path: &str,
        body: Option<&serde_json::Value>,
        retry: Retry,
    ) -> Result<Response, GithubError> {
        let attempts = match retry {
            Retry::Idempotent => self.settings.attempts.max(1),
            Retry::Once => 1,
        };
        let mut attempt = 0;
        loop {
            attempt += 1;
            let outcome = tokio::time::timeout(self.settings.timeout, self.once(method, path, body)).await;
            let wait_hint = match &outcome {
                Ok(Ok((status, retry_after, text))) => {
                    let retryable = *status >= 500 || *status == 429;
                    if !retryable || attempt >= attempts {
                        return Ok(Response {
                            status: *status,
                            body: text.clone(),
                        });
                    }
                    retry_after.map(Duration::from_secs)
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
        op: Op,
        method: &str,
        path: &str,
        body: Option<&serde_json::Value>,
    ) -> Result<Response, GithubError> {
        let (m, retry) = match method {
            "GET" => (Method::Get, Retry::Idempotent),
            "PATCH" => (Method::Patch, Retry::Idempotent),
            "PUT" => (Method::Put, Retry::Idempotent),
            _ => (Method::Post, Retry::Once),
        };
        self.send(op, m, path, body, retry).await
    }

    /// The error for a non-2xx response.
    pub fn status_error(&self, op: Op, method: &str, path: &str, resp: &Response) -> GithubError {
        let message = serde_json::from_str::<serde_json::Value>(&resp.body)
            .ok()
            .and_then(|v| v.get("message").and_then(|m| m.as_str()).map(str::to_string))
            .unwrap_or_else(|| resp.body.chars().take(200).collect());
        GithubError::Status {
            op,
            method: method.into(),
            path: self.redact(path),
            status: resp.status,
            message: self.redact(message.trim()),
        }
    }

    /// GET a JSON document; a 404 is `None`.
    pub async fn get_json_opt<T: DeserializeOwned>(&self, op: Op, path: &str) -> Result<Option<T>, GithubError> {
        let resp = self.request(op, "GET", path, None).await?;
        if resp.status == 404 {
            return Ok(None);
        }
        if !resp.ok() {
            return Err(self.status_error(op, "GET", path, &resp));
        }
        self.decode("GET", path, &resp).map(Some)
    }

    /// GET a JSON document; any non-2xx is an error.
    pub async fn get_json<T: DeserializeOwned>(&self, op: Op, path: &str) -> Result<T, GithubError> {
        let resp = self.request(op, "GET", path, None).await?;
        if !resp.ok() {
            return Err(self.status_error(op, "GET", path, &resp));
        }
        self.decode("GET", path, &resp)
    }

    pub fn decode<T: DeserializeOwned>(&self, method: &str, path: &str, resp: &Response) -> Result<T, GithubError> {
        serde_json::from_str(&resp.body).map_err(|e| GithubError::Decode {
            method: method.into(),
            path: self.redact(path),
            reason: e.to_string(),
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
        };
        assert!(!format!("{s:?}").contains("ghs_secret1"));
    }
}
