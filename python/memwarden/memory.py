"""`memwarden.Memory`: a drop-in for Mem0's `Memory` (mem0ai 2.x) over governed memory.

Change `from mem0 import Memory` to `from memwarden import Memory` and the calls keep working
with the same return shapes (`{"results": [...]}` with `id`, `memory`, `hash`, `metadata`,
`score`, `created_at`, `updated_at`, ...). What differs is the point:

- **Identity comes from the principal**, never from arguments. The `Memory` acts as the
  principal it was opened as (embedded) or as the API key's principal (remote). A `user_id` or
  `agent_id` that names anyone else is refused with `IdentityMismatch`, not silently obeyed;
  `run_id` is a free tag (kept in the metadata, as Mem0 keeps it in its payload).
- **Caller metadata changes nothing**: `{"trusted": True}` is stored as metadata and no gate reads
  it; the origin and label come from the writer.
- **No LLM**: `infer=True` (Mem0's default) asks for LLM fact extraction, which memwarden does
  not run; it raises `InferenceUnavailable` instead of silently storing nothing. Pass
  `infer=False` to store the messages as they are.
- **Each result also carries** memwarden's `origin`, `label`, `act_class` and `writer`, and
  search hits their `similarity` and `path_trust`.

Where the `Memory` lives comes from the constructor's arguments, else a `"memwarden"` section of
the config dict, else the environment: `MEMWARDEN_SERVER` + `MEMWARDEN_API_KEY` (remote), or
`MEMWARDEN_DATA` (default `./memwarden-data`), `MEMWARDEN_PRINCIPAL`, `MEMWARDEN_TENANT`,
`MEMWARDEN_PRINCIPAL_KIND` (registers the principal if absent) and `MEMWARDEN_MODEL_DIR`.
Mem0's `vector_store`, `embedder`, `llm` and `history_db_path` settings are accepted and ignored:
memwarden keeps its own store, model and verdict log, so the same config dict works unchanged.

Other differences, each deliberate:
- memwarden never overwrites: `update` stores a new version (a new id, derived from the old
  one) and supersedes the old; `get`, `update`, `delete` and `history` accept any version's id
  and act on the current one; `update` returns the new `id` next to Mem0's message.
- `update(metadata=...)` is refused: a stored memory's metadata is part of its record.
- `delete` erases the memory and what was declared derived from it; `delete_all` and `reset` erase
  the memories this principal wrote in the namespace (the verdict log is never reset).
- `top_k` is at most 100 (the engine's limit); the `threshold` gates the cosine similarity, as
  Mem0's gates its semantic score.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import logging
import os
from datetime import date, datetime, timezone
from typing import Any, Callable, Dict, List, Mapping, Optional

from ._client import Client, connect, open as _open
from ._errors import IdentityMismatch, InferenceUnavailable, InvalidInput, NotFound
from ._types import MemoryOut

logger = logging.getLogger("memwarden.memory")

_UNSET: Any = object()
#: Metadata keys Mem0 promotes to the top level of a result.
_PROMOTED = ("run_id", "actor_id", "role", "attributed_to", "expiration_date")
#: Metadata key listing the keys whose values were JSON-encoded (non-string caller values).
_JSON_KEYS = "mem0.json"
_IDENTITY = ("user_id", "agent_id", "run_id", "actor_id")
#: Most memories one `get_all`/`delete_all` lists (the engine's list limit).
LIST_LIMIT = 10_000
#: Largest `top_k` (the engine's search limit).
TOP_K_MAX = 100


class MemoryNotFound(NotFound, ValueError):
    """No such memory (or not readable by this principal). A `ValueError` too, as Mem0 raises."""


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000.0, tz=timezone.utc).isoformat()


def _encode_metadata(md: Mapping[str, Any]) -> Dict[str, str]:
    out: Dict[str, str] = {}
    json_keys: List[str] = []
    for k, v in md.items():
        if isinstance(v, str):
            out[str(k)] = v
        else:
            out[str(k)] = json.dumps(v, sort_keys=True, default=str)
            json_keys.append(str(k))
    if json_keys:
        out[_JSON_KEYS] = ",".join(sorted(json_keys))
    return out


def _decode_metadata(md: Mapping[str, str]) -> Dict[str, Any]:
    json_keys = set(filter(None, md.get(_JSON_KEYS, "").split(",")))
    out: Dict[str, Any] = {}
    for k, v in md.items():
        if k == _JSON_KEYS or k.startswith("memwarden."):
            continue
        if k in json_keys:
            try:
                out[k] = json.loads(v)
                continue
            except ValueError:
                pass
        out[k] = v
    return out


def _expired(md: Mapping[str, Any]) -> bool:
    exp = md.get("expiration_date")
    if not exp:
        return False
    try:
        return date.fromisoformat(str(exp)) < datetime.now(timezone.utc).date()
    except ValueError:
        return False


def _normalize_expiration(value: Any) -> Optional[str]:
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.date().isoformat()
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, str):
        try:
            return date.fromisoformat(value).isoformat()
        except ValueError as exc:
            raise InvalidInput("expiration_date must be a valid date in YYYY-MM-DD format.") from exc
    raise InvalidInput("expiration_date must be a date string in YYYY-MM-DD format.")


def _match(value: Any, cond: Any) -> bool:
    """Mem0's metadata filter operators on one value."""
    if isinstance(cond, dict):
        for op, arg in cond.items():
            if op == "eq" and value != arg:
                return False
            if op == "ne" and value == arg:
                return False
            if op == "in" and value not in arg:
                return False
            if op == "nin" and value in arg:
                return False
            if op in ("gt", "gte", "lt", "lte"):
                try:
                    if op == "gt" and not value > arg:
                        return False
                    if op == "gte" and not value >= arg:
                        return False
                    if op == "lt" and not value < arg:
                        return False
                    if op == "lte" and not value <= arg:
                        return False
                except TypeError:
                    return False
            if op == "contains" and (not isinstance(value, str) or str(arg) not in value):
                return False
            if op == "icontains" and (not isinstance(value, str) or str(arg).lower() not in value.lower()):
                return False
        return True
    if cond == "*":
        return value is not None
    return bool(value == cond)


