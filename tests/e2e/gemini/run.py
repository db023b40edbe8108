#!/usr/bin/env python3
"""Gemini CLI end to end, offline: wakeful's Gemini hooks in the real Gemini CLI.

Runs the real `gemini` (non-interactive, `-p`) against fake_gemini.py with the hooks that
`wakeful integrate gemini` installs, and checks, from what reached the model (the fake's
request log) and from the daemon (`wakeful consumers`):

  after-tool   a turn runs `wakeful start` in Gemini's shell; the monitor's line arrives
               while the tool call runs, and the AfterTool hook appends it to that tool's
               result (in <hook_context>), once; the monitors are in the Gemini session.
  digest       the same session resumed (`--resume <id>`): the SessionStart hook's digest,
               naming the monitor still running, is prepended to the prompt.
  after-agent  in that turn a `--wake-on fail` monitor ends well: nothing of it wakes, so
               AfterTool leaves it; at the end of the turn the AfterAgent hook hands it
               over (decision "deny"), Gemini sends it as a new prompt, once, and stops
               (stop_hook_active on the next AfterAgent).

Usage: run.py --gemini PATH --wakeful PATH --out DIR
Prints PASS/FAIL per scenario and exits 0 when all passed. Standard library only.
"""
import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
LIMIT_S = 90


