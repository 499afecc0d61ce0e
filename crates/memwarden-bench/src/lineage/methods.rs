//! The methods: seven baselines, MAP-Graph (`lineage`), memwarden `full`, and the six ablations.
//! Each baseline is its own small memory built from its description; all share the semantic
//! scorer ([`super::embed`]), k = 5 and the round in [`super::sim`].
//!
//! | method | memory | read filter | action check |
//! | --- | --- | --- | --- |
//! | B0 no memory | none: the conversation and the sources the role reads | – | – |
//! | B1 shared vector | one pool, top 5 by similarity | – | – |
//! | B2 isolated vector | one pool per role (what it wrote, read, ran), top 5 | – | – |
//! | B3 adapted G-Memory | shared pool plus one trajectory unit per role step (the items the role used and what it wrote, verbatim), top 5 | – | – |
//! | B4 adapted Collaborative Memory | private/shared tiers from each record's declared visibility | declared readers, declared revocation, before ranking | – |
//! | B5 adapted MemLineage | shared pool with `derived_from` ancestry | – | high-risk actions: Block if any support's ancestry holds a poisoned, revoked or untrusted item (current flags) |
//! | B6 flat provenance | the lineage layer over the same per-record fields, every record a root (no ancestry) | `can_read` on local fields | the same four-rule gate on local fields |
//! | lineage (MAP-Graph) | `memwarden_lineage::LineageGraph` with full ancestry | `can_read` (path ceiling) | the four-rule gate on retrieved + contextual support |
//! | full | the shipped engine, `Engine` under the `full` preset on a store of its own ([`super::engine`]) | the engine's reads (scope, lineage, read firewall) | `Engine::decide` |
//!
//! Contextual support (B6, lineage): the gate also evaluates every message forwarded to
//! the acting role and every record the read filter withheld from its retrieval that is about as
//! relevant as the best match ([`WITHHELD_RELATIVE_MIN`], [`WITHHELD_SIMILARITY_MIN`]): restricted
//! evidence the request reached. The paper passes affected or permission-invalid inter-agent
//! messages; the withheld records extend that to restricted evidence reached through memory.
//!
//! Local metadata (B4, B6): a source's own fields; a capture of a source copies the source's
//! fields at capture time; a tool output keeps its source's readers and the tool's trust; role
//! outputs are declared shared, agent-trust, unflagged (what a naive workflow writes); earlier
//! memories carry the fields the task declares (a summary of a private record may be declared
//! shared). A revocation or a late poison flag updates the source's own fields only.
//!
//! Ablations of `lineage` (switches in `LineageConfig`): `no_gate` (`action_gate`),
//! `no_containment` (`containment`), `no_permission_filter` (`permission_filter`; the gate still
//! sees the causes), `no_trust_propagation` (`trust_propagation`), `no_provenance_stack` (all four
//! off and no contextual support: similarity-only retrieval, no gate — the same pipeline as B1),
//! `compressed_graph` (identical decisions by construction; no `read_by` edges are recorded, actions
//! are decided without being recorded, and the export keeps only records, the action and the
//! derivation / invalidation / use edges).

use std::collections::BTreeSet;

use std::sync::Arc;

use memwarden_core::action::Risk;
use memwarden_core::ids::{ItemId, PrincipalId};
use memwarden_core::item::EdgeKind;
use memwarden_core::principal::PrincipalKind;
use memwarden_lineage::{
    ActionEvent, Candidate, FlagPoisonedEvent, GateRequest, LineageConfig, LineageGraph, RecordKind, RegisterPrincipal,
    RevokeEvent, VerifyEvent, WriteEvent,
};

use super::engine::{EngineMemory, EngineStats};

use super::embed::embed;
use super::sim::{
    BackendDecision, DecideInput, GraphSize, Local, Memory, Rec, RecKind, Retrieval, World, K, count_reads, index_of,
    item_of, similarity, top_k,
};
use super::task::{LinkKind, PrincipalClass, TrustLabel};
use crate::BenchError;

