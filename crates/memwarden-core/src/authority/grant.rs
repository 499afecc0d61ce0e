//! One-time user grants (authority M3, second path).
//!
//! A grant is signed (Ed25519) by a user principal's key and binds exactly one
//! `(tenant, tool, key, value, amount, nonce, expiry)` tuple. A dispatched action must match the
//! tuple exactly; the nonce is consumed by the decision that uses it and never accepted again.

use crate::ids::{PrincipalId, TenantId};
use crate::normalize::{NormValue, ValueKind};
use ed25519_dalek::{Signature, Signer, SigningKey, Verifier, VerifyingKey};
use serde::{Deserialize, Serialize};

/// Longest accepted lifetime of a grant: one day.
pub const GRANT_TTL_MS_MAX: u64 = 24 * 60 * 60 * 1000;

/// Longest store id a grant may name.
pub const GRANT_STORE_BYTES_MAX: usize = 128;

/// The tuple a user authorizes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grant {
    /// Tenant.
    pub tenant: TenantId,
    /// The store the grant is spent on (its `store_id`): a grant spent on one store is refused
    /// by every other, whatever tenant names and user keys they share. A grant signed before
    /// stores were named reads as naming none, and no store accepts it.
    #[serde(default)]
    pub store: String,
    /// The signing user.
    pub user: PrincipalId,
    /// The tool the action calls.
    pub tool: String,
    /// The value's key.
    pub key: String,
    /// The normalised value.
    pub value: NormValue,
    /// The canonical amount, if the action moves money.
    pub amount: Option<String>,
    /// One-time nonce.
    #[serde(with = "crate::serde_hex::b16")]
    pub nonce: [u8; 16],
    /// Issue time (ms).
    pub issued_ms: u64,
    /// Expiry (ms); the grant is refused after it.
    pub expires_ms: u64,
}

impl Grant {
    /// The bytes a user signs: a domain-separation tag and the canonical JSON of the tuple.
    pub fn signing_bytes(&self) -> Vec<u8> {
        let mut out = b"memwarden-grant-v2\n".to_vec();
        // Serializing a struct of strings and integers cannot fail.
        out.extend(serde_json::to_vec(self).unwrap_or_default());
        out
    }
    /// Sign with the user's key.
    pub fn sign(self, key: &SigningKey) -> SignedGrant {
        let signature = key.sign(&self.signing_bytes()).to_bytes();
        SignedGrant { grant: self, signature }
    }
    /// Nonce as hex.
    pub fn nonce_hex(&self) -> String {
        hex::encode(self.nonce)
    }
}

/// A grant with the user's signature.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignedGrant {
    /// The tuple.
    pub grant: Grant,
    /// Ed25519 signature over [`Grant::signing_bytes`].
    #[serde(with = "crate::serde_hex::b64")]
    pub signature: [u8; 64],
}

impl SignedGrant {
    /// Verify the signature against a user's public key.
    pub fn verify_signature(&self, public_key: &[u8; 32]) -> bool {
        let Ok(vk) = VerifyingKey::from_bytes(public_key) else {
            return false;
        };
        vk.verify(&self.grant.signing_bytes(), &Signature::from_bytes(&self.signature)).is_ok()
    }
}

/// What an `AskUser` verdict names: the tuple a grant must bind for this action to go through.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GrantRequest {
    /// Tool.
    pub tool: String,
    /// Key.
    pub key: String,
    /// Value kind.
    pub kind: ValueKind,
    /// Canonical value.
    pub value: String,
    /// Canonical amount.
    pub amount: Option<String>,
}

/// Why a grant was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GrantRefusal {
    /// Issued for another tenant.
    #[error("grant {nonce} belongs to another tenant")]
    ForeignTenant {
        /// Nonce.
        nonce: String,
    },
    /// Issued for another store.
    #[error("grant {nonce} is for store {granted:?}, this store is {store:?}")]
    ForeignStore {
        /// Nonce.
        nonce: String,
        /// The store the grant names.
        granted: String,
        /// This store.
        store: String,
    },
    /// The named user does not exist, is not a user, or has no key.
    #[error("grant {nonce} names {user}, who is not a user with a registered key in this tenant")]
    UnknownUser {
        /// Nonce.
        nonce: String,
        /// The named user.
        user: String,
    },
    /// The signature does not verify under the named user's key.
    #[error("grant {nonce} is not signed by {user}'s key")]
    BadSignature {
        /// Nonce.
        nonce: String,
        /// The named user.
        user: String,
    },
    /// Past its expiry.
    #[error("grant {nonce} expired at {expires_ms} ms (now {now_ms} ms)")]
    Expired {
        /// Nonce.
        nonce: String,
        /// Expiry.
        expires_ms: u64,
        /// Now.
        now_ms: u64,
    },
    /// Issued with a lifetime above the limit or an expiry before its issue time.
    #[error("grant {nonce} has an invalid lifetime")]
    BadLifetime {
        /// Nonce.
        nonce: String,
    },
    /// Already consumed.
    #[error("grant {nonce} was already used")]
    Reused {
        /// Nonce.
        nonce: String,
    },
    /// For a different tool.
    #[error("grant {nonce} is for tool {granted:?}, the action calls {requested:?}")]
    ToolMismatch {
        /// Nonce.
        nonce: String,
        /// Granted tool.
        granted: String,
        /// Requested tool.
        requested: String,
    },
    /// For a different value.
    #[error("grant {nonce} binds {key}={granted:?}, the action has {requested:?}")]
    ValueMismatch {
        /// Nonce.
        nonce: String,
        /// Key.
        key: String,
        /// Granted value.
        granted: String,
        /// Requested value.
        requested: String,
    },
    /// For a different amount.
    #[error("grant {nonce} binds amount {}, the action has {}", granted.as_deref().unwrap_or("none"), requested.as_deref().unwrap_or("none"))]
    AmountMismatch {
        /// Nonce.
        nonce: String,
        /// Granted amount.
        granted: Option<String>,
        /// Requested amount.
        requested: Option<String>,
    },
    /// Presented twice in one action.
    #[error("grant {nonce} is presented twice")]
    Duplicate {
        /// Nonce.
        nonce: String,
    },
    /// Its value's `canonical` form is not the normal form of its `exact` text (what a user is
    /// shown may then differ from what the grant releases), or the exact text is missing.
    #[error("grant {nonce} is malformed: {why}")]
    Malformed {
        /// Nonce.
        nonce: String,
        /// What is wrong.
        why: String,
    },
}

impl GrantRefusal {
    /// A stable machine-readable code for the refusal.
    pub fn code(&self) -> &'static str {
        match self {
            Self::ForeignTenant { .. } => "foreign_tenant",
            Self::ForeignStore { .. } => "foreign_store",
            Self::UnknownUser { .. } => "unknown_user",
            Self::BadSignature { .. } => "bad_signature",
            Self::Expired { .. } => "expired",
            Self::BadLifetime { .. } => "bad_lifetime",
            Self::Reused { .. } => "reused",
            Self::ToolMismatch { .. } => "tool_mismatch",
            Self::ValueMismatch { .. } => "value_mismatch",
            Self::AmountMismatch { .. } => "amount_mismatch",
            Self::Duplicate { .. } => "duplicate",
            Self::Malformed { .. } => "malformed",
        }
    }
}
