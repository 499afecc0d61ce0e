//! The `memwarden` command line. Thin: parses arguments, calls `memwarden-engine`, prints JSON or
//! narration, and turns every error into one line on stderr and a non-zero exit.

use clap::{Args, Parser, Subcommand};
use memwarden_core::item::CONTENT_BYTES_MAX;
use memwarden_core::prelude::*;
use memwarden_engine::keys::{GrantSpec, generate_key, load_user_key, mint_grant, save_user_key};
use memwarden_engine::{Actor, Engine, EngineConfig, EngineError, Preset};
use memwarden_store::SqliteStore;
use serde_json::json;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

mod remote;
mod request;
mod tenant_move;

#[derive(Parser)]
#[command(name = "memwarden", version, about = "Memory for LLM agents that stays safe when what it stores was planted by an attacker")]
struct Cli {
    /// Data directory of the embedded store.
    #[arg(long, global = true, env = "MEMWARDEN_DATA", default_value = "memwarden-data")]
    data: PathBuf,
    /// Keep the log's signing key and witness in this directory instead of `<data>/keys` (the
    /// default, so a copy of the data directory is the whole state). Elsewhere, someone who can
    /// write the data directory cannot re-sign its log, so a rollback by them is detected; a
    /// backup must then carry this directory too.
    #[arg(long, global = true, env = "MEMWARDEN_KEY_DIR")]
    key_dir: Option<PathBuf>,
    /// Tenant.
    #[arg(long, global = true, env = "MEMWARDEN_TENANT", default_value = "default")]
    tenant: String,
    /// The acting principal's session: everything the engine hands a session (get, list, search,
    /// tool outputs) taints that session's later writes and proposals. Start a new session when
    /// the agent's context is fresh.
    #[arg(long, global = true, env = "MEMWARDEN_SESSION", default_value = "default")]
    session: String,
    /// Embedder: `minilm` (the local all-MiniLM-L6-v2, loaded on first use), `openai` (an
    /// OpenAI-compatible `/embeddings` server: MEMWARDEN_OPENAI_URL, MEMWARDEN_OPENAI_MODEL,
    /// MEMWARDEN_OPENAI_DIMS, optional MEMWARDEN_OPENAI_KEY), `none` (no embeddings, no search), or
    /// `hash` (feature hashing; for tests only).
    #[arg(long, global = true, env = "MEMWARDEN_EMBEDDER", default_value = "minilm")]
    embedder: String,
    /// Directory of the local model (default: $MEMWARDEN_MODEL_DIR, then ./models/all-MiniLM-L6-v2).
    #[arg(long, global = true, env = "MEMWARDEN_MODEL_DIR")]
    model_dir: Option<PathBuf>,
    /// Defense layers for the embedded store: full (authority, lineage and lifecycle composed),
    /// or none, lifecycle, authority, lineage (ablations).
    #[arg(long, global = true, env = "MEMWARDEN_PRESET", default_value = "full")]
    preset: String,
    /// Remote mode: send the memory operations (add, get, list, search, update, history, promote,
    /// revoke, poison, verify, erase, lineage, export-lineage, derive, tool-call, attest, decide, feedback, audit)
    /// to a running `memwarden serve` at this URL (`http://host:port`) instead of opening --data.
    /// The API key decides who acts and in which tenant: `--as` is not needed, and when given it
    /// must name the key's principal.
    #[arg(long, global = true, env = "MEMWARDEN_SERVER")]
    server: Option<String>,
    /// API key for --server (better: MEMWARDEN_API_KEY or --key-file; a command line is visible
    /// to other users of the machine).
    #[arg(long, global = true, env = "MEMWARDEN_API_KEY", hide_env_values = true)]
    api_key: Option<String>,
    /// File holding the API key for --server (overrides --api-key and MEMWARDEN_API_KEY).
    #[arg(long, global = true)]
    key_file: Option<PathBuf>,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run the narrated end-to-end demo on a fresh data directory (default ./.memwarden-demo).
    Demo {
        /// Where to run it (recreated; must be a previous demo directory or absent).
        #[arg(long = "dir", default_value = ".memwarden-demo")]
        dir: PathBuf,
    },
    /// Create the store (also done implicitly by every command).
    Init,
    /// Manage principals.
    Principal(PrincipalArgs),
    /// Add a memory as a principal.
    Add(AddArgs),
    /// Import memories from a JSON Lines file as a principal: each line a string, or an object
    /// `{"content": ..., "metadata": {...}}`. Written in batches with a progress bar; a line
    /// the gates refuse is reported (with its line number) and the rest go on. Prints a summary.
    Import {
        /// Writing principal (local data directory; with --server the key decides).
        #[arg(long = "as")]
        actor: Option<String>,
        /// Namespace.
        #[arg(long, default_value = "default")]
        ns: String,
        /// Route for every line (default: the writer's door; a user may say imported_memory).
        #[arg(long)]
        route: Option<String>,
        /// The JSON Lines file.
        file: PathBuf,
    },
    /// Derive (summarise) a memory from parents.
    Derive {
        /// Acting principal.
        #[arg(long = "as")]
        actor: Option<String>,
        /// Namespace.
        #[arg(long, default_value = "default")]
        ns: String,
        /// Parent memory ids (at least one).
        #[arg(long = "parent", required = true)]
        parents: Vec<String>,
        /// The summary text (`-` reads stdin).
        text: String,
    },
    /// Call a tool through the monitor and store its output.
    ToolCall {
        /// Calling principal.
        #[arg(long = "as")]
        actor: Option<String>,
        /// The tool principal.
        #[arg(long)]
        tool: String,
        /// Namespace.
        #[arg(long, default_value = "default")]
        ns: String,
        /// Argument `key=value[:kind][@src1,src2]` (kind: account, amount, text).
        #[arg(long = "arg")]
        args: Vec<String>,
        /// Retrieved memories passed in.
        #[arg(long = "input")]
        inputs: Vec<String>,
        /// The tool's output text.
        output: String,
        /// The tool's Ed25519 signature over the call and output (128 hex digits): without it,
        /// an output reported by anyone but the tool is no more trusted than the caller.
        #[arg(long)]
        signature: Option<String>,
    },
    /// Attest a value for a key.
    Attest {
        /// Attesting principal.
        #[arg(long = "as")]
        actor: Option<String>,
        /// Key.
        #[arg(long)]
        key: String,
        /// Value.
        #[arg(long)]
        value: String,
        /// Value kind: account, amount, text.
        #[arg(long, default_value = "text")]
        kind: String,
        /// Memories the attestation derives from.
        #[arg(long = "source")]
        sources: Vec<String>,
    },
    /// User grants.
    #[command(subcommand)]
    Grant(GrantCmd),
    /// Decide a proposed action (Algorithm 1); prints the verdict as JSON.
    Decide(DecideArgs),
    /// Show what the acting principal's session (`--session`) has been handed: its floor (no
    /// write of the session is labelled above it) and the witness items.
    Session {
        /// The principal.
        #[arg(long = "as")]
        actor: String,
    },
    /// Open a session: a handle issued to the principal, printed as JSON; pass it as
    /// `--session`. A server accepts only handles it issued. `fork` carries on from the
    /// current `--session`; `planning` starts clean and is never handed memory labelled below
    /// agent; `quarantine` starts untrusted.
    OpenSession {
        /// The principal (local data directory; with --server the key decides).
        #[arg(long = "as")]
        actor: Option<String>,
        /// fork, planning or quarantine.
        #[arg(long, default_value = "fork")]
        kind: String,
    },
    /// Read a memory by id.
    Get {
        /// Reading principal.
        #[arg(long = "as")]
        actor: Option<String>,
        /// The id.
        id: String,
    },
    /// Report a memory poisoned (a user, a tool or its owner): it and everything derived from it
    /// stop supporting actions.
    Poison {
        /// Reporting principal.
        #[arg(long = "as")]
        actor: Option<String>,
        /// The id.
        id: String,
    },
    /// Verify a memory (a user or an allow-listed tool); recorded in its lineage, never raises
    /// its label.
    Verify {
        /// Verifying principal.
        #[arg(long = "as")]
        actor: Option<String>,
        /// The id.
        id: String,
    },
    /// Revoke a memory (its owner or a user): no read returns it afterwards; it stays for audit.
    Revoke {
        /// Revoking principal.
        #[arg(long = "as")]
        actor: Option<String>,
        /// Why (recorded in the verdict log).
        #[arg(long, default_value = "")]
        reason: String,
        /// The id.
        id: String,
    },
    /// List the tenant's elevations (a user): each value lifted by corroboration, the memories
    /// it rests on and whether it still counts. Prints JSON.
    Elevations {
        /// Listing user.
        #[arg(long = "as")]
        actor: Option<String>,
    },
    /// Withdraw an elevation (a user): it stops counting now; the withdrawal is logged.
    WithdrawElevation {
        /// Withdrawing user.
        #[arg(long = "as")]
        actor: Option<String>,
        /// The value's key (`payee`, ...).
        #[arg(long)]
        key: String,
        /// The value.
        #[arg(long)]
        value: String,
        /// Its kind: account, amount or text.
        #[arg(long, default_value = "account")]
        kind: String,
        /// Why (recorded in the verdict log).
        #[arg(long, default_value = "")]
        reason: String,
    },
    /// Promote a memory (its owner): widen who may read it, to everyone in the namespace or to
    /// named readers, within what its ancestry admits. The lifecycle promotion gate may refuse
    /// and quarantine it. Prints JSON.
    Promote {
        /// Promoting principal (the owner).
        #[arg(long = "as")]
        actor: Option<String>,
        /// Readers to add (repeatable); none: everyone in the namespace.
        #[arg(long = "reader")]
        readers: Vec<String>,
        /// The id.
        id: String,
    },
    /// Update a memory (its owner or a user): the text becomes a new version derived from the
    /// old one, which is superseded (kept in its history). Prints the new version.
    Update {
        /// Updating principal.
        #[arg(long = "as")]
        actor: Option<String>,
        /// The id.
        id: String,
        /// The new text.
        text: String,
    },
    /// Every version of a memory the principal may see, oldest first.
    History {
        /// Reading principal.
        #[arg(long = "as")]
        actor: Option<String>,
        /// The id.
        id: String,
    },
    /// Erase a memory (its owner or a user): its text, metadata and embedding are deleted, with
    /// every memory whose every supporting path runs through it; logged by id. Prints JSON.
    Erase {
        /// Erasing principal.
        #[arg(long = "as")]
        actor: Option<String>,
        /// The id.
        id: String,
    },
    /// What the lineage layer knows about a memory, as a principal may see it (record, path
    /// trust with its factors, readable parents and children, hidden counts); prints JSON.
    Lineage {
        /// Reading principal.
        #[arg(long = "as")]
        actor: Option<String>,
        /// The id.
        id: String,
    },
    /// Export the tenant's lineage audit trail (every record, principal, action and edge; no
    /// memory text) as JSON. Users only.
    ExportLineage {
        /// Exporting user.
        #[arg(long = "as")]
        actor: Option<String>,
        /// W3C PROV-JSON instead of memwarden's own audit-trail JSON.
        #[arg(long)]
        prov: bool,
    },
    /// Semantic search; the permission filter decides eligibility before ranking.
    Search {
        /// Searching principal.
        #[arg(long = "as")]
        actor: Option<String>,
        /// Namespace.
        #[arg(long, default_value = "default")]
        ns: String,
        /// Results wanted.
        #[arg(short, long, default_value_t = 5)]
        k: usize,
        /// Only memories labelled this or higher: untrusted (all), agent, trusted.
        #[arg(long, default_value = "untrusted")]
        min_label: String,
        /// The query.
        query: String,
    },
    /// List memories of a namespace readable by a principal.
    List {
        /// Reading principal.
        #[arg(long = "as")]
        actor: Option<String>,
        /// Namespace.
        #[arg(long, default_value = "default")]
        ns: String,
        /// Memories of the namespace scanned for this page (1..=10000; a page may hold fewer).
        #[arg(long, default_value_t = 100)]
        limit: usize,
        /// The next page: the cursor a previous `list` printed (locally on stderr as
        /// `next_cursor: ...`; remotely in the answer's `next_cursor`).
        #[arg(long)]
        cursor: Option<String>,
    },
    /// Report a task's outcome for the memories it used (lifecycle layer): their utility, trust
    /// and hazard move, and so does their writers' reputation. Prints JSON.
    Feedback {
        /// Reporting principal.
        #[arg(long = "as")]
        actor: Option<String>,
        /// A memory the task used (repeatable; at least one).
        #[arg(long = "used", required = true)]
        used: Vec<String>,
        /// The task's outcome: success or failure.
        #[arg(long, value_parser = ["success", "failure"])]
        outcome: String,
    },
    /// The verdict log.
    #[command(subcommand)]
    Audit(AuditCmd),
    /// Move a tenant between stores (SQLite data directories, PostgreSQL schemas) with its
    /// verdict log intact: export it to a JSON Lines file, import it elsewhere.
    #[command(subcommand)]
    Tenant(tenant_move::TenantCmd),
    /// Model checking of the implementation.
    #[command(subcommand)]
    Check(CheckCmd),
    /// Benchmark suites (results as Markdown and JSON in --out).
    #[command(subcommand)]
    Bench(BenchCmd),
    /// Serve the HTTP API (and MCP at /mcp) on the data directory until SIGINT/SIGTERM.
    Serve(memwarden_server::ServeArgs),
    /// Serve MCP over stdio, every tool call acting as `--as` in `--session`; or, with the global
    /// `--server URL` and an API key, in front of a running `memwarden serve` (each message goes
    /// to its `/mcp` with the key and acts as the key's principal there; no data directory).
    Mcp {
        /// The principal (must be registered; not with --server, where the key decides).
        #[arg(long = "as")]
        actor: Option<String>,
        /// Tool profile: `native` (memwarden's tools) or `mem0` (the tool names and argument
        /// schemas of Mem0's MCP server, over the same engine calls; identity still comes from
        /// `--as`, never from `user_id`).
        #[arg(long, value_enum, default_value = "native")]
        tools: memwarden_server::mcp::ToolProfile,
    },
    /// API keys of the HTTP/MCP server (stored hashed in <data>/api-keys.sqlite3, or in the
    /// PostgreSQL store with --store).
    Key(KeyArgs),
    /// Test support: write memories in a loop as `--as`, printing `ACK <id>` after each
    /// acknowledged (durable) write. Used by the crash test, which kills it with SIGKILL.
    #[command(hide = true)]
    CrashWriter {
        /// Writing principal (registered as an agent if absent).
        #[arg(long = "as", default_value = "crash-writer")]
        actor: String,
        /// Writes per commit (1 = one commit per write; more exercises group commit).
        #[arg(long, default_value_t = 1)]
        batch: usize,
    },
}

