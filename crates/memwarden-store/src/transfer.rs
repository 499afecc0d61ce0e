//! Moving one tenant between stores (issue 17): a JSON Lines export of the tenant's verdict log
//! and every row it binds, and an import that puts *the same chain* into another store, SQLite
//! or PostgreSQL, without re-chaining.
//!
//! # The file (`memwarden-tenant/1`)
//!
//! One JSON object per line, each with a `"type"`, in this order:
//!
//! 1. `header`: `format`, `tenant`, `source` (`backend`, `store_id`, the source's `log_key`),
//!    `log` (`size`, `root`, `head` of the tenant's log at export), `vector_dims`, `counts`
//!    (how many lines of each kind follow), `exported_ms`.
//! 2. `entry` × size: `idx` and the encoded entry `bytes` (hex), verbatim, in index order.
//! 3. `checkpoint`: each checkpoint the *source* signed for the tenant (`record`), with the
//!    source's key. They verify under the header's `log_key` only: the target keeps them in the
//!    file's history, never as its own checkpoints.
//! 4. `row` × n: `table` and `row` (column → value; bytes as hex, a `REAL` as the hex of its
//!    IEEE-754 bits so it round-trips exactly) for `principals`, `items` (with the embedding),
//!    `erased`, `attestations`, `elevations`, `grants_used`, `sessions`, `reputation`,
//!    `lineage_events`, `vectors`, `edges`, and the keys of sealed log fields (`seals`,
//!    `seal_links`). An erased memory appears only as its tombstone: its text is in no line, and
//!    the keys of the fields that kept its values are gone.
//! 5. `trailer`: the same `counts` and `log` again (a cut file has no trailer, or one that does
//!    not match what was read).
//!
//! # What an import checks, and what it keeps
//!
//! Before anything is committed: the entries form one chain (the log verifier, against the
//! header's size and head, and the source's checkpoints under the source's key), the genesis
//! entry names the tenant, every row is the row its latest binding commits to (the same row
//! digests the stores check on every read), no bound row is missing, every vector key and
//! embedding matches its item row, the edges are exactly the parents the records declare, and
//! the counts and the trailer match. The rows are then written in one transaction of the target,
//! which is read back and checked with the target's own verifier and row audit before it
//! commits; any failure rolls everything back. A tenant that already has a log in the target is
//! refused.
//!
//! The entries are stored verbatim, so the target's log has the source's size, Merkle root and
//! head, and every row keeps its digest. The genesis entry still names the source's store id and
//! log key (it is the history of where the log began): the stores check that a genesis entry
//! names its tenant, not which store wrote it, and a log's checkpoints are checked against the
//! key of the store that holds it. Vector keys
//! (`items.vseq`, part of the bound item row) keep their source values: on PostgreSQL a later
//! write of the tenant takes `log index + base` as its key, with the base recorded at import so
//! no new key can meet an imported one; on SQLite (one key sequence for the whole store) an
//! imported key that is already taken is refused (import into a fresh data directory). After
//! the commit, the target signs a checkpoint of its own at the imported size (the source's
//! signatures cannot verify under the target's key; the source's key, store id and head are kept
//! in the target's `meta` row `imported:<tenant>`, and the source's checkpoints in the file).
//!
//! # Limits
//!
//! An export holds the tenant's rows in memory while it checks them (nothing is written before
//! the whole tenant verified); an import holds the log entries and the set of row keys, and
//! streams the rows. A SQLite source must not be open elsewhere (its directory lock); a
//! PostgreSQL source is read in one snapshot while other processes keep writing. The file holds
//! the tenant's memories in clear: keep it as private as the store.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::io::{BufRead, Write};

use ed25519_dalek::{SigningKey, VerifyingKey};
use memwarden_core::prelude::*;
use memwarden_log::{Checkpoint, Entry, EntryKind, Hash, SignedCheckpoint, verify_log};
use serde_json::{Map, Value, json};

use crate::StoreError;
use crate::binding::{
    AttestationRow, Binding, BoundRow, Check, ElevationRow, ErasedRow, GrantUsedRow, ItemRow, LineageRow, PrincipalRow, ReputationRow, RowKey, SessionRow,
    StateIndex, bindings_of, embedding_digest,
};
use crate::db::{Arg, Cols, Db, DbError, query_all, query_opt};
use crate::stored::{StoredLogs, TenantStored};

/// The format name a header carries.
pub const FORMAT: &str = "memwarden-tenant/1";

/// Longest line an import reads (an entry body is at most 1 MiB, hex doubles it).
pub const LINE_BYTES_MAX: usize = 4 << 20;

/// Why an export or import did not happen.
#[derive(Debug, thiserror::Error)]
pub enum TransferError {
    /// Reading or writing the file failed.
    #[error("i/o: {0}")]
    Io(String),
    /// The file is not a well-formed export (line `line`, 1-based).
    #[error("line {line}: {reason}")]
    Format {
        /// The line.
        line: usize,
        /// What is wrong with it.
        reason: String,
    },
    /// The file is cut short (no trailer, or fewer lines than its header announced).
    #[error("the file is truncated: {0}")]
    Truncated(String),
    /// The tenant's log or rows do not verify.
    #[error("does not verify: {0}")]
    Verify(String),
    /// The tenant already exists in the target store.
    #[error("tenant {0} already exists in the target store (its log is not empty); import only into a store without it")]
    TenantExists(String),
    /// The target store cannot take the tenant as it is (a taken vector key or item id, another
    /// vector dimension).
    #[error("the target store cannot take the tenant: {0}")]
    Target(String),
    /// The store failed.
    #[error("{0}")]
    Store(#[from] StoreError),
}

fn dberr(e: DbError) -> TransferError {
    TransferError::Store(StoreError::Database(e.message))
}

/// A column's type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ty {
    Int,
    OptInt,
    Real,
    Text,
    Blob,
    OptBlob,
}

/// A table as the file carries it: its columns (bound tables in [`BoundRow::COLUMNS`] order,
/// then any extra column), which rows are the tenant's, and their order.
struct Spec {
    table: &'static str,
    cols: &'static [(&'static str, Ty)],
    filter: &'static str,
    order: &'static str,
}

