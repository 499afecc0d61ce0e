//! Action-time decisions: the value analysis every layer reads, the authority layer's verdict,
//! and the one function that composes the layers' verdicts ([`compose`]).
//!
//! # Value-level support (the product rule)
//!
//! Every safety-relevant value of a consequential action must be *positively supported*, or the
//! verdict is `AskUser` naming the exact tuple a grant must bind. Support is, for a value `v`:
//!
//! * **the user's own request**: the acting principal is a user;
//! * **the user's own statement**: a cited memory of origin `user` and label `trusted` that
//!   carries exactly `v` (a label is the meet over the whole declared and observed ancestry, so
//!   a trusted memory never traces to untrusted content);
//! * **trusted principals**: cited trusted memories written by allow-listed tools that carry
//!   exactly `v`, and trusted attestations of exactly `v`, counted **once per independence
//!   domain** (two tools of one registry are one voice). One domain suffices for a value that no
//!   untrusted item pushes; a value that untrusted content pushes (it carries `v` after folding
//!   look-alikes, among the cited items and everything the session was handed) needs `k`
//!   independent domains (an elevation, recorded and monotone), never counting the writers of
//!   the pushing items;
//! * **an existing elevation** of exactly `v`;
//! * **a grant**: a valid, unused, user-signed grant for `(tool, key, exact v, amount)`, matched
//!   in [`compose`].
//!
//! Memories that do not carry an action's values neither block it nor lift it. A value with a
//! suspicious surface (invisible or bidi-control characters, mixed scripts, full-width forms) is
//! allowed only by a grant for its exact form (or the user acting directly).
//!
//! # Composition
//!
//! [`compose`] owns every precedence rule: `Block` from any layer wins and nothing relaxes it;
//! every `AskUser` names the tuples that release it, and a presented grant for each tuple that
//! any layer asked about turns all of them into `Allow` (the elevation exception: whichever
//! layer asked); a presented grant that fails a check blocks; otherwise the most restrictive of
//! `Reverify`, `Redact` and `Allow` wins. The table-driven test in this module is the
//! specification.

use super::grant::{GrantRefusal, GrantRequest, SignedGrant, GRANT_TTL_MS_MAX};
use super::{Attestation, Authority, DecisionOutcome, Elevation, GrantUse, Independence};
use crate::action::{ActionKind, ActionRequest, Decision, Layer, LayerSummary, PushedValue, Acceptance, Rule, Verdict, ACTION_CONTEXT_MAX, ACTION_GRANTS_MAX, ACTION_VALUES_MAX};
use crate::ids::{ItemId, PrincipalId, TenantId};
use crate::item::MemoryItem;
use crate::label::{Integrity, Origin};
use crate::normalize::{suspicion, NormValue, Suspicion, ValueKind};
use crate::principal::{Principal, PrincipalKind, ToolAction};
use crate::session::Observed;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// The pseudo-value key an action without safety-relevant values is asked and granted under
/// (its value is the tool's name): an unregistered tool called with no values needs a grant for
/// the call itself.
pub const TOOL_CALL_KEY: &str = "memwarden.tool";

/// How the system classes a proposed action: from the tool's registration, never the request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActionClass {
    /// The tool.
    pub tool: String,
    /// Its consequence.
    pub action: ToolAction,
    /// Whether the tool is registered (an unregistered one is a high-risk consequential action).
    pub registered: bool,
}

impl ActionClass {
    /// The class of a call to `tool`, given its registration (a tool principal's `action`).
    pub fn of(tool: &str, registration: Option<&ToolAction>) -> Self {
        match registration {
            Some(a) => Self { tool: tool.to_owned(), action: a.clone(), registered: true },
            None => Self { tool: tool.to_owned(), action: ToolAction::unregistered(), registered: false },
        }
    }
}

/// One positive support of a value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "by")]
pub enum Support {
    /// The acting principal is a user.
    UserRequest {
        /// The user.
        user: PrincipalId,
    },
    /// A cited memory of a user carries the value exactly.
    UserStatement {
        /// The memory.
        item: ItemId,
    },
    /// A cited trusted memory of an allow-listed tool carries it exactly.
    TrustedMemory {
        /// The memory.
        item: ItemId,
        /// Its writer's independence key.
        independence: String,
    },
    /// A trusted attestation of exactly the value.
    Attestation {
        /// The attester.
        attester: PrincipalId,
        /// Its independence key.
        independence: String,
    },
    /// An elevation of exactly the value already exists.
    Elevation {
        /// Its counted domains.
        attesters: Vec<String>,
    },
}

/// One safety-relevant value as every layer sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ValueFacts {
    /// The key.
    pub key: String,
    /// The normalised value.
    pub value: NormValue,
    /// Why its surface is suspicious, if it is.
    pub suspicion: Option<Suspicion>,
    /// Untrusted items that push it: cited or handed to the session, carrying it after folding
    /// look-alikes, or declared as its source.
    pub pushed_by: Vec<ItemId>,
    /// The session was handed more untrusted items than it lists: the value may come from one.
    pub pushed_by_unlisted: bool,
    /// Cited items that carry it after folding, whatever their label (its supporting memories,
    /// for the layers that look at supports).
    pub carriers: Vec<ItemId>,
    /// Cited items that carry it exactly.
    pub exact_carriers: Vec<ItemId>,
    /// Trusted cited items that carry it exactly but do not assert it (a warning, a negation, a
    /// question): they neither support nor push it.
    #[serde(default)]
    pub mentions: Vec<ItemId>,
    /// Positive supports found (before grants).
    pub support: Vec<Support>,
    /// Distinct independent domains among the trusted-principal supports.
    pub domains: Vec<String>,
    /// The supports suffice (before grants).
    pub supported: bool,
    /// The value is elevated for this action (an elevation exists, or this analysis reaches
    /// `k` domains for a pushed value): the other layers count it as trusted support.
    pub elevated: bool,
    /// Whether this analysis creates the elevation.
    pub new_elevation: bool,
    /// A pseudo-value for an action without values (key [`TOOL_CALL_KEY`]).
    pub pseudo: bool,
}

