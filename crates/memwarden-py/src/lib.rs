//! memwarden's Python bindings: the native half of the `memwarden` Python package
//! (`memwarden._native`, built by maturin from `python/pyproject.toml`).
//!
//! The embedded engine is driven through the same operations and wire types as the HTTP and
//! MCP doors ([`memwarden_server::ops`] with the DTOs of [`memwarden_server::dto`]): Python sends
//! an operation name and a JSON body shaped exactly like the HTTP request body, and gets back the
//! JSON the HTTP API would answer. So every door shares one set of request and response shapes
//! and one set of stable error codes ([`ApiError`]); an error reaches Python as `NativeError`
//! with `(code, status, detail, problem)` (the problem-details JSON, as the HTTP API answers).
//!
//! Identity: an [`Actor`] is made once, by [`NativeEngine::actor`], from the engine's own record
//! of a registered principal; a body can never name another one (the request types refuse
//! unknown fields such as `principal`, `origin` or `trusted`). The embedded process owns its
//! data directory, so, as with the CLI's `--as`, it is the root of trust that picks the
//! principal; against a server the API key decides (the Python client's remote mode).
//!
//! Every engine call runs with the GIL released ([`Python::detach`]), so other Python threads
//! run while the engine embeds, searches or commits.

use memwarden_core::authority::grant::SignedGrant;
use memwarden_core::prelude::*;
use memwarden_embed::Embedder;
use memwarden_engine::keys::{GrantSpec, generate_key, load_user_key, mint_grant, save_user_key};
use memwarden_engine::{Actor, Engine, EngineConfig, EngineError, Preset};
use memwarden_server::ApiError;
use memwarden_server::dto::*;
use memwarden_server::ops;
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::path::PathBuf;
use std::sync::Arc;

create_exception!(
    _native,
    NativeError,
    PyException,
    "An error from the engine: args are (code, status, detail, problem), problem being the problem-details JSON text (it carries `withheld`)."
);

/// Longest JSON body accepted from Python, in bytes (the server's default body limit).
pub const BODY_BYTES_MAX: usize = memwarden_server::config::DEFAULT_BODY_BYTES_MAX;
/// Most texts one `embed` call takes.
pub const EMBED_TEXTS_MAX: usize = 1024;

fn raise(e: &ApiError) -> PyErr {
    NativeError::new_err((e.code, e.status.as_u16(), e.detail.clone(), e.problem_json().to_string()))
}

fn engine_err(e: EngineError) -> PyErr {
    raise(&ApiError::from(e))
}

fn invalid(msg: impl Into<String>) -> PyErr {
    raise(&ApiError::invalid(msg))
}

fn de<T: DeserializeOwned>(v: Value, what: &str) -> Result<T, ApiError> {
    serde_json::from_value(v).map_err(|e| ApiError::invalid(format!("invalid {what} body: {e}")))
}

/// Take a string field out of a JSON object body (the path parameters of the HTTP routes).
fn take_str(body: &mut Value, field: &str) -> Result<String, ApiError> {
    match body.as_object_mut().and_then(|o| o.remove(field)) {
        Some(Value::String(s)) => Ok(s),
        Some(_) => Err(ApiError::invalid(format!("{field} must be a string"))),
        None => Err(ApiError::invalid(format!("{field} is required"))),
    }
}

fn take_u64(body: &mut Value, field: &str) -> Result<u64, ApiError> {
    match body.as_object_mut().and_then(|o| o.remove(field)) {
        Some(v) => v.as_u64().ok_or_else(|| ApiError::invalid(format!("{field} must be a non-negative integer"))),
        None => Err(ApiError::invalid(format!("{field} is required"))),
    }
}

fn to_json<T: serde::Serialize>(t: &T) -> Result<Value, ApiError> {
    serde_json::to_value(t).map_err(ApiError::internal)
}

