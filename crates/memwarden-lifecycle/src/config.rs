//! [`LifecycleConfig`]: every weight, threshold, step and limit of the lifecycle layer in one
//! serialisable object. `Default` is the specification's values (spec/lifecycle.md, the paper's
//! Table 1, Table 10 and Appendix A, completed from the authors' public code where the paper
//! is silent). Gate logic never hard-codes a number; it reads them from here.

use memwarden_core::item::{CONTENT_BYTES_MAX, PARENTS_MAX, Taint};
use serde::{Deserialize, Serialize};

/// Why a configuration was refused by [`LifecycleConfig::validate`].
#[derive(Debug, Clone, PartialEq, thiserror::Error, Serialize)]
pub enum ConfigError {
    /// A value is outside its allowed range (or is not a finite number).
    #[error("{field} = {value} is outside [{min}, {max}]")]
    OutOfRange {
        /// Dotted path of the field, e.g. `write.quarantine_risk_min`.
        field: &'static str,
        /// The rejected value.
        value: f64,
        /// Smallest allowed value.
        min: f64,
        /// Largest allowed value.
        max: f64,
    },
    /// The eight risk weights must add up to one.
    #[error("risk weights add up to {sum}, expected 1")]
    WeightsDoNotSumToOne {
        /// The sum found.
        sum: f64,
    },
    /// A count or size limit is outside its allowed range.
    #[error("{field} = {value} is outside [{min}, {max}]")]
    LimitOutOfRange {
        /// Dotted path of the field.
        field: &'static str,
        /// The rejected value.
        value: u64,
        /// Smallest allowed value.
        min: u64,
        /// Largest allowed value.
        max: u64,
    },
    /// `retrieval.keep_top_n` exceeds `limits.candidates_max`.
    #[error("retrieval.keep_top_n ({keep}) exceeds limits.candidates_max ({max})")]
    KeepExceedsCandidates {
        /// `keep_top_n`.
        keep: u64,
        /// `candidates_max`.
        max: u64,
    },
    /// A configuration text could not be parsed.
    #[error("configuration does not parse: {0}")]
    Parse(String),
}

/// A pair of additive steps to provenance trust `tau` and content hazard `h`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Adjust {
    /// Added to `tau` (negative lowers trust).
    pub tau: f64,
    /// Added to `h` (positive raises hazard).
    pub h: f64,
}

impl Adjust {
    const fn new(tau: f64, h: f64) -> Self {
        Self { tau, h }
    }
}

/// The eight risk weights `w_k` of `r = Σ w_k · signal_k` (Table 1 / Table 10). They sum to one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RiskWeights {
    /// Weight of provenance `p` (.24).
    pub provenance: f64,
    /// Weight of lineage `l` (.20).
    pub lineage: f64,
    /// Weight of self-claim `s` (.14).
    pub self_claim: f64,
    /// Weight of instruction-likeness `i` (.14).
    pub instruction: f64,
    /// Weight of answer binding `b` (.12).
    pub answer_binding: f64,
    /// Weight of trigger sensitivity `t` (.10).
    pub trigger: f64,
    /// Weight of cluster dominance `d` (.04).
    pub cluster: f64,
    /// Weight of agent distrust `a` (.02).
    pub agent_distrust: f64,
}

impl Default for RiskWeights {
    fn default() -> Self {
        Self {
            provenance: 0.24,
            lineage: 0.20,
            self_claim: 0.14,
            instruction: 0.14,
            answer_binding: 0.12,
            trigger: 0.10,
            cluster: 0.04,
            agent_distrust: 0.02,
        }
    }
}

/// Per-signal increments (spec "Risk r", paper Table 1 and Appendix A).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SignalConstants {
    /// `p`: source names a direct-memory / imported / external / tool / environment route (+.45).
    pub provenance_route_primary: f64,
    /// `p`: source names a query-only / bridge / post-task successful experience route (+.30).
    pub provenance_route_secondary: f64,
    /// `p`: taint external (+.40). The three taint terms are exclusive.
    pub provenance_taint_external: f64,
    /// `p`: taint unverified (+.24).
    pub provenance_taint_unverified: f64,
    /// `p`: taint poisoned (+.70).
    pub provenance_taint_poisoned: f64,
    /// `p`: team scope with `tau` below `provenance_team_trust_below` (+.15).
    pub provenance_team_low_trust: f64,
    /// `p`: the trust bound for the team-scope term (.70).
    pub provenance_team_trust_below: f64,
    /// `l`: per distinct lineage marker (.18).
    pub lineage_per_marker: f64,
    /// `s`: per distinct self-claim pattern matched (.14).
    pub self_claim_per_match: f64,
    /// `s`: added once when any claim matched, unless taint is clean and `tau ≥
    /// self_claim_trusted_tau_min` (.18).
    pub self_claim_unverified_bonus: f64,
    /// `s`: the trust at or above which a clean item's claims get no bonus (.70).
    pub self_claim_trusted_tau_min: f64,
    /// `i`: value when a forbidden directive matches (1).
    pub instruction_forbidden: f64,
    /// `i`: per distinct reuse / prioritisation pattern otherwise (.16).
    pub instruction_per_match: f64,
    /// `b`: per distinct answer-binding pattern (.20).
    pub answer_binding_per_match: f64,
    /// `t`: "trigger phrase" / "calibration token" / "suffix" cue (+.45).
    pub trigger_cue: f64,
    /// `t`: a `##word` token (+.35).
    pub trigger_hash_token: f64,
    /// `t`: five consecutive alphabetic words of ≥ 3 letters in a text mentioning "trigger" (+.20).
    pub trigger_long_phrase: f64,
    /// `t` at retrieval: query–memory token overlap ≥ `trigger_overlap_min` and a trigger cue on
    /// either side (+.25).
    pub trigger_overlap_bonus: f64,
    /// `t` at retrieval: the overlap bound for `trigger_overlap_bonus` (.25).
    pub trigger_overlap_min: f64,
    /// `t` at retrieval: the query mentions "trigger" and similarity ≥
    /// `trigger_query_similarity_min` (+.15).
    pub trigger_query_bonus: f64,
    /// `t` at retrieval: the similarity bound for `trigger_query_bonus` (.35).
    pub trigger_query_similarity_min: f64,
    /// `d = max(share − cluster_share_offset, 0)` (.5).
    pub cluster_share_offset: f64,
    /// `a = 1 − trust`: the source-agent trust used when none is stored or the stored value is 0
    /// (.5).
    pub agent_trust_default: f64,
}

