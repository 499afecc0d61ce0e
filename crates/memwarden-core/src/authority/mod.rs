//! The authority layer (TMA-NM M1–M4 and Algorithm 1).
//!
//! * **M1 write-time binding** — [`Authority::admit_write`] binds an item's origin and label from
//!   the authenticated [`Principal`] and its declared inputs; nothing in the request body can
//!   change them.
//! * **M2 non-malleable propagation** — a derived item's label is the meet of everything it was
//!   derived from; a tool's output is the meet over its arguments and inputs and is trusted only if
//!   the tool is allow-listed and every bound input is trusted ([`Authority::admit_tool_output`]).
//! * **M3 corroborated elevation and user grants** — [`Authority::decide`] accepts an
//!   untrusted-pushed value only with `k` independent trusted attestations (domain-aware by
//!   default) or a matching, unused, unexpired, correctly signed grant.
//! * **M4** — every admission and decision is handed to the store as a proof value
//!   ([`AdmittedWrite`], [`AdmittedAttestation`], [`DecisionOutcome`]) that only this module can
//!   construct, and the store appends it to the verdict log in the same transaction.
//!
//! Any error while deciding yields `Block` (deny), never `Allow`.

pub mod decide;
pub mod grant;
pub mod tool;

pub use decide::{ActionAnalysis, ActionClass, DecisionContext, Support, ValueFacts, TOOL_CALL_KEY};
pub use tool::{ToolStatement, Vouch};

use crate::action::{Decision, Rule, Verdict};
use crate::ids::{ItemId, Namespace, PrincipalId, TenantId};
use crate::item::{
    EdgeKind, GuardState, MemoryItem, ParentRef, Readers, Route, Scope, Status, Visibility, WriteRequest, CONTENT_BYTES_MAX,
    METADATA_ENTRIES_MAX, METADATA_FIELD_BYTES_MAX, PARENTS_MAX, READERS_MAX, SUPERSEDES_KEY, TAG_BYTES_MAX,
};
use crate::label::{Integrity, Label, Origin};
use crate::normalize::{NormError, NormValue, ValueKind};
use crate::principal::{Principal, PrincipalKind};
use crate::session::Observed;
use grant::SignedGrant;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// How independent corroborators are counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Independence {
    /// Distinct domains (a principal without a domain is its own domain). The default.
    DomainAware,
    /// Distinct principals only (fooled by two compromises in one domain; kept for the study).
    Naive,
}

/// Authority-layer configuration. Switches other than `k` exist for ablations only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuthorityConfig {
    /// Independent trusted attestations needed to elevate a value (default 2).
    pub k: usize,
    /// Counting rule.
    pub independence: Independence,
    /// Ablation switch: when false, every write is labelled trusted (as if labels came from content).
    pub origin_binding: bool,
    /// Ablation switch: when false, attestations never elevate (grants still do).
    pub elevation: bool,
    /// Preset switch: when false the authority layer records but does not defend. Labels are
    /// still bound from the origin and propagated (provenance the other layers read), but no
    /// session floor is imposed and the action rule accepts every value (`NoUntrustedPush`):
    /// the presets without the authority layer (`none`, `lifecycle`, `lineage`).
    #[serde(default = "enforce_default")]
    pub enforce: bool,
}

fn enforce_default() -> bool {
    true
}

impl Default for AuthorityConfig {
    fn default() -> Self {
        Self { k: 2, independence: Independence::DomainAware, origin_binding: true, elevation: true, enforce: true }
    }
}

/// Why a write was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WriteError {
    /// Empty (or whitespace-only) text.
    #[error("memory text is empty")]
    EmptyContent,
    /// Text above the limit.
    #[error("memory text is {bytes} bytes; the limit is {CONTENT_BYTES_MAX}")]
    ContentTooLarge {
        /// Size.
        bytes: usize,
    },
    /// Too many parents.
    #[error("{count} parents; the limit is {PARENTS_MAX}")]
    TooManyParents {
        /// Count.
        count: usize,
    },
    /// A parent is listed twice (under any edge kinds): one memory is one input.
    #[error("parent {0} is listed more than once")]
    DuplicateParent(ItemId),
    /// A declared parent edge that is not a derivation (`derived_from`, `summarized_from`,
    /// `observed_from`).
    #[error("parent {id} is declared as {kind}; a parent must be derived_from, summarized_from or observed_from")]
    NotADerivation {
        /// The parent.
        id: ItemId,
        /// The edge kind given.
        kind: String,
    },
    /// Too many readers.
    #[error("{count} readers; the limit is {READERS_MAX}")]
    TooManyReaders {
        /// Count.
        count: usize,
    },
    /// Metadata above the limits.
    #[error("metadata exceeds {METADATA_ENTRIES_MAX} entries or {METADATA_FIELD_BYTES_MAX} bytes per field")]
    MetadataTooLarge,
    /// Session or task tag above the limit.
    #[error("session or task tag longer than {TAG_BYTES_MAX} bytes")]
    TagTooLong,
    /// A declared parent is missing, in another tenant, or not readable by the writer.
    #[error("parent {0} does not exist or is not readable by the writer")]
    ParentNotReadable(ItemId),
    /// The engine passed parents that do not match the request (a bug; refuse).
    #[error("internal error: resolved parents do not match the request")]
    ParentMismatch,
    /// The principal belongs to another tenant than the one written to.
    #[error("principal {0} may not write to tenant {1}")]
    WrongTenant(PrincipalId, TenantId),
    /// A tool argument's value could not be normalised.
    #[error("tool argument {key}: {error}")]
    BadArgument {
        /// Key.
        key: String,
        /// Error.
        error: NormError,
    },
    /// A tool call names a principal that is not a tool.
    #[error("{0} is not a tool")]
    NotATool(PrincipalId),
    /// A metadata key only the engine sets (an update's [`SUPERSEDES_KEY`]).
    #[error("metadata key {0} is reserved")]
    ReservedMetadata(&'static str),
    /// The writer's kind may not declare this route (see [`route_allowed`]).
    #[error("a {kind} may not write with route {route}")]
    RouteNotAllowed {
        /// The writer's kind.
        kind: &'static str,
        /// The declared route.
        route: &'static str,
    },
}

