//! Compare-and-set on every read-modify-write of a stored memory: a revocation, promotion,
//! hold, update (of the superseded record) or guard-state feedback commits only if the row is
//! still at the version its gate saw; otherwise `CommitError::Conflict`. Racing every pair of
//! these on one memory from two threads gives exactly one winner per version, never loses a
//! revocation, and leaves the history (log entries, supersession chain) intact.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod common;

use common::*;
use memwarden_core::prelude::*;
use memwarden_log::{Entry, EntryKind};
use memwarden_store::{CommitError, Mutation, SqliteStore, Store};
use proptest::prelude::*;
use std::sync::{Arc, Barrier};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Revoke,
    Promote,
    Hold,
    Update,
    Feedback,
}

const KINDS: [Kind; 5] = [Kind::Revoke, Kind::Promote, Kind::Hold, Kind::Update, Kind::Feedback];

fn ana() -> Principal {
    principal("ana", PrincipalKind::Agent)
}

/// What the gate admits for `kind` on `item` as read (None: the gate refuses, e.g. revoking a
/// revoked memory). `fresh` is the id an update's new version takes.
fn mutation(kind: Kind, item: &MemoryItem, fresh: u64) -> Option<Mutation> {
    let gate = Authority::default();
    match kind {
        Kind::Revoke => gate.admit_revocation(&ana(), item, "race").ok().map(Mutation::Revocation),
        Kind::Promote => {
            let mut readers = match &item.scope().readers {
                Readers::All => return None,
                Readers::Only(s) => s.clone(),
            };
            readers.insert(PrincipalId::new(&format!("r{fresh}")).unwrap());
            gate.admit_promotion(&ana(), item, Readers::Only(readers), &[]).ok().map(Mutation::Promotion)
        }
        Kind::Hold => (item.status() == Status::Active).then(|| Mutation::Hold(gate.admit_hold(item, &pid("ana"), "race"))),
        Kind::Update => gate
            .admit_update(&ana(), item, format!("version {fresh}"), &Observed::default(), id(fresh), fresh)
            .ok()
            .map(|u| Mutation::Update { update: Box::new(u), embedding: Some(vector(fresh)) }),
        Kind::Feedback => {
            let mut guard = item.guard().clone();
            guard.successes += 1;
            Some(Mutation::Feedback {
                tenant: tenant(),
                actor: pid("uma"),
                guards: vec![(item.id(), item.version(), guard)],
                reputations: vec![],
                record: serde_json::json!({"race": fresh}),
            })
        }
    }
}

fn entry_kind(store: &SqliteStore, index: u64) -> EntryKind {
    Entry::decode(&store.log_entries_of(&tenant(), index, index + 1).unwrap()[0]).unwrap().kind
}

/// One race: every mutation built from the same read, committed from its own thread at once.
/// Returns the winner's kind (the memory after the race is the current one: the new version
/// when an update won).
fn race(store: &Arc<SqliteStore>, current: &mut ItemId, kinds: &[Kind], next_id: &mut u64) -> Option<Kind> {
    let read = store.item(&tenant(), current).unwrap().unwrap();
    let v = read.version();
    let mut built = Vec::new();
    for &k in kinds {
        *next_id += 1;
        if let Some(m) = mutation(k, &read, *next_id) {
            built.push((k, m, *next_id));
        }
    }
    if built.is_empty() {
        return None;
    }
    let len = store.log_len();
    let barrier = Arc::new(Barrier::new(built.len()));
    let threads: Vec<_> = built
        .into_iter()
        .map(|(k, m, fresh)| {
            let (store, barrier) = (Arc::clone(store), Arc::clone(&barrier));
            std::thread::spawn(move || {
                barrier.wait();
                (k, fresh, store.commit(fresh, vec![m]).unwrap().pop().unwrap())
            })
        })
        .collect();
    let outcomes: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    let winners: Vec<_> = outcomes.iter().filter(|(_, _, r)| r.is_ok()).collect();
    assert_eq!(winners.len(), 1, "exactly one winner at version {v}: {outcomes:?}");
    for (_, _, r) in outcomes.iter().filter(|(_, _, r)| r.is_err()) {
        assert_eq!(r, &Err(CommitError::Conflict { id: current.to_string() }), "{outcomes:?}");
    }
    let (kind, fresh, receipt) = winners[0];
    let receipt = receipt.as_ref().unwrap();
    // History: the winner's entries and nothing of the losers'.
    let entries = if *kind == Kind::Update { 2 } else { 1 };
    assert_eq!(store.log_len(), len + entries, "{kind:?} won: only its entries are logged");
    let after = store.item(&tenant(), current).unwrap().unwrap();
    assert!(after.version() > v, "the winner moved the version");
    match kind {
        Kind::Revoke => {
            assert_eq!(after.status(), Status::Revoked, "a winning revocation is never lost");
            assert_eq!(after.version(), receipt.log_index);
            assert_eq!(entry_kind(store, receipt.log_index), EntryKind::Revocation);
        }
        Kind::Promote => {
            assert!(after.scope().readers.admits(&PrincipalId::new(&format!("r{fresh}")).unwrap()));
            assert_eq!(entry_kind(store, receipt.log_index), EntryKind::Promotion);
        }
        Kind::Hold => {
            assert_eq!(after.status(), Status::Quarantined);
            assert_eq!(entry_kind(store, receipt.log_index), EntryKind::Decision);
        }
        Kind::Feedback => {
            assert_eq!(after.guard().successes, read.guard().successes + 1, "one feedback applied, not two");
            assert_eq!(entry_kind(store, receipt.log_index), EntryKind::Feedback);
        }
        Kind::Update => {
            assert_eq!(after.status(), Status::Superseded);
            assert_eq!(after.superseded_by(), Some(id(*fresh)));
            let new = store.item(&tenant(), &id(*fresh)).unwrap().unwrap();
            assert_eq!(new.supersedes(), Some(*current));
            assert_eq!(new.status(), Status::Active, "one active version");
            assert_eq!(entry_kind(store, receipt.log_index), EntryKind::Write);
            assert_eq!(after.version(), receipt.log_index + 1, "the supersession is the entry after the write");
            *current = id(*fresh);
        }
    }
    // The losers' would-be versions of an update never exist.
    Some(*kind)
}

