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
    let seeded = vec![Seeded { id: "ab".repeat(16), sentence: 0 }, Seeded { id: "cd".repeat(16), sentence: 1 }];
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
    assert_eq!(report.phases.len(), 6, "search, decide and write at 1 and 8 clients");
    for p in &report.phases {
        assert!(p.requests_ok_count > 0, "{p:?}");
        assert_eq!(p.errors_count, 0, "{p:?}");
        assert!(p.latency.latency_us_p50 <= p.latency.latency_us_p95 && p.latency.latency_us_p95 <= p.latency.latency_us_p99);
    }
    assert!(report.phases.iter().filter(|p| p.kind == "search").all(|p| p.hits_mean.unwrap_or(0.0) > 0.0));
    assert_eq!(report.targets.len(), 2);
    assert!(report.embed_baseline.error.is_none() && report.embed_baseline.queries_count == EMBED_BASELINE_QUERIES, "{:?}", report.embed_baseline);
    let text = std::fs::read_to_string(md).unwrap();
    assert!(text.contains("## Search") && text.contains("## Decisions") && text.contains("## Writes") && text.contains("| clients | search p95 ms"));
    assert_eq!(report.write_checks.len(), 2);
    assert!(report.write_checks.iter().all(|w| w.ok && w.writes_acknowledged_count > 0), "{:?}", report.write_checks);
    assert!(report.log_checks.iter().all(|l| l.one_chain), "{:?}", report.log_checks);
    let j: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap();
    assert!(j["phases"][0]["latency"]["latency_us_p95"].is_u64());
}

