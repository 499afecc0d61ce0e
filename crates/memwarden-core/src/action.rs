//! Action requests and decisions.

use crate::authority::grant::{GrantRequest, SignedGrant};
use crate::ids::ItemId;
use crate::normalize::ValueKind;
use serde::{Deserialize, Serialize};

/// Most safety-relevant values one action may carry.
pub const ACTION_VALUES_MAX: usize = 16;
/// Most context items one action may cite.
pub const ACTION_CONTEXT_MAX: usize = 256;
/// Most grants one action may present.
pub const ACTION_GRANTS_MAX: usize = 8;

/// What kind of thing the agent wants to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ActionKind {
    /// Show an answer (not consequential).
    Answer,
    /// Inform someone (a message, a disclosure).
    Inform,
    /// A consequential tool call: pay, wire, purchase, setting change, data send.
    Act,
}

/// Risk of the action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[allow(missing_docs)]
pub enum Risk {
    Low,
    Medium,
    High,
}

/// A safety-relevant value of an action (payee, account, amount, setting, destination ...).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActionValue {
    /// The value's key (`payee_account`, `destination`, ...); attestations are for a key.
    pub key: String,
    /// The raw value as the agent proposes it.
    pub value: String,
    /// How to compare it.
    pub kind: ValueKind,
    /// Items the agent declares the value came from (value-level provenance).
    #[serde(default)]
    pub sources: Vec<ItemId>,
}

/// An action the agent proposes before it runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ActionRequest {
    /// The tool to call (`pay`, `wire`, `purchase`, `setting_change`, `data_send`, ...).
    pub tool: String,
    /// Answer / inform / act.
    pub kind: ActionKind,
    /// Risk class.
    pub risk: Risk,
    /// Safety-relevant values.
    pub values: Vec<ActionValue>,
    /// The amount, when the action moves money (bound by grants).
    #[serde(default)]
    pub amount: Option<String>,
    /// Memory ids that were in the agent's context.
    #[serde(default)]
    pub context: Vec<ItemId>,
    /// User grants presented for this action.
    #[serde(default)]
    pub grants: Vec<SignedGrant>,
}

impl ActionRequest {
    /// Whether the request *claims* to be consequential. Decisions never use this: the system
    /// classes an action from its tool's registration ([`crate::authority::ActionClass`]).
    pub fn claims_consequential(&self) -> bool {
        self.kind == ActionKind::Act
    }
}

/// The five outcomes, ordered from least to most restrictive: the derived `Ord` is the one
/// precedence order every layer composes by (`max` is "the more restrictive wins").
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// Go ahead.
    Allow,
    /// Go ahead with the flagged content removed.
    Redact,
    /// Re-check the evidence before acting.
    Reverify,
    /// A human must confirm (with a grant binding what is named).
    AskUser,
    /// Refused.
    Block,
}

impl Decision {
    /// Snake-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Allow => "allow",
            Self::Redact => "redact",
            Self::Reverify => "reverify",
            Self::AskUser => "ask_user",
            Self::Block => "block",
        }
    }
}

/// Which rule produced a verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "rule")]
pub enum Rule {
    /// Not a consequential action: shown with provenance.
    NotConsequential,
    /// The authority layer is off: values were not checked.
    NoUntrustedPush,
    /// Every safety-relevant value is positively supported (a user's request or statement, or
    /// trusted principals of enough independent domains).
    Supported,
    /// Every value is supported, and a value that untrusted content pushes is corroborated by
    /// `k` independent domains (an elevation).
    Elevated,
    /// A value that untrusted content pushes lacks `k` independent trusted supports.
    Uncorroborated,
    /// A value nothing trusted supports (no untrusted item pushes it either).
    Unsupported,
    /// A value whose surface can hide what it is (invisible, bidi-control, mixed-script or
    /// compatibility characters): only a grant for its exact form releases it.
    SuspiciousValue {
        /// Which (`invisible_character`, `bidi_control`, `mixed_script`, `compatibility_form`).
        reason: String,
    },
    /// Every value some layer asked about is bound by a user grant this decision consumed.
    Granted,
    /// The lifecycle layer decided (its rule name).
    Lifecycle {
        /// The rule.
        gate_rule: String,
    },
    /// A presented grant was refused.
    GrantRefused {
        /// Stable code (`reused`, `expired`, `value_mismatch`, ...; see `GrantRefusal::code`).
        code: String,
        /// Why, in words.
        reason: String,
    },
    /// The request itself is unusable (bad value, unknown context id, limits).
    InvalidRequest {
        /// Why.
        reason: String,
    },
    /// The lineage layer's action gate decided (its rule name, e.g. `below_threshold`, and the
    /// cause on a supporting path, e.g. `revoked`, if any).
    Lineage {
        /// The lineage gate's rule.
        gate_rule: String,
        /// The cause it found, if any.
        cause: Option<String>,
    },
    /// An error occurred while deciding: deny.
    DecisionError {
        /// Why.
        reason: String,
    },
}