/// A write the authority gate admitted. Only this module constructs it; the store requires it.
#[derive(Debug, Clone, PartialEq)]
pub struct AdmittedWrite {
    item: MemoryItem,
}

impl AdmittedWrite {
    /// The item to persist.
    pub fn item(&self) -> &MemoryItem {
        &self.item
    }
    /// Apply a lifecycle decision made after admission: the status may only get stricter and the
    /// guard state is replaced (the lifecycle layer owns it). The label cannot change.
    pub fn restrict(&mut self, status: Status, guard: GuardState) {
        if self.item.status == Status::Active {
            self.item.status = status;
        }
        self.item.guard = guard;
    }
    /// Apply a lifecycle rewrite: prepend the unverified-note notice to the text (the label,
    /// origin and scope cannot change). Refused if the text would exceed the size limit.
    pub fn prepend_note(&mut self, note: &str) -> Result<(), WriteError> {
        let bytes = note.len() + self.item.content.len();
        if bytes > CONTENT_BYTES_MAX {
            return Err(WriteError::ContentTooLarge { bytes });
        }
        self.item.content.insert_str(0, note);
        Ok(())
    }
}

/// Longest accepted revocation reason (bytes).
pub const REASON_BYTES_MAX: usize = 1024;

/// A revocation the gate admitted: the item after revocation (status `revoked`, visibility
/// `revoked`, permission set cleared; its identity and label unchanged), who revoked it and why.
/// Only this module constructs it; the store requires it to change an item's status.
#[derive(Debug, Clone, PartialEq)]
pub struct AdmittedRevocation {
    item: MemoryItem,
    by: PrincipalId,
    reason: String,
}

impl AdmittedRevocation {
    /// The item as it is after revocation.
    pub fn item(&self) -> &MemoryItem {
        &self.item
    }
    /// The revoking principal.
    pub fn by(&self) -> &PrincipalId {
        &self.by
    }
    /// The stated reason.
    pub fn reason(&self) -> &str {
        &self.reason
    }
}

/// Why a revocation was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RevokeError {
    /// Only the item's owner or a user of its tenant may revoke it.
    #[error("only the memory's owner or a user may revoke it")]
    NotAllowed,
    /// The item is already revoked.
    #[error("the memory is already revoked")]
    AlreadyRevoked,
    /// The principal and the item belong to different tenants.
    #[error("the memory belongs to another tenant")]
    OtherTenant,
    /// The reason is longer than [`REASON_BYTES_MAX`].
    #[error("the reason exceeds {REASON_BYTES_MAX} bytes")]
    ReasonTooLong,
}

/// A promotion the gate admitted: the item with its readers widened (identity, label, route
/// and ancestry unchanged), who asked and the readers it had before. Only this module
/// constructs it; the store requires it to widen an item's scope.
#[derive(Debug, Clone, PartialEq)]
pub struct AdmittedPromotion {
    item: MemoryItem,
    by: PrincipalId,
    from: Readers,
}

impl AdmittedPromotion {
    /// The item as it is after the promotion.
    pub fn item(&self) -> &MemoryItem {
        &self.item
    }
    /// Who promoted it (its owner).
    pub fn by(&self) -> &PrincipalId {
        &self.by
    }
    /// The readers before the promotion.
    pub fn from(&self) -> &Readers {
        &self.from
    }
}

/// Why a promotion was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PromoteError {
    /// Only the item's owner may widen who reads it.
    #[error("only the memory's owner may promote it")]
    NotOwner,
    /// The principal and the item belong to different tenants.
    #[error("the memory belongs to another tenant")]
    OtherTenant,
    /// Revoked, quarantined or blocked memories are never promoted.
    #[error("the memory is not active")]
    NotActive,
    /// The new readers do not include every current reader, or add nobody.
    #[error("a promotion must keep every current reader and add at least one")]
    NotAWidening,
    /// An ancestor does not admit every new reader: scope cannot widen past what the ancestry
    /// allows (promote the ancestors first).
    #[error("the memory's ancestry does not admit the new readers; promote its parents first")]
    ExceedsAncestry,
    /// The session that wrote the memory had been handed memories some new reader may not read:
    /// a note written after reading a private memory stays within that memory's readers.
    #[error("the memory was written in a session that read memories the new readers may not read; it cannot be shared wider than they are")]
    ExceedsSessionCeiling,
    /// The resolved parents do not match the item's (an engine bug; refuse).
    #[error("internal error: resolved parents do not match the memory")]
    ParentMismatch,
    /// Too many readers.
    #[error("{count} readers; the limit is {READERS_MAX}")]
    TooManyReaders {
        /// Count.
        count: usize,
    },
}

