//! Guard-state derivation, initial states and outcome feedback (spec "Write gate" last
//! paragraph and "Outcome feedback"; paper Eq. 4–5, Appendix A and D.2).
//!
//! Ranges: `tau`, `h` and source-agent trust live in `[0, 1]`; utility `q` lives in `[-1, 1]`
//! (an exponential average of rewards ±1; the after-failure initial state is negative). Every
//! function here returns values in those ranges, whatever it is given: a non-finite input is
//! replaced by the most restrictive value (`q` −1, `tau` 0, `h` 1, trust 0-but-floored).

use crate::config::{Adjust, InitialGuard, LifecycleConfig};
use crate::memory::{LifecycleMemory, LifecycleScope};
use crate::risk::{RiskBreakdown, RiskScorer, ScoreError, clip01};
use crate::rules::CompiledRules;
use memwarden_core::item::{GuardState, Readers, Taint};
use serde::{Deserialize, Serialize};

/// Clip `q` to `[-1, 1]`; NaN becomes −1.
pub fn clip_q(q: f64) -> f64 {
    if q.is_nan() { -1.0 } else { q.clamp(-1.0, 1.0) }
}

/// Clip trust to `[0, 1]`; NaN becomes 0.
pub fn clip_trust(t: f64) -> f64 {
    if t.is_nan() { 0.0 } else { t.clamp(0.0, 1.0) }
}

/// Clip hazard (or risk) to `[0, 1]`; NaN becomes 1.
pub fn clip_hazard(h: f64) -> f64 {
    clip01(h)
}

/// A guard state with every number brought into range (NaN to the most restrictive value).
pub fn sanitize_guard(g: &GuardState) -> GuardState {
    GuardState {
        q: clip_q(g.q),
        tau: clip_trust(g.tau),
        h: clip_hazard(g.h),
        taint: g.taint,
        successes: g.successes,
        failures: g.failures,
        risk: clip_hazard(g.risk),
        reports: g.reports.clone(),
    }
}

/// Which initial state a new memory starts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InitialCondition {
    /// Agent output after a successful task.
    AfterSuccess,
    /// Agent output after a failed task.
    AfterFailure,
    /// Correctness feedback is off.
    FeedbackOff,
    /// Dialogue or hand-off memory.
    DialogueHandoff,
}

/// The initial guard state for a condition (counts zero, no cached risk).
pub fn initial_guard(config: &LifecycleConfig, condition: InitialCondition) -> GuardState {
    let g: &InitialGuard = match condition {
        InitialCondition::AfterSuccess => &config.initial.after_success,
        InitialCondition::AfterFailure => &config.initial.after_failure,
        InitialCondition::FeedbackOff => &config.initial.feedback_off,
        InitialCondition::DialogueHandoff => &config.initial.dialogue_handoff,
    };
    GuardState {
        q: clip_q(g.q),
        tau: clip_trust(g.tau),
        h: clip_hazard(g.h),
        taint: g.taint,
        successes: 0,
        failures: 0,
        risk: 0.0,
        reports: Vec::new(),
    }
}

/// Why a derivation step applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DerivationStep {
    /// Post-task / benign consolidation source.
    PostTask,
    /// Direct-memory injection route.
    DirectInjection,
    /// Query-only or external source, or external taint.
    External,
    /// Cross-agent source.
    CrossAgent,
    /// Tool / web / environment observation source.
    Observation,
    /// Team scope.
    TeamScope,
    /// Exactly one allowed reader.
    SingleReader,
    /// Sensitive memory type.
    SensitiveType,
    /// Unverified taint.
    TaintUnverified,
    /// Poisoned taint.
    TaintPoisoned,
    /// Forbidden directive in the text.
    Instruction,
    /// More successes than failures.
    SuccessHistory,
    /// More failures than successes.
    FailureHistory,
    /// Source-agent trust away from .5.
    AgentTrust,
    /// Source-agent trust below the low bound.
    LowAgentTrust,
    /// `tau −= .25 max(p, l)`, `h += .55 r`.
    RiskProfile,
    /// Caps carried from upstream.
    CarriedRestrictions,
}

/// One applied step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AppliedStep {
    /// Which step.
    pub step: DerivationStep,
    /// Added to `tau`.
    pub tau: f64,
    /// Added to `h`.
    pub h: f64,
}

