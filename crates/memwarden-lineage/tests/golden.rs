//! Golden tests: scope intersection, CanRead, path-trust calibration, ranking, every gate rule,
//! revocation, erasure, promotion, write validation, composition.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::type_complexity, missing_docs)]

mod common;

use common::*;
use memwarden_lineage::prelude::*;
use memwarden_lineage::summary::agrees;
use std::collections::BTreeSet;

fn only(names: &[&str]) -> Readers {
    Readers::Only(names.iter().map(|n| p(n)).collect())
}

fn scope(owner: &str, readers: Readers) -> Scope {
    memwarden_lineage::scope::scope_of(p(owner), readers)
}

// ---- scope intersection --------------------------------------------------------------------------

#[test]
fn scope_intersection_table() {
    let revoked = memwarden_lineage::scope::revoked_scope(p("u"));
    // (name, parents, narrowing, expected readers, expected visibility, fell back)
    let cases: Vec<(&str, Vec<Scope>, Option<Vec<&str>>, Readers, Visibility, bool)> = vec![
        ("no referenced scope: all agents", vec![], None, Readers::All, Visibility::Shared, false),
        (
            "all and all",
            vec![scope("u", Readers::All), scope("a2", Readers::All)],
            None,
            Readers::All,
            Visibility::Shared,
            false,
        ),
        (
            "private parent restricts",
            vec![scope("a1", only(&["a1"])), scope("u", Readers::All)],
            None,
            only(&["a1"]),
            Visibility::Private,
            false,
        ),
        (
            "owners count as readers",
            vec![scope("u", only(&["a1", "a2"])), scope("u", only(&["a2", "a3"]))],
            None,
            only(&["a2", "u"]),
            Visibility::Private,
            false,
        ),
        (
            "disjoint: writer alone",
            vec![scope("a1", only(&["a1"])), scope("a2", only(&["a2"]))],
            None,
            only(&["w"]),
            Visibility::Private,
            true,
        ),
        ("explicit narrowing of a root", vec![], Some(vec!["a1"]), only(&["a1"]), Visibility::Private, false),
        (
            "narrowing to nobody: writer alone",
            vec![scope("u", Readers::All)],
            Some(vec![]),
            only(&["w"]),
            Visibility::Private,
            true,
        ),
        ("revoked parent: writer alone", vec![revoked], None, only(&["w"]), Visibility::Private, true),
        (
            "narrowing never widens",
            vec![scope("u", only(&["a1"]))],
            Some(vec!["a1", "a2", "a3"]),
            only(&["a1"]),
            Visibility::Private,
            false,
        ),
        (
            "a named set of everyone is still private",
            vec![],
            Some(vec!["u", "a1", "a2", "a3", "t", "web"]),
            only(&["u", "a1", "a2", "a3", "t", "web"]),
            Visibility::Private,
            false,
        ),
    ];
    let mut c = Checker::default();
    for (name, parents, narrowing, readers, visibility, fell_back) in cases {
        let narrow: Option<BTreeSet<PrincipalId>> = narrowing.map(|v| v.iter().map(|n| p(n)).collect());
        let d = derive_scope(&p("w"), parents.iter(), narrow.as_ref());
        c.check(&format!("{name}: readers"), d.scope.readers, readers);
        c.check(&format!("{name}: visibility"), d.scope.visibility, visibility);
        c.check(&format!("{name}: fell back"), d.fell_back, fell_back);
        c.check(&format!("{name}: owner"), d.scope.owner, p("w"));
    }
    c.finish();
}

#[test]
fn fixture_scopes_follow_the_intersection_rule() {
    let g = fixture();
    let mut c = Checker::default();
    let cases: Vec<(u8, Readers, Visibility)> = vec![
        (R_USER, Readers::All, Visibility::Shared),
        (R_PRIV, only(&["a1"]), Visibility::Private),
        (M_NOTE, Readers::All, Visibility::Shared),
        (M_SUM_PRIV, only(&["a1"]), Visibility::Private),
        (M_TEAM, only(&["a1", "a2", "u"]), Visibility::Private),
        (M_MIX, only(&["a1", "a2", "u"]), Visibility::Private),
        (MSG_PRIV, only(&["a1"]), Visibility::Private),
        (M_TEAM2, only(&["a1", "a2", "u"]), Visibility::Private),
    ];
    for (n, readers, vis) in cases {
        let r = g.record(id(n)).unwrap();
        c.check(&format!("{n}: readers"), r.scope().readers.clone(), readers);
        c.check(&format!("{n}: visibility"), r.scope().visibility, vis);
    }
    g.verify_summaries().unwrap();
    c.finish();
}

// ---- CanRead -------------------------------------------------------------------------------------

#[test]
fn can_read_table() {
    let g = fixture();
    let cases: Vec<(&str, u8, Result<(), DenyReason>)> = vec![
        ("u", R_USER, Ok(())),
        ("a3", R_USER, Ok(())),
        ("a1", R_PRIV, Ok(())),
        ("a3", R_PRIV, Err(DenyReason::NotInScope)),
        ("a1", M_SUM_PRIV, Ok(())),
        ("a2", M_SUM_PRIV, Err(DenyReason::NotInScope)),
        ("a3", MSG_PRIV, Err(DenyReason::NotInScope)), // forwarded to a3, still not a3's to read
        ("u", M_TEAM, Ok(())),
        ("a1", M_TEAM, Ok(())),
        ("a3", M_TEAM, Err(DenyReason::NotInScope)),
        ("a3", M_TEAM2, Err(DenyReason::NotInScope)),
        ("a3", M_POISON, Ok(())), // poisoned is graded, not filtered (C2)
        ("a1", 99, Err(DenyReason::Unknown)),
    ];
    let mut c = Checker::default();
    for (who, n, want) in cases {
        c.check(&format!("{who} reads {n}"), g.can_read(&p(who), id(n)), want);
    }
    c.finish();
}

#[test]
fn can_read_pure_function_covers_every_reason() {
    let g = fixture();
    let base = g.record(id(M_TEAM)).unwrap();
    let mut narrowed = base.summary().clone();
    narrowed.ceiling = only(&["a2"]);
    let mut revoked_anc = base.summary().clone();
    revoked_anc.revoked = true;
    let revoked_scope = memwarden_lineage::scope::revoked_scope(p("a2"));
    let f = |scope, summary, erased, pending| Some(ReadFacts { scope, summary, erased, pending });
    let mut c = Checker::default();
    c.check("plain", can_read(&p("a1"), f(base.scope(), base.summary(), false, false)), Ok(()));
    c.check("unknown", can_read(&p("a1"), None), Err(DenyReason::Unknown));
    c.check("erased", can_read(&p("a1"), f(base.scope(), base.summary(), true, false)), Err(DenyReason::Erased));
    c.check("revoked", can_read(&p("a2"), f(&revoked_scope, base.summary(), false, false)), Err(DenyReason::Revoked));
    c.check(
        "revoked ancestor",
        can_read(&p("a1"), f(base.scope(), &revoked_anc, false, false)),
        Err(DenyReason::RevokedAncestor),
    );
    c.check(
        "pending",
        can_read(&p("a1"), f(base.scope(), base.summary(), false, true)),
        Err(DenyReason::PropagationPending),
    );
    c.check(
        "not in scope",
        can_read(&p("a3"), f(base.scope(), base.summary(), false, false)),
        Err(DenyReason::NotInScope),
    );
    c.check(
        "not in ancestor scope",
        can_read(&p("a1"), f(base.scope(), &narrowed, false, false)),
        Err(DenyReason::NotInAncestorScope),
    );
    c.check("owner outside the ceiling", can_read(&p("a2"), f(base.scope(), &narrowed, false, false)), Ok(()));
    c.finish();
}

