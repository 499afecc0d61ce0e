//! ClassedIndex behaviour: class-partitioned guarded search against a brute-force model
//! (property test over adds, moves and removes), promotion of a growing class from a block to
//! a graph, the parked class, persistence and damaged files.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::collections::{BTreeMap, BTreeSet};

use memwarden_index::{ClassId, ClassedIndex, IndexConfig, IndexError, PARKED_CLASS, SearchPath};
use proptest::prelude::*;

const DIMS: usize = 16;

fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Deterministic vectors clustered around a few axes (like embeddings, not uniform noise).
fn vector(seed: u64) -> Vec<f32> {
    let centre = (seed % 6) as usize;
    (0..DIMS)
        .map(|d| {
            let noise = (splitmix(seed.wrapping_mul(31).wrapping_add(d as u64)) >> 40) as f32 / (1u64 << 24) as f32 - 0.5;
            noise * 0.7 + if d == centre { 1.0 } else { 0.0 }
        })
        .collect()
}

fn unit(v: &[f32]) -> Vec<f32> {
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    v.iter().map(|x| x / n).collect()
}

fn cfg() -> IndexConfig {
    IndexConfig { max_concurrent_ops: 4, ..IndexConfig::with_dims(DIMS) }
}

/// The model: key -> (class, vector).
type Model = BTreeMap<u64, (ClassId, Vec<f32>)>;

fn brute(model: &Model, q: &[f32], k: usize, classes: &[ClassId], excluded: &BTreeSet<u64>) -> Vec<u64> {
    let q = unit(q);
    let mut scored: Vec<(f32, u64)> = model
        .iter()
        .filter(|(key, (c, _))| *c != PARKED_CLASS && classes.contains(c) && !excluded.contains(key))
        .map(|(key, (_, v))| (unit(v).iter().zip(&q).map(|(a, b)| a * b).sum::<f32>(), *key))
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    scored.into_iter().take(k).map(|(_, key)| key).collect()
}

#[derive(Debug, Clone)]
enum Op {
    Add(u64, ClassId, u64),
    Move(u64, ClassId),
    Remove(u64),
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    // Keys 1..120, classes 0 (parked) ..5.
    let op = prop_oneof![
        6 => (1u64..120, 0u64..6, any::<u64>()).prop_map(|(k, c, s)| Op::Add(k, c, s)),
        2 => (1u64..120, 0u64..6).prop_map(|(k, c)| Op::Move(k, c)),
        1 => (1u64..120).prop_map(Op::Remove),
    ];
    prop::collection::vec(op, 1..300)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]

    /// Whatever the history of adds, moves and removes, a search returns exactly
    /// min(k, eligible) hits, all members of the named classes and none excluded, best first;
    /// with every class in a block it equals brute force. Graph mode and a low threshold
    /// (classes promoted while they grow, rows migrating) must keep the same guarantees.
    #[test]
    fn classed_search_is_safe_and_complete(
        history in ops(),
        queries in prop::collection::vec((any::<u64>(), 1usize..20, prop::collection::btree_set(0u64..7, 0..4), prop::collection::btree_set(1u64..120, 0..10)), 1..8),
        graph_min in prop_oneof![Just(1_000_000usize), Just(0usize), Just(6usize)],
    ) {
        let index = ClassedIndex::new(cfg(), graph_min).unwrap();
        let mut model = Model::new();
        for op in &history {
            match *op {
                Op::Add(key, class, seed) => {
                    index.add(key, class, &vector(seed)).unwrap();
                    model.insert(key, (class, vector(seed)));
                }
                Op::Move(key, class) => {
                    let present = index.move_to(key, class).unwrap();
                    prop_assert_eq!(present, model.contains_key(&key));
                    if let Some(e) = model.get_mut(&key) {
                        e.0 = class;
                    }
                }
                Op::Remove(key) => {
                    prop_assert_eq!(index.remove(key).unwrap(), model.remove(&key).is_some());
                }
            }
        }
        prop_assert_eq!(index.len(), model.len());
        for (key, (class, _)) in &model {
            prop_assert_eq!(index.class_of(*key), Some(*class));
        }
        for (seed, k, classes, excluded) in queries {
            let classes: Vec<ClassId> = classes.into_iter().collect();
            let q = vector(seed);
            let got = index.search(&q, k, &classes, &|key| excluded.contains(&key)).unwrap();
            let want = brute(&model, &q, k, &classes, &excluded);
            prop_assert_eq!(got.hits.len(), want.len(), "min(k, eligible)");
            for h in &got.hits {
                let (c, _) = &model[&h.key];
                prop_assert!(*c != PARKED_CLASS && classes.contains(c) && !excluded.contains(&h.key), "ineligible {}", h.key);
            }
            prop_assert!(got.hits.windows(2).all(|w| w[0].score >= w[1].score));
            if graph_min == 1_000_000 {
                prop_assert_eq!(got.hits.iter().map(|h| h.key).collect::<Vec<_>>(), want.clone());
                prop_assert!(got.path == SearchPath::ClassedExact);
            }
            let oracle = index.exact_search(&q, k, &classes, &|key| excluded.contains(&key)).unwrap();
            prop_assert_eq!(oracle.hits.iter().map(|h| h.key).collect::<Vec<_>>(), want);
        }
        // Whatever migrated or not, finishing the migrations changes no answer's eligibility.
        index.finish_migrations(&|_, _| {}).unwrap();
        prop_assert_eq!(index.pending_migration_count(), 0);
        prop_assert_eq!(index.len(), model.len());
    }
}

