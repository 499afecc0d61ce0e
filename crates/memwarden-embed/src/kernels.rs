//! Dense kernels for the MiniLM forward pass: a matrix multiply against pre-packed weights,
//! attention, layer normalisation, GELU and `exp`.
//!
//! Every kernel is written once over [`pulp::Simd`] and run through [`pulp::Arch::dispatch`],
//! which picks the widest instruction set the CPU has at run time (AVX-512 = 16 `f32` lanes,
//! AVX2 + FMA = 8 lanes, else scalar) and compiles the kernel body with those target features
//! enabled. No `unsafe` here: pulp owns the feature detection and the intrinsics, and every
//! memory access is a bounds-checked slice access (hoisted out of the inner loops by the
//! compiler, since the loops run over the slices themselves).
//!
//! Numerics: `f32` activations and `f32` accumulation everywhere, as in the reference model
//! (PyTorch's CPU kernels); weights `f32` or half precision ([`Storage`]). Summation order
//! differs from the reference, which moves results by a few ulp; `exp` and `erf` are
//! polynomial approximations accurate to a few ulp (tests below), so the embeddings match the
//! sentence-transformers reference vectors to cosine ≥ 0.99999 (tests/minilm.rs).
//!
//! The one exception to "pulp owns the intrinsics" is the half-to-float conversion, which the
//! generic trait lacks: it goes through pulp's safe `V4` wrapper of `vcvtph2ps`, on AVX-512 only.

use pulp::{Arch, Simd, WithSimd};

/// Register tile on AVX-512 (32 vector registers): rows of activations × vectors of outputs;
/// 24 accumulators + 3 weight vectors + 1 broadcast. Measured against 6×4, 9×3, 4×6, 12×2
/// (best of 20+ calls, m = 27 and 512 rows, the model's four shapes): 8×3 was fastest
/// overall, 228–244 GFLOP/s on one core.
const V4_ROWS: usize = 8;
const V4_VECS: usize = 3;
/// Register tile on AVX2 (16 vector registers).
const V3_ROWS: usize = 6;
const V3_VECS: usize = 2;
/// Register tile on the scalar fallback.
const SCALAR_ROWS: usize = 4;
const SCALAR_VECS: usize = 4;
/// Inner-dimension block, in bytes of packed weights: one block of a weight panel stays in the
/// L1 data cache (48 KB here) while every row tile of the activations passes over it.
const KC_BYTES: usize = 32 * 1024;
/// Row block: this many activation rows stay in the L2 cache while the weight panels stream
/// past them (matters for large batches only).
const MC: usize = 96;

/// Weight-panel width in vectors per instruction set: AVX-512 3 × 16 lanes, AVX2 2 × 8,
/// scalar 4 × 1.
fn panel_vectors(lanes: usize) -> usize {
    match lanes {
        16 => V4_VECS,
        8 => V3_VECS,
        _ => SCALAR_VECS,
    }
}

/// Panel width (floats) the matmul kernel expects on `arch`: pack weights with this.
pub(crate) fn panel_width(arch: Arch) -> usize {
    struct Op;
    impl WithSimd for Op {
        type Output = usize;
        #[inline(always)]
        fn with_simd<S: Simd>(self, _simd: S) -> usize {
            panel_vectors(S::F32_LANES) * S::F32_LANES
        }
    }
    arch.dispatch(Op)
}

/// A linear layer (`y = x Wᵀ + b`) with its weight matrix packed for the matmul kernel: the
/// output columns are cut into panels of `panel` columns and each panel is stored as a
/// contiguous `k × panel` block (row `p` = input feature `p` of the panel's columns), so the
/// kernel streams it front to back.
pub(crate) struct Linear {
    /// Output features.
    pub n: usize,
    /// Input features.
    pub k: usize,
    /// Panel width in floats.
    panel: usize,
    /// `⌈n / panel⌉` panels of `k × panel` weights (the last zero-padded).
    data: Panels,
    /// `n` biases, zero-padded to whole panels.
    bias: Vec<f32>,
}

/// Packed weights: `f32`, or IEEE half precision (converted to `f32` in registers as the
/// kernel loads them; the products and sums stay `f32`).
enum Panels {
    F32(Vec<f32>),
    F16(Vec<pulp::u16x16>),
}

/// How a linear layer's weights are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Storage {
    /// `f32`, as in the checkpoint.
    F32,
    /// Rounded to IEEE half precision (half the bytes to stream). Needs AVX-512 (F16C-class
    /// conversion); elsewhere the half-rounded values are stored as `f32`, so every machine
    /// computes with the same weights.
    F16,
    /// Experiment only: the numerics of an int8 path (symmetric int8 per output channel),
    /// simulated in `f32` (quantised, then stored dequantised).
    #[cfg(test)]
    Int8Sim,
    /// Experiment only: weights rounded to bfloat16 (as a `vdpbf16ps` kernel would hold them).
    #[cfg(test)]
    Bf16Sim,
    /// Experiment only: symmetric int8 weights with one scale per output channel and group of
    /// this many inputs (weight-only int8, as a kernel widening int8 to f32 would hold them).
    #[cfg(test)]
    Int8GroupSim(usize),
}

/// Experiment only: how activations are rounded before every linear layer.
#[cfg(test)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ActivationRounding {
    /// Not at all (f32).
    None,
    /// Symmetric int8 per row (scale max|x| / 127), as an int8 (VNNI) kernel would.
    Int8,
    /// To bfloat16, as a `vdpbf16ps` kernel would.
    Bf16,
}

#[cfg(test)]
thread_local! {
    /// Experiment only: how each activation row is rounded before every linear layer.
    pub(crate) static ROUND_ACTIVATIONS: std::cell::Cell<ActivationRounding> =
        const { std::cell::Cell::new(ActivationRounding::None) };
}

/// Symmetric int8 quantise-dequantise of `x` in place (scale max|x| / 127).
#[cfg(test)]
fn int8_round_trip(x: &mut [f32]) {
    let max = x.iter().fold(0f32, |m, v| m.max(v.abs()));
    if max > 0.0 {
        let scale = max / 127.0;
        x.iter_mut().for_each(|v| *v = (*v / scale).round().clamp(-127.0, 127.0) * scale);
    }
}

