//! The four lifecycle gates: write, retrieval, promotion and the cross-agent broker. Each is a
//! pure function returning a typed, serde-serialisable decision: the outcome, the rule that
//! fired, the signal values and the thresholds used. An input the gate cannot evaluate (over a
//! limit, a non-finite number) never allows: write rejects, retrieval blocks, promotion blocks
//! (quarantining the item), the broker blocks.

use crate::config::{EVIDENCE_REPUTATION_MIN, PromotionGateConfig, RuleMode, WriteGateConfig};
use crate::credentials::CredentialFinding;
use crate::memory::{
    GuardSnapshot, LifecycleMemory, LifecycleScope, Restrictions, status_max, taint_max, task_class_admitted,
};
use crate::risk::{RetrievalContext, RiskBreakdown, RiskScorer, ScoreError, clip01};
use crate::state::{DerivationRecord, derive_guard, sanitize_guard};
use memwarden_core::ids::PrincipalId;
use memwarden_core::item::{GuardState, Status, Taint};
use serde::Serialize;
use std::cmp::Ordering;

/// Which gate produced a decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GateKind {
    /// The write gate.
    Write,
    /// The retrieval gate (score and read firewall).
    Retrieval,
    /// The promotion gate.
    Promotion,
    /// The cross-agent broker.
    Broker,
}

/// The guard state a gate reads: sanitised, with the carried caps applied.
fn effective_guard(m: &LifecycleMemory) -> GuardState {
    m.carried.clamp_guard(&sanitize_guard(&m.guard))
}

fn snapshot(scorer: &RiskScorer, m: &LifecycleMemory) -> GuardSnapshot {
    let g = effective_guard(m);
    GuardSnapshot {
        q: g.q,
        tau: g.tau,
        h: g.h,
        taint: g.taint,
        status: m.status,
        scope: m.scope,
        source_agent_trust: scorer.effective_agent_trust(m.source_agent_trust),
    }
}

// ---------------------------------------------------------------------------------------------
// Write gate
// ---------------------------------------------------------------------------------------------

/// Write-gate outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WriteOutcome {
    /// Refused; kept for audit only (status blocked).
    Reject,
    /// Stored but held back (status quarantined).
    Quarantine,
    /// Stored as an unverified note with capped state.
    Rewrite,
    /// Stored as is.
    Allow,
}

/// The write-gate rule that fired, in evaluation order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WriteRule {
    /// The input could not be evaluated (fails closed: reject).
    InvalidInput,
    /// Rule 1: the text carries credentials.
    Credential,
    /// Rule 2, `Q_w` clause 1: `p ≥ .45 ∧ (b ≥ .25 ∨ s ≥ .25)`.
    ProvenanceClaim,
    /// Rule 2, `Q_w` clause 2: `r ≥ .50 ∧ (p ≥ .45 ∨ l ≥ .36)`.
    HighRiskProvenance,
    /// Rule 2, `Q_w` clause 3: `h ≥ .65 ∧ tau ≤ .35`.
    HazardLowTrust,
    /// Rule 3: instruction-like, `i > 0`.
    InstructionLike,
    /// Rule 3: `r ≥ .38 ∧ (b > 0 ∨ s > 0)`.
    RiskyClaim,
    /// Rule 4: nothing fired.
    LowRisk,
}

/// What the caller must apply to the memory (see [`WriteDecision::apply`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WriteEffect {
    /// New status.
    pub status: Status,
    /// New guard state (with the cached risk).
    pub guard: GuardState,
    /// A notice to prepend to the text (rewrite only; the payload stays after it).
    pub prepend_note: Option<String>,
    /// The restrictions the item carries from now on.
    pub carried: Restrictions,
}

/// A write-gate decision. Holds no text of the memory: credentials are reported by kind and
/// byte offsets only.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WriteDecision {
    /// Always [`GateKind::Write`].
    pub gate: GateKind,
    /// The outcome.
    pub outcome: WriteOutcome,
    /// The rule that fired.
    pub rule: WriteRule,
    /// Why the input could not be evaluated, for [`WriteRule::InvalidInput`].
    pub error: Option<ScoreError>,
    /// Credentials found (kind, rule name, byte offsets).
    pub credentials: Vec<CredentialFinding>,
    /// The signals (write-time, no query).
    pub signals: Option<RiskBreakdown>,
    /// The guard state the rules read.
    pub state: Option<GuardSnapshot>,
    /// The thresholds used.
    pub thresholds: WriteGateConfig,
    /// The guard-state derivation that ran first, for [`derive_and_write_gate`].
    pub derivation: Option<DerivationRecord>,
    /// What to apply to the memory.
    pub effect: WriteEffect,
}

