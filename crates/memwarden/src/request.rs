//! The one mapping from the CLI's memory commands to the API.
//!
//! Each memory command becomes a [`Request`]: the request the HTTP API takes, its body in the wire
//! form of the server's request types (`memwarden_server::dto`). Both modes run that call:
//!
//! - local mode ([`Request::local`]) parses the body as strictly as the server parses a request
//!   and runs it through the server's own mapping to engine calls (`memwarden_server::ops`);
//! - remote mode ([`Request::route`]) sends it to `memwarden serve`.
//!
//! So the two modes take the same input, refuse the same bad input with the same message, and
//! print the same answer (the server's JSON).

use crate::{AddArgs, Cmd, DecideArgs, parse_value, text_arg};
use memwarden_engine::{Actor, Engine, EngineError};
use memwarden_server::ApiError;
use memwarden_server::dto::{
    AddRequest, AttestIn, DecideIn, DeriveIn, ExportFormatName, FeedbackIn, PromoteIn, RevokeIn, SearchIn, SessionIn, ToolCallIn, UpdateIn,
    WithdrawElevationIn,
};
use memwarden_server::ops;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// A memory command as an API request. Bodies are JSON in the API's wire form; ids and names
/// are checked by whoever runs the call (the server's parsers, in both modes).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Request {
    Add(Value),
    Derive(Value),
    ToolCall(Value),
    Attest(Value),
    Decide(Value),
    Get(String),
    Revoke(String, Value),
    Elevations,
    WithdrawElevation(Value),
    Poison(String),
    Verify(String),
    Promote(String, Value),
    Update(String, Value),
    OpenSession(Value),
    History(String),
    Erase(String),
    Lineage(String),
    ExportLineage { prov: bool },
    Search(Value),
    List { ns: String, limit: usize, cursor: Option<String> },
    Feedback(Value),
}

/// An HTTP method of the API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Method {
    Get,
    Post,
    Put,
    Delete,
}

/// Where a call goes over HTTP: method, path (query included) and body.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct HttpRoute<'a> {
    pub(crate) method: Method,
    pub(crate) path: String,
    pub(crate) body: Option<&'a Value>,
}

impl Request {
    /// The call a command makes, with the `--as` it names; `None` for a command that is not a
    /// plain memory call (administration, import, audit, benchmarks, ...).
    pub(crate) fn of(cmd: &Cmd) -> Result<Option<(Option<&str>, Request)>, EngineError> {
        let (actor, call) = match cmd {
            Cmd::Add(a) => (&a.actor, Request::Add(add_body(a)?)),
            Cmd::Derive { actor, ns, parents, text } => (actor, Request::Derive(json!({"namespace": ns, "parents": parents, "content": text_arg(text)?}))),
            Cmd::ToolCall { actor, tool, ns, args, inputs, output, signature } => {
                let body = json!({"tool": tool, "namespace": ns, "args": values(args)?, "inputs": inputs, "output": text_arg(output)?, "signature": signature});
                (actor, Request::ToolCall(body))
            }
            Cmd::Attest { actor, key, value, kind, sources } => (actor, Request::Attest(json!({"key": key, "value": value, "kind": kind, "sources": sources}))),
            Cmd::Decide(d) => (&d.actor, Request::Decide(decide_body(d)?)),
            Cmd::Get { actor, id } => (actor, Request::Get(id.clone())),
            Cmd::Revoke { actor, reason, id } => (actor, Request::Revoke(id.clone(), json!({"reason": reason}))),
            Cmd::Elevations { actor } => (actor, Request::Elevations),
            Cmd::WithdrawElevation { actor, key, value, kind, reason } => {
                (actor, Request::WithdrawElevation(json!({"key": key, "value": value, "kind": kind, "reason": reason})))
            }
            Cmd::Poison { actor, id } => (actor, Request::Poison(id.clone())),
            Cmd::Verify { actor, id } => (actor, Request::Verify(id.clone())),
            Cmd::Promote { actor, readers, id } => {
                let readers = if readers.is_empty() { Value::Null } else { json!(readers) };
                (actor, Request::Promote(id.clone(), json!({"readers": readers})))
            }
            Cmd::Update { actor, id, text } => (actor, Request::Update(id.clone(), json!({"content": text_arg(text)?}))),
            Cmd::OpenSession { actor, kind } => (actor, Request::OpenSession(json!({"kind": kind}))),
            Cmd::History { actor, id } => (actor, Request::History(id.clone())),
            Cmd::Erase { actor, id } => (actor, Request::Erase(id.clone())),
            Cmd::Lineage { actor, id } => (actor, Request::Lineage(id.clone())),
            Cmd::ExportLineage { actor, prov } => (actor, Request::ExportLineage { prov: *prov }),
            Cmd::Search { actor, ns, k, min_label, query } => (actor, Request::Search(json!({"namespace": ns, "query": query, "k": k, "min_label": min_label}))),
            Cmd::List { actor, ns, limit, cursor } => (actor, Request::List { ns: ns.clone(), limit: *limit, cursor: cursor.clone() }),
            Cmd::Feedback { actor, used, outcome } => (actor, Request::Feedback(json!({"used": used, "success": outcome == "success"}))),
            _ => return Ok(None),
        };
        Ok(Some((actor.as_deref(), call)))
    }

