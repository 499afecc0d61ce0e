//! The embedded backend: SQLite in WAL mode with `synchronous=FULL`, one writer thread doing
//! group commit, one reader connection.

use crate::vectors::{AccessChange, NewVector, Progress, Vectors, decode_f32};
use crate::{BATCH_MUTATIONS_MAX, CommitError, EMBEDDING_DIMS_MAX, Hit, Mutation, OrderedItem, Receipt, SEARCH_K_MAX, Store, StoreError, StoredSession};
use ed25519_dalek::SigningKey;
use memwarden_core::prelude::*;
use memwarden_log::{Entry, EntryKind, Hash, SignedCheckpoint, VerdictLog, VerifyReport, leaf_hash, verify_log};
use rusqlite::{Connection, OpenFlags, OptionalExtension, params};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock, mpsc};
use std::thread::JoinHandle;

const SCHEMA_VERSION: i64 = 4;
const DB_FILE: &str = "memwarden.db";
/// Lock file: held (flock) by the one process that has the store open for writing.
const LOCK_FILE: &str = "memwarden.lock";
const LOG_KEY_FILE: &str = "log.ed25519";

/// Tuning for the embedded store.
#[derive(Debug, Clone, Copy)]
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
}

impl Default for StoreConfig {
    fn default() -> Self {
        Self { checkpoint_every: 1024, group_commit_max: 1024, vector_exact_below: None }
    }
}

type Reply = mpsc::Sender<Result<Vec<Result<Receipt, CommitError>>, String>>;

enum Job {
    /// `atomic`: all mutations in one savepoint, all or nothing (the reply then holds every
    /// receipt, or one error).
    Commit { now_ms: u64, mutations: Vec<Mutation>, atomic: bool, reply: Reply },
    Checkpoint { now_ms: u64, reply: mpsc::Sender<Result<SignedCheckpoint, String>> },
}

struct Shared {
    /// Held for the store's lifetime: one process writes a data directory (and its log) at a time.
    _lock: std::fs::File,
    log: RwLock<VerdictLog>,
    key: SigningKey,
    reader: Mutex<Connection>,
    /// The vector indexes, one per (tenant, namespace).
    vectors: Vectors,
    last_checkpoint: AtomicU64,
    config: StoreConfig,
    durability: Durability,
}

