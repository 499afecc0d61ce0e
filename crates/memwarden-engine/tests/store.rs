//! Store behaviour seen through the engine: atomic item + log entry, tamper detection on read and
//! on open, group commit under concurrency, and the grant double-spend race.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use ed25519_dalek::SigningKey;
use memwarden_core::prelude::*;
use memwarden_engine::keys::{GrantSpec, mint_grant};
use memwarden_engine::{Engine, EngineConfig, EngineError};
use memwarden_log::Entry;
use memwarden_store::{SqliteStore, StoreError};
use std::sync::Arc;

fn pid(s: &str) -> PrincipalId {
    PrincipalId::new(s).unwrap()
}

fn tenant() -> TenantId {
    TenantId::new("acme").unwrap()
}

fn principal(id: &str, kind: PrincipalKind, key: Option<&SigningKey>) -> Principal {
    Principal { id: pid(id), tenant: tenant(), kind, domain: None, allow_listed: false, public_key: key.map(|k| k.verifying_key().to_bytes()), action: None }
}

fn open(dir: &std::path::Path) -> Engine {
    Engine::open(dir, EngineConfig::default()).unwrap()
}

#[test]
fn an_item_and_its_log_entry_commit_together() {
    let dir = tempfile::tempdir().unwrap();
    let e = open(dir.path());
    e.register_principal(principal("a", PrincipalKind::Agent, None)).unwrap();
    let a = e.authenticate(&tenant(), &pid("a")).unwrap();
    let (item, receipt) = e.add(&a, WriteRequest::new(Namespace::new("n").unwrap(), "hello", Route::Direct)).unwrap();
    let entries = e.store().log_entries(receipt.log_index, receipt.log_index + 1).unwrap();
    let entry = Entry::decode(&entries[0]).unwrap();
    let body: serde_json::Value = serde_json::from_slice(&entry.body).unwrap();
    assert_eq!(body["id"], item.id().to_string());
    assert_eq!(body["digest"], hex::encode(item.identity_digest()));
    assert_eq!(memwarden_log::leaf_hash(&entries[0]), receipt.leaf);
}

#[test]
fn a_changed_item_record_is_detected_on_read() {
    let dir = tempfile::tempdir().unwrap();
    let id = {
        let e = open(dir.path());
        e.register_principal(principal("a", PrincipalKind::Source, None)).unwrap();
        let a = e.authenticate(&tenant(), &pid("a")).unwrap();
        e.add(&a, WriteRequest::new(Namespace::new("n").unwrap(), "pay ACCT-1", Route::ExternalObservation)).unwrap().0.id()
    };
    // An attacker with disk access edits the stored text (the log is untouched).
    let conn = rusqlite::Connection::open(dir.path().join("memwarden.db")).unwrap();
    let record: String = conn.query_row("SELECT record FROM items", [], |r| r.get(0)).unwrap();
    conn.execute("UPDATE items SET record = ?1", [record.replace("ACCT-1", "ACCT-2")]).unwrap();
    drop(conn);
    let e = open(dir.path());
    match e.store().item(&tenant(), &id) {
        Err(StoreError::ItemTampered { reason, .. }) => assert!(reason.contains("digest"), "{reason}"),
        other => panic!("expected tamper detection, got {other:?}"),
    }
}

#[test]
fn a_cut_log_tail_is_refused_on_open() {
    let dir = tempfile::tempdir().unwrap();
    {
        let e = open(dir.path());
        e.register_principal(principal("a", PrincipalKind::Agent, None)).unwrap();
        let a = e.authenticate(&tenant(), &pid("a")).unwrap();
        for i in 0..5 {
            e.add(&a, WriteRequest::new(Namespace::new("n").unwrap(), format!("m{i}"), Route::Direct)).unwrap();
        }
    }
    let conn = rusqlite::Connection::open(dir.path().join("memwarden.db")).unwrap();
    conn.execute("DELETE FROM log WHERE idx = (SELECT MAX(idx) FROM log)", []).unwrap();
    drop(conn);
    match SqliteStore::open(dir.path(), Default::default()) {
        Err(StoreError::LogTampered(msg)) => assert!(msg.contains("first bad index 6"), "{msg}"),
        Err(e) => panic!("unexpected error {e}"),
        Ok(_) => panic!("a cut log opened"),
    }
}