    /// The HTTP request for the call.
    pub(crate) fn route(&self) -> HttpRoute<'_> {
        let memory = |id: &str, rest: &str| format!("/v1/memories/{}{rest}", enc(id));
        let (method, path, body) = match self {
            Request::Add(b) => (Method::Post, "/v1/memories".to_owned(), Some(b)),
            Request::Derive(b) => (Method::Post, "/v1/derive".to_owned(), Some(b)),
            Request::ToolCall(b) => (Method::Post, "/v1/tool-calls".to_owned(), Some(b)),
            Request::Attest(b) => (Method::Post, "/v1/attestations".to_owned(), Some(b)),
            Request::Decide(b) => (Method::Post, "/v1/actions/decide".to_owned(), Some(b)),
            Request::Get(id) => (Method::Get, memory(id, ""), None),
            Request::Revoke(id, b) => (Method::Post, memory(id, "/revoke"), Some(b)),
            Request::Elevations => (Method::Get, "/v1/elevations".to_owned(), None),
            Request::WithdrawElevation(b) => (Method::Post, "/v1/elevations/withdraw".to_owned(), Some(b)),
            Request::Poison(id) => (Method::Post, memory(id, "/poison"), None),
            Request::Verify(id) => (Method::Post, memory(id, "/verify"), None),
            Request::Promote(id, b) => (Method::Post, memory(id, "/promote"), Some(b)),
            Request::Update(id, b) => (Method::Put, memory(id, ""), Some(b)),
            Request::OpenSession(b) => (Method::Post, "/v1/sessions".to_owned(), Some(b)),
            Request::History(id) => (Method::Get, memory(id, "/history"), None),
            Request::Erase(id) => (Method::Delete, memory(id, ""), None),
            Request::Lineage(id) => (Method::Get, memory(id, "/lineage"), None),
            Request::ExportLineage { prov } => (Method::Get, format!("/v1/lineage/export?format={}", if *prov { "prov" } else { "memwarden" }), None),
            Request::Search(b) => (Method::Post, "/v1/search".to_owned(), Some(b)),
            Request::List { ns, limit, cursor } => {
                let after = cursor.as_deref().map_or_else(String::new, |c| format!("&cursor={}", enc(c)));
                (Method::Get, format!("/v1/memories?namespace={}&limit={limit}{after}", enc(ns)), None)
            }
            Request::Feedback(b) => (Method::Post, "/v1/feedback".to_owned(), Some(b)),
        };
        debug_assert!(path.starts_with("/v1/"), "every call goes to the versioned API");
        debug_assert!(body.is_none() || method != Method::Get, "a GET has no body");
        HttpRoute { method, path, body }
    }

    /// Run the call on a local engine as `actor`, through the server's mapping to engine calls;
    /// the answer is the JSON the server would send.
    pub(crate) fn local(self, engine: &Engine, actor: &Actor) -> Result<Value, ApiError> {
        match self {
            Request::Add(b) => match ops::add_request(b)? {
                AddRequest::One(one) => out(ops::add(engine, actor, one)),
                AddRequest::Many(_) => Err(ApiError::invalid("one memory per `add`; `import` adds many")),
            },
            Request::Derive(b) => out(ops::derive(engine, actor, body::<DeriveIn>(&b)?)),
            Request::ToolCall(b) => out(ops::tool_call(engine, actor, body::<ToolCallIn>(&b)?)),
            Request::Attest(b) => out(ops::attest(engine, actor, body::<AttestIn>(&b)?)),
            Request::Decide(b) => out(ops::decide(engine, actor, body::<DecideIn>(&b)?)),
            Request::Get(id) => out(ops::get(engine, actor, &id)),
            Request::Revoke(id, b) => out(ops::revoke(engine, actor, &id, body::<RevokeIn>(&b)?)),
            Request::Elevations => out(ops::elevations(engine, actor, None, None)),
            Request::WithdrawElevation(b) => out(ops::withdraw_elevation(engine, actor, body::<WithdrawElevationIn>(&b)?)),
            Request::Poison(id) => out(ops::flag_poisoned(engine, actor, &id)),
            Request::Verify(id) => out(ops::verify_memory(engine, actor, &id)),
            Request::Promote(id, b) => out(ops::promote(engine, actor, &id, body::<PromoteIn>(&b)?)),
            Request::Update(id, b) => out(ops::update(engine, actor, &id, body::<UpdateIn>(&b)?.content)),
            Request::OpenSession(b) => out(ops::open_session(engine, actor, body::<SessionIn>(&b)?)),
            Request::History(id) => out(ops::history(engine, actor, &id, None, None)),
            Request::Erase(id) => out(ops::erase(engine, actor, &id)),
            Request::Lineage(id) => out(ops::lineage(engine, actor, &id)),
            Request::ExportLineage { prov } => ops::export_lineage(engine, actor, if prov { ExportFormatName::Prov } else { ExportFormatName::Memwarden }),
            Request::Search(b) => out(ops::search(engine, actor, body::<SearchIn>(&b)?)),
            Request::List { ns, limit, cursor } => out(ops::list(engine, actor, &ns, limit, cursor.as_deref())),
            Request::Feedback(b) => out(ops::feedback(engine, actor, body::<FeedbackIn>(&b)?)),
        }
    }
}

