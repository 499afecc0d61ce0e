//! API keys and the admin token.
//!
//! An API key is `mw_` followed by 64 hex digits (32 random bytes). It is shown once, when minted;
//! the server keeps only its SHA-256 (in `<data_dir>/api-keys.sqlite3`, or in the `api_keys`
//! table of the PostgreSQL schema every server of a shared store uses) with the tenant and
//! principal id it stands for. The principal's kind, integrity and domain are read from the
//! engine's own record at every request, never from the key table or the request. A revoked key
//! stops working at the next request: every request looks its hash up again.
//!
//! The admin token (`mwa_` + 64 hex digits) registers principals and mints, lists and revokes
//! keys. It is `ServeConfig::admin_token` when set, else the contents of `<data_dir>/admin.token`,
//! which the server creates with mode 0600 on first start.

use memwarden_core::prelude::{PrincipalId, TenantId};
use rusqlite::{Connection, OptionalExtension, params};

use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// File name of the key table inside the data directory.
pub const KEYS_FILE: &str = "api-keys.sqlite3";
/// File name of the admin token inside the data directory.
pub const ADMIN_TOKEN_FILE: &str = "admin.token";
/// Longest key label, in bytes.
pub const LABEL_BYTES_MAX: usize = 256;

/// Key-store errors.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// The key database failed.
    #[error("key store: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// The PostgreSQL key table failed or its server cannot be reached.
    #[error("key store (PostgreSQL): {0}")]
    Postgres(#[from] postgres::Error),
    /// A file could not be read or written.
    #[error("{path}: {error}")]
    Io {
        /// The path.
        path: String,
        /// The error.
        error: std::io::Error,
    },
    /// Bad input (label too long, malformed stored row, ...).
    #[error("{0}")]
    Invalid(String),
    /// The system has no randomness.
    #[error("no randomness: {0}")]
    Random(String),
    /// The key store's lock was poisoned by a panic.
    #[error("key store lock poisoned")]
    Poisoned,
}

pub use memwarden_api::{KeyInfo, MintedKey};

fn random_hex(n: usize) -> Result<String, KeyError> {
    let mut b = vec![0u8; n];
    getrandom::fill(&mut b).map_err(|e| KeyError::Random(e.to_string()))?;
    Ok(hex::encode(b))
}

/// SHA-256 of a token's text.
pub fn token_hash(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// Constant-time comparison of two digests.
pub fn digest_eq(a: &[u8; 32], b: &[u8; 32]) -> bool {
    a.iter().zip(b.iter()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn now_ms() -> u64 {
    memwarden_engine::system_ms()
}

/// The API-key table.
pub struct ApiKeys {
    db: KeyDb,
    path: PathBuf,
}

/// Where the key table lives.
enum KeyDb {
    /// `<data_dir>/api-keys.sqlite3`: one server.
    Sqlite(Mutex<Connection>),
    /// `api_keys` in the store's PostgreSQL schema: every server on that store shares it (a key
    /// minted or revoked through one works or stops at the next request on all of them).
    Postgres { url: String, schema: String, client: Mutex<Option<Box<postgres::Client>>> },
}

/// `"name"`, with `"` doubled: a schema name as an SQL identifier.
fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

const PG_KEYS_DDL: &str = "CREATE TABLE IF NOT EXISTS api_keys (
    key_id TEXT PRIMARY KEY,
    hash BYTEA NOT NULL UNIQUE,
    tenant TEXT NOT NULL,
    principal TEXT NOT NULL,
    label TEXT NOT NULL,
    created_ms BIGINT NOT NULL,
    revoked_ms BIGINT
);
CREATE INDEX IF NOT EXISTS api_keys_tenant ON api_keys(tenant);";

fn pg_info(r: &postgres::Row) -> Result<KeyInfo, KeyError> {
    to_info((r.try_get(0)?, r.try_get(1)?, r.try_get(2)?, r.try_get(3)?, r.try_get(4)?, r.try_get(5)?))
}

impl std::fmt::Debug for ApiKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiKeys").field("path", &self.path).finish()
    }
}

fn row_info(r: &rusqlite::Row<'_>) -> rusqlite::Result<(String, String, String, String, i64, Option<i64>)> {
    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?))
}

