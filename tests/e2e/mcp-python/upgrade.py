"""The MCP Python SDK stays attached to `wakeful mcp` while the daemon is
upgraded six times: a 10 ms counter's lines come through monitor_wait once
each, in order. Usage: upgrade.py WAKEFUL_BIN WAKEFUL_HOME."""
import asyncio
import json
import os
import subprocess
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

BIN, HOME = sys.argv[1], sys.argv[2]
ENV = dict(os.environ, WAKEFUL_HOME=HOME, WAKEFUL_SESSION="sdk-upgrade")


def numbers(result):
    out = []
    for e in result.structured_content["events"]:
        if e["kind"] == "lines":
            out += [int(x) for x in e["text"].split("\n")]
        elif e["kind"] == "suppressed":
            out += list(range(e["from_line"], e["to_line"] + 1))
    return out


async def main():
    params = StdioServerParameters(command=BIN, args=["mcp"], env=ENV)
    seen = []
    async with stdio_client(params) as (r, w):
        async with ClientSession(r, w) as s:
            await s.initialize()
            await s.call_tool("monitor_start", {
                "description": "counter",
                "command": "i=0; while :; do i=$((i+1)); echo $i; sleep 0.01; done",
            })
            for _ in range(6):
                seen += numbers(await s.call_tool("monitor_wait", {"timeout_ms": 30000}))
                up = subprocess.run([BIN, "daemon", "upgrade"], env=ENV, capture_output=True, text=True)
                assert up.returncode == 0, up.stderr
                print(up.stdout.strip())
            seen += numbers(await s.call_tool("monitor_wait", {"timeout_ms": 30000}))
    subprocess.run([BIN, "daemon", "stop"], env=ENV, capture_output=True)
    ok = bool(seen) and seen == list(range(1, len(seen) + 1))
    print(json.dumps({"lines": len(seen), "ok": ok}))
    sys.exit(0 if ok else 1)


asyncio.run(main())
