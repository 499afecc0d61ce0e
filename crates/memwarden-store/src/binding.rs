//! Row bindings: how every row a decision reads is tied to the verdict log.
//!
//! Each table row outside the log (items, principals, attestations, elevations, used grants,
//! sessions, reputations, lineage events, erasure tombstones) has a **row digest**: SHA-256 over
//! a domain tag, its table and every column it stores (length-prefixed, so no two rows encode
//! alike). The log entry that creates or changes a row lists it under `"rows"` as
//! `[table, tenant, [key parts], digest-hex | null, order | null]` (`null`: the row was
//! deleted). Opening the store replays those lists from the verified log into a
//! [`StateIndex`] (row key → digest and binding entry), and every read compares the row it
//! got with it: a forged row is *unbound*, an edited one *differs*, a deleted one is
//! *missing*, a row rolled back to an older state differs from the latest binding. Nothing in
//! the database is trusted that the log did not commit to.
//!
//! Paged readers (items in commit order, lineage events) also check that no row is missing
//! from a page: the index keeps each tenant's commit order of items and lineage events.

use std::collections::{BTreeSet, HashMap};
use std::hash::{BuildHasherDefault, Hash, Hasher};

use rusqlite::Row;

use crate::db::{Cols, DbError};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// A row digest (SHA-256).
pub type RowDigest = [u8; 32];

/// The tables whose rows are bound to the log.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Table {
    /// The `Principals` table.
    Principals,
    /// The `Items` table.
    Items,
    /// The `Erased` table.
    Erased,
    /// The `Attestations` table.
    Attestations,
    /// The `Elevations` table.
    Elevations,
    /// The `GrantsUsed` table.
    GrantsUsed,
    /// The `Sessions` table.
    Sessions,
    /// The `Reputation` table.
    Reputation,
    /// The `LineageEvents` table.
    LineageEvents,
}

impl Table {
    /// Every bound table, in the order an audit reports them.
    pub const ALL: [Table; 9] = [
        Table::Principals,
        Table::Items,
        Table::Erased,
        Table::Attestations,
        Table::Elevations,
        Table::GrantsUsed,
        Table::Sessions,
        Table::Reputation,
        Table::LineageEvents,
    ];

    /// The SQL table name (also its name in a binding).
    pub fn name(self) -> &'static str {
        match self {
            Table::Principals => "principals",
            Table::Items => "items",
            Table::Erased => "erased",
            Table::Attestations => "attestations",
            Table::Elevations => "elevations",
            Table::GrantsUsed => "grants_used",
            Table::Sessions => "sessions",
            Table::Reputation => "reputation",
            Table::LineageEvents => "lineage_events",
        }
    }

    fn from_name(s: &str) -> Option<Table> {
        Self::ALL.into_iter().find(|t| t.name() == s)
    }

    /// Whether a binding lists this table's rows by row key instead of key columns: an
    /// elevation's key columns hold the value a memory carried, and the log must not name it
    /// (issue 35.7; the row itself goes when the memories behind it are erased).
    pub fn opaque(self) -> bool {
        matches!(self, Table::Elevations)
    }

    /// The commit order a row of this table takes part in, if any.
    pub fn order(self) -> Option<OrderKind> {
        match self {
            Table::Items | Table::Erased => Some(OrderKind::Items),
            Table::LineageEvents => Some(OrderKind::Lineage),
            _ => None,
        }
    }
}

/// A tenant's commit orders that paged readers check for gaps.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OrderKind {
    /// Items (live or erased) by the log index of their write.
    Items,
    /// Lineage events by their log index.
    Lineage,
}

/// A row's key in the index: a digest of its table, tenant and key columns.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct RowKey([u8; 16]);

impl std::fmt::Debug for RowKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "row {}", hex::encode(self.0))
    }
}

impl Hash for RowKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        let mut b = [0u8; 8];
        b.copy_from_slice(&self.0[..8]);
        state.write_u64(u64::from_le_bytes(b));
    }
}

/// The keys are digests already: hash them by their first eight bytes.
#[derive(Default)]
pub struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
}

