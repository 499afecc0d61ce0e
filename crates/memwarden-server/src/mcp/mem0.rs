//! The `mem0` tool profile (`--tools mem0`): the tool names and argument schemas of Mem0's MCP
//! server (`mem0-mcp`), over the engine calls the native tools make, as the authenticated caller.
//!
//! Identity never comes from the arguments. `user_id` and `agent_id` (as arguments or in
//! `filters`) are accepted only when they name the caller, and then change nothing: everything
//! the caller may read is its memory. Naming anyone else is an error naming the field. `app_id` is
//! the namespace (default `default`) and `run_id` the task tag, both partitions of what the
//! caller may already read or write (the session tag is the authenticated session's, never an
//! argument's). Filters are equality on those four keys, alone or under
//! `AND`; anything else (`OR`, `NOT`, operators, other keys) is refused with the path of the
//! clause. `enable_graph: true` is refused (no graph memory here).

use super::MemwardenMcp;
use super::args::{Parameters, plain_name, refuse};
use super::schema;
use crate::dto::{AddMemory, ListOut, MemoryOut, RouteName, SearchIn, SearchOut};
use crate::ops;
use crate::problem::ApiError;
use memwarden_engine::{Actor, Engine};
use rmcp::model::{CallToolResult, JsonObject};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, tool, tool_router};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;

const DEFAULT_NAMESPACE: &str = "default";
/// Most memories one listing reads (the engine's own bound on a list).
const LIST_MAX: usize = 10_000;
/// Most hits a search asks the engine for before `run_id` narrows them.
const SEARCH_MAX: usize = 100;

/// Arguments of mem0's `add_memory`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AddArgs {
    /// Plain sentence summarizing what to store. Required even if `messages` is provided.
    pub text: String,
    /// Structured conversation history with `role`/`content`. Use when you have multiple turns
    /// (then each message's content is stored, with its role in the metadata, and `text` is not).
    #[serde(default)]
    pub messages: Option<Vec<BTreeMap<String, String>>>,
    /// Must name the caller (identity comes from the credentials).
    #[serde(default)]
    pub user_id: Option<String>,
    /// Must name the caller (identity comes from the credentials).
    #[serde(default)]
    pub agent_id: Option<String>,
    /// The namespace to write to (default `default`).
    #[serde(default)]
    pub app_id: Option<String>,
    /// A run id, stored as the memory's task tag.
    #[serde(default)]
    pub run_id: Option<String>,
    /// Arbitrary metadata JSON (stored as text per key; never consulted by any gate).
    #[serde(default)]
    pub metadata: Option<serde_json::Map<String, Value>>,
    /// Graph memory is not available: only `false` (or absent) is accepted.
    #[serde(default)]
    pub enable_graph: Option<bool>,
}

/// Arguments of mem0's `search_memories`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchArgs {
    /// Natural language description of what to find.
    pub query: String,
    /// Filter clauses: equality on `user_id` / `agent_id` (the caller only), `app_id`
    /// (namespace) and `run_id` (task tag), alone or under `AND`.
    #[serde(default)]
    pub filters: Option<serde_json::Map<String, Value>>,
    /// Maximum number of results to return (1..=100, default 10).
    #[serde(default)]
    pub limit: Option<u64>,
    /// Graph memory is not available: only `false` (or absent) is accepted.
    #[serde(default)]
    pub enable_graph: Option<bool>,
}

/// Arguments of mem0's `get_memories`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GetAllArgs {
    /// Filter clauses, as for `search_memories`.
    #[serde(default)]
    pub filters: Option<serde_json::Map<String, Value>>,
    /// 1-indexed page number when paginating (default 1).
    #[serde(default)]
    pub page: Option<u64>,
    /// Number of memories per page (default 100).
    #[serde(default)]
    pub page_size: Option<u64>,
    /// Cursor paging instead of `page`: the `next_cursor` of the previous answer, unchanged
    /// (bound to these filters). Each answer scans `page_size` memories of the namespace, so it
    /// may hold fewer; `next_cursor` is null on the last.
    #[serde(default)]
    pub cursor: Option<String>,
    /// Graph memory is not available: only `false` (or absent) is accepted.
    #[serde(default)]
    pub enable_graph: Option<bool>,
}

