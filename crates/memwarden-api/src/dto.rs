//! Wire types of the HTTP API and the MCP tools.
//!
//! Request types are strict (`deny_unknown_fields`): a body that claims an identity, an origin, a
//! label or trust (`origin`, `trusted`, `label`, `writer`, `tenant`, `principal`, ...) is refused
//! with 400 `invalid_input` rather than silently accepted. Only the un-versioned Mem0-compatible
//! aliases (`/memories`, `/search`) tolerate unknown fields, and there they are ignored: the
//! stored origin always comes from the key's principal.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use utoipa::ToSchema;

fn default_ns() -> String {
    "default".into()
}
fn default_k() -> usize {
    5
}
fn default_limit() -> usize {
    100
}

/// How a memory entered (a hint for lifecycle scoring; never affects the label).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, ToSchema, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
#[allow(missing_docs)]
pub enum RouteName {
    Dialogue,
    #[default]
    Direct,
    ToolObservation,
    EnvironmentObservation,
    ExternalObservation,
    ImportedMemory,
    MemoryHandoff,
    CrossAgent,
    SharedPromotion,
    PostTaskExperience,
    Summary,
}

/// Typed provenance edge from a new memory to a declared parent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, ToSchema, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
#[allow(missing_docs)]
pub enum EdgeKindName {
    AuthorizedBy,
    ObservedFrom,
    ForwardedTo,
    #[default]
    DerivedFrom,
    SummarizedFrom,
    WrittenBy,
    ReadBy,
    VerifiedBy,
    InvalidatedBy,
    UsedForAction,
}

/// How a value is compared: accounts by letters and digits, amounts numerically, text folded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, ToSchema, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
#[allow(missing_docs)]
pub enum ValueKindName {
    Account,
    Amount,
    #[default]
    Text,
}

/// What kind of action the agent proposes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, ToSchema, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
#[allow(missing_docs)]
pub enum ActionKindName {
    Answer,
    Inform,
    #[default]
    Act,
}

/// Risk class of an action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, ToSchema, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
#[allow(missing_docs)]
pub enum RiskName {
    Low,
    Medium,
    #[default]
    High,
}

/// Kind of principal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
#[allow(missing_docs)]
pub enum PrincipalKindName {
    User,
    Agent,
    Tool,
    Source,
}

/// A declared parent (input) of a new memory.
#[derive(Debug, Clone, Deserialize, ToSchema, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ParentIn {
    /// Memory id (32 hex digits).
    #[schema(pattern = "^[0-9a-fA-F]{32}$")]
    pub id: String,
    /// Edge kind (default `derived_from`).
    #[serde(default)]
    pub kind: EdgeKindName,
}

/// Add one memory. Origin and label come from the API key's principal and the declared parents.
#[derive(Debug, Clone, Deserialize, ToSchema, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AddMemory {
    /// Namespace (default `default`).
    #[serde(default = "default_ns")]
    #[schema(pattern = "^[a-z0-9][a-z0-9._-]{0,63}$")]
    pub namespace: String,
    /// The text.
    pub content: String,
    /// How it entered. Default: the door's own for the key's principal (`external_observation`
    /// for a source, `tool_observation` for a tool, `direct` for a user or agent); a route the
    /// principal's kind may not declare is refused.
    #[serde(default)]
    pub route: Option<RouteName>,
    /// Declared inputs: the label is met with each parent's.
    #[serde(default)]
    pub parents: Vec<ParentIn>,
    /// Narrow the readers to these principals (the writer is always included).
    #[serde(default)]
    pub readers: Option<Vec<String>>,
    /// Free metadata; never consulted by any gate.
    #[serde(default)]
    pub metadata: BTreeMap<String, String>,
    /// Session tag.
    #[serde(default)]
    pub session: Option<String>,
    /// Task tag.
    #[serde(default)]
    pub task: Option<String>,
}

/// Add several memories in one group commit; each succeeds or fails on its own.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AddMany {
    /// The memories (at most the server's `batch_max`).
    pub memories: Vec<AddMemory>,
}

/// Body of `POST /v1/memories`: one memory, or `{"memories": [...]}`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum AddRequest {
    /// A batch.
    Many(AddMany),
    /// One memory.
    One(AddMemory),
}

impl AddRequest {
    /// Which shape a strictly parsed body is: a batch when it has a `memories` key, else one
    /// memory (an explicit choice, so an error names the shape's own fields, not "no variant").
    pub fn from_value(body: serde_json::Value) -> Result<Self, serde_json::Error> {
        if body.get("memories").is_some() {
            serde_json::from_value(body).map(Self::Many)
        } else {
            serde_json::from_value(body).map(Self::One)
        }
    }
}

/// A parent edge of a stored memory.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ParentOut {
    /// Parent id.
    pub id: String,
    /// Edge kind.
    pub kind: String,
}

