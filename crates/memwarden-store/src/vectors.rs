//! The vector side of the embedded store: one [`ClassedIndex`] per (tenant, namespace)
//! partition, kept in step with the `vectors` table, and an in-memory catalog that splits the
//! partition's keys into **access classes** — one for the items everyone may read, one per
//! distinct reader set (the owner included), and the parked class for items nobody may read
//! (quarantined, blocked, revoked). A guarded search names the classes the reader may read;
//! the index walks each of their graphs (or scans each small class's block) *unfiltered* and
//! merges the per-class top-k, so a selective permission never makes a walk wade through
//! ineligible nodes.
//!
//! Invariants:
//! - The SQLite `vectors` table is the truth; index files are a cache. A vector is added to
//!   its index after its transaction commits and before the commit is acknowledged, so a
//!   caller that wrote an item finds it in its next search.
//! - Keys are `vectors.seq` (AUTOINCREMENT, never reused). An index file records the highest
//!   seq it holds (its watermark); opening replays every row above it, removes keys whose rows
//!   are gone, moves keys whose access changed since the save into their current class, or
//!   rebuilds from the table when the file is missing, damaged or does not match. A crash
//!   between a commit and a save therefore loses nothing, and a class in a stale file never
//!   outlives the reopen.
//! - A partition never spans tenants, so a query cannot even reach another tenant's vectors.
//! - A key's class and its catalog entry change together under the partition's catalog lock,
//!   which every search holds shared: a status or scope change moves the key out of its old
//!   class before it enters the new one (a narrowing always applies before any widening could),
//!   and erasure removes it from the index altogether. Class membership is the filter, not a
//!   score: a key outside the reader's classes is never ranked. The catalog re-checks every hit
//!   (`excluded`), and the store re-checks every hit against the item it reads back
//!   ([`MemoryItem::readable_by`]).

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use memwarden_core::prelude::*;
use memwarden_index::{CLASS_GRAPH_MIN_COUNT, ClassId, ClassedIndex, IndexConfig, PARKED_CLASS, SearchPath};
use rusqlite::{Connection, OptionalExtension, params};
use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::StoreError;
use crate::binding::{BoundRow, ItemRow, embedding_digest};
use crate::keys::{hmac_sha256, set_mode, write_private};

/// Directory (under the data directory) holding one index file per partition.
pub(crate) const INDEX_DIR: &str = "index";
/// Extension of a partition's index file ([`ClassedIndex`] format).
const INDEX_EXTENSION: &str = "classes";
/// Extension of the single-graph index files of earlier builds (deleted at open: a cache this
/// build does not read).
const LEGACY_INDEX_EXTENSION: &str = "usearch";
/// A partition's index is saved after this many changes (inserts, moves, removals) since its
/// last save (and always at a clean close). Bounds what a crash makes the next open replay.
pub const SAVE_AFTER_ADDS_COUNT: usize = 50_000;
/// Progress is reported every this many rows while loading or rebuilding.
const PROGRESS_EVERY_COUNT: usize = 10_000;
/// The class of items every principal of the namespace may read.
const SHARED_CLASS: ClassId = 1;

/// Progress callback: (stage, done, total).
pub type Progress<'a> = &'a dyn Fn(&str, usize, usize);

type PartitionKey = (TenantId, Namespace);

/// A vector committed in the current group, to be indexed once the transaction commits.
#[derive(Debug)]
pub struct NewVector {
    /// Its vector key.
    pub seq: u64,
    /// The item.
    pub id: ItemId,
    /// Its tenant.
    pub tenant: TenantId,
    /// Its namespace.
    pub namespace: Namespace,
    /// The vector.
    pub embedding: Vec<f32>,
    /// The item's scope.
    pub scope: Scope,
    /// Who its writer addressed it to beyond its readers ([`MemoryItem::audience`]): a search
    /// finds it for them too, and the engine withholds it from them.
    ///
    /// [`MemoryItem::audience`]: memwarden_core::item::MemoryItem::audience
    pub audience: Option<Readers>,
    /// The item's status.
    pub status: Status,
}

/// A committed change of an indexed item's status or scope, to apply to the catalog.
#[derive(Debug)]
pub struct AccessChange {
    /// Its vector key.
    pub seq: u64,
    /// Its tenant.
    pub tenant: TenantId,
    /// Its namespace.
    pub namespace: Namespace,
    /// The item's scope.
    pub scope: Scope,
    /// Who its writer addressed it to beyond its readers (see [`NewVector::audience`]).
    pub audience: Option<Readers>,
    /// The item's status.
    pub status: Status,
    /// The item was erased: its key leaves the catalog and the index altogether.
    pub erased: bool,
}

