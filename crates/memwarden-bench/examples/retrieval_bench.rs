//! Runs the retrieval benchmark without the CLI:
//! `cargo run --release -p memwarden-bench --example retrieval_bench -- --out DIR [--quick]
//! [--n N]... [--queries Q] [--queries-used Q] [--revision REV] [--model-dir DIR] [--cache-dir DIR]`;
//! `--corpus-only` counts the available sentences.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use memwarden_bench::retrieval::{RetrievalBenchOptions, run_retrieval, write_retrieval};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let value = |flag: &str| args.iter().position(|a| a == flag).and_then(|i| args.get(i + 1)).cloned();
    let out = PathBuf::from(value("--out").unwrap_or_else(|| "/tmp/retrieval-bench".into()));
    let mut opts =
        if args.iter().any(|a| a == "--quick") { RetrievalBenchOptions::quick(&out) } else { RetrievalBenchOptions::new(&out) };
    let sizes: Vec<usize> = args
        .windows(2)
        .filter(|w| w[0] == "--n")
        .map(|w| w[1].parse().expect("--n takes a number"))
        .collect();
    if !sizes.is_empty() {
        opts.sizes = sizes;
    }
    if let Some(q) = value("--queries") {
        opts.queries_count = q.parse().expect("--queries takes a number");
    }
    if let Some(q) = value("--queries-used") {
        opts.queries_used_count = Some(q.parse().expect("--queries-used takes a number"));
    }
    if let Some(r) = value("--revision") {
        opts.revision = r;
    }
    opts.model_dir = value("--model-dir").map(PathBuf::from);
    opts.cache_dir = value("--cache-dir").map(PathBuf::from);

    if args.iter().any(|a| a == "--corpus-only") {
        let c = memwarden_bench::retrieval::corpus::collect(&opts.corpus_roots, usize::MAX, &|_| {});
        println!("{} sentences from {} files", c.sentences.len(), c.files_read);
        return;
    }

    let start = Instant::now();
    let last = std::sync::Mutex::new((String::new(), Instant::now()));
    let progress = |stage: &str, done: u64, total: u64| {
        let mut l = last.lock().unwrap();
        if l.0 != stage || l.1.elapsed().as_secs_f64() >= 5.0 || (total > 0 && done == total) {
            eprintln!("[{:7.1}s] {stage}: {done}/{total}", start.elapsed().as_secs_f64());
            let _ = std::io::stderr().flush();
            *l = (stage.to_string(), Instant::now());
        }
    };
    match run_retrieval(&opts, &progress) {
        Ok(report) => {
            let (md, json) = write_retrieval(&report, &out).unwrap_or_else(|e| {
                eprintln!("error: {e}");
                std::process::exit(1)
            });
            println!("wrote {} and {}", md.display(), json.display());
        }
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    }
}
