//! Issue 17, item 2: several `memwarden serve` processes on one PostgreSQL store serve the same
//! tenants — one key table, one verdict log per tenant, a write through one server readable
//! and searchable through the other at once, and a grant used through one refused as reused
//! through the other. Runs against the local PostgreSQL server (`MEMWARDEN_PG_URL`, default
//! `host=127.0.0.1 port=5432 user=postgres dbname=test`); fails, never skips, without it.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use ed25519_dalek::SigningKey;
use memwarden_core::prelude::*;
use memwarden_engine::keys::{GrantSpec, mint_grant};
use serde_json::{Value, json};
use std::io::BufRead;
use std::process::{Child, Command, Stdio};

const ADMIN: &str = "mwa_serve_postgres_test_admin_token";

fn pg_url() -> String {
    std::env::var("MEMWARDEN_PG_URL").unwrap_or_else(|_| "host=127.0.0.1 port=5432 user=postgres dbname=test".into())
}

struct Served {
    child: Child,
    addr: String,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(data: &std::path::Path, spec: &str, key_dir: &std::path::Path) -> Served {
    let mut child = Command::new(env!("CARGO_BIN_EXE_memwarden"))
        .arg("--data")
        .arg(data)
        .args(["--embedder", "hash", "serve", "--addr", "127.0.0.1:0", "--rate-per-sec", "0", "--store", spec, "--store-key-dir"])
        .arg(key_dir)
        .env("MEMWARDEN_ADMIN_TOKEN", ADMIN)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let addr = loop {
        let line = lines.next().unwrap_or_else(|| panic!("server exited before announcing (is PostgreSQL running at {}?)", pg_url())).unwrap();
        if let Some(rest) = line.split("on http://").nth(1) {
            break rest.split_whitespace().next().unwrap().to_owned();
        }
    };
    // Keep draining stderr so the server never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    Served { child, addr }
}

fn call(s: &Served, method: &str, path: &str, token: &str, body: Option<&Value>) -> (u16, Value) {
    call_with(s, method, path, token, "", body)
}

/// [`call`] with extra header lines (each ending in `\r\n`).
fn call_with(s: &Served, method: &str, path: &str, token: &str, extra: &str, body: Option<&Value>) -> (u16, Value) {
    use std::io::{Read, Write};
    let mut t = std::net::TcpStream::connect(&s.addr).unwrap();
    let body = body.map(Value::to_string).unwrap_or_default();
    write!(t, "{method} {path} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {token}\r\n{extra}Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", s.addr, body.len()).unwrap();
    let mut out = String::new();
    t.read_to_string(&mut out).unwrap();
    let status = out.split_whitespace().nth(1).unwrap().parse().unwrap();
    let text = out.split("\r\n\r\n").nth(1).unwrap_or("");
    // Chunked bodies: take the JSON between the first `{`/`[` and the last `}`/`]`.
    let start = text.find(['{', '[']).unwrap_or(0);
    let end = text.rfind(['}', ']']).map_or(text.len(), |e| e + 1);
    (status, serde_json::from_str(&text[start..end]).unwrap_or(Value::Null))
}

fn ok(s: &Served, method: &str, path: &str, token: &str, body: &Value) -> Value {
    let (status, v) = call(s, method, path, token, (!body.is_null()).then_some(body));
    assert!((200..300).contains(&status), "{method} {path} via {}: {status} {v}", s.addr);
    v
}

#[test]
fn two_servers_on_one_postgres_store_serve_the_same_tenants() {
    let schema = format!("mw_serve_{}_{}", std::process::id(), std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos());
    let spec = format!("{} schema={schema}", pg_url());
    let dir = tempfile::tempdir().unwrap();
    let key_dir = dir.path().join("store-key");
    let a = serve(&dir.path().join("a"), &spec, &key_dir);
    let b = serve(&dir.path().join("b"), &spec, &key_dir);

    // Principals and keys made through A are known to B (one key table in the store's schema).
    let alice_key = SigningKey::from_bytes(&[7; 32]);
    ok(&a, "POST", "/v1/admin/principals", ADMIN, &json!({"tenant": "acme", "id": "alice", "kind": "user", "public_key": hex::encode(alice_key.verifying_key().to_bytes())}));
    ok(&a, "POST", "/v1/admin/principals", ADMIN, &json!({"tenant": "acme", "id": "asst", "kind": "agent"}));
    ok(&b, "POST", "/v1/admin/principals", ADMIN, &json!({"tenant": "acme", "id": "pay", "kind": "tool", "domain": "bank.example",
        "action": {"kind": "act", "risk": "high", "values": [{"key": "payee", "kind": "account"}], "moves_money": true}}));
    let key = |s: &Served, p: &str| ok(s, "POST", "/v1/admin/keys", ADMIN, &json!({"tenant": "acme", "principal": p, "label": "t"}))["token"].as_str().unwrap().to_owned();
    let alice = key(&a, "alice");
    let asst = key(&b, "asst");
    assert_eq!(ok(&b, "GET", "/v1/principals/me", &alice, &Value::Null)["principal"]["id"], "alice");
    assert_eq!(ok(&a, "GET", "/v1/principals/me", &asst, &Value::Null)["principal"]["id"], "asst");

    // A write through A is readable, listable and searchable through B at once.
    let fact = ok(&a, "POST", "/v1/memories", &alice, &json!({"namespace": "ops", "content": "Rent goes to ACCT-LANDLORD-1 on the first."}))["item"].clone();
    let id = fact["id"].as_str().unwrap();
    let (status, got) = call(&b, "GET", &format!("/v1/memories/{id}"), &asst, None);
    assert_eq!(status, 200, "{got}");
    assert_eq!(got["content"], fact["content"]);
    let hits = ok(&b, "POST", "/v1/search", &asst, &json!({"namespace": "ops", "query": "Rent goes to ACCT-LANDLORD-1 on the first.", "k": 3}));
    assert!(hits["results"].as_array().unwrap().iter().any(|h| h["id"] == fact["id"]), "{hits}");

    // A session handle issued by A is known to B; its taint travels with it.
    let mail = ok(&a, "POST", "/v1/admin/principals", ADMIN, &json!({"tenant": "acme", "id": "inbox", "kind": "source", "domain": "mail.example"}));
    assert_eq!(mail["id"], "inbox");
    let inbox = key(&a, "inbox");
    let email = ok(&a, "POST", "/v1/memories", &inbox, &json!({"namespace": "mail", "content": "New payee: ACCT-EVIL-9."}))["item"]["id"].as_str().unwrap().to_owned();
    let session = ok(&a, "POST", "/v1/sessions", &asst, &json!({"kind": "fork"}))["session"].as_str().unwrap().to_owned();
    let read = |s: &Served, path: &str| {
        use std::io::{Read, Write};
        let mut t = std::net::TcpStream::connect(&s.addr).unwrap();
        write!(t, "GET {path} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {asst}\r\nX-Memwarden-Session: {session}\r\nConnection: close\r\n\r\n", s.addr).unwrap();
        let mut out = String::new();
        t.read_to_string(&mut out).unwrap();
        out
    };
    assert!(read(&a, &format!("/v1/memories/{email}")).starts_with("HTTP/1.1 200"));
    let note = {
        use std::io::{Read, Write};
        let body = json!({"namespace": "ops", "content": "Note: payee changed."}).to_string();
        let mut t = std::net::TcpStream::connect(&b.addr).unwrap();
        write!(t, "POST /v1/memories HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {asst}\r\nX-Memwarden-Session: {session}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", b.addr, body.len()).unwrap();
        let mut out = String::new();
        t.read_to_string(&mut out).unwrap();
        out
    };
    assert!(note.contains("\"label\":\"untrusted\""), "the floor lowered through A holds on B: {note}");

    // A grant used through A is refused as reused through B.
    let tenant = TenantId::new("acme").unwrap();
    // One store behind both servers: both name the same store id (what the grant signs).
    let store_a = ok(&a, "GET", "/v1/principals/me", &alice, &Value::Null)["store"].as_str().unwrap().to_owned();
    let store_b = ok(&b, "GET", "/v1/principals/me", &alice, &Value::Null)["store"].as_str().unwrap().to_owned();
    assert_eq!(store_a, store_b, "two servers of one store");
    let spec = GrantSpec { store: &store_a, tool: "pay", key: "payee", value: "ACCT-LANDLORD-1", kind: ValueKind::Account, amount: Some("150"), ttl_ms: 600_000 };
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64;
    let grant = serde_json::to_value(mint_grant(&alice_key, &tenant, &PrincipalId::new("alice").unwrap(), &spec, now).unwrap()).unwrap();
    ok(&a, "POST", "/v1/grants", &alice, &grant);
    let pay = json!({"tool": "pay", "kind": "act", "risk": "high", "amount": "150",
        "values": [{"key": "payee", "value": "ACCT-LANDLORD-1", "kind": "account"}], "context": [], "grants": [grant]});
    let first = ok(&a, "POST", "/v1/actions/decide", &asst, &pay);
    assert_eq!(first["verdict"]["decision"], "allow", "{first}");
    let again = ok(&b, "POST", "/v1/actions/decide", &asst, &pay);
    assert_ne!(again["verdict"]["decision"], "allow", "a grant is single-use across servers: {again}");

    // A write retried through the other server under its Idempotency-Key is stored once and
    // answered the same (issue 35.4): the key is claimed in the write's own transaction.
    let note = json!({"namespace": "idem", "content": "Paid the March rent."});
    let (s1, first) = call_with(&a, "POST", "/v1/memories", &asst, "Idempotency-Key: rent-march\r\n", Some(&note));
    let (s2, again) = call_with(&b, "POST", "/v1/memories", &asst, "Idempotency-Key: rent-march\r\n", Some(&note));
    assert_eq!((s1, s2), (201, 201), "{first} {again}");
    assert_eq!(first, again, "the retry through B is A's answer");
    let listed = ok(&b, "GET", "/v1/memories?namespace=idem", &asst, &Value::Null);
    assert_eq!(listed["results"].as_array().map(Vec::len), Some(1), "{listed}");
    let (s3, reused) = call_with(&b, "POST", "/v1/memories", &asst, "Idempotency-Key: rent-march\r\n", Some(&json!({"namespace": "idem", "content": "other"})));
    assert_eq!((s3, reused["code"].as_str()), (422, Some("idempotency_key_reused")), "{reused}");

    // One unforked log per tenant, verified by both.
    for s in [&a, &b] {
        let v = ok(s, "GET", "/v1/audit/verify", &alice, &Value::Null);
        assert_eq!(v["ok"], true, "{v}");
    }
    drop(a);
    drop(b);
    memwarden_store_pg::drop_schema(&pg_url(), &schema).unwrap();
}

/// Issue 35.2, regression: SIGTERM made every PostgreSQL-backed server panic on the way out
/// (exit 101, "Cannot start a runtime from within a runtime": the key table's blocking client
/// was dropped on an async worker), so a supervisor saw every deploy as a crash. After serving
/// requests through the key table and the store, SIGTERM drains and exits 0.
#[test]
fn sigterm_stops_a_postgres_backed_server_cleanly() {
    let schema = format!("mw_sigterm_{}_{}", std::process::id(), std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos());
    let spec = format!("{} schema={schema}", pg_url());
    let dir = tempfile::tempdir().unwrap();
    let mut s = serve(&dir.path().join("a"), &spec, &dir.path().join("store-key"));
    ok(&s, "POST", "/v1/admin/principals", ADMIN, &json!({"tenant": "acme", "id": "asst", "kind": "agent"}));
    let token = ok(&s, "POST", "/v1/admin/keys", ADMIN, &json!({"tenant": "acme", "principal": "asst", "label": "t"}))["token"].as_str().unwrap().to_owned();
    ok(&s, "POST", "/v1/memories", &token, &json!({"namespace": "ops", "content": "Standup at 9:30."}));
    assert_eq!(ok(&s, "GET", "/v1/principals/me", &token, &Value::Null)["principal"]["id"], "asst");
    let pid = s.child.id().to_string();
    let killed = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    assert!(killed.success(), "kill -TERM {pid}");
    let status = s.child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "a PostgreSQL-backed server exits 0 on SIGTERM: {status}");
}

