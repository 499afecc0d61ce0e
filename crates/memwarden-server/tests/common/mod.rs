//! Test harness: a real server on a loopback port (port 0), a temp data dir, the hashing embedder,
//! and a tiny blocking HTTP client.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs, dead_code)]

use ed25519_dalek::SigningKey;
use memwarden_engine::{Engine, EngineConfig};
use memwarden_server::{EmbedderChoice, ServeConfig, Server};
use serde_json::{Value, json};
use std::net::SocketAddr;
use std::sync::Arc;

pub const ADMIN: &str = "mwa_test-admin-token-0123456789abcdef";

pub struct TestServer {
    pub dir: tempfile::TempDir,
    pub base: String,
    pub addr: SocketAddr,
    pub engine: Option<Arc<Engine>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
    agent: ureq::Agent,
}

pub fn engine_config() -> EngineConfig {
    EngineConfig { embedder: Some(Arc::new(memwarden_embed::HashEmbedder::new(384))), ..EngineConfig::default() }
}

pub struct Resp {
    pub status: u16,
    pub content_type: String,
    pub headers: Vec<(String, String)>,
    pub text: String,
}

impl Resp {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.text).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.text))
    }
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
    /// Assert a problem-details response with this status and code.
    pub fn problem(&self, status: u16, code: &str) -> Value {
        assert_eq!(self.status, status, "expected {status} {code}, got {}: {}", self.status, self.text);
        assert!(self.content_type.starts_with("application/problem+json"), "content type {}", self.content_type);
        let p = self.json();
        assert_eq!(p["code"], code, "{p}");
        assert_eq!(p["status"], status);
        assert_eq!(p["type"], format!("urn:memwarden:problem:{code}"));
        assert!(p["title"].is_string() && p["detail"].is_string());
        p
    }
}

impl TestServer {
    pub fn start() -> Self {
        Self::start_with(|c| c)
    }

    pub fn start_with(f: impl FnOnce(ServeConfig) -> ServeConfig) -> Self {
        Self::start_engine(engine_config(), f)
    }

