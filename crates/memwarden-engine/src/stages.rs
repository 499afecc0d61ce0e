//! The three layers as pipeline stages ([`crate::pipeline::Stage`]), in the engine's one fixed
//! order: authority, lifecycle, lineage. A preset is the subset that is on.

use crate::lineage::{self, Lineage, StoredEvent};
use crate::pipeline::{Candidate, Ceiling, Cx, DecideInput, Effects, Feedback, Hold, MemoryView, Read, Stage, Withheld};
use crate::{EngineError, lifecycle_route, new_id};
use memwarden_core::prelude::*;
use memwarden_lineage::Candidate as RankCandidate;
use memwarden_store::{Mutation, Store};
use serde_json::json;
use std::sync::Arc;

/// The authority layer as a stage. Its gates mint the proofs every operation starts from
/// ([`AdmittedWrite`], [`AdmittedPromotion`], ...); its action verdict is computed by core from
/// the analysis only core mints ([`Authority::decide_with`]), never handed in by a stage.
pub(crate) struct AuthorityStage;

impl Stage for AuthorityStage {
    fn layer(&self) -> Layer {
        Layer::Authority
    }
}

/// The lifecycle layer (MAPLE-Guard): write gate, read firewall, cross-agent broker, promotion
/// gate.
pub(crate) struct LifecycleStage {
    pub(crate) scorer: Arc<memwarden_lifecycle::RiskScorer>,
    /// Mints the hold a blocked promotion puts on the memory.
    pub(crate) authority: Authority,
}

/// The lifecycle layer's reading of the one memory view: the parents' routes as its lineage
/// markers name them (a parent the store could not return counts as external), the writer's
/// reputation, scope, status and guard state.
pub(crate) fn lifecycle_memory(v: &MemoryView) -> memwarden_lifecycle::LifecycleMemory {
    let i = &v.item;
    let mut m = memwarden_lifecycle::LifecycleMemory::new(i.scope().owner.clone(), i.content(), lifecycle_route(i.route()), i.guard().clone());
    m.readers = i.scope().readers.clone();
    m.status = i.status();
    m.parents =
        v.parents.iter().map(|p| memwarden_lifecycle::route_source_name(lifecycle_route(p.route.unwrap_or(Route::ExternalObservation))).to_owned()).collect();
    m.source_agent_trust = v.writer_reputation;
    m
}

fn rule_name(rule: impl serde::Serialize) -> String {
    serde_json::to_value(rule).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_else(|| "unknown".into())
}

/// Why the lineage layer's read rule ([`lineage::readable`]) refuses `id` to `reader`: the graph's
/// `CanRead` reason (`revoked_ancestor`, `not_in_ancestor_scope`, `propagation_pending`, ...), or
/// `poisoned` (a poison report on its path).
pub(crate) fn lineage_hold(g: &memwarden_lineage::LineageGraph, reader: &PrincipalId, id: ItemId) -> Hold {
    let rule = match g.can_read(reader, id) {
        Err(reason) => rule_name(reason),
        Ok(()) => "poisoned".to_owned(),
    };
    Hold::new(Layer::Lineage, rule, Vec::new())
}

fn gate_decision(cx: &Cx<'_>, decision: serde_json::Value) -> Mutation {
    Mutation::GateDecision { tenant: cx.actor.tenant().clone(), actor: cx.actor.id().clone(), decision }
}

