//! [`AnnIndex`]: the HNSW index, guarded search and the exact oracle.

use std::cell::Cell;
use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, HashMap};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicUsize, Ordering as AtomicOrdering};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use serde::{Deserialize, Serialize};
use usearch::{Index, IndexOptions, MetricKind, ScalarKind};

use crate::config::{
    EXACT_FALLBACK_ELIGIBLE_PERCENT, EXACT_FALLBACK_MIN_ELIGIBLE_COUNT, IndexConfig, MAX_EXPANSION, MAX_K,
    MAX_VECTORS_COUNT, check,
};
use crate::IndexError;

/// usearch marks freed slots with this key, so it can never be stored.
pub const RESERVED_KEY: u64 = u64::MAX;
/// Slots reserved by a new, empty index.
const INITIAL_CAPACITY_COUNT: usize = 1024;
/// Items validated and inserted together by [`AnnIndex::add_many`] (bounds the memory a bulk
/// load holds besides the index itself).
const BULK_BATCH_COUNT: usize = 8192;

/// One search hit: a key and its cosine similarity to the query (higher is closer).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Neighbor {
    /// The caller's key.
    pub key: u64,
    /// Cosine similarity in `[-1, 1]`.
    pub score: f32,
}

/// Which algorithm produced a result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum SearchPath {
    /// Unguarded HNSW search ([`AnnIndex::search`]).
    Ann,
    /// HNSW search in which the permission filter admits nodes to the result set (ineligible
    /// nodes may be walked through but are never ranked).
    AnnFiltered,
    /// Exact scan of the eligible items, chosen up front because the caller's estimate said the
    /// filter is selective (few eligible items make graph search slow and unreliable).
    ExactSelective,
    /// Exact scan of the eligible items after the filtered HNSW search returned fewer than `k`
    /// hits (either fewer than `k` items are eligible, or the graph walk missed some).
    ExactAfterShortAnn,
    /// [`crate::ClassedIndex`]: at least one eligible access class was searched by an
    /// unfiltered walk of its own graph (every other eligible class from its block).
    ClassedAnn,
    /// [`crate::ClassedIndex`]: every eligible access class was scanned exactly from its
    /// contiguous vector block (or no class was eligible).
    ClassedExact,
    /// [`crate::ClassedIndex`]: a class graph's walk came back short (keys excluded after the
    /// walk, or removed nodes), so that class's keys were scored exactly.
    ClassedExactAfterShortAnn,
}

/// What [`AnnIndex::search_guarded`] returns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GuardedResult {
    /// At most `k` hits, best first, every one admitted by the filter.
    pub hits: Vec<Neighbor>,
    /// The path that produced `hits`.
    pub path: SearchPath,
}

/// Keys present in the index, in a dense array (the exact path scans it; persistence writes
/// it) with a position map for O(1) removal.
#[derive(Debug, Default)]
pub(crate) struct KeyTable {
    pub(crate) keys: Vec<u64>,
    pos: HashMap<u64, usize>,
    /// Removed slots usearch keeps for reuse: the graph holds `keys.len() + free_slots` nodes.
    pub(crate) free_slots: usize,
}

impl KeyTable {
    pub(crate) fn from_keys(keys: Vec<u64>, free_slots: usize) -> Option<Self> {
        let mut pos = HashMap::with_capacity(keys.len());
        for (i, &k) in keys.iter().enumerate() {
            if k == RESERVED_KEY || pos.insert(k, i).is_some() {
                return None;
            }
        }
        Some(Self { keys, pos, free_slots })
    }

    fn contains(&self, key: u64) -> bool {
        self.pos.contains_key(&key)
    }

    fn insert(&mut self, key: u64) {
        if !self.pos.contains_key(&key) {
            self.pos.insert(key, self.keys.len());
            self.keys.push(key);
        }
    }

    fn remove(&mut self, key: u64) {
        if let Some(i) = self.pos.remove(&key) {
            self.keys.swap_remove(i);
            if let Some(&moved) = self.keys.get(i) {
                self.pos.insert(moved, i);
            }
        }
    }

    fn heap_bytes(&self) -> usize {
        // hashbrown stores (key, value) plus one control byte per bucket.
        self.keys.capacity() * size_of::<u64>() + self.pos.capacity() * (size_of::<(u64, usize)>() + 1)
    }
}

