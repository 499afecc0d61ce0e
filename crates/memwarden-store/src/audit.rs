//! The full audit behind `verify_log` / `audit verify`: every bound row against the bindings
//! of the verified log (forged, edited, rolled-back and deleted rows), then the rows derived
//! from bound ones (vector keys, embeddings, lineage edges). Names the first bad row.

use std::collections::{BTreeSet, HashMap, HashSet};

use memwarden_log::{Entry, Problem};
use crate::db::{Db, query_all, query_opt};

use crate::StoreError;
use crate::stored::StoredLogs;
use crate::binding::{
    AttestationRow, Binding, BoundRow, Check, ElevationRow, ErasedRow, GrantUsedRow, ItemRow, LineageRow, PrincipalRow, ReputationRow, RowKey, SessionRow,
    bindings_of, embedding_digest,
};

/// Live bindings: the row each names and the entry that bound it last.
type Bindings = HashMap<RowKey, (Binding, u64)>;
/// One table's scan.
type Scan = fn(&dyn Db, Option<&str>, &Bindings, &mut HashSet<RowKey>) -> Result<Option<Problem>, StoreError>;

/// Every live binding of the logs: the row it names and the entry (of its tenant's log) that
/// bound it last.
fn bindings(stored: &StoredLogs) -> Result<Bindings, StoreError> {
    let mut out = HashMap::new();
    for (t, s) in &stored.tenants {
        for (i, bytes) in s.entries.iter().enumerate() {
            let entry = Entry::decode(bytes).map_err(|e| StoreError::LogTampered(format!("log {t:?} entry {i}: {e}")))?;
            for b in bindings_of(&entry.body).map_err(|e| StoreError::LogTampered(format!("log {t:?} entry {i}: {e}")))? {
                let key = b.key();
                if b.digest.is_some() {
                    out.insert(key, (b, i as u64));
                } else {
                    out.remove(&key);
                }
            }
        }
    }
    Ok(out)
}

fn bad(table: &str, key: String, entry: Option<u64>, reason: String) -> Option<Problem> {
    Some(Problem::BadRow { table: table.to_owned(), key, entry, reason })
}

fn scan<R: BoundRow>(db: &dyn Db, only: Option<&str>, bound: &Bindings, seen: &mut HashSet<RowKey>) -> Result<Option<Problem>, StoreError> {
    let sql = format!("SELECT {} FROM {} WHERE tenant = coalesce(?1, tenant) ORDER BY {}", R::COLUMNS, R::TABLE.name(), db.row_order());
    for row in query_all(db, &sql, crate::args![only], R::from_cols).map_err(db_err)? {
        let key = row.key();
        match bound.get(&key) {
            None => return Ok(bad(R::TABLE.name(), row.parts().join("/"), None, Check::Unbound.reason())),
            Some((b, entry)) if b.digest != Some(row.digest()) => {
                return Ok(bad(R::TABLE.name(), row.parts().join("/"), Some(*entry), Check::Differs { entry: *entry }.reason()));
            }
            Some(_) => {
                seen.insert(key);
            }
        }
    }
    Ok(None)
}

fn db_err(e: crate::db::DbError) -> StoreError {
    StoreError::Corrupt(format!("audit: {e}"))
}

