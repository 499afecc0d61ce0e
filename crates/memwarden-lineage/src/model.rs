//! The graph's vocabulary: node and edge types, node references, edges, ancestry summaries.

use crate::trust::Trust;
use memwarden_core::ids::{ItemId, PrincipalId};
use memwarden_core::item::{EdgeKind, Readers};
use memwarden_core::principal::PrincipalKind;
use serde::{Deserialize, Serialize};

/// The eight registered node types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NodeKind {
    /// A human user (a principal).
    User,
    /// An LLM agent (a principal).
    Agent,
    /// A tool (a principal).
    Tool,
    /// An external resource: a source document (a record), or the external channel it came from
    /// (a principal of core kind `Source`).
    Resource,
    /// An inter-agent message (a record).
    Message,
    /// A memory (a record).
    Memory,
    /// A coarse claim extracted from a record (a record).
    Claim,
    /// A proposed action (decided by the gate).
    Action,
}

impl NodeKind {
    /// Snake-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::User => "user",
            Self::Agent => "agent",
            Self::Tool => "tool",
            Self::Resource => "resource",
            Self::Message => "message",
            Self::Memory => "memory",
            Self::Claim => "claim",
            Self::Action => "action",
        }
    }
    /// The node type of a principal of core kind `kind`.
    pub fn of_principal(kind: PrincipalKind) -> NodeKind {
        match kind {
            PrincipalKind::User => NodeKind::User,
            PrincipalKind::Agent => NodeKind::Agent,
            PrincipalKind::Tool => NodeKind::Tool,
            PrincipalKind::Source => NodeKind::Resource,
        }
    }
}

/// The node types that carry text, a scope and an ancestry (the "records").
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[allow(missing_docs)]
pub enum RecordKind {
    Resource,
    Message,
    Memory,
    Claim,
}

impl RecordKind {
    /// The node type.
    pub fn node_kind(self) -> NodeKind {
        match self {
            Self::Resource => NodeKind::Resource,
            Self::Message => NodeKind::Message,
            Self::Memory => NodeKind::Memory,
            Self::Claim => NodeKind::Claim,
        }
    }
}

/// A reference to a node. Records and actions are named by 128-bit ids the caller allocates;
/// principals by their id.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "node", content = "id")]
pub enum NodeRef {
    /// A record (resource, message, memory, claim).
    Record(ItemId),
    /// A principal (user, agent, tool, source channel).
    Principal(PrincipalId),
    /// An action.
    Action(ItemId),
}

/// The three scores of a selected read (recorded on its `read_by` edge).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ReadScores {
    /// `s(m, q) = max(0, 1 - cosine distance)`.
    pub semantic: Trust,
    /// Path trust `rho(m, a)`.
    pub trust: Trust,
    /// `semantic * trust`.
    pub final_score: Trust,
}

/// Why an `invalidated_by` edge exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InvalidationCause {
    /// The record itself was revoked (the edge points at the revoking principal).
    Revoked,
    /// An ancestor was revoked (the edge points at that ancestor).
    RevokedAncestor,
}

/// Extra data some edges carry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "attrs")]
pub enum EdgeAttrs {
    /// Nothing.
    None,
    /// A `read_by` edge's scores.
    Read(ReadScores),
    /// An `invalidated_by` edge's cause.
    Invalidation {
        /// Why.
        cause: InvalidationCause,
    },
}

/// A typed, directed edge. The subject comes first: `memory derived_from source`,
/// `memory read_by agent`, `memory used_for_action action`, `action authorized_by user`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Edge {
    /// Position in the graph's append-only edge log (0-based).
    pub seq: u64,
    /// Subject.
    pub from: NodeRef,
    /// Type.
    pub kind: EdgeKind,
    /// Object.
    pub to: NodeRef,
    /// When (ms since the Unix epoch, as passed in by the caller).
    pub at_ms: u64,
    /// Extra data.
    pub attrs: EdgeAttrs,
}

/// Whether `kind` may connect `from` to `to` (the schema of the graph).
pub fn edge_shape_ok(kind: EdgeKind, from: &NodeRef, to: &NodeRef) -> bool {
    use NodeRef::{Action, Principal, Record};
    match kind {
        EdgeKind::DerivedFrom | EdgeKind::SummarizedFrom | EdgeKind::ObservedFrom => {
            matches!((from, to), (Record(_), Record(_)))
        }
        EdgeKind::WrittenBy | EdgeKind::ReadBy | EdgeKind::VerifiedBy | EdgeKind::ForwardedTo => {
            matches!((from, to), (Record(_), Principal(_)))
        }
        EdgeKind::InvalidatedBy => matches!((from, to), (Record(_), Record(_) | Principal(_))),
        EdgeKind::UsedForAction => matches!((from, to), (Record(_), Action(_))),
        EdgeKind::AuthorizedBy => matches!((from, to), (Action(_), Principal(_))),
        // A session's witness is kept on the item, never in the graph: it carries no
        // revocation, erasure or scope.
        EdgeKind::SeenInSession => false,
    }
}

/// Why an item on a path makes the record *affected*.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Cause {
    /// Labelled `untrusted` by the authority layer (external content).
    Untrusted,
    /// Private: readable only by its owner and named readers. Whether it is private *to someone
    /// else* depends on who looks; see [`AncestrySummary::admits`].
    Private,
    /// Flagged poisoned (by a detector, the lifecycle layer or an operator).
    Poisoned,
    /// Revoked.
    Revoked,
}

