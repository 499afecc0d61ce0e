//! The HTTP load benchmark (`memwarden bench load`, issue 7): decisions per second and search
//! latency percentiles at several client counts, over a store seeded with real English text
//! embedded by the real local model, measured from a separate load-generator process on
//! loopback.
//!
//! * **Server**: `memwarden serve` started as a child process (the given executable, normally
//!   the running `memwarden` binary) on a fresh temporary data directory and a free loopback port,
//!   with the default embedder (all-MiniLM-L6-v2), rate limiting switched off
//!   (`--rate-per-sec 0`: the per-key token bucket would otherwise cap every client at 50 req/s)
//!   and `--batch-max 100`. The child is killed when the run ends, also on error.
//! * **Principals** (admin API with the token from `<data>/admin.token`): an agent (`agent`), a
//!   mail source (`inbox`, domain `mail.example`) and a user (`alice`, with an Ed25519 public key),
//!   each with a minted API key.
//! * **Seeding**: `N` distinct sentences from documentation on this machine
//!   ([`crate::retrieval::corpus`]) stored over HTTP in batches of 100
//!   (`POST /v1/memories`), nine batches in ten by `inbox` (untrusted external), one in ten by
//!   `alice` (trusted), from two client threads. The throughput includes embedding every memory.
//! * **Phases**, for each client count `C`: `C` OS threads, each with its own ureq agent (its own
//!   keep-alive connection, opened before the clock starts), released together by a barrier,
//!   send requests back to back for the phase's duration as the agent:
//!   1. *search*: `POST /v1/search` `{namespace, query, k: 5}`; a query is a stored sentence
//!      (1/3), a stored sentence cut to a random span with a word dropped (1/3), or a sentence
//!      that was not stored (1/3). The latency includes embedding the query on the server.
//!   2. *decide*: `POST /v1/actions/decide`: a high-risk `pay` of a random amount to an account
//!      sourced from a random stored memory, with that memory in context. Each
//!      decision is appended to the verdict log (one SQLite transaction).
//! * **Embedding baseline**: after seeding, with the server idle, 200 queries drawn the same way
//!   are embedded one per call by the same model in this process: the floor under the search
//!   latency, so the report can say how much of a search is the model.
//! * **Measured**: per request, from before sending to the last byte of the answer. Any non-2xx
//!   answer, transport failure or unreadable 2xx body is an error: counted, with its kind and up
//!   to three examples, and left out of the latency percentiles (never retried or hidden).
//!   Throughput = successful requests / wall time of the phase. Also the server's and the load
//!   generator's CPU time per phase (both share the machine's cores).
//!
//! ```no_run
//! use memwarden_bench::load::{LoadBenchOptions, run_load, write_load};
//!
//! let exe = std::env::current_exe()?;
//! let opts = LoadBenchOptions::quick("/tmp/mwload", exe);
//! let report = run_load(&opts, &|msg| eprintln!("{msg}"))?;
//! let (json, md) = write_load(&report, &opts.out)?;
//! println!("{} {}", json.display(), md.display());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod checks;
pub mod report;
mod server;
pub mod soak;
pub mod summary;

#[cfg(test)]
mod tests;

use crate::BenchError;
use crate::stats::{Rng, derive_seed};
use serde::{Deserialize, Serialize};
use serde_json::json;
use server::{BATCH_MAX, Client, ServerProcess, Spawn};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};
pub use checks::{LogCheck, RatioCheck, WriteCheck, fresh_schema_name, server_for_client, spec_with_schema};
pub use summary::LatencySummary;

/// Tenant the benchmark's principals live in.
pub const TENANT: &str = "bench";
/// Namespace of every seeded memory and search.
pub const NAMESPACE: &str = "docs";
/// Results asked of every search.
pub const SEARCH_K: usize = 5;
/// The target: search p95, query embedding included (10x below Mem0's reported 200 ms).
pub const TARGET_SEARCH_P95_US: u64 = 20_000;
/// Client threads that seed the store.
pub const SEED_CLIENTS: usize = 2;
/// Searches and decisions sent (by one client, unrecorded) before the first phase.
pub const WARMUP_REQUESTS: usize = 20;
/// Queries embedded in-process (one per call, server idle) for the embedding baseline.
pub const EMBED_BASELINE_QUERIES: usize = 200;
/// Sentences collected beyond the stored ones, used only as queries.
pub const HELD_OUT_MAX: usize = 2_000;
/// The issue 17 target: single-server PostgreSQL latency at most this many times the embedded
/// store's (p50 and p95, per operation and client count).
pub const TARGET_PG_LATENCY_RATIO: f64 = 1.5;
/// Most server processes one run may start on the PostgreSQL schema.
pub const MAX_SERVERS: usize = 16;

/// The embedder the servers run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EmbedderKind {
    /// all-MiniLM-L6-v2 on the CPU (the default).
    Minilm,
    /// Feature hashing: the model taken out, so the numbers show the store and the server.
    Hash,
}

impl EmbedderKind {
    /// `minilm` (or `local`) and `hash`.
    pub fn from_name(name: &str) -> Result<Self, BenchError> {
        match name {
            "minilm" | "local" => Ok(Self::Minilm),
            "hash" => Ok(Self::Hash),
            other => Err(BenchError::Invalid(format!("bench load: --embedder must be minilm or hash, got {other:?}"))),
        }
    }

    /// The name passed to the servers' `--embedder`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Minilm => "minilm",
            Self::Hash => "hash",
        }
    }
}

/// Drops a PostgreSQL schema, given the store spec that names it (`...schema=S`). The binary
/// supplies it (the benchmark crate does not link the PostgreSQL driver).
#[derive(Clone)]
pub struct SchemaDropper(pub Arc<DropSchemaFn>);

/// The function a [`SchemaDropper`] holds: given the spec naming the schema, drop it.
pub type DropSchemaFn = dyn Fn(&str) -> Result<(), String> + Send + Sync;

impl std::fmt::Debug for SchemaDropper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SchemaDropper")
    }
}

/// Which store a row measured.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Backend {
    /// SQLite in the server's data directory.
    Embedded,
    /// PostgreSQL: the full spec, with this run's schema.
    Postgres(String),
}

impl Backend {
    fn name(&self) -> &'static str {
        match self {
            Backend::Embedded => "embedded",
            Backend::Postgres(_) => "postgres",
        }
    }
}

/// Options of [`run_load`].
#[derive(Debug, Clone)]
pub struct LoadBenchOptions {
    /// Output directory (`load.md`, `load.json`, `server.log`).
    pub out: PathBuf,
    /// The `memwarden` executable started as the server.
    pub server_exe: PathBuf,
    /// The model directory (None: `$MEMWARDEN_MODEL_DIR`, then `./models/all-MiniLM-L6-v2`, then
    /// the workspace's `models/`). Resolved by the benchmark and passed to the server as
    /// `--model-dir`, so both use the same model.
    pub model_dir: Option<PathBuf>,
    /// Memories stored before the phases.
    pub memories: usize,
    /// Concurrent client counts, one search and one decide phase each.
    pub clients: Vec<usize>,
    /// Length of each phase in seconds.
    pub phase_secs: f64,
    /// Whether this is the quick preset (recorded in the report).
    pub quick: bool,
    /// Seed of the query and proposal generators.
    pub seed: u64,
    /// Git revision for the report.
    pub git_rev: Option<String>,
    /// A PostgreSQL store spec (`postgres://...` or `host=... dbname=...`, without `schema=`):
    /// the run creates a fresh schema there, measures it with [`Self::servers`] server processes
    /// next to the embedded store, and drops it at the end. None: the embedded store only.
    pub store: Option<String>,
    /// Server process counts on the PostgreSQL schema, one row set each (default 1).
    pub servers: Vec<usize>,
    /// The servers' embedder.
    pub embedder: EmbedderKind,
    /// Drops the run's schema at the end (also on error). None: the schema is left in place
    /// (and its name reported).
    pub drop_schema: Option<SchemaDropper>,
}

