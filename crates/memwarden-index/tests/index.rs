//! AnnIndex behaviour on clustered synthetic vectors (no model needed).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::collections::HashSet;
use std::path::Path;
use std::sync::{Arc, OnceLock};

use memwarden_index::{AnnIndex, IndexConfig, IndexError, MAX_K, Neighbor, RESERVED_KEY, SearchPath};
use proptest::prelude::*;

const DIMS: usize = 128;

/// Deterministic generator (splitmix64).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn unit(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 24) as f32
    }
    fn gauss(&mut self) -> f32 {
        let u1 = self.unit().max(1e-7);
        let u2 = self.unit();
        (-2.0 * u1.ln()).sqrt() * (std::f32::consts::TAU * u2).cos()
    }
}

fn normalise(mut v: Vec<f32>) -> Vec<f32> {
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    v.iter_mut().for_each(|x| *x /= n);
    v
}

/// `n` unit vectors in `clusters` clusters. Each cluster is a random centre plus a spread
/// along 16 cluster-specific directions plus a little isotropic noise, so, like real sentence
/// embeddings, the data has low intrinsic dimension. (Purely isotropic noise in 128 dimensions
/// makes all members of a cluster nearly equidistant from a query: the uniform-random
/// pathology, where no graph index reaches high recall.)
fn clustered(n: usize, clusters: usize, seed: u64) -> Vec<Vec<f32>> {
    const RANK: usize = 16;
    let mut shape = Rng(0xc1u64 << 32 | clusters as u64);
    let centres: Vec<(Vec<f32>, Vec<Vec<f32>>)> = (0..clusters)
        .map(|_| {
            let centre = normalise((0..DIMS).map(|_| shape.gauss()).collect());
            let dirs = (0..RANK).map(|_| normalise((0..DIMS).map(|_| shape.gauss()).collect())).collect();
            (centre, dirs)
        })
        .collect();
    let mut rng = Rng(seed);
    let spread = 0.5 / (RANK as f32).sqrt();
    let iso = 0.1 / (DIMS as f32).sqrt();
    (0..n)
        .map(|i| {
            let (centre, dirs) = &centres[i % clusters];
            let mut v = centre.clone();
            for d in dirs {
                let g = spread * rng.gauss();
                v.iter_mut().zip(d).for_each(|(x, y)| *x += g * y);
            }
            v.iter_mut().for_each(|x| *x += iso * rng.gauss());
            normalise(v)
        })
        .collect()
}

fn build(vectors: &[Vec<f32>]) -> AnnIndex {
    AnnIndex::build(IndexConfig::with_dims(DIMS), vectors.iter().enumerate().map(|(i, v)| (i as u64, v)), &|_, _| {})
        .unwrap()
}

fn keys(hits: &[Neighbor]) -> Vec<u64> {
    hits.iter().map(|h| h.key).collect()
}

/// A shared 3,000-vector index for the property test.
fn shared() -> &'static (AnnIndex, Vec<Vec<f32>>) {
    static S: OnceLock<(AnnIndex, Vec<Vec<f32>>)> = OnceLock::new();
    S.get_or_init(|| {
        let v = clustered(3000, 30, 11);
        (build(&v), v)
    })
}

#[test]
fn is_send_and_sync() {
    fn assert<T: Send + Sync>() {}
    assert::<AnnIndex>();
}

#[test]
fn recall_at_10_on_clustered_5k() {
    let data = clustered(5000, 50, 1);
    let index = build(&data);
    assert_eq!(index.len(), 5000);
    let queries = clustered(50, 50, 2);
    let mut total = 0.0;
    for q in &queries {
        let truth: HashSet<u64> = keys(&index.exact_search(q, 10).unwrap()).into_iter().collect();
        let got = index.search(q, 10).unwrap();
        assert_eq!(got.len(), 10);
        assert!(got.windows(2).all(|w| w[0].score >= w[1].score - 1e-6), "sorted best first");
        total += got.iter().filter(|h| truth.contains(&h.key)).count() as f64 / 10.0;
    }
    let recall = total / queries.len() as f64;
    assert!(recall >= 0.95, "recall@10 = {recall}");
}