/// The record of a derivation (loggable).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DerivationRecord {
    /// Starting trust.
    pub start_tau: f64,
    /// Starting hazard.
    pub start_h: f64,
    /// Steps in the order applied.
    pub steps: Vec<AppliedStep>,
    /// The risk profile used by the final step (scored with the item's stored trust).
    pub risk: RiskBreakdown,
    /// Derived trust.
    pub tau: f64,
    /// Derived hazard.
    pub h: f64,
}

/// Derive trust and hazard from observable provenance: start at `tau` .5 / `h` .15, adjust by
/// source, taint, scope, type, instruction-likeness, outcome history and source-agent trust,
/// then `tau −= .25 · max(p, l)` and `h += .55 · r` with `r` scored on the item as stored, clip,
/// and finally apply the caps the item carries. The stored `tau` / `h` are replaced (as in the
/// authors' code); `q`, taint and counts are untouched.
pub fn derive_guard(scorer: &RiskScorer, m: &LifecycleMemory) -> Result<DerivationRecord, ScoreError> {
    let risk = scorer.score(m)?;
    let d = &scorer.config().derivation;
    let rules = scorer.rules();
    let source = m.source_descriptor();
    let mtype = m.memory_type.to_lowercase();
    let mut steps: Vec<AppliedStep> = Vec::new();
    let mut add = |step: DerivationStep, a: Adjust| steps.push(AppliedStep { step, tau: a.tau, h: a.h });
    let hazard_only = |h: f64| Adjust { tau: 0.0, h };

    if CompiledRules::any_marker(&rules.derive_post_task_markers, &source) {
        add(DerivationStep::PostTask, d.post_task);
    }
    if CompiledRules::any_marker(&rules.derive_direct_injection_markers, &source) {
        add(DerivationStep::DirectInjection, d.direct_injection);
    }
    if CompiledRules::any_marker(&rules.derive_external_markers, &source) || m.guard.taint == Taint::External {
        add(DerivationStep::External, d.external);
    }
    if CompiledRules::any_marker(&rules.derive_cross_agent_markers, &source) {
        add(DerivationStep::CrossAgent, d.cross_agent);
    }
    if CompiledRules::any_marker(&rules.derive_observation_markers, &source) {
        add(DerivationStep::Observation, d.observation);
    }
    if m.scope == LifecycleScope::Team {
        add(DerivationStep::TeamScope, hazard_only(d.team_scope_h));
    }
    // Exactly one allowed agent (the owner counts as one).
    if matches!(&m.effective_restrictions().readers, Readers::Only(set) if set.len() == 1) {
        add(DerivationStep::SingleReader, hazard_only(d.single_reader_h));
    }
    if CompiledRules::any_marker(&rules.derive_sensitive_type_markers, &mtype) {
        add(DerivationStep::SensitiveType, hazard_only(d.sensitive_type_h));
    }
    match m.guard.taint {
        Taint::Unverified => add(DerivationStep::TaintUnverified, d.taint_unverified),
        Taint::Poisoned => add(DerivationStep::TaintPoisoned, d.taint_poisoned),
        Taint::Clean | Taint::External => {}
    }
    if risk.evidence.forbidden_directive {
        add(DerivationStep::Instruction, d.instruction);
    }
    let (succ, fail) = (m.guard.successes, m.guard.failures);
    if succ > fail {
        let delta = f64::from(succ - fail);
        add(
            DerivationStep::SuccessHistory,
            Adjust {
                tau: (d.success_tau_step * delta).min(d.success_tau_cap),
                h: -(d.success_h_step * delta).min(d.success_h_cap),
            },
        );
    } else if fail > succ {
        let delta = f64::from(fail - succ);
        add(
            DerivationStep::FailureHistory,
            Adjust {
                tau: -(d.failure_tau_step * delta).min(d.failure_tau_cap),
                h: (d.failure_h_step * delta).min(d.failure_h_cap),
            },
        );
    }
    let agent = risk.evidence.effective_agent_trust;
    let agent_step = (d.agent_trust_slope * (agent - 0.5)).clamp(-d.agent_trust_cap, d.agent_trust_cap);
    if agent_step != 0.0 {
        add(DerivationStep::AgentTrust, Adjust { tau: agent_step, h: 0.0 });
    }
    if agent < d.low_agent_trust_below {
        add(DerivationStep::LowAgentTrust, hazard_only(d.low_agent_trust_h));
    }
    add(
        DerivationStep::RiskProfile,
        Adjust { tau: -d.final_tau_share * risk.provenance.max(risk.lineage), h: d.final_h_share * risk.total },
    );

    let mut tau = d.start_tau;
    let mut h = d.start_h;
    for s in &steps {
        tau += s.tau;
        h += s.h;
    }
    let (mut tau, mut h) = (clip_trust(tau), clip_hazard(h));
    let carried = &m.carried;
    let (capped_tau, capped_h) = (carried.tau_max.map_or(tau, |c| tau.min(c)), carried.h_min.map_or(h, |c| h.max(c)));
    if capped_tau != tau || capped_h != h {
        steps.push(AppliedStep { step: DerivationStep::CarriedRestrictions, tau: capped_tau - tau, h: capped_h - h });
        tau = clip_trust(capped_tau);
        h = clip_hazard(capped_h);
    }
    Ok(DerivationRecord { start_tau: d.start_tau, start_h: d.start_h, steps, risk, tau, h })
}

