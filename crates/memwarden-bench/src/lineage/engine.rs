//! The `full` row: each task played through the shipped engine (`Engine` opened with
//! `EngineConfig::for_preset(Preset::Full)` on a store of its own), not a composition of the
//! layers written for the benchmark.
//!
//! How the round maps onto the engine's operations (one tenant per task, every principal of the
//! task registered with its kind; each role works in one session of its own):
//!
//! | round | engine |
//! | --- | --- |
//! | a source document | `add` by its owner in the `sources` namespace (never searched), readers as declared |
//! | a role reads a source | `get` by the role (the source is handed to its session), then its capture: `add` by the role, `observed_from` the source |
//! | a tool run | `add` by the tool principal itself (the tool vouches for its own output), `derived_from` its source |
//! | an earlier memory, a notice, a role's output | `add` by its writer with its parents (`derived_from` / `summarized_from`) and declared readers |
//! | the conversation shown to a role | `get` of each forwarded message by the role (what it may not read is not shown) |
//! | retrieval | `search` by the role for the task's request, k = 5 |
//! | revocation, poison flag, verification | `revoke`, `flag_poisoned`, `verify` by the principal the timeline names |
//! | the last role's proposal | `decide`: the task's tool is registered with the task's class; the request cites what the role used, the forwarded messages it was shown or told are withheld, and what its search reported withheld (the engine's context rule weighs the withheld ones), the value with the cited memories that carry it |
//!
//! A parent the writer may not read is not declared (the engine refuses it); a write the engine
//! refuses (the lifecycle write gate, say) leaves the record out of the engine, so later records
//! cannot cite it. Search runs the engine's hybrid retrieval (vector + BM25) with the
//! feature-hashing embedder; the benchmark's own semantic scorer is used only for the evaluator's
//! ground truth (which records an unfiltered top 5 would have held). The "withheld but relevant"
//! records are the engine's own: what its search reported withheld (`withheld_memories`) and the
//! forwarded messages its get answered `403 withheld` for; nothing comes from the benchmark.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use memwarden_core::action::{ActionRequest, ActionValue, Decision};
use memwarden_core::ids::{ItemId, Namespace, PrincipalId, SessionId, TenantId};
use memwarden_core::item::{MemoryItem, ParentRef, Route, WriteRequest};
use memwarden_core::normalize::{NormValue, ValueKind};
use memwarden_core::principal::{Principal, PrincipalKind, ToolAction, ValueSpec};
use memwarden_engine::{Actor, Engine, EngineConfig, EngineError, Preset};

use super::methods::{edge_kind, pid};
use super::sim::{BackendDecision, DecideInput, K, Layers, Memory, RecKind, Retrieval, World, count_reads, similarity, top_k};
use super::task::{PrincipalClass, TrustLabel};
use crate::BenchError;
use memwarden_engine::embed::{Embedder, HashEmbedder};

/// Dimensions of the feature-hashing embedder the engine searches with.
pub const EMBED_DIMS: usize = 256;

/// Where the store of each task's engine lives: `/dev/shm` when the machine has it (a faster
/// store, same engine), else the system's temporary directory.
fn temp_dir() -> Result<tempfile::TempDir, BenchError> {
    let shm = std::path::Path::new("/dev/shm");
    let t = if shm.is_dir() { tempfile::Builder::new().prefix("mw-lineage-").tempdir_in(shm) } else { tempfile::tempdir() };
    t.map_err(|e| BenchError::Io(format!("cannot create a temporary directory: {e}")))
}

/// Counters over every task an [`EngineMemory`] played (for the report).
#[derive(Debug, Default)]
pub struct EngineStats {
    /// Records the engine refused to store.
    pub writes_refused: AtomicU64,
    /// Revocations, poison flags and verifications the engine refused.
    pub events_refused: AtomicU64,
}

