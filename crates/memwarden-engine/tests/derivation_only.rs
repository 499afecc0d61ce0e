//! Issue 33: erasure and revocation follow declared derivation only. A session that was handed
//! memory X writes with a `seen_in_session` edge to X; erasing or revoking X never erases,
//! revokes or hides those writes (across owners), later writes of that session stay readable,
//! and revoking any version of a memory revokes every version.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::sync::Arc;

use memwarden_core::prelude::*;
use memwarden_engine::embed::HashEmbedder;
use memwarden_engine::{Actor, Engine, EngineConfig, EngineError};

fn tenant() -> TenantId {
    TenantId::new("acme").unwrap()
}

fn ns() -> Namespace {
    Namespace::new("notes").unwrap()
}

fn setup(dir: &std::path::Path) -> Engine {
    let e = Engine::open(dir, EngineConfig { embedder: Some(Arc::new(HashEmbedder::new(64))), ..EngineConfig::default() }).unwrap();
    for (id, kind) in [("bot", PrincipalKind::Agent), ("ben", PrincipalKind::Agent), ("ursula", PrincipalKind::User)] {
        let public_key = (kind == PrincipalKind::User).then_some([7u8; 32]);
        e.register_principal(Principal { id: PrincipalId::new(id).unwrap(), tenant: tenant(), kind, domain: None, allow_listed: false, public_key, action: None })
            .unwrap();
    }
    e
}

fn in_session(e: &Engine, who: &str, session: &str) -> Actor {
    e.authenticate_session(&tenant(), &PrincipalId::new(who).unwrap(), SessionId::new(session).unwrap()).unwrap()
}

fn write(e: &Engine, who: &Actor, text: &str) -> MemoryItem {
    e.add(who, WriteRequest::new(ns(), text, Route::Direct)).unwrap().0
}

fn seen_ids(item: &MemoryItem) -> Vec<ItemId> {
    item.parents().iter().filter(|p| p.kind == EdgeKind::SeenInSession).map(|p| p.id).collect()
}

/// Regression (issue 33.2): an agent that erased its own note erased a user's memory whose
/// session had merely seen the note, and the session's later writes answered `active` and then
/// read as not found.
#[test]
fn erasing_a_memory_a_session_saw_keeps_what_that_session_wrote() {
    let dir = tempfile::tempdir().unwrap();
    let e = setup(dir.path());
    let bot = in_session(&e, "bot", "b1");
    let ursula = in_session(&e, "ursula", "u1");
    // The bot's note is labelled agent: handing it to the user's session lowers that floor.
    let x = write(&e, &bot, "The caterer's number changed to 555-0101.");
    let declared = e.derive(&bot, ns(), &[x.id()], "Caterer: call 555-0101.".into()).unwrap().0;
    e.get(&ursula, &x.id()).unwrap();
    let y = write(&e, &ursula, "Book the caterer for Friday.");
    assert_eq!(seen_ids(&y), vec![x.id()], "the user's note carries the session's witness");
    let (record, _) = e.erase(&bot, &x.id()).unwrap();
    let mut erased = record.erased.clone();
    erased.sort();
    let mut want = vec![x.id(), declared.id()];
    want.sort();
    assert_eq!(erased, want, "the memory and what was declared derived from it, nothing else");
    assert_eq!(record.seen_marked, vec![y.id()]);
    assert_eq!(e.get(&ursula, &y.id()).unwrap().id(), y.id());
    let z = write(&e, &ursula, "Also order flowers.");
    assert_eq!(z.status(), Status::Active);
    assert_eq!(e.get(&ursula, &z.id()).unwrap().id(), z.id(), "an acknowledged write reads back");
    assert!(e.list(&ursula, &ns(), 100).unwrap().iter().any(|i| i.id() == z.id()));
}

