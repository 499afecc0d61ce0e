"""Issue 33 through the Python doors (embedded client, LangGraph store, Mem0's `Memory`): a
memory the session was merely handed can be erased without taking that session's writes with
it, and every write acknowledged afterwards reads back."""

from __future__ import annotations

from typing import Tuple

import memwarden
from memwarden import Engine, Memory
from memwarden.langgraph import MemwardenStore


def two(engine: Engine, tenant: str) -> Tuple[memwarden.Client, memwarden.Client]:
    engine.register("bot", "agent", tenant=tenant)
    engine.register("alice", "user", tenant=tenant)
    return engine.client("bot", tenant=tenant), engine.client("alice", tenant=tenant).session("triage")


def test_erasing_what_a_session_saw_keeps_its_writes(engine: Engine, tenant: str) -> None:
    bot, alice = two(engine, tenant)
    note = bot.add("The caterer's number changed to 555-0101.", namespace="ops")["item"]["id"]
    alice.get(note)  # handed to alice's session: her later writes carry a seen_in_session edge to it
    mine = alice.add("Book the caterer for Friday.", namespace="ops")["item"]
    assert {"id": note, "kind": "seen_in_session"} in [{"id": p["id"], "kind": p["kind"]} for p in mine["parents"]], mine["parents"]
    out = bot.erase(note)
    assert out["erased"] == [note] and out["seen_marked"] == [mine["id"]], out
    assert alice.get(mine["id"])["id"] == mine["id"]
    later = alice.add("Also order flowers.", namespace="ops")["item"]
    assert later["status"] == "active"
    assert alice.get(later["id"])["id"] == later["id"]
    assert {mine["id"], later["id"]} <= {m["id"] for m in alice.list("ops")}


def test_langgraph_store_keeps_its_items_when_a_seen_memory_is_deleted(engine: Engine, tenant: str) -> None:
    bot, alice = two(engine, tenant)
    store = MemwardenStore(alice)
    note = bot.add("Alice's flight moved to 9am.", namespace="ops")["item"]["id"]
    alice.get(note)
    store.put(("trips",), "flight", {"text": "Flight at 9am"})
    bot.erase(note)
    item = store.get(("trips",), "flight")
    assert item is not None and item.value == {"text": "Flight at 9am"}
    store.put(("trips",), "hotel", {"text": "Hotel near the airport"})
    again = store.get(("trips",), "hotel")
    assert again is not None and again.value == {"text": "Hotel near the airport"}


def test_mem0_memory_keeps_its_memories_when_a_seen_memory_is_deleted(engine: Engine, tenant: str) -> None:
    bot, alice = two(engine, tenant)
    m = Memory(client=alice, namespace="prefs")
    note = bot.add("Alice now prefers aisle seats.", namespace="prefs")["item"]["id"]
    alice.get(note)
    added = m.add("I prefer aisle seats", user_id="alice", infer=False)["results"][0]["id"]
    bot.erase(note)
    assert m.get(added) is not None
    later = m.add("I am vegetarian", user_id="alice", infer=False)["results"][0]["id"]
    assert m.get(later) is not None
    assert {added, later} <= {r["id"] for r in m.get_all(filters={"user_id": "alice"})["results"]}
    # Mem0's delete removes exactly that memory.
    m.delete(added)
    assert m.get(added) is None and m.get(later) is not None
    # ... and its history keeps Mem0's DELETE row, without the erased text.
    rows = m.history(added)
    assert [(r["event"], r["is_deleted"], r["old_memory"], r["new_memory"]) for r in rows] == [("DELETE", True, None, None)], rows
    assert "aisle" not in str(rows)