/// One task's engine and the map from the round's records to the engine's memories.
pub struct EngineMemory {
    engine: Engine,
    tenant: TenantId,
    memories: Namespace,
    sources: Namespace,
    /// One session per principal.
    actors: BTreeMap<String, Actor>,
    /// Record index → the engine's memory.
    items: HashMap<usize, MemoryItem>,
    /// The engine's id → record index.
    index: HashMap<ItemId, usize>,
    layers: Option<Layers>,
    stats: Option<Arc<EngineStats>>,
    /// Records some principal's get was answered `403 withheld` for: (principal, record).
    told_withheld: std::sync::Mutex<BTreeSet<(String, usize)>>,
    /// Declared last: dropped after the engine (which saves its indexes on drop).
    _tmp: tempfile::TempDir,
}

/// A session id for `who` in this task (one per principal).
fn session_of(who: &str) -> Result<SessionId, BenchError> {
    SessionId::new(&format!("s-{who}")).map_err(|e| BenchError::Invalid(format!("session for {who:?}: {e}")))
}

impl EngineMemory {
    /// A fresh engine under the shipped `full` preset for `w`'s task, its principals registered.
    pub fn new(w: &World<'_>, stats: Option<Arc<EngineStats>>, embedder: Option<Arc<dyn Embedder>>) -> Result<Self, BenchError> {
        let full = EngineConfig::for_preset(Preset::Full)?;
        crate::assert_full_preset(&full)?;
        // A strictly increasing clock: every call is a distinct millisecond.
        let tick = Arc::new(AtomicU64::new(1_800_000_000_000));
        let clock: Arc<dyn Fn() -> u64 + Send + Sync> = Arc::new(move || tick.fetch_add(1, Ordering::Relaxed));
        let embedder: Arc<dyn Embedder> = embedder.unwrap_or_else(|| Arc::new(HashEmbedder::new(EMBED_DIMS)));
        let tmp = temp_dir()?;
        let engine = Engine::open(tmp.path(), EngineConfig { embedder: Some(embedder), clock, query_cache_entries: 0, hybrid: true, ..full })?;
        let tenant = TenantId::new("bench").map_err(|e| BenchError::Invalid(e.to_string()))?;
        let ns = |n: &str| Namespace::new(n).map_err(|e| BenchError::Invalid(e.to_string()));
        let a = &w.task.action;
        let class = ToolAction {
            kind: a.kind,
            risk: a.risk,
            values: vec![ValueSpec { key: a.value_key.clone(), kind: ValueKind::Account, required: false }],
            moves_money: false,
            support_k: 1,
            support_k_from_amount: None,
        };
        let mut registered: Vec<Principal> = Vec::new();
        // Users sign grants; the benchmark issues none, but a user must have a key.
        let user_key = ed25519_dalek::SigningKey::from_bytes(&[0x4c; 32]).verifying_key().to_bytes();
        let mk = |id: &str, kind: PrincipalKind, allow_listed: bool| -> Result<Principal, BenchError> {
            let public_key = (kind == PrincipalKind::User).then_some(user_key);
            Ok(Principal { id: pid(id)?, tenant: tenant.clone(), kind, domain: None, allow_listed, public_key, action: None })
        };
        for r in &w.task.roles {
            registered.push(mk(r, PrincipalKind::Agent, false)?);
        }
        for p in &w.task.principals {
            let kind = match p.class {
                PrincipalClass::User => PrincipalKind::User,
                PrincipalClass::Tool => PrincipalKind::Tool,
                PrincipalClass::External => PrincipalKind::Source,
            };
            registered.push(mk(&p.id, kind, p.allow_listed)?);
        }
        // The action's tool, classed by its registration (the system classes actions): the
        // task's principal of that name if there is one, else a tool of its own.
        match registered.iter().position(|p| p.id.as_str() == a.tool) {
            Some(i) => match registered.get_mut(i) {
                Some(p) if p.kind == PrincipalKind::Tool => p.action = Some(class),
                _ => return Err(BenchError::Invalid(format!("task {}: the action's tool {} is not a tool", w.task.id, a.tool))),
            },
            None => registered.push(Principal { action: Some(class), ..mk(&a.tool, PrincipalKind::Tool, false)? }),
        }
        let mut actors = BTreeMap::new();
        for p in registered {
            let id = p.id.clone();
            engine.register_principal(p)?;
            actors.insert(id.as_str().to_owned(), engine.authenticate_session(&tenant, &id, session_of(id.as_str())?)?);
        }
        Ok(Self {
            engine,
            tenant,
            memories: ns("lineage")?,
            sources: ns("sources")?,
            actors,
            items: HashMap::new(),
            index: HashMap::new(),
            layers: None,
            stats,
            told_withheld: std::sync::Mutex::new(BTreeSet::new()),
            _tmp: tmp,
        })
    }