impl Default for SignalConstants {
    fn default() -> Self {
        Self {
            provenance_route_primary: 0.45,
            provenance_route_secondary: 0.30,
            provenance_taint_external: 0.40,
            provenance_taint_unverified: 0.24,
            provenance_taint_poisoned: 0.70,
            provenance_team_low_trust: 0.15,
            provenance_team_trust_below: 0.70,
            lineage_per_marker: 0.18,
            self_claim_per_match: 0.14,
            self_claim_unverified_bonus: 0.18,
            self_claim_trusted_tau_min: 0.70,
            instruction_forbidden: 1.0,
            instruction_per_match: 0.16,
            answer_binding_per_match: 0.20,
            trigger_cue: 0.45,
            trigger_hash_token: 0.35,
            trigger_long_phrase: 0.20,
            trigger_overlap_bonus: 0.25,
            trigger_overlap_min: 0.25,
            trigger_query_bonus: 0.15,
            trigger_query_similarity_min: 0.35,
            cluster_share_offset: 0.5,
            agent_trust_default: 0.5,
        }
    }
}

/// Write-gate thresholds and rewrite caps (spec "Write gate", paper Eq. write and Table 10).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WriteGateConfig {
    /// `Q_w` first clause and second clause: `p ≥` this (.45).
    pub quarantine_provenance_min: f64,
    /// `Q_w` first clause: `b ≥` this or `s ≥` this (.25).
    pub quarantine_claim_min: f64,
    /// `Q_w` second clause: `r ≥` this (.50).
    pub quarantine_risk_min: f64,
    /// `Q_w` second clause: or `l ≥` this (.36).
    pub quarantine_lineage_min: f64,
    /// `Q_w` third clause: `h ≥` this (.65) ...
    pub quarantine_hazard_min: f64,
    /// ... and `tau ≤` this (.35).
    pub quarantine_trust_max: f64,
    /// Rewrite when `i >` this (spec: `i > 0`; the authors' code rewrites only on a forbidden
    /// directive, which is `i = 1`).
    pub rewrite_instruction_above: f64,
    /// Rewrite when `r ≥` this and `b > 0` or `s > 0` (.38).
    pub rewrite_risk_min: f64,
    /// Rewrite caps utility at this (.1).
    pub rewrite_q_max: f64,
    /// Rewrite caps trust at this (.25).
    pub rewrite_tau_max: f64,
    /// Rewrite raises hazard to at least this (.5).
    pub rewrite_h_min: f64,
}

impl Default for WriteGateConfig {
    fn default() -> Self {
        Self {
            quarantine_provenance_min: 0.45,
            quarantine_claim_min: 0.25,
            quarantine_risk_min: 0.50,
            quarantine_lineage_min: 0.36,
            quarantine_hazard_min: 0.65,
            quarantine_trust_max: 0.35,
            rewrite_instruction_above: 0.0,
            rewrite_risk_min: 0.38,
            rewrite_q_max: 0.1,
            rewrite_tau_max: 0.25,
            rewrite_h_min: 0.5,
        }
    }
}

