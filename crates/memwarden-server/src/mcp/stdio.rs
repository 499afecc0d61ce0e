//! MCP over stdio (newline-delimited JSON-RPC), behind the strict-JSON filter of every other door.

use super::{MemwardenMcp, ToolProfile};
use memwarden_engine::{Actor, Engine};
use rmcp::ServiceExt;
use std::sync::Arc;

/// Longest JSON-RPC message accepted over stdio, in bytes (the HTTP door's default body limit).
pub const STDIO_MESSAGE_BYTES_MAX: usize = crate::config::DEFAULT_BODY_BYTES_MAX;

/// Serve MCP over stdin/stdout as `actor` with the native tools until the client closes the
/// stream. Logs must go to stderr ([`crate::init_tracing`] does).
pub async fn serve_mcp_stdio(engine: Arc<Engine>, actor: Actor) -> Result<(), crate::ServeError> {
    serve_stdio(engine, actor, ToolProfile::Native).await
}

/// Serve MCP over stdin/stdout as `actor` with the tools of `profile`.
pub async fn serve_stdio(engine: Arc<Engine>, actor: Actor, profile: ToolProfile) -> Result<(), crate::ServeError> {
    serve_lines(engine, actor, profile, tokio::io::stdin(), tokio::io::stdout()).await
}

/// [`serve_stdio`] on a runtime of its own (for a synchronous `main`).
pub fn serve_stdio_blocking(engine: Arc<Engine>, actor: Actor, profile: ToolProfile) -> Result<(), crate::ServeError> {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    rt.block_on(serve_stdio(engine, actor, profile))
}

/// [`serve_lines`] with the native tools.
pub async fn serve_mcp_lines<R, W>(engine: Arc<Engine>, actor: Actor, input: R, output: W) -> Result<(), crate::ServeError>
where
    R: tokio::io::AsyncRead + Unpin + Send + 'static,
    W: tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    serve_lines(engine, actor, ToolProfile::Native, input, output).await
}

/// Serve MCP as `actor` over a newline-delimited JSON-RPC stream pair (stdio, or a pipe in
/// tests), with the strict-JSON rule of every other door: a message with a duplicate object key
/// at any depth, or longer than [`STDIO_MESSAGE_BYTES_MAX`], never reaches the MCP library (it
/// would keep the last value); a request gets a JSON-RPC `-32600` error naming only the position,
/// a notification is dropped. Everything else passes through unchanged.
pub async fn serve_lines<R, W>(engine: Arc<Engine>, actor: Actor, profile: ToolProfile, input: R, output: W) -> Result<(), crate::ServeError>
where
    R: tokio::io::AsyncRead + Unpin + Send + 'static,
    W: tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    tracing::info!(tenant = %actor.tenant(), principal = %actor.id(), tools = profile.as_str(), "MCP over stdio");
    let (to_mcp, mcp_in) = tokio::io::duplex(64 * 1024);
    let (mcp_out, from_mcp) = tokio::io::duplex(64 * 1024);
    let (refusals, refused) = tokio::sync::mpsc::channel::<Vec<u8>>(16);
    let filter = tokio::spawn(strict_lines(input, to_mcp, refusals));
    let writer = tokio::spawn(merge_output(from_mcp, refused, output));
    let served = async {
        let running = MemwardenMcp::with_profile(engine, Some(actor), profile)
            .serve((mcp_in, mcp_out))
            .await
            .map_err(|e| crate::ServeError::Mcp(e.to_string()))?;
        running.waiting().await.map_err(|e| crate::ServeError::Mcp(e.to_string()))?;
        Ok::<(), crate::ServeError>(())
    }
    .await;
    // The service is gone (its ends of both pipes with it): the writer drains what it said last.
    filter.abort();
    let written = writer.await.map_err(|e| crate::ServeError::Mcp(format!("stdio writer: {e}")))?;
    served?;
    written.map_err(|e| crate::ServeError::Mcp(format!("stdio: {e}")))
}

/// A JSON-RPC error line for a refused message (`id` null when it had none that could be read).
fn refusal_line(id: serde_json::Value, message: &str) -> Vec<u8> {
    let mut line = serde_json::json!({ "jsonrpc": "2.0", "id": id, "error": { "code": -32600, "message": message } }).to_string().into_bytes();
    line.push(b'\n');
    line
}

