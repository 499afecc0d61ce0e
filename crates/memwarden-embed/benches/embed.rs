//! Embedding latency and throughput: `cargo bench -p memwarden-embed` (release build; needs the
//! model from scripts/fetch-model.sh). Results go to docs/bench-embed.md.
//!
//! * **Single query**: the HTTP load benchmark's query mix (`memwarden bench load`): real English
//!   sentences from documentation on this machine, collected by the same code
//!   (`memwarden-bench/src/retrieval/corpus.rs`, compiled in here unchanged), 10,000 "stored" and up
//!   to 2,000 held out; a query is a stored sentence (1/3), a stored sentence cut to a random span
//!   with a word dropped (1/3), or a held-out sentence (1/3). One `embed(&[q])` call per query,
//!   timed one by one after a warm-up; p50 / p95 / p99 and the token-count p50.
//! * **Batches**: 64 stored sentences per `embed` call (real memories, as an import sends), and
//!   64 short synthetic sentences ("The cat sits outside N", 8 tokens): sentences/s.
//!
//! Options (after `--`): `--queries N` (default 300), `--rounds N` batch rounds (default 10),
//! `--skip-batch`, `--skip-single`, `--f32` (full-precision weights; the default is half), `--threads N` (batches).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

#[allow(dead_code, unused_imports)]
#[path = "../../memwarden-bench/src/retrieval/corpus.rs"]
mod corpus;

use memwarden_embed::{Embedder, MiniLmEmbedder, WeightPrecision, resolve_model_dir};
use std::time::Instant;

const STORED_COUNT: usize = 10_000;
const HELD_OUT_COUNT: usize = 2_000;

/// SplitMix64: deterministic query draws.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        if n == 0 { 0 } else { (self.next() % n as u64) as usize }
    }
}

/// The load benchmark's perturbation: a random span of at least four words, one word dropped
/// when that leaves at least four.
fn perturb(s: &str, rng: &mut Rng) -> String {
    let words: Vec<&str> = s.split_whitespace().collect();
    if words.len() <= 4 {
        return s.to_owned();
    }
    let len = 4 + rng.below(words.len() - 4 + 1);
    let start = rng.below(words.len() - len + 1);
    let mut span: Vec<&str> = words.iter().skip(start).take(len).copied().collect();
    if span.len() > 4 {
        let drop = rng.below(span.len());
        span.remove(drop);
    }
    span.join(" ")
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// CPU time of this process so far (user + system), from /proc/self/stat, in ms (10 ms ticks).
fn cpu_ms() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(f64::NAN);
    (ticks(11) + ticks(12)) * 10.0
}

/// Threads of this process (from /proc/self/status): no thread pool may appear for single queries.
fn thread_count() -> String {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find_map(|l| l.strip_prefix("Threads:").map(|v| v.trim().to_owned())))
        .unwrap_or_else(|| "?".into())
}