/// The store an administrative command works on: the data directory's SQLite store, or the
/// PostgreSQL store several servers share (`serve --store`), so principals and keys made here
/// are the ones those servers see (issue 35.1).
#[derive(clap::Args, Clone, Default)]
struct StoreArgs {
    /// A PostgreSQL store (`postgres://user@host/db?schema=NAME`, as `serve --store`) instead
    /// of the data directory.
    #[arg(long, global = true, env = "MEMWARDEN_STORE")]
    store: Option<String>,
    /// The store key directory of that PostgreSQL store (as `serve --store-key-dir`; default
    /// `<data>/store-key`). Every server and command of one store needs the same key.
    #[arg(long, global = true, env = "MEMWARDEN_STORE_KEY_DIR")]
    store_key_dir: Option<PathBuf>,
}

/// `memwarden principal …`.
#[derive(clap::Args)]
struct PrincipalArgs {
    #[command(flatten)]
    store: StoreArgs,
    #[command(subcommand)]
    cmd: PrincipalCmd,
}

/// `memwarden key …`.
#[derive(clap::Args)]
struct KeyArgs {
    #[command(flatten)]
    store: StoreArgs,
    #[command(subcommand)]
    cmd: KeyCmd,
}

#[derive(Subcommand)]
enum PrincipalCmd {
    /// Register a principal (users get a signing key under <data>/user-keys/).
    Add {
        /// Id.
        #[arg(long)]
        id: String,
        /// user, agent, tool or source.
        #[arg(long)]
        kind: String,
        /// Organisation or registry behind it.
        #[arg(long)]
        domain: Option<String>,
        /// Tools only: on the source-authority allow-list.
        #[arg(long)]
        allow_listed: bool,
        /// Tools only: what a call does, as JSON (`{"kind":"act","risk":"high","values":
        /// [{"key":"payee","kind":"account"}],"moves_money":true}`); the system classes the
        /// tool's calls by it, never by the request.
        #[arg(long)]
        action: Option<String>,
        /// Tools only: the Ed25519 public key (64 hex digits) its signed outputs verify with.
        #[arg(long)]
        public_key: Option<String>,
    },
    /// List principals of the tenant.
    List,
}

#[derive(Subcommand)]
enum GrantCmd {
    /// Mint a one-time grant signed by a user's key; prints it as JSON.
    Mint {
        /// The signing user.
        #[arg(long)]
        user: String,
        /// Tool.
        #[arg(long)]
        tool: String,
        /// Value key.
        #[arg(long)]
        key: String,
        /// Value.
        #[arg(long)]
        value: String,
        /// Value kind: account, amount, text.
        #[arg(long, default_value = "account")]
        kind: String,
        /// Amount, if the action moves money.
        #[arg(long)]
        amount: Option<String>,
        /// Lifetime in seconds.
        #[arg(long, default_value_t = 600)]
        ttl_secs: u64,
        /// The store the grant is spent on: a server's is the `store` of its
        /// `GET /v1/principals/me`. Default: this data directory's store (where the grant is
        /// then also recorded). Any other store refuses the grant.
        #[arg(long)]
        store: Option<String>,
        /// Write the grant to this file instead of stdout.
        #[arg(long)]
        out: Option<PathBuf>,
    },
}

#[derive(Args)]
struct AddArgs {
    /// Writing principal.
    #[arg(long = "as")]
    actor: Option<String>,
    /// Namespace.
    #[arg(long, default_value = "default")]
    ns: String,
    /// Declared parent memory ids.
    #[arg(long = "parent")]
    parents: Vec<String>,
    /// Route (dialogue, direct, external_observation, ...). Default: the door's own for the
    /// writer's kind (external_observation for a source, tool_observation for a tool, direct).
    #[arg(long)]
    route: Option<String>,
    /// Restrict readers to these principals (the writer is always included).
    #[arg(long = "reader")]
    readers: Vec<String>,
    /// Free metadata `k=v` (never consulted by a gate).
    #[arg(long = "meta")]
    meta: Vec<String>,
    /// The text (`-` reads stdin).
    text: String,
}

