//! The HTTP door: routes, authentication, limits, metrics, tracing and the OpenAPI document.

use crate::dto::*;
use crate::keys::{AdminToken, ApiKeys};
use crate::limit::RateLimiter;
use crate::metrics::Metrics;
use crate::ops;
use crate::problem::{ApiError, Problem};
use axum::extract::rejection::QueryRejection;
use axum::extract::{FromRequest, FromRequestParts, MatchedPath, Path, Query, Request, State};
use axum::http::request::Parts;
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use memwarden_core::prelude::*;
use memwarden_engine::{Actor, CursorRoute, CursorScope, Engine};
use serde::de::DeserializeOwned;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;
use tracing::Instrument;
use utoipa::OpenApi;

/// What every handler shares.
pub(crate) struct Shared {
    pub engine: Arc<Engine>,
    pub keys: Arc<ApiKeys>,
    pub admin: AdminToken,
    pub limiter: RateLimiter,
    pub metrics: Arc<Metrics>,
    pub batch_max: usize,
    pub body_bytes_max: usize,
    /// How long a request's body may take to arrive in full (issue 35.5).
    pub body_timeout: std::time::Duration,
    /// Which key opened each MCP session (issue 35.5).
    pub mcp_sessions: crate::mcp::SessionOwners,
    /// Requests in flight per API key (issue 35.5).
    pub in_flight: crate::limit::KeyInFlight,
    /// The OTLP exporter (None: tracing export off).
    pub telemetry: Option<Arc<crate::otel::Telemetry>>,
}

/// Router state.
#[derive(Clone)]
pub(crate) struct AppState(pub Arc<Shared>);

/// Counts an engine call as in flight until dropped (also on panic or cancellation).
pub(crate) struct InFlight(Arc<Metrics>);
impl InFlight {
    pub(crate) fn start(m: &Arc<Metrics>) -> Self {
        m.engine_call_started();
        Self(Arc::clone(m))
    }
}
impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.engine_call_finished();
    }
}

/// Run a blocking engine operation on the blocking pool. The response is produced only after the
/// engine returned, i.e. after its commit is durable.
/// Operation spans started inside `f` are children of `span` (None: none are recorded).
pub(crate) async fn blocking<T, F>(engine: Arc<Engine>, metrics: Option<Arc<Metrics>>, span: Option<crate::otel::SpanCtx>, f: F) -> Result<T, ApiError>
where
    T: Send + 'static,
    F: FnOnce(&Engine) -> Result<T, ApiError> + Send + 'static,
{
    let guard = metrics.as_ref().map(InFlight::start);
    let r = tokio::task::spawn_blocking(move || {
        let _guard = guard;
        let _span = crate::otel::enter(span);
        f(&engine)
    })
    .await;
    r.map_err(ApiError::internal)?
}

impl AppState {
    /// Run an operation on the blocking pool; a request with an `Idempotency-Key` runs it under
    /// the key (`crate::idempotency`).
    async fn run<T, F>(&self, f: F) -> Result<T, ApiError>
    where
        T: Send + 'static,
        F: FnOnce(&Engine) -> Result<T, ApiError> + Send + 'static,
    {
        let pending = crate::idempotency::current();
        blocking(Arc::clone(&self.0.engine), Some(Arc::clone(&self.0.metrics)), crate::otel::request_span(), move |e| match pending {
            None => f(e),
            Some(p) => {
                let (out, claimed) = e.idempotent(p.tag.clone(), f);
                if claimed {
                    p.claimed.store(true, std::sync::atomic::Ordering::SeqCst);
                }
                out
            }
        })
        .await
    }
}

/// Who the request authenticated as (set by the auth middleware in request extensions).
#[derive(Clone, Debug)]
pub(crate) enum Auth {
    /// An API key: the engine's record of its principal.
    Key {
        /// The principal, as the engine looked it up (boxed: the variant stays small).
        actor: Box<Actor>,
        /// The key's id.
        key_id: String,
    },
    /// The admin token (not a principal).
    Admin,
}

/// Extractor: a request authenticated by an API key.
pub(crate) struct Caller {
    actor: Actor,
    key_id: String,
}

impl<S: Send + Sync> FromRequestParts<S> for Caller {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        match parts.extensions.get::<Auth>() {
            Some(Auth::Key { actor, key_id }) => Ok(Caller { actor: (**actor).clone(), key_id: key_id.clone() }),
            Some(Auth::Admin) => Err(ApiError::forbidden("this route needs an API key of a principal; the admin token is not a principal")),
            None => Err(ApiError::unauthorized("missing or invalid API key")),
        }
    }
}

/// Extractor: a request authenticated by the admin token.
pub(crate) struct AdminCaller;

impl<S: Send + Sync> FromRequestParts<S> for AdminCaller {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        match parts.extensions.get::<Auth>() {
            Some(Auth::Admin) => Ok(AdminCaller),
            Some(Auth::Key { .. }) => Err(ApiError::forbidden("this route needs the admin token")),
            None => Err(ApiError::unauthorized("missing or invalid admin token")),
        }
    }
}

/// Extractor: any authenticated request (API key: its principal; admin token: `None`).
pub(crate) struct AnyCaller(Option<Box<Actor>>);

impl<S: Send + Sync> FromRequestParts<S> for AnyCaller {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        match parts.extensions.get::<Auth>() {
            Some(Auth::Key { actor, .. }) => Ok(AnyCaller(Some(actor.clone()))),
            Some(Auth::Admin) => Ok(AnyCaller(None)),
            None => Err(ApiError::unauthorized("missing or invalid API key")),
        }
    }
}

/// How much of an over-limit body is read and discarded before answering 413, so that the
/// client sees the answer instead of a connection reset.
const DRAIN_BYTES_MAX: usize = 8 * 1024 * 1024;

/// JSON body extractor: `Content-Type: application/json` (or `+json`), at most the server's body
/// limit, rejections as problem details.
pub(crate) struct ApiJson<T>(pub T);

fn is_json(headers: &axum::http::HeaderMap) -> bool {
    let Some(ct) = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()) else { return false };
    let essence = ct.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    essence == "application/json" || (essence.starts_with("application/") && essence.ends_with("+json"))
}

impl<T: DeserializeOwned> FromRequest<AppState> for ApiJson<T> {
    type Rejection = ApiError;
    async fn from_request(req: Request, st: &AppState) -> Result<Self, ApiError> {
        if !is_json(req.headers()) {
            return Err(ApiError::new(StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type", "expected `Content-Type: application/json`"));
        }
        let buf = read_bounded(req.into_body(), st.0.body_bytes_max).await?;
        crate::strict::from_slice::<T>(&buf).map(ApiJson).map_err(|e| ApiError::invalid(format!("invalid JSON body: {e}")))
    }
}

/// Query extractor whose rejections are problem details.
pub(crate) struct ApiQuery<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        match Query::<T>::from_request_parts(parts, state).await {
            Ok(Query(v)) => Ok(ApiQuery(v)),
            Err(r) => Err(query_rejection(&r)),
        }
    }
}

fn query_rejection(r: &QueryRejection) -> ApiError {
    ApiError::invalid(crate::strict::redact_message(&r.body_text()))
}

/// One path segment, rejections as problem details.
pub(crate) struct ApiPath(pub String);

impl<S: Send + Sync> FromRequestParts<S> for ApiPath {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        match Path::<String>::from_request_parts(parts, state).await {
            Ok(Path(v)) => Ok(ApiPath(v)),
            Err(r) => Err(ApiError::invalid(crate::strict::redact_message(&r.body_text()))),
        }
    }
}

fn bearer(parts: &axum::http::HeaderMap) -> Option<&str> {
    let v = parts.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = v.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim()).filter(|t| !t.is_empty())
}

/// Request header naming the caller's session.
pub const SESSION_HEADER: &str = "x-memwarden-session";

