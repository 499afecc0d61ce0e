//! Retrieval ranking: the permission filter first, then `similarity × path trust`, top k.

use crate::access::DenyReason;
use crate::model::ReadScores;
use crate::pathtrust::TrustBreakdown;
use crate::trust::Trust;
use memwarden_core::ids::ItemId;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A semantic candidate from the vector index.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Candidate {
    /// The record.
    pub id: ItemId,
    /// Cosine similarity to the query, `1 - cosine distance` (any real number; see
    /// [`semantic_score`]).
    pub similarity: f64,
}

/// A selected record with its three scores.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Ranked {
    /// The record.
    pub id: ItemId,
    /// Semantic, trust and final scores (what the `read_by` edge records).
    pub scores: ReadScores,
    /// The trust factors behind `scores.trust`.
    pub breakdown: TrustBreakdown,
}

/// A candidate removed by the permission filter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Filtered {
    /// The record.
    pub id: ItemId,
    /// Why it may not be read.
    pub reason: DenyReason,
}

/// The result of ranking.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ranking {
    /// At most k records, best first.
    pub selected: Vec<Ranked>,
    /// Candidates removed before ranking, in candidate order.
    pub filtered: Vec<Filtered>,
    /// How many candidates passed the filter.
    pub eligible: usize,
}

/// `s(m, q) = max(0, 1 - d(m, q))` from a cosine similarity (= `1 - d`), clipped to `[0, 1]`;
/// NaN scores 0.
pub fn semantic_score(similarity: f64) -> Trust {
    Trust::clip01(similarity)
}

/// Rank `candidates`: `eval` is `CanRead` followed by path trust for one record; a denied record is
/// removed *before* ranking (no similarity can outrank a restriction), eligible ones are ordered by
/// `semantic × rho` (ties: higher semantic score, then smaller id), and at most `k` are returned.
/// A candidate id given twice counts once, with its highest similarity.
pub fn rank_with<F>(candidates: &[Candidate], k: usize, eval: F) -> Ranking
where
    F: Fn(ItemId) -> Result<TrustBreakdown, DenyReason>,
{
    rank_by(candidates, k, true, eval)
}

/// [`rank_with`], with trust-aware reranking switchable: with `rerank` false, eligible records are
/// ordered by semantic score alone (the "no trust propagation" ablation; the scores reported are
/// unchanged).
pub fn rank_by<F>(candidates: &[Candidate], k: usize, rerank: bool, eval: F) -> Ranking
where
    F: Fn(ItemId) -> Result<TrustBreakdown, DenyReason>,
{
    let mut best: BTreeMap<ItemId, Trust> = BTreeMap::new();
    let mut order: Vec<ItemId> = Vec::new();
    for c in candidates {
        let s = semantic_score(c.similarity);
        match best.get_mut(&c.id) {
            Some(prev) => *prev = Trust::max(*prev, s),
            None => {
                best.insert(c.id, s);
                order.push(c.id);
            }
        }
    }
    let mut filtered = Vec::new();
    let mut eligible: Vec<Ranked> = Vec::new();
    for id in order {
        let semantic = best.get(&id).copied().unwrap_or(Trust::ZERO);
        match eval(id) {
            Err(reason) => filtered.push(Filtered { id, reason }),
            Ok(breakdown) => {
                let final_score = semantic.times(breakdown.rho);
                eligible.push(Ranked {
                    id,
                    scores: ReadScores { semantic, trust: breakdown.rho, final_score },
                    breakdown,
                });
            }
        }
    }
    let n_eligible = eligible.len();
    eligible.sort_by(|a, b| {
        let primary =
            if rerank { b.scores.final_score.cmp(&a.scores.final_score) } else { std::cmp::Ordering::Equal };
        primary.then(b.scores.semantic.cmp(&a.scores.semantic)).then(a.id.cmp(&b.id))
    });
    eligible.truncate(k);
    debug_assert!(eligible.len() <= k);
    Ranking { selected: eligible, filtered, eligible: n_eligible }
}