#[derive(Args)]
struct DecideArgs {
    /// Proposing principal.
    #[arg(long = "as")]
    actor: Option<String>,
    /// Tool the action calls.
    #[arg(long)]
    tool: String,
    /// answer, inform or act.
    #[arg(long, default_value = "act")]
    kind: String,
    /// low, medium or high.
    #[arg(long, default_value = "high")]
    risk: String,
    /// Safety-relevant value `key=value[:kind][@src1,src2]`.
    #[arg(long = "value")]
    values: Vec<String>,
    /// Amount.
    #[arg(long)]
    amount: Option<String>,
    /// Memory ids in the agent's context.
    #[arg(long = "context")]
    context: Vec<String>,
    /// Grant files to present.
    #[arg(long = "grant")]
    grants: Vec<PathBuf>,
}

#[derive(Subcommand)]
enum CheckCmd {
    /// Model-check the real authority gate (T3) against a content gate and a lineage-edge gate (T1),
    /// a gate without origin binding and one trusting unvouched tool outputs (T2), over every
    /// interleaving within the bound.
    Authority {
        /// Memory slots.
        #[arg(long, default_value_t = 3)]
        slots: usize,
        /// Sessions.
        #[arg(long, default_value_t = 2)]
        sessions: usize,
        /// Independent attestations needed to elevate.
        #[arg(long, default_value_t = 2)]
        k: usize,
        /// Checker threads (1 gives the shortest counterexamples).
        #[arg(long, default_value_t = 1)]
        threads: usize,
        /// Also offer tool outputs reported by callers of every kind (with and without
        /// arguments) and tools writing their own outputs (issue 14).
        #[arg(long)]
        tool_outputs: bool,
        /// Also drive the shipped engine (`full`) through this many random walks of the model's
        /// steps, each on a fresh embedded store, with the model's ghost truth as the oracle
        /// (0: the state-space search only).
        #[arg(long, default_value_t = 0)]
        engine_walks: usize,
        /// Seed of the engine walks.
        #[arg(long, default_value_t = 7)]
        seed: u64,
    },
    /// Check that no acknowledged write is lost or hidden: random sequences of writes,
    /// declared derivations, reads, updates, revocations and erasures by several principals
    /// through the shipped engine (`full`), against a reference model (issue 33).
    Acknowledged {
        /// Sequences (each on a fresh ephemeral store).
        #[arg(long, default_value_t = 10_000)]
        sequences: usize,
        /// Operations per sequence.
        #[arg(long, default_value_t = 12)]
        ops: usize,
        /// Seed of the first sequence.
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
}

#[derive(Subcommand)]
enum KeyCmd {
    /// Mint a key for a registered principal of --tenant; the token is printed once.
    Mint {
        /// The principal the key acts as.
        #[arg(long = "as")]
        actor: String,
        /// A label to recognise the key by.
        #[arg(long, default_value = "")]
        label: String,
    },
    /// List keys (no secrets).
    List,
    /// Revoke a key by id; it stops working at once.
    Revoke {
        /// The key id (from `key list`).
        key_id: String,
    },
}

#[derive(Subcommand)]
enum BenchCmd {
    /// MEM-INV-Bench: the authority layer against laundering, sleeper, control-flow and
    /// exfiltration attacks, with baselines, ablations and studies.
    Authority {
        /// The stratified quick subset (minutes on 2 cores).
        #[arg(long)]
        quick: bool,
        /// `scripted` (deterministic, maximally persuadable) or `openai` (an OpenAI-compatible
        /// chat endpoint configured by MEMWARDEN_BENCH_OPENAI_URL / _MODEL / _KEY).
        #[arg(long, default_value = "scripted")]
        agent: String,
        /// Seed.
        #[arg(long, default_value_t = 7)]
        seed: u64,
        /// Play a stratified sample of at most this many cases (every channel and kind of case
        /// takes turns): for an LLM agent, which takes seconds per step.
        #[arg(long)]
        cases: Option<usize>,
        /// Worker threads (default 16 for the scripted agent, 4 for an endpoint; 1 suits a local
        /// server that answers one request at a time and reuses a shared prompt prefix).
        #[arg(long)]
        threads: Option<usize>,
        /// Output directory.
        #[arg(long)]
        out: PathBuf,
    },
    /// The lineage benchmark: 2,700 tasks (seed 42) through B0-B6, MAP-Graph (`lineage`) and
    /// `full`, plus six ablations, with cluster-bootstrap 95% intervals.
    Lineage {
        /// The stratified 540-task subset (seed 2027).
        #[arg(long)]
        quick: bool,
        /// `scripted` (deterministic) or `openai` (configured by MEMWARDEN_BENCH_OPENAI_URL /
        /// _MODEL / _KEY).
        #[arg(long, default_value = "scripted")]
        agent: String,
        /// What the `full` row's engine embeds with: `hash` (feature hashing, 256 dimensions;
        /// the suite's historical setting and CI's) or `local` (the shipped default model,
        /// all-MiniLM-L6-v2, from `--model-dir`).
        #[arg(long, default_value = "hash")]
        embedder: String,
        /// Keep the first N tasks of each of the six groups (a stratified sample for an LLM agent).
        #[arg(long)]
        per_group: Option<usize>,
        /// Run only these methods (comma-separated report names: B0..B6, lineage, full, or an
        /// ablation); default: every row and ablation.
        #[arg(long, value_delimiter = ',')]
        methods: Vec<String>,
        /// Output directory.
        #[arg(long)]
        out: PathBuf,
    },
    /// The multi-agent poisoning simulation of the lifecycle layer (MAPLE-Guard's evaluation):
    /// 8 agents (3 attacker-controlled), 3 rounds, star / chain / tree / random / fully connected,
    /// five benchmark-attack settings, the memory-layer variants and ablations; MDSR, RDA, PMUR
    /// and PMUR-A by round, poison write rate and persistence, Sec. ASR, attack-free utility,
    /// 30- and 50-agent scale runs (lifecycle.md, lifecycle.json, lifecycle.png).
    Lifecycle {
        /// 60 tasks, one seed per cell (minutes on 2 cores); default: the paper's sizes (200
        /// tasks, 15 seeds per topology).
        #[arg(long)]
        quick: bool,
        /// `scripted` (deterministic, maximally persuadable) or `openai` (configured by
        /// MEMWARDEN_BENCH_OPENAI_URL / _MODEL / _KEY; a reduced grid).
        #[arg(long, default_value = "scripted")]
        agent: String,
        /// Seed.
        #[arg(long, default_value_t = 42)]
        seed: u64,
        /// Agents in the main grid (default 8; the attacker share, 3 of 8, is kept).
        #[arg(long)]
        agents: Option<usize>,
        /// Output directory.
        #[arg(long)]
        out: PathBuf,
    },
    /// Retrieval: HNSW build time, memory per vector, recall@10 against exact search, single-thread
    /// latency unguarded and guarded (10% and 1% permission filters), embedding throughput; real
    /// English text from this machine embedded by the local model.
    Retrieval {
        /// Index sizes (repeatable; default 100,000 and 1,000,000).
        #[arg(long = "n")]
        n: Vec<usize>,
        /// N = 20,000 only, 200 queries (minutes).
        #[arg(long)]
        quick: bool,
        /// Where the embedding cache lives (default: the output directory).
        #[arg(long)]
        cache_dir: Option<PathBuf>,
        /// Output directory.
        #[arg(long)]
        out: PathBuf,
    },
    /// Crash soak: start `memwarden serve` on one store, write from several clients (each write
    /// with its Idempotency-Key), SIGKILL the server mid-write, restart, retry what the kill
    /// interrupted; repeat. Reports acknowledged writes lost and writes duplicated (both must be
    /// 0) and the start-up time per cycle (soak.md, soak.json, server.log).
    Soak {
        /// Kill/restart cycles.
        #[arg(long, default_value_t = 200)]
        cycles: usize,
        /// Concurrent writers.
        #[arg(long, default_value_t = 4)]
        clients: usize,
        /// A PostgreSQL store (`postgres://...` or `host=... dbname=...`, no `schema=`): the run
        /// creates a fresh schema and drops it at the end. Default: the embedded store.
        #[arg(long)]
        store: Option<String>,
        /// Seed of the kill times.
        #[arg(long, default_value_t = 7)]
        seed: u64,
        /// Output directory.
        #[arg(long)]
        out: PathBuf,
    },
    /// HTTP load: this process drives `memwarden serve` (started as a separate process on a
    /// loopback port, real model, rate limit off) with 1..C concurrent clients; decisions/s and
    /// search p50/p95/p99 (query embedding included) over N stored memories of real English text.
    Load {
        /// Memories stored before measuring (default 10,000; 1,000 with --quick).
        #[arg(long)]
        memories: Option<usize>,
        /// Concurrent client counts, comma-separated (default 1,8,64; 1,8 with --quick).
        #[arg(long, value_delimiter = ',')]
        clients: Vec<usize>,
        /// Seconds per phase (default 20; 5 with --quick).
        #[arg(long)]
        seconds: Option<f64>,
        /// 1,000 memories, 1 and 8 clients, 5 s per phase (about two minutes).
        #[arg(long)]
        quick: bool,
        /// Output directory (load.md, load.json, server.log).
        #[arg(long)]
        out: PathBuf,
        /// Also measure a PostgreSQL store (`postgres://...` or `host=... dbname=...`, no
        /// `schema=`): the run creates a fresh schema there, runs --servers server processes on it
        /// next to the embedded store, and drops the schema at the end. The global `--embedder`
        /// (minilm or hash) is passed to every server.
        #[arg(long)]
        store: Option<String>,
        /// Server process counts on the PostgreSQL schema, comma-separated (default 1; needs
        /// --store); clients are spread round-robin over the servers.
        #[arg(long, value_delimiter = ',')]
        servers: Vec<usize>,
    },
    /// LoCoMo evidence recall per preset (recall@1/5/10 any-of and all-of, MRR, nDCG@10, per
    /// category and speaker role), benign and under injected poison (exposure, payments to
    /// planted payees); locomo.md, locomo.json, locomo.png. One speaker is the user, the other a
    /// source; the agent searches every question (k = 10).
    Locomo {
        /// The LoCoMo conversations (`<id>.json`; never copied into the repository).
        #[arg(long, default_value = "../shared/data/locomo")]
        data: PathBuf,
        /// One conversation (the smallest): a few minutes on 2 cores.
        #[arg(long)]
        quick: bool,
        /// Presets to compare (repeatable; default none, lineage, lifecycle, full). Named
        /// `--compare` because `--preset` is the global option of the engine the CLI opens
        /// (clap refused the clash: `bench locomo` panicked at start in debug builds).
        #[arg(long = "compare")]
        presets: Vec<String>,
        /// Conversation ids (comma-separated; default 26,30,41,42,43).
        #[arg(long, value_delimiter = ',')]
        conversations: Vec<String>,
        /// `local` (all-MiniLM-L6-v2, see --model-dir) or `hash` (tests only).
        #[arg(long, default_value = "local")]
        embedder: String,
        /// `hybrid` (lexical BM25 + vector, fused by reciprocal rank; the engine's default) or
        /// `vector` (vector candidates only).
        #[arg(long, default_value = "hybrid")]
        search: String,
        /// Seed of the injected poison.
        #[arg(long, default_value_t = 16)]
        seed: u64,
        /// Benign runs only (no poison).
        #[arg(long)]
        no_attack: bool,
        /// Output directory.
        #[arg(long)]
        out: PathBuf,
    },
    /// LoCoMo question answering with a language model: memwarden retrieves under each preset
    /// (k = 10), a model behind an OpenAI-compatible endpoint (MEMWARDEN_BENCH_OPENAI_URL /
    /// _MODEL / _KEY; `scripts/llm-server.sh` serves a local one) answers, and LoCoMo's F1 scores
    /// it next to the evidence recall of the same retrievals (locomo-qa.md, locomo-qa.json,
    /// transcript.jsonl).
    LocomoQa {
        /// The LoCoMo conversations (`<id>.json`).
        #[arg(long, default_value = "../shared/data/locomo")]
        data: PathBuf,
        /// Questions (categories 1-4, spread evenly over the conversations).
        #[arg(long, default_value_t = memwarden_bench::locomo::qa::QUESTIONS_DEFAULT)]
        questions: usize,
        /// Presets to compare (repeatable; default none and full).
        #[arg(long = "compare")]
        presets: Vec<String>,
        /// Conversation ids (comma-separated; default 26,30,41,42,43).
        #[arg(long, value_delimiter = ',')]
        conversations: Vec<String>,
        /// `local` (all-MiniLM-L6-v2) or `hash` (tests only).
        #[arg(long, default_value = "local")]
        embedder: String,
        /// Also ask the model to judge each answer against the gold one.
        #[arg(long)]
        judge: bool,
        /// How many of the 10 hits (best first) the model is given.
        #[arg(long, default_value_t = 10)]
        context_k: usize,
        /// Output directory.
        #[arg(long)]
        out: PathBuf,
    },
}

#[derive(Subcommand)]
enum AuditCmd {
    /// Verify every tenant's log and the rows it binds (works on a store that refuses to open);
    /// with --server, the API key's tenant's log only.
    Verify,
    /// Sign a checkpoint of --tenant's log now (with --server: of the key's tenant's log; a
    /// user's key or the admin token).
    Checkpoint,
    /// Inclusion proof of one entry of --tenant's log (the index a receipt's `log_index` names)
    /// in that log's current tree.
    Proof {
        /// Entry index in the tenant's log.
        #[arg(long)]
        index: u64,
    },
}

fn fail(msg: impl std::fmt::Display) -> EngineError {
    EngineError::Invalid(msg.to_string())
}

fn parse<T: std::str::FromStr>(what: &str, s: &str) -> Result<T, EngineError>
where
    T::Err: std::fmt::Display,
{
    s.parse::<T>().map_err(|e| fail(format!("{what}: {e}")))
}

fn ids(v: &[String]) -> Result<Vec<ItemId>, EngineError> {
    v.iter().map(|s| parse::<ItemId>("id", s)).collect()
}

fn text_arg(t: &str) -> Result<String, EngineError> {
    if t != "-" {
        return Ok(t.to_owned());
    }
    let mut buf = Vec::new();
    std::io::stdin().take(CONTENT_BYTES_MAX as u64 + 1).read_to_end(&mut buf).map_err(|e| fail(format!("stdin: {e}")))?;
    String::from_utf8(buf).map_err(|_| fail("stdin is not UTF-8"))
}

/// `key=value[:kind][@src1,src2]`.
fn parse_value(s: &str) -> Result<(String, String, ValueKind, Vec<ItemId>), EngineError> {
    let (kv, srcs) = match s.rsplit_once('@') {
        Some((a, b)) => (a, ids(&b.split(',').map(str::to_owned).collect::<Vec<_>>())?),
        None => (s, Vec::new()),
    };
    let (key, rest) = kv.split_once('=').ok_or_else(|| fail(format!("expected key=value, got {s:?}")))?;
    let (value, kind) = match rest.rsplit_once(':') {
        Some((v, k)) if ["account", "amount", "text"].contains(&k) => (v, parse::<ValueKind>("kind", k)?),
        _ => (rest, ValueKind::Text),
    };
    if key.is_empty() || value.is_empty() {
        return Err(fail(format!("expected key=value, got {s:?}")));
    }
    Ok((key.to_owned(), value.to_owned(), kind, srcs))
}

/// Print JSON on stdout. A closed pipe (`memwarden ... | head`) ends the output quietly instead
/// of panicking as `println!` would.
fn print_json(v: &serde_json::Value) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{}", serde_json::to_string_pretty(v).unwrap_or_default());
}

