#!/usr/bin/env python3
"""A long monitor_wait through the real MCP Python SDK: a call with a
progress token (the SDK sends one when given a progress callback) gets
`notifications/progress` every 10 s while it waits, and its result, the
line a monitor prints SECONDS after it started, arrives at the end.

Usage: long_wait.py WAKEFUL_BIN STATE_DIR [SECONDS]   (default 300)
Needs the `mcp` package (pip install mcp==2.3.0). Prints one line per check
and a JSON summary; exits 0 only when every check passed.
"""
import json
import os
import sys
import time

import anyio
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from common import fail, ok, structured  # noqa: E402

INTERVAL_S = 10  # wakeful-mcp's PROGRESS_INTERVAL


async def main(binary, home, seconds):
    params = StdioServerParameters(
        command=binary, args=["mcp"],
        env={"WAKEFUL_HOME": home, "WAKEFUL_SESSION": "py-long", "PATH": os.environ["PATH"]},
    )
    timeout_ms = (seconds + 100) * 1000
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            started = time.monotonic()
            m = structured(await session.call_tool("monitor_start", {
                "command": f"sleep {seconds}; echo late-line",
                "description": "a line after a long silence",
                "timeout_ms": timeout_ms + 60_000,
            }))
            # The `started` event wakes at once: take it first.
            r = structured(await session.call_tool("monitor_wait", {"timeout_ms": 20_000}))
            if [e["kind"] for e in r["events"]] != ["started"]:
                fail(f"first wait: {r}")

            progress = []

            async def on_progress(value, total, message):
                progress.append((time.monotonic() - started, value, total, message))

            r = structured(await session.call_tool(
                "monitor_wait", {"timeout_ms": timeout_ms},
                read_timeout_seconds=seconds + 120, progress_callback=on_progress))
            waited = time.monotonic() - started
            lines = [e for e in r["events"] if e["monitor_id"] == m["id"] and e["kind"] == "lines"]
            if r["timed_out"] or not lines or lines[0]["text"] != "late-line":
                fail(f"the long wait's result: {r}")
            if waited < seconds - 1:
                fail(f"the result came after {waited:.1f} s, before the line was printed ({seconds} s)")
            ok(f"the long wait returned the line \"late-line\" after {waited:.1f} s")

            want = int(seconds // INTERVAL_S) - 1
            values = [p[1] for p in progress]
            if len(progress) < want:
                fail(f"{len(progress)} progress notifications in {waited:.0f} s, wanted at least {want}: {progress}")
            if values != sorted(set(values)):
                fail(f"progress must grow with every notification: {values}")
            gaps = [b[0] - a[0] for a, b in zip(progress, progress[1:])]
            if gaps and max(gaps) > INTERVAL_S + 5:
                fail(f"a gap of {max(gaps):.1f} s between progress notifications: {gaps}")
            ok(f"{len(progress)} progress notifications, every {min(gaps, default=0):.1f}–{max(gaps, default=0):.1f} s, "
               f"progress {values[0]:.0f}..{values[-1]:.0f} of {progress[-1][2]:.0f}; last message: {progress[-1][3]!r}")
            # Acknowledged: the next wait does not return the line again.
            r = structured(await session.call_tool("monitor_wait", {"timeout_ms": 0, "all": True}))
            again = [e for e in r["events"] if e["kind"] == "lines"]
            if again:
                fail(f"the line came back: {r}")
            ok("the line was acknowledged once delivered: the next wait does not return it")
    print(json.dumps({"ok": True, "waited_s": round(waited, 1), "progress": len(progress)}))


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 300)
