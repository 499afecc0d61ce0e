//! One verdict log per tenant (issue 19, item 2): each tenant its own chain (opening with a
//! genesis that names it), Merkle tree, checkpoints, proofs and witness; receipts and the
//! commit orders are per tenant; a tenant's tampering is named in its log and leaves the other
//! tenant's log verifying; the global view still answers the whole-store API.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod common;

use common::*;
use memwarden_core::prelude::*;
use memwarden_log::{Entry, EntryKind, Problem, verify_consistency, verify_inclusion};
use memwarden_store::{Mutation, Receipt, SqliteStore, Store, StoreError};
use std::path::Path;

fn globex() -> TenantId {
    TenantId::new("globex").unwrap()
}

fn in_tenant(t: &TenantId, id: &str) -> Principal {
    serde_json::from_value(serde_json::json!({"id": id, "tenant": t, "kind": "agent", "domain": null, "allow_listed": false, "public_key": null})).unwrap()
}

fn write_in(store: &SqliteStore, t: &TenantId, n: u64) -> Receipt {
    let req = WriteRequest::new(ns(), format!("note {n}"), Route::Direct);
    let w = Authority::default().admit_write(&in_tenant(t, "ana"), t, req, &[], id(n), n).unwrap();
    store.commit(n, vec![Mutation::Item { write: w, embedding: Some(vector(n)) }]).unwrap().pop().unwrap().unwrap()
}

/// Two tenants, interleaved: acme gets ana + 5 notes, globex gets ana + 3 notes and a lineage event.
fn world(root: &Path) -> SqliteStore {
    let store = open(root);
    for t in [tenant(), globex()] {
        store.commit(0, vec![Mutation::Principal(in_tenant(&t, "ana"))]).unwrap().pop().unwrap().unwrap();
    }
    for n in 1..=5 {
        write_in(&store, &tenant(), n);
        if n <= 3 {
            write_in(&store, &globex(), 100 + n);
        }
    }
    store.commit(9, vec![Mutation::Lineage { tenant: globex(), event: serde_json::json!({"read_by": [101]}) }]).unwrap().pop().unwrap().unwrap();
    store
}

#[test]
fn each_tenant_has_its_own_chain_tree_checkpoints_and_proofs() {
    let root = tempfile::tempdir().unwrap();
    let store = world(root.path());
    assert_eq!(store.tenants(), vec![tenant(), globex()]);
    // genesis + principal + 5 writes; genesis + principal + 3 writes + lineage.
    assert_eq!(store.log_len_of(&tenant()), 7);
    assert_eq!(store.log_len_of(&globex()), 6);
    assert_eq!(store.log_len(), 13, "the global view holds both");
    assert_eq!(store.log_len_of(&TenantId::new("initech").unwrap()), 0);
    for t in [tenant(), globex()] {
        let (size, root_hash, head) = store.log_root_of(&t);
        let entries = store.log_entries_of(&t, 0, size).unwrap();
        assert_eq!(entries.len() as u64, size);
        // The chain opens with a genesis naming the tenant, and every index is the tenant's.
        let genesis = Entry::decode(&entries[0]).unwrap();
        assert_eq!(genesis.kind, EntryKind::Genesis);
        let body: serde_json::Value = serde_json::from_slice(&genesis.body).unwrap();
        assert_eq!(body["tenant"], t.as_str());
        for (i, e) in entries.iter().enumerate() {
            assert_eq!(Entry::decode(e).unwrap().index, i as u64);
        }
        assert_eq!(memwarden_log::leaf_hash(entries.last().unwrap()), head);
        // Proofs against the tenant's own tree.
        for i in 0..size {
            let proof = store.inclusion_proof_of(&t, i, size).unwrap();
            verify_inclusion(&memwarden_log::leaf_hash(&entries[i as usize]), i, size, &proof, &root_hash).unwrap();
        }
        let cp = store.checkpoint_of(&t, 50).unwrap();
        assert_eq!((cp.checkpoint.size, cp.checkpoint.root), (size, root_hash));
        cp.verify(&ed25519_dalek::VerifyingKey::from_bytes(&store.log_public_key()).unwrap()).unwrap();
        assert!(store.checkpoints_of(&t).unwrap().contains(&cp));
        assert!(store.verify_log_of(&t).unwrap().is_ok());
    }
    // Consistency between two sizes of one tenant's log, across later writes.
    let old = store.log_root_of(&tenant());
    write_in(&store, &tenant(), 6);
    let new = store.log_root_of(&tenant());
    let proof = store.consistency_proof_of(&tenant(), old.0, new.0).unwrap();
    verify_consistency(old.0, new.0, &old.1, &new.1, &proof).unwrap();
    assert!(matches!(store.checkpoint_of(&TenantId::new("initech").unwrap(), 1), Err(StoreError::UnknownLog(_))));
    assert!(store.verify_log().unwrap().is_ok());
}

