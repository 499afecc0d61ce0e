//! The operations behind every door (HTTP and MCP): parse wire types into engine types, call the
//! engine as the authenticated actor, render the result. Synchronous: callers run them on a
//! blocking thread. No decision is made here; the engine and its gates make them all.

use crate::dto::*;
use crate::otel::OpSpan;
use crate::problem::ApiError;
use memwarden_core::authority::grant::SignedGrant;
use memwarden_core::prelude::*;
use memwarden_engine::{Actor, Engine, EngineError, PAGE_LIMIT_DEFAULT, ReadMemory, SessionKind};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// Convert between a wire enum and the core enum of the same snake_case names.
fn conv<A: Serialize, B: DeserializeOwned>(a: A, what: &str) -> Result<B, ApiError> {
    serde_json::to_value(a).ok().and_then(|v| serde_json::from_value(v).ok()).ok_or_else(|| ApiError::invalid(format!("bad {what}")))
}

/// The snake_case name of a serde enum.
pub(crate) fn name<T: Serialize>(t: &T) -> String {
    match serde_json::to_value(t) {
        Ok(serde_json::Value::String(s)) => s,
        Ok(v) => v.to_string(),
        Err(_) => String::new(),
    }
}

/// Parse a memory id.
pub fn parse_id(s: &str) -> Result<ItemId, ApiError> {
    ItemId::parse(s).map_err(|e| ApiError::invalid(e.to_string()))
}

fn parse_ids(v: &[String]) -> Result<Vec<ItemId>, ApiError> {
    v.iter().map(|s| parse_id(s)).collect()
}

fn namespace(s: &str) -> Result<Namespace, ApiError> {
    Ok(Namespace::new(s)?)
}

/// Render a memory.
pub fn memory_out(i: &MemoryItem) -> MemoryOut {
    MemoryOut {
        id: i.id().to_string(),
        tenant: i.tenant().to_string(),
        namespace: i.namespace().to_string(),
        content: i.content().to_owned(),
        origin: i.origin().as_str().to_owned(),
        label: i.label().integrity().as_str().to_owned(),
        act_class: name(&i.act_class()),
        writer: i.writer().to_string(),
        reported_by: i.reported_by().map(ToString::to_string),
        route: i.route().as_str().to_owned(),
        parents: i.parents().iter().map(|p| ParentOut { id: p.id.to_string(), kind: p.kind.as_str().to_owned() }).collect(),
        readers: match &i.scope().readers {
            Readers::All => None,
            Readers::Only(s) => Some(s.iter().map(|p| p.to_string()).collect()),
        },
        visibility: name(&i.scope().visibility),
        status: name(&i.status()),
        created_ms: i.created_ms(),
        session: i.session().map(str::to_owned),
        task: i.task().map(str::to_owned),
        metadata: i.metadata().clone(),
        superseded_by: i.superseded_by().map(|s| s.to_string()),
        risk: None,
        risk_flags: Vec::new(),
    }
}

/// Render a memory read by id or listed, with the risk the lifecycle scorer saw in it.
pub fn read_out(r: &ReadMemory) -> MemoryOut {
    MemoryOut { risk: r.risk, risk_flags: r.risk_flags.iter().map(|f| (*f).to_owned()).collect(), ..memory_out(&r.item) }
}

/// Render a memory a layer withheld (no text).
pub fn withheld_out(w: &memwarden_engine::WithheldMemory) -> WithheldOut {
    WithheldOut { id: w.id.to_string(), layer: w.layer.as_str().to_owned(), rule: w.rule.clone(), flags: w.flags.clone() }
}

/// Render a principal.
pub fn principal_out(p: &Principal) -> PrincipalOut {
    PrincipalOut {
        tenant: p.tenant.to_string(),
        id: p.id.to_string(),
        kind: p.kind.as_str().to_owned(),
        integrity: p.integrity().as_str().to_owned(),
        origin: p.origin().as_str().to_owned(),
        domain: p.domain.as_ref().map(|d| d.to_string()),
        allow_listed: p.allow_listed,
        public_key: p.public_key.map(hex::encode),
    }
}

fn write_request(actor: &Actor, m: AddMemory) -> Result<WriteRequest, ApiError> {
    let route = match m.route {
        Some(r) => conv(r, "route")?,
        None => default_route(actor.principal().kind),
    };
    let mut req = WriteRequest::new(namespace(&m.namespace)?, m.content, route);
    req.parents = m
        .parents
        .iter()
        .map(|p| Ok(ParentRef { id: parse_id(&p.id)?, kind: conv(p.kind, "parent kind")? }))
        .collect::<Result<_, ApiError>>()?;
    if let Some(rs) = m.readers {
        req.readers = Some(rs.iter().map(|r| PrincipalId::new(r)).collect::<Result<_, _>>()?);
    }
    req.metadata = m.metadata;
    req.session = m.session;
    req.task = m.task;
    Ok(req)
}

/// Run `f` in an operation span (`gen_ai.operation.name` = `operation`; a no-op unless tracing
/// export is on and the call serves a request): `f` adds the attributes, the span ends with its
/// outcome. Attributes carry ids, namespaces, counts and labels, never memory text or queries.
fn traced<T>(operation: &'static str, f: impl FnOnce(&mut OpSpan) -> Result<T, ApiError>) -> Result<T, ApiError> {
    let mut span = OpSpan::start(operation);
    let r = f(&mut span);
    span.end(&r);
    r
}

/// Longest tool name put in a span (the caller chooses it).
const TOOL_NAME_CHARS_MAX: usize = 128;

/// The attributes of a written memory.
fn written(span: &mut OpSpan, m: &MemoryOut) {
    span.set(attr::MEMORY_ID, || m.id.clone());
    span.set(attr::MEMORY_NAMESPACE, || m.namespace.clone());
    span.set(attr::MEMORY_LABEL, || m.label.clone());
}

