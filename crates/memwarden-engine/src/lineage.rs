//! The lineage layer inside the engine: one provenance graph ([`LineageGraph`]) per tenant,
//! persisted as the store's items plus its lineage events and rebuilt from them, in log order,
//! the first time the tenant is used after a start.
//!
//! The store is the truth. The graph is a materialised view, like the vector index: every
//! memory the store holds is replayed as a write, and every lineage event (`read_by` edges of a
//! search, a revocation, an action-gate decision) the store committed is replayed at its log
//! position, so the rebuilt graph equals the one the engine held before it stopped. Live changes
//! are applied right after their commit. If a live apply fails (a race with a rebuild, a bug),
//! the tenant's graph is dropped and rebuilt on next use; a record the rebuild cannot apply is
//! left out of the graph, and a record unknown to the graph is never readable and never supports
//! an action: every lineage error denies.

use crate::EngineError;
use memwarden_core::prelude::*;
use memwarden_lineage::{
    ActionEvent, DenyReason, EraseEvent, GateDecision, GateRequest, LineageConfig, LineageGraph, Ranked, RecordKind, RegisterPrincipal, RevokeEvent,
    WriteEvent,
};
use memwarden_store::{Mutation, OrderedItem, PAGE_ROWS_MAX, Store};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

/// Over-fetch factor of guarded search before the lineage rerank: the store returns up to
/// `k * RERANK_FETCH_FACTOR` eligible hits by similarity, the graph reranks them by
/// `similarity × path trust` and keeps `k`.
pub const RERANK_FETCH_FACTOR: usize = 4;

/// A lineage event as the store keeps it (the lineage crate's own event types; ids and scores,
/// never memory text).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub(crate) enum StoredEvent {
    /// `read_by` edges for what one search returned.
    Reads {
        /// The reader.
        reader: PrincipalId,
        /// What was returned, with its three scores.
        selected: Vec<Ranked>,
        /// When.
        at_ms: u64,
    },
    /// A revocation (propagated eagerly to every descendant).
    Revoke(RevokeEvent),
    /// An action the gate decided.
    Action(ActionEvent),
    /// An erasure (committed with the store's [`Mutation::Erasure`], not as a lineage row).
    Erase(EraseEvent),
    /// A promotion (readers widened), committed with the store's [`Mutation::Promotion`].
    Promote(memwarden_lineage::PromoteEvent),
    /// A memory reported poisoned (propagated eagerly to every descendant, which is marked
    /// affected).
    FlagPoisoned(memwarden_lineage::FlagPoisonedEvent),
    /// A memory verified by a user or an allow-listed tool.
    Verify(memwarden_lineage::VerifyEvent),
}

/// The text a tombstone is replayed with (the graph needs non-empty text; the erasure that
/// follows in log order removes it again).
const TOMBSTONE_TEXT: &str = memwarden_store::TOMBSTONE_CONTENT;

impl StoredEvent {
    pub(crate) fn mutation(&self, tenant: &TenantId) -> Result<Mutation, EngineError> {
        let event = serde_json::to_value(self).map_err(|e| EngineError::Lineage(format!("encoding a lineage event: {e}")))?;
        Ok(Mutation::Lineage { tenant: tenant.clone(), event })
    }
}

/// The node type a memory takes in the graph.
pub(crate) fn record_kind(item: &MemoryItem) -> RecordKind {
    match item.route() {
        Route::ToolObservation | Route::ExternalObservation | Route::EnvironmentObservation => RecordKind::Resource,
        Route::Dialogue | Route::MemoryHandoff | Route::CrossAgent => RecordKind::Message,
        _ => RecordKind::Memory,
    }
}

/// One tenant's graph.
pub(crate) type TenantGraph = Arc<Mutex<LineageGraph>>;

