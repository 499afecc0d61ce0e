//! The search path, as named steps of the read pipeline:
//!
//! 1. **generate and fuse** ([`Engine::candidates`]): the store's vector hits and, under hybrid
//!    search, its lexical (BM25) hits, both under the store's permission filter, fused by
//!    reciprocal rank;
//! 2. **screen** ([`Engine::screened`]): each candidate read back as a verified view and passed
//!    through the read stages (session floor, lifecycle firewall and broker, lineage read rule);
//! 3. **rank and select** ([`rank_and_select`]): what a layer held back is set aside (to count
//!    what would have been a hit); the rest are ranked by relevance, then path trust, then age,
//!    and the first `k` kept;
//! 4. **widen** ([`Engine::search_report`]): if the stages left fewer than `k` and the store has
//!    more, fetch wider and run 1–3 again; then hand the hits over (logged) and commit once.

use super::*;

/// A search candidate and its relevance (what the product ranks by).
pub(crate) struct Ranked {
    pub(crate) hit: Hit,
    pub(crate) relevance: f64,
}

/// Reciprocal-rank fusion constant: a candidate's fused score is the sum over the vector and the
/// lexical ranking of `1 / (RRF_K + rank)` (rank from 1), as in Cormack et al. (2009).
pub const RRF_K: f64 = 60.0;

/// What one pass of steps 1–3 found: the hits (at most `k`), the held-back candidates with their
/// relevance, whether the store has no more, and the pass's effects.
struct Pass {
    hits: Vec<Candidate>,
    held: Vec<(f64, WithheldHit)>,
    exhausted: bool,
    fx: Effects,
}

impl Engine {
    /// Semantic search: the permission filter decides eligibility before ranking.
    pub fn search(&self, actor: &Actor, namespace: &Namespace, query: &str, k: usize) -> Result<Vec<SearchHit>, EngineError> {
        self.search_labelled(actor, namespace, query, k, Integrity::Untrusted)
    }

    /// [`Engine::search`] returning only memories labelled `min_label` or higher. A planning
    /// session that asks for `Trusted` is handed nothing that can lower its floor (the dual-LLM
    /// pattern): the others are never handed to it, so they do not taint it. Memories below the
    /// floor are not withheld from the caller for good — a search without the floor (best in
    /// another session) returns them, labelled.
    pub fn search_labelled(&self, actor: &Actor, namespace: &Namespace, query: &str, k: usize, min_label: Integrity) -> Result<Vec<SearchHit>, EngineError> {
        Ok(self.search_report(actor, namespace, query, k, min_label)?.hits)
    }

    /// [`Engine::search_labelled`], and how many memories the layers withheld from the hits
    /// ([`SearchResults::withheld`]).
    pub fn search_report(&self, actor: &Actor, namespace: &Namespace, query: &str, k: usize, min_label: Integrity) -> Result<SearchResults, EngineError> {
        let min_label = min_label.max(Self::session_min_label(actor));
        if query.trim().is_empty() || query.len() > QUERY_BYTES_MAX {
            return Err(EngineError::Invalid(format!("query must be 1..={QUERY_BYTES_MAX} bytes of text")));
        }
        if k == 0 || k > SEARCH_K_MAX {
            return Err(EngineError::Invalid(format!("k must be 1..={SEARCH_K_MAX}")));
        }
        if self.embedder.is_none() {
            return Err(EngineError::NoEmbedder);
        }
        // A query without direction (no token the embedder knows) is similar to nothing.
        let Some(q) = self.embed_query(query)? else {
            return Ok(SearchResults { hits: Vec::new(), withheld: 0, withheld_memories: Vec::new() });
        };
        let now = self.now_ms();
        // Step 4, widening: eligibility is the store's permission filter (never a score); if the
        // read stages withhold candidates the store admitted, fetch wider until k pass or the
        // store has no more: no silent shortfall below the store's own bound. Each pass starts
        // its effects afresh: only the pass whose results are handed over is logged.
        let filtering = self.stages.len() > 1 || min_label > Integrity::Untrusted;
        let mut fetch = if filtering { k.saturating_mul(RERANK_FETCH_FACTOR).min(memwarden_store::SEARCH_K_MAX) } else { k };
        let pass = loop {
            let ranked = self.candidates(actor, namespace, &q, query, fetch, k)?;
            let exhausted = ranked.1 || fetch == memwarden_store::SEARCH_K_MAX;
            let (screened, fx) = self.screened(actor, query, min_label, ranked.0, now)?;
            let (hits, held) = rank_and_select(screened, k);
            if hits.len() >= k || exhausted {
                break Pass { hits, held, exhausted, fx };
            }
            fetch = fetch.saturating_mul(RERANK_FETCH_FACTOR).min(memwarden_store::SEARCH_K_MAX);
        };
        debug_assert!(pass.hits.len() <= k);
        debug_assert!(pass.exhausted || pass.hits.len() == k);
        let withheld = would_have_been_hits(pass.held, &pass.hits, k);
        let mut fx = pass.fx;
        self.hand_out(actor, Read::Search { query }, &pass.hits, now, &mut fx)?;
        self.finish(actor.tenant(), now, fx)?;
        Ok(SearchResults { hits: pass.hits.into_iter().map(SearchHit::of).collect(), withheld: withheld.len(), withheld_memories: withheld })
    }

