//! [`ClassedIndex`]: one namespace's vectors partitioned by **access class**, so that a
//! guarded search walks only graphs whose every member the caller may read.
//!
//! The caller (the store) decides what a class means: everything with the same set of
//! permitted readers shares a class id. A search names the classes the reader may read; each is
//! searched on its own — a class with at least `graph_min_count` vectors by an *unfiltered*
//! walk of its own HNSW graph, a smaller one by an exact scan of a contiguous in-memory block —
//! and the per-class top-k lists are merged. No filter runs during a walk, so a selective
//! permission costs a walk of a smaller graph rather than a walk of the whole graph through
//! ineligible nodes.
//!
//! Invariants:
//! - Every key is in exactly one class (`key_class`), and within it in exactly one of the
//!   graph or the block. A hit is returned only if `key_class` says it belongs to a class the
//!   caller named and the caller's `excluded` check passes (checked after the walk, on
//!   candidates, never inside it).
//! - [`ClassedIndex::move_to`] takes a key out of its old class (graph or block) before it
//!   enters the new one, under one exclusive lock: a narrowing is applied before any widening
//!   could be, and no search sees the key in both or in the wrong one.
//! - [`PARKED_CLASS`] holds keys nobody may read (kept so that a later change can move them
//!   back without re-reading the vector); it never gets a graph and is never searched.
//! - A search returns `min(k, eligible)` hits: a class walk that comes back short after the
//!   post-checks is replaced by an exact scan of that class.

use std::collections::{BTreeSet, HashMap};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use serde::{Deserialize, Serialize};

use crate::config::{IndexConfig, MAX_CLASSES_COUNT, MAX_EXPANSION, MAX_VECTORS_COUNT, check};
use crate::index::{AnnIndex, Neighbor, RESERVED_KEY, SearchPath, TopK, dot, normalized};
use crate::IndexError;

/// An access class id, chosen by the caller (the store derives it from the reader set).
pub type ClassId = u64;

/// The class of keys nobody may read (non-retrievable items): held, never searched, never
/// given a graph.
pub const PARKED_CLASS: ClassId = 0;

/// Rows moved from a class's block into its new graph per change (add, move, remove), so that
/// promoting a class that just crossed `graph_min_count` costs the writer a bounded amount of
/// work per call instead of one long stall (until then the block is still searched exactly).
pub const MIGRATE_PER_CHANGE_COUNT: usize = 8;

fn read<T>(l: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(PoisonError::into_inner)
}

fn write<T>(l: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(PoisonError::into_inner)
}

/// Normalised vectors of one class, row after row, with their keys: the exact path reads it
/// front to back (one contiguous pass, no per-row lookups).
#[derive(Debug, Default)]
pub(crate) struct Block {
    pub(crate) keys: Vec<u64>,
    pos: HashMap<u64, usize>,
    pub(crate) rows: Vec<f32>,
}

impl Block {
    /// A block from saved parts; `None` if the lengths disagree or a key repeats.
    pub(crate) fn from_parts(dims: usize, keys: Vec<u64>, rows: Vec<f32>) -> Option<Self> {
        if rows.len() != keys.len().checked_mul(dims)? {
            return None;
        }
        let mut pos = HashMap::with_capacity(keys.len());
        for (i, &k) in keys.iter().enumerate() {
            if k == RESERVED_KEY || pos.insert(k, i).is_some() {
                return None;
            }
        }
        Some(Self { keys, pos, rows })
    }

    pub(crate) fn len(&self) -> usize {
        self.keys.len()
    }

    fn push(&mut self, key: u64, v: &[f32]) {
        debug_assert!(!self.pos.contains_key(&key), "key {key} is already in the block");
        self.pos.insert(key, self.keys.len());
        self.keys.push(key);
        self.rows.extend_from_slice(v);
    }

    /// Removes `key`, returning its row (the last row moves into its place).
    fn take(&mut self, dims: usize, key: u64) -> Option<Vec<f32>> {
        let i = self.pos.remove(&key)?;
        let last = self.keys.len() - 1;
        let v = self.rows[i * dims..(i + 1) * dims].to_vec();
        if i != last {
            self.keys.swap(i, last);
            self.rows.copy_within(last * dims..(last + 1) * dims, i * dims);
            self.pos.insert(self.keys[i], i);
        }
        self.keys.pop();
        self.rows.truncate(last * dims);
        debug_assert_eq!(self.rows.len(), self.keys.len() * dims);
        Some(v)
    }

