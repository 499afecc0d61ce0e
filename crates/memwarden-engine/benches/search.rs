//! Guarded search through the engine against the bare index search (issue 20 item 2): with the
//! query vector known (the engine's query-embedding cache holds it, so no model runs), how much
//! do the guards of each preset add to the store's permission-filtered vector search? One caller,
//! the embedded store on disk, hash embedder (384 dimensions), top 5.
//!
//! `cargo bench -p memwarden-engine --bench search [-- memories queries]` (default 10,000 and
//! 300). Prints one Markdown table; results go to docs/benchmarks.md. `MEMWARDEN_BENCH_DIR`
//! puts the data directories elsewhere (`/dev/shm` takes the fsync out). Memories are template
//! sentences over a 5,000-word vocabulary; every one contains "moved", and so does every query
//! (as a speaker's name is in every turn of a transcript): the lexical search must not rank all
//! of them.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use memwarden_core::prelude::*;
use memwarden_engine::embed::{Embedder, HashEmbedder};
use memwarden_engine::{Engine, EngineConfig, Preset};
use std::sync::Arc;
use std::time::Instant;

const WORDS: &[&str] = &[
    "invoice",
    "payment",
    "account",
    "meeting",
    "tuesday",
    "project",
    "budget",
    "travel",
    "hotel",
    "flight",
    "contract",
    "supplier",
    "customer",
    "report",
    "quarter",
    "review",
    "design",
    "launch",
    "team",
    "office",
    "lunch",
    "coffee",
    "garden",
    "weekend",
    "doctor",
    "school",
    "concert",
    "ticket",
    "museum",
    "recipe",
    "pasta",
    "salad",
    "running",
    "marathon",
    "library",
    "novel",
    "painting",
    "camera",
    "holiday",
    "beach",
    "mountain",
    "river",
    "train",
    "station",
    "airport",
    "taxi",
    "rental",
    "insurance",
    "policy",
    "refund",
];

/// A word of a 5,000-word vocabulary: the 50 above, and made-up ones (`kelomar`, ...), so that a
/// query term matches a few hundred memories, not a third of them.
fn word(i: usize) -> String {
    let i = i % 5_000;
    if i < WORDS.len() {
        return WORDS[i].to_owned();
    }
    const SYL: &[&str] = &["ka", "lo", "mar", "ven", "ti", "sor", "bel", "du", "ran", "qui", "pe", "zo"];
    (0..3).map(|k| SYL[(i / SYL.len().pow(k)) % SYL.len()]).collect::<String>() + &(i / 1728).to_string()
}

fn sentence(n: usize) -> String {
    let w = |k: usize| word(n.wrapping_mul(2_654_435_761).wrapping_add(k * 40_503) >> 3);
    format!("Note {n}: the {} about the {} and the {} was moved to {} {}.", w(1), w(2), w(3), w(4), w(5))
}

fn pct(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

struct Row {
    name: String,
    p50: f64,
    p95: f64,
}

fn main() {
    let args: Vec<usize> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let memories = args.first().copied().unwrap_or(10_000);
    let queries = args.get(1).copied().unwrap_or(300);
    let tenant = TenantId::new("acme").unwrap();
    let ns = Namespace::new("notes").unwrap();
    let embedder = Arc::new(HashEmbedder::new(384));
    let mut rows: Vec<Row> = Vec::new();
    for (preset, hybrid) in [(Preset::None, false), (Preset::Full, false), (Preset::None, true), (Preset::Full, true)] {
        let dir = tempfile::tempdir_in(std::env::var("MEMWARDEN_BENCH_DIR").unwrap_or_else(|_| std::env::temp_dir().display().to_string())).unwrap();
        let config = EngineConfig { embedder: Some(embedder.clone()), hybrid, ..EngineConfig::for_preset(preset).unwrap() };
        let engine = Engine::open(dir.path(), config).unwrap();
        let key = ed25519_dalek::SigningKey::from_bytes(&[9; 32]);
        for (id, kind) in [("alice", PrincipalKind::User), ("ana", PrincipalKind::Agent), ("web", PrincipalKind::Source), ("bo", PrincipalKind::Agent)] {
            let mut p = Principal::new(PrincipalId::new(id).unwrap(), tenant.clone(), kind);
            if kind == PrincipalKind::User {
                p.public_key = Some(key.verifying_key().to_bytes());
            }
            engine.register_principal(p).unwrap();
        }
        // A third each from the user, an agent and a web source.
        let writers = [("alice", Route::Dialogue), ("ana", Route::Direct), ("web", Route::ExternalObservation)];
        for (w, route) in writers {
            let actor = engine.authenticate(&tenant, &PrincipalId::new(w).unwrap()).unwrap();
            let mine: Vec<usize> = (0..memories).filter(|n| writers[n % 3].0 == w).collect();
            for chunk in mine.chunks(memwarden_engine::ADD_MANY_MAX) {
                let reqs = chunk.iter().map(|n| WriteRequest::new(ns.clone(), sentence(*n), route)).collect();
                for r in engine.add_many(&actor, reqs).unwrap() {
                    r.unwrap();
                }
            }
        }
        let reader = engine.authenticate(&tenant, &PrincipalId::new("bo").unwrap()).unwrap();
        let qs: Vec<String> = (0..queries).map(|n| format!("where was the {} about the {} moved", word(n * 13), word(n * 7 + 3))).collect();
        // Warm: every query once (fills the query cache, hands the session what it will be handed).
        for q in &qs {
            engine.search(&reader, &ns, q, 5).unwrap();
        }
        let mut engine_us = Vec::with_capacity(queries);
        for q in &qs {
            let t = Instant::now();
            let hits = engine.search(&reader, &ns, q, 5).unwrap();
            engine_us.push(t.elapsed().as_secs_f64() * 1e6);
            assert!(hits.len() <= 5);
        }
        let vectors: Vec<Vec<f32>> = qs.iter().map(|q| embedder.embed(&[q.as_str()]).unwrap().pop().unwrap()).collect();
        let mut bare_us = Vec::with_capacity(queries);
        for v in &vectors {
            let t = Instant::now();
            let hits = engine.store().search(&tenant, &ns, v, 5, reader.id()).unwrap();
            bare_us.push(t.elapsed().as_secs_f64() * 1e6);
            assert!(hits.len() <= 5);
        }
        if preset == Preset::None && !hybrid {
            rows.push(Row { name: "store search (bare, permission-filtered vector index)".into(), p50: pct(&mut bare_us, 0.5), p95: pct(&mut bare_us, 0.95) });
        }
        let mode = if hybrid { "hybrid: vector + BM25" } else { "vector only" };
        rows.push(Row {
            name: format!("engine search, preset `{}` ({mode}, query vector cached)", preset.as_str()),
            p50: pct(&mut engine_us, 0.5),
            p95: pct(&mut engine_us, 0.95),
        });
    }
    let bare = rows[0].p50;
    println!("{memories} memories, {queries} queries, top 5, one caller, hash embedder (384 dims), data dir on disk\n");
    println!("| search | p50 µs | p95 µs | p50 / bare |\n| --- | ---: | ---: | ---: |");
    for r in &rows {
        println!("| {} | {:.0} | {:.0} | {:.2}× |", r.name, r.p50, r.p95, r.p50 / bare);
    }
}
