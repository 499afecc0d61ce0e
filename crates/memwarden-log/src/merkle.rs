//! RFC 6962 / RFC 9162 Merkle tree hashing, compact frontier, and proofs.

use sha2::{Digest, Sha256};

use crate::ProofError;

/// A SHA-256 digest: leaf hashes, node hashes, roots and hash-chain links.
pub type Hash = [u8; 32];

/// Domain-separation prefix for leaf hashes (RFC 6962 §2.1).
const LEAF_PREFIX: u8 = 0x00;
/// Domain-separation prefix for interior node hashes (RFC 6962 §2.1).
const NODE_PREFIX: u8 = 0x01;

/// Hash of one leaf: `SHA-256(0x00 || data)` (RFC 6962 §2.1).
pub fn leaf_hash(data: &[u8]) -> Hash {
    let mut h = Sha256::new();
    h.update([LEAF_PREFIX]);
    h.update(data);
    h.finalize().into()
}

/// Hash of an interior node: `SHA-256(0x01 || left || right)` (RFC 6962 §2.1).
pub fn node_hash(left: &Hash, right: &Hash) -> Hash {
    let mut h = Sha256::new();
    h.update([NODE_PREFIX]);
    h.update(left);
    h.update(right);
    h.finalize().into()
}

/// Root of the empty tree: SHA-256 of the empty string (RFC 6962 §2.1).
pub fn empty_root() -> Hash {
    Sha256::digest([]).into()
}

/// The largest power of two strictly smaller than `n` (requires `n >= 2`).
fn split_point(n: usize) -> usize {
    debug_assert!(n >= 2);
    let p = n.next_power_of_two();
    if p == n { n / 2 } else { p / 2 }
}

/// Merkle Tree Hash (MTH, RFC 6962 §2.1) over already-hashed leaves.
///
/// The empty list hashes to [`empty_root`]; one leaf is its own root; otherwise
/// the list is split at the largest power of two smaller than its length.
pub fn merkle_root(leaves: &[Hash]) -> Hash {
    match leaves.len() {
        0 => empty_root(),
        1 => leaves[0],
        n => {
            let k = split_point(n);
            node_hash(&merkle_root(&leaves[..k]), &merkle_root(&leaves[k..]))
        }
    }
}

/// Compact Merkle frontier: O(log n) memory, amortised O(1) hashing per
/// append, root in O(log n).
///
/// It keeps the roots of the perfect subtrees that make up the tree (one per
/// set bit of the size, largest first), which is all that is needed to append
/// and to compute the RFC 6962 root.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CompactTree {
    size: u64,
    /// Perfect-subtree roots, largest (leftmost) first.
    frontier: Vec<Hash>,
}

impl CompactTree {
    /// An empty tree.
    pub fn new() -> Self {
        Self::default()
    }

    /// Append one (already hashed) leaf.
    pub fn push(&mut self, leaf: Hash) {
        let mut hash = leaf;
        let mut size = self.size;
        // Each trailing one bit of the old size is a perfect subtree of the
        // same height as `hash`: merge them, as in a binary counter.
        while size & 1 == 1 {
            match self.frontier.pop() {
                Some(left) => hash = node_hash(&left, &hash),
                None => break, // unreachable: one frontier entry per set bit
            }
            size >>= 1;
        }
        self.frontier.push(hash);
        self.size = self.size.wrapping_add(1);
    }

    /// Number of leaves pushed so far.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The RFC 6962 Merkle root of all leaves pushed so far.
    pub fn root(&self) -> Hash {
        let mut iter = self.frontier.iter().rev();
        match iter.next() {
            None => empty_root(),
            Some(last) => iter.fold(*last, |acc, left| node_hash(left, &acc)),
        }
    }
}

impl Extend<Hash> for CompactTree {
    fn extend<I: IntoIterator<Item = Hash>>(&mut self, iter: I) {
        for leaf in iter {
            self.push(leaf);
        }
    }
}

impl FromIterator<Hash> for CompactTree {
    fn from_iter<I: IntoIterator<Item = Hash>>(iter: I) -> Self {
        let mut tree = Self::new();
        tree.extend(iter);
        tree
    }
}