/// The span attribute names (see ARCHITECTURE.md, "Tracing").
pub mod attr {
    /// The memory's id.
    pub const MEMORY_ID: &str = "gen_ai.memory.id";
    /// The memory's namespace.
    pub const MEMORY_NAMESPACE: &str = "gen_ai.memory.namespace";
    /// The integrity label a memory was stored or read with.
    pub const MEMORY_LABEL: &str = "memwarden.memory.label";
    /// How many memories a batch held.
    pub const BATCH_SIZE: &str = "memwarden.batch.size";
    /// How many memories a batch stored.
    pub const BATCH_STORED: &str = "memwarden.batch.stored_count";
    /// Results asked for.
    pub const TOP_K: &str = "gen_ai.retrieval.top_k";
    /// Results returned.
    pub const DOCUMENTS: &str = "gen_ai.retrieval.documents.count";
    /// Results a layer withheld.
    pub const WITHHELD: &str = "memwarden.retrieval.withheld_count";
    /// Memories an erasure removed.
    pub const ERASED: &str = "memwarden.memory.erased_count";
    /// The guardrail's name (`memwarden`).
    pub const GUARDRAIL_NAME: &str = "gen_ai.guardrail.name";
    /// The guardrail policy: the preset of defense layers.
    pub const GUARDRAIL_POLICY: &str = "gen_ai.guardrail.policy";
    /// The decision: allow, redact, reverify, ask_user, block.
    pub const GUARDRAIL_RESULT: &str = "gen_ai.guardrail.result";
    /// The verdict's rule name (a code, never a value).
    pub const GUARDRAIL_REASON: &str = "gen_ai.guardrail.reason";
    /// The layer that decided.
    pub const GUARDRAIL_LAYER: &str = "memwarden.guardrail.layer";
    /// The proposed action's tool.
    pub const TOOL_NAME: &str = "gen_ai.tool.name";
}

/// A `POST /v1/memories` body (one memory, or `{"memories": [...]}`), parsed as every door
/// parses it: an error names the field, never echoes the caller's text.
pub fn add_request(body: serde_json::Value) -> Result<AddRequest, ApiError> {
    AddRequest::from_value(body).map_err(|e| ApiError::invalid(crate::strict::redact(&e)))
}

/// Add one memory as `actor`.
pub fn add(engine: &Engine, actor: &Actor, m: AddMemory) -> Result<WriteOut, ApiError> {
    traced("create_memory", |span| {
        let (item, r) = engine.add(actor, write_request(actor, m)?)?;
        let out = WriteOut { item: memory_out(&item), log_index: r.log_index };
        written(span, &out.item);
        Ok(out)
    })
}

/// Add many memories as `actor` (at most `batch_max`); each succeeds or fails on its own.
pub fn add_many(engine: &Engine, actor: &Actor, ms: Vec<AddMemory>, batch_max: usize) -> Result<BatchOut, ApiError> {
    traced("create_memory", |span| {
        span.set(attr::BATCH_SIZE, || ms.len());
        let out = add_many_untraced(engine, actor, ms, batch_max)?;
        span.set(attr::BATCH_STORED, || out.results.iter().filter(|r| r.ok).count());
        Ok(out)
    })
}

fn add_many_untraced(engine: &Engine, actor: &Actor, ms: Vec<AddMemory>, batch_max: usize) -> Result<BatchOut, ApiError> {
    if ms.is_empty() || ms.len() > batch_max {
        return Err(ApiError::invalid(format!("a batch holds 1..={batch_max} memories; got {}", ms.len())));
    }
    let n = ms.len();
    let mut results: Vec<Option<BatchItemOut>> = vec![None; n];
    let mut reqs = Vec::with_capacity(n);
    let mut slots = Vec::with_capacity(n);
    for (i, m) in ms.into_iter().enumerate() {
        match write_request(actor, m) {
            Ok(r) => {
                reqs.push(r);
                slots.push(i);
            }
            Err(e) => results[i] = Some(BatchItemOut { index: i, ok: false, id: None, log_index: None, error: Some(e.problem()) }),
        }
    }
    if !reqs.is_empty() {
        for (i, outcome) in slots.into_iter().zip(engine.add_many(actor, reqs)?) {
            results[i] = Some(match outcome {
                Ok((id, r)) => BatchItemOut { index: i, ok: true, id: Some(id.to_string()), log_index: Some(r.log_index), error: None },
                Err(e) => BatchItemOut { index: i, ok: false, id: None, log_index: None, error: Some(ApiError::from(e).problem()) },
            });
        }
    }
    let results = results
        .into_iter()
        .enumerate()
        .map(|(i, r)| r.unwrap_or_else(|| BatchItemOut { index: i, ok: false, id: None, log_index: None, error: Some(ApiError::internal("lost batch result").problem()) }))
        .collect();
    Ok(BatchOut { results })
}

/// Read one memory by id.
pub fn get(engine: &Engine, actor: &Actor, id: &str) -> Result<MemoryOut, ApiError> {
    traced("get_memory", |span| {
        let id = parse_id(id)?;
        span.set(attr::MEMORY_ID, || id.to_string());
        let out = read_out(&engine.get_scored(actor, &id)?);
        span.set(attr::MEMORY_NAMESPACE, || out.namespace.clone());
        span.set(attr::MEMORY_LABEL, || out.label.clone());
        Ok(out)
    })
}

/// Revoke a memory (its owner or a user).
pub fn revoke(engine: &Engine, actor: &Actor, id: &str, r: RevokeIn) -> Result<MemoryRevokedOut, ApiError> {
    traced("revoke_memory", |span| {
        if let Ok(parsed) = parse_id(id) {
            span.set(attr::MEMORY_ID, || parsed.to_string());
        }
        revoke_untraced(engine, actor, id, r)
    })
}

fn revoke_untraced(engine: &Engine, actor: &Actor, id: &str, r: RevokeIn) -> Result<MemoryRevokedOut, ApiError> {
    let id = parse_id(id)?;
    let receipt = engine.revoke(actor, &id, &r.reason)?;
    Ok(MemoryRevokedOut { id: id.to_string(), log_index: receipt.log_index })
}