/// Retrieval score `S`, the query-conditioned hazard and taint terms, and the read firewall
/// (spec "Retrieval gate", paper Eq. 10 and Table 10; the query-conditioned increments are the
/// authors' code).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RetrievalGateConfig {
    /// β, weight of utility `q` (.8).
    pub beta_utility: f64,
    /// γ, weight of trust `tau` (.5).
    pub gamma_trust: f64,
    /// λ, weight of query hazard `h_q` (1.0).
    pub lambda_hazard: f64,
    /// η, weight of query taint `T_q` (1.0).
    pub eta_taint: f64,
    /// κ, weight of the scope violation `sv` (2.0).
    pub kappa_scope: f64,
    /// μ, weight of the risk `r` (1.15).
    pub mu_risk: f64,
    /// `h_q = clip(query-conditioned hazard + this · r)` (.30).
    pub hazard_risk_share: f64,
    /// `T_q = clip(taint penalty + this · p + ...)` (.12).
    pub taint_provenance_share: f64,
    /// `T_q = clip(... + this · l)` (.10).
    pub taint_lineage_share: f64,
    /// Taint penalty base for external taint (.65).
    pub taint_base_external: f64,
    /// Taint penalty base for unverified taint (.40).
    pub taint_base_unverified: f64,
    /// Taint penalty base for poisoned taint (.90).
    pub taint_base_poisoned: f64,
    /// Taint penalty (tainted items only): + this when similarity ≥ `taint_similarity_min` (.10).
    pub taint_similar: f64,
    /// Taint penalty: first similarity bound (.45).
    pub taint_similarity_min: f64,
    /// Taint penalty: + this again when similarity ≥ `taint_similarity_high` (.10).
    pub taint_very_similar: f64,
    /// Taint penalty: second similarity bound (.65).
    pub taint_similarity_high: f64,
    /// Taint penalty: + this for a forbidden directive in the memory (.10).
    pub taint_instruction: f64,
    /// Taint penalty: + this when the query itself carries injection / tool-output cues (.10).
    pub taint_query_risk: f64,
    /// Taint penalty: + this when query–memory overlap ≥ `overlap_min` (.05).
    pub taint_overlap: f64,
    /// Taint penalty: − this for an item with `tau ≥ taint_trusted_tau_min` and `h ≤
    /// taint_trusted_h_max` (.10).
    pub taint_trusted_discount: f64,
    /// Trust bound of the taint discount (.75).
    pub taint_trusted_tau_min: f64,
    /// Hazard bound of the taint discount (.20).
    pub taint_trusted_h_max: f64,
    /// Query hazard: + this for a forbidden directive in the memory (.10) ...
    pub hazard_instruction: f64,
    /// ... plus this × max(similarity, 0) (.20).
    pub hazard_instruction_similarity: f64,
    /// Query hazard: + this for a tainted item with similarity ≥ `hazard_similarity_min` (.10).
    pub hazard_tainted_similar: f64,
    /// Similarity bound of `hazard_tainted_similar` (.35).
    pub hazard_similarity_min: f64,
    /// Query hazard: + this for a tainted item with overlap ≥ `overlap_min` (.10).
    pub hazard_tainted_overlap: f64,
    /// Query hazard: + this × the query's own context risk (.15).
    pub hazard_query_risk_share: f64,
    /// Query hazard: + this when the query carries tool-output cues and the memory tool cues (.10).
    pub hazard_tool_context: f64,
    /// Query hazard: − this for a clean item with `tau ≥ hazard_trusted_tau_min` and no forbidden
    /// directive (.05).
    pub hazard_trusted_discount: f64,
    /// Trust bound of the hazard discount (.70).
    pub hazard_trusted_tau_min: f64,
    /// Query–memory token overlap bound used by the taint and hazard terms (.25).
    pub overlap_min: f64,
    /// Query context risk: the query carries tool-output cues (+.25).
    pub query_risk_tool_output: f64,
    /// Query context risk: a forbidden directive matches the query (+.35).
    pub query_risk_forbidden: f64,
    /// Query context risk: the query carries injection phrases (+.25).
    pub query_risk_injection: f64,
    /// Query context risk: the query carries trigger cues (+.10).
    pub query_risk_trigger: f64,
    /// Firewall rule 3: block when `h_q ≥` this (.65) ...
    pub firewall_hazard_min: f64,
    /// ... and `tau ≤` this (.5).
    pub firewall_hazard_trust_max: f64,
    /// Firewall rule 4: block when `r ≥` this (.48).
    pub firewall_risk_min: f64,
    /// Firewall rule 5: block when `t ≥` this (.45) ...
    pub firewall_trigger_min: f64,
    /// ... and `tau <` this (.75).
    pub firewall_trigger_trust_below: f64,
    /// Firewall rule 6: block when `b ≥` this (.45) ...
    pub firewall_binding_min: f64,
    /// ... and `s ≥` this (.35) and taint is not clean.
    pub firewall_self_claim_min: f64,
    /// Firewall rule 7: block when `S <` this (−0.5).
    pub min_score: f64,
    /// Survivors kept, best `S` first (paper: 3; 16 for long-history QA).
    pub keep_top_n: usize,
}