type KeyMap<V> = HashMap<RowKey, V, BuildHasherDefault<KeyHasher>>;

fn put(h: &mut Sha256, b: &[u8]) {
    h.update((b.len() as u64).to_be_bytes());
    h.update(b);
}

/// The key of a row of `table` in `tenant` with these key columns.
pub fn row_key(table: Table, tenant: &str, parts: &[&str]) -> RowKey {
    let mut h = Sha256::new();
    h.update(b"memwarden/row-key/v1\0");
    put(&mut h, table.name().as_bytes());
    put(&mut h, tenant.as_bytes());
    for p in parts {
        put(&mut h, p.as_bytes());
    }
    let d = h.finalize();
    let mut k = [0u8; 16];
    k.copy_from_slice(&d[..16]);
    RowKey(k)
}

/// Builds a row digest column by column.
struct Fields(Sha256);

impl Fields {
    fn new(table: Table) -> Self {
        let mut h = Sha256::new();
        h.update(b"memwarden/row/v1\0");
        put(&mut h, table.name().as_bytes());
        Self(h)
    }
    fn bytes(mut self, b: &[u8]) -> Self {
        self.0.update([1]);
        put(&mut self.0, b);
        self
    }
    fn text(self, s: &str) -> Self {
        self.bytes(s.as_bytes())
    }
    fn int(mut self, v: i64) -> Self {
        self.0.update([2]);
        self.0.update(v.to_be_bytes());
        self
    }
    fn opt_int(mut self, v: Option<i64>) -> Self {
        match v {
            Some(v) => self.int(v),
            None => {
                self.0.update([0]);
                self
            }
        }
    }
    fn opt_bytes(mut self, v: Option<&[u8]>) -> Self {
        match v {
            Some(v) => self.bytes(v),
            None => {
                self.0.update([0]);
                self
            }
        }
    }
    fn finish(self) -> RowDigest {
        self.0.finalize().into()
    }
}

/// The prefix of a binding part that is a row key (hex), not a key column ([`Table::opaque`]):
/// no key column holds a NUL, so it cannot be mistaken for one.
const OPAQUE_KEY_PREFIX: &str = "\u{0}key:";

/// One row binding as a log entry lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Binding {
    /// The `table` column.
    pub table: Table,
    /// The `tenant` column.
    pub tenant: String,
    /// The `parts` column.
    pub parts: Vec<String>,
    /// `None`: the row was deleted.
    pub digest: Option<RowDigest>,
    /// The row's place in its tenant's commit order ([`Table::order`]).
    pub order: Option<u64>,
}

impl Binding {
    /// The row's key in the [`StateIndex`]: from its key columns, or the key itself where the
    /// binding lists it opaquely ([`Table::opaque`]).
    pub fn key(&self) -> RowKey {
        if let [only] = self.parts.as_slice()
            && let Some(hex) = only.strip_prefix(OPAQUE_KEY_PREFIX)
            && let Ok(raw) = hex::decode(hex)
            && let Ok(key) = <[u8; 16]>::try_from(raw.as_slice())
        {
            return RowKey(key);
        }
        let parts: Vec<&str> = self.parts.iter().map(String::as_str).collect();
        row_key(self.table, &self.tenant, &parts)
    }

    /// A deleted row of `table`.
    pub fn deleted(table: Table, tenant: &str, parts: Vec<String>) -> Self {
        Self { table, tenant: tenant.to_owned(), parts, digest: None, order: None }
    }

    /// The binding as a log entry lists it (an [`Table::opaque`] table's row by its key).
    pub fn to_json(&self) -> Value {
        let parts = if self.table.opaque() { vec![format!("{OPAQUE_KEY_PREFIX}{}", hex::encode(self.key().0))] } else { self.parts.clone() };
        debug_assert!(!self.table.opaque() || parts.len() == 1);
        json!([self.table.name(), self.tenant, parts, self.digest.map(hex::encode), self.order])
    }
}

