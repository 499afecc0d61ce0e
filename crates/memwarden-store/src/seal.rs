//! Sealed log fields: crypto-shredding of the values a verdict log entry keeps (issue 35.7).
//!
//! A decision's entry keeps what was decided (the action's values, amount and grants, and the
//! verdict's causes, pushed values and grant requests); the entries of the grants it spent and
//! the elevations it made keep values too. Those values may be a memory's: an account number a
//! note carried. The log cannot forget them (its entries are hashed into the chain), so each such
//! field is **sealed**: encrypted (ChaCha20-Poly1305) under a random key of its own operation,
//! kept in `seals`, with `seal_links` naming the memories the operation cited. Erasing a memory
//! deletes the keys of every seal linked to it, in the erasure's transaction (with
//! `secure_delete` on SQLite): the sealed fields become unreadable while the entries, their
//! hashes and the chain stay exactly as they were.
//!
//! A sealed field is the JSON object `{"sealed": <seal id>, "nonce": <hex>, "ct": <hex>}`; the
//! associated data binds it to its tenant, its seal and its path in the body, so a ciphertext
//! moved to another field, seal or tenant does not open. [`open_body`] puts the plain values
//! back where the key is kept, and `{"shredded": <seal id>}` where it was erased.
//!
//! Keys are not log state (no decision reads a sealed field): a deleted or changed key row can
//! only make a field unreadable, never change what the store decides, and a changed key fails
//! the tag check ([`SealError::DoesNotOpen`]).

use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{ChaCha20Poly1305, Key, Nonce};
use serde_json::{Map, Value};

/// Bytes of a seal id.
pub const SEAL_ID_BYTES: usize = 16;
/// Bytes of a seal key.
pub const SEAL_KEY_BYTES: usize = 32;
const NONCE_BYTES: usize = 12;
/// Most seals one body may name (a decision names one).
pub const SEALS_PER_BODY_MAX: usize = 16;

/// A seal's id (random).
pub type SealId = [u8; SEAL_ID_BYTES];
/// A seal's key (random).
pub type SealKey = [u8; SEAL_KEY_BYTES];

/// Why a sealed field could not be made or opened.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SealError {
    /// No randomness for a key or nonce.
    #[error("no randomness for a seal: {0}")]
    Random(String),
    /// The field is not valid JSON once opened, or would not encode.
    #[error("sealed field {0}: not JSON")]
    Json(String),
    /// The key does not open the field (the key row or the field was changed).
    #[error("sealed field {path} of seal {seal} does not open under its key")]
    DoesNotOpen {
        /// The field's path in the body.
        path: String,
        /// The seal id (hex).
        seal: String,
    },
    /// A sealed envelope that is not well formed.
    #[error("sealed field {0}: malformed envelope")]
    Malformed(String),
}

/// A fresh seal: its id and key.
pub fn fresh() -> Result<(SealId, SealKey), SealError> {
    let mut id = [0u8; SEAL_ID_BYTES];
    let mut key = [0u8; SEAL_KEY_BYTES];
    getrandom::fill(&mut id).map_err(|e| SealError::Random(e.to_string()))?;
    getrandom::fill(&mut key).map_err(|e| SealError::Random(e.to_string()))?;
    debug_assert_ne!(key, [0u8; SEAL_KEY_BYTES]);
    Ok((id, key))
}

fn aad(tenant: &str, seal: &SealId, path: &str) -> Vec<u8> {
    let mut a = Vec::with_capacity(tenant.len() + SEAL_ID_BYTES + path.len() + 2);
    a.extend_from_slice(tenant.as_bytes());
    a.push(0);
    a.extend_from_slice(seal);
    a.push(0);
    a.extend_from_slice(path.as_bytes());
    a
}