/// Every operation the Python package calls, by the name it uses. The body of each is the body of
/// the matching HTTP route, with the route's path parameters (`id`, `index`) and query
/// parameters (`namespace`, `limit`, `cursor`, `format`) as fields.
pub const OPERATIONS: [&str; 25] = [
    "add", "add_many", "list", "get", "update", "history", "erase", "revoke", "promote", "lineage", "export_lineage", "search", "feedback",
    "derive", "tool_call", "attest", "elevations", "withdraw_elevation", "grant", "decide", "verify", "checkpoint", "proof", "me", "open_session",
];

/// Run one operation as `actor`: the body is the HTTP body (path and query parameters as fields).
fn dispatch(engine: &Engine, actor: &Actor, op: &str, mut body: Value) -> Result<Value, ApiError> {
    match op {
        "add" => to_json(&ops::add(engine, actor, de::<AddMemory>(body, "add")?)?),
        "add_many" => {
            let many = de::<AddMany>(body, "add_many")?;
            to_json(&ops::add_many(engine, actor, many.memories, memwarden_server::config::DEFAULT_BATCH_MAX)?)
        }
        "list" => {
            let q = de::<ListQuery>(body, "list")?;
            to_json(&ops::list(engine, actor, &q.namespace, q.limit, q.cursor.as_deref())?)
        }
        "get" => to_json(&ops::get(engine, actor, &take_str(&mut body, "id")?)?),
        "update" => {
            let id = take_str(&mut body, "id")?;
            let u = de::<UpdateIn>(body, "update")?;
            to_json(&ops::update(engine, actor, &id, u.content)?)
        }
        "history" => {
            let id = take_str(&mut body, "id")?;
            let q = de::<PageQuery>(body, "history")?;
            to_json(&ops::history(engine, actor, &id, q.limit, q.cursor.as_deref())?)
        }
        "erase" => to_json(&ops::erase(engine, actor, &take_str(&mut body, "id")?)?),
        "revoke" => {
            let id = take_str(&mut body, "id")?;
            to_json(&ops::revoke(engine, actor, &id, de::<RevokeIn>(body, "revoke")?)?)
        }
        "promote" => {
            let id = take_str(&mut body, "id")?;
            to_json(&ops::promote(engine, actor, &id, de::<PromoteIn>(body, "promote")?)?)
        }
        "lineage" => to_json(&ops::lineage(engine, actor, &take_str(&mut body, "id")?)?),
        "export_lineage" => {
            let q = de::<ExportQuery>(body, "export_lineage")?;
            ops::export_lineage(engine, actor, q.format)
        }
        "search" => to_json(&ops::search(engine, actor, de::<SearchIn>(body, "search")?)?),
        "feedback" => to_json(&ops::feedback(engine, actor, de::<FeedbackIn>(body, "feedback")?)?),
        "derive" => to_json(&ops::derive(engine, actor, de::<DeriveIn>(body, "derive")?)?),
        "tool_call" => to_json(&ops::tool_call(engine, actor, de::<ToolCallIn>(body, "tool_call")?)?),
        "attest" => to_json(&ops::attest(engine, actor, de::<AttestIn>(body, "attest")?)?),
        "elevations" => {
            let q = de::<PageQuery>(body, "elevations")?;
            to_json(&ops::elevations(engine, actor, q.limit, q.cursor.as_deref())?)
        }
        "withdraw_elevation" => to_json(&ops::withdraw_elevation(engine, actor, de::<WithdrawElevationIn>(body, "withdraw_elevation")?)?),
        "grant" => to_json(&ops::record_grant(engine, actor, body)?),
        "decide" => to_json(&ops::decide(engine, actor, de::<DecideIn>(body, "decide")?)?),
        "verify" => to_json(&ops::verify(engine, Some(actor.tenant()))?),
        "checkpoint" => to_json(&ops::checkpoint(engine, Some(actor))?),
        "proof" => {
            let index = take_u64(&mut body, "index")?;
            to_json(&ops::proof(engine, Some(actor), index)?)
        }
        "me" => to_json(&MeOut { principal: ops::principal_out(actor.principal()), key_id: None, store: engine.store_id().to_owned() }),
        "open_session" => to_json(&ops::open_session(engine, actor, de::<SessionIn>(body, "open_session")?)?),
        other => Err(ApiError::invalid(format!("unknown operation {other:?}; one of {}", OPERATIONS.join(", ")))),
    }
}