/// The per-tenant graphs, each with the store's [`Store::foreign_version`] it was built at: a
/// graph is a view of the store, never trusted once another process has written the tenant.
pub(crate) struct Lineage {
    config: LineageConfig,
    graphs: Mutex<HashMap<TenantId, (TenantGraph, u64)>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while a graph was locked may have left it half-changed: callers that find it
    // poisoned still get it, but `Lineage::graph` drops poisoned graphs and rebuilds them.
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Lineage {
    pub(crate) fn new(config: LineageConfig) -> Result<Self, EngineError> {
        config.validate().map_err(|e| EngineError::Lineage(format!("lineage configuration: {e}")))?;
        Ok(Self { config, graphs: Mutex::new(HashMap::new()) })
    }

    /// The configuration.
    pub(crate) fn config(&self) -> &LineageConfig {
        &self.config
    }

    /// The tenant's graph, rebuilt from the store if not loaded (or dropped after an error).
    /// A graph built before another process wrote the tenant is brought up to date by applying
    /// just the entries the store reports as foreign ([`Store::foreign_entries`]), under the
    /// graph's lock; when the store no longer knows them, or applying fails, it is rebuilt.
    pub(crate) fn graph(&self, store: &dyn Store, tenant: &TenantId) -> Result<TenantGraph, EngineError> {
        // Read before the rebuild: a foreign write landing during it moves the version again,
        // so the next use rebuilds once more (never a graph newer than its version claims).
        let version = store.foreign_version(tenant);
        let cached = lock(&self.graphs).get(tenant).map(|(g, at)| (Arc::clone(g), *at));
        if let Some((g, at)) = cached
            && !g.is_poisoned()
        {
            if at == version {
                return Ok(g);
            }
            if self.catch_up(store, tenant, &g) {
                return Ok(g);
            }
        }
        let rebuilt = Arc::new(Mutex::new(rebuild(store, tenant, self.config.clone())?));
        let mut graphs = lock(&self.graphs);
        // Another thread may have rebuilt it meanwhile at this version: keep the one shared.
        let (g, at) = graphs.entry(tenant.clone()).or_insert_with(|| (Arc::clone(&rebuilt), version));
        if g.is_poisoned() || *at < version {
            *g = rebuilt;
            *at = version;
        }
        Ok(Arc::clone(g))
    }

    /// Apply to the cached graph `g` the entries other processes appended since its version.
    /// Under `g`'s lock the version is read again, so two threads never apply the same entries
    /// twice. Returns whether `g` is now current as of the version it records.
    fn catch_up(&self, store: &dyn Store, tenant: &TenantId, g: &TenantGraph) -> bool {
        let mut locked = lock(g);
        let at = match lock(&self.graphs).get(tenant) {
            Some((cur, at)) if Arc::ptr_eq(cur, g) => *at,
            _ => return false, // replaced or dropped meanwhile
        };
        let Some((now, entries)) = store.foreign_entries(tenant, at) else { return false };
        if !entries.is_empty() && replay(store, tenant, &mut locked, Some(&entries)).is_err() {
            drop(locked);
            self.forget(tenant);
            return false;
        }
        drop(locked);
        if let Some((cur, v)) = lock(&self.graphs).get_mut(tenant)
            && Arc::ptr_eq(cur, g)
            && *v < now
        {
            *v = now;
        }
        true
    }

    /// Drop a tenant's graph (after an apply error): the next use rebuilds it from the store.
    pub(crate) fn forget(&self, tenant: &TenantId) {
        lock(&self.graphs).remove(tenant);
    }

    /// Run `f` on the tenant's graph; if it fails, the graph is dropped (rebuilt on next use)
    /// and the error returned. `f` fails only when the graph itself failed: a refusal (a record
    /// the reader may not read) is a value, not an error.
    pub(crate) fn with<T>(&self, store: &dyn Store, tenant: &TenantId, f: impl FnOnce(&mut LineageGraph) -> Result<T, EngineError>) -> Result<T, EngineError> {
        let g = self.graph(store, tenant)?;
        let mut locked = lock(&g);
        let r = f(&mut locked);
        drop(locked);
        if r.is_err() {
            self.forget(tenant);
        }
        r
    }
}

fn err(what: &str, e: impl std::fmt::Display) -> EngineError {
    EngineError::Lineage(format!("{what}: {e}"))
}

/// Register `p` in `g` unless it is there.
pub(crate) fn ensure_principal(g: &mut LineageGraph, p: &Principal) -> Result<(), EngineError> {
    if g.principal(&p.id).is_none() {
        g.register_principal(RegisterPrincipal { id: p.id.clone(), kind: p.kind, reputation: None }).map_err(|e| err("registering a principal", e))?;
    }
    Ok(())
}

/// Apply a committed item (idempotent: a record already in the graph is left alone).
pub(crate) fn apply_item(g: &mut LineageGraph, item: &MemoryItem) -> Result<(), EngineError> {
    apply_item_inner(g, item, false)
}

fn apply_item_inner(g: &mut LineageGraph, item: &MemoryItem, tombstone: bool) -> Result<(), EngineError> {
    if g.record(item.id()).is_some() {
        return Ok(());
    }
    let mut ev = WriteEvent::from_item(item, record_kind(item));
    if tombstone {
        TOMBSTONE_TEXT.clone_into(&mut ev.text);
    }
    if item.status() == Status::Revoked {
        // Replaying a memory revoked since: the store keeps only its revoked scope, so it is
        // replayed unnarrowed, and its revocation event (which follows in log order) clears it
        // and recomputes its descendants, each narrowed by its own stored readers, exactly as
        // the revocation did at the time.
        ev.readers = None;
    }
    let fx = g.apply_write(ev).map_err(|e| err(&format!("recording memory {}", item.id()), e))?;
    // Labels never rise through derivation: the graph's scope is never wider than the stored one.
    debug_assert!(
        item.status() == Status::Revoked || !matches!(item.scope().readers, Readers::Only(_)) || !matches!(fx.record.scope().readers, Readers::All),
        "the lineage scope of {} is wider than its stored scope",
        item.id()
    );
    g.drain();
    Ok(())
}

/// Whether `inner` ⊆ `outer`.
pub(crate) fn readers_within(inner: &Readers, outer: &Readers) -> bool {
    inner.intersect(outer) == *inner
}

/// Apply a committed event. A read of a record that stopped being readable after the search
/// (revoked meanwhile) records only what is still readable.
pub(crate) fn apply_event(g: &mut LineageGraph, ev: StoredEvent) -> Result<(), EngineError> {
    match ev {
        StoredEvent::Reads { reader, selected, at_ms } => {
            let still: Vec<Ranked> = selected.into_iter().filter(|r| g.can_read(&reader, r.id).is_ok()).collect();
            g.record_reads(&reader, &still, at_ms).map_err(|e| err("recording reads", e))?;
        }
        StoredEvent::Revoke(r) => {
            if g.record(r.id).is_some_and(|s| !s.revoked()) {
                g.apply_revocation(r).map_err(|e| err("recording a revocation", e))?;
            }
        }
        StoredEvent::Action(a) => {
            if !g.actions().any(|x| x.id == a.id) {
                g.apply_action(a).map_err(|e| err("recording an action", e))?;
            }
        }
        StoredEvent::Erase(e) => {
            if !g.erasures().iter().any(|x| x.erasure_id == e.erasure_id) {
                g.apply_erasure(e).map_err(|e| err("recording an erasure", e))?;
            }
        }
        StoredEvent::FlagPoisoned(f) => {
            if g.record(f.id).is_some() {
                g.apply_poison_flag(f).map_err(|e| err("recording a poison flag", e))?;
            }
        }
        StoredEvent::Verify(v) => {
            if g.record(v.id).is_some_and(|s| !s.erased()) {
                g.apply_verification(v).map_err(|e| err("recording a verification", e))?;
            }
        }
        StoredEvent::Promote(p) => {
            // Replayed items carry their stored (already widened) readers: apply only what the
            // graph does not have yet.
            if g.record(p.id).is_some_and(|s| !readers_within(&p.readers, &s.scope().readers)) {
                g.apply_promotion(p).map_err(|e| err("recording a promotion", e))?;
            }
        }
    }
    g.drain();
    Ok(())
}

/// Rebuild a tenant's graph from the store: principals, then items and lineage events merged by
/// log index. A revoked item without a lineage revocation event (a store written before the
/// lineage layer existed) is revoked at the end, at its creation time.
fn rebuild(store: &dyn Store, tenant: &TenantId, config: LineageConfig) -> Result<LineageGraph, EngineError> {
    let mut g = LineageGraph::new(config).map_err(|e| err("lineage configuration", e))?;
    replay(store, tenant, &mut g, None)?;
    Ok(g)
}

/// Replay the tenant's principals, then its items and lineage events merged by log index, into
/// `g`: all of them (`only` = `None`, a rebuild), or only those written by the log entries
/// `only` lists (sorted; another process's entries a cached graph has not seen). Applying is
/// idempotent for items and for every event but reads, which is why a catch-up names its
/// entries rather than replaying everything after a point.
fn replay(store: &dyn Store, tenant: &TenantId, g: &mut LineageGraph, only: Option<&[u64]>) -> Result<(), EngineError> {
    for p in store.principals(tenant)? {
        ensure_principal(g, &p)?;
    }
    let wanted = |idx: u64| only.is_none_or(|o| o.binary_search(&idx).is_ok());
    // A catch-up starts just before the first entry it needs.
    let start = only.and_then(|o| o.first()).and_then(|first| first.checked_sub(1));
    let mut items: Vec<OrderedItem> = Vec::new();
    let mut events: Vec<(u64, serde_json::Value)> = Vec::new();
    let (mut items_after, mut events_after) = (start, start);
    let (mut items_done, mut events_done) = (false, false);
    let mut revoked_in_store: Vec<(ItemId, PrincipalId, u64)> = Vec::new();
    loop {
        if items.is_empty() && !items_done {
            items = store.items_in_order(tenant, items_after, PAGE_ROWS_MAX)?;
            items.reverse(); // pop from the end = oldest first
            items_done = items.is_empty();
        }
        if events.is_empty() && !events_done {
            events = store.lineage_events(tenant, events_after, PAGE_ROWS_MAX)?;
            events.reverse();
            events_done = events.is_empty();
        }
        let next_item = items.last().map(|o| o.log_index);
        let next_event = events.last().map(|(i, _)| *i);
        match (next_item, next_event) {
            (None, None) => break,
            (Some(i), e) if e.is_none_or(|e| i < e) => {
                let Some(o) = items.pop() else { break };
                items_after = Some(o.log_index);
                if !wanted(o.log_index) {
                    continue;
                }
                if o.item.status() == Status::Revoked && !o.erased {
                    revoked_in_store.push((o.item.id(), o.item.scope().owner.clone(), o.item.created_ms()));
                }
                // A record the graph refuses stays out of it: unknown to the graph means never
                // readable and never a support.
                let _ = apply_item_inner(g, &o.item, o.erased);
            }
            _ => {
                let Some((idx, value)) = events.pop() else { break };
                events_after = Some(idx);
                if !wanted(idx) {
                    continue;
                }
                // An event the graph refuses on replay is skipped: a read or action record is
                // audit only (the verdict log keeps it), and a revocation is also re-derived
                // from the stored status below.
                if let Ok(ev) = serde_json::from_value::<StoredEvent>(value) {
                    let _ = apply_event(g, ev);
                }
            }
        }
    }
    for (id, owner, at_ms) in revoked_in_store {
        if g.record(id).is_some_and(|s| !s.revoked()) {
            apply_event(g, StoredEvent::Revoke(RevokeEvent { id, revoker: owner, at_ms }))?;
        }
    }
    Ok(())
}

/// The lineage gate's verdict on an action, as a verdict the authority layer can compose with.
pub(crate) fn verdict(d: &GateDecision) -> Verdict {
    let gate_rule = serde_json::to_value(d.rule).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_else(|| "unknown".into());
    Verdict {
        decision: d.decision,
        layer: Layer::Lineage,
        rule: Rule::Lineage { gate_rule, cause: d.cause.map(|c| c.as_str().to_owned()) },
        cause: d.explanation.clone(),
        supporting: d.supporting.clone(),
        affected: d.affected.iter().map(|a| a.id).collect(),
        pushed: Vec::new(),
        ask: Vec::new(),
        threshold: Some(d.threshold.get()),
        layers: Vec::new(),
    }
}

/// The gate request for an action whose supports are `supports` (the proposal's context items
/// and value sources) with `context` (what the session was handed besides); `elevated` are the
/// supports whose pushed values the authority layer accepted.
pub(crate) fn gate_request(
    agent: &PrincipalId,
    action: &ActionRequest,
    supports: Vec<ItemId>,
    context: Vec<ItemId>,
    elevated: impl IntoIterator<Item = ItemId>,
) -> GateRequest {
    GateRequest { agent: agent.clone(), kind: action.kind, risk: action.risk, retrieved: supports, context, elevated: elevated.into_iter().collect() }
}

/// Why the graph refuses a read, as an engine error (not found: the caller learns nothing).
pub(crate) fn deny(id: ItemId, _reason: DenyReason) -> EngineError {
    EngineError::NotFound(id)
}

/// The engine's read rule over the graph, for every door that hands a memory over (get, list,
/// history, search): MAP-Graph's `CanRead`, and a memory reported poisoned, or derived from one,
/// is withheld. A poison report is specific evidence; MAP-Graph alone only demotes such a memory,
/// and a session handed it would carry its poisoned path into everything it writes next.
pub(crate) fn readable(g: &LineageGraph, reader: &PrincipalId, id: ItemId) -> bool {
    g.can_read(reader, id).is_ok() && g.record(id).is_some_and(|r| !r.summary().poisoned)
}

/// `ids` split into those `reader` may read and a count of the others.
pub(crate) fn split_readable(g: &LineageGraph, reader: &PrincipalId, ids: impl Iterator<Item = ItemId>) -> (Vec<ItemId>, usize) {
    let mut shown = Vec::new();
    let mut hidden = 0usize;
    for id in ids {
        if g.can_read(reader, id).is_ok() {
            shown.push(id);
        } else {
            hidden += 1;
        }
    }
    (shown, hidden)
}

/// The lineage layer's product gate: MAP-Graph's action gate asked once per safety-relevant
/// value, over the memories that carry or push that value (never over unrelated context).
///
/// - A value no cited memory carries, and no untrusted memory pushes, gets no objection here:
///   the authority layer's positive-support rule decides it (an unrelated untrusted item in the
///   context neither blocks the action nor lifts it).
/// - A value the acting user asked for is the user's: its carriers' ancestry does not matter.
/// - For an action below high risk, a value the authority layer found positively supported
///   without its pushers (the user's own trusted statement of it, `k` independent trusted
///   domains) is elevated here as MAP-Graph elevates a corroborated one: an untrusted memory
///   that restates it (a note of a session that was handed an unrelated e-mail) did not supply
///   it, so its untrusted label is waived for this decision. Evidence (revoked, poisoned,
///   permission) never is; a high-risk action keeps the objection.
/// - Evidence on a carrier's path (revoked, poisoned, erased, a permission the agent lacks, an
///   id the graph does not know) blocks.
/// - A trust objection alone (an untrusted ancestor, a pending propagation, path trust below
///   the threshold, no carrier surviving) asks the user for exactly that value, so a grant for
///   the tuple resolves it.
///
/// Actions without values are checked over every cited memory, for evidence only.
pub(crate) fn product_verdict(
    analysis: &memwarden_core::authority::ActionAnalysis,
    agent: &PrincipalId,
    decide: &mut dyn FnMut(&GateRequest) -> GateDecision,
) -> Verdict {
    use memwarden_core::authority::Support;
    let class = &analysis.class.action;
    let mut asks = Vec::new();
    let mut evaluated: Vec<ItemId> = Vec::new();
    let mut asked_cause = String::new();
    let gate = |supports: Vec<ItemId>, elevated: bool| GateRequest {
        agent: agent.clone(),
        kind: class.kind,
        risk: class.risk,
        elevated: if elevated { supports.iter().copied().collect() } else { std::collections::BTreeSet::new() },
        retrieved: supports,
        context: Vec::new(),
    };
    for v in &analysis.values {
        let supports: Vec<ItemId> = if v.pseudo {
            analysis.cited.clone()
        } else {
            let mut s: Vec<ItemId> = v.carriers.iter().chain(&v.pushed_by).copied().collect();
            s.sort();
            s.dedup();
            s
        };
        if supports.is_empty() || v.support.iter().any(|s| matches!(s, Support::UserRequest { .. })) {
            continue;
        }
        // Elevated for this gate: an elevation (k domains, a grant), or, below high risk,
        // positive support that does not rest on the pushers (the user's statement, k trusted
        // domains): an untrusted memory restating such a value did not supply it. A high-risk
        // action on agent-relayed evidence keeps MAP-Graph's objection (re-verify).
        let d = decide(&gate(supports.clone(), v.elevated || (v.supported && !v.pseudo && class.risk != Risk::High)));
        evaluated.extend(supports);
        if d.decision == Decision::Allow {
            continue;
        }
        if d.cause.is_some_and(is_evidence) {
            let mut out = verdict(&d);
            out.decision = Decision::Block;
            out.cause = format!("value {}: {}", v.key, d.explanation);
            return out;
        }
        if v.pseudo {
            // No value to ask about: trust alone is the authority layer's call.
            continue;
        }
        asks.push(v.ask(&analysis.class.tool, analysis.amount.as_ref()));
        if asked_cause.is_empty() {
            asked_cause = format!("value {}: {}", v.key, d.explanation);
        }
    }
    evaluated.sort();
    evaluated.dedup();
    let rule = |gate_rule: &str| Rule::Lineage { gate_rule: gate_rule.to_owned(), cause: None };
    let mut out = Verdict {
        decision: Decision::Allow,
        layer: Layer::Lineage,
        rule: rule("value_paths_clear"),
        cause: "no carrier of an action value has revoked, poisoned, untrusted or unreadable ancestry".into(),
        supporting: evaluated,
        affected: Vec::new(),
        pushed: Vec::new(),
        ask: Vec::new(),
        threshold: None,
        layers: Vec::new(),
    };
    if !asks.is_empty() {
        out.decision = Decision::AskUser;
        out.rule = rule("value_path_untrusted");
        out.cause = asked_cause;
        out.ask = asks;
    }
    out
}

/// Most cited memories an action's context-evidence check evaluates (the rest deny).
pub(crate) const CONTEXT_EVIDENCE_MAX: usize = 2 * memwarden_core::action::ACTION_CONTEXT_MAX;

/// The context-level evidence rule (MAP-Graph's rule 3 over the whole cited context, evidence
/// only): every memory the action cites, whether or not it carries a value, is checked for
/// evidence on its path, and the outcome follows the gate's cause table
/// ([`memwarden_lineage::cause_outcome`]) for the action's class:
///
/// - revoked, poisoned (on the memory or its ancestry): **Block**;
/// - a cited memory of the actor's scope that it may not read (private to someone else on its
///   path, a pending propagation, or held back by another layer: `unreadable`, resolved by the
///   engine — what get answers `403 withheld` for): a disclosure (answer, inform) is
///   **Redact**ed — it may go out without anything from those memories, which are listed as
///   `affected` — a low- or medium-risk act is **Reverify**, a high-risk act is **Block**.
///   (A cited id outside the actor's scope, or unknown, never reaches this rule: the engine
///   refuses the request as invalid, the same answer for both.)
///
/// A trust objection (untrusted ancestry) is not evidence and is never raised here: the per-value
/// rule ([`product_verdict`]) asks about values, and unrelated untrusted context neither blocks
/// nor lifts an action. `None` when nothing cited has evidence against it.
pub(crate) fn context_verdict(g: &LineageGraph, agent: &PrincipalId, class: &ActionRequest, cited: &[ItemId], unreadable: &[ItemId]) -> Option<Verdict> {
    use memwarden_lineage::GateCause as C;
    let (kind, risk) = (class.kind, class.risk);
    // `unreadable` is a subset of `cited`: the bound is on what the action cites.
    debug_assert!(unreadable.iter().all(|id| cited.contains(id)), "held-back items are cited items");
    if cited.len() > CONTEXT_EVIDENCE_MAX {
        return Some(verdict_of(Decision::Block, "too_many_supports", format!("more than {CONTEXT_EVIDENCE_MAX} cited memories to check")));
    }
    let mut worst: Option<(Decision, C, ItemId)> = None;
    let mut consider = |d: Decision, c: C, id: ItemId| {
        let stricter = match worst {
            None => true,
            Some((wd, wc, _)) => d > wd || (d == wd && c < wc),
        };
        if stricter {
            worst = Some((d, c, id));
        }
    };
    let mut affected: Vec<ItemId> = Vec::new();
    // Known to the graph: its own causes (the gate's view of a context message). Elevated, so
    // an untrusted label alone raises nothing here.
    let known: Vec<ItemId> = cited.iter().copied().filter(|id| g.record(*id).is_some()).collect();
    for chunk in known.chunks(memwarden_core::action::ACTION_CONTEXT_MAX) {
        let request = GateRequest { agent: agent.clone(), kind, risk, retrieved: Vec::new(), context: chunk.to_vec(), elevated: chunk.iter().copied().collect() };
        let d = g.decide(&request);
        if d.rule == memwarden_lineage::GateRule::InvalidRequest {
            // Errors deny.
            return Some(verdict_of(Decision::Block, d.cause.map_or("invalid_request", |c| c.as_str()), d.explanation));
        }
        for e in &d.evaluations {
            for c in e.causes.iter().copied().filter(|c| is_evidence(*c)) {
                if let Some(out) = memwarden_lineage::cause_outcome(c, kind, risk) {
                    consider(out, c, e.id);
                    affected.push(e.id);
                }
            }
        }
    }
    // Not readable by the actor in the store (whatever the graph says): one cause for all.
    if let Some(out) = memwarden_lineage::cause_outcome(C::PermissionInvalid, kind, risk) {
        for id in unreadable {
            consider(out, C::PermissionInvalid, *id);
            affected.push(*id);
        }
    }
    let (decision, cause, id) = worst?;
    debug_assert!(decision != Decision::Allow, "a cause never allows");
    affected.sort();
    affected.dedup();
    let what = match cause {
        C::PermissionInvalid | C::PrivateToOther => format!("context item {id} is withheld from {agent}"),
        c => format!("context item {id} has a {} path", c.as_str()),
    };
    let tail = match decision {
        Decision::Redact => "; the disclosure may go out without anything from the affected memories",
        Decision::Reverify => "; re-check the evidence before acting",
        _ => "",
    };
    let mut v = verdict_of(decision, cause.as_str(), format!("{what}{tail}"));
    v.affected = affected;
    Some(v)
}

fn verdict_of(decision: Decision, cause: &str, explanation: String) -> Verdict {
    Verdict::new(decision, Layer::Lineage, Rule::Lineage { gate_rule: "context_evidence".into(), cause: Some(cause.to_owned()) }, explanation)
}

/// Causes that are evidence against a support (not a judgement of its trust).
fn is_evidence(c: memwarden_lineage::GateCause) -> bool {
    use memwarden_lineage::GateCause as C;
    match c {
        C::Revoked | C::Poisoned | C::PermissionInvalid | C::PrivateToOther | C::Erased | C::UnknownSupport | C::TooManySupports => true,
        C::PropagationPending | C::Untrusted => false,
    }
}
