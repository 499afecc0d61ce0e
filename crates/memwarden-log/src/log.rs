//! In-memory verdict log state.

use ed25519_dalek::SigningKey;

use crate::checkpoint::{Checkpoint, SignedCheckpoint};
use crate::entry::{Entry, EntryKind};
use crate::merkle::{self, CompactTree, Hash, to_usize};
use crate::{AppendError, ProofError};

/// In-memory log state: every leaf hash (32 B per entry) plus a
/// [`CompactTree`] for the current root.
///
/// It does no I/O: the caller stores each encoded entry (and checkpoints)
/// and, after a restart, rebuilds this state with [`VerdictLog::from_leaves`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VerdictLog {
    leaves: Vec<Hash>,
    tree: CompactTree,
}

impl VerdictLog {
    /// An empty log; its head is `[0; 32]`.
    pub fn new() -> Self {
        Self::default()
    }

    /// Rebuild the state from the leaf hashes of the stored entries, in
    /// order (for example after reopening a store). The leaves are trusted:
    /// run `verify_log` on the stored entries to check them.
    pub fn from_leaves(leaves: Vec<Hash>) -> Self {
        let tree = leaves.iter().copied().collect();
        Self { leaves, tree }
    }

    /// Number of entries.
    pub fn len(&self) -> u64 {
        self.leaves.len() as u64
    }

    /// True when there are no entries.
    pub fn is_empty(&self) -> bool {
        self.leaves.is_empty()
    }

    /// Leaf hash of the last entry, or `[0; 32]` when empty: the `prev` of
    /// the next entry.
    pub fn head(&self) -> Hash {
        self.leaves.last().copied().unwrap_or([0u8; 32])
    }

    /// Merkle root of all leaves (O(log n)).
    pub fn root(&self) -> Hash {
        self.tree.root()
    }

    /// Every leaf hash, in order.
    pub fn leaves(&self) -> &[Hash] {
        &self.leaves
    }

    /// The next entry to append: `index = len()`, `prev = head()`.
    pub fn prepare(&self, kind: EntryKind, time_ms: u64, body: Vec<u8>) -> Entry {
        Entry {
            index: self.len(),
            prev: self.head(),
            time_ms,
            kind,
            body,
        }
    }

    /// Append `entry` after checking that it continues the log (`index ==
    /// len()`, `prev == head()`) and that its body is within
    /// [`Entry::BODY_BYTES_MAX`]. Returns its leaf hash. On error nothing
    /// changes.
    pub fn append(&mut self, entry: &Entry) -> Result<Hash, AppendError> {
        if entry.index != self.len() {
            return Err(AppendError::IndexMismatch {
                expected: self.len(),
                found: entry.index,
            });
        }
        if entry.prev != self.head() {
            return Err(AppendError::PrevMismatch {
                expected: self.head(),
                found: entry.prev,
            });
        }
        if entry.body.len() > Entry::BODY_BYTES_MAX {
            return Err(AppendError::BodyTooLarge {
                len: entry.body.len(),
                max: Entry::BODY_BYTES_MAX,
            });
        }
        let leaf = entry.leaf();
        self.leaves.push(leaf);
        self.tree.push(leaf);
        Ok(leaf)
    }

    /// The first `size` leaves, or an error when `size > len()`.
    fn prefix(&self, size: u64) -> Result<&[Hash], ProofError> {
        match to_usize(size) {
            Some(n) if n <= self.leaves.len() => Ok(&self.leaves[..n]),
            _ => Err(ProofError::SizeBeyondLog {
                size,
                len: self.len(),
            }),
        }
    }

    /// Inclusion proof of entry `index` in the tree of the first `size`
    /// leaves (O(size) hashing).
    pub fn inclusion_proof(&self, index: u64, size: u64) -> Result<Vec<Hash>, ProofError> {
        merkle::inclusion_proof(self.prefix(size)?, index)
    }

    /// Consistency proof from the tree of the first `old_size` leaves to the
    /// tree of the first `new_size` leaves (O(new_size) hashing).
    pub fn consistency_proof(&self, old_size: u64, new_size: u64) -> Result<Vec<Hash>, ProofError> {
        if old_size > new_size {
            return Err(ProofError::SizesOutOfOrder { old_size, new_size });
        }
        merkle::consistency_proof(self.prefix(new_size)?, old_size)
    }

    /// Merkle root of the first `size` leaves (O(log n) for the full size,
    /// O(size) otherwise).
    pub fn root_at(&self, size: u64) -> Result<Hash, ProofError> {
        if size == self.len() {
            return Ok(self.root());
        }
        Ok(merkle::merkle_root(self.prefix(size)?))
    }

    /// An unsigned checkpoint of the current state.
    pub fn checkpoint_unsigned(&self, time_ms: u64) -> Checkpoint {
        Checkpoint {
            size: self.len(),
            root: self.root(),
            head: self.head(),
            time_ms,
        }
    }

    /// A checkpoint of the current state, signed with `key`.
    pub fn checkpoint(&self, key: &SigningKey, time_ms: u64) -> SignedCheckpoint {
        self.checkpoint_unsigned(time_ms).sign(key)
    }
}
