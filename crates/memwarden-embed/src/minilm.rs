//! The local sentence-embedding model: all-MiniLM-L6-v2 run with candle on the CPU.

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config as BertConfig, DTYPE};
use serde::Deserialize;
use tokenizers::{Encoding, Tokenizer, TruncationDirection, TruncationParams, TruncationStrategy};

use crate::model_dir::check_model_dir;
use crate::{Context, EmbedError, Embedder};

/// How many texts [`MiniLmEmbedder`] runs through the model at once, by default.
pub const DEFAULT_BATCH_SIZE: usize = 32;

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

/// all-MiniLM-L6-v2 (or another BERT sentence-transformers model with mean pooling), run
/// locally on the CPU. Produces the same vectors as sentence-transformers'
/// `encode(normalize_embeddings=True)`: each text is stripped of surrounding whitespace,
/// tokenised and truncated at the model's `max_seq_length` (256 tokens for all-MiniLM-L6-v2,
/// special tokens included), the token vectors are mean-pooled over the attention mask, and the
/// result is L2-normalised (so cosine similarity is a dot product).
///
/// [`Embedder::embed`] sorts its texts by length and runs them in padded batches of
/// [`DEFAULT_BATCH_SIZE`] (see [`MiniLmEmbedder::with_batch_size`]); results come back in input
/// order. The embedder is `Send + Sync` and can be shared between threads.
pub struct MiniLmEmbedder {
    model: BertModel,
    tokenizer: Tokenizer,
    device: Device,
    dir: PathBuf,
    dims: usize,
    max_seq_length: usize,
    batch_size: usize,
    pad_id: u32,
}

impl fmt::Debug for MiniLmEmbedder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MiniLmEmbedder")
            .field("dir", &self.dir)
            .field("dims", &self.dims)
            .field("max_seq_length", &self.max_seq_length)
            .field("batch_size", &self.batch_size)
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
        // overrides both: truncation at max_seq_length, padding per batch (done here, by hand).
        let pad_id = tokenizer
            .get_padding()
            .map(|p| p.pad_id)
            .or_else(|| tokenizer.token_to_id("[PAD]"))
            .unwrap_or_else(|| u32::try_from(config.pad_token_id).unwrap_or(0));
        tokenizer.with_padding(None);
        tokenizer
            .with_truncation(Some(TruncationParams {
                direction: TruncationDirection::Right,
                max_length: max_seq_length,
                strategy: TruncationStrategy::LongestFirst,
                stride: 0,
            }))
            .context(|| format!("setting truncation to {max_seq_length} tokens"))?;

        let device = Device::Cpu;
        let weights_path = dir.join("model.safetensors");
        let weights = read("model.safetensors")?;
        let tensors = candle_core::safetensors::load_buffer(&weights, &device)
            .and_then(prepare_weights)
            .context(|| format!("reading weights {}", weights_path.display()))?;
        let vb = VarBuilder::from_tensors(tensors, DTYPE, &device);
        let model =
            BertModel::load(vb, &config).context(|| format!("building the model from {}", weights_path.display()))?;

        Ok(Self {
            model,
            tokenizer,
            device,
            dir: dir.to_path_buf(),
            dims: config.hidden_size,
            max_seq_length,
            batch_size: DEFAULT_BATCH_SIZE,
            pad_id,
        })
    }

    /// Loads the model from the directory [`crate::resolve_model_dir`]`(None)` finds.
    pub fn load_default() -> Result<Self, EmbedError> {
        Self::load(&crate::resolve_model_dir(None)?)
    }

    /// The same embedder with at most `batch_size` texts per forward pass (at least 1). Larger
    /// batches give more throughput but more padding and memory.
    #[must_use]
    pub fn with_batch_size(mut self, batch_size: usize) -> Self {
        self.batch_size = batch_size.max(1);
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

    /// Texts per forward pass.
    pub fn batch_size(&self) -> usize {
        self.batch_size
    }

    /// Number of tokens (special tokens included, after truncation) the model sees for `text`.
    pub fn token_count(&self, text: &str) -> Result<usize, EmbedError> {
        Ok(self.tokenizer.encode(text.trim(), true).context(|| "tokenizing".to_string())?.len())
    }

    /// Runs one padded batch through the model; returns one unit vector per encoding.
    fn embed_batch(&self, encodings: &[&Encoding]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let rows = encodings.len();
        let cols = encodings.iter().map(|e| e.get_ids().len()).max().unwrap_or(0);
        if rows == 0 || cols == 0 {
            return Ok(vec![vec![0.0; self.dims]; rows]);
        }
        let mut ids = vec![self.pad_id; rows * cols];
        let mut type_ids = vec![0u32; rows * cols];
        let mut mask = vec![0u32; rows * cols];
        for (r, e) in encodings.iter().enumerate() {
            let n = e.get_ids().len();
            let at = r * cols;
            ids[at..at + n].copy_from_slice(e.get_ids());
            type_ids[at..at + n].copy_from_slice(e.get_type_ids());
            mask[at..at + n].copy_from_slice(e.get_attention_mask());
        }
        let forward = || -> candle_core::Result<Vec<Vec<f32>>> {
            let ids = Tensor::from_vec(ids, (rows, cols), &self.device)?;
            let type_ids = Tensor::from_vec(type_ids, (rows, cols), &self.device)?;
            let mask = Tensor::from_vec(mask, (rows, cols), &self.device)?;
            let hidden = self.model.forward(&ids, &type_ids, Some(&mask))?; // (rows, cols, dims)
            // Mean pooling over real tokens: sum(hidden * mask) / max(sum(mask), 1e-9).
            let mask = mask.to_dtype(DType::F32)?.unsqueeze(2)?; // (rows, cols, 1)
            let summed = hidden.broadcast_mul(&mask)?.sum(1)?; // (rows, dims)
            let counts = mask.sum(1)?.clamp(1e-9f32, f32::MAX)?; // (rows, 1)
            let mean = summed.broadcast_div(&counts)?;
            // L2 normalisation as torch.nn.functional.normalize: x / max(||x||, 1e-12).
            let norms = mean.sqr()?.sum_keepdim(1)?.sqrt()?.clamp(1e-12f32, f32::MAX)?;
            mean.broadcast_div(&norms)?.to_vec2::<f32>()
        };
        forward().context(|| format!("MiniLM forward pass ({rows} texts, {cols} tokens)"))
    }
}

