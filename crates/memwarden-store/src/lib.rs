//! memwarden storage. The [`Store`] trait is what the engine needs from a backend; the gates never
//! see it (they are pure functions in `memwarden-core`), so the same decisions come out of every
//! backend. [`SqliteStore`] is the embedded default: one data directory, no server to start.
//!
//! Every state change is a [`Mutation`] that carries a proof value only the authority gate can
//! build ([`memwarden_core::authority::AdmittedWrite`], [`memwarden_core::authority::DecisionOutcome`],
//! ...). A commit applies the mutation's rows *and* appends its verdict-log entries in one
//! transaction, so an item never exists without its log entry, and an acknowledged commit survives
//! `kill -9` (SQLite WAL, `synchronous=FULL`). Concurrent commits are grouped into one transaction
//! (group commit) by a single writer thread, which is also what serialises the log.
//!
//! ```
//! use memwarden_store::{SqliteStore, Store, StoreConfig};
//! let dir = tempfile::tempdir()?;
//! let config = StoreConfig::default().with_key_dir(dir.path().join("keys"));
//! let store = SqliteStore::open(&dir.path().join("data"), config)?;
//! assert_eq!(store.log_len(), 0); // each tenant's log opens with its first commit
//! assert!(store.verify_log()?.is_ok());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Tamper evidence and its threat model
//!
//! **Everything a decision reads is committed to by the verdict log.** Rows outside the log
//! (items with their scope, status, guard state and supersession; principals; attestations;
//! elevations; used grants; sessions; reputations; lineage events; erasure tombstones; vector
//! keys and embedding digests) are *bound*: the log entry that creates or changes a row carries
//! the row's digest. Opening the store verifies the log and replays those bindings into memory;
//! every read compares the row it got with them, and [`Store::verify_log`] (the CLI's
//! `audit verify`) audits every row, naming the first bad entry or row
//! ([`memwarden_log::Problem::BadRow`]). Whether a grant was used is answered from the log
//! alone. Index files are a cache authenticated with a MAC derived from the signing key;
//! one that does not verify is rebuilt from the (verified) table.
//!
//! **Rollback** is detected against the *witness*: the latest signed tree head, rewritten in
//! the key directory after every group commit, before any caller is told of it. The log in
//! the database must extend it (same root at the witnessed size), so a database restored from
//! an older copy, a cut log, deleted checkpoints, or an emptied or replaced data directory (the
//! key directory is bound to one store id) are refused at open and reported by `verify_log`.
//! The checkpoint-signing key lives in the key directory too ([`KeyLocation`]). By default
//! that is `<data dir>/keys`, so the data directory is the whole state (a copy of it is a
//! complete backup that opens at any path); but then whoever can write the data directory can
//! write the key directory too (the table's second row). The first row needs the key directory
//! elsewhere, out of that writer's reach ([`KeyLocation::Dir`], [`KeyLocation::StateDir`]).
//!
//! Who can do what, and what is then detected:
//!
//! | attacker can | detected | not detected |
//! | --- | --- | --- |
//! | write the data directory only (a stolen backup put back, a shared volume, a disk edited offline or under a running store) | any changed, forged, deleted or rolled-back row (on read and by `verify_log`); a changed, dropped, swapped, inserted or truncated log entry; a consistent rollback of the whole database to any earlier state; a replaced or emptied data directory; a forged checkpoint; an edited index file (rebuilt) | a database edited so that it no longer opens is refused, not repaired (availability); reading it (confidentiality rests on file modes: 0700 / 0600); rows no decision reads (the `edges` table is audited, not read) |
//! | write the data directory and the key directory (same user, or the key directory on the same volume without other protection) | nothing that re-signing can hide: such an attacker rewrites log, checkpoints and witness consistently | everything above, unless a signed head was exported elsewhere earlier (`checkpoint`): a consistency proof against it exposes any rewrite or rollback |
//! | read the key directory | — | can forge checkpoints and witnesses (combine with data-directory write access to roll back undetected) |
//!
//! So the key directory must be writable only by the store's user and, against an attacker with
//! that user's rights, kept out of reach (another user, a read-only or remote mount) or the
//! signed heads exported to an outside witness. With [`StoreConfig::witness_every_commit`] off,
//! a rollback by fewer entries than the checkpoint interval goes unnoticed. With the default
//! layout ([`KeyLocation::InDataDir`]) the checks still catch corruption and edits made without
//! the key (say, through the database file alone), but no consistent rollback or re-signing by
//! someone who can write the whole data directory.
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