/// Arguments of mem0's `get_memory` and `delete_memory`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct IdArgs {
    /// Exact memory_id (32 hex digits).
    pub memory_id: String,
}

/// Arguments of mem0's `update_memory`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateArgs {
    /// Exact memory_id to overwrite (32 hex digits).
    pub memory_id: String,
    /// Replacement text for the memory.
    pub text: String,
}

/// Arguments of mem0's `delete_all_memories`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeleteAllArgs {
    /// Must name the caller.
    #[serde(default)]
    pub user_id: Option<String>,
    /// Must name the caller.
    #[serde(default)]
    pub agent_id: Option<String>,
    /// The namespace to clear (default `default`).
    #[serde(default)]
    pub app_id: Option<String>,
    /// Only memories with this run id (task tag).
    #[serde(default)]
    pub run_id: Option<String>,
}

/// One stored memory, as mem0 reports an add (with memwarden's provenance in `item`).
#[derive(Debug, Serialize)]
pub struct AddedOut {
    /// Memory id.
    pub id: String,
    /// The stored text.
    pub memory: String,
    /// Always `ADD`.
    pub event: &'static str,
    /// The stored memory with its origin and label.
    pub item: MemoryOut,
    /// Log index of the write.
    pub log_index: u64,
}

/// Result of `add_memory`.
#[derive(Debug, Serialize)]
pub struct AddOut {
    /// One entry per stored memory.
    pub results: Vec<AddedOut>,
}

/// Result of `delete_all_memories`.
#[derive(Debug, Serialize)]
pub struct DeleteAllOut {
    /// A summary.
    pub message: String,
    /// Every memory erased (the caller's, and what depended on them alone).
    pub erased: Vec<String>,
}

/// Where a mem0 call reads or writes: a namespace and, optionally, a run (the task tag).
#[derive(Debug, Default, PartialEq, Eq)]
struct Scope {
    namespace: Option<String>,
    run: Option<String>,
}

impl Scope {
    fn namespace(&self) -> String {
        self.namespace.clone().unwrap_or_else(|| DEFAULT_NAMESPACE.to_owned())
    }

    fn admits(&self, m: &MemoryOut) -> bool {
        self.run.as_ref().is_none_or(|r| m.task.as_ref() == Some(r))
    }
}

/// `user_id` / `agent_id` may only name the caller.
fn same_principal(tool: &str, path: &str, named: &str, actor: &Actor) -> Result<(), ApiError> {
    if named == actor.id().as_str() {
        return Ok(());
    }
    Err(refuse(
        tool,
        path,
        format_args!("names another principal than the caller `{}`; identity comes from the credentials, and user_id / agent_id may only name the caller", actor.id()),
    ))
}

fn no_graph(tool: &str, enable_graph: Option<bool>) -> Result<(), ApiError> {
    match enable_graph {
        Some(true) => Err(refuse(tool, "enable_graph", "graph memory is not available here; omit it or pass false")),
        _ => Ok(()),
    }
}

/// Set a scope field once; a second, different value for it is an error naming the path.
fn set_once(tool: &str, path: &str, slot: &mut Option<String>, v: &str) -> Result<(), ApiError> {
    match slot {
        Some(old) if old != v => Err(refuse(tool, path, "conflicts with an earlier clause for the same key")),
        _ => {
            *slot = Some(v.to_owned());
            Ok(())
        }
    }
}

/// The identity and scope arguments (`user_id`, `agent_id`, `app_id`, `run_id`) at `path`.
fn apply_key(tool: &str, path: &str, key: &str, v: &Value, actor: &Actor, scope: &mut Scope) -> Result<(), ApiError> {
    let Value::String(s) = v else {
        return Err(refuse(tool, path, "only equality with a string is supported"));
    };
    match key {
        "user_id" | "agent_id" => same_principal(tool, path, s, actor),
        "app_id" => set_once(tool, path, &mut scope.namespace, s),
        "run_id" => set_once(tool, path, &mut scope.run, s),
        _ => Err(refuse(tool, path, "unsupported filter key; expected `user_id`, `agent_id`, `app_id` or `run_id` (equality), alone or under `AND`")),
    }
}