/// A stored memory.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct MemoryOut {
    /// Id (32 hex digits).
    pub id: String,
    /// Tenant.
    pub tenant: String,
    /// Namespace.
    pub namespace: String,
    /// Text.
    pub content: String,
    /// Origin bound at write from the writer's principal: `user`, `trusted_tool`, `agent`,
    /// `untrusted_external`.
    pub origin: String,
    /// Integrity label: `trusted`, `agent`, `untrusted`.
    pub label: String,
    /// What the memory may authorize: `act`, `inform`, `none`.
    pub act_class: String,
    /// Writing principal.
    pub writer: String,
    /// For a tool output the tool did not vouch for (neither written by the tool nor signed by
    /// it): the caller that reported it. Its support and independence count as the caller's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reported_by: Option<String>,
    /// Route.
    pub route: String,
    /// Declared parents.
    pub parents: Vec<ParentOut>,
    /// Readers (None: everyone in the namespace).
    pub readers: Option<Vec<String>>,
    /// `private`, `shared`, `revoked`.
    pub visibility: String,
    /// `active`, `quarantined`, `blocked`, `revoked`, `superseded`.
    pub status: String,
    /// The newer version that replaced this one (status `superseded`).
    pub superseded_by: Option<String>,
    /// Creation time (ms since the Unix epoch).
    pub created_ms: u64,
    /// Session tag.
    pub session: Option<String>,
    /// Task tag.
    pub task: Option<String>,
    /// Free metadata.
    pub metadata: BTreeMap<String, String>,
    /// On a read by id or a list, with the lifecycle layer on: the scorer's write-time risk `r`
    /// in `[0, 1]` (no query). Absent on writes and with the layer off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub risk: Option<f64>,
    /// On a read by id or a list: the evidence the scorer saw in it (the same names as a search
    /// hit's, or `unscored`). Returned with the memory, never a reason to hide it by itself.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub risk_flags: Vec<String>,
}

/// A write's result.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct WriteOut {
    /// The stored memory.
    pub item: MemoryOut,
    /// Index of its verdict-log entry.
    pub log_index: u64,
}

/// One result of a batch add.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct BatchItemOut {
    /// Position in the request.
    pub index: usize,
    /// Whether it was stored.
    pub ok: bool,
    /// Its id, when stored.
    pub id: Option<String>,
    /// Its log index, when stored.
    pub log_index: Option<u64>,
    /// Why not, when refused.
    pub error: Option<crate::Problem>,
}

/// Result of a batch add.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct BatchOut {
    /// One per requested memory, in order.
    pub results: Vec<BatchItemOut>,
}

/// Memories.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ListOut {
    /// The memories the caller may read, oldest first.
    pub results: Vec<MemoryOut>,
    /// Memories of the caller's scope that a defense layer withheld (never their text): listed
    /// so that nothing in scope silently disappears. `GET /v1/memories/{id}` of one answers 403
    /// `withheld` with the same rule and flags.
    #[serde(default)]
    pub withheld: Vec<WithheldOut>,
    /// The cursor of the next page (pass it back as `cursor`); null on the last page.
    #[serde(default)]
    pub next_cursor: Option<String>,
}

/// A memory of the caller's scope that a defense layer held back, and why (no text).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct WithheldOut {
    /// The memory's id.
    pub id: String,
    /// The layer that held it back: `lifecycle`, `lineage`, or `authority` (rule
    /// `confidential_ancestry` or `narrowed_at_write`: the writer addressed it to the caller,
    /// and the confidentiality of what it was written from narrowed its readers).
    pub layer: String,
    /// The rule that fired: the lifecycle layer's (`quarantined`, `tainted_directive`,
    /// `trigger_sensitive`, `unverified_answer_binding`, `low_reputation`, `poisoned`,
    /// `carried_agent_restriction`, ...) or the lineage layer's (`revoked_ancestor`,
    /// `not_in_ancestor_scope`, `propagation_pending`, `poisoned`, `unknown`).
    pub rule: String,
    /// The evidence that fired (the lifecycle scorer's flags such as `external_source`,
    /// `instruction_like`, `self_claim`, `trigger_cue`; the rule itself when nothing else did).
    pub flags: Vec<String>,
}

/// A memory a search withheld: why (as [`WithheldOut`]), and its cosine similarity to the query
/// (as a hit's `similarity`), so the caller can tell which withheld memories bear on its request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct WithheldHitOut {
    /// The memory's id.
    pub id: String,
    /// The layer that held it back (see [`WithheldOut::layer`]).
    pub layer: String,
    /// The rule that fired (see [`WithheldOut::rule`]).
    pub rule: String,
    /// The evidence that fired (see [`WithheldOut::flags`]).
    pub flags: Vec<String>,
    /// Cosine similarity to the query.
    pub similarity: f32,
}

/// Query of `GET /v1/memories`.
#[derive(Debug, Clone, Deserialize, utoipa::IntoParams, schemars::JsonSchema)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    /// Namespace (default `default`).
    #[serde(default = "default_ns")]
    #[param(pattern = "^[a-z0-9][a-z0-9._-]{0,63}$")]
    pub namespace: String,
    /// Memories of the store's order scanned for this page (default 100, 1..=10000; out of
    /// range is a 400). A page may hold fewer (those the caller may not read are skipped)
    /// and still have a next one.
    #[serde(default = "default_limit")]
    #[param(minimum = 1, maximum = 10000)]
    pub limit: usize,
    /// Opaque cursor: the `next_cursor` of the previous page, unchanged (absent: the first
    /// page). Bound to this list and query; one of another list, query or caller, or a changed
    /// one, is a 400 `invalid_cursor`.
    #[serde(default)]
    #[param(max_length = 600)]
    pub cursor: Option<String>,
}