const SPECS: [Spec; 13] = [
    Spec { table: "principals", cols: &[("tenant", Ty::Text), ("id", Ty::Text), ("record", Ty::Text), ("log_index", Ty::Int)], filter: "tenant = ?1", order: "log_index, id" },
    Spec {
        table: "items",
        cols: &[
            ("id", Ty::Blob),
            ("tenant", Ty::Text),
            ("namespace", Ty::Text),
            ("record", Ty::Text),
            ("digest", Ty::Blob),
            ("log_index", Ty::Int),
            ("created_ms", Ty::Int),
            ("version", Ty::Int),
            ("vseq", Ty::OptInt),
            ("emb_digest", Ty::OptBlob),
            ("embedding", Ty::OptBlob),
        ],
        filter: "tenant = ?1",
        order: "log_index",
    },
    Spec {
        table: "erased",
        cols: &[("id", Ty::Blob), ("tenant", Ty::Text), ("namespace", Ty::Text), ("tombstone", Ty::Text), ("item_log_index", Ty::Int), ("log_index", Ty::Int)],
        filter: "tenant = ?1",
        order: "item_log_index",
    },
    Spec { table: "attestations", cols: &[("tenant", Ty::Text), ("key", Ty::Text), ("record", Ty::Text), ("log_index", Ty::Int)], filter: "tenant = ?1", order: "log_index" },
    Spec {
        table: "elevations",
        cols: &[("tenant", Ty::Text), ("key", Ty::Text), ("value", Ty::Text), ("record", Ty::Text), ("log_index", Ty::Int)],
        filter: "tenant = ?1",
        order: "log_index, key, value",
    },
    Spec { table: "grants_used", cols: &[("tenant", Ty::Text), ("nonce", Ty::Blob), ("record", Ty::Text), ("log_index", Ty::Int)], filter: "tenant = ?1", order: "log_index" },
    Spec {
        table: "sessions",
        cols: &[("tenant", Ty::Text), ("principal", Ty::Text), ("session", Ty::Text), ("record", Ty::Text), ("log_index", Ty::Int)],
        filter: "tenant = ?1",
        order: "log_index, principal, session",
    },
    Spec { table: "reputation", cols: &[("tenant", Ty::Text), ("principal", Ty::Text), ("value", Ty::Real), ("log_index", Ty::Int)], filter: "tenant = ?1", order: "log_index, principal" },
    Spec { table: "lineage_events", cols: &[("tenant", Ty::Text), ("event", Ty::Text), ("log_index", Ty::Int)], filter: "tenant = ?1", order: "log_index" },
    Spec { table: "vectors", cols: &[("seq", Ty::Int), ("id", Ty::Blob), ("tenant", Ty::Text), ("namespace", Ty::Text)], filter: "tenant = ?1", order: "seq" },
    Spec {
        table: "edges",
        cols: &[("child", Ty::Blob), ("parent", Ty::Blob), ("kind", Ty::Text)],
        filter: "child IN (SELECT id FROM items WHERE tenant = ?1) OR child IN (SELECT id FROM erased WHERE tenant = ?1)",
        order: "child, parent, kind",
    },
    Spec { table: "seals", cols: &[("tenant", Ty::Text), ("seal", Ty::Blob), ("key", Ty::Blob)], filter: "tenant = ?1", order: "seal" },
    Spec { table: "seal_links", cols: &[("tenant", Ty::Text), ("item", Ty::Blob), ("seal", Ty::Blob)], filter: "tenant = ?1", order: "item, seal" },
];

fn spec(table: &str) -> Option<&'static Spec> {
    SPECS.iter().find(|s| s.table == table)
}

/// One column value.
#[derive(Clone, Debug, PartialEq)]
enum Val {
    Null,
    Int(i64),
    Real(f64),
    Text(String),
    Blob(Vec<u8>),
}

/// A row's values, in its spec's column order (also readable as [`Cols`]).
struct Vals(Vec<Val>);

impl Vals {
    fn get(&self, i: usize) -> Result<&Val, DbError> {
        self.0.get(i).ok_or_else(|| DbError::other(format!("no column {i}")))
    }
}

fn wrong(i: usize, want: &str) -> DbError {
    DbError::other(format!("column {i} is not {want}"))
}

impl Cols for Vals {
    fn int(&self, i: usize) -> Result<i64, DbError> {
        self.opt_int(i)?.ok_or_else(|| wrong(i, "an integer"))
    }
    fn opt_int(&self, i: usize) -> Result<Option<i64>, DbError> {
        match self.get(i)? {
            Val::Null => Ok(None),
            Val::Int(v) => Ok(Some(*v)),
            _ => Err(wrong(i, "an integer")),
        }
    }
    fn real(&self, i: usize) -> Result<f64, DbError> {
        match self.get(i)? {
            Val::Real(v) => Ok(*v),
            _ => Err(wrong(i, "a real")),
        }
    }
    fn text(&self, i: usize) -> Result<String, DbError> {
        self.opt_text(i)?.ok_or_else(|| wrong(i, "text"))
    }
    fn opt_text(&self, i: usize) -> Result<Option<String>, DbError> {
        match self.get(i)? {
            Val::Null => Ok(None),
            Val::Text(s) => Ok(Some(s.clone())),
            _ => Err(wrong(i, "text")),
        }
    }
    fn blob(&self, i: usize) -> Result<Vec<u8>, DbError> {
        self.opt_blob(i)?.ok_or_else(|| wrong(i, "bytes"))
    }
    fn opt_blob(&self, i: usize) -> Result<Option<Vec<u8>>, DbError> {
        match self.get(i)? {
            Val::Null => Ok(None),
            Val::Blob(b) => Ok(Some(b.clone())),
            _ => Err(wrong(i, "bytes")),
        }
    }
}

fn read_vals(r: &dyn Cols, spec: &Spec) -> Result<Vals, DbError> {
    let mut out = Vec::with_capacity(spec.cols.len());
    for (i, (_, ty)) in spec.cols.iter().enumerate() {
        out.push(match ty {
            Ty::Int => Val::Int(r.int(i)?),
            Ty::OptInt => r.opt_int(i)?.map_or(Val::Null, Val::Int),
            Ty::Real => Val::Real(r.real(i)?),
            Ty::Text => Val::Text(r.text(i)?),
            Ty::Blob => Val::Blob(r.blob(i)?),
            Ty::OptBlob => r.opt_blob(i)?.map_or(Val::Null, Val::Blob),
        });
    }
    Ok(Vals(out))
}