/// The `"rows"` of a log entry body (`[]` when it binds none).
pub fn bindings_of(body: &[u8]) -> Result<Vec<Binding>, String> {
    /// `[table, tenant, [key parts], digest, order]`.
    type Raw = (String, String, Vec<String>, Option<String>, Option<u64>);
    #[derive(serde::Deserialize)]
    struct Rows {
        #[serde(default)]
        rows: Vec<Raw>,
    }
    if !body.windows(7).any(|w| w == b"\"rows\":") {
        return Ok(Vec::new()); // fast path: most bodies are small; none without the key binds
    }
    let rows: Rows = serde_json::from_slice(body).map_err(|e| format!("entry body: {e}"))?;
    rows.rows
        .into_iter()
        .map(|(table, tenant, parts, digest, order)| {
            let table = Table::from_name(&table).ok_or_else(|| format!("binding names an unknown table {table:?}"))?;
            let digest = digest
                .map(|d| {
                    let mut out = [0u8; 32];
                    hex::decode_to_slice(&d, &mut out).map(|()| out).map_err(|e| format!("binding digest: {e}"))
                })
                .transpose()?;
            Ok(Binding { table, tenant, parts, digest, order })
        })
        .collect()
}

/// Where a row stands against the log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bound {
    /// The first half of the row digest (128 bits suffice against second preimages).
    digest: [u8; 16],
    /// The log index of the entry that bound it.
    pub entry: u64,
}

impl Bound {
    fn new(digest: &RowDigest, entry: u64) -> Self {
        let mut d = [0u8; 16];
        d.copy_from_slice(&digest[..16]);
        Self { digest: d, entry }
    }
    fn matches(&self, digest: &RowDigest) -> bool {
        self.digest[..] == digest[..16]
    }
}

/// What a read found, against the index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Check {
    /// The row is as the log committed it (or absent, as the log committed).
    Ok,
    /// A row no log entry committed (forged, or left over from another state).
    Unbound,
    /// The row differs from what entry `entry` committed (edited or rolled back).
    Differs {
        /// The binding entry.
        entry: u64,
    },
    /// The row entry `entry` committed is missing (deleted).
    Missing {
        /// The binding entry.
        entry: u64,
    },
}

impl Check {
    /// Why a read was refused, for an error message.
    pub fn reason(self) -> String {
        match self {
            Check::Ok => "as committed".into(),
            Check::Unbound => "the row was committed by no log entry (forged)".into(),
            Check::Differs { entry } => format!("the row differs from its digest in log entry {entry} (edited or rolled back)"),
            Check::Missing { entry } => format!("the row committed by log entry {entry} is missing (deleted)"),
        }
    }
}

/// Every bound row's digest and binding entry, derived from the verified log, plus each
/// tenant's commit orders. While a group commit's transaction commits, its bindings are
/// *staged*: readers accept a row in its old or its new state (both are committed by the log
/// the moment the transaction is durable), so no read sees a false alarm in that window.
#[derive(Default)]
pub struct StateIndex {
    rows: KeyMap<Bound>,
    staged: KeyMap<Option<Bound>>,
    order: HashMap<(String, OrderKind), BTreeSet<u64>>,
    staged_order: HashMap<(String, OrderKind), BTreeSet<u64>>,
}

impl StateIndex {
    /// Apply a binding of the committed log entry `entry`.
    pub fn apply(&mut self, b: &Binding, entry: u64) {
        let key = b.key();
        match &b.digest {
            Some(d) => {
                self.rows.insert(key, Bound::new(d, entry));
            }
            None => {
                self.rows.remove(&key);
            }
        }
        if let (Some(kind), Some(o)) = (b.table.order(), b.order) {
            self.order.entry((b.tenant.clone(), kind)).or_default().insert(o);
        }
    }

    /// Stage the bindings of a group whose transaction is about to commit.
    pub fn stage(&mut self, bindings: &[(Binding, u64)]) {
        for (b, entry) in bindings {
            self.staged.insert(b.key(), b.digest.as_ref().map(|d| Bound::new(d, *entry)));
            if let (Some(kind), Some(o)) = (b.table.order(), b.order) {
                self.staged_order.entry((b.tenant.clone(), kind)).or_default().insert(o);
            }
        }
    }