fn elevation_out(e: &memwarden_core::authority::Elevation, counts: bool) -> ElevationOut {
    ElevationOut {
        key: e.key.clone(),
        value: e.value.canonical.clone(),
        exact: e.value.exact.clone(),
        kind: name(&e.value.kind),
        attesters: e.attesters.clone(),
        evidence: e.evidence.iter().map(ToString::to_string).collect(),
        created_ms: e.created_ms,
        counts,
    }
}

/// One page of the tenant's elevations (users only).
pub fn elevations(engine: &Engine, actor: &Actor, limit: Option<usize>, cursor: Option<&str>) -> Result<ElevationsOut, ApiError> {
    traced("list_elevations", |_| elevations_untraced(engine, actor, limit, cursor))
}

/// [`elevations`] without its span.
fn elevations_untraced(engine: &Engine, actor: &Actor, limit: Option<usize>, cursor: Option<&str>) -> Result<ElevationsOut, ApiError> {
    let page = engine.elevations_page(actor, limit.unwrap_or(PAGE_LIMIT_DEFAULT), cursor)?;
    Ok(ElevationsOut { elevations: page.items.iter().map(|(e, counts)| elevation_out(e, *counts)).collect(), next_cursor: page.next_cursor })
}

/// Withdraw an elevation (users only); logged.
pub fn withdraw_elevation(engine: &Engine, actor: &Actor, w: WithdrawElevationIn) -> Result<ElevationWithdrawnOut, ApiError> {
    traced("withdraw_elevation", |_| withdraw_elevation_untraced(engine, actor, w))
}

/// [`withdraw_elevation`] without its span.
fn withdraw_elevation_untraced(engine: &Engine, actor: &Actor, w: WithdrawElevationIn) -> Result<ElevationWithdrawnOut, ApiError> {
    let (e, receipt) = engine.withdraw_elevation(actor, &w.key, conv(w.kind, "value kind")?, &w.value, &w.reason)?;
    Ok(ElevationWithdrawnOut { withdrawn: elevation_out(&e, false), log_index: receipt.log_index })
}

/// Report a memory poisoned (users, tools, its owner).
pub fn flag_poisoned(engine: &Engine, actor: &Actor, id: &str) -> Result<MemoryMarkedOut, ApiError> {
    traced("flag_memory", |span| {
        if let Ok(parsed) = parse_id(id) {
            span.set(attr::MEMORY_ID, || parsed.to_string());
        }
        flag_poisoned_untraced(engine, actor, id)
    })
}

fn flag_poisoned_untraced(engine: &Engine, actor: &Actor, id: &str) -> Result<MemoryMarkedOut, ApiError> {
    let id = parse_id(id)?;
    let receipt = engine.flag_poisoned(actor, &id)?;
    Ok(MemoryMarkedOut { id: id.to_string(), mark: "poisoned".into(), log_index: receipt.log_index })
}

/// Verify a memory (users, allow-listed tools).
pub fn verify_memory(engine: &Engine, actor: &Actor, id: &str) -> Result<MemoryMarkedOut, ApiError> {
    traced("verify_memory", |span| {
        if let Ok(parsed) = parse_id(id) {
            span.set(attr::MEMORY_ID, || parsed.to_string());
        }
        verify_memory_untraced(engine, actor, id)
    })
}

fn verify_memory_untraced(engine: &Engine, actor: &Actor, id: &str) -> Result<MemoryMarkedOut, ApiError> {
    let id = parse_id(id)?;
    let receipt = engine.verify(actor, &id)?;
    Ok(MemoryMarkedOut { id: id.to_string(), mark: "verified".into(), log_index: receipt.log_index })
}

/// Promote a memory (widen its readers; its owner only).
pub fn promote(engine: &Engine, actor: &Actor, id: &str, p: PromoteIn) -> Result<WriteOut, ApiError> {
    traced("promote_memory", |span| {
        if let Ok(parsed) = parse_id(id) {
            span.set(attr::MEMORY_ID, || parsed.to_string());
        }
        promote_untraced(engine, actor, id, p)
    })
}

fn promote_untraced(engine: &Engine, actor: &Actor, id: &str, p: PromoteIn) -> Result<WriteOut, ApiError> {
    let id = parse_id(id)?;
    let readers = match p.readers {
        None => Readers::All,
        Some(v) => Readers::Only(v.iter().map(|r| PrincipalId::new(r)).collect::<Result<_, _>>()?),
    };
    let (item, receipt) = engine.promote(actor, &id, readers)?;
    Ok(WriteOut { item: memory_out(&item), log_index: receipt.log_index })
}

/// Update a memory: a new version (the old one is superseded).
pub fn update(engine: &Engine, actor: &Actor, id: &str, content: String) -> Result<UpdatedOut, ApiError> {
    traced("update_memory", |span| {
        let id = parse_id(id)?;
        span.set("memwarden.memory.previous_id", || id.to_string());
        let (item, receipt) = engine.update(actor, &id, content)?;
        let out = UpdatedOut { memory: memory_out(&item), previous_id: id.to_string(), log_index: receipt.log_index };
        written(span, &out.memory);
        Ok(out)
    })
}

/// One page of the versions of a memory the caller may see.
pub fn history(engine: &Engine, actor: &Actor, id: &str, limit: Option<usize>, cursor: Option<&str>) -> Result<HistoryOut, ApiError> {
    traced("get_memory_history", |span| {
        if let Ok(parsed) = parse_id(id) {
            span.set(attr::MEMORY_ID, || parsed.to_string());
        }
        history_untraced(engine, actor, id, limit, cursor)
    })
}

