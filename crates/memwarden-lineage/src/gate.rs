//! The action-time gate (C3) and decision composition.
//!
//! Once an action is proposed, the gate re-evaluates its supporting memories (the retrieved ones,
//! plus inter-agent context messages that are affected or that the agent was not permitted to
//! read) and applies the paper's four ordered rules with a threshold that depends on the action:
//! theta = 0.30 for an answer, 0.60 for a low/medium-risk non-answer action, 0.85 for a high-risk
//! non-answer action.
//!
//! 1. A high-risk action with any affected (or permission-invalid) supporting memory → **Block**.
//! 2. No supporting memory survives (is readable by the agent) for a medium- or high-risk action →
//!    **Reverify** (high risk: **AskUser**).
//! 3. A supporting path with a cause → by cause and action (most restrictive over all causes):
//!
//!    | cause | answer / inform (disclosures) | act, low/medium | act, high |
//!    | --- | --- | --- | --- |
//!    | revoked | Block | Block | Block |
//!    | poisoned | Block | Block | Block |
//!    | propagation pending | Reverify | Reverify | Reverify |
//!    | permission-invalid, private to someone else, erased | Redact | Reverify | Block |
//!    | untrusted | answer: – (rule 4 grades it); inform: Reverify (high: Block) | Reverify | Block |
//!
//! 4. The highest path trust among surviving supports is below theta → **Redact** (answer),
//!    **Reverify** (low/medium), **AskUser** (high); otherwise **Allow**. With no support at all, a
//!    low-risk action or an answer has nothing to object to: **Allow**.
//!
//! Any error (an unknown support id, too many supports) denies: **Block**.
//!
//! Ablation switches (`LineageConfig::containment`, `LineageConfig::action_gate`; benchmark only):
//! without containment rules 1 and 3 are skipped; without the gate every decision is Allow.

use crate::access::DenyReason;
use crate::config::LineageConfig;
use crate::model::{AffectedAncestor, AncestrySummary, Tally};
use crate::pathtrust::TrustBreakdown;
use crate::trust::Trust;
use memwarden_core::action::{ActionKind, Decision, Risk};
use memwarden_core::ids::{ItemId, PrincipalId};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// Compose many outcomes: the most restrictive wins (`Ord::max`: commutative, associative,
/// idempotent, Allow as identity), so composing the lineage gate with the other layers, in any
/// order, never relaxes any layer's decision; an empty list is an error and denies (Block).
///
/// How restrictive an outcome is: Allow < Redact < Reverify < AskUser < Block.
///
/// * **Allow** lets the action run as proposed.
/// * **Redact** still lets it run now, only without the flagged content: the least intervention.
/// * **Reverify** holds the action until the evidence is re-checked, which the system can do
///   without a human (fetch the source again, wait for a propagation): stricter than Redact, which
///   does not hold anything.
/// * **AskUser** holds the action until a human confirms it: stricter than Reverify because no
///   automatic re-check can release it.
/// * **Block** refuses it outright: nothing releases it.
///
/// So each step up removes a way for the action to proceed, and the order is total.
///
/// This is `memwarden-core`'s order on [`Decision`] (its derived `Ord`, "the more restrictive
/// wins" is `Ord::max`), not a second one: this crate defines none of its own.
pub fn compose(decisions: impl IntoIterator<Item = Decision>) -> Decision {
    decisions.into_iter().max().unwrap_or(Decision::Block)
}

/// The workflow's final decision (paper, appendix B.1): a restrictive backend decision is never
/// relaxed, and when the backend allows but the agent itself proposed a restrictive outcome, the
/// agent's stands.
pub fn final_decision(backend: Decision, agent_proposal: Option<Decision>) -> Decision {
    agent_proposal.map_or(backend, |p| backend.max(p))
}

/// What the gate is asked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GateRequest {
    /// The acting agent.
    pub agent: PrincipalId,
    /// Answer, inform (a disclosure) or act.
    pub kind: ActionKind,
    /// Risk class.
    pub risk: Risk,
    /// The retrieved memories that support the action.
    #[serde(default)]
    pub retrieved: Vec<ItemId>,
    /// Inter-agent messages in the agent's context; those affected or not readable by the agent
    /// count as support.
    #[serde(default)]
    pub context: Vec<ItemId>,
    /// Supports whose pushed values the authority layer elevated (k independent trusted
    /// attestations or a valid grant) for this action: their untrusted label is waived and their
    /// weakest source counts as trusted, for this decision only. Revocation, poison and permission
    /// causes are never waived.
    #[serde(default)]
    pub elevated: BTreeSet<ItemId>,
}

