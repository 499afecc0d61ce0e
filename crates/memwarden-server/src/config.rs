//! Server configuration: defaults, then a TOML file, then `MEMWARDEN_*` environment variables,
//! then command-line options (see [`ServeArgs`]). Later sources win.

use memwarden_embed::Embedder;
use memwarden_engine::{Engine, EngineConfig, EngineError, Preset};
use serde::Deserialize;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Default listen address: loopback only.
pub const DEFAULT_ADDR: &str = "127.0.0.1:7077";
/// Default request body limit (bytes).
pub const DEFAULT_BODY_BYTES_MAX: usize = 2 * 1024 * 1024;
/// Default number of memories in one batch add.
pub const DEFAULT_BATCH_MAX: usize = 100;
/// Default per-key rate (requests per second; token-bucket refill rate).
pub const DEFAULT_RATE_PER_SEC: f64 = 50.0;
/// Default per-key burst (token-bucket capacity).
pub const DEFAULT_RATE_BURST: u32 = 100;
/// Default time to wait for in-flight engine calls at shutdown (seconds).
pub const DEFAULT_DRAIN_SECS: u64 = 30;
/// Default seconds a connection may take to send a request's headers, counted from when the
/// server waits for them (an idle keep-alive connection included).
pub const DEFAULT_HEADER_TIMEOUT_SECS: u64 = 10;
/// Default seconds a request's body may take to arrive in full.
pub const DEFAULT_BODY_TIMEOUT_SECS: u64 = 30;
/// Default number of connections one client address may hold open at once.
pub const DEFAULT_CONNECTIONS_PER_ADDRESS_MAX: usize = 256;
/// Default most requests one API key may have in flight at once (issue 35.5).
pub const DEFAULT_REQUESTS_IN_FLIGHT_PER_KEY_MAX: usize = 64;

/// Why a configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config file {path}: {error}")]
    Read {
        /// The file.
        path: String,
        /// The error.
        error: std::io::Error,
    },
    /// The file is not valid TOML for this configuration.
    #[error("config file {path}: {error}")]
    Toml {
        /// The file.
        path: String,
        /// The error.
        error: String,
    },
    /// A value (from a file, the environment or an option) is out of range or malformed.
    #[error("invalid configuration: {0}")]
    Invalid(String),
}

/// Which embedder the server's engine uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EmbedderChoice {
    /// The local all-MiniLM-L6-v2 model (loaded on first use from `model_dir`, else
    /// `$MEMWARDEN_MODEL_DIR`, else `./models/all-MiniLM-L6-v2`).
    MiniLm {
        /// Model directory.
        model_dir: Option<PathBuf>,
    },
    /// An OpenAI-compatible `/embeddings` server.
    OpenAi {
        /// Base URL (plain `http://`).
        url: String,
        /// Model name.
        model: String,
        /// Output dimensions.
        dims: usize,
        /// Optional API key.
        api_key: Option<String>,
    },
    /// Feature hashing, 384 dimensions. For tests only.
    Hash,
    /// No embedder: writes carry no embedding and search answers `search_unavailable`.
    None,
}