fn history_untraced(engine: &Engine, actor: &Actor, id: &str, limit: Option<usize>, cursor: Option<&str>) -> Result<HistoryOut, ApiError> {
    let id = parse_id(id)?;
    match engine.history_page(actor, &id, limit.unwrap_or(PAGE_LIMIT_DEFAULT), cursor) {
        Ok(page) => Ok(HistoryOut { versions: page.items.iter().map(memory_out).collect(), erased: None, next_cursor: page.next_cursor }),
        // Mem0 keeps a DELETE row: an erased memory's history is the erasure (no text), for
        // those who could read the memory.
        Err(EngineError::NotFound(_)) => match engine.erasure_of(actor, &id)? {
            Some(r) => Ok(HistoryOut {
                versions: Vec::new(),
                erased: Some(ErasureNoteOut { erasure_id: r.erasure_id.to_string(), root: r.root.to_string(), erased_by: r.requested_by.to_string(), at_ms: r.at_ms }),
                next_cursor: None,
            }),
            None => Err(EngineError::NotFound(id).into()),
        },
        Err(e) => Err(e.into()),
    }
}

/// Report a task outcome for the memories it used (lifecycle layer).
pub fn feedback(engine: &Engine, actor: &Actor, f: FeedbackIn) -> Result<FeedbackOut, ApiError> {
    traced("record_feedback", |_| feedback_untraced(engine, actor, f))
}

/// [`feedback`] without its span.
fn feedback_untraced(engine: &Engine, actor: &Actor, f: FeedbackIn) -> Result<FeedbackOut, ApiError> {
    let ids = parse_ids(&f.used)?;
    let (records, receipt) = engine.feedback(actor, &ids, f.success)?;
    let mut sorted = ids;
    sorted.sort();
    sorted.dedup();
    Ok(FeedbackOut {
        updated: sorted
            .iter()
            .zip(&records)
            .map(|(id, r)| {
                let g = &r.after.guard;
                GuardOut { id: id.to_string(), q: g.q, tau: g.tau, h: g.h, successes: g.successes, failures: g.failures }
            })
            .collect(),
        log_index: receipt.log_index,
    })
}

/// Erase a memory and what depends on it alone.
pub fn erase(engine: &Engine, actor: &Actor, id: &str) -> Result<MemoryErasedOut, ApiError> {
    traced("delete_memory", |span| {
        let id = parse_id(id)?;
        span.set(attr::MEMORY_ID, || id.to_string());
        let out = erase_untraced(engine, actor, &id)?;
        span.set(attr::ERASED, || out.erased.len());
        Ok(out)
    })
}

fn erase_untraced(engine: &Engine, actor: &Actor, id: &ItemId) -> Result<MemoryErasedOut, ApiError> {
    let (record, receipt) = engine.erase(actor, id)?;
    Ok(MemoryErasedOut {
        erasure_id: record.erasure_id.to_string(),
        id: id.to_string(),
        erased: record.erased.iter().map(ToString::to_string).collect(),
        survivors: record.survivors.iter().map(ToString::to_string).collect(),
        seen_marked: record.seen_marked.iter().map(ToString::to_string).collect(),
        log_index: receipt.log_index,
    })
}

/// Issue a session handle to the caller's principal.
pub fn open_session(engine: &Engine, actor: &Actor, s: SessionIn) -> Result<SessionOut, ApiError> {
    traced("open_session", |_| open_session_untraced(engine, actor, s))
}

/// [`open_session`] without its span.
fn open_session_untraced(engine: &Engine, actor: &Actor, s: SessionIn) -> Result<SessionOut, ApiError> {
    let kind = match s.kind {
        SessionKindName::Fork => SessionKind::Fork,
        SessionKindName::Planning => SessionKind::Planning,
        SessionKindName::Quarantine => SessionKind::Quarantine,
    };
    let (handle, receipt) = engine.open_session(actor, kind)?;
    let opened = engine.authenticate_issued(actor.tenant(), actor.id(), handle.clone())?;
    let floor = engine.observed(&opened)?.floor();
    let kind = memwarden_engine::session_kind_of(&handle).unwrap_or(kind);
    Ok(SessionOut { session: handle.to_string(), kind: kind.as_str().to_owned(), floor: floor.as_str().to_owned(), log_index: receipt.log_index })
}

/// One page of the memories of a namespace the actor may read (after `cursor`).
pub fn list(engine: &Engine, actor: &Actor, ns: &str, limit: usize, cursor: Option<&str>) -> Result<ListOut, ApiError> {
    traced("list_memories", |span| {
        let ns = namespace(ns)?;
        span.set(attr::MEMORY_NAMESPACE, || ns.to_string());
        span.set(attr::TOP_K, || limit);
        let page = engine.list_page(actor, &ns, limit, cursor)?;
        let listing = page.items;
        span.set(attr::DOCUMENTS, || listing.memories.len());
        span.set(attr::WITHHELD, || listing.withheld.len());
        Ok(ListOut { results: listing.memories.iter().map(read_out).collect(), withheld: listing.withheld.iter().map(withheld_out).collect(), next_cursor: page.next_cursor })
    })
}

/// Semantic search.
pub fn search(engine: &Engine, actor: &Actor, s: SearchIn) -> Result<SearchOut, ApiError> {
    traced("search_memory", |span| {
        let ns = namespace(&s.namespace)?;
        span.set(attr::MEMORY_NAMESPACE, || ns.to_string());
        span.set(attr::TOP_K, || s.k);
        let out = search_untraced(engine, actor, s)?;
        span.set(attr::DOCUMENTS, || out.results.len());
        span.set(attr::WITHHELD, || out.withheld_memories.len());
        Ok(out)
    })
}

