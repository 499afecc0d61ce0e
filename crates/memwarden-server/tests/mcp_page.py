#!/usr/bin/env python3
"""Page through one memwarden MCP list tool to the end with the official `mcp` SDK (streamable
HTTP), passing each answer's `next_cursor` back as `cursor`. The SDK checks every answer's
`structuredContent` against the tool's output schema. Driven by `tests/pagination.rs`:

    python3 mcp_page.py --url http://127.0.0.1:7077/mcp --key mw_... \
        --tool list_memories --args '{"namespace": "p", "limit": 3}' [--bad-cursor]

Prints one JSON line: {"ok": true, "pages": [<structured>, ...]} and, with --bad-cursor, the
answer to a call with a changed cursor as "bad": {"error": bool, "text": [...]}.
"""

import argparse
import asyncio
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from mcp import ClientSession  # noqa: E402

from mcp_client import http_client_ctx, is_error, structured  # noqa: E402

PAGES_MAX = 1000


async def run(a):
    pages, bad = [], None
    args = json.loads(a.args)
    async with http_client_ctx(a.url, a.key) as streams:
        async with ClientSession(streams[0], streams[1]) as session:
            await session.initialize()
            cursor = None
            for _ in range(PAGES_MAX):
                call = dict(args, **({"cursor": cursor} if cursor else {}))
                res = await session.call_tool(a.tool, call)
                if is_error(res):
                    raise SystemExit(f"{a.tool} failed: {[getattr(c, 'text', None) for c in res.content]}")
                page = structured(res)
                pages.append(page)
                cursor = page.get("next_cursor")
                if cursor is None:
                    break
            if a.bad_cursor:
                res = await session.call_tool(a.tool, dict(args, cursor="c1" + "0" * 80))
                bad = {"error": is_error(res), "text": [getattr(c, "text", None) for c in res.content]}
    return pages, bad


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--url", required=True)
    p.add_argument("--key", required=True)
    p.add_argument("--tool", required=True)
    p.add_argument("--args", required=True)
    p.add_argument("--bad-cursor", action="store_true")
    a = p.parse_args()
    pages, bad = asyncio.run(asyncio.wait_for(run(a), timeout=120))
    print(json.dumps({"ok": True, "pages": pages, "bad": bad}))


if __name__ == "__main__":
    main()