impl LoadBenchOptions {
    /// The full benchmark: 10,000 memories; 1, 8 and 64 clients; 20 s per phase.
    pub fn new(out: impl Into<PathBuf>, server_exe: impl Into<PathBuf>) -> Self {
        Self {
            out: out.into(),
            server_exe: server_exe.into(),
            model_dir: None,
            memories: 10_000,
            clients: vec![1, 8, 64],
            phase_secs: 20.0,
            quick: false,
            seed: 7,
            git_rev: None,
            store: None,
            servers: vec![1],
            embedder: EmbedderKind::Minilm,
            drop_schema: None,
        }
    }

    /// The quick preset: 1,000 memories; 1 and 8 clients; 5 s per phase.
    pub fn quick(out: impl Into<PathBuf>, server_exe: impl Into<PathBuf>) -> Self {
        Self { memories: 1_000, clients: vec![1, 8], phase_secs: 5.0, quick: true, ..Self::new(out, server_exe) }
    }

    fn validate(&self) -> Result<(), BenchError> {
        if self.memories == 0 {
            return Err(BenchError::Invalid("--memories must be at least 1".into()));
        }
        if self.clients.is_empty() || self.clients.iter().any(|&c| c == 0 || c > 1024) {
            return Err(BenchError::Invalid(format!("--clients must be a non-empty list of 1..=1024, got {:?}", self.clients)));
        }
        if !self.phase_secs.is_finite() || self.phase_secs <= 0.0 || self.phase_secs > 3600.0 {
            return Err(BenchError::Invalid(format!("--seconds must be in (0, 3600], got {}", self.phase_secs)));
        }
        if self.servers.is_empty() || self.servers.iter().any(|&n| n == 0 || n > MAX_SERVERS) {
            return Err(BenchError::Invalid(format!("--servers must be a non-empty list of 1..={MAX_SERVERS}, got {:?}", self.servers)));
        }
        match &self.store {
            None if self.servers != [1] => Err(BenchError::Invalid("--servers needs --store postgres://... (the embedded store is one process)".into())),
            Some(spec) if !checks::is_postgres_spec(spec) => {
                Err(BenchError::Invalid("--store must be a PostgreSQL spec: postgres://... or host=... dbname=...".into()))
            }
            Some(spec) if checks::spec_names_schema(spec) => {
                Err(BenchError::Invalid("--store must not name a schema: the run creates a fresh one and drops it at the end".into()))
            }
            _ => Ok(()),
        }
    }
}

/// The machine and the moment the numbers were measured.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Machine {
    /// CPU model from /proc/cpuinfo.
    pub cpu_model: String,
    /// Logical cores available to this process (shared by server and load generator).
    pub cores_count: usize,
    /// Total memory from /proc/meminfo.
    pub memory_total_bytes: u64,
    /// /proc/loadavg (1, 5, 15 min) when the run started.
    pub load_average_start: String,
    /// /proc/loadavg when the run ended.
    pub load_average_end: String,
}

/// One server under test.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ServerInfo {
    /// `embedded` or `postgres`.
    #[serde(default)]
    pub backend: String,
    /// Start order on its store (0 is the one seeded through).
    #[serde(default)]
    pub index: usize,
    /// The executable.
    pub exe: String,
    /// Its arguments (the data directory is a fresh temporary one).
    pub args: Vec<String>,
    /// The model directory (resolved by the benchmark, passed as `--model-dir`).
    pub model_dir: String,
    /// How the per-key rate limit was set.
    pub rate_limit: String,
    /// Memories per batch add.
    pub batch_max: usize,
    /// Seconds from spawning to a 200 from `/readyz`.
    pub ready_secs: f64,
    /// Resident set size after seeding.
    pub rss_bytes_after_seed: Option<u64>,
    /// Resident set size at the end.
    pub rss_bytes_end: Option<u64>,
    /// Size of the data directory at the end (store, log, indexes, keys).
    pub data_dir_bytes_end: u64,
}

/// Where the sentences came from.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CorpusInfo {
    /// Directories read, in order.
    pub roots: Vec<String>,
    /// Files read.
    pub files_read_count: usize,
    /// Sentences stored.
    pub stored_count: usize,
    /// Sentences kept out of the store, used only as queries.
    pub held_out_count: usize,
    /// Mean sentence length in bytes (stored ones).
    pub sentence_bytes_mean: f64,
    /// Three stored sentences.
    pub examples: Vec<String>,
}

/// How seeding went.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SeedReport {
    /// Memories asked for.
    pub memories_requested_count: usize,
    /// Memories stored.
    pub memories_stored_count: usize,
    /// Memories the server refused (per-item failures inside a batch, or failed batches).
    pub memories_failed_count: usize,
    /// Of the stored: written by the user `alice` (trusted).
    pub memories_by_user_count: usize,
    /// Of the stored: written by the source `inbox` (untrusted external).
    pub memories_by_source_count: usize,
    /// Batches sent.
    pub batches_count: usize,
    /// Memories per batch.
    pub batch_size: usize,
    /// Seeding client threads.
    pub clients_count: usize,
    /// Wall time.
    pub secs: f64,
    /// Stored memories per second, embedding included.
    pub memories_per_sec: f64,
    /// Latency of one batch request.
    pub batch_latency: LatencySummary,
    /// Failures by kind.
    pub errors: BTreeMap<String, u64>,
    /// Server CPU seconds used while seeding.
    pub server_cpu_secs: Option<f64>,
}

/// One measured phase: one request kind at one client count on one store and server count.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PhaseReport {
    /// `embedded` or `postgres`.
    #[serde(default)]
    pub backend: String,
    /// Server processes sharing the clients (round-robin).
    #[serde(default)]
    pub servers_count: usize,
    /// `search`, `decide` or `write`.
    pub kind: String,
    /// Concurrent clients.
    pub clients_count: usize,
    /// Wall time from the barrier to the last client's last answer.
    pub secs: f64,
    /// Successful (2xx) requests.
    pub requests_ok_count: u64,
    /// Failed requests (non-2xx, transport, unreadable body).
    pub errors_count: u64,
    /// Failures by kind (`HTTP 503 unavailable`, `transport: ...`).
    pub errors: BTreeMap<String, u64>,
    /// Up to three failure examples.
    pub error_examples: Vec<String>,
    /// Successful requests per second.
    pub throughput_per_sec: f64,
    /// Latency of successful requests.
    pub latency: LatencySummary,
    /// Search only: mean number of hits returned.
    pub hits_mean: Option<f64>,
    /// Decide only: verdicts by `decision/rule`.
    pub verdicts: BTreeMap<String, u64>,
    /// Write only: the phase's namespace.
    #[serde(default)]
    pub namespace: Option<String>,
    /// Entries the tenant's log grew by during the phase (`/v1/audit/verify` through server 0
    /// before and after).
    #[serde(default)]
    pub log_entries_appended_count: Option<u64>,
    /// Server CPU seconds used during the phase (all servers).
    pub server_cpu_secs: Option<f64>,
    /// CPU seconds of the `postgres` processes on the machine during the phase (PostgreSQL rows;
    /// per process alive at the end, so a lower bound when one exited during the phase).
    #[serde(default)]
    pub db_cpu_secs: Option<f64>,
    /// Load-generator (this process) CPU seconds used during the phase.
    pub client_cpu_secs: Option<f64>,
    /// /proc/loadavg when the phase started.
    pub load_average_start: String,
}