/// The embedded store: one directory (`memwarden.db` plus its WAL, and `keys/`).
pub struct SqliteStore {
    shared: Arc<Shared>,
    jobs: Mutex<Option<mpsc::Sender<Job>>>,
    writer: Mutex<Option<JoinHandle<()>>>,
    dir: PathBuf,
    durability: Durability,
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> StoreError + '_ {
    move |error| StoreError::Io { path: path.display().to_string(), error }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn load_or_create_key(dir: &Path) -> Result<SigningKey, StoreError> {
    let keys = dir.join("keys");
    std::fs::create_dir_all(&keys).map_err(io_err(&keys))?;
    let path = keys.join(LOG_KEY_FILE);
    if path.exists() {
        let text = std::fs::read_to_string(&path).map_err(io_err(&path))?;
        let mut seed = [0u8; 32];
        hex::decode_to_slice(text.trim(), &mut seed).map_err(|e| StoreError::Corrupt(format!("{}: {e}", path.display())))?;
        return Ok(SigningKey::from_bytes(&seed));
    }
    let mut seed = [0u8; 32];
    getrandom::fill(&mut seed).map_err(|e| StoreError::Corrupt(format!("no randomness for the log key: {e}")))?;
    let tmp = keys.join(format!("{LOG_KEY_FILE}.tmp"));
    write_private(&tmp, hex::encode(seed).as_bytes())?;
    std::fs::rename(&tmp, &path).map_err(io_err(&path))?;
    Ok(SigningKey::from_bytes(&seed))
}

/// Whether a file can be created in `dir` (a read-only or full `/dev/shm` is skipped).
fn tempdir_usable(dir: &Path) -> bool {
    std::fs::metadata(dir).map(|m| !m.permissions().readonly()).unwrap_or(false)
}

/// Write a file readable only by its owner, and fsync it.
pub(crate) fn write_private(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    use std::io::Write;
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    let mut f = opts.open(path).map_err(io_err(path))?;
    f.write_all(bytes).map_err(io_err(path))?;
    f.sync_all().map_err(io_err(path))
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS principals(tenant TEXT NOT NULL, id TEXT NOT NULL, record TEXT NOT NULL, log_index INTEGER NOT NULL, PRIMARY KEY(tenant, id));
CREATE TABLE IF NOT EXISTS items(
  id BLOB PRIMARY KEY, tenant TEXT NOT NULL, namespace TEXT NOT NULL, record TEXT NOT NULL,
  digest BLOB NOT NULL, log_index INTEGER NOT NULL, embedding BLOB, created_ms INTEGER NOT NULL,
  version INTEGER NOT NULL DEFAULT 0);
CREATE INDEX IF NOT EXISTS items_by_namespace ON items(tenant, namespace, created_ms);
CREATE TABLE IF NOT EXISTS edges(child BLOB NOT NULL, parent BLOB NOT NULL, kind TEXT NOT NULL, PRIMARY KEY(child, parent, kind));
CREATE INDEX IF NOT EXISTS edges_by_parent ON edges(parent);
CREATE TABLE IF NOT EXISTS attestations(tenant TEXT NOT NULL, key TEXT NOT NULL, record TEXT NOT NULL, log_index INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS attestations_by_key ON attestations(tenant, key);
CREATE INDEX IF NOT EXISTS attestations_by_value ON attestations(tenant, key, json_extract(record, '$.value.canonical'));
CREATE TABLE IF NOT EXISTS elevations(tenant TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, record TEXT NOT NULL, log_index INTEGER NOT NULL, PRIMARY KEY(tenant, key, value));
CREATE TABLE IF NOT EXISTS grants_used(tenant TEXT NOT NULL, nonce BLOB NOT NULL, record TEXT NOT NULL, log_index INTEGER NOT NULL, PRIMARY KEY(tenant, nonce));
CREATE TABLE IF NOT EXISTS sessions(tenant TEXT NOT NULL, principal TEXT NOT NULL, session TEXT NOT NULL, record TEXT NOT NULL, log_index INTEGER NOT NULL, PRIMARY KEY(tenant, principal, session));
CREATE TABLE IF NOT EXISTS log(idx INTEGER PRIMARY KEY, entry BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS checkpoints(size INTEGER PRIMARY KEY, record TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS vectors(seq INTEGER PRIMARY KEY AUTOINCREMENT, id BLOB NOT NULL UNIQUE, tenant TEXT NOT NULL, namespace TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS lineage_events(seq INTEGER PRIMARY KEY AUTOINCREMENT, tenant TEXT NOT NULL, event TEXT NOT NULL, log_index INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS lineage_events_by_tenant ON lineage_events(tenant, log_index);
CREATE INDEX IF NOT EXISTS items_by_tenant_log ON items(tenant, log_index);
CREATE TABLE IF NOT EXISTS erased(id BLOB PRIMARY KEY, tenant TEXT NOT NULL, namespace TEXT NOT NULL, tombstone TEXT NOT NULL, item_log_index INTEGER NOT NULL, log_index INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS erased_by_tenant_log ON erased(tenant, item_log_index);
CREATE TABLE IF NOT EXISTS reputation(tenant TEXT NOT NULL, principal TEXT NOT NULL, value REAL NOT NULL, log_index INTEGER NOT NULL, PRIMARY KEY(tenant, principal));
";

/// Schema 1 stored embeddings only in `items`; schema 2 numbers them in `vectors` (the index
/// keys). Runs inside the open transaction of [`SqliteStore::open`].
const MIGRATE_1_TO_2: &str = "
INSERT OR IGNORE INTO vectors(id, tenant, namespace) SELECT id, tenant, namespace FROM items WHERE embedding IS NOT NULL ORDER BY log_index;
INSERT OR IGNORE INTO meta(key, value) SELECT 'vector_dims', length(embedding) / 4 FROM items WHERE embedding IS NOT NULL ORDER BY log_index LIMIT 1;
UPDATE meta SET value = 2 WHERE key = 'schema';
";

/// How hard a commit holds on to what it wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Durability {
    /// `synchronous=FULL`: an acknowledged commit survives `kill -9` and power loss.
    Durable,
    /// [`SqliteStore::open_ephemeral`]: `synchronous=OFF`, no index files, removed on drop.
    Ephemeral,
}

/// Schema 4 gives every item row a version (compare-and-set): the log index of the last change
/// to it. Migrated rows start at their write's index (any value that changes with every later
/// change will do: a version is concurrency control, never authority).
const MIGRATE_3_TO_4: &str = "
ALTER TABLE items ADD COLUMN version INTEGER NOT NULL DEFAULT 0;
UPDATE items SET version = log_index;
";

fn open_conn(path: &Path, read_only: bool, durability: Durability) -> Result<Connection, StoreError> {
    let flags = if read_only {
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX
    } else {
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE | OpenFlags::SQLITE_OPEN_NO_MUTEX
    };
    let conn = Connection::open_with_flags(path, flags)?;
    conn.busy_timeout(std::time::Duration::from_secs(10))?;
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
    Ok(conn)
}

/// Everything needed to verify a stored log, read from the database.
struct StoredLog {
    entries: Vec<Vec<u8>>,
    checkpoints: Vec<SignedCheckpoint>,
    expected: Option<(u64, Hash)>,
}

fn read_stored_log(conn: &Connection) -> Result<StoredLog, StoreError> {
    let mut stmt = conn.prepare("SELECT entry FROM log ORDER BY idx")?;
    let entries = stmt.query_map([], |r| r.get::<_, Vec<u8>>(0))?.collect::<Result<Vec<_>, _>>()?;
    let checkpoints = read_stored_log_checkpoints(conn)?;
    let size: Option<i64> = conn.query_row("SELECT value FROM meta WHERE key='log_size'", [], |r| r.get(0)).optional()?;
    let head: Option<Vec<u8>> = conn.query_row("SELECT value FROM meta WHERE key='log_head'", [], |r| r.get(0)).optional()?;
    let expected = match (size, head) {
        (Some(s), Some(h)) if h.len() == 32 => {
            let mut hh = [0u8; 32];
            hh.copy_from_slice(&h);
            Some((u64::try_from(s).unwrap_or(0), hh))
        }
        (None, None) => None,
        _ => return Err(StoreError::Corrupt("recorded log head is malformed".into())),
    };
    Ok(StoredLog { entries, checkpoints, expected })
}

impl SqliteStore {
    /// Open (creating if needed) the store in `dir`. Reopening verifies the whole log against the
    /// recorded head and every signed checkpoint, and refuses a store that does not verify.
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
    /// writes index files, and is deleted when the store is dropped. Nothing in it survives a
    /// crash or a drop; never use it for data you want to keep.
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

    fn open_inner(dir: &Path, config: StoreConfig, progress: Progress<'_>, durability: Durability) -> Result<Self, StoreError> {
        std::fs::create_dir_all(dir).map_err(io_err(dir))?;
        let lock_path = dir.join(LOCK_FILE);
        let lock = std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(&lock_path).map_err(io_err(&lock_path))?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => return Err(StoreError::Locked(dir.display().to_string())),
            Err(std::fs::TryLockError::Error(e)) => return Err(io_err(&lock_path)(e)),
        }
        let key = load_or_create_key(dir)?;
        let db = dir.join(DB_FILE);
        let mut writer = open_conn(&db, false, durability)?;
        writer.execute_batch(SCHEMA)?;
        let version: Option<i64> = writer.query_row("SELECT value FROM meta WHERE key='schema'", [], |r| r.get(0)).optional()?;
        match version {
            Some(v) if v > SCHEMA_VERSION => return Err(StoreError::Schema(v)),
            Some(v @ (1..=3)) => {
                // Schema 3 only adds tables and indexes (created above); a store without lineage
                // rows rebuilds its graph from items alone.
                let tx = writer.transaction()?;
                if v == 1 {
                    tx.execute_batch(MIGRATE_1_TO_2)?;
                }
                let has_version: i64 = tx.query_row("SELECT count(*) FROM pragma_table_info('items') WHERE name = 'version'", [], |r| r.get(0))?;
                if has_version == 0 {
                    tx.execute_batch(MIGRATE_3_TO_4)?;
                }
                tx.execute("UPDATE meta SET value = ?1 WHERE key = 'schema'", params![SCHEMA_VERSION])?;
                tx.commit()?;
            }
            Some(_) => {}
            None => {
                writer.execute("INSERT INTO meta(key, value) VALUES('schema', ?1)", params![SCHEMA_VERSION])?;
            }
        }
        let stored = read_stored_log(&writer)?;
        let report = verify_log(&stored.entries, &stored.checkpoints, &key.verifying_key(), stored.expected);
        if let Some(p) = &report.problem {
            return Err(StoreError::LogTampered(p.to_string()));
        }
        let leaves: Vec<Hash> = stored.entries.iter().map(|e| leaf_hash(e)).collect();
        let last_checkpoint = stored.checkpoints.last().map(|c| c.checkpoint.size).unwrap_or(0);
        let mut log = VerdictLog::from_leaves(leaves);
        if log.is_empty() {
            let body = serde_json::to_vec(&json!({"store": "memwarden", "schema": SCHEMA_VERSION, "log_key": hex::encode(key.verifying_key().to_bytes())}))
                .map_err(|e| StoreError::Corrupt(e.to_string()))?;
            let genesis = log.prepare(EntryKind::Genesis, 0, body);
            let tx = writer.transaction()?;
            tx.execute("INSERT INTO log(idx, entry) VALUES(0, ?1)", params![genesis.encode()])?;
            set_head(&tx, 1, &genesis.leaf())?;
            tx.commit()?;
            log.append(&genesis).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        }
        let vectors = Vectors::open(dir, &writer, config.vector_exact_below, progress)?;
        let reader = open_conn(&db, true, durability)?;
        let shared = Arc::new(Shared {
            durability,
            vectors,
            _lock: lock,
            log: RwLock::new(log),
            key,
            reader: Mutex::new(reader),
            last_checkpoint: AtomicU64::new(last_checkpoint),
            config,
        });
        let (tx, rx) = mpsc::channel::<Job>();
        let s2 = Arc::clone(&shared);
        let handle = std::thread::Builder::new()
            .name("memwarden-writer".into())
            .spawn(move || writer_loop(writer, rx, &s2))
            .map_err(io_err(dir))?;
        Ok(Self { shared, jobs: Mutex::new(Some(tx)), writer: Mutex::new(Some(handle)), dir: dir.to_path_buf(), durability })
    }

    /// Number of vectors in the store's indexes (all tenants).
    pub fn indexed_count(&self) -> usize {
        self.shared.vectors.len()
    }

    /// Guarded searches answered so far by each path (for metrics and tests).
    pub fn search_path_counts(&self) -> Vec<(memwarden_index::SearchPath, u64)> {
        self.shared.vectors.path_counts()
    }

    /// Verify the log of a store directory without opening it for writing (works on a tampered
    /// copy that [`SqliteStore::open`] would refuse).
    pub fn verify_dir(dir: &Path) -> Result<VerifyReport, StoreError> {
        let key = load_or_create_key_readonly(dir)?;
        let conn = open_conn(&dir.join(DB_FILE), true, Durability::Durable)?;
        let stored = read_stored_log(&conn)?;
        Ok(verify_log(&stored.entries, &stored.checkpoints, &key.verifying_key(), stored.expected))
    }

    /// For demonstrations and tests only: flip the last byte of stored log entry `index` in a store
    /// directory that is not open — what an attacker with write access to the disk could do.
    pub fn tamper_log_entry(dir: &Path, index: u64) -> Result<(), StoreError> {
        let conn = open_conn(&dir.join(DB_FILE), false, Durability::Durable)?;
        let idx = i64::try_from(index).unwrap_or(i64::MAX);
        let mut entry: Vec<u8> = conn.query_row("SELECT entry FROM log WHERE idx = ?1", params![idx], |r| r.get(0))?;
        if let Some(b) = entry.last_mut() {
            *b ^= 0x01;
        }
        conn.execute("UPDATE log SET entry = ?1 WHERE idx = ?2", params![entry, idx])?;
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
    /// of step.
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
            let mut stmt = conn.prepare_cached("SELECT id, embedding FROM items WHERE tenant = ?1 AND namespace = ?2 AND embedding IS NOT NULL")?;
            let rows = stmt.query_map(params![tenant.as_str(), namespace.as_str()], |r| Ok((r.get::<_, Vec<u8>>(0)?, r.get::<_, Vec<u8>>(1)?)))?;
            for row in rows {
                let (id, emb) = row?;
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
                && eligible(&item) {
                    out.push(Hit { item, similarity: sim });
                }
        }
        Ok(out)
    }

    fn read_item(&self, conn: &Connection, tenant: &TenantId, id: &ItemId) -> Result<Option<MemoryItem>, StoreError> {
        let row: Option<(String, Vec<u8>, i64, i64)> = conn
            .prepare_cached("SELECT record, digest, log_index, version FROM items WHERE id = ?1 AND tenant = ?2")?
            .query_row(params![id.as_bytes().as_slice(), tenant.as_str()], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
            .optional()?;
        let Some((record, digest, log_index, version)) = row else {
            return Ok(None);
        };
        let item: MemoryItem = serde_json::from_str(&record).map_err(|e| StoreError::Corrupt(format!("item {id}: {e}")))?;
        let tampered = |reason: &str| StoreError::ItemTampered { id: id.to_string(), reason: reason.to_owned() };
        if item.id() != *id || item.tenant() != tenant {
            return Err(tampered("record names another id or tenant"));
        }
        if item.identity_digest().as_slice() != digest.as_slice() {
            return Err(tampered("record differs from its digest"));
        }
        let idx = u64::try_from(log_index).map_err(|_| tampered("negative log index"))?;
        let entry: Vec<u8> = conn
            .prepare_cached("SELECT entry FROM log WHERE idx = ?1")?
            .query_row(params![log_index], |r| r.get(0))
            .optional()?
            .ok_or_else(|| tampered("its log entry is missing"))?;
        let leaf_ok = self.shared.log.read().map(|l| l.leaves().get(idx as usize) == Some(&leaf_hash(&entry))).unwrap_or(false);
        if !leaf_ok {
            return Err(tampered("its log entry differs from the verified log"));
        }
        let decoded = Entry::decode(&entry).map_err(|e| tampered(&e.to_string()))?;
        let body: serde_json::Value = serde_json::from_slice(&decoded.body).map_err(|e| tampered(&e.to_string()))?;
        if body.get("digest").and_then(|d| d.as_str()) != Some(hex::encode(&digest).as_str()) {
            return Err(tampered("its log entry commits to another digest"));
        }
        let version = u64::try_from(version).map_err(|_| tampered("negative version"))?;
        Ok(Some(item.at_version(version)))
    }
}

fn load_or_create_key_readonly(dir: &Path) -> Result<SigningKey, StoreError> {
    let path = dir.join("keys").join(LOG_KEY_FILE);
    let text = std::fs::read_to_string(&path).map_err(io_err(&path))?;
    let mut seed = [0u8; 32];
    hex::decode_to_slice(text.trim(), &mut seed).map_err(|e| StoreError::Corrupt(format!("{}: {e}", path.display())))?;
    Ok(SigningKey::from_bytes(&seed))
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

fn set_head(conn: &Connection, size: u64, head: &Hash) -> Result<(), rusqlite::Error> {
    let size = i64::try_from(size).unwrap_or(i64::MAX);
    conn.prepare_cached("INSERT INTO meta(key, value) VALUES('log_size', ?1) ON CONFLICT(key) DO UPDATE SET value = excluded.value")?
        .execute(params![size])?;
    conn.prepare_cached("INSERT INTO meta(key, value) VALUES('log_head', ?1) ON CONFLICT(key) DO UPDATE SET value = excluded.value")?
        .execute(params![head.as_slice()])?;
    Ok(())
}

/// The chain state while a group is being applied: entries are linked locally and appended to the
/// shared log only after the transaction commits.
struct Pending {
    len: u64,
    head: Hash,
    entries: Vec<Entry>,
    /// Vectors to index once the transaction commits.
    vectors: Vec<NewVector>,
    /// Catalog changes (status or scope) to apply once the transaction commits.
    access: Vec<AccessChange>,
    /// The store's vector dimension (set by the first vector ever, possibly in this group).
    dims: Option<usize>,
}

impl Pending {
    fn push(&mut self, conn: &Connection, now_ms: u64, kind: EntryKind, body: &serde_json::Value) -> Result<(u64, Hash), CommitError> {
        let body = serde_json::to_vec(body).map_err(|e| CommitError::Storage(e.to_string()))?;
        let entry = Entry { index: self.len, prev: self.head, time_ms: now_ms, kind, body };
        let bytes = entry.encode();
        let leaf = leaf_hash(&bytes);
        conn.prepare_cached("INSERT INTO log(idx, entry) VALUES(?1, ?2)")
            .and_then(|mut s| s.execute(params![i64::try_from(self.len).unwrap_or(i64::MAX), bytes]))
            .map_err(sql)?;
        let idx = self.len;
        self.len += 1;
        self.head = leaf;
        self.entries.push(entry);
        Ok((idx, leaf))
    }
}

fn sql(e: rusqlite::Error) -> CommitError {
    CommitError::Storage(e.to_string())
}

fn is_constraint(e: &rusqlite::Error) -> bool {
    matches!(e, rusqlite::Error::SqliteFailure(f, _) if f.code == rusqlite::ErrorCode::ConstraintViolation)
}

fn to_json<T: serde::Serialize>(v: &T) -> Result<String, CommitError> {
    serde_json::to_string(v).map_err(|e| CommitError::Storage(e.to_string()))
}

fn embedding_bytes(e: &[f32], dims: Option<usize>) -> Result<Vec<u8>, CommitError> {
    if e.is_empty() || e.len() > EMBEDDING_DIMS_MAX || e.iter().any(|x| !x.is_finite()) {
        return Err(CommitError::BadEmbedding(format!("{} dimensions (1..={EMBEDDING_DIMS_MAX}, finite)", e.len())));
    }
    if let Some(d) = dims
        && d != e.len()
    {
        return Err(CommitError::BadEmbedding(format!("{} dimensions, but this store holds {d}-dimensional vectors", e.len())));
    }
    if e.iter().all(|x| *x == 0.0) {
        return Err(CommitError::BadEmbedding("the zero vector has no direction".into()));
    }
    Ok(e.iter().flat_map(|x| x.to_le_bytes()).collect())
}

/// Insert an admitted item (its row, vector, edges) and log its write entry.
fn insert_item(conn: &Connection, now_ms: u64, write: &AdmittedWrite, embedding: &Option<Vec<f32>>, p: &mut Pending) -> Result<(u64, Hash), CommitError> {
    let item = write.item();
    let emb = embedding.as_deref().map(|e| embedding_bytes(e, p.dims)).transpose()?;
    let digest = item.identity_digest();
    let next = p.len;
    let r = conn
        .prepare_cached(
            "INSERT INTO items(id, tenant, namespace, record, digest, log_index, embedding, created_ms, version) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?6)",
        )
        .and_then(|mut s| {
            s.execute(params![
                item.id().as_bytes().as_slice(),
                item.tenant().as_str(),
                item.namespace().as_str(),
                to_json(item).unwrap_or_default(),
                digest.as_slice(),
                next as i64,
                emb,
                i64::try_from(item.created_ms()).unwrap_or(i64::MAX)
            ])
        });
    match r {
        Err(e) if is_constraint(&e) => return Err(CommitError::ItemExists(item.id().to_string())),
        Err(e) => return Err(sql(e)),
        Ok(_) => {}
    }
    if let Some(e) = embedding {
        conn.prepare_cached("INSERT INTO vectors(id, tenant, namespace) VALUES(?1, ?2, ?3)")
            .and_then(|mut s| s.execute(params![item.id().as_bytes().as_slice(), item.tenant().as_str(), item.namespace().as_str()]))
            .map_err(sql)?;
        let seq = u64::try_from(conn.last_insert_rowid()).map_err(|_| CommitError::Storage("negative vector sequence".into()))?;
        if p.dims.is_none() {
            conn.prepare_cached("INSERT INTO meta(key, value) VALUES('vector_dims', ?1)")
                .and_then(|mut s| s.execute(params![e.len() as i64]))
                .map_err(sql)?;
            p.dims = Some(e.len());
        }
        p.vectors.push(NewVector {
            seq,
            id: item.id(),
            tenant: item.tenant().clone(),
            namespace: item.namespace().clone(),
            embedding: e.clone(),
            scope: item.scope().clone(),
            status: item.status(),
        });
    }
    for parent in item.parents() {
        conn.prepare_cached("INSERT OR IGNORE INTO edges(child, parent, kind) VALUES(?1, ?2, ?3)")
            .and_then(|mut s| s.execute(params![item.id().as_bytes().as_slice(), parent.id.as_bytes().as_slice(), parent.kind.as_str()]))
            .map_err(sql)?;
    }
    let kind = match item.route() {
        Route::Summary => EntryKind::Derive,
        Route::ToolObservation => EntryKind::ToolCall,
        _ => EntryKind::Write,
    };
    p.push(
        conn,
        now_ms,
        kind,
        &json!({
            "tenant": item.tenant(), "id": item.id(), "namespace": item.namespace(), "writer": item.writer(),
            "origin": item.origin(), "label": item.label(), "route": item.route(), "parents": item.parents(),
            "status": item.status(), "digest": hex::encode(digest),
        }),
    )
}

/// [`update_access`], then log the change: `fields` plus the item's tenant, id, status and
/// identity digest.
fn access_changed(conn: &Connection, p: &mut Pending, now_ms: u64, kind: EntryKind, item: &MemoryItem, fields: serde_json::Value) -> Result<(u64, Hash), CommitError> {
    update_access(conn, p, item)?;
    let mut body = fields;
    if let Some(o) = body.as_object_mut() {
        o.insert("tenant".into(), json!(item.tenant()));
        o.insert("id".into(), json!(item.id()));
        o.insert("status".into(), json!(item.status()));
        o.insert("digest".into(), json!(hex::encode(item.identity_digest())));
    }
    p.push(conn, now_ms, kind, &body)
}

/// Compare-and-set one item row: replace its record and move its version to `new_version`, only
/// if it is still at `expected` (the version the gate read). [`CommitError::Conflict`] when it
/// moved on, [`CommitError::ItemMissing`] when it is gone.
fn cas_record(conn: &Connection, tenant: &TenantId, id: &ItemId, record: &str, expected: u64, new_version: u64) -> Result<(), CommitError> {
    let changed = conn
        .prepare_cached("UPDATE items SET record = ?1, version = ?4 WHERE id = ?2 AND tenant = ?3 AND version = ?5")
        .and_then(|mut s| {
            s.execute(params![
                record,
                id.as_bytes().as_slice(),
                tenant.as_str(),
                i64::try_from(new_version).unwrap_or(i64::MAX),
                i64::try_from(expected).unwrap_or(i64::MAX)
            ])
        })
        .map_err(sql)?;
    if changed == 1 {
        return Ok(());
    }
    let exists: Option<i64> = conn
        .prepare_cached("SELECT version FROM items WHERE id = ?1 AND tenant = ?2")
        .and_then(|mut s| s.query_row(params![id.as_bytes().as_slice(), tenant.as_str()], |r| r.get(0)).optional())
        .map_err(sql)?;
    Err(match exists {
        Some(_) => CommitError::Conflict { id: id.to_string() },
        None => CommitError::ItemMissing(id.to_string()),
    })
}

/// Store an item's changed status or scope (identity unchanged) if its row is still at the
/// version the gate read (compare-and-set; the new version is the index of the entry about to be
/// logged), and queue the index catalog's matching change, applied once the transaction commits.
fn update_access(conn: &Connection, p: &mut Pending, item: &MemoryItem) -> Result<(), CommitError> {
    let record = to_json(item)?;
    cas_record(conn, item.tenant(), &item.id(), &record, item.version(), p.len)?;
    let seq: Option<i64> = conn
        .prepare_cached("SELECT seq FROM vectors WHERE id = ?1")
        .and_then(|mut s| s.query_row(params![item.id().as_bytes().as_slice()], |r| r.get(0)).optional())
        .map_err(sql)?;
    if let Some(seq) = seq {
        let seq = u64::try_from(seq).map_err(|_| CommitError::Storage("negative vector sequence".into()))?;
        p.access.push(AccessChange {
            seq,
            tenant: item.tenant().clone(),
            namespace: item.namespace().clone(),
            scope: item.scope().clone(),
            status: item.status(),
            erased: false,
        });
    }
    Ok(())
}

fn apply(conn: &Connection, now_ms: u64, m: &Mutation, p: &mut Pending) -> Result<Receipt, CommitError> {
    let (log_index, leaf) = match m {
        Mutation::Principal(pr) => {
            let next = p.len;
            let r = conn
                .prepare_cached("INSERT INTO principals(tenant, id, record, log_index) VALUES(?1, ?2, ?3, ?4)")
                .and_then(|mut s| s.execute(params![pr.tenant.as_str(), pr.id.as_str(), to_json(pr).unwrap_or_default(), next as i64]));
            match r {
                Err(e) if is_constraint(&e) => return Err(CommitError::PrincipalExists(pr.id.to_string())),
                Err(e) => return Err(sql(e)),
                Ok(_) => {}
            }
            p.push(conn, now_ms, EntryKind::Principal, &json!({"tenant": pr.tenant, "principal": pr}))?
        }
        Mutation::Item { write, embedding } => insert_item(conn, now_ms, write, embedding, p)?,
        Mutation::Update { update, embedding } => {
            let r = insert_item(conn, now_ms, update.write(), embedding, p)?;
            let old = update.superseded();
            access_changed(conn, p, now_ms, EntryKind::Revocation, old, json!({"superseded_by": old.superseded_by()}))?;
            r
        }
        Mutation::Attestation(a) => {
            let a = a.attestation();
            let next = p.len;
            conn.prepare_cached("INSERT INTO attestations(tenant, key, record, log_index) VALUES(?1, ?2, ?3, ?4)")
                .and_then(|mut s| s.execute(params![a.tenant.as_str(), a.key, to_json(a).unwrap_or_default(), next as i64]))
                .map_err(sql)?;
            p.push(conn, now_ms, EntryKind::Attestation, &json!(a))?
        }
        Mutation::GrantIssued(g) => {
            let gr = &g.grant;
            p.push(
                conn,
                now_ms,
                EntryKind::GrantIssued,
                &json!({"tenant": gr.tenant, "user": gr.user, "tool": gr.tool, "key": gr.key, "value": gr.value, "amount": gr.amount,
                        "nonce": gr.nonce_hex(), "expires_ms": gr.expires_ms, "signature": hex::encode(g.signature)}),
            )?
        }
        Mutation::SessionTaint { tenant, principal, session, observed } => {
            let existing: Option<String> = conn
                .prepare_cached("SELECT record FROM sessions WHERE tenant = ?1 AND principal = ?2 AND session = ?3")
                .and_then(|mut s| s.query_row(params![tenant.as_str(), principal.as_str(), session.as_str()], |r| r.get(0)).optional())
                .map_err(sql)?;
            // The row only falls: meet of the stored floor and the new one, witnesses merged.
            let mut row = StoredSession { floor: observed.floor(), witnesses: observed.witnesses().to_vec() };
            if let Some(rec) = existing {
                let old: StoredSession = serde_json::from_str(&rec).map_err(|e| CommitError::Storage(format!("stored session is corrupt: {e}")))?;
                row.floor = row.floor.min(old.floor);
                for w in old.witnesses {
                    if !row.witnesses.contains(&w) && row.witnesses.len() < memwarden_core::session::WITNESSES_MAX {
                        row.witnesses.push(w);
                    }
                }
            }
            let next = p.len;
            conn.prepare_cached(
                "INSERT INTO sessions(tenant, principal, session, record, log_index) VALUES(?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT(tenant, principal, session) DO UPDATE SET record = excluded.record, log_index = excluded.log_index",
            )
            .and_then(|mut s| s.execute(params![tenant.as_str(), principal.as_str(), session.as_str(), to_json(&row).unwrap_or_default(), next as i64]))
            .map_err(sql)?;
            p.push(
                conn,
                now_ms,
                EntryKind::SessionTaint,
                &json!({"tenant": tenant, "principal": principal, "session": session, "floor": row.floor, "witnesses": row.witnesses}),
            )?
        }
        Mutation::Revocation(r) => {
            access_changed(conn, p, now_ms, EntryKind::Revocation, r.item(), json!({"by": r.by(), "reason": r.reason()}))?
        }
        Mutation::Promotion(pr) => access_changed(
            conn,
            p,
            now_ms,
            EntryKind::Promotion,
            pr.item(),
            json!({"by": pr.by(), "from": pr.from(), "readers": pr.item().scope().readers}),
        )?,
        Mutation::Hold(h) => {
            access_changed(conn, p, now_ms, EntryKind::Decision, h.item(), json!({"hold": {"by": h.by(), "reason": h.reason()}}))?
        }
        Mutation::Erasure { tenant, ids, event } => {
            if ids.is_empty() || ids.len() > crate::ERASE_IDS_MAX {
                return Err(CommitError::Storage(format!("an erasure names 1..={} memories", crate::ERASE_IDS_MAX)));
            }
            let text = to_json(event)?;
            if text.len() > crate::LINEAGE_EVENT_BYTES_MAX {
                return Err(CommitError::LineageEventTooLarge(text.len()));
            }
            let next = p.len;
            for id in ids {
                let row: Option<(String, String, i64)> = conn
                    .prepare_cached("SELECT namespace, record, log_index FROM items WHERE id = ?1 AND tenant = ?2")
                    .and_then(|mut s| s.query_row(params![id.as_bytes().as_slice(), tenant.as_str()], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).optional())
                    .map_err(sql)?;
                let Some((namespace, record, item_log_index)) = row else {
                    return Err(CommitError::ItemMissing(id.to_string()));
                };
                // The tombstone keeps the identity and lineage fields, never the text.
                let mut tomb: serde_json::Value = serde_json::from_str(&record).map_err(|e| CommitError::Storage(format!("stored item {id}: {e}")))?;
                if let Some(o) = tomb.as_object_mut() {
                    o.insert("content".into(), serde_json::Value::String(crate::TOMBSTONE_CONTENT.into()));
                    o.insert("metadata".into(), serde_json::Value::Object(serde_json::Map::new()));
                }
                let tomb = to_json(&tomb)?;
                conn.prepare_cached("INSERT INTO erased(id, tenant, namespace, tombstone, item_log_index, log_index) VALUES(?1, ?2, ?3, ?4, ?5, ?6)")
                    .and_then(|mut s| s.execute(params![id.as_bytes().as_slice(), tenant.as_str(), namespace, tomb, item_log_index, next as i64]))
                    .map_err(sql)?;
                let seq: Option<i64> = conn
                    .prepare_cached("SELECT seq FROM vectors WHERE id = ?1")
                    .and_then(|mut s| s.query_row(params![id.as_bytes().as_slice()], |r| r.get(0)).optional())
                    .map_err(sql)?;
                conn.prepare_cached("DELETE FROM vectors WHERE id = ?1").and_then(|mut s| s.execute(params![id.as_bytes().as_slice()])).map_err(sql)?;
                conn.prepare_cached("DELETE FROM items WHERE id = ?1").and_then(|mut s| s.execute(params![id.as_bytes().as_slice()])).map_err(sql)?;
                if let Some(seq) = seq {
                    let namespace = Namespace::new(&namespace).map_err(|e| CommitError::Storage(e.to_string()))?;
                    let seq = u64::try_from(seq).map_err(|_| CommitError::Storage("negative vector sequence".into()))?;
                    let scope = Scope { owner: PrincipalId::new("erased").map_err(|e| CommitError::Storage(e.to_string()))?, readers: Readers::Only(Default::default()), visibility: Visibility::Revoked };
                    p.access.push(AccessChange { seq, tenant: tenant.clone(), namespace, scope, status: Status::Revoked, erased: true });
                }
            }
            conn.prepare_cached("INSERT INTO lineage_events(tenant, event, log_index) VALUES(?1, ?2, ?3)")
                .and_then(|mut s| s.execute(params![tenant.as_str(), text, next as i64]))
                .map_err(sql)?;
            p.push(conn, now_ms, EntryKind::Erasure, &json!({"tenant": tenant, "event": event, "erased": ids}))?
        }
        Mutation::Feedback { tenant, actor, guards, reputations, record } => {
            let next = p.len;
            for (id, expected, guard) in guards {
                let rec: Option<String> = conn
                    .prepare_cached("SELECT record FROM items WHERE id = ?1 AND tenant = ?2")
                    .and_then(|mut s| s.query_row(params![id.as_bytes().as_slice(), tenant.as_str()], |r| r.get(0)).optional())
                    .map_err(sql)?;
                let Some(rec) = rec else { return Err(CommitError::ItemMissing(id.to_string())) };
                // The guard state is not part of the identity digest: the record still verifies.
                let mut v: serde_json::Value = serde_json::from_str(&rec).map_err(|e| CommitError::Storage(format!("stored item {id}: {e}")))?;
                if let Some(o) = v.as_object_mut() {
                    o.insert("guard".into(), serde_json::to_value(guard).map_err(|e| CommitError::Storage(e.to_string()))?);
                }
                let text = to_json(&v)?;
                // Refuse a state the validating decoder would not read back.
                serde_json::from_str::<MemoryItem>(&text).map_err(|e| CommitError::Storage(format!("guard update for {id}: {e}")))?;
                cas_record(conn, tenant, id, &text, *expected, next)?;
            }
            for (who, value) in reputations {
                if !value.is_finite() || !(0.0..=1.0).contains(value) {
                    return Err(CommitError::Storage(format!("reputation {value} of {who} is outside [0, 1]")));
                }
                conn.prepare_cached(
                    "INSERT INTO reputation(tenant, principal, value, log_index) VALUES(?1, ?2, ?3, ?4)
                     ON CONFLICT(tenant, principal) DO UPDATE SET value = excluded.value, log_index = excluded.log_index",
                )
                .and_then(|mut s| s.execute(params![tenant.as_str(), who.as_str(), value, next as i64]))
                .map_err(sql)?;
            }
            p.push(conn, now_ms, EntryKind::Feedback, &json!({"tenant": tenant, "actor": actor, "feedback": record}))?
        }
        Mutation::GateDecision { tenant, actor, decision } => {
            let text = to_json(decision)?;
            if text.len() > crate::LINEAGE_EVENT_BYTES_MAX {
                return Err(CommitError::LineageEventTooLarge(text.len()));
            }
            p.push(conn, now_ms, EntryKind::Decision, &json!({"tenant": tenant, "actor": actor, "gate": decision}))?
        }
        Mutation::Lineage { tenant, event } => {
            let text = to_json(event)?;
            if text.len() > crate::LINEAGE_EVENT_BYTES_MAX {
                return Err(CommitError::LineageEventTooLarge(text.len()));
            }
            let next = p.len;
            conn.prepare_cached("INSERT INTO lineage_events(tenant, event, log_index) VALUES(?1, ?2, ?3)")
                .and_then(|mut s| s.execute(params![tenant.as_str(), text, next as i64]))
                .map_err(sql)?;
            p.push(conn, now_ms, EntryKind::Lineage, &json!({"tenant": tenant, "event": event}))?
        }
        Mutation::Decision { actor, tenant, action, outcome } => {
            for u in outcome.grant_uses() {
                let g = &u.grant.grant;
                let next = p.len;
                let r = conn
                    .prepare_cached("INSERT INTO grants_used(tenant, nonce, record, log_index) VALUES(?1, ?2, ?3, ?4)")
                    .and_then(|mut s| s.execute(params![g.tenant.as_str(), g.nonce.as_slice(), to_json(u).unwrap_or_default(), next as i64]));
                match r {
                    Err(e) if is_constraint(&e) => return Err(CommitError::GrantAlreadyUsed(g.nonce_hex())),
                    Err(e) => return Err(sql(e)),
                    Ok(_) => {}
                }
                p.push(
                    conn,
                    now_ms,
                    EntryKind::GrantUsed,
                    &json!({"tenant": g.tenant, "nonce": g.nonce_hex(), "user": g.user, "tool": g.tool, "key": g.key, "value": g.value, "amount": g.amount}),
                )?;
            }
            for e in outcome.new_elevations() {
                let next = p.len;
                conn.prepare_cached("INSERT OR IGNORE INTO elevations(tenant, key, value, record, log_index) VALUES(?1, ?2, ?3, ?4, ?5)")
                    .and_then(|mut s| s.execute(params![e.tenant.as_str(), e.key, e.value.canonical, to_json(e).unwrap_or_default(), next as i64]))
                    .map_err(sql)?;
                p.push(conn, now_ms, EntryKind::Elevation, &json!(e))?;
            }
            p.push(conn, now_ms, EntryKind::Decision, &json!({"tenant": tenant, "actor": actor, "action": action, "verdict": outcome.verdict()}))?
        }
    };
    Ok(Receipt { log_index, leaf })
}

fn writer_loop(mut conn: Connection, rx: mpsc::Receiver<Job>, shared: &Shared) {
    // Checkpoints carry the latest time a caller passed in (the store reads no clock of its own).
    let mut last_now_ms = 0u64;
    while let Ok(first) = rx.recv() {
        let mut jobs = vec![first];
        let mut count = 0usize;
        while count < shared.config.group_commit_max {
            match rx.try_recv() {
                Ok(j) => {
                    if let Job::Commit { mutations, .. } = &j {
                        count += mutations.len();
                    }
                    jobs.push(j);
                }
                Err(_) => break,
            }
        }
        let mut commits = Vec::new();
        let mut checkpoints = Vec::new();
        for j in jobs {
            match j {
                Job::Commit { now_ms, mutations, atomic, reply } => {
                    last_now_ms = last_now_ms.max(now_ms);
                    commits.push(Group { now_ms, mutations, atomic, reply });
                }
                Job::Checkpoint { now_ms, reply } => {
                    last_now_ms = last_now_ms.max(now_ms);
                    checkpoints.push((now_ms, reply));
                }
            }
        }
        if !commits.is_empty() {
            commit_group(&mut conn, shared, commits);
            if shared.durability == Durability::Durable
                && let Err(e) = shared.vectors.save(false)
            {
                eprintln!("memwarden-store: periodic save of a vector index failed (replayed at the next open): {e}");
            }
        }
        let every = shared.config.checkpoint_every;
        let len = shared.log.read().map(|l| l.len()).unwrap_or(0);
        let due = every > 0 && len >= shared.last_checkpoint.load(Ordering::Relaxed) + every;
        if due || !checkpoints.is_empty() {
            let res = write_checkpoint(&conn, shared, last_now_ms).map_err(|e| e.to_string());
            for (_, reply) in checkpoints {
                let _ = reply.send(res.clone());
            }
        }
    }
    // Queue closed: save the vector indexes (a crash instead is recovered by replay at open).
    if shared.durability == Durability::Durable
        && let Err(e) = shared.vectors.save(true)
    {
        eprintln!("memwarden-store: saving the vector indexes failed (they are rebuilt at the next open): {e}");
    }
    // Sign a final checkpoint so a clean close leaves the whole log anchored.
    let len = shared.log.read().map(|l| l.len()).unwrap_or(0);
    if len > shared.last_checkpoint.load(Ordering::Relaxed) {
        let _ = write_checkpoint(&conn, shared, last_now_ms);
    }
}

fn write_checkpoint(conn: &Connection, shared: &Shared, now_ms: u64) -> Result<SignedCheckpoint, StoreError> {
    let cp = {
        let log = shared.log.read().map_err(|_| StoreError::WriterGone)?;
        log.checkpoint(&shared.key, now_ms)
    };
    let record = serde_json::to_string(&cp).map_err(|e| StoreError::Corrupt(e.to_string()))?;
    conn.execute(
        "INSERT INTO checkpoints(size, record) VALUES(?1, ?2) ON CONFLICT(size) DO UPDATE SET record = excluded.record",
        params![i64::try_from(cp.checkpoint.size).unwrap_or(i64::MAX), record],
    )?;
    shared.last_checkpoint.store(cp.checkpoint.size, Ordering::Relaxed);
    Ok(cp)
}

/// One caller's mutations within a group commit.
struct Group {
    now_ms: u64,
    mutations: Vec<Mutation>,
    atomic: bool,
    reply: Reply,
}

/// Where [`Pending`] stood before a savepoint, to roll it back with the savepoint.
struct Mark {
    len: u64,
    head: Hash,
    entries: usize,
    vectors: usize,
    access: usize,
    dims: Option<usize>,
}

impl Pending {
    fn mark(&self) -> Mark {
        Mark { len: self.len, head: self.head, entries: self.entries.len(), vectors: self.vectors.len(), access: self.access.len(), dims: self.dims }
    }

    fn rollback(&mut self, m: Mark) {
        self.len = m.len;
        self.head = m.head;
        self.entries.truncate(m.entries);
        self.vectors.truncate(m.vectors);
        self.access.truncate(m.access);
        self.dims = m.dims;
    }
}

/// Apply `mutations` inside one savepoint, all or nothing: the first error rolls back every
/// one of them (rows, log entries, vectors, catalog changes) and is returned.
fn apply_all(conn: &Connection, now_ms: u64, mutations: &[Mutation], p: &mut Pending) -> Result<Result<Vec<Receipt>, CommitError>, rusqlite::Error> {
    conn.execute_batch("SAVEPOINT op")?;
    let mark = p.mark();
    let mut receipts = Vec::with_capacity(mutations.len());
    for m in mutations {
        match apply(conn, now_ms, m, p) {
            Ok(r) => receipts.push(r),
            Err(e) => {
                conn.execute_batch("ROLLBACK TO op; RELEASE op")?;
                p.rollback(mark);
                return Ok(Err(e));
            }
        }
    }
    conn.execute_batch("RELEASE op")?;
    Ok(Ok(receipts))
}

fn commit_group(conn: &mut Connection, shared: &Shared, commits: Vec<Group>) {
    let (len, head) = match shared.log.read() {
        Ok(l) => (l.len(), l.head()),
        Err(_) => return,
    };
    let mut pending = Pending { len, head, entries: Vec::new(), vectors: Vec::new(), access: Vec::new(), dims: shared.vectors.dims() };
    // Per caller: its receipts in mutation order (for an atomic caller that failed, one error).
    let mut results: Vec<Vec<Result<Receipt, CommitError>>> = Vec::with_capacity(commits.len());
    let outcome = (|| -> Result<(), rusqlite::Error> {
        conn.execute_batch("BEGIN IMMEDIATE")?;
        for g in &commits {
            if g.mutations.len() > BATCH_MUTATIONS_MAX {
                results.push(vec![Err(CommitError::BatchTooLarge(g.mutations.len()))]);
                continue;
            }
            if g.atomic {
                results.push(match apply_all(conn, g.now_ms, &g.mutations, &mut pending)? {
                    Ok(rs) => rs.into_iter().map(Ok).collect(),
                    Err(e) => vec![Err(e)],
                });
                continue;
            }
            let mut rs = Vec::with_capacity(g.mutations.len());
            for m in &g.mutations {
                rs.push(match apply_all(conn, g.now_ms, std::slice::from_ref(m), &mut pending)? {
                    Ok(mut r) => r.pop().ok_or_else(|| CommitError::Storage("a mutation left no receipt".into())),
                    Err(e) => Err(e),
                });
            }
            results.push(rs);
        }
        set_head(conn, pending.len, &pending.head)?;
        conn.execute_batch("COMMIT")
    })();
    match outcome {
        Ok(()) => {
            if let Ok(mut log) = shared.log.write() {
                for e in &pending.entries {
                    // The writer is the only appender and linked these entries to the log's head.
                    let appended = log.append(e);
                    debug_assert!(appended.is_ok(), "writer chain out of step with the log");
                }
                debug_assert_eq!(log.len(), pending.len);
            }
            // Index before acknowledging, so the writer's next search finds what it wrote. A
            // failure here marks the partition degraded (exact search until the next open
            // rebuilds it); the rows are committed either way.
            if let Some(d) = pending.dims {
                shared.vectors.set_dims(d);
            }
            for v in pending.vectors {
                if let Err(e) = shared.vectors.insert(v) {
                    eprintln!("memwarden-store: vector index insert failed, searching exactly until reopen: {e}");
                }
            }
            for a in pending.access {
                shared.vectors.update_access(a);
            }
            // After an erasure, copy the zeroed pages into the database and empty the WAL, so
            // the erased text survives in no file (best effort: a busy checkpoint is retried by
            // SQLite's automatic checkpoints; the rows are gone from every read either way).
            // (A failed atomic caller's one error pairs with its first mutation: not counted.)
            let erased = commits.iter().zip(&results).any(|(g, rs)| g.mutations.iter().zip(rs).any(|(m, r)| matches!(m, Mutation::Erasure { .. }) && r.is_ok()));
            if erased && let Err(e) = conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)") {
                eprintln!("memwarden-store: checkpoint after erasure failed: {e}");
            }
            for (g, rs) in commits.into_iter().zip(results) {
                let _ = g.reply.send(Ok(rs));
            }
        }
        Err(e) => {
            let _ = conn.execute_batch("ROLLBACK");
            let msg = format!("commit failed: {e}");
            for g in commits {
                let _ = g.reply.send(Err(msg.clone()));
            }
        }
    }
}


fn cosine(a: &[f32], b: &[f32]) -> f32 {
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

impl Store for SqliteStore {
    fn commit(&self, now_ms: u64, mutations: Vec<Mutation>) -> Result<Vec<Result<Receipt, CommitError>>, StoreError> {
        if mutations.len() > BATCH_MUTATIONS_MAX {
            return Ok(vec![Err(CommitError::BatchTooLarge(mutations.len()))]);
        }
        let (reply, rx) = mpsc::channel();
        self.send(Job::Commit { now_ms, mutations, atomic: false, reply })?;
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
        self.send(Job::Commit { now_ms, mutations, atomic: true, reply })?;
        let rs = rx.recv().map_err(|_| StoreError::WriterGone)?.map_err(StoreError::Corrupt)?;
        let out: Result<Vec<Receipt>, CommitError> = rs.into_iter().collect();
        debug_assert!(out.as_ref().map_or(true, |r| r.len() == n), "an atomic commit answers every mutation");
        Ok(out)
    }

    fn principal(&self, tenant: &TenantId, id: &PrincipalId) -> Result<Option<Principal>, StoreError> {
        let conn = lock(&self.shared.reader);
        let rec: Option<String> = conn
            .prepare_cached("SELECT record FROM principals WHERE tenant = ?1 AND id = ?2")?
            .query_row(params![tenant.as_str(), id.as_str()], |r| r.get(0))
            .optional()?;
        rec.map(|r| serde_json::from_str(&r).map_err(|e| StoreError::Corrupt(format!("principal {id}: {e}")))).transpose()
    }

    fn principals(&self, tenant: &TenantId) -> Result<Vec<Principal>, StoreError> {
        let conn = lock(&self.shared.reader);
        let mut stmt = conn.prepare_cached("SELECT record FROM principals WHERE tenant = ?1 ORDER BY id")?;
        let rows = stmt.query_map(params![tenant.as_str()], |r| r.get::<_, String>(0))?;
        rows.map(|r| serde_json::from_str(&r?).map_err(|e| StoreError::Corrupt(format!("principal: {e}")))).collect()
    }

    fn item(&self, tenant: &TenantId, id: &ItemId) -> Result<Option<MemoryItem>, StoreError> {
        let conn = lock(&self.shared.reader);
        self.read_item(&conn, tenant, id)
    }

    fn list(&self, tenant: &TenantId, namespace: &Namespace, limit: usize) -> Result<Vec<MemoryItem>, StoreError> {
        let conn = lock(&self.shared.reader);
        let ids: Vec<Vec<u8>> = conn
            .prepare_cached("SELECT id FROM items WHERE tenant = ?1 AND namespace = ?2 ORDER BY created_ms, id LIMIT ?3")?
            .query_map(params![tenant.as_str(), namespace.as_str(), i64::try_from(limit).unwrap_or(i64::MAX)], |r| r.get(0))?
            .collect::<Result<_, _>>()?;
        let mut out = Vec::with_capacity(ids.len());
        for raw in ids {
            let id = ItemId::from_bytes(raw.try_into().map_err(|_| StoreError::Corrupt("item id length".into()))?);
            if let Some(i) = self.read_item(&conn, tenant, &id)? {
                out.push(i);
            }
        }
        Ok(out)
    }

    fn items_in_order(&self, tenant: &TenantId, after: Option<u64>, limit: usize) -> Result<Vec<OrderedItem>, StoreError> {
        let conn = lock(&self.shared.reader);
        let after = after.map_or(-1, |a| i64::try_from(a).unwrap_or(i64::MAX));
        let limit = i64::try_from(limit.min(crate::PAGE_ROWS_MAX)).unwrap_or(0);
        let rows: Vec<(Vec<u8>, i64, Option<String>)> = conn
            .prepare_cached(
                "SELECT id, log_index, NULL FROM items WHERE tenant = ?1 AND log_index > ?2
                 UNION ALL SELECT id, item_log_index, tombstone FROM erased WHERE tenant = ?1 AND item_log_index > ?2
                 ORDER BY 2 LIMIT ?3",
            )?
            .query_map(params![tenant.as_str(), after, limit], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
            .collect::<Result<_, _>>()?;
        let mut out = Vec::with_capacity(rows.len());
        for (raw, idx, tombstone) in rows {
            let id = ItemId::from_bytes(raw.try_into().map_err(|_| StoreError::Corrupt("item id length".into()))?);
            let log_index = u64::try_from(idx).map_err(|_| StoreError::Corrupt("negative log index".into()))?;
            match tombstone {
                Some(t) => {
                    let item: MemoryItem = serde_json::from_str(&t).map_err(|e| StoreError::Corrupt(format!("tombstone {id}: {e}")))?;
                    if item.id() != id || item.tenant() != tenant {
                        return Err(StoreError::ItemTampered { id: id.to_string(), reason: "tombstone names another id or tenant".into() });
                    }
                    out.push(OrderedItem { log_index, item, erased: true });
                }
                // Each record is verified against its digest and the log, as on every read.
                None => {
                    if let Some(item) = self.read_item(&conn, tenant, &id)? {
                        out.push(OrderedItem { log_index, item, erased: false });
                    }
                }
            }
        }
        Ok(out)
    }

    fn reputation(&self, tenant: &TenantId, principal: &PrincipalId) -> Result<Option<f64>, StoreError> {
        let conn = lock(&self.shared.reader);
        Ok(conn
            .prepare_cached("SELECT value FROM reputation WHERE tenant = ?1 AND principal = ?2")?
            .query_row(params![tenant.as_str(), principal.as_str()], |r| r.get(0))
            .optional()?)
    }

    fn lineage_events(&self, tenant: &TenantId, after: Option<u64>, limit: usize) -> Result<Vec<(u64, serde_json::Value)>, StoreError> {
        let conn = lock(&self.shared.reader);
        let limit = i64::try_from(limit.min(crate::PAGE_ROWS_MAX)).unwrap_or(0);
        let rows: Vec<(i64, String, i64)> = conn
            .prepare_cached("SELECT seq, event, log_index FROM lineage_events WHERE tenant = ?1 AND log_index > ?2 ORDER BY log_index LIMIT ?3")?
            .query_map(params![tenant.as_str(), after.map_or(-1, |a| i64::try_from(a).unwrap_or(i64::MAX)), limit], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
            .collect::<Result<_, _>>()?;
        let mut out = Vec::with_capacity(rows.len());
        for (seq, text, log_index) in rows {
            let tampered = |reason: &str| StoreError::Corrupt(format!("lineage event {seq}: {reason}"));
            let event: serde_json::Value = serde_json::from_str(&text).map_err(|e| tampered(&e.to_string()))?;
            // The row must be what the verified log committed to.
            let entry: Vec<u8> = conn
                .prepare_cached("SELECT entry FROM log WHERE idx = ?1")?
                .query_row(params![log_index], |r| r.get(0))
                .optional()?
                .ok_or_else(|| tampered("its log entry is missing"))?;
            let idx = usize::try_from(log_index).map_err(|_| tampered("negative log index"))?;
            let leaf_ok = self.shared.log.read().map(|l| l.leaves().get(idx) == Some(&leaf_hash(&entry))).unwrap_or(false);
            if !leaf_ok {
                return Err(tampered("its log entry differs from the verified log"));
            }
            let decoded = Entry::decode(&entry).map_err(|e| tampered(&e.to_string()))?;
            let body: serde_json::Value = serde_json::from_slice(&decoded.body).map_err(|e| tampered(&e.to_string()))?;
            if !matches!(decoded.kind, EntryKind::Lineage | EntryKind::Erasure) || body.get("event") != Some(&event) || body.get("tenant").and_then(|t| t.as_str()) != Some(tenant.as_str()) {
                return Err(tampered("the row differs from its log entry"));
            }
            out.push((idx as u64, event));
        }
        Ok(out)
    }

    fn count(&self, tenant: &TenantId) -> Result<u64, StoreError> {
        let conn = lock(&self.shared.reader);
        let n: i64 = conn.query_row("SELECT COUNT(*) FROM items WHERE tenant = ?1", params![tenant.as_str()], |r| r.get(0))?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    fn attestations(&self, tenant: &TenantId, keys: &[String]) -> Result<Vec<Attestation>, StoreError> {
        records_by_key(&lock(&self.shared.reader), "attestations", tenant, keys)
    }

    fn attestations_of(&self, tenant: &TenantId, key: &str, value: &NormValue) -> Result<Vec<Attestation>, StoreError> {
        let conn = lock(&self.shared.reader);
        let mut stmt = conn.prepare_cached(
            "SELECT record FROM attestations WHERE tenant = ?1 AND key = ?2 AND json_extract(record, '$.value.canonical') = ?3",
        )?;
        let mut out = Vec::new();
        for r in stmt.query_map(params![tenant.as_str(), key, value.canonical], |r| r.get::<_, String>(0))? {
            let a: Attestation = serde_json::from_str(&r?).map_err(|e| StoreError::Corrupt(format!("attestations: {e}")))?;
            if a.value == *value {
                out.push(a);
            }
        }
        Ok(out)
    }

    fn elevations(&self, tenant: &TenantId, keys: &[String]) -> Result<Vec<Elevation>, StoreError> {
        records_by_key(&lock(&self.shared.reader), "elevations", tenant, keys)
    }

    fn grant_used(&self, tenant: &TenantId, nonce: &[u8; 16]) -> Result<bool, StoreError> {
        let conn = lock(&self.shared.reader);
        let n: i64 = conn
            .prepare_cached("SELECT COUNT(*) FROM grants_used WHERE tenant = ?1 AND nonce = ?2")?
            .query_row(params![tenant.as_str(), nonce.as_slice()], |r| r.get(0))?;
        Ok(n > 0)
    }

    fn session(&self, tenant: &TenantId, principal: &PrincipalId, session: &SessionId) -> Result<Option<StoredSession>, StoreError> {
        let conn = lock(&self.shared.reader);
        let rec: Option<String> = conn
            .prepare_cached("SELECT record FROM sessions WHERE tenant = ?1 AND principal = ?2 AND session = ?3")?
            .query_row(params![tenant.as_str(), principal.as_str(), session.as_str()], |r| r.get(0))
            .optional()?;
        rec.map(|r| serde_json::from_str(&r).map_err(|e| StoreError::Corrupt(format!("session: {e}")))).transpose()
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
        let exact = || self.search_exact(tenant, namespace, query, k, &|i: &MemoryItem| i.readable_by(reader));
        let Some(found) = self.shared.vectors.search(tenant, namespace, query, k, reader)? else {
            return exact();
        };
        let conn = lock(&self.shared.reader);
        let mut out = Vec::with_capacity(found.hits.len());
        for (id, similarity) in found.hits {
            // The catalog said eligible; the item read back (verified against the log) must agree.
            match self.read_item(&conn, tenant, &id)? {
                Some(item) if item.namespace() == namespace && item.readable_by(reader) => out.push(Hit { item, similarity }),
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

    fn log_len(&self) -> u64 {
        self.shared.log.read().map(|l| l.len()).unwrap_or(0)
    }

    fn log_root(&self) -> (u64, Hash, Hash) {
        self.shared.log.read().map(|l| (l.len(), l.root(), l.head())).unwrap_or((0, [0; 32], [0; 32]))
    }

    fn log_entries(&self, from: u64, to: u64) -> Result<Vec<Vec<u8>>, StoreError> {
        let conn = lock(&self.shared.reader);
        let mut stmt = conn.prepare_cached("SELECT entry FROM log WHERE idx >= ?1 AND idx < ?2 ORDER BY idx")?;
        let rows = stmt.query_map(params![i64::try_from(from).unwrap_or(i64::MAX), i64::try_from(to).unwrap_or(i64::MAX)], |r| r.get(0))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    fn inclusion_proof(&self, index: u64, size: u64) -> Result<Vec<Hash>, StoreError> {
        let log = self.shared.log.read().map_err(|_| StoreError::WriterGone)?;
        log.inclusion_proof(index, size).map_err(|e| StoreError::Corrupt(e.to_string()))
    }

    fn consistency_proof(&self, old_size: u64, new_size: u64) -> Result<Vec<Hash>, StoreError> {
        let log = self.shared.log.read().map_err(|_| StoreError::WriterGone)?;
        log.consistency_proof(old_size, new_size).map_err(|e| StoreError::Corrupt(e.to_string()))
    }

    fn checkpoint(&self, now_ms: u64) -> Result<SignedCheckpoint, StoreError> {
        let (reply, rx) = mpsc::channel();
        self.send(Job::Checkpoint { now_ms, reply })?;
        rx.recv().map_err(|_| StoreError::WriterGone)?.map_err(StoreError::Corrupt)
    }

    fn checkpoints(&self) -> Result<Vec<SignedCheckpoint>, StoreError> {
        let conn = lock(&self.shared.reader);
        read_stored_log_checkpoints(&conn)
    }

    fn log_public_key(&self) -> [u8; 32] {
        self.shared.key.verifying_key().to_bytes()
    }

    fn verify_log(&self) -> Result<VerifyReport, StoreError> {
        let conn = lock(&self.shared.reader);
        let stored = read_stored_log(&conn)?;
        Ok(verify_log(&stored.entries, &stored.checkpoints, &self.shared.key.verifying_key(), stored.expected))
    }
}

/// JSON records of `table` (attestations or elevations) for a tenant's keys.
fn records_by_key<T: serde::de::DeserializeOwned>(conn: &Connection, table: &'static str, tenant: &TenantId, keys: &[String]) -> Result<Vec<T>, StoreError> {
    let mut out = Vec::new();
    let mut stmt = conn.prepare_cached(&format!("SELECT record FROM {table} WHERE tenant = ?1 AND key = ?2"))?;
    for k in keys {
        for r in stmt.query_map(params![tenant.as_str(), k], |r| r.get::<_, String>(0))? {
            out.push(serde_json::from_str(&r?).map_err(|e| StoreError::Corrupt(format!("{table}: {e}")))?);
        }
    }
    Ok(out)
}

fn read_stored_log_checkpoints(conn: &Connection) -> Result<Vec<SignedCheckpoint>, StoreError> {
    let mut stmt = conn.prepare("SELECT record FROM checkpoints ORDER BY size")?;
    let mut out = Vec::new();
    for rec in stmt.query_map([], |r| r.get::<_, String>(0))? {
        out.push(serde_json::from_str(&rec?).map_err(|e| StoreError::Corrupt(format!("checkpoint: {e}")))?);
    }
    Ok(out)
}
