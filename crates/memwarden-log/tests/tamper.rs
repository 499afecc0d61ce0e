//! The verdict log end to end: appending, checkpoints, proofs, and tamper
//! detection by `verify_log` at every position.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use ed25519_dalek::{SigningKey, VerifyingKey};
use memwarden_log::{
    AppendError, CheckpointError, Entry, EntryKind, Hash, Problem, ProofError, SignedCheckpoint,
    VerdictLog, verify_consistency, verify_inclusion, verify_log,
};

const N: usize = 50;
/// Checkpoints are taken every `CP_EVERY` entries (7, 14, ..., 49): the last
/// entry (49) is covered only by `expected`.
const CP_EVERY: usize = 7;

fn key() -> SigningKey {
    SigningKey::from_bytes(&[42u8; 32])
}

fn other_key() -> SigningKey {
    SigningKey::from_bytes(&[43u8; 32])
}

fn vk() -> VerifyingKey {
    key().verifying_key()
}

/// A stored log: encoded entries, checkpoints, and the recorded (size, head).
struct Fixture {
    log: VerdictLog,
    stored: Vec<Vec<u8>>,
    checkpoints: Vec<SignedCheckpoint>,
}

impl Fixture {
    fn expected(&self) -> Option<(u64, Hash)> {
        Some((self.log.len(), self.log.head()))
    }

    fn verify(&self, stored: &[Vec<u8>]) -> memwarden_log::VerifyReport {
        verify_log(stored, &self.checkpoints, &vk(), self.expected())
    }
}

fn body(i: usize) -> Vec<u8> {
    format!(
        "{{\"event\":{i},\"memory\":\"m{}\",\"verdict\":\"allow\"}}",
        i * 7919
    )
    .into_bytes()
}

fn fixture() -> Fixture {
    let mut log = VerdictLog::new();
    let mut stored = Vec::new();
    let mut checkpoints = Vec::new();
    for i in 0..N {
        let kind = if i == 0 {
            EntryKind::Genesis
        } else {
            EntryKind::ALL[1 + i % 15]
        };
        let entry = log.prepare(kind, 1_700_000_000_000 + i as u64 * 1000, body(i));
        log.append(&entry).unwrap();
        stored.push(entry.encode());
        if (i + 1) % CP_EVERY == 0 {
            checkpoints.push(log.checkpoint(&key(), 1_700_000_000_000 + i as u64 * 1000 + 1));
        }
    }
    Fixture {
        log,
        stored,
        checkpoints,
    }
}

fn decode(bytes: &[u8]) -> Entry {
    Entry::decode(bytes).unwrap()
}

/// A well-formed forgery for slot `p`: right index, right prev, other body.
fn plausible_forgery(f: &Fixture, p: usize) -> Vec<u8> {
    let prev = if p == 0 {
        [0u8; 32]
    } else {
        f.log.leaves()[p - 1]
    };
    Entry {
        index: p as u64,
        prev,
        time_ms: 1,
        kind: EntryKind::Decision,
        body: b"forged".to_vec(),
    }
    .encode()
}

#[test]
fn untampered_log_verifies() {
    let f = fixture();
    let report = f.verify(&f.stored);
    assert!(report.is_ok(), "{:?}", report.problem);
    assert_eq!(report.entries, N as u64);
    assert_eq!(report.root, f.log.root());
    assert_eq!(report.head, f.log.head());
    assert_eq!(report.checkpoints_checked, N / CP_EVERY);
    assert_eq!(report.first_bad_index(), None);
    // Without any anchor too.
    assert!(verify_log(&f.stored, &[], &vk(), None).is_ok());
    // The empty log.
    assert!(verify_log(&[], &[], &vk(), Some((0, [0u8; 32]))).is_ok());
    let empty_cp = VerdictLog::new().checkpoint(&key(), 5);
    let report = verify_log(&[], &[empty_cp], &vk(), None);
    assert!(report.is_ok());
    assert_eq!(report.checkpoints_checked, 1);
}

