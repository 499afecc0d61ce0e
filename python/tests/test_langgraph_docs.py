"""LangGraph's store documentation, call by call, against LangGraph's own `InMemoryStore` and
`MemwardenStore`: the same calls must give the same results (keys, values, namespaces, order
where InMemoryStore defines one, scores, and `None` scores exactly where InMemoryStore gives
them). Both stores embed with one deterministic fake `embed` (a bag of hashed words), so scores
are comparable. Then what InMemoryStore cannot show: TTL (it does not support it), coherence
across store objects, clients and processes.

The examples are those of the store reference (`BaseStore.put/search/list_namespaces`,
`InMemoryStore`, `IndexConfig`) and of the persistence guide's memory store section, as shipped
with the installed langgraph (python/tests/requirements.txt)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import os
import re
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path
from typing import Any, Callable, List, Tuple

import pytest
from langgraph.store.base import GetOp, InvalidNamespaceError, Item, ListNamespacesOp, MatchCondition, PutOp, SearchItem, SearchOp
from langgraph.store.memory import InMemoryStore

import memwarden
from memwarden.langgraph import MemwardenStore

DIMS = 64


def fake_embed(texts: List[str]) -> List[List[float]]:
    """A deterministic embedding: each word adds +-1 to a dimension chosen by its hash."""
    out = []
    for t in texts:
        v = [0.0] * DIMS
        for w in re.findall(r"[a-z0-9]+", t.lower()):
            h = hashlib.sha256(w.encode()).digest()
            v[h[0] % DIMS] += 1.0 if h[1] % 2 else -1.0
        out.append(v)
    return out


INDEX = {"dims": DIMS, "embed": fake_embed}


def norm(x: Any) -> Any:
    """A result as comparable data (timestamps left out: the stores' clocks differ)."""
    if isinstance(x, SearchItem):
        return ("search_item", x.namespace, x.key, x.value, None if x.score is None else round(x.score, 6))
    if isinstance(x, Item):
        return ("item", x.namespace, x.key, x.value)
    if isinstance(x, list):
        return [norm(i) for i in x]
    return x


class Calls:
    """Records each documentation call's result (or the exception's type)."""

    def __init__(self, store: Any):
        self.store = store
        self.out: List[Tuple[str, Any]] = []

    def __call__(self, label: str, fn: Callable[[], Any]) -> Any:
        try:
            r = fn()
        except Exception as e:  # noqa: BLE001 - the error type is the result compared
            self.out.append((label, ("raises", type(e).__name__)))
            return None
        self.out.append((label, norm(r)))
        return r


# -- the documentation examples ----------------------------------------------------------------


def doc_basic(c: Calls, ids: List[str]) -> None:
    """InMemoryStore's docstring: basic key-value storage."""
    s = c.store
    c("put prefs", lambda: s.put(("users", "123"), "prefs", {"theme": "dark"}))
    c("get prefs", lambda: s.get(("users", "123"), "prefs"))
    c("get missing", lambda: s.get(("users", "123"), "nope"))
    c("put overwrites", lambda: s.put(("users", "123"), "prefs", {"theme": "light", "font": 12}))
    c("get overwritten", lambda: s.get(("users", "123"), "prefs"))


def doc_persistence_guide(c: Calls, ids: List[str]) -> None:
    """The persistence guide's memory store: a namespace per user, uuid keys, search, dict()."""
    s = c.store
    user_id = "1"
    ns = (user_id, "memories")
    c("put memory", lambda: s.put(ns, ids[0], {"food_preference": "I like pizza"}))
    memories = c("search namespace", lambda: s.search(ns))
    c("last memory dict keys", lambda: sorted(memories[-1].dict().keys()))
    c("last memory value", lambda: memories[-1].dict()["value"])


def doc_semantic_search(c: Calls, ids: List[str]) -> None:
    """The guide's semantic search: `fields`, a put's own `index=[...]` and `index=False`."""
    s = c.store
    ns = ("1", "memories")
    c("put m1", lambda: s.put(ns, "m1", {"food_preference": "I like pizza", "context": "talking about lunch"}))
    c("put m2", lambda: s.put(ns, "m2", {"food_preference": "I love Italian cuisine", "context": "Discussing dinner plans"}, index=["food_preference"]))
    c("put m3 unindexed", lambda: s.put(ns, "m3", {"system_info": "Last updated: 2024-01-01"}, index=False))
    c("put m4", lambda: s.put(ns, "m4", {"food_preference": "sushi is my favourite food to eat"}))
    c("query limit 3", lambda: s.search(ns, query="What does the user like to eat?", limit=3))
    c("query limit 10 (unindexed item last, no score)", lambda: s.search(ns, query="What does the user like to eat?", limit=10))
    c("query offset", lambda: s.search(ns, query="Italian dinner", limit=2, offset=1))
    c("no query", lambda: s.search(ns, limit=10))


def doc_search_filters(c: Calls, ids: List[str]) -> None:
    """`BaseStore.search`'s examples: filters alone and with a query."""
    s = c.store
    docs = [
        ("d1", {"text": "machine learning applications in healthcare", "type": "research_paper", "status": "published", "year": 2021}),
        ("d2", {"text": "a history of rail transport", "type": "article", "status": "published", "year": 2019}),
        ("d3", {"text": "draft notes on healthcare policy", "type": "article", "status": "draft", "year": 2023}),
        ("d4", {"text": "deep learning for medical imaging", "type": "research_paper", "status": "published", "year": 2024, "meta": {"lang": "en"}}),
        ("d5", {"text": "machine learning in practice", "type": "article", "status": "published", "year": 2022, "tags": ["ml", "practice"]}),
    ]
    for k, v in docs:
        c(f"put {k}", lambda k=k, v=v: s.put(("docs",), k, v))
    c("filter type+status", lambda: s.search(("docs",), filter={"type": "article", "status": "published"}))
    c("query+filter", lambda: s.search(("docs",), query="machine learning applications in healthcare", filter={"type": "research_paper"}, limit=5))
    c("filter $gt", lambda: s.search(("docs",), filter={"year": {"$gt": 2021}}))
    c("filter $gte $lt", lambda: s.search(("docs",), filter={"year": {"$gte": 2021, "$lt": 2024}}))
    c("filter $ne", lambda: s.search(("docs",), filter={"status": {"$ne": "published"}}))
    c("filter nested", lambda: s.search(("docs",), filter={"meta": {"lang": "en"}}))
    c("filter list", lambda: s.search(("docs",), filter={"tags": ["ml", "practice"]}))
    c("query pages", lambda: [s.search(("docs",), query="learning", limit=2, offset=o) for o in (0, 2, 4)])
    c("no query pages", lambda: [s.search(("docs",), limit=2, offset=o) for o in (0, 2, 4)])


def doc_list_namespaces(c: Calls, ids: List[str]) -> None:
    """`BaseStore.list_namespaces`'s example (max_depth=3) and prefix/suffix/limit/offset."""
    s = c.store
    for ns in [("a", "b", "c"), ("a", "b", "d", "e"), ("a", "b", "d", "i"), ("a", "b", "f"), ("a", "c", "f")]:
        c(f"put {ns}", lambda ns=ns: s.put(ns, "k", {"text": "/".join(ns)}))
    c("prefix max_depth 3", lambda: s.list_namespaces(prefix=("a", "b"), max_depth=3))
    c("all", lambda: s.list_namespaces())
    c("suffix", lambda: s.list_namespaces(suffix=("f",)))
    c("prefix+suffix", lambda: s.list_namespaces(prefix=("a",), suffix=("f",)))
    c("wildcard prefix", lambda: s.list_namespaces(prefix=("a", "*", "f")))
    c("max_depth 2", lambda: s.list_namespaces(max_depth=2))
    c("limit offset", lambda: s.list_namespaces(limit=2, offset=1))
    c("search prefix", lambda: s.search(("a", "b"), limit=10))
    c("search deep prefix query", lambda: s.search(("a", "b", "d"), query="a b d i", limit=10))


def doc_delete(c: Calls, ids: List[str]) -> None:
    """`BaseStore.delete`: gone for get and search; a second delete is harmless."""
    s = c.store
    c("put", lambda: s.put(("docs",), "report", {"memory": "Will likes ai"}))
    c("put other", lambda: s.put(("docs",), "other", {"memory": "Will likes tea"}))
    c("delete", lambda: s.delete(("docs",), "report"))
    c("get deleted", lambda: s.get(("docs",), "report"))
    c("search after delete", lambda: s.search(("docs",), query="ai"))
    c("delete again", lambda: s.delete(("docs",), "report"))
    c("put again", lambda: s.put(("docs",), "report", {"memory": "Will likes ai again"}))
    c("order after re-put", lambda: s.search(("docs",)))
    c("namespaces after delete", lambda: s.list_namespaces())


def doc_namespaces(c: Calls, ids: List[str]) -> None:
    """Namespaces of any strings: UUIDs, spaces, capitals, Unicode, long labels."""
    s = c.store
    spaces = [
        ("memories", ids[1], ids[2]),
        ("Users", "Alice Smith"),
        ("Users", "alice smith"),
        ("ünïcode", "名前", "emoji 🎉"),
        ("_private", "-dash", "under_score"),
        ("x" * 100,),
        ("long", "y" * 300, "z" * 300),
        (ids[3],),
    ]
    for i, ns in enumerate(spaces):
        c(f"put {i}", lambda ns=ns, i=i: s.put(ns, f"key {i} / {ns[-1][:10]}", {"text": f"item {i} in {' '.join(ns)}", "i": i}))
    for i, ns in enumerate(spaces):
        c(f"get {i}", lambda ns=ns, i=i: s.get(ns, f"key {i} / {ns[-1][:10]}"))
    c("list all", lambda: s.list_namespaces())
    c("list Users", lambda: s.list_namespaces(prefix=("Users",)))
    c("list uuid prefix", lambda: s.list_namespaces(prefix=("memories", ids[1])))
    c("search uuid prefix", lambda: s.search(("memories", ids[1])))
    c("search Users query", lambda: s.search(("Users",), query="Alice Smith item"))
    c("search long", lambda: s.search(("long",), query="item long"))
    c("search all", lambda: s.search((), limit=20))
    c("dot label refused", lambda: s.put(("a.b",), "k", {"text": "dot"}))
    c("langgraph root refused", lambda: s.put(("langgraph", "x"), "k", {"text": "reserved"}))
    c("empty namespace refused", lambda: s.put((), "k", {"text": "empty"}))


def doc_index_fields(c: Calls, ids: List[str]) -> None:
    """`PutOp.index`'s path syntax: nested fields, array elements, [*]."""
    s = c.store
    ns = ("library",)
    c("put book1", lambda: s.put(ns, "b1", {"metadata": {"title": "Gardening for beginners"}, "chapters": [{"content": "soil and seeds"}, {"content": "watering plants"}]}, index=["metadata.title", "chapters[*].content"]))
    c("put book2", lambda: s.put(ns, "b2", {"metadata": {"title": "Cooking pasta"}, "chapters": [{"content": "boil water"}, {"content": "tomato sauce"}]}, index=["chapters[-1].content"]))
    c("put book3", lambda: s.put(ns, "b3", {"metadata": {"title": "Seeds of history"}, "authors": [{"name": "Ann"}, {"name": "Bo"}]}, index=["authors[0].name"]))
    c("put book4 default fields", lambda: s.put(ns, "b4", {"text": "water your garden plants", "extra": "ignored field"}))
    c("query seeds", lambda: s.search(ns, query="seeds"))
    c("query water", lambda: s.search(ns, query="water plants"))
    c("query sauce", lambda: s.search(ns, query="tomato sauce"))
    c("query ann", lambda: s.search(ns, query="Ann"))


def doc_batch(c: Calls, ids: List[str]) -> None:
    """`batch` with the operation types: reads see the state before the batch's puts."""
    s = c.store
    c("batch puts+get", lambda: s.batch([PutOp(("docs", "a"), "k1", {"text": "one"}), PutOp(("docs", "b"), "k2", {"text": "two"}), PutOp(("docs", "b"), "k2", {"text": "two, last"}), GetOp(("docs", "a"), "k1")]))
    c(
        "batch reads",
        lambda: s.batch(
            [
                GetOp(("docs", "a"), "k1"),
                SearchOp(("docs",), None, 10, 0, "two"),
                ListNamespacesOp(match_conditions=(MatchCondition("prefix", ("docs",)),), max_depth=None, limit=10, offset=0),
            ]
        ),
    )


def doc_async(c: Calls, ids: List[str]) -> None:
    """The async methods of the store reference."""
    s = c.store

    async def go() -> List[Any]:
        await s.aput(("docs",), "doc1", {"text": "Python tutorial"})
        await s.aput(("docs",), "doc2", {"text": "TypeScript guide"})
        await s.aput(("docs",), "doc3", {"text": "cooking guide"}, index=False)
        a = await s.aget(("docs",), "doc1")
        b = await s.asearch(("docs",), query="python programming")
        n = await s.alist_namespaces(prefix=("docs",))
        await s.adelete(("docs",), "doc1")
        d = await s.aget(("docs",), "doc1")
        return [a, b, n, d]

    c("async calls", lambda: asyncio.run(go()))


def doc_async_embed(c: Calls, ids: List[str]) -> None:
    """The docs' async embedding function (`aembed_texts`)."""
    s = c.store

    async def go() -> List[Any]:
        await s.aput(("docs",), "doc1", {"text": "Python tutorial"})
        await s.aput(("docs",), "doc2", {"text": "TypeScript guide"})
        return await s.asearch(("docs",), query="python programming")

    c("async embed search", lambda: asyncio.run(go()))


async def afake_embed(texts: List[str]) -> List[List[float]]:
    await asyncio.sleep(0)
    return fake_embed(texts)


DOCS = {
    "basic": (doc_basic, INDEX),
    "persistence_guide": (doc_persistence_guide, INDEX),
    "semantic_search": (doc_semantic_search, {**INDEX, "fields": ["food_preference", "$"]}),
    "search_filters": (doc_search_filters, {**INDEX, "fields": ["text"]}),
    "list_namespaces": (doc_list_namespaces, INDEX),
    "delete": (doc_delete, {**INDEX, "fields": ["memory"]}),
    "namespaces": (doc_namespaces, {**INDEX, "fields": ["text"]}),
    "index_fields": (doc_index_fields, {**INDEX, "fields": ["text"]}),
    "batch": (doc_batch, {**INDEX, "fields": ["text"]}),
    "async": (doc_async, {**INDEX, "fields": ["text"]}),
    "async_embed": (doc_async_embed, {"dims": DIMS, "embed": afake_embed, "fields": ["text"]}),
}


@pytest.fixture
def client(engine: memwarden.Engine, tenant: str) -> memwarden.Client:
    engine.register("assistant", "agent", tenant=tenant)
    return engine.client("assistant", tenant=tenant)


@pytest.mark.parametrize("name", list(DOCS))
def test_documentation_example_matches_in_memory_store(name: str, client: memwarden.Client) -> None:
    fn, index = DOCS[name]
    ids = [str(uuid.uuid4()) for _ in range(4)]
    ref, mw = Calls(InMemoryStore(index=index)), Calls(MemwardenStore(client, index=index))
    fn(ref, ids)
    fn(mw, ids)
    assert [label for label, _ in mw.out] == [label for label, _ in ref.out]
    differ = [(label, want, got) for (label, want), (_, got) in zip(ref.out, mw.out) if want != got]
    assert not differ, f"{len(differ)} of {len(ref.out)} calls differ from InMemoryStore:\n" + "\n".join(f"{label}:\n  InMemoryStore {want}\n  memwarden     {got}" for label, want, got in differ)


def test_documentation_examples_count() -> None:
    """The examples make 92 calls (the per-example test above compares each one)."""
    total = 0
    for fn, index in DOCS.values():
        c = Calls(InMemoryStore(index=index))
        fn(c, [str(uuid.uuid4()) for _ in range(4)])
        total += len(c.out)
    assert total == 92, total


def test_memwarden_default_search_honours_index_false(client: memwarden.Client) -> None:
    """Without `index`, memwarden's own search ranks; an `index=False` item is never scored."""
    s = MemwardenStore(client)
    s.put(("n",), "a", {"text": "Alice drinks green tea"})
    s.put(("n",), "b", {"text": "Alice drinks black tea"}, index=False)
    hits = s.search(("n",), query="what does Alice drink?", limit=5)
    assert [(h.key, h.score is None) for h in hits] == [("a", False), ("b", True)]


def test_index_without_embed_uses_memwardens_embedder(client: memwarden.Client) -> None:
    """`index={"dims", "fields"}` without `embed` on an embedded client: memwarden's own model
    embeds the fields, with LangGraph's semantics (fields, `index=False`)."""
    s = MemwardenStore(client, index={"dims": 384, "fields": ["text"]})
    s.put(("n",), "tea", {"text": "Alice drinks green tea", "note": "tennis racket"})
    s.put(("n",), "sport", {"text": "Bob plays tennis on Sundays"})
    s.put(("n",), "hidden", {"text": "Carol plays tennis every day"}, index=False)
    hits = s.search(("n",), query="who plays tennis?", limit=5)
    assert [h.key for h in hits] == ["sport", "tea", "hidden"] and hits[0].score > hits[1].score and hits[2].score is None
    with pytest.raises(ValueError):
        MemwardenStore(memwarden.connect("http://127.0.0.1:9", api_key="mw_x"), index={"dims": 384})


# -- TTL (InMemoryStore has none) ------------------------------------------------------------


def test_ttl_expires_refreshes_and_is_shared(client: memwarden.Client) -> None:
    with pytest.raises(NotImplementedError):
        InMemoryStore().put(("n",), "k", {"x": 1}, ttl=1)
    ttl_min = 3 / 60  # 3 s
    s = MemwardenStore(client, ttl={"default_ttl": ttl_min, "refresh_on_read": True})
    other = MemwardenStore(client)  # another store object: TTL lives in memwarden, not here
    assert s.supports_ttl
    s.put(("t",), "read", {"text": "read often"})
    s.put(("t",), "idle", {"text": "never read"})
    s.put(("t",), "forever", {"text": "no ttl"}, ttl=None)
    s.put(("t",), "long", {"text": "long ttl"}, ttl=10 * ttl_min)
    time.sleep(1.8)
    assert s.get(("t",), "read") is not None  # refreshes: now expires ~4.8 s after start
    time.sleep(1.8)
    assert other.get(("t",), "idle", refresh_ttl=False) is None  # expired at 3 s
    assert other.get(("t",), "read", refresh_ttl=False) is not None
    assert {i.key for i in other.search(("t",), refresh_ttl=False)} == {"read", "forever", "long"}
    time.sleep(1.8)
    assert s.get(("t",), "read", refresh_ttl=False) is None
    assert {i.key for i in s.search(("t",), refresh_ttl=False)} == {"forever", "long"}
    # An expired item was erased by the reader (its writer): its memory is gone.
    assert not [m for m in client.list(s.to_namespace(("t",)), limit=1000) if m["metadata"].get("lg.key") in ("idle", "read")]
    s.put(("t",), "idle", {"text": "back"})
    assert s.get(("t",), "idle").value == {"text": "back"}


# -- coherence ---------------------------------------------------------------------------------


def test_two_store_objects_over_one_client_see_each_other(client: memwarden.Client) -> None:
    a, b = MemwardenStore(client, index=INDEX), MemwardenStore(client, index=INDEX)
    assert b.get(("users", "Alice Smith"), "k") is None
    a.put(("users", "Alice Smith"), "k", {"text": "v1"})
    assert b.get(("users", "Alice Smith"), "k").value == {"text": "v1"}
    assert b.list_namespaces() == [("users", "Alice Smith")]
    b.put(("users", "Alice Smith"), "k", {"text": "v2"})
    assert a.get(("users", "Alice Smith"), "k").value == {"text": "v2"}
    assert [i.value for i in a.search(("users",), query="v2")] == [{"text": "v2"}]
    a.delete(("users", "Alice Smith"), "k")
    assert b.get(("users", "Alice Smith"), "k") is None
    long_ns = ("memories", str(uuid.uuid4()), str(uuid.uuid4()))
    a.put(long_ns, "k", {"text": "hashed namespace"})
    assert b.get(long_ns, "k").value == {"text": "hashed namespace"}
    assert long_ns in b.list_namespaces(prefix=("memories",))


def test_two_principals_share_namespaces(engine: memwarden.Engine, tenant: str) -> None:
    engine.register("writer", "agent", tenant=tenant)
    engine.register("reader", "agent", tenant=tenant)
    w, r = MemwardenStore(engine.client("writer", tenant=tenant)), MemwardenStore(engine.client("reader", tenant=tenant))
    w.put(("Team", "Notes 2026"), "n1", {"text": "standup at nine"})
    assert r.get(("Team", "Notes 2026"), "n1").value == {"text": "standup at nine"}
    assert r.list_namespaces(prefix=("Team",)) == [("Team", "Notes 2026")]


_SECOND_PROCESS = textwrap.dedent(
    """
    import json, sys, memwarden
    try:
        memwarden.Engine.open(sys.argv[1], model_dir=sys.argv[2])
        print(json.dumps({"opened": True}))
    except memwarden.MemwardenError as e:
        print(json.dumps({"error": type(e).__name__, "code": e.code, "status": e.status, "detail": str(e)}))
    """
)


def test_second_process_on_an_embedded_data_dir_gets_a_clear_error(engine: memwarden.Engine) -> None:
    from conftest import model_dir

    out = subprocess.run([sys.executable, "-c", _SECOND_PROCESS, engine.path, model_dir()], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got.get("error") == "Conflict" and got["status"] == 409 and "in use by pid" in got["detail"], got


_REMOTE_READER = textwrap.dedent(
    """
    import json, sys, memwarden
    from memwarden.langgraph import MemwardenStore
    s = MemwardenStore(memwarden.connect(sys.argv[1], api_key=sys.argv[2]))
    ns = tuple(json.loads(sys.argv[3]))
    item = s.get(ns, "k")
    s.put(ns, "from-child", {"text": "written by the second process"})
    print(json.dumps({"value": item.value if item else None, "namespaces": s.list_namespaces(prefix=ns[:1])}))
    """
)


def test_two_processes_over_a_server_see_each_other(server: Any) -> None:
    ns = ("memories", str(uuid.uuid4()), "Alice Smith")
    s = MemwardenStore(memwarden.connect(server.url, api_key=server.keys["assistant"]))
    s.put(ns, "k", {"text": "written by the first process"})
    out = subprocess.run([sys.executable, "-c", _REMOTE_READER, server.url, server.keys["alice"], json.dumps(list(ns))], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["value"] == {"text": "written by the first process"}
    assert list(ns) in got["namespaces"]
    assert s.get(ns, "from-child").value == {"text": "written by the second process"}