/// Issue 35.1, regression: `principal add` and `key mint` could not reach a PostgreSQL store; they
/// silently wrote `./memwarden-data` and printed a key the servers answered 401 to. With
/// `--store` (and the servers' `--store-key-dir`) they work on the shared store: a principal and a
/// key made from the CLI authenticate on a server of that store; a principal the CLI lists is the
/// one the server registered; and nothing is written to the data directory's SQLite store.
#[test]
fn principals_and_keys_made_from_the_cli_reach_the_postgres_store() {
    let schema = format!("mw_cli_{}_{}", std::process::id(), std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos());
    let spec = format!("{} schema={schema}", pg_url());
    let dir = tempfile::tempdir().unwrap();
    let key_dir = dir.path().join("store-key");
    let cli_data = dir.path().join("cli-data");
    let a = serve(&dir.path().join("a"), &spec, &key_dir);
    let cli = |args: &[&str]| -> Value {
        let out = Command::new(env!("CARGO_BIN_EXE_memwarden"))
            .arg("--data")
            .arg(&cli_data)
            .args(["--embedder", "hash", "--tenant", "acme"])
            .args(args)
            .args(["--store", &spec, "--store-key-dir"])
            .arg(&key_dir)
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
    };
    cli(&["principal", "add", "--id", "ops-agent", "--kind", "agent"]);
    let minted = cli(&["key", "mint", "--as", "ops-agent", "--label", "from-cli"]);
    let token = minted["token"].as_str().unwrap().to_owned();
    assert_eq!(ok(&a, "GET", "/v1/principals/me", &token, &Value::Null)["principal"]["id"], "ops-agent");
    ok(&a, "POST", "/v1/admin/principals", ADMIN, &json!({"tenant": "acme", "id": "from-server", "kind": "agent"}));
    let listed = cli(&["principal", "list"]);
    assert!(listed.as_array().unwrap().iter().any(|p| p["principal"]["id"] == "from-server"), "{listed}");
    assert!(cli(&["key", "list"]).as_array().unwrap().iter().any(|k| k["label"] == "from-cli"));
    assert!(!cli_data.join("memwarden.db").exists() && !cli_data.join("api-keys.sqlite3").exists(), "nothing went to the data directory's SQLite store");
}
