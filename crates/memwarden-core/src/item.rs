//! Memory items and the requests that create them.

use crate::ids::{ItemId, Namespace, PrincipalId, TenantId};
use crate::label::{ActClass, Integrity, Label, Origin};
use crate::normalize::FoldedText;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// Largest accepted memory text, in bytes.
pub const CONTENT_BYTES_MAX: usize = 64 * 1024;
/// Most parents (declared inputs) one write may reference.
pub const PARENTS_MAX: usize = 64;
/// Most explicit readers one write may name.
pub const READERS_MAX: usize = 256;
/// Metadata key under which an update records the version it replaced. Only the update path
/// sets it; a write that declares it is refused.
pub const SUPERSEDES_KEY: &str = "memwarden.supersedes";
/// Most metadata entries per item.
pub const METADATA_ENTRIES_MAX: usize = 32;
/// Longest metadata key or value, in bytes.
pub const METADATA_FIELD_BYTES_MAX: usize = 1024;
/// Longest session or task tag, in bytes.
pub const TAG_BYTES_MAX: usize = 128;

/// How a memory entered the system. A hint used by the lifecycle scorer; it never affects the
/// label, which comes from the principal and the declared inputs only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[allow(missing_docs)]
pub enum Route {
    Dialogue,
    Direct,
    ToolObservation,
    EnvironmentObservation,
    ExternalObservation,
    ImportedMemory,
    MemoryHandoff,
    CrossAgent,
    SharedPromotion,
    PostTaskExperience,
    Summary,
}

impl Route {
    /// Snake-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Dialogue => "dialogue",
            Self::Direct => "direct",
            Self::ToolObservation => "tool_observation",
            Self::EnvironmentObservation => "environment_observation",
            Self::ExternalObservation => "external_observation",
            Self::ImportedMemory => "imported_memory",
            Self::MemoryHandoff => "memory_handoff",
            Self::CrossAgent => "cross_agent",
            Self::SharedPromotion => "shared_promotion",
            Self::PostTaskExperience => "post_task_experience",
            Self::Summary => "summary",
        }
    }
}

impl std::str::FromStr for Route {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        serde_json::from_value(serde_json::Value::String(s.to_owned()))
            .map_err(|_| format!("unknown route {s:?}"))
    }
}

/// Typed provenance edges (the lineage graph's vocabulary).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[allow(missing_docs)]
pub enum EdgeKind {
    AuthorizedBy,
    ObservedFrom,
    ForwardedTo,
    DerivedFrom,
    SummarizedFrom,
    WrittenBy,
    ReadBy,
    VerifiedBy,
    InvalidatedBy,
    UsedForAction,
    /// Written in a session that had been handed the parent (the engine adds it from the
    /// session's witnesses; a caller cannot declare it). It lowers the label and names what the
    /// writer saw, and nothing else: it is not a derivation, so revoking, erasing or flagging
    /// the parent never revokes, erases or hides this memory.
    SeenInSession,
}

impl EdgeKind {
    /// Snake-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::AuthorizedBy => "authorized_by",
            Self::ObservedFrom => "observed_from",
            Self::ForwardedTo => "forwarded_to",
            Self::DerivedFrom => "derived_from",
            Self::SummarizedFrom => "summarized_from",
            Self::WrittenBy => "written_by",
            Self::ReadBy => "read_by",
            Self::VerifiedBy => "verified_by",
            Self::InvalidatedBy => "invalidated_by",
            Self::UsedForAction => "used_for_action",
            Self::SeenInSession => "seen_in_session",
        }
    }
}

/// A typed edge from an item to something it was derived from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ParentRef {
    /// The parent item.
    pub id: ItemId,
    /// How this item depends on it.
    pub kind: EdgeKind,
}

/// Who may read an item.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "principals")]
pub enum Readers {
    /// Every principal of the namespace.
    All,
    /// Only these principals.
    Only(BTreeSet<PrincipalId>),
}

impl Readers {
    /// Set intersection (`All` is the top element).
    pub fn intersect(&self, other: &Readers) -> Readers {
        match (self, other) {
            (Readers::All, x) | (x, Readers::All) => x.clone(),
            (Readers::Only(a), Readers::Only(b)) => Readers::Only(a.intersection(b).cloned().collect()),
        }
    }
    /// Set union (`All` is the top element).
    pub fn union(&self, other: &Readers) -> Readers {
        match (self, other) {
            (Readers::All, _) | (_, Readers::All) => Readers::All,
            (Readers::Only(a), Readers::Only(b)) => Readers::Only(a.union(b).cloned().collect()),
        }
    }
    /// Whether `p` is admitted.
    pub fn admits(&self, p: &PrincipalId) -> bool {
        match self {
            Readers::All => true,
            Readers::Only(s) => s.contains(p),
        }
    }
}

