//! The writer: one thread applies every mutation — its rows, their bindings and its log
//! entries — in group-committed transactions, and keeps the in-memory log, the state index,
//! the vector indexes and the witness in step once a transaction is durable.

use std::collections::HashMap;
use std::sync::mpsc;

use memwarden_core::prelude::*;
use memwarden_log::{Entry, EntryKind, Hash, SignedCheckpoint, leaf_hash};
use rusqlite::Connection;
use serde_json::{Value, json};

use crate::binding::{
    AttestationRow, Binding, BoundRow, Check, ElevationRow, ErasedRow, GrantUsedRow, ItemRow, LineageRow, PrincipalRow, ReputationRow, RowDigest,
    RowKey, SessionRow, StateIndex, Table, embedding_digest, row_key,
};
use crate::logs::{GLOBAL, Logs};
use crate::db::{Arg, Db, DbError, SqliteDb, query_opt};
use crate::sqlite::{Durability, Shared, read_guard, write_guard};
use crate::vectors::{AccessChange, NewVector};
use crate::{BATCH_MUTATIONS_MAX, CommitError, EMBEDDING_DIMS_MAX, Mutation, Receipt, StoreError, StoredSession};

/// Bindings carried by one log entry, at most this many bytes of JSON; more continue in
/// further entries of the same kind.
const ROWS_BYTES_MAX: usize = 512 * 1024;

pub(crate) type Reply = mpsc::Sender<Result<Vec<Result<Receipt, CommitError>>, String>>;

pub(crate) enum Job {
    /// `atomic`: all mutations in one savepoint, all or nothing (the reply then holds every
    /// receipt, or one error).
    /// `tag`: the request's idempotency key, claimed in the same transaction (atomic only).
    Commit { now_ms: u64, mutations: Vec<Mutation>, atomic: bool, tag: Option<crate::IdempotencyTag>, reply: Reply },
    /// Add the answer to an idempotency record (after its commit).
    Answer { tag: crate::IdempotencyTag, status: u16, body: Vec<u8>, reply: mpsc::Sender<Result<bool, String>> },
    /// Sign and store a checkpoint: of one tenant's log, or (`None`) of every tenant's log with
    /// new entries and of the global view (whose checkpoint is the reply).
    Checkpoint { tenant: Option<String>, now_ms: u64, reply: mpsc::Sender<Result<SignedCheckpoint, String>> },
}

/// The chain state while a group is being applied: entries are linked locally, per tenant, and
/// appended to the shared logs only after the transaction commits.
pub struct Pending {
    /// The next index and head of every tenant log this group touched.
    pub chains: HashMap<String, (u64, Hash)>,
    /// The next global sequence number.
    pub gseq: u64,
    /// (tenant, entry, global sequence number), in commit order.
    pub entries: Vec<(String, Entry, u64)>,
    /// Vectors to index once the transaction commits.
    pub vectors: Vec<NewVector>,
    /// Catalog changes (status or scope) to apply once the transaction commits.
    pub access: Vec<AccessChange>,
    /// The store's vector dimension (set by the first vector ever, possibly in this group).
    pub dims: Option<usize>,
    /// Row bindings of this group, with the (tenant-log) index of the entry that carries each.
    pub bindings: Vec<(RowKey, Binding, u64)>,
    /// What a new tenant's genesis entry names.
    store_id: String,
    log_key: String,
    /// The MAC key of idempotency records (an erasure re-MACs the ones whose answer it drops).
    idempotency_mac_key: [u8; 32],
}

/// Where [`Pending`] stood before a savepoint, to roll it back with the savepoint.
struct Mark {
    chains: HashMap<String, (u64, Hash)>,
    gseq: u64,
    entries: usize,
    vectors: usize,
    access: usize,
    dims: Option<usize>,
    bindings: usize,
}

impl Pending {
    /// A group's chain state: `gseq` the next global sequence number, `dims` the store's vector dimension, and what a new tenant's genesis entry names.
    pub fn new(gseq: u64, dims: Option<usize>, store_id: &str, log_key: &[u8; 32], idempotency_mac_key: [u8; 32]) -> Self {
        Self {
            chains: HashMap::new(),
            gseq,
            entries: Vec::new(),
            vectors: Vec::new(),
            access: Vec::new(),
            dims,
            bindings: Vec::new(),
            store_id: store_id.to_owned(),
            log_key: hex::encode(log_key),
            idempotency_mac_key,
        }
    }

    fn mark(&self) -> Mark {
        Mark {
            chains: self.chains.clone(),
            gseq: self.gseq,
            entries: self.entries.len(),
            vectors: self.vectors.len(),
            access: self.access.len(),
            dims: self.dims,
            bindings: self.bindings.len(),
        }
    }

    fn rollback(&mut self, m: Mark) {
        self.chains = m.chains;
        self.gseq = m.gseq;
        self.entries.truncate(m.entries);
        self.vectors.truncate(m.vectors);
        self.access.truncate(m.access);
        self.dims = m.dims;
        self.bindings.truncate(m.bindings);
    }

    /// Make `tenant`'s log ready for this group (opening it with its genesis entry when the
    /// tenant has none yet) and return the index its next entry takes.
    fn begin(&mut self, db: &dyn Db, logs: &Logs, now_ms: u64, tenant: &str) -> Result<u64, CommitError> {
        if let Some((len, _)) = self.chains.get(tenant) {
            return Ok(*len);
        }
        match logs.chain(tenant) {
            Some(c) => {
                self.chains.insert(tenant.to_owned(), c);
            }
            None => {
                self.chains.insert(tenant.to_owned(), (0, [0; 32]));
                let body = json!({"store": "memwarden", "store_id": self.store_id, "tenant": tenant, "schema": crate::sqlite::SCHEMA_VERSION, "log_key": self.log_key});
                self.push_entry(db, tenant, now_ms, EntryKind::Genesis, &body)?;
            }
        }
        Ok(self.next(tenant))
    }

    /// The index `tenant`'s next entry takes (after [`Pending::begin`]).
    pub fn next(&self, tenant: &str) -> u64 {
        self.chains.get(tenant).map_or(0, |c| c.0)
    }

    /// Append one entry (no bindings) to `tenant`'s log (begun).
    fn push_entry(&mut self, db: &dyn Db, tenant: &str, now_ms: u64, kind: EntryKind, body: &Value) -> Result<(u64, Hash), CommitError> {
        let body = serde_json::to_vec(body).map_err(|e| CommitError::Storage(e.to_string()))?;
        if body.len() > Entry::BODY_BYTES_MAX {
            return Err(CommitError::Storage(format!("a log entry of {} bytes exceeds the limit of {}", body.len(), Entry::BODY_BYTES_MAX)));
        }
        let (len, head) = *self.chains.get(tenant).ok_or_else(|| CommitError::Storage(format!("log of {tenant} not begun")))?;
        let entry = Entry { index: len, prev: head, time_ms: now_ms, kind, body };
        let bytes = entry.encode();
        let leaf = leaf_hash(&bytes);
        db.append_entry(tenant, len, &bytes, self.gseq).map_err(sql)?;
        self.chains.insert(tenant.to_owned(), (len + 1, leaf));
        self.entries.push((tenant.to_owned(), entry, self.gseq));
        self.gseq += 1;
        Ok((len, leaf))
    }

