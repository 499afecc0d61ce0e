//! Known-answer tests for RFC 6962 hashing and proofs.
//!
//! The vectors are copied from the certificate-transparency test suite as
//! kept in transparency-dev/merkle: `proof/verify_test.go` (the 8 test leaves,
//! the roots for sizes 1..8, and the inclusion and consistency proofs; that
//! file numbers leaves from 1, here they are numbered from 0) and
//! `rfc6962/rfc6962_test.go` (empty root and leaf hashes).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use memwarden_log::{
    Hash, ProofError, consistency_proof, empty_root, inclusion_proof, leaf_hash, merkle_root,
    verify_consistency, verify_inclusion,
};

/// The standard 8 leaf inputs, hex.
const LEAF_INPUTS: [&str; 8] = [
    "",
    "00",
    "10",
    "2021",
    "3031",
    "40414243",
    "5051525354555657",
    "606162636465666768696a6b6c6d6e6f",
];

/// One known answer.
enum Vector {
    /// SHA-256 of the empty string.
    EmptyRoot(&'static str),
    /// `leaf_hash(input)`.
    Leaf {
        input: &'static [u8],
        hash: &'static str,
    },
    /// MTH of the first `size` standard leaves.
    Root { size: usize, root: &'static str },
    /// PATH(index, D[size]) over the standard leaves.
    Inclusion {
        index: u64,
        size: usize,
        proof: &'static [&'static str],
    },
    /// PROOF(old, D[new]) over the standard leaves.
    Consistency {
        old: usize,
        new: usize,
        proof: &'static [&'static str],
    },
}

use Vector::*;