impl WriteDecision {
    /// Apply the effect to a memory: status, guard state, carried restrictions, and the notice
    /// prepended to the text on a rewrite.
    pub fn apply(&self, m: &mut LifecycleMemory) {
        m.status = self.effect.status;
        m.guard = self.effect.guard.clone();
        m.carried = self.effect.carried.clone();
        if let Some(note) = &self.effect.prepend_note {
            m.text.insert_str(0, note);
        }
    }

    /// Whether the memory may be stored as active (allow or rewrite).
    pub fn admits(&self) -> bool {
        matches!(self.outcome, WriteOutcome::Allow | WriteOutcome::Rewrite)
    }
}

fn write_reject(
    scorer: &RiskScorer,
    m: &LifecycleMemory,
    rule: WriteRule,
    error: Option<ScoreError>,
    credentials: Vec<CredentialFinding>,
    signals: Option<RiskBreakdown>,
) -> WriteDecision {
    let mut guard = effective_guard(m);
    if let Some(s) = &signals {
        guard.risk = s.total;
    }
    WriteDecision {
        gate: GateKind::Write,
        outcome: WriteOutcome::Reject,
        rule,
        error,
        credentials,
        state: Some(snapshot(scorer, m)),
        signals,
        thresholds: scorer.config().write.clone(),
        derivation: None,
        effect: WriteEffect {
            status: status_max(m.status, Status::Blocked),
            guard,
            prepend_note: None,
            carried: m.carried.clone(),
        },
    }
}

/// The write gate, in order: reject credentials; quarantine on `Q_w`; rewrite instruction-like
/// or risky-claim text as an unverified note; allow. Risk is computed without a query. The
/// memory's stored trust and hazard are used as they are; see [`derive_and_write_gate`] for
/// the full write path that derives them from the route first.
pub fn write_gate(scorer: &RiskScorer, m: &LifecycleMemory) -> WriteDecision {
    if let Err(e) = scorer.check_memory(m) {
        return write_reject(scorer, m, WriteRule::InvalidInput, Some(e), Vec::new(), None);
    }
    let credentials = scorer.find_credentials(&m.text);
    let signals = match scorer.score(m) {
        Ok(s) => s,
        Err(e) => return write_reject(scorer, m, WriteRule::InvalidInput, Some(e), credentials, None),
    };
    if !credentials.is_empty() {
        return write_reject(scorer, m, WriteRule::Credential, None, credentials, Some(signals));
    }
    let c = &scorer.config().write;
    let g = effective_guard(m);
    let (p, l, s, i, b, r) = (
        signals.provenance,
        signals.lineage,
        signals.self_claim,
        signals.instruction,
        signals.answer_binding,
        signals.total,
    );
    let evidence = scorer.config().mode == RuleMode::Evidence;
    let quarantine = if evidence {
        // Only what the text itself shows: external text claiming authority, or external text
        // carrying a directive the rules forbid. The route alone never quarantines.
        if p >= c.quarantine_provenance_min && s >= c.quarantine_claim_min {
            Some(WriteRule::ProvenanceClaim)
        } else if p >= c.quarantine_provenance_min && signals.evidence.forbidden_directive {
            Some(WriteRule::HighRiskProvenance)
        } else {
            None
        }
    } else if p >= c.quarantine_provenance_min && (b >= c.quarantine_claim_min || s >= c.quarantine_claim_min)
    {
        Some(WriteRule::ProvenanceClaim)
    } else if r >= c.quarantine_risk_min && (p >= c.quarantine_provenance_min || l >= c.quarantine_lineage_min) {
        Some(WriteRule::HighRiskProvenance)
    } else if g.h >= c.quarantine_hazard_min && g.tau <= c.quarantine_trust_max {
        Some(WriteRule::HazardLowTrust)
    } else {
        None
    };
    let rewrite = if quarantine.is_some() {
        None
    } else if i > c.rewrite_instruction_above {
        Some(WriteRule::InstructionLike)
    } else if evidence {
        (s > 0.0 && r >= c.rewrite_risk_min).then_some(WriteRule::RiskyClaim)
    } else if r >= c.rewrite_risk_min && (b > 0.0 || s > 0.0) {
        Some(WriteRule::RiskyClaim)
    } else {
        None
    };

    let mut guard = g.clone();
    guard.risk = r;
    let mut carried = m.carried.clone();
    let mut status = m.status;
    let mut prepend_note = None;
    let (outcome, rule) = if let Some(rule) = quarantine {
        status = status_max(m.status, Status::Quarantined);
        (WriteOutcome::Quarantine, rule)
    } else if let Some(rule) = rewrite {
        let caps = Restrictions {
            q_max: Some(c.rewrite_q_max),
            tau_max: Some(c.rewrite_tau_max),
            h_min: Some(c.rewrite_h_min),
            taint_floor: Taint::Unverified,
            unverified_note: true,
            ..Restrictions::default()
        };
        carried = carried.merge(&caps);
        guard = carried.clamp_guard(&guard);
        guard.taint = taint_max(guard.taint, Taint::Unverified);
        let note = scorer.rules().unverified_note_prefix();
        if !m.text.starts_with(note) {
            prepend_note = Some(note.to_owned());
        }
        (WriteOutcome::Rewrite, rule)
    } else {
        (WriteOutcome::Allow, WriteRule::LowRisk)
    };
    WriteDecision {
        gate: GateKind::Write,
        outcome,
        rule,
        error: None,
        credentials,
        state: Some(snapshot(scorer, m)),
        signals: Some(signals),
        thresholds: c.clone(),
        derivation: None,
        effect: WriteEffect { status, guard, prepend_note, carried },
    }
}

