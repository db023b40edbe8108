#!/usr/bin/env python3
"""A probe MCP server (stdio) that can answer either MCP era, to see what a client does.

It offers one tool, `slow_job`, whose work ends `--job-s` seconds after the call and whose
result is the text `slow-job-done <token>`. Every frame in and out is logged, with the wall
clock, to `--log` (JSONL: {"t": seconds, "dir": "in"|"out", "msg": {...}}), so a run can be
read back: which handshake the client chose, whether it opened `subscriptions/listen`, and
when it learned that the job had ended.

Usage: probe_server.py --log FILE [--discover modern|-32601] [--tasks] [--list-changed]
                       [--push] [--channel] [--job-s N] [--poll-ms N]
  --discover modern   answer `server/discover` with a DiscoverResult (2025-11-25, 2026-07-28)
  --discover -32601   answer it with "method not found", as a legacy-only server does
  --tasks             advertise the tasks extension (io.modelcontextprotocol/tasks) and answer
                      a `tools/call` that declares it in `_meta` with a task
  --list-changed      advertise `tools.listChanged` (what makes a client open
                      `subscriptions/listen` on a 2026-07-28 connection)
  --push              send `notifications/tasks` on every open listen stream when a task ends,
                      even one whose filter names no task ids (to see whether the client reacts)
  --channel           declare `experimental["claude/channel"]` and, when the job ends on a
                      legacy connection, send a `notifications/claude/channel`
  --poll-ms           the task's `pollIntervalMs` (default 1000)
Standard library only.
"""
import argparse
import json
import secrets
import sys
import threading
import time
from datetime import datetime, timezone

TASKS = "io.modelcontextprotocol/tasks"
PV = "io.modelcontextprotocol/protocolVersion"
CAPS = "io.modelcontextprotocol/clientCapabilities"
SUB = "io.modelcontextprotocol/subscriptionId"
MODERN = "2026-07-28"
LEGACY = "2025-11-25"


