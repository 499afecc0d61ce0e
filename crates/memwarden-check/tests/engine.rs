//! The model's steps through the shipped engine (`Engine` under `full`): Sec, non-malleability
//! and conformance with the core gate's labels on random walks; and the same oracle failing an
//! engine with no gate (`none`), so a pass means something.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use memwarden_check::{CheckConfig, render_engine_markdown, replay_engine, replay_engine_preset};
use memwarden_engine::Preset;

#[test]
fn the_engine_keeps_sec_on_the_models_walks_with_tool_outputs() {
    let r = replay_engine(&CheckConfig::product(), 60, 7);
    println!("{}", render_engine_markdown(&r));
    assert_eq!(r.preset, "full");
    assert!(r.holds(), "{}", render_engine_markdown(&r));
    assert_eq!(r.walks, 60);
    // The walks reach what the property is about: executed actions, some of them with an
    // untrusted carrier of the value in the context (released by a grant or corroboration),
    // and every kind of step.
    assert!(r.executed > 0 && r.executed_with_untrusted_push > 0, "{r:?}");
    for kind in ["write", "paraphrase", "echo", "report", "bare_echo", "own_output", "attest", "grant", "tick", "act"] {
        assert!(r.steps_by_kind.get(kind).copied().unwrap_or(0) > 0, "no {kind} step in {:?}", r.steps_by_kind);
    }
    assert!(r.labels_equal > 0, "the engine and the core gate agree on labels");
}

#[test]
fn the_oracle_catches_an_engine_without_gates() {
    let r = replay_engine_preset(&CheckConfig::product(), 20, 7, Preset::None);
    assert!(!r.sec_violations.is_empty(), "{}", render_engine_markdown(&r));
    assert!(!r.above_core_label.is_empty(), "with labels unbound the engine trusts what the core gate does not");
}
