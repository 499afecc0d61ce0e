//! Scale-out pieces of the load benchmark (issue 17): the PostgreSQL spec and schema of a run,
//! the round-robin of clients over servers, and the correctness checks reported next to the
//! numbers — every acknowledged write present exactly once, one unforked log per tenant, and
//! the single-server PostgreSQL latency against the embedded store's.

use super::server::{Client, truncate};
use super::{PhaseReport, TARGET_PG_LATENCY_RATIO};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// Whether `spec` looks like a PostgreSQL store spec: a `postgres://` / `postgresql://` URL or a
/// libpq key-value string with a `host=` or `dbname=` pair.
pub fn is_postgres_spec(spec: &str) -> bool {
    let s = spec.trim();
    s.starts_with("postgres://")
        || s.starts_with("postgresql://")
        || s.split_whitespace().any(|kv| kv.starts_with("host=") || kv.starts_with("dbname="))
}

fn is_url(spec: &str) -> bool {
    spec.starts_with("postgres://") || spec.starts_with("postgresql://")
}

/// Whether `spec` already names a schema (`?schema=` / `&schema=` in a URL, a `schema=` pair in
/// a key-value string).
pub fn spec_names_schema(spec: &str) -> bool {
    let s = spec.trim();
    if is_url(s) {
        s.split_once('?').is_some_and(|(_, q)| q.split('&').any(|kv| kv.starts_with("schema=")))
    } else {
        s.split_whitespace().any(|kv| kv.starts_with("schema="))
    }
}

/// `spec` with `schema` added the way the server's `--store` reads it: `?schema=S` (or
/// `&schema=S`) on a URL, a ` schema=S` pair on a key-value string.
pub fn spec_with_schema(spec: &str, schema: &str) -> String {
    let s = spec.trim();
    if is_url(s) {
        match s.split_once('?') {
            Some((_, "")) => format!("{s}schema={schema}"),
            Some(_) => format!("{s}&schema={schema}"),
            None => format!("{s}?schema={schema}"),
        }
    } else {
        format!("{s} schema={schema}")
    }
}

/// A fresh schema name for one run: `mw_load_<pid>_<nanos>` (lower case, a valid identifier).
pub fn fresh_schema_name(pid: u32, nanos: u128) -> String {
    format!("mw_load_{pid}_{nanos}")
}

/// The server client thread `client` talks to when `servers` share the load: round-robin.
pub fn server_for_client(client: usize, servers: usize) -> usize {
    client % servers.max(1)
}

/// The namespace a write phase writes into (one per phase, so its writes can be listed and
/// counted on their own): `w-<backend><servers>-c<clients>`, e.g. `w-pg4-c64`.
pub fn write_namespace(backend: &str, servers: usize, clients: usize) -> String {
    let short = if backend == "postgres" { "pg" } else { "emb" };
    format!("w-{short}{servers}-c{clients}")
}

/// The tag that makes a written memory's content unique: `[w <client>.<seq>]`.
pub fn write_tag(client: usize, seq: u64) -> String {
    format!("[w {client}.{seq}]")
}

/// The write tag at the end of a memory's content, if any.
pub fn tag_of(content: &str) -> Option<&str> {
    let start = content.rfind("[w ")?;
    let tag = &content[start..];
    tag.ends_with(']').then_some(tag)
}

/// How the listed contents of a write namespace compare with the acknowledged writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ListTally {
    /// Acknowledged writes whose tag is listed exactly once.
    pub once: u64,
    /// Acknowledged writes whose tag is listed more than once.
    pub duplicated: u64,
    /// Acknowledged writes whose tag is not listed.
    pub missing: u64,
    /// Listed items whose tag no acknowledged write had (a write answered with an error that
    /// was stored anyway, or a stray).
    pub unacknowledged: u64,
}

