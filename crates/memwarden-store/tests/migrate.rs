//! Stores written by earlier builds open (migrate) under this one. `tests/fixtures/schema4` is
//! a store written by the schema-4 build (commit 8f3f02e; generator in
//! `tests/fixtures/legacy_fixture.rs`): one global verdict log, the signing key inside the data
//! directory, rows not bound to the log. Two tenants, each with principals, shared / private /
//! quarantined / revoked / erased memories with vectors, an attestation, a tainted session, a
//! feedback (guard state and reputation), lineage events and a decision that consumed a grant.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod common;

use common::*;
use memwarden_core::prelude::*;
use memwarden_store::{SqliteStore, Store, StoreError};
use std::path::Path;

const NONCE: [u8; 16] = [7; 16];

fn fixture(root: &Path) {
    legacy_fixture(root);
}

fn tid(t: &str) -> TenantId {
    TenantId::new(t).unwrap()
}

fn item_id(n: u64) -> ItemId {
    id(n)
}

/// What the fixture holds, per tenant, read through the migrated store.
fn assert_world(store: &SqliteStore) {
    for (t, base) in [("acme", 0u64), ("globex", 100u64)] {
        let tenant = tid(t);
        assert_eq!(store.principals(&tenant).unwrap().len(), 4, "{t}");
        assert_eq!(store.principal(&tenant, &pid("uma")).unwrap().unwrap().kind, PrincipalKind::User);
        assert_eq!(store.item(&tenant, &item_id(base + 1)).unwrap().unwrap().guard().successes, 1, "{t}: the feedback's guard state");
        assert_eq!(store.item(&tenant, &item_id(base + 3)).unwrap().unwrap().status(), Status::Quarantined);
        assert_eq!(store.item(&tenant, &item_id(base + 4)).unwrap().unwrap().status(), Status::Revoked);
        assert!(store.item(&tenant, &item_id(base + 5)).unwrap().is_none(), "{t}: erased");
        assert!(store.grant_used(&tenant, &NONCE).unwrap(), "{t}: the consumed grant stays consumed");
        assert!(!store.grant_used(&tenant, &[8; 16]).unwrap());
        assert!(store.session(&tenant, &pid("ana"), &SessionId::new("s1").unwrap()).unwrap().is_some());
        assert_eq!(store.reputation(&tenant, &pid("ana")).unwrap(), Some(0.25));
        assert_eq!(store.attestations_of(&tenant, "payee", &NormValue::new(ValueKind::Account, "ACCT-9").unwrap()).unwrap().len(), 1);
        let order = store.items_in_order(&tenant, None, 100).unwrap();
        assert_eq!(order.len(), 6, "{t}");
        assert!(order.windows(2).all(|w| w[0].log_index < w[1].log_index));
        assert_eq!(order.iter().filter(|o| o.erased).count(), 1);
        assert_eq!(store.lineage_events(&tenant, None, 100).unwrap().len(), 2, "{t}: the read event and the erasure");
        // Private stays private, shared is found.
        let hits = store.search(&tenant, &Namespace::new("notes").unwrap(), &fixture_vector(base + 2), 10, &pid("ben")).unwrap();
        assert!(hits.iter().all(|h| h.item.id() != item_id(base + 2)));
        assert!(hits.iter().any(|h| h.item.id() == item_id(base + 1)));
    }
    assert!(store.verify_log().unwrap().is_ok(), "{:?}", store.verify_log().unwrap().problem);
    // One log per tenant, each opening with a genesis that names it and the legacy log it
    // continues; every entry of the tenant's in legacy order.
    assert_eq!(store.tenants(), vec![tid("acme"), tid("globex")]);
    for t in ["acme", "globex"] {
        let tenant = tid(t);
        assert!(store.verify_log_of(&tenant).unwrap().is_ok());
        let entries = store.log_entries_of(&tenant, 0, store.log_len_of(&tenant)).unwrap();
        let genesis: serde_json::Value = serde_json::from_slice(&memwarden_log::Entry::decode(&entries[0]).unwrap().body).unwrap();
        assert_eq!(genesis["tenant"], t);
        assert_eq!(genesis["legacy"]["size"], 38, "{genesis}: the 37 entries of the schema-4 log and the one that adopted its rows");
        let legacy: Vec<u64> = entries[1..]
            .iter()
            .filter_map(|e| serde_json::from_slice::<serde_json::Value>(&memwarden_log::Entry::decode(e).unwrap().body).ok())
            .filter_map(|b| b["legacy_index"].as_u64())
            .collect();
        assert!(legacy.len() >= 15 && legacy.windows(2).all(|w| w[0] < w[1]), "{t}: {legacy:?}");
    }
}


