"""`MemwardenStore`: a LangGraph `BaseStore` over governed memory.

    from memwarden.langgraph import MemwardenStore
    store = MemwardenStore(memwarden.open("data", principal="assistant", kind="agent"))
    graph = builder.compile(store=store)

Every item is a memwarden memory written and read as the client's principal: its origin and
label come from that principal, reads go through the permission filter, and every write is in
the verdict log.

**Mapping.** A LangGraph namespace `("users", "alice", "memories")` is the memwarden namespace
`users.alice.memories` (labels joined by `.`, which LangGraph forbids inside a label). memwarden
namespaces are at most 64 bytes of `[a-z0-9._-]`, starting with a letter or digit, so a label's
other characters are escaped: `_` followed by two hex digits per UTF-8 byte (`Alice` is
`_41lice`, `_` itself is `_5f`). A namespace longer than 64 bytes after joining and escaping is
refused with `InvalidNamespaceError`. A `prefix` given to the store is put in front of every
namespace (so two applications can share a tenant). An item's value is stored as the memory's
text (its canonical JSON, at most 64 KiB) and its key in the memory's metadata (`lg.key`, at most
1024 bytes); what search embeds is the whole value's JSON, as LangGraph's default `"$"` index.

**Limits.** `put` of an existing key stores a new version (memwarden never overwrites; the old
version stays in the history) and is allowed to the key's writer and to users, as any update;
`delete` erases (the memory and what was derived from it alone). `index=False` and per-field
`index=[...]` are accepted but the whole value is still embedded. TTLs are not supported. A
search asks the engine for at most 100 hits per namespace, so `offset + limit` above 100 with a
query returns fewer. Namespace listing and prefix search use a catalog of the namespaces this
store has written, kept as memories in the namespace `<prefix>langgraph..namespaces` (a name no
LangGraph namespace maps to), so they see the namespaces written through a `MemwardenStore` that
this principal may read. Within one `batch`, reads see the state before the batch's puts, and of
several puts to one key the last wins (as LangGraph's `InMemoryStore`).
"""

from __future__ import annotations

import asyncio
import json
import re
from datetime import datetime, timezone
from typing import Any, Dict, Iterable, List, Optional, Tuple