    /// Step 2, screening: `ranked` read back as verified views and passed through the read
    /// stages (which mark what they hold back and score the rest). A stage's refusal is logged
    /// and returned.
    fn screened(&self, actor: &Actor, query: &str, min_label: Integrity, ranked: Vec<Ranked>, now: u64) -> Result<(Vec<Candidate>, Effects), EngineError> {
        let (scores, items): (Vec<(f32, f64)>, Vec<MemoryItem>) = ranked.into_iter().map(|h| ((h.hit.similarity, h.relevance), h.hit.item)).unzip();
        let mut candidates: Vec<Candidate> =
            self.views(actor.tenant(), items, true)?.into_iter().zip(scores).map(|(v, (similarity, relevance))| Candidate::new(v, similarity, relevance)).collect();
        debug_assert!(candidates.iter().all(|c| c.relevance.is_finite()));
        let mut fx = Effects::default();
        if let Err(e) = self.admit_reads(actor, Read::Search { query }, min_label, &mut candidates, now, &mut fx) {
            return Err(self.refuse(actor.tenant(), now, fx, e));
        }
        Ok((candidates, fx))
    }

    /// Step 1, generation and fusion: search candidates for `actor`, best first: the store's
    /// vector hits and, under hybrid search, its lexical (BM25) hits, both already under the
    /// store's permission filter, fused by reciprocal rank over the first `depth` of each list
    /// (the `k` asked for, so an over-fetch for later filters never changes the order of the
    /// top: measured on LoCoMo, fusing 40-deep lists lost 5 points of recall@5 against 10-deep
    /// ones); `relevance` is the cosine similarity (vector-only) or the fused score over its
    /// maximum, `2 / (RRF_K + 1)`, so 1 is the top of both lists; a candidate below `depth` in
    /// both lists follows every fused one, by similarity. Also whether the store has no more
    /// candidates than these (every list came back short of `fetch`).
    fn candidates(&self, actor: &Actor, namespace: &Namespace, q: &[f32], query: &str, fetch: usize, depth: usize) -> Result<(Vec<Ranked>, bool), EngineError> {
        let vector = self.store.search(actor.tenant(), namespace, q, fetch, actor.id())?;
        if !self.hybrid {
            let exhausted = vector.len() < fetch;
            return Ok((vector.into_iter().map(|hit| Ranked { relevance: f64::from(hit.similarity), hit }).collect(), exhausted));
        }
        let lexical = self.store.search_lexical(actor.tenant(), namespace, query, q, fetch, actor.id())?;
        let exhausted = vector.len() < fetch && lexical.len() < fetch;
        let mut fused = fuse([vector, lexical], depth);
        fused.sort_by(|a, b| {
            b.relevance.total_cmp(&a.relevance).then(b.hit.similarity.total_cmp(&a.hit.similarity)).then(a.hit.item.id().cmp(&b.hit.item.id()))
        });
        Ok((fused, exhausted))
    }
}