/// Authenticate the `Authorization: Bearer` token and rate-limit per key.
async fn auth_mw(State(st): State<AppState>, mut req: Request, next: Next) -> Response {
    let Some(token) = bearer(req.headers()).map(str::to_owned) else {
        return ApiError::unauthorized("missing `Authorization: Bearer <key>`").into_response();
    };
    // The caller's session (`X-Memwarden-Session`, default: the principal's never-resetting
    // `default` session): a handle `POST /v1/sessions` issued to this key's principal, never a
    // name the caller makes up (that would be a clean slate). What the engine hands a session
    // taints its later writes.
    let session = match req.headers().get(SESSION_HEADER) {
        None => memwarden_engine::DEFAULT_SESSION.to_owned(),
        Some(v) => match v.to_str() {
            Ok(s) => s.to_owned(),
            Err(_) => return ApiError::invalid(format!("{SESSION_HEADER} must be ASCII")).into_response(),
        },
    };
    let session = match memwarden_core::prelude::SessionId::new(&session) {
        Ok(s) => s,
        Err(e) => return ApiError::invalid(format!("{SESSION_HEADER}: {e}")).into_response(),
    };
    let auth = if st.0.admin.matches(&token) {
        Auth::Admin
    } else {
        let s = Arc::clone(&st.0);
        let looked_up = tokio::task::spawn_blocking(move || -> Result<Option<Auth>, ApiError> {
            let Some(info) = s.keys.authenticate(&token)? else { return Ok(None) };
            match s.engine.authenticate_issued(&info.tenant, &info.principal, session) {
                Ok(actor) => Ok(Some(Auth::Key { actor: Box::new(actor), key_id: info.key_id })),
                Err(memwarden_engine::EngineError::UnknownPrincipal { .. }) => Ok(None),
                Err(e) => Err(e.into()),
            }
        })
        .await;
        match looked_up {
            Ok(Ok(Some(a))) => a,
            Ok(Ok(None)) => return ApiError::unauthorized("invalid or revoked API key").into_response(),
            Ok(Err(e)) => return e.into_response(),
            Err(e) => return ApiError::internal(e).into_response(),
        }
    };
    let mut slot = None;
    match &auth {
        Auth::Key { key_id, actor } => {
            let span = tracing::Span::current();
            span.record("key_id", key_id.as_str());
            span.record("tenant", actor.tenant().as_str());
            span.record("principal", actor.id().as_str());
            // Rate limits are per API key; the admin token is not limited.
            if let Err(wait) = st.0.limiter.check(key_id) {
                let mut e = ApiError::new(StatusCode::TOO_MANY_REQUESTS, "rate_limited", format!("rate limit exceeded; retry in {wait} s"));
                e.retry_after = Some(wait);
                return e.into_response();
            }
            slot = st.0.in_flight.enter(key_id);
            if slot.is_none() {
                let mut e = ApiError::new(StatusCode::TOO_MANY_REQUESTS, "too_many_in_flight", "this API key has too many requests in flight; retry when one finishes");
                e.retry_after = Some(1);
                return e.into_response();
            }
        }
        Auth::Admin => {
            tracing::Span::current().record("key_id", "admin");
        }
    }
    req.extensions_mut().insert(auth);
    let resp = next.run(req).await;
    drop(slot);
    resp
}

/// Count and trace every request (route template, method, status, latency; never bodies or keys).
async fn observe_mw(State(st): State<AppState>, mut req: Request, next: Next) -> Response {
    let route = req.extensions().get::<MatchedPath>().map(|p| p.as_str().to_owned()).unwrap_or_else(|| "unmatched".to_owned());
    let method = req.method().as_str().to_owned();
    let span = tracing::info_span!("http", %method, %route, key_id = tracing::field::Empty, tenant = tracing::field::Empty, principal = tracing::field::Empty);
    let start = Instant::now();
    // OpenTelemetry (only when an exporter runs): the request's server span is the parent of
    // its operation spans, through a task-local (REST) and the request's extensions (MCP).
    let server_span = st.0.telemetry.as_ref().and_then(|t| crate::otel::ServerSpan::start(t.tracer(), req.headers()));
    let mut resp = match &server_span {
        None => next.run(req).instrument(span.clone()).await,
        Some(s) => {
            req.extensions_mut().insert(s.ctx.clone());
            crate::otel::scope(s.ctx.clone(), next.run(req).instrument(span.clone())).await
        }
    };
    let secs = start.elapsed().as_secs_f64();
    let status = resp.status().as_u16();
    st.0.metrics.observe_request(&route, &method, status, secs);
    span.in_scope(|| tracing::info!(status, latency_ms = secs * 1000.0, "request"));
    if let Some(s) = server_span {
        if let Ok(v) = header::HeaderValue::from_str(&s.traceparent()) {
            resp.headers_mut().insert(crate::otel::TRACEPARENT, v);
        }
        s.finish(&method, &route, status);
    }
    resp
}

fn created<T: serde::Serialize>(v: T) -> Response {
    (StatusCode::CREATED, Json(v)).into_response()
}

// ---------------------------------------------------------------------------------------------
// Memories

/// Add a memory, or a batch (`{"memories": [...]}`).
#[utoipa::path(post, path = "/v1/memories", tag = "memories", request_body = AddRequest,
    responses(
        (status = 201, description = "Stored (one memory); origin and label come from the key's principal", body = WriteOut),
        (status = 200, description = "Batch results, one per memory", body = BatchOut),
        (status = 400, description = "Malformed body, unknown field or invalid id", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No valid API key", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "A declared parent is unknown or unreadable", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "Body too large", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "The write gate refused", body = Problem, content_type = "application/problem+json"),
        (status = 429, description = "Rate limited", body = Problem, content_type = "application/problem+json"),
    ))]
async fn add_memories(State(st): State<AppState>, c: Caller, ApiJson(body): ApiJson<serde_json::Value>) -> Result<Response, ApiError> {
    match ops::add_request(body)? {
        AddRequest::Many(many) => {
            let max = st.0.batch_max;
            let out = st.run(move |e| ops::add_many(e, &c.actor, many.memories, max)).await?;
            Ok(Json(out).into_response())
        }
        AddRequest::One(one) => Ok(created(st.run(move |e| ops::add(e, &c.actor, one)).await?)),
    }
}

/// List the memories of a namespace that the caller may read, oldest first, a page at a time:
/// pass the answer's `next_cursor` back as `cursor` for the next page (null on the last). Paging
/// to the end lists every memory once (or names it in `withheld`); memories written while paging
/// appear on a later page.
#[utoipa::path(get, path = "/v1/memories", tag = "memories", params(ListQuery),
    responses(
        (status = 200, description = "One page of memories", body = ListOut),
        (status = 400, description = "Bad query: `limit` out of range, or an invalid cursor (code `invalid_cursor`: malformed, changed, or of another list, query or caller)", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No valid API key", body = Problem, content_type = "application/problem+json"),
    ))]
async fn list_memories(State(st): State<AppState>, c: Caller, ApiQuery(q): ApiQuery<ListQuery>) -> Result<Json<ListOut>, ApiError> {
    Ok(Json(st.run(move |e| ops::list(e, &c.actor, &q.namespace, q.limit, q.cursor.as_deref())).await?))
}

/// Read a memory by id (a memory of another tenant or outside the caller's scope is a 404; one in
/// the caller's scope that a defense layer holds back is a 403 `withheld`, naming the rule and
/// the flags that fired).
#[utoipa::path(get, path = "/v1/memories/{id}", tag = "memories",
    params(("id" = String, Path, description = "Memory id (32 hex digits)")),
    responses(
        (status = 200, description = "The memory", body = MemoryOut),
        (status = 400, description = "Malformed id", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No valid API key", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Withheld (code `withheld`): the memory is in the caller's scope but a defense layer holds it back; the problem's `withheld` names the layer, the rule and the flags that fired", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "Not found or not readable", body = Problem, content_type = "application/problem+json"),
    ))]
async fn get_memory(State(st): State<AppState>, c: Caller, ApiPath(id): ApiPath) -> Result<Json<MemoryOut>, ApiError> {
    Ok(Json(st.run(move |e| ops::get(e, &c.actor, &id)).await?))
}

/// Report a memory poisoned: it and every memory derived from it are marked (affected) in the
/// lineage layer and no longer support an action. Allowed to users, tools and the memory's owner.
#[utoipa::path(post, path = "/v1/memories/{id}/poison", tag = "memories",
    params(("id" = String, Path, description = "Memory id (32 hex digits)")),
    responses(
        (status = 200, description = "Reported", body = MemoryMarkedOut),
        (status = 400, description = "Malformed id", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No valid API key", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Not a user, a tool or the owner", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "Not found or not readable", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The lineage layer is switched off", body = Problem, content_type = "application/problem+json"),
    ))]
async fn poison_memory(State(st): State<AppState>, c: Caller, ApiPath(id): ApiPath) -> Result<Json<MemoryMarkedOut>, ApiError> {
    Ok(Json(st.run(move |e| ops::flag_poisoned(e, &c.actor, &id)).await?))
}

/// Verify a memory (a `verified_by` edge in its lineage; never raises its authority label).
/// Allowed to users and allow-listed tools.
#[utoipa::path(post, path = "/v1/memories/{id}/verify", tag = "memories",
    params(("id" = String, Path, description = "Memory id (32 hex digits)")),
    responses(
        (status = 200, description = "Verified", body = MemoryMarkedOut),
        (status = 400, description = "Malformed id", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No valid API key", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Neither a user nor an allow-listed tool", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "Not found or not readable", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The lineage layer is switched off", body = Problem, content_type = "application/problem+json"),
    ))]
async fn verify_memory(State(st): State<AppState>, c: Caller, ApiPath(id): ApiPath) -> Result<Json<MemoryMarkedOut>, ApiError> {
    Ok(Json(st.run(move |e| ops::verify_memory(e, &c.actor, &id)).await?))
}

