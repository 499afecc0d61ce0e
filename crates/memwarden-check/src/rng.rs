//! A small deterministic generator (xorshift64*), enough to pick steps.

/// xorshift64*; the state must not be 0 (callers seed it odd).
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    /// A generator from any seed (spread, and made odd so the state is never 0).
    pub(crate) fn new(seed: u64) -> Self {
        Self(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    /// A number in `0..n` (0 for `n` 0).
    pub(crate) fn below(&mut self, n: usize) -> usize {
        debug_assert!(self.0 != 0, "xorshift state 0 is a fixed point");
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let x = self.0.wrapping_mul(0x2545_F491_4F6C_DD1D);
        usize::try_from(x % (n.max(1) as u64)).unwrap_or(0)
    }
}
