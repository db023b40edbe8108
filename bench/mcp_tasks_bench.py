#!/usr/bin/env python3
"""Line -> `notifications/tasks`, beside line -> `wakeful events --follow`, in one run.

Usage:
    cargo build --release -p wakeful-cli
    python3 bench/mcp_tasks_bench.py [target/release/wakeful] [--samples 50]

One daemon in a fresh WAKEFUL_HOME, one file monitor of session `bench`, and two readers,
one process waking on each side:
- a `wakeful mcp` spoken to over stdio as an MCP 2026-07-28 client that declares the tasks
  extension: it keeps a `subscriptions/listen` stream open and, for each sample, calls
  `monitor_wait` (answered with a task) and reads until the `notifications/tasks` that
  completes it;
- `wakeful events --follow --json` of the same session.
For each sample the script waits until the task's wait is attached in the daemon, appends
one line to the followed file, and takes the time from the append to each reader's first
sight of the line (samples are --gap apart, within the monitor's rate limit). Prints one JSON object with the medians, p90s and maxima (ms).
"""
import argparse
import json
import os
import queue
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import pct  # noqa: E402

META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "mcp-tasks-bench", "version": "0"},
    "io.modelcontextprotocol/clientCapabilities": {
        "extensions": {"io.modelcontextprotocol/tasks": {}}},
}


def reader(stream, q):
    for line in stream:
        q.put((time.time(), line))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("wakeful", nargs="?", default="target/release/wakeful")
    ap.add_argument("--samples", type=int, default=50)
    ap.add_argument("--gap", type=float, default=1.1,
                    help="seconds between samples: the monitor's rate limit refills one token a second")
    args = ap.parse_args()
    bin_ = os.path.abspath(args.wakeful)
    home = tempfile.mkdtemp(prefix="wk-tasks-bench-")
    env = dict(os.environ, WAKEFUL_HOME=home, WAKEFUL_SESSION="bench")
    log = os.path.join(home, "app.log")
    open(log, "w").close()
    subprocess.run([bin_, "start", "-d", "bench log", "--file", log, "--persistent", "--batch-ms", "0"],
                   env=env, check=True, capture_output=True)
    mcp = subprocess.Popen([bin_, "mcp"], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                           text=True, bufsize=1)
    follow = subprocess.Popen([bin_, "events", "--follow", "--json"], env=env,
                              stdout=subprocess.PIPE, text=True, bufsize=1)
    mq, fq = queue.Queue(), queue.Queue()
    threading.Thread(target=reader, args=(mcp.stdout, mq), daemon=True).start()
    threading.Thread(target=reader, args=(follow.stdout, fq), daemon=True).start()

    def send(obj):
        mcp.stdin.write(json.dumps(obj) + "\n")
        mcp.stdin.flush()

    seen = []

    def frame(pred, what):
        deadline = time.time() + 20
        while True:
            try:
                t, line = mq.get(timeout=max(0.01, deadline - time.time()))
            except queue.Empty:
                sys.exit(f"mcp_tasks_bench: no {what}; last frames: {seen[-2:]}")
            msg = json.loads(line)
            seen.append(line)
            if pred(msg):
                return t, msg

    def attached():
        r = subprocess.run([bin_, "--json", "consumers"], env=env, capture_output=True, text=True)
        return any(c["consumer"] == "mcp" and c["waiters"] > 0 for c in json.loads(r.stdout))

    send({"jsonrpc": "2.0", "id": 0, "method": "subscriptions/listen",
          "params": {"notifications": {}, "_meta": META}})
    frame(lambda m: m.get("method") == "notifications/subscriptions/acknowledged", "ack")
    # The monitor's `started` event: drained by a first task.
    task_lat, follow_lat = [], []
    for i in range(args.samples + 1):
        send({"jsonrpc": "2.0", "id": i + 1, "method": "tools/call",
              "params": {"name": "monitor_wait", "arguments": {"timeout_ms": 60000},
                         "_meta": META}})
        frame(lambda m: m.get("id") == i + 1, "task")
        if i == 0:
            frame(lambda m: m.get("method") == "notifications/tasks", "first notification")
            continue
        deadline = time.time() + 20
        while not attached():
            if time.time() > deadline:
                r = subprocess.run([bin_, "--json", "consumers"], env=env, capture_output=True, text=True)
                sys.exit(f"mcp_tasks_bench: the task's wait never attached: {r.stdout} {list(mq.queue)}")
            time.sleep(0.005)
        mark = f"bench-line-{i:03d}"
        time.sleep(args.gap)
        t0 = time.time()
        with open(log, "a") as f:
            f.write(mark + "\n")
        t1, _ = frame(lambda m: m.get("method") == "notifications/tasks"
                      and mark in json.dumps(m), "notifications/tasks")
        while True:
            t2, line = fq.get(timeout=20)
            if mark in line:
                break
        task_lat.append((t1 - t0) * 1000)
        follow_lat.append((t2 - t0) * 1000)
    mcp.stdin.close()
    follow.terminate()
    mcp.wait(timeout=10)
    subprocess.run([bin_, "daemon", "stop"], env=env, capture_output=True)
    shutil.rmtree(home, ignore_errors=True)

    def summary(xs):
        return {"median": round(statistics.median(xs), 2), "p90": round(pct(xs, 90), 2),
                "max": round(max(xs), 2)}
    print(json.dumps({"samples": args.samples,
                      "line_to_notifications_tasks_ms": summary(task_lat),
                      "line_to_events_follow_ms": summary(follow_lat)}))


if __name__ == "__main__":
    main()
