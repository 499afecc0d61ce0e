//! Reading and verifying the stored logs: every tenant's chain against its checkpoints, its
//! recorded head and its witness; the global view's order and checkpoints; then (for audits)
//! every bound row. Also the legacy single global log of schemas up to 5.

use std::collections::{BTreeMap, HashMap};

use ed25519_dalek::VerifyingKey;
use memwarden_log::{Entry, EntryKind, Hash, Problem, SignedCheckpoint, VerdictLog, VerifyReport, leaf_hash, verify_log};
use rusqlite::{Connection, OptionalExtension, params};

use crate::StoreError;
use crate::binding::{StateIndex, bindings_of};
use crate::keys::{self, Witness};
use crate::logs::{GLOBAL, GlobalView, Logs, TenantLog};

/// One tenant's stored log.
#[derive(Default)]
pub struct TenantStored {
    /// Entries in index order (a gap or a duplicate shows up in verification).
    pub entries: Vec<Vec<u8>>,
    /// Its stored checkpoints.
    pub checkpoints: Vec<SignedCheckpoint>,
    /// The recorded (size, head) from `heads`.
    pub expected: Option<(u64, Hash)>,
    /// The store's signature over the recorded head ([`memwarden_log::head_signing_bytes`]).
    pub head_sig: Option<Vec<u8>>,
}

/// Every stored log.
#[derive(Default)]
pub struct StoredLogs {
    /// Each tenant's stored log.
    pub tenants: BTreeMap<String, TenantStored>,
    /// Every leaf in global (`gseq`) order.
    pub global: Vec<Hash>,
    /// The global view's checkpoints.
    pub global_checkpoints: Vec<SignedCheckpoint>,
    /// The first position whose `gseq` is not its position, if any.
    pub gseq_gap: Option<u64>,
}

fn hash32(v: &[u8]) -> Option<Hash> {
    v.try_into().ok()
}

/// Read every log (all tenants, or one).
pub fn read_logs(conn: &Connection, only: Option<&str>) -> Result<StoredLogs, StoreError> {
    let mut out = StoredLogs::default();
    {
        let mut stmt = conn.prepare("SELECT tenant, idx, entry, gseq FROM log ORDER BY gseq")?;
        let mut rows = stmt.query([])?;
        let mut per: BTreeMap<String, Vec<(i64, Vec<u8>)>> = BTreeMap::new();
        let mut pos = 0u64;
        while let Some(r) = rows.next()? {
            let (tenant, idx, entry, gseq): (String, i64, Vec<u8>, i64) = (r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?);
            if u64::try_from(gseq).ok() != Some(pos) && out.gseq_gap.is_none() {
                out.gseq_gap = Some(pos);
            }
            pos += 1;
            out.global.push(leaf_hash(&entry));
            if only.is_none_or(|t| t == tenant) {
                per.entry(tenant).or_default().push((idx, entry));
            }
        }
        for (t, mut es) in per {
            es.sort_by_key(|(i, _)| *i);
            out.tenants.entry(t).or_default().entries = es.into_iter().map(|(_, e)| e).collect();
        }
    }
    let mut stmt = conn.prepare("SELECT tenant, record FROM checkpoints ORDER BY tenant, size")?;
    for r in stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))? {
        let (t, rec) = r?;
        let cp: SignedCheckpoint = serde_json::from_str(&rec).map_err(|e| StoreError::Corrupt(format!("checkpoint: {e}")))?;
        if t == GLOBAL {
            out.global_checkpoints.push(cp);
        } else if only.is_none_or(|o| o == t) {
            out.tenants.entry(t).or_default().checkpoints.push(cp);
        }
    }
    let mut stmt = conn.prepare("SELECT tenant, size, head, sig FROM heads")?;
    for r in stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?, r.get::<_, Vec<u8>>(2)?, r.get::<_, Option<Vec<u8>>>(3)?)))? {
        let (t, size, head, sig) = r?;
        if only.is_some_and(|o| o != t) {
            continue;
        }
        let head = hash32(&head).ok_or_else(|| StoreError::Corrupt(format!("recorded head of {t} is malformed")))?;
        let s = out.tenants.entry(t).or_default();
        s.expected = Some((u64::try_from(size).unwrap_or(0), head));
        s.head_sig = sig;
    }
    Ok(out)
}