/// The target check for one client count.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TargetCheck {
    /// `embedded` or `postgres`.
    #[serde(default)]
    pub backend: String,
    /// Server processes.
    #[serde(default)]
    pub servers_count: usize,
    /// Concurrent clients.
    pub clients_count: usize,
    /// Measured search p95 (query embedding included).
    pub search_latency_us_p95: u64,
    /// The target.
    pub target_latency_us_p95: u64,
    /// Met (and the phase had successful requests).
    pub met: bool,
}

/// Query embedding alone: the same model as the server's, in the load-generator process, one
/// query per call, with the server idle. The floor under the search latency.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EmbedBaseline {
    /// The embedder.
    pub model: String,
    /// Queries embedded (drawn like the search phase's; one unrecorded call loads the model).
    pub queries_count: usize,
    /// Latency of one `embed` call with one query.
    pub latency: LatencySummary,
    /// Why there is no baseline (the model did not load in this process), when there is none.
    pub error: Option<String>,
}

/// Everything [`run_load`] measured.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LoadReport {
    /// Report format.
    pub schema: String,
    /// When the run started (UTC).
    pub date_utc: String,
    /// Git revision.
    pub git_rev: Option<String>,
    /// `release` or `debug` (of the load generator and, being the same executable, the server).
    pub build_profile: String,
    /// The quick preset.
    pub quick: bool,
    /// Seed.
    pub seed: u64,
    /// Phase length asked for.
    pub phase_secs: f64,
    /// Client counts asked for.
    pub clients: Vec<usize>,
    /// Machine.
    pub machine: Machine,
    /// The servers' embedder (`minilm`, or `hash`: the model taken out).
    #[serde(default)]
    pub embedder: String,
    /// Server counts on PostgreSQL asked for.
    #[serde(default)]
    pub servers: Vec<usize>,
    /// The embedded store's server.
    pub server: ServerInfo,
    /// Corpus.
    pub corpus: CorpusInfo,
    /// Seeding of the embedded store.
    pub seed_phase: SeedReport,
    /// The PostgreSQL part, with `--store`.
    #[serde(default)]
    pub postgres: Option<PostgresReport>,
    /// Every write phase's acknowledged writes, checked afterwards.
    #[serde(default)]
    pub write_checks: Vec<WriteCheck>,
    /// The tenant's log through every server after each configuration.
    #[serde(default)]
    pub log_checks: Vec<LogCheck>,
    /// Single-server PostgreSQL latency over the embedded store's (with `--store`).
    #[serde(default)]
    pub ratios: Vec<RatioCheck>,
    /// Query embedding alone, in-process, for comparison with the search latency.
    pub embed_baseline: EmbedBaseline,
    /// Warm-up requests sent before the first phase (unrecorded).
    pub warmup_requests_count: usize,
    /// The phases, in the order run (per client count: search, then decide).
    pub phases: Vec<PhaseReport>,
    /// Search p95 against the 20 ms target, per client count.
    pub targets: Vec<TargetCheck>,
}

/// The PostgreSQL part of a run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PostgresReport {
    /// The spec given (`--store`), without the schema.
    pub store: String,
    /// The run's fresh schema.
    pub schema: String,
    /// Whether it was dropped at the end (None: no dropper, left in place).
    pub schema_dropped: Option<bool>,
    /// Why dropping failed, when it did.
    pub schema_drop_error: Option<String>,
    /// The servers, in start order (all on the schema, one shared `--store-key-dir`).
    pub servers: Vec<ServerInfo>,
    /// Seeding, through server 0.
    pub seed_phase: SeedReport,
}

/// A stored memory the phases can refer to.
#[derive(Debug, Clone)]
struct Seeded {
    id: String,
    /// Index of its sentence in the stored ones.
    sentence: usize,
}

/// API keys of the three principals.
struct Keys {
    agent: String,
    inbox: String,
    alice: String,
}