/// Bounds concurrent graph operations to the scratch contexts usearch reserved (it fails,
/// rather than waits, when all are busy).
#[derive(Debug)]
struct Permits {
    free: Mutex<usize>,
    released: Condvar,
}

struct Permit<'a>(&'a Permits);

impl Permits {
    fn new(count: usize) -> Self {
        Self { free: Mutex::new(count), released: Condvar::new() }
    }

    fn acquire(&self) -> Permit<'_> {
        let mut free = lock(&self.free);
        while *free == 0 {
            free = self.released.wait(free).unwrap_or_else(PoisonError::into_inner);
        }
        *free -= 1;
        Permit(self)
    }
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        *lock(&self.0.free) += 1;
        self.0.released.notify_one();
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

// A poisoned lock only means another thread panicked between two usearch calls; each call
// leaves the index consistent, so the data is still usable.
fn read<T>(l: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(PoisonError::into_inner)
}

fn write<T>(l: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(PoisonError::into_inner)
}

/// An HNSW approximate-nearest-neighbour index over unit vectors (cosine similarity), keyed by
/// `u64`, backed by usearch. All methods take `&self`; the type is `Send + Sync`.
///
/// Vectors are L2-normalised on the way in (queries too), so inner product equals cosine
/// similarity and scores are comparable between the ANN and the exact paths.
///
/// Locking: `table` (keys) before `inner` (the graph), always in that order. Searches hold
/// `inner` shared; inserts and removes hold `table` exclusively and `inner` shared (usearch
/// synchronises concurrent inserts and searches itself); only growing the graph's capacity
/// takes `inner` exclusively, because usearch's `reserve` must not overlap any other call.
pub struct AnnIndex {
    pub(crate) cfg: IndexConfig,
    pub(crate) inner: RwLock<Index>,
    pub(crate) table: RwLock<KeyTable>,
    expansion_search: AtomicUsize,
    expansion_search_guarded: AtomicUsize,
    permits: Permits,
}

impl std::fmt::Debug for AnnIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AnnIndex").field("config", &self.config()).field("len", &self.len()).finish_non_exhaustive()
    }
}

impl AnnIndex {
    /// An empty index.
    pub fn new(cfg: IndexConfig) -> Result<Self, IndexError> {
        cfg.validate()?;
        let inner = Self::native(&cfg)?;
        inner
            .reserve_capacity_and_threads(INITIAL_CAPACITY_COUNT, cfg.max_concurrent_ops)
            .map_err(IndexError::backend)?;
        Ok(Self::wrap(cfg, inner, KeyTable::default()))
    }

    /// A usearch index for `cfg`: inner product on f32 (we normalise), one vector per key.
    /// Its own search expansion is set to 1 so that each call's `count` (which we set to
    /// `max(k, ef)`) is the effective `ef`: that makes `ef` a per-call value we can change
    /// safely while other threads search.
    pub(crate) fn native(cfg: &IndexConfig) -> Result<Index, IndexError> {
        let options = IndexOptions {
            dimensions: cfg.dims,
            metric: MetricKind::IP,
            quantization: ScalarKind::F32,
            connectivity: cfg.connectivity,
            expansion_add: cfg.expansion_add,
            expansion_search: 1,
            multi: false,
        };
        Index::new(&options).map_err(IndexError::backend)
    }

    pub(crate) fn wrap(cfg: IndexConfig, inner: Index, table: KeyTable) -> Self {
        Self {
            cfg,
            inner: RwLock::new(inner),
            table: RwLock::new(table),
            expansion_search: AtomicUsize::new(cfg.expansion_search),
            expansion_search_guarded: AtomicUsize::new(cfg.expansion_search_guarded),
            permits: Permits::new(cfg.max_concurrent_ops),
        }
    }

    /// Builds an index from `items` (a full rebuild, e.g. at start when no valid saved index
    /// exists), inserting on all available cores (usearch supports concurrent inserts).
    /// `progress(done, total)` is called on the calling thread after every batch. A key that
    /// appears twice keeps its last vector.
    pub fn build<I, V>(cfg: IndexConfig, items: I, progress: &dyn Fn(usize, usize)) -> Result<Self, IndexError>
    where
        I: IntoIterator<Item = (u64, V)>,
        I::IntoIter: ExactSizeIterator,
        V: AsRef<[f32]>,
    {
        let index = Self::new(cfg)?;
        index.add_many(items, progress)?;
        Ok(index)
    }

