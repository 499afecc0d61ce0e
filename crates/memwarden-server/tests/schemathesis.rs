//! Fuzz the running server from its own OpenAPI document with schemathesis (tests/schemathesis.sh)
//! and fail on any 5xx. Slow (a minute or two), so ignored by default:
//! `cargo test -p memwarden-server --test schemathesis -- --ignored`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod common;

use common::TestServer;
use serde_json::json;
use std::process::Command;

#[test]
#[ignore = "slow; needs `pip install -r crates/memwarden-server/tests/requirements.txt`"]
fn schemathesis_finds_no_server_errors() {
    if !common::python_has("schemathesis") {
        eprintln!("\n!!! SKIPPED: schemathesis is not installed (pip install -r crates/memwarden-server/tests/requirements.txt)\n");
        return;
    }
    let s = TestServer::start();
    let key = s.principal_key("acme", "agent", "agent");
    let r = s.post("/v1/memories", Some(&key), &json!({"namespace": "default", "content": "seed memory"}));
    assert_eq!(r.status, 201);
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests").join("schemathesis.sh");
    let n = std::env::var("MEMWARDEN_SCHEMATHESIS_EXAMPLES").unwrap_or_else(|_| "25".into());
    let secs = std::env::var("MEMWARDEN_SCHEMATHESIS_SECONDS").unwrap_or_else(|_| "120".into());
    let status = Command::new("bash").arg(script).args([&s.base, &key, &n, &secs]).status().unwrap();
    assert!(status.success(), "schemathesis reported failures (see its output above)");
}