impl Linear {
    /// Packs `weight` (`n × k`, row-major: PyTorch's `out × in` layout) and `bias` (`n`) for
    /// the kernel on `arch`.
    pub fn pack(
        arch: Arch,
        weight: &[f32],
        bias: &[f32],
        n: usize,
        k: usize,
        storage: Storage,
    ) -> Result<Self, String> {
        let panel = panel_width(arch);
        if weight.len() != n * k || bias.len() != n {
            return Err(format!("linear layer: {} weights and {} biases for {n} × {k}", weight.len(), bias.len()));
        }
        if panel == 0 || n == 0 || k == 0 {
            return Err(format!("linear layer: {n} × {k} (panel width {panel})"));
        }
        // The last panel is padded with zero columns (weights and biases) when `n` is not a
        // multiple of the panel width; the kernel writes only the real columns.
        let n_padded = n.div_ceil(panel) * panel;
        #[cfg(test)]
        let quantised: Vec<f32>;
        #[cfg(test)]
        let weight = match storage {
            Storage::Int8Sim => {
                let mut w = weight.to_vec();
                w.chunks_exact_mut(k).for_each(int8_round_trip);
                quantised = w;
                &quantised[..]
            }
            Storage::Bf16Sim => {
                quantised = weight.iter().map(|&x| half::bf16::from_f32(x).to_f32()).collect();
                &quantised[..]
            }
            Storage::Int8GroupSim(group) => {
                let mut w = weight.to_vec();
                w.chunks_exact_mut(k).for_each(|row| row.chunks_mut(group.max(1)).for_each(int8_round_trip));
                quantised = w;
                &quantised[..]
            }
            Storage::F32 | Storage::F16 => weight,
        };
        let mut packed = vec![0f32; n_padded * k];
        for (j, block) in packed.chunks_exact_mut(k * panel).enumerate() {
            for (p, row) in block.chunks_exact_mut(panel).enumerate() {
                for (c, slot) in row.iter_mut().enumerate().take(n.saturating_sub(j * panel)) {
                    *slot = weight[(j * panel + c) * k + p];
                }
            }
        }
        let mut bias = bias.to_vec();
        bias.resize(n_padded, 0.0);
        let data = match (storage, arch) {
            (Storage::F32, _) => Panels::F32(packed),
            (Storage::F16, Arch::V4(_)) if panel.is_multiple_of(16) => Panels::F16(
                packed
                    .chunks_exact(16)
                    .map(|c| pulp::u16x16(
                        half_bits(c[0]), half_bits(c[1]), half_bits(c[2]), half_bits(c[3]),
                        half_bits(c[4]), half_bits(c[5]), half_bits(c[6]), half_bits(c[7]),
                        half_bits(c[8]), half_bits(c[9]), half_bits(c[10]), half_bits(c[11]),
                        half_bits(c[12]), half_bits(c[13]), half_bits(c[14]), half_bits(c[15]),
                    ))
                    .collect(),
            ),
            (Storage::F16, _) => Panels::F32(packed.iter().map(|&x| half::f16::from_f32(x).to_f32()).collect()),
            #[cfg(test)]
            (Storage::Int8Sim | Storage::Bf16Sim | Storage::Int8GroupSim(_), _) => Panels::F32(packed),
        };
        Ok(Self { n, k, panel, data, bias })
    }

    /// Bytes of weights and biases.
    pub fn bytes(&self) -> usize {
        let weights = match &self.data {
            Panels::F32(d) => std::mem::size_of_val(d.as_slice()),
            Panels::F16(d) => std::mem::size_of_val(d.as_slice()),
        };
        weights + std::mem::size_of_val(self.bias.as_slice())
    }
}

fn half_bits(x: f32) -> u16 {
    half::f16::from_f32(x).to_bits()
}

/// `c = a · Wᵀ + b` for `m` rows (`a`: `m × k`, `c`: `m × n`, both row-major), then GELU on
/// `c` when `gelu` is set.
pub(crate) fn linear(arch: Arch, a: &[f32], m: usize, w: &Linear, c: &mut [f32], gelu: bool) {
    debug_assert_eq!(a.len(), m * w.k);
    debug_assert_eq!(c.len(), m * w.n);
    #[cfg(test)]
    let quantised: Vec<f32>;
    #[cfg(test)]
    let a = match ROUND_ACTIVATIONS.with(std::cell::Cell::get) {
        ActivationRounding::None => a,
        ActivationRounding::Int8 => {
            let mut q = a.to_vec();
            q.chunks_exact_mut(w.k).for_each(int8_round_trip);
            quantised = q;
            &quantised[..]
        }
        ActivationRounding::Bf16 => {
            quantised = a.iter().map(|&x| half::bf16::from_f32(x).to_f32()).collect();
            &quantised[..]
        }
    };
    match (&w.data, arch) {
        (Panels::F16(panels), Arch::V4(v4)) => {
            v4.vectorize(LinearF16Op { v4, op: LinearOp { a, m, w, c, gelu }, panels });
        }
        (Panels::F16(_), _) => debug_assert!(false, "half-precision panels are only packed for AVX-512"),
        (Panels::F32(panels), _) => arch.dispatch(LinearF32Op { op: LinearOp { a, m, w, c, gelu }, panels }),
    }
}

struct LinearOp<'a> {
    a: &'a [f32],
    m: usize,
    w: &'a Linear,
    c: &'a mut [f32],
    gelu: bool,
}

/// Loads one vector of a weight panel as `f32` (inlined into the kernel, so it runs with the
/// kernel's target features).
trait PanelLoad<S: Simd>: Copy {
    /// What the panel stores per vector.
    type Stored: Copy;
    fn load(self, x: Self::Stored) -> S::f32s;
}

/// `f32` panels: the vector as stored.
#[derive(Clone, Copy)]
struct AsStored;

impl<S: Simd> PanelLoad<S> for AsStored {
    type Stored = S::f32s;
    #[inline(always)]
    fn load(self, x: S::f32s) -> S::f32s {
        x
    }
}

/// Half-precision panels on AVX-512: 16 halves widened to 16 floats (`vcvtph2ps`), exactly.
#[derive(Clone, Copy)]
struct HalfToF32(pulp::x86::V4);

impl PanelLoad<pulp::x86::V4> for HalfToF32 {
    type Stored = pulp::u16x16;
    #[inline(always)]
    fn load(self, x: pulp::u16x16) -> pulp::f32x16 {
        pulp::cast(self.0.avx512f._mm512_cvtph_ps(pulp::cast(x)))
    }
}

struct LinearF16Op<'a> {
    v4: pulp::x86::V4,
    op: LinearOp<'a>,
    panels: &'a [pulp::u16x16],
}

impl pulp::NullaryFnOnce for LinearF16Op<'_> {
    type Output = ();
    #[inline(always)]
    fn call(self) {
        linear_tiled::<pulp::x86::V4, V4_ROWS, V4_VECS, HalfToF32>(self.v4, self.op, self.panels, HalfToF32(self.v4));
    }
}

struct LinearF32Op<'a> {
    op: LinearOp<'a>,
    panels: &'a [f32],
}

