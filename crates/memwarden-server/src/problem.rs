//! Errors as RFC 9457 problem details with stable codes.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use memwarden_engine::EngineError;
use memwarden_store::CommitError;
pub use memwarden_api::Problem;

/// An error on its way to becoming a problem-details response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// HTTP status.
    pub status: StatusCode,
    /// Stable code.
    pub code: &'static str,
    /// Detail text (never contains secrets or memory content).
    pub detail: String,
    /// Seconds the client should wait (429).
    pub retry_after: Option<u64>,
    /// For a 500: the id (16 random hex digits) under which the server logged the cause; the
    /// body carries it as `error_id`, so a report can be matched with the log line.
    pub error_id: Option<String>,
    /// For a 403 `withheld`: the memory and the layer, rule and flags that held it back (boxed:
    /// every other error is small).
    pub withheld: Option<Box<memwarden_api::dto::WithheldOut>>,
}

impl ApiError {
    /// A new error.
    pub fn new(status: StatusCode, code: &'static str, detail: impl Into<String>) -> Self {
        Self { status, code, detail: detail.into(), retry_after: None, error_id: None, withheld: None }
    }
    /// 403 `withheld`: a memory of the caller's scope that a defense layer holds back, with the
    /// layer, the rule and the flags that fired (the memory exists for this caller: never a 404).
    pub fn withheld(w: &memwarden_engine::WithheldMemory) -> Self {
        Self { withheld: Some(Box::new(crate::ops::withheld_out(w))), ..Self::new(StatusCode::FORBIDDEN, "withheld", w.to_string()) }
    }
    /// 400 `invalid_input`.
    pub fn invalid(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_input", detail)
    }
    /// 401 `unauthorized`.
    pub fn unauthorized(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "unauthorized", detail)
    }
    /// 403 `forbidden`.
    pub fn forbidden(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, "forbidden", detail)
    }
    /// 404 `not_found`.
    pub fn not_found(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", detail)
    }
    /// 500 `internal`: the detail stays generic; the cause is logged to stderr under a fresh
    /// error id, which the problem carries (`error_id`, and named in the detail).
    pub fn internal(cause: impl std::fmt::Display) -> Self {
        let (e, line) = Self::internal_logged(&cause);
        if tracing::dispatcher::has_been_set() {
            tracing::error!("{line}");
        } else {
            eprintln!("memwarden-server: {line}");
        }
        e
    }
    /// The 500 for `cause` and the line to log for it (both name the same error id).
    fn internal_logged(cause: &dyn std::fmt::Display) -> (Self, String) {
        let id = error_id();
        let line = internal_log_line(&id, cause);
        let mut e = Self::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", format!("internal error {id}; see the server log"));
        e.error_id = Some(id);
        (e, line)
    }
    /// A stored row or log entry failed its integrity check: 503 `tampered` (the request is
    /// refused, nothing is served from the row), with an error id; the log line names the row.
    /// Never a 500: the server did not fail, the data did (`memwarden audit verify` names it).
    pub fn tampered(cause: &memwarden_store::StoreError) -> Self {
        let id = error_id();
        let what = match cause {
            memwarden_store::StoreError::RowTampered { table, .. } => format!("a stored {table} row"),
            memwarden_store::StoreError::ItemTampered { .. } => "a stored memory".to_owned(),
            _ => "the verdict log".to_owned(),
        };
        let line = format!("store integrity check failed (error {id}): {cause}");
        if tracing::dispatcher::has_been_set() {
            tracing::error!("{line}");
        } else {
            eprintln!("memwarden-server: {line}");
        }
        let detail = format!("{what} does not match the verdict log (error {id}): the request is refused; an operator should run `memwarden audit verify`");
        let mut e = Self::new(StatusCode::SERVICE_UNAVAILABLE, "tampered", detail);
        e.error_id = Some(id);
        e
    }
    /// The response body: the problem details, plus `error_id` for a 500.
    pub fn problem_json(&self) -> serde_json::Value {
        serde_json::to_value(self.problem()).unwrap_or_default()
    }
    /// The problem-details body (`error_id` for a 500).
    pub fn problem(&self) -> Problem {
        Problem {
            kind: format!("urn:memwarden:problem:{}", self.code),
            title: self.status.canonical_reason().unwrap_or("Error").to_owned(),
            status: self.status.as_u16(),
            detail: self.detail.clone(),
            code: self.code.to_owned(),
            error_id: self.error_id.clone(),
            withheld: self.withheld.as_deref().cloned(),
        }
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({}): {}", self.code, self.status.as_u16(), self.detail)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = serde_json::to_vec(&self.problem_json()).unwrap_or_default();
        let mut resp = (self.status, body).into_response();
        resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/problem+json"));
        if self.status == StatusCode::UNAUTHORIZED {
            resp.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer realm=\"memwarden\""));
        }
        if let Some(s) = self.retry_after
            && let Ok(v) = HeaderValue::from_str(&s.to_string())
        {
            resp.headers_mut().insert(header::RETRY_AFTER, v);
        }
        resp
    }
}