    fn pop(&mut self, dims: usize) -> Option<(u64, Vec<f32>)> {
        let key = *self.keys.last()?;
        self.take(dims, key).map(|v| (key, v))
    }

    /// Scores every row into `top`; `excluded` runs only for rows that would enter it.
    fn scan(&self, dims: usize, q: &[f32], top: &mut TopK, excluded: &dyn Fn(u64) -> bool) {
        for (row, &key) in self.rows.chunks_exact(dims).zip(&self.keys) {
            let score = dot(q, row);
            if top.would_accept(score, key) && !excluded(key) {
                top.push(score, key);
            }
        }
    }

    fn heap_bytes(&self) -> usize {
        self.keys.capacity() * size_of::<u64>()
            + self.rows.capacity() * size_of::<f32>()
            + self.pos.capacity() * (size_of::<(u64, usize)>() + 1)
    }
}

/// One access class: a graph once it is large enough, a block otherwise (both while rows
/// migrate from the block into a new graph).
#[derive(Debug, Default)]
pub(crate) struct Class {
    pub(crate) graph: Option<AnnIndex>,
    pub(crate) block: Block,
}

impl Class {
    fn len(&self) -> usize {
        self.graph.as_ref().map_or(0, AnnIndex::len) + self.block.len()
    }
}

#[derive(Debug, Default)]
pub(crate) struct State {
    pub(crate) classes: HashMap<ClassId, Class>,
    pub(crate) key_class: HashMap<u64, ClassId>,
    /// Classes with a graph whose block still holds rows to move into it.
    pub(crate) migrating: BTreeSet<ClassId>,
    /// Rows that failed to move into their class's graph (they stay in the block, searched
    /// exactly).
    migration_failures: usize,
}

/// What [`ClassedIndex::search`] returns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClassedResult {
    /// At most `k` hits, best first, each in a named class and not excluded.
    pub hits: Vec<Neighbor>,
    /// Summary of how the hits were found.
    pub path: SearchPath,
    /// Class graphs walked (unfiltered).
    pub graphs_walked_count: usize,
    /// Class blocks scanned exactly.
    pub blocks_scanned_count: usize,
    /// Rows scored by the block scans.
    pub rows_scanned_count: usize,
    /// Class walks that came back short and were replaced by an exact scan of the class.
    pub exact_fallbacks_count: usize,
}

/// Size of one class (see [`ClassedIndex::classes`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClassInfo {
    /// The class.
    pub class: ClassId,
    /// Keys in its graph.
    pub graph_count: usize,
    /// Keys in its block.
    pub block_count: usize,
    /// Whether it has a graph.
    pub has_graph: bool,
}

/// A namespace's vectors partitioned by access class: a graph per large class, a contiguous
/// block per small one, keyed by `u64`, cosine similarity on unit vectors. All methods take
/// `&self`; the type is `Send + Sync`.
///
/// Locking: one `RwLock` over the class table. Searches hold it shared (and each class graph
/// its own locks); adds, moves and removes hold it exclusively, so a search sees a key's
/// class change entirely or not at all. The writer is expected to be a single thread (the
/// store's), so exclusive sections are short: one graph insert or a block push.
pub struct ClassedIndex {
    pub(crate) cfg: IndexConfig,
    graph_min_count: AtomicUsize,
    expansion_search: AtomicUsize,
    pub(crate) state: RwLock<State>,
}

impl std::fmt::Debug for ClassedIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClassedIndex")
            .field("config", &self.config())
            .field("graph_min_count", &self.graph_min_count())
            .field("len", &self.len())
            .finish_non_exhaustive()
    }
}

impl ClassedIndex {
    /// An empty index. A class gets its own graph once it holds `graph_min_count` vectors
    /// (0: every class has a graph from its first vector; the store's tests use that to force
    /// the graph path); smaller classes are scanned exactly. `cfg.expansion_search` is the
    /// `ef` of every class walk (`expansion_search_guarded` is not used: no walk is filtered).
    pub fn new(cfg: IndexConfig, graph_min_count: usize) -> Result<Self, IndexError> {
        cfg.validate()?;
        Ok(Self::wrap(cfg, graph_min_count, State::default()))
    }

