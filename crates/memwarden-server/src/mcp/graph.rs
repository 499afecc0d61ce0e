//! The `graph` tool profile (`--tools graph`): the knowledge-graph tools of the reference MCP
//! memory server (`create_entities`, `create_relations`, `add_observations`, `delete_entities`,
//! `delete_observations`, `delete_relations`, `read_graph`, `search_nodes`, `open_nodes`), with
//! their names, argument schemas and answers, kept in memwarden's provenance graph.
//!
//! Every node is a memory of the namespace [`GRAPH_NAMESPACE`], written and read as the
//! authenticated caller through the same engine calls as every other door:
//!
//! - an **entity** is a memory `"<name> (<entityType>)"`;
//! - an **observation** is a memory derived from its entity's memory (`derived_from`);
//! - a **relation** is a memory `"<from> <relationType> <to>"` derived from both entities.
//!
//! So an observation or relation carries the lower of its writer's and its entities' labels, a
//! reader sees only what its scope and the defense layers let it read, and deleting an entity
//! erases what was derived from it (its observations and relations), as the reference server
//! deletes them. The graph the tools answer with is the caller's readable view; each entity and
//! relation names its memory and integrity label (`memoryId`, `label`).

use super::MemwardenMcp;
use super::args::{Parameters, refuse};
use super::schema;
use crate::dto::{AddMemory, EdgeKindName, MemoryOut, ParentIn};
use crate::ops;
use crate::problem::ApiError;
use memwarden_engine::{Actor, Engine};
use rmcp::model::{CallToolResult, JsonObject};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, tool, tool_router};
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// The namespace the graph's memories live in.
pub const GRAPH_NAMESPACE: &str = "graph";
/// Most memories one listing page reads.
const PAGE_MAX: usize = 10_000;
/// Most entities, relations, observations or names one call may carry.
const BATCH_MAX: usize = 1_000;
/// Longest `search_nodes` query (the reference server's limit).
const QUERY_BYTES_MAX: usize = 2_048;

const KIND: &str = "kg.kind";
const NAME: &str = "kg.name";
const TYPE: &str = "kg.type";
const ENTITY: &str = "kg.entity";
const FROM: &str = "kg.from";
const TO: &str = "kg.to";
const RELATION: &str = "kg.relation";

/// An entity as the tools take and answer it.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Entity {
    /// The name of the entity.
    pub name: String,
    /// The type of the entity.
    pub entity_type: String,
    /// An array of observation contents associated with the entity.
    pub observations: Vec<String>,
}

/// A relation as the tools take and answer it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Relation {
    /// The name of the entity where the relation starts.
    pub from: String,
    /// The name of the entity where the relation ends.
    pub to: String,
    /// The type of the relation.
    pub relation_type: String,
}

/// Arguments of `create_entities`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EntitiesArgs {
    /// The entities to create (an existing name is skipped).
    pub entities: Vec<Entity>,
}

/// Arguments of `create_relations` and `delete_relations`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RelationsArgs {
    /// The relations.
    pub relations: Vec<Relation>,
}

/// Observations of one entity.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct EntityObservations {
    /// The name of the entity to add the observations to.
    pub entity_name: String,
    /// An array of observation contents to add.
    pub contents: Vec<String>,
}

/// Arguments of `add_observations`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ObservationsArgs {
    /// Per entity, the observations to add.
    pub observations: Vec<EntityObservations>,
}

/// Observations to delete from one entity.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ObservationDeletion {
    /// The name of the entity containing the observations.
    pub entity_name: String,
    /// An array of observations to delete.
    pub observations: Vec<String>,
}

/// Arguments of `delete_observations`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeletionsArgs {
    /// Per entity, the observations to delete.
    pub deletions: Vec<ObservationDeletion>,
}

/// Arguments of `delete_entities`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct EntityNamesArgs {
    /// An array of entity names to delete.
    pub entity_names: Vec<String>,
}

/// Arguments of `open_nodes`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NamesArgs {
    /// An array of entity names to retrieve.
    pub names: Vec<String>,
}

