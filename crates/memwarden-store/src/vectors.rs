//! The vector side of the embedded store: one HNSW index ([`AnnIndex`]) per (tenant,
//! namespace) partition, kept in step with the `vectors` table, and an in-memory eligibility
//! catalog so the permission filter can run on index keys *during* the graph walk.
//!
//! Invariants:
//! - The SQLite `vectors` table is the source of truth; index files are a cache. A vector is
//!   added to its index after its transaction commits and before the commit is acknowledged,
//!   so a caller that wrote an item finds it in its next search.
//! - Keys are `vectors.seq` (AUTOINCREMENT, never reused). An index file records the highest
//!   seq it holds (its watermark); opening replays every row above it and removes keys whose
//!   rows are gone, or rebuilds from the table when the file is missing, damaged or does not
//!   match. A crash between a commit and a save therefore loses nothing.
//! - A partition never spans tenants, so a query cannot even reach another tenant's vectors.
//! - The catalog only admits a key once the key's vector is in the index, and it is the filter,
//!   not a score: ineligible keys never enter a result. The store re-checks every hit against the
//!   item it reads back ([`MemoryItem::readable_by`]).

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use memwarden_core::prelude::*;
use memwarden_index::{AnnIndex, IndexConfig, SearchPath, exact_threshold};
use rusqlite::{Connection, OptionalExtension, params};
use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::StoreError;

/// Directory (under the data directory) holding one index file per partition.
pub(crate) const INDEX_DIR: &str = "index";
/// A partition's index is saved after this many inserts since its last save (and always at a
/// clean close). Bounds what a crash makes the next open replay.
pub const SAVE_AFTER_ADDS_COUNT: usize = 50_000;
/// Progress is reported every this many rows while loading or rebuilding.
const PROGRESS_EVERY_COUNT: usize = 10_000;

/// Progress callback: (stage, done, total).
pub type Progress<'a> = &'a dyn Fn(&str, usize, usize);

type PartitionKey = (TenantId, Namespace);

/// A vector committed in the current group, to be indexed once the transaction commits.
#[derive(Debug)]
pub(crate) struct NewVector {
    pub(crate) seq: u64,
    pub(crate) id: ItemId,
    pub(crate) tenant: TenantId,
    pub(crate) namespace: Namespace,
    pub(crate) embedding: Vec<f32>,
    pub(crate) scope: Scope,
    pub(crate) status: Status,
}

/// A committed change of an indexed item's status or scope, to apply to the catalog.
#[derive(Debug)]
pub(crate) struct AccessChange {
    pub(crate) seq: u64,
    pub(crate) tenant: TenantId,
    pub(crate) namespace: Namespace,
    pub(crate) scope: Scope,
    pub(crate) status: Status,
    /// The item was erased: its key leaves the catalog and the index altogether.
    pub(crate) erased: bool,
}

/// Who may read which key of a partition: exactly the keys whose item is retrievable, split
/// into those everyone in the namespace may read and those only listed principals may read.
#[derive(Debug, Default)]
struct Eligibility {
    ids: HashMap<u64, ItemId>,
    shared: HashSet<u64>,
    by_reader: HashMap<PrincipalId, HashSet<u64>>,
}

impl Eligibility {
    fn insert(&mut self, key: u64, id: ItemId, scope: &Scope, status: Status) {
        self.ids.insert(key, id);
        if !status.retrievable() || scope.visibility == Visibility::Revoked {
            return;
        }
        match &scope.readers {
            Readers::All => {
                self.shared.insert(key);
            }
            Readers::Only(set) => {
                for p in set.iter().chain(std::iter::once(&scope.owner)) {
                    self.by_reader.entry(p.clone()).or_default().insert(key);
                }
            }
        }
    }

    /// Replaces a key's access (status or scope changed). The key leaves every reader set first,
    /// so a narrowing takes effect before any widening could.
    fn update(&mut self, key: u64, scope: &Scope, status: Status) {
        let Some(id) = self.ids.get(&key).copied() else {
            return;
        };
        self.shared.remove(&key);
        self.by_reader.retain(|_, keys| {
            keys.remove(&key);
            !keys.is_empty()
        });
        self.insert(key, id, scope, status);
    }

