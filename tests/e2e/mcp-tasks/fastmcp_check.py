#!/usr/bin/env python3
"""FastMCP (`fastmcp[tasks]==4.1.4`) as a tasks client of `wakeful mcp`.

- The dual-era client connects in its default mode (`auto`) and stays on
  MCP 2026-07-28 (it declares the tasks extension).
- `call_tool("monitor_wait")` runs as a task and resolves transparently when a
  line comes.
- `call_tool_task` gives a handle whose `status`, `wait` and `result` work; the
  task is kept by the daemon: a second connection (a new `wakeful mcp`
  process) fetches a task the first one created.
- `cancel` ends a working task; it takes nothing, so the next line goes to the
  next reader.
- A task whose result was never fetched acknowledges nothing (the `mcp`
  consumer's cursor does not move).

Usage: fastmcp_check.py WAKEFUL_BIN STATE_DIR
Prints one line per check and a JSON summary; exits 0 only when every check
passed. Every wait has one deadline; nothing sleeps a fixed time.
"""
import asyncio
import json
import os
import subprocess
import sys
import time

import fastmcp_tasks  # noqa: F401  (turns on the client's task support)
from fastmcp import Client
from fastmcp.client.transports import StdioTransport
from fastmcp_tasks import call_tool_task

DEADLINE_S = 20
SESSION = "fastmcp"


def ok(message):
    print(f"ok   {message}", flush=True)


def fail(message):
    print(f"FAIL {message}", flush=True)
    print(json.dumps({"ok": False}))
    sys.exit(1)


class Wakeful:
    def __init__(self, binary, home):
        self.binary, self.home = binary, home

    def json(self, *args):
        env = dict(os.environ, WAKEFUL_HOME=self.home, WAKEFUL_SESSION=SESSION)
        out = subprocess.run([self.binary, "--json", *args], env=env, check=True,
                             capture_output=True, text=True).stdout
        return json.loads(out)

    def mcp(self):
        for c in self.json("consumers"):
            if c["consumer"] == "mcp" and c["session"] == SESSION:
                return c
        return {"acked_seq": 0, "waiters": 0, "unacked": 0}

    def client(self):
        transport = StdioTransport(
            command=self.binary, args=["mcp"],
            env={"WAKEFUL_HOME": self.home, "WAKEFUL_SESSION": SESSION,
                 "PATH": os.environ["PATH"]},
            keep_alive=False,
        )
        return Client(transport)


async def until(cond, what):
    deadline = time.monotonic() + DEADLINE_S
    while not cond():
        if time.monotonic() > deadline:
            fail(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


def data(result):
    return result.structured_content or json.loads(result.content[0].text)


def append(path, line):
    with open(path, "a") as f:
        f.write(line + "\n")


async def main(binary, home):
    w = Wakeful(binary, home)
    log = os.path.join(home, "app.log")
    open(log, "w").close()
    async with w.client() as client:
        if client.protocol_version != "2026-07-28":
            fail(f"negotiated {client.protocol_version}, not 2026-07-28")
        ok("FastMCP's dual-era client stays on 2026-07-28 (it declares the tasks extension)")

        started = data(await client.call_tool(
            "monitor_start", {"file": log, "description": "app log"}))
        first = data(await client.call_tool("monitor_wait", {"timeout_ms": 10000}))
        if [e["kind"] for e in first["events"]] != ["started"]:
            fail(f"the first wait: {first}")

        # A task handle: working until a line comes.
        task = await call_tool_task(client, "monitor_wait", {"timeout_ms": 20000})
        status = await task.status()
        if status.status != "working" or status.poll_interval_ms != 250:
            fail(f"a fresh task: {status}")
        if len(task.task_id) != 32:
            fail(f"task id {task.task_id!r} is not 128 random bits")
        await until(lambda: w.mcp()["waiters"] == 1, "the task's wait to attach in the daemon")
        append(log, "line-one")
        done = await task.wait(timeout=DEADLINE_S)
        if done.status != "completed":
            fail(f"after a line: {done}")
        got = data(await task.result())
        if [e["text"] for e in got["events"]] != ["line-one"]:
            fail(f"the task's result: {got}")
        await until(lambda: w.mcp()["unacked"] == 0,
                    "the fetched result to be acknowledged")
        ok(f"call_tool_task: status working (pollIntervalMs 250), wait -> completed, result {got['events'][0]['text']!r}, acknowledged")

        # call_tool resolves a task transparently.
        pending = asyncio.ensure_future(client.call_tool("monitor_wait", {"timeout_ms": 20000}))
        await until(lambda: w.mcp()["waiters"] == 1, "the transparent task's wait")
        append(log, "line-two")
        r = data(await asyncio.wait_for(pending, DEADLINE_S))
        if [e["text"] for e in r["events"]] != ["line-two"]:
            fail(f"call_tool on monitor_wait: {r}")
        ok("call_tool(monitor_wait) ran as a task and resolved when the line came")

        # Cancel: the task takes nothing; the next reader gets the next line.
        task = await call_tool_task(client, "monitor_wait", {"timeout_ms": 20000})
        await until(lambda: w.mcp()["waiters"] == 1, "the task to wait")
        await task.cancel()
        status = await task.status()
        if status.status != "cancelled":
            fail(f"after cancel: {status}")
        await until(lambda: w.mcp()["waiters"] == 0, "the cancelled task's wait to leave")
        append(log, "line-three")
        r = data(await client.call_tool("monitor_wait", {"timeout_ms": 10000}))
        if [e["text"] for e in r["events"]] != ["line-three"]:
            fail(f"after a cancel: {r}")
        ok("cancel: status cancelled, its wait left, the next line went to the next reader")

        # A task created here and fetched by another connection.
        task = await call_tool_task(client, "monitor_wait", {"timeout_ms": 20000})
        kept = task.create_result
        await until(lambda: w.mcp()["waiters"] == 1, "the kept task to wait")
        append(log, "line-four")
        await until(lambda: w.mcp()["unacked"] == 1 and w.mcp()["waiters"] == 1,
                    "the line to reach the kept task")
    # The first `wakeful mcp` is gone; its task was never fetched, so nothing
    # was acknowledged.
    before = w.mcp()
    if before["unacked"] != 1:
        fail(f"a task never fetched acknowledged its events: {before}")
    async with w.client() as client:
        from fastmcp_tasks import ToolTask
        again = ToolTask(client, "monitor_wait", kept)
        got = data(await again.result())
        if [e["text"] for e in got["events"]] != ["line-four"]:
            fail(f"the kept task fetched by a new connection: {got}")
        await until(lambda: w.mcp()["unacked"] == 0, "the kept task's hand-over")
        ok("a task kept by the daemon: a new `wakeful mcp` fetched it after the first one exited; acknowledged only then")

        bad = ToolTask(client, "monitor_wait", kept.model_copy(update={"task_id": "0" * 32}))
        try:
            await bad.status()
            fail("an unknown task id was answered")
        except Exception as e:  # the SDK raises McpError
            if "unknown task id" not in str(e):
                fail(f"an unknown task id: {e}")
        ok("an unknown task id gets `unknown task id` and nothing more")
        await client.call_tool("monitor_stop", {"id": started["id"]})
    print(json.dumps({"ok": True}))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