fn vals_to_json(spec: &Spec, vals: &Vals) -> Value {
    let mut m = Map::new();
    for ((name, _), v) in spec.cols.iter().zip(&vals.0) {
        let j = match v {
            Val::Null => Value::Null,
            Val::Int(i) => json!(i),
            Val::Real(f) => json!(hex::encode(f.to_bits().to_be_bytes())),
            Val::Text(s) => json!(s),
            Val::Blob(b) => json!(hex::encode(b)),
        };
        m.insert((*name).to_owned(), j);
    }
    Value::Object(m)
}

fn vals_from_json(spec: &Spec, row: &Value) -> Result<Vals, String> {
    let obj = row.as_object().ok_or("a row must be an object")?;
    if obj.len() != spec.cols.len() {
        return Err(format!("a {} row has {} columns, not {}", spec.table, spec.cols.len(), obj.len()));
    }
    let mut out = Vec::with_capacity(spec.cols.len());
    for (name, ty) in spec.cols {
        let v = obj.get(*name).ok_or_else(|| format!("a {} row lacks column {name}", spec.table))?;
        let bad = || format!("column {name} of a {} row is not {ty:?}", spec.table);
        let hex_of = |v: &Value| v.as_str().and_then(|s| hex::decode(s).ok()).ok_or_else(bad);
        out.push(match (ty, v) {
            (Ty::OptInt | Ty::OptBlob, Value::Null) => Val::Null,
            (Ty::Int | Ty::OptInt, v) => Val::Int(v.as_i64().ok_or_else(bad)?),
            (Ty::Real, v) => {
                let b: [u8; 8] = hex_of(v)?.try_into().map_err(|_| bad())?;
                Val::Real(f64::from_bits(u64::from_be_bytes(b)))
            }
            (Ty::Text, v) => Val::Text(v.as_str().ok_or_else(bad)?.to_owned()),
            (Ty::Blob | Ty::OptBlob, v) => Val::Blob(hex_of(v)?),
        });
    }
    Ok(Vals(out))
}

fn val_arg(v: &Val) -> Arg<'_> {
    match v {
        Val::Null => Arg::Null,
        Val::Int(i) => Arg::Int(*i),
        Val::Real(f) => Arg::Real(*f),
        Val::Text(s) => Arg::Text(s),
        Val::Blob(b) => Arg::Blob(b),
    }
}

/// Where an export comes from (written into its header).
#[derive(Clone, Debug)]
pub struct Source {
    /// `sqlite` or `postgres`.
    pub backend: String,
    /// The source store's id.
    pub store_id: String,
    /// The source's checkpoint-signing public key.
    pub log_key: [u8; 32],
}

/// A tenant's log figures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogHead {
    /// Number of entries.
    pub size: u64,
    /// Merkle root.
    pub root: Hash,
    /// Leaf hash of the last entry.
    pub head: Hash,
}

impl LogHead {
    fn json(&self) -> Value {
        json!({"size": self.size, "root": hex::encode(self.root), "head": hex::encode(self.head)})
    }

    fn parse(v: &Value) -> Result<Self, String> {
        let h = |k: &str| -> Result<Hash, String> {
            let s = v.get(k).and_then(Value::as_str).ok_or_else(|| format!("log.{k} missing"))?;
            let mut out = [0u8; 32];
            hex::decode_to_slice(s, &mut out).map_err(|e| format!("log.{k}: {e}"))?;
            Ok(out)
        };
        Ok(Self { size: v.get("size").and_then(Value::as_u64).ok_or("log.size missing")?, root: h("root")?, head: h("head")? })
    }
}

/// What an export wrote.
#[derive(Clone, Debug)]
pub struct Exported {
    /// The tenant.
    pub tenant: String,
    /// Its log at export.
    pub log: LogHead,
    /// Lines of each kind (entries, checkpoints, rows per table).
    pub counts: BTreeMap<String, u64>,
}

/// What an import committed.
#[derive(Clone, Debug)]
pub struct Imported {
    /// The tenant.
    pub tenant: String,
    /// Its log in the target: the same size, root and head as the source's at export.
    pub log: LogHead,
    /// Lines of each kind read.
    pub counts: BTreeMap<String, u64>,
    /// The checkpoint the target signed at the imported size.
    pub checkpoint: SignedCheckpoint,
    /// The largest imported vector key (for a backend that keys later vectors above it).
    pub max_vseq: Option<i64>,
}

fn db_blob(r: &dyn Cols, i: usize) -> Result<Vec<u8>, DbError> {
    r.blob(i)
}

/// The tenant's stored log as a backend holds it (`log`, `checkpoints`, `heads` tables; the
/// same SQL on every backend).
fn read_tenant_log(db: &dyn Db, tenant: &str) -> Result<TenantStored, TransferError> {
    let rows: Vec<(i64, Vec<u8>)> = query_all(db, "SELECT idx, entry FROM log WHERE tenant = ?1 ORDER BY idx", &[Arg::Text(tenant)], |r| Ok((r.int(0)?, db_blob(r, 1)?))).map_err(dberr)?;
    let mut out = TenantStored::default();
    for (i, (idx, e)) in rows.into_iter().enumerate() {
        if u64::try_from(idx).ok() != Some(i as u64) {
            return Err(TransferError::Verify(format!("the log of {tenant} has no entry {i}")));
        }
        out.entries.push(e);
    }
    for rec in query_all(db, "SELECT record FROM checkpoints WHERE tenant = ?1 ORDER BY size", &[Arg::Text(tenant)], |r| r.text(0)).map_err(dberr)? {
        out.checkpoints.push(serde_json::from_str(&rec).map_err(|e| TransferError::Store(StoreError::Corrupt(format!("checkpoint: {e}"))))?);
    }
    let head: Option<(i64, Vec<u8>, Option<Vec<u8>>)> =
        query_opt(db, "SELECT size, head, sig FROM heads WHERE tenant = ?1", &[Arg::Text(tenant)], |r| Ok((r.int(0)?, r.blob(1)?, r.opt_blob(2)?))).map_err(dberr)?;
    if let Some((size, head, sig)) = head {
        let head: Hash = head.try_into().map_err(|_| TransferError::Verify(format!("the recorded head of {tenant} is malformed")))?;
        out.expected = Some((u64::try_from(size).unwrap_or(0), head));
        out.head_sig = sig;
    }
    Ok(out)
}

