//! `CanRead`: the hard permission filter. One pure function, used by retrieval filtering
//! ([`crate::rank`]) and by by-id reads ([`crate::graph::LineageGraph::can_read`]) alike.

use crate::model::AncestrySummary;
use memwarden_core::ids::PrincipalId;
use memwarden_core::item::{Scope, Visibility};
use serde::{Deserialize, Serialize};

/// Why a read was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, thiserror::Error)]
#[serde(rename_all = "snake_case")]
pub enum DenyReason {
    /// No such record.
    #[error("no such record")]
    Unknown,
    /// The record was erased.
    #[error("the record was erased")]
    Erased,
    /// The record is revoked (revoked records are never readable).
    #[error("the record is revoked")]
    Revoked,
    /// An item on the record's path (a directly referenced source or any further ancestor) is
    /// revoked.
    #[error("an ancestor of the record is revoked")]
    RevokedAncestor,
    /// A tightening propagation (revocation, poison flag) that may reach the record is still
    /// queued; reads of possibly affected records wait for it.
    #[error("a revocation or poison flag is still propagating")]
    PropagationPending,
    /// The reader is neither the owner nor a named reader of the record.
    #[error("the reader is outside the record's permission scope")]
    NotInScope,
    /// The reader is outside the scope of an item on the record's path.
    #[error("the reader is outside the permission scope of an ancestor")]
    NotInAncestorScope,
}

/// What `can_read` needs to know about a record. All of it is stored with the record, so a
/// database backend can evaluate the same function on a row.
#[derive(Debug, Clone, Copy)]
pub struct ReadFacts<'a> {
    /// The record's own permission scope.
    pub scope: &'a Scope,
    /// Its ancestry summary (for the path ceiling and revoked ancestors).
    pub summary: &'a AncestrySummary,
    /// Erased (a tombstone).
    pub erased: bool,
    /// A tightening propagation is queued that may still reach it.
    pub pending: bool,
}

/// `CanRead(a, m)`: visibility, permission scope, the requesting principal, and the record's
/// sources. The paper checks the record's scope and its *directly* referenced sources; because the
/// summary carries the intersection of every path item's readers (the ceiling) and a revoked flag,
/// this checks the whole ancestry, at O(1) in its depth, which implies the paper's check.
/// `None` (an unknown record) is denied.
pub fn can_read(reader: &PrincipalId, facts: Option<ReadFacts<'_>>) -> Result<(), DenyReason> {
    let Some(f) = facts else { return Err(DenyReason::Unknown) };
    if f.erased {
        return Err(DenyReason::Erased);
    }
    if f.scope.visibility == Visibility::Revoked {
        return Err(DenyReason::Revoked);
    }
    if f.summary.revoked {
        return Err(DenyReason::RevokedAncestor);
    }
    if f.pending {
        return Err(DenyReason::PropagationPending);
    }
    if !(f.scope.owner == *reader || f.scope.readers.admits(reader)) {
        return Err(DenyReason::NotInScope);
    }
    if !f.summary.admits(reader) {
        return Err(DenyReason::NotInAncestorScope);
    }
    Ok(())
}