fn parse_body(body: &str) -> Result<Value, ApiError> {
    if body.len() > BODY_BYTES_MAX {
        return Err(ApiError::invalid(format!("request body is larger than the limit of {BODY_BYTES_MAX} bytes")));
    }
    if body.trim().is_empty() {
        return Ok(Value::Object(Default::default()));
    }
    serde_json::from_str(body).map_err(|e| ApiError::invalid(format!("invalid JSON body: {e}")))
}

fn build_embedder(embedder: &str, model_dir: Option<PathBuf>) -> Result<Option<Arc<dyn Embedder>>, ApiError> {
    Ok(match embedder {
        "minilm" => {
            let dir = memwarden_embed::resolve_model_dir(model_dir.as_deref()).map_err(|e| ApiError::invalid(e.0))?;
            let model = memwarden_embed::MiniLmEmbedder::load(&dir).map_err(|e| ApiError::invalid(e.0))?;
            Some(Arc::new(model))
        }
        "hash" => Some(Arc::new(memwarden_embed::HashEmbedder::new(384))),
        "none" => None,
        other => return Err(ApiError::invalid(format!("unknown embedder {other:?} (minilm, hash, none)"))),
    })
}

/// The embedded engine over one data directory.
#[pyclass(frozen, module = "memwarden._native")]
pub struct NativeEngine {
    engine: Arc<Engine>,
    embedder: Option<Arc<dyn Embedder>>,
    data_dir: PathBuf,
}

#[pymethods]
impl NativeEngine {
    /// Open (creating if needed) the store in `path` with the layers of `preset` (`full`,
    /// `none`, `lifecycle`, `authority`, `lineage`) and the embedder `embedder` (`minilm`, the
    /// local all-MiniLM-L6-v2 loaded now from `model_dir`, else `$MEMWARDEN_MODEL_DIR`, else
    /// `./models/all-MiniLM-L6-v2`; `hash`, for tests only; `none`: no search).
    /// `query_cache_entries`: query embeddings kept for reuse (None: the engine's default; 0
    /// turns the cache off, as the benchmark does so that every search runs the model).
    #[staticmethod]
    #[pyo3(signature = (path, preset = "full", embedder = "minilm", model_dir = None, query_cache_entries = None))]
    fn open(py: Python<'_>, path: PathBuf, preset: &str, embedder: &str, model_dir: Option<PathBuf>, query_cache_entries: Option<usize>) -> PyResult<Self> {
        memwarden_server::init_tracing("warn");
        let preset = Preset::parse(preset).map_err(engine_err)?;
        let embedder_name = embedder.to_owned();
        py.detach(move || {
            let embedder = build_embedder(&embedder_name, model_dir).map_err(|e| raise(&e))?;
            let mut config = EngineConfig::for_preset(preset).map_err(engine_err)?;
            if let Some(n) = query_cache_entries {
                config.query_cache_entries = n.min(memwarden_engine::QUERY_CACHE_ENTRIES_MAX);
            }
            let engine = Engine::open(&path, EngineConfig { embedder: embedder.clone(), ..config }).map_err(engine_err)?;
            Ok(Self { engine: Arc::new(engine), embedder, data_dir: path })
        })
    }

