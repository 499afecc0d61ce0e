//! [`LineageGraph`]: the in-memory provenance graph. Every mutation is an *event* applied to the
//! graph that returns the *effects* a store must persist (new or updated record rows, new edges,
//! action and erasure records), so a database backend can replay the same events and end in the
//! same state.

use crate::access::{DenyReason, ReadFacts, can_read};
use crate::config::{ConfigError, LineageConfig};
use crate::gate::{self, ActionRecord, GateDecision, GateRequest, SupportFacts};
use crate::model::{AncestrySummary, Edge, EdgeAttrs, InvalidationCause, NodeKind, NodeRef, RecordKind, edge_shape_ok};
use crate::pathtrust::{TrustBreakdown, path_trust};
use crate::rank::{Candidate, Ranked, Ranking, rank_by};
use crate::scope::{derive_scope, effective_readers, readers_subset, revoked_scope, scope_of};
use crate::summary::{OwnFacts, agrees, from_scratch, is_parent_kind, summarize};
use crate::trust::Trust;
use memwarden_core::action::Decision;
use memwarden_core::ids::{ItemId, PrincipalId};
use memwarden_core::item::{EdgeKind, MemoryItem, ParentRef, Readers, Scope, Visibility};
use memwarden_core::label::Integrity;
use memwarden_core::principal::PrincipalKind;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

// ------------------------------------------------------------------------------------------------
// Stored state
// ------------------------------------------------------------------------------------------------

/// A principal node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PrincipalState {
    /// Its id.
    pub id: PrincipalId,
    /// Its kind (user, agent, tool, source channel).
    pub kind: PrincipalKind,
    /// A (the writer's reputation factor of path trust).
    pub reputation: Trust,
}

/// Everything the graph knows about a record except its text: the row a store persists. Fields
/// are private; only this module changes them, and only the revocation code can make a record
/// revoked, only the poison-flag code poisoned, only the erasure code erased.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordState {
    id: ItemId,
    seq: u64,
    kind: RecordKind,
    writer: PrincipalId,
    integrity: Integrity,
    base_trust: Trust,
    parents: Vec<ParentRef>,
    scope: Scope,
    poisoned: bool,
    verified_by: BTreeSet<PrincipalId>,
    erased: bool,
    created_ms: u64,
    summary: AncestrySummary,
    /// Records its writer's session had been handed before the write (`seen_in_session`): not
    /// a derivation, so nothing of theirs reaches this record but the mark below.
    #[serde(default)]
    seen: Vec<ItemId>,
    /// Something in `seen` was erased since (this record stayed: it was not derived from it).
    #[serde(default)]
    saw_erased: bool,
}

impl RecordState {
    /// Id.
    pub fn id(&self) -> ItemId {
        self.id
    }
    /// Insertion order in the graph (parents always have a smaller one).
    pub fn seq(&self) -> u64 {
        self.seq
    }
    /// Node type.
    pub fn kind(&self) -> RecordKind {
        self.kind
    }
    /// Writer (the `written_by` principal).
    pub fn writer(&self) -> &PrincipalId {
        &self.writer
    }
    /// Integrity label given at write.
    pub fn integrity(&self) -> Integrity {
        self.integrity
    }
    /// Base trust (S of this item alone).
    pub fn base_trust(&self) -> Trust {
        self.base_trust
    }
    /// Parent edges.
    pub fn parents(&self) -> &[ParentRef] {
        &self.parents
    }
    /// Permission scope (owner is the writer).
    pub fn scope(&self) -> &Scope {
        &self.scope
    }
    /// Whether revoked.
    pub fn revoked(&self) -> bool {
        self.scope.visibility == Visibility::Revoked
    }
    /// Whether flagged poisoned.
    pub fn poisoned(&self) -> bool {
        self.poisoned
    }
    /// Who verified it.
    pub fn verified_by(&self) -> &BTreeSet<PrincipalId> {
        &self.verified_by
    }
    /// Whether erased (a tombstone: no text, lineage kept).
    pub fn erased(&self) -> bool {
        self.erased
    }
    /// Creation time (ms since the epoch, as passed in).
    pub fn created_ms(&self) -> u64 {
        self.created_ms
    }
    /// The ancestry summary.
    pub fn summary(&self) -> &AncestrySummary {
        &self.summary
    }
    /// What its writer's session had been handed before the write (not parents).
    pub fn seen(&self) -> &[ItemId] {
        &self.seen
    }
    /// Whether something its writer's session had seen was erased since (the record stayed).
    pub fn saw_erased(&self) -> bool {
        self.saw_erased
    }
    /// *Affected* as seen from its writer: something untrusted, poisoned or revoked on its path,
    /// or an item on the path that does not admit the writer.
    pub fn affected(&self) -> bool {
        self.summary.affected_for(&self.writer)
    }
    fn own_facts(&self) -> OwnFacts {
        OwnFacts {
            id: self.id,
            base_trust: self.base_trust,
            untrusted: self.integrity == Integrity::Untrusted,
            private: self.scope.visibility == Visibility::Private,
            poisoned: self.poisoned,
            revoked: self.revoked(),
            verified: !self.verified_by.is_empty(),
            eff: effective_readers(&self.scope),
        }
    }
}

#[derive(Debug, Clone)]
struct Node {
    state: RecordState,
    text: Option<String>,
    parent_edges: Vec<(EdgeKind, ItemId)>,
}

/// Work queued for a propagation step.
#[derive(Debug, Clone, Default)]
struct Work {
    id: Option<ItemId>,
    /// Revoked ancestors this record must get an `invalidated_by` edge to.
    invalidate: BTreeSet<ItemId>,
}

// ------------------------------------------------------------------------------------------------
// Events
// ------------------------------------------------------------------------------------------------

/// Register a principal node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RegisterPrincipal {
    /// Id.
    pub id: PrincipalId,
    /// Kind.
    pub kind: PrincipalKind,
    /// Starting reputation (default: `reputation_default`).
    #[serde(default)]
    pub reputation: Option<Trust>,
}

/// A write: a new record (resource, message, memory or claim). Every write creates a new record;
/// nothing is deduplicated and no earlier text changes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WriteEvent {
    /// The new record's id (allocated by the caller; must be new).
    pub id: ItemId,
    /// Node type.
    pub kind: RecordKind,
    /// The writing principal (must be registered).
    pub writer: PrincipalId,
    /// The text (non-empty).
    pub text: String,
    /// The integrity label the authority layer bound (for a standalone benchmark: the task's
    /// trust label).
    pub integrity: Integrity,
    /// An explicit source trust (e.g. a task-provided reliability); it can only lower the base
    /// trust the label gives, never raise it.
    #[serde(default)]
    pub source_trust: Option<Trust>,
    /// Flagged poisoned at write (by a detector or a task field).
    #[serde(default)]
    pub poisoned: bool,
    /// `derived_from` / `summarized_from` / `observed_from` edges: the retrieved memories and the
    /// sources visible at this step. The writer must be able to read each.
    #[serde(default)]
    pub parents: Vec<ParentRef>,
    /// An explicit reader set; it narrows the derived scope, never widens it.
    #[serde(default)]
    pub readers: Option<BTreeSet<PrincipalId>>,
    /// Records the writer's session had been handed (`seen_in_session`): kept for the erasure
    /// mark only, never a parent (unknown ids are left out).
    #[serde(default)]
    pub seen: Vec<ItemId>,
    /// For messages: the agents it was forwarded to (`forwarded_to` edges). Forwarding does not
    /// widen the scope: a recipient outside it holds a permission-invalid message.
    #[serde(default)]
    pub forwarded_to: Vec<PrincipalId>,
    /// When (ms since the epoch).
    pub at_ms: u64,
}