fn search_untraced(engine: &Engine, actor: &Actor, s: SearchIn) -> Result<SearchOut, ApiError> {
    let min_label = match s.min_label {
        None | Some(LabelName::Untrusted) => Integrity::Untrusted,
        Some(LabelName::Agent) => Integrity::Agent,
        Some(LabelName::Trusted) => Integrity::Trusted,
    };
    let found = engine.search_report(actor, &namespace(&s.namespace)?, &s.query, s.k, min_label)?;
    Ok(SearchOut {
        withheld: found.withheld,
        withheld_memories: found
            .withheld_memories
            .iter()
            .map(|w| WithheldHitOut { id: w.memory.id.to_string(), layer: w.memory.layer.as_str().to_owned(), rule: w.memory.rule.clone(), flags: w.memory.flags.clone(), similarity: w.similarity })
            .collect(),
        results: found
            .hits
            .iter()
            .map(|h| HitOut {
                id: h.item.id().to_string(),
                memory: h.item.content().to_owned(),
                score: h.score,
                similarity: h.similarity,
                path_trust: h.path_trust,
                risk: h.risk,
                risk_flags: h.risk_flags.iter().map(|f| (*f).to_owned()).collect(),
                item: memory_out(&h.item),
            })
            .collect(),
    })
}

/// Derive a memory from parents.
pub fn derive(engine: &Engine, actor: &Actor, d: DeriveIn) -> Result<WriteOut, ApiError> {
    traced("create_memory", |span| {
        span.set("memwarden.memory.parents_count", || d.parents.len());
        let (item, r) = engine.derive(actor, namespace(&d.namespace)?, &parse_ids(&d.parents)?, d.content)?;
        let out = WriteOut { item: memory_out(&item), log_index: r.log_index };
        written(span, &out.item);
        Ok(out)
    })
}

/// A tool call through the monitor.
pub fn tool_call(engine: &Engine, actor: &Actor, t: ToolCallIn) -> Result<WriteOut, ApiError> {
    traced("create_memory", |span| {
        span.set("memwarden.memory.source", || "tool_call");
        let out = tool_call_untraced(engine, actor, t)?;
        written(span, &out.item);
        Ok(out)
    })
}

fn tool_call_untraced(engine: &Engine, actor: &Actor, t: ToolCallIn) -> Result<WriteOut, ApiError> {
    let args = t
        .args
        .iter()
        .map(|a| Ok(ToolArg { key: a.key.clone(), value: a.value.clone(), kind: conv(a.kind, "value kind")?, sources: parse_ids(&a.sources)? }))
        .collect::<Result<Vec<_>, ApiError>>()?;
    let tool = PrincipalId::new(&t.tool)?;
    let signature = match &t.signature {
        None => None,
        Some(h) => {
            let mut sig = [0u8; 64];
            hex::decode_to_slice(h, &mut sig).map_err(|_| ApiError::invalid("signature must be 128 hex digits"))?;
            Some(sig)
        }
    };
    let (item, r) = engine.tool_call_signed(actor, &tool, namespace(&t.namespace)?, args, &parse_ids(&t.inputs)?, t.output, signature.as_ref())?;
    Ok(WriteOut { item: memory_out(&item), log_index: r.log_index })
}

/// Attest a value as the actor.
pub fn attest(engine: &Engine, actor: &Actor, a: AttestIn) -> Result<AttestOut, ApiError> {
    traced("attest_value", |_| attest_untraced(engine, actor, a))
}

/// [`attest`] without its span.
fn attest_untraced(engine: &Engine, actor: &Actor, a: AttestIn) -> Result<AttestOut, ApiError> {
    let (att, r) = engine.attest(actor, &a.key, &a.value, conv(a.kind, "value kind")?, &parse_ids(&a.sources)?)?;
    Ok(AttestOut {
        counts: att.label == Integrity::Trusted,
        attestation: AttestationOut {
            attester: att.attester.to_string(),
            independence: att.independence.clone(),
            key: att.key.clone(),
            value: att.value.canonical.clone(),
            kind: name(&att.value.kind),
            label: att.label.as_str().to_owned(),
            sources: att.sources.iter().map(ToString::to_string).collect(),
            created_ms: att.created_ms,
        },
        log_index: r.log_index,
    })
}

fn signed_grant(v: serde_json::Value) -> Result<SignedGrant, ApiError> {
    serde_json::from_value(v).map_err(|e| ApiError::invalid(format!("not a signed grant: {}", crate::strict::redact(&e))))
}

/// Longest tool name or value key a grant may bind.
pub const GRANT_NAME_BYTES_MAX: usize = 128;
/// Default grant lifetime for `prepare_grant` (10 minutes).
pub const GRANT_TTL_MS_DEFAULT: u64 = 600_000;

/// Prepare a grant for the actor (a user with a registered public key) to sign elsewhere: the
/// user's key never reaches the server.
pub fn prepare_grant(engine: &Engine, actor: &Actor, g: PrepareGrantIn) -> Result<PreparedGrantOut, ApiError> {
    traced("prepare_grant", |_| prepare_grant_untraced(engine, actor, g))
}

/// [`prepare_grant`] without its span.
fn prepare_grant_untraced(engine: &Engine, actor: &Actor, g: PrepareGrantIn) -> Result<PreparedGrantOut, ApiError> {
    let p = actor.principal();
    if p.kind != PrincipalKind::User {
        return Err(ApiError::forbidden("only a user grants an action"));
    }
    if p.public_key.is_none() {
        return Err(ApiError::forbidden("this user has no registered public key to verify a grant with"));
    }
    for (what, v) in [("tool", &g.tool), ("key", &g.key)] {
        if v.is_empty() || v.len() > GRANT_NAME_BYTES_MAX {
            return Err(ApiError::invalid(format!("{what} must be 1..={GRANT_NAME_BYTES_MAX} bytes")));
        }
    }
    let spec = memwarden_engine::keys::GrantSpec {
        store: engine.store_id(),
        tool: &g.tool,
        key: &g.key,
        value: &g.value,
        kind: conv(g.kind, "value kind")?,
        amount: g.amount.as_deref(),
        ttl_ms: g.ttl_ms.unwrap_or(GRANT_TTL_MS_DEFAULT),
    };
    let grant = memwarden_engine::keys::prepare_grant(actor.tenant(), actor.id(), &spec, engine.now_ms())?;
    Ok(PreparedGrantOut {
        signing_bytes_hex: hex::encode(grant.signing_bytes()),
        nonce: grant.nonce_hex(),
        grant: serde_json::to_value(&grant).map_err(ApiError::internal)?,
    })
}

