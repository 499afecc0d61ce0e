//! [`PostgresStore`]: the [`Store`] trait on a PostgreSQL schema shared by any number of
//! processes. See the crate documentation for the design.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

use ed25519_dalek::SigningKey;
use memwarden_core::prelude::*;
use memwarden_log::{Entry, EntryKind, Hash, Problem, SignedCheckpoint, VerdictLog, VerifyReport, leaf_hash};
use memwarden_store::backend::{
    AccessChange, Arg, AttestationRow, BoundRow, Check, Cols, ElevationRow, ErasedRow, GlobalView, ItemRow, LineageRow, Logs, NewVector, OrderKind,
    Pending, PrincipalRow, ReputationRow, RowKey, SessionRow, StateIndex, StoredLogs, Table, Vectors, apply_caller, attestation_of, audit,
    bindings_of, cosine, create_key, decode_f32, embedding_digest, item_of, load, load_key, principal_of, row_key, set_heads, tenant_of, verify, HeadSigner, apply_tagged,
};
use memwarden_store::{BATCH_MUTATIONS_MAX, CommitError, Hit, ITEMS_BATCH_MAX, IdempotencyRecord, IdempotencyTag, Mutation, OrderedItem, PAGE_ROWS_MAX, Receipt, SEARCH_K_MAX, Store, StoreError, StoredSession};

use crate::conn::{Conn, PgDb, PgRow, quote_ident, store_db_err};
use memwarden_store::transfer::{Exported, Imported, Lines, Source, Target, TransferError, export_from, import_rows, read_head};

/// A read whose snapshot fell behind what this process already knows is retried this often.
const READ_ATTEMPTS: usize = 4;

/// Where a [`PostgresStore`] lives and how it is tuned.
#[derive(Debug, Clone)]
pub struct PgConfig {
    /// libpq-style connection string (`host=... user=... dbname=...`) or `postgres://` URL.
    pub url: String,
    /// The PostgreSQL schema holding this store (created if missing). One store per schema.
    pub schema: String,
    /// Directory of the checkpoint-signing key (created with a fresh key if empty). Every
    /// process serving the schema needs the same key: the schema records its public key and
    /// refuses another.
    pub key_dir: PathBuf,
    /// Sign a checkpoint of a tenant's log every this many entries (0: only on demand).
    pub checkpoint_every: u64,
    /// As [`memwarden_store::StoreConfig::vector_exact_below`].
    pub vector_exact_below: Option<usize>,
    /// Most connections reads use at once (opened as needed; at least 1). Commits use one
    /// more.
    pub read_connections: usize,
}

/// The schema a store spec without `schema=` uses.
pub const DEFAULT_SCHEMA: &str = "memwarden";

impl PgConfig {
    /// A config with the defaults (checkpoint every 1024 entries).
    pub fn new(url: impl Into<String>, schema: impl Into<String>, key_dir: impl Into<PathBuf>) -> Self {
        Self { url: url.into(), schema: schema.into(), key_dir: key_dir.into(), checkpoint_every: 1024, vector_exact_below: None, read_connections: 4 }
    }

    /// A config from a store spec as a command line or config file gives it: a
    /// `postgres://` / `postgresql://` URL whose query may carry `schema=NAME`
    /// (`postgres://u@h:5432/db?schema=prod`), or a libpq key-value string with a
    /// `schema=NAME` pair (`host=h dbname=db schema=prod`). The `schema` parameter is taken
    /// out before the rest goes to the driver; without it the schema is [`DEFAULT_SCHEMA`].
    pub fn from_spec(spec: &str, key_dir: impl Into<PathBuf>) -> Self {
        let mut schema = None;
        let url = if spec.starts_with("postgres://") || spec.starts_with("postgresql://") {
            match spec.split_once('?') {
                Some((base, query)) => {
                    let rest: Vec<&str> = query
                        .split('&')
                        .filter(|kv| match kv.strip_prefix("schema=") {
                            Some(v) => {
                                schema = Some(v.to_owned());
                                false
                            }
                            None => !kv.is_empty(),
                        })
                        .collect();
                    if rest.is_empty() { base.to_owned() } else { format!("{base}?{}", rest.join("&")) }
                }
                None => spec.to_owned(),
            }
        } else {
            let rest: Vec<&str> = spec
                .split_whitespace()
                .filter(|kv| match kv.strip_prefix("schema=") {
                    Some(v) => {
                        schema = Some(v.to_owned());
                        false
                    }
                    None => true,
                })
                .collect();
            rest.join(" ")
        };
        Self::new(url, schema.unwrap_or_else(|| DEFAULT_SCHEMA.to_owned()), key_dir)
    }
}

/// What this process knows the database commits to: every tenant's verified log, the state its
/// bindings commit each row to, and which items the vector index holds.
struct View {
    logs: Logs,
    state: StateIndex,
    /// Indexed items: (tenant, namespace, vector key).
    indexed: Mutex<HashMap<ItemId, (TenantId, Namespace, u64)>>,
    /// Per tenant, how many times a catch-up found entries this process had not appended
    /// ([`Store::foreign_version`]).
    foreign: HashMap<String, u64>,
    /// Per tenant, the log indexes of this process's commit between its `COMMIT` and the moment
    /// it joins the view: a catch-up that reads them back meanwhile has not met another
    /// process's write, so they do not move [`View::foreign`] (each move makes the engine
    /// rebuild its caches of the tenant). One commit at a time: the writer connection's lock
    /// is held from `BEGIN` until the commit has joined the view.
    in_flight: HashMap<String, std::ops::Range<u64>>,
    /// Per tenant, the recent moves of [`View::foreign`]: each version with the log indexes of
    /// the foreign entries that moved it (at most [`FOREIGN_HISTORY_MAX`] indexes kept; see
    /// [`Store::foreign_entries`]).
    foreign_log: HashMap<String, std::collections::VecDeque<(u64, Vec<u64>)>>,
}

/// How many foreign entry indexes a tenant's [`View::foreign_log`] keeps: a view cached above
/// the store that fell further behind is rebuilt.
const FOREIGN_HISTORY_MAX: usize = 65_536;

/// The PostgreSQL store. Share it (`Arc`) between threads: commits go through one connection,
/// reads through a small pool ([`PgConfig::read_connections`]).
pub struct PostgresStore {
    config: PgConfig,
    key: SigningKey,
    store_id: String,
    writer: Mutex<Conn>,
    readers: Vec<Mutex<Conn>>,
    next_reader: std::sync::atomic::AtomicUsize,
    view: RwLock<View>,
    /// Shared with the background graph builder (which holds it weakly).
    vectors: std::sync::Arc<Vectors>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A connection, reconnected first if the server dropped it.
fn ready(m: &Mutex<Conn>) -> Result<MutexGuard<'_, Conn>, StoreError> {
    let mut c = lock(m);
    c.ready()?;
    Ok(c)
}

