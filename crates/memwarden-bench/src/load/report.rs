//! `load.md`: the load benchmark's tables.

use super::summary::ms;
use super::{LoadReport, NAMESPACE, PhaseReport, SEARCH_K, TARGET_SEARCH_P95_US};
use std::fmt::Write as _;

fn mib(bytes: u64) -> String {
    format!("{:.0} MiB", bytes as f64 / (1024.0 * 1024.0))
}

fn opt_secs(x: Option<f64>) -> String {
    x.map_or_else(|| "n/a".into(), |v| format!("{v:.1}"))
}

fn errors_cell(p: &PhaseReport) -> String {
    if p.errors_count == 0 {
        "0".into()
    } else {
        let kinds: Vec<String> = p.errors.iter().map(|(k, n)| format!("{n} × {k}")).collect();
        format!("**{}** ({})", p.errors_count, kinds.join("; "))
    }
}

fn phase_table(out: &mut String, r: &LoadReport, kind: &str, rate: &str, extra: &str) {
    let _ = writeln!(
        out,
        "| clients | requests ok | {rate} | p50 ms | p95 ms | p99 ms | max ms | mean ms | errors | {extra} | server CPU s | client CPU s | load avg at start |"
    );
    let _ = writeln!(out, "|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---:|---:|---|");
    for p in r.phases.iter().filter(|p| p.kind == kind) {
        let extra_cell = match p.hits_mean {
            Some(h) => format!("{h:.2}"),
            None => p.verdicts.iter().map(|(k, n)| format!("{k} {n}")).collect::<Vec<_>>().join(", "),
        };
        let _ = writeln!(
            out,
            "| {} | {} | {:.1} | {} | {} | {} | {} | {:.2} | {} | {} | {} | {} | {} |",
            p.clients_count,
            p.requests_ok_count,
            p.throughput_per_sec,
            ms(p.latency.latency_us_p50),
            ms(p.latency.latency_us_p95),
            ms(p.latency.latency_us_p99),
            ms(p.latency.latency_us_max),
            p.latency.latency_us_mean / 1000.0,
            errors_cell(p),
            extra_cell,
            opt_secs(p.server_cpu_secs),
            opt_secs(p.client_cpu_secs),
            p.load_average_start,
        );
    }
}

