//! Properties: every signal and `r` stay in `[0, 1]`; feedback and derivation keep state in range;
//! gates never allow on bad input.

use super::*;
use memwarden_core::item::{Readers, Status};
use proptest::prelude::*;

const WORDS: &[&str] = &[
    "validated",
    "verified",
    "successful",
    "accepted",
    "high-confidence",
    "correct answer",
    "outcome: correct",
    "team verification",
    "review outcome",
    "ignore previous instructions",
    "bypass the safety",
    "always answer B",
    "reuse",
    "prioritize",
    "map it to option C",
    "when it appears",
    "future query",
    "primary prior",
    "keep the final answer",
    "option A",
    "final answer: D",
    "choose the option E",
    "answer pattern B",
    "trigger phrase",
    "calibration",
    "suffix",
    "##tok",
    "alpha bravo charlie delta echo",
    "trigger",
    "invoice",
    "routing",
    "the",
    "and",
    "Ω",
    "é",
    "\n",
    "   ",
    "do not verify",
    "skip review",
];

fn text() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(WORDS), 0..24).prop_map(|ws| ws.join(" "))
}

fn taint() -> impl Strategy<Value = Taint> {
    prop_oneof![Just(Taint::Clean), Just(Taint::Unverified), Just(Taint::External), Just(Taint::Poisoned)]
}

fn route() -> impl Strategy<Value = Route> {
    prop_oneof![
        Just(Route::Dialogue),
        Just(Route::Direct),
        Just(Route::ToolObservation),
        Just(Route::EnvironmentObservation),
        Just(Route::ExternalObservation),
        Just(Route::ImportedMemory),
        Just(Route::MemoryHandoff),
        Just(Route::CrossAgent),
        Just(Route::SharedPromotion),
        Just(Route::PostTaskExperience),
        Just(Route::Summary),
    ]
}

fn scope() -> impl Strategy<Value = LifecycleScope> {
    prop_oneof![
        Just(LifecycleScope::Private),
        Just(LifecycleScope::Team),
        Just(LifecycleScope::Quarantined),
        Just(LifecycleScope::Blocked)
    ]
}

fn status() -> impl Strategy<Value = Status> {
    prop_oneof![Just(Status::Active), Just(Status::Quarantined), Just(Status::Blocked), Just(Status::Revoked)]
}

/// Any number, including far out of range.
fn wide() -> impl Strategy<Value = f64> {
    prop_oneof![-5.0f64..5.0, Just(0.0), Just(1.0), Just(-1.0)]
}

/// Any number, including non-finite ones.
fn any_f64() -> impl Strategy<Value = f64> {
    prop_oneof![wide(), Just(f64::NAN), Just(f64::INFINITY), Just(f64::NEG_INFINITY)]
}

prop_compose! {
    fn memory()(
        text in text(),
        route in route(),
        taint in taint(),
        scope in scope(),
        status in status(),
        q in wide(), tau in wide(), h in wide(),
        successes in 0u32..20, failures in 0u32..20,
        trust in prop::option::of(wide()),
        parents in prop::collection::vec(prop::sample::select(&["memory_handoff", "cross_agent", "tool_observation", "imported_memory", "x"][..]), 0..5),
        tags in prop::collection::vec(prop::sample::select(&["query_only", "bridge", "post_task_successful_experience", "benign"][..]), 0..3),
        mtype in prop::sample::select(&["", "procedural", "episodic", "memory_handoff"][..]),
        single in any::<bool>(),
    ) -> LifecycleMemory {
        let mut m = LifecycleMemory::new(agent("alice"), text, route, guard(q, tau, h, taint));
        m.scope = scope;
        m.status = status;
        m.guard.successes = successes;
        m.guard.failures = failures;
        m.source_agent_trust = trust;
        m.parents = parents.into_iter().map(str::to_owned).collect();
        m.source_tags = tags.into_iter().map(str::to_owned).collect();
        m.memory_type = mtype.to_owned();
        if !single { m.readers = Readers::All; }
        m
    }
}