fn vector_dims(db: &dyn Db) -> Result<Option<usize>, TransferError> {
    let d: Option<String> = query_opt(db, "SELECT CAST(value AS TEXT) FROM meta WHERE key = 'vector_dims'", &[], |r| r.text(0)).map_err(dberr)?;
    d.map(|d| d.trim().parse::<usize>().map_err(|_| TransferError::Store(StoreError::Corrupt(format!("vector_dims {d:?}"))))).transpose()
}

/// Checks a tenant's entries and rows as one whole: the entries form one chain, every row is
/// the one its latest binding commits to, no bound row is missing, vector keys, embeddings and
/// edges agree with the item rows. Shared by export (which refuses to write a tenant that does
/// not verify) and import (which refuses to commit one).
struct Checker {
    tenant: String,
    state: StateIndex,
    /// Live bindings: key → (binding, entry).
    live: HashMap<RowKey, (Binding, u64)>,
    seen: HashSet<RowKey>,
    counts: BTreeMap<String, u64>,
    /// Items with a vector key: id → (vseq, namespace).
    vseq: HashMap<Vec<u8>, (i64, String)>,
    vectors: BTreeMap<Vec<u8>, (i64, String)>,
    want_edges: BTreeSet<(Vec<u8>, Vec<u8>, String)>,
    have_edges: BTreeSet<(Vec<u8>, Vec<u8>, String)>,
    dims: Option<usize>,
}

fn verify_err(what: impl Into<String>) -> TransferError {
    TransferError::Verify(what.into())
}

impl Checker {
    /// Verify `entries` as the tenant's whole log (anchored at `log` and at the source's
    /// checkpoints under `source_key`) and replay their bindings.
    fn new(tenant: &str, entries: &[Vec<u8>], checkpoints: &[SignedCheckpoint], source_key: &[u8; 32], log: &LogHead, dims: Option<usize>) -> Result<Self, TransferError> {
        let key = VerifyingKey::from_bytes(source_key).map_err(|e| verify_err(format!("the source log key is not an Ed25519 key: {e}")))?;
        if entries.is_empty() {
            return Err(verify_err("the tenant's log is empty"));
        }
        let report = verify_log(entries, checkpoints, &key, Some((log.size, log.head)));
        if let Some(p) = report.problem {
            return Err(verify_err(format!("the log entries do not form the announced chain: {p}")));
        }
        if report.root != log.root || report.head != log.head || report.entries != log.size {
            return Err(verify_err("the log entries do not have the announced root and head"));
        }
        let genesis = Entry::decode(&entries[0]).map_err(|e| verify_err(format!("entry 0: {e}")))?;
        let named = serde_json::from_slice::<Value>(&genesis.body).ok().and_then(|v| v.get("tenant").and_then(Value::as_str).map(str::to_owned));
        if genesis.kind != EntryKind::Genesis || named.as_deref() != Some(tenant) {
            return Err(verify_err(format!("entry 0 is not the genesis entry of tenant {tenant}")));
        }
        let mut stored = StoredLogs::default();
        stored.tenants.insert(tenant.to_owned(), TenantStored { entries: entries.to_vec(), checkpoints: Vec::new(), expected: None, head_sig: None });
        let (_, state) = crate::stored::load(&stored).map_err(|e| verify_err(e.to_string()))?;
        let mut live = HashMap::new();
        for (i, bytes) in entries.iter().enumerate() {
            let e = Entry::decode(bytes).map_err(|e| verify_err(format!("entry {i}: {e}")))?;
            for b in bindings_of(&e.body).map_err(|e| verify_err(format!("entry {i}: {e}")))? {
                let k = b.key();
                if b.digest.is_some() {
                    live.insert(k, (b, i as u64));
                } else {
                    live.remove(&k);
                }
            }
        }
        Ok(Self {
            tenant: tenant.to_owned(),
            state,
            live,
            seen: HashSet::new(),
            counts: BTreeMap::new(),
            vseq: HashMap::new(),
            vectors: BTreeMap::new(),
            want_edges: BTreeSet::new(),
            have_edges: BTreeSet::new(),
            dims,
        })
    }

    fn bound<R: BoundRow>(&mut self, vals: &Vals) -> Result<R, TransferError> {
        let row = R::from_cols(vals).map_err(|e| verify_err(format!("a {} row: {e}", R::TABLE.name())))?;
        let name = R::TABLE.name();
        if row.tenant() != self.tenant {
            return Err(verify_err(format!("a {name} row of tenant {:?} in the export of {}", row.tenant(), self.tenant)));
        }
        let key = row.key();
        match self.state.check(&key, Some(&row.digest())) {
            Check::Ok => {}
            bad => return Err(verify_err(format!("{name} row {}: {}", row.parts().join("/"), bad.reason()))),
        }
        if !self.seen.insert(key) {
            return Err(verify_err(format!("{name} row {} appears twice", row.parts().join("/"))));
        }
        Ok(row)
    }

    fn parents_of(&mut self, child: &[u8], record: &str) -> Result<(), TransferError> {
        let v: Value = serde_json::from_str(record).map_err(|e| verify_err(format!("item {}: {e}", hex::encode(child))))?;
        for p in v.get("parents").and_then(Value::as_array).into_iter().flatten() {
            let (Some(id), Some(kind)) = (p.get("id").and_then(Value::as_str), p.get("kind").and_then(Value::as_str)) else { continue };
            let Ok(parent) = hex::decode(id) else { continue };
            self.want_edges.insert((child.to_vec(), parent, kind.to_owned()));
        }
        Ok(())
    }