/// A record the read filter removed counts as *withheld* (contextual support for the gate) when
/// its semantic score is at least this share of the best candidate's score in the same retrieval
/// ("comparably relevant to the best match") ...
pub const WITHHELD_RELATIVE_MIN: f64 = 0.45;
/// ... and at least this in absolute terms. Both were calibrated on the suite's retrieval pools
/// from relevance alone (records naming the task's subject versus the others, at the last role's
/// retrieval), never from decisions: every subject-naming restricted record passes, 1 of 821
/// other restricted records does.
pub const WITHHELD_SIMILARITY_MIN: f64 = 0.15;

/// Longest trajectory unit B3 stores, in bytes.
pub const TRAJECTORY_BYTES_MAX: usize = 4096;

/// A method in the comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Method {
    /// No memory.
    B0,
    /// Shared vector memory.
    B1,
    /// Isolated per-agent vector memory.
    B2,
    /// Adapted G-Memory.
    B3,
    /// Adapted Collaborative Memory.
    B4,
    /// Adapted MemLineage.
    B5,
    /// Flat provenance.
    B6,
    /// MAP-Graph: the lineage layer.
    Lineage,
    /// memwarden full: authority ∘ lineage.
    Full,
    /// Ablation: no action gate.
    NoGate,
    /// Ablation: no containment.
    NoContainment,
    /// Ablation: no permission filter.
    NoPermissionFilter,
    /// Ablation: no trust propagation.
    NoTrustPropagation,
    /// Ablation: no provenance stack.
    NoProvenanceStack,
    /// Ablation: compressed graph.
    CompressedGraph,
}

impl Method {
    /// The main table, in order.
    pub const MAIN: [Method; 9] =
        [Method::B0, Method::B1, Method::B2, Method::B3, Method::B4, Method::B5, Method::B6, Method::Lineage, Method::Full];
    /// The ablations of `lineage`, in order.
    pub const ABLATIONS: [Method; 6] = [
        Method::NoGate,
        Method::NoContainment,
        Method::NoPermissionFilter,
        Method::NoTrustPropagation,
        Method::NoProvenanceStack,
        Method::CompressedGraph,
    ];