/// Who may read an item: nobody (not retrievable, or revoked), everyone in the namespace, or
/// exactly a set of principals (its readers plus its owner).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Access {
    Nobody,
    Everyone,
    Only(BTreeSet<PrincipalId>),
}

impl Access {
    /// Whom a search may find it for: its readers and owner, and the audience its writer
    /// addressed (the engine withholds it from the audience; the store only finds candidates).
    fn of(scope: &Scope, audience: Option<&Readers>, status: Status) -> Self {
        if !status.retrievable() || scope.visibility == Visibility::Revoked {
            return Self::Nobody;
        }
        let found_by = match audience {
            Some(a) => scope.readers.union(a),
            None => scope.readers.clone(),
        };
        match found_by {
            Readers::All => Self::Everyone,
            Readers::Only(set) => Self::Only(set.iter().chain(std::iter::once(&scope.owner)).cloned().collect()),
        }
    }

    /// The class id: fixed for nobody and everyone, a digest of the reader set otherwise (so it
    /// is the same after a reopen and in a saved file). A digest landing on a fixed id or
    /// colliding with another set is refused by the catalog, never merged.
    fn class(&self) -> ClassId {
        match self {
            Self::Nobody => PARKED_CLASS,
            Self::Everyone => SHARED_CLASS,
            Self::Only(set) => {
                let mut h = Sha256::new();
                h.update(b"memwarden/access-class/v1\0");
                for p in set {
                    h.update(p.as_str().as_bytes());
                    h.update([0u8]);
                }
                let d = h.finalize();
                u64::from_le_bytes([d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7]])
            }
        }
    }
}

#[derive(Debug)]
struct ClassEntry {
    access: Access,
    count: usize,
}

/// Who may read which key of a partition: every key's item and access class (the parked class
/// for items nobody may read), each class's reader set and size, and per principal the
/// private classes naming it.
#[derive(Debug, Default)]
struct Catalog {
    ids: HashMap<u64, ItemId>,
    class_of: HashMap<u64, ClassId>,
    classes: HashMap<ClassId, ClassEntry>,
    by_reader: HashMap<PrincipalId, BTreeSet<ClassId>>,
}

impl Catalog {
    /// The class `access` maps to, refusing an id already taken by another reader set.
    fn class_for(&self, access: &Access) -> Result<ClassId, StoreError> {
        let class = access.class();
        let fixed = matches!(access, Access::Nobody | Access::Everyone);
        if !fixed && (class == PARKED_CLASS || class == SHARED_CLASS) {
            return Err(StoreError::Index(format!("access class digest {class} is reserved")));
        }
        match self.classes.get(&class) {
            Some(e) if e.access != *access => Err(StoreError::Index(format!("access class id {class} names two reader sets"))),
            _ => Ok(class),
        }
    }

    /// Records `key` (not yet catalogued) in `class` (from [`Catalog::class_for`]).
    fn insert(&mut self, key: u64, id: ItemId, access: Access, class: ClassId) {
        debug_assert!(!self.class_of.contains_key(&key), "key {key} is already catalogued");
        debug_assert_eq!(access.class(), class);
        let entry = self.classes.entry(class).or_insert_with(|| ClassEntry { access: access.clone(), count: 0 });
        if entry.count == 0
            && let Access::Only(set) = &access
        {
            for p in set {
                self.by_reader.entry(p.clone()).or_default().insert(class);
            }
        }
        entry.count += 1;
        self.ids.insert(key, id);
        self.class_of.insert(key, class);
    }

    /// Takes `key` out of its class (the class disappears with its last key); returns the
    /// item id.
    fn leave(&mut self, key: u64) -> Option<ItemId> {
        let class = self.class_of.remove(&key)?;
        if let Some(entry) = self.classes.get_mut(&class) {
            entry.count -= 1;
            if entry.count == 0
                && let Some(entry) = self.classes.remove(&class)
                && let Access::Only(set) = entry.access
            {
                for p in set {
                    if let Some(classes) = self.by_reader.get_mut(&p) {
                        classes.remove(&class);
                        if classes.is_empty() {
                            self.by_reader.remove(&p);
                        }
                    }
                }
            }
        }
        self.ids.remove(&key)
    }

    /// The classes `reader` may read (sorted) and how many keys they hold (exact: classes are
    /// disjoint).
    fn eligible(&self, reader: &PrincipalId) -> (Vec<ClassId>, usize) {
        let mut classes: Vec<ClassId> = Vec::new();
        if self.classes.contains_key(&SHARED_CLASS) {
            classes.push(SHARED_CLASS);
        }
        classes.extend(self.by_reader.get(reader).into_iter().flatten().copied());
        classes.sort_unstable();
        classes.dedup();
        let count = classes.iter().filter_map(|c| self.classes.get(c)).map(|e| e.count).sum();
        (classes, count)
    }
}

