//! `retrieval.md` and `retrieval.json`.

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

use super::{BenchError, ClassedRun, GuardedPoint, Latency, RetrievalReport, SizeRun, io_err};

/// Writes `retrieval.md` and `retrieval.json` into `out_dir` (created if needed); returns
/// their paths.
pub fn write_retrieval(report: &RetrievalReport, out_dir: &Path) -> Result<(PathBuf, PathBuf), BenchError> {
    fs::create_dir_all(out_dir).map_err(io_err(format!("creating {}", out_dir.display())))?;
    let json_path = out_dir.join("retrieval.json");
    let md_path = out_dir.join("retrieval.md");
    let json = serde_json::to_string_pretty(report)
        .map_err(|e| BenchError::Io { context: "encoding retrieval.json".into(), source: e.into() })?;
    fs::write(&json_path, json + "\n").map_err(io_err(format!("writing {}", json_path.display())))?;
    fs::write(&md_path, markdown(report)).map_err(io_err(format!("writing {}", md_path.display())))?;
    Ok((md_path, json_path))
}

fn ms(us: f64) -> String {
    format!("{:.3}", us / 1000.0)
}

fn lat(l: &Latency) -> String {
    format!("{} | {}", ms(l.p50_us), ms(l.p99_us))
}

fn paths(p: &GuardedPoint) -> String {
    p.paths.iter().map(|(k, v)| format!("{k}: {v}")).collect::<Vec<_>>().join(", ")
}

fn mib(bytes: f64) -> String {
    format!("{:.1} MiB", bytes / (1024.0 * 1024.0))
}

