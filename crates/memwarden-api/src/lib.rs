//! memwarden's wire types: the bodies of the HTTP API, the arguments of the MCP tools, RFC 9457
//! problem details, and the strict JSON parser every door uses (duplicate keys refused, errors
//! that never echo a value).
//!
//! This crate has no I/O and no engine: the server, the CLI's remote mode, the Python binding and
//! the fuzz targets share these types, so what a door accepts is decided in one place.

pub mod dto;
pub mod strict;

use memwarden_core::prelude::{PrincipalId, TenantId};
use serde::{Deserialize, Serialize};

/// An RFC 9457 problem-details body (`application/problem+json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Problem {
    /// A URI naming the problem type: `urn:memwarden:problem:<code>`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Short summary of the problem type.
    pub title: String,
    /// HTTP status.
    pub status: u16,
    /// What happened in this case.
    pub detail: String,
    /// Stable machine-readable code: `unauthorized`, `forbidden`, `withheld`, `not_found`,
    /// `invalid_input`, `payload_too_large`, `unsupported_media_type`, `method_not_allowed`,
    /// `rate_limited`, `write_refused`, `conflict`, `search_unavailable`, `embedder_failed`,
    /// `unavailable`, `internal`.
    pub code: String,
    /// For a 500 `internal`: the id under which the server logged the cause (16 hex digits).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_id: Option<String>,
    /// For a 403 `withheld`: the memory (in the caller's scope, so its existence is no secret)
    /// and the layer, rule and flags that held it back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub withheld: Option<dto::WithheldOut>,
}

/// What the server knows about a key (never its secret).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct KeyInfo {
    /// Public id of the key (`key_` + 16 hex digits); used to revoke it.
    pub key_id: String,
    /// Tenant of the principal.
    #[schema(value_type = String)]
    pub tenant: TenantId,
    /// The principal the key authenticates as.
    #[schema(value_type = String)]
    pub principal: PrincipalId,
    /// Free label (who holds it, what for).
    pub label: String,
    /// When it was minted (ms since the Unix epoch).
    pub created_ms: u64,
    /// When it was revoked, if it was.
    pub revoked_ms: Option<u64>,
}

/// A freshly minted key: the only time the secret exists outside its holder.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct MintedKey {
    /// The secret, `mw_` + 64 hex digits. Shown once.
    pub token: String,
    /// The key's public record.
    pub info: KeyInfo,
}

