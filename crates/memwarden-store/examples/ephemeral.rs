//! Open time and a write / read / search round trip of the ephemeral store
//! ([`SqliteStore::open_ephemeral`]) against the durable one ([`SqliteStore::open`], a fresh
//! directory on the disk's filesystem).
//!
//! `cargo run --release -p memwarden-store --example ephemeral [ROUNDS]`
//!
//! Method: each store is opened `OPENS` times (fresh, empty) and the open timed; then one
//! store of each kind is seeded with `SEED` memories (384-dimensional vectors, one commit of
//! 512 at a time), and `ROUNDS` times: commit one new memory with its vector (`commit`),
//! read it back (`item`), and search the namespace (`search`, k = 5) as another principal.
//! Reported: p50 / p95 per step, in microseconds.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use memwarden_core::prelude::*;
use memwarden_store::{Mutation, SqliteStore, Store, StoreConfig};
use std::time::Instant;

const DIMS: usize = 384;
const SEED: u64 = 2_000;
const OPENS: usize = 20;

fn tenant() -> TenantId {
    TenantId::new("bench").unwrap()
}

fn principal(id: &str) -> Principal {
    serde_json::from_value(serde_json::json!({"id": id, "tenant": "bench", "kind": "agent", "domain": null, "allow_listed": false, "public_key": null})).unwrap()
}

fn vector(seed: u64) -> Vec<f32> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..DIMS)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % 10_000) as f32 / 10_000.0 - 0.5
        })
        .collect()
}

fn item(n: u64) -> Mutation {
    let mut raw = [0u8; 16];
    raw[..8].copy_from_slice(&n.to_be_bytes());
    let req = WriteRequest::new(Namespace::new("notes").unwrap(), format!("memory number {n} about the quarterly report"), Route::Direct);
    let write = Authority::default().admit_write(&principal("ana"), &tenant(), req, &[], ItemId::from_bytes(raw), n).unwrap();
    Mutation::Item { write, embedding: Some(vector(n)) }
}

fn pct(mut v: Vec<f64>, p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * p).round() as usize]
}

fn report(name: &str, v: Vec<f64>) {
    println!("  {name:<8} p50 {:>9.1} us   p95 {:>9.1} us", pct(v.clone(), 0.5), pct(v, 0.95));
}

fn run(kind: &str, open: &dyn Fn() -> (SqliteStore, Option<tempfile::TempDir>), rounds: u64) {
    println!("{kind}");
    let mut opens = Vec::new();
    for _ in 0..OPENS {
        let t = Instant::now();
        let s = open();
        opens.push(t.elapsed().as_secs_f64() * 1e6);
        drop(s);
    }
    report("open", opens);
    let (store, _dir) = open();
    store.commit(0, vec![Mutation::Principal(principal("ana")), Mutation::Principal(principal("ben"))]).unwrap();
    for chunk in (1..=SEED).collect::<Vec<_>>().chunks(512) {
        for r in store.commit(1, chunk.iter().map(|&n| item(n)).collect()).unwrap() {
            r.unwrap();
        }
    }
    let (mut w, mut r, mut q) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..rounds {
        let n = SEED + 1 + i;
        let t = Instant::now();
        store.commit(n, vec![item(n)]).unwrap().pop().unwrap().unwrap();
        w.push(t.elapsed().as_secs_f64() * 1e6);
        let mut raw = [0u8; 16];
        raw[..8].copy_from_slice(&n.to_be_bytes());
        let t = Instant::now();
        assert!(store.item(&tenant(), &ItemId::from_bytes(raw)).unwrap().is_some());
        r.push(t.elapsed().as_secs_f64() * 1e6);
        let t = Instant::now();
        assert_eq!(store.search(&tenant(), &Namespace::new("notes").unwrap(), &vector(n / 2), 5, &PrincipalId::new("ben").unwrap()).unwrap().len(), 5);
        q.push(t.elapsed().as_secs_f64() * 1e6);
    }
    report("commit", w);
    report("item", r);
    report("search", q);
    drop(store); // before its directory
}

fn main() {
    let rounds: u64 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(300);
    run(
        "durable (SqliteStore::open, synchronous=FULL, witness every commit; a fresh directory on the root filesystem)",
        &|| {
            let dir = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
            let config = StoreConfig::default().with_key_dir(dir.path().join("keys"));
            (SqliteStore::open(&dir.path().join("data"), config).unwrap(), Some(dir))
        },
        rounds,
    );
    run(
        "durable, witness only at checkpoints (witness_every_commit = false)",
        &|| {
            let dir = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
            let config = StoreConfig { witness_every_commit: false, ..StoreConfig::default() }.with_key_dir(dir.path().join("keys"));
            (SqliteStore::open(&dir.path().join("data"), config).unwrap(), Some(dir))
        },
        rounds,
    );
    run("ephemeral (SqliteStore::open_ephemeral)", &|| (SqliteStore::open_ephemeral(StoreConfig::default()).unwrap(), None), rounds);
}
