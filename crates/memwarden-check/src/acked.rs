//! No acknowledged write is lost or hidden (issue 33): random sequences of writes, declared
//! derivations, reads (which taint the reading session), updates, revocations and erasures by
//! several principals, driven through the shipped engine (`full`, an ephemeral embedded store
//! per sequence), checked after every step against a small reference model.
//!
//! The model's rule: a memory acknowledged as `active` stays readable by its writer (get and
//! list) until someone with the right (its owner or a user of the tenant) revokes or erases it
//! (an erasure takes the memory's versions and everything *declared* derived from them,
//! nothing else), or a memory it was declared derived from is revoked. What a session was merely
//! handed (`seen_in_session`) never takes a memory away. Revocation and erasure cover every
//! version of a memory. The checks run both ways: an erasure may remove only the memory's
//! versions and its declared descendants, and a revoked or erased memory is read by nobody.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::rng::Rng;
use memwarden_core::prelude::*;
use memwarden_engine::{Actor, Engine, EngineConfig, EngineError, Preset};
use memwarden_store::{SqliteStore, StoreConfig};

/// Most sequences one run takes.
pub const SEQUENCES_MAX: usize = 10_000_000;
/// Most operations per sequence.
pub const OPS_PER_SEQUENCE_MAX: usize = 256;

/// The principals: two agents, a user and an untrusted mail source.
const AGENTS: [&str; 2] = ["ana", "ben"];
const USER: &str = "ursula";
const SOURCE: &str = "inbox";
const WRITERS: [&str; 4] = ["ana", "ben", "ursula", "inbox"];
/// Sessions each principal works in (reads in one taint that one's later writes).
const SESSIONS: [&str; 2] = ["s0", "s1"];

/// What a run found.
#[derive(Debug, Default, Clone)]
pub struct AckedReport {
    /// Sequences run.
    pub sequences: usize,
    /// Operations performed.
    pub ops: u64,
    /// Writes acknowledged `active`.
    pub acknowledged: u64,
    /// Writes that carried a `seen_in_session` edge.
    pub seen_edges: u64,
    /// Erasures and revocations performed.
    pub erasures: u64,
    /// Revocations performed.
    pub revocations: u64,
    /// Memories that outlived the erasure or revocation of something their session had seen.
    pub seen_survivors: u64,
    /// Violations (sequence seed and what went wrong); empty when the property holds.
    pub violations: Vec<String>,
}

impl AckedReport {
    /// Whether the property held in every sequence.
    pub fn holds(&self) -> bool {
        self.violations.is_empty()
    }
}

/// What the model knows of one version of a memory.
#[derive(Debug, Clone)]
struct Node {
    writer: &'static str,
    /// The memory (version chain) it belongs to.
    memory: usize,
    /// Declared parents (`derived_from`; an update's previous version).
    declared: Vec<ItemId>,
    /// Seen in its writer's session before the write (`seen_in_session`).
    seen: Vec<ItemId>,
    current: bool,
    /// Held back at write (the write gate quarantined it): never acknowledged `active`.
    held: bool,
    revoked: bool,
    erased: bool,
}

#[derive(Default)]
struct Model {
    nodes: BTreeMap<ItemId, Node>,
    order: Vec<ItemId>,
    memories: Vec<Vec<ItemId>>,
}

impl Model {
    /// Whether `id` is still expected to be there: it is not erased, and neither it nor anything
    /// it was declared derived from (transitively, erased or not) is revoked. An erased parent
    /// alone takes nothing away: the erasure itself names what it removed.
    fn alive(&self, id: &ItemId) -> bool {
        self.nodes.get(id).is_some_and(|n| !n.erased) && !self.revoked_on_path(id)
    }

    fn revoked_on_path(&self, id: &ItemId) -> bool {
        self.nodes.get(id).is_none_or(|n| n.revoked || n.declared.iter().any(|p| self.revoked_on_path(p)))
    }

    /// What its writer must be able to get and list.
    fn readable_by_writer(&self, id: &ItemId) -> bool {
        self.nodes.get(id).is_some_and(|n| n.current) && self.alive(id)
    }

    /// Every id declared derived (transitively) from `roots`: what an erasure of `roots` may
    /// remove.
    fn declared_closure(&self, roots: &[ItemId]) -> BTreeSet<ItemId> {
        let mut out: BTreeSet<ItemId> = roots.iter().copied().collect();
        loop {
            let grown: Vec<ItemId> =
                self.nodes.iter().filter(|(id, n)| !out.contains(id) && n.declared.iter().any(|p| out.contains(p))).map(|(id, _)| *id).collect();
            if grown.is_empty() {
                return out;
            }
            out.extend(grown);
        }
    }