/// Replace each field of `body` named by a JSON pointer in `paths` (those present and not
/// null) with its sealed envelope under `(seal, key)`.
pub fn seal_paths(body: &mut Value, tenant: &str, seal: &SealId, key: &SealKey, paths: &[&str]) -> Result<(), SealError> {
    let cipher = ChaCha20Poly1305::new(Key::from_slice(key));
    for path in paths {
        debug_assert!(path.starts_with('/'));
        let Some(field) = body.pointer_mut(path) else { continue };
        if field.is_null() {
            continue;
        }
        let plain = serde_json::to_vec(field).map_err(|_| SealError::Json((*path).to_owned()))?;
        let mut nonce = [0u8; NONCE_BYTES];
        getrandom::fill(&mut nonce).map_err(|e| SealError::Random(e.to_string()))?;
        let ct = cipher
            .encrypt(Nonce::from_slice(&nonce), Payload { msg: &plain, aad: &aad(tenant, seal, path) })
            .map_err(|_| SealError::Malformed((*path).to_owned()))?;
        debug_assert_eq!(ct.len(), plain.len() + 16);
        let mut env = Map::new();
        env.insert("sealed".into(), Value::String(hex::encode(seal)));
        env.insert("nonce".into(), Value::String(hex::encode(nonce)));
        env.insert("ct".into(), Value::String(hex::encode(ct)));
        *field = Value::Object(env);
    }
    Ok(())
}

/// A sealed field's parts: seal id, nonce, ciphertext.
type Envelope = (SealId, Vec<u8>, Vec<u8>);

/// The envelope `v` is, if it is one.
fn envelope(v: &Value, path: &str) -> Result<Option<Envelope>, SealError> {
    let Value::Object(m) = v else { return Ok(None) };
    if m.len() != 3 || !m.contains_key("sealed") || !m.contains_key("nonce") || !m.contains_key("ct") {
        return Ok(None);
    }
    let bad = || SealError::Malformed(path.to_owned());
    let hex_of = |k: &str| m.get(k).and_then(Value::as_str).and_then(|s| hex::decode(s).ok()).ok_or_else(bad);
    let seal = SealId::try_from(hex_of("sealed")?.as_slice()).map_err(|_| bad())?;
    let nonce = hex_of("nonce")?;
    if nonce.len() != NONCE_BYTES {
        return Err(bad());
    }
    Ok(Some((seal, nonce, hex_of("ct")?)))
}

/// Every seal a body names, each once, in the order first met.
pub fn seals_of(body: &Value) -> Vec<SealId> {
    let mut out = Vec::new();
    walk(body, "", &mut |v, path| {
        if let Ok(Some((seal, _, _))) = envelope(v, path)
            && !out.contains(&seal)
            && out.len() < SEALS_PER_BODY_MAX
        {
            out.push(seal);
        }
    });
    debug_assert!(out.len() <= SEALS_PER_BODY_MAX);
    out
}

fn walk(v: &Value, path: &str, f: &mut dyn FnMut(&Value, &str)) {
    f(v, path);
    match v {
        Value::Object(m) => m.iter().for_each(|(k, x)| walk(x, &format!("{path}/{}", escape(k)), f)),
        Value::Array(a) => a.iter().enumerate().for_each(|(i, x)| walk(x, &format!("{path}/{i}"), f)),
        _ => {}
    }
}

/// A JSON pointer reference token for `key` (RFC 6901).
fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// `body` with each sealed field opened: its plain value where `key_of` has the seal's key,
/// `{"shredded": <seal id>}` where it has none (erased).
pub fn open_body(body: &Value, tenant: &str, key_of: &dyn Fn(&SealId) -> Option<SealKey>) -> Result<Value, SealError> {
    open_at(body, "", tenant, key_of)
}