#[test]
fn scores_are_cosine_and_inputs_are_normalised() {
    let index = AnnIndex::new(IndexConfig::with_dims(3)).unwrap();
    index.add(7, &[2.0, 0.0, 0.0]).unwrap(); // not unit length: normalised on the way in
    let hits = index.search(&[0.0, 5.0, 5.0], 1).unwrap();
    assert_eq!(hits[0].key, 7);
    assert!(hits[0].score.abs() < 1e-5, "{hits:?}");
    let hits = index.search(&[3.0, 0.0, 0.0], 1).unwrap();
    assert!((hits[0].score - 1.0).abs() < 1e-5);
    assert_eq!(index.vector(7).unwrap().unwrap(), vec![1.0, 0.0, 0.0]);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, .. ProptestConfig::default() })]

    /// Guarded search never returns an ineligible key and returns min(k, eligible) hits,
    /// whatever the filter's selectivity and whether or not an estimate is given.
    #[test]
    fn guarded_search_is_safe_and_complete(
        modulus in prop::sample::select(vec![1u64, 2, 3, 10, 37, 100, 400, 1500, 3000, 10_000]),
        residue in 0u64..10_000,
        k in 1usize..40,
        query in 0usize..3000,
        give_estimate in any::<bool>(),
        noise_seed in any::<u64>(),
    ) {
        let (index, data) = shared();
        let r = residue % modulus;
        let filter = move |key: u64| key % modulus == r;
        let eligible = (0..3000u64).filter(|&key| filter(key)).count();
        // A query near (not at) an indexed vector.
        let mut rng = Rng(noise_seed);
        let q = normalise(data[query].iter().map(|x| x + 0.05 * rng.gauss() / (DIMS as f32).sqrt()).collect());
        let res = index.search_guarded(&q, k, &filter, give_estimate.then_some(eligible)).unwrap();
        prop_assert!(res.hits.iter().all(|h| filter(h.key)), "ineligible hit in {:?}", res);
        prop_assert_eq!(res.hits.len(), k.min(eligible), "path {:?}", res.path);
        let distinct: HashSet<u64> = keys(&res.hits).into_iter().collect();
        prop_assert_eq!(distinct.len(), res.hits.len());
        if matches!(res.path, SearchPath::ExactSelective | SearchPath::ExactAfterShortAnn) {
            let oracle = index.exact_search_filtered(&q, k, &filter).unwrap();
            prop_assert_eq!(keys(&res.hits), keys(&oracle));
        }
    }
}

#[test]
fn guarded_paths_follow_selectivity() {
    let data = clustered(10_000, 40, 5);
    let index = build(&data);
    let q = &data[17];
    // ~50% eligible with an estimate: filtered graph search.
    let half = |k: u64| k.is_multiple_of(2);
    let r = index.search_guarded(q, 10, &half, Some(5000)).unwrap();
    assert_eq!(r.path, SearchPath::AnnFiltered);
    assert!(r.hits.iter().all(|h| half(h.key)));
    // ~1% eligible with an estimate: exact up front.
    let rare = |k: u64| k % 100 == 3;
    let r = index.search_guarded(q, 10, &rare, Some(100)).unwrap();
    assert_eq!(r.path, SearchPath::ExactSelective);
    assert_eq!(keys(&r.hits), keys(&index.exact_search_filtered(q, 10, &rare).unwrap()));
    // Three eligible keys, no estimate: the graph walk comes back short, exact finishes.
    let three = |k: u64| k == 1 || k == 5000 || k == 9999;
    let r = index.search_guarded(q, 10, &three, None).unwrap();
    assert_eq!(r.path, SearchPath::ExactAfterShortAnn);
    let mut got = keys(&r.hits);
    got.sort_unstable();
    assert_eq!(got, vec![1, 5000, 9999]);
    // Nothing eligible.
    let none = |_: u64| false;
    assert!(index.search_guarded(q, 10, &none, None).unwrap().hits.is_empty());
}

#[test]
fn a_panicking_filter_fails_the_search() {
    let (index, data) = shared();
    let bad = |k: u64| if k == 3 { panic!("boom") } else { true };
    for estimate in [None, Some(1)] {
        let err = index.search_guarded(&data[3], 5, &bad, estimate).unwrap_err();
        assert!(matches!(err, IndexError::FilterPanicked), "{err}");
    }
}