/// Arguments of `search_nodes`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct QueryArgs {
    /// The search query to match against entity names, types, and observation content.
    pub query: String,
}

/// Arguments of `read_graph` (none).
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoArgs {}

/// An entity in an answer: the reference fields, its memory and its label.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EntityOut {
    name: String,
    entity_type: String,
    observations: Vec<String>,
    memory_id: String,
    label: String,
}

/// A relation in an answer: the reference fields, its memory and its label.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RelationOut {
    from: String,
    to: String,
    relation_type: String,
    memory_id: String,
    label: String,
}

/// A (sub)graph.
#[derive(Debug, Default, Serialize)]
pub struct GraphOut {
    entities: Vec<EntityOut>,
    relations: Vec<RelationOut>,
}

/// What a delete tool did.
#[derive(Debug, Serialize)]
pub struct DeletedOut {
    success: bool,
    message: String,
}

/// The caller's readable view of the graph: each entity (its oldest memory of a name), its
/// observations' memories, and the relations.
struct View {
    entities: BTreeMap<String, (MemoryOut, Vec<MemoryOut>)>,
    relations: Vec<(Relation, MemoryOut)>,
}

impl View {
    fn read(engine: &Engine, actor: &Actor) -> Result<Self, ApiError> {
        let mut all = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let page = ops::list(engine, actor, GRAPH_NAMESPACE, PAGE_MAX, cursor.as_deref())?;
            all.extend(page.results);
            cursor = page.next_cursor;
            if cursor.is_none() {
                break;
            }
        }
        let meta = |m: &MemoryOut, k: &str| m.metadata.get(k).cloned();
        let mut entities: BTreeMap<String, (MemoryOut, Vec<MemoryOut>)> = BTreeMap::new();
        for m in all.iter().filter(|m| meta(m, KIND).as_deref() == Some("entity")) {
            if let Some(name) = meta(m, NAME) {
                entities.entry(name).or_insert_with(|| (m.clone(), Vec::new()));
            }
        }
        let mut relations = Vec::new();
        for m in &all {
            match meta(m, KIND).as_deref() {
                // An observation counts for the entity memory it derives from.
                Some("observation") => {
                    if let Some((e, obs)) = meta(m, ENTITY).and_then(|n| entities.get_mut(&n))
                        && m.parents.iter().any(|p| p.id == e.id)
                    {
                        obs.push(m.clone());
                    }
                }
                Some("relation") => {
                    if let (Some(from), Some(to), Some(relation_type)) = (meta(m, FROM), meta(m, TO), meta(m, RELATION)) {
                        let r = Relation { from, to, relation_type };
                        if entities.contains_key(&r.from) && entities.contains_key(&r.to) && !relations.iter().any(|(x, _)| *x == r) {
                            relations.push((r, m.clone()));
                        }
                    }
                }
                _ => {}
            }
        }
        debug_assert!(relations.iter().all(|(r, _)| entities.contains_key(&r.from) && entities.contains_key(&r.to)));
        Ok(Self { entities, relations })
    }

    fn entity(&self, name: &str) -> Option<&MemoryOut> {
        self.entities.get(name).map(|(m, _)| m)
    }

    /// The entities `keep` admits and every relation with an endpoint among them.
    fn answer(&self, keep: impl Fn(&str, &MemoryOut, &[MemoryOut]) -> bool) -> GraphOut {
        let mut out = GraphOut::default();
        for (name, (m, obs)) in &self.entities {
            if !keep(name, m, obs) {
                continue;
            }
            out.entities.push(EntityOut {
                name: name.clone(),
                entity_type: m.metadata.get(TYPE).cloned().unwrap_or_default(),
                observations: obs.iter().map(|o| o.content.clone()).collect(),
                memory_id: m.id.clone(),
                label: m.label.clone(),
            });
        }
        let kept: BTreeSet<&str> = out.entities.iter().map(|e| e.name.as_str()).collect();
        for (r, m) in &self.relations {
            if kept.contains(r.from.as_str()) || kept.contains(r.to.as_str()) {
                let (from, to, relation_type) = (r.from.clone(), r.to.clone(), r.relation_type.clone());
                out.relations.push(RelationOut { from, to, relation_type, memory_id: m.id.clone(), label: m.label.clone() });
            }
        }
        out
    }
}