    /// The staged group committed (`apply` its bindings first) or failed: drop the stage.
    pub fn unstage(&mut self) {
        self.staged.clear();
        self.staged_order.clear();
    }

    /// Check a row read from the database (`None`: no row) against the log.
    pub fn check(&self, key: &RowKey, digest: Option<&RowDigest>) -> Check {
        let accepts = |b: Option<&Bound>| match (b, digest) {
            (None, None) => true,
            (Some(b), Some(d)) => b.matches(d),
            _ => false,
        };
        let now = self.rows.get(key);
        if accepts(now) || self.staged.get(key).is_some_and(|s| accepts(s.as_ref())) {
            return Check::Ok;
        }
        match (now, digest) {
            (Some(b), Some(_)) => Check::Differs { entry: b.entry },
            (Some(b), None) => Check::Missing { entry: b.entry },
            (None, _) => Check::Unbound,
        }
    }

    /// Check a page of a tenant's commit order: `returned` are the order values of the rows a
    /// paged read returned (ascending), for rows after `after`, at most `limit` of them. Every
    /// returned value must be committed (or staged), and no committed value may be skipped in
    /// the range the page covers.
    pub fn check_page(&self, tenant: &str, kind: OrderKind, after: Option<u64>, limit: usize, returned: &[u64]) -> Result<(), String> {
        let key = (tenant.to_owned(), kind);
        let empty = BTreeSet::new();
        let committed = self.order.get(&key).unwrap_or(&empty);
        let staged = self.staged_order.get(&key).unwrap_or(&empty);
        for r in returned {
            if !committed.contains(r) && !staged.contains(r) {
                return Err(format!("row at log index {r} was committed by no log entry"));
            }
        }
        let lo = after.map_or(0, |a| a.saturating_add(1));
        // The page covers up to its last row, or everything after `after` when it is short.
        let hi = if returned.len() >= limit { returned.last().copied() } else { None };
        let range: Box<dyn Iterator<Item = &u64>> = match hi {
            Some(h) => Box::new(committed.range(lo..=h)),
            None => Box::new(committed.range(lo..)),
        };
        let mut got = returned.iter().peekable();
        for want in range {
            while got.peek().is_some_and(|g| *g < want) {
                got.next();
            }
            if got.peek() != Some(&want) {
                return Err(format!("the row committed at log index {want} is missing (deleted)"));
            }
        }
        Ok(())
    }
}

fn i64_to_u64(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(u64::MAX)
}

/// A row type bound to the log: how it is read, keyed and digested.
pub trait BoundRow: Sized {
    /// Its table.
    const TABLE: Table;
    /// Its columns, in [`BoundRow::read`] order.
    const COLUMNS: &'static str;
    /// Read a row of [`BoundRow::COLUMNS`] from any backend.
    fn from_cols(r: &dyn Cols) -> Result<Self, DbError>;
    /// Read a row of [`BoundRow::COLUMNS`] from SQLite.
    fn read(r: &Row<'_>) -> rusqlite::Result<Self> {
        Self::from_cols(r).map_err(|e| rusqlite::Error::FromSqlConversionFailure(0, rusqlite::types::Type::Null, Box::new(e)))
    }
    /// Its tenant.
    fn tenant(&self) -> &str;
    /// Its key columns (besides the tenant).
    fn parts(&self) -> Vec<String>;
    /// Its row digest (every column).
    fn digest(&self) -> RowDigest;
    /// Its place in its tenant's commit order, if its table has one.
    fn order(&self) -> Option<u64> {
        None
    }
    /// Its key in the [`StateIndex`].
    fn key(&self) -> RowKey {
        let parts = self.parts();
        let parts: Vec<&str> = parts.iter().map(String::as_str).collect();
        row_key(Self::TABLE, self.tenant(), &parts)
    }
    /// The binding a log entry lists for this row.
    fn binding(&self) -> Binding {
        Binding { table: Self::TABLE, tenant: self.tenant().to_owned(), parts: self.parts(), digest: Some(self.digest()), order: self.order() }
    }
}

