//! The store's vector indexes: guarded search against a reference model (property test, over
//! many access classes, with revocations moving keys between classes, lexical search under the
//! same filter), and index/store
//! consistency across a clean close, a crash image (rows and revocations after the last save),
//! a damaged index file, rows erased while closed, a legacy index file, and the schema-1
//! migration.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::collections::BTreeSet;
use std::path::Path;

use memwarden_core::prelude::*;
use memwarden_index::SearchPath;
use memwarden_store::{CommitError, Mutation, SqliteStore, Store, StoreConfig, StoreError};
use proptest::prelude::*;

const DIMS: usize = 8;
const PRINCIPALS: [&str; 6] = ["ana", "ben", "cai", "dev", "eve", "fay"];

fn tenant() -> TenantId {
    TenantId::new("acme").unwrap()
}

fn ns() -> Namespace {
    Namespace::new("notes").unwrap()
}

fn pid(i: usize) -> PrincipalId {
    PrincipalId::new(PRINCIPALS[i]).unwrap()
}

/// Built from its JSON form, so the test does not depend on the fields it leaves at their defaults.
fn principal(i: usize) -> Principal {
    serde_json::from_value(serde_json::json!({
        "id": pid(i), "tenant": tenant(), "kind": "agent", "domain": null, "allow_listed": false, "public_key": null
    }))
    .unwrap()
}

/// One memory of the reference model: who wrote it, who else may read it (`None`: everyone),
/// and its vector.
#[derive(Debug, Clone)]
struct Spec {
    writer: usize,
    readers: Option<BTreeSet<usize>>,
    vector: Vec<f32>,
    /// Held back at write (a lifecycle gate may quarantine or block an admitted write).
    status: Status,
    /// Revoked by its writer after the write (the property test applies it between two rounds
    /// of queries).
    revoke: bool,
}

impl Spec {
    fn readable_by(&self, reader: usize, revocations_applied: bool) -> bool {
        !(revocations_applied && self.revoke)
            && self.status == Status::Active
            && (self.writer == reader || self.readers.as_ref().is_none_or(|r| r.contains(&reader)))
    }
}

/// Deterministic vectors (splitmix64), clustered around a few centres like real embeddings.
fn vector(seed: u64) -> Vec<f32> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xD1B5_4A32_D192_ED03;
    let mut next = || {
        x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) as f64 / u64::MAX as f64) as f32 - 0.5
    };
    let centre = (seed % 5) as usize;
    (0..DIMS).map(|d| next() * 0.6 + if d == centre { 1.0 } else { 0.0 }).collect()
}

/// The key directory inside the data directory (the old layout), so a copied directory (a
/// crash image) carries its key and witness along.
fn open(dir: &Path, exact_below: Option<usize>) -> SqliteStore {
    SqliteStore::open(dir, StoreConfig { vector_exact_below: exact_below, ..StoreConfig::default() }.with_keys_in_data_dir()).unwrap()
}

fn register_all(store: &SqliteStore) {
    let rs = store.commit(0, (0..PRINCIPALS.len()).map(|i| Mutation::Principal(principal(i))).collect()).unwrap();
    for r in rs {
        match r {
            Ok(_) | Err(CommitError::PrincipalExists(_)) => {}
            Err(e) => panic!("{e}"),
        }
    }
}

/// Writes `specs` through the authority gate, in batches; returns their ids in order.
fn write(store: &SqliteStore, specs: &[Spec], first_id: u64) -> Vec<ItemId> {
    let gate = Authority::default();
    let mut ids = Vec::new();
    for (chunk_no, chunk) in specs.chunks(512).enumerate() {
        let mut muts = Vec::new();
        for (j, s) in chunk.iter().enumerate() {
            let n = first_id + (chunk_no * 512 + j) as u64;
            let mut raw = [0u8; 16];
            raw[..8].copy_from_slice(&n.to_be_bytes());
            let id = ItemId::from_bytes(raw);
            let mut req = WriteRequest::new(ns(), format!("memory {n}"), Route::Direct);
            req.readers = s.readers.as_ref().map(|r| r.iter().map(|&i| pid(i)).collect());
            let mut admitted = gate.admit_write(&principal(s.writer), &tenant(), req, &[], id, n).unwrap();
            let guard = admitted.item().guard().clone();
            admitted.restrict(s.status, guard);
            muts.push(Mutation::Item { write: admitted, embedding: Some(s.vector.clone()) });
            ids.push(id);
        }
        for r in store.commit(1, muts).unwrap() {
            r.unwrap();
        }
    }
    ids
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let na: f32 = a.iter().map(|x| x * x).sum::<f32>().sqrt();
    let nb: f32 = b.iter().map(|x| x * x).sum::<f32>().sqrt();
    dot / (na * nb)
}