/// Run the benchmark. `progress` gets one line per step.
pub fn run_load(opts: &LoadBenchOptions, progress: &(dyn Fn(&str) + Sync)) -> Result<LoadReport, BenchError> {
    opts.validate()?;
    std::fs::create_dir_all(&opts.out).map_err(|e| BenchError::Io(format!("cannot create {}: {e}", opts.out.display())))?;
    let load_average_start = load_average();
    let date_utc = utc_now();

    progress("collecting sentences from documentation on this machine");
    let roots = crate::retrieval::corpus::default_corpus_roots();
    let held_out_wanted = HELD_OUT_MAX.min(opts.memories.max(100));
    let corpus = crate::retrieval::corpus::collect(&roots, opts.memories + held_out_wanted, &|_| {});
    if corpus.sentences.len() < opts.memories + 1 {
        return Err(BenchError::Invalid(format!(
            "found only {} sentences under {:?}; need {} (lower --memories)",
            corpus.sentences.len(),
            roots,
            opts.memories + 1
        )));
    }
    let (stored, held_out) = corpus.sentences.split_at(opts.memories);
    let corpus_info = CorpusInfo {
        roots: roots.iter().map(|r| r.display().to_string()).collect(),
        files_read_count: corpus.files_read,
        stored_count: stored.len(),
        held_out_count: held_out.len(),
        sentence_bytes_mean: stored.iter().map(String::len).sum::<usize>() as f64 / stored.len() as f64,
        examples: stored.iter().step_by((stored.len() / 3).max(1)).take(3).cloned().collect(),
    };

    // Resolve the model here and hand the servers the same directory: both embed with it, and a
    // missing model fails now with the install hint instead of as 503s while seeding. The hash
    // embedder needs no model.
    let model_dir = match opts.embedder {
        EmbedderKind::Minilm => {
            Some(memwarden_embed::resolve_model_dir(opts.model_dir.as_deref()).map_err(|e| BenchError::Invalid(e.to_string()))?)
        }
        EmbedderKind::Hash => None,
    };
    let queries = Queries { stored, held_out };
    let ctx = RunCtx { opts, model_dir: model_dir.as_deref(), queries: &queries, progress };

    let mut phases = Vec::new();
    let mut write_checks = Vec::new();
    let mut log_checks = Vec::new();
    let emb = run_backend(&ctx, &Backend::Embedded, &[1], &mut phases, &mut write_checks, &mut log_checks)?;
    let embed_baseline = emb.embed_baseline.clone().unwrap_or_else(|| EmbedBaseline {
        model: opts.embedder.name().into(),
        queries_count: 0,
        latency: LatencySummary::default(),
        error: Some("not measured: the servers ran the hash embedder (the model taken out)".into()),
    });

    let postgres = match &opts.store {
        None => None,
        Some(spec) => {
            let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
            let schema = fresh_schema_name(std::process::id(), nanos);
            let full = spec_with_schema(spec, &schema);
            progress(&format!("PostgreSQL: fresh schema {schema}"));
            let mut guard = SchemaGuard { spec: full.clone(), dropper: opts.drop_schema.clone(), result: None };
            let run = run_backend(&ctx, &Backend::Postgres(full), &opts.servers, &mut phases, &mut write_checks, &mut log_checks);
            // Every server is gone by now (run_backend owns them): drop the schema.
            guard.drop_now();
            if let Some(Err(e)) = &guard.result {
                progress(&format!("could not drop schema {schema}: {e}"));
            }
            let run = run?;
            let (schema_dropped, schema_drop_error) = match &guard.result {
                None => (None, None),
                Some(Ok(())) => (Some(true), None),
                Some(Err(e)) => (Some(false), Some(e.clone())),
            };
            Some(PostgresReport { store: spec.clone(), schema, schema_dropped, schema_drop_error, servers: run.servers, seed_phase: run.seed_phase })
        }
    };

    let targets = phases
        .iter()
        .filter(|p| p.kind == Kind::Search.name())
        .map(|p| TargetCheck {
            backend: p.backend.clone(),
            servers_count: p.servers_count,
            clients_count: p.clients_count,
            search_latency_us_p95: p.latency.latency_us_p95,
            target_latency_us_p95: TARGET_SEARCH_P95_US,
            met: p.requests_ok_count > 0 && p.latency.latency_us_p95 <= TARGET_SEARCH_P95_US,
        })
        .collect();
    let ratios = checks::ratio_checks(&phases);
    let server = emb.servers.into_iter().next().ok_or_else(|| BenchError::Io("the embedded run has no server".into()))?;
    Ok(LoadReport {
        schema: "memwarden-load/2".into(),
        date_utc,
        git_rev: opts.git_rev.clone(),
        build_profile: if cfg!(debug_assertions) { "debug" } else { "release" }.into(),
        quick: opts.quick,
        seed: opts.seed,
        phase_secs: opts.phase_secs,
        clients: opts.clients.clone(),
        machine: Machine { load_average_start, load_average_end: load_average(), ..machine() },
        embedder: opts.embedder.name().into(),
        servers: if opts.store.is_some() { opts.servers.clone() } else { Vec::new() },
        server,
        corpus: corpus_info,
        seed_phase: emb.seed_phase,
        postgres,
        write_checks,
        log_checks,
        ratios,
        embed_baseline,
        warmup_requests_count: 2 * WARMUP_REQUESTS,
        phases,
        targets,
    })
}

/// Drops the run's schema once, when asked or when dropped (on error paths).
struct SchemaGuard {
    spec: String,
    dropper: Option<SchemaDropper>,
    result: Option<Result<(), String>>,
}

impl SchemaGuard {
    fn drop_now(&mut self) {
        if self.result.is_none()
            && let Some(d) = self.dropper.take()
        {
            self.result = Some((d.0)(&self.spec));
        }
    }
}

impl Drop for SchemaGuard {
    fn drop(&mut self) {
        self.drop_now();
    }
}

/// What every backend run shares.
struct RunCtx<'a> {
    opts: &'a LoadBenchOptions,
    model_dir: Option<&'a Path>,
    queries: &'a Queries<'a>,
    progress: &'a (dyn Fn(&str) + Sync),
}

/// One store's servers, seeding and (embedded only) the embedding baseline.
struct BackendRun {
    servers: Vec<ServerInfo>,
    seed_phase: SeedReport,
    embed_baseline: Option<EmbedBaseline>,
}

/// A running server and what the report says about it.
struct Running {
    proc: ServerProcess,
    ready_secs: f64,
    rss_bytes_after_seed: Option<u64>,
}

fn spawn_ready(ctx: &RunCtx<'_>, backend: &Backend, key_dir: &Path, index: usize) -> Result<Running, BenchError> {
    let log_path = match backend {
        Backend::Embedded => ctx.opts.out.join("server.log"),
        Backend::Postgres(_) => ctx.opts.out.join(format!("server-pg-{index}.log")),
    };
    let how = Spawn {
        embedder: ctx.opts.embedder.name(),
        model_dir: ctx.model_dir,
        store: match backend {
            Backend::Embedded => None,
            Backend::Postgres(spec) => Some((spec.as_str(), key_dir)),
        },
    };
    (ctx.progress)(&format!("starting {} server {index} ({} embedder)", backend.name(), ctx.opts.embedder.name()));
    let mut proc = ServerProcess::spawn(&ctx.opts.server_exe, &how, &log_path)?;
    let ready = proc.wait_ready()?;
    (ctx.progress)(&format!("  ready at {} after {:.1} s (pid {})", proc.base, ready.as_secs_f64(), proc.pid()));
    Ok(Running { proc, ready_secs: ready.as_secs_f64(), rss_bytes_after_seed: None })
}