    /// Check one row; returns the item's text for an `items` row (to index it).
    fn row(&mut self, table: &str, vals: &Vals) -> Result<Option<String>, TransferError> {
        *self.counts.entry(table.to_owned()).or_default() += 1;
        let mut text = None;
        match table {
            "principals" => {
                let r: PrincipalRow = self.bound(vals)?;
                crate::sqlite::principal_of(&r).map_err(|e| verify_err(e.to_string()))?;
            }
            "items" => {
                let r: ItemRow = self.bound(vals)?;
                let id = ItemId::from_bytes(r.id.clone().try_into().map_err(|_| verify_err("an item id is not 16 bytes"))?);
                let tenant = TenantId::new(&self.tenant).map_err(|e| verify_err(e.to_string()))?;
                let item = crate::sqlite::item_of(&r, &tenant, &id).map_err(|e| verify_err(format!("item {id}: {e}")))?;
                let emb = vals.opt_blob(10).map_err(|e| verify_err(format!("item {id}: {e}")))?;
                if emb.as_deref().map(|e| embedding_digest(e).to_vec()) != r.emb_digest {
                    return Err(verify_err(format!("item {id}: the embedding differs from the digest its log entry committed")));
                }
                if let Some(e) = &emb
                    && self.dims.is_some_and(|d| d * 4 != e.len())
                {
                    return Err(verify_err(format!("item {id}: an embedding of {} bytes in a store of {:?} dimensions", e.len(), self.dims)));
                }
                match (r.vseq, &emb) {
                    (Some(s), Some(_)) => {
                        self.vseq.insert(r.id.clone(), (s, r.namespace.clone()));
                    }
                    (None, None) => {}
                    _ => return Err(verify_err(format!("item {id}: a vector key without an embedding, or the reverse"))),
                }
                self.parents_of(&r.id, &r.record)?;
                text = Some(item.content().to_owned());
            }
            "erased" => {
                let r: ErasedRow = self.bound(vals)?;
                self.parents_of(&r.id, &r.tombstone)?;
            }
            "attestations" => {
                let r: AttestationRow = self.bound(vals)?;
                crate::sqlite::attestation_of(&r).map_err(|e| verify_err(e.to_string()))?;
            }
            "elevations" => {
                self.bound::<ElevationRow>(vals)?;
            }
            "grants_used" => {
                self.bound::<GrantUsedRow>(vals)?;
            }
            "sessions" => {
                self.bound::<SessionRow>(vals)?;
            }
            "reputation" => {
                self.bound::<ReputationRow>(vals)?;
            }
            "lineage_events" => {
                self.bound::<LineageRow>(vals)?;
            }
            "vectors" => {
                let (seq, id, tenant, ns) = (vals.int(0).map_err(dberr)?, vals.blob(1).map_err(dberr)?, vals.text(2).map_err(dberr)?, vals.text(3).map_err(dberr)?);
                if tenant != self.tenant {
                    return Err(verify_err(format!("a vectors row of tenant {tenant:?} in the export of {}", self.tenant)));
                }
                if self.vectors.insert(id.clone(), (seq, ns)).is_some() {
                    return Err(verify_err(format!("two vectors rows for item {}", hex::encode(id))));
                }
            }
            "edges" => {
                let e = (vals.blob(0).map_err(dberr)?, vals.blob(1).map_err(dberr)?, vals.text(2).map_err(dberr)?);
                self.have_edges.insert(e);
            }
            // The keys of sealed log fields (issue 35.7): not log state, so only their shape is
            // checked (a wrong key makes a field unreadable, never a decision different).
            "seals" | "seal_links" => {
                let (tenant, a, b) = (vals.text(0).map_err(dberr)?, vals.blob(1).map_err(dberr)?, vals.blob(2).map_err(dberr)?);
                let want = if table == "seals" { (crate::seal::SEAL_ID_BYTES, crate::seal::SEAL_KEY_BYTES) } else { (16, crate::seal::SEAL_ID_BYTES) };
                if tenant != self.tenant || (a.len(), b.len()) != want {
                    return Err(verify_err(format!("a {table} row of another tenant or of the wrong size")));
                }
            }
            other => return Err(verify_err(format!("unknown table {other:?}"))),
        }
        Ok(text)
    }

    /// Every bound row was there; vector keys and edges agree with the item rows.
    fn finish(&self) -> Result<(), TransferError> {
        let mut missing: Vec<&(Binding, u64)> = self.live.iter().filter(|(k, _)| !self.seen.contains(k)).map(|(_, v)| v).collect();
        missing.sort_by_key(|(b, e)| (*e, b.table, b.parts.clone()));
        if let Some((b, e)) = missing.first() {
            return Err(verify_err(format!("{} row {}: {}", b.table.name(), b.parts.join("/"), Check::Missing { entry: *e }.reason())));
        }
        let want: BTreeMap<&Vec<u8>, &(i64, String)> = self.vseq.iter().collect();
        let have: BTreeMap<&Vec<u8>, &(i64, String)> = self.vectors.iter().collect();
        if want != have {
            return Err(verify_err("the vectors rows do not match the items' vector keys"));
        }
        if self.want_edges != self.have_edges {
            return Err(verify_err("the edges rows are not exactly the parents the item records declare"));
        }
        Ok(())
    }
}

fn line_json(out: &mut dyn Write, v: &Value) -> Result<(), TransferError> {
    serde_json::to_writer(&mut *out, v).map_err(|e| TransferError::Io(e.to_string()))?;
    out.write_all(b"\n").map_err(|e| TransferError::Io(e.to_string()))
}