impl Rule {
    /// The rule's snake-case name (the `rule` tag of its JSON form).
    pub fn name(&self) -> &'static str {
        match self {
            Rule::NotConsequential => "not_consequential",
            Rule::NoUntrustedPush => "no_untrusted_push",
            Rule::Supported => "supported",
            Rule::Elevated => "elevated",
            Rule::Uncorroborated => "uncorroborated",
            Rule::Unsupported => "unsupported",
            Rule::SuspiciousValue { .. } => "suspicious_value",
            Rule::Granted => "granted",
            Rule::Lifecycle { .. } => "lifecycle",
            Rule::GrantRefused { .. } => "grant_refused",
            Rule::InvalidRequest { .. } => "invalid_request",
            Rule::Lineage { .. } => "lineage",
            Rule::DecisionError { .. } => "decision_error",
        }
    }
}

/// How a pushed value was accepted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "by")]
pub enum Acceptance {
    /// At least k independent trusted attestations.
    Corroborated {
        /// The counted attesters (one per independent domain).
        attesters: Vec<String>,
        /// Whether this decision created the elevation (false: it already existed).
        new: bool,
    },
    /// A user grant, consumed by this decision.
    Granted {
        /// The grant's nonce (hex).
        nonce: String,
    },
}

/// One safety-relevant value of an action and what supports or pushes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PushedValue {
    /// The key.
    pub key: String,
    /// The canonical (folded) value.
    pub value: String,
    /// The untrusted items that push it (empty: none).
    pub pushed_by: Vec<ItemId>,
    /// How a pushed value was accepted, if it was.
    pub accepted: Option<Acceptance>,
    /// The exact (lossless) form that a grant must bind.
    #[serde(default)]
    pub exact: String,
    /// Whether it is positively supported (before grants).
    #[serde(default)]
    pub supported: bool,
    /// What supports it (`user_request:…`, `user_statement:ID`, `trusted_memory:ID@domain`,
    /// `attestation:P@domain`, `elevation`).
    #[serde(default)]
    pub support: Vec<String>,
    /// Why its surface is suspicious, if it is.
    #[serde(default)]
    pub suspicion: Option<String>,
}

/// Who decided: a defense layer, or the composition itself (`engine`: a grant binding what the
/// layers asked, or a decision error). Serialised as its lower-case name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Layer {
    /// The authority layer (TMA-NM: origin, integrity labels, Algorithm 1).
    Authority,
    /// The lineage layer (MAP-Graph: provenance graph, `CanRead`, the action gate).
    Lineage,
    /// The lifecycle layer (MAPLE-Guard: write gate, read firewall, broker, promotion gate).
    Lifecycle,
    /// The composition of the layers' verdicts.
    Engine,
}

impl Layer {
    /// Its name (`authority`, `lineage`, `lifecycle`, `engine`).
    pub fn as_str(self) -> &'static str {
        match self {
            Layer::Authority => "authority",
            Layer::Lineage => "lineage",
            Layer::Lifecycle => "lifecycle",
            Layer::Engine => "engine",
        }
    }
}

impl std::fmt::Display for Layer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq<&str> for Layer {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

/// One layer's part in a composed decision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LayerSummary {
    /// The layer.
    pub layer: Layer,
    /// Its decision.
    pub decision: Decision,
    /// Its rule.
    pub rule: Rule,
}

/// A layer's verdict on an action.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    /// The outcome.
    pub decision: Decision,
    /// Which layer decided.
    pub layer: Layer,
    /// Which rule fired.
    pub rule: Rule,
    /// Human-readable cause, one line.
    pub cause: String,
    /// Supporting item ids.
    pub supporting: Vec<ItemId>,
    /// Affected (untrusted) ancestors.
    pub affected: Vec<ItemId>,
    /// Per pushed value.
    pub pushed: Vec<PushedValue>,
    /// For `AskUser`: what each grant must bind.
    pub ask: Vec<GrantRequest>,
    /// A threshold used, if any.
    pub threshold: Option<f64>,
    /// In a composed decision: every layer's decision and rule, in pipeline order.
    #[serde(default)]
    pub layers: Vec<LayerSummary>,
}

impl Verdict {
    /// One layer's verdict with its rule and cause, naming no memory yet (callers fill in
    /// `supporting`, `affected`, `pushed`, `ask` as the rule finds them).
    pub fn new(decision: Decision, layer: Layer, rule: Rule, cause: String) -> Self {
        Self { decision, layer, rule, cause, supporting: Vec::new(), affected: Vec::new(), pushed: Vec::new(), ask: Vec::new(), threshold: None, layers: Vec::new() }
    }
}