/// Revoke a memory: afterwards no read returns it (it stays stored for audit). Allowed to the
/// memory's owner and to users of its tenant.
#[utoipa::path(post, path = "/v1/memories/{id}/revoke", tag = "memories", request_body = RevokeIn,
    params(("id" = String, Path, description = "Memory id (32 hex digits)")),
    responses(
        (status = 200, description = "Revoked", body = MemoryRevokedOut),
        (status = 400, description = "Malformed id or reason", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No valid API key", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Neither the owner nor a user", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "Not found or not readable", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The memory changed since it was read (a concurrent update, revocation or promotion won); read it again and retry", body = Problem, content_type = "application/problem+json"),
    ))]
async fn revoke_memory(State(st): State<AppState>, c: Caller, ApiPath(id): ApiPath, ApiJson(r): ApiJson<RevokeIn>) -> Result<Json<MemoryRevokedOut>, ApiError> {
    Ok(Json(st.run(move |e| ops::revoke(e, &c.actor, &id, r)).await?))
}

/// Promote a memory: widen who may read it (to everyone in the namespace, or to more named
/// readers). Only its owner may, only within what its ancestry admits; its label and ancestry
/// travel unchanged. With the lifecycle layer on, the promotion gate decides first: a blocked
/// promotion quarantines the memory and answers 422 `refused`.
#[utoipa::path(post, path = "/v1/memories/{id}/promote", tag = "memories", request_body = PromoteIn,
    params(("id" = String, Path, description = "Memory id (32 hex digits)")),
    responses(
        (status = 200, description = "Promoted: the memory with its new readers", body = WriteOut),
        (status = 400, description = "Malformed id or readers, not a widening, or not active", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No valid API key", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Not the owner, or the ancestry does not admit the new readers", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "Not found or not readable", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The memory changed since it was read (a concurrent update, revocation or promotion won); read it again and retry", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "The lifecycle promotion gate held the memory back (now quarantined)", body = Problem, content_type = "application/problem+json"),
    ))]
async fn promote_memory(State(st): State<AppState>, c: Caller, ApiPath(id): ApiPath, ApiJson(p): ApiJson<PromoteIn>) -> Result<Json<WriteOut>, ApiError> {
    Ok(Json(st.run(move |e| ops::promote(e, &c.actor, &id, p)).await?))
}

/// Update a memory: the new text is stored as a new version derived from the old one (label at
/// most the old one's, scope within it) and the old version is superseded: kept for its
/// history, never returned by search, list or get. Allowed to the owner and to users.
#[utoipa::path(put, path = "/v1/memories/{id}", tag = "memories", request_body = UpdateIn,
    params(("id" = String, Path, description = "Memory id (32 hex digits)")),
    responses(
        (status = 200, description = "The new version", body = UpdatedOut),
        (status = 400, description = "Malformed id or text, or the memory is not active", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No valid API key", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Neither the owner nor a user", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "Not found or not readable", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The memory changed since it was read (a concurrent update, revocation or promotion won); read it again and retry", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "The lifecycle write gate refused the new text", body = Problem, content_type = "application/problem+json"),
    ))]
async fn update_memory(State(st): State<AppState>, c: Caller, ApiPath(id): ApiPath, ApiJson(u): ApiJson<UpdateIn>) -> Result<Json<UpdatedOut>, ApiError> {
    Ok(Json(st.run(move |e| ops::update(e, &c.actor, &id, u.content)).await?))
}

/// Every version of a memory the caller may see, oldest first, a page at a time (`cursor`,
/// `next_cursor`).
#[utoipa::path(get, path = "/v1/memories/{id}/history", tag = "memories",
    params(("id" = String, Path, description = "Memory id (32 hex digits)"), PageQuery),
    responses(
        (status = 200, description = "The versions, oldest first", body = HistoryOut),
        (status = 400, description = "Malformed id, `limit` out of range, or an invalid cursor (code `invalid_cursor`)", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No valid API key", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Withheld (code `withheld`): the memory is in the caller's scope but a defense layer holds it back; the problem's `withheld` names the layer, the rule and the flags that fired", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "Not found or not readable", body = Problem, content_type = "application/problem+json"),
    ))]
async fn memory_history(State(st): State<AppState>, c: Caller, ApiPath(id): ApiPath, ApiQuery(q): ApiQuery<PageQuery>) -> Result<Json<HistoryOut>, ApiError> {
    Ok(Json(st.run(move |e| ops::history(e, &c.actor, &id, q.limit, q.cursor.as_deref())).await?))
}

/// Mem0-compatible update (see `PUT /v1/memories/{id}`).
#[utoipa::path(put, path = "/memories/{id}", tag = "mem0", request_body = AliasUpdateIn,
    params(("id" = String, Path, description = "Memory id (32 hex digits)")),
    responses(
        (status = 200, description = "The new version", body = UpdatedOut),
        (status = 400, description = "Malformed id or text, or the memory is not active", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No valid API key", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Neither the owner nor a user", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "Not found or not readable", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The memory changed since it was read (a concurrent update, revocation or promotion won); read it again and retry", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "The lifecycle write gate refused the new text", body = Problem, content_type = "application/problem+json"),
    ))]
async fn alias_update(State(st): State<AppState>, c: Caller, ApiPath(id): ApiPath, ApiJson(u): ApiJson<AliasUpdateIn>) -> Result<Json<UpdatedOut>, ApiError> {
    Ok(Json(st.run(move |e| ops::update(e, &c.actor, &id, u.text)).await?))
}

/// Mem0-compatible history (see `GET /v1/memories/{id}/history`; `limit`, `cursor`; other query
/// parameters are ignored).
#[utoipa::path(get, path = "/memories/{id}/history", tag = "mem0",
    params(("id" = String, Path, description = "Memory id (32 hex digits)"), ("limit" = Option<usize>, Query, description = "At most this many versions (1..=10000, default 100)"),
        ("cursor" = Option<String>, Query, description = "The `next_cursor` of the previous page, unchanged")),
    responses(
        (status = 200, description = "The versions, oldest first", body = HistoryOut),
        (status = 400, description = "Malformed id, `limit` out of range, or an invalid cursor (code `invalid_cursor`)", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No valid API key", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Withheld (code `withheld`): the memory is in the caller's scope but a defense layer holds it back; the problem's `withheld` names the layer, the rule and the flags that fired", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "Not found or not readable", body = Problem, content_type = "application/problem+json"),
    ))]
async fn alias_history(st: State<AppState>, c: Caller, id: ApiPath, ApiQuery(q): ApiQuery<BTreeMap<String, String>>) -> Result<Json<HistoryOut>, ApiError> {
    let limit = q.get("limit").map(|l| l.parse::<usize>().map_err(|_| ApiError::invalid("limit must be a positive integer"))).transpose()?;
    memory_history(st, c, id, ApiQuery(PageQuery { limit, cursor: q.get("cursor").cloned() })).await
}

/// Erase a memory — every version of it, whichever version the id names (delete their text,
/// metadata and embeddings) — and every memory whose every supporting path runs through it; one with another live source survives. Tombstones keep ids
/// and lineage; the erasure is logged by id. Allowed to the memory's owner and to users.
#[utoipa::path(delete, path = "/v1/memories/{id}", tag = "memories",
    params(("id" = String, Path, description = "Memory id (32 hex digits)")),
    responses(
        (status = 200, description = "Erased", body = MemoryErasedOut),
        (status = 400, description = "Malformed id", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No valid API key", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Neither the owner nor a user", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "Not found or not readable", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The lineage layer is off in this configuration", body = Problem, content_type = "application/problem+json"),
    ))]
async fn erase_memory(State(st): State<AppState>, c: Caller, ApiPath(id): ApiPath) -> Result<Json<MemoryErasedOut>, ApiError> {
    Ok(Json(st.run(move |e| ops::erase(e, &c.actor, &id)).await?))
}

/// Mem0-compatible delete: erases the memory (see `DELETE /v1/memories/{id}`).
#[utoipa::path(delete, path = "/memories/{id}", tag = "mem0",
    params(("id" = String, Path, description = "Memory id (32 hex digits)")),
    responses(
        (status = 200, description = "Erased", body = MemoryErasedOut),
        (status = 400, description = "Malformed id", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No valid API key", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Neither the owner nor a user", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "Not found or not readable", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The lineage layer is off in this configuration", body = Problem, content_type = "application/problem+json"),
    ))]
async fn alias_delete(st: State<AppState>, c: Caller, id: ApiPath) -> Result<Json<MemoryErasedOut>, ApiError> {
    erase_memory(st, c, id).await
}

