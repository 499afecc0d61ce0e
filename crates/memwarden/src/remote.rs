//! Remote mode (`--server URL`): the memory operations go over HTTP to a running
//! `memwarden serve` instead of opening the data directory.
//!
//! The API key decides who acts and in which tenant; `--as`, when given, is only checked against
//! the key's principal (`GET /v1/principals/me`) and never sent. `--session` travels as the
//! `X-Memwarden-Session` header, as it does for any HTTP client. The server's JSON answer is
//! printed as is (pretty); a problem-details answer (RFC 9457) becomes one line
//! `error: <code>: <detail>` on stderr and exit code 1, and so does a connection failure.

use super::{AddArgs, AuditCmd, Cli, Cmd, DecideArgs, print_json};
use crate::request::{HttpRoute, Method, Request};
use memwarden_engine::EngineError;
use serde_json::Value;
use std::process::ExitCode;
use std::time::Duration;

/// Largest response body read (a lineage export of a big tenant can be large).
const RESPONSE_BYTES_MAX: u64 = 256 * 1024 * 1024;

/// Longest a detail line printed from a non-JSON error body.
const DETAIL_CHARS_MAX: usize = 300;

/// Why a remote command failed: a stable code and a one-line detail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RemoteError {
    /// The server's problem code, or `invalid_input` (bad arguments), `connection` (the server
    /// could not be reached or the exchange broke), `bad_response` / `http_<status>` (an answer
    /// that is not memwarden's).
    pub code: String,
    /// What happened, on one line.
    pub detail: String,
}

impl RemoteError {
    fn new(code: &str, detail: impl std::fmt::Display) -> Self {
        Self { code: code.to_owned(), detail: one_line(&detail.to_string()) }
    }

    fn input(detail: impl std::fmt::Display) -> Self {
        Self::new("invalid_input", detail)
    }
}

impl std::fmt::Display for RemoteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code, self.detail)
    }
}

/// An argument error from the local parsers, without the local "invalid input:" prefix.
fn from_engine(e: EngineError) -> RemoteError {
    match e {
        EngineError::Invalid(m) => RemoteError::input(m),
        other => RemoteError::input(other),
    }
}

/// Collapse whitespace (newlines included) so that a detail stays on one line.
fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Waits before each retry of a call whose answer was lost (same `Idempotency-Key`).
const RETRY_DELAYS_MS: [u64; 3] = [200, 500, 1000];

/// A fresh idempotency key: 128 bits from the process's randomly seeded hasher state (unique,
/// not secret).
fn idempotency_key() -> String {
    use std::hash::{BuildHasher, Hasher};
    let half = || {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos()));
        h.finish()
    };
    format!("cli-{:016x}{:016x}", half(), half())
}

/// A client of one server, acting as the principal of one API key in one session.
pub(crate) struct Remote {
    base: String,
    key: String,
    session: String,
    agent: ureq::Agent,
}

impl Remote {
    /// A client of `server` (`http://host:port`, optionally with a path prefix).
    pub(crate) fn new(server: &str, key: &str, session: &str) -> Result<Self, RemoteError> {
        let base = server.trim().trim_end_matches('/').to_owned();
        let scheme = |s: &str| base.get(..s.len()).is_some_and(|p| p.eq_ignore_ascii_case(s));
        if scheme("https://") {
            return Err(RemoteError::input(format!(
                "--server {base}: this build speaks plain HTTP only; reach the server over http:// (loopback, a private network or an SSH tunnel)"
            )));
        }
        if !scheme("http://") || base.len() == "http://".len() {
            return Err(RemoteError::input(format!("--server must be an http://host:port URL, got {server:?}")));
        }
        let key = key.trim();
        if key.is_empty() || key.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(RemoteError::input("the API key is empty or contains whitespace"));
        }
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .max_redirects(0)
            .max_redirects_will_error(false)
            .timeout_connect(Some(Duration::from_secs(10)))
            .timeout_global(Some(Duration::from_secs(600)))
            .user_agent(format!("memwarden-cli/{}", env!("CARGO_PKG_VERSION")))
            .build()
            .into();
        Ok(Self { base, key: key.to_owned(), session: session.to_owned(), agent })
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// The request of one [`Request`].
    pub(crate) fn call(&self, route: &HttpRoute<'_>) -> Result<Value, RemoteError> {
        let method = match route.method {
            Method::Get => "GET",
            Method::Post => "POST",
            Method::Put => "PUT",
            Method::Delete => "DELETE",
        };
        self.send(method, &route.path, route.body)
    }

