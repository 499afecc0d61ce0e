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
}

impl ApiError {
    /// A new error.
    pub fn new(status: StatusCode, code: &'static str, detail: impl Into<String>) -> Self {
        Self { status, code, detail: detail.into(), retry_after: None }
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
    /// 500 `internal` (the detail stays generic; the cause is logged).
    pub fn internal(cause: impl std::fmt::Display) -> Self {
        tracing::error!(error = %cause, "internal error");
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", "internal error; see the server log")
    }
    /// The problem-details body.
    pub fn problem(&self) -> Problem {
        Problem {
            kind: format!("urn:memwarden:problem:{}", self.code),
            title: self.status.canonical_reason().unwrap_or("Error").to_owned(),
            status: self.status.as_u16(),
            detail: self.detail.clone(),
            code: self.code.to_owned(),
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
        let body = serde_json::to_vec(&self.problem()).unwrap_or_default();
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
            EngineError::Commit(CommitError::BatchTooLarge(_)) => Self::invalid(e.to_string()),
            EngineError::Refused { .. } => Self::new(StatusCode::UNPROCESSABLE_ENTITY, "refused", e.to_string()),
            // A configuration choice, not a server fault (and not a 5xx).
            EngineError::LayerOff(_) => Self::new(StatusCode::CONFLICT, "layer_off", e.to_string()),
            // The caller named a session it was never issued (never echoed: it is caller text).
            EngineError::UnknownSession => Self::new(StatusCode::BAD_REQUEST, "unknown_session", e.to_string()),
            // The database server is down or unreachable: retry later, not a fault of ours.
            EngineError::Store(memwarden_store::StoreError::Database(_)) => Self::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", "the database is unavailable; retry later"),
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