/// An `items` row.
#[derive(Clone, Debug)]
pub struct ItemRow {
    /// The `id` column.
    pub id: Vec<u8>,
    /// The `tenant` column.
    pub tenant: String,
    /// The `namespace` column.
    pub namespace: String,
    /// The `record` column.
    pub record: String,
    /// The item's identity digest.
    pub digest: Vec<u8>,
    /// The log index of its write (its place in the commit order).
    pub log_index: i64,
    /// The `created_ms` column.
    pub created_ms: i64,
    /// The log index of the last change (compare-and-set).
    pub version: i64,
    /// Its vector's key (`vectors.seq`), if it has one.
    pub vseq: Option<i64>,
    /// SHA-256 of its embedding, if it has one.
    pub emb_digest: Option<Vec<u8>>,
}

impl BoundRow for ItemRow {
    const TABLE: Table = Table::Items;
    const COLUMNS: &'static str = "id, tenant, namespace, record, digest, log_index, created_ms, version, vseq, emb_digest";
    fn from_cols(r: &dyn Cols) -> Result<Self, DbError> {
        Ok(Self {
            id: r.blob(0)?,
            tenant: r.text(1)?,
            namespace: r.text(2)?,
            record: r.text(3)?,
            digest: r.blob(4)?,
            log_index: r.int(5)?,
            created_ms: r.int(6)?,
            version: r.int(7)?,
            vseq: r.opt_int(8)?,
            emb_digest: r.opt_blob(9)?,
        })
    }
    fn tenant(&self) -> &str {
        &self.tenant
    }
    fn parts(&self) -> Vec<String> {
        vec![hex::encode(&self.id)]
    }
    fn digest(&self) -> RowDigest {
        Fields::new(Self::TABLE)
            .bytes(&self.id)
            .text(&self.tenant)
            .text(&self.namespace)
            .text(&self.record)
            .bytes(&self.digest)
            .int(self.log_index)
            .int(self.created_ms)
            .int(self.version)
            .opt_int(self.vseq)
            .opt_bytes(self.emb_digest.as_deref())
            .finish()
    }
    fn order(&self) -> Option<u64> {
        Some(i64_to_u64(self.log_index))
    }
}

/// An `erased` row (a tombstone).
#[derive(Clone, Debug)]
pub struct ErasedRow {
    /// The `id` column.
    pub id: Vec<u8>,
    /// The `tenant` column.
    pub tenant: String,
    /// The `namespace` column.
    pub namespace: String,
    /// The `tombstone` column.
    pub tombstone: String,
    /// The `item_log_index` column.
    pub item_log_index: i64,
    /// The `log_index` column.
    pub log_index: i64,
}

impl BoundRow for ErasedRow {
    const TABLE: Table = Table::Erased;
    const COLUMNS: &'static str = "id, tenant, namespace, tombstone, item_log_index, log_index";
    fn from_cols(r: &dyn Cols) -> Result<Self, DbError> {
        Ok(Self { id: r.blob(0)?, tenant: r.text(1)?, namespace: r.text(2)?, tombstone: r.text(3)?, item_log_index: r.int(4)?, log_index: r.int(5)? })
    }
    fn tenant(&self) -> &str {
        &self.tenant
    }
    fn parts(&self) -> Vec<String> {
        vec![hex::encode(&self.id)]
    }
    fn digest(&self) -> RowDigest {
        Fields::new(Self::TABLE)
            .bytes(&self.id)
            .text(&self.tenant)
            .text(&self.namespace)
            .text(&self.tombstone)
            .int(self.item_log_index)
            .int(self.log_index)
            .finish()
    }
    fn order(&self) -> Option<u64> {
        Some(i64_to_u64(self.item_log_index))
    }
}

/// A `principals` row.
#[derive(Clone, Debug)]
pub struct PrincipalRow {
    /// The `tenant` column.
    pub tenant: String,
    /// The `id` column.
    pub id: String,
    /// The `record` column.
    pub record: String,
    /// The `log_index` column.
    pub log_index: i64,
}

