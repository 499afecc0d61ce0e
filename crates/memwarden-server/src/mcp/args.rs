//! Tool arguments: parsed strictly (every argument type refuses unknown fields), and an argument
//! error names the tool and the offending field's path, e.g.
//! ``add_memory: unknown field `text` at `text`; expected one of `namespace`, `content`, ...``.
//!
//! The extractor never fails the JSON-RPC request: an argument error is handed to the tool, which
//! answers it as a tool error (`isError`, a problem with code `invalid_input`), so a model sees
//! what to fix.

use crate::problem::ApiError;
use rmcp::handler::server::common::FromContextPart;
use rmcp::handler::server::tool::ToolCallContext;
use serde::de::DeserializeOwned;

/// A tool's arguments, or the error that names what was wrong with them. Named like rmcp's own
/// wrapper so that `#[tool]` derives the input schema from `T`.
#[derive(Debug)]
pub struct Parameters<T>(pub Result<T, ApiError>);

impl<T: schemars::JsonSchema> schemars::JsonSchema for Parameters<T> {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        T::schema_name()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        T::json_schema(generator)
    }
}

impl<S, T: DeserializeOwned> FromContextPart<ToolCallContext<'_, S>> for Parameters<T> {
    fn from_context_part(context: &mut ToolCallContext<'_, S>) -> Result<Self, rmcp::ErrorData> {
        let arguments = context.arguments.take().unwrap_or_default();
        Ok(Self(parse(context.name(), serde_json::Value::Object(arguments))))
    }
}

/// Parse `value` as the arguments of `tool`; an error names the tool and the field's path. Like
/// every error detail it never repeats a value the caller sent (serde's message is redacted by
/// [`memwarden_api::strict::redact_message`], a key in the path that does not look like a field
/// name is `…`).
pub fn parse<T: DeserializeOwned>(tool: &str, value: serde_json::Value) -> Result<T, ApiError> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let message = memwarden_api::strict::redact_message(&e.inner().to_string());
        ApiError::invalid(describe(tool, &path_text(e.path()), &message))
    })
}

/// Whether a caller's key may be repeated in an error: it looks like a field name (at most
/// [`memwarden_api::strict::ECHO_UNKNOWN_BYTES_MAX`] bytes of `[a-z_]`).
pub fn plain_name(key: &str) -> bool {
    !key.is_empty() && key.len() <= memwarden_api::strict::ECHO_UNKNOWN_BYTES_MAX && key.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')
}

/// `a.b[0].c`, with every key that is not a [`plain_name`] shown as `…`.
fn path_text(path: &serde_path_to_error::Path) -> String {
    use serde_path_to_error::Segment;
    let mut out = String::new();
    for segment in path.iter() {
        let key = match segment {
            Segment::Seq { index } => {
                out.push_str(&format!("[{index}]"));
                continue;
            }
            Segment::Map { key } | Segment::Enum { variant: key } => key.as_str(),
            Segment::Unknown => "?",
        };
        if !out.is_empty() {
            out.push('.');
        }
        out.push_str(if plain_name(key) || key == "?" { key } else { "…" });
    }
    out
}

/// `tool: <what> at `<path>`[; expected ...]`, from serde's message and the field path (`.` is the
/// arguments object itself: then no `at`).
pub fn describe(tool: &str, path: &str, message: &str) -> String {
    // serde_json appends ` at line L column C` to its own messages; a tool's arguments have no lines.
    let message = message.split(" at line ").next().unwrap_or(message);
    let (what, expected) = match message.split_once(", expected ") {
        Some((what, expected)) => (what, Some(expected)),
        None => (message, None),
    };
    let at = if path.is_empty() || path == "." { String::new() } else { format!(" at `{path}`") };
    match expected {
        Some(expected) => format!("{tool}: {what}{at}; expected {expected}"),
        None => format!("{tool}: {what}{at}"),
    }
}

/// The error for an argument that is well-formed but refused: `tool: `path`: why` (`path` is
/// the server's own words, or built with [`plain_name`]).
pub fn refuse(tool: &str, path: &str, why: impl std::fmt::Display) -> ApiError {
    ApiError::invalid(format!("{tool}: `{path}`: {why}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Inner {
        id: String,
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Outer {
        content: String,
        #[serde(default)]
        parents: Vec<Inner>,
    }

    fn err(v: serde_json::Value) -> String {
        parse::<Outer>("add_memory", v).unwrap_err().detail
    }

    #[test]
    fn an_unknown_field_is_named_with_its_path() {
        let e = err(serde_json::json!({"content": "x", "text": "y"}));
        assert_eq!(e, "add_memory: unknown field `text` at `text`; expected `content` or `parents`");
        let e = err(serde_json::json!({"content": "x", "parents": [{"id": "a"}, {"id": "b", "kind": 1}]}));
        assert_eq!(e, "add_memory: unknown field `kind` at `parents[1].kind`; expected `id`");
    }

    #[test]
    fn an_error_never_repeats_a_value_or_an_odd_key() {
        let e = err(serde_json::json!({"content": "x", "sk-live-SECRET": 1}));
        assert!(e.starts_with("add_memory: unknown field `…` at `…`; expected"), "{e}");
        let e = err(serde_json::json!({"content": ["sk-live-SECRET"]}));
        assert!(!e.contains("SECRET") && e.contains("at `content`"), "{e}");
    }

    #[test]
    fn a_wrong_type_and_a_missing_field_are_named() {
        let e = err(serde_json::json!({"content": 5}));
        assert_eq!(e, "add_memory: invalid type: integer `5` at `content`; expected a string");
        let e = err(serde_json::json!({}));
        assert_eq!(e, "add_memory: missing field `content`");
        let e = err(serde_json::json!({"content": "x", "parents": [{}]}));
        assert_eq!(e, "add_memory: missing field `id` at `parents[0]`");
    }
}
