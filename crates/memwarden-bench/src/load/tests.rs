use super::summary::{LatencySummary, ms, nearest_rank};
use super::*;
use crate::retrieval::utc_from_secs as civil;

#[test]
fn nearest_rank_percentiles() {
    let v: Vec<u64> = (1..=100).collect();
    assert_eq!(nearest_rank(&v, 50.0), 50);
    assert_eq!(nearest_rank(&v, 95.0), 95);
    assert_eq!(nearest_rank(&v, 99.0), 99);
    assert_eq!(nearest_rank(&v, 99.5), 100);
    assert_eq!(nearest_rank(&v, 0.0), 1);
    assert_eq!(nearest_rank(&v, 100.0), 100);
    assert_eq!(nearest_rank(&v, 250.0), 100);
    assert_eq!(nearest_rank(&v, f64::NAN), 1);
    assert_eq!(nearest_rank(&[], 50.0), 0);
    assert_eq!(nearest_rank(&[7], 99.0), 7);
    // Ten values: p95 is the 10th (ceil(9.5)), p50 the 5th.
    let v = [10, 20, 30, 40, 50, 60, 70, 80, 90, 1000];
    assert_eq!(nearest_rank(&v, 50.0), 50);
    assert_eq!(nearest_rank(&v, 90.0), 90);
    assert_eq!(nearest_rank(&v, 95.0), 1000);
    // Agrees with the shared helper on unsorted input.
    let mut rng = Rng::new(3);
    let xs: Vec<u64> = (0..997).map(|_| rng.below(1_000_000)).collect();
    let mut sorted = xs.clone();
    sorted.sort_unstable();
    for q in [1.0, 50.0, 90.0, 95.0, 99.0, 99.9] {
        assert_eq!(nearest_rank(&sorted, q), crate::stats::percentile(&xs, q), "q={q}");
    }
}

#[test]
fn summary_of_samples() {
    assert_eq!(LatencySummary::from_samples(&mut []), LatencySummary::default());
    let mut v: Vec<u64> = (1..=1000).rev().collect();
    let s = LatencySummary::from_samples(&mut v);
    assert_eq!(s.count, 1000);
    assert_eq!((s.latency_us_min, s.latency_us_max), (1, 1000));
    assert_eq!((s.latency_us_p50, s.latency_us_p90, s.latency_us_p95, s.latency_us_p99), (500, 900, 950, 990));
    assert!((s.latency_us_mean - 500.5).abs() < 1e-9);
    let mut one = vec![1234];
    let s = LatencySummary::from_samples(&mut one);
    assert_eq!((s.count, s.latency_us_p50, s.latency_us_p99, s.latency_us_max), (1, 1234, 1234, 1234));
    assert_eq!(ms(1234), "1.23");
    assert_eq!(ms(20_000), "20.00");
    // Units are in the JSON field names.
    let j = serde_json::to_value(s).unwrap();
    assert!(j.get("latency_us_p95").is_some() && j.get("latency_us_p99").is_some());
}

#[test]
fn generators_make_valid_bodies() {
    let stored: Vec<String> = ["the quick brown fox jumps over the lazy dog", "short one here"].iter().map(|s| (*s).to_owned()).collect();
    let q = Queries { stored: &stored, held_out: &[] };
    let mut rng = Rng::new(1);
    for _ in 0..200 {
        let v: serde_json::Value = serde_json::from_str(&search_body(&q, &mut rng)).unwrap();
        let query = v["query"].as_str().unwrap();
        assert!(query.split_whitespace().count() >= 3, "{query}");
        assert_eq!(v["k"], SEARCH_K);
        let p = perturb(&stored[0], &mut rng);
        let n = p.split_whitespace().count();
        assert!((3..=8).contains(&n), "{p}");
        assert!(p.split_whitespace().all(|w| stored[0].contains(w)));
    }
    let seeded = vec![Seeded { id: "ab".repeat(16) }, Seeded { id: "cd".repeat(16) }];
    let v: serde_json::Value = serde_json::from_str(&decide_body(&seeded, &mut rng)).unwrap();
    assert_eq!(v["tool"], "pay");
    let src = v["values"][0]["sources"][0].as_str().unwrap();
    assert_eq!(v["context"], serde_json::json!([src]));
    assert!(v["values"][0]["value"].as_str().unwrap().starts_with("ACCT-"));
    assert!(v["amount"].as_str().unwrap().parse::<f64>().unwrap() >= 10.0);
}