fn bounded(tool: &str, field: &str, n: usize) -> Result<(), ApiError> {
    if n > BATCH_MAX {
        return Err(refuse(tool, field, format_args!("at most {BATCH_MAX} per call")));
    }
    Ok(())
}

fn nonempty(tool: &str, path: &str, s: &str) -> Result<(), ApiError> {
    if s.trim().is_empty() {
        return Err(refuse(tool, path, "must not be empty"));
    }
    Ok(())
}

fn write(engine: &Engine, actor: &Actor, content: String, parents: &[&str], metadata: BTreeMap<String, String>) -> Result<MemoryOut, ApiError> {
    let parents = parents.iter().map(|id| ParentIn { id: (*id).to_owned(), kind: EdgeKindName::DerivedFrom }).collect();
    let m = AddMemory { namespace: GRAPH_NAMESPACE.to_owned(), content, route: None, parents, readers: None, metadata, session: None, task: None };
    Ok(ops::add(engine, actor, m)?.item)
}

fn meta(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
}

fn create_entities(engine: &Engine, actor: &Actor, a: EntitiesArgs) -> Result<serde_json::Value, ApiError> {
    const TOOL: &str = "create_entities";
    bounded(TOOL, "entities", a.entities.len())?;
    for (n, e) in a.entities.iter().enumerate() {
        nonempty(TOOL, &format!("entities[{n}].name"), &e.name)?;
        nonempty(TOOL, &format!("entities[{n}].entityType"), &e.entity_type)?;
    }
    let view = View::read(engine, actor)?;
    let mut created: Vec<Entity> = Vec::new();
    for e in a.entities {
        if view.entity(&e.name).is_some() || created.iter().any(|c| c.name == e.name) {
            continue;
        }
        let m = write(engine, actor, format!("{} ({})", e.name, e.entity_type), &[], meta(&[(KIND, "entity"), (NAME, &e.name), (TYPE, &e.entity_type)]))?;
        let mut kept = Vec::new();
        for o in &e.observations {
            if o.trim().is_empty() || kept.contains(o) {
                continue;
            }
            write(engine, actor, o.clone(), &[&m.id], meta(&[(KIND, "observation"), (ENTITY, &e.name)]))?;
            kept.push(o.clone());
        }
        created.push(Entity { observations: kept, ..e });
    }
    Ok(json!({ "entities": created }))
}

fn create_relations(engine: &Engine, actor: &Actor, a: RelationsArgs) -> Result<serde_json::Value, ApiError> {
    const TOOL: &str = "create_relations";
    bounded(TOOL, "relations", a.relations.len())?;
    let view = View::read(engine, actor)?;
    for (n, r) in a.relations.iter().enumerate() {
        nonempty(TOOL, &format!("relations[{n}].relationType"), &r.relation_type)?;
        for (field, name) in [("from", &r.from), ("to", &r.to)] {
            if view.entity(name).is_none() {
                return Err(refuse(TOOL, &format!("relations[{n}].{field}"), "no entity of that name (among those the caller may read)"));
            }
        }
    }
    let mut created: Vec<Relation> = Vec::new();
    for r in a.relations {
        if view.relations.iter().any(|(x, _)| *x == r) || created.contains(&r) {
            continue;
        }
        let (Some(from), Some(to)) = (view.entity(&r.from), view.entity(&r.to)) else { continue };
        let text = format!("{} {} {}", r.from, r.relation_type, r.to);
        write(engine, actor, text, &[&from.id, &to.id], meta(&[(KIND, "relation"), (FROM, &r.from), (TO, &r.to), (RELATION, &r.relation_type)]))?;
        created.push(r);
    }
    Ok(json!({ "relations": created }))
}

