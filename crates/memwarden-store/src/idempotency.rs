//! Idempotency records (issue 35.4): a request's `Idempotency-Key` rides the commit of the
//! operation it started, in the same transaction, so a write whose answer was lost (a 503 after
//! the commit, a crash) is found by the retry and never applied twice. The answer is added
//! after the commit ([`crate::Store::record_answer`]) and replayed for the retry.
//!
//! The records are not security state (no decision reads them) and are not bound to the log;
//! each row carries a MAC under a key derived from the store's signing key, so a row forged or
//! edited in the database is refused (`RowTampered`), never replayed. Records live
//! [`IDEMPOTENCY_TTL_MS`]; expired ones are ignored and purged a few at a time by later commits.

use memwarden_core::prelude::*;

use crate::db::{Arg, Db, DbError, query_opt};
use crate::{CommitError, StoreError};

/// Longest accepted `Idempotency-Key` (bytes of visible ASCII).
pub const IDEMPOTENCY_KEY_BYTES_MAX: usize = 255;
/// How long an idempotency record is kept (24 hours).
pub const IDEMPOTENCY_TTL_MS: u64 = 24 * 3600 * 1000;
/// Largest answer kept with a record; a larger one is not kept (its retry is told the first
/// request committed, with its log index).
pub const IDEMPOTENCY_ANSWER_BYTES_MAX: usize = 1 << 20;
/// Expired records purged per tagged commit.
const PURGE_PER_COMMIT_MAX: i64 = 64;

/// One request's idempotency key, scoped to its principal, with the digest of the request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdempotencyTag {
    tenant: TenantId,
    principal: PrincipalId,
    key: String,
    digest: [u8; 32],
}

impl IdempotencyTag {
    /// A tag for `key` (1..=[`IDEMPOTENCY_KEY_BYTES_MAX`] bytes of visible ASCII), sent by
    /// `principal`, over a request whose digest (method, path and body) is `digest`.
    pub fn new(tenant: TenantId, principal: PrincipalId, key: &str, digest: [u8; 32]) -> Result<Self, StoreError> {
        if key.is_empty() || key.len() > IDEMPOTENCY_KEY_BYTES_MAX || !key.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(StoreError::BadQuery(format!("an idempotency key is 1 to {IDEMPOTENCY_KEY_BYTES_MAX} visible ASCII characters")));
        }
        Ok(Self { tenant, principal, key: key.to_owned(), digest })
    }
    /// The tenant.
    pub fn tenant(&self) -> &TenantId {
        &self.tenant
    }
    /// The principal that sent it.
    pub fn principal(&self) -> &PrincipalId {
        &self.principal
    }
    /// The key.
    pub fn key(&self) -> &str {
        &self.key
    }
    /// The request's digest.
    pub fn digest(&self) -> &[u8; 32] {
        &self.digest
    }
}

/// What a store keeps for a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdempotencyRecord {
    /// The digest of the request that used the key first.
    pub digest: [u8; 32],
    /// When it committed.
    pub created_ms: u64,
    /// Its operation's receipt (log index of its last entry).
    pub log_index: u64,
    /// Its answer (HTTP status, body), once recorded.
    pub answer: Option<(u16, Vec<u8>)>,
}

/// The MAC key of idempotency rows.
pub fn mac_key(signing: &ed25519_dalek::SigningKey) -> [u8; 32] {
    crate::keys::hmac_sha256(&signing.to_bytes(), b"memwarden/idempotency-mac/v1")
}

fn mac(key: &[u8; 32], tag_scope: (&str, &str, &str), r: &IdempotencyRecord) -> [u8; 32] {
    let mut m = Vec::with_capacity(128 + r.answer.as_ref().map_or(0, |a| a.1.len()));
    for s in [tag_scope.0, tag_scope.1, tag_scope.2] {
        m.extend_from_slice(&(s.len() as u64).to_be_bytes());
        m.extend_from_slice(s.as_bytes());
    }
    m.extend_from_slice(&r.digest);
    m.extend_from_slice(&r.created_ms.to_be_bytes());
    m.extend_from_slice(&r.log_index.to_be_bytes());
    match &r.answer {
        None => m.push(0),
        Some((status, body)) => {
            m.push(1);
            m.extend_from_slice(&status.to_be_bytes());
            m.extend_from_slice(&(body.len() as u64).to_be_bytes());
            m.extend_from_slice(body);
        }
    }
    crate::keys::hmac_sha256(key, &m)
}