    /// The configuration, with the current search expansions.
    pub fn config(&self) -> IndexConfig {
        IndexConfig {
            expansion_search: self.expansion_search.load(AtomicOrdering::Relaxed),
            expansion_search_guarded: self.expansion_search_guarded.load(AtomicOrdering::Relaxed),
            ..self.cfg
        }
    }

    /// Vector dimensions.
    pub fn dims(&self) -> usize {
        self.cfg.dims
    }

    /// Changes `ef` for unguarded and for filtered (guarded) HNSW search; safe while other
    /// threads search.
    pub fn set_expansion_search(&self, unguarded: usize, guarded: usize) -> Result<(), IndexError> {
        check("expansion_search", unguarded, 1, MAX_EXPANSION)?;
        check("expansion_search_guarded", guarded, 1, MAX_EXPANSION)?;
        self.expansion_search.store(unguarded, AtomicOrdering::Relaxed);
        self.expansion_search_guarded.store(guarded, AtomicOrdering::Relaxed);
        Ok(())
    }

    /// Number of vectors.
    pub fn len(&self) -> usize {
        read(&self.table).keys.len()
    }

    /// `true` when the index holds no vector.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `true` when `key` is present.
    pub fn contains(&self, key: u64) -> bool {
        read(&self.table).contains(key)
    }

    /// All keys present, in no particular order.
    pub fn keys(&self) -> Vec<u64> {
        read(&self.table).keys.clone()
    }

    /// Bytes of memory the index uses: usearch's graph and vectors plus the key table.
    pub fn memory_bytes(&self) -> usize {
        let table = read(&self.table);
        let inner = read(&self.inner);
        inner.memory_usage() + table.heap_bytes()
    }

    /// The stored (normalised) vector for `key`.
    pub fn vector(&self, key: u64) -> Result<Option<Vec<f32>>, IndexError> {
        let inner = read(&self.inner);
        let mut buf = vec![0.0f32; self.cfg.dims];
        let found = inner.get(key, &mut buf).map_err(IndexError::backend)?;
        Ok((found > 0).then_some(buf))
    }

    /// Checks a vector and returns it L2-normalised.
    fn prepare(&self, vector: &[f32]) -> Result<Vec<f32>, IndexError> {
        normalized(self.cfg.dims, vector)
    }

    pub(crate) fn check_k(k: usize) -> Result<(), IndexError> {
        check("k", k, 0, MAX_K)
    }

    /// Inserts `vector` under `key`, replacing the key's previous vector if any. Rejects wrong
    /// dimensions, non-finite components, the zero vector and [`RESERVED_KEY`]. If inserting
    /// fails after the old vector was removed, the key is absent (never half-present).
    pub fn add(&self, key: u64, vector: &[f32]) -> Result<(), IndexError> {
        let v = self.prepare(vector)?;
        if key == RESERVED_KEY {
            return Err(IndexError::ReservedKey(key));
        }
        let mut table = write(&self.table);
        if table.contains(key) {
            self.remove_locked(&mut table, key)?;
        } else if table.keys.len() >= MAX_VECTORS_COUNT {
            return Err(IndexError::Full { max: MAX_VECTORS_COUNT });
        }
        self.ensure_capacity(&table, 1)?;
        self.raw_add(key, &v)?;
        table.insert(key);
        table.free_slots = table.free_slots.saturating_sub(1);
        Ok(())
    }

    /// Inserts many items (replacing existing keys), in batches, on all available cores.
    /// `progress(done, total)` is called on the calling thread after every batch.
    pub fn add_many<I, V>(&self, items: I, progress: &dyn Fn(usize, usize)) -> Result<(), IndexError>
    where
        I: IntoIterator<Item = (u64, V)>,
        I::IntoIter: ExactSizeIterator,
        V: AsRef<[f32]>,
    {
        let mut iter = items.into_iter();
        let total = iter.len();
        let threads = std::thread::available_parallelism().map_or(1, usize::from).min(self.cfg.max_concurrent_ops);
        {
            let table = read(&self.table);
            if table.keys.len().saturating_add(total) > MAX_VECTORS_COUNT {
                return Err(IndexError::Full { max: MAX_VECTORS_COUNT });
            }
            // Reserve exactly once up front rather than growing by half again per batch.
            self.ensure_capacity(&table, total)?;
        }
        progress(0, total);
        let mut done = 0usize;
        loop {
            let mut batch = Vec::with_capacity(BULK_BATCH_COUNT.min(total - done));
            for (key, vector) in iter.by_ref().take(BULK_BATCH_COUNT) {
                if key == RESERVED_KEY {
                    return Err(IndexError::ReservedKey(key));
                }
                batch.push((key, self.prepare(vector.as_ref())?));
            }
            if batch.is_empty() {
                break;
            }
            done += batch.len();
            self.add_batch(batch, threads)?;
            progress(done, total);
        }
        Ok(())
    }

