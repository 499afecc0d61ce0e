//! Property tests: Merkle proofs, the compact tree, and entry encoding.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use memwarden_log::{
    CompactTree, DecodeError, Entry, EntryKind, Hash, ProofError, consistency_proof,
    inclusion_proof, leaf_hash, merkle_root, verify_consistency, verify_inclusion,
};
use proptest::prelude::*;

fn make_leaves(n: usize, seed: u64) -> Vec<Hash> {
    (0..n as u64)
        .map(|i| leaf_hash(&[seed.to_be_bytes(), i.to_be_bytes()].concat()))
        .collect()
}

fn flip(proof: &[Hash], i: usize, bit: u8) -> Vec<Hash> {
    let mut p = proof.to_vec();
    p[i][usize::from(bit) % 32] ^= 1 << (bit % 8);
    p
}

/// Every way of corrupting an inclusion proof that must be rejected.
fn assert_inclusion_mutants_fail(leaves: &[Hash], index: u64, proof: &[Hash], bit: u8) {
    let n = leaves.len() as u64;
    let root = merkle_root(leaves);
    let leaf = &leaves[index as usize];
    let rejects = |leaf: &Hash, index: u64, size: u64, proof: &[Hash], root: &Hash, what: &str| {
        assert!(
            verify_inclusion(leaf, index, size, proof, root).is_err(),
            "{what} accepted (index {index}, size {n})"
        );
    };
    for i in 0..proof.len() {
        rejects(leaf, index, n, &flip(proof, i, bit), &root, "flipped bit");
    }
    if !proof.is_empty() {
        rejects(
            leaf,
            index,
            n,
            &proof[..proof.len() - 1],
            &root,
            "truncated proof",
        );
    }
    for extra in [root, *leaf, [0u8; 32]] {
        let mut longer = proof.to_vec();
        longer.push(extra);
        rejects(leaf, index, n, &longer, &root, "extra hash appended");
        let mut longer = vec![extra];
        longer.extend_from_slice(proof);
        rejects(leaf, index, n, &longer, &root, "extra hash prepended");
    }
    // Wrong index: a neighbour, a far leaf, past the end.
    for wrong in [index ^ 1, (index + 1) % n, n - 1 - index, n] {
        if wrong != index {
            rejects(leaf, wrong, n, proof, &root, "wrong index");
        }
    }
    // Wrong size with the same root (the proof length cannot fit).
    rejects(leaf, index, n * 2, proof, &root, "size * 2");
    rejects(leaf, index, n / 2, proof, &root, "size / 2");
    // Wrong size with that size's real root.
    let mut more = leaves.to_vec();
    more.push(leaf_hash(b"one more"));
    rejects(leaf, index, n + 1, proof, &merkle_root(&more), "size + 1");
    if index + 1 < n {
        rejects(
            leaf,
            index,
            n - 1,
            proof,
            &merkle_root(&leaves[..n as usize - 1]),
            "size - 1",
        );
    }
    // Wrong leaf, wrong root.
    let other = leaf_hash(b"not the leaf");
    rejects(&other, index, n, proof, &root, "wrong leaf");
    rejects(
        leaf,
        index,
        n,
        proof,
        &leaf_hash(b"not the root"),
        "wrong root",
    );
}

