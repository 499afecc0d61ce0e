//! [`LineageConfig`]: every constant of the lineage layer, in one place.
//!
//! The paper's appendix with its path-trust constants is missing from our copy, so the values below
//! are ours. They were chosen so that the paper's three thresholds (0.30 answer, 0.60 low/medium,
//! 0.85 high) separate the evidence shapes the benchmark distinguishes; the table in the crate
//! documentation (and the `calibration` golden test) shows the resulting `rho` for each shape.

use crate::trust::Trust;
use memwarden_core::action::ACTION_CONTEXT_MAX;
use memwarden_core::item::{CONTENT_BYTES_MAX, PARENTS_MAX, READERS_MAX};
use serde::{Deserialize, Serialize};

/// Why a configuration was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConfigError {
    /// A factor or threshold breaks an ordering the gate relies on.
    #[error("configuration: {0}")]
    Inconsistent(&'static str),
    /// A limit is zero or above a hard cap.
    #[error("configuration: limit {name} = {value} is outside 1..={max}")]
    LimitOutOfRange {
        /// The limit's name.
        name: &'static str,
        /// The value given.
        value: usize,
        /// The largest accepted value.
        max: usize,
    },
}

/// All constants of the lineage layer. `Default` is the documented calibration; `validate()`
/// refuses a configuration that would make the gate or the bounds meaningless.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LineageConfig {
    // ---- S: source trust by integrity label -------------------------------------------------
    /// Base trust of an item labelled `trusted` (a user, an allow-listed tool). 1.0: the layer has
    /// no reason to doubt what the user said; verification and hops are what lower it.
    pub trust_trusted: Trust,
    /// Base trust of an item labelled `agent` (an agent's own output). 0.90: an agent's text is
    /// usually a faithful restatement, but it can hallucinate; one unverified agent hop must fall
    /// below the high-risk threshold (0.85) so a high-risk action on agent notes asks the user.
    pub trust_agent: Trust,
    /// Base trust of an item labelled `untrusted` (web pages, mail, other people's messages).
    /// 0.40: an untrusted page read directly still clears the answer threshold (0.30; C2 says
    /// degraded evidence is demoted, not discarded), but three summarisation hops push it under.
    pub trust_untrusted: Trust,

    // ---- F: per-hop decay along the transformation chain ------------------------------------
    /// Decay of an `observed_from` hop (a verbatim capture of a source or tool output). 1.0: the
    /// capture adds no transformation; the source's own trust already counts in S.
    pub hop_observed: Trust,
    /// Decay of a `derived_from` hop (an agent's note, a message built on inputs). 0.97: a small
    /// loss per rewrite, so long chains of rewriting lose trust geometrically.
    pub hop_derived: Trust,
    /// Decay of a `summarized_from` hop. 0.92: summaries drop qualifiers and context and are the
    /// laundering step in the paper's running example, so they decay more than a rewrite.
    pub hop_summarized: Trust,

    // ---- V: verification --------------------------------------------------------------------
    /// Factor for a record that is neither verified itself nor built only from verified inputs.
    /// 0.90: unverified evidence is the normal case and must not be crippled, but a verification
    /// by a user or a tool must be able to lift a one-hop agent note over the high threshold.
    pub unverified_factor: Trust,

    // ---- I: intermediate integrity ----------------------------------------------------------
    /// Factor when the path contains an item flagged poisoned. 0.05: still eligible (trust grades,
    /// it does not filter), but it can never clear any threshold; the gate blocks it anyway.
    pub poisoned_factor: Trust,
    /// Factor when the path contains a revoked item. 0.0: revoked content never carries weight.
    /// (Such records are also unreadable: see `can_read`.)
    pub revoked_factor: Trust,

    // ---- P: the reader against the stored policy --------------------------------------------
    /// Factor when the reader is not admitted by every item on the path (possible only for
    /// contextual support the agent was not permitted to read; the hard filter removes such
    /// records from retrieval). 0.50.
    pub foreign_private_factor: Trust,

    // ---- A: the writer's reputation ---------------------------------------------------------
    /// Reputation of a principal nobody has rated. 1.0: reputation only lowers trust (the label
    /// already says what class of writer it is); feedback lowers it per principal.
    pub reputation_default: Trust,

    // ---- Gate thresholds (paper) ------------------------------------------------------------
    /// theta for an answer (paper: 0.30).
    pub theta_answer: Trust,
    /// theta for a low- or medium-risk non-answer action (paper: 0.60).
    pub theta_low_medium: Trust,
    /// theta for a high-risk non-answer action (paper: 0.85).
    pub theta_high: Trust,

    // ---- Retrieval --------------------------------------------------------------------------
    /// Records returned by `rank` when the caller does not say (paper: 5).
    pub k_default: usize,
    /// Largest `k` a caller may ask for, in records.
    pub k_max: usize,
    /// Most candidates one `rank` call accepts, in records.
    pub rank_candidates_max: usize,

    // ---- Bounds -----------------------------------------------------------------------------
    /// Most parents one write may reference, in records (at most core's `PARENTS_MAX`).
    pub parents_max: usize,
    /// Most principals an explicit reader set may name (at most core's `READERS_MAX`).
    pub readers_max: usize,
    /// Longest accepted record text, in bytes (at most core's `CONTENT_BYTES_MAX`).
    pub text_bytes_max: usize,
    /// Most affected-ancestor ids kept per ancestry summary, in ids; the rest is counted.
    pub affected_ids_max: usize,
    /// Most records one propagation step (revocation, poison flag, promotion, verification)
    /// recomputes before returning, in records; the rest stays queued for the next step.
    pub propagation_step_records_max: usize,
    /// Most records one erasure may visit (the erased item and its descendants), in records.
    pub erasure_records_max: usize,
    /// Erasure takes every record declared derived from an erased one, even one with another
    /// live source (its text is a copy of what was erased). Off (the paper's rule), such a
    /// record survives and is listed as a survivor. The product ([`LineageConfig::product`])
    /// turns it on.
    pub erase_declared_descendants: bool,
    /// Most supporting records (retrieved plus context) one gate decision evaluates, in records.
    pub gate_supports_max: usize,
    /// Longest tool name an action may carry, in bytes.
    pub tool_name_bytes_max: usize,

    // ---- Ablation switches (all on by default; the lineage benchmark turns one off at a time) --
    /// The hard permission filter (C2). Off: `rank` does not remove records the reader may not
    /// read, reads of them are recorded, and a write may derive from a parent its writer may not
    /// read. The gate still sees every cause (it "cannot undo an unauthorized read"). `can_read`
    /// itself is unchanged.
    pub permission_filter: bool,
    /// Path-trust propagation and trust-aware reranking. Off: `rho` is computed from the record's
    /// own facts only (no ancestry: S is its own base trust, F = 1, V its own verification) and
    /// `rank` orders eligible records by semantic score alone. Affected-state (causes) still
    /// propagates.
    pub trust_propagation: bool,
    /// Containment: the gate's affected-path rules (rules 1 and 3) and the poisoned/revoked factor
    /// I of path trust. Off: the gate keeps rules 2 and 4 only, and poisoned or revoked ancestry no
    /// longer lowers `rho`. The permission filter (which refuses revoked ancestry) is unchanged.
    pub containment: bool,
    /// The action-time gate. Off: every decision is `Allow` (rule `GateDisabled`).
    pub action_gate: bool,
}

