//! Issue 34.8: withheld says withheld. A memory in the reader's scope that a defense layer holds
//! back (the lifecycle layer's quarantine, read firewall or broker; the lineage layer's read
//! rule) is reported as withheld, with the layer, the rule and the flags that fired, on get,
//! history and lineage; list names it; search counts it. Regression: get answered "not found"
//! for it, so the README demo's held-back email looked like a wrong id. A memory outside the
//! reader's scope (or erased, or never written) still reads as not found: nothing about it leaks.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod common;

use std::collections::BTreeSet;

use common::{LOUD, engine, tenant};
use memwarden_core::prelude::*;
use memwarden_engine::{Actor, Engine, EngineError, WithheldMemory};

fn actor(e: &Engine, id: &str, kind: PrincipalKind) -> Actor {
    let p = PrincipalId::new(id).unwrap();
    if e.authenticate(&tenant(), &p).is_err() {
        let public_key = (kind == PrincipalKind::User).then_some([7u8; 32]);
        e.register_principal(Principal { id: p.clone(), tenant: tenant(), kind, domain: None, allow_listed: false, public_key, action: None }).unwrap();
    }
    e.authenticate(&tenant(), &p).unwrap()
}

fn ns() -> Namespace {
    Namespace::new("mail").unwrap()
}

fn withheld(r: Result<impl std::fmt::Debug, EngineError>) -> WithheldMemory {
    match r {
        Err(EngineError::Withheld(w)) => w,
        other => panic!("expected withheld, got {other:?}"),
    }
}

fn not_found(r: Result<impl std::fmt::Debug, EngineError>) {
    assert!(matches!(r, Err(EngineError::NotFound(_))), "expected not found, got {r:?}");
}

#[test]
fn withheld_memory_answers_withheld_not_not_found() {
    let dir = tempfile::tempdir().unwrap();
    let e = engine(dir.path());
    let inbox = actor(&e, "inbox", PrincipalKind::Source);
    let assistant = actor(&e, "assistant", PrincipalKind::Agent);
    let (loud, _) = e.add(&inbox, WriteRequest::new(ns(), LOUD, Route::ExternalObservation)).unwrap();
    assert_eq!(loud.status(), Status::Quarantined, "the recipe: the write gate holds the email back");

    let w = withheld(e.get(&assistant, &loud.id()));
    assert_eq!((w.id, w.layer.as_str(), w.rule.as_str()), (loud.id(), "lifecycle", "quarantined"));
    assert!(w.flags.iter().any(|f| f == "external_source"), "the scorer's evidence: {:?}", w.flags);
    let text = w.to_string();
    assert!(text.contains("withheld") && !text.contains("ACCT-EVIL-9931"), "names the rule, never the text: {text}");
    assert_eq!(withheld(e.history(&assistant, &loud.id())), w);

    // The listing does not drop it silently: it is named (no text), and not handed over.
    let listing = e.list_report(&assistant, &ns(), 100).unwrap();
    assert!(listing.memories.iter().all(|m| m.item.id() != loud.id()));
    assert_eq!(listing.withheld, vec![w.clone()]);
    // Nothing withheld was handed to the session: it stays clean.
    assert_eq!(e.observed(&assistant).unwrap().floor(), Integrity::Trusted);
}

#[test]
fn out_of_scope_memory_still_answers_not_found() {
    let dir = tempfile::tempdir().unwrap();
    let e = engine(dir.path());
    let inbox = actor(&e, "inbox", PrincipalKind::Source);
    let assistant = actor(&e, "assistant", PrincipalKind::Agent);
    actor(&e, "bookkeeper", PrincipalKind::Agent);
    // Held back too, but for the bookkeeper only: the assistant must not learn it exists.
    let mut req = WriteRequest::new(ns(), LOUD, Route::ExternalObservation);
    req.readers = Some(BTreeSet::from([PrincipalId::new("bookkeeper").unwrap()]));
    let (private, _) = e.add(&inbox, req).unwrap();
    assert_eq!(private.status(), Status::Quarantined);
    not_found(e.get(&assistant, &private.id()));
    not_found(e.history(&assistant, &private.id()));
    not_found(e.lineage_of(&assistant, &private.id()));
    assert!(e.list_report(&assistant, &ns(), 100).unwrap().withheld.is_empty(), "out of scope: not even its id");
    // The bookkeeper, in its scope, is told it is withheld.
    let bookkeeper = actor(&e, "bookkeeper", PrincipalKind::Agent);
    assert_eq!(withheld(e.get(&bookkeeper, &private.id())).rule, "quarantined");
    // An id nobody wrote, and an erased memory, are not found.
    not_found(e.get(&assistant, &ItemId::from_bytes([9; 16])));
    let (gone, _) = e.add(&inbox, WriteRequest::new(ns(), "Newsletter: the office is closed on Monday.", Route::ExternalObservation)).unwrap();
    let alice = actor(&e, "alice", PrincipalKind::User);
    e.erase(&alice, &gone.id()).unwrap();
    not_found(e.get(&assistant, &gone.id()));
    not_found(e.lineage_of(&assistant, &gone.id()));
}

