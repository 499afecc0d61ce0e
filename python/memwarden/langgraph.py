"""`MemwardenStore`: a LangGraph `BaseStore` over governed memory.

    from memwarden.langgraph import MemwardenStore
    store = MemwardenStore(memwarden.open("data", principal="assistant", kind="agent"),
                           index={"dims": 1536, "embed": embed_texts, "fields": ["text"]},  # optional
                           ttl={"default_ttl": 60, "refresh_on_read": True})                 # optional
    graph = builder.compile(store=store)

Every item is a memwarden memory written and read as the client's principal: its origin and
label come from that principal, reads go through the permission filter, and every write is in
the verdict log. `pip install "memwarden[langgraph]"` brings LangGraph along.

**Search, two modes.** With `index=None` (the default) a query is answered by memwarden's own
search (its local embedder over the item's whole value, ranked with the lineage layer's path
trust), per namespace. With `index={"dims", "embed", "fields"}` (LangGraph's `IndexConfig`) the
store searches as LangGraph's `InMemoryStore` does: the texts at `fields` (default `["$"]`, the
whole value; a `put`'s own `index=[...]` overrides them, `index=False` leaves the item
unembedded) are embedded with `embed`, an item's score is the best cosine similarity of its
texts to the query, and an item without texts has score `None` and only fills a page after the
scored ones. The vectors are not stored in memwarden (its metadata fields are 1 KiB): the
candidates are the namespace's memories this principal may read (filter applied), and their
texts are embedded when searched, through a per-store cache keyed by the text (so a text is
embedded once per process; the cache only saves work, the memories are the truth). Without
`embed` an embedded client uses memwarden's own embedder. What `index` an item was put with is
kept in its metadata (`lg.index`), so every store object and process searches it alike.

**Mapping.** A namespace `("users", "alice", "memories")` is the memwarden namespace
`users.alice.memories` (labels joined by `.`, which LangGraph forbids inside a label; a label's
characters other than `[a-z0-9-]` escaped as `_` and two hex digits per UTF-8 byte: `Alice` is
`_41lice`). A namespace whose readable name is not a memwarden namespace (longer than 64 bytes,
or starting with an escape, as `("memories", <uuid>, <uuid>)` or `("_x",)`) is stored under
`lg..` and 40 hex digits of the SHA-256 of its labels (`..` is in no readable name). Every
namespace written is recorded in a catalog (memories of `<prefix>langgraph..namespaces` holding
the exact labels), which `list_namespaces` and prefix search read, so every namespace of any
strings round-trips. A `prefix` (at most 20 bytes) is put in front of every namespace. An item's
value is the memory's text (its canonical JSON, at most 64 KiB); its key is in the metadata
(`lg.key`, at most 1024 bytes).

**Coherence.** No correctness rests on state kept in the store object: each operation (each
`batch`) reads the namespaces it touches and the catalog from memwarden, so two store objects
over one engine, or processes over one server, see each other's writes. An embedded data
directory is held by one process; another process opening it gets `memwarden.Conflict` ("in use
by pid N") and should `connect` to a `memwarden serve` instead.

**TTL** (`supports_ttl`): `put(..., ttl=minutes)` or `ttl={"default_ttl", "refresh_on_read"}`.
An item expires `ttl` minutes after its last write or refreshing read; a refreshing `get` or
`search` (`refresh_ttl`, default `refresh_on_read`, default True) records the read as a small
touch memory in the item's namespace (metadata `lg.touch_of`; the previous touch is erased).
An expired item is never returned, and it is erased when a reader who may erase it meets it.

**Limits.** `put` of an existing key stores a new version (memwarden never overwrites; the old
version stays in the history) and is allowed to the key's writer and to users, as any update; a
put that changes the item's `index` or `ttl` revokes the old memory (kept for audit) and writes a
new one. `delete` erases (the memory and what was derived from it alone). Every `get` lists the
item's namespace (at most 10,000 memories are read per namespace). Without `index`, a query asks
the engine for at most 100 hits per namespace. Within one `batch`, reads see the state before
the batch's puts, and of several puts to one key the last wins (as LangGraph's `InMemoryStore`).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import threading
import time
from datetime import datetime, timezone
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Tuple

from langgraph.store.base import (
    BaseStore,
    GetOp,
    IndexConfig,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
    ensure_embeddings,
    get_text_at_path,
    tokenize_path,
)

try:
    from langgraph.store.base import validate_op_namespace
except ImportError:  # pragma: no cover - older langgraph
    def validate_op_namespace(op: Any) -> None:
        return None

try:  # the same filter, namespace-matching and similarity code as LangGraph's own InMemoryStore
    from langgraph.store.memory import _compare_values, _cosine_similarity, _does_match
except ImportError:  # pragma: no cover - older or newer langgraph
    def _compare_values(item_value: Any, filter_value: Any) -> bool:
        return bool(item_value == filter_value)

    def _does_match(match_condition: Any, key: Tuple[str, ...]) -> bool:
        path = match_condition.path
        if len(key) < len(path):
            return False
        pairs = zip(key, path) if match_condition.match_type == "prefix" else zip(reversed(key), reversed(path))
        return all(p == "*" or k == p for k, p in pairs)

    def _cosine_similarity(X: List[float], Y: List[List[float]]) -> List[float]:
        out = []
        nx = sum(a * a for a in X) ** 0.5
        for y in Y:
            ny = sum(b * b for b in y) ** 0.5
            out.append(sum(a * b for a, b in zip(X, y)) / (nx * ny) if nx > 0 and ny > 0 else 0.0)
        return out


from ._client import Client, _Embedded
from ._errors import Forbidden, MemwardenError, NotFound, Withheld
from ._types import MemoryOut

#: Longest memwarden namespace, in bytes.
NAMESPACE_BYTES_MAX = 64
#: Longest `prefix`, in bytes (a hashed namespace takes 44 more).
PREFIX_BYTES_MAX = 20
#: Most hits asked of the engine per namespace and search (without `index`).
SEARCH_K_MAX = 100
#: Most memories listed per namespace.
LIST_LIMIT = 10_000
#: Texts whose vectors a store keeps (only to save embedding calls).
VECTOR_CACHE_MAX = 50_000
_KEY = "lg.key"
_CREATED = "lg.created_ms"
_INDEX = "lg.index"
_TTL = "lg.ttl"
_TOUCH_OF = "lg.touch_of"
_CATALOG_NS = "langgraph..namespaces"
_CATALOG_KEY = "lg.namespace"
_HASHED = "lg.."
_PLAIN = re.compile(r"[a-z0-9-]")
_NAME = re.compile(r"[a-z0-9][a-z0-9._-]*")


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


def _now_ms() -> int:
    return int(time.time() * 1000)


_last_first_write = [0]
_first_write_lock = threading.Lock()


def _first_write_ms() -> int:
    """The time of an item's first write, strictly increasing within the process (the order
    of items without a query, as InMemoryStore's insertion order)."""
    with _first_write_lock:
        _last_first_write[0] = max(_now_ms(), _last_first_write[0] + 1)
        return _last_first_write[0]