/// Export `tenant` from the store `db` reads (inside a read snapshot the caller holds): read
/// its log, checkpoints and every row it binds, check them as an import would, and write the
/// file to `out`. Nothing is written unless the tenant verifies.
pub fn export_from(db: &dyn Db, tenant: &TenantId, source: &Source, now_ms: u64, out: &mut dyn Write) -> Result<Exported, TransferError> {
    let t = tenant.as_str();
    let stored = read_tenant_log(db, t)?;
    if stored.entries.is_empty() {
        return Err(TransferError::Store(StoreError::UnknownLog(t.to_owned())));
    }
    let leaves: Vec<Hash> = stored.entries.iter().map(|e| memwarden_log::leaf_hash(e)).collect();
    let log = LogHead { size: leaves.len() as u64, root: memwarden_log::merkle_root(&leaves), head: leaves.last().copied().unwrap_or([0; 32]) };
    if stored.expected.is_some_and(|(s, h)| s != log.size || h != log.head) {
        return Err(verify_err(format!("the recorded head of {t} does not match its stored entries")));
    }
    let key = VerifyingKey::from_bytes(&source.log_key).map_err(|e| verify_err(format!("the source log key is not an Ed25519 key: {e}")))?;
    if memwarden_log::verify_head(&key, &source.store_id, t, log.size, &log.head, stored.head_sig.as_deref()).is_err() {
        return Err(verify_err(format!("the recorded head of {t} (size {}) is not signed by this store's key", log.size)));
    }
    let dims = vector_dims(db)?;
    let mut checker = Checker::new(t, &stored.entries, &stored.checkpoints, &source.log_key, &log, dims)?;
    let mut rows: Vec<(&'static Spec, Vals)> = Vec::new();
    for s in &SPECS {
        let cols: Vec<&str> = s.cols.iter().map(|(c, _)| *c).collect();
        let sql = format!("SELECT {} FROM {} WHERE {} ORDER BY {}", cols.join(", "), s.table, s.filter, s.order);
        for vals in query_all(db, &sql, &[Arg::Text(t)], |r| read_vals(r, s)).map_err(dberr)? {
            checker.row(s.table, &vals)?;
            rows.push((s, vals));
        }
    }
    checker.finish()?;
    let mut counts = checker.counts.clone();
    counts.insert("entries".into(), log.size);
    counts.insert("checkpoints".into(), stored.checkpoints.len() as u64);
    for s in &SPECS {
        counts.entry(s.table.to_owned()).or_insert(0);
    }
    line_json(
        out,
        &json!({
            "type": "header", "format": FORMAT, "tenant": t,
            "source": {"backend": source.backend, "store_id": source.store_id, "log_key": hex::encode(source.log_key)},
            "log": log.json(), "vector_dims": dims, "counts": counts, "exported_ms": now_ms,
        }),
    )?;
    for (i, e) in stored.entries.iter().enumerate() {
        line_json(out, &json!({"type": "entry", "idx": i, "bytes": hex::encode(e)}))?;
    }
    for cp in &stored.checkpoints {
        line_json(out, &json!({"type": "checkpoint", "record": cp}))?;
    }
    for (s, vals) in &rows {
        line_json(out, &json!({"type": "row", "table": s.table, "row": vals_to_json(s, vals)}))?;
    }
    line_json(out, &json!({"type": "trailer", "counts": counts, "log": log.json()}))?;
    out.flush().map_err(|e| TransferError::Io(e.to_string()))?;
    Ok(Exported { tenant: t.to_owned(), log, counts })
}

/// Reads a file line by line (numbered, bounded).
pub struct Lines<'a> {
    src: &'a mut dyn BufRead,
    line: usize,
}

impl<'a> Lines<'a> {
    /// Lines of `src`.
    pub fn new(src: &'a mut dyn BufRead) -> Self {
        Self { src, line: 0 }
    }

    fn format(&self, reason: impl Into<String>) -> TransferError {
        TransferError::Format { line: self.line, reason: reason.into() }
    }

    /// The next record, `None` at the end of the file.
    fn next(&mut self) -> Result<Option<Value>, TransferError> {
        let mut buf = Vec::new();
        let n = std::io::Read::take(&mut *self.src, LINE_BYTES_MAX as u64 + 1).read_until(b'\n', &mut buf).map_err(|e| TransferError::Io(e.to_string()))?;
        if n == 0 {
            return Ok(None);
        }
        self.line += 1;
        if buf.len() > LINE_BYTES_MAX {
            return Err(self.format(format!("longer than {LINE_BYTES_MAX} bytes")));
        }
        if buf.last() != Some(&b'\n') {
            return Err(TransferError::Truncated(format!("line {} ends without a newline", self.line)));
        }
        let v: Value = serde_json::from_slice(&buf).map_err(|e| self.format(format!("not JSON: {e}")))?;
        if !v.is_object() {
            return Err(self.format("not a JSON object"));
        }
        Ok(Some(v))
    }

    /// The next record, which must be there.
    fn expect(&mut self, what: &str) -> Result<Value, TransferError> {
        self.next()?.ok_or_else(|| TransferError::Truncated(format!("the file ends after line {} where {what} was expected", self.line)))
    }
}

fn kind_of(v: &Value) -> &str {
    v.get("type").and_then(Value::as_str).unwrap_or("")
}

/// An export's header and log, read and verified (nothing written anywhere yet).
pub struct Head {
    /// The tenant.
    pub tenant: TenantId,
    /// Its log as the file announces it (and the entries verify).
    pub log: LogHead,
    /// The source as the header names it.
    pub source: Source,
    /// The header's counts.
    pub counts: BTreeMap<String, u64>,
    /// The source store's embedding dimension.
    pub vector_dims: Option<usize>,
    entries: Vec<Vec<u8>>,
    checker: Checker,
}

/// Read an export's header, entries and checkpoints from `lines`, and verify the entries as
/// one chain of the tenant.
pub fn read_head(lines: &mut Lines<'_>) -> Result<Head, TransferError> {
    let h = lines.next()?.ok_or_else(|| TransferError::Truncated("the file is empty".into()))?;
    if kind_of(&h) != "header" || h.get("format").and_then(Value::as_str) != Some(FORMAT) {
        return Err(lines.format(format!("not a {FORMAT} header")));
    }
    let tenant = h.get("tenant").and_then(Value::as_str).ok_or_else(|| lines.format("header.tenant missing"))?;
    let tenant = TenantId::new(tenant).map_err(|e| lines.format(format!("header.tenant: {e}")))?;
    let log = LogHead::parse(h.get("log").unwrap_or(&Value::Null)).map_err(|e| lines.format(e))?;
    let src = h.get("source").unwrap_or(&Value::Null);
    let mut log_key = [0u8; 32];
    hex::decode_to_slice(src.get("log_key").and_then(Value::as_str).unwrap_or(""), &mut log_key).map_err(|e| lines.format(format!("header.source.log_key: {e}")))?;
    let source = Source {
        backend: src.get("backend").and_then(Value::as_str).unwrap_or("").to_owned(),
        store_id: src.get("store_id").and_then(Value::as_str).unwrap_or("").to_owned(),
        log_key,
    };
    let counts: BTreeMap<String, u64> = serde_json::from_value(h.get("counts").cloned().unwrap_or(Value::Null)).map_err(|e| lines.format(format!("header.counts: {e}")))?;
    let vector_dims = match h.get("vector_dims") {
        None | Some(Value::Null) => None,
        Some(v) => Some(v.as_u64().and_then(|d| usize::try_from(d).ok()).ok_or_else(|| lines.format("header.vector_dims"))?),
    };
    if counts.get("entries") != Some(&log.size) {
        return Err(lines.format("header.counts.entries differs from header.log.size"));
    }
    let mut entries = Vec::new();
    for i in 0..log.size {
        let e = lines.expect("a log entry")?;
        if kind_of(&e) != "entry" || e.get("idx").and_then(Value::as_u64) != Some(i) {
            return Err(lines.format(format!("expected log entry {i}")));
        }
        let bytes = hex::decode(e.get("bytes").and_then(Value::as_str).unwrap_or("")).map_err(|e| lines.format(format!("entry bytes: {e}")))?;
        entries.push(bytes);
    }
    let mut checkpoints = Vec::new();
    for _ in 0..counts.get("checkpoints").copied().unwrap_or(0) {
        let c = lines.expect("a checkpoint")?;
        if kind_of(&c) != "checkpoint" {
            return Err(lines.format("expected a checkpoint"));
        }
        checkpoints.push(serde_json::from_value::<SignedCheckpoint>(c.get("record").cloned().unwrap_or(Value::Null)).map_err(|e| lines.format(format!("checkpoint: {e}")))?);
    }
    let checker = Checker::new(tenant.as_str(), &entries, &checkpoints, &source.log_key, &log, vector_dims)?;
    Ok(Head { tenant, log, source, counts, vector_dims, entries, checker })
}

