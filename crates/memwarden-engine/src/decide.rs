//! The decision path (Algorithm 1 and the stages), as named steps:
//!
//! 1. **cite** ([`Engine::cited`]): the memories the action cites (its context and its values'
//!    sources), sorted into readable, held back (the lineage stage's evidence), not weighed
//!    (narrowed at write) and invalid;
//! 2. **ancestors** ([`Engine::add_ancestors`]): the readable ancestors of the cited memories,
//!    along declared parents, counted as cited;
//! 3. **context**: attestations and live elevations of the action's values, untrusted neighbours,
//!    the session's witnesses and the tool's registered class ([`DecisionContext`]);
//! 4. **decide**: the authority analysis, every stage's verdict, and the one precedence rule
//!    (`Authority::decide_with`: only core composes);
//! 5. **commit** ([`Engine::commit_decision`]): the decision with its consumed grants, new
//!    elevations and the stages' records, in one transaction (a grant another decision spent
//!    first is logged again as refused).

use super::*;

/// What an action cites, sorted out ([`Engine::cited`]).
struct Cited {
    /// Every cited id (context and values' sources), sorted, once.
    ids: Vec<ItemId>,
    /// The cited memories the actor may read (their ancestors are added by step 2).
    items: Vec<MemoryItem>,
    /// Cited memories of the actor's scope that a layer holds back (what get answers `403
    /// withheld` for): a context item among them is evidence for the lineage stage's context
    /// rule (redact a disclosure, re-verify or block an act) where the preset has a lineage
    /// layer.
    unreadable: Vec<ItemId>,
    /// Cited memories withheld only by their writer's session ceiling ([`NARROWED_AT_WRITE`]):
    /// never handed over, nothing they declare is restricted, so they are left out of the
    /// decision (neither evidence nor an invalid citation).
    not_weighed: Vec<ItemId>,
    /// The first cited id the actor may not cite (unknown, outside its scope, a value's source it
    /// cannot read, or held back without a lineage layer): the request is invalid. With it, the
    /// hold that withheld it when it is of the actor's scope (unknown and out-of-scope ids get one
    /// answer, so the verdict does not reveal that a memory exists).
    invalid: Option<(ItemId, Option<Hold>)>,
}

/// How one cited memory counts in a decision ([`Engine::citation`]).
enum Citation {
    /// Handed over: weighed by every layer.
    Weighed,
    /// Addressed to the actor, narrowed only at write: left out.
    NotWeighed,
    /// Of the actor's scope, held back: the lineage stage's evidence.
    Evidence,
    /// Unknown, out of scope, or a value's source the actor may not be handed.
    Invalid,
}

