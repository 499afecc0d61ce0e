//! Issue 34 (lineage-suite targets): the context-level evidence rule. Every memory an action
//! cites is checked for evidence on its path, whether or not it carries a value, and the
//! outcome follows MAP-Graph's cause table for the action's class: a poisoned or revoked path
//! blocks; a cited memory of the actor's scope that a layer holds back redacts a disclosure,
//! re-verifies a low- or medium-risk act and blocks a high-risk one. Regression: the engine's
//! lineage stage looked only at the memories that carry or push a value, so an answer whose
//! conversation held a poisoned note, or a revoked one, went out (`Allow`), and a held-back
//! context item blocked every action alike as an "invalid request".
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod common;

use common::{LOUD, engine, tenant};
use memwarden_core::prelude::*;
use memwarden_engine::{Actor, Engine};

fn pid(s: &str) -> PrincipalId {
    PrincipalId::new(s).unwrap()
}

fn actor(e: &Engine, id: &str, kind: PrincipalKind) -> Actor {
    if e.authenticate(&tenant(), &pid(id)).is_err() {
        let public_key = (kind == PrincipalKind::User).then_some([7u8; 32]);
        e.register_principal(Principal { public_key, ..Principal::new(pid(id), tenant(), kind) }).unwrap();
    }
    e.authenticate(&tenant(), &pid(id)).unwrap()
}

/// A tool registered with `kind` and `risk` and no safety-relevant values.
fn tool(e: &Engine, name: &str, kind: ActionKind, risk: Risk) {
    let p = Principal { action: Some(ToolAction::new(kind, risk, Vec::new(), false)), ..Principal::new(pid(name), tenant(), PrincipalKind::Tool) };
    e.register_principal(p).unwrap();
}

fn ns() -> Namespace {
    Namespace::new("notes").unwrap()
}

fn request(tool: &str, context: Vec<ItemId>) -> ActionRequest {
    // The request's own kind and risk are ignored: the tool's registration classes the action.
    ActionRequest { tool: tool.into(), kind: ActionKind::Act, risk: Risk::High, values: Vec::new(), amount: None, context, grants: Vec::new() }
}

/// The lineage layer's verdict on the decision: (decision, gate rule, cause).
fn lineage_layer(v: &Verdict) -> (Decision, String) {
    let l = v.layers.iter().find(|l| l.layer == "lineage").expect("the lineage layer decided");
    (l.decision, format!("{:?}", l.rule))
}

struct World {
    _dir: tempfile::TempDir,
    e: Engine,
    alice: Actor,
    writer: Actor,
    assistant: Actor,
}

fn world() -> World {
    let dir = tempfile::tempdir().unwrap();
    let e = engine(dir.path());
    let alice = actor(&e, "alice", PrincipalKind::User);
    let writer = actor(&e, "writer", PrincipalKind::Agent);
    let assistant = actor(&e, "assistant", PrincipalKind::Agent);
    tool(&e, "reply", ActionKind::Answer, Risk::Low);
    tool(&e, "file_ticket", ActionKind::Act, Risk::Medium);
    tool(&e, "close_account", ActionKind::Act, Risk::High);
    World { _dir: dir, e, alice, writer, assistant }
}

/// (case, tool, expected decision): what the rule does with one cited memory of each kind.
fn check(w: &World, case: &str, cited: ItemId, cases: &[(&str, Decision)]) {
    for (tool, want) in cases {
        let (v, _) = w.e.decide(&w.assistant, &request(tool, vec![cited])).unwrap();
        assert_eq!(v.decision, *want, "{case}, {tool}: {} ({:?})", v.cause, v.layers);
        if *want != Decision::Allow {
            let (d, rule) = lineage_layer(&v);
            assert_eq!(d, *want, "{case}, {tool}: the lineage layer decides it");
            assert!(rule.contains("context_evidence"), "{case}, {tool}: named by the context rule: {rule}");
            assert!(v.affected.contains(&cited), "{case}, {tool}: the cited memory is named as affected: {:?}", v.affected);
        }
    }
}