#[test]
fn removed_keys_never_come_back() {
    let data = clustered(2000, 20, 3);
    let index = build(&data);
    for key in (0..2000u64).filter(|k| k % 3 == 0) {
        assert!(index.remove(key).unwrap());
    }
    assert!(!index.remove(0).unwrap(), "second remove is a no-op");
    assert_eq!(index.len(), 2000 - 667);
    assert!(!index.contains(3) && index.contains(4));
    for q in data.iter().step_by(97) {
        let all = |_: u64| true;
        let hits = [
            index.search(q, 50).unwrap(),
            index.exact_search(q, 50).unwrap(),
            index.search_guarded(q, 50, &all, None).unwrap().hits,
            index.search_guarded(q, 50, &all, Some(10)).unwrap().hits,
        ];
        for h in hits {
            assert!(h.iter().all(|n| n.key % 3 != 0), "{h:?}");
        }
    }
    // Re-adding reuses freed slots and the key is found again.
    index.add(3, &data[3]).unwrap();
    assert_eq!(index.search(&data[3], 1).unwrap()[0].key, 3);
}

#[test]
fn add_replaces_an_existing_key() {
    let index = AnnIndex::new(IndexConfig::with_dims(2)).unwrap();
    index.add(1, &[1.0, 0.0]).unwrap();
    index.add(2, &[0.8, 0.6]).unwrap();
    index.add(1, &[0.0, 1.0]).unwrap();
    assert_eq!(index.len(), 2);
    assert_eq!(keys(&index.search(&[0.0, 1.0], 2).unwrap()), vec![1, 2]);
    assert_eq!(keys(&index.search(&[1.0, 0.0], 2).unwrap()), vec![2, 1]);
}

#[test]
fn build_keeps_the_last_duplicate_and_reports_progress() {
    // 10,000 items in two bulk batches; keys repeat within the first batch and across batches.
    let data = clustered(10_000, 10, 9);
    let calls = std::sync::Mutex::new(Vec::new());
    let items = data.iter().enumerate().map(|(i, v)| ((i % 7_000) as u64, v));
    let index = AnnIndex::build(IndexConfig::with_dims(DIMS), items, &|d, t| calls.lock().unwrap().push((d, t))).unwrap();
    assert_eq!(index.len(), 7_000);
    for (key, last) in [(10u64, 7_010usize), (1_200, 8_200), (6_999, 6_999)] {
        let stored = index.vector(key).unwrap().unwrap();
        assert!(stored.iter().zip(&data[last]).all(|(a, b)| (a - b).abs() < 1e-5), "key {key} holds item {last}");
    }
    let calls = calls.into_inner().unwrap();
    assert_eq!(calls.first(), Some(&(0, 10_000)));
    assert_eq!(calls.last(), Some(&(10_000, 10_000)));
    assert!(index.memory_bytes() > 7_000 * DIMS * 4);
}

#[test]
fn concurrent_adds_removes_and_searches() {
    let data = Arc::new(clustered(4000, 20, 21));
    let index = Arc::new(build(&data[..2000]));
    let mut handles = Vec::new();
    for t in 0..4u64 {
        let (index, data) = (Arc::clone(&index), Arc::clone(&data));
        handles.push(std::thread::spawn(move || {
            for i in 0..500u64 {
                let key = 2000 + t * 500 + i;
                index.add(key, &data[key as usize]).unwrap();
                if i % 5 == 0 {
                    index.remove(key).unwrap();
                }
                let q = &data[(key as usize * 7) % 4000];
                if i % 10 == 0 {
                    // Small index: this takes the exact path, slow in an unoptimised build.
                    let even = |k: u64| k.is_multiple_of(2);
                    assert!(index.search_guarded(q, 10, &even, None).unwrap().hits.iter().all(|h| h.key.is_multiple_of(2)));
                }
                assert!(index.search(q, 10).unwrap().len() == 10);
            }
        }));
    }
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(index.len(), 2000 + 2000 - 400);
}