/// For every position, a changed body byte is named at that position.
#[test]
fn changed_body_is_named_at_every_position() {
    let f = fixture();
    for p in 0..N {
        let mut stored = f.stored.clone();
        let body_start = Entry::HEADER_BYTES;
        let at = body_start + p % body(p).len();
        stored[p][at] ^= 0x20;
        let report = f.verify(&stored);
        let want = if p == N - 1 {
            // The last entry has no successor: only the recorded head sees it.
            Problem::HeadMismatch {
                index: p as u64,
                expected: f.log.head(),
                found: memwarden_log::leaf_hash(&stored[p]),
            }
        } else {
            Problem::BrokenLink { index: p as u64 }
        };
        assert_eq!(report.problem, Some(want), "changed body at {p}");
        assert_eq!(report.first_bad_index(), Some(p as u64));
        // Without anchors, the successor's link still names p (the last
        // entry is then undetectable, which is what anchors are for).
        let bare = verify_log(&stored, &[], &vk(), None);
        if p == N - 1 {
            assert!(bare.is_ok());
        } else {
            assert_eq!(
                bare.first_bad_index(),
                Some(p as u64),
                "bare, changed body at {p}"
            );
        }
    }
}

/// For every position, a removed entry is named at that position.
#[test]
fn removed_entry_is_named_at_every_position() {
    let f = fixture();
    for p in 0..N {
        let mut stored = f.stored.clone();
        stored.remove(p);
        let report = f.verify(&stored);
        let want = if p == N - 1 {
            Problem::Truncated {
                expected: N as u64,
                found: p as u64,
            }
        } else {
            Problem::IndexMismatch {
                index: p as u64,
                found: p as u64 + 1,
            }
        };
        assert_eq!(report.problem, Some(want), "removed {p}");
        assert_eq!(report.first_bad_index(), Some(p as u64));
    }
}

/// For every position, swapping it with the next is named at that position.
#[test]
fn swapped_entries_are_named_at_every_position() {
    let f = fixture();
    for p in 0..N - 1 {
        let mut stored = f.stored.clone();
        stored.swap(p, p + 1);
        let report = f.verify(&stored);
        assert_eq!(
            report.problem,
            Some(Problem::IndexMismatch {
                index: p as u64,
                found: p as u64 + 1
            }),
            "swapped {p}"
        );
        let bare = verify_log(&stored, &[], &vk(), None);
        assert_eq!(bare.first_bad_index(), Some(p as u64));
    }
}

/// For every position, an entry inserted before it is named at that position,
/// whatever kind of forgery it is.
#[test]
fn inserted_entry_is_named_at_every_position() {
    let f = fixture();
    for p in 0..=N {
        // Well-formed: right index and prev for slot p.
        let mut stored = f.stored.clone();
        stored.insert(p, plausible_forgery(&f, p));
        let report = f.verify(&stored);
        let want = if p == N {
            // Appended after the recorded head: an unrecorded extension.
            Problem::Extended {
                expected: N as u64,
                found: N as u64 + 1,
            }
        } else {
            Problem::Inserted { index: p as u64 }
        };
        assert_eq!(report.problem, Some(want), "plausible insert before {p}");
        if p < N {
            let bare = verify_log(&stored, &[], &vk(), None);
            assert_eq!(
                bare.problem,
                Some(Problem::Inserted { index: p as u64 }),
                "bare {p}"
            );
        }

        // Wrong prev.
        let mut forged = decode(&plausible_forgery(&f, p));
        forged.prev = [0xAB; 32];
        let mut stored = f.stored.clone();
        stored.insert(p, forged.encode());
        let report = f.verify(&stored);
        assert_eq!(
            report.problem,
            Some(Problem::BrokenLink { index: p as u64 }),
            "bad-prev insert {p}"
        );
        if p < N {
            let bare = verify_log(&stored, &[], &vk(), None);
            assert_eq!(
                bare.first_bad_index(),
                Some(p as u64),
                "bare bad-prev insert {p}"
            );
        }

        // Wrong index (a stale copy of the previous entry, or a random one).
        let mut stored = f.stored.clone();
        if p > 0 {
            stored.insert(p, f.stored[p - 1].clone());
            let report = f.verify(&stored);
            assert_eq!(
                report.problem,
                Some(Problem::Inserted { index: p as u64 }),
                "replay before {p}"
            );
        }
        let mut forged = decode(&plausible_forgery(&f, p));
        forged.index = 1000;
        let mut stored = f.stored.clone();
        stored.insert(p, forged.encode());
        let report = f.verify(&stored);
        assert_eq!(
            report.problem,
            Some(Problem::IndexMismatch {
                index: p as u64,
                found: 1000
            }),
            "wrong-index insert {p}"
        );
    }
}