mod audit;
mod binding;
mod db;
mod idempotency;
pub mod cursor;
pub mod decode;
mod keys;
pub mod lexical;
mod logs;
mod migrate;
pub mod seal;
mod sqlite;
mod stored;
pub mod transfer;
mod vectors;
mod write;

pub use idempotency::{IDEMPOTENCY_ANSWER_BYTES_MAX, IDEMPOTENCY_KEY_BYTES_MAX, IDEMPOTENCY_TTL_MS, IdempotencyRecord, IdempotencyTag};
pub use keys::KeyLocation;

/// Where a page of [`Store::list_after`] stopped: the last item's creation time and id (the
/// list's order is by both, so the position is unique).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct ListPosition {
    /// The item's `created_ms`.
    pub created_ms: u64,
    /// The item's id.
    pub id: ItemId,
}

impl ListPosition {
    /// Bytes of [`ListPosition::to_bytes`].
    pub const BYTES: usize = 8 + 16;

    /// The position of `item`.
    pub fn of(item: &MemoryItem) -> Self {
        Self { created_ms: item.created_ms(), id: item.id() }
    }

    /// Fixed-width encoding (in a cursor).
    pub fn to_bytes(&self) -> [u8; Self::BYTES] {
        let mut b = [0u8; Self::BYTES];
        b[..8].copy_from_slice(&self.created_ms.to_be_bytes());
        b[8..].copy_from_slice(self.id.as_bytes());
        b
    }

    /// Decode [`ListPosition::to_bytes`]; `None` for any other length.
    pub fn from_bytes(b: &[u8]) -> Option<Self> {
        if b.len() != Self::BYTES {
            return None;
        }
        let (t, id) = b.split_at(8);
        Some(Self { created_ms: u64::from_be_bytes(t.try_into().ok()?), id: ItemId::from_bytes(id.try_into().ok()?) })
    }
}

/// Building blocks for a second backend (`memwarden-store-pg`): the row bindings and their
/// checks, the shared mutation code over a [`backend::Db`] connection, log verification and
/// loading, the row audit, and the in-memory guarded vector index. Both backends run these
/// same functions, so a mutation writes the same rows, bindings and log entries on either.
/// Not a stable API for callers: use [`Store`].
pub mod backend {
    pub use crate::audit::audit;
    pub use crate::binding::{
        AttestationRow, Binding, BoundRow, Check, ElevationRow, ErasedRow, GrantUsedRow, ItemRow, LineageRow, OrderKind, PrincipalRow, ReputationRow,
        RowDigest, RowKey, SessionRow, StateIndex, Table, bindings_of, embedding_digest, row_key,
    };
    pub use crate::db::{Arg, AsArg, Cols, Db, DbError, query_all, query_opt};
    pub use crate::keys::{create_key, load_key};
    pub use crate::logs::{GLOBAL, GlobalView, Logs, TenantLog};
    pub use crate::sqlite::{attestation_of, cosine, item_of, principal_of};
    pub use crate::stored::{StoredLogs, TenantStored, last_time_ms, load, verify};
    pub use crate::vectors::{AccessChange, Found, NewVector, Vectors, decode_f32};
    pub use crate::write::{HeadSigner, Pending, apply_all, apply_caller, apply_tagged, set_heads, sign_unsigned_heads, tenant_of};
    /// Idempotency records over a [`Db`] (both backends).
    pub mod idempotency {
        pub use crate::idempotency::{answer, get, mac_key};
    }
}
pub use sqlite::{SqliteStore, StoreConfig};
pub use memwarden_index::CLASS_GRAPH_MIN_COUNT;
pub use vectors::{Progress, SAVE_AFTER_ADDS_COUNT};

use memwarden_core::authority::grant::SignedGrant;
use memwarden_core::prelude::*;
use memwarden_log::{Hash, SignedCheckpoint, VerifyReport};
use serde::Serialize;

