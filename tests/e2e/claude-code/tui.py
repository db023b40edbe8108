#!/usr/bin/env python3
"""Drive the real, interactive Claude Code offline: its TUI in a detached tmux, pointed at
fake_anthropic.py, with an isolated HOME and the repository's plugin. Standard library only.

    with Tui(claude, out, plugin_dir=..., path_dirs=[...], env={...}, script=[...]) as tui:
        tui.wait_ready()
        tui.type_prompt("start the monitor")
        tui.wait_until(lambda reqs: ..., 30, "the line reached the model")

`out` holds requests.jsonl (what the model got; see fake_anthropic.py), screen-final.txt,
debug.log (claude --debug-file), fake.log, home/ proj/ tmp/. Leaving the block ends the
session, then every process it started that is still there (monitors, hooks, MCP servers).

As a command (what integrations/claude-code/e2e/*.sh use):
    tui.py --claude BIN --plugin-dir DIR --out DIR [--project DIR] [--env NAME=VALUE]...
           [--script JSON] [--prompt TEXT] [--until REGEX] [--wait S] [-- CLAUDE ARGS...]
runs one session: types --prompt once the TUI is up, then runs until the new input of a
request matches --until or --wait seconds (default 20) have passed. Exit 0 when the
model got at least one request and --until (if given) matched.
"""
import json
import os
import shlex
import signal
import subprocess
import time

HERE = os.path.dirname(os.path.abspath(__file__))
KEY = "sk-ant-dummy"


class Failed(Exception):
    """A check of a scenario did not hold."""


def check(cond, what):
    if not cond:
        raise Failed(what)


def texts(content):
    """Every text of a message's content: a string, text blocks, tool_result blocks."""
    if isinstance(content, str):
        return [content]
    out = []
    for block in content or []:
        if isinstance(block, dict):
            if block.get("type") == "text":
                out.append(block.get("text", ""))
            elif block.get("type") == "tool_result":
                out += texts(block.get("content"))
    return out


