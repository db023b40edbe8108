#!/usr/bin/env python3
"""Offline end-to-end test of wakeful's Codex wake route, with the real Codex CLI.

    run.py --codex PATH/TO/codex --wakeful PATH/TO/wakeful --out DIR [--only NAME ...]

Everything runs in DIR (emptied first): HOME, CODEX_HOME, WAKEFUL_HOME, the project, and
the logs. Codex talks to fake_responses.py (a fake of the OpenAI Responses API, in this
folder) on 127.0.0.1; nothing else is reached. `codex app-server --listen unix://` serves
the control socket $CODEX_HOME/app-server-control/app-server-control.sock, as Codex's
managed daemon does; threads are made through that socket (codex_ws.py) or with
`codex exec`, and the real `wakeful` daemon delivers each wake (a `codex` route per
session, `wakeful start -- echo LINE` as the monitor). The scenarios:

  idle      a loaded idle thread receives a turn whose input carries the monitor's line
  busy      a thread whose turn is blocked in a 5 s shell call gets it as the next turn,
            not steered into the running one
  unloaded  a thread that is not loaded (made by a finished `codex exec`) is resumed and
            gets it
  exec      a thread a running `codex exec` writes is refused (undelivered, with the
            reason), and nothing reaches the model
  fallback  with the app-server stopped the wake goes through `codex queue` and is shown
            as queued; once the app-server is back, wakeful resumes the thread, Codex runs
            the queued message, and the wake is confirmed (once)
  hooks     `wakeful integrate codex --hooks` (twice: the second changes nothing), then a
            `codex exec` turn whose shell starts a monitor: its line, printed while the
            turn runs, reaches the model in the same turn through the Stop hook (the
            route refuses the thread the exec run holds), once; a run in a session with a
            running monitor starts with the SessionStart hook's digest

Assertions are on the fake's request log (what reached the model), on `wakeful wake show`,
and on the notifications of the control socket. Prints one line per scenario and writes
DIR/results.json; exits 0 when every scenario passed. Every process it starts is stopped
(by pid / process group) before it exits.
"""
import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, HERE)
from codex_ws import ControlClient  # noqa: E402

HOOK_TAG = uuid.uuid4().hex[:8]
RULES = [
    {"match": "SLOW-TURN", "shell": "sleep 5"},
    {"match": "EXEC-SLOW", "shell": "sleep 8"},
    # The monitor prints HOOK-LINE-<tag> a second after it started, while the shell call
    # still runs (sleep 3): during the turn.
    {"match": "^HOOK-TURN", "shell": "wakeful start -d 'e2e hook monitor' -- "
                                     f"\"sleep 1; printf '%s-%s\\n' HOOK-LINE {HOOK_TAG}\"; "
                                     "sleep 3"},
]
SCENARIOS = ["idle", "busy", "unloaded", "exec", "fallback", "hooks"]