impl ValueFacts {
    /// Whether untrusted content pushes it.
    pub fn pushed(&self) -> bool {
        !self.pushed_by.is_empty() || self.pushed_by_unlisted
    }
    /// The tuple a grant for this value binds.
    pub fn ask(&self, tool: &str, amount: Option<&NormValue>) -> GrantRequest {
        GrantRequest { tool: tool.to_owned(), key: self.key.clone(), kind: self.value.kind, value: self.value.exact.clone(), amount: amount.map(|a| a.canonical.clone()) }
    }
}

/// The shared analysis of an action: the class, the values with their supports, the cited items.
/// Only [`Authority::analyse`] mints one (`non_exhaustive`, not deserialisable): it is what
/// [`Authority::decide_with`] computes the authority verdict from.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct ActionAnalysis {
    /// How the system classes the action.
    pub class: ActionClass,
    /// The acting principal.
    pub actor: PrincipalId,
    /// Whether the acting principal is a user.
    pub actor_is_user: bool,
    /// The amount, normalised (bound by grants).
    pub amount: Option<NormValue>,
    /// The safety-relevant values (a pseudo-value when a consequential action has none and its
    /// tool is unregistered).
    pub values: Vec<ValueFacts>,
    /// The cited items (context and declared sources), sorted.
    pub cited: Vec<ItemId>,
    /// Requests the system ignored because the registration decides them (kind, risk).
    pub overridden: Vec<String>,
}

impl ActionAnalysis {
    /// The action's kind as classed.
    pub fn kind(&self) -> ActionKind {
        self.class.action.kind
    }
    /// Whether it is consequential.
    pub fn consequential(&self) -> bool {
        self.class.action.is_consequential()
    }
    /// The tuples of every value of the action (what a grant releasing "the action" binds).
    pub fn every_ask(&self) -> Vec<GrantRequest> {
        self.values.iter().map(|v| v.ask(&self.class.tool, self.amount.as_ref())).collect()
    }
    /// The tuple of the pseudo-value of this action's tool call.
    pub fn call_ask(&self) -> GrantRequest {
        GrantRequest {
            tool: self.class.tool.clone(),
            key: TOOL_CALL_KEY.to_owned(),
            kind: ValueKind::Text,
            value: self.class.tool.clone(),
            amount: self.amount.as_ref().map(|a| a.canonical.clone()),
        }
    }
}

/// What a decision needs to know about the world. The engine resolves every id.
pub struct DecisionContext<'a> {
    /// The deciding tenant.
    pub tenant: &'a TenantId,
    /// The deciding store's id: a grant must name it.
    pub store: &'a str,
    /// Now (ms).
    pub now_ms: u64,
    /// The acting principal.
    pub actor: &'a Principal,
    /// The action's class (from the tool's registration).
    pub class: &'a ActionClass,
    /// The action's context items and declared value sources, resolved and readable, and any of
    /// their ancestors the actor may read (the engine resolves them along declared parents). An
    /// ancestor of a cited memory counts as cited: an untrusted one carrying a value pushes it,
    /// a trusted one carrying it exactly supports it — what citing it directly would do. Items
    /// here that are neither cited nor an ancestor of a cited item are ignored.
    pub items: &'a [&'a MemoryItem],
    /// Attestations for the action's values.
    pub attestations: &'a [Attestation],
    /// Existing elevations for the action's keys.
    pub elevations: &'a [Elevation],
    /// Principal lookup (grant signatures, the independence domain of a memory's writer).
    pub principal: &'a dyn Fn(&PrincipalId) -> Option<Principal>,
    /// Whether a grant nonce was already consumed.
    pub grant_used: &'a dyn Fn(&[u8; 16]) -> bool,
    /// What the proposing session was handed.
    pub session: &'a Observed,
    /// The session's witness items that could be resolved.
    pub session_witnesses: &'a [&'a MemoryItem],
    /// Untrusted memories near the cited ones (the engine: in their namespaces, in the actor's
    /// scope, whatever their status — a quarantined email still carries what it planted): one
    /// carrying a value pushes it, whether or not the session was handed it.
    pub neighbours: &'a [&'a MemoryItem],
}

fn invalid(reason: String) -> Rule {
    Rule::InvalidRequest { reason }
}

pub(super) fn verdict(decision: Decision, layer: Layer, rule: Rule, cause: String) -> Verdict {
    Verdict::new(decision, layer, rule, cause)
}