/// The readers bound a session's write carries for good: `None` when the session could read
/// what everyone can, else its readers ceiling with the writer in it.
fn session_ceiling(session: &Readers, writer: &PrincipalId) -> Option<Readers> {
    match session {
        Readers::All => None,
        Readers::Only(s) => {
            let mut s = s.clone();
            s.insert(writer.clone());
            Some(Readers::Only(s))
        }
    }
}

/// A hold a gate decided (the lifecycle promotion gate blocking a promotion): the item's status
/// falls to quarantined (never rises), so no read returns it; identity and label unchanged.
#[derive(Debug, Clone, PartialEq)]
pub struct AdmittedHold {
    item: MemoryItem,
    by: PrincipalId,
    reason: String,
}

impl AdmittedHold {
    /// The item as it is after the hold.
    pub fn item(&self) -> &MemoryItem {
        &self.item
    }
    /// The principal whose request the gate held.
    pub fn by(&self) -> &PrincipalId {
        &self.by
    }
    /// The gate's reason (a rule name; never memory text).
    pub fn reason(&self) -> &str {
        &self.reason
    }
}

/// An update the gate admitted: the new version (a write derived from the old one, carrying
/// [`SUPERSEDES_KEY`]) and the old version as it is afterwards (status superseded, pointing at
/// the new one). Only this module constructs it; the store commits both in one step.
#[derive(Debug, Clone, PartialEq)]
pub struct AdmittedUpdate {
    write: AdmittedWrite,
    superseded: MemoryItem,
}

impl AdmittedUpdate {
    /// The new version's write.
    pub fn write(&self) -> &AdmittedWrite {
        &self.write
    }
    /// The new version's write, for the lifecycle write gate (which may only narrow it).
    pub fn write_mut(&mut self) -> &mut AdmittedWrite {
        &mut self.write
    }
    /// The old version after the update.
    pub fn superseded(&self) -> &MemoryItem {
        &self.superseded
    }
}

/// Why an update was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UpdateError {
    /// Only the memory's owner or a user of its tenant may update it.
    #[error("only the memory's owner or a user may update it")]
    NotAllowed,
    /// Only an active memory has a next version (an older version is updated through its latest).
    #[error("the memory is not active (superseded, revoked or held back)")]
    NotActive,
    /// The new version was refused as a write.
    #[error(transparent)]
    Write(#[from] WriteError),
}

/// Whether `inner` ⊆ `outer`.
fn readers_within(inner: &Readers, outer: &Readers) -> bool {
    match (inner, outer) {
        (_, Readers::All) => true,
        (Readers::All, Readers::Only(_)) => false,
        (Readers::Only(a), Readers::Only(b)) => a.is_subset(b),
    }
}

/// The route a write takes when its writer declares none: the door's own. A source's text is an
/// external observation, a tool's an observation of its own, a user's or an agent's an explicit
/// write.
pub fn default_route(kind: PrincipalKind) -> Route {
    match kind {
        PrincipalKind::Source => Route::ExternalObservation,
        PrincipalKind::Tool => Route::ToolObservation,
        PrincipalKind::User | PrincipalKind::Agent => Route::Direct,
    }
}

/// Which routes each kind of principal may declare for its own write. Observations come from
/// tools and sources, never from an agent claiming it saw something; `shared_promotion` is set by
/// no write (promotion widens an item in place); imports are a user's. The route drives the
/// lifecycle layer's guard state, so a writer cannot pick the one that trusts it most.
pub fn route_allowed(kind: PrincipalKind, route: Route) -> bool {
    use Route as R;
    match kind {
        PrincipalKind::User => !matches!(route, R::SharedPromotion),
        PrincipalKind::Agent => {
            matches!(route, R::Dialogue | R::Direct | R::MemoryHandoff | R::CrossAgent | R::PostTaskExperience | R::Summary)
        }
        PrincipalKind::Tool => matches!(route, R::ToolObservation | R::EnvironmentObservation | R::ExternalObservation),
        PrincipalKind::Source => matches!(route, R::ExternalObservation | R::EnvironmentObservation),
    }
}

/// A tool argument as the caller passes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolArg {
    /// Name.
    pub key: String,
    /// Raw value.
    pub value: String,
    /// Comparison kind.
    pub kind: ValueKind,
    /// Items the caller says the value came from.
    #[serde(default)]
    pub sources: Vec<ItemId>,
}

/// A value attested by a principal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attestation {
    /// Tenant.
    pub tenant: TenantId,
    /// Attesting principal.
    pub attester: PrincipalId,
    /// Its independence key (domain, or the principal when it has none).
    pub independence: String,
    /// Key.
    pub key: String,
    /// Normalised value.
    pub value: NormValue,
    /// The attestation's own label: the attester's integrity met with its declared sources'.
    pub label: Integrity,
    /// Items the attestation was derived from.
    pub sources: Vec<ItemId>,
    /// When.
    pub created_ms: u64,
}

/// An attestation admitted by the gate (possibly below trusted: then it is kept for audit and
/// counts for nothing).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdmittedAttestation {
    attestation: Attestation,
}

impl AdmittedAttestation {
    /// The record to persist.
    pub fn attestation(&self) -> &Attestation {
        &self.attestation
    }
}