fn i64_of(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// Claim `tag`'s key inside the commit's transaction, before the operation's mutations: `Err`
/// ([`CommitError::IdempotencyKeyUsed`]) when a live record holds it (a concurrent or earlier
/// request with the same key). An expired record of the key is replaced.
pub(crate) fn claim(db: &dyn Db, tag: &IdempotencyTag, now_ms: u64) -> Result<Result<(), CommitError>, DbError> {
    let (t, p, k) = (tag.tenant.as_str(), tag.principal.as_str(), tag.key.as_str());
    let expired_before = i64_of(now_ms.saturating_sub(IDEMPOTENCY_TTL_MS));
    db.execute(
        "DELETE FROM idempotency WHERE (tenant, principal, key) IN (SELECT tenant, principal, key FROM idempotency WHERE created_ms < ?1 LIMIT ?2)",
        &[Arg::Int(expired_before), Arg::Int(PURGE_PER_COMMIT_MAX)],
    )?;
    db.execute("DELETE FROM idempotency WHERE tenant = ?1 AND principal = ?2 AND key = ?3 AND created_ms < ?4", &[Arg::Text(t), Arg::Text(p), Arg::Text(k), Arg::Int(expired_before)])?;
    let inserted = db.execute(
        "INSERT INTO idempotency(tenant, principal, key, digest, created_ms, log_index, status, answer, mac) VALUES(?1, ?2, ?3, ?4, ?5, 0, NULL, NULL, ?6) \
         ON CONFLICT (tenant, principal, key) DO NOTHING",
        &[Arg::Text(t), Arg::Text(p), Arg::Text(k), Arg::Blob(&tag.digest), Arg::Int(i64_of(now_ms)), Arg::Blob(&[0u8; 32])],
    )?;
    debug_assert!(inserted <= 1);
    Ok(if inserted == 1 { Ok(()) } else { Err(CommitError::IdempotencyKeyUsed(tag.key.clone())) })
}

/// Seal a claimed record with its operation's receipt (same transaction, after the mutations).
pub(crate) fn seal(db: &dyn Db, tag: &IdempotencyTag, now_ms: u64, log_index: u64, key: &[u8; 32]) -> Result<(), DbError> {
    let r = IdempotencyRecord { digest: tag.digest, created_ms: now_ms, log_index, answer: None };
    let m = mac(key, (tag.tenant.as_str(), tag.principal.as_str(), &tag.key), &r);
    let n = db.execute(
        "UPDATE idempotency SET log_index = ?1, mac = ?2 WHERE tenant = ?3 AND principal = ?4 AND key = ?5",
        &[Arg::Int(i64_of(log_index)), Arg::Blob(&m), Arg::Text(tag.tenant.as_str()), Arg::Text(tag.principal.as_str()), Arg::Text(&tag.key)],
    )?;
    debug_assert_eq!(n, 1, "a sealed record was claimed in the same transaction");
    Ok(())
}

/// The live record of a key (`None` if there is none or it expired); a row whose MAC does not
/// verify is [`StoreError::RowTampered`].
pub fn get(db: &dyn Db, tenant: &TenantId, principal: &PrincipalId, k: &str, now_ms: u64, key: &[u8; 32]) -> Result<Option<IdempotencyRecord>, StoreError> {
    let row = query_opt(
        db,
        "SELECT digest, created_ms, log_index, status, answer, mac FROM idempotency WHERE tenant = ?1 AND principal = ?2 AND key = ?3",
        &[Arg::Text(tenant.as_str()), Arg::Text(principal.as_str()), Arg::Text(k)],
        |r| Ok((r.blob(0)?, r.int(1)?, r.int(2)?, r.opt_int(3)?, r.opt_blob(4)?, r.blob(5)?)),
    )
    .map_err(|e| StoreError::Database(e.message))?;
    let Some((digest, created, log_index, status, answer, stored_mac)) = row else { return Ok(None) };
    let tampered = |reason: &str| StoreError::RowTampered { table: "idempotency", key: format!("{tenant}/{principal}"), reason: reason.to_owned() };
    let digest: [u8; 32] = digest.try_into().map_err(|_| tampered("malformed digest"))?;
    let answer = match (status, answer) {
        (Some(s), Some(b)) => Some((u16::try_from(s).map_err(|_| tampered("malformed status"))?, b)),
        (None, None) => None,
        _ => return Err(tampered("half an answer")),
    };
    let r = IdempotencyRecord { digest, created_ms: u64::try_from(created).unwrap_or(0), log_index: u64::try_from(log_index).unwrap_or(0), answer };
    if mac(key, (tenant.as_str(), principal.as_str(), k), &r).as_slice() != stored_mac.as_slice() {
        return Err(tampered("its MAC does not verify"));
    }
    if r.created_ms.saturating_add(IDEMPOTENCY_TTL_MS) <= now_ms {
        return Ok(None);
    }
    Ok(Some(r))
}

/// Drop the kept answers of `tenant` that name any of the memories `ids` (an erasure: the
/// answer to a write holds the memory's text). The records stay, re-MAC'd without an answer, so
/// a retry with the key is still told its write committed (`idempotency_answer_lost`), never
/// applied again. Returns how many answers were dropped.
pub(crate) fn forget_answers_naming(db: &dyn Db, tenant: &str, ids: &[ItemId], key: &[u8; 32]) -> Result<usize, DbError> {
    let mut dropped = 0usize;
    for id in ids {
        let pattern = format!("%{id}%");
        let rows = crate::db::query_all(
            db,
            "SELECT principal, key, digest, created_ms, log_index FROM idempotency WHERE tenant = ?1 AND answer IS NOT NULL AND answer LIKE ?2",
            &[Arg::Text(tenant), Arg::Blob(pattern.as_bytes())],
            |r| Ok((r.text(0)?, r.text(1)?, r.blob(2)?, r.int(3)?, r.int(4)?)),
        )?;
        for (principal, k, digest, created, log_index) in rows {
            let digest: [u8; 32] = digest.try_into().map_err(|_| DbError::other("an idempotency row with a malformed digest"))?;
            let r = IdempotencyRecord { digest, created_ms: u64::try_from(created).unwrap_or(0), log_index: u64::try_from(log_index).unwrap_or(0), answer: None };
            let m = mac(key, (tenant, &principal, &k), &r);
            let n = db.execute(
                "UPDATE idempotency SET status = NULL, answer = NULL, mac = ?1 WHERE tenant = ?2 AND principal = ?3 AND key = ?4",
                &[Arg::Blob(&m), Arg::Text(tenant), Arg::Text(&principal), Arg::Text(&k)],
            )?;
            debug_assert_eq!(n, 1);
            dropped += n;
        }
    }
    Ok(dropped)
}

/// Add the answer to `tag`'s record (only the request that claimed the key, by its digest, and
/// only an answer up to [`IDEMPOTENCY_ANSWER_BYTES_MAX`]; a larger one is left out).
pub fn answer(db: &dyn Db, tag: &IdempotencyTag, status: u16, body: &[u8], key: &[u8; 32]) -> Result<bool, StoreError> {
    if body.len() > IDEMPOTENCY_ANSWER_BYTES_MAX {
        return Ok(false);
    }
    let Some(mut r) = get(db, &tag.tenant, &tag.principal, &tag.key, 0, key)? else { return Ok(false) };
    if r.digest != tag.digest || r.answer.is_some() {
        return Ok(false);
    }
    r.answer = Some((status, body.to_vec()));
    let m = mac(key, (tag.tenant.as_str(), tag.principal.as_str(), &tag.key), &r);
    let n = db
        .execute(
            "UPDATE idempotency SET status = ?1, answer = ?2, mac = ?3 WHERE tenant = ?4 AND principal = ?5 AND key = ?6 AND status IS NULL",
            &[Arg::Int(i64::from(status)), Arg::Blob(body), Arg::Blob(&m), Arg::Text(tag.tenant.as_str()), Arg::Text(tag.principal.as_str()), Arg::Text(&tag.key)],
        )
        .map_err(|e| StoreError::Database(e.message))?;
    Ok(n == 1)
}
