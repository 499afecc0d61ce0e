//! `Store::commit_atomic`: one operation's mutations commit all together or not at all (rows,
//! log entries, vectors, catalog changes), still group-committed with concurrent callers.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod common;

use common::*;
use memwarden_core::prelude::*;
use memwarden_store::{BATCH_MUTATIONS_MAX, CommitError, Mutation, Store};
use std::sync::Arc;

fn revocation(store: &dyn Store, n: u64) -> Mutation {
    let item = store.item(&tenant(), &id(n)).unwrap().unwrap();
    Mutation::Revocation(Authority::default().admit_revocation(&principal("ana", PrincipalKind::Agent), &item, "test").unwrap())
}

fn searchable(store: &dyn Store, n: u64) -> bool {
    store.search(&tenant(), &ns(), &vector(n), 10, &pid("ben")).unwrap().iter().any(|h| h.item.id() == id(n))
}

#[test]
fn an_atomic_commit_applies_every_mutation_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    register(&store);
    let before = store.log_len();
    let rs = store.commit_atomic(1, vec![item_mutation("ana", 1, "one"), item_mutation("ana", 2, "two"), item_mutation("ana", 3, "three")]).unwrap().unwrap();
    assert_eq!(rs.len(), 3);
    for w in rs.windows(2) {
        assert!(w[0].log_index < w[1].log_index, "receipts in mutation order");
    }
    assert_eq!(store.log_len(), before + 3);
    for n in 1..=3 {
        assert!(store.item(&tenant(), &id(n)).unwrap().is_some());
        assert!(searchable(&store, n));
    }
    assert!(store.commit_atomic(1, Vec::new()).unwrap().unwrap().is_empty());
    assert!(store.verify_log().unwrap().is_ok());
}

/// The third mutation fails (its id exists): none of the operation is applied — not the new
/// item's row or vector, not the revocation's status or catalog change, not a log entry.
#[test]
fn a_failing_mutation_leaves_nothing_of_its_operation() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    register(&store);
    write(&store, 1, "first");
    let len = store.log_len();
    let indexed = store.indexed_count();
    let r = store.commit_atomic(2, vec![item_mutation("ana", 2, "second"), revocation(&store, 1), item_mutation("ana", 1, "dup")]).unwrap();
    assert_eq!(r, Err(CommitError::ItemExists(id(1).to_string())));
    assert_eq!(store.log_len(), len, "no log entry");
    assert_eq!(store.indexed_count(), indexed, "no vector");
    assert!(store.item(&tenant(), &id(2)).unwrap().is_none(), "no row");
    assert_eq!(store.item(&tenant(), &id(1)).unwrap().unwrap().status(), Status::Active, "no status change");
    assert!(searchable(&store, 1), "no catalog change");
    assert!(!searchable(&store, 2));
    // The same operation without the bad mutation commits, and the store still verifies.
    let rs = store.commit_atomic(3, vec![item_mutation("ana", 2, "second"), revocation(&store, 1)]).unwrap().unwrap();
    assert_eq!(rs.len(), 2);
    assert!(!searchable(&store, 1));
    assert!(searchable(&store, 2));
    assert!(store.verify_log().unwrap().is_ok());
    drop(store);
    let store = open(dir.path());
    assert_eq!(store.item(&tenant(), &id(1)).unwrap().unwrap().status(), Status::Revoked);
}

#[test]
fn a_batch_over_the_limit_is_refused_whole() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    register(&store);
    let len = store.log_len();
    let muts: Vec<Mutation> = (0..=BATCH_MUTATIONS_MAX as u64).map(|n| item_mutation("ana", 10 + n, "x")).collect();
    assert_eq!(store.commit_atomic(1, muts).unwrap(), Err(CommitError::BatchTooLarge(BATCH_MUTATIONS_MAX + 1)));
    assert_eq!(store.log_len(), len);
}

/// Atomic and plain callers racing: every caller gets its own outcome, a failing atomic
/// operation costs the others nothing, and the log has exactly the successful entries.
#[test]
fn concurrent_atomic_operations_are_group_committed_independently() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(open(dir.path()));
    register(&*store);
    write(&*store, 1, "taken");
    let len = store.log_len();
    let threads: Vec<_> = (0..8u64)
        .map(|t| {
            let store = Arc::clone(&store);
            std::thread::spawn(move || {
                let mut ok = 0u64;
                for i in 0..20u64 {
                    let base = 1000 + t * 100 + i * 3;
                    let mut op = vec![item_mutation("ana", base, "a"), item_mutation("ana", base + 1, "b")];
                    let fails = (t + i) % 3 == 0;
                    if fails {
                        op.push(item_mutation("ana", 1, "dup"));
                    }
                    match store.commit_atomic(base, op).unwrap() {
                        Ok(rs) => {
                            assert!(!fails);
                            assert_eq!(rs.len(), 2);
                            ok += 2;
                        }
                        Err(e) => {
                            assert!(fails, "{e}");
                            assert!(store.item(&tenant(), &id(base)).unwrap().is_none());
                        }
                    }
                    // A plain commit in between.
                    store.commit(base, vec![item_mutation("ana", base + 2, "c")]).unwrap().pop().unwrap().unwrap();
                    ok += 1;
                }
                ok
            })
        })
        .collect();
    let written: u64 = threads.into_iter().map(|t| t.join().unwrap()).sum();
    assert_eq!(store.log_len(), len + written);
    assert_eq!(store.count(&tenant()).unwrap(), 1 + written);
    assert!(store.verify_log().unwrap().is_ok());
}