/// Server configuration.
///
/// TOML keys (all optional): `data_dir`, `addr`, `body_bytes_max`, `batch_max`, `rate_per_sec`,
/// `rate_burst`, `drain_secs`, `header_timeout_secs`, `body_timeout_secs`,
/// `connections_per_address_max`, `requests_in_flight_per_key_max`, `admin_token`, `mcp_allowed_hosts`, `mcp_tools` (`native`, `mem0`, `graph`), `log`, `embedder`
/// (`minilm`, `openai`, `hash`, `none`), `model_dir`, `openai_url`, `openai_model`, `openai_dims`,
/// `openai_key`, `preset`, `store`, `store_key_dir`, `otlp_endpoint`, `otlp_timeout_ms`,
/// `otlp_queue_spans_max`. Environment variables: the same names upper-cased with a `MEMWARDEN_` prefix,
/// except `data_dir`, which is `MEMWARDEN_DATA` as for the CLI (lists are comma-separated).
/// Tracing also honours OpenTelemetry's `OTEL_EXPORTER_OTLP_ENDPOINT` (below
/// `MEMWARDEN_OTLP_ENDPOINT`) and `OTEL_SDK_DISABLED=true` (no export whatever else says).
#[derive(Debug, Clone, PartialEq)]
pub struct ServeConfig {
    /// Data directory: the engine's store, `api-keys.sqlite3` and `admin.token`.
    pub data_dir: PathBuf,
    /// Listen address.
    pub addr: SocketAddr,
    /// Largest accepted request body, in bytes (larger: 413).
    pub body_bytes_max: usize,
    /// Most memories in one batch add (at most the engine's `ADD_MANY_MAX`).
    pub batch_max: usize,
    /// Per-API-key token-bucket refill rate in requests per second (0 disables rate limiting; the
    /// admin token is not limited).
    pub rate_per_sec: f64,
    /// Per-key token-bucket capacity.
    pub rate_burst: u32,
    /// Seconds to wait at shutdown for engine calls still running.
    pub drain_secs: u64,
    /// Seconds a connection may take to send a request's headers, idle keep-alive time included
    /// (`header_timeout_secs` / `MEMWARDEN_HEADER_TIMEOUT_SECS`): then it is closed.
    pub header_timeout_secs: u64,
    /// Seconds a request's body may take to arrive in full (`body_timeout_secs` /
    /// `MEMWARDEN_BODY_TIMEOUT_SECS`): then the request is answered 408 `request_timeout`.
    pub body_timeout_secs: u64,
    /// Connections one client address may hold open at once (`connections_per_address_max` /
    /// `MEMWARDEN_CONNECTIONS_PER_ADDRESS_MAX`): more are closed at accept.
    pub connections_per_address_max: usize,
    /// Requests one API key may have in flight at once (`requests_in_flight_per_key_max` /
    /// `MEMWARDEN_REQUESTS_IN_FLIGHT_PER_KEY_MAX`): more are answered 429 `too_many_in_flight`.
    pub requests_in_flight_per_key_max: usize,
    /// The admin token. None: read `<data_dir>/admin.token`, creating it (mode 0600) if absent.
    pub admin_token: Option<String>,
    /// `Host` header values accepted by the MCP endpoint (DNS-rebinding protection). Empty:
    /// loopback names only (`localhost`, `127.0.0.1`, `::1`).
    pub mcp_allowed_hosts: Vec<String>,
    /// The MCP endpoint's tool profile (`mcp_tools` / `MEMWARDEN_MCP_TOOLS` / `--mcp-tools`):
    /// `native` (the default) or `mem0` (Mem0's MCP tool names and arguments).
    pub mcp_tools: crate::mcp::ToolProfile,
    /// Tracing filter (`tracing_subscriber::EnvFilter` syntax), used by [`crate::init_tracing`].
    pub log: String,
    /// The embedder.
    pub embedder: EmbedderChoice,
    /// Which defense layers run (`preset = "full"` / `MEMWARDEN_PRESET=full`, the default; also
    /// `none`, `lifecycle`, `authority`, `lineage` for ablations). An operation that needs a
    /// layer the preset leaves off answers 409 `layer_off`.
    pub preset: Preset,
    /// A store several servers share: a PostgreSQL spec (`postgres://user@host/db?schema=NAME`
    /// or `host=... dbname=... schema=NAME`; `store` / `MEMWARDEN_STORE` / `--store`). The API
    /// keys then live in the same schema, so every server of the store shares them. None: the
    /// embedded SQLite store in `data_dir`, held by this one process.
    pub store: Option<String>,
    /// The shared store's checkpoint-signing key directory (created with a fresh key if empty;
    /// default `<data_dir>/store-key`). Every server of one store needs the same key: the
    /// schema records its public key and refuses another.
    pub store_key_dir: Option<PathBuf>,
    /// OTLP/HTTP collector base URL (`otlp_endpoint` / `MEMWARDEN_OTLP_ENDPOINT` /
    /// `OTEL_EXPORTER_OTLP_ENDPOINT`, plain `http://`): spans are POSTed as JSON to
    /// `{endpoint}/v1/traces`. None (the default): no tracing export, no per-request cost.
    pub otlp_endpoint: Option<String>,
    /// Timeout of one export POST in milliseconds (`otlp_timeout_ms`).
    pub otlp_timeout_ms: u64,
    /// Most spans waiting for export (`otlp_queue_spans_max`); more are dropped and counted.
    pub otlp_queue_spans_max: usize,
}