/// Seed one store, then for each server count run every client count's search, decide and write
/// phases with the clients spread round-robin over the servers; check the writes after each write
/// phase and the log through every server after each server count.
fn run_backend(
    ctx: &RunCtx<'_>,
    backend: &Backend,
    server_counts: &[usize],
    phases: &mut Vec<PhaseReport>,
    write_checks: &mut Vec<WriteCheck>,
    log_checks: &mut Vec<LogCheck>,
) -> Result<BackendRun, BenchError> {
    let opts = ctx.opts;
    let progress = ctx.progress;
    // Declared before the servers, so it outlives them.
    let key_dir = tempfile::Builder::new().prefix("memwarden-load-key-").tempdir().map_err(|e| BenchError::Io(format!("cannot create a key directory: {e}")))?;
    let key_path = key_dir.path().join("store-key");
    let mut servers: Vec<Running> = vec![spawn_ready(ctx, backend, &key_path, 0)?];
    let first = servers.first().map(|r| &r.proc).ok_or_else(|| BenchError::Io("no server".into()))?;
    let keys = register(first)?;
    (ctx.progress)(&format!("seeding {} memories into the {} store", ctx.queries.stored.len(), backend.name()));
    let (seed_phase, seeded) = seed(first, &keys, ctx.queries.stored, progress)?;
    if seeded.is_empty() {
        return Err(BenchError::Io(format!("no memory was stored; errors: {:?}", seed_phase.errors)));
    }
    if let Some(r) = servers.first_mut() {
        r.proc.check_alive()?;
        r.rss_bytes_after_seed = r.proc.rss_bytes();
    }
    let embed_baseline = match (backend, opts.embedder) {
        (Backend::Embedded, EmbedderKind::Minilm) => {
            progress(&format!("query embedding alone, in this process: {EMBED_BASELINE_QUERIES} queries"));
            Some(embed_baseline(ctx.model_dir.map(Path::to_path_buf), ctx.queries, derive_seed(opts.seed, 0xe4bed)))
        }
        _ => None,
    };
    if let Some(r) = servers.first() {
        let warmup = Client::new(&r.proc.base);
        let mut rng = Rng::new(derive_seed(opts.seed, 0xfeed));
        for _ in 0..WARMUP_REQUESTS {
            let _ = warmup.post("/v1/search", Some(&keys.agent), search_body(ctx.queries, &mut rng).as_bytes());
            let _ = warmup.post("/v1/actions/decide", Some(&keys.agent), decide_body(&seeded, &mut rng).as_bytes());
        }
    }

    for (si, &n) in server_counts.iter().enumerate() {
        while servers.len() < n {
            let r = spawn_ready(ctx, backend, &key_path, servers.len())?;
            servers.push(r);
        }
        for (ci, &clients) in opts.clients.iter().enumerate() {
            for kind in [Kind::Search, Kind::Decide, Kind::Write] {
                let active: Vec<&ServerProcess> = servers.iter().take(n).map(|r| &r.proc).collect();
                progress(&format!("{} × {n} server(s): {} with {clients} client(s) for {} s", backend.name(), kind.name(), opts.phase_secs));
                let phase_seed = derive_seed(opts.seed, (si as u64) << 16 | (ci as u64) << 8 | kind as u64);
                let namespace = (kind == Kind::Write).then(|| checks::write_namespace(backend.name(), n, clients));
                let verifier = active.first().map(|s| Client::new(&s.base));
                let before = verifier.as_ref().map(|c| checks::verify_log(c, &keys.alice, 0));
                let spec = PhaseSpec { servers: &active, token: &keys.agent, clients, secs: opts.phase_secs, kind, seed: phase_seed, namespace: namespace.as_deref() };
                let (mut p, written) = run_phase(&spec, ctx.queries, &seeded);
                let after = verifier.as_ref().map(|c| checks::verify_log(c, &keys.alice, 0));
                p.backend = backend.name().into();
                p.servers_count = n;
                p.log_entries_appended_count = match (before, after) {
                    (Some(b), Some(a)) if b.problem.is_none() && a.problem.is_none() => Some(a.entries_count.saturating_sub(b.entries_count)),
                    _ => None,
                };
                progress(&format!(
                    "  {:.0} req/s, p50 {} ms, p95 {} ms, p99 {} ms, {} error(s), log +{}",
                    p.throughput_per_sec,
                    summary::ms(p.latency.latency_us_p50),
                    summary::ms(p.latency.latency_us_p95),
                    summary::ms(p.latency.latency_us_p99),
                    p.errors_count,
                    p.log_entries_appended_count.map_or_else(|| "?".into(), |x| x.to_string())
                ));
                if let Some(ns) = &namespace {
                    let wc = check_writes(&active, &keys.agent, backend.name(), n, clients, ns, &written, p.log_entries_appended_count);
                    progress(&format!(
                        "  writes: {} acknowledged, {} read back, listed once {}, duplicated {}, lost {}: {}",
                        wc.writes_acknowledged_count,
                        wc.read_back_count,
                        wc.listed_once_count.map_or_else(|| "n/a".into(), |x| x.to_string()),
                        wc.duplicated_count.map_or_else(|| "n/a".into(), |x| x.to_string()),
                        wc.lost_count.map_or_else(|| "n/a".into(), |x| x.to_string()),
                        if wc.ok { "ok" } else { "NOT OK" }
                    ));
                    write_checks.push(wc);
                }
                phases.push(p);
                drop(active);
                for r in servers.iter_mut().take(n) {
                    r.proc.check_alive()?;
                }
            }
        }
        let per_server: Vec<checks::LogVerify> =
            servers.iter().take(n).enumerate().map(|(i, r)| checks::verify_log(&Client::new(&r.proc.base), &keys.alice, i)).collect();
        let lc = LogCheck { backend: backend.name().into(), servers_count: n, one_chain: checks::one_chain(&per_server), per_server };
        progress(&format!(
            "  log through {n} server(s): {}",
            lc.per_server.iter().map(|v| format!("#{} ok={} entries={}", v.server_index, v.ok, v.entries_count)).collect::<Vec<_>>().join(", ")
        ));
        log_checks.push(lc);
    }

    let infos = servers
        .iter()
        .enumerate()
        .map(|(i, r)| ServerInfo {
            backend: backend.name().into(),
            index: i,
            exe: opts.server_exe.display().to_string(),
            args: r.proc.args.clone(),
            model_dir: ctx.model_dir.map_or_else(|| "none (hash embedder)".into(), |m| m.display().to_string()),
            rate_limit: "disabled (--rate-per-sec 0); the default 50 req/s per key, burst 100, would cap each client".into(),
            batch_max: BATCH_MAX,
            ready_secs: r.ready_secs,
            rss_bytes_after_seed: r.rss_bytes_after_seed,
            rss_bytes_end: r.proc.rss_bytes(),
            data_dir_bytes_end: dir_bytes(r.proc.data_dir()),
        })
        .collect();
    drop(servers);
    Ok(BackendRun { servers: infos, seed_phase, embed_baseline })
}

