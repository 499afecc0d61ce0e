//! Issue 17 item 6: a tenant moves from SQLite to PostgreSQL (and back) with its verdict log
//! intact — the same size, Merkle root and head — and everything the log binds: every memory
//! readable with its label and origin, search finding the same memory, a used grant still
//! refused as reused, the erased text in no file and no table. A file that does not verify (a
//! flipped entry byte, an edited row, a dropped line) or a tenant the target already has is
//! refused and leaves the target as it was. Real SQLite and PostgreSQL (see
//! tests/conformance.rs for the URL); nothing mocked.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::path::Path;
use std::sync::Arc;

use ed25519_dalek::SigningKey;
use memwarden_core::prelude::*;
use memwarden_engine::embed::HashEmbedder;
use memwarden_engine::keys::{GrantSpec, mint_grant};
use memwarden_engine::{Engine, EngineConfig, Preset};
use memwarden_store::transfer::TransferError;
use memwarden_store::{SqliteStore, Store, StoreConfig};
use memwarden_store_pg::{PgConfig, PostgresStore, drop_schema};

const ERASED_TEXT: &str = "zebra-unicorn-4471 is the vault combination";
const QUERY: &str = "where is the quarterly offsite";

fn pid(s: &str) -> PrincipalId {
    PrincipalId::new(s).unwrap()
}

fn acme() -> TenantId {
    TenantId::new("acme").unwrap()
}

fn ns() -> Namespace {
    Namespace::new("n").unwrap()
}

fn pg_url() -> String {
    std::env::var("MEMWARDEN_PG_URL").unwrap_or_else(|_| "host=127.0.0.1 port=5432 user=postgres dbname=test".into())
}

struct Schema(PgConfig);

impl Schema {
    fn new(keys: &Path) -> Self {
        let mut r = [0u8; 6];
        getrandom::fill(&mut r).unwrap();
        Self(PgConfig::new(pg_url(), format!("mw_transfer_{}", hex::encode(r)), keys))
    }
    fn open(&self) -> PostgresStore {
        PostgresStore::open(self.0.clone()).unwrap_or_else(|e| panic!("cannot open a PostgresStore on {:?} (is PostgreSQL running?): {e}", self.0.url))
    }
}

impl Drop for Schema {
    fn drop(&mut self) {
        let _ = drop_schema(&self.0.url, &self.0.schema);
    }
}

fn config(keys: &Path) -> EngineConfig {
    EngineConfig { embedder: Some(Arc::new(HashEmbedder::new(64))), store: StoreConfig::default().with_key_dir(keys), ..EngineConfig::for_preset(Preset::Full).unwrap() }
}

fn store_config(keys: &Path) -> StoreConfig {
    StoreConfig::default().with_key_dir(keys)
}

fn principal(tenant: &TenantId, id: &str, kind: PrincipalKind, domain: Option<&str>, allow: bool, key: Option<&SigningKey>) -> Principal {
    Principal {
        id: pid(id),
        tenant: tenant.clone(),
        kind,
        domain: domain.map(|d| Domain::new(d).unwrap()),
        allow_listed: allow,
        public_key: key.map(|k| k.verifying_key().to_bytes()),
        action: None,
    }
}

fn user_key() -> SigningKey {
    SigningKey::from_bytes(&[42; 32])
}

fn pay(context: &[ItemId], grants: Vec<memwarden_core::authority::grant::SignedGrant>) -> ActionRequest {
    ActionRequest {
        tool: "pay".into(),
        kind: ActionKind::Act,
        risk: Risk::High,
        values: vec![ActionValue { key: "payee".into(), value: "ACCT-9".into(), kind: ValueKind::Account, sources: vec![] }],
        amount: None,
        context: context.to_vec(),
        grants,
    }
}

/// What the source tenant looked like at export.
struct Built {
    grant: memwarden_core::authority::grant::SignedGrant,
    email: ItemId,
    top_hit: ItemId,
}

