#!/usr/bin/env python3
"""Claude Code end to end, offline: the shipped plugin wakes the real Claude Code.

Runs the real, interactive Claude Code (its TUI in tmux, tui.py) against fake_anthropic.py,
with the repository's plugin (`--plugin-dir integrations/claude-code`) and this build's
`wakeful` on PATH, and checks from what reached the model (the fake's request log):

  idle   the model starts a monitor with `wakeful start` in Bash and ends its turn; the
         monitor's line, printed 2 s later, starts a new turn of the idle session (the new
         input of a request carries it), within 5 s of the line's event;
         the line reached the model exactly once (one request brought it).
  busy   the model starts a monitor whose line is printed while the same Bash call still
         runs (`sleep 3`); the line reaches the model exactly once, in that turn or the
         next, and the session's consumers end with nothing unacknowledged.
  timer  the model sets a wakeful timer (`wakeful start --in 3s --say …`) in Bash instead of
         ScheduleWakeup and ends its turn; when it fires, a new turn of the idle session
         carries it (within 5 s of the event), once.

Usage: run.py --claude PATH --wakeful PATH --out DIR
Prints PASS/FAIL per scenario, then "Claude Code <version>: all scenarios passed in <n>s",
writes results.json in DIR and exits 0 when all passed. Standard library only; needs tmux.
"""
import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, HERE)
from tui import Failed, Tui, check  # noqa: E402

IDLE_LINE, BUSY_LINE = "idle-wake-456", "busy-line-77"
TIMER_FIRED = "timer-due-812: timer fired"
# The commands print their lines through shell arithmetic, so neither the tool calls nor
# the `started` events (which quote the command) contain them.
SCRIPT = [
    {"when": "start the idle monitor", "tool": "Bash",
     "input": {"command": "wakeful start -d idle -- 'sleep 2; echo idle-wake-$((400+56))'",
               "description": "start a wakeful monitor"}},
    {"text": "Started; its line will wake me."},
    {"when": "start the busy monitor", "tool": "Bash",
     "input": {"command": "wakeful start -d busy -- 'echo busy-line-$((7*11))' >/dev/null;"
                          " sleep 3; echo slept",
               "description": "start a monitor and keep busy"}},
    {"text": "Done."},
    {"when": "set the timer", "tool": "Bash",
     "input": {"command": "wakeful start --in 3s --say \"timer-due-$((800+12))\"",
               "description": "wake me in 3 seconds"}},
    {"text": "Timer set; it will wake me."},
]


def ts(rfc3339):
    return datetime.datetime.fromisoformat(rfc3339.replace("Z", "+00:00")).timestamp()


class Run:
    def __init__(self, args):
        self.wakeful = os.path.abspath(args.wakeful)
        self.out = os.path.abspath(args.out)
        shutil.rmtree(self.out, ignore_errors=True)
        os.makedirs(os.path.join(self.out, "bin"))
        os.symlink(self.wakeful, os.path.join(self.out, "bin", "wakeful"))
        self.wk = os.path.join(self.out, "wk")
        self.claude = args.claude

    def wk_json(self, *args):
        run = subprocess.run([self.wakeful, "--json", *args], capture_output=True, text=True,
                             env={**os.environ, "WAKEFUL_HOME": self.wk}, timeout=30)
        check(run.returncode == 0, f"wakeful {' '.join(args)}: {run.stderr.strip()}")
        return run.stdout

    def monitor(self, description):
        for m in json.loads(self.wk_json("list", "--all-sessions")):
            if m["description"] == description:
                return m
        return None

    def line_event(self, monitor):
        for line in self.wk_json("events", "--session", monitor["session"]).splitlines():
            event = json.loads(line)
            if event["monitor_id"] == monitor["id"] and event["kind"] == "lines":
                return event
        return None

    def quiet(self, tui, monitor, settle=1.5):
        """The session's consumers have acknowledged every event, and the model has had no
        request for `settle` s: what would be a second delivery has had its chance."""
        def done(reqs):
            consumers = json.loads(self.wk_json("consumers", "--session", monitor["session"]))
            pending = sum(c.get("unacknowledged", 0) for c in consumers)
            last = max((r["ts"] for r in tui.requests(main_loop_only=False)), default=0)
            return pending == 0 and time.time() - last > settle and consumers
        return tui.wait_until(done, 30, "the session's consumers acknowledged everything")


