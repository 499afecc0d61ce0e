//! MCP over stdio as one principal of a data directory: a development and test helper (the
//! `memwarden` CLI exposes the same as `memwarden mcp`), or, with `--server URL --api-key K`, a
//! stdio proxy to a running server. Logs go to stderr.

use clap::Parser;
use memwarden_core::prelude::{PrincipalId, TenantId};
use memwarden_server::mcp::ToolProfile;
use memwarden_server::{EmbedderChoice, ServeConfig};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

#[derive(Parser)]
#[command(name = "memwarden-mcp-stdio", about = "Serve memwarden as MCP over stdio, acting as one registered principal")]
struct Args {
    /// Data directory of the embedded store.
    #[arg(long, env = "MEMWARDEN_DATA", required_unless_present = "server")]
    data: Option<PathBuf>,
    /// Tenant.
    #[arg(long, env = "MEMWARDEN_TENANT", default_value = "default")]
    tenant: String,
    /// The principal every tool call acts as (must be registered).
    #[arg(long, required_unless_present = "server")]
    principal: Option<String>,
    /// Session (default: the principal's never-resetting `default` session).
    #[arg(long, env = "MEMWARDEN_SESSION", default_value = "default")]
    session: String,
    /// Embedder: minilm, hash (tests only) or none.
    #[arg(long, env = "MEMWARDEN_EMBEDDER", default_value = "minilm")]
    embedder: String,
    /// Tool profile: `native` (memwarden's tools) or `mem0` (Mem0's MCP tool names and arguments).
    #[arg(long, value_enum, default_value = "native")]
    tools: ToolProfile,
    /// Forward to a running `memwarden serve` (http://host:port) instead of opening a data
    /// directory: every message goes to its `/mcp` with `--api-key`.
    #[arg(long, conflicts_with_all = ["data", "principal"])]
    server: Option<String>,
    /// The API key for `--server`.
    #[arg(long, env = "MEMWARDEN_API_KEY")]
    api_key: Option<String>,
}

async fn run(a: Args) -> Result<(), String> {
    let embedder = match a.embedder.as_str() {
        "minilm" => EmbedderChoice::MiniLm { model_dir: None },
        "hash" => EmbedderChoice::Hash,
        "none" => EmbedderChoice::None,
        other => return Err(format!("unknown embedder {other:?} (minilm, hash, none)")),
    };
    let (Some(data), Some(principal)) = (a.data, a.principal) else {
        return Err("--data and --principal are required without --server".into());
    };
    let config = ServeConfig { data_dir: data, embedder, ..ServeConfig::default() };
    let engine = Arc::new(config.open_engine().map_err(|e| e.to_string())?);
    let tenant = TenantId::new(&a.tenant).map_err(|e| e.to_string())?;
    let principal = PrincipalId::new(&principal).map_err(|e| e.to_string())?;
    let session = memwarden_core::prelude::SessionId::new(&a.session).map_err(|e| e.to_string())?;
    let actor = engine.authenticate_session(&tenant, &principal, session).map_err(|e| e.to_string())?;
    memwarden_server::mcp::serve_stdio(engine, actor, a.tools).await.map_err(|e| e.to_string())
}

fn proxy(a: &Args) -> Option<Result<(), String>> {
    let url = a.server.as_deref()?;
    if a.tools != ToolProfile::Native {
        return Some(Err("with --server the server's mcp_tools decides the tool profile; omit --tools".into()));
    }
    let key = a.api_key.clone().unwrap_or_default();
    Some(memwarden_server::mcp::proxy::proxy_stdio(url, &key).map_err(|e| e.to_string()))
}

fn main() -> ExitCode {
    memwarden_server::init_tracing("warn");
    let args = Args::parse();
    let result = match proxy(&args) {
        Some(r) => r,
        None => tokio::runtime::Runtime::new().map_err(|e| e.to_string()).and_then(|rt| rt.block_on(run(args))),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}
