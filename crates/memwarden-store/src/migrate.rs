//! Schema migrations. Every version this build can open is listed here; a newer one is refused
//! ([`StoreError::Schema`]).
//!
//! | from | to | what changes |
//! | --- | --- | --- |
//! | 1 | 2 | embeddings get index keys (`vectors`) |
//! | 2 | 3 | lineage rows (tables only) |
//! | 3 | 4 | `items.version` (compare-and-set) |
//! | 4 | 5 | rows bound to the log: `items.vseq`, `items.emb_digest`; after the legacy log verified, one or more `admin` entries **adopt** every row as it stands (its digest), and the signing key moves out of the data directory |
//! | 5 | 6 | one log per tenant: the global log is kept as `legacy_log` / `legacy_checkpoints`; each tenant's entries are re-appended, in order, to its own log (a genesis naming the tenant and the legacy log's size, root and head, then each entry with its `legacy_index` and its bindings renamed `legacy_rows`), every row's log indexes are renumbered into its tenant's log, and `admin` entries adopt every row there |

use std::collections::{BTreeMap, HashMap};

use ed25519_dalek::SigningKey;
use memwarden_log::{Entry, EntryKind, Hash, VerdictLog};
use rusqlite::{Connection, OptionalExtension, params};
use serde_json::{Value, json};

use crate::StoreError;
use crate::binding::{
    AttestationRow, Binding, BoundRow, ElevationRow, ErasedRow, GrantUsedRow, ItemRow, LineageRow, PrincipalRow, ReputationRow, SessionRow, embedding_digest,
};
use crate::sqlite::{SCHEMA, SCHEMA_LOGS, SCHEMA_VERSION};

/// The recorded head of the legacy global log (schemas up to 5).
fn set_legacy_head(conn: &Connection, size: u64, head: &Hash) -> Result<(), rusqlite::Error> {
    let size = i64::try_from(size).unwrap_or(i64::MAX);
    conn.execute("INSERT INTO meta(key, value) VALUES('log_size', ?1) ON CONFLICT(key) DO UPDATE SET value = excluded.value", params![size])?;
    conn.execute("INSERT INTO meta(key, value) VALUES('log_head', ?1) ON CONFLICT(key) DO UPDATE SET value = excluded.value", params![head.as_slice()])?;
    Ok(())
}

/// Schema 1 stored embeddings only in `items`; schema 2 numbers them in `vectors` (the index
/// keys).
const MIGRATE_1_TO_2: &str = "
INSERT OR IGNORE INTO vectors(id, tenant, namespace) SELECT id, tenant, namespace FROM items WHERE embedding IS NOT NULL ORDER BY log_index;
INSERT OR IGNORE INTO meta(key, value) SELECT 'vector_dims', length(embedding) / 4 FROM items WHERE embedding IS NOT NULL ORDER BY log_index LIMIT 1;
";

/// Schema 4 gives every item row a version (compare-and-set): the log index of the last change
/// to it. Migrated rows start at their write's index (any value that changes with every later
/// change will do: a version is concurrency control, never authority).
const MIGRATE_3_TO_4: &str = "
ALTER TABLE items ADD COLUMN version INTEGER NOT NULL DEFAULT 0;
UPDATE items SET version = log_index;
";

/// Bindings one adopt entry carries, at most this many bytes of JSON.
const ADOPT_BYTES_MAX: usize = 512 * 1024;

/// Split bindings into chunks of at most [`ADOPT_BYTES_MAX`] bytes of JSON.
fn chunks(bindings: &[Binding]) -> Vec<Vec<Value>> {
    let mut out: Vec<Vec<Value>> = Vec::new();
    let mut bytes = ADOPT_BYTES_MAX;
    for b in bindings {
        let v = b.to_json();
        let n = v.to_string().len() + 1;
        if bytes + n > ADOPT_BYTES_MAX {
            out.push(Vec::new());
            bytes = 0;
        }
        bytes += n;
        if let Some(c) = out.last_mut() {
            c.push(v);
        }
    }
    out
}

fn has_column(conn: &Connection, table: &str, column: &str) -> Result<bool, StoreError> {
    let n: i64 = conn.query_row(&format!("SELECT count(*) FROM pragma_table_info('{table}') WHERE name = ?1"), params![column], |r| r.get(0))?;
    Ok(n > 0)
}

