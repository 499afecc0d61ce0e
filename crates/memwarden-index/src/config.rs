//! Index configuration and the limits every input is checked against.

use serde::{Deserialize, Serialize};

use crate::IndexError;

/// Most dimensions a vector may have.
pub const MAX_DIMS: usize = 4096;
/// Most results one search may ask for.
pub const MAX_K: usize = 1000;
/// Most vectors one index may hold (usearch addresses slots with 32-bit integers; this stays
/// far below that and below what fits in memory at 384 dimensions).
pub const MAX_VECTORS_COUNT: usize = 100_000_000;
/// Graph degree (usearch "connectivity", HNSW `M`) bounds.
pub const MIN_CONNECTIVITY: usize = 2;
/// See [`MIN_CONNECTIVITY`].
pub const MAX_CONNECTIVITY: usize = 128;
/// Most candidates kept while inserting or searching (HNSW `ef`).
pub const MAX_EXPANSION: usize = 4096;
/// Most searches and inserts that may run at once (usearch needs one scratch context per
/// concurrent operation; callers beyond this wait for a free one).
pub const MAX_CONCURRENT_OPS: usize = 256;
/// Guarded search goes straight to the exact path when the caller's estimate of eligible items
/// is below `max(EXACT_FALLBACK_MIN_ELIGIBLE_COUNT, len * EXACT_FALLBACK_ELIGIBLE_PERCENT / 100)`.
pub const EXACT_FALLBACK_MIN_ELIGIBLE_COUNT: usize = 4096;
/// See [`EXACT_FALLBACK_MIN_ELIGIBLE_COUNT`].
pub const EXACT_FALLBACK_ELIGIBLE_PERCENT: usize = 2;
/// A [`crate::ClassedIndex`] access class gets its own HNSW graph once it holds this many
/// vectors; smaller classes are scanned exactly from a contiguous block. This is the floor of
/// [`crate::exact_threshold`], not its 2%-of-N part: with one graph per class a walk no longer
/// costs more as the filter gets selective, so the break-even between a scan and a walk is an
/// absolute size (a 4,096-row block is ~6 MiB of f32 at 384 dims, scanned in well under a
/// millisecond), not a fraction of the namespace.
pub const CLASS_GRAPH_MIN_COUNT: usize = EXACT_FALLBACK_MIN_ELIGIBLE_COUNT;
/// Most access classes one [`crate::ClassedIndex`] may hold.
pub const MAX_CLASSES_COUNT: usize = 1_000_000;

/// How an [`crate::AnnIndex`] is built and searched. Every field is range-checked by
/// [`IndexConfig::validate`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexConfig {
    /// Vector dimensions (1..=[`MAX_DIMS`]); 384 for all-MiniLM-L6-v2.
    pub dims: usize,
    /// HNSW `M`: neighbours per node on the upper layers (twice that on the base layer).
    pub connectivity: usize,
    /// HNSW `ef_construction`: candidates kept while inserting.
    pub expansion_add: usize,
    /// HNSW `ef` for unguarded search. Can be changed later with
    /// [`crate::AnnIndex::set_expansion_search`].
    pub expansion_search: usize,
    /// HNSW `ef` for the filtered (guarded) ANN path.
    pub expansion_search_guarded: usize,
    /// Most operations that may use the graph at once (1..=[`MAX_CONCURRENT_OPS`]).
    pub max_concurrent_ops: usize,
}

impl Default for IndexConfig {
    fn default() -> Self {
        Self {
            dims: 384,
            connectivity: 16,
            expansion_add: 128,
            expansion_search: 64,
            expansion_search_guarded: 64,
            max_concurrent_ops: 16,
        }
    }
}

impl IndexConfig {
    /// The default configuration for `dims`-dimensional vectors.
    pub fn with_dims(dims: usize) -> Self {
        Self { dims, ..Self::default() }
    }

    /// Checks every field against its limit.
    pub fn validate(&self) -> Result<(), IndexError> {
        check("dims", self.dims, 1, MAX_DIMS)?;
        check("connectivity", self.connectivity, MIN_CONNECTIVITY, MAX_CONNECTIVITY)?;
        check("expansion_add", self.expansion_add, 1, MAX_EXPANSION)?;
        check("expansion_search", self.expansion_search, 1, MAX_EXPANSION)?;
        check("expansion_search_guarded", self.expansion_search_guarded, 1, MAX_EXPANSION)?;
        check("max_concurrent_ops", self.max_concurrent_ops, 1, MAX_CONCURRENT_OPS)?;
        Ok(())
    }
}

pub(crate) fn check(field: &'static str, value: usize, min: usize, max: usize) -> Result<(), IndexError> {
    if (min..=max).contains(&value) { Ok(()) } else { Err(IndexError::Config { field, value, min, max }) }
}