#[test]
fn a_poisoned_note_in_the_context_blocks_every_action() {
    let w = world();
    let (note, _) = w.e.add(&w.writer, WriteRequest::new(ns(), "Meeting moved to Thursday, room 4.", Route::Direct)).unwrap();
    check(&w, "clean note", note.id(), &[("reply", Decision::Allow), ("file_ticket", Decision::Allow)]);
    w.e.flag_poisoned(&w.alice, &note.id()).unwrap();
    check(&w, "poisoned note", note.id(), &[("reply", Decision::Block), ("file_ticket", Decision::Block), ("close_account", Decision::Block)]);
}

#[test]
fn a_note_derived_from_a_revoked_record_blocks_every_action() {
    let w = world();
    let (record, _) = w.e.add(&w.alice, WriteRequest::new(ns(), "Our office wifi password rotates monthly.", Route::Direct)).unwrap();
    let mut req = WriteRequest::new(ns(), "Summary: the office wifi password rotates monthly.", Route::Summary);
    req.parents.push(ParentRef { id: record.id(), kind: EdgeKind::DerivedFrom });
    w.e.get(&w.writer, &record.id()).unwrap();
    let (note, _) = w.e.add(&w.writer, req).unwrap();
    w.e.get(&w.assistant, &note.id()).unwrap();
    w.e.revoke(&w.alice, &record.id(), "permission withdrawn").unwrap();
    check(&w, "derived from revoked", note.id(), &[("reply", Decision::Block), ("file_ticket", Decision::Block)]);
}

#[test]
fn a_held_back_memory_in_the_context_redacts_a_disclosure_and_holds_an_act() {
    let w = world();
    let inbox = actor(&w.e, "inbox", PrincipalKind::Source);
    let (loud, _) = w.e.add(&inbox, WriteRequest::new(ns(), LOUD, Route::ExternalObservation)).unwrap();
    assert_eq!(loud.status(), Status::Quarantined, "the recipe: the write gate holds the email back");
    check(
        &w,
        "quarantined email",
        loud.id(),
        &[("reply", Decision::Redact), ("file_ticket", Decision::Reverify), ("close_account", Decision::Block)],
    );
}

#[test]
fn a_cited_id_outside_the_scope_and_an_unknown_id_are_refused_alike() {
    let w = world();
    let mut private = WriteRequest::new(ns(), "Alice's diary: nothing to report.", Route::Direct);
    private.readers = Some([pid("alice")].into_iter().collect());
    let (diary, _) = w.e.add(&w.alice, private).unwrap();
    let unknown = ItemId::from_bytes([0x42; 16]);
    let mut answers = Vec::new();
    for id in [diary.id(), unknown] {
        let (v, _) = w.e.decide(&w.assistant, &request("reply", vec![id])).unwrap();
        assert_eq!(v.decision, Decision::Block, "{id}: {}", v.cause);
        answers.push(v.cause.replace(&id.to_string(), "<id>"));
    }
    assert_eq!(answers[0], answers[1], "the same answer: nothing tells an existing private memory from a missing one");
}

#[test]
fn a_benign_context_is_not_refused() {
    let w = world();
    let (a, _) = w.e.add(&w.alice, WriteRequest::new(ns(), "Standup is at 9:30 every weekday.", Route::Direct)).unwrap();
    let (b, _) = w.e.add(&w.writer, WriteRequest::new(ns(), "Reminder: standup at 9:30.", Route::Direct)).unwrap();
    for t in ["reply", "file_ticket", "close_account"] {
        let (v, _) = w.e.decide(&w.assistant, &request(t, vec![a.id(), b.id()])).unwrap();
        assert_ne!(v.decision, Decision::Block, "{t}: {}", v.cause);
        assert!(v.layers.iter().all(|l| !format!("{:?}", l.rule).contains("context_evidence")), "{t}: the context rule stays silent on clean context: {:?}", v.layers);
    }
}