impl WithSimd for LinearF32Op<'_> {
    type Output = ();
    #[inline(always)]
    fn with_simd<S: Simd>(self, simd: S) {
        let (panels, _) = S::as_simd_f32s(self.panels);
        match S::F32_LANES {
            16 => linear_tiled::<S, V4_ROWS, V4_VECS, AsStored>(simd, self.op, panels, AsStored),
            8 => linear_tiled::<S, V3_ROWS, V3_VECS, AsStored>(simd, self.op, panels, AsStored),
            _ => linear_tiled::<S, SCALAR_ROWS, SCALAR_VECS, AsStored>(simd, self.op, panels, AsStored),
        }
    }
}

/// The tiled matmul over weight panels stored as vectors of `B` (`f32` vectors, or 16 halves),
/// `load` turning one into an `f32` vector.
#[inline(always)]
fn linear_tiled<S: Simd, const MR: usize, const NV: usize, L: PanelLoad<S>>(
    simd: S,
    op: LinearOp<'_>,
    panels: &[L::Stored],
    load: L,
) {
    let LinearOp { a, m, w, c, gelu } = op;
    let (n, k) = (w.n, w.k);
    const { assert!(MR <= 8) };
    let panel = NV * S::F32_LANES;
    if w.panel != panel || a.len() < m * k || c.len() < m * n {
        debug_assert!(false, "linear: weights packed for another panel width or short buffers");
        return;
    }
    let (bias, _) = S::as_simd_f32s(&w.bias);
    let (bias, _) = bias.as_chunks::<NV>();
    let panel_count = n.div_ceil(panel);
    if bias.len() < panel_count || panels.len() < panel_count * k * NV {
        debug_assert!(false, "linear: short weight panels");
        return;
    }
    let kc_max = (KC_BYTES / (NV * std::mem::size_of::<L::Stored>())).max(8);
    // Panels outer and inner blocks next: the weights stream through memory in order, once per
    // row block.
    for i0 in (0..m).step_by(MC) {
        let rows = MC.min(m - i0);
        for (j, bias_j) in bias.iter().enumerate().take(panel_count) {
            for k0 in (0..k).step_by(kc_max) {
                let kc = kc_max.min(k - k0);
                let first = k0 == 0;
                let last = k0 + kc == k;
                let block = &panels[(j * k + k0) * NV..(j * k + k0 + kc) * NV];
                let (block, _) = block.as_chunks::<NV>();
                let mut r0 = 0;
                while r0 < rows {
                    let col0 = j * panel;
                    let t = Tile { a, c: &mut *c, k, n, k0, row: i0 + r0, col0, cols: panel.min(n - col0), first, last, gelu };
                    let left = rows - r0;
                    // A full tile where possible, then one smaller tile for the remainder
                    // (tiles of up to 8 rows are instantiated).
                    let done = match left.min(MR) {
                        8 => tile::<S, 8, NV, L>(simd, t, block, bias_j, load),
                        7 => tile::<S, 7, NV, L>(simd, t, block, bias_j, load),
                        6 => tile::<S, 6, NV, L>(simd, t, block, bias_j, load),
                        5 => tile::<S, 5, NV, L>(simd, t, block, bias_j, load),
                        4 => tile::<S, 4, NV, L>(simd, t, block, bias_j, load),
                        3 => tile::<S, 3, NV, L>(simd, t, block, bias_j, load),
                        2 => tile::<S, 2, NV, L>(simd, t, block, bias_j, load),
                        _ => tile::<S, 1, NV, L>(simd, t, block, bias_j, load),
                    };
                    r0 += done;
                }
            }
        }
    }
}

/// Where one register tile reads and writes.
struct Tile<'a, 'c> {
    a: &'a [f32],
    c: &'c mut [f32],
    k: usize,
    n: usize,
    /// First inner index of this block.
    k0: usize,
    /// First row.
    row: usize,
    /// First output column.
    col0: usize,
    /// Output columns of this panel (the panel width, or less in a zero-padded last panel).
    cols: usize,
    /// First inner block: start from the bias (else from `c`).
    first: bool,
    /// Last inner block: apply the epilogue (GELU).
    last: bool,
    gelu: bool,
}

/// `R` rows × `NV` vectors of output, accumulated in registers over one inner block. Returns `R`.
#[inline(always)]
fn tile<S: Simd, const R: usize, const NV: usize, L: PanelLoad<S>>(
    simd: S,
    t: Tile<'_, '_>,
    block: &[[L::Stored; NV]],
    bias: &[S::f32s; NV],
    load: L,
) -> usize {
    let kc = block.len();
    let zero = simd.splat_f32s(0.0);
    // This panel's columns of row `r` of `c`: whole vectors, then a partial one when the layer's
    // width is not a multiple of the panel (the last panel is zero-padded).
    // A plain loop, not `array::from_fn` with a branchy closure: that was compiled out of line
    // (without the kernel's target features) and its result copied with memmove, 4% of a
    // query's time (perf). (The `from_fn`s below are inlined; written as loops, they made the
    // accumulators spill: 3x slower.)
    let mut acc = [[zero; NV]; R];
    for (r, acc_r) in acc.iter_mut().enumerate() {
        if t.first {
            *acc_r = *bias;
        } else {
            let (cv, tail) = S::as_simd_f32s(&t.c[(t.row + r) * t.n + t.col0..][..t.cols]);
            for (v, x) in acc_r.iter_mut().enumerate() {
                *x = match v.cmp(&cv.len()) {
                    std::cmp::Ordering::Less => cv[v],
                    std::cmp::Ordering::Equal if !tail.is_empty() => simd.partial_load_f32s(tail),
                    _ => zero,
                };
            }
        }
    }
    let rows: [&[f32]; R] = std::array::from_fn(|r| &t.a[(t.row + r) * t.k + t.k0..][..kc]);
    for (p, b) in block.iter().enumerate() {
        let b: [S::f32s; NV] = std::array::from_fn(|v| load.load(b[v]));
        for r in 0..R {
            let x = simd.splat_f32s(rows[r][p]);
            for v in 0..NV {
                acc[r][v] = simd.mul_add_e_f32s(x, b[v], acc[r][v]);
            }
        }
    }
    for (r, acc_r) in acc.iter().enumerate() {
        let (cv, tail) = S::as_mut_simd_f32s(&mut t.c[(t.row + r) * t.n + t.col0..][..t.cols]);
        let whole = cv.len();
        for (v, &x) in acc_r.iter().enumerate() {
            let x = if t.last && t.gelu { gelu_v(simd, x) } else { x };
            if v < whole {
                cv[v] = x;
            } else if v == whole && !tail.is_empty() {
                simd.partial_store_f32s(tail, x);
            }
        }
    }
    R
}

