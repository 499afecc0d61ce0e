//! MCP tool profiles (issue 39 item 3): every tool of both profiles is annotated and has an output
//! schema; the `mem0` profile (`--tools mem0`, `mcp_tools = "mem0"`) serves Mem0's MCP tool names
//! and argument shapes over the same engine calls, as the authenticated caller. Driven with the
//! official `mcp` Python SDK (tests/mcp_mem0.py); skipped, loudly, only when `python3 -c "import
//! mcp"` fails (`pip install -r tests/requirements.txt`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod common;

use common::{TestServer, python_has};
use memwarden_core::prelude::*;
use memwarden_engine::Engine;
use memwarden_server::MemwardenMcp;
use memwarden_server::mcp::ToolProfile;
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;

fn skip() -> bool {
    if python_has("mcp") {
        return false;
    }
    assert!(std::env::var_os("MEMWARDEN_REQUIRE_PYTHON").is_none(), "python3 with the `mcp` package is required here");
    eprintln!("\n!!! SKIPPED: MCP profile test needs the Python `mcp` package:");
    eprintln!("!!!   pip install -r crates/memwarden-server/tests/requirements.txt\n");
    true
}

fn run_mem0_client(args: &[&str]) -> Value {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests").join("mcp_mem0.py");
    let out = Command::new("python3").arg(script).args(args).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let last = stdout.lines().last().unwrap_or("");
    let report: Value = serde_json::from_str(last).unwrap_or_else(|_| panic!("client printed no report.\nstdout:\n{stdout}\nstderr:\n{stderr}"));
    assert!(out.status.success() && report["ok"] == true, "mem0 MCP client checks failed: {report}\nstderr:\n{stderr}");
    eprintln!("mem0 MCP client report: {report}");
    report
}

fn principal(tenant: &TenantId, id: &str) -> Principal {
    Principal { id: PrincipalId::new(id).unwrap(), tenant: tenant.clone(), kind: PrincipalKind::Agent, domain: None, allow_listed: false, public_key: None, action: None }
}

/// A memory of `who` that only `who` may read.
fn private_memory(engine: &Engine, tenant: &TenantId, who: &str, text: &str) -> ItemId {
    let actor = engine.authenticate(tenant, &PrincipalId::new(who).unwrap()).unwrap();
    let mut req = WriteRequest::new(Namespace::new("default").unwrap(), text, Route::Direct);
    req.readers = Some(BTreeSet::from([PrincipalId::new(who).unwrap()]));
    engine.add(&actor, req).unwrap().0.id()
}

#[test]
fn every_tool_of_every_profile_is_annotated_and_has_an_output_schema() {
    let dir = tempfile::tempdir().unwrap();
    let engine = Arc::new(Engine::open(dir.path(), common::engine_config()).unwrap());
    for profile in [ToolProfile::Native, ToolProfile::Mem0, ToolProfile::Graph] {
        let tools = MemwardenMcp::with_profile(Arc::clone(&engine), None, profile).tools();
        assert!(tools.len() >= 7, "{profile:?}: {} tools", tools.len());
        for t in tools {
            let a = t.annotations.as_ref().unwrap_or_else(|| panic!("{profile:?} {}: no annotations", t.name));
            assert!(a.read_only_hint.is_some() && a.destructive_hint.is_some() && a.idempotent_hint.is_some(), "{}: {a:?}", t.name);
            assert_eq!(a.open_world_hint, Some(false), "{}", t.name);
            let out = Value::Object(t.output_schema.as_deref().cloned().unwrap_or_else(|| panic!("{profile:?} {}: no output schema", t.name)));
            assert_eq!(out["type"], "object", "{}: {out}", t.name);
            assert!(out["properties"].as_object().is_some_and(|p| !p.is_empty()), "{}: {out}", t.name);
            assert!(!out.to_string().contains("#/components/"), "{}: a reference outside the schema: {out}", t.name);
        }
    }
}

