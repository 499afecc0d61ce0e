//! One task played through one memory layer: the world (records and their ground truth), the
//! interface every memory layer implements, and the four-role round.
//!
//! The round (paper, appendix B.1): for each role in order, apply the timeline events scheduled
//! before it, register the sources it reads and the tools it runs (each observation creates a
//! memory `observed_from` the source; each tool run a tool output `derived_from` it), filter the
//! visible conversation through the memory layer (the last 12 messages forwarded to it), retrieve
//! at most 5 memories for the task's request, call the agent, and write its output (a message
//! forwarded to every later role, or a memory, per the task's channel) `derived_from` /
//! `summarized_from` the items it used. The last role proposes; the memory layer decides; the
//! final decision is the more restrictive of the two (a restrictive backend decision is never
//! relaxed, and a restrictive agent proposal stands over a backend Allow).

use std::collections::{BTreeMap, BTreeSet};

use memwarden_core::action::Decision;
use memwarden_core::ids::ItemId;

use super::agent::{ItemOrigin, RoleAgent, RoleProposal, ViewItem, RoleView};
use super::embed::{Idf, Vector, embed};
use super::generate::{CANARY_PREFIX, sentences};
use super::task::{Channel, LinkKind, PrincipalClass, RecordRef, Task, TimelineEvent, TrustLabel, WriteMode};
use crate::BenchError;

/// Most records one task may create (sources, memories, messages, tool outputs).
pub const RECORDS_MAX: usize = 1024;
/// Memories retrieved per call (the paper's k).
pub const K: usize = 5;
/// Most recent conversation messages shown to a role (the paper's 12).
pub const CONVERSATION_MAX: usize = 12;
/// Most items one output may declare as used.
pub const USED_MAX: usize = 32;

/// What kind of record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecKind {
    /// A source document (not retrievable: sources reach a role only when it reads them).
    Source,
    /// A role's capture of a source it read.
    Observation,
    /// A tool's output.
    Tool,
    /// A memory written before the round.
    Initial,
    /// A role's output (message or memory).
    Output,
    /// A notice posted into the conversation.
    Notice,
    /// A G-Memory trajectory unit (method B3 only).
    Trajectory,
}

/// The per-record fields a naive workflow stores (local metadata).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Local {
    /// Readers (`None`: shared).
    pub readers: Option<BTreeSet<String>>,
    /// Trust label.
    pub trust: TrustLabel,
    /// Poisoned flag.
    pub poisoned: bool,
    /// Revoked flag.
    pub revoked: bool,
}

/// One record.
#[derive(Debug, Clone)]
pub struct Rec {
    /// Its id in graphs and stores.
    pub item: ItemId,
    /// Kind.
    pub kind: RecKind,
    /// The writing principal.
    pub writer: String,
    /// Text.
    pub text: String,
    /// Embedding.
    pub vec: Vector,
    /// Derivation parents.
    pub parents: Vec<(usize, LinkKind)>,
    /// Local metadata.
    pub local: Local,
    /// The integrity class of the record itself (from its writer).
    pub own_trust: TrustLabel,
    /// Ground truth: whom the item itself admits (`None`: everyone). Sources: readers + owner.
    pub restrict: Option<BTreeSet<String>>,
    /// The record and all its transitive ancestors.
    pub anc: BTreeSet<usize>,
    /// Step at which it was created (0 for pre-round records).
    pub step: usize,
    /// Whose store it lands in for per-agent memory (B2).
    pub holder: Option<String>,
    /// Whether retrieval may return it.
    pub retrievable: bool,
    /// Forwarded into the conversation of later roles.
    pub forwarded: bool,
    /// Explicit reader narrowing given to provenance-aware stores.
    pub narrowing: Option<BTreeSet<String>>,
}

/// The records of one task and their ground truth.
#[derive(Debug)]
pub struct World<'t> {
    /// The task.
    pub task: &'t Task,
    /// Records, in creation order.
    pub recs: Vec<Rec>,
    names: BTreeMap<String, usize>,
    /// The record each role step wrote.
    pub outputs: [Option<usize>; 4],
    /// Sources revoked so far (ground truth).
    pub revoked: BTreeSet<usize>,
    /// Sources that are poisoned (flagged at registration or by a later event).
    pub poisoned: BTreeSet<usize>,
    /// The retrieval query (the task's request).
    pub query: Vector,
    /// Document frequencies over the retrievable records so far.
    pub idf: Idf,
    clock: u64,
}