impl Authority {
    /// The shared analysis of `action` (deterministic, no I/O): the class, each value's pushers,
    /// carriers and positive supports. An unusable request is an error (which denies).
    pub fn analyse(&self, action: &ActionRequest, ctx: &DecisionContext<'_>) -> Result<ActionAnalysis, Rule> {
        if action.values.len() > ACTION_VALUES_MAX || action.context.len() > ACTION_CONTEXT_MAX || action.grants.len() > ACTION_GRANTS_MAX {
            return Err(invalid(format!(
                "action exceeds a limit ({ACTION_VALUES_MAX} values, {ACTION_CONTEXT_MAX} context ids, {ACTION_GRANTS_MAX} grants)"
            )));
        }
        if ctx.class.tool != action.tool {
            return Err(invalid("the action class is for another tool".into()));
        }
        let class = ctx.class;
        let item_of = |id: &ItemId| ctx.items.iter().find(|i| i.id == *id).copied();
        let mut cited: Vec<ItemId> = Vec::new();
        for id in action.context.iter().chain(action.values.iter().flat_map(|v| &v.sources)) {
            match item_of(id) {
                Some(i) if i.tenant == *ctx.tenant => cited.push(*id),
                _ => return Err(invalid(format!("context item {id} is unknown in this tenant"))),
            }
        }
        cited.sort();
        cited.dedup();
        // The cited memories' ancestors among the resolved items (a note derived from a trusted
        // record is supported by that record, and pushed by an untrusted one), to a fixed point.
        loop {
            let before = cited.len();
            for i in ctx.items {
                if i.tenant == *ctx.tenant && !cited.contains(&i.id) && ctx.items.iter().any(|c| cited.contains(&c.id) && c.parents.iter().any(|p| p.id == i.id)) {
                    cited.push(i.id);
                }
            }
            if cited.len() == before {
                break;
            }
        }
        cited.sort();
        cited.dedup();
        let mut overridden = Vec::new();
        if class.registered {
            if action.kind != class.action.kind {
                overridden.push(format!("kind {:?} (registered {:?})", action.kind, class.action.kind));
            }
            if action.risk != class.action.risk {
                overridden.push(format!("risk {:?} (registered {:?})", action.risk, class.action.risk));
            }
        }
        let amount = match &action.amount {
            Some(a) => Some(NormValue::new(ValueKind::Amount, a).map_err(|e| invalid(format!("amount: {e}")))?),
            None if class.action.moves_money => return Err(invalid(format!("tool {} moves money: the action must carry its amount", class.tool))),
            None => None,
        };
        // The safety-relevant values: the registered arguments (their kinds from the
        // registration), then any other value the request carries (more checks, never fewer).
        let mut wanted: Vec<(String, ValueKind, String, Vec<ItemId>)> = Vec::new();
        for spec in &class.action.values {
            let given: Vec<_> = action.values.iter().filter(|v| v.key == spec.key).collect();
            match given.as_slice() {
                [] if spec.required => return Err(invalid(format!("tool {} needs its safety-relevant argument {}", class.tool, spec.key))),
                [] => {}
                [v] => wanted.push((spec.key.clone(), spec.kind, v.value.clone(), v.sources.clone())),
                _ => return Err(invalid(format!("argument {} is given more than once", spec.key))),
            }
        }
        for v in &action.values {
            if class.action.values.iter().any(|s| s.key == v.key) {
                continue;
            }
            if wanted.iter().any(|(k, ..)| *k == v.key) {
                return Err(invalid(format!("argument {} is given more than once", v.key)));
            }
            wanted.push((v.key.clone(), v.kind, v.value.clone(), v.sources.clone()));
        }
        let consequential = class.action.is_consequential();
        let pseudo = consequential && wanted.is_empty() && !class.registered;
        if pseudo {
            wanted.push((TOOL_CALL_KEY.to_owned(), ValueKind::Text, class.tool.clone(), Vec::new()));
        }
        let actor_is_user = ctx.actor.kind == PrincipalKind::User && ctx.actor.tenant == *ctx.tenant;
        let mut values = Vec::with_capacity(wanted.len());
        for (key, kind, raw, sources) in wanted {
            let v = NormValue::new(kind, &raw).map_err(|e| invalid(format!("value {key}: {e}")))?;
            values.push(self.value_facts(key, raw, v, &sources, &cited, ctx, pseudo, amount.as_ref())?);
        }
        Ok(ActionAnalysis { class: class.clone(), actor: ctx.actor.id.clone(), actor_is_user, amount, values, cited, overridden })
    }

