//! The lineage endpoints over real HTTP on loopback: a memory's lineage view
//! (`GET /v1/memories/{id}/lineage`) and the tenant's audit-trail export
//! (`GET /v1/lineage/export?format=memwarden|prov`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod common;

use common::{ADMIN, TestServer};
use ed25519_dalek::SigningKey;
use serde_json::{Value, json};

fn add(s: &TestServer, key: &str, ns: &str, content: &str) -> String {
    let r = s.post("/v1/memories", Some(key), &json!({"namespace": ns, "content": content}));
    assert_eq!(r.status, 201, "{}", r.text);
    r.json()["item"]["id"].as_str().unwrap().to_owned()
}

fn derive(s: &TestServer, key: &str, ns: &str, parents: &[&str], content: &str) -> String {
    let r = s.post("/v1/derive", Some(key), &json!({"namespace": ns, "parents": parents, "content": content}));
    assert_eq!(r.status, 201, "{}", r.text);
    r.json()["item"]["id"].as_str().unwrap().to_owned()
}

fn lineage(s: &TestServer, key: &str, id: &str) -> Value {
    let r = s.get(&format!("/v1/memories/{id}/lineage"), Some(key));
    assert_eq!(r.status, 200, "{}", r.text);
    assert!(r.content_type.starts_with("application/json"), "{}", r.content_type);
    r.json()
}

fn user_key(s: &TestServer, tenant: &str, id: &str, seed: u8) -> String {
    s.register(tenant, id, "user", None, false, Some(&SigningKey::from_bytes(&[seed; 32])));
    s.mint(tenant, id).0
}

fn ids(v: &Value) -> Vec<&str> {
    v.as_array().unwrap().iter().map(|x| x.as_str().unwrap()).collect()
}

fn rho(v: &Value) -> f64 {
    v["path_trust"]["rho"].as_f64().unwrap()
}

#[test]
fn a_derived_memorys_lineage_lists_its_parent_and_path_trust() {
    let s = TestServer::start();
    let agent = s.principal_key("acme", "agent", "agent");
    let fact = add(&s, &agent, "vendors", "Rhine GmbH bank account is ACCT-RHINE-2231.");
    let note = derive(&s, &agent, "vendors", &[&fact], "Rhine GmbH pays to ACCT-RHINE-2231");

    let v = lineage(&s, &agent, &note);
    assert_eq!(v["id"], note.as_str());
    assert_eq!(ids(&v["parents"]), vec![fact.as_str()], "{v}");
    assert_eq!(v["parents_hidden"], 0);
    assert!(ids(&v["children"]).is_empty(), "{v}");
    assert_eq!(v["children_hidden"], 0);
    assert_eq!(v["affected"], false, "{v}");
    for f in ["s", "i", "f", "p", "v", "a", "rho"] {
        let x = v["path_trust"][f].as_f64().unwrap_or_else(|| panic!("path_trust.{f} is not a number: {v}"));
        assert!((0.0..=1.0).contains(&x), "path_trust.{f} = {x}");
    }
    assert!(rho(&v) > 0.0, "{v}");
    // The record: no text, its parent edge, the ancestry summary.
    assert_eq!(v["record"]["id"], note.as_str());
    assert_eq!(v["record"]["writer"], "agent");
    assert_eq!(v["record"]["summary"]["depth"], 1, "{v}");
    assert_eq!(v["record"]["summary"]["revoked"], false);
    assert!(v["record"]["parents"].to_string().contains(&fact), "{v}");
    assert!(!v.to_string().contains("ACCT-RHINE-2231"), "the lineage view carries no text: {v}");

    // The parent names its child; one summarising hop costs trust.
    let p = lineage(&s, &agent, &fact);
    assert!(ids(&p["parents"]).is_empty());
    assert_eq!(ids(&p["children"]), vec![note.as_str()], "{p}");
    assert_eq!(p["record"]["summary"]["depth"], 0, "{p}");
    assert!(rho(&p) > rho(&v), "parent {} vs derived {}", rho(&p), rho(&v));

    // Derived from untrusted input: affected for the reader, and it costs trust.
    let web = s.principal_key("acme", "web", "source");
    let page = add(&s, &web, "vendors", "Rhine GmbH moved to ACCT-EVIL-9931.");
    let tainted = derive(&s, &agent, "vendors", &[&page], "Rhine GmbH may have moved");
    let t = lineage(&s, &agent, &tainted);
    assert_eq!(t["affected"], true, "{t}");
    assert_eq!(t["record"]["summary"]["untrusted"], true, "{t}");
    assert!(rho(&t) < rho(&v), "untrusted-derived {} vs trusted-derived {}", rho(&t), rho(&v));

    // Errors as for a read.
    s.get("/v1/memories/not-an-id/lineage", Some(&agent)).problem(400, "invalid_input");
    s.get(&format!("/v1/memories/{}/lineage", "ab".repeat(16)), Some(&agent)).problem(404, "not_found");
    s.get(&format!("/v1/memories/{note}/lineage"), None).problem(401, "unauthorized");
    s.get(&format!("/v1/memories/{note}/lineage"), Some(ADMIN)).problem(403, "forbidden");
}