/// Revokes (as its writer) every item flagged `revoke`.
fn revoke_flagged(store: &SqliteStore, specs: &[Spec], ids: &[ItemId]) {
    let gate = Authority::default();
    let mut muts = Vec::new();
    for (s, id) in specs.iter().zip(ids).filter(|(s, _)| s.revoke) {
        let item = store.item(&tenant(), id).unwrap().unwrap();
        muts.push(Mutation::Revocation(gate.admit_revocation(&principal(s.writer), &item, "test").unwrap()));
    }
    if !muts.is_empty() {
        for r in store.commit(2, muts).unwrap() {
            r.unwrap();
        }
    }
}

/// The reference answer: the `k` most similar items `reader` may read.
fn expected(specs: &[Spec], ids: &[ItemId], query: &[f32], k: usize, reader: usize, revoked: bool) -> Vec<ItemId> {
    let mut scored: Vec<(f32, ItemId)> = specs
        .iter()
        .zip(ids)
        .filter(|(s, _)| s.readable_by(reader, revoked))
        .map(|(s, id)| (cosine(query, &s.vector), *id))
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    scored.into_iter().take(k).map(|(_, id)| id).collect()
}

fn search(store: &SqliteStore, query: &[f32], k: usize, reader: usize) -> Vec<(ItemId, f32)> {
    store.search(&tenant(), &ns(), query, k, &pid(reader)).unwrap().into_iter().map(|h| (h.item.id(), h.similarity)).collect()
}

fn specs_strategy(max: usize) -> impl Strategy<Value = Vec<Spec>> {
    let status = prop_oneof![6 => Just(Status::Active), 1 => Just(Status::Quarantined), 1 => Just(Status::Blocked)];
    let readers = prop::option::weighted(0.6, prop::collection::btree_set(0..PRINCIPALS.len(), 0..4));
    let spec = (0..PRINCIPALS.len(), readers, any::<u64>(), status, prop::bool::weighted(0.15))
        .prop_map(|(writer, readers, seed, status, revoke)| Spec { writer, readers, vector: vector(seed), status, revoke });
    prop::collection::vec(spec, 1..max)
}

