//! Property test against a small reference model.
//!
//! Random sequences of writes (roots and derivations), promotions, verifications, poison flags,
//! revocations, erasures, retrievals and gate decisions run against both the real
//! [`LineageGraph`] and a deliberately naive model that recomputes everything from its own records
//! on every question. After every operation:
//!
//! * an agent can read a record exactly when the model says every item on the record's path
//!   (itself and all transitive ancestors) admits the agent and none is revoked or the record
//!   erased; *during* a bounded propagation the graph may deny more, never allow more;
//! * every incrementally maintained ancestry summary equals the model's from-scratch recomputation
//!   over the full ancestry (and the library's own from-scratch recomputation);
//! * write, promotion, verification, revocation and erasure accept and refuse the same events;
//! * ranking returns only readable records, at most k, best first; the gate never allows an action
//!   on a support the agent may not read, or on a revoked or poisoned path.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::type_complexity, missing_docs)]

use memwarden_lineage::prelude::*;
use memwarden_lineage::summary::{agrees, hop_factor};
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};

const PRINCIPALS: [(&str, PrincipalKind); 6] = [
    ("u", PrincipalKind::User),
    ("a0", PrincipalKind::Agent),
    ("a1", PrincipalKind::Agent),
    ("a2", PrincipalKind::Agent),
    ("t", PrincipalKind::Tool),
    ("s", PrincipalKind::Source),
];
const POOL: [&str; 4] = ["u", "a0", "a1", "a2"];
const KINDS: [EdgeKind; 3] = [EdgeKind::DerivedFrom, EdgeKind::SummarizedFrom, EdgeKind::ObservedFrom];

fn pid(i: usize) -> PrincipalId {
    PrincipalId::new(PRINCIPALS[i % PRINCIPALS.len()].0).unwrap()
}
fn mask(m: u8) -> BTreeSet<PrincipalId> {
    (0..POOL.len()).filter(|b| m & (1 << b) != 0).map(|b| PrincipalId::new(POOL[b]).unwrap()).collect()
}
/// Ids deliberately not in creation order, so "smallest ids" differs from "oldest".
fn rid(i: usize) -> ItemId {
    let mut b = [0u8; 16];
    b[0] = ((i * 37 + 11) % 251) as u8;
    b[1] = i as u8;
    ItemId::from_bytes(b)
}

#[derive(Debug, Clone)]
enum Op {
    Write { writer: u8, parents: Vec<(u8, u8)>, narrow: Option<u8>, integrity: u8, poisoned: bool, trust: Option<u8> },
    Promote { target: u8, by_owner: bool, widen: Option<u8> },
    Revoke { target: u8 },
    Verify { target: u8, by: u8 },
    Poison { target: u8 },
    Erase { target: u8 },
    Read { reader: u8, picks: Vec<(u8, u8)>, k: u8 },
    Gate { agent: u8, kind: u8, risk: u8, picks: Vec<u8>, ctx: Vec<u8> },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (any::<u8>(), prop::collection::vec((any::<u8>(), any::<u8>()), 0..3), prop::option::of(any::<u8>()), any::<u8>(), prop::bool::weighted(0.1), prop::option::weighted(0.2, any::<u8>()))
            .prop_map(|(writer, parents, narrow, integrity, poisoned, trust)| Op::Write { writer, parents, narrow, integrity, poisoned, trust }),
        2 => (any::<u8>(), prop::bool::weighted(0.85), prop::option::of(any::<u8>())).prop_map(|(target, by_owner, widen)| Op::Promote { target, by_owner, widen }),
        1 => any::<u8>().prop_map(|target| Op::Revoke { target }),
        1 => (any::<u8>(), any::<u8>()).prop_map(|(target, by)| Op::Verify { target, by }),
        1 => any::<u8>().prop_map(|target| Op::Poison { target }),
        2 => any::<u8>().prop_map(|target| Op::Erase { target }),
        2 => (any::<u8>(), prop::collection::vec((any::<u8>(), any::<u8>()), 0..8), 1..6u8).prop_map(|(reader, picks, k)| Op::Read { reader, picks, k }),
        2 => (any::<u8>(), any::<u8>(), any::<u8>(), prop::collection::vec(any::<u8>(), 0..4), prop::collection::vec(any::<u8>(), 0..3))
            .prop_map(|(agent, kind, risk, picks, ctx)| Op::Gate { agent, kind, risk, picks, ctx }),
    ]
}