def now_iso():
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class Probe:
    def __init__(self, args):
        self.args = args
        self.lock = threading.Lock()
        self.log = open(args.log, "a", encoding="utf-8")
        self.tasks = {}  # task id -> task dict (with "result" once completed)
        self.listens = {}  # listen request id -> accepted filter
        self.legacy = False

    def record(self, direction, msg):
        with self.lock:
            self.log.write(json.dumps({"t": time.time(), "dir": direction, "msg": msg}) + "\n")
            self.log.flush()

    def send(self, msg):
        self.record("out", msg)
        with self.lock:
            sys.stdout.write(json.dumps(msg) + "\n")
            sys.stdout.flush()

    def reply(self, rid, result):
        self.send({"jsonrpc": "2.0", "id": rid, "result": result})

    def error(self, rid, code, message, data=None):
        err = {"code": code, "message": message}
        if data is not None:
            err["data"] = data
        self.send({"jsonrpc": "2.0", "id": rid, "error": err})

    def capabilities(self):
        caps = {"tools": {"listChanged": True} if self.args.list_changed else {}}
        if self.args.tasks:
            caps["extensions"] = {TASKS: {}}
        if self.args.channel:
            caps["experimental"] = {"claude/channel": {}}
        return caps

    def tool(self):
        return {"name": "slow_job", "description": "Runs a slow job and returns its result.",
                "inputSchema": {"type": "object", "properties": {"token": {"type": "string"}}}}

    def handle(self, msg):
        method, rid = msg.get("method"), msg.get("id")
        params = msg.get("params") or {}
        meta = params.get("_meta") or {}
        modern = meta.get(PV) == MODERN
        if rid is None:
            return  # a notification: nothing to answer
        if method == "server/discover":
            if self.args.discover == "modern":
                self.reply(rid, {"resultType": "complete", "supportedVersions": [LEGACY, MODERN],
                                 "capabilities": self.capabilities(), "ttlMs": 0,
                                 "cacheScope": "private",
                                 "_meta": {"io.modelcontextprotocol/serverInfo":
                                           {"name": "probe", "version": "1"}}})
            else:
                self.error(rid, -32601, "Method not found: server/discover")
        elif method == "initialize":
            self.legacy = True
            asked = params.get("protocolVersion", LEGACY)
            self.reply(rid, {"protocolVersion": asked if asked <= LEGACY else LEGACY,
                             "capabilities": self.capabilities(),
                             "serverInfo": {"name": "probe", "version": "1"}})
        elif method == "ping":
            self.reply(rid, {})
        elif method == "tools/list":
            result = {"tools": [self.tool()]}
            if modern:
                result.update(resultType="complete", ttlMs=0, cacheScope="private")
            self.reply(rid, result)
        elif method == "tools/call":
            self.call(rid, params, meta, modern)
        elif method == "tasks/get":
            task = self.tasks.get(params.get("taskId"))
            if task is None:
                self.error(rid, -32602, "Unknown task")
            else:
                self.reply(rid, {"resultType": "complete", **task})
        elif method == "tasks/cancel":
            task = self.tasks.get(params.get("taskId"))
            if task is None:
                self.error(rid, -32602, "Unknown task")
            else:
                if task["status"] == "working":
                    task.update(status="cancelled", lastUpdatedAt=now_iso())
                self.reply(rid, {"resultType": "complete"})
        elif method == "subscriptions/listen":
            wanted = params.get("notifications") or {}
            accepted = {k: v for k, v in wanted.items()
                        if k == "taskIds" or (k == "toolsListChanged" and self.args.list_changed)}
            self.listens[rid] = accepted
            self.send({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
                       "params": {"notifications": accepted, "_meta": {SUB: rid}}})
        else:
            self.error(rid, -32601, f"Method not found: {method}")

    def call(self, rid, params, meta, modern):
        token = (params.get("arguments") or {}).get("token") or "t"
        result = {"content": [{"type": "text", "text": f"slow-job-done {token}"}],
                  "isError": False}
        declared = TASKS in ((meta.get(CAPS) or {}).get("extensions") or {})
        if self.args.tasks and modern and declared:
            tid = secrets.token_urlsafe(16)
            stamp = now_iso()
            task = {"taskId": tid, "status": "working", "createdAt": stamp,
                    "lastUpdatedAt": stamp, "ttlMs": 600000, "pollIntervalMs": self.args.poll_ms}
            self.tasks[tid] = task
            self.reply(rid, {"resultType": "task", **task})
            threading.Timer(self.args.job_s, self.finish, (tid, result)).start()
            return

        def later():
            self.record("job", {"ended": True, "token": token})
            if modern:
                result["resultType"] = "complete"
            self.reply(rid, result)
            if self.args.channel and self.legacy:
                self.send({"jsonrpc": "2.0", "method": "notifications/claude/channel",
                           "params": {"content": f"channel: slow-job-done {token}",
                                      "meta": {"kind": "probe"}}})
        threading.Timer(self.args.job_s, later).start()

    def finish(self, tid, result):
        task = self.tasks[tid]
        if task["status"] != "working":
            return
        task.update(status="completed", lastUpdatedAt=now_iso(), result=result)
        self.record("job", {"ended": True, "taskId": tid})
        if self.args.push:
            for lid, accepted in list(self.listens.items()):
                ids = accepted.get("taskIds")
                if ids is None or tid in ids:
                    self.send({"jsonrpc": "2.0", "method": "notifications/tasks",
                               "params": {**task, "_meta": {SUB: lid}}})


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--log", required=True)
    ap.add_argument("--discover", choices=["modern", "-32601"], default="modern")
    ap.add_argument("--tasks", action="store_true")
    ap.add_argument("--list-changed", action="store_true")
    ap.add_argument("--push", action="store_true")
    ap.add_argument("--channel", action="store_true")
    ap.add_argument("--job-s", type=float, default=8)
    ap.add_argument("--poll-ms", type=int, default=1000)
    probe = Probe(ap.parse_args())
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        probe.record("in", msg)
        if isinstance(msg, dict):
            probe.handle(msg)


if __name__ == "__main__":
    main()