class Failed(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Failed(what)


class Harness:
    def __init__(self, args):
        self.gemini = os.path.abspath(args.gemini)
        self.wakeful = os.path.abspath(args.wakeful)
        self.out = os.path.abspath(args.out)
        shutil.rmtree(self.out, ignore_errors=True)
        for d in ("home/.gemini", "wk", "proj", "bin"):
            os.makedirs(os.path.join(self.out, d))
        self.home = os.path.join(self.out, "home")
        self.wk = os.path.join(self.out, "wk")
        self.proj = os.path.join(self.out, "proj")
        self.log = os.path.join(self.out, "requests.jsonl")
        os.symlink(self.wakeful, os.path.join(self.out, "bin", "wakeful"))
        self.fake = None
        self.runs = 0

    # ---------------------------------------------------------------- setup

    def env(self):
        node = shutil.which("node")
        path = [os.path.join(self.out, "bin")]
        if node:
            path.append(os.path.dirname(node))
        path += ["/usr/local/bin", "/usr/bin", "/bin"]
        return {
            "PATH": ":".join(path),
            "HOME": self.home,
            "TERM": "xterm-256color",
            "LANG": "C.UTF-8",
            "WAKEFUL_HOME": self.wk,
            "GEMINI_CLI_TRUST_WORKSPACE": "true",
            "GOOGLE_GEMINI_BASE_URL": f"http://127.0.0.1:{self.port}",
            "GEMINI_API_KEY": "fake-key",
        }

    def wk_cmd(self, *args):
        env = dict(self.env(), WAKEFUL_HOME=self.wk)
        r = subprocess.run([self.wakeful, *args], env=env, capture_output=True, text=True,
                           timeout=30)
        if r.returncode != 0:
            raise Failed(f"wakeful {' '.join(args)} exited {r.returncode}: {r.stderr.strip()}")
        return r.stdout

    def start_fake(self, rules):
        self.fake = subprocess.Popen(
            [sys.executable, os.path.join(HERE, "fake_gemini.py"), "--log", self.log,
             "--rules", json.dumps(rules)],
            stdout=subprocess.PIPE, stderr=open(os.path.join(self.out, "fake.log"), "w"),
            text=True)
        self.port = int(self.fake.stdout.readline())

    def install_hooks(self):
        # Gemini's own settings: the fake as a Gemini API endpoint, nothing sent elsewhere.
        settings = os.path.join(self.home, ".gemini", "settings.json")
        with open(settings, "w") as f:
            json.dump({"security": {"auth": {"selectedType": "gemini-api-key"}},
                       "privacy": {"usageStatisticsEnabled": False},
                       "general": {"enableAutoUpdate": False}}, f, indent=2)
        out = json.loads(self.wk_cmd("integrate", "gemini", "--json"))
        check(out["path"] == settings and out["changed"], f"integrate gemini: {out}")
        again = json.loads(self.wk_cmd("integrate", "gemini", "--json"))
        check(not again["changed"], f"integrate gemini twice changed it: {again}")
        return out

    # ---------------------------------------------------------------- runs

    def gemini_p(self, prompt, *extra):
        self.runs += 1
        n = self.runs
        with open(os.path.join(self.out, f"gemini-{n}.out"), "w") as so, \
                open(os.path.join(self.out, f"gemini-{n}.err"), "w") as se:
            p = subprocess.Popen(
                [self.gemini, "--yolo", "--output-format", "json", *extra, "-p", prompt],
                cwd=self.proj, env=self.env(), stdout=so, stderr=se,
                stdin=subprocess.DEVNULL, start_new_session=True)
            try:
                code = p.wait(timeout=LIMIT_S)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
                raise Failed(f"gemini run {n} took more than {LIMIT_S}s")
        text = open(os.path.join(self.out, f"gemini-{n}.out")).read()
        check(code == 0, f"gemini run {n} exited {code}: "
                         f"{open(os.path.join(self.out, f'gemini-{n}.err')).read()[-500:]}")
        return json.loads(text)

    def requests(self):
        if not os.path.exists(self.log):
            return []
        return [json.loads(line) for line in open(self.log)]

    def consumer(self, session):
        rows = json.loads(self.wk_cmd("--session", session, "consumers", "--json"))
        return {r["consumer"]: r for r in rows}

    def events(self, session):
        return [json.loads(line) for line in
                self.wk_cmd("--session", session, "events", "--json").splitlines() if line]

    def stop(self):
        try:
            self.wk_cmd("daemon", "stop")
        except Exception:
            pass
        if self.fake:
            self.fake.terminate()
            self.fake.wait()


def turns(reqs, first):
    return [r for r in reqs[first:] if r["kind"] in ("turn", "tool-output")]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gemini", required=True)
    ap.add_argument("--wakeful", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    h = Harness(args)
    a, b, c, d = (random.randint(100, 999) for _ in range(4))
    tool_line = f"TOOL-LINE-{a}{b}"
    end_line = f"END-LINE-{c}{d}"
    # The monitors print their line in two pieces (`printf 'X-%s%s\n' A B`), so the
    # commands (quoted in the `started` events and the tool calls) never contain it.
    # Gemini's shell tool refuses command substitution ($(…)), hence the pipes.
    wait_stopped = ("until wakeful events --json | grep -c '\"kind\":\"stopped\"' "
                    "| grep -qx {n}; do sleep 0.05; done")
    rules = [
        {"match": "start the tool monitor",
         "shell": "wakeful start -d dev-server -- sleep 600 >/dev/null && "
                  f"wakeful start -d e2e -- \"printf 'TOOL-LINE-%s%s\\n' {a} {b}\" >/dev/null && "
                  + wait_stopped.format(n=1)},
        {"match": "start the quiet monitor",
         "shell": "wakeful start --wake-on fail -d quiet -- "
                  f"\"printf 'END-LINE-%s%s\\n' {c} {d}\" >/dev/null 2>&1 && "
                  + wait_stopped.format(n=2)},
    ]
    started = time.time()
    results = []
    version = "?"
    try:
        h.start_fake(rules)
        version = subprocess.run([h.gemini, "--version"], capture_output=True, text=True,
                                 env=h.env(), timeout=60).stdout.strip()
        h.install_hooks()

        # after-tool
        t0 = time.time()
        first = len(h.requests())
        out = h.gemini_p("please start the tool monitor")
        session = out.get("session_id")
        check(session, f"no session_id in gemini's output: {out}")
        reqs = h.requests()
        mine = turns(reqs, first)
        carrying = [r for r in mine if tool_line in r["user"]]
        check(len(carrying) == 1, f"{tool_line} is in {len(carrying)} newest contents, not 1")
        r = carrying[0]
        check(r["kind"] == "tool-output" and "<hook_context>[wakeful] " in r["user"],
              f"{tool_line} did not come appended to a tool result: {r['user'][-300:]}")
        ev = h.events(session)
        check(any(e["kind"] == "lines" and tool_line in e["text"] for e in ev),
              f"the monitor's events are not in the Gemini session {session}")
        c = h.consumer(session).get("gemini")
        check(c and c["acked_seq"] == ev[-1]["seq"],
              f"consumer gemini did not acknowledge every event: {c}")
        results.append(("after-tool", time.time() - t0,
                        f"session {session}: {tool_line} appended to the run_shell_command "
                        f"result (request #{r['i']}), once; consumer gemini acked_seq "
                        f"{c['acked_seq']} of {ev[-1]['seq']}"))

        # digest + after-agent, in the resumed session
        t0 = time.time()
        first = len(h.requests())
        out = h.gemini_p("please start the quiet monitor", "--resume", session)
        check(out.get("session_id") == session, f"resumed another session: {out}")
        mine = turns(h.requests(), first)
        check(mine and mine[0]["kind"] == "turn", "no turn request in the resumed run")
        prompt = mine[0]["user"]
        digest = f"<hook_context>[wakeful] Background monitors of this session ({session}): 1 active"
        check(digest in prompt and "dev-server" in prompt,
              f"the resume digest is not in the first prompt: {prompt[-600:]}")
        results.append(("digest", time.time() - t0,
                        f"request #{mine[0]['i']}'s prompt starts with the digest: "
                        + prompt[prompt.index(digest):].split("\n")[0][:110] + "…"))
        tool_out = [r for r in mine if r["kind"] == "tool-output"]
        check(tool_out and all(end_line not in r["user"] for r in tool_out),
              "the quiet monitor's line came with the tool result (it does not wake)")
        carrying = [r for r in mine if end_line in r["user"]]
        check(len(carrying) == 1, f"{end_line} is in {len(carrying)} newest contents, not 1")
        r = carrying[0]
        check(r["kind"] == "turn" and r["user"].startswith("[wakeful] "),
              f"{end_line} did not come as a new prompt: {r['user'][:300]}")
        check(r is mine[-1], "Gemini went on after the continuation (stop_hook_active)")
        ev = h.events(session)
        c = h.consumer(session).get("gemini")
        check(c and c["acked_seq"] == ev[-1]["seq"], f"not everything acknowledged: {c}")
        check(out.get("response", "").endswith("ok"), f"final response: {out.get('response')}")
        results.append(("after-agent", time.time() - t0,
                        f"{end_line} not with the tool result (request #{tool_out[-1]['i']}); "
                        f"sent back as a new prompt (request #{r['i']}: "
                        f"{r['user'].splitlines()[0][:60]}…), once, then the run ended; "
                        f"acked_seq {c['acked_seq']}"))
        for name, secs, what in results:
            print(f"PASS {name} ({secs:.1f}s): {what}")
        print(f"gemini {version}: all scenarios passed in {time.time() - started:.1f}s "
              f"(logs in {h.out})")
        return 0
    except (Failed, OSError, ValueError, subprocess.SubprocessError) as e:
        for name, secs, what in results:
            print(f"PASS {name} ({secs:.1f}s): {what}")
        print(f"FAIL: {e}")
        print(f"gemini {version}: logs in {h.out}")
        return 1
    finally:
        h.stop()


if __name__ == "__main__":
    sys.exit(main())