// ---- path trust ------------------------------------------------------------------------------------

#[test]
fn calibration_table_matches_the_docs() {
    let mut g = LineageGraph::default();
    principals(&mut g);
    let w = |n: u8, who: &str, integ: Integrity| {
        WriteEvent::new(id(n), RecordKind::Memory, p(who), "x", integ, u64::from(n))
    };
    g.apply_write(w(1, "u", Integrity::Trusted)).unwrap();
    g.apply_write(w(2, "u", Integrity::Trusted)).unwrap();
    g.apply_verification(VerifyEvent { id: id(2), verifier: p("u"), at_ms: 2 }).unwrap();
    g.apply_write(w(3, "a1", Integrity::Agent).derived_from(id(1))).unwrap();
    g.apply_write(w(4, "a1", Integrity::Agent).derived_from(id(1))).unwrap();
    g.apply_verification(VerifyEvent { id: id(4), verifier: p("u"), at_ms: 4 }).unwrap();
    g.apply_write(w(5, "a1", Integrity::Agent).summarized_from(id(1))).unwrap();
    g.apply_write(w(6, "a1", Integrity::Agent).summarized_from(id(5))).unwrap();
    g.apply_write(w(7, "a1", Integrity::Agent).summarized_from(id(6))).unwrap();
    g.apply_write(w(8, "a1", Integrity::Agent).summarized_from(id(7))).unwrap();
    g.apply_write(w(20, "web", Integrity::Untrusted)).unwrap();
    g.apply_write(w(21, "a1", Integrity::Agent).observed_from(id(20))).unwrap();
    g.apply_write(w(22, "a1", Integrity::Agent).summarized_from(id(21))).unwrap();
    g.apply_write(w(23, "a1", Integrity::Agent).summarized_from(id(22))).unwrap();
    g.apply_write(w(24, "a1", Integrity::Agent).summarized_from(id(23))).unwrap();
    g.apply_write(w(30, "web", Integrity::Untrusted).poisoned()).unwrap();
    g.apply_write(w(31, "u", Integrity::Trusted).derived_from(id(30))).unwrap();
    let cases: Vec<(&str, u8, f64)> = vec![
        ("user statement, verified", 2, 1.0),
        ("user statement", 1, 0.9),
        ("agent note, verified", 4, 0.873),
        ("agent note", 3, 0.7857),
        ("agent summary", 5, 0.7452),
        ("4th successive summary", 8, 0.9 * 0.92f64.powi(4) * 0.9),
        ("untrusted page", 20, 0.36),
        ("verbatim capture of it", 21, 0.36),
        ("first summary of the capture", 22, 0.4 * 0.92 * 0.9),
        ("second summary", 23, 0.4 * 0.92 * 0.92 * 0.9),
        ("third summary", 24, 0.4 * 0.92f64.powi(3) * 0.9),
        ("poisoned ancestry", 31, 0.4 * 0.05 * 0.97 * 0.9),
    ];
    let mut c = Checker::default();
    for (name, n, want) in cases {
        let rho = g.path_trust(id(n), &p("a1")).unwrap().rho.get();
        c.check(name, (rho * 1e4).round() / 1e4, (want * 1e4).round() / 1e4);
    }
    // The table's threshold columns.
    let th = |n: u8| g.path_trust(id(n), &p("a1")).unwrap().rho.get();
    c.check("agent note clears low/medium", th(3) >= 0.60, true);
    c.check("agent note misses high", th(3) < 0.85, true);
    c.check("verified agent note clears high", th(4) >= 0.85, true);
    c.check("4th summary misses low/medium", th(8) < 0.60, true);
    c.check("2nd summary of a page clears answer", th(23) >= 0.30, true);
    c.check("3rd summary of a page misses answer", th(24) < 0.30, true);
    // P: a reader outside the path ceiling is graded down (only reachable for contextual support).
    g.apply_write(w(40, "a1", Integrity::Trusted).readers([p("a1")])).unwrap();
    let bd = g.path_trust(id(40), &p("a2")).unwrap();
    c.check("P for a reader outside the scope", bd.p.get(), 0.5);
    // A: reputation.
    g.set_reputation(&p("a1"), Trust::new(0.5).unwrap()).unwrap();
    c.check("A lowers rho", (g.path_trust(id(3), &p("a2")).unwrap().rho.get() * 1e4).round() / 1e4, 0.3929);
    c.finish();
}

// ---- ranking ---------------------------------------------------------------------------------------

#[test]
fn rank_filters_before_ranking_and_orders_by_similarity_times_trust() {
    let mut g = fixture();
    let cands = vec![
        Candidate { id: id(M_SUM_PRIV), similarity: 0.99 }, // private: filtered for a2 however similar
        Candidate { id: id(R_WEB), similarity: 0.95 },      // 0.95 * 0.36
        Candidate { id: id(R_USER), similarity: 0.60 },     // 0.60 * 0.90 = 0.54
        Candidate { id: id(M_NOTE), similarity: 0.62 },     // 0.62 * 0.7857
        Candidate { id: id(R_USER), similarity: 0.10 },     // duplicate: the best similarity counts
        Candidate { id: id(99), similarity: 1.0 },          // unknown
        Candidate { id: id(M_TEAM), similarity: f64::NAN }, // NaN scores 0
    ];
    let r = g.rank(&p("a2"), &cands, Some(3)).unwrap();
    let mut c = Checker::default();
    c.check(
        "selected order",
        r.selected.iter().map(|x| x.id).collect::<Vec<_>>(),
        vec![id(R_USER), id(M_NOTE), id(R_WEB)],
    );
    c.check(
        "filtered",
        r.filtered.iter().map(|f| (f.id, f.reason)).collect::<Vec<_>>(),
        vec![(id(M_SUM_PRIV), DenyReason::NotInScope), (id(99), DenyReason::Unknown)],
    );
    c.check("eligible", r.eligible, 4);
    let top = r.selected[0].scores;
    c.check("semantic", top.semantic.get(), 0.60);
    c.check("trust", top.trust.get(), 0.9);
    c.check("final", (top.final_score.get() * 1e9).round(), (0.54f64 * 1e9).round());
    c.check(
        "k too large",
        g.rank(&p("a2"), &cands, Some(1000)).err(),
        Some(RankError::KTooLarge { k: 1000, max: 100 }),
    );
    let many: Vec<Candidate> = [R_USER, R_TEAM, R_WEB, M_NOTE, M_TEAM, M_MIX, M_WEB, M_TEAM2]
        .iter()
        .map(|n| Candidate { id: id(*n), similarity: 0.5 })
        .collect();
    c.check("default k is 5", g.rank(&p("u"), &many, None).unwrap().selected.len(), 5);
    // read_by edges carry the three scores.
    let edges = g.record_reads(&p("a2"), &r.selected, 5_000).unwrap();
    c.check("read edges", edges.len(), 3);
    c.check("read edge kind", edges[0].kind, EdgeKind::ReadBy);
    c.check("read edge scores", edges[0].attrs.clone(), EdgeAttrs::Read(top));
    c.check("a shared record's read by another agent", g.record_reads(&p("a3"), &r.selected[..1], 5_001).is_ok(), true);
    let priv_ranked = g.rank(&p("a1"), &[Candidate { id: id(M_SUM_PRIV), similarity: 0.9 }], None).unwrap().selected;
    c.check(
        "recording a read by someone else",
        g.record_reads(&p("a2"), &priv_ranked, 5_002).err(),
        Some(RecordingError::NotReadable { id: id(M_SUM_PRIV), reason: DenyReason::NotInScope }),
    );
    c.finish();
}