/// `u64` to `usize`, failing (rather than truncating) on 32-bit targets.
pub(crate) fn to_usize(v: u64) -> Option<usize> {
    usize::try_from(v).ok()
}

/// RFC 6962 §2.1.1 `PATH(m, D[n])`: the audit path for leaf `index` in the tree
/// built from `leaves`, ordered from the leaf upwards.
///
/// Costs O(n) hashing (the sibling subtrees are recomputed from the leaves).
pub fn inclusion_proof(leaves: &[Hash], index: u64) -> Result<Vec<Hash>, ProofError> {
    let size = leaves.len() as u64;
    let m = match to_usize(index) {
        Some(m) if m < leaves.len() => m,
        _ => return Err(ProofError::IndexOutOfRange { index, size }),
    };
    let mut proof = Vec::new();
    path(m, leaves, &mut proof);
    Ok(proof)
}

/// PATH(m, D) appending to `out` (leaf-most hash first). Requires `m < d.len()`.
fn path(m: usize, d: &[Hash], out: &mut Vec<Hash>) {
    let n = d.len();
    if n <= 1 {
        return;
    }
    let k = split_point(n);
    if m < k {
        path(m, &d[..k], out);
        out.push(merkle_root(&d[k..]));
    } else {
        path(m - k, &d[k..], out);
        out.push(merkle_root(&d[..k]));
    }
}

/// RFC 6962 §2.1.2 `PROOF(m, D[n])`: the consistency proof between the tree of
/// the first `old_size` leaves and the tree of all `leaves`.
///
/// `old_size == 0` and `old_size == leaves.len()` give the empty proof.
pub fn consistency_proof(leaves: &[Hash], old_size: u64) -> Result<Vec<Hash>, ProofError> {
    let new_size = leaves.len() as u64;
    let m = match to_usize(old_size) {
        Some(m) if m <= leaves.len() => m,
        _ => return Err(ProofError::SizesOutOfOrder { old_size, new_size }),
    };
    let mut proof = Vec::new();
    if m > 0 {
        subproof(m, leaves, true, &mut proof);
    }
    Ok(proof)
}

/// SUBPROOF(m, D, b) appending to `out`. Requires `0 < m <= d.len()`.
fn subproof(m: usize, d: &[Hash], b: bool, out: &mut Vec<Hash>) {
    let n = d.len();
    if m == n {
        if !b {
            out.push(merkle_root(d));
        }
        return;
    }
    let k = split_point(n);
    if m <= k {
        subproof(m, &d[..k], b, out);
        out.push(merkle_root(&d[k..]));
    } else {
        subproof(m - k, &d[k..], false, out);
        out.push(merkle_root(&d[..k]));
    }
}

/// Number of proof hashes for leaf `index` in a tree of `size` leaves
/// (`index < size`): the levels where the path has a sibling.
fn inclusion_proof_len(index: u64, size: u64) -> usize {
    let last = size - 1;
    let inner = u64::BITS - (index ^ last).leading_zeros();
    let border = index.checked_shr(inner).unwrap_or(0).count_ones();
    (inner + border) as usize
}

/// Verify an inclusion proof with the algorithm of RFC 9162 §2.1.3.2.
///
/// Succeeds when `proof` shows that `leaf` is leaf number `index` of the tree
/// of `size` leaves whose root is `root`.
pub fn verify_inclusion(
    leaf: &Hash,
    index: u64,
    size: u64,
    proof: &[Hash],
    root: &Hash,
) -> Result<(), ProofError> {
    if index >= size {
        return Err(ProofError::IndexOutOfRange { index, size });
    }
    let expected = inclusion_proof_len(index, size);
    if proof.len() != expected {
        return Err(ProofError::WrongProofLength {
            expected,
            found: proof.len(),
        });
    }
    let mut fnode = index;
    let mut snode = size - 1;
    let mut r = *leaf;
    for p in proof {
        if snode == 0 {
            return Err(ProofError::WrongProofLength {
                expected,
                found: proof.len(),
            });
        }
        if fnode & 1 == 1 || fnode == snode {
            r = node_hash(p, &r);
            if fnode & 1 == 0 {
                while fnode & 1 == 0 && fnode != 0 {
                    fnode >>= 1;
                    snode >>= 1;
                }
            }
        } else {
            r = node_hash(&r, p);
        }
        fnode >>= 1;
        snode >>= 1;
    }
    if snode != 0 {
        return Err(ProofError::WrongProofLength {
            expected,
            found: proof.len(),
        });
    }
    if &r != root {
        return Err(ProofError::RootMismatch);
    }
    Ok(())
}