/// The full write path: derive trust and hazard from the route, taint, scope, type,
/// instruction-likeness and agent trust ([`derive_guard`]), then run [`write_gate`] on the
/// memory with the derived state. The derivation is recorded in the decision.
pub fn derive_and_write_gate(scorer: &RiskScorer, m: &LifecycleMemory) -> WriteDecision {
    match derive_guard(scorer, m) {
        Err(e) => write_reject(scorer, m, WriteRule::InvalidInput, Some(e), Vec::new(), None),
        Ok(rec) => {
            let mut derived = m.clone();
            derived.guard.tau = rec.tau;
            derived.guard.h = rec.h;
            let mut d = write_gate(scorer, &derived);
            d.derivation = Some(rec);
            d
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Retrieval gate
// ---------------------------------------------------------------------------------------------

/// Who is retrieving, for what, with which query.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetrievalQuery<'a> {
    /// The reading agent.
    pub agent: &'a PrincipalId,
    /// The task class (`None` fails any task-class restriction).
    pub task_class: Option<&'a str>,
    /// The query text.
    pub text: &'a str,
}

/// One vector-search candidate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetrievalCandidate<'a> {
    /// The memory.
    pub memory: &'a LifecycleMemory,
    /// Similarity to the query (cosine; clipped to `[-1, 1]`).
    pub similarity: f64,
}

/// Retrieval outcome for one candidate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RetrievalOutcome {
    /// Passed the firewall and is among the top `n`: enters the context.
    Keep,
    /// Passed the firewall but ranked below the top `n`.
    Drop,
    /// Blocked by the read firewall.
    Block,
}

/// The retrieval rule that decided, firewall rules in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RetrievalRule {
    /// The input could not be evaluated (fails closed: block).
    InvalidInput,
    /// Firewall 1: status not active (or scope quarantined / blocked).
    NotActive,
    /// Firewall 2: `sv > 0` (agent or task class out of scope, including carried restrictions).
    ScopeViolation,
    /// Firewall 3: `h_q ≥ .65 ∧ tau ≤ .5`.
    HazardLowTrust,
    /// Firewall 4: `r ≥ .48`.
    HighRisk,
    /// Firewall 5: `t ≥ .45 ∧ tau < .75`.
    TriggerSensitive,
    /// Firewall 6: `b ≥ .45 ∧ s ≥ .35 ∧ taint ≠ clean`.
    UnverifiedAnswerBinding,
    /// Firewall 7: `S < −0.5`.
    LowScore,
    /// Product rule: the memory is poisoned (taint set by a revocation or a poison flag).
    Poisoned,
    /// Product rule: tainted text carrying a directive the rules forbid.
    TaintedDirective,
    /// Product rule: the writer's reputation is below [`EVIDENCE_REPUTATION_MIN`].
    LowReputation,
    /// Survived, within the top `n`.
    TopN,
    /// Survived, below the top `n`.
    BelowTopN,
}

/// The terms of `S = sim + β q + γ tau − λ h_q − η T_q − κ sv − μ r`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScoreParts {
    /// `sim`.
    pub similarity: f64,
    /// `q`.
    pub q: f64,
    /// `tau`.
    pub tau: f64,
    /// The query-conditioned hazard before the risk share.
    pub hazard_query_conditioned: f64,
    /// `h_q`.
    pub hazard_q: f64,
    /// The query-conditioned taint penalty before the provenance / lineage shares.
    pub taint_penalty: f64,
    /// `T_q`.
    pub taint_q: f64,
    /// `sv`.
    pub scope_violation: f64,
    /// `r` (retrieval-time).
    pub risk: f64,
    /// The query's own context risk.
    pub query_context_risk: f64,
    /// Query–memory token overlap.
    pub overlap: f64,
    /// `S`.
    pub score: f64,
}