/// Mem0 filters: `{key: value, ...}` or `{"AND": [{...}, ...]}` (nested `AND` too).
fn apply_filters(tool: &str, path: &str, filters: &serde_json::Map<String, Value>, actor: &Actor, scope: &mut Scope) -> Result<(), ApiError> {
    for (k, v) in filters {
        // The key is the caller's: named only when it looks like a field name or a mem0 operator.
        let named = plain_name(k) || ["AND", "OR", "NOT"].contains(&k.as_str());
        let at = format!("{path}.{}", if named { k.as_str() } else { "…" });
        if k != "AND" {
            apply_key(tool, &at, k, v, actor, scope)?;
            continue;
        }
        let Value::Array(clauses) = v else {
            return Err(refuse(tool, &at, "must be a list of filter objects"));
        };
        for (i, c) in clauses.iter().enumerate() {
            let at = format!("{at}[{i}]");
            let Value::Object(c) = c else {
                return Err(refuse(tool, &at, "must be a filter object"));
            };
            apply_filters(tool, &at, c, actor, scope)?;
        }
    }
    Ok(())
}

fn scope_of(tool: &str, filters: Option<&serde_json::Map<String, Value>>, actor: &Actor) -> Result<Scope, ApiError> {
    let mut scope = Scope::default();
    if let Some(f) = filters {
        apply_filters(tool, "filters", f, actor, &mut scope)?;
    }
    Ok(scope)
}

fn scope_of_args(tool: &str, ids: [(&str, &Option<String>); 4], actor: &Actor) -> Result<Scope, ApiError> {
    let mut scope = Scope::default();
    for (key, v) in ids {
        if let Some(v) = v {
            apply_key(tool, key, key, &Value::String(v.clone()), actor, &mut scope)?;
        }
    }
    Ok(scope)
}

fn metadata_text(m: Option<serde_json::Map<String, Value>>) -> BTreeMap<String, String> {
    m.unwrap_or_default()
        .into_iter()
        .map(|(k, v)| {
            let text = match v {
                Value::String(s) => s,
                other => other.to_string(),
            };
            (k, text)
        })
        .collect()
}

/// The memories `add_memory` stores: `text`, or each message's content (its role in metadata).
fn add_requests(a: AddArgs, scope: &Scope) -> Result<Vec<AddMemory>, ApiError> {
    let metadata = metadata_text(a.metadata);
    let one = |content: String, route: Option<RouteName>, metadata: BTreeMap<String, String>| AddMemory {
        namespace: scope.namespace(),
        content,
        route,
        parents: Vec::new(),
        readers: None,
        metadata,
        session: None,
        task: scope.run.clone(),
    };
    let Some(messages) = a.messages.filter(|m| !m.is_empty()) else {
        return Ok(vec![one(a.text, None, metadata)]);
    };
    messages
        .into_iter()
        .enumerate()
        .map(|(i, mut m)| {
            let content = m.remove("content").ok_or_else(|| refuse("add_memory", &format!("messages[{i}]"), "has no `content`"))?;
            let mut md = metadata.clone();
            if let Some(role) = m.remove("role") {
                md.insert("role".into(), role);
            }
            Ok(one(content, Some(RouteName::Dialogue), md))
        })
        .collect()
}

fn add(engine: &Engine, actor: &Actor, a: AddArgs) -> Result<AddOut, ApiError> {
    no_graph("add_memory", a.enable_graph)?;
    let scope = scope_of_args("add_memory", [("user_id", &a.user_id), ("agent_id", &a.agent_id), ("app_id", &a.app_id), ("run_id", &a.run_id)], actor)?;
    let mut results = Vec::new();
    for m in add_requests(a, &scope)? {
        let w = ops::add(engine, actor, m)?;
        results.push(AddedOut { id: w.item.id.clone(), memory: w.item.content.clone(), event: "ADD", item: w.item, log_index: w.log_index });
    }
    Ok(AddOut { results })
}