impl Engine {
    /// Decide an action proposed by `actor` (Algorithm 1). Always returns a verdict (an invalid
    /// request is a logged `Block`); consumed grants and new elevations commit atomically with the
    /// decision's log entry.
    pub fn decide(&self, actor: &Actor, action: &ActionRequest) -> Result<(Verdict, Receipt), EngineError> {
        let now = self.now_ms();
        // What the verdict log would keep: the action's values and amount (issue 35.7).
        let mut fields: Vec<(String, &str)> = action.values.iter().flat_map(|v| [(format!("value {:?} (key)", v.key), v.key.as_str()), (format!("value {:?}", v.key), v.value.as_str())]).collect();
        fields.extend(action.amount.as_deref().map(|a| ("amount".to_owned(), a)));
        self.refuse_credentials(actor, now, "action", &fields)?;
        let tenant = actor.tenant().clone();
        // Step 1: what the action cites, sorted out; step 2: their readable ancestors.
        // The read stages may log what they held back: it commits with the decision.
        let mut fx = Effects::default();
        let Cited { ids, mut items, unreadable, not_weighed, invalid: invalid_context } = self.cited(actor, action, now, &mut fx)?;
        if invalid_context.is_none() {
            self.add_ancestors(actor, &ids, &mut items, now, &mut fx)?;
        }
        let keys: Vec<String> = action.values.iter().map(|v| v.key.clone()).collect();
        // Only the attestations of the action's own (key, value) pairs: a value that does not
        // normalise has none (and the gate blocks it anyway).
        let mut attestations = Vec::new();
        for v in &action.values {
            if let Ok(nv) = NormValue::new(v.kind, &v.value) {
                attestations.extend(self.store.attestations_of(&tenant, &v.key, &nv)?);
            }
        }
        let mut elevations = self.store.elevations(&tenant, &keys)?;
        // Derived authority dies with its evidence (issue 34.4).
        elevations.retain(|e| self.evidence_live(&tenant, &e.evidence));
        let store = Arc::clone(&self.store);
        let t2 = tenant.clone();
        let principal = move |id: &PrincipalId| store.principal(&t2, id).ok().flatten();
        let store = Arc::clone(&self.store);
        let t3 = tenant.clone();
        // A lookup error counts as "used": errors deny.
        let grant_used = move |n: &[u8; 16]| store.grant_used(&t3, n).unwrap_or(true);
        let refs: Vec<&MemoryItem> = items.iter().collect();
        let neighbour_items = self.untrusted_neighbours(actor, &items, action)?;
        let neighbour_refs: Vec<&MemoryItem> = neighbour_items.iter().collect();
        let observed = self.observed(actor)?;
        let witness_items: Vec<MemoryItem> = self.items_of(&tenant, observed.witnesses())?.into_iter().flatten().collect();
        let witness_refs: Vec<&MemoryItem> = witness_items.iter().collect();
        // The system classes the action: the tool's registration, never the request.
        let registration = match PrincipalId::new(&action.tool) {
            Ok(id) => self.store.principal(&tenant, &id)?.filter(|p| p.kind == PrincipalKind::Tool).and_then(|p| p.action),
            Err(_) => None,
        };
        let class = ActionClass::of(&action.tool, registration.as_ref());
        let ctx = DecisionContext {
            tenant: &tenant,
            store: self.store.store_id(),
            now_ms: now,
            actor: actor.principal(),
            class: &class,
            items: &refs,
            attestations: &attestations,
            elevations: &elevations,
            principal: &principal,
            grant_used: &grant_used,
            session: &observed,
            session_witnesses: &witness_refs,
            neighbours: &neighbour_refs,
        };
        // The authority layer analyses what the actor could read: a context item it could not is
        // the lineage stage's evidence (above), not part of the analysis.
        let cited_context = action.context.clone();
        let pruned;
        let action: &ActionRequest = if (unreadable.is_empty() && not_weighed.is_empty()) || invalid_context.is_some() {
            action
        } else {
            let kept = |id: &ItemId| !unreadable.contains(id) && !not_weighed.contains(id);
            pruned = ActionRequest { context: action.context.iter().copied().filter(kept).collect(), ..action.clone() };
            &pruned
        };
        let outcome = match (invalid_context, self.authority.analyse(action, &ctx)) {
            // A citation the actor may not make: the request is invalid, whatever else holds.
            (Some((id, hold)), _) => DecisionOutcome::denied(Rule::InvalidRequest {
                reason: match hold {
                    None => format!("context item {id} is unknown or not readable by {}", actor.id()),
                    Some(h) => format!("context item {id} is withheld from {} by the {} layer ({})", actor.id(), h.layer, h.rule),
                },
            }),
            // An unusable request (the analysis names why): blocked.
            (None, Err(rule)) => DecisionOutcome::denied(rule),
            (None, Ok(analysis)) => {
                let mut classed = action.clone();
                classed.kind = class.action.kind;
                classed.risk = class.action.risk;
                let weighed: Vec<ItemId> = ids.iter().copied().filter(|id| !not_weighed.contains(id)).collect();
                let input = DecideInput { classed: &classed, analysis: &analysis, cited: &weighed, unreadable: &unreadable };
                let verdicts = self.stage_verdicts(actor, now, &input, &mut fx);
                // The one precedence rule over the authority verdict and every other layer's.
                self.authority.decide_with(action, &analysis, verdicts, &ctx)
            }
        };
        let summary = json!({
            "tool": action.tool, "kind": action.kind, "risk": action.risk, "amount": action.amount,
            "values": action.values.iter().map(|v| json!({"key": v.key, "value": v.value, "kind": v.kind, "sources": v.sources})).collect::<Vec<_>>(),
            "context": cited_context, "grants": action.grants.iter().map(|g| g.grant.nonce_hex()).collect::<Vec<_>>(),
        });
        // Last step: commit the decision with its grants, elevations and the stages' records.
        self.commit_decision(actor, now, summary, outcome, fx)
    }