/// The firewall thresholds a retrieval decision used.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FirewallThresholds {
    /// Rule 3 hazard bound.
    pub hazard_min: f64,
    /// Rule 3 trust bound.
    pub hazard_trust_max: f64,
    /// Rule 4.
    pub risk_min: f64,
    /// Rule 5 trigger bound.
    pub trigger_min: f64,
    /// Rule 5 trust bound.
    pub trigger_trust_below: f64,
    /// Rule 6 binding bound.
    pub binding_min: f64,
    /// Rule 6 self-claim bound.
    pub self_claim_min: f64,
    /// Rule 7.
    pub min_score: f64,
    /// Survivors kept.
    pub keep_top_n: usize,
}

/// The decision for one candidate.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RetrievalDecision {
    /// Always [`GateKind::Retrieval`].
    pub gate: GateKind,
    /// Position of the candidate in the input.
    pub index: usize,
    /// The outcome.
    pub outcome: RetrievalOutcome,
    /// The rule that decided.
    pub rule: RetrievalRule,
    /// Why the input could not be evaluated, for [`RetrievalRule::InvalidInput`].
    pub error: Option<ScoreError>,
    /// The retrieval-time signals.
    pub signals: Option<RiskBreakdown>,
    /// The guard state read.
    pub state: Option<GuardSnapshot>,
    /// The score terms.
    pub parts: Option<ScoreParts>,
    /// Rank among survivors (0 = best), if it survived.
    pub rank: Option<usize>,
    /// The thresholds used.
    pub thresholds: FirewallThresholds,
}

/// The retrieval gate's result: one decision per candidate (input order) and the kept
/// candidates' indices, best `S` first.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RetrievalResult {
    /// Per-candidate decisions, in input order.
    pub decisions: Vec<RetrievalDecision>,
    /// Indices of the kept candidates, best first.
    pub kept: Vec<usize>,
}

fn firewall_thresholds(scorer: &RiskScorer) -> FirewallThresholds {
    let r = &scorer.config().retrieval;
    FirewallThresholds {
        hazard_min: r.firewall_hazard_min,
        hazard_trust_max: r.firewall_hazard_trust_max,
        risk_min: r.firewall_risk_min,
        trigger_min: r.firewall_trigger_min,
        trigger_trust_below: r.firewall_trigger_trust_below,
        binding_min: r.firewall_binding_min,
        self_claim_min: r.firewall_self_claim_min,
        min_score: r.min_score,
        keep_top_n: r.keep_top_n,
    }
}

fn retrieval_invalid(scorer: &RiskScorer, index: usize, e: ScoreError) -> RetrievalDecision {
    RetrievalDecision {
        gate: GateKind::Retrieval,
        index,
        outcome: RetrievalOutcome::Block,
        rule: RetrievalRule::InvalidInput,
        error: Some(e),
        signals: None,
        state: None,
        parts: None,
        rank: None,
        thresholds: firewall_thresholds(scorer),
    }
}

/// Whether `agent` / `task_class` are outside the item's scope, carried restrictions included.
fn scope_violation(m: &LifecycleMemory, agent: &PrincipalId, task_class: Option<&str>) -> bool {
    let eff = m.effective_restrictions();
    !m.admits(agent)
        || !eff.readers.admits(agent)
        || !task_class_admitted(&m.task_classes, task_class)
        || !task_class_admitted(&eff.task_classes, task_class)
}