impl Default for ServeConfig {
    fn default() -> Self {
        Self {
            data_dir: PathBuf::from("memwarden-data"),
            addr: SocketAddr::from(([127, 0, 0, 1], 7077)),
            body_bytes_max: DEFAULT_BODY_BYTES_MAX,
            batch_max: DEFAULT_BATCH_MAX,
            rate_per_sec: DEFAULT_RATE_PER_SEC,
            rate_burst: DEFAULT_RATE_BURST,
            drain_secs: DEFAULT_DRAIN_SECS,
            header_timeout_secs: DEFAULT_HEADER_TIMEOUT_SECS,
            body_timeout_secs: DEFAULT_BODY_TIMEOUT_SECS,
            connections_per_address_max: DEFAULT_CONNECTIONS_PER_ADDRESS_MAX,
            requests_in_flight_per_key_max: DEFAULT_REQUESTS_IN_FLIGHT_PER_KEY_MAX,
            admin_token: None,
            mcp_allowed_hosts: Vec::new(),
            mcp_tools: crate::mcp::ToolProfile::Native,
            log: "info".into(),
            embedder: EmbedderChoice::MiniLm { model_dir: None },
            preset: Preset::Full,
            store: None,
            store_key_dir: None,
            otlp_endpoint: None,
            otlp_timeout_ms: crate::otel::DEFAULT_EXPORT_TIMEOUT_MS,
            otlp_queue_spans_max: crate::otel::DEFAULT_QUEUE_SPANS_MAX,
        }
    }
}

/// The file's shape: every key optional, unknown keys refused.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    data_dir: Option<PathBuf>,
    addr: Option<String>,
    body_bytes_max: Option<usize>,
    batch_max: Option<usize>,
    rate_per_sec: Option<f64>,
    rate_burst: Option<u32>,
    drain_secs: Option<u64>,
    header_timeout_secs: Option<u64>,
    body_timeout_secs: Option<u64>,
    connections_per_address_max: Option<usize>,
    requests_in_flight_per_key_max: Option<usize>,
    admin_token: Option<String>,
    mcp_allowed_hosts: Option<Vec<String>>,
    mcp_tools: Option<String>,
    log: Option<String>,
    embedder: Option<String>,
    model_dir: Option<PathBuf>,
    openai_url: Option<String>,
    openai_model: Option<String>,
    openai_dims: Option<usize>,
    openai_key: Option<String>,
    preset: Option<String>,
    store: Option<String>,
    store_key_dir: Option<PathBuf>,
    otlp_endpoint: Option<String>,
    otlp_timeout_ms: Option<u64>,
    otlp_queue_spans_max: Option<usize>,
}

fn invalid(msg: impl Into<String>) -> ConfigError {
    ConfigError::Invalid(msg.into())
}

fn parse_num<T: std::str::FromStr>(name: &str, v: &str) -> Result<T, ConfigError> {
    v.trim().parse::<T>().map_err(|_| invalid(format!("{name}={v:?} is not a valid number")))
}

impl ServeConfig {
    /// Defaults, then `file` (if given), then the process environment.
    pub fn load(file: Option<&Path>) -> Result<Self, ConfigError> {
        Self::load_with(file, &|k| std::env::var(k).ok())
    }