/// What the target store gives an import.
pub struct Target<'a> {
    /// The target's checkpoint-signing key.
    pub key: &'a SigningKey,
    /// The target's store id (its signed heads name it).
    pub store_id: &'a str,
    /// The global sequence number the first imported entry takes (a backend without a global
    /// order ignores it).
    pub gseq: u64,
    /// The target's witnessed heads (for its own verifier; empty where there is none).
    pub witnessed: &'a HashMap<String, SignedCheckpoint>,
    /// The time the target's checkpoint carries.
    pub now_ms: u64,
}

fn target_err(e: DbError, what: &str) -> TransferError {
    if !e.constraint {
        return dberr(e);
    }
    let hint = if what.starts_with("vectors") { "; a SQLite store keys vectors store-wide: import into a fresh data directory" } else { "" };
    TransferError::Target(format!("{what} conflicts with a row already in the target store ({}){hint}", e.message))
}

/// Import the rest of the file (the rows and the trailer) into the store `db` writes, inside
/// one transaction the caller began and commits only on `Ok` (and rolls back otherwise): check
/// that the tenant has no log there, write its entries verbatim and every row, each checked
/// against the verified log first, index the texts, record its head, check the file was whole,
/// sign a checkpoint at the imported size with the target's key, then read the tenant back and
/// run the target's own log verifier and row audit on it.
pub fn import_rows(db: &dyn Db, head: Head, lines: &mut Lines<'_>, target: &Target<'_>) -> Result<Imported, TransferError> {
    let Head { tenant, log, source, counts: announced, vector_dims: dims, entries, mut checker } = head;
    let t = tenant.as_str();
    let existing = read_tenant_log(db, t)?;
    if !existing.entries.is_empty() || existing.expected.is_some() {
        return Err(TransferError::TenantExists(t.to_owned()));
    }
    for s in &SPECS {
        let n: i64 = query_opt(db, &format!("SELECT count(*) FROM {} WHERE {}", s.table, s.filter), &[Arg::Text(t)], |r| r.int(0)).map_err(dberr)?.unwrap_or(0);
        if n > 0 {
            return Err(TransferError::Target(format!("the target holds {n} {} row(s) of tenant {t} without a log", s.table)));
        }
    }
    match (vector_dims(db)?, dims) {
        (Some(have), Some(want)) if have != want => return Err(TransferError::Target(format!("its embeddings have {want} dimensions, the target's {have}"))),
        (None, Some(want)) => db.record_dims(want).map_err(dberr)?,
        _ => {}
    }
    for (i, e) in entries.iter().enumerate() {
        db.append_entry(t, i as u64, e, target.gseq + i as u64).map_err(|e| target_err(e, &format!("log entry {i}")))?;
    }
    let mut max_vseq: Option<i64> = None;
    let trailer = loop {
        let v = lines.expect("a row or the trailer")?;
        match kind_of(&v) {
            "row" => {
                let table = v.get("table").and_then(Value::as_str).unwrap_or("");
                let s = spec(table).ok_or_else(|| lines.format(format!("unknown table {table:?}")))?;
                let vals = vals_from_json(s, v.get("row").unwrap_or(&Value::Null)).map_err(|e| lines.format(e))?;
                let text = checker.row(s.table, &vals)?;
                let cols: Vec<&str> = s.cols.iter().map(|(c, _)| *c).collect();
                let marks: Vec<String> = (1..=cols.len()).map(|i| format!("?{i}")).collect();
                let args: Vec<Arg<'_>> = vals.0.iter().map(val_arg).collect();
                let what = format!("{} row {}", s.table, lines.line);
                db.execute(&format!("INSERT INTO {}({}) VALUES({})", s.table, cols.join(", "), marks.join(", ")), &args).map_err(|e| target_err(e, &what))?;
                if let Some(text) = text {
                    let id = vals.blob(0).map_err(dberr)?;
                    db.index_text(&id, &text).map_err(dberr)?;
                    max_vseq = max_vseq.max(vals.opt_int(8).map_err(dberr)?);
                }
            }
            "trailer" => break v,
            other => return Err(lines.format(format!("expected a row or the trailer, found {other:?}"))),
        }
    };
    let mut counts = checker.counts.clone();
    counts.insert("entries".into(), log.size);
    counts.insert("checkpoints".into(), announced.get("checkpoints").copied().unwrap_or(0));
    for s in &SPECS {
        counts.entry(s.table.to_owned()).or_insert(0);
    }
    let trailer_counts: BTreeMap<String, u64> = serde_json::from_value(trailer.get("counts").cloned().unwrap_or(Value::Null)).map_err(|e| lines.format(format!("trailer.counts: {e}")))?;
    let trailer_log = LogHead::parse(trailer.get("log").unwrap_or(&Value::Null)).map_err(|e| lines.format(e))?;
    if trailer_counts != announced || trailer_log != log {
        return Err(lines.format("the trailer does not match the header"));
    }
    if counts != announced {
        return Err(TransferError::Truncated(format!("the header announces {announced:?}, the file holds {counts:?}")));
    }
    if lines.next()?.is_some() {
        return Err(lines.format("a line after the trailer"));
    }
    checker.finish()?;
    let signer = crate::write::HeadSigner { key: target.key, store_id: target.store_id };
    crate::write::set_heads(db, &HashMap::from([(t.to_owned(), (log.size, log.head))]), signer).map_err(dberr)?;
    let checkpoint = Checkpoint { size: log.size, root: log.root, head: log.head, time_ms: target.now_ms }.sign(target.key);
    let record = serde_json::to_string(&checkpoint).map_err(|e| TransferError::Store(StoreError::Corrupt(e.to_string())))?;
    let size = i64::try_from(log.size).unwrap_or(i64::MAX);
    db.execute("INSERT INTO checkpoints(tenant, size, record) VALUES(?1, ?2, ?3)", &[Arg::Text(t), Arg::Int(size), Arg::Text(&record)]).map_err(dberr)?;
    let provenance = json!({
        "source": {"backend": source.backend, "store_id": source.store_id, "log_key": hex::encode(source.log_key)},
        "log": log.json(), "imported_ms": target.now_ms, "source_checkpoints": announced.get("checkpoints"),
    })
    .to_string();
    let mkey = format!("imported:{t}");
    db.execute(
        "INSERT INTO meta(key, value) VALUES(?1, ?2) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        &[Arg::Text(&mkey), Arg::Text(&provenance)],
    )
    .map_err(dberr)?;
    // The target's own verifier and audit, on what it now holds (inside the transaction).
    let back = read_tenant_log(db, t)?;
    let mut stored = StoredLogs::default();
    stored.tenants.insert(t.to_owned(), back);
    let report = crate::stored::verify(&stored, &target.key.verifying_key(), target.store_id, target.witnessed, Some(t));
    if let Some(p) = report.problem {
        return Err(verify_err(format!("the target's verifier refuses the imported log: {p}")));
    }
    if report.root != log.root || report.head != log.head || report.entries != log.size {
        return Err(verify_err("the imported log does not have the source's root and head"));
    }
    if let Some(p) = crate::audit::audit(db, &stored, Some(t))? {
        return Err(verify_err(format!("the target's row audit refuses the imported rows: {p}")));
    }
    Ok(Imported { tenant: t.to_owned(), log, counts, checkpoint, max_vseq })
}

