//! The embedded backend: SQLite in WAL mode with `synchronous=FULL`, one writer thread doing
//! group commit, one reader connection. Every row a decision reads is bound to the verdict log
//! ([`crate::binding`]) and checked on every read against the state the verified log commits
//! to; the checkpoint-signing key and the witness live in a key directory, by default
//! `<data dir>/keys` ([`crate::keys`]).

use crate::binding::{
    AttestationRow, BoundRow, Check, ElevationRow, ErasedRow, ItemRow, LineageRow, OrderKind, PrincipalRow, ReputationRow, RowKey, SessionRow,
    StateIndex, Table, embedding_digest, row_key,
};
use crate::keys::{self, KeyLocation, Witness};
use crate::logs::{GLOBAL, Logs};
use crate::stored;
use crate::vectors::{Progress, Vectors, decode_f32};
use crate::write::{Job, writer_loop};
use crate::{BATCH_MUTATIONS_MAX, CommitError, Hit, IdempotencyRecord, IdempotencyTag, Mutation, OrderedItem, Receipt, SEARCH_K_MAX, Store, StoreError, StoredSession};
use ed25519_dalek::SigningKey;
use memwarden_core::prelude::*;
use memwarden_log::{Hash, Problem, SignedCheckpoint, VerdictLog, VerifyReport, leaf_hash, verify_log};
use rusqlite::{Connection, OpenFlags, OptionalExtension, params};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard, mpsc};
use std::thread::JoinHandle;

pub(crate) const SCHEMA_VERSION: i64 = 6;
pub(crate) const DB_FILE: &str = "memwarden.db";
/// Lock file: held (flock) by the one process that has the store open for writing, which
/// writes its pid into it (named by [`StoreError::Locked`] to the next one that tries).
pub(crate) const LOCK_FILE: &str = "memwarden.lock";

/// Tuning for the embedded store.
#[derive(Debug, Clone)]
pub struct StoreConfig {
    /// Sign a checkpoint every this many log entries (0: only on demand and at close).
    pub checkpoint_every: u64,
    /// Most mutations grouped into one transaction.
    pub group_commit_max: usize,
    /// An access class of a namespace's vector index gets its own HNSW graph once it holds
    /// this many vectors; smaller classes are scored exactly from a contiguous block. `None`:
    /// [`memwarden_index::CLASS_GRAPH_MIN_COUNT`]. Tests set 0 to force the graph path on
    /// small stores.
    pub vector_exact_below: Option<usize>,
    /// Where the checkpoint-signing key and the witness live (default: `<data dir>/keys`, so
    /// the data directory is the whole state; see [`KeyLocation`] for the trade-off).
    pub keys: KeyLocation,
    /// Rewrite the witness (the latest signed tree head, in the key directory) after every
    /// group commit, before any caller hears of it (default). Off: only with each checkpoint,
    /// so a database rolled back by fewer than `checkpoint_every` entries goes unnoticed; it
    /// saves one signature and one fsync per group.
    pub witness_every_commit: bool,
}

impl Default for StoreConfig {
    fn default() -> Self {
        Self { checkpoint_every: 1024, group_commit_max: 1024, vector_exact_below: None, keys: KeyLocation::InDataDir, witness_every_commit: true }
    }
}

impl StoreConfig {
    /// This config with the key and witness in `dir`, outside the data directory: a rollback by
    /// someone who can write the data directory but not `dir` is detected (back `dir` up too).
    #[must_use]
    pub fn with_key_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.keys = KeyLocation::Dir(dir.into());
        self
    }

    /// This config with the key and witness inside the data directory (the default; see
    /// [`KeyLocation::InDataDir`] for what that gives up).
    #[must_use]
    pub fn with_keys_in_data_dir(mut self) -> Self {
        self.keys = KeyLocation::InDataDir;
        self
    }
}

/// How hard a commit holds on to what it wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Durability {
    /// `synchronous=FULL`: an acknowledged commit survives `kill -9` and power loss.
    Durable,
    /// [`SqliteStore::open_ephemeral`]: `synchronous=OFF`, no index files, removed on drop.
    Ephemeral,
}

pub(crate) struct Shared {
    /// Held for the store's lifetime: one process writes a data directory (and its log) at a time.
    _lock: std::fs::File,
    /// Every tenant's log and the global view.
    pub(crate) logs: RwLock<Logs>,
    pub(crate) key: SigningKey,
    pub(crate) key_dir: PathBuf,
    pub(crate) store_id: String,
    reader: Mutex<Connection>,
    /// The vector indexes, one per (tenant, namespace).
    pub(crate) vectors: Vectors,
    /// What the verified log commits every bound row to.
    pub(crate) state: RwLock<StateIndex>,
    /// The latest entry time at open (checkpoints carry the latest time a caller passed in).
    pub(crate) last_time_ms: AtomicU64,
    pub(crate) config: StoreConfig,
    pub(crate) durability: Durability,
}

impl Shared {
    /// Record `cp` as `tenant`'s witnessed head (outside the data directory).
    pub(crate) fn witness(&self, tenant: &str, cp: &SignedCheckpoint) -> Result<(), StoreError> {
        if self.durability == Durability::Ephemeral {
            return Ok(());
        }
        keys::write_witness(&self.key_dir, &Witness { store_id: self.store_id.clone(), tenant: tenant.to_owned(), checkpoint: cp.clone() })
    }

    /// After an erasure (writer thread): copy the zeroed pages into the database and empty the
    /// WAL, so the erased text survives in no file (best effort: a busy checkpoint is retried by
    /// SQLite's automatic checkpoints; the rows are gone from every read either way).
    pub(crate) fn after_erasure(&self, conn: &Connection) {
        if let Err(e) = conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)") {
            eprintln!("memwarden-store: checkpoint after erasure failed: {e}");
        }
    }
}

/// The embedded store: one data directory (`memwarden.db` plus its WAL, `index/`) and one key
/// directory (the signing key and the witness, outside the data directory by default).
pub struct SqliteStore {
    shared: Arc<Shared>,
    jobs: Mutex<Option<mpsc::Sender<Job>>>,
    writer: Mutex<Option<JoinHandle<()>>>,
    dir: PathBuf,
    durability: Durability,
}

use crate::keys::io_err;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

pub(crate) fn read_guard<T>(l: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(std::sync::PoisonError::into_inner)
}