    fn may_manage(&self, who: &str, id: &ItemId) -> bool {
        who == USER || self.nodes.get(id).is_some_and(|n| n.writer == who)
    }
}

struct World {
    engine: Engine,
    tenant: TenantId,
    ns: Namespace,
    model: Model,
    /// What each (principal, session) was handed (the model of session taint).
    handed: BTreeMap<(&'static str, &'static str), Vec<ItemId>>,
    report: AckedReport,
}

fn pid(s: &str) -> Result<PrincipalId, String> {
    PrincipalId::new(s).map_err(|e| e.to_string())
}

fn e2s(e: EngineError) -> String {
    e.to_string()
}

impl World {
    fn new() -> Result<Self, String> {
        let store = SqliteStore::open_ephemeral(StoreConfig::default()).map_err(|e| e.to_string())?;
        let config = EngineConfig::for_preset(Preset::Full).map_err(e2s)?;
        let engine = Engine::with_store(Arc::new(store), config).map_err(e2s)?;
        let tenant = TenantId::new("acme").map_err(|e| e.to_string())?;
        for who in WRITERS {
            let kind = match who {
                USER => PrincipalKind::User,
                SOURCE => PrincipalKind::Source,
                _ => PrincipalKind::Agent,
            };
            let public_key = (kind == PrincipalKind::User).then_some([7u8; 32]);
            let p = Principal { id: pid(who)?, tenant: tenant.clone(), kind, domain: None, allow_listed: false, public_key, action: None };
            engine.register_principal(p).map_err(e2s)?;
        }
        let ns = Namespace::new("notes").map_err(|e| e.to_string())?;
        Ok(Self { engine, tenant, ns, model: Model::default(), handed: BTreeMap::new(), report: AckedReport::default() })
    }

    fn actor(&self, who: &str, session: &str) -> Result<Actor, String> {
        let s = SessionId::new(session).map_err(|e| e.to_string())?;
        self.engine.authenticate_session(&self.tenant, &pid(who)?, s).map_err(e2s)
    }

    fn hand(&mut self, who: &'static str, session: &'static str, ids: impl IntoIterator<Item = ItemId>) {
        self.handed.entry((who, session)).or_default().extend(ids);
    }

    /// A write by `who` in `session`, declaring up to two parents it may read.
    fn write(&mut self, rng: &mut Rng, who: &'static str, session: &'static str) -> Result<(), String> {
        let route = if who == SOURCE { Route::ExternalObservation } else { Route::Direct };
        let n = self.model.order.len();
        let mut req = WriteRequest::new(self.ns.clone(), format!("note {n} by {who} about the quarterly plan"), route);
        let candidates: Vec<ItemId> = self.model.order.iter().copied().filter(|id| self.model.readable_by_writer(id)).collect();
        let mut declared: Vec<ItemId> = Vec::new();
        if !candidates.is_empty() && who != SOURCE {
            for _ in 0..rng.below(3) {
                let id = candidates[rng.below(candidates.len())];
                if !declared.contains(&id) {
                    declared.push(id);
                }
            }
        }
        if !declared.is_empty() {
            req.route = Route::Summary;
        }
        req.parents = declared.iter().map(|id| ParentRef { id: *id, kind: EdgeKind::DerivedFrom }).collect();
        let actor = self.actor(who, session)?;
        let (item, _) = self.engine.add(&actor, req).map_err(|e| format!("{who} could not write with readable parents {declared:?}: {e}"))?;
        let seen: Vec<ItemId> = item.parents().iter().filter(|p| p.kind == EdgeKind::SeenInSession).map(|p| p.id).collect();
        let declared_back: Vec<ItemId> = item.parents().iter().filter(|p| p.kind != EdgeKind::SeenInSession).map(|p| p.id).collect();
        if declared_back.iter().collect::<BTreeSet<_>>() != declared.iter().collect::<BTreeSet<_>>() {
            return Err(format!("declared parents {declared:?} came back as {declared_back:?}"));
        }
        let handed = self.handed.get(&(who, session)).cloned().unwrap_or_default();
        if let Some(s) = seen.iter().find(|s| !handed.contains(s)) {
            return Err(format!("write {} has a seen_in_session edge to {s}, which its session was never handed", item.id()));
        }
        self.report.seen_edges += u64::from(!seen.is_empty());
        if item.status() == Status::Active {
            self.report.acknowledged += 1;
        }
        let memory = self.model.memories.len();
        self.model.memories.push(vec![item.id()]);
        let current = item.status() == Status::Active;
        self.model.nodes.insert(item.id(), Node { writer: who, memory, declared, seen, current, held: !current, revoked: false, erased: false });
        self.model.order.push(item.id());
        Ok(())
    }