#[test]
fn options_and_dates() {
    let o = LoadBenchOptions::quick("/tmp/x", "/bin/true");
    assert_eq!((o.memories, o.clients.clone(), o.phase_secs), (1_000, vec![1, 8], 5.0));
    let f = LoadBenchOptions::new("/tmp/x", "/bin/true");
    assert_eq!((f.memories, f.clients.clone(), f.phase_secs), (10_000, vec![1, 8, 64], 20.0));
    assert!(LoadBenchOptions { clients: vec![], ..f.clone() }.validate().is_err());
    assert!(LoadBenchOptions { clients: vec![0], ..f.clone() }.validate().is_err());
    assert!(LoadBenchOptions { phase_secs: 0.0, ..f.clone() }.validate().is_err());
    assert!(LoadBenchOptions { memories: 0, ..f.clone() }.validate().is_err());
    assert!(f.validate().is_ok());
    assert_eq!(civil(0), "1970-01-01T00:00:00Z");
    assert_eq!(civil(951_782_400), "2000-02-29T00:00:00Z");
    assert_eq!(civil(1_764_548_000), "2025-12-01T00:13:20Z");
}

/// Finds the `memwarden` binary for the end-to-end test: `$MEMWARDEN_BIN`, else the newest of
/// `target/{release,debug}/memwarden` in this workspace.
fn memwarden_bin() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("MEMWARDEN_BIN") {
        return Some(PathBuf::from(p));
    }
    let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target");
    ["release", "debug"]
        .iter()
        .map(|p| target.join(p).join("memwarden"))
        .filter_map(|p| Some((std::fs::metadata(&p).ok()?.modified().ok()?, p)))
        .max_by_key(|(t, _)| *t)
        .map(|(_, p)| p)
}

/// The whole benchmark in quick mode against a real `memwarden serve` child with the real model.
/// Runs only with `MEMWARDEN_LOAD_BENCH_TEST=1` (it needs the model and a built `memwarden`
/// binary, and takes a couple of minutes); `MEMWARDEN_BIN` names the binary.
#[test]
fn quick_run_end_to_end() {
    if std::env::var("MEMWARDEN_LOAD_BENCH_TEST").as_deref() != Ok("1") {
        eprintln!("skipped: set MEMWARDEN_LOAD_BENCH_TEST=1 (needs the model and a built memwarden binary)");
        return;
    }
    let bin = memwarden_bin().expect("no memwarden binary: build it (cargo build -p memwarden) or set MEMWARDEN_BIN");
    let out = tempfile::tempdir().unwrap();
    let opts = LoadBenchOptions::quick(out.path(), &bin);
    let report = run_load(&opts, &|m| eprintln!("{m}")).unwrap();
    let (json, md) = write_load(&report, out.path()).unwrap();
    assert_eq!(report.seed_phase.memories_stored_count, 1_000, "{:?}", report.seed_phase.errors);
    assert_eq!(report.phases.len(), 4);
    for p in &report.phases {
        assert!(p.requests_ok_count > 0, "{p:?}");
        assert_eq!(p.errors_count, 0, "{p:?}");
        assert!(p.latency.latency_us_p50 <= p.latency.latency_us_p95 && p.latency.latency_us_p95 <= p.latency.latency_us_p99);
    }
    assert!(report.phases.iter().filter(|p| p.kind == "search").all(|p| p.hits_mean.unwrap_or(0.0) > 0.0));
    assert_eq!(report.targets.len(), 2);
    assert!(report.embed_baseline.error.is_none() && report.embed_baseline.queries_count == EMBED_BASELINE_QUERIES, "{:?}", report.embed_baseline);
    let text = std::fs::read_to_string(md).unwrap();
    assert!(text.contains("## Search") && text.contains("## Decisions") && text.contains("| clients | search p95 ms"));
    let j: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap();
    assert!(j["phases"][0]["latency"]["latency_us_p95"].is_u64());
}