impl Default for RetrievalGateConfig {
    fn default() -> Self {
        Self {
            beta_utility: 0.8,
            gamma_trust: 0.5,
            lambda_hazard: 1.0,
            eta_taint: 1.0,
            kappa_scope: 2.0,
            mu_risk: 1.15,
            hazard_risk_share: 0.30,
            taint_provenance_share: 0.12,
            taint_lineage_share: 0.10,
            taint_base_external: 0.65,
            taint_base_unverified: 0.40,
            taint_base_poisoned: 0.90,
            taint_similar: 0.10,
            taint_similarity_min: 0.45,
            taint_very_similar: 0.10,
            taint_similarity_high: 0.65,
            taint_instruction: 0.10,
            taint_query_risk: 0.10,
            taint_overlap: 0.05,
            taint_trusted_discount: 0.10,
            taint_trusted_tau_min: 0.75,
            taint_trusted_h_max: 0.20,
            hazard_instruction: 0.10,
            hazard_instruction_similarity: 0.20,
            hazard_tainted_similar: 0.10,
            hazard_similarity_min: 0.35,
            hazard_tainted_overlap: 0.10,
            hazard_query_risk_share: 0.15,
            hazard_tool_context: 0.10,
            hazard_trusted_discount: 0.05,
            hazard_trusted_tau_min: 0.70,
            overlap_min: 0.25,
            query_risk_tool_output: 0.25,
            query_risk_forbidden: 0.35,
            query_risk_injection: 0.25,
            query_risk_trigger: 0.10,
            firewall_hazard_min: 0.65,
            firewall_hazard_trust_max: 0.5,
            firewall_risk_min: 0.48,
            firewall_trigger_min: 0.45,
            firewall_trigger_trust_below: 0.75,
            firewall_binding_min: 0.45,
            firewall_self_claim_min: 0.35,
            min_score: -0.5,
            keep_top_n: 3,
        }
    }
}

/// Promotion-gate predicate `B_p` (spec "Promotion gate", paper Table 10).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PromotionGateConfig {
    /// Block when `r ≥` this (.34).
    pub risk_min: f64,
    /// Block when `p ≥` this (.45) and a claim is strong ...
    pub provenance_min: f64,
    /// ... i.e. `b ≥` this or `s ≥` this (.25).
    pub claim_min: f64,
    /// Block when `h ≥` this (.5).
    pub hazard_min: f64,
    /// Block when `tau <` this (.62).
    pub trust_min: f64,
}

impl Default for PromotionGateConfig {
    fn default() -> Self {
        Self { risk_min: 0.34, provenance_min: 0.45, claim_min: 0.25, hazard_min: 0.5, trust_min: 0.62 }
    }
}

/// Guard-state derivation from route, taint, scope, type, instruction-likeness and agent trust
/// (spec "Write gate", last paragraph; the individual steps are the authors' code).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DerivationConfig {
    /// Starting trust (.5).
    pub start_tau: f64,
    /// Starting hazard (.15).
    pub start_h: f64,
    /// Source names a post-task / benign consolidation (+.20 / −.05).
    pub post_task: Adjust,
    /// Source is the direct-memory injection route (−.35 / +.45).
    pub direct_injection: Adjust,
    /// Source is query-only or external, or taint is external (−.25 / +.30).
    pub external: Adjust,
    /// Source is a cross-agent consolidation (−.18 / +.22).
    pub cross_agent: Adjust,
    /// Source is a tool / web / environment observation (−.15 / +.25).
    pub observation: Adjust,
    /// Scope is team (h +.10).
    pub team_scope_h: f64,
    /// Exactly one allowed reader (h −.03).
    pub single_reader_h: f64,
    /// Memory type is procedural / policy / permission / tool / credential (h +.18).
    pub sensitive_type_h: f64,
    /// Taint unverified (−.15 / +.18).
    pub taint_unverified: Adjust,
    /// Taint poisoned (−.45 / +.45).
    pub taint_poisoned: Adjust,
    /// A forbidden directive matches the text (−.20 / +.35).
    pub instruction: Adjust,
    /// Per success in excess of failures: trust + (.03) ...
    pub success_tau_step: f64,
    /// ... capped at (.15) ...
    pub success_tau_cap: f64,
    /// ... and hazard − (.02) ...
    pub success_h_step: f64,
    /// ... capped at (.10).
    pub success_h_cap: f64,
    /// Per failure in excess of successes: trust − (.04) ...
    pub failure_tau_step: f64,
    /// ... capped at (.20) ...
    pub failure_tau_cap: f64,
    /// ... and hazard + (.04) ...
    pub failure_h_step: f64,
    /// ... capped at (.20).
    pub failure_h_cap: f64,
    /// Trust + this × (agent trust − .5) ... (.35)
    pub agent_trust_slope: f64,
    /// ... bounded to ± this (.20).
    pub agent_trust_cap: f64,
    /// Hazard + `low_agent_trust_h` when agent trust is below this (.3).
    pub low_agent_trust_below: f64,
    /// (.10).
    pub low_agent_trust_h: f64,
    /// Final step: `tau −= this · max(p, l)` (.25).
    pub final_tau_share: f64,
    /// Final step: `h += this · r` (.55).
    pub final_h_share: f64,
}

