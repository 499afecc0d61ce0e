//! The MCP door (official Rust SDK, `rmcp`), with three tool profiles over the same engine calls:
//! `native` (memwarden's own tools, the default; [`native`]), `mem0` (the tool names and
//! argument schemas of Mem0's MCP server; [`mem0`]) and `graph` (the reference memory server's
//! knowledge-graph tools, kept in the provenance graph; [`graph`]). Every tool has annotations and an output
//! schema ([`schema`]); an argument error names the tool and the field's path ([`args`]). [`proxy`]
//! serves MCP over stdio in front of a running server, with an API key.
//!
//! Over stdio the acting principal is fixed when the server starts (the process was started by
//! someone who holds that principal's credentials). Over streamable HTTP (`/mcp`) every request
//! passes the same Bearer-key middleware as the REST routes, and each tool call acts as the
//! principal of the key on *that* request; nothing in the tool arguments can name another one
//! (the mem0 profile's `user_id` / `agent_id` may only name the caller).

pub mod args;
pub mod graph;
mod mem0;
mod native;
pub mod proxy;
pub mod schema;
mod sessions;
mod stdio;

pub use sessions::MCP_SESSIONS_MAX;
pub(crate) use sessions::{SESSION_HEADER, SessionOwner, SessionOwners, unknown_session_response};
pub use stdio::{STDIO_MESSAGE_BYTES_MAX, serve_lines, serve_mcp_lines, serve_mcp_stdio, serve_stdio, serve_stdio_blocking};

use crate::http::{Auth, blocking};
use crate::metrics::Metrics;
use crate::problem::ApiError;
use memwarden_engine::{Actor, Engine};
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::model::{CallToolResult, Implementation, ServerCapabilities, ServerConfig};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler, tool_handler};
use serde::Serialize;
use std::sync::Arc;

/// The streamable-HTTP MCP service type mounted at `/mcp`.
pub type McpHttpService = StreamableHttpService<MemwardenMcp, LocalSessionManager>;

/// Which tools an MCP server offers. Both profiles call the same engine operations as the same
/// authenticated principal; only the names and argument shapes differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum ToolProfile {
    /// memwarden's own tools (provenance, lineage, propose_action, grants, ...).
    #[default]
    Native,
    /// The tools of Mem0's MCP server (`add_memory {text, ...}`, `search_memories {query,
    /// filters, limit}`, `get_memories`, `get_memory`, `update_memory`, `delete_memory`,
    /// `delete_all_memories`), for clients written against it.
    Mem0,
    /// The knowledge-graph tools of the reference MCP memory server (`create_entities`,
    /// `create_relations`, `add_observations`, `delete_entities`, `delete_observations`,
    /// `delete_relations`, `read_graph`, `search_nodes`, `open_nodes`), each entity, observation
    /// and relation a memory in the provenance graph.
    Graph,
}

impl ToolProfile {
    /// The profile's name (`native`, `mem0`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Native => "native",
            Self::Mem0 => "mem0",
            Self::Graph => "graph",
        }
    }
}

impl std::str::FromStr for ToolProfile {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "native" => Ok(Self::Native),
            "mem0" => Ok(Self::Mem0),
            "graph" => Ok(Self::Graph),
            other => Err(format!("unknown MCP tool profile {other:?} (native, mem0, graph)")),
        }
    }
}

/// The MCP server: memwarden's engine as MCP tools.
#[derive(Clone)]
pub struct MemwardenMcp {
    engine: Arc<Engine>,
    fixed: Option<Actor>,
    metrics: Option<Arc<Metrics>>,
    profile: ToolProfile,
    tool_router: ToolRouter<Self>,
}

impl std::fmt::Debug for MemwardenMcp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemwardenMcp").field("fixed", &self.fixed.as_ref().map(|a| a.id().to_string())).field("profile", &self.profile).finish()
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

impl MemwardenMcp {
    /// A server with the native tools acting as `actor` for every call (stdio), or, with `None`,
    /// as the principal of each HTTP request's API key (streamable HTTP behind the auth
    /// middleware).
    pub fn new(engine: Arc<Engine>, actor: Option<Actor>) -> Self {
        Self::with_profile(engine, actor, ToolProfile::Native)
    }

