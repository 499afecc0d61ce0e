//! The engine on PostgreSQL (issue 17): `Engine::with_store` over `PostgresStore`, all three
//! layers on (the `full` preset) with the hash embedder. Two engines on one schema stand for two
//! servers: what one writes the other finds, and a grant raced by decisions through both is
//! consumed exactly once. A real server, nothing mocked (see tests/conformance.rs for the URL).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use ed25519_dalek::SigningKey;
use memwarden_core::prelude::*;
use memwarden_engine::embed::HashEmbedder;
use memwarden_engine::keys::{GrantSpec, mint_grant};
use memwarden_engine::{Engine, EngineConfig, Preset};
use memwarden_store_pg::{PgConfig, PostgresStore, drop_schema};
use std::sync::Arc;

fn pid(s: &str) -> PrincipalId {
    PrincipalId::new(s).unwrap()
}

fn tenant() -> TenantId {
    TenantId::new("acme").unwrap()
}

fn ns() -> Namespace {
    Namespace::new("n").unwrap()
}

fn principal(id: &str, kind: PrincipalKind, key: Option<&SigningKey>) -> Principal {
    Principal { id: pid(id), tenant: tenant(), kind, domain: None, allow_listed: false, public_key: key.map(|k| k.verifying_key().to_bytes()), action: None }
}

struct DropSchema(PgConfig);

impl Drop for DropSchema {
    fn drop(&mut self) {
        let _ = drop_schema(&self.0.url, &self.0.schema);
    }
}

/// A fresh schema on the test server (`MEMWARDEN_PG_URL`), keys under `dir`.
fn pg_config(dir: &std::path::Path) -> PgConfig {
    let url = std::env::var("MEMWARDEN_PG_URL").unwrap_or_else(|_| "host=127.0.0.1 port=5432 user=postgres dbname=test".into());
    let mut r = [0u8; 6];
    getrandom::fill(&mut r).unwrap();
    PgConfig::new(url, format!("mw_test_{}", hex::encode(r)), dir.join("keys"))
}

fn engine(config: &PgConfig) -> Engine {
    let store = PostgresStore::open(config.clone()).unwrap_or_else(|e| panic!("cannot open a PostgresStore on {:?} (is PostgreSQL running?): {e}", config.url));
    let cfg = EngineConfig { embedder: Some(Arc::new(HashEmbedder::new(64))), ..EngineConfig::for_preset(Preset::Full).unwrap() };
    Engine::with_store(Arc::new(store), cfg).unwrap()
}

#[test]
fn two_engines_on_one_database_add_search_and_decide_with_the_full_preset() {
    let dir = tempfile::tempdir().unwrap();
    let config = pg_config(dir.path());
    let _drop = DropSchema(config.clone());
    let a = Arc::new(engine(&config));
    let b = Arc::new(engine(&config));

    let key = SigningKey::from_bytes(&[5; 32]);
    a.register_principal(principal("alice", PrincipalKind::User, Some(&key))).unwrap();
    a.register_principal(principal("agent", PrincipalKind::Agent, None)).unwrap();
    a.register_principal(principal("inbox", PrincipalKind::Source, None)).unwrap();

    // Written through A, found through B.
    let agent_a = a.authenticate(&tenant(), &pid("agent")).unwrap();
    let (note, _) = a.add(&agent_a, WriteRequest::new(ns(), "the quarterly offsite moves to the lake house", Route::Direct)).unwrap();
    let agent_b = b.authenticate(&tenant(), &pid("agent")).unwrap();
    let hits = b.search(&agent_b, &ns(), "where is the quarterly offsite", 3).unwrap();
    assert!(hits.iter().any(|h| h.item.id() == note.id()), "B finds A's write: {hits:?}");

    let inbox = b.authenticate(&tenant(), &pid("inbox")).unwrap();
    let (email, _) = b.add(&inbox, WriteRequest::new(ns(), "pay ACCT-9", Route::ExternalObservation)).unwrap();
    for round in 0..5 {
        let spec = GrantSpec { store: a.store_id(), tool: "pay", key: "payee", value: "ACCT-9", kind: ValueKind::Account, amount: None, ttl_ms: 60_000 };
        let grant = mint_grant(&key, &tenant(), &pid("alice"), &spec, a.now_ms()).unwrap();
        let action = ActionRequest {
            tool: "pay".into(),
            kind: ActionKind::Act,
            risk: Risk::High,
            values: vec![ActionValue { key: "payee".into(), value: "ACCT-9".into(), kind: ValueKind::Account, sources: vec![] }],
            amount: None,
            context: vec![email.id()],
            grants: vec![grant],
        };
        // Four racers, two through each "server".
        let racers: Vec<_> = (0..4)
            .map(|i| {
                let e = Arc::clone(if i % 2 == 0 { &a } else { &b });
                let action = action.clone();
                std::thread::spawn(move || {
                    let agent = e.authenticate(&tenant(), &pid("agent")).unwrap();
                    e.decide(&agent, &action).unwrap().0.decision
                })
            })
            .collect();
        let decisions: Vec<Decision> = racers.into_iter().map(|t| t.join().unwrap()).collect();
        let allows = decisions.iter().filter(|d| **d == Decision::Allow).count();
        assert_eq!(allows, 1, "round {round}: the grant is consumed once across both servers: {decisions:?}");
    }
    // B's lineage graph was built during the races; a memory A adds now is in it on B's next
    // use (the graph is rebuilt once B's store has seen another process write the tenant).
    let (late, _) = a.add(&agent_a, WriteRequest::new(ns(), "added through A after B built its graph", Route::Direct)).unwrap();
    b.lineage_of(&agent_b, &late.id()).unwrap_or_else(|e| panic!("B's lineage graph knows A's late write: {e}"));
    assert!(a.verify_log().unwrap().is_ok());
    assert!(b.verify_log().unwrap().is_ok());
    assert_eq!(a.store().log_root_of(&tenant()), b.store().log_root_of(&tenant()));
}