/// A SQLite store whose tenant `acme` has every kind of row: principals, writes, a derivation,
/// a tool call, attestations, a grant used by an allowed decision, a revocation, an update, an
/// erasure, a tainted session, feedback and reputation, lineage reads. Another tenant wrote
/// embedded memories first, so acme's vector keys (SQLite's store-wide sequence) run above its
/// log indexes.
fn build(data: &Path, keys: &Path) -> Built {
    let e = Engine::open(data, config(keys)).unwrap();
    let other = TenantId::new("other").unwrap();
    e.register_principal(principal(&other, "writer", PrincipalKind::Agent, None, false, None)).unwrap();
    let w = e.authenticate(&other, &pid("writer")).unwrap();
    for i in 0..60 {
        e.add(&w, WriteRequest::new(ns(), format!("another tenant's memory number {i}"), Route::Direct)).unwrap();
    }
    let t = acme();
    let key = user_key();
    for p in [
        principal(&t, "alice", PrincipalKind::User, None, false, Some(&key)),
        principal(&t, "agent", PrincipalKind::Agent, None, false, None),
        principal(&t, "bob", PrincipalKind::Agent, None, false, None),
        principal(&t, "inbox", PrincipalKind::Source, Some("mail.example"), false, None),
        principal(&t, "ocr", PrincipalKind::Tool, Some("ocr.example"), true, None),
        principal(&t, "bank", PrincipalKind::Tool, Some("bank.example"), true, None),
    ] {
        e.register_principal(p).unwrap();
    }
    let agent = e.authenticate(&t, &pid("agent")).unwrap();
    let (offsite, _) = e.add(&agent, WriteRequest::new(ns(), "the quarterly offsite moves to the lake house", Route::Direct)).unwrap();
    let (doomed, _) = e.add(&agent, WriteRequest::new(ns(), "the old badge code is 1234", Route::Direct)).unwrap();
    let (secret, _) = e.add(&agent, WriteRequest::new(ns(), ERASED_TEXT, Route::Direct)).unwrap();
    let inbox = e.authenticate(&t, &pid("inbox")).unwrap();
    let (email, _) = e.add(&inbox, WriteRequest::new(ns(), "Pay the deposit to ACCT-9 today.", Route::ExternalObservation)).unwrap();
    e.derive(&agent, ns(), &[email.id()], "summary: the mail asks for a deposit".into()).unwrap();
    let args = vec![ToolArg { key: "payee".into(), value: "ACCT-9".into(), kind: ValueKind::Account, sources: vec![] }];
    e.tool_call(&agent, &pid("ocr"), ns(), args, &[], "OCR: invoice for ACCT-9".into()).unwrap();
    e.attest(&e.authenticate(&t, &pid("ocr")).unwrap(), "payee", "ACCT-7", ValueKind::Account, &[]).unwrap();
    e.attest(&e.authenticate(&t, &pid("bank")).unwrap(), "payee", "ACCT-7", ValueKind::Account, &[]).unwrap();
    let spec = GrantSpec { store: e.store_id(), tool: "pay", key: "payee", value: "ACCT-9", kind: ValueKind::Account, amount: None, ttl_ms: 3_600_000 };
    let grant = mint_grant(&key, &t, &pid("alice"), &spec, e.now_ms()).unwrap();
    e.record_grant(&grant).unwrap();
    let (v, _) = e.decide(&agent, &pay(&[email.id()], vec![grant.clone()])).unwrap();
    assert_eq!(v.decision, Decision::Allow, "the grant backs the payment: {v:?}");
    e.revoke(&agent, &doomed.id(), "stale").unwrap();
    e.update(&agent, &offsite.id(), "the quarterly offsite moves to the lake house on Friday".into()).unwrap();
    e.erase(&agent, &secret.id()).unwrap();
    // A session that reads the mail is tainted (a session row and its log entry).
    let s = e.authenticate_session(&t, &pid("agent"), SessionId::new("reader-1").unwrap()).unwrap();
    e.get(&s, &email.id()).unwrap();
    let (lesson, _) = e.add(&agent, WriteRequest::new(ns(), "Parse the date column as ISO-8601, then sort.", Route::PostTaskExperience)).unwrap();
    let bob = e.authenticate(&t, &pid("bob")).unwrap();
    let (recs, _) = e.feedback(&bob, &[lesson.id()], true).unwrap();
    assert_eq!(recs.len(), 1, "feedback moved a guard state and a reputation");
    let hits = e.search(&agent, &ns(), QUERY, 3).unwrap();
    let top_hit = hits.first().map(|h| h.item.id()).expect("a search hit");
    assert!(e.verify_log().unwrap().is_ok());
    Built { grant, email: email.id(), top_hit }
}

