//! Signed checkpoints: a log size, its Merkle root and head, signed with Ed25519.

use ed25519_dalek::{Signature, Signer, SigningKey, VerifyingKey};
use serde::{Deserialize, Serialize};

use crate::CheckpointError;
use crate::merkle::Hash;

/// Domain-separation prefix of [`Checkpoint::signing_bytes`].
pub const CHECKPOINT_DOMAIN: &[u8] = b"memwarden-checkpoint-v1\n";

/// The state of a log at one size. Hashes are hex strings in serde form.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Checkpoint {
    /// Number of entries covered.
    pub size: u64,
    /// Merkle root of the first `size` leaves.
    #[serde(with = "hex_array")]
    pub root: Hash,
    /// Leaf hash of entry `size - 1` (`[0; 32]` when `size == 0`).
    #[serde(with = "hex_array")]
    pub head: Hash,
    /// When the checkpoint was taken (ms since the Unix epoch, caller's clock).
    pub time_ms: u64,
}

impl Checkpoint {
    /// The bytes that are signed: [`CHECKPOINT_DOMAIN`]
    /// (`b"memwarden-checkpoint-v1\n"`), then size (u64 BE), root (32 B),
    /// head (32 B), time_ms (u64 BE). Fixed length, so unambiguous.
    pub fn signing_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(CHECKPOINT_DOMAIN.len() + 8 + 32 + 32 + 8);
        out.extend_from_slice(CHECKPOINT_DOMAIN);
        out.extend_from_slice(&self.size.to_be_bytes());
        out.extend_from_slice(&self.root);
        out.extend_from_slice(&self.head);
        out.extend_from_slice(&self.time_ms.to_be_bytes());
        out
    }

    /// Sign this checkpoint with `key`.
    pub fn sign(self, key: &SigningKey) -> SignedCheckpoint {
        let signature = key.sign(&self.signing_bytes()).to_bytes();
        SignedCheckpoint {
            checkpoint: self,
            key: key.verifying_key().to_bytes(),
            signature,
        }
    }
}

/// A checkpoint with the signer's public key and an Ed25519 signature over
/// [`Checkpoint::signing_bytes`]. Key and signature are hex in serde form.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct SignedCheckpoint {
    /// What was signed.
    pub checkpoint: Checkpoint,
    /// The signer's Ed25519 public key.
    #[serde(with = "hex_array")]
    pub key: [u8; 32],
    /// Ed25519 signature over `checkpoint.signing_bytes()`.
    #[serde(with = "hex_array")]
    pub signature: [u8; 64],
}

impl SignedCheckpoint {
    /// Check that the checkpoint names `trusted_key` and carries a valid
    /// (strict, RFC 8032 with small-order rejection) signature by it.
    pub fn verify(&self, trusted_key: &VerifyingKey) -> Result<(), CheckpointError> {
        if self.key != trusted_key.to_bytes() {
            return Err(CheckpointError::UntrustedKey);
        }
        let signature = Signature::from_bytes(&self.signature);
        trusted_key
            .verify_strict(&self.checkpoint.signing_bytes(), &signature)
            .map_err(|_| CheckpointError::BadSignature)
    }
}

/// Domain-separation prefix of [`head_signing_bytes`].
pub const HEAD_DOMAIN: &[u8] = b"memwarden-head-v1\n";

/// Longest store id or log name a signed head may carry (they are length-prefixed).
pub const HEAD_NAME_BYTES_MAX: usize = 1024;

/// The bytes a store signs at every commit to vouch for one log's recorded head:
/// [`HEAD_DOMAIN`], then the store id and the log's name (each a u32 BE length and the bytes),
/// the size (u64 BE) and the head (32 B). Unambiguous, and bound to one store and one log, so
/// an entry appended without the key leaves a recorded head that no signature covers.
pub fn head_signing_bytes(store: &str, log: &str, size: u64, head: &Hash) -> Vec<u8> {
    debug_assert!(store.len() <= HEAD_NAME_BYTES_MAX && log.len() <= HEAD_NAME_BYTES_MAX);
    let mut out = Vec::with_capacity(HEAD_DOMAIN.len() + 8 + store.len() + log.len() + 8 + 32);
    out.extend_from_slice(HEAD_DOMAIN);
    for name in [store, log] {
        let len = u32::try_from(name.len()).unwrap_or(u32::MAX);
        out.extend_from_slice(&len.to_be_bytes());
        out.extend_from_slice(name.as_bytes());
    }
    out.extend_from_slice(&size.to_be_bytes());
    out.extend_from_slice(head);
    out
}

/// Sign a log's recorded head (see [`head_signing_bytes`]).
pub fn sign_head(key: &SigningKey, store: &str, log: &str, size: u64, head: &Hash) -> [u8; 64] {
    key.sign(&head_signing_bytes(store, log, size, head)).to_bytes()
}

/// Check a recorded head's signature (strict Ed25519). A missing or malformed signature is
/// [`CheckpointError::BadSignature`].
pub fn verify_head(
    key: &VerifyingKey,
    store: &str,
    log: &str,
    size: u64,
    head: &Hash,
    signature: Option<&[u8]>,
) -> Result<(), CheckpointError> {
    let bytes: [u8; 64] = signature
        .and_then(|s| s.try_into().ok())
        .ok_or(CheckpointError::BadSignature)?;
    if store.len() > HEAD_NAME_BYTES_MAX || log.len() > HEAD_NAME_BYTES_MAX {
        return Err(CheckpointError::BadSignature);
    }
    key.verify_strict(
        &head_signing_bytes(store, log, size, head),
        &Signature::from_bytes(&bytes),
    )
    .map_err(|_| CheckpointError::BadSignature)
}

/// Serde helpers: fixed-size byte arrays as lowercase hex strings.
mod hex_array {
    use serde::{Deserialize, Deserializer, Serializer, de::Error as _};

    pub fn serialize<S: Serializer, const N: usize>(
        bytes: &[u8; N],
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&hex::encode(bytes))
    }

    pub fn deserialize<'de, D: Deserializer<'de>, const N: usize>(
        deserializer: D,
    ) -> Result<[u8; N], D::Error> {
        let s = String::deserialize(deserializer)?;
        let mut out = [0u8; N];
        hex::decode_to_slice(&s, &mut out)
            .map_err(|e| D::Error::custom(format!("expected {} hex digits: {e}", N * 2)))?;
        Ok(out)
    }
}
