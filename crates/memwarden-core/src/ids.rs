//! Identifiers: validated newtypes. Parsing is strict so that a malformed id is a clear error at
//! the edge, never a silent lookup miss deep inside.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

/// Why an identifier was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdError {
    /// The text is not 32 lowercase hex digits. Holds the rejected text's length in bytes, never
    /// the text (an error is echoed to callers and logs; the text may be a secret).
    #[error("malformed item id ({0} bytes): expected 32 hex digits or a UUID")]
    MalformedItemId(usize),
    /// The name is empty, too long or has a character outside `[a-z0-9._-]`.
    #[error("malformed {what} ({len} bytes): expected 1-{max} characters of [a-z0-9._-], starting with a letter or digit")]
    MalformedName {
        /// Which kind of name.
        what: &'static str,
        /// The rejected text's length in bytes (never the text itself).
        len: usize,
        /// Maximum length.
        max: usize,
    },
}

/// Length of a UUID's hyphenated text form.
const UUID_TEXT_BYTES: usize = 36;
/// Where a UUID's text form has its hyphens (and nowhere else).
const UUID_HYPHENS: [usize; 4] = [8, 13, 18, 23];

/// A memory item id: 128 bits, shown as 32 lowercase hex digits. The engine makes them from a
/// millisecond timestamp (high 48 bits) and randomness, so ids sort roughly by creation time.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ItemId([u8; 16]);

impl ItemId {
    /// Build an id from raw bytes.
    pub const fn from_bytes(bytes: [u8; 16]) -> Self {
        Self(bytes)
    }
    /// Build a time-ordered id from a millisecond timestamp and 10 random bytes.
    pub fn from_time_and_random(time_ms: u64, random: [u8; 10]) -> Self {
        let mut b = [0u8; 16];
        b[..6].copy_from_slice(&time_ms.to_be_bytes()[2..]);
        b[6..].copy_from_slice(&random);
        Self(b)
    }
    /// The raw bytes.
    pub const fn as_bytes(&self) -> &[u8; 16] {
        &self.0
    }
    /// Parse 32 hex digits (either case), or the same 128 bits in a UUID's hyphenated form
    /// (`8-4-4-4-12` hex digits, as Mem0 shows ids): one id, two spellings; it is always shown
    /// as 32 lowercase hex digits.
    pub fn parse(s: &str) -> Result<Self, IdError> {
        let mut out = [0u8; 16];
        let bad = || IdError::MalformedItemId(s.len());
        let digits: String = match s.len() {
            32 => s.to_owned(),
            UUID_TEXT_BYTES if UUID_HYPHENS.iter().all(|i| s.as_bytes().get(*i) == Some(&b'-')) => s.split('-').collect(),
            _ => return Err(bad()),
        };
        if digits.len() != 32 || hex::decode_to_slice(&digits, &mut out).is_err() {
            return Err(bad());
        }
        Ok(Self(out))
    }
}

impl fmt::Display for ItemId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&hex::encode(self.0))
    }
}
impl fmt::Debug for ItemId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ItemId({self})")
    }
}
impl std::str::FromStr for ItemId {
    type Err = IdError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}
impl Serialize for ItemId {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}
impl<'de> Deserialize<'de> for ItemId {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Self::parse(&s).map_err(serde::de::Error::custom)
    }
}

/// Longest accepted name (principal, tenant, namespace).
pub const NAME_BYTES_MAX: usize = 64;

fn valid_name(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= NAME_BYTES_MAX
        && (b[0].is_ascii_lowercase() || b[0].is_ascii_digit())
        && b.iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, b'.' | b'_' | b'-'))
}

macro_rules! name_type {
    ($(#[$doc:meta])* $name:ident, $what:literal) => {
        $(#[$doc])*
        #[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            /// Validate and wrap a name.
            pub fn new(s: &str) -> Result<Self, IdError> {
                if valid_name(s) {
                    Ok(Self(s.to_owned()))
                } else {
                    Err(IdError::MalformedName { what: $what, len: s.len(), max: NAME_BYTES_MAX })
                }
            }
            /// The name as text.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }
        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({:?})", stringify!($name), self.0)
            }
        }
        impl std::str::FromStr for $name {
            type Err = IdError;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                Self::new(s)
            }
        }
        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = String::deserialize(d)?;
                Self::new(&s).map_err(serde::de::Error::custom)
            }
        }
    };
}

name_type!(
    /// A principal's id, unique within its tenant.
    PrincipalId, "principal id"
);
name_type!(
    /// A tenant: a fully isolated customer or deployment.
    TenantId, "tenant"
);
name_type!(
    /// A namespace inside a tenant (a team, a project, an application).
    Namespace, "namespace"
);
name_type!(
    /// An organisation or registry behind a principal, used to judge independence.
    Domain, "domain"
);
name_type!(
    /// One authenticated session of a principal: the span over which its runtime keeps what the
    /// engine handed it (an agent's context window). Taint is tracked per session.
    SessionId, "session id"
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn item_id_round_trips_and_rejects_garbage() {
        let id = ItemId::from_time_and_random(1_700_000_000_000, [7; 10]);
        assert_eq!(ItemId::parse(&id.to_string()), Ok(id));
        for bad in ["", "xyz", "0123456789abcdef0123456789abcdeg", "0123456789abcdef0123456789abcdef0"] {
            assert!(ItemId::parse(bad).is_err(), "{bad}");
        }
    }

    /// Regression (issue 39.1): Mem0's UUID ids were "malformed item id".
    #[test]
    fn item_id_accepts_the_uuid_spelling_of_the_same_bits() {
        let plain = ItemId::parse("550e8400e29b41d4a716446655440000").unwrap();
        assert_eq!(ItemId::parse("550e8400-e29b-41d4-a716-446655440000"), Ok(plain));
        assert_eq!(ItemId::parse("550E8400-E29B-41D4-A716-446655440000"), Ok(plain));
        assert_eq!(plain.to_string(), "550e8400e29b41d4a716446655440000", "shown in one form");
        let bad = [
            "550e8400-e29b41d4-a716-446655440000-",
            "550e8400e-29b-41d4-a716-446655440000",
            "550e8400-e29b-41d4-a716-44665544000g",
            "-550e8400-e29b-41d4-a716-44665544000",
            "550e8400-e29b-41d4-a716--46655440000",
        ];
        for s in bad {
            assert!(ItemId::parse(s).is_err(), "{s}");
        }
    }

    #[test]
    fn names_are_strict() {
        assert!(PrincipalId::new("agent-1.mail_bot").is_ok());
        for bad in ["", "Agent", "-x", "a b", "ä", &"x".repeat(65)] {
            assert!(PrincipalId::new(bad).is_err(), "{bad}");
        }
    }
}