/// Query of a paged list (`GET /v1/memories/{id}/history`, `GET /v1/elevations`).
#[derive(Debug, Clone, Default, Deserialize, utoipa::IntoParams, schemars::JsonSchema)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct PageQuery {
    /// At most this many (default 100, 1..=10000; out of range is a 400).
    #[serde(default)]
    #[param(minimum = 1, maximum = 10000)]
    pub limit: Option<usize>,
    /// Opaque cursor: the `next_cursor` of the previous page, unchanged (absent: the first
    /// page). Bound to this list and query; one of another list, query or caller, or a changed
    /// one, is a 400 `invalid_cursor`.
    #[serde(default)]
    #[param(max_length = 600)]
    pub cursor: Option<String>,
}

/// Semantic search.
#[derive(Debug, Clone, Deserialize, ToSchema, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchIn {
    /// Namespace (default `default`).
    #[serde(default = "default_ns")]
    #[schema(pattern = "^[a-z0-9][a-z0-9._-]{0,63}$")]
    pub namespace: String,
    /// The query text.
    pub query: String,
    /// Results wanted (1..=100, default 5).
    #[serde(default = "default_k")]
    #[schema(minimum = 1, maximum = 100)]
    pub k: usize,
    /// Return only memories labelled this or higher (`untrusted` = all, the default; `agent`;
    /// `trusted`). A planning session that searches with `trusted` is handed nothing that can
    /// taint it; read the rest in another (quarantined) session.
    #[serde(default)]
    pub min_label: Option<LabelName>,
}

/// An integrity label, lowest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LabelName {
    /// External content.
    Untrusted,
    /// An agent's own output.
    Agent,
    /// A user, or an allow-listed tool computing from trusted inputs.
    Trusted,
}

/// A search hit.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct HitOut {
    /// Memory id.
    pub id: String,
    /// The memory's text (Mem0's `memory` field).
    pub memory: String,
    /// The ranking score: the similarity (results are ranked by relevance; `path_trust` and the
    /// memory's label say how far to trust each one).
    pub score: f64,
    /// Cosine similarity to the query.
    pub similarity: f32,
    /// The memory's path trust for the caller (lineage layer), if on.
    pub path_trust: Option<f64>,
    /// The lifecycle read firewall's risk `r` in `[0, 1]` for this query, if the layer is on.
    #[serde(default)]
    pub risk: Option<f64>,
    /// The evidence the firewall saw in it: `external_source`, `external_lineage`, `self_claim`,
    /// `forbidden_directive`, `instruction_like`, `answer_binding`, `trigger_cue`,
    /// `cluster_dominance`, `low_reputation_writer`. Returned with the memory, never a reason
    /// to hide it by itself.
    #[serde(default)]
    pub risk_flags: Vec<String>,
    /// The full memory with its provenance.
    pub item: MemoryOut,
}

/// Search results.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SearchOut {
    /// The most similar memories the caller may read, best first.
    pub results: Vec<HitOut>,
    /// How many memories a defense layer withheld from these results (read firewall, broker,
    /// lineage read rule, confidential sources): those that would have been among the `k` hits
    /// had nothing been withheld. Memories below `min_label` (or a planning session's floor)
    /// are not counted.
    #[serde(default)]
    pub withheld: usize,
    /// The withheld memories counted in `withheld`, most relevant first, by id with the rule
    /// and flags (never their text): `GET /v1/memories/{id}` answers each with `403 withheld`.
    /// Cite them in an action's `context` and the decision weighs them (a disclosure is
    /// redacted, an act re-verified or blocked).
    #[serde(default)]
    pub withheld_memories: Vec<WithheldHitOut>,
}

/// Derive (summarise) a memory from parents.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DeriveIn {
    /// Namespace (default `default`).
    #[serde(default = "default_ns")]
    #[schema(pattern = "^[a-z0-9][a-z0-9._-]{0,63}$")]
    pub namespace: String,
    /// Parent ids (at least one).
    pub parents: Vec<String>,
    /// The summary text.
    pub content: String,
}

/// A safety-relevant value (tool argument or action value).
#[derive(Debug, Clone, Deserialize, ToSchema, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ValueIn {
    /// The value's key (`payee`, `destination`, ...).
    pub key: String,
    /// The raw value.
    pub value: String,
    /// Comparison kind (default `text`).
    #[serde(default)]
    pub kind: ValueKindName,
    /// Memory ids the value came from.
    #[serde(default)]
    pub sources: Vec<String>,
}