impl Cause {
    /// All causes, in bit order.
    pub const ALL: [Cause; 4] = [Cause::Untrusted, Cause::Private, Cause::Poisoned, Cause::Revoked];
    /// Snake-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Untrusted => "untrusted",
            Self::Private => "private",
            Self::Poisoned => "poisoned",
            Self::Revoked => "revoked",
        }
    }
    const fn bit(self) -> u8 {
        match self {
            Self::Untrusted => 1,
            Self::Private => 2,
            Self::Poisoned => 4,
            Self::Revoked => 8,
        }
    }
}

/// A set of [`Cause`]s (serialized as a sorted list).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct CauseSet(u8);

impl CauseSet {
    /// No cause.
    pub const EMPTY: CauseSet = CauseSet(0);
    /// Add a cause.
    #[must_use]
    pub fn with(self, c: Cause) -> CauseSet {
        CauseSet(self.0 | c.bit())
    }
    /// Add `c` when `cond`.
    #[must_use]
    pub fn with_if(self, c: Cause, cond: bool) -> CauseSet {
        if cond { self.with(c) } else { self }
    }
    /// Whether `c` is in the set.
    pub fn contains(self, c: Cause) -> bool {
        self.0 & c.bit() != 0
    }
    /// Whether the set is empty.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }
    /// Union.
    #[must_use]
    pub fn union(self, o: CauseSet) -> CauseSet {
        CauseSet(self.0 | o.0)
    }
    /// The causes, in a fixed order.
    pub fn iter(self) -> impl Iterator<Item = Cause> {
        Cause::ALL.into_iter().filter(move |c| self.contains(*c))
    }
}

impl std::fmt::Debug for CauseSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.iter()).finish()
    }
}

impl Serialize for CauseSet {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.iter())
    }
}

impl<'de> Deserialize<'de> for CauseSet {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = Vec::<Cause>::deserialize(d)?;
        Ok(v.into_iter().fold(CauseSet::EMPTY, CauseSet::with))
    }
}

/// One item on a record's path that carries a cause.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct AffectedAncestor {
    /// The item (the record itself or one of its ancestors).
    pub id: ItemId,
    /// Its causes.
    pub causes: CauseSet,
}

/// A count that is exact, or a lower bound when a bounded list upstream overflowed (the exact
/// number of distinct items in a union cannot be recovered from bounded parts).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "tally", content = "n")]
pub enum Tally {
    /// Exactly this many.
    Exact(u64),
    /// At least this many.
    AtLeast(u64),
}

impl Tally {
    /// The number (exact or lower bound).
    pub fn at_least(self) -> u64 {
        match self {
            Tally::Exact(n) | Tally::AtLeast(n) => n,
        }
    }
    /// Whether `exact` is consistent with this tally.
    pub fn admits(self, exact: u64) -> bool {
        match self {
            Tally::Exact(n) => n == exact,
            Tally::AtLeast(n) => n <= exact,
        }
    }
}

/// What a record's recorded ancestry says, maintained incrementally at write and on every event
/// that changes an ancestor (revocation, poison flag, promotion, verification), so that path trust
/// and `can_read` are O(1) in ancestry depth.
///
/// The *path* of a record is the record itself plus all its transitive ancestors along
/// `derived_from`, `summarized_from` and `observed_from` edges.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AncestrySummary {
    /// S: the lowest base trust of any item on the path (the weakest source).
    pub min_source_trust: Trust,
    /// F: the product of per-hop decays along the weakest root-to-record chain.
    pub flow: Trust,
    /// Longest root-to-record chain, in hops (saturating).
    pub depth: u32,
    /// V: verified itself, or built only from verified inputs.
    pub verified: bool,
    /// Some item on the path is labelled untrusted.
    pub untrusted: bool,
    /// Some item on the path is private.
    pub private: bool,
    /// Some item on the path is flagged poisoned.
    pub poisoned: bool,
    /// Some item on the path is revoked.
    pub revoked: bool,
    /// The principals every item on the path admits: the intersection of the effective reader
    /// sets (readers plus owner; empty when revoked) of the whole path. `can_read` requires the
    /// reader to be in it, so a restriction anywhere upstream holds downstream.
    pub ceiling: Readers,
    /// The items on the path that carry a cause, smallest ids first (ids are time-ordered, so
    /// these are the oldest: usually the original sources), at most `affected_ids_max`.
    pub affected: Vec<AffectedAncestor>,
    /// How many further items carry a cause but were not kept.
    pub affected_rest: Tally,
}

impl AncestrySummary {
    /// Whether `p` is admitted by every item on the path.
    pub fn admits(&self, p: &PrincipalId) -> bool {
        self.ceiling.admits(p)
    }
    /// Whether the path carries any of untrusted, poisoned, revoked.
    pub fn flagged(&self) -> bool {
        self.untrusted || self.poisoned || self.revoked
    }
    /// *Affected* as seen by `viewer`: the path has an untrusted, poisoned or revoked item, or an
    /// item private to someone else (one that does not admit `viewer`).
    pub fn affected_for(&self, viewer: &PrincipalId) -> bool {
        self.flagged() || !self.admits(viewer)
    }
    /// The union of causes over the kept affected items and the flags.
    pub fn causes(&self) -> CauseSet {
        CauseSet::EMPTY
            .with_if(Cause::Untrusted, self.untrusted)
            .with_if(Cause::Private, self.private)
            .with_if(Cause::Poisoned, self.poisoned)
            .with_if(Cause::Revoked, self.revoked)
    }
}
