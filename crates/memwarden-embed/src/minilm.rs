//! The local sentence-embedding model: all-MiniLM-L6-v2 on the CPU, with the encoder in
//! [`crate::bert`] (hand-written forward pass over [`crate::kernels`]).

use std::fmt;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use tokenizers::{Encoding, Tokenizer, TruncationDirection, TruncationParams, TruncationStrategy};

use crate::bert::{Bert, BertConfig, Seq};
use crate::kernels::Storage;
use crate::model_dir::check_model_dir;
use crate::{Context, EmbedError, Embedder};

/// How many texts [`MiniLmEmbedder`] runs through the model in one pass, at most, by default.
pub const DEFAULT_BATCH_SIZE: usize = 32;

/// Most tokens in one forward pass (bounds the scratch memory: about 17 KB per token for a
/// 384-wide model, 17 MB per pass).
pub const PASS_TOKENS_MAX: usize = 1024;

/// A batch with fewer tokens than this (estimated from its length) runs on the calling thread
/// alone.
pub const PARALLEL_TOKENS_MIN: usize = 64;

/// Most threads a batch is split over.
pub const THREADS_MAX: usize = 64;

/// Token limit (special tokens included) when the model directory has no
/// `sentence_bert_config.json`; all-MiniLM-L6-v2's own value.
pub const DEFAULT_MAX_SEQ_LENGTH: usize = 256;

/// `sentence_bert_config.json`: sentence-transformers' settings for the transformer module.
#[derive(Deserialize)]
struct SentenceBertConfig {
    max_seq_length: Option<usize>,
}

/// `1_Pooling/config.json`: which pooling sentence-transformers applies.
#[derive(Deserialize)]
struct PoolingConfig {
    #[serde(default)]
    pooling_mode_cls_token: bool,
    #[serde(default)]
    pooling_mode_mean_tokens: bool,
    #[serde(default)]
    pooling_mode_max_tokens: bool,
    #[serde(default)]
    pooling_mode_mean_sqrt_len_tokens: bool,
}

/// How [`MiniLmEmbedder`] stores the weights of the encoder's linear layers (embedding tables,
/// biases and layer norms stay `f32`; every product and sum is computed in `f32`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum WeightPrecision {
    /// `f32`, as in the checkpoint (42 MB for all-MiniLM-L6-v2, more than a 32 MB L3 holds).
    F32,
    /// The default: rounded to IEEE half precision (21 MB, half the bytes to stream per pass)
    /// and widened to `f32` in registers. Matches the sentence-transformers reference vectors
    /// at cosine ≥ 0.99999 (tests/minilm.rs). The same rounded weights are used on every
    /// machine (stored as `f32` where the CPU lacks AVX-512, which gives no speed-up there).
    #[default]
    F16,
}

/// all-MiniLM-L6-v2 (or another BERT sentence-transformers model with mean pooling), run
/// locally on the CPU. Produces the same vectors as sentence-transformers'
/// `encode(normalize_embeddings=True)`: each text is stripped of surrounding whitespace,
/// tokenised and truncated at the model's `max_seq_length` (256 tokens for all-MiniLM-L6-v2,
/// special tokens included), the token vectors are mean-pooled over the text's tokens, and the
/// result is L2-normalised (so cosine similarity is a dot product).
///
/// One text runs on the calling thread, with no thread pool involved. Several texts are split
/// over [`MiniLmEmbedder::threads`] scoped threads (by estimated token count, when there are
/// at least about [`PARALLEL_TOKENS_MIN`] tokens), each tokenizing its share and running passes
/// of at most [`MiniLmEmbedder::batch_size`] texts and [`PASS_TOKENS_MAX`] tokens; sequences are
/// never padded. Results come back in input order. The embedder is `Send + Sync` and can be shared
/// between threads.
pub struct MiniLmEmbedder {
    model: Bert,
    precision: WeightPrecision,
    tokenizer: Tokenizer,
    dir: PathBuf,
    dims: usize,
    max_seq_length: usize,
    batch_size: usize,
    threads: usize,
}