/// The retrieval gate: score every candidate with `S`, apply the read firewall in order (not
/// active; scope violation; `h_q ≥ .65 ∧ tau ≤ .5`; `r ≥ .48`; `t ≥ .45 ∧ tau < .75`; `b ≥ .45 ∧
/// s ≥ .35 ∧ taint ≠ clean`; `S < −0.5`), and keep the best `retrieval.keep_top_n` survivors.
///
/// The cluster signal `d` is computed over the candidates that pass the input checks. More
/// candidates than `limits.candidates_max`, or a query over `limits.query_bytes_max`, blocks
/// every candidate.
pub fn retrieval_gate(
    scorer: &RiskScorer,
    query: &RetrievalQuery<'_>,
    candidates: &[RetrievalCandidate<'_>],
) -> RetrievalResult {
    let cfg = scorer.config();
    let rc = &cfg.retrieval;
    let max = cfg.limits.candidates_max;
    let all_blocked = |e: ScoreError| RetrievalResult {
        decisions: (0..candidates.len()).map(|i| retrieval_invalid(scorer, i, e.clone())).collect(),
        kept: Vec::new(),
    };
    if candidates.len() > max {
        return all_blocked(ScoreError::TooManyCandidates { count: candidates.len(), max });
    }
    if let Err(e) = scorer.check_query(query.text) {
        return all_blocked(e);
    }

    // Input checks, then the answer-key shares over the valid candidates.
    let checks: Vec<Result<(), ScoreError>> = candidates
        .iter()
        .map(|c| {
            scorer.check_memory(c.memory)?;
            if c.similarity.is_finite() { Ok(()) } else { Err(ScoreError::NonFinite { field: "similarity" }) }
        })
        .collect();
    let valid_texts: Vec<&str> =
        candidates.iter().zip(&checks).filter(|(_, ok)| ok.is_ok()).map(|(c, _)| c.memory.text.as_str()).collect();
    let shares = match scorer.cluster_shares(&valid_texts) {
        Ok(s) => s,
        Err(e) => return all_blocked(e),
    };
    let mut share_iter = shares.into_iter();
    let query_risk = scorer.query_context_risk(query.text);
    let query_lower = query.text.to_lowercase();
    let query_tool = crate::rules::CompiledRules::any_marker(&scorer.rules().query_tool_output_cues, &query_lower);

    let mut decisions = Vec::with_capacity(candidates.len());
    let mut survivors: Vec<(usize, f64)> = Vec::new();
    for (index, (cand, check)) in candidates.iter().zip(checks).enumerate() {
        if let Err(e) = check {
            decisions.push(retrieval_invalid(scorer, index, e));
            continue;
        }
        let m = cand.memory;
        let share = share_iter.next().unwrap_or(0.0);
        let sim = cand.similarity.clamp(-1.0, 1.0);
        let ctx = RetrievalContext { query: query.text, similarity: sim, cluster_share: share };
        let signals = match scorer.score_in_context(m, &ctx) {
            Ok(s) => s,
            Err(e) => {
                decisions.push(retrieval_invalid(scorer, index, e));
                continue;
            }
        };
        let g = effective_guard(m);
        let tainted = g.taint != Taint::Clean;
        let forbidden = signals.evidence.forbidden_directive;
        let overlap = signals.evidence.query_overlap.unwrap_or(0.0);

        // Query-conditioned hazard.
        let mut hz = g.h;
        if forbidden {
            hz += rc.hazard_instruction + rc.hazard_instruction_similarity * sim.max(0.0);
        }
        if tainted && sim >= rc.hazard_similarity_min {
            hz += rc.hazard_tainted_similar;
        }
        if tainted && overlap >= rc.overlap_min {
            hz += rc.hazard_tainted_overlap;
        }
        if query_risk > 0.0 {
            hz += rc.hazard_query_risk_share * query_risk;
        }
        if query_tool
            && crate::rules::CompiledRules::any_marker(&scorer.rules().memory_tool_cues, &m.text.to_lowercase())
        {
            hz += rc.hazard_tool_context;
        }
        if !tainted && g.tau >= rc.hazard_trusted_tau_min && !forbidden {
            hz -= rc.hazard_trusted_discount;
        }
        let hazard_qc = clip01(hz);
        let hazard_q = clip01(hazard_qc + rc.hazard_risk_share * signals.total);

        // Query-conditioned taint penalty.
        let base = match g.taint {
            Taint::Clean => 0.0,
            Taint::Unverified => rc.taint_base_unverified,
            Taint::External => rc.taint_base_external,
            Taint::Poisoned => rc.taint_base_poisoned,
        };
        let taint_penalty = if base <= 0.0 {
            0.0
        } else {
            let mut tp = base;
            if sim >= rc.taint_similarity_min {
                tp += rc.taint_similar;
            }
            if sim >= rc.taint_similarity_high {
                tp += rc.taint_very_similar;
            }
            if forbidden {
                tp += rc.taint_instruction;
            }
            if query_risk > 0.0 {
                tp += rc.taint_query_risk;
            }
            if overlap >= rc.overlap_min {
                tp += rc.taint_overlap;
            }
            if g.tau >= rc.taint_trusted_tau_min && g.h <= rc.taint_trusted_h_max {
                tp -= rc.taint_trusted_discount;
            }
            clip01(tp)
        };
        let taint_q = clip01(
            taint_penalty + rc.taint_provenance_share * signals.provenance + rc.taint_lineage_share * signals.lineage,
        );
        let sv = if scope_violation(m, query.agent, query.task_class) { 1.0 } else { 0.0 };
        let score = sim + rc.beta_utility * g.q + rc.gamma_trust * g.tau
            - rc.lambda_hazard * hazard_q
            - rc.eta_taint * taint_q
            - rc.kappa_scope * sv
            - rc.mu_risk * signals.total;

        let evidence = cfg.mode == RuleMode::Evidence;
        let rule = if m.status != Status::Active || !m.scope.is_open() {
            Some(RetrievalRule::NotActive)
        } else if sv > 0.0 {
            Some(RetrievalRule::ScopeViolation)
        } else if evidence {
            // The product withholds only on evidence about this memory; its route lowers the
            // score (the ranking) and shows in its label, nothing more.
            if g.taint == Taint::Poisoned {
                Some(RetrievalRule::Poisoned)
            } else if forbidden && tainted {
                Some(RetrievalRule::TaintedDirective)
            } else if signals.trigger >= rc.firewall_trigger_min && tainted {
                Some(RetrievalRule::TriggerSensitive)
            } else if signals.answer_binding >= rc.firewall_binding_min
                && signals.self_claim >= rc.firewall_self_claim_min
                && tainted
            {
                Some(RetrievalRule::UnverifiedAnswerBinding)
            } else if m.source_agent_trust.is_some_and(|t| t < EVIDENCE_REPUTATION_MIN) {
                Some(RetrievalRule::LowReputation)
            } else {
                None
            }
        } else if hazard_q >= rc.firewall_hazard_min && g.tau <= rc.firewall_hazard_trust_max {
            Some(RetrievalRule::HazardLowTrust)
        } else if signals.total >= rc.firewall_risk_min {
            Some(RetrievalRule::HighRisk)
        } else if signals.trigger >= rc.firewall_trigger_min && g.tau < rc.firewall_trigger_trust_below {
            Some(RetrievalRule::TriggerSensitive)
        } else if signals.answer_binding >= rc.firewall_binding_min
            && signals.self_claim >= rc.firewall_self_claim_min
            && tainted
        {
            Some(RetrievalRule::UnverifiedAnswerBinding)
        } else if score < rc.min_score {
            Some(RetrievalRule::LowScore)
        } else {
            None
        };
        let parts = ScoreParts {
            similarity: sim,
            q: g.q,
            tau: g.tau,
            hazard_query_conditioned: hazard_qc,
            hazard_q,
            taint_penalty,
            taint_q,
            scope_violation: sv,
            risk: signals.total,
            query_context_risk: query_risk,
            overlap,
            score,
        };
        let (outcome, rule) = match rule {
            Some(r) => (RetrievalOutcome::Block, r),
            None => {
                survivors.push((index, score));
                (RetrievalOutcome::Drop, RetrievalRule::BelowTopN)
            }
        };
        decisions.push(RetrievalDecision {
            gate: GateKind::Retrieval,
            index,
            outcome,
            rule,
            error: None,
            signals: Some(signals),
            state: Some(snapshot(scorer, m)),
            parts: Some(parts),
            rank: None,
            thresholds: firewall_thresholds(scorer),
        });
    }

    // Best score first; ties keep input order (deterministic).
    survivors.sort_by(|a, b| match b.1.total_cmp(&a.1) {
        Ordering::Equal => a.0.cmp(&b.0),
        o => o,
    });
    let mut kept = Vec::new();
    for (rank, (index, _)) in survivors.iter().enumerate() {
        if let Some(d) = decisions.get_mut(*index) {
            d.rank = Some(rank);
            if rank < rc.keep_top_n {
                d.outcome = RetrievalOutcome::Keep;
                d.rule = RetrievalRule::TopN;
                kept.push(*index);
            }
        }
    }
    RetrievalResult { decisions, kept }
}

// ---------------------------------------------------------------------------------------------
// Promotion gate
// ---------------------------------------------------------------------------------------------

/// Where a promotion request wants the item to go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PromotionTarget {
    /// Stay private (the gate passes).
    Private,
    /// A team / shared store (the gate applies `B_p`).
    Team,
}

