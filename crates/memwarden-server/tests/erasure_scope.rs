//! Issue 33 over HTTP: `DELETE /v1/memories/{id}` (Mem0's delete) erases the memory and what was
//! declared derived from it, never what a session merely saw; a session's writes after such a
//! deletion answer 201 `active` and read back; revocation covers every version.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod common;

use common::TestServer;
use ed25519_dalek::SigningKey;
use serde_json::json;

fn added(r: &common::Resp) -> String {
    assert_eq!(r.status, 201, "{}", r.text);
    assert_eq!(r.json()["item"]["status"], "active", "{}", r.text);
    r.json()["item"]["id"].as_str().unwrap().to_owned()
}

#[test]
fn deleting_what_a_session_saw_keeps_that_sessions_writes_readable() {
    let s = TestServer::start();
    let bot = s.principal_key("acme", "bot", "agent");
    s.register("acme", "ursula", "user", None, false, Some(&SigningKey::from_bytes(&[3; 32])));
    let ursula = s.mint("acme", "ursula").0;
    let note = added(&s.post("/v1/memories", Some(&bot), &json!({"namespace": "ops", "content": "The caterer's number changed to 555-0101."})));
    let session = s.open_session(&ursula, "fork");
    // The user's session is handed the bot's note, then writes.
    let r = s.get_in(&session, &format!("/v1/memories/{note}"), &ursula);
    assert_eq!(r.status, 200, "{}", r.text);
    let mine = added(&s.post_in(&session, "/v1/memories", &ursula, &json!({"namespace": "ops", "content": "Book the caterer for Friday."})));
    // The bot erases its own note: the user's memory stays, marked.
    let r = s.delete(&format!("/v1/memories/{note}"), Some(&bot));
    assert_eq!(r.status, 200, "{}", r.text);
    let v = r.json();
    assert_eq!(v["erased"], json!([note]), "{v}");
    assert_eq!(v["seen_marked"], json!([mine]), "{v}");
    let r = s.get(&format!("/v1/memories/{mine}"), Some(&ursula));
    assert_eq!(r.status, 200, "the user's memory was erased with the note it had seen: {}", r.text);
    // The session goes on: an acknowledged write reads back, by id and in the list.
    let later = added(&s.post_in(&session, "/v1/memories", &ursula, &json!({"namespace": "ops", "content": "Also order flowers."})));
    let r = s.get_in(&session, &format!("/v1/memories/{later}"), &ursula);
    assert_eq!(r.status, 200, "{}", r.text);
    let r = s.get("/v1/memories?namespace=ops", Some(&ursula));
    assert_eq!(r.status, 200, "{}", r.text);
    for id in [&mine, &later] {
        assert!(r.text.contains(id.as_str()), "{id} missing from the list: {}", r.text);
    }
    // A principal that is neither the owner nor a user may not delete the user's memory.
    let r = s.delete(&format!("/v1/memories/{mine}"), Some(&bot));
    assert!(r.status == 403 || r.status == 404, "{} {}", r.status, r.text);
}

#[test]
fn revoking_the_current_version_revokes_the_older_ones() {
    let s = TestServer::start();
    let bot = s.principal_key("acme", "bot", "agent");
    s.register("acme", "ursula", "user", None, false, Some(&SigningKey::from_bytes(&[3; 32])));
    let ursula = s.mint("acme", "ursula").0;
    let v1 = added(&s.post("/v1/memories", Some(&bot), &json!({"namespace": "ops", "content": "Wifi rotates monthly."})));
    let r = s.put(&format!("/v1/memories/{v1}"), Some(&bot), &json!({"content": "Wifi rotates weekly."}));
    assert!(r.status == 200 || r.status == 201, "{} {}", r.status, r.text);
    let v2 = r.json()["memory"]["id"].as_str().unwrap().to_owned();
    let r = s.get(&format!("/v1/memories/{v1}/history"), Some(&ursula));
    assert_eq!(r.status, 200, "{}", r.text);
    let r = s.post(&format!("/v1/memories/{v2}/revoke"), Some(&bot), &json!({"reason": "wrong"}));
    assert_eq!(r.status, 200, "{}", r.text);
    for id in [&v1, &v2] {
        let r = s.get(&format!("/v1/memories/{id}/history"), Some(&ursula));
        assert_eq!(r.status, 404, "an old version is still readable through history: {}", r.text);
    }
}
