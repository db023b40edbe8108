#!/usr/bin/env python3
"""The MCP Python SDK's dual-era client (`Client(mode="auto")`) against
`wakeful mcp` in each `--protocol` mode:

- auto (the default): the client probes with `server/discover` (MCP
  2026-07-28); it declares no tasks extension, so it gets the legacy answer
  (a JSON-RPC error that is not a modern one), falls back to `initialize`,
  and uses the tools on 2025-11-25. A client pinned to 2026-07-28 (no probe)
  is served on 2026-07-28.
- 2026-07-28: the probe gets a DiscoverResult; the client stays on
  2026-07-28 and uses the tools there.
- 2025-11-25: like auto for the dual-era client; the pinned client gets an
  error that lists the revisions served, never a hang.

Usage: auto.py WAKEFUL_BIN STATE_DIR [auto|2026-07-28|2025-11-25]
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


def server(binary, home, protocol):
    return StdioServerParameters(
        command=binary, args=["mcp", "--protocol", protocol],
        env={"WAKEFUL_HOME": home, "WAKEFUL_SESSION": "py-auto", "PATH": os.environ["PATH"]},
    )


async def start_and_wait(c, word):
    """monitor_start, then monitor_wait until its started, line and stopped events came."""
    m = structured(await c.call_tool("monitor_start", {"command": f"echo {word}", "description": word}))
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
    if kinds != ["started", "lines", "stopped"] or texts[1] != word:
        fail(f"events: {kinds} {texts}")
    return kinds


async def main(binary, home, protocol="auto"):
    params = server(binary, home, protocol)
    if protocol == "2026-07-28":
        with anyio.fail_after(DEADLINE_S):
            async with Client(params, mode="auto") as c:
                version = c.session.protocol_version
                found = c.session.discover_result
                if version != "2026-07-28" or found is None:
                    fail(f"the auto client negotiated {version} (discover result {found})")
                ext = (found.capabilities.extensions or {})
                if "io.modelcontextprotocol/tasks" not in ext or found.capabilities.experimental:
                    fail(f"discover capabilities: {found.capabilities}")
                ok(f"the auto client stayed on {version}: versions {found.supported_versions}, extensions {sorted(ext)}")
                kinds = await start_and_wait(c, "modern-line")
                ok(f"monitor_start and monitor_wait on 2026-07-28: {kinds}")
        print(json.dumps({"ok": True, "protocol": version}))
        return
    with anyio.fail_after(DEADLINE_S):
        async with Client(params, mode="auto") as c:
            version = c.session.protocol_version
            if version != "2025-11-25" or c.session.discover_result is not None:
                fail(f"the auto client negotiated {version} (discover result {c.session.discover_result})")
            ok(f"the auto client probed, fell back to initialize: protocol {version}, server {c.session.server_info.name}")
            kinds = await start_and_wait(c, "auto-line")
            ok(f"monitor_start and monitor_wait after the fallback: {kinds}, line 'auto-line'")

    if protocol == "auto":
        # Pinned to 2026-07-28 (no probe): served on 2026-07-28.
        with anyio.fail_after(DEADLINE_S):
            async with Client(params, mode="2026-07-28") as c:
                names = [t.name for t in (await c.list_tools()).tools]
                r = structured(await c.call_tool("monitor_wait", {"timeout_ms": 0}))
                if "monitor_wait" not in names or r.get("timed_out") is not True:
                    fail(f"pinned client: tools {names}, monitor_wait {r}")
                ok(f"a client pinned to 2026-07-28 is served: {len(names)} tools, monitor_wait {r}")
        print(json.dumps({"ok": True, "protocol": version}))
        return

    # Pinned to 2026-07-28 (no probe, no fallback) on the legacy mode: a
    # JSON-RPC error that names the supported revisions.
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
    anyio.run(main, *sys.argv[1:4])