/// Most mutations one commit call may carry.
pub const BATCH_MUTATIONS_MAX: usize = 4096;
/// Largest `k` a search may ask for.
pub const SEARCH_K_MAX: usize = 1000;
/// Most ids one [`Store::items`] read takes.
pub const ITEMS_BATCH_MAX: usize = 1024;
/// Most rows one page of [`Store::items_in_order`] or [`Store::lineage_events`] returns.
pub const PAGE_ROWS_MAX: usize = 10_000;
/// The text a tombstone carries in place of the erased one.
pub const TOMBSTONE_CONTENT: &str = "[erased]";
/// Most memories one erasure may delete.
pub const ERASE_IDS_MAX: usize = 100_000;
/// Largest lineage event (bytes of JSON).
pub const LINEAGE_EVENT_BYTES_MAX: usize = 256 * 1024;
/// Longest accepted embedding (dimensions).
pub const EMBEDDING_DIMS_MAX: usize = 4096;

/// A state change. Variants that change what an item may authorize carry a gate's proof value.
#[derive(Debug, Clone)]
pub enum Mutation {
    /// Register a principal (administrative; principals are immutable once registered).
    Principal(Principal),
    /// Store an admitted item with its edges, guard state and embedding.
    Item {
        /// The gate's admission.
        write: AdmittedWrite,
        /// Its embedding, if an embedder is configured.
        embedding: Option<Vec<f32>>,
    },
    /// Record an attestation.
    Attestation(AdmittedAttestation),
    /// Record that a user issued a grant (audit only; the grant itself travels with the action).
    GrantIssued(SignedGrant),
    /// Record that a session was handed memory that lowered its floor or added a witness. The
    /// stored row only ever falls: it becomes the meet of what was stored and this observation.
    SessionTaint {
        /// The tenant.
        tenant: TenantId,
        /// The session's principal.
        principal: PrincipalId,
        /// The session.
        session: SessionId,
        /// What the session has been handed so far.
        observed: Observed,
    },
    /// Revoke an item: its stored record takes the revoked status and scope (identity and label
    /// unchanged, so reads still verify against the log), the vector index stops admitting it,
    /// and the revocation is logged.
    ///
    /// This and [`Mutation::Promotion`], [`Mutation::Hold`], [`Mutation::Update`] (its
    /// superseded record) and [`Mutation::Feedback`] are read-modify-writes: each commits only
    /// if the stored row is still at the version the gate read ([`MemoryItem::version`], which
    /// every record the store returns carries), else [`CommitError::Conflict`].
    Revocation(AdmittedRevocation),
    /// Widen an item's readers (a promotion the authority gate admitted, after the lifecycle
    /// promotion gate if on): the stored record takes the new scope (identity and label
    /// unchanged), the vector index admits the new readers, and the promotion is logged.
    Promotion(AdmittedPromotion),
    /// An update: the new version is stored as [`Mutation::Item`] would (its log entry is the
    /// receipt) and, in the same step, the old version takes the superseded status (identity
    /// unchanged), leaves the index, and the supersession is logged.
    Update {
        /// The admitted update (boxed: two items).
        update: Box<AdmittedUpdate>,
        /// The new version's embedding.
        embedding: Option<Vec<f32>>,
    },
    /// Hold an item back (a gate blocked its promotion): its status falls to quarantined, the
    /// vector index stops admitting it, and the hold is logged.
    Hold(AdmittedHold),
    /// Record a lineage-layer event (`read_by` edges, a revocation's propagation, an action-gate
    /// decision) for the tenant's provenance graph, which is rebuilt from items and these rows
    /// at start. The event is opaque to the store (the lineage layer's JSON, ids and scores
    /// only, never memory text) and is also appended to the verdict log.
    Lineage {
        /// The tenant.
        tenant: TenantId,
        /// The event.
        event: serde_json::Value,
    },
    /// Erase memories: each row's text, metadata and embedding are deleted (a tombstone keeps
    /// its identity and lineage fields), its vector leaves the index, and the erasure is logged
    /// (ids only). `event` is the lineage layer's erasure event, kept with the lineage events so
    /// the graph replays it at this position.
    Erasure {
        /// The tenant.
        tenant: TenantId,
        /// The memories to erase (the root and the descendants the lineage layer found depend on
        /// it alone).
        ids: Vec<ItemId>,
        /// The lineage erasure event.
        event: serde_json::Value,
    },
    /// Log a gate decision that changes no stored state (a lifecycle write gate rejecting,
    /// quarantining or rewriting a write): ids, rule and signals only, never memory text.
    GateDecision {
        /// The tenant.
        tenant: TenantId,
        /// The deciding principal.
        actor: PrincipalId,
        /// The decision.
        decision: serde_json::Value,
    },
    /// Record task-outcome feedback (lifecycle layer): the used memories' new guard states and
    /// their writers' new reputations, logged with the update record (no text).
    Feedback {
        /// The tenant.
        tenant: TenantId,
        /// Who reported the outcome.
        actor: PrincipalId,
        /// Each used memory's guard state after the update, with the version of the record the
        /// update was computed from (compare-and-set: [`CommitError::Conflict`] if it moved on).
        guards: Vec<(ItemId, u64, GuardState)>,
        /// Each source agent's reputation after the update.
        reputations: Vec<(PrincipalId, f64)>,
        /// The loggable update record.
        record: serde_json::Value,
    },
    /// Withdraw an elevation (a user's decision, issue 34.4): its row is deleted and the
    /// withdrawal logged; a later decision may elevate the value again only from fresh support.
    ElevationWithdrawal {
        /// The tenant.
        tenant: TenantId,
        /// The withdrawing principal.
        by: PrincipalId,
        /// The elevation's key.
        key: String,
        /// Its value's canonical form.
        value: String,
        /// Why (bounded by the engine).
        reason: String,
    },
    /// Record a decision with its elevations and grant consumptions.
    Decision {
        /// The deciding principal.
        actor: PrincipalId,
        /// The tenant.
        tenant: TenantId,
        /// A summary of the action for the log.
        action: serde_json::Value,
        /// The gate's outcome.
        outcome: DecisionOutcome,
    },
}