// ---- the gate ----------------------------------------------------------------------------------------

type Expect = (Decision, GateRule, Option<GateCause>);

fn gate_case(c: &mut Checker, g: &LineageGraph, name: &str, req: GateRequest, want: Expect) {
    let d = g.decide(&req);
    c.check(name, (d.decision, d.rule, d.cause), want);
    let th = match (req.kind, req.risk) {
        (ActionKind::Answer, _) => 0.30,
        (_, Risk::High) => 0.85,
        _ => 0.60,
    };
    c.check(&format!("{name}: threshold"), d.threshold.get(), th);
}

#[test]
fn gate_rules_table() {
    use ActionKind::{Act, Answer, Inform};
    use Decision::*;
    use GateCause as C;
    use GateRule as R;
    use Risk::{High, Low, Medium};
    let g = fixture();
    let mut c = Checker::default();
    let cases: Vec<(&str, GateRequest, Expect)> = vec![
        // Rule 1.
        (
            "r1 untrusted support, high",
            request("a2", Act, High, &[M_WEB], &[]),
            (Block, R::HighRiskAffected, Some(C::Untrusted)),
        ),
        (
            "r1 poisoned support, high",
            request("a3", Act, High, &[M_POISON], &[]),
            (Block, R::HighRiskAffected, Some(C::Poisoned)),
        ),
        (
            "r1 permission-invalid context, high",
            request("a3", Act, High, &[R_USER], &[MSG_PRIV]),
            (Block, R::HighRiskAffected, Some(C::PermissionInvalid)),
        ),
        (
            "r1 high answer is also gated",
            request("a2", Answer, High, &[M_WEB], &[]),
            (Block, R::HighRiskAffected, Some(C::Untrusted)),
        ),
        // Rule 2.
        ("r2 no support, medium", request("a1", Act, Medium, &[], &[]), (Reverify, R::NoSurvivingSupport, None)),
        ("r2 no support, high", request("a1", Act, High, &[], &[]), (AskUser, R::NoSurvivingSupport, None)),
        (
            "r2 nothing readable, medium",
            request("a3", Act, Medium, &[M_SUM_PRIV], &[]),
            (Reverify, R::NoSurvivingSupport, None),
        ),
        // Rule 3.
        ("r3 poisoned, answer", request("a3", Answer, Low, &[M_POISON], &[]), (Block, R::PathCause, Some(C::Poisoned))),
        (
            "r3 poisoned beats untrusted, low act",
            request("a3", Act, Low, &[M_POISON, R_WEB], &[]),
            (Block, R::PathCause, Some(C::Poisoned)),
        ),
        (
            "r3 permission-invalid context, disclosure",
            request("a3", Inform, Low, &[R_USER], &[MSG_PRIV]),
            (Redact, R::PathCause, Some(C::PermissionInvalid)),
        ),
        (
            "r3 permission-invalid context, answer",
            request("a3", Answer, Medium, &[R_USER], &[MSG_PRIV]),
            (Redact, R::PathCause, Some(C::PermissionInvalid)),
        ),
        (
            "r3 permission-invalid context, low act",
            request("a3", Act, Low, &[R_USER], &[MSG_PRIV]),
            (Reverify, R::PathCause, Some(C::PermissionInvalid)),
        ),
        ("r3 untrusted, low act", request("a2", Act, Low, &[M_WEB], &[]), (Reverify, R::PathCause, Some(C::Untrusted))),
        (
            "r3 untrusted, medium inform",
            request("a2", Inform, Medium, &[M_WEB], &[]),
            (Reverify, R::PathCause, Some(C::Untrusted)),
        ),
        // Rule 4.
        (
            "r4 untrusted answer is graded, not refused",
            request("a2", Answer, Low, &[M_WEB], &[]),
            (Allow, R::Sufficient, None),
        ),
        ("r4 agent note, high", request("a1", Act, High, &[M_NOTE], &[]), (AskUser, R::BelowThreshold, None)),
        ("r4 agent note, medium", request("a1", Act, Medium, &[M_NOTE], &[]), (Allow, R::Sufficient, None)),
        ("r4 user statement, high", request("a1", Act, High, &[R_USER], &[]), (Allow, R::Sufficient, None)),
        ("r4 best support counts", request("a1", Act, High, &[M_NOTE, R_USER], &[]), (Allow, R::Sufficient, None)),
        ("no support, low", request("a1", Act, Low, &[], &[]), (Allow, R::NoSupportNeeded, None)),
        ("no support, answer", request("a1", Answer, Low, &[], &[]), (Allow, R::NoSupportNeeded, None)),
        (
            "clean readable context is not support",
            request("a1", Act, High, &[R_USER], &[M_NOTE]),
            (Allow, R::Sufficient, None),
        ),
        // Errors deny.
        (
            "unknown support",
            request("a1", Answer, Low, &[99], &[]),
            (Block, R::InvalidRequest, Some(C::UnknownSupport)),
        ),
    ];
    for (name, req, want) in cases {
        gate_case(&mut c, &g, name, req, want);
    }
    // Too many supports.
    let mut req = request("a1", Answer, Low, &[], &[]);
    req.retrieved = vec![id(R_USER); 300];
    gate_case(&mut c, &g, "too many supports", req, (Block, R::InvalidRequest, Some(C::TooManySupports)));
    c.finish();
}

