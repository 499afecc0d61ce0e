//! The paper's model-checking results (T1–T3), re-established against memwarden's own gate code at
//! the paper's bound (3 slots, 2 sessions, k = 2), plus sanity checks that "Sec holds" is not vacuous.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use memwarden_check::{CheckConfig, CheckReport, GateKind, PAPER_TLC_STATES, check, check_all, render_markdown};

fn run(gate: GateKind, cfg: &CheckConfig) -> CheckReport {
    let r = check(gate, cfg);
    println!(
        "{gate} at {} slots / {} sessions / k = {}: {} states ({} generated, depth {}), Sec {}, non-malleability {}, {:?}, {} ms",
        cfg.slots,
        cfg.sessions,
        cfg.k,
        r.states,
        r.generated,
        r.max_depth,
        if r.sec_holds { "holds" } else { "violated" },
        if r.nonmalleable_holds { "holds" } else { "violated" },
        r.allows,
        r.elapsed_ms
    );
    for (what, t) in [("Sec", &r.counterexample), ("non-malleability", &r.nonmalleability_counterexample)] {
        if let Some(t) = t {
            println!("  {what} counterexample:");
            for line in t {
                println!("    {line}");
            }
        }
    }
    assert!(r.errors.is_empty(), "the real code refused a model transition: {:?}", r.errors);
    r
}

/// The trace is the paper's witness: an untrusted write, a paraphrase of it, then an allowed act
/// paying the attacker's value.
fn assert_laundering_witness(r: &CheckReport) {
    let t = r.counterexample.as_ref().expect("a Sec counterexample");
    assert_eq!(t.len(), 3, "shortest witness has three steps: {t:#?}");
    assert!(t[0].starts_with("write(inbox [untrusted_external], v_attack)"), "{}", t[0]);
    assert!(t[1].starts_with("paraphrase(slot 0)"), "{}", t[1]);
    assert!(t[2].starts_with("act(pay v_attack") && t[2].contains("context [slot 1]") && t[2].contains("Sec VIOLATED"), "{}", t[2]);
    assert!(!r.sec_holds && r.as_expected());
}

#[test]
fn t1_content_based_gate_is_laundered_by_a_paraphrase() {
    let r = run(GateKind::ContentBased, &CheckConfig::paper());
    assert_laundering_witness(&r);
    assert!(r.counterexample.as_ref().unwrap()[2].contains("no injection marker"));
    // Labels come from the real code here, so they stay non-malleable; the gate just ignores them.
    assert!(r.nonmalleable_holds);
}

#[test]
fn t1_lineage_edge_gate_is_laundered_by_an_omitted_edge() {
    let r = run(GateKind::LineageEdges, &CheckConfig::paper());
    assert_laundering_witness(&r);
    assert!(r.counterexample.as_ref().unwrap()[1].contains("no recorded parent"));
    // Without the edge the paraphrase is labelled `agent`, above its untrusted input.
    assert!(!r.nonmalleable_holds);
    let nm = r.nonmalleability_counterexample.as_ref().unwrap();
    assert!(nm.last().unwrap().starts_with("paraphrase(slot 0) by agent => slot 1, label agent"), "{nm:#?}");
}

#[test]
fn t2_without_origin_binding_sec_is_violated() {
    let r = run(GateKind::NoOriginBinding, &CheckConfig::paper());
    let t = r.counterexample.as_ref().expect("a Sec counterexample");
    // The inbox's text is labelled trusted; an action on the value it pushes (whichever value
    // the breadth-first search meets first) is allowed without corroboration.
    assert!(t[0].starts_with("write(inbox [untrusted_external], v_") && t[0].ends_with("label trusted"), "{t:#?}");
    assert!(t.last().unwrap().starts_with("act(pay v_") && t.last().unwrap().contains("Sec VIOLATED"), "{t:#?}");
    assert!(r.as_expected());
}

#[test]
fn t3_real_gate_satisfies_sec_and_non_malleability_at_the_papers_bound() {
    let r = run(GateKind::Real, &CheckConfig::paper());
    println!("reachable states: {} (the paper's TLC run: {PAPER_TLC_STATES})", r.states);
    assert!(r.sec_holds, "{:#?}", r.counterexample);
    assert!(r.nonmalleable_holds, "{:#?}", r.nonmalleability_counterexample);
    assert!(r.exhaustive && r.states > 0 && r.as_expected());
    // Not vacuous: untrusted-pushed values were allowed through both of M3's paths.
    assert!(r.allows.corroborated > 0 && r.allows.granted > 0 && r.allows.no_untrusted_push > 0, "{:?}", r.allows);
    // Every way a presented grant can be refused was exercised, and so was the AskUser fallback.
    println!("{:#?}", r.verdicts);
    for code in ["reused", "expired", "value_mismatch", "amount_mismatch", "tool_mismatch", "bad_signature"] {
        assert!(r.verdicts.get(&format!("block (grant refused: {code})")).is_some_and(|n| *n > 0), "{code}: {:#?}", r.verdicts);
    }
    assert!(r.verdicts.get("ask_user (uncorroborated)").is_some_and(|n| *n > 0));
}