// ---- the reference model -------------------------------------------------------------------------

#[derive(Debug, Clone)]
struct MRec {
    writer: usize,
    parents: Vec<(EdgeKind, usize)>,
    readers: Readers,
    revoked: bool,
    erased: bool,
    integrity: Integrity,
    poisoned: bool,
    verified: bool,
    base: Trust,
}

#[derive(Default)]
struct Model {
    recs: Vec<MRec>,
}

impl Model {
    fn eff(&self, i: usize) -> Readers {
        let r = &self.recs[i];
        if r.revoked {
            return Readers::Only(BTreeSet::new());
        }
        match &r.readers {
            Readers::All => Readers::All,
            Readers::Only(s) => {
                let mut s = s.clone();
                s.insert(pid(r.writer));
                Readers::Only(s)
            }
        }
    }
    fn closed(&self, i: usize) -> BTreeSet<usize> {
        let mut out = BTreeSet::new();
        let mut todo = vec![i];
        while let Some(x) = todo.pop() {
            if out.insert(x) {
                todo.extend(self.recs[x].parents.iter().map(|(_, p)| *p));
            }
        }
        out
    }
    fn can_read(&self, a: &PrincipalId, i: usize) -> bool {
        !self.recs[i].erased && self.closed(i).into_iter().all(|x| !self.recs[x].revoked && self.eff(x).admits(a))
    }
    /// Eagerly re-intersect every record's readers with its parents' (narrowing only; empty → the
    /// writer alone), in creation order.
    fn recompute_scopes(&mut self) {
        for i in 0..self.recs.len() {
            if self.recs[i].revoked {
                continue;
            }
            let mut r = self.recs[i].readers.clone();
            for (_, p) in self.recs[i].parents.clone() {
                r = r.intersect(&self.eff(p));
            }
            if matches!(&r, Readers::Only(s) if s.is_empty()) {
                r = Readers::Only(BTreeSet::from([pid(self.recs[i].writer)]));
            }
            self.recs[i].readers = r;
        }
    }
    fn own_causes(&self, x: usize) -> CauseSet {
        let r = &self.recs[x];
        CauseSet::EMPTY
            .with_if(Cause::Untrusted, r.integrity == Integrity::Untrusted)
            .with_if(Cause::Private, !r.revoked && r.readers != Readers::All)
            .with_if(Cause::Poisoned, r.poisoned)
            .with_if(Cause::Revoked, r.revoked)
    }
    /// The summary of `i` from the definitions, over the full ancestry.
    fn summary(&self, config: &LineageConfig, i: usize) -> AncestrySummary {
        let c = self.closed(i);
        let mut all: Vec<AffectedAncestor> = c
            .iter()
            .filter(|x| !self.own_causes(**x).is_empty())
            .map(|x| AffectedAncestor { id: rid(*x), causes: self.own_causes(*x) })
            .collect();
        all.sort();
        let total = all.len();
        all.truncate(config.affected_ids_max);
        // Chain properties as a fixpoint over the ancestry (no topological order assumed).
        let mut chain: BTreeMap<usize, (Trust, u32, bool)> = BTreeMap::new();
        for _ in 0..=c.len() {
            for &x in c.iter().rev() {
                let r = &self.recs[x];
                if r.parents.is_empty() {
                    chain.insert(x, (Trust::ONE, 0, r.verified));
                    continue;
                }
                let vals: Option<Vec<(EdgeKind, (Trust, u32, bool))>> =
                    r.parents.iter().map(|(k, p)| chain.get(p).map(|v| (*k, *v))).collect();
                if let Some(vals) = vals {
                    let flow = vals.iter().map(|(k, v)| v.0.times(hop_factor(config, *k))).min().unwrap();
                    let depth = vals.iter().map(|(_, v)| v.1 + 1).max().unwrap();
                    let verified = r.verified || vals.iter().all(|(_, v)| v.2);
                    chain.insert(x, (flow, depth, verified));
                }
            }
        }
        let (flow, depth, verified) = chain[&i];
        AncestrySummary {
            min_source_trust: c.iter().map(|x| self.recs[*x].base).min().unwrap(),
            flow,
            depth,
            verified,
            untrusted: c.iter().any(|x| self.recs[*x].integrity == Integrity::Untrusted),
            private: c.iter().any(|x| self.own_causes(*x).contains(Cause::Private)),
            poisoned: c.iter().any(|x| self.recs[*x].poisoned),
            revoked: c.iter().any(|x| self.recs[*x].revoked),
            ceiling: c.iter().fold(Readers::All, |acc, x| acc.intersect(&self.eff(*x))),
            affected_rest: Tally::Exact((total - all.len()) as u64),
            affected: all,
        }
    }
    fn strict_ceiling(&self, i: usize) -> Readers {
        let mut c = self.closed(i);
        c.remove(&i);
        c.into_iter().fold(Readers::All, |acc, x| acc.intersect(&self.eff(x)))
    }
}