    /// The name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Method::B0 => "B0",
            Method::B1 => "B1",
            Method::B2 => "B2",
            Method::B3 => "B3",
            Method::B4 => "B4",
            Method::B5 => "B5",
            Method::B6 => "B6",
            Method::Lineage => "lineage",
            Method::Full => "full",
            Method::NoGate => "no_gate",
            Method::NoContainment => "no_containment",
            Method::NoPermissionFilter => "no_permission_filter",
            Method::NoTrustPropagation => "no_trust_propagation",
            Method::NoProvenanceStack => "no_provenance_stack",
            Method::CompressedGraph => "compressed_graph",
        }
    }

    /// The method a report names `name` (`B0`…`B6`, `lineage`, `full`, an ablation).
    pub fn from_name(name: &str) -> Option<Method> {
        Method::MAIN.iter().chain(Method::ABLATIONS.iter()).copied().find(|m| m.name() == name)
    }

    /// One line on what it is.
    pub fn description(self) -> &'static str {
        match self {
            Method::B0 => "no memory: the conversation and the sources a role reads",
            Method::B1 => "shared vector memory, top 5",
            Method::B2 => "isolated per-agent vector memory, top 5",
            Method::B3 => "adapted G-Memory: shared pool plus trajectory units, no permissions, trust or gate",
            Method::B4 => "adapted Collaborative Memory: private/shared tiers from declared visibility, access filter before ranking",
            Method::B5 => "adapted MemLineage: ancestry check before high-risk actions, no permission filter",
            Method::B6 => "flat provenance: the lineage filter and gate on per-record fields, no ancestry",
            Method::Lineage => "MAP-Graph: memwarden-lineage (permission filter, path trust, four-rule gate, contextual support)",
            Method::Full => "memwarden full: the shipped engine under the `full` preset (authority, lineage, lifecycle) on its own store",
            Method::NoGate => "lineage without the action gate",
            Method::NoContainment => "lineage without affected-path rules and the poisoned/revoked trust factor",
            Method::NoPermissionFilter => "lineage without the permission filter (gate still sees causes)",
            Method::NoTrustPropagation => "lineage with record-local trust and similarity-only ranking",
            Method::NoProvenanceStack => "lineage with every component off: similarity-only retrieval, no gate",
            Method::CompressedGraph => "lineage with a reduced export (no read_by edges, unrecorded actions)",
        }
    }

    /// A fresh memory for one task.
    pub fn memory(self, w: &World<'_>) -> Result<Box<dyn Memory>, BenchError> {
        self.memory_with(w, MethodOptions::default())
    }

    /// A fresh memory for one task, with the run's method options.
    pub fn memory_with(self, w: &World<'_>, opts: MethodOptions) -> Result<Box<dyn Memory>, BenchError> {
        let lin = |cfg: LineageConfig, flat: bool, contextual: bool, compressed: bool| -> Result<Box<dyn Memory>, BenchError> {
            Ok(Box::new(GraphMemory::new(w, cfg, flat, contextual, compressed)?))
        };
        let off = |f: &dyn Fn(&mut LineageConfig)| {
            let mut c = LineageConfig::default();
            f(&mut c);
            c
        };
        match self {
            Method::B0 => Ok(Box::new(NoMemory)),
            Method::B1 => Ok(Box::new(VectorMemory { isolated: false })),
            Method::B2 => Ok(Box::new(VectorMemory { isolated: true })),
            Method::B3 => Ok(Box::new(GMemory)),
            Method::B4 => Ok(Box::new(TierMemory)),
            Method::B5 => Ok(Box::new(LineageCheck)),
            Method::B6 => lin(LineageConfig::default(), true, true, false),
            Method::Lineage => lin(LineageConfig::default(), false, true, false),
            Method::Full => Ok(Box::new(EngineMemory::new(w, opts.engine_stats.clone(), opts.embedder.as_ref().map(|e| Arc::clone(&e.0)))?)),
            Method::NoGate => lin(off(&|c| c.action_gate = false), false, true, false),
            Method::NoContainment => lin(off(&|c| c.containment = false), false, true, false),
            Method::NoPermissionFilter => lin(off(&|c| c.permission_filter = false), false, true, false),
            Method::NoTrustPropagation => lin(off(&|c| c.trust_propagation = false), false, true, false),
            Method::NoProvenanceStack => lin(
                off(&|c| {
                    c.permission_filter = false;
                    c.trust_propagation = false;
                    c.containment = false;
                    c.action_gate = false;
                }),
                false,
                false,
                false,
            ),
            Method::CompressedGraph => lin(LineageConfig::default(), false, true, true),
        }
    }
}

/// Options of a run's methods (none changes what a method is).
#[derive(Debug, Clone, Default)]
pub struct MethodOptions {
    /// Where `full` counts what the engine refused (writes, timeline events) over the run.
    pub engine_stats: Option<Arc<EngineStats>>,
    /// What `full`'s engine embeds with (`None`: feature hashing, [`super::engine::EMBED_DIMS`]).
    pub embedder: Option<SharedEmbedder>,
}

/// An embedder shared by every task's engine (loaded once).
#[derive(Clone)]
pub struct SharedEmbedder(pub Arc<dyn memwarden_engine::embed::Embedder>);

impl std::fmt::Debug for SharedEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SharedEmbedder")
    }
}

fn retrievable<'a>(w: &'a World<'_>) -> impl Iterator<Item = usize> + 'a {
    w.recs.iter().enumerate().filter(|(_, x)| x.retrievable).map(|(i, _)| i)
}

/// B0.
struct NoMemory;

impl Memory for NoMemory {
    fn on_write(&mut self, _w: &World<'_>, _r: usize) -> Result<(), BenchError> {
        Ok(())
    }
    fn retrieve(&mut self, _w: &World<'_>, _role: &str) -> Result<Retrieval, BenchError> {
        Ok(Retrieval::default())
    }
    fn decide(&mut self, _w: &World<'_>, _d: &DecideInput<'_>) -> Result<BackendDecision, BenchError> {
        Ok(BackendDecision::allow())
    }
}