/// A tool call through the monitor: the tool's output is stored as written by the tool, labelled
/// by who vouches for it (the tool itself as the caller, or the tool's signature; otherwise no
/// higher than the caller).
#[derive(Debug, Clone, Deserialize, ToSchema, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolCallIn {
    /// The tool principal's id.
    #[schema(pattern = "^[a-z0-9][a-z0-9._-]{0,63}$")]
    pub tool: String,
    /// Namespace (default `default`).
    #[serde(default = "default_ns")]
    #[schema(pattern = "^[a-z0-9][a-z0-9._-]{0,63}$")]
    pub namespace: String,
    /// Arguments passed to the tool.
    #[serde(default)]
    pub args: Vec<ValueIn>,
    /// Retrieved memories passed to the tool.
    #[serde(default)]
    pub inputs: Vec<String>,
    /// The tool's output text.
    pub output: String,
    /// The tool's Ed25519 signature (128 hex digits) over the call and output: the bytes
    /// `memwarden-tool-output-v1\n` followed by the JSON of `{tenant, tool, caller, namespace,
    /// args, inputs, output}` (args as `{key, value, kind, sources}`). Without it, an output
    /// reported by anyone but the tool itself is labelled no higher than the caller, its
    /// session and its arguments and inputs.
    #[serde(default)]
    #[schema(pattern = "^[0-9a-f]{128}$")]
    pub signature: Option<String>,
}

/// Attest a value for a key as the caller.
#[derive(Debug, Clone, Deserialize, ToSchema, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AttestIn {
    /// Key.
    pub key: String,
    /// Value.
    pub value: String,
    /// Comparison kind (default `text`).
    #[serde(default)]
    pub kind: ValueKindName,
    /// Memories the attestation derives from.
    #[serde(default)]
    pub sources: Vec<String>,
}

/// A stored attestation.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct AttestationOut {
    /// Attesting principal.
    pub attester: String,
    /// Its independence key (domain, or the principal).
    pub independence: String,
    /// Key.
    pub key: String,
    /// Canonical value.
    pub value: String,
    /// Comparison kind.
    pub kind: String,
    /// The attestation's own label; only `trusted` attestations count.
    pub label: String,
    /// Declared sources.
    pub sources: Vec<String>,
    /// When (ms).
    pub created_ms: u64,
}

/// Result of an attestation.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct AttestOut {
    /// The stored attestation.
    pub attestation: AttestationOut,
    /// Whether it counts toward corroboration (trusted label).
    pub counts: bool,
    /// Log index.
    pub log_index: u64,
}

/// Body of `POST /v1/elevations/withdraw` (users): the elevation of `key` = `value` stops
/// counting now; the withdrawal is in the verdict log.
#[derive(Debug, Clone, Deserialize, ToSchema, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WithdrawElevationIn {
    /// The value's key (`payee`, ...).
    pub key: String,
    /// The value (normalised as `kind` before it is looked up).
    pub value: String,
    /// Comparison kind (default `text`).
    #[serde(default)]
    pub kind: ValueKindName,
    /// Why (recorded in the verdict log; at most 1024 bytes).
    #[serde(default)]
    #[schema(max_length = 1024)]
    pub reason: String,
}

/// Arguments of the MCP `list_elevations` tool (none).
#[derive(Debug, Clone, Default, Deserialize, ToSchema, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ElevationsIn {
    /// At most this many (default 100, 1..=10000).
    #[serde(default)]
    pub limit: Option<usize>,
    /// Opaque cursor: the `next_cursor` of the previous page, unchanged (absent: the first page).
    #[serde(default)]
    pub cursor: Option<String>,
}

/// One elevation: a value corroboration lifted for a key, what it rests on, whether it counts.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ElevationOut {
    /// The key.
    pub key: String,
    /// The value (canonical form).
    pub value: String,
    /// The value's exact form.
    pub exact: String,
    /// Its comparison kind.
    pub kind: String,
    /// The independence domains that corroborated it.
    pub attesters: Vec<String>,
    /// The memories it was computed from.
    pub evidence: Vec<String>,
    /// When (ms).
    pub created_ms: u64,
    /// Whether it still counts (every memory it rests on stands: not revoked, erased, poisoned,
    /// superseded or held back).
    pub counts: bool,
}

/// `GET /v1/elevations`: the tenant's elevations (users only).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ElevationsOut {
    /// The tenant's elevations on this page, oldest first.
    pub elevations: Vec<ElevationOut>,
    /// The cursor of the next page (pass it back as `cursor`); null on the last page.
    #[serde(default)]
    pub next_cursor: Option<String>,
}

/// A withdrawn elevation.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ElevationWithdrawnOut {
    /// What was withdrawn.
    pub withdrawn: ElevationOut,
    /// Log index of the withdrawal.
    pub log_index: u64,
}

/// Revoke a memory.
#[derive(Debug, Clone, Default, Deserialize, ToSchema, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RevokeIn {
    /// Why (recorded in the verdict log; at most 1024 bytes).
    #[serde(default)]
    #[schema(max_length = 1024)]
    pub reason: String,
}

/// Body of `POST /v1/memories/{id}/promote`: widen who may read the memory.
#[derive(Debug, Clone, Deserialize, ToSchema, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PromoteIn {
    /// The new readers (the owner is always one). Absent: everyone in the namespace (shared).
    #[serde(default)]
    pub readers: Option<Vec<String>>,
}

