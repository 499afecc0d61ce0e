//! Retrieval metrics over one question's ranked result, and their aggregates with 95% intervals
//! (Wilson for proportions, a percentile bootstrap for MRR and nDCG).
//!
//! For a question with evidence turns `E` and a ranked result `r_1..r_n` (`n <= k`):
//! - recall@k any-of: some evidence turn is in the top k; all-of: every one is;
//! - MRR: `1 / rank` of the first evidence turn in the result (0 when none);
//! - nDCG@10: binary gains, `DCG = sum 1/log2(rank+1)` over evidence turns in the top 10, divided
//!   by the ideal `sum_{i=1..min(|E|,10)} 1/log2(i+1)`.
//!
//! Turn-level recall (used for the per-speaker-role split) counts evidence turns, not questions:
//! the share of evidence turns written by that role that are in the top k of their question.

use serde::Serialize;

use crate::stats::{Interval, bootstrap_ci, pct, wilson};

/// The cut-offs reported (k = 1, 5, 10).
pub const CUTOFFS: [usize; 3] = [1, 5, 10];
/// The result size searched (and the nDCG / MRR depth).
pub const K: usize = 10;
/// Bootstrap resamples for MRR and nDCG intervals.
pub const BOOTSTRAP_RESAMPLES: usize = 2000;

/// One question's outcome: the 1-based rank of each evidence turn in the result (None: not in
/// it), in evidence order.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Ranked {
    /// Rank of each evidence turn.
    pub ranks: Vec<Option<usize>>,
}

impl Ranked {
    /// Some evidence turn within the top `k`.
    pub fn any_at(&self, k: usize) -> bool {
        self.ranks.iter().any(|r| r.is_some_and(|r| r <= k))
    }
    /// Every evidence turn within the top `k` (false with no evidence).
    pub fn all_at(&self, k: usize) -> bool {
        !self.ranks.is_empty() && self.ranks.iter().all(|r| r.is_some_and(|r| r <= k))
    }
    /// Reciprocal rank of the first evidence turn within the top [`K`].
    pub fn reciprocal_rank(&self) -> f64 {
        self.ranks.iter().flatten().filter(|r| **r <= K).min().map_or(0.0, |r| 1.0 / *r as f64)
    }
    /// nDCG@[`K`] with binary gains.
    pub fn ndcg(&self) -> f64 {
        let dcg: f64 = self.ranks.iter().flatten().filter(|r| **r <= K).map(|r| 1.0 / (*r as f64 + 1.0).log2()).sum();
        let ideal: f64 = (1..=self.ranks.len().min(K)).map(|i| 1.0 / (i as f64 + 1.0).log2()).sum();
        if ideal == 0.0 { 0.0 } else { dcg / ideal }
    }
}

/// A proportion with its Wilson 95% interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Proportion {
    /// Successes.
    pub hits: u64,
    /// Trials.
    pub n: u64,
    /// Percent.
    pub pct: f64,
    /// Wilson 95% interval (%).
    pub ci95: Interval,
}

impl Proportion {
    /// `hits` of `n`.
    pub fn of(hits: u64, n: u64) -> Self {
        debug_assert!(hits <= n);
        Self { hits, n, pct: pct(hits, n), ci95: wilson(hits, n) }
    }
    /// Count the trues.
    pub fn count(xs: impl IntoIterator<Item = bool>) -> Self {
        let (mut h, mut n) = (0, 0);
        for x in xs {
            n += 1;
            h += u64::from(x);
        }
        Self::of(h, n)
    }
}

/// A mean (of per-question scores in 0..1, reported ×100) with a percentile-bootstrap interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct MeanScore {
    /// Questions.
    pub n: u64,
    /// Mean ×100.
    pub value: f64,
    /// Bootstrap 95% interval ×100.
    pub ci95: Interval,
}

fn mean(xs: &[f64]) -> f64 {
    if xs.is_empty() { 0.0 } else { xs.iter().sum::<f64>() / xs.len() as f64 }
}

impl MeanScore {
    /// The mean of `xs` with a bootstrap interval (seeded).
    pub fn of(xs: &[f64], seed: u64) -> Self {
        if xs.is_empty() {
            return Self { n: 0, value: 0.0, ci95: Interval { lo: 0.0, hi: 100.0 } };
        }
        let (lo, hi) = bootstrap_ci(xs, &mean, BOOTSTRAP_RESAMPLES, 0.95, seed);
        Self { n: xs.len() as u64, value: mean(xs) * 100.0, ci95: Interval { lo: lo * 100.0, hi: hi * 100.0 } }
    }
}

/// Evidence-recall metrics over a set of questions.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RetrievalMetrics {
    /// Questions.
    pub questions: u64,
    /// Any-of recall at 1, 5, 10.
    pub recall_any: [Proportion; 3],
    /// All-of recall at 1, 5, 10.
    pub recall_all: [Proportion; 3],
    /// Any-of recall at every k = 1..=10 (%), for the figure.
    pub recall_any_curve: Vec<f64>,
    /// Mean reciprocal rank (×100).
    pub mrr: MeanScore,
    /// nDCG@10 (×100).
    pub ndcg10: MeanScore,
}

impl RetrievalMetrics {
    /// Aggregate `outcomes` (bootstrap seeded by `seed`).
    pub fn of(outcomes: &[&Ranked], seed: u64) -> Self {
        let at = |k: usize, all: bool| Proportion::count(outcomes.iter().map(|o| if all { o.all_at(k) } else { o.any_at(k) }));
        let rr: Vec<f64> = outcomes.iter().map(|o| o.reciprocal_rank()).collect();
        let nd: Vec<f64> = outcomes.iter().map(|o| o.ndcg()).collect();
        Self {
            questions: outcomes.len() as u64,
            recall_any: CUTOFFS.map(|k| at(k, false)),
            recall_all: CUTOFFS.map(|k| at(k, true)),
            recall_any_curve: (1..=K).map(|k| at(k, false).pct).collect(),
            mrr: MeanScore::of(&rr, seed),
            ndcg10: MeanScore::of(&nd, seed ^ 0x9E37),
        }
    }
}