/// A monotone elevation of (key, value): `k` independent trusted principals attested it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Elevation {
    /// Tenant.
    pub tenant: TenantId,
    /// Key.
    pub key: String,
    /// Normalised value.
    pub value: NormValue,
    /// Counted attesters (independence keys).
    pub attesters: Vec<String>,
    /// When.
    pub created_ms: u64,
    /// The memories it was computed from (the trusted memories that supported the value). It
    /// stops counting when any of them is revoked, erased, flagged poisoned, superseded or held
    /// back (issue 34.4); the engine passes only elevations whose evidence is still live.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub evidence: Vec<ItemId>,
}

/// A grant consumed by a decision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GrantUse {
    /// The grant.
    pub grant: SignedGrant,
    /// When.
    pub used_ms: u64,
}

/// The authority verdict plus the state changes it implies. Only [`Authority::decide`] constructs
/// it; the store commits the changes and the log entry atomically, and refuses (fails the whole
/// commit) if a grant it consumes was consumed concurrently.
#[derive(Debug, Clone, PartialEq)]
pub struct DecisionOutcome {
    verdict: Verdict,
    new_elevations: Vec<Elevation>,
    grant_uses: Vec<GrantUse>,
}

impl DecisionOutcome {
    /// The verdict.
    pub fn verdict(&self) -> &Verdict {
        &self.verdict
    }
    /// Elevations to record.
    pub fn new_elevations(&self) -> &[Elevation] {
        &self.new_elevations
    }
    /// Grants to consume.
    pub fn grant_uses(&self) -> &[GrantUse] {
        &self.grant_uses
    }
    /// A denial by `rule` (an unusable request, an error while deciding): nothing consumed.
    pub fn denied(rule: Rule) -> Self {
        let cause = match &rule {
            Rule::InvalidRequest { reason } | Rule::DecisionError { reason } | Rule::GrantRefused { reason, .. } => reason.clone(),
            _ => String::new(),
        };
        Self { verdict: decide::verdict(Decision::Block, crate::action::Layer::Authority, rule, cause), new_elevations: Vec::new(), grant_uses: Vec::new() }
    }
    /// The transition a commit makes when another decision consumed one of this outcome's
    /// grants first (`nonce`): the outcome becomes a refusal, with nothing consumed or elevated.
    #[must_use]
    pub fn grant_spent_first(self, nonce: &str) -> Self {
        debug_assert!(!self.grant_uses.is_empty(), "only an outcome that consumes a grant can lose it");
        let reason = format!("grant {nonce} was already used");
        let mut verdict = self.verdict;
        verdict.decision = Decision::Block;
        verdict.rule = Rule::GrantRefused { code: "reused".into(), reason: reason.clone() };
        verdict.cause = format!("grant refused: {reason}");
        let out = Self { verdict, new_elevations: Vec::new(), grant_uses: Vec::new() };
        debug_assert!(out.grant_uses.is_empty() && out.new_elevations.is_empty());
        out
    }
}

/// The authority gate.
#[derive(Debug, Clone, Default)]
pub struct Authority {
    config: AuthorityConfig,
}

fn check_write_limits(req: &WriteRequest) -> Result<(), WriteError> {
    if req.content.trim().is_empty() {
        return Err(WriteError::EmptyContent);
    }
    if req.content.len() > CONTENT_BYTES_MAX {
        return Err(WriteError::ContentTooLarge { bytes: req.content.len() });
    }
    if req.parents.len() > PARENTS_MAX {
        return Err(WriteError::TooManyParents { count: req.parents.len() });
    }
    let mut seen = std::collections::BTreeSet::new();
    for p in &req.parents {
        if !matches!(p.kind, EdgeKind::DerivedFrom | EdgeKind::SummarizedFrom | EdgeKind::ObservedFrom) {
            return Err(WriteError::NotADerivation { id: p.id, kind: p.kind.as_str().to_owned() });
        }
        if !seen.insert(p.id) {
            return Err(WriteError::DuplicateParent(p.id));
        }
    }
    // The writer always reads its own memory and takes one of the READERS_MAX places.
    if let Some(r) = &req.readers
        && r.len() >= READERS_MAX {
            return Err(WriteError::TooManyReaders { count: r.len() });
        }
    if req.metadata.len() > METADATA_ENTRIES_MAX
        || req.metadata.iter().any(|(k, v)| k.len() > METADATA_FIELD_BYTES_MAX || v.len() > METADATA_FIELD_BYTES_MAX)
    {
        return Err(WriteError::MetadataTooLarge);
    }
    if [&req.session, &req.task].iter().any(|t| t.as_ref().is_some_and(|t| t.len() > TAG_BYTES_MAX)) {
        return Err(WriteError::TagTooLong);
    }
    Ok(())
}

impl Authority {
    /// A gate with this configuration.
    pub fn new(config: AuthorityConfig) -> Self {
        Self { config }
    }

    /// The configuration.
    pub fn config(&self) -> &AuthorityConfig {
        &self.config
    }

    fn bind(&self, origin: Origin) -> Label {
        if self.config.origin_binding {
            Label::bind(origin)
        } else {
            // Ablation: labels as if they came from content, which the attacker controls.
            Label::bind(Origin::User)
        }
    }

