//! Embedding latency and throughput: `cargo bench -p memwarden-embed` (release build; needs the
//! model from scripts/fetch-model.sh). Results go to docs/benchmarks.md.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use memwarden_embed::{Embedder, MiniLmEmbedder, resolve_model_dir};
use std::time::Instant;

struct Reference {
    sentences: Vec<String>,
}

fn reference() -> Reference {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/minilm-reference.json");
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    Reference { sentences: v["sentences"].as_array().unwrap().iter().map(|s| s.as_str().unwrap().to_owned()).collect() }
}

fn main() {
    let t = Instant::now();
    let dir = resolve_model_dir(None).unwrap_or_else(|e| panic!("{e}"));
    let m = MiniLmEmbedder::load(&dir).unwrap();
    println!("load: {:.1} ms", t.elapsed().as_secs_f64() * 1e3);

    let r = reference();
    let short = "The cat sits outside";
    m.embed(&[short]).unwrap(); // warm-up
    let n = 50;
    let t = Instant::now();
    for _ in 0..n {
        m.embed(&[short]).unwrap();
    }
    println!(
        "single short sentence ({} tokens): {:.2} ms",
        m.token_count(short).unwrap(),
        t.elapsed().as_secs_f64() * 1e3 / f64::from(n)
    );

    let medium = r.sentences[3].as_str();
    let t = Instant::now();
    for _ in 0..n {
        m.embed(&[medium]).unwrap();
    }
    println!(
        "single sentence ({} tokens): {:.2} ms",
        m.token_count(medium).unwrap(),
        t.elapsed().as_secs_f64() * 1e3 / f64::from(n)
    );

    let long = r.sentences[8].as_str();
    let t = Instant::now();
    for _ in 0..10 {
        m.embed(&[long]).unwrap();
    }
    println!("single 256-token input: {:.2} ms", t.elapsed().as_secs_f64() * 1e3 / 10.0);

    // Batches of 64: the non-degenerate reference sentences cycled with a counter (none
    // identical, 7-25 tokens), and 64 short sentences (about 8 tokens).
    let base: Vec<&str> = r.sentences.iter().map(String::as_str).filter(|s| !s.is_empty() && s.len() < 200).collect();
    let mixed: Vec<String> = (0..64).map(|i| format!("{} (note {i})", base[i % base.len()])).collect();
    let short: Vec<String> = (0..64).map(|i| format!("The cat sits outside {i}")).collect();
    for (label, batch) in [("mixed", &mixed), ("short", &short)] {
        let refs: Vec<&str> = batch.iter().map(String::as_str).collect();
        let tokens: usize = refs.iter().map(|t| m.token_count(t).unwrap()).sum();
        for size in [32, 64] {
            let e = MiniLmEmbedder::load(&dir).unwrap().with_batch_size(size);
            e.embed(&refs).unwrap(); // warm-up
            let rounds = 5;
            let t = Instant::now();
            for _ in 0..rounds {
                e.embed(&refs).unwrap();
            }
            let secs = t.elapsed().as_secs_f64() / f64::from(rounds);
            println!(
                "batch of 64 {label} sentences ({tokens} tokens), batch size {size}: {:.1} ms, {:.0} sentences/s, {:.0} tokens/s",
                secs * 1e3,
                64.0 / secs,
                tokens as f64 / secs
            );
        }
    }
}
