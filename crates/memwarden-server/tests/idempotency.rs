//! `Idempotency-Key` over real HTTP (issue 35.4): a retried write is stored once and answered
//! the same; another request under the key is refused; concurrent retries leave one write; a
//! request that committed nothing leaves its key free; keys are per principal.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod common;

use common::{ADMIN, TestServer};
use serde_json::{Value, json};

fn count(s: &TestServer, key: &str, ns: &str) -> usize {
    let r = s.get(&format!("/v1/memories?namespace={ns}"), Some(key));
    assert_eq!(r.status, 200, "{}", r.text);
    r.json()["results"].as_array().map_or(0, Vec::len)
}

fn add_with(s: &TestServer, key: &str, idem: &str, body: &Value) -> common::Resp {
    s.send_with("POST", "/v1/memories", key, &[("Idempotency-Key", idem)], Some(body))
}

#[test]
fn a_retried_write_is_stored_once_and_answered_the_same() {
    let s = TestServer::start();
    let a = s.principal_key("acme", "agent", "agent");
    let body = json!({"namespace": "notes", "content": "the landlord's account is ACCT-1"});
    let first = add_with(&s, &a, "write-0001", &body);
    assert_eq!(first.status, 201, "{}", first.text);
    assert_eq!(first.header("idempotent-replayed"), None);
    for _ in 0..3 {
        let again = add_with(&s, &a, "write-0001", &body);
        assert_eq!(again.status, 201, "{}", again.text);
        assert_eq!(again.header("idempotent-replayed"), Some("true"));
        assert_eq!(again.json(), first.json(), "the replay is the first answer");
        assert!(again.content_type.starts_with("application/json"));
    }
    assert_eq!(count(&s, &a, "notes"), 1, "stored once");
    // Another request under the same key is refused, and nothing is stored.
    let other = add_with(&s, &a, "write-0001", &json!({"namespace": "notes", "content": "something else"}));
    other.problem(422, "idempotency_key_reused");
    assert_eq!(count(&s, &a, "notes"), 1);
    // Keys are per principal: another principal's same key is its own.
    let b = s.principal_key("acme", "other", "agent");
    assert_eq!(add_with(&s, &b, "write-0001", &body).status, 201);
    assert_eq!(count(&s, &b, "notes"), 2, "both principals' writes (shared namespace)");
    // Without the header, every request is its own (unchanged behaviour).
    assert_eq!(s.post("/v1/memories", Some(&a), &body).status, 201);
}

#[test]
fn the_key_covers_every_mutating_route_and_a_refusal_leaves_it_free() {
    let s = TestServer::start();
    let a = s.principal_key("acme", "agent", "agent");
    let id = s.post("/v1/memories", Some(&a), &json!({"namespace": "n", "content": "v1"})).json()["item"]["id"].as_str().unwrap().to_owned();
    // An update, retried: one new version.
    let up = json!({"content": "v2"});
    let first = s.send_with("PUT", &format!("/v1/memories/{id}"), &a, &[("Idempotency-Key", "up-1")], Some(&up));
    assert_eq!(first.status, 200, "{}", first.text);
    let again = s.send_with("PUT", &format!("/v1/memories/{id}"), &a, &[("Idempotency-Key", "up-1")], Some(&up));
    assert_eq!((again.status, again.header("idempotent-replayed")), (200, Some("true")), "{}", again.text);
    assert_eq!(again.json(), first.json());
    let history = s.get(&format!("/v1/memories/{id}/history"), Some(&a)).json();
    assert_eq!(history["versions"].as_array().map(Vec::len), Some(2), "{history}");
    // A refused write (a credential in the content) is logged: its answer is replayed.
    let secret = json!({"namespace": "n", "content": "my key is AKIAIOSFODNN7EXAMPLE"});
    add_with(&s, &a, "w-2", &secret).problem(422, "refused");
    let again = add_with(&s, &a, "w-2", &secret);
    again.problem(422, "refused");
    assert_eq!(again.header("idempotent-replayed"), Some("true"));
    // A body that is not valid commits nothing: its key stays free.
    let bad_body = s.send_with("POST", "/v1/memories", &a, &[("Idempotency-Key", "w-3")], Some(&json!({"namespace": "n"})));
    bad_body.problem(400, "invalid_input");
    let ok = add_with(&s, &a, "w-3", &json!({"namespace": "n", "content": "a clean note"}));
    assert_eq!(ok.status, 201, "the key was free: {}", ok.text);
    // A bad key is a 400; the admin token does not take one.
    let bad = add_with(&s, &a, "has space", &json!({"namespace": "n", "content": "x"}));
    bad.problem(400, "invalid_input");
    let admin = s.send_with("POST", "/v1/admin/principals", ADMIN, &[("Idempotency-Key", "adm-1")], Some(&json!({"tenant": "acme", "id": "x", "kind": "agent"})));
    admin.problem(422, "idempotency_unsupported");
}