    /// Whether every memory an elevation was computed from still stands: stored, active (not
    /// superseded, quarantined or erased), not revoked, and not poisoned or revoked on its path
    /// (lineage). Any lookup error counts as "not live": an elevation then stops counting, which
    /// only asks more.
    pub(crate) fn evidence_live(&self, tenant: &TenantId, evidence: &[ItemId]) -> bool {
        let stands = evidence.iter().all(|id| {
            matches!(self.store.item(tenant, id), Ok(Some(i)) if i.status() == Status::Active && i.scope().visibility != Visibility::Revoked)
        });
        stands && self.stages.iter().all(|s| s.evidence_clean(self.store.as_ref(), tenant, evidence))
    }

    /// The untrusted memories in the namespaces of `items` (an action's cited memories and their
    /// ancestors) that `actor`'s scope admits and that carry one of the action's values, whatever
    /// their status: a planted email the lifecycle gate quarantined still pushes the value it
    /// carries (issue 34.1: "pushed" is a fact of the store, not only of what the session was
    /// handed). At most [`NEIGHBOURS_SCAN_MAX`] memories of each namespace are scanned, newest
    /// first (known limit: an older planted memory in a larger namespace is not seen here).
    pub fn untrusted_neighbours(&self, actor: &Actor, items: &[MemoryItem], action: &ActionRequest) -> Result<Vec<MemoryItem>, EngineError> {
        let values: Vec<NormValue> = action.values.iter().filter_map(|v| NormValue::new(v.kind, &v.value).ok()).collect();
        let namespaces: BTreeSet<&Namespace> = items.iter().map(MemoryItem::namespace).collect();
        let mut out: Vec<MemoryItem> = Vec::new();
        if values.is_empty() {
            return Ok(out);
        }
        for ns in namespaces {
            let ids = self.store.newest_ids(actor.tenant(), ns, NEIGHBOURS_SCAN_MAX)?;
            let seen = self.neighbours_seen(actor.tenant(), &ids)?;
            // The untrusted ones carrying a value, read afresh for their current scope.
            let carriers: Vec<ItemId> = ids
                .iter()
                .zip(&seen)
                .filter(|(id, folded)| folded.as_ref().is_some_and(|f| values.iter().any(|v| f.carries(v))) && !items.iter().any(|c| c.id() == **id))
                .map(|(id, _)| *id)
                .collect();
            for i in self.items_of(actor.tenant(), &carriers)?.into_iter().flatten() {
                debug_assert_eq!(i.label().integrity(), Integrity::Untrusted);
                if i.scope().admits(actor.id()) {
                    out.push(i);
                }
            }
        }
        debug_assert!(out.iter().all(|i| i.tenant() == actor.tenant()));
        Ok(out)
    }

    /// For each of `ids`, its folded text if it is labelled untrusted (`None` if not, or if the
    /// store no longer has it), as remembered ([`NeighboursSeen`]) or read and remembered.
    fn neighbours_seen(&self, tenant: &TenantId, ids: &[ItemId]) -> Result<Vec<SeenNeighbour>, EngineError> {
        let lock = || self.neighbours_seen.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let known: Vec<Option<SeenNeighbour>> = {
            let seen = lock();
            ids.iter().map(|id| seen.map.get(&(tenant.clone(), *id)).cloned()).collect()
        };
        let missing: Vec<ItemId> = ids.iter().zip(&known).filter(|(_, k)| k.is_none()).map(|(id, _)| *id).collect();
        let read = self.items_of(tenant, &missing)?;
        let mut fresh: HashMap<ItemId, SeenNeighbour> = HashMap::with_capacity(missing.len());
        {
            let mut seen = lock();
            for (id, item) in missing.iter().zip(read) {
                // An id the store did not return (erased since it was listed) is not remembered.
                let Some(item) = item else { continue };
                let folded = (item.label().integrity() == Integrity::Untrusted).then(|| Arc::new(item.folded().clone()));
                seen.remember((tenant.clone(), *id), folded.clone(), item.content().len());
                fresh.insert(*id, folded);
            }
        }
        let out: Vec<SeenNeighbour> = ids.iter().zip(known).map(|(id, k)| k.unwrap_or_else(|| fresh.get(id).cloned().flatten())).collect();
        debug_assert_eq!(out.len(), ids.len());
        Ok(out)
    }