    #[allow(clippy::too_many_arguments)]
    fn value_facts(&self, key: String, raw: String, v: NormValue, sources: &[ItemId], cited: &[ItemId], ctx: &DecisionContext<'_>, pseudo: bool, amount: Option<&NormValue>) -> Result<ValueFacts, Rule> {
        let item_of = |id: &ItemId| ctx.items.iter().find(|i| i.id == *id).copied();
        let mut facts = ValueFacts {
            key,
            value: v.clone(),
            suspicion: suspicion(v.kind, &raw),
            pushed_by: Vec::new(),
            pushed_by_unlisted: false,
            carriers: Vec::new(),
            exact_carriers: Vec::new(),
            mentions: Vec::new(),
            support: Vec::new(),
            domains: Vec::new(),
            supported: false,
            elevated: false,
            new_elevation: false,
            pseudo,
        };
        let enforce = self.config.enforce;
        // Pushers: untrusted cited items carrying the value (folded) or declared as its source,
        // then untrusted items the session was handed that carry it.
        for id in cited {
            let Some(item) = item_of(id) else { continue };
            let carries = !pseudo && item.folded().carries(&v);
            if carries {
                facts.carriers.push(item.id);
                if item.folded().carries_exactly(&v) {
                    facts.exact_carriers.push(item.id);
                }
            }
            let declared = sources.contains(&item.id);
            if (carries || declared) && item.label.integrity() == Integrity::Untrusted {
                facts.pushed_by.push(item.id);
            }
        }
        if self.floor(ctx.session) < Integrity::Trusted && !pseudo {
            for w in ctx.session_witnesses {
                if w.tenant == *ctx.tenant && w.label.integrity() == Integrity::Untrusted && w.folded().carries(&v) && !facts.pushed_by.contains(&w.id) {
                    facts.pushed_by.push(w.id);
                }
            }
            // Witnesses the engine could not resolve (erased since) or never listed (overflow)
            // may have carried the value.
            facts.pushed_by_unlisted = ctx.session.overflowed() || ctx.session_witnesses.len() < ctx.session.witnesses().len();
        }
        if !pseudo {
            for n in ctx.neighbours {
                if n.tenant == *ctx.tenant && n.label.integrity() == Integrity::Untrusted && n.folded().carries(&v) && !facts.pushed_by.contains(&n.id) {
                    facts.pushed_by.push(n.id);
                }
            }
        }
        facts.pushed_by.sort();
        facts.pushed_by.dedup();
        if !enforce {
            // The authority layer is off: no value needs support (labels stay recorded).
            facts.supported = true;
            return Ok(facts);
        }
        let pushers: Vec<&MemoryItem> = facts
            .pushed_by
            .iter()
            .filter_map(|id| item_of(id).or_else(|| ctx.session_witnesses.iter().chain(ctx.neighbours).find(|w| w.id == *id).copied()))
            .collect();
        let pusher_writers: BTreeSet<&PrincipalId> = pushers.iter().map(|p| p.voucher()).collect();
        if ctx.actor.kind == PrincipalKind::User && ctx.actor.tenant == *ctx.tenant {
            facts.support.push(Support::UserRequest { user: ctx.actor.id.clone() });
        }
        if self.config.elevation
            && let Some(e) = ctx.elevations.iter().find(|e| e.tenant == *ctx.tenant && e.key == facts.key && e.value.same_exact(&v))
        {
            facts.support.push(Support::Elevation { attesters: e.attesters.clone() });
        }
        let mut domains: BTreeSet<String> = BTreeSet::new();
        let mut user_attested = false;
        if !pseudo {
            for id in &facts.exact_carriers {
                let Some(item) = item_of(id) else { continue };
                if item.label.integrity() != Integrity::Trusted || pusher_writers.contains(item.voucher()) {
                    continue;
                }
                // A warning, a negation or a question about the value mentions it without
                // asserting it: it never supports (issue 34.2).
                if !item.folded().asserts_exactly(&v) {
                    facts.mentions.push(item.id);
                    continue;
                }
                if item.origin == Origin::User {
                    facts.support.push(Support::UserStatement { item: item.id });
                    continue;
                }
                let Some(voucher) = (ctx.principal)(item.voucher()) else { continue };
                if voucher.kind == PrincipalKind::User {
                    // A user's report of a tool output is the user's statement.
                    facts.support.push(Support::UserStatement { item: item.id });
                    continue;
                }
                let independence = self.independence_of(&voucher);
                domains.insert(independence.clone());
                facts.support.push(Support::TrustedMemory { item: item.id, independence });
            }
            for a in ctx.attestations {
                let self_corroboration = pushers.iter().any(|p| *p.voucher() == a.attester || a.sources.contains(&p.id));
                if a.tenant == *ctx.tenant && a.key == facts.key && a.value.same_exact(&v) && a.label == Integrity::Trusted && !self_corroboration {
                    let independence = match self.config.independence {
                        Independence::DomainAware => a.independence.clone(),
                        Independence::Naive => format!("principal:{}", a.attester),
                    };
                    if (ctx.principal)(&a.attester).is_some_and(|p| p.kind == PrincipalKind::User) {
                        user_attested = true;
                    }
                    domains.insert(independence.clone());
                    facts.support.push(Support::Attestation { attester: a.attester.clone(), independence });
                }
            }
        }
        facts.domains = domains.into_iter().collect();
        let by_user = facts.support.iter().any(|s| matches!(s, Support::UserRequest { .. } | Support::UserStatement { .. }));
        let by_elevation = facts.support.iter().any(|s| matches!(s, Support::Elevation { .. }));
        let k = self.config.k.max(1);
        let corroborated = self.config.elevation && facts.domains.len() >= k;
        facts.elevated = by_elevation || (facts.pushed() && corroborated);
        facts.new_elevation = !by_elevation && facts.pushed() && corroborated;
        // Support in proportion to the push (issue 34.1): trusted principals other than the user
        // (allow-listed tools writing or attesting) count one witness per independent domain.
        // A value that untrusted content pushes needs `k` of them (TMA-NM Algorithm 1: two
        // compromised tools of one registry are one witness, issue 15 case 1); a value nothing
        // untrusted pushes needs what the tool's registration demands (default one).
        // A user's own trusted attestation of the exact value is the user's statement of it.
        let needed = ctx.class.action.support_needed(amount);
        debug_assert!((1..=crate::principal::SUPPORT_K_MAX).contains(&needed));
        let by_principals = if facts.pushed() { corroborated } else { facts.domains.len() >= needed || user_attested };
        let plain = by_user || by_elevation || by_principals;
        // A suspicious surface is released only by the user (or a grant for its exact form).
        facts.supported = plain && (facts.suspicion.is_none() || facts.support.iter().any(|s| matches!(s, Support::UserRequest { .. })));
        if pseudo {
            facts.supported = facts.support.iter().any(|s| matches!(s, Support::UserRequest { .. }));
        }
        Ok(facts)
    }

    fn independence_of(&self, p: &Principal) -> String {
        match self.config.independence {
            Independence::DomainAware => p.independence_key(),
            Independence::Naive => format!("principal:{}", p.id),
        }
    }

