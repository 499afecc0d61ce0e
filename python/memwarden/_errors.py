"""Exceptions. Every error from memwarden carries the stable code of the HTTP API's problem
details (`urn:memwarden:problem:<code>`), whether it came from the embedded engine or a server."""

from __future__ import annotations

import json

from typing import Any, Dict, List, Optional, Type


class MemwardenError(Exception):
    """An error from memwarden.

    Attributes:
        code: the stable machine-readable code (`not_found`, `forbidden`, `withheld`, `invalid_input`,
            `write_refused`, `refused`, `conflict`, `layer_off`, `search_unavailable`,
            `embedder_failed`, `unauthorized`, `rate_limited`, `payload_too_large`,
            `unavailable`, `internal`, ...).
        status: the HTTP status the server answers with for this code.
        detail: what happened (never secrets or memory text).
    """

    code: str = "internal"
    status: int = 500

    def __init__(self, detail: str, *, code: Optional[str] = None, status: Optional[int] = None, problem: Optional[Dict[str, Any]] = None):
        super().__init__(detail)
        self.detail = detail
        if code is not None:
            self.code = code
        if status is not None:
            self.status = status
        self.problem = problem

    def __str__(self) -> str:
        return f"{self.code} ({self.status}): {self.detail}"


class InvalidInput(MemwardenError, ValueError):
    """The request was malformed or out of range (`invalid_input`, 400)."""

    code, status = "invalid_input", 400


class InvalidCursor(InvalidInput):
    """A page cursor that is malformed, was changed, or belongs to another list, query or
    principal (`invalid_cursor`, 400): start again without one."""

    code, status = "invalid_cursor", 400


class Unauthorized(MemwardenError):
    """No valid API key (`unauthorized`, 401)."""

    code, status = "unauthorized", 401


class Forbidden(MemwardenError, PermissionError):
    """The principal may not do this (`forbidden`, 403)."""

    code, status = "forbidden", 403


class IdentityMismatch(Forbidden):
    """A call named a user or agent other than the principal this client acts as. Identity comes
    from the principal (or the API key), never from arguments (`forbidden`, 403)."""


class Withheld(Forbidden):
    """A memory in the caller's scope that a defense layer holds back (`withheld`, 403): it exists
    for this caller, so it is not reported missing. Never carries the memory's text.

    Attributes:
        memory_id: the memory's id.
        layer: the layer that held it back (`lifecycle`, `lineage`).
        rule: the rule that fired (`quarantined`, `tainted_directive`, `revoked_ancestor`, ...).
        flags: the evidence that fired (`external_source`, `self_claim`, ...; the rule itself
            when nothing else did).
    """

    code, status = "withheld", 403

    def __init__(self, detail: str, *, code: Optional[str] = None, status: Optional[int] = None, problem: Optional[Dict[str, Any]] = None):
        super().__init__(detail, code=code, status=status, problem=problem)
        w = (problem or {}).get("withheld") or {}
        self.memory_id: Optional[str] = w.get("id")
        self.layer: Optional[str] = w.get("layer")
        self.rule: Optional[str] = w.get("rule")
        self.flags: List[str] = list(w.get("flags") or [])


class NotFound(MemwardenError, KeyError):
    """No such memory, or not readable by the caller; the two are indistinguishable on purpose
    (`not_found`, 404)."""

    code, status = "not_found", 404

    def __str__(self) -> str:  # KeyError quotes its argument; keep the plain message
        return MemwardenError.__str__(self)


class Conflict(MemwardenError):
    """Already exists, or a grant already used (`conflict`, 409)."""

    code, status = "conflict", 409


class LayerOff(MemwardenError):
    """The operation needs a defense layer this configuration switched off (`layer_off`, 409)."""

    code, status = "layer_off", 409


class WriteRefused(MemwardenError):
    """The authority write gate refused the write (`write_refused`, 422)."""

    code, status = "write_refused", 422


class Refused(MemwardenError):
    """A layer's gate refused (the lifecycle write or promotion gate) (`refused`, 422)."""

    code, status = "refused", 422


class RateLimited(MemwardenError):
    """Too many requests for this API key (`rate_limited`, 429)."""

    code, status = "rate_limited", 429


class SearchUnavailable(MemwardenError):
    """No embedder is configured, so there is no semantic search (`search_unavailable`, 503)."""

    code, status = "search_unavailable", 503


class EmbedderFailed(MemwardenError):
    """The embedder failed (`embedder_failed`, 503)."""

    code, status = "embedder_failed", 503


class InferenceUnavailable(InvalidInput):
    """`infer=True` asks for LLM fact extraction, which memwarden does not run: pass
    `infer=False` to store the messages as they are (`invalid_input`, 400)."""


_BY_CODE: Dict[str, Type[MemwardenError]] = {
    "invalid_input": InvalidInput,
    "invalid_cursor": InvalidCursor,
    "unauthorized": Unauthorized,
    "forbidden": Forbidden,
    "withheld": Withheld,
    "not_found": NotFound,
    "conflict": Conflict,
    "layer_off": LayerOff,
    "write_refused": WriteRefused,
    "refused": Refused,
    "rate_limited": RateLimited,
    "search_unavailable": SearchUnavailable,
    "embedder_failed": EmbedderFailed,
}


def error_for(code: str, status: int, detail: str, problem: Optional[Dict[str, Any]] = None) -> MemwardenError:
    """The exception for a stable code (the base class for codes without their own)."""
    cls = _BY_CODE.get(code, MemwardenError)
    return cls(detail, code=code, status=status, problem=problem)


def native_error(args: Any) -> MemwardenError:
    """The exception for the native module's `NativeError` args: `(code, status, detail)` and,
    from this version on, the problem-details JSON (which carries `withheld`)."""
    code, status, detail = args[0], args[1], args[2]
    problem: Optional[Dict[str, Any]] = None
    if len(args) > 3 and isinstance(args[3], str):
        try:
            parsed = json.loads(args[3])
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            problem = parsed
    return error_for(code, status, detail, problem)