    /// Append an entry that binds `rows` (listed in its body under `"rows"`; a long list
    /// continues in further entries of the same kind). Returns the last entry's index and leaf.
    pub(crate) fn push(&mut self, db: &dyn Db, tenant: &str, now_ms: u64, kind: EntryKind, body: &Value, rows: Vec<Binding>) -> Result<(u64, Hash), CommitError> {
        if let Some(b) = rows.iter().find(|b| b.tenant != tenant) {
            return Err(CommitError::Storage(format!("a row of tenant {} cannot be bound in the log of {tenant}", b.tenant)));
        }
        let mut chunks: Vec<Vec<Value>> = vec![Vec::new()];
        let mut bytes = 0usize;
        for b in &rows {
            let v = b.to_json();
            let n = v.to_string().len() + 1;
            if bytes + n > ROWS_BYTES_MAX && chunks.last().is_some_and(|c| !c.is_empty()) {
                chunks.push(Vec::new());
                bytes = 0;
            }
            bytes += n;
            if let Some(c) = chunks.last_mut() {
                c.push(v);
            }
        }
        let first = self.next(tenant);
        let mut body = body.clone();
        let mut rows = rows.into_iter();
        let mut last = (0, [0u8; 32]);
        for (i, chunk) in chunks.into_iter().enumerate() {
            let n = chunk.len();
            let carried = if i == 0 {
                if let Some(o) = body.as_object_mut()
                    && n > 0
                {
                    o.insert("rows".into(), Value::Array(chunk));
                }
                self.push_entry(db, tenant, now_ms, kind, &body)?
            } else {
                self.push_entry(db, tenant, now_ms, kind, &json!({"tenant": tenant, "continues": first, "rows": chunk}))?
            };
            for b in rows.by_ref().take(n) {
                self.bindings.push((b.key(), b, carried.0));
            }
            last = carried;
        }
        Ok(last)
    }

    /// Check a row the writer read (`None`: no row) against this group's bindings and the
    /// committed state.
    fn check(&self, state: &StateIndex, key: &RowKey, digest: Option<&RowDigest>) -> Check {
        if let Some((_, b, entry)) = self.bindings.iter().rev().find(|(k, _, _)| k == key) {
            return match (&b.digest, digest) {
                (None, None) => Check::Ok,
                (Some(a), Some(d)) if a == d => Check::Ok,
                (Some(_), Some(_)) => Check::Differs { entry: *entry },
                (Some(_), None) => Check::Missing { entry: *entry },
                (None, Some(_)) => Check::Unbound,
            };
        }
        state.check(key, digest)
    }

    /// Whether a row is bound (by this group or the committed state), whatever the database
    /// holds: a deleted row still exists for every uniqueness check.
    fn exists(&self, state: &StateIndex, key: &RowKey) -> bool {
        !matches!(self.check(state, key, None), Check::Ok)
    }

