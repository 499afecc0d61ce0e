#!/usr/bin/env python3
"""Call memwarden MCP tools in order, in one session, as one principal (the official `mcp` SDK
over streamable HTTP). Driven by `tests/mcp_precise.rs`:

    python3 mcp_call.py --url http://127.0.0.1:7077/mcp --key mw_... \
        --steps '[["add_memory", {"namespace": "notes", "content": "hi"}]]'

Prints one JSON line: {"ok": true, "results": [{"error": bool, "result": <structured>}, ...]}.
"""

import argparse
import asyncio
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from mcp import ClientSession  # noqa: E402

from mcp_client import http_client_ctx, is_error, structured  # noqa: E402


async def run(a):
    out = []
    async with http_client_ctx(a.url, a.key) as streams:
        async with ClientSession(streams[0], streams[1]) as session:
            await session.initialize()
            for name, args in json.loads(a.steps):
                res = await session.call_tool(name, args)
                try:
                    body = structured(res)
                except (ValueError, IndexError):
                    body = [getattr(c, "text", None) for c in res.content]
                out.append({"error": is_error(res), "result": body})
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--url", required=True)
    p.add_argument("--key", required=True)
    p.add_argument("--steps", required=True)
    a = p.parse_args()
    results = asyncio.run(asyncio.wait_for(run(a), timeout=120))
    print(json.dumps({"ok": True, "results": results}))


if __name__ == "__main__":
    main()