/// Verify a consistency proof with the algorithm of RFC 9162 §2.1.4.2.
///
/// Succeeds when `proof` shows that the tree of `old_size` leaves with root
/// `old_root` is a prefix of the tree of `new_size` leaves with root
/// `new_root`. The trivial cases need an empty proof: `old_size == new_size`
/// needs equal roots, and `old_size == 0` needs `old_root` to be
/// [`empty_root`] (stricter than RFC 9162, which leaves it unchecked).
pub fn verify_consistency(
    old_size: u64,
    new_size: u64,
    old_root: &Hash,
    new_root: &Hash,
    proof: &[Hash],
) -> Result<(), ProofError> {
    if old_size > new_size {
        return Err(ProofError::SizesOutOfOrder { old_size, new_size });
    }
    if old_size == 0 || old_size == new_size {
        if !proof.is_empty() {
            return Err(ProofError::WrongProofLength {
                expected: 0,
                found: proof.len(),
            });
        }
        if old_size == 0 && old_root != &empty_root() {
            return Err(ProofError::OldRootMismatch);
        }
        if old_size == new_size && old_root != new_root {
            return Err(ProofError::RootMismatch);
        }
        return Ok(());
    }

    // Expected length: the path from the old tree's last leaf, above the
    // perfect subtree (of 2^shift leaves) that both trees share, plus that
    // subtree's root unless it is the whole old tree.
    let shift = old_size.trailing_zeros();
    let inner = u64::BITS - ((old_size - 1) ^ (new_size - 1)).leading_zeros();
    let border = (old_size - 1).checked_shr(inner).unwrap_or(0).count_ones();
    let seeded = old_size.is_power_of_two(); // the old tree is a perfect subtree
    // `inner > shift` whenever old_size < new_size; checked for robustness.
    let above = inner.saturating_sub(shift);
    let expected = (above + border) as usize + usize::from(!seeded);
    if proof.len() != expected {
        return Err(ProofError::WrongProofLength {
            expected,
            found: proof.len(),
        });
    }

    // RFC 9162 §2.1.4.2, steps 2..7.
    let (first, rest) = if seeded {
        (*old_root, proof)
    } else {
        match proof.split_first() {
            Some((first, rest)) => (*first, rest),
            None => return Err(ProofError::WrongProofLength { expected, found: 0 }),
        }
    };
    let mut fnode = old_size - 1;
    let mut snode = new_size - 1;
    while fnode & 1 == 1 {
        fnode >>= 1;
        snode >>= 1;
    }
    let mut fr = first;
    let mut sr = first;
    for c in rest {
        if snode == 0 {
            return Err(ProofError::WrongProofLength {
                expected,
                found: proof.len(),
            });
        }
        if fnode & 1 == 1 || fnode == snode {
            fr = node_hash(c, &fr);
            sr = node_hash(c, &sr);
            if fnode & 1 == 0 {
                while fnode & 1 == 0 && fnode != 0 {
                    fnode >>= 1;
                    snode >>= 1;
                }
            }
        } else {
            sr = node_hash(&sr, c);
        }
        fnode >>= 1;
        snode >>= 1;
    }
    if snode != 0 {
        return Err(ProofError::WrongProofLength {
            expected,
            found: proof.len(),
        });
    }
    if &fr != old_root {
        return Err(ProofError::OldRootMismatch);
    }
    if &sr != new_root {
        return Err(ProofError::RootMismatch);
    }
    Ok(())
}
