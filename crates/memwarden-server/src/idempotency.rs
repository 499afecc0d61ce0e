//! `Idempotency-Key` on every mutating route (issue 35.4). A request with the header runs its
//! operation under the key ([`memwarden_engine::Engine::idempotent`]): the key is claimed in the
//! same transaction as the operation's commit, so a write whose answer was lost (a 503 after the
//! commit, a crash) is found by the retry and never applied twice. The answer is then kept with
//! the key (for [`memwarden_store::IDEMPOTENCY_TTL_MS`]) and a retry gets it back:
//!
//! - same key, same request (method, path, body): the first answer, with `Idempotent-Replayed: true`;
//! - same key, another request: 422 `idempotency_key_reused`;
//! - same key while the first request is still running: 409 `idempotency_in_flight`;
//! - the first request committed but its answer could not be kept: 409 `idempotency_answer_lost`
//!   naming its log index (the write exists once; read it back).
//!
//! Keys are scoped to the calling principal. A request that commits nothing (an invalid body,
//! a read) leaves its key free; a refusal the layers logged committed, and its answer is
//! replayed like any other. The admin token is not a principal: its routes
//! refuse the header (422 `idempotency_unsupported`) rather than pretend to honour it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use memwarden_store::{IDEMPOTENCY_ANSWER_BYTES_MAX, IdempotencyRecord, IdempotencyTag};
use sha2::{Digest, Sha256};

use crate::http::{AppState, Auth};
use crate::problem::ApiError;

/// The request header.
pub(crate) const HEADER: &str = "idempotency-key";
/// The header on a replayed answer.
pub(crate) const REPLAYED: &str = "idempotent-replayed";
/// Largest response body read back to keep (a larger answer is not kept).
const RESPONSE_BYTES_READ_MAX: usize = 4 * IDEMPOTENCY_ANSWER_BYTES_MAX;

/// The key of the request this task serves, and whether its operation claimed it.
#[derive(Clone)]
pub(crate) struct Pending {
    pub tag: IdempotencyTag,
    pub claimed: Arc<AtomicBool>,
}

tokio::task_local! {
    static REQUEST: Pending;
}

/// The idempotency key of the request the current task serves, if any (read by
/// `AppState::run`, which runs the operation under it).
pub(crate) fn current() -> Option<Pending> {
    REQUEST.try_with(Pending::clone).ok()
}

fn digest(method: &Method, uri: &axum::http::Uri, body: &[u8]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(method.as_str().as_bytes());
    h.update([0]);
    h.update(uri.path_and_query().map_or(uri.path(), |p| p.as_str()).as_bytes());
    h.update([0]);
    h.update(body);
    h.finalize().into()
}

/// How long after its commit a record without an answer counts as still being answered.
const ANSWER_PENDING_MS: u64 = 60_000;

fn in_flight() -> Response {
    ApiError::new(StatusCode::CONFLICT, "idempotency_in_flight", "another request with this idempotency key is running or has just committed; retry it to get its answer")
        .into_response()
}

fn replay(r: IdempotencyRecord, now_ms: u64) -> Response {
    if r.answer.is_none() && now_ms.saturating_sub(r.created_ms) < ANSWER_PENDING_MS {
        return in_flight();
    }
    let Some((status, body)) = r.answer else {
        return ApiError::new(
            StatusCode::CONFLICT,
            "idempotency_answer_lost",
            format!("the first request with this idempotency key committed (log index {}), but its answer was not kept; read the result back", r.log_index),
        )
        .into_response();
    };
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
    let ct = if status.is_client_error() || status.is_server_error() { "application/problem+json" } else { "application/json" };
    let mut resp = (status, body).into_response();
    resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(ct));
    resp.headers_mut().insert(REPLAYED, HeaderValue::from_static("true"));
    resp
}

/// The middleware (inside authentication, on the routes that change state).
pub(crate) async fn idempotency_mw(State(st): State<AppState>, req: Request, next: Next) -> Response {
    let Some(value) = req.headers().get(HEADER).cloned() else { return next.run(req).await };
    if !matches!(*req.method(), Method::POST | Method::PUT | Method::PATCH | Method::DELETE) {
        return next.run(req).await;
    }
    let actor = match req.extensions().get::<Auth>() {
        Some(Auth::Key { actor, .. }) => actor.clone(),
        Some(Auth::Admin) => {
            return ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "idempotency_unsupported", "the admin routes do not take an Idempotency-Key").into_response();
        }
        None => return ApiError::unauthorized("no authenticated principal").into_response(),
    };
    let (parts, body) = req.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, st.0.body_bytes_max).await else {
        return ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large", format!("request body is larger than the limit of {} bytes", st.0.body_bytes_max)).into_response();
    };
    let d = digest(&parts.method, &parts.uri, &bytes);
    let key = value.to_str().unwrap_or("");
    let tag = match IdempotencyTag::new(actor.tenant().clone(), actor.id().clone(), key, d) {
        Ok(t) => t,
        Err(e) => return ApiError::invalid(format!("Idempotency-Key: {e}")).into_response(),
    };
    let engine = Arc::clone(&st.0.engine);
    let probe = tag.clone();
    let now_ms = st.0.engine.now_ms();
    let found = tokio::task::spawn_blocking(move || engine.store().idempotency_record(probe.tenant(), probe.principal(), probe.key(), now_ms)).await;
    match found {
        Err(e) => return ApiError::internal(e).into_response(),
        Ok(Err(e)) => return ApiError::from(memwarden_engine::EngineError::Store(e)).into_response(),
        Ok(Ok(Some(r))) if r.digest != d => {
            return ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "idempotency_key_reused", "this idempotency key was used for another request (method, path or body differ)").into_response();
        }
        Ok(Ok(Some(r))) => return replay(r, now_ms),
        Ok(Ok(None)) => {}
    }
    let pending = Pending { tag: tag.clone(), claimed: Arc::new(AtomicBool::new(false)) };
    let req = Request::from_parts(parts, axum::body::Body::from(bytes));
    let resp = REQUEST.scope(pending.clone(), next.run(req)).await;
    if !pending.claimed.load(Ordering::SeqCst) {
        return resp;
    }
    keep_answer(&st, tag, resp).await
}

/// Keep a claimed request's answer for its retries, and send it.
async fn keep_answer(st: &AppState, tag: IdempotencyTag, resp: Response) -> Response {
    let (parts, body) = resp.into_parts();
    let bytes = match axum::body::to_bytes(body, RESPONSE_BYTES_READ_MAX).await {
        Ok(b) => b,
        Err(e) => return ApiError::internal(format!("reading a committed request's answer: {e}")).into_response(),
    };
    let engine = Arc::clone(&st.0.engine);
    let status = parts.status.as_u16();
    let body = bytes.clone();
    let kept = tokio::task::spawn_blocking(move || engine.store().record_answer(&tag, status, &body)).await;
    if !matches!(kept, Ok(Ok(true))) {
        tracing::warn!(status, bytes = bytes.len(), "the answer of an idempotent request was not kept; a retry is told it committed");
    }
    Response::from_parts(parts, axum::body::Body::from(bytes))
}