/// The Markdown report.
pub(crate) fn markdown(r: &RetrievalReport) -> String {
    let mut s = String::new();
    let o = &r.options;
    let _ = writeln!(s, "# Retrieval benchmark\n");
    let _ = writeln!(
        s,
        "Revision `{}`, started {} UTC, {:.0} s in total. Machine: {} ({} logical cores, {} RAM), \
         usearch {} ({}). Load average (1/5/15 min) at start {}, at end {}: other work on the machine \
         during the run slows every timing below.\n",
        r.revision,
        r.started_utc.trim_end_matches('Z').replace('T', " "),
        r.total_secs,
        r.machine.cpu_model,
        r.machine.cores_count,
        mib(r.machine.memory_total_bytes as f64),
        r.machine.usearch_version,
        r.machine.usearch_simd,
        r.machine.load_average_start,
        r.machine.load_average_end
    );
    let _ = writeln!(s, "All numbers below were measured by this run; latency is wall-clock time of one call on one thread.\n");

    let _ = writeln!(s, "## Data\n");
    let c = &r.corpus;
    let _ = writeln!(
        s,
        "- Real English sentences: {} distinct sentences (5–60 words, deduplicated case-insensitively) from {} files \
         under {}, in a fixed order; {} indexed, {} held out as queries (spread evenly through the list, never \
         indexed).",
        c.sentences_read_count,
        c.files_read_count,
        c.roots.iter().map(|x| format!("`{x}`")).collect::<Vec<_>>().join(", "),
        c.indexed_count,
        c.queries_count
    );
    let _ = writeln!(s, "- Examples: {}", c.examples.iter().map(|e| format!("“{e}”")).collect::<Vec<_>>().join(" / "));
    let _ = writeln!(
        s,
        "- Embeddings: {} ({} dims). {}",
        r.embedding.model,
        o.index.dims,
        if c.cache_hit {
            format!("Read from the cache `{}`.", c.cache_file)
        } else {
            format!("Computed in {:.0} s and cached in `{}`.", c.embedding_secs, c.cache_file)
        }
    );
    let _ = writeln!(s, "- Sizes above the real count: {}", r.synthetic_method);
    let _ = writeln!(
        s,
        "- Class-aligned permission filters (the store's path): every key is assigned to an access class by a hash \
         of the key (independent of content) with the shares of the layout below; the index is partitioned by class \
         (`ClassedIndex`: a graph per class of at least {} vectors, an exactly scanned block per smaller class). \
         A reader may read the classes that admit everyone or name it; the rows \"10%\" and \"1%\" are readers \
         whose classes add up to ~10% and ~1% of N. A search walks each readable class's graph unfiltered (one \
         `ef` for all), scans its blocks, merges the per-class top-k, and checks every candidate against a \
         key→class hash map (the store's catalog check).",
        o.class_graph_min_count
    );
    let _ = writeln!(
        s,
        "- Uncorrelated filters (extra rows, not the store's path): each key gets a pseudo-random group (a hash of \
         the key); a filter admits a fixed share of groups, looked up in a bitmap during a filtered walk of the \
         single graph over all N. Those searches pass the eligible count as the estimate unless stated otherwise.\n"
    );

    let _ = writeln!(s, "## Embedding throughput\n");
    let e = &r.embedding;
    let _ = writeln!(s, "| mode | sentences | sentences/s |\n|---|---:|---:|");
    let _ = writeln!(s, "| single (one sentence per call) | {} | {:.1} |", e.single_count, e.single_sentences_per_sec);
    let _ = writeln!(
        s,
        "| batched (one call, {} per forward pass) | {} | {:.1} |",
        e.batch_size, e.batched_count, e.batched_sentences_per_sec
    );
    if let Some(rate) = e.corpus_sentences_per_sec {
        let _ = writeln!(s, "| whole corpus, batched, this run | {} | {:.1} |", c.indexed_count + c.queries_count, rate);
    }
    let _ = writeln!(s);

    let _ = writeln!(s, "## Targets\n");
    let _ = writeln!(s, "| check | target | measured | met |\n|---|---|---|---|");
    for t in &r.targets {
        let _ = writeln!(s, "| {} | {} | {} | {} |", t.name, t.target, t.measured, if t.met { "yes" } else { "**no**" });
    }
    let _ = writeln!(s);

    for run in &r.runs {
        let _ = writeln!(s, "## N = {}\n", run.n);
        let synth = run.n - run.real_count;
        let _ = writeln!(
            s,
            "{} real embeddings{}. HNSW M = {}, ef_construction = {}, f32 vectors, inner product on unit vectors.\n",
            run.real_count,
            if synth > 0 {
                format!(
                    " + {} synthetic (mean cosine to their real anchor {:.3})",
                    synth,
                    run.synthetic_anchor_cosine_mean.unwrap_or(0.0)
                )
            } else {
                String::new()
            },
            run.config.connectivity,
            run.config.expansion_add
        );
        let _ = writeln!(s, "| measure | value |\n|---|---:|");
        let _ = writeln!(s, "| build time ({} threads) | {:.1} s |", run.build_threads, run.build_secs);
        let _ = writeln!(s, "| memory (graph + vectors + key table) | {} |", mib(run.memory_bytes as f64));
        let _ = writeln!(s, "| memory per vector | {:.0} bytes ({} for the f32 vector itself) |", run.memory_bytes_per_vector, o.index.dims * 4);
        let _ = writeln!(s, "| saved file | {} |", mib(run.persist.file_bytes as f64));
        let _ = writeln!(s, "| save / load (with checksum) | {:.2} s / {:.2} s |", run.persist.save_secs, run.persist.load_secs);
        let _ = writeln!(
            s,
            "| loaded index: same top-10 on {} queries, watermark restored | {} / {} |",
            run.persist.checked_queries_count,
            if run.persist.same_results { "yes" } else { "**no**" },
            if run.persist.watermark_ok { "yes" } else { "**no**" }
        );
        let _ = writeln!(s, "| brute-force ground truth ({} queries, all cores) | {:.1} s |", r.corpus.queries_count, run.ground_truth_secs);
        let _ = writeln!(s, "| `AnnIndex::exact_search` agrees with the benchmark's brute force (20 queries) | {} |\n", if run.oracle_agrees { "yes" } else { "**no**" });

        let _ = writeln!(s, "### Unguarded search (k = 10)\n");
        let _ = writeln!(s, "| ef | recall@10 | p50 ms | p99 ms |\n|---:|---:|---:|---:|");
        for p in &run.unguarded_sweep {
            let mark = if p.ef == run.unguarded.ef { " ←" } else { "" };
            let _ = writeln!(s, "| {}{} | {:.4} | {} |", p.ef, mark, p.recall_at_10, lat(&p.latency));
        }
        let _ = writeln!(
            s,
            "\nOperating point (←): ef = {}, the smallest reaching recall@10 ≥ {:.2}. Unguarded k = 5 at this ef: p50 {} ms, p99 {} ms.\n",
            run.unguarded.ef,
            o.recall_target,
            ms(run.unguarded_top5.p50_us),
            ms(run.unguarded_top5.p99_us)
        );

        if let Some(c) = &run.classed {
            classed_section(&mut s, run, c);
        }
        for f in &run.filters {
            let _ = writeln!(
                s,
                "### Extra row: guarded search with the {} filter on the single graph ({} eligible, {:.2}%)\n",
                f.label,
                f.eligible_count,
                f.eligible_fraction * 100.0
            );
            let _ = writeln!(
                s,
                "| ef (filtered) | recall@10 vs brute force over eligible | p50 ms | p99 ms | paths | ineligible hits | short results |\n|---:|---:|---:|---:|---|---:|---:|"
            );
            for p in &f.sweep {
                let mark = if p.ef == f.chosen.ef { " ←" } else { "" };
                let _ = writeln!(
                    s,
                    "| {}{} | {:.4} | {} | {} | {} | {} |",
                    p.ef,
                    mark,
                    p.recall_at_10,
                    lat(&p.latency),
                    paths(p),
                    p.ineligible_returned_count,
                    p.short_results_count
                );
            }
            let _ = writeln!(s);
            let _ = writeln!(s, "| at the operating point | recall | p50 ms | p99 ms | paths | ineligible | short |\n|---|---:|---:|---:|---|---:|---:|");
            for (name, p) in [("k = 10", &f.chosen), ("k = 5", &f.top5), ("k = 10, no estimate", &f.without_estimate)] {
                let _ = writeln!(
                    s,
                    "| {} | {:.4} | {} | {} | {} | {} |",
                    name,
                    p.recall_at_10,
                    lat(&p.latency),
                    paths(p),
                    p.ineligible_returned_count,
                    p.short_results_count
                );
            }
            let _ = writeln!(
                s,
                "\nGuard overhead at (at least) the same recall: k = 10 p50 {} ms vs unguarded {} ms = {:+.1}%; \
                 k = 5: {:+.1}%. Top-10 identical to brute force over the eligible items for {}/{} queries.\n",
                ms(f.chosen.latency.p50_us),
                ms(run.unguarded.latency.p50_us),
                f.overhead_vs_unguarded_pct,
                f.overhead_top5_vs_unguarded_pct,
                f.exact_agreement_count,
                f.queries_count
            );
        }
    }

    let _ = writeln!(s, "## Method notes\n");
    let _ = writeln!(
        s,
        "- recall@10: fraction of the true top-10 (brute force over all vectors, or over the eligible ones for guarded \
         search, computed independently of the index) found in the returned top-10; a hit whose score ties the 10th \
         true score (within 1e-5) counts, so exact ties are not misses.\n\
         - Latency: {} queries per setting after 50 warm-up queries; p50/p99 are nearest-rank percentiles.\n\
         - Class-aligned guarded search (`ClassedIndex::search`, the code the store runs): no filter during any \
         walk; a class walk that comes back short after the post-walk checks is replaced by an exact scan of that \
         class, so results are never short. Every hit is checked against the reader's classes by the benchmark \
         (ineligible hits). The class-walk `ef` sweep stops at the first `ef` whose recall reaches the unguarded \
         operating point's; the overhead compares p50 latencies at those two points.\n\
         - Uncorrelated guarded search (extra rows): the filter admits nodes to the candidate list during the HNSW \
         walk (usearch filtered search); ineligible nodes are never ranked. Every returned hit is checked against \
         the filter again. If the caller's eligible estimate is below max({}, {}% of N) the exact path scans the \
         eligible keys; if the filtered walk returns fewer than k hits, the exact path runs as well. `ef` of the \
         filtered walk is chosen separately, the smallest whose recall reaches the unguarded operating point's.",
        r.corpus.queries_count,
        memwarden_index::EXACT_FALLBACK_MIN_ELIGIBLE_COUNT,
        memwarden_index::EXACT_FALLBACK_ELIGIBLE_PERCENT
    );
    s
}