    /// Admit the revocation of `item` by `principal`: allowed to the item's owner and to users
    /// of its tenant. Afterwards nobody can read the item (it stays stored, for audit).
    pub fn admit_revocation(&self, principal: &Principal, item: &MemoryItem, reason: &str) -> Result<AdmittedRevocation, RevokeError> {
        if principal.tenant != item.tenant {
            return Err(RevokeError::OtherTenant);
        }
        if reason.len() > REASON_BYTES_MAX {
            return Err(RevokeError::ReasonTooLong);
        }
        if principal.id != item.scope.owner && principal.kind != PrincipalKind::User {
            return Err(RevokeError::NotAllowed);
        }
        if item.status == Status::Revoked || item.scope.visibility == Visibility::Revoked {
            return Err(RevokeError::AlreadyRevoked);
        }
        let mut revoked = item.clone();
        revoked.status = Status::Revoked;
        revoked.scope.visibility = Visibility::Revoked;
        revoked.scope.readers = Readers::Only(BTreeSet::new());
        debug_assert_eq!(revoked.identity_digest(), item.identity_digest(), "revocation must not touch the identity");
        debug_assert!(revoked.label() == item.label());
        Ok(AdmittedRevocation { item: revoked, by: principal.id.clone(), reason: reason.to_owned() })
    }

    /// Admit widening `item`'s readers to `readers` (private → shared, or to more named
    /// readers), asked by `principal`. `parents` are the item's parents as stored now, in the
    /// item's parent order; a parent that no longer exists (erased) must be passed as absent,
    /// which admits nobody. Allowed only to the owner, only for an active item, only as a
    /// strict widening, and only within what every parent admits (the ancestry ceiling). The
    /// label, route and ancestry travel unchanged.
    pub fn admit_promotion(
        &self,
        principal: &Principal,
        item: &MemoryItem,
        readers: Readers,
        parents: &[Option<&MemoryItem>],
    ) -> Result<AdmittedPromotion, PromoteError> {
        if principal.tenant != item.tenant {
            return Err(PromoteError::OtherTenant);
        }
        if principal.id != item.scope.owner {
            return Err(PromoteError::NotOwner);
        }
        // A superseded version is widened only with its latest (the engine walks the chain).
        if !matches!(item.status, Status::Active | Status::Superseded) || item.scope.visibility == Visibility::Revoked {
            return Err(PromoteError::NotActive);
        }
        if parents.len() != item.parents.len() {
            return Err(PromoteError::ParentMismatch);
        }
        let readers = match readers {
            Readers::All => Readers::All,
            Readers::Only(mut s) => {
                s.insert(item.scope.owner.clone());
                if s.len() > READERS_MAX {
                    return Err(PromoteError::TooManyReaders { count: s.len() });
                }
                Readers::Only(s)
            }
        };
        if !readers_within(&item.scope.readers, &readers) || readers == item.scope.readers {
            return Err(PromoteError::NotAWidening);
        }
        let mut ceiling = Readers::All;
        for (p, r) in parents.iter().zip(&item.parents) {
            match p {
                Some(p) if p.id == r.id && p.tenant == item.tenant => {
                    let admitted = if matches!(p.status, Status::Active | Status::Superseded) && p.scope.visibility != Visibility::Revoked {
                        let mut own = p.scope.readers.clone();
                        if let Readers::Only(s) = &mut own {
                            s.insert(p.scope.owner.clone());
                        }
                        own
                    } else {
                        Readers::Only(BTreeSet::new())
                    };
                    ceiling = ceiling.intersect(&admitted);
                }
                Some(_) => return Err(PromoteError::ParentMismatch),
                None => ceiling = Readers::Only(BTreeSet::new()),
            }
        }
        if !readers_within(&readers, &ceiling) {
            return Err(PromoteError::ExceedsAncestry);
        }
        // What the writing session could read bounds the memory for good, however many items
        // it was handed (its witness edges are capped; this bound is not).
        if let Some(bound) = &item.ceiling
            && !readers_within(&readers, bound)
        {
            return Err(PromoteError::ExceedsSessionCeiling);
        }
        let mut promoted = item.clone();
        let from = std::mem::replace(&mut promoted.scope.readers, readers);
        promoted.scope.visibility = if promoted.scope.readers == Readers::All { Visibility::Shared } else { Visibility::Private };
        debug_assert_eq!(promoted.identity_digest(), item.identity_digest(), "promotion must not touch the identity");
        debug_assert!(promoted.label() == item.label(), "promotion never changes a label");
        Ok(AdmittedPromotion { item: promoted, by: principal.id.clone(), from })
    }

    /// Admit an update of `old` by `principal` (in a session that was handed `observed`): the
    /// new text becomes a new version derived from the old one (label at most the old one's
    /// and the writer's, scope within the old one's, same namespace and route when the writer
    /// may use it), and the old version is superseded. Nothing is overwritten.
    #[allow(clippy::too_many_arguments)]
    pub fn admit_update(
        &self,
        principal: &Principal,
        old: &MemoryItem,
        content: String,
        observed: &Observed,
        id: ItemId,
        now_ms: u64,
    ) -> Result<AdmittedUpdate, UpdateError> {
        if principal.tenant != old.tenant || !old.readable_by(&principal.id) {
            return Err(UpdateError::NotAllowed);
        }
        if principal.id != old.scope.owner && principal.kind != PrincipalKind::User {
            return Err(UpdateError::NotAllowed);
        }
        if old.status != Status::Active {
            return Err(UpdateError::NotActive);
        }
        let route = if route_allowed(principal.kind, old.route) { old.route } else { Route::Direct };
        let mut req = WriteRequest::new(old.namespace.clone(), content, route);
        req.parents = vec![ParentRef { id: old.id, kind: EdgeKind::DerivedFrom }];
        let mut readers = match &old.scope.readers {
            Readers::All => None,
            Readers::Only(s) => Some(s.clone()),
        };
        if let Some(r) = &mut readers {
            r.insert(old.scope.owner.clone());
        }
        req.readers = readers;
        req.metadata = old.metadata.clone();
        req.metadata.insert(SUPERSEDES_KEY.to_owned(), old.id.to_string());
        req.task = old.task.clone();
        let write = self.admit(principal, principal.origin(), self.bind(principal.origin()), &old.tenant, req, &[old], observed, id, now_ms)?;
        let mut superseded = old.clone();
        superseded.status = Status::Superseded;
        superseded.superseded_by = Some(id);
        debug_assert_eq!(superseded.identity_digest(), old.identity_digest(), "superseding must not touch the identity");
        debug_assert!(write.item().label() <= old.label(), "a label never rises through an update");
        Ok(AdmittedUpdate { write, superseded })
    }