fn read<T>(l: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn write<T>(l: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn i64_of(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

fn u64_of(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

fn tampered_log(tenant: &str, what: String) -> StoreError {
    StoreError::LogTampered(format!("log {tenant:?}: {what}"))
}

fn hash_of(v: &[u8]) -> Option<Hash> {
    v.try_into().ok()
}

/// Whether an error is what a read reports for a row that does not match the state it was
/// checked against (then a read whose snapshot lagged this process's state is retried).
fn is_mismatch(e: &StoreError) -> bool {
    matches!(e, StoreError::RowTampered { .. } | StoreError::ItemTampered { .. })
}

/// The tenant a genesis entry names.
fn genesis_tenant(entry: &Entry) -> Option<String> {
    if entry.kind != EntryKind::Genesis {
        return None;
    }
    let v: serde_json::Value = serde_json::from_slice(&entry.body).ok()?;
    v.get("tenant").and_then(|t| t.as_str()).map(str::to_owned)
}

fn item_id_of(raw: &[u8]) -> Result<ItemId, StoreError> {
    <[u8; 16]>::try_from(raw).map(ItemId::from_bytes).map_err(|_| StoreError::Corrupt("item id length".into()))
}

fn erased_scope() -> Result<Scope, StoreError> {
    Ok(Scope { owner: PrincipalId::new("erased").map_err(|e| StoreError::Corrupt(e.to_string()))?, readers: Readers::Only(Default::default()), visibility: Visibility::Revoked })
}

/// Every stored log (all tenants, or one), as the shared verifier reads it: entries by
/// `(tenant, idx)`; the global view is every tenant's leaves in tenant order (byte order), then
/// index order.
fn read_logs(conn: &mut Conn, only: Option<&str>) -> Result<StoredLogs, StoreError> {
    let mut out = StoredLogs::default();
    let rows = conn
        .query("SELECT tenant, idx, entry FROM log WHERE ?1::text IS NULL OR tenant = ?1 ORDER BY tenant COLLATE \"C\", idx", &[only.map_or(Arg::Null, Arg::Text)])
        .map_err(store_db_err)?;
    for r in &rows {
        let r = PgRow(r);
        let (tenant, entry) = (r.text(0).map_err(store_db_err)?, r.blob(2).map_err(store_db_err)?);
        out.global.push(leaf_hash(&entry));
        out.tenants.entry(tenant).or_default().entries.push(entry);
    }
    let rows = conn.query("SELECT tenant, record FROM checkpoints WHERE ?1::text IS NULL OR tenant = ?1 ORDER BY tenant, size", &[only.map_or(Arg::Null, Arg::Text)]).map_err(store_db_err)?;
    for r in &rows {
        let r = PgRow(r);
        let (t, rec) = (r.text(0).map_err(store_db_err)?, r.text(1).map_err(store_db_err)?);
        let cp: SignedCheckpoint = serde_json::from_str(&rec).map_err(|e| StoreError::Corrupt(format!("checkpoint: {e}")))?;
        if t.is_empty() {
            out.global_checkpoints.push(cp);
        } else {
            out.tenants.entry(t).or_default().checkpoints.push(cp);
        }
    }
    let rows = conn.query("SELECT tenant, size, head, sig FROM heads WHERE ?1::text IS NULL OR tenant = ?1", &[only.map_or(Arg::Null, Arg::Text)]).map_err(store_db_err)?;
    for r in &rows {
        let r = PgRow(r);
        let t = r.text(0).map_err(store_db_err)?;
        let head = hash_of(&r.blob(2).map_err(store_db_err)?).ok_or_else(|| StoreError::Corrupt(format!("recorded head of {t} is malformed")))?;
        let size = u64_of(r.int(1).map_err(store_db_err)?);
        let sig = r.opt_blob(3).map_err(store_db_err)?;
        let s = out.tenants.entry(t).or_default();
        s.expected = Some((size, head));
        s.head_sig = sig;
    }
    if only.is_some() {
        out.global.clear();
    }
    Ok(out)
}

/// Opening (or the graph build after it) reports its phases on stderr when it took this long.
const OPEN_REPORT_AFTER: std::time::Duration = std::time::Duration::from_secs(1);

/// Rows moved into a graph per step: a search waits at most one step for the index lock.
const GRAPH_BUILD_STEP_ROWS: usize = 32;

/// Build the vector graphs in the background, a bounded step at a time, until every partition
/// has its graphs or the store is dropped. Until then the waiting rows are searched exactly
/// (same answers, slower).
fn spawn_graph_builder(vectors: std::sync::Weak<Vectors>) {
    let spawned = std::thread::Builder::new().name("memwarden-pg-graphs".into()).spawn(move || {
        let t0 = std::time::Instant::now();
        let mut steps = 0u64;
        while let Some(v) = vectors.upgrade() {
            if v.build_graphs_step(GRAPH_BUILD_STEP_ROWS) == 0 {
                if t0.elapsed() >= OPEN_REPORT_AFTER {
                    eprintln!("memwarden-store-pg: vector graphs built in {:.1} s ({steps} steps)", t0.elapsed().as_secs_f64());
                }
                return;
            }
            steps += 1;
            drop(v);
            std::thread::yield_now();
        }
    });
    if let Err(e) = spawned {
        eprintln!("memwarden-store-pg: cannot start the graph builder (searching exactly): {e}");
    }
}

impl PostgresStore {
    /// Open (creating and migrating if needed) the store in `config.schema`: verify every
    /// tenant's log (chain, recorded head, signed checkpoints), replay its row bindings, and
    /// build the vector index from the verified rows.
    pub fn open(config: PgConfig) -> Result<Self, StoreError> {
        let schema_ok = !config.schema.is_empty() && config.schema.len() <= 63 && config.schema.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !schema_ok {
            return Err(StoreError::BadQuery(format!("schema name {:?} must be 1..=63 characters of [A-Za-z0-9_]", config.schema)));
        }
        let mut b = std::fs::DirBuilder::new();
        b.recursive(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::DirBuilderExt;
            b.mode(0o700);
        }
        b.create(&config.key_dir).map_err(|error| StoreError::Io { path: config.key_dir.display().to_string(), error })?;
        let key = match load_key(&config.key_dir)? {
            Some(k) => k,
            None => create_key(&config.key_dir)?,
        };
        let mut writer = Conn::connect(&config.url, &config.schema)?;
        let meta = crate::schema::prepare(&mut writer, &config.schema, &key)?;
        let reader = Conn::connect(&config.url, &config.schema)?;
        let readers: Vec<Mutex<Conn>> =
            std::iter::once(reader).chain((1..config.read_connections.max(1)).map(|_| Conn::lazy(&config.url, &config.schema))).map(Mutex::new).collect();
        writer.batch("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY").map_err(store_db_err)?;
        let loaded = Self::load_all(&mut writer, &key, &meta.store_id);
        let _ = writer.batch("COMMIT");
        let (view, vectors) = loaded?;
        // Loaded into exact blocks (fast): serve now, build the graphs in the background.
        let vectors = std::sync::Arc::new(vectors);
        vectors.set_graph_min_count(config.vector_exact_below.unwrap_or(memwarden_store::CLASS_GRAPH_MIN_COUNT));
        spawn_graph_builder(std::sync::Arc::downgrade(&vectors));
        Ok(Self { config, key, store_id: meta.store_id, writer: Mutex::new(writer), readers, next_reader: std::sync::atomic::AtomicUsize::new(0), view: RwLock::new(view), vectors })
    }

    fn load_all(conn: &mut Conn, key: &SigningKey, store_id: &str) -> Result<(View, Vectors), StoreError> {
        let t0 = std::time::Instant::now();
        let all = read_logs(conn, None)?;
        let t_read = t0.elapsed();
        let report = verify(&all, &key.verifying_key(), store_id, &HashMap::new(), None);
        if let Some(p) = &report.problem {
            return Err(StoreError::LogTampered(p.to_string()));
        }
        let t_verify = t0.elapsed();
        let (logs, state) = load(&all)?;
        let entries = report.entries;
        drop(all);
        let t_state = t0.elapsed();
        let rows = conn.query("SELECT value FROM meta WHERE key = 'vector_dims'", &[]).map_err(store_db_err)?;
        let dims = rows.first().map(|r| PgRow(r).text(0)).transpose().map_err(store_db_err)?.map(|d| d.parse::<usize>().map_err(|_| StoreError::Corrupt("vector_dims".into()))).transpose()?;
        // Every vector goes into an exact block first (appending is cheap); the graphs are built
        // after the store opens ([`spawn_graph_builder`]), so start-up does not grow with the
        // HNSW build (81 s at 100,000 memories before).
        let vectors = Vectors::in_memory(Some(usize::MAX), dims);
        let mut indexed = HashMap::new();
        let sql = format!("SELECT {}, embedding FROM items WHERE embedding IS NOT NULL ORDER BY tenant, log_index", ItemRow::COLUMNS);
        let n = ItemRow::COLUMNS.split(", ").count();
        for r in &conn.query(&sql, &[]).map_err(store_db_err)? {
            let r = PgRow(r);
            let row = ItemRow::from_cols(&r).map_err(store_db_err)?;
            let emb = r.blob(n).map_err(store_db_err)?;
            // Only rows the log commits to are searchable; the rest are refused on read and
            // named by verify_log.
            if let Some(v) = Self::vector_of(&state, &row, &emb) {
                indexed.insert(v.id, (v.tenant.clone(), v.namespace.clone(), v.seq));
                if let Err(e) = vectors.insert(v) {
                    eprintln!("memwarden-store-pg: vector index insert failed: {e}");
                }
            }
        }
        let t_index = t0.elapsed();
        // Said only when opening took long enough for an operator to wonder where the time went.
        if t_index >= OPEN_REPORT_AFTER {
            eprintln!(
            "memwarden-store-pg: opened {entries} log entries and {} vectors: read {:.2} s, verify {:.2} s, replay {:.2} s, vector index {:.2} s",
            indexed.len(),
            t_read.as_secs_f64(),
            (t_verify - t_read).as_secs_f64(),
            (t_state - t_verify).as_secs_f64(),
            (t_index - t_state).as_secs_f64()
            );
        }
        Ok((View { logs, state, indexed: Mutex::new(indexed), foreign: HashMap::new(), in_flight: HashMap::new(), foreign_log: HashMap::new() }, vectors))
    }

    /// The vector of a stored item row, if the row and its embedding are as the log committed.
    fn vector_of(state: &StateIndex, row: &ItemRow, emb: &[u8]) -> Option<NewVector> {
        if state.check(&row.key(), Some(&row.digest())) != Check::Ok || row.emb_digest.as_deref() != Some(embedding_digest(emb).as_slice()) {
            return None;
        }
        let seq = u64::try_from(row.vseq?).ok()?;
        let tenant = TenantId::new(&row.tenant).ok()?;
        let id = <[u8; 16]>::try_from(row.id.as_slice()).ok().map(ItemId::from_bytes)?;
        let item = item_of(row, &tenant, &id).ok()?;
        Some(NewVector { seq, id, tenant, namespace: item.namespace().clone(), embedding: decode_f32(emb), scope: item.scope().clone(), audience: item.audience().cloned(), status: item.status() })
    }

    /// The schema this store lives in.
    pub fn schema(&self) -> &str {
        &self.config.schema
    }

    /// The store's id (recorded in its schema; named by every tenant log's genesis entry).
    pub fn store_id(&self) -> &str {
        &self.store_id
    }

    /// Items of a namespace in `order` (a fixed ORDER BY clause of this module), at most `limit`.
    fn list_in_order(&self, tenant: &TenantId, namespace: &Namespace, limit: usize, order: &'static str) -> Result<Vec<MemoryItem>, StoreError> {
        let clause = format!("tenant = ?1 AND namespace = ?2 ORDER BY {order} LIMIT ?3");
        self.read_tenant(tenant.as_str(), |conn, view| {
            let rs: Vec<ItemRow> = rows(conn, view, &clause, &[Arg::Text(tenant.as_str()), Arg::Text(namespace.as_str()), Arg::Int(i64::try_from(limit).unwrap_or(i64::MAX))])?;
            rs.iter().map(|r| item_from_row(r, tenant)).collect()
        })
    }

    /// Number of vectors in this process's index (all tenants it has seen).
    pub fn indexed_count(&self) -> usize {
        self.vectors.len()
    }

    /// A read connection: a free one of the pool if there is one (opened on first use), else
    /// the next in turn once it is free; reconnected first if the server dropped it.
    fn reader(&self) -> Result<MutexGuard<'_, Conn>, StoreError> {
        let mut g = match self.readers.iter().find_map(|m| m.try_lock().ok()) {
            Some(g) => g,
            None => lock(&self.readers[self.next_reader.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % self.readers.len()]),
        };
        g.ready()?;
        Ok(g)
    }

    fn lock_name(&self, tenant: &str) -> String {
        format!("memwarden/log/{}/{tenant}", self.config.schema)
    }

    /// Bring this process's view of `tenant` up to the log the database holds (as `conn` sees
    /// it: its latest committed state, under the tenant's advisory lock inside a commit, or a
    /// read snapshot). New entries must continue the chain this process verified; their
    /// bindings are replayed and the vector index learns the items they touched. Returns the
    /// database's log size. `strict` (outside a snapshot): a log shorter than what this process
    /// verified is a cut log; inside a snapshot the view may have moved past it.
    fn catch_up(&self, conn: &mut Conn, tenant: &str, strict: bool) -> Result<u64, StoreError> {
        // What this process verified, read *before* the database's head: everything in it was
        // committed before this point (own commits join the view after their COMMIT), so a
        // smaller recorded size is a cut, never a race with a commit or another catch-up.
        let (known, known_head) = read(&self.view).logs.of(tenant).map_or((0, [0; 32]), |l| (l.len(), l.head()));
        let rows = conn.query("SELECT size, head, sig FROM heads WHERE tenant = ?1", &[Arg::Text(tenant)]).map_err(store_db_err)?;
        let (size, head) = match rows.first() {
            None => (0, [0u8; 32]),
            Some(r) => {
                let r = PgRow(r);
                let head = hash_of(&r.blob(1).map_err(store_db_err)?).ok_or_else(|| tampered_log(tenant, "recorded head is malformed".into()))?;
                let size = u64_of(r.int(0).map_err(store_db_err)?);
                let sig = r.opt_blob(2).map_err(store_db_err)?;
                // Entries another server appended count only under a head the store's key signed.
                if size > known && memwarden_log::verify_head(&self.key.verifying_key(), &self.store_id, tenant, size, &head, sig.as_deref()).is_err() {
                    return Err(tampered_log(tenant, format!("the recorded head at {size} entries is not signed by the store's key (an entry appended, or the head edited, without the key)")));
                }
                (size, head)
            }
        };
        if size < known {
            if strict {
                return Err(tampered_log(tenant, format!("the database holds {size} entries, {known} were verified")));
            }
            return Ok(size);
        }
        if size == known {
            if size > 0 && head != known_head {
                return Err(tampered_log(tenant, format!("the recorded head at {size} entries differs from the verified one (forked or rewritten)")));
            }
            return Ok(size);
        }
        let rows = conn
            .query("SELECT idx, entry FROM log WHERE tenant = ?1 AND idx >= ?2 AND idx < ?3 ORDER BY idx", &[Arg::Text(tenant), Arg::Int(i64_of(known)), Arg::Int(i64_of(size))])
            .map_err(store_db_err)?;
        let touched = {
            let mut view = write(&self.view);
            let view = &mut *view;
            let have = view.logs.of(tenant).map_or(0, VerdictLog::len);
            let mut touched: BTreeSet<String> = BTreeSet::new();
            let mut foreign: Vec<u64> = Vec::new();
            for r in &rows {
                let r = PgRow(r);
                let idx = u64_of(r.int(0).map_err(store_db_err)?);
                if idx < have {
                    continue; // another thread absorbed it meanwhile
                }
                if !view.in_flight.get(tenant).is_some_and(|own| own.contains(&idx)) {
                    foreign.push(idx);
                }
                let bytes = r.blob(1).map_err(store_db_err)?;
                let entry = Entry::decode(&bytes).map_err(|e| tampered_log(tenant, format!("entry {idx}: {e}")))?;
                if idx == 0 && genesis_tenant(&entry).as_deref() != Some(tenant) {
                    return Err(tampered_log(tenant, "its genesis entry names another log".into()));
                }
                let bindings = bindings_of(&entry.body).map_err(|e| tampered_log(tenant, format!("entry {idx}: {e}")))?;
                if bindings.iter().any(|b| b.tenant != tenant) {
                    return Err(tampered_log(tenant, format!("entry {idx} binds a row of another tenant")));
                }
                let log = &mut view.logs.tenants.entry(tenant.to_owned()).or_default().log;
                let leaf = log.append(&entry).map_err(|e| tampered_log(tenant, format!("entry {idx} does not continue the verified chain: {e}")))?;
                if leaf != leaf_hash(&bytes) {
                    return Err(tampered_log(tenant, format!("entry {idx} is not in canonical form")));
                }
                for b in &bindings {
                    if matches!(b.table, Table::Items | Table::Erased)
                        && let Some(p) = b.parts.first()
                    {
                        touched.insert(p.clone());
                    }
                    view.state.apply(b, idx);
                }
            }
            let now = view.logs.of(tenant).map_or((0, [0; 32]), |l| (l.len(), l.head()));
            if !foreign.is_empty() {
                // Entries another process appended (this process's own commit, read back
                // before it joined the view, is not foreign: see `View::in_flight`).
                let version = view.foreign.entry(tenant.to_owned()).or_default();
                *version += 1;
                let version = *version;
                let history = view.foreign_log.entry(tenant.to_owned()).or_default();
                history.push_back((version, foreign));
                let mut kept: usize = history.iter().map(|(_, ix)| ix.len()).sum();
                while kept > FOREIGN_HISTORY_MAX && history.len() > 1 {
                    kept -= history.pop_front().map_or(0, |(_, ix)| ix.len());
                }
            }
            if now.0 < size {
                return Err(tampered_log(tenant, format!("the recorded head says {size} entries, {} are stored", now.0)));
            }
            if now.0 == size && now.1 != head {
                return Err(tampered_log(tenant, "the recorded head does not match the stored entries".into()));
            }
            touched
        };
        if !touched.is_empty() {
            self.refresh_vectors(conn, tenant, &touched)?;
        }
        Ok(size)
    }

    /// Bring the vector index in step with the rows of these items (hex ids), as far as they
    /// match the state this process verified. A row that does not match (a later change this
    /// process has not replayed yet, or a tampered row) is left alone: a later entry touches
    /// it again, and reads refuse a tampered row anyway.
    fn refresh_vectors(&self, conn: &mut Conn, tenant: &str, ids: &BTreeSet<String>) -> Result<(), StoreError> {
        let sql = format!("SELECT {}, embedding FROM items WHERE id = ?1 AND tenant = ?2", ItemRow::COLUMNS);
        let n = ItemRow::COLUMNS.split(", ").count();
        for hex_id in ids {
            let Ok(raw) = hex::decode(hex_id) else { continue };
            let Ok(id) = item_id_of(&raw) else { continue };
            let rows = conn.query(&sql, &[Arg::Blob(&raw), Arg::Text(tenant)]).map_err(store_db_err)?;
            let row = match rows.first() {
                Some(r) => {
                    let r = PgRow(r);
                    Some((ItemRow::from_cols(&r).map_err(store_db_err)?, r.opt_blob(n).map_err(store_db_err)?))
                }
                None => None,
            };
            let view = read(&self.view);
            let mut indexed = lock(&view.indexed);
            match row {
                Some((row, Some(emb))) => {
                    let Some(v) = Self::vector_of(&view.state, &row, &emb) else { continue };
                    if let Some((t, ns, seq)) = indexed.get(&id) {
                        self.vectors.update_access(AccessChange { seq: *seq, tenant: t.clone(), namespace: ns.clone(), scope: v.scope, audience: v.audience, status: v.status, erased: false });
                    } else {
                        if self.vectors.dims().is_none() {
                            self.vectors.set_dims(v.embedding.len());
                        }
                        indexed.insert(id, (v.tenant.clone(), v.namespace.clone(), v.seq));
                        if let Err(e) = self.vectors.insert(v) {
                            eprintln!("memwarden-store-pg: vector index insert failed: {e}");
                        }
                    }
                }
                Some((_, None)) => {}
                None => {
                    let gone = view.state.check(&row_key(Table::Items, tenant, &[hex_id]), None) == Check::Ok;
                    if gone && let Some((t, ns, seq)) = indexed.remove(&id) {
                        self.vectors.update_access(AccessChange { seq, tenant: t, namespace: ns, scope: erased_scope()?, audience: None, status: Status::Revoked, erased: true });
                    }
                }
            }
        }
        Ok(())
    }

    /// After this process's own commit: append its entries, bindings and vectors to the view
    /// (unless a read already replayed them from the database).
    fn absorb_own(&self, pending: Pending) -> Vec<String> {
        let mut view = write(&self.view);
        let view = &mut *view;
        view.in_flight.clear();
        let mut applied: HashSet<String> = HashSet::new();
        for tenant in pending.chains.keys() {
            let first = pending.entries.iter().find(|(t, _, _)| t == tenant).map(|(_, e, _)| e.index);
            let have = view.logs.of(tenant).map_or(0, VerdictLog::len);
            if first == Some(have) {
                let log = &mut view.logs.tenants.entry(tenant.clone()).or_default().log;
                for (_, e, _) in pending.entries.iter().filter(|(t, _, _)| t == tenant) {
                    let appended = log.append(e);
                    debug_assert!(appended.is_ok(), "own entries out of step with the log of {tenant}");
                }
                applied.insert(tenant.clone());
            }
        }
        for (_, b, entry) in &pending.bindings {
            if applied.contains(&b.tenant) {
                view.state.apply(b, *entry);
            }
        }
        if let Some(d) = pending.dims {
            self.vectors.set_dims(d);
        }
        let indexed = view.indexed.get_mut().unwrap_or_else(std::sync::PoisonError::into_inner);
        for v in pending.vectors {
            if applied.contains(v.tenant.as_str()) {
                indexed.insert(v.id, (v.tenant.clone(), v.namespace.clone(), v.seq));
                if let Err(e) = self.vectors.insert(v) {
                    eprintln!("memwarden-store-pg: vector index insert failed, searching exactly: {e}");
                }
            }
        }
        for a in pending.access {
            if applied.contains(a.tenant.as_str()) {
                if a.erased {
                    indexed.retain(|_, (t, _, s)| !(*t == a.tenant && *s == a.seq));
                }
                self.vectors.update_access(a);
            }
        }
        applied.into_iter().collect()
    }

    fn commit_inner(&self, now_ms: u64, mutations: &[Mutation], atomic: bool, tag: Option<&IdempotencyTag>) -> Result<Vec<Result<Receipt, CommitError>>, StoreError> {
        let tenants: BTreeSet<String> = mutations.iter().map(|m| tenant_of(m).as_str().to_owned()).collect();
        let mut conn = ready(&self.writer)?;
        conn.begin("BEGIN")?;
        let out = self.commit_in(&mut conn, now_ms, mutations, atomic, tag, &tenants);
        let (results, pending) = match out {
            Ok(v) => v,
            Err(e) => {
                let _ = conn.batch("ROLLBACK");
                return Err(e);
            }
        };
        // Mark this commit's entries as this process's before they become visible.
        {
            let mut ranges: HashMap<String, std::ops::Range<u64>> = HashMap::new();
            for (t, e, _) in &pending.entries {
                let r = ranges.entry(t.clone()).or_insert(e.index..e.index);
                r.start = r.start.min(e.index);
                r.end = r.end.max(e.index + 1);
            }
            write(&self.view).in_flight = ranges;
        }
        if let Err(e) = conn.batch("COMMIT") {
            let _ = conn.batch("ROLLBACK");
            // Committed or not, a later catch-up that finds these entries counts them foreign
            // (the safe side: the engine rebuilds its caches).
            write(&self.view).in_flight.clear();
            return Err(StoreError::Database(format!("commit failed: {e}")));
        }
        let applied = self.absorb_own(pending);
        let every = self.config.checkpoint_every;
        if every > 0 {
            for t in applied {
                let due = read(&self.view).logs.tenants.get(&t).is_some_and(|l| l.log.len() >= l.last_checkpoint + every);
                if due && let Err(e) = self.write_checkpoint(&mut conn, &t, now_ms) {
                    eprintln!("memwarden-store-pg: a periodic checkpoint of {t} failed: {e}");
                }
            }
        }
        Ok(results)
    }

    /// Inside the commit's transaction: serialise on each tenant's log (advisory lock held to
    /// the end of the transaction), catch up with what other processes appended, then run the
    /// shared write path.
    fn commit_in(
        &self,
        conn: &mut Conn,
        now_ms: u64,
        mutations: &[Mutation],
        atomic: bool,
        tag: Option<&IdempotencyTag>,
        tenants: &BTreeSet<String>,
    ) -> Result<(Vec<Result<Receipt, CommitError>>, Pending), StoreError> {
        for t in tenants {
            let name = self.lock_name(t);
            conn.query("SELECT pg_advisory_xact_lock(hashtextextended(?1, 0))", &[Arg::Text(&name)]).map_err(store_db_err)?;
        }
        for t in tenants {
            self.catch_up(conn, t, true)?;
        }
        if self.vectors.dims().is_none() {
            let rows = conn.query("SELECT value FROM meta WHERE key = 'vector_dims'", &[]).map_err(store_db_err)?;
            if let Some(d) = rows.first().map(|r| PgRow(r).text(0)).transpose().map_err(store_db_err)?.and_then(|d| d.parse::<usize>().ok()) {
                self.vectors.set_dims(d);
            }
        }
        let view = read(&self.view);
        let mut pending = Pending::new(0, self.vectors.dims(), &self.store_id, &self.key.verifying_key().to_bytes(), memwarden_store::backend::idempotency::mac_key(&self.key));
        let db = PgDb::new(conn);
        let results = match tag {
            Some(tag) => {
                debug_assert!(atomic, "an idempotency key rides an atomic commit");
                let mac_key = memwarden_store::backend::idempotency::mac_key(&self.key);
                apply_tagged(&db, &view.logs, &view.state, now_ms, mutations, tag, &mac_key, &mut pending)
            }
            None => apply_caller(&db, &view.logs, &view.state, now_ms, mutations, atomic, &mut pending),
        }
        .map_err(store_db_err)?;
        set_heads(&db, &pending.chains, HeadSigner { key: &self.key, store_id: &self.store_id }).map_err(store_db_err)?;
        Ok((results, pending))
    }

    fn write_checkpoint(&self, conn: &mut Conn, tenant: &str, now_ms: u64) -> Result<SignedCheckpoint, StoreError> {
        let cp = read(&self.view).logs.of(tenant).ok_or_else(|| StoreError::UnknownLog(tenant.to_owned()))?.checkpoint(&self.key, now_ms);
        let record = serde_json::to_string(&cp).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        conn.execute(
            "INSERT INTO checkpoints(tenant, size, record) VALUES(?1, ?2, ?3) ON CONFLICT (tenant, size) DO UPDATE SET record = excluded.record",
            &[Arg::Text(tenant), Arg::Int(i64_of(cp.checkpoint.size)), Arg::Text(&record)],
        )
        .map_err(store_db_err)?;
        if let Some(t) = write(&self.view).logs.tenants.get_mut(tenant) {
            t.last_checkpoint = t.last_checkpoint.max(cp.checkpoint.size);
        }
        Ok(cp)
    }

    /// Run `f` against this process's verified view of `tenant`.
    ///
    /// Fast path: `f` reads the latest committed rows with no snapshot and no catch-up first
    /// (one round trip per query it sends). Every row it reads is checked against the view's
    /// state, which `f` holds still, so the rows it accepts are consistent with one another and
    /// with one log prefix. A row another process has written, changed or deleted since this
    /// process last caught up does not match that state, and neither does a row an attacker
    /// changed.
    ///
    /// On a mismatch (or a connection the server dropped) the read is run again the careful
    /// way: in a repeatable-read snapshot in which the view has first caught up with the log
    /// as of the same snapshot. A row that still differs there, with the view exactly at the
    /// snapshot's log, differs from the log: that error is returned. If the view had moved past
    /// the snapshot (this process's own commits), the snapshot read is retried, at most
    /// [`READ_ATTEMPTS`] times. So a read never answers from a stale row or misses a committed
    /// one — a write through any process is visible to the next read here — and a concurrent
    /// commit never raises a false alarm.
    fn read_tenant<T>(&self, tenant: &str, f: impl Fn(&mut Conn, &View) -> Result<T, StoreError>) -> Result<T, StoreError> {
        let mut conn = self.reader()?;
        let fast = {
            let view = read(&self.view);
            f(&mut conn, &view)
        };
        match fast {
            Ok(v) => return Ok(v),
            Err(e) if is_mismatch(&e) || conn.take_dropped() => {}
            Err(e) => return Err(e),
        }
        let mut last = None;
        for _ in 0..READ_ATTEMPTS {
            conn.begin("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")?;
            let attempt = (|| -> Result<(Result<T, StoreError>, bool), StoreError> {
                let size = self.catch_up(&mut conn, tenant, false)?;
                let view = read(&self.view);
                let out = f(&mut conn, &view);
                let in_step = view.logs.of(tenant).map_or(0, VerdictLog::len) == size;
                Ok((out, in_step))
            })();
            let _ = conn.batch("COMMIT");
            match attempt {
                Err(e) => return Err(e),
                Ok((Ok(v), _)) => return Ok(v),
                Ok((Err(e), in_step)) if in_step || !is_mismatch(&e) => return Err(e),
                Ok((Err(e), _)) => last = Some(e),
            }
        }
        Err(last.unwrap_or(StoreError::Corrupt("no consistent read".into())))
    }

    /// Catch up on every tenant the database has a log for (outside a snapshot); returns them.
    fn refresh_all(&self) -> Result<Vec<String>, StoreError> {
        let mut conn = self.reader()?;
        let rows = conn.query("SELECT tenant FROM heads ORDER BY tenant COLLATE \"C\"", &[]).map_err(store_db_err)?;
        let tenants: Vec<String> = rows.iter().map(|r| PgRow(r).text(0)).collect::<Result<_, _>>().map_err(store_db_err)?;
        for t in &tenants {
            self.catch_up(&mut conn, t, true)?;
        }
        Ok(tenants)
    }

    fn refresh(&self, tenant: &str) {
        let caught_up = self.reader().and_then(|mut conn| self.catch_up(&mut conn, tenant, true));
        if let Err(e) = caught_up {
            eprintln!("memwarden-store-pg: catching up on the log of {tenant} failed: {e}");
        }
    }

    /// The global view: every tenant's leaves, tenants in byte order (no global sequence: a
    /// tenant that sorts before another and grows changes the view's earlier positions, so its
    /// checkpoints are not stored; use the per-tenant API).
    fn global_view(&self) -> GlobalView {
        if let Err(e) = self.refresh_all() {
            eprintln!("memwarden-store-pg: catching up on the logs failed: {e}");
        }
        let view = read(&self.view);
        let mut names: Vec<&String> = view.logs.tenants.keys().collect();
        names.sort();
        let mut g = GlobalView::default();
        for t in names {
            if let Some(l) = view.logs.of(t) {
                for leaf in l.leaves() {
                    g.push(*leaf);
                }
            }
        }
        g
    }

    fn verify_live(&self, only: Option<&str>) -> Result<VerifyReport, StoreError> {
        // What this process verified before the snapshot must all be in it.
        let before: HashMap<String, Vec<Hash>> = read(&self.view).logs.tenants.iter().filter(|(t, _)| only.is_none_or(|o| o == t.as_str())).map(|(t, l)| (t.clone(), l.log.leaves().to_vec())).collect();
        let mut conn = self.reader()?;
        conn.begin("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")?;
        let out = (|| -> Result<VerifyReport, StoreError> {
            let all = read_logs(&mut conn, only)?;
            let mut report = verify(&all, &self.key.verifying_key(), &self.store_id, &HashMap::new(), only);
            if report.problem.is_none() {
                for (t, mine) in &before {
                    let stored = all.tenants.get(t).map_or(&[][..], |s| s.entries.as_slice());
                    let n = stored.len().min(mine.len());
                    if let Some(i) = (0..n).find(|&i| leaf_hash(&stored[i]) != mine[i]) {
                        report.problem = Some(Problem::InLog { log: t.clone(), problem: Box::new(Problem::BrokenLink { index: i as u64 }) });
                        break;
                    }
                    if stored.len() < mine.len() {
                        report.problem = Some(Problem::InLog { log: t.clone(), problem: Box::new(Problem::Truncated { expected: mine.len() as u64, found: stored.len() as u64 }) });
                        break;
                    }
                }
            }
            if report.problem.is_none() {
                report.problem = audit(&PgDb::new(&mut conn), &all, only)?;
            }
            Ok(report)
        })();
        let _ = conn.batch("COMMIT");
        out
    }

    /// Exact (brute-force cosine) search over a namespace on the snapshot `conn` reads: the `k`
    /// most similar items that pass `eligible`, applied before the cut. The fallback when the
    /// index is out of step, and the oracle for tests.
    fn search_exact_in(conn: &mut Conn, view: &View, tenant: &TenantId, namespace: &Namespace, query: &[f32], k: usize, eligible: &dyn Fn(&MemoryItem) -> bool) -> Result<Vec<Hit>, StoreError> {
        let k = k.min(SEARCH_K_MAX);
        let rows = conn
            .query("SELECT id, embedding, emb_digest FROM items WHERE tenant = ?1 AND namespace = ?2 AND embedding IS NOT NULL", &[Arg::Text(tenant.as_str()), Arg::Text(namespace.as_str())])
            .map_err(store_db_err)?;
        let mut scored: Vec<(f32, Vec<u8>)> = Vec::with_capacity(rows.len());
        for r in &rows {
            let r = PgRow(r);
            let (id, emb, digest) = (r.blob(0).map_err(store_db_err)?, r.blob(1).map_err(store_db_err)?, r.opt_blob(2).map_err(store_db_err)?);
            if digest.as_deref() != Some(embedding_digest(&emb).as_slice()) {
                return Err(StoreError::ItemTampered { id: hex::encode(&id), reason: "its embedding differs from the digest its log entry committed".into() });
            }
            scored.push((cosine(query, &decode_f32(&emb)), id));
        }
        scored.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
        let mut out = Vec::with_capacity(k);
        for (sim, raw) in scored {
            if out.len() >= k {
                break;
            }
            let id = item_id_of(&raw)?;
            if let Some(item) = read_item(conn, view, tenant, &id)?
                && eligible(&item)
            {
                out.push(Hit { item, similarity: sim, lexical: None });
            }
        }
        Ok(out)
    }

    /// [`Store::search`]'s exact oracle: the `k` most similar items of the namespace that pass
    /// `eligible`, scanning every stored embedding (each row checked against the log).
    pub fn search_exact(&self, tenant: &TenantId, namespace: &Namespace, query: &[f32], k: usize, eligible: &dyn Fn(&MemoryItem) -> bool) -> Result<Vec<Hit>, StoreError> {
        self.read_tenant(tenant.as_str(), |conn, view| Self::search_exact_in(conn, view, tenant, namespace, query, k, eligible))
    }

}

/// Check a row (or its absence) against the state the log commits to.
fn checked<R: BoundRow>(view: &View, key: &RowKey, row: Option<R>, describe: impl FnOnce() -> String) -> Result<Option<R>, StoreError> {
    match view.state.check(key, row.as_ref().map(BoundRow::digest).as_ref()) {
        Check::Ok => Ok(row),
        bad => Err(StoreError::RowTampered { table: R::TABLE.name(), key: describe(), reason: bad.reason() }),
    }
}

/// Every row of `R`'s table matching `sql_where`, each checked against the log.
fn rows<R: BoundRow>(conn: &mut Conn, view: &View, sql_where: &str, args: &[Arg<'_>]) -> Result<Vec<R>, StoreError> {
    let sql = format!("SELECT {} FROM {} WHERE {sql_where}", R::COLUMNS, R::TABLE.name());
    let out: Vec<R> = conn.query(&sql, args).map_err(store_db_err)?.iter().map(|r| R::from_cols(&PgRow(r))).collect::<Result<_, _>>().map_err(store_db_err)?;
    for r in &out {
        let c = view.state.check(&r.key(), Some(&r.digest()));
        if c != Check::Ok {
            return Err(StoreError::RowTampered { table: R::TABLE.name(), key: r.parts().join("/"), reason: c.reason() });
        }
    }
    Ok(out)
}

/// One optional row of `R`'s table.
fn row<R: BoundRow>(conn: &mut Conn, sql_where: &str, args: &[Arg<'_>]) -> Result<Option<R>, StoreError> {
    let sql = format!("SELECT {} FROM {} WHERE {sql_where}", R::COLUMNS, R::TABLE.name());
    conn.query(&sql, args).map_err(store_db_err)?.first().map(|r| R::from_cols(&PgRow(r))).transpose().map_err(store_db_err)
}

fn read_item(conn: &mut Conn, view: &View, tenant: &TenantId, id: &ItemId) -> Result<Option<MemoryItem>, StoreError> {
    let row: Option<ItemRow> = row(conn, "id = ?1 AND tenant = ?2", &[Arg::Blob(id.as_bytes().as_slice()), Arg::Text(tenant.as_str())])?;
    checked_item(view, tenant, id, row)
}

/// An item row as read (or its absence), checked against the state the verified log commits
/// the row to.
fn checked_item(view: &View, tenant: &TenantId, id: &ItemId, row: Option<ItemRow>) -> Result<Option<MemoryItem>, StoreError> {
    let tampered = |reason: String| StoreError::ItemTampered { id: id.to_string(), reason };
    let key = row_key(Table::Items, tenant.as_str(), &[&id.to_string()]);
    let check = view.state.check(&key, row.as_ref().map(BoundRow::digest).as_ref());
    if check != Check::Ok {
        return Err(tampered(format!("record {}", check.reason())));
    }
    let Some(row) = row else { return Ok(None) };
    item_of(&row, tenant, id).map(Some).map_err(tampered)
}

/// Items by id in one query (ids passed as one comma-separated hex list), each checked as
/// [`read_item`] checks it; one answer per id, in order.
fn read_items(conn: &mut Conn, view: &View, tenant: &TenantId, ids: &[ItemId]) -> Result<Vec<Option<MemoryItem>>, StoreError> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let list = ids.iter().map(|id| hex::encode(id.as_bytes())).collect::<Vec<_>>().join(",");
    let sql = format!(
        "SELECT {} FROM items WHERE tenant = ?1 AND id = ANY(ARRAY(SELECT decode(x, 'hex') FROM unnest(string_to_array(?2, ',')) AS x))",
        ItemRow::COLUMNS
    );
    let mut found: HashMap<Vec<u8>, ItemRow> = HashMap::with_capacity(ids.len());
    for r in &conn.query(&sql, &[Arg::Text(tenant.as_str()), Arg::Text(&list)]).map_err(store_db_err)? {
        let row = ItemRow::from_cols(&PgRow(r)).map_err(store_db_err)?;
        found.insert(row.id.clone(), row);
    }
    ids.iter().map(|id| checked_item(view, tenant, id, found.get(id.as_bytes().as_slice()).cloned())).collect()
}

fn item_from_row(row: &ItemRow, tenant: &TenantId) -> Result<MemoryItem, StoreError> {
    let id = item_id_of(&row.id)?;
    item_of(row, tenant, &id).map_err(|reason| StoreError::ItemTampered { id: id.to_string(), reason })
}

fn limit_of(limit: usize) -> i64 {
    i64::try_from(limit.min(PAGE_ROWS_MAX)).unwrap_or(0)
}

fn after_of(after: Option<u64>) -> i64 {
    after.map_or(-1, i64_of)
}

fn check_k(k: usize) -> Result<(), StoreError> {
    if k == 0 || k > SEARCH_K_MAX {
        return Err(StoreError::BadQuery(format!("k must be 1..={SEARCH_K_MAX}")));
    }
    Ok(())
}

/// The words of [`memwarden_store::lexical::query_terms`] as PostgreSQL `tsquery` terms (each
/// quoted; the words are letters and digits only, so nothing else can reach the query).
fn ts_terms(text: &str) -> Vec<String> {
    memwarden_store::lexical::query_terms(text).into_iter().filter(|t| !t.is_empty() && t.chars().all(char::is_alphanumeric)).map(|t| format!("'{t}'")).collect()
}

impl Store for PostgresStore {
    fn store_id(&self) -> &str {
        PostgresStore::store_id(self)
    }
    fn commit(&self, now_ms: u64, mutations: Vec<Mutation>) -> Result<Vec<Result<Receipt, CommitError>>, StoreError> {
        if mutations.len() > BATCH_MUTATIONS_MAX {
            return Ok(vec![Err(CommitError::BatchTooLarge(mutations.len()))]);
        }
        if mutations.is_empty() {
            return Ok(Vec::new());
        }
        self.commit_inner(now_ms, &mutations, false, None)
    }

    fn commit_atomic(&self, now_ms: u64, mutations: Vec<Mutation>) -> Result<Result<Vec<Receipt>, CommitError>, StoreError> {
        if mutations.len() > BATCH_MUTATIONS_MAX {
            return Ok(Err(CommitError::BatchTooLarge(mutations.len())));
        }
        if mutations.is_empty() {
            return Ok(Ok(Vec::new()));
        }
        let rs = self.commit_inner(now_ms, &mutations, true, None)?;
        Ok(rs.into_iter().collect())
    }

    fn commit_idempotent(&self, now_ms: u64, mutations: Vec<Mutation>, tag: IdempotencyTag) -> Result<Result<Vec<Receipt>, CommitError>, StoreError> {
        if mutations.len() > BATCH_MUTATIONS_MAX {
            return Ok(Err(CommitError::BatchTooLarge(mutations.len())));
        }
        if mutations.is_empty() {
            return Ok(Ok(Vec::new()));
        }
        let rs = self.commit_inner(now_ms, &mutations, true, Some(&tag))?;
        Ok(rs.into_iter().collect())
    }

    fn idempotency_record(&self, tenant: &TenantId, principal: &PrincipalId, key: &str, now_ms: u64) -> Result<Option<IdempotencyRecord>, StoreError> {
        let mut conn = self.reader()?;
        let mac_key = memwarden_store::backend::idempotency::mac_key(&self.key);
        memwarden_store::backend::idempotency::get(&PgDb::new(&mut conn), tenant, principal, key, now_ms, &mac_key)
    }

    fn record_answer(&self, tag: &IdempotencyTag, status: u16, body: &[u8]) -> Result<bool, StoreError> {
        let mut conn = ready(&self.writer)?;
        let mac_key = memwarden_store::backend::idempotency::mac_key(&self.key);
        memwarden_store::backend::idempotency::answer(&PgDb::new(&mut conn), tag, status, body, &mac_key)
    }

    fn principal(&self, tenant: &TenantId, id: &PrincipalId) -> Result<Option<Principal>, StoreError> {
        self.read_tenant(tenant.as_str(), |conn, view| {
            let r: Option<PrincipalRow> = row(conn, "tenant = ?1 AND id = ?2", &[Arg::Text(tenant.as_str()), Arg::Text(id.as_str())])?;
            let key = row_key(Table::Principals, tenant.as_str(), &[id.as_str()]);
            let Some(r) = checked(view, &key, r, || id.to_string())? else { return Ok(None) };
            principal_of(&r).map(Some)
        })
    }

    fn principals(&self, tenant: &TenantId) -> Result<Vec<Principal>, StoreError> {
        self.read_tenant(tenant.as_str(), |conn, view| {
            let rs: Vec<PrincipalRow> = rows(conn, view, "tenant = ?1 ORDER BY id COLLATE \"C\"", &[Arg::Text(tenant.as_str())])?;
            rs.iter().map(principal_of).collect()
        })
    }

    fn item(&self, tenant: &TenantId, id: &ItemId) -> Result<Option<MemoryItem>, StoreError> {
        self.read_tenant(tenant.as_str(), |conn, view| read_item(conn, view, tenant, id))
    }

    fn items(&self, tenant: &TenantId, ids: &[ItemId]) -> Result<Vec<Option<MemoryItem>>, StoreError> {
        if ids.len() > ITEMS_BATCH_MAX {
            return Err(StoreError::BadQuery(format!("at most {ITEMS_BATCH_MAX} ids per read, {} given", ids.len())));
        }
        self.read_tenant(tenant.as_str(), |conn, view| read_items(conn, view, tenant, ids))
    }

    fn list(&self, tenant: &TenantId, namespace: &Namespace, limit: usize) -> Result<Vec<MemoryItem>, StoreError> {
        self.list_in_order(tenant, namespace, limit, "created_ms, id")
    }

    fn list_newest(&self, tenant: &TenantId, namespace: &Namespace, limit: usize) -> Result<Vec<MemoryItem>, StoreError> {
        self.list_in_order(tenant, namespace, limit, "created_ms DESC, id DESC")
    }

    fn list_after(&self, tenant: &TenantId, namespace: &Namespace, after: Option<memwarden_store::ListPosition>, limit: usize) -> Result<Vec<MemoryItem>, StoreError> {
        let Some(after) = after else { return self.list(tenant, namespace, limit) };
        let clause = "tenant = ?1 AND namespace = ?2 AND (created_ms, id) > (?3, ?4) ORDER BY created_ms, id LIMIT ?5";
        let created_ms = i64::try_from(after.created_ms).unwrap_or(i64::MAX);
        let items = self.read_tenant(tenant.as_str(), |conn, view| {
            let args = [Arg::Text(tenant.as_str()), Arg::Text(namespace.as_str()), Arg::Int(created_ms), Arg::Blob(after.id.as_bytes()), Arg::Int(i64::try_from(limit).unwrap_or(i64::MAX))];
            let rs: Vec<ItemRow> = rows(conn, view, clause, &args)?;
            rs.iter().map(|r| item_from_row(r, tenant)).collect::<Result<Vec<_>, _>>()
        })?;
        debug_assert!(items.iter().all(|i| memwarden_store::ListPosition::of(i) > after));
        Ok(items)
    }

    fn cursor_key(&self) -> [u8; 32] {
        memwarden_store::cursor::cursor_key(&self.key)
    }

    fn newest_ids(&self, tenant: &TenantId, namespace: &Namespace, limit: usize) -> Result<Vec<ItemId>, StoreError> {
        // Ids only (the caller reads, and so verifies, the items it needs): reading every item
        // of the newest `limit` made a decision's neighbour scan 2.6× slower than on SQLite.
        let mut conn = self.reader()?;
        let limit_i = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = conn
            .query("SELECT id FROM items WHERE tenant = ?1 AND namespace = ?2 ORDER BY created_ms DESC, id DESC LIMIT ?3", &[Arg::Text(tenant.as_str()), Arg::Text(namespace.as_str()), Arg::Int(limit_i)])
            .map_err(store_db_err)?;
        let ids: Vec<ItemId> = rows.iter().map(|r| PgRow(r).blob(0).map_err(store_db_err).and_then(|b| item_id_of(&b))).collect::<Result<_, _>>()?;
        debug_assert!(ids.len() <= limit);
        Ok(ids)
    }

    fn count(&self, tenant: &TenantId) -> Result<u64, StoreError> {
        let mut conn = self.reader()?;
        let rows = conn.query("SELECT COUNT(*) FROM items WHERE tenant = ?1", &[Arg::Text(tenant.as_str())]).map_err(store_db_err)?;
        Ok(rows.first().map(|r| PgRow(r).int(0)).transpose().map_err(store_db_err)?.map_or(0, u64_of))
    }

    fn attestations(&self, tenant: &TenantId, keys: &[String]) -> Result<Vec<Attestation>, StoreError> {
        self.read_tenant(tenant.as_str(), |conn, view| {
            let mut out = Vec::new();
            for k in keys {
                let rs: Vec<AttestationRow> = rows(conn, view, "tenant = ?1 AND key = ?2 ORDER BY log_index", &[Arg::Text(tenant.as_str()), Arg::Text(k)])?;
                for r in rs {
                    out.push(attestation_of(&r)?);
                }
            }
            Ok(out)
        })
    }

    fn reputation(&self, tenant: &TenantId, principal: &PrincipalId) -> Result<Option<f64>, StoreError> {
        self.read_tenant(tenant.as_str(), |conn, view| {
            let r: Option<ReputationRow> = row(conn, "tenant = ?1 AND principal = ?2", &[Arg::Text(tenant.as_str()), Arg::Text(principal.as_str())])?;
            let key = row_key(Table::Reputation, tenant.as_str(), &[principal.as_str()]);
            Ok(checked(view, &key, r, || principal.to_string())?.map(|r| r.value))
        })
    }

    fn items_in_order(&self, tenant: &TenantId, after: Option<u64>, limit: usize) -> Result<Vec<OrderedItem>, StoreError> {
        self.read_tenant(tenant.as_str(), |conn, view| {
            let (a, l) = (after_of(after), limit_of(limit));
            let args = [Arg::Text(tenant.as_str()), Arg::Int(a), Arg::Int(l)];
            let live: Vec<ItemRow> = rows(conn, view, "tenant = ?1 AND log_index > ?2 ORDER BY log_index LIMIT ?3", &args)?;
            let gone: Vec<ErasedRow> = rows(conn, view, "tenant = ?1 AND item_log_index > ?2 ORDER BY item_log_index LIMIT ?3", &args)?;
            let mut out = Vec::with_capacity(live.len() + gone.len());
            for r in &live {
                out.push(OrderedItem { log_index: u64_of(r.log_index), item: item_from_row(r, tenant)?, erased: false });
            }
            for r in &gone {
                let id = item_id_of(&r.id)?;
                let item: MemoryItem = serde_json::from_str(&r.tombstone).map_err(|e| StoreError::Corrupt(format!("tombstone {id}: {e}")))?;
                if item.id() != id || item.tenant() != tenant {
                    return Err(StoreError::ItemTampered { id: id.to_string(), reason: "tombstone names another id or tenant".into() });
                }
                out.push(OrderedItem { log_index: u64_of(r.item_log_index), item, erased: true });
            }
            out.sort_by_key(|o| o.log_index);
            out.truncate(usize::try_from(l).unwrap_or(0));
            let order: Vec<u64> = out.iter().map(|o| o.log_index).collect();
            view.state
                .check_page(tenant.as_str(), OrderKind::Items, after, usize::try_from(l).unwrap_or(0), &order)
                .map_err(|reason| StoreError::RowTampered { table: "items", key: format!("{tenant} in commit order"), reason })?;
            Ok(out)
        })
    }

    fn lineage_events(&self, tenant: &TenantId, after: Option<u64>, limit: usize) -> Result<Vec<(u64, serde_json::Value)>, StoreError> {
        self.read_tenant(tenant.as_str(), |conn, view| {
            let (a, l) = (after_of(after), limit_of(limit));
            let rs: Vec<LineageRow> = rows(conn, view, "tenant = ?1 AND log_index > ?2 ORDER BY log_index LIMIT ?3", &[Arg::Text(tenant.as_str()), Arg::Int(a), Arg::Int(l)])?;
            let order: Vec<u64> = rs.iter().map(|r| u64_of(r.log_index)).collect();
            view.state
                .check_page(tenant.as_str(), OrderKind::Lineage, after, usize::try_from(l).unwrap_or(0), &order)
                .map_err(|reason| StoreError::RowTampered { table: "lineage_events", key: format!("{tenant} in commit order"), reason })?;
            rs.into_iter()
                .map(|r| {
                    let event = serde_json::from_str(&r.event).map_err(|e| StoreError::Corrupt(format!("lineage event {}: {e}", r.log_index)))?;
                    Ok((u64_of(r.log_index), event))
                })
                .collect()
        })
    }

    fn attestations_of(&self, tenant: &TenantId, key: &str, value: &NormValue) -> Result<Vec<Attestation>, StoreError> {
        self.read_tenant(tenant.as_str(), |conn, view| {
            let rs: Vec<AttestationRow> = rows(
                conn,
                view,
                "tenant = ?1 AND key = ?2 AND ((record::jsonb) #>> '{value,canonical}') = ?3 ORDER BY log_index",
                &[Arg::Text(tenant.as_str()), Arg::Text(key), Arg::Text(&value.canonical)],
            )?;
            let mut out = Vec::new();
            for r in rs {
                let a = attestation_of(&r)?;
                if a.value == *value {
                    out.push(a);
                }
            }
            Ok(out)
        })
    }

    fn elevations(&self, tenant: &TenantId, keys: &[String]) -> Result<Vec<Elevation>, StoreError> {
        self.read_tenant(tenant.as_str(), |conn, view| {
            let mut out = Vec::new();
            for k in keys {
                let rs: Vec<ElevationRow> = rows(conn, view, "tenant = ?1 AND key = ?2", &[Arg::Text(tenant.as_str()), Arg::Text(k)])?;
                for r in &rs {
                    out.push(elevation_of(r)?);
                }
            }
            Ok(out)
        })
    }

    fn elevations_all(&self, tenant: &TenantId) -> Result<Vec<Elevation>, StoreError> {
        self.read_tenant(tenant.as_str(), |conn, view| {
            let rs: Vec<ElevationRow> = rows(conn, view, "tenant = ?1", &[Arg::Text(tenant.as_str())])?;
            rs.iter().map(elevation_of).collect()
        })
    }

    fn seal_keys(&self, tenant: &TenantId, seals: &[memwarden_store::seal::SealId]) -> Result<Vec<(memwarden_store::seal::SealId, memwarden_store::seal::SealKey)>, StoreError> {
        let mut conn = self.reader()?;
        let mut out = Vec::with_capacity(seals.len());
        for seal in seals.iter().take(memwarden_store::seal::SEALS_PER_BODY_MAX) {
            let rows = conn.query("SELECT key FROM seals WHERE tenant = ?1 AND seal = ?2", &[Arg::Text(tenant.as_str()), Arg::Blob(seal.as_slice())]).map_err(store_db_err)?;
            let Some(r) = rows.first() else { continue };
            let key: Vec<u8> = r.try_get(0).map_err(|e| StoreError::Corrupt(format!("seal key: {e}")))?;
            let key = memwarden_store::seal::SealKey::try_from(key.as_slice()).map_err(|_| StoreError::Corrupt(format!("seal {} has a key of {} bytes", hex::encode(seal), key.len())))?;
            out.push((*seal, key));
        }
        debug_assert!(out.len() <= seals.len());
        Ok(out)
    }

    fn grant_used(&self, tenant: &TenantId, nonce: &[u8; 16]) -> Result<bool, StoreError> {
        // The log says whether a grant was used (caught up with every process's commits first).
        {
            let mut conn = self.reader()?;
            self.catch_up(&mut conn, tenant.as_str(), true)?;
        }
        let key = row_key(Table::GrantsUsed, tenant.as_str(), &[&hex::encode(nonce)]);
        Ok(read(&self.view).state.check(&key, None) != Check::Ok)
    }

    fn session(&self, tenant: &TenantId, principal: &PrincipalId, session: &SessionId) -> Result<Option<StoredSession>, StoreError> {
        self.read_tenant(tenant.as_str(), |conn, view| {
            let r: Option<SessionRow> =
                row(conn, "tenant = ?1 AND principal = ?2 AND session = ?3", &[Arg::Text(tenant.as_str()), Arg::Text(principal.as_str()), Arg::Text(session.as_str())])?;
            let key = row_key(Table::Sessions, tenant.as_str(), &[principal.as_str(), session.as_str()]);
            let Some(r) = checked(view, &key, r, || format!("{principal}/{session}"))? else { return Ok(None) };
            serde_json::from_str(&r.record).map(Some).map_err(|e| StoreError::Corrupt(format!("session: {e}")))
        })
    }

    fn sessions_of(&self, tenant: &TenantId, principal: &PrincipalId) -> Result<(Vec<StoredSession>, bool), StoreError> {
        self.read_tenant(tenant.as_str(), |conn, view| {
            let limit = i64::try_from(memwarden_store::SESSIONS_OF_MAX + 1).unwrap_or(i64::MAX);
            let rs: Vec<SessionRow> = rows(conn, view, "tenant = ?1 AND principal = ?2 LIMIT ?3", &[Arg::Text(tenant.as_str()), Arg::Text(principal.as_str()), Arg::Int(limit)])?;
            let more = rs.len() > memwarden_store::SESSIONS_OF_MAX;
            let mut out = Vec::with_capacity(rs.len().min(memwarden_store::SESSIONS_OF_MAX));
            for r in rs.iter().take(memwarden_store::SESSIONS_OF_MAX) {
                out.push(serde_json::from_str(&r.record).map_err(|e| StoreError::Corrupt(format!("session: {e}")))?);
            }
            Ok((out, more))
        })
    }

    fn search(&self, tenant: &TenantId, namespace: &Namespace, query: &[f32], k: usize, reader: &PrincipalId) -> Result<Vec<Hit>, StoreError> {
        check_k(k)?;
        // The vector index is this process's: caught up first, so it holds every item another
        // process committed before this search (rows read back below are checked as always).
        {
            let mut conn = self.reader()?;
            self.catch_up(&mut conn, tenant.as_str(), true)?;
        }
        self.read_tenant(tenant.as_str(), |conn, view| {
            let Some(dims) = self.vectors.dims() else {
                return Ok(Vec::new()); // nothing embedded yet
            };
            if query.len() != dims || query.iter().any(|x| !x.is_finite()) || query.iter().all(|x| *x == 0.0) {
                return Err(StoreError::BadQuery(format!("the query must be a finite, non-zero {dims}-dimensional vector (got {} dimensions)", query.len())));
            }
            let eligible = |i: &MemoryItem| i.searchable_by(reader);
            let Some(found) = self.vectors.search(tenant, namespace, query, k, reader)? else {
                return Self::search_exact_in(conn, view, tenant, namespace, query, k, &eligible);
            };
            let mut out = Vec::with_capacity(found.hits.len());
            let ids: Vec<ItemId> = found.hits.iter().map(|(id, _)| *id).collect();
            let items = read_items(conn, view, tenant, &ids)?;
            for ((_, similarity), item) in found.hits.into_iter().zip(items) {
                // The catalog said eligible; the item read back (verified against the log) must agree.
                match item {
                    Some(item) if item.namespace() == namespace && item.searchable_by(reader) => out.push(Hit { item, similarity, lexical: None }),
                    // Out of step: never return it; answer from the table so the caller still
                    // gets min(k, eligible) items.
                    _ => return Self::search_exact_in(conn, view, tenant, namespace, query, k, &eligible),
                }
            }
            Ok(out)
        })
    }

    fn search_lexical(&self, tenant: &TenantId, namespace: &Namespace, text: &str, query: &[f32], k: usize, reader: &PrincipalId) -> Result<Vec<Hit>, StoreError> {
        check_k(k)?;
        // Any term may match. The SQLite store leaves out words that match more than
        // `TERM_MATCHES_MAX` memories of the namespace; here counting them (a GIN index answers
        // only with bitmap scans, so each count visits the heap) cost more than the ranking it
        // saves: 10-word queries over 10,000 memories, search p50 27.6 ms without the count,
        // 45-48 ms with it (examples/engine_round_trips.rs, 2026-12-04).
        let terms = ts_terms(text);
        if terms.is_empty() {
            return Ok(Vec::new());
        }
        let q = terms.join(" | ");
        self.read_tenant(tenant.as_str(), |conn, view| {
            // Fetch wider until k eligible matches are found or there are no more: the
            // permission filter runs on the verified item, never on the text index.
            let mut limit = k.saturating_mul(4);
            loop {
                let rs = conn
                    .query(
                        "SELECT id, embedding, emb_digest, ts_rank(fts, q)::float8 AS rank FROM items, to_tsquery('simple', ?1) q
                         WHERE tenant = ?2 AND namespace = ?3 AND fts @@ q ORDER BY rank DESC, id LIMIT ?4",
                        &[Arg::Text(&q), Arg::Text(tenant.as_str()), Arg::Text(namespace.as_str()), Arg::Int(i64::try_from(limit).unwrap_or(i64::MAX))],
                    )
                    .map_err(store_db_err)?;
                let mut out = Vec::with_capacity(k);
                let mut matches = Vec::with_capacity(rs.len());
                for r in &rs {
                    let r = PgRow(r);
                    let (raw, emb, digest, rank) = (r.blob(0).map_err(store_db_err)?, r.opt_blob(1).map_err(store_db_err)?, r.opt_blob(2).map_err(store_db_err)?, r.real(3).map_err(store_db_err)?);
                    if let Some(e) = &emb
                        && digest.as_deref() != Some(embedding_digest(e).as_slice())
                    {
                        return Err(StoreError::ItemTampered { id: hex::encode(&raw), reason: "its embedding differs from the digest its log entry committed".into() });
                    }
                    let Ok(id) = item_id_of(&raw) else { continue };
                    matches.push((id, emb, rank));
                }
                // Every match read back and verified in one query.
                let ids: Vec<ItemId> = matches.iter().map(|(id, _, _)| *id).collect();
                let items = read_items(conn, view, tenant, &ids)?;
                for ((_, emb, rank), item) in matches.into_iter().zip(items) {
                    let Some(item) = item else { continue };
                    if item.namespace() != namespace || !item.searchable_by(reader) {
                        continue;
                    }
                    let similarity = match emb {
                        Some(e) if e.len() == query.len() * 4 => cosine(query, &decode_f32(&e)),
                        _ => 0.0,
                    };
                    out.push(Hit { item, similarity, lexical: Some(rank) });
                    if out.len() >= k {
                        return Ok(out);
                    }
                }
                if rs.len() < limit || limit >= SEARCH_K_MAX.saturating_mul(16) {
                    return Ok(out);
                }
                limit = limit.saturating_mul(4);
            }
        })
    }

    fn log_len(&self) -> u64 {
        self.global_view().len()
    }

    fn log_root(&self) -> (u64, Hash, Hash) {
        let g = self.global_view();
        (g.len(), g.root(), g.head())
    }

    fn log_entries(&self, from: u64, to: u64) -> Result<Vec<Vec<u8>>, StoreError> {
        let mut conn = self.reader()?;
        let n = to.saturating_sub(from);
        let rows = conn
            .query("SELECT entry FROM log ORDER BY tenant COLLATE \"C\", idx LIMIT ?2 OFFSET ?1", &[Arg::Int(i64_of(from)), Arg::Int(i64_of(n))])
            .map_err(store_db_err)?;
        rows.iter().map(|r| PgRow(r).blob(0).map_err(store_db_err)).collect()
    }

    fn inclusion_proof(&self, index: u64, size: u64) -> Result<Vec<Hash>, StoreError> {
        self.global_view().inclusion_proof(index, size).map_err(|e| StoreError::Corrupt(e.to_string()))
    }

    fn consistency_proof(&self, old_size: u64, new_size: u64) -> Result<Vec<Hash>, StoreError> {
        self.global_view().consistency_proof(old_size, new_size).map_err(|e| StoreError::Corrupt(e.to_string()))
    }

    fn checkpoint(&self, now_ms: u64) -> Result<SignedCheckpoint, StoreError> {
        for t in self.refresh_all()? {
            let stale = read(&self.view).logs.tenants.get(&t).is_some_and(|l| l.log.len() > l.last_checkpoint);
            if stale {
                let mut conn = ready(&self.writer)?;
                self.write_checkpoint(&mut conn, &t, now_ms)?;
            }
        }
        // The global view's checkpoint is signed but not stored (see `global_view`).
        Ok(self.global_view().checkpoint(&self.key, now_ms))
    }

    fn checkpoints(&self) -> Result<Vec<SignedCheckpoint>, StoreError> {
        Ok(Vec::new())
    }

    fn log_public_key(&self) -> [u8; 32] {
        self.key.verifying_key().to_bytes()
    }

    fn verify_log(&self) -> Result<VerifyReport, StoreError> {
        self.verify_live(None)
    }

    fn foreign_version(&self, tenant: &TenantId) -> u64 {
        // Caught up first, so a view cached above the store learns of another process's write
        // on its next use.
        self.refresh(tenant.as_str());
        read(&self.view).foreign.get(tenant.as_str()).copied().unwrap_or(0)
    }

    fn foreign_entries(&self, tenant: &TenantId, since: u64) -> Option<(u64, Vec<u64>)> {
        self.refresh(tenant.as_str());
        let view = read(&self.view);
        let now = view.foreign.get(tenant.as_str()).copied().unwrap_or(0);
        if since == now {
            return Some((now, Vec::new()));
        }
        let history = view.foreign_log.get(tenant.as_str())?;
        // Every version after `since` must still be kept.
        if since > now || history.front().is_none_or(|(v, _)| *v > since + 1) {
            return None;
        }
        let mut out: Vec<u64> = history.iter().filter(|(v, _)| *v > since).flat_map(|(_, ix)| ix.iter().copied()).collect();
        out.sort_unstable();
        out.dedup();
        Some((now, out))
    }

    fn tenants(&self) -> Vec<TenantId> {
        match self.refresh_all() {
            Ok(ts) => ts.iter().filter_map(|t| TenantId::new(t).ok()).collect(),
            Err(e) => {
                eprintln!("memwarden-store-pg: listing tenants failed: {e}");
                let mut out: Vec<TenantId> = read(&self.view).logs.tenants.keys().filter_map(|t| TenantId::new(t).ok()).collect();
                out.sort();
                out
            }
        }
    }

    fn log_len_of(&self, tenant: &TenantId) -> u64 {
        self.refresh(tenant.as_str());
        read(&self.view).logs.of(tenant.as_str()).map_or(0, VerdictLog::len)
    }

    fn log_root_of(&self, tenant: &TenantId) -> (u64, Hash, Hash) {
        self.refresh(tenant.as_str());
        let view = read(&self.view);
        match view.logs.of(tenant.as_str()) {
            Some(l) => (l.len(), l.root(), l.head()),
            None => (0, memwarden_log::empty_root(), [0; 32]),
        }
    }

    fn log_entries_of(&self, tenant: &TenantId, from: u64, to: u64) -> Result<Vec<Vec<u8>>, StoreError> {
        let mut conn = self.reader()?;
        let rows = conn
            .query("SELECT entry FROM log WHERE tenant = ?1 AND idx >= ?2 AND idx < ?3 ORDER BY idx", &[Arg::Text(tenant.as_str()), Arg::Int(i64_of(from)), Arg::Int(i64_of(to))])
            .map_err(store_db_err)?;
        rows.iter().map(|r| PgRow(r).blob(0).map_err(store_db_err)).collect()
    }

    fn inclusion_proof_of(&self, tenant: &TenantId, index: u64, size: u64) -> Result<Vec<Hash>, StoreError> {
        self.refresh(tenant.as_str());
        let view = read(&self.view);
        let log = view.logs.of(tenant.as_str()).ok_or_else(|| StoreError::UnknownLog(tenant.to_string()))?;
        log.inclusion_proof(index, size).map_err(|e| StoreError::BadQuery(e.to_string()))
    }

    fn consistency_proof_of(&self, tenant: &TenantId, old_size: u64, new_size: u64) -> Result<Vec<Hash>, StoreError> {
        self.refresh(tenant.as_str());
        let view = read(&self.view);
        let log = view.logs.of(tenant.as_str()).ok_or_else(|| StoreError::UnknownLog(tenant.to_string()))?;
        log.consistency_proof(old_size, new_size).map_err(|e| StoreError::BadQuery(e.to_string()))
    }

    fn checkpoint_of(&self, tenant: &TenantId, now_ms: u64) -> Result<SignedCheckpoint, StoreError> {
        self.refresh(tenant.as_str());
        let mut conn = ready(&self.writer)?;
        self.write_checkpoint(&mut conn, tenant.as_str(), now_ms)
    }

    fn checkpoints_of(&self, tenant: &TenantId) -> Result<Vec<SignedCheckpoint>, StoreError> {
        let mut conn = self.reader()?;
        let rows = conn.query("SELECT record FROM checkpoints WHERE tenant = ?1 ORDER BY size", &[Arg::Text(tenant.as_str())]).map_err(store_db_err)?;
        rows.iter()
            .map(|r| {
                let rec = PgRow(r).text(0).map_err(store_db_err)?;
                serde_json::from_str(&rec).map_err(|e| StoreError::Corrupt(format!("checkpoint: {e}")))
            })
            .collect()
    }

    fn verify_log_of(&self, tenant: &TenantId) -> Result<VerifyReport, StoreError> {
        self.verify_live(Some(tenant.as_str()))
    }
}

/// Moving a tenant between stores (see [`memwarden_store::transfer`]).
impl PostgresStore {
    /// Export `tenant` into `out` (the `memwarden-tenant/1` JSON Lines file), read in one
    /// REPEATABLE READ snapshot; nothing is written unless the tenant's log and rows verify.
    pub fn export_tenant(&self, tenant: &TenantId, now_ms: u64, out: &mut dyn std::io::Write) -> Result<Exported, TransferError> {
        let source = Source { backend: "postgres".into(), store_id: self.store_id.clone(), log_key: self.key.verifying_key().to_bytes() };
        let mut conn = self.reader()?;
        conn.begin("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")?;
        let res = export_from(&PgDb::new(&mut conn), tenant, &source, now_ms, out);
        let _ = conn.batch("COMMIT");
        res
    }

    /// Import an export into this store: the file's log is verified first, then the tenant is
    /// written in one transaction (under the tenant's advisory lock, so no process commits to
    /// it meanwhile) that the store's own verifier and row audit check before it commits; a
    /// tenant that already has a log here is refused, and a refused import leaves nothing.
    /// The log keeps the source's entries (same size, root and head); the store signs a
    /// checkpoint of its own at the imported size. Later vector keys of the tenant start above
    /// the imported ones (`vseq_base:<tenant>` in `meta`).
    pub fn import_tenant(&self, src: &mut dyn std::io::BufRead, now_ms: u64) -> Result<Imported, TransferError> {
        let mut lines = Lines::new(src);
        let head = read_head(&mut lines)?;
        let tenant = head.tenant.as_str().to_owned();
        let size = head.log.size;
        let mut conn = ready(&self.writer)?;
        conn.begin("BEGIN")?;
        let out = (|| -> Result<Imported, TransferError> {
            let name = self.lock_name(&tenant);
            conn.query("SELECT pg_advisory_xact_lock(hashtextextended(?1, 0))", &[Arg::Text(&name)]).map_err(store_db_err)?;
            let witnessed = HashMap::new();
            let target = Target { key: &self.key, store_id: &self.store_id, gseq: 0, witnessed: &witnessed, now_ms };
            let imported = import_rows(&PgDb::new(&mut conn), head, &mut lines, &target)?;
            let base = imported.max_vseq.map_or(0, |m| m.saturating_add(1).saturating_sub(i64_of(size)).max(0));
            if base > 0 {
                let key = format!("vseq_base:{tenant}");
                let value = base.to_string();
                conn.execute("INSERT INTO meta(key, value) VALUES(?1, ?2) ON CONFLICT (key) DO UPDATE SET value = excluded.value", &[Arg::Text(&key), Arg::Text(&value)])
                    .map_err(store_db_err)?;
            }
            Ok(imported)
        })();
        let imported = match out {
            Ok(i) => {
                conn.batch("COMMIT").map_err(|e| StoreError::Database(format!("commit failed: {e}")))?;
                i
            }
            Err(e) => {
                let _ = conn.batch("ROLLBACK");
                return Err(e);
            }
        };
        drop(conn);
        // This process learns the tenant as it learns another process's commit.
        {
            let mut r = self.reader()?;
            self.catch_up(&mut r, &tenant, true)?;
        }
        if let Some(t) = write(&self.view).logs.tenants.get_mut(&tenant) {
            t.last_checkpoint = t.last_checkpoint.max(size);
        }
        Ok(imported)
    }
}

/// Drop a store's schema and everything in it (tests; irreversible).
pub fn drop_schema(url: &str, schema: &str) -> Result<(), StoreError> {
    let mut conn = Conn::connect(url, "public")?;
    conn.batch(&format!("DROP SCHEMA IF EXISTS {} CASCADE", quote_ident(schema))).map_err(store_db_err)
}

/// An `elevations` row's record, checked against the row's key columns.
fn elevation_of(r: &ElevationRow) -> Result<Elevation, StoreError> {
    let e: Elevation = serde_json::from_str(&r.record).map_err(|e| StoreError::Corrupt(format!("elevations: {e}")))?;
    if e.tenant.as_str() != r.tenant || e.key != r.key || e.value.canonical != r.value {
        return Err(StoreError::RowTampered { table: "elevations", key: r.parts().join("/"), reason: "the record names another key or value".into() });
    }
    Ok(e)
}

#[cfg(test)]
mod tests {
    use super::PgConfig;

    #[test]
    fn a_store_spec_names_its_schema() {
        let c = PgConfig::from_spec("postgres://u@h:5432/db?schema=prod&sslmode=disable", "/k");
        assert_eq!((c.url.as_str(), c.schema.as_str()), ("postgres://u@h:5432/db?sslmode=disable", "prod"));
        let c = PgConfig::from_spec("postgresql://u@h/db?schema=x", "/k");
        assert_eq!((c.url.as_str(), c.schema.as_str()), ("postgresql://u@h/db", "x"));
        let c = PgConfig::from_spec("postgres://u@h/db", "/k");
        assert_eq!((c.url.as_str(), c.schema.as_str()), ("postgres://u@h/db", "memwarden"));
        let c = PgConfig::from_spec("host=127.0.0.1 schema=s1 dbname=test", "/k");
        assert_eq!((c.url.as_str(), c.schema.as_str()), ("host=127.0.0.1 dbname=test", "s1"));
    }
}