/// A replaced entry (a forgery in place of entry p) is named at p.
#[test]
fn replaced_entry_is_named_at_every_position() {
    let f = fixture();
    for p in 0..N - 1 {
        let mut stored = f.stored.clone();
        stored[p] = plausible_forgery(&f, p);
        assert_eq!(
            f.verify(&stored).problem,
            Some(Problem::BrokenLink { index: p as u64 })
        );
        let mut forged = decode(&plausible_forgery(&f, p));
        forged.prev = [1; 32];
        stored[p] = forged.encode();
        assert_eq!(
            f.verify(&stored).first_bad_index(),
            Some(p as u64),
            "replaced {p}"
        );
    }
}

#[test]
fn undecodable_entry_is_named() {
    let f = fixture();
    for p in [0, 17, N - 1] {
        let mut stored = f.stored.clone();
        stored[p][0] ^= 1; // magic
        let report = f.verify(&stored);
        assert!(
            matches!(report.problem, Some(Problem::Undecodable { index, .. }) if index == p as u64)
        );
        let mut stored = f.stored.clone();
        stored[p].push(0); // trailing byte
        assert_eq!(f.verify(&stored).first_bad_index(), Some(p as u64));
    }
}

/// A cut tail is caught by `expected` and by checkpoints beyond the cut.
#[test]
fn truncated_tail_is_detected() {
    let f = fixture();
    for m in 0..N {
        let stored = &f.stored[..m];
        // Via expected only.
        let report = verify_log(stored, &[], &vk(), f.expected());
        assert_eq!(
            report.problem,
            Some(Problem::Truncated {
                expected: N as u64,
                found: m as u64
            })
        );
        assert_eq!(report.first_bad_index(), Some(m as u64));
        // Via checkpoints only: caught when a checkpoint lies beyond the cut.
        let report = verify_log(stored, &f.checkpoints, &vk(), None);
        let beyond = f
            .checkpoints
            .iter()
            .map(|c| c.checkpoint.size)
            .find(|&s| s > m as u64);
        match beyond {
            Some(size) => assert_eq!(
                report.problem,
                Some(Problem::CheckpointBeyondLog {
                    size,
                    len: m as u64
                }),
                "cut to {m}"
            ),
            None => assert!(report.is_ok(), "cut to {m}: no anchor covers it"),
        }
        // Both: the checkpoint is checked first; the index named is the same.
        assert_eq!(f.verify(stored).first_bad_index(), Some(m as u64));
    }
}

/// A changed last entry under a checkpoint: the mismatching checkpoint bounds
/// the bad entry after the previous matching checkpoint.
#[test]
fn changed_last_entry_caught_by_checkpoint() {
    let mut f = fixture();
    f.checkpoints.push(f.log.checkpoint(&key(), 9));
    let mut stored = f.stored.clone();
    *stored[N - 1].last_mut().unwrap() ^= 1;
    let report = verify_log(&stored, &f.checkpoints, &vk(), None);
    assert_eq!(
        report.problem,
        Some(Problem::CheckpointRootMismatch {
            size: N as u64,
            first_bad_after: 49
        })
    );
    assert_eq!(report.first_bad_index(), Some(N as u64 - 1));
    assert_eq!(report.checkpoints_checked, N / CP_EVERY);
    // With a checkpoint at 50 but none at 49, the range is 42..50.
    let cps: Vec<_> = f
        .checkpoints
        .iter()
        .filter(|c| c.checkpoint.size != 49)
        .cloned()
        .collect();
    let report = verify_log(&stored, &cps, &vk(), None);
    assert_eq!(
        report.problem,
        Some(Problem::CheckpointRootMismatch {
            size: N as u64,
            first_bad_after: 42
        })
    );
}