#[test]
fn gate_rule4_below_threshold_per_action() {
    use Decision::*;
    let mut g = LineageGraph::default();
    principals(&mut g);
    let w = |n: u8, who: &str, integ: Integrity| {
        WriteEvent::new(id(n), RecordKind::Memory, p(who), "x", integ, u64::from(n))
    };
    g.apply_write(w(1, "web", Integrity::Untrusted)).unwrap();
    g.apply_write(w(2, "a1", Integrity::Agent).summarized_from(id(1))).unwrap();
    g.apply_write(w(3, "a1", Integrity::Agent).summarized_from(id(2))).unwrap();
    g.apply_write(w(4, "a1", Integrity::Agent).summarized_from(id(3))).unwrap();
    g.apply_write(w(10, "u", Integrity::Trusted)).unwrap();
    for n in 11..=14u8 {
        g.apply_write(w(n, "a1", Integrity::Agent).summarized_from(id(n - 1))).unwrap();
    }
    let mut c = Checker::default();
    gate_case(
        &mut c,
        &g,
        "answer on a 3rd summary of a page",
        request("a1", ActionKind::Answer, Risk::Low, &[4], &[]),
        (Redact, GateRule::BelowThreshold, None),
    );
    gate_case(
        &mut c,
        &g,
        "medium act on a 4th summary",
        request("a1", ActionKind::Act, Risk::Medium, &[14], &[]),
        (Reverify, GateRule::BelowThreshold, None),
    );
    gate_case(
        &mut c,
        &g,
        "low inform on a 4th summary",
        request("a1", ActionKind::Inform, Risk::Low, &[14], &[]),
        (Reverify, GateRule::BelowThreshold, None),
    );
    gate_case(
        &mut c,
        &g,
        "high act on a 1st summary",
        request("a1", ActionKind::Act, Risk::High, &[11], &[]),
        (AskUser, GateRule::BelowThreshold, None),
    );
    c.finish();
}

#[test]
fn gate_revoked_erased_pending_and_elevated() {
    use ActionKind::{Act, Answer, Inform};
    use Decision::*;
    use GateCause as C;
    use GateRule as R;
    let mut c = Checker::default();
    // Revoked ancestry: rule 3 blocks even an answer (a readable revoked-derived record does not
    // exist, so the support is also permission-invalid; revoked is the more severe cause).
    let mut g = fixture();
    g.apply_revocation(RevokeEvent { id: id(R_TEAM), revoker: p("u"), at_ms: 9_000 }).unwrap();
    gate_case(
        &mut c,
        &g,
        "revoked ancestry, answer",
        request("a1", Answer, Risk::Low, &[R_USER, M_MIX], &[]),
        (Block, R::PathCause, Some(C::Revoked)),
    );
    gate_case(
        &mut c,
        &g,
        "revoked ancestry, high",
        request("a1", Act, Risk::High, &[R_USER, M_MIX], &[]),
        (Block, R::HighRiskAffected, Some(C::Revoked)),
    );
    // Erased support.
    g.apply_erasure(EraseEvent { id: id(M_NOTE), erasure_id: id(200), requested_by: p("u"), at_ms: 9_100 }).unwrap();
    gate_case(
        &mut c,
        &g,
        "erased support, disclosure",
        request("a1", Inform, Risk::Low, &[R_USER, M_NOTE], &[]),
        (Redact, R::PathCause, Some(C::Erased)),
    );
    // Pending propagation.
    let cfg = LineageConfig { propagation_step_records_max: 1, ..Default::default() };
    let mut g = fixture_with(cfg);
    let fx = g.apply_poison_flag(FlagPoisonedEvent { id: id(R_TEAM), reporter: p("u"), at_ms: 9_000 }).unwrap();
    c.check("poison propagation is pending", fx.done(), false);
    gate_case(
        &mut c,
        &g,
        "pending, low act",
        request("a1", Act, Risk::Low, &[R_USER, M_TEAM2], &[]),
        (Reverify, R::PathCause, Some(C::PropagationPending)),
    );
    g.drain();
    gate_case(
        &mut c,
        &g,
        "after propagation, low act",
        request("a1", Act, Risk::Low, &[R_USER, M_TEAM2], &[]),
        (Block, R::PathCause, Some(C::Poisoned)),
    );
    // Elevation waives the untrusted label for this decision only; never poison.
    let g = fixture();
    let mut req = request("a2", Act, Risk::High, &[M_WEB], &[]);
    req.elevated.insert(id(M_WEB));
    gate_case(&mut c, &g, "elevated untrusted support, high", req, (Allow, R::Sufficient, None));
    let mut req = request("a3", Act, Risk::Low, &[M_POISON], &[]);
    req.elevated.insert(id(M_POISON));
    gate_case(&mut c, &g, "elevation never waives poison", req, (Block, R::PathCause, Some(C::Poisoned)));
    c.finish();
}

#[test]
fn gate_decision_records_the_audit_fields() {
    let g = fixture();
    let d = g.decide(&request("a3", ActionKind::Act, Risk::High, &[M_POISON, R_USER], &[MSG_PRIV]));
    assert_eq!(d.supporting, vec![id(M_POISON), id(R_USER), id(MSG_PRIV)]);
    let affected: Vec<ItemId> = d.affected.iter().map(|a| a.id).collect();
    // R_POISON (untrusted + poisoned) and MSG_PRIV's private path: R_PRIV, M_SUM_PRIV, MSG_PRIV.
    for n in [R_POISON, R_PRIV, M_SUM_PRIV, MSG_PRIV] {
        assert!(affected.contains(&id(n)), "{n} missing from {affected:?}");
    }
    let poison = d.affected.iter().find(|a| a.id == id(R_POISON)).unwrap();
    assert!(poison.causes.contains(Cause::Poisoned) && poison.causes.contains(Cause::Untrusted));
    assert_eq!(d.threshold.get(), 0.85);
    assert_eq!(d.max_trust.map(Trust::get), Some(0.9));
    assert!(!d.explanation.is_empty() && !d.explanation.contains("ACCT-EVIL"));
    assert_eq!(d.evaluations.len(), 3);
    assert_eq!(d.evaluations[2].denied, Some(DenyReason::NotInScope));
    assert_eq!(d.evaluations[2].origin, SupportOrigin::Context);
}

#[test]
fn apply_action_records_edges_and_the_final_decision() {
    let mut g = fixture();
    let fx = g
        .apply_action(ActionEvent {
            id: id(100),
            request: request("a1", ActionKind::Act, Risk::Medium, &[M_NOTE], &[]),
            tool: "pay".into(),
            on_behalf_of: Some(p("u")),
            agent_proposal: Some(Decision::AskUser),
            at_ms: 7_000,
        })
        .unwrap();
    assert_eq!(fx.action.decision.decision, Decision::Allow);
    assert_eq!(fx.action.final_decision, Decision::AskUser, "a restrictive agent proposal stands");
    let kinds: Vec<EdgeKind> = fx.edges.iter().map(|e| e.kind).collect();
    assert_eq!(kinds, vec![EdgeKind::UsedForAction, EdgeKind::AuthorizedBy]);
    assert_eq!(g.node_kind(&NodeRef::Action(id(100))), Some(NodeKind::Action));
    assert!(matches!(
        g.apply_action(ActionEvent {
            id: id(100),
            request: request("a1", ActionKind::Answer, Risk::Low, &[], &[]),
            tool: "x".into(),
            on_behalf_of: None,
            agent_proposal: None,
            at_ms: 7_001
        }),
        Err(RecordingError::DuplicateAction(_))
    ));
}

