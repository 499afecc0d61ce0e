//! Path trust `rho(m, a) = clip01(S · I · F · P · V · A)`.

use crate::config::LineageConfig;
use crate::model::AncestrySummary;
use crate::trust::Trust;
use memwarden_core::ids::PrincipalId;
use serde::{Deserialize, Serialize};

/// The six factors and their product.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TrustBreakdown {
    /// S: the weakest source on the path.
    pub s: Trust,
    /// I: intermediate integrity (poisoned or revoked items on the path).
    pub i: Trust,
    /// F: decay along the weakest transformation chain.
    pub f: Trust,
    /// P: the reader against the stored policy (admitted by every item on the path or not).
    pub p: Trust,
    /// V: verification.
    pub v: Trust,
    /// A: the writer's reputation.
    pub a: Trust,
    /// `rho = clip01(S · I · F · P · V · A)`.
    pub rho: Trust,
}

/// Compute `rho(m, reader)` from `m`'s summary and its writer's reputation. O(1) in ancestry depth
/// (the ceiling lookup is O(log readers)).
pub fn path_trust(
    config: &LineageConfig,
    summary: &AncestrySummary,
    writer_reputation: Trust,
    reader: &PrincipalId,
) -> TrustBreakdown {
    let s = summary.min_source_trust;
    let mut i = Trust::ONE;
    // The containment ablation drops the affected-state factor.
    if config.containment && summary.poisoned {
        i = i.times(config.poisoned_factor);
    }
    if config.containment && summary.revoked {
        i = i.times(config.revoked_factor);
    }
    let f = summary.flow;
    let p = if summary.admits(reader) { Trust::ONE } else { config.foreign_private_factor };
    let v = if summary.verified { Trust::ONE } else { config.unverified_factor };
    let a = writer_reputation;
    let raw = s.get() * i.get() * f.get() * p.get() * v.get() * a.get();
    let rho = Trust::clip01(raw);
    debug_assert!((0.0..=1.0).contains(&rho.get()), "rho within [0, 1]");
    debug_assert!(rho <= s && rho <= f && rho <= i, "rho never exceeds a factor");
    TrustBreakdown { s, i, f, p, v, a, rho }
}