impl BoundRow for PrincipalRow {
    const TABLE: Table = Table::Principals;
    const COLUMNS: &'static str = "tenant, id, record, log_index";
    fn from_cols(r: &dyn Cols) -> Result<Self, DbError> {
        Ok(Self { tenant: r.text(0)?, id: r.text(1)?, record: r.text(2)?, log_index: r.int(3)? })
    }
    fn tenant(&self) -> &str {
        &self.tenant
    }
    fn parts(&self) -> Vec<String> {
        vec![self.id.clone()]
    }
    fn digest(&self) -> RowDigest {
        Fields::new(Self::TABLE).text(&self.tenant).text(&self.id).text(&self.record).int(self.log_index).finish()
    }
}

/// An `attestations` row (keyed by the log entry that recorded it).
#[derive(Clone, Debug)]
pub struct AttestationRow {
    /// The `tenant` column.
    pub tenant: String,
    /// The `key` column.
    pub key: String,
    /// The `record` column.
    pub record: String,
    /// The `log_index` column.
    pub log_index: i64,
}

impl BoundRow for AttestationRow {
    const TABLE: Table = Table::Attestations;
    const COLUMNS: &'static str = "tenant, key, record, log_index";
    fn from_cols(r: &dyn Cols) -> Result<Self, DbError> {
        Ok(Self { tenant: r.text(0)?, key: r.text(1)?, record: r.text(2)?, log_index: r.int(3)? })
    }
    fn tenant(&self) -> &str {
        &self.tenant
    }
    fn parts(&self) -> Vec<String> {
        vec![self.log_index.to_string()]
    }
    fn digest(&self) -> RowDigest {
        Fields::new(Self::TABLE).text(&self.tenant).text(&self.key).text(&self.record).int(self.log_index).finish()
    }
}

/// An `elevations` row.
#[derive(Clone, Debug)]
pub struct ElevationRow {
    /// The `tenant` column.
    pub tenant: String,
    /// The `key` column.
    pub key: String,
    /// The `value` column.
    pub value: String,
    /// The `record` column.
    pub record: String,
    /// The `log_index` column.
    pub log_index: i64,
}

impl BoundRow for ElevationRow {
    const TABLE: Table = Table::Elevations;
    const COLUMNS: &'static str = "tenant, key, value, record, log_index";
    fn from_cols(r: &dyn Cols) -> Result<Self, DbError> {
        Ok(Self { tenant: r.text(0)?, key: r.text(1)?, value: r.text(2)?, record: r.text(3)?, log_index: r.int(4)? })
    }
    fn tenant(&self) -> &str {
        &self.tenant
    }
    fn parts(&self) -> Vec<String> {
        vec![self.key.clone(), self.value.clone()]
    }
    fn digest(&self) -> RowDigest {
        Fields::new(Self::TABLE).text(&self.tenant).text(&self.key).text(&self.value).text(&self.record).int(self.log_index).finish()
    }
}

/// A `grants_used` row.
#[derive(Clone, Debug)]
pub struct GrantUsedRow {
    /// The `tenant` column.
    pub tenant: String,
    /// The `nonce` column.
    pub nonce: Vec<u8>,
    /// The `record` column.
    pub record: String,
    /// The `log_index` column.
    pub log_index: i64,
}

impl BoundRow for GrantUsedRow {
    const TABLE: Table = Table::GrantsUsed;
    const COLUMNS: &'static str = "tenant, nonce, record, log_index";
    fn from_cols(r: &dyn Cols) -> Result<Self, DbError> {
        Ok(Self { tenant: r.text(0)?, nonce: r.blob(1)?, record: r.text(2)?, log_index: r.int(3)? })
    }
    fn tenant(&self) -> &str {
        &self.tenant
    }
    fn parts(&self) -> Vec<String> {
        vec![hex::encode(&self.nonce)]
    }
    fn digest(&self) -> RowDigest {
        Fields::new(Self::TABLE).text(&self.tenant).bytes(&self.nonce).text(&self.record).int(self.log_index).finish()
    }
}