    /// Like [`ServeConfig::load`] with an explicit environment lookup (for tests).
    pub fn load_with(file: Option<&Path>, env: &dyn Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let mut raw = match file {
            Some(p) => {
                let text = std::fs::read_to_string(p).map_err(|error| ConfigError::Read { path: p.display().to_string(), error })?;
                Self::parse_toml(&text).map_err(|error| ConfigError::Toml { path: p.display().to_string(), error })?
            }
            None => FileConfig::default(),
        };
        let s = |k: &str| env(k).filter(|v| !v.is_empty());
        if let Some(v) = s("MEMWARDEN_DATA") {
            raw.data_dir = Some(PathBuf::from(v));
        }
        if let Some(v) = s("MEMWARDEN_ADDR") {
            raw.addr = Some(v);
        }
        if let Some(v) = s("MEMWARDEN_BODY_BYTES_MAX") {
            raw.body_bytes_max = Some(parse_num("MEMWARDEN_BODY_BYTES_MAX", &v)?);
        }
        if let Some(v) = s("MEMWARDEN_BATCH_MAX") {
            raw.batch_max = Some(parse_num("MEMWARDEN_BATCH_MAX", &v)?);
        }
        if let Some(v) = s("MEMWARDEN_RATE_PER_SEC") {
            raw.rate_per_sec = Some(parse_num("MEMWARDEN_RATE_PER_SEC", &v)?);
        }
        if let Some(v) = s("MEMWARDEN_RATE_BURST") {
            raw.rate_burst = Some(parse_num("MEMWARDEN_RATE_BURST", &v)?);
        }
        if let Some(v) = s("MEMWARDEN_DRAIN_SECS") {
            raw.drain_secs = Some(parse_num("MEMWARDEN_DRAIN_SECS", &v)?);
        }
        if let Some(v) = s("MEMWARDEN_HEADER_TIMEOUT_SECS") {
            raw.header_timeout_secs = Some(parse_num("MEMWARDEN_HEADER_TIMEOUT_SECS", &v)?);
        }
        if let Some(v) = s("MEMWARDEN_BODY_TIMEOUT_SECS") {
            raw.body_timeout_secs = Some(parse_num("MEMWARDEN_BODY_TIMEOUT_SECS", &v)?);
        }
        if let Some(v) = s("MEMWARDEN_CONNECTIONS_PER_ADDRESS_MAX") {
            raw.connections_per_address_max = Some(parse_num("MEMWARDEN_CONNECTIONS_PER_ADDRESS_MAX", &v)?);
        }
        if let Some(v) = s("MEMWARDEN_REQUESTS_IN_FLIGHT_PER_KEY_MAX") {
            raw.requests_in_flight_per_key_max = Some(parse_num("MEMWARDEN_REQUESTS_IN_FLIGHT_PER_KEY_MAX", &v)?);
        }
        if let Some(v) = s("MEMWARDEN_ADMIN_TOKEN") {
            raw.admin_token = Some(v);
        }
        if let Some(v) = s("MEMWARDEN_MCP_ALLOWED_HOSTS") {
            raw.mcp_allowed_hosts = Some(v.split(',').map(|h| h.trim().to_owned()).filter(|h| !h.is_empty()).collect());
        }
        if let Some(v) = s("MEMWARDEN_MCP_TOOLS") {
            raw.mcp_tools = Some(v.trim().to_owned());
        }
        if let Some(v) = s("MEMWARDEN_LOG") {
            raw.log = Some(v);
        }
        if let Some(v) = s("MEMWARDEN_EMBEDDER") {
            raw.embedder = Some(v);
        }
        if let Some(v) = s("MEMWARDEN_PRESET") {
            raw.preset = Some(v.trim().to_owned());
        }
        if let Some(v) = s("MEMWARDEN_MODEL_DIR") {
            raw.model_dir = Some(PathBuf::from(v));
        }
        if let Some(v) = s("MEMWARDEN_OPENAI_URL") {
            raw.openai_url = Some(v);
        }
        if let Some(v) = s("MEMWARDEN_OPENAI_MODEL") {
            raw.openai_model = Some(v);
        }
        if let Some(v) = s("MEMWARDEN_OPENAI_DIMS") {
            raw.openai_dims = Some(parse_num("MEMWARDEN_OPENAI_DIMS", &v)?);
        }
        if let Some(v) = s("MEMWARDEN_OPENAI_KEY") {
            raw.openai_key = Some(v);
        }
        if let Some(v) = s("MEMWARDEN_STORE") {
            raw.store = Some(v);
        }
        if let Some(v) = s("MEMWARDEN_STORE_KEY_DIR") {
            raw.store_key_dir = Some(PathBuf::from(v));
        }
        Self::otlp_from_env(&mut raw, &s)?;
        Self::from_raw(raw)
    }

    /// The OTLP settings from the environment: `OTEL_EXPORTER_OTLP_ENDPOINT`, then
    /// `MEMWARDEN_OTLP_*` over it; `OTEL_SDK_DISABLED=true` turns export off.
    fn otlp_from_env(raw: &mut FileConfig, s: &dyn Fn(&str) -> Option<String>) -> Result<(), ConfigError> {
        if let Some(v) = s("OTEL_EXPORTER_OTLP_ENDPOINT") {
            raw.otlp_endpoint = Some(v.trim().to_owned());
        }
        if let Some(v) = s("MEMWARDEN_OTLP_ENDPOINT") {
            raw.otlp_endpoint = Some(v.trim().to_owned());
        }
        if let Some(v) = s("MEMWARDEN_OTLP_TIMEOUT_MS") {
            raw.otlp_timeout_ms = Some(parse_num("MEMWARDEN_OTLP_TIMEOUT_MS", &v)?);
        }
        if let Some(v) = s("MEMWARDEN_OTLP_QUEUE_SPANS_MAX") {
            raw.otlp_queue_spans_max = Some(parse_num("MEMWARDEN_OTLP_QUEUE_SPANS_MAX", &v)?);
        }
        if s("OTEL_SDK_DISABLED").is_some_and(|v| v.trim().eq_ignore_ascii_case("true")) {
            raw.otlp_endpoint = None;
        }
        Ok(())
    }