/// The 128-bit id of record `i` (time-ordered).
pub fn item_of(i: usize) -> ItemId {
    let mut b = [0u8; 16];
    b[0] = 0x10;
    b[8..16].copy_from_slice(&(i as u64).to_be_bytes());
    ItemId::from_bytes(b)
}

/// The record index of an id made by [`item_of`].
pub fn index_of(id: ItemId) -> Option<usize> {
    let b = id.as_bytes();
    if b[0] != 0x10 {
        return None;
    }
    let mut n = [0u8; 8];
    n.copy_from_slice(&b[8..16]);
    usize::try_from(u64::from_be_bytes(n)).ok()
}

impl<'t> World<'t> {
    /// The world at task start: the sources and the initial memories.
    pub fn new(task: &'t Task) -> Result<Self, BenchError> {
        task.validate()?;
        let mut w = World {
            task,
            recs: Vec::new(),
            names: BTreeMap::new(),
            outputs: [None; 4],
            revoked: BTreeSet::new(),
            poisoned: BTreeSet::new(),
            query: embed(&task.action.request),
            idf: Idf::default(),
            clock: 0,
        };
        for s in &task.sources {
            let readers: Option<BTreeSet<String>> = s.readers.as_ref().map(|r| r.iter().cloned().collect());
            let restrict = readers.as_ref().map(|r| {
                let mut x = r.clone();
                x.insert(s.owner.clone());
                x
            });
            let i = w.add(Rec {
                item: item_of(0),
                kind: RecKind::Source,
                writer: s.owner.clone(),
                text: s.text.clone(),
                vec: embed(&s.text),
                parents: Vec::new(),
                local: Local { readers: readers.clone(), trust: s.trust, poisoned: s.poisoned, revoked: false },
                own_trust: s.trust,
                restrict,
                anc: BTreeSet::new(),
                step: 0,
                holder: None,
                retrievable: false,
                forwarded: false,
                narrowing: readers,
            })?;
            w.names.insert(s.id.clone(), i);
            if s.poisoned {
                w.poisoned.insert(i);
            }
        }
        for st in &task.steps {
            for ev in st.before.iter().chain(&st.after) {
                if let TimelineEvent::FlagPoisoned { source, .. } = ev
                    && let Some(i) = w.names.get(source)
                {
                    w.poisoned.insert(*i);
                }
            }
        }
        for m in &task.initial_memories {
            let parents: Vec<(usize, LinkKind)> =
                m.parents.iter().filter_map(|l| w.names.get(&l.id).map(|i| (*i, l.kind))).collect();
            let readers: Option<BTreeSet<String>> = m.declared.readers.as_ref().map(|r| r.iter().cloned().collect());
            let restrict = readers.as_ref().map(|r| {
                let mut x = r.clone();
                x.insert(m.writer.clone());
                x
            });
            let i = w.add(Rec {
                item: item_of(0),
                kind: RecKind::Initial,
                writer: m.writer.clone(),
                text: m.text.clone(),
                vec: embed(&m.text),
                parents,
                local: Local { readers: readers.clone(), trust: m.declared.trust, poisoned: m.declared.poisoned, revoked: false },
                own_trust: TrustLabel::Agent,
                restrict,
                anc: BTreeSet::new(),
                step: 0,
                holder: Some(m.writer.clone()),
                retrievable: true,
                forwarded: false,
                narrowing: readers,
            })?;
            w.names.insert(m.id.clone(), i);
        }
        Ok(w)
    }

    /// Add a record (its id and ancestry are filled in). Returns its index.
    pub fn add(&mut self, mut rec: Rec) -> Result<usize, BenchError> {
        let i = self.recs.len();
        if i >= RECORDS_MAX {
            return Err(BenchError::Invalid(format!("task {} creates more than {RECORDS_MAX} records", self.task.id)));
        }
        rec.item = item_of(i);
        let mut anc = BTreeSet::from([i]);
        for (p, _) in &rec.parents {
            if let Some(pr) = self.recs.get(*p) {
                anc.extend(pr.anc.iter().copied());
            }
        }
        rec.anc = anc;
        if rec.retrievable {
            self.idf.add(&rec.vec);
        }
        self.recs.push(rec);
        Ok(i)
    }

    /// A record's index by task id (sources and initial memories).
    pub fn named(&self, id: &str) -> Option<usize> {
        self.names.get(id).copied()
    }

    /// The next event time (ms).
    pub fn tick(&mut self) -> u64 {
        self.clock += 1;
        1_000 + self.clock
    }