// ---- composition -----------------------------------------------------------------------------------

#[test]
fn composition_is_cores_total_order_and_never_relaxes() {
    use Decision::*;
    let all = [Allow, Redact, Reverify, AskUser, Block];
    let order = [Block, AskUser, Reverify, Redact, Allow];
    for w in order.windows(2) {
        assert!(w[0] > w[1]);
    }
    for a in all {
        assert_eq!(compose([a, a]), a);
        assert_eq!(compose([a, Allow]), a);
        for b in all {
            let m = compose([a, b]);
            assert_eq!(m, compose([b, a]));
            assert!(m == a || m == b);
            assert!(m >= a && m >= b, "never relaxes");
            for c in all {
                assert_eq!(compose([m, c]), compose([a, compose([b, c])]));
            }
        }
        assert_eq!(final_decision(Allow, Some(a)), a);
        assert_eq!(final_decision(a, Some(Allow)), a);
        assert_eq!(final_decision(a, None), a);
    }
    assert_eq!(compose([]), Block, "nothing to compose is an error: deny");
    assert_eq!(compose([Allow, Redact, Allow]), Redact);
}

// ---- revocation ------------------------------------------------------------------------------------

#[test]
fn revocation_propagates_to_every_descendant_and_keeps_lineage() {
    let mut g = fixture();
    let texts_before: Vec<Option<String>> =
        [M_TEAM, M_MIX, M_TEAM2].iter().map(|n| g.text(id(*n)).map(str::to_owned)).collect();
    let fx = g.apply_revocation(RevokeEvent { id: id(R_TEAM), revoker: p("u"), at_ms: 9_000 }).unwrap();
    assert!(fx.done());
    let mut c = Checker::default();
    let r = g.record(id(R_TEAM)).unwrap();
    c.check("revoked visibility", r.scope().visibility, Visibility::Revoked);
    c.check("permission scope cleared", r.scope().readers.clone(), Readers::Only(BTreeSet::new()));
    // Direct children fall back to their writer alone; everything downstream is marked.
    c.check("M_TEAM scope", g.record(id(M_TEAM)).unwrap().scope().readers.clone(), only(&["a2"]));
    c.check("M_MIX scope", g.record(id(M_MIX)).unwrap().scope().readers.clone(), only(&["a1"]));
    for n in [M_TEAM, M_MIX, M_TEAM2, M_TEAM_USER] {
        let st = g.record(id(n)).unwrap();
        c.check(&format!("{n} affected"), st.affected(), true);
        c.check(&format!("{n} revoked ancestor"), st.summary().revoked, true);
        c.check(
            &format!("{n} not readable by its writer"),
            g.can_read(st.writer(), id(n)),
            Err(DenyReason::RevokedAncestor),
        );
        c.check(&format!("{n} rho is zero"), g.path_trust(id(n), &p("a1")).unwrap().rho, Trust::ZERO);
    }
    c.check("R_TEAM itself", g.can_read(&p("u"), id(R_TEAM)), Err(DenyReason::Revoked));
    // Unrelated records are untouched.
    c.check("R_USER untouched", g.can_read(&p("a1"), id(R_USER)), Ok(()));
    c.check("M_NOTE untouched", g.record(id(M_NOTE)).unwrap().affected(), false);
    // invalidated_by edges: the root to the revoker, every descendant to the root.
    let inv: Vec<(NodeRef, NodeRef)> = g
        .edges()
        .iter()
        .filter(|e| e.kind == EdgeKind::InvalidatedBy)
        .map(|e| (e.from.clone(), e.to.clone()))
        .collect();
    c.check("root edge", inv.contains(&(NodeRef::Record(id(R_TEAM)), NodeRef::Principal(p("u")))), true);
    for n in [M_TEAM, M_MIX, M_TEAM2, M_TEAM_USER] {
        c.check(
            &format!("{n} invalidated_by R_TEAM"),
            inv.contains(&(NodeRef::Record(id(n)), NodeRef::Record(id(R_TEAM)))),
            true,
        );
    }
    c.check("edge count", inv.len(), 5);
    // Nothing deleted.
    let texts_after: Vec<Option<String>> =
        [M_TEAM, M_MIX, M_TEAM2].iter().map(|n| g.text(id(*n)).map(str::to_owned)).collect();
    c.check("texts kept", texts_after, texts_before);
    c.check(
        "revoking twice",
        g.apply_revocation(RevokeEvent { id: id(R_TEAM), revoker: p("u"), at_ms: 9_001 }).err(),
        Some(EventError::Revoked(id(R_TEAM))),
    );
    // A second revocation upstream adds edges but no duplicates.
    g.apply_revocation(RevokeEvent { id: id(M_TEAM), revoker: p("a2"), at_ms: 9_002 }).unwrap();
    let inv2 = g.edges().iter().filter(|e| e.kind == EdgeKind::InvalidatedBy).count();
    c.check("second revocation edges", inv2, 5 + 1 + 2);
    g.verify_summaries().unwrap();
    c.finish();
}

#[test]
fn bounded_revocation_steps_deny_reads_until_done_and_end_in_the_same_state() {
    let cfg = LineageConfig { propagation_step_records_max: 1, ..Default::default() };
    let mut stepped = fixture_with(cfg);
    let mut eager = fixture();
    let ev = RevokeEvent { id: id(R_TEAM), revoker: p("u"), at_ms: 9_000 };
    let fx = stepped.apply_revocation(ev.clone()).unwrap();
    assert!(!fx.done());
    assert_eq!(stepped.can_read(&p("a1"), id(M_TEAM2)), Err(DenyReason::PropagationPending));
    // Records older than the revoked one are not held back.
    assert_eq!(stepped.can_read(&p("a1"), id(R_USER)), Ok(()));
    let mut steps = 1;
    while stepped.pending() > 0 {
        let fx = stepped.step();
        assert!(fx.updated.len() <= 1);
        steps += 1;
        assert!(steps < 100);
    }
    assert!(steps >= 4, "the bound was respected ({steps} steps)");
    eager.apply_revocation(ev).unwrap();
    let a: Vec<RecordState> = stepped.records().cloned().collect();
    let b: Vec<RecordState> = eager.records().cloned().collect();
    assert_eq!(a, b);
    stepped.verify_summaries().unwrap();
    // Promotions wait for a tightening propagation.
    let mut g = fixture_with(LineageConfig { propagation_step_records_max: 1, ..Default::default() });
    g.apply_poison_flag(FlagPoisonedEvent { id: id(R_TEAM), reporter: p("u"), at_ms: 1 }).unwrap();
    assert_eq!(
        g.apply_promotion(PromoteEvent { id: id(R_PRIV), actor: p("a1"), readers: Readers::All, at_ms: 2 }).err(),
        Some(EventError::PropagationPending)
    );
}