/// A command's `--as`: optional on the commands that also run against a server (where the API
/// key decides who acts), required in local mode.
trait AsArg {
    /// The named principal, or the error saying `--as` is missing.
    fn principal(&self) -> Result<&str, EngineError>;
}

impl AsArg for String {
    fn principal(&self) -> Result<&str, EngineError> {
        Ok(self)
    }
}

impl AsArg for PrincipalId {
    fn principal(&self) -> Result<&str, EngineError> {
        Ok(self.as_str())
    }
}

impl AsArg for Option<String> {
    fn principal(&self) -> Result<&str, EngineError> {
        self.as_deref().ok_or_else(|| fail("--as <principal> is required on a local data directory (with --server, the API key decides who acts)"))
    }
}

/// `memwarden --server URL mcp`: MCP over stdio in front of a running server, with the API key
/// (`--key-file`, `MEMWARDEN_API_KEY` or `--api-key`). No engine here: the server holds the data,
/// authenticates the key, and its `mcp_tools` decides the tool profile.
fn mcp_proxy(cli: &Cli, url: &str, actor: Option<&str>, tools: memwarden_server::mcp::ToolProfile) -> Result<ExitCode, EngineError> {
    if actor.is_some() {
        return Err(fail("mcp --server: the API key decides who acts; omit --as"));
    }
    if tools != memwarden_server::mcp::ToolProfile::Native {
        return Err(fail("mcp --server: the server's mcp_tools decides the tool profile; omit --tools"));
    }
    let key = remote::api_key(cli).map_err(|e| fail(e.to_string()))?;
    memwarden_server::init_tracing("warn");
    memwarden_server::mcp::proxy::proxy_stdio(url, &key).map_err(|e| fail(e.to_string()))?;
    Ok(ExitCode::SUCCESS)
}

fn run(cli: Cli) -> Result<ExitCode, EngineError> {
    if let Some(code) = run_without_engine(&cli)? {
        return Ok(code);
    }
    let opened = open_engine(&cli)?;
    run_with_engine(cli, &opened)
}

