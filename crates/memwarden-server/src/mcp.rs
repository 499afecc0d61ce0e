//! The MCP door (official Rust SDK, `rmcp`): tools named close to Mem0's MCP tools.
//!
//! Over stdio the acting principal is fixed when the server starts (the process was started by
//! someone who holds that principal's credentials). Over streamable HTTP (`/mcp`) every request
//! passes the same Bearer-key middleware as the REST routes, and each tool call acts as the
//! principal of the key on *that* request; nothing in the tool arguments can name another one.

use crate::dto::{AddMemory, AttestIn, DecideIn, ElevationsIn, GetMemoryArgs, ListQuery, PrepareGrantIn, RecordGrantArgs, SearchIn, ToolCallIn, UpdateMemoryArgs, WithdrawElevationIn};
use crate::http::{Auth, blocking};
use crate::metrics::Metrics;
use crate::ops;
use crate::problem::ApiError;
use memwarden_engine::{Actor, Engine};
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, Implementation, ServerCapabilities, ServerConfig};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt, tool, tool_handler, tool_router};
use serde::Serialize;
use std::sync::Arc;

/// The streamable-HTTP MCP service type mounted at `/mcp`.
pub type McpHttpService = StreamableHttpService<MemwardenMcp, LocalSessionManager>;

/// The MCP server: memwarden's engine as MCP tools.
#[derive(Clone)]
pub struct MemwardenMcp {
    engine: Arc<Engine>,
    fixed: Option<Actor>,
    metrics: Option<Arc<Metrics>>,
    tool_router: ToolRouter<Self>,
}

impl std::fmt::Debug for MemwardenMcp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemwardenMcp").field("fixed", &self.fixed.as_ref().map(|a| a.id().to_string())).finish()
    }
}

fn tool_error(e: &ApiError) -> CallToolResult {
    CallToolResult::structured_error(serde_json::to_value(e.problem()).unwrap_or_default())
}

fn tool_ok<T: Serialize>(v: &T) -> CallToolResult {
    match serde_json::to_value(v) {
        Ok(v @ serde_json::Value::Object(_)) => CallToolResult::structured(v),
        Ok(other) => CallToolResult::structured(serde_json::json!({ "result": other })),
        Err(e) => tool_error(&ApiError::internal(e)),
    }
}

#[tool_router]
impl MemwardenMcp {
    /// A server acting as `actor` for every call (stdio), or, with `None`, as the principal of
    /// each HTTP request's API key (streamable HTTP behind the auth middleware).
    pub fn new(engine: Arc<Engine>, actor: Option<Actor>) -> Self {
        Self { engine, fixed: actor, metrics: None, tool_router: Self::tool_router() }
    }

    pub(crate) fn with_metrics(mut self, metrics: Arc<Metrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }

    fn actor(&self, ctx: &RequestContext<RoleServer>) -> Result<Actor, ApiError> {
        if let Some(a) = &self.fixed {
            return Ok(a.clone());
        }
        match ctx.extensions.get::<axum::http::request::Parts>().and_then(|p| p.extensions.get::<Auth>()) {
            Some(Auth::Key { actor, .. }) => Ok((**actor).clone()),
            Some(Auth::Admin) => Err(ApiError::forbidden("MCP tools need an API key of a principal; the admin token is not a principal")),
            None => Err(ApiError::unauthorized("no authenticated principal")),
        }
    }

    async fn call<T, F>(&self, ctx: &RequestContext<RoleServer>, f: F) -> Result<CallToolResult, ErrorData>
    where
        T: Serialize + Send + 'static,
        F: FnOnce(&Engine, &Actor) -> Result<T, ApiError> + Send + 'static,
    {
        let actor = match self.actor(ctx) {
            Ok(a) => a,
            Err(e) => return Ok(tool_error(&e)),
        };
        let r = blocking(Arc::clone(&self.engine), self.metrics.clone(), move |e| f(e, &actor)).await;
        Ok(match r {
            Ok(v) => tool_ok(&v),
            Err(e) => tool_error(&e),
        })
    }

    /// Add a memory as the authenticated principal.
    #[tool(description = "Store a memory. Its origin and integrity label come from the authenticated principal \
        (and the declared parents), never from the arguments. Returns the stored memory with its provenance.")]
    async fn add_memory(&self, Parameters(m): Parameters<AddMemory>, ctx: RequestContext<RoleServer>) -> Result<CallToolResult, ErrorData> {
        self.call(&ctx, move |e, a| ops::add(e, a, m)).await
    }