#[test]
fn poison_flag_and_verification_propagate() {
    let mut g = fixture();
    assert!(!g.record(id(M_NOTE)).unwrap().affected());
    g.apply_verification(VerifyEvent { id: id(R_USER), verifier: p("u"), at_ms: 1 }).unwrap();
    assert!(g.record(id(M_NOTE)).unwrap().summary().verified, "a note built only on verified input is verified");
    assert!(!g.record(id(M_MIX)).unwrap().summary().verified, "a note with one unverified input is not");
    assert_eq!(
        g.apply_verification(VerifyEvent { id: id(R_USER), verifier: p("a1"), at_ms: 2 }).err(),
        Some(EventError::VerifierNotTrusted(p("a1")))
    );
    g.apply_poison_flag(FlagPoisonedEvent { id: id(R_USER), reporter: p("t"), at_ms: 3 }).unwrap();
    for n in [M_NOTE, M_MIX, M_TEAM_USER] {
        let s = g.record(id(n)).unwrap();
        assert!(s.summary().poisoned && s.affected(), "{n}");
        assert!(s.summary().affected.iter().any(|a| a.id == id(R_USER) && a.causes.contains(Cause::Poisoned)));
    }
    g.verify_summaries().unwrap();
}

// ---- erasure ---------------------------------------------------------------------------------------

#[test]
fn erasure_deletes_what_depends_only_on_the_source() {
    let mut g = fixture();
    let fx = g
        .apply_erasure(EraseEvent { id: id(R_TEAM), erasure_id: id(200), requested_by: p("u"), at_ms: 9_000 })
        .unwrap();
    let mut c = Checker::default();
    // M_TEAM and M_TEAM2 depend on R_TEAM alone; M_MIX and M_TEAM_USER also rest on R_USER.
    c.check("deleted", fx.delete.clone(), vec![id(R_TEAM), id(M_TEAM), id(M_TEAM2)]);
    c.check("survivors", fx.record.survivors.clone(), vec![id(M_MIX), id(M_TEAM_USER)]);
    c.check(
        "tombstones",
        fx.tombstones.iter().map(|t| (t.id(), t.erased())).collect::<Vec<_>>(),
        vec![(id(R_TEAM), true), (id(M_TEAM), true), (id(M_TEAM2), true)],
    );
    for n in [R_TEAM, M_TEAM, M_TEAM2] {
        c.check(&format!("{n} text gone"), g.text(id(n)), None);
        c.check(&format!("{n} unreadable"), g.can_read(&p("u"), id(n)), Err(DenyReason::Erased));
    }
    for n in [M_MIX, M_TEAM_USER] {
        c.check(&format!("{n} survives"), g.text(id(n)).is_some(), true);
        c.check(&format!("{n} readable"), g.can_read(&p("a1"), id(n)), Ok(()));
    }
    // The erasure record and the whole audit export name ids only.
    let record_json = serde_json::to_string(&fx.record).unwrap();
    let audit_json = serde_json::to_string(&g.audit_trail()).unwrap();
    let prov = prov_json(&g.audit_trail()).to_string();
    for text in ["team plan", "my part of the plan", "plan follow-up"] {
        c.check(&format!("record omits {text:?}"), record_json.contains(text), false);
        c.check(&format!("audit omits {text:?}"), audit_json.contains(text), false);
        c.check(&format!("prov omits {text:?}"), prov.contains(text), false);
    }
    c.check("erasure listed", g.erasures().len(), 1);
    c.check(
        "erase again",
        g.apply_erasure(EraseEvent { id: id(R_TEAM), erasure_id: id(201), requested_by: p("u"), at_ms: 1 }).err(),
        Some(EventError::Erased(id(R_TEAM))),
    );
    c.check(
        "duplicate erasure id",
        g.apply_erasure(EraseEvent { id: id(R_WEB), erasure_id: id(200), requested_by: p("u"), at_ms: 1 }).err(),
        Some(EventError::DuplicateErasure(id(200))),
    );
    g.verify_summaries().unwrap();
    c.finish();
}

#[test]
fn erasure_cases() {
    let mut c = Checker::default();
    // Erasing a leaf erases only the leaf.
    let mut g = fixture();
    let fx =
        g.apply_erasure(EraseEvent { id: id(M_NOTE), erasure_id: id(200), requested_by: p("u"), at_ms: 1 }).unwrap();
    c.check("leaf", fx.delete, vec![id(M_NOTE)]);
    // Another live source keeps a memory alive even through a chain; a memory whose every source
    // is erased goes once the last one is.
    let mut g = fixture();
    g.apply_erasure(EraseEvent { id: id(R_USER), erasure_id: id(200), requested_by: p("u"), at_ms: 1 }).unwrap();
    c.check("M_MIX survives R_USER", g.record(id(M_MIX)).unwrap().erased(), false);
    let fx =
        g.apply_erasure(EraseEvent { id: id(R_TEAM), erasure_id: id(201), requested_by: p("u"), at_ms: 2 }).unwrap();
    c.check("then goes with R_TEAM", fx.delete, vec![id(R_TEAM), id(M_TEAM), id(M_MIX), id(M_TEAM2), id(M_TEAM_USER)]);
    // Erasing a poisoned source does not launder what survives it.
    let mut g = fixture();
    g.apply_write(
        WriteEvent::new(id(50), RecordKind::Memory, p("a3"), "mix", Integrity::Agent, 5)
            .derived_from(id(M_POISON))
            .derived_from(id(R_USER)),
    )
    .unwrap();
    let fx =
        g.apply_erasure(EraseEvent { id: id(R_POISON), erasure_id: id(200), requested_by: p("u"), at_ms: 6 }).unwrap();
    c.check("poison chain erased", fx.delete, vec![id(R_POISON), id(M_POISON)]);
    c.check("survivor", fx.record.survivors, vec![id(50)]);
    c.check("survivor still poisoned", g.record(id(50)).unwrap().summary().poisoned, true);
    // Bounded.
    let mut g = fixture_with(LineageConfig { erasure_records_max: 2, ..Default::default() });
    c.check(
        "too large",
        g.apply_erasure(EraseEvent { id: id(R_TEAM), erasure_id: id(200), requested_by: p("u"), at_ms: 1 }).err(),
        Some(EventError::ErasureTooLarge { max: 2 }),
    );
    c.check("nothing changed", g.record(id(R_TEAM)).unwrap().erased(), false);
    c.finish();
}

// ---- promotion -------------------------------------------------------------------------------------