impl Default for DerivationConfig {
    fn default() -> Self {
        Self {
            start_tau: 0.5,
            start_h: 0.15,
            post_task: Adjust::new(0.20, -0.05),
            direct_injection: Adjust::new(-0.35, 0.45),
            external: Adjust::new(-0.25, 0.30),
            cross_agent: Adjust::new(-0.18, 0.22),
            observation: Adjust::new(-0.15, 0.25),
            team_scope_h: 0.10,
            single_reader_h: -0.03,
            sensitive_type_h: 0.18,
            taint_unverified: Adjust::new(-0.15, 0.18),
            taint_poisoned: Adjust::new(-0.45, 0.45),
            instruction: Adjust::new(-0.20, 0.35),
            success_tau_step: 0.03,
            success_tau_cap: 0.15,
            success_h_step: 0.02,
            success_h_cap: 0.10,
            failure_tau_step: 0.04,
            failure_tau_cap: 0.20,
            failure_h_step: 0.04,
            failure_h_cap: 0.20,
            agent_trust_slope: 0.35,
            agent_trust_cap: 0.20,
            low_agent_trust_below: 0.3,
            low_agent_trust_h: 0.10,
            final_tau_share: 0.25,
            final_h_share: 0.55,
        }
    }
}

/// Outcome feedback (spec "Outcome feedback", paper Eq. 4–5 and Appendix A).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FeedbackConfig {
    /// `q ← (1 − alpha) q + alpha R` (.2).
    pub alpha: f64,
    /// Whether outcomes update `q` at all (false = the paper's `no_q` ablation).
    pub update_q: bool,
    /// Success: trust + this (.03).
    pub success_tau: f64,
    /// Success: hazard − this (.02).
    pub success_h: f64,
    /// Failure: trust − this (.05).
    pub failure_tau: f64,
    /// Failure: hazard + this (.05).
    pub failure_h: f64,
    /// Source-agent reputation + this per success (.015).
    pub reputation_success: f64,
    /// Source-agent reputation − this per failure (.020).
    pub reputation_failure: f64,
    /// Lowest reputation feedback can produce (.01; memwarden's: a stored 0 would read as the
    /// .5 default, so feedback never writes 0).
    pub reputation_min: f64,
}

impl Default for FeedbackConfig {
    fn default() -> Self {
        Self {
            alpha: 0.2,
            update_q: true,
            success_tau: 0.03,
            success_h: 0.02,
            failure_tau: 0.05,
            failure_h: 0.05,
            reputation_success: 0.015,
            reputation_failure: 0.020,
            reputation_min: 0.01,
        }
    }
}

/// One initial guard state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InitialGuard {
    /// Utility.
    pub q: f64,
    /// Trust.
    pub tau: f64,
    /// Hazard.
    pub h: f64,
    /// Taint.
    pub taint: Taint,
}

/// Initial states of new memories (spec "Outcome feedback", paper Appendix D.2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct InitialStates {
    /// Agent output after a successful task (q .65, tau .78, h .05, clean).
    pub after_success: InitialGuard,
    /// Agent output after a failed task (q −.25, tau .42, h .18, unverified).
    pub after_failure: InitialGuard,
    /// Correctness feedback off (q 0, tau .5, h .15, unverified).
    pub feedback_off: InitialGuard,
    /// Dialogue / hand-off memory (q .35, tau .55, h .15, unverified).
    pub dialogue_handoff: InitialGuard,
}

impl Default for InitialStates {
    fn default() -> Self {
        Self {
            after_success: InitialGuard { q: 0.65, tau: 0.78, h: 0.05, taint: Taint::Clean },
            after_failure: InitialGuard { q: -0.25, tau: 0.42, h: 0.18, taint: Taint::Unverified },
            feedback_off: InitialGuard { q: 0.0, tau: 0.5, h: 0.15, taint: Taint::Unverified },
            dialogue_handoff: InitialGuard { q: 0.35, tau: 0.55, h: 0.15, taint: Taint::Unverified },
        }
    }
}

/// Input limits. Anything over a limit fails closed (deny / quarantine), never allow.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// Largest memory text scored, in bytes (default: core's 64 KiB content limit plus room for
    /// an intent line and the rewrite notice: 96 KiB).
    pub text_bytes_max: usize,
    /// Largest query text, in bytes (16 KiB).
    pub query_bytes_max: usize,
    /// Most retrieval candidates per call, the population of the cluster signal `d` (256).
    pub candidates_max: usize,
    /// Most parent descriptors per memory (core's `PARENTS_MAX`, 64).
    pub parents_max: usize,
    /// Most source tags per memory (32).
    pub source_tags_max: usize,
    /// Longest parent descriptor, source tag or memory type, in bytes (256).
    pub marker_bytes_max: usize,
    /// Most credential findings reported per text (16); scanning stops there, the text is
    /// rejected either way.
    pub credential_findings_max: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            text_bytes_max: CONTENT_BYTES_MAX + 32 * 1024,
            query_bytes_max: 16 * 1024,
            candidates_max: 256,
            parents_max: PARENTS_MAX,
            source_tags_max: 32,
            marker_bytes_max: 256,
            credential_findings_max: 16,
        }
    }
}