/// Open a session: a handle the server issues to the key's principal, to send as
/// `X-Memwarden-Session`. A name the server did not issue is refused (400 `unknown_session`), so
/// a new session id is never a free reset: a `fork` carries on from the caller's current session
/// (the one this request is sent in), a `planning` session starts clean but is never handed a
/// memory labelled below `agent`, and a `quarantine` session starts untrusted. Opening is
/// logged.
#[utoipa::path(post, path = "/v1/sessions", tag = "principals", request_body = SessionIn,
    responses(
        (status = 201, description = "Issued", body = SessionOut),
        (status = 400, description = "Malformed body, or the request's own session header names an unknown session", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No valid API key", body = Problem, content_type = "application/problem+json"),
    ))]
async fn open_session(State(st): State<AppState>, c: Caller, ApiJson(s): ApiJson<SessionIn>) -> Result<Response, ApiError> {
    Ok(created(st.run(move |e| ops::open_session(e, &c.actor, s)).await?))
}

/// Report a task outcome for the memories it used: their utility, trust and hazard move, and so
/// does their writers' reputation (lifecycle layer; 409 `layer_off` when it is off).
#[utoipa::path(post, path = "/v1/feedback", tag = "memories", request_body = FeedbackIn,
    responses(
        (status = 200, description = "Updated", body = FeedbackOut),
        (status = 400, description = "Malformed ids or an empty list", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No valid API key", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "A memory is not found or not readable", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The lifecycle layer is off in this configuration", body = Problem, content_type = "application/problem+json"),
    ))]
async fn feedback(State(st): State<AppState>, c: Caller, ApiJson(f): ApiJson<FeedbackIn>) -> Result<Json<FeedbackOut>, ApiError> {
    Ok(Json(st.run(move |e| ops::feedback(e, &c.actor, f)).await?))
}

/// Semantic search; the permission filter decides eligibility before ranking.
#[utoipa::path(post, path = "/v1/search", tag = "memories", request_body = SearchIn,
    responses(
        (status = 200, description = "Hits, best first", body = SearchOut),
        (status = 400, description = "Bad query", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No valid API key", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "No embedder configured", body = Problem, content_type = "application/problem+json"),
    ))]
async fn search(State(st): State<AppState>, c: Caller, ApiJson(s): ApiJson<SearchIn>) -> Result<Json<SearchOut>, ApiError> {
    Ok(Json(st.run(move |e| ops::search(e, &c.actor, s)).await?))
}

/// Derive (summarise) a memory from parents: its label is the meet of the caller's and theirs.
#[utoipa::path(post, path = "/v1/derive", tag = "memories", request_body = DeriveIn,
    responses(
        (status = 201, description = "Stored", body = WriteOut),
        (status = 400, description = "Bad input", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No valid API key", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "A parent is unknown or unreadable", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "The write gate refused", body = Problem, content_type = "application/problem+json"),
    ))]
async fn derive(State(st): State<AppState>, c: Caller, ApiJson(d): ApiJson<DeriveIn>) -> Result<Response, ApiError> {
    Ok(created(st.run(move |e| ops::derive(e, &c.actor, d)).await?))
}

/// Record a tool call through the monitor; the output is stored as written by the tool.
#[utoipa::path(post, path = "/v1/tool-calls", tag = "memories", request_body = ToolCallIn,
    responses(
        (status = 201, description = "Tool output stored", body = WriteOut),
        (status = 400, description = "Bad input", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No valid API key", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "Unknown tool or unreadable input", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "The write gate refused", body = Problem, content_type = "application/problem+json"),
    ))]
async fn tool_calls(State(st): State<AppState>, c: Caller, ApiJson(t): ApiJson<ToolCallIn>) -> Result<Response, ApiError> {
    Ok(created(st.run(move |e| ops::tool_call(e, &c.actor, t)).await?))
}

// ---------------------------------------------------------------------------------------------
// Lineage

/// What the lineage layer knows about a memory, as the caller may see it: its record (no text),
/// its path trust for the caller with the factors, and its parents and children (those the caller
/// may not read are counted, not listed). A memory outside the caller's scope is a 404, as for a
/// read; one in its scope that the lineage layer holds back is a 403 `withheld`.
#[utoipa::path(get, path = "/v1/memories/{id}/lineage", tag = "lineage",
    params(("id" = String, Path, description = "Memory id (32 hex digits)")),
    responses(
        (status = 200, description = "The lineage view", body = LineageOut),
        (status = 400, description = "Malformed id", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No valid API key", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "The admin token is not a principal; or withheld (code `withheld`): the memory is in the caller's scope but the lineage layer holds it back (a revoked ancestor, an ancestor outside the caller's scope, a pending propagation), named with the rule in the problem's `withheld`", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "Not found or not readable (erased, revoked, or outside the caller's scope)", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The lineage layer is off in this configuration", body = Problem, content_type = "application/problem+json"),
    ))]
async fn memory_lineage(State(st): State<AppState>, c: Caller, ApiPath(id): ApiPath) -> Result<Json<LineageOut>, ApiError> {
    Ok(Json(st.run(move |e| ops::lineage(e, &c.actor, &id)).await?))
}

/// The logged decisions that cited a memory — as context, as a value's source, or named by the
/// verdict as supporting or affected — with their verdicts, in log order, a page at a time
/// (`cursor`, `next_cursor`). A page covers a bounded stretch of the log, so it may hold fewer
/// than `limit` decisions (even none) and still have a next page. Who may see the memory's
/// lineage may ask; users of the tenant see every such decision, any other principal only its
/// own (as for `GET /v1/audit/proof/{index}`).
#[utoipa::path(get, path = "/v1/memories/{id}/decisions", tag = "lineage",
    params(("id" = String, Path, description = "Memory id (32 hex digits)"), PageQuery),
    responses(
        (status = 200, description = "One page of decisions", body = DecisionsOut),
        (status = 400, description = "Malformed id, `limit` out of range, or an invalid cursor (code `invalid_cursor`)", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No valid API key", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "The admin token is not a principal; or withheld (code `withheld`), as for the memory's lineage", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "Not found or not readable", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The lineage layer is off in this configuration", body = Problem, content_type = "application/problem+json"),
    ))]
async fn memory_decisions(State(st): State<AppState>, c: Caller, ApiPath(id): ApiPath, ApiQuery(q): ApiQuery<PageQuery>) -> Result<Json<DecisionsOut>, ApiError> {
    Ok(Json(st.run(move |e| ops::decisions(e, &c.actor, &id, q.limit, q.cursor.as_deref())).await?))
}

/// Export the caller's tenant's whole lineage graph (every record, principal, action and edge,
/// with gate decisions and erasures; no memory text): memwarden's own audit-trail JSON
/// (`format=memwarden`, the default) or W3C PROV-JSON (`format=prov`). Users only.
#[utoipa::path(get, path = "/v1/lineage/export", tag = "lineage", params(ExportQuery),
    responses(
        (status = 200, description = "The audit trail (`memwarden-lineage-audit/1`) or a PROV-JSON document", body = Object),
        (status = 400, description = "Unknown format or query parameter", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No valid API key", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Not a user of the tenant (or the admin token)", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The lineage layer is off in this configuration", body = Problem, content_type = "application/problem+json"),
    ))]
async fn lineage_export(State(st): State<AppState>, c: Caller, ApiQuery(q): ApiQuery<ExportQuery>) -> Result<Json<serde_json::Value>, ApiError> {
    Ok(Json(st.run(move |e| ops::export_lineage(e, &c.actor, q.format)).await?))
}

// ---------------------------------------------------------------------------------------------
// Authority

/// The tenant's elevations (users only): each corroborated value, the memories it rests on, and
/// whether it still counts (issue 34.4); oldest first, a page at a time (`cursor`, `next_cursor`).
#[utoipa::path(get, path = "/v1/elevations", tag = "authority", params(PageQuery),
    responses(
        (status = 200, description = "The elevations", body = ElevationsOut),
        (status = 400, description = "Bad query: `limit` out of range, or an invalid cursor (code `invalid_cursor`: malformed, changed, or of another list, query or caller)", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No valid API key", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Not a user", body = Problem, content_type = "application/problem+json"),
    ))]
async fn elevations(State(st): State<AppState>, c: Caller, ApiQuery(q): ApiQuery<PageQuery>) -> Result<Json<ElevationsOut>, ApiError> {
    Ok(Json(st.run(move |e| ops::elevations(e, &c.actor, q.limit, q.cursor.as_deref())).await?))
}

/// Withdraw an elevation (users only): it stops counting now; the withdrawal is logged.
#[utoipa::path(post, path = "/v1/elevations/withdraw", tag = "authority", request_body = WithdrawElevationIn,
    responses(
        (status = 200, description = "Withdrawn", body = ElevationWithdrawnOut),
        (status = 400, description = "Bad input, or no such elevation", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No valid API key", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Not a user", body = Problem, content_type = "application/problem+json"),
    ))]
async fn withdraw_elevation(State(st): State<AppState>, c: Caller, ApiJson(w): ApiJson<WithdrawElevationIn>) -> Result<Json<ElevationWithdrawnOut>, ApiError> {
    Ok(Json(st.run(move |e| ops::withdraw_elevation(e, &c.actor, w)).await?))
}