def _filter_ok(result: Mapping[str, Any], filters: Mapping[str, Any]) -> bool:
    for key, cond in filters.items():
        if key in ("user_id", "agent_id"):
            continue  # checked against the principal before the call
        if key == "AND":
            if not all(_filter_ok(result, f) for f in cond):
                return False
        elif key == "OR":
            if not any(_filter_ok(result, f) for f in cond):
                return False
        elif key == "NOT":
            if any(_filter_ok(result, f) for f in cond):
                return False
        else:
            value = result.get(key) if key in _PROMOTED else (result.get("metadata") or {}).get(key)
            if not _match(value, cond):
                return False
    return True


class Memory:
    """Mem0's `Memory` API over memwarden (see the module documentation for what differs)."""

    def __init__(
        self,
        config: Any = None,
        *,
        client: Optional[Client] = None,
        path: Optional[str] = None,
        principal: Optional[str] = None,
        tenant: Optional[str] = None,
        kind: Optional[str] = None,
        namespace: Optional[str] = None,
        url: Optional[str] = None,
        api_key: Optional[str] = None,
        model_dir: Optional[str] = None,
        preset: Optional[str] = None,
    ):
        mw: Dict[str, Any] = {}
        if isinstance(config, Mapping):
            mw = dict(config.get("memwarden") or {})
        env = os.environ.get
        self.namespace: str = namespace or mw.get("namespace") or env("MEMWARDEN_NAMESPACE") or "default"
        if client is None:
            url = url or mw.get("url") or env("MEMWARDEN_SERVER")
            if url:
                client = connect(url, api_key or mw.get("api_key") or env("MEMWARDEN_API_KEY"))
            else:
                who = principal or mw.get("principal") or env("MEMWARDEN_PRINCIPAL")
                if not who:
                    raise InvalidInput(
                        "memwarden.Memory acts as an authenticated principal, never as the user_id of a call: "
                        "pass principal= (embedded) or url= and api_key= (remote), a 'memwarden' section in the config, "
                        "or set MEMWARDEN_PRINCIPAL (or MEMWARDEN_SERVER and MEMWARDEN_API_KEY)"
                    )
                client = _open(
                    path or mw.get("path") or env("MEMWARDEN_DATA") or "memwarden-data",
                    who,
                    tenant=tenant or mw.get("tenant") or env("MEMWARDEN_TENANT") or "default",
                    kind=kind or mw.get("kind") or env("MEMWARDEN_PRINCIPAL_KIND"),
                    preset=preset or mw.get("preset") or env("MEMWARDEN_PRESET") or "full",
                    model_dir=model_dir or mw.get("model_dir"),
                )
        self.client: Client = client
        me = client.principal
        self._me_id: str = me["id"]
        self._me_kind: str = me["kind"]

    @classmethod
    def from_config(cls, config_dict: Mapping[str, Any]) -> "Memory":
        """Mem0's constructor from a config dict. Its `vector_store`, `embedder`, `llm` and
        `history_db_path` are ignored; a `"memwarden"` section (`path`, `principal`, `tenant`,
        `kind`, `namespace`, `url`, `api_key`, `model_dir`, `preset`) says where and as whom."""
        return cls(config_dict)

    # -- identity -----------------------------------------------------------------------------

    def _check_identity(self, user_id: Any = None, agent_id: Any = None) -> None:
        for name, v in (("user_id", user_id), ("agent_id", agent_id)):
            if v is None:
                continue
            v = str(v).strip()
            if v != self._me_id:
                raise IdentityMismatch(
                    f"{name}={v!r} names someone other than the principal this Memory acts as ({self._me_kind} {self._me_id!r}); "
                    "memwarden takes identity from the principal (or the API key), never from arguments"
                )

    def _identity_filters(self, filters: Optional[Mapping[str, Any]], method: str, kwargs: Mapping[str, Any]) -> Dict[str, Any]:
        bad = set(kwargs) & {"user_id", "agent_id", "run_id"}
        if bad:
            raise InvalidInput(f"Top-level entity parameters {bad} are not supported in {method}(). Use filters={{'user_id': '...'}} instead.")
        f = dict(filters or {})
        self._check_identity(f.get("user_id"), f.get("agent_id"))
        return f

    # -- results ------------------------------------------------------------------------------

    def _result(self, m: MemoryOut, *, score: Any = _UNSET, with_score: bool = True) -> Dict[str, Any]:
        md = _decode_metadata(m.get("metadata") or {})
        promoted = {k: md.pop(k) for k in _PROMOTED if k in md}
        r: Dict[str, Any] = {
            "id": m["id"],
            "memory": m["content"],
            "hash": hashlib.md5(m["content"].encode()).hexdigest(),
            "metadata": md or None,
        }
        if with_score:
            r["score"] = None if score is _UNSET else score
        r["created_at"] = _iso(m["created_ms"])
        r["updated_at"] = _iso(m["created_ms"])
        # Who wrote it comes from the record (the writer's kind), never from the request.
        if m["origin"] == "user":
            r["user_id"] = m["writer"]
        elif m["origin"] == "agent":
            r["agent_id"] = m["writer"]
        r.update(promoted)
        r.update({"origin": m["origin"], "label": m["label"], "act_class": m["act_class"], "writer": m["writer"], "status": m["status"]})
        return r

    def _current(self, memory_id: str) -> MemoryOut:
        """The current version of the memory `memory_id` names (any version's id)."""
        try:
            return self.client.get(memory_id)
        except NotFound:
            pass
        try:
            versions = self.client.history(memory_id)
        except NotFound:
            raise MemoryNotFound(f"Memory with id {memory_id} not found") from None
        last = versions[-1] if versions else None
        if last is None or last["status"] != "active":
            raise MemoryNotFound(f"Memory with id {memory_id} not found")
        return last

    def _own(self, run_id: Optional[str] = None) -> List[MemoryOut]:
        items = self.client.iter_memories(self.namespace, page_size=LIST_LIMIT)
        return [m for m in items if m["writer"] == self._me_id and (run_id is None or (m.get("metadata") or {}).get("run_id") == run_id)]

    # -- Mem0's API -----------------------------------------------------------------------------

    def add(
        self,
        messages: Any,
        *,
        user_id: Optional[str] = None,
        agent_id: Optional[str] = None,
        run_id: Optional[str] = None,
        metadata: Optional[Dict[str, Any]] = None,
        timestamp: Any = None,
        expiration_date: Any = None,
        infer: bool = True,
        memory_type: Optional[str] = None,
        prompt: Optional[str] = None,
    ) -> Dict[str, Any]:
        """Store messages (a string, a `{"role", "content"}` dict, or a list of them): one
        memory per non-system message, as this principal. Returns `{"results": [{"id",
        "memory", "event": "ADD", "actor_id", "role", "origin", "label", "act_class", ...}]}`."""
        self._check_identity(user_id, agent_id)
        if timestamp is not None:
            raise InvalidInput("timestamp is a Mem0 platform parameter; memwarden records the time of each write itself")
        if infer or memory_type is not None:
            raise InferenceUnavailable(
                "infer=True (Mem0's default) and memory_type ask for LLM extraction, which memwarden does not run: "
                "pass infer=False to store the messages as they are"
            )
        if isinstance(messages, str):
            messages = [{"role": "user", "content": messages}]
        elif isinstance(messages, dict):
            messages = [messages]
        elif not isinstance(messages, list):
            raise InvalidInput("messages must be str, dict, or list[dict]")
        base: Dict[str, Any] = {}
        for k, v in (metadata or {}).items():
            if k in _IDENTITY:
                logger.warning("add(): ignoring metadata[%r] - identity fields cannot be set through metadata", k)
                continue
            base[k] = v
        exp = _normalize_expiration(expiration_date)
        if exp is not None:
            base["expiration_date"] = exp
        route = "dialogue" if self._me_kind in ("user", "agent") else None
        results: List[Dict[str, Any]] = []
        for msg in messages:
            if not isinstance(msg, dict) or msg.get("role") is None or msg.get("content") is None:
                logger.warning("Skipping invalid message format: %r", msg)
                continue
            if msg["role"] == "system":
                continue
            md = dict(base, role=msg["role"])
            if run_id is not None:
                md["run_id"] = str(run_id)
            if msg.get("name"):
                md["actor_id"] = msg["name"]
            out = self.client.add(str(msg["content"]), namespace=self.namespace, route=route, metadata=_encode_metadata(md))
            item = out["item"]
            results.append(
                {
                    "id": item["id"],
                    "memory": item["content"],
                    "event": "ADD",
                    "actor_id": msg.get("name") or None,
                    "role": msg["role"],
                    "origin": item["origin"],
                    "label": item["label"],
                    "act_class": item["act_class"],
                }
            )
        return {"results": results}

    def get(self, memory_id: str) -> Optional[Dict[str, Any]]:
        """The memory (its current version), or None."""
        try:
            return self._result(self._current(memory_id))
        except NotFound:
            return None

    def get_all(self, *, filters: Optional[Dict[str, Any]] = None, top_k: int = 20, show_expired: bool = False, **kwargs: Any) -> Dict[str, Any]:
        """The memories of this `Memory`'s namespace that the principal may read (at most
        `top_k`), oldest first, filtered like Mem0's (`run_id`, metadata conditions)."""
        f = self._identity_filters(filters, "get_all", kwargs)
        if not isinstance(top_k, int) or isinstance(top_k, bool) or top_k < 0:
            raise InvalidInput("top_k must be a non-negative integer")
        out: List[Dict[str, Any]] = []
        if top_k == 0:
            return {"results": out}
        for m in self.client.iter_memories(self.namespace, page_size=LIST_LIMIT):
            r = self._result(m, with_score=False)
            if not show_expired and _expired(r):
                continue
            if _filter_ok(r, f):
                out.append(r)
            if len(out) >= top_k:
                break
        return {"results": out}

    def search(
        self,
        query: str,
        *,
        top_k: int = 20,
        filters: Optional[Dict[str, Any]] = None,
        threshold: float = 0.1,
        rerank: bool = False,
        explain: bool = False,
        reference_date: Any = None,
        show_expired: bool = False,
        **kwargs: Any,
    ) -> Dict[str, Any]:
        """Semantic search: `{"results": [...]}` best first, each with Mem0's fields plus
        `origin`, `label`, `act_class`, `similarity` and `path_trust`. `score` is the cosine
        similarity, as Mem0's (the order is memwarden's: hybrid fusion, then path trust, so a
        later hit may score higher; `explain=True` adds the fused `rank_score`). `threshold`
        gates the similarity; `rerank` is accepted and does nothing (no reranker is configured)."""
        if reference_date is not None:
            raise InvalidInput("reference_date is a Mem0 platform parameter and is not supported")
        f = self._identity_filters(filters, "search", kwargs)
        if threshold is not None and (not isinstance(threshold, (int, float)) or not 0 <= threshold <= 1):
            raise InvalidInput(f"Invalid threshold: {threshold}. Must be between 0 and 1 (inclusive).")
        if not isinstance(top_k, int) or isinstance(top_k, bool) or top_k < 0:
            raise InvalidInput("top_k must be a non-negative integer")
        if not isinstance(query, str) or not query.strip():
            raise InvalidInput("Invalid query: cannot be empty or whitespace-only.")
        if top_k == 0:
            return {"results": []}
        # Over-fetch only for conditions the engine cannot apply (identity is the principal's).
        conditions = {key: v for key, v in f.items() if key not in ("user_id", "agent_id")}
        k = min(TOP_K_MAX, top_k * 4 if conditions else top_k)
        out: List[Dict[str, Any]] = []
        for h in self.client.search(query.strip(), namespace=self.namespace, k=max(1, k)):
            if threshold is not None and h["similarity"] < threshold:
                continue
            r = self._result(h["item"], score=h["similarity"])
            if not show_expired and _expired(r):
                continue
            if not _filter_ok(r, f):
                continue
            r["similarity"] = h["similarity"]
            r["path_trust"] = h["path_trust"]
            if explain:
                r["score_details"] = {"similarity": h["similarity"], "path_trust": h["path_trust"], "rank_score": h["score"]}
            out.append(r)
            if len(out) >= top_k:
                break
        return {"results": out}

    def update(self, memory_id: str, text: Optional[str] = None, metadata: Optional[Dict[str, Any]] = None, expiration_date: Any = _UNSET, data: Optional[str] = None) -> Dict[str, Any]:
        """Store `text` as the memory's new version (the old one is superseded, not
        overwritten). Returns Mem0's message plus the new version's `id`."""
        if text is None:
            text = data
        if metadata is not None or expiration_date is not _UNSET:
            raise InvalidInput("memwarden keeps a memory's metadata with its record; update() changes only the text")
        if text is None:
            raise InvalidInput("At least one of text, metadata, or expiration_date must be provided.")
        cur = self._current(memory_id)
        out = self.client.update(cur["id"], text)
        return {"message": "Memory updated successfully!", "id": out["memory"]["id"], "previous_id": cur["id"]}

    def delete(self, memory_id: str) -> Dict[str, Any]:
        """Erase the memory, its versions and every memory declared derived from it; memories
        merely written in a session that saw it stay."""
        cur = self._current(memory_id)
        self.client.erase(cur["id"])
        return {"message": "Memory deleted successfully!"}

    def delete_all(self, user_id: Optional[str] = None, agent_id: Optional[str] = None, run_id: Optional[str] = None) -> Dict[str, Any]:
        """Erase the memories this principal wrote in the namespace (of `run_id`, if given)."""
        self._check_identity(user_id, agent_id)
        if user_id is None and agent_id is None and run_id is None:
            raise InvalidInput("At least one filter is required to delete all memories. If you want to delete all memories, use the `reset()` method.")
        self._erase_own(run_id)
        return {"message": "Memories deleted successfully!"}

    def _erase_own(self, run_id: Optional[str]) -> int:
        n = 0
        for m in self._own(run_id):
            try:
                self.client.erase(m["id"])
                n += 1
            except NotFound:
                pass  # already erased with an ancestor
        return n

    def history(self, memory_id: str) -> List[Dict[str, Any]]:
        """The memory's versions as Mem0's change records (`ADD`, then one `UPDATE` per version).
        After `delete`, the one record left is Mem0's `DELETE` row (`is_deleted`), without the
        erased text: the versions went with the erasure."""
        try:
            record = self.client.history_record(memory_id)
        except NotFound:
            return []
        erased = record.get("erased")
        if erased:
            at = _iso(erased["at_ms"])
            return [
                {
                    "id": erased["erasure_id"],
                    "memory_id": memory_id,
                    "old_memory": None,
                    "new_memory": None,
                    "event": "DELETE",
                    "created_at": at,
                    "updated_at": at,
                    "is_deleted": True,
                    "actor_id": erased["erased_by"],
                    "role": None,
                }
            ]
        versions = record["versions"]
        out: List[Dict[str, Any]] = []
        prev: Optional[MemoryOut] = None
        for v in versions:
            md = v.get("metadata") or {}
            out.append(
                {
                    "id": v["id"],
                    "memory_id": memory_id,
                    "old_memory": prev["content"] if prev else None,
                    "new_memory": v["content"],
                    "event": "UPDATE" if prev else "ADD",
                    "created_at": _iso(versions[0]["created_ms"]),
                    "updated_at": _iso(v["created_ms"]),
                    "is_deleted": False,
                    "actor_id": md.get("actor_id"),
                    "role": md.get("role"),
                }
            )
            prev = v
        return out

    def reset(self) -> None:
        """Erase every memory this principal wrote in the namespace. The verdict log, which
        records every write and erasure, is never reset."""
        self._erase_own(None)

    def chat(self, query: str) -> Any:
        """Not implemented (as in Mem0)."""
        raise NotImplementedError("Chat function not implemented yet.")

    def close(self) -> None:
        """Release the client's connections."""
        self.client.close()

    def __enter__(self) -> "Memory":
        return self

    def __exit__(self, *exc: Any) -> bool:
        self.close()
        return False


class AsyncMemory:
    """Mem0's `AsyncMemory`: `Memory`'s methods as coroutines (each runs on a worker thread;
    the engine releases the GIL)."""

    def __init__(self, config: Any = None, **kwargs: Any):
        self.sync = kwargs.pop("memory", None) or Memory(config, **kwargs)

    @classmethod
    def from_config(cls, config_dict: Mapping[str, Any]) -> "AsyncMemory":
        """See `Memory.from_config`."""
        return cls(config_dict)

    def close(self) -> None:
        """Release the client's connections."""
        self.sync.close()

    async def __aenter__(self) -> "AsyncMemory":
        return self

    async def __aexit__(self, *exc: Any) -> bool:
        self.close()
        return False


def _asyncify(name: str) -> Callable[..., Any]:
    fn = getattr(Memory, name)

    @functools.wraps(fn)
    async def method(self: AsyncMemory, *args: Any, **kwargs: Any) -> Any:
        return await asyncio.to_thread(getattr(self.sync, name), *args, **kwargs)

    return method


for _n in ("add", "get", "get_all", "search", "update", "delete", "delete_all", "history", "reset"):
    setattr(AsyncMemory, _n, _asyncify(_n))