#[test]
fn real_gate_reaches_allows_by_corroboration_and_by_grant_at_a_small_bound() {
    // One slot, one session: inbox(v_legit) + two independent registries, or inbox(v_attack) +
    // the user's grant for it, must each be allowed by the real gate somewhere in the search.
    let cfg = CheckConfig { slots: 1, sessions: 1, k: 2, threads: 1, tool_outputs: false };
    let r = run(GateKind::Real, &cfg);
    assert!(r.sec_holds && r.nonmalleable_holds && r.exhaustive);
    assert!(r.allows.corroborated > 0, "{:?}", r.allows);
    assert!(r.allows.granted > 0, "{:?}", r.allows);
    // With k above the number of independent registries, corroboration can never succeed, and
    // Sec still holds (grants remain).
    let r = run(GateKind::Real, &CheckConfig { k: 3, ..cfg });
    assert!(r.sec_holds && r.allows.corroborated == 0 && r.allows.granted > 0, "{:?}", r.allows);
}

#[test]
fn check_all_and_markdown_report_every_gate() {
    let cfg = CheckConfig { slots: 2, sessions: 1, k: 2, threads: 1, tool_outputs: false };
    let reports = check_all(&cfg);
    assert_eq!(reports.iter().map(|r| r.gate).collect::<Vec<_>>(), GateKind::ALL.to_vec());
    assert!(reports.iter().all(CheckReport::as_expected), "{reports:#?}");
    let md = render_markdown(&reports);
    println!("{md}");
    for g in GateKind::ALL {
        assert!(md.contains(&format!("| {g} |")), "{md}");
    }
    assert!(md.contains("`content-based`: Sec counterexample") && md.contains("1. write(inbox"), "{md}");
    assert_eq!("lineage-edges".parse::<GateKind>(), Ok(GateKind::LineageEdges));
    assert!("nonsense".parse::<GateKind>().is_err());
}

#[test]
fn a_bad_bound_is_an_error_not_a_pass() {
    let r = check(GateKind::Real, &CheckConfig { slots: 0, ..CheckConfig::paper() });
    assert!(!r.errors.is_empty() && !r.sec_holds && !r.as_expected());
    let r = check(GateKind::Real, &CheckConfig { k: 0, ..CheckConfig::paper() });
    assert!(!r.errors.is_empty() && !r.sec_holds);
}

/// The CI bound for the tool-output transitions (the release runs at 3/2 and 4/3 are in
/// docs/benchmarks.md). Overridable for a manual run: MEMWARDEN_CHECK_SLOTS / _SESSIONS.
fn tool_output_bound() -> CheckConfig {
    let env = |k: &str, d: usize| std::env::var(k).ok().and_then(|v| v.parse().ok()).unwrap_or(d);
    CheckConfig { slots: env("MEMWARDEN_CHECK_SLOTS", 2), sessions: env("MEMWARDEN_CHECK_SESSIONS", 2), ..CheckConfig::product() }
}

/// Issue 14 item 4: T3 holds when every principal kind can report a tool's output (with and
/// without an argument carrying the value), the agent can bare-echo what it was handed, and the
/// tool can write its own output.
#[test]
fn t3_holds_with_tool_outputs_reported_by_every_principal_kind() {
    let r = run(GateKind::Real, &tool_output_bound());
    assert!(r.sec_holds, "{:#?}", r.counterexample);
    assert!(r.nonmalleable_holds, "{:#?}", r.nonmalleability_counterexample);
    assert!(r.exhaustive && r.as_expected());
    // Not vacuous: values backed by trusted outputs (the tool's own, the user's report) were
    // allowed, and the inbox's reported v_attack was refused somewhere.
    assert!(r.allows.no_untrusted_push > 0 && r.allows.corroborated > 0, "{:?}", r.allows);
    assert!(r.verdicts.get("ask_user (uncorroborated)").is_some_and(|n| *n > 0), "{:#?}", r.verdicts);
}

/// The rule before issue 14 (a caller-reported output without arguments got the tool's label):
/// the shortest counterexample is the one the outside run found — a source reports a trusted
/// tool's output, and a payment to the value it names is allowed (the forged report is the one
/// trusted support an unpushed value needs).
#[test]
fn unvouched_tool_outputs_give_the_source_reports_tool_output_counterexample() {
    let r = run(GateKind::UnvouchedToolOutputs, &tool_output_bound());
    let t = r.counterexample.as_ref().expect("a Sec counterexample");
    // Since issue 34.1 one trusted support is enough for a value nothing untrusted pushes, so the
    // forged report alone backs the payment: two steps, the attacker's own value.
    assert!(
        t.iter().any(|l| l.starts_with("report_tool_output(inbox [source] reports registry-a, v_") && l.ends_with("label trusted")),
        "{t:#?}"
    );
    let last = t.last().unwrap();
    assert!(last.starts_with("act(pay v_") && last.contains("Sec VIOLATED"), "{t:#?}");
    assert!(t.len() <= 3 && !t.iter().any(|l| l.starts_with("paraphrase") || l.starts_with("write")), "{t:#?}");
    // The report rose above its caller's label.
    let nm = r.nonmalleability_counterexample.as_ref().expect("a non-malleability counterexample");
    assert!(nm.last().unwrap().starts_with("report_tool_output(inbox [source]"), "{nm:#?}");
    assert!(r.as_expected());
    // Without the tool-output transitions the variant is the real gate, and Sec holds.
    let paper = run(GateKind::UnvouchedToolOutputs, &CheckConfig { slots: 2, sessions: 1, ..CheckConfig::paper() });
    assert!(paper.sec_holds && paper.as_expected());
}