/// Attest a value for a key as the caller (counts only when the caller is trusted).
#[utoipa::path(post, path = "/v1/attestations", tag = "authority", request_body = AttestIn,
    responses(
        (status = 201, description = "Stored", body = AttestOut),
        (status = 400, description = "Bad input", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No valid API key", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Refused", body = Problem, content_type = "application/problem+json"),
    ))]
async fn attestations(State(st): State<AppState>, c: Caller, ApiJson(a): ApiJson<AttestIn>) -> Result<Response, ApiError> {
    Ok(created(st.run(move |e| ops::attest(e, &c.actor, a)).await?))
}

/// Record (for audit) a one-time grant signed by a user of the caller's tenant.
#[utoipa::path(post, path = "/v1/grants", tag = "authority",
    request_body(content = Object, description = "A signed grant: `{\"grant\": {tenant, user, tool, key, value, amount, nonce, issued_ms, expires_ms}, \"signature\": ...}`"),
    responses(
        (status = 201, description = "Recorded", body = GrantOut),
        (status = 400, description = "Not a signed grant", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No valid API key", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Not signed by that user, or another tenant's grant", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "Unknown user", body = Problem, content_type = "application/problem+json"),
    ))]
async fn grants(State(st): State<AppState>, c: Caller, ApiJson(g): ApiJson<serde_json::Value>) -> Result<Response, ApiError> {
    Ok(created(st.run(move |e| ops::record_grant(e, &c.actor, g)).await?))
}

/// Prepare a one-time grant for the calling user to sign: the server fills in the tenant, the
/// store, the user, a fresh nonce and the times, and returns the grant and the exact bytes to sign. Sign
/// them with the user's Ed25519 key wherever it is kept (the key never reaches the server) and
/// `POST /v1/grants` `{"grant": <grant as returned>, "signature": <128 hex digits>}`; pass the
/// same object in `grants` of `POST /v1/actions/decide` (valid once). Users only.
///
/// Known-answer vector (check your signer against it). Key seed (32 bytes)
/// `2a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2a`, public key
/// `197f6b23e16c8532c6abc838facd5ea789be0c76b2920334039bfa8b3d368d61`; grant
/// `{"tenant":"acme","store":"store-0001","user":"alice","tool":"pay","key":"payee","value":{"kind":"account","canonical":"acct12345678","exact":"acct12345678"},"amount":"150","nonce":"000102030405060708090a0b0c0d0e0f","issued_ms":1767225600000,"expires_ms":1767226200000}`;
/// signing bytes (hex, `memwarden-grant-v2` and a newline, then that JSON)
/// `6d656d77617264656e2d6772616e742d76320a7b2274656e616e74223a2261636d65222c2273746f7265223a2273746f72652d30303031222c2275736572223a22616c696365222c22746f6f6c223a22706179222c226b6579223a227061796565222c2276616c7565223a7b226b696e64223a226163636f756e74222c2263616e6f6e6963616c223a22616363743132333435363738222c226578616374223a22616363743132333435363738227d2c22616d6f756e74223a22313530222c226e6f6e6365223a223030303130323033303430353036303730383039306130623063306430653066222c226973737565645f6d73223a313736373232353630303030302c22657870697265735f6d73223a313736373232363230303030307d`;
/// Ed25519 signature
/// `ee3edb9f74dfe1f709d73f7c67d92fc08dfb25d7626d8a365d08176c243e5cbf93066881ea6d3cacea5e3939808f932780b5dd18f736fa043a4e0914b2aaba02`.
#[utoipa::path(post, path = "/v1/grants/prepare", tag = "authority", request_body = PrepareGrantIn,
    responses(
        (status = 200, description = "The grant and the bytes to sign", body = PreparedGrantOut),
        (status = 400, description = "Malformed body, bad value or lifetime", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No valid API key", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "The caller is not a user with a registered public key", body = Problem, content_type = "application/problem+json"),
    ))]
async fn prepare_grant(State(st): State<AppState>, c: Caller, ApiJson(g): ApiJson<PrepareGrantIn>) -> Result<Json<PreparedGrantOut>, ApiError> {
    Ok(Json(st.run(move |e| ops::prepare_grant(e, &c.actor, g)).await?))
}

/// Propose an action; the verdict (allow, redact, reverify, ask_user, block) is logged.
#[utoipa::path(post, path = "/v1/actions/decide", tag = "authority", request_body = DecideIn,
    responses(
        (status = 200, description = "The verdict (a refused grant is a `block` verdict, not an error)", body = DecideOut),
        (status = 400, description = "Bad input", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No valid API key", body = Problem, content_type = "application/problem+json"),
    ))]
async fn decide(State(st): State<AppState>, c: Caller, ApiJson(d): ApiJson<DecideIn>) -> Result<Json<DecideOut>, ApiError> {
    let out = st.run(move |e| ops::decide(e, &c.actor, d)).await?;
    st.0.metrics.observe_decision(&out.verdict.decision);
    tracing::info!(decision = %out.verdict.decision, rule = %out.verdict.rule, log_index = out.log_index, "decision");
    Ok(Json(out))
}

// ---------------------------------------------------------------------------------------------
// Audit

/// Extractor: an API key's principal, or the admin token (`None`); `ops::checkpoint` decides
/// whether it may sign.
pub(crate) struct Signer(Option<Actor>);

impl<S: Send + Sync> FromRequestParts<S> for Signer {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        match parts.extensions.get::<Auth>() {
            Some(Auth::Key { actor, .. }) => Ok(Signer(Some((**actor).clone()))),
            Some(Auth::Admin) => Ok(Signer(None)),
            None => Err(ApiError::unauthorized("missing or invalid API key")),
        }
    }
}

/// Verify the caller's tenant's verdict log (hash chain, checkpoints, recorded head, witness,
/// and every row the log binds); the admin token verifies every tenant's log. The figures are
/// the caller's tenant's only.
#[utoipa::path(get, path = "/v1/audit/verify", tag = "audit",
    responses(
        (status = 200, description = "Report for the caller's tenant (`ok: false` names the first bad entry)", body = VerifyOut),
        (status = 401, description = "Not authenticated", body = Problem, content_type = "application/problem+json"),
    ))]
async fn audit_verify(State(st): State<AppState>, AnyCaller(caller): AnyCaller) -> Result<Json<VerifyOut>, ApiError> {
    Ok(Json(st.run(move |e| ops::verify(e, caller.as_deref().map(Actor::tenant))).await?))
}

/// Sign a checkpoint of the caller's tenant's log now (a user's key; the admin token signs every
/// tenant's log and answers with the whole store's).
#[utoipa::path(post, path = "/v1/audit/checkpoint", tag = "audit",
    responses(
        (status = 201, description = "Signed checkpoint", body = CheckpointOut),
        (status = 401, description = "Not authenticated", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Not a user's key nor the admin token", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "The caller's tenant has no log yet", body = Problem, content_type = "application/problem+json"),
    ))]
async fn audit_checkpoint(State(st): State<AppState>, Signer(signer): Signer) -> Result<Response, ApiError> {
    Ok(created(st.run(move |e| ops::checkpoint(e, signer.as_ref())).await?))
}

/// Inclusion proof of one entry of the caller's tenant's log (the index a receipt's
/// `log_index` names) in that log's current tree, with the entry itself; the admin token
/// addresses the whole store's view.
#[utoipa::path(get, path = "/v1/audit/proof/{index}", tag = "audit",
    params(("index" = u64, Path, description = "Entry index in the caller's tenant's log")),
    responses(
        (status = 200, description = "Proof, verified by the server", body = ProofOut),
        (status = 400, description = "Bad index", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "Not authenticated", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such entry in the caller's log", body = Problem, content_type = "application/problem+json"),
    ))]
async fn audit_proof(State(st): State<AppState>, AnyCaller(caller): AnyCaller, ApiPath(index): ApiPath) -> Result<Json<ProofOut>, ApiError> {
    let index: u64 = index.parse().map_err(|_| ApiError::invalid("index must be a non-negative integer"))?;
    Ok(Json(st.run(move |e| ops::proof(e, caller.as_deref(), index)).await?))
}

// ---------------------------------------------------------------------------------------------
// Principals and keys

/// The caller's principal, as the engine records it.
#[utoipa::path(get, path = "/v1/principals/me", tag = "principals",
    responses(
        (status = 200, description = "The caller", body = MeOut),
        (status = 401, description = "No valid API key", body = Problem, content_type = "application/problem+json"),
    ))]
async fn me(State(st): State<AppState>, c: Caller) -> Json<MeOut> {
    Json(MeOut { principal: ops::principal_out(c.actor.principal()), key_id: Some(c.key_id), store: st.0.engine.store_id().to_owned() })
}