/// Create what is missing and bring the tables of an older schema up to date. Returns the old
/// version when the rows still need adopting ([`adopt`], after the legacy log verified).
pub(crate) fn prepare(conn: &Connection) -> Result<Option<i64>, StoreError> {
    conn.execute_batch(SCHEMA)?;
    crate::lexical::prepare(conn)?;
    let version: Option<i64> = conn.query_row("SELECT value FROM meta WHERE key='schema'", [], |r| r.get(0)).optional()?;
    match version {
        Some(v) if v == SCHEMA_VERSION => {
            conn.execute_batch(SCHEMA_LOGS)?;
            Ok(None)
        }
        Some(v) if !(1..SCHEMA_VERSION).contains(&v) => Err(StoreError::Schema(v)),
        Some(v) => {
            if crate::stored::per_tenant(conn)? {
                return Err(StoreError::Corrupt(format!("the store says schema {v} but holds per-tenant logs (schema {SCHEMA_VERSION})")));
            }
            let tx = conn.unchecked_transaction()?;
            if v == 1 {
                tx.execute_batch(MIGRATE_1_TO_2)?;
            }
            if !has_column(&tx, "items", "version")? {
                tx.execute_batch(MIGRATE_3_TO_4)?;
            }
            if !has_column(&tx, "items", "vseq")? {
                tx.execute_batch("ALTER TABLE items ADD COLUMN vseq INTEGER; ALTER TABLE items ADD COLUMN emb_digest BLOB;")?;
            }
            // The legacy global log's tables, as every schema before 6 had them.
            tx.execute_batch(
                "CREATE TABLE IF NOT EXISTS log(idx INTEGER PRIMARY KEY, entry BLOB NOT NULL);
                 CREATE TABLE IF NOT EXISTS checkpoints(size INTEGER PRIMARY KEY, record TEXT NOT NULL);",
            )?;
            tx.commit()?;
            Ok(Some(v))
        }
        None => {
            conn.execute("INSERT INTO meta(key, value) VALUES('schema', ?1)", params![SCHEMA_VERSION])?;
            conn.execute_batch(SCHEMA_LOGS)?;
            Ok(None)
        }
    }
}

/// Give the `heads` table of a store made before signed heads its `sig` column. `true` when
/// it was added now: the store's recorded heads are then signed once, at this open
/// ([`crate::backend::sign_unsigned_heads`]); from then on an unsigned head is a forgery.
pub(crate) fn add_head_signatures(conn: &Connection) -> Result<bool, StoreError> {
    let has_heads: i64 = conn.query_row("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'heads'", [], |r| r.get(0))?;
    if has_heads == 0 || has_column(conn, "heads", "sig")? {
        return Ok(false);
    }
    conn.execute_batch("ALTER TABLE heads ADD COLUMN sig BLOB")?;
    Ok(true)
}

/// Every bound row's binding.
fn all_bindings(conn: &Connection) -> Result<Vec<Binding>, StoreError> {
    let mut b = Vec::new();
    collect::<PrincipalRow>(conn, &mut b)?;
    collect::<ItemRow>(conn, &mut b)?;
    collect::<ErasedRow>(conn, &mut b)?;
    collect::<AttestationRow>(conn, &mut b)?;
    collect::<ElevationRow>(conn, &mut b)?;
    collect::<GrantUsedRow>(conn, &mut b)?;
    collect::<SessionRow>(conn, &mut b)?;
    collect::<ReputationRow>(conn, &mut b)?;
    collect::<LineageRow>(conn, &mut b)?;
    Ok(b)
}

fn collect<R: BoundRow>(conn: &Connection, out: &mut Vec<Binding>) -> Result<(), StoreError> {
    let sql = format!("SELECT {} FROM {} ORDER BY rowid", R::COLUMNS, R::TABLE.name());
    let mut stmt = conn.prepare(&sql)?;
    for r in stmt.query_map([], |r| R::read(r))? {
        out.push(r?.binding());
    }
    Ok(())
}