    pub(crate) fn wrap(cfg: IndexConfig, graph_min_count: usize, state: State) -> Self {
        Self {
            cfg,
            graph_min_count: AtomicUsize::new(graph_min_count),
            expansion_search: AtomicUsize::new(cfg.expansion_search),
            state: RwLock::new(state),
        }
    }

    /// Builds an index from `(key, class, vector)` items (a full rebuild), grouping by class:
    /// each class of at least `graph_min_count` vectors gets a graph built on all cores, the
    /// others a block. `progress(done, total)` runs on the calling thread. A key that appears
    /// twice keeps its last class and vector.
    pub fn build<I, V>(cfg: IndexConfig, graph_min_count: usize, items: I, progress: &dyn Fn(usize, usize)) -> Result<Self, IndexError>
    where
        I: IntoIterator<Item = (u64, ClassId, V)>,
        V: AsRef<[f32]>,
    {
        let index = Self::new(cfg, graph_min_count)?;
        let items: Vec<(u64, ClassId, V)> = items.into_iter().collect();
        let total = items.len();
        if total > MAX_VECTORS_COUNT {
            return Err(IndexError::Full { max: MAX_VECTORS_COUNT });
        }
        let mut last: HashMap<u64, usize> = HashMap::with_capacity(total);
        for (i, (key, _, _)) in items.iter().enumerate() {
            if *key == RESERVED_KEY {
                return Err(IndexError::ReservedKey(*key));
            }
            last.insert(*key, i);
        }
        let mut groups: HashMap<ClassId, Vec<usize>> = HashMap::new();
        for (i, (key, class, _)) in items.iter().enumerate() {
            if last.get(key) == Some(&i) {
                groups.entry(*class).or_default().push(i);
            }
        }
        if groups.len() > MAX_CLASSES_COUNT {
            return Err(IndexError::TooManyClasses { max: MAX_CLASSES_COUNT });
        }
        let mut order: Vec<ClassId> = groups.keys().copied().collect();
        order.sort_unstable();
        let dims = cfg.dims;
        let mut st = State::default();
        let mut done = 0usize;
        progress(0, total);
        for class in order {
            let Some(members) = groups.get(&class) else { continue };
            let mut c = Class::default();
            if class != PARKED_CLASS && members.len() >= graph_min_count {
                let rows = members.iter().map(|&i| (items[i].0, items[i].2.as_ref()));
                c.graph = Some(AnnIndex::build(cfg, rows, &|d, _| progress(done + d, total))?);
            } else {
                c.block.keys.reserve(members.len());
                c.block.rows.reserve(members.len() * dims);
                for &i in members {
                    c.block.push(items[i].0, &normalized(dims, items[i].2.as_ref())?);
                }
            }
            for &i in members {
                st.key_class.insert(items[i].0, class);
            }
            debug_assert_eq!(c.len(), members.len());
            st.classes.insert(class, c);
            done += members.len();
            progress(done, total);
        }
        *write(&index.state) = st;
        Ok(index)
    }

    /// The configuration, with the current class-walk `ef` as `expansion_search`.
    pub fn config(&self) -> IndexConfig {
        IndexConfig { expansion_search: self.expansion_search.load(Ordering::Relaxed), ..self.cfg }
    }

    /// Vector dimensions.
    pub fn dims(&self) -> usize {
        self.cfg.dims
    }

    /// Classes of at least this many vectors have a graph.
    pub fn graph_min_count(&self) -> usize {
        self.graph_min_count.load(Ordering::Relaxed)
    }

    /// Change the policy: from now on a class of at least `n` vectors gets a graph (classes
    /// already past it get theirs from [`ClassedIndex::build_graphs_step`] or the next change).
    /// A bulk load with the policy at `usize::MAX` only appends to blocks (cheap), so a store can
    /// serve (exactly) at once and build its graphs afterwards.
    pub fn set_graph_min_count(&self, n: usize) {
        self.graph_min_count.store(n, Ordering::Relaxed);
    }