/// The access classes the reference model's items fall in (reader set with the writer, or
/// everyone), retrievable items only.
fn classes_of(specs: &[Spec]) -> BTreeSet<Option<BTreeSet<usize>>> {
    specs
        .iter()
        .filter(|s| s.status == Status::Active)
        .map(|s| s.readers.as_ref().map(|r| r.iter().copied().chain([s.writer]).collect()))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Guarded search never returns an item the reader may not read (other readers' private
    /// items, quarantined, blocked or revoked items), always returns min(k, eligible) items,
    /// best first — before and after revocations move keys out of their access classes, with
    /// every class scanned exactly from its block (`exact`), with every class in its own graph
    /// (`graphs`), and with a low graph threshold where classes are promoted from a block to a
    /// graph while they grow (`mixed`). The all-blocks mode must equal the reference ranking.
    #[test]
    fn guarded_search_matches_the_reference_model(
        specs in specs_strategy(160),
        queries in prop::collection::vec((any::<u64>(), 1usize..24, 0..PRINCIPALS.len()), 1..6),
        mode in 0..3u8,
    ) {
        let (threshold, exact) = match mode {
            0 => (None, true),
            1 => (Some(0), false),
            _ => (Some(8), false),
        };
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path(), threshold);
        register_all(&store);
        let ids = write(&store, &specs, 1);
        let mut empty_answers = 0u64;
        for revoked in [false, true] {
            if revoked {
                revoke_flagged(&store, &specs, &ids);
            }
            for &(seed, k, reader) in &queries {
                let q = vector(seed ^ 0x5555);
                let got = search(&store, &q, k, reader);
                let want = expected(&specs, &ids, &q, k, reader, revoked);
                let eligible: BTreeSet<ItemId> =
                    specs.iter().zip(&ids).filter(|(s, _)| s.readable_by(reader, revoked)).map(|(_, id)| *id).collect();
                empty_answers += u64::from(eligible.is_empty());
                prop_assert_eq!(got.len(), want.len(), "min(k, eligible) items");
                for (id, _) in &got {
                    prop_assert!(eligible.contains(id), "{} got {} it may not read", PRINCIPALS[reader], id);
                }
                prop_assert!(got.windows(2).all(|w| w[0].1 >= w[1].1), "best first");
                // Lexical search (every text says "memory") is under the same filter and also
                // returns min(k, eligible) items.
                let lex = store.search_lexical(&tenant(), &ns(), "which memory?", &q, k, &pid(reader)).unwrap();
                prop_assert_eq!(lex.len(), want.len(), "lexical: min(k, eligible) items");
                for h in &lex {
                    prop_assert!(eligible.contains(&h.item.id()), "lexical: {} got {} it may not read", PRINCIPALS[reader], h.item.id());
                }
                if exact {
                    prop_assert_eq!(got.iter().map(|(id, _)| *id).collect::<Vec<_>>(), want);
                }
            }
        }
        let paths = store.search_path_counts();
        let used = |p: SearchPath| paths.iter().find(|(q, _)| *q == p).map_or(0, |(_, n)| *n);
        // The store never filters during a walk any more.
        prop_assert_eq!(used(SearchPath::AnnFiltered) + used(SearchPath::ExactSelective) + used(SearchPath::ExactAfterShortAnn), 0);
        match mode {
            0 => prop_assert_eq!(used(SearchPath::ClassedAnn) + used(SearchPath::ClassedExactAfterShortAnn), 0),
            // Every class has a graph: only a reader with nothing to read gets the (empty) exact answer.
            1 => prop_assert_eq!(used(SearchPath::ClassedExact), empty_answers),
            _ => {}
        }
        // (A reader with nothing to read in any query is answered exactly, without a walk.)
        let asked = 2 * queries.len() as u64;
        if mode == 1 && classes_of(&specs).len() > 1 && empty_answers < asked {
            prop_assert!(used(SearchPath::ClassedAnn) + used(SearchPath::ClassedExactAfterShortAnn) > 0);
        }
    }
}

/// Several access classes by construction: everyone, each writer alone, and writer pairs.
#[test]
fn several_classes_are_searched_and_merged() {
    let specs: Vec<Spec> = (0..600u64)
        .map(|i| {
            let writer = (i % 6) as usize;
            let readers = match i % 3 {
                0 => None,
                1 => Some(BTreeSet::new()),
                _ => Some([((i / 3) % 6) as usize].into_iter().collect()),
            };
            Spec { writer, readers, vector: vector(i.wrapping_mul(7) + 3), status: Status::Active, revoke: i % 10 == 0 }
        })
        .collect();
    assert!(classes_of(&specs).len() >= 8, "{} classes", classes_of(&specs).len());
    for threshold in [None, Some(0), Some(40)] {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path(), threshold);
        register_all(&store);
        let ids = write(&store, &specs, 1);
        for revoked in [false, true] {
            if revoked {
                revoke_flagged(&store, &specs, &ids);
            }
            for reader in 0..PRINCIPALS.len() {
                for seed in 0..6u64 {
                    let q = vector(9000 + seed);
                    let got = search(&store, &q, 10, reader);
                    let want = expected(&specs, &ids, &q, 10, reader, revoked);
                    assert_eq!(got.len(), want.len());
                    let eligible: BTreeSet<ItemId> =
                        specs.iter().zip(&ids).filter(|(s, _)| s.readable_by(reader, revoked)).map(|(_, id)| *id).collect();
                    assert!(got.iter().all(|(id, _)| eligible.contains(id)), "{threshold:?}: ineligible hit");
                    if threshold.is_none() {
                        assert_eq!(got.iter().map(|(id, _)| *id).collect::<Vec<_>>(), want);
                    } else {
                        let overlap = got.iter().filter(|(id, _)| want.contains(id)).count();
                        assert!(overlap >= 8, "{threshold:?}: recall {overlap}/10");
                    }
                }
            }
        }
    }
}