/// Record (for audit) a grant a user of the actor's tenant signed.
pub fn record_grant(engine: &Engine, actor: &Actor, g: serde_json::Value) -> Result<GrantOut, ApiError> {
    traced("record_grant", |_| record_grant_untraced(engine, actor, g))
}

/// [`record_grant`] without its span.
fn record_grant_untraced(engine: &Engine, actor: &Actor, g: serde_json::Value) -> Result<GrantOut, ApiError> {
    let g = signed_grant(g)?;
    // Input check, not a policy: a key can only record grants of its own tenant.
    if g.grant.tenant != *actor.tenant() {
        return Err(ApiError::forbidden("the grant belongs to another tenant"));
    }
    let r = engine.record_grant(&g)?;
    Ok(GrantOut { nonce: g.grant.nonce_hex(), log_index: r.log_index })
}

/// Render a verdict.
pub fn verdict_out(v: &Verdict) -> VerdictOut {
    let rule = serde_json::to_value(&v.rule).unwrap_or_default();
    VerdictOut {
        decision: v.decision.as_str().to_owned(),
        layer: v.layer.as_str().to_owned(),
        rule: rule.get("rule").and_then(|r| r.as_str()).unwrap_or_default().to_owned(),
        code: match &v.rule {
            Rule::GrantRefused { code, .. } => Some(code.clone()),
            Rule::Lineage { gate_rule, .. } => Some(gate_rule.clone()),
            _ => None,
        },
        cause: v.cause.clone(),
        supporting: v.supporting.iter().map(ToString::to_string).collect(),
        affected: v.affected.iter().map(ToString::to_string).collect(),
        pushed: v.pushed.iter().map(|p| serde_json::to_value(p).unwrap_or_default()).collect(),
        ask: v
            .ask
            .iter()
            .map(|a| GrantRequestOut { tool: a.tool.clone(), key: a.key.clone(), kind: name(&a.kind), value: a.value.clone(), amount: a.amount.clone() })
            .collect(),
        threshold: v.threshold,
    }
}

/// Decide a proposed action (Algorithm 1, in the engine).
///
/// Traced as a guardrail span (`apply_guardrail memwarden`): the policy (preset), the result
/// (decision), the reason (the verdict's rule name) and the deciding layer; never a value, an
/// amount or a memory's text.
pub fn decide(engine: &Engine, actor: &Actor, d: DecideIn) -> Result<DecideOut, ApiError> {
    traced("apply_guardrail", |span| {
        span.set(attr::GUARDRAIL_NAME, || "memwarden");
        if let Some(policy) = span.policy().map(str::to_owned) {
            span.set(attr::GUARDRAIL_POLICY, || policy);
        }
        span.set(attr::TOOL_NAME, || d.tool.chars().take(TOOL_NAME_CHARS_MAX).collect::<String>());
        let out = decide_untraced(engine, actor, d)?;
        span.set(attr::GUARDRAIL_RESULT, || out.verdict.decision.clone());
        span.set(attr::GUARDRAIL_REASON, || out.verdict.rule.clone());
        span.set(attr::GUARDRAIL_LAYER, || out.verdict.layer.clone());
        Ok(out)
    })
}

fn decide_untraced(engine: &Engine, actor: &Actor, d: DecideIn) -> Result<DecideOut, ApiError> {
    let values = d
        .values
        .iter()
        .map(|a| Ok(ActionValue { key: a.key.clone(), value: a.value.clone(), kind: conv(a.kind, "value kind")?, sources: parse_ids(&a.sources)? }))
        .collect::<Result<Vec<_>, ApiError>>()?;
    let grants = d.grants.into_iter().map(signed_grant).collect::<Result<Vec<_>, _>>()?;
    let action = ActionRequest {
        tool: d.tool,
        kind: conv(d.kind, "action kind")?,
        risk: conv(d.risk, "risk")?,
        values,
        amount: d.amount,
        context: parse_ids(&d.context)?,
        grants,
    };
    let (v, r) = engine.decide(actor, &action)?;
    Ok(DecideOut { verdict: verdict_out(&v), log_index: r.log_index })
}

/// Verify the verdict log: `tenant`'s own log (an API key's tenant: its chain, checkpoints,
/// witness and rows; no figure of any other tenant), or every log (`None`: the admin token).
pub fn verify(engine: &Engine, tenant: Option<&TenantId>) -> Result<VerifyOut, ApiError> {
    let store = engine.store();
    let r = match tenant {
        Some(t) => store.verify_log_of(t),
        None => store.verify_log(),
    }
    .map_err(ApiError::internal)?;
    Ok(VerifyOut {
        ok: r.is_ok(),
        entries: r.entries,
        root: hex::encode(r.root),
        head: hex::encode(r.head),
        checkpoints_checked: r.checkpoints_checked,
        first_bad_index: r.first_bad_index(),
        problem: r.problem.as_ref().map(ToString::to_string),
    })
}

/// Sign a checkpoint now: of the signer's tenant's log, or of every log (`None`: the admin
/// token; the answer is then the whole store's view). Only a **user** signs (an agent, tool or
/// source is refused with 403): a signed tree head is an attestation about the tenant's log,
/// made by a human or the operator.
pub fn checkpoint(engine: &Engine, signer: Option<&Actor>) -> Result<CheckpointOut, ApiError> {
    let store = engine.store();
    let c = match signer {
        Some(a) if a.principal().kind != PrincipalKind::User => return Err(ApiError::forbidden("signing a checkpoint needs a user's API key or the admin token")),
        Some(a) => match store.checkpoint_of(a.tenant(), engine.now_ms()) {
            Err(memwarden_store::StoreError::UnknownLog(_)) => return Err(ApiError::not_found("the caller's tenant has no verdict log yet")),
            r => r.map_err(ApiError::internal)?,
        },
        None => store.checkpoint(engine.now_ms()).map_err(ApiError::internal)?,
    };
    Ok(CheckpointOut {
        size: c.checkpoint.size,
        root: hex::encode(c.checkpoint.root),
        head: hex::encode(c.checkpoint.head),
        time_ms: c.checkpoint.time_ms,
        key: hex::encode(c.key),
        signature: hex::encode(c.signature),
    })
}