    /// `GET path`.
    pub(crate) fn get(&self, path: &str) -> Result<Value, RemoteError> {
        self.send("GET", path, None)
    }

    /// `POST path` with a JSON body.
    pub(crate) fn post(&self, path: &str, body: &Value) -> Result<Value, RemoteError> {
        self.send("POST", path, Some(body))
    }

    /// `POST path` without a body.
    pub(crate) fn post_empty(&self, path: &str) -> Result<Value, RemoteError> {
        self.send("POST", path, None)
    }

    /// One call. A call that changes state carries a fresh `Idempotency-Key`; a call whose
    /// answer is lost (the connection broke, 503, or the first attempt is still running) is
    /// retried up to [`RETRY_DELAYS_MS`] times with the same key, so it is applied once.
    fn send(&self, method: &str, path: &str, body: Option<&Value>) -> Result<Value, RemoteError> {
        let key = (method != "GET").then(idempotency_key);
        let mut attempt = 0;
        loop {
            let out = self.finish(self.once(method, path, body, key.as_deref()));
            match out {
                Err(e) if attempt < RETRY_DELAYS_MS.len() && matches!(e.code.as_str(), "connection" | "unavailable" | "http_503" | "idempotency_in_flight") => {
                    std::thread::sleep(Duration::from_millis(RETRY_DELAYS_MS[attempt]));
                    attempt += 1;
                }
                other => return other,
            }
        }
    }

    fn once(&self, method: &str, path: &str, body: Option<&Value>, key: Option<&str>) -> Result<ureq::http::Response<ureq::Body>, ureq::Error> {
        let auth = format!("Bearer {}", self.key);
        let with = |rq: ureq::RequestBuilder<ureq::typestate::WithBody>| {
            let rq = rq.header("Authorization", &auth).header("X-Memwarden-Session", &self.session);
            let rq = match key {
                Some(k) => rq.header("Idempotency-Key", k),
                None => rq,
            };
            match body {
                Some(b) => rq.content_type("application/json").send(b.to_string().as_bytes()),
                None => rq.send_empty(),
            }
        };
        match method {
            "POST" => with(self.agent.post(self.url(path))),
            "PUT" => with(self.agent.put(self.url(path))),
            "DELETE" => {
                let rq = self.agent.delete(self.url(path)).header("Authorization", &auth).header("X-Memwarden-Session", &self.session);
                match key {
                    Some(k) => rq.header("Idempotency-Key", k).call(),
                    None => rq.call(),
                }
            }
            _ => self.agent.get(self.url(path)).header("Authorization", &auth).header("X-Memwarden-Session", &self.session).call(),
        }
    }

