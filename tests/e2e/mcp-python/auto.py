#!/usr/bin/env python3
"""The MCP Python SDK's dual-era client (`Client(mode="auto")`) against
`wakeful mcp`: it probes with `server/discover` (MCP 2026-07-28), gets the
legacy answer (a JSON-RPC error that is not a modern one: wakeful's channel
push needs the session `initialize` opens), falls back to `initialize`, and
uses the tools on 2025-11-25. A client pinned to 2026-07-28 gets an error
that lists the revisions wakeful speaks, never a hang.

Usage: auto.py WAKEFUL_BIN STATE_DIR
Needs the `mcp` package (pip install mcp==2.3.0).
"""
import json
import os
import sys
import time

import anyio
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPError

from common import fail, ok, structured  # noqa: E402

DEADLINE_S = 20


def find(e, kind):
    if isinstance(e, kind):
        return e
    for inner in getattr(e, "exceptions", ()):
        if (got := find(inner, kind)) is not None:
            return got
    return None


async def main(binary, home):
    params = StdioServerParameters(
        command=binary, args=["mcp"],
        env={"WAKEFUL_HOME": home, "WAKEFUL_SESSION": "py-auto", "PATH": os.environ["PATH"]},
    )
    with anyio.fail_after(DEADLINE_S):
        async with Client(params, mode="auto") as c:
            version = c.session.protocol_version
            if version != "2025-11-25" or c.session.discover_result is not None:
                fail(f"the auto client negotiated {version} (discover result {c.session.discover_result})")
            ok(f"the auto client probed, fell back to initialize: protocol {version}, server {c.session.server_info.name}")
            m = structured(await c.call_tool("monitor_start", {"command": "echo auto-line", "description": "auto"}))
            kinds, texts = [], []
            deadline = time.monotonic() + DEADLINE_S
            while "stopped" not in kinds:
                if time.monotonic() > deadline:
                    fail(f"events so far: {kinds}")
                r = structured(await c.call_tool("monitor_wait", {"timeout_ms": 5000}))
                for e in r["events"]:
                    if e["monitor_id"] == m["id"]:
                        kinds.append(e["kind"])
                        texts.append(e["text"])
            if kinds != ["started", "lines", "stopped"] or texts[1] != "auto-line":
                fail(f"events: {kinds} {texts}")
            ok(f"monitor_start and monitor_wait after the fallback: {kinds}, line {texts[1]!r}")

    # Pinned to 2026-07-28 (no probe, no fallback): a JSON-RPC error that
    # names the supported revisions.
    try:
        with anyio.fail_after(DEADLINE_S):
            async with Client(params, mode="2026-07-28") as c:
                await c.list_tools()
        fail("a client pinned to 2026-07-28 was served")
    except Exception as e:  # the SDK raises it inside an exception group
        found = find(e, MCPError)
        if found is None:
            raise
        err = found.error
        if err.code != -32022 or "2025-11-25" not in json.dumps(err.data):
            fail(f"pinned client: {err}")
        ok(f"a client pinned to 2026-07-28 gets error {err.code} {err.message!r}, supported {err.data['supported']}")
    print(json.dumps({"ok": True, "protocol": version}))


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2])