    /// Step 1: the memories `action` cites, sorted out for `actor` by the one readability rule
    /// every door uses ([`Engine::admit_cited`]). More than twice
    /// [`memwarden_core::action::ACTION_CONTEXT_MAX`] ids are not read (the gate refuses the
    /// request as too large).
    fn cited(&self, actor: &Actor, action: &ActionRequest, now: u64, fx: &mut Effects) -> Result<Cited, EngineError> {
        let tenant = actor.tenant();
        let mut ids: Vec<ItemId> = action.context.clone();
        ids.extend(action.values.iter().flat_map(|v| v.sources.iter().copied()));
        ids.sort();
        ids.dedup();
        let mut out = Cited { ids: Vec::new(), items: Vec::with_capacity(ids.len()), unreadable: Vec::new(), not_weighed: Vec::new(), invalid: None };
        if ids.len() <= memwarden_core::action::ACTION_CONTEXT_MAX * 2 {
            let found: Vec<MemoryItem> = self.items_of(tenant, &ids)?.into_iter().flatten().collect();
            // Unknown ids are invalid citations (the first one in id order is named).
            out.invalid = ids.iter().find(|id| !found.iter().any(|i| i.id() == **id)).map(|id| (*id, None));
            for c in self.admit_cited(actor, found, now, fx)? {
                let id = c.item().id();
                let source = action.values.iter().any(|v| v.sources.contains(&id));
                match self.citation(actor, &c, source) {
                    Citation::Weighed => out.items.push(c.view.item),
                    Citation::NotWeighed => out.not_weighed.push(id),
                    Citation::Evidence => out.unreadable.push(id),
                    Citation::Invalid => {
                        // The first invalid id in id order is named; a hold only for an in-scope one.
                        let hold = match c.withheld {
                            Some(Withheld::Stage(h)) => Some(h),
                            Some(Withheld::SessionFloor) => Some(Hold::new(Layer::Engine, "session_floor", Vec::new())),
                            _ => None,
                        };
                        if out.invalid.as_ref().is_none_or(|(first, _)| id < *first) {
                            out.invalid = Some((id, hold));
                        }
                    }
                }
            }
        }
        out.ids = ids;
        debug_assert!(out.not_weighed.iter().all(|id| !out.unreadable.contains(id)));
        debug_assert!(out.items.len() + out.unreadable.len() + out.not_weighed.len() <= out.ids.len());
        Ok(out)
    }

    /// How one cited memory counts, after the readability rule ([`Engine::admit_cited`]) had its
    /// say: handed over, it is weighed; one addressed to the actor and only narrowed at write is
    /// left out; one of the actor's scope that a layer or the session's floor holds back is the
    /// lineage stage's evidence (a context item, with a lineage layer); anything else (unknown,
    /// out of scope, or a value's source the actor may not be handed) is an invalid citation.
    fn citation(&self, actor: &Actor, c: &Candidate, source: bool) -> Citation {
        let evidence = !source && self.stages.iter().any(|s| s.weighs_held_context());
        match &c.withheld {
            None => Citation::Weighed,
            Some(Withheld::Stage(h)) if h.rule == NARROWED_AT_WRITE && !source => Citation::NotWeighed,
            Some(Withheld::Stage(_) | Withheld::SessionFloor) if evidence => Citation::Evidence,
            // A superseded version of the actor's scope: held back, not unknown.
            Some(Withheld::Scope) if evidence && in_reader_scope(Some(c.item()), actor.id()) => Citation::Evidence,
            Some(_) => Citation::Invalid,
        }
    }

