//! The local model against reference embeddings from sentence-transformers.
//!
//! These tests need the model files. A missing model is a failure carrying the install message
//! (never a silent skip): run `scripts/fetch-model.sh` first, as CI does.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::OnceLock;

use memwarden_embed::{Embedder, INSTALL_HINT, MiniLmEmbedder, WeightPrecision, resolve_model_dir};
use serde::Deserialize;

#[derive(Deserialize)]
struct Reference {
    max_seq_length: usize,
    sentences: Vec<String>,
    embeddings: Vec<Vec<f32>>,
}

fn reference() -> Reference {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/minilm-reference.json");
    let r: Reference = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    assert_eq!(r.sentences.len(), r.embeddings.len());
    r
}

/// The model, loaded once per test binary; panics with the install message when it is missing.
fn model() -> &'static MiniLmEmbedder {
    static MODEL: OnceLock<MiniLmEmbedder> = OnceLock::new();
    MODEL.get_or_init(|| {
        let dir = resolve_model_dir(None).unwrap_or_else(|e| panic!("{e}"));
        MiniLmEmbedder::load(&dir).unwrap_or_else(|e| panic!("{e}"))
    })
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let na: f32 = a.iter().map(|x| x * x).sum::<f32>().sqrt();
    let nb: f32 = b.iter().map(|x| x * x).sum::<f32>().sqrt();
    dot / (na * nb)
}

fn assert_matches_reference(got: &[Vec<f32>], r: &Reference, how: &str) {
    assert_eq!(got.len(), r.sentences.len());
    let mut worst = f32::INFINITY;
    for (i, (g, want)) in got.iter().zip(&r.embeddings).enumerate() {
        assert_eq!(g.len(), 384);
        let c = cosine(g, want);
        assert!(c >= 0.999, "{how}: sentence {i} {:?}: cosine {c} < 0.999", r.sentences[i]);
        worst = worst.min(c);
        let norm: f32 = g.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-4, "{how}: sentence {i} not unit length: {norm}");
    }
    println!("{how}: lowest cosine to the reference {worst:.7}");
}

#[test]
fn model_is_present_or_the_error_says_how_to_install_it() {
    if let Err(e) = resolve_model_dir(None) {
        assert!(e.to_string().contains(INSTALL_HINT), "{e}");
        panic!("{e}");
    }
}

#[test]
fn matches_reference_one_at_a_time() {
    let r = reference();
    let m = model();
    assert_eq!(m.dims(), 384);
    assert_eq!(m.max_seq_length(), r.max_seq_length);
    let got: Vec<Vec<f32>> = r
        .sentences
        .iter()
        .map(|s| {
            let mut v = m.embed(&[s.as_str()]).unwrap();
            assert_eq!(v.len(), 1);
            v.remove(0)
        })
        .collect();
    assert_matches_reference(&got, &r, "one at a time");
}

#[test]
fn matches_reference_as_one_batch() {
    let r = reference();
    let texts: Vec<&str> = r.sentences.iter().map(String::as_str).collect();
    let got = model().embed(&texts).unwrap();
    assert_matches_reference(&got, &r, "one batch");
}

#[test]
fn batch_order_and_chunking_do_not_change_results() {
    let r = reference();
    let dir = resolve_model_dir(None).unwrap_or_else(|e| panic!("{e}"));
    let small = MiniLmEmbedder::load(&dir).unwrap().with_batch_size(3);
    assert_eq!(small.batch_size(), 3);
    // Reversed order, split over several padded batches of mixed lengths.
    let texts: Vec<&str> = r.sentences.iter().rev().map(String::as_str).collect();
    let mut got = small.embed(&texts).unwrap();
    got.reverse();
    assert_matches_reference(&got, &r, "batches of 3, reversed");
}

#[test]
fn full_precision_weights_match_reference_single_and_batched() {
    let r = reference();
    let dir = resolve_model_dir(None).unwrap_or_else(|e| panic!("{e}"));
    let m = MiniLmEmbedder::load_with_precision(&dir, WeightPrecision::F32).unwrap();
    assert_eq!(m.precision(), WeightPrecision::F32);
    let texts: Vec<&str> = r.sentences.iter().map(String::as_str).collect();
    let one: Vec<Vec<f32>> = texts.iter().map(|t| m.embed(&[t]).unwrap().remove(0)).collect();
    assert_matches_reference(&one, &r, "f32 weights, one at a time");
    let batch = m.embed(&texts).unwrap();
    assert_matches_reference(&batch, &r, "f32 weights, one batch");
}

#[test]
fn default_precision_is_half() {
    assert_eq!(model().precision(), WeightPrecision::F16);
}

#[test]
fn one_thread_and_many_threads_give_the_same_vectors() {
    let r = reference();
    let dir = resolve_model_dir(None).unwrap_or_else(|e| panic!("{e}"));
    // Enough text to be split over threads (more than PARALLEL_TOKENS_MIN tokens).
    let texts: Vec<String> = (0..24).map(|i| format!("{} ({i})", r.sentences[i % r.sentences.len()])).collect();
    let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
    let mut m = MiniLmEmbedder::load(&dir).unwrap().with_threads(1);
    let one = m.embed(&texts).unwrap();
    for threads in [2, 3, 7] {
        m = m.with_threads(threads);
        assert_eq!(m.threads(), threads);
        let many = m.embed(&texts).unwrap();
        assert_eq!(many.len(), one.len());
        for (i, (a, b)) in one.iter().zip(&many).enumerate() {
            assert!(cosine(a, b) > 0.999_999, "{threads} threads, text {i}: cosine {}", cosine(a, b));
        }
    }
}

#[test]
fn long_input_is_truncated_at_256_tokens() {
    let r = reference();
    let m = model();
    let long = r.sentences.iter().find(|s| s.split_whitespace().count() > 256).unwrap();
    assert_eq!(m.token_count(long).unwrap(), 256);
    // Anything past the limit is ignored.
    let longer = format!("{long} these extra words are past the limit");
    let a = m.embed(&[long.as_str(), longer.as_str()]).unwrap();
    assert!(cosine(&a[0], &a[1]) > 0.99999);
}

#[test]
fn empty_input_list_gives_empty_output() {
    assert!(model().embed(&[]).unwrap().is_empty());
}

#[test]
fn golden_similarity_ordering() {
    let v = model().embed(&["The cat sits outside", "The feline rests outdoors", "A man is playing guitar"]).unwrap();
    let close = cosine(&v[0], &v[1]);
    let far = cosine(&v[0], &v[2]);
    assert!(close > far, "cat~feline {close} should beat cat~guitar {far}");
    assert!(close > 0.5 && far < 0.2, "cat~feline {close}, cat~guitar {far}");
}

#[test]
fn usable_from_several_threads() {
    let m = model();
    let want = m.embed(&["The cat sits outside"]).unwrap();
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..2).map(|_| s.spawn(|| m.embed(&["The cat sits outside"]).unwrap())).collect();
        for h in handles {
            let got = h.join().unwrap();
            assert!(cosine(&got[0], &want[0]) > 0.99999);
        }
    });
}