    fn add_batch(&self, batch: Vec<(u64, Vec<f32>)>, threads: usize) -> Result<(), IndexError> {
        // Keep the last vector of a key that occurs twice in the batch.
        let mut last: HashMap<u64, usize> = HashMap::with_capacity(batch.len());
        for (i, (key, _)) in batch.iter().enumerate() {
            last.insert(*key, i);
        }
        let unique: Vec<(u64, Vec<f32>)> =
            batch.into_iter().enumerate().filter(|(i, (key, _))| last.get(key) == Some(i)).map(|(_, kv)| kv).collect();

        let mut table = write(&self.table);
        for (key, _) in &unique {
            if table.contains(*key) {
                self.remove_locked(&mut table, *key)?;
            }
        }
        if table.keys.len() + unique.len() > MAX_VECTORS_COUNT {
            return Err(IndexError::Full { max: MAX_VECTORS_COUNT });
        }
        self.ensure_capacity(&table, unique.len())?;

        let chunk = unique.len().div_ceil(threads.max(1)).max(1);
        let outcome: Result<(), IndexError> = std::thread::scope(|s| {
            let handles: Vec<_> = unique
                .chunks(chunk)
                .map(|part| {
                    s.spawn(move || -> Result<(), IndexError> {
                        for (key, v) in part {
                            self.raw_add(*key, v)?;
                        }
                        Ok(())
                    })
                })
                .collect();
            let mut first = Ok(());
            for h in handles {
                let r = h.join().unwrap_or_else(|_| Err(IndexError::Backend("an insert thread panicked".into())));
                if first.is_ok() {
                    first = r;
                }
            }
            first
        });
        // Record exactly what reached the graph, even after a failure.
        let inner = read(&self.inner);
        let mut added = 0usize;
        for (key, _) in &unique {
            if inner.contains(*key) {
                table.insert(*key);
                added += 1;
            }
        }
        table.free_slots = table.free_slots.saturating_sub(added);
        outcome
    }

    /// Grows usearch's capacity (exclusively) so `extra` more nodes fit without reusing slots.
    fn ensure_capacity(&self, table: &KeyTable, extra: usize) -> Result<(), IndexError> {
        let needed = table.keys.len() + table.free_slots + extra;
        if needed <= read(&self.inner).capacity() {
            return Ok(());
        }
        let inner = write(&self.inner);
        let capacity = inner.capacity();
        if needed <= capacity {
            return Ok(());
        }
        let grown = needed.max(capacity.saturating_add(capacity / 2)).max(INITIAL_CAPACITY_COUNT);
        inner.reserve_capacity_and_threads(grown, self.cfg.max_concurrent_ops).map_err(IndexError::backend)
    }

    fn raw_add(&self, key: u64, v: &[f32]) -> Result<(), IndexError> {
        let inner = read(&self.inner);
        let _permit = self.permits.acquire();
        inner.add(key, v).map_err(IndexError::backend)
    }

    /// Removes `key`; returns whether it was present. Removed keys never come back from any
    /// search (usearch marks the node free; it stays in the graph only as a waypoint).
    pub fn remove(&self, key: u64) -> Result<bool, IndexError> {
        let mut table = write(&self.table);
        if !table.contains(key) {
            return Ok(false);
        }
        self.remove_locked(&mut table, key)?;
        Ok(true)
    }

    fn remove_locked(&self, table: &mut KeyTable, key: u64) -> Result<(), IndexError> {
        let removed = read(&self.inner).remove(key).map_err(IndexError::backend)?;
        table.remove(key);
        table.free_slots += removed;
        Ok(())
    }