fn add_observations(engine: &Engine, actor: &Actor, a: ObservationsArgs) -> Result<serde_json::Value, ApiError> {
    const TOOL: &str = "add_observations";
    bounded(TOOL, "observations", a.observations.len())?;
    let view = View::read(engine, actor)?;
    for (n, o) in a.observations.iter().enumerate() {
        if view.entity(&o.entity_name).is_none() {
            return Err(refuse(TOOL, &format!("observations[{n}].entityName"), "no entity of that name (among those the caller may read)"));
        }
        bounded(TOOL, &format!("observations[{n}].contents"), o.contents.len())?;
    }
    let mut results = Vec::new();
    for o in a.observations {
        let Some((entity, existing)) = view.entities.get(&o.entity_name) else { continue };
        let mut added: Vec<String> = Vec::new();
        for c in o.contents {
            if c.trim().is_empty() || existing.iter().any(|m| m.content == c) || added.contains(&c) {
                continue;
            }
            write(engine, actor, c.clone(), &[&entity.id], meta(&[(KIND, "observation"), (ENTITY, &o.entity_name)]))?;
            added.push(c);
        }
        results.push(json!({"entityName": o.entity_name, "addedObservations": added}));
    }
    Ok(json!({ "results": results }))
}

/// Erase `ids` as the caller (each with what derives from it alone); ids an earlier erasure took
/// are skipped.
fn erase_all(engine: &Engine, actor: &Actor, ids: Vec<String>) -> Result<usize, ApiError> {
    let mut gone: BTreeSet<String> = BTreeSet::new();
    let mut erased = 0usize;
    for id in ids {
        if gone.contains(&id) {
            continue;
        }
        let e = ops::erase(engine, actor, &id)?;
        erased += 1;
        gone.extend(e.erased);
    }
    Ok(erased)
}

fn delete_entities(engine: &Engine, actor: &Actor, a: EntityNamesArgs) -> Result<DeletedOut, ApiError> {
    bounded("delete_entities", "entityNames", a.entity_names.len())?;
    let view = View::read(engine, actor)?;
    let (found, missing): (Vec<&String>, Vec<&String>) = a.entity_names.iter().partition(|n| view.entity(n).is_some());
    // Erasing an entity's memory erases its observations and relations: they derive from it.
    let ids: Vec<String> = found.iter().filter_map(|n| view.entity(n)).map(|m| m.id.clone()).collect();
    erase_all(engine, actor, ids)?;
    let message = if missing.is_empty() {
        "Entities deleted successfully".to_owned()
    } else {
        let names: Vec<&str> = missing.iter().map(|s| s.as_str()).collect();
        format!("Deleted {} of {} entities. Not found: {}", found.len(), a.entity_names.len(), names.join(", "))
    };
    Ok(DeletedOut { success: true, message })
}

fn delete_observations(engine: &Engine, actor: &Actor, a: DeletionsArgs) -> Result<DeletedOut, ApiError> {
    bounded("delete_observations", "deletions", a.deletions.len())?;
    let view = View::read(engine, actor)?;
    let requested: usize = a.deletions.iter().map(|d| d.observations.len()).sum();
    let mut ids = Vec::new();
    let mut missing = Vec::new();
    for d in &a.deletions {
        match view.entities.get(&d.entity_name) {
            Some((_, obs)) => ids.extend(obs.iter().filter(|m| d.observations.contains(&m.content)).map(|m| m.id.clone())),
            None => missing.push(d.entity_name.as_str()),
        }
    }
    let deleted = erase_all(engine, actor, ids)?;
    let message = if deleted == requested {
        "Observations deleted successfully".to_owned()
    } else {
        let tail = if missing.is_empty() { String::new() } else { format!(" Entities not found: {}", missing.join(", ")) };
        format!("Deleted {deleted} of {requested} observations.{tail}")
    };
    Ok(DeletedOut { success: true, message })
}

fn delete_relations(engine: &Engine, actor: &Actor, a: RelationsArgs) -> Result<DeletedOut, ApiError> {
    bounded("delete_relations", "relations", a.relations.len())?;
    let view = View::read(engine, actor)?;
    let ids: Vec<String> = view.relations.iter().filter(|(r, _)| a.relations.contains(r)).map(|(_, m)| m.id.clone()).collect();
    let deleted = erase_all(engine, actor, ids)?;
    let message = if deleted == a.relations.len() {
        "Relations deleted successfully".to_owned()
    } else {
        format!("Deleted {deleted} of {} relations. The rest matched nothing.", a.relations.len())
    };
    Ok(DeletedOut { success: true, message })
}

