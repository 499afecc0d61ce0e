//! The pipeline every operation runs: one fixed sequence of named stages, then one commit.
//!
//! ```text
//!   write:    authority mints AdmittedWrite ─▶ Stage::admit_write (lineage, lifecycle) ─▶ commit
//!   read:     store's permission filter ─▶ session floor ─▶ Stage::filter_reads
//!             (lineage CanRead + path trust, lifecycle firewall + broker) ─▶ select ─▶
//!             Stage::handed (lineage read_by) ─▶ session hand-over ─▶ commit
//!   decide:   context + analysis ─▶ Stage::decide (authority, lineage) ─▶ compose ─▶ commit
//!   promote:  authority mints AdmittedPromotion ─▶ Stage::admit_promotion (lifecycle, lineage)
//!             ─▶ commit
//! ```
//!
//! A stage never writes to the store: it returns its verdict (an error refuses the operation)
//! and adds what must persist to the operation's [`Effects`] — a gate decision for the log, a
//! lineage event, a restriction of the write. The engine commits the effects once, in one
//! atomic transaction ([`memwarden_store::Store::commit_atomic`]); a refused operation commits
//! only its logged decisions. A preset is the list of stages that are on: every preset runs the
//! same code path, with fewer stages.

use crate::lineage::StoredEvent;
use crate::{Actor, EngineError, SessionKey};
use memwarden_core::prelude::*;
use memwarden_store::{Mutation, Store};

/// What one operation persists, gathered by the engine and its stages and committed together.
#[derive(Default)]
pub(crate) struct Effects {
    /// Store mutations, in log order.
    mutations: Vec<Mutation>,
    /// The index in `mutations` whose receipt is the operation's own.
    primary: Option<usize>,
    /// Lineage events: logged after `mutations`, applied to the graph once committed.
    events: Vec<StoredEvent>,
    /// Committed memories to record in the lineage graph.
    items: Vec<MemoryItem>,
    /// The session observation to cache once committed (with the store version it was read at).
    pub(crate) session: Option<(SessionKey, Observed, u64)>,
    /// A stage changed the tenant's lineage graph ahead of the commit: if the operation does
    /// not commit, the graph is dropped (and rebuilt from the store on next use).
    pub(crate) graph_ahead: bool,
}

impl Effects {
    /// The operation's own mutation: its receipt is the one the operation returns.
    pub(crate) fn primary(&mut self, m: Mutation) {
        debug_assert!(self.primary.is_none(), "one primary mutation per operation");
        self.primary = Some(self.mutations.len());
        self.mutations.push(m);
    }

    /// A further mutation of the operation (a gate decision, a hold, a session's hand-over).
    pub(crate) fn log(&mut self, m: Mutation) {
        self.mutations.push(m);
    }

    /// A lineage event of the operation.
    pub(crate) fn event(&mut self, ev: StoredEvent) {
        self.events.push(ev);
    }

    /// A memory the operation writes (recorded in the lineage graph once committed).
    pub(crate) fn item(&mut self, item: MemoryItem) {
        self.items.push(item);
    }

    /// The lineage events gathered so far.
    pub(crate) fn events_mut(&mut self) -> &mut Vec<StoredEvent> {
        &mut self.events
    }

    /// Whether nothing is to be committed.
    pub(crate) fn is_empty(&self) -> bool {
        self.mutations.is_empty() && self.events.is_empty()
    }

    /// The mutations to commit (events encoded after the others), the primary's index, the
    /// events, the items and the session to apply once committed.
    pub(crate) fn into_parts(self, tenant: &TenantId) -> Result<Parts, EngineError> {
        let mut mutations = self.mutations;
        for ev in &self.events {
            mutations.push(ev.mutation(tenant)?);
        }
        Ok(Parts { mutations, primary: self.primary, events: self.events, items: self.items, session: self.session, graph_ahead: self.graph_ahead })
    }
}

/// [`Effects`] taken apart for the commit.
pub(crate) struct Parts {
    pub(crate) mutations: Vec<Mutation>,
    pub(crate) primary: Option<usize>,
    pub(crate) events: Vec<StoredEvent>,
    pub(crate) items: Vec<MemoryItem>,
    pub(crate) session: Option<(SessionKey, Observed, u64)>,
    pub(crate) graph_ahead: bool,
}

/// What every stage may know about the operation.
pub(crate) struct Cx<'a> {
    /// The authenticated caller.
    pub(crate) actor: &'a Actor,
    /// The store (read only: stages persist through [`Effects`]).
    pub(crate) store: &'a dyn Store,
    /// The operation's time.
    pub(crate) now_ms: u64,
}

/// A memory's parent as every layer reads it: `None` fields when the store could not return it
/// (a reader then treats the parent as external and untrusted: an error never lowers risk).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ParentView {
    /// The parent's id.
    pub(crate) id: ItemId,
    /// How it entered.
    pub(crate) route: Option<Route>,
    /// Its label.
    pub(crate) label: Option<Integrity>,
}