impl WriteEvent {
    /// A root write with no parents and no explicit readers.
    pub fn new(
        id: ItemId,
        kind: RecordKind,
        writer: PrincipalId,
        text: impl Into<String>,
        integrity: Integrity,
        at_ms: u64,
    ) -> Self {
        Self {
            id,
            kind,
            writer,
            text: text.into(),
            integrity,
            source_trust: None,
            poisoned: false,
            parents: Vec::new(),
            readers: None,
            seen: Vec::new(),
            forwarded_to: Vec::new(),
            at_ms,
        }
    }
    /// The lineage view of an item the authority layer admitted: its id, writer, text, label,
    /// parent edges of the three derivation kinds, explicit readers and creation time.
    pub fn from_item(item: &MemoryItem, kind: RecordKind) -> Self {
        Self {
            id: item.id(),
            kind,
            writer: item.writer().clone(),
            text: item.content().to_owned(),
            integrity: item.label().integrity(),
            source_trust: None,
            poisoned: false,
            parents: item.parents().iter().filter(|p| is_parent_kind(p.kind)).copied().collect(),
            readers: match &item.scope().readers {
                Readers::All => None,
                Readers::Only(s) => Some(s.clone()),
            },
            seen: item.parents().iter().filter(|p| p.kind == EdgeKind::SeenInSession).map(|p| p.id).collect(),
            forwarded_to: Vec::new(),
            at_ms: item.created_ms(),
        }
    }
    /// Add a parent edge.
    #[must_use]
    pub fn parent(mut self, id: ItemId, kind: EdgeKind) -> Self {
        self.parents.push(ParentRef { id, kind });
        self
    }
    /// Add a `derived_from` parent.
    #[must_use]
    pub fn derived_from(self, id: ItemId) -> Self {
        self.parent(id, EdgeKind::DerivedFrom)
    }
    /// Add a `summarized_from` parent.
    #[must_use]
    pub fn summarized_from(self, id: ItemId) -> Self {
        self.parent(id, EdgeKind::SummarizedFrom)
    }
    /// Add an `observed_from` parent.
    #[must_use]
    pub fn observed_from(self, id: ItemId) -> Self {
        self.parent(id, EdgeKind::ObservedFrom)
    }
    /// Narrow the readers.
    #[must_use]
    pub fn readers(mut self, readers: impl IntoIterator<Item = PrincipalId>) -> Self {
        self.readers = Some(readers.into_iter().collect());
        self
    }
    /// Lower the base trust.
    #[must_use]
    pub fn source_trust(mut self, t: Trust) -> Self {
        self.source_trust = Some(t);
        self
    }
    /// Flag poisoned at write.
    #[must_use]
    pub fn poisoned(mut self) -> Self {
        self.poisoned = true;
        self
    }
    /// Forward to an agent.
    #[must_use]
    pub fn forwarded_to(mut self, p: PrincipalId) -> Self {
        self.forwarded_to.push(p);
        self
    }
}

/// Widen a record's readers (private → shared or to more named readers).
///
/// *Promotion* replaces the record's readers by a superset; it is allowed only for the record's
/// owner and only when every item on its path already admits every new reader: the new set must
/// be within the intersection of the effective readers of all its ancestors (the parents'
/// ceilings). A root (no parents) can be promoted freely by its owner. So to share a summary of a
/// private document, the document's owner shares the document first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PromoteEvent {
    /// The record.
    pub id: ItemId,
    /// Who asks (must be the owner).
    pub actor: PrincipalId,
    /// The new readers (a superset of the current ones).
    pub readers: Readers,
    /// When.
    pub at_ms: u64,
}

/// Record that a user or tool verified a record (`verified_by`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VerifyEvent {
    /// The record.
    pub id: ItemId,
    /// The verifier (a user or tool principal).
    pub verifier: PrincipalId,
    /// When.
    pub at_ms: u64,
}

/// Flag a record poisoned (a detector, the lifecycle layer's taint, an operator).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlagPoisonedEvent {
    /// The record.
    pub id: ItemId,
    /// Who flags it.
    pub reporter: PrincipalId,
    /// When.
    pub at_ms: u64,
}

/// Revoke a record (typically a source whose permission was withdrawn).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RevokeEvent {
    /// The record.
    pub id: ItemId,
    /// Who revokes (authorisation to revoke is the engine's; the graph records who).
    pub revoker: PrincipalId,
    /// When.
    pub at_ms: u64,
}

/// Erase a record and everything that depends on it alone.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EraseEvent {
    /// The record to erase.
    pub id: ItemId,
    /// Id of this erasure (allocated by the caller).
    pub erasure_id: ItemId,
    /// Who asks.
    pub requested_by: PrincipalId,
    /// When.
    pub at_ms: u64,
}

/// A proposed action to gate and record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ActionEvent {
    /// The action's id (allocated by the caller; must be new).
    pub id: ItemId,
    /// The gate request (agent, kind, risk, supports).
    pub request: GateRequest,
    /// The tool to call.
    pub tool: String,
    /// The principal on whose behalf the agent acts (`authorized_by`), if any.
    #[serde(default)]
    pub on_behalf_of: Option<PrincipalId>,
    /// An outcome the agent itself proposed; it stands when more restrictive than the gate's.
    #[serde(default)]
    pub agent_proposal: Option<Decision>,
    /// When.
    pub at_ms: u64,
}

// ------------------------------------------------------------------------------------------------
// Effects
// ------------------------------------------------------------------------------------------------

/// What a write changed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WriteEffects {
    /// The new record's row.
    pub record: RecordState,
    /// New edges (`written_by`, parent edges, `forwarded_to`).
    pub edges: Vec<Edge>,
    /// The scope intersection was empty and fell back to the writer alone.
    pub scope_fell_back: bool,
}

/// What a propagating event (revocation, poison flag, promotion, verification) or a propagation
/// step changed.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct PropagationEffects {
    /// Rows to upsert, in processing order.
    pub updated: Vec<RecordState>,
    /// New edges (`invalidated_by`, `verified_by`).
    pub edges: Vec<Edge>,
    /// Records still queued; call [`LineageGraph::step`] until 0.
    pub remaining: usize,
}

impl PropagationEffects {
    fn absorb(&mut self, other: PropagationEffects) {
        self.updated.extend(other.updated);
        self.edges.extend(other.edges);
        self.remaining = other.remaining;
    }
    /// Whether propagation has finished.
    pub fn done(&self) -> bool {
        self.remaining == 0
    }
}

/// The audit record of an erasure. It names what was erased, never what it said.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErasureRecord {
    /// Id of the erasure.
    pub erasure_id: ItemId,
    /// The record the caller asked to erase.
    pub root: ItemId,
    /// Who asked.
    pub requested_by: PrincipalId,
    /// When.
    pub at_ms: u64,
    /// Everything erased: the root and each descendant all of whose supporting paths ran
    /// through it, in graph order.
    pub erased: Vec<ItemId>,
    /// The boundary of the erasure: children of an erased record that survive because they have
    /// another live (not erased) parent. Their lineage still names the erased ids (and so does
    /// that of their own descendants, which survive with them); an operator may want to review
    /// them.
    pub survivors: Vec<ItemId>,
    /// Records written after their writer's session was handed an erased one
    /// (`seen_in_session`): they stay, readable as before, and are marked
    /// ([`RecordState::saw_erased`]).
    #[serde(default)]
    pub seen_marked: Vec<ItemId>,
}