    /// One bounded step of graph building: give every class past the policy its graph, then
    /// move at most `budget` rows from blocks into graphs, under the write lock (so a search
    /// waits at most one step). Returns the rows still waiting to move.
    pub fn build_graphs_step(&self, budget: usize) -> Result<usize, IndexError> {
        let mut guard = write(&self.state);
        let st: &mut State = &mut guard;
        self.apply_policy(st)?;
        self.migrate(st, budget);
        let left: usize = st.migrating.iter().filter_map(|c| st.classes.get(c)).map(|c| c.block.len()).sum();
        debug_assert!(left == 0 || !st.migrating.is_empty());
        Ok(left)
    }

    /// Changes `ef` of the class walks; safe while other threads search.
    pub fn set_expansion_search(&self, ef: usize) -> Result<(), IndexError> {
        check("expansion_search", ef, 1, MAX_EXPANSION)?;
        self.expansion_search.store(ef, Ordering::Relaxed);
        Ok(())
    }

    /// Number of vectors (every class, the parked one included).
    pub fn len(&self) -> usize {
        read(&self.state).key_class.len()
    }

    /// `true` when the index holds no vector.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The class holding `key`.
    pub fn class_of(&self, key: u64) -> Option<ClassId> {
        read(&self.state).key_class.get(&key).copied()
    }

    /// Every key with its class, in no particular order.
    pub fn key_classes(&self) -> Vec<(u64, ClassId)> {
        read(&self.state).key_class.iter().map(|(&k, &c)| (k, c)).collect()
    }

    /// Every non-empty class with its size, by class id.
    pub fn classes(&self) -> Vec<ClassInfo> {
        let st = read(&self.state);
        let mut out: Vec<ClassInfo> = st
            .classes
            .iter()
            .map(|(&class, c)| ClassInfo {
                class,
                graph_count: c.graph.as_ref().map_or(0, AnnIndex::len),
                block_count: c.block.len(),
                has_graph: c.graph.is_some(),
            })
            .collect();
        out.sort_by_key(|c| c.class);
        out
    }

    /// Rows still waiting in a block to move into their class's new graph.
    pub fn pending_migration_count(&self) -> usize {
        let st = read(&self.state);
        st.migrating.iter().filter_map(|c| st.classes.get(c)).map(|c| c.block.len()).sum()
    }

    /// Rows that failed to move into their class's graph since this index was made (they stay
    /// in the block and are still found, exactly).
    pub fn migration_failures_count(&self) -> usize {
        read(&self.state).migration_failures
    }

    /// Bytes of memory: every class graph, every block and the key maps.
    pub fn memory_bytes(&self) -> usize {
        let st = read(&self.state);
        let classes: usize = st
            .classes
            .values()
            .map(|c| c.graph.as_ref().map_or(0, AnnIndex::memory_bytes) + c.block.heap_bytes() + size_of::<(ClassId, Class)>() + 1)
            .sum();
        classes + st.key_class.capacity() * (size_of::<(u64, ClassId)>() + 1)
    }

    /// Inserts `vector` under `key` in `class`, replacing the key's previous class and vector
    /// if any. Rejects wrong dimensions, non-finite components, the zero vector and
    /// [`RESERVED_KEY`]. If inserting fails after the old vector was removed, the key is
    /// absent (never half-present).
    pub fn add(&self, key: u64, class: ClassId, vector: &[f32]) -> Result<(), IndexError> {
        let v = normalized(self.cfg.dims, vector)?;
        if key == RESERVED_KEY {
            return Err(IndexError::ReservedKey(key));
        }
        let mut st = write(&self.state);
        if !st.key_class.contains_key(&key) && st.key_class.len() >= MAX_VECTORS_COUNT {
            return Err(IndexError::Full { max: MAX_VECTORS_COUNT });
        }
        self.take(&mut st, key)?;
        self.place(&mut st, key, class, &v)?;
        self.migrate(&mut st, MIGRATE_PER_CHANGE_COUNT);
        Ok(())
    }

    /// Moves `key` to `class` (its permitted readers changed); returns whether the key is
    /// present. The key leaves its old class — graph or block — before it enters the new one,
    /// all under the exclusive lock, so no search sees it in the old class after this returns
    /// or in the new one before. If leaving fails the key is in no class (never returned) and
    /// the error is reported: a narrowing is never lost by failing towards a widening.
    pub fn move_to(&self, key: u64, class: ClassId) -> Result<bool, IndexError> {
        let mut st = write(&self.state);
        match st.key_class.get(&key) {
            None => return Ok(false),
            Some(&c) if c == class => return Ok(true),
            Some(_) => {}
        }
        let Some((_, v)) = self.take(&mut st, key)? else {
            return Ok(false);
        };
        self.place(&mut st, key, class, &v)?;
        self.migrate(&mut st, MIGRATE_PER_CHANGE_COUNT);
        Ok(true)
    }