impl LifecycleStage {
    /// The read firewall over a search's candidates (those still on their way), in chunks of
    /// the gate's `candidates_max` (its cluster signal is computed over one call's candidates),
    /// best first. Blocks are logged (ids and rules only).
    fn firewall(&self, cx: &Cx<'_>, query: &str, candidates: &mut [Candidate], fx: &mut Effects) {
        use memwarden_lifecycle::{RetrievalCandidate, RetrievalOutcome, RetrievalQuery, retrieval_gate};
        let open: Vec<usize> = (0..candidates.len()).filter(|n| candidates[*n].withheld.is_none()).collect();
        let chunk = self.scorer.config().limits.candidates_max.max(1);
        let mut logged = Vec::new();
        for part in open.chunks(chunk) {
            let memories: Vec<memwarden_lifecycle::LifecycleMemory> = part.iter().map(|n| lifecycle_memory(&candidates[*n].view)).collect();
            let gate_in: Vec<RetrievalCandidate<'_>> =
                memories.iter().zip(part).map(|(memory, n)| RetrievalCandidate { memory, similarity: f64::from(candidates[*n].similarity) }).collect();
            let result = retrieval_gate(&self.scorer, &RetrievalQuery { agent: cx.actor.id(), task_class: None, text: query }, &gate_in);
            for d in &result.decisions {
                let Some(c) = part.get(d.index).and_then(|n| candidates.get_mut(*n)) else {
                    continue;
                };
                if let Some(sig) = &d.signals {
                    c.risk = Some((sig.total, sig.flags()));
                }
                if d.outcome == RetrievalOutcome::Block {
                    let flags = c.risk.as_ref().map(|(_, f)| f.iter().map(|f| (*f).to_owned()).collect()).unwrap_or_default();
                    c.withhold(Withheld::Stage(Hold::new(Layer::Lifecycle, rule_name(d.rule), flags)));
                    logged.push(json!({"item": c.item().id(), "rule": d.rule}));
                }
            }
        }
        if !logged.is_empty() {
            fx.log(gate_decision(cx, json!({"layer": "lifecycle", "gate": "retrieval", "blocked": logged})));
        }
    }

    /// The scorer's write-time risk `r(m, ∅)` of memories handed over by id or list (no query);
    /// a memory it cannot score reads as risk 1 with the flag `unscored`.
    fn score(&self, candidates: &mut [Candidate]) {
        for c in candidates.iter_mut().filter(|c| c.withheld.is_none()) {
            c.risk = Some(match self.scorer.score(&lifecycle_memory(&c.view)) {
                Ok(b) => (b.total, b.flags()),
                Err(_) => (1.0, vec!["unscored"]),
            });
        }
    }

    /// The cross-agent broker: before another principal's memory enters the reader's context,
    /// check scope (with every restriction carried from upstream: the lineage layer's ancestry
    /// ceiling) and status. A principal's own memories pass untouched. Blocks are logged.
    fn broker(&self, cx: &Cx<'_>, read: Read<'_>, candidates: &mut [Candidate], fx: &mut Effects) {
        use memwarden_lifecycle::{BrokerOutcome, BrokerRequest, broker};
        let mut logged = Vec::new();
        for c in candidates.iter_mut().filter(|c| c.withheld.is_none() && c.item().scope().owner != *cx.actor.id()) {
            let mut m = lifecycle_memory(&c.view);
            // History hands over superseded versions by design; every other rule applies.
            if read == Read::History && m.status == Status::Superseded {
                m.status = Status::Active;
            }
            match &c.view.ceiling {
                Ceiling::NotTracked => {}
                Ceiling::Known(r) => m.carried.readers = r.clone(),
                // A memory the graph does not know carries no readable ancestry: nobody.
                Ceiling::Unknown => m.carried.readers = Readers::Only(Default::default()),
            }
            let d = broker(&self.scorer, &m, &BrokerRequest { agent: cx.actor.id(), task_class: None });
            if d.outcome != BrokerOutcome::Admit {
                c.withhold(Withheld::Stage(Hold::new(Layer::Lifecycle, rule_name(d.rule), Vec::new())));
                logged.push(json!({"item": c.item().id(), "rule": d.rule}));
            }
        }
        if !logged.is_empty() {
            fx.log(gate_decision(cx, json!({"layer": "lifecycle", "gate": "broker", "blocked": logged})));
        }
    }
}

impl Stage for LifecycleStage {
    fn layer(&self) -> Layer {
        Layer::Lifecycle
    }

    fn reads_views(&self) -> bool {
        true
    }