    /// Register a principal (body: the admin route's `RegisterPrincipalIn`). A user registered
    /// without a `public_key` gets a fresh Ed25519 signing key, saved (mode 0600) under
    /// `<data>/user-keys/<tenant>/<user>.ed25519` as the CLI does. Returns the principal's JSON.
    fn register_principal(&self, py: Python<'_>, body: &str) -> PyResult<String> {
        let engine = Arc::clone(&self.engine);
        let dir = self.data_dir.clone();
        let body = body.to_owned();
        py.detach(move || -> Result<String, ApiError> {
            let mut p: RegisterPrincipalIn = de(parse_body(&body)?, "register_principal")?;
            let mut key = None;
            if p.kind == PrincipalKindName::User && p.public_key.is_none() {
                let k = generate_key().map_err(ApiError::from)?;
                p.public_key = Some(hex::encode(k.verifying_key().to_bytes()));
                key = Some(k);
            }
            let (tenant, id) = (TenantId::new(&p.tenant)?, PrincipalId::new(&p.id)?);
            let out = ops::register_principal(&engine, p)?;
            if let Some(k) = key {
                save_user_key(&dir, &tenant, &id, &k).map_err(ApiError::from)?;
            }
            serde_json::to_string(&out).map_err(ApiError::internal)
        })
        .map_err(|e| raise(&e))
    }

    /// A registered principal's record as JSON, or None.
    fn principal(&self, py: Python<'_>, tenant: &str, id: &str) -> PyResult<Option<String>> {
        let engine = Arc::clone(&self.engine);
        let (tenant, id) = (tenant.to_owned(), id.to_owned());
        py.detach(move || -> Result<Option<String>, ApiError> {
            let p = engine.store().principal(&TenantId::new(&tenant)?, &PrincipalId::new(&id)?).map_err(ApiError::internal)?;
            p.map(|p| serde_json::to_string(&ops::principal_out(&p)).map_err(ApiError::internal)).transpose()
        })
        .map_err(|e| raise(&e))
    }

    /// Authenticate a registered principal of `tenant` in `session`: the engine looks it up in
    /// its own records (an unknown principal is `not_found`).
    #[pyo3(signature = (tenant, principal, session = "default"))]
    fn actor(&self, py: Python<'_>, tenant: &str, principal: &str, session: &str) -> PyResult<NativeActor> {
        let engine = Arc::clone(&self.engine);
        let (tenant, principal, session) = (tenant.to_owned(), principal.to_owned(), session.to_owned());
        let actor = py
            .detach(move || -> Result<Actor, ApiError> {
                let session = SessionId::new(&session)?;
                Ok(engine.authenticate_session(&TenantId::new(&tenant)?, &PrincipalId::new(&principal)?, session)?)
            })
            .map_err(|e| raise(&e))?;
        Ok(NativeActor { engine: Arc::clone(&self.engine), actor, data_dir: self.data_dir.clone() })
    }

    /// Embed texts with this engine's embedder (unit vectors; 384 dimensions for the local model).
    fn embed(&self, py: Python<'_>, texts: Vec<String>) -> PyResult<Vec<Vec<f32>>> {
        let e = self.embedder.clone().ok_or_else(|| raise(&ApiError::from(EngineError::NoEmbedder)))?;
        embed_with(py, e, texts)
    }

    /// The data directory.
    #[getter]
    fn data_dir(&self) -> PathBuf {
        self.data_dir.clone()
    }
}

fn embed_with(py: Python<'_>, e: Arc<dyn Embedder>, texts: Vec<String>) -> PyResult<Vec<Vec<f32>>> {
    if texts.len() > EMBED_TEXTS_MAX {
        return Err(invalid(format!("at most {EMBED_TEXTS_MAX} texts per call; got {}", texts.len())));
    }
    py.detach(move || {
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        e.embed(&refs).map_err(|err| raise(&ApiError::from(EngineError::Embed(err))))
    })
}

/// A principal the engine authenticated, in one session. Every operation acts as it.
#[pyclass(frozen, module = "memwarden._native")]
pub struct NativeActor {
    engine: Arc<Engine>,
    actor: Actor,
    data_dir: PathBuf,
}