    /// Semantic search.
    #[tool(description = "Search memories of a namespace by meaning. Only memories the caller may read are \
        eligible; each hit carries its origin and label. `withheld` counts the memories a defense layer held \
        back from the results and `withheld_memories` names them (id, layer, rule, flags, similarity; never the \
        text): cite them in propose_action's context and the verdict weighs them.")]
    async fn search_memories(&self, Parameters(s): Parameters<SearchIn>, ctx: RequestContext<RoleServer>) -> Result<CallToolResult, ErrorData> {
        self.call(&ctx, move |e, a| ops::search(e, a, s)).await
    }

    /// Read one memory.
    #[tool(description = "Read one memory by id (a memory outside the caller's scope reads as not found; one in \
        its scope that a defense layer holds back is a `withheld` error naming the layer, the rule and the flags).")]
    async fn get_memory(&self, Parameters(g): Parameters<GetMemoryArgs>, ctx: RequestContext<RoleServer>) -> Result<CallToolResult, ErrorData> {
        self.call(&ctx, move |e, a| ops::get(e, a, &g.memory_id)).await
    }

    /// Update a memory (a new version).
    #[tool(description = "Replace a memory's text (its owner, or a user). The new text is stored as a new \
        version derived from the old one (never more trusted than it); the old version is kept in the memory's \
        history and no longer returned. Returns the new version.")]
    async fn update_memory(&self, Parameters(u): Parameters<UpdateMemoryArgs>, ctx: RequestContext<RoleServer>) -> Result<CallToolResult, ErrorData> {
        self.call(&ctx, move |e, a| ops::update(e, a, &u.memory_id, u.text)).await
    }

    /// A memory's versions.
    #[tool(description = "Every version of a memory the caller may read, oldest first (a `withheld` error, \
        with the rule and flags, when a defense layer holds the asked version back).")]
    async fn memory_history(&self, Parameters(g): Parameters<GetMemoryArgs>, ctx: RequestContext<RoleServer>) -> Result<CallToolResult, ErrorData> {
        self.call(&ctx, move |e, a| ops::history(e, a, &g.memory_id)).await
    }

    /// Erase a memory.
    #[tool(description = "Delete a memory for good (its owner, or a user): its text and embedding are erased, \
        together with every memory derived from it alone; memories with another live source survive. \
        Returns what was erased and what survived.")]
    async fn delete_memory(&self, Parameters(g): Parameters<GetMemoryArgs>, ctx: RequestContext<RoleServer>) -> Result<CallToolResult, ErrorData> {
        self.call(&ctx, move |e, a| ops::erase(e, a, &g.memory_id)).await
    }

    /// Report a memory poisoned.
    #[tool(description = "Report a memory poisoned (users, tools, or its owner): it and every memory derived \
        from it stop supporting actions. Returns the log index of the report.")]
    async fn report_poisoned(&self, Parameters(g): Parameters<GetMemoryArgs>, ctx: RequestContext<RoleServer>) -> Result<CallToolResult, ErrorData> {
        self.call(&ctx, move |e, a| ops::flag_poisoned(e, a, &g.memory_id)).await
    }

    /// Verify a memory.
    #[tool(description = "Verify a memory (users and allow-listed tools only). Recorded in its lineage; \
        it never raises the memory's label. Returns the log index of the verification.")]
    async fn verify_memory(&self, Parameters(g): Parameters<GetMemoryArgs>, ctx: RequestContext<RoleServer>) -> Result<CallToolResult, ErrorData> {
        self.call(&ctx, move |e, a| ops::verify_memory(e, a, &g.memory_id)).await
    }

    /// A memory's lineage.
    #[tool(description = "Where a memory came from: its parents and children the caller may read, whether \
        something untrusted, poisoned or revoked is on its path, and its path trust (0..1) with the factors.")]
    async fn get_lineage(&self, Parameters(g): Parameters<GetMemoryArgs>, ctx: RequestContext<RoleServer>) -> Result<CallToolResult, ErrorData> {
        self.call(&ctx, move |e, a| ops::lineage(e, a, &g.memory_id)).await
    }

    /// List memories.
    #[tool(description = "List the memories of a namespace the caller may read, oldest first; `withheld` names \
        (by id, with the layer, rule and flags, never the text) those of the caller's scope that a defense layer \
        holds back.")]
    async fn list_memories(&self, Parameters(q): Parameters<ListQuery>, ctx: RequestContext<RoleServer>) -> Result<CallToolResult, ErrorData> {
        self.call(&ctx, move |e, a| ops::list(e, a, &q.namespace, q.limit)).await
    }

    /// Decide an action.
    #[tool(description = "Propose a consequential action (pay, wire, send, change a setting) before running it. \
        Returns a verdict: allow, redact, reverify, ask_user (with what a user-signed grant must bind) or block. \
        Run the action only on allow.")]
    async fn propose_action(&self, Parameters(d): Parameters<DecideIn>, ctx: RequestContext<RoleServer>) -> Result<CallToolResult, ErrorData> {
        let metrics = self.metrics.clone();
        let r = self.call(&ctx, move |e, a| ops::decide(e, a, d)).await;
        if let (Some(m), Ok(res)) = (metrics, &r)
            && let Some(d) = res.structured_content.as_ref().and_then(|v| v.pointer("/verdict/decision")).and_then(|d| d.as_str())
        {
            m.observe_decision(d);
        }
        r
    }

    /// Prepare a grant for the calling user to sign.
    #[tool(description = "Users only: prepare a one-time grant for one value of one tool call (what an ask_user         verdict names). Returns the grant and the exact bytes to sign (hex); sign them with your Ed25519 key         outside this service, then call record_grant and pass {grant, signature} in propose_action's grants.")]
    async fn prepare_grant(&self, Parameters(g): Parameters<PrepareGrantIn>, ctx: RequestContext<RoleServer>) -> Result<CallToolResult, ErrorData> {
        self.call(&ctx, move |e, a| ops::prepare_grant(e, a, g)).await
    }

    /// Record a signed grant.
    #[tool(description = "Record a grant signed by a user of your tenant (its signature is verified against the         user's registered key). Returns the grant's nonce and log index.")]
    async fn record_grant(&self, Parameters(g): Parameters<RecordGrantArgs>, ctx: RequestContext<RoleServer>) -> Result<CallToolResult, ErrorData> {
        let body = serde_json::json!({"grant": g.grant, "signature": g.signature});
        self.call(&ctx, move |e, a| ops::record_grant(e, a, body)).await
    }

    /// Report a tool's output.
    #[tool(description = "Store what a tool returned to you. Its label is decided by who vouches for it: the \
        tool itself (calling as the tool) or the tool's Ed25519 signature over the call and output; a report \
        without either is no more trusted than you, your session and the arguments and inputs you passed.")]
    async fn report_tool_output(&self, Parameters(t): Parameters<ToolCallIn>, ctx: RequestContext<RoleServer>) -> Result<CallToolResult, ErrorData> {
        self.call(&ctx, move |e, a| ops::tool_call(e, a, t)).await
    }

    /// Attest a value.
    #[tool(description = "Attest a value for a key as the authenticated principal. Only attestations by trusted \
        principals (allow-listed tools, users) count toward corroboration, one per independent domain.")]
    async fn attest(&self, Parameters(a): Parameters<AttestIn>, ctx: RequestContext<RoleServer>) -> Result<CallToolResult, ErrorData> {
        self.call(&ctx, move |e, actor| ops::attest(e, actor, a)).await
    }

    /// List elevations.
    #[tool(description = "Users only: the tenant's elevations — each value corroboration lifted, the memories \
        it rests on, and whether it still counts (it stops when one of them is revoked, erased or poisoned).")]
    async fn list_elevations(&self, Parameters(_): Parameters<ElevationsIn>, ctx: RequestContext<RoleServer>) -> Result<CallToolResult, ErrorData> {
        self.call(&ctx, ops::elevations).await
    }

    /// Withdraw an elevation.
    #[tool(description = "Users only: withdraw the elevation of a key's value; it stops counting now and the \
        withdrawal is recorded in the verdict log.")]
    async fn withdraw_elevation(&self, Parameters(w): Parameters<WithdrawElevationIn>, ctx: RequestContext<RoleServer>) -> Result<CallToolResult, ErrorData> {
        self.call(&ctx, move |e, actor| ops::withdraw_elevation(e, actor, w)).await
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for MemwardenMcp {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("memwarden", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Governed memory. Store what you learn with add_memory, recall with search_memories / get_memory / \
                 list_memories, check where a memory came from with get_lineage, erase with delete_memory, and call \
                 propose_action before any consequential action; act only on `allow`.",
            )
    }
}