fn export_sqlite(data: &Path, keys: &Path) -> Vec<u8> {
    let store = SqliteStore::open(data, store_config(keys)).unwrap();
    let mut out = Vec::new();
    store.export_tenant(&acme(), 1, &mut out).unwrap();
    out
}

/// Every row of tenant `acme` in the schema, per table (what "the target unchanged" compares).
fn pg_rows(config: &PgConfig, tenant: &str) -> Vec<(String, i64)> {
    let mut c = postgres::Client::connect(&config.url, postgres::NoTls).unwrap();
    let mut out = Vec::new();
    for t in ["log", "heads", "checkpoints", "principals", "items", "erased", "attestations", "elevations", "grants_used", "sessions", "reputation", "lineage_events", "vectors"] {
        let n: i64 = c.query_one(&format!("SELECT count(*) FROM \"{}\".{t} WHERE tenant = $1", config.schema), &[&tenant]).unwrap().get(0);
        out.push((t.to_owned(), n));
    }
    out
}

#[test]
fn a_sqlite_tenant_moves_to_postgres_with_the_same_chain_and_its_used_grant_stays_used() {
    let dir = tempfile::tempdir().unwrap();
    let (data, keys) = (dir.path().join("data"), dir.path().join("keys"));
    let built = build(&data, &keys);
    let (source_root, source_items) = {
        let s = SqliteStore::open(&data, store_config(&keys)).unwrap();
        (s.log_root_of(&acme()), s.items_in_order(&acme(), None, 10_000).unwrap())
    };
    let file = export_sqlite(&data, &keys);
    let text = String::from_utf8(file.clone()).unwrap();
    assert!(!text.contains("zebra-unicorn"), "the erased text is in the export");
    assert!(text.contains("[erased]"), "the erased memory travels as its tombstone");

    let schema = Schema::new(&dir.path().join("pg-keys"));
    let pg = schema.open();
    let imported = pg.import_tenant(&mut file.as_slice(), 2).unwrap();
    assert_eq!((imported.log.size, imported.log.root, imported.log.head), source_root, "the same chain");
    assert_eq!(pg.log_root_of(&acme()), source_root);
    assert!(pg.verify_log_of(&acme()).unwrap().is_ok());
    assert!(pg.verify_log().unwrap().is_ok());
    // The target's own checkpoint at the imported size, signed with the target's key.
    let cps = pg.checkpoints_of(&acme()).unwrap();
    assert_eq!(cps.len(), 1);
    assert_eq!(cps[0].checkpoint.size, source_root.0);
    cps[0].verify(&ed25519_dalek::VerifyingKey::from_bytes(&pg.log_public_key()).unwrap()).unwrap();
    // Every memory readable with the same label and origin; the erased one a tombstone.
    for o in &source_items {
        let got = pg.item(&acme(), &o.item.id()).unwrap();
        if o.erased {
            assert!(got.is_none());
        } else {
            let got = got.unwrap_or_else(|| panic!("{} missing on the target", o.item.id()));
            assert_eq!((got.label(), got.origin(), got.status()), (o.item.label(), o.item.origin(), o.item.status()));
        }
    }
    let target_items = pg.items_in_order(&acme(), None, 10_000).unwrap();
    assert_eq!(target_items.iter().map(|o| (o.item.id(), o.erased)).collect::<Vec<_>>(), source_items.iter().map(|o| (o.item.id(), o.erased)).collect::<Vec<_>>());
    // A second process opening the schema verifies the imported tenant from scratch.
    let fresh = schema.open();
    assert_eq!(fresh.log_root_of(&acme()), source_root);
    drop(fresh);
    // The erased text is in no table of the target.
    let mut c = postgres::Client::connect(&schema.0.url, postgres::NoTls).unwrap();
    for (t, col) in [("items", "record"), ("erased", "tombstone"), ("lineage_events", "event"), ("sessions", "record")] {
        let n: i64 = c.query_one(&format!("SELECT count(*) FROM \"{}\".{t} WHERE {col} LIKE '%zebra-unicorn%'", schema.0.schema), &[]).unwrap().get(0);
        assert_eq!(n, 0, "erased text in {t}");
    }
    let n: i64 = c.query_one(&format!("SELECT count(*) FROM \"{}\".log WHERE position('zebra-unicorn'::bytea in entry) > 0", schema.0.schema), &[]).unwrap().get(0);
    assert_eq!(n, 0, "erased text in the log");

    // The engine over the target: search finds the same memory (vector and lexical), the used
    // grant is refused (another store's, and used), and new writes (new vector keys above the imported ones) work.
    let e = Engine::with_store(Arc::new(pg), config(&keys)).unwrap();
    let agent = e.authenticate(&acme(), &pid("agent")).unwrap();
    let hits = e.search(&agent, &ns(), QUERY, 3).unwrap();
    assert_eq!(hits.first().map(|h| h.item.id()), Some(built.top_hit), "the same top hit: {hits:?}");
    let lexical = e.store().search_lexical(&acme(), &ns(), "lake house offsite", &[1.0; 64], 3, &pid("agent")).unwrap();
    assert!(!lexical.is_empty(), "the text index was filled on import");
    let (v, _) = e.decide(&agent, &pay(&[built.email], vec![built.grant.clone()])).unwrap();
    assert_ne!(v.decision, Decision::Allow, "the used grant is refused on the target: {v:?}");
    // The grant names the source store (issue 34.6), so the target refuses it as foreign, and
    // its nonce moved with the tenant: used there too.
    assert!(format!("{v:?}").contains("foreign_store"), "refused as another store's: {v:?}");
    assert!(e.store().grant_used(&acme(), &built.grant.grant.nonce).unwrap(), "the used nonce moved with the tenant");
    for i in 0..5 {
        e.add(&agent, WriteRequest::new(ns(), format!("written on PostgreSQL after the move, number {i}"), Route::Direct)).unwrap();
    }
    let hits = e.search(&agent, &ns(), "written on PostgreSQL after the move number 3", 10).unwrap();
    assert!(hits.iter().any(|h| h.item.content().contains("number 3")), "{hits:?}");
    assert!(e.store().verify_log_of(&acme()).unwrap().is_ok());
    let after = e.store().log_root_of(&acme());
    assert!(after.0 > source_root.0);
    assert_eq!(e.store().consistency_proof_of(&acme(), source_root.0, after.0).map(|p| !p.is_empty()).ok(), Some(true), "the moved log extends the source's");

    // And back: PostgreSQL → a fresh SQLite directory holds the (now longer) same chain.
    let pg2 = schema.open();
    let mut back = Vec::new();
    pg2.export_tenant(&acme(), 3, &mut back).unwrap();
    let (data2, keys2) = (dir.path().join("data2"), dir.path().join("keys2"));
    let again = SqliteStore::import_tenant(&data2, store_config(&keys2), &mut back.as_slice(), 4).unwrap();
    assert_eq!((again.log.size, again.log.root, again.log.head), after);
    let s2 = SqliteStore::open(&data2, store_config(&keys2)).unwrap();
    assert!(s2.verify_log().unwrap().is_ok());
    assert_eq!(s2.log_root_of(&acme()), after);
    drop(s2);
    assert!(SqliteStore::verify_dir_with(&data2, &store_config(&keys2)).unwrap().is_ok());
    let e2 = Engine::open(&data2, config(&keys2)).unwrap();
    let a2 = e2.authenticate(&acme(), &pid("agent")).unwrap();
    assert_eq!(e2.search(&a2, &ns(), QUERY, 3).unwrap().first().map(|h| h.item.id()), Some(built.top_hit));
}