def _md(m: MemoryOut) -> Dict[str, str]:
    return m.get("metadata") or {}


def _created(m: MemoryOut) -> int:
    try:
        return int(_md(m).get(_CREATED, m["created_ms"]))
    except ValueError:
        return int(m["created_ms"])


class _Space:
    """One namespace as read from memwarden in one operation: its current items by key (oldest
    first by first write), duplicates and TTL touches."""

    def __init__(self, name: str, path: Tuple[str, ...]):
        self.name = name
        self.path = path
        self.items: Dict[str, MemoryOut] = {}
        self.dups: Dict[str, List[MemoryOut]] = {}
        self.touches: Dict[str, List[MemoryOut]] = {}


class MemwardenStore(BaseStore):
    """A LangGraph `BaseStore` whose items are memwarden memories (see the module doc)."""

    supports_ttl = True

    def __init__(
        self,
        client: Client,
        *,
        prefix: str = "",
        index: Optional[IndexConfig] = None,
        ttl: Optional[TTLConfig] = None,
    ):
        if prefix and (not _NAME.fullmatch(prefix) or len(prefix.encode()) > PREFIX_BYTES_MAX):
            raise InvalidNamespaceError(f"prefix {prefix!r} must be at most {PREFIX_BYTES_MAX} bytes of [a-z0-9._-], starting with a letter or digit")
        self.client = client
        self.prefix = prefix
        self.ttl_config = dict(ttl) if ttl else None  # type: ignore[assignment]
        self.index_config: Optional[Dict[str, Any]] = None
        self.embeddings: Any = None
        if index:
            self.index_config = dict(index)
            embed = self.index_config.get("embed")
            if embed is None:
                t = getattr(client, "_t", None)
                if not isinstance(t, _Embedded):
                    raise ValueError("index without 'embed' needs an embedded client (memwarden.open): pass index={'dims': ..., 'embed': ...}")
                engine = t._engine
                embed = lambda texts: engine.embed(list(texts))  # noqa: E731
            self.embeddings = ensure_embeddings(embed)
            self._fields = [(p, tokenize_path(p)) if p != "$" else (p, p) for p in (self.index_config.get("fields") or ["$"])]
        self._vectors: Dict[str, List[float]] = {}
        self._vlock = threading.Lock()
        self._local = threading.local()
        # Namespaces this store has seen in the catalog (only to skip re-reading it before a put;
        # catalog entries are never removed).
        self._noted: set = set()

    # -- mapping --------------------------------------------------------------------------------

    def to_namespace(self, namespace: Tuple[str, ...]) -> str:
        """The memwarden namespace of a LangGraph namespace (see the module doc)."""
        if not namespace:
            raise InvalidNamespaceError("Namespace cannot be empty.")
        for label in namespace:
            if not isinstance(label, str) or not label or "." in label or "\x00" in label:
                raise InvalidNamespaceError(f"Invalid namespace label {label!r} in {namespace}: labels are non-empty strings without '.' or NUL")
        name = self.prefix + ".".join(encode_label(label) for label in namespace)
        if len(name.encode()) <= NAMESPACE_BYTES_MAX and _NAME.fullmatch(name):
            return name
        digest = hashlib.sha256(json.dumps(list(namespace), ensure_ascii=False).encode()).hexdigest()[:40]
        return self.prefix + _HASHED + digest

    def from_namespace(self, name: str) -> Optional[Tuple[str, ...]]:
        """The LangGraph namespace of a readable memwarden namespace written by this store, or
        None (hashed names are resolved through the catalog)."""
        if not name.startswith(self.prefix):
            return None
        rest = name[len(self.prefix) :]
        if rest.startswith(_HASHED) or ".." in rest:
            return None
        try:
            return tuple(decode_label(p) for p in rest.split("."))
        except (ValueError, UnicodeDecodeError, IndexError):
            return None

    # -- reading memwarden ---------------------------------------------------------------------

    def _catalog(self) -> List[Tuple[str, Tuple[str, ...]]]:
        """Every namespace in the catalog, in the order first written: (memwarden name, path)."""
        out: List[Tuple[str, Tuple[str, ...]]] = []
        seen = set()
        for m in self.client.iter_memories(self.prefix + _CATALOG_NS, page_size=LIST_LIMIT):
            name = _md(m).get(_CATALOG_KEY)
            if not name or name in seen:
                continue
            path: Optional[Tuple[str, ...]] = None
            try:
                c = json.loads(m["content"])
                if isinstance(c, dict) and isinstance(c.get("path"), list) and all(isinstance(x, str) for x in c["path"]):
                    path = tuple(c["path"])
            except ValueError:
                pass
            if path is None:
                path = self.from_namespace(name)
            if path is None or self.to_namespace(path) != name:
                continue
            seen.add(name)
            self._noted.add(name)
            out.append((name, path))
        return out

    def _note_namespace(self, name: str, path: Tuple[str, ...]) -> None:
        if name in self._noted:
            return
        if name not in {n for n, _ in self._catalog()}:
            content = json.dumps({"langgraph_namespace": name, "path": list(path)}, ensure_ascii=False)
            self.client.add(content, namespace=self.prefix + _CATALOG_NS, metadata={_CATALOG_KEY: name})
        self._noted.add(name)

    def _space(self, name: str, path: Tuple[str, ...], cache: Optional[Dict[str, _Space]] = None) -> _Space:
        """The namespace as it is now (expired items left out, and erased where this principal
        may)."""
        if cache is not None and name in cache:
            return cache[name]
        sp = _Space(name, path)
        all_items: Dict[str, List[MemoryOut]] = {}
        for m in self.client.iter_memories(name, page_size=LIST_LIMIT):
            md = _md(m)
            if _TOUCH_OF in md:
                sp.touches.setdefault(md[_TOUCH_OF], []).append(m)
            elif _KEY in md:
                all_items.setdefault(md[_KEY], []).append(m)
        now = _now_ms()
        current: List[Tuple[int, int, str, MemoryOut]] = []
        for key, ms in all_items.items():
            ms.sort(key=lambda m: (m["created_ms"], m["id"]))
            m = ms[-1]
            if len(ms) > 1:
                sp.dups[key] = ms[:-1]
            if self._expired(m, sp, now):
                self._erase([m, *sp.dups.pop(key, []), *sp.touches.pop(m["id"], [])])
                continue
            current.append((_created(m), m["created_ms"], key, m))
        current.sort(key=lambda x: (x[0], x[1]))
        sp.items = {key: m for _, _, key, m in current}
        if cache is not None:
            cache[name] = sp
        return sp

    def _expired(self, m: MemoryOut, sp: _Space, now: int) -> bool:
        ttl = _md(m).get(_TTL)
        if ttl is None:
            return False
        last = max([m["created_ms"], *(t["created_ms"] for t in sp.touches.get(m["id"], []))])
        return now > last + float(ttl) * 60_000

    def _erase(self, ms: Iterable[MemoryOut]) -> None:
        """Erase in passing (expired items, duplicates, old touches): what this principal may
        not erase stays."""
        for m in ms:
            try:
                self.client.erase(m["id"])
            except (NotFound, Forbidden, Withheld):
                pass

    def _touch(self, sp: _Space, m: MemoryOut) -> None:
        """Record a refreshing read of an item with a TTL."""
        if _TTL not in _md(m):
            return
        key = _md(m)[_KEY]
        try:  # best effort, as LangGraph's TTL refresh
            t = self.client.add(json.dumps({"langgraph_ttl_refresh": key}), namespace=sp.name, metadata={_TOUCH_OF: m["id"]})
        except MemwardenError:
            return
        self._erase(sp.touches.pop(m["id"], []))
        sp.touches[m["id"]] = [t["item"]]

    def _item(self, namespace: Tuple[str, ...], key: str, m: MemoryOut, score: Optional[float] = None, search: bool = False) -> Item:
        value = self._value(m)
        created = _ms_to_dt(_created(m))
        updated = _ms_to_dt(m["created_ms"])
        if search:
            return SearchItem(namespace=namespace, key=key, value=value, created_at=created, updated_at=updated, score=score)
        return Item(value=value, key=key, namespace=namespace, created_at=created, updated_at=updated)

    @staticmethod
    def _value(m: MemoryOut) -> Dict[str, Any]:
        try:
            value = json.loads(m["content"])
        except ValueError:
            value = {"content": m["content"]}
        if not isinstance(value, dict):
            value = {"value": value}
        return value

    def memory(self, namespace: Tuple[str, ...], key: str) -> Optional[MemoryOut]:
        """The memwarden memory behind an item: its id (to pass as `context` to
        `Client.decide`), origin, label, act class, writer and status. None if absent."""
        return self._space(self.to_namespace(namespace), tuple(namespace)).items.get(key)

    # -- embedding -----------------------------------------------------------------------------

    def _texts(self, m: MemoryOut, value: Dict[str, Any]) -> List[str]:
        """The texts an item is searched by (LangGraph's `index` semantics)."""
        spec = _md(m).get(_INDEX)
        if spec == "false":
            return []
        if spec is not None:
            try:
                paths = [(p, tokenize_path(p)) for p in json.loads(spec)]
            except (ValueError, TypeError):
                paths = self._fields
        else:
            paths = self._fields
        out: List[str] = []
        for _, field in paths:
            out.extend(get_text_at_path(value, field))
        return out

    def _call_embed(self, fn: str, arg: Any) -> Any:
        loop = getattr(self._local, "loop", None)
        if loop is not None:  # inside abatch: the embedder's async side, on the caller's loop
            return asyncio.run_coroutine_threadsafe(getattr(self.embeddings, "a" + fn)(arg), loop).result()
        return getattr(self.embeddings, fn)(arg)

    def _vectors_of(self, texts: List[str]) -> Dict[str, List[float]]:
        with self._vlock:
            have = {t: self._vectors[t] for t in texts if t in self._vectors}
        missing = [t for t in dict.fromkeys(texts) if t not in have]
        if missing:
            vecs = self._call_embed("embed_documents", missing)
            if len(vecs) != len(missing):
                raise ValueError(f"embed returned {len(vecs)} vectors for {len(missing)} texts")
            have.update(zip(missing, vecs))
            with self._vlock:
                if len(self._vectors) + len(missing) > VECTOR_CACHE_MAX:
                    self._vectors.clear()
                self._vectors.update(zip(missing, vecs))
        return have

    # -- operations ----------------------------------------------------------------------------

    def _get(self, op: GetOp, cache: Dict[str, _Space]) -> Optional[Item]:
        sp = self._space(self.to_namespace(op.namespace), tuple(op.namespace), cache)
        m = sp.items.get(op.key)
        if m is None:
            return None
        if op.refresh_ttl:
            self._touch(sp, m)
        return self._item(tuple(op.namespace), op.key, m)

    def _put(self, op: PutOp) -> None:
        path = tuple(op.namespace)
        name = self.to_namespace(path)
        sp = self._space(name, path)
        existing = sp.items.get(op.key)
        if op.value is None:
            if existing is not None:
                try:  # a delete is an erasure: its writer's or a user's (Forbidden otherwise)
                    self.client.erase(existing["id"])
                except NotFound:
                    pass
                self._erase([*sp.dups.get(op.key, []), *sp.touches.get(existing["id"], [])])
            return
        content = json.dumps(dict(op.value), sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
        md: Dict[str, str] = {_KEY: op.key}
        if op.index is False:
            md[_INDEX] = "false"
        elif op.index is not None:
            md[_INDEX] = json.dumps(list(op.index), ensure_ascii=False)
        if op.ttl is not None:
            md[_TTL] = repr(float(op.ttl))
        if existing is not None:
            old = _md(existing)
            if all(old.get(k) == md.get(k) for k in (_INDEX, _TTL)):
                if existing["content"] == content:
                    if _TTL in md:
                        self._touch(sp, existing)  # a put refreshes the TTL
                    return
                self.client.update(existing["id"], content)
                self._erase(sp.touches.get(existing["id"], []))
                return
            # The index or TTL changed: a new memory (metadata is fixed at write); the old one is
            # revoked (kept for audit) by its writer or a user, as an update would be allowed.
            self.client.revoke(existing["id"], reason="replaced by a LangGraph put with another index or ttl")
            md[_CREATED] = str(_created(existing))
            self._erase(sp.touches.get(existing["id"], []))
        else:
            md[_CREATED] = str(_first_write_ms())
        self._note_namespace(name, path)
        self.client.add(content, namespace=name, metadata=md)

    def _spaces_under(self, prefix: Tuple[str, ...]) -> List[Tuple[str, Tuple[str, ...]]]:
        n = len(prefix)
        out = [(name, t) for name, t in self._catalog() if t[:n] == tuple(prefix)]
        if prefix:
            try:
                exact = self.to_namespace(tuple(prefix))
                if exact not in {name for name, _ in out}:
                    out.append((exact, tuple(prefix)))
            except InvalidNamespaceError:
                pass
        return out

    def _matches(self, op: SearchOp, value: Dict[str, Any]) -> bool:
        return not op.filter or all(_compare_values(value.get(fk), fv) for fk, fv in op.filter.items())

    def _search(self, op: SearchOp, cache: Dict[str, _Space]) -> List[SearchItem]:
        spaces = [self._space(name, t, cache) for name, t in self._spaces_under(tuple(op.namespace_prefix))]
        if op.query and self.embeddings is None:
            out = self._engine_search(op, spaces)
        else:
            out = self._scan_search(op, spaces)
        if op.refresh_ttl:
            for sp, m, _ in out:
                self._touch(sp, m)
        return [self._item(sp.path, _md(m)[_KEY], m, score=score, search=True) for sp, m, score in out]  # type: ignore[misc]

    def _scan_search(self, op: SearchOp, spaces: List[_Space]) -> List[Tuple[_Space, MemoryOut, Optional[float]]]:
        """LangGraph's InMemoryStore search over the listed memories."""
        cands: List[Tuple[_Space, MemoryOut, List[str]]] = []
        for sp in spaces:
            for m in sp.items.values():
                value = self._value(m)
                if self._matches(op, value):
                    cands.append((sp, m, self._texts(m, value) if op.query else []))
        if not op.query:
            return [(sp, m, None) for sp, m, _ in cands[op.offset : op.offset + op.limit]]
        if not cands:
            return []
        qv = self._call_embed("embed_query", op.query)
        vecs = self._vectors_of([t for _, _, ts in cands for t in ts])
        flat: List[Tuple[_Space, MemoryOut]] = []
        flat_vecs: List[List[float]] = []
        scoreless: List[Tuple[_Space, MemoryOut]] = []
        for sp, m, ts in cands:
            for t in ts:
                flat.append((sp, m))
                flat_vecs.append(vecs[t])
            if not ts:
                scoreless.append((sp, m))
        scores = _cosine_similarity(qv, flat_vecs)
        ranked = sorted(zip(scores, flat), key=lambda x: x[0], reverse=True)
        seen: set = set()
        kept: List[Tuple[_Space, MemoryOut, Optional[float]]] = []
        for score, (sp, m) in ranked:
            ident = (sp.name, m["id"])
            if ident in seen:
                continue
            ix = len(seen)
            seen.add(ident)
            if ix >= op.offset + op.limit:
                break
            if ix < op.offset:
                continue
            kept.append((sp, m, float(score)))
        if scoreless and len(kept) < op.limit:
            kept.extend((sp, m, None) for sp, m in scoreless[: op.limit - len(kept)])
        return kept

    def _engine_search(self, op: SearchOp, spaces: List[_Space]) -> List[Tuple[_Space, MemoryOut, Optional[float]]]:
        """memwarden's own search, per namespace (no `index` configured)."""
        want = op.offset + op.limit
        found: List[Tuple[float, _Space, MemoryOut]] = []
        scoreless: List[Tuple[_Space, MemoryOut]] = []
        for sp in spaces:
            if not sp.items:
                continue
            current = {m["id"] for m in sp.items.values()}
            k = min(SEARCH_K_MAX, want if not op.filter else want * 4)
            for h in self.client.search(op.query or "", namespace=sp.name, k=max(1, k)):
                m = h["item"]
                if m["id"] not in current or _md(m).get(_INDEX) == "false":
                    continue
                if self._matches(op, self._value(m)):
                    found.append((h["score"], sp, m))
            scoreless.extend((sp, m) for m in sp.items.values() if _md(m).get(_INDEX) == "false" and self._matches(op, self._value(m)))
        found.sort(key=lambda x: x[0], reverse=True)
        kept: List[Tuple[_Space, MemoryOut, Optional[float]]] = [(sp, m, float(s)) for s, sp, m in found[op.offset : op.offset + op.limit]]
        if scoreless and len(kept) < op.limit:
            kept.extend((sp, m, None) for sp, m in scoreless[: op.limit - len(kept)])
        return kept

    def _list_namespaces(self, op: ListNamespacesOp) -> List[Tuple[str, ...]]:
        spaces = [t for _, t in self._catalog()]
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
        for op in ops:
            validate_op_namespace(op)
            if isinstance(op, PutOp):
                self.to_namespace(op.namespace)  # validate now, before any put runs
        results: List[Result] = [None] * len(ops)
        puts: Dict[Tuple[Tuple[str, ...], str], PutOp] = {}
        cache: Dict[str, _Space] = {}  # this batch's reads of each namespace
        for i, op in enumerate(ops):
            if isinstance(op, GetOp):
                results[i] = self._get(op, cache)
            elif isinstance(op, SearchOp):
                results[i] = self._search(op, cache)
            elif isinstance(op, ListNamespacesOp):
                results[i] = self._list_namespaces(op)
            elif isinstance(op, PutOp):
                puts.pop((tuple(op.namespace), op.key), None)
                puts[(tuple(op.namespace), op.key)] = op
            else:
                raise ValueError(f"unknown store operation {op!r}")
        for op in puts.values():
            self._put(op)
        return results

    async def abatch(self, ops: Iterable[Op]) -> List[Result]:
        """`batch` on a worker thread (the engine releases the GIL); an async `embed` runs on
        the caller's event loop."""
        loop = asyncio.get_running_loop()
        ops = list(ops)

        def run() -> List[Result]:
            self._local.loop = loop
            try:
                return self.batch(ops)
            finally:
                self._local.loop = None

        return await asyncio.to_thread(run)


__all__ = ["MemwardenStore", "encode_label", "decode_label"]