def start_time(pid):
    """A process's start time (clock ticks since boot), which tells a reused pid apart."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def descendants(root):
    """(pid, start time) of every process below `root`."""
    ps = subprocess.run(["ps", "-e", "-o", "pid=,ppid="], capture_output=True, text=True).stdout
    children = {}
    for line in ps.splitlines():
        pid, ppid = (int(x) for x in line.split())
        children.setdefault(ppid, []).append(pid)
    found, queue = [], [root]
    while queue:
        for child in children.get(queue.pop(), []):
            found.append((child, start_time(child)))
            queue.append(child)
    return found


class Tui:
    def __init__(self, claude, out, plugin_dir, path_dirs=(), env=None, script=(),
                 args=("--permission-mode", "acceptEdits", "--allowedTools", "Bash"),
                 project=None):
        self.claude = os.path.abspath(claude)
        self.out = os.path.abspath(out)
        self.plugin_dir = os.path.abspath(plugin_dir)
        self.path_dirs = [os.path.abspath(d) for d in path_dirs]
        self.env = dict(env or {})
        self.script = list(script)
        self.args = list(args)
        for d in ("home", "proj", "tmp"):
            os.makedirs(os.path.join(self.out, d), exist_ok=True)
        if project:
            os.makedirs(project, exist_ok=True)
        self.home = os.path.join(self.out, "home")
        self.proj = os.path.abspath(project) if project else os.path.join(self.out, "proj")
        self.tmp = os.path.join(self.out, "tmp")
        self.log = os.path.join(self.out, "requests.jsonl")
        # A unix socket path must fit in about 100 bytes: keep it short.
        self.sock = f"/tmp/wk-cc-{os.getpid()}-{id(self) % 10000}.sock"
        self.session = "cc"
        self.fake = None
        self.pane = None
        self.seen = set()
        self.started = time.time()

    # --------------------------------------------------------------- lifecycle
    def __enter__(self):
        open(self.log, "w").close()
        self.fake = subprocess.Popen(
            ["python3", os.path.join(HERE, "fake_anthropic.py"), "--port", "0", "--log", self.log,
             "--script", json.dumps(self.script)],
            stdout=subprocess.PIPE, stderr=open(os.path.join(self.out, "fake.log"), "w"), text=True)
        port = self.fake.stdout.readline().strip()
        check(port.isdigit(), f"the fake model API did not start (see {self.out}/fake.log)")
        self.seed_home()
        self.launch(int(port))
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def seed_home(self):
        """Onboarding done (it would call api.anthropic.com), the project trusted, the key approved."""
        with open(os.path.join(self.home, ".claude.json"), "w", encoding="utf-8") as f:
            json.dump({"hasCompletedOnboarding": True, "theme": "dark",
                       "projects": {self.proj: {"hasTrustDialogAccepted": True}},
                       "customApiKeyResponses": {"approved": [KEY[-20:]], "rejected": []}}, f)

    def launch(self, port):
        env = {"PATH": ":".join(self.path_dirs + ["/usr/local/bin", "/usr/bin", "/bin"]),
               "TERM": "xterm-256color", "LANG": "C.UTF-8", "USER": os.environ.get("USER", "root"),
               "SHELL": "/bin/bash", "HOME": self.home, "TMPDIR": self.tmp,
               "CLAUDE_CODE_TMPDIR": self.tmp, "DISABLE_AUTOUPDATER": "1",
               "GIT_CEILING_DIRECTORIES": self.out, "ANTHROPIC_API_KEY": KEY,
               "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{port}", **self.env}
        argv = [self.claude, "--plugin-dir", self.plugin_dir,
                "--debug-file", os.path.join(self.out, "debug.log"), *self.args]
        launch = os.path.join(self.tmp, "launch.sh")
        with open(launch, "w", encoding="utf-8") as f:
            f.write("#!/bin/bash\n")
            f.write(f"cd {shlex.quote(self.proj)} || exit 1\n")
            f.write("exec env -i " + " ".join(shlex.quote(f"{k}={v}") for k, v in env.items())
                    + " " + " ".join(shlex.quote(a) for a in argv) + "\n")
        os.chmod(launch, 0o755)
        self.tmux("new-session", "-d", "-x", "200", "-y", "50", "-s", self.session, launch)
        self.pane = int(self.tmux("display-message", "-p", "-t", self.session, "#{pane_pid}").strip())
        self.remember()

    def close(self):
        if self.pane is not None:
            self.remember()
            with open(os.path.join(self.out, "screen-final.txt"), "w", encoding="utf-8") as f:
                f.write(self.screen(history=True))
            self.tmux("send-keys", "-t", self.session, "C-c", check_rc=False)
            self.tmux("send-keys", "-t", self.session, "C-c", check_rc=False)
            deadline = time.time() + 5
            while time.time() < deadline and self.alive():
                time.sleep(0.1)
            self.tmux("kill-session", "-t", self.session, check_rc=False)
            self.tmux("kill-server", check_rc=False)
            self.pane = None
        # What Claude Code started (hooks, monitors, MCP servers) may outlive it.
        left = [(p, st) for p, st in self.seen if st is not None and start_time(p) == st]
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for pid, st in left:
                if start_time(pid) == st:
                    try:
                        os.kill(pid, sig)
                    except ProcessLookupError:
                        pass
            deadline = time.time() + 2
            while time.time() < deadline and any(start_time(p) == st for p, st in left):
                time.sleep(0.05)
        if self.fake is not None:
            self.fake.terminate()
            self.fake.wait()
            self.fake = None
        try:
            os.unlink(self.sock)
        except FileNotFoundError:
            pass

    # ------------------------------------------------------------------- tmux
    def tmux(self, *args, check_rc=True):
        env = {k: v for k, v in os.environ.items() if k != "TMUX"}
        run = subprocess.run(["tmux", "-u", "-S", self.sock, *args], capture_output=True,
                             text=True, env=env)
        if check_rc and run.returncode != 0:
            raise Failed(f"tmux {' '.join(args)}: {run.stderr.strip()}")
        return run.stdout

    def alive(self):
        env = {k: v for k, v in os.environ.items() if k != "TMUX"}
        return subprocess.run(["tmux", "-S", self.sock, "has-session", "-t", self.session],
                              capture_output=True, env=env).returncode == 0

    def screen(self, history=False):
        extra = ["-J", "-S", "-"] if history else []
        return self.tmux("capture-pane", "-p", "-t", self.session, *extra, check_rc=False)

    def remember(self):
        if self.pane is not None:
            self.seen.update(descendants(self.pane))
            self.seen.add((self.pane, start_time(self.pane)))

    # ------------------------------------------------------------- the session
    def wait_ready(self, limit=60):
        """Until the input box's prompt shows (at column 0)."""
        deadline = time.time() + limit
        while time.time() < deadline:
            if any(line.startswith("❯") for line in self.screen().splitlines()):
                self.remember()
                return
            check(self.alive(), f"Claude Code exited before its prompt showed (see {self.out})")
            time.sleep(0.2)
        raise Failed(f"no input prompt after {limit} s:\n{self.screen()}")

    def type_prompt(self, text, limit=10):
        """Type `text` into the input box and, once it shows there, press Enter."""
        self.tmux("send-keys", "-t", self.session, "-l", text)
        deadline = time.time() + limit
        while time.time() < deadline and text[-20:] not in self.screen():
            time.sleep(0.05)
        self.tmux("send-keys", "-t", self.session, "Enter")

    def requests(self, main_loop_only=True):
        out = []
        with open(self.log, encoding="utf-8") as f:
            for line in f:
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue  # being written
                if entry["main_loop"] or not main_loop_only:
                    out.append(entry)
        return out

    def wait_until(self, predicate, limit, what):
        """Until `predicate(main-loop requests)` is true (returns its value), or fail."""
        deadline = time.time() + limit
        while True:
            self.remember()
            found = predicate(self.requests())
            if found:
                return found
            if time.time() > deadline:
                raise Failed(f"{what}: not within {limit} s (see {self.out})")
            check(self.alive(), f"{what}: Claude Code exited (see {self.out})")
            time.sleep(0.1)


