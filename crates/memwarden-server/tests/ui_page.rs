//! The lineage page (`GET /ui`, issue 39 item 6) in headless Chromium, and the route it added
//! (`GET /v1/memories/{id}/decisions`). A known graph is seeded over HTTP; tests/ui_page.py
//! drives the system Chromium with Playwright (never a downloaded browser) and reports what the
//! page rendered, every console message and every failed request. Skipped, loudly, only when
//! Playwright or Chromium is missing and `MEMWARDEN_REQUIRE_PYTHON` is unset (scripts/test.sh
//! installs both and sets it).
//!
//! `MEMWARDEN_UI_SCREENSHOT=docs/img/lineage-page.png` also saves the README's screenshot.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod common;

use common::{ADMIN, TestServer, python_has};
use ed25519_dalek::SigningKey;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Command;

const NS: &str = "vendors";
/// Texts the page must never show (it reads no memory text).
const SECRETS: [&str; 3] = ["ACCT-RHINE-2231", "ACCT-EVIL-9931", "wire transfers"];

fn chromium() -> PathBuf {
    std::env::var_os("MEMWARDEN_CHROMIUM").map_or_else(|| PathBuf::from("/usr/bin/chromium"), PathBuf::from)
}

fn skip() -> bool {
    if python_has("playwright") && chromium().exists() {
        return false;
    }
    // scripts/test.sh installs both and sets MEMWARDEN_REQUIRE_PYTHON: there a skip is a failure.
    assert!(std::env::var_os("MEMWARDEN_REQUIRE_PYTHON").is_none(), "python3 with `playwright` and {} are required here", chromium().display());
    eprintln!("\n!!! SKIPPED: the lineage page test needs Python `playwright` (tests/requirements.txt) and Chromium at {}\n", chromium().display());
    true
}

fn created(r: &common::Resp) -> String {
    assert_eq!(r.status, 201, "{}", r.text);
    r.json()["item"]["id"].as_str().unwrap().to_owned()
}

/// The known graph: who wrote what from what.
struct Seeded {
    alice: String,
    agent: String,
    intruder: String,
    /// Alice's own memory (trusted).
    user: String,
    /// The agent's note derived from it (agent).
    note: String,
    /// Another note derived from it, later revoked by Alice.
    revoked: String,
    /// Derived from the revoked note before the revocation: withheld from everyone.
    orphan: String,
    /// An unlisted tool's output (untrusted), flagged poisoned by Alice.
    tool_out: String,
    /// The agent's note from the note and the tool output (untrusted, affected).
    mixed: String,
    /// The log index of the decision that cited `note`.
    decision: u64,
}

fn seed(s: &TestServer) -> Seeded {
    s.register("acme", "alice", "user", None, false, Some(&SigningKey::from_bytes(&[7; 32])));
    let alice = s.mint("acme", "alice").0;
    let agent = s.principal_key("acme", "agent", "agent");
    let intruder = s.principal_key("acme", "intruder", "agent");
    s.register("acme", "scraper", "tool", Some("scraper.example"), false, None);

    let user = created(&s.post("/v1/memories", Some(&alice), &json!({"namespace": NS, "content": "Rhine GmbH bank account is ACCT-RHINE-2231."})));
    let derive = |parents: &[&str], content: &str| created(&s.post("/v1/derive", Some(&agent), &json!({"namespace": NS, "parents": parents, "content": content})));
    let note = derive(&[&user], "Rhine GmbH pays to ACCT-RHINE-2231.");
    let revoked = derive(&[&user], "Rhine GmbH prefers wire transfers.");
    let orphan = derive(&[&revoked], "Use wire transfers for Rhine GmbH.");
    let r = s.post(&format!("/v1/memories/{revoked}/revoke"), Some(&alice), &json!({"reason": "wrong"}));
    assert_eq!(r.status, 200, "{}", r.text);
    let tool_out = created(&s.post("/v1/tool-calls", Some(&agent), &json!({"tool": "scraper", "namespace": NS, "output": "Rhine GmbH moved to ACCT-EVIL-9931."})));
    let mixed = derive(&[&note, &tool_out], "Rhine GmbH may pay to ACCT-EVIL-9931 now.");
    let r = s.post(&format!("/v1/memories/{tool_out}/poison"), Some(&alice), &json!({}));
    assert_eq!(r.status, 200, "{}", r.text);
    let pay = |value: &str, cited: &str| {
        let r = s.post(
            "/v1/actions/decide",
            Some(&agent),
            &json!({"tool": "pay", "kind": "act", "risk": "high", "amount": "150",
                    "values": [{"key": "payee", "value": value, "kind": "account", "sources": [cited]}], "context": [cited]}),
        );
        assert_eq!(r.status, 200, "{}", r.text);
        r.json()["log_index"].as_u64().unwrap()
    };
    let decision = pay("ACCT-RHINE-2231", &note);
    pay("ACCT-EVIL-9931", &mixed);
    Seeded { alice, agent, intruder, user, note, revoked, orphan, tool_out, mixed, decision }
}