/// Register a principal (admin token).
#[utoipa::path(post, path = "/v1/admin/principals", tag = "admin", request_body = RegisterPrincipalIn,
    responses(
        (status = 201, description = "Registered", body = PrincipalOut),
        (status = 400, description = "Bad input (users need a public key; only tools can be allow-listed)", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "Not authenticated", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Not the admin token", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "Already registered", body = Problem, content_type = "application/problem+json"),
    ))]
async fn admin_register(State(st): State<AppState>, _a: AdminCaller, ApiJson(p): ApiJson<RegisterPrincipalIn>) -> Result<Response, ApiError> {
    Ok(created(st.run(move |e| ops::register_principal(e, p)).await?))
}

/// Principals of a tenant (admin token), by id, a page at a time (`cursor`, `next_cursor`).
#[utoipa::path(get, path = "/v1/admin/principals", tag = "admin", params(TenantQuery),
    responses(
        (status = 200, description = "Principals", body = PrincipalsOut),
        (status = 400, description = "Missing or bad tenant, `limit` out of range, or an invalid cursor (code `invalid_cursor`)", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "Not authenticated", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Not the admin token", body = Problem, content_type = "application/problem+json"),
    ))]
async fn admin_list_principals(State(st): State<AppState>, _a: AdminCaller, ApiQuery(q): ApiQuery<TenantQuery>) -> Result<Json<PrincipalsOut>, ApiError> {
    let tenant = TenantId::new(q.tenant.as_deref().ok_or_else(|| ApiError::invalid("tenant is required"))?)?;
    st.run(move |e| {
        let mut ps = e.store().principals(&tenant).map_err(ApiError::internal)?;
        ps.sort_by(|a, b| a.id.as_str().cmp(b.id.as_str()));
        let scope = admin_scope(CursorRoute::Principals, &tenant);
        let (page, next_cursor) = admin_page(e, &scope, ps, |p| p.id.as_str().as_bytes().to_vec(), &q)?;
        Ok(Json(PrincipalsOut { principals: page.iter().map(ops::principal_out).collect(), next_cursor }))
    })
    .await
}

/// Mint an API key for a registered principal (admin token). The secret is shown once.
#[utoipa::path(post, path = "/v1/admin/keys", tag = "admin", request_body = MintKeyIn,
    responses(
        (status = 201, description = "The key, with its secret (shown once)", body = crate::keys::MintedKey),
        (status = 400, description = "Bad input", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "Not authenticated", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Not the admin token", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such principal", body = Problem, content_type = "application/problem+json"),
    ))]
async fn admin_mint_key(State(st): State<AppState>, _a: AdminCaller, ApiJson(m): ApiJson<MintKeyIn>) -> Result<Response, ApiError> {
    let keys = Arc::clone(&st.0.keys);
    let minted = st
        .run(move |e| {
            let tenant = TenantId::new(&m.tenant)?;
            let principal = PrincipalId::new(&m.principal)?;
            e.authenticate(&tenant, &principal)?;
            Ok(keys.mint(&tenant, &principal, &m.label)?)
        })
        .await?;
    tracing::info!(key_id = %minted.info.key_id, tenant = %minted.info.tenant, principal = %minted.info.principal, "api key minted");
    Ok(created(minted))
}

/// API keys, of one tenant or all (admin token), oldest first, a page at a time (`cursor`,
/// `next_cursor`). No secrets.
#[utoipa::path(get, path = "/v1/admin/keys", tag = "admin", params(TenantQuery),
    responses(
        (status = 200, description = "Keys", body = KeysOut),
        (status = 400, description = "Bad query: `limit` out of range, or an invalid cursor (code `invalid_cursor`: malformed, changed, or of another list, query or caller)", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "Not authenticated", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Not the admin token", body = Problem, content_type = "application/problem+json"),
    ))]
async fn admin_list_keys(State(st): State<AppState>, _a: AdminCaller, ApiQuery(q): ApiQuery<TenantQuery>) -> Result<Json<KeysOut>, ApiError> {
    let tenant = q.tenant.as_deref().map(TenantId::new).transpose()?;
    let keys = Arc::clone(&st.0.keys);
    st.run(move |e| {
        let list = keys.list(tenant.as_ref())?;
        let scope = CursorScope { route: CursorRoute::Keys, tenant: tenant.as_ref().map_or("", TenantId::as_str), caller: "admin", query: "" };
        let key_of = |k: &memwarden_api::KeyInfo| [k.created_ms.to_be_bytes().as_slice(), k.key_id.as_bytes()].concat();
        let (page, next_cursor) = admin_page(e, &scope, list, key_of, &q)?;
        Ok(Json(KeysOut { keys: page, next_cursor }))
    })
    .await
}

/// The cursor scope of an admin list of one tenant.
fn admin_scope(route: CursorRoute, tenant: &TenantId) -> CursorScope<'_> {
    CursorScope { route, tenant: tenant.as_str(), caller: "admin", query: "" }
}

/// One page of an admin list (sorted by `key`, keys unique) after the query's cursor.
fn admin_page<T>(e: &Engine, scope: &CursorScope<'_>, items: Vec<T>, key: impl Fn(&T) -> Vec<u8>, q: &TenantQuery) -> Result<(Vec<T>, Option<String>), ApiError> {
    let limit = memwarden_engine::check_limit(q.limit.unwrap_or(memwarden_engine::PAGE_LIMIT_DEFAULT))?;
    let after = q.cursor.as_deref().map(|c| e.open_cursor(scope, c)).transpose()?;
    let (page, next) = memwarden_engine::page_sorted(items, key, after.as_deref(), limit);
    let next_cursor = next.map(|p| e.seal_cursor(scope, &p)).transpose()?;
    Ok((page, next_cursor))
}

/// Revoke an API key (admin token); it stops working at the next request.
#[utoipa::path(delete, path = "/v1/admin/keys/{key_id}", tag = "admin",
    params(("key_id" = String, Path, description = "The key's id")),
    responses(
        (status = 200, description = "Revoked", body = MemoryRevokedOut),
        (status = 401, description = "Not authenticated", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Not the admin token", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such active key", body = Problem, content_type = "application/problem+json"),
    ))]
async fn admin_revoke_key(State(st): State<AppState>, _a: AdminCaller, ApiPath(key_id): ApiPath) -> Result<Json<RevokeOut>, ApiError> {
    let keys = Arc::clone(&st.0.keys);
    let k = key_id.clone();
    let revoked = st.run(move |_| Ok(keys.revoke(&k)?)).await?;
    if !revoked {
        return Err(ApiError::not_found(format!("no active key {key_id}")));
    }
    tracing::info!(key_id = %key_id, "api key revoked");
    Ok(Json(RevokeOut { key_id, revoked }))
}

// ---------------------------------------------------------------------------------------------
// Mem0-compatible aliases (tolerant bodies; identity fields are ignored)

fn lenient_string(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn lenient_add(body: &serde_json::Value) -> Result<Vec<AddMemory>, ApiError> {
    let obj = body.as_object().ok_or_else(|| ApiError::invalid("expected a JSON object"))?;
    let namespace = obj.get("namespace").and_then(|v| v.as_str()).unwrap_or("default").to_owned();
    let metadata: BTreeMap<String, String> =
        obj.get("metadata").and_then(|m| m.as_object()).map(|m| m.iter().map(|(k, v)| (k.clone(), lenient_string(v))).collect()).unwrap_or_default();
    let session = obj.get("session").or_else(|| obj.get("run_id")).and_then(|v| v.as_str()).map(str::to_owned);
    let base = |content: String, route: Option<RouteName>| AddMemory {
        namespace: namespace.clone(),
        content,
        route,
        parents: Vec::new(),
        readers: None,
        metadata: metadata.clone(),
        session: session.clone(),
        task: None,
    };
    if let Some(msgs) = obj.get("messages") {
        let msgs = match msgs {
            serde_json::Value::String(s) => vec![s.clone()],
            serde_json::Value::Array(a) => a
                .iter()
                .filter_map(|m| match m {
                    serde_json::Value::String(s) => Some(s.clone()),
                    serde_json::Value::Object(o) => o.get("content").and_then(|c| c.as_str()).map(str::to_owned),
                    _ => None,
                })
                .collect(),
            _ => return Err(ApiError::invalid("messages must be a string or an array of {role, content}")),
        };
        return Ok(msgs.into_iter().map(|c| base(c, Some(RouteName::Dialogue))).collect());
    }
    let content = obj.get("content").or_else(|| obj.get("memory")).and_then(|v| v.as_str()).ok_or_else(|| ApiError::invalid("content (or messages) is required"))?;
    let route = obj.get("route").and_then(|r| serde_json::from_value::<RouteName>(r.clone()).ok());
    Ok(vec![base(content.to_owned(), route)])
}

/// Mem0-compatible add: `{"messages": [{"role", "content"}], "metadata"}` (one memory per message)
/// or `{"content"}`. Unknown fields (`user_id`, `agent_id`, `origin`, `trusted`, ...) are ignored:
/// the key's principal fixes identity and origin.
#[utoipa::path(post, path = "/memories", tag = "mem0",
    request_body(content = Object, description = "Mem0-style body"),
    responses(
        (status = 201, description = "Stored (one memory)", body = WriteOut),
        (status = 200, description = "Batch results (messages)", body = BatchOut),
        (status = 400, description = "Bad input", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No valid API key", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "The write gate refused", body = Problem, content_type = "application/problem+json"),
    ))]