/// What a successful mutation left in the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Receipt {
    /// Index of the mutation's last log entry.
    pub log_index: u64,
    /// Its leaf hash.
    #[serde(with = "hex_hash")]
    pub leaf: Hash,
}

mod hex_hash {
    use serde::Serializer;
    pub fn serialize<S: Serializer>(h: &[u8; 32], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&hex::encode(h))
    }
}

/// Why one mutation was not committed (the others in its group are unaffected).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CommitError {
    /// A principal with this id already exists in the tenant.
    #[error("principal {0} already exists")]
    PrincipalExists(String),
    /// An item with this id already exists.
    #[error("item {0} already exists")]
    ItemExists(String),
    /// A grant was consumed by another decision first.
    #[error("grant {0} was already used")]
    GrantAlreadyUsed(String),
    /// The item to change does not exist in the tenant.
    #[error("memory {0} not found")]
    ItemMissing(String),
    /// A read-modify-write lost a race: the record changed since the version its gate read
    /// ([`MemoryItem::version`]), so the change was not applied. The caller may read again and
    /// retry; the engine answers it as HTTP 409 Conflict.
    #[error("memory {id} was changed concurrently; read it again and retry")]
    Conflict {
        /// The memory.
        id: String,
    },
    /// A stored row the change depends on does not match what the verdict log committed to
    /// (tampered): nothing is built on it.
    #[error("stored state does not match the verdict log: {0}")]
    Tampered(String),
    /// The embedding is too long or not finite.
    #[error("embedding rejected: {0}")]
    BadEmbedding(String),
    /// A lineage event larger than [`LINEAGE_EVENT_BYTES_MAX`].
    #[error("lineage event of {0} bytes exceeds the limit of {LINEAGE_EVENT_BYTES_MAX}")]
    LineageEventTooLarge(usize),
    /// Too many mutations in one call.
    #[error("batch of {0} mutations exceeds the limit of {BATCH_MUTATIONS_MAX}")]
    BatchTooLarge(usize),
    /// The request's idempotency key is held by another request (an earlier one, or one still
    /// in flight): nothing of this one was applied.
    #[error("idempotency key {0:?} is already used by another request")]
    IdempotencyKeyUsed(String),
    /// The database failed.
    #[error("storage error: {0}")]
    Storage(String),
}