/// Where a support came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SupportOrigin {
    /// Retrieved for the action.
    Retrieved,
    /// An inter-agent context message.
    Context,
}

/// A cause the gate found on a supporting path, relative to the acting agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GateCause {
    /// A revoked item on the path.
    Revoked,
    /// A poisoned item on the path.
    Poisoned,
    /// A tightening propagation may still reach the support.
    PropagationPending,
    /// The agent may not read the support itself.
    PermissionInvalid,
    /// An item on the path is private to someone else (does not admit the agent).
    PrivateToOther,
    /// The support was erased.
    Erased,
    /// An untrusted item on the path.
    Untrusted,
    /// A support id the graph does not know.
    UnknownSupport,
    /// More supports than `gate_supports_max`.
    TooManySupports,
}

impl GateCause {
    /// Snake-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Revoked => "revoked",
            Self::Poisoned => "poisoned",
            Self::PropagationPending => "propagation_pending",
            Self::PermissionInvalid => "permission_invalid",
            Self::PrivateToOther => "private_to_other",
            Self::Erased => "erased",
            Self::Untrusted => "untrusted",
            Self::UnknownSupport => "unknown_support",
            Self::TooManySupports => "too_many_supports",
        }
    }
}

/// Which rule decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GateRule {
    /// The request could not be evaluated (deny).
    InvalidRequest,
    /// Rule 1: high risk with an affected support.
    HighRiskAffected,
    /// Rule 2: no support survives for a medium- or high-risk action.
    NoSurvivingSupport,
    /// Rule 3: a cause on a supporting path.
    PathCause,
    /// Rule 4: the best surviving support is below theta.
    BelowThreshold,
    /// Rule 4: the best surviving support reaches theta.
    Sufficient,
    /// No support at all for a low-risk action or an answer.
    NoSupportNeeded,
    /// The gate is switched off (`LineageConfig::action_gate`, an ablation): Allow.
    GateDisabled,
}

/// The gate's view of one support.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SupportEvaluation {
    /// The record.
    pub id: ItemId,
    /// Where it came from.
    pub origin: SupportOrigin,
    /// Why the agent may not read it, if it may not.
    pub denied: Option<DenyReason>,
    /// Its path trust for the agent (`None` for an unknown id).
    pub trust: Option<TrustBreakdown>,
    /// Causes on its path, relative to the agent.
    pub causes: Vec<GateCause>,
    /// Affected for the agent.
    pub affected: bool,
    /// Elevated by the authority layer for this action.
    pub elevated: bool,
}

/// A gate decision with everything the audit needs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GateDecision {
    /// The outcome.
    pub decision: Decision,
    /// The rule that fired.
    pub rule: GateRule,
    /// The cause behind it (rules 1 and 3, and invalid requests).
    pub cause: Option<GateCause>,
    /// One line for humans (ids only, never memory text).
    pub explanation: String,
    /// The supports evaluated (retrieved ones, then context ones that counted).
    pub supporting: Vec<ItemId>,
    /// Affected items on the supports' paths, smallest ids first, at most `affected_ids_max`.
    pub affected: Vec<AffectedAncestor>,
    /// How many further affected items were not listed.
    pub affected_rest: Tally,
    /// The threshold theta for this action.
    pub threshold: Trust,
    /// The highest path trust among surviving supports.
    pub max_trust: Option<Trust>,
    /// Per support.
    pub evaluations: Vec<SupportEvaluation>,
}

/// A gated action (an Action node).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ActionRecord {
    /// The action's id.
    pub id: ItemId,
    /// The acting agent.
    pub agent: PrincipalId,
    /// On whose behalf (`authorized_by`).
    pub on_behalf_of: Option<PrincipalId>,
    /// The tool.
    pub tool: String,
    /// Kind.
    pub kind: ActionKind,
    /// Risk.
    pub risk: Risk,
    /// The agent's own proposal, if any.
    pub agent_proposal: Option<Decision>,
    /// The gate's decision.
    pub decision: GateDecision,
    /// The final decision: the gate's, or the agent's proposal when more restrictive.
    pub final_decision: Decision,
    /// When.
    pub at_ms: u64,
}

/// What the gate needs to know about one support.
#[derive(Debug, Clone)]
pub struct SupportFacts<'a> {
    /// `CanRead(agent, support)`.
    pub read: Result<(), DenyReason>,
    /// Its ancestry summary.
    pub summary: &'a AncestrySummary,
    /// Its path trust for the agent.
    pub breakdown: TrustBreakdown,
    /// Its path trust with the weakest source counted as trusted (only for elevated supports).
    pub elevated_breakdown: Option<TrustBreakdown>,
}