#[test]
fn receipts_and_commit_orders_are_per_tenant() {
    let root = tempfile::tempdir().unwrap();
    let store = world(root.path());
    let r = write_in(&store, &globex(), 104);
    assert_eq!(r.log_index, 6, "globex's seventh entry, whatever acme did");
    let entry = &store.log_entries_of(&globex(), 6, 7).unwrap()[0];
    assert_eq!(memwarden_log::leaf_hash(entry), r.leaf);
    let order = store.items_in_order(&globex(), None, 100).unwrap();
    assert_eq!(order.iter().map(|o| o.log_index).collect::<Vec<_>>(), vec![2, 3, 4, 6]);
    let events = store.lineage_events(&globex(), None, 100).unwrap();
    assert_eq!(events.iter().map(|e| e.0).collect::<Vec<_>>(), vec![5]);
    assert_eq!(store.items_in_order(&tenant(), Some(3), 100).unwrap().iter().map(|o| o.log_index).collect::<Vec<_>>(), vec![4, 5, 6]);
}

#[test]
fn one_tenants_tampered_log_is_named_and_the_other_still_verifies() {
    let root = tempfile::tempdir().unwrap();
    drop(world(root.path()));
    {
        let conn = rusqlite::Connection::open(db(root.path())).unwrap();
        let mut e: Vec<u8> = conn.query_row("SELECT entry FROM log WHERE tenant = 'globex' AND idx = 3", [], |r| r.get(0)).unwrap();
        let last = e.len() - 1;
        e[last] ^= 1;
        conn.execute("UPDATE log SET entry = ?1 WHERE tenant = 'globex' AND idx = 3", [e]).unwrap();
    }
    let report = SqliteStore::verify_dir_with(&root.path().join("data"), &config(root.path())).unwrap();
    match &report.problem {
        Some(Problem::InLog { log, problem }) => {
            assert_eq!(log, "globex");
            assert_eq!(problem.first_bad_index(), Some(3));
        }
        p => panic!("{p:?}"),
    }
    match SqliteStore::open(&root.path().join("data"), config(root.path())) {
        Err(StoreError::LogTampered(m)) => assert!(m.contains("globex") && m.contains("first bad index 3"), "{m}"),
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("opened"),
    }
}

#[test]
fn one_tenants_log_rolled_back_or_removed_is_refused_by_its_witness() {
    for cut_all in [false, true] {
        let root = tempfile::tempdir().unwrap();
        drop(world(root.path()));
        {
            // Cut globex's log back to 3 entries, consistently (its rows, head and checkpoints),
            // or remove it altogether.
            let conn = rusqlite::Connection::open(db(root.path())).unwrap();
            let keep = if cut_all { 0 } else { 3 };
            conn.execute("DELETE FROM log WHERE tenant = 'globex' AND idx >= ?1", [keep]).unwrap();
            conn.execute("DELETE FROM checkpoints WHERE tenant = 'globex' OR tenant = ''", []).unwrap();
            if cut_all {
                conn.execute_batch("DELETE FROM heads WHERE tenant = 'globex'; DELETE FROM items WHERE tenant = 'globex'; DELETE FROM principals WHERE tenant = 'globex'; DELETE FROM lineage_events WHERE tenant = 'globex'; DELETE FROM vectors WHERE tenant = 'globex';").unwrap();
            } else {
                let head: Vec<u8> = conn.query_row("SELECT entry FROM log WHERE tenant = 'globex' AND idx = 2", [], |r| r.get(0)).unwrap();
                conn.execute("UPDATE heads SET size = 3, head = ?1 WHERE tenant = 'globex'", [memwarden_log::leaf_hash(&head).to_vec()]).unwrap();
            }
        }
        match SqliteStore::open(&root.path().join("data"), config(root.path())) {
            Err(StoreError::LogTampered(m)) => assert!(m.contains("globex"), "{m}"),
            Err(e) => panic!("{e}"),
            Ok(_) => panic!("cut_all={cut_all}: a rolled-back tenant log opened"),
        }
    }
}

