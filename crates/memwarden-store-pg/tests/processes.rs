//! Several operating-system processes on one PostgreSQL schema (issue 17): this test binary
//! re-runs itself as writer processes (`MEMWARDEN_PG_CHILD` set), each appending memories to the
//! same tenants through its own `PostgresStore`; some are killed with SIGKILL mid-load. Every
//! write a child reported as acknowledged must be present afterwards, each tenant's log must be
//! one verifying chain, and nothing may be half-applied (every item has its log entry and the
//! audit finds no row without its binding). A real server, nothing mocked.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use memwarden_core::prelude::*;
use memwarden_store::{Mutation, Store};
use memwarden_store_pg::{PgConfig, PostgresStore, drop_schema};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const TENANTS: [&str; 2] = ["acme", "globex"];

fn url() -> String {
    std::env::var("MEMWARDEN_PG_URL").unwrap_or_else(|_| "host=127.0.0.1 port=5432 user=postgres dbname=test".into())
}

fn agent(t: &str) -> Principal {
    serde_json::from_value(serde_json::json!({"id": "ana", "tenant": t, "kind": "agent", "domain": null, "allow_listed": false, "public_key": null})).unwrap()
}

fn id(n: u64) -> ItemId {
    let mut raw = [0u8; 16];
    raw[..8].copy_from_slice(&n.to_be_bytes());
    ItemId::from_bytes(raw)
}

fn vector(n: u64) -> Vec<f32> {
    (0..8).map(|d| if d as u64 == n % 8 { 1.0 } else { ((n + d as u64) % 7) as f32 / 10.0 }).collect()
}

fn tenant_of(n: u64) -> TenantId {
    TenantId::new(TENANTS[(n % 2) as usize]).unwrap()
}

/// Child mode: append memories `base..base + count` (alternating tenants), printing `ack <n>`
/// after each commit returns.
fn child(schema: &str, key_dir: &str, base: u64, count: u64) {
    let store = PostgresStore::open(PgConfig::new(url(), schema, key_dir)).unwrap();
    for n in base..base + count {
        let t = tenant_of(n);
        let w = Authority::default()
            .admit_write(&agent(t.as_str()), &t, WriteRequest::new(Namespace::new("n").unwrap(), format!("memory {n}"), Route::Direct), &[], id(n), n)
            .unwrap();
        store.commit(n, vec![Mutation::Item { write: w, embedding: Some(vector(n)) }]).unwrap().pop().unwrap().unwrap();
        println!("ack {n}");
    }
}

fn spawn(schema: &str, key_dir: &std::path::Path, base: u64, count: u64) -> std::process::Child {
    Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "several_processes_share_one_chain_per_tenant_and_survive_sigkill", "--nocapture", "--test-threads=1"])
        .env("MEMWARDEN_PG_CHILD", format!("{schema}:{}:{base}:{count}", key_dir.display()))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// The acknowledged ids a child printed (until it exits or is killed). The test harness may
/// print its `test ... ` prefix on the line of the first one.
fn acks(child: &mut std::process::Child) -> std::thread::JoinHandle<Vec<u64>> {
    let out = child.stdout.take().unwrap();
    std::thread::spawn(move || BufReader::new(out).lines().map_while(Result::ok).filter_map(|l| l.split("ack ").nth(1).and_then(|n| n.trim().parse().ok())).collect())
}

struct DropSchema(String);

impl Drop for DropSchema {
    fn drop(&mut self) {
        let _ = drop_schema(&url(), &self.0);
    }
}

#[test]
fn several_processes_share_one_chain_per_tenant_and_survive_sigkill() {
    if let Ok(spec) = std::env::var("MEMWARDEN_PG_CHILD") {
        let parts: Vec<&str> = spec.splitn(4, ':').collect();
        child(parts[0], parts[1], parts[2].parse().unwrap(), parts[3].parse().unwrap());
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let key_dir = dir.path().join("keys");
    let mut r = [0u8; 6];
    getrandom::fill(&mut r).unwrap();
    let schema = format!("mw_test_{}", hex::encode(r));
    let _drop = DropSchema(schema.clone());
    let config = PgConfig::new(url(), schema.clone(), &key_dir);
    {
        let store = PostgresStore::open(config.clone()).unwrap_or_else(|e| panic!("cannot open a PostgresStore on {:?} (is PostgreSQL running?): {e}", config.url));
        for t in TENANTS {
            store.commit(0, vec![Mutation::Principal(agent(t))]).unwrap().pop().unwrap().unwrap();
        }
    }
    // 1. Three processes append to both tenants at once, to completion.
    let mut children: Vec<_> = (0..3).map(|i| spawn(&schema, &key_dir, 1_000 * (i + 1), 40)).collect();
    let readers: Vec<_> = children.iter_mut().map(acks).collect();
    for c in &mut children {
        assert!(c.wait().unwrap().success());
    }
    let mut acked: Vec<u64> = readers.into_iter().flat_map(|r| r.join().unwrap()).collect();
    assert_eq!(acked.len(), 120);
    // 2. Kill cycles (50, or MEMWARDEN_PG_KILL_CYCLES): two writers under load, both killed with
    //    SIGKILL after 150..500 ms, at whatever point of a commit they are.
    let cycles = std::env::var("MEMWARDEN_PG_KILL_CYCLES").ok().and_then(|c| c.parse().ok()).unwrap_or(50u64);
    let started = Instant::now();
    for cycle in 0..cycles {
        let base = 100_000 * (cycle + 1);
        let mut pair = [spawn(&schema, &key_dir, base, 10_000), spawn(&schema, &key_dir, base + 50_000, 10_000)];
        let readers: Vec<_> = pair.iter_mut().map(acks).collect();
        std::thread::sleep(Duration::from_millis(150 + 50 * (cycle % 8)));
        for c in &mut pair {
            c.kill().unwrap(); // SIGKILL
            c.wait().unwrap();
        }
        acked.extend(readers.into_iter().flat_map(|r| r.join().unwrap()));
    }
    eprintln!("{cycles} kill cycles in {:.1} s, {} writes acknowledged in all", started.elapsed().as_secs_f64(), acked.len());
    // 3. A fresh process verifies every log and finds every acknowledged write.
    let store = PostgresStore::open(config.clone()).unwrap();
    let report = store.verify_log().unwrap();
    assert!(report.is_ok(), "{:?}", report.problem);
    for n in &acked {
        assert!(store.item(&tenant_of(*n), &id(*n)).unwrap().is_some(), "acknowledged write {n} is missing");
    }
    for t in TENANTS {
        let t = TenantId::new(t).unwrap();
        assert!(store.verify_log_of(&t).unwrap().is_ok());
        // Nothing half-applied: every stored item has exactly its one write entry in the log
        // (genesis + principal + one entry per item), and the audit above found no unbound row.
        let items = store.count(&t).unwrap();
        assert_eq!(store.log_len_of(&t), items + 2, "{t}: entries and items agree");
        let acked_here = acked.iter().filter(|n| tenant_of(**n) == t).count() as u64;
        assert!(items >= acked_here, "{t}: {items} stored, {acked_here} acknowledged");
    }
}