pub(crate) fn write_guard<T>(l: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Whether a file can be created in `dir` (a read-only or full `/dev/shm` is skipped).
fn tempdir_usable(dir: &Path) -> bool {
    std::fs::metadata(dir).map(|m| !m.permissions().readonly()).unwrap_or(false)
}

pub(crate) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS principals(tenant TEXT NOT NULL, id TEXT NOT NULL, record TEXT NOT NULL, log_index INTEGER NOT NULL, PRIMARY KEY(tenant, id));
CREATE TABLE IF NOT EXISTS items(
  id BLOB PRIMARY KEY, tenant TEXT NOT NULL, namespace TEXT NOT NULL, record TEXT NOT NULL,
  digest BLOB NOT NULL, log_index INTEGER NOT NULL, embedding BLOB, created_ms INTEGER NOT NULL,
  version INTEGER NOT NULL DEFAULT 0, vseq INTEGER, emb_digest BLOB);
CREATE INDEX IF NOT EXISTS items_by_namespace ON items(tenant, namespace, created_ms);
CREATE INDEX IF NOT EXISTS items_newest ON items(tenant, namespace, created_ms DESC, id DESC);
CREATE TABLE IF NOT EXISTS edges(child BLOB NOT NULL, parent BLOB NOT NULL, kind TEXT NOT NULL, PRIMARY KEY(child, parent, kind));
CREATE INDEX IF NOT EXISTS edges_by_parent ON edges(parent);
CREATE TABLE IF NOT EXISTS attestations(tenant TEXT NOT NULL, key TEXT NOT NULL, record TEXT NOT NULL, log_index INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS attestations_by_key ON attestations(tenant, key);
CREATE INDEX IF NOT EXISTS attestations_by_value ON attestations(tenant, key, json_extract(record, '$.value.canonical'));
CREATE TABLE IF NOT EXISTS elevations(tenant TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, record TEXT NOT NULL, log_index INTEGER NOT NULL, PRIMARY KEY(tenant, key, value));
CREATE TABLE IF NOT EXISTS grants_used(tenant TEXT NOT NULL, nonce BLOB NOT NULL, record TEXT NOT NULL, log_index INTEGER NOT NULL, PRIMARY KEY(tenant, nonce));
CREATE TABLE IF NOT EXISTS sessions(tenant TEXT NOT NULL, principal TEXT NOT NULL, session TEXT NOT NULL, record TEXT NOT NULL, log_index INTEGER NOT NULL, PRIMARY KEY(tenant, principal, session));
CREATE TABLE IF NOT EXISTS vectors(seq INTEGER PRIMARY KEY AUTOINCREMENT, id BLOB NOT NULL UNIQUE, tenant TEXT NOT NULL, namespace TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS lineage_events(seq INTEGER PRIMARY KEY AUTOINCREMENT, tenant TEXT NOT NULL, event TEXT NOT NULL, log_index INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS lineage_events_by_tenant ON lineage_events(tenant, log_index);
CREATE INDEX IF NOT EXISTS items_by_tenant_log ON items(tenant, log_index);
CREATE TABLE IF NOT EXISTS erased(id BLOB PRIMARY KEY, tenant TEXT NOT NULL, namespace TEXT NOT NULL, tombstone TEXT NOT NULL, item_log_index INTEGER NOT NULL, log_index INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS erased_by_tenant_log ON erased(tenant, item_log_index);
CREATE TABLE IF NOT EXISTS reputation(tenant TEXT NOT NULL, principal TEXT NOT NULL, value REAL NOT NULL, log_index INTEGER NOT NULL, PRIMARY KEY(tenant, principal));
CREATE TABLE IF NOT EXISTS idempotency(tenant TEXT NOT NULL, principal TEXT NOT NULL, key TEXT NOT NULL, digest BLOB NOT NULL, created_ms INTEGER NOT NULL,
  log_index INTEGER NOT NULL, status INTEGER, answer BLOB, mac BLOB NOT NULL, PRIMARY KEY(tenant, principal, key));
CREATE INDEX IF NOT EXISTS idempotency_by_age ON idempotency(created_ms);
CREATE TABLE IF NOT EXISTS seals(tenant TEXT NOT NULL, seal BLOB NOT NULL, key BLOB NOT NULL, PRIMARY KEY(tenant, seal));
CREATE TABLE IF NOT EXISTS seal_links(tenant TEXT NOT NULL, item BLOB NOT NULL, seal BLOB NOT NULL, PRIMARY KEY(tenant, item, seal));
";

/// The per-tenant logs (schema 6), created once a legacy global log has been moved aside.
pub(crate) const SCHEMA_LOGS: &str = "
CREATE TABLE IF NOT EXISTS log(tenant TEXT NOT NULL, idx INTEGER NOT NULL, entry BLOB NOT NULL, gseq INTEGER NOT NULL, PRIMARY KEY(tenant, idx));
CREATE UNIQUE INDEX IF NOT EXISTS log_by_gseq ON log(gseq);
CREATE TABLE IF NOT EXISTS checkpoints(tenant TEXT NOT NULL, size INTEGER NOT NULL, record TEXT NOT NULL, PRIMARY KEY(tenant, size));
CREATE TABLE IF NOT EXISTS heads(tenant TEXT PRIMARY KEY, size INTEGER NOT NULL, head BLOB NOT NULL, sig BLOB);
";

/// A namespace's items newest first (`list_newest`, `newest_ids`; the `items_newest` index).
const NEWEST_FIRST: &str = "created_ms DESC, id DESC";

pub(crate) fn open_conn(path: &Path, read_only: bool, durability: Durability) -> Result<Connection, StoreError> {
    let flags = if read_only {
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX
    } else {
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE | OpenFlags::SQLITE_OPEN_NO_MUTEX
    };
    let conn = Connection::open_with_flags(path, flags)?;
    conn.busy_timeout(std::time::Duration::from_secs(10))?;
    // One plan per statement whatever its bound values: otherwise SQLite re-prepares FTS5's own
    // page lookup at every binding (6% of a hybrid search's time, issue 36's profile).
    conn.set_db_config(rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true)?;
    if !read_only {
        conn.pragma_update(None, "journal_mode", "WAL")?;
        // Deleted content (an erasure) is overwritten with zeros, not left in free pages.
        conn.pragma_update(None, "secure_delete", "ON")?;
    }
    let sync = match durability {
        Durability::Durable => "FULL",
        Durability::Ephemeral => "OFF",
    };
    conn.pragma_update(None, "synchronous", sync)?;
    // 64 MiB of pages per connection (the default is 2 MiB): a search or a decision reads
    // rows all over the file, and a page read from the OS is a system call.
    conn.pragma_update(None, "cache_size", -65_536)?;
    Ok(conn)
}

pub(crate) fn meta_text(conn: &Connection, key: &str) -> Result<Option<String>, StoreError> {
    Ok(conn.query_row("SELECT value FROM meta WHERE key = ?1", params![key], |r| r.get::<_, String>(0)).optional()?)
}

/// The derived key that authenticates index files (so a file edited on disk is rebuilt from
/// the verified table rather than trusted).
fn index_mac_key(key: &SigningKey) -> [u8; 32] {
    keys::hmac_sha256(&key.to_bytes(), b"memwarden/index-mac/v1")
}

impl SqliteStore {
    /// Open (creating if needed) the store in `dir`. Reopening verifies the whole log against the
    /// recorded head, every signed checkpoint and the witness (the latest signed head, kept in
    /// the key directory), and refuses a store that does not verify or was rolled back.
    pub fn open(dir: &Path, config: StoreConfig) -> Result<Self, StoreError> {
        Self::open_with_progress(dir, config, &|_, _, _| {})
    }

    /// [`SqliteStore::open`], reporting progress while the vector indexes are loaded or rebuilt
    /// (`stage`, `done`, `total`; `total` is 0 when unknown).
    pub fn open_with_progress(dir: &Path, config: StoreConfig, progress: Progress<'_>) -> Result<Self, StoreError> {
        Self::open_inner(dir, config, progress, Durability::Durable)
    }

    /// A fast, throwaway store for benchmarks and the model checker: the real store (same
    /// schema, gates, log, verification, vector index and code path), only without
    /// durability. It lives in a private directory (mode 0700) under `/dev/shm` when that is
    /// available (else the system temporary directory), runs with `synchronous=OFF`, never
    /// writes index files or a witness, keeps its key in that directory, and is deleted when
    /// the store is dropped. Nothing in it survives a crash or a drop; never use it for data
    /// you want to keep.
    ///
    /// Measured with `cargo run --release -p memwarden-store --example ephemeral` (2 vCPU AMD
    /// EPYC, root filesystem on a virtio disk, /dev/shm tmpfs; 2026-12-01 at `aa78199` plus
    /// this change; **not a quiet machine**: load average 6–9 from other builds). p50 / p95,
    /// 384-dimensional vectors, 2,000 memories seeded, 300 rounds:
    ///
    /// | step | durable (`open`) | ephemeral |
    /// | --- | --- | --- |
    /// | open (empty store) | 115.9 / 129.8 ms | 1.33 / 1.47 ms |
    /// | commit one memory with its vector | 3.66 / 4.75 ms | 0.079 / 0.44 ms |
    /// | read it back (`item`) | 40 / 74 µs | 24 / 31 µs |
    /// | search, k = 5 | 284 / 360 µs | 305 / 346 µs |
    ///
    /// Opening is ~90× and committing ~45× faster; reads and searches cost the same (they never
    /// touched the disk's sync path).
    pub fn open_ephemeral(config: StoreConfig) -> Result<Self, StoreError> {
        let config = StoreConfig { keys: KeyLocation::InDataDir, witness_every_commit: false, ..config };
        let base = Path::new("/dev/shm");
        let base = if base.is_dir() && tempdir_usable(base) { base.to_path_buf() } else { std::env::temp_dir() };
        let mut last = None;
        for _ in 0..8 {
            let mut r = [0u8; 8];
            getrandom::fill(&mut r).map_err(|e| StoreError::Corrupt(format!("no randomness for a temporary directory: {e}")))?;
            let dir = base.join(format!("memwarden-ephemeral-{}", hex::encode(r)));
            let mut b = std::fs::DirBuilder::new();
            #[cfg(unix)]
            {
                use std::os::unix::fs::DirBuilderExt;
                b.mode(0o700);
            }
            match b.create(&dir) {
                Ok(()) => {
                    return match Self::open_inner(&dir, config, &|_, _, _| {}, Durability::Ephemeral) {
                        Ok(s) => Ok(s),
                        Err(e) => {
                            let _ = std::fs::remove_dir_all(&dir);
                            Err(e)
                        }
                    };
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some((dir, e)),
                Err(e) => return Err(io_err(&dir)(e)),
            }
        }
        let (dir, e) = last.unwrap_or_else(|| (base.clone(), std::io::Error::other("no attempt")));
        Err(io_err(&dir)(e))
    }

    /// The key directory a store in `dir` opened with `config` uses.
    pub fn key_dir_for(dir: &Path, config: &StoreConfig) -> Result<PathBuf, StoreError> {
        keys::resolve(dir, &config.keys)
    }

    fn open_inner(dir: &Path, config: StoreConfig, progress: Progress<'_>, durability: Durability) -> Result<Self, StoreError> {
        keys::private_dir(dir)?;
        let lock = lock_dir(dir)?;
        let db = dir.join(DB_FILE);
        let fresh_file = !db.exists();
        if fresh_file {
            // Created 0600 before SQLite opens it, so its WAL and shared-memory files (which
            // SQLite creates with the database's mode) are private too.
            crate::keys::write_private(&db, b"")?;
        }
        let mut writer = open_conn(&db, false, durability)?;
        let legacy = crate::migrate::prepare(&writer)?;
        let heads_unsigned = crate::migrate::add_head_signatures(&writer)?;
        let key_dir = keys::resolve(dir, &config.keys)?;
        keys::private_dir(&key_dir)?;
        // A store created by an earlier version's default has its key directory outside, in
        // the `StateDir` location: copy it in (the old one is left in place).
        if config.keys == KeyLocation::InDataDir
            && durability == Durability::Durable
            && keys::load_key(&key_dir)?.is_none()
            && let Some(id) = meta_text(&writer, "store_id")?
            && let Some(from) = keys::state_dir_of(dir, &id)
        {
            keys::copy_key_dir(&from, &key_dir)?;
            eprintln!(
                "memwarden-store: copied the key directory {} into {} (keys now live in the data directory; the old directory is left in place)",
                from.display(),
                key_dir.display()
            );
        }
        let log_entries: i64 = writer.query_row("SELECT count(*) FROM log", [], |r| r.get(0))?;
        let (key, move_from) = Self::key(dir, &key_dir, log_entries > 0)?;
        // The store's identity: the key directory serves this store only, so a data directory
        // replaced by another (or emptied) is refused rather than silently started afresh.
        let store_id = match meta_text(&writer, "store_id")? {
            Some(id) => id,
            None => {
                let mut r = [0u8; 16];
                getrandom::fill(&mut r).map_err(|e| StoreError::Corrupt(format!("no randomness for a store id: {e}")))?;
                let id = hex::encode(r);
                writer.execute("INSERT INTO meta(key, value) VALUES('store_id', ?1)", params![id])?;
                id
            }
        };
        let bound_file = keys::store_file(&key_dir)?;
        let bound = bound_file.as_ref().map(|f| f.store_id.clone());
        // A copy of the data directory opened at another path carries its key directory: the
        // store id binds it; the recorded path follows the directory (rewritten below).
        let moved = config.keys == KeyLocation::InDataDir && bound_file.as_ref().is_some_and(|f| f.data_dir != dir.display().to_string());
        if let Some(b) = &bound
            && *b != store_id
        {
            return Err(StoreError::KeyDir(format!(
                "the key directory {} belongs to store {b}, but {} holds store {store_id}{}: a data directory that was replaced or emptied is \
                 refused (it could be a rollback). If you removed that store on purpose, delete {} and {} first",
                key_dir.display(),
                dir.display(),
                if log_entries == 0 { " (empty)" } else { "" },
                key_dir.join("store.json").display(),
                key_dir.join(keys::WITNESS_DIR).display(),
            )));
        }
        if let Some(from) = legacy {
            // A store of an earlier schema: verify its one global log (checkpoints, recorded
            // head, and the schema-5 witness), then bind its rows and split it per tenant.
            let old = stored::read_legacy(&writer, "log", "checkpoints")?;
            let mut anchors = old.checkpoints.clone();
            if let Some(w) = keys::read_legacy_witness(&key_dir)?
                && w.store_id == store_id
            {
                anchors.push(w.checkpoint);
            }
            let report = verify_log(&old.entries, &anchors, &key.verifying_key(), old.expected);
            if let Some(p) = &report.problem {
                return Err(StoreError::LogTampered(p.to_string()));
            }
            let time = old.entries.last().and_then(|e| memwarden_log::Entry::decode(e).ok()).map_or(0, |e| e.time_ms);
            if from <= 4 {
                let mut log = VerdictLog::from_leaves(old.entries.iter().map(|e| leaf_hash(e)).collect());
                crate::migrate::adopt(&mut writer, &mut log, from, time)?;
            }
            crate::migrate::relog(&mut writer, &key, &store_id, time)?;
        }
        let witnessed = stored::witnesses(&key_dir, &store_id)?;
        // Any witness (a tenant's, or the store's own, written at the first open) counts: a
        // crash between a tenant's first commit and its first witness leaves the store's.
        let any_witness = !keys::read_witnesses(&key_dir)?.is_empty();
        if bound.is_some() && !any_witness && log_entries > 0 && legacy.is_none() {
            return Err(StoreError::LogTampered(format!("the witness of this store is missing from {}", key_dir.join(keys::WITNESS_DIR).display())));
        }
        let mut all = stored::read_logs(&writer, None)?;
        if heads_unsigned {
            let signer = crate::write::HeadSigner { key: &key, store_id: &store_id };
            crate::write::sign_unsigned_heads(&crate::db::SqliteDb(&writer), &mut all, signer, &witnessed)?;
        }
        let report = stored::verify(&all, &key.verifying_key(), &store_id, &witnessed, None);
        if let Some(p) = &report.problem {
            return Err(StoreError::LogTampered(p.to_string()));
        }
        let last_time_ms = stored::last_time_ms(&all);
        let (logs, state) = stored::load(&all)?;
        drop(all);
        let mac_key = index_mac_key(&key);
        let verify_row = |row: &ItemRow| state.check(&row.key(), Some(&row.digest())) == Check::Ok;
        let vectors = Vectors::open(dir, &writer, config.vector_exact_below, &mac_key, &verify_row, progress)?;
        let reader = open_conn(&db, true, durability)?;
        let shared = Arc::new(Shared {
            durability,
            vectors,
            _lock: lock,
            logs: RwLock::new(logs),
            key,
            key_dir: key_dir.clone(),
            store_id: store_id.clone(),
            reader: Mutex::new(reader),
            state: RwLock::new(state),
            last_time_ms: AtomicU64::new(last_time_ms),
            config,
        });
        // Every witness now names this store and its log's current head (first open,
        // migration, or a witness that lagged after a failed write).
        if durability == Durability::Durable {
            let heads: Vec<(String, SignedCheckpoint)> = {
                let logs = read_guard(&shared.logs);
                logs.tenants
                    .iter()
                    .filter(|(t, l)| witnessed.get(*t).is_none_or(|w| w.checkpoint.size != l.log.len()))
                    .map(|(t, l)| (t.clone(), l.log.checkpoint(&shared.key, last_time_ms)))
                    .collect()
            };
            for (t, cp) in heads {
                shared.witness(&t, &cp)?;
            }
            if !any_witness && read_guard(&shared.logs).tenants.is_empty() {
                // Before any tenant has a log: the store's own witness, so that from the first
                // commit on the key directory holds one (its deletion is then detected).
                let cp = read_guard(&shared.logs).global.checkpoint(&shared.key, last_time_ms);
                shared.witness(GLOBAL, &cp)?;
            }
            if legacy.is_some() {
                keys::remove_legacy_witness(&key_dir);
            }
        }
        if (bound.is_none() || moved) && durability == Durability::Durable {
            keys::bind_store(&key_dir, &store_id, dir)?;
        }
        // The old layout kept the key in the data directory: now that the store verified (and
        // migrated), move it out.
        if let Some(old_dir) = move_from {
            keys::save_key(&key_dir, &shared.key)?;
            remove_old_key(&old_dir);
        }
        let (tx, rx) = mpsc::channel::<Job>();
        let s2 = Arc::clone(&shared);
        let handle = std::thread::Builder::new()
            .name("memwarden-writer".into())
            .spawn(move || writer_loop(writer, rx, &s2))
            .map_err(io_err(dir))?;
        Ok(Self { shared, jobs: Mutex::new(Some(tx)), writer: Mutex::new(Some(handle)), dir: dir.to_path_buf(), durability })
    }

    /// The signing key: from the key directory, from an old-layout data directory (then also
    /// the directory to move it out of once the store verified), or fresh for a store that has
    /// no log yet (a store with a log and no key is refused: its checkpoints could not be
    /// checked).
    fn key(dir: &Path, key_dir: &Path, has_log: bool) -> Result<(SigningKey, Option<PathBuf>), StoreError> {
        let old_dir = dir.join(keys::IN_DATA_DIR);
        let old = if old_dir != key_dir { keys::load_key(&old_dir)? } else { None };
        match (keys::load_key(key_dir)?, old) {
            (Some(k), None) => Ok((k, None)),
            (Some(k), Some(o)) if k.to_bytes() == o.to_bytes() => Ok((k, Some(old_dir))),
            (Some(_), Some(_)) => Err(StoreError::KeyDir(format!(
                "{} and {} hold different log keys; remove the one that does not sign this store's checkpoints",
                key_dir.display(),
                old_dir.display()
            ))),
            (None, Some(o)) => Ok((o, Some(old_dir))),
            (None, None) if has_log => Err(StoreError::KeyDir(format!(
                "the store in {} has a verdict log but {} holds no log key (moved data directory? configure StoreConfig::keys)",
                dir.display(),
                key_dir.display()
            ))),
            (None, None) => Ok((keys::create_key(key_dir)?, None)),
        }
    }

    /// Number of vectors in the store's indexes (all tenants).
    pub fn indexed_count(&self) -> usize {
        self.shared.vectors.len()
    }

    /// Guarded searches answered so far by each path (for metrics and tests).
    pub fn search_path_counts(&self) -> Vec<(memwarden_index::SearchPath, u64)> {
        self.shared.vectors.path_counts()
    }

    /// The key directory (signing key and witness).
    pub fn key_dir(&self) -> &Path {
        &self.shared.key_dir
    }

    /// Items of a namespace in `order` (a fixed ORDER BY clause of this module), at most `limit`.
    fn list_in_order(&self, tenant: &TenantId, namespace: &Namespace, limit: usize, order: &'static str) -> Result<Vec<MemoryItem>, StoreError> {
        let conn = lock(&self.shared.reader);
        let clause = format!("tenant = ?1 AND namespace = ?2 ORDER BY {order} LIMIT ?3");
        let rows: Vec<ItemRow> = self.rows(&conn, &clause, &[&tenant.as_str(), &namespace.as_str(), &i64::try_from(limit).unwrap_or(i64::MAX)])?;
        rows.iter()
            .map(|row| {
                let id = ItemId::from_bytes(row.id.clone().try_into().map_err(|_| StoreError::Corrupt("item id length".into()))?);
                item_of(row, tenant, &id).map_err(|reason| StoreError::ItemTampered { id: id.to_string(), reason })
            })
            .collect()
    }

    /// The store's id (recorded in its database; named by every tenant log's genesis entry).
    pub fn store_id(&self) -> &str {
        &self.shared.store_id
    }

    /// The read connection (tenant export reads through it, in a snapshot of its own).
    pub(crate) fn reader_conn(&self) -> MutexGuard<'_, Connection> {
        lock(&self.shared.reader)
    }

    /// Verify a store directory without opening it for writing (works on a tampered copy that
    /// [`SqliteStore::open`] would refuse): the log against its checkpoints and the witness,
    /// then every bound row against the log. The key directory is the default one for `dir`;
    /// for a copy of a data directory, the key directory of the store it was copied from is
    /// found by its store id.
    pub fn verify_dir(dir: &Path) -> Result<VerifyReport, StoreError> {
        Self::verify_dir_with(dir, &StoreConfig::default())
    }

    /// [`SqliteStore::verify_dir`] with the key location of `config`.
    pub fn verify_dir_with(dir: &Path, config: &StoreConfig) -> Result<VerifyReport, StoreError> {
        let conn = open_conn(&dir.join(DB_FILE), true, Durability::Durable)?;
        let store_id = meta_text(&conn, "store_id")?;
        let schema: Option<i64> = conn.query_row("SELECT value FROM meta WHERE key='schema'", [], |r| r.get(0)).optional()?;
        let mut key_dir = keys::resolve(dir, &config.keys)?;
        // A store of an earlier version's default, not yet opened by this one (or a copy of it):
        // its key directory is the `StateDir` one of its path, or the one bound to its store id.
        if matches!(config.keys, KeyLocation::InDataDir | KeyLocation::StateDir)
            && keys::load_key(&key_dir)?.is_none()
            && let Some(id) = &store_id
            && let Some(found) = keys::state_dir_of(dir, id)
        {
            key_dir = found;
        }
        let key = match keys::load_key(&key_dir)? {
            Some(k) => k,
            // A store of the old layout, not yet migrated.
            None => keys::load_key(&dir.join(keys::IN_DATA_DIR))?.ok_or_else(|| StoreError::KeyDir(format!("no log key in {}", key_dir.display())))?,
        };
        if !stored::per_tenant(&conn)? || schema.is_some_and(|s| s < SCHEMA_VERSION) {
            // A store of an earlier schema, not yet migrated: its one global log.
            let old = stored::read_legacy(&conn, "log", "checkpoints")?;
            let mut anchors = old.checkpoints.clone();
            if let Some(w) = keys::read_legacy_witness(&key_dir)?
                && Some(&w.store_id) == store_id.as_ref()
            {
                anchors.push(w.checkpoint);
            }
            return Ok(verify_log(&old.entries, &anchors, &key.verifying_key(), old.expected));
        }
        let witnessed = match &store_id {
            Some(id) => stored::witnesses(&key_dir, id)?,
            None => Default::default(),
        };
        let all = stored::read_logs(&conn, None)?;
        let mut report = stored::verify(&all, &key.verifying_key(), store_id.as_deref().unwrap_or(""), &witnessed, None);
        if report.problem.is_none() {
            report.problem = crate::audit::audit(&crate::db::SqliteDb(&conn), &all, None)?;
        }
        Ok(report)
    }

    /// For demonstrations and tests only: flip the last byte of stored log entry `index` (of the
    /// global view: the `index`-th entry committed, whichever tenant's; for a store with one
    /// tenant, that tenant's entry `index`) in a store directory that is not open — what an
    /// attacker with write access to the disk could do.
    pub fn tamper_log_entry(dir: &Path, index: u64) -> Result<(), StoreError> {
        let conn = open_conn(&dir.join(DB_FILE), false, Durability::Durable)?;
        let idx = i64::try_from(index).unwrap_or(i64::MAX);
        let column = if stored::per_tenant(&conn)? { "gseq" } else { "idx" };
        let mut entry: Vec<u8> = conn.query_row(&format!("SELECT entry FROM log WHERE {column} = ?1"), params![idx], |r| r.get(0))?;
        if let Some(b) = entry.last_mut() {
            *b ^= 0x01;
        }
        conn.execute(&format!("UPDATE log SET entry = ?1 WHERE {column} = ?2"), params![entry, idx])?;
        Ok(())
    }

    /// For demonstrations and tests only: flip the last byte of entry `index` of `tenant`'s log
    /// in a store directory (open or not) — what an attacker with write access to the disk could
    /// do. [`StoreError::UnknownLog`] if there is no such entry.
    pub fn tamper_log_entry_of(dir: &Path, tenant: &TenantId, index: u64) -> Result<(), StoreError> {
        let conn = open_conn(&dir.join(DB_FILE), false, Durability::Durable)?;
        let idx = i64::try_from(index).unwrap_or(i64::MAX);
        let entry: Option<Vec<u8>> = conn.query_row("SELECT entry FROM log WHERE tenant = ?1 AND idx = ?2", params![tenant.as_str(), idx], |r| r.get(0)).optional()?;
        let mut entry = entry.ok_or_else(|| StoreError::UnknownLog(format!("{tenant} (entry {index})")))?;
        if let Some(b) = entry.last_mut() {
            *b ^= 0x01;
        }
        conn.execute("UPDATE log SET entry = ?1 WHERE tenant = ?2 AND idx = ?3", params![entry, tenant.as_str(), idx])?;
        Ok(())
    }

    /// The data directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Whether this store was opened with [`SqliteStore::open_ephemeral`].
    pub fn is_ephemeral(&self) -> bool {
        self.durability == Durability::Ephemeral
    }

    fn send(&self, job: Job) -> Result<(), StoreError> {
        let guard = lock(&self.jobs);
        guard.as_ref().ok_or(StoreError::WriterGone)?.send(job).map_err(|_| StoreError::WriterGone)
    }

    /// Exact (brute-force cosine) search over a namespace, reading every stored embedding: the
    /// `k` most similar items that pass `eligible`, applied before the cut (never a score
    /// penalty). The oracle the index is tested against, and the fallback when an index is out
    /// of step. Every row and embedding is checked against the log.
    pub fn search_exact(
        &self,
        tenant: &TenantId,
        namespace: &Namespace,
        query: &[f32],
        k: usize,
        eligible: &dyn Fn(&MemoryItem) -> bool,
    ) -> Result<Vec<Hit>, StoreError> {
        let k = k.min(SEARCH_K_MAX);
        let conn = lock(&self.shared.reader);
        let mut scored: Vec<(f32, Vec<u8>)> = Vec::new();
        {
            let mut stmt = conn.prepare_cached("SELECT id, embedding, emb_digest FROM items WHERE tenant = ?1 AND namespace = ?2 AND embedding IS NOT NULL")?;
            let rows = stmt.query_map(params![tenant.as_str(), namespace.as_str()], |r| {
                Ok((r.get::<_, Vec<u8>>(0)?, r.get::<_, Vec<u8>>(1)?, r.get::<_, Option<Vec<u8>>>(2)?))
            })?;
            for row in rows {
                let (id, emb, digest) = row?;
                // The digest column is bound with the row (checked when the item is read below);
                // the vector must be the one it names.
                if digest.as_deref() != Some(embedding_digest(&emb).as_slice()) {
                    let id = hex::encode(&id);
                    return Err(StoreError::ItemTampered { id, reason: "its embedding differs from the digest its log entry committed".into() });
                }
                scored.push((cosine(query, &decode_f32(&emb)), id));
            }
        }
        scored.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
        let mut out = Vec::with_capacity(k);
        for (sim, raw) in scored {
            if out.len() >= k {
                break;
            }
            let id = ItemId::from_bytes(raw.try_into().map_err(|_| StoreError::Corrupt("item id length".into()))?);
            if let Some(item) = self.read_item(&conn, tenant, &id)?
                && eligible(&item)
            {
                out.push(Hit { item, similarity: sim, lexical: None });
            }
        }
        Ok(out)
    }

    /// Check a row (or its absence) against the state the log commits to.
    fn checked<R: BoundRow>(&self, key: &RowKey, row: Option<R>, describe: impl FnOnce() -> String) -> Result<Option<R>, StoreError> {
        match read_guard(&self.shared.state).check(key, row.as_ref().map(BoundRow::digest).as_ref()) {
            Check::Ok => Ok(row),
            bad => Err(StoreError::RowTampered { table: R::TABLE.name(), key: describe(), reason: bad.reason() }),
        }
    }

    /// Every row of `table` matching `sql_where`, each checked against the log.
    fn rows<R: BoundRow>(&self, conn: &Connection, sql_where: &str, args: &[&dyn rusqlite::ToSql]) -> Result<Vec<R>, StoreError> {
        let sql = format!("SELECT {} FROM {} WHERE {sql_where}", R::COLUMNS, R::TABLE.name());
        let rows: Vec<R> = conn.prepare_cached(&sql)?.query_map(args, |r| R::read(r))?.collect::<Result<_, _>>()?;
        let state = read_guard(&self.shared.state);
        for r in &rows {
            let c = state.check(&r.key(), Some(&r.digest()));
            if c != Check::Ok {
                return Err(StoreError::RowTampered { table: R::TABLE.name(), key: r.parts().join("/"), reason: c.reason() });
            }
        }
        Ok(rows)
    }

    fn read_item(&self, conn: &Connection, tenant: &TenantId, id: &ItemId) -> Result<Option<MemoryItem>, StoreError> {
        let sql = format!("SELECT {} FROM items WHERE id = ?1 AND tenant = ?2", ItemRow::COLUMNS);
        let row: Option<ItemRow> = conn.prepare_cached(&sql)?.query_row(params![id.as_bytes().as_slice(), tenant.as_str()], ItemRow::read).optional()?;
        let tampered = |reason: String| StoreError::ItemTampered { id: id.to_string(), reason };
        let key = row_key(Table::Items, tenant.as_str(), &[&id.to_string()]);
        let check = read_guard(&self.shared.state).check(&key, row.as_ref().map(BoundRow::digest).as_ref());
        if check != Check::Ok {
            return Err(tampered(format!("record {}", check.reason())));
        }
        let Some(row) = row else { return Ok(None) };
        item_of(&row, tenant, id).map(Some).map_err(tampered)
    }
}

/// The item a verified row holds, checked for the identity its key columns claim.
pub fn item_of(row: &ItemRow, tenant: &TenantId, id: &ItemId) -> Result<MemoryItem, String> {
    let item: MemoryItem = serde_json::from_str(&row.record).map_err(|e| format!("record does not decode: {e}"))?;
    if item.id() != *id || item.tenant() != tenant || item.namespace().as_str() != row.namespace {
        return Err("record names another id, tenant or namespace".into());
    }
    if item.identity_digest().as_slice() != row.digest.as_slice() {
        return Err("record differs from its identity digest".into());
    }
    let version = u64::try_from(row.version).map_err(|_| "negative version".to_owned())?;
    Ok(item.at_version(version))
}

impl Drop for SqliteStore {
    fn drop(&mut self) {
        // Close the queue, let the writer drain it, then join.
        lock(&self.jobs).take();
        if let Some(h) = lock(&self.writer).take() {
            let _ = h.join();
        }
        // An ephemeral store leaves nothing behind (open files are unlinked; the connections
        // close when `shared` drops right after this).
        if self.durability == Durability::Ephemeral {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// Take the data directory's lock (held while the returned file stays open) and write this
/// process's id into it; [`StoreError::Locked`], naming the pid the holder wrote, when another
/// open store (in this process or another) holds it.
pub(crate) fn lock_dir(dir: &Path) -> Result<std::fs::File, StoreError> {
    use std::io::{Seek, Write};
    let lock_path = dir.join(LOCK_FILE);
    let mut lock = {
        let mut o = std::fs::OpenOptions::new();
        o.create(true).truncate(false).write(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            o.mode(0o600);
        }
        o.open(&lock_path).map_err(io_err(&lock_path))?
    };
    match lock.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            let pid = std::fs::read_to_string(&lock_path).ok().and_then(|t| t.trim().parse::<u32>().ok());
            return Err(StoreError::locked(dir, pid));
        }
        Err(std::fs::TryLockError::Error(e)) => return Err(io_err(&lock_path)(e)),
    }
    lock.set_len(0).map_err(io_err(&lock_path))?;
    lock.rewind().map_err(io_err(&lock_path))?;
    writeln!(lock, "{}", std::process::id()).map_err(io_err(&lock_path))?;
    lock.flush().map_err(io_err(&lock_path))?;
    Ok(lock)
}

fn remove_old_key(old_dir: &Path) {
    let _ = std::fs::remove_file(old_dir.join(keys::LOG_KEY_FILE));
    let _ = std::fs::remove_dir(old_dir);
}

/// Cosine similarity of two vectors (`-inf` for different lengths, 0 for a zero vector).
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    if a.len() != b.len() {
        return f32::NEG_INFINITY;
    }
    let (mut dot, mut na, mut nb) = (0f32, 0f32, 0f32);
    for (x, y) in a.iter().zip(b) {
        dot += x * y;
        na += x * x;
        nb += y * y;
    }
    if na == 0.0 || nb == 0.0 { 0.0 } else { dot / (na.sqrt() * nb.sqrt()) }
}

fn limit_of(limit: usize) -> i64 {
    i64::try_from(limit.min(crate::PAGE_ROWS_MAX)).unwrap_or(0)
}

fn after_of(after: Option<u64>) -> i64 {
    after.map_or(-1, |a| i64::try_from(a).unwrap_or(i64::MAX))
}

impl Store for SqliteStore {
    fn store_id(&self) -> &str {
        SqliteStore::store_id(self)
    }
    fn commit(&self, now_ms: u64, mutations: Vec<Mutation>) -> Result<Vec<Result<Receipt, CommitError>>, StoreError> {
        if mutations.len() > BATCH_MUTATIONS_MAX {
            return Ok(vec![Err(CommitError::BatchTooLarge(mutations.len()))]);
        }
        let (reply, rx) = mpsc::channel();
        self.send(Job::Commit { now_ms, mutations, atomic: false, tag: None, reply })?;
        rx.recv().map_err(|_| StoreError::WriterGone)?.map_err(StoreError::Corrupt)
    }

    fn commit_atomic(&self, now_ms: u64, mutations: Vec<Mutation>) -> Result<Result<Vec<Receipt>, CommitError>, StoreError> {
        if mutations.len() > BATCH_MUTATIONS_MAX {
            return Ok(Err(CommitError::BatchTooLarge(mutations.len())));
        }
        if mutations.is_empty() {
            return Ok(Ok(Vec::new()));
        }
        let n = mutations.len();
        let (reply, rx) = mpsc::channel();
        self.send(Job::Commit { now_ms, mutations, atomic: true, tag: None, reply })?;
        let rs = rx.recv().map_err(|_| StoreError::WriterGone)?.map_err(StoreError::Corrupt)?;
        let out: Result<Vec<Receipt>, CommitError> = rs.into_iter().collect();
        debug_assert!(out.as_ref().map_or(true, |r| r.len() == n), "an atomic commit answers every mutation");
        Ok(out)
    }

    fn commit_idempotent(&self, now_ms: u64, mutations: Vec<Mutation>, tag: IdempotencyTag) -> Result<Result<Vec<Receipt>, CommitError>, StoreError> {
        if mutations.len() > BATCH_MUTATIONS_MAX {
            return Ok(Err(CommitError::BatchTooLarge(mutations.len())));
        }
        if mutations.is_empty() {
            return Ok(Ok(Vec::new()));
        }
        let (reply, rx) = mpsc::channel();
        self.send(Job::Commit { now_ms, mutations, atomic: true, tag: Some(tag), reply })?;
        let rs = rx.recv().map_err(|_| StoreError::WriterGone)?.map_err(StoreError::Corrupt)?;
        Ok(rs.into_iter().collect())
    }

    fn idempotency_record(&self, tenant: &TenantId, principal: &PrincipalId, key: &str, now_ms: u64) -> Result<Option<IdempotencyRecord>, StoreError> {
        let conn = lock(&self.shared.reader);
        crate::idempotency::get(&crate::db::SqliteDb(&conn), tenant, principal, key, now_ms, &crate::idempotency::mac_key(&self.shared.key))
    }

    fn record_answer(&self, tag: &IdempotencyTag, status: u16, body: &[u8]) -> Result<bool, StoreError> {
        let (reply, rx) = mpsc::channel();
        self.send(Job::Answer { tag: tag.clone(), status, body: body.to_vec(), reply })?;
        rx.recv().map_err(|_| StoreError::WriterGone)?.map_err(StoreError::Database)
    }

    fn principal(&self, tenant: &TenantId, id: &PrincipalId) -> Result<Option<Principal>, StoreError> {
        let conn = lock(&self.shared.reader);
        let sql = format!("SELECT {} FROM principals WHERE tenant = ?1 AND id = ?2", PrincipalRow::COLUMNS);
        let row: Option<PrincipalRow> = conn.prepare_cached(&sql)?.query_row(params![tenant.as_str(), id.as_str()], PrincipalRow::read).optional()?;
        let key = row_key(Table::Principals, tenant.as_str(), &[id.as_str()]);
        let Some(row) = self.checked(&key, row, || id.to_string())? else { return Ok(None) };
        principal_of(&row).map(Some)
    }

    fn principals(&self, tenant: &TenantId) -> Result<Vec<Principal>, StoreError> {
        let conn = lock(&self.shared.reader);
        let rows: Vec<PrincipalRow> = self.rows(&conn, "tenant = ?1 ORDER BY id", &[&tenant.as_str()])?;
        rows.iter().map(principal_of).collect()
    }

    fn item(&self, tenant: &TenantId, id: &ItemId) -> Result<Option<MemoryItem>, StoreError> {
        let conn = lock(&self.shared.reader);
        self.read_item(&conn, tenant, id)
    }

    fn list(&self, tenant: &TenantId, namespace: &Namespace, limit: usize) -> Result<Vec<MemoryItem>, StoreError> {
        self.list_in_order(tenant, namespace, limit, "created_ms, id")
    }

    fn list_newest(&self, tenant: &TenantId, namespace: &Namespace, limit: usize) -> Result<Vec<MemoryItem>, StoreError> {
        self.list_in_order(tenant, namespace, limit, NEWEST_FIRST)
    }

    fn list_after(&self, tenant: &TenantId, namespace: &Namespace, after: Option<crate::ListPosition>, limit: usize) -> Result<Vec<MemoryItem>, StoreError> {
        let Some(after) = after else { return self.list(tenant, namespace, limit) };
        let conn = lock(&self.shared.reader);
        let clause = "tenant = ?1 AND namespace = ?2 AND (created_ms, id) > (?3, ?4) ORDER BY created_ms, id LIMIT ?5";
        let created_ms = i64::try_from(after.created_ms).unwrap_or(i64::MAX);
        let id = after.id.as_bytes().as_slice();
        let rows: Vec<ItemRow> = self.rows(&conn, clause, &[&tenant.as_str(), &namespace.as_str(), &created_ms, &id, &i64::try_from(limit).unwrap_or(i64::MAX)])?;
        let items = rows
            .iter()
            .map(|row| {
                let id = ItemId::from_bytes(row.id.clone().try_into().map_err(|_| StoreError::Corrupt("item id length".into()))?);
                item_of(row, tenant, &id).map_err(|reason| StoreError::ItemTampered { id: id.to_string(), reason })
            })
            .collect::<Result<Vec<_>, _>>()?;
        debug_assert!(items.iter().all(|i| crate::ListPosition::of(i) > after));
        Ok(items)
    }

    fn cursor_key(&self) -> [u8; 32] {
        crate::cursor::cursor_key(&self.shared.key)
    }

    fn newest_ids(&self, tenant: &TenantId, namespace: &Namespace, limit: usize) -> Result<Vec<ItemId>, StoreError> {
        let conn = lock(&self.shared.reader);
        let mut stmt = conn.prepare_cached(&format!("SELECT id FROM items WHERE tenant = ?1 AND namespace = ?2 ORDER BY {NEWEST_FIRST} LIMIT ?3"))?;
        let raw: Vec<Vec<u8>> = stmt.query_map(params![tenant.as_str(), namespace.as_str(), i64::try_from(limit).unwrap_or(i64::MAX)], |r| r.get(0))?.collect::<Result<_, _>>()?;
        let ids: Vec<ItemId> = raw
            .into_iter()
            .map(|b| <[u8; 16]>::try_from(b.as_slice()).map(ItemId::from_bytes).map_err(|_| StoreError::Corrupt("item id length".into())))
            .collect::<Result<_, _>>()?;
        debug_assert!(ids.len() <= limit);
        Ok(ids)
    }

    fn items_in_order(&self, tenant: &TenantId, after: Option<u64>, limit: usize) -> Result<Vec<OrderedItem>, StoreError> {
        let conn = lock(&self.shared.reader);
        let (a, l) = (after_of(after), limit_of(limit));
        let live: Vec<ItemRow> = self.rows(&conn, "tenant = ?1 AND log_index > ?2 ORDER BY log_index LIMIT ?3", &[&tenant.as_str(), &a, &l])?;
        let gone: Vec<ErasedRow> = self.rows(&conn, "tenant = ?1 AND item_log_index > ?2 ORDER BY item_log_index LIMIT ?3", &[&tenant.as_str(), &a, &l])?;
        let mut out = Vec::with_capacity(live.len() + gone.len());
        for row in &live {
            let id = ItemId::from_bytes(row.id.clone().try_into().map_err(|_| StoreError::Corrupt("item id length".into()))?);
            let item = item_of(row, tenant, &id).map_err(|reason| StoreError::ItemTampered { id: id.to_string(), reason })?;
            out.push(OrderedItem { log_index: u64::try_from(row.log_index).unwrap_or(0), item, erased: false });
        }
        for row in &gone {
            let id = ItemId::from_bytes(row.id.clone().try_into().map_err(|_| StoreError::Corrupt("item id length".into()))?);
            let item: MemoryItem = serde_json::from_str(&row.tombstone).map_err(|e| StoreError::Corrupt(format!("tombstone {id}: {e}")))?;
            if item.id() != id || item.tenant() != tenant {
                return Err(StoreError::ItemTampered { id: id.to_string(), reason: "tombstone names another id or tenant".into() });
            }
            out.push(OrderedItem { log_index: u64::try_from(row.item_log_index).unwrap_or(0), item, erased: true });
        }
        out.sort_by_key(|o| o.log_index);
        out.truncate(usize::try_from(l).unwrap_or(0));
        let order: Vec<u64> = out.iter().map(|o| o.log_index).collect();
        read_guard(&self.shared.state)
            .check_page(tenant.as_str(), OrderKind::Items, after, usize::try_from(l).unwrap_or(0), &order)
            .map_err(|reason| StoreError::RowTampered { table: "items", key: format!("{tenant} in commit order"), reason })?;
        Ok(out)
    }

    fn seal_keys(&self, tenant: &TenantId, seals: &[crate::seal::SealId]) -> Result<Vec<(crate::seal::SealId, crate::seal::SealKey)>, StoreError> {
        let conn = lock(&self.shared.reader);
        let mut stmt = conn.prepare_cached("SELECT key FROM seals WHERE tenant = ?1 AND seal = ?2")?;
        let mut out = Vec::with_capacity(seals.len());
        for seal in seals.iter().take(crate::seal::SEALS_PER_BODY_MAX) {
            let key: Option<Vec<u8>> = stmt.query_row(params![tenant.as_str(), seal.as_slice()], |r| r.get(0)).optional()?;
            if let Some(key) = key {
                let key = crate::seal::SealKey::try_from(key.as_slice()).map_err(|_| StoreError::Corrupt(format!("seal {} has a key of {} bytes", hex::encode(seal), key.len())))?;
                out.push((*seal, key));
            }
        }
        debug_assert!(out.len() <= seals.len());
        Ok(out)
    }

    fn reputation(&self, tenant: &TenantId, principal: &PrincipalId) -> Result<Option<f64>, StoreError> {
        let conn = lock(&self.shared.reader);
        let sql = format!("SELECT {} FROM reputation WHERE tenant = ?1 AND principal = ?2", ReputationRow::COLUMNS);
        let row: Option<ReputationRow> = conn.prepare_cached(&sql)?.query_row(params![tenant.as_str(), principal.as_str()], ReputationRow::read).optional()?;
        let key = row_key(Table::Reputation, tenant.as_str(), &[principal.as_str()]);
        Ok(self.checked(&key, row, || principal.to_string())?.map(|r| r.value))
    }

    fn lineage_events(&self, tenant: &TenantId, after: Option<u64>, limit: usize) -> Result<Vec<(u64, serde_json::Value)>, StoreError> {
        let conn = lock(&self.shared.reader);
        let (a, l) = (after_of(after), limit_of(limit));
        let rows: Vec<LineageRow> = self.rows(&conn, "tenant = ?1 AND log_index > ?2 ORDER BY log_index LIMIT ?3", &[&tenant.as_str(), &a, &l])?;
        let order: Vec<u64> = rows.iter().map(|r| u64::try_from(r.log_index).unwrap_or(0)).collect();
        read_guard(&self.shared.state)
            .check_page(tenant.as_str(), OrderKind::Lineage, after, usize::try_from(l).unwrap_or(0), &order)
            .map_err(|reason| StoreError::RowTampered { table: "lineage_events", key: format!("{tenant} in commit order"), reason })?;
        rows.into_iter()
            .map(|r| {
                let event = serde_json::from_str(&r.event).map_err(|e| StoreError::Corrupt(format!("lineage event {}: {e}", r.log_index)))?;
                Ok((u64::try_from(r.log_index).unwrap_or(0), event))
            })
            .collect()
    }

    fn count(&self, tenant: &TenantId) -> Result<u64, StoreError> {
        let conn = lock(&self.shared.reader);
        let n: i64 = conn.query_row("SELECT COUNT(*) FROM items WHERE tenant = ?1", params![tenant.as_str()], |r| r.get(0))?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    fn attestations(&self, tenant: &TenantId, keys: &[String]) -> Result<Vec<Attestation>, StoreError> {
        let conn = lock(&self.shared.reader);
        let mut out = Vec::new();
        for k in keys {
            let rows: Vec<AttestationRow> = self.rows(&conn, "tenant = ?1 AND key = ?2", &[&tenant.as_str(), k])?;
            for r in rows {
                out.push(attestation_of(&r)?);
            }
        }
        Ok(out)
    }

    fn attestations_of(&self, tenant: &TenantId, key: &str, value: &NormValue) -> Result<Vec<Attestation>, StoreError> {
        let conn = lock(&self.shared.reader);
        let rows: Vec<AttestationRow> =
            self.rows(&conn, "tenant = ?1 AND key = ?2 AND json_extract(record, '$.value.canonical') = ?3", &[&tenant.as_str(), &key, &value.canonical])?;
        let mut out = Vec::new();
        for r in rows {
            let a = attestation_of(&r)?;
            if a.value == *value {
                out.push(a);
            }
        }
        Ok(out)
    }

    fn elevations(&self, tenant: &TenantId, keys: &[String]) -> Result<Vec<Elevation>, StoreError> {
        let conn = lock(&self.shared.reader);
        let mut out = Vec::new();
        for k in keys {
            let rows: Vec<ElevationRow> = self.rows(&conn, "tenant = ?1 AND key = ?2", &[&tenant.as_str(), k])?;
            for r in &rows {
                out.push(elevation_of(r)?);
            }
        }
        Ok(out)
    }

    fn elevations_all(&self, tenant: &TenantId) -> Result<Vec<Elevation>, StoreError> {
        let conn = lock(&self.shared.reader);
        let rows: Vec<ElevationRow> = self.rows(&conn, "tenant = ?1", &[&tenant.as_str()])?;
        rows.into_iter().map(|r| elevation_of(&r)).collect()
    }

    fn grant_used(&self, tenant: &TenantId, nonce: &[u8; 16]) -> Result<bool, StoreError> {
        // The log says whether a grant was used: a `grants_used` row deleted on disk does not
        // make a grant usable again (and a forged one is reported by `verify_log`).
        let key = row_key(Table::GrantsUsed, tenant.as_str(), &[&hex::encode(nonce)]);
        Ok(read_guard(&self.shared.state).check(&key, None) != Check::Ok)
    }

    fn session(&self, tenant: &TenantId, principal: &PrincipalId, session: &SessionId) -> Result<Option<StoredSession>, StoreError> {
        let conn = lock(&self.shared.reader);
        let sql = format!("SELECT {} FROM sessions WHERE tenant = ?1 AND principal = ?2 AND session = ?3", SessionRow::COLUMNS);
        let row: Option<SessionRow> =
            conn.prepare_cached(&sql)?.query_row(params![tenant.as_str(), principal.as_str(), session.as_str()], SessionRow::read).optional()?;
        let key = row_key(Table::Sessions, tenant.as_str(), &[principal.as_str(), session.as_str()]);
        let Some(row) = self.checked(&key, row, || format!("{principal}/{session}"))? else { return Ok(None) };
        serde_json::from_str(&row.record).map(Some).map_err(|e| StoreError::Corrupt(format!("session: {e}")))
    }

    fn sessions_of(&self, tenant: &TenantId, principal: &PrincipalId) -> Result<(Vec<StoredSession>, bool), StoreError> {
        let conn = lock(&self.shared.reader);
        let limit = i64::try_from(crate::SESSIONS_OF_MAX + 1).unwrap_or(i64::MAX);
        let rows: Vec<SessionRow> = self.rows(&conn, "tenant = ?1 AND principal = ?2 LIMIT ?3", &[&tenant.as_str(), &principal.as_str(), &limit])?;
        let more = rows.len() > crate::SESSIONS_OF_MAX;
        let out = rows.iter().take(crate::SESSIONS_OF_MAX).map(|r| serde_json::from_str(&r.record).map_err(|e| StoreError::Corrupt(format!("session: {e}")))).collect::<Result<Vec<StoredSession>, _>>()?;
        Ok((out, more))
    }

    fn search(&self, tenant: &TenantId, namespace: &Namespace, query: &[f32], k: usize, reader: &PrincipalId) -> Result<Vec<Hit>, StoreError> {
        if k == 0 || k > SEARCH_K_MAX {
            return Err(StoreError::BadQuery(format!("k must be 1..={SEARCH_K_MAX}")));
        }
        let Some(dims) = self.shared.vectors.dims() else {
            return Ok(Vec::new()); // nothing embedded yet
        };
        if query.len() != dims || query.iter().any(|x| !x.is_finite()) || query.iter().all(|x| *x == 0.0) {
            return Err(StoreError::BadQuery(format!("the query must be a finite, non-zero {dims}-dimensional vector (got {} dimensions)", query.len())));
        }
        let exact = || self.search_exact(tenant, namespace, query, k, &|i: &MemoryItem| i.searchable_by(reader));
        let Some(found) = self.shared.vectors.search(tenant, namespace, query, k, reader)? else {
            return exact();
        };
        let conn = lock(&self.shared.reader);
        let mut out = Vec::with_capacity(found.hits.len());
        for (id, similarity) in found.hits {
            // The catalog said eligible; the item read back (verified against the log) must agree.
            match self.read_item(&conn, tenant, &id)? {
                Some(item) if item.namespace() == namespace && item.searchable_by(reader) => out.push(Hit { item, similarity, lexical: None }),
                // Out of step (a status change raced this search): never return it, and answer
                // from the table instead so the caller still gets min(k, eligible) items.
                _ => {
                    drop(conn);
                    return exact();
                }
            }
        }
        Ok(out)
    }

    fn search_lexical(&self, tenant: &TenantId, namespace: &Namespace, text: &str, query: &[f32], k: usize, reader: &PrincipalId) -> Result<Vec<Hit>, StoreError> {
        if k == 0 || k > SEARCH_K_MAX {
            return Err(StoreError::BadQuery(format!("k must be 1..={SEARCH_K_MAX}")));
        }
        let conn = lock(&self.shared.reader);
        let ranked = crate::lexical::ranked(&conn, tenant.as_str(), namespace.as_str(), text)?;
        // Read candidates in rank order until k eligible matches are found: the permission filter
        // runs on the verified item, never on the index.
        let mut out = Vec::with_capacity(k);
        for (rowid, bm25) in ranked.iter().take(SEARCH_K_MAX.saturating_mul(16)) {
            type Row = (Vec<u8>, Option<Vec<u8>>, Option<Vec<u8>>);
            let row: Option<Row> = conn
                .prepare_cached("SELECT id, embedding, emb_digest FROM items WHERE rowid = ?1")?
                .query_row(params![rowid], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                .optional()?;
            // An index row without its item (or of another tenant) proposes nothing.
            let Some((raw, emb, digest)) = row else { continue };
            if let Some(e) = &emb
                && digest.as_deref() != Some(embedding_digest(e).as_slice())
            {
                return Err(StoreError::ItemTampered { id: hex::encode(&raw), reason: "its embedding differs from the digest its log entry committed".into() });
            }
            let Ok(raw) = <[u8; 16]>::try_from(raw.as_slice()) else { continue };
            let id = ItemId::from_bytes(raw);
            let Some(item) = self.read_item(&conn, tenant, &id)? else { continue };
            if item.namespace() != namespace || !item.searchable_by(reader) {
                continue;
            }
            let similarity = match emb {
                Some(e) if e.len() == query.len() * 4 => cosine(query, &decode_f32(&e)),
                _ => 0.0,
            };
            out.push(Hit { item, similarity, lexical: Some(*bm25) });
            if out.len() >= k {
                break;
            }
        }
        debug_assert!(out.len() <= k);
        Ok(out)
    }

    fn log_len(&self) -> u64 {
        read_guard(&self.shared.logs).global.len()
    }

    fn log_root(&self) -> (u64, Hash, Hash) {
        let l = read_guard(&self.shared.logs);
        (l.global.len(), l.global.root(), l.global.head())
    }

    fn log_entries(&self, from: u64, to: u64) -> Result<Vec<Vec<u8>>, StoreError> {
        let conn = lock(&self.shared.reader);
        let mut stmt = conn.prepare_cached("SELECT entry FROM log WHERE gseq >= ?1 AND gseq < ?2 ORDER BY gseq")?;
        let rows = stmt.query_map(params![i64::try_from(from).unwrap_or(i64::MAX), i64::try_from(to).unwrap_or(i64::MAX)], |r| r.get(0))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    fn inclusion_proof(&self, index: u64, size: u64) -> Result<Vec<Hash>, StoreError> {
        read_guard(&self.shared.logs).global.inclusion_proof(index, size).map_err(|e| StoreError::Corrupt(e.to_string()))
    }

    fn consistency_proof(&self, old_size: u64, new_size: u64) -> Result<Vec<Hash>, StoreError> {
        read_guard(&self.shared.logs).global.consistency_proof(old_size, new_size).map_err(|e| StoreError::Corrupt(e.to_string()))
    }

    fn checkpoint(&self, now_ms: u64) -> Result<SignedCheckpoint, StoreError> {
        let (reply, rx) = mpsc::channel();
        self.send(Job::Checkpoint { tenant: None, now_ms, reply })?;
        rx.recv().map_err(|_| StoreError::WriterGone)?.map_err(StoreError::Corrupt)
    }

    fn checkpoints(&self) -> Result<Vec<SignedCheckpoint>, StoreError> {
        let conn = lock(&self.shared.reader);
        checkpoints_of(&conn, GLOBAL)
    }

    fn log_public_key(&self) -> [u8; 32] {
        self.shared.key.verifying_key().to_bytes()
    }

    fn verify_log(&self) -> Result<VerifyReport, StoreError> {
        self.verify_live(None)
    }

    fn tenants(&self) -> Vec<TenantId> {
        let logs = read_guard(&self.shared.logs);
        let mut out: Vec<TenantId> = logs.tenants.keys().filter_map(|t| TenantId::new(t).ok()).collect();
        out.sort();
        out
    }

    fn log_len_of(&self, tenant: &TenantId) -> u64 {
        read_guard(&self.shared.logs).of(tenant.as_str()).map_or(0, VerdictLog::len)
    }

    fn log_root_of(&self, tenant: &TenantId) -> (u64, Hash, Hash) {
        let logs = read_guard(&self.shared.logs);
        match logs.of(tenant.as_str()) {
            Some(l) => (l.len(), l.root(), l.head()),
            None => (0, memwarden_log::empty_root(), [0; 32]),
        }
    }

    fn log_entries_of(&self, tenant: &TenantId, from: u64, to: u64) -> Result<Vec<Vec<u8>>, StoreError> {
        let conn = lock(&self.shared.reader);
        let mut stmt = conn.prepare_cached("SELECT entry FROM log WHERE tenant = ?1 AND idx >= ?2 AND idx < ?3 ORDER BY idx")?;
        let rows = stmt.query_map(params![tenant.as_str(), i64::try_from(from).unwrap_or(i64::MAX), i64::try_from(to).unwrap_or(i64::MAX)], |r| r.get(0))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    fn inclusion_proof_of(&self, tenant: &TenantId, index: u64, size: u64) -> Result<Vec<Hash>, StoreError> {
        let logs = read_guard(&self.shared.logs);
        let log = logs.of(tenant.as_str()).ok_or_else(|| StoreError::UnknownLog(tenant.to_string()))?;
        log.inclusion_proof(index, size).map_err(|e| StoreError::BadQuery(e.to_string()))
    }

    fn consistency_proof_of(&self, tenant: &TenantId, old_size: u64, new_size: u64) -> Result<Vec<Hash>, StoreError> {
        let logs = read_guard(&self.shared.logs);
        let log = logs.of(tenant.as_str()).ok_or_else(|| StoreError::UnknownLog(tenant.to_string()))?;
        log.consistency_proof(old_size, new_size).map_err(|e| StoreError::BadQuery(e.to_string()))
    }

    fn checkpoint_of(&self, tenant: &TenantId, now_ms: u64) -> Result<SignedCheckpoint, StoreError> {
        if read_guard(&self.shared.logs).of(tenant.as_str()).is_none() {
            return Err(StoreError::UnknownLog(tenant.to_string()));
        }
        let (reply, rx) = mpsc::channel();
        self.send(Job::Checkpoint { tenant: Some(tenant.as_str().to_owned()), now_ms, reply })?;
        rx.recv().map_err(|_| StoreError::WriterGone)?.map_err(StoreError::Corrupt)
    }

    fn checkpoints_of(&self, tenant: &TenantId) -> Result<Vec<SignedCheckpoint>, StoreError> {
        let conn = lock(&self.shared.reader);
        checkpoints_of(&conn, tenant.as_str())
    }

    fn verify_log_of(&self, tenant: &TenantId) -> Result<VerifyReport, StoreError> {
        self.verify_live(Some(tenant.as_str()))
    }
}

impl SqliteStore {
    /// Verify the stored logs (all, or one tenant's) against their checkpoints and witnesses, check
    /// that they are the logs this process verified at open and extended since, and audit every
    /// bound row (of that tenant).
    fn verify_live(&self, only: Option<&str>) -> Result<VerifyReport, StoreError> {
        let conn = lock(&self.shared.reader);
        let all = stored::read_logs(&conn, only)?;
        let witnessed = stored::witnesses(&self.shared.key_dir, &self.shared.store_id)?;
        let mut report = stored::verify(&all, &self.shared.key.verifying_key(), &self.shared.store_id, &witnessed, only);
        if report.problem.is_none() {
            // A consistent rewrite of the database under a running store is caught here.
            let logs = read_guard(&self.shared.logs);
            for (t, s) in &all.tenants {
                let Some(mine) = logs.of(t) else {
                    report.problem = Some(Problem::InLog { log: t.clone(), problem: Box::new(Problem::Extended { expected: 0, found: s.entries.len() as u64 }) });
                    break;
                };
                let n = s.entries.len().min(mine.leaves().len());
                if let Some(i) = (0..n).find(|&i| leaf_hash(&s.entries[i]) != mine.leaves()[i]) {
                    report.problem = Some(Problem::InLog { log: t.clone(), problem: Box::new(Problem::BrokenLink { index: i as u64 }) });
                    break;
                }
                if (s.entries.len() as u64) < mine.len() {
                    report.problem = Some(Problem::InLog { log: t.clone(), problem: Box::new(Problem::Truncated { expected: mine.len(), found: s.entries.len() as u64 }) });
                    break;
                }
            }
            if report.problem.is_none()
                && let Some((t, _)) = logs.tenants.iter().find(|(t, _)| only.is_none_or(|o| o == t.as_str()) && !all.tenants.contains_key(*t))
            {
                report.problem = Some(Problem::InLog { log: t.clone(), problem: Box::new(Problem::Truncated { expected: logs.of(t).map_or(0, VerdictLog::len), found: 0 }) });
            }
        }
        if report.problem.is_none() {
            report.problem = crate::audit::audit(&crate::db::SqliteDb(&conn), &all, only)?;
        }
        Ok(report)
    }
}

fn checkpoints_of(conn: &Connection, tenant: &str) -> Result<Vec<SignedCheckpoint>, StoreError> {
    let mut stmt = conn.prepare_cached("SELECT record FROM checkpoints WHERE tenant = ?1 ORDER BY size")?;
    let mut out = Vec::new();
    for rec in stmt.query_map(params![tenant], |r| r.get::<_, String>(0))? {
        out.push(serde_json::from_str(&rec?).map_err(|e| StoreError::Corrupt(format!("checkpoint: {e}")))?);
    }
    Ok(out)
}

/// The principal a verified row holds, checked for the tenant and id its key columns claim.
pub fn principal_of(row: &PrincipalRow) -> Result<Principal, StoreError> {
    let p: Principal = serde_json::from_str(&row.record).map_err(|e| StoreError::Corrupt(format!("principal {}: {e}", row.id)))?;
    if p.tenant.as_str() != row.tenant || p.id.as_str() != row.id {
        return Err(StoreError::RowTampered { table: "principals", key: row.id.clone(), reason: "the record names another principal or tenant".into() });
    }
    Ok(p)
}

/// The attestation a verified row holds, checked for the tenant and key its columns claim.
pub fn attestation_of(row: &AttestationRow) -> Result<Attestation, StoreError> {
    let a: Attestation = serde_json::from_str(&row.record).map_err(|e| StoreError::Corrupt(format!("attestations: {e}")))?;
    if a.tenant.as_str() != row.tenant || a.key != row.key {
        return Err(StoreError::RowTampered { table: "attestations", key: row.log_index.to_string(), reason: "the record names another tenant or key".into() });
    }
    Ok(a)
}

/// An `elevations` row's record, checked against the row's key columns.
pub(crate) fn elevation_of(r: &ElevationRow) -> Result<Elevation, StoreError> {
    let e: Elevation = serde_json::from_str(&r.record).map_err(|e| StoreError::Corrupt(format!("elevations: {e}")))?;
    if e.tenant.as_str() != r.tenant || e.key != r.key || e.value.canonical != r.value {
        return Err(StoreError::RowTampered { table: "elevations", key: r.parts().join("/"), reason: "the record names another key or value".into() });
    }
    Ok(e)
}