/// Read one line of at most `max` bytes into `line` (newline included). Returns the bytes
/// consumed (0 at end of input) and whether the line was longer than `max` (then `line` holds
/// nothing useful and the rest of it was skipped).
async fn read_line_bounded<R: tokio::io::AsyncBufRead + Unpin>(r: &mut R, line: &mut Vec<u8>, max: usize) -> std::io::Result<(usize, bool)> {
    use tokio::io::AsyncBufReadExt;
    let mut consumed = 0usize;
    let mut overflow = false;
    loop {
        let buf = r.fill_buf().await?;
        if buf.is_empty() {
            return Ok((consumed, overflow));
        }
        let (take, done) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (buf.len(), false),
        };
        if !overflow && line.len() + take <= max {
            line.extend_from_slice(&buf[..take]);
        } else {
            overflow = true;
            line.clear();
        }
        r.consume(take);
        consumed += take;
        if done {
            return Ok((consumed, overflow));
        }
    }
}

/// The input side: every message is checked before the MCP library sees it.
async fn strict_lines<R: tokio::io::AsyncRead + Unpin>(input: R, mut to_mcp: tokio::io::DuplexStream, refusals: tokio::sync::mpsc::Sender<Vec<u8>>) -> std::io::Result<()> {
    use tokio::io::AsyncWriteExt;
    let mut r = tokio::io::BufReader::new(input);
    let mut line = Vec::new();
    loop {
        line.clear();
        let (n, overflow) = read_line_bounded(&mut r, &mut line, STDIO_MESSAGE_BYTES_MAX).await?;
        if n == 0 {
            break;
        }
        if overflow {
            tracing::warn!(bytes_max = STDIO_MESSAGE_BYTES_MAX, "MCP stdio: message too long, refused");
            let msg = format!("message is longer than the limit of {STDIO_MESSAGE_BYTES_MAX} bytes");
            if refusals.send(refusal_line(serde_json::Value::Null, &msg)).await.is_err() {
                break;
            }
            continue;
        }
        let text = line.trim_ascii();
        if text.is_empty() {
            continue;
        }
        if let Err(e @ crate::strict::StrictJsonError::DuplicateKey { .. }) = crate::strict::check_no_duplicate_keys(text) {
            let id = serde_json::from_slice::<serde_json::Value>(text).ok().and_then(|v| v.get("id").cloned());
            tracing::warn!("MCP stdio: {e}; refused");
            match id {
                // A request: answer it. A notification (no id): JSON-RPC forbids a reply.
                Some(id) => {
                    if refusals.send(refusal_line(id, &format!("invalid JSON: {e}"))).await.is_err() {
                        break;
                    }
                }
                None => continue,
            }
            continue;
        }
        to_mcp.write_all(text).await?;
        to_mcp.write_all(b"\n").await?;
    }
    // End of input: the MCP service sees it and stops.
    to_mcp.shutdown().await
}

/// The output side: the MCP library's lines and the filter's refusals, whole lines only.
async fn merge_output<W: tokio::io::AsyncWrite + Unpin>(from_mcp: tokio::io::DuplexStream, mut refused: tokio::sync::mpsc::Receiver<Vec<u8>>, mut out: W) -> std::io::Result<()> {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    let mut lines = tokio::io::BufReader::new(from_mcp);
    let mut buf = Vec::new();
    let mut refusals_open = true;
    loop {
        tokio::select! {
            // `read_until` is cancel-safe: a partial line stays in `buf` for the next turn.
            n = lines.read_until(b'\n', &mut buf) => {
                if n? == 0 {
                    break;
                }
                out.write_all(&buf).await?;
                out.flush().await?;
                buf.clear();
            }
            r = refused.recv(), if refusals_open => match r {
                Some(line) => {
                    out.write_all(&line).await?;
                    out.flush().await?;
                }
                None => refusals_open = false,
            },
        }
    }
    if !buf.is_empty() {
        out.write_all(&buf).await?;
    }
    // Refusals queued just before the input ended still go out.
    while let Ok(line) = refused.try_recv() {
        out.write_all(&line).await?;
    }
    out.flush().await
}