#[pymethods]
impl NativeActor {
    /// Run operation `op` (see the Python package: `add`, `search`, `decide`, ...) with the JSON
    /// `body`; returns the JSON the HTTP API would answer. The GIL is released meanwhile.
    fn call(&self, py: Python<'_>, op: &str, body: &str) -> PyResult<String> {
        let engine = Arc::clone(&self.engine);
        let actor = self.actor.clone();
        let (op, body) = (op.to_owned(), body.to_owned());
        py.detach(move || -> Result<String, ApiError> {
            let out = dispatch(&engine, &actor, &op, parse_body(&body)?)?;
            serde_json::to_string(&out).map_err(ApiError::internal)
        })
        .map_err(|e| raise(&e))
    }

    /// For the benchmark: run `op` once per body and return each call's time in microseconds,
    /// measured in Rust around the shared operation alone (the body is parsed before and the
    /// result dropped after the clock), i.e. what the engine costs without any Python.
    fn time_calls(&self, py: Python<'_>, op: &str, bodies: Vec<String>) -> PyResult<Vec<f64>> {
        let engine = Arc::clone(&self.engine);
        let actor = self.actor.clone();
        let op = op.to_owned();
        py.detach(move || -> Result<Vec<f64>, ApiError> {
            let mut out = Vec::with_capacity(bodies.len());
            for b in &bodies {
                let v = parse_body(b)?;
                let t = std::time::Instant::now();
                let r = dispatch(&engine, &actor, &op, v)?;
                out.push(t.elapsed().as_secs_f64() * 1e6);
                drop(r);
            }
            Ok(out)
        })
        .map_err(|e| raise(&e))
    }

    /// The same principal in another session (a fresh agent context starts clean).
    fn with_session(&self, py: Python<'_>, session: &str) -> PyResult<NativeActor> {
        let engine = Arc::clone(&self.engine);
        let (tenant, id, session) = (self.actor.tenant().clone(), self.actor.id().clone(), session.to_owned());
        let actor = py
            .detach(move || -> Result<Actor, ApiError> { Ok(engine.authenticate_session(&tenant, &id, SessionId::new(&session)?)?) })
            .map_err(|e| raise(&e))?;
        Ok(NativeActor { engine: Arc::clone(&self.engine), actor, data_dir: self.data_dir.clone() })
    }

    /// Mint a one-time grant signed with this user's key from `<data>/user-keys/` (users
    /// registered through this package or the CLI); returns the signed grant as JSON.
    #[pyo3(signature = (tool, key, value, kind = "account", amount = None, ttl_ms = 600_000))]
    #[allow(clippy::too_many_arguments)]
    fn mint_grant(&self, py: Python<'_>, tool: &str, key: &str, value: &str, kind: &str, amount: Option<&str>, ttl_ms: u64) -> PyResult<String> {
        if self.actor.principal().kind != PrincipalKind::User {
            return Err(raise(&ApiError::forbidden("only a user signs grants")));
        }
        let secret = load_user_key(&self.data_dir, self.actor.tenant(), self.actor.id()).map_err(engine_err)?;
        let now = self.engine.now_ms();
        let (tenant, user) = (self.actor.tenant().clone(), self.actor.id().clone());
        let store = self.engine.store_id().to_owned();
        let kind = parse_kind(kind)?;
        let (tool, key, value, amount) = (tool.to_owned(), key.to_owned(), value.to_owned(), amount.map(str::to_owned));
        py.detach(move || {
            let spec = GrantSpec { store: &store, tool: &tool, key: &key, value: &value, kind, amount: amount.as_deref(), ttl_ms };
            let g = mint_grant(&secret, &tenant, &user, &spec, now).map_err(engine_err)?;
            serde_json::to_string(&g).map_err(|e| raise(&ApiError::internal(e)))
        })
    }

    /// The principal's record as JSON.
    fn principal(&self) -> PyResult<String> {
        serde_json::to_string(&ops::principal_out(self.actor.principal())).map_err(|e| raise(&ApiError::internal(e)))
    }

    /// The session this actor acts in.
    #[getter]
    fn session(&self) -> String {
        self.actor.session().to_string()
    }
}

fn parse_kind(kind: &str) -> PyResult<ValueKind> {
    kind.parse::<ValueKind>().map_err(|e| invalid(format!("value kind {kind:?}: {e}")))
}