/// Bind every row of a verified legacy store (schema `from`) to its log as it stands: fill the
/// new columns, then append `admin` entries that adopt each row's digest, and mark the schema
/// current. One transaction: a failure leaves the store as it was.
pub(crate) fn adopt(conn: &mut Connection, log: &mut VerdictLog, from: i64, time_ms: u64) -> Result<(), StoreError> {
    let tx = conn.transaction()?;
    tx.execute_batch("UPDATE items SET vseq = (SELECT seq FROM vectors WHERE vectors.id = items.id)")?;
    {
        let rows: Vec<(Vec<u8>, Vec<u8>)> =
            tx.prepare("SELECT id, embedding FROM items WHERE embedding IS NOT NULL")?.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?.collect::<Result<_, _>>()?;
        let mut up = tx.prepare("UPDATE items SET emb_digest = ?1 WHERE id = ?2")?;
        for (id, emb) in rows {
            up.execute(params![embedding_digest(&emb).to_vec(), id])?;
        }
    }
    let bindings = all_bindings(&tx)?;
    let mut shadow = log.clone();
    for chunk in chunks(&bindings) {
        let body = serde_json::to_vec(&json!({"adopt": {"from_schema": from, "to_schema": 5}, "rows": chunk}))
            .map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let entry = shadow.prepare(EntryKind::Admin, time_ms, body);
        tx.execute("INSERT INTO log(idx, entry) VALUES(?1, ?2)", params![i64::try_from(entry.index).unwrap_or(i64::MAX), entry.encode()])?;
        shadow.append(&entry).map_err(|e| StoreError::Corrupt(e.to_string()))?;
    }
    set_legacy_head(&tx, shadow.len(), &shadow.head())?;
    tx.execute("UPDATE meta SET value = 5 WHERE key = 'schema'", [])?;
    tx.commit()?;
    *log = shadow;
    Ok(())
}

/// The tenant a legacy entry belongs to (`None`: the store's genesis, adopt entries).
fn legacy_tenant(body: &Value) -> Option<String> {
    body.get("tenant").and_then(Value::as_str).or_else(|| body.pointer("/principal/tenant").and_then(Value::as_str)).map(str::to_owned)
}

/// One tenant's new log while the legacy log is split.
struct NewLog {
    log: VerdictLog,
}

