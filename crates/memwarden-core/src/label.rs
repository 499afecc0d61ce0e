//! The integrity lattice and labels.
//!
//! `Integrity` is plain data (it can be read, compared and printed by anyone). A [`Label`] is the
//! integrity *bound to an item*: its field is private and the only constructors that can produce
//! anything above the bottom live in this crate's authority module ([`crate::authority`]). Outside
//! code can only *lower* a label ([`Label::meet`]) or make the bottom ([`Label::untrusted`]).

use serde::{Deserialize, Serialize};

/// Integrity levels, ordered `Untrusted < Agent < Trusted`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Integrity {
    /// External content: web pages, documents, other people's messages, unlisted tools.
    Untrusted = 0,
    /// An agent's own output.
    Agent = 1,
    /// The user, or an allow-listed tool computing from trusted inputs.
    Trusted = 2,
}

impl Integrity {
    /// Snake-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Untrusted => "untrusted",
            Self::Agent => "agent",
            Self::Trusted => "trusted",
        }
    }
    /// What an item at this level may do.
    pub fn act_class(self) -> ActClass {
        match self {
            Self::Untrusted => ActClass::None,
            Self::Agent => ActClass::Inform,
            Self::Trusted => ActClass::Act,
        }
    }
}

/// Where a memory came from, recorded by the write path from the authenticated channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    /// Written by a user.
    User,
    /// Written by an allow-listed tool.
    TrustedTool,
    /// Written by an agent.
    Agent,
    /// External content.
    UntrustedExternal,
}

impl Origin {
    /// The integrity an origin grants at most.
    pub fn integrity(self) -> Integrity {
        match self {
            Self::User | Self::TrustedTool => Integrity::Trusted,
            Self::Agent => Integrity::Agent,
            Self::UntrustedExternal => Integrity::Untrusted,
        }
    }
    /// Snake-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::User => "user",
            Self::TrustedTool => "trusted_tool",
            Self::Agent => "agent",
            Self::UntrustedExternal => "untrusted_external",
        }
    }
}

/// What an item may authorize: nothing, informing an answer, or a consequential action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ActClass {
    /// May not push any action.
    None,
    /// May inform an answer.
    Inform,
    /// May push a consequential action.
    Act,
}

/// An item's integrity label. Private field: raised only by [`crate::authority`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct Label(Integrity);

impl Label {
    /// The bottom of the lattice; anyone may make it.
    pub const fn untrusted() -> Self {
        Self(Integrity::Untrusted)
    }
    /// Crate-private: bind a label from an origin (authority M1). Only the authority module and
    /// the validated store decoder call this.
    pub(crate) const fn bind(origin: Origin) -> Self {
        Self(match origin {
            Origin::User | Origin::TrustedTool => Integrity::Trusted,
            Origin::Agent => Integrity::Agent,
            Origin::UntrustedExternal => Integrity::Untrusted,
        })
    }
    /// The greatest lower bound: never higher than either side.
    #[must_use]
    pub fn meet(self, other: Label) -> Label {
        let out = Label(self.0.min(other.0));
        debug_assert!(out <= self && out <= other);
        out
    }
    /// Lower this label to at most `level` (never raises).
    #[must_use]
    pub fn at_most(self, level: Integrity) -> Label {
        Label(self.0.min(level))
    }
    /// The integrity level.
    pub const fn integrity(self) -> Integrity {
        self.0
    }
    /// `f(label)`: none / inform / act.
    pub fn act_class(self) -> ActClass {
        self.0.act_class()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meet_is_the_minimum_and_never_raises() {
        let all = [Origin::User, Origin::TrustedTool, Origin::Agent, Origin::UntrustedExternal];
        for a in all {
            for b in all {
                let (la, lb) = (Label::bind(a), Label::bind(b));
                let m = la.meet(lb);
                assert!(m <= la && m <= lb);
                assert_eq!(m.integrity(), a.integrity().min(b.integrity()));
            }
        }
        assert_eq!(Label::bind(Origin::User).at_most(Integrity::Agent).integrity(), Integrity::Agent);
        assert_eq!(Label::untrusted().at_most(Integrity::Trusted), Label::untrusted());
    }
}