/// The one configuration object of the lifecycle layer. `Default` is the specification.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LifecycleConfig {
    /// Risk weights.
    pub weights: RiskWeights,
    /// Signal increments.
    pub signals: SignalConstants,
    /// Write gate.
    pub write: WriteGateConfig,
    /// Retrieval gate.
    pub retrieval: RetrievalGateConfig,
    /// Promotion gate.
    pub promotion: PromotionGateConfig,
    /// Guard-state derivation.
    pub derivation: DerivationConfig,
    /// Outcome feedback.
    pub feedback: FeedbackConfig,
    /// Initial states.
    pub initial: InitialStates,
    /// Input limits.
    pub limits: Limits,
    /// Which rules withhold and quarantine: the paper's (route-conditioned scores) or the
    /// product's (specific evidence only).
    pub mode: RuleMode,
}

/// Which rules of the write gate, read firewall and promotion gate decide.
///
/// The paper's rules ([`RuleMode::Paper`], MAPLE-Guard as published) threshold scores that the
/// route alone moves: every memory from a web page, document or e-mail starts external, low-trust
/// and hazardous, so the read firewall withholds benign external knowledge too. The product's
/// rules ([`RuleMode::Evidence`]) withhold, quarantine or refuse only on specific evidence about
/// the memory itself: a secret's shape, poison, an instruction or trigger in tainted text, a
/// self-claim of authority in tainted text, a low-reputation writer. The route still lowers
/// the ranking score and is reported with every result (its label), but never hides it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RuleMode {
    /// MAPLE-Guard's published rules (the benchmarks' paper rows).
    #[default]
    Paper,
    /// Specific evidence only (the product).
    Evidence,
}

/// Lowest writer reputation whose memories the product's read firewall passes (a writer whose
/// outcome feedback drove its reputation below this is evidence against what it wrote).
pub const EVIDENCE_REPUTATION_MIN: f64 = 0.25;

/// Tolerance for the weights summing to one.
const WEIGHT_SUM_TOLERANCE: f64 = 1e-9;
/// Largest accepted text limit (16 MiB).
const TEXT_LIMIT_CEILING: usize = 16 * 1024 * 1024;
/// Largest accepted candidate limit.
const CANDIDATE_LIMIT_CEILING: usize = 100_000;

impl LifecycleConfig {
    /// The product's configuration: the specification's constants under the evidence rules
    /// ([`RuleMode::Evidence`]).
    pub fn product() -> Self {
        Self { mode: RuleMode::Evidence, ..Self::default() }
    }

    /// The long-history QA preset: the defaults, keeping 16 retrieval survivors instead of 3.
    pub fn long_history_qa() -> Self {
        let mut c = Self::default();
        c.retrieval.keep_top_n = 16;
        c
    }

    /// Parse a JSON configuration (missing fields take their defaults) and validate it.
    pub fn from_json_str(text: &str) -> Result<Self, ConfigError> {
        let c: Self = serde_json::from_str(text).map_err(|e| ConfigError::Parse(e.to_string()))?;
        c.validate()?;
        Ok(c)
    }

    /// Check every value against its range: weights, increments and thresholds in `[0, 1]`,
    /// derivation steps in `[−1, 1]`, retrieval weights in `[0, 10]`, the minimum score in
    /// `[−10, 10]`, the weights summing to one, and limits within sane bounds. Non-finite
    /// numbers are refused.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let unit = |field: &'static str, value: f64| range(field, value, 0.0, 1.0);
        let step = |field: &'static str, value: f64| range(field, value, -1.0, 1.0);

        let w = &self.weights;
        for (f, v) in [
            ("weights.provenance", w.provenance),
            ("weights.lineage", w.lineage),
            ("weights.self_claim", w.self_claim),
            ("weights.instruction", w.instruction),
            ("weights.answer_binding", w.answer_binding),
            ("weights.trigger", w.trigger),
            ("weights.cluster", w.cluster),
            ("weights.agent_distrust", w.agent_distrust),
        ] {
            unit(f, v)?;
        }
        let sum = w.provenance
            + w.lineage
            + w.self_claim
            + w.instruction
            + w.answer_binding
            + w.trigger
            + w.cluster
            + w.agent_distrust;
        if (sum - 1.0).abs() > WEIGHT_SUM_TOLERANCE {
            return Err(ConfigError::WeightsDoNotSumToOne { sum });
        }

        let s = &self.signals;
        for (f, v) in [
            ("signals.provenance_route_primary", s.provenance_route_primary),
            ("signals.provenance_route_secondary", s.provenance_route_secondary),
            ("signals.provenance_taint_external", s.provenance_taint_external),
            ("signals.provenance_taint_unverified", s.provenance_taint_unverified),
            ("signals.provenance_taint_poisoned", s.provenance_taint_poisoned),
            ("signals.provenance_team_low_trust", s.provenance_team_low_trust),
            ("signals.provenance_team_trust_below", s.provenance_team_trust_below),
            ("signals.lineage_per_marker", s.lineage_per_marker),
            ("signals.self_claim_per_match", s.self_claim_per_match),
            ("signals.self_claim_unverified_bonus", s.self_claim_unverified_bonus),
            ("signals.self_claim_trusted_tau_min", s.self_claim_trusted_tau_min),
            ("signals.instruction_forbidden", s.instruction_forbidden),
            ("signals.instruction_per_match", s.instruction_per_match),
            ("signals.answer_binding_per_match", s.answer_binding_per_match),
            ("signals.trigger_cue", s.trigger_cue),
            ("signals.trigger_hash_token", s.trigger_hash_token),
            ("signals.trigger_long_phrase", s.trigger_long_phrase),
            ("signals.trigger_overlap_bonus", s.trigger_overlap_bonus),
            ("signals.trigger_overlap_min", s.trigger_overlap_min),
            ("signals.trigger_query_bonus", s.trigger_query_bonus),
            ("signals.trigger_query_similarity_min", s.trigger_query_similarity_min),
            ("signals.cluster_share_offset", s.cluster_share_offset),
            ("signals.agent_trust_default", s.agent_trust_default),
        ] {
            unit(f, v)?;
        }

