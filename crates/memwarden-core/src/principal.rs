//! Principals: who acts, authenticated by the channel (API key, token, process identity), never by
//! content. A principal's integrity follows from its kind and, for tools, from the allow-list: there
//! is no free "trusted" flag a caller could set.

use crate::ids::{Domain, PrincipalId, TenantId};
use crate::label::{Integrity, Origin};
use serde::{Deserialize, Serialize};

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
    /// Users only: the Ed25519 public key that signs their grants.
    #[serde(with = "crate::serde_hex::opt32")]
    pub public_key: Option<[u8; 32]>,
}

impl Principal {
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
