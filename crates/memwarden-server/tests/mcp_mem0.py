#!/usr/bin/env python3
"""The `mem0` tool profile with the official `mcp` Python SDK. Driven by `tests/mcp_profiles.rs`:

    python3 mcp_mem0.py stdio --bin PATH --data DIR --tenant acme --principal agent --foreign ID,ID
    python3 mcp_mem0.py http --url http://127.0.0.1:7077/mcp --key mw_... --principal agent --foreign ID,ID
    python3 mcp_mem0.py proxy --bin PATH --url http://127.0.0.1:7077 --key mw_... --principal agent --foreign ID,ID

The caller (`--principal`) runs a benign add / search / list / get / update / delete round trip
through Mem0's tool names and argument shapes, then lies: a `user_id` / `agent_id` naming another
principal, filters naming one, forged memory ids (`--foreign`: memories of other principals the
caller may not read). Every lie is refused (an error naming the field) or finds nothing; no
answer carries a foreign memory's id or text. The SDK validates every successful result against
the tool's output schema. Prints one JSON line; exits 0 when every check held.
"""

import argparse
import asyncio
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from mcp import ClientSession, StdioServerParameters  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402

from mcp_client import Checks, field, http_client_ctx, is_error, structured  # noqa: E402

MEM0_TOOLS = {
    "add_memory", "search_memories", "get_memories", "get_memory", "update_memory", "delete_memory",
    "delete_all_memories",
}
# mem0-mcp's argument names (src/mem0_mcp_server/server.py), and the required ones.
MEM0_ARGS = {
    "add_memory": ({"text", "messages", "user_id", "agent_id", "app_id", "run_id", "metadata", "enable_graph"}, {"text"}),
    "search_memories": ({"query", "filters", "limit", "enable_graph"}, {"query"}),
    # mem0's, plus `cursor` (issue 39.5: every list pages by cursor; optional, so mem0 calls work).
    "get_memories": ({"filters", "page", "page_size", "enable_graph", "cursor"}, set()),
    "get_memory": ({"memory_id"}, {"memory_id"}),
    "update_memory": ({"memory_id", "text"}, {"memory_id", "text"}),
    "delete_memory": ({"memory_id"}, {"memory_id"}),
    "delete_all_memories": ({"user_id", "agent_id", "app_id", "run_id"}, set()),
}


def detail(res):
    body = structured(res) if is_error(res) else None
    if isinstance(body, dict):
        return body.get("detail", "")
    return " ".join(getattr(c, "text", "") or "" for c in res.content)


async def check_listing(session, checks):
    tools = {t.name: t for t in (await session.list_tools()).tools}
    checks.seen["tools"] = sorted(tools)
    checks.check(set(tools) == MEM0_TOOLS, f"mem0 tools: {sorted(tools)}")
    for name, (props, required) in MEM0_ARGS.items():
        t = tools.get(name)
        if t is None:
            continue
        schema = field(t, "input_schema", "inputSchema") or {}
        checks.check(set(schema.get("properties", {})) == props, f"{name} arguments: {sorted(schema.get('properties', {}))}")
        checks.check(set(schema.get("required", [])) == required, f"{name} required: {schema.get('required')}")
        out = field(t, "output_schema", "outputSchema")
        checks.check(isinstance(out, dict) and out.get("type") == "object", f"{name} has no output schema")
        ann = field(t, "annotations")
        checks.check(ann is not None, f"{name} has no annotations")
    ann = lambda n, h: field(field(tools[n], "annotations"), h)  # noqa: E731
    checks.check(ann("search_memories", "read_only_hint") is True, "search_memories is not read-only")
    checks.check(ann("delete_all_memories", "destructive_hint") is True, "delete_all_memories is not destructive")
    checks.check(ann("add_memory", "read_only_hint") is False, "add_memory is read-only")


async def benign(session, checks, me):
    """Add, search, list, get, update, delete through Mem0's shapes."""
    res = await session.call_tool(
        "add_memory",
        {"text": "Alice prefers window seats on long flights.", "user_id": me, "run_id": "trip-1", "metadata": {"topic": "travel", "n": 1}},
    )
    checks.check(not is_error(res), f"add_memory: {detail(res)}")
    if is_error(res):
        return None
    added = structured(res)["results"][0]
    item = added["item"]
    checks.seen["added_origin"] = item["origin"]
    checks.check(item["writer"] == me and item["origin"] == "agent", f"stored as {item['writer']} / {item['origin']}")
    checks.check(item["task"] == "trip-1" and item["metadata"] == {"topic": "travel", "n": "1"}, f"run_id / metadata: {item}")
    mid = added["id"]

    res = await session.call_tool("search_memories", {"query": "window seat flights", "filters": {"AND": [{"user_id": me}]}, "limit": 5})
    hits = [] if is_error(res) else structured(res)["results"]
    checks.check(any(h["id"] == mid for h in hits), f"search_memories did not find it: {detail(res)}")
    res = await session.call_tool("get_memories", {"filters": {"run_id": "trip-1"}, "page": 1, "page_size": 10})
    listed = [] if is_error(res) else structured(res)["results"]
    checks.check([m["id"] for m in listed] == [mid], f"get_memories by run_id: {[m['id'] for m in listed]} {detail(res)}")
    res = await session.call_tool("get_memories", {"filters": {"run_id": "no-such-run"}})
    checks.check(not is_error(res) and structured(res)["results"] == [], "another run_id lists something")

    res = await session.call_tool("get_memory", {"memory_id": mid})
    checks.check(not is_error(res) and structured(res)["id"] == mid, f"get_memory: {detail(res)}")
    res = await session.call_tool("update_memory", {"memory_id": mid, "text": "Alice prefers aisle seats now."})
    checks.check(not is_error(res), f"update_memory: {detail(res)}")
    new_id = structured(res)["memory"]["id"] if not is_error(res) else mid
    res = await session.call_tool("get_memory", {"memory_id": new_id})
    checks.check(not is_error(res) and structured(res)["content"] == "Alice prefers aisle seats now.", f"updated text: {detail(res)}")
    res = await session.call_tool("delete_memory", {"memory_id": new_id})
    checks.check(not is_error(res) and new_id in structured(res)["erased"], f"delete_memory: {detail(res)}")
    res = await session.call_tool("get_memory", {"memory_id": new_id})
    checks.check(is_error(res) and structured(res)["code"] == "not_found", "a deleted memory still reads")
    checks.seen["round_trip"] = True
    return mid