fn to_info(row: (String, String, String, String, i64, Option<i64>)) -> Result<KeyInfo, KeyError> {
    let (key_id, tenant, principal, label, created, revoked) = row;
    Ok(KeyInfo {
        key_id,
        tenant: TenantId::new(&tenant).map_err(|e| KeyError::Invalid(format!("stored key row: {e}")))?,
        principal: PrincipalId::new(&principal).map_err(|e| KeyError::Invalid(format!("stored key row: {e}")))?,
        label,
        created_ms: u64::try_from(created).unwrap_or(0),
        revoked_ms: revoked.map(|r| u64::try_from(r).unwrap_or(0)),
    })
}

fn ms_i64(ms: u64) -> i64 {
    i64::try_from(ms).unwrap_or(i64::MAX)
}

impl ApiKeys {
    /// Open (or create) `<data_dir>/api-keys.sqlite3`.
    pub fn open(data_dir: &Path) -> Result<Self, KeyError> {
        std::fs::create_dir_all(data_dir).map_err(|error| KeyError::Io { path: data_dir.display().to_string(), error })?;
        let path = data_dir.join(KEYS_FILE);
        let conn = Connection::open(&path)?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
                .map_err(|error| KeyError::Io { path: path.display().to_string(), error })?;
        }
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "FULL")?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        conn.execute_batch(
            "CREATE TABLE IF NOT EXISTS api_keys (
                key_id TEXT PRIMARY KEY,
                hash BLOB NOT NULL UNIQUE,
                tenant TEXT NOT NULL,
                principal TEXT NOT NULL,
                label TEXT NOT NULL,
                created_ms INTEGER NOT NULL,
                revoked_ms INTEGER
            );
            CREATE INDEX IF NOT EXISTS api_keys_tenant ON api_keys(tenant);",
        )?;
        Ok(Self { db: KeyDb::Sqlite(Mutex::new(conn)), path })
    }

    /// Open (or create) the `api_keys` table in PostgreSQL schema `schema` at `url` (the
    /// store's own database and schema, so every server of that store shares the keys).
    pub fn open_postgres(url: &str, schema: &str) -> Result<Self, KeyError> {
        let keys = Self {
            db: KeyDb::Postgres { url: url.to_owned(), schema: schema.to_owned(), client: Mutex::new(None) },
            path: PathBuf::from(format!("postgres schema {schema}")),
        };
        keys.pg(|c| {
            c.batch_execute(PG_KEYS_DDL)?;
            Ok(())
        })?;
        Ok(keys)
    }

    fn conn(&self) -> Result<std::sync::MutexGuard<'_, Connection>, KeyError> {
        match &self.db {
            KeyDb::Sqlite(c) => c.lock().map_err(|_| KeyError::Poisoned),
            KeyDb::Postgres { .. } => Err(KeyError::Invalid("the key table is in PostgreSQL".into())),
        }
    }

    /// Run `f` on the PostgreSQL connection, connecting first (and again after the server
    /// dropped the connection: a closed client is replaced before `f` runs).
    fn pg<T>(&self, f: impl FnOnce(&mut postgres::Client) -> Result<T, KeyError>) -> Result<T, KeyError> {
        let KeyDb::Postgres { url, schema, client } = &self.db else {
            return Err(KeyError::Invalid("the key table is in SQLite".into()));
        };
        let mut guard = client.lock().map_err(|_| KeyError::Poisoned)?;
        if guard.as_ref().is_none_or(|c| c.is_closed()) {
            let mut c = postgres::Client::connect(url, postgres::NoTls)?;
            c.batch_execute(&format!("CREATE SCHEMA IF NOT EXISTS {0}; SET search_path TO {0}", quote_ident(schema)))?;
            *guard = Some(Box::new(c));
        }
        match guard.as_mut() {
            Some(c) => f(c),
            None => Err(KeyError::Invalid("no PostgreSQL connection".into())),
        }
    }

    fn is_postgres(&self) -> bool {
        matches!(self.db, KeyDb::Postgres { .. })
    }

    /// Mint a key for `(tenant, principal)`. The caller checks that the principal is registered
    /// (the server's admin route does); an unregistered principal's key authenticates nobody.
    pub fn mint(&self, tenant: &TenantId, principal: &PrincipalId, label: &str) -> Result<MintedKey, KeyError> {
        if label.len() > LABEL_BYTES_MAX {
            return Err(KeyError::Invalid(format!("label is longer than {LABEL_BYTES_MAX} bytes")));
        }
        let token = format!("mw_{}", random_hex(32)?);
        let info = KeyInfo {
            key_id: format!("key_{}", random_hex(8)?),
            tenant: tenant.clone(),
            principal: principal.clone(),
            label: label.to_owned(),
            created_ms: now_ms(),
            revoked_ms: None,
        };
        let hash = token_hash(&token).to_vec();
        if self.is_postgres() {
            self.pg(|c| {
                c.execute(
                    "INSERT INTO api_keys (key_id, hash, tenant, principal, label, created_ms) VALUES ($1, $2, $3, $4, $5, $6)",
                    &[&info.key_id, &hash, &tenant.as_str(), &principal.as_str(), &label, &ms_i64(info.created_ms)],
                )?;
                Ok(())
            })?;
        } else {
            self.conn()?.execute(
                "INSERT INTO api_keys (key_id, hash, tenant, principal, label, created_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![info.key_id, hash, tenant.as_str(), principal.as_str(), label, ms_i64(info.created_ms)],
            )?;
        }
        Ok(MintedKey { token, info })
    }

    /// Keys (active and revoked), of one tenant or all, oldest first. No secrets.
    pub fn list(&self, tenant: Option<&TenantId>) -> Result<Vec<KeyInfo>, KeyError> {
        let sql = "SELECT key_id, tenant, principal, label, created_ms, revoked_ms FROM api_keys";
        if self.is_postgres() {
            return self.pg(|c| {
                let rows = match tenant {
                    Some(t) => c.query(&format!("{sql} WHERE tenant = $1 ORDER BY created_ms, key_id"), &[&t.as_str()])?,
                    None => c.query(&format!("{sql} ORDER BY created_ms, key_id"), &[])?,
                };
                rows.iter().map(pg_info).collect()
            });
        }
        let conn = self.conn()?;
        let rows: Vec<_> = match tenant {
            Some(t) => {
                let mut st = conn.prepare(&format!("{sql} WHERE tenant = ?1 ORDER BY created_ms, key_id"))?;
                st.query_map(params![t.as_str()], row_info)?.collect::<Result<_, _>>()?
            }
            None => {
                let mut st = conn.prepare(&format!("{sql} ORDER BY created_ms, key_id"))?;
                st.query_map([], row_info)?.collect::<Result<_, _>>()?
            }
        };
        rows.into_iter().map(to_info).collect()
    }

    /// Revoke a key. Returns false when no active key has this id.
    pub fn revoke(&self, key_id: &str) -> Result<bool, KeyError> {
        if self.is_postgres() {
            let n = self.pg(|c| Ok(c.execute("UPDATE api_keys SET revoked_ms = $1 WHERE key_id = $2 AND revoked_ms IS NULL", &[&ms_i64(now_ms()), &key_id])?))?;
            return Ok(n == 1);
        }
        let n = self.conn()?.execute(
            "UPDATE api_keys SET revoked_ms = ?1 WHERE key_id = ?2 AND revoked_ms IS NULL",
            params![ms_i64(now_ms()), key_id],
        )?;
        Ok(n == 1)
    }

    /// The active key a presented token stands for, if any.
    pub fn authenticate(&self, token: &str) -> Result<Option<KeyInfo>, KeyError> {
        if !token.starts_with("mw_") || token.len() != 67 {
            return Ok(None);
        }
        if self.is_postgres() {
            let hash = token_hash(token).to_vec();
            return self.pg(|c| {
                let row = c.query_opt("SELECT key_id, tenant, principal, label, created_ms, revoked_ms FROM api_keys WHERE hash = $1 AND revoked_ms IS NULL", &[&hash])?;
                row.as_ref().map(pg_info).transpose()
            });
        }
        let conn = self.conn()?;
        let row = conn
            .prepare_cached("SELECT key_id, tenant, principal, label, created_ms, revoked_ms FROM api_keys WHERE hash = ?1 AND revoked_ms IS NULL")?
            .query_row(params![token_hash(token).to_vec()], row_info)
            .optional()?;
        row.map(to_info).transpose()
    }

    /// Whether the database answers (readiness).
    pub fn ping(&self) -> Result<(), KeyError> {
        if self.is_postgres() {
            return self.pg(|c| {
                c.query_one("SELECT count(*) FROM api_keys", &[])?;
                Ok(())
            });
        }
        self.conn()?.query_row("SELECT count(*) FROM api_keys", [], |r| r.get::<_, i64>(0))?;
        Ok(())
    }
}

