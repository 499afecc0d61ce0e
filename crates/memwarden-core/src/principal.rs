//! Principals: who acts, authenticated by the channel (API key, token, process identity), never by
//! content. A principal's integrity follows from its kind and, for tools, from the allow-list: there
//! is no free "trusted" flag a caller could set.

use crate::action::{ActionKind, Risk};
use crate::ids::{Domain, PrincipalId, TenantId};
use crate::label::{Integrity, Origin};
use crate::normalize::{NormValue, ValueKind};
use serde::{Deserialize, Serialize};

/// Most safety-relevant arguments one tool registration may declare.
pub const TOOL_VALUES_MAX: usize = 16;
/// Longest argument key of a tool registration, in bytes.
pub const TOOL_KEY_BYTES_MAX: usize = 128;

/// The four kinds of principal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PrincipalKind {
    /// A human user; can sign grants.
    User,
    /// An LLM agent.
    Agent,
    /// A tool or registry the system calls.
    Tool,
    /// An external resource: a web page, a document, an inbox, another user's message.
    Source,
}

impl PrincipalKind {
    /// Snake-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::User => "user",
            Self::Agent => "agent",
            Self::Tool => "tool",
            Self::Source => "source",
        }
    }
}

impl std::str::FromStr for PrincipalKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "user" => Ok(Self::User),
            "agent" => Ok(Self::Agent),
            "tool" => Ok(Self::Tool),
            "source" => Ok(Self::Source),
            _ => Err(format!("unknown principal kind {s:?} (expected user, agent, tool or source)")),
        }
    }
}

/// An authenticated actor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Principal {
    /// Id, unique within the tenant.
    pub id: PrincipalId,
    /// The tenant it belongs to; it can touch nothing outside it.
    pub tenant: TenantId,
    /// Its kind.
    pub kind: PrincipalKind,
    /// The organisation or registry behind it (tools and sources); used for independence.
    pub domain: Option<Domain>,
    /// Tools only: on the source-authority allow-list (a trusted tool or registry).
    pub allow_listed: bool,
    /// Users: the Ed25519 public key that signs their grants. Tools: the key that signs their
    /// outputs (a signed output is one the tool vouches for; see
    /// [`crate::authority::tool::ToolStatement`]).
    #[serde(with = "crate::serde_hex::opt32")]
    pub public_key: Option<[u8; 32]>,
    /// Tools only: what calling this tool does, as the system classes it (kind, risk, which
    /// arguments are safety-relevant). An action proposed for a tool is classed by this, never
    /// by the request; a tool without one is treated as a high-risk consequential action.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<ToolAction>,
}

/// One safety-relevant argument of a registered tool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ValueSpec {
    /// The argument's key (`payee_account`, `destination`, ...).
    pub key: String,
    /// How its values are compared.
    pub kind: ValueKind,
    /// Whether every call must carry it (a proposal that omits it is refused).
    #[serde(default = "yes")]
    pub required: bool,
}

fn yes() -> bool {
    true
}

/// What calling a tool does, fixed at the tool's registration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolAction {
    /// Answer, inform or act.
    pub kind: ActionKind,
    /// Its risk class.
    pub risk: Risk,
    /// The safety-relevant arguments.
    #[serde(default)]
    pub values: Vec<ValueSpec>,
    /// Whether the call moves money (its amount is then required and bound by grants).
    #[serde(default)]
    pub moves_money: bool,
    /// How many independent trusted domains must support a value that nothing untrusted pushes
    /// (default 1: the user's request, one trusted memory or one trusted attestation). A pushed
    /// value always needs the authority's `k`. 1..=[`SUPPORT_K_MAX`].
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub support_k: usize,
    /// When set, [`ToolAction::support_k`] applies only to calls whose amount is at least this
    /// (same currency, or none named here); smaller calls need one support. An amount in another
    /// currency than this one is held to `support_k`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub support_k_from_amount: Option<String>,
}

/// The most independent domains a registration may demand for an unpushed value.
pub const SUPPORT_K_MAX: usize = 8;

fn one() -> usize {
    1
}

fn is_one(n: &usize) -> bool {
    *n == 1
}

/// Why a tool registration is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolActionError {
    /// More arguments than [`TOOL_VALUES_MAX`].
    #[error("a tool declares at most {TOOL_VALUES_MAX} safety-relevant arguments")]
    TooManyValues,
    /// An empty or too long key.
    #[error("argument keys are 1..={TOOL_KEY_BYTES_MAX} bytes")]
    BadKey,
    /// A key declared twice.
    #[error("argument {0} is declared twice")]
    DuplicateKey(String),
    /// `support_k` out of range, or an unreadable `support_k_from_amount`.
    #[error("{0}")]
    BadSupport(String),
    /// Only tools carry an action class.
    #[error("only tools carry an action class")]
    NotATool,
}