    /// Unguarded approximate search: the `k` (at most [`MAX_K`]) nearest keys, best first.
    pub fn search(&self, query: &[f32], k: usize) -> Result<Vec<Neighbor>, IndexError> {
        Self::check_k(k)?;
        let q = self.prepare(query)?;
        if k == 0 {
            return Ok(Vec::new());
        }
        let ef = self.expansion_search.load(AtomicOrdering::Relaxed);
        let matches = {
            let inner = read(&self.inner);
            let _permit = self.permits.acquire();
            inner.search(&q, k.max(ef)).map_err(IndexError::backend)?
        };
        Ok(to_neighbors(&matches.keys, &matches.distances, k))
    }

    /// Unfiltered walk with an already normalised query, returning up to `count` candidates
    /// (best first) rather than `k`: the caller post-checks them and needs spares.
    pub(crate) fn search_prepared(&self, q: &[f32], count: usize) -> Result<Vec<Neighbor>, IndexError> {
        if count == 0 {
            return Ok(Vec::new());
        }
        let matches = {
            let inner = read(&self.inner);
            let _permit = self.permits.acquire();
            inner.search(q, count).map_err(IndexError::backend)?
        };
        Ok(to_neighbors(&matches.keys, &matches.distances, count))
    }

    /// Guarded search: the `k` nearest keys among those `filter` admits, best first.
    ///
    /// - Eligibility is decided by `filter` before ranking: an ineligible key never enters the
    ///   candidate list (it is not a score penalty), and every returned hit is checked against
    ///   `filter` once more before it is returned.
    /// - Returns `min(k, eligible)` hits: if the filtered graph search comes back short, the
    ///   exact path scans every eligible key.
    /// - `eligible_estimate` (how many keys the caller expects `filter` to admit, if known)
    ///   selects the exact path up front when it is below
    ///   `max(`[`EXACT_FALLBACK_MIN_ELIGIBLE_COUNT`]`, `[`EXACT_FALLBACK_ELIGIBLE_PERCENT`]`% of len)`:
    ///   with few eligible nodes a graph walk must visit most of the graph anyway.
    ///
    /// `filter` runs on this thread, possibly inside usearch, while index locks are held: it
    /// must not call back into this index. If it panics, the panic is caught and the search
    /// fails with [`IndexError::FilterPanicked`] (nothing is returned).
    pub fn search_guarded(
        &self,
        query: &[f32],
        k: usize,
        filter: &dyn Fn(u64) -> bool,
        eligible_estimate: Option<usize>,
    ) -> Result<GuardedResult, IndexError> {
        Self::check_k(k)?;
        let q = self.prepare(query)?;
        let panicked = Cell::new(false);
        let admit = |key: u64| -> bool {
            catch_unwind(AssertUnwindSafe(|| filter(key))).unwrap_or_else(|_| {
                panicked.set(true);
                false
            })
        };
        let finish = |mut hits: Vec<Neighbor>, path: SearchPath| -> Result<GuardedResult, IndexError> {
            hits.retain(|h| h.key != RESERVED_KEY && admit(h.key)); // defence in depth
            if panicked.get() { Err(IndexError::FilterPanicked) } else { Ok(GuardedResult { hits, path }) }
        };
        if k == 0 {
            return finish(Vec::new(), SearchPath::AnnFiltered);
        }

        let len = self.len();
        let threshold = exact_threshold(len);
        if eligible_estimate.map_or(len, |e| e.min(len)) < threshold {
            let hits = self.exact_scan(&q, k, filter)?;
            return finish(hits, SearchPath::ExactSelective);
        }
        self.graph_then_exact(&q, k, filter, &admit, &panicked, finish)
    }

    /// Guarded search that always walks the graph with the filter first (no up-front exact
    /// decision: for callers that made it themselves), then scans the eligible keys exactly if
    /// the walk came back short. Same guarantees as [`AnnIndex::search_guarded`].
    pub fn search_filtered_graph(&self, query: &[f32], k: usize, filter: &dyn Fn(u64) -> bool) -> Result<GuardedResult, IndexError> {
        Self::check_k(k)?;
        let q = self.prepare(query)?;
        let panicked = Cell::new(false);
        let admit = |key: u64| -> bool {
            catch_unwind(AssertUnwindSafe(|| filter(key))).unwrap_or_else(|_| {
                panicked.set(true);
                false
            })
        };
        let finish = |mut hits: Vec<Neighbor>, path: SearchPath| -> Result<GuardedResult, IndexError> {
            hits.retain(|h| h.key != RESERVED_KEY && admit(h.key)); // defence in depth
            if panicked.get() { Err(IndexError::FilterPanicked) } else { Ok(GuardedResult { hits, path }) }
        };
        if k == 0 {
            return finish(Vec::new(), SearchPath::AnnFiltered);
        }
        self.graph_then_exact(&q, k, filter, &admit, &panicked, finish)
    }