/// Memories per `import` request (the server's default batch limit).
pub(crate) const IMPORT_BATCH_COUNT: usize = 100;

/// `import` in both modes: the file's lines as `POST /v1/memories` batches of
/// [`IMPORT_BATCH_COUNT`], each sent by `post` (local: [`Request::add_many_local`]; remote: HTTP).
/// The answer counts what was imported and names each refused line with the server's reason.
pub(crate) fn import<E>(lines: &[crate::ImportLine], ns: &str, route: Option<&str>, post: &mut dyn FnMut(Value) -> Result<Value, E>) -> Result<Value, E> {
    let total = lines.len() as u64;
    let bar = crate::ProgressBar::new(0);
    let (mut imported, mut refused, mut done) = (0usize, Vec::new(), 0u64);
    for chunk in lines.chunks(IMPORT_BATCH_COUNT) {
        let memories: Vec<Value> = chunk
            .iter()
            .map(|(_, content, meta)| {
                let mut m = json!({"namespace": ns, "content": content, "metadata": meta});
                if let Some(rt) = route {
                    m["route"] = json!(rt);
                }
                m
            })
            .collect();
        let out = post(json!({"memories": memories}))?;
        let results = out["results"].as_array().cloned().unwrap_or_default();
        debug_assert!(results.len() <= chunk.len(), "one result per memory sent");
        for ((line, _, _), res) in chunk.iter().zip(results) {
            if res["ok"].as_bool() == Some(true) {
                imported += 1;
            } else {
                refused.push(json!({"line": line, "error": res["error"]["detail"]}));
            }
        }
        done += chunk.len() as u64;
        bar.update("importing", done, total);
    }
    debug_assert!(imported + refused.len() <= lines.len());
    Ok(json!({"imported": imported, "refused": refused}))
}

impl Request {
    /// A batch `POST /v1/memories` body run on a local engine, as the server runs it.
    pub(crate) fn add_many_local(engine: &Engine, actor: &Actor, body: Value) -> Result<Value, ApiError> {
        match ops::add_request(body)? {
            AddRequest::Many(many) => out(ops::add_many(engine, actor, many.memories, IMPORT_BATCH_COUNT)),
            AddRequest::One(_) => Err(ApiError::invalid("expected a batch")),
        }
    }
}