/// theta for an action.
pub fn threshold(config: &LineageConfig, kind: ActionKind, risk: Risk) -> Trust {
    match (kind, risk) {
        (ActionKind::Answer, _) => config.theta_answer,
        (_, Risk::High) => config.theta_high,
        (_, Risk::Low | Risk::Medium) => config.theta_low_medium,
    }
}

fn is_disclosure(kind: ActionKind) -> bool {
    matches!(kind, ActionKind::Answer | ActionKind::Inform)
}

/// Rule 3's table: the outcome a cause calls for, if any.
pub fn cause_outcome(cause: GateCause, kind: ActionKind, risk: Risk) -> Option<Decision> {
    let high = risk == Risk::High;
    match cause {
        GateCause::Revoked | GateCause::Poisoned | GateCause::UnknownSupport | GateCause::TooManySupports => {
            Some(Decision::Block)
        }
        GateCause::PropagationPending => Some(Decision::Reverify),
        GateCause::PermissionInvalid | GateCause::PrivateToOther | GateCause::Erased => Some(if is_disclosure(kind) {
            Decision::Redact
        } else if high {
            Decision::Block
        } else {
            Decision::Reverify
        }),
        GateCause::Untrusted => match kind {
            ActionKind::Answer => None,
            ActionKind::Inform | ActionKind::Act => Some(if high { Decision::Block } else { Decision::Reverify }),
        },
    }
}

fn causes_of(facts: &SupportFacts<'_>, agent: &PrincipalId, elevated: bool) -> Vec<GateCause> {
    let mut out = Vec::new();
    let s = facts.summary;
    if s.revoked || matches!(facts.read, Err(DenyReason::Revoked | DenyReason::RevokedAncestor)) {
        out.push(GateCause::Revoked);
    }
    if s.poisoned {
        out.push(GateCause::Poisoned);
    }
    match facts.read {
        Err(DenyReason::PropagationPending) => out.push(GateCause::PropagationPending),
        Err(DenyReason::NotInScope | DenyReason::Unknown) => out.push(GateCause::PermissionInvalid),
        Err(DenyReason::NotInAncestorScope) => out.push(GateCause::PrivateToOther),
        Err(DenyReason::Erased) => out.push(GateCause::Erased),
        Ok(()) | Err(DenyReason::Revoked | DenyReason::RevokedAncestor) => {}
    }
    if !s.admits(agent) && !out.contains(&GateCause::PrivateToOther) && !s.revoked {
        out.push(GateCause::PrivateToOther);
    }
    if s.untrusted && !elevated {
        out.push(GateCause::Untrusted);
    }
    out.sort();
    out
}

fn deny(config: &LineageConfig, request: &GateRequest, cause: GateCause, explanation: String) -> GateDecision {
    GateDecision {
        decision: Decision::Block,
        rule: GateRule::InvalidRequest,
        cause: Some(cause),
        explanation,
        supporting: Vec::new(),
        affected: Vec::new(),
        affected_rest: Tally::Exact(0),
        threshold: threshold(config, request.kind, request.risk),
        max_trust: None,
        evaluations: Vec::new(),
    }
}