fn fresh_memory(store: &SqliteStore, n: u64) -> ItemId {
    store.commit(n, vec![Mutation::Item { write: admitted("ana", n, "race me", true), embedding: Some(vector(n)) }]).unwrap().pop().unwrap().unwrap();
    id(n)
}

#[test]
fn every_pair_of_read_modify_writes_has_one_winner() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(open(dir.path()));
    register(&*store);
    let mut next = 1_000u64;
    for a in KINDS {
        for b in KINDS {
            for _ in 0..3 {
                next += 10;
                let mut current = fresh_memory(&store, next);
                let won = race(&store, &mut current, &[a, b], &mut next);
                assert!(won == Some(a) || won == Some(b), "{a:?} vs {b:?}: {won:?}");
            }
        }
    }
    assert!(store.verify_log().unwrap().is_ok());
}

/// A stale read never commits, even alone: the row moved on since the gate saw it.
#[test]
fn a_stale_version_conflicts_and_a_missing_row_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    register(&store);
    let m = fresh_memory(&store, 1);
    let stale = store.item(&tenant(), &m).unwrap().unwrap();
    let fb = mutation(Kind::Feedback, &stale, 2).unwrap();
    store.commit(2, vec![fb]).unwrap().pop().unwrap().unwrap();
    for k in KINDS {
        let r = store.commit(3, vec![mutation(k, &stale, 3).unwrap()]).unwrap().pop().unwrap();
        assert_eq!(r, Err(CommitError::Conflict { id: m.to_string() }), "{k:?}");
    }
    // The version 0 of a record no store returned never matches.
    let unread = admitted("ana", 9, "never stored", true);
    let r = store.commit(4, vec![mutation(Kind::Revoke, unread.item(), 4).unwrap()]).unwrap().pop().unwrap();
    assert_eq!(r, Err(CommitError::ItemMissing(id(9).to_string())));
}

/// Eight concurrent updates of one memory: one new version, seven conflicts (the outside attack
/// run's 8 PUTs left 8 active versions).
#[test]
fn eight_concurrent_updates_leave_one_active_version() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(open(dir.path()));
    register(&*store);
    let mut current = fresh_memory(&store, 1);
    let mut next = 100;
    assert_eq!(race(&store, &mut current, &[Kind::Update; 8], &mut next), Some(Kind::Update));
    let active = (101..=108).filter(|&n| store.item(&tenant(), &id(n)).unwrap().is_some_and(|i| i.status() == Status::Active)).count();
    assert_eq!(active, 1);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]
    /// Sequences of races (2 to 4 racers of any kinds) along one memory's life: each race has
    /// one winner and the state is exactly the winners' changes applied in order.
    #[test]
    fn races_along_a_memory_keep_one_history(rounds in prop::collection::vec(prop::collection::vec(0usize..5, 2..=4), 1..8)) {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(open(dir.path()));
        register(&*store);
        let mut next = 10_000u64;
        let mut current = fresh_memory(&store, next);
        let mut revoked = false;
        for kinds in rounds {
            let kinds: Vec<Kind> = kinds.into_iter().map(|i| KINDS[i]).collect();
            match race(&store, &mut current, &kinds, &mut next) {
                Some(Kind::Revoke) => revoked = true,
                Some(_) => {}
                None => {
                    next += 1;
                    current = fresh_memory(&store, next);
                    revoked = false;
                }
            }
            if revoked {
                prop_assert_eq!(store.item(&tenant(), &current).unwrap().unwrap().status(), Status::Revoked);
            }
        }
        prop_assert!(store.verify_log().unwrap().is_ok());
    }
}

/// A schema-3 store (no version column; the schema-4 fixture with its version column dropped)
/// opens: every row gets a version, and compare-and-set works on it at once.
#[test]
fn a_schema_3_store_is_migrated_to_versioned_rows() {
    let dir = tempfile::tempdir().unwrap();
    legacy_fixture(dir.path());
    {
        let conn = rusqlite::Connection::open(db(dir.path())).unwrap();
        conn.execute_batch("ALTER TABLE items DROP COLUMN version; UPDATE meta SET value = 3 WHERE key = 'schema';").unwrap();
    }
    let store = Arc::new(open(dir.path()));
    let m = id(1);
    let read = store.item(&tenant(), &m).unwrap().unwrap();
    assert!(read.version() > 0);
    let mut current = m;
    let mut next = 50;
    assert!(race(&store, &mut current, &[Kind::Revoke, Kind::Hold], &mut next).is_some());
}