/// Apply `edit` to the export's lines.
fn edited(file: &[u8], edit: impl Fn(&mut Vec<String>)) -> Vec<u8> {
    let mut lines: Vec<String> = String::from_utf8(file.to_vec()).unwrap().lines().map(str::to_owned).collect();
    edit(&mut lines);
    let mut out = lines.join("\n").into_bytes();
    out.push(b'\n');
    out
}

fn line_of(lines: &[String], pred: impl Fn(&serde_json::Value) -> bool) -> usize {
    lines.iter().position(|l| pred(&serde_json::from_str(l).unwrap())).unwrap()
}

#[test]
fn a_tampered_truncated_or_duplicate_import_is_refused_and_the_target_is_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let (data, keys) = (dir.path().join("data"), dir.path().join("keys"));
    build(&data, &keys);
    let file = export_sqlite(&data, &keys);

    let schema = Schema::new(&dir.path().join("pg-keys"));
    let pg = schema.open();
    // A bystander tenant already in the target.
    let bystander = TenantId::new("bystander").unwrap();
    {
        let e = Engine::with_store(Arc::new(schema.open()), config(&keys)).unwrap();
        e.register_principal(principal(&bystander, "agent", PrincipalKind::Agent, None, false, None)).unwrap();
        let a = e.authenticate(&bystander, &pid("agent")).unwrap();
        e.add(&a, WriteRequest::new(ns(), "the bystander's memory", Route::Direct)).unwrap();
    }
    let bystander_root = pg.log_root_of(&bystander);
    let empty = pg_rows(&schema.0, "acme");
    assert!(empty.iter().all(|(_, n)| *n == 0));

    let flipped = edited(&file, |lines| {
        let i = line_of(lines, |v| v["type"] == "entry" && v["idx"] == 7);
        let mut v: serde_json::Value = serde_json::from_str(&lines[i]).unwrap();
        let mut bytes = hex::decode(v["bytes"].as_str().unwrap()).unwrap();
        let last = bytes.len() - 2;
        bytes[last] ^= 0x01;
        v["bytes"] = hex::encode(bytes).into();
        lines[i] = v.to_string();
    });
    let changed_item = edited(&file, |lines| {
        let i = line_of(lines, |v| v["type"] == "row" && v["table"] == "items");
        let mut v: serde_json::Value = serde_json::from_str(&lines[i]).unwrap();
        v["row"]["created_ms"] = (v["row"]["created_ms"].as_i64().unwrap() + 1).into();
        lines[i] = v.to_string();
    });
    let dropped_row = edited(&file, |lines| {
        let i = line_of(lines, |v| v["type"] == "row" && v["table"] == "grants_used");
        lines.remove(i);
    });
    let dropped_trailer = edited(&file, |lines| {
        lines.pop();
    });
    let dropped_entry = edited(&file, |lines| {
        let i = line_of(lines, |v| v["type"] == "entry" && v["idx"] == 3);
        lines.remove(i);
    });
    let cut_mid_line = file[..file.len() - 40].to_vec();
    type Expect = fn(&TransferError) -> bool;
    let cases: [(&str, Vec<u8>, Expect); 6] = [
        ("a flipped byte in an entry", flipped, |e| matches!(e, TransferError::Verify(_))),
        ("a changed item row", changed_item, |e| matches!(e, TransferError::Verify(_))),
        ("a dropped row line", dropped_row, |e| matches!(e, TransferError::Truncated(_) | TransferError::Verify(_))),
        ("a dropped trailer", dropped_trailer, |e| matches!(e, TransferError::Truncated(_))),
        ("a dropped entry line", dropped_entry, |e| matches!(e, TransferError::Format { .. })),
        ("a file cut mid-line", cut_mid_line, |e| matches!(e, TransferError::Truncated(_))),
    ];
    for (what, bytes, expected) in &cases {
        let err = pg.import_tenant(&mut bytes.as_slice(), 5).err().unwrap_or_else(|| panic!("{what}: imported"));
        assert!(expected(&err), "{what}: {err}");
        assert_eq!(pg_rows(&schema.0, "acme"), empty, "{what}: the target holds rows of acme after a refused import ({err})");
        assert_eq!(pg.log_len_of(&acme()), 0, "{what}");
        assert_eq!(pg.log_root_of(&bystander), bystander_root, "{what}");
        // Into SQLite too: refused, nothing of acme left.
        let sq = dir.path().join(format!("sqlite-{}", what.replace(' ', "-")));
        let sk = dir.path().join(format!("sqlite-keys-{}", what.replace(' ', "-")));
        let err = SqliteStore::import_tenant(&sq, store_config(&sk), &mut bytes.as_slice(), 5).err().unwrap_or_else(|| panic!("{what}: imported into SQLite"));
        assert!(expected(&err), "{what} (SQLite): {err}");
        if sq.join("memwarden.db").exists() {
            let s = SqliteStore::open(&sq, store_config(&sk)).unwrap();
            assert_eq!(s.log_len_of(&acme()), 0, "{what} (SQLite)");
            assert_eq!(s.count(&acme()).unwrap(), 0, "{what} (SQLite)");
        }
    }
    assert!(pg.verify_log().unwrap().is_ok());

    // The untouched file imports; a second import of the same tenant is refused.
    let imported = pg.import_tenant(&mut file.as_slice(), 6).unwrap();
    let rows = pg_rows(&schema.0, "acme");
    let err = pg.import_tenant(&mut file.as_slice(), 7).err().unwrap();
    assert!(matches!(err, TransferError::TenantExists(_)), "{err}");
    assert_eq!(pg_rows(&schema.0, "acme"), rows, "the refused second import changed the target");
    assert_eq!(pg.log_root_of(&acme()), (imported.log.size, imported.log.root, imported.log.head));
    // Also refused by a SQLite store that already has the tenant (the source itself).
    let err = SqliteStore::import_tenant(&data, store_config(&keys), &mut file.as_slice(), 8).err().unwrap();
    assert!(matches!(err, TransferError::TenantExists(_)), "{err}");
    assert!(pg.verify_log().unwrap().is_ok());
}

