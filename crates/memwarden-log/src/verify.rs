//! Full verification of a stored log.

use std::fmt;

use ed25519_dalek::VerifyingKey;

use crate::DecodeError;
use crate::checkpoint::SignedCheckpoint;
use crate::entry::Entry;
use crate::merkle::{CompactTree, Hash, empty_root, leaf_hash};

const ZERO: Hash = [0u8; 32];

/// What [`verify_log`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifyReport {
    /// Number of stored entries examined (all of them, good or bad).
    pub entries: u64,
    /// Merkle root of the leaf hashes of the stored bytes, as stored.
    pub root: Hash,
    /// Leaf hash of the last stored entry (`[0; 32]` when there is none).
    pub head: Hash,
    /// Checkpoints that were validly signed by the trusted key and matched the
    /// stored entries.
    pub checkpoints_checked: usize,
    /// The first problem found, or `None` when the log verified.
    pub problem: Option<Problem>,
}

impl VerifyReport {
    /// True when no problem was found.
    pub fn is_ok(&self) -> bool {
        self.problem.is_none()
    }

    /// The index of the first bad entry, if a problem implicates one (see
    /// [`Problem::first_bad_index`]).
    pub fn first_bad_index(&self) -> Option<u64> {
        self.problem.as_ref().and_then(Problem::first_bad_index)
    }
}

/// A reason a stored log does not verify. Each names the first bad index
/// (see [`Problem::first_bad_index`]); its `Display` is one line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Problem {
    /// The bytes stored at position `index` are not a valid entry.
    Undecodable {
        /// Position in the stored order.
        index: u64,
        /// Why decoding failed.
        error: DecodeError,
    },
    /// The entry stored at position `index` carries another index: an entry
    /// was removed at `index`, two entries were swapped there, or the entry
    /// there is forged.
    IndexMismatch {
        /// Position in the stored order (the first bad index).
        index: u64,
        /// The index the stored entry carries.
        found: u64,
    },
    /// The entry at position `index` is an extra one: it and a neighbour both
    /// claim the same index and link to the same predecessor, and the other
    /// one is the entry that the rest of the log (or an anchor) vouches for.
    Inserted {
        /// Position of the extra entry.
        index: u64,
    },
    /// The hash chain is broken at entry `index`: either its content was
    /// changed (so its successor's `prev` no longer matches its leaf hash) or
    /// its own `prev` does not match its predecessor (it was forged).
    BrokenLink {
        /// The entry judged bad (see [`verify_log`] for how it is chosen).
        index: u64,
    },
    /// Fewer entries are stored than were recorded: the tail was cut.
    Truncated {
        /// The recorded size.
        expected: u64,
        /// The stored size (the first missing index).
        found: u64,
    },
    /// More entries are stored than were recorded, and the recorded head
    /// matches: entries were added after `expected` without being recorded.
    Extended {
        /// The recorded size (the first unrecorded index).
        expected: u64,
        /// The stored size.
        found: u64,
    },
    /// The leaf hash of the entry at `index` (the last one the recorded size
    /// covers) differs from the recorded head: that entry was changed.
    HeadMismatch {
        /// Position of the entry whose leaf differs.
        index: u64,
        /// The recorded head.
        expected: Hash,
        /// The stored entry's leaf hash.
        found: Hash,
    },
    /// A trusted checkpoint's root or head differs from that of the first
    /// `size` stored entries: a bad entry lies at an index in
    /// `first_bad_after..size` (after the last matching checkpoint).
    CheckpointRootMismatch {
        /// The checkpoint's size.
        size: u64,
        /// Size of the previous matching checkpoint (0 if none): every entry
        /// before it is covered by a matching checkpoint.
        first_bad_after: u64,
    },
    /// A trusted checkpoint covers more entries than are stored: the tail
    /// was cut.
    CheckpointBeyondLog {
        /// The checkpoint's size.
        size: u64,
        /// The stored size (the first missing index).
        len: u64,
    },
    /// A checkpoint is not validly signed by the trusted key (wrong key, or
    /// its fields or signature were altered). No entry is implicated.
    BadSignature {
        /// The size the checkpoint claims.
        size: u64,
    },
    /// The recorded head (`size` entries) carries no valid signature by the store's key: an
    /// entry was appended, or the recorded head edited, by someone without the key. A bad entry
    /// lies at an index in `first_bad_after..size` (after the last signed checkpoint or witness).
    UnsignedHead {
        /// The recorded size.
        size: u64,
        /// The size the last trusted checkpoint covers (0 if none).
        first_bad_after: u64,
    },
    /// A row the store keeps beside the log (an item, a principal, a used
    /// grant, ...) differs from what the log committed to: forged (no entry
    /// binds it), edited or rolled back (its digest differs from the one its
    /// latest entry committed), or deleted. Reported by stores, which bind
    /// their rows to log entries; [`verify_log`] itself never returns it.
    BadRow {
        /// The table.
        table: String,
        /// The row's key columns.
        key: String,
        /// The log entry that committed the row (or its latest change), if
        /// any.
        entry: Option<u64>,
        /// What is wrong.
        reason: String,
    },
    /// A problem in one of several logs a store keeps (one per tenant).
    InLog {
        /// The log (its tenant).
        log: String,
        /// The problem.
        problem: Box<Problem>,
    },
}