/// B1 (shared) and B2 (isolated per role).
struct VectorMemory {
    isolated: bool,
}

impl Memory for VectorMemory {
    fn on_write(&mut self, _w: &World<'_>, _r: usize) -> Result<(), BenchError> {
        Ok(())
    }
    fn retrieve(&mut self, w: &World<'_>, role: &str) -> Result<Retrieval, BenchError> {
        let iso = self.isolated;
        let pool = retrievable(w).filter(|r| !iso || w.recs.get(*r).is_some_and(|x| x.holder.as_deref() == Some(role)));
        let top = top_k(w, pool, K, &|r| similarity(w, r));
        let (attempts, successes) = count_reads(w, role, &top, &top);
        Ok(Retrieval { handed: top, attempts, successes, withheld: Vec::new() })
    }
    fn decide(&mut self, _w: &World<'_>, _d: &DecideInput<'_>) -> Result<BackendDecision, BenchError> {
        Ok(BackendDecision::allow())
    }
}

/// B3: trajectory units over the shared pool.
struct GMemory;

impl Memory for GMemory {
    fn on_write(&mut self, _w: &World<'_>, _r: usize) -> Result<(), BenchError> {
        Ok(())
    }
    fn retrieve(&mut self, w: &World<'_>, role: &str) -> Result<Retrieval, BenchError> {
        let top = top_k(w, retrievable(w), K, &|r| similarity(w, r));
        let (attempts, successes) = count_reads(w, role, &top, &top);
        Ok(Retrieval { handed: top, attempts, successes, withheld: Vec::new() })
    }
    fn after_step(&mut self, w: &mut World<'_>, role: &str, used: &[usize], output: Option<usize>) -> Result<(), BenchError> {
        if used.is_empty() && output.is_none() {
            return Ok(());
        }
        let mut text = format!("Trajectory of {role}:");
        for r in used.iter().chain(output.iter()) {
            if let Some(x) = w.recs.get(*r) {
                text.push(' ');
                text.push_str(&x.text);
            }
        }
        let mut cut = text.len().min(TRAJECTORY_BYTES_MAX);
        while cut > 0 && !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        let parents: Vec<(usize, LinkKind)> = used.iter().chain(output.iter()).map(|r| (*r, LinkKind::Derived)).collect();
        let step = output.and_then(|r| w.recs.get(r)).map_or(0, |x| x.step);
        w.add(Rec {
            item: item_of(0),
            kind: RecKind::Trajectory,
            writer: role.to_owned(),
            vec: embed(&text),
            text,
            parents,
            local: Local { readers: None, trust: TrustLabel::Agent, poisoned: false, revoked: false },
            own_trust: TrustLabel::Agent,
            restrict: None,
            anc: BTreeSet::new(),
            step,
            holder: None,
            retrievable: true,
            forwarded: false,
            narrowing: None,
        })?;
        Ok(())
    }
    fn decide(&mut self, _w: &World<'_>, _d: &DecideInput<'_>) -> Result<BackendDecision, BenchError> {
        Ok(BackendDecision::allow())
    }
}

/// B4: tiers from declared visibility, filtered before ranking.
struct TierMemory;

fn tier_readable(x: &Rec, role: &str) -> bool {
    !x.local.revoked && (x.writer == role || x.local.readers.as_ref().is_none_or(|rs| rs.contains(role)))
}

impl Memory for TierMemory {
    fn on_write(&mut self, _w: &World<'_>, _r: usize) -> Result<(), BenchError> {
        Ok(())
    }
    fn retrieve(&mut self, w: &World<'_>, role: &str) -> Result<Retrieval, BenchError> {
        let unfiltered = top_k(w, retrievable(w), K, &|r| similarity(w, r));
        let pool = retrievable(w).filter(|r| w.recs.get(*r).is_some_and(|x| tier_readable(x, role)));
        let handed = top_k(w, pool, K, &|r| similarity(w, r));
        let (attempts, successes) = count_reads(w, role, &unfiltered, &handed);
        Ok(Retrieval { handed, attempts, successes, withheld: Vec::new() })
    }
    fn decide(&mut self, _w: &World<'_>, _d: &DecideInput<'_>) -> Result<BackendDecision, BenchError> {
        Ok(BackendDecision::allow())
    }
}