    /// Hold `item` back on a gate's decision (`reason` names the rule): its status falls to
    /// quarantined. A hold only narrows, so any gate may ask for one.
    pub fn admit_hold(&self, item: &MemoryItem, by: &PrincipalId, reason: &str) -> AdmittedHold {
        let mut held = item.clone();
        if held.status == Status::Active {
            held.status = Status::Quarantined;
        }
        let mut reason = reason.to_owned();
        if reason.len() > REASON_BYTES_MAX {
            let mut end = REASON_BYTES_MAX;
            while !reason.is_char_boundary(end) {
                end -= 1;
            }
            reason.truncate(end);
        }
        debug_assert!(!held.status.retrievable());
        AdmittedHold { item: held, by: by.clone(), reason }
    }

    /// M1 + M2: admit a write by `principal`. `parents` are the resolved items of
    /// `req.parents`, in the same order (the engine resolves them, the gate checks them).
    pub fn admit_write(
        &self,
        principal: &Principal,
        tenant: &TenantId,
        req: WriteRequest,
        parents: &[&MemoryItem],
        id: ItemId,
        now_ms: u64,
    ) -> Result<AdmittedWrite, WriteError> {
        self.admit_write_observed(principal, tenant, req, parents, &Observed::clean(), id, now_ms)
    }

    /// M1 + M2 for a write of a session that was handed `observed`: as [`Authority::admit_write`],
    /// and the label is also at most the session's floor, with `seen_in_session` edges to the
    /// session's witnesses. This is how a write that declares no parent still carries the taint
    /// of what its writer saw.
    #[allow(clippy::too_many_arguments)]
    pub fn admit_write_observed(
        &self,
        principal: &Principal,
        tenant: &TenantId,
        req: WriteRequest,
        parents: &[&MemoryItem],
        observed: &Observed,
        id: ItemId,
        now_ms: u64,
    ) -> Result<AdmittedWrite, WriteError> {
        if req.metadata.contains_key(SUPERSEDES_KEY) {
            return Err(WriteError::ReservedMetadata(SUPERSEDES_KEY));
        }
        self.admit(principal, principal.origin(), self.bind(principal.origin()), tenant, req, parents, observed, id, now_ms)
    }

    /// The floor a session's observations impose (none when labels are not bound, the ablation).
    fn floor(&self, observed: &Observed) -> Integrity {
        if self.config.origin_binding && self.config.enforce { observed.floor() } else { Integrity::Trusted }
    }

    #[allow(clippy::too_many_arguments)]
    fn admit(
        &self,
        writer: &Principal,
        origin: Origin,
        base: Label,
        tenant: &TenantId,
        mut req: WriteRequest,
        parents: &[&MemoryItem],
        observed: &Observed,
        id: ItemId,
        now_ms: u64,
    ) -> Result<AdmittedWrite, WriteError> {
        if writer.tenant != *tenant {
            return Err(WriteError::WrongTenant(writer.id.clone(), tenant.clone()));
        }
        check_write_limits(&req)?;
        if !route_allowed(writer.kind, req.route) {
            return Err(WriteError::RouteNotAllowed { kind: writer.kind.as_str(), route: req.route.as_str() });
        }
        if parents.len() != req.parents.len() {
            return Err(WriteError::ParentMismatch);
        }
        let mut label = base;
        let mut readers = Readers::All;
        for (p, r) in parents.iter().zip(&req.parents) {
            if p.id != r.id {
                return Err(WriteError::ParentMismatch);
            }
            if p.tenant != *tenant || !p.readable_by(&writer.id) {
                return Err(WriteError::ParentNotReadable(p.id));
            }
            label = label.meet(p.label);
            readers = readers.intersect(&p.scope.readers);
        }
        let floor = self.floor(observed);
        if floor < Integrity::Trusted {
            label = label.at_most(floor);
            for w in observed.witnesses() {
                if !req.parents.iter().any(|p| p.id == *w) && req.parents.len() < PARENTS_MAX {
                    req.parents.push(ParentRef { id: *w, kind: EdgeKind::SeenInSession });
                }
            }
        }
        debug_assert!(label.integrity() <= floor);
        // Who the writer addresses: its declared readers (and itself), or everyone.
        let addressed = match req.readers.take() {
            Some(mut asked) => {
                asked.insert(writer.id.clone());
                Readers::Only(asked)
            }
            None => Readers::All,
        };
        readers = readers.intersect(&addressed);
        // Confidentiality: nobody outside what the session could read may read its write,
        // declared parents or not (a permission, so it holds in every preset).
        readers = readers.intersect(observed.readers());
        if let Readers::Only(s) = &mut readers
            && s.is_empty() {
                s.insert(writer.id.clone());
            }
        // The addressees the confidentiality of its sources left out are told it is withheld.
        let audience = (readers != addressed).then_some(addressed);
        debug_assert!(audience.as_ref().is_none_or(|a| readers_within(&readers, a)), "readers are a subset of the audience");
        let visibility = if readers == Readers::All { Visibility::Shared } else { Visibility::Private };
        let ceiling = session_ceiling(observed.readers(), &writer.id);
        // Invariant: a label never rises through derivation.
        debug_assert!(parents.iter().all(|p| label <= p.label));
        debug_assert!(label <= base);
        let mut dedup = BTreeSet::new();
        req.parents.retain(|p| dedup.insert(*p));
        let item = MemoryItem {
            id,
            tenant: tenant.clone(),
            namespace: req.namespace,
            content: req.content,
            origin,
            reported_by: None,
            writer: writer.id.clone(),
            route: req.route,
            label,
            act_class: label.act_class(),
            parents: req.parents,
            scope: Scope { owner: writer.id.clone(), readers, visibility },
            ceiling,
            audience,
            status: Status::Active,
            guard: GuardState::initial(label),
            created_ms: now_ms,
            session: req.session,
            task: req.task,
            metadata: req.metadata,
            superseded_by: None,
            folded: Default::default(),
            version: Default::default(),
        };
        Ok(AdmittedWrite { item })
    }