/// Promotion outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PromotionOutcome {
    /// Promotion goes ahead (or the request was not a team promotion).
    Allow,
    /// Blocked; the item is quarantined.
    Block,
}

/// The promotion rule that decided, `B_p` clauses in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PromotionRule {
    /// Not a team / shared request: passes.
    NotTeamRequest,
    /// The input could not be evaluated (fails closed: block).
    InvalidInput,
    /// The item is not active (memwarden's addition: a held-back item is never promoted).
    NotActive,
    /// `r ≥ .34`.
    HighRisk,
    /// `p ≥ .45 ∧ (b ≥ .25 ∨ s ≥ .25)`.
    ProvenanceClaim,
    /// Taint poisoned or external.
    TaintedSource,
    /// `h ≥ .5`.
    Hazard,
    /// `tau < .62`.
    LowTrust,
    /// Taint unverified and `s > 0 ∨ b > 0`.
    UnverifiedClaim,
    /// `B_p` false: promoted.
    Safe,
}

/// What the caller must apply to the memory.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PromotionEffect {
    /// New status (quarantined on a block).
    pub status: Status,
    /// New scope (team on an allowed team promotion).
    pub scope: LifecycleScope,
}

/// A promotion decision.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PromotionDecision {
    /// Always [`GateKind::Promotion`].
    pub gate: GateKind,
    /// The requested target.
    pub target: PromotionTarget,
    /// The outcome.
    pub outcome: PromotionOutcome,
    /// The rule that decided.
    pub rule: PromotionRule,
    /// Why the input could not be evaluated.
    pub error: Option<ScoreError>,
    /// The signals (no query).
    pub signals: Option<RiskBreakdown>,
    /// The guard state read.
    pub state: Option<GuardSnapshot>,
    /// The thresholds used.
    pub thresholds: PromotionGateConfig,
    /// What to apply.
    pub effect: PromotionEffect,
}