/// Read every acknowledged write back by id (through the next server round-robin from the one
/// that took it, four threads), and list the phase's namespace to count each write's tag.
#[allow(clippy::too_many_arguments)]
fn check_writes(
    servers: &[&ServerProcess],
    token: &str,
    backend: &str,
    servers_count: usize,
    clients: usize,
    namespace: &str,
    written: &[Written],
    log_entries_appended_count: Option<u64>,
) -> WriteCheck {
    let ids: std::collections::BTreeSet<&str> = written.iter().map(|w| w.id.as_str()).collect();
    let examples: Mutex<Vec<String>> = Mutex::new(Vec::new());
    let read_back = AtomicUsize::new(0);
    let next = AtomicUsize::new(0);
    let note = |e: String| {
        let mut ex = lock(&examples);
        if ex.len() < 3 {
            ex.push(e);
        }
    };
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                let clients: Vec<Client> = servers.iter().map(|sv| Client::new(&sv.base)).collect();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(w) = written.get(i) else { break };
                    let via = (w.server + 1) % clients.len().max(1);
                    let Some(c) = clients.get(via) else { break };
                    match c.get(&format!("/v1/memories/{}", w.id), Some(token)) {
                        Ok(r) if r.ok() => {
                            let content = serde_json::from_str::<serde_json::Value>(&r.body)
                                .ok()
                                .and_then(|v| v.get("content").and_then(|c| c.as_str()).map(str::to_owned))
                                .unwrap_or_default();
                            if checks::tag_of(&content) == Some(w.tag.as_str()) {
                                read_back.fetch_add(1, Ordering::Relaxed);
                            } else {
                                note(format!("{} read back with other content", w.id));
                            }
                        }
                        Ok(r) => note(format!("GET {} via server {via}: {}", w.id, r.describe())),
                        Err(e) => note(format!("GET {} via server {via}: {e}", w.id)),
                    }
                }
            });
        }
    });
    let acked = written.len() as u64;
    let read_back = read_back.into_inner() as u64;
    let mut wc = WriteCheck {
        backend: backend.into(),
        servers_count,
        clients_count: clients,
        namespace: namespace.into(),
        writes_acknowledged_count: acked,
        ids_distinct_count: ids.len() as u64,
        read_back_count: read_back,
        not_read_back_count: acked - read_back.min(acked),
        listed_count: None,
        listed_once_count: None,
        duplicated_count: None,
        lost_count: None,
        unacknowledged_listed_count: None,
        log_entries_appended_count,
        examples: Vec::new(),
        ok: false,
    };
    let mut listed_ok = true;
    if acked <= 10_000
        && let Some(sv) = servers.first()
    {
        match Client::new(&sv.base).get(&format!("/v1/memories?namespace={namespace}&limit=10000"), Some(token)) {
            Ok(r) if r.ok() => {
                let v: serde_json::Value = serde_json::from_str(&r.body).unwrap_or_default();
                let contents: Vec<String> = v
                    .get("results")
                    .and_then(|x| x.as_array())
                    .map(|a| a.iter().filter_map(|m| m.get("content").and_then(|c| c.as_str()).map(str::to_owned)).collect())
                    .unwrap_or_default();
                let tally = checks::tally_listed(written.iter().map(|w| w.tag.as_str()), contents.iter().filter_map(|c| checks::tag_of(c)));
                wc.listed_count = Some(contents.len() as u64);
                wc.listed_once_count = Some(tally.once);
                wc.duplicated_count = Some(tally.duplicated);
                wc.lost_count = Some(tally.missing);
                wc.unacknowledged_listed_count = Some(tally.unacknowledged);
                listed_ok = tally.once == acked && tally.unacknowledged == 0 && contents.len() as u64 == acked;
            }
            Ok(r) => {
                listed_ok = false;
                note(format!("list {namespace}: {}", r.describe()));
            }
            Err(e) => {
                listed_ok = false;
                note(format!("list {namespace}: {e}"));
            }
        }
    } else {
        note(format!("{acked} writes: more than one list call can return (10,000); checked by id only"));
    }
    wc.examples = examples.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner);
    wc.ok = wc.ids_distinct_count == acked && read_back == acked && listed_ok;
    wc
}

/// Write `load.json` and `load.md` into `dir`; returns their paths.
pub fn write_load(report: &LoadReport, dir: &Path) -> Result<(PathBuf, PathBuf), BenchError> {
    std::fs::create_dir_all(dir).map_err(|e| BenchError::Io(format!("cannot create {}: {e}", dir.display())))?;
    let json_path = dir.join("load.json");
    let md_path = dir.join("load.md");
    let json = serde_json::to_string_pretty(report).map_err(|e| BenchError::Io(format!("cannot encode the report: {e}")))?;
    std::fs::write(&json_path, json + "\n").map_err(|e| BenchError::Io(format!("cannot write {}: {e}", json_path.display())))?;
    std::fs::write(&md_path, report::markdown(report)).map_err(|e| BenchError::Io(format!("cannot write {}: {e}", md_path.display())))?;
    Ok((json_path, md_path))
}

/// Register the agent, the source and the user, and mint a key for each.
fn register(server: &ServerProcess) -> Result<Keys, BenchError> {
    let token_path = server.data_dir().join("admin.token");
    let admin = std::fs::read_to_string(&token_path).map_err(|e| BenchError::Io(format!("cannot read {}: {e}", token_path.display())))?;
    let admin = admin.trim();
    let c = Client::new(&server.base);
    // A fixed key: the benchmark never signs a grant, but users must have a public key.
    let alice_pk = ed25519_dalek::SigningKey::from_bytes(&[42; 32]).verifying_key().to_bytes();
    let alice_pk_hex: String = alice_pk.iter().map(|b| format!("{b:02x}")).collect();
    let principals = [
        json!({"tenant": TENANT, "id": "agent", "kind": "agent"}),
        json!({"tenant": TENANT, "id": "inbox", "kind": "source", "domain": "mail.example"}),
        json!({"tenant": TENANT, "id": "alice", "kind": "user", "public_key": alice_pk_hex}),
    ];
    for p in &principals {
        c.post_json("/v1/admin/principals", Some(admin), p)?;
    }
    let mint = |id: &str| -> Result<String, BenchError> {
        let v = c.post_json("/v1/admin/keys", Some(admin), &json!({"tenant": TENANT, "principal": id, "label": "load-bench"}))?;
        v.get("token").and_then(|t| t.as_str()).map(str::to_owned).ok_or_else(|| BenchError::Io(format!("minted key for {id} has no token")))
    };
    Ok(Keys { agent: mint("agent")?, inbox: mint("inbox")?, alice: mint("alice")? })
}