    /// M2 at the tool boundary: admit the output of `tool` called by `caller` with `args` and the
    /// retrieved `inputs` passed in. The output is written by the tool. Its label is the meet of
    /// every argument's label and every input's label with:
    ///
    /// * the tool's level (trusted only if allow-listed) when the tool vouches for the output
    ///   (`vouch`: the caller *is* the tool, or the output carries the tool's verified signature);
    /// * otherwise also the caller's label at its session floor: a caller-reported output is the
    ///   caller's claim about what the tool said, so a source can never create anything above
    ///   untrusted and a tainted agent session nothing above its floor.
    ///
    /// An argument's label is the caller's unless every declared source carries the value, in
    /// which case it is the meet of those sources'; any input carrying the value also taints it.
    /// `tool_observed` is what the tool principal was handed in any of its sessions (the engine
    /// meets them): an output the tool vouches for is at most its floor.
    #[allow(clippy::too_many_arguments)]
    pub fn admit_tool_output(
        &self,
        caller: &Principal,
        caller_observed: &Observed,
        tool: &Principal,
        tool_observed: &Observed,
        vouch: Vouch,
        args: &[ToolArg],
        arg_sources: &[&MemoryItem],
        inputs: &[&MemoryItem],
        tenant: &TenantId,
        namespace: Namespace,
        output: String,
        id: ItemId,
        now_ms: u64,
    ) -> Result<AdmittedWrite, WriteError> {
        if tool.kind != PrincipalKind::Tool {
            return Err(WriteError::NotATool(tool.id.clone()));
        }
        if caller.tenant != *tenant {
            return Err(WriteError::WrongTenant(caller.id.clone(), tenant.clone()));
        }
        if vouch == Vouch::Writer && caller.id != tool.id {
            return Err(WriteError::NotATool(caller.id.clone()));
        }
        let caller_label = self.bind(caller.origin()).at_most(self.floor(caller_observed));
        let mut label = self.bind(tool.origin());
        if vouch == Vouch::Writer {
            // The tool reports its own output from its own session: no side door around that
            // session's taint (issue 34.3) — at most its floor, as its plain writes are.
            label = label.at_most(self.floor(caller_observed));
        }
        if matches!(vouch, Vouch::Writer | Vouch::Signature) {
            // Whatever the route, a tool that was handed untrusted content in any session
            // vouches for nothing above it (issue 34.3: its signed output relayed by another
            // caller, or its report from a fresh session id).
            label = label.at_most(self.floor(tool_observed));
        }
        if vouch == Vouch::CallerReported {
            // The tool did not vouch: the output is only as good as whoever reported it.
            label = label.meet(caller_label);
        }
        let find = |id: &ItemId| arg_sources.iter().chain(inputs).find(|i| i.id == *id).copied();
        for arg in args {
            let v = NormValue::new(arg.kind, &arg.value).map_err(|error| WriteError::BadArgument { key: arg.key.clone(), error })?;
            let mut arg_label = if arg.sources.is_empty() { caller_label } else { Label::bind(Origin::User) };
            for s in &arg.sources {
                let item = find(s).ok_or(WriteError::ParentNotReadable(*s))?;
                arg_label = arg_label.meet(item.label);
                if !item.folded().carries(&v) {
                    // A declared source that does not carry the value is not believed.
                    arg_label = arg_label.meet(caller_label);
                }
            }
            for i in inputs.iter().filter(|i| i.folded().carries(&v)) {
                arg_label = arg_label.meet(i.label);
            }
            label = label.meet(arg_label);
        }
        for i in inputs {
            label = label.meet(i.label);
        }
        let mut parents: Vec<ParentRef> = Vec::new();
        let mut resolved: Vec<&MemoryItem> = Vec::new();
        for item in inputs.iter().chain(arg_sources) {
            if !parents.iter().any(|p| p.id == item.id) {
                parents.push(ParentRef { id: item.id, kind: EdgeKind::DerivedFrom });
                resolved.push(item);
            }
        }
        let mut req = WriteRequest::new(namespace, output, Route::ToolObservation);
        req.parents = parents;
        // The caller must be able to read what it passes in; the output's readers follow the inputs.
        for item in &resolved {
            if item.tenant != *tenant || !item.readable_by(&caller.id) {
                return Err(WriteError::ParentNotReadable(item.id));
            }
        }
        let base = label;
        let mut tool_as_writer = tool.clone();
        tool_as_writer.tenant = tenant.clone();
        // Another caller's session taints the output only through what the arguments carry; the
        // tool's own session (it is the caller) taints it as any write of that session, with
        // `seen_in_session` edges to what the session was handed.
        let own_session = match vouch {
            Vouch::Writer => caller_observed.clone().meet(tool_observed),
            Vouch::Signature => tool_observed.clone(),
            Vouch::CallerReported => Observed::clean(),
        };
        let mut admitted = self.admit(&tool_as_writer, tool.origin(), base, tenant, req, &resolved, &own_session, id, now_ms)?;
        // Readers of a tool output: the caller's view, not the tool's, and never wider than what
        // the caller's session could read (its arguments may carry it).
        if let Readers::Only(s) = &mut admitted.item.scope.readers {
            s.insert(caller.id.clone());
        }
        admitted.item.scope.readers = admitted.item.scope.readers.intersect(caller_observed.readers());
        if let Readers::Only(s) = &mut admitted.item.scope.readers
            && s.is_empty()
        {
            s.insert(caller.id.clone());
        }
        admitted.item.scope.visibility = if admitted.item.scope.readers == Readers::All { Visibility::Shared } else { Visibility::Private };
        // A tool output is addressed to its caller's view only (its readers).
        admitted.item.audience = None;
        // The caller's session bounds the output for good, not only now (issue 34.5).
        if let Some(c) = session_ceiling(caller_observed.readers(), &caller.id) {
            let bound = admitted.item.ceiling.take().map_or(c.clone(), |own| own.intersect(&c));
            admitted.item.ceiling = Some(bound);
        }
        if vouch == Vouch::CallerReported && caller.id != tool.id {
            // The claim is the caller's: the gate counts its support and independence by the
            // caller, never by the tool's domain (one principal cannot manufacture a second one).
            admitted.item.reported_by = Some(caller.id.clone());
        }
        debug_assert!(admitted.item.label <= base);
        debug_assert!(vouch != Vouch::Writer || admitted.item.label.integrity() <= self.floor(caller_observed), "a tool's own report is never above its session's floor");
        debug_assert!(vouch != Vouch::CallerReported || admitted.item.label.integrity() <= caller_label.integrity(), "a caller-reported output is never above its caller");
        Ok(admitted)
    }