    /// The authority layer's verdict on an analysed action: `Allow` when every value is
    /// positively supported, otherwise `AskUser` naming the tuple of each unsupported value.
    pub fn verdict(&self, a: &ActionAnalysis) -> Verdict {
        let pushed: Vec<PushedValue> = a.values.iter().map(pushed_value).collect();
        let supporting = a.cited.clone();
        let affected: Vec<ItemId> = {
            let mut s: BTreeSet<ItemId> = BTreeSet::new();
            for v in &a.values {
                s.extend(v.pushed_by.iter().copied());
            }
            s.into_iter().collect()
        };
        let mut v = if !a.consequential() {
            verdict(Decision::Allow, Layer::Authority, Rule::NotConsequential, format!("{:?} is not a consequential action; shown with provenance", a.kind()))
        } else if !self.config.enforce {
            verdict(Decision::Allow, Layer::Authority, Rule::NoUntrustedPush, "the authority layer is off: values are not checked".into())
        } else {
            let missing: Vec<&ValueFacts> = a.values.iter().filter(|v| !v.supported).collect();
            if missing.is_empty() {
                let elevated = a.values.iter().any(|v| v.new_elevation || v.pushed());
                let rule = if elevated { Rule::Elevated } else { Rule::Supported };
                verdict(Decision::Allow, Layer::Authority, rule, "every safety-relevant value is positively supported".into())
            } else {
                let needed = a.class.action.support_needed(a.amount.as_ref());
                let why: Vec<String> = missing.iter().map(|v| describe_missing(v, self.config.k, needed)).collect();
                let rule = if let Some(s) = missing.iter().find_map(|v| v.suspicion) {
                    Rule::SuspiciousValue { reason: s.as_str().to_owned() }
                } else if missing.iter().any(|v| v.pushed()) {
                    Rule::Uncorroborated
                } else {
                    Rule::Unsupported
                };
                let mut out = verdict(
                    Decision::AskUser,
                    Layer::Authority,
                    rule,
                    format!(
                        "{}; a one-time user grant must bind tool {:?} and each value{}",
                        why.join("; "),
                        a.class.tool,
                        a.amount.as_ref().map(|m| format!(" with amount {}", m.canonical)).unwrap_or_default()
                    ),
                );
                out.ask = missing.iter().map(|v| v.ask(&a.class.tool, a.amount.as_ref())).collect();
                out
            }
        };
        v.supporting = supporting;
        v.affected = affected;
        v.pushed = pushed;
        v
    }

    /// The authority layer alone, start to end: analyse, verdict, compose with the presented
    /// grants. (The engine composes the layers of its preset through [`compose`]; this is the
    /// same path with one layer.)
    pub fn decide(&self, action: &ActionRequest, ctx: &DecisionContext<'_>) -> DecisionOutcome {
        match self.analyse(action, ctx) {
            Ok(a) => {
                let v = self.verdict(&a);
                compose(self, action, Some(&a), vec![v], ctx)
            }
            Err(rule) => DecisionOutcome::denied(rule),
        }
    }

    /// The authority verdict on `analysis` (which only [`Authority::analyse`] mints) composed
    /// with the other layers' verdicts (`layers`, in pipeline order) under the one precedence
    /// rule ([`compose`]). The other layers can only restrict: a verdict in `layers` that claims
    /// the authority layer is a decision error (block).
    ///
    /// Neither the analysis nor an outcome can be built elsewhere:
    ///
    /// ```compile_fail
    /// // `compose` is core's own: no caller composes caller-built verdicts.
    /// use memwarden_core::authority::compose;
    /// ```
    ///
    /// ```compile_fail
    /// // An analysis is minted by `Authority::analyse` only.
    /// let a = memwarden_core::authority::ActionAnalysis {
    ///     class: memwarden_core::authority::ActionClass::of("pay", None),
    ///     actor: memwarden_core::ids::PrincipalId::new("agent").unwrap(),
    ///     actor_is_user: true, amount: None, values: vec![], cited: vec![], overridden: vec![],
    /// };
    /// ```
    pub fn decide_with(&self, action: &ActionRequest, analysis: &ActionAnalysis, layers: Vec<Verdict>, ctx: &DecisionContext<'_>) -> DecisionOutcome {
        if layers.iter().any(|v| v.layer == Layer::Authority) {
            return DecisionOutcome::denied(Rule::DecisionError { reason: "a verdict claims the authority layer; only the authority gate decides for it".into() });
        }
        let mut all = Vec::with_capacity(layers.len() + 1);
        all.push(self.verdict(analysis));
        all.extend(layers);
        debug_assert!(all.iter().filter(|v| v.layer == Layer::Authority).count() == 1);
        compose(self, action, Some(analysis), all, ctx)
    }

    fn check_grant(&self, sg: &SignedGrant, action: &ActionRequest, amount: Option<&str>, ctx: &DecisionContext<'_>, seen: &mut BTreeSet<[u8; 16]>) -> Result<(), GrantRefusal> {
        let g = &sg.grant;
        let nonce = g.nonce_hex();
        if g.tenant != *ctx.tenant {
            return Err(GrantRefusal::ForeignTenant { nonce });
        }
        // Spent once across stores: the signed bytes name the store (issue 34.6).
        if g.store != ctx.store || g.store.is_empty() {
            return Err(GrantRefusal::ForeignStore { nonce, granted: g.store.clone(), store: ctx.store.to_owned() });
        }
        let user = (ctx.principal)(&g.user);
        let key = match &user {
            Some(p) if p.kind == PrincipalKind::User && p.tenant == *ctx.tenant => p.public_key,
            _ => None,
        };
        let Some(key) = key else {
            return Err(GrantRefusal::UnknownUser { nonce, user: g.user.to_string() });
        };
        if !sg.verify_signature(&key) {
            return Err(GrantRefusal::BadSignature { nonce, user: g.user.to_string() });
        }
        if g.expires_ms < g.issued_ms || g.expires_ms - g.issued_ms > GRANT_TTL_MS_MAX {
            return Err(GrantRefusal::BadLifetime { nonce });
        }
        // The value binds what the user saw: its canonical form must be the one its exact text
        // normalises to (issue 34.6), or the signed bytes could show one value and release another.
        match NormValue::new(g.value.kind, &g.value.exact) {
            Ok(n) if !g.value.exact.is_empty() && n.canonical == g.value.canonical => {}
            Ok(n) => {
                let why = format!("its value's canonical form {:?} is not the normal form {:?} of its exact text {:?}", g.value.canonical, n.canonical, g.value.exact);
                return Err(GrantRefusal::Malformed { nonce, why });
            }
            Err(e) => return Err(GrantRefusal::Malformed { nonce, why: format!("its value's exact text does not normalise: {e}") }),
        }
        if ctx.now_ms > g.expires_ms {
            return Err(GrantRefusal::Expired { nonce, expires_ms: g.expires_ms, now_ms: ctx.now_ms });
        }
        if !seen.insert(g.nonce) {
            return Err(GrantRefusal::Duplicate { nonce });
        }
        if (ctx.grant_used)(&g.nonce) {
            return Err(GrantRefusal::Reused { nonce });
        }
        if g.tool != action.tool {
            return Err(GrantRefusal::ToolMismatch { nonce, granted: g.tool.clone(), requested: action.tool.clone() });
        }
        if g.amount.as_deref() != amount {
            return Err(GrantRefusal::AmountMismatch { nonce, granted: g.amount.clone(), requested: amount.map(str::to_owned) });
        }
        Ok(())
    }
}