/// Visibility of an item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Visibility {
    /// Readable by a subset of the namespace.
    Private,
    /// Readable by everyone in the namespace.
    Shared,
    /// Revoked: readable by nobody; kept for audit.
    Revoked,
}

/// Permission scope.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Scope {
    /// The writer.
    pub owner: PrincipalId,
    /// The permission set.
    pub readers: Readers,
    /// Derived from `readers` (shared only when it covers everyone) and revocation.
    pub visibility: Visibility,
}

impl Scope {
    /// Whether the scope lets `reader` read: not revoked, and `reader` is the owner or in the
    /// permission set. (Status is checked separately: [`Status::retrievable`].)
    pub fn admits(&self, reader: &PrincipalId) -> bool {
        self.visibility != Visibility::Revoked && (self.owner == *reader || self.readers.admits(reader))
    }
}

/// Operational status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// In use.
    Active,
    /// Held back by a gate; not retrievable.
    Quarantined,
    /// Refused by a gate; kept for audit.
    Blocked,
    /// Revoked; kept for audit.
    Revoked,
    /// Replaced by a newer version (an update); kept for the memory's history, never
    /// returned by search, list or get.
    Superseded,
}

impl Status {
    /// Whether an item in this status may come back from any read at all (only `Active`).
    pub fn retrievable(self) -> bool {
        self == Status::Active
    }

    /// Snake-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Active => "active",
            Status::Quarantined => "quarantined",
            Status::Blocked => "blocked",
            Status::Revoked => "revoked",
            Status::Superseded => "superseded",
        }
    }
}

/// Operational taint (never the evaluator's ground truth).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[allow(missing_docs)]
pub enum Taint {
    Clean,
    Unverified,
    External,
    Poisoned,
}

/// Lifecycle guard state (MAPLE-Guard). The foundation sets the defaults; the lifecycle layer
/// owns the updates.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GuardState {
    /// Utility `q` (the paper's rho).
    pub q: f64,
    /// Provenance trust `tau`.
    pub tau: f64,
    /// Content hazard `h`.
    pub h: f64,
    /// Operational taint.
    pub taint: Taint,
    /// Successful uses.
    pub successes: u32,
    /// Failed uses.
    pub failures: u32,
    /// Cached write-time risk `r`.
    pub risk: f64,
    /// Who reported an outcome for this memory, and which (issue 34.7: a principal's repeated
    /// reports on one memory count once). At most [`REPORTS_MAX`]; not part of the identity.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reports: Vec<OutcomeReport>,
}

/// The most outcome reporters a memory remembers; a report past them is not counted.
pub const REPORTS_MAX: usize = 32;

/// One principal's outcome report on a memory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutcomeReport {
    /// The reporter.
    pub by: PrincipalId,
    /// Whether it reported success.
    pub success: bool,
}

impl GuardState {
    /// Whether `who` already reported an outcome for this memory.
    pub fn reported_by(&self, who: &PrincipalId) -> bool {
        self.reports.iter().any(|r| r.by == *who)
    }

    /// How many distinct principals other than `who` reported a failure.
    pub fn other_failure_reporters(&self, who: &PrincipalId) -> usize {
        self.reports.iter().filter(|r| !r.success && r.by != *who).count()
    }

    /// The neutral initial state (correctness feedback off: q 0, tau .5, h .15), tainted by label.
    pub fn initial(label: Label) -> Self {
        Self {
            q: 0.0,
            tau: 0.5,
            h: 0.15,
            taint: match label.integrity() {
                Integrity::Untrusted => Taint::External,
                Integrity::Agent | Integrity::Trusted => Taint::Clean,
            },
            successes: 0,
            failures: 0,
            risk: 0.0,
            reports: Vec::new(),
        }
    }
}