/// The admin token's source and its digest.
#[derive(Clone)]
pub struct AdminToken {
    hash: [u8; 32],
    /// Where it was read from (None: the configuration).
    pub file: Option<PathBuf>,
    /// Whether this start created the file.
    pub created: bool,
}

impl std::fmt::Debug for AdminToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdminToken").field("file", &self.file).field("created", &self.created).finish()
    }
}

impl AdminToken {
    /// The configured token, or `<data_dir>/admin.token` (created with mode 0600 if absent).
    pub fn load_or_create(data_dir: &Path, configured: Option<&str>) -> Result<Self, KeyError> {
        if let Some(t) = configured {
            return Ok(Self { hash: token_hash(t), file: None, created: false });
        }
        let path = data_dir.join(ADMIN_TOKEN_FILE);
        let io = |error: std::io::Error| KeyError::Io { path: path.display().to_string(), error };
        match std::fs::read_to_string(&path) {
            Ok(text) => {
                let t = text.trim();
                if t.len() < 16 {
                    return Err(KeyError::Invalid(format!("{} holds no usable token", path.display())));
                }
                Ok(Self { hash: token_hash(t), file: Some(path), created: false })
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                use std::io::Write;
                std::fs::create_dir_all(data_dir).map_err(io)?;
                let token = format!("mwa_{}", random_hex(32)?);
                let mut opts = std::fs::OpenOptions::new();
                opts.write(true).create_new(true);
                #[cfg(unix)]
                {
                    use std::os::unix::fs::OpenOptionsExt;
                    opts.mode(0o600);
                }
                let mut f = opts.open(&path).map_err(io)?;
                f.write_all(token.as_bytes()).map_err(io)?;
                f.write_all(b"\n").map_err(io)?;
                f.sync_all().map_err(io)?;
                Ok(Self { hash: token_hash(&token), file: Some(path), created: true })
            }
            Err(e) => Err(io(e)),
        }
    }