fn describe_missing(v: &ValueFacts, k: usize, needed: usize) -> String {
    let name = format!("{}={}", v.key, v.value.exact);
    if v.pseudo {
        return format!("tool call {} is not registered and nothing but the user can authorise it", v.value.exact);
    }
    if let Some(s) = v.suspicion {
        return format!("{name} has a suspicious surface ({})", s.as_str());
    }
    if v.pushed() {
        return format!("untrusted memory pushes {name} and it lacks {k} independent trusted supports (has {})", v.domains.len());
    }
    if needed > 1 && !v.domains.is_empty() {
        return format!("the tool's registration asks {needed} independent trusted supports for {name} (has {})", v.domains.len());
    }
    if !v.mentions.is_empty() {
        return format!("nothing trusted supports {name} (trusted memories mention it without asserting it: a warning, negation or question)");
    }
    format!("nothing trusted supports {name}")
}

fn pushed_value(v: &ValueFacts) -> PushedValue {
    PushedValue {
        key: v.key.clone(),
        value: v.value.canonical.clone(),
        pushed_by: v.pushed_by.clone(),
        accepted: if v.elevated && v.pushed() {
            Some(Acceptance::Corroborated { attesters: v.domains.clone(), new: v.new_elevation })
        } else {
            None
        },
        exact: v.value.exact.clone(),
        supported: v.supported,
        support: v.support.iter().map(support_name).collect(),
        suspicion: v.suspicion.map(|s| s.as_str().to_owned()),
    }
}

fn support_name(s: &Support) -> String {
    match s {
        Support::UserRequest { user } => format!("user_request:{user}"),
        Support::UserStatement { item } => format!("user_statement:{item}"),
        Support::TrustedMemory { item, independence } => format!("trusted_memory:{item}@{independence}"),
        Support::Attestation { attester, independence } => format!("attestation:{attester}@{independence}"),
        Support::Elevation { .. } => "elevation".to_owned(),
    }
}

/// Whether `g` binds `ask` (tool, key, exact value, amount).
fn binds(g: &SignedGrant, ask: &GrantRequest) -> bool {
    let g = &g.grant;
    g.tool == ask.tool && g.key == ask.key && g.value.kind == ask.kind && !g.value.exact.is_empty() && g.value.exact == ask.value && g.amount == ask.amount
}

