//! Latency summaries: nearest-rank percentiles over per-request latencies in microseconds.

use serde::{Deserialize, Serialize};

/// Summary of a set of latencies (successful requests only), in microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct LatencySummary {
    /// Requests summarised.
    pub count: u64,
    /// Arithmetic mean.
    pub latency_us_mean: f64,
    /// Fastest request.
    pub latency_us_min: u64,
    /// Median (nearest rank).
    pub latency_us_p50: u64,
    /// 90th percentile (nearest rank).
    pub latency_us_p90: u64,
    /// 95th percentile (nearest rank).
    pub latency_us_p95: u64,
    /// 99th percentile (nearest rank).
    pub latency_us_p99: u64,
    /// Slowest request.
    pub latency_us_max: u64,
}

/// Nearest-rank percentile `q` (0–100) of an ascending slice: the smallest value with at least
/// `q`% of the values at or below it. 0 for an empty slice.
pub fn nearest_rank(sorted: &[u64], q: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let q = if q.is_nan() { 0.0 } else { q.clamp(0.0, 100.0) };
    let rank = ((q / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted.get(rank.clamp(1, sorted.len()) - 1).copied().unwrap_or(0)
}

impl LatencySummary {
    /// Summarise `samples` (any order; sorted in place). All zero when empty.
    pub fn from_samples(samples: &mut [u64]) -> Self {
        if samples.is_empty() {
            return Self::default();
        }
        samples.sort_unstable();
        let sum: u128 = samples.iter().map(|&x| u128::from(x)).sum();
        Self {
            count: samples.len() as u64,
            latency_us_mean: sum as f64 / samples.len() as f64,
            latency_us_min: samples.first().copied().unwrap_or(0),
            latency_us_p50: nearest_rank(samples, 50.0),
            latency_us_p90: nearest_rank(samples, 90.0),
            latency_us_p95: nearest_rank(samples, 95.0),
            latency_us_p99: nearest_rank(samples, 99.0),
            latency_us_max: samples.last().copied().unwrap_or(0),
        }
    }
}

/// Microseconds as milliseconds with two decimals (`1234` -> `"1.23"`).
pub fn ms(us: u64) -> String {
    format!("{:.2}", us as f64 / 1000.0)
}
