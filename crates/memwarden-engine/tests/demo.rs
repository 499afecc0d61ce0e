//! The README's first command ends in `memwarden demo`: its narration, step by step (issue 33:
//! the demo had stopped at step 2 for a release, and nothing ran it).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use memwarden_core::prelude::*;

/// Each fragment must appear in the narration, in this order.
fn check(narration: &str, fragments: &[(&str, &str)]) {
    let mut at = 0usize;
    let mut failed = Vec::new();
    for (step, fragment) in fragments {
        match narration[at..].find(fragment) {
            Some(n) => at += n + fragment.len(),
            None => failed.push(format!("{step}: {fragment:?}")),
        }
    }
    assert!(failed.is_empty(), "missing from the narration (in order):\n{}\n--- narration ---\n{narration}", failed.join("\n"));
}

#[test]
fn the_demo_runs_and_narrates_every_step() {
    let dir = tempfile::tempdir().unwrap();
    let mut out = Vec::new();
    let summary = memwarden_engine::demo::run(&dir.path().join("demo"), &mut out).unwrap();
    let narration = String::from_utf8(out).unwrap();
    assert!(summary.as_expected(), "{summary:?}\n{narration}");
    assert_eq!(summary.undeclared_note, Integrity::Untrusted);
    check(
        &narration,
        &[
            ("0 principals", "alice            user   integrity=trusted"),
            ("1 loud email stored", "by mail-inbox: origin=untrusted_external label=untrusted"),
            ("1 quarantined", "status=quarantined"),
            ("1 claims ignored", "kept as metadata and ignored"),
            ("1 why", "the verdict log says why: entry"),
            ("1 withheld", "the assistant asks for it by id: WITHHELD by the lifecycle layer (quarantined; flags: "),
            ("2 plain email active", "status=active"),
            ("2 summary untrusted", "by assistant: origin=agent label=untrusted"),
            ("2 held-back email not handed", "the held-back email is not among them, it is named as withheld: 1 withheld"),
            ("2 jotted note untrusted", "by assistant: origin=agent label=untrusted"),
            ("2 seen edges", "seen_in_session edge(s), which lower the label and never take the note away"),
            ("3 echo", "by invoice-ocr"),
            ("4 planted payment stopped", "=> ASK_USER"),
            ("4 grant named", "a grant must bind: tool=pay"),
            ("5 puppets", "attestation by puppet-2: label=untrusted"),
            ("5 still stopped", "=> ASK_USER"),
            ("6 corroborated", "=> ALLOW"),
            ("7 asks", "=> ASK_USER"),
            ("7 granted", "=> ALLOW"),
            ("7 replay", "replaying the same grant:\n   => BLOCK"),
            ("7 amount", "used for 800 EUR:\n   => BLOCK"),
            ("8 log", "VERIFIES"),
            ("8 tampered", "DOES NOT VERIFY"),
            ("end", "Every step came out as a safe memory must."),
        ],
    );
}