/// What an erasure changed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErasureEffects {
    /// Delete these records' text, embeddings and index entries from the store.
    pub delete: Vec<ItemId>,
    /// Their tombstone rows (no text; lineage attributes kept so descendants' summaries stand).
    pub tombstones: Vec<RecordState>,
    /// The audit record.
    pub record: ErasureRecord,
}

/// What a gated action recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ActionEffects {
    /// The action node with its decision.
    pub action: ActionRecord,
    /// New edges (`used_for_action` from each known support, `authorized_by`).
    pub edges: Vec<Edge>,
}

// ------------------------------------------------------------------------------------------------
// Errors
// ------------------------------------------------------------------------------------------------

/// Why a principal event was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PrincipalError {
    /// Already registered.
    #[error("principal {0} is already registered")]
    Duplicate(PrincipalId),
    /// Not registered.
    #[error("principal {0} is not registered")]
    Unknown(PrincipalId),
}

/// Why a write was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WriteError {
    /// Empty or whitespace-only text.
    #[error("record text is empty")]
    EmptyText,
    /// Text above `text_bytes_max`.
    #[error("record text is {bytes} bytes; the limit is {max}")]
    TextTooLarge {
        /// Size.
        bytes: usize,
        /// Limit.
        max: usize,
    },
    /// More parents than `parents_max`.
    #[error("{count} parents; the limit is {max}")]
    TooManyParents {
        /// Count.
        count: usize,
        /// Limit.
        max: usize,
    },
    /// More explicit readers (or recipients) than `readers_max`.
    #[error("{count} readers or recipients; the limit is {max}")]
    TooManyReaders {
        /// Count.
        count: usize,
        /// Limit.
        max: usize,
    },
    /// The id is taken (every write is a new record).
    #[error("record {0} already exists")]
    DuplicateId(ItemId),
    /// The writer or a recipient is not registered.
    #[error("principal {0} is not registered")]
    UnknownPrincipal(PrincipalId),
    /// A parent does not exist.
    #[error("parent {0} does not exist")]
    UnknownParent(ItemId),
    /// A parent is listed twice.
    #[error("parent {0} is listed twice")]
    DuplicateParent(ItemId),
    /// A parent edge of a kind that is not a derivation.
    #[error("{kind:?} is not a derivation edge (use derived_from, summarized_from or observed_from)")]
    NotADerivation {
        /// The parent.
        id: ItemId,
        /// The kind given.
        kind: EdgeKind,
    },
    /// The writer may not read a parent (it cannot derive from what it may not see).
    #[error("parent {id} is not readable by the writer: {reason}")]
    ParentNotReadable {
        /// The parent.
        id: ItemId,
        /// Why.
        reason: DenyReason,
    },
}

/// Why a record event (promotion, verification, poison flag, revocation, erasure) was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EventError {
    /// No such record.
    #[error("record {0} does not exist")]
    UnknownRecord(ItemId),
    /// The principal is not registered.
    #[error("principal {0} is not registered")]
    UnknownPrincipal(PrincipalId),
    /// The record is erased.
    #[error("record {0} is erased")]
    Erased(ItemId),
    /// The record is revoked.
    #[error("record {0} is revoked")]
    Revoked(ItemId),
    /// Only the owner may promote.
    #[error("only the owner of {0} may promote it")]
    NotOwner(ItemId),
    /// A promotion must keep every current reader.
    #[error("promotion of {0} would drop current readers")]
    NotAWidening(ItemId),
    /// A promotion would admit someone an ancestor does not admit.
    #[error("promotion of {id} exceeds what its ancestry permits")]
    ExceedsAncestry {
        /// The record.
        id: ItemId,
    },
    /// Too many readers.
    #[error("{count} readers; the limit is {max}")]
    TooManyReaders {
        /// Count.
        count: usize,
        /// Limit.
        max: usize,
    },
    /// A tightening propagation is pending; finish it first ([`LineageGraph::step`]).
    #[error("a revocation or poison flag is still propagating")]
    PropagationPending,
    /// Only users and tools verify.
    #[error("principal {0} may not verify (only users and tools do)")]
    VerifierNotTrusted(PrincipalId),
    /// Erasure would visit more than `erasure_records_max` records.
    #[error("erasure would visit more than {max} records")]
    ErasureTooLarge {
        /// Limit.
        max: usize,
    },
    /// The erasure id is taken.
    #[error("erasure {0} already exists")]
    DuplicateErasure(ItemId),
}

/// Why recording reads or an action was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordingError {
    /// The reader or agent is not registered.
    #[error("principal {0} is not registered")]
    UnknownPrincipal(PrincipalId),
    /// A record to mark read is not readable by the reader (now).
    #[error("record {id} is not readable: {reason}")]
    NotReadable {
        /// The record.
        id: ItemId,
        /// Why.
        reason: DenyReason,
    },
    /// The action id is taken.
    #[error("action {0} already exists")]
    DuplicateAction(ItemId),
    /// The tool name is too long.
    #[error("tool name is longer than {max} bytes")]
    ToolNameTooLong {
        /// Limit.
        max: usize,
    },
}

/// Why `rank` refused a request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RankError {
    /// More candidates than `rank_candidates_max`.
    #[error("{count} candidates; the limit is {max}")]
    TooManyCandidates {
        /// Count.
        count: usize,
        /// Limit.
        max: usize,
    },
    /// `k` above `k_max`.
    #[error("k = {k}; the limit is {max}")]
    KTooLarge {
        /// Asked.
        k: usize,
        /// Limit.
        max: usize,
    },
}

/// Why persisted rows could not be restored into a graph.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RestoreError {
    /// The configuration is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The trail has another format tag.
    #[error("unknown audit format {0:?}")]
    UnknownFormat(String),
    /// A principal, record, action or erasure id appears twice, or two records share a `seq`.
    #[error("duplicate {0}")]
    Duplicate(String),
    /// A record names an unregistered writer.
    #[error("principal {0} is not registered")]
    UnknownPrincipal(PrincipalId),
    /// A record's parent is missing, newer than the record, or not a derivation edge.
    #[error("record {id} has an invalid parent {parent}")]
    BrokenParent {
        /// The record.
        id: ItemId,
        /// The parent.
        parent: ItemId,
    },
    /// An edge is out of order, breaks the schema or names an unknown node.
    #[error("edge {0} is invalid")]
    BadEdge(u64),
}

/// What restoring repaired: the rows and edges an interrupted propagation had not yet written.
/// Persist them like any other effects.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct RestoreEffects {
    /// Rows whose scope or summary was stale.
    pub repaired: Vec<RecordState>,
    /// Missing `invalidated_by` edges.
    pub edges: Vec<Edge>,
}

/// A stored summary that disagrees with a from-scratch recomputation.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("ancestry summary of {id} disagrees with a recomputation from scratch")]
pub struct SummaryMismatch {
    /// The record.
    pub id: ItemId,
    /// Stored.
    pub stored: Box<AncestrySummary>,
    /// Recomputed (`None`: the ancestry is broken).
    pub recomputed: Option<Box<AncestrySummary>>,
}

// ------------------------------------------------------------------------------------------------
// The graph
// ------------------------------------------------------------------------------------------------