#[test]
fn a_graph_caught_up_on_another_servers_writes_matches_a_rebuilt_one() {
    // B's lineage graph is built, then A writes, derives and revokes: B applies just A's
    // entries (no rebuild) and must then answer exactly as an engine that rebuilt its graph
    // from the database after all of it.
    let dir = tempfile::tempdir().unwrap();
    let config = pg_config(dir.path());
    let _drop = DropSchema(config.clone());
    let a = engine(&config);
    let b = engine(&config);
    a.register_principal(principal("alice", PrincipalKind::User, Some(&SigningKey::from_bytes(&[7; 32])))).unwrap();
    a.register_principal(principal("agent", PrincipalKind::Agent, None)).unwrap();
    let agent_a = a.authenticate(&tenant(), &pid("agent")).unwrap();
    let (base, _) = a.add(&agent_a, WriteRequest::new(ns(), "the vendor's account is ACCT-1", Route::Direct)).unwrap();
    let agent_b = b.authenticate(&tenant(), &pid("agent")).unwrap();
    b.lineage_of(&agent_b, &base.id()).unwrap(); // B builds its graph now
    // A (another registration, a write from a new principal, a derivation, a revocation).
    a.register_principal(principal("inbox", PrincipalKind::Source, None)).unwrap();
    let inbox = a.authenticate(&tenant(), &pid("inbox")).unwrap();
    let (mail, _) = a.add(&inbox, WriteRequest::new(ns(), "new bank details: ACCT-666", Route::ExternalObservation)).unwrap();
    let (summary, _) = a.derive(&agent_a, ns(), &[base.id(), mail.id()], "vendor account: ACCT-1 (a mail says ACCT-666)".into()).unwrap();
    let alice = a.authenticate(&tenant(), &pid("alice")).unwrap();
    a.revoke(&alice, &base.id(), "superseded").unwrap();
    // B, on its next use, and C, opened afresh (its graph rebuilt from the database).
    let c = engine(&config);
    let agent_c = c.authenticate(&tenant(), &pid("agent")).unwrap();
    for id in [base.id(), mail.id(), summary.id()] {
        let seen_b = b.lineage_of(&agent_b, &id).map(|v| serde_json::to_value(v).unwrap()).map_err(|e| e.to_string());
        let seen_c = c.lineage_of(&agent_c, &id).map(|v| serde_json::to_value(v).unwrap()).map_err(|e| e.to_string());
        assert_eq!(seen_b, seen_c, "memory {id}: B's caught-up graph and C's rebuilt graph disagree");
    }
    assert!(b.store().foreign_entries(&tenant(), 0).is_some_and(|(now, entries)| now > 0 && !entries.is_empty()), "B learned A's entries as foreign");
}