        let g = &self.write;
        for (f, v) in [
            ("write.quarantine_provenance_min", g.quarantine_provenance_min),
            ("write.quarantine_claim_min", g.quarantine_claim_min),
            ("write.quarantine_risk_min", g.quarantine_risk_min),
            ("write.quarantine_lineage_min", g.quarantine_lineage_min),
            ("write.quarantine_hazard_min", g.quarantine_hazard_min),
            ("write.quarantine_trust_max", g.quarantine_trust_max),
            ("write.rewrite_instruction_above", g.rewrite_instruction_above),
            ("write.rewrite_risk_min", g.rewrite_risk_min),
            ("write.rewrite_tau_max", g.rewrite_tau_max),
            ("write.rewrite_h_min", g.rewrite_h_min),
        ] {
            unit(f, v)?;
        }
        step("write.rewrite_q_max", g.rewrite_q_max)?;

        let r = &self.retrieval;
        for (f, v) in [
            ("retrieval.beta_utility", r.beta_utility),
            ("retrieval.gamma_trust", r.gamma_trust),
            ("retrieval.lambda_hazard", r.lambda_hazard),
            ("retrieval.eta_taint", r.eta_taint),
            ("retrieval.kappa_scope", r.kappa_scope),
            ("retrieval.mu_risk", r.mu_risk),
        ] {
            range(f, v, 0.0, 10.0)?;
        }
        for (f, v) in [
            ("retrieval.hazard_risk_share", r.hazard_risk_share),
            ("retrieval.taint_provenance_share", r.taint_provenance_share),
            ("retrieval.taint_lineage_share", r.taint_lineage_share),
            ("retrieval.taint_base_external", r.taint_base_external),
            ("retrieval.taint_base_unverified", r.taint_base_unverified),
            ("retrieval.taint_base_poisoned", r.taint_base_poisoned),
            ("retrieval.taint_similar", r.taint_similar),
            ("retrieval.taint_very_similar", r.taint_very_similar),
            ("retrieval.taint_instruction", r.taint_instruction),
            ("retrieval.taint_query_risk", r.taint_query_risk),
            ("retrieval.taint_overlap", r.taint_overlap),
            ("retrieval.taint_trusted_discount", r.taint_trusted_discount),
            ("retrieval.taint_trusted_tau_min", r.taint_trusted_tau_min),
            ("retrieval.taint_trusted_h_max", r.taint_trusted_h_max),
            ("retrieval.hazard_instruction", r.hazard_instruction),
            ("retrieval.hazard_instruction_similarity", r.hazard_instruction_similarity),
            ("retrieval.hazard_tainted_similar", r.hazard_tainted_similar),
            ("retrieval.hazard_tainted_overlap", r.hazard_tainted_overlap),
            ("retrieval.hazard_query_risk_share", r.hazard_query_risk_share),
            ("retrieval.hazard_tool_context", r.hazard_tool_context),
            ("retrieval.hazard_trusted_discount", r.hazard_trusted_discount),
            ("retrieval.hazard_trusted_tau_min", r.hazard_trusted_tau_min),
            ("retrieval.overlap_min", r.overlap_min),
            ("retrieval.query_risk_tool_output", r.query_risk_tool_output),
            ("retrieval.query_risk_forbidden", r.query_risk_forbidden),
            ("retrieval.query_risk_injection", r.query_risk_injection),
            ("retrieval.query_risk_trigger", r.query_risk_trigger),
            ("retrieval.firewall_hazard_min", r.firewall_hazard_min),
            ("retrieval.firewall_hazard_trust_max", r.firewall_hazard_trust_max),
            ("retrieval.firewall_risk_min", r.firewall_risk_min),
            ("retrieval.firewall_trigger_min", r.firewall_trigger_min),
            ("retrieval.firewall_trigger_trust_below", r.firewall_trigger_trust_below),
            ("retrieval.firewall_binding_min", r.firewall_binding_min),
            ("retrieval.firewall_self_claim_min", r.firewall_self_claim_min),
        ] {
            unit(f, v)?;
        }
        // Similarity bounds are on cosine similarity, in [-1, 1].
        for (f, v) in [
            ("retrieval.taint_similarity_min", r.taint_similarity_min),
            ("retrieval.taint_similarity_high", r.taint_similarity_high),
            ("retrieval.hazard_similarity_min", r.hazard_similarity_min),
        ] {
            step(f, v)?;
        }
        range("retrieval.min_score", r.min_score, -10.0, 10.0)?;

