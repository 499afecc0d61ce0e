//! `load.md`: the load benchmark's tables.

use super::summary::ms;
use super::{LoadReport, NAMESPACE, PhaseReport, SEARCH_K, SeedReport, ServerInfo, TARGET_PG_LATENCY_RATIO, TARGET_SEARCH_P95_US};
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

fn opt_u64(x: Option<u64>) -> String {
    x.map_or_else(|| "n/a".into(), |v| v.to_string())
}

/// `embedded` / `postgres × N`.
fn row_name(backend: &str, servers: usize) -> String {
    if backend == "postgres" { format!("postgres × {servers}") } else { backend.to_owned() }
}

fn phase_table(out: &mut String, r: &LoadReport, kind: &str, rate: &str, extra: &str) {
    let _ = writeln!(
        out,
        "| store × servers | clients | requests ok | {rate} | p50 ms | p95 ms | p99 ms | max ms | mean ms | errors | {extra} | log entries appended | server CPU s | DB CPU s | client CPU s | load avg at start |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---:|---:|---:|---:|---|");
    for p in r.phases.iter().filter(|p| p.kind == kind) {
        let extra_cell = match (&p.hits_mean, &p.namespace) {
            (Some(h), _) => format!("{h:.2}"),
            (None, Some(ns)) => format!("`{ns}`"),
            (None, None) => p.verdicts.iter().map(|(k, n)| format!("{k} {n}")).collect::<Vec<_>>().join(", "),
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {:.1} | {} | {} | {} | {} | {:.2} | {} | {} | {} | {} | {} | {} | {} |",
            row_name(&p.backend, p.servers_count),
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
            opt_u64(p.log_entries_appended_count),
            opt_secs(p.server_cpu_secs),
            if p.backend == "postgres" { opt_secs(p.db_cpu_secs) } else { "–".into() },
            opt_secs(p.client_cpu_secs),
            p.load_average_start,
        );
    }
}

fn seed_row(s: &mut String, name: &str, sd: &SeedReport, server: Option<&ServerInfo>) {
    let _ = writeln!(
        s,
        "| {name} | {} | {} | {} / {} | {:.1} | {:.1} | {} | {} | {} | {} | {} |",
        sd.memories_stored_count,
        sd.memories_failed_count,
        sd.memories_by_source_count,
        sd.memories_by_user_count,
        sd.secs,
        sd.memories_per_sec,
        ms(sd.batch_latency.latency_us_p50),
        ms(sd.batch_latency.latency_us_p95),
        opt_secs(sd.server_cpu_secs),
        server.and_then(|v| v.rss_bytes_after_seed).map_or_else(|| "n/a".into(), mib),
        server.map_or_else(|| "n/a".into(), |v| mib(v.data_dir_bytes_end)),
    );
}

fn yes_no(b: bool) -> &'static str {
    if b { "yes" } else { "**no**" }
}