/// The witnessed head of every tenant log, checked against the store it must belong to. The
/// store's own witness ([`GLOBAL`], written at open before any tenant has a log, so that a store
/// with entries always has a witness) names no tenant log and is left out.
pub fn witnesses(key_dir: &std::path::Path, store_id: &str) -> Result<HashMap<String, SignedCheckpoint>, StoreError> {
    let mut out = HashMap::new();
    for Witness { store_id: sid, tenant, checkpoint } in keys::read_witnesses(key_dir)? {
        if sid != store_id {
            return Err(StoreError::KeyDir(format!("the witness in {} belongs to store {sid}, not to this one ({store_id})", key_dir.display())));
        }
        if tenant != GLOBAL {
            out.insert(tenant, checkpoint);
        }
    }
    Ok(out)
}

/// The tenant a log's genesis entry names.
fn genesis_tenant(bytes: &[u8]) -> Option<String> {
    let e = Entry::decode(bytes).ok()?;
    if e.kind != EntryKind::Genesis {
        return None;
    }
    let v: serde_json::Value = serde_json::from_slice(&e.body).ok()?;
    v.get("tenant").and_then(|t| t.as_str()).map(str::to_owned)
}

/// Verify every stored log (or the one `only` names): each tenant's chain against its
/// checkpoints, recorded head and witness (a witness whose log is missing is a cut log), its
/// genesis naming it; then the global view's order and checkpoints. The report's figures are the
/// global view's (one tenant's for `only`).
pub fn verify(stored: &StoredLogs, key: &VerifyingKey, store_id: &str, witnessed: &HashMap<String, SignedCheckpoint>, only: Option<&str>) -> VerifyReport {
    let mut names: Vec<&str> = stored.tenants.keys().map(String::as_str).collect();
    for t in witnessed.keys() {
        if only.is_none_or(|o| o == t) && !stored.tenants.contains_key(t) {
            names.push(t);
        }
    }
    names.sort_unstable();
    names.dedup();
    let empty = TenantStored::default();
    // A tenant without a log reports the empty tree.
    let mut total = VerifyReport { entries: 0, root: memwarden_log::empty_root(), head: [0; 32], checkpoints_checked: 0, problem: None };
    for t in names {
        let s = stored.tenants.get(t).unwrap_or(&empty);
        let mut anchors = s.checkpoints.clone();
        anchors.extend(witnessed.get(t).cloned());
        let mut r = verify_log(&s.entries, &anchors, key, s.expected);
        if r.problem.is_none()
            && let Some(first) = s.entries.first()
            && genesis_tenant(first).as_deref() != Some(t)
        {
            r.problem = Some(Problem::BrokenLink { index: 0 });
        }
        if r.problem.is_none() {
            r.problem = unsigned_head(s, &anchors, key, store_id, t);
        }
        total.entries += r.entries;
        total.checkpoints_checked += r.checkpoints_checked;
        if only.is_some() {
            total.root = r.root;
            total.head = r.head;
        }
        if total.problem.is_none()
            && let Some(p) = r.problem
        {
            total.problem = Some(Problem::InLog { log: t.to_owned(), problem: Box::new(p) });
        }
    }
    if only.is_none() {
        let mut view = GlobalView::default();
        for l in &stored.global {
            view.push(*l);
        }
        total.entries = view.len();
        total.root = view.root();
        total.head = view.head();
        if total.problem.is_none()
            && let Some(pos) = stored.gseq_gap
        {
            total.problem = Some(Problem::InLog { log: GLOBAL.into(), problem: Box::new(Problem::IndexMismatch { index: pos, found: pos + 1 }) });
        }
        let mut last_ok = 0;
        for cp in &stored.global_checkpoints {
            if total.problem.is_some() {
                break;
            }
            let c = &cp.checkpoint;
            let p = if cp.verify(key).is_err() {
                Some(Problem::BadSignature { size: c.size })
            } else if c.size > view.len() {
                Some(Problem::CheckpointBeyondLog { size: c.size, len: view.len() })
            } else if view.at(c.size) != Some((c.root, c.head)) {
                Some(Problem::CheckpointRootMismatch { size: c.size, first_bad_after: last_ok })
            } else {
                last_ok = c.size;
                total.checkpoints_checked += 1;
                None
            };
            total.problem = p.map(|p| Problem::InLog { log: GLOBAL.into(), problem: Box::new(p) });
        }
    }
    total
}