    /// The exporter settings, if tracing export is on.
    pub fn otel_config(&self) -> Option<crate::otel::OtelConfig> {
        self.otlp_endpoint.as_ref().map(|endpoint| crate::otel::OtelConfig {
            endpoint: endpoint.clone(),
            export_timeout_ms: self.otlp_timeout_ms,
            queue_spans_max: self.otlp_queue_spans_max,
            policy: self.preset.as_str().to_owned(),
        })
    }

    fn parse_toml(text: &str) -> Result<FileConfig, String> {
        toml::from_str::<FileConfig>(text).map_err(|e| e.to_string())
    }

    fn from_raw(raw: FileConfig) -> Result<Self, ConfigError> {
        let d = Self::default();
        let addr = match raw.addr {
            Some(a) => a.parse::<SocketAddr>().map_err(|_| invalid(format!("addr {a:?} is not ip:port")))?,
            None => d.addr,
        };
        let embedder = match raw.embedder.as_deref().unwrap_or("minilm") {
            "minilm" => EmbedderChoice::MiniLm { model_dir: raw.model_dir },
            "hash" => EmbedderChoice::Hash,
            "none" => EmbedderChoice::None,
            "openai" => EmbedderChoice::OpenAi {
                url: raw.openai_url.ok_or_else(|| invalid("embedder openai needs openai_url (MEMWARDEN_OPENAI_URL)"))?,
                model: raw.openai_model.ok_or_else(|| invalid("embedder openai needs openai_model (MEMWARDEN_OPENAI_MODEL)"))?,
                dims: raw.openai_dims.ok_or_else(|| invalid("embedder openai needs openai_dims (MEMWARDEN_OPENAI_DIMS)"))?,
                api_key: raw.openai_key,
            },
            other => return Err(invalid(format!("unknown embedder {other:?} (minilm, openai, hash, none)"))),
        };
        let c = Self {
            data_dir: raw.data_dir.unwrap_or(d.data_dir),
            addr,
            body_bytes_max: raw.body_bytes_max.unwrap_or(d.body_bytes_max),
            batch_max: raw.batch_max.unwrap_or(d.batch_max),
            rate_per_sec: raw.rate_per_sec.unwrap_or(d.rate_per_sec),
            rate_burst: raw.rate_burst.unwrap_or(d.rate_burst),
            drain_secs: raw.drain_secs.unwrap_or(d.drain_secs),
            header_timeout_secs: raw.header_timeout_secs.unwrap_or(d.header_timeout_secs),
            body_timeout_secs: raw.body_timeout_secs.unwrap_or(d.body_timeout_secs),
            connections_per_address_max: raw.connections_per_address_max.unwrap_or(d.connections_per_address_max),
            requests_in_flight_per_key_max: raw.requests_in_flight_per_key_max.unwrap_or(d.requests_in_flight_per_key_max),
            admin_token: raw.admin_token,
            mcp_allowed_hosts: raw.mcp_allowed_hosts.unwrap_or_default(),
            mcp_tools: match raw.mcp_tools {
                Some(t) => t.parse().map_err(invalid)?,
                None => d.mcp_tools,
            },
            log: raw.log.unwrap_or(d.log),
            embedder,
            preset: match raw.preset {
                Some(p) => Preset::parse(&p).map_err(|e| invalid(e.to_string()))?,
                None => d.preset,
            },
            store: raw.store,
            store_key_dir: raw.store_key_dir,
            otlp_endpoint: raw.otlp_endpoint.filter(|e| !e.is_empty()),
            otlp_timeout_ms: raw.otlp_timeout_ms.unwrap_or(d.otlp_timeout_ms),
            otlp_queue_spans_max: raw.otlp_queue_spans_max.unwrap_or(d.otlp_queue_spans_max),
        };
        c.validate()?;
        Ok(c)
    }