    /// Admit an attestation of `value` for `key` by `principal`. Its label is the principal's
    /// integrity met with its declared sources' and its session's floor (`observed`); below
    /// trusted it is kept for audit and never counts.
    #[allow(clippy::too_many_arguments)]
    pub fn admit_attestation(
        &self,
        principal: &Principal,
        observed: &Observed,
        key: &str,
        value: &str,
        kind: ValueKind,
        sources: &[&MemoryItem],
        now_ms: u64,
    ) -> Result<AdmittedAttestation, WriteError> {
        let v = NormValue::new(kind, value).map_err(|error| WriteError::BadArgument { key: key.to_owned(), error })?;
        if key.is_empty() || key.len() > METADATA_FIELD_BYTES_MAX {
            return Err(WriteError::MetadataTooLarge);
        }
        let mut label = self.bind(principal.origin()).at_most(self.floor(observed));
        for s in sources {
            if s.tenant != principal.tenant || !s.readable_by(&principal.id) {
                return Err(WriteError::ParentNotReadable(s.id));
            }
            label = label.meet(s.label);
        }
        Ok(AdmittedAttestation {
            attestation: Attestation {
                tenant: principal.tenant.clone(),
                attester: principal.id.clone(),
                independence: match self.config.independence {
                    Independence::DomainAware => principal.independence_key(),
                    Independence::Naive => format!("principal:{}", principal.id),
                },
                key: key.to_owned(),
                value: v,
                label: label.integrity(),
                sources: sources.iter().map(|s| s.id).collect(),
                created_ms: now_ms,
            },
        })
    }

    /// The independent trusted corroborators of (key, value), excluding the writers of the items
    /// that push it (no self-corroboration) and attestations derived from those items.
    pub fn independent_attesters(
        &self,
        attestations: &[Attestation],
        tenant: &TenantId,
        key: &str,
        value: &NormValue,
        pushers: &[&MemoryItem],
    ) -> Vec<String> {
        let mut counted: BTreeSet<String> = BTreeSet::new();
        for a in attestations {
            let self_corroboration = pushers.iter().any(|p| *p.voucher() == a.attester || a.sources.contains(&p.id));
            if a.tenant == *tenant && a.key == key && a.value == *value && a.label == Integrity::Trusted && !self_corroboration {
                counted.insert(match self.config.independence {
                    Independence::DomainAware => a.independence.clone(),
                    Independence::Naive => format!("principal:{}", a.attester),
                });
            }
        }
        counted.into_iter().collect()
    }

}