async fn alias_add(State(st): State<AppState>, c: Caller, ApiJson(body): ApiJson<serde_json::Value>) -> Result<Response, ApiError> {
    let mut ms = lenient_add(&body)?;
    if body.get("messages").is_some() {
        let max = st.0.batch_max;
        return Ok(Json(st.run(move |e| ops::add_many(e, &c.actor, ms, max)).await?).into_response());
    }
    let one = ms.pop().ok_or_else(|| ApiError::invalid("nothing to add"))?;
    Ok(created(st.run(move |e| ops::add(e, &c.actor, one)).await?))
}

/// Mem0-compatible list (`namespace`, `limit`, `cursor`; other query parameters are ignored),
/// paged as `GET /v1/memories` (the two share cursors).
#[utoipa::path(get, path = "/memories", tag = "mem0",
    params(("namespace" = Option<String>, Query, description = "Namespace"), ("limit" = Option<usize>, Query, description = "Memories scanned for this page (1..=10000, default 100)"),
        ("cursor" = Option<String>, Query, description = "The `next_cursor` of the previous page, unchanged")),
    responses(
        (status = 200, description = "Memories", body = ListOut),
        (status = 400, description = "Bad query: `limit` out of range, or an invalid cursor (code `invalid_cursor`: malformed, changed, or of another list, query or caller)", body = Problem, content_type = "application/problem+json"),

        (status = 401, description = "No valid API key", body = Problem, content_type = "application/problem+json"),
    ))]
async fn alias_list(State(st): State<AppState>, c: Caller, ApiQuery(q): ApiQuery<BTreeMap<String, String>>) -> Result<Json<ListOut>, ApiError> {
    let ns = q.get("namespace").cloned().unwrap_or_else(|| "default".into());
    let limit = match q.get("limit") {
        Some(l) => l.parse::<usize>().map_err(|_| ApiError::invalid("limit must be a positive integer"))?,
        None => memwarden_engine::PAGE_LIMIT_DEFAULT,
    };
    let cursor = q.get("cursor").cloned();
    Ok(Json(st.run(move |e| ops::list(e, &c.actor, &ns, limit, cursor.as_deref())).await?))
}

/// Mem0-compatible read by id.
#[utoipa::path(get, path = "/memories/{id}", tag = "mem0",
    params(("id" = String, Path, description = "Memory id (32 hex digits)")),
    responses(
        (status = 200, description = "The memory", body = MemoryOut),
        (status = 400, description = "Malformed id", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No valid API key", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Withheld (code `withheld`): the memory is in the caller's scope but a defense layer holds it back; the problem's `withheld` names the layer, the rule and the flags that fired", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "Not found or not readable", body = Problem, content_type = "application/problem+json"),
    ))]
async fn alias_get(st: State<AppState>, c: Caller, id: ApiPath) -> Result<Json<MemoryOut>, ApiError> {
    get_memory(st, c, id).await
}

/// Mem0-compatible search: `query`, `namespace`, and `k`, `limit` or `top_k`; other fields ignored.
#[utoipa::path(post, path = "/search", tag = "mem0",
    request_body(content = Object, description = "Mem0-style search body"),
    responses(
        (status = 200, description = "Hits", body = SearchOut),
        (status = 400, description = "Bad input", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No valid API key", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "No embedder configured", body = Problem, content_type = "application/problem+json"),
    ))]
async fn alias_search(State(st): State<AppState>, c: Caller, ApiJson(body): ApiJson<serde_json::Value>) -> Result<Json<SearchOut>, ApiError> {
    let query = body.get("query").and_then(|q| q.as_str()).ok_or_else(|| ApiError::invalid("query is required"))?.to_owned();
    let namespace = body.get("namespace").and_then(|v| v.as_str()).unwrap_or("default").to_owned();
    let k = ["k", "limit", "top_k"].iter().find_map(|f| body.get(*f).and_then(|v| v.as_u64())).unwrap_or(5);
    let s = SearchIn { namespace, query, k: usize::try_from(k).unwrap_or(usize::MAX), min_label: None };
    Ok(Json(st.run(move |e| ops::search(e, &c.actor, s)).await?))
}

// ---------------------------------------------------------------------------------------------
// System

/// Liveness.
#[utoipa::path(get, path = "/healthz", tag = "system", security(()),
    responses((status = 200, description = "Alive", body = HealthOut)))]
async fn healthz() -> Json<HealthOut> {
    Json(HealthOut { status: "ok".into(), log_entries: None })
}

/// Readiness: the store and the key table answer (no figure of any tenant's log: the route is
/// unauthenticated).
#[utoipa::path(get, path = "/readyz", tag = "system", security(()),
    responses(
        (status = 200, description = "Ready", body = HealthOut),
        (status = 503, description = "Not ready", body = Problem, content_type = "application/problem+json"),
    ))]
async fn readyz(State(st): State<AppState>) -> Result<Json<HealthOut>, ApiError> {
    let keys = Arc::clone(&st.0.keys);
    st.run(move |e| {
            let probe = TenantId::new("readyz").map_err(ApiError::internal)?;
            e.store().count(&probe).map_err(|err| ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", format!("store: {err}")))?;
            keys.ping().map_err(|err| ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", format!("key store: {err}")))?;
            Ok::<(), ApiError>(())
        })
        .await?;
    Ok(Json(HealthOut { status: "ok".into(), log_entries: None }))
}

/// Prometheus metrics (text exposition format).
#[utoipa::path(get, path = "/metrics", tag = "system", security(()),
    responses((status = 200, description = "Metrics", body = String, content_type = "text/plain; version=0.0.4")))]
async fn metrics_text(State(st): State<AppState>) -> Response {
    let mut text = st.0.metrics.render();
    if let Some(t) = &st.0.telemetry {
        text.push_str(&t.tracer().render_metrics());
    }
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], text).into_response()
}

/// This document.
#[utoipa::path(get, path = "/openapi.json", tag = "system", security(()),
    responses((status = 200, description = "The OpenAPI 3.1 document", body = Object)))]
async fn openapi_json() -> Response {
    match ApiDoc::openapi().to_json() {
        Ok(s) => ([(header::CONTENT_TYPE, "application/json")], s).into_response(),
        Err(e) => ApiError::internal(e).into_response(),
    }
}

/// The lineage page's own files: they carry no data (the page asks for an API key and calls
/// the JSON API with it), so they are public. The page may run only its own script and style.
const UI_CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

fn ui_file(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CONTENT_SECURITY_POLICY, UI_CSP),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::REFERRER_POLICY, "no-referrer"),
            (header::X_FRAME_OPTIONS, "DENY"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}

/// The lineage page: a read-only view of a memory's lineage graph, the decisions that cited it
/// and their verdict-log entries with inclusion proofs. It holds no data; it asks for an API key
/// and reads the JSON API with it (`/v1/memories/{id}/lineage`, `/decisions`, `/v1/audit/*`).
#[utoipa::path(get, path = "/ui", tag = "system", security(()),
    responses((status = 200, description = "The page (HTML)", body = String, content_type = "text/html")))]
async fn ui_page() -> Response {
    ui_file("text/html; charset=utf-8", include_str!("ui/index.html"))
}

/// The lineage page's script.
#[utoipa::path(get, path = "/ui/app.js", tag = "system", security(()),
    responses((status = 200, description = "The page's script", body = String, content_type = "text/javascript")))]
async fn ui_script() -> Response {
    ui_file("text/javascript; charset=utf-8", include_str!("ui/app.js"))
}

/// The lineage page's style sheet.
#[utoipa::path(get, path = "/ui/app.css", tag = "system", security(()),
    responses((status = 200, description = "The page's style sheet", body = String, content_type = "text/css")))]
async fn ui_style() -> Response {
    ui_file("text/css; charset=utf-8", include_str!("ui/app.css"))
}

async fn not_found() -> ApiError {
    ApiError::not_found("no such route")
}

async fn method_not_allowed() -> ApiError {
    ApiError::new(StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed", "method not allowed on this route")
}

struct SecurityAddon;

impl utoipa::Modify for SecurityAddon {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).bearer_format("mw_<64 hex> API key, or the admin token").build()),
        );
    }
}

