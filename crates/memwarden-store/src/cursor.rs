//! Opaque page cursors (issue 39.5).
//!
//! A cursor names where a list stopped (a position in the list's stable order) and is
//! bound to the list it came from: the route, the tenant, the caller and the query (namespace,
//! filters). It is sealed with ChaCha20-Poly1305 under a key derived from the store's signing
//! key ([`Store::cursor_key`](crate::Store::cursor_key)), the binding as associated data, so a
//! cursor cannot be read (a position may name a memory the caller cannot read), forged, edited
//! or carried to another query: each is a [`CursorError`], never a wrong page. The nonce is
//! derived from the key, the binding and the position (the same position of the same query
//! seals to the same cursor, which reveals nothing the caller does not already hold).
//!
//! Wire form: `c1` (version), the route's tag as two hex digits, then the hex of nonce and
//! ciphertext.

use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{ChaCha20Poly1305, Key, Nonce};

/// Version prefix of every cursor this code makes.
const PREFIX: &str = "c1";
/// Bytes of a cursor's nonce.
const NONCE_BYTES: usize = 12;
/// Bytes of the AEAD tag.
const TAG_BYTES: usize = 16;
/// Longest position a cursor holds.
pub const CURSOR_POSITION_BYTES_MAX: usize = 256;
/// Longest cursor accepted on the wire (characters).
pub const CURSOR_CHARS_MAX: usize = PREFIX.len() + 2 + 2 * (NONCE_BYTES + CURSOR_POSITION_BYTES_MAX + TAG_BYTES);

/// The list a cursor pages through (its tag is in the cursor, in clear, so a cursor of another
/// route is told apart from a tampered one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CursorRoute {
    /// The memories of a namespace (`GET /v1/memories`, `/memories`, MCP list tools).
    Memories,
    /// A memory's versions (`GET /v1/memories/{id}/history`).
    History,
    /// The tenant's elevations.
    Elevations,
    /// The principals of a tenant (admin).
    Principals,
    /// API keys (admin).
    Keys,
    /// The decisions that cited a memory (`GET /v1/memories/{id}/decisions`).
    Decisions,
}

impl CursorRoute {
    fn tag(self) -> u8 {
        match self {
            Self::Memories => 1,
            Self::History => 2,
            Self::Elevations => 3,
            Self::Principals => 4,
            Self::Keys => 5,
            Self::Decisions => 6,
        }
    }

    /// The route's name (in error messages).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Memories => "memories",
            Self::History => "history",
            Self::Elevations => "elevations",
            Self::Principals => "principals",
            Self::Keys => "keys",
            Self::Decisions => "decisions",
        }
    }

    fn of_tag(t: u8) -> Option<Self> {
        [Self::Memories, Self::History, Self::Elevations, Self::Principals, Self::Keys, Self::Decisions].into_iter().find(|r| r.tag() == t)
    }
}

/// What a cursor is bound to: it opens only for the same route, tenant, caller and query.
#[derive(Debug, Clone, Copy)]
pub struct CursorScope<'a> {
    /// The list.
    pub route: CursorRoute,
    /// The caller's tenant (empty for the admin token's all-tenant lists).
    pub tenant: &'a str,
    /// The caller (a principal id, or `admin`).
    pub caller: &'a str,
    /// The query, canonically written (namespace, filters, a memory id).
    pub query: &'a str,
}

impl CursorScope<'_> {
    fn associated_data(&self) -> Vec<u8> {
        let mut ad = b"memwarden/cursor/v1".to_vec();
        ad.push(self.route.tag());
        for s in [self.tenant, self.caller, self.query] {
            ad.extend_from_slice(&(s.len() as u64).to_be_bytes());
            ad.extend_from_slice(s.as_bytes());
        }
        ad
    }
}

/// Why a cursor was refused. Every variant is the caller's error (HTTP 400 `invalid_cursor`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CursorError {
    /// Not a cursor this server makes (wrong version, length or characters).
    #[error("the cursor is malformed (pass back the next_cursor of a previous page unchanged)")]
    Malformed,
    /// A cursor of another list.
    #[error("the cursor belongs to the {found} list, not to {expected}")]
    OtherRoute {
        /// The route the cursor came from.
        found: &'static str,
        /// The route it was used on.
        expected: &'static str,
    },
    /// The cursor does not open: it was changed, or it belongs to another query (namespace,
    /// filters, memory), caller or tenant.
    #[error("the cursor was changed or belongs to another query (namespace, filters, caller); start again without a cursor")]
    OtherQuery,
    /// The cursor opened, but the place it names is gone from the list (a memory's history
    /// that was erased or cut since).
    #[error("the cursor's place is no longer in this list; start again without a cursor")]
    Stale,
    /// The position is longer than a cursor holds (a bug of the caller of [`seal`]).
    #[error("a cursor position holds at most {CURSOR_POSITION_BYTES_MAX} bytes")]
    PositionTooLong,
}

fn nonce_of(key: &[u8; 32], ad: &[u8], position: &[u8]) -> [u8; NONCE_BYTES] {
    let mut m = Vec::with_capacity(ad.len() + position.len() + 8);
    m.extend_from_slice(&(ad.len() as u64).to_be_bytes());
    m.extend_from_slice(ad);
    m.extend_from_slice(position);
    let mac = crate::keys::hmac_sha256(key, &m);
    let mut n = [0u8; NONCE_BYTES];
    n.copy_from_slice(&mac[..NONCE_BYTES]);
    n
}