/// Every way of corrupting a non-trivial consistency proof that must be rejected.
fn assert_consistency_mutants_fail(leaves: &[Hash], old: u64, proof: &[Hash], bit: u8) {
    let new = leaves.len() as u64;
    let r1 = merkle_root(&leaves[..old as usize]);
    let r2 = merkle_root(leaves);
    let rejects = |o: u64, n: u64, a: &Hash, b: &Hash, p: &[Hash], what: &str| {
        assert!(
            verify_consistency(o, n, a, b, p).is_err(),
            "{what} accepted (old {old}, new {new})"
        );
    };
    for i in 0..proof.len() {
        rejects(old, new, &r1, &r2, &flip(proof, i, bit), "flipped bit");
    }
    rejects(
        old,
        new,
        &r1,
        &r2,
        &proof[..proof.len() - 1],
        "truncated proof",
    );
    rejects(old, new, &r1, &r2, &[], "empty proof");
    for extra in [r1, r2, proof[0], [0u8; 32]] {
        let mut longer = proof.to_vec();
        longer.push(extra);
        rejects(old, new, &r1, &r2, &longer, "extra hash appended");
        let mut longer = vec![extra];
        longer.extend_from_slice(proof);
        rejects(old, new, &r1, &r2, &longer, "extra hash prepended");
    }
    rejects(old, new, &r2, &r1, proof, "swapped roots");
    rejects(old, new, &r1, &r1, proof, "old root twice");
    rejects(old, new, &r2, &r2, proof, "new root twice");
    // Wrong sizes (with the same roots).
    rejects(old - 1, new, &r1, &r2, proof, "old - 1");
    rejects(old + 1, new, &r1, &r2, proof, "old + 1");
    rejects(old ^ 2, new, &r1, &r2, proof, "old ^ 2");
    rejects(old, new * 2, &r1, &r2, proof, "new * 2");
    rejects(old, new / 2, &r1, &r2, proof, "new / 2");
    rejects(new, old, &r2, &r1, proof, "swapped sizes");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Every inclusion proof of a random tree verifies, and its mutants fail.
    #[test]
    fn inclusion_proofs_verify_and_mutants_fail(n in 1usize..=200, seed: u64, bit: u8) {
        let leaves = make_leaves(n, seed);
        let root = merkle_root(&leaves);
        for index in 0..n as u64 {
            let proof = inclusion_proof(&leaves, index).unwrap();
            verify_inclusion(&leaves[index as usize], index, n as u64, &proof, &root).unwrap();
        }
        // Mutants for a few indices (all of them would be slow in debug builds).
        for index in [0, n as u64 / 3, n as u64 / 2, n as u64 - 1, seed % n as u64] {
            let proof = inclusion_proof(&leaves, index).unwrap();
            assert_inclusion_mutants_fail(&leaves, index, &proof, bit);
        }
    }

    /// Every consistency proof of a random tree verifies, and its mutants fail.
    #[test]
    fn consistency_proofs_verify_and_mutants_fail(n in 1usize..=200, seed: u64, bit: u8) {
        let leaves = make_leaves(n, seed);
        let new_root = merkle_root(&leaves);
        let mut tree = CompactTree::new();
        for old in 0..=n {
            let old_root = tree.root();
            let proof = consistency_proof(&leaves, old as u64).unwrap();
            verify_consistency(old as u64, n as u64, &old_root, &new_root, &proof).unwrap();
            if old > 0 && old < n && (old % 7 == 0 || old == n - 1 || old == 1 || old == seed as usize % n) {
                assert_consistency_mutants_fail(&leaves, old as u64, &proof, bit);
            }
            if old < n {
                tree.push(leaves[old]);
            }
        }
    }

    /// Consistency between any two prefixes (not only with the full tree).
    #[test]
    fn consistency_between_prefixes(n in 1usize..=120, seed: u64, a in any::<prop::sample::Index>(), b in any::<prop::sample::Index>()) {
        let leaves = make_leaves(n, seed);
        let (x, y) = (a.index(n + 1), b.index(n + 1));
        let (old, new) = (x.min(y), x.max(y));
        let proof = consistency_proof(&leaves[..new], old as u64).unwrap();
        verify_consistency(
            old as u64, new as u64,
            &merkle_root(&leaves[..old]), &merkle_root(&leaves[..new]), &proof,
        ).unwrap();
    }

    /// The compact tree's root equals merkle_root for every prefix.
    #[test]
    fn compact_tree_matches_merkle_root(n in 0usize..=200, seed: u64) {
        let leaves = make_leaves(n, seed);
        let mut tree = CompactTree::default();
        prop_assert_eq!(tree.root(), merkle_root(&[]));
        for (i, leaf) in leaves.iter().enumerate() {
            tree.push(*leaf);
            prop_assert_eq!(tree.size(), i as u64 + 1);
            prop_assert_eq!(tree.root(), merkle_root(&leaves[..=i]));
        }
        let clone = tree.clone();
        prop_assert_eq!(clone.root(), tree.root());
    }
}