/// The OpenAPI document, derived from the handlers' annotations.
#[derive(OpenApi)]
#[openapi(
    info(title = "memwarden", description = "Governed memory for LLM agents. Every request authenticates as a principal (API key); the principal, never the body, fixes tenant, identity and origin. Errors are RFC 9457 problem details with a stable `code`. The MCP endpoint (streamable HTTP) is at `/mcp`."),
    paths(
        add_memories, list_memories, get_memory, update_memory, memory_history, erase_memory, revoke_memory, poison_memory, verify_memory, promote_memory,
        search, derive, tool_calls, feedback,
        memory_lineage, memory_decisions, lineage_export,
        attestations, elevations, withdraw_elevation, grants, prepare_grant, decide,
        audit_verify, audit_checkpoint, audit_proof,
        me, open_session, admin_register, admin_list_principals, admin_mint_key, admin_list_keys, admin_revoke_key,
        alias_add, alias_list, alias_get, alias_update, alias_delete, alias_history, alias_search,
        healthz, readyz, metrics_text, openapi_json, ui_page, ui_script, ui_style,
    ),
    components(schemas(Problem, WithheldOut, WithheldHitOut, AddMemory, AddMany, ParentIn)),
    modifiers(&SecurityAddon),
    security(("bearer" = [])),
    tags(
        (name = "memories", description = "Write, read and search memories"),
        (name = "lineage", description = "Provenance: a memory's lineage and path trust; the tenant's audit trail (PROV-JSON)"),
        (name = "authority", description = "Attestations, grants and action decisions"),
        (name = "audit", description = "The verdict log"),
        (name = "principals", description = "The caller"),
        (name = "admin", description = "Principals and API keys (admin token)"),
        (name = "mem0", description = "Mem0-compatible aliases"),
        (name = "system", description = "Health, metrics, this document, the lineage page"),
    )
)]
pub struct ApiDoc;

/// Strict JSON for a door whose body another library parses (the MCP service): a POST body
/// that is JSON with a duplicate object key is a 400 before the library sees it (it would keep
/// the last value). Anything else passes through unchanged, and the library answers for it.
async fn strict_json_mw(State(st): State<AppState>, req: Request, next: Next) -> Response {
    if req.method() != axum::http::Method::POST {
        return next.run(req).await;
    }
    let (parts, body) = req.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, st.0.body_bytes_max).await else {
        return ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large", format!("request body is larger than the limit of {} bytes", st.0.body_bytes_max)).into_response();
    };
    if let Err(e @ crate::strict::StrictJsonError::DuplicateKey { .. }) = crate::strict::check_no_duplicate_keys(&bytes) {
        return ApiError::invalid(format!("invalid JSON body: {e}")).into_response();
    }
    next.run(Request::from_parts(parts, axum::body::Body::from(bytes))).await
}

/// A request's body must arrive in full within `body_timeout` (issue 35.5: a slow body held a
/// connection for a minute): it is read here, bounded by `body_bytes_max`, before any route
/// sees it. Late: 408 `request_timeout`; too large: 413 `payload_too_large`.
async fn body_deadline_mw(State(st): State<AppState>, req: Request, next: Next) -> Response {
    let (parts, body) = req.into_parts();
    let limit = st.0.body_bytes_max;
    match tokio::time::timeout(st.0.body_timeout, read_bounded(body, limit)).await {
        Err(_) => ApiError::new(StatusCode::REQUEST_TIMEOUT, "request_timeout", format!("the request body did not arrive within {} s", st.0.body_timeout.as_secs())).into_response(),
        Ok(Err(e)) => e.into_response(),
        Ok(Ok(bytes)) => next.run(Request::from_parts(parts, axum::body::Body::from(bytes))).await,
    }
}

/// A request body of at most `limit` bytes. A larger one is read on (and dropped) up to
/// `DRAIN_BYTES_MAX` more, so a client still sending gets the 413 rather than a reset
/// connection.
async fn read_bounded(mut body: axum::body::Body, limit: usize) -> Result<Vec<u8>, ApiError> {
    use http_body_util::BodyExt;
    let mut buf: Vec<u8> = Vec::new();
    let mut seen = 0usize;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| ApiError::invalid(format!("cannot read the request body: {e}")))?;
        let Ok(data) = frame.into_data() else { continue };
        seen = seen.saturating_add(data.len());
        if seen <= limit {
            buf.extend_from_slice(&data);
        } else if seen > limit.saturating_add(DRAIN_BYTES_MAX) {
            break;
        }
    }
    if seen > limit {
        return Err(ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large", format!("request body is larger than the limit of {limit} bytes")));
    }
    debug_assert!(buf.len() <= limit);
    Ok(buf)
}

/// MCP sessions belong to the key that opened them (issue 35.5): a request naming a session
/// another key (or the admin token) opened, or one this server does not know, is answered
/// exactly as the MCP library answers an unknown session (404 "Session not found"), so a key can
/// neither use, nor end, nor learn of a foreign session. The session a successful initialize
/// opens is bound to the caller; a successful DELETE unbinds it.
async fn mcp_session_mw(State(st): State<AppState>, req: Request, next: Next) -> Response {
    let owner = match req.extensions().get::<Auth>() {
        Some(Auth::Key { key_id, .. }) => crate::mcp::SessionOwner::Key(key_id.clone()),
        Some(Auth::Admin) => crate::mcp::SessionOwner::Admin,
        None => return ApiError::unauthorized("no authenticated principal").into_response(),
    };
    let asked = req.headers().get(crate::mcp::SESSION_HEADER).and_then(|v| v.to_str().ok()).map(str::to_owned);
    if let Some(id) = &asked
        && !st.0.mcp_sessions.may_use(id, &owner)
    {
        return crate::mcp::unknown_session_response();
    }
    let deleting = req.method() == axum::http::Method::DELETE;
    let resp = next.run(req).await;
    match (&asked, resp.headers().get(crate::mcp::SESSION_HEADER).and_then(|v| v.to_str().ok())) {
        (None, Some(opened)) if resp.status().is_success() => st.0.mcp_sessions.bind(opened, owner),
        (Some(id), _) if deleting && resp.status().is_success() => st.0.mcp_sessions.unbind(id),
        _ => {}
    }
    resp
}

/// The whole application: public routes, authenticated routes, the MCP service at `/mcp`.
pub(crate) fn router(state: AppState, mcp: crate::mcp::McpHttpService) -> Router {
    let authed = Router::new()
        .route("/v1/memories", post(add_memories).get(list_memories))
        .route("/v1/memories/{id}", get(get_memory).put(update_memory).delete(erase_memory))
        .route("/v1/memories/{id}/revoke", post(revoke_memory))
        .route("/v1/memories/{id}/poison", post(poison_memory))
        .route("/v1/memories/{id}/verify", post(verify_memory))
        .route("/v1/memories/{id}/promote", post(promote_memory))
        .route("/v1/memories/{id}/history", get(memory_history))
        .route("/v1/memories/{id}/lineage", get(memory_lineage))
        .route("/v1/memories/{id}/decisions", get(memory_decisions))
        .route("/v1/lineage/export", get(lineage_export))
        .route("/v1/search", post(search))
        .route("/v1/feedback", post(feedback))
        .route("/v1/derive", post(derive))
        .route("/v1/tool-calls", post(tool_calls))
        .route("/v1/attestations", post(attestations))
        .route("/v1/elevations", get(elevations))
        .route("/v1/elevations/withdraw", post(withdraw_elevation))
        .route("/v1/grants", post(grants))
        .route("/v1/grants/prepare", post(prepare_grant))
        .route("/v1/actions/decide", post(decide))
        .route("/v1/audit/verify", get(audit_verify))
        .route("/v1/audit/checkpoint", post(audit_checkpoint))
        .route("/v1/audit/proof/{index}", get(audit_proof))
        .route("/v1/principals/me", get(me))
        .route("/v1/sessions", post(open_session))
        .route("/v1/admin/principals", post(admin_register).get(admin_list_principals))
        .route("/v1/admin/keys", post(admin_mint_key).get(admin_list_keys))
        .route("/v1/admin/keys/{key_id}", axum::routing::delete(admin_revoke_key))
        .route("/memories", post(alias_add).get(alias_list))
        .route("/memories/{id}", get(alias_get).put(alias_update).delete(alias_delete))
        .route("/memories/{id}/history", get(alias_history))
        .route("/search", post(alias_search))
        .route_layer(middleware::from_fn_with_state(state.clone(), crate::idempotency::idempotency_mw))
        .merge(
            Router::new()
                .route_service("/mcp", mcp)
                .route_layer(middleware::from_fn_with_state(state.clone(), strict_json_mw))
                .route_layer(middleware::from_fn_with_state(state.clone(), mcp_session_mw)),
        )
        .route_layer(middleware::from_fn_with_state(state.clone(), auth_mw));
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics_text))
        .route("/openapi.json", get(openapi_json))
        .route("/ui", get(ui_page))
        .route("/ui/app.js", get(ui_script))
        .route("/ui/app.css", get(ui_style))
        .merge(authed)
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(middleware::from_fn_with_state(state.clone(), body_deadline_mw))
        .layer(middleware::from_fn_with_state(state.clone(), observe_mw))
        .with_state(state)
}