#[test]
fn with_one_tenant_the_global_view_has_the_tenants_indexes() {
    let root = tempfile::tempdir().unwrap();
    let store = open(root.path());
    register(&store);
    let r = write(&store, 1, "x").1;
    assert_eq!(store.log_len(), store.log_len_of(&tenant()));
    assert_eq!(store.log_entries(r.log_index, r.log_index + 1).unwrap(), store.log_entries_of(&tenant(), r.log_index, r.log_index + 1).unwrap());
    let (size, root_hash, _) = store.log_root();
    assert_eq!((size, root_hash), {
        let (s, rt, _) = store.log_root_of(&tenant());
        (s, rt)
    });
    let cp = store.checkpoint(5).unwrap();
    assert_eq!(cp.checkpoint.root, root_hash);
    assert!(store.checkpoints().unwrap().contains(&cp));
}

/// Issue 19 item 2: a changed entry of tenant A's log (the disk edited under a running store) is
/// reported for A, naming the entry, while B's log still verifies on its own; the whole-store
/// audit names A's log.
#[test]
fn tampered_entry_is_named_in_its_tenants_log_and_the_other_tenant_still_verifies() {
    let root = tempfile::tempdir().unwrap();
    let store = world(root.path());
    SqliteStore::tamper_log_entry_of(&root.path().join("data"), &tenant(), 4).unwrap();
    let mine = store.verify_log_of(&tenant()).unwrap();
    match &mine.problem {
        Some(Problem::InLog { log, problem }) => {
            assert_eq!(log, tenant().as_str());
            assert_eq!(problem.first_bad_index(), Some(4), "{problem}");
        }
        p => panic!("{p:?}"),
    }
    assert_eq!(mine.first_bad_index(), Some(4));
    let theirs = store.verify_log_of(&globex()).unwrap();
    assert!(theirs.is_ok(), "{:?}", theirs.problem);
    assert_eq!(theirs.entries, 6);
    match store.verify_log().unwrap().problem {
        Some(Problem::InLog { log, .. }) => assert_eq!(log, tenant().as_str()),
        p => panic!("{p:?}"),
    }
    assert!(matches!(SqliteStore::tamper_log_entry_of(&root.path().join("data"), &globex(), 99), Err(StoreError::UnknownLog(_))));
}

/// Issue 19 item 2: the logs are independent chains — each starts at index 0 with its own
/// genesis, no entry links to another tenant's, and one tenant's writes change neither the
/// other's size, root nor head.
#[test]
fn tenant_logs_are_independent_chains() {
    let root = tempfile::tempdir().unwrap();
    let store = world(root.path());
    let before = store.log_root_of(&globex());
    for n in 10..20 {
        write_in(&store, &tenant(), n);
    }
    assert_eq!(store.log_root_of(&globex()), before, "acme's writes moved globex's tree head");
    let a = store.log_entries_of(&tenant(), 0, store.log_len_of(&tenant())).unwrap();
    let g = store.log_entries_of(&globex(), 0, store.log_len_of(&globex())).unwrap();
    let leaves_a: std::collections::HashSet<_> = a.iter().map(|e| memwarden_log::leaf_hash(e)).collect();
    for (i, e) in g.iter().enumerate() {
        let entry = Entry::decode(e).unwrap();
        assert_eq!(entry.index, i as u64);
        assert!(!leaves_a.contains(&entry.prev), "globex entry {i} links to an acme entry");
        assert!(i == 0 || entry.prev == memwarden_log::leaf_hash(&g[i - 1]));
    }
    assert_eq!(Entry::decode(&g[0]).unwrap().prev, [0; 32]);
    assert_ne!(store.log_root_of(&tenant()).1, before.1);
}

/// Crash safety of lazily opened tenant logs: a crash between a tenant's first commit and its
/// first witness (simulated by removing that witness) still opens, because the store wrote its
/// own witness at the first open; a key directory with no witness at all is still refused.
#[test]
fn first_commit_without_its_witness_opens_but_no_witness_at_all_is_refused() {
    let root = tempfile::tempdir().unwrap();
    let wdir = root.path().join("keys").join("witness");
    drop(open(root.path()));
    let before: Vec<_> = std::fs::read_dir(&wdir).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(before.len(), 1, "the store's own witness is written at the first open");
    {
        let store = open(root.path());
        register(&store);
        write(&store, 1, "first");
    }
    for e in std::fs::read_dir(&wdir).unwrap() {
        let p = e.unwrap().path();
        if !before.contains(&p) {
            std::fs::remove_file(p).unwrap();
        }
    }
    {
        let store = open(root.path());
        assert!(store.verify_log().unwrap().is_ok());
        assert!(store.log_len_of(&tenant()) > 2);
    }
    std::fs::remove_dir_all(&wdir).unwrap();
    match SqliteStore::open(&root.path().join("data"), config(root.path())) {
        Err(StoreError::LogTampered(m)) => assert!(m.contains("witness"), "{m}"),
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("opened without any witness"),
    }
}