#[test]
fn promotion_only_within_what_the_ancestry_permits() {
    let mut g = fixture();
    let promote = |g: &mut LineageGraph, n: u8, actor: &str, readers: Readers| {
        g.apply_promotion(PromoteEvent { id: id(n), actor: p(actor), readers, at_ms: 9_000 }).map(|_| ())
    };
    let mut c = Checker::default();
    c.check(
        "summary of a private doc",
        promote(&mut g, M_SUM_PRIV, "a1", Readers::All),
        Err(EventError::ExceedsAncestry { id: id(M_SUM_PRIV) }),
    );
    c.check("not the owner", promote(&mut g, R_PRIV, "a2", Readers::All), Err(EventError::NotOwner(id(R_PRIV))));
    c.check(
        "narrowing is not a promotion",
        promote(&mut g, R_TEAM, "u", only(&["a1"])),
        Err(EventError::NotAWidening(id(R_TEAM))),
    );
    c.check("a root's owner may share it", promote(&mut g, R_PRIV, "a1", Readers::All), Ok(()));
    c.check(
        "shared source does not widen the summary by itself",
        g.can_read(&p("a2"), id(M_SUM_PRIV)),
        Err(DenyReason::NotInScope),
    );
    c.check("now the summary may follow", promote(&mut g, M_SUM_PRIV, "a1", Readers::All), Ok(()));
    c.check("and is shared", g.record(id(M_SUM_PRIV)).unwrap().scope().visibility, Visibility::Shared);
    c.check("a2 reads it", g.can_read(&p("a2"), id(M_SUM_PRIV)), Ok(()));
    c.check(
        "the message still needs its own promotion",
        g.can_read(&p("a3"), id(MSG_PRIV)),
        Err(DenyReason::NotInScope),
    );
    c.check(
        "team note beyond the team",
        promote(&mut g, M_TEAM, "a2", only(&["a1", "a2", "a3", "u"])),
        Err(EventError::ExceedsAncestry { id: id(M_TEAM) }),
    );
    c.check("team note within the team", promote(&mut g, M_TEAM, "a2", only(&["a1", "a2", "u"])), Ok(()));
    g.apply_revocation(RevokeEvent { id: id(R_WEB), revoker: p("web"), at_ms: 9_100 }).unwrap();
    c.check("revoked", promote(&mut g, R_WEB, "web", Readers::All), Err(EventError::Revoked(id(R_WEB))));
    g.verify_summaries().unwrap();
    c.finish();
}

// ---- writes ----------------------------------------------------------------------------------------

#[test]
fn write_validation_table() {
    let mut g = fixture_with(LineageConfig { parents_max: 2, text_bytes_max: 40, ..Default::default() });
    let w =
        |n: u8, who: &str, text: &str| WriteEvent::new(id(n), RecordKind::Memory, p(who), text, Integrity::Agent, 1);
    let cases: Vec<(&str, WriteEvent, WriteError)> = vec![
        ("empty", w(60, "a1", ""), WriteError::EmptyText),
        ("whitespace", w(60, "a1", " \n\t"), WriteError::EmptyText),
        ("too large", w(60, "a1", &"x".repeat(41)), WriteError::TextTooLarge { bytes: 41, max: 40 }),
        ("duplicate id", w(R_USER, "a1", "again"), WriteError::DuplicateId(id(R_USER))),
        ("unknown writer", w(60, "nobody", "x"), WriteError::UnknownPrincipal(p("nobody"))),
        ("unknown recipient", w(60, "a1", "x").forwarded_to(p("nobody")), WriteError::UnknownPrincipal(p("nobody"))),
        ("unknown parent", w(60, "a1", "x").derived_from(id(99)), WriteError::UnknownParent(id(99))),
        (
            "duplicate parent",
            w(60, "a1", "x").derived_from(id(R_USER)).summarized_from(id(R_USER)),
            WriteError::DuplicateParent(id(R_USER)),
        ),
        (
            "not a derivation",
            w(60, "a1", "x").parent(id(R_USER), EdgeKind::ReadBy),
            WriteError::NotADerivation { id: id(R_USER), kind: EdgeKind::ReadBy },
        ),
        (
            "too many parents",
            w(60, "a1", "x").derived_from(id(R_USER)).derived_from(id(R_WEB)).derived_from(id(R_TEAM)),
            WriteError::TooManyParents { count: 3, max: 2 },
        ),
        (
            "deriving from what one may not read",
            w(60, "a3", "x").summarized_from(id(R_PRIV)),
            WriteError::ParentNotReadable { id: id(R_PRIV), reason: DenyReason::NotInScope },
        ),
    ];
    let mut c = Checker::default();
    let before = g.records().count();
    for (name, ev, want) in cases {
        c.check(name, g.apply_write(ev).err(), Some(want));
    }
    c.check("nothing written", g.records().count(), before);
    // Every write is a new record, identical text included.
    let a = g.apply_write(w(61, "a1", "same")).unwrap();
    let b = g.apply_write(w(62, "a1", "same")).unwrap();
    c.check("no dedup", a.record.id() != b.record.id(), true);
    c.check("edges", a.edges.iter().map(|e| e.kind).collect::<Vec<_>>(), vec![EdgeKind::WrittenBy]);
    // Source trust only lowers.
    let low = g.apply_write(w(63, "u", "x").source_trust(Trust::new(0.2).unwrap())).unwrap();
    let high = g
        .apply_write(
            WriteEvent::new(id(64), RecordKind::Memory, p("web"), "x", Integrity::Untrusted, 1)
                .source_trust(Trust::ONE),
        )
        .unwrap();
    c.check("lowered", low.record.base_trust().get(), 0.2);
    c.check("never raised", high.record.base_trust().get(), 0.4);
    c.finish();
}

#[test]
fn bounded_affected_lists_count_the_rest() {
    let cfg = LineageConfig { affected_ids_max: 2, ..Default::default() };
    let mut g = LineageGraph::new(cfg).unwrap();
    principals(&mut g);
    // Five untrusted pages, two notes on overlapping sets, and a note on both notes.
    for n in 1..=5u8 {
        g.apply_write(WriteEvent::new(id(n), RecordKind::Resource, p("web"), "page", Integrity::Untrusted, 1)).unwrap();
    }
    let mut ev = WriteEvent::new(id(10), RecordKind::Memory, p("a1"), "n1", Integrity::Agent, 2);
    for n in 1..=4u8 {
        ev = ev.derived_from(id(n));
    }
    let n1 = g.apply_write(ev).unwrap().record;
    assert_eq!(n1.summary().affected.iter().map(|a| a.id).collect::<Vec<_>>(), vec![id(1), id(2)]);
    assert_eq!(n1.summary().affected_rest, Tally::Exact(2));
    let n2 = g
        .apply_write(
            WriteEvent::new(id(11), RecordKind::Memory, p("a1"), "n2", Integrity::Agent, 3)
                .derived_from(id(4))
                .derived_from(id(5)),
        )
        .unwrap()
        .record;
    assert_eq!(n2.summary().affected_rest, Tally::Exact(0));
    let top = g
        .apply_write(
            WriteEvent::new(id(12), RecordKind::Memory, p("a1"), "top", Integrity::Agent, 4)
                .derived_from(id(10))
                .derived_from(id(11)),
        )
        .unwrap()
        .record;
    assert_eq!(top.summary().affected.iter().map(|a| a.id).collect::<Vec<_>>(), vec![id(1), id(2)]);
    // Exactly 5 affected; the incremental count is a lower bound (n1 overflowed).
    assert_eq!(top.summary().affected_rest, Tally::AtLeast(2));
    let exact = g.recompute_from_scratch(id(12)).unwrap();
    assert_eq!(exact.affected_rest, Tally::Exact(3));
    assert!(agrees(top.summary(), &exact));
    g.verify_summaries().unwrap();
}

