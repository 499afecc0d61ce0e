//! Decoders of what the store reads back from its files: pure functions from stored bytes to
//! values. Each refuses, and never panics on, anything the store did not write; the store calls
//! exactly these on every read, and the fuzz targets (`fuzz/fuzz_targets/store_rows.rs`) call
//! them with arbitrary bytes.

use memwarden_core::prelude::{Attestation, ItemId, MemoryItem, Principal, TenantId};

/// A stored item record, checked against the key columns of its row (id, tenant, namespace), its
/// identity digest and its version (the log index of its last change).
pub fn item_record(record: &str, tenant: &TenantId, id: &ItemId, namespace: &str, digest: &[u8], version: i64) -> Result<MemoryItem, String> {
    let row = crate::binding::ItemRow {
        id: id.as_bytes().to_vec(),
        tenant: tenant.as_str().to_owned(),
        namespace: namespace.to_owned(),
        record: record.to_owned(),
        digest: digest.to_vec(),
        log_index: version,
        created_ms: 0,
        version,
        vseq: None,
        emb_digest: None,
    };
    crate::sqlite::item_of(&row, tenant, id)
}

/// A stored principal record, checked against its row's tenant and id.
pub fn principal_record(record: &str, tenant: &str, id: &str) -> Result<Principal, String> {
    let row = crate::binding::PrincipalRow { tenant: tenant.to_owned(), id: id.to_owned(), record: record.to_owned(), log_index: 0 };
    crate::sqlite::principal_of(&row).map_err(|e| e.to_string())
}

/// A stored attestation record, checked against its row's tenant and key.
pub fn attestation_record(record: &str, tenant: &str, key: &str) -> Result<Attestation, String> {
    let row = crate::binding::AttestationRow { tenant: tenant.to_owned(), key: key.to_owned(), record: record.to_owned(), log_index: 0 };
    crate::sqlite::attestation_of(&row).map_err(|e| e.to_string())
}

/// The row bindings a verdict-log entry body declares; returns how many it binds.
pub fn entry_bindings(body: &[u8]) -> Result<usize, String> {
    crate::binding::bindings_of(body).map(|b| b.len())
}

/// One slot of a witness file (a signed tree head kept outside the data directory); returns
/// the tree size it witnesses, or `None` for a torn, foreign or corrupt slot.
pub fn witness_slot(slot: &[u8]) -> Option<u64> {
    crate::keys::parse_slot(slot).map(|(seq, _)| seq)
}

/// A stored embedding (little-endian `f32`s; a trailing partial value is ignored).
pub fn vector(bytes: &[u8]) -> Vec<f32> {
    crate::vectors::decode_f32(bytes)
}