        let p = &self.promotion;
        for (f, v) in [
            ("promotion.risk_min", p.risk_min),
            ("promotion.provenance_min", p.provenance_min),
            ("promotion.claim_min", p.claim_min),
            ("promotion.hazard_min", p.hazard_min),
            ("promotion.trust_min", p.trust_min),
        ] {
            unit(f, v)?;
        }

        let d = &self.derivation;
        unit("derivation.start_tau", d.start_tau)?;
        unit("derivation.start_h", d.start_h)?;
        for (f, a) in [
            ("derivation.post_task", d.post_task),
            ("derivation.direct_injection", d.direct_injection),
            ("derivation.external", d.external),
            ("derivation.cross_agent", d.cross_agent),
            ("derivation.observation", d.observation),
            ("derivation.taint_unverified", d.taint_unverified),
            ("derivation.taint_poisoned", d.taint_poisoned),
            ("derivation.instruction", d.instruction),
        ] {
            step(f, a.tau)?;
            step(f, a.h)?;
        }
        for (f, v) in [
            ("derivation.team_scope_h", d.team_scope_h),
            ("derivation.single_reader_h", d.single_reader_h),
            ("derivation.sensitive_type_h", d.sensitive_type_h),
            ("derivation.low_agent_trust_h", d.low_agent_trust_h),
        ] {
            step(f, v)?;
        }
        for (f, v) in [
            ("derivation.success_tau_step", d.success_tau_step),
            ("derivation.success_tau_cap", d.success_tau_cap),
            ("derivation.success_h_step", d.success_h_step),
            ("derivation.success_h_cap", d.success_h_cap),
            ("derivation.failure_tau_step", d.failure_tau_step),
            ("derivation.failure_tau_cap", d.failure_tau_cap),
            ("derivation.failure_h_step", d.failure_h_step),
            ("derivation.failure_h_cap", d.failure_h_cap),
            ("derivation.agent_trust_slope", d.agent_trust_slope),
            ("derivation.agent_trust_cap", d.agent_trust_cap),
            ("derivation.low_agent_trust_below", d.low_agent_trust_below),
            ("derivation.final_tau_share", d.final_tau_share),
            ("derivation.final_h_share", d.final_h_share),
        ] {
            unit(f, v)?;
        }

        let fb = &self.feedback;
        range("feedback.alpha", fb.alpha, f64::MIN_POSITIVE, 1.0)?;
        for (f, v) in [
            ("feedback.success_tau", fb.success_tau),
            ("feedback.success_h", fb.success_h),
            ("feedback.failure_tau", fb.failure_tau),
            ("feedback.failure_h", fb.failure_h),
            ("feedback.reputation_success", fb.reputation_success),
            ("feedback.reputation_failure", fb.reputation_failure),
        ] {
            unit(f, v)?;
        }
        range("feedback.reputation_min", fb.reputation_min, f64::MIN_POSITIVE, 1.0)?;

        for (f, g) in [
            ("initial.after_success", &self.initial.after_success),
            ("initial.after_failure", &self.initial.after_failure),
            ("initial.feedback_off", &self.initial.feedback_off),
            ("initial.dialogue_handoff", &self.initial.dialogue_handoff),
        ] {
            step(f, g.q)?;
            unit(f, g.tau)?;
            unit(f, g.h)?;
        }

        let l = &self.limits;
        limit("limits.text_bytes_max", l.text_bytes_max, 1, TEXT_LIMIT_CEILING)?;
        limit("limits.query_bytes_max", l.query_bytes_max, 1, TEXT_LIMIT_CEILING)?;
        limit("limits.candidates_max", l.candidates_max, 1, CANDIDATE_LIMIT_CEILING)?;
        limit("limits.parents_max", l.parents_max, 0, 65_536)?;
        limit("limits.source_tags_max", l.source_tags_max, 0, 65_536)?;
        limit("limits.marker_bytes_max", l.marker_bytes_max, 1, 65_536)?;
        limit("limits.credential_findings_max", l.credential_findings_max, 1, 65_536)?;
        limit("retrieval.keep_top_n", r.keep_top_n, 1, CANDIDATE_LIMIT_CEILING)?;
        if r.keep_top_n > l.candidates_max {
            return Err(ConfigError::KeepExceedsCandidates { keep: r.keep_top_n as u64, max: l.candidates_max as u64 });
        }
        Ok(())
    }
}

fn range(field: &'static str, value: f64, min: f64, max: f64) -> Result<(), ConfigError> {
    // `contains` is false for NaN, so non-finite values are refused here too.
    if (min..=max).contains(&value) { Ok(()) } else { Err(ConfigError::OutOfRange { field, value, min, max }) }
}

fn limit(field: &'static str, value: usize, min: usize, max: usize) -> Result<(), ConfigError> {
    if (min..=max).contains(&value) {
        Ok(())
    } else {
        Err(ConfigError::LimitOutOfRange { field, value: value as u64, min: min as u64, max: max as u64 })
    }
}