/// Compare the acknowledged writes' tags with the tags listed in their namespace.
pub fn tally_listed<'a>(acknowledged: impl IntoIterator<Item = &'a str>, listed: impl IntoIterator<Item = &'a str>) -> ListTally {
    let mut counts: BTreeMap<&str, u64> = BTreeMap::new();
    for t in listed {
        *counts.entry(t).or_default() += 1;
    }
    let acked: BTreeSet<&str> = acknowledged.into_iter().collect();
    let mut tally = ListTally::default();
    for t in &acked {
        match counts.get(t).copied().unwrap_or(0) {
            0 => tally.missing += 1,
            1 => tally.once += 1,
            _ => tally.duplicated += 1,
        }
    }
    tally.unacknowledged = counts.iter().filter(|(t, _)| !acked.contains(*t)).map(|(_, n)| *n).sum();
    tally
}

/// Every write a phase had acknowledged, checked afterwards.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WriteCheck {
    /// `embedded` or `postgres`.
    pub backend: String,
    /// Server processes.
    pub servers_count: usize,
    /// Concurrent clients of the write phase.
    pub clients_count: usize,
    /// The phase's namespace.
    pub namespace: String,
    /// Writes answered 2xx with an id.
    pub writes_acknowledged_count: u64,
    /// Distinct ids among them.
    pub ids_distinct_count: u64,
    /// Acknowledged writes read back by id (`GET /v1/memories/{id}`, through the next server
    /// round-robin from the one that took the write) with their own content.
    pub read_back_count: u64,
    /// Acknowledged writes not read back (404, other content, or an error).
    pub not_read_back_count: u64,
    /// Items `GET /v1/memories?namespace=..&limit=10000` listed (None: more than 10,000
    /// acknowledged, so not listable in one call).
    pub listed_count: Option<u64>,
    /// Acknowledged writes listed exactly once.
    pub listed_once_count: Option<u64>,
    /// Acknowledged writes listed more than once (duplicated).
    pub duplicated_count: Option<u64>,
    /// Acknowledged writes not listed (lost).
    pub lost_count: Option<u64>,
    /// Listed items no acknowledged write accounts for.
    pub unacknowledged_listed_count: Option<u64>,
    /// Entries the tenant's log grew by during the phase (`/v1/audit/verify` before and after).
    pub log_entries_appended_count: Option<u64>,
    /// Up to three problems, in words.
    pub examples: Vec<String>,
    /// Every acknowledged write present exactly once, nothing extra, distinct ids.
    pub ok: bool,
}

/// The tenant's log verified through every server after a configuration's phases.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LogCheck {
    /// `embedded` or `postgres`.
    pub backend: String,
    /// Server processes.
    pub servers_count: usize,
    /// One per server: what `/v1/audit/verify` (the user's key) answered.
    pub per_server: Vec<LogVerify>,
    /// Every server verified the log, and all saw the same entry count and head: one chain.
    pub one_chain: bool,
}

/// One server's `/v1/audit/verify` answer (or why there is none).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LogVerify {
    /// The server (0-based, in start order).
    pub server_index: usize,
    /// The log verified.
    pub ok: bool,
    /// Entries examined.
    pub entries_count: u64,
    /// Head leaf hash (hex).
    pub head: String,
    /// The problem, when not ok.
    pub problem: Option<String>,
    /// Time the verification took, in milliseconds.
    pub verify_ms: f64,
}

/// `/v1/audit/verify` through `client` with `token`.
pub(crate) fn verify_log(client: &Client, token: &str, server_index: usize) -> LogVerify {
    let t = std::time::Instant::now();
    let mut out = LogVerify { server_index, ok: false, entries_count: 0, head: String::new(), problem: None, verify_ms: 0.0 };
    match client.get("/v1/audit/verify", Some(token)) {
        Err(e) => out.problem = Some(e),
        Ok(r) if !r.ok() => out.problem = Some(format!("{}: {}", r.describe(), truncate(&r.body, 200))),
        Ok(r) => match serde_json::from_str::<serde_json::Value>(&r.body) {
            Err(e) => out.problem = Some(format!("unreadable answer: {e}")),
            Ok(v) => {
                out.ok = v.get("ok").and_then(serde_json::Value::as_bool).unwrap_or(false);
                out.entries_count = v.get("entries").and_then(serde_json::Value::as_u64).unwrap_or(0);
                out.head = v.get("head").and_then(|h| h.as_str()).unwrap_or("").to_owned();
                out.problem = v.get("problem").and_then(|p| p.as_str()).map(str::to_owned);
            }
        },
    }
    out.verify_ms = t.elapsed().as_secs_f64() * 1000.0;
    out
}

