//! Poison reports and verifications through the engine: who may make them (every other caller is
//! refused, a memory the caller cannot read is not found), what a poison report changes (the
//! memory no longer supports an action, before and after a restart), and that each is one entry
//! in the verdict log.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::path::Path;
use std::sync::Arc;

use memwarden_core::prelude::*;
use memwarden_engine::embed::HashEmbedder;
use memwarden_engine::{Actor, Engine, EngineConfig, EngineError};

fn tenant() -> TenantId {
    TenantId::new("acme").unwrap()
}

fn ns() -> Namespace {
    Namespace::new("vendors").unwrap()
}

fn engine(dir: &Path) -> Engine {
    // No preset named: the default is the shipped `full`.
    Engine::open(dir, EngineConfig { embedder: Some(Arc::new(HashEmbedder::new(64))), ..EngineConfig::default() }).unwrap()
}

fn actor(e: &Engine, id: &str) -> Actor {
    e.authenticate(&tenant(), &PrincipalId::new(id).unwrap()).unwrap()
}

fn setup(e: &Engine) {
    let user_key = memwarden_engine::keys::generate_key().unwrap().verifying_key().to_bytes();
    let pay = ToolAction { kind: ActionKind::Act, risk: Risk::High, values: vec![ValueSpec { key: "payee".into(), kind: ValueKind::Account, required: true }], moves_money: false, support_k: 1, support_k_from_amount: None };
    for (id, kind, allow_listed, action) in [
        ("ana", PrincipalKind::Agent, false, None),
        ("ursula", PrincipalKind::User, false, None),
        ("inbox", PrincipalKind::Source, false, None),
        ("scanner", PrincipalKind::Tool, true, None),
        ("rogue", PrincipalKind::Tool, false, None),
        ("pay", PrincipalKind::Tool, true, Some(pay.clone())),
    ] {
        let public_key = (kind == PrincipalKind::User).then_some(user_key);
        e.register_principal(Principal { id: PrincipalId::new(id).unwrap(), tenant: tenant(), kind, domain: None, allow_listed, public_key, action })
            .unwrap();
    }
}

fn pay(note: ItemId) -> ActionRequest {
    ActionRequest {
        tool: "pay".into(),
        kind: ActionKind::Act,
        risk: Risk::High,
        values: vec![ActionValue { key: "payee".into(), value: "ACCT-40417".into(), kind: ValueKind::Account, sources: vec![note] }],
        amount: None,
        context: vec![note],
        grants: Vec::new(),
    }
}

/// One row: who tries, and whether the engine lets them.
fn check(label: &str, got: Result<(), EngineError>, want_ok: bool) {
    match (&got, want_ok) {
        (Ok(()), true) => {}
        (Err(EngineError::Forbidden(_) | EngineError::NotFound(_)), false) => {}
        _ => panic!("{label}: got {got:?}, want ok = {want_ok}"),
    }
}

#[test]
fn only_users_tools_and_owners_report_poison_and_only_trusted_principals_verify() {
    let dir = tempfile::tempdir().unwrap();
    let e = engine(dir.path());
    setup(&e);
    let ursula = actor(&e, "ursula");
    let note = e.add(&ursula, WriteRequest::new(ns(), "Acme's payee account is ACCT-40417.", Route::Direct)).unwrap().0.id();
    let private = {
        let mut r = WriteRequest::new(ns(), "Board-only: the Acme contract renews in March.", Route::Direct);
        r.readers = Some([PrincipalId::new("ursula").unwrap()].into_iter().collect());
        e.add(&ursula, r).unwrap().0.id()
    };
    let before = e.verify_log().unwrap().entries;
    let unit = |r: Result<memwarden_store::Receipt, EngineError>| r.map(|_| ());
    for (who, id, want) in [
        ("inbox", note, false),  // a source may not report poison (it could deny any memory)
        ("ana", note, false),    // an agent that is not the owner
        ("scanner", private, false), // a tool, but the memory is not readable by it
        ("rogue", note, true),   // any tool may report (it only restricts)
    ] {
        check(&format!("flag by {who}"), unit(e.flag_poisoned(&actor(&e, who), &id)), want);
    }
    for (who, want) in [("inbox", false), ("ana", false), ("rogue", false), ("scanner", true), ("ursula", true)] {
        check(&format!("verify by {who}"), unit(e.verify(&actor(&e, who), &note)), want);
    }
    check("verify of an unreadable memory", unit(e.verify(&actor(&e, "scanner"), &private)), false);
    assert_eq!(e.verify_log().unwrap().entries, before + 3, "one log entry per accepted report or verification, none for a refusal");
}

#[test]
fn a_poisoned_memory_no_longer_supports_an_action_before_and_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let note;
    {
        let e = engine(dir.path());
        setup(&e);
        let ursula = actor(&e, "ursula");
        note = e.add(&ursula, WriteRequest::new(ns(), "Acme's payee account is ACCT-40417.", Route::Direct)).unwrap().0.id();
        let ana = actor(&e, "ana");
        let (v, _) = e.decide(&ana, &pay(note)).unwrap();
        assert_eq!(v.decision, Decision::Allow, "a user's own note supports the payment: {v:?}");
        e.flag_poisoned(&actor(&e, "scanner"), &note).unwrap();
        let ana = actor(&e, "ana");
        let (v, _) = e.decide(&ana, &pay(note)).unwrap();
        assert_ne!(v.decision, Decision::Allow, "a poisoned note supports nothing: {v:?}");
    }
    // The report is replayed from the store when the graph is rebuilt.
    let e = engine(dir.path());
    let ana = actor(&e, "ana");
    let (v, _) = e.decide(&ana, &pay(note)).unwrap();
    assert_ne!(v.decision, Decision::Allow, "after a restart the note is still poisoned: {v:?}");
    assert!(e.verify_log().unwrap().problem.is_none());
}

#[test]
fn poison_and_verification_need_the_lineage_layer() {
    let dir = tempfile::tempdir().unwrap();
    let e = Engine::open(dir.path(), EngineConfig::for_preset(memwarden_engine::Preset::Authority).unwrap()).unwrap();
    setup(&e);
    let ursula = actor(&e, "ursula");
    let note = e.add(&ursula, WriteRequest::new(ns(), "Acme's payee account is ACCT-40417.", Route::Direct)).unwrap().0.id();
    assert!(matches!(e.flag_poisoned(&ursula, &note), Err(EngineError::LayerOff("lineage"))));
    assert!(matches!(e.verify(&ursula, &note), Err(EngineError::LayerOff("lineage"))));
}