#[test]
fn a_sqlite_target_whose_store_wide_vector_keys_are_taken_refuses_the_tenant_and_keeps_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let (data, keys) = (dir.path().join("data"), dir.path().join("keys"));
    build(&data, &keys);
    let file = export_sqlite(&data, &keys);
    // acme's vector keys run from 61 (another tenant took 1..=60 in the source). A target whose
    // own tenant holds 100 vectors has those keys taken: refused, nothing of acme left.
    let fill = |n: usize, data: &Path, keys: &Path| {
        let e = Engine::open(data, config(keys)).unwrap();
        let t = TenantId::new("resident").unwrap();
        e.register_principal(principal(&t, "agent", PrincipalKind::Agent, None, false, None)).unwrap();
        let a = e.authenticate(&t, &pid("agent")).unwrap();
        for i in 0..n {
            e.add(&a, WriteRequest::new(ns(), format!("a resident memory, number {i}"), Route::Direct)).unwrap();
        }
    };
    let (full, full_keys) = (dir.path().join("full"), dir.path().join("full-keys"));
    fill(100, &full, &full_keys);
    let before = SqliteStore::open(&full, store_config(&full_keys)).unwrap().log_root_of(&TenantId::new("resident").unwrap());
    let err = SqliteStore::import_tenant(&full, store_config(&full_keys), &mut file.as_slice(), 9).err().unwrap();
    assert!(matches!(err, TransferError::Target(_)) && err.to_string().contains("fresh data directory"), "{err}");
    let s = SqliteStore::open(&full, store_config(&full_keys)).unwrap();
    assert_eq!(s.log_len_of(&acme()), 0);
    assert_eq!(s.count(&acme()).unwrap(), 0);
    assert_eq!(s.log_root_of(&TenantId::new("resident").unwrap()), before);
    assert!(s.verify_log().unwrap().is_ok());
    drop(s);
    // A target whose keys stop below acme's takes it, beside its own tenant, and both search.
    let (small, small_keys) = (dir.path().join("small"), dir.path().join("small-keys"));
    fill(10, &small, &small_keys);
    SqliteStore::import_tenant(&small, store_config(&small_keys), &mut file.as_slice(), 10).unwrap();
    let e = Engine::open(&small, config(&small_keys)).unwrap();
    assert!(e.verify_log().unwrap().is_ok());
    let a = e.authenticate(&acme(), &pid("agent")).unwrap();
    assert!(!e.search(&a, &ns(), QUERY, 3).unwrap().is_empty());
    let (late, _) = e.add(&a, WriteRequest::new(ns(), "written after the move into a shared SQLite store", Route::Direct)).unwrap();
    assert!(e.search(&a, &ns(), "written after the move into a shared SQLite store", 3).unwrap().iter().any(|h| h.item.id() == late.id()));
    let r = e.authenticate(&TenantId::new("resident").unwrap(), &pid("agent")).unwrap();
    assert_eq!(e.search(&r, &ns(), "a resident memory, number 4", 10).unwrap().len(), 10);
}
