//! Log entries and their canonical binary encoding.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::DecodeError;
use crate::merkle::{Hash, leaf_hash};

/// Kinds of log entry.
///
/// The `u8` tags are stable on disk: never renumber or reuse one; add new
/// kinds at the end.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[repr(u8)]
pub enum EntryKind {
    /// The first entry of a log.
    Genesis = 0,
    /// A principal (user, agent, service) was registered or changed.
    Principal = 1,
    /// A memory write.
    Write = 2,
    /// A memory derived from other memories.
    Derive = 3,
    /// A tool call whose output was recorded.
    ToolCall = 4,
    /// An attestation about a memory or a principal.
    Attestation = 5,
    /// A trust or privilege elevation.
    Elevation = 6,
    /// A grant was issued.
    GrantIssued = 7,
    /// A grant was used.
    GrantUsed = 8,
    /// A policy decision (allow / deny / quarantine ...).
    Decision = 9,
    /// A revocation (of a grant, key or memory).
    Revocation = 10,
    /// An erasure (the content is gone; the log keeps that it happened).
    Erasure = 11,
    /// A promotion of a memory to a more trusted tier.
    Promotion = 12,
    /// Feedback on a memory or decision.
    Feedback = 13,
    /// A checkpoint was taken.
    Checkpoint = 14,
    /// An administrative action.
    Admin = 15,
    /// A session was handed memory that lowered its floor (session taint).
    SessionTaint = 16,
    /// A lineage-layer event: `read_by` edges of a search, a revocation's propagation, an
    /// action-gate decision (ids and scores only, never memory text).
    Lineage = 17,
}

impl EntryKind {
    /// Every kind, in tag order.
    pub const ALL: [EntryKind; 18] = [
        EntryKind::Genesis,
        EntryKind::Principal,
        EntryKind::Write,
        EntryKind::Derive,
        EntryKind::ToolCall,
        EntryKind::Attestation,
        EntryKind::Elevation,
        EntryKind::GrantIssued,
        EntryKind::GrantUsed,
        EntryKind::Decision,
        EntryKind::Revocation,
        EntryKind::Erasure,
        EntryKind::Promotion,
        EntryKind::Feedback,
        EntryKind::Checkpoint,
        EntryKind::Admin,
        EntryKind::SessionTaint,
        EntryKind::Lineage,
    ];

    /// The snake_case name (the same as its serde form).
    pub fn as_str(self) -> &'static str {
        match self {
            EntryKind::Genesis => "genesis",
            EntryKind::Principal => "principal",
            EntryKind::Write => "write",
            EntryKind::Derive => "derive",
            EntryKind::ToolCall => "tool_call",
            EntryKind::Attestation => "attestation",
            EntryKind::Elevation => "elevation",
            EntryKind::GrantIssued => "grant_issued",
            EntryKind::GrantUsed => "grant_used",
            EntryKind::Decision => "decision",
            EntryKind::Revocation => "revocation",
            EntryKind::Erasure => "erasure",
            EntryKind::Promotion => "promotion",
            EntryKind::Feedback => "feedback",
            EntryKind::Checkpoint => "checkpoint",
            EntryKind::Admin => "admin",
            EntryKind::SessionTaint => "session_taint",
            EntryKind::Lineage => "lineage",
        }
    }

    /// The kind with this snake_case name, if any (inverse of [`EntryKind::as_str`]).
    pub fn from_name(name: &str) -> Option<EntryKind> {
        Self::ALL.into_iter().find(|k| k.as_str() == name)
    }

    /// The on-disk tag.
    pub fn tag(self) -> u8 {
        self as u8
    }
}

impl TryFrom<u8> for EntryKind {
    type Error = DecodeError;

    fn try_from(tag: u8) -> Result<Self, Self::Error> {
        Self::ALL
            .get(usize::from(tag))
            .copied()
            .ok_or(DecodeError::UnknownKind { tag })
    }
}

impl From<EntryKind> for u8 {
    fn from(kind: EntryKind) -> u8 {
        kind.tag()
    }
}