/// A `sessions` row.
#[derive(Clone, Debug)]
pub struct SessionRow {
    /// The `tenant` column.
    pub tenant: String,
    /// The `principal` column.
    pub principal: String,
    /// The `session` column.
    pub session: String,
    /// The `record` column.
    pub record: String,
    /// The `log_index` column.
    pub log_index: i64,
}

impl BoundRow for SessionRow {
    const TABLE: Table = Table::Sessions;
    const COLUMNS: &'static str = "tenant, principal, session, record, log_index";
    fn from_cols(r: &dyn Cols) -> Result<Self, DbError> {
        Ok(Self { tenant: r.text(0)?, principal: r.text(1)?, session: r.text(2)?, record: r.text(3)?, log_index: r.int(4)? })
    }
    fn tenant(&self) -> &str {
        &self.tenant
    }
    fn parts(&self) -> Vec<String> {
        vec![self.principal.clone(), self.session.clone()]
    }
    fn digest(&self) -> RowDigest {
        Fields::new(Self::TABLE).text(&self.tenant).text(&self.principal).text(&self.session).text(&self.record).int(self.log_index).finish()
    }
}

/// A `reputation` row.
#[derive(Clone, Debug)]
pub struct ReputationRow {
    /// The `tenant` column.
    pub tenant: String,
    /// The `principal` column.
    pub principal: String,
    /// The `value` column.
    pub value: f64,
    /// The `log_index` column.
    pub log_index: i64,
}

impl BoundRow for ReputationRow {
    const TABLE: Table = Table::Reputation;
    const COLUMNS: &'static str = "tenant, principal, value, log_index";
    fn from_cols(r: &dyn Cols) -> Result<Self, DbError> {
        Ok(Self { tenant: r.text(0)?, principal: r.text(1)?, value: r.real(2)?, log_index: r.int(3)? })
    }
    fn tenant(&self) -> &str {
        &self.tenant
    }
    fn parts(&self) -> Vec<String> {
        vec![self.principal.clone()]
    }
    fn digest(&self) -> RowDigest {
        Fields::new(Self::TABLE).text(&self.tenant).text(&self.principal).bytes(&self.value.to_bits().to_be_bytes()).int(self.log_index).finish()
    }
}

/// A `lineage_events` row (keyed by its log entry).
#[derive(Clone, Debug)]
pub struct LineageRow {
    /// The `tenant` column.
    pub tenant: String,
    /// The `event` column.
    pub event: String,
    /// The `log_index` column.
    pub log_index: i64,
}

impl BoundRow for LineageRow {
    const TABLE: Table = Table::LineageEvents;
    const COLUMNS: &'static str = "tenant, event, log_index";
    fn from_cols(r: &dyn Cols) -> Result<Self, DbError> {
        Ok(Self { tenant: r.text(0)?, event: r.text(1)?, log_index: r.int(2)? })
    }
    fn tenant(&self) -> &str {
        &self.tenant
    }
    fn parts(&self) -> Vec<String> {
        vec![self.log_index.to_string()]
    }
    fn digest(&self) -> RowDigest {
        Fields::new(Self::TABLE).text(&self.tenant).text(&self.event).int(self.log_index).finish()
    }
    fn order(&self) -> Option<u64> {
        Some(i64_to_u64(self.log_index))
    }
}

