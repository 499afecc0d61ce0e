//! User signing keys and grant minting. In production a user's key lives with the user (their
//! device or identity provider); the CLI and the demo keep demo users' keys under
//! `<data>/user-keys/` so a single machine can play both sides.

use crate::EngineError;
use ed25519_dalek::SigningKey;
use memwarden_core::authority::grant::{GRANT_TTL_MS_MAX, Grant, SignedGrant};
use memwarden_core::prelude::*;
use std::path::{Path, PathBuf};

/// A fresh random Ed25519 key.
pub fn generate_key() -> Result<SigningKey, EngineError> {
    let mut seed = [0u8; 32];
    getrandom::fill(&mut seed).map_err(|e| EngineError::Invalid(format!("no randomness: {e}")))?;
    Ok(SigningKey::from_bytes(&seed))
}

fn key_path(dir: &Path, tenant: &TenantId, user: &PrincipalId) -> PathBuf {
    dir.join("user-keys").join(tenant.as_str()).join(format!("{user}.ed25519"))
}

/// Save a user's key (owner-only permissions).
pub fn save_user_key(dir: &Path, tenant: &TenantId, user: &PrincipalId, key: &SigningKey) -> Result<PathBuf, EngineError> {
    use std::io::Write;
    let path = key_path(dir, tenant, user);
    let io = |e: std::io::Error| EngineError::Invalid(format!("cannot write {}: {e}", path.display()));
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(io)?;
    }
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    let mut f = opts.open(&path).map_err(io)?;
    f.write_all(hex::encode(key.to_bytes()).as_bytes()).map_err(io)?;
    f.sync_all().map_err(io)?;
    Ok(path)
}

/// Load a user's key.
pub fn load_user_key(dir: &Path, tenant: &TenantId, user: &PrincipalId) -> Result<SigningKey, EngineError> {
    let path = key_path(dir, tenant, user);
    let text = std::fs::read_to_string(&path).map_err(|e| EngineError::Invalid(format!("no signing key for user {user} at {}: {e}", path.display())))?;
    let mut seed = [0u8; 32];
    hex::decode_to_slice(text.trim(), &mut seed).map_err(|_| EngineError::Invalid(format!("{} is not a key file", path.display())))?;
    Ok(SigningKey::from_bytes(&seed))
}

/// What a grant binds.
#[derive(Debug, Clone)]
pub struct GrantSpec<'a> {
    /// The store it is spent on ([`crate::Engine::store_id`]; a remote caller reads it from
    /// `GET /v1/whoami`).
    pub store: &'a str,
    /// Tool.
    pub tool: &'a str,
    /// Value key.
    pub key: &'a str,
    /// Raw value.
    pub value: &'a str,
    /// Value kind.
    pub kind: ValueKind,
    /// Raw amount.
    pub amount: Option<&'a str>,
    /// Lifetime in ms (at most a day).
    pub ttl_ms: u64,
}

/// Mint and sign a one-time grant.
pub fn mint_grant(key: &SigningKey, tenant: &TenantId, user: &PrincipalId, spec: &GrantSpec<'_>, now_ms: u64) -> Result<SignedGrant, EngineError> {
    Ok(prepare_grant(tenant, user, spec, now_ms)?.sign(key))
}

/// The unsigned one-time grant for `spec` (normalised value and amount, a fresh nonce, issue and
/// expiry times): what a user signs elsewhere — its [`Grant::signing_bytes`] — when the key
/// does not live with the caller (`POST /v1/grants/prepare`).
pub fn prepare_grant(tenant: &TenantId, user: &PrincipalId, spec: &GrantSpec<'_>, now_ms: u64) -> Result<Grant, EngineError> {
    if spec.ttl_ms == 0 || spec.ttl_ms > GRANT_TTL_MS_MAX {
        return Err(EngineError::Invalid(format!("grant lifetime must be 1..={GRANT_TTL_MS_MAX} ms")));
    }
    let value = NormValue::new(spec.kind, spec.value).map_err(|e| EngineError::Invalid(format!("grant value: {e}")))?;
    let amount = match spec.amount {
        Some(a) => Some(NormValue::new(ValueKind::Amount, a).map_err(|e| EngineError::Invalid(format!("grant amount: {e}")))?.canonical),
        None => None,
    };
    let mut nonce = [0u8; 16];
    getrandom::fill(&mut nonce).map_err(|e| EngineError::Invalid(format!("no randomness: {e}")))?;
    if spec.store.is_empty() || spec.store.len() > memwarden_core::authority::grant::GRANT_STORE_BYTES_MAX {
        return Err(EngineError::Invalid(format!("a grant names its store: 1..={} bytes", memwarden_core::authority::grant::GRANT_STORE_BYTES_MAX)));
    }
    Ok(Grant {
        tenant: tenant.clone(),
        store: spec.store.to_owned(),
        user: user.clone(),
        tool: spec.tool.to_owned(),
        key: spec.key.to_owned(),
        value,
        amount,
        nonce,
        issued_ms: now_ms,
        expires_ms: now_ms + spec.ttl_ms,
    })
}