class Failed(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Failed(what)


def wait_until(pred, timeout, what, step=0.1):
    end = time.time() + timeout
    while True:
        value = pred()
        if value:
            return value
        if time.time() > end:
            raise Failed(f"timed out after {timeout}s waiting for {what}")
        time.sleep(step)


class Harness:
    def __init__(self, codex, wakeful, out):
        self.codex = os.path.abspath(codex)
        self.wakeful_bin = os.path.abspath(wakeful)
        self.out = os.path.abspath(out)
        self.home = os.path.join(self.out, "home")
        self.codex_home = os.path.join(self.out, "codexhome")
        self.wakeful_home = os.path.join(self.out, "wk")
        self.proj = os.path.join(self.out, "proj")
        self.req_log = os.path.join(self.out, "requests.jsonl")
        self.socket = os.path.join(self.codex_home, "app-server-control",
                                   "app-server-control.sock")
        self.procs = {}
        self.client = None
        self.results = {}

    # -- environment ----------------------------------------------------------------------
    def env(self):
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("CODEX_", "OPENAI_", "WAKEFUL_", "CLAUDE_"))}
        env.update(HOME=self.home, CODEX_HOME=self.codex_home, FAKE_OPENAI_API_KEY="dummy",
                   WAKEFUL_HOME=self.wakeful_home,
                   # The hooks and the model's shell run `wakeful` from PATH: this build.
                   PATH=os.path.dirname(self.wakeful_bin) + os.pathsep
                   + os.environ.get("PATH", ""))
        return env

    def setup(self):
        if os.path.exists(self.out):
            shutil.rmtree(self.out)
        for d in (self.home, self.codex_home, self.wakeful_home, self.proj):
            os.makedirs(d)
        # Codex runs shell commands in a login shell, whose /etc/profile resets PATH.
        with open(os.path.join(self.home, ".profile"), "w") as f:
            f.write(f"export PATH='{os.path.dirname(self.wakeful_bin)}':\"$PATH\"\n")
        fake = self.spawn("fake", [sys.executable, os.path.join(HERE, "fake_responses.py"),
                                   "--log", self.req_log, "--rules", json.dumps(RULES)],
                          stdout=subprocess.PIPE)
        port = int(fake.stdout.readline())
        self.fake_start = time.time()  # the fake's log times count from about here
        with open(os.path.join(self.codex_home, "config.toml"), "w") as f:
            f.write(f'''model = "gpt-fake"
model_provider = "fake"
approval_policy = "never"
sandbox_mode = "danger-full-access"
check_for_update_on_startup = false

[model_providers.fake]
name = "fake"
base_url = "http://127.0.0.1:{port}/v1"
wire_api = "responses"
env_key = "FAKE_OPENAI_API_KEY"
request_max_retries = 0
stream_max_retries = 0
''')
        version = subprocess.run([self.codex, "--version"], env=self.env(), cwd=self.proj,
                                 capture_output=True, text=True, timeout=60)
        check(version.returncode == 0, f"`codex --version` failed: {version.stderr.strip()}")
        self.results["codex_version"] = version.stdout.strip()
        self.start_app_server()

    def spawn(self, name, argv, stdout=None, extra_env=None, **kw):
        log = open(os.path.join(self.out, f"{name}.log"), "ab")
        p = subprocess.Popen(argv, env=dict(self.env(), **(extra_env or {})), cwd=self.proj, stdin=subprocess.DEVNULL,
                             stdout=stdout or log, stderr=log, start_new_session=True, **kw)
        self.procs[name] = p
        return p

    def stop(self, name):
        p = self.procs.pop(name, None)
        if p is None:
            return
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(p.pid, sig)  # its own process group (start_new_session)
            except ProcessLookupError:
                break
            try:
                p.wait(3)
                break
            except subprocess.TimeoutExpired:
                continue
        if p.stdout:
            p.stdout.close()

    def start_app_server(self):
        self.spawn("app-server", [self.codex, "app-server", "--listen", "unix://"])
        self.client = wait_until(self.try_connect, 60, "the app-server's control socket")
        self.client.initialize("wakeful-e2e")

    def try_connect(self):
        if not os.path.exists(self.socket):
            return None
        try:
            return ControlClient(self.socket, os.path.join(self.out, "control.jsonl"))
        except OSError:
            return None

    def stop_app_server(self):
        if self.client:
            self.client.close()
            self.client = None
        self.stop("app-server")

    def teardown(self):
        self.stop_app_server()
        if os.path.exists(os.path.join(self.wakeful_home, "wakeful.sock")):
            subprocess.run([self.wakeful_bin, "daemon", "stop"], env=self.env(),
                           capture_output=True, timeout=30)
        for name in list(self.procs):
            self.stop(name)

    # -- wakeful --------------------------------------------------------------------------
    def wakeful(self, session, *args, as_json=True):
        argv = [self.wakeful_bin] + (["--json"] if as_json else []) + ["--session", session]
        r = subprocess.run(argv + list(args), env=self.env(), cwd=self.proj,
                           capture_output=True, text=True, timeout=60)
        check(r.returncode == 0, f"wakeful {' '.join(args)}: {r.stderr.strip()}")
        return json.loads(r.stdout) if as_json else r.stdout

    def last_seq(self, session):
        """The seq of the session's last event (`wakeful --json events`: JSON lines)."""
        lines = self.wakeful(session, "--json", "events", as_json=False).splitlines()
        return json.loads(lines[-1])["seq"] if lines else 0

    def route(self, session, thread):
        self.wakeful(session, "wake", "set", "codex", "--thread", thread, "--binary",
                     self.codex, "--codex-home", self.codex_home)

    def monitor(self, session, kind):
        """A monitor printing one line, KIND-LINE-<random>, which its command does not
        contain (the `started` event quotes the command); returns (line, start time)."""
        tag = uuid.uuid4().hex[:8]
        t = time.time()
        self.wakeful(session, "start", "-d", "e2e monitor", "--",
                     f"printf '%s-%s\\n' {kind}-LINE {tag}", as_json=False)
        return f"{kind}-LINE-{tag}", t

    def wake_show(self, session):
        return self.wakeful(session, "wake", "show")

    def settled(self, session):
        """`wake show` once every event of the session is acknowledged, else None."""
        show = self.wake_show(session)
        last = self.last_seq(session)
        ok = show["state"] == "idle" and show["acked_seq"] == last and last > 0
        return show if ok else None

    # -- Codex ----------------------------------------------------------------------------
    def requests(self):
        if not os.path.exists(self.req_log):
            return []
        with open(self.req_log) as f:
            return [json.loads(line) for line in f if line.strip()]

    def turn_requests_with(self, text):
        """Requests that start a turn with TEXT in the newest user message."""
        return [r for r in self.requests() if r["kind"] == "turn" and text in r["user"]]

    def once(self, line):
        """The one request that brought LINE to the model (asserting there is one)."""
        seen = [r for r in self.requests() if line in json.dumps(r["body"])]
        runs = self.turn_requests_with(line)
        check(len(runs) == 1, f"the line started {len(runs)} turns, not 1")
        check(seen[0]["i"] == runs[0]["i"], "the line first reached the model in its turn")
        return runs[0]

    def new_thread(self):
        tid = self.client.request("thread/start", {"cwd": self.proj})["thread"]["id"]
        self.run_turn(tid, "hello")
        return tid

    def run_turn(self, tid, text):
        self.client.request("turn/start", {"threadId": tid,
                                           "input": [{"type": "text", "text": text}]})
        self.client.wait_for(lambda m: m["method"] == "turn/completed"
                             and m["params"]["threadId"] == tid, 60)

    def status(self, tid):
        return self.client.request("thread/read", {"threadId": tid})["thread"]["status"]["type"]

    def exec_thread(self, name, prompt):
        """Starts `codex exec PROMPT`; returns (its Popen, its thread id)."""
        out = os.path.join(self.out, f"{name}.jsonl")
        p = self.spawn(name, [self.codex, "exec", "--json", "--skip-git-repo-check", prompt],
                       stdout=open(out, "wb"))

        def thread_id():
            with open(out) as f:
                for line in f:
                    e = json.loads(line)
                    if e.get("type") == "thread.started":
                        return e["thread_id"]
            return None
        return p, wait_until(thread_id, 60, "`codex exec` to start its thread")

    def user_message_client_ids(self, tid):
        return [m["params"]["item"].get("clientId") for m in self.client.seen
                if m["method"] == "item/started" and m["params"].get("threadId") == tid
                and m["params"]["item"].get("type") == "userMessage"]

    # -- scenarios ------------------------------------------------------------------------
    def scenario_idle(self):
        tid = self.new_thread()
        check(self.status(tid) == "idle", "the thread is idle")
        self.route("e2e-idle", tid)
        line, t0 = self.monitor("e2e-idle", "IDLE")
        wait_until(lambda: self.turn_requests_with(line), 60, "the wake's turn")
        show = wait_until(lambda: self.settled("e2e-idle"), 60, "every event acknowledged")
        req = self.once(line)
        took = req["t"] - self.t_fake(t0)
        check(req["thread"] == tid, "the turn is on the routed thread")
        check(req["user"].startswith("[wakeful wake-"), f"the input is a wake: {req['user']!r}")
        ids = [c for c in self.user_message_client_ids(tid) if c]
        check(any(re.fullmatch(r"wakeful:wake-\d+-\d+:e2e-idle", c) for c in ids),
              f"the user message carries wakeful's clientUserMessageId: {ids}")
        return (f"thread {tid} turn {req['turn']} (request #{req['i']}) has the line "
                f"{took:.2f}s after the monitor started; clientIds {ids}; "
                f"acked_seq {show['acked_seq']}, wakes_delivered {show['wakes_delivered']}")

    def scenario_busy(self):
        tid = self.new_thread()
        self.client.request("turn/start", {"threadId": tid, "input": [
            {"type": "text", "text": "SLOW-TURN: run the slow command"}]})
        self.client.wait_for(lambda m: m["method"] == "item/started"
                             and m["params"].get("threadId") == tid
                             and m["params"]["item"].get("type") == "commandExecution", 60)
        check(self.status(tid) == "active", "the thread is busy")
        busy_turn = self.turn_requests_with("SLOW-TURN")[0]["turn"]
        self.route("e2e-busy", tid)
        line, _ = self.monitor("e2e-busy", "BUSY")
        time.sleep(1)
        during = self.wake_show("e2e-busy")
        check(during["state"] in ("delivering", "queued") and during["acked_seq"] == 0,
              f"not acknowledged while the turn runs: {during}")
        wait_until(lambda: self.turn_requests_with(line), 60, "the wake's turn")
        show = wait_until(lambda: self.settled("e2e-busy"), 60, "every event acknowledged")
        req = self.once(line)
        follow_up = [r for r in self.requests()
                     if r["kind"] == "tool-output" and r["turn"] == busy_turn]
        check(follow_up, "the busy turn finished its tool call")
        check(req["turn"] != busy_turn, "the wake is a turn of its own")
        check(follow_up[0]["i"] < req["i"], "the wake's turn came after the busy turn's end")
        check(all("[wakeful wake-" not in json.dumps(r["body"]) for r in self.requests()
                  if r["turn"] == busy_turn), "the busy turn never saw a wake (not steered)")
        return (f"thread {tid}: busy turn {busy_turn} ended (request #{follow_up[0]['i']}), then "
                f"turn {req['turn']} (request #{req['i']}) has the line; while busy: "
                f"state {during['state']}, acked_seq 0; then acked_seq {show['acked_seq']}")

    def scenario_unloaded(self):
        p, tid = self.exec_thread("exec-done", "EXEC-HELLO")
        check(p.wait(60) == 0, "`codex exec` succeeded")
        self.procs.pop("exec-done", None)
        check(self.status(tid) == "notLoaded", "the thread is not loaded")
        self.route("e2e-unloaded", tid)
        line, _ = self.monitor("e2e-unloaded", "UNLOADED")
        wait_until(lambda: self.turn_requests_with(line), 60, "the wake's turn")
        show = wait_until(lambda: self.settled("e2e-unloaded"), 60, "every event acknowledged")
        req = self.once(line)
        check(req["thread"] == tid, "the turn is on the routed thread")
        after = self.status(tid)
        check(after in ("idle", "active"), f"the thread is loaded now ({after})")
        return (f"thread {tid} (from a finished `codex exec`): notLoaded -> resumed, turn "
                f"{req['turn']} (request #{req['i']}) has the line; status now {after}; "
                f"acked_seq {show['acked_seq']}")

    def scenario_exec(self):
        p, tid = self.exec_thread("exec-running", "EXEC-SLOW: run the slow command")
        wait_until(lambda: self.turn_requests_with("EXEC-SLOW"), 60, "the exec run's turn")
        self.route("e2e-exec", tid)
        line, _ = self.monitor("e2e-exec", "EXEC")
        show = wait_until(lambda: (lambda s: s if s["state"] == "undelivered" else None)(
            self.wake_show("e2e-exec")), 30, "the wake to be refused")
        check("is run by `codex exec`" in show["reason"], f"the reason: {show['reason']}")
        check(p.poll() is None, "refused while the exec run was still running")
        check(p.wait(60) == 0, "`codex exec` succeeded")
        self.procs.pop("exec-running", None)
        time.sleep(1)
        check(not any(line in json.dumps(r["body"]) or "[wakeful wake-" in json.dumps(r["body"])
                      for r in self.requests() if r["thread"] == tid),
              "no wake reached the model on that thread")
        queue = self.client.request("thread/queue/list", {"threadId": tid})["data"]
        check(queue == [], f"nothing was queued: {queue}")
        return (f"thread {tid}: state undelivered while `codex exec` ran; reason: "
                f"{show['reason']}; nothing queued, nothing sent to the model")

    def scenario_fallback(self):
        tid = self.new_thread()
        self.stop_app_server()
        self.route("e2e-fallback", tid)
        line, _ = self.monitor("e2e-fallback", "FALLBACK")
        show = wait_until(lambda: (lambda s: s if s["state"] == "queued" else None)(
            self.wake_show("e2e-fallback")), 60, "the wake to be queued")
        check("codex queue" in show["detail"], f"queued with codex queue: {show['detail']}")
        check(show["acked_seq"] == 0, "not acknowledged")
        queued = f"[wakeful {show['wake_id']}]"
        time.sleep(3)
        check(not any(r["thread"] == tid and "[wakeful wake-" in r["user"]
                      for r in self.requests()), "no turn without the app-server")
        again = self.wake_show("e2e-fallback")
        check(again["state"] == "queued" and again["wake_id"] == show["wake_id"],
              f"still the same queued wake: {again}")
        self.start_app_server()
        wait_until(lambda: self.turn_requests_with(line), 90, "the line's turn")
        done = wait_until(lambda: self.settled("e2e-fallback"), 90, "every event acknowledged")
        runs = [r for r in self.requests() if r["kind"] == "turn" and r["user"].startswith(queued)]
        check(len(runs) == 1, f"the queued wake ran once, not {len(runs)} times")
        check(runs[0]["thread"] == tid, "on the routed thread")
        req = self.once(line)
        return (f"thread {tid}: app-server stopped -> {show['wake_id']} queued with `codex "
                f"queue` (state queued, {again['checks']} checks, no turn); app-server "
                f"started -> wakeful resumed the thread, Codex ran it as turn {runs[0]['turn']} "
                f"(request #{runs[0]['i']}), once; the line in turn {req['turn']} (request "
                f"#{req['i']}); acked_seq {done['acked_seq']}")

    def scenario_hooks(self):
        """Runs last: the hooks it installs are in the config of every later Codex."""
        first = json.loads(subprocess.run(
            [self.wakeful_bin, "--json", "integrate", "codex", "--hooks"], env=self.env(),
            cwd=self.proj, capture_output=True, text=True, timeout=60, check=True).stdout)
        again = json.loads(subprocess.run(
            [self.wakeful_bin, "--json", "integrate", "codex", "--hooks"], env=self.env(),
            cwd=self.proj, capture_output=True, text=True, timeout=60, check=True).stdout)
        check(first["changed"] and not again["changed"], f"installed once: {first} {again}")
        check(first["path"] == os.path.join(self.codex_home, "config.toml"),
              f"in CODEX_HOME: {first['path']}")
        line = f"HOOK-LINE-{HOOK_TAG}"
        out = os.path.join(self.out, "exec-hooks.jsonl")
        p = self.spawn("exec-hooks", [self.codex, "exec", "--json", "--skip-git-repo-check",
                                      "--dangerously-bypass-hook-trust",
                                      "HOOK-TURN: start the monitor"], stdout=open(out, "wb"))
        check(p.wait(90) == 0, "`codex exec` succeeded")
        self.procs.pop("exec-hooks", None)
        with open(out) as f:
            events = [json.loads(x) for x in f if x.strip()]
        tid = next(e["thread_id"] for e in events if e.get("type") == "thread.started")
        turn = self.turn_requests_with("HOOK-TURN")[0]["turn"]
        seen = [r for r in self.requests() if line in json.dumps(r["body"])]
        check(seen, "the line reached the model")
        check(seen[0]["turn"] == turn and seen[0]["thread"] == tid,
              f"in the same turn ({seen[0]['turn']} vs {turn}): before the turn ended")
        check(line in seen[0]["user"] and "[wakeful]" in seen[0]["user"],
              f"as the continuation prompt: {seen[0]['user'][-300:]!r}")
        check(all(line not in r["user"] for r in self.requests() if r["i"] != seen[0]["i"]
                  and r["turn"] != turn), "no other turn got it")
        consumers = self.wakeful(tid, "consumers")
        codex = [c for c in consumers if c["consumer"] == "codex"]
        check(codex and codex[0]["acked_seq"] > 0, f"the hook acknowledged: {consumers}")
        # SessionStart: a run in a session with a running monitor starts with the digest
        # (WAKEFUL_SESSION names the session before the thread exists; the monitor's
        # `started` alone does not wake, so no Stop hook keeps that turn going).
        self.wakeful("e2e-hooks-digest", "start", "-d", "e2e long monitor", "--", "sleep 60",
                     as_json=False)
        p = self.spawn("exec-digest", [self.codex, "exec", "--json", "--skip-git-repo-check",
                                       "--dangerously-bypass-hook-trust", "DIGEST-TURN"],
                       stdout=open(os.path.join(self.out, "exec-digest.jsonl"), "wb"),
                       extra_env={"WAKEFUL_SESSION": "e2e-hooks-digest"})
        check(p.wait(90) == 0, "the second `codex exec` succeeded")
        self.procs.pop("exec-digest", None)
        after = self.turn_requests_with("DIGEST-TURN")
        check(len(after) == 1, f"one request in that turn: {len(after)}")
        digest = [i for i in after[0]["body"]["input"] if i.get("type") == "message"
                  and "e2e long monitor" in json.dumps(i)]
        check(digest and "Background monitors of this session" in json.dumps(digest[0]),
              "the SessionStart digest names the running monitor")
        return (f"thread {tid} (`codex exec`): the line reached the model in turn {turn} "
                f"(request #{seen[0]['i']}, the Stop hook's continuation), once; consumer "
                f"codex acked_seq {codex[0]['acked_seq']}; a new run got the digest as a {digest[0].get('role')} message")

    def t_fake(self, t):
        """A wall-clock time on the fake's clock (seconds since it started)."""
        return t - self.fake_start

    def run(self, names):
        self.setup()
        ok = True
        for name in names:
            started = time.time()
            try:
                detail = getattr(self, f"scenario_{name}")()
                result = {"pass": True, "detail": detail}
            except (Failed, TimeoutError, RuntimeError, OSError, EOFError, ValueError,
                    KeyError, IndexError, subprocess.SubprocessError) as e:
                result = {"pass": False, "detail": f"{type(e).__name__}: {e}"}
                ok = False
            result["seconds"] = round(time.time() - started, 1)
            self.results[name] = result
            print(f"{'PASS' if result['pass'] else 'FAIL'} {name} ({result['seconds']}s): "
                  f"{result['detail']}", flush=True)
            if not result["pass"] and self.client is None:
                break
        return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--codex", required=True, help="the codex executable")
    ap.add_argument("--wakeful", required=True, help="the wakeful executable")
    ap.add_argument("--out", required=True, help="work folder (emptied)")
    ap.add_argument("--only", action="append", choices=SCENARIOS, help="run only these")
    a = ap.parse_args()
    h = Harness(a.codex, a.wakeful, a.out)
    started = time.time()
    try:
        ok = h.run(a.only or SCENARIOS)
    except (Failed, TimeoutError, RuntimeError, OSError, EOFError, ValueError, KeyError,
            subprocess.SubprocessError) as e:
        print(f"FAIL setup: {type(e).__name__}: {e}", flush=True)
        h.results["setup"] = {"pass": False, "detail": str(e)}
        ok = False
    finally:
        h.teardown()
    h.results["seconds"] = round(time.time() - started, 1)
    with open(os.path.join(h.out, "results.json"), "w") as f:
        json.dump(h.results, f, indent=2)
    print(f"{h.results.get('codex_version', 'codex ?')}: "
          f"{'all scenarios passed' if ok else 'FAILED'} in {h.results['seconds']}s "
          f"(logs in {h.out})", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