impl From<EngineError> for ApiError {
    fn from(e: EngineError) -> Self {
        match &e {
            EngineError::NotFound(_) => Self::not_found(e.to_string()),
            EngineError::Withheld(w) => Self::withheld(w),
            EngineError::UnknownPrincipal { .. } => Self::not_found(e.to_string()),
            EngineError::Write(_) => Self::new(StatusCode::UNPROCESSABLE_ENTITY, "write_refused", e.to_string()),
            EngineError::Invalid(_) => Self::invalid(e.to_string()),
            EngineError::Forbidden(_) => Self::forbidden(e.to_string()),
            EngineError::NoEmbedder => Self::new(StatusCode::SERVICE_UNAVAILABLE, "search_unavailable", e.to_string()),
            EngineError::Embed(_) => {
                tracing::warn!(error = %e, "embedder failed");
                Self::new(StatusCode::SERVICE_UNAVAILABLE, "embedder_failed", "the embedder failed; see the server log")
            }
            // A compare-and-set that lost a race (the memory moved on since it was read) is the
            // caller's to retry, never a server fault.
            EngineError::Commit(
                CommitError::PrincipalExists(_) | CommitError::ItemExists(_) | CommitError::GrantAlreadyUsed(_) | CommitError::Conflict { .. },
            ) => Self::new(StatusCode::CONFLICT, "conflict", e.to_string()),
            // Erased between the read and the commit.
            EngineError::Commit(CommitError::ItemMissing(_)) => Self::not_found(e.to_string()),
            // Another request holds the idempotency key (still running): retry after it.
            EngineError::Commit(CommitError::IdempotencyKeyUsed(_)) => {
                Self::new(StatusCode::CONFLICT, "idempotency_in_flight", "another request with this idempotency key is running or has just committed; retry it to get its answer")
            }
            EngineError::Commit(CommitError::BatchTooLarge(_)) => Self::invalid(e.to_string()),
            EngineError::Refused { .. } => Self::new(StatusCode::UNPROCESSABLE_ENTITY, "refused", e.to_string()),
            // A configuration choice, not a server fault (and not a 5xx).
            EngineError::LayerOff(_) => Self::new(StatusCode::CONFLICT, "layer_off", e.to_string()),
            // The caller named a session it was never issued (never echoed: it is caller text).
            EngineError::UnknownSession => Self::new(StatusCode::BAD_REQUEST, "unknown_session", e.to_string()),
            // A position too long to seal is our bug, not the caller's.
            EngineError::Cursor(memwarden_engine::CursorError::PositionTooLong) => Self::internal(&e),
            EngineError::Cursor(_) => Self::new(StatusCode::BAD_REQUEST, "invalid_cursor", e.to_string()),
            // The database server is down or unreachable: retry later, not a fault of ours.
            // Another process (or store) has the data directory open: say which, not a 500.
            EngineError::Store(memwarden_store::StoreError::Locked(_)) => Self::new(StatusCode::CONFLICT, "conflict", e.to_string()),
            EngineError::Store(memwarden_store::StoreError::Database(_)) => Self::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", "the database is unavailable; retry later"),
            EngineError::Store(
                t @ (memwarden_store::StoreError::RowTampered { .. }
                | memwarden_store::StoreError::ItemTampered { .. }
                | memwarden_store::StoreError::LogTampered(_)),
            ) => Self::tampered(t),
            EngineError::Commit(_) | EngineError::Store(_) | EngineError::Lineage(_) => Self::internal(&e),
        }
    }
}

