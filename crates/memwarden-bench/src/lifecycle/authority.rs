//! The authority layer of the `full` variant: memwarden-core's real gate, not a re-implementation.
//!
//! * Every memory the simulation stores is also admitted through
//!   [`Authority::admit_write_observed`]: its origin and label come from the writing principal's
//!   kind (users trusted, agents `agent`, sources and unlisted tools untrusted), the labels of its
//!   declared parents and the floor of the writer's session. **Attacker-controlled agents are
//!   ordinary agent principals**: the gate never learns who the attackers are.
//! * Each benign agent works each task in a fresh session ([`Observed`]); everything handed to it
//!   (retrieved memories, hand-offs, tool outputs, search results) lowers the session's floor, and
//!   its hand-offs and experiences are written at most at that floor.
//! * A promotion to the shared store is [`Authority::admit_promotion`]: only the owner, only an
//!   active memory, never wider than the memory's ancestry (its `observed_from` witnesses).
//! * A consequential tool choice is decided by Algorithm 1, [`Authority::decide`]: a value pushed
//!   by untrusted memory (or proposed by a session that was handed untrusted memory, when nothing
//!   of at least agent integrity carries it) needs independent trusted corroboration or a user
//!   grant; otherwise the verdict is `AskUser`.
//!
//! The lineage layer (path-trust rerank, five-outcome action gate) is not composed here.

use std::collections::{BTreeSet, HashMap};

use memwarden_core::action::{ActionKind, ActionRequest, ActionValue, Decision, Risk, Verdict};
use memwarden_core::authority::{Authority, DecisionContext, PromoteError};
use memwarden_core::ids::{ItemId, Namespace, PrincipalId, TenantId};
use memwarden_core::item::{EdgeKind, MemoryItem, ParentRef, Readers, Route, WriteRequest};
use memwarden_core::label::Integrity;
use memwarden_core::normalize::ValueKind;
use memwarden_core::principal::{Principal, PrincipalKind};
use memwarden_core::session::Observed;

use crate::BenchError;

/// Who writes a memory, as the write path authenticates it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Writer {
    /// The team's user (trusted): the long-history setting's chat history.
    User,
    /// Agent `i` (benign or attacker-controlled alike: `agent` integrity).
    Agent(usize),
    /// An outside user talking to an agent (MINJA's query-only attacker): a source, untrusted.
    Outside,
    /// Web search results: a source, untrusted.
    Web,
    /// The read tools of the tool-use settings, which return third-party content (reviews,
    /// e-mails, tweets): a tool that is not on the allow-list, untrusted.
    Tool,
}

/// What the authority layer needs to admit a memory the simulation stores.
#[derive(Debug, Clone, PartialEq)]
pub struct AuthorWrite {
    /// The writer.
    pub writer: Writer,
    /// The writer's session as it was when the content was produced (`None`: a clean session).
    pub observed: Option<Observed>,
    /// Declared parents (derived-from edges).
    pub parents: Vec<ItemId>,
    /// Readers narrowed to these agents (`None`: everyone).
    pub readers: Option<Vec<usize>>,
    /// A record admitted earlier for the same content (an observation admitted when it was
    /// handed to the agent, stored as a memory after the task).
    pub existing: Option<ItemId>,
    /// The route declared at the door, when the lifecycle layer scores the memory by another
    /// (the API's `direct` route is scored as the writer's own output).
    pub route: Option<Route>,
}

impl AuthorWrite {
    /// A write by `writer` in a clean session, readable by everyone.
    pub fn new(writer: Writer) -> Self {
        Self { writer, observed: None, parents: Vec::new(), readers: None, existing: None, route: None }
    }

    /// Narrow the readers to `agents`.
    #[must_use]
    pub fn readers(mut self, agents: Vec<usize>) -> Self {
        self.readers = Some(agents);
        self
    }

    /// Written from a session that was handed `observed`.
    #[must_use]
    pub fn observed(mut self, observed: Observed) -> Self {
        self.observed = Some(observed);
        self
    }
}