/// Store-level errors.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database failed.
    #[error("storage error: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// A file could not be read or written.
    #[error("i/o error on {path}: {error}")]
    Io {
        /// The path.
        path: String,
        /// The error.
        error: std::io::Error,
    },
    /// The verdict log does not verify.
    #[error("the verdict log does not verify: {0}")]
    LogTampered(String),
    /// A stored row (other than an item) does not match what the log committed to.
    #[error("stored {table} row {key} does not match the verdict log: {reason}")]
    RowTampered {
        /// The table.
        table: &'static str,
        /// The row's key columns.
        key: String,
        /// What did not match.
        reason: String,
    },
    /// The key directory is missing, bound to another store, or holds another key.
    #[error("key directory: {0}")]
    KeyDir(String),
    /// A stored record does not match what the log committed to.
    #[error("stored item {id} does not match its log entry: {reason}")]
    ItemTampered {
        /// The item.
        id: String,
        /// What did not match.
        reason: String,
    },
    /// A stored record could not be decoded.
    #[error("stored record is corrupt: {0}")]
    Corrupt(String),
    /// The writer thread is gone.
    #[error("the store's writer has stopped")]
    WriterGone,
    /// Another open store has this data directory (a server, another command, or another
    /// store in this process). The text is `<dir> in use by pid <N>` (the pid the holder wrote
    /// into the lock file), or `<dir> in use by another process` when it cannot be read; see
    /// [`StoreError::locked`].
    #[error("data directory {0}")]
    Locked(String),
    /// A search query is malformed (wrong dimension, not finite, `k` out of range).
    #[error("bad query: {0}")]
    BadQuery(String),
    /// A vector index failed.
    #[error("vector index: {0}")]
    Index(String),
    /// The directory holds a store of a newer schema.
    #[error("unsupported schema version {0}")]
    Schema(i64),
    /// The tenant has no verdict log (nothing of it was ever committed).
    #[error("tenant {0} has no verdict log")]
    UnknownLog(String),
    /// A database server (a backend other than the embedded SQLite) failed or could not be
    /// reached.
    #[error("database error: {0}")]
    Database(String),
}

impl StoreError {
    /// [`StoreError::Locked`] for the data directory `dir`, held by process `pid` if known:
    /// displays as `data directory <dir> in use by pid <N>` (or `... in use by another
    /// process`).
    pub fn locked(dir: &std::path::Path, pid: Option<u32>) -> Self {
        Self::Locked(match pid {
            Some(pid) => format!("{} in use by pid {pid}", dir.display()),
            None => format!("{} in use by another process", dir.display()),
        })
    }
}

/// The most sessions [`Store::sessions_of`] returns.
pub const SESSIONS_OF_MAX: usize = 10_000;

/// A session row as stored: raw material for [`Observed::restore`], never an `Observed` itself.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct StoredSession {
    /// The stored floor.
    pub floor: Integrity,
    /// The stored witness ids.
    pub witnesses: Vec<ItemId>,
    /// The readers ceiling: the intersection of the readers of everything the session was
    /// handed (a row written before it was stored reads as everyone; the witnesses then narrow it
    /// on restore).
    #[serde(default = "readers_all")]
    pub readers: Readers,
    /// More items below trusted were handed over than the witness list holds.
    #[serde(default)]
    pub overflow: bool,
}

fn readers_all() -> Readers {
    Readers::All
}

/// A search hit.
#[derive(Debug, Clone)]
pub struct Hit {
    /// The item.
    pub item: MemoryItem,
    /// Cosine similarity to the query.
    pub similarity: f32,
    /// For a hit of [`Store::search_lexical`], its BM25 score (higher is better); `None` for
    /// a vector hit.
    pub lexical: Option<f64>,
}

/// One row of [`Store::items_in_order`].
#[derive(Debug, Clone)]
pub struct OrderedItem {
    /// The log index of the item's write.
    pub log_index: u64,
    /// The item; for an erased one, its tombstone (identity and lineage fields, the text
    /// replaced by [`TOMBSTONE_CONTENT`], no metadata).
    pub item: MemoryItem,
    /// Whether it was erased.
    pub erased: bool,
}

