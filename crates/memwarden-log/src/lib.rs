//! The memwarden **verdict log**: an append-only, tamper-evident log of every
//! write, elevation, grant use and decision made by memwarden.
//!
//! Each [`Entry`] is chained to the one before by `prev` (the previous entry's
//! leaf hash), and all leaves form an RFC 6962 Merkle tree, so that:
//!
//! * a [`SignedCheckpoint`] (size, root, head, signed with Ed25519) commits to
//!   the whole log up to its size;
//! * an inclusion proof shows one entry is in a checkpointed log, and a
//!   consistency proof shows a later log extends an earlier one (RFC 9162
//!   verification algorithms);
//! * [`verify_log`] re-checks a stored log end to end and names the first bad
//!   entry when something was changed, removed, swapped, inserted or cut.
//!
//! The crate does no I/O: entries are encoded to bytes for somebody else to
//! store, and time is passed in as `time_ms`.
//!
//! ```
//! use ed25519_dalek::SigningKey;
//! use memwarden_log::{EntryKind, VerdictLog, verify_inclusion, verify_log};
//!
//! let key = SigningKey::from_bytes(&[7u8; 32]);
//! let mut log = VerdictLog::new();
//! let mut stored: Vec<Vec<u8>> = Vec::new(); // stands in for a real store
//! for (i, body) in [&b"genesis"[..], b"write m1", b"decision allow"].iter().enumerate() {
//!     let kind = if i == 0 { EntryKind::Genesis } else { EntryKind::Write };
//!     let entry = log.prepare(kind, 1_700_000_000_000 + i as u64, body.to_vec());
//!     log.append(&entry)?;
//!     stored.push(entry.encode());
//! }
//! let checkpoint = log.checkpoint(&key, 1_700_000_000_100);
//! checkpoint.verify(&key.verifying_key())?;
//!
//! // Entry 1 is in the checkpointed tree.
//! let proof = log.inclusion_proof(1, checkpoint.checkpoint.size)?;
//! verify_inclusion(&log.leaves()[1], 1, 3, &proof, &checkpoint.checkpoint.root)?;
//!
//! // The stored log verifies; a changed body is caught and named.
//! let expected = Some((log.len(), log.head()));
//! let report = verify_log(&stored, &[checkpoint.clone()], &key.verifying_key(), expected);
//! assert!(report.is_ok());
//! let last = stored[1].len() - 1;
//! stored[1][last] ^= 1;
//! let report = verify_log(&stored, &[checkpoint], &key.verifying_key(), expected);
//! assert_eq!(report.first_bad_index(), Some(1));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

mod checkpoint;
mod entry;
mod log;
mod merkle;
mod verify;

pub use checkpoint::{
    CHECKPOINT_DOMAIN, Checkpoint, HEAD_DOMAIN, HEAD_NAME_BYTES_MAX, SignedCheckpoint, head_signing_bytes,
    sign_head, verify_head,
};
pub use entry::{Entry, EntryKind};
pub use log::VerdictLog;
pub use merkle::{
    CompactTree, Hash, consistency_proof, empty_root, inclusion_proof, leaf_hash, merkle_root,
    node_hash, verify_consistency, verify_inclusion,
};
pub use verify::{Problem, VerifyReport, verify_log};

/// Why a Merkle proof could not be made or did not verify.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProofError {
    /// The leaf index is not below the tree size.
    #[error("leaf index {index} is out of range for a tree of size {size}")]
    IndexOutOfRange {
        /// The leaf index asked for.
        index: u64,
        /// The tree size.
        size: u64,
    },
    /// A tree size larger than the log was asked for.
    #[error("tree size {size} is beyond the log's {len} entries")]
    SizeBeyondLog {
        /// The size asked for.
        size: u64,
        /// The log's length.
        len: u64,
    },
    /// The old size is larger than the new size.
    #[error("old size {old_size} is larger than new size {new_size}")]
    SizesOutOfOrder {
        /// The old tree size.
        old_size: u64,
        /// The new tree size.
        new_size: u64,
    },
    /// The proof has the wrong number of hashes for the sizes given.
    #[error("proof has {found} hashes, expected {expected}")]
    WrongProofLength {
        /// How many the sizes call for.
        expected: usize,
        /// How many were given.
        found: usize,
    },
    /// The root computed from the proof differs from the (new) root given.
    #[error("the proof does not lead to the given root")]
    RootMismatch,
    /// The old root computed from a consistency proof differs from the old
    /// root given.
    #[error("the consistency proof does not lead to the given old root")]
    OldRootMismatch,
}

/// Why bytes are not a valid encoded [`Entry`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// Shorter than the fixed header.
    #[error(
        "{len} bytes is shorter than the {} byte entry header",
        Entry::HEADER_BYTES
    )]
    TooShort {
        /// Input length.
        len: usize,
    },
    /// Does not start with `b"MWL1"`.
    #[error("bad magic (not an MWL1 entry)")]
    BadMagic,
    /// The kind tag is not a known [`EntryKind`].
    #[error("unknown entry kind tag {tag}")]
    UnknownKind {
        /// The tag found.
        tag: u8,
    },
    /// The declared body length is over [`Entry::BODY_BYTES_MAX`].
    #[error("body length {len} is over the maximum of {max} bytes")]
    BodyTooLarge {
        /// The declared body length.
        len: u32,
        /// The maximum.
        max: usize,
    },
    /// Fewer body bytes than declared.
    #[error("body truncated: {found} of {expected} bytes")]
    Truncated {
        /// The declared body length.
        expected: u32,
        /// Body bytes present.
        found: usize,
    },
    /// Bytes after the declared body.
    #[error("{extra} trailing bytes after the entry")]
    TrailingBytes {
        /// How many.
        extra: usize,
    },
}

/// Why [`VerdictLog::append`] refused an entry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AppendError {
    /// The entry's index is not the log's length.
    #[error("entry index {found} does not continue the log (expected {expected})")]
    IndexMismatch {
        /// The log's length.
        expected: u64,
        /// The entry's index.
        found: u64,
    },
    /// The entry's `prev` is not the log's head.
    #[error("entry prev {} is not the log head {}", hex::encode(.found), hex::encode(.expected))]
    PrevMismatch {
        /// The log's head.
        expected: Hash,
        /// The entry's `prev`.
        found: Hash,
    },
    /// The body is over [`Entry::BODY_BYTES_MAX`].
    #[error("body of {len} bytes is over the maximum of {max}")]
    BodyTooLarge {
        /// The body length.
        len: usize,
        /// The maximum.
        max: usize,
    },
}

/// Why a [`SignedCheckpoint`] did not verify.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CheckpointError {
    /// The checkpoint names a key other than the trusted one.
    #[error("checkpoint is signed by an untrusted key")]
    UntrustedKey,
    /// The signature is not valid for the checkpoint's contents.
    #[error("checkpoint signature is invalid")]
    BadSignature,
}
