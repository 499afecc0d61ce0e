//! memwarden storage on PostgreSQL: [`PostgresStore`] implements [`memwarden_store::Store`] on
//! one PostgreSQL schema that any number of processes (servers) may share.
//!
//! # What is shared with the embedded store
//!
//! Every mutation runs the *same* code as on SQLite ([`memwarden_store::backend::apply_caller`]
//! over the [`memwarden_store::backend::Db`] seam): the same rows, the same row digests bound to
//! the verdict log, the same log entries, the same compare-and-set and uniqueness checks. Reads
//! check each row against the state the verified log commits to with the same
//! [`memwarden_store::backend::StateIndex`], the same record decoders and the same paged-order
//! checks; `verify_log` runs the same log verifier and the same row audit. Only the SQL of the
//! reads, the lexical index and the vector keys are this crate's.
//!
//! # One chain per tenant, several processes
//!
//! A commit is one PostgreSQL transaction (READ COMMITTED) holding
//! `pg_advisory_xact_lock(hashtextextended('memwarden/log/<schema>/<tenant>', 0))` for every
//! tenant it touches (taken in tenant order, so two commits cannot deadlock). Under the lock the
//! process first *catches up*: it reads the tenant's recorded head (`heads`) and every entry
//! after the ones it has verified, checks that they continue its verified chain (index, previous
//! hash, canonical encoding, a genesis entry naming the tenant), and replays their row bindings.
//! Only then are the mutation's rows written and its entries linked to that head, and the head
//! row updated, in the same transaction. So two processes can never append to the same head: the
//! chain does not fork. There is no global sequence: the log is keyed by `(tenant, idx)`, and a
//! vector's key is the tenant-log index of its item's write. That makes the tenant the natural
//! shard key (a Citus-style distribution by `tenant` would co-locate every table's rows with the
//! tenant's log; the only cross-tenant constraints left are the global uniqueness of item ids in
//! `items`, `erased` and `vectors`, which a distributed deployment would scope by tenant).
//!
//! # Refresh rule (how another process's writes become visible)
//!
//! This process's cached views — the verified logs, the row-binding state, and the vector
//! index's catalog — are never trusted across processes. **Every commit first catches up on
//! the tenant's log** as above (one `SELECT` of the tenant's head when nothing is new), under
//! the tenant's advisory lock. **A read checks every row it reads against the view**: it reads
//! the latest committed rows (no snapshot, no catch-up first: one round trip per query), and a
//! row another process wrote, changed or deleted since this process last caught up — or one an
//! attacker changed — does not match the state the verified log commits it to. On such a
//! mismatch the read runs again in a REPEATABLE READ snapshot after catching up within it, so a
//! row is checked against exactly the log of its snapshot: a row that still differs there is
//! reported as tampered; if this process had already moved past the snapshot the snapshot read
//! is retried, up to four times. Search, `foreign_version`, grant-use checks and commits catch
//! up first (their answers come from the view, not from rows). The delay before a write acknowledged by one process is visible through
//! another is therefore zero: the next read or search sees it. The vector index learns the items
//! that new entries bind (inserted, re-classed on a status or scope change, removed on erasure)
//! from their rows, each checked against the replayed state; search still re-reads and
//! re-verifies every hit and falls back to an exact scan when the index is out of step, so a
//! stale catalog can cost time, never return an ineligible item.
//!
//! # Configuration
//!
//! [`PgConfig::from_spec`] takes what a command line or config file gives
//! (`postgres://user@host/db?schema=NAME`, or a key-value string with `schema=NAME`; default
//! schema [`DEFAULT_SCHEMA`]) plus the key directory every process of the store shares.
//!
//! # Vectors and lexical search
//!
//! The local server has no pgvector, so embeddings are stored as `BYTEA` (little-endian `f32`,
//! as on SQLite) and searched with the in-process guarded index ([`memwarden_store::backend::Vectors`],
//! built from the verified rows at open and kept in step by the catch-up): eligibility before
//! ranking, `min(k, eligible)`, never an ineligible hit. Lexical search uses PostgreSQL full text
//! (`to_tsvector('simple', content)` in a `tsvector` column with a GIN index, ranked with
//! `ts_rank`, not BM25): the same query words as SQLite ([`memwarden_store::lexical::query_terms`]),
//! any of which may match, except that SQLite also leaves out a word matching more than
//! [`memwarden_store::lexical::TERM_MATCHES_MAX`] memories of the namespace and this store keeps
//! it (counting the matches through a GIN index cost more than the ranking it saves; measured in
//! `search_lexical`); every candidate is read back, verified and permission-filtered.
//!
//! This is a measured choice, not only a workaround (issue 17 item 1; numbers, commands and
//! limits in the repository's `docs/bench-pgvector.md`). On the same embeddings (N = 10,000),
//! pgvector 0.8.6's HNSW scan applies the access-class filter after the walk: with its defaults
//! 996 of 1000 top-10 queries of a reader of 10% of the rows, and all 1000 of a reader of 1%,
//! returned fewer than `min(k, eligible)` rows. Its iterative scans removed that in the runs but
//! are bounded (`hnsw.max_scan_tuples`), approximate and slower (1% reader: server-side p50 7.7 to
//! 9.0 ms against 0.02 ms for this index). The in-process index keeps the contract, needs no
//! extension, and costs per-process memory and a rebuild at open; a pgvector table partitioned by
//! access class is the alternative to measure first if stores grow toward millions of vectors
//! per process or many processes share one store.
//!
//! # Not (yet) done
//!
//! - No witness: the signed tree heads are stored in the database (checkpoints, and the head
//!   signed at every commit in `heads.sig`) only, so an entry appended without the key is
//!   refused, but a consistent rollback of the whole database to an earlier signed state is not
//!   detected unless a signed head was exported (`checkpoint_of`) and compared.
//! - The global view (`log_len`, `log_root`, ...) is every tenant's log in tenant order; since
//!   there is no global sequence its positions move when an earlier tenant grows, so its
//!   checkpoints are signed but not stored (`checkpoints()` is empty). Use the per-tenant API.
//! - One connection for commits per process (commits of one process are serialised, with no
//!   group commit: one fsync per commit; processes commit in parallel except on the same
//!   tenant), and a small pool for reads ([`PgConfig::read_connections`]).
//! - Erasure deletes the rows in the erasing transaction, so no read, search or table holds the
//!   text afterwards; PostgreSQL keeps the dead tuples until (auto)vacuum reclaims them and
//!   the WAL (and any WAL archive or replica) holds the text as written. Physical erasure on
//!   PostgreSQL is an operational matter (vacuum, WAL retention) this crate does not control.
//!
//! # Dropped connections
//!
//! A connection the server dropped (restart, idle timeout, `pg_terminate_backend`) is reopened
//! by the next call: a transaction's `BEGIN` that finds its connection gone reconnects and
//! starts again (nothing had been sent since the last transaction ended). A connection that
//! drops inside a transaction fails that call without acknowledging anything; PostgreSQL rolls
//! the transaction back, so nothing is half-applied. A store's connections carry
//! `application_name = memwarden/<schema>`.

mod conn;
mod schema;
mod store;

pub use schema::SCHEMA_VERSION;
pub use store::{DEFAULT_SCHEMA, PgConfig, PostgresStore, drop_schema};

/// Requests this process has sent to PostgreSQL so far, over every connection of every
/// [`PostgresStore`] (each a round trip: a statement prepared, a query or statement run, a
/// transaction's `BEGIN`/`COMMIT`). For benchmarks: the difference across one operation is its
/// round trips.
pub fn round_trips() -> u64 {
    conn::round_trips()
}