    /// [`MemwardenMcp::new`] with the tools of `profile`.
    pub fn with_profile(engine: Arc<Engine>, actor: Option<Actor>, profile: ToolProfile) -> Self {
        let tool_router = match profile {
            ToolProfile::Native => Self::native_router(),
            ToolProfile::Mem0 => Self::mem0_router(),
            ToolProfile::Graph => Self::graph_router(),
        };
        Self { engine, fixed: actor, metrics: None, profile, tool_router }
    }

    pub(crate) fn with_metrics(mut self, metrics: Arc<Metrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// The tools this server offers (name, and the tool as listed).
    pub fn tools(&self) -> Vec<rmcp::model::Tool> {
        self.tool_router.list_all()
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

    /// Run `f` as the caller on the blocking pool, with the tool's parsed arguments: an
    /// unauthenticated call or an argument error is a tool error and reaches no engine call.
    async fn call<A, T, F>(&self, ctx: &RequestContext<RoleServer>, args: Result<A, ApiError>, f: F) -> Result<CallToolResult, ErrorData>
    where
        A: Send + 'static,
        T: Serialize + Send + 'static,
        F: FnOnce(&Engine, &Actor, A) -> Result<T, ApiError> + Send + 'static,
    {
        let actor = match self.actor(ctx) {
            Ok(a) => a,
            Err(e) => return Ok(tool_error(&e)),
        };
        let args = match args {
            Ok(a) => a,
            Err(e) => return Ok(tool_error(&e)),
        };
        // Over HTTP the request's server span travels in the request's extensions (the MCP
        // library serves the call on a task of its own).
        let span = ctx.extensions.get::<axum::http::request::Parts>().and_then(|p| p.extensions.get::<crate::otel::SpanCtx>()).cloned();
        let r = blocking(Arc::clone(&self.engine), self.metrics.clone(), span, move |e| f(e, &actor, args)).await;
        Ok(match r {
            Ok(v) => tool_ok(&v),
            Err(e) => tool_error(&e),
        })
    }
}

const NATIVE_INSTRUCTIONS: &str = "Governed memory. Store what you learn with add_memory, recall with search_memories / get_memory / \
     list_memories, check where a memory came from with get_lineage, erase with delete_memory, and call \
     propose_action before any consequential action; act only on `allow`.";

const MEM0_INSTRUCTIONS: &str = "Governed memory with the tools of Mem0's MCP server: add_memory, search_memories, get_memories, \
     get_memory, update_memory, delete_memory, delete_all_memories. Every call acts as the authenticated caller: \
     user_id and agent_id may only name the caller, run_id is a task tag, app_id a namespace. Each memory \
     carries its origin and integrity label, which come from the caller, never from the arguments.";

const GRAPH_INSTRUCTIONS: &str = "Governed memory as a knowledge graph, with the tools of the reference MCP memory server: \
     create_entities, create_relations, add_observations, delete_entities, delete_observations, delete_relations, \
     read_graph, search_nodes, open_nodes. Every entity, observation and relation is a memory written as the \
     authenticated caller, with its origin and integrity label; observations and relations derive from their \
     entities, so deleting an entity erases them too.";

#[tool_handler(router = self.tool_router)]
impl ServerHandler for MemwardenMcp {
    fn get_info(&self) -> ServerConfig {
        let instructions = match self.profile {
            ToolProfile::Native => NATIVE_INSTRUCTIONS,
            ToolProfile::Mem0 => MEM0_INSTRUCTIONS,
            ToolProfile::Graph => GRAPH_INSTRUCTIONS,
        };
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("memwarden", env!("CARGO_PKG_VERSION")))
            .with_instructions(instructions)
    }
}

/// The streamable-HTTP service for `/mcp` with the tools of `profile`, and a closure that cancels its sessions (at shutdown).
pub(crate) fn http_service(
    engine: Arc<Engine>,
    metrics: Arc<Metrics>,
    body_bytes_max: usize,
    allowed_hosts: &[String],
    profile: ToolProfile,
) -> (McpHttpService, Box<dyn FnOnce() + Send>) {
    let mut cfg = StreamableHttpServerConfig::default().with_max_request_body_bytes(body_bytes_max);
    if !allowed_hosts.is_empty() {
        cfg = cfg.with_allowed_hosts(allowed_hosts.iter().cloned());
    }
    let token = cfg.cancellation_token.clone();
    let server = MemwardenMcp::with_profile(engine, None, profile).with_metrics(metrics);
    let svc = StreamableHttpService::new(move || Ok(server.clone()), Arc::new(LocalSessionManager::default()), cfg);
    (svc, Box::new(move || token.cancel()))
}