/// Inclusion proof of entry `index` in the current tree, verified before it is returned: in
/// `tenant`'s own log (an API key's tenant; the index a receipt's `log_index` names), or in the
/// whole store's view (`None`: the admin token). An index past the end is not found.
pub fn proof(engine: &Engine, caller: Option<&Actor>, index: u64) -> Result<ProofOut, ApiError> {
    let tenant = caller.map(Actor::tenant);
    let store = engine.store();
    let missing = || ApiError::not_found(format!("no log entry {index} visible to the caller"));
    let (size, root, _) = match tenant {
        Some(t) => store.log_root_of(t),
        None => store.log_root(),
    };
    if index >= size {
        return Err(missing());
    }
    let (entries, path) = match tenant {
        Some(t) => (store.log_entries_of(t, index, index + 1), store.inclusion_proof_of(t, index, size)),
        None => (store.log_entries(index, index + 1), store.inclusion_proof(index, size)),
    };
    let entries = entries.map_err(ApiError::internal)?;
    let path = path.map_err(ApiError::internal)?;
    let bytes = entries.first().ok_or_else(missing)?;
    let entry = memwarden_log::Entry::decode(bytes).map_err(|e| ApiError::internal(format!("log entry {index}: {e}")))?;
    // Sealed fields opened where the store keeps their key (issue 35.7); in the admin token's
    // global view, under the tenant the entry names.
    let named = || serde_json::from_slice::<serde_json::Value>(&entry.body).ok().and_then(|b| b["tenant"].as_str().and_then(|t| TenantId::new(t).ok()));
    let body: serde_json::Value = match tenant.cloned().or_else(named) {
        Some(t) => engine.entry_body(&t, &entry.body).map_err(ApiError::from)?,
        None => serde_json::from_slice(&entry.body).unwrap_or(serde_json::Value::Null),
    };
    let leaf = memwarden_log::leaf_hash(bytes);
    let verified = memwarden_log::verify_inclusion(&leaf, index, size, &path, &root).is_ok();
    // Issue 34.6: an entry's body can hold something spendable (a signed grant). Users of the
    // tenant and the admin read every body; any other principal reads the bodies of its own
    // entries and, for the rest, only the hashes that prove inclusion.
    let body_withheld = caller.is_some_and(|a| a.principal().kind != PrincipalKind::User && !entry_names(&body, a.id().as_str()));
    let body = if body_withheld { serde_json::Value::Null } else { body };
    Ok(ProofOut {
        tenant: tenant.map(|t| t.as_str().to_owned()),
        index,
        size,
        root: hex::encode(root),
        leaf: hex::encode(leaf),
        proof: path.iter().map(hex::encode).collect(),
        verified,
        kind: name(&entry.kind),
        body,
        body_withheld,
    })
}

/// Whether a log entry's body is `who`'s own: it acted, wrote or reported it.
fn entry_names(body: &serde_json::Value, who: &str) -> bool {
    let is = |v: &serde_json::Value| v.as_str() == Some(who);
    ["actor", "by", "attester", "principal", "writer", "reported_by"].iter().any(|k| is(&body[*k]))
        || ["writer", "reported_by", "owner"].iter().any(|k| is(&body["item"][*k]))
        || is(&body["item"]["scope"]["owner"])
}

/// Register a principal (admin).
pub fn register_principal(engine: &Engine, p: RegisterPrincipalIn) -> Result<PrincipalOut, ApiError> {
    let public_key = match p.public_key.as_deref() {
        None => None,
        Some(h) => {
            let mut k = [0u8; 32];
            hex::decode_to_slice(h, &mut k).map_err(|_| ApiError::invalid("public_key must be 64 hex digits"))?;
            Some(k)
        }
    };
    let principal = Principal {
        id: PrincipalId::new(&p.id)?,
        tenant: TenantId::new(&p.tenant)?,
        kind: conv(p.kind, "principal kind")?,
        domain: p.domain.as_deref().map(Domain::new).transpose()?,
        allow_listed: p.allow_listed,
        public_key,
        action: p
            .action
            .map(|a| serde_json::from_value::<memwarden_core::principal::ToolAction>(a).map_err(|e| ApiError::invalid(format!("action: {}", crate::strict::redact(&e)))))
            .transpose()?,
    };
    engine.register_principal(principal.clone())?;
    Ok(principal_out(&principal))
}

/// Render a lineage view for `reader`.
pub fn lineage_out(v: &memwarden_engine::LineageView, reader: &PrincipalId) -> Result<LineageOut, ApiError> {
    let t = &v.path_trust;
    Ok(LineageOut {
        id: v.record.id().to_string(),
        record: serde_json::to_value(&v.record).map_err(ApiError::internal)?,
        affected: v.record.summary().affected_for(reader),
        path_trust: PathTrustOut { s: t.s.get(), i: t.i.get(), f: t.f.get(), p: t.p.get(), v: t.v.get(), a: t.a.get(), rho: t.rho.get() },
        parents: v.parents.iter().map(ToString::to_string).collect(),
        parents_hidden: v.parents_hidden,
        children: v.children.iter().map(ToString::to_string).collect(),
        children_hidden: v.children_hidden,
    })
}

/// What the lineage layer knows about one memory, as `actor` may see it.
pub fn lineage(engine: &Engine, actor: &Actor, id: &str) -> Result<LineageOut, ApiError> {
    traced("get_memory_lineage", |_| lineage_untraced(engine, actor, id))
}

/// [`lineage`] without its span.
fn lineage_untraced(engine: &Engine, actor: &Actor, id: &str) -> Result<LineageOut, ApiError> {
    lineage_out(&engine.lineage_of(actor, &parse_id(id)?)?, actor.id())
}