/// An attacker who rewrites entry 30 and re-chains everything after it
/// leaves a self-consistent chain: only anchors catch it, and the first bad
/// index named is the lower end of the range the checkpoints leave open.
#[test]
fn rechained_rewrite_is_bounded_by_checkpoints() {
    let f = fixture();
    let mut forged = VerdictLog::from_leaves(f.log.leaves()[..30].to_vec());
    let mut stored = f.stored[..30].to_vec();
    for i in 30..N {
        let old = decode(&f.stored[i]);
        let body = if i == 30 {
            b"rewritten".to_vec()
        } else {
            old.body
        };
        let e = forged.prepare(old.kind, old.time_ms, body);
        forged.append(&e).unwrap();
        stored.push(e.encode());
    }
    assert!(
        verify_log(&stored, &[], &vk(), None).is_ok(),
        "self-consistent without anchors"
    );
    let report = f.verify(&stored);
    assert_eq!(
        report.problem,
        Some(Problem::CheckpointRootMismatch {
            size: 35,
            first_bad_after: 28
        })
    );
    let bad = report.first_bad_index().unwrap();
    assert!(bad <= 30);
    // Only `expected`: the head differs.
    let report = verify_log(&stored, &[], &vk(), f.expected());
    assert!(matches!(
        report.problem,
        Some(Problem::HeadMismatch { index: 49, .. })
    ));
}

#[test]
fn checkpoint_signed_with_another_key_is_rejected() {
    let f = fixture();
    let forged = f.log.checkpoint(&other_key(), 7);
    assert_eq!(forged.verify(&vk()), Err(CheckpointError::UntrustedKey));
    forged.verify(&other_key().verifying_key()).unwrap();
    // Claiming the trusted key does not help.
    let mut claimed = forged.clone();
    claimed.key = vk().to_bytes();
    assert_eq!(claimed.verify(&vk()), Err(CheckpointError::BadSignature));

    let mut cps = f.checkpoints.clone();
    cps.push(forged);
    let report = verify_log(&f.stored, &cps, &vk(), f.expected());
    assert_eq!(
        report.problem,
        Some(Problem::BadSignature { size: N as u64 })
    );
    assert!(!report.is_ok());
    assert_eq!(report.first_bad_index(), None);
    assert_eq!(report.checkpoints_checked, N / CP_EVERY);
}

#[test]
fn tampered_checkpoint_is_rejected() {
    let f = fixture();
    let good = &f.checkpoints[2];
    good.verify(&vk()).unwrap();
    let mut bad_root = good.clone();
    bad_root.checkpoint.root[0] ^= 1;
    assert_eq!(bad_root.verify(&vk()), Err(CheckpointError::BadSignature));
    let mut bad_size = good.clone();
    bad_size.checkpoint.size += 1;
    assert_eq!(bad_size.verify(&vk()), Err(CheckpointError::BadSignature));
    let mut bad_sig = good.clone();
    bad_sig.signature[10] ^= 1;
    assert_eq!(bad_sig.verify(&vk()), Err(CheckpointError::BadSignature));

    let report = verify_log(&f.stored, &[bad_root.clone()], &vk(), f.expected());
    assert_eq!(
        report.problem,
        Some(Problem::BadSignature {
            size: good.checkpoint.size
        })
    );
    assert_eq!(report.checkpoints_checked, 0);
    // An entry problem takes precedence over a bad checkpoint.
    let mut stored = f.stored.clone();
    stored.remove(3);
    let report = verify_log(&stored, &[bad_root], &vk(), f.expected());
    assert_eq!(report.first_bad_index(), Some(3));
}