    /// Removes `key` altogether; returns whether it was present.
    pub fn remove(&self, key: u64) -> Result<bool, IndexError> {
        let mut st = write(&self.state);
        let taken = self.take(&mut st, key)?.is_some();
        self.migrate(&mut st, MIGRATE_PER_CHANGE_COUNT);
        Ok(taken)
    }

    /// Takes `key` out of its class, returning the class and the (normalised) vector. The key
    /// leaves `key_class` first, so even a failure below leaves it unsearchable.
    fn take(&self, st: &mut State, key: u64) -> Result<Option<(ClassId, Vec<f32>)>, IndexError> {
        let Some(class) = st.key_class.remove(&key) else {
            return Ok(None);
        };
        let dims = self.cfg.dims;
        let c = st.classes.get_mut(&class).ok_or_else(|| IndexError::Backend(format!("key {key} names missing class {class}")))?;
        let v = if let Some(v) = c.block.take(dims, key) {
            v
        } else if let Some(g) = &c.graph {
            let v = g.vector(key)?.ok_or_else(|| IndexError::Backend(format!("key {key} of class {class} is not in its graph")))?;
            g.remove(key)?;
            v
        } else {
            return Err(IndexError::Backend(format!("key {key} of class {class} is in neither graph nor block")));
        };
        if c.len() == 0 {
            st.classes.remove(&class);
            st.migrating.remove(&class);
        }
        Ok(Some((class, v)))
    }

    /// Puts a key that is in no class into `class` (creating the class, and its graph once it
    /// reaches `graph_min_count`).
    fn place(&self, st: &mut State, key: u64, class: ClassId, v: &[f32]) -> Result<(), IndexError> {
        debug_assert!(!st.key_class.contains_key(&key), "key {key} is already placed");
        if !st.classes.contains_key(&class) && st.classes.len() >= MAX_CLASSES_COUNT {
            return Err(IndexError::TooManyClasses { max: MAX_CLASSES_COUNT });
        }
        let State { classes, key_class, migrating, .. } = st;
        let c = classes.entry(class).or_default();
        if c.graph.is_none() && class != PARKED_CLASS && c.len() + 1 >= self.graph_min_count() {
            match AnnIndex::new(self.cfg) {
                Ok(g) => c.graph = Some(g),
                Err(e) => {
                    if c.len() == 0 {
                        classes.remove(&class);
                    }
                    return Err(e);
                }
            }
            if c.block.len() > 0 {
                migrating.insert(class);
            }
        }
        let added = match &c.graph {
            Some(g) => g.add(key, v),
            None => {
                c.block.push(key, v);
                Ok(())
            }
        };
        match added {
            Ok(()) => {
                key_class.insert(key, class);
                Ok(())
            }
            Err(e) => {
                if c.len() == 0 {
                    classes.remove(&class);
                    migrating.remove(&class);
                }
                Err(e)
            }
        }
    }

    /// Moves up to `budget` rows from blocks into their class's new graph. A row the graph
    /// refuses goes back into the block (still searched, exactly) and that class stops
    /// migrating.
    fn migrate(&self, st: &mut State, budget: usize) {
        let dims = self.cfg.dims;
        let mut left = budget;
        while left > 0 {
            let Some(&class) = st.migrating.iter().next() else { break };
            let Some(c) = st.classes.get_mut(&class) else {
                st.migrating.remove(&class);
                continue;
            };
            let Some(g) = &c.graph else {
                st.migrating.remove(&class);
                continue;
            };
            let Some((key, v)) = c.block.pop(dims) else {
                st.migrating.remove(&class);
                continue;
            };
            if g.add(key, &v).is_err() {
                if g.contains(key) {
                    let _ = g.remove(key);
                }
                c.block.push(key, &v);
                st.migrating.remove(&class);
                st.migration_failures += 1;
                continue;
            }
            left -= 1;
        }
    }