fn arg(args: &[String], name: &str) -> Option<usize> {
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).and_then(|v| v.parse().ok())
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let queries_count = arg(&args, "--queries").unwrap_or(300);
    let rounds = arg(&args, "--rounds").unwrap_or(10);
    let skip_batch = args.iter().any(|a| a == "--skip-batch");
    let skip_single = args.iter().any(|a| a == "--skip-single");

    let t = Instant::now();
    let dir = resolve_model_dir(None).unwrap_or_else(|e| panic!("{e}"));
    let precision = if args.iter().any(|a| a == "--f32") { WeightPrecision::F32 } else { WeightPrecision::default() };
    let mut m = MiniLmEmbedder::load_with_precision(&dir, precision).unwrap();
    if let Some(threads) = arg(&args, "--threads") {
        m = m.with_threads(threads);
    }
    println!(
        "model: {}; kernels {}, weights {:?} ({:.1} MB of layer weights), {} threads for batches; load {:.1} ms",
        m.name(),
        m.kernels(),
        m.precision(),
        m.layer_weight_bytes() as f64 / 1e6,
        m.threads(),
        t.elapsed().as_secs_f64() * 1e3
    );

    let t = Instant::now();
    let roots = corpus::default_corpus_roots();
    let c = corpus::collect(&roots, STORED_COUNT + HELD_OUT_COUNT, &|_| {});
    assert!(c.sentences.len() > STORED_COUNT, "only {} sentences found", c.sentences.len());
    let (stored, held_out) = c.sentences.split_at(STORED_COUNT);
    println!(
        "corpus: {} stored + {} held-out sentences from {} files in {:.1} s",
        stored.len(),
        held_out.len(),
        c.files_read,
        t.elapsed().as_secs_f64()
    );

    let mut rng = Rng(20);
    let queries: Vec<String> = (0..queries_count)
        .map(|_| match rng.below(3) {
            0 => stored[rng.below(stored.len())].clone(),
            1 => perturb(&stored[rng.below(stored.len())], &mut rng),
            _ => held_out[rng.below(held_out.len())].clone(),
        })
        .collect();

    if !skip_single {
        let query_tokens: Vec<usize> = queries.iter().map(|q| m.token_count(q).unwrap()).collect();
        let mut tokens = query_tokens.clone();
        tokens.sort_unstable();
        for q in queries.iter().take(20) {
            m.embed(&[q.as_str()]).unwrap(); // warm-up
        }
        let cpu0 = cpu_ms();
        let wall0 = Instant::now();
        let mut ms: Vec<f64> = queries
            .iter()
            .map(|q| {
                let t = Instant::now();
                let v = m.embed(&[q.as_str()]).unwrap();
                let e = t.elapsed().as_secs_f64() * 1e3;
                assert_eq!(v.len(), 1);
                e
            })
            .collect();
        let cpu_per_query = (cpu_ms() - cpu0) / ms.len() as f64;
        let wall_per_query = wall0.elapsed().as_secs_f64() * 1e3 / ms.len() as f64;
        // p50 by token count (the load benchmark's queries are 27 tokens p50 in issue 20).
        let mut by_len = String::new();
        for (lo, hi) in [(0, 16), (17, 24), (25, 29), (30, 48), (49, 256)] {
            let mut b: Vec<f64> =
                ms.iter().zip(&query_tokens).filter(|&(_, &t)| (lo..=hi).contains(&t)).map(|(&x, _)| x).collect();
            b.sort_by(f64::total_cmp);
            by_len.push_str(&format!(" {lo}-{hi} tokens: {} queries, p50 {:.2} ms;", b.len(), percentile(&b, 50.0)));
        }
        let mean = ms.iter().sum::<f64>() / ms.len() as f64;
        ms.sort_by(f64::total_cmp);
        println!(
            "single query ({} queries, tokens p50 {} / p95 {} / max {}): p50 {:.2} ms, p95 {:.2} ms, p99 {:.2} ms, mean {:.2} ms; CPU {:.2} ms per query ({:.2} cores busy)",
            ms.len(),
            tokens[tokens.len() / 2],
            tokens[(tokens.len() * 95).div_ceil(100) - 1],
            tokens[tokens.len() - 1],
            percentile(&ms, 50.0),
            percentile(&ms, 95.0),
            percentile(&ms, 99.0),
            mean,
            cpu_per_query,
            cpu_per_query / wall_per_query
        );
        println!("  by length:{by_len}");
        println!("  threads in this process after the single queries: {}", thread_count());

        // One query of each length, many calls each: the best call is what a core with
        // nobody else on it gives (robust to a busy machine), the median what this run got.
        for want in [8, 20, 27, 49] {
            let Some((q, &n)) = queries.iter().zip(&query_tokens).min_by_key(|&(_, &t)| t.abs_diff(want)) else { continue };
            let mut runs: Vec<f64> = (0..60)
                .map(|_| {
                    let t = Instant::now();
                    m.embed(&[q.as_str()]).unwrap();
                    t.elapsed().as_secs_f64() * 1e3
                })
                .collect();
            runs.sort_by(f64::total_cmp);
            println!("  {n}-token query, 60 calls: best {:.2} ms, median {:.2} ms", runs[0], percentile(&runs, 50.0));
        }
    }

    if !skip_batch {
        let stored_batch: Vec<String> = (0..64).map(|i| stored[(i * 131) % stored.len()].clone()).collect();
        let short: Vec<String> = (0..64).map(|i| format!("The cat sits outside {i}")).collect();
        for (label, batch) in [("stored", &stored_batch), ("short", &short)] {
            let refs: Vec<&str> = batch.iter().map(String::as_str).collect();
            let t = Instant::now();
            let tokens: usize = refs.iter().map(|t| m.token_count(t).unwrap()).sum();
            let tokenize_ms = t.elapsed().as_secs_f64() * 1e3;
            m.embed(&refs).unwrap(); // warm-up
            let cpu0 = cpu_ms();
            let mut secs: Vec<f64> = (0..rounds)
                .map(|_| {
                    let t = Instant::now();
                    m.embed(&refs).unwrap();
                    t.elapsed().as_secs_f64()
                })
                .collect();
            let cores = (cpu_ms() - cpu0) / (secs.iter().sum::<f64>() * 1e3);
            secs.sort_by(f64::total_cmp);
            let s = percentile(&secs, 50.0);
            println!(
                "batch of 64 {label} sentences ({tokens} tokens): median {:.1} ms, {:.0} sentences/s, {:.0} tokens/s ({:.2} cores busy; tokenizing alone {:.1} ms)",
                s * 1e3,
                64.0 / s,
                tokens as f64 / s,
                cores,
                tokenize_ms
            );
        }
    }
}