/// SHA-256 of an embedding's stored bytes.
pub fn embedding_digest(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item() -> ItemRow {
        ItemRow {
            id: vec![1; 16],
            tenant: "acme".into(),
            namespace: "n".into(),
            record: "{}".into(),
            digest: vec![2; 32],
            log_index: 5,
            created_ms: 9,
            version: 5,
            vseq: Some(1),
            emb_digest: None,
        }
    }

    #[test]
    fn every_column_changes_the_digest() {
        let base = item().digest();
        type Edit = Box<dyn Fn(&mut ItemRow)>;
        let edits: Vec<Edit> = vec![
            Box::new(|r| r.id[0] = 9),
            Box::new(|r| r.tenant = "acmf".into()),
            Box::new(|r| r.namespace = "m".into()),
            Box::new(|r| r.record = "{ }".into()),
            Box::new(|r| r.digest[0] = 0),
            Box::new(|r| r.log_index = 6),
            Box::new(|r| r.created_ms = 8),
            Box::new(|r| r.version = 6),
            Box::new(|r| r.vseq = None),
            Box::new(|r| r.emb_digest = Some(vec![])),
        ];
        for (i, edit) in edits.iter().enumerate() {
            let mut r = item();
            edit(&mut r);
            assert_ne!(r.digest(), base, "column edit {i} went unnoticed");
        }
    }

    #[test]
    fn the_index_tells_forged_edited_deleted_and_staged_rows_apart() {
        let mut idx = StateIndex::default();
        let row = item();
        let b = row.binding();
        let key = b.key();
        assert_eq!(idx.check(&key, Some(&row.digest())), Check::Unbound);
        assert_eq!(idx.check(&key, None), Check::Ok);
        idx.apply(&b, 5);
        assert_eq!(idx.check(&key, Some(&row.digest())), Check::Ok);
        let mut edited = row.clone();
        edited.record = "{\"x\":1}".into();
        assert_eq!(idx.check(&key, Some(&edited.digest())), Check::Differs { entry: 5 });
        assert_eq!(idx.check(&key, None), Check::Missing { entry: 5 });
        // Staged: both states pass until the stage is dropped.
        idx.stage(&[(edited.binding(), 7)]);
        assert_eq!(idx.check(&key, Some(&edited.digest())), Check::Ok);
        assert_eq!(idx.check(&key, Some(&row.digest())), Check::Ok);
        idx.apply(&edited.binding(), 7);
        idx.unstage();
        assert_eq!(idx.check(&key, Some(&row.digest())), Check::Differs { entry: 7 }, "rolled back to the old state");
        // A JSON round trip of the binding.
        let body = serde_json::to_vec(&json!({"x": 1, "rows": [edited.binding().to_json()]})).unwrap();
        assert_eq!(bindings_of(&body).unwrap(), vec![edited.binding()]);
        assert!(bindings_of(b"{\"x\":1}").unwrap().is_empty());
    }

    /// Issue 35.7: an elevation's binding names its row by key, never by the value; read back,
    /// it keys the same row.
    #[test]
    fn an_elevation_binding_does_not_name_its_value() {
        let row = ElevationRow { tenant: "acme".into(), key: "payee".into(), value: "acct-secret-77".into(), record: "{}".into(), log_index: 4 };
        let b = row.binding();
        let body = serde_json::to_vec(&json!({"rows": [b.to_json(), Binding::deleted(Table::Elevations, "acme", vec!["payee".into(), "acct-secret-77".into()]).to_json()]})).unwrap();
        assert!(!String::from_utf8_lossy(&body).contains("secret"), "{}", String::from_utf8_lossy(&body));
        let back = bindings_of(&body).unwrap();
        assert_eq!(back.iter().map(Binding::key).collect::<Vec<_>>(), vec![row.key(), row.key()]);
        assert_eq!(back[0].digest, b.digest);
    }

    #[test]
    fn a_page_with_a_gap_is_refused() {
        let mut idx = StateIndex::default();
        for o in [3, 5, 8, 13] {
            idx.apply(&Binding { table: Table::LineageEvents, tenant: "t".into(), parts: vec![o.to_string()], digest: Some([0; 32]), order: Some(o) }, o);
        }
        let check = |after, limit, got: &[u64]| idx.check_page("t", OrderKind::Lineage, after, limit, got);
        assert!(check(None, 10, &[3, 5, 8, 13]).is_ok());
        assert!(check(None, 2, &[3, 5]).is_ok());
        assert!(check(Some(5), 2, &[8, 13]).is_ok());
        assert!(check(None, 10, &[3, 8, 13]).is_err(), "5 deleted");
        assert!(check(None, 10, &[3, 5, 8]).is_err(), "the tail deleted");
        assert!(check(None, 10, &[3, 4, 5, 8, 13]).is_err(), "4 forged");
        assert!(check(Some(13), 10, &[]).is_ok());
    }
}