/// The gate, as a pure function of the request and a lookup of each support's facts.
pub fn decide<'a, F>(config: &LineageConfig, request: &GateRequest, lookup: F) -> GateDecision
where
    F: Fn(ItemId) -> Option<SupportFacts<'a>>,
{
    let theta = threshold(config, request.kind, request.risk);
    if !config.action_gate {
        return GateDecision {
            decision: Decision::Allow,
            rule: GateRule::GateDisabled,
            cause: None,
            explanation: "the action gate is switched off (ablation)".to_owned(),
            supporting: Vec::new(),
            affected: Vec::new(),
            affected_rest: Tally::Exact(0),
            threshold: theta,
            max_trust: None,
            evaluations: Vec::new(),
        };
    }
    let n = request.retrieved.len().saturating_add(request.context.len());
    if n > config.gate_supports_max {
        return deny(
            config,
            request,
            GateCause::TooManySupports,
            format!("{n} supports; the limit is {}", config.gate_supports_max),
        );
    }
    // Gather the support set.
    let mut evals: Vec<SupportEvaluation> = Vec::new();
    let mut summaries: Vec<&'a AncestrySummary> = Vec::new();
    let mut seen = BTreeSet::new();
    let tagged = request
        .retrieved
        .iter()
        .map(|id| (*id, SupportOrigin::Retrieved))
        .chain(request.context.iter().map(|id| (*id, SupportOrigin::Context)));
    for (id, origin) in tagged {
        if !seen.insert(id) {
            continue;
        }
        let Some(facts) = lookup(id) else {
            return deny(config, request, GateCause::UnknownSupport, format!("support {id} is not in the graph"));
        };
        let elevated = request.elevated.contains(&id);
        let causes = causes_of(&facts, &request.agent, elevated);
        let affected = !causes.is_empty();
        if origin == SupportOrigin::Context && facts.read.is_ok() && !affected {
            // A clean, readable context message is not part of the support set (paper: only
            // affected or permission-invalid messages are added).
            continue;
        }
        let trust = if elevated { facts.elevated_breakdown.or(Some(facts.breakdown)) } else { Some(facts.breakdown) };
        evals.push(SupportEvaluation { id, origin, denied: facts.read.err(), trust, causes, affected, elevated });
        summaries.push(facts.summary);
    }
    // Affected ancestors over all supports.
    let mut merged: BTreeMap<ItemId, AffectedAncestor> = BTreeMap::new();
    let mut exact = true;
    let mut largest = 0u64;
    for s in &summaries {
        for a in &s.affected {
            merged.entry(a.id).and_modify(|e| e.causes = e.causes.union(a.causes)).or_insert(*a);
        }
        exact &= s.affected_rest == Tally::Exact(0);
        largest = largest.max(s.affected.len() as u64 + s.affected_rest.at_least());
    }
    let union = merged.len() as u64;
    let affected: Vec<AffectedAncestor> = merged.into_values().take(config.affected_ids_max).collect();
    let kept = affected.len() as u64;
    let affected_rest =
        if exact { Tally::Exact(union - kept) } else { Tally::AtLeast(union.max(largest).saturating_sub(kept)) };
    let survivors: Vec<&SupportEvaluation> = evals.iter().filter(|e| e.denied.is_none()).collect();
    let max_trust = survivors.iter().filter_map(|e| e.trust.map(|t| t.rho)).max();
    let supporting: Vec<ItemId> = evals.iter().map(|e| e.id).collect();
    let make = |decision: Decision, rule: GateRule, cause: Option<GateCause>, explanation: String| GateDecision {
        decision,
        rule,
        cause,
        explanation,
        supporting: supporting.clone(),
        affected: affected.clone(),
        affected_rest,
        threshold: theta,
        max_trust,
        evaluations: evals.clone(),
    };
    // The most severe cause over all supports, with the support that carries it.
    let worst = |pred: &dyn Fn(GateCause) -> Option<Decision>| -> Option<(Decision, GateCause, ItemId)> {
        let mut best: Option<(Decision, GateCause, ItemId)> = None;
        for e in &evals {
            for c in &e.causes {
                if let Some(d) = pred(*c) {
                    let better = match best {
                        None => true,
                        Some((bd, bc, _)) => d > bd || (d == bd && *c < bc),
                    };
                    if better {
                        best = Some((d, *c, e.id));
                    }
                }
            }
        }
        best
    };

    // Rule 1 (skipped by the containment ablation, like rule 3).
    if config.containment
        && request.risk == Risk::High
        && let Some((_, cause, id)) = worst(&|_| Some(Decision::Block))
    {
        return make(
            Decision::Block,
            GateRule::HighRiskAffected,
            Some(cause),
            format!("rule 1: high-risk action supported by {id}, which is {} for {}", cause.as_str(), request.agent),
        );
    }
    // Rule 2.
    if matches!(request.risk, Risk::Medium | Risk::High) && survivors.is_empty() {
        let d = if request.risk == Risk::High { Decision::AskUser } else { Decision::Reverify };
        return make(
            d,
            GateRule::NoSurvivingSupport,
            None,
            format!("rule 2: no supporting memory survives for a {:?}-risk action", request.risk),
        );
    }
    // Rule 3.
    if config.containment
        && let Some((d, cause, id)) = worst(&|c| cause_outcome(c, request.kind, request.risk))
    {
        return make(
            d,
            GateRule::PathCause,
            Some(cause),
            format!("rule 3: support {id} has a {} path", cause.as_str()),
        );
    }
    // Rule 4.
    match max_trust {
        None => make(
            Decision::Allow,
            GateRule::NoSupportNeeded,
            None,
            "no supporting memory; nothing to object to".to_owned(),
        ),
        Some(t) if t < theta => {
            let d = match (request.kind, request.risk) {
                (ActionKind::Answer, _) => Decision::Redact,
                (_, Risk::High) => Decision::AskUser,
                (_, Risk::Low | Risk::Medium) => Decision::Reverify,
            };
            make(d, GateRule::BelowThreshold, None, format!("rule 4: best supporting trust {t} is below theta {theta}"))
        }
        Some(t) => make(
            Decision::Allow,
            GateRule::Sufficient,
            None,
            format!("rule 4: best supporting trust {t} reaches theta {theta}"),
        ),
    }
}