impl Default for LineageConfig {
    fn default() -> Self {
        Self {
            trust_trusted: Trust::lit(1.0),
            trust_agent: Trust::lit(0.90),
            trust_untrusted: Trust::lit(0.40),
            hop_observed: Trust::lit(1.0),
            hop_derived: Trust::lit(0.97),
            hop_summarized: Trust::lit(0.92),
            unverified_factor: Trust::lit(0.90),
            poisoned_factor: Trust::lit(0.05),
            revoked_factor: Trust::lit(0.0),
            foreign_private_factor: Trust::lit(0.50),
            reputation_default: Trust::lit(1.0),
            theta_answer: Trust::lit(0.30),
            theta_low_medium: Trust::lit(0.60),
            theta_high: Trust::lit(0.85),
            k_default: 5,
            k_max: 100,
            rank_candidates_max: 10_000,
            parents_max: PARENTS_MAX,
            readers_max: READERS_MAX,
            text_bytes_max: CONTENT_BYTES_MAX,
            affected_ids_max: 16,
            propagation_step_records_max: 1024,
            erasure_records_max: 100_000,
            erase_declared_descendants: false,
            gate_supports_max: ACTION_CONTEXT_MAX,
            tool_name_bytes_max: 128,
            permission_filter: true,
            trust_propagation: true,
            containment: true,
            action_gate: true,
        }
    }
}

/// Hard caps on the limits (a configuration above them is refused).
const RANK_CANDIDATES_CAP: usize = 1_000_000;
const AFFECTED_IDS_CAP: usize = 1024;
const STEP_CAP: usize = 1_000_000;
const ERASURE_CAP: usize = 10_000_000;
const TOOL_NAME_CAP: usize = 1024;