/// Body of `PUT /v1/memories/{id}`: the text of the new version.
#[derive(Debug, Clone, Deserialize, ToSchema, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateIn {
    /// The new text.
    pub content: String,
}

/// Body of the Mem0-compatible `PUT /memories/{id}`.
#[derive(Debug, Clone, Deserialize, ToSchema, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AliasUpdateIn {
    /// The new text.
    pub text: String,
}

/// Result of an update: the new version (the old one is superseded).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct UpdatedOut {
    /// The new version.
    pub memory: MemoryOut,
    /// The version it replaced.
    pub previous_id: String,
    /// Log index of the new version's entry.
    pub log_index: u64,
}

/// Every version of a memory the caller may see, oldest first.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct HistoryOut {
    /// The versions, oldest first (older ones have status `superseded`).
    pub versions: Vec<MemoryOut>,
    /// Set when the memory was erased (its versions are gone; this is what is left: ids and
    /// time, never text). Shown to those who could read the memory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub erased: Option<ErasureNoteOut>,
    /// The cursor of the next page (pass it back as `cursor`); null on the last page.
    #[serde(default)]
    pub next_cursor: Option<String>,
}

/// One page of the decisions that cited a memory, in log order.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct DecisionsOut {
    /// The decisions found in this page's stretch of the log (a page may hold fewer than
    /// `limit`, even none, and still have a next page).
    pub decisions: Vec<CitingDecisionOut>,
    /// The cursor of the next page (pass it back as `cursor`); null when the log was read to
    /// its end.
    #[serde(default)]
    pub next_cursor: Option<String>,
}

/// A logged decision that cited a memory, and why it came out as it did.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct CitingDecisionOut {
    /// Its entry in the caller's tenant's verdict log (`GET /v1/audit/proof/{index}` proves it).
    pub log_index: u64,
    /// When it was logged (ms since the epoch).
    pub time_ms: u64,
    /// Who proposed the action.
    pub actor: String,
    /// The action's tool.
    pub tool: String,
    /// How the action cited the memory: `context`, `source` (of a value), `supporting` or
    /// `affected` (named by the verdict).
    pub cited_as: Vec<String>,
    /// The decision: allow, redact, reverify, ask_user or block.
    pub decision: String,
    /// The rule that decided.
    pub rule: String,
    /// The layer that decided.
    pub layer: String,
    /// The verdict as logged, its sealed fields opened (`{"shredded": ...}` where an erasure
    /// deleted their key).
    #[schema(value_type = Object)]
    pub verdict: serde_json::Value,
}

/// What is left of an erased memory: the erasure, by whom and when.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ErasureNoteOut {
    /// The erasure's id.
    pub erasure_id: String,
    /// The memory the erasure was asked for (this one, or something it was derived from).
    pub root: String,
    /// Who erased it.
    pub erased_by: String,
    /// When (ms since the Unix epoch).
    pub at_ms: u64,
}

/// Result of revoking a memory.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct MemoryRevokedOut {
    /// The revoked memory.
    pub id: String,
    /// Log index of the revocation entry.
    pub log_index: u64,
}

/// Result of reporting a memory poisoned or verifying it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct MemoryMarkedOut {
    /// The memory.
    pub id: String,
    /// `poisoned` or `verified`.
    pub mark: String,
    /// Log index of the entry that records it.
    pub log_index: u64,
}

/// What kind of session to open.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, ToSchema, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SessionKindName {
    /// Carries on from the caller's current session (its floor, witnesses and readers
    /// ceiling); a fork of a planning session is a planning session.
    #[default]
    Fork,
    /// Starts clean; never handed a memory labelled below `agent` (the planner).
    Planning,
    /// Starts untrusted: reads everything, writes untrusted (the quarantined reader).
    Quarantine,
}

/// Body of `POST /v1/sessions`.
#[derive(Debug, Clone, Default, Deserialize, ToSchema, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionIn {
    /// The kind (default `fork`).
    #[serde(default)]
    pub kind: SessionKindName,
}

/// An issued session handle: send it as `X-Memwarden-Session`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SessionOut {
    /// The handle (`fork-`, `plan-` or `quar-` and 32 hex digits).
    pub session: String,
    /// Its kind (`fork`, `planning`, `quarantine`).
    pub kind: String,
    /// The label its writes start at: `trusted` (nothing handed yet: writes take the writer's
    /// own label), `agent` or `untrusted`.
    pub floor: String,
    /// Index of its verdict-log entry.
    pub log_index: u64,
}

/// Body of `POST /v1/feedback`: the outcome of a task and the memories it used.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FeedbackIn {
    /// Ids of the memories the task used (1..=100).
    pub used: Vec<String>,
    /// Whether the task succeeded.
    pub success: bool,
}

/// Result of a feedback report.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct FeedbackOut {
    /// Per used memory: its id and guard state after the update.
    pub updated: Vec<GuardOut>,
    /// Log index of the feedback entry.
    pub log_index: u64,
}