#[test]
fn a_growing_class_is_promoted_to_a_graph_while_searches_stay_complete() {
    let index = ClassedIndex::new(cfg(), 64).unwrap();
    let mut model = Model::new();
    for key in 1..=400u64 {
        let class = if key % 4 == 0 { 7 } else { 9 };
        index.add(key, class, &vector(key)).unwrap();
        model.insert(key, (class, vector(key)));
        if key % 50 == 0 {
            for seed in 0..5 {
                let q = vector(10_000 + seed);
                let got = index.search(&q, 10, &[9], &|_| false).unwrap();
                assert_eq!(got.hits.len(), 10);
                assert!(got.hits.iter().all(|h| model[&h.key].0 == 9));
            }
        }
    }
    let info: BTreeMap<ClassId, _> = index.classes().into_iter().map(|c| (c.class, c)).collect();
    assert!(info[&9].has_graph, "300 rows > 64: class 9 has a graph");
    assert!(info[&7].has_graph, "100 rows > 64: class 7 has a graph");
    // Migration is bounded per change: 8 rows per add once the class crossed the threshold.
    assert_eq!(info[&9].graph_count + info[&9].block_count, 300);
    index.finish_migrations(&|_, _| {}).unwrap();
    let info: BTreeMap<ClassId, _> = index.classes().into_iter().map(|c| (c.class, c)).collect();
    assert_eq!((info[&9].graph_count, info[&9].block_count), (300, 0));
    assert_eq!(index.pending_migration_count(), 0);
    let mut recall = 0usize;
    for seed in 0..20 {
        let q = vector(20_000 + seed);
        let got = index.search(&q, 10, &[7, 9], &|_| false).unwrap();
        assert_eq!(got.path, SearchPath::ClassedAnn);
        assert_eq!(got.graphs_walked_count, 2);
        let want = brute(&model, &q, 10, &[7, 9], &BTreeSet::new());
        recall += got.hits.iter().filter(|h| want.contains(&h.key)).count();
    }
    assert!(recall >= 190, "recall {recall}/200");
}

#[test]
fn the_parked_class_is_never_searched_and_moves_narrow_first() {
    for graph_min in [0, 1000] {
        let index = ClassedIndex::new(cfg(), graph_min).unwrap();
        for key in 1..=50u64 {
            index.add(key, 3, &vector(key)).unwrap();
        }
        // Park key 7 (revoked): gone from class 3 at once, never found even when asked for.
        assert!(index.move_to(7, PARKED_CLASS).unwrap());
        let got = index.search(&vector(7), 50, &[3, PARKED_CLASS], &|_| false).unwrap();
        assert_eq!(got.hits.len(), 49);
        assert!(got.hits.iter().all(|h| h.key != 7));
        assert!(index.classes().iter().all(|c| c.class != PARKED_CLASS || !c.has_graph));
        // Widen it into class 4: found there (first, by its own vector), not in class 3.
        assert!(index.move_to(7, 4).unwrap());
        let got = index.search(&vector(7), 1, &[4], &|_| false).unwrap();
        assert_eq!(got.hits[0].key, 7);
        assert!(got.hits[0].score > 0.999);
        assert!(index.search(&vector(7), 50, &[3], &|_| false).unwrap().hits.iter().all(|h| h.key != 7));
        // Moving an absent key reports it; removing takes it out altogether.
        assert!(!index.move_to(999, 4).unwrap());
        assert!(index.remove(7).unwrap());
        assert!(index.search(&vector(7), 1, &[4], &|_| false).unwrap().hits.is_empty());
        assert_eq!(index.len(), 49);
    }
}

