//! The semantic scorer every embedding-based method shares: hashed bag-of-words vectors with
//! log-scaled term frequencies, weighted by inverse document frequency over the task's retrievable
//! records (a live TF-IDF index), compared by cosine. No neural model is involved (the paper used
//! bge-small); the relative behaviour of the methods, not absolute retrieval quality, is measured.

/// Words that carry no topic.
const STOPWORDS: &[&str] = &[
    "the", "for", "and", "with", "this", "that", "are", "was", "from", "has", "its", "into", "our", "your", "his",
    "her", "their", "they", "them", "than", "then", "over", "all", "any", "not", "but", "per", "via", "who", "what",
    "which", "when", "where", "how", "been", "were", "will", "can", "may", "also", "only", "note", "summary",
];

/// Longest text embedded, in bytes (longer texts are cut at a character boundary).
pub const EMBED_BYTES_MAX: usize = 16 * 1024;

/// A sparse term vector (log-scaled term frequencies; IDF is applied when comparing).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Vector {
    /// (term hash, weight), sorted by hash, unique.
    terms: Vec<(u64, f64)>,
}

fn fnv1a(s: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in s.as_bytes() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// Embed `text`.
pub fn embed(text: &str) -> Vector {
    let mut cut = text.len().min(EMBED_BYTES_MAX);
    while cut > 0 && !text.is_char_boundary(cut) {
        cut -= 1;
    }
    let lower = text[..cut].to_lowercase();
    let mut counts: std::collections::BTreeMap<u64, u32> = Default::default();
    for tok in lower.split(|c: char| !c.is_alphanumeric()) {
        if tok.chars().count() < 3 || STOPWORDS.contains(&tok) {
            continue;
        }
        *counts.entry(fnv1a(tok)).or_insert(0) += 1;
    }
    let terms: Vec<(u64, f64)> = counts.into_iter().map(|(h, c)| (h, 1.0 + f64::from(c).ln())).collect();
    Vector { terms }
}

/// Document frequencies over a pool of records (updated as records are added).
#[derive(Debug, Clone, Default)]
pub struct Idf {
    df: std::collections::HashMap<u64, u32>,
    n: u32,
}

impl Idf {
    /// Count a document.
    pub fn add(&mut self, v: &Vector) {
        self.n = self.n.saturating_add(1);
        for (h, _) in &v.terms {
            *self.df.entry(*h).or_insert(0) += 1;
        }
    }

    /// The weight of a term: `ln((n + 1) / (df + 1)) + 1`.
    pub fn weight(&self, h: u64) -> f64 {
        let df = self.df.get(&h).copied().unwrap_or(0);
        ((f64::from(self.n) + 1.0) / (f64::from(df) + 1.0)).ln() + 1.0
    }

    /// TF-IDF cosine of two vectors, in `[0, 1]`.
    pub fn cosine(&self, a: &Vector, b: &Vector) -> f64 {
        let norm = |v: &Vector| v.terms.iter().map(|(h, w)| (w * self.weight(*h)).powi(2)).sum::<f64>().sqrt();
        let (na, nb) = (norm(a), norm(b));
        if na == 0.0 || nb == 0.0 {
            return 0.0;
        }
        let (mut i, mut j, mut dot) = (0usize, 0usize, 0.0f64);
        while let (Some((ha, wa)), Some((hb, wb))) = (a.terms.get(i), b.terms.get(j)) {
            match ha.cmp(hb) {
                std::cmp::Ordering::Less => i += 1,
                std::cmp::Ordering::Greater => j += 1,
                std::cmp::Ordering::Equal => {
                    let idf = self.weight(*ha);
                    dot += wa * wb * idf * idf;
                    i += 1;
                    j += 1;
                }
            }
        }
        (dot / (na * nb)).clamp(0.0, 1.0)
    }
}