/// A memory's lifecycle guard state.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct GuardOut {
    /// The memory.
    pub id: String,
    /// Utility `q`.
    pub q: f64,
    /// Trust `tau`.
    pub tau: f64,
    /// Hazard `h`.
    pub h: f64,
    /// Successful uses.
    pub successes: u32,
    /// Failed uses.
    pub failures: u32,
}

/// Result of erasing a memory.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct MemoryErasedOut {
    /// The erasure's id.
    pub erasure_id: String,
    /// The memory asked for.
    pub id: String,
    /// Every memory erased (it and the descendants that depended on it alone).
    pub erased: Vec<String>,
    /// Descendants that survive through another live source.
    pub survivors: Vec<String>,
    /// Memories merely written in a session that had been handed an erased one: they stay,
    /// readable by their writers, marked as having seen an erased source.
    #[serde(default)]
    pub seen_marked: Vec<String>,
    /// Log index of the erasure entry.
    pub log_index: u64,
}

/// What a user wants to grant: one value for one key of one tool call, optionally with the
/// amount, for a limited time. The server fills in the tenant, the user (the caller), a fresh
/// nonce and the times, and returns the exact bytes to sign.
#[derive(Debug, Clone, Deserialize, ToSchema, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PrepareGrantIn {
    /// The tool the action calls (`pay`, `wire`, ...).
    pub tool: String,
    /// The value's key (`payee`, ...).
    pub key: String,
    /// The raw value (normalised by `kind`).
    pub value: String,
    /// Comparison kind (default `text`).
    #[serde(default)]
    pub kind: ValueKindName,
    /// The amount, when the action moves money.
    #[serde(default)]
    pub amount: Option<String>,
    /// Lifetime in ms (default 10 minutes, at most a day).
    #[serde(default)]
    pub ttl_ms: Option<u64>,
}

/// An unsigned grant and the bytes its user signs. Sign `signing_bytes_hex` (decoded) with the
/// user's Ed25519 key and `POST /v1/grants` `{"grant": <grant>, "signature": <128 hex digits>}`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct PreparedGrantOut {
    /// The tuple, exactly as it must be sent back (do not re-serialise it by hand).
    #[schema(value_type = Object)]
    pub grant: serde_json::Value,
    /// `memwarden-grant-v2\n` followed by the grant's canonical JSON, hex-encoded.
    pub signing_bytes_hex: String,
    /// The nonce (hex): the grant's id in the log.
    pub nonce: String,
}

/// A signed grant, as the MCP tool `record_grant` takes it.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RecordGrantArgs {
    /// The grant exactly as `prepare_grant` returned it.
    pub grant: serde_json::Value,
    /// The user's Ed25519 signature over its signing bytes (128 hex digits).
    pub signature: String,
}

/// Result of recording a grant.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct GrantOut {
    /// The grant's nonce (hex).
    pub nonce: String,
    /// Log index.
    pub log_index: u64,
}

/// An action the agent proposes before running it.
#[derive(Debug, Clone, Deserialize, ToSchema, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DecideIn {
    /// The tool the action calls (`pay`, `wire`, ...).
    pub tool: String,
    /// Answer, inform or act (default `act`).
    #[serde(default)]
    pub kind: ActionKindName,
    /// Risk (default `high`).
    #[serde(default)]
    pub risk: RiskName,
    /// Safety-relevant values.
    #[serde(default)]
    pub values: Vec<ValueIn>,
    /// The amount, when the action moves money.
    #[serde(default)]
    pub amount: Option<String>,
    /// Memory ids in the agent's context.
    #[serde(default)]
    pub context: Vec<String>,
    /// User-signed grants presented for this action (as returned by a user's signer).
    #[serde(default)]
    #[schema(value_type = Vec<Object>)]
    pub grants: Vec<serde_json::Value>,
}

/// What a grant must bind for an `ask_user` action to go through.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct GrantRequestOut {
    /// Tool.
    pub tool: String,
    /// Key.
    pub key: String,
    /// Value kind.
    pub kind: String,
    /// Canonical value.
    pub value: String,
    /// Canonical amount.
    pub amount: Option<String>,
}

/// The verdict on a proposed action.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct VerdictOut {
    /// `allow`, `redact`, `reverify`, `ask_user` or `block`.
    pub decision: String,
    /// Deciding layer.
    pub layer: String,
    /// Rule name (`not_consequential`, `no_untrusted_push`, `elevated`, `uncorroborated`,
    /// `grant_refused`, `invalid_request`, `decision_error`).
    pub rule: String,
    /// For `grant_refused`: the stable refusal code (`reused`, `expired`, `value_mismatch`, ...).
    pub code: Option<String>,
    /// One-line cause.
    pub cause: String,
    /// Supporting memory ids.
    pub supporting: Vec<String>,
    /// Untrusted memories that push a value.
    pub affected: Vec<String>,
    /// Per pushed value: key, canonical value, pushing memories and how it was accepted.
    #[schema(value_type = Vec<Object>)]
    pub pushed: Vec<serde_json::Value>,
    /// For `ask_user`: what each grant must bind.
    pub ask: Vec<GrantRequestOut>,
    /// Threshold used, if any.
    pub threshold: Option<f64>,
}

