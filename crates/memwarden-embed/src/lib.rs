//! memwarden embedders: the [`Embedder`] trait and its implementations. The deterministic
//! feature-hashing embedder ([`HashEmbedder`]) is for tests only and is used only when chosen
//! explicitly (never as a silent default).
//!
//! ```
//! use memwarden_embed::{Embedder, HashEmbedder};
//! let e = HashEmbedder::new(64);
//! let v = e.embed(&["the cat sits outside"]).unwrap();
//! assert_eq!(v[0].len(), 64);
//! ```

use sha2::{Digest, Sha256};

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