fn open_at(v: &Value, path: &str, tenant: &str, key_of: &dyn Fn(&SealId) -> Option<SealKey>) -> Result<Value, SealError> {
    if let Some((seal, nonce, ct)) = envelope(v, path)? {
        let Some(key) = key_of(&seal) else {
            let mut m = Map::new();
            m.insert("shredded".into(), Value::String(hex::encode(seal)));
            return Ok(Value::Object(m));
        };
        let cipher = ChaCha20Poly1305::new(Key::from_slice(&key));
        let no = || SealError::DoesNotOpen { path: path.to_owned(), seal: hex::encode(seal) };
        let plain = cipher.decrypt(Nonce::from_slice(&nonce), Payload { msg: &ct, aad: &aad(tenant, &seal, path) }).map_err(|_| no())?;
        return serde_json::from_slice(&plain).map_err(|_| SealError::Json(path.to_owned()));
    }
    Ok(match v {
        Value::Object(m) => {
            let mut out = Map::new();
            for (k, x) in m {
                out.insert(k.clone(), open_at(x, &format!("{path}/{}", escape(k)), tenant, key_of)?);
            }
            Value::Object(out)
        }
        Value::Array(a) => Value::Array(a.iter().enumerate().map(|(i, x)| open_at(x, &format!("{path}/{i}"), tenant, key_of)).collect::<Result<_, _>>()?),
        other => other.clone(),
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{SealError, fresh, open_body, seal_paths, seals_of};

    fn body() -> serde_json::Value {
        json!({"tenant": "acme", "actor": "assistant", "action": {"tool": "pay", "values": [{"key": "payee", "value": "ACCT-1"}], "amount": "$5", "grants": []},
               "verdict": {"decision": "allow", "cause": "payee=ACCT-1 is supported", "ask": null}})
    }

    const PATHS: &[&str] = &["/action/values", "/action/amount", "/action/grants", "/verdict/cause", "/verdict/ask", "/missing"];

    /// Sealed, the values are gone from the bytes; with the key they come back exactly; without
    /// it each sealed field reads `shredded`; the rest of the body is untouched.
    #[test]
    fn a_sealed_body_opens_with_its_key_and_shreds_without_it() {
        let (seal, key) = fresh().unwrap();
        let mut b = body();
        seal_paths(&mut b, "acme", &seal, &key, PATHS).unwrap();
        let text = b.to_string();
        assert!(!text.contains("ACCT-1") && !text.contains("$5"), "{text}");
        assert_eq!(b["action"]["tool"], "pay");
        assert_eq!(b["verdict"]["ask"], serde_json::Value::Null, "a null field stays null");
        assert_eq!(seals_of(&b), vec![seal]);
        assert_eq!(open_body(&b, "acme", &|s| (*s == seal).then_some(key)).unwrap(), body());
        let shredded = open_body(&b, "acme", &|_| None).unwrap();
        assert_eq!(shredded["action"]["values"]["shredded"], hex::encode(seal));
        assert_eq!(shredded["verdict"]["decision"], "allow");
        assert!(!shredded.to_string().contains("ACCT-1"));
    }

    /// A ciphertext moved to another field or tenant, or opened under another key, does not
    /// open: an error, never a wrong value.
    #[test]
    fn a_moved_or_rekeyed_field_does_not_open() {
        let (seal, key) = fresh().unwrap();
        let mut b = body();
        seal_paths(&mut b, "acme", &seal, &key, PATHS).unwrap();
        let ok = |s: &super::SealId| (*s == seal).then_some(key);
        assert!(matches!(open_body(&b, "globex", &ok), Err(SealError::DoesNotOpen { .. })));
        let mut moved = b.clone();
        moved["verdict"]["cause"] = b["action"]["amount"].clone();
        assert!(matches!(open_body(&moved, "acme", &ok), Err(SealError::DoesNotOpen { .. })));
        let (_, other) = fresh().unwrap();
        assert!(matches!(open_body(&b, "acme", &|_| Some(other)), Err(SealError::DoesNotOpen { .. })));
        let mut bad = b.clone();
        bad["action"]["amount"]["nonce"] = json!("zz");
        assert!(matches!(open_body(&bad, "acme", &ok), Err(SealError::Malformed(_))));
    }
}
