//! Strict JSON for every door: a body with a duplicate object key is refused (serde would keep
//! the last value for maps and `serde_json::Value`, so `{"content": "a", "content": "b"}` meant
//! whatever the last parser in a proxy chain thought), and an error message never repeats the
//! caller's values (a rejected string may be a secret; only its shape and position are told).

use serde::de::{self, DeserializeOwned, Deserializer, MapAccess, SeqAccess, Visitor};
use std::collections::HashSet;
use std::fmt;

/// Longest caller-supplied name (a field or variant name in backticks) kept in an error message.
pub const ECHO_NAME_BYTES_MAX: usize = 40;

/// Why a body was refused.
#[derive(Debug, thiserror::Error)]
pub enum StrictJsonError {
    /// Not JSON, or not the expected shape (message already redacted).
    #[error("{0}")]
    Invalid(String),
    /// An object names one key twice (the key is not repeated in the message).
    #[error("duplicate object key at line {line} column {column}")]
    DuplicateKey {
        /// Line of the duplicate (1-based).
        line: usize,
        /// Column just past the duplicate.
        column: usize,
    },
}

/// Parse `bytes` as `T`, refusing duplicate keys at any depth. Errors never echo values.
pub fn from_slice<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, StrictJsonError> {
    check_no_duplicate_keys(bytes)?;
    serde_json::from_slice(bytes).map_err(|e| StrictJsonError::Invalid(redact(&e)))
}

/// [`from_slice`] for text.
pub fn from_str<T: DeserializeOwned>(text: &str) -> Result<T, StrictJsonError> {
    from_slice(text.as_bytes())
}

/// Walk `bytes` as JSON and fail on the first object with a repeated key.
pub fn check_no_duplicate_keys(bytes: &[u8]) -> Result<(), StrictJsonError> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    match NoDuplicates::deserialize_from(&mut de) {
        Ok(()) => de.end().map_err(|e| StrictJsonError::Invalid(redact(&e))),
        Err(e) if e.to_string().starts_with(DUPLICATE_MARK) => Err(StrictJsonError::DuplicateKey { line: e.line(), column: e.column() }),
        Err(e) => Err(StrictJsonError::Invalid(redact(&e))),
    }
}

const DUPLICATE_MARK: &str = "memwarden: duplicate key";

struct NoDuplicates;

impl NoDuplicates {
    fn deserialize_from<'de, D: Deserializer<'de>>(d: D) -> Result<(), D::Error> {
        d.deserialize_any(NoDuplicates)
    }
}

impl<'de> de::Deserialize<'de> for NoDuplicates {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(NoDuplicates)?;
        Ok(NoDuplicates)
    }
}

impl<'de> Visitor<'de> for NoDuplicates {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_none<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element::<NoDuplicates>()?.is_some() {}
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen: HashSet<String> = HashSet::new();
        while let Some(k) = map.next_key::<String>()? {
            if !seen.insert(k) {
                return Err(de::Error::custom(DUPLICATE_MARK));
            }
            map.next_value::<NoDuplicates>()?;
        }
        Ok(())
    }
}

/// A serde error's message with the caller's values taken out: every double-quoted string
/// becomes `"…"`, every backticked name longer than [`ECHO_NAME_BYTES_MAX`] is cut, and the
/// position is kept.
pub fn redact(e: &serde_json::Error) -> String {
    redact_message(&e.to_string())
}

/// Longest unknown field or variant name (the caller's own word) an error repeats.
pub const ECHO_UNKNOWN_BYTES_MAX: usize = 24;