    /// The answer as JSON, or the error it reports.
    fn finish(&self, r: Result<ureq::http::Response<ureq::Body>, ureq::Error>) -> Result<Value, RemoteError> {
        let mut resp = r.map_err(|e| RemoteError::new("connection", format!("{}: {e}", self.base)))?;
        let status = resp.status();
        let text = resp
            .body_mut()
            .with_config()
            .limit(RESPONSE_BYTES_MAX)
            .read_to_string()
            .map_err(|e| RemoteError::new("connection", format!("{}: reading the answer: {e}", self.base)))?;
        let parsed = if text.trim().is_empty() { Ok(Value::Null) } else { serde_json::from_str::<Value>(&text) };
        if status.is_success() {
            return parsed.map_err(|e| RemoteError::new("bad_response", format!("{} answered {status} with a body that is not JSON: {e}", self.base)));
        }
        // RFC 9457 problem details: `{"type", "title", "status", "detail", "code"}`.
        if let Ok(p) = &parsed
            && let (Some(code), Some(detail)) = (p.get("code").and_then(Value::as_str), p.get("detail").and_then(Value::as_str))
        {
            return Err(RemoteError::new(code, detail));
        }
        // Not memwarden's answer (a proxy, another service on that port, ...).
        let mut detail: String = one_line(&text).chars().take(DETAIL_CHARS_MAX).collect();
        if detail.is_empty() {
            detail = status.canonical_reason().unwrap_or("no detail").to_owned();
        }
        Err(RemoteError::new(&format!("http_{}", status.as_u16()), format!("{} answered {status}: {detail}", self.base)))
    }
}

/// Run one command against `--server`: print the answer (pretty JSON) or one error line.
pub(crate) fn run(cli: &Cli) -> ExitCode {
    match dispatch(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}

/// The API key: `--key-file`, else `--api-key` / `MEMWARDEN_API_KEY`.
pub(crate) fn api_key(cli: &Cli) -> Result<String, RemoteError> {
    if let Some(p) = &cli.key_file {
        let text = std::fs::read_to_string(p).map_err(|e| RemoteError::input(format!("--key-file {}: {e}", p.display())))?;
        return Ok(text.trim().to_owned());
    }
    cli.api_key.clone().ok_or_else(|| RemoteError::input("--server needs an API key: --key-file PATH, MEMWARDEN_API_KEY or --api-key"))
}

/// The local-only command a remote invocation names, if it is one.
fn local_only(cmd: &Cmd) -> Option<&'static str> {
    match cmd {
        Cmd::Demo { .. } => Some("demo"),
        Cmd::Init => Some("init"),
        Cmd::Principal(_) => Some("principal"),
        Cmd::Grant(_) => Some("grant"),
        Cmd::Session { .. } => Some("session"),
        Cmd::Check(_) => Some("check"),
        Cmd::Bench(_) => Some("bench"),
        Cmd::Serve(_) => Some("serve"),
        Cmd::Mcp { .. } => Some("mcp"),
        Cmd::Key(_) => Some("key"),
        Cmd::CrashWriter { .. } => Some("crash-writer"),
        Cmd::Tenant(_) => Some("tenant"),
        Cmd::Add(_)
        | Cmd::Import { .. }
        | Cmd::Derive { .. }
        | Cmd::ToolCall { .. }
        | Cmd::Attest { .. }
        | Cmd::Decide(_)
        | Cmd::Get { .. }
        | Cmd::OpenSession { .. }
        | Cmd::Revoke { .. }
        | Cmd::Elevations { .. }
        | Cmd::WithdrawElevation { .. }
        | Cmd::Poison { .. }
        | Cmd::Verify { .. }
        | Cmd::Promote { .. }
        | Cmd::Update { .. }
        | Cmd::History { .. }
        | Cmd::Erase { .. }
        | Cmd::Lineage { .. }
        | Cmd::ExportLineage { .. }
        | Cmd::Search { .. }
        | Cmd::List { .. }
        | Cmd::Feedback { .. }
        | Cmd::Audit(_) => None,
    }
}

/// The `--as` a remote-capable command was given, if any.
fn claimed_actor(cmd: &Cmd) -> Option<&str> {
    match cmd {
        Cmd::Add(AddArgs { actor, .. })
        | Cmd::Import { actor, .. }
        | Cmd::Decide(DecideArgs { actor, .. })
        | Cmd::Derive { actor, .. }
        | Cmd::ToolCall { actor, .. }
        | Cmd::Attest { actor, .. }
        | Cmd::Get { actor, .. }
        | Cmd::OpenSession { actor, .. }
        | Cmd::Revoke { actor, .. }
        | Cmd::Elevations { actor }
        | Cmd::WithdrawElevation { actor, .. }
        | Cmd::Poison { actor, .. }
        | Cmd::Verify { actor, .. }
        | Cmd::Promote { actor, .. }
        | Cmd::Update { actor, .. }
        | Cmd::History { actor, .. }
        | Cmd::Erase { actor, .. }
        | Cmd::Lineage { actor, .. }
        | Cmd::ExportLineage { actor, .. }
        | Cmd::Search { actor, .. }
        | Cmd::List { actor, .. }
        | Cmd::Feedback { actor, .. } => actor.as_deref(),
        _ => None,
    }
}