#[test]
fn benign_readable_memory_still_reads() {
    let dir = tempfile::tempdir().unwrap();
    let e = engine(dir.path());
    let inbox = actor(&e, "inbox", PrincipalKind::Source);
    let assistant = actor(&e, "assistant", PrincipalKind::Agent);
    let (plain, _) = e.add(&inbox, WriteRequest::new(ns(), "Newsletter: the office is closed on Monday.", Route::ExternalObservation)).unwrap();
    assert_eq!(plain.status(), Status::Active);
    assert_eq!(e.get(&assistant, &plain.id()).unwrap().id(), plain.id());
    assert_eq!(e.history(&assistant, &plain.id()).unwrap().len(), 1);
    e.lineage_of(&assistant, &plain.id()).unwrap();
    let listing = e.list_report(&assistant, &ns(), 100).unwrap();
    assert_eq!(listing.memories.len(), 1);
    assert!(listing.withheld.is_empty());
    let found = e.search_report(&assistant, &ns(), "office closed Monday", 5, Integrity::Untrusted).unwrap();
    assert_eq!(found.hits.len(), 1);
    assert_eq!(found.withheld, 0);
}

#[test]
fn search_reports_how_many_it_withheld() {
    let dir = tempfile::tempdir().unwrap();
    let e = engine(dir.path());
    let assistant = actor(&e, "assistant", PrincipalKind::Agent);
    let alice = actor(&e, "alice", PrincipalKind::User);
    let (kept, _) = e.add(&alice, WriteRequest::new(ns(), "The landlord's deposit is due on the first of the month.", Route::Direct)).unwrap();
    let (flagged, _) = e.add(&alice, WriteRequest::new(ns(), "The landlord's deposit account changed this month.", Route::Direct)).unwrap();
    e.flag_poisoned(&alice, &flagged.id()).unwrap();
    let found = e.search_report(&assistant, &ns(), "landlord deposit month", 5, Integrity::Untrusted).unwrap();
    assert_eq!(found.hits.iter().map(|h| h.item.id()).collect::<Vec<_>>(), vec![kept.id()]);
    assert_eq!(found.withheld, 1, "the search says it held one back");
    // The same memory by id: withheld by the lineage layer's read rule, with its reason.
    let w = withheld(e.get(&assistant, &flagged.id()));
    assert_eq!((w.layer.as_str(), w.rule.as_str(), w.flags.clone()), ("lineage", "poisoned", vec!["poisoned".to_owned()]));
    assert_eq!(e.list_report(&assistant, &ns(), 100).unwrap().withheld, vec![w]);
    // A search whose one hit outranks the withheld memory does not count it.
    let found = e.search_report(&assistant, &ns(), "landlord deposit due first", 1, Integrity::Untrusted).unwrap();
    assert_eq!(found.hits.len(), 1);
    assert!(found.withheld <= 1);
}

#[test]
fn revoked_ancestor_is_withheld_on_get_history_and_lineage() {
    let dir = tempfile::tempdir().unwrap();
    let e = engine(dir.path());
    let ana = actor(&e, "ana", PrincipalKind::Agent);
    let bo = actor(&e, "bo", PrincipalKind::Agent);
    let (source, _) = e.add(&ana, WriteRequest::new(ns(), "The supplier ships on Tuesdays.", Route::Direct)).unwrap();
    let (note, _) = e.derive(&ana, ns(), &[source.id()], "Supplier: Tuesday shipments.".into()).unwrap();
    e.get(&bo, &note.id()).unwrap();
    e.revoke(&ana, &source.id(), "wrong supplier").unwrap();
    // The revoked memory itself is gone for its readers (not found); what derives from it is
    // in their scope and held back by the lineage layer, which says why.
    not_found(e.get(&bo, &source.id()));
    let w = withheld(e.get(&bo, &note.id()));
    assert_eq!((w.layer.as_str(), w.rule.as_str()), ("lineage", "revoked_ancestor"));
    assert_eq!(withheld(e.history(&bo, &note.id())), w);
    let l = withheld(e.lineage_of(&bo, &note.id()));
    assert_eq!((l.layer.as_str(), l.rule.as_str()), ("lineage", "revoked_ancestor"));
    assert_eq!(e.list_report(&bo, &ns(), 100).unwrap().withheld, vec![w]);
}
