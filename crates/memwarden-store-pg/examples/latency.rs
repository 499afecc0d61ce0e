//! Rough latencies of the PostgreSQL store next to the embedded one, on the same machine:
//! commit one memory with its vector, read it back, search k = 5, and (PostgreSQL) the first
//! read through a second process-like store after a write through the first.
//!
//! `cargo run -p memwarden-store-pg --example latency [rounds] [seeded]` (needs the local
//! PostgreSQL server; `MEMWARDEN_PG_URL` as in the tests). Creates and drops its own schema.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use memwarden_core::prelude::*;
use memwarden_store::{Mutation, SqliteStore, Store, StoreConfig};
use memwarden_store_pg::{PgConfig, PostgresStore, drop_schema};
use std::time::Instant;

const DIMS: usize = 384;

fn tenant() -> TenantId {
    TenantId::new("acme").unwrap()
}

fn ns() -> Namespace {
    Namespace::new("notes").unwrap()
}

fn ana() -> Principal {
    ana_of("acme")
}

fn ana_of(tenant: &str) -> Principal {
    serde_json::from_value(serde_json::json!({"id": "ana", "tenant": tenant, "kind": "agent", "domain": null, "allow_listed": false, "public_key": null})).unwrap()
}

fn id(n: u64) -> ItemId {
    let mut raw = [0u8; 16];
    raw[..8].copy_from_slice(&n.to_be_bytes());
    ItemId::from_bytes(raw)
}

fn vector(seed: u64) -> Vec<f32> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..DIMS)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % 1000) as f32 / 1000.0 - 0.5
        })
        .collect()
}

fn item(n: u64) -> Mutation {
    item_in("acme", n)
}

fn item_in(t: &str, n: u64) -> Mutation {
    let w = Authority::default().admit_write(&ana_of(t), &TenantId::new(t).unwrap(), WriteRequest::new(ns(), format!("memory number {n}"), Route::Direct), &[], id(n), n).unwrap();
    Mutation::Item { write: w, embedding: Some(vector(n)) }
}

fn pct(mut v: Vec<f64>) -> (f64, f64) {
    v.sort_by(f64::total_cmp);
    let at = |p: f64| v[((v.len() as f64 - 1.0) * p).round() as usize];
    (at(0.5), at(0.95))
}