/// The actor's tenant's lineage audit trail (users only), in `format`.
pub fn export_lineage(engine: &Engine, actor: &Actor, format: ExportFormatName) -> Result<serde_json::Value, ApiError> {
    traced("export_lineage", |_| export_lineage_untraced(engine, actor, format))
}

/// [`export_lineage`] without its span.
fn export_lineage_untraced(engine: &Engine, actor: &Actor, format: ExportFormatName) -> Result<serde_json::Value, ApiError> {
    match format {
        ExportFormatName::Memwarden => serde_json::to_value(engine.audit_trail(actor)?).map_err(ApiError::internal),
        ExportFormatName::Prov => Ok(engine.prov_json(actor)?),
    }
}



/// Log entries one page of [`decisions`] reads at most: a page covers this stretch of the
/// tenant's log (so its cost is bounded whatever the log's length), and may hold no decision.
pub const DECISIONS_SCAN_MAX: u64 = 4096;
/// Log entries read at a time while scanning.
const DECISIONS_CHUNK: u64 = 256;

/// One page of the decisions in `actor`'s tenant's verdict log that cited memory `id` (as
/// context, as a value's source, or named by the verdict as supporting or affected), in log
/// order. Whoever may see the memory's lineage may ask (404, 403 `withheld`, 409 as for
/// [`lineage`]); as for a proof (issue 34.6), users of the tenant see every such decision and
/// any other principal only its own.
pub fn decisions(engine: &Engine, actor: &Actor, id: &str, limit: Option<usize>, cursor: Option<&str>) -> Result<DecisionsOut, ApiError> {
    traced("list_memory_decisions", |_| decisions_untraced(engine, actor, id, limit, cursor))
}

/// [`decisions`] without its span.
fn decisions_untraced(engine: &Engine, actor: &Actor, id: &str, limit: Option<usize>, cursor: Option<&str>) -> Result<DecisionsOut, ApiError> {
    let item = parse_id(id)?;
    engine.lineage_of(actor, &item)?;
    let limit = memwarden_engine::check_limit(limit.unwrap_or(PAGE_LIMIT_DEFAULT))?;
    let query = format!("id={item}");
    let scope = memwarden_engine::CursorScope { route: memwarden_engine::CursorRoute::Decisions, tenant: actor.tenant().as_str(), caller: actor.id().as_str(), query: &query };
    let from = match cursor {
        None => 0,
        Some(c) => {
            let raw = engine.open_cursor(&scope, c)?;
            let bytes = <[u8; 8]>::try_from(raw.as_slice()).map_err(|_| EngineError::Cursor(memwarden_engine::CursorError::Malformed))?;
            u64::from_be_bytes(bytes)
        }
    };
    let store = engine.store();
    let (size, _, _) = store.log_root_of(actor.tenant());
    let end = size.min(from.saturating_add(DECISIONS_SCAN_MAX));
    let mut found = Vec::new();
    let mut next = from;
    'scan: while next < end {
        let entries = store.log_entries_of(actor.tenant(), next, end.min(next.saturating_add(DECISIONS_CHUNK))).map_err(ApiError::internal)?;
        if entries.is_empty() {
            return Err(ApiError::internal(format!("the log of {} ends before its recorded size", actor.tenant())));
        }
        for bytes in &entries {
            let entry = memwarden_log::Entry::decode(bytes).map_err(|e| ApiError::internal(format!("log entry {next}: {e}")))?;
            if let Some(d) = citing(engine, actor, &item, next, &entry)? {
                found.push(d);
            }
            next += 1;
            if found.len() >= limit {
                break 'scan;
            }
        }
    }
    let next_cursor = if next < size { Some(engine.seal_cursor(&scope, &next.to_be_bytes())?) } else { None };
    Ok(DecisionsOut { decisions: found, next_cursor })
}

/// The log entry at `index` as a decision citing `item` that `actor` may see, if it is one.
fn citing(engine: &Engine, actor: &Actor, item: &ItemId, index: u64, entry: &memwarden_log::Entry) -> Result<Option<CitingDecisionOut>, ApiError> {
    if entry.kind != memwarden_log::EntryKind::Decision {
        return Ok(None);
    }
    let Ok(raw) = serde_json::from_slice::<serde_json::Value>(&entry.body) else { return Ok(None) };
    // An elevation's withdrawal is logged as a decision too; it has no action.
    if !raw["action"].is_object() || !raw["verdict"].is_object() {
        return Ok(None);
    }
    if actor.principal().kind != PrincipalKind::User && !entry_names(&raw, actor.id().as_str()) {
        return Ok(None);
    }
    let body = engine.entry_body(actor.tenant(), &entry.body)?;
    let cited_as = cited_as(&body, &item.to_string());
    if cited_as.is_empty() {
        return Ok(None);
    }
    let v = &body["verdict"];
    let s = |x: &serde_json::Value| x.as_str().unwrap_or_default().to_owned();
    Ok(Some(CitingDecisionOut {
        log_index: index,
        time_ms: entry.time_ms,
        actor: s(&body["actor"]),
        tool: s(&body["action"]["tool"]),
        cited_as,
        decision: s(&v["decision"]),
        rule: s(&v["rule"]["rule"]),
        layer: s(&v["layer"]),
        verdict: v.clone(),
    }))
}

/// How a decision's opened body cites the memory `id`.
fn cited_as(body: &serde_json::Value, id: &str) -> Vec<String> {
    let names = |v: &serde_json::Value| v.as_array().is_some_and(|a| a.iter().any(|x| x.as_str() == Some(id)));
    let action = &body["action"];
    let source = action["values"].as_array().is_some_and(|vs| vs.iter().any(|v| names(&v["sources"])));
    [("context", names(&action["context"])), ("source", source), ("supporting", names(&body["verdict"]["supporting"])), ("affected", names(&body["verdict"]["affected"]))]
        .into_iter()
        .filter(|(_, yes)| *yes)
        .map(|(n, _)| n.to_owned())
        .collect()
}