    /// Ground truth: may `reader` read record `r` now? Every item on its path must admit the
    /// reader, and none may be revoked.
    pub fn authorized(&self, reader: &str, r: usize) -> bool {
        let Some(rec) = self.recs.get(r) else { return false };
        rec.anc.iter().all(|a| {
            !self.revoked.contains(a)
                && self.recs.get(*a).is_some_and(|x| x.restrict.as_ref().is_none_or(|rs| rs.contains(reader)))
        })
    }

    /// Ground truth: does record `r` derive from poisoned content?
    pub fn poisoned_ancestry(&self, r: usize) -> bool {
        self.recs.get(r).is_some_and(|x| x.anc.iter().any(|a| self.poisoned.contains(a)))
    }

    /// Whether `p` is one of the task's roles.
    pub fn is_role(&self, p: &str) -> bool {
        self.task.roles.iter().any(|r| r == p)
    }

    /// The trust class of a principal.
    pub fn trust_of(&self, p: &str) -> TrustLabel {
        if self.is_role(p) {
            return TrustLabel::Agent;
        }
        match self.task.principals.iter().find(|q| q.id == p) {
            Some(q) if q.class == PrincipalClass::User => TrustLabel::Trusted,
            Some(q) if q.class == PrincipalClass::Tool && q.allow_listed => TrustLabel::Trusted,
            _ => TrustLabel::Untrusted,
        }
    }
}

/// What a retrieval handed over and what it tells the evaluator.
#[derive(Debug, Clone, Default)]
pub struct Retrieval {
    /// Records handed to the role, best first.
    pub handed: Vec<usize>,
    /// Unauthorized records (ground truth) the method's ranking put in its top k before any
    /// permission filter: observed unauthorized-read attempts.
    pub attempts: u64,
    /// Those of them handed over anyway.
    pub successes: u64,
    /// Records the permission filter withheld that are about as relevant as the best match (see
    /// [`super::methods::WITHHELD_RELATIVE_MIN`]; provenance-aware methods pass them to the gate as
    /// contextual support).
    pub withheld: Vec<usize>,
}

/// What the gate is asked.
#[derive(Debug, Clone)]
pub struct DecideInput<'a> {
    /// The acting role.
    pub role: &'a str,
    /// The records the proposal rests on.
    pub used: Vec<usize>,
    /// Every message forwarded to the role (readable or not).
    pub conversation: Vec<usize>,
    /// Records withheld from the role's retrieval.
    pub withheld: Vec<usize>,
    /// The agent's proposal.
    pub proposal: &'a RoleProposal,
}

/// A backend decision and the supports it flagged (removed from a Redact release).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackendDecision {
    /// The decision.
    pub decision: Decision,
    /// Flagged supports.
    pub flagged: Vec<usize>,
}

impl BackendDecision {
    /// Allow, nothing flagged (a method without a gate).
    pub fn allow() -> Self {
        Self { decision: Decision::Allow, flagged: Vec::new() }
    }
}

/// Size of an exported graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct GraphSize {
    /// Nodes.
    pub nodes: u64,
    /// Edges.
    pub edges: u64,
}

