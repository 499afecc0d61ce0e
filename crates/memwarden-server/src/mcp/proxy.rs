//! MCP over stdio in front of a running `memwarden serve` (`memwarden mcp --server URL --api-key
//! K`): every JSON-RPC message read from stdin is POSTed to the server's streamable-HTTP endpoint
//! (`URL/mcp`) with `Authorization: Bearer K`, and what the server answers (JSON, or the events of
//! an SSE stream) is written to stdout, one message a line. The server authenticates every
//! message and every tool call acts as the key's principal there; this process holds no engine,
//! no data and no identity of its own. The tool profile is the server's (`mcp_tools`).
//!
//! Messages are forwarded one at a time, in order. A message the server refuses (401, 404 for an
//! unknown session, 413, ...) is answered, when it is a request, with a JSON-RPC error naming the
//! status and the server's problem detail; a refused notification is logged. At end of input the
//! MCP session is closed (`DELETE`).

use super::STDIO_MESSAGE_BYTES_MAX;
use serde_json::{Value, json};
use std::io::{BufRead, Read, Write};

/// The JSON-RPC error code of a message the server refused (implementation-defined range).
const REFUSED: i64 = -32001;

/// Where to forward to, and as whom.
#[derive(Clone)]
pub struct Remote {
    endpoint: String,
    key: String,
    agent: ureq::Agent,
    session: Option<String>,
    protocol: Option<String>,
}

impl std::fmt::Debug for Remote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key.
        f.debug_struct("Remote").field("endpoint", &self.endpoint).field("session", &self.session).finish()
    }
}

impl Remote {
    /// A server at `url` (`http://host:port`, with or without `/mcp`), called with API key `key`.
    pub fn new(url: &str, key: &str) -> Result<Self, String> {
        let url = url.trim_end_matches('/');
        if !url.starts_with("http://") {
            return Err(format!("--server must be an http:// URL (this build speaks no TLS; use a local tunnel for https): {url:?}"));
        }
        if key.trim().is_empty() {
            return Err("--api-key is empty".into());
        }
        let endpoint = if url.ends_with("/mcp") { url.to_owned() } else { format!("{url}/mcp") };
        let agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
        Ok(Self { endpoint, key: key.trim().to_owned(), agent, session: None, protocol: None })
    }

    /// Forward one message; returns the messages to write back (none for an accepted
    /// notification).
    pub fn forward(&mut self, message: &[u8]) -> Vec<Value> {
        let id = serde_json::from_slice::<Value>(message).ok().and_then(|v| v.get("id").cloned());
        let mut req = self
            .agent
            .post(&self.endpoint)
            .header("Authorization", &format!("Bearer {}", self.key))
            .header("Content-Type", "application/json")
            .header("Accept", "application/json, text/event-stream");
        if let Some(s) = &self.session {
            req = req.header("Mcp-Session-Id", s);
        }
        if let Some(p) = &self.protocol {
            req = req.header("Mcp-Protocol-Version", p);
        }
        match req.send(message) {
            Ok(resp) => self.answer(resp, id),
            Err(e) => refusal(id, &format!("memwarden server unreachable at {}: {e}", self.endpoint)),
        }
    }

    fn answer(&mut self, resp: ureq::http::Response<ureq::Body>, id: Option<Value>) -> Vec<Value> {
        let status = resp.status();
        let content_type = resp.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
        if let Some(s) = resp.headers().get("mcp-session-id").and_then(|v| v.to_str().ok()) {
            self.session = Some(s.to_owned());
        }
        let mut body = Vec::new();
        let read = resp.into_body().into_reader().take(STDIO_MESSAGE_BYTES_MAX as u64 * 4).read_to_end(&mut body);
        if let Err(e) = read {
            return refusal(id, &format!("reading the server's answer: {e}"));
        }
        if !status.is_success() {
            return refusal(id, &format!("memwarden server answered {status}: {}", problem_detail(&body)));
        }
        let messages = if content_type.starts_with("text/event-stream") { sse_messages(&body) } else { json_messages(&body) };
        for m in &messages {
            if let Some(v) = m.pointer("/result/protocolVersion").and_then(Value::as_str) {
                self.protocol = Some(v.to_owned());
            }
        }
        messages
    }

    /// Close the MCP session, if one was opened (best effort: the server forgets it anyway).
    pub fn close(&self) {
        if let Some(s) = &self.session {
            let _ = self.agent.delete(&self.endpoint).header("Authorization", &format!("Bearer {}", self.key)).header("Mcp-Session-Id", s).call();
        }
    }
}