#[derive(Debug)]
struct Partition {
    index: ClassedIndex,
    catalog: RwLock<Catalog>,
    /// Highest seq added.
    max_seq: AtomicU64,
    /// Changes (inserts, moves, removals) since the last save.
    unsaved: AtomicUsize,
    /// An index change failed after its row committed: searches use the exact path over the
    /// table until the next open rebuilds the index.
    degraded: AtomicBool,
    file: PathBuf,
}

impl Partition {
    fn new(index: ClassedIndex, catalog: Catalog, max_seq: u64, unsaved: usize, file: PathBuf) -> Self {
        Self {
            index,
            catalog: RwLock::new(catalog),
            max_seq: AtomicU64::new(max_seq),
            unsaved: AtomicUsize::new(unsaved),
            degraded: AtomicBool::new(false),
            file,
        }
    }
}

fn read<T>(l: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(PoisonError::into_inner)
}

fn write<T>(l: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(PoisonError::into_inner)
}

/// The two fields of a stored item record the catalog needs (the rest is skipped unparsed).
#[derive(Deserialize)]
struct AccessView {
    scope: Scope,
    #[serde(default)]
    audience: Option<Readers>,
    status: Status,
}

/// What a partition search found: (key's item, similarity), best first.
pub struct Found {
    /// (item, similarity), best first.
    pub hits: Vec<(ItemId, f32)>,
}

/// Every [`SearchPath`] a partition search can report, in counter order.
const PATHS: [SearchPath; 7] = [
    SearchPath::Ann,
    SearchPath::AnnFiltered,
    SearchPath::ExactSelective,
    SearchPath::ExactAfterShortAnn,
    SearchPath::ClassedAnn,
    SearchPath::ClassedExact,
    SearchPath::ClassedExactAfterShortAnn,
];

/// Every partition of one store.
#[derive(Debug)]
pub struct Vectors {
    /// Searches answered per [`SearchPath`] (in [`PATHS`] order).
    paths: [AtomicU64; PATHS.len()],
    dir: PathBuf,
    /// Classes of at least this many vectors get their own graph.
    graph_min_count: AtomicUsize,
    /// Authenticates index files (derived from the store's signing key).
    mac_key: [u8; 32],
    dims: RwLock<Option<usize>>,
    parts: RwLock<HashMap<PartitionKey, Arc<Partition>>>,
}

fn file_for(dir: &Path, tenant: &TenantId, namespace: &Namespace) -> PathBuf {
    let mut h = Sha256::new();
    h.update(tenant.as_str().as_bytes());
    h.update([0u8]);
    h.update(namespace.as_str().as_bytes());
    let digest = h.finalize();
    dir.join(format!("{}.{INDEX_EXTENSION}", hex::encode(&digest[..16])))
}

fn index_err(e: memwarden_index::IndexError) -> StoreError {
    StoreError::Index(e.to_string())
}

fn to_u64(v: i64) -> Result<u64, StoreError> {
    u64::try_from(v).map_err(|_| StoreError::Corrupt(format!("negative vector sequence number {v}")))
}

fn to_item_id(raw: Vec<u8>) -> Result<ItemId, StoreError> {
    let bytes: [u8; 16] = raw.try_into().map_err(|_| StoreError::Corrupt("item id length".into()))?;
    Ok(ItemId::from_bytes(bytes))
}

fn path_slot(p: SearchPath) -> usize {
    PATHS.iter().position(|q| *q == p).unwrap_or(0)
}

/// The MAC file beside an index file.
fn mac_file(file: &Path) -> PathBuf {
    let mut name = file.as_os_str().to_owned();
    name.push(".mac");
    PathBuf::from(name)
}

/// The class a replayed or rebuilt vector takes: its catalogued one, or the parked class when
/// its embedding is not the one its (bound) row's digest names.
fn checked_class(catalog: &mut Catalog, seq: u64, emb: &[u8], digest: Option<Vec<u8>>) -> ClassId {
    if digest.as_deref() == Some(embedding_digest(emb).as_slice()) {
        return catalog.class_of.get(&seq).copied().unwrap_or(PARKED_CLASS);
    }
    eprintln!("memwarden-store: vector {seq} does not match its item row's digest; it is not searchable (see verify_log)");
    if let Some(id) = catalog.leave(seq) {
        catalog.insert(seq, id, Access::Nobody, PARKED_CLASS);
    }
    PARKED_CLASS
}