/// Each row: what a bad input is, the call, and the error it must give.
#[test]
fn bad_inputs_are_refused() {
    let index = AnnIndex::new(IndexConfig::with_dims(4)).unwrap();
    index.add(1, &[1.0, 0.0, 0.0, 0.0]).unwrap();
    type Case<'a> = (&'a str, Box<dyn Fn() -> Result<(), IndexError> + 'a>, fn(&IndexError) -> bool);
    let cases: Vec<Case> = vec![
        ("add: too few dims", Box::new(|| index.add(2, &[1.0, 0.0])), |e| matches!(e, IndexError::WrongDims { expected: 4, got: 2 })),
        ("add: too many dims", Box::new(|| index.add(2, &[1.0; 5])), |e| matches!(e, IndexError::WrongDims { expected: 4, got: 5 })),
        ("add: NaN", Box::new(|| index.add(2, &[1.0, f32::NAN, 0.0, 0.0])), |e| matches!(e, IndexError::NonFinite { position: 1 })),
        ("add: infinity", Box::new(|| index.add(2, &[f32::INFINITY, 0.0, 0.0, 0.0])), |e| matches!(e, IndexError::NonFinite { position: 0 })),
        ("add: zero vector", Box::new(|| index.add(2, &[0.0; 4])), |e| matches!(e, IndexError::ZeroVector)),
        ("add: reserved key", Box::new(|| index.add(RESERVED_KEY, &[1.0; 4])), |e| matches!(e, IndexError::ReservedKey(_))),
        ("search: wrong dims", Box::new(|| index.search(&[1.0; 3], 1).map(drop)), |e| matches!(e, IndexError::WrongDims { .. })),
        ("search: k too large", Box::new(|| index.search(&[1.0; 4], MAX_K + 1).map(drop)), |e| matches!(e, IndexError::Config { field: "k", .. })),
        ("guarded: wrong dims", Box::new(|| index.search_guarded(&[1.0; 8], 1, &|_| true, None).map(drop)), |e| matches!(e, IndexError::WrongDims { .. })),
        ("exact: NaN query", Box::new(|| index.exact_search(&[f32::NAN; 4], 1).map(drop)), |e| matches!(e, IndexError::NonFinite { .. })),
        ("config: dims 0", Box::new(|| AnnIndex::new(IndexConfig::with_dims(0)).map(drop)), |e| matches!(e, IndexError::Config { field: "dims", .. })),
        ("config: dims 4097", Box::new(|| AnnIndex::new(IndexConfig::with_dims(4097)).map(drop)), |e| matches!(e, IndexError::Config { field: "dims", .. })),
        ("config: M 1", Box::new(|| AnnIndex::new(IndexConfig { connectivity: 1, ..IndexConfig::default() }).map(drop)), |e| matches!(e, IndexError::Config { field: "connectivity", .. })),
        ("config: no concurrency", Box::new(|| AnnIndex::new(IndexConfig { max_concurrent_ops: 0, ..IndexConfig::default() }).map(drop)), |e| matches!(e, IndexError::Config { field: "max_concurrent_ops", .. })),
        ("ef 0", Box::new(|| index.set_expansion_search(0, 10)), |e| matches!(e, IndexError::Config { field: "expansion_search", .. })),
    ];
    for (name, call, expected) in cases {
        let err = call().expect_err(name);
        assert!(expected(&err), "{name}: got {err:?}");
    }
    assert_eq!(index.len(), 1, "failed adds leave the index unchanged");
    assert!(index.search(&[1.0; 4], 0).unwrap().is_empty());
}

#[test]
fn save_load_round_trip() {
    let data = clustered(3000, 30, 31);
    let index = build(&data);
    for key in 0..100 {
        index.remove(key).unwrap();
    }
    index.set_expansion_search(80, 40).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ann.idx");
    index.save(&path, 123_456).unwrap();
    index.save(&path, 123_457).unwrap(); // overwrite in place
    let leftovers: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(leftovers.len(), 1, "no temporary files left: {leftovers:?}");

    let (loaded, watermark) = AnnIndex::load(&path, DIMS).unwrap();
    assert_eq!(watermark, 123_457);
    assert_eq!(loaded.len(), index.len());
    assert_eq!(loaded.config(), index.config());
    let mut a = index.keys();
    let mut b = loaded.keys();
    a.sort_unstable();
    b.sort_unstable();
    assert_eq!(a, b);
    let odd = |k: u64| k % 2 == 1;
    for q in data.iter().step_by(101) {
        assert_eq!(index.search(q, 10).unwrap(), loaded.search(q, 10).unwrap());
        assert_eq!(
            index.search_guarded(q, 10, &odd, None).unwrap(),
            loaded.search_guarded(q, 10, &odd, None).unwrap()
        );
        assert!(loaded.search(q, 10).unwrap().iter().all(|h| h.key >= 100), "removed keys stay removed");
    }
    // The loaded index keeps working: adds (slot reuse and growth) and removes.
    for (i, v) in clustered(2000, 5, 32).iter().enumerate() {
        loaded.add(10_000 + i as u64, v).unwrap();
    }
    assert_eq!(loaded.len(), 2900 + 2000);
    loaded.remove(10_000).unwrap();
    assert!(!loaded.contains(10_000));
}