/// The one typed view of a memory that every stage reads: the memory, its parents with their
/// routes and labels, and its writer's reputation (lifecycle feedback; `None`: none stored, or
/// the lookup failed — the default, never a raised trust). Built once per operation, in batches
/// ([`crate::Engine::views`]).
#[derive(Debug, Clone)]
pub(crate) struct MemoryView {
    /// The memory.
    pub(crate) item: MemoryItem,
    /// Its declared parents, in order.
    pub(crate) parents: Vec<ParentView>,
    /// Its writer's stored reputation.
    pub(crate) writer_reputation: Option<f64>,
    /// The readers its ancestry admits, as the lineage graph computed them.
    pub(crate) ceiling: Ceiling,
}

/// The ancestry ceiling of a memory (who its ancestry lets read it), as the lineage graph knows it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Ceiling {
    /// The lineage layer is off, or the memory is the reader's own.
    NotTracked,
    /// The graph's ceiling.
    Known(Readers),
    /// The graph does not know the memory: its ancestry admits nobody.
    Unknown,
}

/// Which door hands memories over: decides which read stages apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Read<'q> {
    /// A search for `query` (the read firewall scores it).
    Search {
        /// The query text.
        query: &'q str,
    },
    /// A read by id.
    Get,
    /// A namespace listing.
    List,
    /// A memory's versions (superseded ones included).
    History,
}

/// A memory on its way to a reader, with what the stages found.
#[derive(Debug, Clone)]
pub(crate) struct Candidate {
    /// The memory and what every layer reads of it.
    pub(crate) view: MemoryView,
    /// Cosine similarity to the query (searches; 0 otherwise).
    pub(crate) similarity: f32,
    /// What the product ranks by (searches; 0 otherwise).
    pub(crate) relevance: f64,
    /// The lifecycle scorer's risk and the evidence that fired.
    pub(crate) risk: Option<(f64, Vec<&'static str>)>,
    /// The lineage layer's scores for the reader (searches).
    pub(crate) path: Option<memwarden_lineage::Ranked>,
    /// Why a stage withheld it (`None`: still on its way).
    pub(crate) withheld: Option<Withheld>,
}

impl Candidate {
    /// A candidate nothing has scored yet.
    pub(crate) fn new(view: MemoryView, similarity: f32, relevance: f64) -> Self {
        Self { view, similarity, relevance, risk: None, path: None, withheld: None }
    }

    /// The memory.
    pub(crate) fn item(&self) -> &MemoryItem {
        &self.view.item
    }

    /// Withhold it (the first reason stands).
    pub(crate) fn withhold(&mut self, why: Withheld) {
        self.withheld.get_or_insert(why);
    }
}

/// Why a memory was not handed over. Out of scope reads as not found (nothing is disclosed); a
/// planning session's floor says so (the caller can read it elsewhere); a memory in the reader's
/// scope that a layer holds back is reported withheld, with the rule and the evidence
/// ([`crate::EngineError::Withheld`], and counted by list and search).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Withheld {
    /// Out of the reader's scope, or not active (and not held back by a gate).
    Scope,
    /// Below the session's floor (a planning session, or a caller's `min_label`).
    SessionFloor,
    /// A layer held it back: which layer, the rule that fired and the evidence.
    Stage(Hold),
    /// Not among the candidates the lineage graph ranks (its `k_max`): a cut of the search's
    /// over-fetch, not a verdict on the memory.
    Cut,
}

/// What a layer's stage found when it held a memory back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Hold {
    /// The layer that held it back.
    pub(crate) layer: Layer,
    /// The rule that withheld it (`tainted_directive`, `quarantined`, `revoked_ancestor`, ...).
    pub(crate) rule: String,
    /// The evidence that fired (never empty: the rule itself when nothing else did).
    pub(crate) flags: Vec<String>,
}

impl Hold {
    /// A hold by `layer` under `rule` with the evidence `flags` (the rule alone when none).
    pub(crate) fn new(layer: Layer, rule: impl Into<String>, flags: Vec<String>) -> Self {
        let rule = rule.into();
        let flags = if flags.is_empty() { vec![rule.clone()] } else { flags };
        Self { layer, rule, flags }
    }
}

/// A defense layer's part in the pipeline. Every method has a default that changes nothing, so
/// a layer implements only the gates it has. Errors refuse the operation (any error in a
/// security decision denies); what a stage logs about a refusal goes in `fx` and is committed
/// even when the operation is refused.
pub(crate) trait Stage: Send + Sync {
    /// The layer.
    fn layer(&self) -> Layer;

    /// Whether the stage reads parents and writer reputations ([`MemoryView`] is built without
    /// them when no stage does).
    fn reads_views(&self) -> bool {
        false
    }

    /// Admit a write the authority layer minted (`cited`: what the write names as its parents,
    /// inputs and argument sources). May restrict it (status, guard state, a prepended note).
    fn admit_write(&self, _cx: &Cx<'_>, _write: &mut AdmittedWrite, _view: &MemoryView, _cited: &[ItemId], _fx: &mut Effects) -> Result<(), EngineError> {
        Ok(())
    }

    /// Filter and annotate memories on their way to a reader: withhold some (never re-admit
    /// one), score the rest.
    fn filter_reads(&self, _cx: &Cx<'_>, _read: Read<'_>, _candidates: &mut [Candidate], _fx: &mut Effects) -> Result<(), EngineError> {
        Ok(())
    }