    /// The write gate: reject (logged, nothing stored), quarantine (stored, never retrievable),
    /// rewrite as an unverified note, or allow; the guard state it derives is stored with the
    /// item. Non-allow decisions are logged (no text: credentials by kind and offsets only).
    fn admit_write(&self, cx: &Cx<'_>, write: &mut AdmittedWrite, view: &MemoryView, _cited: &[ItemId], fx: &mut Effects) -> Result<(), EngineError> {
        use memwarden_lifecycle::{WriteOutcome, derive_and_write_gate};
        let scorer = &self.scorer;
        let item = write.item();
        // Rule 1 covers metadata as well as content: a secret stored as a metadata value is as
        // stored as one in the text (and metadata is returned on every read). Findings name the
        // entry's position and the credential's kind, never the key or value.
        let in_metadata: Vec<String> = item
            .metadata()
            .iter()
            .enumerate()
            .flat_map(|(n, (k, v))| {
                let mut found: Vec<String> = scorer.find_credentials(k).iter().map(|c| format!("{:?} in metadata entry {n} (key)", c.kind)).collect();
                found.extend(scorer.find_credentials(v).iter().map(|c| format!("{:?} in metadata entry {n} (value)", c.kind)));
                found
            })
            .collect();
        if !in_metadata.is_empty() {
            fx.log(gate_decision(cx, json!({"layer": "lifecycle", "item": item.id(), "decision": {"outcome": "reject", "rule": "credential", "where": "metadata", "findings": in_metadata}})));
            return Err(EngineError::Refused {
                layer: Layer::Lifecycle,
                rule: "credential".into(),
                reason: format!("credential material: {}", in_metadata.join(", ")),
            });
        }
        let d = derive_and_write_gate(scorer, &lifecycle_memory(view));
        let rule = rule_name(d.rule);
        if d.outcome != WriteOutcome::Allow {
            fx.log(gate_decision(cx, json!({"layer": "lifecycle", "item": item.id(), "decision": d})));
        }
        match d.outcome {
            WriteOutcome::Reject => {
                let kinds: Vec<String> = d.credentials.iter().map(|c| format!("{:?} at bytes {}..{}", c.kind, c.start, c.end)).collect();
                let reason =
                    if kinds.is_empty() { "the write could not be evaluated".to_owned() } else { format!("credential material: {}", kinds.join(", ")) };
                Err(EngineError::Refused { layer: Layer::Lifecycle, rule, reason })
            }
            WriteOutcome::Quarantine | WriteOutcome::Rewrite | WriteOutcome::Allow => {
                write.restrict(d.effect.status, d.effect.guard.clone());
                if let Some(note) = &d.effect.prepend_note {
                    write.prepend_note(note)?;
                }
                Ok(())
            }
        }
    }

    /// A search: the read firewall, then the broker. By id, list or history: the scorer's risk,
    /// then the broker.
    fn filter_reads(&self, cx: &Cx<'_>, read: Read<'_>, candidates: &mut [Candidate], fx: &mut Effects) -> Result<(), EngineError> {
        match read {
            Read::Search { query } => self.firewall(cx, query, candidates, fx),
            Read::Get | Read::List | Read::History => self.score(candidates),
        }
        self.broker(cx, read, candidates, fx);
        Ok(())
    }

    /// Credential material in an operation's free-text fields (the write gate's detector; texts
    /// within a memory's size limit, its contract).
    fn screen_fields(&self, what: &str, fields: &[(String, &str)]) -> Result<Vec<String>, EngineError> {
        if let Some((name, _)) = fields.iter().find(|(_, t)| t.len() > memwarden_core::item::CONTENT_BYTES_MAX) {
            return Err(EngineError::Invalid(format!("{what} {name} is longer than {} bytes", memwarden_core::item::CONTENT_BYTES_MAX)));
        }
        let findings: Vec<String> = fields
            .iter()
            .flat_map(|(name, text)| self.scorer.find_credentials(text).into_iter().map(move |c| format!("{:?} in {what} {name}", c.kind)))
            .collect();
        debug_assert!(findings.len() <= fields.len() * self.scorer.config().limits.credential_findings_max.max(1));
        Ok(findings)
    }

    /// The scorer's write-time flags of a quarantined memory (`unscored` if it cannot score it).
    fn hold_flags(&self, view: &MemoryView) -> Option<Vec<String>> {
        Some(match self.scorer.score(&lifecycle_memory(view)) {
            Ok(b) => b.flags().iter().map(|f| (*f).to_owned()).collect(),
            Err(_) => vec!["unscored".to_owned()],
        })
    }