    /// Gives every class that has reached `graph_min_count` its graph, and moves every row
    /// still waiting in a block into it, on all cores (for bulk loads: opening a store,
    /// loading a file saved under another threshold). `progress(done, total)` runs on the
    /// calling thread.
    pub fn finish_migrations(&self, progress: &dyn Fn(usize, usize)) -> Result<(), IndexError> {
        let mut guard = write(&self.state);
        let st: &mut State = &mut guard;
        self.apply_policy(st)?;
        let classes: Vec<ClassId> = st.migrating.iter().copied().collect();
        let total: usize = classes.iter().filter_map(|c| st.classes.get(c)).map(|c| c.block.len()).sum();
        let dims = self.cfg.dims;
        let mut done = 0usize;
        progress(0, total);
        for class in classes {
            st.migrating.remove(&class);
            let Some(c) = st.classes.get_mut(&class) else { continue };
            let Some(g) = &c.graph else { continue };
            let block = std::mem::take(&mut c.block);
            let count = block.len();
            let added = g.add_many(block.keys.iter().copied().zip(block.rows.chunks_exact(dims)), &|d, _| progress(done + d, total));
            if let Err(e) = added {
                // What did not reach the graph goes back into the block.
                for (key, row) in block.keys.iter().copied().zip(block.rows.chunks_exact(dims)) {
                    if !g.contains(key) {
                        c.block.push(key, row);
                    }
                }
                st.migration_failures += 1;
                return Err(e);
            }
            done += count;
            progress(done, total);
        }
        Ok(())
    }

    /// Gives a graph to every searchable class that has reached `graph_min_count` without one
    /// (after loading a file saved under a higher threshold); its rows start migrating.
    pub(crate) fn apply_policy(&self, st: &mut State) -> Result<(), IndexError> {
        for (&class, c) in &mut st.classes {
            if class != PARKED_CLASS && c.graph.is_none() && c.len() >= self.graph_min_count() && c.len() > 0 {
                c.graph = Some(AnnIndex::new(self.cfg)?);
                st.migrating.insert(class);
            }
        }
        Ok(())
    }

    /// Guarded search: the `k` (at most [`crate::MAX_K`]) nearest keys among the members of
    /// `classes` that `excluded` does not refuse, best first.
    ///
    /// - Each named class is searched on its own: its graph by an unfiltered walk (the largest
    ///   graph among the named classes with `ef` = [`ClassedIndex::set_expansion_search`], a
    ///   smaller one with `ef · √(its size / the largest's)`, at least `k`), its block by an
    ///   exact scan; the per-class lists are merged. [`PARKED_CLASS`] and unknown classes are skipped.
    /// - `excluded` (the caller's check for keys that stopped being readable in a way the
    ///   classes do not show yet) runs on candidates after the walk and, in blocks, only on
    ///   rows that would enter the top `k`; it never steers a walk.
    /// - Returns `min(k, eligible)` hits, where eligible are the named classes' members not
    ///   excluded: a class walk that comes back short is replaced by an exact scan of that
    ///   class.
    ///
    /// `excluded` must not call back into this index. If it panics, the search fails with
    /// [`IndexError::FilterPanicked`] (nothing is returned).
    pub fn search(&self, query: &[f32], k: usize, classes: &[ClassId], excluded: &dyn Fn(u64) -> bool) -> Result<ClassedResult, IndexError> {
        self.search_with(query, k, classes, excluded, false)
    }

    /// Brute force over the members of `classes` not `excluded` (graphs are read back row by
    /// row): the oracle for [`ClassedIndex::search`].
    pub fn exact_search(&self, query: &[f32], k: usize, classes: &[ClassId], excluded: &dyn Fn(u64) -> bool) -> Result<ClassedResult, IndexError> {
        self.search_with(query, k, classes, excluded, true)
    }