fn classed_section(s: &mut String, run: &SizeRun, c: &ClassedRun) {
    let _ = writeln!(s, "### Guarded search, class-aligned (`ClassedIndex`, the store's path)\n");
    let _ = writeln!(s, "| measure | value |\n|---|---:|");
    let _ = writeln!(s, "| classes / with their own graph | {} / {} |", c.classes_count, c.graph_classes_count);
    let _ = writeln!(s, "| vectors in graphs / in blocks | {} / {} |", c.graph_vectors_count, c.block_vectors_count);
    let _ = writeln!(s, "| build time ({} threads, graphs only) | {:.1} s |", run.build_threads, c.build_secs);
    let _ = writeln!(s, "| memory (graphs + blocks + key maps) | {} |", mib(c.memory_bytes as f64));
    let _ = writeln!(s, "| saved file | {} |", mib(c.persist.file_bytes as f64));
    let _ = writeln!(s, "| save / load (with checksum) | {:.2} s / {:.2} s |", c.persist.save_secs, c.persist.load_secs);
    let _ = writeln!(
        s,
        "| loaded index: same top-10 over all classes on {} queries, watermark restored | {} / {} |\n",
        c.persist.checked_queries_count,
        if c.persist.same_results { "yes" } else { "**no**" },
        if c.persist.watermark_ok { "yes" } else { "**no**" }
    );
    let _ = writeln!(s, "| class | readers | classes | vectors | with a graph |\n|---|---|---:|---:|---:|");
    for row in &c.layout {
        let _ = writeln!(s, "| {} | {} | {} | {} | {} |", row.name, row.readers, row.classes_count, row.count, row.graph_classes_count);
    }
    let _ = writeln!(s);
    for f in &c.readers {
        let _ = writeln!(
            s,
            "#### Class-aligned filter {}: reader `{}` ({} eligible, {:.2}%; classes {}, {} with a graph; {:.0} rows scanned exactly per query)\n",
            f.label,
            f.reader,
            f.eligible_count,
            f.eligible_fraction * 100.0,
            f.classes.join(", "),
            f.graph_classes_count,
            f.rows_scanned_per_query
        );
        let _ = writeln!(
            s,
            "| ef (class walks) | recall@10 vs brute force over eligible | p50 ms | p99 ms | paths | ineligible hits | short results |\n|---:|---:|---:|---:|---|---:|---:|"
        );
        for p in &f.sweep {
            let mark = if p.ef == f.chosen.ef { " ←" } else { "" };
            let _ = writeln!(
                s,
                "| {}{} | {:.4} | {} | {} | {} | {} |",
                p.ef,
                mark,
                p.recall_at_10,
                lat(&p.latency),
                paths(p),
                p.ineligible_returned_count,
                p.short_results_count
            );
        }
        let _ = writeln!(s);
        let _ = writeln!(s, "| at the operating point | recall | p50 ms | p99 ms | paths | ineligible | short |\n|---|---:|---:|---:|---|---:|---:|");
        for (name, p) in [("k = 10", &f.chosen), ("k = 5", &f.top5)] {
            let _ = writeln!(
                s,
                "| {} | {:.4} | {} | {} | {} | {} |",
                name,
                p.recall_at_10,
                lat(&p.latency),
                paths(p),
                p.ineligible_returned_count,
                p.short_results_count
            );
        }
        let _ = writeln!(
            s,
            "\nGuard overhead at (at least) the same recall: k = 10 p50 {} ms vs unguarded {} ms = {:+.1}%; \
             k = 5: {} ms vs {} ms = {:+.1}%. Top-10 identical to brute force over the eligible items for {}/{} queries.\n",
            ms(f.chosen.latency.p50_us),
            ms(run.unguarded.latency.p50_us),
            f.overhead_vs_unguarded_pct,
            ms(f.top5.latency.p50_us),
            ms(run.unguarded_top5.p50_us),
            f.overhead_top5_vs_unguarded_pct,
            f.exact_agreement_count,
            f.queries_count
        );
    }
}