/// One chain: every answer ok, and all agree on the entry count and head.
pub fn one_chain(per_server: &[LogVerify]) -> bool {
    let Some(first) = per_server.first() else { return false };
    per_server.iter().all(|v| v.ok && v.entries_count == first.entries_count && v.head == first.head)
}

/// The single-server PostgreSQL latency against the embedded store's, for one operation and
/// client count.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RatioCheck {
    /// `search`, `decide` or `write`.
    pub kind: String,
    /// Concurrent clients.
    pub clients_count: usize,
    /// Embedded store, median.
    pub embedded_latency_us_p50: u64,
    /// Embedded store, 95th percentile.
    pub embedded_latency_us_p95: u64,
    /// Embedded store, 99th percentile.
    pub embedded_latency_us_p99: u64,
    /// PostgreSQL with one server, median.
    pub postgres_latency_us_p50: u64,
    /// PostgreSQL with one server, 95th percentile.
    pub postgres_latency_us_p95: u64,
    /// PostgreSQL with one server, 99th percentile.
    pub postgres_latency_us_p99: u64,
    /// PostgreSQL p50 / embedded p50.
    pub ratio_p50: f64,
    /// PostgreSQL p95 / embedded p95.
    pub ratio_p95: f64,
    /// PostgreSQL p99 / embedded p99 (shown, not judged).
    pub ratio_p99: f64,
    /// The target ratio.
    pub target_ratio: f64,
    /// p50 and p95 ratios both at most the target, both phases with successful requests.
    pub met: bool,
}

fn ratio(pg: u64, emb: u64) -> f64 {
    if emb == 0 { f64::INFINITY } else { pg as f64 / emb as f64 }
}

/// Pair every embedded phase with the single-server PostgreSQL phase of the same kind and client
/// count.
pub fn ratio_checks(phases: &[PhaseReport]) -> Vec<RatioCheck> {
    let mut out = Vec::new();
    for e in phases.iter().filter(|p| p.backend == "embedded") {
        let Some(p) = phases.iter().find(|p| p.backend == "postgres" && p.servers_count == 1 && p.kind == e.kind && p.clients_count == e.clients_count)
        else {
            continue;
        };
        let (el, pl) = (&e.latency, &p.latency);
        let (r50, r95, r99) =
            (ratio(pl.latency_us_p50, el.latency_us_p50), ratio(pl.latency_us_p95, el.latency_us_p95), ratio(pl.latency_us_p99, el.latency_us_p99));
        out.push(RatioCheck {
            kind: e.kind.clone(),
            clients_count: e.clients_count,
            embedded_latency_us_p50: el.latency_us_p50,
            embedded_latency_us_p95: el.latency_us_p95,
            embedded_latency_us_p99: el.latency_us_p99,
            postgres_latency_us_p50: pl.latency_us_p50,
            postgres_latency_us_p95: pl.latency_us_p95,
            postgres_latency_us_p99: pl.latency_us_p99,
            ratio_p50: r50,
            ratio_p95: r95,
            ratio_p99: r99,
            target_ratio: TARGET_PG_LATENCY_RATIO,
            met: e.requests_ok_count > 0 && p.requests_ok_count > 0 && r50 <= TARGET_PG_LATENCY_RATIO && r95 <= TARGET_PG_LATENCY_RATIO,
        });
    }
    out
}