def main(argv):
    import argparse
    import re
    import sys
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    ap = argparse.ArgumentParser(description="Run one Claude Code TUI session offline.")
    ap.add_argument("--claude", required=True)
    ap.add_argument("--plugin-dir", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--project")
    ap.add_argument("--env", action="append", default=[], metavar="NAME=VALUE")
    ap.add_argument("--script", default="[]")
    ap.add_argument("--prompt")
    ap.add_argument("--until")
    ap.add_argument("--wait", type=float, default=20)
    args = ap.parse_args(argv)
    env = dict(e.split("=", 1) for e in args.env)
    path = [d for d in os.environ.get("PATH", "").split(":") if d]
    tui = Tui(args.claude, args.out, args.plugin_dir, path_dirs=path, env=env,
              script=json.loads(args.script), project=args.project,
              args=extra or ("--permission-mode", "acceptEdits", "--allowedTools", "Bash"))
    matched = False
    try:
        with tui:
            tui.wait_ready()
            if args.prompt:
                tui.type_prompt(args.prompt)
            until = re.compile(args.until) if args.until else None
            try:
                tui.wait_until(lambda reqs: until and any(until.search(r["new"]) for r in reqs),
                               args.wait, "--until")
                matched = True
            except Failed:
                pass
    except Failed as e:
        print(f"tui.py: {e}", file=sys.stderr)
    n = len(tui.requests(main_loop_only=False))
    print(f"tui.py: {n} model request(s); outputs in {tui.out}", file=sys.stderr)
    return 0 if n and (matched or not args.until) else 1


if __name__ == "__main__":
    import sys
    sys.exit(main(sys.argv[1:]))
