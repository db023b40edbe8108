#!/usr/bin/env python3
"""A minimal ACP agent on stdio for `crates/wakeful-cli/tests/acp_proxy.rs` (stdlib only).

Answers `initialize`, `session/new` (session "s1") and `session/prompt` (one
agent_message_chunk update echoing the prompt's text, then stop reason end_turn), and logs
every message it gets to $FAKE_AGENT_LOG as one JSON line, after a first line holding its
environment's WAKEFUL_SESSION and WAKEFUL_WAKE_ON. It starts `sleep 600` in its own process
group (a child a clean stop must end) and ignores the end of its stdin, as codex-acp does.
"""
import json
import os
import subprocess
import sys

log = open(os.environ["FAKE_AGENT_LOG"], "a", buffering=1)
log.write(json.dumps({"env": {k: os.environ.get(k) for k in ("WAKEFUL_SESSION", "WAKEFUL_WAKE_ON", "WAKEFUL_ACP_PROXY")}}) + "\n")
child = subprocess.Popen(["sleep", "600"])
log.write(json.dumps({"child": child.pid}) + "\n")


def send(msg):
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


for line in sys.stdin:
    msg = json.loads(line)
    log.write(json.dumps(msg) + "\n")
    method, mid = msg.get("method"), msg.get("id")
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": mid, "result": {"protocolVersion": 1, "agentCapabilities": {}}})
    elif method == "session/new":
        send({"jsonrpc": "2.0", "id": mid, "result": {"sessionId": "s1"}})
    elif method == "session/prompt":
        text = "".join(b.get("text", "") for b in msg["params"]["prompt"])
        send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s1", "update": {
            "sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "echo: " + text}}}})
        send({"jsonrpc": "2.0", "id": mid, "result": {"stopReason": "end_turn"}})
# Stdin ended: keep running until killed, as some agents do.
while True:
    child.wait()