/// What a caller asks to write. There is deliberately no origin, label or trust field: those come
/// from the authenticated principal and the declared inputs. Anything a body says about its own
/// trust ends up in `metadata`, which no gate reads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WriteRequest {
    /// Target namespace.
    pub namespace: Namespace,
    /// The text.
    pub content: String,
    /// How it entered.
    pub route: Route,
    /// Declared inputs (derived-from edges).
    #[serde(default)]
    pub parents: Vec<ParentRef>,
    /// Optional narrowing of the readers (never widens past the parents').
    #[serde(default)]
    pub readers: Option<BTreeSet<PrincipalId>>,
    /// Session tag.
    #[serde(default)]
    pub session: Option<String>,
    /// Task tag.
    #[serde(default)]
    pub task: Option<String>,
    /// Free-form metadata; never consulted by any gate.
    #[serde(default)]
    pub metadata: BTreeMap<String, String>,
}

impl WriteRequest {
    /// A plain write with no parents.
    pub fn new(namespace: Namespace, content: impl Into<String>, route: Route) -> Self {
        Self {
            namespace,
            content: content.into(),
            route,
            parents: Vec::new(),
            readers: None,
            session: None,
            task: None,
            metadata: BTreeMap::new(),
        }
    }
}

/// A stored memory. Fields are private: an item is created only by the authority write gate
/// ([`crate::authority::Authority::admit_write`]) or decoded from a store through the validating
/// decoder, which refuses a label above what the recorded origin allows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "RawItem")]
pub struct MemoryItem {
    pub(crate) id: ItemId,
    pub(crate) tenant: TenantId,
    pub(crate) namespace: Namespace,
    pub(crate) content: String,
    pub(crate) origin: Origin,
    pub(crate) writer: PrincipalId,
    /// Who reported a tool output the tool did not vouch for (the writer is the tool): the
    /// caller whose claim it is. `None` for everything a principal wrote itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) reported_by: Option<PrincipalId>,
    pub(crate) route: Route,
    pub(crate) label: Label,
    pub(crate) act_class: ActClass,
    pub(crate) parents: Vec<ParentRef>,
    pub(crate) scope: Scope,
    /// The most readers this memory may ever have: what the writing session could read when it
    /// wrote it (issue 34.5). `None`: no bound but its ancestry's. Part of the identity, so no
    /// promotion can drop it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) ceiling: Option<Readers>,
    /// Who the writer addressed the memory to, when the confidentiality of what it was written
    /// from narrowed its readers below that (issue 34, "withheld says withheld"). It grants no
    /// read: a principal of the audience outside the readers is told the memory is withheld
    /// (its id and why), never its text. `None`: the readers are the audience. Part of the
    /// identity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) audience: Option<Readers>,
    pub(crate) status: Status,
    pub(crate) guard: GuardState,
    pub(crate) created_ms: u64,
    pub(crate) session: Option<String>,
    pub(crate) task: Option<String>,
    pub(crate) metadata: BTreeMap<String, String>,
    /// The newer version that replaced this one (set with [`Status::Superseded`]; not part of
    /// the identity).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) superseded_by: Option<ItemId>,
    #[serde(skip)]
    pub(crate) folded: FoldCache,
    /// The store's version of this record (see [`MemoryItem::version`]); not part of the
    /// record, its identity or its equality.
    #[serde(skip)]
    pub(crate) version: RecordVersion,
}

/// The store's version of a record as it was read: the log index of the last committed change
/// to it (0 for a record no store has returned yet). A read-modify-write carries the version it
/// read, and the store refuses the write if the record changed since (compare-and-set). It is
/// concurrency control, never authority: a wrong version can only make a write conflict.
#[derive(Clone, Copy, Default)]
pub(crate) struct RecordVersion(pub(crate) u64);

impl PartialEq for RecordVersion {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}
impl std::fmt::Debug for RecordVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "v{}", self.0)
    }
}

/// Lazily computed folded text for value matching; ignored by equality and serialization.
#[derive(Clone, Default)]
pub(crate) struct FoldCache(std::sync::OnceLock<FoldedText>);

impl PartialEq for FoldCache {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}
impl std::fmt::Debug for FoldCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FoldCache")
    }
}

/// The on-disk shape, validated into a [`MemoryItem`].
#[derive(Deserialize)]
struct RawItem {
    id: ItemId,
    tenant: TenantId,
    namespace: Namespace,
    content: String,
    origin: Origin,
    writer: PrincipalId,
    #[serde(default)]
    reported_by: Option<PrincipalId>,
    route: Route,
    label: Integrity,
    act_class: ActClass,
    parents: Vec<ParentRef>,
    scope: Scope,
    #[serde(default)]
    ceiling: Option<Readers>,
    #[serde(default)]
    audience: Option<Readers>,
    status: Status,
    guard: GuardState,
    created_ms: u64,
    session: Option<String>,
    task: Option<String>,
    metadata: BTreeMap<String, String>,
    #[serde(default)]
    superseded_by: Option<ItemId>,
}