#[test]
fn concurrent_writers_are_group_committed_and_all_durable() {
    let dir = tempfile::tempdir().unwrap();
    let e = Arc::new(open(dir.path()));
    e.register_principal(principal("a", PrincipalKind::Agent, None)).unwrap();
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let e = Arc::clone(&e);
            std::thread::spawn(move || {
                let a = e.authenticate(&tenant(), &pid("a")).unwrap();
                (0..50)
                    .map(|i| e.add(&a, WriteRequest::new(Namespace::new("n").unwrap(), format!("t{t} m{i}"), Route::Direct)).unwrap().0.id())
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let ids: Vec<ItemId> = threads.into_iter().flat_map(|t| t.join().unwrap()).collect();
    assert_eq!(e.store().count(&tenant()).unwrap(), 400);
    assert_eq!(e.store().log_len(), 1 + 1 + 400);
    drop(e);
    let e = open(dir.path());
    for id in ids {
        assert!(e.store().item(&tenant(), &id).unwrap().is_some());
    }
    assert!(e.verify_log().unwrap().is_ok());
}

#[test]
fn a_grant_raced_by_two_decisions_is_consumed_once() {
    let dir = tempfile::tempdir().unwrap();
    let e = Arc::new(open(dir.path()));
    let key = SigningKey::from_bytes(&[5; 32]);
    e.register_principal(principal("alice", PrincipalKind::User, Some(&key))).unwrap();
    e.register_principal(principal("agent", PrincipalKind::Agent, None)).unwrap();
    e.register_principal(principal("inbox", PrincipalKind::Source, None)).unwrap();
    let inbox = e.authenticate(&tenant(), &pid("inbox")).unwrap();
    let (email, _) = e.add(&inbox, WriteRequest::new(Namespace::new("n").unwrap(), "pay ACCT-9", Route::ExternalObservation)).unwrap();
    for round in 0..10 {
        let spec = GrantSpec { store: e.store_id(), tool: "pay", key: "payee", value: "ACCT-9", kind: ValueKind::Account, amount: None, ttl_ms: 60_000 };
        let grant = mint_grant(&key, &tenant(), &pid("alice"), &spec, e.now_ms()).unwrap();
        let action = ActionRequest {
            tool: "pay".into(),
            kind: ActionKind::Act,
            risk: Risk::High,
            values: vec![ActionValue { key: "payee".into(), value: "ACCT-9".into(), kind: ValueKind::Account, sources: vec![] }],
            amount: None,
            context: vec![email.id()],
            grants: vec![grant],
        };
        let racers: Vec<_> = (0..4)
            .map(|_| {
                let (e, action) = (Arc::clone(&e), action.clone());
                std::thread::spawn(move || {
                    let agent = e.authenticate(&tenant(), &pid("agent")).unwrap();
                    e.decide(&agent, &action).unwrap().0.decision
                })
            })
            .collect();
        let decisions: Vec<Decision> = racers.into_iter().map(|t| t.join().unwrap()).collect();
        let allows = decisions.iter().filter(|d| **d == Decision::Allow).count();
        assert_eq!(allows, 1, "round {round}: {decisions:?}");
        assert!(decisions.iter().all(|d| matches!(d, Decision::Allow | Decision::Block)));
    }
    assert!(e.verify_log().unwrap().is_ok());
}

#[test]
fn other_tenants_and_private_items_are_invisible() {
    let dir = tempfile::tempdir().unwrap();
    let e = open(dir.path());
    let other = TenantId::new("globex").unwrap();
    e.register_principal(principal("a", PrincipalKind::Agent, None)).unwrap();
    e.register_principal(principal("b", PrincipalKind::Agent, None)).unwrap();
    e.register_principal(Principal { tenant: other.clone(), ..principal("a", PrincipalKind::Agent, None) }).unwrap();
    let a = e.authenticate(&tenant(), &pid("a")).unwrap();
    let b = e.authenticate(&tenant(), &pid("b")).unwrap();
    let a_other = e.authenticate(&other, &pid("a")).unwrap();
    let mut req = WriteRequest::new(Namespace::new("n").unwrap(), "a's secret", Route::Direct);
    req.readers = Some(Default::default());
    let (secret, _) = e.add(&a, req).unwrap();
    assert_eq!(secret.scope().visibility, Visibility::Private);
    assert!(e.get(&a, &secret.id()).is_ok());
    assert!(matches!(e.get(&b, &secret.id()), Err(EngineError::NotFound(_))));
    assert!(matches!(e.get(&a_other, &secret.id()), Err(EngineError::NotFound(_))));
    // Deriving from an unreadable item is refused, so scope cannot be laundered either.
    assert!(matches!(e.derive(&b, Namespace::new("n").unwrap(), &[secret.id()], "leak".into()), Err(EngineError::NotFound(_))));
    // A derived item's readers are the intersection of its parents'.
    let (d, _) = e.derive(&a, Namespace::new("n").unwrap(), &[secret.id()], "summary of secret".into()).unwrap();
    // Addressed to the namespace (no readers declared) and narrowed by its source: b is told it
    // is withheld, never its text; a's other tenant never hears of it.
    assert!(matches!(e.get(&b, &d.id()), Err(EngineError::Withheld(w)) if w.rule == memwarden_engine::CONFIDENTIAL_ANCESTRY));
    assert!(matches!(e.get(&a_other, &d.id()), Err(EngineError::NotFound(_))));
    assert!(e.list(&b, &Namespace::new("n").unwrap(), 100).unwrap().is_empty());
}

#[test]
fn a_data_directory_has_one_writer_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let first = open(dir.path());
    match Engine::open(dir.path(), EngineConfig::default()) {
        Err(EngineError::Store(StoreError::Locked(d))) => assert!(d.contains(&*dir.path().display().to_string())),
        Err(e) => panic!("expected Locked, got {e}"),
        Ok(_) => panic!("a second writer opened the same data directory"),
    }
    // Read-only verification still works while it is open; once closed, it opens again.
    assert!(SqliteStore::verify_dir(dir.path()).unwrap().is_ok());
    drop(first);
    open(dir.path());
}
