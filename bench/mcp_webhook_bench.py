#!/usr/bin/env python3
"""Line -> MCP Events webhook delivery and `notifications/events/event`, beside `events --follow`, in one run.

Usage:
    cargo build --release -p wakeful-cli
    python3 bench/mcp_webhook_bench.py [target/release/wakeful] [--samples 50]

One daemon in a fresh WAKEFUL_HOME (config.toml: `[network] allow = ["127.0.0.0/8"]`),
one file monitor of session `bench`, and two readers:
- an HTTP receiver in this script on loopback, subscribed through a `wakeful mcp` (raw stdio
  frames: `initialize`, `events/subscribe` of `monitor.lines` with a webhook); it answers the
  verification challenge and 204 to each delivery, and checks each signature;
- a second `wakeful mcp` with an open `events/stream` of `monitor.lines`;
- `wakeful events --follow --json` of the same session.
For each sample the script appends one line to the followed file and takes the time from
the append to the receiver's request, to the stream's `notifications/events/event` and to
the follower's line (samples are --gap apart,
within the monitor's rate limit). Prints one JSON object with the medians, p90s and
maxima (ms).
"""
import argparse
import base64
import hashlib
import hmac
import http.server
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

KEY = bytes(range(32))
SECRET = "whsec_" + base64.b64encode(KEY).decode()


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
    home = tempfile.mkdtemp(prefix="wk-webhook-bench-")
    with open(os.path.join(home, "config.toml"), "w") as f:
        f.write('[network]\nallow = ["127.0.0.0/8"]\n')
    env = dict(os.environ, WAKEFUL_HOME=home, WAKEFUL_SESSION="bench")
    log = os.path.join(home, "app.log")
    open(log, "w").close()

    hq = queue.Queue()
    bad = []

    class Hook(http.server.BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_POST(self):
            t = time.time()
            body = self.rfile.read(int(self.headers.get("content-length", "0")))
            msg_id = self.headers.get("webhook-id", "")
            ts = self.headers.get("webhook-timestamp", "")
            want = "v1," + base64.b64encode(hmac.new(
                KEY, f"{msg_id}.{ts}.".encode() + body, hashlib.sha256).digest()).decode()
            if want not in self.headers.get("webhook-signature", "").split(" "):
                bad.append(msg_id)
            v = json.loads(body)
            if v.get("type") == "verification":
                out = json.dumps({"challenge": v["challenge"]}).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)
                return
            self.send_response(204)
            self.end_headers()
            hq.put((t, v))

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/hook"

    subprocess.run([bin_, "start", "-d", "bench log", "--file", log, "--batch-ms", "0"],
                   env=env, check=True, capture_output=True)
    mcp = subprocess.Popen([bin_, "mcp"], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                           text=True, bufsize=1)
    follow = subprocess.Popen([bin_, "events", "--follow", "--json"], env=env,
                              stdout=subprocess.PIPE, text=True, bufsize=1)
    streamer = subprocess.Popen([bin_, "mcp"], env=env, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True, bufsize=1)
    mq, fq, sq = queue.Queue(), queue.Queue(), queue.Queue()
    threading.Thread(target=reader, args=(mcp.stdout, mq), daemon=True).start()
    threading.Thread(target=reader, args=(follow.stdout, fq), daemon=True).start()
    threading.Thread(target=reader, args=(streamer.stdout, sq), daemon=True).start()
    for frame in ({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                   "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                              "clientInfo": {"name": "stream-bench", "version": "0"}}},
                  {"jsonrpc": "2.0", "method": "notifications/initialized"},
                  {"jsonrpc": "2.0", "id": 1, "method": "events/stream",
                   "params": {"name": "monitor.lines"}}):
        streamer.stdin.write(json.dumps(frame) + "\n")
        streamer.stdin.flush()
    while True:
        _, line = sq.get(timeout=20)
        if json.loads(line).get("method") == "notifications/events/active":
            break

    def request(i, method, params):
        mcp.stdin.write(json.dumps({"jsonrpc": "2.0", "id": i, "method": method,
                                    "params": params}) + "\n")
        mcp.stdin.flush()
        while True:
            _, line = mq.get(timeout=20)
            msg = json.loads(line)
            if msg.get("id") == i:
                return msg

    request(0, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                              "clientInfo": {"name": "webhook-bench", "version": "0"}})
    sub = request(1, "events/subscribe", {
        "name": "monitor.lines",
        "delivery": {"mode": "webhook", "url": url, "secret": SECRET}, "ttlMs": 3600000})
    if "result" not in sub:
        sys.exit(f"mcp_webhook_bench: subscribe failed: {sub}")

    hook_lat, stream_lat, follow_lat = [], [], []
    for i in range(args.samples):
        mark = f"bench-line-{i:03d}"
        time.sleep(args.gap)
        t0 = time.time()
        with open(log, "a") as f:
            f.write(mark + "\n")
        while True:
            t1, v = hq.get(timeout=20)
            if mark in json.dumps(v):
                break
        while True:
            t2, line = fq.get(timeout=20)
            if mark in line:
                break
        while True:
            t3, line = sq.get(timeout=20)
            if mark in line and "notifications/events/event" in line:
                break
        hook_lat.append((t1 - t0) * 1000)
        stream_lat.append((t3 - t0) * 1000)
        follow_lat.append((t2 - t0) * 1000)
    request(2, "events/unsubscribe", {"name": "monitor.lines",
                                      "delivery": {"mode": "webhook", "url": url}})
    mcp.stdin.close()
    streamer.stdin.close()
    follow.terminate()
    mcp.wait(timeout=10)
    subprocess.run([bin_, "daemon", "stop"], env=env, capture_output=True)
    server.shutdown()
    shutil.rmtree(home, ignore_errors=True)
    if bad:
        sys.exit(f"mcp_webhook_bench: bad signatures: {bad}")

    def summary(xs):
        return {"median": round(statistics.median(xs), 2), "p90": round(pct(xs, 90), 2),
                "max": round(max(xs), 2)}
    print(json.dumps({"samples": args.samples,
                      "line_to_webhook_received_ms": summary(hook_lat),
                      "line_to_events_stream_ms": summary(stream_lat),
                      "line_to_events_follow_ms": summary(follow_lat)}))


if __name__ == "__main__":
    main()