#[test]
fn a_walk_cut_short_by_exclusions_falls_back_to_an_exact_scan_of_the_class() {
    let index = ClassedIndex::new(cfg(), 0).unwrap();
    for key in 1..=200u64 {
        index.add(key, 5, &vector(key)).unwrap();
    }
    index.set_expansion_search(10).unwrap();
    let q = vector(3);
    // Exclude the 150 best: the walk's 10 candidates are all excluded, so the class is
    // scanned exactly.
    let mut all: Vec<u64> = (1..=200).collect();
    all.sort_by(|a, b| {
        let s = |k: u64| unit(&vector(k)).iter().zip(unit(&q)).map(|(x, y)| x * y).sum::<f32>();
        s(*b).total_cmp(&s(*a))
    });
    let excluded: BTreeSet<u64> = all[..150].iter().copied().collect();
    let got = index.search(&q, 10, &[5], &|k| excluded.contains(&k)).unwrap();
    assert_eq!(got.path, SearchPath::ClassedExactAfterShortAnn);
    assert_eq!(got.hits.iter().map(|h| h.key).collect::<Vec<_>>(), all[150..160].to_vec());
}

#[test]
fn a_panicking_exclusion_check_fails_the_search() {
    for graph_min in [0, 1000] {
        let index = ClassedIndex::new(cfg(), graph_min).unwrap();
        for key in 1..=20u64 {
            index.add(key, 2, &vector(key)).unwrap();
        }
        let r = index.search(&vector(1), 5, &[2], &|_| panic!("boom"));
        assert!(matches!(r, Err(IndexError::FilterPanicked)), "{r:?}");
    }
}

#[test]
fn bad_inputs_are_refused() {
    let index = ClassedIndex::new(cfg(), 0).unwrap();
    assert!(matches!(index.add(1, 1, &[1.0; 3]), Err(IndexError::WrongDims { .. })));
    assert!(matches!(index.add(1, 1, &[0.0; DIMS]), Err(IndexError::ZeroVector)));
    assert!(matches!(index.add(u64::MAX, 1, &vector(1)), Err(IndexError::ReservedKey(_))));
    let mut nan = vector(1);
    nan[2] = f32::NAN;
    assert!(matches!(index.add(1, 1, &nan), Err(IndexError::NonFinite { position: 2 })));
    assert!(matches!(index.search(&vector(1), 1001, &[1], &|_| false), Err(IndexError::Config { .. })));
    assert!(index.is_empty());
    assert!(index.search(&vector(1), 0, &[1], &|_| false).unwrap().hits.is_empty());
}

fn sample(graph_min: usize) -> ClassedIndex {
    let items = (1..=600u64).map(|key| (key, [PARKED_CLASS, 11, 12, 13][(key % 4) as usize] + u64::from(key > 500) * 100, vector(key)));
    ClassedIndex::build(cfg(), graph_min, items, &|_, _| {}).unwrap()
}

fn answers(index: &ClassedIndex) -> Vec<Vec<u64>> {
    let sets: [&[ClassId]; 4] = [&[11], &[12, 13], &[11, 12, 13, 111, 112, 113], &[PARKED_CLASS, 100]];
    let mut out = Vec::new();
    for seed in 0..10 {
        for set in sets {
            out.push(index.search(&vector(50_000 + seed), 10, set, &|_| false).unwrap().hits.iter().map(|h| h.key).collect());
        }
    }
    out
}

#[test]
fn build_groups_by_class_and_save_load_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.classes");
    let index = sample(100);
    let info = index.classes();
    assert_eq!(info.len(), 8);
    assert!(info.iter().all(|c| c.has_graph == (c.class != PARKED_CLASS && c.class < 100)), "{info:?}");
    // A key that moved after the build is saved in its new class.
    index.move_to(5, 100 + 13).unwrap();
    index.move_to(6, PARKED_CLASS).unwrap();
    let before = answers(&index);
    let size = index.save(&path, 77).unwrap();
    assert_eq!(std::fs::metadata(&path).unwrap().len(), size);
    let (loaded, watermark) = ClassedIndex::load(&path, DIMS, 100).unwrap();
    assert_eq!(watermark, 77);
    assert_eq!(loaded.len(), 600);
    assert_eq!(loaded.class_of(5), Some(113));
    assert_eq!(loaded.class_of(6), Some(PARKED_CLASS));
    assert_eq!(loaded.classes(), index.classes());
    assert_eq!(answers(&loaded), before);
    // A lower threshold at load promotes the small classes once migrations finish.
    let (lower, _) = ClassedIndex::load(&path, DIMS, 10).unwrap();
    lower.finish_migrations(&|_, _| {}).unwrap();
    assert!(lower.classes().iter().all(|c| c.has_graph == (c.class != PARKED_CLASS)));
    assert_eq!(lower.len(), 600);
    // Nothing left behind but the file.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
}