#[test]
fn mcp_mem0_profile_over_stdio_with_the_python_sdk() {
    if skip() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (acme, globex) = (TenantId::new("acme").unwrap(), TenantId::new("globex").unwrap());
    let foreign = {
        let engine = Engine::open(dir.path(), common::engine_config()).unwrap();
        for (t, id) in [(&acme, "agent"), (&acme, "bob"), (&globex, "agent")] {
            engine.register_principal(principal(t, id)).unwrap();
        }
        [private_memory(&engine, &acme, "bob", "BOB-SECRET: pay ACCT-BOB-1"), private_memory(&engine, &globex, "agent", "BOB-SECRET: globex payee")]
    };
    let ids = foreign.iter().map(ToString::to_string).collect::<Vec<_>>().join(",");
    let bin = env!("CARGO_BIN_EXE_memwarden-mcp-stdio");
    let report = run_mem0_client(&["stdio", "--bin", bin, "--data", dir.path().to_str().unwrap(), "--tenant", "acme", "--principal", "agent", "--foreign", &ids]);
    assert_eq!(report["seen"]["added_origin"], "agent");
    assert_eq!(report["seen"]["round_trip"], true);
    // The foreign memories are intact, and every write went through the verified log.
    let engine = Engine::open(dir.path(), common::engine_config()).unwrap();
    let bob = engine.authenticate(&acme, &PrincipalId::new("bob").unwrap()).unwrap();
    assert_eq!(engine.get(&bob, &foreign[0]).unwrap().content(), "BOB-SECRET: pay ACCT-BOB-1");
    assert!(engine.verify_log().unwrap().is_ok());
}

#[test]
fn mcp_mem0_profile_over_streamable_http_with_the_python_sdk() {
    if skip() {
        return;
    }
    let s = TestServer::start_with(|c| memwarden_server::ServeConfig { mcp_tools: ToolProfile::Mem0, ..c });
    let agent = s.principal_key("acme", "agent", "agent");
    let bob = s.principal_key("acme", "bob", "agent");
    let other = s.principal_key("globex", "agent", "agent");
    let mut foreign = Vec::new();
    for (key, text) in [(&bob, "BOB-SECRET: pay ACCT-BOB-1"), (&other, "BOB-SECRET: globex payee")] {
        let r = s.post("/v1/memories", Some(key), &json!({"namespace": "default", "content": text, "readers": []}));
        assert_eq!(r.status, 201, "{}", r.text);
        foreign.push(r.json()["item"]["id"].as_str().unwrap().to_owned());
    }
    let url = format!("{}/mcp", s.base);
    let report = run_mem0_client(&["http", "--url", &url, "--key", &agent, "--principal", "agent", "--foreign", &foreign.join(",")]);
    assert_eq!(report["seen"]["round_trip"], true);
    let r = s.get(&format!("/v1/memories/{}", foreign[0]), Some(&bob));
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json()["content"], "BOB-SECRET: pay ACCT-BOB-1");
    assert_eq!(s.get("/v1/audit/verify", Some(&agent)).json()["ok"], true);
}

/// The `graph` profile (issue 39.3) with the official client over streamable HTTP: the reference
/// memory server's tools answer as it does, in the provenance graph (deleting an entity erases
/// its observations and relations, which derive from it), and the lies are refused.
#[test]
fn mcp_graph_profile_over_streamable_http_with_the_python_sdk() {
    if skip() {
        return;
    }
    let s = TestServer::start_with(|c| memwarden_server::ServeConfig { mcp_tools: ToolProfile::Graph, ..c });
    let agent = s.principal_key("acme", "agent", "agent");
    let bob = s.principal_key("acme", "bob", "agent");
    let inbox = s.principal_key("acme", "inbox", "source");
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests").join("mcp_graph.py");
    let url = format!("{}/mcp", s.base);
    let out = Command::new("python3").arg(script).args(["--url", &url, "--key", &agent, "--bob-key", &bob, "--source-key", &inbox]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let report: Value = serde_json::from_str(stdout.lines().last().unwrap_or("")).unwrap_or_else(|_| {
        panic!("client printed no report.\nstdout:\n{stdout}\nstderr:\n{}", String::from_utf8_lossy(&out.stderr))
    });
    assert!(out.status.success() && report["ok"] == true, "graph MCP client checks failed: {report}");
    eprintln!("graph MCP client report: {report}");
    assert_eq!(report["seen"]["round_trip"], true);
    assert_eq!(report["seen"]["source_label"], "untrusted");
    // Every entity, observation and relation went through the verified log.
    assert_eq!(s.get("/v1/audit/verify", Some(&agent)).json()["ok"], true);
}