/// The commands that open no engine: the MCP proxy, remote mode, the demo, the checkers, the
/// benchmarks, tenant moves and the offline log check. `None`: the command needs the engine.
fn run_without_engine(cli: &Cli) -> Result<Option<ExitCode>, EngineError> {
    if let (Some(url), Cmd::Mcp { actor, tools }) = (&cli.server, &cli.cmd) {
        return mcp_proxy(cli, url, actor.as_deref(), *tools).map(Some);
    }
    // Remote mode: everything but the data-free commands goes to the server (or is refused there).
    if cli.server.is_some() && !matches!(cli.cmd, Cmd::Demo { .. } | Cmd::Check(_) | Cmd::Bench(_)) {
        return Ok(Some(remote::run(cli)));
    }
    let code = match &cli.cmd {
        Cmd::Demo { dir } => demo(dir)?,
        Cmd::Check(c) => check(c),
        Cmd::Bench(b) => bench(b, cli.model_dir.clone(), &cli.embedder)?,
        Cmd::Tenant(t) => {
            tenant_move::run(t, &cli.data, &cli.tenant)?;
            ExitCode::SUCCESS
        }
        Cmd::Audit(AuditCmd::Verify) => audit_verify(cli)?,
        _ => return Ok(None),
    };
    Ok(Some(code))
}

/// `check authority` and `check acknowledged`: the model checkers.
fn check(cmd: &CheckCmd) -> ExitCode {
    let ok = match cmd {
        CheckCmd::Authority { slots, sessions, k, threads, tool_outputs, engine_walks, seed } => {
            let cfg = memwarden_check::CheckConfig { slots: *slots, sessions: *sessions, k: *k, threads: *threads, tool_outputs: *tool_outputs };
            let reports = memwarden_check::check_all(&cfg);
            println!("{}", memwarden_check::render_markdown(&reports));
            let mut ok = reports.iter().all(|r| r.as_expected());
            if *engine_walks > 0 {
                let r = memwarden_check::replay_engine(&cfg, *engine_walks, *seed);
                println!("{}", memwarden_check::render_engine_markdown(&r));
                ok &= r.holds();
            }
            ok
        }
        CheckCmd::Acknowledged { sequences, ops, seed } => {
            let started = std::time::Instant::now();
            let r = memwarden_check::check_acknowledged(*sequences, *ops, *seed);
            println!("{}", memwarden_check::render_acked_markdown(&r));
            println!("{} s", started.elapsed().as_secs());
            for v in &r.violations {
                eprintln!("violation: {v}");
            }
            r.holds()
        }
    };
    if ok { ExitCode::SUCCESS } else { ExitCode::from(1) }
}

/// `audit verify` on the data directory, offline (no engine: it reads the files as they are).
fn audit_verify(cli: &Cli) -> Result<ExitCode, EngineError> {
    let store_config = match &cli.key_dir {
        Some(d) => memwarden_store::StoreConfig::default().with_key_dir(d),
        None => memwarden_store::StoreConfig::default(),
    };
    let report = SqliteStore::verify_dir_with(&cli.data, &store_config)?;
    Ok(match &report.problem {
        None => {
            println!("ok: {} entries, root {}, {} checkpoint(s) verified", report.entries, hex::encode(report.root), report.checkpoints_checked);
            ExitCode::SUCCESS
        }
        Some(p) => {
            eprintln!("error: log does not verify: {p}");
            ExitCode::from(1)
        }
    })
}

/// The engine a command runs on, with what opening it read.
struct Opened {
    engine: std::sync::Arc<Engine>,
    tenant: TenantId,
    session: SessionId,
    /// `serve`'s configuration.
    serve_config: Option<memwarden_server::ServeConfig>,
    /// `principal` / `key` with `--store`: the shared store's configuration.
    admin_store: Option<memwarden_server::ServeConfig>,
}

impl Opened {
    /// The principal `id` names, authenticated into `--session`.
    fn actor(&self, id: &dyn AsArg) -> Result<Actor, EngineError> {
        self.engine.authenticate_session(&self.tenant, &parse::<PrincipalId>("principal", id.principal()?)?, self.session.clone())
    }
}

fn embedder(cli: &Cli) -> Result<Option<std::sync::Arc<dyn memwarden_engine::embed::Embedder>>, EngineError> {
    Ok(match cli.embedder.as_str() {
        "minilm" => Some(std::sync::Arc::new(memwarden_engine::embed::LazyMiniLm::new(cli.model_dir.clone()))),
        "hash" => Some(std::sync::Arc::new(memwarden_engine::embed::HashEmbedder::new(384))),
        "openai" => Some(std::sync::Arc::new(openai_embedder()?)),
        "none" => None,
        other => return Err(fail(format!("unknown embedder {other:?} (minilm, openai, none, hash)"))),
    })
}

/// Open the engine over the data directory, or over the shared store `serve --store` (or
/// `principal` / `key` with `--store`) names; the data directory's store is then never opened,
/// so no lock is taken on it.
fn open_engine(cli: &Cli) -> Result<Opened, EngineError> {
    let tenant = parse::<TenantId>("tenant", &cli.tenant)?;
    let embedder = embedder(cli)?;
    // Opening a large store loads (or, after damage, rebuilds) its vector indexes: show it.
    let bar = ProgressBar::new(10_000);
    let config = EngineConfig::for_preset(Preset::parse(&cli.preset)?)?;
    let config = match &cli.key_dir {
        Some(d) => EngineConfig { store: config.store.with_key_dir(d), embedder, ..config },
        None => EngineConfig { embedder, ..config },
    };
    let serve_config = match &cli.cmd {
        Cmd::Serve(args) => {
            let mut c = args.clone().into_config().map_err(|e| fail(e.to_string()))?;
            c.data_dir = cli.data.clone();
            Some(c)
        }
        _ => None,
    };
    let admin_store = match &cli.cmd {
        Cmd::Principal(PrincipalArgs { store, .. }) | Cmd::Key(KeyArgs { store, .. }) if store.store.is_some() => {
            let mut c = memwarden_server::ServeConfig::load_with(None, &|_| None).map_err(|e| fail(e.to_string()))?;
            c.data_dir = cli.data.clone();
            c.store.clone_from(&store.store);
            c.store_key_dir.clone_from(&store.store_key_dir);
            Some(c)
        }
        _ => None,
    };
    let shared = match serve_config.as_ref().or(admin_store.as_ref()) {
        Some(c) => c.open_shared_store().map_err(|e| fail(e.to_string()))?,
        None => None,
    };
    let engine = std::sync::Arc::new(match shared {
        Some(store) => Engine::with_store(store, config)?,
        None => Engine::open_with_progress(&cli.data, config, &|stage, done, total| bar.update(stage, done as u64, total as u64))?,
    });
    let session = parse::<SessionId>("session", &cli.session)?;
    Ok(Opened { engine, tenant, session, serve_config, admin_store })
}

/// The commands that run on an opened engine. A memory command is a [`request::Request`], run
/// through the server's mapping to engine calls; its error is the server's (`code: detail`).
fn run_with_engine(cli: Cli, o: &Opened) -> Result<ExitCode, EngineError> {
    if let Some((actor, call)) = request::Request::of(&cli.cmd)? {
        let who = o.actor(&actor.map(str::to_owned))?;
        return Ok(match call.local(&o.engine, &who) {
            Ok(v) => {
                print_json(&v);
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("error: {}: {}", e.code, e.detail.split_whitespace().collect::<Vec<_>>().join(" "));
                ExitCode::from(1)
            }
        });
    }
    let engine = &o.engine;
    match cli.cmd {
        Cmd::Serve(_) => serve(&cli.data, o)?,
        Cmd::Mcp { actor: a, tools } => {
            memwarden_server::init_tracing("warn");
            memwarden_server::mcp::serve_stdio_blocking(std::sync::Arc::clone(engine), o.actor(&a)?, tools).map_err(|e| fail(e.to_string()))?;
        }
        Cmd::Key(KeyArgs { cmd, .. }) => key(&cli.data, o, cmd)?,
        Cmd::Init => println!("store ready in {} ({} log entries of tenant {})", cli.data.display(), engine.store().log_len_of(&o.tenant), o.tenant),
        Cmd::Principal(PrincipalArgs { cmd: PrincipalCmd::Add { id, kind, domain, allow_listed, action, public_key }, .. }) => {
            let spec = NewPrincipal { id, kind, domain, allow_listed, action, public_key };
            add_principal(&cli.data, o, spec)?;
        }
        Cmd::Principal(PrincipalArgs { cmd: PrincipalCmd::List, .. }) => {
            let ps = engine.store().principals(&o.tenant)?;
            print_json(&json!(ps.iter().map(|p| json!({"principal": p, "integrity": p.integrity()})).collect::<Vec<_>>()));
        }
        Cmd::Import { actor: a, ns, route, file } => import(o, &o.actor(&a)?, &ns, route.as_deref(), &file)?,
        Cmd::Grant(GrantCmd::Mint { user, tool, key, value, kind, amount, ttl_secs, store, out }) => {
            let spec = GrantArgs { user, tool, key, value, kind, amount, ttl_secs, store, out };
            mint(&cli.data, o, spec)?;
        }
        Cmd::Session { actor: a } => {
            let who = o.actor(&a)?;
            let seen = engine.observed(&who)?;
            print_json(&json!({"principal": who.id(), "session": who.session(), "floor": seen.floor(), "witnesses": seen.witnesses()}));
        }
        Cmd::CrashWriter { actor: a, batch } => crash_writer(o, &a, batch)?,
        Cmd::Audit(AuditCmd::Checkpoint) => print_json(&serde_json::to_value(engine.store().checkpoint_of(&o.tenant, engine.now_ms())?).map_err(fail)?),
        Cmd::Audit(AuditCmd::Proof { index }) => proof(o, index)?,
        // Run without an engine, or as a call above.
        _ => return Err(fail("this command does not run on a local engine")),
    }
    Ok(ExitCode::SUCCESS)
}