/// Self-attention of one sequence: `qkv` holds `t` rows of `[q | k | v]` (`3 · heads · dh`
/// floats each); writes the `t × (heads · dh)` context into `ctx`. No mask: every row is a real
/// token (sequences are never padded).
pub(crate) fn attention(arch: Arch, qkv: &[f32], t: usize, heads: usize, dh: usize, ctx: &mut [f32]) {
    debug_assert_eq!(qkv.len(), t * 3 * heads * dh);
    debug_assert_eq!(ctx.len(), t * heads * dh);
    arch.dispatch(AttentionOp { qkv, t, heads, dh, ctx });
}

struct AttentionOp<'a> {
    qkv: &'a [f32],
    t: usize,
    heads: usize,
    dh: usize,
    ctx: &'a mut [f32],
}

impl WithSimd for AttentionOp<'_> {
    type Output = ();
    #[inline(always)]
    fn with_simd<S: Simd>(self, simd: S) {
        let lanes = S::F32_LANES;
        let dv = if self.dh.is_multiple_of(lanes) { self.dh / lanes } else { 0 };
        // Register tiles for the two products: scores with the matmul's tile, the weighted
        // sum of values with (rows × dh/lanes vectors) within the register budget.
        match (lanes, dv) {
            (16, 1) => attention_tiled::<S, V4_ROWS, V4_VECS, 8, 1>(simd, self),
            (16, 2) => attention_tiled::<S, V4_ROWS, V4_VECS, 8, 2>(simd, self),
            (16, 4) => attention_tiled::<S, V4_ROWS, V4_VECS, 4, 4>(simd, self),
            (8, 2) => attention_tiled::<S, V3_ROWS, V3_VECS, 4, 2>(simd, self),
            (8, 4) => attention_tiled::<S, V3_ROWS, V3_VECS, 2, 4>(simd, self),
            _ => attention_rows(simd, self),
        }
    }
}

/// Attention with both products register-tiled, one head at a time:
/// `S = (q · scale) Kᵀ` with tiles of `MR × NV` vectors (queries padded to `MR` rows, keys to
/// `NV` vectors), softmax of each row over the real keys, `ctx = P V` with tiles of `PR` rows ×
/// `DV` vectors (`DV · lanes = dh`).
#[inline(always)]
fn attention_tiled<S: Simd, const MR: usize, const NV: usize, const PR: usize, const DV: usize>(
    simd: S,
    op: AttentionOp<'_>,
) {
    let AttentionOp { qkv, t, heads, dh, ctx } = op;
    let lanes = S::F32_LANES;
    if t == 0 || dh != DV * lanes {
        return;
    }
    let hidden = heads * dh;
    let stride = 3 * hidden;
    let scale = simd.splat_f32s(1.0 / (dh as f32).sqrt());
    let score_rows = t.div_ceil(MR) * MR; // query rows, padded for the score tiles
    let rows = score_rows.max(t.div_ceil(PR) * PR); // and for the value tiles
    let cols = t.div_ceil(NV * lanes) * NV * lanes; // key columns, padded
    let whole_tiles_rows = t / MR * MR;
    // Queries and values are read in place from `qkv` (a head's 32 floats are contiguous in a
    // row); only the keys are transposed, and the queries of a last partial tile copied and
    // zero-padded.
    let mut q_tail = vec![0f32; MR * dh];
    let mut kt = vec![0f32; dh * cols];
    let mut scores = vec![0f32; rows * cols];
    let (qkv_v, _) = S::as_simd_f32s(qkv);
    let col_vecs = cols / lanes;
    for h in 0..heads {
        for j in 0..t {
            let key = &qkv[j * stride + hidden + h * dh..][..dh];
            for (d, &x) in key.iter().enumerate() {
                kt[d * cols + j] = x;
            }
        }
        for (r, row) in q_tail.chunks_exact_mut(dh).enumerate() {
            let i = whole_tiles_rows + r;
            if i < t {
                row.copy_from_slice(&qkv[i * stride + h * dh..][..dh]);
            } else {
                row.fill(0.0);
            }
        }
        {
            let (ktv, _) = S::as_simd_f32s(&kt);
            let (sv, _) = S::as_mut_simd_f32s(&mut scores);
            for i0 in (0..score_rows).step_by(MR) {
                let (a, lda) = if i0 < whole_tiles_rows { (&qkv[i0 * stride + h * dh..], stride) } else { (&q_tail[..], dh) };
                for c0 in (0..col_vecs).step_by(NV) {
                    let acc = tile_strided::<S, MR, NV>(simd, a, lda, dh, &ktv[c0..], col_vecs);
                    for (r, acc_r) in acc.iter().enumerate() {
                        for (o, x) in sv[(i0 + r) * col_vecs + c0..][..NV].iter_mut().zip(acc_r) {
                            *o = simd.mul_f32s(*x, scale);
                        }
                    }
                }
            }
        }
        for i in 0..t {
            softmax_in_place(simd, &mut scores[i * cols..i * cols + t]);
        }
        let values = &qkv_v[(2 * hidden + h * dh) / lanes..];
        for i0 in (0..t).step_by(PR) {
            let acc = tile_strided::<S, PR, DV>(simd, &scores[i0 * cols..], cols, t, values, stride / lanes);
            for (r, acc_r) in acc.iter().enumerate().take(t - i0) {
                let (out, _) = S::as_mut_simd_f32s(&mut ctx[(i0 + r) * hidden + h * dh..][..dh]);
                out.copy_from_slice(acc_r);
            }
        }
    }
}

/// `R` rows × `NV` vectors: `Σ_p a[r][p] · b[p]`, with `a` row `r` at `a[r · lda..][..kc]` and
/// `b` row `p` the `NV` vectors at `b[p · ldb..]`.
#[inline(always)]
fn tile_strided<S: Simd, const R: usize, const NV: usize>(
    simd: S,
    a: &[f32],
    lda: usize,
    kc: usize,
    b: &[S::f32s],
    ldb: usize,
) -> [[S::f32s; NV]; R] {
    let zero = simd.splat_f32s(0.0);
    let mut acc = [[zero; NV]; R];
    let mut rows: [&[f32]; R] = [&[]; R];
    for (r, row) in rows.iter_mut().enumerate() {
        *row = &a[r * lda..][..kc];
    }
    for p in 0..kc {
        let bp = &b[p * ldb..][..NV];
        for r in 0..R {
            let x = simd.splat_f32s(rows[r][p]);
            for v in 0..NV {
                acc[r][v] = simd.mul_add_e_f32s(x, bp[v], acc[r][v]);
            }
        }
    }
    acc
}