/// The local embedding model alone (no store): what the package's LangChain `Embeddings` and
/// the Mem0 comparison use, so both sides embed with the same model and code.
#[pyclass(frozen, module = "memwarden._native")]
pub struct NativeEmbedder {
    inner: Arc<dyn Embedder>,
}

#[pymethods]
impl NativeEmbedder {
    /// Load `embedder` (`minilm` from `model_dir`, else `$MEMWARDEN_MODEL_DIR`, else
    /// `./models/all-MiniLM-L6-v2`; or `hash`, for tests only).
    #[new]
    #[pyo3(signature = (model_dir = None, embedder = "minilm"))]
    fn new(py: Python<'_>, model_dir: Option<PathBuf>, embedder: &str) -> PyResult<Self> {
        let name = embedder.to_owned();
        let inner = py
            .detach(move || build_embedder(&name, model_dir))
            .map_err(|e| raise(&e))?
            .ok_or_else(|| invalid("embedder none embeds nothing"))?;
        Ok(Self { inner })
    }

    /// Embed texts (unit vectors).
    fn embed(&self, py: Python<'_>, texts: Vec<String>) -> PyResult<Vec<Vec<f32>>> {
        embed_with(py, Arc::clone(&self.inner), texts)
    }

    /// Output dimensions.
    #[getter]
    fn dims(&self) -> usize {
        self.inner.dims()
    }
}

/// A fresh Ed25519 user key: `(secret_hex, public_hex)`. Register the public half with the
/// principal (`public_key`); keep the secret with the user.
#[pyfunction]
fn generate_user_key() -> PyResult<(String, String)> {
    let k = generate_key().map_err(engine_err)?;
    Ok((hex::encode(k.to_bytes()), hex::encode(k.verifying_key().to_bytes())))
}

/// Sign a one-time grant with a user's secret key (64 hex digits): the user's side of an
/// `ask_user` verdict, for remote use where the user's key is not in a data directory.
#[pyfunction]
#[pyo3(signature = (secret_hex, tenant, user, tool, key, value, store, kind = "account", amount = None, ttl_ms = 600_000, now_ms = None))]
#[allow(clippy::too_many_arguments)]
fn sign_grant(
    secret_hex: &str,
    tenant: &str,
    user: &str,
    tool: &str,
    key: &str,
    value: &str,
    store: &str,
    kind: &str,
    amount: Option<&str>,
    ttl_ms: u64,
    now_ms: Option<u64>,
) -> PyResult<String> {
    let mut seed = [0u8; 32];
    hex::decode_to_slice(secret_hex.trim(), &mut seed).map_err(|_| invalid("secret_hex must be 64 hex digits"))?;
    let secret = ed25519_dalek::SigningKey::from_bytes(&seed);
    let tenant = TenantId::new(tenant).map_err(|e| raise(&ApiError::from(e)))?;
    let user = PrincipalId::new(user).map_err(|e| raise(&ApiError::from(e)))?;
    let spec = GrantSpec { store, tool, key, value, kind: parse_kind(kind)?, amount, ttl_ms };
    let g: SignedGrant = mint_grant(&secret, &tenant, &user, &spec, now_ms.unwrap_or_else(memwarden_engine::system_ms)).map_err(engine_err)?;
    serde_json::to_string(&g).map_err(|e| raise(&ApiError::internal(e)))
}


/// The operations [`NativeActor::call`] accepts.
#[pyfunction]
fn operations() -> Vec<&'static str> {
    OPERATIONS.to_vec()
}

/// The Python module `memwarden._native`.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("NativeError", m.py().get_type::<NativeError>())?;
    m.add_class::<NativeEngine>()?;
    m.add_class::<NativeActor>()?;
    m.add_class::<NativeEmbedder>()?;
    m.add_function(wrap_pyfunction!(generate_user_key, m)?)?;
    m.add_function(wrap_pyfunction!(sign_grant, m)?)?;
    m.add_function(wrap_pyfunction!(operations, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