impl crate::SqliteStore {
    /// Export `tenant` (see the [module documentation](self)) from this open store, reading in
    /// one snapshot of its database.
    pub fn export_tenant(&self, tenant: &TenantId, now_ms: u64, out: &mut dyn Write) -> Result<Exported, TransferError> {
        use crate::Store;
        let source = Source { backend: "sqlite".into(), store_id: self.store_id().to_owned(), log_key: self.log_public_key() };
        let conn = self.reader_conn();
        conn.execute_batch("BEGIN").map_err(StoreError::from)?;
        let out = export_from(&crate::db::SqliteDb(&conn), tenant, &source, now_ms, out);
        let _ = conn.execute_batch("COMMIT");
        out
    }

    /// Import an export (see the [module documentation](self)) into the store in `dir`
    /// (created if missing), which must not be open elsewhere: verify the file's log, take the
    /// directory's lock, write the tenant in one transaction that the store's verifier and row
    /// audit check before it commits, then sign the tenant's witness and reopen the store to
    /// verify the tenant once more. A refused import leaves the store as it was.
    pub fn import_tenant(dir: &std::path::Path, config: crate::StoreConfig, src: &mut dyn BufRead, now_ms: u64) -> Result<Imported, TransferError> {
        use crate::Store;
        let mut lines = Lines::new(src);
        let head = read_head(&mut lines)?;
        let tenant = head.tenant.clone();
        // Open once: creates, migrates and verifies the store, and makes its key.
        let (key_dir, store_id) = {
            let store = crate::SqliteStore::open(dir, config.clone())?;
            if store.log_len_of(&tenant) > 0 {
                return Err(TransferError::TenantExists(tenant.to_string()));
            }
            (store.key_dir().to_path_buf(), store.store_id().to_owned())
        };
        let key = crate::keys::load_key(&key_dir)?.ok_or_else(|| StoreError::KeyDir(format!("no log key in {}", key_dir.display())))?;
        let lock = crate::sqlite::lock_dir(dir)?;
        let conn = crate::sqlite::open_conn(&dir.join(crate::sqlite::DB_FILE), false, crate::sqlite::Durability::Durable)?;
        conn.execute_batch("BEGIN IMMEDIATE").map_err(StoreError::from)?;
        let out = (|| {
            let witnessed = crate::stored::witnesses(&key_dir, &store_id)?;
            let gseq: i64 = conn.query_row("SELECT coalesce(max(gseq) + 1, 0) FROM log", [], |r| r.get(0)).map_err(StoreError::from)?;
            let target = Target { key: &key, store_id: &store_id, gseq: u64::try_from(gseq).unwrap_or(0), witnessed: &witnessed, now_ms };
            import_rows(&crate::db::SqliteDb(&conn), head, &mut lines, &target)
        })();
        let imported = match out {
            Ok(i) => {
                conn.execute_batch("COMMIT").map_err(StoreError::from)?;
                i
            }
            Err(e) => {
                let _ = conn.execute_batch("ROLLBACK");
                return Err(e);
            }
        };
        crate::keys::write_witness(&key_dir, &crate::keys::Witness { store_id, tenant: tenant.as_str().to_owned(), checkpoint: imported.checkpoint.clone() })?;
        drop(conn);
        drop(lock);
        let store = crate::SqliteStore::open(dir, config)?;
        if let Some(p) = store.verify_log_of(&tenant)?.problem {
            return Err(verify_err(format!("the imported tenant does not verify after the commit: {p}")));
        }
        if store.log_root_of(&tenant) != (imported.log.size, imported.log.root, imported.log.head) {
            return Err(verify_err("the reopened store does not hold the imported log"));
        }
        Ok(imported)
    }
}