    fn graph_then_exact(
        &self,
        q: &[f32],
        k: usize,
        filter: &dyn Fn(u64) -> bool,
        admit: &dyn Fn(u64) -> bool,
        panicked: &Cell<bool>,
        finish: impl Fn(Vec<Neighbor>, SearchPath) -> Result<GuardedResult, IndexError>,
    ) -> Result<GuardedResult, IndexError> {
        let ef = self.expansion_search_guarded.load(AtomicOrdering::Relaxed);
        let matches = {
            let inner = read(&self.inner);
            let _permit = self.permits.acquire();
            inner.filtered_search(q, k.max(ef), admit).map_err(IndexError::backend)?
        };
        if panicked.get() {
            return Err(IndexError::FilterPanicked);
        }
        let mut hits = to_neighbors(&matches.keys, &matches.distances, usize::MAX);
        hits.retain(|h| h.key != RESERVED_KEY && admit(h.key));
        hits.truncate(k);
        if hits.len() >= k {
            return finish(hits, SearchPath::AnnFiltered);
        }
        let hits = self.exact_scan(q, k, filter)?;
        finish(hits, SearchPath::ExactAfterShortAnn)
    }

    /// Brute-force search over every key: the oracle for recall measurements.
    pub fn exact_search(&self, query: &[f32], k: usize) -> Result<Vec<Neighbor>, IndexError> {
        self.exact_search_filtered(query, k, &|_| true)
    }

    /// Brute-force search over the keys `filter` admits: the oracle for guarded search.
    pub fn exact_search_filtered(
        &self,
        query: &[f32],
        k: usize,
        filter: &dyn Fn(u64) -> bool,
    ) -> Result<Vec<Neighbor>, IndexError> {
        Self::check_k(k)?;
        let q = self.prepare(query)?;
        if k == 0 {
            return Ok(Vec::new());
        }
        self.exact_scan(&q, k, filter)
    }

    /// Exact search over an explicit candidate list: the `k` nearest of `candidates`, best
    /// first. For callers that already hold the eligible keys (a store keeps them per reader),
    /// so a selective filter costs `O(candidates)` rather than a scan of the whole index. Keys
    /// not in the index are skipped; duplicates count once.
    pub fn search_among(&self, query: &[f32], k: usize, candidates: &mut dyn Iterator<Item = u64>) -> Result<Vec<Neighbor>, IndexError> {
        Self::check_k(k)?;
        let q = self.prepare(query)?;
        if k == 0 {
            return Ok(Vec::new());
        }
        let inner = read(&self.inner);
        let mut top = TopK::new(k);
        let mut seen = std::collections::HashSet::new();
        let mut buf = vec![0.0f32; self.cfg.dims];
        for key in candidates {
            if key == RESERVED_KEY || !seen.insert(key) {
                continue;
            }
            if inner.get(key, &mut buf).map_err(IndexError::backend)? == 0 {
                continue;
            }
            top.push(dot(&q, &buf), key);
        }
        Ok(top.into_sorted())
    }

    /// Scores every admitted key. Vectors are read back from usearch with `get` (a copy of one
    /// row per eligible key) rather than from a second contiguous copy kept here: a copy would
    /// cost `dims * 4` bytes per vector again (1.5 GB at 1M x 384), doubling the index's
    /// largest part, while the exact path only runs for selective filters, where the eligible
    /// rows are few.
    ///
    /// The filter runs inside one `catch_unwind` for the whole scan (not one per key: this
    /// loop is the hot path of selective guarded searches); a panic fails the search.
    pub(crate) fn exact_scan(&self, q: &[f32], k: usize, filter: &dyn Fn(u64) -> bool) -> Result<Vec<Neighbor>, IndexError> {
        let table = read(&self.table);
        let inner = read(&self.inner);
        let scan = || -> Result<Vec<Neighbor>, IndexError> {
            let mut top = TopK::new(k);
            let mut buf = vec![0.0f32; self.cfg.dims];
            for &key in &table.keys {
                if !filter(key) {
                    continue;
                }
                if inner.get(key, &mut buf).map_err(IndexError::backend)? == 0 {
                    continue;
                }
                top.push(dot(q, &buf), key);
            }
            Ok(top.into_sorted())
        };
        catch_unwind(AssertUnwindSafe(scan)).unwrap_or(Err(IndexError::FilterPanicked))
    }
}

