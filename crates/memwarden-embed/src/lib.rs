//! memwarden embedders: the [`Embedder`] trait and its implementations.
//!
//! - [`MiniLmEmbedder`]: the real local sentence-embedding model, all-MiniLM-L6-v2 (384
//!   dimensions, CPU only), run by a hand-written BERT forward pass whose kernels pick AVX-512,
//!   AVX2+FMA or scalar code at run time. Its output matches sentence-transformers'
//!   `encode(normalize_embeddings=True)`: inputs truncated at 256 tokens, mean pooling over
//!   the attention mask, L2 normalisation. Find its files with [`resolve_model_dir`]; install
//!   them with `scripts/fetch-model.sh`.
//! - [`OpenAiEmbedder`]: a client for any OpenAI-compatible `/embeddings` endpoint (plain
//!   `http://` only: this build carries no TLS stack, so point it at a local server or proxy).
//! - [`HashEmbedder`]: deterministic feature hashing, for tests only. It is used only when
//!   chosen explicitly (never as a silent default).
//!
//! ```
//! use memwarden_embed::{Embedder, HashEmbedder};
//! let e = HashEmbedder::new(64);
//! let v = e.embed(&["the cat sits outside"]).unwrap();
//! assert_eq!(v[0].len(), 64);
//! ```
//!
//! With the real model (needs `scripts/fetch-model.sh` to have been run):
//!
//! ```no_run
//! use memwarden_embed::{Embedder, MiniLmEmbedder, resolve_model_dir};
//! # fn main() -> Result<(), memwarden_embed::EmbedError> {
//! // A configured path wins; else $MEMWARDEN_MODEL_DIR; else ./models/all-MiniLM-L6-v2.
//! let dir = resolve_model_dir(None)?;
//! let model = MiniLmEmbedder::load(&dir)?;
//! let v = model.embed(&["The cat sits outside", "The feline rests outdoors"])?;
//! assert_eq!(v[0].len(), 384);
//! let cosine: f32 = v[0].iter().zip(&v[1]).map(|(a, b)| a * b).sum(); // vectors are unit length
//! assert!(cosine > 0.5);
//! # Ok(())
//! # }
//! ```
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

use sha2::{Digest, Sha256};

mod bert;
mod kernels;
mod minilm;
mod model_dir;
mod openai;

pub use minilm::{
    DEFAULT_BATCH_SIZE, DEFAULT_MAX_SEQ_LENGTH, MiniLmEmbedder, PARALLEL_TOKENS_MIN, PASS_TOKENS_MAX, THREADS_MAX,
    WeightPrecision,
};
pub use model_dir::{
    DEFAULT_MODEL_SUBDIR, INSTALL_HINT, MODEL_DIR_ENV, REQUIRED_MODEL_FILES, check_model_dir, resolve_model_dir,
};
pub use openai::{OpenAiConfig, OpenAiEmbedder};

/// Why embedding failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("embedding failed: {0}")]
pub struct EmbedError(pub String);

/// Turns texts into vectors.
pub trait Embedder: Send + Sync {
    /// A short name for logs and reports.
    fn name(&self) -> &str;
    /// Output dimensions.
    fn dims(&self) -> usize;
    /// Embed a batch.
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError>;
}

/// Feature hashing of lowercase word unigrams and bigrams into `dims` buckets, L2-normalised.
/// Deterministic and fast; semantically weak. Tests only.
#[derive(Debug, Clone, Copy)]
pub struct HashEmbedder {
    dims: usize,
}

impl HashEmbedder {
    /// A hashing embedder with `dims` dimensions (at least 8).
    pub fn new(dims: usize) -> Self {
        Self { dims: dims.max(8) }
    }
}

impl Embedder for HashEmbedder {
    fn name(&self) -> &str {
        "feature-hash (tests only)"
    }
    fn dims(&self) -> usize {
        self.dims
    }
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        Ok(texts
            .iter()
            .map(|t| {
                let words: Vec<String> = t.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(str::to_lowercase).collect();
                let mut v = vec![0f32; self.dims];
                let mut add = |feature: &str| {
                    let h = Sha256::digest(feature.as_bytes());
                    let idx = u64::from_le_bytes([h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7]]) as usize % self.dims;
                    v[idx] += if h[8] & 1 == 0 { 1.0 } else { -1.0 };
                };
                for w in &words {
                    add(w);
                }
                for pair in words.windows(2) {
                    add(&format!("{} {}", pair[0], pair[1]));
                }
                let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
                if n > 0.0 {
                    v.iter_mut().for_each(|x| *x /= n);
                }
                v
            })
            .collect())
    }
}

/// Adds context to a foreign error while turning it into an [`EmbedError`].
trait Context<T> {
    fn context(self, what: impl FnOnce() -> String) -> Result<T, EmbedError>;
}

impl<T, E: std::fmt::Display> Context<T> for Result<T, E> {
    fn context(self, what: impl FnOnce() -> String) -> Result<T, EmbedError> {
        self.map_err(|e| EmbedError(format!("{}: {e}", what())))
    }
}

/// Loads the local model on first use, so commands that never embed never pay for loading it.
/// A load failure (e.g. the model is not installed) is returned by every `embed` call, with the
/// install hint; it never falls back to another embedder.
pub struct LazyMiniLm {
    dir: Option<std::path::PathBuf>,
    model: std::sync::OnceLock<Result<MiniLmEmbedder, EmbedError>>,
}

impl LazyMiniLm {
    /// A lazy embedder for the model in `dir` (None: [`resolve_model_dir`]'s search order).
    pub fn new(dir: Option<std::path::PathBuf>) -> Self {
        Self { dir, model: std::sync::OnceLock::new() }
    }
    fn get(&self) -> Result<&MiniLmEmbedder, EmbedError> {
        self.model
            .get_or_init(|| resolve_model_dir(self.dir.as_deref()).and_then(|d| MiniLmEmbedder::load(&d)))
            .as_ref()
            .map_err(Clone::clone)
    }
}

impl Embedder for LazyMiniLm {
    fn name(&self) -> &str {
        "all-MiniLM-L6-v2"
    }
    fn dims(&self) -> usize {
        self.get().map(|m| m.dims()).unwrap_or(384)
    }
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.get()?.embed(texts)
    }
}