impl Problem {
    /// The first bad index this problem names: the changed, removed, swapped
    /// or inserted entry's position; the first missing or unrecorded position
    /// for a cut or extended tail; the lower end of the range for a checkpoint
    /// mismatch; the entry that committed a bad row. `None` for
    /// [`Problem::BadSignature`] and for a forged row no entry committed.
    pub fn first_bad_index(&self) -> Option<u64> {
        match *self {
            Problem::Undecodable { index, .. }
            | Problem::IndexMismatch { index, .. }
            | Problem::Inserted { index }
            | Problem::BrokenLink { index }
            | Problem::HeadMismatch { index, .. } => Some(index),
            Problem::Truncated { found, .. } => Some(found),
            Problem::Extended { expected, .. } => Some(expected),
            Problem::CheckpointRootMismatch {
                first_bad_after, ..
            }
            | Problem::UnsignedHead {
                first_bad_after, ..
            } => Some(first_bad_after),
            Problem::CheckpointBeyondLog { len, .. } => Some(len),
            Problem::BadSignature { .. } => None,
            Problem::BadRow { entry, .. } => entry,
            Problem::InLog { ref problem, .. } => problem.first_bad_index(),
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::Undecodable { index, error } => {
                write!(
                    f,
                    "first bad index {index}: entry cannot be decoded: {error}"
                )
            }
            Problem::IndexMismatch { index, found } => write!(
                f,
                "first bad index {index}: stored entry carries index {found} \
                 (entry removed, reordered or forged)"
            ),
            Problem::Inserted { index } => write!(
                f,
                "first bad index {index}: extra entry inserted (two entries claim the same index)"
            ),
            Problem::BrokenLink { index } => write!(
                f,
                "first bad index {index}: hash chain broken (entry changed or forged)"
            ),
            Problem::Truncated { expected, found } => write!(
                f,
                "first bad index {found}: log truncated ({found} entries stored, {expected} recorded)"
            ),
            Problem::Extended { expected, found } => write!(
                f,
                "first bad index {expected}: unrecorded entries appended \
                 ({found} entries stored, {expected} recorded)"
            ),
            Problem::HeadMismatch {
                index,
                expected,
                found,
            } => write!(
                f,
                "first bad index {index}: entry leaf {} differs from the recorded head {}",
                hex::encode(found),
                hex::encode(expected)
            ),
            Problem::CheckpointRootMismatch {
                size,
                first_bad_after,
            } => write!(
                f,
                "first bad index {first_bad_after}: checkpoint at size {size} does not match; \
                 a bad entry lies in {first_bad_after}..{size}"
            ),
            Problem::CheckpointBeyondLog { size, len } => write!(
                f,
                "first bad index {len}: checkpoint at size {size} is beyond the log's {len} entries \
                 (tail truncated)"
            ),
            Problem::BadSignature { size } => write!(
                f,
                "no bad index: checkpoint at size {size} is not validly signed by the trusted key"
            ),
            Problem::UnsignedHead {
                size,
                first_bad_after,
            } => write!(
                f,
                "first bad index {first_bad_after}: the recorded head at size {size} is not signed by \
                 the store's key (an entry appended, or the head edited, without the key); a bad \
                 entry lies in {first_bad_after}..{size}"
            ),
            Problem::BadRow {
                table,
                key,
                entry,
                reason,
            } => {
                write!(f, "first bad row: {table} {key}: {reason}")?;
                match entry {
                    Some(i) => write!(f, " (log entry {i})"),
                    None => Ok(()),
                }
            }
            Problem::InLog { log, problem } => write!(f, "log {log:?}: {problem}"),
        }
    }
}