/// A log whose recorded head the store's key does not vouch for (no head recorded for stored
/// entries, or no valid signature over it): an entry was appended, or the head row edited or
/// deleted, by someone without the key.
fn unsigned_head(s: &TenantStored, anchors: &[SignedCheckpoint], key: &VerifyingKey, store_id: &str, tenant: &str) -> Option<Problem> {
    let stored_len = s.entries.len() as u64;
    let (size, signed) = match s.expected {
        Some((size, head)) => (size, memwarden_log::verify_head(key, store_id, tenant, size, &head, s.head_sig.as_deref()).is_ok()),
        None => (stored_len, stored_len == 0),
    };
    if signed {
        return None;
    }
    let first_bad_after = anchors.iter().map(|a| a.checkpoint.size).filter(|n| *n <= size).max().unwrap_or(0);
    debug_assert!(first_bad_after <= size);
    Some(Problem::UnsignedHead { size, first_bad_after })
}

/// The verified logs in memory, and the state their bindings commit every row to.
pub fn load(stored: &StoredLogs) -> Result<(Logs, StateIndex), StoreError> {
    let mut logs = Logs::default();
    let mut state = StateIndex::default();
    for (t, s) in &stored.tenants {
        for (i, bytes) in s.entries.iter().enumerate() {
            let entry = Entry::decode(bytes).map_err(|e| StoreError::LogTampered(format!("log {t:?} entry {i}: {e}")))?;
            for b in bindings_of(&entry.body).map_err(|e| StoreError::LogTampered(format!("log {t:?} entry {i}: {e}")))? {
                if b.tenant != *t {
                    return Err(StoreError::LogTampered(format!("log {t:?} entry {i} binds a row of tenant {:?}", b.tenant)));
                }
                state.apply(&b, i as u64);
            }
        }
        let leaves: Vec<Hash> = s.entries.iter().map(|e| leaf_hash(e)).collect();
        let last_checkpoint = s.checkpoints.iter().map(|c| c.checkpoint.size).max().unwrap_or(0);
        logs.tenants.insert(t.clone(), TenantLog { log: VerdictLog::from_leaves(leaves), last_checkpoint });
    }
    for l in &stored.global {
        logs.global.push(*l);
    }
    logs.global.last_checkpoint = stored.global_checkpoints.iter().map(|c| c.checkpoint.size).max().unwrap_or(0);
    Ok((logs, state))
}

/// The latest entry time of any log.
pub fn last_time_ms(stored: &StoredLogs) -> u64 {
    stored.tenants.values().filter_map(|s| s.entries.last()).filter_map(|e| Entry::decode(e).ok()).map(|e| e.time_ms).max().unwrap_or(0)
}

/// The single global log of schemas up to 5, read from its (old) tables.
pub struct LegacyLog {
    pub entries: Vec<Vec<u8>>,
    pub checkpoints: Vec<SignedCheckpoint>,
    pub expected: Option<(u64, Hash)>,
}

pub fn read_legacy(conn: &Connection, table: &str, checkpoints: &str) -> Result<LegacyLog, StoreError> {
    let mut stmt = conn.prepare(&format!("SELECT entry FROM {table} ORDER BY idx"))?;
    let entries = stmt.query_map([], |r| r.get::<_, Vec<u8>>(0))?.collect::<Result<Vec<_>, _>>()?;
    let mut stmt = conn.prepare(&format!("SELECT record FROM {checkpoints} ORDER BY size"))?;
    let mut cps = Vec::new();
    for rec in stmt.query_map([], |r| r.get::<_, String>(0))? {
        cps.push(serde_json::from_str(&rec?).map_err(|e| StoreError::Corrupt(format!("checkpoint: {e}")))?);
    }
    let size: Option<i64> = conn.query_row("SELECT value FROM meta WHERE key='log_size'", [], |r| r.get(0)).optional()?;
    let head: Option<Vec<u8>> = conn.query_row("SELECT value FROM meta WHERE key='log_head'", [], |r| r.get(0)).optional()?;
    let expected = match (size, head) {
        (Some(s), Some(h)) => Some((u64::try_from(s).unwrap_or(0), hash32(&h).ok_or_else(|| StoreError::Corrupt("recorded log head is malformed".into()))?)),
        (None, None) => None,
        _ => return Err(StoreError::Corrupt("recorded log head is malformed".into())),
    };
    Ok(LegacyLog { entries, checkpoints: cps, expected })
}

/// Whether the `log` table has the per-tenant shape.
pub fn per_tenant(conn: &Connection) -> Result<bool, StoreError> {
    let n: i64 = conn.query_row("SELECT count(*) FROM pragma_table_info('log') WHERE name = 'tenant'", params![], |r| r.get(0))?;
    Ok(n > 0)
}