    /// Read a bound row the change depends on and check it against the log; a row that does
    /// not match is never built upon (so a tampered row cannot be laundered into a new
    /// binding).
    fn read_verified<R: BoundRow>(&self, db: &dyn Db, state: &StateIndex, sql_where: &str, args: &[crate::db::Arg<'_>], key: &RowKey) -> Result<Option<R>, CommitError> {
        let query = format!("SELECT {} FROM {} WHERE {sql_where}", R::COLUMNS, R::TABLE.name());
        let row: Option<R> = query_opt(db, &query, args, R::from_cols).map_err(sql)?;
        match self.check(state, key, row.as_ref().map(BoundRow::digest).as_ref()) {
            Check::Ok => Ok(row),
            bad => Err(CommitError::Tampered(format!("{} row {key:?}: {}", R::TABLE.name(), bad.reason()))),
        }
    }
}

pub(crate) fn sql(e: DbError) -> CommitError {
    CommitError::Storage(e.message)
}

fn to_json<T: serde::Serialize>(v: &T) -> Result<String, CommitError> {
    serde_json::to_string(v).map_err(|e| CommitError::Storage(e.to_string()))
}

fn i64_of(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

fn embedding_bytes(e: &[f32], dims: Option<usize>) -> Result<Vec<u8>, CommitError> {
    if e.is_empty() || e.len() > EMBEDDING_DIMS_MAX || e.iter().any(|x| !x.is_finite()) {
        return Err(CommitError::BadEmbedding(format!("{} dimensions (1..={EMBEDDING_DIMS_MAX}, finite)", e.len())));
    }
    if let Some(d) = dims
        && d != e.len()
    {
        return Err(CommitError::BadEmbedding(format!("{} dimensions, but this store holds {d}-dimensional vectors", e.len())));
    }
    if e.iter().all(|x| *x == 0.0) {
        return Err(CommitError::BadEmbedding("the zero vector has no direction".into()));
    }
    Ok(e.iter().flat_map(|x| x.to_le_bytes()).collect())
}

fn item_key(tenant: &str, id: &ItemId) -> RowKey {
    row_key(Table::Items, tenant, &[&id.to_string()])
}

/// Insert an admitted item (its row, vector, edges) and log its write entry.
fn insert_item(db: &dyn Db, state: &StateIndex, now_ms: u64, write: &AdmittedWrite, embedding: &Option<Vec<f32>>, p: &mut Pending) -> Result<(u64, Hash), CommitError> {
    let item = write.item();
    let tenant = item.tenant().as_str();
    debug_assert!(p.chains.contains_key(tenant), "the tenant's log is begun");
    let exists = || CommitError::ItemExists(item.id().to_string());
    // An id is never reused: not while its row exists (or the log says it does), not after it
    // was erased.
    if p.exists(state, &item_key(tenant, &item.id())) || p.exists(state, &row_key(Table::Erased, tenant, &[&item.id().to_string()])) {
        return Err(exists());
    }
    let erased: Option<i64> = query_opt(db, "SELECT 1 FROM erased WHERE id = ?1", crate::args![item.id().as_bytes().as_slice()], |r| r.int(0)).map_err(sql)?;
    if erased.is_some() {
        return Err(exists());
    }
    let emb = embedding.as_deref().map(|e| embedding_bytes(e, p.dims)).transpose()?;
    let next = p.next(tenant);
    let vseq = match (&emb, embedding) {
        (Some(_), Some(e)) => {
            let seq = match db.insert_vector(item.id().as_bytes().as_slice(), tenant, item.namespace().as_str(), next) {
                Err(e) if e.constraint => return Err(exists()),
                Err(e) => return Err(sql(e)),
                Ok(seq) => seq,
            };
            if p.dims.is_none() {
                db.record_dims(e.len()).map_err(sql)?;
                p.dims = Some(e.len());
            }
            p.vectors.push(NewVector {
                seq,
                id: item.id(),
                tenant: item.tenant().clone(),
                namespace: item.namespace().clone(),
                embedding: e.clone(),
                scope: item.scope().clone(),
                audience: item.audience().cloned(),
                status: item.status(),
            });
            Some(i64_of(seq))
        }
        _ => None,
    };
    let row = ItemRow {
        id: item.id().as_bytes().to_vec(),
        tenant: tenant.to_owned(),
        namespace: item.namespace().as_str().to_owned(),
        record: to_json(item)?,
        digest: item.identity_digest().to_vec(),
        log_index: i64_of(next),
        created_ms: i64::try_from(item.created_ms()).unwrap_or(i64::MAX),
        version: i64_of(next),
        vseq,
        emb_digest: emb.as_deref().map(|b| embedding_digest(b).to_vec()),
    };
    let r = db.execute(
        "INSERT INTO items(id, tenant, namespace, record, digest, log_index, embedding, created_ms, version, vseq, emb_digest)
         VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
        crate::args![row.id, row.tenant, row.namespace, row.record, row.digest, row.log_index, emb, row.created_ms, row.version, row.vseq, row.emb_digest],
    );
    match r {
        Err(e) if e.constraint => return Err(exists()),
        Err(e) => return Err(sql(e)),
        Ok(_) => {}
    }
    db.index_text(&row.id, item.content()).map_err(sql)?;
    if !item.parents().is_empty() {
        // One statement for every edge (at most `PARENTS_MAX`): a round trip per write, not
        // per parent, on a networked database.
        let child = item.id();
        let mut args: Vec<Arg<'_>> = vec![Arg::Blob(child.as_bytes().as_slice())];
        let mut tuples = Vec::with_capacity(item.parents().len());
        for (n, parent) in item.parents().iter().enumerate() {
            tuples.push(format!("(?1, ?{}, ?{})", 2 * n + 2, 2 * n + 3));
            args.push(Arg::Blob(parent.id.as_bytes().as_slice()));
            args.push(Arg::Text(parent.kind.as_str()));
        }
        db.execute(&format!("INSERT INTO edges(child, parent, kind) VALUES {} ON CONFLICT DO NOTHING", tuples.join(", ")), &args).map_err(sql)?;
    }
    let kind = match item.route() {
        Route::Summary => EntryKind::Derive,
        Route::ToolObservation => EntryKind::ToolCall,
        _ => EntryKind::Write,
    };
    p.push(
        db,
        tenant,
        now_ms,
        kind,
        &json!({
            "tenant": item.tenant(), "id": item.id(), "namespace": item.namespace(), "writer": item.writer(),
            "origin": item.origin(), "label": item.label(), "route": item.route(), "parents": item.parents(),
            "status": item.status(), "digest": hex::encode(item.identity_digest()),
        }),
        vec![row.binding()],
    )
}

/// Compare-and-set one item row: read it (checked against the log), refuse unless it is still
/// at `expected` (the version the gate read), replace its record with `change(old record)`
/// and move its version to the index of the entry about to be logged. Returns the new row.
fn cas_item(
    db: &dyn Db,
    state: &StateIndex,
    p: &Pending,
    tenant: &TenantId,
    id: &ItemId,
    expected: u64,
    change: impl FnOnce(&str) -> Result<String, CommitError>,
) -> Result<ItemRow, CommitError> {
    let key = item_key(tenant.as_str(), id);
    let row: Option<ItemRow> = p.read_verified(db, state, "id = ?1 AND tenant = ?2", crate::args![id.as_bytes().as_slice(), tenant.as_str()], &key)?;
    let Some(mut row) = row else { return Err(CommitError::ItemMissing(id.to_string())) };
    if u64::try_from(row.version).ok() != Some(expected) {
        return Err(CommitError::Conflict { id: id.to_string() });
    }
    row.record = change(&row.record)?;
    row.version = i64_of(p.next(tenant.as_str()));
    db.execute("UPDATE items SET record = ?1, version = ?2 WHERE id = ?3 AND tenant = ?4", crate::args![row.record, row.version, row.id, row.tenant])
        .map_err(sql)?;
    Ok(row)
}

/// Store an item's changed status or scope (identity unchanged) if its row is still at the
/// version the gate read, queue the index catalog's matching change (applied once the
/// transaction commits), and log the change: `fields` plus the item's tenant, id, status and
/// identity digest.
fn access_changed(db: &dyn Db, state: &StateIndex, p: &mut Pending, now_ms: u64, kind: EntryKind, item: &MemoryItem, fields: Value) -> Result<(u64, Hash), CommitError> {
    let record = to_json(item)?;
    let row = cas_item(db, state, p, item.tenant(), &item.id(), item.version(), |_| Ok(record))?;
    if let Some(seq) = row.vseq {
        let seq = u64::try_from(seq).map_err(|_| CommitError::Storage("negative vector sequence".into()))?;
        p.access.push(AccessChange {
            seq,
            tenant: item.tenant().clone(),
            namespace: item.namespace().clone(),
            scope: item.scope().clone(),
            audience: item.audience().cloned(),
            status: item.status(),
            erased: false,
        });
    }
    let mut body = fields;
    if let Some(o) = body.as_object_mut() {
        o.insert("tenant".into(), json!(item.tenant()));
        o.insert("id".into(), json!(item.id()));
        o.insert("status".into(), json!(item.status()));
        o.insert("digest".into(), json!(hex::encode(item.identity_digest())));
    }
    p.push(db, item.tenant().as_str(), now_ms, kind, &body, vec![row.binding()])
}

/// The tenant whose log records a mutation.
pub fn tenant_of(m: &Mutation) -> &TenantId {
    match m {
        Mutation::Principal(p) => &p.tenant,
        Mutation::Item { write, .. } => write.item().tenant(),
        Mutation::Update { update, .. } => update.write().item().tenant(),
        Mutation::Attestation(a) => &a.attestation().tenant,
        Mutation::GrantIssued(g) => &g.grant.tenant,
        Mutation::Revocation(r) => r.item().tenant(),
        Mutation::Promotion(p) => p.item().tenant(),
        Mutation::Hold(h) => h.item().tenant(),
        Mutation::SessionTaint { tenant, .. }
        | Mutation::Erasure { tenant, .. }
        | Mutation::Feedback { tenant, .. }
        | Mutation::GateDecision { tenant, .. }
        | Mutation::Lineage { tenant, .. }
        | Mutation::ElevationWithdrawal { tenant, .. }
        | Mutation::Decision { tenant, .. } => tenant,
    }
}

fn apply(db: &dyn Db, logs: &Logs, state: &StateIndex, now_ms: u64, m: &Mutation, p: &mut Pending) -> Result<Receipt, CommitError> {
    let t = tenant_of(m).as_str();
    let next = p.begin(db, logs, now_ms, t)?;
    let (log_index, leaf) = match m {
        Mutation::Principal(pr) => {
            let key = row_key(Table::Principals, pr.tenant.as_str(), &[pr.id.as_str()]);
            if p.exists(state, &key) {
                return Err(CommitError::PrincipalExists(pr.id.to_string()));
            }
            let row = PrincipalRow { tenant: pr.tenant.as_str().to_owned(), id: pr.id.as_str().to_owned(), record: to_json(pr)?, log_index: i64_of(next) };
            let r = db.execute("INSERT INTO principals(tenant, id, record, log_index) VALUES(?1, ?2, ?3, ?4)", crate::args![row.tenant, row.id, row.record, row.log_index]);
            match r {
                Err(e) if e.constraint => return Err(CommitError::PrincipalExists(pr.id.to_string())),
                Err(e) => return Err(sql(e)),
                Ok(_) => {}
            }
            p.push(db, t, now_ms, EntryKind::Principal, &json!({"tenant": pr.tenant, "principal": pr}), vec![row.binding()])?
        }
        Mutation::Item { write, embedding } => insert_item(db, state, now_ms, write, embedding, p)?,
        Mutation::Update { update, embedding } => {
            let old = update.superseded();
            if old.tenant().as_str() != t {
                return Err(CommitError::Storage("an update spans two tenants".into()));
            }
            let r = insert_item(db, state, now_ms, update.write(), embedding, p)?;
            access_changed(db, state, p, now_ms, EntryKind::Revocation, old, json!({"superseded_by": old.superseded_by()}))?;
            r
        }
        Mutation::Attestation(a) => {
            let a = a.attestation();
            let row = AttestationRow { tenant: a.tenant.as_str().to_owned(), key: a.key.clone(), record: to_json(a)?, log_index: i64_of(next) };
            db.execute("INSERT INTO attestations(tenant, key, record, log_index) VALUES(?1, ?2, ?3, ?4)", crate::args![row.tenant, row.key, row.record, row.log_index])
                .map_err(sql)?;
            let body = OpSeal::new(db, t, a.sources.clone())?.sealed(json!(a), t, ATTESTATION_SEALED)?;
            p.push(db, t, now_ms, EntryKind::Attestation, &body, vec![row.binding()])?
        }
        Mutation::GrantIssued(g) => {
            let gr = &g.grant;
            p.push(
                db,
                t,
                now_ms,
                EntryKind::GrantIssued,
                &json!({"tenant": gr.tenant, "user": gr.user, "tool": gr.tool, "key": gr.key, "value": gr.value, "amount": gr.amount,
                        "nonce": gr.nonce_hex(), "expires_ms": gr.expires_ms, "signature": hex::encode(g.signature)}),
                Vec::new(),
            )?
        }
        Mutation::SessionTaint { tenant, principal, session, observed } => {
            let key = row_key(Table::Sessions, tenant.as_str(), &[principal.as_str(), session.as_str()]);
            let existing: Option<SessionRow> = p.read_verified(
                db,
                state,
                "tenant = ?1 AND principal = ?2 AND session = ?3",
                crate::args![tenant.as_str(), principal.as_str(), session.as_str()],
                &key,
            )?;
            // The row only falls: meet of the stored floor and the new one, witnesses merged.
            // The ceiling only narrows: intersection of the stored readers and the new ones.
            let mut merged = StoredSession { floor: observed.floor(), witnesses: observed.witnesses().to_vec(), readers: observed.readers().clone(), overflow: observed.overflowed() };
            if let Some(old) = existing {
                let old: StoredSession = serde_json::from_str(&old.record).map_err(|e| CommitError::Storage(format!("stored session is corrupt: {e}")))?;
                merged.floor = merged.floor.min(old.floor);
                merged.readers = merged.readers.intersect(&old.readers);
                merged.overflow |= old.overflow;
                for w in old.witnesses {
                    if !merged.witnesses.contains(&w) && merged.witnesses.len() < memwarden_core::session::WITNESSES_MAX {
                        merged.witnesses.push(w);
                    }
                }
            }
            let row = SessionRow {
                tenant: tenant.as_str().to_owned(),
                principal: principal.as_str().to_owned(),
                session: session.as_str().to_owned(),
                record: to_json(&merged)?,
                log_index: i64_of(next),
            };
            db.execute("INSERT INTO sessions(tenant, principal, session, record, log_index) VALUES(?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT(tenant, principal, session) DO UPDATE SET record = excluded.record, log_index = excluded.log_index", crate::args![row.tenant, row.principal, row.session, row.record, row.log_index])
            .map_err(sql)?;
            p.push(
                db,
                t,
                now_ms,
                EntryKind::SessionTaint,
                &json!({"tenant": tenant, "principal": principal, "session": session, "floor": merged.floor, "witnesses": merged.witnesses, "readers": merged.readers, "overflow": merged.overflow}),
                vec![row.binding()],
            )?
        }
        Mutation::Revocation(r) => access_changed(db, state, p, now_ms, EntryKind::Revocation, r.item(), json!({"by": r.by(), "reason": r.reason()}))?,
        Mutation::Promotion(pr) => access_changed(
            db,
            state,
            p,
            now_ms,
            EntryKind::Promotion,
            pr.item(),
            json!({"by": pr.by(), "from": pr.from(), "readers": pr.item().scope().readers}),
        )?,
        Mutation::Hold(h) => access_changed(db, state, p, now_ms, EntryKind::Decision, h.item(), json!({"hold": {"by": h.by(), "reason": h.reason()}}))?,
        Mutation::Erasure { tenant, ids, event } => {
            if ids.is_empty() || ids.len() > crate::ERASE_IDS_MAX {
                return Err(CommitError::Storage(format!("an erasure names 1..={} memories", crate::ERASE_IDS_MAX)));
            }
            let text = to_json(event)?;
            if text.len() > crate::LINEAGE_EVENT_BYTES_MAX {
                return Err(CommitError::LineageEventTooLarge(text.len()));
            }
            let mut rows = Vec::with_capacity(ids.len() * 2 + 1);
            for id in ids {
                let key = item_key(tenant.as_str(), id);
                let row: Option<ItemRow> = p.read_verified(db, state, "id = ?1 AND tenant = ?2", crate::args![id.as_bytes().as_slice(), tenant.as_str()], &key)?;
                let Some(row) = row else {
                    return Err(CommitError::ItemMissing(id.to_string()));
                };
                // The tombstone keeps the identity and lineage fields, never the text.
                let mut tomb: Value = serde_json::from_str(&row.record).map_err(|e| CommitError::Storage(format!("stored item {id}: {e}")))?;
                if let Some(o) = tomb.as_object_mut() {
                    o.insert("content".into(), Value::String(crate::TOMBSTONE_CONTENT.into()));
                    o.insert("metadata".into(), Value::Object(serde_json::Map::new()));
                }
                let erased = ErasedRow {
                    id: row.id.clone(),
                    tenant: row.tenant.clone(),
                    namespace: row.namespace.clone(),
                    tombstone: to_json(&tomb)?,
                    item_log_index: row.log_index,
                    log_index: i64_of(next),
                };
                db.execute("INSERT INTO erased(id, tenant, namespace, tombstone, item_log_index, log_index) VALUES(?1, ?2, ?3, ?4, ?5, ?6)", crate::args![erased.id, erased.tenant, erased.namespace, erased.tombstone, erased.item_log_index, erased.log_index])
                    .map_err(sql)?;
                db.execute("DELETE FROM vectors WHERE id = ?1", crate::args![row.id]).map_err(sql)?;
                db.unindex_text(&row.id).map_err(sql)?;
                db.execute("DELETE FROM items WHERE id = ?1", crate::args![row.id]).map_err(sql)?;
                if let Some(seq) = row.vseq {
                    let namespace = Namespace::new(&row.namespace).map_err(|e| CommitError::Storage(e.to_string()))?;
                    let seq = u64::try_from(seq).map_err(|_| CommitError::Storage("negative vector sequence".into()))?;
                    let scope = Scope { owner: PrincipalId::new("erased").map_err(|e| CommitError::Storage(e.to_string()))?, readers: Readers::Only(Default::default()), visibility: Visibility::Revoked };
                    p.access.push(AccessChange { seq, tenant: tenant.clone(), namespace, scope, audience: None, status: Status::Revoked, erased: true });
                }
                shred(db, t, id)?;
                rows.push(Binding::deleted(Table::Items, tenant.as_str(), vec![id.to_string()]));
                rows.push(erased.binding());
            }
            rows.extend(drop_elevations_from(db, state, p, tenant, ids)?);
            rows.extend(drop_attestations_from(db, state, p, tenant, ids)?);
            // An answer kept for replay may hold the text (not log state: no binding).
            crate::idempotency::forget_answers_naming(db, t, ids, &p.idempotency_mac_key).map_err(sql)?;
            let lineage = LineageRow { tenant: tenant.as_str().to_owned(), event: text, log_index: i64_of(next) };
            db.execute("INSERT INTO lineage_events(tenant, event, log_index) VALUES(?1, ?2, ?3)", crate::args![lineage.tenant, lineage.event, lineage.log_index])
                .map_err(sql)?;
            rows.push(lineage.binding());
            p.push(db, t, now_ms, EntryKind::Erasure, &json!({"tenant": tenant, "event": event, "erased": ids}), rows)?
        }
        Mutation::Feedback { tenant, actor, guards, reputations, record } => {
            let mut rows = Vec::with_capacity(guards.len() + reputations.len());
            for (id, expected, guard) in guards {
                let row = cas_item(db, state, p, tenant, id, *expected, |rec| {
                    // The guard state is not part of the identity digest: the record still verifies.
                    let mut v: Value = serde_json::from_str(rec).map_err(|e| CommitError::Storage(format!("stored item {id}: {e}")))?;
                    if let Some(o) = v.as_object_mut() {
                        o.insert("guard".into(), serde_json::to_value(guard).map_err(|e| CommitError::Storage(e.to_string()))?);
                    }
                    let text = to_json(&v)?;
                    // Refuse a state the validating decoder would not read back.
                    serde_json::from_str::<MemoryItem>(&text).map_err(|e| CommitError::Storage(format!("guard update for {id}: {e}")))?;
                    Ok(text)
                })?;
                rows.push(row.binding());
            }
            for (who, value) in reputations {
                if !value.is_finite() || !(0.0..=1.0).contains(value) {
                    return Err(CommitError::Storage(format!("reputation {value} of {who} is outside [0, 1]")));
                }
                let row = ReputationRow { tenant: tenant.as_str().to_owned(), principal: who.as_str().to_owned(), value: *value, log_index: i64_of(next) };
                db.execute("INSERT INTO reputation(tenant, principal, value, log_index) VALUES(?1, ?2, ?3, ?4)
                     ON CONFLICT(tenant, principal) DO UPDATE SET value = excluded.value, log_index = excluded.log_index", crate::args![row.tenant, row.principal, row.value, row.log_index])
                .map_err(sql)?;
                rows.push(row.binding());
            }
            p.push(db, t, now_ms, EntryKind::Feedback, &json!({"tenant": tenant, "actor": actor, "feedback": record}), rows)?
        }
        Mutation::GateDecision { tenant, actor, decision } => {
            let text = to_json(decision)?;
            if text.len() > crate::LINEAGE_EVENT_BYTES_MAX {
                return Err(CommitError::LineageEventTooLarge(text.len()));
            }
            p.push(db, t, now_ms, EntryKind::Decision, &json!({"tenant": tenant, "actor": actor, "gate": decision}), Vec::new())?
        }
        Mutation::Lineage { tenant, event } => {
            let text = to_json(event)?;
            if text.len() > crate::LINEAGE_EVENT_BYTES_MAX {
                return Err(CommitError::LineageEventTooLarge(text.len()));
            }
            let row = LineageRow { tenant: tenant.as_str().to_owned(), event: text, log_index: i64_of(next) };
            db.execute("INSERT INTO lineage_events(tenant, event, log_index) VALUES(?1, ?2, ?3)", crate::args![row.tenant, row.event, row.log_index])
                .map_err(sql)?;
            p.push(db, t, now_ms, EntryKind::Lineage, &json!({"tenant": tenant, "event": event}), vec![row.binding()])?
        }
        Mutation::ElevationWithdrawal { tenant, by, key, value, reason } => {
            let row_key_of = row_key(Table::Elevations, tenant.as_str(), &[key, value]);
            if !p.exists(state, &row_key_of) {
                return Err(CommitError::Storage(format!("no elevation of {key}={value} to withdraw")));
            }
            let old: Option<ElevationRow> = p.read_verified(db, state, "tenant = ?1 AND key = ?2 AND value = ?3", crate::args![tenant.as_str(), key.as_str(), value.as_str()], &row_key_of)?;
            let evidence = old.and_then(|r| serde_json::from_str::<Elevation>(&r.record).ok()).map(|e| e.evidence).unwrap_or_default();
            let seal = OpSeal::new(db, t, evidence)?;
            let n = db.execute("DELETE FROM elevations WHERE tenant = ?1 AND key = ?2 AND value = ?3", crate::args![tenant.as_str(), key.as_str(), value.as_str()]).map_err(sql)?;
            if n != 1 {
                return Err(CommitError::Storage(format!("the elevation row of {key}={value} is missing")));
            }
            let rows = vec![Binding::deleted(Table::Elevations, tenant.as_str(), vec![key.clone(), value.clone()])];
            let body = seal.sealed(json!({"tenant": tenant, "actor": by, "elevation_withdrawn": {"key": key, "value": value, "reason": reason}}), t, WITHDRAWAL_SEALED)?;
            p.push(db, t, now_ms, EntryKind::Decision, &body, rows)?
        }
        Mutation::Decision { actor, tenant, action, outcome } => {
            let mut cited = cited_in(action);
            cited.extend(outcome.new_elevations().iter().flat_map(|e| e.evidence.iter().copied()));
            let seal = OpSeal::new(db, t, cited)?;
            for u in outcome.grant_uses() {
                let g = &u.grant.grant;
                if g.tenant.as_str() != t {
                    return Err(CommitError::Storage("a decision consumes another tenant's grant".into()));
                }
                let key = row_key(Table::GrantsUsed, g.tenant.as_str(), &[&hex::encode(g.nonce)]);
                // The log, not the table, says whether a grant was used: a deleted row does not
                // make it usable again.
                if p.exists(state, &key) {
                    return Err(CommitError::GrantAlreadyUsed(g.nonce_hex()));
                }
                let row = GrantUsedRow { tenant: g.tenant.as_str().to_owned(), nonce: g.nonce.to_vec(), record: to_json(u)?, log_index: i64_of(p.next(t)) };
                let r = db.execute("INSERT INTO grants_used(tenant, nonce, record, log_index) VALUES(?1, ?2, ?3, ?4)", crate::args![row.tenant, row.nonce, row.record, row.log_index]);
                match r {
                    Err(e) if e.constraint => return Err(CommitError::GrantAlreadyUsed(g.nonce_hex())),
                    Err(e) => return Err(sql(e)),
                    Ok(_) => {}
                }
                let body = seal.sealed(json!({"tenant": g.tenant, "nonce": g.nonce_hex(), "user": g.user, "tool": g.tool, "key": g.key, "value": g.value, "amount": g.amount}), t, GRANT_SEALED)?;
                p.push(db, t, now_ms, EntryKind::GrantUsed, &body, vec![row.binding()])?;
            }
            for e in outcome.new_elevations() {
                if e.tenant.as_str() != t {
                    return Err(CommitError::Storage("a decision elevates a value of another tenant".into()));
                }
                let key = row_key(Table::Elevations, e.tenant.as_str(), &[&e.key, &e.value.canonical]);
                let mut rows = Vec::new();
                if !p.exists(state, &key) {
                    let row = ElevationRow {
                        tenant: e.tenant.as_str().to_owned(),
                        key: e.key.clone(),
                        value: e.value.canonical.clone(),
                        record: to_json(e)?,
                        log_index: i64_of(p.next(t)),
                    };
                    let n = db.execute("INSERT INTO elevations(tenant, key, value, record, log_index) VALUES(?1, ?2, ?3, ?4, ?5) ON CONFLICT DO NOTHING", crate::args![row.tenant, row.key, row.value, row.record, row.log_index])
                        .map_err(sql)?;
                    if n == 1 {
                        rows.push(row.binding());
                    }
                }
                let body = seal.sealed(json!(e), t, ELEVATION_SEALED)?;
                p.push(db, t, now_ms, EntryKind::Elevation, &body, rows)?;
            }
            let body = seal.sealed(json!({"tenant": tenant, "actor": actor, "action": action, "verdict": outcome.verdict()}), t, DECISION_SEALED)?;
            p.push(db, t, now_ms, EntryKind::Decision, &body, Vec::new())?
        }
    };
    Ok(Receipt { log_index, leaf })
}

/// The fields of a decision's entry that may hold a memory's values (issue 35.7): the action's
/// values and amount, and the verdict's cause, its rule's reason or cause, pushed values, grant requests and layer
/// summaries.
const DECISION_SEALED: &[&str] = &["/action/values", "/action/amount", "/verdict/cause", "/verdict/rule/reason", "/verdict/rule/cause", "/verdict/pushed", "/verdict/ask", "/verdict/layers"];
/// The value fields of a spent grant's entry.
const GRANT_SEALED: &[&str] = &["/value", "/amount"];
/// The value of an attestation's entry (linked to the memories it was derived from).
const ATTESTATION_SEALED: &[&str] = &["/value"];
/// The value of an elevation's entry.
const ELEVATION_SEALED: &[&str] = &["/value"];
/// The value and reason of an elevation withdrawal's entry.
const WITHDRAWAL_SEALED: &[&str] = &["/elevation_withdrawn/value", "/elevation_withdrawn/reason"];
/// Most memories one seal is linked to.
const SEAL_LINKS_MAX: usize = 4096;

/// One operation's seal ([`crate::seal`]): a fresh key kept in `seals`, linked in `seal_links`
/// to the memories the operation cited, so erasing any of them shreds what the operation's
/// entries keep of their values.
struct OpSeal {
    id: crate::seal::SealId,
    key: crate::seal::SealKey,
}

impl OpSeal {
    fn new(db: &dyn Db, tenant: &str, mut cited: Vec<ItemId>) -> Result<Self, CommitError> {
        cited.sort();
        cited.dedup();
        if cited.len() > SEAL_LINKS_MAX {
            return Err(CommitError::Storage(format!("an operation citing {} memories (at most {SEAL_LINKS_MAX})", cited.len())));
        }
        let (id, key) = crate::seal::fresh().map_err(|e| CommitError::Storage(e.to_string()))?;
        db.execute("INSERT INTO seals(tenant, seal, key) VALUES(?1, ?2, ?3)", crate::args![tenant, id.as_slice(), key.as_slice()]).map_err(sql)?;
        for item in &cited {
            db.execute("INSERT INTO seal_links(tenant, item, seal) VALUES(?1, ?2, ?3) ON CONFLICT DO NOTHING", crate::args![tenant, item.as_bytes().as_slice(), id.as_slice()])
                .map_err(sql)?;
        }
        Ok(Self { id, key })
    }

    /// `body` with the fields at `paths` sealed.
    fn sealed(&self, mut body: Value, tenant: &str, paths: &[&str]) -> Result<Value, CommitError> {
        crate::seal::seal_paths(&mut body, tenant, &self.id, &self.key, paths).map_err(|e| CommitError::Storage(e.to_string()))?;
        debug_assert!(paths.iter().all(|p| body.pointer(p).is_none_or(|v| v.is_null() || v.get("sealed").is_some())));
        Ok(body)
    }
}

/// The tenant's rows of `R` whose record names any of `ids` (a text match, each row once, each
/// checked against the log; the caller checks the record's fields).
fn rows_naming<R: BoundRow>(db: &dyn Db, state: &StateIndex, p: &Pending, tenant: &TenantId, ids: &[ItemId]) -> Result<Vec<R>, CommitError> {
    let query = format!("SELECT {} FROM {} WHERE tenant = ?1 AND record LIKE ?2", R::COLUMNS, R::TABLE.name());
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::new();
    for id in ids {
        let pattern = format!("%{id}%");
        for r in crate::db::query_all(db, &query, crate::args![tenant.as_str(), pattern.as_str()], R::from_cols).map_err(sql)? {
            let key = r.key();
            match p.check(state, &key, Some(&r.digest())) {
                Check::Ok => {}
                bad => return Err(CommitError::Tampered(format!("{} row {key:?}: {}", R::TABLE.name(), bad.reason()))),
            }
            if seen.insert(key) {
                out.push(r);
            }
        }
    }
    debug_assert!(out.len() == seen.len());
    Ok(out)
}

/// Delete the elevations computed from any of the memories `erased` (issue 35.7): they stopped
/// counting with their evidence (issue 34.4), and their rows keep the value. Returns the
/// deletions' bindings (which name the rows by key only, [`Table::opaque`]).
fn drop_elevations_from(db: &dyn Db, state: &StateIndex, p: &Pending, tenant: &TenantId, erased: &[ItemId]) -> Result<Vec<Binding>, CommitError> {
    let mut out = Vec::new();
    for r in rows_naming::<ElevationRow>(db, state, p, tenant, erased)? {
        let e: Elevation = serde_json::from_str(&r.record).map_err(|e| CommitError::Storage(format!("stored elevation: {e}")))?;
        if !e.evidence.iter().any(|id| erased.contains(id)) {
            continue;
        }
        db.execute("DELETE FROM elevations WHERE tenant = ?1 AND key = ?2 AND value = ?3", crate::args![tenant.as_str(), r.key.as_str(), r.value.as_str()]).map_err(sql)?;
        out.push(Binding::deleted(Table::Elevations, tenant.as_str(), vec![r.key.clone(), r.value.clone()]));
    }
    debug_assert!(out.iter().all(|b| b.digest.is_none()));
    Ok(out)
}

/// Delete the attestations derived from any of the memories `erased` (issue 35.7): an
/// attestation declared as derived from a memory goes with it, as a derived memory does, and its
/// row keeps the value. Returns the deletions' bindings.
fn drop_attestations_from(db: &dyn Db, state: &StateIndex, p: &Pending, tenant: &TenantId, erased: &[ItemId]) -> Result<Vec<Binding>, CommitError> {
    let mut out = Vec::new();
    for r in rows_naming::<AttestationRow>(db, state, p, tenant, erased)? {
        let a: Attestation = serde_json::from_str(&r.record).map_err(|e| CommitError::Storage(format!("stored attestation: {e}")))?;
        if !a.sources.iter().any(|id| erased.contains(id)) {
            continue;
        }
        db.execute("DELETE FROM attestations WHERE tenant = ?1 AND log_index = ?2", crate::args![tenant.as_str(), r.log_index]).map_err(sql)?;
        out.push(Binding::deleted(Table::Attestations, tenant.as_str(), vec![r.log_index.to_string()]));
    }
    debug_assert!(out.iter().all(|b| b.digest.is_none()));
    Ok(out)
}

/// The memories a decision's action summary cites: its context and its values' sources.
fn cited_in(action: &Value) -> Vec<ItemId> {
    let ids = |v: Option<&Value>| -> Vec<ItemId> { v.and_then(Value::as_array).map(|a| a.iter().filter_map(|x| serde_json::from_value(x.clone()).ok()).collect()).unwrap_or_default() };
    let mut out = ids(action.get("context"));
    for v in action.get("values").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default() {
        out.extend(ids(v.get("sources")));
    }
    out
}

/// Delete the key of every seal linked to the memory `id`, and its links (an erasure): what
/// those operations' entries keep of their values no longer opens.
fn shred(db: &dyn Db, tenant: &str, id: &ItemId) -> Result<(), CommitError> {
    let raw = id.as_bytes();
    db.execute("DELETE FROM seals WHERE tenant = ?1 AND seal IN (SELECT seal FROM seal_links WHERE tenant = ?1 AND item = ?2)", crate::args![tenant, raw.as_slice()]).map_err(sql)?;
    db.execute("DELETE FROM seal_links WHERE tenant = ?1 AND item = ?2", crate::args![tenant, raw.as_slice()]).map_err(sql)?;
    Ok(())
}

/// Apply `mutations` inside one savepoint, all or nothing: the first error rolls back every
/// one of them (rows, bindings, log entries, vectors, catalog changes) and is returned.
pub fn apply_all(db: &dyn Db, logs: &Logs, state: &StateIndex, now_ms: u64, mutations: &[Mutation], p: &mut Pending) -> Result<Result<Vec<Receipt>, CommitError>, DbError> {
    db.execute("SAVEPOINT op", &[])?;
    let mark = p.mark();
    let mut receipts = Vec::with_capacity(mutations.len());
    for m in mutations {
        match apply(db, logs, state, now_ms, m, p) {
            Ok(r) => receipts.push(r),
            Err(e) => {
                db.execute("ROLLBACK TO op; RELEASE op", &[])?;
                p.rollback(mark);
                return Ok(Err(e));
            }
        }
    }
    db.execute("RELEASE op", &[])?;
    Ok(Ok(receipts))
}

/// One caller's mutations within a group commit.
pub(crate) struct Group {
    now_ms: u64,
    mutations: Vec<Mutation>,
    atomic: bool,
    tag: Option<crate::IdempotencyTag>,
    reply: Reply,
}

pub(crate) fn writer_loop(mut conn: Connection, rx: mpsc::Receiver<Job>, shared: &Shared) {
    // Checkpoints carry the latest time a caller passed in (the store reads no clock of its own).
    let mut last_now_ms = shared.last_time_ms.load(std::sync::atomic::Ordering::Relaxed);
    while let Ok(first) = rx.recv() {
        let mut jobs = vec![first];
        let mut count = 0usize;
        while count < shared.config.group_commit_max {
            match rx.try_recv() {
                Ok(j) => {
                    if let Job::Commit { mutations, .. } = &j {
                        count += mutations.len();
                    }
                    jobs.push(j);
                }
                Err(_) => break,
            }
        }
        let mut commits = Vec::new();
        let mut checkpoints = Vec::new();
        let mut answers = Vec::new();
        for j in jobs {
            match j {
                Job::Commit { now_ms, mutations, atomic, tag, reply } => {
                    last_now_ms = last_now_ms.max(now_ms);
                    commits.push(Group { now_ms, mutations, atomic, tag, reply });
                }
                Job::Answer { tag, status, body, reply } => answers.push((tag, status, body, reply)),
                Job::Checkpoint { tenant, now_ms, reply } => {
                    last_now_ms = last_now_ms.max(now_ms);
                    checkpoints.push((tenant, reply));
                }
            }
        }
        if !commits.is_empty() {
            commit_group(&mut conn, shared, commits, last_now_ms);
            if shared.durability == Durability::Durable
                && let Err(e) = shared.vectors.save(false)
            {
                eprintln!("memwarden-store: periodic save of a vector index failed (replayed at the next open): {e}");
            }
        }
        // Answers come after the commits they answer (a caller sends one only after its commit).
        if !answers.is_empty() {
            let mac_key = crate::idempotency::mac_key(&shared.key);
            for (tag, status, body, reply) in answers {
                let r = crate::idempotency::answer(&SqliteDb(&conn), &tag, status, &body, &mac_key).map_err(|e| e.to_string());
                let _ = reply.send(r);
            }
        }
        // Checkpoints that are due (every `checkpoint_every` entries of a log).
        let every = shared.config.checkpoint_every;
        if every > 0 {
            let due: Vec<String> = {
                let logs = read_guard(&shared.logs);
                let mut due: Vec<String> = logs.tenants.iter().filter(|(_, t)| t.log.len() >= t.last_checkpoint + every).map(|(n, _)| n.clone()).collect();
                if logs.global.len() >= logs.global.last_checkpoint + every {
                    due.push(GLOBAL.to_owned());
                }
                due
            };
            for t in due {
                if let Err(e) = write_checkpoint(&conn, shared, &t, last_now_ms) {
                    eprintln!("memwarden-store: a periodic checkpoint failed: {e}");
                }
            }
        }
        for (tenant, reply) in checkpoints {
            let res = match tenant {
                Some(t) => write_checkpoint(&conn, shared, &t, last_now_ms),
                None => checkpoint_all(&conn, shared, last_now_ms),
            };
            let _ = reply.send(res.map_err(|e| e.to_string()));
        }
    }
    // Queue closed: save the vector indexes (a crash instead is recovered by replay at open).
    if shared.durability == Durability::Durable
        && let Err(e) = shared.vectors.save(true)
    {
        eprintln!("memwarden-store: saving the vector indexes failed (they are rebuilt at the next open): {e}");
    }
    // Sign final checkpoints so a clean close leaves every log anchored.
    let _ = checkpoint_all(&conn, shared, last_now_ms);
}

/// Checkpoint every tenant log with entries since its last checkpoint, then the global view
/// (whose checkpoint is returned).
fn checkpoint_all(conn: &Connection, shared: &Shared, now_ms: u64) -> Result<SignedCheckpoint, StoreError> {
    let stale: Vec<String> = read_guard(&shared.logs).tenants.iter().filter(|(_, t)| t.log.len() > t.last_checkpoint).map(|(n, _)| n.clone()).collect();
    for t in stale {
        write_checkpoint(conn, shared, &t, now_ms)?;
    }
    write_checkpoint(conn, shared, GLOBAL, now_ms)
}

/// Sign and store a checkpoint of `tenant`'s log (of the global view for [`GLOBAL`]); a tenant's
/// checkpoint is also its witness.
pub(crate) fn write_checkpoint(conn: &Connection, shared: &Shared, tenant: &str, now_ms: u64) -> Result<SignedCheckpoint, StoreError> {
    let cp = {
        let logs = read_guard(&shared.logs);
        if tenant == GLOBAL {
            logs.global.checkpoint(&shared.key, now_ms)
        } else {
            logs.of(tenant).ok_or_else(|| StoreError::UnknownLog(tenant.to_owned()))?.checkpoint(&shared.key, now_ms)
        }
    };
    let record = serde_json::to_string(&cp).map_err(|e| StoreError::Corrupt(e.to_string()))?;
    conn.execute(
        "INSERT INTO checkpoints(tenant, size, record) VALUES(?1, ?2, ?3) ON CONFLICT(tenant, size) DO UPDATE SET record = excluded.record",
        rusqlite::params![tenant, i64::try_from(cp.checkpoint.size).unwrap_or(i64::MAX), record],
    )?;
    {
        let mut logs = write_guard(&shared.logs);
        if tenant == GLOBAL {
            logs.global.last_checkpoint = cp.checkpoint.size;
        } else if let Some(t) = logs.tenants.get_mut(tenant) {
            t.last_checkpoint = cp.checkpoint.size;
        }
    }
    if tenant != GLOBAL {
        shared.witness(tenant, &cp)?;
    }
    Ok(cp)
}

/// Who signs the recorded heads: the store's key, and the store id the signature names.
#[derive(Clone, Copy)]
pub struct HeadSigner<'a> {
    /// The store's log key.
    pub key: &'a ed25519_dalek::SigningKey,
    /// The store's id.
    pub store_id: &'a str,
}

/// Record each touched tenant log's new (length, head) with the store's signature over it, in
/// the transaction: an entry appended later without the key leaves a head no signature covers.
pub fn set_heads(db: &dyn Db, chains: &HashMap<String, (u64, Hash)>, signer: HeadSigner<'_>) -> Result<(), DbError> {
    for (tenant, (len, head)) in chains {
        debug_assert!(*len > 0, "a touched log has at least its genesis entry");
        let sig = memwarden_log::sign_head(signer.key, signer.store_id, tenant, *len, head);
        db.execute(
            "INSERT INTO heads(tenant, size, head, sig) VALUES(?1, ?2, ?3, ?4) \
             ON CONFLICT(tenant) DO UPDATE SET size = excluded.size, head = excluded.head, sig = excluded.sig",
            crate::args![tenant, i64_of(*len), head.as_slice(), sig.as_slice()],
        )?;
    }
    Ok(())
}

/// A store that has just gained signed heads (its `heads` rows carry none yet) signs each
/// recorded head once, at this open, before verifying. A head beyond its tenant's witness is not
/// signed: those entries were appended after the last commit this store vouched for.
pub fn sign_unsigned_heads(
    db: &dyn Db,
    stored: &mut crate::stored::StoredLogs,
    signer: HeadSigner<'_>,
    witnessed: &HashMap<String, SignedCheckpoint>,
) -> Result<usize, crate::StoreError> {
    let mut signed = 0;
    for (tenant, s) in &mut stored.tenants {
        let Some((size, head)) = s.expected else { continue };
        if s.head_sig.is_some() {
            continue;
        }
        if let Some(w) = witnessed.get(tenant)
            && w.checkpoint.size != size
        {
            let problem = memwarden_log::Problem::UnsignedHead { size, first_bad_after: w.checkpoint.size.min(size) };
            return Err(crate::StoreError::LogTampered(memwarden_log::Problem::InLog { log: tenant.clone(), problem: Box::new(problem) }.to_string()));
        }
        set_heads(db, &HashMap::from([(tenant.clone(), (size, head))]), signer).map_err(|e| crate::StoreError::Corrupt(format!("signing the head of {tenant}: {e:?}")))?;
        s.head_sig = Some(memwarden_log::sign_head(signer.key, signer.store_id, tenant, size, &head).to_vec());
        signed += 1;
    }
    Ok(signed)
}

/// Apply one caller's mutations: all in one savepoint (`atomic`: every receipt, or the one
/// error), or each in its own (each succeeds or fails alone). An `Err` is a database failure
/// that aborts the whole transaction.
pub fn apply_caller(
    db: &dyn Db,
    logs: &Logs,
    state: &StateIndex,
    now_ms: u64,
    mutations: &[Mutation],
    atomic: bool,
    pending: &mut Pending,
) -> Result<Vec<Result<Receipt, CommitError>>, DbError> {
    if mutations.len() > BATCH_MUTATIONS_MAX {
        return Ok(vec![Err(CommitError::BatchTooLarge(mutations.len()))]);
    }
    if atomic {
        return Ok(match apply_all(db, logs, state, now_ms, mutations, pending)? {
            Ok(rs) => rs.into_iter().map(Ok).collect(),
            Err(e) => vec![Err(e)],
        });
    }
    let mut rs = Vec::with_capacity(mutations.len());
    for m in mutations {
        rs.push(match apply_all(db, logs, state, now_ms, std::slice::from_ref(m), pending)? {
            Ok(mut r) => r.pop().ok_or_else(|| CommitError::Storage("a mutation left no receipt".into())),
            Err(e) => Err(e),
        });
    }
    Ok(rs)
}

/// [`apply_caller`] for an atomic caller whose request carries an idempotency key: the key is
/// claimed first, in the same transaction (a key already held answers
/// [`CommitError::IdempotencyKeyUsed`] and applies nothing), and sealed with the operation's
/// receipt; if the operation fails, the claim rolls back with it.
#[allow(clippy::too_many_arguments)]
pub fn apply_tagged(
    db: &dyn Db,
    logs: &Logs,
    state: &StateIndex,
    now_ms: u64,
    mutations: &[Mutation],
    tag: &crate::IdempotencyTag,
    mac_key: &[u8; 32],
    pending: &mut Pending,
) -> Result<Vec<Result<Receipt, CommitError>>, DbError> {
    db.execute("SAVEPOINT idem", &[])?;
    if let Err(e) = crate::idempotency::claim(db, tag, now_ms)? {
        db.execute("ROLLBACK TO idem; RELEASE idem", &[])?;
        return Ok(vec![Err(e)]);
    }
    let rs = apply_caller(db, logs, state, now_ms, mutations, true, pending)?;
    match rs.last() {
        Some(Ok(last)) if rs.iter().all(Result::is_ok) => crate::idempotency::seal(db, tag, now_ms, last.log_index, mac_key)?,
        _ => db.execute("ROLLBACK TO idem", &[]).map(|_| ())?,
    }
    db.execute("RELEASE idem", &[])?;
    Ok(rs)
}

fn commit_group(conn: &mut Connection, shared: &Shared, commits: Vec<Group>, now_ms: u64) {
    let gseq = read_guard(&shared.logs).global.len();
    let mut pending = Pending::new(gseq, shared.vectors.dims(), &shared.store_id, &shared.key.verifying_key().to_bytes(), crate::idempotency::mac_key(&shared.key));
    // Per caller: its receipts in mutation order (for an atomic caller that failed, one error).
    let mut results: Vec<Vec<Result<Receipt, CommitError>>> = Vec::with_capacity(commits.len());
    let outcome = (|| -> Result<(), DbError> {
        conn.execute_batch("BEGIN IMMEDIATE")?;
        let db = SqliteDb(conn);
        {
            let logs = read_guard(&shared.logs);
            let state = read_guard(&shared.state);
            let mac_key = crate::idempotency::mac_key(&shared.key);
            for g in &commits {
                results.push(match &g.tag {
                    Some(tag) => apply_tagged(&db, &logs, &state, g.now_ms, &g.mutations, tag, &mac_key, &mut pending)?,
                    None => apply_caller(&db, &logs, &state, g.now_ms, &g.mutations, g.atomic, &mut pending)?,
                });
            }
        }
        set_heads(&db, &pending.chains, HeadSigner { key: &shared.key, store_id: &shared.store_id })?;
        // While the transaction commits, readers accept a changed row in its old or new state.
        let staged: Vec<(Binding, u64)> = pending.bindings.iter().map(|(_, b, e)| (b.clone(), *e)).collect();
        write_guard(&shared.state).stage(&staged);
        Ok(conn.execute_batch("COMMIT")?)
    })();
    match outcome {
        Ok(()) => {
            {
                let mut state = write_guard(&shared.state);
                for (_, b, entry) in &pending.bindings {
                    state.apply(b, *entry);
                }
                state.unstage();
            }
            {
                let mut logs = write_guard(&shared.logs);
                for (tenant, e, _) in &pending.entries {
                    // The writer is the only appender and linked these entries to each log's head.
                    let appended = logs.tenants.entry(tenant.clone()).or_default().log.append(e);
                    debug_assert!(appended.is_ok(), "writer chain out of step with the log of {tenant}");
                    if let Ok(leaf) = appended {
                        logs.global.push(leaf);
                    }
                }
                debug_assert_eq!(logs.global.len(), pending.gseq);
            }
            // Index before acknowledging, so the writer's next search finds what it wrote. A
            // failure here marks the partition degraded (exact search until the next open
            // rebuilds it); the rows are committed either way.
            if let Some(d) = pending.dims {
                shared.vectors.set_dims(d);
            }
            for v in pending.vectors {
                if let Err(e) = shared.vectors.insert(v) {
                    eprintln!("memwarden-store: vector index insert failed, searching exactly until reopen: {e}");
                }
            }
            for a in pending.access {
                shared.vectors.update_access(a);
            }
            // After an erasure, copy the zeroed pages into the database and empty the WAL, so
            // the erased text survives in no file (best effort: a busy checkpoint is retried by
            // SQLite's automatic checkpoints; the rows are gone from every read either way).
            // (A failed atomic caller's one error pairs with its first mutation: not counted.)
            let erased = commits.iter().zip(&results).any(|(g, rs)| g.mutations.iter().zip(rs).any(|(m, r)| matches!(m, Mutation::Erasure { .. }) && r.is_ok()));
            if erased {
                shared.after_erasure(conn);
            }
            // The witnesses move with every durable group, before anyone hears of it, so a
            // database rolled back to before an acknowledged commit is refused.
            if shared.config.witness_every_commit {
                let touched: Vec<(String, SignedCheckpoint)> = {
                    let logs = read_guard(&shared.logs);
                    pending.chains.keys().filter_map(|t| logs.of(t).map(|l| (t.clone(), l.checkpoint(&shared.key, now_ms)))).collect()
                };
                for (t, cp) in touched {
                    if let Err(e) = shared.witness(&t, &cp) {
                        eprintln!("memwarden-store: writing the witness of {t} failed (rollback detection lags until its next commit): {e}");
                    }
                }
            }
            for (g, rs) in commits.into_iter().zip(results) {
                let _ = g.reply.send(Ok(rs));
            }
        }
        Err(e) => {
            let _ = conn.execute_batch("ROLLBACK");
            write_guard(&shared.state).unstage();
            let msg = format!("commit failed: {e}");
            for g in commits {
                let _ = g.reply.send(Err(msg.clone()));
            }
        }
    }
}