    /// Check ranges.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(1..=3600).contains(&self.header_timeout_secs) || !(1..=3600).contains(&self.body_timeout_secs) {
            return Err(invalid(format!("header_timeout_secs {} and body_timeout_secs {} must be 1..=3600", self.header_timeout_secs, self.body_timeout_secs)));
        }
        if !(1..=1_000_000).contains(&self.requests_in_flight_per_key_max) {
            return Err(invalid(format!("requests_in_flight_per_key_max {} must be 1..=1000000", self.requests_in_flight_per_key_max)));
        }
        if !(1..=1_000_000).contains(&self.connections_per_address_max) {
            return Err(invalid(format!("connections_per_address_max {} must be 1..=1000000", self.connections_per_address_max)));
        }
        if self.body_bytes_max < 1024 || self.body_bytes_max > 256 * 1024 * 1024 {
            return Err(invalid(format!("body_bytes_max {} must be 1024..=268435456", self.body_bytes_max)));
        }
        if self.batch_max == 0 || self.batch_max > memwarden_engine::ADD_MANY_MAX {
            return Err(invalid(format!("batch_max {} must be 1..={}", self.batch_max, memwarden_engine::ADD_MANY_MAX)));
        }
        if !self.rate_per_sec.is_finite() || self.rate_per_sec < 0.0 {
            return Err(invalid(format!("rate_per_sec {} must be a number >= 0", self.rate_per_sec)));
        }
        if self.rate_per_sec > 0.0 && self.rate_burst == 0 {
            return Err(invalid("rate_burst must be at least 1 when rate limiting is on"));
        }
        if let Some(spec) = &self.store
            && !(spec.starts_with("postgres://") || spec.starts_with("postgresql://") || spec.contains('='))
        {
            return Err(invalid("store must be a PostgreSQL spec (postgres://... or host=... dbname=...)"));
        }
        if let Some(e) = &self.otlp_endpoint
            && !e.starts_with("http://")
        {
            return Err(invalid("otlp_endpoint must be a plain http:// URL (OTLP/HTTP JSON; no TLS client in this build)"));
        }
        if !(1..=600_000).contains(&self.otlp_timeout_ms) || !(1..=10_000_000).contains(&self.otlp_queue_spans_max) {
            return Err(invalid(format!("otlp_timeout_ms {} must be 1..=600000 and otlp_queue_spans_max {} 1..=10000000", self.otlp_timeout_ms, self.otlp_queue_spans_max)));
        }
        if let Some(t) = &self.admin_token
            && t.len() < 16
        {
            return Err(invalid("admin_token must be at least 16 characters"));
        }
        Ok(())
    }

    /// The embedder this configuration names.
    pub fn build_embedder(&self) -> Result<Option<Arc<dyn Embedder>>, ConfigError> {
        Ok(match &self.embedder {
            EmbedderChoice::MiniLm { model_dir } => Some(Arc::new(memwarden_embed::LazyMiniLm::new(model_dir.clone()))),
            EmbedderChoice::Hash => Some(Arc::new(memwarden_embed::HashEmbedder::new(384))),
            EmbedderChoice::None => None,
            EmbedderChoice::OpenAi { url, model, dims, api_key } => {
                let mut cfg = memwarden_embed::OpenAiConfig::new(url.clone(), model.clone(), *dims);
                if let Some(k) = api_key {
                    cfg = cfg.with_api_key(k.clone());
                }
                Some(Arc::new(memwarden_embed::OpenAiEmbedder::new(cfg).map_err(|e| invalid(e.to_string()))?))
            }
        })
    }

    /// The shared store's connection settings, if one is configured.
    pub fn pg_config(&self) -> Option<memwarden_store_pg::PgConfig> {
        let key_dir = self.store_key_dir.clone().unwrap_or_else(|| self.data_dir.join("store-key"));
        self.store.as_deref().map(|spec| memwarden_store_pg::PgConfig::from_spec(spec, key_dir))
    }

    /// Open the shared store, if one is configured (None: the engine opens SQLite in
    /// `data_dir`).
    pub fn open_shared_store(&self) -> Result<Option<Arc<dyn memwarden_store::Store>>, crate::ServeError> {
        match self.pg_config() {
            None => Ok(None),
            Some(pg) => {
                let store = memwarden_store_pg::PostgresStore::open(pg).map_err(EngineError::from)?;
                Ok(Some(Arc::new(store)))
            }
        }
    }

    /// Open the engine (over the shared store if one is configured, else over `data_dir`) with
    /// the configured embedder.
    pub fn open_engine(&self) -> Result<Engine, crate::ServeError> {
        let embedder = self.build_embedder()?;
        let config = EngineConfig::for_preset(self.preset).map_err(|e| crate::ServeError::Config(invalid(e.to_string())))?;
        let config = EngineConfig { embedder, ..config };
        match self.open_shared_store()? {
            Some(store) => Ok(Engine::with_store(store, config)?),
            None => Ok(Engine::open(&self.data_dir, config)?),
        }
    }
}