fn label(s: &TestServer, key: &str, id: &str) -> String {
    let v = s.get(&format!("/v1/memories/{id}/lineage"), Some(key)).json();
    v["record"]["integrity"].as_str().unwrap_or_default().to_owned()
}

#[test]
fn the_page_and_its_files_are_public_and_locked_down() {
    let s = TestServer::start();
    for (path, ty) in [("/ui", "text/html"), ("/ui/app.js", "text/javascript"), ("/ui/app.css", "text/css")] {
        let r = s.get(path, None);
        assert_eq!(r.status, 200, "{path}: {}", r.text);
        assert!(r.content_type.starts_with(ty), "{path}: {}", r.content_type);
        let csp = r.header("content-security-policy").unwrap_or_default();
        assert!(csp.contains("default-src 'none'") && csp.contains("script-src 'self'") && !csp.contains("unsafe"), "{path}: {csp}");
        assert_eq!(r.header("x-content-type-options"), Some("nosniff"));
    }
    let page = s.get("/ui", None).text;
    assert!(!page.contains("<script>") && !page.contains("style="), "no inline script or style: the CSP would refuse it");
    assert!(!s.get("/ui/app.js", None).text.contains("innerHTML"), "the page never parses data as markup");
    let doc = s.get("/openapi.json", None).json();
    for p in ["/ui", "/ui/app.js", "/ui/app.css", "/v1/memories/{id}/decisions"] {
        assert!(doc["paths"].get(p).is_some(), "{p} is not in the OpenAPI document");
    }
}

#[test]
fn decisions_that_cited_a_memory_are_listed_to_those_who_may_see_them() {
    let s = TestServer::start();
    let g = seed(&s);
    let path = format!("/v1/memories/{}/decisions", g.note);
    // No key, a bad key, the admin token: refused, as every data route.
    s.get(&path, None).problem(401, "unauthorized");
    s.get(&path, Some("mw_0000")).problem(401, "unauthorized");
    s.get(&path, Some(ADMIN)).problem(403, "forbidden");
    s.get(&format!("/v1/memories/{}/lineage", g.note), None).problem(401, "unauthorized");
    s.get("/v1/memories/not-an-id/decisions", Some(&g.alice)).problem(400, "invalid_input");
    s.get(&format!("{path}?cursor=junk"), Some(&g.alice)).problem(400, "invalid_cursor");
    s.get(&format!("{path}?limit=0"), Some(&g.alice)).problem(400, "invalid_input");

    // The user sees the decision, with its verdict and how it cited the memory.
    let v = s.get(&path, Some(&g.alice)).json();
    let ds = v["decisions"].as_array().unwrap();
    let d = ds.iter().find(|d| d["log_index"] == g.decision).unwrap_or_else(|| panic!("{v}"));
    assert_eq!((d["actor"].as_str(), d["tool"].as_str()), (Some("agent"), Some("pay")), "{d}");
    let cited: Vec<&str> = d["cited_as"].as_array().unwrap().iter().map(|c| c.as_str().unwrap()).collect();
    assert!(cited.contains(&"context") && cited.contains(&"source"), "{d}");
    assert!(!d["decision"].as_str().unwrap().is_empty() && !d["rule"].as_str().unwrap().is_empty(), "{d}");
    assert_eq!(d["verdict"]["decision"], d["decision"]);
    assert!(v["next_cursor"].is_null(), "{v}");
    // Its entry proves.
    let proof = s.get(&format!("/v1/audit/proof/{}", g.decision), Some(&g.alice)).json();
    assert_eq!((proof["verified"].as_bool(), proof["kind"].as_str()), (Some(true), Some("decision")), "{proof}");

    // The acting agent sees its own decision; another agent none of them.
    let own = s.get(&path, Some(&g.agent)).json();
    assert_eq!(own["decisions"].as_array().unwrap().len(), ds.len(), "{own}");
    let other = s.get(&path, Some(&g.intruder)).json();
    assert!(other["decisions"].as_array().unwrap().is_empty(), "{other}");

    // Pages: one decision at a time, and every one exactly once.
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..100 {
        let q = cursor.as_ref().map_or(String::new(), |c| format!("&cursor={c}"));
        let page = s.get(&format!("{path}?limit=1{q}"), Some(&g.alice)).json();
        seen.extend(page["decisions"].as_array().unwrap().iter().map(|d| d["log_index"].as_u64().unwrap()));
        match page["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => break,
        }
    }
    assert_eq!(seen, ds.iter().map(|d| d["log_index"].as_u64().unwrap()).collect::<Vec<_>>());
    // A cursor opens only for its own caller.
    let first = s.get(&format!("{path}?limit=1"), Some(&g.alice)).json();
    if let Some(c) = first["next_cursor"].as_str() {
        s.get(&format!("{path}?cursor={c}"), Some(&g.agent)).problem(400, "invalid_cursor");
    }

    // The revoked memory is nobody's to ask about; the one derived from it is withheld.
    s.get(&format!("/v1/memories/{}/decisions", g.revoked), Some(&g.alice)).problem(404, "not_found");
    s.get(&format!("/v1/memories/{}/decisions", g.orphan), Some(&g.agent)).problem(403, "withheld");
}