impl PromotionDecision {
    /// Apply the effect to a memory.
    pub fn apply(&self, m: &mut LifecycleMemory) {
        m.status = self.effect.status;
        m.scope = self.effect.scope;
    }
}

/// The promotion gate. Non-team requests pass. A team request is blocked — and the item
/// quarantined — when `B_p` holds: `r ≥ .34 ∨ (p ≥ .45 ∧ (b ≥ .25 ∨ s ≥ .25)) ∨ taint ∈
/// {poisoned, external} ∨ h ≥ .5 ∨ tau < .62 ∨ (taint = unverified ∧ (s > 0 ∨ b > 0))`.
pub fn promotion_gate(scorer: &RiskScorer, m: &LifecycleMemory, target: PromotionTarget) -> PromotionDecision {
    let c = &scorer.config().promotion;
    let decision = |outcome: PromotionOutcome,
                    rule: PromotionRule,
                    error: Option<ScoreError>,
                    signals: Option<RiskBreakdown>,
                    state: Option<GuardSnapshot>| {
        let effect = match outcome {
            PromotionOutcome::Block => {
                PromotionEffect { status: status_max(m.status, Status::Quarantined), scope: m.scope }
            }
            PromotionOutcome::Allow if target == PromotionTarget::Team && rule == PromotionRule::Safe => {
                PromotionEffect { status: m.status, scope: LifecycleScope::Team }
            }
            PromotionOutcome::Allow => PromotionEffect { status: m.status, scope: m.scope },
        };
        PromotionDecision {
            gate: GateKind::Promotion,
            target,
            outcome,
            rule,
            error,
            signals,
            state,
            thresholds: c.clone(),
            effect,
        }
    };
    if target != PromotionTarget::Team {
        return decision(PromotionOutcome::Allow, PromotionRule::NotTeamRequest, None, None, None);
    }
    let signals = match scorer.score(m) {
        Ok(s) => s,
        Err(e) => return decision(PromotionOutcome::Block, PromotionRule::InvalidInput, Some(e), None, None),
    };
    let g = effective_guard(m);
    let (p, s, b, r) = (signals.provenance, signals.self_claim, signals.answer_binding, signals.total);
    let evidence = scorer.config().mode == RuleMode::Evidence;
    let rule = if m.status != Status::Active || !m.scope.is_open() {
        PromotionRule::NotActive
    } else if evidence {
        // The product: a memory's route does not keep it private; its claims and poison do.
        if g.taint == Taint::Poisoned {
            PromotionRule::TaintedSource
        } else if p >= c.provenance_min && s >= c.claim_min {
            PromotionRule::ProvenanceClaim
        } else if signals.evidence.forbidden_directive {
            PromotionRule::Hazard
        } else if (g.taint != Taint::Clean && s > 0.0) || (s >= c.claim_min && g.successes == 0) {
            // A claim of verification that no outcome has confirmed yet stays with its writer.
            PromotionRule::UnverifiedClaim
        } else if m.source_agent_trust.is_some_and(|t| t < EVIDENCE_REPUTATION_MIN) {
            PromotionRule::LowTrust
        } else {
            PromotionRule::Safe
        }
    } else if r >= c.risk_min {
        PromotionRule::HighRisk
    } else if p >= c.provenance_min && (b >= c.claim_min || s >= c.claim_min) {
        PromotionRule::ProvenanceClaim
    } else if matches!(g.taint, Taint::Poisoned | Taint::External) {
        PromotionRule::TaintedSource
    } else if g.h >= c.hazard_min {
        PromotionRule::Hazard
    } else if g.tau < c.trust_min {
        PromotionRule::LowTrust
    } else if g.taint == Taint::Unverified && (s > 0.0 || b > 0.0) {
        PromotionRule::UnverifiedClaim
    } else {
        PromotionRule::Safe
    };
    let outcome = if rule == PromotionRule::Safe { PromotionOutcome::Allow } else { PromotionOutcome::Block };
    let state = Some(snapshot(scorer, m));
    decision(outcome, rule, None, Some(signals), state)
}