/// Attention one query row at a time: the fallback for head widths the tiles do not cover.
#[inline(always)]
fn attention_rows<S: Simd>(simd: S, op: AttentionOp<'_>) {
    let AttentionOp { qkv, t, heads, dh, ctx } = op;
    let lanes = S::F32_LANES;
    let hidden = heads * dh;
    let stride = 3 * hidden;
    // Keys transposed (dh × tp, zero-padded to whole vectors), one head at a time.
    let tp = t.div_ceil(lanes) * lanes;
    let mut kt = vec![0f32; dh * tp];
    let mut scores = vec![0f32; tp];
    let scale = 1.0 / (dh as f32).sqrt();
    for h in 0..heads {
        for j in 0..t {
            let key = &qkv[j * stride + hidden + h * dh..][..dh];
            for (d, &x) in key.iter().enumerate() {
                kt[d * tp + j] = x;
            }
        }
        for i in 0..t {
            let q = &qkv[i * stride + h * dh..][..dh];
            {
                let (sv, _) = S::as_mut_simd_f32s(&mut scores);
                sv.fill(simd.splat_f32s(0.0));
                for (d, &qd) in q.iter().enumerate() {
                    let x = simd.splat_f32s(qd * scale);
                    let (kv, _) = S::as_simd_f32s(&kt[d * tp..(d + 1) * tp]);
                    for (s, kd) in sv.iter_mut().zip(kv) {
                        *s = simd.mul_add_e_f32s(x, *kd, *s);
                    }
                }
            }
            softmax_in_place(simd, &mut scores[..t]);
            let out = &mut ctx[i * hidden + h * dh..][..dh];
            out.fill(0.0);
            for (j, &pj) in scores[..t].iter().enumerate() {
                let value = &qkv[j * stride + 2 * hidden + h * dh..][..dh];
                axpy(simd, pj, value, out);
            }
        }
    }
}

/// `y += a · x`.
#[inline(always)]
fn axpy<S: Simd>(simd: S, a: f32, x: &[f32], y: &mut [f32]) {
    let av = simd.splat_f32s(a);
    let (xv, xt) = S::as_simd_f32s(x);
    let (yv, yt) = S::as_mut_simd_f32s(y);
    for (yi, xi) in yv.iter_mut().zip(xv) {
        *yi = simd.mul_add_e_f32s(av, *xi, *yi);
    }
    for (yi, xi) in yt.iter_mut().zip(xt) {
        *yi += a * xi;
    }
}

/// Softmax of `x` in place (max subtracted first, as PyTorch does).
#[inline(always)]
fn softmax_in_place<S: Simd>(simd: S, x: &mut [f32]) {
    let max = {
        let (xv, xt) = S::as_simd_f32s(x);
        let mut m = simd.splat_f32s(f32::NEG_INFINITY);
        for v in xv {
            m = simd.max_f32s(m, *v);
        }
        xt.iter().fold(simd.reduce_max_f32s(m), |a, &b| a.max(b))
    };
    let m = simd.splat_f32s(max);
    let mut sum = 0f32;
    {
        let (xv, xt) = S::as_mut_simd_f32s(x);
        let mut acc = simd.splat_f32s(0.0);
        for v in xv.iter_mut() {
            *v = exp_v(simd, simd.sub_f32s(*v, m));
            acc = simd.add_f32s(acc, *v);
        }
        sum += simd.reduce_sum_f32s(acc);
        for v in xt.iter_mut() {
            *v = exp_s(*v - max);
            sum += *v;
        }
    }
    let inv = 1.0 / sum;
    let iv = simd.splat_f32s(inv);
    let (xv, xt) = S::as_mut_simd_f32s(x);
    for v in xv.iter_mut() {
        *v = simd.mul_f32s(*v, iv);
    }
    for v in xt.iter_mut() {
        *v *= inv;
    }
}

/// Layer normalisation of each row of `x` (`width` floats) in place, optionally after adding
/// `residual` to it: `x = LN(x + residual) · gamma + beta`, the mean and variance over the row
/// (biased variance, as PyTorch), `eps` inside the square root.
pub(crate) fn layer_norm(
    arch: Arch,
    x: &mut [f32],
    residual: Option<&[f32]>,
    gamma: &[f32],
    beta: &[f32],
    eps: f32,
) {
    debug_assert_eq!(gamma.len(), beta.len());
    debug_assert!(residual.is_none_or(|r| r.len() == x.len()));
    arch.dispatch(LayerNormOp { x, residual, gamma, beta, eps });
}

struct LayerNormOp<'a> {
    x: &'a mut [f32],
    residual: Option<&'a [f32]>,
    gamma: &'a [f32],
    beta: &'a [f32],
    eps: f32,
}

impl WithSimd for LayerNormOp<'_> {
    type Output = ();
    #[inline(always)]
    fn with_simd<S: Simd>(self, simd: S) {
        let LayerNormOp { x, residual, gamma, beta, eps } = self;
        let width = gamma.len();
        if width == 0 {
            return;
        }
        let (gv, gt) = S::as_simd_f32s(gamma);
        let (bv, bt) = S::as_simd_f32s(beta);
        for (i, row) in x.chunks_exact_mut(width).enumerate() {
            if let Some(res) = residual {
                let res = &res[i * width..(i + 1) * width];
                let (rv, rt) = S::as_simd_f32s(res);
                let (xv, xt) = S::as_mut_simd_f32s(row);
                for (a, b) in xv.iter_mut().zip(rv) {
                    *a = simd.add_f32s(*a, *b);
                }
                for (a, b) in xt.iter_mut().zip(rt) {
                    *a += b;
                }
            }
            let mean = sum(simd, row) / width as f32;
            let mv = simd.splat_f32s(mean);
            let (xv, xt) = S::as_mut_simd_f32s(row);
            let mut acc = simd.splat_f32s(0.0);
            for v in xv.iter() {
                let d = simd.sub_f32s(*v, mv);
                acc = simd.mul_add_e_f32s(d, d, acc);
            }
            let mut var = simd.reduce_sum_f32s(acc);
            for v in xt.iter() {
                var += (v - mean) * (v - mean);
            }
            let inv = 1.0 / (var / width as f32 + eps).sqrt();
            let iv = simd.splat_f32s(inv);
            for ((v, g), b) in xv.iter_mut().zip(gv).zip(bv) {
                let d = simd.mul_f32s(simd.sub_f32s(*v, mv), iv);
                *v = simd.mul_add_e_f32s(d, *g, *b);
            }
            for ((v, g), b) in xt.iter_mut().zip(gt).zip(bt) {
                *v = (*v - mean) * inv * g + b;
            }
        }
    }
}

#[inline(always)]
fn sum<S: Simd>(simd: S, x: &[f32]) -> f32 {
    let (xv, xt) = S::as_simd_f32s(x);
    let mut acc = simd.splat_f32s(0.0);
    for v in xv {
        acc = simd.add_f32s(acc, *v);
    }
    simd.reduce_sum_f32s(acc) + xt.iter().sum::<f32>()
}