fn subset(a: &Readers, b: &Readers) -> bool {
    memwarden_lineage::scope::readers_subset(a, b)
}

// ---- the property -----------------------------------------------------------------------------------

fn check_reads(g: &LineageGraph, m: &Model, exact: bool) -> Result<(), TestCaseError> {
    for (a, _) in PRINCIPALS {
        let a = PrincipalId::new(a).unwrap();
        for i in 0..m.recs.len() {
            let got = g.can_read(&a, rid(i)).is_ok();
            let want = m.can_read(&a, i);
            if exact {
                prop_assert_eq!(got, want, "can_read({}, #{}) = {:?}", a, i, g.can_read(&a, rid(i)));
            } else {
                prop_assert!(!got || want, "mid-propagation read of #{} by {} allowed but not permitted", i, a);
            }
        }
    }
    Ok(())
}

fn check_state(g: &LineageGraph, m: &Model) -> Result<(), TestCaseError> {
    check_reads(g, m, true)?;
    for (i, r) in m.recs.iter().enumerate() {
        let st = g.record(rid(i)).unwrap();
        prop_assert_eq!(&st.scope().readers, &r.readers, "readers of #{}", i);
        prop_assert_eq!(st.revoked(), r.revoked);
        prop_assert_eq!(st.erased(), r.erased);
        prop_assert_eq!(st.poisoned(), r.poisoned);
        prop_assert_eq!(!st.verified_by().is_empty(), r.verified);
        prop_assert_eq!(st.base_trust(), r.base);
        let want = m.summary(g.config(), i);
        prop_assert!(agrees(st.summary(), &want), "summary of #{}:\n stored {:?}\n model  {:?}", i, st.summary(), want);
        // Invariant: with nothing revoked on the path, the record's readers are exactly what its
        // whole path admits.
        if !st.summary().revoked {
            prop_assert_eq!(&st.summary().ceiling, &memwarden_lineage::scope::effective_readers(st.scope()));
        }
        for (a, _) in PRINCIPALS {
            let bd = g.path_trust(rid(i), &PrincipalId::new(a).unwrap()).unwrap();
            let rho = bd.rho.get();
            prop_assert!((0.0..=1.0).contains(&rho));
            prop_assert!(bd.rho <= bd.s && bd.rho <= bd.f && bd.rho <= bd.i && bd.rho <= bd.v);
        }
    }
    g.verify_summaries().map_err(|e| TestCaseError::fail(format!("{e}")))?;
    // Revocation is eager and kept for audit: every revoked record has an `invalidated_by` edge
    // to its revoker, and every descendant of a revoked record one to that record.
    let inv: BTreeSet<(NodeRef, NodeRef)> = g
        .edges()
        .iter()
        .filter(|e| e.kind == EdgeKind::InvalidatedBy)
        .map(|e| (e.from.clone(), e.to.clone()))
        .collect();
    for (i, r) in m.recs.iter().enumerate() {
        if r.revoked {
            prop_assert!(inv.iter().any(|(f, t)| *f == NodeRef::Record(rid(i)) && matches!(t, NodeRef::Principal(_))));
        }
        for x in m.closed(i) {
            if x != i && m.recs[x].revoked {
                prop_assert!(
                    inv.contains(&(NodeRef::Record(rid(i)), NodeRef::Record(rid(x)))),
                    "#{} lacks invalidated_by #{}",
                    i,
                    x
                );
            }
        }
    }
    Ok(())
}