/// Store `sentences` in batches of [`BATCH_MAX`] from [`SEED_CLIENTS`] threads.
fn seed(server: &ServerProcess, keys: &Keys, sentences: &[String], progress: &(dyn Fn(&str) + Sync)) -> Result<(SeedReport, Vec<Seeded>), BenchError> {
    let batches: Vec<&[String]> = sentences.chunks(BATCH_MAX).collect();
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let stored: Mutex<Vec<(usize, Seeded, bool)>> = Mutex::new(Vec::with_capacity(sentences.len()));
    let errors: Mutex<BTreeMap<String, u64>> = Mutex::new(BTreeMap::new());
    let latencies: Mutex<Vec<u64>> = Mutex::new(Vec::with_capacity(batches.len()));
    let failed = AtomicUsize::new(0);
    let cpu0 = server.cpu_secs();
    let t0 = Instant::now();
    let last_report = Mutex::new(Instant::now());
    std::thread::scope(|s| {
        for _ in 0..SEED_CLIENTS {
            s.spawn(|| {
                let c = Client::new(&server.base);
                loop {
                    let b = next.fetch_add(1, Ordering::Relaxed);
                    let Some(batch) = batches.get(b) else { break };
                    // One batch in ten from the user, the rest from the mail source.
                    let by_user = b % 10 == 9;
                    let (token, route) = if by_user { (&keys.alice, "direct") } else { (&keys.inbox, "external_observation") };
                    let memories: Vec<serde_json::Value> = batch
                        .iter()
                        .enumerate()
                        .map(|(i, text)| json!({"namespace": NAMESPACE, "content": text, "route": route, "metadata": {"n": (b * BATCH_MAX + i).to_string()}}))
                        .collect();
                    let body = json!({"memories": memories}).to_string();
                    let t = Instant::now();
                    let r = c.post("/v1/memories", Some(token), body.as_bytes());
                    let us = t.elapsed().as_micros() as u64;
                    let bump = |k: String, n: usize| {
                        failed.fetch_add(n, Ordering::Relaxed);
                        *lock(&errors).entry(k).or_default() += n as u64;
                    };
                    match r {
                        Err(e) => bump(e, batch.len()),
                        Ok(r) if !r.ok() => bump(r.describe(), batch.len()),
                        Ok(r) => {
                            lock(&latencies).push(us);
                            let v: serde_json::Value = serde_json::from_str(&r.body).unwrap_or_default();
                            let results = v.get("results").and_then(|x| x.as_array()).cloned().unwrap_or_default();
                            if results.len() != batch.len() {
                                bump(format!("batch answer with {} results for {} memories", results.len(), batch.len()), batch.len());
                            } else {
                                for (i, res) in results.iter().enumerate() {
                                    let id = res.get("id").and_then(|x| x.as_str());
                                    match (res.get("ok").and_then(serde_json::Value::as_bool), id) {
                                        (Some(true), Some(id)) => lock(&stored).push((b * BATCH_MAX + i, Seeded { id: id.to_owned(), sentence: b * BATCH_MAX + i }, by_user)),
                                        _ => {
                                            let code = res.pointer("/error/code").and_then(|x| x.as_str()).unwrap_or("unknown");
                                            bump(format!("item refused: {code}"), 1);
                                        }
                                    }
                                }
                            }
                        }
                    }
                    let d = done.fetch_add(1, Ordering::Relaxed) + 1;
                    let mut last = lock(&last_report);
                    if last.elapsed() >= Duration::from_secs(5) || d == batches.len() {
                        *last = Instant::now();
                        let secs = t0.elapsed().as_secs_f64();
                        progress(&format!("  seeded {d}/{} batches ({:.0} memories/s)", batches.len(), (d * BATCH_MAX).min(sentences.len()) as f64 / secs));
                    }
                }
            });
        }
    });
    let secs = t0.elapsed().as_secs_f64();
    let server_cpu_secs = match (cpu0, server.cpu_secs()) {
        (Some(a), Some(b)) => Some(b - a),
        _ => None,
    };
    let mut stored = stored.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner);
    stored.sort_by_key(|(i, _, _)| *i);
    let by_user = stored.iter().filter(|(_, _, u)| *u).count();
    let mut latencies = latencies.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner);
    let report = SeedReport {
        memories_requested_count: sentences.len(),
        memories_stored_count: stored.len(),
        memories_failed_count: failed.into_inner(),
        memories_by_user_count: by_user,
        memories_by_source_count: stored.len() - by_user,
        batches_count: batches.len(),
        batch_size: BATCH_MAX,
        clients_count: SEED_CLIENTS,
        secs,
        memories_per_sec: stored.len() as f64 / secs.max(1e-9),
        batch_latency: LatencySummary::from_samples(&mut latencies),
        errors: errors.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner),
        server_cpu_secs,
    };
    Ok((report, stored.into_iter().map(|(_, s, _)| s).collect()))
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Embed [`EMBED_BASELINE_QUERIES`] queries one per call with the local model in this process.
fn embed_baseline(model_dir: Option<PathBuf>, queries: &Queries<'_>, seed: u64) -> EmbedBaseline {
    use memwarden_embed::Embedder as _;
    let model = memwarden_embed::LazyMiniLm::new(model_dir);
    let mut base = EmbedBaseline { model: model.name().to_owned(), queries_count: 0, latency: LatencySummary::default(), error: None };
    if let Err(e) = model.embed(&["load the model"]) {
        base.error = Some(e.to_string());
        return base;
    }
    let mut rng = Rng::new(seed);
    let mut samples = Vec::with_capacity(EMBED_BASELINE_QUERIES);
    for _ in 0..EMBED_BASELINE_QUERIES {
        let body: serde_json::Value = serde_json::from_str(&search_body(queries, &mut rng)).unwrap_or_default();
        let q = body.get("query").and_then(|q| q.as_str()).unwrap_or("");
        let t = Instant::now();
        if let Err(e) = model.embed(&[q]) {
            base.error = Some(e.to_string());
            break;
        }
        samples.push(t.elapsed().as_micros() as u64);
    }
    base.queries_count = samples.len();
    base.latency = LatencySummary::from_samples(&mut samples);
    base
}

/// The request kind of a phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Search = 1,
    Decide = 2,
    Write = 3,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Search => "search",
            Kind::Decide => "decide",
            Kind::Write => "write",
        }
    }
}

/// Where queries come from.
struct Queries<'a> {
    stored: &'a [String],
    held_out: &'a [String],
}

fn pick<'a>(xs: &'a [String], rng: &mut Rng) -> &'a str {
    xs.get(rng.below(xs.len() as u64) as usize).map_or("", String::as_str)
}

/// A stored sentence cut to a random span of at least four words, with one word dropped when
/// that leaves at least four.
fn perturb(s: &str, rng: &mut Rng) -> String {
    let words: Vec<&str> = s.split_whitespace().collect();
    if words.len() <= 4 {
        return s.to_owned();
    }
    let len = 4 + rng.below((words.len() - 4) as u64 + 1) as usize;
    let start = rng.below((words.len() - len) as u64 + 1) as usize;
    let mut span: Vec<&str> = words.iter().skip(start).take(len).copied().collect();
    if span.len() > 4 {
        let drop = rng.below(span.len() as u64) as usize;
        span.remove(drop);
    }
    span.join(" ")
}

fn search_body(q: &Queries<'_>, rng: &mut Rng) -> String {
    let query = match rng.below(3) {
        0 => pick(q.stored, rng).to_owned(),
        1 => perturb(pick(q.stored, rng), rng),
        _ if !q.held_out.is_empty() => pick(q.held_out, rng).to_owned(),
        _ => perturb(pick(q.stored, rng), rng),
    };
    json!({"namespace": NAMESPACE, "query": query, "k": SEARCH_K}).to_string()
}

fn decide_body(seeded: &[Seeded], rng: &mut Rng) -> String {
    let at = |rng: &mut Rng| seeded.get(rng.below(seeded.len() as u64) as usize).map_or("", |s| s.id.as_str()).to_owned();
    let source = at(rng);
    let payee = format!("ACCT-{}", source.get(..8).unwrap_or("00000000").to_uppercase());
    let amount = format!("{}.{:02}", 10 + rng.below(4990), rng.below(100));
    json!({
        "tool": "pay", "kind": "act", "risk": "high", "amount": amount,
        "values": [{"key": "payee", "value": payee, "kind": "account", "sources": [source]}],
        "context": [source],
    })
    .to_string()
}

/// `decision/rule` of a decide answer (`ask_user/uncorroborated`).
fn verdict_key(v: &serde_json::Value) -> Option<String> {
    let d = v.pointer("/verdict/decision")?.as_str()?;
    Some(match v.pointer("/verdict/rule").and_then(|r| r.as_str()) {
        Some(r) => format!("{d}/{r}"),
        None => d.to_owned(),
    })
}

/// What one client thread saw.
#[derive(Default)]
struct ClientTally {
    latencies_us: Vec<u64>,
    errors: BTreeMap<String, u64>,
    examples: Vec<String>,
    hits: u64,
    verdicts: BTreeMap<String, u64>,
    written: Vec<Written>,
}

impl ClientTally {
    fn error(&mut self, kind: String, example: String) {
        *self.errors.entry(kind).or_default() += 1;
        if self.examples.len() < 3 {
            self.examples.push(example);
        }
    }
}

/// One phase's setup.
struct PhaseSpec<'a> {
    /// The servers sharing the clients (client t talks to server t mod n).
    servers: &'a [&'a ServerProcess],
    token: &'a str,
    clients: usize,
    secs: f64,
    kind: Kind,
    seed: u64,
    /// Write phases: where the writes go.
    namespace: Option<&'a str>,
}