impl TryFrom<RawItem> for MemoryItem {
    type Error = String;
    fn try_from(r: RawItem) -> Result<Self, String> {
        if r.label > r.origin.integrity() {
            return Err(format!(
                "stored item {} claims label {} above its origin {}",
                r.id,
                r.label.as_str(),
                r.origin.as_str()
            ));
        }
        if r.act_class != r.label.act_class() {
            return Err(format!("stored item {} has an act class that does not match its label", r.id));
        }
        if r.content.is_empty() || r.content.len() > CONTENT_BYTES_MAX || r.parents.len() > PARENTS_MAX {
            return Err(format!("stored item {} breaks a size limit", r.id));
        }
        let label = Label::bind(r.origin).at_most(r.label);
        Ok(MemoryItem {
            id: r.id,
            tenant: r.tenant,
            namespace: r.namespace,
            content: r.content,
            origin: r.origin,
            writer: r.writer,
            reported_by: r.reported_by,
            route: r.route,
            label,
            act_class: label.act_class(),
            parents: r.parents,
            scope: r.scope,
            ceiling: r.ceiling,
            audience: r.audience,
            status: r.status,
            guard: r.guard,
            created_ms: r.created_ms,
            session: r.session,
            task: r.task,
            metadata: r.metadata,
            superseded_by: r.superseded_by,
            folded: FoldCache::default(),
            version: RecordVersion::default(),
        })
    }
}

impl MemoryItem {
    /// The most readers this memory may ever have (see the field): `None` when the writing
    /// session could read what everyone can.
    pub fn ceiling(&self) -> Option<&Readers> {
        self.ceiling.as_ref()
    }

    /// Who the writer addressed this memory to beyond its readers (see the field); `None` when
    /// its readers are its whole audience.
    pub fn audience(&self) -> Option<&Readers> {
        self.audience.as_ref()
    }

    /// Whether `p` may be told this memory exists although its scope does not let `p` read it:
    /// the writer addressed it to `p`, and it is active. Grants no read ([`MemoryItem::readable_by`]
    /// decides that); the engine answers such a principal `withheld`, never with the text.
    pub fn addressed_to(&self, p: &PrincipalId) -> bool {
        self.status == Status::Active
            && self.scope.visibility != Visibility::Revoked
            && self.audience.as_ref().is_some_and(|a| a.admits(p))
    }

    /// Whether a store's search may return this memory to `reader` as a candidate: readable, or
    /// addressed to it (the engine withholds the latter; a store never hands anything over).
    pub fn searchable_by(&self, reader: &PrincipalId) -> bool {
        self.readable_by(reader) || self.addressed_to(reader)
    }