/// A memory layer under test.
pub trait Memory {
    /// A record was created (sources and initial memories at start, then every new record).
    fn on_write(&mut self, w: &World<'_>, r: usize) -> Result<(), BenchError>;
    /// A source's permission was withdrawn (the world's flags are already updated).
    fn on_revoke(&mut self, _w: &World<'_>, _r: usize, _by: &str) -> Result<(), BenchError> {
        Ok(())
    }
    /// A source was flagged poisoned.
    fn on_flag(&mut self, _w: &World<'_>, _r: usize, _by: &str) -> Result<(), BenchError> {
        Ok(())
    }
    /// A record was verified.
    fn on_verify(&mut self, _w: &World<'_>, _r: usize, _by: &str) -> Result<(), BenchError> {
        Ok(())
    }
    /// The messages of `msgs` the role is shown.
    fn conversation(&self, _w: &World<'_>, _role: &str, msgs: &[usize]) -> Vec<usize> {
        msgs.to_vec()
    }
    /// Retrieve for `role`.
    fn retrieve(&mut self, w: &World<'_>, role: &str) -> Result<Retrieval, BenchError>;
    /// Everything the role was handed at this step (for session-level taint).
    fn handed(&mut self, _w: &World<'_>, _role: &str, _items: &[usize]) {}
    /// After a role's step (G-Memory builds its trajectory units here).
    fn after_step(&mut self, _w: &mut World<'_>, _role: &str, _used: &[usize], _output: Option<usize>) -> Result<(), BenchError> {
        Ok(())
    }
    /// The backend decision on the proposed action.
    fn decide(&mut self, w: &World<'_>, d: &DecideInput<'_>) -> Result<BackendDecision, BenchError>;
    /// The exported graph's size, for graph-producing methods.
    fn graph_size(&self) -> Option<GraphSize> {
        None
    }
    /// For a composed backend: the last decision's per-layer view.
    fn layers(&self) -> Option<Layers> {
        None
    }
}

/// How the two layers of a composed backend decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layers {
    /// The lineage gate.
    pub lineage: Decision,
    /// The authority gate.
    pub authority: Decision,
    /// Whether any support derives (ground truth) from content of an untrusted principal.
    pub untrusted_ancestry: bool,
}

/// The outcome of one task under one method.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskRun {
    /// The agent's proposal.
    pub proposal: Decision,
    /// The memory layer's decision.
    pub backend: Decision,
    /// The final decision.
    pub final_decision: Decision,
    /// What would be released (final Allow or Redact), after redaction.
    pub released: Option<String>,
    /// Observed unauthorized-read attempts.
    pub attempts: u64,
    /// Successful unauthorized reads.
    pub successes: u64,
    /// Role outputs written during the round.
    pub downstream: u32,
    /// Those whose ancestry is poisoned.
    pub contaminated: u32,
    /// Exported graph size.
    pub graph: Option<GraphSize>,
    /// Per-layer decisions of a composed backend.
    pub layers: Option<Layers>,
}

/// Drop from `output` every sentence that repeats a flagged record's text or names a canary a
/// flagged record carries (what Redact removes).
pub fn redact(output: &str, flagged: &[&str]) -> String {
    let canaries: Vec<&str> = flagged
        .iter()
        .flat_map(|t| t.split(|c: char| c.is_whitespace() || matches!(c, '.' | ',' | ';' | ':')))
        .filter(|t| t.starts_with(CANARY_PREFIX))
        .collect();
    sentences(output)
        .into_iter()
        .filter(|s| !flagged.iter().any(|f| f.contains(s)) && !canaries.iter().any(|c| s.contains(c)))
        .collect::<Vec<_>>()
        .join(" ")
}

fn origin_of(w: &World<'_>, r: usize, observed: &BTreeSet<usize>) -> ItemOrigin {
    match w.recs.get(r).map(|x| x.kind) {
        _ if observed.contains(&r) => ItemOrigin::Source,
        Some(RecKind::Tool) => ItemOrigin::Tool,
        Some(RecKind::Notice) => ItemOrigin::Message,
        Some(RecKind::Output) if w.recs.get(r).is_some_and(|x| x.forwarded) => ItemOrigin::Message,
        _ => ItemOrigin::Memory,
    }
}

fn apply_event(w: &mut World<'_>, mem: &mut dyn Memory, ev: &TimelineEvent, step: usize) -> Result<(), BenchError> {
    match ev {
        TimelineEvent::Revoke { source, by } => {
            if let Some(r) = w.named(source)
                && w.revoked.insert(r)
            {
                if let Some(x) = w.recs.get_mut(r) {
                    x.local.revoked = true;
                }
                mem.on_revoke(w, r, by)?;
            }
        }
        TimelineEvent::FlagPoisoned { source, by } => {
            if let Some(r) = w.named(source) {
                if let Some(x) = w.recs.get_mut(r) {
                    x.local.poisoned = true;
                }
                mem.on_flag(w, r, by)?;
            }
        }
        TimelineEvent::Verify { target, by } => {
            let r = match target {
                RecordRef::Source(s) | RecordRef::Initial(s) => w.named(s),
                RecordRef::Output(i) => w.outputs.get(*i).copied().flatten(),
            };
            if let Some(r) = r {
                mem.on_verify(w, r, by)?;
            }
        }
        TimelineEvent::Notice { by, text } => {
            let trust = w.trust_of(by);
            let r = w.add(Rec {
                item: item_of(0),
                kind: RecKind::Notice,
                writer: by.clone(),
                text: text.clone(),
                vec: embed(text),
                parents: Vec::new(),
                local: Local { readers: None, trust, poisoned: false, revoked: false },
                own_trust: trust,
                restrict: None,
                anc: BTreeSet::new(),
                step,
                holder: None,
                retrievable: true,
                forwarded: true,
                narrowing: None,
            })?;
            mem.on_write(w, r)?;
        }
    }
    Ok(())
}

/// Builds a method's memory for a task's world.
pub type MemoryFactory<'f> = &'f dyn Fn(&World<'_>) -> Result<Box<dyn Memory>, BenchError>;

/// Play `task` through a fresh memory from `make` with `agent`.
pub fn run_task(task: &Task, make: MemoryFactory<'_>, agent: &mut dyn RoleAgent) -> Result<TaskRun, BenchError> {
    let mut w = World::new(task)?;
    let mut mem_box = make(&w)?;
    let mem: &mut dyn Memory = mem_box.as_mut();
    for r in 0..w.recs.len() {
        mem.on_write(&w, r)?;
    }
    let mut attempts = 0u64;
    let mut successes = 0u64;
    let mut outcome: Option<(RoleProposal, BackendDecision, Vec<usize>)> = None;
    let last = task.roles.len().saturating_sub(1);
    for (step, plan) in task.steps.iter().enumerate() {
        let role = task.roles.get(step).cloned().unwrap_or_default();
        for ev in &plan.before {
            apply_event(&mut w, mem, ev, step)?;
        }
        let mut observed: BTreeSet<usize> = BTreeSet::new();
        let mut direct: Vec<usize> = Vec::new();
        for s in &plan.observe {
            let Some(src) = w.named(s) else { continue };
            let (text, vec, local) = match w.recs.get(src) {
                Some(x) => (x.text.clone(), x.vec.clone(), x.local.clone()),
                None => continue,
            };
            let o = w.add(Rec {
                item: item_of(0),
                kind: RecKind::Observation,
                writer: role.clone(),
                text,
                vec,
                parents: vec![(src, LinkKind::Observed)],
                // The capture carries its source's fields as they are now (and stays so).
                local: Local { revoked: false, ..local.clone() },
                own_trust: TrustLabel::Agent,
                restrict: None,
                anc: BTreeSet::new(),
                step,
                holder: Some(role.clone()),
                retrievable: true,
                forwarded: false,
                narrowing: None,
            })?;
            mem.on_write(&w, o)?;
            observed.insert(src);
            direct.push(src);
        }
        for tc in &plan.tools {
            let Some(src) = w.named(&tc.source) else { continue };
            let (text, local) = match w.recs.get(src) {
                Some(x) => (x.text.clone(), x.local.clone()),
                None => continue,
            };
            let trust = w.trust_of(&tc.tool);
            let out = format!("{} output: {text}", tc.tool);
            let t = w.add(Rec {
                item: item_of(0),
                kind: RecKind::Tool,
                writer: tc.tool.clone(),
                vec: embed(&out),
                text: out,
                parents: vec![(src, LinkKind::Derived)],
                local: Local { readers: local.readers, trust, poisoned: false, revoked: false },
                own_trust: trust,
                restrict: None,
                anc: BTreeSet::new(),
                step,
                holder: Some(role.clone()),
                retrievable: true,
                forwarded: false,
                narrowing: None,
            })?;
            mem.on_write(&w, t)?;
            direct.push(t);
        }
        // The conversation: messages forwarded so far, the most recent CONVERSATION_MAX.
        let all_msgs: Vec<usize> = w.recs.iter().enumerate().filter(|(_, x)| x.forwarded && x.writer != role).map(|(i, _)| i).collect();
        let recent: Vec<usize> = all_msgs.iter().rev().take(CONVERSATION_MAX).rev().copied().collect();
        let convo = mem.conversation(&w, &role, &recent);
        let ret = mem.retrieve(&w, &role)?;
        attempts += ret.attempts;
        successes += ret.successes;
        let mut ctx: BTreeSet<usize> = BTreeSet::new();
        ctx.extend(direct.iter().copied());
        ctx.extend(convo.iter().copied());
        ctx.extend(ret.handed.iter().copied());
        let ctx: Vec<usize> = ctx.into_iter().collect();
        mem.handed(&w, &role, &ctx);
        let view = RoleView {
            domain: task.domain,
            role: &role,
            action: &task.action,
            items: ctx
                .iter()
                .filter_map(|r| w.recs.get(*r).map(|x| ViewItem { text: x.text.as_str(), origin: origin_of(&w, *r, &observed) }))
                .collect(),
        };
        if step < last {
            let mut used_recs: Vec<usize> = Vec::new();
            let mut out_rec = None;
            if let Some(mode) = plan.write
                && let Some(out) = agent.write(&view, mode == WriteMode::Summary).map_err(|e| BenchError::Agent(e.to_string()))?
                && !out.text.trim().is_empty()
            {
                used_recs = out.used.iter().filter_map(|i| ctx.get(*i).copied()).take(USED_MAX).collect();
                used_recs.sort_unstable();
                used_recs.dedup();
                let kind = if mode == WriteMode::Summary { LinkKind::Summarized } else { LinkKind::Derived };
                let forwarded = task.channel == Channel::Message;
                let r = w.add(Rec {
                    item: item_of(0),
                    kind: RecKind::Output,
                    writer: role.clone(),
                    vec: embed(&out.text),
                    text: out.text,
                    parents: used_recs.iter().map(|u| (*u, kind)).collect(),
                    local: Local { readers: None, trust: TrustLabel::Agent, poisoned: false, revoked: false },
                    own_trust: TrustLabel::Agent,
                    restrict: None,
                    anc: BTreeSet::new(),
                    step,
                    holder: Some(role.clone()),
                    retrievable: true,
                    forwarded,
                    narrowing: None,
                })?;
                mem.on_write(&w, r)?;
                if let Some(slot) = w.outputs.get_mut(step) {
                    *slot = Some(r);
                }
                out_rec = Some(r);
            }
            mem.after_step(&mut w, &role, &used_recs, out_rec)?;
        } else {
            let proposal = agent.propose(&view).map_err(|e| BenchError::Agent(e.to_string()))?;
            let mut used: Vec<usize> = proposal.used.iter().filter_map(|i| ctx.get(*i).copied()).take(USED_MAX).collect();
            used.sort_unstable();
            used.dedup();
            let input = DecideInput { role: &role, used: used.clone(), conversation: all_msgs.clone(), withheld: ret.withheld.clone(), proposal: &proposal };
            let backend = mem.decide(&w, &input)?;
            outcome = Some((proposal, backend, used));
        }
        for ev in &plan.after {
            apply_event(&mut w, mem, ev, step)?;
        }
    }
    let Some((proposal, backend, _used)) = outcome else {
        return Err(BenchError::Invalid(format!("task {} has no final role", task.id)));
    };
    let final_decision = backend.decision.max(proposal.decision);
    let released = match final_decision {
        Decision::Allow => Some(proposal.output.clone()),
        Decision::Redact if backend.decision == Decision::Redact => {
            let flagged: Vec<&str> = backend.flagged.iter().filter_map(|r| w.recs.get(*r)).map(|x| x.text.as_str()).collect();
            Some(redact(&proposal.output, &flagged))
        }
        // The agent redacted its own output.
        Decision::Redact => Some(proposal.output.clone()),
        _ => None,
    };
    let outputs: Vec<usize> = w.outputs.iter().flatten().copied().collect();
    let contaminated = outputs.iter().filter(|r| w.poisoned_ancestry(**r)).count() as u32;
    Ok(TaskRun {
        proposal: proposal.decision,
        backend: backend.decision,
        final_decision,
        released,
        attempts,
        successes,
        downstream: outputs.len() as u32,
        contaminated,
        graph: mem.graph_size(),
        layers: mem.layers(),
    })
}

/// Rank `pool` by `score` (descending; ties by semantic score, then creation order) and keep `k`.
pub fn top_k(w: &World<'_>, pool: impl Iterator<Item = usize>, k: usize, score: &dyn Fn(usize) -> f64) -> Vec<usize> {
    let mut v: Vec<(f64, f64, usize)> = pool.map(|r| (score(r), similarity(w, r), r)).collect();
    v.sort_by(|a, b| b.0.total_cmp(&a.0).then(b.1.total_cmp(&a.1)).then(a.2.cmp(&b.2)));
    v.into_iter().take(k).map(|(_, _, r)| r).collect()
}

/// Cosine similarity of record `r` to the task's request.
pub fn similarity(w: &World<'_>, r: usize) -> f64 {
    w.recs.get(r).map_or(0.0, |x| w.idf.cosine(&w.query, &x.vec))
}

/// Count the unauthorized records among `top` (attempts) and those of them in `handed`.
pub fn count_reads(w: &World<'_>, role: &str, top: &[usize], handed: &[usize]) -> (u64, u64) {
    let bad: Vec<usize> = top.iter().copied().filter(|r| !w.authorized(role, *r)).collect();
    let ok = bad.iter().filter(|r| handed.contains(r)).count();
    (bad.len() as u64, ok as u64)
}
