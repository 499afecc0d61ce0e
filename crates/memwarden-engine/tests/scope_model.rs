//! Property test of the composed engine (authority + lineage) against a small reference model:
//! no sequence of writes (private or shared), derivations, revocations and erasures lets a
//! principal read, by any door (get, list, search), a memory outside its scope, a revoked one,
//! one derived from a revoked one, or an erased one.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use memwarden_core::prelude::*;
use memwarden_engine::embed::HashEmbedder;
use memwarden_engine::{Actor, Engine, EngineConfig};
use proptest::prelude::*;

const AGENTS: [&str; 3] = ["ana", "ben", "cy"];
const USER: &str = "ursula";

#[derive(Debug, Clone)]
enum Op {
    /// Writer (agent index), reader subset bitmask (None: everyone).
    Write(usize, Option<u8>),
    /// Writer, parent picks (indices into the items written so far), reader mask.
    Derive(usize, Vec<usize>, Option<u8>),
    /// Revoker (agent index, or 3 = the user), item pick.
    Revoke(usize, usize),
    /// Item pick (erased by the user).
    Erase(usize),
}

fn op() -> impl Strategy<Value = Op> {
    let mask = prop::option::of(0u8..8);
    prop_oneof![
        4 => (0usize..3, mask.clone()).prop_map(|(w, m)| Op::Write(w, m)),
        4 => (0usize..3, prop::collection::vec(0usize..64, 1..3), mask).prop_map(|(w, p, m)| Op::Derive(w, p, m)),
        1 => (0usize..4, 0usize..64).prop_map(|(a, i)| Op::Revoke(a, i)),
        1 => (0usize..64).prop_map(Op::Erase),
    ]
}

/// What the model knows of one memory.
#[derive(Debug, Clone)]
struct Node {
    owner: PrincipalId,
    /// `None`: everyone in the tenant.
    readers: Option<BTreeSet<PrincipalId>>,
    parents: Vec<ItemId>,
    revoked: bool,
    erased: bool,
}

#[derive(Default)]
struct Model {
    nodes: BTreeMap<ItemId, Node>,
    order: Vec<ItemId>,
}

impl Model {
    fn admits(n: &Node, r: &PrincipalId) -> bool {
        n.owner == *r || n.readers.as_ref().is_none_or(|s| s.contains(r))
    }

    /// May `r` read `id`: it exists, is neither erased nor revoked, its scope admits `r`, and no
    /// ancestor is revoked.
    fn may_read(&self, r: &PrincipalId, id: &ItemId) -> bool {
        let Some(n) = self.nodes.get(id) else { return false };
        !n.erased && Self::admits(n, r) && !self.revoked_on_path(id)
    }

    fn revoked_on_path(&self, id: &ItemId) -> bool {
        let Some(n) = self.nodes.get(id) else { return true };
        n.revoked || n.parents.iter().any(|p| self.revoked_on_path(p))
    }

    /// The scope the authority gate derives: the intersection of the parents' reader sets (`None`
    /// is everyone), narrowed by the asked readers plus the writer; empty: the writer alone.
    fn derived_readers(&self, writer: &PrincipalId, parents: &[ItemId], asked: Option<&BTreeSet<PrincipalId>>) -> Option<BTreeSet<PrincipalId>> {
        let mut acc: Option<BTreeSet<PrincipalId>> = None;
        let mut meet = |s: &BTreeSet<PrincipalId>| {
            acc = Some(match &acc {
                None => s.clone(),
                Some(a) => a.intersection(s).cloned().collect(),
            });
        };
        for p in parents {
            if let Some(s) = self.nodes.get(p).and_then(|n| n.readers.clone()) {
                meet(&s);
            }
        }
        if let Some(a) = asked {
            let mut a = a.clone();
            a.insert(writer.clone());
            meet(&a);
        }
        match acc {
            Some(s) if s.is_empty() => Some(BTreeSet::from([writer.clone()])),
            other => other,
        }
    }
}