fn search(engine: &Engine, actor: &Actor, a: SearchArgs) -> Result<SearchOut, ApiError> {
    no_graph("search_memories", a.enable_graph)?;
    let scope = scope_of("search_memories", a.filters.as_ref(), actor)?;
    let limit = match a.limit {
        None => 10,
        Some(n @ 1..=100) => usize::try_from(n).unwrap_or(SEARCH_MAX),
        Some(_) => return Err(refuse("search_memories", "limit", "must be 1..=100")),
    };
    let k = if scope.run.is_some() { SEARCH_MAX } else { limit };
    let mut out = ops::search(engine, actor, SearchIn { namespace: scope.namespace(), query: a.query, k, min_label: None })?;
    out.results.retain(|h| scope.admits(&h.item));
    out.results.truncate(limit);
    Ok(out)
}

fn get_all(engine: &Engine, actor: &Actor, a: GetAllArgs) -> Result<ListOut, ApiError> {
    no_graph("get_memories", a.enable_graph)?;
    let scope = scope_of("get_memories", a.filters.as_ref(), actor)?;
    let page = usize::try_from(a.page.unwrap_or(1)).unwrap_or(usize::MAX);
    let size = usize::try_from(a.page_size.unwrap_or(100)).unwrap_or(usize::MAX);
    if page == 0 {
        return Err(refuse("get_memories", "page", "pages are numbered from 1"));
    }
    if size == 0 || size > LIST_MAX {
        return Err(refuse("get_memories", "page_size", format_args!("must be 1..={LIST_MAX}")));
    }
    let ns = scope.namespace();
    match (a.page, a.cursor.as_deref()) {
        (Some(_), Some(_)) => return Err(refuse("get_memories", "page", "pass either page or cursor, not both")),
        // Cursor paging (its first page when neither is given).
        (None, cursor) => return page_of(engine, actor, &scope, size, cursor),
        (Some(_), None) => {}
    }
    // Numbered pages: read on through the list until the asked page is full.
    let wanted = page.saturating_mul(size);
    let mut out = ListOut { results: Vec::new(), withheld: Vec::new(), next_cursor: None };
    let mut cursor: Option<String> = None;
    loop {
        let listed = ops::list(engine, actor, &ns, LIST_MAX, cursor.as_deref())?;
        out.results.extend(listed.results.into_iter().filter(|m| scope.admits(m)));
        out.withheld.extend(listed.withheld);
        cursor = listed.next_cursor;
        if cursor.is_none() || out.results.len() >= wanted {
            break;
        }
    }
    out.results = out.results.into_iter().skip((page - 1).saturating_mul(size)).take(size).collect();
    Ok(out)
}

/// One cursor page of `get_memories`: `size` memories of the namespace scanned, those of the
/// scope's run kept; the cursor is bound to the run filter.
fn page_of(engine: &Engine, actor: &Actor, scope: &Scope, size: usize, cursor: Option<&str>) -> Result<ListOut, ApiError> {
    let ns = memwarden_core::prelude::Namespace::new(&scope.namespace())?;
    let filters = format!("mem0:run={}", scope.run.as_deref().map_or_else(String::new, |r| format!("{}:{r}", r.len())));
    let page = engine.list_page_bound(actor, &ns, size, cursor, &filters)?;
    let mut out = ListOut {
        results: page.items.memories.iter().map(ops::read_out).collect(),
        withheld: page.items.withheld.iter().map(ops::withheld_out).collect(),
        next_cursor: page.next_cursor,
    };
    out.results.retain(|m| scope.admits(m));
    Ok(out)
}