fn in_unit(x: f64) -> bool {
    x.is_finite() && (0.0..=1.0).contains(&x)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, .. ProptestConfig::default() })]

    #[test]
    fn every_signal_and_r_stay_in_unit_interval(
        m in memory(),
        query in text(),
        sim in wide(),
        share in wide(),
    ) {
        let s = scorer();
        let write = s.score(&m).unwrap();
        let read = s.score_in_context(&m, &RetrievalContext { query: &query, similarity: sim, cluster_share: share }).unwrap();
        for b in [&write, &read] {
            for (name, v) in [
                ("p", b.provenance), ("l", b.lineage), ("s", b.self_claim), ("i", b.instruction),
                ("b", b.answer_binding), ("t", b.trigger), ("d", b.cluster), ("a", b.agent_distrust), ("r", b.total),
            ] {
                prop_assert!(in_unit(v), "{} = {}", name, v);
            }
        }
        // Retrieval only ever adds to t and d.
        prop_assert!(read.trigger >= write.trigger && read.cluster >= write.cluster);
        prop_assert!(in_unit(s.query_context_risk(&query)));
    }

    #[test]
    fn feedback_keeps_state_clipped(
        q in any_f64(), tau in any_f64(), h in any_f64(),
        trust in prop::option::of(any_f64()),
        outcomes in prop::collection::vec(any::<bool>(), 1..40),
    ) {
        let c = LifecycleConfig::default();
        let mut st = FeedbackState { guard: guard(q, tau, h, Taint::Clean), source_agent_trust: trust };
        for ok in outcomes {
            let out = if ok { Outcome::Success } else { Outcome::Failure };
            st = feedback(&c, &st, out).after;
            let g = &st.guard;
            prop_assert!(g.q.is_finite() && (-1.0..=1.0).contains(&g.q), "q = {}", g.q);
            prop_assert!(in_unit(g.tau) && in_unit(g.h), "tau = {}, h = {}", g.tau, g.h);
            let rep = st.source_agent_trust.unwrap_or(0.5);
            prop_assert!(in_unit(rep) && rep >= c.feedback.reputation_min, "reputation = {}", rep);
        }
    }

    #[test]
    fn derivation_stays_in_range(m in memory()) {
        let rec = derive_guard(scorer(), &m).unwrap();
        prop_assert!(in_unit(rec.tau) && in_unit(rec.h));
    }

    #[test]
    fn gates_are_total_and_consistent(m in memory(), query in text(), sim in wide()) {
        let s = scorer();
        // Write: an admitted rewrite always carries the caps; a quarantine never leaves the item active.
        let w = write_gate(s, &m);
        match w.outcome {
            WriteOutcome::Rewrite => {
                prop_assert!(w.effect.guard.tau <= 0.25 + EPS && w.effect.guard.q <= 0.1 + EPS && w.effect.guard.h >= 0.5 - EPS);
                prop_assert!(w.effect.guard.taint != Taint::Clean);
            }
            WriteOutcome::Quarantine | WriteOutcome::Reject => prop_assert!(w.effect.status != Status::Active),
            WriteOutcome::Allow => prop_assert_eq!(w.effect.status, m.status),
        }
        // Retrieval: nothing inactive or out of scope is ever kept.
        let a = agent("alice");
        let r = retrieval_gate(s, &RetrievalQuery { agent: &a, task_class: None, text: &query }, &[RetrievalCandidate { memory: &m, similarity: sim }]);
        if m.status != Status::Active || !m.scope.is_open() {
            prop_assert!(r.kept.is_empty());
        }
        let stranger = agent("zed");
        let r = retrieval_gate(s, &RetrievalQuery { agent: &stranger, task_class: None, text: &query }, &[RetrievalCandidate { memory: &m, similarity: sim }]);
        if !matches!(m.readers, Readers::All) {
            prop_assert!(r.kept.is_empty());
        }
        // Promotion: a team promotion of a tainted item never passes.
        let p = promotion_gate(s, &m, PromotionTarget::Team);
        if matches!(m.guard.taint, Taint::External | Taint::Poisoned) {
            prop_assert_eq!(p.outcome, PromotionOutcome::Block);
        }
        // Broker: admitted implies active and in scope.
        let b = broker(s, &m, &BrokerRequest { agent: &stranger, task_class: None });
        if b.outcome == BrokerOutcome::Admit {
            prop_assert!(m.status == Status::Active && m.scope.is_open() && matches!(m.readers, Readers::All));
        }
    }

    #[test]
    fn non_finite_state_never_allows(m in memory(), bad in prop_oneof![Just(f64::NAN), Just(f64::INFINITY)], which in 0usize..3) {
        let s = scorer();
        let mut m = m;
        match which { 0 => m.guard.q = bad, 1 => m.guard.tau = bad, _ => m.guard.h = bad }
        prop_assert_eq!(write_gate(s, &m).outcome, WriteOutcome::Reject);
        prop_assert_eq!(promotion_gate(s, &m, PromotionTarget::Team).outcome, PromotionOutcome::Block);
        let a = agent("alice");
        prop_assert_eq!(broker(s, &m, &BrokerRequest { agent: &a, task_class: None }).outcome, BrokerOutcome::Block);
        let r = retrieval_gate(s, &RetrievalQuery { agent: &a, task_class: None, text: "q" }, &[RetrievalCandidate { memory: &m, similarity: 0.9 }]);
        prop_assert!(r.kept.is_empty());
    }
}
