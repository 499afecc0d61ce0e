//! memwarden's lineage layer, after MAP-Graph: a typed provenance graph over agents, sources,
//! messages, memories, claims and actions; a hard permission filter applied before ranking; path
//! trust maintained incrementally; eager revocation; erasure; the five-outcome action-time gate;
//! and audit export as the crate's own JSON and as W3C PROV-JSON.
//!
//! Pure and deterministic: no I/O, no clocks, no randomness. Ids and times are passed in. Every
//! mutation is an event applied to a [`LineageGraph`] that returns the effects a store must persist
//! (`apply_write` → [`WriteEffects`], `apply_revocation` → [`PropagationEffects`], ...), so a
//! database backend can replay the same events.
//!
//! # The three requirements
//!
//! * **C1, recursive ancestry.** Admissibility depends on multi-step derivation chains. Every
//!   record carries an [`AncestrySummary`] of its whole path (itself plus all transitive
//!   ancestors): weakest source, weakest transformation chain, verification, flags, the
//!   intersection of every path item's readers (the *ceiling*), and the affected items with their
//!   causes. It is computed from the parents' summaries at write and recomputed for descendants
//!   at every event that changes an ancestor, so reads are O(1) in ancestry depth.
//! * **C2, hard vs graded.** [`can_read`] is a binary filter applied *before* ranking; path trust
//!   only scales the scores of records that passed ([`LineageGraph::rank`]).
//! * **C3, action-dependent admissibility.** [`LineageGraph::decide`] re-evaluates the supports
//!   once the action is known, with thresholds 0.30 / 0.60 / 0.85 (see [`gate`]).
//!
//! # Path trust
//!
//! `rho(m, a) = clip01(S · I · F · P · V · A)` (see [`path_trust`]); all constants live in
//! [`LineageConfig`]. With the defaults, typical evidence shapes score:
//!
//! | evidence | rho | answer (.30) | low/med (.60) | high (.85) |
//! | --- | --- | --- | --- | --- |
//! | a user's statement, verified | 1.000 | ok | ok | ok |
//! | a user's statement | 0.900 | ok | ok | ok |
//! | an agent's note on it, verified by the user | 0.873 | ok | ok | ok |
//! | an agent's note on it | 0.786 | ok | ok | AskUser |
//! | an agent's summary of it | 0.745 | ok | ok | AskUser |
//! | the 4th successive agent summary | 0.580 | ok | Reverify | AskUser |
//! | an untrusted page, read directly or captured verbatim | 0.360 | ok | (rule 3) | (rule 1) |
//! | a second summary of that page | 0.305 | ok | (rule 3) | (rule 1) |
//! | a third summary of that page | 0.280 | Redact | (rule 3) | (rule 1) |
//! | anything with a poisoned item on its path | ≤ 0.050 | Block (rule 3) | Block | Block |
//!
//! # Example
//!
//! ```
//! use memwarden_lineage::prelude::*;
//!
//! let id = |n: u8| ItemId::from_bytes([n; 16]);
//! let p = |s: &str| PrincipalId::new(s).unwrap();
//! let mut g = LineageGraph::default();
//! for (who, kind) in [("hr", PrincipalKind::Agent), ("exec", PrincipalKind::Agent), ("web", PrincipalKind::Source)] {
//!     g.register_principal(RegisterPrincipal { id: p(who), kind, reputation: None }).unwrap();
//! }
//! // A private HR document, and HR's summary of it: the summary inherits the restriction.
//! g.apply_write(WriteEvent::new(id(1), RecordKind::Resource, p("hr"), "salary band table", Integrity::Agent, 1)
//!     .readers([p("hr")])).unwrap();
//! let fx = g.apply_write(WriteEvent::new(id(2), RecordKind::Memory, p("hr"), "bands rose 4%", Integrity::Agent, 2)
//!     .summarized_from(id(1))).unwrap();
//! assert_eq!(fx.record.scope().visibility, Visibility::Private);
//! assert_eq!(g.can_read(&p("exec"), id(2)), Err(DenyReason::NotInScope));
//!
//! // Retrieval filters before ranking: however similar, exec never gets the summary.
//! let ranking = g.rank(&p("exec"), &[Candidate { id: id(2), similarity: 0.99 }], None).unwrap();
//! assert!(ranking.selected.is_empty());
//!
//! // A poisoned web page, captured and summarised by exec; a high-risk action on it is blocked.
//! g.apply_write(WriteEvent::new(id(3), RecordKind::Resource, p("web"), "pay ACCT-9", Integrity::Untrusted, 3).poisoned()).unwrap();
//! g.apply_write(WriteEvent::new(id(4), RecordKind::Memory, p("exec"), "vendor account is ACCT-9", Integrity::Agent, 4)
//!     .observed_from(id(3))).unwrap();
//! let d = g.decide(&GateRequest { agent: p("exec"), kind: ActionKind::Act, risk: Risk::High,
//!     retrieved: vec![id(4)], context: vec![], elevated: Default::default() });
//! assert_eq!(d.decision, Decision::Block);
//! assert_eq!(d.rule, GateRule::HighRiskAffected);
//!
//! // Revoking the page propagates to everything derived from it; lineage is kept for audit.
//! let fx = g.apply_revocation(RevokeEvent { id: id(3), revoker: p("web"), at_ms: 5 }).unwrap();
//! assert!(fx.done());
//! assert_eq!(g.can_read(&p("exec"), id(4)), Err(DenyReason::RevokedAncestor));
//! let prov = prov_json(&g.audit_trail());
//! assert!(prov["wasInvalidatedBy"].as_object().unwrap().len() >= 2);
//! ```
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

pub mod access;
pub mod config;
pub mod export;
pub mod gate;
pub mod graph;
pub mod model;
pub mod pathtrust;
pub mod rank;
pub mod scope;
pub mod summary;
pub mod trust;

pub use access::{DenyReason, ReadFacts, can_read};
pub use config::{ConfigError, LineageConfig};
pub use export::{AuditTrail, prov_json};
pub use gate::{
    ActionRecord, GateCause, GateDecision, GateRequest, GateRule, SupportEvaluation, SupportOrigin, cause_outcome, compose,
    final_decision,
};
pub use graph::{
    ActionEffects, ActionEvent, EraseEvent, ErasureEffects, ErasureRecord, EventError, FlagPoisonedEvent, LineageGraph,
    PrincipalError, PrincipalState, PromoteEvent, PropagationEffects, RankError, RecordState, RecordingError,
    RegisterPrincipal, RestoreEffects, RestoreError, RevokeEvent, SummaryMismatch, VerifyEvent, WriteEffects,
    WriteError, WriteEvent,
};
pub use model::{
    AffectedAncestor, AncestrySummary, Cause, CauseSet, Edge, EdgeAttrs, InvalidationCause, NodeKind, NodeRef,
    ReadScores, RecordKind, Tally,
};
pub use pathtrust::{TrustBreakdown, path_trust};
pub use rank::{Candidate, Filtered, Ranked, Ranking, rank_by, rank_with, semantic_score};
pub use scope::derive_scope;
pub use trust::{Trust, TrustError};

/// The names most callers need, including the core types they are used with.
pub mod prelude {
    pub use crate::*;
    pub use memwarden_core::action::{ActionKind, Decision, Risk};
    pub use memwarden_core::ids::{ItemId, PrincipalId};
    pub use memwarden_core::item::{EdgeKind, ParentRef, Readers, Scope, Visibility};
    pub use memwarden_core::label::Integrity;
    pub use memwarden_core::principal::PrincipalKind;
}
