#!/usr/bin/env python3
"""Runs the real, interactive Claude Code against probe_server.py, offline, and reports
what it did with the server: the protocol era it negotiated, whether it opened
`subscriptions/listen`, whether it backgrounded the task, how it learned that the task had
ended (`notifications/tasks` or `tasks/get` polls), and how long after the job's end the
result reached the model in a new turn of the idle session.

Usage: run.py --claude PATH --out DIR [--job-s 8] [--wait 40] [--env NAME=VALUE]...
              [--claude-arg ARG]...
              [-- probe_server.py options, e.g. --discover modern --tasks --list-changed --push]

The session: the prompt `run-probe-job` makes the fake model call `mcp__probe__slow_job`, then end its
turn with text; the session is then idle. The run ends when a model request carries
`slow-job-done` (printed as a finding), or after --wait seconds. Prints one JSON object
(also in DIR/findings.json); DIR keeps the debug log (debug.log), the probe's frames
(frames.jsonl) and the model requests (requests.jsonl). Needs tmux and python3; the
session harness is tests/e2e/claude-code/tui.py.
"""
import argparse
import json
import os
import re
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "claude-code"))
from tui import Failed, Tui  # noqa: E402

TOKEN = "tok-4711"
DEBUG_PATTERNS = [
    r"protocolEra|negotiatedProtocolVersion",
    r"server/discover",
    r"subscriptions/listen",
    r"returned task",
    r"[Tt]ask .*(completed|polling|notification)",
    r"Channel notifications",
    r"MCP_TASK",
]


def frames(path):
    out = []
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            for line in f:
                try:
                    out.append(json.loads(line))
                except ValueError:
                    pass
    return out


def main(argv):
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--claude", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--job-s", type=float, default=8)
    ap.add_argument("--wait", type=float, default=40)
    ap.add_argument("--env", action="append", default=[], metavar="NAME=VALUE")
    ap.add_argument("--claude-arg", action="append", default=[], metavar="ARG",
                    help="one more argument for claude (repeat)")
    args = ap.parse_args(argv)
    out = os.path.abspath(args.out)
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(os.path.join(out, "plugin", ".claude-plugin"))
    with open(os.path.join(out, "plugin", ".claude-plugin", "plugin.json"), "w") as f:
        json.dump({"name": "empty", "version": "0.0.0"}, f)
    frames_log = os.path.join(out, "frames.jsonl")
    mcp = {"mcpServers": {"probe": {
        "command": "python3",
        "args": [os.path.join(HERE, "probe_server.py"), "--log", frames_log,
                 "--job-s", str(args.job_s), *extra]}}}
    with open(os.path.join(out, "mcp.json"), "w") as f:
        json.dump(mcp, f)
    script = [{"when": "run-probe-job", "tool": "mcp__probe__slow_job", "input": {"token": TOKEN}},
              {"text": "The job runs in the background; ending my turn."}]
    env = dict(e.split("=", 1) for e in args.env)
    tui = Tui(args.claude, out, os.path.join(out, "plugin"), env=env, script=script,
              args=("--mcp-config", os.path.join(out, "mcp.json"), "--strict-mcp-config",
                    "--allowedTools", "mcp__probe__slow_job", *args.claude_arg))
    arrived = None
    try:
        with tui:
            tui.wait_ready()
            tui.type_prompt("run-probe-job")
            try:
                arrived = tui.wait_until(
                    lambda reqs: next((r for r in reqs if TOKEN in r["new"]
                                       and "slow-job-done" in r["new"]), None),
                    args.wait, "the job's result")
            except Failed as e:
                print(f"run.py: {e}", file=sys.stderr)
    except Failed as e:
        print(f"run.py: {e}", file=sys.stderr)
    fr = frames(frames_log)
    ins = [f for f in fr if f["dir"] == "in"]
    methods = [f["msg"].get("method") for f in ins if "method" in f["msg"]]
    ended = next((f["t"] for f in fr if f["dir"] == "job"), None)
    pushed = [f for f in fr if f["dir"] == "out" and f["msg"].get("method") == "notifications/tasks"]
    listen = [f["msg"].get("params") for f in ins if f["msg"].get("method") == "subscriptions/listen"]
    debug = []
    dpath = os.path.join(out, "debug.log")
    if os.path.exists(dpath):
        with open(dpath, encoding="utf-8", errors="replace") as f:
            for line in f:
                if any(re.search(p, line) for p in DEBUG_PATTERNS):
                    debug.append(line.rstrip()[:400])
    findings = {
        "probe": extra,
        "env": env,
        "claude_args": args.claude_arg,
        "first_method": methods[0] if methods else None,
        "initialize": "initialize" in methods,
        "methods": sorted(set(m for m in methods if m)),
        "listen_params": listen,
        "tasks_get_calls": methods.count("tasks/get"),
        "notifications_tasks_sent": len(pushed),
        "result_reached_model": arrived is not None,
        "result_request": arrived["i"] if arrived else None,
        "latency_ms": round((arrived["ts"] - ended) * 1000) if arrived and ended else None,
        "new_input": arrived["new"][:600] if arrived else None,
        "debug": debug,
    }
    with open(os.path.join(out, "findings.json"), "w") as f:
        json.dump(findings, f, indent=1)
    print(json.dumps(findings, indent=1))
    return 0 if arrived else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