/// Trusted statements of "the leaf at size-1 is this head": the caller's
/// recorded `expected` and validly signed checkpoints.
struct Anchors<'a> {
    expected: Option<(u64, Hash)>,
    checkpoints: &'a [&'a SignedCheckpoint],
}

impl Anchors<'_> {
    /// The trusted head of the log of `size` entries, if one is known.
    fn head_at(&self, size: u64) -> Option<Hash> {
        if let Some((s, head)) = self.expected
            && s == size
        {
            return Some(head);
        }
        self.checkpoints
            .iter()
            .find(|c| c.checkpoint.size == size)
            .map(|c| c.checkpoint.head)
    }
}

/// Full verification of a stored log.
///
/// `entries` are the stored encoded entries in stored order; `checkpoints`
/// are signed checkpoints (any order); `key` is the trusted checkpoint key;
/// `expected` is the store's separately recorded `(size, head)`, if any.
///
/// # Checks, in order
///
/// 1. **The walk**, positions `0..n`: each entry must decode
///    ([`Problem::Undecodable`]), carry `index == position`
///    ([`Problem::IndexMismatch`] / [`Problem::Inserted`]) and have `prev`
///    equal to the previous entry's leaf hash, `[0; 32]` for the first
///    ([`Problem::BrokenLink`]). The walk stops at the first problem.
/// 2. **Checkpoints**, sorted by size: each validly signed one must not be
///    beyond the log ([`Problem::CheckpointBeyondLog`]) and its root and head
///    must equal those of the first `size` entries
///    ([`Problem::CheckpointRootMismatch`]).
/// 3. **`expected`**: the stored size must equal the recorded one
///    ([`Problem::Truncated`], [`Problem::Extended`]) and the last entry's
///    leaf must equal the recorded head ([`Problem::HeadMismatch`]).
/// 4. A checkpoint not validly signed by `key` ([`Problem::BadSignature`]) is
///    ignored in steps 1-2 and reported only when nothing else is wrong.
///
/// # Which index is named
///
/// The report names the first stored position that differs from the
/// genuine log, assuming a single tampering operation. The hash chain alone
/// cannot tell "entry *i* changed" from "entry *i*+1's `prev` forged", so at
/// a break between *i* and *i*+1 the walk weighs evidence, in this order:
///
/// 1. a trusted anchor on entry *i* (the `expected` head or a validly signed
///    checkpoint head at size *i*+1): if it matches, *i*+1 is named, if not,
///    *i*;
/// 2. a trusted anchor on entry *i*+1, or else whether entry *i*+2's `prev`
///    links to entry *i*+1: if entry *i*+1 is contradicted, *i*+1 is named;
/// 3. otherwise (vouched for, or no evidence) *i* is named: the changed entry.
///
/// Two adjacent entries claiming the same index and the same predecessor
/// are resolved the same way (the one vouched for is genuine; an exact copy
/// is the second one).
///
/// | tampering at position *p* (log of *n* entries) | detected as | index named |
/// |---|---|---|
/// | body of *p* changed, *p* < *n*-1 | `BrokenLink` (link *p*→*p*+1 broken) | *p* |
/// | body of the last entry changed | `HeadMismatch` via `expected` (undetectable with no anchor) | *n*-1 |
/// | ...and a checkpoint at size *n* exists | `CheckpointRootMismatch { size: n, first_bad_after }` (checkpoints are checked before `expected`) | `first_bad_after`: the previous matching checkpoint's size, so *n*-1 only if one exists at *n*-1 |
/// | entry *p* replaced by a forgery, *p* < *n*-1 | `BrokenLink` | *p* |
/// | entry *p* removed, *p* < *n*-1 | `IndexMismatch { index: p, found: p+1 }` | *p* |
/// | entries *p* and *p*+1 swapped | `IndexMismatch { index: p, found: p+1 }` | *p* |
/// | forged entry with index *p* and `prev` = leaf *p*-1 inserted before *p* | `Inserted` (genuine entry *p*, now at *p*+1, claims *p* too) | *p* |
/// | copy of entry *p*-1 inserted before *p* | `Inserted` | *p* |
/// | forged entry with a wrong `prev` inserted before *p* | `BrokenLink` | *p* |
/// | forged entry with a wrong index inserted before *p* | `IndexMismatch` | *p* |
/// | tail cut to *m* < *n* entries (incl. the last entry removed) | `CheckpointBeyondLog` if a checkpoint lies beyond *m*, else `Truncated` via `expected` | *m* |
/// | unrecorded entries appended after *n* | `Extended` via `expected` | *n* |
///
/// A checkpoint mismatch only bounds the bad entry: an attacker who rewrites
/// entries and recomputes every later link leaves a self-consistent chain
/// that only anchors (checkpoints, `expected`) catch, and the named index is
/// then the lower end of the range the matching checkpoints leave open
/// (`HeadMismatch` names the last entry, which is exact only for a single
/// changed entry).
pub fn verify_log(
    entries: &[Vec<u8>],
    checkpoints: &[SignedCheckpoint],
    key: &VerifyingKey,
    expected: Option<(u64, Hash)>,
) -> VerifyReport {
    // Decoding is strict and canonical, so the leaf of the stored bytes is
    // the leaf of the decoded entry.
    let leaves: Vec<Hash> = entries.iter().map(|bytes| leaf_hash(bytes)).collect();
    let len = leaves.len() as u64;

    let mut sorted: Vec<&SignedCheckpoint> = checkpoints.iter().collect();
    sorted.sort_by_key(|c| c.checkpoint.size);
    let mut bad_signature = None;
    let mut trusted = Vec::with_capacity(sorted.len());
    for cp in sorted {
        if cp.verify(key).is_ok() {
            trusted.push(cp);
        } else if bad_signature.is_none() {
            bad_signature = Some(Problem::BadSignature {
                size: cp.checkpoint.size,
            });
        }
    }
    let anchors = Anchors {
        expected,
        checkpoints: &trusted,
    };

    // One pass over the leaves gives the root at every checkpoint size.
    let mut tree = CompactTree::new();
    let mut roots_at: Vec<(u64, Hash)> = Vec::new();
    let mut wanted = trusted.iter().map(|c| c.checkpoint.size).peekable();
    while wanted.next_if_eq(&0).is_some() {
        roots_at.push((0, empty_root()));
    }
    for leaf in &leaves {
        tree.push(*leaf);
        while wanted.next_if_eq(&tree.size()).is_some() {
            roots_at.push((tree.size(), tree.root()));
        }
    }
    let root = tree.root();
    let head = leaves.last().copied().unwrap_or(ZERO);

    let walk_problem = walk(entries, &leaves, &anchors);
    let (checkpoint_problem, checkpoints_checked) = check_checkpoints(&trusted, &roots_at, &leaves);
    let problem = walk_problem
        .or(checkpoint_problem)
        .or_else(|| check_expected(expected, &leaves))
        .or(bad_signature);

    VerifyReport {
        entries: len,
        root,
        head,
        checkpoints_checked,
        problem,
    }
}

