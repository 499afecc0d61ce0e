//! Helpers shared by the store's integration tests: principals, gate-admitted writes and the
//! mutations that change a stored memory, built the way the engine builds them.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use memwarden_core::prelude::*;
use memwarden_store::{CommitError, Mutation, Receipt, SqliteStore, Store, StoreConfig};
use std::path::Path;

pub const DIMS: usize = 8;

pub fn tenant() -> TenantId {
    TenantId::new("acme").unwrap()
}

pub fn ns() -> Namespace {
    Namespace::new("notes").unwrap()
}

pub fn pid(s: &str) -> PrincipalId {
    PrincipalId::new(s).unwrap()
}

/// A principal of the test tenant (built from its JSON form, so the test does not depend on
/// fields it leaves at their defaults).
pub fn principal(id: &str, kind: PrincipalKind) -> Principal {
    serde_json::from_value(serde_json::json!({
        "id": id, "tenant": tenant(), "kind": kind, "domain": null, "allow_listed": false, "public_key": null
    }))
    .unwrap()
}

/// Test config for a test directory `root`: the data directory is `<root>/data`, the key
/// directory (signing key, witness) `<root>/keys`, outside it.
pub fn config(root: &Path) -> StoreConfig {
    StoreConfig::default().with_key_dir(root.join("keys"))
}

/// Opens the store in `<root>/data`.
pub fn open(root: &Path) -> SqliteStore {
    SqliteStore::open(&root.join("data"), config(root)).unwrap()
}

/// The data directory's database file.
pub fn db(root: &Path) -> std::path::PathBuf {
    root.join("data").join("memwarden.db")
}

pub fn id(n: u64) -> ItemId {
    let mut raw = [0u8; 16];
    raw[..8].copy_from_slice(&n.to_be_bytes());
    ItemId::from_bytes(raw)
}

pub fn vector(seed: u64) -> Vec<f32> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xD1B5_4A32_D192_ED03;
    (0..DIMS)
        .map(|d| {
            x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            ((z ^ (z >> 31)) as f64 / u64::MAX as f64) as f32 - 0.5 + if d as u64 == seed % DIMS as u64 { 1.0 } else { 0.0 }
        })
        .collect()
}

/// Registers `ana` (agent), `ben` (agent) and `uma` (user).
pub fn register(store: &dyn Store) {
    let ps = vec![
        Mutation::Principal(principal("ana", PrincipalKind::Agent)),
        Mutation::Principal(principal("ben", PrincipalKind::Agent)),
        Mutation::Principal(principal("uma", PrincipalKind::User)),
    ];
    for r in store.commit(0, ps).unwrap() {
        match r {
            Ok(_) | Err(CommitError::PrincipalExists(_)) => {}
            Err(e) => panic!("{e}"),
        }
    }
}

/// A gate-admitted write by `writer` (private to the writer when `private`).
pub fn admitted(writer: &str, n: u64, text: &str, private: bool) -> AdmittedWrite {
    let mut req = WriteRequest::new(ns(), text, Route::Direct);
    if private {
        req.readers = Some(Default::default());
    }
    Authority::default().admit_write(&principal(writer, PrincipalKind::Agent), &tenant(), req, &[], id(n), n).unwrap()
}

pub fn item_mutation(writer: &str, n: u64, text: &str) -> Mutation {
    Mutation::Item { write: admitted(writer, n, text, false), embedding: Some(vector(n)) }
}

/// Writes one shared memory by `ana` and returns its id and receipt.
pub fn write(store: &dyn Store, n: u64, text: &str) -> (ItemId, Receipt) {
    let r = store.commit(n, vec![item_mutation("ana", n, text)]).unwrap().pop().unwrap().unwrap();
    (id(n), r)
}

/// A store written by the schema-4 build (see tests/migrate.rs), copied into `<root>/data`
/// (its key still in the data directory, as that build kept it).
pub fn legacy_fixture(root: &Path) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests").join("fixtures").join("schema4");
    let data = root.join("data");
    std::fs::create_dir_all(data.join("keys")).unwrap();
    std::fs::copy(src.join("memwarden.db"), data.join("memwarden.db")).unwrap();
    std::fs::copy(src.join("keys").join("log.ed25519"), data.join("keys").join("log.ed25519")).unwrap();
}

/// The fixture generator's vectors.
pub fn fixture_vector(seed: u64) -> Vec<f32> {
    (0..8).map(|d| if d as u64 == seed % 8 { 1.0 } else { 0.1 * ((seed + d as u64) % 5) as f32 }).collect()
}
