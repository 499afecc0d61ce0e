//! Output schemas and annotations of the MCP tools.
//!
//! A tool's output schema is the schema of the type it returns, taken from the HTTP API's OpenAPI
//! document ([`crate::http::ApiDoc`], generated from the same DTOs; OpenAPI 3.1 schemas are JSON
//! Schema 2020-12): the type's component, with every `#/components/schemas/X` it reaches copied
//! into `$defs` and the references rewritten to `#/$defs/X`. One source for both doors, so an MCP
//! client validating `structuredContent` checks what the HTTP API documents.

use rmcp::model::JsonObject;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::{Arc, LazyLock};

const COMPONENT_REF: &str = "#/components/schemas/";

/// The OpenAPI document's component schemas, by name.
static COMPONENTS: LazyLock<BTreeMap<String, Value>> = LazyLock::new(|| {
    let doc = serde_json::to_value(<crate::http::ApiDoc as utoipa::OpenApi>::openapi()).unwrap_or_default();
    match doc.pointer("/components/schemas") {
        Some(Value::Object(m)) => m.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        _ => BTreeMap::new(),
    }
});

/// The output schema of a tool returning the component `name` (e.g. `WriteOut`).
pub fn output(name: &str) -> Arc<JsonObject> {
    object(json!({ "$ref": format!("{COMPONENT_REF}{name}") }))
}

/// An output schema written here (an object schema whose references name OpenAPI components),
/// self-contained: the components it reaches are copied into `$defs`.
pub fn object(schema: Value) -> Arc<JsonObject> {
    let mut root = match schema {
        Value::Object(m) => m,
        _ => JsonObject::new(),
    };
    // A bare reference at the root: inline the component (MCP wants `type: object` at the root).
    if let Some(Value::String(r)) = root.get("$ref").cloned()
        && let Some(Value::Object(c)) = r.strip_prefix(COMPONENT_REF).and_then(|n| COMPONENTS.get(n))
    {
        root = c.clone();
    }
    let mut defs = JsonObject::new();
    let mut pending = Vec::new();
    rewrite_refs(&mut root, &mut pending);
    while let Some(name) = pending.pop() {
        if defs.contains_key(&name) {
            continue;
        }
        let mut def = COMPONENTS.get(&name).cloned().unwrap_or_else(|| json!({}));
        rewrite_refs_value(&mut def, &mut pending);
        defs.insert(name, def);
    }
    root.remove("title");
    root.remove("description");
    root.entry("type").or_insert_with(|| json!("object"));
    if !defs.is_empty() {
        root.insert("$defs".into(), Value::Object(defs));
    }
    Arc::new(root)
}

fn rewrite_refs(obj: &mut JsonObject, pending: &mut Vec<String>) {
    for (k, v) in obj.iter_mut() {
        if k == "$ref"
            && let Value::String(r) = v
            && let Some(name) = r.strip_prefix(COMPONENT_REF).map(str::to_owned)
        {
            *r = format!("#/$defs/{name}");
            pending.push(name);
        } else {
            rewrite_refs_value(v, pending);
        }
    }
}

fn rewrite_refs_value(v: &mut Value, pending: &mut Vec<String>) {
    match v {
        Value::Object(o) => rewrite_refs(o, pending),
        Value::Array(a) => a.iter_mut().for_each(|x| rewrite_refs_value(x, pending)),
        _ => {}
    }
}

/// Whether `name` is a component of the OpenAPI document (tests: no tool's schema is a guess).
pub fn has_component(name: &str) -> bool {
    COMPONENTS.contains_key(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refs(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(o) => {
                if let Some(Value::String(r)) = o.get("$ref") {
                    out.push(r.clone());
                }
                o.values().for_each(|x| refs(x, out));
            }
            Value::Array(a) => a.iter().for_each(|x| refs(x, out)),
            _ => {}
        }
    }

    #[test]
    fn an_output_schema_is_self_contained() {
        for name in ["WriteOut", "SearchOut", "LineageOut", "DecideOut", "MemoryErasedOut"] {
            assert!(has_component(name), "{name} is not in the OpenAPI document");
            let s = Value::Object(output(name).as_ref().clone());
            assert_eq!(s["type"], "object", "{name}: {s}");
            assert!(s["properties"].is_object(), "{name}: {s}");
            let mut rs = Vec::new();
            refs(&s, &mut rs);
            for r in rs {
                let def = r.strip_prefix("#/$defs/").unwrap_or_else(|| panic!("{name}: a reference outside the schema: {r}"));
                assert!(s["$defs"][def].is_object(), "{name}: {r} does not resolve");
            }
        }
    }
}
