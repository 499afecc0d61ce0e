//! Ancestry summaries: the incremental step (a record's summary from its own facts and its
//! parents' summaries, O(parents)) and a from-scratch recomputation over the full ancestry (used to
//! validate the incremental state in tests and when a store reloads a graph).

use crate::config::LineageConfig;
use crate::model::{AffectedAncestor, AncestrySummary, Cause, CauseSet, Tally};
use crate::trust::Trust;
use memwarden_core::ids::ItemId;
use memwarden_core::item::{EdgeKind, Readers};
use std::collections::{BTreeMap, BTreeSet};

/// The facts about one item that enter its own summary.
#[derive(Debug, Clone, PartialEq)]
pub struct OwnFacts {
    /// Its id.
    pub id: ItemId,
    /// Its base trust (from its label, capped by any source trust the caller gave).
    pub base_trust: Trust,
    /// Labelled untrusted.
    pub untrusted: bool,
    /// Private visibility.
    pub private: bool,
    /// Flagged poisoned.
    pub poisoned: bool,
    /// Revoked.
    pub revoked: bool,
    /// Verified directly (a `verified_by` edge from a user or tool).
    pub verified: bool,
    /// Its effective readers.
    pub eff: Readers,
}

impl OwnFacts {
    /// The item's own causes.
    pub fn causes(&self) -> CauseSet {
        CauseSet::EMPTY
            .with_if(Cause::Untrusted, self.untrusted)
            .with_if(Cause::Private, self.private)
            .with_if(Cause::Poisoned, self.poisoned)
            .with_if(Cause::Revoked, self.revoked)
    }
}

/// An item's own facts and its parent edges, as a from-scratch recomputation looks them up.
pub type Lookup<'a> = (OwnFacts, &'a [(EdgeKind, ItemId)]);

/// The per-hop decay of a parent edge (F). Only the three derivation kinds are parent edges.
pub fn hop_factor(config: &LineageConfig, kind: EdgeKind) -> Trust {
    match kind {
        EdgeKind::ObservedFrom => config.hop_observed,
        EdgeKind::SummarizedFrom => config.hop_summarized,
        // derived_from, and (defensively) anything else: the write path refuses other kinds.
        _ => config.hop_derived,
    }
}

/// Whether `kind` is a derivation (parent) edge.
pub fn is_parent_kind(kind: EdgeKind) -> bool {
    matches!(kind, EdgeKind::DerivedFrom | EdgeKind::SummarizedFrom | EdgeKind::ObservedFrom)
}

/// The incremental step: the summary of a record from its own facts and its parents' (current)
/// summaries. O(parents × (affected_ids_max + readers)), independent of ancestry depth.
pub fn summarize(config: &LineageConfig, own: &OwnFacts, parents: &[(EdgeKind, &AncestrySummary)]) -> AncestrySummary {
    let mut min_source_trust = own.base_trust;
    let mut flow = Trust::ONE;
    let mut first = true;
    let mut depth = 0u32;
    let mut verified_all = !parents.is_empty();
    let (mut untrusted, mut private, mut poisoned, mut revoked) =
        (own.untrusted, own.private, own.poisoned, own.revoked);
    let mut ceiling = own.eff.clone();
    let mut entries: BTreeMap<ItemId, CauseSet> = BTreeMap::new();
    let own_causes = own.causes();
    if !own_causes.is_empty() {
        entries.insert(own.id, own_causes);
    }
    let mut all_exact = true;
    let mut largest_parent_total = 0u64;
    for (kind, p) in parents {
        min_source_trust = min_source_trust.min(p.min_source_trust);
        let f = p.flow.times(hop_factor(config, *kind));
        flow = if first { f } else { flow.min(f) };
        first = false;
        depth = depth.max(p.depth.saturating_add(1));
        verified_all &= p.verified;
        untrusted |= p.untrusted;
        private |= p.private;
        poisoned |= p.poisoned;
        revoked |= p.revoked;
        ceiling = ceiling.intersect(&p.ceiling);
        for a in &p.affected {
            let e = entries.entry(a.id).or_insert(CauseSet::EMPTY);
            debug_assert!(e.is_empty() || *e == a.causes, "one item has one set of causes on every path");
            *e = e.union(a.causes);
        }
        if p.affected_rest != Tally::Exact(0) {
            all_exact = false;
        }
        largest_parent_total = largest_parent_total.max(p.affected.len() as u64 + p.affected_rest.at_least());
    }
    let union = entries.len() as u64;
    let affected: Vec<AffectedAncestor> =
        entries.into_iter().take(config.affected_ids_max).map(|(id, causes)| AffectedAncestor { id, causes }).collect();
    let kept = affected.len() as u64;
    let affected_rest = if all_exact {
        Tally::Exact(union - kept)
    } else {
        let own_extra = u64::from(!own_causes.is_empty());
        let total = union.max(largest_parent_total.saturating_add(own_extra));
        Tally::AtLeast(total.saturating_sub(kept))
    };
    let out = AncestrySummary {
        min_source_trust,
        flow,
        depth,
        verified: own.verified || verified_all,
        untrusted,
        private,
        poisoned,
        revoked,
        ceiling,
        affected,
        affected_rest,
    };
    debug_assert!(out.min_source_trust <= own.base_trust);
    debug_assert!(
        crate::scope::readers_subset(&out.ceiling, &own.eff),
        "the ceiling never exceeds the record's own readers"
    );
    debug_assert!(
        !out.revoked || matches!(&out.ceiling, Readers::Only(s) if s.is_empty()),
        "a revoked path admits nobody"
    );
    out
}