/// The Markdown report.
pub fn markdown(r: &LoadReport) -> String {
    let mut s = String::new();
    let m = &r.machine;
    let _ = writeln!(s, "# HTTP load benchmark (`memwarden bench load`)\n");
    let _ = writeln!(
        s,
        "{} run, {} UTC, git `{}`, **{}** build. Machine: {}, {} logical cores, {} memory. Load average (1/5/15 min) \
         at start {}, at end {}.\n",
        if r.quick { "Quick (`--quick`)" } else { "Full" },
        r.date_utc,
        r.git_rev.as_deref().unwrap_or("unknown"),
        r.build_profile,
        m.cpu_model,
        m.cores_count,
        mib(m.memory_total_bytes),
        m.load_average_start,
        m.load_average_end,
    );
    let _ = writeln!(
        s,
        "**Setup.** The server is a separate process, `memwarden {}` on loopback, with the real embedder \
         (all-MiniLM-L6-v2 on the CPU, from `{}`) and a fresh data directory; the per-key rate limit is {}. The load \
         generator is the `bench load` process: C OS threads, each with its own HTTP client and keep-alive \
         connection (opened before the clock starts), released together, sending requests back to back for \
         {} s per phase as one agent API key. **Server and load generator share the same {} cores**, so the \
         client's CPU time (shown per phase) is taken from the server. Latency runs from sending the request \
         to reading the last byte of the answer. Errors (non-2xx, transport failures, unreadable bodies) are \
         counted and left out of the percentiles; none are retried. {} unrecorded warm-up requests preceded \
         the first phase. Server ready {:.1} s after spawning.\n",
        r.server.args.iter().skip_while(|a| a.as_str() != "serve").cloned().collect::<Vec<_>>().join(" "),
        r.server.model_dir,
        r.server.rate_limit,
        r.phase_secs,
        m.cores_count,
        r.warmup_requests_count,
        r.server.ready_secs,
    );

    let sd = &r.seed_phase;
    let _ = writeln!(s, "## Seeding\n");
    let _ = writeln!(
        s,
        "{} distinct English sentences (mean {:.0} bytes) from documentation on this machine ({} files read; e.g. \
         “{}”), stored with `POST /v1/memories` in batches of {} from {} client threads: nine batches in ten by a \
         mail source (`inbox`, untrusted external), one in ten by a user (`alice`, trusted). Every memory is \
         embedded, labelled, indexed and logged by the server before its batch is answered.\n",
        r.corpus.stored_count,
        r.corpus.sentence_bytes_mean,
        r.corpus.files_read_count,
        r.corpus.examples.first().map_or("", String::as_str),
        sd.batch_size,
        sd.clients_count,
    );
    let _ = writeln!(s, "| memories stored | failed | by source / by user | seconds | memories/s (incl. embedding) | batch p50 ms | batch p95 ms | server CPU s | server RSS after | data dir at end |");
    let _ = writeln!(s, "|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|");
    let _ = writeln!(
        s,
        "| {} | {} | {} / {} | {:.1} | {:.1} | {} | {} | {} | {} | {} |\n",
        sd.memories_stored_count,
        sd.memories_failed_count,
        sd.memories_by_source_count,
        sd.memories_by_user_count,
        sd.secs,
        sd.memories_per_sec,
        ms(sd.batch_latency.latency_us_p50),
        ms(sd.batch_latency.latency_us_p95),
        opt_secs(sd.server_cpu_secs),
        r.server.rss_bytes_after_seed.map_or_else(|| "n/a".into(), mib),
        mib(r.server.data_dir_bytes_end),
    );
    if !sd.errors.is_empty() {
        let _ = writeln!(s, "Seeding errors: {:?}\n", sd.errors);
    }

    let _ = writeln!(s, "## Search\n");
    let _ = writeln!(
        s,
        "`POST /v1/search {{\"namespace\": \"{NAMESPACE}\", \"query\": …, \"k\": {SEARCH_K}}}` as the agent. A query is a \
         stored sentence, a random span of one with a word dropped, or a sentence that was not stored (one third \
         each). **The latency includes embedding the query on the server**, the guarded HNSW search, reading \
         back and verifying every hit against the log, and the lineage rerank.\n"
    );
    let eb = &r.embed_baseline;
    match &eb.error {
        None => {
            let _ = writeln!(
                s,
                "For comparison, **query embedding alone** ({}, in the load-generator process, one query per call, \
                 server idle, {} queries drawn the same way): p50 {} ms, p95 {} ms, p99 {} ms, mean {:.2} ms.\n",
                eb.model,
                eb.queries_count,
                ms(eb.latency.latency_us_p50),
                ms(eb.latency.latency_us_p95),
                ms(eb.latency.latency_us_p99),
                eb.latency.latency_us_mean / 1000.0,
            );
        }
        Some(e) => {
            let _ = writeln!(s, "(No in-process embedding baseline: {e}.)\n");
        }
    }
    phase_table(&mut s, r, "search", "searches/s", "hits per search");

    let _ = writeln!(s, "\n## Decisions\n");
    let _ = writeln!(
        s,
        "`POST /v1/actions/decide` as the agent: a high-risk `pay` of a random amount to an account taken from a \
         random stored memory (the value's source), with that memory in context (nine in ten were written by the untrusted mail source, so most verdicts are refusals: the point here is their cost). Each decision \
         runs the authority gate and the lineage action gate and appends the verdict to the hash-chained log \
         in its own SQLite transaction before it is answered.\n"
    );
    phase_table(&mut s, r, "decide", "decisions/s", "verdicts");

    let _ = writeln!(s, "\n## Target: search p95 incl. query embedding ≤ {} ms (10× below Mem0's reported 200 ms)\n", ms(TARGET_SEARCH_P95_US));
    let _ = writeln!(s, "| clients | search p95 ms | target ms | met |");
    let _ = writeln!(s, "|---:|---:|---:|---|");
    for t in &r.targets {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} |",
            t.clients_count,
            ms(t.search_latency_us_p95),
            ms(t.target_latency_us_p95),
            if t.met { "yes" } else { "**no**" }
        );
    }
    let _ = writeln!(
        s,
        "\nWith C clients sending back to back, a request's latency includes the time it waits behind the other \
         C − 1 (closed loop; Little's law: mean latency ≈ C / throughput), so the p95 at high C measures queueing on \
         {} cores more than the cost of one search.",
        m.cores_count
    );

    let failing: Vec<&PhaseReport> = r.phases.iter().filter(|p| p.errors_count > 0).collect();
    if !failing.is_empty() {
        let _ = writeln!(s, "\n## Errors\n");
        for p in failing {
            let _ = writeln!(s, "- {} with {} client(s): {} error(s): {:?}", p.kind, p.clients_count, p.errors_count, p.errors);
            for e in &p.error_examples {
                let _ = writeln!(s, "  - `{}`", e.replace('`', "'"));
            }
        }
    }
    let _ = writeln!(s, "\nRaw numbers (every percentile in µs, CPU times, RSS): `load.json`; the server's log: `server.log`.");
    s
}
