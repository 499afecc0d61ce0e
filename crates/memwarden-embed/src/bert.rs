//! A BERT encoder (as all-MiniLM-L6-v2: 6 layers, 384 wide, 12 heads) written out for the CPU:
//! the weights read from `model.safetensors` once and packed for the matmul kernel, and a
//! forward pass over unpadded sequences (the tokens of every sequence in a pass are stacked
//! into one matrix, so a batch does no work for padding and needs no attention mask).
//!
//! Per layer, for the stacked tokens `x` (`tokens × hidden`):
//! `qkv = x Wqkvᵀ + b` (query, key and value in one multiply), attention per sequence and head,
//! `x = LN(ctx Woᵀ + b + x)`, `x = LN(GELU(x W1ᵀ + b1) W2ᵀ + b2 + x)`; then mean pooling per
//! sequence and L2 normalisation (sentence-transformers' `Pooling` + `Normalize`).

use pulp::Arch;
use safetensors::{Dtype, SafeTensors};
use serde::Deserialize;

use crate::kernels::{self, Linear, Storage};

/// The parts of a Hugging Face BERT `config.json` the encoder uses.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct BertConfig {
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub intermediate_size: usize,
    #[serde(default = "default_act")]
    pub hidden_act: String,
    pub max_position_embeddings: usize,
    #[serde(default = "default_type_vocab")]
    pub type_vocab_size: usize,
    #[serde(default = "default_eps")]
    pub layer_norm_eps: f64,
    #[serde(default)]
    pub position_embedding_type: Option<String>,
}

fn default_act() -> String {
    "gelu".into()
}
fn default_type_vocab() -> usize {
    2
}
fn default_eps() -> f64 {
    1e-12
}

/// Most layers accepted (a sanity limit on `config.json`).
const LAYERS_MAX: usize = 64;
/// Widest hidden or intermediate size accepted.
const WIDTH_MAX: usize = 16_384;

struct Norm {
    gamma: Vec<f32>,
    beta: Vec<f32>,
}

struct Layer {
    qkv: Linear,
    attn_out: Linear,
    attn_norm: Norm,
    ffn_in: Linear,
    ffn_out: Linear,
    ffn_norm: Norm,
}

/// One input sequence: token ids and token-type ids, special tokens included.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Seq<'a> {
    pub ids: &'a [u32],
    pub type_ids: &'a [u32],
}

/// The encoder's weights, ready to run.
pub(crate) struct Bert {
    arch: Arch,
    hidden: usize,
    heads: usize,
    intermediate: usize,
    eps: f32,
    vocab: usize,
    max_positions: usize,
    type_vocab: usize,
    word: Vec<f32>,
    position: Vec<f32>,
    token_type: Vec<f32>,
    embed_norm: Norm,
    layers: Vec<Layer>,
}

impl std::fmt::Debug for Bert {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bert")
            .field("arch", &self.arch)
            .field("hidden", &self.hidden)
            .field("heads", &self.heads)
            .field("layers", &self.layers.len())
            .finish_non_exhaustive()
    }
}

/// Reads `name` (or `bert.name`) as `f32` values with the given shape.
fn tensor(st: &SafeTensors<'_>, name: &str, shape: &[usize]) -> Result<Vec<f32>, String> {
    let view = st
        .tensor(name)
        .or_else(|_| st.tensor(&format!("bert.{name}")))
        .map_err(|e| format!("weight {name}: {e}"))?;
    if view.shape() != shape {
        return Err(format!("weight {name}: shape {:?}, expected {shape:?}", view.shape()));
    }
    let data = view.data();
    match view.dtype() {
        Dtype::F32 => Ok(data.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect()),
        Dtype::F16 => Ok(data.chunks_exact(2).map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f32()).collect()),
        Dtype::BF16 => Ok(data.chunks_exact(2).map(|b| half::bf16::from_le_bytes([b[0], b[1]]).to_f32()).collect()),
        other => Err(format!("weight {name}: dtype {other:?} not supported (f32, f16 or bf16)")),
    }
}