/// A store that only ever sees effects: it must end up with exactly the graph's rows and edges.
#[derive(Default)]
struct Replica {
    rows: BTreeMap<ItemId, RecordState>,
    edges: Vec<Edge>,
}

impl Replica {
    fn upsert(&mut self, rows: &[RecordState]) {
        for r in rows {
            self.rows.insert(r.id(), r.clone());
        }
    }
    fn prop(&mut self, fx: &PropagationEffects) {
        self.upsert(&fx.updated);
        self.edges.extend(fx.edges.iter().cloned());
    }
    fn check(&self, g: &LineageGraph) -> Result<(), TestCaseError> {
        let rows: BTreeMap<ItemId, RecordState> = g.records().map(|r| (r.id(), r.clone())).collect();
        prop_assert_eq!(&self.rows, &rows, "replayed rows differ");
        prop_assert_eq!(self.edges.as_slice(), g.edges(), "replayed edges differ");
        Ok(())
    }
}

fn run(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let cfg = LineageConfig { affected_ids_max: 3, propagation_step_records_max: 2, ..Default::default() };
    let mut g = LineageGraph::new(cfg.clone()).unwrap();
    for (id, kind) in PRINCIPALS {
        g.register_principal(RegisterPrincipal { id: PrincipalId::new(id).unwrap(), kind, reputation: None }).unwrap();
    }
    let mut m = Model::default();
    let mut replica = Replica::default();
    let mut at = 0u64;
    for op in ops {
        at += 1;
        let n = m.recs.len();
        let pick = |x: u8| (x as usize) % n.max(1);
        let mut tightening = false;
        match op {
            Op::Write { writer, parents, narrow, integrity, poisoned, trust } => {
                let w = writer as usize % PRINCIPALS.len();
                let mut ps: Vec<(EdgeKind, usize)> = Vec::new();
                if n > 0 {
                    for (pk, kk) in parents {
                        let pi = pick(pk);
                        if !ps.iter().any(|(_, x)| *x == pi) {
                            ps.push((KINDS[kk as usize % 3], pi));
                        }
                    }
                }
                let integ = [Integrity::Untrusted, Integrity::Agent, Integrity::Trusted][integrity as usize % 3];
                let st = trust.map(|t| Trust::new(f64::from(t) / 255.0).unwrap());
                let mut ev = WriteEvent::new(rid(n), RecordKind::Memory, pid(w), format!("text {n}"), integ, at);
                for (k, pi) in &ps {
                    ev = ev.parent(rid(*pi), *k);
                }
                ev.readers = narrow.map(mask);
                ev.poisoned = poisoned;
                ev.source_trust = st;
                let ok = ps.iter().all(|(_, pi)| m.can_read(&pid(w), *pi));
                let res = g.apply_write(ev.clone());
                prop_assert_eq!(res.is_ok(), ok, "write {:?}: {:?}", ev, res);
                if let Ok(fx) = res {
                    replica.upsert(std::slice::from_ref(&fx.record));
                    replica.edges.extend(fx.edges.iter().cloned());
                    let mut readers = Readers::All;
                    for (_, pi) in &ps {
                        readers = readers.intersect(&m.eff(*pi));
                    }
                    if let Some(nm) = narrow {
                        readers = readers.intersect(&Readers::Only(mask(nm)));
                    }
                    let fell_back = matches!(&readers, Readers::Only(s) if s.is_empty());
                    if fell_back {
                        readers = Readers::Only(BTreeSet::from([pid(w)]));
                    } else {
                        for (_, pi) in &ps {
                            prop_assert!(
                                subset(&fx.record.scope().readers, &m.eff(*pi)),
                                "derived scope within every parent's"
                            );
                        }
                    }
                    prop_assert_eq!(fx.scope_fell_back, fell_back);
                    let label = match integ {
                        Integrity::Trusted => cfg.trust_trusted,
                        Integrity::Agent => cfg.trust_agent,
                        Integrity::Untrusted => cfg.trust_untrusted,
                    };
                    m.recs.push(MRec {
                        writer: w,
                        parents: ps,
                        readers,
                        revoked: false,
                        erased: false,
                        integrity: integ,
                        poisoned,
                        verified: false,
                        base: st.map_or(label, |t| t.min(label)),
                    });
                }
            }
            Op::Promote { target, by_owner, widen } if n > 0 => {
                let i = pick(target);
                let r = m.recs[i].clone();
                let actor = if by_owner { r.writer } else { (r.writer + 1) % PRINCIPALS.len() };
                let new = match (widen, &r.readers) {
                    (None, _) | (_, Readers::All) => Readers::All,
                    (Some(mk), Readers::Only(s)) => Readers::Only(s.union(&mask(mk)).cloned().collect()),
                };
                let ok = !r.erased
                    && !r.revoked
                    && actor == r.writer
                    && subset(&r.readers, &new)
                    && subset(&new, &m.strict_ceiling(i));
                let res =
                    g.apply_promotion(PromoteEvent { id: rid(i), actor: pid(actor), readers: new.clone(), at_ms: at });
                prop_assert_eq!(res.is_ok(), ok, "promotion of #{} to {:?}: {:?}", i, new, res);
                if let Ok(fx) = &res {
                    replica.prop(fx);
                }
                if ok {
                    m.recs[i].readers = new;
                }
            }
            Op::Revoke { target } if n > 0 => {
                let i = pick(target);
                let ok = !m.recs[i].revoked;
                let res = g.apply_revocation(RevokeEvent { id: rid(i), revoker: pid(0), at_ms: at });
                prop_assert_eq!(res.is_ok(), ok);
                if let Ok(fx) = &res {
                    replica.prop(fx);
                }
                if ok {
                    m.recs[i].revoked = true;
                    m.recs[i].readers = Readers::Only(BTreeSet::new());
                    tightening = true;
                }
            }
            Op::Verify { target, by } if n > 0 => {
                let i = pick(target);
                let v = by as usize % PRINCIPALS.len();
                let ok = matches!(PRINCIPALS[v].1, PrincipalKind::User | PrincipalKind::Tool) && !m.recs[i].erased;
                let res = g.apply_verification(VerifyEvent { id: rid(i), verifier: pid(v), at_ms: at });
                prop_assert_eq!(res.is_ok(), ok);
                if let Ok(fx) = &res {
                    replica.prop(fx);
                }
                if ok {
                    m.recs[i].verified = true;
                }
            }
            Op::Poison { target } if n > 0 => {
                let i = pick(target);
                let fx = g.apply_poison_flag(FlagPoisonedEvent { id: rid(i), reporter: pid(4), at_ms: at }).unwrap();
                replica.prop(&fx);
                m.recs[i].poisoned = true;
                tightening = true;
            }
            Op::Erase { target } if n > 0 => {
                let i = pick(target);
                let res = g.apply_erasure(EraseEvent {
                    id: rid(i),
                    erasure_id: rid(200 + at as usize % 50),
                    requested_by: pid(0),
                    at_ms: at,
                });
                if m.recs[i].erased {
                    prop_assert!(res.is_err());
                } else if let Ok(fx) = res {
                    replica.upsert(&fx.tombstones);
                    // Model: the target, then (in creation order) every record all of whose parents
                    // are erased or being erased.
                    let mut doomed = vec![i];
                    for j in (i + 1)..n {
                        let r = &m.recs[j];
                        if !r.erased
                            && !r.parents.is_empty()
                            && r.parents.iter().all(|(_, p)| doomed.contains(p) || m.recs[*p].erased)
                            && r.parents.iter().any(|(_, p)| doomed.contains(p))
                        {
                            doomed.push(j);
                        }
                    }
                    let mut want: Vec<ItemId> = doomed.iter().map(|j| rid(*j)).collect();
                    let mut got = fx.delete.clone();
                    want.sort();
                    got.sort();
                    prop_assert_eq!(got, want);
                    for j in doomed {
                        m.recs[j].erased = true;
                    }
                } else {
                    // Only a duplicate erasure id may refuse a live target.
                    prop_assert!(matches!(res, Err(EventError::DuplicateErasure(_))), "{:?}", res);
                }
            }
            Op::Read { reader, picks, k } if n > 0 => {
                let a = pid(reader as usize);
                let cands: Vec<Candidate> = picks
                    .iter()
                    .map(|(x, s)| Candidate { id: rid(pick(*x)), similarity: f64::from(*s) / 255.0 * 1.2 - 0.1 })
                    .collect();
                let r = g.rank(&a, &cands, Some(k as usize)).unwrap();
                prop_assert!(r.selected.len() <= k as usize);
                for s in &r.selected {
                    let i = (0..n).find(|i| rid(*i) == s.id).unwrap();
                    prop_assert!(m.can_read(&a, i), "ranked an unreadable record");
                    prop_assert_eq!(s.scores.final_score, s.scores.semantic.times(s.scores.trust));
                }
                for w in r.selected.windows(2) {
                    prop_assert!(w[0].scores.final_score >= w[1].scores.final_score);
                }
                for f in &r.filtered {
                    let i = (0..n).find(|i| rid(*i) == f.id).unwrap();
                    prop_assert!(!m.can_read(&a, i));
                }
                let edges = g.record_reads(&a, &r.selected, at).unwrap();
                replica.edges.extend(edges);
            }
            Op::Gate { agent, kind, risk, picks, ctx } if n > 0 => {
                let a = pid(agent as usize);
                let req = GateRequest {
                    agent: a.clone(),
                    kind: [ActionKind::Answer, ActionKind::Inform, ActionKind::Act][kind as usize % 3],
                    risk: [Risk::Low, Risk::Medium, Risk::High][risk as usize % 3],
                    retrieved: picks.iter().map(|x| rid(pick(*x))).collect(),
                    context: ctx.iter().map(|x| rid(pick(*x))).collect(),
                    elevated: BTreeSet::new(),
                };
                let d = g.decide(&req);
                if d.decision == Decision::Allow {
                    for s in &req.retrieved {
                        let i = (0..n).find(|i| rid(*i) == *s).unwrap();
                        prop_assert!(m.can_read(&a, i), "allowed on an unreadable support");
                        let sm = m.summary(g.config(), i);
                        prop_assert!(!sm.revoked && !sm.poisoned, "allowed on a revoked or poisoned path");
                        if req.risk == Risk::High {
                            prop_assert!(!sm.untrusted, "high-risk allow on an untrusted path");
                        }
                    }
                }
            }
            _ => {}
        }
        m.recompute_scopes();
        if tightening {
            check_reads(&g, &m, false)?;
        }
        let fx = g.drain();
        replica.prop(&fx);
        prop_assert_eq!(g.pending(), 0);
        check_state(&g, &m)?;
        replica.check(&g)?;
    }
    // A graph restored from the persisted rows is the same graph.
    let texts = g.records().filter_map(|r| g.text(r.id()).map(|t| (r.id(), t.to_owned()))).collect();
    let (back, repaired) =
        LineageGraph::restore(cfg, g.audit_trail(), texts).map_err(|e| TestCaseError::fail(format!("{e}")))?;
    prop_assert_eq!(repaired, RestoreEffects::default());
    prop_assert_eq!(back.audit_trail(), g.audit_trail());
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn lineage_graph_matches_the_reference_model(ops in prop::collection::vec(op(), 1..40)) {
        run(ops)?;
    }
}