/// [`redact`] for a message from any serde format (query strings, path segments). The name in
/// "unknown field `x`" / "unknown variant `x`" is the caller's: it is repeated only when it looks
/// like a field name (at most [`ECHO_UNKNOWN_BYTES_MAX`] bytes of `[a-z_]`, so `origin` is named
/// and a token is not).
pub fn redact_message(msg: &str) -> String {
    let mut out = String::with_capacity(msg.len().min(512));
    let mut chars = msg.chars();
    for prefix in ["unknown field `", "unknown variant `"] {
        if let Some(rest) = msg.strip_prefix(prefix) {
            // The name is the caller's and may itself hold backticks: it ends at serde's *last*
            // "`, expected" / "`, there are no" (what follows lists our own names), else at the
            // message's last backtick.
            let end = ["`, expected", "`, there are no"].iter().filter_map(|sep| rest.rfind(sep)).max().or_else(|| rest.rfind('`')).unwrap_or(rest.len());
            let name = &rest[..end];
            let plain = !name.is_empty() && name.len() <= ECHO_UNKNOWN_BYTES_MAX && name.bytes().all(|b| b.is_ascii_lowercase() || b == b'_');
            out.push_str(prefix);
            out.push_str(if plain { name } else { "…" });
            chars = rest[(end + 1).min(rest.len())..].chars();
            out.push('`');
            break;
        }
    }
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                out.push_str("\"…\"");
                // Skip to the closing quote (serde escapes inner quotes as \").
                let mut escaped = false;
                for d in chars.by_ref() {
                    if escaped {
                        escaped = false;
                    } else if d == '\\' {
                        escaped = true;
                    } else if d == '"' {
                        break;
                    }
                }
            }
            '`' => {
                let name: String = chars.by_ref().take_while(|&d| d != '`').collect();
                out.push('`');
                if name.len() > ECHO_NAME_BYTES_MAX {
                    let mut end = ECHO_NAME_BYTES_MAX;
                    while !name.is_char_boundary(end) {
                        end -= 1;
                    }
                    out.push_str(&name[..end]);
                    out.push('…');
                } else {
                    out.push_str(&name);
                }
                out.push('`');
            }
            _ => out.push(c),
        }
        if out.len() > 1024 {
            out.push('…');
            break;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Body {
        content: String,
        #[serde(default)]
        metadata: std::collections::BTreeMap<String, String>,
    }

    /// One table: input, whether it parses, and (for a refusal) text the message must hold and
    /// text it must not.
    fn check(input: &str, ok: bool, must: &str, must_not: &str) {
        let r = from_str::<Body>(input);
        assert_eq!(r.is_ok(), ok, "{input}: {r:?}");
        if let Err(e) = r {
            let m = e.to_string();
            assert!(m.contains(must), "{input}: {m:?} lacks {must:?}");
            assert!(must_not.is_empty() || !m.contains(must_not), "{input}: {m:?} echoes {must_not:?}");
        }
    }

    #[test]
    fn duplicate_keys_are_refused_at_every_depth_and_values_are_never_echoed() {
        check(r#"{"content":"a"}"#, true, "", "");
        check(r#"{"content":"a","metadata":{"k":"v","j":"v"}}"#, true, "", "");
        check(r#"{"content":"a","content":"b"}"#, false, "duplicate object key", "");
        check(r#"{"content":"a","metadata":{"k":"1","k":"2"}}"#, false, "duplicate object key", "");
        check(r#"[{"x":1,"x":2}]"#, false, "duplicate object key", "");
        // Same key, different JSON escapes, is the same key.
        check(r#"{"content":"a","cont\u0065nt":"b"}"#, false, "duplicate object key", "");
        check(r#"{"content":5}"#, false, "invalid type", "");
        check(r#"{"content":"a","metadata":{"k":"sk-live-SECRETSECRET"},"x":1}"#, false, "unknown field", "SECRETSECRET");
        check(r#"{"content":["sk-live-SECRETSECRET"]}"#, false, "invalid type", "SECRETSECRET");
        check(r#"{"content":"a"} trailing"#, false, "trailing", "");
        // Found by the request_bodies fuzz target: an unknown key holding backticks leaked the
        // rest of itself past the first one.
        check(r#"{"content":"a","aooo`oo;oooooooooooooooooooooU1expected ident -":1}"#, false, "unknown field `…`", "oooooooo");
        check(r#"{"content":"a","x`, expected SECRETSECRET":1}"#, false, "unknown field `…`", "SECRETSECRET");
        check("not json", false, "expected", "");
    }

    #[test]
    fn redaction_keeps_shape_and_cuts_long_names() {
        assert_eq!(redact_message(r#"invalid value: string "hunter2", expected x"#), r#"invalid value: string "…", expected x"#);
        assert_eq!(redact_message(r#"a "b\"c" d"#), r#"a "…" d"#);
        let long = "x".repeat(100);
        let m = redact_message(&format!("unknown field `{long}`, expected `content`"));
        assert_eq!(m, "unknown field `…`, expected `content`");
        let m = redact_message(&format!("invalid type: map, expected `{long}`"));
        assert!(m.contains(&format!("`{}…`", "x".repeat(ECHO_NAME_BYTES_MAX))), "{m}");
        assert_eq!(redact_message("unknown field `origin`, expected `content`"), "unknown field `origin`, expected `content`");
        assert_eq!(redact_message("unknown variant `SK-LIVE-9f8e`, expected `a`"), "unknown variant `…`, expected `a`");
        assert_eq!(redact_message("unknown field `tok_1234`, expected `a`"), "unknown field `…`, expected `a`");
    }
}