#[test]
fn schema_is_added_to_url_and_key_value_specs() {
    assert_eq!(spec_with_schema("postgres://u@h:5432/db", "s1"), "postgres://u@h:5432/db?schema=s1");
    assert_eq!(spec_with_schema("postgresql://u@h/db?sslmode=disable", "s1"), "postgresql://u@h/db?sslmode=disable&schema=s1");
    assert_eq!(spec_with_schema("postgres://u@h/db?", "s1"), "postgres://u@h/db?schema=s1");
    assert_eq!(spec_with_schema("host=127.0.0.1 port=5432 user=postgres dbname=test", "s1"), "host=127.0.0.1 port=5432 user=postgres dbname=test schema=s1");
    assert!(checks::spec_names_schema("postgres://u@h/db?sslmode=disable&schema=x"));
    assert!(checks::spec_names_schema("host=h schema=x dbname=d"));
    assert!(!checks::spec_names_schema("postgres://u@h/db?sslmode=disable"));
    assert!(!checks::spec_names_schema("host=h dbname=d"));
    assert!(checks::is_postgres_spec("postgres://u@h/db") && checks::is_postgres_spec("host=127.0.0.1 dbname=test"));
    assert!(!checks::is_postgres_spec("/var/lib/memwarden") && !checks::is_postgres_spec("sqlite://x"));
    let name = fresh_schema_name(1234, 987_654_321);
    assert_eq!(name, "mw_load_1234_987654321");
    assert!(name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'));
}

#[test]
fn clients_are_spread_round_robin_over_servers() {
    let spread = |clients: usize, servers: usize| {
        let mut per = vec![0usize; servers];
        for t in 0..clients {
            per[server_for_client(t, servers)] += 1;
        }
        per
    };
    assert_eq!(spread(1, 4), vec![1, 0, 0, 0]);
    assert_eq!(spread(8, 2), vec![4, 4]);
    assert_eq!(spread(64, 4), vec![16, 16, 16, 16]);
    assert_eq!(spread(7, 4), vec![2, 2, 2, 1]);
    assert_eq!(server_for_client(5, 1), 0);
    assert_eq!(server_for_client(5, 0), 0, "no division by zero");
}

#[test]
fn options_refuse_servers_without_store_and_a_spec_naming_a_schema() {
    let f = LoadBenchOptions::new("/tmp/x", "/bin/true");
    assert_eq!((f.servers.clone(), f.store.clone(), f.embedder), (vec![1], None, EmbedderKind::Minilm));
    assert!(LoadBenchOptions { servers: vec![1, 2], ..f.clone() }.validate().is_err());
    let pg = LoadBenchOptions { store: Some("host=127.0.0.1 dbname=test".into()), servers: vec![1, 2, 4], ..f.clone() };
    assert!(pg.validate().is_ok());
    assert!(LoadBenchOptions { servers: vec![], ..pg.clone() }.validate().is_err());
    assert!(LoadBenchOptions { servers: vec![0], ..pg.clone() }.validate().is_err());
    assert!(LoadBenchOptions { servers: vec![MAX_SERVERS + 1], ..pg.clone() }.validate().is_err());
    assert!(LoadBenchOptions { store: Some("postgres://u@h/db?schema=prod".into()), ..pg.clone() }.validate().is_err());
    assert!(LoadBenchOptions { store: Some("/some/dir".into()), ..pg.clone() }.validate().is_err());
    assert_eq!(EmbedderKind::from_name("hash").unwrap(), EmbedderKind::Hash);
    assert_eq!(EmbedderKind::from_name("minilm").unwrap().name(), "minilm");
    assert_eq!(EmbedderKind::from_name("local").unwrap(), EmbedderKind::Minilm);
    assert!(EmbedderKind::from_name("openai").is_err());
}

#[test]
fn server_command_line_carries_embedder_and_shared_store() {
    let key_dir = Path::new("/tmp/k");
    let pg = server::server_args("/tmp/d", 4242, &server::Spawn { embedder: "hash", model_dir: None, store: Some(("host=h dbname=d schema=s", key_dir)) });
    assert_eq!(
        pg,
        [
            "--data", "/tmp/d", "--embedder", "hash", "serve", "--addr", "127.0.0.1:4242", "--rate-per-sec", "0", "--batch-max", "100", "--store",
            "host=h dbname=d schema=s", "--store-key-dir", "/tmp/k"
        ]
    );
    let emb = server::server_args("/tmp/d", 1, &server::Spawn { embedder: "minilm", model_dir: Some(Path::new("/m")), store: None });
    assert_eq!(&emb[..6], ["--data", "/tmp/d", "--embedder", "minilm", "--model-dir", "/m"]);
    assert!(!emb.iter().any(|a| a == "--store"));
}

#[test]
fn listed_writes_are_counted_once_duplicated_lost_or_unaccounted() {
    let tag = |c: usize, n: u64| checks::write_tag(c, n);
    assert_eq!(checks::tag_of(&format!("Some sentence. {}", tag(3, 17))), Some("[w 3.17]"));
    assert_eq!(checks::tag_of("no tag here"), None);
    let acked = [tag(0, 0), tag(0, 1), tag(1, 0), tag(1, 1)];
    let listed = [tag(0, 0), tag(0, 1), tag(0, 1), tag(1, 0), tag(9, 9)];
    let t = checks::tally_listed(acked.iter().map(String::as_str), listed.iter().map(String::as_str));
    assert_eq!(t, checks::ListTally { once: 2, duplicated: 1, missing: 1, unacknowledged: 1 });
    let t = checks::tally_listed(acked.iter().map(String::as_str), acked.iter().map(String::as_str));
    assert_eq!(t, checks::ListTally { once: 4, duplicated: 0, missing: 0, unacknowledged: 0 });
    assert_eq!(checks::write_namespace("postgres", 4, 64), "w-pg4-c64");
    assert_eq!(checks::write_namespace("embedded", 1, 8), "w-emb1-c8");
}

fn phase(backend: &str, servers: usize, kind: &str, clients: usize, p50: u64, p95: u64) -> PhaseReport {
    PhaseReport {
        backend: backend.into(),
        servers_count: servers,
        kind: kind.into(),
        clients_count: clients,
        secs: 1.0,
        requests_ok_count: 10,
        errors_count: 0,
        errors: BTreeMap::new(),
        error_examples: vec![],
        throughput_per_sec: 10.0,
        latency: LatencySummary { count: 10, latency_us_p50: p50, latency_us_p95: p95, latency_us_p99: p95, ..LatencySummary::default() },
        hits_mean: None,
        verdicts: BTreeMap::new(),
        namespace: None,
        log_entries_appended_count: None,
        server_cpu_secs: None,
        db_cpu_secs: None,
        client_cpu_secs: None,
        load_average_start: String::new(),
    }
}

#[test]
fn ratio_pairs_embedded_with_single_server_postgres_and_judges_p50_and_p95() {
    let phases = vec![
        phase("embedded", 1, "search", 1, 1000, 2000),
        phase("embedded", 1, "decide", 1, 1000, 2000),
        phase("postgres", 1, "search", 1, 1400, 3000),
        phase("postgres", 1, "decide", 1, 1600, 2000),
        phase("postgres", 2, "search", 1, 100, 100),
    ];
    let r = checks::ratio_checks(&phases);
    assert_eq!(r.len(), 2);
    assert_eq!((r[0].kind.as_str(), r[0].postgres_latency_us_p50), ("search", 1400), "paired with the one-server row");
    assert!((r[0].ratio_p50 - 1.4).abs() < 1e-9 && (r[0].ratio_p95 - 1.5).abs() < 1e-9);
    assert!(r[0].met, "exactly 1.5x is within");
    assert!(!r[1].met, "p50 1.6x is not");
    assert!(checks::ratio_checks(&phases[..2]).is_empty(), "no postgres rows, no ratios");
}

#[test]
fn one_chain_needs_every_server_ok_on_the_same_head() {
    let v = |i: usize, ok: bool, n: u64, head: &str| checks::LogVerify {
        server_index: i,
        ok,
        entries_count: n,
        head: head.into(),
        problem: None,
        verify_ms: 1.0,
    };
    assert!(checks::one_chain(&[v(0, true, 10, "ab"), v(1, true, 10, "ab")]));
    assert!(!checks::one_chain(&[v(0, true, 10, "ab"), v(1, true, 10, "cd")]));
    assert!(!checks::one_chain(&[v(0, true, 10, "ab"), v(1, true, 11, "ab")]));
    assert!(!checks::one_chain(&[v(0, true, 10, "ab"), v(1, false, 10, "ab")]));
    assert!(!checks::one_chain(&[]));
}

#[test]
fn report_has_backend_columns_and_target_tables() {
    let mut phases = vec![phase("embedded", 1, "search", 1, 1000, 2000), phase("postgres", 1, "search", 1, 1200, 2400), phase("postgres", 2, "write", 8, 1, 2)];
    phases[2].namespace = Some("w-pg2-c8".into());
    let ratios = checks::ratio_checks(&phases);
    let seed = SeedReport {
        memories_requested_count: 1,
        memories_stored_count: 1,
        memories_failed_count: 0,
        memories_by_user_count: 0,
        memories_by_source_count: 1,
        batches_count: 1,
        batch_size: 100,
        clients_count: 2,
        secs: 1.0,
        memories_per_sec: 1.0,
        batch_latency: LatencySummary::default(),
        errors: BTreeMap::new(),
        server_cpu_secs: None,
    };
    let info = ServerInfo {
        backend: "embedded".into(),
        index: 0,
        exe: "memwarden".into(),
        args: vec!["serve".into()],
        model_dir: "none (hash embedder)".into(),
        rate_limit: "off".into(),
        batch_max: 100,
        ready_secs: 0.1,
        rss_bytes_after_seed: None,
        rss_bytes_end: None,
        data_dir_bytes_end: 0,
    };
    let r = LoadReport {
        schema: "memwarden-load/2".into(),
        date_utc: "2026-12-03T00:00:00Z".into(),
        git_rev: None,
        build_profile: "debug".into(),
        quick: true,
        seed: 1,
        phase_secs: 1.0,
        clients: vec![1],
        machine: machine(),
        embedder: "hash".into(),
        servers: vec![1, 2],
        server: info.clone(),
        corpus: CorpusInfo { roots: vec![], files_read_count: 0, stored_count: 1, held_out_count: 0, sentence_bytes_mean: 1.0, examples: vec![] },
        seed_phase: seed.clone(),
        postgres: Some(PostgresReport {
            store: "host=h dbname=d".into(),
            schema: "mw_load_1_2".into(),
            schema_dropped: Some(true),
            schema_drop_error: None,
            servers: vec![ServerInfo { backend: "postgres".into(), ..info }],
            seed_phase: seed,
        }),
        write_checks: vec![],
        log_checks: vec![LogCheck {
            backend: "postgres".into(),
            servers_count: 2,
            per_server: vec![checks::LogVerify { server_index: 0, ok: true, entries_count: 5, head: "abcdef".into(), problem: None, verify_ms: 1.0 }],
            one_chain: true,
        }],
        ratios,
        embed_baseline: EmbedBaseline { model: "hash".into(), queries_count: 0, latency: LatencySummary::default(), error: Some("not measured".into()) },
        warmup_requests_count: 0,
        phases,
        targets: vec![],
    };
    let md = report::markdown(&r);
    assert!(md.contains("| postgres × 1 | 1 |") && md.contains("| postgres × 2 | 8 |"), "{md}");
    assert!(md.contains("within 1.5× of the embedded store") && md.contains("| search | 1 | 1.00 / 2.00 / 2.00 | 1.20 / 2.40 / 2.40 | 1.20 | 1.20 |"), "{md}");
    assert!(md.contains("one unforked log per tenant") && md.contains("mw_load_1_2"), "{md}");
    let j = serde_json::to_value(&r).unwrap();
    assert!(j["ratios"][0]["postgres_latency_us_p95"].is_u64() && j["phases"][1]["servers_count"] == 1);
}

#[test]
fn postgres_cpu_is_summed_per_process_and_never_negative() {
    let start: BTreeMap<u32, f64> = [(1, 10.0), (2, 150.0), (3, 5.0)].into_iter().collect();
    // Process 2 exited (its 150 s must not make the sum negative), 4 started.
    let end: BTreeMap<u32, f64> = [(1, 12.5), (3, 5.0), (4, 0.5)].into_iter().collect();
    let d = server::postgres_cpu_between(Some(&start), Some(&end)).unwrap();
    assert!((d - 3.0).abs() < 1e-9, "{d}");
    assert_eq!(server::postgres_cpu_between(None, Some(&end)), None);
}
