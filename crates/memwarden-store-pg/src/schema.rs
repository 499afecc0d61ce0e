//! Versioned schema migrations. Each store lives in its own PostgreSQL schema; its
//! `schema_version` table lists the migrations applied. Opening applies the missing ones in one
//! transaction under an advisory lock (so two servers starting at once do not race), and refuses
//! a schema newer than this build.
//!
//! The tables mirror the embedded store's (same columns, so the same row digests bind them to
//! the log) with three differences: no global sequence anywhere (the log is keyed by
//! `(tenant, idx)`; a vector's key is the tenant-log index of its item's write, unique per
//! `(tenant, seq)`), the lexical index is a `tsvector` column of `items` with a GIN index, and
//! integers are `BIGINT`.

use memwarden_store::StoreError;
use ed25519_dalek::SigningKey;
use memwarden_store::backend::{Arg, Cols};

use crate::conn::{Conn, PgRow, quote_ident, store_db_err};

/// The schema version this build writes.
pub const SCHEMA_VERSION: i64 = 4;

/// Migration `i` brings the schema from version `i` to `i + 1`.
const MIGRATIONS: [&str; 4] = ["
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE principals(tenant TEXT NOT NULL, id TEXT NOT NULL, record TEXT NOT NULL, log_index BIGINT NOT NULL, PRIMARY KEY(tenant, id));
CREATE TABLE items(
  id BYTEA PRIMARY KEY, tenant TEXT NOT NULL, namespace TEXT NOT NULL, record TEXT NOT NULL,
  digest BYTEA NOT NULL, log_index BIGINT NOT NULL, embedding BYTEA, created_ms BIGINT NOT NULL,
  version BIGINT NOT NULL DEFAULT 0, vseq BIGINT, emb_digest BYTEA, fts TSVECTOR);
CREATE INDEX items_by_namespace ON items(tenant, namespace, created_ms);
CREATE INDEX items_by_tenant_log ON items(tenant, log_index);
CREATE INDEX items_fts ON items USING GIN (fts);
CREATE TABLE edges(child BYTEA NOT NULL, parent BYTEA NOT NULL, kind TEXT NOT NULL, PRIMARY KEY(child, parent, kind));
CREATE INDEX edges_by_parent ON edges(parent);
CREATE TABLE attestations(tenant TEXT NOT NULL, key TEXT NOT NULL, record TEXT NOT NULL, log_index BIGINT NOT NULL);
CREATE INDEX attestations_by_key ON attestations(tenant, key);
CREATE INDEX attestations_by_value ON attestations(tenant, key, ((record::jsonb) #>> '{value,canonical}'));
CREATE TABLE elevations(tenant TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, record TEXT NOT NULL, log_index BIGINT NOT NULL, PRIMARY KEY(tenant, key, value));
CREATE TABLE grants_used(tenant TEXT NOT NULL, nonce BYTEA NOT NULL, record TEXT NOT NULL, log_index BIGINT NOT NULL, PRIMARY KEY(tenant, nonce));
CREATE TABLE sessions(tenant TEXT NOT NULL, principal TEXT NOT NULL, session TEXT NOT NULL, record TEXT NOT NULL, log_index BIGINT NOT NULL, PRIMARY KEY(tenant, principal, session));
CREATE TABLE vectors(tenant TEXT NOT NULL, seq BIGINT NOT NULL, id BYTEA NOT NULL UNIQUE, namespace TEXT NOT NULL, PRIMARY KEY(tenant, seq));
CREATE TABLE lineage_events(tenant TEXT NOT NULL, event TEXT NOT NULL, log_index BIGINT NOT NULL, PRIMARY KEY(tenant, log_index));
CREATE TABLE erased(id BYTEA PRIMARY KEY, tenant TEXT NOT NULL, namespace TEXT NOT NULL, tombstone TEXT NOT NULL, item_log_index BIGINT NOT NULL, log_index BIGINT NOT NULL);
CREATE INDEX erased_by_tenant_log ON erased(tenant, item_log_index);
CREATE TABLE reputation(tenant TEXT NOT NULL, principal TEXT NOT NULL, value DOUBLE PRECISION NOT NULL, log_index BIGINT NOT NULL, PRIMARY KEY(tenant, principal));
CREATE TABLE log(tenant TEXT NOT NULL, idx BIGINT NOT NULL, entry BYTEA NOT NULL, PRIMARY KEY(tenant, idx));
CREATE TABLE checkpoints(tenant TEXT NOT NULL, size BIGINT NOT NULL, record TEXT NOT NULL, PRIMARY KEY(tenant, size));
CREATE TABLE heads(tenant TEXT PRIMARY KEY, size BIGINT NOT NULL, head BYTEA NOT NULL);
", "
ALTER TABLE heads ADD COLUMN sig BYTEA;
", "
CREATE TABLE idempotency(tenant TEXT NOT NULL, principal TEXT NOT NULL, key TEXT NOT NULL, digest BYTEA NOT NULL, created_ms BIGINT NOT NULL,
  log_index BIGINT NOT NULL, status BIGINT, answer BYTEA, mac BYTEA NOT NULL, PRIMARY KEY(tenant, principal, key));
CREATE INDEX idempotency_by_age ON idempotency(created_ms);
", "
CREATE TABLE seals(tenant TEXT NOT NULL, seal BYTEA NOT NULL, key BYTEA NOT NULL, PRIMARY KEY(tenant, seal));
CREATE TABLE seal_links(tenant TEXT NOT NULL, item BYTEA NOT NULL, seal BYTEA NOT NULL, PRIMARY KEY(tenant, item, seal));
"];

/// The first version whose recorded heads carry the store's signature.
const SIGNED_HEADS: i64 = 2;

/// The store's identity and log key, as recorded in its schema.
pub(crate) struct Meta {
    pub(crate) store_id: String,
}

/// Create the schema if needed, apply missing migrations, and record (or check) the store id
/// and the log's public key, all in one transaction under an advisory lock on the schema.
pub(crate) fn prepare(conn: &mut Conn, schema: &str, key: &SigningKey) -> Result<Meta, StoreError> {
    conn.batch("BEGIN").map_err(store_db_err)?;
    let out = prepare_in(conn, schema, key);
    match &out {
        Ok(_) => conn.batch("COMMIT").map_err(store_db_err)?,
        Err(_) => {
            let _ = conn.batch("ROLLBACK");
        }
    }
    out
}

fn prepare_in(conn: &mut Conn, schema: &str, signing_key: &SigningKey) -> Result<Meta, StoreError> {
    let log_key = &signing_key.verifying_key().to_bytes();
    let lock = format!("memwarden/migrate/{schema}");
    conn.query("SELECT pg_advisory_xact_lock(hashtextextended(?1, 0))", &[Arg::Text(&lock)]).map_err(store_db_err)?;
    conn.batch(&format!("CREATE SCHEMA IF NOT EXISTS {}; CREATE TABLE IF NOT EXISTS schema_version(version BIGINT PRIMARY KEY, applied_ms BIGINT NOT NULL)", quote_ident(schema)))
        .map_err(store_db_err)?;
    let rows = conn.query("SELECT coalesce(max(version), 0) FROM schema_version", &[]).map_err(store_db_err)?;
    let current: i64 = rows.first().map(|r| r.try_get::<_, i64>(0)).transpose().map_err(|e| StoreError::Corrupt(format!("schema_version: {e}")))?.unwrap_or(0);
    if current > SCHEMA_VERSION {
        return Err(StoreError::Schema(current));
    }
    let now_ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    for (i, m) in MIGRATIONS.iter().enumerate().skip(usize::try_from(current).unwrap_or(0)) {
        conn.batch(m).map_err(store_db_err)?;
        let v = i64::try_from(i + 1).unwrap_or(i64::MAX);
        conn.execute("INSERT INTO schema_version(version, applied_ms) VALUES(?1, ?2)", &[Arg::Int(v), Arg::Int(now_ms)]).map_err(store_db_err)?;
    }
    let mut r = [0u8; 16];
    getrandom::fill(&mut r).map_err(|e| StoreError::Corrupt(format!("no randomness for a store id: {e}")))?;
    let fresh = hex::encode(r);
    conn.execute("INSERT INTO meta(key, value) VALUES('store_id', ?1) ON CONFLICT (key) DO NOTHING", &[Arg::Text(&fresh)]).map_err(store_db_err)?;
    let key = hex::encode(log_key);
    conn.execute("INSERT INTO meta(key, value) VALUES('log_key', ?1) ON CONFLICT (key) DO NOTHING", &[Arg::Text(&key)]).map_err(store_db_err)?;
    let get = |conn: &mut Conn, k: &str| -> Result<String, StoreError> {
        let rows = conn.query("SELECT value FROM meta WHERE key = ?1", &[Arg::Text(k)]).map_err(store_db_err)?;
        rows.first().map(|r| r.try_get::<_, String>(0)).transpose().map_err(|e| StoreError::Corrupt(format!("meta {k}: {e}")))?.ok_or_else(|| StoreError::Corrupt(format!("meta {k} missing")))
    };
    let stored_key = get(conn, "log_key")?;
    if stored_key != key {
        return Err(StoreError::KeyDir(format!(
            "schema {schema} is signed by log key {stored_key}, but the key directory holds {key}: every server of one store needs the same key"
        )));
    }
    let store_id = get(conn, "store_id")?;
    if (1..SIGNED_HEADS).contains(&current) {
        sign_heads(conn, signing_key, &store_id)?;
    }
    Ok(Meta { store_id })
}

/// A store made before signed heads signs its recorded heads once, in the migration's
/// transaction (trusted once, like the rest of its log at this open); from then on every commit
/// signs the heads it moves, and an unsigned head is a forgery.
fn sign_heads(conn: &mut Conn, key: &SigningKey, store_id: &str) -> Result<(), StoreError> {
    let rows = conn.query("SELECT tenant, size, head FROM heads WHERE sig IS NULL", &[]).map_err(store_db_err)?;
    for r in &rows {
        let r = PgRow(r);
        let tenant = r.text(0).map_err(store_db_err)?;
        let size = u64::try_from(r.int(1).map_err(store_db_err)?).unwrap_or(0);
        let head: [u8; 32] = r.blob(2).map_err(store_db_err)?.try_into().map_err(|_| StoreError::Corrupt(format!("recorded head of {tenant} is malformed")))?;
        let sig = memwarden_log::sign_head(key, store_id, &tenant, size, &head);
        conn.execute("UPDATE heads SET sig = ?1 WHERE tenant = ?2", &[Arg::Blob(&sig), Arg::Text(&tenant)]).map_err(store_db_err)?;
    }
    Ok(())
}