/// The Markdown report.
pub fn markdown(r: &LoadReport) -> String {
    let mut s = String::new();
    let m = &r.machine;
    let hash = r.embedder == "hash";
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
    let embedder = if hash {
        "the **hash embedder** (`--embedder hash`: feature hashing, the model taken out, so the numbers show the \
         server and the store rather than the model)"
            .to_owned()
    } else {
        format!("the real embedder (all-MiniLM-L6-v2 on the CPU, from `{}`)", r.server.model_dir)
    };
    let _ = writeln!(
        s,
        "**Setup.** Each server is a separate process, `memwarden {}` on loopback, with {embedder} and a fresh \
         data directory; the per-key rate limit is {}. The load generator is the `bench load` process: C OS \
         threads, each with its own HTTP client and keep-alive connection (opened before the clock starts), \
         released together, sending requests back to back for {} s per phase as one agent API key. **Servers, \
         load generator{} share the same {} cores**, so the client's CPU time (shown per phase) is taken from the \
         server. Latency runs from sending the request to reading the last byte of the answer. Errors (non-2xx, \
         transport failures, unreadable bodies) are counted and left out of the percentiles; none are retried. \
         {} unrecorded warm-up requests preceded the first phase of each store. Embedded server ready {:.1} s \
         after spawning.\n",
        r.server.args.iter().skip_while(|a| a.as_str() != "serve").cloned().collect::<Vec<_>>().join(" "),
        r.server.rate_limit,
        r.phase_secs,
        if r.postgres.is_some() { " and the PostgreSQL server" } else { "" },
        m.cores_count,
        r.warmup_requests_count,
        r.server.ready_secs,
    );
    if let Some(pg) = &r.postgres {
        let _ = writeln!(
            s,
            "**PostgreSQL** (`--store {}`): a fresh schema `{}` ({}), server counts {:?} started one after another \
             on it with one shared `--store-key-dir` (`memwarden ... serve ... --store <spec>?schema={} \
             --store-key-dir DIR`); with N servers, client thread t talks to server t mod N (round-robin). The \
             servers stay up between server counts, so the 2- and 4-server rows run on the store the earlier rows \
             left (seeded memories plus the earlier phases' decisions and writes). Servers ready after {}. The \
             embedded store (SQLite in one server's data directory) is measured first in the same run as the \
             baseline. DB CPU s sums every `postgres` process on the machine (other users of the database \
             included).\n",
            pg.store,
            pg.schema,
            match (pg.schema_dropped, &pg.schema_drop_error) {
                (Some(true), _) => "dropped at the end".to_owned(),
                (Some(false), Some(e)) => format!("**not dropped**: {e}"),
                _ => "left in place".to_owned(),
            },
            r.servers,
            pg.schema,
            pg.servers.iter().map(|v| format!("{:.1} s", v.ready_secs)).collect::<Vec<_>>().join(", "),
        );
    }

    let sd = &r.seed_phase;
    let _ = writeln!(s, "## Seeding\n");
    let _ = writeln!(
        s,
        "{} distinct English sentences (mean {:.0} bytes) from documentation on this machine ({} files read; e.g. \
         “{}”), stored with `POST /v1/memories` in batches of {} from {} client threads (through server 0): nine \
         batches in ten by a mail source (`inbox`, untrusted external), one in ten by a user (`alice`, trusted). \
         Every memory is embedded, labelled, indexed and logged by the server before its batch is answered.\n",
        r.corpus.stored_count,
        r.corpus.sentence_bytes_mean,
        r.corpus.files_read_count,
        r.corpus.examples.first().map_or("", String::as_str),
        sd.batch_size,
        sd.clients_count,
    );
    let _ = writeln!(
        s,
        "| store | memories stored | failed | by source / by user | seconds | memories/s (incl. embedding) | batch p50 ms | batch p95 ms | server CPU s | server RSS after | data dir at end |"
    );
    let _ = writeln!(s, "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|");
    seed_row(&mut s, "embedded", sd, Some(&r.server));
    if let Some(pg) = &r.postgres {
        seed_row(&mut s, "postgres", &pg.seed_phase, pg.servers.first());
    }
    let _ = writeln!(s);
    for (name, e) in std::iter::once(("embedded", &sd.errors)).chain(r.postgres.iter().map(|p| ("postgres", &p.seed_phase.errors))) {
        if !e.is_empty() {
            let _ = writeln!(s, "Seeding errors ({name}): {e:?}\n");
        }
    }

    let _ = writeln!(s, "## Search\n");
    let _ = writeln!(
        s,
        "`POST /v1/search {{\"namespace\": \"{NAMESPACE}\", \"query\": …, \"k\": {SEARCH_K}}}` as the agent. A query is a \
         stored sentence, a random span of one with a word dropped, or a sentence that was not stored (one third \
         each). **The latency includes embedding the query on the server**{}, the guarded HNSW search, reading \
         back and verifying every hit against the log, and the lineage rerank.\n",
        if hash { " (here the hash embedder: microseconds)" } else { "" }
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
         in its own transaction (SQLite, or PostgreSQL under the tenant's advisory lock) before it is answered.\n"
    );
    phase_table(&mut s, r, "decide", "decisions/s", "verdicts");

    let _ = writeln!(s, "\n## Writes\n");
    let _ = writeln!(
        s,
        "`POST /v1/memories` as the agent, one memory per request: a seeded sentence with a unique tag \
         (`[w <client>.<n>]`) appended, into a namespace of the phase's own (`w-<store><servers>-c<clients>`). Each \
         write is embedded, gated, indexed and logged before it is answered.\n"
    );
    phase_table(&mut s, r, "write", "writes/s", "namespace");

    if !r.write_checks.is_empty() {
        let _ = writeln!(s, "\n### Every acknowledged write, afterwards\n");
        let _ = writeln!(
            s,
            "Each write answered 2xx with an id is read back by that id through the *next* server round-robin \
             (`GET /v1/memories/{{id}}`, content tag compared), and the phase's namespace is listed once \
             (`GET /v1/memories?namespace=…&limit=10000`) and every tag counted: an acknowledged tag listed twice is a \
             duplicated write, one not listed is lost, a listed tag no acknowledged write had is unaccounted. The \
             tenant's log growth during the phase (`/v1/audit/verify` before and after) is shown next to it.\n"
        );
        let _ = writeln!(
            s,
            "| store × servers | clients | acknowledged | distinct ids | read back | listed | listed once | duplicated | lost | unaccounted | log entries appended | ok |"
        );
        let _ = writeln!(s, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|");
        for w in &r.write_checks {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                row_name(&w.backend, w.servers_count),
                w.clients_count,
                w.writes_acknowledged_count,
                w.ids_distinct_count,
                w.read_back_count,
                opt_u64(w.listed_count),
                opt_u64(w.listed_once_count),
                opt_u64(w.duplicated_count),
                opt_u64(w.lost_count),
                opt_u64(w.unacknowledged_listed_count),
                opt_u64(w.log_entries_appended_count),
                yes_no(w.ok),
            );
        }
        for w in r.write_checks.iter().filter(|w| !w.examples.is_empty()) {
            let _ = writeln!(s, "\n- {} {} clients: {}", row_name(&w.backend, w.servers_count), w.clients_count, w.examples.join("; "));
        }
    }

    if !r.log_checks.is_empty() {
        let _ = writeln!(s, "\n## The tenant's log after each configuration\n");
        let _ = writeln!(s, "`GET /v1/audit/verify` with the user's key through every server, with no load running.\n");
        let _ = writeln!(s, "| store × servers | per server: ok, entries, head, verify ms | one chain |");
        let _ = writeln!(s, "|---|---|---|");
        for l in &r.log_checks {
            let cells: Vec<String> = l
                .per_server
                .iter()
                .map(|v| {
                    format!(
                        "#{}: {}, {}, `{}`, {:.0}{}",
                        v.server_index,
                        if v.ok { "ok" } else { "**failed**" },
                        v.entries_count,
                        v.head.get(..12).unwrap_or(&v.head),
                        v.verify_ms,
                        v.problem.as_deref().map_or_else(String::new, |p| format!(" ({p})"))
                    )
                })
                .collect();
            let _ = writeln!(s, "| {} | {} | {} |", row_name(&l.backend, l.servers_count), cells.join("<br>"), yes_no(l.one_chain));
        }
    }

    if !r.ratios.is_empty() {
        let _ = writeln!(s, "\n## Target: single-server PostgreSQL latency within {TARGET_PG_LATENCY_RATIO}× of the embedded store\n");
        let _ = writeln!(s, "Judged on p50 and p95 (both must be within); p99 shown.\n");
        let _ = writeln!(s, "| operation | clients | embedded p50 / p95 / p99 ms | postgres × 1 p50 / p95 / p99 ms | ratio p50 | ratio p95 | ratio p99 | met |");
        let _ = writeln!(s, "|---|---:|---|---|---:|---:|---:|---|");
        for c in &r.ratios {
            let _ = writeln!(
                s,
                "| {} | {} | {} / {} / {} | {} / {} / {} | {:.2} | {:.2} | {:.2} | {} |",
                c.kind,
                c.clients_count,
                ms(c.embedded_latency_us_p50),
                ms(c.embedded_latency_us_p95),
                ms(c.embedded_latency_us_p99),
                ms(c.postgres_latency_us_p50),
                ms(c.postgres_latency_us_p95),
                ms(c.postgres_latency_us_p99),
                c.ratio_p50,
                c.ratio_p95,
                c.ratio_p99,
                yes_no(c.met),
            );
        }
    }

    if r.postgres.is_some() {
        let _ = writeln!(s, "\n## Target: zero errors, zero lost or duplicated writes, one unforked log per tenant\n");
        let _ = writeln!(s, "| store × servers | errors (all phases) | writes lost | writes duplicated | writes not read back | one chain | met |");
        let _ = writeln!(s, "|---|---:|---:|---:|---:|---|---|");
        for l in &r.log_checks {
            let ph = r.phases.iter().filter(|p| p.backend == l.backend && p.servers_count == l.servers_count);
            let errors: u64 = ph.map(|p| p.errors_count).sum();
            let wc: Vec<_> = r.write_checks.iter().filter(|w| w.backend == l.backend && w.servers_count == l.servers_count).collect();
            let lost: Option<u64> = wc.iter().map(|w| w.lost_count).sum();
            let dup: Option<u64> = wc.iter().map(|w| w.duplicated_count).sum();
            let unread: u64 = wc.iter().map(|w| w.not_read_back_count).sum();
            let met = errors == 0 && wc.iter().all(|w| w.ok) && l.one_chain;
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {} | {} |",
                row_name(&l.backend, l.servers_count),
                errors,
                opt_u64(lost),
                opt_u64(dup),
                unread,
                yes_no(l.one_chain),
                yes_no(met)
            );
        }
    }

    let _ = writeln!(s, "\n## Target: search p95 incl. query embedding ≤ {} ms (10× below Mem0's reported 200 ms)\n", ms(TARGET_SEARCH_P95_US));
    let _ = writeln!(s, "| store × servers | clients | search p95 ms | target ms | met |");
    let _ = writeln!(s, "|---|---:|---:|---:|---|");
    for t in &r.targets {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} |",
            row_name(&t.backend, t.servers_count),
            t.clients_count,
            ms(t.search_latency_us_p95),
            ms(t.target_latency_us_p95),
            yes_no(t.met)
        );
    }
    let _ = writeln!(
        s,
        "\nWith C clients sending back to back, a request's latency includes the time it waits behind the other \
         C − 1 (closed loop; Little's law: mean latency ≈ C / throughput), so the p95 at high C measures queueing on \
         {} cores more than the cost of one request.",
        m.cores_count
    );

    let failing: Vec<&PhaseReport> = r.phases.iter().filter(|p| p.errors_count > 0).collect();
    if !failing.is_empty() {
        let _ = writeln!(s, "\n## Errors\n");
        for p in failing {
            let _ = writeln!(
                s,
                "- {} {} with {} client(s): {} error(s): {:?}",
                row_name(&p.backend, p.servers_count),
                p.kind,
                p.clients_count,
                p.errors_count,
                p.errors
            );
            for e in &p.error_examples {
                let _ = writeln!(s, "  - `{}`", e.replace('`', "'"));
            }
        }
    }
    let _ = writeln!(
        s,
        "\nRaw numbers (every percentile in µs, CPU times, RSS): `load.json`; the servers' logs: `server.log` (embedded), `server-pg-<i>.log`."
    );
    s
}