fn dispatch(cli: &Cli) -> Result<ExitCode, RemoteError> {
    if let Some(name) = local_only(&cli.cmd) {
        return Err(RemoteError::input(format!("`memwarden {name}` works on a local data directory (--data) only; drop --server (or unset MEMWARDEN_SERVER)")));
    }
    let server = cli.server.as_deref().unwrap_or_default();
    let r = Remote::new(server, &api_key(cli)?, &cli.session)?;
    // The key decides who acts; a `--as` is a claim to check, never an identity to send.
    if let Some(claimed) = claimed_actor(&cli.cmd) {
        let me = r.get("/v1/principals/me")?;
        let acting = me["principal"]["id"].as_str().unwrap_or_default();
        if claimed != acting {
            return Err(RemoteError::input(format!(
                "--as {claimed}, but the API key acts as {acting}; with --server the key decides who acts (drop --as or use {claimed}'s key)"
            )));
        }
    }
    if let Some((_, call)) = Request::of(&cli.cmd).map_err(from_engine)? {
        print_json(&r.call(&call.route())?);
        return Ok(ExitCode::SUCCESS);
    }
    let out = match &cli.cmd {
        Cmd::Import { ns, route, file, .. } => {
            let lines = crate::read_import(file).map_err(from_engine)?;
            crate::request::import(&lines, ns, route.as_deref(), &mut |body| r.post("/v1/memories", &body))?
        }
        Cmd::Audit(AuditCmd::Verify) => {
            let report = r.get("/v1/audit/verify")?;
            print_json(&report);
            if report["ok"] == Value::Bool(true) {
                return Ok(ExitCode::SUCCESS);
            }
            let problem = report["problem"].as_str().unwrap_or("no reason given");
            eprintln!("error: log does not verify: {}", one_line(problem));
            return Ok(ExitCode::from(1));
        }
        Cmd::Audit(AuditCmd::Checkpoint) => r.post_empty("/v1/audit/checkpoint")?,
        Cmd::Audit(AuditCmd::Proof { index }) => r.get(&format!("/v1/audit/proof/{index}"))?,
        other => return Err(RemoteError::input(format!("`{}` does not run against a server", local_only(other).unwrap_or("this command")))),
    };
    print_json(&out);
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::request::enc;

    #[test]
    fn encoding_and_one_line_details() {
        assert_eq!(enc("ab-9._~"), "ab-9._~");
        assert_eq!(enc("../admin/keys?x=1"), "..%2Fadmin%2Fkeys%3Fx%3D1");
        assert_eq!(enc("é"), "%C3%A9");
        assert_eq!(RemoteError::new("not_found", "memory\n  x\tnot found").to_string(), "not_found: memory x not found");
    }

    #[test]
    fn only_plain_http_urls_and_sane_keys() {
        assert!(Remote::new("http://127.0.0.1:7077/", "mw_k", "default").is_ok_and(|r| r.base == "http://127.0.0.1:7077"));
        assert_eq!(Remote::new("https://example.org", "mw_k", "default").err().unwrap().code, "invalid_input");
        assert!(Remote::new("127.0.0.1:7077", "mw_k", "default").is_err());
        assert!(Remote::new("http://127.0.0.1:7077", "mw k", "default").is_err());
        assert!(Remote::new("http://127.0.0.1:7077", " ", "default").is_err());
    }
}