#[test]
fn audit_trail_round_trips_and_names_every_node_type() {
    let mut g = fixture();
    g.apply_action(ActionEvent {
        id: id(100),
        request: request("a1", ActionKind::Act, Risk::High, &[M_NOTE], &[]),
        tool: "pay".into(),
        on_behalf_of: Some(p("u")),
        agent_proposal: None,
        at_ms: 7_000,
    })
    .unwrap();
    g.apply_write(
        WriteEvent::new(id(70), RecordKind::Claim, p("a1"), "claim", Integrity::Agent, 8).derived_from(id(M_NOTE)),
    )
    .unwrap();
    let trail = g.audit_trail();
    let json = serde_json::to_string_pretty(&trail).unwrap();
    let back: AuditTrail = serde_json::from_str(&json).unwrap();
    assert_eq!(back, trail);
    assert!(!json.contains("CANARY-PRIV") && !json.contains("ACCT-1"), "no text in the audit trail");
    let kinds: BTreeSet<NodeKind> = trail
        .records
        .iter()
        .map(|r| NodeRef::Record(r.id()))
        .chain(trail.principals.iter().map(|p| NodeRef::Principal(p.id.clone())))
        .chain(trail.actions.iter().map(|a| NodeRef::Action(a.id)))
        .filter_map(|n| g.node_kind(&n))
        .collect();
    assert_eq!(kinds.len(), 8, "all eight node types: {kinds:?}");
    for e in &trail.edges {
        assert!(memwarden_lineage::model::edge_shape_ok(e.kind, &e.from, &e.to));
    }
}

// ---- restore and replay ------------------------------------------------------------------------------

fn texts_of(g: &LineageGraph) -> std::collections::BTreeMap<ItemId, String> {
    g.records().filter_map(|r| g.text(r.id()).map(|t| (r.id(), t.to_owned()))).collect()
}

fn invalidations(g: &LineageGraph) -> BTreeSet<(NodeRef, NodeRef)> {
    g.edges().iter().filter(|e| e.kind == EdgeKind::InvalidatedBy).map(|e| (e.from.clone(), e.to.clone())).collect()
}

#[test]
fn restore_round_trips_persisted_rows() {
    let mut g = fixture();
    g.apply_revocation(RevokeEvent { id: id(R_TEAM), revoker: p("u"), at_ms: 9_000 }).unwrap();
    g.apply_erasure(EraseEvent { id: id(R_WEB), erasure_id: id(200), requested_by: p("u"), at_ms: 9_100 }).unwrap();
    let (back, fx) = LineageGraph::restore(LineageConfig::default(), g.audit_trail(), texts_of(&g)).unwrap();
    assert_eq!(fx, RestoreEffects::default(), "nothing to repair");
    assert_eq!(back.records().cloned().collect::<Vec<_>>(), g.records().cloned().collect::<Vec<_>>());
    assert_eq!(back.edges(), g.edges());
    assert_eq!(back.audit_trail(), g.audit_trail());
    assert_eq!(texts_of(&back), texts_of(&g));
    back.verify_summaries().unwrap();
    for who in ["u", "a1", "a2", "a3"] {
        for r in g.records() {
            assert_eq!(back.can_read(&p(who), r.id()), g.can_read(&p(who), r.id()));
        }
    }
}

#[test]
fn restore_repairs_an_interrupted_propagation() {
    // A store that persisted the revocation's first step and then crashed.
    let mut stepped = fixture_with(LineageConfig { propagation_step_records_max: 1, ..Default::default() });
    let fx = stepped.apply_revocation(RevokeEvent { id: id(R_TEAM), revoker: p("u"), at_ms: 9_000 }).unwrap();
    assert!(!fx.done());
    let (back, repair) =
        LineageGraph::restore(LineageConfig::default(), stepped.audit_trail(), texts_of(&stepped)).unwrap();
    assert!(!repair.repaired.is_empty() && !repair.edges.is_empty());
    let mut eager = fixture();
    eager.apply_revocation(RevokeEvent { id: id(R_TEAM), revoker: p("u"), at_ms: 9_000 }).unwrap();
    assert_eq!(back.records().cloned().collect::<Vec<_>>(), eager.records().cloned().collect::<Vec<_>>());
    assert_eq!(invalidations(&back), invalidations(&eager));
    assert_eq!(back.pending(), 0);
    back.verify_summaries().unwrap();
}

#[test]
fn restore_refuses_broken_rows() {
    let g = fixture();
    let mut t = g.audit_trail();
    t.format = "something-else".into();
    assert!(matches!(
        LineageGraph::restore(LineageConfig::default(), t, Default::default()),
        Err(RestoreError::UnknownFormat(_))
    ));
    let mut t = g.audit_trail();
    t.principals.push(t.principals[0].clone());
    assert!(matches!(
        LineageGraph::restore(LineageConfig::default(), t, Default::default()),
        Err(RestoreError::Duplicate(_))
    ));
    let mut t = g.audit_trail();
    t.records.retain(|r| r.id() != id(R_TEAM));
    assert!(matches!(
        LineageGraph::restore(LineageConfig::default(), t, Default::default()),
        Err(RestoreError::BrokenParent { parent, .. }) if parent == id(R_TEAM)
    ));
    let mut t = g.audit_trail();
    t.edges.swap(0, 1);
    assert!(matches!(
        LineageGraph::restore(LineageConfig::default(), t, Default::default()),
        Err(RestoreError::BadEdge(_))
    ));
    let t = g.audit_trail();
    let bad = LineageConfig { k_default: 0, ..Default::default() };
    assert!(matches!(LineageGraph::restore(bad, t, Default::default()), Err(RestoreError::Config(_))));
}

#[test]
fn an_admitted_item_becomes_a_write_event() {
    use memwarden_core::authority::Authority;
    use memwarden_core::ids::{Namespace, TenantId};
    use memwarden_core::item::{Route, WriteRequest};
    use memwarden_core::principal::Principal;
    let tenant = TenantId::new("acme").unwrap();
    let user = Principal {
        id: p("u"),
        tenant: tenant.clone(),
        kind: PrincipalKind::User,
        domain: None,
        allow_listed: false,
        public_key: None, action: None,
    };
    let req = WriteRequest::new(Namespace::new("team").unwrap(), "the landlord's account is ACCT-1", Route::Dialogue);
    let admitted = Authority::default().admit_write(&user, &tenant, req, &[], id(1), 42).unwrap();
    let ev = WriteEvent::from_item(admitted.item(), RecordKind::Memory);
    assert_eq!(ev.integrity, Integrity::Trusted, "the label comes from the authority layer");
    assert_eq!((ev.id, ev.at_ms, ev.writer.clone()), (id(1), 42, p("u")));
    let mut g = LineageGraph::default();
    principals(&mut g);
    let fx = g.apply_write(ev).unwrap();
    assert_eq!(fx.record.base_trust(), Trust::ONE);
}