/// Result of a decision.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct DecideOut {
    /// The verdict.
    pub verdict: VerdictOut,
    /// Index of the decision's log entry.
    pub log_index: u64,
}

/// Result of verifying the verdict log.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct VerifyOut {
    /// Whether the whole log verified.
    pub ok: bool,
    /// Entries examined.
    pub entries: u64,
    /// Merkle root (hex).
    pub root: String,
    /// Head leaf hash (hex).
    pub head: String,
    /// Signed checkpoints verified.
    pub checkpoints_checked: usize,
    /// The first problem, in words.
    pub problem: Option<String>,
    /// The first bad entry index, when a problem names one.
    pub first_bad_index: Option<u64>,
}

/// A signed checkpoint.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct CheckpointOut {
    /// Entries covered.
    pub size: u64,
    /// Merkle root (hex).
    pub root: String,
    /// Head leaf hash (hex).
    pub head: String,
    /// Time (ms).
    pub time_ms: u64,
    /// Signer's Ed25519 public key (hex).
    pub key: String,
    /// Signature (hex).
    pub signature: String,
}

/// An inclusion proof of one log entry in the current tree (RFC 9162).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ProofOut {
    /// The tenant whose log holds the entry (the caller's; absent in the admin's whole-store view).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    /// Entry index.
    pub index: u64,
    /// Tree size.
    pub size: u64,
    /// Merkle root (hex).
    pub root: String,
    /// Leaf hash (hex).
    pub leaf: String,
    /// Audit path (hex hashes).
    pub proof: Vec<String>,
    /// Whether the server verified the proof before answering.
    pub verified: bool,
    /// The entry's kind (`write`, `decision`, ...).
    pub kind: String,
    /// The entry's payload (JSON; ids, labels and digests, never memory text), so the caller
    /// can recompute the leaf hash. `null` when withheld (see `body_withheld`).
    pub body: serde_json::Value,
    /// The body is withheld: the caller is neither a user of the tenant nor the principal the
    /// entry is about (a body may hold something spendable, such as a signed grant); the leaf
    /// hash and audit path still prove the entry's inclusion.
    #[serde(default)]
    pub body_withheld: bool,
}

/// A principal as the engine records it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct PrincipalOut {
    /// Tenant.
    pub tenant: String,
    /// Id.
    pub id: String,
    /// `user`, `agent`, `tool` or `source`.
    pub kind: String,
    /// Integrity that follows from the kind (and the allow-list).
    pub integrity: String,
    /// Origin recorded on what it writes.
    pub origin: String,
    /// Organisation or registry behind it.
    pub domain: Option<String>,
    /// Tools only: on the allow-list.
    pub allow_listed: bool,
    /// Users only: Ed25519 public key (hex).
    pub public_key: Option<String>,
}

/// The caller.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct MeOut {
    /// The principal the key stands for.
    pub principal: PrincipalOut,
    /// The key's id.
    pub key_id: Option<String>,
    /// The store's id: what a grant must name to be spent on this store.
    pub store: String,
}

/// Register a principal (admin).
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RegisterPrincipalIn {
    /// Tenant.
    #[schema(pattern = "^[a-z0-9][a-z0-9._-]{0,63}$")]
    pub tenant: String,
    /// Id.
    #[schema(pattern = "^[a-z0-9][a-z0-9._-]{0,63}$")]
    pub id: String,
    /// Kind.
    pub kind: PrincipalKindName,
    /// Organisation or registry behind it (tools and sources; used for independence).
    #[serde(default)]
    pub domain: Option<String>,
    /// Tools only: on the source-authority allow-list.
    #[serde(default)]
    pub allow_listed: bool,
    /// Users (required for them: they sign grants) and tools (optional: they sign their
    /// outputs): Ed25519 public key, 64 hex digits.
    #[serde(default)]
    pub public_key: Option<String>,
    /// Tools only: what a call of the tool does, as the system classes it (a request's own
    /// `kind` and `risk` are ignored for a registered tool; an unregistered tool is an act of
    /// high risk): `{"kind": "act", "risk": "high", "values": [{"key": "payee", "kind":
    /// "account"}], "moves_money": true}`.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub action: Option<serde_json::Value>,
}

/// Query naming a tenant (admin listings).
#[derive(Debug, Clone, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct TenantQuery {
    /// Tenant (keys: optional, all tenants when absent).
    #[serde(default)]
    pub tenant: Option<String>,
    /// At most this many (default 100, 1..=10000; out of range is a 400).
    #[serde(default)]
    #[param(minimum = 1, maximum = 10000)]
    pub limit: Option<usize>,
    /// Opaque cursor: the `next_cursor` of the previous page, unchanged (absent: the first
    /// page). Bound to this list and query; one of another list, query or caller, or a changed
    /// one, is a 400 `invalid_cursor`.
    #[serde(default)]
    #[param(max_length = 600)]
    pub cursor: Option<String>,
}