/// An acknowledged write: the server that took it, the id it answered, the content's tag.
#[derive(Debug, Clone)]
struct Written {
    server: usize,
    id: String,
    tag: String,
}

/// `POST /v1/memories` body of one write: a seeded sentence with a unique tag at the end.
fn write_body(queries: &Queries<'_>, seeded: &[Seeded], namespace: &str, tag: &str, rng: &mut Rng) -> String {
    let text = seeded
        .get(rng.below(seeded.len() as u64) as usize)
        .and_then(|s| queries.stored.get(s.sentence))
        .map_or("a note", String::as_str);
    json!({"namespace": namespace, "content": format!("{text} {tag}")}).to_string()
}

fn run_phase(spec: &PhaseSpec<'_>, queries: &Queries<'_>, seeded: &[Seeded]) -> (PhaseReport, Vec<Written>) {
    let (clients, kind) = (spec.clients, spec.kind);
    let barrier = Barrier::new(clients + 1);
    let duration = Duration::from_secs_f64(spec.secs);
    let load_average_start = load_average();
    let (tx, rx) = std::sync::mpsc::channel::<ClientTally>();
    let mut tallies: Vec<ClientTally> = Vec::with_capacity(clients);
    let servers_cpu = || -> Option<f64> { spec.servers.iter().map(|s| s.cpu_secs()).sum() };
    let (cpu0, db0, self0) = (servers_cpu(), server::postgres_cpu_secs(), self_cpu_secs());
    let mut elapsed = Duration::ZERO;
    std::thread::scope(|s| {
        for t in 0..clients {
            let (barrier, tx) = (&barrier, tx.clone());
            let server_index = server_for_client(t, spec.servers.len());
            let base = spec.servers.get(server_index).map_or("", |sv| sv.base.as_str());
            let (token, namespace, seed) = (spec.token, spec.namespace.unwrap_or(NAMESPACE), spec.seed);
            s.spawn(move || {
                let mut rng = Rng::new(derive_seed(seed, t as u64));
                let c = Client::new(base);
                let mut tally = ClientTally::default();
                // Open the keep-alive connection before the clock starts.
                let _ = c.get("/healthz", None);
                barrier.wait();
                let deadline = Instant::now() + duration;
                let mut seq: u64 = 0;
                while Instant::now() < deadline {
                    let tag = checks::write_tag(t, seq);
                    seq += 1;
                    let (path, body) = match kind {
                        Kind::Search => ("/v1/search", search_body(queries, &mut rng)),
                        Kind::Decide => ("/v1/actions/decide", decide_body(seeded, &mut rng)),
                        Kind::Write => ("/v1/memories", write_body(queries, seeded, namespace, &tag, &mut rng)),
                    };
                    let t0 = Instant::now();
                    let r = c.post(path, Some(token), body.as_bytes());
                    let us = t0.elapsed().as_micros() as u64;
                    match r {
                        Err(e) => tally.error(server::truncate(&e, 100).to_owned(), e),
                        Ok(r) if !r.ok() => {
                            let k = r.describe();
                            tally.error(k.clone(), format!("{k}: {}", server::truncate(&r.body, 300)));
                        }
                        Ok(r) => {
                            let v: Option<serde_json::Value> = serde_json::from_str(&r.body).ok();
                            let seen = match kind {
                                Kind::Search => v.as_ref().and_then(|v| v.get("results")?.as_array().map(Vec::len)).map(|n| {
                                    tally.hits += n as u64;
                                }),
                                Kind::Decide => v.as_ref().and_then(verdict_key).map(|d| {
                                    *tally.verdicts.entry(d).or_default() += 1;
                                }),
                                Kind::Write => v.as_ref().and_then(|v| v.pointer("/item/id")?.as_str().map(str::to_owned)).map(|id| {
                                    tally.written.push(Written { server: server_index, id, tag: tag.clone() });
                                }),
                            };
                            if seen.is_some() {
                                tally.latencies_us.push(us);
                            } else {
                                tally.error(format!("HTTP {} with an unreadable body", r.status), server::truncate(&r.body, 300).to_owned());
                            }
                        }
                    }
                }
                let _ = tx.send(tally);
            });
        }
        barrier.wait();
        let t0 = Instant::now();
        // Every client sends its tally when its last answer is in (or drops its sender if it
        // panicked, which ends the receive loop early).
        drop(tx);
        while tallies.len() < clients {
            match rx.recv() {
                Ok(t) => tallies.push(t),
                Err(_) => break,
            }
        }
        elapsed = t0.elapsed();
    });
    let mut latencies: Vec<u64> = Vec::new();
    let mut errors: BTreeMap<String, u64> = BTreeMap::new();
    let mut examples = Vec::new();
    let mut verdicts: BTreeMap<String, u64> = BTreeMap::new();
    let mut written = Vec::new();
    let mut hits = 0;
    for t in tallies {
        latencies.extend(t.latencies_us);
        for (k, n) in t.errors {
            *errors.entry(k).or_default() += n;
        }
        for e in t.examples {
            if examples.len() < 3 {
                examples.push(e);
            }
        }
        for (k, n) in t.verdicts {
            *verdicts.entry(k).or_default() += n;
        }
        hits += t.hits;
        written.extend(t.written);
    }
    let ok = latencies.len() as u64;
    let secs = elapsed.as_secs_f64();
    let diff = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) => Some(b - a),
        _ => None,
    };
    let report = PhaseReport {
        backend: String::new(),
        servers_count: spec.servers.len(),
        kind: kind.name().into(),
        clients_count: clients,
        secs,
        requests_ok_count: ok,
        errors_count: errors.values().sum(),
        errors,
        error_examples: examples,
        throughput_per_sec: ok as f64 / secs.max(1e-9),
        latency: LatencySummary::from_samples(&mut latencies),
        hits_mean: (kind == Kind::Search).then(|| if ok == 0 { 0.0 } else { hits as f64 / ok as f64 }),
        verdicts,
        namespace: spec.namespace.map(str::to_owned),
        log_entries_appended_count: None,
        server_cpu_secs: diff(cpu0, servers_cpu()),
        db_cpu_secs: server::postgres_cpu_between(db0.as_ref(), server::postgres_cpu_secs().as_ref()),
        client_cpu_secs: diff(self0, self_cpu_secs()),
        load_average_start,
    };
    (report, written)
}

/// User + system CPU seconds of this process.
fn self_cpu_secs() -> Option<f64> {
    server::proc_cpu_secs("self")
}

fn dir_bytes(dir: &Path) -> u64 {
    let Ok(rd) = std::fs::read_dir(dir) else { return 0 };
    rd.filter_map(Result::ok)
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => dir_bytes(&e.path()),
            Ok(_) => e.metadata().map_or(0, |m| m.len()),
            Err(_) => 0,
        })
        .sum()
}

fn machine() -> Machine {
    let cpu_model = crate::retrieval::cpu_model();
    let memory_total_bytes = crate::retrieval::memory_total_bytes();
    Machine {
        cpu_model,
        cores_count: std::thread::available_parallelism().map_or(1, usize::from),
        memory_total_bytes,
        load_average_start: String::new(),
        load_average_end: String::new(),
    }
}

/// Report stamps, shared with the retrieval benchmark.
use crate::retrieval::{load_average, utc_now};