fn search_nodes(engine: &Engine, actor: &Actor, a: QueryArgs) -> Result<GraphOut, ApiError> {
    if a.query.len() > QUERY_BYTES_MAX {
        return Err(refuse("search_nodes", "query", format_args!("at most {QUERY_BYTES_MAX} bytes")));
    }
    let q = a.query.to_lowercase();
    let hit = |s: &str| s.to_lowercase().contains(&q);
    let view = View::read(engine, actor)?;
    Ok(view.answer(|name, m, obs| hit(name) || m.metadata.get(TYPE).is_some_and(|t| hit(t)) || obs.iter().any(|o| hit(&o.content))))
}

fn open_nodes(engine: &Engine, actor: &Actor, a: NamesArgs) -> Result<GraphOut, ApiError> {
    bounded("open_nodes", "names", a.names.len())?;
    let view = View::read(engine, actor)?;
    Ok(view.answer(|name, _, _| a.names.iter().any(|n| n == name)))
}

fn entity_schema(extra: bool) -> serde_json::Value {
    let mut props = json!({"name": {"type": "string"}, "entityType": {"type": "string"}, "observations": {"type": "array", "items": {"type": "string"}}});
    if extra {
        props["memoryId"] = json!({"type": "string"});
        props["label"] = json!({"type": "string"});
    }
    json!({"type": "object", "required": ["name", "entityType", "observations"], "properties": props})
}

fn relation_schema(extra: bool) -> serde_json::Value {
    let mut props = json!({"from": {"type": "string"}, "to": {"type": "string"}, "relationType": {"type": "string"}});
    if extra {
        props["memoryId"] = json!({"type": "string"});
        props["label"] = json!({"type": "string"});
    }
    json!({"type": "object", "required": ["from", "to", "relationType"], "properties": props})
}

fn graph_schema() -> Arc<JsonObject> {
    schema::object(json!({"type": "object", "required": ["entities", "relations"], "properties": {
        "entities": {"type": "array", "items": entity_schema(true)},
        "relations": {"type": "array", "items": relation_schema(true)},
    }}))
}

fn entities_schema() -> Arc<JsonObject> {
    schema::object(json!({"type": "object", "required": ["entities"], "properties": {"entities": {"type": "array", "items": entity_schema(false)}}}))
}

fn relations_schema() -> Arc<JsonObject> {
    schema::object(json!({"type": "object", "required": ["relations"], "properties": {"relations": {"type": "array", "items": relation_schema(false)}}}))
}

fn added_schema() -> Arc<JsonObject> {
    schema::object(json!({"type": "object", "required": ["results"], "properties": {"results": {"type": "array", "items": {
        "type": "object", "required": ["entityName", "addedObservations"],
        "properties": {"entityName": {"type": "string"}, "addedObservations": {"type": "array", "items": {"type": "string"}}}
    }}}}))
}

fn deleted_schema() -> Arc<JsonObject> {
    schema::object(json!({"type": "object", "required": ["success", "message"], "properties": {"success": {"type": "boolean"}, "message": {"type": "string"}}}))
}