fn saved_file(dir: &Path) -> (std::path::PathBuf, Vec<u8>) {
    let data = clustered(500, 5, 41);
    let index = build(&data);
    let path = dir.join("ann.idx");
    index.save(&path, 9).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    (path, bytes)
}

/// Damaged files are refused with a clear error; each row is one kind of damage.
#[test]
fn corrupt_truncated_or_mismatched_files_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (path, good) = saved_file(dir.path());
    let header_len = u32::from_le_bytes(good[8..12].try_into().unwrap()) as usize;
    let keys_at = 12 + header_len;
    let blob_at = keys_at + 500 * 8;
    let len = good.len();
    let flip = |at: usize| {
        let mut b = good.clone();
        b[at] ^= 0x40;
        b
    };
    type Check = fn(&IndexError) -> bool;
    let corrupt: Check = |e| matches!(e, IndexError::Corrupt { .. });
    let cases: Vec<(&str, Vec<u8>, Check)> = vec![
        ("empty file", Vec::new(), corrupt),
        ("bad magic", flip(0), corrupt),
        ("header length damaged", flip(11), corrupt),
        ("header byte damaged", flip(30), corrupt),
        ("key damaged", flip(keys_at + 3), corrupt),
        ("blob start damaged", flip(blob_at + 1), corrupt),
        ("blob middle damaged", flip(blob_at + (len - blob_at) / 2), corrupt),
        ("checksum damaged", flip(len - 1), corrupt),
        ("truncated by one byte", good[..len - 1].to_vec(), corrupt),
        ("truncated in the blob", good[..blob_at + 100].to_vec(), corrupt),
        ("truncated in the header", good[..20].to_vec(), corrupt),
        ("trailing garbage", [good.clone(), vec![0u8; 7]].concat(), corrupt),
    ];
    for (name, bytes, expected) in cases {
        std::fs::write(&path, &bytes).unwrap();
        match AnnIndex::load(&path, DIMS) {
            Ok(_) => panic!("{name}: loaded a damaged file"),
            Err(e) => assert!(expected(&e), "{name}: {e:?}"),
        }
    }

    // Another format version (header rewritten, checksum fixed) is a version error.
    let header = std::str::from_utf8(&good[12..keys_at]).unwrap().replace("\"format_version\":1", "\"format_version\":2");
    let mut body = good[..8].to_vec();
    body.extend_from_slice(&(header.len() as u32).to_le_bytes());
    body.extend_from_slice(header.as_bytes());
    body.extend_from_slice(&good[keys_at..len - 32]);
    use sha2::Digest;
    let check = sha2::Sha256::digest(&body);
    body.extend_from_slice(&check);
    std::fs::write(&path, &body).unwrap();
    let e = AnnIndex::load(&path, DIMS).unwrap_err();
    assert!(matches!(e, IndexError::FormatVersion { found: 2, expected: 1, .. }), "{e:?}");

    // The intact file loads, but not as another dimension.
    std::fs::write(&path, &good).unwrap();
    let e = AnnIndex::load(&path, 384).unwrap_err();
    assert!(matches!(e, IndexError::DimsMismatch { found: DIMS, expected: 384, .. }), "{e:?}");
    assert!(e.to_string().contains("expected 384"), "{e}");
    let (index, watermark) = AnnIndex::load(&path, DIMS).unwrap();
    assert_eq!((index.len(), watermark), (500, 9));

    // A missing file is an I/O error.
    let e = AnnIndex::load(&dir.path().join("missing.idx"), DIMS).unwrap_err();
    assert!(matches!(e, IndexError::Io { .. }), "{e:?}");
}