    /// Step 2: the cited memories' ancestors along declared parents (at most
    /// [`DECIDE_ANCESTORS_MAX`] looked at, nearest first), appended to `items`: the gate counts
    /// them as cited (a trusted record a note was derived from supports the note's value; an
    /// untrusted one pushes it). Readability is the one rule ([`Engine::admit_cited`]): an
    /// ancestor the actor may be handed is consulted; one of its scope that a layer or its
    /// session's floor holds back never supports anything, but if it is untrusted it still
    /// pushes what it carries (taint does not depend on what the actor may read); one outside
    /// its scope is not consulted.
    fn add_ancestors(&self, actor: &Actor, ids: &[ItemId], items: &mut Vec<MemoryItem>, now: u64, fx: &mut Effects) -> Result<(), EngineError> {
        let mut seen: BTreeSet<ItemId> = ids.iter().copied().collect();
        let mut level: Vec<ItemId> = items.iter().flat_map(|i| i.parents().iter().map(|p| p.id)).collect();
        let mut looked = 0usize;
        while !level.is_empty() && looked < DECIDE_ANCESTORS_MAX {
            level.retain(|id| seen.insert(*id));
            level.truncate(DECIDE_ANCESTORS_MAX - looked);
            looked += level.len();
            let found: Vec<MemoryItem> = self.items_of(actor.tenant(), &level)?.into_iter().flatten().filter(|i| i.scope().admits(actor.id())).collect();
            level = found.iter().flat_map(|i| i.parents().iter().map(|p| p.id)).collect();
            for c in self.admit_cited(actor, found, now, fx)? {
                let consulted = match c.withheld {
                    None => true,
                    Some(_) => c.item().label().integrity() == Integrity::Untrusted && in_reader_scope(Some(c.item()), actor.id()),
                };
                if consulted {
                    items.push(c.view.item);
                }
            }
        }
        debug_assert!(looked <= DECIDE_ANCESTORS_MAX);
        debug_assert!(items.iter().all(|i| i.tenant() == actor.tenant()));
        Ok(())
    }

    /// Step 4: every stage's verdict, in pipeline order; a stage that fails blocks. The authority
    /// layer's stage has none: core computes that verdict from the analysis
    /// ([`Authority::decide_with`]).
    fn stage_verdicts(&self, actor: &Actor, now: u64, input: &DecideInput<'_>, fx: &mut Effects) -> Vec<Verdict> {
        let cx = self.cx(actor, now);
        let mut verdicts = Vec::with_capacity(self.stages.len());
        for s in &self.stages {
            match s.decide(&cx, input, fx) {
                Ok(Some(v)) => verdicts.push(v),
                Ok(None) => {}
                Err(e) => verdicts.push(Verdict::new(Decision::Block, s.layer(), Rule::DecisionError { reason: e.to_string() }, format!("the {} layer failed: {e}", s.layer()))),
            }
        }
        debug_assert!(verdicts.len() <= self.stages.len());
        verdicts
    }

    /// Step 5: commit the decision `outcome` (its log summary `summary`) with its consumed
    /// grants, new elevations and the stages' records (`fx`), in one transaction. If another
    /// decision consumed one of its grants first, this one is refused and logged as such.
    fn commit_decision(&self, actor: &Actor, now: u64, summary: serde_json::Value, outcome: DecisionOutcome, mut fx: Effects) -> Result<(Verdict, Receipt), EngineError> {
        let tenant = actor.tenant();
        let on_behalf_of = outcome.grant_uses().first().map(|u| u.grant.grant.user.clone());
        for ev in fx.events_mut() {
            if let lineage::StoredEvent::Action(a) = ev {
                a.on_behalf_of.clone_from(&on_behalf_of);
            }
        }
        let mutation = |outcome: DecisionOutcome| Mutation::Decision { actor: actor.id().clone(), tenant: tenant.clone(), action: summary.clone(), outcome };
        // The decision, its consumed grants and new elevations, and the stages' records of it
        // commit together.
        let events = fx.events_mut().clone();
        fx.primary(mutation(outcome.clone()));
        match self.finish_one(tenant, now, fx) {
            Ok(r) => Ok((outcome.verdict().clone(), r)),
            Err(EngineError::Commit(CommitError::GrantAlreadyUsed(nonce))) => {
                // Another decision consumed the grant first: this one is refused, and logged as such.
                let outcome = outcome.grant_spent_first(&nonce.to_string());
                let mut fx = Effects::default();
                fx.primary(mutation(outcome.clone()));
                for mut ev in events {
                    if let lineage::StoredEvent::Action(a) = &mut ev {
                        a.on_behalf_of = None;
                    }
                    fx.event(ev);
                }
                let r = self.finish_one(tenant, now, fx)?;
                Ok((outcome.verdict().clone(), r))
            }
            Err(e) => Err(e),
        }
    }

}
