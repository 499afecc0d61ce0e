//! memwarden's network doors: a JSON-over-HTTP API (with an OpenAPI document, problem-details
//! errors, Prometheus metrics and health checks) and an MCP server (stdio and streamable HTTP at
//! `/mcp`), both over one [`memwarden_engine::Engine`].
//!
//! This crate only wires the engine. The one thing it decides is *who is calling*: a request
//! authenticates with `Authorization: Bearer <API key>`; the key maps to a `(tenant, principal)`
//! registered in the engine, and the engine's record of that principal (kind, integrity, domain)
//! acts. Nothing in a body can name a tenant, a principal, an origin or a label: request types
//! refuse unknown fields, and the stored origin is always the key's principal's. Besides
//! authentication the server enforces only input limits (body size, batch size, per-key rate).
//!
//! Routes (JSON; errors are RFC 9457 problem details with a stable `code`, see [`Problem`]):
//! `POST/GET /v1/memories` (add, batch add `{"memories": [...]}`, list), `GET /v1/memories/{id}`,
//! `GET /v1/memories/{id}/lineage` (lineage view and path trust), `GET /v1/lineage/export`
//! (`?format=memwarden|prov`; the tenant's audit trail, users only), `POST /v1/search`, `POST /v1/derive`, `POST /v1/tool-calls`, `POST /v1/attestations`,
//! `POST /v1/grants`, `POST /v1/actions/decide`, `GET /v1/audit/verify`,
//! `POST /v1/audit/checkpoint`, `GET /v1/audit/proof/{index}`, `GET /v1/principals/me`; admin:
//! `POST/GET /v1/admin/principals`, `POST/GET /v1/admin/keys`, `DELETE /v1/admin/keys/{key_id}`;
//! Mem0-style aliases `/memories`, `/memories/{id}`, `/search` (tolerant bodies, identity fields
//! ignored); unauthenticated `/healthz`, `/readyz`, `/metrics` (Prometheus), `/openapi.json`
//! ([`ApiDoc`], generated from the handlers); and MCP at `/mcp` (see [`mcp`]).
//!
//! Keys are minted by an admin (the admin token, see [`keys`]) and stored hashed in
//! `<data_dir>/api-keys.sqlite3`. Engine calls run on the blocking pool and a response is sent only
//! after the engine returned, i.e. after its commit is durable; at shutdown the server stops
//! accepting connections, finishes in-flight requests and waits for running engine calls.
//!
//! ```
//! use memwarden_core::prelude::*;
//! use memwarden_engine::{Engine, EngineConfig};
//! use memwarden_server::{ServeConfig, Server};
//! use std::sync::Arc;
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = tempfile::tempdir()?;
//! let engine = Arc::new(Engine::open(dir.path(), EngineConfig::default())?);
//! let tenant = TenantId::new("acme")?;
//! engine.register_principal(Principal { id: PrincipalId::new("agent")?, tenant: tenant.clone(),
//!     kind: PrincipalKind::Agent, domain: None, allow_listed: false, public_key: None, action: None })?;
//! let config = ServeConfig {
//!     data_dir: dir.path().to_owned(),
//!     addr: "127.0.0.1:0".parse()?, // any free port
//!     ..ServeConfig::default()
//! };
//! tokio::runtime::Runtime::new()?.block_on(async {
//!     let server = Server::bind(config, engine).await?;
//!     // The token is shown once; the server keeps its SHA-256.
//!     let key = server.keys().mint(&tenant, &PrincipalId::new("agent")?, "my agent")?;
//!     assert!(key.token.starts_with("mw_"));
//!     println!("listening on {}", server.local_addr());
//!     let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
//!     let running = tokio::spawn(server.run(async move { let _ = stopped.await; }));
//!     // ... clients call POST /v1/memories with `Authorization: Bearer <key.token>` ...
//!     let _ = stop.send(());
//!     running.await??;
//!     Ok::<_, Box<dyn std::error::Error>>(())
//! })?;
//! # Ok(())
//! # }
//! ```
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used, clippy::panic))]


pub mod config;
mod conn;
pub use memwarden_api::dto;
pub mod http;
mod idempotency;
pub mod keys;
pub mod limit;
pub mod mcp;
pub mod metrics;
pub mod ops;
pub mod otel;
pub mod problem;
pub use memwarden_api::strict;

pub use config::{ConfigError, EmbedderChoice, ServeArgs, ServeConfig};
pub use http::ApiDoc;
pub use keys::{AdminToken, ApiKeys, KeyError, KeyInfo, MintedKey};
pub use mcp::{MemwardenMcp, serve_mcp_stdio};
pub use problem::{ApiError, Problem};