// ---------------------------------------------------------------------------------------------
// Cross-agent broker
// ---------------------------------------------------------------------------------------------

/// An agent asking to take an item into its context.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BrokerRequest<'a> {
    /// The receiving agent.
    pub agent: &'a PrincipalId,
    /// Its task class (`None` fails any task-class restriction).
    pub task_class: Option<&'a str>,
}

/// Broker outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BrokerOutcome {
    /// The item may enter the agent's context, with the carried restrictions.
    Admit,
    /// It may not.
    Block,
}

/// The broker rule that decided, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BrokerRule {
    /// A guard number is not finite (fails closed: block).
    InvalidInput,
    /// The agent is not the owner nor an allowed reader.
    AgentOutOfScope,
    /// The task class is not allowed.
    TaskClassOutOfScope,
    /// A restriction carried from upstream excludes the agent.
    CarriedAgentRestriction,
    /// A restriction carried from upstream excludes the task class.
    CarriedTaskRestriction,
    /// Status not active (or scope quarantined / blocked).
    NotActive,
    /// Admitted.
    Admitted,
}

/// A broker decision. It does not threshold `r`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BrokerDecision {
    /// Always [`GateKind::Broker`].
    pub gate: GateKind,
    /// The outcome.
    pub outcome: BrokerOutcome,
    /// The rule that decided.
    pub rule: BrokerRule,
    /// Why the input could not be evaluated.
    pub error: Option<ScoreError>,
    /// The receiving agent.
    pub agent: PrincipalId,
    /// Its task class.
    pub task_class: Option<String>,
    /// The guard state read.
    pub state: GuardSnapshot,
    /// The restrictions that travel with the item into the agent's context and into anything
    /// derived from it (the item's own merged with those it carried).
    pub carried: Restrictions,
    /// The guard state the receiving side must use (carried caps applied).
    pub effective_guard: GuardState,
}

/// The cross-agent broker (always on in memwarden): before an item enters another agent's
/// context, check scope (owner / readers, task classes, and every restriction carried from
/// upstream) and status, and hand the restrictions forward.
pub fn broker(scorer: &RiskScorer, m: &LifecycleMemory, req: &BrokerRequest<'_>) -> BrokerDecision {
    let carried = m.effective_restrictions();
    let finite = [m.guard.q, m.guard.tau, m.guard.h, m.guard.risk].iter().all(|v| v.is_finite())
        && m.source_agent_trust.is_none_or(f64::is_finite)
        && [m.carried.q_max, m.carried.tau_max, m.carried.h_min].iter().all(|v| v.is_none_or(f64::is_finite));
    let (rule, error) = if !finite {
        (BrokerRule::InvalidInput, Some(ScoreError::NonFinite { field: "guard" }))
    } else if !m.admits(req.agent) {
        (BrokerRule::AgentOutOfScope, None)
    } else if !task_class_admitted(&m.task_classes, req.task_class) {
        (BrokerRule::TaskClassOutOfScope, None)
    } else if !m.carried.readers.admits(req.agent) {
        (BrokerRule::CarriedAgentRestriction, None)
    } else if !task_class_admitted(&m.carried.task_classes, req.task_class) {
        (BrokerRule::CarriedTaskRestriction, None)
    } else if m.status != Status::Active || !m.scope.is_open() {
        (BrokerRule::NotActive, None)
    } else {
        (BrokerRule::Admitted, None)
    };
    let outcome = if rule == BrokerRule::Admitted { BrokerOutcome::Admit } else { BrokerOutcome::Block };
    BrokerDecision {
        gate: GateKind::Broker,
        outcome,
        rule,
        error,
        agent: req.agent.clone(),
        task_class: req.task_class.map(str::to_owned),
        state: snapshot(scorer, m),
        effective_guard: carried.clamp_guard(&sanitize_guard(&m.guard)),
        carried,
    }
}