#[tool_router(router = graph_router, vis = "pub(super)")]
impl MemwardenMcp {
    /// `create_entities`.
    #[tool(name = "create_entities", description = "Create multiple new entities in the knowledge graph (an existing name is skipped). \
        Each entity and observation is a memory written as the caller, with the caller's origin and label.",
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = false, open_world_hint = false),
        output_schema = entities_schema())]
    async fn graph_create_entities(&self, Parameters(a): Parameters<EntitiesArgs>, ctx: RequestContext<RoleServer>) -> Result<CallToolResult, ErrorData> {
        self.call(&ctx, a, create_entities).await
    }

    /// `create_relations`.
    #[tool(name = "create_relations", description = "Create multiple new relations between entities in the knowledge graph. \
        Relations should be in active voice. Each is a memory derived from both entities.",
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = false, open_world_hint = false),
        output_schema = relations_schema())]
    async fn graph_create_relations(&self, Parameters(a): Parameters<RelationsArgs>, ctx: RequestContext<RoleServer>) -> Result<CallToolResult, ErrorData> {
        self.call(&ctx, a, create_relations).await
    }

    /// `add_observations`.
    #[tool(name = "add_observations", description = "Add new observations to existing entities in the knowledge graph \
        (each a memory derived from its entity).",
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = false, open_world_hint = false),
        output_schema = added_schema())]
    async fn graph_add_observations(&self, Parameters(a): Parameters<ObservationsArgs>, ctx: RequestContext<RoleServer>) -> Result<CallToolResult, ErrorData> {
        self.call(&ctx, a, add_observations).await
    }

    /// `delete_entities`.
    #[tool(name = "delete_entities", description = "Delete multiple entities and their associated relations from the knowledge \
        graph (erased with their observations and relations, which derive from them; the caller's own or, for a user, any).",
        annotations(read_only_hint = false, destructive_hint = true, idempotent_hint = true, open_world_hint = false),
        output_schema = deleted_schema())]
    async fn graph_delete_entities(&self, Parameters(a): Parameters<EntityNamesArgs>, ctx: RequestContext<RoleServer>) -> Result<CallToolResult, ErrorData> {
        self.call(&ctx, a, delete_entities).await
    }

    /// `delete_observations`.
    #[tool(name = "delete_observations", description = "Delete specific observations from entities in the knowledge graph.",
        annotations(read_only_hint = false, destructive_hint = true, idempotent_hint = true, open_world_hint = false),
        output_schema = deleted_schema())]
    async fn graph_delete_observations(&self, Parameters(a): Parameters<DeletionsArgs>, ctx: RequestContext<RoleServer>) -> Result<CallToolResult, ErrorData> {
        self.call(&ctx, a, delete_observations).await
    }

    /// `delete_relations`.
    #[tool(name = "delete_relations", description = "Delete multiple relations from the knowledge graph.",
        annotations(read_only_hint = false, destructive_hint = true, idempotent_hint = true, open_world_hint = false),
        output_schema = deleted_schema())]
    async fn graph_delete_relations(&self, Parameters(a): Parameters<RelationsArgs>, ctx: RequestContext<RoleServer>) -> Result<CallToolResult, ErrorData> {
        self.call(&ctx, a, delete_relations).await
    }

    /// `read_graph`.
    #[tool(name = "read_graph", description = "Read the entire knowledge graph the caller may read (each entity and relation \
        with its memory id and integrity label).",
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false),
        output_schema = graph_schema())]
    async fn graph_read(&self, Parameters(a): Parameters<NoArgs>, ctx: RequestContext<RoleServer>) -> Result<CallToolResult, ErrorData> {
        self.call(&ctx, a, |e, actor, _| Ok(View::read(e, actor)?.answer(|_, _, _| true))).await
    }

    /// `search_nodes`.
    #[tool(name = "search_nodes", description = "Search for nodes in the knowledge graph based on a query (matched against entity \
        names, types and observation content, case-insensitive); relations with an endpoint among them are included.",
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false),
        output_schema = graph_schema())]
    async fn graph_search_nodes(&self, Parameters(a): Parameters<QueryArgs>, ctx: RequestContext<RoleServer>) -> Result<CallToolResult, ErrorData> {
        self.call(&ctx, a, search_nodes).await
    }

    /// `open_nodes`.
    #[tool(name = "open_nodes", description = "Open specific nodes in the knowledge graph by their names; relations with an \
        endpoint among them are included.",
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false),
        output_schema = graph_schema())]
    async fn graph_open_nodes(&self, Parameters(a): Parameters<NamesArgs>, ctx: RequestContext<RoleServer>) -> Result<CallToolResult, ErrorData> {
        self.call(&ctx, a, open_nodes).await
    }
}
