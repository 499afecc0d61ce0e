//! Round trips to PostgreSQL and wall time per engine operation (issue 17): the shipped engine
//! (`full` preset, hash embedder) on a `PostgresStore`, next to the same engine on the embedded
//! store, one caller, the load benchmark's three operations — a search (k = 5), a high-risk
//! payment decision citing a stored memory, one write.
//!
//! `cargo run --release -p memwarden-store-pg --example engine_round_trips [memories] [ops]`
//! (default 2,000 memories, 200 of each operation; needs the local PostgreSQL server,
//! `MEMWARDEN_PG_URL` as in the tests; `MEMWARDEN_HYBRID=0` for vector-only search). Creates and
//! drops its own schema.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use memwarden_core::prelude::*;
use memwarden_engine::embed::HashEmbedder;
use memwarden_engine::{Actor, Engine, EngineConfig, Preset};
use memwarden_store_pg::{PgConfig, PostgresStore, drop_schema, round_trips};
use std::sync::Arc;
use std::time::Instant;

fn pid(s: &str) -> PrincipalId {
    PrincipalId::new(s).unwrap()
}

fn tenant() -> TenantId {
    TenantId::new("acme").unwrap()
}

fn ns() -> Namespace {
    Namespace::new("notes").unwrap()
}

/// `MEMWARDEN_HYBRID=0` turns the lexical half of hybrid search off (to show what it costs).
fn config() -> EngineConfig {
    let hybrid = std::env::var("MEMWARDEN_HYBRID").map_or(true, |v| v != "0");
    EngineConfig { embedder: Some(Arc::new(HashEmbedder::new(256))), hybrid, ..EngineConfig::for_preset(Preset::Full).unwrap() }
}

const WORDS: &[&str] = &[
    "invoice", "meeting", "payee", "account", "offsite", "quarter", "budget", "travel", "hotel", "vendor", "contract", "renewal", "lake", "house",
    "supplier", "shipment", "report", "review", "deadline", "customer",
];

fn sentence(n: u64) -> String {
    let mut x = n.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let words: Vec<&str> = (0..9)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            WORDS[(x % WORDS.len() as u64) as usize]
        })
        .collect();
    format!("{} number {n}", words.join(" "))
}

struct Row {
    op: &'static str,
    trips: f64,
    p50_ms: f64,
    p95_ms: f64,
}

fn pct(mut v: Vec<f64>, p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

fn run(e: &Engine, memories: u64, ops: u64, counted: bool) -> Vec<Row> {
    for (id, kind, domain) in [("agent", PrincipalKind::Agent, None), ("inbox", PrincipalKind::Source, Some("mail.example"))] {
        e.register_principal(Principal { id: pid(id), tenant: tenant(), kind, domain: domain.map(|d| Domain::new(d).unwrap()), allow_listed: false, public_key: None, action: None }).unwrap();
    }
    let agent = e.authenticate(&tenant(), &pid("agent")).unwrap();
    let inbox = e.authenticate(&tenant(), &pid("inbox")).unwrap();
    let mut seeded = Vec::new();
    for b in 0..memories.div_ceil(100) {
        // Nine batches in ten by the untrusted inbox, one by the agent (as the load benchmark).
        let (who, route): (&Actor, Route) = if b % 10 == 9 { (&agent, Route::Direct) } else { (&inbox, Route::ExternalObservation) };
        let reqs = (b * 100..((b + 1) * 100).min(memories)).map(|n| WriteRequest::new(ns(), sentence(n), route)).collect();
        for out in e.add_many(who, reqs).unwrap() {
            seeded.push(out.unwrap().0);
        }
    }
    let mut rows = Vec::new();
    let mut measure = |op: &'static str, f: &mut dyn FnMut(u64)| {
        f(0); // warm
        let before = round_trips();
        let mut ms = Vec::new();
        for i in 1..=ops {
            let t = Instant::now();
            f(i);
            ms.push(t.elapsed().as_secs_f64() * 1e3);
        }
        let trips = if counted { (round_trips() - before) as f64 / ops as f64 } else { 0.0 };
        rows.push(Row { op, trips, p50_ms: pct(ms.clone(), 0.5), p95_ms: pct(ms, 0.95) });
    };
    measure("search", &mut |i| {
        let hits = e.search(&agent, &ns(), &sentence(i * 7 % memories), 5).unwrap();
        assert!(!hits.is_empty());
    });
    measure("decide", &mut |i| {
        let source = seeded[(i * 13 % memories) as usize];
        let action = ActionRequest {
            tool: "pay".into(),
            kind: ActionKind::Act,
            risk: Risk::High,
            values: vec![ActionValue { key: "payee".into(), value: format!("ACCT-{i:08}"), kind: ValueKind::Account, sources: vec![source] }],
            amount: Some(format!("{}.00 EUR", 10 + i)),
            context: vec![source],
            grants: vec![],
        };
        e.decide(&agent, &action).unwrap();
    });
    measure("write", &mut |i| {
        e.add(&agent, WriteRequest::new(ns(), format!("{} tag-{i}", sentence(i + memories)), Route::Direct)).unwrap();
    });
    rows
}

fn main() {
    let args: Vec<u64> = std::env::args().skip(1).map(|a| a.parse().unwrap()).collect();
    let memories = args.first().copied().unwrap_or(2000);
    let ops = args.get(1).copied().unwrap_or(200);
    let url = std::env::var("MEMWARDEN_PG_URL").unwrap_or_else(|_| "host=127.0.0.1 port=5432 user=postgres dbname=test".into());
    let dir = tempfile::tempdir().unwrap();

    let embedded = Engine::open(&dir.path().join("embedded"), config()).unwrap();
    let base = run(&embedded, memories, ops, false);
    drop(embedded);

    let mut r = [0u8; 6];
    getrandom::fill(&mut r).unwrap();
    let pg = PgConfig::new(url, format!("mw_trips_{}", hex::encode(r)), dir.path().join("keys"));
    let store = PostgresStore::open(pg.clone()).unwrap();
    let e = Engine::with_store(Arc::new(store), config()).unwrap();
    let rows = run(&e, memories, ops, true);
    drop(e);
    drop_schema(&pg.url, &pg.schema).unwrap();

    println!("{memories} memories, {ops} operations each, one caller, preset full, hash embedder");
    println!("| operation | PostgreSQL round trips | PostgreSQL p50 / p95 ms | embedded p50 / p95 ms |");
    println!("|---|---:|---|---|");
    for (p, b) in rows.iter().zip(&base) {
        println!("| {} | {:.1} | {:.2} / {:.2} | {:.2} / {:.2} |", p.op, p.trips, p.p50_ms, p.p95_ms, b.p50_ms, b.p95_ms);
    }
}