/// `serve`: the HTTP (and MCP) server over the opened engine, until Ctrl-C.
fn serve(data: &Path, o: &Opened) -> Result<(), EngineError> {
    let config = o.serve_config.clone().ok_or_else(|| fail("serve: no configuration"))?;
    memwarden_server::init_tracing(&config.log);
    let data = match &config.pg_config() {
        Some(pg) => format!("PostgreSQL schema {}", pg.schema),
        None => data.display().to_string(),
    };
    memwarden_server::serve_blocking(config, std::sync::Arc::clone(&o.engine), move |addr| {
        eprintln!("memwarden serving {data} on http://{addr} (OpenAPI at /openapi.json, MCP at /mcp); Ctrl-C stops");
    })
    .map_err(|e| fail(e.to_string()))
}

/// `key mint | list | revoke`: the server's API keys (in the data directory, or the shared store).
fn key(data: &Path, o: &Opened, cmd: KeyCmd) -> Result<(), EngineError> {
    let keys = match o.admin_store.as_ref().and_then(memwarden_server::ServeConfig::pg_config) {
        Some(pg) => memwarden_server::ApiKeys::open_postgres(&pg.url, &pg.schema),
        None => memwarden_server::ApiKeys::open(data),
    }
    .map_err(|e| fail(e.to_string()))?;
    match cmd {
        KeyCmd::Mint { actor: a, label } => {
            let who = o.actor(&a)?;
            let minted = keys.mint(&o.tenant, who.id(), &label).map_err(|e| fail(e.to_string()))?;
            print_json(&json!(minted));
            eprintln!("the token is shown once; only its SHA-256 is stored");
        }
        KeyCmd::List => print_json(&json!(keys.list(Some(&o.tenant)).map_err(|e| fail(e.to_string()))?)),
        KeyCmd::Revoke { key_id } => {
            if !keys.revoke(&key_id).map_err(|e| fail(e.to_string()))? {
                return Err(fail(format!("no key {key_id}")));
            }
            println!("revoked {key_id}");
        }
    }
    Ok(())
}

/// `principal add`'s arguments.
struct NewPrincipal {
    id: String,
    kind: String,
    domain: Option<String>,
    allow_listed: bool,
    action: Option<String>,
    public_key: Option<String>,
}

/// `principal add`: register a principal; a user gets a fresh signing key, written beside the
/// data (only its public half is registered).
fn add_principal(data: &Path, o: &Opened, spec: NewPrincipal) -> Result<(), EngineError> {
    let id = parse::<PrincipalId>("principal", &spec.id)?;
    let kind = parse::<PrincipalKind>("kind", &spec.kind)?;
    let domain = spec.domain.map(|d| parse::<Domain>("domain", &d)).transpose()?;
    let key = if kind == PrincipalKind::User { Some(generate_key()?) } else { None };
    let action = spec
        .action
        .map(|a| memwarden_server::strict::from_str::<memwarden_core::principal::ToolAction>(&a).map_err(|e| fail(format!("--action: {e}"))))
        .transpose()?;
    let tool_key = match spec.public_key {
        None => None,
        Some(h) => {
            let mut k = [0u8; 32];
            hex::decode_to_slice(&h, &mut k).map_err(|_| fail("--public-key must be 64 hex digits"))?;
            Some(k)
        }
    };
    let public_key = key.as_ref().map(|k| k.verifying_key().to_bytes()).or(tool_key);
    let p = Principal { id: id.clone(), tenant: o.tenant.clone(), kind, domain, allow_listed: spec.allow_listed, public_key, action };
    let r = o.engine.register_principal(p.clone())?;
    if let Some(k) = key {
        let path = save_user_key(data, &o.tenant, &id, &k)?;
        eprintln!("user signing key written to {}", path.display());
    }
    print_json(&json!({"principal": p, "integrity": p.integrity(), "log_index": r.log_index}));
    Ok(())
}

/// `import` on the local engine: the same batches as over HTTP, run through the server's mapping.
fn import(o: &Opened, who: &Actor, ns: &str, route: Option<&str>, file: &Path) -> Result<(), EngineError> {
    let lines = read_import(file)?;
    let post = &mut |body| request::Request::add_many_local(&o.engine, who, body).map_err(|e| fail(format!("{}: {}", e.code, e.detail)));
    print_json(&request::import(&lines, ns, route, post)?);
    Ok(())
}

/// `grant mint`'s arguments.
struct GrantArgs {
    user: String,
    tool: String,
    key: String,
    value: String,
    kind: String,
    amount: Option<String>,
    ttl_secs: u64,
    store: Option<String>,
    out: Option<PathBuf>,
}

/// `grant mint`: sign a grant with the user's key; recorded here when it names this store.
fn mint(data: &Path, o: &Opened, a: GrantArgs) -> Result<(), EngineError> {
    let user = parse::<PrincipalId>("user", &a.user)?;
    o.actor(&user)?;
    let sk = load_user_key(data, &o.tenant, &user)?;
    let engine = &o.engine;
    let here = a.store.as_deref().is_none_or(|s| s == engine.store_id());
    let store = a.store.as_deref().unwrap_or(engine.store_id());
    let spec = GrantSpec {
        store,
        tool: &a.tool,
        key: &a.key,
        value: &a.value,
        kind: parse("kind", &a.kind)?,
        amount: a.amount.as_deref(),
        ttl_ms: a.ttl_secs.saturating_mul(1000),
    };
    let g = mint_grant(&sk, &o.tenant, &user, &spec, engine.now_ms())?;
    if here {
        engine.record_grant(&g)?;
    }
    let text = serde_json::to_string_pretty(&g).map_err(fail)?;
    match a.out {
        Some(p) => std::fs::write(&p, text).map_err(|e| fail(format!("{}: {e}", p.display())))?,
        None => println!("{text}"),
    }
    Ok(())
}

/// `crash-writer`: write and acknowledge batches forever (the crash tests kill it).
fn crash_writer(o: &Opened, a: &str, batch: usize) -> Result<(), EngineError> {
    use std::io::Write;
    let id = parse::<PrincipalId>("principal", a)?;
    if o.engine.store().principal(&o.tenant, &id)?.is_none() {
        let p = Principal { id: id.clone(), tenant: o.tenant.clone(), kind: PrincipalKind::Agent, domain: None, allow_listed: false, public_key: None, action: None };
        o.engine.register_principal(p)?;
    }
    let who = o.actor(&id)?;
    let ns = parse::<Namespace>("namespace", "crash")?;
    let mut stdout = std::io::stdout().lock();
    for n in 0u64.. {
        let reqs: Vec<WriteRequest> = (0..batch.max(1)).map(|j| WriteRequest::new(ns.clone(), format!("crash-test write {}.{n}.{j}", std::process::id()), Route::Direct)).collect();
        for r in o.engine.add_many(&who, reqs)? {
            let (id, _) = r?;
            writeln!(stdout, "ACK {id}").map_err(|e| fail(format!("stdout: {e}")))?;
        }
        stdout.flush().map_err(|e| fail(format!("stdout: {e}")))?;
    }
    Ok(())
}

/// `audit proof`: entry `index` of the tenant's log with its inclusion proof, verified here.
fn proof(o: &Opened, index: u64) -> Result<(), EngineError> {
    let (store, tenant) = (o.engine.store(), &o.tenant);
    let (size, root, _) = store.log_root_of(tenant);
    if index >= size {
        return Err(fail(format!("no entry {index} in the log of tenant {tenant} ({size} entries)")));
    }
    let proof = store.inclusion_proof_of(tenant, index, size)?;
    let entry = store.log_entries_of(tenant, index, index + 1)?;
    let leaf = entry.first().map(|e| memwarden_log::leaf_hash(e)).ok_or_else(|| fail(format!("no entry {index}")))?;
    memwarden_log::verify_inclusion(&leaf, index, size, &proof, &root).map_err(fail)?;
    print_json(&json!({"tenant": tenant, "index": index, "size": size, "root": hex::encode(root), "leaf": hex::encode(leaf),
        "proof": proof.iter().map(hex::encode).collect::<Vec<_>>(), "verified": true}));
    Ok(())
}

fn openai_embedder() -> Result<memwarden_engine::embed::OpenAiEmbedder, EngineError> {
    let var = |k: &str| std::env::var(k).map_err(|_| fail(format!("--embedder openai needs {k}")));
    let dims: usize = parse("MEMWARDEN_OPENAI_DIMS", &var("MEMWARDEN_OPENAI_DIMS")?)?;
    let mut cfg = memwarden_engine::embed::OpenAiConfig::new(var("MEMWARDEN_OPENAI_URL")?, var("MEMWARDEN_OPENAI_MODEL")?, dims);
    if let Ok(key) = std::env::var("MEMWARDEN_OPENAI_KEY") {
        cfg = cfg.with_api_key(key);
    }
    Ok(memwarden_engine::embed::OpenAiEmbedder::new(cfg)?)
}