    fn pick(&self, rng: &mut Rng) -> Option<ItemId> {
        (!self.model.order.is_empty()).then(|| self.model.order[rng.below(self.model.order.len())])
    }

    fn read(&mut self, rng: &mut Rng, who: &'static str, session: &'static str) -> Result<(), String> {
        let actor = self.actor(who, session)?;
        if rng.below(2) == 0 {
            let listed = self.engine.list(&actor, &self.ns, 1000).map_err(e2s)?;
            self.hand(who, session, listed.iter().map(MemoryItem::id));
        } else if let Some(id) = self.pick(rng)
            && let Ok(item) = self.engine.get(&actor, &id)
        {
            self.hand(who, session, [item.id()]);
        }
        Ok(())
    }

    fn update(&mut self, rng: &mut Rng, who: &'static str, session: &'static str) -> Result<(), String> {
        let Some(id) = self.pick(rng) else { return Ok(()) };
        let expect = self.model.readable_by_writer(&id) && self.model.may_manage(who, &id);
        let actor = self.actor(who, session)?;
        match self.engine.update(&actor, &id, format!("revised note by {who} about the quarterly plan")) {
            Ok((item, _)) => {
                if !expect {
                    return Err(format!("{who} updated {id}, which the model says it may not"));
                }
                let memory = self.model.nodes.get(&id).map_or(0, |n| n.memory);
                if let Some(old) = self.model.nodes.get_mut(&id) {
                    old.current = false;
                }
                let seen: Vec<ItemId> = item.parents().iter().filter(|p| p.kind == EdgeKind::SeenInSession).map(|p| p.id).collect();
                let current = item.status() == Status::Active;
                self.report.acknowledged += u64::from(current);
                self.model.nodes.insert(item.id(), Node { writer: who, memory, declared: vec![id], seen, current, held: !current, revoked: false, erased: false });
                self.model.memories[memory].push(item.id());
                self.model.order.push(item.id());
                Ok(())
            }
            Err(e) if expect && who == self.model.nodes.get(&id).map_or("", |n| n.writer) => {
                Err(format!("{who} could not update its own readable memory {id}: {e}"))
            }
            Err(_) => Ok(()),
        }
    }

    fn revoke(&mut self, rng: &mut Rng, who: &'static str) -> Result<(), String> {
        let Some(id) = self.pick(rng) else { return Ok(()) };
        let Some(node) = self.model.nodes.get(&id).cloned() else { return Ok(()) };
        let expect = !node.held && !node.erased && !node.revoked && self.model.may_manage(who, &id) && (self.model.alive(&id) || who == USER);
        let actor = self.actor(who, "s0")?;
        match self.engine.revoke(&actor, &id, "test") {
            Ok(_) => {
                if !self.model.may_manage(who, &id) || node.erased {
                    return Err(format!("{who} revoked {id}, which it may not"));
                }
                self.report.revocations += 1;
                for v in self.model.memories[node.memory].clone() {
                    if let Some(n) = self.model.nodes.get_mut(&v) {
                        n.revoked = true;
                    }
                }
                self.count_seen_survivors(&self.model.memories[node.memory].clone());
                Ok(())
            }
            Err(e) if expect => Err(format!("{who} could not revoke {id}: {e}")),
            Err(_) => Ok(()),
        }
    }

    fn erase(&mut self, rng: &mut Rng, who: &'static str) -> Result<(), String> {
        let Some(id) = self.pick(rng) else { return Ok(()) };
        let Some(node) = self.model.nodes.get(&id).cloned() else { return Ok(()) };
        let expect = !node.held && !node.erased && self.model.may_manage(who, &id) && (self.model.alive(&id) || who == USER);
        let actor = self.actor(who, "s0")?;
        match self.engine.erase(&actor, &id) {
            Ok((record, _)) => {
                if !self.model.may_manage(who, &id) {
                    return Err(format!("{who} erased {id}, which it may not"));
                }
                self.report.erasures += 1;
                let versions = self.model.memories[node.memory].clone();
                let allowed = self.model.declared_closure(&versions);
                if let Some(v) = versions.iter().find(|v| !record.erased.contains(v) && !self.model.nodes.get(v).is_some_and(|n| n.erased)) {
                    return Err(format!("erasing {id} left its version {v}"));
                }
                if let Some(x) = record.erased.iter().find(|x| !allowed.contains(x)) {
                    return Err(format!("erasing {id} also erased {x}, which was not declared derived from it"));
                }
                // ... and every memory declared derived from it (its text is a copy) goes with it.
                if let Some(x) = allowed.iter().find(|x| !record.erased.contains(x) && !self.model.nodes.get(x).is_some_and(|n| n.erased)) {
                    return Err(format!("erasing {id} left {x}, which was declared derived from it"));
                }
                for x in &record.erased {
                    if let Some(n) = self.model.nodes.get_mut(x) {
                        n.erased = true;
                    }
                }
                self.count_seen_survivors(&record.erased);
                Ok(())
            }
            Err(e) if expect => Err(format!("{who} could not erase {id}: {e}")),
            Err(_) => Ok(()),
        }
    }