#[test]
fn tenants_never_see_each_others_lineage() {
    let s = TestServer::start();
    let a = s.principal_key("acme", "agent", "agent");
    let b = s.principal_key("globex", "agent", "agent");
    let b_user = user_key(&s, "globex", "bob", 7);
    let a_fact = add(&s, &a, "shared", "acme: the vault code is 4711");
    let a_note = derive(&s, &a, "shared", &[&a_fact], "acme vault code noted");
    let b_fact = add(&s, &b, "shared", "globex: the vault code is 1234");
    let b_note = derive(&s, &b, "shared", &[&b_fact], "globex vault code noted");

    // B gets a 404 indistinguishable from a missing id, and nothing of A's graph in its own view.
    for id in [&a_fact, &a_note] {
        s.get(&format!("/v1/memories/{id}/lineage"), Some(&b)).problem(404, "not_found");
        s.get(&format!("/v1/memories/{id}/lineage"), Some(&b_user)).problem(404, "not_found");
    }
    let v = lineage(&s, &b, &b_note);
    assert_eq!(ids(&v["parents"]), vec![b_fact.as_str()]);
    assert!(!v.to_string().contains(&a_fact) && !v.to_string().contains(&a_note), "{v}");

    // B's exports name B's memories and none of A's.
    for format in ["memwarden", "prov"] {
        let r = s.get(&format!("/v1/lineage/export?format={format}"), Some(&b_user));
        assert_eq!(r.status, 200, "{}", r.text);
        assert!(r.text.contains(&b_fact) && r.text.contains(&b_note), "{format}: {}", r.text);
        assert!(!r.text.contains(&a_fact) && !r.text.contains(&a_note), "{format} export of globex names an acme memory: {}", r.text);
        assert!(!r.text.contains("acme"), "{format}: {}", r.text);
    }
}

