#!/usr/bin/env python3
"""wakeful's ACP end-to-end test: real ACP parts from npm, offline.

    client.mjs (the ACP TypeScript SDK as the editor)
      └─stdio─> wakeful acp-proxy --wake-on match:LINE -- AGENT
                  └─stdio─> codex-acp  ──HTTP──> tests/e2e/codex/fake_responses.py
                  └─stdio─> claude-agent-acp ─> claude ──HTTP──> tests/e2e/claude-code/fake_anthropic.py

Usage: run.py --npm DIR [--claude BIN] --wakeful BIN --out DIR [--only AGENT ...]

--npm is the npm prefix holding @agentclientprotocol/sdk, @zed-industries/codex-acp and
@zed-industries/claude-agent-acp (versions pinned in .ci/run); --claude the Claude Code
executable claude-agent-acp runs (CLAUDE_CODE_EXECUTABLE; without it the scenario is
skipped). Each scenario starts a fake model, a wakeful daemon in its own WAKEFUL_HOME and
the client, which checks (see client.mjs): the user's prompt makes the agent start a
monitor from its shell tool (it lands in the proxy's session); an idle session gets a new
turn within 2 s of a monitor's line, with the line, shown to the editor; a line and a user
prompt at the same moment each reach the model once, as separate turns; the proxy exits 0
when the editor closes stdin. Then no process of the agent is left. Prints
`PASS <agent> (<s>s): wake latency N ms` per scenario, exits 0 when all passed.
Standard library only.
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
E2E = os.path.dirname(HERE)


def survivors(proxy_marker):
    """Processes whose environment holds WAKEFUL_ACP_PROXY=<pid> (the agent's)."""
    found = []
    needle = f"WAKEFUL_ACP_PROXY={proxy_marker}".encode()
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = f.read().split(b"\0")
                # A monitor's command inherits the environment of the
                # `wakeful start` that made it; the daemon owns it.
                if needle in env and not any(e.startswith(b"WAKEFUL_MONITOR_ID=") for e in env):
                    found.append(int(pid))
        except OSError:
            pass
    return found


class Scenario:
    def __init__(self, name, args):
        self.name, self.args = name, args
        self.out = os.path.join(args.out, name)
        shutil.rmtree(self.out, ignore_errors=True)
        self.home, self.wk, self.proj = (os.path.join(self.out, d) for d in ("home", "wk", "proj"))
        for d in (self.home, self.wk, self.proj):
            os.makedirs(d)
        self.fifo = os.path.join(self.proj, "mon.fifo")
        os.mkfifo(self.fifo)
        self.log = os.path.join(self.out, "requests.jsonl")
        self.procs = []
        # The monitor the agent's shell starts: it reads the FIFO (opened read-write, so
        # it never sees an end of file) and prints each line written to it.
        self.monitor = f"{args.wakeful} start --description acp-e2e -- 'cat 0<>{self.fifo}'"
        self.env = dict(os.environ, HOME=self.home, WAKEFUL_HOME=self.wk)
        self.env.pop("WAKEFUL_SESSION", None)

    def spawn_fake(self, argv):
        err = open(os.path.join(self.out, "fake.log"), "ab")
        p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err, env=self.env,
                             start_new_session=True)
        self.procs.append(p)
        return int(p.stdout.readline())

    def setup_codex(self):
        rules = [{"match": "START-MONITOR", "shell": self.monitor}]
        port = self.spawn_fake([sys.executable, os.path.join(E2E, "codex", "fake_responses.py"),
                                "--log", self.log, "--rules", json.dumps(rules)])
        codex_home = os.path.join(self.out, "codexhome")
        os.makedirs(codex_home)
        with open(os.path.join(codex_home, "config.toml"), "w") as f:
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
        self.env.update(CODEX_HOME=codex_home, FAKE_OPENAI_API_KEY="dummy")
        return [os.path.join(self.args.npm, "node_modules", ".bin", "codex-acp")]

    def setup_claude(self):
        script = [{"when": "START-MONITOR", "tool": "Bash",
                   "input": {"command": self.monitor, "description": "start the monitor"}}]
        port = self.spawn_fake([sys.executable, os.path.join(E2E, "claude-code", "fake_anthropic.py"),
                                "--log", self.log, "--script", json.dumps(script)])
        self.env.update(ANTHROPIC_BASE_URL=f"http://127.0.0.1:{port}",
                        ANTHROPIC_API_KEY="sk-ant-dummy",
                        CLAUDE_CODE_EXECUTABLE=self.args.claude,
                        CLAUDE_CONFIG_DIR=os.path.join(self.home, ".claude"),
                        DISABLE_AUTOUPDATER="1", CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
                        # claude-agent-acp passes --allow-dangerously-skip-permissions, which
                        # Claude Code refuses as root (CI containers) unless told it is sandboxed.
                        IS_SANDBOX="1")
        os.makedirs(os.path.join(self.home, ".claude"))
        # Every tool allowed without asking: the client answers permission requests too.
        with open(os.path.join(self.home, ".claude", "settings.json"), "w") as f:
            json.dump({"permissions": {"allow": ["Bash"]}}, f)
        return [os.path.join(self.args.npm, "node_modules", ".bin", "claude-agent-acp")]

    def run(self):
        agent = self.setup_codex() if self.name == "codex-acp" else self.setup_claude()
        w = self.args.wakeful
        subprocess.run([w, "status"], env=self.env, check=True, capture_output=True, timeout=30)
        started = time.time()
        client = subprocess.run(
            ["node", os.path.join(HERE, "client.mjs"), "--sdk", self.args.npm,
             "--fake-log", self.log, "--fifo", self.fifo, "--cwd", self.proj, "--",
             w, "acp-proxy", "--wake-on", "match:LINE", "--", *agent],
            env=self.env, cwd=self.proj, capture_output=True, text=True, timeout=240)
        with open(os.path.join(self.out, "client.log"), "w") as f:
            f.write(client.stderr)
        lines = client.stdout.strip().splitlines()
        result = json.loads(lines[-1]) if lines else {"ok": False}
        result["seconds"] = round(time.time() - started, 1)
        mons = json.loads(subprocess.run([w, "list", "--all-sessions", "--json"], env=self.env,
                                         capture_output=True, text=True, timeout=30).stdout)
        sessions = sorted({m["session"] for m in mons})
        result["wakeful_sessions"] = sessions
        routes = [subprocess.run([w, "wake", "show", "--session", s, "--json"], env=self.env,
                                 capture_output=True, text=True, timeout=30).stdout for s in sessions]
        result["routes"] = routes
        problems = [c["what"] for c in result.get("checks", []) if not c["ok"]]
        if client.returncode != 0 and not problems:
            problems.append(f"client exited {client.returncode}: {client.stderr[-2000:]}")
        if not (len(sessions) == 1 and sessions[0].startswith("acp-")):
            problems.append(f"the monitor is not in the proxy's acp-… session: {sessions}")
        if any('"adapter"' in r for r in routes):
            problems.append(f"the session got a wake route of its own: {routes}")
        left = survivors(result.get("proxy_pid", "none"))
        if left:
            problems.append(f"processes of the agent survived: {left}")
        result["problems"] = problems
        with open(os.path.join(self.out, "result.json"), "w") as f:
            json.dump(result, f, indent=1)
        return result

    def stop(self):
        subprocess.run([self.args.wakeful, "daemon", "stop"], env=self.env, capture_output=True,
                       timeout=30)
        for p in self.procs:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except OSError:
                pass
            p.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--npm", required=True)
    ap.add_argument("--claude")
    ap.add_argument("--wakeful", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", action="append")
    args = ap.parse_args()
    args.wakeful = os.path.abspath(args.wakeful)
    args.npm = os.path.abspath(args.npm)
    os.makedirs(args.out, exist_ok=True)
    names = args.only or ["codex-acp", "claude-agent-acp"]
    failed = 0
    for name in names:
        if name == "claude-agent-acp" and not args.claude:
            print(f"SKIP {name}: no --claude")
            continue
        s = Scenario(name, args)
        try:
            r = s.run()
        finally:
            s.stop()
        agent = r.get("agent") or {}
        if r.get("ok") and not r["problems"]:
            print(f"PASS {name} ({r['seconds']}s): {agent.get('name')} {agent.get('version')}, "
                  f"wake latency {r['wake_latency_ms']} ms (line -> the agent's request at the fake "
                  f"model), proxy exit {r['exit_ms']} ms after stdin closed", flush=True)
        else:
            failed += 1
            print(f"FAIL {name}: {r['problems']} (logs in {s.out})", flush=True)
    print("acp e2e: all scenarios passed" if not failed else f"acp e2e: {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