const VECTORS: &[Vector] = &[
    EmptyRoot("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
    Leaf {
        input: b"",
        hash: "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    },
    Leaf {
        input: b"L123456",
        hash: "395aa064aa4c29f7010acfe3f25db9485bbd4b91897b6ad7ad547639252b4d56",
    },
    Root {
        size: 1,
        root: "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    },
    Root {
        size: 2,
        root: "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
    },
    Root {
        size: 3,
        root: "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
    },
    Root {
        size: 4,
        root: "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    },
    Root {
        size: 5,
        root: "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
    },
    Root {
        size: 6,
        root: "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
    },
    Root {
        size: 7,
        root: "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
    },
    Root {
        size: 8,
        root: "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
    },
    Inclusion {
        index: 0,
        size: 1,
        proof: &[],
    },
    Inclusion {
        index: 0,
        size: 8,
        proof: &[
            "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4",
        ],
    },
    Inclusion {
        index: 5,
        size: 8,
        proof: &[
            "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
            "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
            "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
        ],
    },
    Inclusion {
        index: 2,
        size: 3,
        proof: &["fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125"],
    },
    Inclusion {
        index: 1,
        size: 5,
        proof: &[
            "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
        ],
    },
    Consistency {
        old: 1,
        new: 1,
        proof: &[],
    },
    Consistency {
        old: 1,
        new: 8,
        proof: &[
            "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4",
        ],
    },
    Consistency {
        old: 6,
        new: 8,
        proof: &[
            "0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
            "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
            "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
        ],
    },
    Consistency {
        old: 2,
        new: 5,
        proof: &[
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
        ],
    },
    Consistency {
        old: 6,
        new: 7,
        proof: &[
            "0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
            "b08693ec2e721597130641e8211e7eedccb4c26413963eee6c1e2ed16ffb1a5f",
            "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
        ],
    },
];

fn h(s: &str) -> Hash {
    let mut out = [0u8; 32];
    hex::decode_to_slice(s, &mut out).expect("vector is 32 bytes of hex");
    out
}

fn hashes(list: &[&str]) -> Vec<Hash> {
    list.iter().map(|s| h(s)).collect()
}

fn leaves() -> Vec<Hash> {
    LEAF_INPUTS
        .iter()
        .map(|s| leaf_hash(&hex::decode(s).expect("hex")))
        .collect()
}

/// Check one vector: computed values equal the known answer, and the
/// verifiers accept the known proofs.
fn check(v: &Vector) {
    let leaves = leaves();
    match *v {
        EmptyRoot(want) => {
            assert_eq!(empty_root(), h(want));
            assert_eq!(merkle_root(&[]), h(want));
        }
        Leaf { input, hash } => assert_eq!(leaf_hash(input), h(hash), "leaf {input:?}"),
        Root { size, root } => {
            assert_eq!(merkle_root(&leaves[..size]), h(root), "root of size {size}");
            let tree: memwarden_log::CompactTree = leaves[..size].iter().copied().collect();
            assert_eq!(tree.root(), h(root), "compact root of size {size}");
        }
        Inclusion { index, size, proof } => {
            let want = hashes(proof);
            let got = inclusion_proof(&leaves[..size], index).expect("proof");
            assert_eq!(got, want, "inclusion proof ({index}, {size})");
            let root = merkle_root(&leaves[..size]);
            verify_inclusion(&leaves[index as usize], index, size as u64, &want, &root)
                .expect("known inclusion proof verifies");
        }
        Consistency { old, new, proof } => {
            let want = hashes(proof);
            let got = consistency_proof(&leaves[..new], old as u64).expect("proof");
            assert_eq!(got, want, "consistency proof ({old}, {new})");
            let old_root = merkle_root(&leaves[..old]);
            let new_root = merkle_root(&leaves[..new]);
            verify_consistency(old as u64, new as u64, &old_root, &new_root, &want)
                .expect("known consistency proof verifies");
        }
    }
}

#[test]
fn rfc6962_known_answers() {
    for v in VECTORS {
        check(v);
    }
}

#[test]
fn trivial_and_invalid_cases() {
    let leaves = leaves();
    let some = h("abacaba000000000000000000000000000000000000000000060061e00123456");
    let empty = empty_root();
    // No inclusion in an empty tree, nor past the end.
    assert_eq!(
        inclusion_proof(&[], 0),
        Err(ProofError::IndexOutOfRange { index: 0, size: 0 })
    );
    assert!(inclusion_proof(&leaves, 8).is_err());
    for (index, size) in [(0, 0), (1, 0), (2, 1)] {
        assert!(verify_inclusion(&some, index, size, &[], &empty).is_err());
    }
    // A one-leaf tree's root is the leaf itself, with an empty proof.
    verify_inclusion(&leaves[0], 0, 1, &[], &leaves[0]).expect("single leaf");
    assert!(verify_inclusion(&leaves[0], 0, 1, &[], &leaves[1]).is_err());

    // Consistency: trivial sizes need an empty proof.
    let r1 = merkle_root(&leaves[..1]);
    let r2 = merkle_root(&leaves[..2]);
    verify_consistency(0, 0, &empty, &empty, &[]).expect("0 -> 0");
    verify_consistency(0, 1, &empty, &r1, &[]).expect("0 -> 1");
    verify_consistency(1, 1, &r1, &r1, &[]).expect("1 -> 1");
    assert!(
        verify_consistency(1, 1, &r1, &r2, &[]).is_err(),
        "same size, other root"
    );
    assert!(
        verify_consistency(0, 1, &some, &r1, &[]).is_err(),
        "size 0 needs the empty root"
    );
    assert!(
        verify_consistency(1, 1, &r1, &r1, &[empty]).is_err(),
        "non-empty trivial proof"
    );
    assert!(
        verify_consistency(0, 1, &empty, &r1, &[empty]).is_err(),
        "non-empty trivial proof"
    );
    assert!(
        verify_consistency(1, 0, &r1, &empty, &[]).is_err(),
        "time travel"
    );
    assert!(
        verify_consistency(2, 1, &r2, &r1, &[]).is_err(),
        "time travel"
    );
    assert!(
        verify_consistency(1, 2, &r1, &r2, &[]).is_err(),
        "empty proof"
    );
    assert_eq!(consistency_proof(&leaves, 0), Ok(vec![]));
    assert_eq!(consistency_proof(&leaves, 8), Ok(vec![]));
    assert!(consistency_proof(&leaves, 9).is_err());
}