fn specs(n: usize, seed: u64) -> Vec<Spec> {
    (0..n)
        .map(|i| {
            let i = i as u64;
            let readers = if i.is_multiple_of(3) { Some([((i / 3) % 4) as usize].into_iter().collect()) } else { None };
            Spec { writer: (i % 4) as usize, readers, vector: vector(seed.wrapping_add(i)), status: Status::Active, revoke: false }
        })
        .collect()
}

fn index_files(dir: &Path) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(dir.join("index")).unwrap().map(|e| e.unwrap().path()).filter(|p| p.extension().is_some_and(|e| e == "classes")).collect()
}

fn all_answers(store: &SqliteStore, probes: &[Vec<f32>]) -> Vec<Vec<(ItemId, f32)>> {
    let mut out = Vec::new();
    for q in probes {
        for reader in 0..PRINCIPALS.len() {
            out.push(search(store, q, 10, reader));
        }
    }
    out
}

#[test]
fn a_clean_close_saves_the_index_and_reopen_loads_it() {
    let dir = tempfile::tempdir().unwrap();
    let specs = specs(300, 7);
    let probes: Vec<Vec<f32>> = (0..5).map(|i| vector(1000 + i)).collect();
    let before = {
        let store = open(dir.path(), Some(0));
        register_all(&store);
        write(&store, &specs, 1);
        assert_eq!(store.indexed_count(), 300);
        all_answers(&store, &probes)
    };
    let files = index_files(dir.path());
    assert_eq!(files.len(), 1, "one partition, one file");
    let stamp = std::fs::metadata(&files[0]).unwrap().modified().unwrap();
    let store = open(dir.path(), Some(0));
    assert_eq!(store.indexed_count(), 300);
    assert_eq!(all_answers(&store, &probes), before);
    drop(store);
    // Nothing changed, so the file was not rewritten.
    assert_eq!(std::fs::metadata(&files[0]).unwrap().modified().unwrap(), stamp);
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), target).unwrap();
        }
    }
}

#[test]
fn a_crash_image_replays_the_rows_committed_after_the_last_save() {
    let dir = tempfile::tempdir().unwrap();
    let all = specs(400, 11);
    {
        let store = open(dir.path(), None);
        register_all(&store);
        write(&store, &all[..250], 1);
    } // clean close: the index file holds the first 250 (its watermark)
    let store = open(dir.path(), None);
    let late = write(&store, &all[250..], 251);
    // What kill -9 leaves on disk now: the committed rows (SQLite WAL, synchronous=FULL) and
    // the index file from the last save. Copy it while the store is still open.
    let image = tempfile::tempdir().unwrap();
    copy_dir(dir.path(), image.path());
    let _ = std::fs::remove_file(image.path().join("memwarden.db-shm"));
    drop(store);
    let replayed = open(image.path(), None);
    assert_eq!(replayed.indexed_count(), 400);
    // Every late row is found by its own vector, first.
    for (spec, id) in all[250..].iter().zip(&late) {
        let hits = search(&replayed, &spec.vector, 1, spec.writer);
        assert_eq!(hits[0].0, *id);
    }
}