from langgraph.store.base import (
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

try:  # the same filter and namespace-matching semantics as LangGraph's own InMemoryStore
    from langgraph.store.memory import _compare_values, _does_match
except ImportError:  # pragma: no cover - older or newer langgraph
    def _compare_values(item_value: Any, filter_value: Any) -> bool:
        return bool(item_value == filter_value)

    def _does_match(match_condition: Any, key: Tuple[str, ...]) -> bool:
        path = match_condition.path
        if len(key) < len(path):
            return False
        pairs = zip(key, path) if match_condition.match_type == "prefix" else zip(reversed(key), reversed(path))
        return all(p == "*" or k == p for k, p in pairs)


from ._client import Client
from ._errors import NotFound
from ._types import MemoryOut

#: Longest memwarden namespace, in bytes.
NAMESPACE_BYTES_MAX = 64
#: Most hits asked of the engine per namespace and search.
SEARCH_K_MAX = 100
#: Most memories listed per namespace.
LIST_LIMIT = 10_000
_KEY = "lg.key"
_CREATED = "lg.created_ms"
_CATALOG_NS = "langgraph..namespaces"
_CATALOG_KEY = "lg.namespace"
_PLAIN = re.compile(r"[a-z0-9-]")


def encode_label(label: str) -> str:
    """A LangGraph namespace label in memwarden's namespace alphabet (see the module doc)."""
    return "".join(c if _PLAIN.fullmatch(c) else "".join(f"_{b:02x}" for b in c.encode()) for c in label)


def decode_label(s: str) -> str:
    """The inverse of `encode_label`."""
    out = bytearray()
    i = 0
    while i < len(s):
        if s[i] == "_":
            out.append(int(s[i + 1 : i + 3], 16))
            i += 3
        else:
            out.extend(s[i].encode())
            i += 1
    return out.decode()


def _ms_to_dt(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000.0, tz=timezone.utc)


class MemwardenStore(BaseStore):
    """A LangGraph `BaseStore` whose items are memwarden memories (see the module doc)."""

    supports_ttl = False

    def __init__(self, client: Client, *, prefix: str = ""):
        if prefix and not re.fullmatch(r"[a-z0-9][a-z0-9._-]*", prefix):
            raise InvalidNamespaceError(f"prefix {prefix!r} must be [a-z0-9._-], starting with a letter or digit")
        self.client = client
        self.prefix = prefix
        # memwarden namespace -> LangGraph key -> the current memory (this store's view).
        self._keys: Dict[str, Dict[str, MemoryOut]] = {}
        self._catalog: Optional[set] = None

    # -- mapping --------------------------------------------------------------------------------

    def to_namespace(self, namespace: Tuple[str, ...]) -> str:
        """The memwarden namespace of a LangGraph namespace (`InvalidNamespaceError` if it does
        not fit)."""
        if not namespace:
            raise InvalidNamespaceError("Namespace cannot be empty.")
        for label in namespace:
            if not isinstance(label, str) or not label or "." in label:
                raise InvalidNamespaceError(f"Invalid namespace label {label!r} in {namespace}: labels are non-empty strings without '.'")
        name = self.prefix + ".".join(encode_label(label) for label in namespace)
        if len(name.encode()) > NAMESPACE_BYTES_MAX or not re.fullmatch(r"[a-z0-9][a-z0-9._-]*", name):
            raise InvalidNamespaceError(
                f"namespace {namespace} maps to the memwarden namespace {name!r}, which is not 1..={NAMESPACE_BYTES_MAX} bytes of "
                "[a-z0-9._-] starting with a letter or digit (labels are joined by '.', other characters escaped as _xx)"
            )
        return name

    def from_namespace(self, name: str) -> Optional[Tuple[str, ...]]:
        """The LangGraph namespace of a memwarden namespace written by this store, or None."""
        if not name.startswith(self.prefix):
            return None
        rest = name[len(self.prefix) :]
        try:
            return tuple(decode_label(p) for p in rest.split("."))
        except (ValueError, UnicodeDecodeError):
            return None

    # -- the key index -------------------------------------------------------------------------

    def _refresh(self, ns: str) -> Dict[str, MemoryOut]:
        index: Dict[str, MemoryOut] = {}
        for m in self.client.iter_memories(ns, page_size=LIST_LIMIT):
            k = (m.get("metadata") or {}).get(_KEY)
            if k is None:
                continue
            old = index.get(k)
            if old is None or m["created_ms"] >= old["created_ms"]:
                index[k] = m
        self._keys[ns] = index
        return index

    def _lookup(self, ns: str, key: str) -> Optional[MemoryOut]:
        index = self._keys.get(ns)
        if index is None:
            index = self._refresh(ns)
        m = index.get(key)
        if m is not None:
            try:
                return self.client.get(m["id"])  # still current and readable?
            except NotFound:
                m = self._refresh(ns).get(key)
        return m

    def _catalog_names(self) -> set:
        if self._catalog is None:
            names = set()
            for m in self.client.iter_memories(self.prefix + _CATALOG_NS, page_size=LIST_LIMIT):
                n = (m.get("metadata") or {}).get(_CATALOG_KEY)
                if n:
                    names.add(n)
            self._catalog = names
        return self._catalog

    def _note_namespace(self, ns: str) -> None:
        names = self._catalog_names()
        if ns not in names:
            self.client.add(f"LangGraph namespace {ns}", namespace=self.prefix + _CATALOG_NS, metadata={_CATALOG_KEY: ns})
            names.add(ns)

    def _item(self, namespace: Tuple[str, ...], key: str, m: MemoryOut, score: Optional[float] = None, search: bool = False) -> Item:
        try:
            value = json.loads(m["content"])
        except ValueError:
            value = {"content": m["content"]}
        if not isinstance(value, dict):
            value = {"value": value}
        md = m.get("metadata") or {}
        created = _ms_to_dt(int(md.get(_CREATED, m["created_ms"])))
        updated = _ms_to_dt(m["created_ms"])
        if search:
            return SearchItem(namespace=namespace, key=key, value=value, created_at=created, updated_at=updated, score=score)
        return Item(value=value, key=key, namespace=namespace, created_at=created, updated_at=updated)

    def memory(self, namespace: Tuple[str, ...], key: str) -> Optional[MemoryOut]:
        """The memwarden memory behind an item: its id (to pass as `context` to
        `Client.decide`), origin, label, act class, writer and status. None if absent."""
        return self._lookup(self.to_namespace(namespace), key)

    # -- operations ----------------------------------------------------------------------------

    def _get(self, op: GetOp) -> Optional[Item]:
        ns = self.to_namespace(op.namespace)
        m = self._lookup(ns, op.key)
        return self._item(op.namespace, op.key, m) if m is not None else None

    def _put(self, op: PutOp) -> None:
        if op.ttl is not None:
            raise NotImplementedError("TTL is not supported by MemwardenStore; use ttl=None")
        ns = self.to_namespace(op.namespace)
        existing = self._lookup(ns, op.key)
        index = self._keys.setdefault(ns, {})
        if op.value is None:
            if existing is not None:
                try:
                    self.client.erase(existing["id"])
                except NotFound:
                    pass
            index.pop(op.key, None)
            return
        content = json.dumps(dict(op.value), sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
        if existing is not None:
            if existing["content"] == content:
                return
            out = self.client.update(existing["id"], content)
            index[op.key] = out["memory"]
            return
        self._note_namespace(ns)
        now = datetime.now(timezone.utc)
        md = {_KEY: op.key, _CREATED: str(int(now.timestamp() * 1000))}
        w = self.client.add(content, namespace=ns, metadata=md)
        index[op.key] = w["item"]

    def _namespaces_under(self, prefix: Tuple[str, ...]) -> List[Tuple[str, Tuple[str, ...]]]:
        out = []
        n = len(prefix)
        for name in sorted(self._catalog_names()):
            t = self.from_namespace(name)
            if t is not None and t[:n] == tuple(prefix):
                out.append((name, t))
        if prefix:
            try:
                exact = self.to_namespace(tuple(prefix))
                if exact not in {name for name, _ in out}:
                    out.append((exact, tuple(prefix)))
            except InvalidNamespaceError:
                pass
        return out

    def _search(self, op: SearchOp) -> List[SearchItem]:
        if op.limit <= 0:
            return []
        want = op.offset + op.limit
        found: List[Tuple[float, Tuple[str, ...], str, MemoryOut]] = []
        for name, t in self._namespaces_under(op.namespace_prefix):
            if op.query:
                k = min(SEARCH_K_MAX, want if not op.filter else want * 4)
                hits = self.client.search(op.query, namespace=name, k=max(1, k))
                cands = [(h["score"], h["item"]) for h in hits]
            else:
                cands = [(0.0, m) for m in self.client.iter_memories(name, page_size=LIST_LIMIT)]
            for score, m in cands:
                key = (m.get("metadata") or {}).get(_KEY)
                if key is None:
                    continue
                if op.filter:
                    try:
                        value = json.loads(m["content"])
                    except ValueError:
                        continue
                    if not isinstance(value, dict) or not all(_compare_values(value.get(fk), fv) for fk, fv in op.filter.items()):
                        continue
                found.append((score, t, key, m))
        if op.query:
            found.sort(key=lambda x: x[0], reverse=True)
        page = found[op.offset : op.offset + op.limit]
        return [self._item(t, key, m, score=score if op.query else None, search=True) for score, t, key, m in page]  # type: ignore[misc]

    def _list_namespaces(self, op: ListNamespacesOp) -> List[Tuple[str, ...]]:
        spaces = [t for t in (self.from_namespace(n) for n in self._catalog_names()) if t is not None]
        if op.match_conditions:
            spaces = [s for s in spaces if all(_does_match(c, s) for c in op.match_conditions)]
        if op.max_depth is not None:
            spaces = sorted({s[: op.max_depth] for s in spaces})
        else:
            spaces = sorted(set(spaces))
        return spaces[op.offset : op.offset + op.limit]

    def batch(self, ops: Iterable[Op]) -> List[Result]:
        """Run the operations; reads see the state before the batch's puts, and the last put to
        a key wins."""
        ops = list(ops)
        results: List[Result] = [None] * len(ops)
        puts: Dict[Tuple[Tuple[str, ...], str], PutOp] = {}
        for i, op in enumerate(ops):
            if isinstance(op, GetOp):
                results[i] = self._get(op)
            elif isinstance(op, SearchOp):
                results[i] = self._search(op)
            elif isinstance(op, ListNamespacesOp):
                results[i] = self._list_namespaces(op)
            elif isinstance(op, PutOp):
                self.to_namespace(op.namespace)  # validate now, before any put runs
                puts.pop((op.namespace, op.key), None)
                puts[(op.namespace, op.key)] = op
            else:
                raise ValueError(f"unknown store operation {op!r}")
        for op in puts.values():
            self._put(op)
        return results

    async def abatch(self, ops: Iterable[Op]) -> List[Result]:
        """`batch` on a worker thread (the engine releases the GIL)."""
        return await asyncio.to_thread(self.batch, list(ops))