#[test]
fn export_is_for_users_and_speaks_prov() {
    let s = TestServer::start();
    let agent = s.principal_key("acme", "agent", "agent");
    let user = user_key(&s, "acme", "ursula", 42);
    let fact = add(&s, &user, "vendors", "Rhine GmbH bank account is ACCT-RHINE-2231.");
    let note = derive(&s, &agent, "vendors", &[&fact], "Rhine GmbH pays to ACCT-RHINE-2231");

    // Agents (and the admin token, which is no principal) may not export.
    for q in ["", "?format=prov", "?format=memwarden"] {
        s.get(&format!("/v1/lineage/export{q}"), Some(&agent)).problem(403, "forbidden");
        s.get(&format!("/v1/lineage/export{q}"), Some(ADMIN)).problem(403, "forbidden");
        s.get(&format!("/v1/lineage/export{q}"), None).problem(401, "unauthorized");
    }
    s.get("/v1/lineage/export?format=graphml", Some(&user)).problem(400, "invalid_input");
    s.get("/v1/lineage/export?format=prov&tenant=globex", Some(&user)).problem(400, "invalid_input");

    // Default: memwarden's own audit trail.
    let r = s.get("/v1/lineage/export", Some(&user));
    assert_eq!(r.status, 200, "{}", r.text);
    assert!(r.content_type.starts_with("application/json"), "{}", r.content_type);
    let trail = r.json();
    assert_eq!(trail["format"], "memwarden-lineage-audit/1", "{trail}");
    assert_eq!(s.get("/v1/lineage/export?format=memwarden", Some(&user)).json()["format"], trail["format"]);
    let records = trail["records"].as_array().unwrap();
    let rec = records.iter().find(|r| r["id"] == note.as_str()).unwrap_or_else(|| panic!("no record for {note}: {trail}"));
    assert!(rec["parents"].to_string().contains(&fact), "{rec}");
    assert!(records.iter().any(|r| r["id"] == fact.as_str()));
    for key in ["principals", "actions", "edges", "erasures"] {
        assert!(trail[key].is_array(), "audit trail lacks {key}: {trail}");
    }

    // PROV-JSON.
    let r = s.get("/v1/lineage/export?format=prov", Some(&user));
    assert_eq!(r.status, 200, "{}", r.text);
    let prov = r.json();
    for key in ["entity", "activity", "agent", "wasDerivedFrom", "wasAttributedTo"] {
        assert!(prov[key].as_object().is_some_and(|o| !o.is_empty()), "PROV-JSON lacks {key}: {prov}");
    }
    assert!(prov["entity"].as_object().unwrap().keys().any(|k| k.contains(&note)), "{prov}");
    assert!(prov["wasDerivedFrom"].to_string().contains(&note) && prov["wasDerivedFrom"].to_string().contains(&fact), "{prov}");
    // No memory text in either export.
    assert!(!prov.to_string().contains("ACCT-RHINE-2231"));
    assert!(!trail.to_string().contains("ACCT-RHINE-2231"));
}

#[test]
fn revoking_a_parent_reaches_the_childs_lineage() {
    let s = TestServer::start();
    let agent = s.principal_key("acme", "agent", "agent");
    let user = user_key(&s, "acme", "ursula", 42);
    let fact = add(&s, &user, "vendors", "Rhine GmbH bank account is ACCT-RHINE-2231.");
    let note = derive(&s, &agent, "vendors", &[&fact], "Rhine GmbH pays to ACCT-RHINE-2231");
    let before = lineage(&s, &agent, &note);
    assert_eq!((before["affected"].as_bool(), before["record"]["summary"]["revoked"].as_bool()), (Some(false), Some(false)), "{before}");

    let r = s.post(&format!("/v1/memories/{fact}/revoke"), Some(&user), &json!({"reason": "account closed"}));
    assert_eq!(r.status, 200, "{}", r.text);

    // The engine treats a memory with a revoked ancestor as unreadable: the revoked parent is a
    // 404 for every principal; the child, still in their scope, is a 403 `withheld` naming the
    // revoked ancestor, on its lineage view as on a read (issue 34.8: it was a 404).
    for key in [&agent, &user] {
        s.get(&format!("/v1/memories/{fact}/lineage"), Some(key)).problem(404, "not_found");
        s.get(&format!("/v1/memories/{fact}"), Some(key)).problem(404, "not_found");
        for path in [format!("/v1/memories/{note}/lineage"), format!("/v1/memories/{note}")] {
            let p = s.get(&path, Some(key)).problem(403, "withheld");
            assert_eq!((p["withheld"]["layer"].as_str(), p["withheld"]["rule"].as_str()), (Some("lineage"), Some("revoked_ancestor")), "{p}");
        }
    }

    // The audit trail keeps both records and shows the child affected by the revoked parent.
    let trail = s.get("/v1/lineage/export", Some(&user)).json();
    let rec = |id: &str| trail["records"].as_array().unwrap().iter().find(|r| r["id"] == id).cloned().unwrap_or_else(|| panic!("no record {id}: {trail}"));
    let child = rec(&note);
    assert_eq!(child["summary"]["revoked"], true, "{child}");
    assert!(child["summary"]["affected"].to_string().contains(&fact), "the revoked parent is named as the cause: {child}");
    assert_eq!(rec(&fact)["scope"]["visibility"], "revoked", "{trail}");
    let invalidated = trail["edges"].as_array().unwrap().iter().any(|e| e["kind"] == "invalidated_by" && e.to_string().contains(&note));
    assert!(invalidated, "no invalidated_by edge for the child: {}", trail["edges"]);

    let prov = s.get("/v1/lineage/export?format=prov", Some(&user)).json();
    let entity = prov["entity"].as_object().unwrap().iter().find(|(k, _)| k.contains(&note)).map(|(_, v)| v.clone()).unwrap();
    assert_eq!(entity["mw:affected"], true, "{entity}");
    assert!(prov["wasInvalidatedBy"].to_string().contains(&note), "{prov}");
}