/// A request body parsed as the server parses one (strict JSON, the same message).
fn body<T: DeserializeOwned>(b: &Value) -> Result<T, ApiError> {
    memwarden_server::strict::from_str::<T>(&b.to_string()).map_err(|e| ApiError::invalid(format!("invalid JSON body: {e}")))
}

/// An answer as the JSON the server sends.
fn out<T: serde::Serialize>(r: Result<T, ApiError>) -> Result<Value, ApiError> {
    serde_json::to_value(r?).map_err(ApiError::internal)
}

/// Percent-encode a path segment or query value (RFC 3986 unreserved characters pass).
pub(crate) fn enc(s: &str) -> String {
    use std::fmt::Write;
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    debug_assert!(out.len() >= s.len());
    out
}

/// `key=value[:kind][@src1,src2]` values as the API's `ValueIn`s.
fn values(specs: &[String]) -> Result<Vec<Value>, EngineError> {
    specs
        .iter()
        .map(|s| {
            let (key, value, kind, sources) = parse_value(s)?;
            Ok(json!({"key": key, "value": value, "kind": kind, "sources": sources}))
        })
        .collect()
}

fn add_body(a: &AddArgs) -> Result<Value, EngineError> {
    let mut metadata = serde_json::Map::new();
    for m in &a.meta {
        let (k, v) = m.split_once('=').ok_or_else(|| crate::fail(format!("metadata must be k=v, got {m:?}")))?;
        metadata.insert(k.to_owned(), Value::String(v.to_owned()));
    }
    let mut body = json!({
        "namespace": a.ns,
        "content": text_arg(&a.text)?,
        "parents": a.parents.iter().map(|id| json!({"id": id, "kind": "derived_from"})).collect::<Vec<_>>(),
        "metadata": metadata,
    });
    if let Some(r) = &a.route {
        body["route"] = json!(r);
    }
    if !a.readers.is_empty() {
        body["readers"] = json!(a.readers);
    }
    Ok(body)
}

fn decide_body(d: &DecideArgs) -> Result<Value, EngineError> {
    let grants = d
        .grants
        .iter()
        .map(|p| {
            let text = std::fs::read_to_string(p).map_err(|e| crate::fail(format!("{}: {e}", p.display())))?;
            memwarden_server::strict::from_str::<Value>(&text).map_err(|e| crate::fail(format!("{} is not a grant: {e}", p.display())))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut body = json!({
        "tool": d.tool,
        "kind": d.kind,
        "risk": d.risk,
        "values": values(&d.values)?,
        "context": d.context,
        "grants": grants,
    });
    if let Some(a) = &d.amount {
        body["amount"] = json!(a);
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn every_call_goes_to_a_versioned_route_and_only_writes_carry_bodies() {
        let id = "0123456789abcdef0123456789abcdef".to_owned();
        let calls = [
            Request::Get(id.clone()),
            Request::Erase(id.clone()),
            Request::Search(json!({"namespace": "n", "query": "q"})),
            Request::List { ns: "a b".into(), limit: 5, cursor: Some("c/d".into()) },
            Request::ExportLineage { prov: true },
        ];
        let routes: Vec<HttpRoute<'_>> = calls.iter().map(Request::route).collect();
        assert_eq!(routes[0].path, format!("/v1/memories/{id}"));
        assert_eq!(routes[1].method, Method::Delete);
        assert!(routes[2].body.is_some());
        assert_eq!(routes[3].path, "/v1/memories?namespace=a%20b&limit=5&cursor=c%2Fd");
        assert_eq!(routes[4].path, "/v1/lineage/export?format=prov");
    }

    #[test]
    fn a_path_segment_cannot_escape_its_route() {
        assert_eq!(enc("ab-9._~"), "ab-9._~");
        assert_eq!(enc("../admin/keys?x=1"), "..%2Fadmin%2Fkeys%3Fx%3D1");
        assert_eq!(Request::Get("../admin/keys".into()).route().path, "/v1/memories/..%2Fadmin%2Fkeys");
    }
}