/// The in-memory lineage graph of one namespace (its `All` means every principal of that
/// namespace).
#[derive(Debug, Clone)]
pub struct LineageGraph {
    config: LineageConfig,
    principals: BTreeMap<PrincipalId, PrincipalState>,
    records: BTreeMap<ItemId, Node>,
    children: BTreeMap<ItemId, Vec<ItemId>>,
    /// `seen_in_session` in reverse: who was written after its session saw a record.
    seen_by: BTreeMap<ItemId, Vec<ItemId>>,
    next_seq: u64,
    edges: Vec<Edge>,
    invalidated: BTreeSet<(ItemId, ItemId)>,
    queue: BTreeMap<u64, Work>,
    /// While a tightening propagation is queued: records with a larger `seq` may be affected by
    /// it and are not readable until it finishes.
    floor: Option<u64>,
    /// Time of the latest propagating event (stamped on the edges its steps add).
    last_event_ms: u64,
    actions: BTreeMap<ItemId, ActionRecord>,
    erasures: Vec<ErasureRecord>,
}

impl Default for LineageGraph {
    fn default() -> Self {
        Self::with_valid_config(LineageConfig::default())
    }
}

impl LineageGraph {
    /// An empty graph. Refuses an invalid configuration.
    pub fn new(config: LineageConfig) -> Result<Self, ConfigError> {
        config.validate()?;
        Ok(Self::with_valid_config(config))
    }

    fn with_valid_config(config: LineageConfig) -> Self {
        Self {
            config,
            principals: BTreeMap::new(),
            records: BTreeMap::new(),
            children: BTreeMap::new(),
            seen_by: BTreeMap::new(),
            next_seq: 0,
            edges: Vec::new(),
            invalidated: BTreeSet::new(),
            queue: BTreeMap::new(),
            floor: None,
            last_event_ms: 0,
            actions: BTreeMap::new(),
            erasures: Vec::new(),
        }
    }

    // ---- read access ---------------------------------------------------------------------------

    /// The configuration.
    pub fn config(&self) -> &LineageConfig {
        &self.config
    }
    /// A record's state.
    pub fn record(&self, id: ItemId) -> Option<&RecordState> {
        self.records.get(&id).map(|n| &n.state)
    }
    /// A record's text (`None` when unknown or erased). Not access-checked: call
    /// [`LineageGraph::can_read`] first when serving a reader.
    pub fn text(&self, id: ItemId) -> Option<&str> {
        self.records.get(&id).and_then(|n| n.text.as_deref())
    }
    /// All records, in id order.
    pub fn records(&self) -> impl Iterator<Item = &RecordState> {
        self.records.values().map(|n| &n.state)
    }
    /// A principal.
    pub fn principal(&self, id: &PrincipalId) -> Option<&PrincipalState> {
        self.principals.get(id)
    }
    /// All principals.
    pub fn principals(&self) -> impl Iterator<Item = &PrincipalState> {
        self.principals.values()
    }
    /// The edge log.
    pub fn edges(&self) -> &[Edge] {
        &self.edges
    }
    /// Gated actions.
    pub fn actions(&self) -> impl Iterator<Item = &ActionRecord> {
        self.actions.values()
    }
    /// Erasures.
    pub fn erasures(&self) -> &[ErasureRecord] {
        &self.erasures
    }
    /// Records queued for propagation.
    pub fn pending(&self) -> usize {
        self.queue.len()
    }
    /// Direct children of a record.
    pub fn children(&self, id: ItemId) -> &[ItemId] {
        self.children.get(&id).map_or(&[], Vec::as_slice)
    }
    /// The type of a node (`None` if unknown).
    pub fn node_kind(&self, node: &NodeRef) -> Option<NodeKind> {
        match node {
            NodeRef::Record(id) => self.record(*id).map(|r| r.kind.node_kind()),
            NodeRef::Principal(p) => self.principal(p).map(|p| NodeKind::of_principal(p.kind)),
            NodeRef::Action(id) => self.actions.contains_key(id).then_some(NodeKind::Action),
        }
    }