/// Recompute a summary from scratch: walk the full ancestry of `root` (through `lookup`, which
/// returns an item's own facts and its parent edges) without using any stored summary. Returns
/// `None` if an id on the path is unknown or the ancestry has a cycle (neither can happen in a
/// graph built through the write path).
pub fn from_scratch<'a, F>(config: &LineageConfig, root: ItemId, lookup: F) -> Option<AncestrySummary>
where
    F: Fn(ItemId) -> Option<Lookup<'a>>,
{
    // 1. The closed ancestry, and a topological order (parents before children).
    let mut order: Vec<ItemId> = Vec::new();
    let mut facts: BTreeMap<ItemId, Lookup<'a>> = BTreeMap::new();
    let mut state: BTreeMap<ItemId, bool> = BTreeMap::new(); // false: on stack, true: done
    let mut stack: Vec<(ItemId, usize)> = vec![(root, 0)];
    state.insert(root, false);
    facts.insert(root, lookup(root)?);
    while let Some((id, next)) = stack.pop() {
        let parents = facts.get(&id)?.1;
        if let Some((_, pid)) = parents.get(next) {
            stack.push((id, next + 1));
            match state.get(pid) {
                Some(false) => return None, // cycle
                Some(true) => {}
                None => {
                    facts.insert(*pid, lookup(*pid)?);
                    state.insert(*pid, false);
                    stack.push((*pid, 0));
                }
            }
        } else {
            state.insert(id, true);
            order.push(id);
        }
    }
    // 2. Whole-path aggregates, straight from the definitions.
    let mut min_source_trust = Trust::ONE;
    let (mut untrusted, mut private, mut poisoned, mut revoked) = (false, false, false, false);
    let mut ceiling = Readers::All;
    let mut all: BTreeSet<AffectedAncestor> = BTreeSet::new();
    for (own, _) in facts.values() {
        min_source_trust = min_source_trust.min(own.base_trust);
        untrusted |= own.untrusted;
        private |= own.private;
        poisoned |= own.poisoned;
        revoked |= own.revoked;
        ceiling = ceiling.intersect(&own.eff);
        if !own.causes().is_empty() {
            all.insert(AffectedAncestor { id: own.id, causes: own.causes() });
        }
    }
    let total = all.len() as u64;
    let affected: Vec<AffectedAncestor> = all.into_iter().take(config.affected_ids_max).collect();
    let affected_rest = Tally::Exact(total - affected.len() as u64);
    // 3. Chain properties (weakest chain, longest chain, verification) over the topological order.
    let mut chain: BTreeMap<ItemId, (Trust, u32, bool)> = BTreeMap::new();
    for id in &order {
        let (own, parents) = facts.get(id)?;
        let mut flow: Option<Trust> = None;
        let mut depth = 0u32;
        let mut all_verified = !parents.is_empty();
        for (kind, pid) in parents.iter() {
            let (pf, pd, pv) = *chain.get(pid)?;
            let f = pf.times(hop_factor(config, *kind));
            flow = Some(flow.map_or(f, |x| x.min(f)));
            depth = depth.max(pd.saturating_add(1));
            all_verified &= pv;
        }
        chain.insert(*id, (flow.unwrap_or(Trust::ONE), depth, own.verified || all_verified));
    }
    let (flow, depth, verified) = *chain.get(&root)?;
    Some(AncestrySummary {
        min_source_trust,
        flow,
        depth,
        verified,
        untrusted,
        private,
        poisoned,
        revoked,
        ceiling,
        affected,
        affected_rest,
    })
}

/// Whether an incrementally maintained summary agrees with a from-scratch one: every field equal,
/// except that a lower-bound tally only has to be at most the exact count.
pub fn agrees(incremental: &AncestrySummary, exact: &AncestrySummary) -> bool {
    let Tally::Exact(n) = exact.affected_rest else { return false };
    let total = exact.affected.len() as u64 + n;
    let inc_ok = match incremental.affected_rest {
        Tally::Exact(m) => m == n,
        Tally::AtLeast(m) => incremental.affected.len() as u64 + m <= total,
    };
    inc_ok && AncestrySummary { affected_rest: exact.affected_rest, ..incremental.clone() } == *exact
}