const LOG2_E: f32 = std::f32::consts::LOG2_E;
/// 1.5 · 2²³: adding it rounds an `f32` of magnitude < 2²² to an integer, kept in the low
/// mantissa bits.
const ROUNDING_MAGIC: f32 = 12_582_912.0;
const ROUNDING_MAGIC_BITS: u32 = 0x4B40_0000;
/// ln 2 split in two for the range reduction (Cody & Waite; the constants of Cephes' `expf`).
const LN2_HI: f32 = 0.693_359_4;
const LN2_LO: f32 = -2.121_944_4e-4;
/// Cephes `expf` polynomial: e^r ≈ 1 + r + r² · P(r) for |r| ≤ ln 2 / 2.
const EXP_P: [f32; 6] = [1.987_569_1e-4, 1.398_199_9e-3, 8.333_452e-3, 4.166_579_6e-2, 1.666_666_5e-1, 0.5];
/// Inputs are clamped to this range (e^x stays a normal `f32`).
const EXP_MIN: f32 = -87.336_55;
const EXP_MAX: f32 = 88.376_26;

/// e^x for a vector, with the polynomial of Cephes' `expf` (max relative error ≈ 2 ulp).
#[inline(always)]
pub(crate) fn exp_v<S: Simd>(simd: S, x: S::f32s) -> S::f32s {
    let x = simd.min_f32s(simd.max_f32s(x, simd.splat_f32s(EXP_MIN)), simd.splat_f32s(EXP_MAX));
    let magic = simd.splat_f32s(ROUNDING_MAGIC);
    let t = simd.add_f32s(simd.mul_f32s(x, simd.splat_f32s(LOG2_E)), magic);
    let n = simd.sub_f32s(t, magic);
    let r = simd.mul_add_e_f32s(n, simd.splat_f32s(-LN2_HI), x);
    let r = simd.mul_add_e_f32s(n, simd.splat_f32s(-LN2_LO), r);
    let mut p = simd.splat_f32s(EXP_P[0]);
    for &c in &EXP_P[1..] {
        p = simd.mul_add_e_f32s(p, r, simd.splat_f32s(c));
    }
    let r2 = simd.mul_f32s(r, r);
    let y = simd.mul_add_e_f32s(p, r2, simd.add_f32s(r, simd.splat_f32s(1.0)));
    // 2^n: the biased exponent n + 127 moved into the exponent field (× 2²³ = shift by 23).
    let bits = simd.transmute_u32s_f32s(t);
    let biased = simd.add_u32s(bits, simd.splat_u32s(127u32.wrapping_sub(ROUNDING_MAGIC_BITS)));
    let scale = simd.transmute_f32s_u32s(simd.mul_u32s(biased, simd.splat_u32s(1 << 23)));
    simd.mul_f32s(y, scale)
}

/// e^x for one value, the same approximation as [`exp_v`] (used for vector tails).
#[inline(always)]
pub(crate) fn exp_s(x: f32) -> f32 {
    let x = x.clamp(EXP_MIN, EXP_MAX);
    let t = x * LOG2_E + ROUNDING_MAGIC;
    let n = t - ROUNDING_MAGIC;
    let r = n * -LN2_HI + x;
    let r = n * -LN2_LO + r;
    let mut p = EXP_P[0];
    for &c in &EXP_P[1..] {
        p = p * r + c;
    }
    let y = p * (r * r) + (r + 1.0);
    let biased = t.to_bits().wrapping_add(127u32.wrapping_sub(ROUNDING_MAGIC_BITS));
    y * f32::from_bits(biased.wrapping_mul(1 << 23))
}

/// erf is ±1 in `f32` beyond this.
const ERF_CLAMP: f32 = 4.0;
/// Rational approximation erf(x) ≈ x · P(x²) / Q(x²) on [-4, 4] (the `f32` erf of Eigen and
/// XLA); odd numerator coefficients, highest power first.
const ERF_P: [f32; 7] = [
    -2.726_142_3e-10,
    2.770_681_4e-8,
    -2.101_024e-6,
    -5.692_506_4e-5,
    -7.349_906_3e-4,
    -2.954_6e-3,
    -1.609_603_3e-2,
];
/// Even denominator coefficients, highest power first.
const ERF_Q: [f32; 5] = [-1.456_607_2e-5, -2.133_740_6e-4, -1.682_827e-3, -7.373_329e-3, -1.426_474e-2];

#[inline(always)]
fn erf_v<S: Simd>(simd: S, x: S::f32s) -> S::f32s {
    let x = simd.min_f32s(simd.max_f32s(x, simd.splat_f32s(-ERF_CLAMP)), simd.splat_f32s(ERF_CLAMP));
    let x2 = simd.mul_f32s(x, x);
    let mut p = simd.splat_f32s(ERF_P[0]);
    for &c in &ERF_P[1..] {
        p = simd.mul_add_e_f32s(x2, p, simd.splat_f32s(c));
    }
    let p = simd.mul_f32s(x, p);
    let mut q = simd.splat_f32s(ERF_Q[0]);
    for &c in &ERF_Q[1..] {
        q = simd.mul_add_e_f32s(x2, q, simd.splat_f32s(c));
    }
    simd.div_f32s(p, q)
}

/// GELU with the exact erf form, `x · (1 + erf(x / √2)) / 2` (BERT's `gelu`).
#[inline(always)]
fn gelu_v<S: Simd>(simd: S, x: S::f32s) -> S::f32s {
    let half = simd.splat_f32s(0.5);
    let e = erf_v(simd, simd.mul_f32s(x, simd.splat_f32s(std::f32::consts::FRAC_1_SQRT_2)));
    simd.mul_f32s(simd.mul_f32s(x, half), simd.add_f32s(e, simd.splat_f32s(1.0)))
}

/// erf of each value (testing and scalar use), through the vector code.
#[cfg(test)]
fn erf_all(arch: Arch, xs: &mut [f32]) {
    struct Op<'a>(&'a mut [f32]);
    impl WithSimd for Op<'_> {
        type Output = ();
        #[inline(always)]
        fn with_simd<S: Simd>(self, simd: S) {
            for x in self.0.iter_mut() {
                let v = erf_v(simd, simd.splat_f32s(*x));
                *x = simd.reduce_max_f32s(v);
            }
        }
    }
    arch.dispatch(Op(xs));
}