/// A task outcome reported by the caller (an evaluator, a user's thumbs-up, a task result).
/// memwarden never needs ground truth about which item is poisoned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The task that used the memory succeeded (`R = +1`).
    Success,
    /// It failed (`R = −1`).
    Failure,
}

/// What feedback updates: a memory's guard state and its source agent's reputation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FeedbackState {
    /// The memory's guard state.
    pub guard: GuardState,
    /// The source agent's stored reputation (`None` = default).
    pub source_agent_trust: Option<f64>,
}

/// The record of one feedback update (loggable).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FeedbackRecord {
    /// The outcome.
    pub outcome: Outcome,
    /// The reward `R` used.
    pub reward: f64,
    /// Before.
    pub before: FeedbackState,
    /// After.
    pub after: FeedbackState,
}

/// Apply one outcome: `q ← (1 − α) q + α R` (unless `feedback.update_q` is off), success
/// `tau += .03, h −= .02`, failure `tau −= .05, h += .05`, counts, and the source agent's
/// reputation `+.015 / −.020`; everything clipped (reputation to `[reputation_min, 1]`, so it
/// never reaches the stored-0-reads-as-default sentinel).
pub fn feedback(config: &LifecycleConfig, state: &FeedbackState, outcome: Outcome) -> FeedbackRecord {
    let f = &config.feedback;
    let g = sanitize_guard(&state.guard);
    let reward = match outcome {
        Outcome::Success => 1.0,
        Outcome::Failure => -1.0,
    };
    let q = if f.update_q { clip_q((1.0 - f.alpha) * g.q + f.alpha * reward) } else { g.q };
    let (tau, h, successes, failures) = match outcome {
        Outcome::Success => (g.tau + f.success_tau, g.h - f.success_h, g.successes.saturating_add(1), g.failures),
        Outcome::Failure => (g.tau - f.failure_tau, g.h + f.failure_h, g.successes, g.failures.saturating_add(1)),
    };
    let after_guard =
        GuardState { q, tau: clip_trust(tau), h: clip_hazard(h), taint: g.taint, successes, failures, risk: g.risk, reports: g.reports.clone() };
    let rep = reputation_feedback(config, state.source_agent_trust, outcome);
    FeedbackRecord {
        outcome,
        reward,
        before: state.clone(),
        after: FeedbackState { guard: after_guard, source_agent_trust: Some(rep) },
    }
}

/// The source agent's reputation after one outcome: the effective trust (default .5 for none or
/// a stored 0) `+.015` on success, `−.020` on failure, clipped to `[reputation_min, 1]`.
pub fn reputation_feedback(config: &LifecycleConfig, stored: Option<f64>, outcome: Outcome) -> f64 {
    let f = &config.feedback;
    let default = config.signals.agent_trust_default;
    let current = match stored {
        None => default,
        Some(0.0) => default,
        Some(x) if x.is_nan() => f.reputation_min,
        Some(x) => clip01(x),
    };
    let next = match outcome {
        Outcome::Success => current + f.reputation_success,
        Outcome::Failure => current - f.reputation_failure,
    };
    next.clamp(f.reputation_min, 1.0)
}