/// Schema 5 → 6: split the verified legacy global log into one log per tenant (see the table
/// above). One transaction.
pub(crate) fn relog(conn: &mut Connection, key: &SigningKey, store_id: &str, time_ms: u64) -> Result<(), StoreError> {
    let tx = conn.transaction()?;
    tx.execute_batch("ALTER TABLE log RENAME TO legacy_log; ALTER TABLE checkpoints RENAME TO legacy_checkpoints;")?;
    tx.execute_batch(SCHEMA_LOGS)?;
    let legacy: Vec<Vec<u8>> = tx.prepare("SELECT entry FROM legacy_log ORDER BY idx")?.query_map([], |r| r.get(0))?.collect::<Result<_, _>>()?;
    let legacy_log = VerdictLog::from_leaves(legacy.iter().map(|e| memwarden_log::leaf_hash(e)).collect());
    let mut logs: BTreeMap<String, NewLog> = BTreeMap::new();
    let mut gseq: i64 = 0;
    let mut map: HashMap<i64, (String, i64)> = HashMap::new();
    let mut insert = |tx: &rusqlite::Transaction<'_>, logs: &mut BTreeMap<String, NewLog>, tenant: &str, kind: EntryKind, time: u64, body: &Value| -> Result<i64, StoreError> {
        let bytes = serde_json::to_vec(body).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let l = logs.get_mut(tenant).ok_or_else(|| StoreError::Corrupt("relog: log not begun".into()))?;
        let e = l.log.prepare(kind, time, bytes);
        tx.execute("INSERT INTO log(tenant, idx, entry, gseq) VALUES(?1, ?2, ?3, ?4)", params![tenant, i64::try_from(e.index).unwrap_or(i64::MAX), e.encode(), gseq])?;
        l.log.append(&e).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        gseq += 1;
        Ok(i64::try_from(e.index).unwrap_or(i64::MAX))
    };
    let genesis = |tenant: &str| {
        json!({"store": "memwarden", "store_id": store_id, "tenant": tenant, "schema": SCHEMA_VERSION,
               "log_key": hex::encode(key.verifying_key().to_bytes()),
               "legacy": {"size": legacy_log.len(), "root": hex::encode(legacy_log.root()), "head": hex::encode(legacy_log.head())}})
    };
    for (i, bytes) in legacy.iter().enumerate() {
        let entry = Entry::decode(bytes).map_err(|e| StoreError::LogTampered(format!("legacy entry {i}: {e}")))?;
        let Ok(mut body) = serde_json::from_slice::<Value>(&entry.body) else { continue };
        let Some(tenant) = legacy_tenant(&body) else { continue };
        if !logs.contains_key(&tenant) {
            logs.insert(tenant.clone(), NewLog { log: VerdictLog::new() });
            insert(&tx, &mut logs, &tenant, EntryKind::Genesis, entry.time_ms, &genesis(&tenant))?;
        }
        if let Some(o) = body.as_object_mut() {
            if let Some(rows) = o.remove("rows") {
                o.insert("legacy_rows".into(), rows);
            }
            o.insert("legacy_index".into(), json!(i));
        }
        let idx = insert(&tx, &mut logs, &tenant, entry.kind, entry.time_ms, &body)?;
        map.insert(i64::try_from(i).unwrap_or(i64::MAX), (tenant, idx));
    }
    // Every row's log indexes, renumbered into its tenant's log.
    let columns: [(&str, &[&str]); 9] = [
        ("principals", &["log_index"]),
        ("items", &["log_index", "version"]),
        ("erased", &["item_log_index", "log_index"]),
        ("attestations", &["log_index"]),
        ("elevations", &["log_index"]),
        ("grants_used", &["log_index"]),
        ("sessions", &["log_index"]),
        ("reputation", &["log_index"]),
        ("lineage_events", &["log_index"]),
    ];
    for (table, cols) in columns {
        let sql = format!("SELECT rowid, tenant, {} FROM {table}", cols.join(", "));
        let rows: Vec<(i64, String, Vec<i64>)> = tx
            .prepare(&sql)?
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, (0..cols.len()).map(|c| r.get::<_, i64>(2 + c)).collect::<Result<Vec<_>, _>>()?)))?
            .collect::<Result<_, _>>()?;
        for (rowid, tenant, old) in rows {
            let mut new = Vec::with_capacity(old.len());
            for (c, v) in cols.iter().zip(&old) {
                let mapped = match map.get(v) {
                    Some((t, idx)) if *t == tenant => *idx,
                    // A version left by an adopt entry (no tenant): its row's own write.
                    _ if *c == "version" => new.first().copied().unwrap_or(0),
                    _ => return Err(StoreError::Corrupt(format!("{table} row {rowid} of {tenant} names legacy log entry {v}, which is not its tenant's"))),
                };
                new.push(mapped);
            }
            let set: Vec<String> = cols.iter().enumerate().map(|(k, c)| format!("{c} = ?{}", k + 1)).collect();
            let sql = format!("UPDATE {table} SET {} WHERE rowid = ?{}", set.join(", "), cols.len() + 1);
            let mut args: Vec<&dyn rusqlite::ToSql> = new.iter().map(|v| v as &dyn rusqlite::ToSql).collect();
            args.push(&rowid);
            tx.execute(&sql, args.as_slice())?;
        }
    }
    // Adopt every row in its tenant's log.
    let mut per: BTreeMap<String, Vec<Binding>> = BTreeMap::new();
    for b in all_bindings(&tx)? {
        per.entry(b.tenant.clone()).or_default().push(b);
    }
    for (tenant, bindings) in per {
        if !logs.contains_key(&tenant) {
            logs.insert(tenant.clone(), NewLog { log: VerdictLog::new() });
            insert(&tx, &mut logs, &tenant, EntryKind::Genesis, time_ms, &genesis(&tenant))?;
        }
        for chunk in chunks(&bindings) {
            insert(&tx, &mut logs, &tenant, EntryKind::Admin, time_ms, &json!({"tenant": tenant, "adopt": {"from_schema": 5, "to_schema": SCHEMA_VERSION}, "rows": chunk}))?;
        }
    }
    for (tenant, l) in &logs {
        let (size, head) = (l.log.len(), l.log.head());
        let sig = memwarden_log::sign_head(key, store_id, tenant, size, &head);
        tx.execute(
            "INSERT INTO heads(tenant, size, head, sig) VALUES(?1, ?2, ?3, ?4)",
            params![tenant, i64::try_from(size).unwrap_or(i64::MAX), head.as_slice(), sig.as_slice()],
        )?;
    }
    tx.execute("UPDATE meta SET value = ?1 WHERE key = 'schema'", params![SCHEMA_VERSION])?;
    tx.commit()?;
    Ok(())
}