#[cfg(test)]
fn exp_all(arch: Arch, xs: &mut [f32]) {
    struct Op<'a>(&'a mut [f32]);
    impl WithSimd for Op<'_> {
        type Output = ();
        #[inline(always)]
        fn with_simd<S: Simd>(self, simd: S) {
            for x in self.0.iter_mut() {
                let v = exp_v(simd, simd.splat_f32s(*x));
                *x = simd.reduce_max_f32s(v);
            }
        }
    }
    arch.dispatch(Op(xs));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// erf in f64 by its Taylor series (exact to ~1e-11 on [-4, 4]) or ±1 beyond.
    fn erf_f64(x: f64) -> f64 {
        if x.abs() > 4.0 {
            return x.signum();
        }
        let mut term = x;
        let mut total = x;
        for n in 1..200 {
            term *= -x * x / n as f64;
            total += term / (2 * n + 1) as f64;
        }
        total * 2.0 / std::f64::consts::PI.sqrt()
    }

    fn arches() -> Vec<(&'static str, Arch)> {
        vec![("detected", Arch::new()), ("scalar", Arch::Scalar)]
    }

    #[test]
    fn erf_matches_f64_series() {
        for (name, arch) in arches() {
            let mut xs: Vec<f32> = (-600..=600).map(|i| i as f32 / 100.0).collect();
            let want: Vec<f64> = xs.iter().map(|&x| erf_f64(f64::from(x))).collect();
            erf_all(arch, &mut xs);
            let worst = xs.iter().zip(&want).map(|(&g, &w)| (f64::from(g) - w).abs()).fold(0.0, f64::max);
            assert!(worst < 5e-7, "{name}: erf max abs error {worst}");
        }
    }

    #[test]
    fn exp_matches_f64() {
        for (name, arch) in arches() {
            let mut xs: Vec<f32> = (-870..=880).map(|i| i as f32 / 10.0).collect();
            let want: Vec<f64> = xs.iter().map(|&x| f64::from(x).exp()).collect();
            let scalar: Vec<f32> = xs.iter().map(|&x| exp_s(x)).collect();
            exp_all(arch, &mut xs);
            for ((&g, &s), &w) in xs.iter().zip(&scalar).zip(&want) {
                for (how, got) in [("vector", g), ("scalar", s)] {
                    let rel = ((f64::from(got) - w) / w).abs();
                    assert!(rel < 1e-6, "{name} {how}: exp relative error {rel} (got {got}, want {w})");
                }
            }
        }
    }

    /// Plain triple loop: the reference for the tiled kernel.
    fn linear_naive(a: &[f32], m: usize, w: &[f32], b: &[f32], n: usize, k: usize) -> Vec<f32> {
        let mut c = vec![0f32; m * n];
        for i in 0..m {
            for j in 0..n {
                let mut s = f64::from(b[j]);
                for p in 0..k {
                    s += f64::from(a[i * k + p]) * f64::from(w[j * k + p]);
                }
                c[i * n + j] = s as f32;
            }
        }
        c
    }

    fn pseudo(seed: u64, len: usize) -> Vec<f32> {
        let mut x = seed;
        (0..len)
            .map(|_| {
                x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
                ((x >> 40) as f32 / (1u64 << 24) as f32) - 0.5
            })
            .collect()
    }

    #[test]
    fn linear_matches_naive_for_every_tile_remainder_and_block_edge() {
        for (name, arch) in arches() {
            // k spans one, several and a partial inner block; m every tile remainder and a
            // second row block.
            for (m, n, k, storage) in [
                (1, 48, 8, Storage::F32),
                (5, 96, 384, Storage::F32),
                (7, 48, 400, Storage::F32),
                (13, 192, 769, Storage::F32),
                (27, 144, 100, Storage::F32),
                (MC + 7, 48, 40, Storage::F32),
                (9, 96, 400, Storage::F16),
                (MC + 3, 48, 769, Storage::F16),
                // Widths that are not a multiple of the panel, or of the vector width.
                (11, 40, 50, Storage::F32),
                (3, 100, 33, Storage::F32),
                (9, 7, 20, Storage::F16),
                (17, 1, 5, Storage::F32),
            ] {
                let a = pseudo(m as u64, m * k);
                let w = pseudo(n as u64 + 7, n * k);
                let b = pseudo(k as u64 + 3, n);
                let packed = Linear::pack(arch, &w, &b, n, k, storage).unwrap();
                // Half storage computes with the half-rounded weights, on every machine.
                let w: Vec<f32> = match storage {
                    Storage::F32 => w,
                    Storage::F16 => w.iter().map(|&x| half::f16::from_f32(x).to_f32()).collect(),
                    Storage::Int8Sim => {
                        let mut w = w;
                        w.chunks_exact_mut(k).for_each(int8_round_trip);
                        w
                    }
                    Storage::Bf16Sim => w.iter().map(|&x| half::bf16::from_f32(x).to_f32()).collect(),
                    Storage::Int8GroupSim(_) => continue,
                };
                let mut c = vec![f32::NAN; m * n];
                linear(arch, &a, m, &packed, &mut c, false);
                let want = linear_naive(&a, m, &w, &b, n, k);
                for (i, (g, w)) in c.iter().zip(&want).enumerate() {
                    assert!((g - w).abs() <= 1e-4 * (1.0 + w.abs()), "{name} {storage:?} m{m} n{n} k{k} [{i}]: {g} vs {w}");
                }
                // GELU epilogue.
                linear(arch, &a, m, &packed, &mut c, true);
                for (g, w) in c.iter().zip(&want) {
                    let w = f64::from(*w);
                    let gelu = 0.5 * w * (1.0 + erf_f64(w / std::f64::consts::SQRT_2));
                    assert!((f64::from(*g) - gelu).abs() <= 1e-4, "{name} gelu: {g} vs {gelu}");
                }
            }
        }
    }

    /// Kernel throughput (not a pass/fail test: `cargo test --release -p memwarden-embed --lib
    /// -- --ignored --nocapture kernel_speed`).
    #[test]
    #[ignore = "timing, run by hand"]
    fn kernel_speed() {
        let arch = Arch::new();
        for (m, n, k, storage, gelu) in [
            (27, 1152, 384, Storage::F32, false),
            (27, 384, 384, Storage::F32, false),
            (27, 1536, 384, Storage::F32, false),
            (27, 384, 1536, Storage::F32, false),
            (512, 1536, 384, Storage::F32, false),
            (512, 384, 1536, Storage::F32, false),
            (27, 1152, 384, Storage::F16, false),
            (27, 384, 1536, Storage::F16, false),
            (512, 1536, 384, Storage::F16, false),
            (27, 1536, 384, Storage::F16, false),
            (27, 1536, 384, Storage::F16, true),
        ] {
            let a = pseudo(1, m * k);
            let w = Linear::pack(arch, &pseudo(2, n * k), &pseudo(3, n), n, k, storage).unwrap();
            let mut c = vec![0f32; m * n];
            // Best of many single calls: robust to other processes taking the core.
            let reps = (4_000_000_000 / (2 * m * n * k)).max(20);
            linear(arch, &a, m, &w, &mut c, gelu);
            let mut best = f64::INFINITY;
            let mut total = 0.0;
            for _ in 0..reps {
                let t = std::time::Instant::now();
                linear(arch, &a, m, &w, &mut c, gelu);
                let e = t.elapsed().as_secs_f64();
                best = best.min(e);
                total += e;
            }
            let flop = 2.0 * (m * n * k) as f64;
            println!(
                "{storage:?} m {m} n {n} k {k}{}: best {:.1} us, {:.1} GFLOP/s (mean {:.1} GFLOP/s)",
                if gelu { " + GELU" } else { "" },
                best * 1e6,
                flop / best / 1e9,
                flop / (total / reps as f64) / 1e9
            );
        }
    }

    /// The matmuls of a whole 6-layer, 384-wide forward pass with the real shapes and
    /// distinct weights (42 MB f32 / 21 MB f16: they stream from memory or L3 as in the model),
    /// run by hand as above. Best and median of 40 passes.
    #[test]
    #[ignore = "timing, run by hand"]
    fn model_matmul_speed() {
        let arch = Arch::new();
        let (h, i) = (384, 1536);
        for storage in [Storage::F32, Storage::F16] {
            let layers: Vec<[Linear; 4]> = (0..6)
                .map(|l| {
                    let mk = |n: usize, k: usize, seed: u64| Linear::pack(arch, &pseudo(seed, n * k), &pseudo(seed + 1, n), n, k, storage).unwrap();
                    [mk(3 * h, h, l * 8), mk(h, h, l * 8 + 2), mk(i, h, l * 8 + 4), mk(h, i, l * 8 + 6)]
                })
                .collect();
            for m in [8, 20, 27, 64] {
                let x = pseudo(9, m * i);
                let mut out = vec![0f32; m * 3 * h];
                let mut big = vec![0f32; m * i];
                let mut times: Vec<f64> = (0..40)
                    .map(|_| {
                        let t = std::time::Instant::now();
                        for [qkv, o, f1, f2] in &layers {
                            linear(arch, &x[..m * h], m, qkv, &mut out, false);
                            linear(arch, &x[..m * h], m, o, &mut out[..m * h], false);
                            linear(arch, &x[..m * h], m, f1, &mut big, true);
                            linear(arch, &x[..m * i], m, f2, &mut out[..m * h], false);
                        }
                        t.elapsed().as_secs_f64() * 1e3
                    })
                    .collect();
                times.sort_by(f64::total_cmp);
                let gflop = 2.0 * (m * 6 * (3 * h * h + h * h + 2 * h * i)) as f64 / 1e9;
                println!(
                    "{storage:?} m {m}: best {:.2} ms ({:.0} GFLOP/s), median {:.2} ms",
                    times[0],
                    gflop / times[0] * 1e3,
                    times[20]
                );
            }
        }
    }

    /// Attention and layer-norm time for one layer's worth of work (run by hand, as above).
    #[test]
    #[ignore = "timing, run by hand"]
    fn attention_speed() {
        let arch = Arch::new();
        let (heads, dh) = (12, 32);
        for t in [8, 27, 64, 256] {
            let hidden = heads * dh;
            let qkv = pseudo(t as u64, t * 3 * hidden);
            let mut ctx = vec![0f32; t * hidden];
            let mut best = f64::INFINITY;
            for _ in 0..200 {
                let start = std::time::Instant::now();
                attention(arch, &qkv, t, heads, dh, &mut ctx);
                best = best.min(start.elapsed().as_secs_f64());
            }
            let mut x = pseudo(5, t * hidden);
            let res = pseudo(6, t * hidden);
            let (g, b) = (pseudo(7, hidden), pseudo(8, hidden));
            let mut best_ln = f64::INFINITY;
            for _ in 0..200 {
                let start = std::time::Instant::now();
                layer_norm(arch, &mut x, Some(&res), &g, &b, 1e-12);
                best_ln = best_ln.min(start.elapsed().as_secs_f64());
            }
            println!("t {t}: attention best {:.1} us, layer norm + residual best {:.1} us", best * 1e6, best_ln * 1e6);
        }
    }

    #[test]
    fn pack_rejects_mismatched_or_empty_shapes() {
        let arch = Arch::new();
        assert!(Linear::pack(arch, &[0.0; 3], &[0.0; 48], 48, 4, Storage::F32).is_err());
        assert!(Linear::pack(arch, &[0.0; 8], &[0.0; 3], 2, 4, Storage::F32).is_err());
        assert!(Linear::pack(arch, &[], &[], 0, 4, Storage::F32).is_err());
    }

    #[test]
    fn attention_matches_naive() {
        for (name, arch) in arches() {
            for (heads, dh, t) in [(3, 32, 1), (3, 32, 5), (3, 32, 17), (3, 32, 40), (2, 64, 9), (2, 12, 7), (1, 16, 30)] {
                let hidden = heads * dh;
                let qkv = pseudo(t as u64, t * 3 * hidden).iter().map(|x| x * 4.0).collect::<Vec<_>>();
                let mut ctx = vec![f32::NAN; t * hidden];
                attention(arch, &qkv, t, heads, dh, &mut ctx);
                let scale = 1.0 / (dh as f64).sqrt();
                for h in 0..heads {
                    for i in 0..t {
                        let q = |d: usize| f64::from(qkv[i * 3 * hidden + h * dh + d]);
                        let s: Vec<f64> = (0..t)
                            .map(|j| (0..dh).map(|d| q(d) * f64::from(qkv[j * 3 * hidden + hidden + h * dh + d])).sum::<f64>() * scale)
                            .collect();
                        let max = s.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                        let e: Vec<f64> = s.iter().map(|x| (x - max).exp()).collect();
                        let z: f64 = e.iter().sum();
                        for d in 0..dh {
                            let want: f64 = (0..t).map(|j| e[j] / z * f64::from(qkv[j * 3 * hidden + 2 * hidden + h * dh + d])).sum();
                            let got = f64::from(ctx[i * hidden + h * dh + d]);
                            assert!((got - want).abs() < 1e-5, "{name} t{t} h{h} i{i} d{d}: {got} vs {want}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn layer_norm_matches_naive() {
        for (name, arch) in arches() {
            let width = 40;
            let x0 = pseudo(1, 3 * width);
            let res = pseudo(2, 3 * width);
            let gamma = pseudo(3, width);
            let beta = pseudo(4, width);
            let mut x = x0.clone();
            layer_norm(arch, &mut x, Some(&res), &gamma, &beta, 1e-12);
            for row in 0..3 {
                let v: Vec<f64> = (0..width).map(|i| f64::from(x0[row * width + i]) + f64::from(res[row * width + i])).collect();
                let mean = v.iter().sum::<f64>() / width as f64;
                let var = v.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / width as f64;
                for i in 0..width {
                    let want = (v[i] - mean) / (var + 1e-12).sqrt() * f64::from(gamma[i]) + f64::from(beta[i]);
                    let got = f64::from(x[row * width + i]);
                    assert!((got - want).abs() < 1e-5, "{name} row {row} [{i}]: {got} vs {want}");
                }
            }
        }
    }
}