    /// The memories the reader is handed (after selection).
    fn handed(&self, _cx: &Cx<'_>, _read: Read<'_>, _handed: &[Candidate], _fx: &mut Effects) -> Result<(), EngineError> {
        Ok(())
    }

    /// The layer's verdict on an action (`None`: the layer has no action gate). An error is a
    /// `Block` for the composition.
    fn decide(&self, _cx: &Cx<'_>, _input: &DecideInput<'_>, _fx: &mut Effects) -> Result<Option<Verdict>, EngineError> {
        Ok(None)
    }

    /// Admit a promotion the authority layer minted (`admitted`: the memory's version chain,
    /// oldest first, the promoted memory last).
    fn admit_promotion(&self, _cx: &Cx<'_>, _memory: &MemoryView, _admitted: &[AdmittedPromotion], _fx: &mut Effects) -> Result<(), EngineError> {
        Ok(())
    }

    /// What the layer finds in an operation's free-text fields (`(name, text)`) that must not
    /// reach the store or the log (credential material), one finding per line, never the text.
    fn screen_fields(&self, _what: &str, _fields: &[(String, &str)]) -> Result<Vec<String>, EngineError> {
        Ok(Vec::new())
    }

    /// The evidence the layer sees in a memory a gate quarantined (`None`: it has no scorer).
    fn hold_flags(&self, _view: &MemoryView) -> Option<Vec<String>> {
        None
    }

    /// A task outcome reported for memories the reporter was handed (`used`, resolved): the
    /// layer's records and the one mutation that commits them (`None`: the layer keeps no
    /// outcome state).
    fn feedback(&self, _cx: &Cx<'_>, _used: &[MemoryItem], _success: bool) -> Result<Option<Feedback>, EngineError> {
        Ok(None)
    }

    /// A principal was registered (committed): the layer records it in its own state.
    fn registered(&self, _store: &dyn Store, _principal: &Principal) {}

    /// Memories were revoked (`ids`, committed with `fx`): what the layer logs with them.
    fn revoked(&self, _cx: &Cx<'_>, _ids: &[ItemId], _fx: &mut Effects) {}

    /// The readers each memory's ancestry admits, as the layer's own records know them (`None`:
    /// the layer keeps no ancestry). In the order of `items`.
    fn ceilings(&self, _store: &dyn Store, _tenant: &TenantId, _items: &[MemoryItem]) -> Result<Option<Vec<Ceiling>>, EngineError> {
        Ok(None)
    }

    /// Whether every memory of `evidence` is still clean by the layer's records (nothing
    /// poisoned or revoked on its path): an elevation computed from it still counts. Any error
    /// is `false` (an elevation that stops counting only asks more).
    fn evidence_clean(&self, _store: &dyn Store, _tenant: &TenantId, _evidence: &[ItemId]) -> bool {
        true
    }

    /// Whether the layer's action gate weighs a cited memory that a layer or the session's floor
    /// holds back as evidence (the lineage context rule), rather than as an invalid citation.
    fn weighs_held_context(&self) -> bool {
        false
    }

    /// Load the tenant's layer state now (a server warms every tenant once it listens).
    fn warm(&self, _store: &dyn Store, _tenant: &TenantId) -> Result<(), EngineError> {
        Ok(())
    }

    /// An operation committed: the layer brings its own state up to date with the memories it
    /// wrote and its events. A layer that cannot apply them drops its state (rebuilt from the
    /// store on next use, this commit included): the operation is durable either way.
    fn committed(&self, _store: &dyn Store, _tenant: &TenantId, _items: &[MemoryItem], _events: &[StoredEvent]) {}

    /// An operation that changed the layer's state ahead of its commit did not commit: the layer
    /// drops that state (rebuilt from the store on next use).
    fn abandoned(&self, _tenant: &TenantId) {}

    /// The lineage layer's graphs, for the operations that are that layer's own (a lineage
    /// view, the audit export, flag, verify, erase); `None` for every other layer.
    fn lineage(&self) -> Option<&crate::lineage::Lineage> {
        None
    }
}

/// What a stage's outcome feedback produced ([`Stage::feedback`]).
pub(crate) struct Feedback {
    /// Each moved memory's record.
    pub(crate) records: Vec<memwarden_lifecycle::FeedbackRecord>,
    /// The guard states and reputations, logged with the report.
    pub(crate) mutation: memwarden_store::Mutation,
}

/// What the action stages read.
pub(crate) struct DecideInput<'a> {
    /// The request, with the system's action class applied (`kind`, `risk`).
    pub(crate) classed: &'a ActionRequest,
    /// The authority layer's analysis of it.
    pub(crate) analysis: &'a memwarden_core::authority::ActionAnalysis,
    /// The cited memories' ids (context and value sources), sorted.
    pub(crate) cited: &'a [ItemId],
    /// The cited context items of the actor's scope that a layer holds back (quarantined,
    /// superseded), sorted: evidence for the lineage stage's context rule.
    pub(crate) unreadable: &'a [ItemId],
}