    /// Outcome feedback (`Engine::feedback`): each used memory's utility, trust and hazard and
    /// its writer's reputation move by the reporter's weight; a principal's own memories and its
    /// repeated reports move nothing (issue 34.7).
    fn feedback(&self, cx: &Cx<'_>, used: &[MemoryItem], success: bool) -> Result<Option<Feedback>, EngineError> {
        let config = self.scorer.config();
        let weight = reporter_weight(cx, config.signals.agent_trust_default)?;
        debug_assert!((0.0..=1.0).contains(&weight));
        let actor = cx.actor.id();
        // A principal's feedback about its own memories moves neither their trust nor its
        // reputation: a writer cannot vouch for itself (issue 19 item 7).
        let own: Vec<ItemId> = used.iter().filter(|i| i.writer() == actor).map(MemoryItem::id).collect();
        let moved = self.moved_by_report(cx, used, success, weight)?;
        debug_assert!(moved.guards.len() + moved.repeated.len() + own.len() == used.len());
        let ids: Vec<ItemId> = used.iter().map(MemoryItem::id).collect();
        let record = json!({"outcome": if success { "success" } else { "failure" }, "items": ids, "updates": moved.records, "ignored_own": own, "repeated": moved.repeated, "weight": weight});
        let mutation = Mutation::Feedback {
            tenant: cx.actor.tenant().clone(),
            actor: actor.clone(),
            guards: moved.guards,
            reputations: moved.reputations.into_iter().filter_map(|(p, r)| r.map(|r| (p, r))).collect(),
            record,
        };
        Ok(Some(Feedback { records: moved.records, mutation }))
    }

    /// The promotion gate (`B_p`): a blocked promotion quarantines the memory (a hold, logged)
    /// and is refused.
    fn admit_promotion(&self, cx: &Cx<'_>, memory: &MemoryView, _admitted: &[AdmittedPromotion], fx: &mut Effects) -> Result<(), EngineError> {
        use memwarden_lifecycle::{PromotionOutcome, PromotionTarget, promotion_gate};
        let d = promotion_gate(&self.scorer, &lifecycle_memory(memory), PromotionTarget::Team);
        if d.outcome != PromotionOutcome::Block {
            return Ok(());
        }
        let rule = rule_name(d.rule);
        let id = memory.item.id();
        fx.log(Mutation::Hold(self.authority.admit_hold(&memory.item, cx.actor.id(), &format!("lifecycle promotion gate: {rule}"))));
        fx.log(gate_decision(cx, json!({"layer": "lifecycle", "gate": "promotion", "item": id, "decision": d})));
        Err(EngineError::Refused { layer: Layer::Lifecycle, rule, reason: "the promotion gate held the memory back; it is quarantined".into() })
    }
}

/// What one outcome report moves ([`LifecycleStage::moved_by_report`]).
struct Moved {
    records: Vec<memwarden_lifecycle::FeedbackRecord>,
    guards: Vec<(ItemId, u64, GuardState)>,
    reputations: std::collections::HashMap<PrincipalId, Option<f64>>,
    repeated: Vec<ItemId>,
}

impl LifecycleStage {
    /// The moves of one report by `cx.actor` on the memories of others in `used`: a repeated
    /// report moves nothing; a failure moves the writer's reputation only once another principal
    /// has also reported a failure of that memory.
    fn moved_by_report(&self, cx: &Cx<'_>, used: &[MemoryItem], success: bool, weight: f64) -> Result<Moved, EngineError> {
        use memwarden_lifecycle::{FeedbackState, Outcome, feedback};
        let config = self.scorer.config();
        let actor = cx.actor.id();
        let outcome = if success { Outcome::Success } else { Outcome::Failure };
        let mut out = Moved { records: Vec::new(), guards: Vec::new(), reputations: std::collections::HashMap::new(), repeated: Vec::new() };
        for item in used.iter().filter(|i| i.writer() != actor) {
            let before = item.guard();
            if before.reported_by(actor) || before.reports.len() >= memwarden_core::item::REPORTS_MAX {
                out.repeated.push(item.id());
                continue;
            }
            let rep = match out.reputations.get(item.writer()) {
                Some(r) => *r,
                None => cx.store.reputation(cx.actor.tenant(), item.writer())?,
            };
            let mut rec = feedback(config, &FeedbackState { guard: before.clone(), source_agent_trust: rep }, outcome);
            weigh_guard(&mut rec.after.guard, before, weight);
            rec.after.guard.reports.push(memwarden_core::item::OutcomeReport { by: actor.clone(), success });
            if success || before.other_failure_reporters(actor) >= 1 {
                let from = rep.unwrap_or(config.signals.agent_trust_default);
                let moved = rec.after.source_agent_trust.map(|to| from + weight * (to - from));
                rec.after.source_agent_trust = moved;
                out.reputations.insert(item.writer().clone(), moved);
            } else {
                rec.after.source_agent_trust = rep;
            }
            out.guards.push((item.id(), item.version(), rec.after.guard.clone()));
            out.records.push(rec);
        }
        debug_assert_eq!(out.records.len(), out.guards.len());
        Ok(out)
    }
}