/// Leaf hash at position `i` as a `u64` index, if present.
fn leaf_at(leaves: &[Hash], i: u64) -> Option<Hash> {
    usize::try_from(i).ok().and_then(|i| leaves.get(i)).copied()
}

/// The head of the first `size` leaves (`[0; 32]` for size 0).
fn head_of(leaves: &[Hash], size: u64) -> Hash {
    match size.checked_sub(1) {
        None => ZERO,
        Some(i) => leaf_at(leaves, i).unwrap_or(ZERO),
    }
}

/// Step 1: decode, index and hash-chain checks, naming the first bad index.
fn walk(entries: &[Vec<u8>], leaves: &[Hash], anchors: &Anchors<'_>) -> Option<Problem> {
    // Does the entry after position `q` link to `leaf`? None if unknown.
    let successor_links_to = |q: usize, leaf: &Hash| -> Option<bool> {
        let next = Entry::decode(entries.get(q + 1)?).ok()?;
        Some(&next.prev == leaf)
    };

    for (q, bytes) in entries.iter().enumerate() {
        let pos = q as u64;
        let entry = match Entry::decode(bytes) {
            Ok(entry) => entry,
            Err(error) => return Some(Problem::Undecodable { index: pos, error }),
        };
        let expect_prev = if q == 0 { ZERO } else { leaves[q - 1] };

        if entry.index != pos {
            // Two entries claiming index q-1, both linking to entry q-2: one
            // of them was inserted. The genuine one is the one an anchor or
            // the next entry vouches for.
            if q >= 1 && entry.index == pos - 1 {
                let prev_of_prev = if q >= 2 { leaves[q - 2] } else { ZERO };
                if entry.prev == prev_of_prev {
                    if leaves[q] == leaves[q - 1] {
                        // An exact duplicate: the second copy is the extra one.
                        return Some(Problem::Inserted { index: pos });
                    }
                    let this_is_genuine = match anchors.head_at(pos) {
                        Some(h) if h == leaves[q] => Some(true),
                        Some(h) if h == leaves[q - 1] => Some(false),
                        _ => None,
                    }
                    .or_else(|| {
                        let next = Entry::decode(entries.get(q + 1)?).ok()?;
                        if next.prev == leaves[q] {
                            Some(true)
                        } else if next.prev == leaves[q - 1] {
                            Some(false)
                        } else {
                            None
                        }
                    });
                    let index = if this_is_genuine == Some(false) {
                        pos
                    } else {
                        pos - 1
                    };
                    return Some(Problem::Inserted { index });
                }
            }
            return Some(Problem::IndexMismatch {
                index: pos,
                found: entry.index,
            });
        }

        if entry.prev != expect_prev {
            if q == 0 {
                return Some(Problem::BrokenLink { index: 0 });
            }
            // Either entry q-1 changed (its leaf moved away from q's prev) or
            // entry q is forged (its prev is wrong). An anchor on entry q-1
            // decides; otherwise, if entry q is vouched for (by an anchor or
            // its successor's link) or nothing is known, q-1 is the bad one,
            // and if entry q is contradicted, q is.
            let prev_is_genuine = anchors.head_at(pos).map(|h| h == leaves[q - 1]);
            let this_is_genuine = match anchors.head_at(pos + 1) {
                Some(h) => Some(h == leaves[q]),
                None => successor_links_to(q, &leaves[q]),
            };
            let index = match (prev_is_genuine, this_is_genuine) {
                (Some(true), _) | (None, Some(false)) => pos,
                _ => pos - 1,
            };
            return Some(Problem::BrokenLink { index });
        }
    }
    None
}