/// Reciprocal-rank fusion of `lists` over their first `depth` ranks, each relevance scaled so 1
/// is the top of every list (a candidate below `depth` in every list scores its similarity ×
/// 1e-3, below every fused one). Unsorted.
fn fuse(lists: [Vec<Hit>; 2], depth: usize) -> Vec<Ranked> {
    let mut fused: Vec<Ranked> = Vec::with_capacity(lists.iter().map(Vec::len).sum());
    let mut at: HashMap<ItemId, usize> = HashMap::new();
    for list in lists {
        // Competition ranks ("1224"): hits the list scores equally share a rank, so a tie in
        // similarity (or BM25) stays a tie after fusion and path trust can break it.
        let score = |h: &Hit| h.lexical.unwrap_or(f64::from(h.similarity));
        let mut rank = 0usize;
        let mut prev: Option<f64> = None;
        for (pos, hit) in list.into_iter().enumerate() {
            if prev != Some(score(&hit)) {
                rank = pos;
                prev = Some(score(&hit));
            }
            let add = if rank < depth { 1.0 / (RRF_K + rank as f64 + 1.0) } else { 0.0 };
            match at.get(&hit.item.id()) {
                Some(&i) => {
                    if let Some(r) = fused.get_mut(i) {
                        r.relevance += add;
                    }
                }
                None => {
                    at.insert(hit.item.id(), fused.len());
                    fused.push(Ranked { hit, relevance: add });
                }
            }
        }
    }
    let top = 2.0 / (RRF_K + 1.0);
    for r in &mut fused {
        // Rounded so that equal rank sums compare equal whichever list was added first (then
        // path trust, not float noise, breaks the tie).
        r.relevance = if r.relevance > 0.0 { (r.relevance / top * 1e9).round() / 1e9 } else { f64::from(r.hit.similarity.max(0.0)) * 1e-3 };
        debug_assert!(r.relevance >= 0.0 && r.relevance <= 1.0 + 1e-9);
    }
    debug_assert_eq!(fused.len(), at.len());
    fused
}

/// The firewall's content flags that mark a memory as steering rather than informing
/// (instruction-like text, a directive it may not give, a claim about itself, an answer bound to
/// a trigger): flags of the text, not of who wrote it, so a benign memory from an untrusted source
/// is not demoted for its source.
pub const STEERING_FLAGS: [&str; 5] = ["instruction_like", "forbidden_directive", "self_claim", "answer_binding", "trigger_cue"];

/// How far a steering memory falls in the ranking (issue 36 item 5): its rank key is its
/// relevance times this factor, so it does not take a slot from a benign match of similar
/// relevance, yet still leads when it is clearly the more relevant (the query is about it).
/// It stays retrievable and carries its flags.
pub const STEERING_RANK_FACTOR: f64 = 0.5;

/// The rank key of a candidate: its relevance, scaled down when the firewall flagged its text
/// as steering.
fn rank_key(c: &Candidate) -> f64 {
    let steering = c.risk.as_ref().is_some_and(|(_, flags)| flags.iter().any(|f| STEERING_FLAGS.contains(f)));
    // Lowered by the same share of its size whatever its sign (a cosine can be negative).
    let key = if steering { c.relevance - (1.0 - STEERING_RANK_FACTOR) * c.relevance.abs() } else { c.relevance };
    debug_assert!(key <= c.relevance && key.is_finite());
    key
}

/// Step 3, rank and select: the candidates a layer held back, by relevance (to count the ones
/// that would have been hits), and the rest ranked by relevance, then path trust, then the older
/// memory (ids are time-ordered), the first `k` kept.
fn rank_and_select(mut candidates: Vec<Candidate>, k: usize) -> (Vec<Candidate>, Vec<(f64, WithheldHit)>) {
    let held: Vec<(f64, WithheldHit)> = candidates
        .iter()
        .filter_map(|c| match &c.withheld {
            Some(Withheld::Stage(hold)) => Some((c.relevance, WithheldHit { memory: WithheldMemory::of(c.item().id(), hold.clone()), similarity: c.similarity })),
            _ => None,
        })
        .collect();
    candidates.retain(|c| c.withheld.is_none());
    let trust = |c: &Candidate| c.path.as_ref().map_or(0.0, |p| p.scores.trust.get());
    candidates.sort_by(|a, b| rank_key(b).total_cmp(&rank_key(a)).then(trust(b).total_cmp(&trust(a))).then(a.item().id().cmp(&b.item().id())));
    candidates.truncate(k);
    debug_assert!(candidates.len() <= k);
    (candidates, held)
}

/// The withheld candidates that would have been among the `k` best had no layer withheld them:
/// each one's rank among the hits and the other withheld ones (relevance, then the older id),
/// below `k`. Most relevant first.
fn would_have_been_hits(mut held: Vec<(f64, WithheldHit)>, hits: &[Candidate], k: usize) -> Vec<WithheldHit> {
    held.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.memory.id.cmp(&b.1.memory.id)));
    let out: Vec<WithheldHit> = held
        .into_iter()
        .enumerate()
        .filter(|(n, (r, w))| {
            let hits_ahead = hits.iter().filter(|h| h.relevance.total_cmp(r).then(w.memory.id.cmp(&h.item().id())).is_gt()).count();
            n + hits_ahead < k
        })
        .map(|(_, (_, w))| w)
        .collect();
    debug_assert!(out.len() <= k);
    out
}