impl From<crate::keys::KeyError> for ApiError {
    fn from(e: crate::keys::KeyError) -> Self {
        match e {
            crate::keys::KeyError::Invalid(m) => Self::invalid(m),
            crate::keys::KeyError::Postgres(_) => Self::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", "the key store is unavailable; retry later"),
            other => Self::internal(other),
        }
    }
}

impl From<memwarden_core::prelude::IdError> for ApiError {
    fn from(e: memwarden_core::prelude::IdError) -> Self {
        Self::invalid(e.to_string())
    }
}

/// A fresh error id: 16 random hex digits (a counter-and-time fallback if the system has no
/// randomness, so a 500 always carries one).
fn error_id() -> String {
    let mut r = [0u8; 8];
    if getrandom::fill(&mut r).is_err() {
        static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
        r = (t ^ N.fetch_add(1, std::sync::atomic::Ordering::Relaxed).rotate_left(48)).to_be_bytes();
    }
    hex::encode(r)
}

/// The log line of a 500: its error id and the real cause (never sent to the client).
fn internal_log_line(error_id: &str, cause: &dyn std::fmt::Display) -> String {
    format!("internal error {error_id}: {cause}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    #[tokio::test]
    async fn a_500_carries_an_error_id_that_the_log_line_names() {
        let (e, line) = ApiError::internal_logged(&"disk on fire at /var/lib/secret");
        let id = e.error_id.clone().unwrap();
        assert_eq!(id.len(), 16);
        assert!(id.chars().all(|c| c.is_ascii_hexdigit()));
        assert!(line.contains(&id) && line.contains("disk on fire at /var/lib/secret"), "{line}");
        assert!(!e.detail.contains("disk on fire"), "the detail stays generic: {}", e.detail);
        let resp = e.into_response();
        assert_eq!(resp.status(), StatusCode::INTERNAL_SERVER_ERROR);
        let body: serde_json::Value = serde_json::from_slice(&resp.into_body().collect().await.unwrap().to_bytes()).unwrap();
        assert_eq!(body["error_id"], id.as_str());
        assert_eq!(body["code"], "internal");
        assert!(!body.to_string().contains("disk on fire"), "{body}");
        assert_ne!(ApiError::internal("x").error_id, ApiError::internal("x").error_id, "a fresh id per error");
    }

    #[test]
    fn a_withheld_memory_is_a_403_that_names_the_layer_rule_and_flags() {
        let id = memwarden_core::prelude::ItemId::from_bytes([7; 16]);
        let w = memwarden_engine::WithheldMemory { id, layer: memwarden_core::prelude::Layer::Lifecycle, rule: "quarantined".into(), flags: vec!["external_source".into(), "self_claim".into()] };
        let e = ApiError::from(EngineError::Withheld(w));
        assert_eq!((e.status, e.code), (StatusCode::FORBIDDEN, "withheld"));
        let body = e.problem_json();
        assert_eq!(body["type"], "urn:memwarden:problem:withheld");
        assert_eq!(body["withheld"]["id"], id.to_string());
        assert_eq!(body["withheld"]["layer"], "lifecycle");
        assert_eq!(body["withheld"]["rule"], "quarantined");
        assert_eq!(body["withheld"]["flags"], serde_json::json!(["external_source", "self_claim"]));
        assert!(body.get("error_id").is_none());
        assert!(ApiError::not_found("no").problem_json().get("withheld").is_none(), "only a withheld problem carries it");
    }

    #[test]
    fn only_a_500_carries_an_error_id() {
        assert!(ApiError::not_found("no").problem_json().get("error_id").is_none());
        assert!(ApiError::internal("boom").problem_json().get("error_id").is_some());
    }

    #[test]
    fn a_data_directory_in_use_is_a_409_that_names_the_pid() {
        let e = ApiError::from(EngineError::Store(memwarden_store::StoreError::locked(std::path::Path::new("/srv/mw"), Some(4242))));
        assert_eq!((e.status, e.code), (StatusCode::CONFLICT, "conflict"));
        assert_eq!(e.detail, "data directory /srv/mw in use by pid 4242");
        assert!(e.error_id.is_none());
    }
}