/// Command-line options for `memwarden serve` (flatten into the binary's clap parser). Each
/// option overrides the file and the environment.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ServeArgs {
    /// TOML configuration file.
    #[arg(long, env = "MEMWARDEN_CONFIG")]
    pub config: Option<PathBuf>,
    /// Listen address (default 127.0.0.1:7077).
    #[arg(long)]
    pub addr: Option<String>,
    /// Admin token (default: the contents of <data>/admin.token, created on first start).
    #[arg(long)]
    pub admin_token: Option<String>,
    /// Largest request body in bytes.
    #[arg(long)]
    pub body_bytes_max: Option<usize>,
    /// Most memories in one batch add.
    #[arg(long)]
    pub batch_max: Option<usize>,
    /// Per-key requests per second (0: no rate limit).
    #[arg(long)]
    pub rate_per_sec: Option<f64>,
    /// Defense layers: full (default), none, lifecycle, authority, lineage.
    #[arg(long)]
    pub preset: Option<String>,
    /// A store several servers share (PostgreSQL: postgres://user@host/db?schema=NAME).
    #[arg(long)]
    pub store: Option<String>,
    /// The shared store's signing-key directory (the same on every server of the store).
    #[arg(long)]
    pub store_key_dir: Option<PathBuf>,
    /// The MCP endpoint's tool profile: native (default) or mem0.
    #[arg(long, value_enum)]
    pub mcp_tools: Option<crate::mcp::ToolProfile>,
}

impl ServeArgs {
    /// Load the configuration (file, environment) and apply these options; `data_dir` and
    /// `embedder` come from the caller's global options when it has them.
    pub fn into_config(self) -> Result<ServeConfig, ConfigError> {
        let mut c = ServeConfig::load(self.config.as_deref())?;
        if let Some(a) = self.addr {
            c.addr = a.parse().map_err(|_| invalid(format!("addr {a:?} is not ip:port")))?;
        }
        if let Some(t) = self.admin_token {
            c.admin_token = Some(t);
        }
        if let Some(n) = self.body_bytes_max {
            c.body_bytes_max = n;
        }
        if let Some(n) = self.batch_max {
            c.batch_max = n;
        }
        if let Some(r) = self.rate_per_sec {
            c.rate_per_sec = r;
        }
        if let Some(p) = self.preset {
            c.preset = Preset::parse(&p).map_err(|e| invalid(e.to_string()))?;
        }
        if let Some(s) = self.store {
            c.store = Some(s);
        }
        if let Some(d) = self.store_key_dir {
            c.store_key_dir = Some(d);
        }
        if let Some(t) = self.mcp_tools {
            c.mcp_tools = t;
        }
        c.validate()?;
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn defaults_file_then_env() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("c.toml");
        std::fs::write(&f, "addr = \"127.0.0.1:9000\"\nbatch_max = 7\nembedder = \"hash\"\n").unwrap();
        let env = |k: &str| match k {
            "MEMWARDEN_BATCH_MAX" => Some("9".to_owned()),
            "MEMWARDEN_DATA" => Some("/tmp/x".to_owned()),
            _ => None,
        };
        let c = ServeConfig::load_with(Some(&f), &env).unwrap();
        assert_eq!(c.addr.port(), 9000);
        assert_eq!(c.batch_max, 9);
        assert_eq!(c.data_dir, PathBuf::from("/tmp/x"));
        assert_eq!(c.embedder, EmbedderChoice::Hash);
        assert_eq!(c.body_bytes_max, DEFAULT_BODY_BYTES_MAX);
        assert_eq!(ServeConfig::load_with(None, &|_| None).unwrap().addr.to_string(), DEFAULT_ADDR);
    }

    #[test]
    fn unknown_keys_and_bad_values_are_refused() {
        assert!(ServeConfig::parse_toml("trusted = true\n").is_err());
        let env = |k: &str| (k == "MEMWARDEN_BATCH_MAX").then(|| "0".to_owned());
        assert!(ServeConfig::load_with(None, &env).is_err());
        let env = |k: &str| (k == "MEMWARDEN_EMBEDDER").then(|| "openai".to_owned());
        assert!(ServeConfig::load_with(None, &env).is_err());
        let env = |k: &str| (k == "MEMWARDEN_PRESET").then(|| "paranoid".to_owned());
        assert!(ServeConfig::load_with(None, &env).is_err());
    }

