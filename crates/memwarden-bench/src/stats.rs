//! Statistics shared by the benchmark suites: a small seeded PRNG, Wilson score intervals,
//! two-sided permutation tests, a percentile bootstrap and nearest-rank percentiles.
//!
//! Everything is deterministic given its seed, so a report can be regenerated bit for bit.

/// The normal quantile for a two-sided 95% interval.
pub const Z95: f64 = 1.959_963_984_540_054;

/// Resamples used for the permutation tests in the reports.
pub const PERMUTATION_RESAMPLES: usize = 20_000;

/// A small, fast, seeded PRNG (xoshiro256** seeded through SplitMix64). Not cryptographic.
#[derive(Debug, Clone)]
pub struct Rng {
    s: [u64; 4],
}

/// SplitMix64 step: a good 64-bit mixer, also used to derive independent seeds.
pub fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Derive a seed for a sub-stream (`stream`) from a parent seed.
pub fn derive_seed(seed: u64, stream: u64) -> u64 {
    splitmix64(splitmix64(seed) ^ stream.wrapping_mul(0xD6E8_FEB8_6659_FD93))
}

impl Rng {
    /// A generator for `seed`.
    pub fn new(seed: u64) -> Self {
        let mut x = seed;
        let mut s = [0u64; 4];
        for slot in &mut s {
            x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
            *slot = splitmix64(x);
        }
        if s == [0; 4] {
            s[0] = 1;
        }
        Self { s }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let result = self.s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        result
    }

    /// Uniform in `[0, 1)` with 53 bits of precision.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in `0..n` (unbiased; `n == 0` gives 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            return 0;
        }
        let zone = u64::MAX - (u64::MAX % n);
        loop {
            let x = self.next_u64();
            if x < zone {
                return x % n;
            }
        }
    }

    /// Fisher–Yates shuffle.
    pub fn shuffle<T>(&mut self, xs: &mut [T]) {
        for i in (1..xs.len()).rev() {
            let j = self.below(i as u64 + 1) as usize;
            xs.swap(i, j);
        }
    }
}

/// A two-sided confidence interval, in percent.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Interval {
    /// Lower bound (%).
    pub lo: f64,
    /// Upper bound (%).
    pub hi: f64,
}

/// Wilson score 95% interval for `successes` out of `n`, in percent. `n == 0` gives `[0, 100]`.
pub fn wilson(successes: u64, n: u64) -> Interval {
    wilson_z(successes, n, Z95)
}

/// Wilson score interval with quantile `z`, in percent.
pub fn wilson_z(successes: u64, n: u64, z: f64) -> Interval {
    if n == 0 {
        return Interval { lo: 0.0, hi: 100.0 };
    }
    let n_f = n as f64;
    let p = successes.min(n) as f64 / n_f;
    let z2 = z * z;
    let denom = 1.0 + z2 / n_f;
    let center = (p + z2 / (2.0 * n_f)) / denom;
    let half = z * (p * (1.0 - p) / n_f + z2 / (4.0 * n_f * n_f)).sqrt() / denom;
    // At the edges the bounds are exactly 0 and 1 (avoid rounding residue).
    let lo = if successes == 0 { 0.0 } else { (center - half).max(0.0) };
    let hi = if successes >= n { 1.0 } else { (center + half).min(1.0) };
    Interval { lo: lo * 100.0, hi: hi * 100.0 }
}

/// A proportion in percent (`0` when `n == 0`).
pub fn pct(successes: u64, n: u64) -> f64 {
    if n == 0 { 0.0 } else { successes as f64 * 100.0 / n as f64 }
}

