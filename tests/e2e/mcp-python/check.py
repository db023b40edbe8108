#!/usr/bin/env python3
"""The real MCP Python SDK against `wakeful mcp`: the tool schema as a client
reads it, each source started as the schema describes it, a cancelled
monitor_wait that acknowledges nothing, and channel notifications (which the
daemon writes into the server's stdout) read by the SDK's stdio transport
between the server's own responses.

Usage: check.py WAKEFUL_BIN STATE_DIR
Needs the `mcp` package (pip install mcp==2.3.0). Prints one line per check
and a JSON summary; exits 0 only when every check passed. Every wait has one
deadline; nothing sleeps a fixed time.
"""
import json
import os
import subprocess
import sys
import time

import anyio
import mcp.types as mcp_types
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.message import SessionMessage

from common import fail, ok, structured  # noqa: E402

DEADLINE_S = 20


class Wakeful:
    def __init__(self, binary, home):
        self.binary, self.home = binary, home

    def json(self, *args):
        env = dict(os.environ, WAKEFUL_HOME=self.home, WAKEFUL_SESSION="py")
        out = subprocess.run([self.binary, "--json", *args], env=env, check=True,
                             capture_output=True, text=True).stdout
        return json.loads(out)

    def mcp_waiters(self):
        return sum(c["waiters"] for c in self.json("consumers") if c["consumer"] == "mcp")


async def until(cond, what):
    deadline = time.monotonic() + DEADLINE_S
    while not cond():
        if time.monotonic() > deadline:
            fail(f"timed out waiting for {what}")
        await anyio.sleep(0.02)


async def wait_events(session, want_kinds):
    """monitor_wait until the kinds seen cover want_kinds (in order)."""
    got = []
    deadline = time.monotonic() + DEADLINE_S
    while [e["kind"] for e in got][-len(want_kinds):] != want_kinds:
        if time.monotonic() > deadline:
            fail(f"wanted {want_kinds}, got {[e['kind'] for e in got]}")
        r = structured(await session.call_tool("monitor_wait", {"timeout_ms": 5000}))
        got.extend(r["events"])
    return got


async def channel_check(params):
    """The SDK's stdio transport, without a session (which has no handler
    for custom notifications): a client that declares `claude/channel`
    starts a monitor and reads every message until its `stopped`."""
    async with stdio_client(params) as (read, write):
        async def send(obj):
            cls = mcp_types.JSONRPCRequest if "id" in obj else mcp_types.JSONRPCNotification
            await write.send(SessionMessage(cls.model_validate(obj)))

        async def receive():
            m = await read.receive()
            if isinstance(m, Exception):
                fail(f"the SDK could not read a message: {m}")
            return m.message.model_dump(by_alias=True, exclude_none=True)

        await send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {"experimental": {"claude/channel": {}}},
            "clientInfo": {"name": "check.py", "version": "0"}}})
        with anyio.fail_after(DEADLINE_S):
            while (await receive()).get("id") != 1:
                pass
        await send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        await send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "monitor_start",
            "arguments": {"command": "echo py-one; echo py-two", "description": "channel"}}})
        kinds, lines, answered = [], [], False
        with anyio.fail_after(DEADLINE_S):
            while "stopped" not in kinds or not answered:
                d = await receive()
                if d.get("id") == 2:
                    answered = True
                elif d.get("method") == "notifications/claude/channel":
                    kinds.append(d["params"]["meta"]["kind"])
                    if d["params"]["meta"]["kind"] == "lines":
                        lines.extend(d["params"]["content"].splitlines()[1:])
        if kinds[0] != "started" or kinds[-1] != "stopped" or lines != ["py-one", "py-two"]:
            fail(f"channel notifications: kinds {kinds}, lines {lines}")
        ok(f"channel notifications read by the SDK's transport: {kinds}, lines {lines}, and the tools/call response")


async def main(binary, home):
    w = Wakeful(binary, home)
    params = StdioServerParameters(
        command=binary, args=["mcp"],
        env={"WAKEFUL_HOME": home, "WAKEFUL_SESSION": "py", "PATH": os.environ["PATH"]},
    )
    # A session of its own: its events must not reach the `mcp` consumer
    # of the session the checks below wait on.
    await channel_check(StdioServerParameters(
        command=binary, args=["mcp"],
        env={"WAKEFUL_HOME": home, "WAKEFUL_SESSION": "py-channel", "PATH": os.environ["PATH"]},
    ))
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            ok(f"initialize: server {init.server_info.name} {init.server_info.version}, protocol {init.protocol_version}")
            tools = {t.name: t for t in (await session.list_tools()).tools}
            start = tools["monitor_start"].input_schema
            if start.get("required") != ["description"]:
                fail(f"monitor_start requires {start.get('required')}")
            for source in ("command", "file", "ws", "terminal"):
                if source not in start["properties"]:
                    fail(f"monitor_start has no {source}")
            if "exactly one source" not in start.get("description", ""):
                fail(f"monitor_start's input schema does not say to give exactly one source: {start.get('description')}")
            ok(f"tools/list: {sorted(tools)}; monitor_start requires only description, sources command/file/ws/terminal")

            # A cancelled monitor_wait acknowledges nothing.
            async with anyio.create_task_group() as tg:
                tg.start_soon(session.call_tool, "monitor_wait", {"timeout_ms": 30000})
                await until(lambda: w.mcp_waiters() == 1, "the wait to attach")
                tg.cancel_scope.cancel()
            await until(lambda: w.mcp_waiters() == 0, "the cancelled wait to leave")
            r = structured(await session.call_tool(
                "monitor_start", {"command": "echo py-line", "description": "after cancel"}))
            got = await wait_events(session, ["started", "lines", "stopped"])
            mine = [e for e in got if e["monitor_id"] == r["id"]]
            if [e["kind"] for e in mine] != ["started", "lines", "stopped"] or mine[1]["text"] != "py-line":
                fail(f"after a cancel: {mine}")
            ok("a cancelled monitor_wait acknowledged nothing: started, lines \"py-line\", stopped all returned")

            # A file source, as the schema describes it (no command).
            log = os.path.join(home, "app.log")
            open(log, "w").close()
            r = structured(await session.call_tool(
                "monitor_start", {"file": log, "description": "a log", "filter": "ERROR"}))
            await wait_events(session, ["started"])
            with open(log, "a") as f:
                f.write("INFO fine\nERROR broke\n")
            got = await wait_events(session, ["lines"])
            if got[-1]["text"] != "ERROR broke":
                fail(f"file source: {got}")
            await session.call_tool("monitor_stop", {"id": r["id"]})
            ok("file source: the appended ERROR line came back, the INFO line was filtered")

            # A terminal and a monitor attached to it.
            t = structured(await session.call_tool(
                "terminal_run", {"command": "read x; echo term-out-$x", "description": "a terminal"}))
            r = structured(await session.call_tool(
                "monitor_start", {"terminal": t["id"], "description": "its output", "until": "exit"}))
            ok(f"terminal_run {t['id']}, monitor {r['id']} attached")
            await session.call_tool("monitor_wait", {"timeout_ms": 0, "all": True})
            await session.call_tool("monitor_stop", {"id": r["id"]})
    print(json.dumps({"ok": True}))


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2])