    fn search_with(
        &self,
        query: &[f32],
        k: usize,
        classes: &[ClassId],
        excluded: &dyn Fn(u64) -> bool,
        exact: bool,
    ) -> Result<ClassedResult, IndexError> {
        AnnIndex::check_k(k)?;
        let q = normalized(self.cfg.dims, query)?;
        let mut wanted: Vec<ClassId> = classes.iter().copied().filter(|&c| c != PARKED_CLASS).collect();
        wanted.sort_unstable();
        wanted.dedup();
        let mut out = ClassedResult {
            hits: Vec::new(),
            path: SearchPath::ClassedExact,
            graphs_walked_count: 0,
            blocks_scanned_count: 0,
            rows_scanned_count: 0,
            exact_fallbacks_count: 0,
        };
        if k == 0 {
            return Ok(out);
        }
        let ef = self.expansion_search.load(Ordering::Relaxed);
        let dims = self.cfg.dims;
        let st = read(&self.state);
        // The largest graph among the reader's classes is walked with the full `ef`; a smaller
        // one with `class_ef` (a small graph reaches the same recall with a shorter walk, and a
        // walk's cost grows with `ef`, hardly with the graph's size).
        let largest_graph = wanted
            .iter()
            .filter_map(|c| st.classes.get(c).and_then(|c| c.graph.as_ref()).map(|g| g.len()))
            .max()
            .unwrap_or(0);
        let run = |out: &mut ClassedResult| -> Result<Vec<Neighbor>, IndexError> {
            let mut top = TopK::new(k);
            for &class in &wanted {
                let Some(c) = st.classes.get(&class) else { continue };
                let admit = |key: u64| key != RESERVED_KEY && st.key_class.get(&key) == Some(&class) && !excluded(key);
                if let Some(g) = c.graph.as_ref().filter(|g| !g.is_empty()) {
                    let mut got = Vec::with_capacity(k);
                    if !exact {
                        out.graphs_walked_count += 1;
                        for n in g.search_prepared(&q, class_ef(ef, k, g.len(), largest_graph))? {
                            if admit(n.key) {
                                got.push(n);
                                if got.len() == k {
                                    break;
                                }
                            }
                        }
                    }
                    if exact || (got.len() < k && got.len() < g.len()) {
                        out.exact_fallbacks_count += usize::from(!exact);
                        got = g.exact_scan(&q, k, &admit)?;
                    }
                    for n in got {
                        top.push(n.score, n.key);
                    }
                }
                if c.block.len() > 0 {
                    out.blocks_scanned_count += 1;
                    out.rows_scanned_count += c.block.len();
                    c.block.scan(dims, &q, &mut top, excluded);
                }
            }
            let mut hits = top.into_sorted();
            // Defence in depth: every hit is a member of a named class and not excluded.
            let before = hits.len();
            hits.retain(|h| st.key_class.get(&h.key).is_some_and(|c| wanted.binary_search(c).is_ok()) && !excluded(h.key));
            debug_assert_eq!(hits.len(), before, "a class search returned a key outside the named classes");
            Ok(hits)
        };
        let hits = catch_unwind(AssertUnwindSafe(|| run(&mut out))).unwrap_or(Err(IndexError::FilterPanicked))?;
        out.path = if out.exact_fallbacks_count > 0 {
            SearchPath::ClassedExactAfterShortAnn
        } else if out.graphs_walked_count > 0 {
            SearchPath::ClassedAnn
        } else {
            SearchPath::ClassedExact
        };
        out.hits = hits;
        Ok(out)
    }
}

/// The walk length (`ef`, at least `k`) for a class graph of `len` vectors when the largest graph
/// the reader may read has `largest` vectors and is walked with `ef`: `ef · √(len / largest)`,
/// rounded up. A graph 1/16 the size of the largest is walked with a quarter of the `ef`.
fn class_ef(ef: usize, k: usize, len: usize, largest: usize) -> usize {
    let scaled = if largest == 0 || len >= largest {
        ef
    } else {
        let ratio = len as f64 / largest as f64;
        (ef as f64 * ratio.sqrt()).ceil() as usize
    };
    scaled.min(ef).max(k)
}

#[cfg(test)]
mod tests {
    use super::class_ef;

    #[test]
    fn class_ef_scales_with_the_square_root_of_the_size_ratio_and_never_below_k() {
        assert_eq!(class_ef(32, 10, 80_000, 80_000), 32);
        assert_eq!(class_ef(32, 10, 20_000, 80_000), 16);
        assert_eq!(class_ef(32, 5, 5_000, 80_000), 8);
        assert_eq!(class_ef(32, 10, 5_000, 80_000), 10);
        assert_eq!(class_ef(8, 10, 80_000, 80_000), 10);
        assert_eq!(class_ef(32, 10, 4_096, 0), 32);
    }
}