/// B5: MemLineage's check before high-risk actions.
struct LineageCheck;

impl Memory for LineageCheck {
    fn on_write(&mut self, _w: &World<'_>, _r: usize) -> Result<(), BenchError> {
        Ok(())
    }
    fn retrieve(&mut self, w: &World<'_>, role: &str) -> Result<Retrieval, BenchError> {
        let top = top_k(w, retrievable(w), K, &|r| similarity(w, r));
        let (attempts, successes) = count_reads(w, role, &top, &top);
        Ok(Retrieval { handed: top, attempts, successes, withheld: Vec::new() })
    }
    fn decide(&mut self, w: &World<'_>, d: &DecideInput<'_>) -> Result<BackendDecision, BenchError> {
        if w.task.action.risk != Risk::High {
            return Ok(BackendDecision::allow());
        }
        let tainted: Vec<usize> = d
            .used
            .iter()
            .copied()
            .filter(|r| {
                w.recs.get(*r).is_some_and(|x| {
                    x.anc.iter().filter_map(|a| w.recs.get(*a)).any(|a| a.local.poisoned || a.local.revoked || a.local.trust == TrustLabel::Untrusted)
                })
            })
            .collect();
        if tainted.is_empty() {
            Ok(BackendDecision::allow())
        } else {
            Ok(BackendDecision { decision: memwarden_core::action::Decision::Block, flagged: tainted })
        }
    }
}

pub(super) fn pid(s: &str) -> Result<PrincipalId, BenchError> {
    PrincipalId::new(s).map_err(|e| BenchError::Invalid(format!("principal {s:?}: {e}")))
}

fn integrity(t: TrustLabel) -> memwarden_core::label::Integrity {
    use memwarden_core::label::Integrity;
    match t {
        TrustLabel::Trusted => Integrity::Trusted,
        TrustLabel::Agent => Integrity::Agent,
        TrustLabel::Untrusted => Integrity::Untrusted,
    }
}

pub(super) fn edge_kind(k: LinkKind) -> EdgeKind {
    match k {
        LinkKind::Derived => EdgeKind::DerivedFrom,
        LinkKind::Summarized => EdgeKind::SummarizedFrom,
        LinkKind::Observed => EdgeKind::ObservedFrom,
    }
}

fn ev_err(what: &str, e: impl std::fmt::Display) -> BenchError {
    BenchError::Invalid(format!("lineage {what}: {e}"))
}

/// B6, lineage and the ablations: the lineage layer driven through its event API.
struct GraphMemory {
    g: LineageGraph,
    flat: bool,
    contextual: bool,
    compressed: bool,
    actions: u64,
    supports: u64,
    /// Whether the method exports a graph at all (the no-provenance-stack control does not).
    export: bool,
}

impl GraphMemory {
    fn new(w: &World<'_>, cfg: LineageConfig, flat: bool, contextual: bool, compressed: bool) -> Result<Self, BenchError> {
        let export = cfg.permission_filter || cfg.trust_propagation || cfg.containment || cfg.action_gate;
        let mut g = LineageGraph::new(cfg).map_err(|e| ev_err("config", e))?;
        for r in &w.task.roles {
            g.register_principal(RegisterPrincipal { id: pid(r)?, kind: PrincipalKind::Agent, reputation: None })
                .map_err(|e| ev_err("principal", e))?;
        }
        for p in &w.task.principals {
            let kind = match p.class {
                PrincipalClass::User => PrincipalKind::User,
                PrincipalClass::Tool => PrincipalKind::Tool,
                PrincipalClass::External => PrincipalKind::Source,
            };
            g.register_principal(RegisterPrincipal { id: pid(&p.id)?, kind, reputation: None }).map_err(|e| ev_err("principal", e))?;
        }
        Ok(Self { g, flat, contextual, compressed, actions: 0, supports: 0, export })
    }

