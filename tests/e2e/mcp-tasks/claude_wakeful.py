#!/usr/bin/env python3
"""The real, interactive Claude Code with `wakeful mcp` alone (no plugin, no channel flag),
offline: the model starts a monitor on a log file and calls `monitor_wait`; the session goes
idle; then a line is appended to the log, and the run waits for a model request that carries
it. Reports the era Claude Code negotiated, whether it backgrounded the call as a task, and
the latency from the line's append to the model request.

Usage: claude_wakeful.py --claude PATH --wakeful PATH --out DIR [--wait 40]
                         [--env NAME=VALUE]... [--claude-arg ARG]... [--protocol MODE]
                         [--resume]

With --resume, Claude Code is closed once the task is in the background, the line is
appended while it is gone, and Claude Code is started again with `--continue`: the report
says whether the line still reached the model.

Prints one JSON object (also DIR/findings.json); exits 0 when the line reached the model.
DIR keeps debug.log (Claude Code's --debug-file), requests.jsonl (the fake model API's log)
and wakeful/ (the state directory). Needs tmux and python3; the session harness is
tests/e2e/claude-code/tui.py.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "claude-code"))
from tui import Failed, Tui  # noqa: E402

LINE = "ERROR boom-4711"
DEBUG_PATTERNS = [
    r"protocolEra|negotiatedProtocolVersion",
    r"returned task",
    r"[Tt]ask .*(completed|polling|notification|ending)",
    r"Channel notifications",
]


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--claude", required=True)
    ap.add_argument("--wakeful", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--wait", type=float, default=40)
    ap.add_argument("--env", action="append", default=[], metavar="NAME=VALUE")
    ap.add_argument("--claude-arg", action="append", default=[], metavar="ARG")
    ap.add_argument("--protocol", default=None)
    ap.add_argument("--resume", action="store_true")
    args = ap.parse_args(argv)
    out = os.path.abspath(args.out)
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(os.path.join(out, "plugin", ".claude-plugin"))
    with open(os.path.join(out, "plugin", ".claude-plugin", "plugin.json"), "w") as f:
        json.dump({"name": "empty", "version": "0.0.0"}, f)
    home = os.path.join(out, "wakeful")
    os.makedirs(home)
    log = os.path.join(out, "app.log")
    open(log, "w").close()
    wakeful = os.path.abspath(args.wakeful)
    server_args = ["mcp"] + (["--protocol", args.protocol] if args.protocol else [])
    mcp = {"mcpServers": {"wakeful": {"command": wakeful, "args": server_args,
                                      "env": {"WAKEFUL_HOME": home}}}}
    with open(os.path.join(out, "mcp.json"), "w") as f:
        json.dump(mcp, f)
    script = [
        {"when": "watch-app-log", "tool": "mcp__wakeful__monitor_start",
         "input": {"file": log, "description": "app log", "wake_on": "match:ERROR"}},
        {"tool": "mcp__wakeful__monitor_wait", "input": {}},
        {"text": "Waiting for the log in the background; ending my turn."},
    ]
    env = dict(e.split("=", 1) for e in args.env)
    claude_args = ("--mcp-config", os.path.join(out, "mcp.json"), "--strict-mcp-config",
                   "--allowedTools", "mcp__wakeful__monitor_start,mcp__wakeful__monitor_wait",
                   *args.claude_arg)

    appended = arrived = None
    backgrounded = False
    tui = Tui(args.claude, out, os.path.join(out, "plugin"), env=env, script=script,
              args=claude_args)
    try:
        with tui:
            tui.wait_ready()
            tui.type_prompt("watch-app-log")
            # Either Claude Code backgrounds the call as a task (its debug log says so),
            # or the call blocks the turn (a plain wait attaches to the daemon). A task's
            # wait attaches too, a moment before the debug log names the task: a wait
            # counts as blocking only once it has been attached for 2 s without that line.
            deadline = time.time() + args.wait
            blocking_since = None
            while time.time() < deadline and not backgrounded:
                backgrounded = task_backgrounded(out)
                if backgrounded:
                    break
                if blocking_wait_attached(wakeful, home):
                    blocking_since = blocking_since or time.time()
                    if time.time() - blocking_since > 2:
                        break
                time.sleep(0.05)
            if backgrounded:
                # The turn's last request (answered with text): the session goes idle.
                tui.wait_until(lambda reqs: reqs[2] if len(reqs) >= 3 else None,
                               args.wait, "the end of the turn")
            if not args.resume:
                appended = append(log)
                arrived = wait_for_line(tui, args.wait)
    except Failed as e:
        print(f"claude_wakeful.py: {e}", file=sys.stderr)
    if args.resume:
        appended = append(log)
        tui2 = Tui(args.claude, out, os.path.join(out, "plugin"), env=env, script=[],
                   args=(*claude_args, "--continue"))
        try:
            with tui2:
                tui2.wait_ready()
                arrived = wait_for_line(tui2, args.wait)
        except Failed as e:
            print(f"claude_wakeful.py: {e}", file=sys.stderr)
    debug = []
    dpath = os.path.join(out, "debug.log")
    if os.path.exists(dpath):
        with open(dpath, encoding="utf-8", errors="replace") as f:
            for line in f:
                if any(re.search(p, line) for p in DEBUG_PATTERNS):
                    debug.append(line.rstrip()[:300])
    findings = {
        "protocol": args.protocol or "auto",
        "env": env,
        "claude_args": args.claude_arg,
        "resume": args.resume,
        "backgrounded_as_task": backgrounded,
        "line_reached_model": arrived is not None,
        "latency_ms": round((arrived["ts"] - appended) * 1000) if arrived and appended else None,
        "new_input": arrived["new"][:400] if arrived else None,
        "debug": debug[:12],
    }
    with open(os.path.join(out, "findings.json"), "w") as f:
        json.dump(findings, f, indent=1)
    print(json.dumps(findings, indent=1))
    subprocess.run([wakeful, "daemon", "stop"], env=dict(os.environ, WAKEFUL_HOME=home),
                   capture_output=True)
    return 0 if arrived else 1


def append(log):
    with open(log, "a") as f:
        f.write(LINE + "\n")
    return time.time()


def wait_for_line(tui, wait):
    try:
        return tui.wait_until(lambda reqs: next((r for r in reqs if "boom-4711" in r["new"]), None),
                              wait, "the line in a model request")
    except Failed as e:
        print(f"claude_wakeful.py: {e}", file=sys.stderr)
        return None


def task_backgrounded(out):
    path = os.path.join(out, "debug.log")
    if not os.path.exists(path):
        return False
    with open(path, encoding="utf-8", errors="replace") as f:
        return any("returned task" in line for line in f)


def blocking_wait_attached(wakeful, home):
    """A plain (blocking) monitor_wait is attached to the daemon."""
    r = subprocess.run([wakeful, "--json", "consumers"], env=dict(os.environ, WAKEFUL_HOME=home),
                       capture_output=True, text=True)
    try:
        return any(c["consumer"] == "mcp" and c["waiters"] > 0 for c in json.loads(r.stdout))
    except ValueError:
        return False


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