/// What the engine needs from a backend. Implementations: [`SqliteStore`] (embedded). A
/// PostgreSQL backend implements the same trait (per-tenant log serialisation in a transaction).
pub trait Store: Send + Sync {
    /// The store's id, fixed when the store was created: every grant names the store it is
    /// spent on, so a grant accepted here is refused by any other store.
    fn store_id(&self) -> &str;
    /// Commit mutations; each succeeds or fails on its own, all successes are durable on return.
    fn commit(&self, now_ms: u64, mutations: Vec<Mutation>) -> Result<Vec<Result<Receipt, CommitError>>, StoreError>;
    /// Commit one operation's mutations **atomically**: all of them in one savepoint, all or
    /// nothing. On any [`CommitError`] nothing of the operation is applied (no row, log entry,
    /// vector or catalog change) and that error is returned; on success every receipt, in
    /// mutation order, durable on return. Still group-committed with concurrent callers (one
    /// transaction, one fsync for the group); another caller's failure never affects this one.
    /// An empty list commits nothing and returns no receipts.
    fn commit_atomic(&self, now_ms: u64, mutations: Vec<Mutation>) -> Result<Result<Vec<Receipt>, CommitError>, StoreError>;
    /// [`Store::commit_atomic`] for a request that carries an idempotency key: the key is
    /// claimed in the same transaction (so an operation whose answer was lost is found by its
    /// retry and never applied twice), or [`CommitError::IdempotencyKeyUsed`] and nothing applied.
    fn commit_idempotent(&self, now_ms: u64, mutations: Vec<Mutation>, tag: IdempotencyTag) -> Result<Result<Vec<Receipt>, CommitError>, StoreError>;
    /// The live record of an idempotency key of `principal` (`None`: unused or expired).
    fn idempotency_record(&self, tenant: &TenantId, principal: &PrincipalId, key: &str, now_ms: u64) -> Result<Option<IdempotencyRecord>, StoreError>;
    /// Keep the answer of the request that claimed `tag`'s key, for its retries (`false`: not
    /// kept, e.g. larger than [`IDEMPOTENCY_ANSWER_BYTES_MAX`]).
    fn record_answer(&self, tag: &IdempotencyTag, status: u16, body: &[u8]) -> Result<bool, StoreError>;
    /// A principal by id.
    fn principal(&self, tenant: &TenantId, id: &PrincipalId) -> Result<Option<Principal>, StoreError>;
    /// Every principal of a tenant.
    fn principals(&self, tenant: &TenantId) -> Result<Vec<Principal>, StoreError>;
    /// An item by id, verified against its log entry. Items of other tenants are invisible.
    fn item(&self, tenant: &TenantId, id: &ItemId) -> Result<Option<MemoryItem>, StoreError>;
    /// Items by id, each as [`Store::item`] reads it (verified against its log entry, other
    /// tenants' invisible): one answer per id, in the order given, `None` for an id the tenant
    /// does not hold. At most [`ITEMS_BATCH_MAX`] ids. A backend with a round trip per read
    /// answers in one.
    fn items(&self, tenant: &TenantId, ids: &[ItemId]) -> Result<Vec<Option<MemoryItem>>, StoreError> {
        if ids.len() > ITEMS_BATCH_MAX {
            return Err(StoreError::BadQuery(format!("at most {ITEMS_BATCH_MAX} ids per read, {} given", ids.len())));
        }
        ids.iter().map(|id| self.item(tenant, id)).collect()
    }
    /// Items of a namespace, oldest first, at most `limit`.
    fn list(&self, tenant: &TenantId, namespace: &Namespace, limit: usize) -> Result<Vec<MemoryItem>, StoreError>;
    /// Items of a namespace, newest first, at most `limit` (what a decision scans for untrusted
    /// content beside the memories it cites: the newest is what was planted last).
    fn list_newest(&self, tenant: &TenantId, namespace: &Namespace, limit: usize) -> Result<Vec<MemoryItem>, StoreError>;
    /// Items of a namespace in [`Store::list`]'s order (`created_ms`, then id) that come after
    /// `after` (exclusive; `None`: from the start), at most `limit`: one page of a keyset
    /// cursor, read in O(page).
    fn list_after(&self, tenant: &TenantId, namespace: &Namespace, after: Option<ListPosition>, limit: usize) -> Result<Vec<MemoryItem>, StoreError>;
    /// The key page cursors are sealed under ([`cursor`]), derived from the signing key, so a
    /// cursor opens on every process of the store and after a restart.
    fn cursor_key(&self) -> [u8; 32];
    /// The ids [`Store::list_newest`] would return, in its order, without reading the items (a
    /// decision's scan for untrusted content keeps what it learnt of each id: an item's text and
    /// label never change). The default reads the items.
    fn newest_ids(&self, tenant: &TenantId, namespace: &Namespace, limit: usize) -> Result<Vec<ItemId>, StoreError> {
        Ok(self.list_newest(tenant, namespace, limit)?.iter().map(MemoryItem::id).collect())
    }
    /// Number of items in a tenant.
    fn count(&self, tenant: &TenantId) -> Result<u64, StoreError>;
    /// Attestations of a tenant for these keys.
    fn attestations(&self, tenant: &TenantId, keys: &[String]) -> Result<Vec<Attestation>, StoreError>;
    /// A principal's stored reputation (lifecycle feedback), if any.
    fn reputation(&self, tenant: &TenantId, principal: &PrincipalId) -> Result<Option<f64>, StoreError>;
    /// The tenant's items in commit order, erased ones as tombstones, after log index `after`
    /// (exclusive; `None` from the start), at most `limit` (capped at [`PAGE_ROWS_MAX`]): for
    /// rebuilding derived state (the lineage graph) page by page.
    fn items_in_order(&self, tenant: &TenantId, after: Option<u64>, limit: usize) -> Result<Vec<OrderedItem>, StoreError>;
    /// The tenant's lineage events in commit order, each with its log index, after log index
    /// `after` (exclusive; `None` from the start), at most `limit` (capped at
    /// [`PAGE_ROWS_MAX`]). Each row is checked against its verified log entry.
    fn lineage_events(&self, tenant: &TenantId, after: Option<u64>, limit: usize) -> Result<Vec<(u64, serde_json::Value)>, StoreError>;
    /// Attestations of a tenant for one (key, value) — what a decision needs; indexed, so its
    /// cost does not grow with the other values attested under the same key.
    fn attestations_of(&self, tenant: &TenantId, key: &str, value: &NormValue) -> Result<Vec<Attestation>, StoreError>;
    /// Elevations of a tenant for these keys.
    fn elevations(&self, tenant: &TenantId, keys: &[String]) -> Result<Vec<Elevation>, StoreError>;
    /// Every elevation of a tenant (what a user lists and may withdraw).
    fn elevations_all(&self, tenant: &TenantId) -> Result<Vec<Elevation>, StoreError>;
    /// The keys the store still keeps of `seals` (at most [`seal::SEALS_PER_BODY_MAX`], each
    /// of `tenant`): a seal linked to an erased memory has none. What [`seal::open_body`] opens a
    /// log entry's sealed fields with (issue 35.7).
    fn seal_keys(&self, tenant: &TenantId, seals: &[seal::SealId]) -> Result<Vec<(seal::SealId, seal::SealKey)>, StoreError>;
    /// Whether a grant nonce was consumed.
    fn grant_used(&self, tenant: &TenantId, nonce: &[u8; 16]) -> Result<bool, StoreError>;
    /// A session's stored floor and witnesses (`None`: the session was never handed anything
    /// below trusted). The caller rebuilds it with [`Observed::restore`].
    fn session(&self, tenant: &TenantId, principal: &PrincipalId, session: &SessionId) -> Result<Option<StoredSession>, StoreError>;
    /// Every stored session of a principal (at most [`SESSIONS_OF_MAX`]; `true` when there were
    /// more): what it was handed anywhere, for the routes where it vouches (issue 34.3).
    fn sessions_of(&self, tenant: &TenantId, principal: &PrincipalId) -> Result<(Vec<StoredSession>, bool), StoreError>;
    /// Semantic search over a namespace for `reader`. The permission filter (the item's status
    /// and scope admit `reader`, or its writer addressed it to `reader`:
    /// [`MemoryItem::searchable_by`]) decides eligibility *before* ranking, never as a score
    /// penalty. Returns `min(k, eligible)` candidates, most similar first, and never one
    /// `reader` may neither read nor be told of; the engine withholds the addressed ones it may
    /// not read. `k` is 1..=[`SEARCH_K_MAX`].
    fn search(&self, tenant: &TenantId, namespace: &Namespace, query: &[f32], k: usize, reader: &PrincipalId) -> Result<Vec<Hit>, StoreError>;
    /// Lexical search (BM25 over the words of `text`) under the same permission filter as
    /// [`Store::search`]: `min(k, eligible matches)` items, best match first, never one `reader`
    /// may neither read nor be told of. Each hit's `similarity` is its embedding's cosine to `query` (0 without an
    /// embedding). A store without a lexical index returns nothing (search is then vector-only).
    fn search_lexical(&self, tenant: &TenantId, namespace: &Namespace, text: &str, query: &[f32], k: usize, reader: &PrincipalId) -> Result<Vec<Hit>, StoreError> {
        let _ = (tenant, namespace, text, query, k, reader);
        Ok(Vec::new())
    }
    /// Number of log entries, all tenants (the global view: every tenant's entries in commit
    /// order; to be replaced by [`Store::log_len_of`]).
    fn log_len(&self) -> u64;
    /// The global view's (size, Merkle root, head).
    fn log_root(&self) -> (u64, Hash, Hash);
    /// Encoded entries `[from, to)` of the global view (commit order over all tenants).
    fn log_entries(&self, from: u64, to: u64) -> Result<Vec<Vec<u8>>, StoreError>;
    /// Inclusion proof of global-view entry `index` in the global tree of size `size`.
    fn inclusion_proof(&self, index: u64, size: u64) -> Result<Vec<Hash>, StoreError>;
    /// Consistency proof between two sizes of the global view.
    fn consistency_proof(&self, old_size: u64, new_size: u64) -> Result<Vec<Hash>, StoreError>;
    /// Sign and store a checkpoint of every tenant's log with new entries and of the global
    /// view; returns the global view's.
    fn checkpoint(&self, now_ms: u64) -> Result<SignedCheckpoint, StoreError>;
    /// The global view's stored checkpoints.
    fn checkpoints(&self) -> Result<Vec<SignedCheckpoint>, StoreError>;
    /// The log's checkpoint-signing public key.
    fn log_public_key(&self) -> [u8; 32];
    /// Verify every stored log (each tenant's hash chain, checkpoints, recorded head and
    /// witness; the global view) and audit every bound row; names the first bad entry or row.
    fn verify_log(&self) -> Result<VerifyReport, StoreError>;