impl fmt::Debug for MiniLmEmbedder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MiniLmEmbedder")
            .field("dir", &self.dir)
            .field("dims", &self.dims)
            .field("max_seq_length", &self.max_seq_length)
            .field("batch_size", &self.batch_size)
            .field("threads", &self.threads)
            .field("kernels", &self.kernels())
            .field("precision", &self.precision)
            .finish_non_exhaustive()
    }
}

impl MiniLmEmbedder {
    /// Loads the model from `dir`, which must hold `config.json`, `tokenizer.json` and
    /// `model.safetensors` (as installed by `scripts/fetch-model.sh`; see
    /// [`crate::resolve_model_dir`] to find it). `sentence_bert_config.json` (token limit) and
    /// `1_Pooling/config.json` (must say mean pooling) are read when present.
    ///
    /// A missing file gives an error that says how to install the model.
    pub fn load(dir: &Path) -> Result<Self, EmbedError> {
        Self::load_with_precision(dir, WeightPrecision::default())
    }

    /// [`MiniLmEmbedder::load`] with the linear layers' weights stored as `precision` says.
    pub fn load_with_precision(dir: &Path, precision: WeightPrecision) -> Result<Self, EmbedError> {
        let storage = match precision {
            WeightPrecision::F32 => Storage::F32,
            WeightPrecision::F16 => Storage::F16,
        };
        Self::load_with_storage(dir, precision, storage)
    }

    fn load_with_storage(dir: &Path, precision: WeightPrecision, storage: Storage) -> Result<Self, EmbedError> {
        check_model_dir(dir)?;
        let read =
            |name: &str| std::fs::read(dir.join(name)).context(|| format!("reading {}", dir.join(name).display()));

        let config: BertConfig = serde_json::from_slice(&read("config.json")?)
            .context(|| format!("parsing {}/config.json", dir.display()))?;

        let sbert = dir.join("sentence_bert_config.json");
        let max_seq_length = if sbert.is_file() {
            let c: SentenceBertConfig = serde_json::from_slice(&read("sentence_bert_config.json")?)
                .context(|| format!("parsing {}", sbert.display()))?;
            c.max_seq_length.unwrap_or(DEFAULT_MAX_SEQ_LENGTH)
        } else {
            DEFAULT_MAX_SEQ_LENGTH
        }
        .min(config.max_position_embeddings);
        if max_seq_length < 2 {
            return Err(EmbedError(format!("{}: max_seq_length {max_seq_length} is too small", dir.display())));
        }

        let pooling = dir.join("1_Pooling").join("config.json");
        if pooling.is_file() {
            let p: PoolingConfig = serde_json::from_slice(&read("1_Pooling/config.json")?)
                .context(|| format!("parsing {}", pooling.display()))?;
            if !p.pooling_mode_mean_tokens
                || p.pooling_mode_cls_token
                || p.pooling_mode_max_tokens
                || p.pooling_mode_mean_sqrt_len_tokens
            {
                return Err(EmbedError(format!(
                    "{}: only mean pooling is supported (pooling_mode_mean_tokens alone)",
                    pooling.display()
                )));
            }
        }

        let tokenizer_path = dir.join("tokenizer.json");
        let mut tokenizer =
            Tokenizer::from_file(&tokenizer_path).context(|| format!("loading {}", tokenizer_path.display()))?;
        // tokenizer.json ships with fixed padding to 128 and truncation at 128; sentence-transformers
        // overrides both: truncation at max_seq_length, padding per batch (not needed here: the
        // encoder runs unpadded sequences).
        tokenizer.with_padding(None);
        tokenizer
            .with_truncation(Some(TruncationParams {
                direction: TruncationDirection::Right,
                max_length: max_seq_length,
                strategy: TruncationStrategy::LongestFirst,
                stride: 0,
            }))
            .context(|| format!("setting truncation to {max_seq_length} tokens"))?;

        let weights_path = dir.join("model.safetensors");
        let weights = read("model.safetensors")?;
        let model = Bert::load(&weights, &config, pulp::Arch::new(), storage)
            .map_err(|e| EmbedError(format!("loading {}: {e}", weights_path.display())))?;
        let threads = std::thread::available_parallelism().map_or(1, usize::from).min(THREADS_MAX);

        Ok(Self {
            dims: model.hidden(),
            model,
            precision,
            tokenizer,
            dir: dir.to_path_buf(),
            max_seq_length,
            batch_size: DEFAULT_BATCH_SIZE,
            threads,
        })
    }