    /// Forgets a key (its row was erased).
    fn remove(&mut self, key: u64) {
        self.ids.remove(&key);
        self.shared.remove(&key);
        self.by_reader.retain(|_, keys| {
            keys.remove(&key);
            !keys.is_empty()
        });
    }

    /// How many keys `reader` may read (exact: the two sets are disjoint).
    fn eligible_count(&self, reader: &PrincipalId) -> usize {
        self.shared.len() + self.by_reader.get(reader).map_or(0, HashSet::len)
    }
}

#[derive(Debug)]
struct Partition {
    index: AnnIndex,
    elig: RwLock<Eligibility>,
    /// Highest seq added.
    max_seq: AtomicU64,
    /// Inserts since the last save.
    unsaved: AtomicUsize,
    /// An insert failed after its row committed: searches use the exact path over the table
    /// until the next open rebuilds the index.
    degraded: AtomicBool,
    file: PathBuf,
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
    status: Status,
}

/// What a partition search found: (key's item, similarity), best first.
pub(crate) struct Found {
    pub(crate) hits: Vec<(ItemId, f32)>,
}

/// Every partition of one store.
#[derive(Debug)]
pub(crate) struct Vectors {
    /// Searches answered per [`SearchPath`] (Ann, AnnFiltered, ExactSelective, ExactAfterShortAnn).
    paths: [AtomicU64; 4],
    dir: PathBuf,
    dims: RwLock<Option<usize>>,
    parts: RwLock<HashMap<PartitionKey, Arc<Partition>>>,
}

fn file_for(dir: &Path, tenant: &TenantId, namespace: &Namespace) -> PathBuf {
    let mut h = Sha256::new();
    h.update(tenant.as_str().as_bytes());
    h.update([0u8]);
    h.update(namespace.as_str().as_bytes());
    let digest = h.finalize();
    dir.join(format!("{}.usearch", hex::encode(&digest[..16])))
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
    match p {
        SearchPath::Ann => 0,
        SearchPath::AnnFiltered => 1,
        SearchPath::ExactSelective => 2,
        SearchPath::ExactAfterShortAnn => 3,
    }
}