    fn read_facts<'a>(&self, n: &'a Node) -> ReadFacts<'a> {
        ReadFacts {
            scope: &n.state.scope,
            summary: &n.state.summary,
            erased: n.state.erased,
            pending: self.floor.is_some_and(|f| n.state.seq > f),
        }
    }

    /// `CanRead(reader, id)`: the same function retrieval filtering uses.
    pub fn can_read(&self, reader: &PrincipalId, id: ItemId) -> Result<(), DenyReason> {
        can_read(reader, self.records.get(&id).map(|n| self.read_facts(n)))
    }

    fn reputation(&self, p: &PrincipalId) -> Trust {
        self.principals.get(p).map_or(self.config.reputation_default, |s| s.reputation)
    }

    /// `rho(id, reader)` with its factors (`None` if the record is unknown). Not access-checked.
    pub fn path_trust(&self, id: ItemId, reader: &PrincipalId) -> Option<TrustBreakdown> {
        let n = self.records.get(&id)?;
        Some(self.breakdown(n, reader))
    }

    /// Path trust of a node for `reader`: from its ancestry summary, or (the "no trust
    /// propagation" ablation) from its own facts alone.
    fn breakdown(&self, n: &Node, reader: &PrincipalId) -> TrustBreakdown {
        let rep = self.reputation(&n.state.writer);
        if self.config.trust_propagation {
            path_trust(&self.config, &n.state.summary, rep, reader)
        } else {
            let local = summarize(&self.config, &n.state.own_facts(), &[]);
            path_trust(&self.config, &local, rep, reader)
        }
    }

    /// Rank candidates for `reader`: `CanRead` removes ineligible records first, then eligible ones
    /// are ordered by `similarity × rho` and at most `k` (default `k_default`) are returned with
    /// their semantic, trust and final scores. Pass the selection to
    /// [`LineageGraph::record_reads`] to record `read_by` edges.
    pub fn rank(&self, reader: &PrincipalId, candidates: &[Candidate], k: Option<usize>) -> Result<Ranking, RankError> {
        let k = k.unwrap_or(self.config.k_default);
        if k > self.config.k_max {
            return Err(RankError::KTooLarge { k, max: self.config.k_max });
        }
        if candidates.len() > self.config.rank_candidates_max {
            return Err(RankError::TooManyCandidates { count: candidates.len(), max: self.config.rank_candidates_max });
        }
        Ok(rank_by(candidates, k, self.config.trust_propagation, |id| {
            let n = self.records.get(&id);
            if self.config.permission_filter {
                can_read(reader, n.map(|n| self.read_facts(n)))?;
            }
            let n = n.ok_or(DenyReason::Unknown)?;
            Ok(self.breakdown(n, reader))
        }))
    }

    /// Evaluate the action-time gate without recording anything.
    pub fn decide(&self, request: &GateRequest) -> GateDecision {
        gate::decide(&self.config, request, |id| {
            let n = self.records.get(&id)?;
            Some(SupportFacts {
                read: can_read(&request.agent, Some(self.read_facts(n))),
                summary: &n.state.summary,
                breakdown: self.breakdown(n, &request.agent),
                elevated_breakdown: request.elevated.contains(&id).then(|| {
                    let mut s = if self.config.trust_propagation {
                        n.state.summary.clone()
                    } else {
                        summarize(&self.config, &n.state.own_facts(), &[])
                    };
                    s.min_source_trust = self.config.trust_trusted;
                    path_trust(&self.config, &s, self.reputation(&n.state.writer), &request.agent)
                }),
            })
        })
    }

    /// The summary of `id` recomputed from scratch over its full ancestry.
    pub fn recompute_from_scratch(&self, id: ItemId) -> Option<AncestrySummary> {
        from_scratch(&self.config, id, |x| {
            self.records.get(&x).map(|n| (n.state.own_facts(), n.parent_edges.as_slice()))
        })
    }

    /// Check every stored summary against a from-scratch recomputation (tests; a store reloading
    /// a graph). Only meaningful when no propagation is pending.
    pub fn verify_summaries(&self) -> Result<(), SummaryMismatch> {
        for (id, n) in &self.records {
            let again = self.recompute_from_scratch(*id);
            if !again.as_ref().is_some_and(|a| agrees(&n.state.summary, a)) {
                return Err(SummaryMismatch {
                    id: *id,
                    stored: Box::new(n.state.summary.clone()),
                    recomputed: again.map(Box::new),
                });
            }
        }
        Ok(())
    }

    /// Rebuild a graph from persisted rows (an [`crate::AuditTrail`]: principals, record rows,
    /// actions, the edge log, erasures) and the texts of live records. The rows are validated
    /// (unique ids, parents older than children, known nodes, edge schema), then every record is
    /// recomputed from its parents in graph order; anything an interrupted propagation left stale
    /// is repaired and returned, including missing `invalidated_by` edges. A record without text
    /// in `texts` restores without it (the store keeps the text; the graph's copy is a
    /// convenience).
    pub fn restore(
        config: LineageConfig,
        trail: crate::export::AuditTrail,
        mut texts: BTreeMap<ItemId, String>,
    ) -> Result<(Self, RestoreEffects), RestoreError> {
        config.validate()?;
        if trail.format != crate::export::AUDIT_FORMAT {
            return Err(RestoreError::UnknownFormat(trail.format));
        }
        let mut g = Self::with_valid_config(config);
        for p in trail.principals {
            if g.principals.insert(p.id.clone(), p.clone()).is_some() {
                return Err(RestoreError::Duplicate(format!("principal {}", p.id)));
            }
        }
        let mut records = trail.records;
        records.sort_by_key(|r| r.seq);
        let mut seqs = BTreeSet::new();
        for st in records {
            if !seqs.insert(st.seq) || g.records.contains_key(&st.id) {
                return Err(RestoreError::Duplicate(format!("record {}", st.id)));
            }
            if !g.principals.contains_key(&st.writer) {
                return Err(RestoreError::UnknownPrincipal(st.writer.clone()));
            }
            let mut parent_ids = BTreeSet::new();
            for p in &st.parents {
                // Sorted by seq: a parent must already be in.
                if !is_parent_kind(p.kind) || !g.records.contains_key(&p.id) || !parent_ids.insert(p.id) {
                    return Err(RestoreError::BrokenParent { id: st.id, parent: p.id });
                }
            }
            for p in &st.parents {
                g.children.entry(p.id).or_default().push(st.id);
            }
            for s in &st.seen {
                g.seen_by.entry(*s).or_default().push(st.id);
            }
            g.next_seq = st.seq.saturating_add(1);
            let text = if st.erased { None } else { texts.remove(&st.id) };
            let parent_edges = st.parents.iter().map(|p| (p.kind, p.id)).collect();
            g.records.insert(st.id, Node { state: st, text, parent_edges });
        }
        for a in trail.actions {
            if g.actions.insert(a.id, a.clone()).is_some() {
                return Err(RestoreError::Duplicate(format!("action {}", a.id)));
            }
        }
        for (i, e) in trail.edges.into_iter().enumerate() {
            let known = |n: &NodeRef| g.node_kind(n).is_some();
            if e.seq != i as u64 || !edge_shape_ok(e.kind, &e.from, &e.to) || !known(&e.from) || !known(&e.to) {
                return Err(RestoreError::BadEdge(e.seq));
            }
            if let (EdgeKind::InvalidatedBy, NodeRef::Record(a), NodeRef::Record(b)) = (e.kind, &e.from, &e.to) {
                g.invalidated.insert((*a, *b));
            }
            g.last_event_ms = g.last_event_ms.max(e.at_ms);
            g.edges.push(e);
        }
        for er in trail.erasures {
            if g.erasures.iter().any(|x| x.erasure_id == er.erasure_id) {
                return Err(RestoreError::Duplicate(format!("erasure {}", er.erasure_id)));
            }
            g.erasures.push(er);
        }
        // Recompute everything in graph order (parents first).
        let mut fx = RestoreEffects::default();
        let mut order: Vec<(u64, ItemId)> = g.records.values().map(|n| (n.state.seq, n.state.id)).collect();
        order.sort();
        for (_, id) in &order {
            if let Some((old, next)) = g.recompute(*id)
                && old != next
            {
                if let Some(n) = g.records.get_mut(id) {
                    n.state = next.clone();
                }
                fx.repaired.push(next);
            }
        }
        // Every descendant of a revoked record links to it.
        let revoked_at: BTreeMap<ItemId, u64> = g
            .edges
            .iter()
            .filter_map(|e| match (e.kind, &e.from, &e.to) {
                (EdgeKind::InvalidatedBy, NodeRef::Record(r), NodeRef::Principal(_)) => Some((*r, e.at_ms)),
                _ => None,
            })
            .collect();
        for (_, id) in &order {
            let Some(n) = g.records.get(id) else { continue };
            if !n.state.summary.revoked {
                continue;
            }
            let mut seen = BTreeSet::new();
            let mut todo: Vec<ItemId> = n.parent_edges.iter().map(|(_, p)| *p).collect();
            let mut missing = Vec::new();
            while let Some(x) = todo.pop() {
                if !seen.insert(x) {
                    continue;
                }
                if let Some(a) = g.records.get(&x) {
                    if a.state.revoked() && !g.invalidated.contains(&(*id, x)) {
                        missing.push(x);
                    }
                    todo.extend(a.parent_edges.iter().map(|(_, p)| *p));
                }
            }
            missing.sort();
            for r in missing {
                g.invalidated.insert((*id, r));
                let at = revoked_at.get(&r).copied().unwrap_or(0);
                let e = g.push_edge(
                    NodeRef::Record(*id),
                    EdgeKind::InvalidatedBy,
                    NodeRef::Record(r),
                    at,
                    EdgeAttrs::Invalidation { cause: InvalidationCause::RevokedAncestor },
                );
                fx.edges.push(e);
            }
        }
        Ok((g, fx))
    }

    // ---- helpers --------------------------------------------------------------------------------

    fn push_edge(&mut self, from: NodeRef, kind: EdgeKind, to: NodeRef, at_ms: u64, attrs: EdgeAttrs) -> Edge {
        debug_assert!(edge_shape_ok(kind, &from, &to), "edge {kind:?} from {from:?} to {to:?} breaks the schema");
        let e = Edge { seq: self.edges.len() as u64, from, kind, to, at_ms, attrs };
        self.edges.push(e.clone());
        e
    }

    fn summary_of(&self, state: &RecordState, parent_edges: &[(EdgeKind, ItemId)]) -> AncestrySummary {
        let parents: Vec<(EdgeKind, &AncestrySummary)> =
            parent_edges.iter().filter_map(|(k, pid)| self.records.get(pid).map(|p| (*k, &p.state.summary))).collect();
        debug_assert_eq!(parents.len(), parent_edges.len(), "every parent exists");
        summarize(&self.config, &state.own_facts(), &parents)
    }

    fn require_principal(&self, p: &PrincipalId) -> Result<&PrincipalState, EventError> {
        self.principals.get(p).ok_or_else(|| EventError::UnknownPrincipal(p.clone()))
    }

    fn enqueue_children(&mut self, id: ItemId, invalidate: &BTreeSet<ItemId>) {
        let kids = self.children.get(&id).cloned().unwrap_or_default();
        for c in kids {
            let Some(seq) = self.records.get(&c).map(|n| n.state.seq) else { continue };
            let w = self.queue.entry(seq).or_default();
            w.id = Some(c);
            w.invalidate.extend(invalidate.iter().copied());
        }
    }

    /// Recompute one record's own summary (after its own attributes changed) and queue its
    /// children. Returns its new state.
    fn refresh_root(&mut self, id: ItemId, invalidate: &BTreeSet<ItemId>, tightening: bool) -> Option<RecordState> {
        let (state, parent_edges) = {
            let n = self.records.get(&id)?;
            (n.state.clone(), n.parent_edges.clone())
        };
        let summary = self.summary_of(&state, &parent_edges);
        let n = self.records.get_mut(&id)?;
        n.state.summary = summary;
        let out = n.state.clone();
        if tightening && !self.children.get(&id).is_none_or(Vec::is_empty) {
            self.floor = Some(self.floor.map_or(out.seq, |f| f.min(out.seq)));
        }
        self.enqueue_children(id, invalidate);
        Some(out)
    }

    // ---- events ---------------------------------------------------------------------------------

    /// Register a principal node.
    pub fn register_principal(&mut self, ev: RegisterPrincipal) -> Result<PrincipalState, PrincipalError> {
        if self.principals.contains_key(&ev.id) {
            return Err(PrincipalError::Duplicate(ev.id));
        }
        let st = PrincipalState {
            id: ev.id.clone(),
            kind: ev.kind,
            reputation: ev.reputation.unwrap_or(self.config.reputation_default),
        };
        self.principals.insert(ev.id, st.clone());
        Ok(st)
    }

    /// Set a principal's reputation (A). Path trust reads it at query time, so nothing propagates.
    pub fn set_reputation(&mut self, id: &PrincipalId, reputation: Trust) -> Result<PrincipalState, PrincipalError> {
        let p = self.principals.get_mut(id).ok_or_else(|| PrincipalError::Unknown(id.clone()))?;
        p.reputation = reputation;
        Ok(p.clone())
    }

    /// Apply a write: validate, derive the scope (intersection of the parents' scopes, narrowed
    /// by any explicit readers; none → all; empty → the writer alone), compute the ancestry
    /// summary from the parents' summaries, record the edges.
    pub fn apply_write(&mut self, ev: WriteEvent) -> Result<WriteEffects, WriteError> {
        let c = &self.config;
        if ev.text.trim().is_empty() {
            return Err(WriteError::EmptyText);
        }
        if ev.text.len() > c.text_bytes_max {
            return Err(WriteError::TextTooLarge { bytes: ev.text.len(), max: c.text_bytes_max });
        }
        if ev.parents.len() > c.parents_max {
            return Err(WriteError::TooManyParents { count: ev.parents.len(), max: c.parents_max });
        }
        let n_readers = ev.readers.as_ref().map_or(0, BTreeSet::len);
        if n_readers > c.readers_max || ev.forwarded_to.len() > c.readers_max {
            return Err(WriteError::TooManyReaders { count: n_readers.max(ev.forwarded_to.len()), max: c.readers_max });
        }
        if self.records.contains_key(&ev.id) {
            return Err(WriteError::DuplicateId(ev.id));
        }
        if !self.principals.contains_key(&ev.writer) {
            return Err(WriteError::UnknownPrincipal(ev.writer));
        }
        if let Some(p) = ev.forwarded_to.iter().find(|p| !self.principals.contains_key(*p)) {
            return Err(WriteError::UnknownPrincipal(p.clone()));
        }
        let mut seen = BTreeSet::new();
        for p in &ev.parents {
            if !is_parent_kind(p.kind) {
                return Err(WriteError::NotADerivation { id: p.id, kind: p.kind });
            }
            if !seen.insert(p.id) {
                return Err(WriteError::DuplicateParent(p.id));
            }
            if !self.records.contains_key(&p.id) {
                return Err(WriteError::UnknownParent(p.id));
            }
            if c.permission_filter {
                self.can_read(&ev.writer, p.id)
                    .map_err(|reason| WriteError::ParentNotReadable { id: p.id, reason })?;
            }
        }
        // Scope: the intersection of the referenced scopes.
        let parent_scopes: Vec<&Scope> =
            ev.parents.iter().filter_map(|p| self.records.get(&p.id)).map(|n| &n.state.scope).collect();
        let derived = derive_scope(&ev.writer, parent_scopes.iter().copied(), ev.readers.as_ref());
        let label_trust = match ev.integrity {
            Integrity::Trusted => c.trust_trusted,
            Integrity::Agent => c.trust_agent,
            Integrity::Untrusted => c.trust_untrusted,
        };
        let base_trust = ev.source_trust.map_or(label_trust, |t| t.min(label_trust));
        let parent_edges: Vec<(EdgeKind, ItemId)> = ev.parents.iter().map(|p| (p.kind, p.id)).collect();
        let mut state = RecordState {
            id: ev.id,
            seq: self.next_seq,
            kind: ev.kind,
            writer: ev.writer.clone(),
            integrity: ev.integrity,
            base_trust,
            parents: ev.parents.clone(),
            scope: derived.scope,
            poisoned: ev.poisoned,
            verified_by: BTreeSet::new(),
            erased: false,
            created_ms: ev.at_ms,
            seen: Vec::new(),
            saw_erased: false,
            summary: AncestrySummary {
                min_source_trust: base_trust,
                flow: Trust::ONE,
                depth: 0,
                verified: false,
                untrusted: false,
                private: false,
                poisoned: false,
                revoked: false,
                ceiling: Readers::All,
                affected: Vec::new(),
                affected_rest: crate::model::Tally::Exact(0),
            },
        };
        state.summary = self.summary_of(&state, &parent_edges);
        // (Without the permission filter a writer may derive from what it may not read; then
        // neither holds.)
        debug_assert!(
            !self.config.permission_filter || state.summary.ceiling == effective_readers(&state.scope),
            "every item on a fresh record's path admits all of its readers"
        );
        debug_assert!(
            !self.config.permission_filter || state.summary.admits(&ev.writer),
            "the writer can read what it just wrote"
        );
        self.next_seq += 1;
        for p in &ev.parents {
            self.children.entry(p.id).or_default().push(ev.id);
        }
        // What the session saw: known records only, never a parent, bounded like parents.
        let mut saw: Vec<ItemId> =
            ev.seen.iter().copied().filter(|s| self.records.contains_key(s) && !seen.contains(s)).take(c.parents_max).collect();
        saw.sort();
        saw.dedup();
        for s in &saw {
            self.seen_by.entry(*s).or_default().push(ev.id);
        }
        state.seen = saw;
        self.records.insert(ev.id, Node { state: state.clone(), text: Some(ev.text), parent_edges });
        let mut edges = vec![self.push_edge(
            NodeRef::Record(ev.id),
            EdgeKind::WrittenBy,
            NodeRef::Principal(ev.writer),
            ev.at_ms,
            EdgeAttrs::None,
        )];
        for p in &ev.parents {
            edges.push(self.push_edge(
                NodeRef::Record(ev.id),
                p.kind,
                NodeRef::Record(p.id),
                ev.at_ms,
                EdgeAttrs::None,
            ));
        }
        for r in ev.forwarded_to {
            edges.push(self.push_edge(
                NodeRef::Record(ev.id),
                EdgeKind::ForwardedTo,
                NodeRef::Principal(r),
                ev.at_ms,
                EdgeAttrs::None,
            ));
        }
        Ok(WriteEffects { record: state, edges, scope_fell_back: derived.fell_back })
    }

    /// The readers a promotion of `id` may reach: the intersection of its parents' ceilings
    /// (`All` for a root).
    pub fn promotion_ceiling(&self, id: ItemId) -> Option<Readers> {
        let n = self.records.get(&id)?;
        let mut acc = Readers::All;
        for (_, pid) in &n.parent_edges {
            acc = acc.intersect(&self.records.get(pid)?.state.summary.ceiling);
        }
        Some(acc)
    }

    /// Promote (widen the readers of) a record; see [`PromoteEvent`]. Descendants' summaries are
    /// refreshed (their scopes do not widen: each is promoted on its own).
    pub fn apply_promotion(&mut self, ev: PromoteEvent) -> Result<PropagationEffects, EventError> {
        self.require_principal(&ev.actor)?;
        let n = self.records.get(&ev.id).ok_or(EventError::UnknownRecord(ev.id))?;
        if n.state.erased {
            return Err(EventError::Erased(ev.id));
        }
        if n.state.revoked() {
            return Err(EventError::Revoked(ev.id));
        }
        if n.state.scope.owner != ev.actor {
            return Err(EventError::NotOwner(ev.id));
        }
        if let Readers::Only(s) = &ev.readers
            && s.len() > self.config.readers_max
        {
            return Err(EventError::TooManyReaders { count: s.len(), max: self.config.readers_max });
        }
        if self.floor.is_some() {
            return Err(EventError::PropagationPending);
        }
        if !readers_subset(&n.state.scope.readers, &ev.readers) {
            return Err(EventError::NotAWidening(ev.id));
        }
        let ceiling = self.promotion_ceiling(ev.id).ok_or(EventError::UnknownRecord(ev.id))?;
        if !readers_subset(&ev.readers, &ceiling) {
            return Err(EventError::ExceedsAncestry { id: ev.id });
        }
        let owner = n.state.scope.owner.clone();
        if let Some(n) = self.records.get_mut(&ev.id) {
            n.state.scope = scope_of(owner, ev.readers);
        }
        self.last_event_ms = self.last_event_ms.max(ev.at_ms);
        let mut fx = PropagationEffects::default();
        if let Some(st) = self.refresh_root(ev.id, &BTreeSet::new(), false) {
            fx.updated.push(st);
        }
        fx.absorb(self.step());
        Ok(fx)
    }

    /// Record a verification (`verified_by`) by a user or tool.
    pub fn apply_verification(&mut self, ev: VerifyEvent) -> Result<PropagationEffects, EventError> {
        let kind = self.require_principal(&ev.verifier)?.kind;
        if !matches!(kind, PrincipalKind::User | PrincipalKind::Tool) {
            return Err(EventError::VerifierNotTrusted(ev.verifier));
        }
        let n = self.records.get_mut(&ev.id).ok_or(EventError::UnknownRecord(ev.id))?;
        if n.state.erased {
            return Err(EventError::Erased(ev.id));
        }
        n.state.verified_by.insert(ev.verifier.clone());
        self.last_event_ms = self.last_event_ms.max(ev.at_ms);
        let mut fx = PropagationEffects::default();
        fx.edges.push(self.push_edge(
            NodeRef::Record(ev.id),
            EdgeKind::VerifiedBy,
            NodeRef::Principal(ev.verifier),
            ev.at_ms,
            EdgeAttrs::None,
        ));
        if let Some(st) = self.refresh_root(ev.id, &BTreeSet::new(), false) {
            fx.updated.push(st);
        }
        fx.absorb(self.step());
        Ok(fx)
    }

    /// Flag a record poisoned; descendants are marked affected (eagerly, in bounded steps; until
    /// the propagation finishes, possibly affected records are not readable).
    pub fn apply_poison_flag(&mut self, ev: FlagPoisonedEvent) -> Result<PropagationEffects, EventError> {
        self.require_principal(&ev.reporter)?;
        let n = self.records.get_mut(&ev.id).ok_or(EventError::UnknownRecord(ev.id))?;
        n.state.poisoned = true;
        self.last_event_ms = self.last_event_ms.max(ev.at_ms);
        let mut fx = PropagationEffects::default();
        if let Some(st) = self.refresh_root(ev.id, &BTreeSet::new(), true) {
            fx.updated.push(st);
        }
        fx.absorb(self.step());
        Ok(fx)
    }

    /// Revoke a record: visibility → revoked, permission set cleared, an `invalidated_by` edge to
    /// the revoker; then every descendant is recomputed (its scope intersected again, so direct
    /// children fall back to their writer alone; its summary marks the revoked ancestor) and gets an
    /// `invalidated_by` edge to the revoked record. Nothing is deleted. Propagation runs in bounded
    /// steps; until it finishes, possibly affected records are not readable.
    pub fn apply_revocation(&mut self, ev: RevokeEvent) -> Result<PropagationEffects, EventError> {
        self.require_principal(&ev.revoker)?;
        let n = self.records.get_mut(&ev.id).ok_or(EventError::UnknownRecord(ev.id))?;
        if n.state.revoked() {
            return Err(EventError::Revoked(ev.id));
        }
        n.state.scope = revoked_scope(n.state.scope.owner.clone());
        self.last_event_ms = self.last_event_ms.max(ev.at_ms);
        let mut fx = PropagationEffects::default();
        fx.edges.push(self.push_edge(
            NodeRef::Record(ev.id),
            EdgeKind::InvalidatedBy,
            NodeRef::Principal(ev.revoker),
            ev.at_ms,
            EdgeAttrs::Invalidation { cause: InvalidationCause::Revoked },
        ));
        if let Some(st) = self.refresh_root(ev.id, &BTreeSet::from([ev.id]), true) {
            fx.updated.push(st);
        }
        fx.absorb(self.step());
        Ok(fx)
    }

    /// Run one bounded propagation step (at most `propagation_step_records_max` records).
    pub fn step(&mut self) -> PropagationEffects {
        let at = self.last_event_ms;
        self.step_at(at)
    }

    /// Run propagation steps until nothing is queued; the effects of all steps, merged.
    pub fn drain(&mut self) -> PropagationEffects {
        let mut fx = PropagationEffects::default();
        // Each step removes at least one queued record and a record is queued again only by a
        // parent processed earlier, so this ends; the bound is a belt-and-braces cap.
        let cap = self.records.len().saturating_add(1).saturating_mul(self.records.len().saturating_add(1));
        for _ in 0..cap {
            if self.queue.is_empty() {
                break;
            }
            fx.absorb(self.step());
        }
        fx.remaining = self.queue.len();
        fx
    }

    /// A record's current state and its state recomputed from its parents' current states: the
    /// scope intersected again with the parents' (it only ever narrows; empty → the writer alone)
    /// and the summary recomputed.
    fn recompute(&self, id: ItemId) -> Option<(RecordState, RecordState)> {
        let n = self.records.get(&id)?;
        let mut next = n.state.clone();
        if !next.revoked() {
            let mut readers = next.scope.readers.clone();
            for (_, pid) in &n.parent_edges {
                if let Some(p) = self.records.get(pid) {
                    readers = readers.intersect(&effective_readers(&p.state.scope));
                }
            }
            if matches!(&readers, Readers::Only(s) if s.is_empty()) {
                readers = Readers::Only(BTreeSet::from([next.writer.clone()]));
            }
            next.scope = scope_of(next.writer.clone(), readers);
        }
        next.summary = self.summary_of(&next, &n.parent_edges);
        Some((n.state.clone(), next))
    }

    fn step_at(&mut self, at_ms: u64) -> PropagationEffects {
        let mut fx = PropagationEffects::default();
        for _ in 0..self.config.propagation_step_records_max {
            let Some((_, work)) = self.queue.pop_first() else { break };
            let Some(id) = work.id else { continue };
            let Some((state, next)) = self.recompute(id) else { continue };
            let changed = next != state;
            let mut new_links = BTreeSet::new();
            for r in &work.invalidate {
                if self.invalidated.insert((id, *r)) {
                    new_links.insert(*r);
                }
            }
            for r in &new_links {
                fx.edges.push(self.push_edge(
                    NodeRef::Record(id),
                    EdgeKind::InvalidatedBy,
                    NodeRef::Record(*r),
                    at_ms,
                    EdgeAttrs::Invalidation { cause: InvalidationCause::RevokedAncestor },
                ));
            }
            if changed {
                if let Some(n) = self.records.get_mut(&id) {
                    n.state = next.clone();
                }
                fx.updated.push(next);
            }
            if changed || !work.invalidate.is_empty() {
                self.enqueue_children(id, &work.invalidate);
            }
        }
        if self.queue.is_empty() {
            self.floor = None;
        }
        fx.remaining = self.queue.len();
        fx
    }

    /// Erase a record and every descendant all of whose supporting paths run through it (a
    /// descendant with another live supporting source survives). Erased records become tombstones
    /// without text; their lineage attributes stay so survivors keep their marks (erasing a
    /// poisoned source must not launder what was derived from it). The erasure record names ids
    /// only.
    pub fn apply_erasure(&mut self, ev: EraseEvent) -> Result<ErasureEffects, EventError> {
        self.require_principal(&ev.requested_by)?;
        let root = self.records.get(&ev.id).ok_or(EventError::UnknownRecord(ev.id))?;
        if root.state.erased {
            return Err(EventError::Erased(ev.id));
        }
        if self.erasures.iter().any(|e| e.erasure_id == ev.erasure_id) {
            return Err(EventError::DuplicateErasure(ev.erasure_id));
        }
        let max = self.config.erasure_records_max;
        let mut doomed: BTreeSet<ItemId> = BTreeSet::from([ev.id]);
        let mut order = vec![ev.id];
        let mut survivors = Vec::new();
        let mut frontier: BTreeMap<u64, ItemId> = BTreeMap::new();
        let mut visited = 1usize;
        let push_kids = |id: ItemId, frontier: &mut BTreeMap<u64, ItemId>, g: &Self| {
            for c in g.children(id) {
                if let Some(n) = g.records.get(c) {
                    frontier.insert(n.state.seq, *c);
                }
            }
        };
        push_kids(ev.id, &mut frontier, self);
        // In graph order, so every parent's fate is settled before its child's.
        while let Some((_, c)) = frontier.pop_first() {
            visited += 1;
            if visited > max {
                return Err(EventError::ErasureTooLarge { max });
            }
            let Some(n) = self.records.get(&c) else { continue };
            if n.state.erased {
                continue;
            }
            // Every supporting path runs through the erased set: no parent is live (each is being
            // erased now or was erased before). Under the product rule one erased parent is
            // enough: the record's text is a copy of it.
            let all_through = if self.config.erase_declared_descendants {
                n.parent_edges.iter().any(|(_, p)| doomed.contains(p))
            } else {
                n.parent_edges.iter().all(|(_, p)| doomed.contains(p) || self.records.get(p).is_none_or(|x| x.state.erased))
            };
            if all_through {
                doomed.insert(c);
                order.push(c);
                push_kids(c, &mut frontier, self);
            } else {
                survivors.push(c);
            }
        }
        let mut tombstones = Vec::new();
        for id in &order {
            if let Some(n) = self.records.get_mut(id) {
                n.text = None;
                n.state.erased = true;
                tombstones.push(n.state.clone());
            }
        }
        // Records merely written after their session saw an erased one stay, marked.
        let mut seen_marked: Vec<ItemId> =
            order.iter().flat_map(|d| self.seen_by.get(d).into_iter().flatten().copied()).filter(|x| !doomed.contains(x)).collect();
        seen_marked.sort();
        seen_marked.dedup();
        for x in &seen_marked {
            if let Some(n) = self.records.get_mut(x) {
                n.state.saw_erased = true;
            }
        }
        debug_assert!(seen_marked.iter().all(|x| !doomed.contains(x)), "a mark never erases");
        let record = ErasureRecord {
            erasure_id: ev.erasure_id,
            root: ev.id,
            requested_by: ev.requested_by,
            at_ms: ev.at_ms,
            erased: order.clone(),
            survivors,
            seen_marked,
        };
        self.erasures.push(record.clone());
        Ok(ErasureEffects { delete: order, tombstones, record })
    }

    /// Record `read_by` edges for a ranking's selection (each must still be readable).
    pub fn record_reads(
        &mut self,
        reader: &PrincipalId,
        selected: &[Ranked],
        at_ms: u64,
    ) -> Result<Vec<Edge>, RecordingError> {
        if !self.principals.contains_key(reader) {
            return Err(RecordingError::UnknownPrincipal(reader.clone()));
        }
        if self.config.permission_filter {
            for r in selected {
                self.can_read(reader, r.id).map_err(|reason| RecordingError::NotReadable { id: r.id, reason })?;
            }
        }
        Ok(selected
            .iter()
            .map(|r| {
                self.push_edge(
                    NodeRef::Record(r.id),
                    EdgeKind::ReadBy,
                    NodeRef::Principal(reader.clone()),
                    at_ms,
                    EdgeAttrs::Read(r.scores),
                )
            })
            .collect())
    }

    /// Gate a proposed action and record it: the decision, `used_for_action` edges from every
    /// known support, and `authorized_by` to the principal it acts for.
    pub fn apply_action(&mut self, ev: ActionEvent) -> Result<ActionEffects, RecordingError> {
        if self.actions.contains_key(&ev.id) {
            return Err(RecordingError::DuplicateAction(ev.id));
        }
        if ev.tool.len() > self.config.tool_name_bytes_max {
            return Err(RecordingError::ToolNameTooLong { max: self.config.tool_name_bytes_max });
        }
        for p in std::iter::once(&ev.request.agent).chain(ev.on_behalf_of.iter()) {
            if !self.principals.contains_key(p) {
                return Err(RecordingError::UnknownPrincipal(p.clone()));
            }
        }
        let decision = self.decide(&ev.request);
        let final_decision = gate::final_decision(decision.decision, ev.agent_proposal);
        let action = ActionRecord {
            id: ev.id,
            agent: ev.request.agent.clone(),
            on_behalf_of: ev.on_behalf_of.clone(),
            tool: ev.tool,
            kind: ev.request.kind,
            risk: ev.request.risk,
            agent_proposal: ev.agent_proposal,
            decision,
            final_decision,
            at_ms: ev.at_ms,
        };
        self.actions.insert(ev.id, action.clone());
        let mut edges = Vec::new();
        let mut seen = BTreeSet::new();
        for s in ev.request.retrieved.iter().chain(ev.request.context.iter()) {
            if self.records.contains_key(s) && seen.insert(*s) {
                edges.push(self.push_edge(
                    NodeRef::Record(*s),
                    EdgeKind::UsedForAction,
                    NodeRef::Action(ev.id),
                    ev.at_ms,
                    EdgeAttrs::None,
                ));
            }
        }
        if let Some(p) = ev.on_behalf_of {
            edges.push(self.push_edge(
                NodeRef::Action(ev.id),
                EdgeKind::AuthorizedBy,
                NodeRef::Principal(p),
                ev.at_ms,
                EdgeAttrs::None,
            ));
        }
        Ok(ActionEffects { action, edges })
    }
}