    pub fn start_engine(engine_config: EngineConfig, f: impl FnOnce(ServeConfig) -> ServeConfig) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let engine = Arc::new(Engine::open(dir.path(), engine_config).unwrap());
        let config = f(ServeConfig {
            data_dir: dir.path().to_owned(),
            addr: "127.0.0.1:0".parse().unwrap(),
            admin_token: Some(ADMIN.to_owned()),
            rate_per_sec: 0.0,
            embedder: EmbedderChoice::Hash,
            ..ServeConfig::default()
        });
        let (addr_tx, addr_rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let e2 = Arc::clone(&engine);
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
            rt.block_on(async move {
                let server = Server::bind(config, e2).await.unwrap();
                addr_tx.send(server.local_addr()).unwrap();
                server
                    .run(async move {
                        let _ = stop_rx.await;
                    })
                    .await
                    .unwrap();
            });
        });
        let addr: SocketAddr = addr_rx.recv().unwrap();
        // No pooled connections: a pooled connection the server has since closed fails the next
        // request with "peer disconnected" (seen once in CI after the MCP client's long run).
        let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).max_idle_connections(0).build().into();
        Self { dir, base: format!("http://{addr}"), addr, engine: Some(engine), stop: Some(stop_tx), thread: Some(thread), agent }
    }

    pub fn engine(&self) -> &Arc<Engine> {
        self.engine.as_ref().unwrap()
    }

    /// Stop the server (graceful) and wait for it.
    pub fn stop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
    }

    fn finish(r: Result<ureq::http::Response<ureq::Body>, ureq::Error>) -> Resp {
        let mut r = r.unwrap_or_else(|e| panic!("request failed: {e}"));
        let status = r.status().as_u16();
        let headers: Vec<(String, String)> = r.headers().iter().map(|(k, v)| (k.to_string(), v.to_str().unwrap_or("").to_owned())).collect();
        let content_type = r.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
        let text = r.body_mut().with_config().limit(64 * 1024 * 1024).read_to_string().unwrap();
        Resp { status, content_type, headers, text }
    }

    pub fn get(&self, path: &str, key: Option<&str>) -> Resp {
        let mut rq = self.agent.get(format!("{}{path}", self.base));
        if let Some(k) = key {
            rq = rq.header("Authorization", format!("Bearer {k}"));
        }
        Self::finish(rq.call())
    }

    pub fn delete(&self, path: &str, key: Option<&str>) -> Resp {
        let mut rq = self.agent.delete(format!("{}{path}", self.base));
        if let Some(k) = key {
            rq = rq.header("Authorization", format!("Bearer {k}"));
        }
        Self::finish(rq.call())
    }

    pub fn put(&self, path: &str, key: Option<&str>, body: &Value) -> Resp {
        let mut rq = self.agent.put(format!("{}{path}", self.base)).header("Content-Type", "application/json");
        if let Some(k) = key {
            rq = rq.header("Authorization", format!("Bearer {k}"));
        }
        Self::finish(rq.send(body.to_string().as_bytes()))
    }

    pub fn post(&self, path: &str, key: Option<&str>, body: &Value) -> Resp {
        self.post_raw(path, key, body.to_string().as_bytes())
    }

    /// Open a session (`POST /v1/sessions`, sent in the key's default session) of `kind`
    /// (`fork`, `planning`, `quarantine`) and return its handle.
    pub fn open_session(&self, key: &str, kind: &str) -> String {
        let r = self.post("/v1/sessions", Some(key), &serde_json::json!({"kind": kind}));
        assert_eq!(r.status, 201, "{}", r.text);
        r.json()["session"].as_str().unwrap_or_default().to_owned()
    }

    /// POST in a named session (`X-Memwarden-Session`).
    pub fn post_in(&self, session: &str, path: &str, key: &str, body: &Value) -> Resp {
        let rq = self.agent.post(format!("{}{path}", self.base)).content_type("application/json").header("Authorization", format!("Bearer {key}")).header("X-Memwarden-Session", session);
        Self::finish(rq.send(body.to_string().as_bytes()))
    }

    /// GET in a named session (`X-Memwarden-Session`).
    pub fn get_in(&self, session: &str, path: &str, key: &str) -> Resp {
        let rq = self.agent.get(format!("{}{path}", self.base)).header("Authorization", format!("Bearer {key}")).header("X-Memwarden-Session", session);
        Self::finish(rq.call())
    }

    /// A raw streamable-HTTP MCP request to `/mcp`: POST `body` (or DELETE without one), as
    /// `key`, in MCP session `session` (`Mcp-Session-Id`).
    pub fn mcp_raw(&self, key: &str, session: Option<&str>, body: Option<&Value>) -> Resp {
        let url = format!("{}/mcp", self.base);
        let auth = format!("Bearer {key}");
        match body {
            Some(b) => {
                let mut rq = self.agent.post(url).content_type("application/json").header("Accept", "application/json, text/event-stream").header("Authorization", auth);
                if let Some(s) = session {
                    rq = rq.header("Mcp-Session-Id", s);
                }
                Self::finish(rq.send(b.to_string().as_bytes()))
            }
            None => {
                let mut rq = self.agent.delete(url).header("Authorization", auth);
                if let Some(s) = session {
                    rq = rq.header("Mcp-Session-Id", s);
                }
                Self::finish(rq.call())
            }
        }
    }

    /// A request with extra headers: POST or PUT with a JSON body, or DELETE without one.
    pub fn send_with(&self, method: &str, path: &str, key: &str, headers: &[(&str, &str)], body: Option<&Value>) -> Resp {
        let url = format!("{}{path}", self.base);
        let auth = format!("Bearer {key}");
        if method == "DELETE" {
            let mut rq = self.agent.delete(url).header("Authorization", auth);
            for (k, v) in headers {
                rq = rq.header(*k, *v);
            }
            return Self::finish(rq.call());
        }
        let mut rq = if method == "PUT" { self.agent.put(url) } else { self.agent.post(url) };
        rq = rq.content_type("application/json").header("Authorization", auth);
        for (k, v) in headers {
            rq = rq.header(*k, *v);
        }
        Self::finish(rq.send(body.map(Value::to_string).unwrap_or_default().as_bytes()))
    }

    pub fn post_raw(&self, path: &str, key: Option<&str>, body: &[u8]) -> Resp {
        self.post_typed(path, key, "application/json", body)
    }

    pub fn post_typed(&self, path: &str, key: Option<&str>, content_type: &str, body: &[u8]) -> Resp {
        let mut rq = self.agent.post(format!("{}{path}", self.base)).content_type(content_type);
        if let Some(k) = key {
            rq = rq.header("Authorization", format!("Bearer {k}"));
        }
        Self::finish(rq.send(body))
    }

    /// Register a principal through the admin API.
    pub fn register(&self, tenant: &str, id: &str, kind: &str, domain: Option<&str>, allow_listed: bool, public_key: Option<&SigningKey>) {
        let mut body = json!({"tenant": tenant, "id": id, "kind": kind, "allow_listed": allow_listed});
        if let Some(d) = domain {
            body["domain"] = json!(d);
        }
        if let Some(k) = public_key {
            body["public_key"] = json!(hex::encode(k.verifying_key().to_bytes()));
        }
        let r = self.post("/v1/admin/principals", Some(ADMIN), &body);
        assert_eq!(r.status, 201, "{}", r.text);
    }

    /// Mint a key through the admin API; returns (token, key_id).
    pub fn mint(&self, tenant: &str, principal: &str) -> (String, String) {
        let r = self.post("/v1/admin/keys", Some(ADMIN), &json!({"tenant": tenant, "principal": principal, "label": "test"}));
        assert_eq!(r.status, 201, "{}", r.text);
        let v = r.json();
        (v["token"].as_str().unwrap().to_owned(), v["info"]["key_id"].as_str().unwrap().to_owned())
    }

    /// Register and mint in one go.
    pub fn principal_key(&self, tenant: &str, id: &str, kind: &str) -> String {
        self.register(tenant, id, kind, None, false, None);
        self.mint(tenant, id).0
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Whether `python3 -c "import <module>"` works.
pub fn python_has(module: &str) -> bool {
    std::process::Command::new("python3").args(["-c", &format!("import {module}")]).output().map(|o| o.status.success()).unwrap_or(false)
}