/// How much one report by `cx.actor` weighs: a user's 1; another principal's its stored
/// reputation over the default (no reputation yet: 1), at most 1.
fn reporter_weight(cx: &Cx<'_>, default: f64) -> Result<f64, EngineError> {
    if cx.actor.principal().kind == PrincipalKind::User {
        return Ok(1.0);
    }
    let w = match cx.store.reputation(cx.actor.tenant(), cx.actor.id())? {
        Some(r) if r.is_finite() && default > 0.0 => (r / default).clamp(0.0, 1.0),
        Some(_) => 0.0,
        None => 1.0,
    };
    debug_assert!((0.0..=1.0).contains(&w));
    Ok(w)
}

/// Scale a feedback update of a guard state by the reporter's `weight` (0..=1): the numbers move
/// that fraction of the way from `before` to the unweighted update; counts move as reported.
fn weigh_guard(after: &mut GuardState, before: &GuardState, weight: f64) {
    debug_assert!((0.0..=1.0).contains(&weight));
    let lerp = |from: f64, to: f64| from + weight * (to - from);
    after.q = lerp(before.q, after.q);
    after.tau = lerp(before.tau, after.tau);
    after.h = lerp(before.h, after.h);
    debug_assert!(after.tau.is_finite() && after.h.is_finite());
}

/// The lineage layer (MAP-Graph): the tenant's provenance graph decides what may be cited and
/// read, ranks by path trust, records `read_by`, and gates actions on the carriers' ancestry.
pub(crate) struct LineageStage {
    pub(crate) lineage: Lineage,
}

impl Stage for LineageStage {
    fn layer(&self) -> Layer {
        Layer::Lineage
    }

    fn lineage(&self) -> Option<&Lineage> {
        Some(&self.lineage)
    }

    /// A registered principal becomes a node of the graph (a failure drops the graph, which
    /// the next use rebuilds from the store, the principal included).
    fn registered(&self, store: &dyn Store, principal: &Principal) {
        let _ = self.lineage.with(store, &principal.tenant, |g| lineage::ensure_principal(g, principal));
    }

    /// Each revocation is a lineage event, committed with it; once applied the graph
    /// propagates it to every declared descendant (marked affected, kept for audit).
    fn revoked(&self, cx: &Cx<'_>, ids: &[ItemId], fx: &mut Effects) {
        for id in ids {
            fx.event(StoredEvent::Revoke(memwarden_lineage::RevokeEvent { id: *id, revoker: cx.actor.id().clone(), at_ms: cx.now_ms }));
        }
    }

    fn ceilings(&self, store: &dyn Store, tenant: &TenantId, items: &[MemoryItem]) -> Result<Option<Vec<Ceiling>>, EngineError> {
        let ceilings = self.lineage.with(store, tenant, |g| {
            Ok(items.iter().map(|i| g.record(i.id()).map_or(Ceiling::Unknown, |r| Ceiling::Known(r.summary().ceiling.clone()))).collect::<Vec<_>>())
        })?;
        debug_assert_eq!(ceilings.len(), items.len());
        Ok(Some(ceilings))
    }

    /// Nothing of the evidence is poisoned or revoked on its path (a memory the graph does not
    /// know is not clean).
    fn evidence_clean(&self, store: &dyn Store, tenant: &TenantId, evidence: &[ItemId]) -> bool {
        if evidence.is_empty() {
            return true;
        }
        let Ok(g) = self.lineage.graph(store, tenant) else { return false };
        let Ok(g) = g.lock() else { return false };
        evidence.iter().all(|id| g.record(*id).is_some_and(|r| !r.summary().poisoned && !r.summary().revoked))
    }