/// How one consequential proposal fared.
#[derive(Debug, Clone, PartialEq)]
pub struct ActionVerdict {
    /// The verdict's decision.
    pub decision: Decision,
    /// The untrusted items the verdict names as pushing the value.
    pub pushers: Vec<ItemId>,
}

/// The authority layer's state in one run.
#[derive(Debug)]
pub struct AuthorityLayer {
    gate: Authority,
    tenant: TenantId,
    ns: Namespace,
    agents: Vec<Principal>,
    user: Principal,
    outside: Principal,
    web: Principal,
    tool: Principal,
    records: HashMap<ItemId, MemoryItem>,
    sessions: Vec<Observed>,
    next: u64,
}

fn invalid(what: &str, e: impl std::fmt::Display) -> BenchError {
    BenchError::Invalid(format!("authority layer: {what}: {e}"))
}

impl AuthorityLayer {
    /// A tenant with `agents` agent principals, the user, an outside user, the web and the read
    /// tools.
    pub fn new(agents: usize) -> Result<Self, BenchError> {
        let tenant = TenantId::new("lifecycle-sim").map_err(|e| invalid("tenant", e))?;
        let ns = Namespace::new("team").map_err(|e| invalid("namespace", e))?;
        let mk = |id: &str, kind: PrincipalKind| -> Result<Principal, BenchError> {
            Ok(Principal {
                id: PrincipalId::new(id).map_err(|e| invalid("principal", e))?,
                tenant: tenant.clone(),
                kind,
                domain: None,
                allow_listed: false,
                public_key: None, action: None,
            })
        };
        let agents = (0..agents).map(|i| mk(&format!("agent-{i}"), PrincipalKind::Agent)).collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            user: mk("user", PrincipalKind::User)?,
            outside: mk("outside-user", PrincipalKind::Source)?,
            web: mk("web", PrincipalKind::Source)?,
            tool: mk("read-tool", PrincipalKind::Tool)?,
            sessions: vec![Observed::clean(); agents.len()],
            agents,
            gate: Authority::default(),
            tenant,
            ns,
            records: HashMap::new(),
            next: 0,
        })
    }

    fn principal(&self, w: Writer) -> Option<&Principal> {
        match w {
            Writer::User => Some(&self.user),
            Writer::Agent(i) => self.agents.get(i),
            Writer::Outside => Some(&self.outside),
            Writer::Web => Some(&self.web),
            Writer::Tool => Some(&self.tool),
        }
    }

    /// A new task: every agent starts a fresh session.
    pub fn begin_task(&mut self) {
        for s in &mut self.sessions {
            *s = Observed::clean();
        }
    }

    /// Agent `i`'s current session.
    pub fn session(&self, i: usize) -> Observed {
        self.sessions.get(i).cloned().unwrap_or_else(Observed::clean)
    }

    /// Record that `rec` was handed to agent `i`.
    pub fn observe(&mut self, i: usize, rec: ItemId) {
        if let (Some(item), Some(s)) = (self.records.get(&rec), self.sessions.get_mut(i)) {
            s.observe(item);
        }
    }

    /// The label of a record.
    pub fn integrity(&self, rec: ItemId) -> Option<Integrity> {
        self.records.get(&rec).map(|i| i.label().integrity())
    }

    /// Admit a write (`now_ms` orders the records); returns the record's id.
    pub fn admit(&mut self, w: &AuthorWrite, route: Route, text: &str, now_ms: u64) -> Result<ItemId, BenchError> {
        if let Some(id) = w.existing
            && self.records.contains_key(&id)
        {
            return Ok(id);
        }
        let principal = self.principal(w.writer).ok_or_else(|| invalid("writer", "unknown agent"))?.clone();
        let route = w.route.unwrap_or(route);
        let mut req = WriteRequest::new(self.ns.clone(), text, route);
        let mut parents: Vec<&MemoryItem> = Vec::new();
        for p in &w.parents {
            if let Some(item) = self.records.get(p) {
                req.parents.push(ParentRef { id: *p, kind: EdgeKind::DerivedFrom });
                parents.push(item);
            }
        }
        if let Some(agents) = &w.readers {
            let set: BTreeSet<PrincipalId> = agents.iter().filter_map(|a| self.agents.get(*a)).map(|p| p.id.clone()).collect();
            req.readers = Some(set);
        }
        self.next += 1;
        let mut b = [0u8; 16];
        b[0] = 0x5e;
        b[8..16].copy_from_slice(&self.next.to_be_bytes());
        let id = ItemId::from_bytes(b);
        let observed = w.observed.clone().unwrap_or_else(Observed::clean);
        let admitted = self
            .gate
            .admit_write_observed(&principal, &self.tenant, req, &parents, &observed, id, now_ms)
            .map_err(|e| invalid(&format!("write by {} on route {}", principal.id, route.as_str()), e))?;
        self.records.insert(id, admitted.item().clone());
        Ok(id)
    }

    /// Ask to widen `rec` to every reader, as agent `by` (the authority half of a promotion).
    pub fn promote(&mut self, by: usize, rec: ItemId) -> Result<(), PromoteError> {
        let principal = self.agents.get(by).ok_or(PromoteError::NotOwner)?;
        let item = self.records.get(&rec).ok_or(PromoteError::ParentMismatch)?;
        let parents: Vec<Option<&MemoryItem>> = item.parents().iter().map(|p| self.records.get(&p.id)).collect();
        let promoted = self.gate.admit_promotion(principal, item, Readers::All, &parents)?;
        let promoted = promoted.item().clone();
        self.records.insert(rec, promoted);
        Ok(())
    }

    /// Algorithm 1 on agent `i`'s proposal to take `action` (the option's text, also the
    /// safety-relevant value), with `context` (the records in its prompt) and `sources` (the
    /// records its answer followed). `consequential`: a state-changing tool call.
    pub fn decide(&self, i: usize, action: &str, consequential: bool, context: &[ItemId], sources: &[ItemId], now_ms: u64) -> ActionVerdict {
        let req = ActionRequest {
            tool: action.to_owned(),
            kind: if consequential { ActionKind::Act } else { ActionKind::Answer },
            risk: Risk::High,
            values: vec![ActionValue { key: "action".to_owned(), value: action.to_owned(), kind: ValueKind::Text, sources: sources.to_vec() }],
            amount: None,
            context: context.to_vec(),
            grants: Vec::new(),
        };
        let mut ids: Vec<ItemId> = context.iter().chain(sources).copied().collect();
        ids.sort_unstable();
        ids.dedup();
        let items: Vec<&MemoryItem> = ids.iter().filter_map(|id| self.records.get(id)).collect();
        let session = self.session(i);
        let witnesses: Vec<&MemoryItem> = session.witnesses().iter().filter_map(|id| self.records.get(id)).collect();
        let principals: Vec<Principal> =
            self.agents.iter().chain([&self.user, &self.outside, &self.web, &self.tool]).cloned().collect();
        let lookup = |id: &PrincipalId| principals.iter().find(|p| p.id == *id).cloned();
        let class = memwarden_core::authority::ActionClass::of(action, Some(&memwarden_core::principal::ToolAction { kind: req.kind, risk: Risk::High, values: Vec::new(), moves_money: false, support_k: 1, support_k_from_amount: None }));
        let ctx = DecisionContext {
            tenant: &self.tenant,
            store: "lifecycle-sim",
            now_ms,
            actor: &self.agents[i],
            class: &class,
            items: &items,
            attestations: &[],
            elevations: &[],
            principal: &lookup,
            grant_used: &|_: &[u8; 16]| false,
            session: &session,
            session_witnesses: &witnesses,
            neighbours: &[],
        };
        let outcome = self.gate.decide(&req, &ctx);
        let v: &Verdict = outcome.verdict();
        let mut pushers: Vec<ItemId> = v.pushed.iter().flat_map(|p| p.pushed_by.iter().copied()).collect();
        pushers.extend(v.affected.iter().copied());
        pushers.sort_unstable();
        pushers.dedup();
        ActionVerdict { decision: v.decision, pushers }
    }
}