#[test]
fn problems_display_one_line_naming_the_index() {
    let f = fixture();
    let mut stored = f.stored.clone();
    stored.swap(4, 5);
    let problems = [
        f.verify(&stored).problem.unwrap(),
        Problem::Undecodable {
            index: 3,
            error: memwarden_log::DecodeError::BadMagic,
        },
        Problem::Inserted { index: 3 },
        Problem::BrokenLink { index: 3 },
        Problem::Truncated {
            expected: 9,
            found: 3,
        },
        Problem::Extended {
            expected: 3,
            found: 9,
        },
        Problem::HeadMismatch {
            index: 3,
            expected: [1; 32],
            found: [2; 32],
        },
        Problem::CheckpointRootMismatch {
            size: 9,
            first_bad_after: 3,
        },
        Problem::CheckpointBeyondLog { size: 9, len: 3 },
    ];
    for (i, p) in problems.iter().enumerate() {
        let text = p.to_string();
        let want = if i == 0 { 4 } else { 3 };
        assert!(
            text.starts_with(&format!("first bad index {want}:")),
            "{text}"
        );
        assert!(!text.contains('\n'));
        assert_eq!(p.first_bad_index(), Some(want));
    }
    assert!(
        Problem::BadSignature { size: 7 }
            .to_string()
            .contains("size 7")
    );
}

#[test]
fn verdict_log_api() {
    let f = fixture();
    let log = &f.log;
    assert_eq!(log.len(), N as u64);
    assert!(!log.is_empty());
    assert_eq!(log.head(), log.leaves()[N - 1]);
    assert_eq!(log.root(), memwarden_log::merkle_root(log.leaves()));
    assert_eq!(VerdictLog::from_leaves(log.leaves().to_vec()), *log);
    assert_eq!(VerdictLog::new().head(), [0u8; 32]);
    assert!(VerdictLog::new().is_empty());

    // Append checks.
    let mut copy = log.clone();
    let next = copy.prepare(EntryKind::Admin, 5, b"x".to_vec());
    assert_eq!(next.index, N as u64);
    assert_eq!(next.prev, log.head());
    let mut wrong = next.clone();
    wrong.index += 1;
    assert_eq!(
        copy.append(&wrong),
        Err(AppendError::IndexMismatch {
            expected: N as u64,
            found: N as u64 + 1
        })
    );
    let mut wrong = next.clone();
    wrong.prev = [9; 32];
    assert!(matches!(
        copy.append(&wrong),
        Err(AppendError::PrevMismatch { .. })
    ));
    let mut wrong = next.clone();
    wrong.body = vec![0; Entry::BODY_BYTES_MAX + 1];
    assert!(matches!(
        copy.append(&wrong),
        Err(AppendError::BodyTooLarge { .. })
    ));
    assert_eq!(copy, *log, "failed appends change nothing");
    assert_eq!(copy.append(&next), Ok(next.leaf()));

    // Proofs against every checkpoint.
    for cp in &f.checkpoints {
        let c = &cp.checkpoint;
        assert_eq!(log.root_at(c.size), Ok(c.root));
        for index in [0, c.size / 2, c.size - 1] {
            let proof = log.inclusion_proof(index, c.size).unwrap();
            verify_inclusion(
                &log.leaves()[index as usize],
                index,
                c.size,
                &proof,
                &c.root,
            )
            .unwrap();
        }
        let proof = log.consistency_proof(c.size, log.len()).unwrap();
        verify_consistency(c.size, log.len(), &c.root, &log.root(), &proof).unwrap();
    }
    assert_eq!(log.root_at(0), Ok(memwarden_log::empty_root()));
    assert_eq!(
        log.root_at(N as u64 + 1),
        Err(ProofError::SizeBeyondLog {
            size: N as u64 + 1,
            len: N as u64
        })
    );
    assert!(log.inclusion_proof(3, N as u64 + 1).is_err());
    assert!(log.inclusion_proof(10, 10).is_err());
    assert!(log.consistency_proof(10, 5).is_err());
    assert!(log.consistency_proof(10, N as u64 + 1).is_err());
}

