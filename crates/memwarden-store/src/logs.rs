//! One verdict log per tenant: each its own hash chain, Merkle tree, checkpoints, proofs and
//! witness (and, later, the PostgreSQL shard key). A tenant's log opens with a genesis entry
//! naming the store and the tenant, so a tree head commits to whose log it is.
//!
//! Beside them, the **global view** (`log_len`, `log_root`, `log_entries`, proofs and
//! checkpoints without a tenant): every tenant's leaves in commit order (`gseq`), in one
//! Merkle tree. It exists so callers of the whole-store API keep working while they move to the
//! per-tenant API; for a store with one tenant its indexes are that tenant's.

use std::collections::HashMap;

use ed25519_dalek::SigningKey;
use memwarden_log::{Checkpoint, CompactTree, Hash, ProofError, SignedCheckpoint, VerdictLog, consistency_proof, inclusion_proof, merkle_root};

/// The tenant name of the global view's checkpoints (no tenant id is empty).
pub const GLOBAL: &str = "";

/// One tenant's log in memory.
#[derive(Debug, Default)]
pub struct TenantLog {
    /// The log.
    pub log: VerdictLog,
    /// Size of its last stored checkpoint.
    pub last_checkpoint: u64,
}

/// Every tenant's leaves in commit order, as one tree.
#[derive(Debug, Default)]
pub struct GlobalView {
    leaves: Vec<Hash>,
    tree: CompactTree,
    /// Size of its last stored checkpoint.
    pub last_checkpoint: u64,
}

impl GlobalView {
    /// Append a leaf.
    pub fn push(&mut self, leaf: Hash) {
        self.leaves.push(leaf);
        self.tree.push(leaf);
    }
    /// Number of leaves.
    pub fn len(&self) -> u64 {
        self.leaves.len() as u64
    }
    /// Whether it has no leaves.
    pub fn is_empty(&self) -> bool {
        self.leaves.is_empty()
    }
    /// The Merkle root.
    pub fn root(&self) -> Hash {
        self.tree.root()
    }
    /// The last leaf (zeros when empty).
    pub fn head(&self) -> Hash {
        self.leaves.last().copied().unwrap_or([0; 32])
    }
    fn prefix(&self, size: u64) -> Result<&[Hash], ProofError> {
        usize::try_from(size).ok().and_then(|n| self.leaves.get(..n)).ok_or(ProofError::SizeBeyondLog { size, len: self.len() })
    }
    /// Inclusion proof of leaf `index` in the tree of size `size`.
    pub fn inclusion_proof(&self, index: u64, size: u64) -> Result<Vec<Hash>, ProofError> {
        inclusion_proof(self.prefix(size)?, index)
    }
    /// Consistency proof between two sizes.
    pub fn consistency_proof(&self, old: u64, new: u64) -> Result<Vec<Hash>, ProofError> {
        if old > new {
            return Err(ProofError::SizesOutOfOrder { old_size: old, new_size: new });
        }
        consistency_proof(self.prefix(new)?, old)
    }
    /// A signed checkpoint of the current tree.
    pub fn checkpoint(&self, key: &SigningKey, time_ms: u64) -> SignedCheckpoint {
        Checkpoint { size: self.len(), root: self.root(), head: self.head(), time_ms }.sign(key)
    }
    /// The root and head of the first `size` leaves.
    pub fn at(&self, size: u64) -> Option<(Hash, Hash)> {
        let p = self.prefix(size).ok()?;
        Some((merkle_root(p), p.last().copied().unwrap_or([0; 32])))
    }
}

/// All logs of a store.
#[derive(Debug, Default)]
pub struct Logs {
    /// Each tenant's log.
    pub tenants: HashMap<String, TenantLog>,
    /// The global view.
    pub global: GlobalView,
}

impl Logs {
    /// (length, head) of a tenant's log; `None` when it has none yet.
    pub fn chain(&self, tenant: &str) -> Option<(u64, Hash)> {
        self.tenants.get(tenant).map(|t| (t.log.len(), t.log.head()))
    }
    /// A tenant's log, if it has one.
    pub fn of(&self, tenant: &str) -> Option<&VerdictLog> {
        self.tenants.get(tenant).map(|t| &t.log)
    }
}