/// Checks a vector against `dims` and returns it L2-normalised (so inner product is cosine).
pub(crate) fn normalized(dims: usize, vector: &[f32]) -> Result<Vec<f32>, IndexError> {
    if vector.len() != dims {
        return Err(IndexError::WrongDims { expected: dims, got: vector.len() });
    }
    if let Some(position) = vector.iter().position(|x| !x.is_finite()) {
        return Err(IndexError::NonFinite { position });
    }
    let norm = vector.iter().map(|&x| f64::from(x) * f64::from(x)).sum::<f64>().sqrt();
    if norm == 0.0 || !norm.is_finite() {
        return Err(IndexError::ZeroVector);
    }
    Ok(vector.iter().map(|&x| (f64::from(x) / norm) as f32).collect())
}

/// Below this many eligible keys, guarded search uses the exact path up front.
pub fn exact_threshold(len: usize) -> usize {
    EXACT_FALLBACK_MIN_ELIGIBLE_COUNT.max(len / 100 * EXACT_FALLBACK_ELIGIBLE_PERCENT)
}

fn to_neighbors(keys: &[u64], distances: &[f32], k: usize) -> Vec<Neighbor> {
    // usearch's inner-product distance is `1 - dot`.
    keys.iter()
        .zip(distances)
        .filter(|(key, _)| **key != RESERVED_KEY)
        .take(k)
        .map(|(&key, &d)| Neighbor { key, score: 1.0 - d })
        .collect()
}

/// Dot product with eight independent accumulators (vectorises without target features, and
/// stays tolerable in unoptimised test builds).
/// Inner product of two vectors of one length (cosine similarity for unit vectors).
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut acc = [0.0f32; 8];
    let body = n - n % 8;
    let mut i = 0;
    while i < body {
        acc[0] += a[i] * b[i];
        acc[1] += a[i + 1] * b[i + 1];
        acc[2] += a[i + 2] * b[i + 2];
        acc[3] += a[i + 3] * b[i + 3];
        acc[4] += a[i + 4] * b[i + 4];
        acc[5] += a[i + 5] * b[i + 5];
        acc[6] += a[i + 6] * b[i + 6];
        acc[7] += a[i + 7] * b[i + 7];
        i += 8;
    }
    let mut tail = 0.0;
    while i < n {
        tail += a[i] * b[i];
        i += 1;
    }
    (acc[0] + acc[4]) + (acc[1] + acc[5]) + (acc[2] + acc[6]) + (acc[3] + acc[7]) + tail
}

/// A hit ordered by rank: higher score first, then smaller key.
#[derive(Debug, Clone, Copy)]
struct Ranked(f32, u64);

impl PartialEq for Ranked {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Ranked {}
impl PartialOrd for Ranked {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Ranked {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.total_cmp(&other.0).then_with(|| other.1.cmp(&self.1))
    }
}

/// The `k` best of a stream of `(score, key)`, ties broken towards the smaller key.
pub struct TopK {
    k: usize,
    heap: BinaryHeap<Reverse<Ranked>>,
}

impl TopK {
    /// Keeps the best `k`.
    pub fn new(k: usize) -> Self {
        Self { k, heap: BinaryHeap::with_capacity(k + 1) }
    }

    /// Whether `push(score, key)` would keep the hit (lets a scan skip a costlier check for
    /// rows that cannot enter the top `k` anyway).
    pub fn would_accept(&self, score: f32, key: u64) -> bool {
        self.heap.len() < self.k || self.heap.peek().is_some_and(|w| Ranked(score, key) > w.0)
    }

    /// Offer one hit.
    pub fn push(&mut self, score: f32, key: u64) {
        let r = Ranked(score, key);
        if self.heap.len() < self.k {
            self.heap.push(Reverse(r));
        } else if self.heap.peek().is_some_and(|w| r > w.0) {
            self.heap.pop();
            self.heap.push(Reverse(r));
        }
    }

    /// The kept hits, best first.
    pub fn into_sorted(self) -> Vec<Neighbor> {
        let mut v: Vec<Ranked> = self.heap.into_iter().map(|r| r.0).collect();
        v.sort_by(|a, b| b.cmp(a));
        v.into_iter().map(|Ranked(score, key)| Neighbor { key, score }).collect()
    }
}