    /// Loads the model from the directory [`crate::resolve_model_dir`]`(None)` finds.
    pub fn load_default() -> Result<Self, EmbedError> {
        Self::load(&crate::resolve_model_dir(None)?)
    }

    /// The same embedder with at most `batch_size` texts per forward pass (at least 1).
    #[must_use]
    pub fn with_batch_size(mut self, batch_size: usize) -> Self {
        self.batch_size = batch_size.max(1);
        self
    }

    /// The same embedder splitting batches over at most `threads` threads (1 to
    /// [`THREADS_MAX`]; 1 = always the calling thread). The default is the machine's available
    /// parallelism, read once at load.
    #[must_use]
    pub fn with_threads(mut self, threads: usize) -> Self {
        self.threads = threads.clamp(1, THREADS_MAX);
        self
    }

    /// The directory the model was loaded from.
    pub fn model_dir(&self) -> &Path {
        &self.dir
    }

    /// Token limit per text (special tokens included); longer texts are truncated.
    pub fn max_seq_length(&self) -> usize {
        self.max_seq_length
    }

    /// Texts per forward pass, at most.
    pub fn batch_size(&self) -> usize {
        self.batch_size
    }

    /// Threads a batch is split over, at most.
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// The instruction set the kernels run on, detected at load: `"avx512"`, `"avx2+fma"` or
    /// `"scalar"`.
    pub fn kernels(&self) -> &'static str {
        match self.model.arch() {
            pulp::Arch::Scalar => "scalar",
            pulp::Arch::V3(_) => "avx2+fma",
            pulp::Arch::V4(_) => "avx512",
            _ => "other",
        }
    }

    /// How the linear layers' weights are stored.
    pub fn precision(&self) -> WeightPrecision {
        self.precision
    }

    /// Bytes of packed layer weights the forward pass streams per call (embedding tables excluded).
    pub fn layer_weight_bytes(&self) -> usize {
        self.model.layer_bytes()
    }

    /// Number of tokens (special tokens included, after truncation) the model sees for `text`.
    pub fn token_count(&self, text: &str) -> Result<usize, EmbedError> {
        Ok(self.encode(text)?.len())
    }

    fn encode(&self, text: &str) -> Result<Encoding, EmbedError> {
        // sentence-transformers strips each text before tokenising.
        self.tokenizer.encode(text.trim(), true).context(|| "tokenizing".to_string())
    }

    /// Embeds `encodings` on this thread, in passes of at most `batch_size` texts and
    /// [`PASS_TOKENS_MAX`] tokens.
    fn embed_encoded(&self, encodings: &[&Encoding]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut out = Vec::with_capacity(encodings.len());
        let mut pass: Vec<Seq<'_>> = Vec::with_capacity(self.batch_size.min(encodings.len()));
        let mut pass_tokens = 0;
        let run = |pass: &mut Vec<Seq<'_>>, out: &mut Vec<Vec<f32>>| -> Result<(), EmbedError> {
            if !pass.is_empty() {
                let tokens: usize = pass.iter().map(|s| s.ids.len()).sum();
                let vectors = self
                    .model
                    .embed(pass)
                    .map_err(|e| EmbedError(format!("MiniLM forward pass ({} texts, {tokens} tokens): {e}", pass.len())))?;
                if vectors.len() != pass.len() {
                    return Err(EmbedError(format!("MiniLM returned {} vectors for {} texts", vectors.len(), pass.len())));
                }
                out.extend(vectors);
                pass.clear();
            }
            Ok(())
        };
        for e in encodings {
            let n = e.get_ids().len();
            if !pass.is_empty() && (pass.len() >= self.batch_size || pass_tokens + n > PASS_TOKENS_MAX) {
                run(&mut pass, &mut out)?;
                pass_tokens = 0;
            }
            pass.push(Seq { ids: e.get_ids(), type_ids: e.get_type_ids() });
            pass_tokens += n;
        }
        run(&mut pass, &mut out)?;
        Ok(out)
    }
}