use memwarden_engine::{Engine, EngineError};
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Why the server could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// Bad configuration.
    #[error("{0}")]
    Config(#[from] ConfigError),
    /// The engine failed to open.
    #[error("{0}")]
    Engine(#[from] EngineError),
    /// The key store failed.
    #[error("{0}")]
    Keys(#[from] KeyError),
    /// Binding or serving failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// The MCP transport failed.
    #[error("MCP: {0}")]
    Mcp(String),
    /// The OTLP exporter could not start.
    #[error("{0}")]
    Otel(#[from] otel::OtelError),
}

/// A bound, not yet running server.
pub struct Server {
    listener: tokio::net::TcpListener,
    app: axum::Router,
    keys: Arc<ApiKeys>,
    admin: AdminToken,
    metrics: Arc<metrics::Metrics>,
    cancel_mcp: Box<dyn FnOnce() + Send>,
    drain: Duration,
    limits: conn::ConnLimits,
    /// The OTLP exporter (None: tracing export off), flushed at the end of [`Server::run`].
    telemetry: Option<Arc<otel::Telemetry>>,
    /// Held to the end of [`Server::run`], so the server's last references to the engine and the
    /// key table are released off the async runtime (see there).
    engine: Arc<Engine>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server").field("addr", &self.listener.local_addr().ok()).finish()
    }
}

impl Server {
    /// Open the key table and the admin token under `config.data_dir`, build the routes and bind
    /// `config.addr`. The engine is the caller's (see [`ServeConfig::open_engine`]).
    pub async fn bind(config: ServeConfig, engine: Arc<Engine>) -> Result<Self, ServeError> {
        config.validate()?;
        let admin = AdminToken::load_or_create(&config.data_dir, config.admin_token.as_deref())?;
        match (&admin.file, admin.created) {
            (Some(p), true) => tracing::info!(file = %p.display(), "created the admin token file (mode 0600)"),
            (Some(p), false) => tracing::info!(file = %p.display(), "admin token read from file"),
            (None, _) => tracing::info!("admin token from the configuration"),
        }
        let keys = Arc::new(match config.pg_config() {
            // The PostgreSQL client blocks (it drives its own runtime): off the async workers,
            // like every later key lookup (`AppState::run`).
            Some(pg) => tokio::task::spawn_blocking(move || ApiKeys::open_postgres(&pg.url, &pg.schema))
                .await
                .map_err(|e| ServeError::Io(std::io::Error::other(e.to_string())))??,
            None => ApiKeys::open(&config.data_dir)?,
        });
        let metrics = Arc::new(metrics::Metrics::default());
        let telemetry = config.otel_config().map(|c| otel::Telemetry::start(&c)).transpose()?;
        if let Some(e) = &config.otlp_endpoint {
            tracing::info!(endpoint = %e, "exporting traces (OTLP/HTTP JSON)");
        }
        let (mcp, cancel_mcp) = mcp::http_service(Arc::clone(&engine), Arc::clone(&metrics), config.body_bytes_max, &config.mcp_allowed_hosts, config.mcp_tools);
        let state = http::AppState(Arc::new(http::Shared {
            engine: Arc::clone(&engine),
            keys: Arc::clone(&keys),
            admin: admin.clone(),
            limiter: limit::RateLimiter::new(config.rate_per_sec, config.rate_burst),
            metrics: Arc::clone(&metrics),
            batch_max: config.batch_max,
            body_bytes_max: config.body_bytes_max,
            body_timeout: Duration::from_secs(config.body_timeout_secs),
            mcp_sessions: mcp::SessionOwners::default(),
            in_flight: limit::KeyInFlight::new(config.requests_in_flight_per_key_max),
            telemetry: telemetry.clone(),
        }));
        let app = http::router(state, mcp);
        let listener = tokio::net::TcpListener::bind(config.addr).await?;
        let limits = conn::ConnLimits { header_timeout: Duration::from_secs(config.header_timeout_secs), per_address_max: config.connections_per_address_max };
        Ok(Self { listener, app, keys, admin, metrics, cancel_mcp, drain: Duration::from_secs(config.drain_secs), limits, telemetry, engine })
    }

    /// The address actually bound (useful with port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.listener.local_addr().unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)))
    }

    /// The key table (to mint the first keys in-process, or in tests).
    pub fn keys(&self) -> &Arc<ApiKeys> {
        &self.keys
    }

    /// The admin token's source.
    pub fn admin_token(&self) -> &AdminToken {
        &self.admin
    }

    /// Serve until `shutdown` completes, then stop accepting, finish in-flight requests (MCP
    /// sessions are closed), and wait up to `drain_secs` for engine calls still running.
    ///
    /// A PostgreSQL-backed key table or store holds blocking clients whose drop drives a runtime
    /// of its own, which panics on an async worker: the server's last references to them are
    /// released on a plain thread once every request and MCP session let go of theirs (bounded
    /// by the drain period). Regression: SIGTERM made every PostgreSQL-backed server exit 101.
    pub async fn run(self, shutdown: impl Future<Output = ()> + Send + 'static) -> Result<(), ServeError> {
        let addr = self.local_addr();
        tracing::info!(%addr, "memwarden server listening");
        let Self { listener, app, keys, admin, metrics, cancel_mcp, drain, limits, telemetry, engine } = self;
        // Load the tenants' lineage graphs while the server already answers (issue 35.3): the
        // first request of a tenant then finds its graph built.
        let warm = Arc::clone(&engine);
        let warming = std::thread::Builder::new().name("memwarden-warm".into()).spawn(move || {
            let t0 = Instant::now();
            let tenants = warm.warm();
            tracing::info!(tenants, secs = t0.elapsed().as_secs_f64(), "lineage graphs loaded");
        });
        if let Err(e) = warming {
            tracing::warn!(error = %e, "no thread to load the lineage graphs on; each tenant's first request loads its own");
        }
        let signal = async move {
            shutdown.await;
            tracing::info!("shutting down: draining in-flight requests");
            cancel_mcp();
        };
        // The accept loop with bounded connections; its graceful shutdown waits for requests in
        // flight, at most the drain period.
        conn::serve(listener, app, limits, signal, drain).await;
        let deadline = Instant::now() + drain;
        while (metrics.engine_calls_in_flight() > 0 || Arc::strong_count(&keys) > 1) && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let left = metrics.engine_calls_in_flight();
        if left > 0 {
            tracing::warn!(left, "engine calls still running at the end of the drain period");
        }
        // The exporter sends what is queued (bounded by its timeout per batch) on the same thread.
        let release = std::thread::Builder::new().name("memwarden-release".into()).spawn(move || {
            drop((keys, engine, admin));
            if let Some(t) = telemetry {
                t.shutdown();
            }
        });
        match release.map(std::thread::JoinHandle::join) {
            Ok(Ok(())) => {}
            Ok(Err(_)) => tracing::error!("releasing the key table or the engine panicked"),
            Err(e) => tracing::error!(error = %e, "no thread to release the key table and the engine on"),
        }
        tracing::info!("memwarden server stopped");
        Ok(())
    }
}

/// Bind `config.addr` and serve `engine` until `shutdown` completes (the binary passes a
/// SIGINT/SIGTERM future, see [`shutdown_signal`]).
pub async fn serve(config: ServeConfig, engine: Arc<Engine>, shutdown: impl Future<Output = ()> + Send + 'static) -> Result<(), ServeError> {
    Server::bind(config, engine).await?.run(shutdown).await
}

/// Completes on SIGINT (Ctrl-C) or, on Unix, SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
}

