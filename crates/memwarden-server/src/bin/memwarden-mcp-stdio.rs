//! MCP over stdio as one principal of a data directory: a development and test helper (the
//! `memwarden` CLI will expose the same as `memwarden mcp`). Logs go to stderr.

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
    #[arg(long, env = "MEMWARDEN_DATA")]
    data: PathBuf,
    /// Tenant.
    #[arg(long, env = "MEMWARDEN_TENANT", default_value = "default")]
    tenant: String,
    /// The principal every tool call acts as (must be registered).
    #[arg(long)]
    principal: String,
    /// Session (default: the principal's never-resetting `default` session).
    #[arg(long, env = "MEMWARDEN_SESSION", default_value = "default")]
    session: String,
    /// Embedder: minilm, hash (tests only) or none.
    #[arg(long, env = "MEMWARDEN_EMBEDDER", default_value = "minilm")]
    embedder: String,
    /// Tool profile: `native` (memwarden's tools) or `mem0` (Mem0's MCP tool names and arguments).
    #[arg(long, value_enum, default_value = "native")]
    tools: ToolProfile,
}

async fn run(a: Args) -> Result<(), String> {
    let embedder = match a.embedder.as_str() {
        "minilm" => EmbedderChoice::MiniLm { model_dir: None },
        "hash" => EmbedderChoice::Hash,
        "none" => EmbedderChoice::None,
        other => return Err(format!("unknown embedder {other:?} (minilm, hash, none)")),
    };
    let config = ServeConfig { data_dir: a.data, embedder, ..ServeConfig::default() };
    let engine = Arc::new(config.open_engine().map_err(|e| e.to_string())?);
    let tenant = TenantId::new(&a.tenant).map_err(|e| e.to_string())?;
    let principal = PrincipalId::new(&a.principal).map_err(|e| e.to_string())?;
    let session = memwarden_core::prelude::SessionId::new(&a.session).map_err(|e| e.to_string())?;
    let actor = engine.authenticate_session(&tenant, &principal, session).map_err(|e| e.to_string())?;
    memwarden_server::mcp::serve_stdio(engine, actor, a.tools).await.map_err(|e| e.to_string())
}

#[tokio::main]
async fn main() -> ExitCode {
    memwarden_server::init_tracing("warn");
    match run(Args::parse()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}
