"""The shapes of results: the HTTP API's response bodies (crates/memwarden-server/src/dto.rs),
as `TypedDict`s. Every door returns these same shapes."""

from __future__ import annotations

from typing import Any, Dict, List, NotRequired, Optional, TypedDict


class ParentOut(TypedDict):
    """A parent edge of a stored memory."""

    id: str
    kind: str


class MemoryOut(TypedDict):
    """A stored memory with its provenance."""

    id: str
    tenant: str
    namespace: str
    content: str
    #: `user`, `trusted_tool`, `agent`, `untrusted_external`: bound at write from the writer.
    origin: str
    #: Integrity label: `trusted`, `agent`, `untrusted`.
    label: str
    #: What the memory may authorize: `act`, `inform`, `none`.
    act_class: str
    writer: str
    route: str
    parents: List[ParentOut]
    readers: Optional[List[str]]
    visibility: str
    status: str
    superseded_by: Optional[str]
    created_ms: int
    session: Optional[str]
    task: Optional[str]
    metadata: Dict[str, str]
    #: For a tool output the tool did not vouch for: the caller that reported it.
    reported_by: NotRequired[str]
    #: On a read by id or a list with the lifecycle layer on: the scorer's risk r in [0, 1].
    risk: NotRequired[float]
    #: The evidence that fired (`external_source`, `instruction_like`, ...; `unscored`).
    risk_flags: NotRequired[List[str]]


class SessionOut(TypedDict):
    """An issued session handle (`Client.open_session`)."""

    session: str
    #: `fork`, `planning`, `quarantine`.
    kind: str
    #: The label its writes start at: `trusted`, `agent`, `untrusted`.
    floor: str
    log_index: int


class WriteOut(TypedDict):
    """A write's result."""

    item: MemoryOut
    log_index: int


class BatchItemOut(TypedDict):
    """One result of a batch add."""

    index: int
    ok: bool
    id: Optional[str]
    log_index: Optional[int]
    error: Optional[Dict[str, Any]]


class BatchOut(TypedDict):
    """Result of a batch add."""

    results: List[BatchItemOut]


class Hit(TypedDict):
    """A search hit."""

    id: str
    memory: str
    #: The ranking score: similarity x path trust (the similarity alone without the lineage layer).
    score: float
    similarity: float
    path_trust: Optional[float]
    #: The lifecycle read firewall's risk r for this query (None with the layer off).
    risk: Optional[float]
    #: The evidence the firewall saw in it.
    risk_flags: List[str]
    item: MemoryOut


class WithheldOut(TypedDict):
    """A memory of the caller's scope that a defense layer held back (never its text)."""

    id: str
    #: `lifecycle` or `lineage`.
    layer: str
    #: The rule that fired (`quarantined`, `tainted_directive`, `revoked_ancestor`, ...).
    rule: str
    #: The evidence that fired (`external_source`, `self_claim`, ...; the rule when nothing else).
    flags: List[str]


class ListOut(TypedDict):
    """A namespace listing: the memories handed over and those a layer withheld."""

    results: List[MemoryOut]
    withheld: List[WithheldOut]
    next_cursor: Optional[str]


class SearchOut(TypedDict):
    """A search's answer: the hits, how many memories a layer withheld from them, and which
    (by id, rule and flags; cite them in an action's context and the decision weighs them)."""

    results: List[Hit]
    withheld: int
    withheld_memories: List[WithheldOut]


class UpdatedOut(TypedDict):
    """Result of an update."""

    memory: MemoryOut
    previous_id: str
    log_index: int


class ErasedOut(TypedDict):
    """Result of an erasure."""

    erasure_id: str
    id: str
    erased: List[str]
    survivors: List[str]
    seen_marked: List[str]
    log_index: int


class AttestOut(TypedDict):
    """Result of an attestation."""

    attestation: Dict[str, Any]
    counts: bool
    log_index: int


class GrantOut(TypedDict):
    """Result of recording a grant."""

    nonce: str
    log_index: int


class GrantRequest(TypedDict):
    """What a grant must bind for an `ask_user` action to go through."""

    tool: str
    key: str
    kind: str
    value: str
    amount: Optional[str]


class Verdict(TypedDict):
    """The verdict on a proposed action."""

    #: `allow`, `redact`, `reverify`, `ask_user` or `block`.
    decision: str
    layer: str
    rule: str
    code: Optional[str]
    cause: str
    supporting: List[str]
    affected: List[str]
    pushed: List[Dict[str, Any]]
    ask: List[GrantRequest]
    threshold: Optional[float]


class DecideOut(TypedDict):
    """Result of a decision."""

    verdict: Verdict
    log_index: int


class VerifyOut(TypedDict):
    """Result of verifying the verdict log."""

    ok: bool
    entries: int
    root: str
    head: str
    checkpoints_checked: int
    problem: Optional[str]
    first_bad_index: Optional[int]


class ProofOut(TypedDict):
    """An inclusion proof of one log entry."""

    index: int
    size: int
    root: str
    leaf: str
    proof: List[str]
    verified: bool
    kind: str
    body: Any


class PrincipalOut(TypedDict):
    """A principal as the engine records it."""

    tenant: str
    id: str
    kind: str
    integrity: str
    origin: str
    domain: Optional[str]
    allow_listed: bool
    public_key: Optional[str]


class LineageOut(TypedDict):
    """What the lineage layer knows about one memory, as the caller may see it."""

    id: str
    record: Dict[str, Any]
    affected: bool
    path_trust: Dict[str, float]
    parents: List[str]
    parents_hidden: int
    children: List[str]
    children_hidden: int