fn norm(st: &SafeTensors<'_>, prefix: &str, width: usize) -> Result<Norm, String> {
    // Old checkpoints name LayerNorm parameters gamma/beta.
    let gamma = tensor(st, &format!("{prefix}.weight"), &[width]).or_else(|_| tensor(st, &format!("{prefix}.gamma"), &[width]))?;
    let beta = tensor(st, &format!("{prefix}.bias"), &[width]).or_else(|_| tensor(st, &format!("{prefix}.beta"), &[width]))?;
    Ok(Norm { gamma, beta })
}

impl Bert {
    /// Reads and packs the weights in `safetensors` (the bytes of `model.safetensors`) for a
    /// model described by `config`, for the instruction set `arch`, the linear layers' weights
    /// stored as `storage` says.
    pub fn load(safetensors: &[u8], config: &BertConfig, arch: Arch, storage: Storage) -> Result<Self, String> {
        let c = config;
        if c.hidden_act != "gelu" {
            return Err(format!("hidden_act {:?} not supported (only \"gelu\")", c.hidden_act));
        }
        if c.position_embedding_type.as_deref().is_some_and(|p| p != "absolute") {
            return Err(format!("position_embedding_type {:?} not supported (only \"absolute\")", c.position_embedding_type));
        }
        if c.num_attention_heads == 0 || !c.hidden_size.is_multiple_of(c.num_attention_heads) {
            return Err(format!("hidden_size {} is not a multiple of {} heads", c.hidden_size, c.num_attention_heads));
        }
        if c.num_hidden_layers > LAYERS_MAX || c.hidden_size > WIDTH_MAX || c.intermediate_size > WIDTH_MAX {
            return Err("model larger than this encoder accepts".into());
        }
        let st = SafeTensors::deserialize(safetensors).map_err(|e| format!("not a safetensors file: {e}"))?;
        let (h, i) = (c.hidden_size, c.intermediate_size);
        let linear = |name: &str, n: usize, k: usize| -> Result<Linear, String> {
            let w = tensor(&st, &format!("{name}.weight"), &[n, k])?;
            let b = tensor(&st, &format!("{name}.bias"), &[n])?;
            Linear::pack(arch, &w, &b, n, k, storage).map_err(|e| format!("{name}: {e}"))
        };
        let mut layers = Vec::with_capacity(c.num_hidden_layers);
        for l in 0..c.num_hidden_layers {
            let p = format!("encoder.layer.{l}");
            let mut w = Vec::with_capacity(3 * h * h);
            let mut b = Vec::with_capacity(3 * h);
            for part in ["query", "key", "value"] {
                w.extend(tensor(&st, &format!("{p}.attention.self.{part}.weight"), &[h, h])?);
                b.extend(tensor(&st, &format!("{p}.attention.self.{part}.bias"), &[h])?);
            }
            layers.push(Layer {
                qkv: Linear::pack(arch, &w, &b, 3 * h, h, storage).map_err(|e| format!("{p} qkv: {e}"))?,
                attn_out: linear(&format!("{p}.attention.output.dense"), h, h)?,
                attn_norm: norm(&st, &format!("{p}.attention.output.LayerNorm"), h)?,
                ffn_in: linear(&format!("{p}.intermediate.dense"), i, h)?,
                ffn_out: linear(&format!("{p}.output.dense"), h, i)?,
                ffn_norm: norm(&st, &format!("{p}.output.LayerNorm"), h)?,
            });
        }
        Ok(Self {
            arch,
            hidden: h,
            heads: c.num_attention_heads,
            intermediate: i,
            eps: c.layer_norm_eps as f32,
            vocab: c.vocab_size,
            max_positions: c.max_position_embeddings,
            type_vocab: c.type_vocab_size,
            word: tensor(&st, "embeddings.word_embeddings.weight", &[c.vocab_size, h])?,
            position: tensor(&st, "embeddings.position_embeddings.weight", &[c.max_position_embeddings, h])?,
            token_type: tensor(&st, "embeddings.token_type_embeddings.weight", &[c.type_vocab_size, h])?,
            embed_norm: norm(&st, "embeddings.LayerNorm", h)?,
            layers,
        })
    }

    /// Output dimensions.
    pub fn hidden(&self) -> usize {
        self.hidden
    }

    /// The instruction set the kernels run on.
    pub fn arch(&self) -> Arch {
        self.arch
    }