    /// The text folded for value matching (computed once).
    pub fn folded(&self) -> &FoldedText {
        self.folded.0.get_or_init(|| FoldedText::new(&self.content))
    }
    /// The store's version of this record as it was read (the log index of the last committed
    /// change to it; 0 for a record fresh from a gate). Gate outputs built from a record that
    /// was read carry its version, and a store commits them only if the record is still at it.
    pub fn version(&self) -> u64 {
        self.version.0
    }
    /// This record as read at `version` (stores call this when they return a record).
    #[must_use]
    pub fn at_version(mut self, version: u64) -> Self {
        self.version = RecordVersion(version);
        self
    }
    /// Id.
    pub fn id(&self) -> ItemId {
        self.id
    }
    /// Tenant.
    pub fn tenant(&self) -> &TenantId {
        &self.tenant
    }
    /// Namespace.
    pub fn namespace(&self) -> &Namespace {
        &self.namespace
    }
    /// Text.
    pub fn content(&self) -> &str {
        &self.content
    }
    /// Origin bound at write.
    pub fn origin(&self) -> Origin {
        self.origin
    }
    /// The newer version that replaced this one, if it was updated.
    pub fn superseded_by(&self) -> Option<ItemId> {
        self.superseded_by
    }
    /// The older version this one replaced (set by the engine's update as metadata
    /// [`SUPERSEDES_KEY`]).
    pub fn supersedes(&self) -> Option<ItemId> {
        self.metadata.get(SUPERSEDES_KEY).and_then(|v| v.parse().ok())
    }
    /// Writing principal.
    pub fn writer(&self) -> &PrincipalId {
        &self.writer
    }
    /// The caller that reported this tool output when the tool did not vouch for it.
    pub fn reported_by(&self) -> Option<&PrincipalId> {
        self.reported_by.as_ref()
    }
    /// Whose claim the text is: the reporter of an unvouched tool output, else the writer. The
    /// gate counts a memory's support, independence and self-corroboration by this principal.
    pub fn voucher(&self) -> &PrincipalId {
        self.reported_by.as_ref().unwrap_or(&self.writer)
    }
    /// Route.
    pub fn route(&self) -> Route {
        self.route
    }
    /// Label.
    pub fn label(&self) -> Label {
        self.label
    }
    /// Act class (a function of the label).
    pub fn act_class(&self) -> ActClass {
        self.act_class
    }
    /// Declared parents.
    pub fn parents(&self) -> &[ParentRef] {
        &self.parents
    }
    /// Permission scope.
    pub fn scope(&self) -> &Scope {
        &self.scope
    }
    /// Status.
    pub fn status(&self) -> Status {
        self.status
    }
    /// Guard state.
    pub fn guard(&self) -> &GuardState {
        &self.guard
    }
    /// Creation time (ms since the Unix epoch).
    pub fn created_ms(&self) -> u64 {
        self.created_ms
    }
    /// Session tag.
    pub fn session(&self) -> Option<&str> {
        self.session.as_deref()
    }
    /// Task tag.
    pub fn task(&self) -> Option<&str> {
        self.task.as_deref()
    }
    /// Free-form metadata (never consulted by a gate).
    pub fn metadata(&self) -> &BTreeMap<String, String> {
        &self.metadata
    }
    /// Whether `reader` may read this item under its scope and status (the foundation's hard
    /// filter; the lineage layer refines it).
    pub fn readable_by(&self, reader: &PrincipalId) -> bool {
        self.status.retrievable() && self.scope.admits(reader)
    }
    /// SHA-256 over the canonical JSON of the item's immutable identity (everything fixed at write:
    /// id, tenant, namespace, text, origin, writer, reporter, route, label, parents, owner, creation time,
    /// tags, metadata). The verdict log commits to it at write and a read checks it again; status,
    /// scope and guard state change later through their own logged operations.
    pub fn identity_digest(&self) -> [u8; 32] {
        use sha2::{Digest, Sha256};
        #[derive(Serialize)]
        struct Identity<'a> {
            id: ItemId,
            tenant: &'a TenantId,
            namespace: &'a Namespace,
            content: &'a str,
            origin: Origin,
            writer: &'a PrincipalId,
            // Absent for items without a reporter, so their digests are those of earlier builds.
            #[serde(skip_serializing_if = "Option::is_none")]
            reported_by: Option<&'a PrincipalId>,
            route: Route,
            label: Label,
            parents: &'a [ParentRef],
            owner: &'a PrincipalId,
            // Absent for items written without a session ceiling (digests of earlier builds).
            #[serde(skip_serializing_if = "Option::is_none")]
            ceiling: Option<&'a Readers>,
            // Absent for items whose readers are their audience (digests of earlier builds).
            #[serde(skip_serializing_if = "Option::is_none")]
            audience: Option<&'a Readers>,
            created_ms: u64,
            session: Option<&'a str>,
            task: Option<&'a str>,
            metadata: &'a BTreeMap<String, String>,
        }
        let identity = Identity {
            id: self.id,
            tenant: &self.tenant,
            namespace: &self.namespace,
            content: &self.content,
            origin: self.origin,
            writer: &self.writer,
            reported_by: self.reported_by.as_ref(),
            route: self.route,
            label: self.label,
            parents: &self.parents,
            owner: &self.scope.owner,
            ceiling: self.ceiling.as_ref(),
            audience: self.audience.as_ref(),
            created_ms: self.created_ms,
            session: self.session.as_deref(),
            task: self.task.as_deref(),
            metadata: &self.metadata,
        };
        // Serializing plain structs with string-keyed maps cannot fail.
        let bytes = serde_json::to_vec(&identity).unwrap_or_default();
        Sha256::digest(&bytes).into()
    }
}