/// The header naming a streamable-HTTP MCP session.
pub(crate) const SESSION_HEADER: &str = "mcp-session-id";

/// Most MCP sessions a server tracks at once; past it the oldest is forgotten, and a forgotten
/// session is usable by nobody (fail closed: its client opens a new one).
pub const MCP_SESSIONS_MAX: usize = 10_000;

/// Who opened an MCP session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SessionOwner {
    /// An API key, by its id.
    Key(String),
    /// The admin token.
    Admin,
}

/// The owner of every MCP session this server opened (issue 35.5: sessions are bound to the key
/// that opened them). A session it does not know is usable by nobody.
#[derive(Debug, Default)]
pub(crate) struct SessionOwners(std::sync::Mutex<(std::collections::HashMap<String, SessionOwner>, std::collections::VecDeque<String>)>);

impl SessionOwners {
    fn table(&self) -> std::sync::MutexGuard<'_, (std::collections::HashMap<String, SessionOwner>, std::collections::VecDeque<String>)> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Whether `who` may name session `id`: only the key that opened it.
    pub(crate) fn may_use(&self, id: &str, who: &SessionOwner) -> bool {
        self.table().0.get(id).is_some_and(|o| o == who)
    }

    /// Bind a session the MCP library just opened to `who`, forgetting the oldest past
    /// [`MCP_SESSIONS_MAX`].
    pub(crate) fn bind(&self, id: &str, who: SessionOwner) {
        let mut t = self.table();
        let (owners, order) = &mut *t;
        if owners.insert(id.to_owned(), who).is_none() {
            order.push_back(id.to_owned());
        }
        while owners.len() > MCP_SESSIONS_MAX {
            match order.pop_front() {
                Some(old) => {
                    owners.remove(&old);
                }
                None => break,
            }
        }
        // Ids already unbound linger in the order until they reach the front; bound them too.
        if order.len() > 2 * MCP_SESSIONS_MAX {
            order.retain(|i| owners.contains_key(i));
        }
        debug_assert!(owners.len() <= MCP_SESSIONS_MAX);
    }