#[test]
fn lineage_routes_are_in_the_openapi_document() {
    let s = TestServer::start();
    let doc = s.get("/openapi.json", None).json();
    let paths = doc["paths"].as_object().unwrap();
    assert!(paths["/v1/memories/{id}/lineage"]["get"].is_object(), "{}", doc["paths"]);
    let export = &paths["/v1/lineage/export"]["get"];
    assert!(export.is_object(), "{}", doc["paths"]);
    let format = export["parameters"].as_array().unwrap().iter().find(|p| p["name"] == "format").unwrap_or_else(|| panic!("{export}"));
    assert_eq!((format["in"].as_str(), format["required"].as_bool()), (Some("query"), Some(false)), "{format}");
    // Query structs are documented as query parameters (not path parameters).
    for p in paths["/v1/memories"]["get"]["parameters"].as_array().unwrap() {
        assert_eq!(p["in"], "query", "{p}");
    }
    assert!(format.to_string().contains("prov") && format.to_string().contains("memwarden"), "{format}");
    let schemas = &doc["components"]["schemas"];
    for f in ["s", "i", "f", "p", "v", "a", "rho"] {
        assert_eq!(schemas["PathTrustOut"]["properties"][f]["type"], "number", "{}", schemas["PathTrustOut"]);
    }
    for f in ["id", "record", "affected", "path_trust", "parents", "parents_hidden", "children", "children_hidden"] {
        assert!(schemas["LineageOut"]["properties"][f].is_object(), "LineageOut lacks {f}: {}", schemas["LineageOut"]);
    }
}