fn any_kind() -> impl Strategy<Value = EntryKind> {
    prop::sample::select(EntryKind::ALL.to_vec())
}

fn any_entry() -> impl Strategy<Value = Entry> {
    (
        any::<u64>(),
        any::<[u8; 32]>(),
        any::<u64>(),
        any_kind(),
        prop::collection::vec(any::<u8>(), 0..300),
    )
        .prop_map(|(index, prev, time_ms, kind, body)| Entry {
            index,
            prev,
            time_ms,
            kind,
            body,
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// encode / decode round-trip, and the leaf is the hash of the encoding.
    #[test]
    fn entry_round_trip(entry in any_entry()) {
        let bytes = entry.encode();
        prop_assert_eq!(bytes.len(), Entry::HEADER_BYTES + entry.body.len());
        let back = Entry::decode(&bytes).unwrap();
        prop_assert_eq!(&back, &entry);
        prop_assert_eq!(back.leaf(), leaf_hash(&bytes));
    }

    /// decode never panics on arbitrary bytes, and accepts only canonical ones.
    #[test]
    fn decode_arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..400)) {
        if let Ok(entry) = Entry::decode(&bytes) {
            prop_assert_eq!(entry.encode(), bytes);
        }
    }

    /// decode never panics on near-valid bytes (valid entry, then one byte
    /// changed, the input cut or extended), and accepts only canonical ones.
    #[test]
    fn decode_mutated_entries(entry in any_entry(), pos: prop::sample::Index, byte: u8, cut: prop::sample::Index, extra in prop::collection::vec(any::<u8>(), 0..8)) {
        let bytes = entry.encode();
        let mut changed = bytes.clone();
        let i = pos.index(changed.len());
        changed[i] = byte;
        let mut cut_bytes = bytes.clone();
        cut_bytes.truncate(cut.index(bytes.len()));
        let mut extended = bytes.clone();
        extended.extend_from_slice(&extra);
        for candidate in [changed, cut_bytes, extended] {
            if let Ok(decoded) = Entry::decode(&candidate) {
                prop_assert_eq!(decoded.encode(), candidate);
            }
        }
    }

    /// Any trailing bytes are rejected.
    #[test]
    fn decode_rejects_trailing_bytes(entry in any_entry(), extra in prop::collection::vec(any::<u8>(), 1..16)) {
        let mut bytes = entry.encode();
        bytes.extend_from_slice(&extra);
        prop_assert_eq!(Entry::decode(&bytes), Err(DecodeError::TrailingBytes { extra: extra.len() }));
    }

    /// Unknown kind tags are rejected.
    #[test]
    fn decode_rejects_unknown_kinds(entry in any_entry(), tag in (EntryKind::ALL.len() as u8)..=255) {
        let mut bytes = entry.encode();
        bytes[4 + 8 + 32 + 8] = tag;
        prop_assert_eq!(Entry::decode(&bytes), Err(DecodeError::UnknownKind { tag }));
    }
}

#[test]
fn proof_error_cases() {
    let leaves = make_leaves(5, 1);
    assert_eq!(
        inclusion_proof(&leaves, 5),
        Err(ProofError::IndexOutOfRange { index: 5, size: 5 })
    );
    assert_eq!(
        consistency_proof(&leaves, 6),
        Err(ProofError::SizesOutOfOrder {
            old_size: 6,
            new_size: 5
        })
    );
    let proof = inclusion_proof(&leaves, 2).unwrap();
    let root = merkle_root(&leaves);
    assert_eq!(
        verify_inclusion(&leaves[2], 2, 5, &proof[..1], &root),
        Err(ProofError::WrongProofLength {
            expected: 3,
            found: 1
        })
    );
    assert_eq!(
        verify_inclusion(&leaves[3], 2, 5, &proof, &root),
        Err(ProofError::RootMismatch)
    );
}