/// Converts the weights to the model's dtype and re-lays every linear layer's weight matrix
/// (`out × in`, row-major in the file) as the transpose of a contiguous `in × out` matrix. The
/// values and the shape candle sees are unchanged; only the memory order differs. A linear layer
/// multiplies by `weight.t()`, which is then contiguous, and the matrix-multiply kernel (`gemm`)
/// reads it in place: with the file's order it repacks the whole weight matrix on every call,
/// which was half the time of a short query's forward pass (perf, 2026-12-01).
fn prepare_weights(tensors: HashMap<String, Tensor>) -> candle_core::Result<HashMap<String, Tensor>> {
    tensors
        .into_iter()
        .map(|(name, t)| {
            let t = t.to_dtype(DTYPE)?;
            // Embedding tables are looked up by row, not multiplied: keep them row-major.
            let t = if t.rank() == 2 && name.ends_with(".weight") && !name.contains("embeddings") {
                t.t()?.contiguous()?.t()?
            } else {
                t
            };
            Ok((name, t))
        })
        .collect()
}

impl Embedder for MiniLmEmbedder {
    fn name(&self) -> &str {
        "all-MiniLM-L6-v2 (local, candle cpu)"
    }

    fn dims(&self) -> usize {
        self.dims
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        // sentence-transformers strips each text before tokenising.
        let inputs: Vec<&str> = texts.iter().map(|t| t.trim()).collect();
        let encodings = self.tokenizer.encode_batch(inputs, true).context(|| "tokenizing".to_string())?;
        // Longest first, so each batch pads to a similar length (as sentence-transformers does).
        let mut order: Vec<usize> = (0..encodings.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(encodings[i].get_ids().len()));

        let mut out: Vec<Vec<f32>> = vec![Vec::new(); texts.len()];
        for chunk in order.chunks(self.batch_size) {
            let batch: Vec<&Encoding> = chunk.iter().map(|&i| &encodings[i]).collect();
            let vectors = self.embed_batch(&batch)?;
            if vectors.len() != chunk.len() {
                return Err(EmbedError(format!("MiniLM returned {} vectors for {} texts", vectors.len(), chunk.len())));
            }
            for (&i, v) in chunk.iter().zip(vectors) {
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
    fn load_reports_missing_model_with_install_hint() {
        let tmp = tempfile::tempdir().unwrap();
        let err = MiniLmEmbedder::load(tmp.path()).unwrap_err();
        assert!(err.0.contains(crate::INSTALL_HINT), "{err}");
        assert!(err.0.contains("config.json, tokenizer.json, model.safetensors"), "{err}");
    }
}