#[test]
fn erasure_over_http_deletes_every_declared_dependent_and_nothing_else() {
    let s = TestServer::start();
    let agent = s.principal_key("acme", "agent", "agent");
    let other = s.principal_key("acme", "other", "agent");
    let web = s.principal_key("acme", "web", "source");
    let user = user_key(&s, "acme", "ursula", 7);
    let page = add(&s, &web, "hr", "Leaked payroll export QWERTY-ZEBRA-771");
    let fact = add(&s, &user, "hr", "Payroll runs on the 25th");
    let only = derive(&s, &agent, "hr", &[&page], "Export mentions QWERTY-ZEBRA-771");
    let both = derive(&s, &agent, "hr", &[&page, &fact], "Payroll on the 25th; an export leaked");
    // Neither owner nor user: refused; another tenant: not found; a bad id: 400.
    assert_eq!(s.delete(&format!("/v1/memories/{page}"), Some(&other)).status, 403);
    let foreign = s.principal_key("globex", "agent", "agent");
    assert_eq!(s.delete(&format!("/v1/memories/{page}"), Some(&foreign)).status, 404);
    assert_eq!(s.delete("/v1/memories/not-an-id", Some(&user)).status, 400);
    let r = s.delete(&format!("/v1/memories/{page}"), Some(&user));
    assert_eq!(r.status, 200, "{}", r.text);
    let v = r.json();
    let mut erased = ids(&v["erased"]);
    erased.sort_unstable();
    // Issue 33: every memory declared derived from the page goes (its text is a copy), the one
    // with another live source too; the other source stays.
    let mut want = vec![page.as_str(), only.as_str(), both.as_str()];
    want.sort_unstable();
    assert_eq!(erased, want, "{v}");
    assert!(ids(&v["survivors"]).is_empty(), "{v}");
    for id in [&page, &only, &both] {
        assert_eq!(s.get(&format!("/v1/memories/{id}"), Some(&agent)).status, 404);
        assert_eq!(s.get(&format!("/memories/{id}"), Some(&user)).status, 404);
    }
    assert_eq!(s.get(&format!("/v1/memories/{fact}"), Some(&agent)).status, 200);
    // The Mem0-style path erases too; a second erase finds nothing.
    assert_eq!(s.delete(&format!("/memories/{fact}"), Some(&user)).status, 200);
    assert_eq!(s.delete(&format!("/memories/{fact}"), Some(&user)).status, 404);
    let audit = s.get("/v1/audit/verify", Some(&user));
    assert_eq!(audit.status, 200, "{}", audit.text);
}

#[test]
fn feedback_over_http_needs_the_lifecycle_layer_and_moves_guard_state() {
    // Layer off (the authority preset): 409 layer_off.
    let s = TestServer::start_engine(
        memwarden_engine::EngineConfig { embedder: common::engine_config().embedder, ..memwarden_engine::EngineConfig::for_preset(memwarden_engine::Preset::Authority).unwrap() },
        |c| c,
    );
    let agent = s.principal_key("acme", "agent", "agent");
    let id = add(&s, &agent, "notes", "Parse the date column as ISO-8601, then sort.");
    s.post("/v1/feedback", Some(&agent), &json!({"used": [id], "success": true})).problem(409, "layer_off");
    drop(s);
    // Layer on.
    let cfg = memwarden_engine::EngineConfig {
        lifecycle: Some(std::sync::Arc::new(memwarden_lifecycle::RiskScorer::with_defaults().unwrap())),
        ..common::engine_config()
    };
    let s = TestServer::start_engine(cfg, |c| c);
    let agent = s.principal_key("acme", "agent", "agent");
    let r = s.post("/v1/memories", Some(&agent), &json!({"namespace": "notes", "content": "Parse the date column as ISO-8601, then sort.", "route": "post_task_experience"}));
    assert_eq!(r.status, 201, "{}", r.text);
    let id = r.json()["item"]["id"].as_str().unwrap().to_owned();
    // Regression (issue 19 item 7): the writer's own success reports change nothing.
    let r = s.post("/v1/feedback", Some(&agent), &json!({"used": [id], "success": true}));
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json()["updated"], json!([]), "a writer cannot vouch for itself");
    // Another agent that used it: its report moves the guard state.
    let peer = s.principal_key("acme", "peer", "agent");
    let r = s.post("/v1/feedback", Some(&peer), &json!({"used": [id], "success": true}));
    assert_eq!(r.status, 200, "{}", r.text);
    let v = r.json();
    assert_eq!(v["updated"][0]["id"], id.as_str());
    assert_eq!(v["updated"][0]["successes"], 1);
    s.post("/v1/feedback", Some(&agent), &json!({"used": [], "success": true})).problem(400, "invalid_input");
    s.post("/v1/feedback", Some(&agent), &json!({"used": ["0".repeat(32)], "success": false})).problem(404, "not_found");
    // A credential is refused by the write gate, without echoing it.
    let r = s.post("/v1/memories", Some(&agent), &json!({"namespace": "notes", "content": "token AKIAIOSFODNN7EXAMPLE"}));
    let p = r.problem(422, "refused");
    assert!(!p.to_string().contains("AKIAIOSFODNN7EXAMPLE"), "{p}");
}