/// Splits item indices into `parts` groups of about equal total cost (largest first, each to
/// the least loaded group). Every index lands in exactly one group; empty groups are dropped.
fn balance(costs: &[usize], parts: usize) -> Vec<Vec<usize>> {
    let mut order: Vec<usize> = (0..costs.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(costs[i]));
    let mut groups: Vec<(usize, Vec<usize>)> = vec![(0, Vec::new()); parts.max(1)];
    for i in order {
        if let Some(g) = groups.iter_mut().min_by_key(|g| g.0) {
            g.0 += costs[i];
            g.1.push(i);
        }
    }
    groups.into_iter().map(|g| g.1).filter(|g| !g.is_empty()).collect()
}

/// Cost of a sequence of `n` tokens: the per-token layers plus attention (grows with `n²`;
/// about even with the rest at 384 tokens for a 384-wide model).
fn cost(n: usize) -> usize {
    n * 384 + n * n
}

impl Embedder for MiniLmEmbedder {
    fn name(&self) -> &str {
        "all-MiniLM-L6-v2 (local, cpu)"
    }

    fn dims(&self) -> usize {
        self.dims
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        // Split before tokenizing, so the threads tokenize too: the cost of a text is estimated
        // from its length (English runs at about 4 bytes per token) and capped at the token limit.
        let estimates: Vec<usize> = texts.iter().map(|t| (t.trim().len() / 4 + 2).min(self.max_seq_length)).collect();
        let threads = self.threads.min(texts.len());
        if threads <= 1 || estimates.iter().sum::<usize>() < PARALLEL_TOKENS_MIN {
            let encodings = texts.iter().map(|t| self.encode(t)).collect::<Result<Vec<_>, _>>()?;
            let refs: Vec<&Encoding> = encodings.iter().collect();
            return self.embed_encoded(&refs);
        }
        let costs: Vec<usize> = estimates.iter().map(|&n| cost(n)).collect();
        let groups = balance(&costs, threads);
        let results: Vec<Result<Vec<Vec<f32>>, EmbedError>> = std::thread::scope(|s| {
            let run = |g: &Vec<usize>| {
                let encodings = g.iter().map(|&i| self.encode(texts[i])).collect::<Result<Vec<_>, _>>()?;
                let refs: Vec<&Encoding> = encodings.iter().collect();
                self.embed_encoded(&refs)
            };
            let (first, rest) = groups.split_first().map_or((None, &[][..]), |(f, r)| (Some(f), r));
            let handles: Vec<_> = rest.iter().map(|g| s.spawn(move || run(g))).collect();
            let mut results = Vec::with_capacity(groups.len());
            if let Some(g) = first {
                results.push(run(g));
            }
            for h in handles {
                results.push(h.join().unwrap_or_else(|_| Err(EmbedError("an embedding thread panicked".into()))));
            }
            results
        });
        let mut out: Vec<Vec<f32>> = vec![Vec::new(); texts.len()];
        for (g, r) in groups.iter().zip(results) {
            let vectors = r?;
            if vectors.len() != g.len() {
                return Err(EmbedError(format!("MiniLM returned {} vectors for {} texts", vectors.len(), g.len())));
            }
            for (&i, v) in g.iter().zip(vectors) {
                out[i] = v;
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn is_send_and_sync() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<MiniLmEmbedder>();
    }

    #[test]
    fn balance_places_every_item_once_and_evens_the_load() {
        fn check(costs: &[usize], parts: usize, max_spread: usize) {
            let groups = balance(costs, parts);
            let mut seen: Vec<usize> = groups.iter().flatten().copied().collect();
            seen.sort_unstable();
            assert_eq!(seen, (0..costs.len()).collect::<Vec<_>>(), "{costs:?} into {parts}");
            assert!(groups.len() <= parts.max(1));
            let loads: Vec<usize> = groups.iter().map(|g| g.iter().map(|&i| costs[i]).sum()).collect();
            let spread = loads.iter().max().unwrap_or(&0) - loads.iter().min().unwrap_or(&0);
            assert!(spread <= max_spread, "{costs:?} into {parts}: loads {loads:?}");
        }
        check(&[], 2, 0);
        check(&[5], 2, 0);
        check(&[10, 10, 10, 10], 2, 0);
        check(&[9, 1, 1, 1, 1, 1, 1, 1, 1, 1], 2, 0);
        check(&[100, 1, 1], 2, 98);
        check(&[3, 3, 2, 2, 2], 3, 2);
        check(&[1, 2, 3], 0, 0);
    }

    /// The numerics an int8 path (weights per output channel and activations per row quantised
    /// to symmetric int8) or a bfloat16 path (weights and activations rounded to bf16, products
    /// summed in f32, as `vdpbf16ps`) would have, simulated in f32: lowest cosine to the
    /// sentence-transformers reference. An experiment, run by hand:
    /// `cargo test --release -p memwarden-embed --lib -- --ignored --nocapture int8`.
    #[test]
    #[ignore = "experiment, run by hand"]
    fn int8_and_bf16_numerics_against_the_reference() {
        #[derive(serde::Deserialize)]
        struct Reference {
            sentences: Vec<String>,
            embeddings: Vec<Vec<f32>>,
        }
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/minilm-reference.json");
        let r: Reference = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let dir = crate::resolve_model_dir(None).unwrap();
        let cosine = |a: &[f32], b: &[f32]| {
            let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
            dot / (a.iter().map(|x| x * x).sum::<f32>().sqrt() * b.iter().map(|x| x * x).sum::<f32>().sqrt())
        };
        use crate::kernels::ActivationRounding as A;
        for (label, storage, activations) in [
            ("int8 weights only", Storage::Int8Sim, A::None),
            ("int8 weights and activations", Storage::Int8Sim, A::Int8),
            ("int8 weights, one scale per 32 inputs", Storage::Int8GroupSim(32), A::None),
            ("int8 weights, one scale per 64 inputs", Storage::Int8GroupSim(64), A::None),
            ("int8 weights, one scale per 128 inputs", Storage::Int8GroupSim(128), A::None),
            ("bf16 weights only", Storage::Bf16Sim, A::None),
            ("bf16 weights and activations", Storage::Bf16Sim, A::Bf16),
            ("f16 weights (the default), for comparison", Storage::F16, A::None),
        ] {
            // One thread: the activation setting is thread-local.
            let m = MiniLmEmbedder::load_with_storage(&dir, WeightPrecision::F16, storage).unwrap().with_threads(1);
            crate::kernels::ROUND_ACTIVATIONS.with(|q| q.set(activations));
            let texts: Vec<&str> = r.sentences.iter().map(String::as_str).collect();
            let got = m.embed(&texts).unwrap();
            crate::kernels::ROUND_ACTIVATIONS.with(|q| q.set(A::None));
            let cos: Vec<f32> = got.iter().zip(&r.embeddings).map(|(g, w)| cosine(g, w)).collect();
            let worst = cos.iter().copied().fold(f32::INFINITY, f32::min);
            let mean = cos.iter().sum::<f32>() / cos.len() as f32;
            println!("{label}: lowest cosine {worst:.6}, mean {mean:.6} over {} sentences", cos.len());
        }
    }

    #[test]
    fn load_reports_missing_model_with_install_hint() {
        let tmp = tempfile::tempdir().unwrap();
        let err = MiniLmEmbedder::load(tmp.path()).unwrap_err();
        assert!(err.0.contains(crate::INSTALL_HINT), "{err}");
        assert!(err.0.contains("config.json, tokenizer.json, model.safetensors"), "{err}");
    }
}