    /// Forget a session that was closed.
    pub(crate) fn unbind(&self, id: &str) {
        self.table().0.remove(id);
    }
}

/// What the MCP library answers for a session it does not know, byte for byte: a foreign session
/// gets the same answer.
pub(crate) fn unknown_session_response() -> axum::response::Response {
    use axum::response::IntoResponse;
    (axum::http::StatusCode::NOT_FOUND, "Not Found: Session not found").into_response()
}

/// The streamable-HTTP service for `/mcp`, and a closure that cancels its sessions (at shutdown).
pub(crate) fn http_service(
    engine: Arc<Engine>,
    metrics: Arc<Metrics>,
    body_bytes_max: usize,
    allowed_hosts: &[String],
) -> (McpHttpService, Box<dyn FnOnce() + Send>) {
    let mut cfg = StreamableHttpServerConfig::default().with_max_request_body_bytes(body_bytes_max);
    if !allowed_hosts.is_empty() {
        cfg = cfg.with_allowed_hosts(allowed_hosts.iter().cloned());
    }
    let token = cfg.cancellation_token.clone();
    let server = MemwardenMcp::new(engine, None).with_metrics(metrics);
    let svc = StreamableHttpService::new(move || Ok(server.clone()), Arc::new(LocalSessionManager::default()), cfg);
    (svc, Box::new(move || token.cancel()))
}

/// Longest JSON-RPC message accepted over stdio, in bytes (the HTTP door's default body limit).
pub const STDIO_MESSAGE_BYTES_MAX: usize = crate::config::DEFAULT_BODY_BYTES_MAX;

/// Serve MCP over stdin/stdout as `actor` until the client closes the stream. Logs must go to
/// stderr ([`crate::init_tracing`] does).
pub async fn serve_mcp_stdio(engine: Arc<Engine>, actor: Actor) -> Result<(), crate::ServeError> {
    serve_mcp_lines(engine, actor, tokio::io::stdin(), tokio::io::stdout()).await
}

/// Serve MCP as `actor` over a newline-delimited JSON-RPC stream pair (stdio, or a pipe in
/// tests), with the strict-JSON rule of every other door: a message with a duplicate object key
/// at any depth, or longer than [`STDIO_MESSAGE_BYTES_MAX`], never reaches the MCP library (it
/// would keep the last value); a request gets a JSON-RPC `-32600` error naming only the position,
/// a notification is dropped. Everything else passes through unchanged.
pub async fn serve_mcp_lines<R, W>(engine: Arc<Engine>, actor: Actor, input: R, output: W) -> Result<(), crate::ServeError>
where
    R: tokio::io::AsyncRead + Unpin + Send + 'static,
    W: tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    tracing::info!(tenant = %actor.tenant(), principal = %actor.id(), "MCP over stdio");
    let (to_mcp, mcp_in) = tokio::io::duplex(64 * 1024);
    let (mcp_out, from_mcp) = tokio::io::duplex(64 * 1024);
    let (refusals, refused) = tokio::sync::mpsc::channel::<Vec<u8>>(16);
    let filter = tokio::spawn(strict_lines(input, to_mcp, refusals));
    let writer = tokio::spawn(merge_output(from_mcp, refused, output));
    let served = async {
        let running = MemwardenMcp::new(engine, Some(actor))
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