fn pid(s: &str) -> PrincipalId {
    PrincipalId::new(s).unwrap()
}

fn mask_readers(m: Option<u8>) -> Option<BTreeSet<PrincipalId>> {
    m.map(|m| AGENTS.iter().enumerate().filter(|(i, _)| m & (1 << i) != 0).map(|(_, a)| pid(a)).collect())
}

fn ns() -> Namespace {
    Namespace::new("shared-space").unwrap()
}

fn run(ops: &[Op]) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let e = Engine::open(dir.path(), EngineConfig { embedder: Some(Arc::new(HashEmbedder::new(64))), ..EngineConfig::default() }).unwrap();
    let t = TenantId::new("acme").unwrap();
    let key = memwarden_engine::keys::generate_key().unwrap().verifying_key().to_bytes();
    for a in AGENTS {
        e.register_principal(Principal { id: pid(a), tenant: t.clone(), kind: PrincipalKind::Agent, domain: None, allow_listed: false, public_key: None, action: None }).unwrap();
    }
    e.register_principal(Principal { id: pid(USER), tenant: t.clone(), kind: PrincipalKind::User, domain: None, allow_listed: false, public_key: Some(key), action: None }).unwrap();
    // Each principal reads in a session of its own per step, so session taint never hides a
    // result the model allows (the model is about scope, not integrity).
    let actor = |who: &str, step: usize| -> Actor { e.authenticate_session(&t, &pid(who), SessionId::new(&format!("s{step}")).unwrap()).unwrap() };
    let mut m = Model::default();
    for (step, o) in ops.iter().enumerate() {
        match o {
            Op::Write(w, mask) => {
                let who = AGENTS[*w];
                let readers = mask_readers(*mask);
                let mut req = WriteRequest::new(ns(), format!("note {step} by {who} about the shared space"), Route::Direct);
                req.readers = readers.clone();
                let (item, _) = e.add(&actor(who, step), req).unwrap();
                let derived = m.derived_readers(&pid(who), &[], readers.as_ref());
                m.nodes.insert(item.id(), Node { owner: pid(who), readers: derived, parents: Vec::new(), revoked: false, erased: false });
                m.order.push(item.id());
            }
            Op::Derive(w, picks, mask) => {
                if m.order.is_empty() {
                    continue;
                }
                let who = AGENTS[*w];
                let mut parents: Vec<ItemId> = picks.iter().map(|i| m.order[i % m.order.len()]).collect();
                parents.sort();
                parents.dedup();
                let readers = mask_readers(*mask);
                let mut req = WriteRequest::new(ns(), format!("summary {step} by {who} of the shared space"), Route::Summary);
                req.parents = parents.iter().map(|id| ParentRef { id: *id, kind: EdgeKind::DerivedFrom }).collect();
                req.readers = readers.clone();
                match e.add(&actor(who, step), req) {
                    Ok((item, _)) => {
                        // Safety: the writer could read every parent.
                        for p in &parents {
                            prop_assert!(m.may_read(&pid(who), p), "{who} derived from {p}, which it may not read");
                        }
                        let derived = m.derived_readers(&pid(who), &parents, readers.as_ref());
                        m.nodes.insert(item.id(), Node { owner: pid(who), readers: derived, parents, revoked: false, erased: false });
                        m.order.push(item.id());
                    }
                    Err(_) => {
                        // Refused: fine when some parent is unreadable; otherwise a liveness bug.
                        prop_assert!(parents.iter().any(|p| !m.may_read(&pid(who), p)), "{who} was refused a derivation of readable parents");
                    }
                }
            }
            Op::Revoke(a, pick) => {
                if m.order.is_empty() {
                    continue;
                }
                let id = m.order[pick % m.order.len()];
                let who = if *a == 3 { USER } else { AGENTS[*a] };
                if e.revoke(&actor(who, step), &id, "test").is_ok()
                    && let Some(n) = m.nodes.get_mut(&id)
                {
                    n.revoked = true;
                }
            }
            Op::Erase(pick) => {
                if m.order.is_empty() {
                    continue;
                }
                let id = m.order[pick % m.order.len()];
                if let Ok((record, _)) = e.erase(&actor(USER, step), &id) {
                    prop_assert!(record.erased.contains(&id));
                    for x in record.erased {
                        if let Some(n) = m.nodes.get_mut(&x) {
                            n.erased = true;
                        }
                    }
                }
            }
        }
        // Every door, for every principal.
        for who in AGENTS.iter().chain([&USER]) {
            let r = pid(who);
            let a = actor(who, 10_000 + step);
            for item in e.list(&a, &ns(), 1000).unwrap() {
                prop_assert!(m.may_read(&r, &item.id()), "list gave {who} {}", item.id());
            }
            for h in e.search(&a, &ns(), "note summary shared space", 20).unwrap() {
                prop_assert!(m.may_read(&r, &h.item.id()), "search gave {who} {}", h.item.id());
            }
            for id in &m.order {
                if e.get(&a, id).is_ok() {
                    prop_assert!(m.may_read(&r, id), "get gave {who} {id}");
                }
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]
    #[test]
    fn no_door_returns_a_memory_outside_the_model(ops in prop::collection::vec(op(), 1..14)) {
        run(&ops)?;
    }
}

/// Regression (issue 19.5, across a restart): a session's readers ceiling — the intersection of
/// the readers of everything it was handed — was kept only in memory; the stored session row
/// held the floor and the witnesses (items below trusted). A session handed a user's *trusted*
/// private note (no witness: it does not lower the floor) and then restarted wrote a note that
/// everyone could read. The ceiling is stored with the session and only narrows.
#[test]
fn a_sessions_readers_ceiling_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let t = TenantId::new("acme").unwrap();
    let ns = Namespace::new("notes").unwrap();
    let config = || EngineConfig { embedder: Some(Arc::new(HashEmbedder::new(64))), ..EngineConfig::default() };
    let session = SessionId::new("task-7").unwrap();
    {
        let e = Engine::open(dir.path(), config()).unwrap();
        for (id, kind) in [("ana", PrincipalKind::Agent), ("cy", PrincipalKind::Agent), (USER, PrincipalKind::User)] {
            let public_key = (kind == PrincipalKind::User).then_some([7u8; 32]);
            e.register_principal(Principal { id: PrincipalId::new(id).unwrap(), tenant: t.clone(), kind, domain: None, allow_listed: false, public_key, action: None })
                .unwrap();
        }
        let user = e.authenticate(&t, &PrincipalId::new(USER).unwrap()).unwrap();
        let mut secret = WriteRequest::new(ns.clone(), "The merger closes on 14 May; tell nobody.", Route::Dialogue);
        secret.readers = Some([PrincipalId::new("ana").unwrap()].into_iter().collect());
        let (secret, _) = e.add(&user, secret).unwrap();
        assert_eq!(secret.label().integrity(), Integrity::Trusted);
        let ana = e.authenticate_session(&t, &PrincipalId::new("ana").unwrap(), session.clone()).unwrap();
        e.get(&ana, &secret.id()).unwrap();
        assert_eq!(e.observed(&ana).unwrap().floor(), Integrity::Trusted, "a trusted item lowers no floor");
    }
    let e = Engine::open(dir.path(), config()).unwrap();
    let ana = e.authenticate_session(&t, &PrincipalId::new("ana").unwrap(), session).unwrap();
    let (note, _) = e.add(&ana, WriteRequest::new(ns.clone(), "Summary of today: merger timeline noted.", Route::Direct)).unwrap();
    let cy = e.authenticate(&t, &PrincipalId::new("cy").unwrap()).unwrap();
    assert!(!note.readable_by(cy.id()), "the note escaped the ceiling: {:?}", note.scope());
    assert!(e.get(&cy, &note.id()).is_err());
    assert!(e.list(&cy, &ns, 10).unwrap().iter().all(|i| i.id() != note.id()));
}