impl fmt::Display for EntryKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One log entry.
///
/// `prev` chains entries: it is the leaf hash ([`Entry::leaf`]) of the entry
/// before, or `[0; 32]` for the first entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// Position in the log, from 0.
    pub index: u64,
    /// Leaf hash of the previous entry (`[0; 32]` for index 0).
    pub prev: Hash,
    /// Time in milliseconds since the Unix epoch, supplied by the caller.
    pub time_ms: u64,
    /// What happened.
    pub kind: EntryKind,
    /// Opaque payload (the caller's canonical encoding of the event).
    pub body: Vec<u8>,
}

impl Entry {
    /// The largest body accepted, in bytes (1 MiB).
    pub const BODY_BYTES_MAX: usize = 1 << 20;
    /// Magic bytes that open every encoded entry.
    pub const MAGIC: [u8; 4] = *b"MWL1";
    /// Length of the fixed header: magic, index, prev, time, kind, body length.
    pub const HEADER_BYTES: usize = 4 + 8 + 32 + 8 + 1 + 4;

    /// Canonical binary encoding: `b"MWL1"`, index (u64 BE), prev (32 B),
    /// time_ms (u64 BE), kind (u8), body length (u32 BE), body.
    ///
    /// A body longer than [`Entry::BODY_BYTES_MAX`] still encodes, but
    /// [`Entry::decode`] rejects the result and `VerdictLog::append` refuses
    /// such an entry.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(Self::HEADER_BYTES + self.body.len());
        out.extend_from_slice(&Self::MAGIC);
        out.extend_from_slice(&self.index.to_be_bytes());
        out.extend_from_slice(&self.prev);
        out.extend_from_slice(&self.time_ms.to_be_bytes());
        out.push(self.kind.tag());
        let len = u32::try_from(self.body.len()).unwrap_or(u32::MAX);
        out.extend_from_slice(&len.to_be_bytes());
        out.extend_from_slice(&self.body);
        out
    }

    /// Strict decoding of [`Entry::encode`]'s format: the magic must match,
    /// the kind must be known, the body must be within
    /// [`Entry::BODY_BYTES_MAX`], and the input must be exactly one entry long
    /// (no trailing bytes). Never panics.
    ///
    /// Since the format has one encoding per entry, `decode(b)?.encode() == b`.
    pub fn decode(bytes: &[u8]) -> Result<Entry, DecodeError> {
        let header = bytes
            .get(..Self::HEADER_BYTES)
            .ok_or(DecodeError::TooShort { len: bytes.len() })?;
        let (magic, rest) = header.split_at(4);
        if magic != Self::MAGIC {
            return Err(DecodeError::BadMagic);
        }
        let (index, rest) = split_u64(rest);
        let (prev, rest) = rest.split_at(32);
        let (time_ms, rest) = split_u64(rest);
        let (tag, rest) = rest.split_at(1);
        let kind = EntryKind::try_from(tag.first().copied().unwrap_or(u8::MAX))?;
        let mut len_bytes = [0u8; 4];
        len_bytes.copy_from_slice(rest);
        let body_len = u32::from_be_bytes(len_bytes);
        let body_len_usize = usize::try_from(body_len).unwrap_or(usize::MAX);
        if body_len_usize > Self::BODY_BYTES_MAX {
            return Err(DecodeError::BodyTooLarge {
                len: body_len,
                max: Self::BODY_BYTES_MAX,
            });
        }
        let body = &bytes[Self::HEADER_BYTES..];
        if body.len() < body_len_usize {
            return Err(DecodeError::Truncated {
                expected: body_len,
                found: body.len(),
            });
        }
        if body.len() > body_len_usize {
            return Err(DecodeError::TrailingBytes {
                extra: body.len() - body_len_usize,
            });
        }
        let mut prev_hash = [0u8; 32];
        prev_hash.copy_from_slice(prev);
        Ok(Entry {
            index,
            prev: prev_hash,
            time_ms,
            kind,
            body: body.to_vec(),
        })
    }

    /// This entry's leaf hash: `leaf_hash(&self.encode())`. The next entry's
    /// `prev` and the Merkle tree both use it.
    pub fn leaf(&self) -> Hash {
        leaf_hash(&self.encode())
    }
}

/// Split a big-endian u64 off the front of `bytes` (which holds at least 8).
fn split_u64(bytes: &[u8]) -> (u64, &[u8]) {
    let (head, rest) = bytes.split_at(8);
    let mut buf = [0u8; 8];
    buf.copy_from_slice(head);
    (u64::from_be_bytes(buf), rest)
}