/// A stored embedding's values (little-endian `f32`s; a trailing partial value is ignored).
pub fn decode_f32(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

/// Deletes index files of the single-graph format earlier builds wrote (a cache this build
/// never reads; the partitions are rebuilt or loaded from their new files).
fn remove_legacy_files(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let p = e.path();
        if p.extension().is_some_and(|x| x == LEGACY_INDEX_EXTENSION) {
            let _ = std::fs::remove_file(p);
        }
    }
}

impl Vectors {
    /// An empty set of partitions that lives in memory only (never saved to a file): for a
    /// backend that rebuilds its indexes from the database ([`Vectors::insert`] and
    /// [`Vectors::update_access`] as rows are read), such as the PostgreSQL one. An access class
    /// gets its own graph once it holds `graph_min_count` vectors (`None`:
    /// [`CLASS_GRAPH_MIN_COUNT`]).
    pub fn in_memory(graph_min_count: Option<usize>, dims: Option<usize>) -> Self {
        Self {
            paths: Default::default(),
            dir: PathBuf::new(),
            graph_min_count: AtomicUsize::new(graph_min_count.unwrap_or(CLASS_GRAPH_MIN_COUNT)),
            mac_key: [0; 32],
            dims: RwLock::new(dims),
            parts: RwLock::new(HashMap::new()),
        }
    }

    /// Loads every partition for the store whose database `conn` is open: the catalog from the
    /// tables, each index from its file (brought in step with the catalog) or rebuilt. An
    /// access class gets its own graph once it holds `graph_min_count` vectors (`None`:
    /// [`CLASS_GRAPH_MIN_COUNT`]).
    ///
    /// Only rows the log commits to count: an item row that does not verify (`verify_row`),
    /// or whose vector key or embedding does not match it, is parked (never searchable) and
    /// reported by the store's reads and audit; an index file whose MAC (under `mac_key`, from
    /// the store's key) does not verify is rebuilt from the table.
    pub(crate) fn open(
        data_dir: &Path,
        conn: &Connection,
        graph_min_count: Option<usize>,
        mac_key: &[u8; 32],
        verify_row: &dyn Fn(&ItemRow) -> bool,
        progress: Progress<'_>,
    ) -> Result<Self, StoreError> {
        let dir = data_dir.join(INDEX_DIR);
        crate::keys::private_dir(&dir)?;
        remove_legacy_files(&dir);
        let dims: Option<i64> = conn.query_row("SELECT value FROM meta WHERE key = 'vector_dims'", [], |r| r.get(0)).optional()?;
        let dims = dims.map(|d| usize::try_from(d).map_err(|_| StoreError::Corrupt("vector_dims".into()))).transpose()?;
        let graph_min_count = graph_min_count.unwrap_or(CLASS_GRAPH_MIN_COUNT);
        let vectors = Self {
            paths: Default::default(),
            dir,
            graph_min_count: AtomicUsize::new(graph_min_count),
            mac_key: *mac_key,
            dims: RwLock::new(dims),
            parts: RwLock::new(HashMap::new()),
        };
        let Some(dims) = dims else {
            return Ok(vectors);
        };

        // 1. The catalog, from the tables.
        let total: i64 = conn.query_row("SELECT count(*) FROM vectors", [], |r| r.get(0))?;
        let total = usize::try_from(total).unwrap_or(0);
        let mut catalogs: HashMap<PartitionKey, (Catalog, u64)> = HashMap::new();
        {
            let columns: Vec<String> = ItemRow::COLUMNS.split(", ").map(|c| format!("i.{c}")).collect();
            let sql = format!("SELECT {}, v.seq, v.tenant, v.namespace FROM vectors v JOIN items i ON i.id = v.id ORDER BY v.seq", columns.join(", "));
            let mut stmt = conn.prepare(&sql)?;
            let mut rows = stmt.query([])?;
            let mut done = 0usize;
            while let Some(r) = rows.next()? {
                let row = ItemRow::read(r)?;
                let n = columns.len();
                let seq_raw: i64 = r.get(n)?;
                let seq = to_u64(seq_raw)?;
                let id = to_item_id(row.id.clone())?;
                let (vt, vn): (String, String) = (r.get(n + 1)?, r.get(n + 2)?);
                let tenant = TenantId::new(&vt).map_err(|e| StoreError::Corrupt(e.to_string()))?;
                let namespace = Namespace::new(&vn).map_err(|e| StoreError::Corrupt(e.to_string()))?;
                let trusted = verify_row(&row) && row.vseq == Some(seq_raw) && row.tenant == vt && row.namespace == vn;
                let access = match serde_json::from_str::<AccessView>(&row.record) {
                    Ok(view) if trusted => Access::of(&view.scope, view.audience.as_ref(), view.status),
                    _ => {
                        eprintln!("memwarden-store: item {id} does not match the verdict log; it is not searchable (see verify_log)");
                        Access::Nobody
                    }
                };
                let entry = catalogs.entry((tenant, namespace)).or_default();
                let class = entry.0.class_for(&access)?;
                entry.0.insert(seq, id, access, class);
                entry.1 = entry.1.max(seq);
                done += 1;
                if done.is_multiple_of(PROGRESS_EVERY_COUNT) {
                    progress("catalog", done, total);
                }
            }
            progress("catalog", done, total);
        }

        // 2. Each partition's index.
        let cfg = IndexConfig::with_dims(dims);
        for ((tenant, namespace), (mut catalog, max_seq)) in catalogs {
            let file = file_for(&vectors.dir, &tenant, &namespace);
            let loaded = Self::load_and_reconcile(conn, &file, dims, graph_min_count, &tenant, &namespace, &mut catalog, mac_key, progress);
            let (index, unsaved) = match loaded {
                Ok(Some(loaded)) => loaded,
                // No usable file (missing, damaged, from another dimension, or out of step):
                // rebuild from the table, and save it at the next save.
                Ok(None) | Err(_) => {
                    let index = Self::rebuild(conn, cfg, graph_min_count, &tenant, &namespace, &mut catalog, progress)?;
                    let count = index.len().max(1);
                    (index, count)
                }
            };
            debug_assert_eq!(index.len(), catalog.ids.len());
            let part = Partition::new(index, catalog, max_seq, unsaved, file);
            write(&vectors.parts).insert((tenant, namespace), Arc::new(part));
        }
        Ok(vectors)
    }