    fn weighs_held_context(&self) -> bool {
        true
    }

    fn warm(&self, store: &dyn Store, tenant: &TenantId) -> Result<(), EngineError> {
        self.lineage.with(store, tenant, |_| Ok(()))
    }

    /// The graph records the committed memories and events (a failed apply drops it: rebuilt
    /// from the store, this commit included).
    fn committed(&self, store: &dyn Store, tenant: &TenantId, items: &[MemoryItem], events: &[StoredEvent]) {
        if items.is_empty() && events.is_empty() {
            return;
        }
        let _ = self.lineage.with(store, tenant, |g| {
            for i in items {
                lineage::apply_item(g, i)?;
            }
            for ev in events {
                lineage::apply_event(g, ev.clone())?;
            }
            Ok(())
        });
    }

    fn abandoned(&self, tenant: &TenantId) {
        self.lineage.forget(tenant);
    }

    /// Refuse a write that cites a memory the graph does not let the writer read (its `CanRead`
    /// also covers records a pending propagation may still reach).
    fn admit_write(&self, cx: &Cx<'_>, _write: &mut AdmittedWrite, _view: &MemoryView, cited: &[ItemId], _fx: &mut Effects) -> Result<(), EngineError> {
        if cited.is_empty() {
            return Ok(());
        }
        let reader = cx.actor.id();
        let refused = self
            .lineage
            .with(cx.store, cx.actor.tenant(), |g| Ok(cited.iter().find_map(|p| g.can_read(reader, *p).err().map(|r| (*p, r, lineage_hold(g, reader, *p))))))?;
        match refused {
            // A cited memory of the writer's own scope that the graph holds back is withheld,
            // with the reason; anything else is not found.
            Some((id, _, hold)) if crate::in_reader_scope(cx.store.item(cx.actor.tenant(), &id)?.as_ref(), reader) => {
                Err(EngineError::Withheld(crate::WithheldMemory::of(id, hold)))
            }
            Some((id, reason, _)) => Err(lineage::deny(id, reason)),
            None => Ok(()),
        }
    }

    /// `CanRead` (and no poison report on the path) for every door; for a search, the reader's
    /// path trust of each candidate left (what the product breaks relevance ties with).
    fn filter_reads(&self, cx: &Cx<'_>, read: Read<'_>, candidates: &mut [Candidate], _fx: &mut Effects) -> Result<(), EngineError> {
        let reader = cx.actor.id();
        let k_max = self.lineage.config().k_max;
        self.lineage.with(cx.store, cx.actor.tenant(), |g| {
            // The broker's rule for a reader outside the restriction carried from upstream.
            let carried_rule = rule_name(memwarden_lifecycle::BrokerRule::CarriedAgentRestriction);
            for c in candidates.iter_mut() {
                // The broker's carried reader restriction is this layer's ancestry ceiling: when
                // the graph refuses the memory too, its reason (a revoked ancestor, say) is the
                // more precise one to report. Never re-admits a memory.
                let carried = matches!(&c.withheld, Some(Withheld::Stage(h)) if h.layer == Layer::Lifecycle && h.rule == carried_rule);
                if c.withheld.is_some() && !carried {
                    continue;
                }
                let id = c.item().id();
                if !lineage::readable(g, reader, id) {
                    c.withheld = Some(Withheld::Stage(lineage_hold(g, reader, id)));
                }
            }
            if !matches!(read, Read::Search { .. }) {
                return Ok(());
            }
            let open: Vec<usize> = (0..candidates.len()).filter(|n| candidates[*n].withheld.is_none()).collect();
            let asked: Vec<RankCandidate> =
                open.iter().map(|n| RankCandidate { id: candidates[*n].item().id(), similarity: candidates[*n].relevance }).collect();
            // The graph scores every candidate (at most its `k_max`); the product ranks them by
            // relevance and breaks ties with path trust (the paper's `similarity × path trust`
            // ranking buried every external memory: source turns of LoCoMo fell from 36.5% to
            // 3.8% in the top 5).
            let wide = asked.len().clamp(1, k_max);
            let ranking = g.rank(reader, &asked, Some(wide)).map_err(|e| EngineError::Lineage(e.to_string()))?;
            let mut scored: std::collections::HashMap<ItemId, memwarden_lineage::Ranked> = ranking.selected.into_iter().map(|r| (r.id, r)).collect();
            for n in open {
                let c = &mut candidates[n];
                match scored.remove(&c.item().id()) {
                    Some(r) => c.path = Some(r),
                    None => c.withhold(Withheld::Cut),
                }
            }
            Ok(())
        })
    }