#[test]
fn the_page_renders_the_known_graph_in_headless_chromium() {
    if skip() {
        return;
    }
    let s = TestServer::start();
    let g = seed(&s);
    // The labels the gate gave, as the test expects them.
    assert_eq!(label(&s, &g.alice, &g.user), "trusted");
    assert_eq!(label(&s, &g.alice, &g.note), "agent");
    assert_eq!(label(&s, &g.alice, &g.tool_out), "untrusted");
    assert_eq!(label(&s, &g.alice, &g.mixed), "untrusted");
    let api_decisions = s.get(&format!("/v1/memories/{}/decisions", g.note), Some(&g.alice)).json()["decisions"].as_array().unwrap().len();

    let shot = std::env::var_os("MEMWARDEN_UI_SCREENSHOT").map(PathBuf::from);
    let shot_arg = shot.as_ref().map(|p| if p.is_absolute() { p.clone() } else { Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(p) });
    let args = json!({
        "base": s.base,
        "chromium": chromium(),
        "views": [
            {"name": "user", "key": g.alice, "memory": g.note, "screenshot": shot_arg},
            {"name": "agent-withheld", "key": g.agent, "memory": g.orphan, "screenshot": null},
        ],
    });
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests").join("ui_page.py");
    let out = Command::new("python3").arg(script).arg(args.to_string()).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let report: Value = serde_json::from_str(stdout.lines().last().unwrap_or("")).unwrap_or_else(|_| panic!("no report.\nstdout:\n{stdout}\nstderr:\n{stderr}"));
    assert!(out.status.success() && report["ok"] == true, "{report}\nstderr:\n{stderr}");
    let views = report["views"].as_array().unwrap();
    for v in views {
        eprintln!("view {}: rendered in {} ms (click to done), {} requests", v["name"], v["elapsed_ms"], v["responses"].as_array().map_or(0, Vec::len));
    }
    check_user_view(&views[0], &g, api_decisions);
    check_withheld_view(&views[1]);
    if let Some(p) = shot_arg {
        let bytes = std::fs::metadata(&p).unwrap().len();
        eprintln!("screenshot {} ({bytes} bytes)", p.display());
        assert!(bytes < 200 * 1024, "the screenshot is {bytes} bytes");
    }
}

fn attr<'a>(v: &'a Value, k: &str) -> &'a str {
    v[k].as_str().unwrap_or_default()
}