    /// Whether `presented` is the admin token (constant-time over the digests).
    pub fn matches(&self, presented: &str) -> bool {
        digest_eq(&self.hash, &token_hash(presented))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn mint_authenticate_revoke() {
        let dir = tempfile::tempdir().unwrap();
        let keys = ApiKeys::open(dir.path()).unwrap();
        let t = TenantId::new("acme").unwrap();
        let p = PrincipalId::new("agent").unwrap();
        let k = keys.mint(&t, &p, "test").unwrap();
        assert!(k.token.starts_with("mw_") && k.token.len() == 67);
        assert_eq!(keys.authenticate(&k.token).unwrap().unwrap().principal, p);
        assert!(keys.authenticate("mw_00").unwrap().is_none());
        // Only the hash is stored.
        let raw = std::fs::read(dir.path().join(KEYS_FILE)).unwrap();
        let secret: &[u8] = &k.token.as_bytes()[3..];
        assert!(!raw.windows(64).any(|w| w == secret));
        assert_eq!(keys.list(Some(&t)).unwrap().len(), 1);
        assert!(keys.revoke(&k.info.key_id).unwrap());
        assert!(!keys.revoke(&k.info.key_id).unwrap());
        assert!(keys.authenticate(&k.token).unwrap().is_none());
        assert!(keys.list(None).unwrap()[0].revoked_ms.is_some());
    }

    #[test]
    fn admin_token_file_is_created_once() {
        let dir = tempfile::tempdir().unwrap();
        let a = AdminToken::load_or_create(dir.path(), None).unwrap();
        assert!(a.created);
        let text = std::fs::read_to_string(dir.path().join(ADMIN_TOKEN_FILE)).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.path().join(ADMIN_TOKEN_FILE)).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let b = AdminToken::load_or_create(dir.path(), None).unwrap();
        assert!(!b.created);
        assert!(b.matches(text.trim()));
        assert!(!b.matches("mwa_wrong"));
    }
}