    fn at(w: &World<'_>, r: usize) -> u64 {
        1_000 + r as u64 + 1_000 * w.recs.get(r).map_or(0, |x| x.step as u64)
    }
}

impl Memory for GraphMemory {
    fn on_write(&mut self, w: &World<'_>, r: usize) -> Result<(), BenchError> {
        let Some(rec) = w.recs.get(r) else { return Ok(()) };
        if rec.kind == RecKind::Trajectory {
            return Ok(());
        }
        let kind = match rec.kind {
            RecKind::Source => RecordKind::Resource,
            RecKind::Output | RecKind::Notice if rec.forwarded => RecordKind::Message,
            _ => RecordKind::Memory,
        };
        let at = Self::at(w, r);
        let trust = if self.flat { rec.local.trust } else { rec.own_trust };
        let mut ev = WriteEvent::new(rec.item, kind, pid(&rec.writer)?, rec.text.clone(), integrity(trust), at);
        if self.flat {
            // Every record a root carrying its own declared fields.
            ev.readers = rec.local.readers.as_ref().map(|s| s.iter().filter_map(|x| pid(x).ok()).collect());
            ev.poisoned = rec.local.poisoned;
        } else {
            for (p, k) in &rec.parents {
                if let Some(pr) = w.recs.get(*p) {
                    ev = ev.parent(pr.item, edge_kind(*k));
                }
            }
            ev.readers = rec.narrowing.as_ref().map(|s| s.iter().filter_map(|x| pid(x).ok()).collect());
            ev.poisoned = rec.kind == RecKind::Source && rec.local.poisoned;
        }
        if rec.forwarded {
            for role in w.task.roles.iter().filter(|x| **x != rec.writer) {
                ev = ev.forwarded_to(pid(role)?);
            }
        }
        self.g.apply_write(ev).map_err(|e| ev_err(&format!("write of record {r} in task {}", w.task.id), e))?;
        Ok(())
    }

    fn on_revoke(&mut self, w: &World<'_>, r: usize, by: &str) -> Result<(), BenchError> {
        let Some(rec) = w.recs.get(r) else { return Ok(()) };
        self.g
            .apply_revocation(RevokeEvent { id: rec.item, revoker: pid(by)?, at_ms: Self::at(w, r) + 500 })
            .map_err(|e| ev_err("revocation", e))?;
        self.g.drain();
        Ok(())
    }

    fn on_flag(&mut self, w: &World<'_>, r: usize, by: &str) -> Result<(), BenchError> {
        let Some(rec) = w.recs.get(r) else { return Ok(()) };
        self.g
            .apply_poison_flag(FlagPoisonedEvent { id: rec.item, reporter: pid(by)?, at_ms: Self::at(w, r) + 500 })
            .map_err(|e| ev_err("poison flag", e))?;
        self.g.drain();
        Ok(())
    }

    fn on_verify(&mut self, w: &World<'_>, r: usize, by: &str) -> Result<(), BenchError> {
        let Some(rec) = w.recs.get(r) else { return Ok(()) };
        self.g
            .apply_verification(VerifyEvent { id: rec.item, verifier: pid(by)?, at_ms: Self::at(w, r) + 500 })
            .map_err(|e| ev_err("verification", e))?;
        self.g.drain();
        Ok(())
    }

    fn conversation(&self, w: &World<'_>, role: &str, msgs: &[usize]) -> Vec<usize> {
        if !self.g.config().permission_filter {
            return msgs.to_vec();
        }
        let Ok(reader) = pid(role) else { return Vec::new() };
        msgs.iter().copied().filter(|r| w.recs.get(*r).is_some_and(|x| self.g.can_read(&reader, x.item).is_ok())).collect()
    }

