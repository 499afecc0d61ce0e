//! memwarden vector index: approximate-nearest-neighbour search over embeddings, with
//! **guarded search** for permission-filtered retrieval.
//!
//! - [`AnnIndex`]: an HNSW index (usearch) over unit vectors (cosine similarity), keyed by the
//!   store's `u64` item ids, kept in step with the store by [`AnnIndex::add`] /
//!   [`AnnIndex::remove`], rebuilt in bulk by [`AnnIndex::build`] (all cores, with progress),
//!   and persisted with the store's watermark by [`AnnIndex::save`] / [`AnnIndex::load`].
//! - [`AnnIndex::search_guarded`]: the permission filter decides eligibility *before* ranking
//!   (never a score penalty); the result holds `min(k, eligible)` hits and never an ineligible
//!   one. Selective filters use an exact scan of the eligible items ([`SearchPath`] says which
//!   path ran).
//! - [`ClassedIndex`]: a namespace partitioned by **access class** (the caller's reader sets):
//!   a graph per large class, a contiguous exactly-scanned block per small one. A guarded
//!   search names the classes the reader may read, walks each of their graphs unfiltered and
//!   merges the per-class top-k, so selectivity no longer makes a walk visit ineligible
//!   nodes. This is what the store searches.
//! - [`AnnIndex::exact_search`]: brute force, the oracle for recall.
//! - [`TopK`] and [`dot`]: the exact scan's ranking primitives (same order and tie-break), for
//!   oracles outside the crate (the retrieval benchmark in `memwarden-bench`).
//!
//! ```
//! use memwarden_index::{AnnIndex, IndexConfig, SearchPath};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let index = AnnIndex::new(IndexConfig::with_dims(4))?;
//! index.add(1, &[1.0, 0.0, 0.0, 0.0])?;
//! index.add(2, &[0.9, 0.1, 0.0, 0.0])?;
//! index.add(3, &[0.0, 1.0, 0.0, 0.0])?;
//!
//! let hits = index.search(&[1.0, 0.0, 0.0, 0.0], 2)?;
//! assert_eq!(hits[0].key, 1);
//!
//! // Key 1 is not visible to this caller: it can never come back, however close it is.
//! let visible = |key: u64| key != 1;
//! let guarded = index.search_guarded(&[1.0, 0.0, 0.0, 0.0], 2, &visible, None)?;
//! assert_eq!(guarded.hits.iter().map(|h| h.key).collect::<Vec<_>>(), vec![2, 3]);
//! assert_eq!(guarded.path, SearchPath::ExactSelective); // tiny index: exact scan
//!
//! index.remove(2)?;
//! assert!(!index.contains(2));
//!
//! let dir = tempfile::tempdir()?;
//! let path = dir.path().join("items.idx");
//! index.save(&path, 42)?; // 42: the store's last applied sequence number
//! let (loaded, watermark) = AnnIndex::load(&path, 4)?;
//! assert_eq!((loaded.len(), watermark), (2, 42));
//! # Ok(())
//! # }
//! ```
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

mod classed;
mod config;
mod error;
mod index;
mod persist;

pub use classed::{ClassId, ClassInfo, ClassedIndex, ClassedResult, MIGRATE_PER_CHANGE_COUNT, PARKED_CLASS};
pub use config::{
    CLASS_GRAPH_MIN_COUNT, EXACT_FALLBACK_ELIGIBLE_PERCENT, EXACT_FALLBACK_MIN_ELIGIBLE_COUNT, IndexConfig,
    MAX_CLASSES_COUNT, MAX_CONCURRENT_OPS, MAX_CONNECTIVITY, MAX_DIMS, MAX_EXPANSION, MAX_K, MAX_VECTORS_COUNT,
    MIN_CONNECTIVITY,
};
pub use error::IndexError;
pub use index::{AnnIndex, GuardedResult, Neighbor, RESERVED_KEY, SearchPath, TopK, dot, exact_threshold};
pub use persist::{CLASSED_FORMAT_VERSION, FORMAT_VERSION};