    fn count_seen_survivors(&mut self, gone: &[ItemId]) {
        let n = self.model.nodes.values().filter(|n| n.seen.iter().any(|s| gone.contains(s)) && !n.erased && !n.revoked).count();
        self.report.seen_survivors += n as u64;
    }

    /// After every step: each writer gets and lists exactly what the model says it must, and
    /// nobody reads a revoked or erased memory.
    fn check(&self) -> Result<(), String> {
        let mut listed: BTreeMap<&str, BTreeSet<ItemId>> = BTreeMap::new();
        for who in WRITERS {
            let actor = self.actor(who, "check")?;
            let ids = self.engine.list(&actor, &self.ns, 1000).map_err(e2s)?.iter().map(MemoryItem::id).collect();
            listed.insert(who, ids);
        }
        for (id, n) in &self.model.nodes {
            let owner = self.actor(n.writer, "check")?;
            let got = self.engine.get(&owner, id);
            if self.model.readable_by_writer(id) {
                if let Err(e) = got {
                    return Err(format!("acknowledged write {id} by {} is unreadable by its writer: {e}", n.writer));
                }
                if !listed.get(n.writer).is_some_and(|l| l.contains(id)) {
                    return Err(format!("acknowledged write {id} by {} is missing from its writer's list", n.writer));
                }
            }
            if !self.model.alive(id) {
                if got.is_ok() {
                    return Err(format!("{id} is revoked or erased (or derived from one) and its writer still reads it"));
                }
                if let Some((who, _)) = listed.iter().find(|(_, l)| l.contains(id)) {
                    return Err(format!("{id} is revoked or erased (or derived from one) and {who} still lists it"));
                }
            }
        }
        Ok(())
    }
}

/// One sequence of `ops` random operations from `seed`.
fn sequence(seed: u64, ops: usize, report: &mut AckedReport) -> Result<(), String> {
    let mut rng = Rng::new(seed);
    let mut w = World::new()?;
    for _ in 0..ops {
        let who = WRITERS[rng.below(WRITERS.len())];
        let session = SESSIONS[rng.below(SESSIONS.len())];
        match rng.below(10) {
            0..=3 => w.write(&mut rng, who, session)?,
            4..=5 => w.read(&mut rng, who, session)?,
            6 if who != SOURCE => w.update(&mut rng, who, session)?,
            7 => w.revoke(&mut rng, who)?,
            8..=9 => {
                let by = if rng.below(3) == 0 { USER } else { who };
                w.erase(&mut rng, by)?;
            }
            _ => w.read(&mut rng, who, session)?,
        }
        w.report.ops += 1;
        w.check()?;
    }
    debug_assert!(AGENTS.iter().all(|a| WRITERS.contains(a)));
    report.ops += w.report.ops;
    report.acknowledged += w.report.acknowledged;
    report.seen_edges += w.report.seen_edges;
    report.erasures += w.report.erasures;
    report.revocations += w.report.revocations;
    report.seen_survivors += w.report.seen_survivors;
    Ok(())
}

/// Run `sequences` sequences of `ops` operations each, from `seed`; a violation names the
/// sequence's seed (rerun it with `sequences = 1`).
pub fn check_acknowledged(sequences: usize, ops: usize, seed: u64) -> AckedReport {
    let sequences = sequences.min(SEQUENCES_MAX);
    let ops = ops.clamp(1, OPS_PER_SEQUENCE_MAX);
    let mut report = AckedReport { sequences, ..AckedReport::default() };
    for n in 0..sequences {
        let s = seed.wrapping_add(n as u64);
        if let Err(e) = sequence(s, ops, &mut report) {
            report.violations.push(format!("seed {s}: {e}"));
            if report.violations.len() >= 10 {
                break;
            }
        }
    }
    report
}

/// The report as a Markdown table.
pub fn render_acked_markdown(r: &AckedReport) -> String {
    format!(
        "| measure | value |\n| --- | --- |\n| sequences | {} |\n| operations | {} |\n| writes acknowledged active | {} |\n| writes with a seen_in_session edge | {} |\n| revocations | {} |\n| erasures | {} |\n| memories that outlived the removal of something their session saw | {} |\n| acknowledged writes lost or hidden | **{}** |\n",
        r.sequences,
        r.ops,
        r.acknowledged,
        r.seen_edges,
        r.revocations,
        r.erasures,
        r.seen_survivors,
        r.violations.len()
    )
}