/// Principals.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct PrincipalsOut {
    /// The principals on this page, by id.
    pub principals: Vec<PrincipalOut>,
    /// The cursor of the next page (pass it back as `cursor`); null on the last page.
    #[serde(default)]
    pub next_cursor: Option<String>,
}

/// Mint an API key (admin).
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MintKeyIn {
    /// Tenant of the principal.
    #[schema(pattern = "^[a-z0-9][a-z0-9._-]{0,63}$")]
    pub tenant: String,
    /// A registered principal.
    #[schema(pattern = "^[a-z0-9][a-z0-9._-]{0,63}$")]
    pub principal: String,
    /// Free label.
    #[serde(default)]
    pub label: String,
}

/// Keys (no secrets).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct KeysOut {
    /// The keys on this page, by key id.
    pub keys: Vec<crate::KeyInfo>,
    /// The cursor of the next page (pass it back as `cursor`); null on the last page.
    #[serde(default)]
    pub next_cursor: Option<String>,
}

/// Result of a revocation.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct RevokeOut {
    /// The key.
    pub key_id: String,
    /// Always true (an unknown or already revoked key is a 404).
    pub revoked: bool,
}

/// Liveness / readiness.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct HealthOut {
    /// `ok`.
    pub status: String,
    /// Verdict-log entries (readiness only).
    pub log_entries: Option<u64>,
}

/// Path trust `rho` of a memory for the caller, with its factors (each in `[0, 1]`;
/// `rho = clip01(s · i · f · p · v · a)`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct PathTrustOut {
    /// S: the weakest source on the path.
    #[schema(minimum = 0.0, maximum = 1.0)]
    pub s: f64,
    /// I: intermediate integrity (poisoned or revoked items on the path).
    #[schema(minimum = 0.0, maximum = 1.0)]
    pub i: f64,
    /// F: decay along the weakest transformation chain.
    #[schema(minimum = 0.0, maximum = 1.0)]
    pub f: f64,
    /// P: the caller against the stored policy (admitted by every item on the path or not).
    #[schema(minimum = 0.0, maximum = 1.0)]
    pub p: f64,
    /// V: verification.
    #[schema(minimum = 0.0, maximum = 1.0)]
    pub v: f64,
    /// A: the writer's reputation.
    #[schema(minimum = 0.0, maximum = 1.0)]
    pub a: f64,
    /// The path trust: the product of the factors, clipped to `[0, 1]`.
    #[schema(minimum = 0.0, maximum = 1.0)]
    pub rho: f64,
}

/// What the lineage layer knows about one memory, as the caller may see it. Parents and children
/// the caller may not read are counted, not listed.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct LineageOut {
    /// The memory's id.
    pub id: String,
    /// The lineage record (no text): `kind`, `writer`, `integrity`, `base_trust`, `parents`,
    /// `scope`, `poisoned`, `verified_by`, `erased`, `created_ms` and the ancestry `summary`
    /// (`min_source_trust`, `flow`, `depth`, `verified`, `untrusted`, `private`, `poisoned`,
    /// `revoked`, `ceiling`, `affected`, `affected_rest`).
    #[schema(value_type = Object)]
    pub record: serde_json::Value,
    /// Whether the memory is *affected* for the caller: something untrusted, poisoned or revoked
    /// on its path, or an item on the path that does not admit the caller.
    pub affected: bool,
    /// Path trust for the caller, with its factors.
    pub path_trust: PathTrustOut,
    /// Parents the caller may read.
    pub parents: Vec<String>,
    /// Parents the caller may not read.
    pub parents_hidden: usize,
    /// Children the caller may read.
    pub children: Vec<String>,
    /// Children the caller may not read.
    pub children_hidden: usize,
}

/// Format of a lineage export.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ExportFormatName {
    /// memwarden's own audit-trail JSON (`memwarden-lineage-audit/1`): principals, records,
    /// actions with their gate decisions, edges, erasures.
    #[default]
    Memwarden,
    /// W3C PROV-JSON (`entity`, `activity`, `agent`, `wasDerivedFrom`, ...).
    Prov,
}

/// Query of `GET /v1/lineage/export`.
#[derive(Debug, Clone, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ExportQuery {
    /// `memwarden` (default) or `prov`.
    #[serde(default)]
    #[param(inline)]
    pub format: ExportFormatName,
}

/// Arguments of the MCP tools that name one memory (`get_memory`, `memory_history`,
/// `delete_memory`, `report_poisoned`, `verify_memory`, `get_lineage`).
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GetMemoryArgs {
    /// The memory id (32 hex digits).
    pub memory_id: String,
}

/// Arguments of the MCP `memory_history` tool.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HistoryArgs {
    /// The memory id (32 hex digits).
    pub memory_id: String,
    /// At most this many versions (default 100, 1..=10000).
    #[serde(default)]
    pub limit: Option<usize>,
    /// Opaque cursor: the `next_cursor` of the previous page, unchanged (absent: the first page).
    #[serde(default)]
    pub cursor: Option<String>,
}

/// Arguments of `update_memory`.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateMemoryArgs {
    /// The memory id (32 hex digits).
    pub memory_id: String,
    /// The new text.
    pub text: String,
}