/// Step 2: trusted checkpoints (sorted by size) against the stored leaves.
/// Returns the first problem and the number of checkpoints that matched.
fn check_checkpoints(
    trusted: &[&SignedCheckpoint],
    roots_at: &[(u64, Hash)],
    leaves: &[Hash],
) -> (Option<Problem>, usize) {
    let len = leaves.len() as u64;
    let mut matched = 0usize;
    let mut last_good = 0u64;
    let mut problem = None;
    for cp in trusted {
        let c = &cp.checkpoint;
        let root = roots_at.iter().find(|(s, _)| *s == c.size).map(|(_, r)| *r);
        let found = match root {
            None => Some(Problem::CheckpointBeyondLog { size: c.size, len }),
            Some(root) if root != c.root || head_of(leaves, c.size) != c.head => {
                Some(Problem::CheckpointRootMismatch {
                    size: c.size,
                    first_bad_after: last_good,
                })
            }
            Some(_) => None,
        };
        match found {
            None => {
                matched += 1;
                last_good = last_good.max(c.size);
            }
            Some(p) => {
                if problem.is_none() {
                    problem = Some(p);
                }
            }
        }
    }
    (problem, matched)
}

/// Step 3: the store's recorded `(size, head)`.
fn check_expected(expected: Option<(u64, Hash)>, leaves: &[Hash]) -> Option<Problem> {
    let (size, head) = expected?;
    let len = leaves.len() as u64;
    if len < size {
        return Some(Problem::Truncated {
            expected: size,
            found: len,
        });
    }
    let found = head_of(leaves, size);
    if found != head {
        return Some(Problem::HeadMismatch {
            index: size.saturating_sub(1),
            expected: head,
            found,
        });
    }
    if len > size {
        return Some(Problem::Extended {
            expected: size,
            found: len,
        });
    }
    None
}