/// Erase the caller's own memories in the scope (each erasure through the engine's gate).
fn delete_all(engine: &Engine, actor: &Actor, a: DeleteAllArgs) -> Result<DeleteAllOut, ApiError> {
    let scope = scope_of_args("delete_all_memories", [("user_id", &a.user_id), ("agent_id", &a.agent_id), ("app_id", &a.app_id), ("run_id", &a.run_id)], actor)?;
    let ns = scope.namespace();
    let mut erased: Vec<String> = Vec::new();
    let mut gone = std::collections::HashSet::new();
    // One pass through the namespace, a page at a time (an erasure leaves the positions after
    // it in place).
    let mut cursor: Option<String> = None;
    loop {
        let listed = ops::list(engine, actor, &ns, LIST_MAX, cursor.as_deref())?;
        let mine: Vec<String> =
            listed.results.into_iter().filter(|m| m.writer == actor.id().as_str() && scope.admits(m) && !gone.contains(&m.id)).map(|m| m.id).collect();
        for id in mine {
            if gone.contains(&id) {
                continue; // erased already, with an earlier memory it depended on
            }
            let e = ops::erase(engine, actor, &id).map_err(|e| ApiError { detail: format!("delete_all_memories: stopped after erasing {}: {}", erased.len(), e.detail), ..e })?;
            gone.extend(e.erased.iter().cloned());
            erased.extend(e.erased);
        }
        cursor = listed.next_cursor;
        if cursor.is_none() {
            break;
        }
    }
    let message = format!("erased {} memories of `{}` in namespace `{ns}`", erased.len(), actor.id());
    Ok(DeleteAllOut { message, erased })
}

fn add_schema() -> Arc<JsonObject> {
    schema::object(json!({
        "type": "object",
        "required": ["results"],
        "properties": {"results": {"type": "array", "items": {
            "type": "object",
            "required": ["id", "memory", "event", "item", "log_index"],
            "properties": {
                "id": {"type": "string"},
                "memory": {"type": "string"},
                "event": {"type": "string", "const": "ADD"},
                "item": {"$ref": "#/components/schemas/MemoryOut"},
                "log_index": {"type": "integer", "minimum": 0}
            }
        }}}
    }))
}

fn delete_all_schema() -> Arc<JsonObject> {
    schema::object(json!({
        "type": "object",
        "required": ["message", "erased"],
        "properties": {"message": {"type": "string"}, "erased": {"type": "array", "items": {"type": "string"}}}
    }))
}