    /// Bytes held by the packed layer weights (embedding tables excluded).
    pub fn layer_bytes(&self) -> usize {
        self.layers
            .iter()
            .map(|l| l.qkv.bytes() + l.attn_out.bytes() + l.ffn_in.bytes() + l.ffn_out.bytes())
            .sum()
    }

    /// Runs the encoder over `seqs` in one pass and returns one mean-pooled, L2-normalised
    /// vector per sequence (a sequence without tokens gives the zero vector).
    pub fn embed(&self, seqs: &[Seq<'_>]) -> Result<Vec<Vec<f32>>, String> {
        let h = self.hidden;
        let rows: usize = seqs.iter().map(|s| s.ids.len()).sum();
        if rows == 0 {
            return Ok(vec![vec![0.0; h]; seqs.len()]);
        }
        let mut x = vec![0f32; rows * h];
        let mut at = 0;
        for s in seqs {
            if s.ids.len() != s.type_ids.len() {
                return Err(format!("{} token ids but {} type ids", s.ids.len(), s.type_ids.len()));
            }
            if s.ids.len() > self.max_positions {
                return Err(format!("{} tokens exceed the model's {} positions", s.ids.len(), self.max_positions));
            }
            for (pos, (&id, &ty)) in s.ids.iter().zip(s.type_ids).enumerate() {
                let (id, ty) = (id as usize, ty as usize);
                if id >= self.vocab || ty >= self.type_vocab {
                    return Err(format!("token id {id} or type id {ty} out of range"));
                }
                let row = &mut x[at * h..(at + 1) * h];
                let word = &self.word[id * h..(id + 1) * h];
                let position = &self.position[pos * h..(pos + 1) * h];
                let token_type = &self.token_type[ty * h..(ty + 1) * h];
                for (((o, a), b), c) in row.iter_mut().zip(word).zip(position).zip(token_type) {
                    *o = a + b + c;
                }
                at += 1;
            }
        }
        debug_assert_eq!(at, rows);
        let arch = self.arch;
        kernels::layer_norm(arch, &mut x, None, &self.embed_norm.gamma, &self.embed_norm.beta, self.eps);

        let mut qkv = vec![0f32; rows * 3 * h];
        let mut ctx = vec![0f32; rows * h];
        let mut tmp = vec![0f32; rows * h];
        let mut ffn = vec![0f32; rows * self.intermediate];
        let dh = h / self.heads;
        for layer in &self.layers {
            kernels::linear(arch, &x, rows, &layer.qkv, &mut qkv, false);
            let mut start = 0;
            for s in seqs {
                let t = s.ids.len();
                if t > 0 {
                    kernels::attention(
                        arch,
                        &qkv[start * 3 * h..(start + t) * 3 * h],
                        t,
                        self.heads,
                        dh,
                        &mut ctx[start * h..(start + t) * h],
                    );
                }
                start += t;
            }
            kernels::linear(arch, &ctx, rows, &layer.attn_out, &mut tmp, false);
            kernels::layer_norm(arch, &mut tmp, Some(&x), &layer.attn_norm.gamma, &layer.attn_norm.beta, self.eps);
            std::mem::swap(&mut x, &mut tmp);
            kernels::linear(arch, &x, rows, &layer.ffn_in, &mut ffn, true);
            kernels::linear(arch, &ffn, rows, &layer.ffn_out, &mut tmp, false);
            kernels::layer_norm(arch, &mut tmp, Some(&x), &layer.ffn_norm.gamma, &layer.ffn_norm.beta, self.eps);
            std::mem::swap(&mut x, &mut tmp);
        }

        // Mean pooling over each sequence's tokens, then x / max(‖x‖, 1e-12).
        let mut out = Vec::with_capacity(seqs.len());
        let mut start = 0;
        for s in seqs {
            let t = s.ids.len();
            let mut v = vec![0f32; h];
            for row in x[start * h..(start + t) * h].chunks_exact(h) {
                for (a, b) in v.iter_mut().zip(row) {
                    *a += b;
                }
            }
            start += t;
            if t > 0 {
                let count = t as f32;
                v.iter_mut().for_each(|a| *a /= count);
                let norm = v.iter().map(|a| a * a).sum::<f32>().sqrt().max(1e-12);
                v.iter_mut().for_each(|a| *a /= norm);
            }
            out.push(v);
        }
        Ok(out)
    }
}
