//! Schema migrations. Every version this build can open is listed here; a newer one is refused
//! ([`StoreError::Schema`]).
//!
//! | from | to | what changes |
//! | --- | --- | --- |
//! | 1 | 2 | embeddings get index keys (`vectors`) |
//! | 2 | 3 | lineage rows (tables only) |
//! | 3 | 4 | `items.version` (compare-and-set) |
//! | 4 | 5 | rows bound to the log: `items.vseq`, `items.emb_digest`; after the legacy log verified, one or more `admin` entries **adopt** every row as it stands (its digest), and the signing key moves out of the data directory |

use memwarden_log::{EntryKind, VerdictLog};
use rusqlite::{Connection, OptionalExtension, params};
use serde_json::{Value, json};

use crate::StoreError;
use crate::binding::{
    AttestationRow, Binding, BoundRow, ElevationRow, ErasedRow, GrantUsedRow, ItemRow, LineageRow, PrincipalRow, ReputationRow, SessionRow, embedding_digest,
};
use crate::sqlite::{SCHEMA, SCHEMA_VERSION, set_head};

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

fn has_column(conn: &Connection, table: &str, column: &str) -> Result<bool, StoreError> {
    let n: i64 = conn.query_row(&format!("SELECT count(*) FROM pragma_table_info('{table}') WHERE name = ?1"), params![column], |r| r.get(0))?;
    Ok(n > 0)
}

/// Create what is missing and bring the tables of an older schema up to date. Returns the old
/// version when the rows still need adopting ([`adopt`], after the legacy log verified).
pub(crate) fn prepare(conn: &Connection) -> Result<Option<i64>, StoreError> {
    conn.execute_batch(SCHEMA)?;
    let version: Option<i64> = conn.query_row("SELECT value FROM meta WHERE key='schema'", [], |r| r.get(0)).optional()?;
    match version {
        Some(v) if v == SCHEMA_VERSION => Ok(None),
        Some(v) if !(1..SCHEMA_VERSION).contains(&v) => Err(StoreError::Schema(v)),
        Some(v) => {
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
            tx.commit()?;
            Ok(Some(v))
        }
        None => {
            conn.execute("INSERT INTO meta(key, value) VALUES('schema', ?1)", params![SCHEMA_VERSION])?;
            Ok(None)
        }
    }
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
    let mut bindings = Vec::new();
    collect::<PrincipalRow>(&tx, &mut bindings)?;
    collect::<ItemRow>(&tx, &mut bindings)?;
    collect::<ErasedRow>(&tx, &mut bindings)?;
    collect::<AttestationRow>(&tx, &mut bindings)?;
    collect::<ElevationRow>(&tx, &mut bindings)?;
    collect::<GrantUsedRow>(&tx, &mut bindings)?;
    collect::<SessionRow>(&tx, &mut bindings)?;
    collect::<ReputationRow>(&tx, &mut bindings)?;
    collect::<LineageRow>(&tx, &mut bindings)?;
    let mut chunks: Vec<Vec<Value>> = Vec::new();
    let mut bytes = ADOPT_BYTES_MAX;
    for b in &bindings {
        let v = b.to_json();
        let n = v.to_string().len() + 1;
        if bytes + n > ADOPT_BYTES_MAX {
            chunks.push(Vec::new());
            bytes = 0;
        }
        bytes += n;
        if let Some(c) = chunks.last_mut() {
            c.push(v);
        }
    }
    let mut shadow = log.clone();
    for chunk in chunks {
        let body = serde_json::to_vec(&json!({"adopt": {"from_schema": from, "to_schema": SCHEMA_VERSION}, "rows": chunk}))
            .map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let entry = shadow.prepare(EntryKind::Admin, time_ms, body);
        tx.execute("INSERT INTO log(idx, entry) VALUES(?1, ?2)", params![i64::try_from(entry.index).unwrap_or(i64::MAX), entry.encode()])?;
        shadow.append(&entry).map_err(|e| StoreError::Corrupt(e.to_string()))?;
    }
    set_head(&tx, shadow.len(), &shadow.head())?;
    tx.execute("UPDATE meta SET value = ?1 WHERE key = 'schema'", params![SCHEMA_VERSION])?;
    tx.commit()?;
    *log = shadow;
    Ok(())
}