/// The JSON-RPC error answering a refused request (`id`), or nothing for a notification.
fn refusal(id: Option<Value>, message: &str) -> Vec<Value> {
    tracing::warn!("MCP proxy: {message}");
    match id {
        Some(id) => vec![json!({"jsonrpc": "2.0", "id": id, "error": {"code": REFUSED, "message": message}})],
        None => Vec::new(),
    }
}

/// A problem's `detail` (or the body's first 200 bytes).
fn problem_detail(body: &[u8]) -> String {
    match serde_json::from_slice::<Value>(body) {
        Ok(v) => v.get("detail").and_then(Value::as_str).map(str::to_owned).unwrap_or_else(|| v.to_string()),
        Err(_) => String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned(),
    }
}

fn json_messages(body: &[u8]) -> Vec<Value> {
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Array(batch)) => batch,
        Ok(v) => vec![v],
        Err(_) => Vec::new(),
    }
}

/// The JSON messages of an SSE stream: each event's `data:` lines joined; events that are not
/// JSON (priming events, comments) are skipped.
pub fn sse_messages(body: &[u8]) -> Vec<Value> {
    let text = String::from_utf8_lossy(body);
    let mut out = Vec::new();
    let mut data = String::new();
    for line in text.lines().chain(std::iter::once("")) {
        if line.is_empty() {
            if let Ok(v) = serde_json::from_str::<Value>(&data) {
                out.push(v);
            }
            data.clear();
        } else if let Some(d) = line.strip_prefix("data:") {
            if !data.is_empty() {
                data.push('\n');
            }
            data.push_str(d.strip_prefix(' ').unwrap_or(d));
        }
    }
    out
}

/// Forward every line of `input` to `remote`, writing the answers to `output`, until the input
/// ends; then close the session. A line longer than [`STDIO_MESSAGE_BYTES_MAX`] is refused here.
pub fn proxy_lines<R: BufRead, W: Write>(remote: &mut Remote, mut input: R, mut output: W) -> std::io::Result<()> {
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = (&mut input).take(STDIO_MESSAGE_BYTES_MAX as u64 + 1).read_until(b'\n', &mut line)?;
        if n == 0 {
            break;
        }
        let answers = if line.len() > STDIO_MESSAGE_BYTES_MAX {
            skip_rest_of_line(&mut input)?;
            refusal(Some(Value::Null), &format!("message is longer than the limit of {STDIO_MESSAGE_BYTES_MAX} bytes"))
        } else if line.trim_ascii().is_empty() {
            continue;
        } else {
            remote.forward(line.trim_ascii())
        };
        for a in answers {
            serde_json::to_writer(&mut output, &a)?;
            output.write_all(b"\n")?;
        }
        output.flush()?;
    }
    remote.close();
    Ok(())
}

fn skip_rest_of_line<R: BufRead>(input: &mut R) -> std::io::Result<()> {
    loop {
        let buf = input.fill_buf()?;
        if buf.is_empty() {
            return Ok(());
        }
        match buf.iter().position(|&b| b == b'\n') {
            Some(i) => {
                input.consume(i + 1);
                return Ok(());
            }
            None => {
                let n = buf.len();
                input.consume(n);
            }
        }
    }
}

/// `memwarden mcp --server URL --api-key K`: the proxy over this process's stdin and stdout.
pub fn proxy_stdio(url: &str, key: &str) -> Result<(), crate::ServeError> {
    let mut remote = Remote::new(url, key).map_err(crate::ServeError::Mcp)?;
    tracing::info!(endpoint = %remote.endpoint, "MCP over stdio, forwarded to a memwarden server");
    proxy_lines(&mut remote, std::io::stdin().lock(), std::io::stdout().lock())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sse_events_become_messages() {
        let body = b"id: 0\nretry: 3000\ndata: \n\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n";
        assert_eq!(sse_messages(body), vec![json!({"jsonrpc": "2.0", "id": 1, "result": {}})]);
    }

    #[test]
    fn only_http_urls_and_a_key() {
        assert!(Remote::new("https://example.com", "k").is_err());
        assert!(Remote::new("http://127.0.0.1:7077", " ").is_err());
        assert_eq!(Remote::new("http://127.0.0.1:7077/", "k").map(|r| r.endpoint).ok().as_deref(), Some("http://127.0.0.1:7077/mcp"));
    }
}