#[tool_router(router = mem0_router, vis = "pub(super)")]
impl MemwardenMcp {
    /// mem0 `add_memory`.
    #[tool(name = "add_memory", description = "Store a new preference, fact, or conversation snippet as the authenticated caller. \
        user_id / agent_id may only name the caller; app_id is the namespace, run_id the task tag. Returns each stored \
        memory with its origin and integrity label (from the caller, never from the arguments).",
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = false, open_world_hint = false),
        output_schema = add_schema())]
    async fn mem0_add(&self, Parameters(a): Parameters<AddArgs>, ctx: RequestContext<RoleServer>) -> Result<CallToolResult, ErrorData> {
        self.call(&ctx, a, add).await
    }

    /// mem0 `search_memories`.
    #[tool(name = "search_memories", description = "Run a semantic search over the memories the caller may read. Filters: \
        {\"user_id\": <the caller>}, {\"app_id\": namespace}, {\"run_id\": task tag}, alone or as {\"AND\": [...]}; \
        each hit carries its origin, label and path trust.",
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false),
        output_schema = schema::output("SearchOut"))]
    async fn mem0_search(&self, Parameters(a): Parameters<SearchArgs>, ctx: RequestContext<RoleServer>) -> Result<CallToolResult, ErrorData> {
        self.call(&ctx, a, search).await
    }

    /// mem0 `get_memories`.
    #[tool(name = "get_memories", description = "Page through the memories the caller may read (oldest first), using \
        filters instead of search (the same filters as search_memories). page is 1-indexed. Without page, pages by \
        cursor: each answer scans page_size memories (so it may hold fewer) and its next_cursor, passed back as \
        cursor, gives the next (null on the last).",
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false),
        output_schema = schema::output("ListOut"))]
    async fn mem0_get_all(&self, Parameters(a): Parameters<GetAllArgs>, ctx: RequestContext<RoleServer>) -> Result<CallToolResult, ErrorData> {
        self.call(&ctx, a, get_all).await
    }

    /// mem0 `get_memory`.
    #[tool(name = "get_memory", description = "Fetch a single memory once you know its memory_id (one the caller may not \
        read is not found).",
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false),
        output_schema = schema::output("MemoryOut"))]
    async fn mem0_get(&self, Parameters(a): Parameters<IdArgs>, ctx: RequestContext<RoleServer>) -> Result<CallToolResult, ErrorData> {
        self.call(&ctx, a, |e, actor, a| ops::get(e, actor, &a.memory_id)).await
    }

    /// mem0 `update_memory`.
    #[tool(name = "update_memory", description = "Overwrite an existing memory's text (its owner, or a user): the new text \
        is a new version, never more trusted than the old one, which stays in the memory's history.",
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = false, open_world_hint = false),
        output_schema = schema::output("UpdatedOut"))]
    async fn mem0_update(&self, Parameters(a): Parameters<UpdateArgs>, ctx: RequestContext<RoleServer>) -> Result<CallToolResult, ErrorData> {
        self.call(&ctx, a, |e, actor, a| ops::update(e, actor, &a.memory_id, a.text)).await
    }

    /// mem0 `delete_memory`.
    #[tool(name = "delete_memory", description = "Delete one memory for good (its owner, or a user), with every memory \
        derived from it alone.",
        annotations(read_only_hint = false, destructive_hint = true, idempotent_hint = true, open_world_hint = false),
        output_schema = schema::output("MemoryErasedOut"))]
    async fn mem0_delete(&self, Parameters(a): Parameters<IdArgs>, ctx: RequestContext<RoleServer>) -> Result<CallToolResult, ErrorData> {
        self.call(&ctx, a, |e, actor, a| ops::erase(e, actor, &a.memory_id)).await
    }

    /// mem0 `delete_all_memories`.
    #[tool(name = "delete_all_memories", description = "Delete every memory the caller wrote in a namespace (app_id, default \
        `default`), or only those of one run (run_id). user_id / agent_id may only name the caller.",
        annotations(read_only_hint = false, destructive_hint = true, idempotent_hint = true, open_world_hint = false),
        output_schema = delete_all_schema())]
    async fn mem0_delete_all(&self, Parameters(a): Parameters<DeleteAllArgs>, ctx: RequestContext<RoleServer>) -> Result<CallToolResult, ErrorData> {
        self.call(&ctx, a, delete_all).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use memwarden_core::prelude::{PrincipalId, PrincipalKind, Principal, TenantId};

    fn actor() -> (tempfile::TempDir, Actor) {
        let dir = tempfile::tempdir().unwrap();
        let engine = Engine::open(dir.path(), memwarden_engine::EngineConfig::default()).unwrap();
        let t = TenantId::new("acme").unwrap();
        let p = Principal { id: PrincipalId::new("agent").unwrap(), tenant: t.clone(), kind: PrincipalKind::Agent, domain: None, allow_listed: false, public_key: None, action: None };
        engine.register_principal(p).unwrap();
        let a = engine.authenticate(&t, &PrincipalId::new("agent").unwrap()).unwrap();
        (dir, a)
    }

    fn scope(f: Value) -> Result<Scope, String> {
        let (_dir, a) = actor();
        let Value::Object(f) = f else { panic!("not an object") };
        scope_of("search_memories", Some(&f), &a).map_err(|e| e.detail)
    }

    #[test]
    fn filters_name_the_caller_a_namespace_and_a_run_only() {
        let s = scope(json!({"AND": [{"user_id": "agent"}, {"app_id": "notes"}, {"run_id": "r1"}]})).unwrap();
        assert_eq!(s, Scope { namespace: Some("notes".into()), run: Some("r1".into()) });
        let e = scope(json!({"AND": [{"app_id": "notes"}, {"user_id": "bob"}]})).unwrap_err();
        assert!(e.starts_with("search_memories: `filters.AND[1].user_id`: names another principal"), "{e}");
        let e = scope(json!({"app_id": "a", "AND": [{"app_id": "b"}]})).unwrap_err();
        assert!(e.contains("app_id`: conflicts with an earlier clause"), "{e}");
        let e = scope(json!({"created_at": {"gte": "2024-01-01"}})).unwrap_err();
        assert!(e.contains("`filters.created_at`: only equality"), "{e}");
        let e = scope(json!({"sk-live-SECRET": "x"})).unwrap_err();
        assert!(e.contains("`filters.…`") && !e.contains("SECRET"), "{e}");
    }
}