    fn retrieve(&mut self, w: &World<'_>, role: &str) -> Result<Retrieval, BenchError> {
        let reader = pid(role)?;
        let pool: Vec<usize> = w.recs.iter().enumerate().filter(|(_, x)| x.retrievable && x.kind != RecKind::Trajectory).map(|(i, _)| i).collect();
        let cands: Vec<Candidate> =
            pool.iter().filter_map(|r| w.recs.get(*r).map(|x| Candidate { id: x.item, similarity: similarity(w, *r) })).collect();
        let ranking = self.g.rank(&reader, &cands, Some(K)).map_err(|e| ev_err("rank", e))?;
        let handed: Vec<usize> = ranking.selected.iter().filter_map(|s| index_of(s.id)).collect();
        let best = pool.iter().map(|r| similarity(w, *r)).fold(0.0f64, f64::max);
        let relevance_floor = WITHHELD_SIMILARITY_MIN.max(WITHHELD_RELATIVE_MIN * best);
        if !self.compressed {
            let at = 1_000_000 + self.g.edges().len() as u64;
            self.g.record_reads(&reader, &ranking.selected, at).map_err(|e| ev_err("read", e))?;
        }
        // The same ranking without the permission filter: what the role would have been handed.
        let rerank = self.g.config().trust_propagation;
        let g = &self.g;
        let score = |r: usize| {
            let s = similarity(w, r);
            if !rerank {
                return s;
            }
            w.recs.get(r).and_then(|x| g.path_trust(x.item, &reader)).map_or(0.0, |b| s * b.rho.get())
        };
        let unfiltered = top_k(w, pool.iter().copied(), K, &score);
        let (attempts, successes) = count_reads(w, role, &unfiltered, &handed);
        let withheld = if self.contextual {
            ranking.filtered.iter().filter_map(|f| index_of(f.id)).filter(|r| similarity(w, *r) >= relevance_floor).collect()
        } else {
            Vec::new()
        };
        Ok(Retrieval { handed, attempts, successes, withheld })
    }

    fn decide(&mut self, w: &World<'_>, d: &DecideInput<'_>) -> Result<BackendDecision, BenchError> {
        let a = &w.task.action;
        let ids = |v: &[usize]| -> Vec<ItemId> { v.iter().filter_map(|r| w.recs.get(*r)).map(|x| x.item).collect() };
        let mut context: Vec<usize> = Vec::new();
        if self.contextual {
            context.extend(d.conversation.iter().copied());
            context.extend(d.withheld.iter().copied());
            context.sort_unstable();
            context.dedup();
            context.retain(|r| !d.used.contains(r));
        }
        let request = GateRequest {
            agent: pid(d.role)?,
            kind: a.kind,
            risk: a.risk,
            retrieved: ids(&d.used),
            context: ids(&context),
            elevated: Default::default(),
        };
        self.supports = (d.used.len() + context.len()) as u64;
        let at = 2_000_000 + self.actions;
        let gd = if self.compressed {
            self.g.decide(&request)
        } else {
            let mut b = [0u8; 16];
            b[0] = 0xA0;
            b[8..16].copy_from_slice(&self.actions.to_be_bytes());
            self.actions += 1;
            let ev = ActionEvent {
                id: ItemId::from_bytes(b),
                request,
                tool: a.tool.clone(),
                on_behalf_of: None,
                agent_proposal: Some(d.proposal.decision),
                at_ms: at,
            };
            self.g.apply_action(ev).map_err(|e| ev_err("action", e))?.action.decision
        };
        let flagged: Vec<usize> =
            gd.evaluations.iter().filter(|e| e.affected || e.denied.is_some()).filter_map(|e| index_of(e.id)).collect();
        Ok(BackendDecision { decision: gd.decision, flagged })
    }

    fn graph_size(&self) -> Option<GraphSize> {
        if !self.export {
            return None;
        }
        let records = self.g.records().count() as u64;
        if self.compressed {
            let kept = self
                .g
                .edges()
                .iter()
                .filter(|e| {
                    matches!(
                        e.kind,
                        EdgeKind::DerivedFrom | EdgeKind::SummarizedFrom | EdgeKind::ObservedFrom | EdgeKind::InvalidatedBy
                    )
                })
                .count() as u64;
            return Some(GraphSize { nodes: records + 1, edges: kept + self.supports });
        }
        let nodes = self.g.principals().count() as u64 + records + self.g.actions().count() as u64;
        Some(GraphSize { nodes, edges: self.g.edges().len() as u64 })
    }
}