def deliveries(reqs, line):
    """How many requests brought `line` to the model as new input. Every request resends
    the conversation, so a delivery is new in one request only; and one delivery that
    Claude Code records twice (a Stop hook's block leaves a system entry beside its user
    reminder) is new in the same request, so it counts once."""
    return sum(line in r["new"] for r in reqs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--claude", required=True)
    ap.add_argument("--wakeful", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    run = Run(args)
    version = subprocess.run([args.claude, "--version"], capture_output=True, text=True,
                             timeout=60).stdout.strip()
    started = time.time()
    results = []
    tui = Tui(args.claude, run.out, os.path.join(REPO, "integrations", "claude-code"),
              path_dirs=[os.path.join(run.out, "bin")], env={"WAKEFUL_HOME": run.wk},
              script=SCRIPT)
    try:
        with tui:
            tui.wait_ready()
            for name, scenario in (("idle", idle), ("busy", busy), ("timer", timer)):
                t0 = time.time()
                try:
                    said = scenario(run, tui)
                    results.append({"scenario": name, "pass": True, "said": said})
                    print(f"PASS {name} ({time.time() - t0:.1f}s): {said}", flush=True)
                except Failed as e:
                    results.append({"scenario": name, "pass": False, "said": str(e)})
                    print(f"FAIL {name} ({time.time() - t0:.1f}s): {e}", flush=True)
    except Failed as e:
        results.append({"scenario": "setup", "pass": False, "said": str(e)})
        print(f"FAIL setup: {e}", flush=True)
    finally:
        subprocess.run([run.wakeful, "daemon", "stop"], env={**os.environ, "WAKEFUL_HOME": run.wk},
                       capture_output=True, timeout=30)
    with open(os.path.join(run.out, "results.json"), "w", encoding="utf-8") as f:
        json.dump({"version": version, "results": results}, f, indent=1)
    ok = results and all(r["pass"] for r in results)
    took = time.time() - started
    print(f"Claude Code {version}: " + ("all scenarios passed" if ok else "FAILED") + f" in {took:.0f}s")
    return 0 if ok else 1


def idle(run, tui):
    tui.type_prompt("please start the idle monitor")
    monitor = tui.wait_until(lambda _: run.monitor("idle"), 30, "the model's Bash call started the monitor")
    woke = tui.wait_until(
        lambda reqs: next((r for r in reqs if IDLE_LINE in r["new"]), None), 30,
        f"a new turn carrying {IDLE_LINE}")
    event = run.line_event(monitor)
    check(event is not None, "no lines event for the idle monitor")
    latency = woke["ts"] - ts(event["ts"])
    check(latency < 5, f"the line's turn started {latency:.2f} s after its event")
    run.quiet(tui, monitor)
    reqs = tui.requests()
    n = deliveries(reqs, IDLE_LINE)
    check(n == 1, f"{IDLE_LINE} reached the model {n} times")
    return (f"{IDLE_LINE} started turn request {woke['i']} {latency * 1000:.0f} ms after its "
            f"event (monitor {monitor['id']}, session {monitor['session']}); once in "
            f"{len(reqs)} main-loop requests")


def busy(run, tui):
    tui.type_prompt("please start the busy monitor")
    monitor = tui.wait_until(lambda _: run.monitor("busy"), 30, "the model's Bash call started the monitor")
    got = tui.wait_until(lambda reqs: next((r for r in reqs if BUSY_LINE in r["new"]), None), 30,
                         f"{BUSY_LINE} reached the model")
    run.quiet(tui, monitor)
    reqs = tui.requests()
    n = deliveries(reqs, BUSY_LINE)
    check(n == 1, f"{BUSY_LINE} reached the model {n} times")
    return (f"{BUSY_LINE}, printed during the Bash call, reached the model once (request "
            f"{got['i']}); nothing left unacknowledged")


def timer(run, tui):
    tui.type_prompt("please set the timer")
    monitor = tui.wait_until(lambda _: run.monitor("timer-due-812"), 30,
                             "the model's Bash call set the timer")
    woke = tui.wait_until(
        lambda reqs: next((r for r in reqs if TIMER_FIRED in r["new"]), None), 30,
        "a new turn carrying the fired timer")
    fired = None
    for line in run.wk_json("events", "--session", monitor["session"]).splitlines():
        event = json.loads(line)
        if event["monitor_id"] == monitor["id"] and event["kind"] == "stopped":
            fired = event
    check(fired is not None and fired["stop_reason"]["kind"] == "fired", f"no fired event: {fired}")
    latency = woke["ts"] - ts(fired["ts"])
    check(0 <= latency < 5, f"the timer's turn started {latency:.2f} s after it fired")
    run.quiet(tui, monitor)
    n = deliveries(tui.requests(), TIMER_FIRED)
    check(n == 1, f"the fired timer reached the model {n} times")
    return (f"the timer fired {fired['stop_reason'].get('late_ms', 0)} ms late and started turn "
            f"request {woke['i']} {latency * 1000:.0f} ms after its event; once")


if __name__ == "__main__":
    sys.exit(main())