#[test]
fn a_schema_4_store_is_migrated_bound_and_its_key_moved_out() {
    let root = tempfile::tempdir().unwrap();
    fixture(root.path());
    {
        let store = open(root.path());
        assert_world(&store);
    }
    assert!(root.path().join("keys").join("log.ed25519").exists(), "the key is in the key directory");
    assert!(!root.path().join("data").join("keys").exists(), "and no longer in the data directory");
    // Reopens, verifies offline, and the rows are now bound: an edit is caught.
    assert_world(&open(root.path()));
    assert!(SqliteStore::verify_dir_with(&root.path().join("data"), &config(root.path())).unwrap().is_ok());
    {
        let conn = rusqlite::Connection::open(db(root.path())).unwrap();
        conn.execute("UPDATE items SET record = replace(record, '\"quarantined\"', '\"active\"') WHERE id = ?1", [item_id(3).as_bytes().as_slice()]).unwrap();
    }
    let store = open(root.path());
    assert!(matches!(store.item(&tid("acme"), &item_id(3)), Err(StoreError::ItemTampered { .. })));
    assert!(!store.verify_log().unwrap().is_ok());
}

#[test]
fn a_legacy_store_whose_log_does_not_verify_is_refused_and_left_as_it_was() {
    let root = tempfile::tempdir().unwrap();
    fixture(root.path());
    SqliteStore::tamper_log_entry(&root.path().join("data"), 5).unwrap();
    match SqliteStore::open(&root.path().join("data"), config(root.path())) {
        Err(StoreError::LogTampered(m)) => assert!(m.contains("first bad index 5"), "{m}"),
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("a tampered legacy store was migrated"),
    }
    let conn = rusqlite::Connection::open(db(root.path())).unwrap();
    let schema: i64 = conn.query_row("SELECT value FROM meta WHERE key = 'schema'", [], |r| r.get(0)).unwrap();
    assert_eq!(schema, 4, "nothing adopted");
    assert!(root.path().join("data").join("keys").join("log.ed25519").exists(), "the key was not moved either");
}

/// Issue 36: the lexical index of an earlier build (tenant and namespace as unindexed columns,
/// compared row by row) is rebuilt at open into the scoped layout, and finds what it found.
#[test]
fn a_lexical_index_of_the_earlier_layout_is_rebuilt_at_open() {
    let root = tempfile::tempdir().unwrap();
    {
        let store = open(root.path());
        register(&store);
        write(&store, 1, "the offsite is in Lisbon");
        write(&store, 2, "lunch with the supplier");
    }
    {
        let conn = rusqlite::Connection::open(db(root.path())).unwrap();
        conn.execute_batch(
            "DROP TABLE items_fts;
             CREATE VIRTUAL TABLE items_fts USING fts5(content, tenant UNINDEXED, namespace UNINDEXED, tokenize = 'unicode61 remove_diacritics 2');
             INSERT INTO items_fts(rowid, content, tenant, namespace) SELECT rowid, json_extract(record, '$.content'), tenant, namespace FROM items;",
        )
        .unwrap();
    }
    let store = open(root.path());
    let hits = store.search_lexical(&tenant(), &ns(), "where is the offsite?", &vector(9), 5, &pid("ana")).unwrap();
    assert_eq!(hits.iter().map(|h| h.item.id()).collect::<Vec<_>>(), vec![id(1)]);
    let other = Namespace::new("other").unwrap();
    assert!(store.search_lexical(&tenant(), &other, "offsite", &vector(9), 5, &pid("ana")).unwrap().is_empty());
    let conn = rusqlite::Connection::open(db(root.path())).unwrap();
    let sql: String = conn.query_row("SELECT sql FROM sqlite_master WHERE name = 'items_fts'", [], |r| r.get(0)).unwrap();
    assert!(sql.contains("fts5(terms,"), "{sql}");
}