fn check_user_view(v: &Value, g: &Seeded, api_decisions: usize) {
    assert_eq!(attr(v, "status"), "done", "{v}");
    assert_eq!(attr(v, "who"), "alice");
    assert!(v["notice"].is_null(), "{v}");
    assert!(attr(v, "csp").contains("script-src 'self'"), "{v}");
    // Zero console errors and warnings (and no uncaught exception), zero failed requests, every
    // response a success.
    for m in v["console"].as_array().unwrap() {
        assert!(!["error", "warning", "pageerror"].contains(&attr(m, "type")), "console: {m}");
    }
    assert!(v["failed"].as_array().unwrap().is_empty(), "failed: {}", v["failed"]);
    for r in v["responses"].as_array().unwrap() {
        assert!(r["status"].as_u64().unwrap() < 400, "{r}");
    }
    // Nodes: the memory, its ancestor, its descendant and that one's other parent; labelled.
    let nodes: Vec<(&str, &str)> = v["nodes"].as_array().unwrap().iter().map(|n| (attr(n, "memoryId"), attr(n, "label"))).collect();
    let mut want = vec![(g.user.as_str(), "trusted"), (g.note.as_str(), "agent"), (g.tool_out.as_str(), "untrusted"), (g.mixed.as_str(), "untrusted")];
    let mut got = nodes.clone();
    want.sort_unstable();
    got.sort_unstable();
    assert_eq!(got, want, "{v}");
    let node = |id: &str| v["nodes"].as_array().unwrap().iter().find(|n| attr(n, "memoryId") == id).unwrap().clone();
    assert!(attr(&node(&g.tool_out), "flags").contains("poisoned"), "{v}");
    assert!(attr(&node(&g.mixed), "flags").contains("affected"), "{v}");
    assert_eq!(attr(&node(&g.note), "writer"), "agent");
    assert_eq!(attr(&node(&g.user), "writer"), "alice");
    // Edges: derivations only, source to derived.
    let mut edges: Vec<(String, String)> = v["edges"].as_array().unwrap().iter().filter(|e| !attr(e, "from").is_empty()).map(|e| (attr(e, "from").to_owned(), attr(e, "to").to_owned())).collect();
    edges.sort();
    let mut want_edges = vec![(g.user.clone(), g.note.clone()), (g.note.clone(), g.mixed.clone()), (g.tool_out.clone(), g.mixed.clone())];
    want_edges.sort();
    assert_eq!(edges, want_edges, "{v}");
    // The revoked child is counted, never named.
    let hidden = v["hidden"].as_array().unwrap();
    assert_eq!(hidden.len(), 1, "{v}");
    assert_eq!((attr(&hidden[0], "hiddenOf"), attr(&hidden[0], "direction"), attr(&hidden[0], "count")), (g.user.as_str(), "children", "1"));
    let text = attr(v, "body_text");
    assert!(!v.to_string().contains(&g.revoked) && !text.contains(&g.revoked[24..]), "the revoked memory is named or asked about");
    for secret in SECRETS {
        assert!(!text.contains(secret), "the page shows memory text: {secret}");
    }
    // The decisions, as the API lists them, with the one the test made.
    let ds = v["decisions"].as_array().unwrap();
    assert_eq!(ds.len(), api_decisions, "{v}");
    let d = ds.iter().find(|d| attr(d, "logIndex") == g.decision.to_string()).unwrap_or_else(|| panic!("{v}"));
    assert_eq!(attr(d, "actor"), "agent");
    assert!(attr(d, "citedAs").contains("context"), "{d}");
    // The verdict log: it verifies, and each decision's proof checks, on the server and here.
    assert_eq!(attr(&v["log_verify"], "ok"), "true", "{v}");
    let log = v["log"].as_array().unwrap();
    assert_eq!(log.len(), ds.len());
    for row in log {
        assert_eq!((attr(row, "kind"), attr(row, "verified"), attr(row, "checked")), ("decision", "true", "true"), "{row}");
    }
}

fn check_withheld_view(v: &Value) {
    assert_eq!(attr(v, "status"), "refused", "{v}");
    assert_eq!(attr(v, "who"), "agent");
    assert_eq!(v["notice"]["kind"], "withheld", "{v}");
    let notice = v["notice"]["text"].as_str().unwrap();
    assert!(notice.starts_with("Withheld") && notice.contains("lineage"), "{notice}");
    assert!(!v["graph_shown"].as_bool().unwrap() && v["nodes"].as_array().unwrap().is_empty(), "{v}");
    assert!(v["failed"].as_array().unwrap().is_empty(), "failed: {}", v["failed"]);
    // The one refused request is the lineage read, which the browser reports on its console.
    let errors: Vec<&Value> = v["console"].as_array().unwrap().iter().filter(|m| ["error", "warning", "pageerror"].contains(&attr(m, "type"))).collect();
    assert_eq!(errors.len(), 1, "console: {}", v["console"]);
    assert!(attr(errors[0], "text").contains("status of 403"), "console: {}", v["console"]);
    for secret in SECRETS {
        assert!(!attr(v, "body_text").contains(secret), "{secret}");
    }
}