    /// Loads a partition's file and brings it in step with `catalog`: keys whose rows are gone
    /// leave, keys whose access changed since the save move to their current class, rows above
    /// the watermark are added. Returns the index and how many changes that took; `Ok(None)`:
    /// the file is missing or cannot be brought in step; the caller rebuilds.
    #[allow(clippy::too_many_arguments)]
    fn load_and_reconcile(
        conn: &Connection,
        file: &Path,
        dims: usize,
        graph_min_count: usize,
        tenant: &TenantId,
        namespace: &Namespace,
        catalog: &mut Catalog,
        mac_key: &[u8; 32],
        progress: Progress<'_>,
    ) -> Result<Option<(ClassedIndex, usize)>, StoreError> {
        if !file.exists() {
            return Ok(None);
        }
        // The file is a cache, but one that ranks: trust it only with the store's own MAC.
        let authentic = std::fs::read(file).ok().zip(std::fs::read_to_string(mac_file(file)).ok()).is_some_and(|(bytes, mac)| hex::encode(hmac_sha256(mac_key, &bytes)) == mac.trim());
        if !authentic {
            return Ok(None);
        }
        let max_seq = catalog.ids.keys().copied().max().unwrap_or(0);
        let (index, watermark) = ClassedIndex::load(file, dims, graph_min_count).map_err(index_err)?;
        if watermark > max_seq && !catalog.ids.is_empty() {
            // The file knows rows the table does not: the database was restored or rolled back.
            return Ok(None);
        }
        let mut changes = 0usize;
        for (key, class) in index.key_classes() {
            match catalog.class_of.get(&key) {
                // Rows erased since the save.
                None => {
                    index.remove(key).map_err(index_err)?;
                    changes += 1;
                }
                // Access changed since the save (revoked, quarantined, narrowed, widened).
                Some(&now) if now != class => {
                    index.move_to(key, now).map_err(index_err)?;
                    changes += 1;
                }
                Some(_) => {}
            }
        }
        // Rows committed after the save.
        let mut stmt = conn.prepare_cached(
            "SELECT v.seq, i.embedding, i.emb_digest FROM vectors v JOIN items i ON i.id = v.id WHERE v.tenant = ?1 AND v.namespace = ?2 AND v.seq > ?3 ORDER BY v.seq",
        )?;
        let mut rows = stmt.query(params![tenant.as_str(), namespace.as_str(), i64::try_from(watermark).unwrap_or(i64::MAX)])?;
        let mut replayed = 0usize;
        let expected = catalog.ids.len().saturating_sub(index.len());
        while let Some(r) = rows.next()? {
            let seq = to_u64(r.get(0)?)?;
            if !catalog.class_of.contains_key(&seq) {
                return Ok(None); // a row the catalog did not see: out of step
            }
            let emb: Vec<u8> = r.get(1)?;
            let class = checked_class(catalog, seq, &emb, r.get(2)?);
            index.add(seq, class, &decode_f32(&emb)).map_err(index_err)?;
            replayed += 1;
            if replayed.is_multiple_of(PROGRESS_EVERY_COUNT) {
                progress("replay", replayed, expected.max(replayed));
            }
        }
        progress("replay", replayed, expected.max(replayed));
        let label = format!("graphs {tenant}/{namespace}");
        index.finish_migrations(&|done, total| progress(&label, done, total)).map_err(index_err)?;
        // Every catalogued key must now be indexed in its class, and nothing else.
        if index.len() != catalog.ids.len() || catalog.class_of.iter().any(|(&k, &c)| index.class_of(k) != Some(c)) {
            return Ok(None);
        }
        Ok(Some((index, changes + replayed)))
    }