    // One verdict log per tenant. Receipts' `log_index` and the log indexes of
    // `items_in_order` / `lineage_events` are indexes in the tenant's log.

    /// How many times this handle has seen `tenant`'s log grow by entries another process
    /// appended (always 0 for a store only this process writes, as SQLite under its flock). A
    /// view cached above the store — the engine's lineage graph, its session floors — that was
    /// built at one value is stale once this moves, and must be rebuilt from the store.
    fn foreign_version(&self, tenant: &TenantId) -> u64 {
        let _ = tenant;
        0
    }

    /// The current [`Store::foreign_version`] of `tenant` and the log indexes of every entry
    /// another process appended after version `since`, in log order — what a view cached
    /// above the store at `since` must apply to catch up without a rebuild. `None` when this
    /// handle no longer keeps that history (or never saw version `since`): rebuild instead.
    fn foreign_entries(&self, tenant: &TenantId, since: u64) -> Option<(u64, Vec<u64>)> {
        let now = self.foreign_version(tenant);
        (now == since).then(|| (now, Vec::new()))
    }

    /// The tenants that have a verdict log.
    fn tenants(&self) -> Vec<TenantId>;
    /// Number of entries in the tenant's log (0 if it has none).
    fn log_len_of(&self, tenant: &TenantId) -> u64;
    /// The tenant log's (size, Merkle root, head).
    fn log_root_of(&self, tenant: &TenantId) -> (u64, Hash, Hash);
    /// Encoded entries `[from, to)` of the tenant's log.
    fn log_entries_of(&self, tenant: &TenantId, from: u64, to: u64) -> Result<Vec<Vec<u8>>, StoreError>;
    /// Inclusion proof of entry `index` in the tenant log's tree of size `size`.
    fn inclusion_proof_of(&self, tenant: &TenantId, index: u64, size: u64) -> Result<Vec<Hash>, StoreError>;
    /// Consistency proof between two sizes of the tenant's log.
    fn consistency_proof_of(&self, tenant: &TenantId, old_size: u64, new_size: u64) -> Result<Vec<Hash>, StoreError>;
    /// Sign a checkpoint of the tenant's current log and store it ([`StoreError::UnknownLog`]
    /// if it has none).
    fn checkpoint_of(&self, tenant: &TenantId, now_ms: u64) -> Result<SignedCheckpoint, StoreError>;
    /// The tenant log's stored checkpoints.
    fn checkpoints_of(&self, tenant: &TenantId) -> Result<Vec<SignedCheckpoint>, StoreError>;
    /// Verify the tenant's log (chain, checkpoints, recorded head, witness) and audit its rows.
    fn verify_log_of(&self, tenant: &TenantId) -> Result<VerifyReport, StoreError>;
}