#[test]
fn concurrent_retries_with_one_key_leave_one_write() {
    let s = TestServer::start();
    let a = s.principal_key("acme", "agent", "agent");
    let body = json!({"namespace": "race", "content": "exactly once"});
    let statuses: Vec<(u16, Option<String>)> = std::thread::scope(|sc| {
        let hs: Vec<_> = (0..8)
            .map(|_| {
                sc.spawn(|| {
                    let r = add_with(&s, &a, "race-key", &body);
                    (r.status, r.json()["code"].as_str().map(str::to_owned))
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (st, code) in &statuses {
        assert!(*st == 201 || (*st == 409 && code.as_deref() == Some("idempotency_in_flight")), "{statuses:?}");
    }
    assert!(statuses.iter().any(|(st, _)| *st == 201));
    assert_eq!(count(&s, &a, "race"), 1, "{statuses:?}");
    let after = add_with(&s, &a, "race-key", &body);
    assert_eq!((after.status, after.header("idempotent-replayed")), (201, Some("true")));
}

/// Issue 35.7, regression: the answer kept for a write's replay held the memory's text after the
/// memory was erased (for 24 h, in the store's file). An erasure now drops every kept answer that
/// names the memory; a retry under the key is still refused (409), never stored again, and no
/// file of the store holds the text.
#[test]
fn an_erasure_drops_the_kept_answer_that_held_the_text() {
    let s = TestServer::start();
    let a = s.principal_key("acme", "agent", "agent");
    let body = json!({"namespace": "notes", "content": "door code ERASEME-4417-ZEBRA"});
    let first = add_with(&s, &a, "write-erase-1", &body);
    assert_eq!(first.status, 201, "{}", first.text);
    let id = first.json()["item"]["id"].as_str().unwrap().to_owned();
    let kept = add_with(&s, &a, "write-keep-1", &json!({"namespace": "notes", "content": "lunch at noon"}));
    assert_eq!(kept.status, 201, "{}", kept.text);
    let r = s.delete(&format!("/v1/memories/{id}"), Some(&a));
    assert_eq!(r.status, 200, "{}", r.text);
    let retry = add_with(&s, &a, "write-erase-1", &body);
    assert_eq!(retry.status, 409, "{}", retry.text);
    assert_eq!(count(&s, &a, "notes"), 1, "the erased write was not stored again");
    // The other write's answer is kept and replayed.
    let again = add_with(&s, &a, "write-keep-1", &json!({"namespace": "notes", "content": "lunch at noon"}));
    assert_eq!((again.status, again.header("idempotent-replayed")), (201, Some("true")), "{}", again.text);
    for f in std::fs::read_dir(s.dir.path()).unwrap() {
        let f = f.unwrap().path();
        if f.is_file() {
            let bytes = std::fs::read(&f).unwrap();
            assert!(!bytes.windows(7).any(|w| w == b"ERASEME"), "{} still holds the erased text", f.display());
        }
    }
}