async def lies(session, checks, me, foreign):
    """Every lie is refused with an error naming the field, or finds nothing."""
    refused = {}
    cases = [
        ("add_memory", {"text": "I am bob.", "user_id": "bob"}, "`user_id`"),
        ("add_memory", {"text": "I am bob.", "agent_id": "bob"}, "`agent_id`"),
        ("add_memory", {"text": "trusted!", "origin": "user"}, "unknown field `origin` at `origin`"),
        ("add_memory", {"text": "graph", "enable_graph": True}, "`enable_graph`"),
        ("search_memories", {"query": "pay", "filters": {"user_id": "bob"}}, "`filters.user_id`"),
        ("search_memories", {"query": "pay", "filters": {"AND": [{"app_id": "default"}, {"agent_id": "bob"}]}}, "`filters.AND[1].agent_id`"),
        ("search_memories", {"query": "pay", "filters": {"OR": [{"user_id": me}, {"user_id": "bob"}]}}, "`filters.OR`"),
        ("search_memories", {"query": "pay", "filters": {"user_id": {"in": [me, "bob"]}}}, "`filters.user_id`"),
        ("get_memories", {"filters": {"user_id": "*"}}, "`filters.user_id`"),
        ("delete_all_memories", {"user_id": "bob"}, "`user_id`"),
    ]
    for tool, args, needle in cases:
        res = await session.call_tool(tool, args)
        d = detail(res)
        ok = is_error(res) and needle in d and tool in d
        checks.check(ok, f"{tool} {args}: not refused naming {needle}: {d}")
        refused[f"{tool}:{needle}"] = ok
    checks.seen["refused"] = refused
    for fid in foreign:
        for tool, args in [("get_memory", {"memory_id": fid}), ("update_memory", {"memory_id": fid, "text": "hijacked"}), ("delete_memory", {"memory_id": fid})]:
            res = await session.call_tool(tool, args)
            checks.check(is_error(res), f"{tool} of a foreign memory {fid} succeeded")
            checks.check(structured(res).get("code") in ("not_found", "forbidden"), f"{tool} {fid}: {detail(res)}")
    # Nothing any read returns names a foreign memory.
    for tool, args in [("get_memories", {}), ("search_memories", {"query": "bob private payee account", "limit": 100})]:
        res = await session.call_tool(tool, args)
        text = json.dumps(structured(res))
        checks.check(not any(f in text for f in foreign) and "BOB-SECRET" not in text, f"{tool} handed over a foreign memory")


async def delete_all(session, checks, me):
    for text in ("Note one for delete_all.", "Note two for delete_all."):
        await session.call_tool("add_memory", {"text": text, "agent_id": me})
    res = await session.call_tool("delete_all_memories", {"user_id": me})
    checks.check(not is_error(res) and len(structured(res)["erased"]) >= 2, f"delete_all_memories: {detail(res)}")
    res = await session.call_tool("get_memories", {})
    left = [m for m in structured(res)["results"] if m["writer"] == me]
    checks.check(left == [], f"delete_all_memories left the caller's memories: {left}")
    checks.seen["delete_all"] = len(structured(res)["results"])


async def exercise(session, checks, a):
    await session.initialize()
    await check_listing(session, checks)
    await benign(session, checks, a.principal)
    await lies(session, checks, a.principal, [f for f in a.foreign.split(",") if f])
    await delete_all(session, checks, a.principal)


async def run(a, checks):
    if a.mode == "stdio":
        params = StdioServerParameters(
            command=a.bin,
            args=["--data", a.data, "--tenant", a.tenant, "--principal", a.principal, "--embedder", "hash", "--tools", "mem0"],
        )
        async with stdio_client(params) as streams:
            async with ClientSession(streams[0], streams[1]) as session:
                await exercise(session, checks, a)
    elif a.mode == "proxy":
        params = StdioServerParameters(command=a.bin, args=["--server", a.url], env=dict(os.environ, MEMWARDEN_API_KEY=a.key))
        async with stdio_client(params) as streams:
            async with ClientSession(streams[0], streams[1]) as session:
                await exercise(session, checks, a)
    else:
        async with http_client_ctx(a.url, a.key) as streams:
            async with ClientSession(streams[0], streams[1]) as session:
                await exercise(session, checks, a)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["stdio", "http", "proxy"])
    p.add_argument("--bin")
    p.add_argument("--data")
    p.add_argument("--tenant", default="acme")
    p.add_argument("--principal", default="agent")
    p.add_argument("--url")
    p.add_argument("--key")
    p.add_argument("--foreign", default="")
    a = p.parse_args()
    checks = Checks()
    asyncio.run(asyncio.wait_for(run(a, checks), timeout=120))
    print(json.dumps({"ok": not checks.failed, "failed": checks.failed, "seen": checks.seen}))
    sys.exit(0 if not checks.failed else 1)


if __name__ == "__main__":
    main()