fn git_rev() -> Option<String> {
    let out = std::process::Command::new("git").args(["rev-parse", "--short", "HEAD"]).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

fn bench_retrieval(n: &[usize], quick: bool, cache_dir: Option<&Path>, out: &Path, model_dir: Option<PathBuf>) -> Result<ExitCode, EngineError> {
    use memwarden_bench::retrieval::{RetrievalBenchOptions, run_retrieval, write_retrieval};
    let mut opts = if quick { RetrievalBenchOptions::quick(out) } else { RetrievalBenchOptions::new(out) };
    if !n.is_empty() {
        opts.sizes = n.to_vec();
    }
    opts.revision = git_rev().unwrap_or_else(|| "unknown".into());
    opts.model_dir = model_dir;
    opts.cache_dir = cache_dir.map(Path::to_path_buf);
    let bar = ProgressBar::new(0);
    let report = run_retrieval(&opts, &|stage, done, total| bar.update(stage, done, total)).map_err(fail)?;
    write_retrieval(&report, out).map_err(fail)?;
    println!("wrote {} and {}", out.join("retrieval.md").display(), out.join("retrieval.json").display());
    Ok(ExitCode::SUCCESS)
}

/// Largest import file.
const IMPORT_FILE_BYTES_MAX: u64 = 1 << 30;

/// One line of an import file: (line number from 1, text, metadata).
type ImportLine = (usize, String, std::collections::BTreeMap<String, String>);

/// An import file's lines: (line number from 1, text, metadata). Blank lines are skipped; a line
/// that is neither a JSON string nor an object with a string `content` is an error naming it.
fn read_import(path: &Path) -> Result<Vec<ImportLine>, EngineError> {
    let meta = std::fs::metadata(path).map_err(|e| fail(format!("{}: {e}", path.display())))?;
    if meta.len() > IMPORT_FILE_BYTES_MAX {
        return Err(fail(format!("{}: {} bytes; the limit is {IMPORT_FILE_BYTES_MAX}", path.display(), meta.len())));
    }
    let text = std::fs::read_to_string(path).map_err(|e| fail(format!("{}: {e}", path.display())))?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let bad = || fail(format!("{}:{}: expected a JSON string or {{\"content\": ..., \"metadata\": {{...}}}}", path.display(), i + 1));
        let v: serde_json::Value = memwarden_server::strict::from_str(line).map_err(|_| bad())?;
        let (content, metadata) = match v {
            serde_json::Value::String(s) => (s, Default::default()),
            serde_json::Value::Object(o) => {
                let content = o.get("content").and_then(|c| c.as_str()).ok_or_else(bad)?.to_owned();
                let metadata = match o.get("metadata") {
                    None => Default::default(),
                    Some(serde_json::Value::Object(m)) => {
                        m.iter().map(|(k, v)| (k.clone(), v.as_str().map_or_else(|| v.to_string(), str::to_owned))).collect()
                    }
                    Some(_) => return Err(bad()),
                };
                (content, metadata)
            }
            _ => return Err(bad()),
        };
        out.push((i + 1, content, metadata));
    }
    Ok(out)
}

/// A one-line progress bar on stderr, redrawn every 5% or on a new stage.
struct ProgressBar {
    /// Stages with fewer items than this are not shown (they finish at once).
    total_min: u64,
    last: std::sync::Mutex<(String, u64)>,
}

impl ProgressBar {
    fn new(total_min: u64) -> Self {
        Self { total_min, last: std::sync::Mutex::new((String::new(), u64::MAX)) }
    }

    fn update(&self, stage: &str, done: u64, total: u64) {
        use std::io::Write;
        if total < self.total_min {
            return;
        }
        let mut l = self.last.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if total == 0 {
            eprint!("\r{stage:<32} {done}");
        } else {
            let pct = (done * 100).checked_div(total).unwrap_or(100);
            if l.0 == stage && pct / 5 == l.1 / 5 && done != total {
                return;
            }
            let filled = usize::try_from(pct / 5).unwrap_or(20).min(20);
            eprint!("\r{stage:<32} [{}{}] {pct:>3}% ({done}/{total})", "#".repeat(filled), ".".repeat(20 - filled));
            if done == total {
                eprintln!();
            }
            *l = (stage.to_owned(), pct);
        }
        let _ = std::io::stderr().flush();
    }
}

/// An LLM agent keeps its transcript (every prompt and answer, one JSON line each) beside the
/// report it produces.
fn with_transcript(mut choice: memwarden_bench::AgentChoice, out: &Path) -> memwarden_bench::AgentChoice {
    if let memwarden_bench::AgentChoice::OpenAi(c) = &mut choice {
        c.transcript = Some(out.join("transcript.jsonl"));
    }
    choice
}

/// `bench lineage`'s arguments.
struct LineageArgs<'a> {
    quick: bool,
    agent: &'a str,
    embedder: &'a str,
    per_group: Option<usize>,
    methods: &'a [String],
    out: &'a Path,
}

fn bench_lineage(a: &LineageArgs<'_>, model_dir: Option<PathBuf>) -> Result<ExitCode, EngineError> {
    use memwarden_bench::lineage::{LineageAgentChoice, LineageBenchOptions, methods::Method, methods::SharedEmbedder, run_lineage, write_lineage};
    let LineageArgs { quick, agent, embedder, per_group, methods, out } = *a;
    let mut opts = LineageBenchOptions::new(out);
    opts.quick = quick;
    opts.embedder = match embedder {
        "hash" => None,
        "local" => {
            let model = match model_dir {
                Some(dir) => memwarden_engine::embed::MiniLmEmbedder::load(&dir)?,
                None => memwarden_engine::embed::MiniLmEmbedder::load_default()?,
            };
            Some(SharedEmbedder(std::sync::Arc::new(model)))
        }
        other => return Err(fail(format!("embedder {other:?}: hash or local"))),
    };
    opts.agent = with_transcript(LineageAgentChoice::from_name(agent).map_err(fail)?, out);
    opts.per_group = per_group;
    if !methods.is_empty() {
        opts.methods = Some(methods.iter().map(|m| Method::from_name(m).ok_or_else(|| fail(format!("unknown method {m:?}")))).collect::<Result<_, _>>()?);
    }
    opts.git_rev = git_rev();
    let bar = ProgressBar::new(0);
    let report = run_lineage(&opts, &mut |done, total| bar.update("lineage", done as u64, total as u64)).map_err(fail)?;
    let (json, md) = write_lineage(&report, out).map_err(fail)?;
    println!("wrote {} and {}", md.display(), json.display());
    Ok(ExitCode::SUCCESS)
}

fn bench_lifecycle(quick: bool, agent: &str, seed: u64, agents: Option<usize>, out: &Path) -> Result<ExitCode, EngineError> {
    use memwarden_bench::lifecycle::{LifecycleAgentChoice, LifecycleBenchOptions, run_lifecycle, write_lifecycle};
    let mut opts = LifecycleBenchOptions::new(out);
    opts.quick = quick;
    opts.agent = LifecycleAgentChoice::from_name(agent).map_err(fail)?;
    opts.seed = seed;
    opts.agents = agents;
    // Stamp the revision, and say so when the working tree differs from it.
    let dirty = std::process::Command::new("git")
        .args(["status", "--porcelain", "--untracked-files=no"])
        .output()
        .ok()
        .is_some_and(|o| o.status.success() && !o.stdout.is_empty());
    opts.git_rev = git_rev().map(|r| if dirty { format!("{r} + uncommitted changes") } else { r });
    let bar = ProgressBar::new(0);
    let report = run_lifecycle(&opts, &mut |done, total| bar.update("lifecycle runs", done as u64, total as u64)).map_err(fail)?;
    let (json, md, png) = write_lifecycle(&report, out).map_err(fail)?;
    println!("wrote {}, {} and {} ({:.1} s)", md.display(), json.display(), png.display(), report.wall_time_s);
    Ok(ExitCode::SUCCESS)
}

/// `bench load`'s arguments.
struct LoadArgs<'a> {
    memories: Option<usize>,
    clients: &'a [usize],
    seconds: Option<f64>,
    quick: bool,
    out: &'a Path,
    store: Option<&'a str>,
    servers: &'a [usize],
    embedder: &'a str,
}