#[test]
fn damaged_truncated_or_foreign_files_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.classes");
    sample(100).save(&path, 1).unwrap();
    let good = std::fs::read(&path).unwrap();
    let bad = dir.path().join("bad.classes");
    let try_load = |bytes: &[u8]| {
        std::fs::write(&bad, bytes).unwrap();
        ClassedIndex::load(&bad, DIMS, 100)
    };
    for at in [20, good.len() / 3, good.len() / 2, good.len() - 40, good.len() - 1] {
        let mut b = good.clone();
        b[at] ^= 0x5A;
        assert!(try_load(&b).is_err(), "flipped byte {at} was accepted");
    }
    for cut in [0, 11, 100, good.len() - 1] {
        assert!(matches!(try_load(&good[..cut]), Err(IndexError::Corrupt { .. })), "cut at {cut}");
    }
    let mut longer = good.clone();
    longer.push(0);
    assert!(matches!(try_load(&longer), Err(IndexError::Corrupt { .. })));
    assert!(matches!(ClassedIndex::load(&path, DIMS + 1, 100), Err(IndexError::DimsMismatch { .. })));
    // A single-graph file is not a classed file.
    let single = dir.path().join("single.idx");
    let ann = memwarden_index::AnnIndex::new(cfg()).unwrap();
    ann.add(1, &vector(1)).unwrap();
    ann.save(&single, 1).unwrap();
    assert!(matches!(ClassedIndex::load(&single, DIMS, 100), Err(IndexError::Corrupt { .. })));
    // Still loads after all that.
    assert!(ClassedIndex::load(&path, DIMS, 100).is_ok());
}

#[test]
fn is_send_and_sync() {
    fn assert<T: Send + Sync>() {}
    assert::<ClassedIndex>();
}

/// A bulk load with the graph policy off (`usize::MAX`) only fills blocks; once the policy is
/// set, bounded steps move every row into its class's graph, and searches answer the same
/// members throughout (the PostgreSQL store opens this way, so start-up does not wait for the
/// HNSW build).
#[test]
fn graphs_built_after_a_bulk_load_in_bounded_steps_answer_the_same() {
    let index = ClassedIndex::new(cfg(), usize::MAX).unwrap();
    let (a, b): (ClassId, ClassId) = (1, 2);
    let n = 600u64;
    let mut model = Model::new();
    for key in 0..n {
        let class = if key % 3 == 0 { b } else { a };
        index.add(key, class, &vector(key)).unwrap();
        model.insert(key, (class, vector(key)));
    }
    assert!(index.classes().iter().all(|c| !c.has_graph), "blocks only while the policy is off");
    let probe = |what: &str| {
        for q in [3u64, 77, 401] {
            let got: Vec<u64> = index.search(&vector(q), 5, &[a, b], &|_| false).unwrap().hits.iter().map(|h| h.key).collect();
            assert_eq!(got.first(), Some(&q), "{what}: an exact copy of a stored vector comes first");
            let want = brute(&model, &vector(q), 5, &[a, b], &BTreeSet::new());
            let common = got.iter().filter(|k| want.contains(k)).count();
            assert!(common >= 4, "{what}: {got:?} vs {want:?}");
        }
    };
    probe("before");
    index.set_graph_min_count(64);
    let mut steps = 0;
    let mut left = index.build_graphs_step(16).unwrap();
    while left > 0 {
        steps += 1;
        assert!(steps < 1_000, "the build makes progress");
        if steps == 5 {
            probe("midway");
        }
        left = index.build_graphs_step(16).unwrap();
    }
    assert!(steps >= (n as usize) / 16 - 2, "bounded steps: {steps}");
    let classes = index.classes();
    assert!(classes.iter().all(|c| c.has_graph && c.block_count == 0), "{classes:?}");
    assert_eq!(classes.iter().map(|c| c.graph_count).sum::<usize>(), n as usize);
    probe("after");
}