    /// A search's results become `read_by` edges (committed with the search).
    fn handed(&self, cx: &Cx<'_>, read: Read<'_>, handed: &[Candidate], fx: &mut Effects) -> Result<(), EngineError> {
        if !matches!(read, Read::Search { .. }) || handed.is_empty() {
            return Ok(());
        }
        let selected: Vec<memwarden_lineage::Ranked> = handed.iter().filter_map(|c| c.path).collect();
        debug_assert_eq!(selected.len(), handed.len(), "every search hit was scored by the graph");
        fx.event(StoredEvent::Reads { reader: cx.actor.id().clone(), selected, at_ms: cx.now_ms });
        Ok(())
    }

    /// The product gate ([`lineage::product_verdict`]): per value, over the memories that carry
    /// or push it; the decision is recorded in the graph.
    fn decide(&self, cx: &Cx<'_>, input: &DecideInput<'_>, fx: &mut Effects) -> Result<Option<Verdict>, EngineError> {
        let analysis = input.analysis;
        let witness_ids: Vec<ItemId> = {
            let mut c: Vec<ItemId> = analysis.values.iter().flat_map(|v| v.pushed_by.iter().copied()).filter(|w| !input.cited.contains(w)).collect();
            c.sort();
            c.dedup();
            c
        };
        let elevated: Vec<ItemId> = analysis.values.iter().filter(|v| v.elevated).flat_map(|v| v.pushed_by.iter().copied()).collect();
        let request = lineage::gate_request(cx.actor.id(), input.classed, input.cited.to_vec(), witness_ids, elevated);
        let (v, context) = self.lineage.with(cx.store, cx.actor.tenant(), |g| {
            let v = lineage::product_verdict(analysis, cx.actor.id(), &mut |r| g.decide(r));
            Ok((v, lineage::context_verdict(g, cx.actor.id(), input.classed, input.cited, input.unreadable)))
        })?;
        // The stricter of the per-value verdict and the context-level evidence rule.
        let v = match context {
            Some(c) if c.decision > v.decision => c,
            _ => v,
        };
        fx.event(StoredEvent::Action(memwarden_lineage::ActionEvent {
            id: new_id(cx.now_ms)?,
            request,
            tool: input.classed.tool.clone(),
            on_behalf_of: None,
            agent_proposal: None,
            at_ms: cx.now_ms,
        }));
        Ok(Some(v))
    }

    /// The graph checks the memory is readable and each widening against its ancestry ceiling,
    /// and records it ahead of the commit (the store's own scope still decides eligibility
    /// until then; a refused or failed commit drops the graph).
    fn admit_promotion(&self, cx: &Cx<'_>, memory: &MemoryView, admitted: &[AdmittedPromotion], fx: &mut Effects) -> Result<(), EngineError> {
        let id = memory.item.id();
        let g = self.lineage.graph(cx.store, cx.actor.tenant())?;
        let mut g = g.lock().map_err(|_| EngineError::Lineage("graph lock poisoned".into()))?;
        // The engine checked the memory is in the promoter's scope: held back, it is withheld.
        if g.can_read(cx.actor.id(), id).is_err() {
            return Err(EngineError::Withheld(crate::WithheldMemory::of(id, lineage_hold(&g, cx.actor.id(), id))));
        }
        for a in admitted {
            let ev = memwarden_lineage::PromoteEvent {
                id: a.item().id(),
                actor: cx.actor.id().clone(),
                readers: a.item().scope().readers.clone(),
                at_ms: cx.now_ms,
            };
            fx.graph_ahead = true;
            if let Err(e) = g.apply_promotion(ev.clone()) {
                return Err(EngineError::Forbidden(format!("promoting {}: {e}", a.item().id())));
            }
            g.drain();
            fx.event(StoredEvent::Promote(ev));
        }
        Ok(())
    }
}