fn run(name: &str, a: &dyn Store, b: &dyn Store, rounds: u64, seeded: u64) {
    a.commit(0, vec![Mutation::Principal(ana())]).unwrap().pop().unwrap().unwrap();
    let t = Instant::now();
    for chunk in (1..=seeded).collect::<Vec<_>>().chunks(500) {
        for r in a.commit(1, chunk.iter().map(|n| item(*n)).collect()).unwrap() {
            r.unwrap();
        }
    }
    let seed_s = t.elapsed().as_secs_f64();
    let (mut commit, mut read, mut search, mut other) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for r in 0..rounds {
        let n = 1_000_000 + r;
        let m = item(n);
        let t = Instant::now();
        a.commit(n, vec![m]).unwrap().pop().unwrap().unwrap();
        commit.push(t.elapsed().as_secs_f64() * 1e3);
        let t = Instant::now();
        assert!(a.item(&tenant(), &id(n)).unwrap().is_some());
        read.push(t.elapsed().as_secs_f64() * 1e3);
        let t = Instant::now();
        assert_eq!(a.search(&tenant(), &ns(), &vector(r), 5, &PrincipalId::new("ben").unwrap()).unwrap().len(), 5);
        search.push(t.elapsed().as_secs_f64() * 1e3);
        let t = Instant::now();
        assert!(b.item(&tenant(), &id(n)).unwrap().is_some());
        other.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let f = |(p50, p95): (f64, f64)| format!("{p50:.3} / {p95:.3} ms");
    println!("| {name} | seed {seeded} in {seed_s:.1} s | {} | {} | {} | {} |", f(pct(commit)), f(pct(read)), f(pct(search)), f(pct(other)));
}

/// Writes per second with `writers` threads committing `each` memories (one per commit), each
/// thread through `store(i)` into the tenant `tenant(i)`.
fn throughput(name: &str, writers: u64, each: u64, store: &dyn Fn(u64) -> std::sync::Arc<dyn Store>, tenant: &(dyn Fn(u64) -> String + Sync)) {
    let t = Instant::now();
    std::thread::scope(|scope| {
        for w in 0..writers {
            let s = store(w);
            let t = tenant(w);
            scope.spawn(move || {
                for i in 0..each {
                    let n = 10_000_000 + w * 1_000_000 + i;
                    s.commit(n, vec![item_in(&t, n)]).unwrap().pop().unwrap().unwrap();
                }
            });
        }
    });
    let secs = t.elapsed().as_secs_f64();
    println!("| {name} | {writers} | {:.0} writes/s |", (writers * each) as f64 / secs);
}

fn main() {
    let args: Vec<u64> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let rounds = args.first().copied().unwrap_or(300);
    let seeded = args.get(1).copied().unwrap_or(2000);
    println!("| store | seeding | commit one memory p50 / p95 | read it back | search k = 5 | read through the other handle |");
    println!("| --- | --- | --- | --- | --- | --- |");
    {
        let dir = tempfile::tempdir().unwrap();
        let s = SqliteStore::open(&dir.path().join("data"), StoreConfig::default().with_key_dir(dir.path().join("keys"))).unwrap();
        run("sqlite (durable)", &s, &s, rounds, seeded);
    }
    let dir = tempfile::tempdir().unwrap();
    let url = std::env::var("MEMWARDEN_PG_URL").unwrap_or_else(|_| "host=127.0.0.1 port=5432 user=postgres dbname=test".into());
    let config = PgConfig::new(url.clone(), format!("mw_latency_{}", std::process::id()), dir.path().join("keys"));
    {
        let a = PostgresStore::open(config.clone()).unwrap();
        let b = PostgresStore::open(config.clone()).unwrap();
        run("postgres (two stores, one schema)", &a, &b, rounds, seeded);
    }
    println!();
    println!("| store | concurrent writers | throughput |");
    println!("| --- | --- | --- |");
    for writers in [1u64, 2, 4] {
        let dir = tempfile::tempdir().unwrap();
        let s: std::sync::Arc<dyn Store> = std::sync::Arc::new(SqliteStore::open(&dir.path().join("data"), StoreConfig::default().with_key_dir(dir.path().join("keys"))).unwrap());
        s.commit(0, vec![Mutation::Principal(ana())]).unwrap().pop().unwrap().unwrap();
        throughput("sqlite, threads on one store (group commit), one tenant", writers, 100, &|_| std::sync::Arc::clone(&s), &|_| "acme".into());
    }
    for (label, per_tenant) in [("one tenant", false), ("a tenant per writer", true)] {
        for writers in [1u64, 2, 4] {
            let schema = format!("mw_tput_{}_{writers}_{per_tenant}", std::process::id());
            let config = PgConfig::new(url.clone(), schema.clone(), dir.path().join("keys"));
            let stores: Vec<std::sync::Arc<dyn Store>> = (0..writers).map(|_| std::sync::Arc::new(PostgresStore::open(config.clone()).unwrap()) as std::sync::Arc<dyn Store>).collect();
            let tenant_of = move |w: u64| if per_tenant { format!("t{w}") } else { "acme".to_owned() };
            for w in 0..writers {
                let _ = stores[0].commit(0, vec![Mutation::Principal(ana_of(&tenant_of(w)))]).unwrap();
            }
            throughput(&format!("postgres, one store per writer (as processes), {label}"), writers, 100, &|w| std::sync::Arc::clone(&stores[w as usize]), &tenant_of);
            drop(stores);
            drop_schema(&url, &schema).unwrap();
        }
    }
    drop_schema(&url, &config.schema).unwrap();
}