/// The key cursors are sealed under, derived from the store's signing key.
pub fn cursor_key(signing: &ed25519_dalek::SigningKey) -> [u8; 32] {
    crate::keys::hmac_sha256(&signing.to_bytes(), b"memwarden/cursor-key/v1")
}

/// Seal `position` into a cursor bound to `scope`.
pub fn seal(key: &[u8; 32], scope: &CursorScope<'_>, position: &[u8]) -> Result<String, CursorError> {
    if position.len() > CURSOR_POSITION_BYTES_MAX {
        return Err(CursorError::PositionTooLong);
    }
    let ad = scope.associated_data();
    let nonce = nonce_of(key, &ad, position);
    let cipher = ChaCha20Poly1305::new(Key::from_slice(key));
    let ct = cipher.encrypt(Nonce::from_slice(&nonce), Payload { msg: position, aad: &ad }).map_err(|_| CursorError::PositionTooLong)?;
    debug_assert_eq!(ct.len(), position.len() + TAG_BYTES);
    let mut out = String::with_capacity(PREFIX.len() + 2 + 2 * (NONCE_BYTES + ct.len()));
    out.push_str(PREFIX);
    out.push_str(&hex::encode([scope.route.tag()]));
    out.push_str(&hex::encode(nonce));
    out.push_str(&hex::encode(ct));
    debug_assert!(out.len() <= CURSOR_CHARS_MAX);
    Ok(out)
}

/// Open a cursor made by [`seal`] for the same `scope`: the position it holds.
pub fn open(key: &[u8; 32], scope: &CursorScope<'_>, cursor: &str) -> Result<Vec<u8>, CursorError> {
    if cursor.len() > CURSOR_CHARS_MAX || !cursor.is_ascii() {
        return Err(CursorError::Malformed);
    }
    let body = cursor.strip_prefix(PREFIX).ok_or(CursorError::Malformed)?;
    // Lower-case hex only: one spelling per cursor.
    if body.bytes().any(|b| b.is_ascii_uppercase()) {
        return Err(CursorError::Malformed);
    }
    let bytes = hex::decode(body).map_err(|_| CursorError::Malformed)?;
    if bytes.len() < 1 + NONCE_BYTES + TAG_BYTES {
        return Err(CursorError::Malformed);
    }
    let found = CursorRoute::of_tag(bytes[0]).ok_or(CursorError::Malformed)?;
    if found != scope.route {
        return Err(CursorError::OtherRoute { found: found.as_str(), expected: scope.route.as_str() });
    }
    let (nonce, ct) = bytes[1..].split_at(NONCE_BYTES);
    let ad = scope.associated_data();
    let cipher = ChaCha20Poly1305::new(Key::from_slice(key));
    let position = cipher.decrypt(Nonce::from_slice(nonce), Payload { msg: ct, aad: &ad }).map_err(|_| CursorError::OtherQuery)?;
    // Only this code seals, and it derives the nonce: a cursor whose nonce is not the derived
    // one was not made here.
    if nonce != nonce_of(key, &ad, &position) {
        return Err(CursorError::OtherQuery);
    }
    Ok(position)
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: [u8; 32] = [7; 32];

    fn scope(query: &str) -> CursorScope<'_> {
        CursorScope { route: CursorRoute::Memories, tenant: "acme", caller: "alice", query }
    }

    #[test]
    fn a_cursor_opens_for_its_own_query_only() -> Result<(), CursorError> {
        let c = seal(&KEY, &scope("ns=a"), b"position")?;
        assert_eq!(open(&KEY, &scope("ns=a"), &c)?, b"position");
        assert_eq!(open(&KEY, &scope("ns=b"), &c), Err(CursorError::OtherQuery));
        let other_caller = CursorScope { caller: "bob", ..scope("ns=a") };
        assert_eq!(open(&KEY, &other_caller, &c), Err(CursorError::OtherQuery));
        let other_tenant = CursorScope { tenant: "evil", ..scope("ns=a") };
        assert_eq!(open(&KEY, &other_tenant, &c), Err(CursorError::OtherQuery));
        let other_route = CursorScope { route: CursorRoute::History, ..scope("ns=a") };
        assert!(matches!(open(&KEY, &other_route, &c), Err(CursorError::OtherRoute { .. })));
        assert_eq!(open(&[8; 32], &scope("ns=a"), &c), Err(CursorError::OtherQuery));
        Ok(())
    }

    #[test]
    fn every_changed_character_is_refused() -> Result<(), CursorError> {
        let c = seal(&KEY, &scope("ns=a"), b"position")?;
        for i in 0..c.len() {
            let mut b = c.clone().into_bytes();
            b[i] = if b[i] == b'0' { b'1' } else { b'0' };
            let t = String::from_utf8(b).map_err(|_| CursorError::Malformed)?;
            assert!(open(&KEY, &scope("ns=a"), &t).is_err(), "changed at {i}");
        }
        for bad in ["", "c1", "c2", "zz", "c1zz", &c[..c.len() - 2], &format!("{c}00"), &c.to_uppercase(), "c1é"] {
            assert!(open(&KEY, &scope("ns=a"), bad).is_err(), "{bad}");
        }
        assert_eq!(open(&KEY, &scope("ns=a"), &"0".repeat(CURSOR_CHARS_MAX + 1)), Err(CursorError::Malformed));
        Ok(())
    }

    #[test]
    fn positions_are_bounded() {
        assert_eq!(seal(&KEY, &scope(""), &[0; CURSOR_POSITION_BYTES_MAX + 1]), Err(CursorError::PositionTooLong));
        assert!(seal(&KEY, &scope(""), &[0; CURSOR_POSITION_BYTES_MAX]).is_ok());
    }
}