/// Compose the layers' verdicts on one action into the final outcome. The one place that
/// decides precedence (see the module docs and the table-driven test):
///
/// 1. any `Block` wins (the first one in pipeline order is reported), and no grant is consumed;
/// 2. every `AskUser` names its tuples (one without is given the tuples of every value of the
///    action, so it is still resolvable); if grants are presented they are checked (a refused
///    one blocks, with its stable code) and matched to the tuples; when every tuple is bound, the
///    `AskUser`s are released and the matched grants consumed, otherwise the outcome is `AskUser`
///    naming what is left;
/// 3. otherwise the most restrictive of `Reverify`, `Redact`, `Allow` wins.
///
/// Elevations are recorded only when the outcome is `Allow`.
///
/// Crate-private: outside core an outcome is composed only through [`Authority::decide`] or
/// [`Authority::decide_with`], where the authority verdict is computed here from an analysis
/// only core mints, so no caller-built verdict can allow anything.
pub(crate) fn compose(authority: &Authority, action: &ActionRequest, analysis: Option<&ActionAnalysis>, verdicts: Vec<Verdict>, ctx: &DecisionContext<'_>) -> DecisionOutcome {
    let layers: Vec<LayerSummary> = verdicts.iter().map(|v| LayerSummary { layer: v.layer, decision: v.decision, rule: v.rule.clone() }).collect();
    let finish = |mut v: Verdict, elevations: Vec<Elevation>, uses: Vec<GrantUse>| {
        v.layers = layers.clone();
        DecisionOutcome { verdict: v, new_elevations: elevations, grant_uses: uses }
    };
    if verdicts.is_empty() {
        return DecisionOutcome::denied(Rule::DecisionError { reason: "no layer decided".into() });
    }
    // 1. Block wins.
    if let Some(b) = verdicts.iter().find(|v| v.decision == Decision::Block) {
        return finish(b.clone(), Vec::new(), Vec::new());
    }
    // 2. AskUser: the union of the tuples.
    let mut asks: Vec<GrantRequest> = Vec::new();
    let mut ask_verdicts: Vec<&Verdict> = Vec::new();
    for v in verdicts.iter().filter(|v| v.decision == Decision::AskUser) {
        ask_verdicts.push(v);
        let tuples = if v.ask.is_empty() {
            match analysis {
                Some(a) if !a.values.is_empty() => a.every_ask(),
                Some(a) => vec![a.call_ask()],
                None => Vec::new(),
            }
        } else {
            v.ask.clone()
        };
        for t in tuples {
            if !asks.contains(&t) {
                asks.push(t);
            }
        }
    }
    let mut grant_uses = Vec::new();
    let mut released = false;
    if !ask_verdicts.is_empty() {
        if asks.is_empty() {
            return finish(verdict(Decision::Block, Layer::Engine, Rule::DecisionError { reason: "an AskUser names nothing a grant could bind".into() }, "an AskUser names nothing a grant could bind".into()), Vec::new(), Vec::new());
        }
        let amount = analysis.and_then(|a| a.amount.as_ref()).map(|a| a.canonical.clone());
        let mut seen = BTreeSet::new();
        let mut bound = vec![false; asks.len()];
        for sg in &action.grants {
            if let Err(r) = authority.check_grant(sg, action, amount.as_deref(), ctx, &mut seen) {
                return finish(refused(r), Vec::new(), Vec::new());
            }
            match asks.iter().enumerate().find(|(i, t)| !bound[*i] && binds(sg, t)) {
                Some((i, _)) => {
                    bound[i] = true;
                    grant_uses.push(GrantUse { grant: sg.clone(), used_ms: ctx.now_ms });
                }
                None => {
                    let g = &sg.grant;
                    let requested = asks.iter().find(|t| t.key == g.key).map(|t| t.value.clone()).unwrap_or_default();
                    return finish(refused(GrantRefusal::ValueMismatch { nonce: g.nonce_hex(), key: g.key.clone(), granted: g.value.exact.clone(), requested }), Vec::new(), Vec::new());
                }
            }
        }
        if bound.iter().all(|b| *b) {
            released = true;
        } else {
            let left: Vec<GrantRequest> = asks.iter().zip(&bound).filter(|(_, b)| !**b).map(|(t, _)| t.clone()).collect();
            let first = ask_verdicts[0];
            let mut v = first.clone();
            v.ask = left;
            if ask_verdicts.len() > 1 {
                let named: Vec<&str> = ask_verdicts.iter().map(|v| v.layer.as_str()).collect();
                v.cause = format!("{} (asked by: {})", v.cause, named.join(", "));
            }
            return finish(v, Vec::new(), Vec::new());
        }
    }
    // 3. The most restrictive of what is left.
    let rest: Vec<&Verdict> = verdicts.iter().filter(|v| v.decision != Decision::AskUser).collect();
    let worst = rest.iter().max_by_key(|v| v.decision).copied();
    let elevations = |a: Option<&ActionAnalysis>| -> Vec<Elevation> {
        let Some(a) = a else { return Vec::new() };
        a.values
            .iter()
            .filter(|v| v.new_elevation)
            .map(|v| Elevation {
                tenant: ctx.tenant.clone(),
                key: v.key.clone(),
                value: v.value.clone(),
                attesters: v.domains.clone(),
                created_ms: ctx.now_ms,
                evidence: v.support.iter().filter_map(|s| match s {
                    Support::TrustedMemory { item, .. } | Support::UserStatement { item } => Some(*item),
                    _ => None,
                }).collect(),
            })
            .collect()
    };
    match worst {
        Some(w) if w.decision > Decision::Allow => finish(w.clone(), Vec::new(), Vec::new()),
        _ if released => {
            let mut v = verdict(Decision::Allow, Layer::Engine, Rule::Granted, "every asked value is bound by a user grant this decision consumes".into());
            if let Some(a) = analysis {
                v.supporting = a.cited.clone();
                v.pushed = a.values.iter().map(pushed_value).collect();
            }
            finish(v, elevations(analysis), grant_uses)
        }
        Some(w) => {
            // Report the authority layer's allow (it names the supports) when it is there.
            let v = verdicts.iter().find(|v| v.layer == Layer::Authority && v.decision == Decision::Allow).unwrap_or(w);
            finish(v.clone(), elevations(analysis), Vec::new())
        }
        None => DecisionOutcome::denied(Rule::DecisionError { reason: "no verdict left to compose".into() }),
    }
}