/// Install a tracing subscriber writing to stderr (stdout stays free for MCP over stdio).
/// `RUST_LOG` wins over `filter`. Does nothing if a subscriber is already installed.
pub fn init_tracing(filter: &str) {
    use tracing_subscriber::EnvFilter;
    let f = EnvFilter::try_from_default_env().or_else(|_| EnvFilter::try_new(filter)).unwrap_or_else(|_| EnvFilter::new("info"));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let _ = tracing_subscriber::fmt().with_env_filter(f).with_ansi(ansi).with_writer(std::io::stderr).try_init();
}

/// For a synchronous caller (the `memwarden` binary): bind, print the address, and serve until
/// SIGINT/SIGTERM on a multi-threaded runtime of this crate's own.
pub fn serve_blocking(config: ServeConfig, engine: Arc<Engine>, announce: impl FnOnce(SocketAddr) + Send) -> Result<(), ServeError> {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    rt.block_on(async move {
        let server = Server::bind(config, engine).await?;
        announce(server.local_addr());
        server.run(shutdown_signal()).await
    })
}

/// For a synchronous caller: serve MCP over stdio as `actor` until the client disconnects.
pub fn serve_mcp_stdio_blocking(engine: Arc<Engine>, actor: memwarden_engine::Actor) -> Result<(), ServeError> {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    rt.block_on(serve_mcp_stdio(engine, actor))
}