#[test]
fn checkpoint_serde_uses_hex() {
    let f = fixture();
    let cp = &f.checkpoints[0];
    let json = serde_json::to_value(cp).unwrap();
    assert_eq!(json["checkpoint"]["root"], hex::encode(cp.checkpoint.root));
    assert_eq!(json["checkpoint"]["head"], hex::encode(cp.checkpoint.head));
    assert_eq!(json["key"], hex::encode(vk().to_bytes()));
    assert_eq!(json["signature"], hex::encode(cp.signature));
    let back: SignedCheckpoint = serde_json::from_value(json.clone()).unwrap();
    assert_eq!(&back, cp);
    back.verify(&vk()).unwrap();
    let mut short = json;
    short["key"] = serde_json::Value::String("abcd".into());
    assert!(serde_json::from_value::<SignedCheckpoint>(short).is_err());

    let bytes = cp.checkpoint.signing_bytes();
    assert!(bytes.starts_with(b"memwarden-checkpoint-v1\n"));
    assert_eq!(bytes.len(), 24 + 8 + 32 + 32 + 8);
}

#[test]
fn entry_kinds() {
    for (tag, kind) in EntryKind::ALL.iter().enumerate() {
        assert_eq!(EntryKind::try_from(tag as u8), Ok(*kind));
        assert_eq!(u8::from(*kind), tag as u8);
        assert_eq!(EntryKind::from_name(kind.as_str()), Some(*kind));
        assert_eq!(kind.to_string(), kind.as_str());
        assert_eq!(
            serde_json::to_string(kind).unwrap(),
            format!("\"{}\"", kind.as_str())
        );
        assert_eq!(
            serde_json::from_str::<EntryKind>(&format!("\"{kind}\"")).unwrap(),
            *kind
        );
    }
    assert_eq!(EntryKind::GrantUsed.as_str(), "grant_used");
    assert_eq!(EntryKind::ToolCall as u8, 4);
    assert_eq!(EntryKind::Admin as u8, 15);
    assert_eq!(EntryKind::SessionTaint as u8, 16);
    assert_eq!(EntryKind::Lineage as u8, 17);
    for tag in 18..=255u8 {
        assert!(EntryKind::try_from(tag).is_err());
    }
    assert_eq!(EntryKind::from_name("Write"), None);
}

#[test]
fn decode_limits() {
    use memwarden_log::DecodeError;
    let e = Entry {
        index: 1,
        prev: [3; 32],
        time_ms: 4,
        kind: EntryKind::Write,
        body: vec![5; 10],
    };
    let bytes = e.encode();
    assert_eq!(&bytes[..4], b"MWL1");
    assert_eq!(
        Entry::decode(&bytes[..10]),
        Err(DecodeError::TooShort { len: 10 })
    );
    assert_eq!(Entry::decode(&[]), Err(DecodeError::TooShort { len: 0 }));
    assert_eq!(
        Entry::decode(&bytes[..bytes.len() - 1]),
        Err(DecodeError::Truncated {
            expected: 10,
            found: 9
        })
    );
    // The largest body is accepted; one more byte is not.
    let max = Entry {
        body: vec![1; Entry::BODY_BYTES_MAX],
        ..e.clone()
    };
    assert_eq!(Entry::decode(&max.encode()).unwrap(), max);
    let over = Entry {
        body: vec![1; Entry::BODY_BYTES_MAX + 1],
        ..e.clone()
    };
    assert_eq!(
        Entry::decode(&over.encode()),
        Err(DecodeError::BodyTooLarge {
            len: Entry::BODY_BYTES_MAX as u32 + 1,
            max: Entry::BODY_BYTES_MAX
        })
    );
    // A huge declared length on a short input is rejected without allocating.
    let mut huge = bytes.clone();
    let len_at = Entry::HEADER_BYTES - 4;
    huge[len_at..len_at + 4].copy_from_slice(&u32::MAX.to_be_bytes());
    assert!(matches!(
        Entry::decode(&huge),
        Err(DecodeError::BodyTooLarge { .. })
    ));
}