/// The same across owners, with the seen edge in place: the user's session is handed an
/// untrusted mail, writes (a `seen_in_session` edge to the mail), the mail is erased by its
/// owner and then the mail's twin revoked; the user's notes stay readable, marked.
#[test]
fn seen_in_session_edges_never_erase_revoke_or_hide() {
    let dir = tempfile::tempdir().unwrap();
    let e = setup(dir.path());
    e.register_principal(Principal {
        id: PrincipalId::new("inbox").unwrap(),
        tenant: tenant(),
        kind: PrincipalKind::Source,
        domain: None,
        allow_listed: false,
        public_key: None,
        action: None,
    })
    .unwrap();
    let inbox = in_session(&e, "inbox", "default");
    let mail = e.add(&inbox, WriteRequest::new(ns(), "Lunch moved to 1pm on Thursday.", Route::ExternalObservation)).unwrap().0;
    let twin = e.add(&inbox, WriteRequest::new(ns(), "Parking is on level 2 this week.", Route::ExternalObservation)).unwrap().0;
    let ursula = in_session(&e, "ursula", "u1");
    let ben = in_session(&e, "ben", "b1");
    e.get(&ursula, &mail.id()).unwrap();
    e.get(&ursula, &twin.id()).unwrap();
    e.get(&ben, &mail.id()).unwrap();
    let note = write(&e, &ursula, "Lunch Thursday 1pm; parking level 2.");
    let bens = write(&e, &ben, "Reminder: lunch on Thursday.");
    assert!(seen_ids(&note).contains(&mail.id()) && seen_ids(&note).contains(&twin.id()), "{:?}", note.parents());
    assert_eq!(note.label().integrity(), Integrity::Untrusted, "the edge still lowers the label");
    // A principal that neither owns the mail nor is a user may not erase it.
    assert!(matches!(e.erase(&ben, &mail.id()), Err(EngineError::Forbidden(_))));
    let (record, _) = e.erase(&inbox, &mail.id()).unwrap();
    assert_eq!(record.erased, vec![mail.id()]);
    let mut marked = record.seen_marked.clone();
    marked.sort();
    let mut want = vec![note.id(), bens.id()];
    want.sort();
    assert_eq!(marked, want, "both writers' notes are marked, none erased");
    e.revoke(&inbox, &twin.id(), "withdrawn").unwrap();
    for (who, id) in [(&ursula, note.id()), (&ben, bens.id())] {
        assert_eq!(e.get(who, &id).unwrap().id(), id);
        assert!(e.list(who, &ns(), 100).unwrap().iter().any(|i| i.id() == id));
        let view = e.lineage_of(who, &id).unwrap();
        assert!(view.record.saw_erased(), "marked as having seen an erased source");
    }
    // The session goes on writing, and what it writes reads back.
    let later = write(&e, &ursula, "Bring the slides.");
    assert_eq!(later.status(), Status::Active);
    assert_eq!(e.get(&ursula, &later.id()).unwrap().id(), later.id());
}

/// Regression (issue 33.4): revoking the current version left the older versions readable
/// through history by other principals.
#[test]
fn revoking_a_version_revokes_every_version() {
    let dir = tempfile::tempdir().unwrap();
    let e = setup(dir.path());
    let bot = in_session(&e, "bot", "b1");
    let ursula = in_session(&e, "ursula", "u1");
    let v1 = write(&e, &bot, "Office wifi password rotates monthly.");
    let v2 = e.update(&bot, &v1.id(), "Office wifi password rotates weekly.".into()).unwrap().0;
    let v3 = e.update(&bot, &v2.id(), "Office wifi password rotates daily.".into()).unwrap().0;
    assert_eq!(e.history(&ursula, &v3.id()).unwrap().len(), 3);
    e.revoke(&bot, &v3.id(), "wrong").unwrap();
    for id in [v1.id(), v2.id(), v3.id()] {
        assert!(matches!(e.history(&ursula, &id), Err(EngineError::NotFound(_))), "{id}");
        assert!(e.get(&ursula, &id).is_err());
        assert_eq!(e.store().item(&tenant(), &id).unwrap().unwrap().status(), Status::Revoked, "{id}");
    }
    // Revoking an older version by its id does the same (a user, this time).
    let w1 = write(&e, &bot, "Standup at 9:30.");
    let w2 = e.update(&bot, &w1.id(), "Standup at 9:45.".into()).unwrap().0;
    e.revoke(&ursula, &w1.id(), "cancelled").unwrap();
    assert!(e.get(&bot, &w2.id()).is_err());
    assert!(e.revoke(&bot, &w2.id(), "again").is_err(), "already revoked");
}