/// Revocations committed after the last save are in the table but not in the index file: a
/// crash image's reopen must move those keys out of their readable class (and a clean close
/// must have saved the moves).
#[test]
fn a_crash_image_moves_keys_revoked_after_the_last_save() {
    for threshold in [None, Some(0), Some(30)] {
        let dir = tempfile::tempdir().unwrap();
        let all = specs(300, 29);
        let ids = {
            let store = open(dir.path(), threshold);
            register_all(&store);
            write(&store, &all, 1)
        }; // clean close: every key saved in its readable class
        let flagged: Vec<Spec> = all.iter().enumerate().map(|(i, s)| Spec { revoke: i % 7 == 0, ..s.clone() }).collect();
        let store = open(dir.path(), threshold);
        revoke_flagged(&store, &flagged, &ids);
        let image = tempfile::tempdir().unwrap();
        copy_dir(dir.path(), image.path());
        let _ = std::fs::remove_file(image.path().join("memwarden.db-shm"));
        drop(store); // clean close: saves the moves
        for root in [image.path(), dir.path()] {
            let reopened = open(root, threshold);
            assert_eq!(reopened.indexed_count(), 300, "{threshold:?}: revoked vectors stay (parked)");
            for (i, (spec, id)) in flagged.iter().zip(&ids).enumerate() {
                for reader in 0..PRINCIPALS.len() {
                    let hits = search(&reopened, &spec.vector, 10, reader);
                    let eligible = flagged.iter().filter(|s| s.readable_by(reader, true)).count();
                    assert_eq!(hits.len(), eligible.min(10), "{threshold:?}");
                    if spec.revoke {
                        assert!(hits.iter().all(|(h, _)| h != id), "{threshold:?}: revoked item {i} came back after reopen");
                    }
                }
                if !spec.revoke {
                    let hits = search(&reopened, &spec.vector, 10, spec.writer);
                    assert!(hits.iter().any(|(h, _)| h == id), "{threshold:?}: item {i} not found by its writer");
                }
            }
        }
    }
}

/// Index files of the single-graph layout are a cache this build does not read: deleted at open.
#[test]
fn a_legacy_index_file_is_deleted_and_the_index_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    let specs = specs(50, 31);
    {
        let store = open(dir.path(), None);
        register_all(&store);
        write(&store, &specs, 1);
    }
    for f in index_files(dir.path()) {
        std::fs::remove_file(f).unwrap();
    }
    let legacy = dir.path().join("index").join("0123456789abcdef0123456789abcdef.usearch");
    std::fs::write(&legacy, b"MWANNIDX old layout").unwrap();
    let store = open(dir.path(), None);
    assert!(!legacy.exists());
    assert_eq!(store.indexed_count(), 50);
    assert!(search(&store, &specs[3].vector, 1, specs[3].writer)[0].1 > 0.999);
}

#[test]
fn a_damaged_index_file_is_rebuilt_from_the_table() {
    let dir = tempfile::tempdir().unwrap();
    let specs = specs(200, 13);
    let probes: Vec<Vec<f32>> = (0..4).map(|i| vector(2000 + i)).collect();
    let before = {
        let store = open(dir.path(), None);
        register_all(&store);
        write(&store, &specs, 1);
        all_answers(&store, &probes)
    };
    let file = index_files(dir.path()).pop().unwrap();
    let mut bytes = std::fs::read(&file).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0xFF;
    std::fs::write(&file, bytes).unwrap();
    let stages = std::sync::Mutex::new(Vec::<String>::new());
    let store = SqliteStore::open_with_progress(dir.path(), StoreConfig::default().with_keys_in_data_dir(), &|stage, _, _| {
        stages.lock().unwrap().push(stage.to_owned());
    })
    .unwrap();
    assert!(stages.lock().unwrap().iter().any(|s| s.starts_with("rebuild")), "rebuild reported: {:?}", stages.lock().unwrap());
    assert_eq!(store.indexed_count(), 200);
    assert_eq!(all_answers(&store, &probes), before);
}