    fn rebuild(
        conn: &Connection,
        cfg: IndexConfig,
        graph_min_count: usize,
        tenant: &TenantId,
        namespace: &Namespace,
        catalog: &mut Catalog,
        progress: Progress<'_>,
    ) -> Result<ClassedIndex, StoreError> {
        let mut stmt = conn.prepare_cached(
            "SELECT v.seq, i.embedding, i.emb_digest FROM vectors v JOIN items i ON i.id = v.id WHERE v.tenant = ?1 AND v.namespace = ?2 ORDER BY v.seq",
        )?;
        let raw = stmt
            .query_map(params![tenant.as_str(), namespace.as_str()], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, Vec<u8>>(1)?, r.get::<_, Option<Vec<u8>>>(2)?)))?
            .collect::<Result<Vec<_>, _>>()?;
        let mut rows = Vec::with_capacity(raw.len());
        for (seq, emb, digest) in raw {
            let seq = to_u64(seq)?;
            if !catalog.class_of.contains_key(&seq) {
                return Err(StoreError::Corrupt(format!("vector {seq} is not catalogued")));
            }
            let class = checked_class(catalog, seq, &emb, digest);
            rows.push((seq, class, decode_f32(&emb)));
        }
        debug_assert_eq!(rows.len(), catalog.ids.len());
        let label = format!("rebuild {tenant}/{namespace}");
        ClassedIndex::build(cfg, graph_min_count, rows, &|done, total| progress(&label, done, total)).map_err(index_err)
    }

    /// The dimension every stored vector has (fixed by the first one).
    pub fn dims(&self) -> Option<usize> {
        *read(&self.dims)
    }

    /// Records the dimension of the first vector (the caller persists it in the same
    /// transaction as that vector).
    pub fn set_dims(&self, dims: usize) {
        let mut d = write(&self.dims);
        if d.is_none() {
            *d = Some(dims);
        }
    }

    /// Change the graph policy of every partition (and of those made later): see
    /// [`ClassedIndex::set_graph_min_count`]. A backend that loads its vectors at open with the
    /// policy at `usize::MAX` (blocks only: fast, searched exactly) serves at once and then
    /// builds the graphs with [`Vectors::build_graphs_step`].
    pub fn set_graph_min_count(&self, n: usize) {
        self.graph_min_count.store(n, Ordering::Relaxed);
        for p in read(&self.parts).values() {
            p.index.set_graph_min_count(n);
        }
    }

    /// One bounded step of graph building in the first partition that has work (at most
    /// `budget` rows moved, under that partition's index lock). Returns the rows still waiting
    /// in that partition (0: every partition is done).
    pub fn build_graphs_step(&self, budget: usize) -> usize {
        let parts: Vec<Arc<Partition>> = read(&self.parts).values().cloned().collect();
        for p in parts {
            match p.index.build_graphs_step(budget) {
                Ok(0) => continue,
                Ok(left) => return left,
                Err(e) => {
                    // The rows stay in blocks (searched exactly): correct, only slower.
                    eprintln!("memwarden-store: building a vector graph failed (searching exactly): {e}");
                    p.index.set_graph_min_count(usize::MAX);
                }
            }
        }
        0
    }

    fn partition(&self, tenant: &TenantId, namespace: &Namespace) -> Option<Arc<Partition>> {
        read(&self.parts).get(&(tenant.clone(), namespace.clone())).cloned()
    }

    /// Indexes a committed vector in its access class (writer thread only). Index and catalog
    /// change together under the catalog lock, so no search sees one without the other.
    pub fn insert(&self, v: NewVector) -> Result<(), StoreError> {
        let dims = self.dims().ok_or_else(|| StoreError::Corrupt("vector dimension unknown".into()))?;
        let part = match self.partition(&v.tenant, &v.namespace) {
            Some(p) => p,
            None => {
                let index = ClassedIndex::new(IndexConfig::with_dims(dims), self.graph_min_count.load(Ordering::Relaxed)).map_err(index_err)?;
                let part = Arc::new(Partition::new(index, Catalog::default(), 0, 0, file_for(&self.dir, &v.tenant, &v.namespace)));
                write(&self.parts).entry((v.tenant.clone(), v.namespace.clone())).or_insert(part).clone()
            }
        };
        let mut catalog = write(&part.catalog);
        let access = Access::of(&v.scope, v.audience.as_ref(), v.status);
        let added = catalog.class_for(&access).and_then(|class| {
            part.index.add(v.seq, class, &v.embedding).map_err(index_err)?;
            Ok(class)
        });
        let class = match added {
            Ok(class) => class,
            Err(e) => {
                part.degraded.store(true, Ordering::Release);
                return Err(e);
            }
        };
        catalog.leave(v.seq); // a replaced key (never for a fresh seq)
        catalog.insert(v.seq, v.id, access, class);
        part.max_seq.fetch_max(v.seq, Ordering::AcqRel);
        part.unsaved.fetch_add(1, Ordering::AcqRel);
        Ok(())
    }

    /// Applies a committed status/scope change (writer thread only): the key moves to the
    /// class of its new access — out of the old class first, so a narrowing is in force before
    /// any widening — or, when erased, leaves the index altogether. If the index refuses, the
    /// catalog has already dropped the key from every reader, and the partition searches the
    /// table exactly until the next open rebuilds it.
    pub fn update_access(&self, a: AccessChange) {
        let Some(part) = self.partition(&a.tenant, &a.namespace) else {
            return;
        };
        let mut catalog = write(&part.catalog);
        let Some(id) = catalog.leave(a.seq) else {
            return;
        };
        let outcome = if a.erased {
            part.index.remove(a.seq).map(|_| ()).map_err(index_err)
        } else {
            let access = Access::of(&a.scope, a.audience.as_ref(), a.status);
            catalog.class_for(&access).and_then(|class| {
                part.index.move_to(a.seq, class).map_err(index_err)?;
                catalog.insert(a.seq, id, access, class);
                Ok(())
            })
        };
        part.unsaved.fetch_add(1, Ordering::AcqRel);
        if let Err(e) = outcome {
            eprintln!("memwarden-store: applying an access change to the vector index failed, searching exactly until reopen: {e}");
            part.degraded.store(true, Ordering::Release);
        }
    }

    /// Saves partitions with unsaved changes: all of them (`force`, at close) or those past
    /// [`SAVE_AFTER_ADDS_COUNT`]. Writer thread only, so no insert races the watermark.
    pub(crate) fn save(&self, force: bool) -> Result<(), StoreError> {
        let parts: Vec<Arc<Partition>> = read(&self.parts).values().cloned().collect();
        for part in parts {
            let unsaved = part.unsaved.load(Ordering::Acquire);
            if unsaved == 0 || (!force && unsaved < SAVE_AFTER_ADDS_COUNT) || part.degraded.load(Ordering::Acquire) {
                continue;
            }
            part.index.save(&part.file, part.max_seq.load(Ordering::Acquire)).map_err(index_err)?;
            set_mode(&part.file, 0o600)?;
            let bytes = std::fs::read(&part.file).map_err(|error| StoreError::Io { path: part.file.display().to_string(), error })?;
            write_private(&mac_file(&part.file), hex::encode(hmac_sha256(&self.mac_key, &bytes)).as_bytes())?;
            part.unsaved.store(0, Ordering::Release);
        }
        Ok(())
    }

    /// Guarded search in one partition: `None` when the partition's index cannot be trusted
    /// (the caller falls back to an exact scan of the table). Only the access classes `reader`
    /// may read are searched — each walked (or scanned) on its own, unfiltered — and every
    /// candidate is checked against the catalog once more (`excluded`) before it is ranked.
    pub fn search(
        &self,
        tenant: &TenantId,
        namespace: &Namespace,
        query: &[f32],
        k: usize,
        reader: &PrincipalId,
    ) -> Result<Option<Found>, StoreError> {
        let Some(part) = self.partition(tenant, namespace) else {
            return Ok(Some(Found { hits: Vec::new() }));
        };
        if part.degraded.load(Ordering::Acquire) {
            return Ok(None);
        }
        let catalog = read(&part.catalog);
        let (classes, eligible) = catalog.eligible(reader);
        // A key the catalog no longer places in one of the reader's classes is never ranked.
        let excluded = |key: u64| catalog.class_of.get(&key).is_none_or(|c| classes.binary_search(c).is_err());
        let found = part.index.search(query, k, &classes, &excluded).map_err(index_err)?;
        let mut hits = Vec::with_capacity(found.hits.len());
        for n in found.hits {
            let id = *catalog.ids.get(&n.key).ok_or_else(|| StoreError::Corrupt(format!("index key {} has no catalog entry", n.key)))?;
            hits.push((id, n.score));
        }
        self.paths[path_slot(found.path)].fetch_add(1, Ordering::Relaxed);
        debug_assert!(hits.len() == k.min(eligible), "guarded search returned {} of min({k}, {eligible})", hits.len());
        Ok(Some(Found { hits }))
    }

    /// Searches answered so far by each path.
    pub fn path_counts(&self) -> Vec<(SearchPath, u64)> {
        PATHS.iter().map(|&p| (p, self.paths[path_slot(p)].load(Ordering::Relaxed))).collect()
    }

    /// Whether no vector is indexed.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Number of indexed vectors over all partitions.
    pub fn len(&self) -> usize {
        read(&self.parts).values().map(|p| p.index.len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pid(s: &str) -> PrincipalId {
        PrincipalId::new(s).unwrap()
    }

    fn scope(owner: &str, readers: Option<&[&str]>, visibility: Visibility) -> Scope {
        Scope {
            owner: pid(owner),
            readers: readers.map_or(Readers::All, |r| Readers::Only(r.iter().map(|s| pid(s)).collect())),
            visibility,
        }
    }

    fn put(c: &mut Catalog, key: u64, scope: &Scope, status: Status) {
        let access = Access::of(scope, None, status);
        let class = c.class_for(&access).unwrap();
        c.insert(key, ItemId::from_bytes([key as u8; 16]), access, class);
    }

    /// Only retrievable items enter a readable class, a scope's owner can always read what it
    /// wrote, one reader set is one class whoever wrote it, and counts are exact.
    #[test]
    fn classes_admit_exactly_what_readable_by_admits() {
        let mut c = Catalog::default();
        put(&mut c, 1, &scope("ana", None, Visibility::Shared), Status::Active);
        put(&mut c, 2, &scope("ana", Some(&["ben"]), Visibility::Private), Status::Active);
        put(&mut c, 3, &scope("ana", None, Visibility::Shared), Status::Quarantined);
        put(&mut c, 4, &scope("ana", None, Visibility::Shared), Status::Blocked);
        put(&mut c, 5, &scope("ana", None, Visibility::Revoked), Status::Active);
        put(&mut c, 6, &scope("ana", Some(&[]), Visibility::Private), Status::Revoked);
        put(&mut c, 7, &scope("ben", Some(&["ana"]), Visibility::Private), Status::Active);
        assert_eq!(c.ids.len(), 7, "every key maps back to its item");
        assert_eq!(c.class_of[&2], c.class_of[&7], "{{ana, ben}} is one class whoever owns the item");
        assert_eq!(c.eligible(&pid("ana")).1, 3);
        assert_eq!(c.eligible(&pid("ben")).1, 3);
        assert_eq!(c.eligible(&pid("cai")).1, 1);
        for key in 3..=6 {
            assert_eq!(c.class_of[&key], PARKED_CLASS, "key {key} must never be eligible");
        }
        for reader in ["ana", "ben", "cai"] {
            assert!(!c.eligible(&pid(reader)).0.contains(&PARKED_CLASS));
        }
        // Revoking key 2 moves it out of {ana, ben}; the class lives on with key 7 alone.
        assert_eq!(c.leave(2), Some(ItemId::from_bytes([2; 16])));
        put(&mut c, 2, &scope("ana", Some(&["ben"]), Visibility::Revoked), Status::Revoked);
        assert_eq!(c.eligible(&pid("ben")).1, 2);
        // Revoking key 7 too: the class disappears from both readers.
        c.leave(7);
        assert_eq!(c.eligible(&pid("ben")), (vec![SHARED_CLASS], 1));
        assert!(c.by_reader.is_empty());
    }

    #[test]
    fn class_ids_are_stable_and_distinct() {
        let a = Access::Only([pid("ana"), pid("ben")].into_iter().collect());
        let b = Access::Only([pid("ben"), pid("ana")].into_iter().collect());
        let c = Access::Only([pid("ana")].into_iter().collect());
        assert_eq!(a.class(), b.class());
        assert_ne!(a.class(), c.class());
        assert_eq!(Access::Nobody.class(), PARKED_CLASS);
        assert_eq!(Access::Everyone.class(), SHARED_CLASS);
        assert!(a.class() > SHARED_CLASS && c.class() > SHARED_CLASS);
    }
}
