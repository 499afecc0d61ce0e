"""Issue 39.5 in Python: every list pages with an opaque cursor, embedded and over HTTP alike;
paging to the end with any page size yields the one-page list; a cursor of another list, caller
or query, or a changed one, is `InvalidInput` with code `invalid_cursor`; Mem0's `get_all` and
the LangGraph store read on through every page."""

from __future__ import annotations

import asyncio
from typing import Any, Dict, List

import pytest

import memwarden
from memwarden import Engine

PAGE_SIZES = [1, 2, 5, 12, 13, 100]
COUNT = 12


def pages(client: memwarden.Client, namespace: str, limit: int) -> List[Dict[str, Any]]:
    out: List[Dict[str, Any]] = []
    cursor = None
    while True:
        page = client.listing(namespace, limit=limit, cursor=cursor)
        assert "next_cursor" in page
        out.append(page)
        cursor = page["next_cursor"]
        if cursor is None:
            return out
        assert len(out) < 1000


def check_paging(a: memwarden.Client, other: memwarden.Client) -> None:
    a.add_many([{"content": f"note {i}", "namespace": "pg"} for i in range(COUNT)])
    whole = a.listing("pg", limit=10000)
    assert whole["next_cursor"] is None
    ids = [m["id"] for m in whole["results"]]
    assert len(ids) == COUNT
    for size in PAGE_SIZES:
        got = [m["id"] for p in pages(a, "pg", size) for m in p["results"]]
        assert got == ids, f"limit {size}"
    assert [m["id"] for m in a.iter_memories("pg", page_size=5)] == ids

    async def every_page() -> List[str]:
        return [m["id"] async for m in memwarden.AsyncClient(a).iter_memories("pg", page_size=5)]

    assert asyncio.run(every_page()) == ids, "the async client pages the same way"
    cursor = a.listing("pg", limit=3)["next_cursor"]
    assert cursor is not None
    for call in (
        lambda: a.listing("elsewhere", limit=3, cursor=cursor),
        lambda: other.listing("pg", limit=3, cursor=cursor),
        lambda: a.listing("pg", limit=3, cursor=cursor[:-2] + ("00" if not cursor.endswith("00") else "11")),
        lambda: a.listing("pg", cursor="not a cursor"),
        lambda: a.history_record(ids[0], cursor=cursor),
    ):
        with pytest.raises(memwarden.InvalidCursor) as e:
            call()
        assert e.value.code == "invalid_cursor" and e.value.status == 400 and isinstance(e.value, memwarden.InvalidInput)
    with pytest.raises(memwarden.InvalidInput):
        a.listing("pg", limit=0)
    # History pages too; `history` reads every page.
    first = ids[0]
    cur = first
    for v in range(3):
        cur = a.update(cur, f"note 0, version {v + 1}")["memory"]["id"]
    one = a.history_record(first, limit=1)
    assert len(one["versions"]) == 1 and one["next_cursor"] is not None
    assert [v["id"] for v in a.history(first)][-1] == cur
    assert len(a.history(first)) == 4


def test_embedded_lists_page_by_cursor(engine: Engine, tenant: str) -> None:
    for pid in ("alice", "bob"):
        engine.register(pid, "user", tenant=tenant)
    alice, bob = engine.client("alice", tenant=tenant), engine.client("bob", tenant=tenant)
    check_paging(alice, bob)
    page = alice.elevations(limit=1)
    assert page == {"elevations": [], "next_cursor": None}


def test_remote_lists_page_by_cursor(server: Any) -> None:
    a = memwarden.connect(server.url, server.keys["alice"])
    other = memwarden.connect(server.url, server.keys["assistant"])
    check_paging(a, other)
    assert a.elevations(limit=1)["next_cursor"] is None


def test_mem0_get_all_reads_past_the_first_page(engine: Engine, tenant: str) -> None:
    engine.register("alice", "user", tenant=tenant)
    c = engine.client("alice", tenant=tenant)
    m = memwarden.Memory(client=c, namespace="mem0-pages")
    for i in range(7):
        m.add(f"fact {i}", user_id="alice", infer=False)
    # A wrapper that pages through small pages sees everything the one-page list does.
    got = [r["memory"] for r in m.get_all(filters={"user_id": "alice"}, top_k=100)["results"]]
    assert sorted(got) == sorted(f"fact {i}" for i in range(7))
    assert [x["content"] for x in c.iter_memories("mem0-pages", page_size=2)] == [x["content"] for x in c.list("mem0-pages", limit=100)]