impl LineageConfig {
    /// The paper's settings with the product's erasure rule: an erasure takes every record
    /// declared derived from what it erases ([`LineageConfig::erase_declared_descendants`]).
    pub fn product() -> Self {
        Self { erase_declared_descendants: true, ..Self::default() }
    }
}

impl LineageConfig {
    /// Check the orderings the rules rely on and that every limit is in range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(self.trust_untrusted <= self.trust_agent && self.trust_agent <= self.trust_trusted) {
            return Err(ConfigError::Inconsistent("source trust must satisfy untrusted <= agent <= trusted"));
        }
        if self.trust_untrusted >= self.theta_high {
            return Err(ConfigError::Inconsistent("untrusted source trust must stay below the high-risk threshold"));
        }
        if !(self.theta_answer <= self.theta_low_medium && self.theta_low_medium <= self.theta_high) {
            return Err(ConfigError::Inconsistent("thresholds must satisfy answer <= low/medium <= high"));
        }
        if self.theta_answer == Trust::ZERO {
            return Err(ConfigError::Inconsistent("the answer threshold must be above 0"));
        }
        for (f, what) in [
            (self.hop_observed, "hop_observed must be above 0"),
            (self.hop_derived, "hop_derived must be above 0"),
            (self.hop_summarized, "hop_summarized must be above 0"),
            (self.unverified_factor, "unverified_factor must be above 0"),
            (self.reputation_default, "reputation_default must be above 0"),
            (self.trust_trusted, "trust_trusted must be above 0"),
        ] {
            if f == Trust::ZERO {
                return Err(ConfigError::Inconsistent(what));
            }
        }
        if self.poisoned_factor >= self.theta_answer {
            return Err(ConfigError::Inconsistent("poisoned_factor must stay below the answer threshold"));
        }
        if self.revoked_factor >= self.theta_answer {
            return Err(ConfigError::Inconsistent("revoked_factor must stay below the answer threshold"));
        }
        let limits = [
            ("k_default", self.k_default, self.k_max),
            ("k_max", self.k_max, self.rank_candidates_max),
            ("rank_candidates_max", self.rank_candidates_max, RANK_CANDIDATES_CAP),
            ("parents_max", self.parents_max, PARENTS_MAX),
            ("readers_max", self.readers_max, READERS_MAX),
            ("text_bytes_max", self.text_bytes_max, CONTENT_BYTES_MAX),
            ("affected_ids_max", self.affected_ids_max, AFFECTED_IDS_CAP),
            ("propagation_step_records_max", self.propagation_step_records_max, STEP_CAP),
            ("erasure_records_max", self.erasure_records_max, ERASURE_CAP),
            ("gate_supports_max", self.gate_supports_max, ACTION_CONTEXT_MAX),
            ("tool_name_bytes_max", self.tool_name_bytes_max, TOOL_NAME_CAP),
        ];
        for (name, value, max) in limits {
            if value == 0 || value > max {
                return Err(ConfigError::LimitOutOfRange { name, value, max });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_is_valid_and_round_trips() {
        let c = LineageConfig::default();
        c.validate().unwrap();
        let json = serde_json::to_string(&c).unwrap();
        let back: LineageConfig = serde_json::from_str(&json).unwrap();
        assert_eq!(back, c);
        // Partial configs fill in defaults; unknown fields are refused.
        let partial: LineageConfig = serde_json::from_str(r#"{"k_default": 3}"#).unwrap();
        assert_eq!(partial.k_default, 3);
        assert!(serde_json::from_str::<LineageConfig>(r#"{"k_defualt": 3}"#).is_err());
        assert!(serde_json::from_str::<LineageConfig>(r#"{"theta_high": 1.2}"#).is_err());
    }

    #[test]
    fn validate_refuses_broken_orderings_and_limits() {
        let bad = [
            LineageConfig { theta_answer: Trust::lit(0.9), ..Default::default() },
            LineageConfig { trust_agent: Trust::lit(0.2), ..Default::default() },
            LineageConfig { trust_untrusted: Trust::lit(0.9), trust_agent: Trust::lit(0.95), ..Default::default() },
            LineageConfig { hop_summarized: Trust::ZERO, ..Default::default() },
            LineageConfig { poisoned_factor: Trust::lit(0.5), ..Default::default() },
            LineageConfig { k_default: 0, ..Default::default() },
            LineageConfig { k_default: 500, ..Default::default() },
            LineageConfig { parents_max: PARENTS_MAX + 1, ..Default::default() },
            LineageConfig { affected_ids_max: 0, ..Default::default() },
            LineageConfig { propagation_step_records_max: 0, ..Default::default() },
        ];
        for c in bad {
            assert!(c.validate().is_err(), "{c:?}");
        }
    }
}