fn refused(r: GrantRefusal) -> Verdict {
    verdict(Decision::Block, Layer::Authority, Rule::GrantRefused { code: r.code().into(), reason: r.to_string() }, format!("grant refused: {r}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::action::Risk;
    use crate::normalize::ValueKind;

    fn v(layer: &str, d: Decision, asks: &[&str]) -> Verdict {
        let layer = if layer == "authority" { Layer::Authority } else { Layer::Lineage };
        let mut out = verdict(d, layer, Rule::Supported, String::new());
        out.ask = asks
            .iter()
            .map(|k| GrantRequest { tool: "pay".into(), key: (*k).into(), kind: ValueKind::Account, value: NormValue::new(ValueKind::Account, &format!("{k}-v")).unwrap().exact, amount: None })
            .collect();
        out
    }

    struct World {
        tenant: TenantId,
        user: Principal,
        key: ed25519_dalek::SigningKey,
    }

    fn world() -> World {
        let tenant = TenantId::new("t").unwrap();
        let key = ed25519_dalek::SigningKey::from_bytes(&[7; 32]);
        let mut user = Principal::new(PrincipalId::new("alice").unwrap(), tenant.clone(), PrincipalKind::User);
        user.public_key = Some(key.verifying_key().to_bytes());
        World { tenant, user, key }
    }

    fn grant(w: &World, key: &str, nonce: u8) -> SignedGrant {
        crate::authority::grant::Grant {
            tenant: w.tenant.clone(),
            store: "store-1".into(),
            user: w.user.id.clone(),
            tool: "pay".into(),
            key: key.into(),
            value: NormValue::new(ValueKind::Account, &format!("{key}-v")).unwrap(),
            amount: None,
            nonce: [nonce; 16],
            issued_ms: 0,
            expires_ms: 1000,
        }
        .sign(&w.key)
    }

    /// One row of the precedence table: the layers' verdicts, the grants presented, and the
    /// expected decision and number of grants consumed.
    fn check(verdicts: Vec<Verdict>, grants: &[(&str, u8)], expect: Decision, consumed: usize) {
        let w = world();
        let mut action = ActionRequest { tool: "pay".into(), kind: ActionKind::Act, risk: Risk::High, values: vec![], amount: None, context: vec![], grants: vec![] };
        action.grants = grants.iter().map(|(k, n)| grant(&w, k, *n)).collect();
        let names: Vec<String> = verdicts.iter().map(|v| format!("{}:{:?}", v.layer, v.decision)).collect();
        let out = in_context(&w, |ctx| compose(&Authority::default(), &action, None, verdicts, ctx));
        assert_eq!(out.verdict().decision, expect, "{names:?} with grants {grants:?}");
        assert_eq!(out.grant_uses().len(), consumed, "{names:?} with grants {grants:?}");
        if expect == Decision::AskUser {
            assert!(!out.verdict().ask.is_empty(), "an AskUser always names what a grant must bind");
        }
    }

    /// Run `f` in the context of an agent's unregistered `pay` with nothing cited.
    fn in_context<R>(w: &World, f: impl FnOnce(&DecisionContext<'_>) -> R) -> R {
        let class = ActionClass::of("pay", None);
        let lookup = |id: &PrincipalId| (id == &w.user.id).then(|| w.user.clone());
        let unused = |_: &[u8; 16]| false;
        let observed = Observed::clean();
        let agent = Principal::new(PrincipalId::new("agent").unwrap(), w.tenant.clone(), PrincipalKind::Agent);
        let ctx = DecisionContext {
            tenant: &w.tenant,
            store: "store-1",
            now_ms: 10,
            actor: &agent,
            class: &class,
            items: &[],
            attestations: &[],
            elevations: &[],
            principal: &lookup,
            grant_used: &unused,
            session: &observed,
            session_witnesses: &[],
            neighbours: &[],
        };
        f(&ctx)
    }

    #[test]
    fn precedence_table() {
        use Decision::*;
        // Every layer allows: allow.
        check(vec![v("authority", Allow, &[]), v("lineage", Allow, &[])], &[], Allow, 0);
        // Block wins over everything, and no grant is consumed.
        check(vec![v("authority", Allow, &[]), v("lineage", Block, &[])], &[], Block, 0);
        check(vec![v("authority", AskUser, &["a"]), v("lineage", Block, &[])], &[("a", 1)], Block, 0);
        // AskUser without a grant: AskUser.
        check(vec![v("authority", AskUser, &["a"]), v("lineage", Allow, &[])], &[], AskUser, 0);
        // A grant for the tuple releases it, whichever layer asked (the elevation exception).
        check(vec![v("authority", AskUser, &["a"]), v("lineage", Allow, &[])], &[("a", 1)], Allow, 1);
        check(vec![v("authority", Allow, &[]), v("lineage", AskUser, &["a"])], &[("a", 1)], Allow, 1);
        // Two layers asking about the same tuple: one grant releases both.
        check(vec![v("authority", AskUser, &["a"]), v("lineage", AskUser, &["a"])], &[("a", 1)], Allow, 1);
        // Two tuples need two grants; one leaves AskUser (and consumes nothing).
        check(vec![v("authority", AskUser, &["a"]), v("lineage", AskUser, &["b"])], &[("a", 1)], AskUser, 0);
        check(vec![v("authority", AskUser, &["a"]), v("lineage", AskUser, &["b"])], &[("a", 1), ("b", 2)], Allow, 2);
        // A grant for something nobody asked about is refused: block.
        check(vec![v("authority", AskUser, &["a"])], &[("z", 1)], Block, 0);
        // A duplicate grant is refused.
        check(vec![v("authority", AskUser, &["a"])], &[("a", 1), ("a", 1)], Block, 0);
        // Grants presented when nothing asks are not checked or consumed.
        check(vec![v("authority", Allow, &[])], &[("a", 1)], Allow, 0);
        // A released AskUser does not hide a Reverify or Redact of another layer.
        check(vec![v("authority", AskUser, &["a"]), v("lineage", Reverify, &[])], &[("a", 1)], Reverify, 0);
        check(vec![v("authority", Allow, &[]), v("lineage", Redact, &[]), v("lifecycle", Reverify, &[])], &[], Reverify, 0);
        check(vec![v("authority", Allow, &[]), v("lineage", Redact, &[])], &[], Redact, 0);
        // An AskUser that names nothing is given the action's tuples; with no analysis there are
        // none, and an unresolvable AskUser is a decision error: block.
        check(vec![v("lineage", AskUser, &[])], &[], Block, 0);
    }

    /// Issue 38.2: outside core an outcome is composed only over core's own authority verdict;
    /// a layer verdict claiming to be the authority layer's is a decision error, and the other
    /// layers can only restrict what the authority verdict allows.
    #[test]
    fn only_core_decides_for_the_authority_layer() {
        let w = world();
        let action = ActionRequest { tool: "pay".into(), kind: ActionKind::Act, risk: Risk::High, values: vec![], amount: None, context: vec![], grants: vec![] };
        in_context(&w, |ctx| only_core_decides(&action, ctx));
    }

    fn only_core_decides(action: &ActionRequest, ctx: &DecisionContext<'_>) {
        let authority = Authority::default();
        let analysis = authority.analyse(action, ctx).unwrap();
        let alone = authority.decide(action, ctx).verdict().decision;
        assert_eq!(alone, Decision::AskUser, "an unregistered payment naming no value asks");
        let forged = authority.decide_with(action, &analysis, vec![v("authority", Decision::Allow, &[])], ctx);
        assert_eq!(forged.verdict().decision, Decision::Block, "a forged authority verdict is refused: {}", forged.verdict().cause);
        assert!(matches!(forged.verdict().rule, Rule::DecisionError { .. }));
        let allowed = authority.decide_with(action, &analysis, vec![v("lineage", Decision::Allow, &[])], ctx);
        assert_eq!(allowed.verdict().decision, alone, "another layer's Allow does not lift the authority verdict");
        let stricter = authority.decide_with(action, &analysis, vec![v("lineage", Decision::Block, &[])], ctx);
        assert_eq!(stricter.verdict().decision, Decision::Block, "another layer may restrict");
    }
}