/// Two-sided permutation test for a difference of two proportions (`s1/n1` vs `s2/n2`) with
/// `resamples` random relabellings. For binary outcomes a random relabelling puts a
/// hypergeometric number of the pooled successes in the first group, so each resample draws that
/// count from the exact hypergeometric distribution (identical in law to shuffling the labels,
/// and fast for large groups). Returns `(count + 1) / (resamples + 1)`, where `count` is the number
/// of resamples whose absolute difference is at least the observed one.
pub fn permutation_test_binary(s1: u64, n1: u64, s2: u64, n2: u64, resamples: usize, seed: u64) -> f64 {
    if n1 == 0 || n2 == 0 {
        return 1.0;
    }
    let (s1, s2) = (s1.min(n1), s2.min(n2));
    let total = n1 + n2;
    let k = s1 + s2;
    let observed = (s1 as f64 / n1 as f64 - s2 as f64 / n2 as f64).abs();
    // Support of X = successes in group 1.
    let lo = k.saturating_sub(n2);
    let hi = k.min(n1);
    // pmf by the ratio recurrence p(x+1)/p(x) = (k-x)(n1-x) / ((x+1)(total-k-n1+x+1)), in logs.
    let mut logs: Vec<f64> = Vec::with_capacity((hi - lo + 1) as usize);
    let mut acc = 0.0f64;
    logs.push(0.0);
    for x in lo..hi {
        let num = (k - x) as f64 * (n1 - x) as f64;
        let den = (x + 1) as f64 * (total - k - n1 + x + 1) as f64;
        acc += num.ln() - den.ln();
        logs.push(acc);
    }
    let max = logs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let mut cdf: Vec<f64> = Vec::with_capacity(logs.len());
    let mut run = 0.0;
    for l in &logs {
        run += (l - max).exp();
        cdf.push(run);
    }
    let norm = run;
    let mut rng = Rng::new(seed);
    let mut count = 0usize;
    for _ in 0..resamples {
        let u = rng.next_f64() * norm;
        let idx = cdf.partition_point(|c| *c <= u).min(cdf.len() - 1);
        let x = lo + idx as u64;
        let d = (x as f64 / n1 as f64 - (k - x) as f64 / n2 as f64).abs();
        if d >= observed - 1e-12 {
            count += 1;
        }
    }
    (count as f64 + 1.0) / (resamples as f64 + 1.0)
}

/// Two-sided permutation test for a difference of means by shuffling the pooled observations
/// `resamples` times. Returns `(count + 1) / (resamples + 1)`.
pub fn permutation_test(a: &[f64], b: &[f64], resamples: usize, seed: u64) -> f64 {
    if a.is_empty() || b.is_empty() {
        return 1.0;
    }
    let mean = |xs: &[f64]| xs.iter().sum::<f64>() / xs.len() as f64;
    let observed = (mean(a) - mean(b)).abs();
    let mut pooled: Vec<f64> = a.iter().chain(b).copied().collect();
    let mut rng = Rng::new(seed);
    let mut count = 0usize;
    for _ in 0..resamples {
        rng.shuffle(&mut pooled);
        let (x, y) = pooled.split_at(a.len());
        if (mean(x) - mean(y)).abs() >= observed - 1e-12 {
            count += 1;
        }
    }
    (count as f64 + 1.0) / (resamples as f64 + 1.0)
}

/// Percentile bootstrap interval of `stat` over `data` at `level` (e.g. 0.95), with `resamples`
/// resamples. Returns `(lo, hi)` in the statistic's own unit; empty data gives `(NaN, NaN)`.
pub fn bootstrap_ci(data: &[f64], stat: &dyn Fn(&[f64]) -> f64, resamples: usize, level: f64, seed: u64) -> (f64, f64) {
    if data.is_empty() || resamples == 0 {
        return (f64::NAN, f64::NAN);
    }
    let mut rng = Rng::new(seed);
    let mut buf = vec![0.0; data.len()];
    let mut stats: Vec<f64> = Vec::with_capacity(resamples);
    for _ in 0..resamples {
        for slot in &mut buf {
            *slot = data[rng.below(data.len() as u64) as usize];
        }
        stats.push(stat(&buf));
    }
    stats.sort_by(f64::total_cmp);
    let alpha = (1.0 - level.clamp(0.0, 1.0)) / 2.0;
    let at = |q: f64| stats[((q * (stats.len() - 1) as f64).round() as usize).min(stats.len() - 1)];
    (at(alpha), at(1.0 - alpha))
}