impl ToolAction {
    /// The class an unregistered tool gets: a high-risk consequential action, every value it is
    /// called with safety-relevant.
    pub fn unregistered() -> Self {
        Self { kind: ActionKind::Act, risk: Risk::High, values: Vec::new(), moves_money: false, support_k: 1, support_k_from_amount: None }
    }

    /// A registration of `kind` and `risk` with these safety-relevant arguments, one support
    /// needed for an unpushed value (callers set the rest).
    pub fn new(kind: ActionKind, risk: Risk, values: Vec<ValueSpec>, moves_money: bool) -> Self {
        Self { kind, risk, values, moves_money, support_k: 1, support_k_from_amount: None }
    }

    /// How many independent trusted domains a value nothing untrusted pushes needs on a call
    /// with `amount` (see [`ToolAction::support_k`]). Never below 1; an unparsable threshold
    /// demands `support_k` (validation refuses one at registration).
    pub fn support_needed(&self, amount: Option<&NormValue>) -> usize {
        let k = self.support_k.clamp(1, SUPPORT_K_MAX);
        let Some(from) = &self.support_k_from_amount else { return k };
        let Ok(from) = NormValue::new(ValueKind::Amount, from) else { return k };
        let Some(amount) = amount else { return k };
        match (amount.amount_parts(), from.amount_parts()) {
            (Some((n, cur)), Some((t, tcur))) if tcur.is_none() || tcur == cur => {
                if n < t { 1 } else { k }
            }
            _ => k,
        }
    }

    /// Check the registration's limits.
    pub fn validate(&self) -> Result<(), ToolActionError> {
        if self.values.len() > TOOL_VALUES_MAX {
            return Err(ToolActionError::TooManyValues);
        }
        if self.support_k == 0 || self.support_k > SUPPORT_K_MAX {
            return Err(ToolActionError::BadSupport(format!("support_k must be 1..={SUPPORT_K_MAX}")));
        }
        if let Some(from) = &self.support_k_from_amount {
            NormValue::new(ValueKind::Amount, from).map_err(|e| ToolActionError::BadSupport(format!("support_k_from_amount: {e}")))?;
        }
        for (i, v) in self.values.iter().enumerate() {
            if v.key.is_empty() || v.key.len() > TOOL_KEY_BYTES_MAX {
                return Err(ToolActionError::BadKey);
            }
            if self.values[..i].iter().any(|w| w.key == v.key) {
                return Err(ToolActionError::DuplicateKey(v.key.clone()));
            }
        }
        Ok(())
    }

    /// Whether the action is consequential (the authority rule applies).
    pub fn is_consequential(&self) -> bool {
        self.kind == ActionKind::Act
    }
}

impl Principal {
    /// A principal of `kind` with no domain, key or action class (callers fill in the rest).
    pub fn new(id: PrincipalId, tenant: TenantId, kind: PrincipalKind) -> Self {
        Self { id, tenant, kind, domain: None, allow_listed: false, public_key: None, action: None }
    }

    /// Integrity level: users and allow-listed tools are trusted, agents are `agent`, sources and
    /// unlisted tools are untrusted.
    pub fn integrity(&self) -> Integrity {
        match self.kind {
            PrincipalKind::User => Integrity::Trusted,
            PrincipalKind::Agent => Integrity::Agent,
            PrincipalKind::Tool if self.allow_listed => Integrity::Trusted,
            PrincipalKind::Tool | PrincipalKind::Source => Integrity::Untrusted,
        }
    }

    /// The origin recorded for what this principal writes (authority M1).
    pub fn origin(&self) -> Origin {
        match self.kind {
            PrincipalKind::User => Origin::User,
            PrincipalKind::Agent => Origin::Agent,
            PrincipalKind::Tool if self.allow_listed => Origin::TrustedTool,
            PrincipalKind::Tool | PrincipalKind::Source => Origin::UntrustedExternal,
        }
    }

    /// The independence key for corroboration: the domain, or the principal itself when it has none.
    pub fn independence_key(&self) -> String {
        match &self.domain {
            Some(d) => format!("domain:{d}"),
            None => format!("principal:{}", self.id),
        }
    }
}