fn bench_soak(cycles: usize, clients: usize, store: Option<&str>, seed: u64, out: &Path) -> Result<ExitCode, EngineError> {
    use memwarden_bench::load::soak::{SoakOptions, run_soak, write_soak};
    use memwarden_bench::load::{fresh_schema_name, spec_with_schema};
    let exe = std::env::current_exe().map_err(|e| fail(format!("cannot find this executable: {e}")))?;
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let spec = store.map(|s| spec_with_schema(s, &fresh_schema_name(std::process::id(), nanos)));
    let opts = SoakOptions { exe, out: out.to_path_buf(), cycles, clients, store: spec.clone(), seed, git_rev: git_rev() };
    let report = run_soak(&opts, &|msg| eprintln!("{msg}"));
    if let Some(spec) = &spec {
        let c = memwarden_store_pg::PgConfig::from_spec(spec, "");
        if let Err(e) = memwarden_store_pg::drop_schema(&c.url, &c.schema) {
            eprintln!("memwarden: could not drop the soak schema {}: {e}", c.schema);
        }
    }
    let report = report.map_err(fail)?;
    let (json, md) = write_soak(&report, out).map_err(fail)?;
    println!("wrote {} and {}: lost {}, duplicated {}", md.display(), json.display(), report.lost, report.duplicated);
    let ok = report.lost == 0 && report.duplicated == 0 && report.phantom == 0 && report.unresolved == 0 && report.log_verifies;
    Ok(if ok { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

fn bench_load(a: &LoadArgs<'_>, model_dir: Option<PathBuf>) -> Result<ExitCode, EngineError> {
    use memwarden_bench::load::{EmbedderKind, LoadBenchOptions, SchemaDropper, run_load, write_load};
    let out = a.out;
    let exe = std::env::current_exe().map_err(|e| fail(format!("cannot find this executable: {e}")))?;
    let mut opts = if a.quick { LoadBenchOptions::quick(out, exe) } else { LoadBenchOptions::new(out, exe) };
    if let Some(n) = a.memories {
        opts.memories = n;
    }
    if !a.clients.is_empty() {
        opts.clients = a.clients.to_vec();
    }
    if let Some(s) = a.seconds {
        opts.phase_secs = s;
    }
    if !a.servers.is_empty() {
        opts.servers = a.servers.to_vec();
    }
    opts.embedder = EmbedderKind::from_name(a.embedder).map_err(fail)?;
    opts.store = a.store.map(str::to_owned);
    opts.drop_schema = Some(SchemaDropper(std::sync::Arc::new(|spec: &str| {
        let c = memwarden_store_pg::PgConfig::from_spec(spec, "");
        memwarden_store_pg::drop_schema(&c.url, &c.schema).map_err(|e| e.to_string())
    })));
    opts.model_dir = model_dir;
    opts.git_rev = git_rev();
    let report = run_load(&opts, &|msg| eprintln!("{msg}")).map_err(fail)?;
    let (json, md) = write_load(&report, out).map_err(fail)?;
    println!("wrote {} and {}", md.display(), json.display());
    Ok(ExitCode::SUCCESS)
}

#[allow(clippy::too_many_arguments)]
fn bench_locomo(
    data: &Path,
    quick: bool,
    presets: &[String],
    conversations: &[String],
    embedder: &str,
    search: &str,
    seed: u64,
    no_attack: bool,
    out: &Path,
    model_dir: Option<PathBuf>,
) -> Result<ExitCode, EngineError> {
    use memwarden_bench::locomo::{EmbedderChoice, LocomoBenchOptions, SearchMode, attack::AttackConfig, run_locomo, write_locomo};
    let mut opts = LocomoBenchOptions::new(data, out);
    opts.quick = quick;
    opts.presets = presets.iter().map(|p| memwarden_engine::Preset::parse(p)).collect::<Result<_, _>>()?;
    opts.conversations = conversations.to_vec();
    opts.embedder = EmbedderChoice::from_name(embedder, model_dir).map_err(fail)?;
    opts.search = SearchMode::from_name(search).map_err(fail)?;
    opts.attack = (!no_attack).then(|| AttackConfig { seed, ..AttackConfig::default() });
    let dirty = std::process::Command::new("git")
        .args(["status", "--porcelain", "--untracked-files=no"])
        .output()
        .ok()
        .is_some_and(|o| o.status.success() && !o.stdout.is_empty());
    opts.git_rev = git_rev().map(|r| if dirty { format!("{r} + uncommitted changes") } else { r });
    let bar = ProgressBar::new(0);
    let report = run_locomo(&opts, &mut |stage, done, total| bar.update(stage, done as u64, total as u64)).map_err(fail)?;
    let (json, md, png) = write_locomo(&report, out).map_err(fail)?;
    println!("wrote {}, {} and {} ({:.1} s)", md.display(), json.display(), png.display(), report.meta.wall_time_s);
    Ok(ExitCode::SUCCESS)
}

/// `bench locomo-qa`'s arguments.
struct LocomoQaArgs<'a> {
    data: &'a Path,
    questions: usize,
    presets: &'a [String],
    conversations: &'a [String],
    embedder: &'a str,
    judge: bool,
    context_k: usize,
    out: &'a Path,
}

fn bench_locomo_qa(a: &LocomoQaArgs<'_>, model_dir: Option<PathBuf>) -> Result<ExitCode, EngineError> {
    use memwarden_bench::locomo::qa::{QaOptions, run_qa, write_qa};
    use memwarden_bench::locomo::{EmbedderChoice, SearchMode};
    let mut model = memwarden_bench::openai::OpenAiAgentConfig::from_env().map_err(fail)?;
    model.transcript = Some(a.out.join("transcript.jsonl"));
    let opts = QaOptions {
        data_dir: a.data.to_path_buf(),
        conversations: a.conversations.to_vec(),
        presets: a.presets.iter().map(|p| memwarden_engine::Preset::parse(p)).collect::<Result<_, _>>()?,
        questions: a.questions,
        embedder: EmbedderChoice::from_name(a.embedder, model_dir).map_err(fail)?,
        search: if memwarden_engine::HYBRID_DEFAULT { SearchMode::Hybrid } else { SearchMode::Vector },
        model,
        judge: a.judge,
        context_k: a.context_k,
        git_rev: git_rev(),
    };
    let bar = ProgressBar::new(0);
    let report = run_qa(&opts, &mut |stage, done, total| bar.update(stage, done as u64, total as u64)).map_err(fail)?;
    let (json, md) = write_qa(&report, a.out).map_err(fail)?;
    println!("wrote {} and {} ({:.1} s)", md.display(), json.display(), report.wall_time_s);
    Ok(ExitCode::SUCCESS)
}

fn bench(cmd: &BenchCmd, model_dir: Option<PathBuf>, embedder: &str) -> Result<ExitCode, EngineError> {
    use std::io::Write;
    let (quick, agent, seed, cases, out) = match cmd {
        BenchCmd::Authority { quick, agent, seed, cases, threads, out } => (quick, agent, seed, (cases, threads), out),
        BenchCmd::Retrieval { n, quick, cache_dir, out } => return bench_retrieval(n, *quick, cache_dir.as_deref(), out, model_dir),
        BenchCmd::Lineage { quick, agent, embedder, per_group, methods, out } => {
            return bench_lineage(&LineageArgs { quick: *quick, agent, embedder, per_group: *per_group, methods, out }, model_dir);
        }
        BenchCmd::LocomoQa { data, questions, presets, conversations, embedder, judge, context_k, out } => {
            return bench_locomo_qa(&LocomoQaArgs { data, questions: *questions, presets, conversations, embedder, judge: *judge, context_k: *context_k, out }, model_dir);
        }
        BenchCmd::Lifecycle { quick, agent, seed, agents, out } => return bench_lifecycle(*quick, agent, *seed, *agents, out),
        BenchCmd::Soak { cycles, clients, store, seed, out } => return bench_soak(*cycles, *clients, store.as_deref(), *seed, out),
        BenchCmd::Load { memories, clients, seconds, quick, out, store, servers } => {
            return bench_load(&LoadArgs { memories: *memories, clients, seconds: *seconds, quick: *quick, out, store: store.as_deref(), servers, embedder }, model_dir);
        }
        BenchCmd::Locomo { data, quick, presets, conversations, embedder, search, seed, no_attack, out } => {
            return bench_locomo(data, *quick, presets, conversations, embedder, search, *seed, *no_attack, out, model_dir);
        }
    };
    let mut opts = memwarden_bench::AuthorityBenchOptions::new(out);
    opts.quick = *quick;
    opts.seed = *seed;
    opts.agent = with_transcript(memwarden_bench::AgentChoice::from_name(agent).map_err(fail)?, out);
    opts.max_cases = *cases.0;
    opts.threads = *cases.1;
    opts.git_rev = git_rev();
    let mut last = usize::MAX;
    let report = memwarden_bench::run_authority(&opts, &mut |done, total| {
        let pct = (done * 100).checked_div(total).unwrap_or(100);
        if pct / 5 != last / 5 || done == total {
            last = pct;
            let filled = pct / 5;
            eprint!("\r[{}{}] {pct:>3}% ({done}/{total} cases)", "#".repeat(filled), ".".repeat(20 - filled));
            let _ = std::io::stderr().flush();
        }
    })
    .map_err(fail)?;
    eprintln!();
    let (json, md) = memwarden_bench::write_authority(&report, out).map_err(fail)?;
    println!("wrote {} and {}", md.display(), json.display());
    Ok(ExitCode::SUCCESS)
}

fn demo(dir: &Path) -> Result<ExitCode, EngineError> {
    if dir.exists() {
        let is_demo = dir.join(".memwarden-demo").exists();
        let empty = std::fs::read_dir(dir).map(|mut d| d.next().is_none()).unwrap_or(false);
        if !is_demo && !empty {
            return Err(fail(format!("{} exists and is not a demo directory; pick another with --dir", dir.display())));
        }
        std::fs::remove_dir_all(dir).map_err(|e| fail(format!("{}: {e}", dir.display())))?;
    }
    std::fs::create_dir_all(dir).map_err(|e| fail(format!("{}: {e}", dir.display())))?;
    std::fs::write(dir.join(".memwarden-demo"), b"").map_err(|e| fail(format!("{}: {e}", dir.display())))?;
    let summary = memwarden_engine::demo::run(dir, &mut std::io::stdout())?;
    Ok(if summary.as_expected() { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}