/// Nearest-rank percentile `q` (0–100) of `values` (sorted internally); 0 when empty.
pub fn percentile(values: &[u64], q: f64) -> u64 {
    if values.is_empty() {
        return 0;
    }
    let mut v = values.to_vec();
    v.sort_unstable();
    let rank = ((q.clamp(0.0, 100.0) / 100.0) * v.len() as f64).ceil() as usize;
    v[rank.clamp(1, v.len()) - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    #[test]
    fn wilson_known_values() {
        let i = wilson(0, 4032);
        assert_eq!(i.lo, 0.0);
        assert!(close(i.hi, 0.095, 0.001), "{i:?}");
        let i = wilson(50, 100);
        assert!(close(i.lo, 40.38, 0.01) && close(i.hi, 59.62, 0.01), "{i:?}");
        let i = wilson(0, 192);
        assert!(close(i.hi, 1.96, 0.01), "{i:?}"); // the paper's [0, 2.0]%
        let i = wilson(48, 96); // Mem0 study: 50.0% [40.2, 59.8]
        assert!(close(i.lo, 40.2, 0.05) && close(i.hi, 59.8, 0.05), "{i:?}");
        let i = wilson(10, 10);
        assert!(close(i.lo, 72.25, 0.01) && i.hi == 100.0, "{i:?}");
        assert_eq!(wilson(0, 0), Interval { lo: 0.0, hi: 100.0 });
    }

    #[test]
    fn permutation_binary_extremes_and_nulls() {
        // 0/192 vs 160/192: nothing as extreme under the null, p = 1/(R+1).
        let p = permutation_test_binary(0, 192, 160, 192, PERMUTATION_RESAMPLES, 1);
        assert!(close(p, 1.0 / 20_001.0, 1e-12), "{p}");
        // Identical proportions: every resample is at least as extreme.
        let p = permutation_test_binary(30, 100, 30, 100, 2_000, 2);
        assert_eq!(p, 1.0);
        assert_eq!(permutation_test_binary(0, 0, 3, 10, 100, 3), 1.0);
    }

    #[test]
    fn permutation_binary_matches_label_shuffling() {
        // 30/100 vs 45/100: Fisher's exact two-sided p is about 0.04.
        let fast = permutation_test_binary(30, 100, 45, 100, PERMUTATION_RESAMPLES, 11);
        let a: Vec<f64> = (0..100).map(|i| if i < 30 { 1.0 } else { 0.0 }).collect();
        let b: Vec<f64> = (0..100).map(|i| if i < 45 { 1.0 } else { 0.0 }).collect();
        let slow = permutation_test(&a, &b, PERMUTATION_RESAMPLES, 12);
        assert!(close(fast, slow, 0.01), "{fast} vs {slow}");
        assert!(fast > 0.02 && fast < 0.07, "{fast}");
        // Deterministic by seed.
        assert_eq!(fast, permutation_test_binary(30, 100, 45, 100, PERMUTATION_RESAMPLES, 11));
    }

    #[test]
    fn bootstrap_and_percentiles() {
        let data: Vec<f64> = (0..200).map(|i| (i % 10) as f64).collect();
        let mean = |xs: &[f64]| xs.iter().sum::<f64>() / xs.len() as f64;
        let (lo, hi) = bootstrap_ci(&data, &mean, 2_000, 0.95, 5);
        assert!(lo < 4.5 && hi > 4.5 && hi - lo < 1.5, "{lo} {hi}");
        assert_eq!(percentile(&[5, 1, 4, 2, 3], 50.0), 3);
        assert_eq!(percentile(&[5, 1, 4, 2, 3], 99.0), 5);
        assert_eq!(percentile(&(1..=100).collect::<Vec<u64>>(), 99.0), 99);
        assert_eq!(percentile(&[], 50.0), 0);
    }

    #[test]
    fn rng_is_deterministic_and_roughly_uniform() {
        let mut a = Rng::new(7);
        let mut b = Rng::new(7);
        assert_eq!((0..10).map(|_| a.next_u64()).collect::<Vec<_>>(), (0..10).map(|_| b.next_u64()).collect::<Vec<_>>());
        let mut r = Rng::new(9);
        let mut counts = [0u32; 4];
        for _ in 0..40_000 {
            counts[r.below(4) as usize] += 1;
        }
        assert!(counts.iter().all(|c| (9_500..10_500).contains(c)), "{counts:?}");
        assert_ne!(derive_seed(7, 1), derive_seed(7, 2));
    }
}