    #[test]
    fn mcp_tools_from_file_and_env() {
        assert_eq!(ServeConfig::load_with(None, &|_| None).unwrap().mcp_tools, crate::mcp::ToolProfile::Native);
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("c.toml");
        std::fs::write(&f, "mcp_tools = \"mem0\"\n").unwrap();
        assert_eq!(ServeConfig::load_with(Some(&f), &|_| None).unwrap().mcp_tools, crate::mcp::ToolProfile::Mem0);
        let env = |k: &str| (k == "MEMWARDEN_MCP_TOOLS").then(|| "mem0".to_owned());
        assert_eq!(ServeConfig::load_with(None, &env).unwrap().mcp_tools, crate::mcp::ToolProfile::Mem0);
        let env = |k: &str| (k == "MEMWARDEN_MCP_TOOLS").then(|| "zep".to_owned());
        assert!(ServeConfig::load_with(None, &env).unwrap_err().to_string().contains("native, mem0"));
    }

    #[test]
    fn preset_from_file_and_env() {
        assert_eq!(ServeConfig::load_with(None, &|_| None).unwrap().preset, Preset::Full);
        assert_eq!(ServeConfig::parse_toml("preset = \"lineage\"\n").unwrap().preset, Some("lineage".into()));
        let env = |k: &str| (k == "MEMWARDEN_PRESET").then(|| "authority".to_owned());
        assert_eq!(ServeConfig::load_with(None, &env).unwrap().preset, Preset::Authority);
    }

    #[test]
    fn a_shared_store_from_file_env_and_its_key_dir() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("c.toml");
        std::fs::write(&f, "store = \"postgres://mw@db.internal/prod?schema=team_a\"\nstore_key_dir = \"/etc/memwarden/key\"\n").unwrap();
        let c = ServeConfig::load_with(Some(&f), &|_| None).unwrap();
        let pg = c.pg_config().unwrap();
        assert_eq!((pg.url.as_str(), pg.schema.as_str()), ("postgres://mw@db.internal/prod", "team_a"));
        assert_eq!(pg.key_dir, PathBuf::from("/etc/memwarden/key"));
        let env = |k: &str| match k {
            "MEMWARDEN_STORE" => Some("host=db dbname=mw".to_owned()),
            "MEMWARDEN_DATA" => Some("/var/lib/mw".to_owned()),
            _ => None,
        };
        let pg = ServeConfig::load_with(None, &env).unwrap().pg_config().unwrap();
        assert_eq!((pg.schema.as_str(), pg.key_dir.clone()), (memwarden_store_pg::DEFAULT_SCHEMA, PathBuf::from("/var/lib/mw/store-key")));
        assert!(ServeConfig::load_with(None, &|_| None).unwrap().pg_config().is_none(), "no store: SQLite in data_dir");
        let env = |k: &str| (k == "MEMWARDEN_STORE").then(|| "/var/lib/some-dir".to_owned());
        assert!(ServeConfig::load_with(None, &env).is_err(), "a store that is not a PostgreSQL spec is refused");
    }

    #[test]
    fn otlp_export_is_off_by_default_and_configured_by_file_or_env() {
        assert!(ServeConfig::load_with(None, &|_| None).unwrap().otel_config().is_none());
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("c.toml");
        std::fs::write(&f, "otlp_endpoint = \"http://collector:4318\"\notlp_timeout_ms = 250\n").unwrap();
        let c = ServeConfig::load_with(Some(&f), &|_| None).unwrap().otel_config().unwrap();
        assert_eq!((c.endpoint.as_str(), c.export_timeout_ms, c.policy.as_str()), ("http://collector:4318", 250, "full"));
        let env = |k: &str| (k == "OTEL_EXPORTER_OTLP_ENDPOINT").then(|| "http://otel:4318".to_owned());
        assert_eq!(ServeConfig::load_with(None, &env).unwrap().otlp_endpoint.as_deref(), Some("http://otel:4318"));
        let env = |k: &str| match k {
            "OTEL_EXPORTER_OTLP_ENDPOINT" => Some("http://otel:4318".to_owned()),
            "MEMWARDEN_OTLP_ENDPOINT" => Some("http://mw:4318".to_owned()),
            _ => None,
        };
        assert_eq!(ServeConfig::load_with(None, &env).unwrap().otlp_endpoint.as_deref(), Some("http://mw:4318"));
        let env = |k: &str| match k {
            "MEMWARDEN_OTLP_ENDPOINT" => Some("http://mw:4318".to_owned()),
            "OTEL_SDK_DISABLED" => Some("TRUE".to_owned()),
            _ => None,
        };
        assert!(ServeConfig::load_with(None, &env).unwrap().otel_config().is_none(), "OTEL_SDK_DISABLED wins");
        let env = |k: &str| (k == "MEMWARDEN_OTLP_ENDPOINT").then(|| "https://otel:4318".to_owned());
        assert!(ServeConfig::load_with(None, &env).is_err(), "https is refused: no TLS client");
    }
}
