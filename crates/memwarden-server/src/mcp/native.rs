//! The native tool profile: memwarden's own tools (`--tools native`, the default).
//!
//! Every tool carries annotations (MCP `ToolAnnotations`) and an output schema (the OpenAPI
//! schema of what it returns, see [`super::schema`]). The hints describe the memory store as the
//! caller sees it: a read tool is read-only for the store, though the engine records the read
//! (lineage `read_by`, the session's hand-over); `update_memory` is additive (the old version is
//! kept in the history); `delete_memory` and `withdraw_elevation` are destructive and idempotent
//! (a second call changes nothing); no tool reaches outside memwarden (`openWorldHint` false).

use super::MemwardenMcp;
use super::args::Parameters;
use super::schema;
use crate::dto::{AddMemory, AttestIn, DecideIn, ElevationsIn, GetMemoryArgs, HistoryArgs, ListQuery, PrepareGrantIn, RecordGrantArgs, SearchIn, ToolCallIn, UpdateMemoryArgs, WithdrawElevationIn};
use crate::ops;
use rmcp::model::CallToolResult;
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, tool, tool_router};

#[tool_router(router = native_router, vis = "pub(super)")]
impl MemwardenMcp {
    /// Add a memory as the authenticated principal.
    #[tool(description = "Store a memory. Its origin and integrity label come from the authenticated principal \
        (and the declared parents), never from the arguments. Returns the stored memory with its provenance.",
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = false, open_world_hint = false),
        output_schema = schema::output("WriteOut"))]
    async fn add_memory(&self, Parameters(m): Parameters<AddMemory>, ctx: RequestContext<RoleServer>) -> Result<CallToolResult, ErrorData> {
        self.call(&ctx, m, ops::add).await
    }

    /// Semantic search.
    #[tool(description = "Search memories of a namespace by meaning. Only memories the caller may read are \
        eligible; each hit carries its origin and label. `withheld` counts the memories a defense layer held \
        back from the results and `withheld_memories` names them (id, layer, rule, flags, similarity; never the \
        text): cite them in propose_action's context and the verdict weighs them.",
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false),
        output_schema = schema::output("SearchOut"))]
    async fn search_memories(&self, Parameters(s): Parameters<SearchIn>, ctx: RequestContext<RoleServer>) -> Result<CallToolResult, ErrorData> {
        self.call(&ctx, s, ops::search).await
    }

    /// Read one memory.
    #[tool(description = "Read one memory by id (a memory outside the caller's scope reads as not found; one in \
        its scope that a defense layer holds back is a `withheld` error naming the layer, the rule and the flags).",
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false),
        output_schema = schema::output("MemoryOut"))]
    async fn get_memory(&self, Parameters(g): Parameters<GetMemoryArgs>, ctx: RequestContext<RoleServer>) -> Result<CallToolResult, ErrorData> {
        self.call(&ctx, g, |e, a, g| ops::get(e, a, &g.memory_id)).await
    }

    /// Update a memory (a new version).
    #[tool(description = "Replace a memory's text (its owner, or a user). The new text is stored as a new \
        version derived from the old one (never more trusted than it); the old version is kept in the memory's \
        history and no longer returned. Returns the new version.",
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = false, open_world_hint = false),
        output_schema = schema::output("UpdatedOut"))]
    async fn update_memory(&self, Parameters(u): Parameters<UpdateMemoryArgs>, ctx: RequestContext<RoleServer>) -> Result<CallToolResult, ErrorData> {
        self.call(&ctx, u, |e, a, u| ops::update(e, a, &u.memory_id, u.text)).await
    }

    /// A memory's versions.
    #[tool(description = "Every version of a memory the caller may read, oldest first (a `withheld` error, \
        with the rule and flags, when a defense layer holds the asked version back). Paged: at most `limit` \
        versions (default 100); pass `next_cursor` back as `cursor` for the next page (null on the last).",
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false),
        output_schema = schema::output("HistoryOut"))]
    async fn memory_history(&self, Parameters(g): Parameters<HistoryArgs>, ctx: RequestContext<RoleServer>) -> Result<CallToolResult, ErrorData> {
        self.call(&ctx, g, |e, a, g| ops::history(e, a, &g.memory_id, g.limit, g.cursor.as_deref())).await
    }

    /// Erase a memory.
    #[tool(description = "Delete a memory for good (its owner, or a user): its text and embedding are erased, \
        together with every memory derived from it alone; memories with another live source survive. \
        Returns what was erased and what survived.",
        annotations(read_only_hint = false, destructive_hint = true, idempotent_hint = true, open_world_hint = false),
        output_schema = schema::output("MemoryErasedOut"))]
    async fn delete_memory(&self, Parameters(g): Parameters<GetMemoryArgs>, ctx: RequestContext<RoleServer>) -> Result<CallToolResult, ErrorData> {
        self.call(&ctx, g, |e, a, g| ops::erase(e, a, &g.memory_id)).await
    }

    /// Report a memory poisoned.
    #[tool(description = "Report a memory poisoned (users, tools, or its owner): it and every memory derived \
        from it stop supporting actions. Returns the log index of the report.",
        annotations(read_only_hint = false, destructive_hint = true, idempotent_hint = false, open_world_hint = false),
        output_schema = schema::output("MemoryMarkedOut"))]
    async fn report_poisoned(&self, Parameters(g): Parameters<GetMemoryArgs>, ctx: RequestContext<RoleServer>) -> Result<CallToolResult, ErrorData> {
        self.call(&ctx, g, |e, a, g| ops::flag_poisoned(e, a, &g.memory_id)).await
    }

    /// Verify a memory.
    #[tool(description = "Verify a memory (users and allow-listed tools only). Recorded in its lineage; \
        it never raises the memory's label. Returns the log index of the verification.",
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = false, open_world_hint = false),
        output_schema = schema::output("MemoryMarkedOut"))]
    async fn verify_memory(&self, Parameters(g): Parameters<GetMemoryArgs>, ctx: RequestContext<RoleServer>) -> Result<CallToolResult, ErrorData> {
        self.call(&ctx, g, |e, a, g| ops::verify_memory(e, a, &g.memory_id)).await
    }

    /// A memory's lineage.
    #[tool(description = "Where a memory came from: its parents and children the caller may read, whether \
        something untrusted, poisoned or revoked is on its path, and its path trust (0..1) with the factors.",
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false),
        output_schema = schema::output("LineageOut"))]
    async fn get_lineage(&self, Parameters(g): Parameters<GetMemoryArgs>, ctx: RequestContext<RoleServer>) -> Result<CallToolResult, ErrorData> {
        self.call(&ctx, g, |e, a, g| ops::lineage(e, a, &g.memory_id)).await
    }

    /// List memories.
    #[tool(description = "List the memories of a namespace the caller may read, oldest first; `withheld` names \
        (by id, with the layer, rule and flags, never the text) those of the caller's scope that a defense layer \
        holds back. Paged: `limit` memories of the namespace are scanned per page (default 100), so a page may \
        hold fewer; pass `next_cursor` back as `cursor` for the next page (null on the last).",
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false),
        output_schema = schema::output("ListOut"))]
    async fn list_memories(&self, Parameters(q): Parameters<ListQuery>, ctx: RequestContext<RoleServer>) -> Result<CallToolResult, ErrorData> {
        self.call(&ctx, q, |e, a, q| ops::list(e, a, &q.namespace, q.limit, q.cursor.as_deref())).await
    }

    /// Decide an action.
    #[tool(description = "Propose a consequential action (pay, wire, send, change a setting) before running it. \
        Returns a verdict: allow, redact, reverify, ask_user (with what a user-signed grant must bind) or block. \
        Run the action only on allow.",
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = false, open_world_hint = false),
        output_schema = schema::output("DecideOut"))]
    async fn propose_action(&self, Parameters(d): Parameters<DecideIn>, ctx: RequestContext<RoleServer>) -> Result<CallToolResult, ErrorData> {
        let metrics = self.metrics.clone();
        let r = self.call(&ctx, d, ops::decide).await;
        if let (Some(m), Ok(res)) = (metrics, &r)
            && let Some(d) = res.structured_content.as_ref().and_then(|v| v.pointer("/verdict/decision")).and_then(|d| d.as_str())
        {
            m.observe_decision(d);
        }
        r
    }

    /// Prepare a grant for the calling user to sign.
    #[tool(description = "Users only: prepare a one-time grant for one value of one tool call (what an ask_user \
        verdict names). Returns the grant and the exact bytes to sign (hex); sign them with your Ed25519 key \
        outside this service, then call record_grant and pass {grant, signature} in propose_action's grants.",
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false),
        output_schema = schema::output("PreparedGrantOut"))]
    async fn prepare_grant(&self, Parameters(g): Parameters<PrepareGrantIn>, ctx: RequestContext<RoleServer>) -> Result<CallToolResult, ErrorData> {
        self.call(&ctx, g, ops::prepare_grant).await
    }

    /// Record a signed grant.
    #[tool(description = "Record a grant signed by a user of your tenant (its signature is verified against the \
        user's registered key). Returns the grant's nonce and log index.",
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = false, open_world_hint = false),
        output_schema = schema::output("GrantOut"))]
    async fn record_grant(&self, Parameters(g): Parameters<RecordGrantArgs>, ctx: RequestContext<RoleServer>) -> Result<CallToolResult, ErrorData> {
        let body = g.map(|g| serde_json::json!({"grant": g.grant, "signature": g.signature}));
        self.call(&ctx, body, ops::record_grant).await
    }

    /// Report a tool's output.
    #[tool(description = "Store what a tool returned to you. Its label is decided by who vouches for it: the \
        tool itself (calling as the tool) or the tool's Ed25519 signature over the call and output; a report \
        without either is no more trusted than you, your session and the arguments and inputs you passed.",
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = false, open_world_hint = false),
        output_schema = schema::output("WriteOut"))]
    async fn report_tool_output(&self, Parameters(t): Parameters<ToolCallIn>, ctx: RequestContext<RoleServer>) -> Result<CallToolResult, ErrorData> {
        self.call(&ctx, t, ops::tool_call).await
    }

    /// Attest a value.
    #[tool(description = "Attest a value for a key as the authenticated principal. Only attestations by trusted \
        principals (allow-listed tools, users) count toward corroboration, one per independent domain.",
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = false, open_world_hint = false),
        output_schema = schema::output("AttestOut"))]
    async fn attest(&self, Parameters(a): Parameters<AttestIn>, ctx: RequestContext<RoleServer>) -> Result<CallToolResult, ErrorData> {
        self.call(&ctx, a, ops::attest).await
    }

    /// List elevations.
    #[tool(description = "Users only: the tenant's elevations — each value corroboration lifted, the memories \
        it rests on, and whether it still counts (it stops when one of them is revoked, erased or poisoned).",
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false),
        output_schema = schema::output("ElevationsOut"))]
    async fn list_elevations(&self, Parameters(x): Parameters<ElevationsIn>, ctx: RequestContext<RoleServer>) -> Result<CallToolResult, ErrorData> {
        self.call(&ctx, x, |e, a, x| ops::elevations(e, a, x.limit, x.cursor.as_deref())).await
    }

    /// Withdraw an elevation.
    #[tool(description = "Users only: withdraw the elevation of a key's value; it stops counting now and the \
        withdrawal is recorded in the verdict log.",
        annotations(read_only_hint = false, destructive_hint = true, idempotent_hint = true, open_world_hint = false),
        output_schema = schema::output("ElevationWithdrawnOut"))]
    async fn withdraw_elevation(&self, Parameters(w): Parameters<WithdrawElevationIn>, ctx: RequestContext<RoleServer>) -> Result<CallToolResult, ErrorData> {
        self.call(&ctx, w, ops::withdraw_elevation).await
    }
}