/// Audit every bound table of the database (the rows of one tenant for `only`) against the
/// verified logs: forged, edited, rolled-back and deleted rows, then vector keys, embeddings
/// and lineage edges. Names the first bad row.
pub fn audit(db: &dyn Db, stored: &StoredLogs, only: Option<&str>) -> Result<Option<Problem>, StoreError> {
    let bound = bindings(stored)?;
    let mut seen = HashSet::with_capacity(bound.len());
    let scans: [Scan; 9] = [
        scan::<PrincipalRow>,
        scan::<ItemRow>,
        scan::<ErasedRow>,
        scan::<AttestationRow>,
        scan::<ElevationRow>,
        scan::<GrantUsedRow>,
        scan::<SessionRow>,
        scan::<ReputationRow>,
        scan::<LineageRow>,
    ];
    for s in scans {
        if let Some(p) = s(db, only, &bound, &mut seen)? {
            return Ok(Some(p));
        }
    }
    // Rows the log committed that are gone, first by the entry that bound them.
    let mut missing: Vec<&(Binding, u64)> = bound.iter().filter(|(k, (b, _))| !seen.contains(k) && only.is_none_or(|t| t == b.tenant)).map(|(_, v)| v).collect();
    missing.sort_by_key(|(b, e)| (*e, b.tenant.clone(), b.table, b.parts.clone()));
    if let Some((b, e)) = missing.first() {
        return Ok(bad(b.table.name(), b.parts.join("/"), Some(*e), Check::Missing { entry: *e }.reason()));
    }
    // Vector keys: one `vectors` row per item that has an embedding, naming it as its row does.
    {
        type VectorKey = (i64, Vec<u8>, (String, String), (Option<i64>, Option<String>, Option<String>));
        let rows: Vec<VectorKey> = query_all(
            db,
            "SELECT v.seq, v.id, v.tenant, v.namespace, i.vseq, i.tenant, i.namespace FROM vectors v LEFT JOIN items i ON i.id = v.id ORDER BY v.seq",
            &[],
            |r| Ok((r.int(0)?, r.blob(1)?, (r.text(2)?, r.text(3)?), (r.opt_int(4)?, r.opt_text(5)?, r.opt_text(6)?))),
        )
        .map_err(db_err)?;
        for (seq, id, vt, it) in rows {
            if it.0 != Some(seq) || it.1.as_deref() != Some(vt.0.as_str()) || it.2.as_deref() != Some(vt.1.as_str()) {
                return Ok(bad("vectors", seq.to_string(), None, format!("the vector key of {} does not match its item row", hex::encode(id))));
            }
        }
        let sql = format!(
            "SELECT id, vseq FROM items WHERE vseq IS NOT NULL AND NOT EXISTS (SELECT 1 FROM vectors v WHERE v.seq = items.vseq AND v.id = items.id) ORDER BY {} LIMIT 1",
            db.row_order()
        );
        let orphan: Option<(Vec<u8>, i64)> = query_opt(db, &sql, &[], |r| Ok((r.blob(0)?, r.int(1)?))).ok().flatten();
        if let Some((id, seq)) = orphan {
            return Ok(bad("vectors", seq.to_string(), None, format!("the vector key of item {} is missing", hex::encode(id))));
        }
    }
    // Embeddings: each the one its (bound) digest column names.
    {
        let sql = format!("SELECT id, embedding, emb_digest FROM items WHERE embedding IS NOT NULL OR emb_digest IS NOT NULL ORDER BY {}", db.row_order());
        type Embedded = (Vec<u8>, Option<Vec<u8>>, Option<Vec<u8>>);
        let rows: Vec<Embedded> = query_all(db, &sql, &[], |r| Ok((r.blob(0)?, r.opt_blob(1)?, r.opt_blob(2)?))).map_err(db_err)?;
        for (id, emb, digest) in rows {
            if emb.as_deref().map(|e| embedding_digest(e).to_vec()) != digest {
                return Ok(bad("items", hex::encode(id), None, "the embedding differs from the digest its log entry committed".into()));
            }
        }
    }
    // Lineage edges: exactly the parents the (bound) records declare.
    {
        let mut want: BTreeSet<(Vec<u8>, Vec<u8>, String)> = BTreeSet::new();
        for sql in ["SELECT id, record FROM items", "SELECT id, tombstone FROM erased"] {
            for (child, record) in query_all(db, sql, &[], |r| Ok((r.blob(0)?, r.text(1)?))).map_err(db_err)? {
                let v: serde_json::Value = serde_json::from_str(&record).map_err(|e| StoreError::Corrupt(format!("item {}: {e}", hex::encode(&child))))?;
                for p in v.get("parents").and_then(|p| p.as_array()).into_iter().flatten() {
                    let (Some(id), Some(kind)) = (p.get("id").and_then(|x| x.as_str()), p.get("kind").and_then(|x| x.as_str())) else { continue };
                    let Ok(parent) = hex::decode(id) else { continue };
                    want.insert((child.clone(), parent, kind.to_owned()));
                }
            }
        }
        let mut have: BTreeSet<(Vec<u8>, Vec<u8>, String)> = BTreeSet::new();
        for e in query_all(db, "SELECT child, parent, kind FROM edges", &[], |r| Ok((r.blob(0)?, r.blob(1)?, r.text(2)?))).map_err(db_err)? {
            have.insert(e);
        }
        if let Some((c, p, k)) = have.symmetric_difference(&want).next() {
            let reason = if have.contains(&(c.clone(), p.clone(), k.clone())) { "an edge no record declares" } else { "an edge a record declares is missing" };
            return Ok(bad("edges", format!("{}/{}/{k}", hex::encode(c), hex::encode(p)), None, reason.into()));
        }
    }
    Ok(None)
}