    fn actor(&self, who: &str) -> Result<&Actor, BenchError> {
        self.actors.get(who).ok_or_else(|| BenchError::Invalid(format!("unknown principal {who}")))
    }

    /// `who` reads record `r` through the engine (handed to its session); `false` if refused.
    fn read(&self, who: &str, r: usize) -> Result<bool, BenchError> {
        let Some(it) = self.items.get(&r) else { return Ok(false) };
        match self.engine.get(self.actor(who)?, &it.id()) {
            Ok(_) => Ok(true),
            // Held back by a layer (a 403 `withheld` since issue 34.8): refused, and the
            // principal knows the memory exists (it may cite it).
            Err(EngineError::Withheld(_)) => {
                self.told_withheld.lock().map_err(|_| BenchError::Invalid("lock poisoned".into()))?.insert((who.to_owned(), r));
                Ok(false)
            }
            // Not readable: refused.
            Err(EngineError::NotFound(_)) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    fn refused_event(&self, e: EngineError) -> Result<(), BenchError> {
        match e {
            EngineError::NotFound(_) | EngineError::Withheld(_) | EngineError::Forbidden(_) | EngineError::Invalid(_) => {
                if let Some(s) = &self.stats {
                    s.events_refused.fetch_add(1, Ordering::Relaxed);
                }
                Ok(())
            }
            e => Err(e.into()),
        }
    }

    fn rec_item(&self, r: usize) -> Option<ItemId> {
        self.items.get(&r).map(MemoryItem::id)
    }

    /// The engine's tenant (for tests).
    pub fn tenant(&self) -> &TenantId {
        &self.tenant
    }
}

impl Memory for EngineMemory {
    fn on_write(&mut self, w: &World<'_>, r: usize) -> Result<(), BenchError> {
        let Some(rec) = w.recs.get(r) else { return Ok(()) };
        if rec.kind == RecKind::Trajectory {
            return Ok(());
        }
        let writer = self.actor(&rec.writer)?.clone();
        if rec.kind == RecKind::Observation {
            // The role reads the source before it records what it saw.
            for (p, _) in &rec.parents {
                self.read(&rec.writer, *p)?;
            }
        }
        let route = match rec.kind {
            RecKind::Tool => Route::ToolObservation,
            RecKind::Source if rec.own_trust == TrustLabel::Untrusted => Route::ExternalObservation,
            RecKind::Output if rec.forwarded => Route::CrossAgent,
            RecKind::Output => Route::Summary,
            _ => Route::Direct,
        };
        let kind = writer.principal().kind;
        let route = if memwarden_core::prelude::route_allowed(kind, route) { route } else { memwarden_core::prelude::default_route(kind) };
        let ns = if rec.retrievable { self.memories.clone() } else { self.sources.clone() };
        let mut req = WriteRequest::new(ns, rec.text.clone(), route);
        for (p, k) in &rec.parents {
            if let Some(it) = self.items.get(p).filter(|it| it.readable_by(writer.id())) {
                req.parents.push(ParentRef { id: it.id(), kind: edge_kind(*k) });
            }
        }
        req.readers = rec.narrowing.as_ref().map(|s| s.iter().filter_map(|x| pid(x).ok()).collect::<BTreeSet<PrincipalId>>());
        match self.engine.add(&writer, req) {
            Ok((item, _)) => {
                let id = item.id();
                self.index.insert(id, r);
                self.items.insert(r, item);
                if rec.kind == RecKind::Source && rec.local.poisoned {
                    // Known poisoned when it is registered: its owner reports it at once (a
                    // late flag comes from the timeline).
                    if let Err(e) = self.engine.flag_poisoned(&writer, &id) {
                        self.refused_event(e)?;
                    }
                }
            }
            Err(EngineError::Refused { .. } | EngineError::Write(_)) => {
                if let Some(s) = &self.stats {
                    s.writes_refused.fetch_add(1, Ordering::Relaxed);
                }
            }
            Err(e) => return Err(BenchError::Invalid(format!("task {}: the engine failed on record {r}: {e}", w.task.id))),
        }
        if rec.kind == RecKind::Tool {
            // The role that ran the tool is handed its output.
            if let Some(holder) = &rec.holder {
                self.read(holder, r)?;
            }
        }
        Ok(())
    }

    fn on_revoke(&mut self, _w: &World<'_>, r: usize, by: &str) -> Result<(), BenchError> {
        let Some(id) = self.rec_item(r) else { return Ok(()) };
        match self.engine.revoke(self.actor(by)?, &id, "permission withdrawn") {
            Ok(_) => Ok(()),
            Err(e) => self.refused_event(e),
        }
    }

    fn on_flag(&mut self, _w: &World<'_>, r: usize, by: &str) -> Result<(), BenchError> {
        let Some(id) = self.rec_item(r) else { return Ok(()) };
        match self.engine.flag_poisoned(self.actor(by)?, &id) {
            Ok(_) => Ok(()),
            Err(e) => self.refused_event(e),
        }
    }

    fn on_verify(&mut self, _w: &World<'_>, r: usize, by: &str) -> Result<(), BenchError> {
        let Some(id) = self.rec_item(r) else { return Ok(()) };
        match self.engine.verify(self.actor(by)?, &id) {
            Ok(_) => Ok(()),
            Err(e) => self.refused_event(e),
        }
    }

    fn conversation(&self, _w: &World<'_>, role: &str, msgs: &[usize]) -> Vec<usize> {
        // An engine failure shows nothing (errors deny).
        msgs.iter().copied().filter(|m| self.read(role, *m).unwrap_or(false)).collect()
    }

    fn retrieve(&mut self, w: &World<'_>, role: &str) -> Result<Retrieval, BenchError> {
        let actor = self.actor(role)?.clone();
        let found = self.engine.search_report(&actor, &self.memories, &w.task.action.request, K, memwarden_core::label::Integrity::Untrusted)?;
        let handed: Vec<usize> = found.hits.iter().filter_map(|h| self.index.get(&h.item.id()).copied()).collect();
        // What the search said it withheld (in the role's scope or addressed to it, held back
        // by a layer), by id: the role cites them, as it cites a withheld message.
        // The role cites those about as relevant as the best match, by the engine's own
        // similarity (the thresholds the MAP-Graph row applies to its scorer).
        let best = found.hits.iter().map(|h| h.similarity).chain(found.withheld_memories.iter().map(|m| m.similarity)).fold(0.0f32, f32::max);
        let floor = super::methods::WITHHELD_SIMILARITY_MIN.max(super::methods::WITHHELD_RELATIVE_MIN * f64::from(best));
        let withheld: Vec<usize> =
            found.withheld_memories.iter().filter(|m| f64::from(m.similarity) >= floor).filter_map(|m| self.index.get(&m.memory.id).copied()).collect();
        // Ground truth for the evaluator: the top 5 by the benchmark's scorer, unfiltered.
        let pool = w.recs.iter().enumerate().filter(|(_, x)| x.retrievable && x.kind != RecKind::Trajectory).map(|(i, _)| i);
        let unfiltered = top_k(w, pool, K, &|r| similarity(w, r));
        let (mut attempts, _) = count_reads(w, role, &unfiltered, &handed);
        // Every unauthorized record the engine handed over is a successful read, whatever the
        // evaluator's own ranking would have held.
        let leaked: Vec<usize> = handed.iter().copied().filter(|r| !w.authorized(role, *r)).collect();
        attempts += leaked.iter().filter(|r| !unfiltered.contains(r)).count() as u64;
        Ok(Retrieval { handed, attempts, successes: leaked.len() as u64, withheld })
    }

    fn decide(&mut self, w: &World<'_>, d: &DecideInput<'_>) -> Result<BackendDecision, BenchError> {
        let a = &w.task.action;
        let actor = self.actor(d.role)?.clone();
        let used: Vec<&MemoryItem> = d.used.iter().filter_map(|r| self.items.get(r)).collect();
        let mut context: Vec<ItemId> = used.iter().map(|i| i.id()).collect();
        // The messages forwarded to the role that it was shown or told are withheld (get
        // answered, or `403 withheld`), and the memories its search said it withheld that were
        // addressed to it (written for it, narrowed by a confidential source): the role cites
        // them, and the engine's context rule weighs a withheld one (a disclosure is redacted,
        // an act re-verified or blocked). Other withheld search results (quarantined, poisoned
        // or revoked ancestry) are not cited: nothing tells the role they bear on its request,
        // and with this embedder their similarity does not either (citing every one above the
        // MAP-Graph row's relevance floor blocked 45% of the clean tasks on unrelated poisoned
        // notes). One answered 404: the role never learned it exists.
        let told = self.told_withheld.lock().map_err(|_| BenchError::Invalid("lock poisoned".into()))?.clone();
        let shown = |m: &usize| told.contains(&(d.role.to_owned(), *m)) || self.items.get(m).is_some_and(|it| it.readable_by(actor.id()));
        for m in d.conversation.iter().filter(|m| shown(m)).chain(d.withheld.iter().filter(|r| self.items.get(r).is_some_and(|it| it.addressed_to(actor.id())))) {
            if let Some(it) = self.items.get(m)
                && !context.contains(&it.id())
            {
                context.push(it.id());
            }
        }
        let mut values = Vec::new();
        if let Some(v) = &d.proposal.value {
            let sources: Vec<ItemId> = match NormValue::new(ValueKind::Account, v) {
                Ok(norm) => used.iter().filter(|i| i.folded().carries(&norm)).map(|i| i.id()).collect(),
                Err(_) => Vec::new(),
            };
            values.push(ActionValue { key: a.value_key.clone(), value: v.clone(), kind: ValueKind::Account, sources });
        }
        let req = ActionRequest { tool: a.tool.clone(), kind: a.kind, risk: a.risk, values, amount: None, context, grants: Vec::new() };
        let (verdict, _) = self.engine.decide(&actor, &req)?;
        let layer = |name: &str| verdict.layers.iter().find(|l| l.layer == name).map_or(Decision::Allow, |l| l.decision);
        let untrusted_ancestry = d.used.iter().filter_map(|r| w.recs.get(*r)).any(|x| {
            x.anc.iter().filter_map(|a| w.recs.get(*a)).any(|a| a.own_trust == TrustLabel::Untrusted)
        });
        self.layers = Some(Layers { lineage: layer("lineage"), authority: layer("authority"), untrusted_ancestry });
        let flagged = verdict.affected.iter().filter_map(|id| self.index.get(id).copied()).collect();
        Ok(BackendDecision { decision: verdict.decision, flagged })
    }

    fn layers(&self) -> Option<Layers> {
        self.layers
    }
}