pub(crate) fn decode_f32(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

impl Vectors {
    /// Loads every partition for the store whose database `conn` is open: the catalog from the
    /// tables, each index from its file (replaying rows above its watermark) or rebuilt.
    pub(crate) fn open(data_dir: &Path, conn: &Connection, progress: Progress<'_>) -> Result<Self, StoreError> {
        let dir = data_dir.join(INDEX_DIR);
        std::fs::create_dir_all(&dir).map_err(|error| StoreError::Io { path: dir.display().to_string(), error })?;
        let dims: Option<i64> = conn.query_row("SELECT value FROM meta WHERE key = 'vector_dims'", [], |r| r.get(0)).optional()?;
        let dims = dims.map(|d| usize::try_from(d).map_err(|_| StoreError::Corrupt("vector_dims".into()))).transpose()?;
        let vectors = Self { paths: Default::default(), dir, dims: RwLock::new(dims), parts: RwLock::new(HashMap::new()) };
        let Some(dims) = dims else {
            return Ok(vectors);
        };

        // 1. The catalog, from the tables.
        let total: i64 = conn.query_row("SELECT count(*) FROM vectors", [], |r| r.get(0))?;
        let total = usize::try_from(total).unwrap_or(0);
        let mut catalogs: HashMap<PartitionKey, (Eligibility, u64)> = HashMap::new();
        {
            let mut stmt = conn.prepare("SELECT v.seq, v.id, v.tenant, v.namespace, i.record FROM vectors v JOIN items i ON i.id = v.id ORDER BY v.seq")?;
            let mut rows = stmt.query([])?;
            let mut done = 0usize;
            while let Some(r) = rows.next()? {
                let seq = to_u64(r.get(0)?)?;
                let id = to_item_id(r.get(1)?)?;
                let tenant = TenantId::new(&r.get::<_, String>(2)?).map_err(|e| StoreError::Corrupt(e.to_string()))?;
                let namespace = Namespace::new(&r.get::<_, String>(3)?).map_err(|e| StoreError::Corrupt(e.to_string()))?;
                let record: String = r.get(4)?;
                let view: AccessView = serde_json::from_str(&record).map_err(|e| StoreError::Corrupt(format!("item {id}: {e}")))?;
                let entry = catalogs.entry((tenant, namespace)).or_default();
                entry.0.insert(seq, id, &view.scope, view.status);
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
        for ((tenant, namespace), (elig, max_seq)) in catalogs {
            let file = file_for(&vectors.dir, &tenant, &namespace);
            let index = match Self::load_and_replay(conn, &file, dims, &tenant, &namespace, &elig, max_seq, progress) {
                Ok(Some(index)) => index,
                // No usable file (missing, damaged, from another dimension, or out of step):
                // rebuild from the table.
                Ok(None) | Err(_) => Self::rebuild(conn, cfg, &tenant, &namespace, elig.ids.len(), progress)?,
            };
            debug_assert_eq!(index.len(), elig.ids.len());
            let part = Partition {
                index,
                elig: RwLock::new(elig),
                max_seq: AtomicU64::new(max_seq),
                unsaved: AtomicUsize::new(0),
                degraded: AtomicBool::new(false),
                file,
            };
            write(&vectors.parts).insert((tenant, namespace), Arc::new(part));
        }
        Ok(vectors)
    }

    /// `Ok(None)`: the file is missing or cannot be brought in step; the caller rebuilds.
    #[allow(clippy::too_many_arguments)]
    fn load_and_replay(
        conn: &Connection,
        file: &Path,
        dims: usize,
        tenant: &TenantId,
        namespace: &Namespace,
        elig: &Eligibility,
        max_seq: u64,
        progress: Progress<'_>,
    ) -> Result<Option<AnnIndex>, StoreError> {
        if !file.exists() {
            return Ok(None);
        }
        let (index, watermark) = AnnIndex::load(file, dims).map_err(index_err)?;
        if watermark > max_seq {
            // The file knows rows the table does not: the database was restored or rolled back.
            return Ok(None);
        }
        // Rows erased since the save.
        for key in index.keys() {
            if !elig.ids.contains_key(&key) {
                index.remove(key).map_err(index_err)?;
            }
        }
        // Rows committed after the save.
        let mut stmt = conn.prepare_cached(
            "SELECT v.seq, i.embedding FROM vectors v JOIN items i ON i.id = v.id WHERE v.tenant = ?1 AND v.namespace = ?2 AND v.seq > ?3 ORDER BY v.seq",
        )?;
        let mut rows = stmt.query(params![tenant.as_str(), namespace.as_str(), i64::try_from(watermark).unwrap_or(i64::MAX)])?;
        let mut replayed = 0usize;
        let expected = elig.ids.len().saturating_sub(index.len());
        while let Some(r) = rows.next()? {
            let seq = to_u64(r.get(0)?)?;
            let emb: Vec<u8> = r.get(1)?;
            index.add(seq, &decode_f32(&emb)).map_err(index_err)?;
            replayed += 1;
            if replayed.is_multiple_of(PROGRESS_EVERY_COUNT) {
                progress("replay", replayed, expected.max(replayed));
            }
        }
        progress("replay", replayed, expected.max(replayed));
        // Every catalogued key must now be indexed, and nothing else.
        if index.len() != elig.ids.len() || elig.ids.keys().any(|k| !index.contains(*k)) {
            return Ok(None);
        }
        Ok(Some(index))
    }

    fn rebuild(conn: &Connection, cfg: IndexConfig, tenant: &TenantId, namespace: &Namespace, count: usize, progress: Progress<'_>) -> Result<AnnIndex, StoreError> {
        let mut stmt = conn.prepare_cached("SELECT v.seq, i.embedding FROM vectors v JOIN items i ON i.id = v.id WHERE v.tenant = ?1 AND v.namespace = ?2 ORDER BY v.seq")?;
        let rows = stmt
            .query_map(params![tenant.as_str(), namespace.as_str()], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, Vec<u8>>(1)?)))?
            .map(|r| r.map_err(StoreError::from).and_then(|(seq, emb)| Ok((to_u64(seq)?, decode_f32(&emb)))))
            .collect::<Result<Vec<_>, _>>()?;
        debug_assert_eq!(rows.len(), count);
        let label = format!("rebuild {tenant}/{namespace}");
        AnnIndex::build(cfg, rows, &|done, total| progress(&label, done, total)).map_err(index_err)
    }

    /// The dimension every stored vector has (fixed by the first one).
    pub(crate) fn dims(&self) -> Option<usize> {
        *read(&self.dims)
    }

    /// Records the dimension of the first vector (the caller persists it in the same
    /// transaction as that vector).
    pub(crate) fn set_dims(&self, dims: usize) {
        let mut d = write(&self.dims);
        if d.is_none() {
            *d = Some(dims);
        }
    }

    fn partition(&self, tenant: &TenantId, namespace: &Namespace) -> Option<Arc<Partition>> {
        read(&self.parts).get(&(tenant.clone(), namespace.clone())).cloned()
    }

    /// Indexes a committed vector (writer thread only). The key is admitted to the catalog only
    /// after its vector is in the index.
    pub(crate) fn insert(&self, v: NewVector) -> Result<(), StoreError> {
        let dims = self.dims().ok_or_else(|| StoreError::Corrupt("vector dimension unknown".into()))?;
        let part = match self.partition(&v.tenant, &v.namespace) {
            Some(p) => p,
            None => {
                let index = AnnIndex::new(IndexConfig::with_dims(dims)).map_err(index_err)?;
                let part = Arc::new(Partition {
                    index,
                    elig: RwLock::new(Eligibility::default()),
                    max_seq: AtomicU64::new(0),
                    unsaved: AtomicUsize::new(0),
                    degraded: AtomicBool::new(false),
                    file: file_for(&self.dir, &v.tenant, &v.namespace),
                });
                write(&self.parts).entry((v.tenant.clone(), v.namespace.clone())).or_insert(part).clone()
            }
        };
        if let Err(e) = part.index.add(v.seq, &v.embedding) {
            part.degraded.store(true, Ordering::Release);
            return Err(index_err(e));
        }
        write(&part.elig).insert(v.seq, v.id, &v.scope, v.status);
        part.max_seq.fetch_max(v.seq, Ordering::AcqRel);
        part.unsaved.fetch_add(1, Ordering::AcqRel);
        Ok(())
    }

    /// Applies a committed status/scope change to the catalog (writer thread only). The vector
    /// stays in the graph as a waypoint; the filter no longer admits it.
    pub(crate) fn update_access(&self, a: AccessChange) {
        if let Some(part) = self.partition(&a.tenant, &a.namespace) {
            if a.erased {
                // Out of the catalog first (no search admits it), then out of the graph.
                write(&part.elig).remove(a.seq);
                if let Err(e) = part.index.remove(a.seq) {
                    eprintln!("memwarden-store: removing an erased vector failed, searching exactly until reopen: {e}");
                    part.degraded.store(true, Ordering::Release);
                }
            } else {
                write(&part.elig).update(a.seq, &a.scope, a.status);
            }
        }
    }

    /// Saves partitions with unsaved inserts: all of them (`force`, at close) or those past
    /// [`SAVE_AFTER_ADDS_COUNT`]. Writer thread only, so no insert races the watermark.
    pub(crate) fn save(&self, force: bool) -> Result<(), StoreError> {
        let parts: Vec<Arc<Partition>> = read(&self.parts).values().cloned().collect();
        for part in parts {
            let unsaved = part.unsaved.load(Ordering::Acquire);
            if unsaved == 0 || (!force && unsaved < SAVE_AFTER_ADDS_COUNT) || part.degraded.load(Ordering::Acquire) {
                continue;
            }
            part.index.save(&part.file, part.max_seq.load(Ordering::Acquire)).map_err(index_err)?;
            part.unsaved.store(0, Ordering::Release);
        }
        Ok(())
    }

    /// Guarded search in one partition: `None` when the partition's index cannot be trusted
    /// (the caller falls back to an exact scan of the table). The filter admits exactly the
    /// keys `reader` may read; it decides eligibility before ranking.
    pub(crate) fn search(
        &self,
        tenant: &TenantId,
        namespace: &Namespace,
        query: &[f32],
        k: usize,
        reader: &PrincipalId,
        exact_below: Option<usize>,
    ) -> Result<Option<Found>, StoreError> {
        let Some(part) = self.partition(tenant, namespace) else {
            return Ok(Some(Found { hits: Vec::new() }));
        };
        if part.degraded.load(Ordering::Acquire) {
            return Ok(None);
        }
        let elig = read(&part.elig);
        let own = elig.by_reader.get(reader);
        let eligible = elig.eligible_count(reader);
        let threshold = exact_below.unwrap_or_else(|| exact_threshold(part.index.len()));
        let (neighbors, path) = if eligible < threshold {
            // Selective: score exactly the keys this reader may read.
            let mut keys = elig.shared.iter().chain(own.into_iter().flatten()).copied();
            (part.index.search_among(query, k, &mut keys).map_err(index_err)?, SearchPath::ExactSelective)
        } else {
            let admit = |key: u64| elig.shared.contains(&key) || own.is_some_and(|s| s.contains(&key));
            // The exact-or-graph decision is made here (with the exact count); the index only
            // falls back to an exact scan if the filtered walk comes back short.
            let r = part.index.search_filtered_graph(query, k, &admit).map_err(index_err)?;
            (r.hits, r.path)
        };
        let mut hits = Vec::with_capacity(neighbors.len());
        for n in neighbors {
            let id = *elig.ids.get(&n.key).ok_or_else(|| StoreError::Corrupt(format!("index key {} has no catalog entry", n.key)))?;
            hits.push((id, n.score));
        }
        self.paths[path_slot(path)].fetch_add(1, Ordering::Relaxed);
        debug_assert!(hits.len() == k.min(eligible), "guarded search returned {} of min({k}, {eligible})", hits.len());
        Ok(Some(Found { hits }))
    }

    /// Searches answered so far by each path.
    pub(crate) fn path_counts(&self) -> Vec<(SearchPath, u64)> {
        [SearchPath::Ann, SearchPath::AnnFiltered, SearchPath::ExactSelective, SearchPath::ExactAfterShortAnn]
            .into_iter()
            .map(|p| (p, self.paths[path_slot(p)].load(Ordering::Relaxed)))
            .collect()
    }

    /// Number of indexed vectors over all partitions.
    pub(crate) fn len(&self) -> usize {
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

    /// Only retrievable items enter the catalog's reader sets, and a scope's owner can always
    /// read what it wrote; counts are exact.
    #[test]
    fn eligibility_admits_exactly_what_readable_by_admits() {
        let mut e = Eligibility::default();
        let id = |n: u8| ItemId::from_bytes([n; 16]);
        e.insert(1, id(1), &scope("ana", None, Visibility::Shared), Status::Active);
        e.insert(2, id(2), &scope("ana", Some(&["ben"]), Visibility::Private), Status::Active);
        e.insert(3, id(3), &scope("ana", None, Visibility::Shared), Status::Quarantined);
        e.insert(4, id(4), &scope("ana", None, Visibility::Shared), Status::Blocked);
        e.insert(5, id(5), &scope("ana", None, Visibility::Revoked), Status::Active);
        e.insert(6, id(6), &scope("ana", Some(&[]), Visibility::Private), Status::Revoked);
        assert_eq!(e.ids.len(), 6, "every key maps back to its item");
        assert_eq!(e.eligible_count(&pid("ana")), 2);
        assert_eq!(e.eligible_count(&pid("ben")), 2);
        assert_eq!(e.eligible_count(&pid("cai")), 1);
        for key in 3..=6 {
            assert!(!e.shared.contains(&key) && e.by_reader.values().all(|s| !s.contains(&key)), "key {key} must never be eligible");
        }
    }
}