/// Rows erased after the index file was saved: a crash image's index file still holds their
/// keys, and the reopen drops them. (Rows deleted behind the store's back are tampering, which
/// tests/tamper_state.rs covers.)
#[test]
fn rows_erased_after_the_last_save_leave_the_loaded_index() {
    let dir = tempfile::tempdir().unwrap();
    let specs = specs(120, 17);
    let ids = {
        let store = open(dir.path(), Some(0));
        register_all(&store);
        write(&store, &specs, 1)
    }; // clean close: the index file holds every key
    let gone = ids[5];
    let store = open(dir.path(), Some(0));
    let event = serde_json::json!({"erase": gone.to_string()});
    store.commit(3, vec![Mutation::Erasure { tenant: tenant(), ids: vec![gone], event }]).unwrap().pop().unwrap().unwrap();
    let image = tempfile::tempdir().unwrap();
    copy_dir(dir.path(), image.path());
    let _ = std::fs::remove_file(image.path().join("memwarden.db-shm"));
    drop(store);
    for root in [image.path(), dir.path()] {
        let store = open(root, Some(0));
        assert_eq!(store.indexed_count(), 119);
        let hits = search(&store, &specs[5].vector, 10, specs[5].writer);
        assert!(hits.iter().all(|(id, _)| *id != gone));
        assert_eq!(hits.len(), 10);
    }
}

/// A store from before the `vectors` table (the schema-4 fixture written by an earlier build,
/// with that table dropped and its schema set to 1) is migrated and indexed.
#[test]
fn a_schema_1_store_is_migrated_and_indexed() {
    let root = tempfile::tempdir().unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests").join("fixtures").join("schema4");
    let dir = root.path().join("data");
    std::fs::create_dir_all(dir.join("keys")).unwrap();
    std::fs::copy(src.join("memwarden.db"), dir.join("memwarden.db")).unwrap();
    std::fs::copy(src.join("keys").join("log.ed25519"), dir.join("keys").join("log.ed25519")).unwrap();
    {
        // Make it look like a store written before the vectors table existed.
        let conn = rusqlite::Connection::open(dir.join("memwarden.db")).unwrap();
        conn.execute_batch("DROP TABLE vectors; DELETE FROM meta WHERE key = 'vector_dims'; UPDATE meta SET value = 1 WHERE key = 'schema';").unwrap();
    }
    let store = open(&dir, None);
    assert_eq!(store.indexed_count(), 10, "five live memories with vectors in each of two tenants");
    let v: Vec<f32> = (0..DIMS).map(|d| if d == 1 { 1.0 } else { 0.1 * ((1 + d as u64) % 5) as f32 }).collect();
    let hits = store.search(&tenant(), &ns(), &v, 1, &PrincipalId::new("ben").unwrap()).unwrap();
    assert_eq!(hits.len(), 1);
    assert!(hits[0].similarity > 0.999);
}

#[test]
fn vectors_of_another_dimension_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), None);
    register_all(&store);
    write(&store, &specs(3, 23), 1);
    let gate = Authority::default();
    let admitted = gate.admit_write(&principal(0), &tenant(), WriteRequest::new(ns(), "odd", Route::Direct), &[], ItemId::from_bytes([9; 16]), 5).unwrap();
    let r = store.commit(6, vec![Mutation::Item { write: admitted.clone(), embedding: Some(vec![1.0; DIMS + 1]) }]).unwrap();
    assert!(matches!(&r[0], Err(CommitError::BadEmbedding(m)) if m.contains("8-dimensional")), "{r:?}");
    let r = store.commit(6, vec![Mutation::Item { write: admitted, embedding: Some(vec![0.0; DIMS]) }]).unwrap();
    assert!(matches!(&r[0], Err(CommitError::BadEmbedding(m)) if m.contains("zero")), "{r:?}");
    assert!(matches!(store.search(&tenant(), &ns(), &[1.0; 3], 5, &pid(0)), Err(StoreError::BadQuery(_))));
    assert!(matches!(store.search(&tenant(), &ns(), &vector(1), 0, &pid(0)), Err(StoreError::BadQuery(_))));
    // Another tenant's namespace of the same name is another partition: nothing there.
    let other = TenantId::new("globex").unwrap();
    assert!(store.search(&other, &ns(), &vector(1), 5, &pid(0)).unwrap().is_empty());
}
