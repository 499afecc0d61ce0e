//! The benchmark's ablation switches in `LineageConfig`: each one turns off exactly the component
//! it names, and the defaults leave every component on.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod common;

use common::*;
use memwarden_lineage::prelude::*;

fn ranked(g: &LineageGraph, reader: &str, cands: &[(u8, f64)]) -> Vec<ItemId> {
    let cands: Vec<Candidate> = cands.iter().map(|(n, s)| Candidate { id: id(*n), similarity: *s }).collect();
    g.rank(&p(reader), &cands, Some(5)).unwrap().selected.iter().map(|r| r.id).collect()
}

#[test]
fn defaults_switch_every_component_on() {
    let c = LineageConfig::default();
    let mut k = Checker::default();
    k.check("permission_filter", c.permission_filter, true);
    k.check("trust_propagation", c.trust_propagation, true);
    k.check("containment", c.containment, true);
    k.check("action_gate", c.action_gate, true);
    let partial: LineageConfig = serde_json::from_str(r#"{"containment": false}"#).unwrap();
    k.check("a partial config keeps the other switches", (partial.containment, partial.action_gate), (false, true));
    k.finish();
}

#[test]
fn each_switch_turns_off_its_component() {
    use ActionKind::{Act, Answer};
    use Risk::{High, Low, Medium};
    let mut c = Checker::default();

    // Permission filter: a3 may not read a1's private summary; without the filter it is ranked.
    let on = fixture();
    let off = fixture_with(LineageConfig { permission_filter: false, ..Default::default() });
    c.check("filter on: private summary removed", ranked(&on, "a3", &[(M_SUM_PRIV, 0.9)]), vec![]);
    c.check("filter off: private summary ranked", ranked(&off, "a3", &[(M_SUM_PRIV, 0.9)]), vec![id(M_SUM_PRIV)]);
    c.check("filter off: can_read is unchanged", off.can_read(&p("a3"), id(M_SUM_PRIV)), Err(DenyReason::NotInScope));
    // ... and the gate still sees the cause: a disclosure is redacted.
    let d = off.decide(&request("a3", Answer, Low, &[M_SUM_PRIV], &[]));
    c.check("filter off: gate still redacts", d.decision, Decision::Redact);
    // ... and a write may derive from a record its writer may not read.
    let mut off_w = off.clone();
    let w = WriteEvent::new(id(40), RecordKind::Memory, p("a3"), "derived anyway", Integrity::Agent, 9_000)
        .derived_from(id(M_SUM_PRIV));
    c.check("filter off: write from an unreadable parent", off_w.apply_write(w.clone()).is_ok(), true);
    let mut on_w = on.clone();
    c.check("filter on: that write is refused", on_w.apply_write(w).is_err(), true);

    // Trust propagation: off, rho uses the record's own facts and ranking is by similarity alone.
    let tp = fixture_with(LineageConfig { trust_propagation: false, ..Default::default() });
    let note_on = on.path_trust(id(M_NOTE), &p("a2")).unwrap().rho.get();
    let note_off = tp.path_trust(id(M_NOTE), &p("a2")).unwrap().rho.get();
    c.check("trust on: note rho", (note_on * 1e4).round(), (0.9 * 0.97 * 0.9 * 1e4f64).round());
    c.check("trust off: note rho (own facts)", (note_off * 1e4).round(), (0.9 * 0.9 * 1e4f64).round());
    let poison_off = tp.path_trust(id(M_POISON), &p("a2")).unwrap().rho.get();
    c.check("trust off: poisoned capture no longer demoted", (poison_off * 1e4).round(), (0.81 * 1e4f64).round());
    // R_WEB (rho .36) at .95 beats R_USER (.9) at .6 only without reranking.
    c.check("trust on: reranked", ranked(&on, "a2", &[(R_WEB, 0.95), (R_USER, 0.6)]), vec![id(R_USER), id(R_WEB)]);
    c.check("trust off: by similarity", ranked(&tp, "a2", &[(R_WEB, 0.95), (R_USER, 0.6)]), vec![id(R_WEB), id(R_USER)]);
    // Causes still propagate: the gate still blocks a high-risk action on the poisoned capture.
    c.check(
        "trust off: rule 1 still fires",
        tp.decide(&request("a3", Act, High, &[M_POISON], &[])).rule,
        GateRule::HighRiskAffected,
    );

    // Containment: off, rules 1 and 3 are skipped and the poisoned factor no longer applies.
    let nc = fixture_with(LineageConfig { containment: false, ..Default::default() });
    let d = nc.decide(&request("a3", Answer, Low, &[M_POISON], &[]));
    c.check("containment off: a poisoned support passes rule 4", (d.decision, d.rule), (Decision::Allow, GateRule::Sufficient));
    let d = on.decide(&request("a3", Answer, Low, &[M_POISON], &[]));
    c.check("containment on: blocked", d.decision, Decision::Block);
    let d = nc.decide(&request("a3", Act, Medium, &[M_POISON], &[]));
    c.check("containment off: rule 4 still grades", d.rule, GateRule::BelowThreshold);
    c.check("containment off: can_read unchanged", nc.can_read(&p("a3"), id(M_SUM_PRIV)), Err(DenyReason::NotInScope));

    // Action gate: off, everything is allowed.
    let ng = fixture_with(LineageConfig { action_gate: false, ..Default::default() });
    let d = ng.decide(&request("a3", Act, High, &[M_POISON], &[]));
    c.check("gate off", (d.decision, d.rule), (Decision::Allow, GateRule::GateDisabled));
    c.finish();
}
